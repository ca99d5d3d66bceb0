"""Search over a day's traffic in the local service: a 100,000-run database, with and without the trigram index.

Builds a database of ``--runs`` runs (traces of 10: a root, two model calls with
prompts and answers of a few hundred words, tools), writes it the way the service
does (``RunStore.apply``, 100 runs a transaction), then serves it with
``otel-runs serve`` in its own process and asks ``POST /runs/query`` what the
viewer's list asks for a search: the newest 50 traces of the project with a run
that contains the text (``tree_filter: search("...")``), each search ``--repeat``
times; reported is the median and the slowest. Texts: a word in one run only, one
in 1% of the runs, one in every trace, and two characters (under the index's three:
the scan). Then the same with the index switched off (``--no-index``: the scan the
service used before), for comparison.

    python bench/search.py                      # 100,000 runs (about a minute to build), then the searches
    python bench/search.py --runs 20000 --keep /tmp/runs.db

Prints one JSON line per search, then a summary line; the database's size (and the
index's share) too. Timings are this machine's: BENCHMARKS.md quotes them.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from datetime import datetime, timedelta, timezone
from typing import Any

import requests
from deep_trees import _serve  # otel-runs serve on a free port, in its own process: its address

WORDS = (
    "order parcel depot refund account invoice shipping address window delay courier tracking support customer "
    "answer question policy return warranty replace damaged label carrier weekend holiday schedule update status"
).split()
RARE = "zanzibar-quokka"
PERCENT = "marmalade"  # in 1% of the runs
COMMON = "parcel"  # in nearly every trace


def _text(rng: random.Random, words: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(words))


def _trace(rng: random.Random, start: datetime, index: int, runs: int) -> list[dict[str, Any]]:
    root_id = str(uuid.uuid4())
    fmt = "%Y%m%dT%H%M%S%fZ"
    root_dotted = f"{start.strftime(fmt)}{root_id}"
    out = [{
        "id": root_id, "trace_id": root_id, "dotted_order": root_dotted, "name": "support_chat", "run_type": "chain",
        "start_time": start.isoformat(), "end_time": (start + timedelta(seconds=2)).isoformat(),
        "session_name": "bench", "inputs": {"question": _text(rng, 20)}, "outputs": {"answer": _text(rng, 40)},
        "extra": {"metadata": {"session_id": f"conv-{index % 500}"}},
    }]
    for n in range(1, runs):
        run_id = str(uuid.uuid4())
        at = start + timedelta(milliseconds=10 * n)
        llm = n in (1, 2)
        body = _text(rng, 150 if llm else 30)
        if rng.random() < 0.01:
            body += f" {PERCENT}"
        run = {
            "id": run_id, "trace_id": root_id, "parent_run_id": root_id,
            "dotted_order": f"{root_dotted}.{at.strftime(fmt)}{run_id}", "name": "chat gpt-4o-mini" if llm else f"tool-{n}",
            "run_type": "llm" if llm else "tool", "start_time": at.isoformat(),
            "end_time": (at + timedelta(milliseconds=500)).isoformat(), "session_name": "bench",
            "inputs": {"messages": [{"role": "user", "content": _text(rng, 60)}]} if llm else {"query": _text(rng, 8)},
            "outputs": {"text": body, **({"usage_metadata": {"input_tokens": 900, "output_tokens": 300}} if llm else {})},
            "extra": {"metadata": {"ls_model_name": "gpt-4o-mini", "ls_provider": "openai"}} if llm else {},
        }
        out.append(run)
    return out


def build(path: str, runs: int, seed: int = 1) -> float:
    from otel_runs_exporter.server import RunStore
    from otel_runs_exporter.server._validate import RunOp

    rng = random.Random(seed)
    began = time.perf_counter()
    store = RunStore(path)
    start = datetime.now(timezone.utc) - timedelta(hours=23)
    per_trace = 10
    traces = runs // per_trace
    rare_at = traces // 3
    batch: list[RunOp] = []
    for index in range(traces):
        trace = _trace(rng, start + timedelta(seconds=index * 80_000 / traces), index, per_trace)
        if index == rare_at:
            trace[-1]["outputs"]["text"] += f" routed via {RARE}"
        batch += [RunOp("post", r["id"], r) for r in trace]
        if len(batch) >= 100:
            store.apply(batch)
            batch = []
    if batch:
        store.apply(batch)
    store.close()
    return time.perf_counter() - began


def searches(url: str, repeat: int, label: str) -> list[dict[str, Any]]:
    project = requests.get(f"{url}/sessions?name=bench", timeout=30).json()[0]["id"]
    out = []
    for name, text in (("one run", RARE), ("1% of runs", PERCENT), ("every trace", COMMON), ("2 characters", "zq")):
        body = {"session": [project], "is_root": True, "limit": 50, "tree_filter": f'search("{text}")',
                "select": ["name", "start_time", "end_time", "status"]}
        times, found = [], 0
        for _ in range(repeat):
            began = time.perf_counter()
            answer = requests.post(f"{url}/runs/query", json=body, timeout=120)
            times.append(time.perf_counter() - began)
            assert answer.status_code == 200, answer.text
            found = len(answer.json()["runs"])
        line = {"index": label, "search": name, "text": text, "traces_answered": found,
                "median_ms": round(statistics.median(times) * 1000, 1), "max_ms": round(max(times) * 1000, 1)}
        print(json.dumps(line), flush=True)
        out.append(line)
    return out


def _size(path: str) -> dict[str, float]:
    total = sum(os.path.getsize(p) for p in (path, path + "-wal") if os.path.exists(p))
    with sqlite3.connect(path) as db:
        try:
            pages = db.execute("SELECT SUM(pgsize) FROM dbstat WHERE name LIKE 'runs_fts%'").fetchone()[0] or 0
        except sqlite3.OperationalError:
            pages = None
    return {"db_mb": round(total / 1e6, 1), "index_mb": round(pages / 1e6, 1) if pages is not None else None}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=100_000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--keep", default=None, metavar="PATH", help="build the database here (and keep it)")
    args = parser.parse_args()
    folder = tempfile.mkdtemp(prefix="search-bench-")
    path = args.keep or os.path.join(folder, "runs.db")
    if not os.path.exists(path):
        built = build(path, args.runs)
        print(json.dumps({"built_runs": args.runs, "build_s": round(built, 1), **_size(path)}), flush=True)
    results = []
    for label, serve in (("trigram index", _serve), ("scan (no index)", _serve_without_index)):
        proc, url = serve(path)
        try:
            results += searches(url, args.repeat, label)
        finally:
            proc.terminate()
            proc.wait(30)
    worst = max(r["median_ms"] for r in results if r["index"] == "trigram index")
    print(json.dumps({"runs": args.runs, "slowest_median_ms_with_index": worst, **_size(path)}), flush=True)
    return 0


def _serve_without_index(db: str) -> tuple[subprocess.Popen[str], str]:
    """The service with the index switched off in its process (as on a SQLite without FTS5): the scan."""
    code = (
        "import sys; from otel_runs_exporter.server import _store_search as s; s.available = lambda: False; "
        "from otel_runs_exporter.cli import main; sys.exit(main(['serve', '--port', '0', '--db', sys.argv[1]]))"
    )
    proc = subprocess.Popen([sys.executable, "-c", code, db], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    assert proc.stdout is not None
    for _ in range(5):
        line = proc.stdout.readline()
        match = re.search(r"Listening on (http://\S+)", line)
        if match:
            return proc, match.group(1)
    proc.kill()
    raise RuntimeError("otel-runs serve (without the index) did not start")


if __name__ == "__main__":
    sys.exit(main())
