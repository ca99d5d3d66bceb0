"""How large an answer of the local service may be, and how a page of items is cut to fit.

Whatever is stored, every answer is bounded in bytes, and so is the memory that
builds them (:class:`AnswerBounds`, the service's ``max_answer_bytes``,
``max_run_bytes`` and ``answer_memory_bytes``):

- a page of runs holds runs while its JSON stays within ``page_bytes`` (16 MiB by
  default); past it the page ends early and its cursor goes on from there (fewer
  runs per page when they are large). A run that alone is larger comes alone in its
  page: it cannot be larger than ``item_bytes``, since ingest refuses to store a run
  past ``max_run_bytes``. One that still is (its computed fields, an old database) is
  a 413 naming its largest fields and how to select fewer;
- a list the client pages by offset (``GET /sessions``, ``GET /feedback``: the
  service's SDK stops at a short page, so a page cut short would lose items
  silently) is a 413 past ``page_bytes`` saying to ask for fewer; the other lists
  (violations, the check report, bulk exports) are cut by count where they are
  built, and the framing refuses any answer past ``item_bytes`` all the same;
- runs are serialized one at a time as they are added (:class:`Page`) and the
  answer is sent as those pieces (:class:`Pieces`), never joined into one copy;
- all requests together load at most ``answer_memory_bytes`` of stored runs at once
  (:class:`AnswerBudget`): a page that cannot have more ends early, a request that
  cannot have any waits a few seconds, then is a 503 with ``Retry-After``.

Pure apart from the budget's lock; the handlers decide what goes in a page.

>>> page = Page(AnswerBounds(page_bytes=20, item_bytes=40))
>>> page.add({"id": "a", "x": "0123456789"}), page.add({"id": "b"}), len(page)
(True, False, 1)
>>> b"".join(page.body("runs", {"cursors": {"next": None}}).parts)
b'{"runs":[{"id":"a","x":"0123456789"}],"cursors":{"next":null}}'
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar

from ._jsonio import LARGE, dump
from ._reply import Refuse, detail

if TYPE_CHECKING:
    from ._routing import Request
    from ._store import RunKey

T = TypeVar("T")
Read = Callable[[str], "dict[str, Any] | None"]
"""Reads one stored run by id (the store's :meth:`~._store.RunStore.load_run`)."""

__all__ = [
    "MiB",
    "MAX_ANSWER_BYTES",
    "ANSWER_MEMORY_BYTES",
    "BUDGET_WAIT_S",
    "AnswerBounds",
    "AnswerBudget",
    "Page",
    "RunPage",
    "Pieces",
    "fill",
    "peek",
    "one",
    "bounded_list",
    "too_large",
    "busy",
]

MiB = 1 << 20
MAX_ANSWER_BYTES = 16 * MiB
"""A page's JSON at most (``LocalService(max_answer_bytes=...)``)."""
ANSWER_MEMORY_BYTES = 128 * MiB
"""Stored runs being answered at once, all requests together (``LocalService(answer_memory_bytes=...)``)."""
BUDGET_WAIT_S = 10.0
"""How long a read waits for room in the budget before its 503."""
_ITEM_SLACK = 1 * MiB  # computed fields a run answers beyond what is stored (ids of its ancestors, links, stats)




@dataclass(frozen=True)
class AnswerBounds:
    """``page_bytes``: a page's JSON at most; ``item_bytes``: any answer at most, a lone item included."""

    page_bytes: int = MAX_ANSWER_BYTES
    item_bytes: int = MAX_ANSWER_BYTES

    @classmethod
    def build(cls, max_answer_bytes: int, max_run_bytes: int) -> AnswerBounds:
        """The bounds of a service whose pages hold ``max_answer_bytes`` and whose runs are at most ``max_run_bytes``."""
        if max_answer_bytes < 1024:
            raise ValueError(f"max_answer_bytes must be at least 1024, got {max_answer_bytes!r}")
        return cls(max_answer_bytes, max(max_answer_bytes, max_run_bytes + min(_ITEM_SLACK, max_answer_bytes)))


@dataclass(frozen=True)
class Pieces:
    """JSON sent as the pieces it was built from (``size`` bytes in all), so a page is never copied whole."""

    parts: tuple[bytes, ...]
    size: int


def _wrap(key: str | None, items: list[bytes], rest: Mapping[str, Any]) -> Pieces:
    """``{"<key>": [items], **rest}`` (a bare list without a key) as pieces."""
    parts: list[bytes] = [b"[" if key is None else b'{"' + key.encode() + b'":[']
    for index, item in enumerate(items):
        if index:
            parts.append(b",")
        parts.append(item)
    if key is None:
        parts.append(b"]")
    else:
        tail = dump(dict(rest), large=False) if rest else b"{}"
        parts.append(b"]" + (b"," + tail[1:] if rest else b"}"))
    return Pieces(tuple(parts), sum(len(p) for p in parts))


class Page:
    """The items of one answer, each serialized as it is added, while the page stays within its bound.

    The first item is always taken (a page makes progress), up to ``item_bytes``; past
    that :meth:`add` raises the 413 of :func:`too_large`.
    """

    def __init__(self, bounds: AnswerBounds) -> None:
        self.bounds = bounds
        self.items: list[bytes] = []
        self.size = 0

    def __len__(self) -> int:
        return len(self.items)

    def add(self, item: Any, what: str = "run", large: bool = True) -> bool:
        """Take ``item`` if it fits; False (not taken) when it would carry the page past its bound.

        ``large=False`` says the item is known to be small (:func:`dump`).
        """
        piece = dump(item, large)
        if self.items and self.size + len(piece) + 1 > self.bounds.page_bytes:
            return False
        if len(piece) > self.bounds.item_bytes:
            raise too_large(item, len(piece), self.bounds.item_bytes, what)
        self.items.append(piece)
        self.size += len(piece) + 1
        return True

    def body(self, key: str | None, rest: Mapping[str, Any] | None = None) -> Pieces:
        """The answer: ``{"<key>": [the items], **rest}``, or the bare list when ``key`` is None."""
        return _wrap(key, self.items, rest or {})

    def only(self) -> Pieces:
        """The answer that is the page's one item itself (a route that answers one run)."""
        return Pieces((self.items[0],), len(self.items[0]))


class RunPage(Page):
    """A :class:`Page` of stored runs: each loaded only once the answer budget has room for its stored size.

    ``load(key, read)`` reserves the run's size and calls ``read()`` (the store's
    :meth:`~._store.RunStore.load_run`); None when the budget has no room for it, so the
    page ends before it (a 503 of :func:`busy` when the page has nothing yet). ``add``
    keeps of the reservation what the run's piece of the answer weighs.
    """

    def __init__(self, bounds: AnswerBounds, request: Request) -> None:
        super().__init__(bounds)
        self._request = request
        self._loaded = 0
        self.full = False
        """No room was left in the budget for the next run: the page ends where it is."""

    def load(self, key: RunKey, read: Read) -> dict[str, Any] | None:
        if not self._request.reserve(key.size, self._request.stopping):
            if not self.items:
                raise busy()
            self.full = True
            return None
        self._loaded = key.size
        run = read(key.run_id)
        if run is None:
            self._request.give_back(self._loaded)
        return run

    def add(self, item: Any, what: str = "run", large: bool = True) -> bool:
        loaded, self._loaded = self._loaded, 0
        try:
            taken = super().add(item, what, large and loaded > LARGE)
        except Refuse:
            self._request.give_back(loaded)
            raise
        self._request.give_back(loaded - len(self.items[-1]) if taken else loaded)
        return taken


def fill(
    page: RunPage, keys: Iterable[RunKey], read: Read, shape: Callable[[RunKey, dict[str, Any]], Any]
) -> tuple[RunKey | None, bool]:
    """Add the runs of ``keys``, in order, shaped, while they fit: the last one added, and whether the page was cut
    before the end of ``keys`` (its cursor then goes on from that last one). A run gone since is skipped."""
    last = None
    for key in keys:
        run = page.load(key, read)
        if run is None:
            if page.full:
                return last, True
            continue
        if not page.add(shape(key, run)):
            return last, True
        last = key
    return last, False


def peek(request: Request, key: RunKey, read: Read, use: Callable[[dict[str, Any]], T]) -> T | None:
    """``use(run)`` of one stored run read within the answer budget (what a summary takes of it, not the run);
    None if it is gone. A 503 of :func:`busy` when there is no room for it."""
    if not request.reserve(key.size, request.stopping):
        raise busy()
    try:
        run = read(key.run_id)
        return use(run) if run is not None else None
    finally:
        request.give_back(key.size)


def one(item: Any, bounds: AnswerBounds, what: str) -> Pieces:
    """The answer that is ``item`` alone, serialized with care (a project, a feedback item: as large as a body)."""
    page = Page(bounds)
    page.add(item, what)
    return page.only()


def bounded_list(items: Iterable[Any], bounds: AnswerBounds, *, what: str, how: str) -> Pieces:
    """A whole list as one answer, or a 413 when it is larger than a page: the client asks for fewer, as ``how`` says.

    For the lists a client pages by offset, where a page cut short would read as the last one.
    """
    page = Page(bounds)
    for item in items:
        if not page.add(item, what):
            raise Refuse(
                413,
                detail(
                    f"these {what}s are more than the {bounds.page_bytes} bytes one answer holds "
                    f"({len(page)} fit); {how}",
                    max_size=bounds.page_bytes,
                ),
            )
    return page.body(None)


def too_large(item: Any, size: int, limit: int, what: str) -> Refuse:
    """413 for one item larger than an answer holds, naming its largest fields and how to ask for fewer."""
    fields = []
    if isinstance(item, Mapping):
        sizes = sorted(((len(dump(value, large=True)), str(name)) for name, value in item.items()), reverse=True)
        fields = [f"{name} ({count} bytes)" for count, name in sizes[:3]]
    ident = item.get("id") if isinstance(item, Mapping) else None
    named = f" {ident}" if isinstance(ident, str) else ""
    largest = f"; its largest fields: {', '.join(fields)}" if fields else ""
    how = (
        "; ask for fewer fields: select in POST /runs/query (the SDK's list_runs(select=[...])), "
        "selects in the v2 API"
        if what == "run"
        else ""
    )
    return Refuse(
        413,
        detail(f"{what}{named} is {size} bytes as asked, more than the {limit} one answer holds{largest}{how}",
               size=size, max_size=limit, fields=[f.split(" (")[0] for f in fields]),
    )


def busy() -> Refuse:
    """503 for a read that found no room in the answer budget within :data:`BUDGET_WAIT_S`."""
    return Refuse(
        503,
        detail("the local service is answering other large reads and has no room for this one yet; try again shortly"),
        {"Retry-After": "1"},
    )


@dataclass
class AnswerBudget:
    """Bytes of stored runs being answered, all requests together, at most ``total``.

    :meth:`take` waits for room; a request that holds nothing may always take what it
    needs (one item larger than the budget still gets answered, alone).
    """

    total: int = ANSWER_MEMORY_BYTES
    used: int = 0
    _cond: threading.Condition = field(default_factory=threading.Condition, repr=False)

    def take(self, amount: int, wait_s: float, holding: int = 0, stop: threading.Event | None = None) -> bool:
        """Reserve ``amount`` bytes, waiting up to ``wait_s``; False when there is no room by then.

        ``holding`` is what the caller already holds: one that holds nothing is let in
        whenever nothing else is being answered, whatever the amount.
        """
        deadline = time.monotonic() + wait_s
        with self._cond:
            while self.used + amount > self.total and not (holding == 0 and self.used == 0):
                remaining = deadline - time.monotonic()
                if remaining <= 0 or (stop is not None and stop.is_set()):
                    return False
                self._cond.wait(min(remaining, 0.25))
            self.used += amount
            return True

    def give(self, amount: int) -> None:
        if amount <= 0:
            return
        with self._cond:
            self.used = max(0, self.used - amount)
            self._cond.notify_all()
