"""Dispatch by key: the rows of each table that a span's read keys can fire (:class:`Plan`).

A span carries a dozen attributes; the tables read some 150 keys and 15 key
families. Rather than probe every row against the attributes, ``_dispatch``
walks the attributes once and applies only the rows of the keys it found, in
each table's own order: a row whose keys are all absent does nothing, so
skipping it changes nothing. Spans of one instrumentation share a plan (cached
by their set of read keys). A test maps spans with every row as well
(:data:`EVERY_ROW`) and wants the same result.
"""

from __future__ import annotations

from typing import Sequence

from . import _tables as t
from ._logfire import LOGFIRE_REQUEST
from ._model import FixupFn, Reader

__all__ = ["Plan", "plan_for", "every_row"]


def _having(found: frozenset[str], keys: Sequence[str]) -> tuple[str, ...]:
    return tuple(key for key in keys if key in found)


class Plan:
    """The rows of each table that a span's read keys can fire, each table's order kept.

    A flag (``documents``, ``session`` ...) gates a step that looks its keys up itself, so a
    plan that sets every flag maps as the tables do without dispatch.
    """

    __slots__ = (
        "outputs", "outputs_run_types", "inputs", "inputs_final", "inputs_run_types", "run_type_rules", "run_type_presence", "model_keys", "finish_reason_keys",
        "usage_fields", "usage_objects", "param_object_keys", "param_fields", "request_model_keys",
        "response_model_keys", "provider_keys", "metadata_keys", "name_rules", "tag_keys", "id_keys", "document_keys",
        "finish_reasons_array_keys", "first_chunk_after", "metadata_object_keys", "metadata_prefixes",
        "provider_usage", "logfire_request", "session_name_keys", "session_id_keys", "fixups",
    )

    def __init__(self, found: frozenset[str]) -> None:
        outputs = [i for i, reads in enumerate(t.OUTPUT_READS) if not found.isdisjoint(reads)]
        self.outputs: tuple[tuple[Reader, str], ...] = tuple(t.OUTPUT_SOURCES[i] for i in outputs)
        self.outputs_run_types: tuple[frozenset[str], ...] = tuple(t.OUTPUT_RUN_TYPES[i] for i in outputs)
        inputs = [i for i, reads in enumerate(t.INPUT_READS) if not found.isdisjoint(reads)]
        self.inputs: tuple[tuple[Reader, str], ...] = tuple(t.INPUT_SOURCES[i][:2] for i in inputs)
        self.inputs_final: tuple[frozenset[str], ...] = tuple(t.INPUT_SOURCES[i][2] for i in inputs)
        self.inputs_run_types: tuple[frozenset[str], ...] = tuple(t.INPUT_RUN_TYPES[i] for i in inputs)
        self.run_type_rules = tuple(row for row in t.RUN_TYPE_RULES if row[0] in found)
        self.run_type_presence = tuple(row for row in t.RUN_TYPE_PRESENCE if row[0] in found)
        self.model_keys = _having(found, t.MODEL_KEYS)
        self.finish_reason_keys = _having(found, t.FINISH_REASON_KEYS)
        self.usage_fields = tuple(
            (path, _having(found, keys)) for path, keys in t.USAGE_FIELDS if not found.isdisjoint(keys)
        )
        self.usage_objects = tuple(row for row in t.USAGE_OBJECTS if row[0] is None or row[0] in found)
        self.provider_usage = not found.isdisjoint(t.PROVIDER_USAGE_KEYS)
        self.logfire_request = LOGFIRE_REQUEST in found
        self.param_object_keys = _having(found, t.PARAM_OBJECT_KEYS)
        self.param_fields = tuple(row for row in t.PARAM_FIELDS if row[0] in found)
        self.request_model_keys = _having(found, t.REQUEST_MODEL_KEYS)
        self.response_model_keys = _having(found, t.RESPONSE_MODEL_KEYS)
        self.provider_keys = _having(found, t.PROVIDER_KEYS)
        self.metadata_keys = tuple(row for row in t.METADATA_KEYS if row[0] in found)
        self.name_rules = tuple(row for row in t.NAME_RULES if row[0] in found)
        self.tag_keys = _having(found, t.TAG_KEYS)
        # Consumed as they are: the ids place the run (``_convert``), the rest the run says already.
        self.id_keys = _having(found, t.ID_KEYS + t.SAID_ELSEWHERE_KEYS)
        self.document_keys = _having(found, t.DOCUMENT_KEYS)
        self.finish_reasons_array_keys = _having(found, t.FINISH_REASONS_ARRAY_KEYS)
        self.first_chunk_after: tuple[tuple[str, float], ...] = tuple(
            row for row in t.FIRST_CHUNK_AFTER if row[0] in found
        )
        self.metadata_object_keys = _having(found, t.METADATA_OBJECT_KEYS)
        self.metadata_prefixes: tuple[tuple[str, bool], ...] = tuple(
            row for row in t.METADATA_PREFIXES if row[0] in found
        )
        self.session_name_keys = _having(found, t.SESSION_NAME_KEYS)
        self.session_id_keys = _having(found, t.SESSION_ID_KEYS)
        self.fixups: tuple[FixupFn, ...] = tuple(fix for fix, reads in t.FIXUPS if not reads or not found.isdisjoint(reads))


_PLANS: dict[frozenset[str], Plan] = {}
#: Distinct sets of read keys are few (one or two per instrumentation's span kind); starting over past this is cheap.
_PLANS_MAX = 512


def plan_for(found: set[str]) -> Plan:
    """The plan for a span whose read keys are ``found`` (cached)."""
    key = frozenset(found)
    plan = _PLANS.get(key)
    if plan is None:
        if len(_PLANS) >= _PLANS_MAX:
            _PLANS.clear()
        plan = _PLANS[key] = Plan(key)
    return plan


def every_row() -> Plan:
    """A plan with every row of every table, whatever keys a span has (each row then probes its own keys)."""
    from ._model import SPAN_EVENTS

    return Plan(t.TABLE_KEYS | {SPAN_EVENTS})
