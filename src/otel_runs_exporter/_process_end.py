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
  handler. Python runs a signal's handler in the main thread only, between two
  steps of its own; a signal that comes just before the main thread blocks in a
  C call (a worker waiting on the pool's queue lock, which ``terminate()`` holds)
  is noted and never acted on, and the pool waited for that worker for ever. So
  a child also sets Python's wakeup fd (when the app has not) and a thread of
  ours reads it: a SIGTERM the main thread has not acted on within a second is
  acted on from that thread (the flush, then ``os._exit``).
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
import time
from types import FrameType
from typing import Any

from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider

from . import _registry
from ._fork import prepare_in_parent, renew_in_child
from ._logging import RateLimitedLog
from ._settings import Settings

__all__ = ["watch", "ending"]

logger = logging.getLogger(__name__)
_once = RateLimitedLog(logger, interval_s=3600.0)

# multiprocessing runs finalizers of priority 0 and above before it ends a child's daemonic
# children and joins the others; ours flushes while everything it needs still works.
_EXIT_PRIORITY = 5
_TERM_STATUS = 128 + signal.SIGTERM
# How long the main thread has to act on a SIGTERM before the watcher does: far longer than a main
# thread that can run Python needs, even on a loaded machine, so it acts only for one stuck in C.
_STUCK_AFTER_S = 1.0


class _State:
    """What this process has armed (a forked child starts from the parent's copy and re-arms)."""

    opted_in = False  # OTEL_EXPORTER_RUNS_HANDLE_SIGTERM was asked for by one of ours
    ending = False  # the exit sequence has begun: a SIGTERM now lets it finish (it is bounded)
    finalizer: Any = None  # ours, in multiprocessing's registry (which a child's bootstrap may clear)
    end_limit_s = 0.0  # the longest export timeout of ours, and a second: how long the child's end may take
    after_fork_registered = False
    # Taken by whichever acts on a SIGTERM first, the handler in the main thread or the watcher.
    sigterm_claim = threading.Lock()
    wakeup: tuple[int, int] | None = None  # the pipe whose write end is Python's wakeup fd, in this process

    def _before_fork(self) -> None:
        # multiprocessing imported after ours was made: register now, before its child needs it.
        _register_after_fork()

    def _after_fork_in_child(self) -> None:
        # The watcher did not follow the fork; a signal to the child must not wake the parent's.
        self.sigterm_claim = threading.Lock()
        if self.wakeup is not None:
            read_fd, write_fd = self.wakeup
            self.wakeup = None
            try:
                previous = signal.set_wakeup_fd(-1)
                if previous != write_fd:
                    signal.set_wakeup_fd(previous)  # the app's own since: left as it is
                os.close(read_fd)
                os.close(write_fd)
            except (ValueError, OSError):
                pass


_state = _State()
prepare_in_parent(_state)
renew_in_child(_state)


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
    if mp is not None and (mp.parent_process() is not None or getattr(mp.current_process(), "_inheriting", False)):
        # Made inside a running child (a pool initializer, a task: multiprocessing cleared its finalizers
        # already), or as a spawn child imports the app's main module (spawn clears nothing and runs no
        # after-fork hooks; ``_inheriting`` is multiprocessing's own mark for that import, where
        # ``__mp_main__`` is no mark: it is in every process that imported multiprocessing). In a
        # forkserver's own process this arms too, harmlessly: its children re-arm.
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
    if _install_sigterm_handler(asked=_state.opted_in):
        _watch_for_missed_sigterm()


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


def _install_sigterm_handler(*, asked: bool) -> bool:
    """Ours installed (or already there); False where the app's handler or the thread leaves it out."""
    if threading.current_thread() is not threading.main_thread():
        if asked:
            _once.warning(
                "sigterm_thread",
                "OTEL_EXPORTER_RUNS_HANDLE_SIGTERM is set, but the exporter was made outside the main thread, "
                "where Python lets no handler be installed; SIGTERM is left as it is",
            )
        return False
    current = signal.getsignal(signal.SIGTERM)
    if current is _on_sigterm:
        return True
    if current is not signal.SIG_DFL:
        if asked:
            _once.log(
                logging.INFO,
                "sigterm_taken",
                "OTEL_EXPORTER_RUNS_HANDLE_SIGTERM is set, but the app handles SIGTERM itself (%r); left as it is",
                current,
            )
        return False
    signal.signal(signal.SIGTERM, _on_sigterm)
    return True


def _watch_for_missed_sigterm() -> None:
    """Python's wakeup fd, a pipe read by a thread of ours: see the module's docstring. From the main
    thread (Python's rule for both); left out where the app has a wakeup fd of its own (an event loop)."""
    if _state.wakeup is not None:
        return
    read_fd, write_fd = os.pipe()
    os.set_blocking(write_fd, False)  # Python's own rule for a wakeup fd: a full pipe never blocks a signal
    try:
        previous = signal.set_wakeup_fd(write_fd, warn_on_full_buffer=False)
    except (ValueError, OSError):
        previous = None
    if previous != -1:
        if previous is not None:
            signal.set_wakeup_fd(previous)
        os.close(read_fd)
        os.close(write_fd)
        return
    _state.wakeup = (read_fd, write_fd)
    threading.Thread(target=_watch, args=(read_fd,), name="otel-runs-exporter-sigterm", daemon=True).start()


def _watch(read_fd: int) -> None:
    claimed = False
    while True:
        try:
            received = os.read(read_fd, 512)
        except OSError:
            return
        if not received:
            return
        if signal.SIGTERM not in received:
            continue
        if claimed:
            os._exit(_TERM_STATUS)  # a second SIGTERM ends the process at once, as the handler would let it
        time.sleep(_STUCK_AFTER_S)
        if not _state.sigterm_claim.acquire(blocking=False):
            continue  # the main thread acted on it
        claimed = True
        main = threading.main_thread()
        where = _multiprocessing_state(sys._current_frames().get(main.ident or 0))
        logger.debug("SIGTERM not acted on by the main thread of pid %d after %.1f s (%s)", os.getpid(),
                     _STUCK_AFTER_S, where)
        action = _sigterm_action(where)
        if action == _FINISH:
            continue
        if action == _NORMAL_EXIT:
            _end_of_process()  # what the normal exit would have run, from here
        os._exit(_TERM_STATUS)


def ending() -> None:
    """The exit sequence has begun (``_exit``): a SIGTERM that comes now (a pool terminating a worker
    that is already leaving) lets the bounded flush finish; a second one ends the process at once."""
    _state.ending = True


def _on_sigterm(signum: int, frame: FrameType | None) -> None:
    signal.signal(signal.SIGTERM, signal.SIG_DFL)  # a second SIGTERM ends the process at once
    if not _state.sigterm_claim.acquire(blocking=False):
        return  # the watcher found the main thread stuck and is ending the process
    action = _sigterm_action(_multiprocessing_state(frame))
    if action == _NORMAL_EXIT:
        raise SystemExit(_TERM_STATUS)
    if action == _BY_SIGNAL:
        os.kill(os.getpid(), signum)


_FINISH, _NORMAL_EXIT, _BY_SIGNAL = "finish", "normal exit", "by the signal"


def _sigterm_action(where: str) -> str:
    """What a SIGTERM does, acted on by the handler or by the watcher: ``finish`` when the process is
    already on its way out (the bounded flush finishes); ``normal exit`` when asked, or for a child
    where nothing of the app's runs; else ``by the signal``, as before (not asked, the app running)."""
    if _state.ending or where == _LEAVING:
        _state.ending = True
        return _FINISH
    if _state.opted_in or where == _WAITING:
        return _NORMAL_EXIT
    return _BY_SIGNAL


_WAITING, _LEAVING, _RUNNING = "waiting", "leaving", "running"


def _multiprocessing_state(frame: FrameType | None) -> str:
    """Where the signal found this process's main thread, read from the frames interrupted:

    * ``waiting``: a multiprocessing pool worker between tasks (every frame up to the pool's
      ``worker`` loop is multiprocessing's own: nothing of the app's runs), or a child whose
      target has not begun or has returned (the signal found ``_bootstrap`` or ``run`` itself: its
      exit, through ``SystemExit``, runs the finalizers; after them ``ending`` is set);
    * ``leaving``: a multiprocessing child in its exit (``util._exit_function``, where its
      finalizers, ours among them, run);
    * ``running``: anything else (the app's code, a process that is not a child).
    """
    mp: Any = sys.modules.get("multiprocessing")
    if mp is None:
        return _RUNNING
    package = os.path.dirname(mp.__file__) + os.sep
    innermost = True
    while frame is not None:
        filename, name = frame.f_code.co_filename, frame.f_code.co_name
        if not filename.startswith(package):
            return _RUNNING
        if name == "worker" and filename.endswith("pool.py"):
            return _WAITING
        if name == "_exit_function" and filename.endswith("util.py"):
            return _LEAVING
        if name in ("run", "_bootstrap") and filename.endswith("process.py"):
            # Itself interrupted: no target runs. Below other frames of multiprocessing's: a target
            # of its own (a manager's server).
            return _WAITING if innermost else _RUNNING
        innermost = False
        frame = frame.f_back
    return _RUNNING
