"""``otel-runs doctor``: the settings as the app would see them, checked one line each, with an exit code.

One run as a user starts it (a subprocess, the variables in its environment);
the rest call the command's ``main`` in this process with the environment set,
against the local service with a key, or against small servers that answer
garbage, hang or redirect.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Iterator

import pytest

from otel_runs_exporter import _settings
from otel_runs_exporter.cli import main
from otel_runs_exporter.server import LocalService

KEY = "sk-doctor-2b7e"
BIN = Path(sys.executable).parent


@pytest.fixture(scope="module")
def service() -> Iterator[LocalService]:
    with LocalService(api_key=KEY, strict=True) as svc:
        yield svc


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in [k for k in os.environ if k.startswith(("OTEL_", "LANGSMITH_", "LANGCHAIN_"))]:
        monkeypatch.delenv(name)
    _settings._bad_env_log.reset()  # each case's variables are said anew


def _doctor(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, list[str]]:
    code = main(["doctor", *args])
    out, err = capsys.readouterr()
    assert KEY not in out + err
    return code, out.splitlines()


def _line(lines: list[str], check: str) -> str:
    (found,) = [line for line in lines if line.split()[0] == check.split()[0] and line.startswith(check)]
    return found


def test_all_well_as_a_user_runs_it(service, tmp_path):
    spool = tmp_path / "spool"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "LANGSMITH_"))}
    env.update(OTEL_EXPORTER_RUNS_ENDPOINT=service.url, OTEL_EXPORTER_RUNS_API_KEY=KEY,
               OTEL_EXPORTER_RUNS_PROJECT="shop", OTEL_EXPORTER_RUNS_SPOOL_DIR=str(spool))
    proc = subprocess.run([str(BIN / "otel-runs"), "doctor"], env=env, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    lines = proc.stdout.splitlines()
    assert [line.split()[:2] for line in lines] == [
        ["settings", "ok"], ["endpoint", "ok"], ["api", "key"], ["project", "ok"], ["mode", "ok"], ["spool", "ok"],
    ], lines
    assert f"{service.url} answers as the service (GET /info: 200" in _line(lines, "endpoint")
    assert _line(lines, "api key").endswith("accepted (GET /sessions: 200; from OTEL_EXPORTER_RUNS_API_KEY)")
    assert "'shop' (from OTEL_EXPORTER_RUNS_PROJECT); does not exist yet" in _line(lines, "project")
    assert "auto: POST /runs/multipart" in _line(lines, "mode")
    assert f"{spool}: 0 files (0 runs) waiting to be sent" in _line(lines, "spool")
    assert KEY not in proc.stdout + proc.stderr
    assert [r["path"] for r in service.requests()][-2:] == ["/info", "/sessions"]  # two reads; nothing created


@pytest.mark.parametrize("key, said", [(None, "none set, and the service requires one (401): set OTEL_EXPORTER_RUNS_API_KEY"),
                                       ("sk-wrong", "refused (401): check OTEL_EXPORTER_RUNS_API_KEY")])
def test_a_missing_or_refused_key_is_told_apart(service, capsys, monkeypatch, key, said):
    monkeypatch.setenv("OTEL_EXPORTER_RUNS_ENDPOINT", service.url)
    if key:
        monkeypatch.setenv("LANGSMITH_API_KEY", key)  # the SDK's variable counts, and is named as the source
        said = said.replace("OTEL_EXPORTER_RUNS_API_KEY", "LANGSMITH_API_KEY")
    code, lines = _doctor(capsys)
    assert code == 1
    assert _line(lines, "api key") == f"api key   FAIL  {said}"
    assert "not looked up" in _line(lines, "project")


def test_an_environment_the_app_cannot_use_fails_naming_each_variable(capsys, monkeypatch):
    monkeypatch.setenv("OTEL_EXPORTER_RUNS_REGION", "asia")
    monkeypatch.setenv("OTEL_EXPORTER_RUNS_HEADERS", "sk-in-a-header")
    monkeypatch.setenv("OTEL_BSP_EXPORT_TIMEOUT", "soon")
    code, lines = _doctor(capsys)
    assert code == 1
    assert lines == [
        "settings  FAIL  OTEL_BSP_EXPORT_TIMEOUT='soon' is not valid: expected milliseconds, 0 or more, at most "
        "10000000000; using the default, 30000",
        "settings  FAIL  OTEL_EXPORTER_RUNS_REGION='asia' is not valid: expected one of us, eu: the app would run untraced",
        "settings  FAIL  OTEL_EXPORTER_RUNS_HEADERS is not valid (its value is not shown: it may hold a secret): "
        "expected comma-separated key=value pairs: the app would run untraced",
    ]


def test_tracing_switched_off_is_a_failed_check(capsys, monkeypatch):
    monkeypatch.setenv("OTEL_SDK_DISABLED", "true")
    code, lines = _doctor(capsys)
    assert code == 1 and lines[-1] == "tracing   FAIL  off (OTEL_SDK_DISABLED is true): the app records and sends nothing"


def test_bad_arguments_are_usage_errors(capsys):
    with pytest.raises(SystemExit) as exited:
        main(["doctor", "--timeout", "0"])
    assert exited.value.code == 2
    assert "--timeout: expected a number of seconds above 0" in capsys.readouterr().err


# --- endpoints that are not the service ------------------------------------------------


class _Odd(BaseHTTPRequestHandler):
    mode = "redirect"

    def log_message(self, *args: object) -> None:
        pass

    def do_GET(self) -> None:  # noqa: N802
        if self.mode == "hang":
            time.sleep(5)
            return
        if self.mode == "redirect":
            self.send_response(302)
            self.send_header("Location", "https://login.example.com/sso")
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        body = b"<html>a proxy's page</html>"
        self.send_response(200)
        self.send_header("Content-Type", "text/html")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


@pytest.fixture
def odd() -> Iterator[tuple[str, type[_Odd]]]:
    handler = type("Handler", (_Odd,), {})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", handler
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture
def garbage() -> Iterator[str]:
    """A port that answers any request with bytes that are not HTTP."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()

    def serve() -> None:
        while True:
            try:
                conn, _ = listener.accept()
            except OSError:
                return
            with conn:
                conn.recv(65536)
                conn.sendall(b"SSH-2.0-OpenSSH_9.6\r\nnot http at all\r\n\r\n")

    threading.Thread(target=serve, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{listener.getsockname()[1]}"
    finally:
        listener.close()


@pytest.mark.parametrize("mode, said", [
    ("redirect", "GET /info redirects (302) to https://login.example.com/sso: the endpoint is likely not the API's "
                 "base address (OTEL_EXPORTER_RUNS_ENDPOINT); runs are not sent on"),
    ("html", "GET /info answered 200 with text/html, not the service's JSON: is {url} the API's base address "
             "(OTEL_EXPORTER_RUNS_ENDPOINT)?"),
    ("hang", "{url} gave no answer to GET /info within"),
])
def test_an_endpoint_that_is_not_the_service_is_said_in_one_line_within_the_timeout(odd, capsys, monkeypatch, mode, said):
    url, handler = odd
    handler.mode = mode
    monkeypatch.setenv("OTEL_EXPORTER_RUNS_ENDPOINT", url)
    monkeypatch.setenv("OTEL_EXPORTER_RUNS_API_KEY", KEY)
    began = time.monotonic()
    code, lines = _doctor(capsys, "--timeout", "1")
    assert time.monotonic() - began < 3
    assert code == 1
    assert _line(lines, "endpoint").startswith("endpoint  FAIL  " + said.format(url=url)), lines
    assert _line(lines, "api key") == "api key   FAIL  not checked: the endpoint did not answer as the service"


def test_an_endpoint_that_answers_garbage(garbage, capsys, monkeypatch):
    monkeypatch.setenv("OTEL_EXPORTER_RUNS_ENDPOINT", garbage)
    code, lines = _doctor(capsys, "--timeout", "2")
    assert code == 1
    assert _line(lines, "endpoint").startswith(f"endpoint  FAIL  {garbage}: the connection failed (BadStatusLine"), lines


def test_a_name_that_does_not_resolve(capsys, monkeypatch):
    monkeypatch.setenv("OTEL_EXPORTER_RUNS_ENDPOINT", "https://api.example.invalid")
    code, lines = _doctor(capsys, "--timeout", "2")
    assert code == 1
    assert _line(lines, "endpoint") == (
        "endpoint  FAIL  https://api.example.invalid: could not resolve api.example.invalid: no network or DNS?"
    )


# --- the local service's install --------------------------------------------------------


def test_serve_without_zstandard_says_the_sdk_will_call_it_out_of_date_and_what_fixes_it(tmp_path):
    """/info without zstd makes the langsmith SDK print "Run compression is not enabled. Please update...", and
    leaving the flag out does not stop it (it reads a missing flag as false): the service's install, [serve],
    brings zstandard; one started without it says so."""
    code = "import sys; sys.modules['zstandard'] = None\nfrom otel_runs_exporter.cli import main\nsys.exit(main(sys.argv[1:]))"
    proc = subprocess.Popen([sys.executable, "-c", code, "serve", "--port", "0", "--db", str(tmp_path / "r.db")],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().startswith("Listening on http://127.0.0.1:")
        note = proc.stderr.readline()
    finally:
        proc.terminate()
        proc.communicate(timeout=30)
    assert note.startswith("zstandard is not installed, so this service takes no zstd: a langsmith SDK pointed here "
                           'will say "Run compression is not enabled.'), note
    assert "pip install 'otel-runs-exporter[serve]'" in note
    pyproject = (Path(__file__).resolve().parents[2] / "pyproject.toml").read_text(encoding="utf-8")
    assert '\nserve = ["zstandard>=0.22"]\n' in pyproject
