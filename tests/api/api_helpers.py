"""Constants and request bodies shared by the API tests.

A module of its own rather than ``conftest``: test folders each have a
``conftest`` and only one can be imported under that name.
"""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from typing import Any

API_KEY = "sk-test-api-key-0123456789"
BEARER = "bearer-test-credential-9876"
SPEED = 1000.0


def export_body(days: int = 3, **local: Any) -> dict[str, Any]:
    """A create body for ``days`` daily partitions from 2025-01-01, with local knobs (``fail_runs``, ...)."""
    start = datetime(2025, 1, 1, tzinfo=timezone.utc)
    body: dict[str, Any] = {
        "start_time": start.isoformat(),
        "end_time": (start + timedelta(days=days)).isoformat(),
        "destination": {"type": "s3", "bucket_name": "exports", "prefix": "runs/"},
    }
    if local:
        body["local"] = local
    return body
