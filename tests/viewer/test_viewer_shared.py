"""A share link (``/public/{token}/r``, what the SDK's ``share_run`` returns) in a real headless Chromium.

The service has a key; the page opened at the link shows the shared trace and its runs
without one, through the public routes only, with no feedback and no way to write; the
link of a revoked share opens nothing. Leaves a screenshot under tests/artifacts/.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import requests

from otel_runs_exporter.server import LocalService

pytest.importorskip("selenium", reason="selenium is not installed: pip install -e '.[test]'")

from selenium.webdriver.common.by import By  # noqa: E402
from viewer.viewer_helpers import as_json, click, export, screenshot, wait_for  # noqa: E402

KEY = "viewer-share-key"


@pytest.fixture
def shared() -> Iterator[tuple[LocalService, dict[str, dict[str, Any]], str]]:
    with LocalService(api_key=KEY) as service:
        def work(tracer: Any) -> None:
            with tracer.start_as_current_span("support agent", attributes={
                "input.value": as_json({"messages": [{"role": "user", "content": "Where is my parcel?"}]}),
                "output.value": as_json({"answer": "It left the depot."}),
            }):
                with tracer.start_as_current_span("chat gpt-4o-mini", attributes={
                    "gen_ai.operation.name": "chat", "gen_ai.request.model": "gpt-4o-mini",
                    "gen_ai.usage.input_tokens": 12, "gen_ai.usage.output_tokens": 5,
                }):
                    pass
            with tracer.start_as_current_span("another trace"):
                pass

        export(service.url, work, api_key=KEY)
        runs = {r["name"]: r for r in service.wait_for_runs(3)}
        chat = runs["chat gpt-4o-mini"]
        headers = {"x-api-key": KEY}
        requests.post(f"{service.url}/feedback", json={"run_id": chat["id"], "key": "thumbs", "score": 0},
                      headers=headers, timeout=5).raise_for_status()
        answer = requests.put(f"{service.url}/runs/{chat['id']}/share", json={}, headers=headers, timeout=5)
        yield service, runs, answer.json()["share_token"]


def test_a_share_link_opens_the_trace_read_only_without_a_key(page: Any, shared) -> None:
    service, runs, token = shared
    root, chat = runs["support agent"], runs["chat gpt-4o-mini"]
    before = len(service.requests())
    page.get(f"{service.url}/public/{token}/r")
    # Straight to the shared trace (no key prompt, no list of traces): its two runs, nothing of the other trace.
    wait_for(lambda: len(page.find_elements(By.CSS_SELECTOR, ".tree .row")) == 2, what="the shared trace's two runs")
    assert page.find_elements(By.CSS_SELECTOR, ".keyform") == []
    assert page.find_element(By.CSS_SELECTOR, ".trace-view").get_attribute("data-trace-id") == root["trace_id"]
    assert page.current_url.endswith(f"/public/{token}/r#/trace/{root['trace_id']}")
    assert "another trace" not in page.find_element(By.CSS_SELECTOR, ".tree").text
    click(lambda: page.find_element(By.CSS_SELECTOR, f'.row[data-run-id="{chat["id"]}"]'), "the model run")
    wait_for(lambda: "gpt-4o-mini" in page.find_element(By.CSS_SELECTOR, ".detail .run").text, what="the run's details")
    detail = page.find_element(By.CSS_SELECTOR, ".detail .run").text
    # Read-only: no feedback form, no feedback shown (the thumbs down stays private).
    assert page.find_elements(By.CSS_SELECTOR, ".detail .fb-thumb-up, .detail .fb-text") == []
    assert "Feedback" not in detail and "▼" not in page.find_element(By.CSS_SELECTOR, ".tree").text
    assert "feedback" not in page.find_element(By.CSS_SELECTOR, ".facts").text
    screenshot(page, "viewer-shared-trace")
    # Every request the page made went to the public routes or the viewer's files, and none was refused.
    made = service.requests()[before:]
    assert {e["path"] for e in made if not e["path"].startswith("/viewer/")} == {
        f"/public/{token}/{path}" for path in ("r", "run", "runs/query", "runs/stats", f"run/{chat['id']}")
    }
    assert {e["status"] for e in made} == {200}
    # Revoked: the link opens nothing, as one that never existed.
    requests.delete(f"{service.url}/runs/{chat['id']}/share", headers={"x-api-key": KEY}, timeout=5).raise_for_status()
    assert requests.get(f"{service.url}/public/{token}/r", timeout=5).status_code == 404
