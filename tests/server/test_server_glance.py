"""What lists read at a glance (issue 37): a run's preview and requested model, trace ids by prefix, the check
report over HTTP, whether a trace is live, and the charts' two error counts.

Each through the service's routes on loopback, runs posted as a client posts them.
"""

from __future__ import annotations

import doctest
import time
import uuid
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest
import requests
from server.server_helpers import Trace, entry, iso

from otel_runs_exporter.server import LocalService, _changes, _glance, _inspect

CHAT = {"messages": [
    {"role": "system", "content": "You route orders."},
    {"role": "user", "content": "What about order #1001?"},
    {"role": "assistant", "content": "It shipped."},
    {"role": "user", "content": [{"type": "text", "text": "And order\n\t#1002?"},
                                 {"type": "image_url", "image_url": {"url": "data:image/png;base64," + "A" * 5000}}]},
]}


def _post(svc: LocalService, runs: list[dict[str, Any]]) -> None:
    answer = requests.post(svc.url + "/runs/batch", json={"post": runs}, timeout=10)
    assert answer.status_code == 202, answer.text


def _query(svc: LocalService, **body: Any) -> list[dict[str, Any]]:
    answer = requests.post(svc.url + "/runs/query", json=body, timeout=10)
    assert answer.status_code == 200, answer.text
    runs: list[dict[str, Any]] = answer.json()["runs"]
    return runs


def test_doctests() -> None:
    for module in (_glance, _inspect, _changes):
        assert doctest.testmod(module).failed == 0, module.__name__


def test_a_list_reads_each_traces_preview_and_each_runs_requested_model(service: LocalService) -> None:
    chat, tool, huge, failed = Trace(), Trace(), Trace(), Trace()
    bidi = "\u202eevil\u202c"
    _post(service, [
        chat.root_post() | {"inputs": CHAT, "outputs": {"choices": [{"message": {"role": "assistant", "content": "On its way."}}]}},
        chat.child_post() | {"extra": {"metadata": {"ls_model_name": "gpt-4o-mini", "response_model": "gpt-4o-mini-2024"}}},
        tool.root_post() | {"inputs": {"city": "Paris", "days": 3}, "outputs": {"output": f"sunny {bidi}"}},
        # 5 MB of input, a control character, and a key per line: the preview stays one short line.
        huge.root_post() | {"inputs": {"question": "x\x00y " + "z" * 5_000_000}, "outputs": {"a": 1, "b": [2] * 10_000}},
        failed.root_post() | {"inputs": {}, "error": "Traceback (most recent call last):\n  ...\nTimeoutError: slow tool"},
    ])
    roots = _query(service, is_root=True, select=["preview"])
    previews = {r["id"]: r["preview"] for r in roots}
    assert previews[chat.root_id] == {"input": "And order #1002? [image]", "output": "On its way."}
    assert previews[tool.root_id] == {"input": '{"city":"Paris","days":3}', "output": f"sunny {bidi}"}  # the page isolates it
    big = previews[huge.root_id]
    assert big["input"].startswith("x y zzz") and len(big["input"]) == _glance.PREVIEW_CHARS and big["input"][-1] == "…"
    assert big["output"].startswith('{"a":1,"b":[2,2,2,2,2,2,2,2]}')
    assert previews[failed.root_id] == {"input": "", "output": "TimeoutError: slow tool"}
    (llm,) = _query(service, id=[chat.child_id], select=["requested_model", "model"])
    # What the code asked for on the row; what answered stays the store's model (pricing, charts, filters).
    assert (llm["requested_model"], llm["model"]) == ("gpt-4o-mini", "gpt-4o-mini-2024")
    whole = requests.get(service.url + f"/runs/{chat.root_id}", timeout=5).json()
    assert "preview" not in whole and "requested_model" not in whole  # the SDK's read_run is as it was
    answer = requests.post(service.url + "/runs/query", json={"select": ["previews"]}, timeout=5)
    assert answer.status_code == 422 and "'previews'" in answer.text


def _ids(prefix: str, *tails: str) -> list[str]:
    return [f"{prefix}-{tail}" for tail in tails]


def test_trace_ids_by_prefix_and_the_check_report_over_http(service: LocalService) -> None:
    a, b, c = _ids("0190b3c5-f1b8", "7a3e-9c1d-2e3f4a5b6c7d", "7a3e-9c1d-2e3f4a5b6c7e", "7b00-8000-000000000001")
    start = datetime(2025, 3, 1, tzinfo=timezone.utc)
    _post(service, [{"id": t, "trace_id": t, "dotted_order": entry(start, t), "name": "n", "run_type": "chain",
                     "start_time": iso(start), "session_name": "ids"} for t in (a, b, c)])

    def matches(*prefixes: str, **more: Any) -> requests.Response:
        return requests.post(service.url + "/runs/trace-ids", json={"prefixes": list(prefixes), **more}, timeout=5)

    found = matches("0190b3c5", "0190B3C5F1B87A3E9C1D2E3F4A5B6C7E", "0190b3c5-f1b8-7b", "ffff").json()["matches"]
    assert found == {"0190b3c5": [a, b, c], "0190B3C5F1B87A3E9C1D2E3F4A5B6C7E": [b], "0190b3c5-f1b8-7b": [c], "ffff": []}
    assert matches("0190", limit=2).json()["matches"] == {"0190": [a, b]}
    for bad, says in ((matches("019"), "4 to 32 hex digits"), (matches("xyz!"), "not the start of a trace id"),
                      (matches("0190", limit=0), "limit"), (matches(), "prefixes")):
        assert bad.status_code == 422 and says in bad.text, bad.text

    trace = Trace()
    _post(service, [trace.child_post()])  # its parent never comes, and it never ends
    report = requests.get(service.url + "/runs/check", timeout=5).json()
    assert report["missing_parents"] == [{"parent_run_id": trace.root_id, "children": [trace.child_id]}]
    assert trace.child_id in report["never_completed"] and report["counts"]["never_completed"] == 4


def test_the_check_report_is_cut_to_its_bound_and_counts_the_rest(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_inspect, "MAX_ITEMS", 2)
    with LocalService() as svc:
        _post(svc, [Trace().root_post() for _ in range(5)])  # five open roots
        report = requests.get(svc.url + "/runs/check", timeout=5).json()
    assert len(report["never_completed"]) == 2 and report["counts"]["never_completed"] == 5


def test_a_trace_is_live_while_it_has_an_open_run_stored_within_the_window() -> None:
    with LocalService(live_window_s=60) as svc:
        open_trace, done = Trace(), Trace()
        end = iso(done.child_start + timedelta(seconds=1))
        _post(svc, [open_trace.root_post(), done.root_post() | {"end_time": end}, done.child_post() | {"end_time": end}])
        now = time.time()

        def live(trace: Trace, at: float) -> bool:
            return _changes.is_live(svc.store.rows, trace.root_id, svc.live_window_s, at)

        assert live(open_trace, now) and not live(done, now)  # every run of the other ended
        assert not live(open_trace, now + 61)  # its app stopped a minute ago without ending it: open, not live
        first = requests.get(svc.url + f"/runs/changes?trace={open_trace.root_id}", timeout=5).json()
        assert first["live"] is True
        closed = requests.get(svc.url + f"/runs/changes?trace={done.root_id}", timeout=5).json()
        assert closed["live"] is False
    for bad in (0, -1, float("inf"), True, "600"):
        with pytest.raises(ValueError, match="live_window_s"):
            LocalService(live_window_s=bad)  # type: ignore[arg-type]


def test_the_charts_count_runs_with_errors_apart_from_traces_with_errors(service: LocalService) -> None:
    now = datetime.now(timezone.utc) - timedelta(minutes=5)
    runs = []
    for n in range(3):  # three traces, each with a failed tool under a root that went on
        root_id, tool_id = str(uuid.uuid4()), str(uuid.uuid4())
        at = now + timedelta(seconds=n)
        dotted = entry(at, root_id)
        runs += [
            {"id": root_id, "trace_id": root_id, "dotted_order": dotted, "name": "agent", "run_type": "chain",
             "start_time": iso(at), "end_time": iso(at + timedelta(seconds=1)), "session_name": "errs"},
            {"id": tool_id, "trace_id": root_id, "parent_run_id": root_id, "dotted_order": f"{dotted}.{entry(at, tool_id)}",
             "name": "tool", "run_type": "tool", "start_time": iso(at), "end_time": iso(at), "error": "boom",
             "session_name": "errs"},
        ]
    _post(service, runs)
    project = requests.get(service.url + "/sessions?name=errs", timeout=5).json()[0]["id"]
    totals = requests.post(service.url + "/runs/charts", json={"session": [project]}, timeout=5).json()["totals"]
    assert (totals["traces"], totals["errors"], totals["failed_traces"]) == (3, 3, 0)
