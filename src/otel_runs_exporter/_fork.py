"""What ``fork`` leaves behind, put right in the child.

``fork`` copies only the thread that called it. A lock that another thread
(our worker, the SDK's BatchSpanProcessor thread) held at that moment stays
held in the child, where no thread will ever release it: the child's first
span to need it hangs, and its ``force_flush`` times out. So every lock that a
background thread of ours takes is registered here and replaced in the child,
and every object whose state belongs to the parent (queues, batches in flight)
starts clean there.

A few objects also act in the parent just before the fork (:func:`prepare_in_parent`):
what the child will inherit that the parent cannot follow any more (a run the child
may add to) is settled while both are still one process.

    >>> import threading
    >>> class Holder:
    ...     def __init__(self):
    ...         self._lock = threading.Lock()
    ...         renew_in_child(self)
    ...     def _after_fork_in_child(self):
    ...         self._lock = threading.Lock()
"""

from __future__ import annotations

import logging
import os
import threading
import weakref
from typing import Any, Callable, Generic, TypeVar

__all__ = ["renew_in_child", "prepare_in_parent", "on_fork_in_child", "ForkSafeLock", "WeakRegistry"]

_T = TypeVar("_T")

logger = logging.getLogger(__name__)

# Weak: registering an object here must not keep it alive.
_objects: "weakref.WeakSet[Any]" = weakref.WeakSet()
_preparing: "weakref.WeakSet[Any]" = weakref.WeakSet()
_callbacks: list[Callable[[], None]] = []


def renew_in_child(obj: Any) -> None:
    """Call ``obj._after_fork_in_child()`` in every child forked from now on."""
    _objects.add(obj)


def prepare_in_parent(obj: Any) -> None:
    """Call ``obj._before_fork()`` in the parent, on the forking thread, just before every fork."""
    _preparing.add(obj)


def on_fork_in_child(callback: Callable[[], None]) -> None:
    """Call ``callback()`` in every child, before any object is renewed (for module-level locks)."""
    _callbacks.append(callback)


class ForkSafeLock:
    """A module-level lock that every forked child gets anew; used as a ``threading.Lock``.

    >>> _lock = ForkSafeLock()
    >>> with _lock:
    ...     pass
    """

    __slots__ = ("_lock",)

    def __init__(self) -> None:
        self._lock = threading.Lock()
        on_fork_in_child(self._renew)

    def _renew(self) -> None:
        self._lock = threading.Lock()

    def acquire(self, blocking: bool = True, timeout: float = -1) -> bool:
        return self._lock.acquire(blocking, timeout)

    def release(self) -> None:
        self._lock.release()

    def __enter__(self) -> bool:
        return self._lock.acquire()

    def __exit__(self, *exc: object) -> None:
        self._lock.release()


class WeakRegistry(Generic[_T]):
    """A process-wide set of live objects that other modules look up, safe to use from any thread.

    Weak: an object nobody else holds is neither kept alive nor offered work by being registered.
    ``lock`` guards the set (and is renewed in a forked child); :meth:`live` hands out a copy, so
    callers work on the objects without holding it.

    >>> class Path: pass
    >>> paths: WeakRegistry[Path] = WeakRegistry()
    >>> path = Path(); paths.add(path)
    >>> paths.live() == [path]
    True
    """

    __slots__ = ("lock", "_items")

    def __init__(self) -> None:
        self.lock = ForkSafeLock()
        self._items: "weakref.WeakSet[_T]" = weakref.WeakSet()

    def add(self, item: _T) -> None:
        with self.lock:
            self._items.add(item)

    def discard(self, item: _T) -> None:
        with self.lock:
            self._items.discard(item)

    def live(self) -> list[_T]:
        with self.lock:
            return list(self._items)


def _in_child() -> None:
    # Module-level locks first: a renewed object may start a thread that takes them.
    steps: list[Callable[[], None]] = [*_callbacks, *(obj._after_fork_in_child for obj in list(_objects))]
    for step in steps:
        try:
            step()
        except Exception:  # noqa: BLE001 - never break the application's fork
            logger.exception("could not reset %r after fork", step)


def _before() -> None:
    for obj in list(_preparing):
        try:
            obj._before_fork()
        except Exception:  # noqa: BLE001 - never break the application's fork
            logger.exception("could not prepare %r for fork", obj)


if hasattr(os, "register_at_fork"):
    os.register_at_fork(before=_before, after_in_child=_in_child)
