"""The mapping's entry point: one pass over a span's keys, the plan they select, the tables applied.

:func:`map_span` takes a copy of a span's attributes and events and returns a
:class:`~._model.Mapped` value that ``_convert`` places into the run. It runs
once per span on the worker thread, so it makes one pass over the attributes
(prefix checks, no regexes), decodes JSON only for the attributes a row uses,
and settles most spans (HTTP, DB, app code), which carry nothing any row reads,
with one set test (:func:`reads_nothing`).
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

from .._parsed import ParsedJson
from ._apply import (
    find_documents, find_invocation_params, find_run_type, find_tags, find_usage, first_str, set_models, take_first,
)
from ._context import Ctx
from ._events import scan_events, with_event_attributes
from ._model import SPAN_EVENTS, Mapped, SpanEvent
from ._plan import Plan, plan_for
from ._readers import first_source
from ._tables import FLAT_PREFIXES, FRAMEWORK_NAMES, INDEXED_PREFIXES, TABLE_KEYS
from ._values import as_list, json_value, list_position, plain

__all__ = ["map_span", "reads_nothing", "read_keys"]


def map_span(attributes: Mapping[str, Any], events: Sequence[SpanEvent] = ()) -> Mapped:
    """Map a span's attributes and events to run fields.

    >>> m = map_span({"gen_ai.operation.name": "chat", "gen_ai.request.model": "m",
    ...               "gen_ai.input.messages": '[{"role": "user", "parts": [{"type": "text", "content": "hi"}]}]',
    ...               "gen_ai.usage.input_tokens": 3, "gen_ai.usage.output_tokens": 2})
    >>> (m.run_type, m.inputs, m.metadata["ls_model_name"])
    ('llm', {'messages': [{'role': 'user', 'content': 'hi'}]}, 'm')
    >>> m.outputs
    {'usage_metadata': {'input_tokens': 3, 'output_tokens': 2, 'total_tokens': 5}}
    """
    if not events and reads_nothing(attributes):
        return Mapped()  # most spans (HTTP, DB, app code) carry nothing these tables read
    return _map_span(attributes, events)


# Attribute keys seen on spans that no table reads. An app sets the same few
# keys on span after span, so one C-level subset test usually settles a span;
# the key facts (:func:`_key_facts`) are looked up only for keys not seen before.
# Bounded, so an app that puts ids in its keys cannot grow it forever (past the
# bound, new keys are checked every time, as before the cache).
_UNREAD_KEYS: set[str] = set()


_UNREAD_KEYS_MAX = 4096


def reads_nothing(attributes: Mapping[str, Any]) -> bool:
    """True when no table reads any of these attributes: dispatch by key would find none (:func:`read_keys`).

    (No row applies to such a span, so its mapping is ``Mapped()``: a test compares the two.)
    """
    unread = _UNREAD_KEYS
    if unread.issuperset(attributes):
        return True
    facts = _KEY_FACTS
    for key in attributes:
        if key not in unread:
            exact, prefix, _ = facts.get(key) or _key_facts(key)
            if exact or prefix:
                return False
    if len(unread) < _UNREAD_KEYS_MAX:
        unread.update(attributes)
    return True


def _family(key: str) -> tuple[str, str]:
    """The flattened family a key belongs to and the rest of the key, or ``("", "")``.

    ``gen_ai.prompt.0.content`` is ``("gen_ai.prompt.", "0.content")``; ``gen_ai.prompt.name``
    belongs to none (an indexed family's next segment must be a position).
    """
    if key.startswith(FLAT_PREFIXES):
        for prefix in FLAT_PREFIXES:
            if key.startswith(prefix):
                rest = key[len(prefix) :]
                if prefix not in INDEXED_PREFIXES or list_position(rest.partition(".")[0]) is not None:
                    return prefix, rest
                break
    return "", ""


#: What :func:`_read_keys` learnt of each key it saw: whether a row reads it by its
#: whole name, and its flattened family (:func:`_family`). An app sets the same keys
#: on span after span, so a key costs one lookup; bounded as ``_UNREAD_KEYS`` is.
_KEY_FACTS: dict[str, tuple[bool, str, str]] = {}


_KEY_FACTS_MAX = 4096


def _key_facts(key: str) -> tuple[bool, str, str]:
    prefix, rest = _family(key)
    facts = (key in _EXACT_KEYS, prefix, rest)
    if len(_KEY_FACTS) < _KEY_FACTS_MAX:
        _KEY_FACTS[key] = facts
    return facts


def read_keys(attributes: Mapping[str, Any], flat: dict[str, dict[str, Any]]) -> set[str]:
    """The one pass over a span's attributes: the keys a row reads by name, and the flattened
    families present (by prefix), whose members it groups into ``flat``."""
    found: set[str] = set()
    facts = _KEY_FACTS
    for key, value in attributes.items():
        exact, prefix, rest = facts.get(key) or _key_facts(key)
        if exact:
            found.add(key)
        if prefix:
            found.add(prefix)
            group = flat.get(prefix)
            if group is None:
                group = flat[prefix] = {}
            group[rest] = value
    return found


def _map_span(attributes: Mapping[str, Any], events: Sequence[SpanEvent], plan: Plan | None = None) -> Mapped:
    """:func:`map_span` past its shortcut; ``plan`` replaces the rows the span's keys select (the tests
    give every row, to check that the rows left out change nothing)."""
    out = Mapped()
    consumed = out.consumed
    if events:
        attributes = with_event_attributes(attributes, events, out.consumed_events)
    flat: dict[str, dict[str, Any]] = {}
    found = read_keys(attributes, flat)
    if events:
        found.add(SPAN_EVENTS)
    if plan is None:
        plan = plan_for(found)
    ctx = Ctx(attributes, consumed, flat, plan)
    if events:
        scan_events(ctx, events, out)

    out.run_type = find_run_type(attributes, consumed, plan)
    # Outputs first: when assistant/tool message events become the outputs, the inputs leave them out.
    run_type = ctx.run_type = out.run_type
    ctx.side = "out"
    out.outputs = first_source(ctx, plan.outputs, plan.outputs_run_types, run_type)[0]
    ctx.side = "in"
    out.inputs, row = first_source(ctx, plan.inputs, plan.inputs_run_types, run_type)
    out.inputs_final = row >= 0 and out.run_type in plan.inputs_final[row] and not ctx.partial_inputs
    reason = first_str(attributes, plan.finish_reason_keys)
    if reason:
        consumed.add(reason[0])
        if out.outputs is None or "finish_reason" not in out.outputs:
            out.outputs = _with(out.outputs, "finish_reason", reason[1], True)

    documents = find_documents(ctx) if plan.document_keys else None
    if documents is not None:
        given = (out.outputs or {}).get("documents")
        if isinstance(given, list) and len(given) == len(documents):
            # output.value's documents may carry the ids the flattened ones lack (OpenInference langchain)
            for doc, whole in zip(documents, given):
                if "id" not in doc and isinstance(whole, dict) and whole.get("id") is not None:
                    doc["id"] = whole["id"]
        out.outputs = _with(out.outputs, "documents", documents, False)
    if out.run_type == "retriever" and out.inputs is not None and list(out.inputs) == ["input"] and isinstance(out.inputs["input"], str):
        out.inputs = {"query": out.inputs["input"]}  # a retriever's text input is its query, as the SDK names it
    usage = find_usage(attributes, consumed, ctx.malformed, plan, out.outputs)
    if usage is not None:
        out.outputs = _with(out.outputs, "usage_metadata", usage, _whole_counts(usage))
    out.invocation_params, requested_model = find_invocation_params(ctx)
    outputs = out.outputs
    if outputs is not None and "messages" in outputs:  # our message shape; a producer's own payload stays as it is
        for key in plan.finish_reasons_array_keys:
            reasons = as_list(attributes.get(key))
            if not reasons or not isinstance(reasons[0], str):
                continue
            if "finish_reason" not in outputs:
                out.outputs = outputs = _with(outputs, "finish_reason", reasons[0], True)
            if len(reasons) == 1 and outputs["finish_reason"] == reasons[0]:
                consumed.add(key)  # said already; several choices' reasons stay in metadata
            break
    if out.first_token_time_ns is None:
        for key, seconds_per_unit in plan.first_chunk_after:
            after = attributes.get(key)
            if isinstance(after, (int, float)) and not isinstance(after, bool) and 0 <= after * seconds_per_unit < 86_400:
                out.first_token_after_s = float(after) * seconds_per_unit
                consumed.add(key)
                break

    metadata = out.metadata
    response_model = set_models(attributes, plan, requested_model, consumed, metadata)
    # Never a framework's own name (``FrameworkName``): unknown is left unset rather than guessed.
    provider = take_first(attributes, plan.provider_keys, consumed, FRAMEWORK_NAMES)
    if provider is not None:
        metadata["ls_provider"] = provider
    for key, target in plan.metadata_keys:
        value = attributes.get(key)
        if value is not None:
            metadata[target] = value
            consumed.add(key)
    for key in plan.metadata_object_keys:
        extra = json_value(attributes.get(key))
        if isinstance(extra, dict):
            metadata.update(extra)
            consumed.add(key)
    for prefix, decode in plan.metadata_prefixes:
        group = ctx.take_flat(prefix)
        if group:
            metadata.update((k, plain(json_value(v) if decode else v)) for k, v in group.items())
    # After the metadata: explicit metadata (the langsmith SDK's ls_model_name) names the requested model.
    if response_model is not None:
        if response_model != metadata.get("ls_model_name"):
            metadata["response_model"] = response_model
        else:
            metadata.pop("response_model", None)

    for key, named_type in plan.name_rules:
        if named_type is not None and run_type != named_type:
            continue
        name = attributes.get(key)
        if isinstance(name, str) and name:
            out.name = name
            consumed.add(key)
            break
    session = first_str(attributes, plan.session_name_keys) if plan.session_name_keys else None
    if session is not None:
        out.session_name = session[1]
        consumed.add(session[0])
    else:
        for key in plan.session_id_keys:
            session_id = attributes.get(key)
            if session_id not in (None, ""):
                out.session_id = session_id  # checked by _convert.span_ids, which can say when it is unusable
                consumed.add(key)
                break
    if plan.id_keys:
        consumed.update(k for k in plan.id_keys if k in attributes)
    out.tags = find_tags(attributes, consumed, plan.tag_keys) if plan.tag_keys else None
    out.malformed = ctx.malformed
    if plan.fixups:
        outputs = out.outputs
        if outputs is not None and type(outputs) is ParsedJson:
            out.outputs = dict(outputs)  # a producer's fixup may put in what JSON text could not hold
        for fix in plan.fixups:
            fix(out, attributes)
    return out


def _with(outputs: dict[str, Any] | None, key: str, value: Any, json_safe: bool) -> dict[str, Any]:
    """``outputs`` with ``key`` set, still a :class:`ParsedJson` when it was one and ``value`` is text or
    whole counts (nothing the encoder's NaN search could find)."""
    if json_safe and outputs is not None and type(outputs) is ParsedJson:
        marked: dict[str, Any] = ParsedJson(outputs)  # (typed: the compiled build sees ParsedJson as untyped)
        marked[key] = value
        return marked
    return {**(outputs or {}), key: value}


def _whole_counts(usage: dict[str, Any]) -> bool:
    """Whether a usage holds only whole numbers (a merged source may add a float: a cost, or a NaN)."""
    for value in usage.values():
        if type(value) is dict:
            if any(type(count) is not int for count in value.values()):
                return False
        elif type(value) is not int:
            return False
    return True


#: Every key a row reads by its whole name; the flattened families are told by prefix (:func:`_family`).
_EXACT_KEYS = TABLE_KEYS - frozenset(FLAT_PREFIXES)
