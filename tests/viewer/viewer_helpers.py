"""What the viewer's tests share: runs delivered by the real exporter, and waiting on the page.

Runs reach the service the way a user's would: OpenTelemetry spans through
:class:`RunsSpanProcessor` and its HTTP transport, never written into the store.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import orjson
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.trace import Tracer

from otel_runs_exporter import RunsSpanProcessor

ARTIFACTS = Path(__file__).resolve().parent.parent / "artifacts"
"""Screenshots and timings the browser tests leave behind (git-ignored)."""

REBOUND = "evil.localtest"
"""A host name the test browser resolves to 127.0.0.1: an attacker's name after DNS rebinding."""

_T = TypeVar("_T")


def export(url: str, work: Callable[[Tracer], _T], *, project: str = "viewer-tests", **settings: Any) -> _T:
    """Run ``work`` with a tracer whose spans the exporter delivers to ``url``; returns what it returned.

    ``settings`` are the exporter's own (``api_key``, ``workspace_id``, ...).
    """
    provider = TracerProvider(resource=Resource.create({"service.name": "viewer-tests"}))
    overrides: dict[str, Any] = {"endpoint": url, "project": project, **settings}
    processor = RunsSpanProcessor(**overrides)
    provider.add_span_processor(processor)
    try:
        result = work(provider.get_tracer("viewer-tests"))
        assert processor.force_flush(60_000), "the exporter could not deliver the runs"
        stats = processor.stats()
        assert stats.dropped_total == 0, stats
    finally:
        provider.shutdown()
    return result


def as_json(value: Any) -> str:
    """A span attribute holding a run's inputs or outputs, as ``traceable`` writes them."""
    return orjson.dumps(value).decode()


def wait_for(check: Callable[[], _T], timeout: float = 10.0, what: str = "the page") -> _T:
    """Poll ``check`` until it returns something truthy; fail saying what never happened."""
    deadline = time.monotonic() + timeout
    last: Any = None
    while time.monotonic() < deadline:
        try:
            last = check()
        except Exception as exc:  # an element that is being redrawn, a stale reference
            last = exc
        else:
            if last:
                return last
        time.sleep(0.05)
    raise AssertionError(f"waited {timeout:g}s for {what}; last saw {last!r}")


def click(find: Callable[[], Any], what: str = "an element to click") -> None:
    """Find and click, again if the page redrew the element in between (the list polls every second)."""

    def attempt() -> bool:
        find().click()
        return True

    wait_for(attempt, what=what)


def screenshot(driver: Any, name: str) -> Path:
    """Save what the browser shows under tests/artifacts/ (every browser test leaves one)."""
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    path = ARTIFACTS / f"{name}.png"
    assert driver.save_screenshot(str(path)), f"no screenshot saved at {path}"
    return path
