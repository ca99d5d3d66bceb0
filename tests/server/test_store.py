"""``server._store.RunStore`` on its own, without HTTP: what the local service stores and how it reads it back.

The merge of a post and its patches (whichever arrives first), duplicates,
projects, the consistency report, the read API's queries, reset, and a file
database that outlives the store that wrote it. The routes that call these are
tested through HTTP in the other ``test_server_*`` modules.
"""

from __future__ import annotations

import sqlite3
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from otel_runs_exporter.server._store import ProjectExists, RunStore, project_id_for_name
from otel_runs_exporter.server._validate import RunOp, Violation

T0 = "2026-01-01T12:00:00.000000+00:00"


def _id(n: int) -> str:
    return str(uuid.UUID(int=n))


def _start(second: int) -> str:
    return f"2026-01-01T12:00:{second:02d}.000000+00:00"


def post(run_id: str, **fields: Any) -> RunOp:
    """A post of a root run in project "demo"; ``fields`` override, and ``...`` leaves a field out."""
    data: dict[str, Any] = {
        "id": run_id,
        "name": "run",
        "run_type": "chain",
        "start_time": T0,
        "trace_id": run_id,
        "dotted_order": f"20260101T120000000000Z{run_id}",
        "session_name": "demo",
        "inputs": {"q": "hi"},
    }
    data.update(fields)
    return RunOp("post", run_id, {k: v for k, v in data.items() if v is not ...})


def patch(run_id: str, **fields: Any) -> RunOp:
    return RunOp("patch", run_id, dict(fields))


@pytest.fixture
def store() -> Iterator[RunStore]:
    s = RunStore(":memory:")
    yield s
    s.close()


# --- post and patch ------------------------------------------------------------------------------


def test_a_patch_replaces_what_it_carries_and_leaves_the_rest(store: RunStore) -> None:
    rid = _id(1)
    posted_extra = {"metadata": {"a": 1, "kept": True}, "runtime": {"sdk": "x"}, "invocation_params": {"t": 1}}
    store.apply([post(rid, outputs={"draft": 1}, extra=posted_extra, tags=["x"])])
    result = store.apply(
        [patch(rid, end_time=_start(5), outputs={"answer": 2}, extra={"metadata": {"a": 2}, "invocation_params": {"m": 3}})]
    )
    assert (result.posted, result.patched, result.duplicates) == ([], [rid], [])
    run = store.get_run(rid)
    assert run is not None
    # Outputs replaced as a whole; extra merged: metadata by key, invocation_params as given, runtime kept.
    assert run["outputs"] == {"answer": 2}
    assert run["extra"] == {"metadata": {"a": 2, "kept": True}, "runtime": {"sdk": "x"}, "invocation_params": {"m": 3}}
    # An empty extra (the SDK's patch of a RunTree made without one) changes nothing.
    store.apply([patch(rid, extra={})])
    assert store.get_run(rid)["extra"] == run["extra"]  # type: ignore[index]
    # Omitted by the patch: the post's values stay.
    assert (run["name"], run["inputs"], run["tags"], run["start_time"]) == ("run", {"q": "hi"}, ["x"], T0)
    assert run["end_time"] == _start(5)


def test_a_null_in_a_patch_keeps_the_posted_value(store: RunStore) -> None:
    """A field sent as null is one the client left out (the SDK's inputs=None), not an erasure."""
    rid = _id(2)
    store.apply([post(rid, outputs={"o": 1})])
    store.apply([patch(rid, inputs=None, outputs=None, error=None, end_time=_start(1))])
    run = store.get_run(rid)
    assert run is not None and run["inputs"] == {"q": "hi"} and run["outputs"] == {"o": 1}
    # A null for a field nobody sent before is stored as given.
    assert "error" in run and run["error"] is None


def test_later_patches_overlay_earlier_ones(store: RunStore) -> None:
    rid = _id(3)
    store.apply([post(rid)])
    store.apply([patch(rid, outputs={"v": 1}, tags=["a"])])
    store.apply([patch(rid, outputs={"v": 2}, end_time=_start(2))])
    run = store.get_run(rid)
    assert run is not None and (run["outputs"], run["tags"], run["end_time"]) == ({"v": 2}, ["a"], _start(2))


def test_a_post_without_inputs_reads_back_with_empty_inputs(store: RunStore) -> None:
    rid = _id(4)
    store.apply([post(rid, inputs=...)])
    assert store.get_run(rid)["inputs"] == {}  # type: ignore[index]


def test_a_patch_before_its_post_is_held_and_merged_the_same(store: RunStore) -> None:
    early, late = _id(5), _id(6)
    # The patch first: not a run yet, but the report says it is waiting for its post.
    store.apply([patch(early, outputs={"a": 1}, end_time=_start(9), name="renamed")])
    assert store.get_run(early) is None and store.runs() == [] and store.count() == 0
    assert store.check()["patched_not_posted"] == [early]
    store.apply([post(early, outputs={"a": 0})])
    # The same run as when the post comes first.
    store.apply([post(late, outputs={"a": 0})])
    store.apply([patch(late, outputs={"a": 1}, end_time=_start(9), name="renamed")])
    first, second = store.get_run(early), store.get_run(late)
    assert first is not None and second is not None
    assert {k: v for k, v in first.items() if k not in ("id", "trace_id", "dotted_order")} == {
        k: v for k, v in second.items() if k not in ("id", "trace_id", "dotted_order")
    }
    assert first["name"] == "renamed" and first["outputs"] == {"a": 1}
    assert store.check()["patched_not_posted"] == []


def test_a_patch_updates_what_the_queries_filter_on(store: RunStore) -> None:
    rid = _id(7)
    store.apply([post(rid, start_time=_start(0))])
    assert store.load_runs(store.query_keys("r.error IS NOT NULL", (), order="asc", after=None, limit=10)) == []
    store.apply([patch(rid, error="boom", end_time=_start(3))])
    found = store.load_runs(store.query_keys("r.error IS NOT NULL", (), order="asc", after=None, limit=10))
    assert [q.run["id"] for q in found] == [rid] and found[0].run["error"] == "boom"
    assert store.summarize("1", ()).latencies == [3.0]


def test_one_request_is_stored_all_or_nothing(store: RunStore) -> None:
    """A request whose last item cannot be stored leaves nothing of the request behind."""
    rid = _id(8)
    with pytest.raises(TypeError):
        store.apply([post(rid)], feedback=[{"run_id": rid, "score": object()}])
    assert store.runs() == [] and store.feedback() == []
    store.apply([post(rid)], feedback=[{"run_id": rid, "score": 1}])
    assert store.count() == 1 and store.feedback() == [{"run_id": rid, "score": 1}]


# --- duplicates --------------------------------------------------------------------------------------


def test_a_second_post_of_a_run_is_counted_and_the_first_kept(store: RunStore) -> None:
    rid = _id(10)
    assert store.apply([post(rid, name="first")]).posted == [rid]
    again = store.apply([post(rid, name="second"), post(rid, name="third")])
    assert again.posted == [] and again.duplicates == [rid, rid]
    assert store.duplicate_posts() == {rid: 2}
    assert store.get_run(rid)["name"] == "first"  # type: ignore[index]
    assert store.count() == 1


# --- projects ----------------------------------------------------------------------------------------


def test_a_run_naming_a_new_project_creates_it_with_a_stable_id(store: RunStore) -> None:
    a, b = _id(20), _id(21)
    store.apply([post(a, session_name="alpha", start_time=_start(30)), post(b, session_name="alpha", start_time=_start(10))])
    (project,) = store.projects()
    assert project["id"] == project_id_for_name("alpha") and project["name"] == "alpha"
    # A derived project begins with its earliest run, not the first to arrive.
    assert project["start_time"] == "2026-01-01T12:00:10.000000Z"
    assert store.project_of_run(a) == store.project_of_run(b) == project["id"]
    stats = store.project_stats([project["id"]])[project["id"]]
    assert (stats["run_count"], stats["last_run_start_time"]) == (2, "2026-01-01T12:00:30.000000Z")
    assert (stats["total_tokens"], stats["total_cost"], stats["unpriced"]) == (0, None, 0)


def test_a_run_naming_a_project_by_id_keeps_that_id(store: RunStore) -> None:
    pid = _id(99)
    rid = _id(22)
    store.apply([post(rid, session_name=..., session_id=pid.upper())])
    assert store.project_of_run(rid) == pid
    assert store.project(pid)["name"] is None  # type: ignore[index]


def test_a_later_patch_does_not_move_a_run_to_another_project(store: RunStore) -> None:
    rid = _id(23)
    store.apply([post(rid, session_name="first")])
    store.apply([patch(rid, session_name="second", end_time=_start(1))])
    assert store.project_of_run(rid) == project_id_for_name("first")
    assert [p["name"] for p in store.projects()] == ["first"]


def test_created_projects_list_newest_first_and_filter(store: RunStore) -> None:
    one, new = store.create_project(name="One", description="d")
    assert new and one["description"] == "d" and uuid.UUID(one["id"])
    two, _ = store.create_project(name="two", project_id=_id(77), extra={"k": 1})
    assert two["id"] == _id(77) and two["extra"] == {"k": 1}
    assert [p["name"] for p in store.projects()] == ["two", "One"]
    assert [p["name"] for p in store.projects(name="One")] == ["One"]
    assert [p["name"] for p in store.projects(name_contains="ON")] == ["One"]
    assert [p["name"] for p in store.projects(ids=[two["id"]])] == ["two"]
    assert store.projects(ids=[]) == []
    assert [p["name"] for p in store.projects(limit=1, offset=1)] == ["One"]


def test_a_taken_name_or_id_is_refused_unless_upserted(store: RunStore) -> None:
    first, _ = store.create_project(name="p", description="old")
    with pytest.raises(ProjectExists, match="already exists") as info:
        store.create_project(name="p")
    assert info.value.project == first
    with pytest.raises(ProjectExists, match="id"):
        store.create_project(name="q", project_id=first["id"])
    updated, new = store.create_project(name="p", description="new", upsert=True)
    assert not new and updated["id"] == first["id"] and updated["description"] == "new"
    # A project derived from runs counts as existing, as on the service.
    store.apply([post(_id(24), session_name="derived")])
    with pytest.raises(ProjectExists):
        store.create_project(name="derived")


def test_runs_go_to_a_created_project_of_their_name(store: RunStore) -> None:
    created, _ = store.create_project(name="made", project_id=_id(78))
    store.apply([post(_id(25), session_name="made")])
    assert store.project_of_run(_id(25)) == created["id"] == _id(78)


# --- the consistency report --------------------------------------------------------------------------


def test_the_report_names_what_is_incomplete(store: RunStore) -> None:
    root, child, orphan, waiting = _id(30), _id(31), _id(32), _id(33)
    gone = _id(39)
    store.apply(
        [
            post(root, end_time=_start(5)),
            post(child, parent_run_id=root, trace_id=root),  # never ends
            post(orphan, parent_run_id=gone, trace_id=gone, end_time=_start(1)),
            patch(waiting, end_time=_start(2)),
        ]
    )
    store.record_violations([Violation(child, "dotted_order", "let through")], path="/runs/batch", accepted=True)
    store.record_violations([Violation(orphan, "id", "refused")], path="/runs", accepted=False)
    report = store.check()
    assert report["patched_not_posted"] == [waiting]
    assert report["never_completed"] == [child]
    assert report["missing_parents"] == [{"parent_run_id": gone, "children": [orphan]}]
    (accepted,) = report["accepted_violations"]
    assert (accepted["run_id"], accepted["rule"], accepted["path"]) == (child, "dotted_order", "/runs/batch")
    assert [v["accepted"] for v in store.violations()] == [True, False]
    assert store.violations()[1]["loc"] == ["body"]


def test_a_clean_store_reports_nothing(store: RunStore) -> None:
    store.apply([post(_id(34), end_time=_start(1))])
    assert store.check() == {
        "patched_not_posted": [], "never_completed": [], "missing_parents": [], "parent_cycles": [], "accepted_violations": []
    }


def test_runs_that_are_their_own_ancestors_are_reported(store: RunStore) -> None:
    a, b, c = _id(40), _id(41), _id(42)
    store.apply([post(a, parent_run_id=b), post(b, parent_run_id=a), post(c, parent_run_id=c)])
    assert store.check()["parent_cycles"] == [{"run_ids": [a, b]}, {"run_ids": [c]}]


# --- queries --------------------------------------------------------------------------------------------


def _tree(store: RunStore) -> tuple[str, list[str]]:
    """A root and three children, started at 1, 4, 2, 3 s, arriving in that order."""
    root = _id(40)
    children = [_id(41), _id(42), _id(43)]
    ops = [post(root, start_time=_start(1), dotted_order=f"20260101T120001000000Z{root}")]
    for child, second in zip(children, (4, 2, 3)):
        ops.append(
            post(
                child,
                start_time=_start(second),
                trace_id=root,
                parent_run_id=root,
                dotted_order=f"20260101T120001000000Z{root}.20260101T1200{second:02d}000000Z{child}",
            )
        )
    store.apply(ops)
    return root, children


def test_runs_read_in_arrival_order_or_tree_order_for_one_trace(store: RunStore) -> None:
    root, children = _tree(store)
    store.apply([post(_id(49))])  # another trace
    assert [r["id"] for r in store.runs()] == [root, *children, _id(49)]
    assert [r["id"] for r in store.runs(trace_id=root)] == [root, children[1], children[2], children[0]]
    assert store.trace_ids() == [root, _id(49)]


def test_query_orders_by_start_time_and_pages_by_position(store: RunStore) -> None:
    root, children = _tree(store)
    asc = store.load_runs(store.query_keys("r.trace_id = ?", (root,), order="asc", after=None, limit=10))
    assert [q.run["id"] for q in asc] == [root, children[1], children[2], children[0]]
    assert {q.project_id for q in asc} == {project_id_for_name("demo")}
    desc = store.load_runs(store.query_keys("1", (), order="desc", after=None, limit=2))
    assert [q.run["id"] for q in desc] == [children[0], children[2]]
    # Runs that arrive between pages: one before the boundary comes in its place on a later
    # page, one after it stays behind; nothing repeats or shifts.
    store.apply([post(_id(48), start_time=_start(0)), post(_id(46), start_time=_start(5))])
    rest = store.load_runs(store.query_keys("1", (), order="desc", after=desc[-1].position, limit=10))
    assert [q.run["id"] for q in rest] == [children[1], root, _id(48)]


def test_query_reads_only_posted_runs_and_binds_values(store: RunStore) -> None:
    root, children = _tree(store)
    store.apply([patch(_id(47), name="x")])  # patched, never posted
    assert len(store.load_runs(store.query_keys("1", (), order="asc", after=None, limit=100))) == 4
    # A value is a bound parameter, never SQL.
    assert store.load_runs(store.query_keys("r.name = ?", ("run' OR '1'='1",), order="asc", after=None, limit=10)) == []
    found = store.load_runs(store.query_keys("r.parent_run_id IS NULL", (), order="asc", after=None, limit=10))
    assert [q.run["id"] for q in found] == [root]


def test_summary_counts_tokens_and_costs_from_the_index(store: RunStore) -> None:
    a, b, c = _id(50), _id(51), _id(52)
    usage = {"usage_metadata": {"input_tokens": 3, "output_tokens": 4}}
    store.apply(
        [
            post(a, start_time=_start(0), end_time=_start(2), outputs=usage, extra={"metadata": {"ls_model_name": "mine"}}),
            post(b, start_time=_start(1), end_time=_start(2), error="bad"),
            post(c, start_time=_start(3)),
        ]
    )
    summary = store.summarize("1", ())
    assert (summary.count, summary.errors, summary.latencies) == (3, 1, [1.0, 2.0])
    assert summary.last_start_time == "2026-01-01T12:00:03.000000Z"
    assert summary.usage == {"prompt_tokens": 3, "completion_tokens": 4, "total_tokens": 7, "prompt_cost": None,
                             "completion_cost": None, "total_cost": None, "unpriced": 1}  # no price for "mine"
    assert store.summarize("r.error IS NOT NULL", ()).count == 1


def test_completed_runs_are_those_with_an_end_time(store: RunStore) -> None:
    done, running = _id(53), _id(54)
    store.apply([post(done), post(running)])
    store.apply([patch(done, end_time=_start(1))])
    assert [r["id"] for r in store.completed_runs()] == [done]
    assert (store.count(), store.count(completed=True)) == (2, 1)


def test_wait_wakes_on_a_write_and_times_out_without_one(store: RunStore) -> None:
    assert store.wait(lambda: store.count() == 1, timeout=0.05) is False
    writer = threading.Timer(0.05, lambda: store.apply([post(_id(55))]))
    writer.start()
    try:
        assert store.wait(lambda: store.count() == 1, timeout=10) is True
    finally:
        writer.join()


# --- reset --------------------------------------------------------------------------------------------


def test_reset_empties_every_table_and_numbering_starts_again(store: RunStore) -> None:
    _tree(store)
    store.apply([post(_id(60)), post(_id(60))], feedback=[{"run_id": _id(60), "score": 1}])
    store.record_violations([Violation(None, "x", "y")], path="/runs", accepted=True)
    store.create_project(name="made")
    store.reset()
    assert store.runs() == [] and store.projects() == [] and store.violations() == [] and store.feedback() == []
    assert store.duplicate_posts() == {} and store.trace_ids() == []
    assert store.check()["accepted_violations"] == []
    store.apply([post(_id(61)), post(_id(62))])
    positions = [q.position[1] for q in store.load_runs(store.query_keys("1", (), order="asc", after=None, limit=10))]
    assert positions == [1, 2]


# --- a file database -----------------------------------------------------------------------------------


def test_a_file_database_keeps_everything_for_the_next_store(tmp_path: Path) -> None:
    path = tmp_path / "nested" / "runs.db"  # parents are created
    first = RunStore(path)
    root, children = _tree(first)
    first.apply([post(root)])  # a duplicate
    first.apply([patch(children[0], end_time=_start(9), outputs={"o": 1})])
    first.record_violations([Violation(root, "r", "m")], path="/runs", accepted=True)
    first.create_project(name="made", description="kept")
    before = (first.runs(), first.projects(), first.duplicate_posts(), first.check())
    first.close()

    again = RunStore(path, create=False)
    try:
        assert (again.runs(), again.projects(), again.duplicate_posts(), again.check()) == before
        # New runs come after the old ones.
        again.apply([post(_id(70), start_time=_start(1))])
        assert [r["id"] for r in again.runs()][-1] == _id(70)
        with sqlite3.connect(path) as conn:
            assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    finally:
        again.close()


def test_a_missing_database_is_not_created_when_asked_not_to(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="no runs database"):
        RunStore(tmp_path / "absent.db", create=False)
    assert not (tmp_path / "absent.db").exists()


def test_a_database_from_a_newer_schema_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "future.db"
    with sqlite3.connect(path) as conn:
        conn.execute("PRAGMA user_version=99")
    with pytest.raises(RuntimeError, match="schema version 99"):
        RunStore(path)


def test_a_closed_store_says_so() -> None:
    s = RunStore()
    s.close()
    s.close()  # twice is fine
    with pytest.raises(RuntimeError, match="closed"):
        s.runs()
