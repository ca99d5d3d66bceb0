"""``GET /runs/changes`` (issue 28, part 5): a running trace's new and changed runs, held until there are some.

The viewer follows a trace of any size through it (it used to read a trace of up to
1,000 runs again whole, and stop past that). Checked here: the first look, a long
poll answered as a run arrives and at its wait when none does, pages of changes, a
cursor from before a restart, a stop ending the wait, the page rule (the viewer's
own page only), and a long poll in a long-lived slot of its own.
"""

from __future__ import annotations

import doctest
import threading
import time
from datetime import timedelta
from typing import Any

import requests
from server.server_helpers import Trace, entry, iso

from otel_runs_exporter.server import LocalService, _changes


def _children(trace: Trace, names: list[str], at: int = 10) -> list[dict[str, Any]]:
    out = []
    for i, name in enumerate(names):
        run = trace.child_post()
        run["id"] = f"{run['id'][:-4]}{i:04d}"
        start = trace.root_start + timedelta(milliseconds=at + i)
        run.update(name=name, start_time=iso(start), dotted_order=f"{trace.root_dotted}.{entry(start, run['id'])}")
        out.append(run)
    return out


def _post(svc: LocalService, runs: list[dict[str, Any]]) -> None:
    assert requests.post(svc.url + "/runs/batch", json={"post": runs}, timeout=5).status_code == 202


def _changes_of(svc: LocalService, **params: Any) -> dict[str, Any]:
    answer = requests.get(svc.url + "/runs/changes", params=params, timeout=30)
    assert answer.status_code == 200, answer.text
    return answer.json()


def test_a_long_poll_answers_when_a_run_of_the_trace_arrives_and_at_its_wait_when_none_does(service: LocalService) -> None:
    trace = Trace()
    _post(service, [trace.root_post()])
    first = _changes_of(service, trace=trace.root_id)
    assert first["runs"] == [] and first["more"] is False  # the first look: where to start, at once
    began = time.monotonic()
    idle = _changes_of(service, trace=trace.root_id, after=first["cursor"], wait=1)
    # The root has no end yet and was stored a moment ago: the trace is live.
    assert idle == {"runs": [], "cursor": first["cursor"], "more": False, "live": True}
    assert 0.9 < time.monotonic() - began < 3
    other = Trace()
    _post(service, [other.root_post()])  # another trace's run does not answer this one's poll
    timer = threading.Timer(0.4, _post, (service, _children(trace, ["arrived"])))
    timer.start()
    began = time.monotonic()
    news = _changes_of(service, trace=trace.root_id, after=first["cursor"], wait=10)
    timer.join()
    assert time.monotonic() - began < 3
    (run,) = news["runs"]
    assert run["name"] == "arrived" and run["status"] == "pending" and run["parent_run_id"] == trace.root_id
    assert set(run) == {"id", *_changes.FIELDS}
    # A patch is a change too: the same run again, as it is now.
    patch = {"id": run["id"], "trace_id": trace.root_id, "dotted_order": run["dotted_order"], "end_time": iso(trace.child_start)}
    assert requests.post(service.url + "/runs/batch", json={"patch": [patch]}, timeout=5).status_code == 202
    again = _changes_of(service, trace=trace.root_id, after=news["cursor"], wait=5)
    assert [(r["id"], r["status"]) for r in again["runs"]] == [(run["id"], "success")]


def test_changes_come_a_page_at_a_time_and_a_cursor_of_another_store_starts_over(service: LocalService) -> None:
    trace = Trace()
    start = _changes_of(service, trace=trace.root_id)["cursor"]
    _post(service, [trace.root_post(), *_children(trace, [f"c{i}" for i in range(4)])])
    page = _changes_of(service, trace=trace.root_id, after=start, limit=2)
    assert [r["name"] for r in page["runs"]] == ["agent", "c0"] and page["more"] is True
    rest = _changes_of(service, trace=trace.root_id, after=page["cursor"], limit=2)
    rest2 = _changes_of(service, trace=trace.root_id, after=rest["cursor"], limit=2, wait=0)
    assert [r["name"] for r in rest["runs"] + rest2["runs"]] == ["c1", "c2", "c3"] and rest2["more"] is False
    stale = _changes_of(service, trace=trace.root_id, after="0ld570re.99999", wait=0)  # before a restart
    assert len(stale["runs"]) == 5


def test_a_stop_ends_a_wait_and_bad_queries_are_422s() -> None:
    with LocalService() as svc:
        trace = Trace()
        cursor = _changes_of(svc, trace=trace.root_id)["cursor"]
        result: dict[str, Any] = {}

        def wait() -> None:
            try:
                result["status"] = requests.get(
                    svc.url + "/runs/changes", params={"trace": trace.root_id, "after": cursor, "wait": 25}, timeout=30
                ).status_code
            except requests.RequestException as exc:  # the connection may close before an answer
                result["status"] = type(exc).__name__

        waiter = threading.Thread(target=wait)
        waiter.start()
        time.sleep(0.3)
        began = time.monotonic()
        svc.stop()
        waiter.join(10)
        assert time.monotonic() - began < 5 and "status" in result
    with LocalService() as svc:
        for params, says in [({}, "trace is required"), ({"trace": "x"}, "trace is required"),
                             ({"trace": Trace().root_id, "after": "nope"}, "cursor"),
                             ({"trace": Trace().root_id, "wait": "99"}, "wait must be"),
                             ({"trace": Trace().root_id, "since": "1"}, "not supported")]:
            answer = requests.get(svc.url + "/runs/changes", params=params, timeout=5)
            assert answer.status_code == 422 and says in answer.json()["detail"][0]["msg"], (params, answer.text)


def test_only_the_services_own_page_follows_a_trace() -> None:
    with LocalService(cors_origins=["http://localhost:5173"]) as svc:
        host = svc.url.removeprefix("http://")
        trace = Trace().root_id
        own = requests.get(svc.url + "/runs/changes", params={"trace": trace},
                           headers={"Origin": f"http://{host}"}, timeout=5)
        assert own.status_code == 200
        for origin in ("http://localhost:5173", "http://localhost:8000"):
            refused = requests.get(svc.url + "/runs/changes", params={"trace": trace}, headers={"Origin": origin}, timeout=5)
            assert refused.status_code == 403, origin


def test_a_long_poll_waits_in_a_long_lived_slot_not_a_request_slot() -> None:
    with LocalService(max_connections=2) as svc:
        trace = Trace()
        cursor = _changes_of(svc, trace=trace.root_id)["cursor"]
        polls = [
            threading.Thread(target=requests.get, args=(svc.url + "/runs/changes",),
                             kwargs={"params": {"trace": trace.root_id, "after": cursor, "wait": 1}, "timeout": 10})
            for _ in range(3)
        ]
        for poll in polls:
            poll.start()
        time.sleep(0.3)
        began = time.monotonic()
        assert requests.get(svc.url + "/ok", timeout=5).status_code == 200  # three waiting, two request slots
        assert time.monotonic() - began < 1
        for poll in polls:
            poll.join(10)


def test_doctests() -> None:
    assert doctest.testmod(_changes).failed == 0
