"""Settings: precedence, parsing, errors that name the variable, no secret in reprs."""

from __future__ import annotations

import logging
import sys

import pytest

from otel_runs_exporter import ConfigError, RunsSpanExporter, RunsSpanProcessor
from otel_runs_exporter._settings import EU_ENDPOINT, US_ENDPOINT, parse_headers, resolve, check_usable

from core.helpers import processor_provider


def test_defaults():
    s = resolve(env={})
    assert s.endpoint == US_ENDPOINT and s.project == "default" and s.mode == "auto"
    assert s.session == {"session_name": "default"}
    assert s.schedule_delay_s < 1.0


def test_precedence_argument_then_otel_then_langsmith_then_default():
    env = {
        "OTEL_EXPORTER_RUNS_PROJECT": "otel",
        "LANGSMITH_PROJECT": "ls",
        "LANGSMITH_API_KEY": "ls-key",
        "LANGSMITH_ENDPOINT": "http://ls.example",
    }
    assert resolve({"project": "arg"}, env=env).project == "arg"
    assert resolve({}, env=env).project == "otel"
    s = resolve({}, env={k: v for k, v in env.items() if not k.startswith("OTEL")})
    assert s.project == "ls" and s.api_key == "ls-key" and s.endpoint == "http://ls.example"


def test_region_applies_only_without_an_endpoint():
    assert resolve(env={"OTEL_EXPORTER_RUNS_REGION": "eu"}).endpoint == EU_ENDPOINT
    env = {"OTEL_EXPORTER_RUNS_REGION": "eu", "OTEL_EXPORTER_RUNS_ENDPOINT": "https://self.host/api/v1/"}
    assert resolve(env=env).endpoint == "https://self.host/api/v1"


def test_project_id_replaces_session_name():
    s = resolve(env={"OTEL_EXPORTER_RUNS_PROJECT_ID": "abc", "OTEL_EXPORTER_RUNS_PROJECT": "x"})
    assert s.session == {"session_id": "abc"}


def test_bsp_variables_are_honoured():
    s = resolve(
        env={
            "OTEL_BSP_SCHEDULE_DELAY": "1500",
            "OTEL_BSP_MAX_QUEUE_SIZE": "7",
            "OTEL_BSP_MAX_EXPORT_BATCH_SIZE": "3",
            "OTEL_BSP_EXPORT_TIMEOUT": "2500",
            "OTEL_SDK_DISABLED": "true",
        }
    )
    assert (s.schedule_delay_s, s.max_queue_size, s.max_export_batch_size, s.export_timeout_s, s.disabled) == (
        1.5,
        7,
        3,
        2.5,
        True,
    )


# What each exporter setting is when its variable is malformed (one ERROR line either way). Tuning: a safe
# default exists, and it is used (OpenTelemetry's convention: tracing goes on). Essential: where the runs go,
# who sends them, and the switches that keep content or everything from being sent; no default is safe, so
# the app runs untraced (resolve_for_app), and resolve() itself raises for callers that asked (the CLI).
ESSENTIAL_SETTINGS = {
    "endpoint", "control_plane_url", "region", "api_key", "bearer_token", "workspace_id", "project", "project_id",
    "headers", "certificate", "client_certificate", "client_key", "hide_inputs", "hide_outputs", "scrub_secrets",
    "capture_log_events", "disabled", "mask",
}


def test_every_setting_is_classified_tuning_or_essential():
    from otel_runs_exporter._settings import _DECLS, ESSENTIAL, TUNING

    assert {name for name, decl in _DECLS.items() if decl.kind == ESSENTIAL} == ESSENTIAL_SETTINGS
    assert {decl.kind for decl in _DECLS.values()} == {ESSENTIAL, TUNING}


def _tuning_with_a_variable() -> list[str]:
    from otel_runs_exporter._settings import _DECLS, TUNING

    # spool_dir is tuning too; a malformed directory is made by test_worker (this value would be created here).
    # blocked_scopes is a list of scope names, and any text is a name: no value of it is malformed.
    skipped = {"spool_dir", "blocked_scopes"}
    return [n for n, d in _DECLS.items() if d.kind == TUNING and d.env and d.read is None and n not in skipped]


@pytest.mark.parametrize("name", _tuning_with_a_variable())
def test_a_malformed_tuning_variable_is_one_error_line_naming_it_and_the_default_and_the_default_is_used(name, caplog):
    from otel_runs_exporter._settings import _DECLS, spelled_default

    decl = _DECLS[name]
    var = decl.env[0]
    with caplog.at_level(logging.WARNING, logger="otel_runs_exporter"):
        settings = resolve(env={var: "ten?"})
    assert getattr(settings, name) == decl.default and not settings.disabled
    warned = [r.getMessage() for r in caplog.records]
    assert len(warned) == 1 and caplog.records[0].levelno == logging.ERROR, warned
    assert warned[0].startswith(f"{var}='ten?' is not valid: expected ")
    assert warned[0].endswith("; " + (decl.fallback or f"using the default, {spelled_default(decl)}")), warned[0]
    # The default as the variable spells it (milliseconds for OTel's BSP variables) reads back as the default
    # (a setting off by default, such as prices, has no value to spell).
    if decl.default is not None:
        assert decl.parse(spelled_default(decl)) == decl.default


def test_the_default_named_in_the_warning_is_in_the_variables_units():
    assert [resolve(env={"OTEL_BSP_SCHEDULE_DELAY": "soon"}).schedule_delay_s] == [0.2]
    from otel_runs_exporter._settings import _DECLS, spelled_default

    assert spelled_default(_DECLS["schedule_delay_s"]) == "200"  # milliseconds, as the variable takes them
    assert spelled_default(_DECLS["timeout_s"]) == "10"
    assert spelled_default(_DECLS["langsmith_bridge"]) == "true"


@pytest.mark.parametrize(
    ("var", "value", "expected"),
    [
        ("OTEL_EXPORTER_RUNS_ENDPOINT", "ftp://x", "http:// or https://"),
        ("OTEL_EXPORTER_RUNS_CONTROL_PLANE_URL", "host:1", "http:// or https://"),
        ("OTEL_EXPORTER_RUNS_REGION", "asia", "one of us, eu"),
        ("OTEL_EXPORTER_RUNS_HEADERS", "novalue", "key=value"),
        ("OTEL_EXPORTER_RUNS_CERTIFICATE", "/no/such/ca.pem", "readable PEM file"),
        ("OTEL_EXPORTER_RUNS_HIDE_INPUTS", "please", "true or false"),
        ("OTEL_EXPORTER_RUNS_SCRUB_SECRETS", "please", "true or false"),
        ("OTEL_EXPORTER_RUNS_CAPTURE_LOG_EVENTS", "nah", "true or false"),
        ("OTEL_SDK_DISABLED", "maybe", "true or false"),
    ],
)
def test_a_malformed_essential_variable_leaves_the_app_untraced_saying_which_and_what_is_expected(
    var, value, expected, caplog
):
    from otel_runs_exporter import EnvironmentConfigError, _settings
    from otel_runs_exporter._settings import resolve_for_app

    # Asked for the settings (the CLI, the API client): an error naming the variable and what it expects.
    with pytest.raises(EnvironmentConfigError) as info:
        resolve(env={var: value})
    assert var in str(info.value) and expected in str(info.value) and info.value.variables == {var}
    # Inside an app: one ERROR line, and nothing recorded or sent, never a default in its place.
    _settings._bad_env_log.reset()
    with caplog.at_level(logging.ERROR, logger="otel_runs_exporter"):
        settings = resolve_for_app(env={var: value, "OTEL_EXPORTER_RUNS_TIMEOUT": "7"})
    assert settings.disabled and settings.timeout_s == 7.0  # the rest as the environment says
    (record,) = caplog.records
    assert record.levelno == logging.ERROR and record.getMessage().startswith(var)
    assert expected in record.getMessage() and record.getMessage().endswith("tracing is off and the app runs untraced (no default is safe here)")
    # A value passed in code is a mistake where it is written.
    name = next(n for n, d in _settings._DECLS.items() if var in d.env)
    with pytest.raises(ConfigError, match=f"argument {name}"):
        resolve_for_app({name: value}, env={})


def test_every_malformed_essential_variable_is_said_not_only_the_first(caplog):
    from otel_runs_exporter import _settings
    from otel_runs_exporter._settings import resolve_for_app

    _settings._bad_env_log.reset()
    env = {"OTEL_EXPORTER_RUNS_REGION": "asia", "OTEL_EXPORTER_RUNS_HEADERS": "x-token-sk-secret", "OTEL_EXPORTER_RUNS_ENDPOINT": "h:1"}
    with caplog.at_level(logging.ERROR, logger="otel_runs_exporter"):
        assert resolve_for_app(env=env).disabled
    said = [r.getMessage() for r in caplog.records]
    assert sorted(line.split("=")[0].split(" ")[0] for line in said) == sorted(env)
    assert not any("x-token-sk-secret" in line for line in said)  # headers may hold a secret: never shown


@pytest.mark.parametrize(
    ("name", "value", "expected"),
    [
        ("timeout_s", "ten", "seconds, greater than 0, at most 10000000"),
        ("max_queue_size", "0", "a whole number greater than 0"),
        ("mode", "fast", "one of auto, multipart, basic"),
        ("schedule_delay_s", "-5", "milliseconds, 0 or more, at most 10000000000"),
        # Typed values were stored as given: max_queue_size=0 dropped every run, timeout_s=-1 lost
        # its run in a traceback from requests, max_export_batch_size=-3 made every flush fail.
        ("max_queue_size", 0, "a whole number greater than 0"),
        ("max_queue_size", -1, "a whole number greater than 0"),
        ("max_export_batch_size", -3, "a whole number greater than 0"),
        ("max_queue_size", 2.5, "a whole number greater than 0"),
        ("max_queue_size", True, "a whole number greater than 0"),
        ("max_value_chars", -1, "a whole number of 0 or more"),
        ("timeout_s", -1.0, "seconds, greater than 0, at most 10000000"),
        ("timeout_s", 0, "seconds, greater than 0, at most 10000000"),
        ("timeout_s", float("nan"), "seconds, greater than 0, at most 10000000"),
        ("timeout_s", float("inf"), "seconds, greater than 0, at most 10000000"),
        ("export_timeout_s", -5.0, "seconds, 0 or more, at most 10000000"),
        ("schedule_delay_s", -1.0, "seconds, 0 or more, at most 10000000"),
        ("retry_backoff", (2.0, 1.0), "two numbers of seconds, (first, cap), with 0 < first <= cap, at most 10000000"),
        ("retry_backoff", (0, 1.0), "two numbers of seconds, (first, cap), with 0 < first <= cap, at most 10000000"),
        # Past ~292 years a wait raised OverflowError: in force_flush, or in the worker, which died.
        ("export_timeout_s", 1e13, "seconds, 0 or more, at most 10000000"),
        ("schedule_delay_s", "10000000000000", "milliseconds, 0 or more, at most 10000000000"),
        ("retry_backoff", (1.0, 1e12), "two numbers of seconds, (first, cap), with 0 < first <= cap, at most 10000000"),
        ("hide_inputs", "maybe", "true or false"),
        ("hide_inputs", 1, "true, false or a function"),
        ("scrub_secrets", 1, "true or false"),
        ("mode", 3, "text"),
        ("spans", "everything", "one of all, genai"),
        ("sample_rate", 1.5, "a number from 0 to 1"),
        ("sample_rate", -0.1, "a number from 0 to 1"),
        ("sample_rate", "half", "a number from 0 to 1"),
        ("keep_slower_than_s", -1.0, "seconds, 0 or more (0: off), at most 10000000"),
        ("sample_hold_max_s", 0, "seconds, greater than 0, at most 10000000"),
        ("blocked_scopes", 5, "scope names, none blank, as a list or comma-separated text"),
        # An empty prefix matches every scope: it left every span out.
        ("blocked_scopes", ("opentelemetry.instrumentation.requests", ""), "scope names, none blank, as a list or comma-separated text"),
        ("blocked_scopes", [" "], "scope names, none blank, as a list or comma-separated text"),
        ("should_export", True, "a function span -> bool"),
    ],
)
def test_a_malformed_tuning_argument_is_still_a_config_error(name, value, expected):
    """A typo in code fails where it is written; only the environment gets the default."""
    with pytest.raises(ConfigError) as info:
        resolve({name: value}, env={})
    assert f"argument {name}={value!r} is not valid: expected {expected}" == str(info.value)
    with pytest.raises(ConfigError, match=f"argument {name}="):
        RunsSpanProcessor(endpoint="http://127.0.0.1:9", **{name: value})


def test_typed_arguments_in_range_are_taken_as_given():
    settings = resolve(
        {"max_queue_size": 5, "max_value_chars": 0, "timeout_s": 0.5, "export_timeout_s": 0, "schedule_delay_s": 0.05,
         "retry_backoff": [0.1, 2], "hide_inputs": True, "mode": "basic"},
        env={},
    )
    assert (settings.max_queue_size, settings.max_value_chars, settings.timeout_s, settings.export_timeout_s) == (5, 0, 0.5, 0)
    assert (settings.schedule_delay_s, settings.retry_backoff, settings.hide_inputs) == (0.05, (0.1, 2), True)


def test_a_malformed_secret_is_refused_without_being_shown():
    header = "authorization=Bearer%20sk-secret-777,oops"
    for source in ({}, {"headers": header}):
        with pytest.raises(ConfigError) as info:
            resolve(source, env={"OTEL_EXPORTER_RUNS_HEADERS": header})
        assert "sk-secret-777" not in str(info.value) and "oops" not in str(info.value)
        assert "HEADERS" in str(info.value) or "headers" in str(info.value)
        assert "not shown" in str(info.value) and "key=value" in str(info.value)


def test_credentials_and_headers_are_what_an_http_header_can_carry():
    """Found by an audit: a key read from a file keeps its newline; given in code it was sent as it
    was, every request failed with InvalidHeader as if the service were down, retried for the export
    timeout, and the app's shutdown waited 29 s. The same for headers={"x-a": 1} or a line break."""
    settings = resolve({"api_key": "sk-from-a-file\n", "workspace_id": " ws-1 ", "headers": {"X-Team": " blue "}}, env={})
    assert (settings.api_key, settings.workspace_id, settings.headers) == ("sk-from-a-file", "ws-1", {"x-team": "blue"})
    bad = [
        {"api_key": "sk-secret-1\r\nx-evil: 1"},
        {"api_key": b"sk-secret-1"},
        {"bearer_token": "tok-secret-1\x00"},
        {"headers": {"x-a": 1}},
        {"headers": {"x a": "sk-secret-1"}},
        {"headers": {"x-a": "sk-secret-1\nmore"}},
        {"headers": "x-a=sk-secret-1%0Amore"},
    ]
    for arguments in bad:
        with pytest.raises(ConfigError) as info:
            resolve(arguments, env={})
        message, name = str(info.value), next(iter(arguments))
        assert f"argument {name} is not valid" in message and ("HTTP header" in message or "expected text" in message), message
        assert "sk-secret" not in message and "tok-secret" not in message, message
    with pytest.raises(ConfigError) as info:
        resolve({}, env={"OTEL_EXPORTER_RUNS_API_KEY": "sk-secret-2\x07"})
    assert "OTEL_EXPORTER_RUNS_API_KEY" in str(info.value) and "sk-secret-2" not in str(info.value)
    non_latin = {"workspace_id": "w\u20ac"}  # UnicodeEncodeError on every request, "retried"
    with pytest.raises(ConfigError, match="workspace_id"):
        resolve(non_latin, env={})


def test_waits_given_to_flush_and_shutdown_are_bounded_not_an_overflow(service):
    """force_flush(sys.maxsize) means "as long as it takes": it raised OverflowError into the app."""
    provider, processor = processor_provider(service.url)
    with provider.get_tracer("t").start_as_current_span("x"):
        pass
    assert processor.force_flush(sys.maxsize) is True and processor.force_flush(float("inf")) is True
    assert processor.force_flush(float("nan")) is False
    processor.shutdown(sys.maxsize)
    exporter = RunsSpanExporter(endpoint=service.url, api_key="k")
    assert exporter.force_flush(sys.maxsize) is True
    exporter.shutdown(sys.maxsize)
    assert [r["name"] for r in service.wait_for_runs(1)] == ["x"]


def test_unknown_argument_is_an_error():
    with pytest.raises(ConfigError, match="unknown setting"):
        resolve({"projcet": "x"}, env={})


def test_headers_parse_like_otel():
    assert parse_headers("A=1,b = two%20words , ") == {"a": "1", "b": "two words"}


def test_api_key_never_in_repr():
    s = resolve({"api_key": "sk-secret-123", "headers": "authorization=Bearer%20tok-9"}, env={})
    assert "sk-secret-123" not in repr(s) and "tok-9" not in repr(s)
    for obj in (RunsSpanExporter(settings=s), RunsSpanProcessor(settings=s)):
        assert "sk-secret-123" not in repr(obj)
        obj.shutdown(timeout_millis=100) if isinstance(obj, RunsSpanProcessor) else obj.shutdown()


def test_a_password_in_the_endpoint_is_never_shown(caplog):
    """Found by an audit: http://user:pw@host was shown whole in reprs, in "could not reach" lines and
    in the client's "no answer from" errors (the route hint already left it out)."""
    from opentelemetry.sdk.trace import TracerProvider

    from otel_runs_exporter.api import NoAnswerError, ServiceClient

    endpoint = "http://user:pw-secret-5@127.0.0.1:9"
    shown: list[str] = []
    with caplog.at_level(logging.DEBUG, logger="otel_runs_exporter"):
        settings = resolve({"endpoint": endpoint, "api_key": "k", "export_timeout_s": 0.5}, env={})
        processor = RunsSpanProcessor(settings=settings)
        provider = TracerProvider()
        provider.add_span_processor(processor)
        with provider.get_tracer("t").start_as_current_span("x"):
            pass
        processor.force_flush(1_000)
        client = ServiceClient(endpoint=endpoint, call_timeout_s=1)
        shown += [repr(settings), repr(processor), repr(RunsSpanExporter(settings=settings)), repr(client)]
        with pytest.raises(NoAnswerError) as info:
            client.list_exports()
        shown.append(str(info.value))
        provider.shutdown()
    shown += [record.getMessage() for record in caplog.records]
    assert any("127.0.0.1:9" in text for text in shown)
    assert not [text for text in shown if "pw-secret-5" in text or "user:" in text]


def test_missing_key_for_remote_endpoint_warns_once(caplog):
    with caplog.at_level(logging.WARNING, logger="otel_runs_exporter"):
        check_usable(resolve(env={}))
        check_usable(resolve({"endpoint": "http://127.0.0.1:9"}, env={}))
    assert [r.message for r in caplog.records if "No API key" in r.message] and len(caplog.records) == 1


def test_plain_http_with_key_to_remote_host_warns(caplog):
    with caplog.at_level(logging.WARNING, logger="otel_runs_exporter"):
        check_usable(resolve({"endpoint": "http://example.com", "api_key": "sk-x"}, env={}))
    assert any("plain HTTP" in r.message for r in caplog.records)
    assert not any("sk-x" in r.getMessage() for r in caplog.records)


def test_control_plane_follows_the_region_unless_given():
    from otel_runs_exporter._settings import EU_CONTROL_PLANE, US_CONTROL_PLANE

    assert resolve(env={}).control_plane_url == US_CONTROL_PLANE
    assert resolve(env={"OTEL_EXPORTER_RUNS_REGION": "eu"}).control_plane_url == EU_CONTROL_PLANE
    assert resolve(env={"OTEL_EXPORTER_RUNS_CONTROL_PLANE_URL": "http://127.0.0.1:5/"}).control_plane_url == "http://127.0.0.1:5"


def test_bearer_token_never_in_repr():
    s = resolve({"bearer_token": "tok-secret"}, env={})
    assert "tok-secret" not in repr(s) and "bearer_token=<set>" in repr(s)


def test_env_var_constants_match_the_declaration_tables_and_the_docs():
    from pathlib import Path

    from otel_runs_exporter import environment_variables as ev
    from otel_runs_exporter._settings import _DECLS, _INSTRUMENTATION_DECLS, _SERVICE_DECLS

    exporter = {name for decl in _DECLS.values() for name in decl.env}
    service = {name for decl in _SERVICE_DECLS.values() for name in decl.env}
    instrumentation = {name for decl in _INSTRUMENTATION_DECLS.values() for name in decl.env}
    tables = (exporter, service, instrumentation)
    assert all(not a & b for i, a in enumerate(tables) for b in tables[i + 1 :])  # each declared once
    # Every constant is read through a table, or only set (by the module whose job that is).
    assert set(ev.ALL) == exporter | service | instrumentation | set(ev.WRITTEN)
    assert all(getattr(ev, name) == name for name in ev.ALL)
    root = Path(__file__).resolve().parents[2]
    settings_doc = (root / "docs" / "settings.md").read_text(encoding="utf-8")
    # Each variable the exporter and the instrumentation read is named in the settings' doc.
    assert sorted(name for name in exporter | instrumentation if f"`{name}`" not in settings_doc) == []
    # The local service command's variables are documented with the command.
    local_service = (root / "docs" / "local-service.md").read_text(encoding="utf-8")
    assert sorted(name for name in service if name not in local_service) == []


def test_service_settings_read_the_environment_once_and_keep_the_key_out_of_the_repr():
    from otel_runs_exporter._settings import resolve_service

    s = resolve_service({"OTEL_RUNS_SERVER_DB": "/x/y.db", "OTEL_RUNS_SERVER_API_KEY": "srv-secret"})
    assert (s.db_path, s.api_key) == ("/x/y.db", "srv-secret") and "srv-secret" not in repr(s)
    assert resolve_service({"XDG_DATA_HOME": "/data", "OTEL_RUNS_SERVER_DB": " "}).db_path == "/data/otel-runs/runs.db"
    assert resolve_service({}).db_path.endswith(".local/share/otel-runs/runs.db")
    assert resolve_service({"OTEL_RUNS_SERVER_API_KEY": ""}).api_key is None


@pytest.mark.parametrize(
    ("env", "sdk_otel"),
    [
        ({}, False),
        ({"LANGSMITH_OTEL_ENABLED": "true"}, True),
        ({"LANGSMITH_OTEL_ENABLED": "1"}, True),
        ({"LANGSMITH_OTEL_ENABLED": "false"}, False),
        ({"LANGSMITH_OTEL_ENABLED": "maybe"}, False),  # the SDK's own reading: not "true" or "1"
        ({"LANGSMITH_OTEL_ONLY": "true"}, True),
        ({"LANGCHAIN_OTEL_ENABLED": "true"}, True),
        ({"LANGCHAIN_OTEL_ONLY": "TRUE"}, True),
        ({"LANGSMITH_TRACING_MODE": "otel"}, True),
        ({"LANGSMITH_TRACING_MODE": "Hybrid"}, True),
        ({"LANGCHAIN_TRACING_MODE": "otel"}, True),
        ({"LANGSMITH_TRACING_MODE": "langsmith", "LANGSMITH_OTEL_ENABLED": "true"}, False),  # the mode wins
        ({"LANGSMITH_OTEL_ENABLED": " ", "LANGCHAIN_OTEL_ENABLED": "true"}, True),  # blank is unset
    ],
)
def test_the_sdks_otel_mode_is_read_by_the_sdks_rules(env, sdk_otel):
    # The bridge must stay off whenever the SDK sends through OTel, however the user switched that on.
    assert resolve(env=env).langsmith_otel_enabled is sdk_otel
    assert resolve({"langsmith_otel_enabled": not sdk_otel}, env=env).langsmith_otel_enabled is (not sdk_otel)


def _constant_docs() -> dict[str, str | None]:
    """Each constant of environment_variables and the docstring under it (None: none), read as Sphinx reads them."""
    import ast
    import inspect

    from otel_runs_exporter import environment_variables as ev

    body = ast.parse(inspect.getsource(ev)).body
    docs: dict[str, str | None] = {}
    for statement, after in zip(body, body[1:] + [None]):
        if isinstance(statement, (ast.Assign, ast.AnnAssign)):
            target = statement.targets[0] if isinstance(statement, ast.Assign) else statement.target
            if isinstance(target, ast.Name) and target.id.isupper():
                is_doc = isinstance(after, ast.Expr) and isinstance(after.value, ast.Constant)
                docs[target.id] = after.value.value if is_doc and isinstance(after.value.value, str) else None
    return docs


def test_every_env_var_constant_has_its_doc_naming_the_setting_it_feeds():
    """As in OpenTelemetry's environment_variables: a docstring under each constant, an ``envvar`` entry."""
    from otel_runs_exporter import environment_variables as ev
    from otel_runs_exporter._settings import _DECLS, _INSTRUMENTATION_DECLS, _SERVICE_DECLS

    docs = _constant_docs()
    assert set(ev.ALL) <= set(docs)
    assert sorted(name for name in ev.ALL if not docs[name]) == []
    assert sorted(name for name in ev.ALL if f".. envvar:: {name}\n" not in docs[name]) == []
    # The doc names the setting the table feeds from the variable, so the two cannot drift apart.
    wrong = [
        (var, setting)
        for table in (_DECLS, _SERVICE_DECLS, _INSTRUMENTATION_DECLS)
        for setting, decl in table.items()
        for var in decl.env
        if f"``{setting}``" not in docs[var]
    ]
    assert wrong == []
    assert docs["ALL"] and docs["WRITTEN"]


def test_only_the_settings_module_reads_the_environment():
    """Reads of os.environ (get, [], in, getenv, copy) are in _settings only; the two modules whose job
    it is may set variables (setdefault, [] =, pop), and environment_variables.WRITTEN lists what."""
    import ast
    from pathlib import Path

    import otel_runs_exporter

    package = Path(otel_runs_exporter.__file__).parent
    writes = {"setdefault", "pop"}
    reads: list[str] = []
    writers: set[str] = set()
    for path in sorted(package.rglob("*.py")):
        relative = path.relative_to(package).as_posix()
        if relative == "_settings.py":
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        parents = {child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute) and node.attr == "getenv":
                reads.append(f"{relative}:{node.lineno}")
            if not (isinstance(node, ast.Attribute) and node.attr == "environ"):
                continue
            parent = parents.get(node)
            if isinstance(parent, ast.Attribute) and parent.attr in writes:
                writers.add(relative)
            elif isinstance(parent, ast.Subscript) and isinstance(parent.ctx, ast.Store):
                writers.add(relative)
            else:
                reads.append(f"{relative}:{node.lineno}")
    assert reads == []
    assert writers == {"autoconfig.py", "testing/__init__.py"}


def test_instrumentation_settings_read_otels_variables_with_otels_meaning_and_never_refuse():
    from otel_runs_exporter._settings import resolve_instrumentation

    capture = "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"
    assert resolve_instrumentation({}).capture_content is True
    assert resolve_instrumentation({capture: " "}).capture_content is True  # blank is unset
    for off in ("false", "0", "No", "OFF", "NO_CONTENT", "event_only"):
        assert resolve_instrumentation({capture: off}).capture_content is False
    for on in ("true", "span_only", "SPAN_AND_EVENT", "maybe"):
        assert resolve_instrumentation({capture: on}).capture_content is True
    assert resolve_instrumentation({"OTEL_TRACES_EXPORTER": " otlp ,,runs"}).traces_exporter == ("otlp", "runs")
    assert resolve_instrumentation({"OTEL_TRACES_EXPORTER": ""}).traces_exporter == ()


def test_the_endpoint_variable_is_the_exporters_own_and_not_its_fallback():
    from otel_runs_exporter._settings import endpoint_variable

    assert endpoint_variable({"OTEL_EXPORTER_RUNS_ENDPOINT": "http://h:1"}) == "http://h:1"
    assert endpoint_variable({"OTEL_EXPORTER_RUNS_ENDPOINT": "  "}) is None
    assert endpoint_variable({"LANGSMITH_ENDPOINT": "https://api.smith.langchain.com"}) is None
