"""Pure pieces of the local service: the multipart parser, the rate limiter and the fault draw."""

from __future__ import annotations

import pytest

from otel_runs_exporter.server._faults import FaultConfig
from otel_runs_exporter.server._multipart import MultipartError, boundary_from_content_type, parse
from otel_runs_exporter.server._ratelimit import DEFAULT_RULES, SPEC_RULES, RateLimiter, scaled
from otel_runs_exporter.server._validate import parse_timestamp


def _body(*parts: bytes, boundary: bytes = b"b") -> bytes:
    return b"".join(b"--" + boundary + b"\r\n" + p + b"\r\n" for p in parts) + b"--" + boundary + b"--\r\n"


def test_parser_reads_headers_and_parameters() -> None:
    body = _body(
        b'Content-Disposition: form-data; name="post.1"\r\nContent-Type: application/json; length=2\r\n'
        b"Content-Length: 2\r\n\r\n{}",
        b'Content-Disposition: form-data; name="attachment.1.f"; filename="a.bin"\r\n'
        b"Content-Type: application/octet-stream\r\n\r\n\r\n--not-the-boundary\r\n",
    )
    first, second = parse(body, "b")
    assert (first.name, first.media_type, first.params, first.declared_length) == (
        "post.1", "application/json", {"length": "2"}, 2
    )
    assert second.filename == "a.bin" and second.content == b"\r\n--not-the-boundary\r\n"


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (b"junk--b\r\n", "does not start"),
        (_body(b"Content-Type: application/json\r\n\r\n{}"), "missing Content-Disposition"),
        (_body(b'Content-Disposition: attachment; name="x"\r\n\r\n{}'), "expected form-data"),
        (_body(b"Content-Disposition: form-data\r\n\r\n{}"), "has no name"),
        (_body(b'Content-Disposition: form-data; name="x"\r\nContent-Length: two\r\n\r\n{}'), "not a number"),
        (_body(b'Content-Disposition: form-data; name="x"\r\n folded\r\n\r\n{}'), "folded"),
        (_body(b'Content-Disposition: form-data; name="x"\r\nX: 1\r\nx: 2\r\n\r\n{}'), "appears twice"),
        (b'--b\r\nContent-Disposition: form-data; name="x"\r\n\r\n{}', "no closing boundary"),
    ],
)
def test_parser_errors_say_what_is_wrong(body: bytes, message: str) -> None:
    with pytest.raises(MultipartError, match=message):
        parse(body, "b")


@pytest.mark.parametrize(
    ("header", "ok"),
    [
        ('multipart/form-data; boundary="quoted b"', "quoted b"),
        ("Multipart/Form-Data; Boundary=abc", "abc"),
        ("multipart/mixed; boundary=abc", None),
        ("multipart/form-data; boundary=" + "x" * 71, None),
        (None, None),
    ],
)
def test_boundary_from_content_type(header: str | None, ok: str | None) -> None:
    if ok is None:
        with pytest.raises(MultipartError):
            boundary_from_content_type(header)
    else:
        assert boundary_from_content_type(header) == ok


def test_timestamps() -> None:
    a = parse_timestamp("2025-01-02T03:04:05.123456789Z")
    b = parse_timestamp("2025-01-02T05:04:05.123456+02:00")
    assert a == b and a is not None and a.microsecond == 123456
    assert parse_timestamp("2025-01-02 03:04:05") is not None
    assert parse_timestamp("2025-01-02") is None
    assert parse_timestamp(1735787045) is None


class _Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_rate_limits_follow_the_table_keys_and_precedence() -> None:
    clock = _Clock()
    limiter = RateLimiter(clock=clock)
    key = {"x-api-key": "k"}
    # multipart counts against its own 6000/10, not the 1000/10 default
    (rule, ident), = limiter.applicable("POST", "/runs/multipart", key, "1.2.3.4")
    assert (rule.category, rule.count, ident) == ("Multipart ingest", 6000, "k")
    # basic tracing is keyed by API key at 2000/10
    assert limiter.applicable("PATCH", "/runs/abc", key, "ip")[0][0].category == "Run ingest"
    # no API key on an ingest path: the user default, then the IP catch-all
    assert limiter.applicable("POST", "/runs", {"x-user-id": "u"}, "ip")[0][1] == "u@ip"
    assert limiter.applicable("POST", "/runs", {}, "ip")[0][0].category == "Public (catch-all)"
    # /info is keyed by IP whatever the headers
    assert limiter.applicable("GET", "/info", key, "ip")[0][1] == "ip"
    # run query has both an API key and a user rule
    both = limiter.applicable("POST", "/runs/query", {"x-api-key": "k", "x-user-id": "u"}, "ip")
    assert [r.category for r, _ in both] == ["Run query (API)", "Run query (User)"]


def test_rate_limit_window_and_retry_after() -> None:
    clock = _Clock()
    limiter = RateLimiter(clock=clock)
    key = {"x-api-key": "k"}
    for _ in range(15):
        assert limiter.hit("POST", "/runs/query", key, "ip") is None
    refusal = limiter.hit("POST", "/runs/query", key, "ip")
    assert refusal is not None and refusal.retry_after == 10
    clock.now += 7.5
    refusal = limiter.hit("POST", "/runs/query", key, "ip")
    assert refusal is not None and refusal.retry_after == 3
    clock.now += 3
    assert limiter.hit("POST", "/runs/query", key, "ip") is None


def test_scaled_limits_divide_counts_and_windows_and_keep_the_precedence() -> None:
    rules, defaults = scaled(SPEC_RULES, 200), scaled(DEFAULT_RULES, 200)
    by_category = {r.category: r for r in rules}
    assert (by_category["Multipart ingest"].count, by_category["Multipart ingest"].interval) == (30, 10.0)
    assert by_category["Run query (API)"].count == 1  # 15 / 200: at least one request
    assert [(r.count, r.interval) for r in scaled(defaults, 1, 10)] == [(5, 1.0), (5, 1.0), (1, 6.0)]
    clock = _Clock()
    limiter = RateLimiter(rules, defaults, clock=clock)
    key = {"x-api-key": "k"}
    # The specific rule wins: multipart gets its 30, not also the default's 5.
    assert all(limiter.hit("POST", "/runs/multipart", key, "ip") is None for _ in range(30))
    refusal = limiter.hit("POST", "/runs/multipart", key, "ip")
    assert refusal is not None and refusal.rule.category == "Multipart ingest" and refusal.retry_after == 10
    with pytest.raises(ValueError):
        scaled(SPEC_RULES, 0)


def test_fault_draw_is_seeded_and_updatable() -> None:
    def draws(config: FaultConfig) -> list[str]:
        return [config.decide().reason for _ in range(50)]

    a = draws(FaultConfig(rate_500=0.2, rate_429=0.2, rate_drop=0.2, seed=3))
    b = draws(FaultConfig(rate_500=0.2, rate_429=0.2, rate_drop=0.2, seed=3))
    assert a == b and {"rate_500", "rate_429", "rate_drop", ""} == set(a)
    config = FaultConfig(rate_500=1.0, seed=1)
    config.seed = 2  # a new seed restarts the sequence
    assert config.decide().status == 500
    with pytest.raises(AttributeError):
        config.update(rate_typo=1.0)
    config.clear()
    assert not config.active and config.decide().action == "serve"


def test_reject_run_ids_accepts_either_id_form() -> None:
    config = FaultConfig(reject_run_ids={"0190a0b0c0d07000800000000000abcd"})
    assert config.rejected({"0190a0b0-c0d0-7000-8000-00000000abcd", "other"}) == [
        "0190a0b0-c0d0-7000-8000-00000000abcd"
    ]


@pytest.mark.parametrize("module", ["cli", "demo"])
def test_cli_and_demo_use_only_the_public_surface_of_server(module: str) -> None:
    """The local service's private modules can be reshaped without touching its users in the package."""
    import ast
    import importlib
    from pathlib import Path

    import otel_runs_exporter.server as server

    user = importlib.import_module(f"otel_runs_exporter.{module}")
    # A package (cli/) is read module by module.
    files = sorted(Path(user.__path__[0]).glob("*.py")) if hasattr(user, "__path__") else [Path(str(user.__file__))]
    imported: set[str] = set()
    for node in (node for path in files for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))):
        if isinstance(node, ast.ImportFrom) and node.module and "server" in node.module.split("."):
            assert node.module in ("server", "otel_runs_exporter.server"), f"{module} imports {node.module}"
            imported |= {alias.name for alias in node.names}
        elif isinstance(node, ast.Import):
            assert not any("server._" in alias.name for alias in node.names)
    assert imported and imported <= set(server.__all__), imported - set(server.__all__)
    assert all(hasattr(server, name) for name in server.__all__)
