"""The local service under the issue's reads and writes, in an address-space limit: its answers and its memory.

The big version of ``tests/server/test_server_bounds_prlimit.py`` (issue 38)::

    python bench/service_bounds.py --runs 100 --mb 15                 # the issue's read: 100 stored runs of 15 MB
    python bench/service_bounds.py --runs 100 --mb 15 --src /path/to/main/src     # the same, another version

A database of ``--runs`` runs of ``--mb`` MB of inputs is made cheaply (stored small, then
given their inputs by SQL); ``otel-runs serve`` runs on it under ``prlimit --as`` (``--gib``,
default 1). Then, one after the other:

- ``query``: ``POST /runs/query {"select": ["inputs"], "limit": 100}`` and its cursor to the end:
  pages, statuses, the largest answer, runs read, seconds;
- ``batch``: ``POST /runs/batch`` with 20 MiB of tiny items (~456,000): status, answer bytes, seconds;
- ``sdk``: the langsmith SDK's ``list_runs(select=["inputs"])`` over the project: runs read, seconds.

Each line is JSON, with the service's peak RSS (``VmHWM``) and whether it is still up (its exit
status if not). ``--src`` puts another checkout's ``src`` first on the service's ``PYTHONPATH``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
import warnings
from pathlib import Path
from typing import Any

import requests

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from tests.server.bounds_helpers import GiB, MiB, Limited, seed_large_runs, serve_limited  # noqa: E402
from tests.server.test_server_bounds_prlimit import _million_tiny_items  # noqa: E402


def _state(svc: Limited) -> dict[str, Any]:
    if svc.alive():
        return {"alive": True, "peak_rss_mb": round(svc.peak_rss_mb())}
    return {"alive": False, "exit_status": svc.proc.wait(10)}


def _query(svc: Limited) -> dict[str, Any]:
    started, body, pages = time.monotonic(), {"select": ["inputs"], "limit": 100}, []
    try:
        while True:
            answer = requests.post(svc.url + "/runs/query", json=body, timeout=600)
            found = answer.json() if answer.status_code == 200 else None
            pages.append((answer.status_code, len(answer.content), len(found["runs"]) if found else 0))
            if not found or not found["cursors"]["next"]:
                break
            body["cursor"] = found["cursors"]["next"]
    except requests.RequestException as exc:
        pages.append((type(exc).__name__, 0, 0))
    return {"step": "query", "pages": len(pages), "statuses": sorted({str(p[0]) for p in pages}),
            "largest": max(p[1] for p in pages), "runs": sum(p[2] for p in pages),
            "seconds": round(time.monotonic() - started, 1), **_state(svc)}


def _batch(svc: Limited) -> dict[str, Any]:
    started, body = time.monotonic(), _million_tiny_items()
    try:
        answer = requests.post(svc.url + "/runs/batch", data=body, headers={"Content-Type": "application/json"}, timeout=600)
        found: dict[str, Any] = {"status": answer.status_code, "answer_bytes": len(answer.content)}
    except requests.RequestException as exc:
        found = {"status": type(exc).__name__}
    return {"step": "batch", "body_bytes": len(body), **found, "seconds": round(time.monotonic() - started, 1), **_state(svc)}


def _sdk(svc: Limited) -> dict[str, Any]:
    from langsmith import Client

    started = time.monotonic()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            runs: Any = len(list(Client(api_url=svc.url, api_key="unused").list_runs(project_name="large", select=["inputs"])))
    except Exception as exc:  # noqa: BLE001 - what the SDK raised is the measurement
        runs = f"{type(exc).__name__}: {str(exc)[:200]}"
    return {"step": "sdk", "runs": runs, "seconds": round(time.monotonic() - started, 1), **_state(svc)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=100)
    parser.add_argument("--mb", type=float, default=15.0)
    parser.add_argument("--gib", type=float, default=1.0, help="the address-space limit (prlimit --as)")
    parser.add_argument("--src", default=None, help="a checkout's src directory to run the service from")
    args = parser.parse_args()
    tmp = Path(tempfile.mkdtemp())
    try:
        started = time.monotonic()
        seed_large_runs(tmp / "runs.db", [int(args.mb * MiB)] * args.runs)
        print(json.dumps({"step": "seed", "runs": args.runs, "mb": args.mb, "seconds": round(time.monotonic() - started, 1)}))
        if args.src:
            os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [args.src, os.environ.get("PYTHONPATH")]))
        with serve_limited(tmp / "runs.db", int(args.gib * GiB)) as svc:
            for step in (_query, _batch, _sdk):
                print(json.dumps(step(svc)), flush=True)
                if not svc.alive():
                    break
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
