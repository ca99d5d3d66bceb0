"""Costs (issue 28, part 3): the price table, each model run priced, rolled up, read back through the SDK.

The service answers the SDK's own usage fields (``prompt_tokens`` ... ``total_cost``),
which were always null, with a root carrying its trace's totals; ``/runs/stats``,
threads and projects add them up. A model the table does not have has no price
(null, not 0); a cost the run carries wins; a user's price file replaces or adds
rows, and a service started with another table prices the stored runs again.
"""

from __future__ import annotations

import asyncio
import doctest
import json
import uuid
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
import requests
from server.server_helpers import T0, Trace, entry, iso

from otel_runs_exporter import _cost
from otel_runs_exporter._cost import PriceFileError, PriceTable, usage_of
from otel_runs_exporter.server import LocalService

langsmith = pytest.importorskip("langsmith")
from langsmith.utils import get_env_var  # noqa: E402

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


def _model_run(trace: Trace, name: str, at: int, *, model: str | None, tokens: tuple[int, int], **usage: Any) -> dict[str, Any]:
    run_id = str(uuid.uuid4())
    start = trace.root_start + timedelta(milliseconds=at)
    metadata = {"ls_provider": "openai", **({"ls_model_name": model} if model else {})}
    metadata.update(usage.pop("metadata", {}))
    return {
        "id": run_id, "trace_id": trace.root_id, "parent_run_id": trace.root_id,
        "dotted_order": f"{trace.root_dotted}.{entry(start, run_id)}", "name": name, "run_type": "llm",
        "start_time": iso(start), "end_time": iso(start + timedelta(milliseconds=3)), "session_name": "costs",
        "extra": {"metadata": metadata},
        "outputs": {"usage_metadata": {"input_tokens": tokens[0], "output_tokens": tokens[1], **usage}},
    }


def _post(svc: LocalService, runs: list[dict[str, Any]]) -> None:
    assert requests.post(svc.url + "/runs/batch", json={"post": runs}, timeout=5).status_code == 202


def _trace(svc: LocalService, *children: tuple[str, dict[str, Any]], thread: str | None = None, at: int = 0) -> Trace:
    trace = Trace(T0 + timedelta(minutes=at))
    root = trace.root_post() | {"session_name": "costs", "end_time": iso(trace.root_start + timedelta(seconds=1))}
    if thread:
        root["extra"] = {"metadata": {"thread_id": thread}}
    _post(svc, [root, *(_model_run(trace, name, 10 + i, **kw) for i, (name, kw) in enumerate(children))])
    return trace


def test_prices_and_their_lookup_rules() -> None:
    table = PriceTable.load()
    assert table.updated and table.rows["gpt-4o-mini"].input == pytest.approx(0.15e-6)
    # What ran first, when the table has it: a dated snapshot is priced as itself.
    assert table.lookup(["gpt-4o-2024-05-13", "gpt-4o"])[0] == "gpt-4o-2024-05-13"
    assert table.lookup(["some-snapshot-x", "gpt-4o"])[0] == "gpt-4o"  # then what was asked for
    assert table.lookup(["claude-3-5-haiku@20241022"])[0] == "claude-3-5-haiku"  # a date it lacks: without it
    assert table.lookup(["models/gemini-2.0-flash"])[0] == "gemini-2.0-flash"
    assert table.lookup(["my-model"]) is None
    # Cache reads at their price, reasoning within output at output's.
    usage = usage_of({"run_type": "llm", "extra": {"metadata": {"ls_model_name": "gpt-4o"}}, "outputs": {
        "usage_metadata": {"input_tokens": 1000, "output_tokens": 100, "input_token_details": {"cache_read": 800},
                           "output_token_details": {"reasoning": 40}}}})
    cost = table.cost(usage)
    assert cost is not None
    assert cost.input == pytest.approx(200 * 2.5e-6 + 800 * 1.25e-6) and cost.output == pytest.approx(100 * 10e-6)


def test_a_price_file_adds_and_replaces_rows_and_a_bad_one_says_what_is_wrong(tmp_path: Path) -> None:
    mine = tmp_path / "prices.json"
    mine.write_text(json.dumps({"updated": "2026-01-02", "models": {
        "my-model": {"input": 1, "output": 2, "reasoning": 4}, "openai/gpt-4o": {"input": 1, "output": 1}}}))
    table = PriceTable.load(mine)
    assert table.updated == "2026-01-02" and table.lookup(["my-model"])[0] == "my-model"
    assert table.lookup(["gpt-4o"], "openai")[0] == "openai/gpt-4o" and table.lookup(["gpt-4o"])[0] == "gpt-4o"
    usage = _cost.Usage(("my-model",), None, 10, 10, None, 0, 5)
    assert table.cost(usage).output == pytest.approx(5 * 2e-6 + 5 * 4e-6)
    for text, says in [("{", "cannot read"), ('{"models": []}', "expected"),
                       ('{"models": {"m": {"input": -1, "output": 1}}}', "models.m.input")]:
        mine.write_text(text)
        with pytest.raises(PriceFileError, match=says):
            PriceTable.load(mine)
    with pytest.raises(ValueError, match="models.m.input"):
        LocalService(prices=mine)  # before anything starts


def test_the_sdk_reads_each_runs_cost_and_a_roots_trace_totals(service: LocalService) -> None:
    trace = _trace(
        service,
        ("priced", {"model": "gpt-4o-mini", "tokens": (1000, 500)}),
        ("unknown", {"model": "my-own-model", "tokens": (50, 10)}),
        ("carried", {"model": "gpt-4o", "tokens": (10, 10), "input_cost": 0.5, "output_cost": 0.25, "total_cost": 0.75}),
    )
    get_env_var.cache_clear()
    client = langsmith.Client(api_url=service.url, api_key="unused")
    runs = {r.name: r for r in client.list_runs(project_name="costs")}
    priced, unknown, carried, root = runs["priced"], runs["unknown"], runs["carried"], runs["agent"]
    assert (priced.prompt_tokens, priced.completion_tokens, priced.total_tokens) == (1000, 500, 1500)
    assert float(priced.prompt_cost) == pytest.approx(0.00015) and float(priced.total_cost) == pytest.approx(0.00045)
    assert unknown.total_tokens == 60 and unknown.total_cost is None  # no price, not 0
    assert float(carried.total_cost) == 0.75  # what the run reported wins over the table's
    assert root.total_tokens == 1580 and float(root.total_cost) == pytest.approx(0.75045)
    read = client.read_run(trace.root_id)
    assert read.total_tokens == 1580 and float(read.completion_cost) == pytest.approx(0.0003 + 0.25)
    stats = client.get_run_stats(project_names=["costs"])
    assert stats["total_cost"] == pytest.approx(0.75045) and stats["unpriced_runs"] == 1  # each run once
    assert stats["total_tokens"] == 1580 and stats["prices_updated"] == PriceTable.load().updated
    one = requests.post(service.url + "/runs/stats", json={"id": [unknown.id.hex]}, timeout=5).json()
    assert one["total_cost"] is None and one["total_tokens"] == 60  # only unpriced runs: no cost at all
    answer = requests.post(service.url + "/runs/query", json={"select": ["model", "priced_as"], "id": [str(priced.id)]},
                           timeout=5).json()["runs"][0]
    assert (answer["model"], answer["priced_as"]) == ("gpt-4o-mini", "gpt-4o-mini")


def test_threads_and_projects_add_costs_up(service: LocalService) -> None:
    for turn in range(2):
        _trace(service, ("call", {"model": "gpt-4o-mini", "tokens": (1000, 500)}), thread="t-9", at=turn)
    project = requests.get(service.url + "/sessions?name=costs", timeout=5).json()[0]["id"]
    get_env_var.cache_clear()
    client = langsmith.Client(api_url=service.url, api_key="unused")

    async def read() -> tuple[Any, list[Any], dict[str, Any]]:
        threads = [t async for t in client.threads.query(project_id=project, min_start_time=T0 - timedelta(days=1))]
        turns = [t async for t in client.threads.list_traces("t-9", project_id=project,
                                                              selects=["TOTAL_COST", "PROMPT_COST", "TOTAL_TOKENS"])]
        stats = await client.threads.stats("t-9", session_id=project, selects=["TOTAL_COST", "TOTAL_TOKENS"])
        return threads, turns, stats

    threads, turns, stats = asyncio.run(read())
    assert float(threads[0].total_cost) == pytest.approx(0.0009)
    assert [float(t.total_cost) for t in turns] == pytest.approx([0.00045, 0.00045])
    assert float(turns[0].prompt_cost) == pytest.approx(0.00015) and turns[0].total_tokens == 1500
    assert stats.total_cost == pytest.approx(0.0009) and stats.total_tokens == 3000
    costs = client.read_project(project_id=project, include_stats=True)
    assert float(costs.total_cost) == pytest.approx(0.0009) and costs.total_tokens == 3000


def test_a_service_started_with_another_table_prices_the_stored_runs_again(tmp_path: Path) -> None:
    db = str(tmp_path / "runs.db")
    mine = tmp_path / "prices.json"
    mine.write_text(json.dumps({"models": {"my-own-model": {"input": 1000, "output": 1000}}}))
    with LocalService(db=db) as svc:
        _trace(svc, ("call", {"model": "my-own-model", "tokens": (1, 1)}), ("known", {"model": "gpt-4o", "tokens": (1, 0)}))

    def costs(svc: LocalService) -> dict[str, Any]:
        runs = requests.post(svc.url + "/runs/query", json={"run_type": "llm", "select": ["total_cost"]}, timeout=5)
        return {r["name"]: r["total_cost"] for r in runs.json()["runs"]}

    with LocalService(db=db) as svc:  # no table given: stored costs are kept as they are
        assert costs(svc) == {"call": None, "known": pytest.approx(2.5e-6)}
    with LocalService(db=db, prices=mine) as svc:
        assert costs(svc) == {"call": pytest.approx(0.002), "known": pytest.approx(2.5e-6)}
    with LocalService(db=db, prices=PriceTable.load()) as svc:  # back to the shipped table: no price again
        assert costs(svc)["call"] is None


def test_doctests() -> None:
    assert doctest.testmod(_cost).failed == 0


def test_the_exporter_with_a_price_file_stamps_costs_the_service_then_keeps(
    service: LocalService, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from opentelemetry.sdk.trace import TracerProvider

    from otel_runs_exporter import RunsSpanProcessor

    mine = tmp_path / "prices.json"
    mine.write_text(json.dumps({"models": {"house-model-1": {"input": 2, "output": 8}}}))
    monkeypatch.setenv("OTEL_EXPORTER_RUNS_PRICES", str(mine))
    for model in ("house-model-1", "gpt-4o-mini", "unknown-model"):
        provider = TracerProvider()
        processor = RunsSpanProcessor(endpoint=service.url, project="stamped")  # the file from the variable
        provider.add_span_processor(processor)
        attributes = {"gen_ai.operation.name": "chat", "gen_ai.system": "openai", "gen_ai.request.model": model,
                      "gen_ai.usage.input_tokens": 1000, "gen_ai.usage.output_tokens": 100}
        provider.get_tracer("t").start_span(f"chat {model}", attributes=attributes).end()
        assert processor.force_flush(10_000)
        provider.shutdown()
    runs = {r["name"]: r for r in service.wait_for_runs(3)}
    usage = runs["chat house-model-1"]["outputs"]["usage_metadata"]
    assert usage["input_cost"] == pytest.approx(0.002) and usage["total_cost"] == pytest.approx(0.0028)
    assert runs["chat gpt-4o-mini"]["outputs"]["usage_metadata"]["total_cost"] == pytest.approx(0.00021)  # shipped row
    assert "total_cost" not in runs["chat unknown-model"]["outputs"]["usage_metadata"]
    answer = requests.post(service.url + "/runs/query", json={"select": ["total_cost", "priced_as"]}, timeout=5).json()
    seen = {r["name"]: (r["priced_as"], r["total_cost"]) for r in answer["runs"]}
    # The service has no row for house-model-1: the cost the run carries is the one it keeps.
    assert seen["chat house-model-1"] == ("carried", pytest.approx(0.0028))
    assert seen["chat unknown-model"] == (None, None)
