"""Attribute values as the conventions write them: JSON text, tuples, flattened keys.

Pure helpers the readers share; none of them raises on a value of the wrong type.
"""

from __future__ import annotations

from typing import Any, Mapping

import orjson

__all__ = ["json_value", "as_object", "as_list", "as_int", "plain", "json_text", "nested", "list_position", "unflatten"]


def json_value(value: Any) -> Any:
    """Decode a JSON string attribute; anything else is returned as it is."""
    if isinstance(value, str) and value[:1] in ("{", "["):
        try:
            return orjson.loads(value)
        except orjson.JSONDecodeError:
            return value
    return value


def as_object(value: Any, key: str) -> dict[str, Any]:
    decoded = json_value(value)
    if isinstance(decoded, dict):
        return decoded
    if isinstance(decoded, tuple):
        decoded = list(decoded)
    return {key: decoded}


def as_list(value: Any) -> list[Any] | None:
    """A list of items from a JSON string, a list/tuple (of JSON strings) or one object."""
    decoded = json_value(value)
    if isinstance(decoded, dict):
        return [decoded]
    if isinstance(decoded, (list, tuple)):
        return [json_value(v) if isinstance(v, str) else v for v in decoded]  # (most items are objects already)
    return None


def as_int(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    try:
        if isinstance(value, float):
            return int(value)
        if isinstance(value, str):
            return int(float(value))
    except (ValueError, OverflowError):  # "n/a", inf, nan
        return None
    return None


def plain(value: Any) -> Any:
    """Attribute sequences arrive as tuples (inside map values too); runs are JSON, so make them lists."""
    if isinstance(value, tuple):
        return [plain(v) for v in value]
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    return value


def json_text(value: Any) -> Any:
    """Message content from a value that may not be text: text as it came, any other value as its JSON text.

    Tools return objects (pydantic-ai records a returned dict as one); a message's
    content is text or content blocks, and the model was sent the JSON text anyway.
    """
    if value is None or isinstance(value, str):
        return value
    try:
        return orjson.dumps(value, default=str, option=orjson.OPT_NON_STR_KEYS).decode()
    except (orjson.JSONEncodeError, TypeError):
        return str(value)


def nested(obj: Any, key: str) -> Any:
    """OpenInference wraps items one level down (``{"document": {...}}``)."""
    inner = obj.get(key) if isinstance(obj, dict) else None
    return inner if inner is not None else obj


def list_position(part: str) -> int | None:
    """A list position in a flattened key, or None when ``part`` is a name.

    ASCII digits only, and a few: ``str.isdigit()`` also accepts "²" and
    thousands of digits, which ``int()`` refuses, and a span carrying such a key
    was lost as a convert_error.
    """
    return int(part) if len(part) <= 9 and part.isascii() and part.isdigit() else None


def unflatten(flat: Mapping[str, Any]) -> Any:
    """``{"0.message.role": "user"}`` -> ``[{"message": {"role": "user"}}]``.

    Numeric segments become list positions (sorted, gaps dropped), so the same
    helper reads OpenInference, traceloop and document attributes.
    """
    root: dict[Any, Any] = {}
    for path, value in flat.items():
        node = root
        parts = path.split(".")
        for part in parts[:-1]:
            position = list_position(part)
            key: Any = part if position is None else position
            child = node.get(key)
            if not isinstance(child, dict):
                if child is not None:
                    break  # a value and a sub-tree under one name: keep the value
                child = node[key] = {}
            node = child
        else:
            last = parts[-1]
            position = list_position(last)
            node.setdefault(last if position is None else position, value)
    return _listify(root)


def _listify(node: Any) -> Any:
    if not isinstance(node, dict):
        return plain(node)
    if node and all(isinstance(k, int) for k in node):
        return [_listify(node[k]) for k in sorted(node)]
    return {str(k): _listify(v) for k, v in node.items()}
