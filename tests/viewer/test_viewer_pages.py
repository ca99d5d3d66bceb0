"""Other pages in a real Chromium against the local service: nothing they send is stored, nothing they ask is read.

The attacker's page is served from another loopback origin (a port of its own), the
closest a page can get without being the service: it tries what needs no preflight
(a ``no-cors`` POST as ``text/plain``, a ``FormData`` POST to ``/runs/multipart``,
``text/plain`` and urlencoded forms) and a read. A DNS-rebinding page is a page
whose origin is ``http://evil.localtest:PORT`` while that name resolves to
127.0.0.1 (the browser's ``--host-resolver-rules``): to the browser the service is
its own origin, and only the Host header tells them apart. The viewer itself must
still work opened under either loopback name.
"""

from __future__ import annotations

import html
import json
import threading
import uuid
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
import requests

from otel_runs_exporter.server import LocalService, viewer_link
from server.server_helpers import Trace

pytest.importorskip("selenium", reason="selenium is not installed: pip install -e '.[test]'")

from viewer.viewer_helpers import REBOUND, screenshot, wait_for  # noqa: E402

pytestmark = pytest.mark.heavy(seconds=3)

SECRET = "SECRET-PROMPT-" + uuid.uuid4().hex


@pytest.fixture(scope="module")
def seeded() -> Iterator[tuple[LocalService, Trace]]:
    """A service holding one finished trace whose input is :data:`SECRET`, posted by a client."""
    trace = Trace()
    run = {**trace.root_post(), "inputs": {"prompt": SECRET}, "end_time": "2025-03-01T12:00:01Z", "outputs": {"a": 1}}
    with LocalService() as service:
        assert requests.post(service.url + "/runs", json=run, timeout=10).status_code == 202
        yield service, trace


def _attack_page(service: str, seeded_id: str) -> tuple[bytes, dict[str, str]]:
    """The attacker's page, and the run id each write attempt would store."""
    ids = {name: str(uuid.uuid4()) for name in ("no-cors text/plain", "no-cors multipart", "form text/plain", "form urlencoded")}

    def run(name: str) -> str:
        trace = Trace()
        post = {**trace.root_post(), "id": ids[name], "trace_id": ids[name], "name": "planted by " + name}
        post["dotted_order"] = trace.root_dotted.replace(trace.root_id, ids[name])
        return json.dumps(post)

    plain_form = run("form text/plain")  # a text/plain form sends name=value: the JSON is split around one "="
    cut = plain_form.rindex('"session_name"')
    multipart_run = run("no-cors multipart")
    page = f"""<!doctype html><meta charset="utf-8"><title>attacker</title>
<iframe name="sink1"></iframe><iframe name="sink2"></iframe>
<form id="plain" method="POST" enctype="text/plain" action="{service}/runs" target="sink1">
<input name="{html.escape(plain_form[:cut] + '"pad":"')}" value="{html.escape('",' + plain_form[cut:])}"></form>
<form id="urlencoded" method="POST" action="{service}/runs/batch" target="sink2">
<input name="post" value="{html.escape(json.dumps([json.loads(run("form urlencoded"))]))}"></form>
<script>
const S = {json.dumps(service)};
window.results = {{}};
async function attempt(name, url, init) {{
  try {{
    const r = await fetch(url, init);
    window.results[name] = {{type: r.type, status: r.status, text: await r.text()}};
  }} catch (e) {{
    window.results[name] = {{error: String(e)}};
  }}
}}
(async () => {{
  await attempt("no-cors text/plain", S + "/runs",
    {{method: "POST", mode: "no-cors", headers: {{"Content-Type": "text/plain"}}, body: {json.dumps(run("no-cors text/plain"))}}});
  const part = {json.dumps(multipart_run)};
  const form = new FormData();
  form.append("post.{ids["no-cors multipart"]}", new Blob([part], {{type: "application/json; length=" + part.length}}));
  await attempt("no-cors multipart", S + "/runs/multipart", {{method: "POST", mode: "no-cors", body: form}});
  await attempt("read /runs/query", S + "/runs/query",
    {{method: "POST", headers: {{"Content-Type": "application/json"}}, body: "{{}}"}});
  await attempt("no-cors read /runs/id", S + "/runs/{seeded_id}", {{mode: "no-cors"}});
  document.getElementById("plain").submit();
  document.getElementById("urlencoded").submit();
  window.results.done = true;
}})();
</script>"""
    return page.encode(), ids


class _Attacker(BaseHTTPRequestHandler):
    page = b""

    def do_GET(self) -> None:  # noqa: N802 - stdlib naming
        self.send_response(200)
        self.send_header("Content-Type", "text/html; charset=utf-8")
        self.send_header("Content-Length", str(len(self.page)))
        self.end_headers()
        self.wfile.write(self.page)

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - stdlib signature
        pass


def test_a_page_of_another_loopback_origin_stores_and_reads_nothing(browser: Any, seeded: tuple[LocalService, Trace]) -> None:
    service, trace = seeded
    page, ids = _attack_page(service.url, trace.root_id)
    handler = type("Attacker", (_Attacker,), {"page": page})
    attacker = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=attacker.serve_forever, kwargs={"poll_interval": 0.05}, name="attacker-page", daemon=True)
    thread.start()
    start = len(service.requests())
    watched = {"/runs", "/runs/multipart", "/runs/batch", "/runs/query", f"/runs/{trace.root_id}"}

    def attempts() -> list[tuple[str, str, int]]:
        return [(e["method"], e["path"], e["status"]) for e in service.requests()[start:] if e["path"] in watched]

    try:
        browser.get(f"http://127.0.0.1:{attacker.server_address[1]}/")
        results = wait_for(lambda: browser.execute_script("return window.results.done && window.results"),
                           what="the attacker's page to finish its attempts")
        # Every attempt reached the service (the forms too), and each was refused before its body was read.
        wait_for(lambda: len(attempts()) >= 6, what="the page's six requests at the service")
        assert sorted(attempts()) == sorted([
            ("POST", "/runs", 403), ("POST", "/runs/multipart", 403), ("OPTIONS", "/runs/query", 403),
            ("GET", f"/runs/{trace.root_id}", 403), ("POST", "/runs", 403), ("POST", "/runs/batch", 403),
        ])
        screenshot(browser, "viewer-pages-attacker")
    finally:
        attacker.shutdown()
        attacker.server_close()
        browser.get_log("browser")  # the refused loads and CORS errors are the point here
    assert [r["name"] for r in service.runs()] == ["agent"]
    for name, run_id in ids.items():
        assert service.get_run(run_id) is None, name
    # What the page saw: opaque answers and a failed read; the input never reached it.
    assert results["no-cors text/plain"] == {"type": "opaque", "status": 0, "text": ""}
    assert results["no-cors multipart"] == {"type": "opaque", "status": 0, "text": ""}
    assert "error" in results["read /runs/query"]
    assert results["no-cors read /runs/id"]["text"] == ""
    assert SECRET not in json.dumps(results)


def test_a_rebinding_page_reads_nothing(browser: Any, seeded: tuple[LocalService, Trace]) -> None:
    service, trace = seeded
    start = len(service.requests())
    # The page's origin is the rebound name on the service's own port: to the browser, the service is itself.
    browser.get(f"http://{REBOUND}:{service.port}/")
    try:
        assert SECRET not in browser.page_source and "--allow-host evil.localtest" in browser.page_source
        seen = browser.execute_async_script(
            """const done = arguments[arguments.length - 1];
            const read = (path, init) => fetch(path, init).then(async r => [r.status, await r.text()], e => [0, String(e)]);
            Promise.all([
              read("/runs/query", {method: "POST", headers: {"Content-Type": "application/json"}, body: "{}"}),
              read("/runs/" + arguments[0]),
              read("/sessions"),
            ]).then(done);""",
            trace.root_id,
        )
    finally:
        browser.get_log("browser")
    assert [status for status, _ in seen] == [403, 403, 403], seen
    assert all("Host 'evil.localtest:" in text for _, text in seen)
    assert SECRET not in json.dumps(seen)
    refused = [(e["path"], e["status"]) for e in service.requests()[start:]]
    assert ("/", 403) in refused and ("/runs/query", 403) in refused and ("/sessions", 403) in refused, refused
    assert {status for _, status in refused} == {403}


@pytest.mark.parametrize("name", ["localhost", "127.0.0.1"])
def test_the_viewer_works_opened_under_either_loopback_name(page: Any, seeded: tuple[LocalService, Trace], name: str) -> None:
    service, trace = seeded
    base = f"http://{name}:{service.port}"
    page.get(base + "/")
    wait_for(
        lambda: page.execute_script("return [...document.querySelectorAll('tr.trace .col-name')].map(td => td.innerText)")
        == ["agent"],
        what=f"the seeded trace in the list opened at {name}",
    )
    page.get(viewer_link(base, trace.root_id, trace.root_id))
    wait_for(
        lambda: SECRET in page.execute_script("const d = document.querySelector('.detail .run'); return d ? d.textContent : ''"),
        what="the run's input in its page",
    )
    screenshot(page, f"viewer-pages-{name}")
