"""``otel-runs exports|deployments|auth``: exit codes, --json on stdout, progress on stderr.

A few tests run the command as a real process (the contract a CI job sees:
exit status and clean streams); the rest call ``main`` in process, which is the
same code without half a second of interpreter start-up each.
"""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from api.api_helpers import API_KEY, export_body

from otel_runs_exporter import cli as cli_module
from otel_runs_exporter.server import LocalService

pytestmark = pytest.mark.heavy(seconds=30)

Cli = Callable[..., subprocess.CompletedProcess[str]]
Main = Callable[..., tuple[int, str, str]]
FAST = ("--poll-interval", "0.01")


# --- as a real process ------------------------------------------------------------


def test_process_exports_wait_completed_json_stdout_progress_stderr(cli: Cli, svc: LocalService) -> None:
    export = svc.control.exports.create(export_body(days=3))
    done = cli("exports", "wait", export["id"], "--json", *FAST)
    assert done.returncode == cli_module.EXIT_OK, done.stderr
    assert json.loads(done.stdout)["status"] == "COMPLETED"  # stdout is only the JSON
    assert "COMPLETED" in done.stderr and export["id"] in done.stderr
    assert API_KEY not in done.stdout + done.stderr


def test_process_exit_codes_failed_cancelled_and_wait_timeout(cli: Cli, svc: LocalService) -> None:
    svc.control.clock.speed = 100_000
    failed = svc.control.exports.create(export_body(days=2, fail_runs={"0": 21}))
    cancelled = svc.control.exports.create(export_body(days=1, run_seconds=10**6))
    svc.control.exports.cancel(cancelled["id"])

    result = cli("exports", "wait", failed["id"], *FAST)
    assert result.returncode == cli_module.EXIT_FAILED, result.stderr
    assert result.stdout.strip().endswith("FAILED")
    assert cli("exports", "wait", cancelled["id"], *FAST).returncode == cli_module.EXIT_CANCELLED
    svc.control.clock.speed = 0
    stuck = svc.control.exports.create(export_body(days=1))  # never starts on a stopped clock
    timed = cli("exports", "wait", stuck["id"], "--timeout", "0.3", "--poll-interval", "0.1", "--json")
    assert timed.returncode == cli_module.EXIT_WAIT_TIMEOUT
    assert json.loads(timed.stdout)["status"] == "CREATED"  # the last state seen, for the script
    assert "not finished" in timed.stderr


def test_process_unauthorized_is_3_and_the_key_is_not_printed(cli: Cli) -> None:
    refused = cli("exports", "list", env={"OTEL_EXPORTER_RUNS_API_KEY": "wrong-key-123"})
    assert refused.returncode == cli_module.EXIT_UNAUTHORIZED and "401" in refused.stderr
    assert "wrong-key-123" not in refused.stdout + refused.stderr


@pytest.mark.parametrize(
    ("content", "says"),
    [
        (None, "cannot read"),
        ('{"name": ', "is not valid JSON"),
        ('["agent"]', "holds an array; expected a JSON object"),
        ("-", "is not valid JSON"),
    ],
    ids=["missing-file", "broken-json", "not-an-object", "stdin"],
)
def test_process_bad_json_body_is_a_usage_error_and_sends_nothing(
    cli: Cli, svc: LocalService, tmp_path: Path, content: str | None, says: str
) -> None:
    body = tmp_path / "body.json"
    if content is not None and content != "-":
        body.write_text(content)
    where = "-" if content == "-" else str(body)
    done = cli("deployments", "create", "--json-body", where, stdin="{oops" if content == "-" else None)
    assert done.returncode == cli_module.EXIT_USAGE == 2, done.stderr
    assert says in done.stderr and ("stdin" if content == "-" else str(body)) in done.stderr
    assert "Traceback" not in done.stderr and done.stdout == ""
    assert svc.requests() == []


def test_bad_json_body_for_update_is_a_usage_error_too(run_cli: Main, svc: LocalService, tmp_path: Path) -> None:
    body = tmp_path / "patch.json"
    body.write_text('"just a string"')
    rc, _, err = run_cli("deployments", "update", "some-id", "--json-body", str(body))
    assert rc == cli_module.EXIT_USAGE and "holds a string; expected a JSON object" in err
    body.write_bytes(b"\xff\xfe{}")  # UTF-16, say, saved by an editor
    rc, _, err = run_cli("deployments", "update", "some-id", "--json-body", str(body))
    assert rc == cli_module.EXIT_USAGE and "is not UTF-8 text" in err
    assert svc.requests() == []


def test_help_and_exit_code_docs_agree_that_a_bad_json_body_is_exit_2(cli: Cli) -> None:
    helped = cli("deployments", "create", "--help")
    assert helped.returncode == 0
    text = " ".join(helped.stdout.split())
    assert "a file that cannot be read or parsed is a usage error (exit 2)" in text
    assert "2 usage: bad arguments, bad --json-body, bad setting" in text
    assert "--json-body" in _constant_doc("EXIT_USAGE")
    assert "--json-body" not in _constant_doc("EXIT_ERROR")


def test_exit_codes_help_lists_every_exit_code() -> None:
    """The codes and their --help text have one owner (``cli._output``); they must not drift apart."""
    import re

    from otel_runs_exporter.cli import _output

    listed = {int(code) for code in re.findall(r"(?<!\S)(\d{1,3})  \S", _output.EXIT_CODES_HELP)}
    codes = {value for name, value in vars(_output).items() if name.startswith("EXIT_") and isinstance(value, int)}
    assert listed == codes


def _constant_doc(name: str) -> str:
    """The docstring written under an exit code (kept in the source of ``cli._output``, not on the int)."""
    import ast
    import inspect

    from otel_runs_exporter.cli import _output

    tree = ast.parse(inspect.getsource(_output))
    body = tree.body
    for node, after in zip(body, body[1:]):
        if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == name for t in node.targets):
            if isinstance(after, ast.Expr) and isinstance(after.value, ast.Constant):
                return str(after.value.value)
    raise AssertionError(f"{name} has no docstring")


def test_process_error_body_is_printed_as_pretty_json(cli: Cli) -> None:
    done = cli("exports", "get", "no-such-export")
    assert done.returncode == cli_module.EXIT_NOT_FOUND
    first, *body = done.stderr.splitlines()
    assert first == "otel-runs exports: GET /api/v1/bulk-exports/no-such-export answered 404 Not Found"
    assert body[0] == "{" and body[1].startswith("  ")  # indented, one field a line
    detail = json.loads("\n".join(body))["detail"]
    assert detail.startswith("export no-such-export not found") and "kept for 7 days" in detail  # says why it may be gone
    assert "{'" not in done.stderr and done.stdout == ""


def test_process_no_service_fails_fast_with_one_message(cli: Cli, closed_port: int) -> None:
    started = time.monotonic()
    done = cli("exports", "list", env={"OTEL_EXPORTER_RUNS_ENDPOINT": f"http://127.0.0.1:{closed_port}"})
    assert time.monotonic() - started < 8  # the call timeout is 30 s; a refused connection is not retried
    assert done.returncode == cli_module.EXIT_SERVER
    assert done.stderr.count("\n") == 1, done.stderr  # the command's line, not the HTTP layer's warning too
    assert f"no answer from http://127.0.0.1:{closed_port} (connection refused)" in done.stderr
    assert "OTEL_EXPORTER_RUNS_ENDPOINT" in done.stderr and done.stdout == ""


def test_process_connect_timeout_is_apart_from_the_read_timeout(cli: Cli, silent_port: int) -> None:
    env = {"OTEL_EXPORTER_RUNS_CONTROL_PLANE_URL": f"http://127.0.0.1:{silent_port}", "OTEL_EXPORTER_RUNS_TIMEOUT": "30"}
    started = time.monotonic()
    done = cli("deployments", "get", "some-id", env=env)
    assert time.monotonic() - started < 10  # about 3 s to connect, not the 30 s read timeout
    assert done.returncode == cli_module.EXIT_SERVER
    assert done.stderr.count("\n") == 1, done.stderr
    assert "nothing accepted a connection within 3.05 s" in done.stderr
    assert "OTEL_EXPORTER_RUNS_CONTROL_PLANE_URL" in done.stderr


def test_process_verbose_shows_the_http_layers_warnings(cli: Cli, closed_port: int) -> None:
    done = cli("-v", "exports", "list", env={"OTEL_EXPORTER_RUNS_ENDPOINT": f"http://127.0.0.1:{closed_port}"})
    assert done.returncode == cli_module.EXIT_SERVER
    assert f"WARNING otel_runs_exporter._http_client: could not reach http://127.0.0.1:{closed_port}" in done.stderr


def test_quieting_the_library_is_undone_after_the_command(run_cli: Main, closed_port: int) -> None:
    import logging

    package = logging.getLogger("otel_runs_exporter")
    before = package.level
    rc, _, _ = run_cli("exports", "list", env={"OTEL_EXPORTER_RUNS_ENDPOINT": f"http://127.0.0.1:{closed_port}"})
    assert rc == cli_module.EXIT_SERVER
    assert package.level == before  # an embedding process (or the next test) keeps its logging


@pytest.mark.parametrize(
    ("option", "value", "says"),
    [
        ("--poll-interval", "-1", "expected a number of seconds, 0 or more, got '-1'"),
        ("--poll-interval", "0", "0 would poll without pause"),
        ("--timeout", "soon", "expected a number of seconds, 0 or more, got 'soon'"),
        ("--timeout", "nan", "expected a number of seconds, 0 or more, got 'nan'"),
    ],
)
def test_wait_timings_are_checked_as_arguments(run_cli: Main, svc: LocalService, option: str, value: str, says: str) -> None:
    rc, out, err = run_cli("exports", "wait", "some-export", option, value)
    assert rc == cli_module.EXIT_USAGE and says in err and out == ""
    assert svc.requests() == []  # refused before anything was sent


def test_wait_defaults_are_in_the_help(run_cli: Main) -> None:
    out = " ".join(run_cli("exports", "wait", "--help")[1].split())
    assert "(exit 13; default 3600)" in out and "seconds between polls (default 10)" in out
    out = " ".join(run_cli("deployments", "wait", "--help")[1].split())
    assert "(exit 13; default 900)" in out and "seconds between polls (default 5)" in out


def test_process_deployments_and_auth(cli: Cli, svc: LocalService) -> None:
    created = cli("deployments", "create", "--json-body", "-", "--json", stdin='{"name": "agent"}')
    assert created.returncode == 0, created.stderr
    deployment = json.loads(created.stdout)
    waited = cli("deployments", "wait", deployment["id"], "--json", *FAST)
    assert waited.returncode == 0, waited.stderr
    assert json.loads(waited.stdout)["status"] == "DEPLOYED" and "DEPLOYED" in waited.stderr

    token = "tok-cli-secret-42"
    auth = cli("auth", "wait", svc.control.auth.start(token=token), "--json")
    assert auth.returncode == 0 and json.loads(auth.stdout) == {"status": "completed", "token_present": True}
    assert token not in auth.stdout + auth.stderr


# --- in process ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("local", "advance", "code", "status"),
    [
        ({}, 0, cli_module.EXIT_OK, "COMPLETED"),
        ({"fail_runs": {"0": 21}}, 0, cli_module.EXIT_FAILED, "FAILED"),
        ({"run_seconds": 100 * 3600}, 73 * 3600, cli_module.EXIT_TIMEDOUT, "TIMEDOUT"),
    ],
)
def test_exports_wait_exit_code_per_final_status(
    run_cli: Main, svc: LocalService, local: dict, advance: float, code: int, status: str
) -> None:
    svc.control.clock.speed = 100_000
    export = svc.control.exports.create(export_body(days=2, **local))
    svc.control.clock.advance(advance)
    rc, out, err = run_cli("exports", "wait", export["id"], *FAST)
    assert rc == code, err
    assert out.strip() == f"export {export['id']}: {status}"
    assert status in err  # the progress line


def test_exports_cancel_then_wait_then_cancel_again(run_cli: Main, svc: LocalService) -> None:
    svc.control.clock.speed = 0
    export = svc.control.exports.create(export_body(days=1))
    rc, out, _ = run_cli("exports", "cancel", export["id"])
    assert rc == 0 and "CANCELLED" in out
    assert run_cli("exports", "wait", export["id"], *FAST)[0] == cli_module.EXIT_CANCELLED
    rc, _, err = run_cli("exports", "cancel", export["id"])
    assert rc == cli_module.EXIT_CONFLICT and "409" in err and "already CANCELLED" in err


def test_exports_list_get_runs_tables_and_json(run_cli: Main, svc: LocalService) -> None:
    svc.control.clock.speed = 0
    export = svc.control.exports.create(export_body(days=2, fail_runs={"1": 1}))
    svc.control.clock.advance(100)
    rc, out, _ = run_cli("exports", "list")
    assert rc == 0
    assert out.splitlines()[0].split() == ["ID", "STATUS", "CREATED", "RUNS"]
    assert export["id"] in out and "COMPLETED" in out and "2/2" in out
    assert json.loads(run_cli("exports", "get", export["id"], "--json")[1])["destination"]["bucket_name"] == "exports"
    rc, out, _ = run_cli("exports", "runs", export["id"])
    assert "2025-01-02" in out and "injected failure" in out
    runs = json.loads(run_cli("exports", "runs", export["id"], "--json")[1])
    assert list(runs[1]["errors"]) == ["retry_0"]
    assert json.loads(run_cli("exports", "list", "--json")[1])[0]["id"] == export["id"]


def test_error_exit_codes(run_cli: Main, svc: LocalService, tmp_path: Path) -> None:
    assert run_cli("exports", "get", "nope")[0] == cli_module.EXIT_NOT_FOUND
    rc, _, err = run_cli("exports", "list", env={"OTEL_EXPORTER_RUNS_ENDPOINT": "not a url"})
    assert rc == cli_module.EXIT_USAGE and "OTEL_EXPORTER_RUNS_ENDPOINT" in err
    rc, _, err = run_cli("deployments", "create", "--json-body", str(tmp_path / "missing.json"))
    assert rc == cli_module.EXIT_USAGE and "missing.json" in err
    assert all("/v2/" not in e["path"] for e in svc.requests())  # nothing was sent
    svc.control.fail_next(429, 503, retry_after=0.05)
    assert run_cli("deployments", "get", "d")[0] == cli_module.EXIT_NOT_FOUND  # the GET retried past both


def test_post_errors_map_to_their_codes(run_cli: Main, svc: LocalService, tmp_path: Path) -> None:
    body = tmp_path / "d.json"
    body.write_text('{"name": "x"}')
    for status, code in ((429, cli_module.EXIT_RATE_LIMITED), (503, cli_module.EXIT_SERVER), (403, cli_module.EXIT_UNAUTHORIZED)):
        svc.control.fail_next(status, retry_after=4)
        rc, _, err = run_cli("deployments", "create", "--json-body", str(body))
        assert rc == code, (status, err)
        assert f"answered {status}" in err
        if status == 429:
            assert "retry after 4s" in err


def test_deployments_create_wait_update_get(run_cli: Main, svc: LocalService, tmp_path: Path) -> None:
    body = tmp_path / "deployment.json"
    body.write_text(json.dumps({"name": "agent", "source": "github"}))
    rc, out, err = run_cli("deployments", "create", "--json-body", str(body), "--json")
    assert rc == 0, err
    deployment = json.loads(out)
    patch = tmp_path / "patch.json"
    patch.write_text(json.dumps({"source": "gitlab"}))
    rc, out, _ = run_cli("deployments", "update", deployment["id"], "--json-body", str(patch))
    assert rc == 0 and "LATEST REVISION" in out
    got = json.loads(run_cli("deployments", "get", deployment["id"], "--json")[1])
    assert got["source"] == "gitlab" and got["latest_revision_id"] != deployment["latest_revision_id"]
    rc, out, err = run_cli("deployments", "wait", deployment["id"], "--revision", deployment["latest_revision_id"], *FAST)
    assert rc == 0 and out.strip().endswith("DEPLOYED") and "revision" in err
    assert run_cli("deployments", "wait", deployment["id"], "--quiet", *FAST)[2] == ""


def test_deployments_failed_revision_and_invalid_body(run_cli: Main, svc: LocalService, tmp_path: Path) -> None:
    body = tmp_path / "broken.json"
    body.write_text('{"name": "x", "local": {"fail": "BUILD_FAILED"}}')
    deployment = json.loads(run_cli("deployments", "create", "--json-body", str(body), "--json")[1])
    rc, out, err = run_cli("deployments", "wait", deployment["id"], "--json", *FAST)
    assert rc == cli_module.EXIT_FAILED and "BUILD_FAILED" in err
    assert json.loads(out)["status"] == "BUILD_FAILED"
    rc, _, err = run_cli("deployments", "create")  # no name
    assert rc == cli_module.EXIT_INVALID
    first, summary, *body = err.splitlines()
    assert "POST /v2/deployments answered 422 Unprocessable" in first  # "Entity" or "Content", by Python version
    assert summary == "  body.name: Field required [missing]"
    assert json.loads("\n".join(body))["detail"][0]["loc"] == ["body", "name"]


@pytest.mark.parametrize(
    ("setup", "args", "code", "status"),
    [
        ("completed", (), cli_module.EXIT_OK, "completed"),
        ("pending", ("--timeout", "5"), cli_module.EXIT_WAIT_TIMEOUT, "pending"),
        ("expired", (), cli_module.EXIT_TIMEDOUT, "timeout"),
        ("missing", (), cli_module.EXIT_NOT_FOUND, "not_found"),
    ],
)
def test_auth_wait_outcomes(run_cli: Main, svc: LocalService, setup: str, args: tuple, code: int, status: str) -> None:
    token = "tok-cli-secret-42"
    if setup == "completed":
        auth_id = svc.control.auth.start(token=token)
    elif setup == "pending":
        auth_id = svc.control.auth.start(token=token, complete_after_s=None, expires_after_s=None)
    elif setup == "expired":
        auth_id = svc.control.auth.start(token=token, complete_after_s=None, expires_after_s=0)
    else:
        auth_id = "missing"
    rc, out, err = run_cli("auth", "wait", auth_id, "--json", *args)
    assert rc == code, err
    result = json.loads(out)
    assert result["status"] == status and result["token_present"] is (setup == "completed")
    assert token not in out + err  # hidden unless asked for
    rc, out, err = run_cli("auth", "wait", auth_id, *args)
    assert rc == code and f"status: {status}" in out and token not in out + err
    if setup == "completed":
        assert f"token:  {token}" in run_cli("auth", "wait", auth_id, "--show-token")[1]
        assert json.loads(run_cli("auth", "wait", auth_id, "--show-token", "--json")[1])["token"] == token


def test_auth_wait_non_integer_timeout_is_a_usage_error(run_cli: Main) -> None:
    rc, _, err = run_cli("auth", "wait", "x", "--timeout", "soon")
    assert rc == cli_module.EXIT_USAGE and "argument --timeout: a whole number, 0 or more (got 'soon')" in err


def test_help_documents_the_exit_codes(run_cli: Main) -> None:
    rc, out, _ = run_cli("exports", "wait", "--help")
    assert rc == 0
    for line in ("0  completed", "10  export FAILED", "11  export TIMEDOUT", "12  export CANCELLED", "13  --timeout ran out"):
        assert line in out
