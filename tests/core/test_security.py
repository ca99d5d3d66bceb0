"""Security: redaction before anything leaves, TLS verification, no secret in logs, reprs or files."""

from __future__ import annotations

import logging
import shutil
import ssl
import subprocess
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from otel_runs_exporter import RunsSpanExporter
from otel_runs_exporter._encode import encode_run
from otel_runs_exporter._settings import resolve
from otel_runs_exporter._transport import Transport

from core.helpers import processor_provider

KEY = "lsv2_pt_0123456789abcdef0123456789abcdef_secret"


def _one_span(provider, **attrs):
    with provider.get_tracer("t").start_as_current_span("op", attributes=attrs) as span:
        span.add_event("note", {"detail": "contains sk-abcdefghijklmnopqrstuvwx"})
    return span


def test_hide_inputs_and_outputs_from_env(service, monkeypatch):
    monkeypatch.setenv("OTEL_EXPORTER_RUNS_HIDE_INPUTS", "true")
    monkeypatch.setenv("OTEL_EXPORTER_RUNS_HIDE_OUTPUTS", "1")
    provider, processor = processor_provider(service.url)
    _one_span(provider, **{"input.value": "private question", "output.value": "private answer"})
    provider.shutdown()
    (run,) = service.wait_for_runs(1)
    # Hidden is empty, and empty sends no part: the service shows inputs {} and no outputs.
    assert run["inputs"] == {} and run.get("outputs") is None
    assert "private" not in str(run)
    part_names = [name for entry in service.requests() for name in entry.get("part_names") or ()]
    assert part_names and not [n for n in part_names if n.endswith((".inputs", ".outputs"))]


def test_callables_and_mask_apply_to_every_field(service):
    def mask(value):
        # A mask gets each field whole (dict, list or str) and returns its replacement.
        if isinstance(value, list):
            return [mask(v) for v in value]
        return {"masked": len(str(value))} if isinstance(value, dict) else "***" if isinstance(value, str) else value

    provider, processor = processor_provider(
        service.url,
        hide_inputs=lambda inputs: {k: "<hidden>" for k in inputs},
        hide_outputs=lambda outputs: {"kept": sorted(outputs)},
        mask=None,
    )
    _one_span(provider, **{"input.value": '{"q": "secret q"}', "output.value": '{"a": "secret a"}'})
    provider.shutdown()
    (run,) = service.wait_for_runs(1)
    assert run["inputs"] == {"q": "<hidden>"} and run["outputs"] == {"kept": ["a"]}

    service.reset()
    provider, processor = processor_provider(service.url, mask=mask)
    with pytest.raises(RuntimeError):
        with provider.get_tracer("t").start_as_current_span("boom", attributes={"user.email": "a@b.c"}):
            raise RuntimeError("card 4111-1111")
    provider.shutdown()
    (run,) = service.wait_for_runs(1)
    assert run["error"] == "***" and "masked" in run["extra"]["metadata"]
    assert "4111" not in str(run) and "a@b.c" not in str(run)


def test_a_mask_that_returns_another_shape_is_wrapped_not_refused(service):
    """Found by an audit: mask=lambda v: "[hidden]" made inputs a string; the service refused the run
    (field_types) and it was dropped as rejected. Each field now goes in the shape it needs."""
    provider, processor = processor_provider(service.url, mask=lambda value: "[hidden]")
    with provider.get_tracer("t").start_as_current_span(
        "x", attributes={"input.value": '{"q": "secret q"}', "output.value": "secret a", "langsmith.metadata.user": "bob"}
    ) as span:
        span.add_event("step", {"note": "secret e"})
    assert processor.force_flush(10_000) and dict(processor.stats().dropped) == {}
    provider.shutdown()
    (run,) = service.wait_for_runs(1)
    assert (run["inputs"], run["outputs"], run["extra"]["metadata"]) == (
        {"input": "[hidden]"}, {"output": "[hidden]"}, {"metadata": "[hidden]"})
    assert "secret" not in str(run)


def test_redaction_that_raises_fails_closed(service, caplog):
    def broken(_):
        raise ValueError("bug in user redaction")

    provider, processor = processor_provider(service.url, hide_inputs=broken)
    with caplog.at_level(logging.ERROR, logger="otel_runs_exporter"):
        _one_span(provider, **{"input.value": "do not leak"})
        provider.shutdown()
    (run,) = service.wait_for_runs(1)
    assert "do not leak" not in str(run) and run["inputs"] == {"redacted": "[redaction failed; value withheld]"}
    assert any("redaction of inputs raised" in r.getMessage() for r in caplog.records)


def test_scrub_secrets_is_off_by_default_and_on_when_asked(service):
    attrs = {"db.password": "hunter2", "input.value": "call with Bearer abcdef123456", "gen_ai.usage.input_tokens": 5}
    provider, _ = processor_provider(service.url)
    _one_span(provider, **attrs)
    provider.shutdown()
    (plain,) = service.wait_for_runs(1)
    assert plain["extra"]["metadata"]["db.password"] == "hunter2"  # off by default: nothing changed
    service.reset()
    provider, _ = processor_provider(service.url, scrub_secrets=True)
    _one_span(provider, **attrs)
    provider.shutdown()
    (run,) = service.wait_for_runs(1)
    meta = run["extra"]["metadata"]
    assert meta["db.password"] == "[REDACTED]" and run["inputs"] == {"input": "call with [REDACTED]"}
    assert run["events"][0]["kwargs"]["detail"] == "contains [REDACTED]"
    assert run["outputs"].get("usage_metadata", {}).get("input_tokens", 5) == 5  # token counts are not secrets


def test_redaction_happens_before_the_spool(service, tmp_path):
    service.faults.update(outage=True, retry_after=None)
    provider, processor = processor_provider(
        service.url, hide_inputs=True, export_timeout_s=0.1, spool_dir=str(tmp_path), api_key=KEY
    )
    _one_span(provider, **{"input.value": "spool-must-not-see-this"})
    deadline = time.monotonic() + 10
    while processor.stats().spooled < 1 and time.monotonic() < deadline:
        time.sleep(0.02)
    data = b""
    while not data and time.monotonic() < deadline:
        for path in tmp_path.iterdir():
            try:
                data += path.read_bytes()
            except FileNotFoundError:  # the replayer claimed (renamed) it between the listing and the read
                pass
    assert data and b"spool-must-not-see-this" not in data and KEY.encode() not in data
    processor.shutdown(timeout_millis=100)


def test_the_key_never_appears_in_logs_reprs_errors_or_files(service, tmp_path, caplog):
    """Every place a key could leak, exercised with a real exporter and real failures."""
    from otel_runs_exporter.server import LocalService

    with caplog.at_level(logging.DEBUG):
        with LocalService(api_key="another-key", strict=True) as locked:
            provider, processor = processor_provider(locked.url, api_key=KEY, spool_dir=str(tmp_path / "s1"))
            _one_span(provider)
            processor.force_flush(2000)
            provider.shutdown()
        provider, processor = processor_provider(
            "http://127.0.0.1:9", api_key=KEY, export_timeout_s=0.2, spool_dir=str(tmp_path / "s2")
        )
        _one_span(provider)
        provider.shutdown()
        exporter = RunsSpanExporter(endpoint="http://127.0.0.1:9", api_key=KEY, export_timeout_s=0.2)
        texts = [repr(exporter), repr(processor), repr(resolve({"api_key": KEY}, env={})), str(processor.stats())]
        exporter.shutdown()
    texts += [r.getMessage() for r in caplog.records]
    texts += [str(r.exc_info[1]) for r in caplog.records if r.exc_info]
    assert not [t for t in texts if KEY in t]
    for path in tmp_path.rglob("*"):
        if path.is_file():
            assert KEY.encode() not in path.read_bytes(), path


def test_plain_http_warning_for_remote_hosts_only(caplog):
    with caplog.at_level(logging.WARNING, logger="otel_runs_exporter"):
        RunsSpanExporter(endpoint="http://127.0.0.1:9", api_key=KEY).shutdown()
        assert not [r for r in caplog.records if "plain HTTP" in r.getMessage()]
        RunsSpanExporter(endpoint="http://collector.example", api_key=KEY).shutdown()
    assert [r for r in caplog.records if "plain HTTP" in r.getMessage()]


# --- TLS ------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def pki(tmp_path_factory):
    """A CA, a server certificate for 127.0.0.1 and a client certificate, made with openssl."""
    if shutil.which("openssl") is None:
        pytest.skip("openssl is needed to make test certificates")
    d = tmp_path_factory.mktemp("pki")

    def run(*args):
        subprocess.run(["openssl", *args], cwd=d, check=True, capture_output=True)

    run("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "ca.key", "-out", "ca.pem", "-days", "2", "-subj", "/CN=test-ca")
    (d / "san.ext").write_text("subjectAltName=IP:127.0.0.1,DNS:localhost\n")
    for name in ("server", "client"):
        run("req", "-newkey", "rsa:2048", "-nodes", "-keyout", f"{name}.key", "-out", f"{name}.csr", "-subj", f"/CN={name}")
        run("x509", "-req", "-in", f"{name}.csr", "-CA", "ca.pem", "-CAkey", "ca.key", "-CAcreateserial",
            "-out", f"{name}.pem", "-days", "2", "-extfile", "san.ext")
    return d


class _Sink(BaseHTTPRequestHandler):
    seen: list = []

    def log_message(self, *args):
        pass

    def do_POST(self):
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        type(self).seen.append(self.path)
        self.send_response(202)
        self.send_header("Content-Length", "0")
        self.end_headers()


def _tls_server(pki, require_client_cert: bool):
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(pki / "server.pem", pki / "server.key")
    if require_client_cert:
        ctx.verify_mode = ssl.CERT_REQUIRED
        ctx.load_verify_locations(pki / "ca.pem")
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Sink)
    server.socket = ctx.wrap_socket(server.socket, server_side=True)
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
    return server, f"https://127.0.0.1:{server.server_address[1]}"


def _send(url, **settings):
    t = Transport(resolve({"endpoint": url, "api_key": KEY, **settings}, env={}))
    run = encode_run("post", {"id": "r", "inputs": {}}, completes=True)
    return t.send([run], time.monotonic() + 1.0)


@pytest.fixture
def tls_url(pki, monkeypatch):
    """A TLS sink whose CA only ``pki / "ca.pem"`` names (no machine-wide bundle is read), with nothing seen yet."""
    monkeypatch.delenv("REQUESTS_CA_BUNDLE", raising=False)
    monkeypatch.delenv("CURL_CA_BUNDLE", raising=False)
    server, url = _tls_server(pki, require_client_cert=False)
    _Sink.seen = []
    try:
        yield url
    finally:
        server.shutdown()


def test_tls_is_verified_by_default_and_a_ca_bundle_can_be_given(pki, tls_url):
    assert _send(tls_url).retry and _Sink.seen == []  # unknown CA: refused, never sent
    assert _send(tls_url, certificate=str(pki / "ca.pem")).delivered and _Sink.seen == ["/runs/multipart"]


def test_at_exit_a_refused_certificate_gets_the_exit_budget_and_is_named(tls_url):
    """No wait makes an untrusted certificate trusted: at exit it is treated like nothing listening."""
    t = Transport(resolve({"endpoint": tls_url, "api_key": KEY, "retry_backoff": (0.05, 0.1)}, env={}))
    t.at_exit(0.5)
    run = encode_run("post", {"id": "r", "inputs": {}}, completes=True)
    began = time.monotonic()
    result = t.send([run], began + 30)  # the export timeout: not waited for
    assert result.retry and time.monotonic() - began < 5 and _Sink.seen == []
    assert t.unreachable is not None and t.unreachable.startswith("the TLS certificate of 127.0.0.1 was refused")


def test_mutual_tls_with_a_client_certificate(pki, monkeypatch):
    monkeypatch.setenv("OTEL_EXPORTER_RUNS_CERTIFICATE", str(pki / "ca.pem"))
    # A machine-wide bundle must not override the one configured for the exporter.
    monkeypatch.setenv("REQUESTS_CA_BUNDLE", "/nonexistent/bundle.pem")
    server, url = _tls_server(pki, require_client_cert=True)
    try:
        _Sink.seen = []
        assert _send(url).retry and _Sink.seen == []
        monkeypatch.setenv("OTEL_EXPORTER_RUNS_CLIENT_CERTIFICATE", str(pki / "client.pem"))
        monkeypatch.setenv("OTEL_EXPORTER_RUNS_CLIENT_KEY", str(pki / "client.key"))
        t = Transport(resolve({"endpoint": url, "api_key": KEY}))
        run = encode_run("post", {"id": "r", "inputs": {}}, completes=True)
        assert t.send([run], time.monotonic() + 2).delivered and _Sink.seen == ["/runs/multipart"]
    finally:
        server.shutdown()


def test_scrub_walks_structured_inputs(service):
    provider, processor = processor_provider(service.url, scrub_secrets=True)
    with provider.get_tracer("t").start_as_current_span(
        "login", attributes={"input.value": '{"user": "u", "creds": {"password": "p4ss", "note": "Bearer zzzzzzzz"}}'}
    ):
        pass
    provider.shutdown()
    (run,) = service.wait_for_runs(1)
    assert run["inputs"] == {"user": "u", "creds": {"password": "[REDACTED]", "note": "[REDACTED]"}}
