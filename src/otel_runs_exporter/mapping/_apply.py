"""The appliers of the plain tables: run type, usage, invocation params, models, documents, tags.

Each takes the rows of its table that the span's keys select (:class:`~._plan.Plan`),
in precedence order, and the span's attributes; none of them raises on a value
of the wrong type (it is reported in ``malformed`` and kept in metadata).
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

from ._context import Ctx
from ._genai import LIST_PARAMS, PARAM_PREFIX, PARAM_RENAMES
from ._langsmith import langsmith_sdk_usage_object
from ._logfire import LOGFIRE_CONVERSATION_KEYS, LOGFIRE_REQUEST, logfire_body, logfire_usage_details
from ._openinference import TOOLS_PREFIX, openinference_tools
from ._openllmetry import FUNCTIONS_PREFIX
from ._plan import Plan
from ._tables import FRAMEWORK_NAMES
from ._values import as_int, as_list, json_value, nested, plain, unflatten

__all__ = ["find_run_type", "first_str", "take_first", "find_usage", "merge_usage", "find_invocation_params", "set_models",
           "tool_definition", "find_documents", "find_tags"]

#: The keys of a whole-object invocation params that name the model asked for (OpenInference
#: records the request there, so a call that fails still names its model).
REQUEST_MODEL_PARAMS = ("model", "model_name")


def find_run_type(attributes: Mapping[str, Any], consumed: set[str], plan: Plan) -> str:
    """The run type: the first kind rule that knows the span's value, else the first attribute whose
    presence decides, else ``llm`` when it names a model or provider (unless a rule that lists every
    model call saw a value it does not know: a span that only names its provider is no model call),
    else ``chain``."""
    model_call_possible = True
    for key, values, default, lists_model_calls in plan.run_type_rules:
        raw = attributes.get(key)
        if not isinstance(raw, str) or not raw:
            continue
        run_type = values.get(raw.lower(), default)
        if run_type is not None:
            consumed.add(key)
            return run_type
        if lists_model_calls:
            model_call_possible = False
    for key, run_type in plan.run_type_presence:
        if attributes.get(key) not in (None, ""):
            return run_type
    if model_call_possible:
        for key in plan.model_keys:
            value = attributes.get(key)
            if value is not None and not (isinstance(value, str) and value in FRAMEWORK_NAMES):
                return "llm"
    return "chain"


def first_str(attributes: Mapping[str, Any], keys: Sequence[str]) -> tuple[str, str] | None:
    for key in keys:
        value = attributes.get(key)
        if isinstance(value, str) and value:
            return key, value
    return None


def take_first(
    attributes: Mapping[str, Any], keys: Sequence[str], consumed: set[str], skip: frozenset[str] = frozenset()
) -> str | None:
    """The first non-empty text among ``keys`` (none of ``skip``), consumed with every later key that says
    the same: a producer that writes one fact under two names (``llm.provider`` and ``llm.system``) would
    otherwise see it again in metadata. A key that says something else stays there."""
    found: str | None = None
    for key in keys:
        value = attributes.get(key)
        if found is None:
            if isinstance(value, str) and value and value not in skip:
                found = value
                consumed.add(key)
        elif value == found:
            consumed.add(key)
    return found


def find_usage(
    attributes: Mapping[str, Any], consumed: set[str], malformed: list[tuple[str, str]], plan: Plan, outputs: Any
) -> dict[str, Any] | None:
    usage: dict[str, Any] = {}
    for path, keys in plan.usage_fields:
        for key in keys:
            raw = attributes.get(key)
            count = None if raw is None else as_int(raw)
            if count is None and raw is not None:
                malformed.append((key, "a whole number of tokens"))  # not consumed: kept in metadata
            if count is not None:
                for other in keys:  # a loop: most rows have one key, and a generator costs more than it
                    if other in attributes:
                        consumed.add(other)
                if len(path) == 1:
                    usage[path[0]] = count
                else:
                    usage.setdefault(path[0], {})[path[1]] = count
                break
    found = bool(usage)
    if found and plan.provider_usage:
        provider_details = logfire_usage_details(attributes, consumed)
        if provider_details is not None:
            merge_usage(usage, provider_details)
    for object_key, where in plan.usage_objects:
        source: Any
        if object_key is None:
            source = outputs.get("usage_metadata") if isinstance(outputs, dict) else None
        elif object_key in attributes:
            source = langsmith_sdk_usage_object(attributes[object_key])
            if source is None:
                continue  # unreadable: it stays in metadata as it came
            if where != "usage_metadata":
                consumed.add(object_key)
                source = {where: source}
            elif not found:
                continue
        else:
            continue
        if isinstance(source, dict) and merge_usage(usage, source):
            found = True
    if not found:
        return None
    usage.setdefault("input_tokens", 0)
    usage.setdefault("output_tokens", 0)
    usage.setdefault("total_tokens", usage["input_tokens"] + usage["output_tokens"])
    return usage


def merge_usage(usage: dict[str, Any], source: Mapping[str, Any]) -> bool:
    """Add what ``source`` says that ``usage`` does not, one level of details deep; True if it had a count.

    Values are kept as they came (a cost is a float), so a source never loses anything by being merged.
    """
    counted = False
    for key, value in source.items():
        if not isinstance(key, str) or value is None or isinstance(value, bool):
            continue
        if isinstance(value, dict):
            have = usage.setdefault(key, {})
            if not isinstance(have, dict):
                continue
            for detail, count in value.items():
                if isinstance(detail, str) and isinstance(count, (int, float)) and not isinstance(count, bool):
                    have.setdefault(detail, count)
                    counted = True
            if not have:
                del usage[key]
        elif isinstance(value, (int, float)):
            usage.setdefault(key, value)
            counted = True
    return counted


#: What ``param_value`` answers for a value that claims to be JSON and is not:
#: the attribute is left unconsumed, so the run keeps it as it came, in metadata.
MALFORMED: Any = object()


def param_value(value: Any, shape: str) -> Any:
    """An invocation parameter in the shape its ``ParamRow`` names."""
    if shape == "tools":
        items = as_list(value)
        if items is None:
            if not isinstance(value, str) or value[:1] in ("[", "{"):
                return MALFORMED  # not JSON after all, or a number: no tool list
            items = [value]
        return [tool_definition(i) for i in items]
    if shape == "list":
        items = as_list(value)
        return plain(items) if items is not None else [plain(value)]
    if shape == "json":
        return plain(json_value(value))
    return plain(value)


def find_invocation_params(ctx: Ctx) -> tuple[dict[str, Any] | None, str | None]:
    """The invocation params, and the model a whole-object params names (the requested one)."""
    params: dict[str, Any] = {}
    for key in ctx.plan.param_object_keys:
        raw = ctx.attributes.get(key)
        value = json_value(raw)
        if isinstance(value, dict):
            params.update(value)
            ctx.consumed.add(key)
        elif raw is not None:
            ctx.malformed.append((key, "a JSON object of parameters"))
    requested = first_str(params, REQUEST_MODEL_PARAMS) if params else None
    for rest, value in (ctx.take_flat(PARAM_PREFIX) or {}).items():
        if rest in LIST_PARAMS and isinstance(value, str) and value[:1] == "[":
            decoded = json_value(value)  # Logfire writes these lists as JSON text
            value = decoded if isinstance(decoded, list) else value
        # (Most parameters are scalars: plain() is called only for what it changes.)
        params[PARAM_RENAMES.get(rest, rest)] = plain(value) if isinstance(value, (tuple, dict)) else value
    functions = ctx.take_flat(FUNCTIONS_PREFIX)
    if functions:
        unflat = unflatten(functions)
        params["tools"] = [tool_definition(f) for f in (unflat if isinstance(unflat, list) else [unflat])]
    if "tools" in params:
        ctx.take_flat(TOOLS_PREFIX)  # the same definitions again (OpenInference langchain writes both)
    else:
        tools = openinference_tools(ctx)
        if tools:
            params["tools"] = [tool_definition(t) for t in tools]
    for key, param, shape in ctx.plan.param_fields:
        value = ctx.attributes.get(key)
        if value is not None and param not in params:
            found = param_value(value, shape)
            if found is MALFORMED:
                ctx.malformed.append((key, "a JSON array of tool definitions"))
            else:
                params[param] = found
                ctx.consumed.add(key)
    request = logfire_body(ctx, LOGFIRE_REQUEST) if ctx.plan.logfire_request else None
    if request is not None:
        # Logfire's request body: its conversation is the inputs, the rest parameters the above left unsaid.
        ctx.consumed.add(LOGFIRE_REQUEST)
        for param, value in request.items():
            if param not in LOGFIRE_CONVERSATION_KEYS and param not in params:
                params[param] = param_value(value, "tools") if param == "tools" else plain(value)
        if params.get("tools") is MALFORMED:
            del params["tools"]
        if requested is None:
            requested = first_str(request, REQUEST_MODEL_PARAMS)
    return params or None, requested[1] if requested else None


def set_models(
    attributes: Mapping[str, Any], plan: Plan, requested: str | None, consumed: set[str], metadata: dict[str, Any]
) -> str | None:
    """``ls_model_name``: the requested model, else the one that answered; ``response_model`` when they differ.
    Returns the model that answered, if said."""
    request = take_first(attributes, plan.request_model_keys, consumed)
    if request is not None:
        requested = request
    response = take_first(attributes, plan.response_model_keys, consumed)
    if response is not None:
        if requested is None:
            requested = response
        elif response != requested:
            metadata["response_model"] = response
    if requested is not None:
        metadata["ls_model_name"] = requested
    return response


def tool_definition(item: Any) -> Any:
    """A tool offered to the model, as the OpenAI-style dict the service shows:
    ``{"type": "function", "function": {"name", "description", "parameters"}}``.

    Read from the GenAI convention's flat shape (``type``/``name``/``parameters``),
    Anthropic's request shape (``input_schema``) and OpenLLMetry's flattened
    functions (``parameters`` as a JSON string). Already OpenAI-style, not a
    function (a provider's built-in tool) or not an object: kept as it came.
    """
    item = plain(json_value(item))
    if not isinstance(item, dict) or isinstance(item.get("function"), dict):
        return item
    kind = item.get("type") or "function"
    name = item.get("name")
    if kind != "function" or not isinstance(name, str):
        return item
    function: dict[str, Any] = {"name": name}
    if item.get("description") is not None:
        function["description"] = item["description"]
    for key in ("parameters", "input_schema", "json_schema"):
        if item.get(key) is not None:
            function["parameters"] = json_value(item[key])
            break
    return {"type": "function", "function": function}


def document_of(raw: Any) -> dict[str, Any] | None:
    """A retrieved document in the shape the service renders for retrievers."""
    raw = json_value(raw)
    if isinstance(raw, str):
        return {"page_content": raw, "type": "Document", "metadata": {}}
    if not isinstance(raw, dict):
        return None
    raw = nested(raw, "document")  # OpenInference nesting
    if not isinstance(raw, dict):
        return None
    metadata = json_value(raw.get("metadata"))
    metadata = dict(metadata) if isinstance(metadata, dict) else {}
    if raw.get("score") is not None:
        metadata["score"] = raw["score"]
    content = raw.get("content", raw.get("page_content", raw.get("text")))
    doc: dict[str, Any] = {"page_content": "" if content is None else content, "type": "Document",
                           "metadata": metadata}
    if raw.get("id") is not None:
        doc["id"] = raw["id"]
    return doc


def find_documents(ctx: Ctx) -> list[dict[str, Any]] | None:
    """The retrieved documents: the first family (``retrieval.documents.``) or whole key present."""
    for key in ctx.plan.document_keys:
        if key.endswith("."):
            group = ctx.take_flat(key)
            if group:
                items = unflatten(group)
                return [d for d in map(document_of, items if isinstance(items, list) else ()) if d]
        else:
            raw = ctx.take(key)
            if raw is not None:
                return [d for d in map(document_of, as_list(raw) or ()) if d]
    return None


def find_tags(attributes: Mapping[str, Any], consumed: set[str], keys: Sequence[str]) -> list[str] | None:
    tags: list[str] = []
    for key in keys:
        raw = attributes.get(key)
        if not raw:
            continue
        consumed.add(key)
        if isinstance(raw, str):
            decoded = json_value(raw)
            raw = decoded if isinstance(decoded, list) else [t.strip() for t in raw.split(",") if t.strip()]
        elif not isinstance(raw, (list, tuple)):
            raw = [raw]
        for t in raw:  # a loop, not extend(generator): that dedupes as it goes, which mypyc's list would not
            tag = str(t)
            if tag not in tags:
                tags.append(tag)
    return tags or None
