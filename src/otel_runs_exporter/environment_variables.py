"""The environment variables this package reads or sets, as named constants.

As in OpenTelemetry's ``opentelemetry.sdk.environment_variables``, code and
docs refer to a variable through one constant, so a name cannot drift between
them, and each constant carries its doc (the docstring under it). The setting
each variable feeds, its default and its parser are declared once, in the
settings tables of ``_settings`` (``_DECLS`` for the exporter,
``_SERVICE_DECLS`` for the local service's command, ``_INSTRUMENTATION_DECLS``
for the instrumentors and ``autoconfig``); docs/settings.md (written from them) and
docs/local-service.md are checked against them by a test, as is that every
constant here is in one of them (or in :data:`WRITTEN`) and has its doc.

Only ``_settings`` reads the environment. Two modules also set variables, which
is their job, and say so where they do: ``autoconfig`` sets OTel's own
:envvar:`OTEL_TRACES_EXPORTER` and :envvar:`OTEL_PYTHON_CONFIGURATOR` for the
SDK's configurator, which reads them itself, and
``testing.local_service_unless_configured`` points
:envvar:`OTEL_EXPORTER_RUNS_ENDPOINT` at the local service it starts.

>>> OTEL_EXPORTER_RUNS_ENDPOINT
'OTEL_EXPORTER_RUNS_ENDPOINT'
"""

from __future__ import annotations

# --- this exporter's variables (setting names in docs/settings.md) --------------------------

OTEL_EXPORTER_RUNS_ENDPOINT = "OTEL_EXPORTER_RUNS_ENDPOINT"
"""
.. envvar:: OTEL_EXPORTER_RUNS_ENDPOINT

Setting ``endpoint``: the service's base address; ``/runs/multipart`` and the other paths are
appended (a self-hosted one may end in ``/api/v1``). Before :envvar:`LANGSMITH_ENDPOINT`.
Default: ``https://api.smith.langchain.com``, or the EU address with :envvar:`OTEL_EXPORTER_RUNS_REGION` ``eu``.
"""

OTEL_EXPORTER_RUNS_CONTROL_PLANE_URL = "OTEL_EXPORTER_RUNS_CONTROL_PLANE_URL"
"""
.. envvar:: OTEL_EXPORTER_RUNS_CONTROL_PLANE_URL

Setting ``control_plane_url``: the deployment control plane's base address (``/v2/...``), for the API client.
Default: ``https://api.host.langchain.com``, or the EU one with :envvar:`OTEL_EXPORTER_RUNS_REGION` ``eu``.
"""

OTEL_EXPORTER_RUNS_REGION = "OTEL_EXPORTER_RUNS_REGION"
"""
.. envvar:: OTEL_EXPORTER_RUNS_REGION

Setting ``region``: ``us`` or ``eu``; picks the default endpoint and control plane when none is given.
Default: ``us``.
"""

OTEL_EXPORTER_RUNS_API_KEY = "OTEL_EXPORTER_RUNS_API_KEY"
"""
.. envvar:: OTEL_EXPORTER_RUNS_API_KEY

Setting ``api_key``: sent as ``x-api-key``; never logged. Before :envvar:`LANGSMITH_API_KEY`.
Default: none (one warning for an endpoint that is not on loopback).
"""

OTEL_EXPORTER_RUNS_BEARER_TOKEN = "OTEL_EXPORTER_RUNS_BEARER_TOKEN"
"""
.. envvar:: OTEL_EXPORTER_RUNS_BEARER_TOKEN

Setting ``bearer_token``: the control plane's ``Authorization: Bearer`` credential; never logged.
Default: none.
"""

OTEL_EXPORTER_RUNS_WORKSPACE_ID = "OTEL_EXPORTER_RUNS_WORKSPACE_ID"
"""
.. envvar:: OTEL_EXPORTER_RUNS_WORKSPACE_ID

Setting ``workspace_id``: sent as ``x-tenant-id``, for a key that spans several workspaces.
Before :envvar:`LANGSMITH_WORKSPACE_ID`. Default: none.
"""

OTEL_EXPORTER_RUNS_PROJECT = "OTEL_EXPORTER_RUNS_PROJECT"
"""
.. envvar:: OTEL_EXPORTER_RUNS_PROJECT

Setting ``project``: the project the runs go to, sent as ``session_name``. Before
:envvar:`LANGSMITH_PROJECT`; ``OTEL_SERVICE_NAME`` does not choose it. Default: ``default``.
"""

OTEL_EXPORTER_RUNS_PROJECT_ID = "OTEL_EXPORTER_RUNS_PROJECT_ID"
"""
.. envvar:: OTEL_EXPORTER_RUNS_PROJECT_ID

Setting ``project_id``: the project by id, sent as ``session_id`` instead of ``session_name``.
Default: none.
"""

OTEL_EXPORTER_RUNS_HEADERS = "OTEL_EXPORTER_RUNS_HEADERS"
"""
.. envvar:: OTEL_EXPORTER_RUNS_HEADERS

Setting ``headers``: extra request headers, ``k=v,k2=v2`` URL-decoded as OTel parses
``OTEL_EXPORTER_OTLP_HEADERS``. Default: none.
"""

OTEL_EXPORTER_RUNS_TIMEOUT = "OTEL_EXPORTER_RUNS_TIMEOUT"
"""
.. envvar:: OTEL_EXPORTER_RUNS_TIMEOUT

Setting ``timeout_s``: seconds allowed for one HTTP request. Default: ``10``.
"""

OTEL_EXPORTER_RUNS_MODE = "OTEL_EXPORTER_RUNS_MODE"
"""
.. envvar:: OTEL_EXPORTER_RUNS_MODE

Setting ``mode``: ``auto`` (multipart, falling back to ``POST``/``PATCH /runs`` on 404/405),
``multipart`` (never fall back) or ``basic`` (``/runs`` only). Default: ``auto``.
"""

OTEL_EXPORTER_RUNS_COMPRESSION = "OTEL_EXPORTER_RUNS_COMPRESSION"
"""
.. envvar:: OTEL_EXPORTER_RUNS_COMPRESSION

Setting ``compression``: ``auto`` (zstd when ``zstandard`` is installed and the service offers it),
``none``, ``gzip`` or ``zstd``. Default: ``auto``.
"""

OTEL_EXPORTER_RUNS_ID_SCHEME = "OTEL_EXPORTER_RUNS_ID_SCHEME"
"""
.. envvar:: OTEL_EXPORTER_RUNS_ID_SCHEME

Setting ``id_scheme``: how a span's run id is made, a name of the table ``_ids.SCHEMES``:
``v7`` (a deterministic UUID v7) or ``otlp`` (the service's OTLP rule, for users mixing both paths).
Default: ``v7``.
"""

OTEL_EXPORTER_RUNS_MAX_SCHEDULE_DELAY = "OTEL_EXPORTER_RUNS_MAX_SCHEDULE_DELAY"
"""
.. envvar:: OTEL_EXPORTER_RUNS_MAX_SCHEDULE_DELAY

Setting ``max_schedule_delay_s``, in milliseconds: the longest the time between flushes grows to
while the service answers 429. Default: ``10000``.
"""

OTEL_EXPORTER_RUNS_EXIT_BUDGET = "OTEL_EXPORTER_RUNS_EXIT_BUDGET"
"""
.. envvar:: OTEL_EXPORTER_RUNS_EXIT_BUDGET

Setting ``exit_budget_s``, in milliseconds like :envvar:`OTEL_BSP_EXPORT_TIMEOUT`: at shutdown, how
long a service that refuses the connection (nothing listening) is retried before what is left is
given up; with a spool it is written there at once instead. A service that answers, however
slowly, still gets the export timeout. Default: ``3000``.
"""

OTEL_EXPORTER_RUNS_MAX_BATCH_BYTES = "OTEL_EXPORTER_RUNS_MAX_BATCH_BYTES"
"""
.. envvar:: OTEL_EXPORTER_RUNS_MAX_BATCH_BYTES

Setting ``max_batch_bytes``: most bytes in one request body, before compression. Default: 20 MiB.
"""

OTEL_EXPORTER_RUNS_MAX_QUEUE_BYTES = "OTEL_EXPORTER_RUNS_MAX_QUEUE_BYTES"
"""
.. envvar:: OTEL_EXPORTER_RUNS_MAX_QUEUE_BYTES

Setting ``max_queue_bytes``: most bytes held for delivery, outages included, and by runs still
open; past it the newest are dropped. Default: 128 MiB.
"""

OTEL_EXPORTER_RUNS_MAX_VALUE_CHARS = "OTEL_EXPORTER_RUNS_MAX_VALUE_CHARS"
"""
.. envvar:: OTEL_EXPORTER_RUNS_MAX_VALUE_CHARS

Setting ``max_value_chars``: longer strings are cut, with a marker; ``0``: no limit. Default: ``1000000``.
"""

OTEL_EXPORTER_RUNS_HOLD_MAX_SPANS = "OTEL_EXPORTER_RUNS_HOLD_MAX_SPANS"
"""
.. envvar:: OTEL_EXPORTER_RUNS_HOLD_MAX_SPANS

Setting ``hold_max_spans``: on the exporter path, most spans held waiting for their ancestors.
Default: ``10000``.
"""

OTEL_EXPORTER_RUNS_HOLD_MAX_SECONDS = "OTEL_EXPORTER_RUNS_HOLD_MAX_SECONDS"
"""
.. envvar:: OTEL_EXPORTER_RUNS_HOLD_MAX_SECONDS

Setting ``hold_max_s``: on the exporter path, the longest a span is held waiting for its ancestors.
Default: ``30``.
"""

OTEL_EXPORTER_RUNS_SPANS = "OTEL_EXPORTER_RUNS_SPANS"
"""
.. envvar:: OTEL_EXPORTER_RUNS_SPANS

Setting ``spans``: ``all`` (every sampled span becomes a run) or ``genai`` (GenAI spans, by their
instrumentation scope or their ``gen_ai.*``, ``llm.*``, ``openinference.span.kind``, ``traceloop.*`` or
``langsmith.*`` attributes, and each trace's root when it has some); a span left out is spliced out of
the tree, never leaving orphans. Default: ``all``.
"""

OTEL_EXPORTER_RUNS_BLOCKED_SCOPES = "OTEL_EXPORTER_RUNS_BLOCKED_SCOPES"
"""
.. envvar:: OTEL_EXPORTER_RUNS_BLOCKED_SCOPES

Setting ``blocked_scopes``: instrumentation scope names, comma-separated, matched as prefixes, whose
spans are left out (spliced out of the tree). Default: none.
"""

OTEL_EXPORTER_RUNS_SAMPLE_RATE = "OTEL_EXPORTER_RUNS_SAMPLE_RATE"
"""
.. envvar:: OTEL_EXPORTER_RUNS_SAMPLE_RATE

Setting ``sample_rate``: the share of ordinary traces sent, 0 to 1, decided from the OTel trace id
(as ``TraceIdRatioBased``, so every process of a distributed trace decides alike). Default: ``1``.
"""

OTEL_EXPORTER_RUNS_KEEP_ERRORS = "OTEL_EXPORTER_RUNS_KEEP_ERRORS"
"""
.. envvar:: OTEL_EXPORTER_RUNS_KEEP_ERRORS

Setting ``keep_errors``: with :envvar:`OTEL_EXPORTER_RUNS_SAMPLE_RATE` below 1, a trace with an errored
run is sent whole, whatever the rate. Default: ``true``.
"""

OTEL_EXPORTER_RUNS_KEEP_SLOWER_THAN = "OTEL_EXPORTER_RUNS_KEEP_SLOWER_THAN"
"""
.. envvar:: OTEL_EXPORTER_RUNS_KEEP_SLOWER_THAN

Setting ``keep_slower_than_s``: seconds; with :envvar:`OTEL_EXPORTER_RUNS_SAMPLE_RATE` below 1, a trace
with a run that took longer is sent whole, whatever the rate. Default: ``0`` (off).
"""

OTEL_EXPORTER_RUNS_SAMPLE_HOLD_MAX_SPANS = "OTEL_EXPORTER_RUNS_SAMPLE_HOLD_MAX_SPANS"
"""
.. envvar:: OTEL_EXPORTER_RUNS_SAMPLE_HOLD_MAX_SPANS

Setting ``sample_hold_max_spans``: most spans of one trace held while it waits for its sampling
decision; past it the trace is decided by the rate alone. Default: ``10000``.
"""

OTEL_EXPORTER_RUNS_SAMPLE_HOLD_MAX_SECONDS = "OTEL_EXPORTER_RUNS_SAMPLE_HOLD_MAX_SECONDS"
"""
.. envvar:: OTEL_EXPORTER_RUNS_SAMPLE_HOLD_MAX_SECONDS

Setting ``sample_hold_max_s``: the longest a trace is held for its sampling decision; past it the
trace is decided by the rate alone. Default: ``600``.
"""

OTEL_EXPORTER_RUNS_SAMPLE_HOLD_MAX_BYTES = "OTEL_EXPORTER_RUNS_SAMPLE_HOLD_MAX_BYTES"
"""
.. envvar:: OTEL_EXPORTER_RUNS_SAMPLE_HOLD_MAX_BYTES

Setting ``sample_hold_max_bytes``: most bytes (estimated) held by all traces waiting for their sampling
decision, counted in :envvar:`OTEL_EXPORTER_RUNS_MAX_QUEUE_BYTES` too; past it the oldest held trace is
decided by the rate alone. Default: 16 MiB.
"""

OTEL_EXPORTER_RUNS_CERTIFICATE = "OTEL_EXPORTER_RUNS_CERTIFICATE"
"""
.. envvar:: OTEL_EXPORTER_RUNS_CERTIFICATE

Setting ``certificate``: a CA bundle (PEM file) to verify the service with; verification is always on.
Default: none (the CA bundle ``requests`` uses).
"""

OTEL_EXPORTER_RUNS_CLIENT_CERTIFICATE = "OTEL_EXPORTER_RUNS_CLIENT_CERTIFICATE"
"""
.. envvar:: OTEL_EXPORTER_RUNS_CLIENT_CERTIFICATE

Setting ``client_certificate``: the client certificate (PEM) for mutual TLS. Default: none.
"""

OTEL_EXPORTER_RUNS_CLIENT_KEY = "OTEL_EXPORTER_RUNS_CLIENT_KEY"
"""
.. envvar:: OTEL_EXPORTER_RUNS_CLIENT_KEY

Setting ``client_key``: the private key (PEM) of :envvar:`OTEL_EXPORTER_RUNS_CLIENT_CERTIFICATE`. Default: none.
"""

OTEL_EXPORTER_RUNS_SPOOL_DIR = "OTEL_EXPORTER_RUNS_SPOOL_DIR"
"""
.. envvar:: OTEL_EXPORTER_RUNS_SPOOL_DIR

Setting ``spool_dir``: the durable spool's directory, for batches not delivered within the export
timeout (replayed later, also by the next process). Default: none (no spool).
"""

OTEL_EXPORTER_RUNS_SPOOL_MAX_BYTES = "OTEL_EXPORTER_RUNS_SPOOL_MAX_BYTES"
"""
.. envvar:: OTEL_EXPORTER_RUNS_SPOOL_MAX_BYTES

Setting ``spool_max_bytes``: most bytes the spool holds; past it the oldest files are dropped.
Default: 512 MiB.
"""

OTEL_EXPORTER_RUNS_SPOOL_WRITE_AHEAD = "OTEL_EXPORTER_RUNS_SPOOL_WRITE_AHEAD"
"""
.. envvar:: OTEL_EXPORTER_RUNS_SPOOL_WRITE_AHEAD

Setting ``spool_write_ahead``: ``true`` writes each batch to the spool before it is sent and removes
it once acknowledged, so a ``kill -9`` with the service up loses only the last moments' runs. Needs
:envvar:`OTEL_EXPORTER_RUNS_SPOOL_DIR`. Default: ``false``.
"""

OTEL_EXPORTER_RUNS_HANDLE_SIGTERM = "OTEL_EXPORTER_RUNS_HANDLE_SIGTERM"
"""
.. envvar:: OTEL_EXPORTER_RUNS_HANDLE_SIGTERM

Setting ``handle_sigterm``: ``true`` makes SIGTERM end the app through its normal exit (queued runs
flushed or spooled; exit status 143). Installed only from the main thread and only while SIGTERM has
its default handler. Default: ``false``.
"""

OTEL_EXPORTER_RUNS_CLOSE_OPEN_RUNS_AT_EXIT = "OTEL_EXPORTER_RUNS_CLOSE_OPEN_RUNS_AT_EXIT"
"""
.. envvar:: OTEL_EXPORTER_RUNS_CLOSE_OPEN_RUNS_AT_EXIT

Setting ``close_open_runs_at_exit``: at a normal exit, runs whose spans never ended are closed with an
error saying so (processor path). Default: ``true``.
"""

OTEL_EXPORTER_RUNS_OPEN_RUNS_MAX = "OTEL_EXPORTER_RUNS_OPEN_RUNS_MAX"
"""
.. envvar:: OTEL_EXPORTER_RUNS_OPEN_RUNS_MAX

Setting ``open_runs_max``: most open runs counted against the queue's byte bound; past it the oldest
stop counting. Default: ``1000``.
"""

OTEL_EXPORTER_RUNS_OPEN_RUN_MAX_AGE = "OTEL_EXPORTER_RUNS_OPEN_RUN_MAX_AGE"
"""
.. envvar:: OTEL_EXPORTER_RUNS_OPEN_RUN_MAX_AGE

Setting ``open_run_max_age_s``, in seconds: an open run older than this stops counting against the
queue's byte bound. Default: ``600``.
"""

OTEL_EXPORTER_RUNS_HIDE_INPUTS = "OTEL_EXPORTER_RUNS_HIDE_INPUTS"
"""
.. envvar:: OTEL_EXPORTER_RUNS_HIDE_INPUTS

Setting ``hide_inputs``: ``true`` sends runs without inputs. Default: ``false``.
"""

OTEL_EXPORTER_RUNS_HIDE_OUTPUTS = "OTEL_EXPORTER_RUNS_HIDE_OUTPUTS"
"""
.. envvar:: OTEL_EXPORTER_RUNS_HIDE_OUTPUTS

Setting ``hide_outputs``: ``true`` sends runs without outputs. Default: ``false``.
"""

OTEL_EXPORTER_RUNS_SCRUB_SECRETS = "OTEL_EXPORTER_RUNS_SCRUB_SECRETS"
"""
.. envvar:: OTEL_EXPORTER_RUNS_SCRUB_SECRETS

Setting ``scrub_secrets``: ``true`` replaces common secret shapes (API keys, bearer tokens, values of
password/secret/token attributes) with ``[REDACTED]``. Default: ``false``.
"""

OTEL_EXPORTER_RUNS_LANGSMITH_BRIDGE = "OTEL_EXPORTER_RUNS_LANGSMITH_BRIDGE"
"""
.. envvar:: OTEL_EXPORTER_RUNS_LANGSMITH_BRIDGE

Setting ``langsmith_bridge``: with the langsmith SDK in the app, OTel spans nest under its current run
and its runs under the current span; off by itself when the SDK sends through OTel. Default: ``true``.
"""

OTEL_EXPORTER_RUNS_CAPTURE_LOG_EVENTS = "OTEL_EXPORTER_RUNS_CAPTURE_LOG_EVENTS"
"""
.. envvar:: OTEL_EXPORTER_RUNS_CAPTURE_LOG_EVENTS

Setting ``capture_log_events``: GenAI events written as OTel log records join their span's run
(``configure()`` and the runs configurator add a log record processor). Default: ``true``.
"""

OTEL_EXPORTER_RUNS_PRICES = "OTEL_EXPORTER_RUNS_PRICES"
"""
.. envvar:: OTEL_EXPORTER_RUNS_PRICES

Setting ``prices``: a price file (JSON: models with ``input`` and ``output`` prices in USD per million tokens,
the shape of the shipped ``prices.json``) whose rows replace or add to the shipped table's. Given one, the
exporter writes each model run's cost into its ``usage_metadata`` (``input_cost``, ``output_cost``,
``total_cost``, the service's own fields), unless the run carries a cost already, so models the hosted
service has no price for get one there too.
Default: none (no costs written).
"""

# --- the local service's, read by ``otel-runs serve`` and ``otel-runs runs`` (docs/local-service.md), never
# by the exporter: settings of the command, not constructor arguments (``_settings._SERVICE_DECLS``) ------

OTEL_RUNS_SERVER_DB = "OTEL_RUNS_SERVER_DB"
"""
.. envvar:: OTEL_RUNS_SERVER_DB

Service setting ``db``: the local service's SQLite database, for ``serve`` and ``runs`` without ``--db``.
Default: ``$XDG_DATA_HOME/otel-runs/runs.db``, else ``~/.local/share/otel-runs/runs.db``.
"""

OTEL_RUNS_SERVER_API_KEY = "OTEL_RUNS_SERVER_API_KEY"
"""
.. envvar:: OTEL_RUNS_SERVER_API_KEY

Service setting ``api_key``: the ``x-api-key`` that ``serve`` requires without ``--api-key`` (a variable
keeps it out of ``ps``); never logged. Default: none (no key required).
"""

XDG_DATA_HOME = "XDG_DATA_HOME"
"""
.. envvar:: XDG_DATA_HOME

Service setting ``data_home``: the XDG base directory for user data, where the default database lives.
Default: ``~/.local/share``.
"""

# --- OpenTelemetry's own variables, with their OTel meaning ---------------------------------------

OTEL_BSP_SCHEDULE_DELAY = "OTEL_BSP_SCHEDULE_DELAY"
"""
.. envvar:: OTEL_BSP_SCHEDULE_DELAY

Setting ``schedule_delay_s``, in milliseconds: the time between flushes. Default: ``200`` (OTel's is 5000;
shorter so runs show quickly).
"""

OTEL_BSP_MAX_QUEUE_SIZE = "OTEL_BSP_MAX_QUEUE_SIZE"
"""
.. envvar:: OTEL_BSP_MAX_QUEUE_SIZE

Setting ``max_queue_size``: most span operations waiting for the worker; past it the newest are dropped.
Default: ``100000``.
"""

OTEL_BSP_MAX_EXPORT_BATCH_SIZE = "OTEL_BSP_MAX_EXPORT_BATCH_SIZE"
"""
.. envvar:: OTEL_BSP_MAX_EXPORT_BATCH_SIZE

Setting ``max_export_batch_size``: most runs in one request. Default: ``512``.
"""

OTEL_BSP_EXPORT_TIMEOUT = "OTEL_BSP_EXPORT_TIMEOUT"
"""
.. envvar:: OTEL_BSP_EXPORT_TIMEOUT

Setting ``export_timeout_s``, in milliseconds: one send with its retries; also bounds shutdown.
Default: ``30000``.
"""

OTEL_SDK_DISABLED = "OTEL_SDK_DISABLED"
"""
.. envvar:: OTEL_SDK_DISABLED

Setting ``disabled``: OTel's switch; ``true`` records and sends nothing, and starts no thread.
Default: ``false``.
"""

OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT = "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"
"""
.. envvar:: OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT

Instrumentation setting ``capture_content``: whether our OpenAI and Anthropic instrumentors record message
content, read when ``instrument()`` runs (``instrument(capture_content=...)`` wins). Off with ``false``,
``0``, ``no``, ``off``, ``no_content`` or ``event_only``. Default: on (the GenAI convention's is off).
"""

OTEL_EXPORTER_RUNS_INSTRUMENT = "OTEL_EXPORTER_RUNS_INSTRUMENT"
"""
.. envvar:: OTEL_EXPORTER_RUNS_INSTRUMENT

Instrumentation setting ``instrument``: ``true`` makes ``configure()`` (and the set-up from the service
SDK's variables) instrument the OpenAI and Anthropic clients that are installed, as
``configure(instrument=True)`` does (the argument wins). Default: ``false``, so an upgrade never starts
sending prompts on its own.
"""

# The service SDK's tracing switch, read by its rules (``utils.tracing_is_enabled``: TRACING_V2, then
# TRACING, each under LANGSMITH_ then LANGCHAIN_, on only when exactly ``true``) into instrumentation
# setting ``langsmith_tracing``: ``traceable`` then sets itself up from the environment.

LANGSMITH_TRACING = "LANGSMITH_TRACING"
"""
.. envvar:: LANGSMITH_TRACING

Instrumentation setting ``langsmith_tracing``: ``true`` (the SDK's spelling) means tracing is on as the
service's SDK reads it; with no SDK tracer provider installed, the first ``traceable`` call sets up a
private one from the environment. Read, never refused: the SDK's variable.
"""

LANGSMITH_TRACING_V2 = "LANGSMITH_TRACING_V2"
"""
.. envvar:: LANGSMITH_TRACING_V2

Instrumentation setting ``langsmith_tracing``: the SDK's other name of :envvar:`LANGSMITH_TRACING`, read first.
"""

LANGCHAIN_TRACING_V2 = "LANGCHAIN_TRACING_V2"
"""
.. envvar:: LANGCHAIN_TRACING_V2

Instrumentation setting ``langsmith_tracing``: the older name of :envvar:`LANGSMITH_TRACING_V2`, read after it.
"""

LANGCHAIN_TRACING = "LANGCHAIN_TRACING"
"""
.. envvar:: LANGCHAIN_TRACING

Instrumentation setting ``langsmith_tracing``: the older name of :envvar:`LANGSMITH_TRACING`, read after it.
"""

OTEL_TRACES_EXPORTER = "OTEL_TRACES_EXPORTER"
"""
.. envvar:: OTEL_TRACES_EXPORTER

Instrumentation setting ``traces_exporter``: the span exporters OTel's configurator is asked for; ``runs``
among them makes the runs configurator install a ``RunsSpanProcessor``. Also set: the runs distro
defaults it to ``runs``, and the runs configurator hides ``runs`` from the SDK's configurator while that
runs (``autoconfig``). Default: none.
"""

OTEL_PYTHON_CONFIGURATOR = "OTEL_PYTHON_CONFIGURATOR"
"""
.. envvar:: OTEL_PYTHON_CONFIGURATOR

Set, never read, by this package: the configurator ``opentelemetry-instrument`` loads. The runs distro
sets it to ``runs`` when :envvar:`OTEL_TRACES_EXPORTER` names ``runs`` and it is unset (``autoconfig``).
"""

# --- the service's own SDK's variables, read as fallbacks after ours ------------------------------

LANGSMITH_ENDPOINT = "LANGSMITH_ENDPOINT"
"""
.. envvar:: LANGSMITH_ENDPOINT

Setting ``endpoint``, after :envvar:`OTEL_EXPORTER_RUNS_ENDPOINT`: the service SDK's own variable.
"""

LANGSMITH_API_KEY = "LANGSMITH_API_KEY"
"""
.. envvar:: LANGSMITH_API_KEY

Setting ``api_key``, after :envvar:`OTEL_EXPORTER_RUNS_API_KEY`: the service SDK's own variable.
"""

LANGSMITH_WORKSPACE_ID = "LANGSMITH_WORKSPACE_ID"
"""
.. envvar:: LANGSMITH_WORKSPACE_ID

Setting ``workspace_id``, after :envvar:`OTEL_EXPORTER_RUNS_WORKSPACE_ID`: the service SDK's own variable.
"""

LANGSMITH_PROJECT = "LANGSMITH_PROJECT"
"""
.. envvar:: LANGSMITH_PROJECT

Setting ``project``, after :envvar:`OTEL_EXPORTER_RUNS_PROJECT`: the service SDK's own variable.
"""

# The SDK's switches for its own OTel mode, read by its rules (it reads each under LANGSMITH_, then
# LANGCHAIN_) into setting ``langsmith_otel_enabled``, which keeps the bridge off while the SDK's
# spans already come through this exporter.

LANGSMITH_OTEL_ENABLED = "LANGSMITH_OTEL_ENABLED"
"""
.. envvar:: LANGSMITH_OTEL_ENABLED

Setting ``langsmith_otel_enabled``: ``true`` or ``1`` means the SDK sends through OTel (unless a tracing
mode says otherwise). Read, never refused: the SDK's variable.
"""

LANGSMITH_OTEL_ONLY = "LANGSMITH_OTEL_ONLY"
"""
.. envvar:: LANGSMITH_OTEL_ONLY

Setting ``langsmith_otel_enabled``: ``true`` or ``1`` means the SDK sends only through OTel (unless a
tracing mode says otherwise).
"""

LANGSMITH_TRACING_MODE = "LANGSMITH_TRACING_MODE"
"""
.. envvar:: LANGSMITH_TRACING_MODE

Setting ``langsmith_otel_enabled``: ``hybrid`` or ``otel`` means the SDK sends through OTel; any mode
wins over the ``OTEL_ENABLED``/``OTEL_ONLY`` switches.
"""

LANGCHAIN_OTEL_ENABLED = "LANGCHAIN_OTEL_ENABLED"
"""
.. envvar:: LANGCHAIN_OTEL_ENABLED

Setting ``langsmith_otel_enabled``: the older name of :envvar:`LANGSMITH_OTEL_ENABLED`, read after it.
"""

LANGCHAIN_OTEL_ONLY = "LANGCHAIN_OTEL_ONLY"
"""
.. envvar:: LANGCHAIN_OTEL_ONLY

Setting ``langsmith_otel_enabled``: the older name of :envvar:`LANGSMITH_OTEL_ONLY`, read after it.
"""

LANGCHAIN_TRACING_MODE = "LANGCHAIN_TRACING_MODE"
"""
.. envvar:: LANGCHAIN_TRACING_MODE

Setting ``langsmith_otel_enabled``: the older name of :envvar:`LANGSMITH_TRACING_MODE`, read after it.
"""

WRITTEN: tuple[str, ...] = (OTEL_TRACES_EXPORTER, OTEL_PYTHON_CONFIGURATOR, OTEL_EXPORTER_RUNS_ENDPOINT)
"""The variables this package sets, each by the one module whose job it is (see the module's doc)."""

ALL: tuple[str, ...] = tuple(
    value for name, value in sorted(globals().items()) if name.isupper() and isinstance(value, str)
)
"""Every variable above, for tests and tooling."""
