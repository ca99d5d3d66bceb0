"""A local implementation of the service's tracing interface: ``otel-runs serve`` and tests.

It accepts what the hosted service accepts (basic tracing, batch and multipart
ingestion), checks every rule of the spec it can (see :mod:`._validate`), stores
runs in SQLite, and can misbehave on purpose (:class:`FaultConfig`, rate limits)
so a client can be tested against failures. Example::

    from otel_runs_exporter.server import LocalService

    with LocalService() as svc:
        exporter = RunsSpanExporter(endpoint=svc.url, api_key="test")
        ...
        runs = svc.wait_for_runs(3)
        assert svc.violations() == []

What stored runs look like as text (what ``otel-runs runs`` prints) is public too:
:func:`render_tree` for one trace, :func:`render_traces` for several,
:func:`render_check` for :meth:`RunStore.check`'s report, :func:`run_status` and
:func:`cost_text` for a run's status and a cost as those lines say them, :func:`canonical_id`
for reading a run or trace id as a user types it (32 hex digits or hyphenated), and :func:`canonical_prefix`
for the start of one (``otel-runs runs tree 0190b3c5``); :func:`short_prefix` is the shortest such start
no other trace id shares.
The service also serves a trace viewer at ``/``; :func:`viewer_link` is its
address for one trace or run.
"""

from ._app import LocalService
from ._faults import FaultConfig
from ._inspect import canonical_prefix, short_prefix
from ._ratelimit import RateRule
from ._render import cost_text, render_check, render_traces, render_tree, run_status
from ._store import RunStore
from ._validate import canonical_id
from ._viewer import viewer_link

__all__ = [
    "LocalService",
    "FaultConfig",
    "RateRule",
    "RunStore",
    "render_tree",
    "render_traces",
    "render_check",
    "run_status",
    "cost_text",
    "canonical_id",
    "canonical_prefix",
    "short_prefix",
    "viewer_link",
]
