"""Open runs: early post sent, end not converted yet (the processor path's worker owns them).

A run whose span is still open when the worker converts its start is posted
early (``_convert.span_to_run(as_open=True)``) and remembered here until its end
is converted: what its patch needs (:func:`~otel_runs_exporter._convert.early_post_summary`),
its ids (for the patch that closes it at exit) and what it holds in memory.

Three rules live here:

* **The byte cap.** What open runs hold counts against ``max_queue_bytes``
  (:attr:`OpenRuns.bytes`, read by the application thread's check): deep or
  many open runs fill memory like any other waiting run.
* **The never-ended bound.** A span may never end (an abandoned stream, an
  error path that forgets ``end()``). Past ``open_runs_max`` (the oldest first)
  or ``open_run_max_age_s``, an open run is *released*: it stops counting
  against the cap (``stats().open_runs_released``), so spans that never end
  cannot starve later traffic; it is not closed at the service while the
  process lives, and a real end, when it comes, is patched as usual. At most
  ``_MOST`` runs are remembered either way; past that the oldest is forgotten
  and its end, should it come, goes as a whole post.
* **Closing at exit.** At a normal exit each run still open is patched with the
  exit time and an error saying the process ended before its span did
  (:meth:`OpenRuns.close_all`, ``close_open_runs_at_exit``), counted in
  ``stats().closed_at_exit``. With a spool each change is also written to this
  process's list beside it (``_journal``), so a process that outlives a
  ``kill -9`` closes them instead.

    >>> from ._ids import root_ids
    >>> from ._stats import Ledger
    >>> from ._settings import resolve
    >>> runs = OpenRuns(resolve({"open_runs_max": 1}, env={}), Ledger(), None)
    >>> for i in range(2):
    ...     runs.remember(root_ids(f"0000000{i}-0000-7000-8000-000000000000", 0), ("n", "chain", None), 500, now=0.0)
    >>> runs.release_never_ended(now=0.0); (len(runs), runs.bytes)
    (2, 500)
"""

from __future__ import annotations

import logging
import time

from ._convert import closing_patch
from ._encode import EncodedRun, encode_run
from ._ids import RunIds
from ._journal import Journal
from ._logging import RateLimitedLog, n_runs
from ._settings import Settings
from ._stats import Ledger

__all__ = ["OpenRuns", "Summary"]

logger = logging.getLogger(__name__)
_rl = RateLimitedLog(logger)

_MOST = 100_000  # remembered, counted or released: a span that never ends must not grow this for ever
_CLOSED_AT_EXIT = (
    "the process ended before this span did: closed at exit (OTEL_EXPORTER_RUNS_CLOSE_OPEN_RUNS_AT_EXIT)"
)

Summary = tuple[str, str, "int | None"]
# An open run: its early post's summary, what it holds (0 once released), its ids, when it opened.
_Entry = tuple[Summary, int, RunIds, float]


class OpenRuns:
    """The worker's open runs; written by the worker thread only (``bytes`` is read from any)."""

    def __init__(self, settings: Settings, ledger: Ledger, journal: Journal | None) -> None:
        self._settings = settings
        self._ledger = ledger
        self._journal = journal
        self._counted: dict[str, _Entry] = {}  # in the order they opened: the oldest first
        self._released: dict[str, _Entry] = {}
        #: What the counted ones hold, in bytes (estimated), for the byte cap.
        self.bytes = 0
        self._closed = False

    def __len__(self) -> int:
        return len(self._counted) + len(self._released)

    def remember(self, ids: RunIds, summary: Summary, held: int, *, now: float) -> None:
        """A run's early post was made; ``held`` estimates what it holds while open."""
        counted = self._counted
        run_id = ids.run_id
        if run_id in counted or run_id in self._released:
            self.forget(run_id)
        elif len(self) >= _MOST:
            self.forget(next(iter(self._released or counted)))
        counted[run_id] = (summary, held, ids, now)
        self.bytes += held
        if self._journal is not None:
            self._journal.opened(run_id, ids.trace_id, ids.start_time_ns, ids.dotted_order)

    def forget(self, run_id: str) -> Summary | None:
        """The run's end was converted (or its early post lost): its summary, or None if none is kept."""
        entry = self._counted.pop(run_id, None)
        if entry is not None:
            self.bytes -= entry[1]
        else:
            entry = self._released.pop(run_id, None)
            if entry is None:
                return None
        if self._journal is not None:
            self._journal.closed(run_id)
        return entry[0]

    def release_never_ended(self, *, now: float) -> None:
        """Runs past the never-ended bound stop counting against the byte cap (said once a minute)."""
        counted = self._counted
        if not counted:
            return
        most, oldest = self._settings.open_runs_max, now - self._settings.open_run_max_age_s
        moved = 0
        while counted:
            run_id = next(iter(counted))
            summary, held, ids, since = counted[run_id]
            if len(counted) <= most and since > oldest:
                break
            del counted[run_id]
            self.bytes -= held
            self._released[run_id] = (summary, 0, ids, since)
            moved += 1
        if moved:
            self._ledger.open_runs_released(moved)
            _rl.warning(
                "open_runs_released",
                "%s open past the never-ended bound (OTEL_EXPORTER_RUNS_OPEN_RUNS_MAX %d, "
                "OTEL_EXPORTER_RUNS_OPEN_RUN_MAX_AGE %g s) no longer count against the byte cap; each is still "
                "patched if its span ends (stats().open_runs_released)",
                n_runs(moved), most, self._settings.open_run_max_age_s,
            )

    def close_all(self) -> list[EncodedRun]:
        """At exit, once: the patches that close every run still open, created in the ledger as
        ``closed_at_exit``. Empty when ``close_open_runs_at_exit`` is off: they are then only counted for
        the exit line, which says how many were left running."""
        if self._closed:
            return []
        self._closed = True
        if not self._settings.close_open_runs_at_exit:
            self._ledger.left_open_at_exit(len(self))
            return []
        entries = [*self._released.values(), *self._counted.values()]
        end_ns = time.time_ns()
        limit = self._settings.max_value_chars
        patches = []
        for _, _, ids, _ in entries:
            self.forget(ids.run_id)
            fields = closing_patch(ids.run_id, ids.trace_id, ids.dotted_order, ids.start_time_ns, end_ns, _CLOSED_AT_EXIT)
            patches.append(encode_run("patch", fields, limit, completes=True))
        self._ledger.closed_at_exit(len(patches))
        return patches
