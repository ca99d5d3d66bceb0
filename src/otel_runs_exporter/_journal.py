"""Runs a process has open at the service, kept beside the spool so another process can close them.

On the processor path a run's early post goes out while its span is still open
(a server request's root, an agent run). If the process then dies without an
exit (``kill -9``, an OOM kill, ``os._exit``), nobody ever sends the run's end
and it stays "running" at the service. With a spool, each process lists the
runs it has open in ``.open-<owner>`` (``_owners``: a lock it holds for its
lifetime), and a process that finds such a list whose owner is *proven* dead
closes those runs: a patch each, with the last time the owner was seen alive as
the end and an error saying the process ended before the span did. Pre-fork
workers share a spool directory, so a run that is not patched yet is never
taken as proof of anything: only the owner's lock is.

The list is append-only, one line a change (``+ run_id trace_id start_ns
dotted_order`` when an early post is made, ``- run_id`` when the run's end is),
written once per worker cycle, before the requests that carry those
operations, so a run's end never reaches the service while the list still says
it is open. It is rewritten with only the open runs when the lines outnumber
them, and touched now and then while runs are open, so its modification time is
when its owner was last alive. Nothing in it is trusted: a list is read up to a
bound, line by line, and what does not parse is skipped.

    >>> import tempfile
    >>> d = tempfile.mkdtemp()
    >>> from ._owners import Owner
    >>> journal = Journal(d, Owner(d))
    >>> journal.opened("r1", "t1", 1_700_000_000_000_000_000, "20231114T221320000000Zr1")
    >>> journal.flush(); journal.open_runs()
    1
"""

from __future__ import annotations

import logging
import os
import re
import stat
import time
from pathlib import Path
from typing import Callable

from ._convert import closing_patch
from ._encode import EncodedRun, encode_run
from ._ids import MAX_DOTTED_ORDER_CHARS
from ._logging import RateLimitedLog, n_runs
from ._owners import Owner

__all__ = ["Journal", "close_dead_owners_runs", "done_closing", "JOURNAL_PREFIX"]

logger = logging.getLogger(__name__)
_rl = RateLimitedLog(logger)

JOURNAL_PREFIX = ".open-"
_CLOSING = ".closing-"
_TOUCH_EVERY_S = 5.0  # how stale "last seen alive" may be
_MAX_READ = 64 * 1024 * 1024  # a list longer than this is not one of ours (100,000 open runs take ~15 MB)
_FLAGS = os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)
_ID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")


class Journal:
    """This process's list of open runs in a spool directory; written by the worker thread only."""

    def __init__(self, directory: str | Path, owner: Owner) -> None:
        self._dir = Path(directory)
        self._owner = owner
        self._path: Path | None = None
        self._live: dict[str, bytes] = {}  # run id -> its "+" line, for rewriting the list shorter
        self._pending: list[bytes] = []
        self._lines = 0  # lines in the file
        self._touched = 0.0
        self._broken = False  # the disk refused once: said, and no list is kept from then on

    def opened(self, run_id: str, trace_id: str, start_ns: int, dotted_order: str) -> None:
        line = b"+ %s %s %d %s\n" % (run_id.encode(), trace_id.encode(), start_ns, dotted_order.encode())
        self._live[run_id] = line
        self._pending.append(line)

    def closed(self, run_id: str) -> None:
        if self._live.pop(run_id, None) is not None:
            self._pending.append(b"- %s\n" % run_id.encode())

    def open_runs(self) -> int:
        return len(self._live)

    def flush(self) -> None:
        """Put the changes since the last flush on disk (one write); called before each request is sent."""
        if not self._pending or self._broken:
            return
        pending, self._pending = self._pending, []
        try:
            if self._lines + len(pending) > 2 * len(self._live) + 1024:
                self._rewrite()
            else:
                self._append(b"".join(pending))
                self._lines += len(pending)
            self._touched = time.monotonic()
        except OSError as exc:
            self._broken = True
            _rl.error(
                "journal", "could not keep the list of open runs in %s (%s): a kill -9 from now on leaves them "
                "running at the service", self._dir, exc,
            )

    def touch(self) -> None:
        """While runs are open: now and then, mark the list's owner as alive now (its modification time)."""
        if self._path is None or not self._live or self._broken:
            return
        now = time.monotonic()
        if now - self._touched >= _TOUCH_EVERY_S:
            self._touched = now
            try:
                os.utime(self._path)
            except OSError:
                pass

    def remove(self) -> None:
        """A normal exit: the open runs were closed, or left open on purpose; no one else may close them."""
        self._live.clear()
        self._pending.clear()
        if self._path is not None:
            try:
                os.unlink(self._path)
            except OSError:
                pass
            self._path = None

    def _file(self) -> Path:
        if self._path is None:
            self._path = self._dir / f"{JOURNAL_PREFIX}{self._owner.token}"
        return self._path

    def _append(self, data: bytes) -> None:
        fd = os.open(self._file(), os.O_WRONLY | os.O_CREAT | os.O_APPEND | _FLAGS, 0o600)
        try:
            _write_all(fd, data)
        finally:
            os.close(fd)

    def _rewrite(self) -> None:
        path = self._file()
        tmp = path.with_name(f"{path.name}.tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | _FLAGS, 0o600)
        try:
            _write_all(fd, b"".join(self._live.values()))
        finally:
            os.close(fd)
        os.rename(tmp, path)
        self._lines = len(self._live)


def close_dead_owners_runs(
    directory: str | Path, is_dead: Callable[[str], bool], mine: str, max_value_chars: int = 0
) -> list[EncodedRun]:
    """The closing patches of every run left open by a process proven dead, its list taken (one process wins).

    ``is_dead(token)`` is the spool's proof (``Spool.dead``); ``mine`` this
    process's token, for the name under which a list is taken. The caller writes
    the patches to the spool, then calls :func:`done_closing`; a process that dies
    in between leaves the taken list to the next one (a patch sent twice is harmless).
    """
    directory = Path(directory)
    patches: list[EncodedRun] = []
    try:
        names = [e.name for e in os.scandir(directory) if e.name.startswith(JOURNAL_PREFIX)]
    except OSError:
        return patches
    for name in names:
        token, _, taker = name[len(JOURNAL_PREFIX):].partition(_CLOSING)
        if name.endswith(".tmp") or not is_dead(taker or token):
            continue
        taken = directory / f"{JOURNAL_PREFIX}{token}{_CLOSING}{mine}"
        try:
            os.rename(directory / name, taken)
            st = os.stat(taken, follow_symlinks=False)
            runs = _open_in(taken)
        except OSError:
            continue
        pid = token.split(".", 1)[0]
        why = (
            f"the process (pid {pid}) ended before this span did, without closing it (kill -9, an OOM kill, "
            f"a crash or os._exit); closed by pid {os.getpid()} when it found that process gone"
        )
        for run_id, trace_id, start_ns, dotted_order in runs:
            fields = closing_patch(run_id, trace_id, dotted_order, start_ns, st.st_mtime_ns, why)
            patches.append(encode_run("patch", fields, max_value_chars, completes=True))
        if runs:
            logger.warning("closing %s left open by pid %s, which ended without closing them", n_runs(len(runs)), pid)
    return patches


def done_closing(directory: str | Path, mine: str) -> None:
    """The patches of the lists this process took are in the spool: the lists go."""
    directory = Path(directory)
    try:
        names = [e.name for e in os.scandir(directory) if e.name.startswith(JOURNAL_PREFIX) and e.name.endswith(_CLOSING + mine)]
    except OSError:
        return
    for name in names:
        try:
            os.unlink(directory / name)
        except OSError:
            pass


def _open_in(path: Path) -> list[tuple[str, str, int, str]]:
    """The runs a list says are open, in the order they opened; lines that do not parse are skipped."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | _FLAGS)
    try:
        if not _regular(fd):
            return []
        data = os.read(fd, _MAX_READ)
    finally:
        os.close(fd)
    live: dict[str, tuple[str, str, int, str]] = {}
    for line in data.split(b"\n"):
        fields = line.split(b" ")
        try:
            if fields[0] == b"+" and len(fields) == 5:
                run_id, trace_id, dotted_order = (f.decode("ascii") for f in (fields[1], fields[2], fields[4]))
                if _ID.fullmatch(run_id) and _ID.fullmatch(trace_id) and dotted_order.endswith(run_id):
                    live[run_id] = (run_id, trace_id, int(fields[3][:20]), dotted_order[:MAX_DOTTED_ORDER_CHARS])
            elif fields[0] == b"-" and len(fields) == 2:
                live.pop(fields[1].decode("ascii"), None)
        except (UnicodeDecodeError, ValueError):
            continue
    return list(live.values())


def _regular(fd: int) -> bool:
    return stat.S_ISREG(os.fstat(fd).st_mode)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]

