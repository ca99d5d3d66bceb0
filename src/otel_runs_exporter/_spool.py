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
removed and their runs counted as dropped (``spool_full``). Only encoded run
payloads are written: never the API key or any header.

File layout: one JSON header line describing the runs and their parts'
lengths, then the parts' bytes back to back.
"""

from __future__ import annotations

import logging
import os
import time
import threading
from pathlib import Path

import orjson

from ._encode import EncodedRun, encoded

__all__ = ["Spool"]

logger = logging.getLogger(__name__)

_SUFFIX = ".spool"
_CLAIM = ".claimed-"
_TMP_PREFIX = ".tmp-"
_STALE_TMP_S = 3600.0


class SpoolCorrupt(ValueError):
    """A spool file that does not parse (it should not happen; such a file is set aside)."""


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
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
    for op, run_id, dotted_order, completes, parts_meta in entries:
        parts = []
        for name, length in parts_meta:
            payload = data[offset : offset + length]
            if len(payload) != length:
                raise SpoolCorrupt("truncated payload")
            parts.append((name, payload))
            offset += length
        runs.append(encoded(op, run_id, parts, dotted_order, completes))
    if offset != len(data):
        raise SpoolCorrupt("trailing bytes")
    return runs


class Spool:
    """One spool directory, as seen by one process."""

    def __init__(self, directory: str, max_bytes: int) -> None:
        self.dir = Path(directory)
        self.dir.mkdir(parents=True, exist_ok=True)
        self._max_bytes = max_bytes
        self._losses: dict[str, int] = {}
        self._losses_lock = threading.Lock()
        self._recover()

    def take_losses(self) -> dict[str, int]:
        """Runs lost on the spool's side since the last call, by reason (``spool_full``, ``spool_corrupt``)."""
        with self._losses_lock:
            losses, self._losses = self._losses, {}
        return losses

    def _lose(self, reason: str, runs: int) -> None:
        with self._losses_lock:
            self._losses[reason] = self._losses.get(reason, 0) + runs

    def __repr__(self) -> str:
        return f"Spool({str(self.dir)!r})"

    # --- writing ---------------------------------------------------------------

    def write(self, runs: list[EncodedRun]) -> bool:
        """Write ``runs`` as one file, atomically; False (logged) if the disk refused."""
        if not runs:
            return True
        data = serialize(runs)
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
            logger.error("could not write %d runs to the spool at %s: %s", len(runs), self.dir, exc)
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
            try:
                path.unlink()
            except FileNotFoundError:
                continue  # another process replayed or removed it
            total -= size
            dropped = _runs_in_name(path.name)
            self._lose("spool_full", dropped)
            logger.warning("the spool is full (%d bytes); dropped its oldest file with %d runs", self._max_bytes, dropped)

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
                    out.append((Path(entry.path), entry.stat().st_size))
                except FileNotFoundError:
                    continue
        out.sort(key=lambda item: item[0].name)  # names start with the time: oldest first
        return out

    def pending(self) -> int:
        """Files waiting to be replayed (by any process)."""
        return len(self._files())

    def claim(self) -> tuple[Path, list[EncodedRun]] | None:
        """Take the oldest file for replay; None when there is nothing to take."""
        for path, _ in self._files():
            claimed = path.with_name(f"{path.name}{_CLAIM}{os.getpid()}")
            try:
                os.rename(path, claimed)
            except FileNotFoundError:
                continue  # another process claimed it first
            try:
                return claimed, deserialize(claimed.read_bytes())
            except (SpoolCorrupt, OSError) as exc:
                bad = claimed.with_name(path.name + ".bad")
                os.replace(claimed, bad)
                dropped = _runs_in_name(path.name)
                self._lose("spool_corrupt", dropped)
                logger.error("set aside an unreadable spool file %s (%s); %d runs lost", bad.name, exc, dropped)
        return None

    def done(self, claimed: Path) -> None:
        """The claimed file's runs were delivered (or dropped and counted)."""
        try:
            claimed.unlink()
        except FileNotFoundError:
            pass

    def give_back(self, claimed: Path, runs: list[EncodedRun]) -> None:
        """Replay failed for ``runs``: keep them for later, in their original place in the order."""
        original = claimed.name.split(_CLAIM)[0]
        if len(runs) == _count_in_name(original):
            os.replace(claimed, claimed.with_name(original))
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
            logger.error("could not return %d runs to the spool: %s", len(runs), exc)

    def _recover(self) -> None:
        """Return claims of dead processes; remove temporary files no writer will finish."""
        now = time.time()
        for entry in os.scandir(self.dir):
            name = entry.name
            try:
                if _CLAIM in name and not name.endswith(".bad"):
                    pid = int(name.rsplit(_CLAIM, 1)[1])
                    if pid != os.getpid() and not _pid_alive(pid):
                        os.replace(entry.path, self.dir / name.split(_CLAIM)[0])
                elif name.startswith(_TMP_PREFIX):
                    pid = int(name[len(_TMP_PREFIX) :].split("-", 1)[0])
                    if not _pid_alive(pid) or now - entry.stat().st_mtime > _STALE_TMP_S:
                        os.unlink(entry.path)
            except (ValueError, OSError):
                continue


def _file_name(prefix: str, runs: list[EncodedRun]) -> str:
    # The name carries the operation count (to tell a partial give-back) and the
    # count of runs it completes (what is lost if the file is), so neither needs a read.
    completing = sum(1 for r in runs if r.completes)
    return f"{prefix}-{os.getpid()}-{os.urandom(4).hex()}-n{len(runs)}-c{completing}{_SUFFIX}"


def _count_in_name(name: str) -> int:
    """Operations in a spool file, from its name."""
    try:
        return int(name.split("-n", 1)[1].split("-", 1)[0].split(".", 1)[0])
    except (IndexError, ValueError):
        return 0


def _runs_in_name(name: str) -> int:
    """Runs a spool file completes, from its name (files of older versions: their operations)."""
    try:
        return int(name.rsplit("-c", 1)[1].split(".", 1)[0])
    except (IndexError, ValueError):
        return _count_in_name(name)
