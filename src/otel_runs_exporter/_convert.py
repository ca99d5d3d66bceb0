"""Span to run: pure functions.

``span_ids`` places a span in its run tree (cheap; runs on the application
thread in ``on_start``). ``span_to_run`` builds the run record (runs on the
worker thread): name, run_type, inputs, outputs and the rest come from
``_semconv``; every attribute the mapping did not consume, the resource, the
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

import threading
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

from opentelemetry.trace import SpanKind, StatusCode

from ._ids import RunIds, child_ids, iso_time, root_ids, run_id_str
from ._redact import make_redactor
from ._semconv import RUN_TYPES, Mapped, SpanEvent, map_span
from ._settings import Settings

__all__ = [
    "ConvertOptions",
    "RunNode",
    "span_ids",
    "span_to_run",
    "patch_fields",
    "early_post_summary",
    "RUN_TYPES",
    "snapshot_attributes",
]


# Fields of a run that describe its start; an early post carries them, the patch need not.
_START_FIELDS = ("name", "run_type", "start_time", "inputs", "session_name", "session_id")


@dataclass(frozen=True)
class ConvertOptions:
    """What the converter needs from the settings."""

    session: Mapping[str, str] = field(default_factory=lambda: {"session_name": "default"})
    id_scheme: str = "v7"
    redact: Callable[[dict[str, Any]], None] | None = None

    @classmethod
    def from_settings(cls, settings: Settings) -> "ConvertOptions":
        return cls(
            session=settings.session,
            id_scheme=settings.id_scheme,
            redact=make_redactor(settings.hide_inputs, settings.hide_outputs, settings.mask, settings.scrub_secrets),
        )


def span_ids(span: Any, parent: RunIds | None, id_scheme: str = "v7") -> RunIds:
    """Run ids of ``span``; ``parent`` is the parent run's ids when known in this process.

    Without a known parent the span is the root of its run tree (a remote or
    unknown parent is kept in metadata by :func:`span_to_run`).
    """
    ctx = span.get_span_context() if hasattr(span, "get_span_context") else span.context
    start = span.start_time or 0
    run_id = run_id_str(id_scheme, ctx.trace_id, ctx.span_id, start)  # type: ignore[arg-type]
    if parent is None:
        return root_ids(run_id, start)
    return child_ids(parent, run_id, start)


class RunNode:
    """A started span's place in its run tree, resolved to :class:`RunIds` on demand.

    The processor's ``on_start`` only links a node to its parent's node (a dict
    lookup); the ids are computed later, on the worker thread, parents first
    (or on the app thread by the propagator, for the rare outgoing call). Once
    resolved, a node drops its parent link so chains of ancestors are not kept
    alive by long-lived descendants, and drops its span, which the queue holds
    on its own until the run is converted.
    """

    __slots__ = ("span", "parent", "remote", "ids", "state")
    _lock = threading.Lock()  # the worker and a propagating app thread may resolve at once

    # ``state``: where the run's end is. OPEN until its patch is queued (ENDED);
    # MERGED once its post was sent carrying the end, so the patch is skipped.
    OPEN, ENDED, MERGED = 0, 1, 2

    def __init__(self, span: Any, parent: "RunNode | None", remote: RunIds | None = None) -> None:
        self.span = span
        self.parent = parent
        self.remote = remote
        self.ids: RunIds | None = None
        self.state = RunNode.OPEN

    def resolve(self, id_scheme: str) -> RunIds:
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
                current.ids = above = span_ids(current.span, above if above is not None else current.remote, id_scheme)
                # Resolved: the node is kept (for late children) only for its ids,
                # so it must not keep the span, its parent or the remote ids alive.
                current.span = current.parent = current.remote = None
            return self.ids  # type: ignore[return-value]


def snapshot_attributes(span: Any) -> dict[str, Any]:
    """A plain copy of a span's attributes, safe while the app thread still writes them."""
    attrs = span.attributes
    if not attrs:
        return {}
    for _ in range(3):
        try:
            return dict(attrs)
        except (KeyError, RuntimeError):
            # A key went away between listing and reading (the SDK evicts at its limit).
            continue
    return {k: attrs.get(k) for k in list(attrs)}


def _error_text(span: Any, events: list[SpanEvent]) -> str | None:
    status = span.status
    if status is None or status.status_code is not StatusCode.ERROR:
        exc = next((e for e in events if e.name == "exception"), None)
        return None if exc is None else _exception_text(exc)
    exc = next((e for e in reversed(events) if e.name == "exception"), None)
    if exc is not None:
        return _exception_text(exc)
    return status.description or "error"


def _exception_text(event: SpanEvent) -> str:
    attrs = event.attributes
    head = f"{attrs.get('exception.type', 'Exception')}: {attrs.get('exception.message', '')}"
    trace = attrs.get("exception.stacktrace")
    return f"{head}\n\n{trace}" if trace else head


def _otel_metadata(span: Any, ids: RunIds) -> dict[str, Any]:
    ctx = span.context
    meta: dict[str, Any] = {
        "otel_trace_id": format(ctx.trace_id, "032x"),
        "otel_span_id": format(ctx.span_id, "016x"),
        "otel_span_kind": span.kind.name if isinstance(span.kind, SpanKind) else str(span.kind),
    }
    parent = span.parent
    if parent is not None:
        meta["otel_parent_span_id"] = format(parent.span_id, "016x")
        if ids.parent_run_id is None:
            # The parent is remote or never seen: this run is a root, and says where it hung.
            meta["otel_parent_trace_id"] = format(parent.trace_id, "032x")
            meta["otel_parent_is_remote"] = bool(parent.is_remote)
    scope = span.instrumentation_scope
    if scope is not None:
        meta["otel_scope_name"] = scope.name
        if scope.version:
            meta["otel_scope_version"] = scope.version
    resource = span.resource
    if resource is not None and resource.attributes:
        meta["otel_resource"] = _resource_dict(resource)
    return meta


_resource_cache: tuple[Any, dict[str, Any]] = (None, {})


def _resource_dict(resource: Any) -> dict[str, Any]:
    """The resource's attributes as a dict, built once per resource (all spans of a provider share one).

    The cache holds the resource itself, so its identity cannot be reused while cached.
    """
    global _resource_cache
    cached_resource, cached = _resource_cache
    if cached_resource is resource:
        return cached
    built = dict(resource.attributes)
    _resource_cache = (resource, built)
    return built


def span_to_run(
    span: Any, ids: RunIds, opts: ConvertOptions, *, mapped: Mapped | None = None, as_open: bool = False
) -> dict[str, Any]:
    """The run record of ``span``: everything known now.

    For a span that has ended this is the complete run (a merged post); for
    one still open it is the early post (no end_time, outputs or events).
    ``as_open`` makes the early post of a span that ended a moment ago: its
    end belongs to its patch, which may yet be refused and counted as lost.
    """
    attributes = snapshot_attributes(span)
    events = [SpanEvent(e.name, e.attributes or {}, e.timestamp) for e in (span.events or ())]
    if mapped is None:
        mapped = map_span(attributes, events)
    ended = span.end_time is not None and not as_open

    metadata: dict[str, Any] = {k: v for k, v in attributes.items() if k not in mapped.consumed}
    metadata.update(mapped.metadata)
    metadata.update(_otel_metadata(span, ids))
    extra: dict[str, Any] = {"metadata": metadata}
    if mapped.invocation_params:
        extra["invocation_params"] = mapped.invocation_params

    run_type = mapped.run_type if mapped.run_type in RUN_TYPES else "chain"
    run: dict[str, Any] = {
        "id": ids.run_id,
        "trace_id": ids.trace_id,
        "dotted_order": ids.dotted_order,
        "name": mapped.name or span.name,
        "run_type": run_type,
        "start_time": iso_time(ids.start_time_ns),
    }
    if ids.parent_run_id is not None:
        run["parent_run_id"] = ids.parent_run_id
    if ids.project is not None:
        run["session_name"] = ids.project  # nested under a run that lives there: one tree, one project
    elif mapped.session_name:
        run["session_name"] = mapped.session_name
    else:
        run.update(opts.session)
    run["extra"] = extra
    if mapped.tags:
        run["tags"] = mapped.tags
    run["inputs"] = mapped.inputs if mapped.inputs is not None else {}
    if not ended:
        if opts.redact is not None:
            opts.redact(run)
        return run

    # The chain never goes back in time: an end before the (clamped) start is raised to it.
    run["end_time"] = iso_time(max(span.end_time, ids.start_time_ns))
    run["outputs"] = mapped.outputs if mapped.outputs is not None else {}
    error = _error_text(span, events)
    if error:
        run["error"] = error
    run_events = [
        {"name": e.name, "time": iso_time(e.time_ns), "kwargs": dict(e.attributes)}
        for i, e in enumerate(events)
        if i not in mapped.consumed_events
    ]
    if mapped.first_token_time_ns is not None:
        # The service reads time to first token from the first new_token event, as its client records it.
        run_events.insert(0, {"name": "new_token", "time": iso_time(mapped.first_token_time_ns), "kwargs": {}})
    if run_events:
        run["events"] = run_events
    if opts.redact is not None:
        opts.redact(run)
    return run


def early_post_summary(post: Mapping[str, Any]) -> tuple[str, str, bool]:
    """What :func:`patch_fields` needs to remember of an early post (small, no payloads)."""
    return (post["name"], post["run_type"], bool(post.get("inputs")))


def patch_fields(full: Mapping[str, Any], early: tuple[str, str, bool]) -> dict[str, Any]:
    """The patch for a run whose post was sent before it ended.

    Start fields the early post already carried are not resent; ones that
    changed since (inputs recorded after the start, a run_type decided by a
    later attribute) are.

    >>> full = {"id": "r", "name": "n", "run_type": "llm", "inputs": {"q": 1}, "end_time": "t"}
    >>> patch_fields(full, ("n", "chain", False))
    {'id': 'r', 'end_time': 't', 'run_type': 'llm', 'inputs': {'q': 1}}
    """
    name, run_type, had_inputs = early
    patch = {k: v for k, v in full.items() if k not in _START_FIELDS}
    if full.get("name") != name:
        patch["name"] = full["name"]
    if full.get("run_type") != run_type:
        patch["run_type"] = full["run_type"]
    if not had_inputs and full.get("inputs"):
        patch["inputs"] = full["inputs"]
    return patch
