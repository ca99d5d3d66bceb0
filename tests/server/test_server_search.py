"""Search through the trigram index (issue 28): the scan's answers exactly, kept current, and the scan without it.

``search("text")`` used to scan every run's JSON. It now asks SQLite's FTS5 trigram
index for candidates and checks each with the scan's condition; these tests hold the
two to the same answers on texts chosen to differ (case, quotes, escapes, non-ASCII,
two characters), follow the index through patches, deletions and resets, and run the
service without FTS5 (said once, scanned) and back with it (rebuilt).
"""

from __future__ import annotations

import logging
import uuid
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
import requests
from server.server_helpers import T0, Trace, entry, iso

from otel_runs_exporter.server import LocalService, RunStore, _store_search
from otel_runs_exporter.server._filter import search_where
from otel_runs_exporter.server._validate import RunOp

TEXTS = [
    "Hello World",
    'she said "stop" and left',
    "line one\nline two\ttabbed",
    "Ünïcödé ÉCOLE straße",
    "path C:\\temp\\new",
    "emoji 🚀 launch",
    "KELVIN \u212a sign",
    "xy",
]
NEEDLES = [
    "hello", "WORLD", "lo wo", '"stop"', "said \"", "one\nline", "\ttab", "ÉCOLE", "école", "straße", "C:\\temp",
    "🚀 la", "kelvin k", "kelvin \u212a", "\u212a sign", "xy", "y", "no such text", "Hello World", "llo",
]


def _op(kind: str, data: dict[str, Any]) -> RunOp:
    return RunOp(kind, data["id"], data)  # type: ignore[arg-type]


def _post(text: str, *, trace_id: str | None = None, parent: str | None = None, at: int = 0) -> dict[str, Any]:
    run_id = str(uuid.uuid4())
    start = T0 + timedelta(milliseconds=at)
    dotted = entry(start, run_id) if parent is None else f"{parent}.{entry(start, run_id)}"
    return {
        "id": run_id, "trace_id": trace_id or run_id, "dotted_order": dotted, "name": "run", "run_type": "chain",
        "start_time": iso(start), "session_name": "search", "inputs": {"text": text},
        **({"parent_run_id": dotted.split(".")[-2].partition("Z")[2][:36]} if parent else {}),
    }


def _found(store: RunStore, needle: str) -> set[str]:
    where = search_where(needle, "r", "filter")
    found = store.load_runs(store.query_keys(where.sql, where.params, order="asc", after=None, limit=1000))
    return {q.run["inputs"]["text"] for q in found}


@pytest.fixture
def store() -> Any:
    s = RunStore(":memory:")
    yield s
    s.close()


def test_the_index_answers_what_the_scan_answers(store: RunStore, monkeypatch: pytest.MonkeyPatch) -> None:
    assert _store_search.available(), "this machine's SQLite has FTS5 with the trigram tokenizer"
    store.apply([_op("post", _post(text)) for text in TEXTS])
    indexed = {needle: _found(store, needle) for needle in NEEDLES}
    assert "runs_fts" in search_where("hello", "r", "filter").sql and "runs_fts" not in search_where("xy", "r", "f").sql
    monkeypatch.setattr(_store_search, "available", lambda: False)
    scanned = {needle: _found(store, needle) for needle in NEEDLES}
    assert indexed == scanned
    assert indexed["WORLD"] == {"Hello World"} and indexed['"stop"'] == {'she said "stop" and left'}
    assert indexed["école"] == set()  # ASCII case only, as the scan has always had it
    # The index folds the Kelvin sign into k, the scan does not: the check keeps the scan's answer.
    assert indexed["xy"] == {"xy"} and indexed["kelvin k"] == set() and indexed["kelvin \u212a"] == {"KELVIN \u212a sign"}


def test_the_index_follows_patches_deletions_and_resets(store: RunStore) -> None:
    run = _post("the first draft")
    store.apply([_op("post", run)])
    assert _found(store, "first draft") == {"the first draft"}
    store.apply([_op("patch", {"id": run["id"], "outputs": {"text": "a second thought"}})])
    assert _found(store, "second thought") == {"the first draft"}  # found by its patch's text
    store.apply([_op("patch", {"id": run["id"], "outputs": {"text": "a third"}})])
    assert _found(store, "second thought") == set() and _found(store, "a third") == {"the first draft"}
    project = store.project_of_run(run["id"])
    assert project is not None and store.delete_project(project) == 1
    assert _found(store, "first draft") == set()
    store.apply([_op("post", _post("after the deletion"))])
    store.reset()
    assert _found(store, "deletion") == set()
    store.apply([_op("post", _post("after the reset"))])
    assert _found(store, "the reset") == {"after the reset"}


def test_without_fts5_searches_scan_said_once_and_the_index_is_rebuilt_later(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "runs.db"
    first = RunStore(path)
    first.apply([_op("post", _post("kept with the index"))])
    first.close()
    monkeypatch.setattr(_store_search, "available", lambda: False)
    monkeypatch.setattr(_store_search, "_said", False)
    with caplog.at_level(logging.WARNING, logger=_store_search.__name__):
        for _ in range(2):
            without = RunStore(path)  # its triggers would fail every write here: dropped
            without.apply([_op("post", _post("written by the scan"))])
            assert _found(without, "by the scan") == {"written by the scan"}
            without.close()
    assert len([r for r in caplog.records if "FTS5" in r.getMessage()]) == 1
    monkeypatch.undo()
    again = RunStore(path)  # FTS5 back: the index is rebuilt, the runs written meanwhile in it
    try:
        assert "runs_fts" in search_where("by the scan", "r", "filter").sql
        assert _found(again, "by the scan") == {"written by the scan"}
        assert _found(again, "with the index") == {"kept with the index"}
    finally:
        again.close()


def _llm(trace: Trace, name: str, at: int, parent_dotted: str, *, model: str, tokens: tuple[int, int], text: str) -> dict[str, Any]:
    run_id = str(uuid.uuid4())
    start = trace.root_start + timedelta(milliseconds=at)
    dotted = f"{parent_dotted}.{entry(start, run_id)}"
    return {
        "id": run_id, "trace_id": trace.root_id, "parent_run_id": parent_dotted.split(".")[-1][-36:],
        "dotted_order": dotted, "name": name, "run_type": "llm", "start_time": iso(start), "session_name": "tests",
        "end_time": iso(start + timedelta(milliseconds=5)),
        "extra": {"metadata": {"ls_model_name": model, "ls_provider": "openai"}},
        "outputs": {"text": text, "usage_metadata": {"input_tokens": tokens[0], "output_tokens": tokens[1]}},
    }


def test_the_query_api_finds_a_trace_by_a_deep_run_and_filters_by_model_and_tokens(service: LocalService) -> None:
    traces = []
    for i, (model, tokens, text) in enumerate([("gpt-4o", (100, 50), "plain"), ("gpt-4o-mini", (10, 5), "a needle-in-hay")]):
        trace = Trace(T0 + timedelta(minutes=i))
        deep = _llm(trace, "deep", 10, trace.child_dotted, model=model, tokens=tokens, text=text)
        posts = [trace.root_post(), trace.child_post() | {"run_type": "chain"}, deep]
        assert requests.post(service.url + "/runs/batch", json={"post": posts}, timeout=5).status_code == 202
        traces.append(trace)

    def roots(**body: Any) -> list[str]:
        answer = requests.post(service.url + "/runs/query", json={"is_root": True, **body}, timeout=5)
        assert answer.status_code == 200, answer.text
        return [r["id"] for r in answer.json()["runs"]]

    assert roots(tree_filter='search("NEEDLE-in")') == [traces[1].root_id]
    assert roots(query="needle") == []  # query is on the run itself: the root does not say it
    assert roots(tree_filter='eq(model, "gpt-4o")') == [traces[0].root_id]
    # A root's tokens are its trace's: 150 and 15.
    assert roots(filter="gte(total_tokens, 100)") == [traces[0].root_id]
    assert roots(filter="and(gte(total_tokens, 15), lt(prompt_tokens, 11))") == [traces[1].root_id]
    answer = requests.post(service.url + "/runs/query", json={"filter": 'eq(model, "gpt-4o-mini")'}, timeout=5).json()
    assert [r["name"] for r in answer["runs"]] == ["deep"]
    bad = requests.post(service.url + "/runs/query", json={"filter": 'gt(total_tokens, "many")'}, timeout=5)
    assert bad.status_code == 422 and "total_tokens is a number" in bad.text
    # The same through the service's SDK, as its list_runs arguments carry them.
    langsmith = pytest.importorskip("langsmith")
    client = langsmith.Client(api_url=service.url, api_key="unused")
    with pytest.warns(DeprecationWarning):
        found = list(client.list_runs(project_name="tests", is_root=True, tree_filter='search("needle-in")',
                                      filter="gte(total_tokens, 15)"))
    assert [str(r.id) for r in found] == [traces[1].root_id] and found[0].total_tokens == 15
