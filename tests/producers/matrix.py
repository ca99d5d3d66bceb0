"""The producer matrix's test side: run a producer app, read both services, check a table.

Each ``test_<producer>.py`` module runs its app (``apps/<producer>.py``) in its
own process against the fake model API and two local services (one per path,
see ``app_harness``), then:

* :func:`assert_same_runs`: the processor path and the exporter path stored the
  same runs, field for field, whatever moments the processor path posted at;
* :func:`check_rows`: the stored runs hold the module's table of expected
  fields, one row per field and run, under every flush plan. A row whose
  expected value is :class:`NA` is a field the producer never emits: it is
  listed as a known limit in the README's "Works with" table, and
  ``test_matrix_readme.py`` checks the two agree.

A row is ``(field, run, path, expected)``: ``run`` picks a run of the plan's
trace (``"name"`` or ``"name#2"``: the first or second run of that name in tree
order; ``"type:llm#3"``: the third llm run; ``"trace"``: the whole trace, whose
paths are ``tree`` and ``run_types``); ``path`` is dotted keys and list
positions into the stored run (``outputs.messages.0.tool_calls``); ``expected``
is a value compared with ``==`` or a matcher (:class:`Contains`, :class:`Json`,
:class:`Present`, :class:`Absent`).
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable

import pytest

from otel_runs_exporter.server import LocalService
from otel_runs_exporter.testing.fake_llm import FakeLLMAPI

HERE = Path(__file__).resolve().parent
APPS = HERE / "apps"
#: The second environment's pins: producers whose pins the test extra cannot hold (.ci/run's own step).
ENV2 = "tests/producers/requirements-env2.txt"

#: Every producer's table names each of these at least once, as a value or as NA.
REQUIRED_FIELDS = (
    "tree",
    "run_types",
    "input_messages",
    "output_messages",
    "tool_calls",
    "tool_results",
    "usage",
    "usage_details",
    "model",
    "provider",
    "error",
    "first_token",
    "tool_definitions",
)

PLANS = ("start", "random")

# Fields the service fills in, not the client: they may differ between the two services.
_SERVICE_FIELDS = frozenset({"session_id", "received_at", "status", "extra_posts"})


@dataclass(frozen=True)
class NA:
    """A field this producer never emits: a known limit, with the reason."""

    reason: str


@dataclass(frozen=True)
class Contains:
    """A string that contains ``text``."""

    text: str

    def matches(self, value: Any) -> bool:
        return isinstance(value, str) and self.text in value


@dataclass(frozen=True)
class Json:
    """A JSON string that decodes to ``value`` (producers format arguments differently)."""

    value: Any

    def matches(self, value: Any) -> bool:
        try:
            return isinstance(value, str) and json.loads(value) == self.value
        except ValueError:
            return False


@dataclass(frozen=True)
class Present:
    """Any value but None."""

    def matches(self, value: Any) -> bool:
        return value is not None


@dataclass(frozen=True)
class Absent:
    """No value at all: the field must not be stored (a producer that names no provider gets none invented)."""

    def matches(self, value: Any) -> bool:
        return value is None


@dataclass(frozen=True)
class Like:
    """Compared after normalizing: dicts compared key by key with matchers inside."""

    value: Any

    def matches(self, value: Any) -> bool:
        return _like(self.value, value)


def _like(expected: Any, actual: Any) -> bool:
    if hasattr(expected, "matches"):
        return bool(expected.matches(actual))
    if isinstance(expected, dict):
        return (
            isinstance(actual, dict)
            and set(expected) == set(actual)
            and all(_like(v, actual[k]) for k, v in expected.items())
        )
    if isinstance(expected, list):
        return (
            isinstance(actual, list) and len(expected) == len(actual) and all(map(_like, expected, actual))
        )
    return bool(expected == actual)


Row = tuple[str, str, str, Any]


@dataclass
class Stored:
    """What one app run left at the two services, and the app's own report."""

    processor: list[dict[str, Any]]
    exporter: list[dict[str, Any]]
    report: dict[str, Any]
    #: Runs the processor path patched: each was posted while its span was still open.
    patched: frozenset[str] = frozenset()

    def plan(self, name: str, path: str = "processor") -> list[dict[str, Any]]:
        """The runs of one flush plan's trace, in tree order."""
        runs = self.processor if path == "processor" else self.exporter
        roots = [r for r in runs if r["name"] == f"plan:{name}"]
        assert len(roots) == 1, f"{len(roots)} roots named plan:{name} at the {path} path's service"
        trace = roots[0]["trace_id"]
        return sorted((r for r in runs if r["trace_id"] == trace), key=lambda r: r["dotted_order"])


def _installed(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except ModuleNotFoundError:  # a dotted name whose parent package is missing
        return False


def skip_unless_installed(*modules: str) -> None:
    """Skip a second-environment producer where its packages are not installed (the default run)."""
    missing = [m for m in modules if not _installed(m)]
    if missing and os.environ.get("MATRIX_ENV2") == "required":  # .ci/run's step: a skip would hide a bad install
        pytest.fail(f"{', '.join(missing)} not installed in the second environment ({ENV2})")
    if missing:
        pytest.skip(f"{', '.join(missing)} not installed: this producer runs in the second environment "
                    f"(pip install -r {ENV2}; .ci/run's own step)")


def run_app(
    app: str,
    fake: FakeLLMAPI,
    processor_service: LocalService,
    exporter_service: LocalService,
    *,
    env: dict[str, str] | None = None,
    seed: int | None = None,
    timeout: float = 90.0,
) -> Stored:
    """Run ``apps/<app>.py`` in its own process and wait until both services hold every run it made."""
    processor_service.reset()
    exporter_service.reset()
    seed = int(os.environ.get("MATRIX_SEED", "0")) or seed or int(time.time() * 1000) % 100_000
    child_env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("OTEL_", "LANGSMITH_", "LANGCHAIN_", "OPENAI_", "ANTHROPIC_", "TRACELOOP_", "LOGFIRE_",
                               "GOOGLE_", "GEMINI_", "STRANDS_", "LLAMA_INDEX_", "AWS_", "HF_"))
    }
    src = str(HERE.parent.parent / "src")
    child_env.update(
        {
            "PYTHONPATH": os.pathsep.join([str(HERE), src, child_env.get("PYTHONPATH", "")]),
            "MATRIX_SEED": str(seed),
            "MATRIX_PROCESSOR_URL": processor_service.url,
            "MATRIX_EXPORTER_URL": exporter_service.url,
            "OPENAI_BASE_URL": fake.openai_base_url,
            "OPENAI_API_KEY": "test",
            "ANTHROPIC_BASE_URL": fake.anthropic_base_url,
            "ANTHROPIC_API_KEY": "test",
            "GOOGLE_GEMINI_BASE_URL": fake.gemini_base_url,
            "GOOGLE_API_KEY": "test",
            # No producer may call home or pick up another instrumentor from the environment.
            "OTEL_PYTHON_DISABLED_INSTRUMENTATIONS": "*",
            "TRACELOOP_TELEMETRY": "false",
            # smolagents imports huggingface_hub: never reach the Hub.
            "HF_HUB_OFFLINE": "1",
            "HF_HUB_DISABLE_TELEMETRY": "1",
            "LANGSMITH_TRACING": "false",
        }
    )
    child_env.update(env or {})
    proc = subprocess.run(
        [sys.executable, str(APPS / f"{app}.py")],
        env=child_env,
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=str(HERE),
    )
    lines = [line for line in proc.stdout.splitlines() if line.startswith("MATRIX ")]
    where = f"app {app} (seed {seed}; rerun with MATRIX_SEED={seed})"
    assert proc.returncode == 0 and lines, (
        f"{where} exited {proc.returncode}\nstdout:\n{proc.stdout[-3000:]}\nstderr:\n{proc.stderr[-6000:]}"
    )
    report = json.loads(lines[-1][len("MATRIX ") :])
    report["stderr"] = proc.stderr
    for path in ("processor", "exporter"):
        stats = report[path]
        assert not stats["dropped"] and stats["queued"] == 0, f"{where}: the {path} path dropped runs: {stats}"
    created = report["processor"]["created"]
    processor_runs = processor_service.wait_for_runs(created, timeout=15)
    exporter_runs = exporter_service.wait_for_runs(report["exporter"]["created"], timeout=15)
    for service in (processor_service, exporter_service):
        assert service.violations() == [], f"{where}: {service.violations()[:3]}"
    patched = frozenset(
        name.split(".")[1]
        for entry in processor_service.requests()
        for name in entry.get("part_names") or ()
        if name.startswith("patch.")
    )
    return Stored(processor_runs, exporter_runs, report, patched)


def run_in_content_mode(app: str, mode: str, fake: FakeLLMAPI, services: tuple[LocalService, LocalService]) -> Stored:
    """An OpenTelemetry GenAI instrumentation's app with its content capture set to ``mode``
    (``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT``: ``span_only``, ``event_only``), named in its report."""
    stored = run_app(app, fake, *services, env={"OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT": mode})
    stored.report["content_mode"] = mode
    return stored


def _comparable(run: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in run.items() if k not in _SERVICE_FIELDS}


def assert_same_runs(stored: Stored) -> None:
    """The property: a run as stored does not depend on when the processor path posted it.

    It proves something only if the processor path did post runs early: under the
    ``start`` plan every span with a child was open at a flush, so each was posted
    then and patched at its end.
    """
    parents = {r["parent_run_id"] for r in stored.plan("start") if r.get("parent_run_id")}
    assert parents and parents <= stored.patched, (
        f"runs with children in the start plan that were not posted early: {sorted(parents - stored.patched)[:5]}"
    )
    by_id = {r["id"]: r for r in stored.exporter}
    assert sorted(by_id) == sorted(r["id"] for r in stored.processor), "the two paths stored different runs"
    seed = stored.report["seed"]
    for run in stored.processor:
        other = by_id[run["id"]]
        mine, theirs = _comparable(run), _comparable(other)
        if mine != theirs:
            diff = {
                k: {"processor": mine.get(k), "exporter": theirs.get(k)}
                for k in sorted(set(mine) | set(theirs))
                if mine.get(k) != theirs.get(k)
            }
            raise AssertionError(
                f"run {run['name']!r} differs between the paths (seed {seed}; rerun with MATRIX_SEED={seed}): "
                + json.dumps(diff, indent=1, default=str)[:6000]
            )


#: OpenInference's attributes the mapping reads into the run's provider and model.
OPENINFERENCE_CONSUMED = ("llm.system", "llm.provider", "llm.model_name")


def assert_log_events_joined(stored: Stored, joined: int) -> None:
    """Every GenAI log event the app emitted reached its run on both paths: ``joined`` of them, none dropped or held."""
    for path in ("processor", "exporter"):
        stats = stored.report[path]
        assert stats["log_events_dropped"] == {} and stats["log_events_held"] == 0, stats
        assert stats["log_events_joined"] == joined, stats


def _pick(runs: list[dict[str, Any]], selector: str) -> dict[str, Any]:
    name, _, nth = selector.partition("#")
    index = int(nth or "1") - 1
    if name.startswith("type:"):
        matches = [r for r in runs if r["run_type"] == name[len("type:") :]]
    else:
        matches = [r for r in runs if r["name"] == name]
    if index >= len(matches):
        raise LookupError(f"no run {selector!r} in the trace (runs: {[r['name'] for r in runs]})")
    return matches[index]


_MISSING = object()


def _get(value: Any, path: str) -> Any:
    for key in path.split("."):
        if isinstance(value, list) and key.isdigit():
            value = value[int(key)] if int(key) < len(value) else _MISSING
        elif isinstance(value, dict):
            value = value.get(key, _MISSING)
        else:
            value = _MISSING
        if value is _MISSING:
            return _MISSING
    return value


def tree(runs: list[dict[str, Any]]) -> list[tuple[int, str, str]]:
    """(depth below the plan's root, run type, name) in tree order, the root left out."""
    base = runs[0]["dotted_order"].count(".")
    return [(r["dotted_order"].count(".") - base - 1, r["run_type"], r["name"]) for r in runs[1:]]


def _parents_hold(runs: list[dict[str, Any]]) -> bool:
    ids = {r["id"] for r in runs}
    return all(r.get("parent_run_id") in ids for r in runs[1:])


def check_rows(stored: Stored, rows: Iterable[Row], *, consumed: Iterable[str] = ()) -> None:
    """Every row holds for every flush plan; all mismatches are reported at once.

    ``consumed``: attributes the mapping reads into a field (the README: not repeated in
    a run's metadata); any run that still has one in its metadata is a mismatch.
    """
    consumed = set(consumed)
    rows = list(rows)
    named = {field for field, *_ in rows}
    missing = [f for f in REQUIRED_FIELDS if f not in named]
    assert not missing, f"the table names no row for {missing} (use NA('why') for a field never emitted)"
    problems: list[str] = []
    for plan in PLANS:
        runs = stored.plan(plan)
        if not _parents_hold(runs):
            problems.append(f"[{plan}] a run's parent is not in its trace")
        for run in runs[1:]:
            if repeated := consumed & set((run.get("extra") or {}).get("metadata") or {}):
                problems.append(f"[{plan}] {run['name']}: {sorted(repeated)} repeated in metadata")
        for field, selector, path, expected in rows:
            if isinstance(expected, NA):
                continue
            if selector == "trace":
                actual: Any = tree(runs) if path == "tree" else [(d, t) for d, t, _ in tree(runs)]
            else:
                try:
                    actual = _get(_pick(runs, selector), path)
                except LookupError as exc:
                    problems.append(f"[{plan}] {field}: {exc}")
                    continue
            if isinstance(expected, Absent) and actual is _MISSING:
                continue
            if actual is _MISSING or not _like(expected, actual):
                shown = "<absent>" if actual is _MISSING else json.dumps(actual, default=str)[:800]
                problems.append(f"[{plan}] {field} ({selector} {path}): expected {expected!r}, stored {shown}")
    seed = stored.report["seed"]
    assert not problems, f"seed {seed} (rerun with MATRIX_SEED={seed}):\n" + "\n".join(problems)


def known_limits(rows: Iterable[Row]) -> dict[str, str]:
    """field -> reason, for the NA rows of a table (the README lists them)."""
    return {field: expected.reason for field, _, _, expected in rows if isinstance(expected, NA)}
