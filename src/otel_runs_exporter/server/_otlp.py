"""``POST /otel/v1/traces``: OTLP/HTTP traces from any language, stored as the exporter would store them.

Each span is converted here by the exporter's own code (``_convert``, with the mapping
and the exporter's default settings: no redaction, the default value limit) under the
``otlp`` run-id scheme, so a trace sent over OTLP is stored as the same runs as the same
spans sent through ``RunsSpanExporter(id_scheme="otlp")``: the same ids, parent, trace
id, dotted order, run type, messages, usage and events. The run is encoded as the
exporter encodes it (so values are cut at the same length) and read back, then checked
by the same rules as every ingested run (:mod:`._validate`) and stored.

A span whose parent has not arrived waits in :class:`~._otlp_hold.OtlpHold` (the
service's ``otlp_hold_*`` bounds); :meth:`OtlpIngest.sweep`, run by the service every
second and at shutdown, stores what waited past them as roots.

The answer is OTLP's ``ExportTraceServiceResponse`` in the request's content type, its
``partial_success`` counting the spans rejected and saying why (the first few reasons);
a span stored otherwise than sent (a parent cycle) is named there too, with none rejected.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field

import orjson

from .._convert import ConvertOptions, span_to_run
from .._encode import encode_run
from .._ids import RunIds, run_id_str
from ._ingest import stored_run_ids
from ._modes import Validation, refuses
from ._otlp_decode import JSON, PROTOBUF, Decoded, OtlpSpan, decode
from ._otlp_hold import OTLP_SCHEME, Key, OtlpHold, Placed
from ._reply import Reply
from ._routing import Request, Service
from ._store import RunStore, RunTooLarge
from ._validate import RunOp, Violation, check_run

__all__ = ["OtlpIngest", "Outcome", "MAX_VALUE_CHARS", "otlp_traces"]

logger = logging.getLogger(__name__)

MAX_VALUE_CHARS = 1_000_000
"""The exporter's default ``max_value_chars``: strings longer are cut with a marker, as the exporter cuts them."""
_SHOWN_REASONS = 5
_ROUTE = "/otel/v1/traces"
_LOOKUP_CHUNK = 500  # run ids in one IN (...) of the store's


@dataclass
class Outcome:
    """What one request (or one sweep) stored, and what it rejected or stored otherwise, with why."""

    stored: list[str] = field(default_factory=list)
    rejected: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    def message(self) -> str:
        """The ``partial_success.error_message``: how many spans were rejected, and the first reasons."""
        notes = [*self.rejected, *self.warnings]
        shown = "; ".join(dict.fromkeys(notes[:_SHOWN_REASONS]))
        more = f"; and {len(notes) - _SHOWN_REASONS} more" if len(notes) > _SHOWN_REASONS else ""
        head = f"{len(self.rejected)} span{'s' if len(self.rejected) != 1 else ''} rejected: " if self.rejected else ""
        return head + shown + more


class OtlpIngest:
    """The OTLP route's state: the spans waiting for their parents, and what places, converts and stores spans.

    ``clock`` is monotonic seconds (a seam for the hold's time bound in tests).
    """

    def __init__(self, hold: OtlpHold, clock: Callable[[], float] = time.monotonic) -> None:
        self.hold = hold
        self._clock = clock
        self._options: dict[str | None, ConvertOptions] = {}

    def receive(self, decoded: Decoded, store: RunStore, validation: Validation) -> Outcome:
        """Place, convert and store one request's spans (and any that waited past the bounds meanwhile)."""
        hold = self.hold
        with hold.lock:
            now = self._clock()
            stored = _stored_parents(store, hold.unknown_parents(decoded.spans))
            placed = hold.place(decoded.spans, stored, now)
            self._release(store, now, everything=False, placed=placed)
            outcome = self._store(placed, store, validation)
        outcome.rejected[:0] = decoded.rejected
        return outcome

    def sweep(self, store: RunStore, validation: Validation, *, everything: bool = False) -> Outcome:
        """Store what waited past the bounds (everything, at shutdown) as the roots of their own trees."""
        hold = self.hold
        with hold.lock:
            if not hold.held:
                return Outcome()
            placed = Placed()
            orphaned = hold.orphaned
            self._release(store, self._clock(), everything=everything, placed=placed)
            outcome = self._store(placed, store, validation)
            if hold.orphaned > orphaned:
                logger.info(
                    "%d OTLP spans stored as the roots of their own trees: their parents did not arrive within %gs%s",
                    hold.orphaned - orphaned, hold.max_s, " (the service is stopping)" if everything else "",
                )
        return outcome

    def _release(self, store: RunStore, now: float, *, everything: bool, placed: Placed) -> None:
        # A parent stored meanwhile by another service on this database is found here before its child ends a root.
        stored = _stored_parents(store, self.hold.due_parents(now, everything))
        self.hold.release(now, stored, placed, everything)

    def _store(self, placed: Placed, store: RunStore, validation: Validation) -> Outcome:
        outcome = Outcome(rejected=list(placed.rejected), warnings=list(placed.warnings))
        accepted: list[RunOp] = []
        for span, ids in placed.ready:
            try:
                op = self._run_op(span, ids)
            except Exception as exc:  # noqa: BLE001 - one span that cannot be converted must not fail the others
                outcome.rejected.append(f"{span!r} could not be converted ({type(exc).__name__}: {str(exc)[:200]})")
                continue
            violations = check_run("post", op.run_id, op.data, op.loc, require_ids=True)
            if violations:
                refused = refuses(validation, violations)
                store.record_violations(violations, path=_ROUTE, accepted=not refused)
                if refused:
                    outcome.rejected.append(_why(span, violations))
                    continue
            accepted.append(op)
        while accepted:
            try:
                store.apply(accepted)
            except RunTooLarge as exc:
                # One span past what a run may hold: refused alone, as a span that breaks a rule is.
                outcome.rejected.append(f"span of run {exc.run_id}: {exc.size} bytes stored, more than the {exc.max_size} a run may hold")
                accepted = [op for op in accepted if op.run_id != exc.run_id]
                continue
            outcome.stored = [op.run_id for op in accepted]
            break
        return outcome

    def _run_op(self, span: OtlpSpan, ids: RunIds) -> RunOp:
        """The span's run as the exporter would send it: converted, encoded at its value limit, read back."""
        opts = self._options.get(span.project)
        if opts is None:
            session = {"session_name": span.project} if span.project else ConvertOptions().session
            opts = ConvertOptions(session=session, id_scheme=OTLP_SCHEME)
            if len(self._options) < 1000:  # a few projects in practice; never a cache of every header sent
                self._options[span.project] = opts
        encoded = encode_run("post", span_to_run(span, ids, opts, malformed=[]), MAX_VALUE_CHARS, completes=True)
        run = orjson.loads(encoded.parts[0][1])
        for name, payload in encoded.parts[1:]:
            run[name.rsplit(".", 1)[1]] = orjson.loads(payload)
        return RunOp("post", encoded.run_id, run, ("body", f"span {span.context.span_id:016x}"))


def _why(span: OtlpSpan, violations: Iterable[Violation]) -> str:
    return f"{span!r}: " + "; ".join(f"{v.msg} [{v.rule}]" for v in list(violations)[:3])


def _stored_parents(store: RunStore, keys: set[Key]) -> dict[Key, RunIds]:
    """The parents among ``keys`` whose runs are stored: found by their run id (the ``otlp`` scheme's) and
    checked to be of the same OTel trace."""
    if not keys:
        return {}
    by_run = {run_id_str(OTLP_SCHEME, key[0], key[1], 0): key for key in keys}
    found: dict[Key, RunIds] = {}
    wanted = list(by_run)
    for start in range(0, len(wanted), _LOOKUP_CHUNK):
        chunk = wanted[start : start + _LOOKUP_CHUNK]
        where = f"r.id IN ({', '.join('?' * len(chunk))})"
        for queried in store.load_runs(store.query_keys(where, chunk, order="asc", after=None, limit=len(chunk))):
            run = queried.run
            key = by_run[run["id"]]
            extra = run.get("extra")
            metadata = extra.get("metadata") if isinstance(extra, Mapping) else None
            if not isinstance(metadata, Mapping) or metadata.get("otel_trace_id") != f"{key[0]:032x}":
                continue  # the same span id in another trace: not this parent
            ids = stored_run_ids(run)
            if ids is not None:
                # One tree, one project: a child placed under a stored parent goes where the parent is.
                name, project_id = run.get("session_name"), queried.project_id
                found[key] = ids._replace(project=name) if isinstance(name, str) else ids._replace(project_id=project_id)
    return found


def _answer(outcome: Outcome, media: str) -> Reply:
    """OTLP's ExportTraceServiceResponse in the request's encoding: empty when everything was taken as sent."""
    rejected, message = len(outcome.rejected), outcome.message()
    if media == PROTOBUF:
        from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceResponse

        response = ExportTraceServiceResponse()
        if message:
            response.partial_success.rejected_spans = rejected
            response.partial_success.error_message = message
        return Reply(200, response.SerializeToString(), content_type=PROTOBUF)
    body = {"partialSuccess": {"rejectedSpans": str(rejected), "errorMessage": message}} if message else {}
    return Reply(200, body, content_type=JSON)


def otlp_traces(request: Request, service: Service) -> Reply:
    """``POST /otel/v1/traces``: the spans of one OTLP request, stored as runs in ``Langsmith-Project``'s project."""
    project = (request.headers.get("langsmith-project") or "").strip() or None
    content_type = request.headers.get("content-type")
    decoded = decode(request.data, content_type, project)
    outcome = service.otlp.receive(decoded, service.store, service.validation)
    request.log["run_ids"] = sorted(outcome.stored)
    for reason in [*outcome.rejected, *outcome.warnings][:_SHOWN_REASONS]:
        logger.info("OTLP span on %s: %s", _ROUTE, reason)
    media = PROTOBUF if (content_type or "").split(";", 1)[0].strip().lower() == PROTOBUF else JSON
    return _answer(outcome, media)
