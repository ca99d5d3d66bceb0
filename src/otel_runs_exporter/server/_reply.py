"""What the local service answers: a :class:`Reply` returned, or a :class:`Refuse` raised to answer at once.

Every layer answers with these two: the HTTP framing (:mod:`._http_server`: 400, 411, 413,
415 while reading a body), the dispatcher (:mod:`._dispatch`: 401, 403, 429, 503),
the body parsers and the handlers (:mod:`._handlers`, :mod:`._control`). The framing
turns either one into the bytes on the wire.

>>> Reply(404, detail("Not Found"))
Reply(status=404, body={'detail': 'Not Found'}, headers={}, close=False, content_type='application/json')
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

__all__ = ["Reply", "Refuse", "detail", "DROP"]


@dataclass(frozen=True)
class Reply:
    """One answer: a status and a body sent as JSON (or ``bytes`` sent as they are, of ``content_type``).

    Status 0 means no answer at all: the connection is closed (an injected drop, or a
    client that went away).
    """

    status: int
    body: Any = None
    headers: dict[str, str] = field(default_factory=dict)
    close: bool = False
    """Close the connection after answering (the rest of the request may be unread)."""
    content_type: str = "application/json"


DROP = Reply(0, close=True)
"""Close the connection without answering."""


class Refuse(Exception):
    """Raised anywhere below the framing to answer right away with ``status`` and the JSON ``body``."""

    def __init__(self, status: int, body: Any, headers: dict[str, str] | None = None, close: bool = False) -> None:
        super().__init__(status)
        self.status = status
        self.body = body
        self.headers = headers or {}
        self.close = close

    def reply(self) -> Reply:
        return Reply(self.status, self.body, self.headers, self.close)


def detail(msg: str, **more: Any) -> dict[str, Any]:
    """The service's error body: ``{"detail": msg, ...}``."""
    return {"detail": msg, **more}
