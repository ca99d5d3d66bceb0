"""Span to run: pure functions.

``span_ids`` places a span in its run tree: under its parent's run, or where
the span's own ``langsmith.*`` id attributes say (read by :func:`given_ids`,
checked by ``_ids.given_run_ids``), and in its tree's project.
``span_to_run`` builds the run record (runs
on the worker thread): name, run_type, inputs, outputs and the rest come from
``mapping``; every attribute the mapping did not consume, the resource, the
scope, the span kind and the OTel ids go to ``extra.metadata`` so nothing the
user recorded is lost.

    >>> from opentelemetry.sdk.trace import TracerProvider
    >>> span = TracerProvider().get_tracer("t").start_span("answer", attributes={"input.value": "hi"})
    >>> span.end()
    >>> run = span_to_run(span, span_ids(span, None), ConvertOptions())
    >>> (run["name"], run["run_type"], run["inputs"])
    ('answer', 'chain', {'input': 'hi'})
"""

from __future__ import annotations

import hashlib
import logging
import threading
import traceback
from dataclasses import dataclass, field
from typing import Any, Callable, ClassVar, Final, Mapping, Sequence

import orjson
from opentelemetry.trace import SpanKind, StatusCode

from ._fork import on_fork_in_child
from ._ids import (
    ID_ATTRIBUTES,
    LANGSMITH_DOTTED_ORDER,
    LANGSMITH_PARENT_ID,
    LANGSMITH_SESSION_ID,
    LANGSMITH_SESSION_NAME,
    LANGSMITH_SPAN_ID,
    LANGSMITH_TRACE_ID,
    DEFAULT_SCHEME,
    MAX_DEPTH,
    SCHEMES,
    GivenIds,
    GivenIdsError,
    IdScheme,
    RunIds,
    canonical_uuid,
    child_ids,
    continued_ids,
    given_run_ids,
    iso_time,
    root_ids,
    run_id_str,
)
from ._logging import RateLimitedLog
from ._redact import make_redactor
from .mapping import RUN_TYPES, Mapped, SpanEvent, map_span, reads_nothing
from ._settings import Settings

__all__ = [
    "ConvertOptions",
    "RunNode",
    "span_ids",
    "given_ids",
    "warn_if_ids_set_late",
    "span_to_run",
    "patch_fields",
    "closing_patch",
    "early_post_summary",
    "inputs_digest",
    "RUN_TYPES",
    "snapshot_attributes",
    "EndedSpan",
    "log_convert_error",
]


logger = logging.getLogger(__name__)
# A bad value is usually in code that runs for every span: say it once per process, not once a minute.
_once = RateLimitedLog(logger, interval_s=float("inf"))
# A producer's malformed attribute: once a minute per attribute, with how many were held back.
_rl = RateLimitedLog(logger)



def log_convert_error(span: Any, exc: BaseException) -> None:
    """Say that a span could not be converted (the caller counts it as ``convert_error``).

    One line per reason, the exception's type and the function that raised it, at most
    every 30 s with how many were held back: a span in year 10000 logged its whole
    traceback twice per span (the processor converts a post and a patch). The traceback
    goes to DEBUG, as rate-limited. Call it from the ``except`` block.
    """
    frames = traceback.extract_tb(exc.__traceback__)
    reason = f"{type(exc).__name__} in {frames[-1].name}" if frames else type(exc).__name__
    name = str(getattr(span, "name", "?"))[:200]
    _rl.error(
        f"convert_error {reason}",
        "could not convert span %r (%s: %s); dropped, counted as convert_error",
        name, type(exc).__name__, str(exc)[:200],
    )
    if logger.isEnabledFor(logging.DEBUG):
        _rl.log(logging.DEBUG, f"convert_error traceback {reason}", "why span %r could not be converted", name, exc_info=True)


_ID_KEYS = ID_ATTRIBUTES

# Fields of a run that describe its start; an early post carries them, the patch need not.
_START_FIELDS = ("name", "run_type", "start_time", "inputs", "session_name", "session_id")


# The setting's value is looked up once, in ConvertOptions.from_settings; this is its default's row.
_DEFAULT_ID_SCHEME: Final[IdScheme] = SCHEMES[DEFAULT_SCHEME]


@dataclass(frozen=True)
class ConvertOptions:
    """What the converter needs from the settings."""

    session: Mapping[str, str] = field(default_factory=lambda: {"session_name": "default"})
    #: The run-id scheme, a value of ``_ids.SCHEMES``: what :func:`span_ids` and
    #: :meth:`RunNode.resolve` are given on both paths (the worker's, the exporter's,
    #: and the processor's own for the propagator and the SDK bridge).
    id_scheme: IdScheme = _DEFAULT_ID_SCHEME
    redact: Callable[[dict[str, Any]], None] | None = None
    #: The ``prices`` setting's table (``_cost.PriceTable``): a completed model run's cost is written into its
    #: ``usage_metadata`` (``_genai_events.ended_run``). None: no costs written.
    prices: Any = None

    @classmethod
    def from_settings(cls, settings: Settings) -> "ConvertOptions":
        """The options for ``settings``; the one place the ``id_scheme`` setting's name becomes its scheme."""
        return cls(
            session=settings.session,
            id_scheme=SCHEMES[settings.id_scheme],
            redact=make_redactor(settings.hide_inputs, settings.hide_outputs, settings.mask, settings.scrub_secrets),
            prices=settings.prices,
        )


def _given_in(plain: Mapping[str, Any]) -> GivenIds | None:
    """The four ``langsmith.*`` id keys of a plain dict, or None when it has none of them.

    Four lookups: a set's ``isdisjoint`` against the dict takes about twice as long
    (120 against 73 ns), since it walks every key of the span's dict.
    """
    if (LANGSMITH_TRACE_ID in plain or LANGSMITH_SPAN_ID in plain or LANGSMITH_PARENT_ID in plain
            or LANGSMITH_DOTTED_ORDER in plain):
        return GivenIds(
            plain.get(LANGSMITH_TRACE_ID),
            plain.get(LANGSMITH_SPAN_ID),
            plain.get(LANGSMITH_PARENT_ID),
            plain.get(LANGSMITH_DOTTED_ORDER),
        )
    return None


def given_ids(attributes: Mapping[str, Any] | None) -> GivenIds | None:
    """The span's ``langsmith.*`` id attributes, or None when it has none (nearly every span).

    One C-level copy of the attribute dict, then four lookups in it.
    """
    if attributes is None:
        return None
    try:
        # A miss on the SDK's attribute mapping raises and catches KeyError
        # inside it, which costs more than copying the dict and looking there.
        plain = attributes.copy()  # type: ignore[attr-defined]
    except AttributeError:
        plain = attributes
    return _given_in(plain)


def given_ids_at_start(span: Any) -> GivenIds | None:
    """:func:`given_ids` of a live span, as ``on_start`` asks it of every span.

    The public path (``span.attributes``: a read-only view of the SDK's bounded
    mapping, whose length and copy are Python calls) costs ~0.7 µs a span on the
    application thread; the SDK's own dict behind it is read in place, with no
    copy (nothing else writes it during ``on_start``). Read only when it is a plain
    dict (SDK 1.x's ``Span._attributes._dict``); any other shape takes the public path.
    """
    try:
        plain = span._attributes._dict
    except AttributeError:
        plain = None
    if type(plain) is not dict:
        return given_ids(span.attributes)
    return _given_in(plain)


def span_ids(
    span: Any,
    parent: RunIds | None,
    id_scheme: IdScheme = _DEFAULT_ID_SCHEME,
    given: GivenIds | None = None,
    *,
    parent_is_remote: bool = False,
) -> RunIds:
    """Run ids of ``span``; ``parent`` is the parent run's ids when known in this process.

    ``id_scheme`` is the run-id scheme (``ConvertOptions.id_scheme``).
    Without a known parent the span is the root of its run tree (a remote or
    unknown parent is kept in metadata by :func:`span_to_run`). Under a parent
    ``_ids.MAX_DEPTH`` deep it is the root of a new trace, which names that
    parent in metadata (``_ids.continued_ids``): no run is ever deeper than the
    service accepts. ``given`` are the
    span's ``langsmith.*`` id attributes (:func:`given_ids`): when usable they win;
    when not, the computed ids are kept and the first such problem per attribute
    is logged once per process.

    The project goes with the place (one tree, one project): a run under a run
    of ours is in that run's project; a span that starts its tree here (a root,
    a span under a remote run (``parent_is_remote``) or placed by a given
    dotted_order) is in the project its ``langsmith.trace.session_name`` /
    ``session_id`` names, else in the one its remote parent came with, else in
    the exporter's own.
    """
    ctx = span.get_span_context() if hasattr(span, "get_span_context") else span.context
    start = span.start_time or 0
    run_id = run_id_str(id_scheme, ctx.trace_id, ctx.span_id, start)
    if parent is None:
        computed = root_ids(run_id, start)
    elif parent.depth < MAX_DEPTH:
        computed = child_ids(parent, run_id, start)
    else:
        computed = continued_ids(parent, run_id, start)
        _rl.warning(
            "depth_limit",
            "span %r is nested more than %d runs deep: its run starts a new trace, with its parent run in "
            "metadata (depth_limit_parent_run_id, depth_limit_trace_id); counted in stats().depth_limited",
            getattr(span, "name", "?"),
            MAX_DEPTH,
        )
    starts_here = parent is None or parent_is_remote
    ids = computed
    if given is not None:
        try:
            ids = given_run_ids(given, computed)
            if ids is not computed and _present(given.dotted_order):
                starts_here = True  # under a run made elsewhere, whose project we were not told
        except GivenIdsError as exc:
            _once.warning(
                "invalid:" + exc.attribute,
                "ignoring %s on span %r (%s); the run keeps the ids derived from the span. "
                "Further invalid %s values are not reported.",
                exc.attribute,
                getattr(span, "name", "?"),
                exc.reason,
                exc.attribute,
            )
    if starts_here and ids.project is None and ids.project_id is None:
        return _with_project(span, ids)
    return ids  # under a run of ours, or of a remote sender that said its project: inherited


def _present(value: object) -> bool:
    return value is not None and value != ""


def _with_project(span: Any, ids: RunIds) -> RunIds:
    """``ids`` with the project the span names, for a span that starts its tree here (see :func:`span_ids`)."""
    attributes = span.attributes
    if not attributes:
        return ids
    try:
        # As in given_ids: a miss on the SDK's mapping raises and catches KeyError, a copy is cheaper.
        attributes = attributes.copy()
    except AttributeError:
        pass
    name = attributes.get(LANGSMITH_SESSION_NAME)
    if isinstance(name, str) and name:
        return ids._replace(project=name)
    # The name wins when both are given: the service takes exactly one.
    session_id = attributes.get(LANGSMITH_SESSION_ID)
    if session_id is None or session_id == "":
        return ids  # nearly every span
    canonical = canonical_uuid(session_id)
    if canonical is not None:
        return ids._replace(project_id=canonical)
    _once.warning(
        "invalid:langsmith.trace.session_id",
        "ignoring langsmith.trace.session_id %r: not a UUID; the run goes to the configured project. "
        "Further invalid values are not reported.",
        str(session_id)[:80],
    )
    return ids


def warn_if_ids_set_late(span: Any, at_start: GivenIds | None) -> None:
    """Say (once per process) that ``langsmith.*`` ids were set or changed after ``span`` started.

    On the processor path a run's ids are fixed from the attributes the span
    started with: its children may already hold ids extending them, so a later
    value cannot be honoured.
    """
    now = given_ids(span.attributes)
    if now is None or now == at_start:
        return
    before = at_start if at_start is not None else GivenIds()
    changed = [key for key, old, new in zip(_ID_KEYS, before, now) if old != new]
    _once.warning(
        "set_late",
        "%s set on span %r after it started: ignored, the run keeps the ids it started with. "
        "Pass them to start_span(attributes=...). Further cases are not reported.",
        ", ".join(changed),
        getattr(span, "name", "?"),
    )


_AT_START: Final[Any] = object()  # RunNode's default: read the span's id attributes now


class RunNode:
    """A started span's place in its run tree, resolved to :class:`RunIds` on demand.

    The processor's ``on_start`` only links a node to its parent's node (a dict
    lookup) and keeps the span's ``langsmith.*`` id attributes as they are at
    start (:func:`given_ids`), since those may change before the ids are
    computed; the ids are computed later, on the worker thread, parents first
    (or on the app thread by the propagator, for the rare outgoing call). Once
    resolved, a node drops its parent link so chains of ancestors are not kept
    alive by long-lived descendants, and drops its span, which the queue holds
    on its own until the run is converted.
    """

    __slots__ = ("span", "parent", "remote", "given", "ids", "state", "depth", "pending", "ended", "posted")
    # The worker and a propagating app thread may resolve at once. A ClassVar,
    # because a forked child replaces it (_renew_lock), compiled or not.
    _lock: ClassVar[threading.Lock] = threading.Lock()

    # ``state``: where the run's end is. OPEN until its patch is queued (ENDED);
    # MERGED once the operation completing the run is converted (a post carrying the
    # end, so a patch still queued is skipped, or the patch itself);
    # DROPPED when its patch was refused at the queue, or could not be converted (the
    # run is counted lost): an operation of it still queued is then skipped.
    OPEN: Final = 0
    ENDED: Final = 1
    MERGED: Final = 2
    DROPPED: Final = 3

    def __init__(
        self, span: Any, parent: "RunNode | None", remote: RunIds | None = None, given: Any = _AT_START
    ) -> None:
        """``given``: the span's id attributes as they were at its start, when the node is made later
        (a held span's, ``_choice``); read from the span by default."""
        self.span: Any = span
        self.parent = parent
        self.remote = remote
        # Kept after resolve: the end of the span is checked against it (warn_if_ids_set_late).
        self.given: GivenIds | None = given_ids_at_start(span) if given is _AT_START else given
        self.ids: RunIds | None = None
        self.state = RunNode.OPEN
        # How deep its run will be, known before its ids (given ids may place it elsewhere):
        # what the processor's memory of ended runs weighs it by.
        above = parent.depth if parent is not None else remote.depth if remote is not None else 0
        self.depth: int = above + 1 if above < MAX_DEPTH else 1
        # The worker's queue holds nodes, not (operation, span) pairs: ``pending`` is the live span
        # its post converts, set once when the post is queued and let go by the worker once the early
        # post is made (a span that never ends must not stay alive for it); ``ended`` is the span as
        # its end was queued, which the end's operation converts;
        # ``posted`` (the worker's alone) tells a node's first queued operation from its second.
        self.pending: Any = None
        self.ended: Any = None
        self.posted = False

    def resolve(self, id_scheme: IdScheme) -> RunIds:
        """This run's ids, computing them (and any unresolved ancestors') on first use.

        ``id_scheme`` is the run-id scheme (``ConvertOptions.id_scheme``).
        """
        ids = self.ids
        if ids is not None:
            return ids
        with RunNode._lock:
            chain: list[RunNode] = []
            node: RunNode | None = self
            while node is not None and node.ids is None:
                chain.append(node)
                node = node.parent
            above = node.ids if node is not None else None
            for current in reversed(chain):
                remote = above is None and current.remote is not None
                current.ids = above = span_ids(
                    current.span,
                    above if above is not None else current.remote,
                    id_scheme,
                    current.given,
                    parent_is_remote=remote,
                )
                # Resolved: the node is kept (for late children) only for its ids,
                # so it must not keep the span, its parent or the remote ids alive.
                current.span = current.parent = current.remote = None
            return self.ids  # type: ignore[return-value]

    @staticmethod
    def _renew_lock() -> None:
        RunNode._lock = threading.Lock()


on_fork_in_child(RunNode._renew_lock)


def snapshot_attributes(span: Any) -> dict[str, Any]:
    """A plain copy of a span's attributes, safe while the app thread still writes them."""
    attrs = span.attributes
    try:
        # The SDK's attribute mapping copies its dict in one C call (given_ids does the same);
        # dict(attrs) would read it key by key through Python methods, ~10x slower. Copied
        # before asking whether it is empty, which is a Python call on the SDK's mapping.
        plain = attrs.copy()
    except Exception:  # noqa: BLE001 - an older SDK or another mapping (or None): read it key by key
        plain = None
    if type(plain) is dict:
        return plain
    if not attrs:
        return {}
    for _ in range(3):
        try:
            return dict(attrs)
        except (KeyError, RuntimeError):
            # A key went away between listing and reading (the SDK evicts at its limit).
            continue
    return {k: attrs.get(k) for k in list(attrs)}


class EndedSpan:
    """An ended span as conversion reads it, taken at its end on the application thread.

    The SDK's objects for one ended span (the span, the snapshot ``on_end`` gets, their
    bounded attribute mapping, event and link lists with a lock and a deque each) weigh
    ~3.1 KB, measured with tracemalloc, and stay alive while the span waits in the
    queue: under a producer faster than the worker, or in an outage, many thousand
    wait. This keeps what conversion reads (a plain copy of the attributes, the events
    as a tuple, the rest shared; not the links, which no run carries) in one object
    with slots, and the SDK's are freed once the application lets go of the span. Read
    through the same names as a ``ReadableSpan``, so every converter takes either.
    Taking it costs the application thread ~2.7 µs a span (``Worker.end`` says when
    that is paid); the worker then reads slots instead of properties, and the
    collector has a fifth of the objects to walk.
    """

    __slots__ = (
        "name",
        "context",
        "parent",
        "kind",
        "start_time",
        "end_time",
        "status",
        "attributes",
        "events",
        "resource",
        "instrumentation_scope",
    )

    def __init__(self, span: Any) -> None:
        self.name: str = span.name
        self.context: Any = span.context
        self.parent: Any = span.parent
        self.kind: Any = span.kind
        self.start_time: int | None = span.start_time
        self.end_time: int | None = span.end_time
        self.status: Any = span.status
        self.attributes: dict[str, Any] = snapshot_attributes(span)
        self.events: Sequence[Any] = span.events
        self.resource: Any = span.resource
        self.instrumentation_scope: Any = span.instrumentation_scope

    def get_span_context(self) -> Any:
        return self.context


def _error(span: Any, events: list[SpanEvent]) -> tuple[str | None, int | None]:
    """The run's error text, and the index of the exception event it came from (if any).

    An ERROR status takes the last exception event (the one that ended the
    span); without it, an exception event still marks the run as failed.
    """
    status = span.status
    failed = status is not None and status.status_code is StatusCode.ERROR
    indexes = range(len(events) - 1, -1, -1) if failed else range(len(events))
    for index in indexes:
        if events[index].name == "exception":
            return _exception_text(events[index]), index
    if failed:
        return status.description or "error", None
    return None, None


def _exception_text(event: SpanEvent) -> str:
    """``Type: message``, then the stacktrace.

    The first line is what a list of runs shows of an error, so it is the error
    itself, as the service's SDK leads with it (``repr(exc)``, then the
    traceback), even though a Python stacktrace ends with it again. The
    service's SDK records its own error text (a traceback already) as a bare
    ``Exception`` never raised, whose stacktrace is that text again: the text
    alone is the error, as the SDK sends it without OTel.
    """
    attrs = event.attributes
    kind = str(attrs.get("exception.type") or "Exception")
    message = str(attrs.get("exception.message") or "")
    head = message if kind == "Exception" and message else f"{kind}: {message}"
    trace = str(attrs.get("exception.stacktrace") or "").rstrip("\n")
    if not trace or trace == f"{kind}: {message}".rstrip("\n"):
        return head  # no frames (the SDK's error text among them): the stacktrace is only the head again
    return f"{head}\n\n{trace}"


# SpanKind members are singletons that live as long as this module, so their ids are
# stable keys: the lookup skips Enum.__hash__ and the .name property (Python code both).
_KIND_NAMES: dict[int, str] = {id(kind): kind.name for kind in SpanKind}


def _add_otel_metadata(metadata: dict[str, Any], span: Any, ids: RunIds) -> None:
    """Where the span sits in OTel terms: its ids, kind, parent, scope and resource, into ``metadata``."""
    ctx = span.context
    metadata["otel_trace_id"] = "%032x" % ctx.trace_id
    metadata["otel_span_id"] = "%016x" % ctx.span_id
    kind = span.kind
    metadata["otel_span_kind"] = _KIND_NAMES[id(kind)] if isinstance(kind, SpanKind) else str(kind)
    cut = ids.depth_limit_parent
    if cut is not None:
        # Its parent run (ours, remote or the SDK's) was MAX_DEPTH deep: this run starts a new trace
        # and says where it belongs.
        metadata["depth_limit_parent_run_id"], metadata["depth_limit_trace_id"] = cut
    parent = span.parent
    if parent is not None:
        metadata["otel_parent_span_id"] = "%016x" % parent.span_id
        if ids.parent_run_id is None:
            # The parent is remote, never seen or past the depth limit: this run is a root, and says where it hung.
            metadata["otel_parent_trace_id"] = "%032x" % parent.trace_id
            metadata["otel_parent_is_remote"] = bool(parent.is_remote)
    on_root, on_others = _origin_metadata(span.instrumentation_scope, span.resource)
    origin = on_root if ids.parent_run_id is None else on_others
    if origin:
        metadata.update(origin)


# (scope, resource) identities -> (scope, resource, metadata of a root run, of the
# other runs). An app has a handful of tracers and usually one resource, so every
# span of a provider hits. The entry holds the objects themselves so their ids
# cannot be reused while cached.
_origin_cache: dict[tuple[int, int], tuple[Any, Any, dict[str, Any], dict[str, Any]]] = {}
_ORIGIN_CACHE_MAX = 256


def _origin_metadata(scope: Any, resource: Any) -> tuple[dict[str, Any], dict[str, Any]]:
    """The scope and resource entries of a root run's metadata, and of the other runs',
    built once per (scope, resource)."""
    key = (id(scope), id(resource))
    hit = _origin_cache.get(key)
    if hit is not None and hit[0] is scope and hit[1] is resource:
        return hit[2], hit[3]
    on_root: dict[str, Any] = {}
    if scope is not None:
        on_root["otel_scope_name"] = scope.name
        if scope.version:
            on_root["otel_scope_version"] = scope.version
    on_others = dict(on_root)
    if resource is not None and resource.attributes:
        root_form, short_form = _resource_forms(resource)
        on_root.update(root_form)
        on_others.update(short_form)
    if len(_origin_cache) >= _ORIGIN_CACHE_MAX:
        # Tracers made per request would grow this forever; starting over is cheap.
        _origin_cache.clear()
    _origin_cache[key] = (scope, resource, on_root, on_others)
    return on_root, on_others


def _resource_forms(resource: Any) -> tuple[dict[str, Any], dict[str, Any]]:
    """The resource's metadata on a root run, and on the other runs of its trace.

    A trace's runs come from one process, so the whole resource (``otel_resource``,
    often ~200 bytes of SDK and host attributes) is sent on the root only; every
    run carries ``service.name`` and a digest of the whole resource, which names
    the root's resource when runs of several processes share a trace. Called on a
    miss of :func:`_origin_metadata`'s cache only, so not cached itself.

    >>> from opentelemetry.sdk.resources import Resource
    >>> root, other = _resource_forms(Resource({"service.name": "api", "host.name": "h1"}))
    >>> sorted(root), sorted(other)
    (['otel_resource', 'otel_resource_digest'], ['otel_resource_digest', 'otel_service_name'])
    """
    attributes = dict(resource.attributes)
    digest = resource_digest(attributes)
    root_form = {"otel_resource": attributes, "otel_resource_digest": digest}
    short_form = {"otel_resource_digest": digest}
    service = attributes.get("service.name")
    if service is not None:
        short_form["otel_service_name"] = service
    return root_form, short_form


def resource_digest(attributes: Mapping[str, Any]) -> str:
    """A short stable digest of resource attributes: the same in every process and run.

    >>> resource_digest({"service.name": "api"}) == resource_digest({"service.name": "api"})
    True
    """
    canonical = orjson.dumps(attributes, option=orjson.OPT_SORT_KEYS | orjson.OPT_NON_STR_KEYS, default=repr)
    return hashlib.sha256(canonical).hexdigest()[:16]


def _keep_malformed(
    metadata: dict[str, Any], found: list[tuple[str, str]], span: Any, malformed: list[str] | None
) -> None:
    """Keep each unreadable attribute as text in metadata and say so (rate-limited, per attribute)."""
    for key, expected in found:
        value = metadata.get(key)
        if value is not None and not isinstance(value, str):
            metadata[key] = str(value)
        _rl.warning(
            "malformed:" + key,
            "attribute %s on span %r is not %s; kept as text in the run's metadata",
            key,
            getattr(span, "name", "?"),
            expected,
        )
        if malformed is not None:
            malformed.append(key)


# What the conventions make of a span none of them reads (most spans). One
# instance, only ever read here, saves building an empty Mapped per span.
_PLAIN = Mapped()


def span_to_run(
    span: Any,
    ids: RunIds,
    opts: ConvertOptions,
    *,
    mapped: Mapped | None = None,
    as_open: bool = False,
    malformed: list[str] | None = None,
    log_events: Sequence[SpanEvent] = (),
) -> dict[str, Any]:
    """The run record of ``span``: everything known now.

    For a span that has ended this is the complete run (a merged post); for
    one still open it is the early post (no end_time, outputs or events).
    ``as_open`` makes the early post of a span that ended a moment ago: its
    end belongs to its patch, which may yet be refused and counted as lost.

    An attribute a convention could not read (malformed JSON, a wrong type) is
    kept in metadata as text and logged; its name is appended to ``malformed``
    (when given) for the caller to count. The run itself is never lost for it.

    ``log_events`` are the GenAI events the producer wrote as OTel log records
    under this span (``_genai_events`` joins them): read after the span's own
    events, as if the span carried them.
    """
    attributes = snapshot_attributes(span)
    raw_events = span.events
    events = [SpanEvent(e.name, e.attributes or {}, e.timestamp) for e in raw_events] if raw_events else []
    if log_events:
        events.extend(log_events)
    if mapped is None:
        mapped = _PLAIN if not events and reads_nothing(attributes) else map_span(attributes, events)
    ended = span.end_time is not None and not as_open

    run_type = mapped.run_type if mapped.run_type in RUN_TYPES else "chain"
    name = mapped.name or span.name
    if type(name) is not str:  # the SDK stores what it was given (None, 12345): the service takes text only
        name = "" if name is None else str(name)
    run: dict[str, Any] = {
        "id": ids.run_id,
        "trace_id": ids.trace_id,
        "dotted_order": ids.dotted_order,
        "name": name,
        "run_type": run_type,
        "start_time": iso_time(ids.start_time_ns),
    }
    if ids.parent_run_id is not None:
        run["parent_run_id"] = ids.parent_run_id
    # The project was decided with the run's place (span_ids): one tree, one project.
    if mapped.session_name and mapped.session_name != ids.project:
        # The service's SDK in OTel mode names its project on every span, also on those nested under ours.
        _once.warning(
            "session_in_tree",
            "langsmith.trace.session_name %r on span %r is not used: the run is in the project of the tree "
            "it was placed in (%s). Name the project on the span that starts the tree, when it starts. "
            "Further cases are not reported.",
            mapped.session_name[:80],
            span.name,
            ids.project or "the exporter's own",
        )
    if ids.project is not None:
        run["session_name"] = ids.project
    elif ids.project_id is not None:
        run["session_id"] = ids.project_id
    else:
        run.update(opts.session)
    if not ended:
        # The early post: only what is fixed at the start. Whatever the span learns later
        # (messages, model, usage, metadata) is in its patch, which replaces it; a field
        # guessed here could not be taken back where a service merges rather than replaces.
        if mapped.inputs is not None and mapped.inputs_final:
            run["inputs"] = mapped.inputs
            if opts.redact is not None:
                opts.redact(run)
        return run

    if mapped.consumed:
        metadata: dict[str, Any] = {k: v for k, v in attributes.items() if k not in mapped.consumed}
    else:
        metadata = attributes  # our own copy already: most spans have nothing a convention reads
    if mapped.metadata:
        metadata.update(mapped.metadata)
    if mapped.malformed:
        _keep_malformed(metadata, mapped.malformed, span, malformed)
    _add_otel_metadata(metadata, span, ids)
    extra: dict[str, Any] = {"metadata": metadata}
    if mapped.invocation_params:
        extra["invocation_params"] = mapped.invocation_params
    run["extra"] = extra
    if mapped.tags:
        run["tags"] = mapped.tags
    run["inputs"] = mapped.inputs if mapped.inputs is not None else {}

    # The chain never goes back in time: an end before the (clamped) start is raised to it.
    run["end_time"] = iso_time(max(span.end_time, ids.start_time_ns))
    run["outputs"] = mapped.outputs if mapped.outputs is not None else {}
    status = span.status
    if events or (status is not None and status.status_code is StatusCode.ERROR):
        error, error_event = _error(span, events)
        if error:
            run["error"] = error
        run_events = [
            {"name": e.name, "time": iso_time(e.time_ns), "kwargs": dict(e.attributes)}
            for i, e in enumerate(events)
            if i not in mapped.consumed_events and i != error_event  # the error says it already
        ]
    else:
        run_events = []  # no events and no failure: nothing to scan (most spans)
    first_token = mapped.first_token_time_ns
    if first_token is None and mapped.first_token_after_s is not None and span.start_time:
        first_token = span.start_time + int(mapped.first_token_after_s * 1e9)
    if first_token is not None:
        # The service reads time to first token from the first new_token event, as its client records it.
        run_events.insert(0, {"name": "new_token", "time": iso_time(first_token), "kwargs": {}})
    if run_events:
        run["events"] = run_events
    if opts.redact is not None:
        opts.redact(run)
    return run


def inputs_digest(inputs: Any) -> int | None:
    """A digest of inputs as sent, to tell whether a patch must send them again (None: none sent)."""
    if not inputs:
        return None
    try:
        return hash(orjson.dumps(inputs, default=repr, option=orjson.OPT_NON_STR_KEYS | orjson.OPT_SORT_KEYS))
    except (orjson.JSONEncodeError, TypeError):
        return 0  # cannot tell: the patch sends them again (0 is no digest a dump gives in practice)


def early_post_summary(post: Mapping[str, Any]) -> tuple[str, str, int | None]:
    """What :func:`patch_fields` needs to remember of an early post (small, no payloads)."""
    return (post["name"], post["run_type"], inputs_digest(post.get("inputs")))


def closing_patch(
    run_id: str, trace_id: str, dotted_order: str, start_time_ns: int, end_time_ns: int, error: str
) -> dict[str, Any]:
    """The patch that closes a run whose span will never end (its process is ending, or ended).

    What a patch must carry to be placed (spec 4.4: ``trace_id`` and
    ``dotted_order`` in every main part), the end (never before the start)
    and the error saying why.

    >>> closing_patch("r", "t", "d", 2_000_000_000, 1_000_000_000, "gone")["end_time"]
    '1970-01-01T00:00:02.000000+00:00'
    """
    return {
        "id": run_id,
        "trace_id": trace_id,
        "dotted_order": dotted_order,
        "end_time": iso_time(max(end_time_ns, start_time_ns)),
        "error": error,
    }


def patch_fields(full: Mapping[str, Any], early: tuple[str, str, int | None]) -> dict[str, Any]:
    """The patch for a run whose post was sent before it ended: the run as it is now.

    Every field the early post did not fix is sent with its final value
    (``extra``, tags, outputs, events, error, times); a start field only when it
    changed since (a run_type or name decided by a later attribute, inputs
    recorded or replaced after the start), so the stored run does not depend on
    when the post was made.

    >>> full = {"id": "r", "name": "n", "run_type": "llm", "inputs": {"q": 1}, "end_time": "t"}
    >>> patch_fields(full, ("n", "chain", None))
    {'id': 'r', 'end_time': 't', 'run_type': 'llm', 'inputs': {'q': 1}}
    >>> patch_fields(full, ("n", "llm", inputs_digest({"q": 1})))
    {'id': 'r', 'end_time': 't'}
    """
    name, run_type, posted = early
    patch = {k: v for k, v in full.items() if k not in _START_FIELDS}
    if full.get("name") != name:
        patch["name"] = full["name"]
    if full.get("run_type") != run_type:
        patch["run_type"] = full["run_type"]
    inputs = full.get("inputs")
    # (A span cannot lose an attribute, so final inputs are never emptier than posted ones.)
    if inputs and (posted is None or posted == 0 or inputs_digest(inputs) != posted):
        patch["inputs"] = inputs
    return patch
