"""The durable spool: batches the service could not take, kept on disk.

Opt-in with ``OTEL_EXPORTER_RUNS_SPOOL_DIR``. A batch that could not be
delivered within the export timeout (and what is left at shutdown) is written
to one file; later flushes, and the next process to start, replay the files,
oldest first.

Crash safety: a file is written under a temporary name, fsynced, then renamed
into place, so a spool file is complete or absent; a ``kill -9`` mid-write
leaves only a temporary file, which replay ignores and later removes.

Several processes may share the directory (pre-fork servers): each writes files
of its own (pid and a random suffix in the name), and a replayer first *claims*
a file by renaming it, which exactly one process can win. A claim left by a
process that died is returned to the pool.

Bounded: past ``OTEL_EXPORTER_RUNS_SPOOL_MAX_BYTES`` the oldest files are
removed and their runs counted as dropped (``spool_full``). Each file holds at
most one batch (``max_batch_bytes`` of runs), or one run larger than that, and
never more than ``max_file_bytes``; a run too large for that stays with the
caller. Only encoded run payloads are written: never the API key or any header.

Nothing found in the directory is trusted (the directory itself is checked by
the settings: this user's, writable by no one else). A file is opened without
following a symlink and without waiting (``O_NOFOLLOW | O_NONBLOCK``: a FIFO
named like a spool file cannot block the worker), must be a regular file, and
is read up to ``max_file_bytes``, the most the writer writes. What fails is set
aside as ``<name>.bad``, a name replay never takes (at most ``_MAX_BAD`` are
kept, for a person to look at), with one warning per reason, and the runs its
name holds are counted as lost under that reason (``spool_symlink``,
``spool_not_regular``, ``spool_too_large``, ``spool_corrupt``).

A claim left by a process that died is returned under a marked name
(``-orphan``); if a process dies holding that one too, the file is what kills
them and is set aside (``spool_crash_loop``) instead of being replayed by every
later process. A replay that returns, whatever its outcome, clears the mark.

Who holds a claim is said by an owner token (``_owners``): a lock the claiming
process holds for its lifetime, so a claim is returned only when its holder is
proven dead, never because its pid is (a restarted container reuses pids).

Write-ahead (``OTEL_EXPORTER_RUNS_SPOOL_WRITE_AHEAD``): :meth:`Spool.write_ahead`
writes a batch before it is sent, as a file this process holds
(``<name>.wal-<owner>``, never replayed while its owner lives); :meth:`Spool.forget`
removes it once the service has answered, :meth:`Spool.release` hands it to the
spool when it could not be delivered. A process that dies holding one leaves it
for the next process to replay. It is written under a temporary name and renamed,
so it is whole or absent, but not fsynced: the process's death does not lose
the page cache, and a released file is fsynced before it joins the spool.

Replay marks its progress: :meth:`Spool.mark` records, after each request, how
many operations of the claimed file are settled (``.progress-<stem>``, one line
per request), and a claim skips them, so a replayer killed midway sends again at
most the request it was waiting on.

File layout: one JSON header line describing the runs and their parts'
lengths, then the parts' bytes back to back. The header names the format
(``"v": 1``); a file of another format (a newer or an older version's) is set
aside (``spool_version``), never guessed at.
"""

from __future__ import annotations

import errno
import logging
import os
import stat
import time
import threading
from pathlib import Path


from ._encode import EncodedRun
from ._logging import RateLimitedLog, n_runs
from ._owners import LOCK_PREFIX, Owner, alive, pid_alive
from ._spool_format import (
    MIN_RUN_BYTES,
    STEM,
    SUFFIX,
    SpoolCorrupt,
    SpoolVersion,
    count_in_name,
    deserialize,
    file_name,
    groups,
    is_marked,
    marked,
    runs_in_name,
    serialize,
    unmarked,
    waiting,
)

__all__ = ["Spool", "SpoolCorrupt", "deserialize", "serialize", "waiting"]

logger = logging.getLogger(__name__)
_rl = RateLimitedLog(logger)

_CLAIM = ".claimed-"
_WAL = ".wal-"
_TMP_PREFIX = ".tmp-"
_PROGRESS = ".progress-"
_BAD = ".bad"
_STALE_TMP_S = 3600.0
_MAX_BAD = 32
# A spool file is never something to wait on, follow, or take as a terminal.
_OPEN_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY | getattr(os, "O_CLOEXEC", 0)
_READ_CHUNK = 16 * 1024 * 1024


class _Refused(Exception):
    """A directory entry the replay will not read: ``reason`` is the drop reason, ``why`` says what it is."""

    def __init__(self, reason: str, why: str) -> None:
        super().__init__(why)
        self.reason = reason
        self.why = why


class Spool:
    """One spool directory, as seen by one process.

    ``batch_bytes`` is how many bytes of runs (by their ``size``, as batches
    are cut) one file takes, so a replayed file is one right-sized request;
    ``max_file_bytes`` the most any file may hold, which is also the most a
    replay reads. Without ``batch_bytes`` the runs of one write share a file
    when they fit; ``max_file_bytes`` defaults to ``max_bytes`` and never exceeds it.
    """

    def __init__(
        self, directory: str, max_bytes: int, *, batch_bytes: int | None = None, max_file_bytes: int | None = None
    ) -> None:
        self.dir = Path(directory)
        self.dir.mkdir(parents=True, exist_ok=True)
        self._max_bytes = max_bytes
        self.max_file_bytes = min(max_bytes, max_file_bytes or max_bytes)
        self._batch_bytes = batch_bytes
        #: This process's lock in the directory (taken at its first claim or write-ahead file).
        self.owner = Owner(self.dir)
        self._losses: dict[str, int] = {}
        self._losses_lock = threading.Lock()
        self._set_aside_since_trim = False  # one look at the directory per claim, not one per entry
        self._skipped: dict[Path, int] = {}  # claimed file -> operations a dead replayer had settled
        #: Why the last write failed (said in the exit line); None once one succeeds.
        self.write_error: str | None = None
        self.recover()
        if self._set_aside_since_trim:
            self._trim_set_aside()

    def take_losses(self) -> dict[str, int]:
        """Runs lost on the spool's side since the last call, by reason (``spool_full``, ``spool_corrupt``, ...)."""
        with self._losses_lock:
            losses, self._losses = self._losses, {}
        return losses

    def _lose(self, reason: str, runs: int) -> None:
        with self._losses_lock:
            self._losses[reason] = self._losses.get(reason, 0) + runs

    def __repr__(self) -> str:
        return f"Spool({str(self.dir)!r})"

    # --- writing ---------------------------------------------------------------

    def write(self, runs: list[EncodedRun], *, evict: bool = True) -> list[EncodedRun]:
        """Write ``runs`` as files of at most a batch each, atomically; returns the runs not written.

        Empty when all were. What the disk refuses (said once) is returned with
        every run after it, in order; a run too large for any file (logged) is
        returned alone and the rest are still written. ``evict=False``: the
        oldest files are never removed to make room; what does not fit is returned.
        """
        left: list[EncodedRun] = []
        todo = groups(runs, self._batch_bytes) if self._batch_bytes else [list(runs)] if runs else []
        while todo:
            group = todo.pop(0)
            data = serialize(group)
            if len(data) > self.max_file_bytes:
                if len(group) > 1:
                    half = len(group) // 2
                    todo[:0] = [group[:half], group[half:]]
                    continue
                _rl.warning(
                    "spool_run_too_large",
                    "run %s takes %d bytes, more than a spool file holds (%d); it is not spooled",
                    group[0].run_id,
                    len(data),
                    self.max_file_bytes,
                )
                left.extend(group)
                continue
            if self._write_file(file_name(f"{time.time_ns():020d}", group), group, data, evict=evict) is None:
                left.extend(group)
                for rest in todo:
                    left.extend(rest)
                break
        return left

    def write_ahead(self, runs: list[EncodedRun]) -> Path | None:
        """``runs`` on disk before they are sent, as a file this process holds; None if the disk refused
        (said once) or the batch is larger than a file may be."""
        data = serialize(runs)
        if len(data) > self.max_file_bytes:
            return None
        name = f"{file_name(f'{time.time_ns():020d}', runs)}{_WAL}{self.owner.token}"
        # Not fsynced: a process's death keeps the page cache; release() makes it durable.
        return self._write_file(name, runs, data, durable=False, evict=False, counted=False)

    def forget(self, wal: Path) -> None:
        """The service answered for a write-ahead file's runs: it goes."""
        try:
            os.unlink(wal)
        except OSError:
            pass

    def release(self, wal: Path, *, evict: bool = True) -> bool:
        """A write-ahead file's runs could not be delivered: the file joins the spool (fsynced, named for
        any process to replay). False if it could not (said once), or, without ``evict``, if the spool has
        no room for it without dropping its oldest files: the caller keeps the runs."""
        original = wal.name.split(_WAL, 1)[0]
        try:
            fd = os.open(wal, os.O_RDONLY | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0))
            try:
                os.fsync(fd)
                size = os.fstat(fd).st_size
            finally:
                os.close(fd)
            if not self._make_room(size, evict=evict):
                return False
            os.rename(wal, self.dir / original)
            self._fsync_dir()
            return True
        except OSError as exc:
            self.write_error = exc.strerror or str(exc)
            _rl.error("spool_write", "could not move a write-ahead file into the spool at %s: %s", self.dir, exc)
            return False

    def _write_file(
        self, name: str, runs: list[EncodedRun], data: bytes, *, evict: bool = True, durable: bool = True,
        counted: bool = True,
    ) -> Path | None:
        """``data`` whole under ``name``, or nothing: written under a temporary name, then renamed.

        A full disk mid-write leaves no file (the temporary one is removed): a
        spool file is always whole. ``counted``: the spool's byte cap applies.
        """
        tmp = self.dir / f"{_TMP_PREFIX}{os.getpid()}-{name}"
        try:
            if counted and not self._make_room(len(data), evict=evict):
                return None
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0), 0o600)
            try:
                view = memoryview(data)
                while view:
                    view = view[os.write(fd, view) :]
                if durable:
                    os.fsync(fd)
            finally:
                os.close(fd)
            final = self.dir / name
            os.rename(tmp, final)
            if durable:
                self._fsync_dir()
            self.write_error = None
            return final
        except OSError as exc:
            self.write_error = exc.strerror or str(exc)
            _rl.error(
                "spool_write",
                "could not write %s to the spool at %s: %s; they stay in memory, counted if they are lost "
                "(said once a minute)",
                n_runs(sum(1 for r in runs if r.completes)),
                self.dir,
                exc,
            )
            try:
                tmp.unlink()
            except OSError:
                pass
            return None

    def _make_room(self, incoming: int, *, evict: bool) -> bool:
        """Whether ``incoming`` bytes fit under the cap; with ``evict``, the oldest files go until they do."""
        files = self._files()
        total = sum(size for _, size in files)
        if total + incoming <= self._max_bytes:
            return True
        if not evict:
            return False
        for path, size in files:
            if total + incoming <= self._max_bytes:
                break
            dropped = self._runs_in(path, path.name)
            try:
                path.unlink()
            except FileNotFoundError:
                continue  # another process replayed or removed it
            except OSError:
                continue  # not a file (a directory named like one): replay sets it aside
            total -= size
            self._lose("spool_full", dropped)
            # One line for the reason (an outage fills it a file at a time): the count is in stats().
            _rl.warning(
                "spool_full",
                "the spool is full (%d bytes); dropped its oldest file with %s, and drops the oldest to make room "
                "from now on (counted as spool_full in stats().spool_dropped)",
                self._max_bytes,
                n_runs(dropped),
            )
        return True

    def _fsync_dir(self) -> None:
        try:
            fd = os.open(self.dir, os.O_RDONLY)
        except OSError:
            return
        try:
            os.fsync(fd)
        except OSError:
            pass
        finally:
            os.close(fd)

    # --- replaying ---------------------------------------------------------------

    def _files(self) -> list[tuple[Path, int]]:
        out = []
        for entry in os.scandir(self.dir):
            if entry.name.endswith(SUFFIX) and not entry.name.startswith("."):
                try:
                    # Not following a link: its own size, and a dangling one is still listed (and set aside).
                    out.append((Path(entry.path), entry.stat(follow_symlinks=False).st_size))
                except FileNotFoundError:
                    continue
        out.sort(key=lambda item: item[0].name)  # names start with the time: oldest first
        return out

    def pending(self) -> int:
        """Files waiting to be replayed (by any process)."""
        return len(self._files())

    def claim(self) -> tuple[Path, list[EncodedRun]] | None:
        """Take the oldest file for replay; None when there is nothing to take.

        What cannot be read as a spool file is set aside on the way and counted.
        The operations a replayer that died had settled (:meth:`mark`) are skipped.
        """
        try:
            return self._claim()
        finally:
            if self._set_aside_since_trim:
                self._trim_set_aside()

    def _claim(self) -> tuple[Path, list[EncodedRun]] | None:
        for path, _ in self._files():
            claimed = path.with_name(f"{path.name}{_CLAIM}{self.owner.token}")
            try:
                os.rename(path, claimed)
            except FileNotFoundError:
                continue  # another process claimed it first
            except OSError as exc:
                self._set_aside(path, path.name, "spool_corrupt", f"cannot be claimed ({exc.strerror})")
                continue
            try:
                runs = deserialize(_read(claimed, self.max_file_bytes))
            except _Refused as refused:
                self._set_aside(claimed, path.name, refused.reason, refused.why)
                continue
            except SpoolVersion as exc:
                self._set_aside(claimed, path.name, "spool_version", str(exc))
                continue
            except (SpoolCorrupt, OSError) as exc:
                self._set_aside(claimed, path.name, "spool_corrupt", f"unreadable ({exc})")
                continue
            settled = self._settled(path.name, len(runs))
            if settled >= len(runs):
                self.done(claimed)  # every request of it was answered before its replayer died
                continue
            if settled:
                self._skipped[claimed] = settled
            return claimed, runs[settled:]
        return None

    def mark(self, claimed: Path, settled: int) -> None:
        """``settled`` operations of the runs :meth:`claim` returned for ``claimed`` were answered for.

        One short line appended (not fsynced: it guards against this process's
        death, not the machine's), so a replayer killed after this never sends them again.
        """
        progress = self._progress_path(claimed.name.split(_CLAIM, 1)[0])
        if progress is None:
            return
        try:
            fd = os.open(progress, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0), 0o600)
            try:
                os.write(fd, b"%d\n" % (self._skipped.get(claimed, 0) + settled))
            finally:
                os.close(fd)
        except OSError:
            pass  # without it a replayer killed now sends this file's answered runs again: at least once

    def done(self, claimed: Path) -> None:
        """The claimed file's runs were delivered (or dropped and counted)."""
        try:
            claimed.unlink()
        except FileNotFoundError:
            pass
        self._end_progress(claimed)

    def give_back(self, claimed: Path, runs: list[EncodedRun]) -> None:
        """Replay failed for ``runs``: keep them for later, in their original place in the order.

        This process read and sent the file and lived: it is not what killed an
        earlier one, so the name loses its orphan mark.
        """
        original = claimed.name.split(_CLAIM)[0]
        if len(runs) == count_in_name(original):
            os.replace(claimed, claimed.with_name(unmarked(original)))
            self._end_progress(claimed)
            return
        # Part of the file went through: write what is left under the same time prefix.
        prefix = original.split("-", 1)[0]
        name = file_name(prefix, runs)
        tmp = self.dir / f"{_TMP_PREFIX}{os.getpid()}-{name}"
        try:
            tmp.write_bytes(serialize(runs))
            with open(tmp, "rb+") as fh:
                os.fsync(fh.fileno())
            os.rename(tmp, self.dir / name)
            claimed.unlink()
            self._end_progress(claimed)
        except OSError as exc:
            logger.error("could not return %s to the spool: %s", n_runs(sum(1 for r in runs if r.completes)), exc)

    def _progress_path(self, original: str) -> Path | None:
        found = STEM.match(original)
        return self.dir / f"{_PROGRESS}{found.group(1)}" if found else None

    def _settled(self, original: str, ops: int) -> int:
        """Operations of the file ``original`` a replayer recorded as settled before it died (0: none)."""
        progress = self._progress_path(original)
        if progress is None:
            return 0
        try:
            fd = os.open(progress, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
        except OSError:
            return 0
        try:
            tail = os.read(fd, 65536).split(b"\n")
        except OSError:
            return 0
        finally:
            os.close(fd)
        for line in reversed(tail):
            if line.isdigit() and len(line) <= 12:
                settled = int(line)
                return settled if settled <= ops else 0  # more than the file holds: not a record of ours
        return 0

    def _end_progress(self, claimed: Path) -> None:
        self._skipped.pop(claimed, None)
        progress = self._progress_path(claimed.name.split(_CLAIM, 1)[0])
        if progress is not None:
            try:
                os.unlink(progress)
            except OSError:
                pass

    def _set_aside(self, path: Path, original: str, reason: str, why: str) -> None:
        """Move an entry replay must not take again to ``<original>.bad`` and count its runs under ``reason``."""
        bad = self.dir / f"{unmarked(original)}{_BAD}"
        runs = self._runs_in(path, original)
        try:
            os.replace(path, bad)
        except FileNotFoundError:
            return  # another process dealt with it
        except OSError:
            _remove(path)  # cannot be renamed over (a directory in the way): gone is the next best
        self._set_aside_since_trim = True
        self._lose(reason, runs)
        _rl.warning(
            reason,
            "set aside the spool entry %s in %s: %s; %s lost (%s)",
            original,
            self.dir,
            why,
            n_runs(runs),
            reason,
        )

    def _runs_in(self, path: Path, name: str) -> int:
        """The runs lost with the spool entry ``path``, as its ``name`` counts them, but never more than
        it could hold: the name is not proof (anyone who can write here can name a file). A regular
        file holds what its size allows; anything else (a link, say) what a file of ours may hold."""
        try:
            st = os.stat(path, follow_symlinks=False)
        except OSError:
            return 0
        room = st.st_size if stat.S_ISREG(st.st_mode) else self.max_file_bytes
        return min(runs_in_name(name), room // MIN_RUN_BYTES)

    def _trim_set_aside(self) -> None:
        """At most ``_MAX_BAD`` entries set aside: the oldest go (they are kept to be looked at, not forever)."""
        self._set_aside_since_trim = False
        try:
            bad = sorted(e.name for e in os.scandir(self.dir) if e.name.endswith(_BAD))
        except OSError:
            return
        for name in bad[: max(0, len(bad) - _MAX_BAD)]:
            _remove(self.dir / name)

    def dead(self, token: str) -> bool:
        """Whether the owner ``token`` (of a claim, a write-ahead file, an open-runs journal) is proven dead."""
        if token.isdigit():  # an older version's name: a bare pid, and this process has it now if it is ours
            return int(token[:20]) == os.getpid() or not pid_alive(int(token[:20]))
        return not (self.owner.taken and token == self.owner.token) and not alive(self.dir, token)

    def recover(self) -> bool:
        """Return claims and write-ahead files of dead owners to the pool; remove what no one will finish.

        Called at start and, by the delivery, now and then. True when a file was returned.
        """
        now = time.time()
        try:
            names = [(e.name, e.path) for e in os.scandir(self.dir)]
        except OSError:
            return False
        verdicts: dict[str, bool] = {}

        def dead(token: str) -> bool:
            if token not in verdicts:
                verdicts[token] = self.dead(token)
            return verdicts[token]

        stems = {found.group(1) for name, _ in names if (found := STEM.match(name))}
        returned = False
        for name, path in names:
            try:
                if name.endswith(_BAD):
                    continue
                if _CLAIM in name:
                    original, token = name.split(_CLAIM, 1)
                    if dead(token):
                        if is_marked(original):
                            # Returned once already, and the next process died holding it too.
                            self._set_aside(
                                Path(path), original, "spool_crash_loop", "two processes in a row died replaying it"
                            )
                        else:
                            os.replace(path, self.dir / marked(original))
                            returned = True
                elif _WAL in name:
                    original, token = name.split(_WAL, 1)
                    if dead(token):
                        # Written ahead by a process that died before its answer: never replayed, not suspect.
                        os.replace(path, self.dir / original)
                        returned = True
                elif name.startswith(_TMP_PREFIX):
                    pid = int(name[len(_TMP_PREFIX) :].split("-", 1)[0])
                    if not pid_alive(pid) or now - os.stat(path, follow_symlinks=False).st_mtime > _STALE_TMP_S:
                        os.unlink(path)
                elif name.startswith(_PROGRESS):
                    if name[len(_PROGRESS) :] not in stems:
                        os.unlink(path)  # its file is done: its replayer died between the two unlinks
                elif name.startswith(LOCK_PREFIX):
                    token = name[len(LOCK_PREFIX) :]
                    if dead(token):
                        os.unlink(path)
            except (ValueError, OSError):
                continue
        return returned


def _read(path: Path, cap: int) -> bytes:
    """The bytes of a claimed spool file, if it is one the writer could have written; else :class:`_Refused`."""
    try:
        fd = os.open(path, _OPEN_FLAGS)
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.EMLINK):  # EMLINK: O_NOFOLLOW's answer on some BSDs
            raise _Refused("spool_symlink", "a symbolic link, not followed") from None
        if exc.errno == errno.ENXIO:  # a socket
            raise _Refused("spool_not_regular", "not a regular file") from None
        raise
    try:
        st = os.fstat(fd)  # the file opened, not what the name pointed to a moment before
        if not stat.S_ISREG(st.st_mode):
            raise _Refused("spool_not_regular", f"not a regular file but {_kind(st.st_mode)}")
        if st.st_size > cap:
            raise _Refused("spool_too_large", f"{st.st_size} bytes, more than a spool file holds ({cap})")
        chunks: list[bytes] = []
        total = 0
        while total <= cap:
            # The size fstat gave, then a little more to see the end (or a file still growing).
            want = st.st_size - total if total < st.st_size else 65536
            chunk = os.read(fd, max(1, min(want, cap + 1 - total, _READ_CHUNK)))
            if not chunk:
                break
            chunks.append(chunk)
            total += len(chunk)
        if total > cap:
            raise _Refused("spool_too_large", f"more than a spool file holds ({cap} bytes)")
        return b"".join(chunks)
    finally:
        os.close(fd)


def _kind(mode: int) -> str:
    for test, kind in (
        (stat.S_ISFIFO, "a FIFO"),
        (stat.S_ISDIR, "a directory"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
        (stat.S_ISSOCK, "a socket"),
    ):
        if test(mode):
            return kind
    return f"mode {mode:o}"


def _remove(path: Path) -> None:
    try:
        os.unlink(path)
    except IsADirectoryError:
        try:
            os.rmdir(path)  # only an empty one: never a recursive delete of what we did not make
        except OSError:
            pass
    except OSError:
        pass


