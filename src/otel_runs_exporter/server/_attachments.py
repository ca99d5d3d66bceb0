"""Attachment downloads: signed addresses, as the hosted service hands out presigned URLs.

The service's SDK reads a run's attachments by downloading each one from the address
the read API gives (``s3_urls`` in v1, ``attachments`` in v2) with a plain GET that
carries no API key. So the address itself is the credential: it names the run and the
attachment, when it stops working, and an HMAC of the three under a key only this
service (this process) knows. It works for ``lifetime_s`` (an hour), and not after a
restart; the read API hands out fresh ones on each read.

>>> links = AttachmentLinks(b"k" * 32, clock=lambda: 1000.0)
>>> url = links.url("http://127.0.0.1:1984", "0190b3c5-f1b8-7a3e-9c1d-2e3f4a5b6c7d", "chart png")
>>> url.split("?")[0]
'http://127.0.0.1:1984/attachments/0190b3c5-f1b8-7a3e-9c1d-2e3f4a5b6c7d/chart%20png'
>>> links.problem("0190b3c5-f1b8-7a3e-9c1d-2e3f4a5b6c7d", "chart png", url.split("?")[1]) is None
True
>>> links.problem("0190b3c5-f1b8-7a3e-9c1d-2e3f4a5b6c7d", "other", url.split("?")[1])
'the signature does not match this run and attachment'
"""

from __future__ import annotations

import hashlib
import hmac
import math
import time
from collections.abc import Callable
from urllib.parse import parse_qs, quote, urlencode

from ._numbers import plain_int

__all__ = ["AttachmentLinks", "ATTACHMENT_PATH"]

ATTACHMENT_PATH = "/attachments"
"""Where attachments are downloaded: ``/attachments/{run_id}/{name}?expires=...&signature=...``."""


class AttachmentLinks:
    """Makes and checks signed download addresses for stored attachments."""

    def __init__(self, key: bytes, lifetime_s: float = 3600.0, clock: Callable[[], float] = time.time) -> None:
        if len(key) < 16:
            raise ValueError("the signing key must be at least 16 bytes")
        self._key = key
        self.lifetime_s = lifetime_s
        self._clock = clock

    def __repr__(self) -> str:
        return f"AttachmentLinks(lifetime_s={self.lifetime_s:g})"  # never the key

    def _signature(self, run_id: str, name: str, expires: int) -> str:
        message = f"{run_id}\n{name}\n{expires}".encode()
        return hmac.new(self._key, message, hashlib.sha256).hexdigest()

    def url(self, base: str, run_id: str, name: str) -> str:
        """The download address of one attachment, good for ``lifetime_s`` from now."""
        expires = math.ceil(self._clock() + self.lifetime_s)
        query = urlencode({"expires": expires, "signature": self._signature(run_id, name, expires)})
        return f"{base.rstrip('/')}{ATTACHMENT_PATH}/{run_id}/{quote(name, safe='')}?{query}"

    def problem(self, run_id: str, name: str, query: str) -> str | None:
        """Why an address does not open this attachment (its query string), or None when it does."""
        params = parse_qs(query, keep_blank_values=True)
        expires_raw, signature = params.get("expires", [""]), params.get("signature", [""])
        if len(expires_raw) != 1 or len(signature) != 1 or not signature[0]:
            return "the address lacks its expires and signature parameters; ask the read API for the run again"
        expires = plain_int(expires_raw[0])
        if expires is None:
            return "expires is not a whole number"
        if not hmac.compare_digest(signature[0], self._signature(run_id, name, expires)):
            return "the signature does not match this run and attachment"
        if expires < self._clock():
            return "the address has expired; ask the read API for the run again"
        return None
