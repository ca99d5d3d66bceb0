"""``/sessions`` (projects) for the local service: query strings and bodies checked, projects shaped.

Pure functions, like :mod:`._query`, whose :class:`~._query.QueryError` they raise
for a request they cannot answer (the route answers 422). What the service's
client sends::

    GET  /sessions?limit=&offset=&id=&name=&name_contains=&include_stats=&reference_free=
                                       list_projects, read_project(project_name=...)
    GET  /sessions/{id}?include_stats= read_project(project_id=...)
    POST /sessions?upsert=             create_project: {"name", "id", "description", "extra", ...}

A project answer has the fields the SDK's ``TracerSession`` model requires
(``id``, ``tenant_id``, ``reference_dataset_id`` among them), plus ``run_count``
and ``last_run_start_time`` with ``include_stats``.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Callable
from urllib.parse import parse_qs

from ._numbers import SQL_INT_MAX, plain_int
from ._filter import QueryError
from ._store_schema import USAGE_FIELDS
from ._store import sortable_time
from ._validate import canonical_id

__all__ = [
    "NO_WORKSPACE",
    "ProjectList",
    "ProjectCreate",
    "parse_project_list",
    "parse_project_read",
    "parse_project_create",
    "api_project",
]

NO_WORKSPACE = str(uuid.UUID(int=0))
"""``tenant_id`` of every project when the service runs without ``--workspace-id``."""

_MAX_PAGE = 100
_LIST_PARAMS = ("limit", "offset", "id", "name", "name_contains", "include_stats", "reference_free")
_READ_PARAMS = ("limit", "include_stats")
_CREATE_KEPT = ("name", "id", "description", "extra", "reference_dataset_id", "start_time", "end_time")
# Accepted for the SDK's sake (create_project and evaluate send them) but with nothing here to apply them to.
_CREATE_IGNORED = (
    "default_dataset_id", "evaluator_keys", "kicked_off_by", "longlived_ttl_days", "num_examples",
    "num_repetitions", "tag_value_ids", "trace_tier",
)


@dataclass(frozen=True)
class ProjectList:
    """A checked ``GET /sessions`` query."""

    ids: list[str] | None = None
    name: str | None = None
    name_contains: str | None = None
    limit: int = _MAX_PAGE
    offset: int = 0
    include_stats: bool = False
    match_none: bool = False


@dataclass(frozen=True)
class ProjectCreate:
    """A checked ``POST /sessions`` body."""

    name: str
    project_id: str | None
    description: str | None
    extra: dict[str, Any] | None
    reference_dataset_id: str | None
    start_time: str | None
    end_time: str | None
    upsert: bool


def _params(query: str, allowed: tuple[str, ...]) -> dict[str, list[str]]:
    params = parse_qs(query, keep_blank_values=True)
    unknown = sorted(set(params) - set(allowed))
    if unknown:
        raise QueryError(
            ("query", unknown[0]),
            f"{unknown[0]} is not supported by the local service; supported: {', '.join(allowed)}",
        )
    return params


def _single(params: Mapping[str, list[str]], key: str) -> str | None:
    values = params.get(key)
    if not values:
        return None
    if len(values) > 1:
        raise QueryError(("query", key), f"{key} is given {len(values)} times; give it once")
    return values[0]


def _bool(params: Mapping[str, list[str]], key: str) -> bool | None:
    raw = _single(params, key)
    if raw is None:
        return None
    # requests writes Python's True/False as "True"/"False".
    lowered = raw.lower()
    if lowered in ("true", "1"):
        return True
    if lowered in ("false", "0"):
        return False
    raise QueryError(("query", key), f"{key} must be true or false, got {raw[:40]!r}")


def _int(params: Mapping[str, list[str]], key: str, low: int, high: int | None, default: int) -> int:
    raw = _single(params, key)
    if raw is None:
        return default
    # Past 2**63 - 1 SQLite refuses the number.
    high = SQL_INT_MAX if high is None else high
    value = plain_int(raw)
    if value is None or not low <= value <= high:
        bound = f"from {low} to {high}" if high != SQL_INT_MAX else f"{low} or more"
        raise QueryError(("query", key), f"{key} must be a whole number {bound}, got {raw[:40]!r}")
    return value


def parse_project_list(query: str) -> ProjectList:
    """Check a ``GET /sessions`` query string.

    >>> parse_project_list("limit=1&name=demo&include_stats=False")
    ProjectList(ids=None, name='demo', name_contains=None, limit=1, offset=0, include_stats=False, match_none=False)
    """
    params = _params(query, _LIST_PARAMS)
    ids = None
    if "id" in params:
        ids = []
        for index, raw in enumerate(params["id"]):
            canon = canonical_id(raw)
            if canon is None:
                raise QueryError(("query", "id", index), f"id {raw[:60]!r} is not a UUID")
            ids.append(canon)
    # No project here has a reference dataset, so every one is reference-free.
    reference_free = _bool(params, "reference_free")
    return ProjectList(
        ids=ids,
        name=_single(params, "name"),
        name_contains=_single(params, "name_contains"),
        limit=_int(params, "limit", 1, _MAX_PAGE, _MAX_PAGE),
        offset=_int(params, "offset", 0, None, 0),
        include_stats=bool(_bool(params, "include_stats")),
        match_none=reference_free is False,
    )


def parse_project_read(query: str) -> bool:
    """Check a ``GET /sessions/{id}`` query string; returns include_stats."""
    params = _params(query, _READ_PARAMS)
    _int(params, "limit", 1, None, 1)  # the SDK sends limit=1 here too; it means nothing for one project
    return bool(_bool(params, "include_stats"))


def parse_project_create(body: Any, query: str) -> ProjectCreate:
    """Check a ``POST /sessions`` body and its ``upsert`` query parameter.

    >>> parse_project_create({"name": "demo", "extra": None, "description": None}, "").name
    'demo'
    """
    upsert = bool(_bool(_params(query, ("upsert",)), "upsert"))
    if not isinstance(body, dict):
        raise QueryError(("body",), "the body must be a JSON object with at least a name")
    unknown = sorted(set(body) - set(_CREATE_KEPT) - set(_CREATE_IGNORED))
    if unknown:
        raise QueryError(
            ("body", unknown[0]),
            f"{unknown[0]} is not supported by the local service; supported: {', '.join(_CREATE_KEPT + _CREATE_IGNORED)}",
        )
    name = body.get("name")
    if not isinstance(name, str) or not name.strip():
        raise QueryError(("body", "name"), "name is required: the project's name, non-empty text")
    ids = {key: _optional(body, key, canonical_id, "a UUID") for key in ("id", "reference_dataset_id")}
    times = {key: _optional(body, key, sortable_time, "an ISO 8601 timestamp") for key in ("start_time", "end_time")}
    description, extra = body.get("description"), body.get("extra")
    if description is not None and not isinstance(description, str):
        raise QueryError(("body", "description"), "description must be text")
    if extra is not None and not isinstance(extra, dict):
        raise QueryError(("body", "extra"), "extra must be a JSON object")
    return ProjectCreate(
        name=name,
        project_id=ids["id"],
        description=description,
        extra=extra,
        reference_dataset_id=ids["reference_dataset_id"],
        start_time=times["start_time"],
        end_time=times["end_time"],
        upsert=upsert,
    )


def _optional(body: Mapping[str, Any], key: str, canonical: Callable[[Any], str | None], expected: str) -> str | None:
    """``body[key]`` in its canonical form, None when absent; a value ``canonical`` cannot read is refused."""
    value = body.get(key)
    if value is None:
        return None
    canon = canonical(value)
    if canon is None:
        raise QueryError(("body", key), f"{key} {str(value)[:60]!r} is not {expected}")
    return canon


def api_project(
    project: Mapping[str, Any], tenant_id: str, stats: Mapping[str, Any] | None = None, *, include_stats: bool = False
) -> dict[str, Any]:
    """A stored project as the SDK's ``TracerSessionResult`` reads it."""
    out = {
        "id": project["id"],
        "name": project["name"],
        "description": project["description"],
        "extra": project["extra"],
        "start_time": project["start_time"],
        "end_time": project["end_time"],
        "tenant_id": tenant_id,
        "reference_dataset_id": project["reference_dataset_id"],
    }
    if include_stats:
        out["run_count"] = (stats or {}).get("run_count", 0)
        out["last_run_start_time"] = (stats or {}).get("last_run_start_time")
        # Its runs' tokens and costs added up (a cost is null when none of its runs has a price).
        for name in USAGE_FIELDS:
            out[name] = (stats or {}).get(name, 0 if name.endswith("tokens") else None)
    return out
