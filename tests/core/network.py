"""Networks for unit tests: the HTTP client's seam (``_http_client.Network``) answered from a script.

As httpx's ``MockTransport``: a function from the request to the answer, and
every request kept for the test to look at. No socket is opened, so a test of
the retry loop or of delivery needs no server (the wire tests use the real one).
"""

from __future__ import annotations

import io
from typing import Callable, Iterable, Union

import requests
from requests.structures import CaseInsensitiveDict
from urllib3 import HTTPResponse

from otel_runs_exporter._http_client import Request
from otel_runs_exporter._seal import split_multipart

Handler = Callable[[Request], requests.Response]
#: One line of a script: a status, a whole answer, or an exception to raise (no answer).
Step = Union[int, requests.Response, BaseException]


def answer(status: int, body: bytes = b"", headers: dict[str, str] | None = None) -> requests.Response:
    """An answer as :class:`requests.adapters.HTTPAdapter` builds one: its body unread, in ``raw``."""
    resp = requests.Response()
    resp.status_code = status
    resp.headers = CaseInsensitiveDict(headers or {})
    resp.raw = HTTPResponse(body=io.BytesIO(body), headers=headers or {}, status=status, preload_content=False)
    return resp


class ScriptedNetwork:
    """A :class:`~otel_runs_exporter._http_client.Network` that answers with ``handler`` and records each request."""

    def __init__(self, handler: Handler) -> None:
        self.handler = handler
        self.requests: list[Request] = []
        self.closed = False

    def handle(self, request: Request) -> requests.Response:
        self.requests.append(request)
        return self.handler(request)

    def close(self) -> None:
        self.closed = True

    @classmethod
    def replies(cls, *steps: Step, then: int = 202) -> ScriptedNetwork:
        """Answer with ``steps`` in order, then with ``then`` for ever."""
        script = list(steps)

        def handler(request: Request) -> requests.Response:
            step: Step = script.pop(0) if script else then
            if isinstance(step, BaseException):
                raise step
            return step if isinstance(step, requests.Response) else answer(step)

        return cls(handler)


class RunsService:
    """A service for :class:`~otel_runs_exporter._transport.Transport` to send runs to, as a handler.

    ``POST /runs/multipart`` (uncompressed bodies: use ``compression="none"``)
    stores the runs, unless one of these says otherwise, checked in order:
    ``down`` (no answer: a connection error), ``statuses`` (the next answers, one
    per request, with ``retry_after``), ``max_body`` (413 above it), ``reject``
    (422 when the body holds one of these run ids).
    """

    def __init__(self) -> None:
        self.down = False
        self.statuses: list[int] = []
        self.retry_after: float | None = None
        self.max_body: int | None = None
        self.reject: set[str] = set()
        self.batches: list[list[str]] = []  # run ids of each request that was stored, in order

    @property
    def stored(self) -> list[str]:
        return [run_id for batch in self.batches for run_id in batch]

    def __call__(self, request: Request) -> requests.Response:
        if self.down:
            raise requests.ConnectionError("connection refused")
        if self.statuses:
            status = self.statuses.pop(0)
            headers = {"Retry-After": str(self.retry_after)} if self.retry_after is not None else {}
            return answer(status, b'{"detail": "scripted"}', headers)
        if request.method != "POST" or not request.url.endswith("/runs/multipart"):
            return answer(404, b'{"detail": "Not Found"}')
        body = request.body or b""
        if self.max_body is not None and len(body) > self.max_body:
            return answer(413, b'{"detail": "too large"}')
        run_ids = _run_ids(request)
        if self.reject & set(run_ids):
            return answer(422, b'{"detail": "rejected"}')
        self.batches.append(run_ids)
        return answer(202, b'{"accepted": true}')


def _run_ids(request: Request) -> list[str]:
    """The run id of each operation in a multipart body (its main part is named ``op.run_id``)."""
    boundary = request.headers["Content-Type"].split("boundary=", 1)[1]
    names: Iterable[str] = (name for name, _ in split_multipart(request.body or b"", boundary))
    return [name.split(".", 1)[1] for name in names if name.count(".") == 1]
