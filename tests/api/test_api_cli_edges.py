"""``otel-runs`` where a first hour goes wrong: each case as an audit met it, run as a real process.

Before each fix: a Python traceback, a false cause, or a silent "nothing". Now one line and a
documented exit code.
"""

from __future__ import annotations

import http.server
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator

import pytest
from api.api_helpers import API_KEY, export_body

from otel_runs_exporter import ConfigError
from otel_runs_exporter import cli as cli_module
from otel_runs_exporter.api import ServiceClient
from otel_runs_exporter.server import LocalService

pytestmark = pytest.mark.heavy(seconds=9)

Cli = Callable[..., subprocess.CompletedProcess[str]]


@pytest.fixture
def answering() -> Iterator[Callable[[int, bytes], str]]:
    """A fake service answering every GET with one status and body (a proxy's page, a wrong address)."""
    servers: list[http.server.HTTPServer] = []

    def start(status: int, body: bytes) -> str:
        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 - the stdlib's name
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: object) -> None:
                pass

        server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
        servers.append(server)
        return f"http://127.0.0.1:{server.server_address[1]}"

    yield start
    for server in servers:
        server.shutdown()
        server.server_close()


def _one_line_no_traceback(done: subprocess.CompletedProcess[str]) -> None:
    assert "Traceback" not in done.stderr, done.stderr[-2000:]
    assert done.stderr.strip().count("\n") <= 1, done.stderr


Main = Callable[..., tuple[int, str, str]]


@pytest.mark.parametrize("body", [b'"hello"', b"42", b""])
def test_an_answer_that_is_not_json_of_the_expected_shape_is_one_clear_error(run_cli: Main, answering, body: bytes) -> None:
    url = answering(200, body)
    code, _, err = run_cli("exports", "get", "e1", env={"OTEL_EXPORTER_RUNS_ENDPOINT": url})
    # before: AttributeError: 'str' object has no attribute 'get', a traceback
    assert code == cli_module.EXIT_ERROR and "not a JSON object" in err and err.strip().count("\n") <= 1, err
    code, _, err = run_cli("exports", "list", env={"OTEL_EXPORTER_RUNS_ENDPOINT": url})
    assert code == cli_module.EXIT_ERROR and "not a JSON list" in err  # before: "no exports", exit 0


def test_an_empty_id_is_a_usage_error_not_the_whole_collection(run_cli: Main) -> None:
    code, _, err = run_cli("exports", "get", "")
    assert code == cli_module.EXIT_USAGE and "must not be empty" in err


def test_ctrl_c_while_waiting_is_one_line_and_130(svc: LocalService, cli: Cli) -> None:
    svc.control.clock.speed = 0
    stuck = svc.control.exports.create(export_body(days=1))  # never starts on a stopped clock
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "LANGSMITH_"))}
    env.update(OTEL_EXPORTER_RUNS_ENDPOINT=svc.url, OTEL_EXPORTER_RUNS_API_KEY=API_KEY)
    proc = subprocess.Popen(
        [sys.executable, "-m", "otel_runs_exporter.cli", "exports", "wait", stuck["id"], "--poll-interval", "0.2"],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    assert proc.stderr is not None
    first = proc.stderr.readline()  # its first progress line: it is polling
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=20)
    err = first + err
    assert proc.returncode == cli_module.EXIT_INTERRUPTED, err  # before: a KeyboardInterrupt traceback, -2
    assert "Traceback" not in err and err.strip().endswith("interrupted")


def test_output_the_terminal_cannot_show_or_the_disk_cannot_take(tmp_path) -> None:
    db = tmp_path / "runs.db"
    with LocalService(db=str(db)) as svc:
        trace_id = "0190b3c5-f1b8-7a3e-9c1d-2e3f4a5b6c7d"
        run = {"id": trace_id, "trace_id": trace_id, "dotted_order": "20250301T120000000000Z" + trace_id,
               "name": "réponse 日本語 ✓", "run_type": "chain", "start_time": "2025-03-01T12:00:00Z", "session_name": "p"}
        import requests

        assert requests.post(svc.url + "/runs/batch", json={"post": [run]}, timeout=10).status_code == 202
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "LANGSMITH_"))}
    base = [sys.executable, "-m", "otel_runs_exporter.cli", "runs", "list", "--db", str(db), "--since", "3650d"]
    ascii_term = subprocess.run(base, env={**env, "PYTHONIOENCODING": "ascii"}, capture_output=True, text=True, timeout=30)
    assert ascii_term.returncode == 0, ascii_term.stderr[-1500:]  # before: UnicodeEncodeError
    assert "r\\xe9ponse" in ascii_term.stdout
    as_json = subprocess.run([*base, "--json"], env={**env, "PYTHONIOENCODING": "ascii"}, capture_output=True, text=True, timeout=30)
    assert as_json.returncode == 0 and json.loads(as_json.stdout.splitlines()[0])["name"] == "réponse 日本語 ✓"  # still JSON
    if os.path.exists("/dev/full"):
        with open("/dev/full", "w") as full:
            done = subprocess.run(base, env=env, stdout=full, stderr=subprocess.PIPE, text=True, timeout=30)
        _one_line_no_traceback(done)  # before: OSError No space left on device, a traceback
        assert done.returncode == cli_module.EXIT_ERROR and "cannot write the output" in done.stderr
    too_far = subprocess.run([*base[:-1], "99999999d"], env=env, capture_output=True, text=True, timeout=30)
    assert too_far.returncode == cli_module.EXIT_USAGE and "before year 1" in too_far.stderr  # before: OverflowError


def test_the_demo_piped_into_head_stops_quietly() -> None:
    """Before: "cannot listen on port 0: [Errno 32] Broken pipe", exit 2: the pipe taken for the port."""
    done = subprocess.run(
        f"{sys.executable} -m otel_runs_exporter.cli demo | head -1; exit ${{PIPESTATUS[0]}}",
        shell=True, executable="/bin/bash", capture_output=True, text=True, timeout=60,
    )
    assert done.returncode == cli_module.EXIT_BROKEN_PIPE and "Broken pipe" not in done.stderr, done.stderr


def test_a_wait_ends_near_its_timeout_even_when_each_read_would_retry_for_longer(cli: Cli, answering) -> None:
    """Before: --timeout 2 against a service answering 500 returned after 29 s (each read's own 30 s)."""
    url = answering(500, b'{"detail": "down"}')
    began = time.monotonic()
    done = cli("exports", "wait", "e1", "--timeout", "2", "--poll-interval", "1", env={"OTEL_EXPORTER_RUNS_ENDPOINT": url})
    assert time.monotonic() - began < 12 and done.returncode == cli_module.EXIT_SERVER, done.stderr


def test_the_typed_client_refuses_waits_that_would_spin_or_fail_deep(client: ServiceClient) -> None:
    for kwargs in ({"poll_interval": 0}, {"poll_interval": -1}, {"poll_interval": float("nan")}, {"timeout": "5"}):
        with pytest.raises(ConfigError, match="must be a number of seconds"):
            client.wait_for_export("e1", **kwargs)  # before: 2,170 requests in 2 s for poll_interval=0


def test_no_answer_names_where_the_address_came_from(run_cli: Main, closed_port: int) -> None:
    """Before: always "the address comes from OTEL_EXPORTER_RUNS_ENDPOINT", also when LANGSMITH_ENDPOINT set it."""
    env = {"OTEL_EXPORTER_RUNS_ENDPOINT": "", "LANGSMITH_ENDPOINT": f"http://127.0.0.1:{closed_port}"}
    code, _, err = run_cli("exports", "list", env=env)
    assert code == cli_module.EXIT_SERVER and "the address comes from LANGSMITH_ENDPOINT" in err


def test_a_key_echoed_back_in_an_error_body_is_not_printed(run_cli: Main, answering) -> None:
    """A proxy that echoes the request's headers in its error page: before, the CLI printed the key."""
    url = answering(400, b'{"detail": "bad request", "echo": {"x-api-key": "' + API_KEY.encode() + b'"}}')
    code, out, err = run_cli("exports", "list", env={"OTEL_EXPORTER_RUNS_ENDPOINT": url})
    assert code == cli_module.EXIT_INVALID and "<hidden>" in err and API_KEY not in out + err
