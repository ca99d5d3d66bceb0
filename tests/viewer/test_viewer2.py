"""Issue 28's pages in a real headless Chromium: feedback, search, cost, threads, live updates, charts.

One service for the module, fed by the real exporter once (a support conversation of
three turns, a model call with a price, one without, a deep tool output); each test
opens its page against it, and leaves a screenshot under tests/artifacts/.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest
import requests

from otel_runs_exporter.server import LocalService, viewer_link

pytest.importorskip("selenium", reason="selenium is not installed: pip install -e '.[test]'")
langsmith = pytest.importorskip("langsmith")

from selenium.webdriver.common.by import By  # noqa: E402
from server.test_server_charts import seeded_day  # noqa: E402
from viewer.viewer_helpers import as_json, click, export, screenshot, wait_for  # noqa: E402

pytestmark = pytest.mark.heavy(seconds=9)

PROJECT = "support"
DEEP_WORD = "zanzibar-quokka"  # only in a grandchild's output: the search must find its trace by it


@dataclass
class Seeded:
    service: LocalService
    traces: dict[str, str]  # root name -> trace id
    runs: dict[str, dict[str, Any]]  # run name -> run as stored (the last of that name)

    def run(self, root: str, name: str) -> dict[str, Any]:
        """The run called ``name`` in the trace whose root is called ``root``."""
        trace_id = self.traces[root]
        return next(r for r in self.service.trace(trace_id) if r["name"] == name)


def _turn(tracer: Any, name: str, question: str, answer: str, *, thread: str, model: str, tokens: tuple[int, int],
          deep: str | None = None) -> None:
    root_attributes = {
        "langsmith.span.kind": "chain",
        "langsmith.metadata.session_id": thread,
        "input.value": as_json({"messages": [{"role": "user", "content": question}]}),
        "output.value": as_json({"answer": answer}),
    }
    with tracer.start_as_current_span(name, attributes=root_attributes):
        llm = {
            "gen_ai.operation.name": "chat",
            "gen_ai.system": "openai",
            "gen_ai.request.model": model,
            "gen_ai.usage.input_tokens": tokens[0],
            "gen_ai.usage.output_tokens": tokens[1],
        }
        with tracer.start_as_current_span(f"chat {model}", attributes=llm):
            with tracer.start_as_current_span("lookup", attributes={"langsmith.span.kind": "tool"}) as tool:
                if deep:
                    tool.set_attribute("output.value", as_json({"note": f"routed via {deep}"}))


@pytest.fixture(scope="module")
def seeded() -> Iterator[Seeded]:
    with LocalService() as service:
        def work(tracer: Any) -> None:
            _turn(tracer, "turn one", "Where is my parcel?", "It left the depot.", thread="conv-1",
                  model="gpt-4o-mini", tokens=(1000, 500), deep=DEEP_WORD)
            _turn(tracer, "turn two", "When will it arrive?", "Tomorrow.", thread="conv-1", model="gpt-4o-mini",
                  tokens=(1200, 300))
            _turn(tracer, "turn three", "Thanks!", "You're welcome.", thread="conv-1", model="my-own-model",
                  tokens=(50, 10))

        export(service.url, work, project=PROJECT)
        runs = service.wait_for_runs(9)
        yield Seeded(
            service,
            {r["name"]: r["trace_id"] for r in runs if not r.get("parent_run_id")},
            {r["name"]: r for r in runs},
        )


def detail_text(page: Any) -> str:
    return page.execute_script("const d = document.querySelector('.detail .run'); return d ? d.textContent : '';")


def test_feedback_added_in_the_page_reads_back_through_the_sdk(page: Any, seeded: Seeded) -> None:
    service = seeded.service
    root = seeded.runs["turn two"]
    port = service.url.rsplit(":", 1)[1]
    # Opened under another loopback name than the service's address: its write is still its own page's.
    page.get(viewer_link(f"http://localhost:{port}", root["trace_id"], root["id"]))
    wait_for(lambda: page.find_elements(By.CSS_SELECTOR, ".detail .fb-thumb-up"), what="the feedback form")
    page.find_element(By.CSS_SELECTOR, ".detail .fb-text").send_keys("right answer, <b>fast</b>")
    click(lambda: page.find_element(By.CSS_SELECTOR, ".detail .fb-thumb-up"), "thumbs up")
    wait_for(lambda: page.find_element(By.CSS_SELECTOR, ".detail .fb-status").text == "saved", what="the saved note")
    wait_for(lambda: "▲1" in page.find_element(By.CSS_SELECTOR, f'.row[data-run-id="{root["id"]}"]').text,
             what="the row's thumbs up")
    assert "▲ 1 ▼ 0" in page.find_element(By.CSS_SELECTOR, ".facts").text
    assert "right answer, <b>fast</b>" in page.find_element(By.CSS_SELECTOR, ".detail .fb-comment").text  # as text
    screenshot(page, "viewer2-feedback")

    client = langsmith.Client(api_url=service.url, api_key="unused")
    (item,) = client.list_feedback(run_ids=[root["id"]])
    assert (item.key, item.score, item.comment) == ("thumbs", 1, "right answer, <b>fast</b>")
    assert str(item.trace_id) == root["trace_id"] and item.feedback_source.type == "app"

    # The list keeps the traces with a thumbs up (and its link says so).
    page.get(f"{service.url}/#/?project={PROJECT}&feedback=up")
    wait_for(lambda: [r.text for r in page.find_elements(By.CSS_SELECTOR, "tr.trace .col-name")] == ["turn two"],
             what="the one trace with a thumbs up")
    client.delete_feedback(item.id)  # the other pages' tests see no feedback


def list_names(page: Any) -> list[str]:
    return page.execute_script("return [...document.querySelectorAll('tr.trace .col-name')].map(e => e.textContent)")


def test_search_finds_a_trace_by_a_word_deep_in_an_output_with_filters_in_its_link(page: Any, seeded: Seeded) -> None:
    service = seeded.service
    page.get(f"{service.url}/#/?project={PROJECT}")
    wait_for(lambda: list_names(page) == ["turn three", "turn two", "turn one"], what="the three turns")
    page.find_element(By.ID, "search").send_keys(DEEP_WORD.upper())  # a grandchild's output, in another case
    wait_for(lambda: list_names(page) == ["turn one"], what="the trace whose tool said it")
    assert f"q={DEEP_WORD.upper()}" in page.current_url
    screenshot(page, "viewer2-search")
    # The same view from its link, narrowed further: a tool run saying it, in traces of the last day with 1,500+ tokens.
    page.get(f"{service.url}/#/?project={PROJECT}&q={DEEP_WORD}&since=24h&type=tool&tokens=1500")
    wait_for(lambda: list_names(page) == ["turn one"], what="the filters from the link")
    assert page.find_element(By.ID, "range").get_attribute("value") == "24h"
    assert page.find_element(By.ID, "type").get_attribute("value") == "tool"
    page.get(f"{service.url}/#/?project={PROJECT}&q={DEEP_WORD}&type=llm")
    wait_for(lambda: page.find_element(By.CSS_SELECTOR, ".empty").text == "No traces match.", what="no llm run says it")
    page.get(f"{service.url}/#/?project={PROJECT}&model=gpt-4o-mini&tokens=1600")
    wait_for(lambda: list_names(page) == [], what="no gpt-4o-mini trace of 1,600 tokens")
    page.get(f"{service.url}/#/?project={PROJECT}&model=gpt-4o-mini&tokens=1500")
    wait_for(lambda: list_names(page) == ["turn two", "turn one"], what="both gpt-4o-mini traces of 1,500 tokens")


def usage_of_rows(page: Any) -> dict[str, str]:
    """Each tree row's name -> its model, tokens and cost, as shown."""
    return page.execute_script(
        "return Object.fromEntries([...document.querySelectorAll('.tree .row')].map(r =>"
        " [r.querySelector('.name').textContent, (r.querySelector('.usage') || {textContent: ''}).textContent]))"
    )


def test_a_trace_shows_its_cost_and_each_model_row_its_model_tokens_and_cost(page: Any, seeded: Seeded) -> None:
    service = seeded.service
    one = seeded.runs["turn one"]
    page.get(viewer_link(service.url, one["trace_id"], seeded.run("turn one", "chat gpt-4o-mini")["id"]))
    # gpt-4o-mini at $0.15 / $0.60 per million tokens: 1,000 in and 500 out are $0.00015 + $0.0003.
    wait_for(lambda: "$0.00045" in page.find_element(By.CSS_SELECTOR, ".facts").text, what="the trace's cost")
    rows = usage_of_rows(page)
    assert rows["chat gpt-4o-mini"] == "gpt-4o-mini1,500 tok$0.00045"
    assert rows["turn one"] == "1,500 tok$0.00045"  # the root carries its trace's totals
    assert rows["lookup"] == ""
    wait_for(lambda: "priced as gpt-4o-mini" in detail_text(page), what="the run's cost and its price row")
    cost = page.execute_script(
        "const dt = [...document.querySelectorAll('.detail dt')].find(e => e.textContent === 'cost');"
        " return dt ? dt.nextElementSibling.textContent : null"
    )
    assert cost == "$0.00045: $0.00015 in, $0.00030 out (priced as gpt-4o-mini)", cost
    screenshot(page, "viewer2-cost")

    three = seeded.runs["turn three"]
    page.get(viewer_link(service.url, three["trace_id"], seeded.run("turn three", "chat my-own-model")["id"]))
    wait_for(lambda: usage_of_rows(page).get("chat my-own-model") == "my-own-model60 tokno price", what="no price")
    wait_for(lambda: "no price" in page.find_element(By.CSS_SELECTOR, ".facts").text, what="the trace without a price")
    wait_for(lambda: "not in the price table" in detail_text(page), what="the run's missing price")
    page.get(f"{service.url}/#/?project={PROJECT}")
    wait_for(lambda: [c.text for c in page.find_elements(By.CSS_SELECTOR, "tr.trace .col-cost")] == ["no price", "$0.00036", "$0.00045"],
             what="each trace's cost in the list")


def test_a_thread_of_three_traces_shows_three_turns(page: Any, seeded: Seeded) -> None:
    service = seeded.service
    page.get(f"{service.url}/#/threads/conv-1")  # no project in the link: the thread is looked for
    wait_for(lambda: len(page.find_elements(By.CSS_SELECTOR, ".turn")) == 3, what="three turns")
    turns = page.execute_script(
        "return [...document.querySelectorAll('.turn')].map(t => ({head: t.querySelector('.turnhead').innerText,"
        " said: [...t.querySelectorAll('.content')].map(c => c.textContent),"
        " href: t.querySelector('a').getAttribute('href')}))"
    )
    assert [t["said"] for t in turns] == [
        ["Where is my parcel?", "It left the depot."], ["When will it arrive?", "Tomorrow."], ["Thanks!", "You're welcome."],
    ]
    assert [t["head"].split("\n")[0] for t in turns] == ["Turn 1", "Turn 2", "Turn 3"]
    assert turns[0]["href"] == f"#/trace/{seeded.traces['turn one']}"
    assert "$0.00045" in turns[0]["head"] and "1,500" in turns[0]["head"] and "no price" in turns[2]["head"]
    facts = page.find_element(By.CSS_SELECTOR, ".facts").text
    assert "turns\n3" in facts.replace(" ", "\n") or "turns 3" in facts
    screenshot(page, "viewer2-thread")
    # From a turn's trace, its thread is one click away; and the project's threads list it.
    page.get(viewer_link(service.url, seeded.traces["turn two"]))
    click(lambda: page.find_element(By.LINK_TEXT, "conv-1"), "the trace's thread")
    wait_for(lambda: len(page.find_elements(By.CSS_SELECTOR, ".turn")) == 3, what="the thread from its trace")
    page.get(f"{service.url}/#/threads?project={PROJECT}")
    wait_for(lambda: [a.text for a in page.find_elements(By.CSS_SELECTOR, "tr.thread a")] == ["conv-1"], what="the list")


def _runs_under(root: dict[str, Any], names: list[str], start_ms: int) -> list[dict[str, Any]]:
    """Runs of the root's trace, its children, as a client posts them (ids and dotted_order computed)."""
    begun = datetime.fromisoformat(root["start_time"].replace("Z", "+00:00"))
    out = []
    for i, name in enumerate(names):
        run_id = str(uuid.uuid4())
        at = begun + timedelta(milliseconds=start_ms + i)
        entry = at.strftime("%Y%m%dT%H%M%S%fZ") + run_id
        out.append({
            "id": run_id, "trace_id": root["id"], "parent_run_id": root["id"], "dotted_order": f"{root['dotted_order']}.{entry}",
            "name": name, "run_type": "tool", "start_time": at.isoformat(), "end_time": at.isoformat(), "session_name": "live",
        })
    return out


def test_a_running_trace_past_1000_runs_shows_new_runs_without_reload_and_pauses(page: Any, seeded: Seeded) -> None:
    service = seeded.service
    root_id = str(uuid.uuid4())
    now = datetime.now(timezone.utc)
    root = {"id": root_id, "trace_id": root_id, "dotted_order": now.strftime("%Y%m%dT%H%M%S%fZ") + root_id,
            "name": "long agent", "run_type": "chain", "start_time": now.isoformat(), "session_name": "live"}
    first = _runs_under(root, [f"step-{i:04d}" for i in range(1050)], 1)
    for batch in ([root, *first[:999]], first[999:]):  # /info's size_limit: 1,000 runs a request
        answer = requests.post(service.url + "/runs/batch", json={"post": batch}, timeout=30)
        assert answer.status_code == 202, answer.text
    page.get(viewer_link(service.url, root_id))
    # The page draws the view once its script has read the trace: on a loaded machine, after get() returns.
    view = wait_for(lambda: page.find_element(By.CSS_SELECTOR, ".trace-view"), timeout=15, what="the trace view")
    wait_for(lambda: view.get_attribute("data-runs") == "1051", timeout=15, what="the whole trace")
    page.execute_script("window.notReloaded = true")
    # Past 1,000 runs the page used to stop refreshing: new runs come through the changes feed.
    requests.post(service.url + "/runs/batch", json={"post": _runs_under(root, ["late-1", "late-2"], 2000)}, timeout=5)
    wait_for(lambda: view.get_attribute("data-runs") == "1053", what="the two new runs, without a reload")
    assert view.get_attribute("data-changes") == "2"  # through the feed, not a read of the trace again
    screenshot(page, "viewer2-live")

    click(lambda: page.find_element(By.CSS_SELECTOR, ".live-toggle"), "pause")
    assert page.find_element(By.CSS_SELECTOR, ".live").text == "paused"
    requests.post(service.url + "/runs/batch", json={"post": _runs_under(root, ["while-paused"], 3000)}, timeout=5)
    time.sleep(1.2)  # the feed's answer came, and was held back
    assert view.get_attribute("data-runs") == "1053"  # paused: the tree stays as it is
    click(lambda: page.find_element(By.CSS_SELECTOR, ".live-toggle"), "resume")
    wait_for(lambda: view.get_attribute("data-runs") == "1054", what="what came while paused, once resumed")
    assert page.execute_script("return window.notReloaded") is True


def test_a_chart_draws_for_a_seeded_day(page: Any, seeded: Seeded) -> None:
    service = seeded.service
    day = (datetime.now(timezone.utc) - timedelta(hours=23)).replace(minute=0, second=0, microsecond=0)  # all in 24 h
    seeded_day(service.url, "day", day, hours=23)
    page.get(f"{service.url}/#/projects/day?range=24h")
    wait_for(lambda: len(page.find_elements(By.CSS_SELECTOR, "figure.chart[data-drawn=true]")) == 6, what="six charts")
    charts = page.execute_script(
        "return Object.fromEntries([...document.querySelectorAll('figure.chart')].map(f =>"
        " [f.dataset.chart, {sum: Number(f.dataset.sum), points: Number(f.dataset.points),"
        " canvas: !!f.querySelector('canvas')}]))"
    )
    assert charts["traces"] == {"sum": 23, "points": 23 + 4, "canvas": True}  # a trace an hour, 4 of them failed
    assert charts["tokens"]["sum"] == 23 * 1500 and charts["cost"]["sum"] == pytest.approx(11 * 0.00045)
    assert charts["run-types"]["points"] == 46 and charts["models"]["points"] == 23
    # The chart is drawn: its canvas has marks, not only a blank page.
    inked = page.execute_script(
        "const c = document.querySelector('figure[data-chart=traces] canvas');"
        " const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;"
        " let n = 0; for (let i = 3; i < d.length; i += 4) if (d[i]) n++; return n"
    )
    assert inked > 500, inked
    facts = page.find_element(By.CSS_SELECTOR, ".facts").text
    assert "traces\n23" in facts and "12 model runs" in facts  # the house model: no price
    tables = page.find_element(By.CSS_SELECTOR, ".by-model").text
    assert "house-model" in tables and "no price" in tables and "gpt-4o-mini" in tables
    screenshot(page, "viewer2-charts")
    names = page.execute_script("return performance.getEntriesByType('resource').map(e => e.name)")
    assert names and all(n.startswith(service.url) for n in names), names  # uPlot from the package, nothing else


def test_bidi_controls_in_stored_text_cannot_reorder_the_viewers_own(page: Any, seeded: Seeded) -> None:
    """Found by an audit: a right-to-left override at the end of a feedback key carried over into
    the text after it, so "correctness ×12" read "21× ssentcerroc" and "score 0.25" read "52.0 erocs".
    Each stored value with bidi controls is shown inside its own isolate now."""
    service = seeded.service
    rlo = "\u202e"
    root_id = str(uuid.uuid4())
    now = datetime.now(timezone.utc)
    root = {"id": root_id, "trace_id": root_id, "dotted_order": now.strftime("%Y%m%dT%H%M%S%fZ") + root_id,
            "name": "agent" + rlo, "run_type": "chain", "start_time": now.isoformat(), "end_time": now.isoformat(),
            "session_name": "bidi"}
    assert requests.post(service.url + "/runs/batch", json={"post": [root]}, timeout=10).status_code == 202
    for key, score in (("helpful" + rlo, 0.25), ("correctness", 0.9), ("correctness", 0.9)):
        answer = requests.post(service.url + "/feedback", json={"run_id": root_id, "key": key, "score": score}, timeout=10)
        assert answer.status_code == 200, answer.text
    page.get(viewer_link(service.url, root_id, root_id))
    wait_for(lambda: "correctness" in page.find_element(By.CSS_SELECTOR, ".tracehead .facts").get_attribute("textContent"),
             what="the feedback summary")
    facts = page.find_element(By.CSS_SELECTOR, ".tracehead .facts").get_attribute("textContent")
    assert f"\u2068helpful{rlo}\u2069 ×1, correctness ×2" in facts  # the override ends with its value
    item = wait_for(lambda: page.find_element(By.CSS_SELECTOR, ".fb-list").get_attribute("textContent"), what="the items")
    assert f"\u2068helpful{rlo}\u2069" in item and "score 0.25" in item
    screenshot(page, "viewer2-bidi")
