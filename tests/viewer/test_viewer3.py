"""Issue 37 in a real headless Chromium, as a person looks: a run reads at a glance at 1366x768 and 1920x1080.

One service for the module, fed as a user's app feeds it: an agent's traces through the
real ``openai`` client, this package's instrumentation and the exporter, against the
loopback fake model API (tool calls, a tool that fails, an image, a streamed call); a
2,000-run trace and a run of bad input posted as a client posts them. Each test sets
the window to the size it names and asserts the geometry the issue asks for (where the
messages are, which names are clipped), and leaves a screenshot under tests/artifacts/.
"""

from __future__ import annotations

import base64
import re
import struct
import uuid
import zlib
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest
import requests
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider

from otel_runs_exporter import RunsSpanProcessor
from otel_runs_exporter.server import LocalService, viewer_link

pytest.importorskip("selenium", reason="selenium is not installed: pip install -e '.[test]'")
openai = pytest.importorskip("openai")

from selenium.webdriver.common.action_chains import ActionChains  # noqa: E402
from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.common.keys import Keys  # noqa: E402
from viewer.viewer_helpers import as_json, click, screenshot, wait_for  # noqa: E402

from otel_runs_exporter.instrumentation.openai import RunsOpenAIInstrumentor  # noqa: E402
from otel_runs_exporter.testing.fake_llm import FakeLLMAPI  # noqa: E402

pytestmark = pytest.mark.heavy(seconds=12)

SIZES = [(1366, 768), (1920, 1080)]
LONG_NAME = "fetch_customer_order_history_and_refunds"  # 40 characters: shown whole at 1366 px
QUESTIONS = ["Where is order #1001?", "Where is order #1002?", "Cancel order #1003", "Refund order #1004", "Weather in Paris?"]
TOOLS = [{"type": "function", "function": {"name": "get_weather", "description": "The weather in a city",
                                           "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}}]
BIG_RUNS = 2000
SQUEEZED = "summarize_all_400_answers_for_the_report"  # 40 characters, on a model call's row


def _png(width: int = 96, height: int = 64) -> bytes:
    """A real PNG (a colour gradient), so the page has an image to decode and draw."""
    rows = b"".join(b"\x00" + bytes(v for x in range(width) for v in (x * 255 // width, y * 255 // height, 160))
                    for y in range(height))

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)

    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(rows)) + chunk(b"IEND", b"")


PHOTO = "data:image/png;base64," + base64.b64encode(_png()).decode()


def _agent(tracer: Any, client: Any, question: str, *, full: bool) -> None:
    """One conversation turn: a short one (one model call), or the full agent (tools, a failure, an image, a stream)."""
    system = {"role": "system", "content": "You are the shop's assistant. Answer briefly; use the tools for facts."}
    user: dict[str, Any] = {"role": "user", "content": question}
    if full:
        user = {"role": "user", "content": [{"type": "text", "text": question + " Here is a photo of the parcel."},
                                            {"type": "image_url", "image_url": {"url": PHOTO}}]}
    turn = {"langsmith.span.kind": "chain", "input.value": as_json({"messages": [system, user]})}
    with tracer.start_as_current_span("conversation_turn", attributes=turn) as root:
        if not full:
            reply = client.chat.completions.create(model="gpt-4o-mini", messages=[system, user])
            root.set_attribute("output.value", as_json({"answer": f"About {question[:-1].lower()}: on its way."}))
            return
        messages: list[Any] = [system, user]
        with tracer.start_as_current_span("agent_loop", attributes={"langsmith.span.kind": "chain"}):
            with tracer.start_as_current_span("retrieve", attributes={
                "langsmith.span.kind": "retriever", "input.value": as_json({"query": question}),
                "output.value": as_json({"documents": [{"page_content": "Orders ship within two days.", "metadata": {"source": "faq.md"}},
                                                       {"page_content": "Refunds take a week.", "metadata": {"source": "policy.md"}}]}),
            }):
                pass
            first = client.chat.completions.create(model="gpt-4o-mini", messages=messages, tools=TOOLS)
            call = first.choices[0].message.tool_calls[0]
            with tracer.start_as_current_span("get_weather", attributes={"langsmith.span.kind": "tool", "input.value": call.function.arguments}) as tool:
                tool.set_attribute("output.value", as_json({"temp_c": 18, "sky": "clear"}))
            messages += [first.choices[0].message.model_dump(exclude_none=True),
                         {"role": "tool", "tool_call_id": call.id, "content": as_json({"temp_c": 18, "sky": "clear"})}]
            client.chat.completions.create(model="gpt-4o-mini", messages=messages, tools=TOOLS)
            with tracer.start_as_current_span(LONG_NAME, attributes={"langsmith.span.kind": "tool", "input.value": as_json({"order": 1002})}) as tool:
                tool.set_attribute("output.value", as_json({"orders": 3, "refunds": 0}))
            try:
                with tracer.start_as_current_span("lookup_order", attributes={"langsmith.span.kind": "tool", "input.value": as_json({"order": 1002})}):
                    raise TimeoutError("the order service did not answer in 5 s")
            except TimeoutError:
                pass
            messages += [{"role": "assistant", "content": None, "tool_calls": [
                {"id": "call_2", "type": "function", "function": {"name": "lookup_order", "arguments": '{"order": 1002}'}}]},
                {"role": "tool", "tool_call_id": "call_2", "content": "error: the order service did not answer"}]
            client.chat.completions.create(model="gpt-4o-mini", messages=messages)
        with tracer.start_as_current_span("summarize_all", attributes={"langsmith.span.kind": "chain"}):
            stream = client.chat.completions.create(model="gpt-4o-mini", messages=[system, user], stream=True,
                                                    stream_options={"include_usage": True})
            for _ in stream:
                pass
        root.set_attribute("output.value", as_json({"answer": "Your parcel is on its way; it is 18 °C and clear in Paris."}))


def _deliver_agents(url: str) -> None:
    provider = TracerProvider(resource=Resource.create({"service.name": "shop-agent"}))
    processor = RunsSpanProcessor(endpoint=url, project="shop")
    provider.add_span_processor(processor)
    instrumentor = RunsOpenAIInstrumentor()
    instrumentor.instrument(tracer_provider=provider)
    try:
        with FakeLLMAPI() as api:
            client = openai.OpenAI(base_url=api.openai_base_url, api_key="test", max_retries=0)
            tracer = provider.get_tracer("shop-agent")
            for n, question in enumerate(QUESTIONS):
                _agent(tracer, client, question, full=n == 1)
        assert processor.force_flush(30_000)
        assert processor.stats().dropped_total == 0
    finally:
        instrumentor.uninstrument()
        provider.shutdown()


def _run(trace_id: str, parent: dict[str, Any] | None, name: str, at: datetime, **fields: Any) -> dict[str, Any]:
    run_id = trace_id if parent is None else str(uuid.uuid4())
    entry = at.strftime("%Y%m%dT%H%M%S%fZ") + run_id
    run = {"id": run_id, "trace_id": trace_id, "dotted_order": entry if parent is None else f"{parent['dotted_order']}.{entry}",
           "name": name, "run_type": "chain", "start_time": at.isoformat(), "end_time": (at + timedelta(milliseconds=5)).isoformat(),
           "session_name": "big", **fields}
    if parent is not None:
        run["parent_run_id"] = parent["id"]
    return run


def _big_trace(url: str) -> str:
    """A 2,000-run trace: an agent's 399 steps, each a chain with a model call and three tools under it, a model
    call before them and three closing tools."""
    trace_id = str(uuid.uuid4())
    at = datetime.now(timezone.utc) - timedelta(minutes=30)
    root = _run(trace_id, None, "nightly_batch_of_order_questions", at, inputs={"messages": [{"role": "user", "content": "Answer the 400 open questions."}]},
                outputs={"answer": "398 answered, 2 left for a person."}, end_time=(at + timedelta(seconds=6)).isoformat())
    runs = [root]
    for step in range(399):
        t = at + timedelta(milliseconds=10 * step + 1)
        chain = _run(trace_id, root, f"step_{step:03d}", t)
        llm = _run(trace_id, chain, "chat gpt-4o-mini", t, run_type="llm",
                   inputs={"messages": [{"role": "user", "content": f"Question {step}"}]},
                   outputs={"messages": [{"role": "assistant", "content": f"Answer {step}"}],
                            "usage_metadata": {"input_tokens": 20, "output_tokens": 5}},
                   extra={"metadata": {"ls_model_name": "gpt-4o-mini"}})
        runs += [chain, llm] + [_run(trace_id, chain, f"tool_{k}", t, run_type="tool") for k in range(3)]
    runs += [_run(trace_id, root, name, at + timedelta(seconds=5), run_type="tool") for name in ("report", "notify", "archive")]
    # First under the root, a model call whose name (40 characters) leaves its row no room for all its numbers.
    runs.append(_run(trace_id, root, SQUEEZED, at, run_type="llm", outputs={"usage_metadata": {"input_tokens": 900, "output_tokens": 100}},
                     extra={"metadata": {"ls_model_name": "gpt-4o-mini"}}))
    assert len(runs) == BIG_RUNS
    for at_ in range(0, len(runs), 500):
        answer = requests.post(url + "/runs/batch", json={"post": runs[at_:at_ + 500]}, timeout=30)
        assert answer.status_code == 202, answer.text
    return trace_id


# What a run may hold that the page must survive: every kind of bad part, hostile text, a name of 10,000 characters.
BIDI = "\u202eevil\u202c"
HOSTILE = "<img src=x onerror=alert(1)>"
FIVE_MB = base64.b64encode(b"\x89PNG" + bytes(range(256)) * 15_000).decode()  # ~5 MB of base64
SVG = "data:image/svg+xml;base64," + base64.b64encode(b"<svg xmlns='http://www.w3.org/2000/svg' onload='alert(3)'/>").decode()
ELSEWHERE = "https://images.example.invalid/parcel.png"
LONG_CHAT = 600  # messages


def _bad_input(url: str) -> dict[str, Any]:
    trace_id = str(uuid.uuid4())
    at = datetime.now(timezone.utc) - timedelta(minutes=10)
    root = _run(trace_id, None, "bad_input", at, session_name="bad")
    llm = _run(trace_id, root, "n" * 10_000, at + timedelta(milliseconds=1), run_type="llm", session_name="bad", inputs={"messages": [
        {"role": "user", "content": [
            {"type": "text", "text": f"Look {BIDI} and \x07 {HOSTILE}"},
            {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": FIVE_MB}},
            {"type": "image_url", "image_url": {"url": SVG}},
            {"type": "image_url", "image_url": {"url": ELSEWHERE}},
            {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": PHOTO.split(",", 1)[1]}},
            {"type": "hologram", "payload": {"depth": 3, "note": HOSTILE}},
        ]},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": f"run{HOSTILE}", "arguments": "{not json at all"}}]},
        {"role": "tool", "tool_call_id": "c1", "content": "done"},
    ]}, outputs={"messages": [{"role": "assistant", "content": 42}]})
    chatty = _run(trace_id, root, "long_chat", at + timedelta(milliseconds=2), run_type="llm", session_name="bad", inputs={
        "messages": [{"role": "user" if n % 2 else "assistant", "content": f"message {n}"} for n in range(LONG_CHAT)]})
    answer = requests.post(url + "/runs/batch", json={"post": [root, llm, chatty]}, timeout=30)
    assert answer.status_code == 202, answer.text
    return llm


@dataclass
class Seeded:
    service: LocalService
    agent: list[dict[str, Any]]  # the full agent trace's runs, in tree order
    big: str
    bad: dict[str, Any]

    def named(self, name: str, nth: int = 0) -> dict[str, Any]:
        return [r for r in self.agent if r["name"] == name][nth]


@pytest.fixture(scope="module")
def seeded() -> Iterator[Seeded]:
    # A live window of a millisecond: every trace here is closed but one, left open long ago (the last test).
    with LocalService(live_window_s=0.001) as service:
        # Each write is stored before it is answered: once the exporter has flushed and the batches are answered,
        # every run is there.
        _deliver_agents(service.url)
        big = _big_trace(service.url)
        bad = _bad_input(service.url)
        body = {"is_root": True, "filter": 'eq(name, "conversation_turn")', "select": ["inputs"]}
        roots = requests.post(service.url + "/runs/query", json=body, timeout=10).json()["runs"]
        (full,) = [r for r in roots if "#1002" in str(r["inputs"])]
        yield Seeded(service, service.trace(full["trace_id"]), big, bad)


@contextmanager
def window(page: Any, width: int, height: int) -> Iterator[None]:
    """The page's viewport at exactly this size (the browser's own chrome takes nothing from it); resize() within."""
    resize(page, width, height)
    try:
        yield
    finally:
        page.execute_cdp_cmd("Emulation.clearDeviceMetricsOverride", {})


def resize(page: Any, width: int, height: int) -> None:
    """The viewport at this size now, as a person resizing the window: the page is not loaded again."""
    page.execute_cdp_cmd("Emulation.setDeviceMetricsOverride", {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": False})
    wait_for(lambda: page.execute_script("return [innerWidth, innerHeight]") == [width, height], what=f"a {width}x{height} window")


GEOMETRY = """
const box = (el) => el ? el.getBoundingClientRect() : null;
const input = box(document.querySelector('.detail .io-in .message, .detail .io-in .kvtree, .detail .io-in .content'));
const output = box(document.querySelector('.detail .io-out, .detail .error-block'));
const names = [...document.querySelectorAll('.tree .row .name')].map((e) => ({
  text: e.textContent, clipped: e.scrollWidth > e.clientWidth + 1}));
// Each of a row's model, tokens and cost is inside its box or wholly out of sight, never cut.
const cut = [];
for (const usage of document.querySelectorAll('.tree .row .usage')) {
  const u = usage.getBoundingClientRect();
  for (const part of usage.children) {
    const p = part.getBoundingClientRect();
    const inside = p.top >= u.top - 0.5 && p.bottom <= u.bottom + 0.5 && p.left >= u.left - 0.5 && p.right <= u.right + 0.5;
    const outside = p.top >= u.bottom - 0.5 || p.right <= u.left + 0.5 || p.width === 0 || getComputedStyle(part).visibility === 'hidden';
    if (!inside && !outside) cut.push(part.textContent);
  }
}
return {height: innerHeight, width: innerWidth, input: input && input.top, output: output && output.top, names, cut,
        overflowX: document.documentElement.scrollWidth > innerWidth};
"""


def _rows(page: Any) -> dict[str, dict[str, str]]:
    return page.execute_script(
        "return Object.fromEntries([...document.querySelectorAll('.tree .row')].map(r => [r.dataset.runId, {"
        " name: r.querySelector('.name').textContent, usage: (r.querySelector('.usage') || {textContent: ''}).textContent,"
        " model: (r.querySelector('.usage .model') || {title: ''}).title}]))"
    )


def test_a_model_call_reads_at_a_glance_messages_first_tool_calls_as_calls_names_whole(page: Any, seeded: Seeded) -> None:
    service = seeded.service
    call = seeded.named("chat gpt-4o-mini", 1)  # the call that got the weather back
    with window(page, *SIZES[0]):
        page.get(viewer_link(service.url, call["trace_id"], call["id"]))
        wait_for(lambda: page.find_elements(By.CSS_SELECTOR, ".detail .io-out .message"), what="the call's reply")
        wait_for(lambda: len(page.find_elements(By.CSS_SELECTOR, ".tree .row")) == len(seeded.agent), what="the tree")
        for width, height in SIZES:
            resize(page, width, height)
            geometry = page.execute_script(GEOMETRY)
            # Without scrolling: the first message and the reply both start on screen.
            assert 0 < geometry["input"] < height and 0 < geometry["output"] < height, geometry
            assert not geometry["overflowX"], geometry
            clipped = [n["text"] for n in geometry["names"] if n["clipped"] and len(n["text"]) <= 40]
            assert clipped == [] and geometry["cut"] == [], geometry
            assert LONG_NAME in [n["text"] for n in geometry["names"]]
            screenshot(page, f"viewer3-agent-call-{width}")

        # The assistant's call as a call, its result beside it; the user's image as an image.
        tool_call = page.find_element(By.CSS_SELECTOR, ".detail .io-in .tool-call")
        assert tool_call.find_element(By.CSS_SELECTOR, ".call-line").text == 'get_weather({"city":"fake-city"})'
        assert tool_call.find_element(By.CSS_SELECTOR, ".tool-result").get_attribute("textContent") == '→ {"temp_c":18,"sky":"clear"}'
        roles = [e.text for e in page.find_elements(By.CSS_SELECTOR, ".detail .io-in .message > .role")]
        assert roles == ["SYSTEM", "USER", "ASSISTANT"]  # the tool's message is drawn under the call it answers
        drawn = page.execute_script(
            "const i = document.querySelector('.detail .io-in img.thumb'); return i && i.complete && i.naturalWidth")
        assert drawn == 96
        summary = page.find_element(By.CSS_SELECTOR, ".detail .runfacts").text
        assert "17 tok" in summary and "gpt-4o-mini (openai)" in summary and "$0.0000047" in summary

        # The tree: the model asked for on the row, the one that answered in its title; a chain's subtree totals.
        rows = _rows(page)
        assert rows[call["id"]]["model"] == "model asked for: gpt-4o-mini; answered by gpt-4o-mini-fake-0001"
        loop = seeded.named("agent_loop")
        under = [r for r in seeded.agent if r["dotted_order"].startswith(loop["dotted_order"] + ".")]
        tokens = sum((r.get("outputs") or {}).get("usage_metadata", {}).get("total_tokens", 0) for r in under)
        assert tokens == 19 + 17 + 17 and rows[loop["id"]]["usage"].startswith(f"{tokens} tok$"), rows[loop["id"]]

        # A retriever's documents as a list, at 1366 again.
        resize(page, *SIZES[0])
        click(lambda: page.find_element(By.CSS_SELECTOR, f'.row[data-run-id="{seeded.named("retrieve")["id"]}"]'), "the retriever")
        docs = wait_for(lambda: page.find_elements(By.CSS_SELECTOR, ".detail .io-out .documents > li"), what="the documents")
        assert [d.find_element(By.CSS_SELECTOR, ".text").text for d in docs] == ["Orders ship within two days.", "Refunds take a week."]
        screenshot(page, "viewer3-retriever-1366")

        # The failing tool: its input, then its error where its outputs go.
        click(lambda: page.find_element(By.CSS_SELECTOR, f'.row[data-run-id="{seeded.named("lookup_order")["id"]}"]'), "the failing tool")
        line = wait_for(lambda: page.find_elements(By.CSS_SELECTOR, ".detail .error-line"), what="the tool's error")[0]
        assert line.text == "TimeoutError: the order service did not answer in 5 s"
        assert page.execute_script(GEOMETRY)["output"] < SIZES[0][1]
        screenshot(page, "viewer3-failing-tool-1366")
        # The image opens full size over the page, and Escape closes it.
        click(lambda: page.find_element(By.CSS_SELECTOR, f'.row[data-run-id="{call["id"]}"]'), "the call again")
        click(lambda: page.find_element(By.CSS_SELECTOR, ".detail button.media-image"), "the thumbnail")
        full = wait_for(lambda: page.find_element(By.CSS_SELECTOR, ".lightbox img.full"), what="the image full size")
        assert page.execute_script("return arguments[0].naturalWidth", full) == 96
        screenshot(page, "viewer3-image-full-1366")
        page.find_element(By.CSS_SELECTOR, ".lightbox").send_keys(Keys.ESCAPE)
        wait_for(lambda: not page.find_elements(By.CSS_SELECTOR, ".lightbox"), what="the image closed")


def test_same_named_traces_are_told_apart_by_what_they_were_asked(page: Any, seeded: Seeded) -> None:
    with window(page, *SIZES[0]):
        page.get(f"{seeded.service.url}/#/?project=shop")
        wait_for(lambda: len(page.find_elements(By.CSS_SELECTOR, "tr.trace")) == 5, what="the five turns")
        for width, height in SIZES:
            resize(page, width, height)
            rows = page.execute_script(
                "return [...document.querySelectorAll('tr.trace')].map(tr => ({name: tr.querySelector('.col-name').innerText,"
                " input: tr.querySelector('.col-input').textContent, output: tr.querySelector('.col-output').textContent,"
                " fits: tr.getBoundingClientRect().right <= innerWidth}))"
            )
            assert {r["name"] for r in rows} == {"conversation_turn"} and all(r["fits"] for r in rows), rows
            # Newest first, each by the question it was asked (the last user message; an image is a word).
            assert [r["input"] for r in rows] == [
                "Weather in Paris?", "Refund order #1004", "Cancel order #1003",
                "Where is order #1002? Here is a photo of the parcel. [image]", "Where is order #1001?",
            ]
            assert rows[0]["output"] == "About weather in paris: on its way." and "18 °C" in rows[3]["output"]
            screenshot(page, f"viewer3-list-{width}")


def test_a_2000_run_trace_opens_with_its_root_run_readable(page: Any, seeded: Seeded) -> None:
    with window(page, *SIZES[0]):
        page.get(viewer_link(seeded.service.url, seeded.big, seeded.big))
        view = wait_for(lambda: page.find_element(By.CSS_SELECTOR, ".trace-view"), what="the trace")
        wait_for(lambda: view.get_attribute("data-runs") == str(BIG_RUNS), timeout=30, what="all 2,000 runs")
        wait_for(lambda: page.find_elements(By.CSS_SELECTOR, ".detail .io-out"), what="the root's outputs")
        for width, height in SIZES:
            resize(page, width, height)
            # The taller window's rows are drawn at once, not left blank until a scroll.
            wait_for(lambda: page.execute_script(
                "const rows = document.querySelectorAll('.tree .row'); const last = rows[rows.length - 1];"
                " return last.getBoundingClientRect().bottom >= document.querySelector('.tree').getBoundingClientRect().bottom"),
                what="rows down to the tree's bottom")
            geometry = page.execute_script(GEOMETRY)
            assert 0 < geometry["input"] < height and 0 < geometry["output"] < height, geometry
            assert [n["text"] for n in geometry["names"] if n["clipped"]] == [] and geometry["cut"] == [], geometry
            # A folded step shows what it holds: its model call's tokens and cost, added up.
            step = page.execute_script("return document.querySelectorAll('.tree .row')[2].querySelector('.usage').textContent")
            assert step == "25 tok$0.0000060", step
            # The long-named call keeps its name whole; at 1366 px its model and numbers give way, none shown cut.
            # Read until the row's chips are laid out for the new width (the fit runs after the resize, and once
            # ran late under a loaded suite), then held to the same expectation.
            expected = [SQUEEZED] if width == 1366 else [SQUEEZED, "gpt-4o-mini", "1,000 tok", "$0.00019"]
            shown: list[str] = []

            def chips() -> bool:
                shown[:] = page.execute_script(
                    "const row = document.querySelectorAll('.tree .row')[1]; const u = row.querySelector('.usage').getBoundingClientRect();"
                    " return [row.querySelector('.name').textContent, ...[...row.querySelectorAll('.usage > span')]"
                    ".filter((e) => e.getBoundingClientRect().top < u.bottom - 1 && getComputedStyle(e).visibility !== 'hidden')"
                    ".map((e) => e.textContent)]")
                return shown == expected

            try:
                wait_for(chips, timeout=5, what=f"the long-named row's chips at {width} px")
            except AssertionError:
                pass  # the assertion below says what was shown
            assert shown == expected, shown
            screenshot(page, f"viewer3-2000-runs-{width}")


def test_bad_input_stays_readable_bounded_and_text(page: Any, seeded: Seeded) -> None:
    bad = seeded.bad
    with window(page, *SIZES[0]):
        page.get(viewer_link(seeded.service.url, bad["trace_id"], bad["id"]))
        wait_for(lambda: page.find_elements(By.CSS_SELECTOR, ".detail .io-out") and page.find_elements(By.CSS_SELECTOR, ".tree .row"),
                 what="the run and its tree")
        shown = page.execute_script(
            """
            const d = document.querySelector('.detail');
            return {
              text: d.textContent, page: document.body.textContent.length,
              placeholders: [...d.querySelectorAll('.media-placeholder')].map((e) => e.textContent),
              link: (d.querySelector('.media-link') || {textContent: ''}).textContent,
              thumbs: [...d.querySelectorAll('img.thumb')].map((i) => i.naturalWidth),
              imgs: document.querySelectorAll('img').length, scripts: document.querySelectorAll('script').length,
              call: (d.querySelector('.tool-call') || {textContent: ''}).textContent,
              other: (d.querySelector('.part-other') || {textContent: ''}).textContent,
              heading: d.querySelector('.runname').textContent.length,
              row: document.querySelector('.tree .row .name').textContent.length,
            };
            """
        )
        screenshot(page, "viewer3-bad-input-1366")
    # Base64 is never text: the 5 MB image is a placeholder with its size, the SVG one that says why.
    assert FIVE_MB[:200] not in shown["text"] and shown["page"] < 60_000, shown["page"]
    assert shown["placeholders"] == [
        "▣ image/png image, 3.7 MB (larger than the 2.0 MB the viewer draws)",
        "▣ SVG image, 60 B (not drawn: an SVG can carry script)",
    ]
    assert f"image at {ELSEWHERE}" in shown["link"] and shown["thumbs"] == [96] and shown["imgs"] == 1
    assert shown["scripts"] == 1  # the page's own module: nothing from the run became markup
    names = page.execute_script("return performance.getEntriesByType('resource').map(e => e.name)")
    assert all(n.startswith(seeded.service.url) for n in names), names  # the other address was never fetched
    assert "{not json at all" in shown["call"] and "arguments that are not JSON" in shown["call"] and HOSTILE in shown["call"]
    assert "hologram" in shown["other"] and HOSTILE in shown["other"]
    assert f"Look \u2068{BIDI}" in shown["text"] or f"Look {BIDI}" in shown["text"]
    assert shown["heading"] < 300 and shown["row"] < 300  # a 10,000-character name, cut

    # 600 messages: the first and the last three are built; the rest 200 at a click.
    with window(page, *SIZES[0]):
        click(lambda: page.find_element(By.XPATH, "//a[contains(@class, 'row')][.//span[text()='long_chat']]"), "the long chat")
        fold = wait_for(lambda: page.find_element(By.CSS_SELECTOR, ".detail button.earlier"), what="the folded messages")
        assert fold.text == f"▸ {LONG_CHAT - 4:,} earlier messages"
        assert len(page.find_elements(By.CSS_SELECTOR, ".detail .message")) == 4
        fold.click()
        wait_for(lambda: len(page.find_elements(By.CSS_SELECTOR, ".detail .message")) == 204, what="200 more")
        assert page.find_element(By.CSS_SELECTOR, ".detail button.earlier").text == f"▸ {LONG_CHAT - 204:,} earlier messages"


def test_one_bucket_draws_a_point_the_header_says_what_it_counts_and_an_old_open_trace_is_not_live(page: Any, seeded: Seeded) -> None:
    with window(page, *SIZES[0]):
        page.get(f"{seeded.service.url}/#/projects/shop?range=1h")  # all five turns in one minute: one bucket
        wait_for(lambda: len(page.find_elements(By.CSS_SELECTOR, "figure.chart[data-drawn=true]")) == 6, what="the charts")
        inked = page.execute_script(
            "const c = document.querySelector('figure[data-chart=latency] canvas');"
            " const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;"
            " let n = 0; for (let i = 0; i < d.length; i += 4) if (d[i + 3] && d[i + 2] > d[i] + 40) n++; return n"
        )
        assert inked > 20, inked  # the p50/p99 points, drawn in their blue
        facts = page.find_element(By.CSS_SELECTOR, ".facts").text.replace("\n", " ")
        assert "traces with errors 0" in facts and "runs with errors 1" in facts, facts  # the failing tool
        # The legend says the bucket under the cursor on the 24-hour clock the list uses (the axis is drawn alike).
        plot = page.find_element(By.CSS_SELECTOR, "figure[data-chart=latency] .u-over")
        ActionChains(page).move_to_element(plot).perform()
        when = wait_for(lambda: page.execute_script(
            "const v = document.querySelector('figure[data-chart=latency] .u-legend .u-series .u-value');"
            " return v && v.textContent !== '–' && v.textContent"), what="the time under the cursor")
        assert re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d", when), when
        screenshot(page, "viewer3-charts-one-bucket")

    # An open trace whose runs were stored longer ago than the service's live window: open, and not live (one
    # stored within it is live: test_viewer2's running trace, paused and resumed through its live mark).
    with window(page, *SIZES[0]):
        trace_id = str(uuid.uuid4())
        open_root = _run(trace_id, None, "left_open", datetime.now(timezone.utc) - timedelta(hours=3), session_name="live")
        del open_root["end_time"]
        assert requests.post(seeded.service.url + "/runs/batch", json={"post": [open_root]}, timeout=5).status_code == 202
        page.get(viewer_link(seeded.service.url, trace_id))
        view = wait_for(lambda: page.find_element(By.CSS_SELECTOR, ".trace-view[data-runs]"), what="the open trace")
        wait_for(lambda: view.get_attribute("data-live") == "false", what="the service's word on it")
        assert not page.find_element(By.CSS_SELECTOR, ".live").is_displayed()
        assert not page.find_element(By.CSS_SELECTOR, ".live-toggle").is_displayed()
        assert "OPEN" in page.find_element(By.CSS_SELECTOR, ".tracehead h1").text
        screenshot(page, "viewer3-open-not-live-1366")
