"""Who holds what in a spool directory that several processes share, and proof that a holder is dead.

Pre-fork servers and ``multiprocessing`` workers share one spool directory, so a
file claimed by a process, a batch it wrote ahead, or a run it left open is
taken over only when that process is *proven* dead. A pid is no proof: after a
``kill -9`` a restarted container gives its new process the same small pid, and
any process may get a dead one's pid later.

So a process that holds anything there holds a lock for its lifetime: the file
``.owner-<token>`` (``token`` is ``<pid>.<8 hex digits>``), locked with
``flock(LOCK_EX)``. The kernel drops the lock when the process ends, however
it ends (``kill -9`` and an OOM kill included), and a new process never holds
an old token's lock. :func:`alive` asks for the lock without waiting: granted,
the owner is dead. Names of older versions carry a bare pid; for those the pid
is all there is (:func:`pid_alive`).

A forked child inherits the open lock file (the same lock, as ``flock``
locks belong to the open file): it closes its copy (:meth:`Owner._after_fork_in_child`)
and takes a token of its own when it needs one, so the parent's death shows
even while the child lives. Where ``fcntl`` is missing the pid is used.

    >>> import tempfile
    >>> d = tempfile.mkdtemp()
    >>> me = Owner(d)
    >>> alive(d, me.token), alive(d, "1.00000000")
    (True, False)
"""

from __future__ import annotations

import os
import re
import threading
from pathlib import Path

from ._fork import renew_in_child

try:
    import fcntl
except ImportError:  # pragma: no cover - not on Windows
    fcntl = None  # type: ignore[assignment]

__all__ = ["Owner", "alive", "pid_alive", "LOCK_PREFIX", "TOKEN"]

LOCK_PREFIX = ".owner-"
TOKEN = re.compile(r"(\d{1,10})\.([0-9a-f]{8})")
_OPEN_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY | getattr(os, "O_CLOEXEC", 0)


def pid_alive(pid: int) -> bool:
    """Whether a process with this pid exists (names of older versions: no better proof there)."""
    if pid <= 0:
        return False  # never a name of ours: 0 and below would ask about process groups
    try:
        os.kill(pid, 0)
    except (ProcessLookupError, OverflowError):  # past any pid: a name not ours, no process holds it
        return False
    except PermissionError:
        return True
    return True


def alive(directory: str | Path, token: str) -> bool:
    """Whether the owner ``token`` (a claim's, a write-ahead file's, an open-runs journal's) still lives.

    A bare pid (names of older versions) is asked of the kernel; a token, of its
    lock. A token without a lock file, or whose lock is free, is dead; one that
    is not a token of ours holds nothing.
    """
    if token.isdigit():
        return pid_alive(int(token[:20]))
    found = TOKEN.fullmatch(token)
    if found is None:
        return False
    if fcntl is None:  # pragma: no cover
        return pid_alive(int(found.group(1)))
    path = os.path.join(directory, LOCK_PREFIX + token)
    try:
        fd = os.open(path, _OPEN_FLAGS)
    except FileNotFoundError:
        return False
    except OSError:
        return True  # cannot tell (a FIFO planted under the name, say): never take over on a guess
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except OSError:
            return True  # EWOULDBLOCK: held, so its owner lives (any other error: cannot tell, the same)
        return False
    finally:
        os.close(fd)


class Owner:
    """This process's lock in ``directory``, taken when first needed and held until the process ends.

    :attr:`token` names what this process holds there. :meth:`release` (a normal
    end, nothing held any more) unlocks and removes the lock file.
    """

    def __init__(self, directory: str | Path) -> None:
        self._dir = Path(directory)
        self._lock = threading.Lock()
        self._fd: int | None = None
        self._token: str | None = None
        renew_in_child(self)

    @property
    def token(self) -> str:
        with self._lock:
            if self._token is None:
                self._token = self._take()
            return self._token

    @property
    def taken(self) -> bool:
        return self._token is not None

    def _take(self) -> str:
        while True:
            token = f"{os.getpid()}.{os.urandom(4).hex()}"
            path = self._dir / (LOCK_PREFIX + token)
            try:
                fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0), 0o600)
            except FileExistsError:
                continue  # a token drawn twice: draw again
            except OSError:
                return token  # a directory we cannot write to: a token without a lock reads as dead, holds nothing
            if fcntl is not None:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except OSError:
                    os.close(fd)
                    continue
            self._fd = fd
            return token

    def release(self) -> None:
        """Nothing of this process is left in the directory: let go of the lock and its file."""
        with self._lock:
            fd, token = self._fd, self._token
            self._fd = self._token = None
        if token is not None:
            try:
                os.unlink(self._dir / (LOCK_PREFIX + token))
            except OSError:
                pass
        if fd is not None:
            os.close(fd)

    def _after_fork_in_child(self) -> None:
        # The lock is the parent's (the open file is shared): close our copy, never unlock or remove it.
        fd, self._fd, self._token = self._fd, None, None
        self._lock = threading.Lock()
        if fd is not None:
            try:
                os.close(fd)
            except OSError:
                pass
