"""Handcrafted request bodies for the local service's tests.

The multipart bodies here are assembled byte by byte on purpose, independent of
the package's own encoder, so a test shows exactly what goes over the wire.
"""

from __future__ import annotations

import subprocess
import sys
import threading
import time
import uuid
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from typing import Any

import orjson
import requests

from otel_runs_exporter.server import LocalService

BOUNDARY = "test-boundary-7f3a"
T0 = datetime(2025, 3, 1, 12, 0, 0, 123456, tzinfo=timezone.utc)


def entry(moment: datetime, run_id: str) -> str:
    """One dotted_order entry, written out by hand."""
    return moment.strftime("%Y%m%dT%H%M%S%f") + "Z" + str(uuid.UUID(run_id))


def iso(moment: datetime) -> str:
    """The ISO form clients send."""
    return moment.isoformat()


class Trace:
    """A root and a child run with consistent ids, as dicts a test can then break."""

    def __init__(self, start: datetime = T0) -> None:
        self.root_id = str(uuid.uuid4())
        self.child_id = str(uuid.uuid4())
        self.root_start = start
        self.child_start = start + timedelta(milliseconds=5)
        self.root_dotted = entry(self.root_start, self.root_id)
        self.child_dotted = self.root_dotted + "." + entry(self.child_start, self.child_id)

    def root_post(self) -> dict[str, Any]:
        return {
            "id": self.root_id,
            "trace_id": self.root_id,
            "dotted_order": self.root_dotted,
            "name": "agent",
            "run_type": "chain",
            "start_time": iso(self.root_start),
            "session_name": "tests",
        }

    def child_post(self) -> dict[str, Any]:
        return {
            "id": self.child_id,
            "trace_id": self.root_id,
            "parent_run_id": self.root_id,
            "dotted_order": self.child_dotted,
            "name": "llm",
            "run_type": "llm",
            "start_time": iso(self.child_start),
            "session_name": "tests",
        }

    def patch(self, run_id: str, dotted: str, end: datetime) -> dict[str, Any]:
        return {"id": run_id, "trace_id": self.root_id, "dotted_order": dotted, "end_time": iso(end)}


def part(
    name: str,
    payload: Any,
    *,
    content_type: str | None = "application/json",
    length: int | str | None = "auto",
    raw: bool = False,
) -> bytes:
    """One part: headers, blank line, content. ``length=None`` leaves Content-Length out."""
    data = payload if raw else orjson.dumps(payload)
    lines = [f'Content-Disposition: form-data; name="{name}"']
    if content_type is not None:
        lines.append(f"Content-Type: {content_type}")
    if length == "auto":
        lines.append(f"Content-Length: {len(data)}")
    elif length is not None:
        lines.append(f"Content-Length: {length}")
    return "\r\n".join(lines).encode() + b"\r\n\r\n" + data


def multipart(parts: list[bytes], boundary: str = BOUNDARY) -> bytes:
    """Join parts into a multipart/form-data body."""
    delimiter = b"--" + boundary.encode()
    return b"".join(delimiter + b"\r\n" + p + b"\r\n" for p in parts) + delimiter + b"--\r\n"


def run_parts(kind: str, run: dict[str, Any], **fields: Any) -> list[bytes]:
    """A main part plus one part per field (inputs, outputs, ...)."""
    out = [part(f"{kind}.{run['id']}", run)]
    out += [part(f"{kind}.{run['id']}.{name}", value) for name, value in fields.items()]
    return out


def post_multipart(
    svc: LocalService,
    body: bytes,
    *,
    boundary: str = BOUNDARY,
    session: requests.Session | None = None,
    **headers: str,
) -> requests.Response:
    """POST a body to /runs/multipart."""
    send = session.post if session is not None else requests.post
    return send(
        svc.url + "/runs/multipart",
        data=body,
        headers={"Content-Type": f"multipart/form-data; boundary={boundary}", **headers},
        timeout=10,
    )


def good_trace_body(trace: Trace) -> bytes:
    """Root and child posted with inputs and patched with outputs, all valid."""
    end = trace.child_start + timedelta(milliseconds=50)
    return multipart(
        run_parts("post", trace.root_post(), inputs={"q": "hi"})
        + run_parts("post", trace.child_post(), inputs={"prompt": "hi"})
        + run_parts("patch", trace.patch(trace.child_id, trace.child_dotted, end), outputs={"text": "yo"})
        + run_parts("patch", trace.patch(trace.root_id, trace.root_dotted, end), outputs={"a": "yo"})
    )


def rules_of(response: requests.Response) -> set[str]:
    """The rule names in a 422 body."""
    return {item["type"].removeprefix("runs.") for item in response.json()["detail"]}


def sdk_trace(client: Any) -> list[str]:
    """Three runs posted and patched by the langsmith SDK's own RunTree: agent > model > search (failed).

    Importable without pytest, so a test can run it in a fresh interpreter. Returns the ids, root first.
    """
    from langsmith.run_trees import RunTree

    root = RunTree(name="agent", run_type="chain", inputs={"q": "hi"}, client=client, project_name="compat")
    root.post()
    llm = root.create_child(name="model", run_type="llm", inputs={"prompt": "hi"})
    llm.post()
    tool = llm.create_child(name="search", run_type="tool", inputs={"query": "x"})
    tool.post()
    tool.end(error="ValueError: boom")
    tool.patch()
    llm.end(outputs={"text": "yo", "usage_metadata": {"input_tokens": 3, "output_tokens": 4, "total_tokens": 7}})
    llm.patch()
    root.end(outputs={"answer": "yo"})
    root.patch()
    return [str(root.id), str(llm.id), str(tool.id)]


@dataclass
class DemoServing:
    """``otel-runs demo --serve``, running: its process, the viewer link it printed, and its output."""

    proc: subprocess.Popen[str]
    link: str
    lines: list[str]
    reader: threading.Thread

    def output(self, timeout: float = 10.0) -> str:
        """Everything it printed, once it has ended."""
        self.reader.join(timeout)
        return "".join(self.lines)


def demo_serving() -> DemoServing:
    """Start ``otel-runs demo --serve`` as a user does and wait (30 s at most) for its viewer link."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "otel_runs_exporter.cli", "demo", "--serve"],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    lines: list[str] = []

    def read() -> None:
        for line in proc.stdout:  # type: ignore[union-attr]
            lines.append(line)

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and (proc.poll() is None or reader.is_alive()):
        for line in list(lines):
            if line.startswith("Viewer: "):
                return DemoServing(proc, line.split("Viewer: ", 1)[1].strip(), lines, reader)
        time.sleep(0.05)
    proc.kill()
    raise AssertionError("otel-runs demo --serve printed no viewer address:\n" + "".join(lines))
