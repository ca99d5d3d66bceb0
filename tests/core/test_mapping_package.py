"""The mapping package's own rules: what marks a span as GenAI, what a row may write, how big a module may grow."""

from __future__ import annotations

import doctest
import importlib
import pkgutil
from pathlib import Path

import pytest
from opentelemetry.sdk.trace import TracerProvider

from otel_runs_exporter import _cost, mapping
from otel_runs_exporter._select import KEEP, ROOT, SpanFilter
from otel_runs_exporter.mapping import _tables
from otel_runs_exporter.mapping._model import Attr, attr, reads_of

MODULES = sorted(info.name for info in pkgutil.iter_modules(mapping.__path__) if info.name != "__main__")
#: Keys the mapping reads that are too common to mark a span as GenAI by themselves (the issue's list).
GENERIC = ("input.value", "output.value", "metadata", "session.id", "user.id", "tag.tags", "tool.name")


def _verdict(attributes: dict[str, str]) -> int:
    span = TracerProvider().get_tracer("app.code").start_span("work", attributes=attributes)
    return SpanFilter(genai_only=True).verdict(span)


@pytest.mark.parametrize("key", sorted(_tables.MARKING_KEYS))
def test_every_marking_key_keeps_its_span(key):
    assert _verdict({key: "x"}) == KEEP


@pytest.mark.parametrize("prefix", _tables.MARKING_PREFIXES)
def test_every_key_under_a_marking_prefix_keeps_its_span(prefix):
    assert _verdict({prefix + "0.anything": "x"}) == KEEP


@pytest.mark.parametrize("key", sorted(set(GENERIC) | _tables.GENERIC_KEYS))
def test_a_generic_key_the_mapping_reads_does_not_keep_its_span(key):
    assert key in _tables.TABLE_KEYS, f"{key} is not read by any row: the test no longer says anything"
    assert _verdict({key: "x"}) == ROOT


def test_each_key_is_marking_or_generic_in_every_row_that_reads_it():
    seen: dict[str, set[bool]] = {}
    for row in _tables.ROWS:
        for key in reads_of(row):
            seen.setdefault(key.name, set()).add(key.marks)
    assert {name for name, marks in seen.items() if len(marks) > 1} == set()


def test_every_usage_key_the_mapping_writes_is_one_a_cost_reads():
    written = {".".join(path) for path in _tables.USAGE_PATHS}
    assert written <= _cost.USAGE_KEYS, written - _cost.USAGE_KEYS
    roles = [row.roles["usage"] for row in _tables.ROWS if isinstance(row, Attr) and "usage" in row.roles]
    paths = {path for role in roles for path, _ in (role if isinstance(role, list) else [role])}
    assert paths and paths <= set(_tables.USAGE_PATHS), paths - set(_tables.USAGE_PATHS)


def test_no_two_rows_of_a_table_share_a_place_in_its_order():
    places: dict[tuple, list] = {}
    for row in _tables.ROWS:
        if isinstance(row, Attr):
            for role, value in row.roles.items():
                for one in value if isinstance(value, list) else [value]:
                    if role == "family":
                        continue  # no order: a family is a family
                    place = one if isinstance(one, int) else one[-1]
                    table = (role, one[0]) if role == "usage" else (role,)
                    places.setdefault(table + (place,), []).append(row.key.name)
        elif getattr(row, "order", None) is not None:
            places.setdefault((type(row).__name__, getattr(row, "side", None), row.order), []).append(row)
    assert [rows for rows in places.values() if len(rows) > 1] == []


def test_a_row_with_a_role_that_does_not_exist_is_refused_at_import():
    with pytest.raises(ValueError, match="no such role"):
        attr("x.y", provder=10)


def test_every_producer_declares_rows_and_scopes():
    for producer in _tables.PRODUCERS:
        assert producer.ROWS, producer.__name__
        assert all(isinstance(prefix, str) and prefix for prefix, _ in producer.SCOPES), producer.__name__


@pytest.mark.parametrize("name", MODULES)
def test_each_module_reads_in_one_sitting(name):
    lines = len((Path(mapping.__file__).parent / f"{name}.py").read_text(encoding="utf-8").splitlines())
    assert lines <= 600, f"mapping/{name}.py has {lines} lines"


@pytest.mark.parametrize("name", MODULES)
def test_doctests(name):
    assert doctest.testmod(importlib.import_module(f"otel_runs_exporter.mapping.{name}")).failed == 0


def test_the_compiled_build_compiles_every_module_of_the_mapping():
    from otel_runs_exporter._build_info import COMPILABLE

    assert {f"mapping.{name}" for name in MODULES} == {name for name in COMPILABLE if name.startswith("mapping.")}


def test_docs_mapping_lists_every_row_as_the_tables_assemble_them():
    from otel_runs_exporter.mapping import __main__ as generator

    text = generator.DOC.read_text(encoding="utf-8")
    assert text == generator.written(text), "docs/mapping.md is stale: run python -m otel_runs_exporter.mapping"
    assert "`gen_ai.server.time_to_first_token` | strands" in text  # the block is really the rows
