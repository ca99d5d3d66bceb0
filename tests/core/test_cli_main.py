"""``python -m otel_runs_exporter`` is ``otel-runs``; a count, port or delay below its range is a usage error.

Every number option of the commands outside ``runs`` (whose module has its own test) is
listed here with a value below its range: argparse refuses it (exit 2) with one line naming
the option, what it expects and what was given, before anything runs. Before, ``serve
--port -1`` died in a traceback from ``bind()`` and ``auth wait --timeout -5`` asked the
service to wait -5 s.
"""

from __future__ import annotations

import subprocess
import sys

import pytest

from otel_runs_exporter.cli import build_parser, main


def test_python_dash_m_is_the_otel_runs_command(capsys: pytest.CaptureFixture[str]) -> None:
    via_module = subprocess.run(
        [sys.executable, "-m", "otel_runs_exporter", "--version"], capture_output=True, text=True, timeout=60
    )
    with pytest.raises(SystemExit) as exited:
        main(["--version"])  # what the console script runs (``otel-runs = otel_runs_exporter.cli:main``)
    assert via_module.returncode == exited.value.code == 0, via_module.stderr
    assert via_module.stdout == capsys.readouterr().out and via_module.stdout.startswith("otel-runs ")


@pytest.mark.parametrize(
    "argv, option, expected",
    [
        (["serve", "--port", "-1"], "--port", "a port number from 0 to 65535 (0 picks a free one) (got '-1')"),
        (["serve", "--port", "70000"], "--port", "a port number from 0 to 65535 (0 picks a free one) (got '70000')"),
        (["demo", "--port", "-3"], "--port", "a port number from 0 to 65535 (0 picks a free one) (got '-3')"),
        (["serve", "--max-body-bytes", "-3"], "--max-body-bytes", "a whole number greater than 0 (got '-3')"),
        (["serve", "--max-body-bytes", "0"], "--max-body-bytes", "a whole number greater than 0 (got '0')"),
        (["serve", "--max-connections", "-3"], "--max-connections", "a whole number greater than 0 (got '-3')"),
        (["serve", "--min-body-rate", "-3"], "--min-body-rate", "a whole number, 0 or more (got '-3')"),
        (["serve", "--fault-slow-seconds", "-3"], "--fault-slow-seconds", "expected a number of seconds, 0 or more, got '-3'"),
        (["auth", "wait", "a1", "--timeout", "-5"], "--timeout", "a whole number, 0 or more (got '-5')"),
        (["auth", "wait", "a1", "--timeout", "ten"], "--timeout", "a whole number, 0 or more (got 'ten')"),
        (["exports", "wait", "e1", "--poll-interval", "-1"], "--poll-interval", "expected a number of seconds, 0 or more, got '-1'"),
        # Before: "invalid _positive value: 'abc'", naming a private function and not what is expected.
        (["serve", "--head-timeout", "abc"], "--head-timeout", "expected a number greater than 0, got 'abc'"),
        (["serve", "--fault-rate-500", "x"], "--fault-rate-500", "expected a probability from 0 to 1, got 'x'"),
        (["runs", "list", "--since", "99999999d"], "--since", "'99999999d' reaches back before year 1; give a shorter time"),
    ],
)
def test_a_negative_count_is_refused_naming_the_option(
    argv: list[str], option: str, expected: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exited:
        build_parser().parse_args(argv)  # parsing only: a value let through must not start a service
    assert exited.value.code == 2
    err = capsys.readouterr().err
    assert f"argument {option}: {expected}" in err, err


def test_the_edges_of_each_range_are_accepted() -> None:
    parse = build_parser().parse_args
    assert parse(["serve", "--port", "0"]).port == 0
    assert parse(["serve", "--port", "65535", "--max-body-bytes", "1", "--fault-slow-seconds", "0"]).port == 65535
    assert parse(["demo", "--port", "1984"]).port == 1984
    assert parse(["auth", "wait", "a1", "--timeout", "0"]).timeout == 0
