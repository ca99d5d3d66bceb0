"""Every way a process ends, brought to the one exit sequence (``_exit``).

A normal exit reaches it through ``atexit``: the SDK's tracer provider shuts its
processors down (ours among them), and the exporter path's own hook marks the
exit. Three other ends are covered here, and one is not:

* **multiprocessing children.** A child started with ``fork`` or ``forkserver``
  leaves through ``os._exit`` after ``multiprocessing``'s own finalizers, so
  ``atexit`` never runs there (a ``spawn`` child runs it, but a pool that is
  terminated never gets that far). In every ``multiprocessing`` child where a
  processor or exporter of ours lives, a finalizer of ``multiprocessing``
  (``util.Finalize``) does what ``atexit`` would: the global SDK tracer
  provider is shut down (its processors flush: a ``BatchSpanProcessor`` hands
  its queue to our exporter), then each of ours. It is armed after
  ``multiprocessing`` clears the finalizers a child inherits
  (``util.register_after_fork``, which its bootstrap runs in every child, fork,
  forkserver and spawn alike), or at once when ours is made inside a running
  child (a pool initializer, a task).
* **A pool that terminates its workers.** ``Pool.terminate()``, which
  ``with Pool(...)`` calls on the way out, ends each worker with SIGTERM, so no
  finalizer runs. A worker waiting for its next task, with nothing of the app's
  running, is therefore ended through its normal exit instead (SystemExit, so
  the finalizer above delivers); a worker in the middle of a task ends at once
  by the signal, as ``terminate()`` promises. Only while SIGTERM has its default
  handler.
* **SIGTERM**, the way containers and process managers stop an app
  (``OTEL_EXPORTER_RUNS_HANDLE_SIGTERM``, off by default): installed from the
  main thread, only while SIGTERM has its default handler, a handler that only
  raises ``SystemExit(143)``, so the normal exit path flushes and the process
  ends with the status a shell or a container runtime reports for SIGTERM (128 +
  15). It puts the default back first: a second SIGTERM ends the process at once.
* **``os._exit``** (and ``kill -9``, an OOM kill) runs nothing of ours: only
  write-ahead (``OTEL_EXPORTER_RUNS_SPOOL_WRITE_AHEAD``) bounds what is lost then.
"""

from __future__ import annotations

import logging
import os
import signal
import sys
import threading
from types import FrameType
from typing import Any

from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider

from . import _registry
from ._fork import prepare_in_parent
from ._logging import RateLimitedLog
from ._settings import Settings

__all__ = ["watch", "ending"]

logger = logging.getLogger(__name__)
_once = RateLimitedLog(logger, interval_s=3600.0)

# multiprocessing runs finalizers of priority 0 and above before it ends a child's daemonic
# children and joins the others; ours flushes while everything it needs still works.
_EXIT_PRIORITY = 5
_TERM_STATUS = 128 + signal.SIGTERM


class _State:
    """What this process has armed (a forked child starts from the parent's copy and re-arms)."""

    opted_in = False  # OTEL_EXPORTER_RUNS_HANDLE_SIGTERM was asked for by one of ours
    ending = False  # the exit sequence has begun: a SIGTERM now lets it finish (it is bounded)
    finalizer: Any = None  # ours, in multiprocessing's registry (which a child's bootstrap may clear)
    end_limit_s = 0.0  # the longest export timeout of ours, and a second: how long the child's end may take
    after_fork_registered = False

    def _before_fork(self) -> None:
        # multiprocessing imported after ours was made: register now, before its child needs it.
        _register_after_fork()


_state = _State()
prepare_in_parent(_state)


def watch(settings: Settings) -> None:
    """Called as a processor or an exporter of ours is made (it is in ``_registry`` by then)."""
    if settings.disabled:
        return
    _state.end_limit_s = max(_state.end_limit_s, settings.export_timeout_s + 1.0)
    if settings.handle_sigterm:
        _state.opted_in = True
        _install_sigterm_handler(asked=True)
    _register_after_fork()
    mp = sys.modules.get("multiprocessing")
    if mp is not None and (mp.parent_process() is not None or "__mp_main__" in sys.modules):
        # Made inside a running child (a pool initializer, a task: multiprocessing cleared its finalizers
        # already), or as a spawn child imports the app's main module (spawn clears nothing and runs no
        # after-fork hooks). In a forkserver's own process this arms too, harmlessly: its children re-arm.
        _arm()


def _register_after_fork() -> None:
    if _state.after_fork_registered or "multiprocessing.util" not in sys.modules:
        return
    from multiprocessing import util

    util.register_after_fork(_state, lambda _: _arm())
    _state.after_fork_registered = True


def _arm() -> None:
    """In a multiprocessing child: the finalizer that ends ours (unless it is armed), and SIGTERM for a
    pool's terminate(). Again after the child's bootstrap cleared the finalizers (fork, forkserver)."""
    from multiprocessing import util

    if _state.finalizer is None or not _state.finalizer.still_active():
        _state.finalizer = util.Finalize(None, _end_of_process, exitpriority=_EXIT_PRIORITY)
    _install_sigterm_handler(asked=_state.opted_in)


def _end_of_process() -> None:
    """What ``atexit`` would have done for ours: the global SDK provider shut down, then each sender.

    In a thread of its own, waited for at most the longest export timeout of ours and a second (what the
    normal exit gives a service that answers): a lock another thread of the parent held at the fork stays
    held in the child for ever, the SDK's among them, which no fork hook of ours renews, and a pool's
    ``terminate()`` waits for its workers to end."""
    _state.ending = True
    senders = _registry.senders()
    if not senders:
        return
    ender = threading.Thread(target=_end_senders, args=(senders,), name="otel-runs-exporter-exit", daemon=True)
    ender.start()
    ender.join(_state.end_limit_s)
    if ender.is_alive():
        logger.warning(
            "the exporter of this process (pid %d) had not ended %.1f s after the process began to exit; "
            "what it still held is given up",
            os.getpid(), _state.end_limit_s,
        )


def _end_senders(senders: list[Any]) -> None:
    try:
        provider = trace.get_tracer_provider()
        if isinstance(provider, TracerProvider):
            provider.shutdown()  # flushes every processor, a BatchSpanProcessor into our exporter too
        for sender in senders:
            sender.shutdown()  # ours on other providers; a no-op for those already shut down
    except BaseException:  # noqa: BLE001 - a child's exit must go on whatever happens here
        logger.debug("could not end the exporter at the end of the process", exc_info=True)


def _install_sigterm_handler(*, asked: bool) -> None:
    if threading.current_thread() is not threading.main_thread():
        if asked:
            _once.warning(
                "sigterm_thread",
                "OTEL_EXPORTER_RUNS_HANDLE_SIGTERM is set, but the exporter was made outside the main thread, "
                "where Python lets no handler be installed; SIGTERM is left as it is",
            )
        return
    current = signal.getsignal(signal.SIGTERM)
    if current is _on_sigterm:
        return
    if current is not signal.SIG_DFL:
        if asked:
            _once.log(
                logging.INFO,
                "sigterm_taken",
                "OTEL_EXPORTER_RUNS_HANDLE_SIGTERM is set, but the app handles SIGTERM itself (%r); left as it is",
                current,
            )
        return
    signal.signal(signal.SIGTERM, _on_sigterm)


def ending() -> None:
    """The exit sequence has begun (``_exit``): a SIGTERM that comes now (a pool terminating a worker
    that is already leaving) lets the bounded flush finish; a second one ends the process at once."""
    _state.ending = True


def _on_sigterm(signum: int, frame: FrameType | None) -> None:
    signal.signal(signal.SIGTERM, signal.SIG_DFL)  # a second SIGTERM ends the process at once
    where = _multiprocessing_state(frame)
    if _state.ending or where == _LEAVING:
        _state.ending = True  # already on its way out: the bounded flush finishes
        return
    if _state.opted_in or where == _WAITING:
        raise SystemExit(_TERM_STATUS)
    os.kill(os.getpid(), signum)  # not asked, and the app is running: ended by the signal, as before


_WAITING, _LEAVING, _RUNNING = "waiting", "leaving", "running"


def _multiprocessing_state(frame: FrameType | None) -> str:
    """Where the signal found this process's main thread, read from the frames interrupted:

    * ``waiting``: a multiprocessing pool worker between tasks (every frame up to the pool's
      ``worker`` loop is multiprocessing's own: nothing of the app's runs);
    * ``leaving``: a multiprocessing child in its exit (``util._exit_function``, where its
      finalizers, ours among them, run);
    * ``running``: anything else (the app's code, a process that is not a child).
    """
    mp: Any = sys.modules.get("multiprocessing")
    if mp is None:
        return _RUNNING
    package = os.path.dirname(mp.__file__) + os.sep
    while frame is not None:
        filename, name = frame.f_code.co_filename, frame.f_code.co_name
        if not filename.startswith(package):
            return _RUNNING
        if name == "worker" and filename.endswith("pool.py"):
            return _WAITING
        if name == "_exit_function" and filename.endswith("util.py"):
            return _LEAVING
        if name in ("run", "_bootstrap") and filename.endswith("process.py"):
            return _RUNNING  # a target of multiprocessing's own (a manager's server), or its start
        frame = frame.f_back
    return _RUNNING
