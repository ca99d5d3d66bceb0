"""The trace viewer in a real headless Chromium, against a real service fed by the exporter.

Each test leaves a screenshot under tests/artifacts/; the 10,000-run test also
leaves its timings there (viewer-10k.json), the figures BENCHMARKS.md quotes.
"""

from __future__ import annotations

import json
import math
import re
import signal
import time
import uuid
from typing import Any

import pytest
import requests
from opentelemetry.trace import Status, StatusCode

from otel_runs_exporter.server import LocalService, RateRule, viewer_link
from server.server_helpers import demo_serving

pytest.importorskip("selenium", reason="selenium is not installed: pip install -e '.[test]'")

from selenium.common.exceptions import NoAlertPresentException  # noqa: E402
from selenium.webdriver.common.by import By  # noqa: E402
from viewer.viewer_helpers import ARTIFACTS, as_json, click, export, screenshot, wait_for  # noqa: E402

pytestmark = pytest.mark.heavy(seconds=25)

DEMO_TREE = ["answer_question", "retrieve", "chat demo-model", "flaky_tool", "word_count"]


def rows(page: Any) -> list[Any]:
    return page.find_elements(By.CSS_SELECTOR, ".tree .row")


def row_names(page: Any) -> list[str]:
    """The names in the tree's rows, top to bottom, read in one go (rows are redrawn as pages arrive)."""
    return page.execute_script("return [...document.querySelectorAll('.tree .row .name')].map(e => e.textContent)")


def tree_rows(page: Any) -> list[dict[str, Any]]:
    """The tree's rows as {name, depth, classes, mark}, top to bottom, read in one go.

    The tree redraws every row when the trace's feedback, counts or changes arrive (the first
    poll, a second after it opens): an element found before that and read after is stale.
    """
    return page.execute_script(
        "return [...document.querySelectorAll('.tree .row')].map(r => ({"
        " name: r.querySelector('.name').innerText, depth: r.dataset.depth, classes: [...r.classList],"
        " mark: r.querySelector('.err-mark') && r.querySelector('.err-mark').innerText}))"
    )


def trace_rows(page: Any) -> list[dict[str, str]]:
    """The list's rows as {column class: text}, read in one go (the list redraws as counts arrive)."""
    return page.execute_script(
        "return [...document.querySelectorAll('tr.trace')].map(tr =>"
        " Object.fromEntries([...tr.cells].map(td => [td.className, td.innerText])))"
    )


def detail_text(page: Any) -> str:
    return page.execute_script("const d = document.querySelector('.detail .run'); return d ? d.textContent : '';")


def assert_same_origin_only(page: Any, base: str) -> None:
    """Every file and request the page made went to the service itself."""
    names = page.execute_script("return performance.getEntriesByType('resource').map(e => e.name)")
    assert names and all(name.startswith(base) for name in names), names


def test_the_demo_trace_in_the_list_then_its_tree_then_a_run(page: Any) -> None:
    demo = demo_serving()
    proc, link = demo.proc, demo.link
    try:
        base = link.split("#", 1)[0]
        assert link.startswith("http://127.0.0.1:") and "/#/trace/" in link
        page.get(base)
        wait_for(lambda: [r["col-runs"] for r in trace_rows(page)] == ["5"], what="the demo's trace and its run count")
        (cells,) = trace_rows(page)
        assert cells["col-name"] == "answer_question"
        assert cells["col-status"].startswith("OK") and "1 failed" in cells["col-status"]
        assert cells["col-tokens"] == "59"
        screenshot(page, "viewer-demo-list")
        search = page.find_element(By.ID, "search")
        search.send_keys("no such name")
        wait_for(lambda: page.find_element(By.CSS_SELECTOR, ".empty").text == "No traces match.", what="an empty search")
        assert page.current_url.endswith("q=no+such+name")  # the filters are in the link too
        search.clear()
        search.send_keys("ANSWER_q")
        wait_for(lambda: [r["col-name"] for r in trace_rows(page)] == ["answer_question"], what="a name search")
        page.execute_script("const s = document.getElementById('status'); s.value = 'error'; s.dispatchEvent(new Event('change'));")
        wait_for(lambda: trace_rows(page) == [], what="no failed root in the demo")
        page.execute_script("const s = document.getElementById('status'); s.value = 'ok'; s.dispatchEvent(new Event('change'));")
        wait_for(lambda: len(trace_rows(page)) == 1, what="the demo's root as ok")

        click(lambda: page.find_element(By.CSS_SELECTOR, "tr.trace a"), "the trace's link")
        wait_for(lambda: row_names(page) == DEMO_TREE, what="the five runs in tree order")
        assert page.current_url == link  # the list links to the same deep link the demo printed
        tree = tree_rows(page)
        assert [r["name"] for r in tree] == DEMO_TREE
        assert [r["depth"] for r in tree] == ["0", "1", "1", "1", "1"]
        failed = [r for r in tree if "row-error" in r["classes"]]
        assert [(r["name"], r["mark"]) for r in failed] == [("flaky_tool", "error")]

        click(lambda: rows(page)[DEMO_TREE.index("chat demo-model")], "the model call's row")
        wait_for(lambda: page.find_elements(By.CSS_SELECTOR, ".detail .message"), what="the model call's conversation")
        assert "/run/" in page.current_url
        roles = [m.find_element(By.CSS_SELECTOR, ".role").text for m in page.find_elements(By.CSS_SELECTOR, ".detail .message")]
        assert roles == ["SYSTEM", "USER", "ASSISTANT"]
        text = detail_text(page)
        assert "Answer briefly." in text and "Each finished span arrives as a run" in text
        assert "59 total: 42 in, 17 out" in text and "demo-model (openai)" in text
        screenshot(page, "viewer-demo-run")

        click(lambda: rows(page)[DEMO_TREE.index("flaky_tool")], "the failed tool's row")
        error = wait_for(lambda: page.find_elements(By.CSS_SELECTOR, ".detail pre.error"), what="the tool's error")[0]
        # The error is the recorded stacktrace, which already ends with the message (the service's mapping).
        assert "TimeoutError: the demo tool always times out" in error.text and "Traceback" in error.text
        screenshot(page, "viewer-demo-error")

        page.get(page.current_url)  # a run's deep link, pasted into a new page
        wait_for(lambda: "Traceback" in detail_text(page), what="the run from its deep link")
        # The tree loads beside the run's details, not before them: wait for it, then find the selected row.
        wait_for(lambda: row_names(page) == DEMO_TREE, what="the tree under the deep link")
        assert [r["name"] for r in tree_rows(page) if "selected" in r["classes"]] == ["flaky_tool"]
        assert_same_origin_only(page, base)
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(10) == 0


HOSTILE = "<img src=x onerror=alert(1)>"
CLOSER = "</script><script>alert(2)</script>"


def test_run_contents_are_text_and_run_no_script(page: Any) -> None:
    def work(tracer: Any) -> None:
        attributes = {
            "langsmith.span.kind": "chain",
            "input.value": as_json({"question": HOSTILE, "note": CLOSER}),
            "output.value": as_json({"messages": [{"role": "assistant", "content": f"{HOSTILE} {CLOSER}"}]}),
            "langsmith.span.tags": ["checked", HOSTILE],
            "langsmith.metadata.note": HOSTILE,
        }
        with tracer.start_as_current_span(HOSTILE, attributes=attributes) as span:
            span.add_event("retry", {"reason": HOSTILE})
            with tracer.start_as_current_span("big", attributes={"langsmith.span.kind": "tool", "input.value": as_json({"blob": "x" * 150_000})}):
                pass

    with LocalService() as service:
        export(service.url, work)
        runs = service.wait_for_runs(2)
        root = next(r for r in runs if r["name"] == HOSTILE)
        big = next(r for r in runs if r["name"] == "big")
        page.get(viewer_link(service.url, root["trace_id"], root["id"]))
        wait_for(lambda: CLOSER in detail_text(page), what="the hostile run's details")
        text = detail_text(page)
        assert HOSTILE in text and CLOSER in text
        assert row_names(page)[0] == HOSTILE
        assert [t.text for t in page.find_elements(By.CSS_SELECTOR, ".detail .tags .tag")] == ["checked", HOSTILE]
        metadata = page.execute_script(
            "return [...document.querySelectorAll('.detail .block')].find(b => b.querySelector('h2').textContent === 'Metadata').textContent"
        )
        assert f"note: {HOSTILE}" in metadata
        events = page.find_element(By.CSS_SELECTOR, ".detail .events").text
        assert "retry" in events and HOSTILE in events
        assert page.find_elements(By.TAG_NAME, "img") == []
        assert len(page.find_elements(By.TAG_NAME, "script")) == 1  # the page's own module, nothing injected
        with pytest.raises(NoAlertPresentException):
            page.switch_to.alert  # noqa: B018 - reading it is the check
        assert not [e for e in page.get_log("browser") if "Content Security Policy" in e["message"]]
        screenshot(page, "viewer-hostile-run")

        page.get(service.url + "/")
        wait_for(lambda: [r["col-name"] for r in trace_rows(page)] == [HOSTILE], what="the hostile name in the list")
        assert page.find_elements(By.TAG_NAME, "img") == []

        page.get(viewer_link(service.url, big["trace_id"], big["id"]))
        button = wait_for(lambda: page.find_elements(By.CSS_SELECTOR, ".detail .show-all"), what="the truncated input")[0]
        shown = page.execute_script("return document.querySelector('.detail .truncated pre').textContent.length")
        assert 100_000 <= shown < 110_000
        assert "Shown truncated" in detail_text(page)
        screenshot(page, "viewer-truncated")
        button.click()
        whole = wait_for(
            lambda: page.execute_script("const p = document.querySelector('.detail .truncated pre'); return p && p.textContent.length > 150000 && p.textContent.length"),
            what="the whole input after show all",
        )
        assert whole > 150_000 and not page.find_elements(By.CSS_SELECTOR, ".detail .show-all")


def test_a_service_with_a_key_shows_only_the_prompt_and_says_when_a_key_is_wrong(page: Any) -> None:
    def work(tracer: Any) -> None:
        with tracer.start_as_current_span("secret_work", attributes={"langsmith.span.kind": "chain"}):
            pass

    with LocalService(api_key="right-key") as service:
        export(service.url, work, api_key="right-key")
        service.wait_for_runs(1)
        page.get(service.url + "/")
        key = wait_for(lambda: page.find_elements(By.ID, "api-key"), what="the key prompt")[0]
        assert page.find_elements(By.CSS_SELECTOR, "table.traces") == []
        assert "secret_work" not in page.find_element(By.TAG_NAME, "body").text
        key.send_keys("wrong-key")
        click(lambda: page.find_element(By.CSS_SELECTOR, ".keyform button"), "the key form's button")
        message = wait_for(lambda: page.find_elements(By.CSS_SELECTOR, ".keyerror"), what="the wrong key's message")[0]
        assert "refused this API key" in message.text and "401" in message.text
        assert page.find_elements(By.CSS_SELECTOR, "table.traces") == []
        screenshot(page, "viewer-key-refused")

        key = page.find_element(By.ID, "api-key")
        key.send_keys("right-key")
        click(lambda: page.find_element(By.CSS_SELECTOR, ".keyform button"), "the key form's button")
        wait_for(lambda: [r["col-name"] for r in trace_rows(page)] == ["secret_work"], what="the traces after the right key")
        assert "right-key" not in page.current_url
        assert page.execute_script("return sessionStorage.getItem('otel-runs.api-key')") == "right-key"
        screenshot(page, "viewer-key-accepted")


def test_a_service_with_a_workspace_asks_for_it(page: Any) -> None:
    workspace = "7d3b6c1e-2f4a-4b5c-9d8e-0a1b2c3d4e5f"

    def work(tracer: Any) -> None:
        with tracer.start_as_current_span("tenant_work", attributes={"langsmith.span.kind": "chain"}):
            pass

    with LocalService(workspace_id=workspace) as service:
        export(service.url, work, workspace_id=workspace)
        service.wait_for_runs(1)
        page.get(service.url + "/")
        wait_for(lambda: page.find_elements(By.ID, "tenant-id"), what="the prompt")
        form = page.find_element(By.CSS_SELECTOR, ".keyform").text
        assert "needs a workspace id" in form and "403" in form
        assert page.find_elements(By.CSS_SELECTOR, "table.traces") == []
        page.find_element(By.ID, "tenant-id").send_keys(workspace)
        click(lambda: page.find_element(By.CSS_SELECTOR, ".keyform button"), "the key form's button")
        wait_for(lambda: [r["col-name"] for r in trace_rows(page)] == ["tenant_work"], what="the traces after the workspace")
        screenshot(page, "viewer-workspace-accepted")


def test_a_rate_limited_page_backs_off_and_says_so(page: Any) -> None:
    def work(tracer: Any) -> None:
        with tracer.start_as_current_span("limited", attributes={"langsmith.span.kind": "chain"}):
            pass

    rule = RateRule("Run query (test)", "ip", 2, 60, "POST", r"^/runs/query/?$")
    with LocalService(rate_limits=[rule]) as service:
        export(service.url, work)
        service.wait_for_runs(1)
        page.get(service.url + "/")
        notice = wait_for(
            lambda: page.find_elements(By.CSS_SELECTOR, ".notice-warn"), timeout=15, what="the rate-limit notice"
        )[0]
        assert "rate limiting this page (429)" in notice.text
        refused_at = [e for e in service.requests() if e["path"] == "/runs/query" and e["status"] == 429]
        assert len(refused_at) == 1  # it waits out the Retry-After instead of asking again each second
        assert [r["col-name"] for r in trace_rows(page)] == ["limited"]  # what it had stays
        screenshot(page, "viewer-rate-limited")


def test_a_first_read_refused_waits_as_long_as_the_notice_says(page: Any) -> None:
    """The list's own first query refused: the next one waits out the wait the notice states.

    Found: the notice said it waits, and the poller asked again at its next 1 s tick.
    """
    rule = RateRule("Run query (test)", "ip", 1, 60, "POST", r"^/runs/query/?$")
    with LocalService(rate_limits=[rule]) as service:
        export(service.url, lambda tracer: tracer.start_span("limited").end())
        service.wait_for_runs(1)
        window_opened = time.monotonic()
        assert requests.post(service.url + "/runs/query", json={}, timeout=5).status_code == 200  # the one allowed
        page.get(service.url + "/")
        notice = wait_for(
            lambda: page.find_elements(By.CSS_SELECTOR, ".notice-warn"), timeout=15, what="the rate-limit notice"
        )[0]
        # The service's Retry-After: what is left of the 60 s window when the page asked (rounded up), so
        # 60 on a quick page and less on a loaded machine; never less than what was left when the notice showed.
        said = re.search(r"waits (\d+) s", notice.text)
        assert said is not None, notice.text
        assert math.ceil(60 - (time.monotonic() - window_opened)) <= int(said.group(1)) <= 60, notice.text
        time.sleep(2.5)  # two ticks of the 1 s poller
        refused = [e for e in service.requests() if e["path"] == "/runs/query" and e["status"] == 429]
        assert len(refused) == 1, refused


READS = ("/sessions", "/runs/query", "/runs/stats")


def page_reads(service: LocalService) -> int:
    """How many of the page's reads the service has answered (the exporter's writes are not among them)."""
    return sum(1 for e in service.requests() if e["path"] in READS or (e["method"] == "GET" and e["path"].startswith("/runs/")))


def test_the_list_filters_by_project_and_shows_new_traces_without_reloading_at_one_read_a_second(page: Any) -> None:
    def trace(name: str) -> Any:
        def work(tracer: Any) -> None:
            with tracer.start_as_current_span(name, attributes={"langsmith.span.kind": "chain"}):
                pass

        return work

    with LocalService() as service:
        export(service.url, trace("first"), project="alpha")
        export(service.url, trace("elsewhere"), project="beta")
        service.wait_for_runs(2)
        page.get(service.url + "/#/?project=alpha")
        wait_for(lambda: [(r["col-name"], r["col-runs"]) for r in trace_rows(page)] == [("first", "1")], what="alpha's trace")
        page.execute_script("const s = document.getElementById('project'); s.value = 'beta'; s.dispatchEvent(new Event('change'));")
        wait_for(lambda: [r["col-name"] for r in trace_rows(page)] == ["elsewhere"], what="beta's trace only")
        assert "project=beta" in page.current_url
        page.execute_script("const s = document.getElementById('project'); s.value = 'alpha'; s.dispatchEvent(new Event('change'));")
        wait_for(lambda: [(r["col-name"], r["col-runs"]) for r in trace_rows(page)] == [("first", "1")], what="alpha's trace again")

        page.execute_script("window.notReloaded = true")
        export(service.url, trace("second"), project="alpha")
        wait_for(lambda: [r["col-name"] for r in trace_rows(page)] == ["second", "first"], what="the new trace on top")
        assert page.execute_script("return window.notReloaded") is True
        screenshot(page, "viewer-new-trace")

        began, reads = time.monotonic(), page_reads(service)
        time.sleep(3)
        elapsed, polled = time.monotonic() - began, page_reads(service) - reads
        # One background read a second at most (one may have been under way when the clock started).
        assert 1 <= polled <= elapsed + 1, (polled, elapsed)


def test_a_trace_refused_midway_by_rate_limits_still_opens_then_loads_whole(page: Any) -> None:
    def work(tracer: Any) -> None:
        with tracer.start_as_current_span("limited_trace", attributes={"langsmith.span.kind": "chain"}):
            for i in range(249):
                with tracer.start_as_current_span(f"child-{i:03d}"):
                    pass

    # Counts are refused throughout and the trace's third page of runs at first: neither may leave it unshown or half loaded.
    rules = [
        RateRule("Stats (test)", "ip", 1, 600, "POST", r"^/runs/stats/?$"),
        RateRule("Run query (test)", "ip", 2, 2, "POST", r"^/runs/query/?$"),
    ]
    with LocalService(rate_limits=rules) as service:
        export(service.url, work)
        runs = service.wait_for_runs(250)
        root = next(r for r in runs if r["name"] == "limited_trace")
        assert requests.post(service.url + "/runs/stats", json={}, timeout=5).status_code == 200  # the one count allowed
        page.get(viewer_link(service.url, root["trace_id"]))
        wait_for(lambda: row_names(page)[:2] == ["limited_trace", "child-000"], what="the tree without its counts")
        view = page.find_element(By.CSS_SELECTOR, ".trace-view")
        wait_for(lambda: view.get_attribute("data-runs") == "250", timeout=20, what="every page after the 429")
        refused = {e["path"] for e in service.requests() if e["status"] == 429}
        assert refused == {"/runs/query", "/runs/stats"}
        facts = page.find_element(By.CSS_SELECTOR, ".facts").text
        assert "runs 250" in facts.replace("\n", " ") and "tokens …" in facts.replace("\n", " ")
        screenshot(page, "viewer-trace-rate-limited")


BIG_CHILDREN = 99
BIG_LEAVES = 100  # per child: 1 root + 99 children + 9,900 leaves = 10,000 runs


# The long step's (.ci/run): ~12 s. Its small version in the default suite is tests/viewer/test_viewer3.py's
# 2,000-run trace, paged the same way.
@pytest.mark.long
def test_a_10000_run_trace_opens_with_its_root_and_first_children_and_few_rows(page: Any) -> None:
    def work(tracer: Any) -> None:
        with tracer.start_as_current_span("big_trace", attributes={"langsmith.span.kind": "chain"}):
            for i in range(BIG_CHILDREN):
                with tracer.start_as_current_span(f"step-{i:03d}", attributes={"langsmith.span.kind": "chain"}):
                    for j in range(BIG_LEAVES):
                        with tracer.start_as_current_span(f"leaf-{i:03d}-{j:03d}") as leaf:
                            if j == 7:
                                leaf.set_status(Status(StatusCode.ERROR, "leaf seven fails"))

    total = 1 + BIG_CHILDREN + BIG_CHILDREN * BIG_LEAVES
    with LocalService() as service:
        export(service.url, work)
        runs = service.wait_for_runs(total, timeout=60)
        root = next(r for r in runs if r["name"] == "big_trace")
        link = viewer_link(service.url, root["trace_id"])

        began = time.monotonic()
        page.get(link)
        wait_for(lambda: row_names(page)[:4] == ["big_trace", "step-000", "step-001", "step-002"], timeout=20, what="the root and its first children")
        shown = time.monotonic() - began
        view = page.find_element(By.CSS_SELECTOR, ".trace-view")
        opened_ms, opened_at = int(view.get_attribute("data-opened-ms")), int(view.get_attribute("data-opened-at"))
        assert len(rows(page)) <= 100
        # Read in one go: rows are redrawn while the other pages arrive, and a held element goes stale.
        folded = page.execute_script("const c = document.querySelectorAll('.tree .row')[1].querySelector('.hidden-count'); return c && c.textContent")
        assert folded == f"+{BIG_LEAVES}"
        loaded_at = int(wait_for(lambda: view.get_attribute("data-loaded-at"), timeout=60, what="every page of runs"))
        # The root and its children show from the first page, before the other 99 pages arrive.
        assert opened_at < loaded_at and opened_at < 5000, (opened_at, loaded_at)
        assert view.get_attribute("data-runs") == str(total)
        assert "10,000" in page.find_element(By.CSS_SELECTOR, ".facts").text
        assert row_names(page)[:4] == ["big_trace", "step-000", "step-001", "step-002"]
        screenshot(page, "viewer-10k-folded")

        click(lambda: page.find_element(By.XPATH, "//button[text()='Unfold all']"), "Unfold all")
        wait_for(lambda: row_names(page)[:3] == ["big_trace", "step-000", "leaf-000-000"], what="the unfolded tree")
        assert len(rows(page)) <= 100  # 10,000 rows unfolded, still only the ones in view in the page
        spacer = page.execute_script("return document.querySelector('.tree .spacer').getBoundingClientRect().height")
        assert spacer == total * 26
        page.execute_script("const t = document.querySelector('.tree'); t.scrollTop = t.scrollHeight;")
        wait_for(lambda: row_names(page)[-1] == f"leaf-{BIG_CHILDREN - 1:03d}-{BIG_LEAVES - 1:03d}", what="the last run after scrolling")
        assert len(rows(page)) <= 100
        screenshot(page, "viewer-10k-unfolded")

        # In-page times count from the page's request (performance.now()); the wall clock from driver.get.
        timings = {
            "runs": total,
            "shown_after_page_request_ms": opened_at,
            "shown_after_view_start_ms": opened_ms,
            "all_runs_loaded_after_page_request_ms": loaded_at,
            "seen_by_the_test_s": round(shown, 3),
        }
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        (ARTIFACTS / "viewer-10k.json").write_text(json.dumps(timings, indent=2) + "\n")
        print(f"10,000-run trace: {timings}")


# dotted_order-like: 3,500 entries, ~200 KB without a space to break a line at.
LONG = ".".join(f"20250301T120000{i:06d}Z{uuid.UUID(int=i)}" for i in range(3500))
DEEP = 30  # levels: the deepest run's own dotted_order is ~1,750 characters


def test_long_values_are_clipped_wherever_the_run_page_shows_them(page: Any) -> None:
    """Found: an 18.9 MB dotted_order went whole into one node (a 1.55 GB renderer, 34 s); only JSON was cut.

    A run whose name, tag, metadata, event, error and input each carry a long
    dotted_order-like value, 30 levels deep: every value is shown cut to a bound,
    with a button for the rest, and the page's text stays small (asserted in
    characters, not in time).
    """

    def work(tracer: Any) -> None:
        def nest(depth: int) -> None:
            if depth:
                with tracer.start_as_current_span(f"root-{LONG}" if depth == DEEP else f"level-{depth}"):
                    nest(depth - 1)
                return
            attributes = {
                "langsmith.span.kind": "tool",
                "langsmith.span.tags": ["short", LONG],
                "langsmith.metadata.chain": LONG[:60_000],  # JSON under 100 KB: drawn as a tree
                "input.value": as_json({"chain": LONG}),  # JSON over 100 KB: the first 100 KB as text
            }
            with tracer.start_as_current_span(LONG, attributes=attributes) as span:
                span.add_event(LONG[:50_000])
                span.set_status(Status(StatusCode.ERROR, LONG))

        nest(DEEP)

    with LocalService() as service:
        export(service.url, work, max_value_chars=1_000_000)
        runs = service.wait_for_runs(DEEP + 1)
        deep = next(r for r in runs if r["name"] == LONG)
        assert len(deep["dotted_order"]) > 1_700 and deep["extra"]["metadata"]["chain"] == LONG[:60_000]
        page.get(viewer_link(service.url, deep["trace_id"], deep["id"]))
        wait_for(lambda: "Metadata" in detail_text(page) and len(row_names(page)) == DEEP + 1, what="the deep run and its tree")
        sizes = page.execute_script(
            """
            const text = (sel) => [...document.querySelectorAll(sel)].map((e) => e.textContent.length);
            const ids = [...document.querySelectorAll('.detail .ids dt')];
            const dotted = ids.find((dt) => dt.textContent === 'dotted_order').nextElementSibling.querySelector('code');
            return {
              heading: text('.detail .runname'), tags: text('.detail .tag'), events: text('.detail .event-name'),
              strings: text('.detail .j-str'), dotted: dotted.textContent.length, rows: text('.tree .row .name'),
              titles: [...document.querySelectorAll('.tree .row .name')].map((e) => e.title.length),
              crumbs: text('#crumbs'), trace_title: text('.tracehead h1'), page: document.body.textContent.length,
            };
            """
        )
        print(f"\nlong values: {sizes}")
        assert max(sizes["heading"]) < 600 and max(sizes["rows"]) < 300 and max(sizes["titles"]) < 1_100, sizes
        assert sizes["tags"] and max(sizes["tags"]) < 300 and max(sizes["events"]) < 300, sizes
        assert max(sizes["strings"]) < 10_300, sizes  # the metadata value: 60,000 characters
        assert sizes["dotted"] < 1_100, sizes
        assert max(sizes["crumbs"]) < 200 and max(sizes["trace_title"]) < 300, sizes
        # The run carries ~860 KB of text; what is in the page is the error's and the input's first 100 KB and little else.
        assert sizes["page"] < 240_000, sizes
        screenshot(page, "viewer-long-values")

        # The rest is a click away, and the copy button copies it whole.
        page.execute_script(
            "[...document.querySelectorAll('.detail .ids dt')].find((dt) => dt.textContent === 'dotted_order')"
            ".nextElementSibling.querySelector('.show-all').click()"
        )
        whole = page.execute_script(
            "return [...document.querySelectorAll('.detail .ids dt')].find((dt) => dt.textContent === 'dotted_order')"
            ".nextElementSibling.querySelector('code').textContent"
        )
        assert whole == deep["dotted_order"]

        page.get(service.url + "/")
        names = wait_for(lambda: [len(r["col-name"]) for r in trace_rows(page)], what="the trace in the list")  # its root named with it too
        assert names and max(names) < 300, names


def test_a_run_stored_despite_a_rule_shows_its_violations(page: Any) -> None:
    """The default mode stores what the hosted service takes (a start_time off its dotted_order entry) and
    records the violation; the run's page says so, and a clean run's page says nothing."""
    from datetime import timedelta

    from server.server_helpers import Trace, iso, multipart, post_multipart, run_parts

    trace = Trace()
    late = {**trace.root_post(), "start_time": iso(trace.root_start + timedelta(milliseconds=2))}
    with LocalService() as service:
        body = multipart(run_parts("post", late) + run_parts("post", trace.child_post(), inputs={"prompt": "hi"}))
        assert post_multipart(service, body).status_code == 202
        page.get(viewer_link(service.url, trace.root_id, trace.root_id))
        wait_for(lambda: "Rule violations (1)" in detail_text(page), what="the root's violation")
        text = detail_text(page)
        assert "start_time_entry" in text and "does not match its dotted_order entry" in text and "(stored anyway)" in text
        screenshot(page, "viewer-run-violations")
        click(lambda: rows(page)[1], "the child's row")
        wait_for(lambda: "Inputs" in detail_text(page) and "prompt" in detail_text(page), what="the child run")
        assert "Rule violations" not in detail_text(page)
