"""Helpers for tests, examples and offline tries: the local service in-process, and a fake LLM API.

With pytest, enable the fixture in a ``conftest.py``::

    pytest_plugins = ["otel_runs_exporter.testing"]

    def test_my_chain(local_service):
        exporter = RunsSpanExporter(endpoint=local_service.url, api_key="test")
        ...  # run the code under test and flush the exporter
        runs = local_service.wait_for_runs(3)
        assert {r["name"] for r in runs} == {"agent", "llm", "tool"}
        assert local_service.violations() == []

Without pytest, use the context manager::

    with run_local_service() as svc:
        ...

Each fixture use gets a fresh service on a free port with ``:memory:`` storage,
so tests do not see each other's runs.

Scripts that should run offline by default, yet send to a configured service
when there is one (the repository's ``examples/`` do this), use
:func:`local_service_unless_configured` and :func:`show_runs`::

    with local_service_unless_configured() as service:
        provider = configure()
        ...  # traced work
        provider.force_flush()
        show_runs(service, expected=3)

:class:`~otel_runs_exporter.testing.fake_llm.FakeLLMAPI` is an OpenAI-, Anthropic-
and Gemini-compatible HTTP API on loopback with deterministic answers, tool calls
and token counts, for trying the real client libraries and agent frameworks
without a network or an account.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Iterator
from typing import Any, TextIO
from urllib.parse import urlsplit, urlunsplit

from .. import environment_variables as ev
from .._settings import endpoint_variable
from ..server import FaultConfig, LocalService
from ..server._render import render_traces
from .fake_llm import FakeLLMAPI, RecordedRequest

__all__ = [
    "run_local_service",
    "local_service_unless_configured",
    "show_runs",
    "FaultConfig",
    "LocalService",
    "FakeLLMAPI",
    "RecordedRequest",
    "ENDPOINT_VAR",
]

ENDPOINT_VAR = ev.OTEL_EXPORTER_RUNS_ENDPOINT
"""The exporter's endpoint variable; :func:`local_service_unless_configured` reads it (through the settings
module, ``_settings.endpoint_variable``) and sets it."""


@contextlib.contextmanager
def run_local_service(**options: Any) -> Iterator[LocalService]:
    """Start a :class:`LocalService` on 127.0.0.1, a free port and ``:memory:`` storage; stop it on exit.

    ``options`` are passed to LocalService, e.g. ``faults=FaultConfig(rate_500=0.2, seed=1)``.
    The service is strict unless ``lenient=True`` or ``strict=False`` is passed: in a
    test, a run that breaks any rule is refused (422), not only what the hosted
    service would refuse, so what the exporter sends stays held to every rule.
    """
    options.setdefault("strict", not options.get("lenient", False))
    options.setdefault("host", "127.0.0.1")
    options.setdefault("port", 0)
    options.setdefault("db", ":memory:")
    service = LocalService(**options)
    service.start()
    try:
        yield service
    finally:
        service.stop()


@contextlib.contextmanager
def local_service_unless_configured(**options: Any) -> Iterator[LocalService | None]:
    """Yield None when ``OTEL_EXPORTER_RUNS_ENDPOINT`` is set; else start a local service and point it there.

    The variable is set to the started service's address for the duration of the
    block (and restored afterwards), so ``configure()``, ``RunsSpanExporter()`` and
    child processes started inside the block all send to it. ``options`` go to
    :func:`run_local_service`. A blank value counts as unset, as it does for the exporter.
    """
    if endpoint_variable() is not None:
        yield None
        return
    with run_local_service(**options) as service:
        # Setting the exporter's variable is this helper's job (the settings module only reads the
        # environment): the exporters and child processes started inside the block read it there.
        os.environ[ENDPOINT_VAR] = service.url
        try:
            yield service
        finally:
            os.environ.pop(ENDPOINT_VAR, None)


def show_runs(
    service: LocalService | None, expected: int = 1, timeout: float = 10.0, file: TextIO | None = None
) -> list[dict[str, Any]]:
    """Print the traces ``service`` stored (waiting for ``expected`` completed runs), or where the runs went.

    With ``service=None`` (the runs went to ``OTEL_EXPORTER_RUNS_ENDPOINT``) it prints
    that address and how to look there, and returns ``[]``. Otherwise it returns
    the runs it printed. Never prints credentials.
    """
    out = file if file is not None else sys.stdout
    if service is None:
        endpoint = _without_userinfo(endpoint_variable() or "")
        print(f"Runs sent to {endpoint}.", file=out)
        print("If that is `otel-runs serve`, look at them with:  otel-runs runs list", file=out)
        return []
    try:
        service.wait_for_runs(expected, timeout=timeout)
    except TimeoutError as exc:
        print(f"Not every run arrived: {exc}", file=out)
    runs = service.runs()
    print(f"The local service at {service.url} received {len(runs)} runs:\n", file=out)
    print(render_traces(runs) if runs else "(none)", file=out)
    violations = service.violations()
    if violations:
        print(f"\n{len(violations)} rule violations, first: {violations[0]['msg']}", file=out)
    print(
        "\nThis service stops with the script. To keep runs and browse them later: run `otel-runs serve`, "
        f"set {ENDPOINT_VAR}=http://127.0.0.1:1984, run again, then `otel-runs runs list`.",
        file=out,
    )
    return runs


def _without_userinfo(url: str) -> str:
    # A user:password@ in the address is a credential; the rest is safe to print.
    parts = urlsplit(url)
    if "@" not in parts.netloc:
        return url
    return urlunsplit(parts._replace(netloc=parts.netloc.rsplit("@", 1)[1]))


try:
    import pytest
except ImportError:  # pytest is only needed by users who use the fixture
    pass
else:

    @pytest.fixture
    def local_service() -> Iterator[LocalService]:
        """A running local service for one test; its ``url`` is the exporter's endpoint.

        For other options, write your own fixture around :func:`run_local_service`.
        """
        with run_local_service() as service:
            yield service
