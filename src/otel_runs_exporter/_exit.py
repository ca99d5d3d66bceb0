"""The exit sequence, one for both paths: one flush within one exit budget, then the spool, then one line.

At shutdown the processor's worker and the exporter run the same steps, here,
so a rule about exiting is written once:

1. :meth:`Delivery.begin_exit`: a service that cannot be reached (nothing
   listening, a name that does not resolve, a network that is unreachable, a TLS
   certificate refused: ``_http_client.unreachable_cause``) is retried only for the exit
   budget, ``OTEL_EXPORTER_RUNS_EXIT_BUDGET``; with a spool, not at all, since the
   spool keeps the runs. A service that answers, however slowly, gets the whole
   export timeout.
2. One flush until the deadline: the caller's ``flush`` (the worker thread sends;
   the exporter sends in place). Ctrl-C ends it at once: ``stop`` tells the sender
   to stop trying, and the sequence goes on.
3. What is left in memory goes to the spool when there is one, after Ctrl-C too:
   the caller's ``gather`` first hands the delivery what it still holds (the
   worker converts what is queued). A second Ctrl-C skips to the line.
4. One line (``Ledger.give_up``): what was given up, with the real time waited,
   the cause and how to keep such runs next time, or what went to the spool,
   and the runs still open that were closed (the worker's last cycle closes
   them, ``_open_runs``).

How each way a process ends reaches this sequence (``atexit``, the finalizers of
``multiprocessing`` children, SIGTERM when asked) is ``_process_end``'s.
"""

from __future__ import annotations

import time
from typing import Callable

from . import _process_end
from ._delivery import Delivery
from ._stats import Ledger

__all__ = ["ExitSequence"]


class ExitSequence:
    """The steps above for one delivery and its ledger; :meth:`run` once, at shutdown."""

    def __init__(self, delivery: Delivery, ledger: Ledger) -> None:
        self._delivery = delivery
        self._ledger = ledger

    def begin(self) -> float:
        """Step 1 (also taken by the exporter's last ``export()`` calls at interpreter exit); when the exit began."""
        return self._delivery.begin_exit()

    def run(
        self,
        flush: Callable[[], None],
        *,
        stop: Callable[[], None] = lambda: None,
        gather: Callable[[], None] = lambda: None,
    ) -> None:
        """Steps 1 to 4; never raises (a Ctrl-C included)."""
        delivery, ledger = self._delivery, self._ledger
        _process_end.ending()
        started = self.begin()
        spooled_before = ledger.spooled  # what the flush itself writes there is said in the one line too
        interrupted = False
        try:
            flush()
        except KeyboardInterrupt:
            interrupted = True
        try:
            if interrupted:
                stop()
            gather()
            ledger.record(delivery.spool_all())
        except KeyboardInterrupt:
            interrupted = True  # a second Ctrl-C: what is left is counted, not written
        delivery.take_all()
        try:
            ledger.give_up(
                time.monotonic() - started,
                interrupted,
                note=delivery.exit_note(),
                spooled=ledger.spooled - spooled_before,
                spool_dir=str(delivery.spool.dir) if delivery.spool is not None else None,
            )
        except KeyboardInterrupt:
            pass
        delivery.close()
