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

File layout: one JSON header line describing the runs and their parts'
lengths, then the parts' bytes back to back.
"""

from __future__ import annotations

import errno
import logging
import os
import re
import stat
import time
import threading
from pathlib import Path

import orjson

from ._encode import EncodedRun, encoded
from ._logging import RateLimitedLog, n_runs

__all__ = ["Spool", "waiting"]

logger = logging.getLogger(__name__)
_rl = RateLimitedLog(logger)

_SUFFIX = ".spool"
_CLAIM = ".claimed-"
_TMP_PREFIX = ".tmp-"
_BAD = ".bad"
_ORPHAN = "-orphan"  # before the suffix: returned once from a process that died holding it
_STALE_TMP_S = 3600.0
_MAX_BAD = 32
# A spool file is never something to wait on, follow, or take as a terminal.
_OPEN_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY | getattr(os, "O_CLOEXEC", 0)
_READ_CHUNK = 16 * 1024 * 1024


class SpoolCorrupt(ValueError):
    """A spool file that does not parse (it should not happen; such a file is set aside)."""


class _Refused(Exception):
    """A directory entry the replay will not read: ``reason`` is the drop reason, ``why`` says what it is."""

    def __init__(self, reason: str, why: str) -> None:
        super().__init__(why)
        self.reason = reason
        self.why = why


def _pid_alive(pid: int) -> bool:
    if pid <= 0:
        return False  # never a name of ours: 0 and below would ask about process groups
    try:
        os.kill(pid, 0)
    except (ProcessLookupError, OverflowError):  # past any pid: a name not ours, no process holds it
        return False
    except PermissionError:
        return True
    return True


def serialize(runs: list[EncodedRun]) -> bytes:
    """The bytes of one spool file."""
    header = [
        [r.op, r.run_id, r.dotted_order, r.completes, [[name, len(payload)] for name, payload in r.parts]] for r in runs
    ]
    return orjson.dumps({"v": 1, "runs": header}) + b"\n" + b"".join(p for r in runs for _, p in r.parts)


def deserialize(data: bytes) -> list[EncodedRun]:
    """Runs back from a spool file; raises :class:`SpoolCorrupt` if it is not whole."""
    newline = data.find(b"\n")
    if newline < 0:
        raise SpoolCorrupt("no header line")
    try:
        header = orjson.loads(data[:newline])
        entries = header["runs"]
    except (orjson.JSONDecodeError, KeyError, TypeError) as exc:
        raise SpoolCorrupt(f"bad header: {exc}") from None
    offset = newline + 1
    runs: list[EncodedRun] = []
    try:
        for op, run_id, dotted_order, completes, parts_meta in entries:
            if not (isinstance(op, str) and isinstance(run_id, str) and isinstance(dotted_order, str)):
                raise SpoolCorrupt("bad header entry")
            parts = []
            for name, length in parts_meta:
                if not isinstance(name, str) or not isinstance(length, int) or length < 0:
                    raise SpoolCorrupt("bad part entry")
                payload = data[offset : offset + length]
                if len(payload) != length:
                    raise SpoolCorrupt("truncated payload")
                parts.append((name, payload))
                offset += length
            if not parts:
                raise SpoolCorrupt("a run without parts")
            runs.append(encoded(op, run_id, parts, dotted_order, bool(completes)))
    except (TypeError, ValueError) as exc:  # the header's shape is not ours
        if isinstance(exc, SpoolCorrupt):
            raise
        raise SpoolCorrupt(f"bad header: {exc}") from None
    if offset != len(data):
        raise SpoolCorrupt("trailing bytes")
    return runs


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
        self._losses: dict[str, int] = {}
        self._losses_lock = threading.Lock()
        self._set_aside_since_trim = False  # one look at the directory per claim, not one per entry
        self._recover()
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

    def write(self, runs: list[EncodedRun]) -> list[EncodedRun]:
        """Write ``runs`` as files of at most a batch each, atomically; returns the runs not written.

        Empty when all were. What the disk refuses (logged) is returned with
        every run after it, in order; a run too large for any file (logged) is
        returned alone and the rest are still written.
        """
        left: list[EncodedRun] = []
        groups = _groups(runs, self._batch_bytes) if self._batch_bytes else [list(runs)] if runs else []
        while groups:
            group = groups.pop(0)
            data = serialize(group)
            if len(data) > self.max_file_bytes:
                if len(group) > 1:
                    half = len(group) // 2
                    groups[:0] = [group[:half], group[half:]]
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
            if not self._write_file(group, data):
                left.extend(group)
                for rest in groups:
                    left.extend(rest)
                break
        return left

    def _write_file(self, runs: list[EncodedRun], data: bytes) -> bool:
        name = _file_name(f"{time.time_ns():020d}", runs)
        tmp = self.dir / f"{_TMP_PREFIX}{os.getpid()}-{name}"
        try:
            self._make_room(len(data))
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            try:
                view = memoryview(data)
                while view:
                    view = view[os.write(fd, view) :]
                os.fsync(fd)
            finally:
                os.close(fd)
            os.rename(tmp, self.dir / name)
            self._fsync_dir()
            return True
        except OSError as exc:
            logger.error(
                "could not write %s to the spool at %s: %s", n_runs(sum(1 for r in runs if r.completes)), self.dir, exc
            )
            try:
                tmp.unlink()
            except OSError:
                pass
            return False

    def _make_room(self, incoming: int) -> None:
        files = self._files()
        total = sum(size for _, size in files)
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
            logger.warning("the spool is full (%d bytes); dropped its oldest file with %s", self._max_bytes, n_runs(dropped))

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
            if entry.name.endswith(_SUFFIX) and not entry.name.startswith("."):
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
        """
        try:
            return self._claim()
        finally:
            if self._set_aside_since_trim:
                self._trim_set_aside()

    def _claim(self) -> tuple[Path, list[EncodedRun]] | None:
        for path, _ in self._files():
            claimed = path.with_name(f"{path.name}{_CLAIM}{os.getpid()}")
            try:
                os.rename(path, claimed)
            except FileNotFoundError:
                continue  # another process claimed it first
            except OSError as exc:
                self._set_aside(path, path.name, "spool_corrupt", f"cannot be claimed ({exc.strerror})")
                continue
            try:
                return claimed, deserialize(_read(claimed, self.max_file_bytes))
            except _Refused as refused:
                self._set_aside(claimed, path.name, refused.reason, refused.why)
            except (SpoolCorrupt, OSError) as exc:
                self._set_aside(claimed, path.name, "spool_corrupt", f"unreadable ({exc})")
        return None

    def done(self, claimed: Path) -> None:
        """The claimed file's runs were delivered (or dropped and counted)."""
        try:
            claimed.unlink()
        except FileNotFoundError:
            pass

    def give_back(self, claimed: Path, runs: list[EncodedRun]) -> None:
        """Replay failed for ``runs``: keep them for later, in their original place in the order.

        This process read and sent the file and lived: it is not what killed an
        earlier one, so the name loses its orphan mark.
        """
        original = claimed.name.split(_CLAIM)[0]
        if len(runs) == _count_in_name(original):
            os.replace(claimed, claimed.with_name(_unmarked(original)))
            return
        # Part of the file went through: write what is left under the same time prefix.
        prefix = original.split("-", 1)[0]
        name = _file_name(prefix, runs)
        tmp = self.dir / f"{_TMP_PREFIX}{os.getpid()}-{name}"
        try:
            tmp.write_bytes(serialize(runs))
            with open(tmp, "rb+") as fh:
                os.fsync(fh.fileno())
            os.rename(tmp, self.dir / name)
            claimed.unlink()
        except OSError as exc:
            logger.error("could not return %s to the spool: %s", n_runs(sum(1 for r in runs if r.completes)), exc)

    def _set_aside(self, path: Path, original: str, reason: str, why: str) -> None:
        """Move an entry replay must not take again to ``<original>.bad`` and count its runs under ``reason``."""
        bad = self.dir / f"{_unmarked(original)}{_BAD}"
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
        return min(_runs_in_name(name), room // _MIN_RUN_BYTES)

    def _trim_set_aside(self) -> None:
        """At most ``_MAX_BAD`` entries set aside: the oldest go (they are kept to be looked at, not forever)."""
        self._set_aside_since_trim = False
        try:
            bad = sorted(e.name for e in os.scandir(self.dir) if e.name.endswith(_BAD))
        except OSError:
            return
        for name in bad[: max(0, len(bad) - _MAX_BAD)]:
            _remove(self.dir / name)

    def _recover(self) -> None:
        """Return claims of dead processes; remove temporary files no writer will finish."""
        now = time.time()
        for entry in os.scandir(self.dir):
            name = entry.name
            try:
                if _CLAIM in name and not name.endswith(_BAD):
                    pid = int(name.rsplit(_CLAIM, 1)[1])
                    if pid != os.getpid() and not _pid_alive(pid):
                        original = name.split(_CLAIM)[0]
                        if _is_marked(original):
                            # Returned once already, and the next process died holding it too.
                            self._set_aside(
                                Path(entry.path), original, "spool_crash_loop", "two processes in a row died replaying it"
                            )
                        else:
                            os.replace(entry.path, self.dir / _marked(original))
                elif name.startswith(_TMP_PREFIX):
                    pid = int(name[len(_TMP_PREFIX) :].split("-", 1)[0])
                    if not _pid_alive(pid) or now - entry.stat(follow_symlinks=False).st_mtime > _STALE_TMP_S:
                        os.unlink(entry.path)
            except (ValueError, OSError):
                continue


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


def _groups(runs: list[EncodedRun], batch_bytes: int) -> list[list[EncodedRun]]:
    """``runs`` in order, cut into groups of at most ``batch_bytes`` (a larger run alone)."""
    groups: list[list[EncodedRun]] = []
    group: list[EncodedRun] = []
    size = 0
    for run in runs:
        if group and size + run.size > batch_bytes:
            groups.append(group)
            group, size = [], 0
        group.append(run)
        size += run.size
    if group:
        groups.append(group)
    return groups


def _marked(name: str) -> str:
    return name[: -len(_SUFFIX)] + _ORPHAN + _SUFFIX if name.endswith(_SUFFIX) else name


def _unmarked(name: str) -> str:
    return name.replace(_ORPHAN + _SUFFIX, _SUFFIX)


def _is_marked(name: str) -> bool:
    return name.endswith(_ORPHAN + _SUFFIX)


def _file_name(prefix: str, runs: list[EncodedRun]) -> str:
    # The name carries the operation count (to tell a partial give-back) and the
    # count of runs it completes (what is lost if the file is), so neither needs a read.
    completing = sum(1 for r in runs if r.completes)
    return f"{prefix}-{os.getpid()}-{os.urandom(4).hex()}-n{len(runs)}-c{completing}{_SUFFIX}"


# The fewest bytes a run takes in a spool file: its entry in the header alone holds its 36-character id.
_MIN_RUN_BYTES = 40
_COUNTS = re.compile(r"-n(\d{1,12})(?:-c(\d{1,12}))?(?:-|\.)")


def waiting(directory: str) -> tuple[int, int]:
    """(files, runs) waiting in a spool directory, read from the names only: nothing is opened or changed.

    For ``otel-runs doctor``; a directory that cannot be listed holds nothing it can count.
    """
    try:
        names = [e.name for e in os.scandir(directory) if e.name.endswith(_SUFFIX) and not e.name.startswith(".")]
    except OSError:
        return 0, 0
    return len(names), sum(_runs_in_name(name) for name in names)


def _count_in_name(name: str) -> int:
    """Operations in a spool file, from its name."""
    found = _COUNTS.search(name)
    return int(found.group(1)) if found else 0


def _runs_in_name(name: str) -> int:
    """Runs a spool file completes, from its name (files of older versions: their operations)."""
    found = _COUNTS.search(name)
    if found is None:
        return 0
    return int(found.group(2) if found.group(2) is not None else found.group(1))
