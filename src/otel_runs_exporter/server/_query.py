"""``POST /runs/query`` for the local service: the request checked, its filters turned into SQL, runs shaped.

Pure functions, no I/O: the route hands over the JSON body, gets back a
:class:`RunQuery` (a WHERE fragment over ``runs AS r`` with its parameters, the
page size, the order, where the page starts) or a :class:`QueryError`, and after
the store has run the query, :func:`page_body` shapes the answer the service's
client reads: ``{"runs": [...], "cursors": {"next": ...}}``.

Body keys (those the SDK's ``Client.list_runs`` sends; a key set to null counts as absent)::

    session            list of project ids          r.project_id IN (...)
    session_id         a project id (or a list)     the same; read_run(load_child_runs=True) sends it
    id                 list of run ids              r.id IN (...)
    trace              a run id                     r.trace_id = ?
    parent_run         a run id                     r.parent_run_id = ?
    reference_example  list of example ids          r.reference_example_id IN (...)
    run_type           text                         r.run_type = ?
    is_root            true | false (or 1 | 0)      parent_run_id IS [NOT] NULL
    error              true | false (or 1 | 0)      error IS [NOT] NULL
    execution_order    1                            parent_run_id IS NULL (the key before dotted_order)
    start_time         ISO 8601                     the run started at or after it
    query              text                         like search(text) below
    filter             filter expression            on the run
    trace_filter       filter expression            on the root run of the run's trace
    tree_filter        filter expression            on any run of the run's trace
    select             list of field names          fields answered besides the ones always sent
    limit              1..                          page size, at most 100
    order              "desc" (default) | "asc"     by start_time, then arrival
    cursor             from a previous answer       the next page

Filter expressions, the documented syntax the SDK builds itself (``read_thread``'s
``and(eq(thread_id, "..."), <filter>)``) and shows in ``list_runs``' docstring::

    and(e, ...)   or(e, ...)   not(e)
    eq(field, value)   neq(field, value)          value: "text", 'text', number, true, false, null
    gt / gte / lt / lte(field, value)             start_time, end_time (ISO 8601), latency (seconds)
    has(tags, "tag")   has(metadata, '{"key": "value"}')   exists(metadata, "key")
    search("text")                                case-insensitive (ASCII), anywhere in the stored run

Anything else (another function, a field not in :data:`FIELDS`, a value of the
wrong type) is a :class:`QueryError` naming the body key and saying what is
supported; the route answers it with 422.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import orjson

from ._reply import Refuse
from ._store import QueriedRun, sortable_time
from ._validate import canonical_id

__all__ = [
    "FIELDS",
    "SELECTABLE",
    "QueryError",
    "RunQuery",
    "Where",
    "parse_filter",
    "parse_run_query",
    "api_run",
    "page_body",
    "flag",
]

MAX_PAGE = 100
"""Runs in one answer at most; the client follows ``cursors.next`` for more."""
_MAX_FILTER_CHARS = 10_000
_MAX_DEPTH = 32
_MAX_LIST = 1_000

Kind = Literal["id", "text", "time", "number", "bool", "status", "tags", "metadata"]

_STATUS_SQL = "(CASE WHEN {t}.error IS NOT NULL THEN 'error' WHEN {t}.end_time IS NOT NULL THEN 'success' ELSE 'pending' END)"
# The metadata keys the service reads a thread from, the first present winning; CAST, because a
# numeric thread id must still equal the text read_thread sends.
_THREAD_SQL = (
    "CAST(COALESCE(json_extract({t}.metadata, '$.session_id'), json_extract({t}.metadata, '$.thread_id'),"
    " json_extract({t}.metadata, '$.conversation_id')) AS TEXT)"
)

FIELDS: dict[str, tuple[str, Kind]] = {
    "id": ("{t}.id", "id"),
    "name": ("{t}.name", "text"),
    "run_type": ("{t}.run_type", "text"),
    "trace_id": ("{t}.trace_id", "id"),
    "parent_run_id": ("{t}.parent_run_id", "id"),
    "session_id": ("{t}.project_id", "id"),
    "reference_example_id": ("{t}.reference_example_id", "id"),
    "start_time": ("{t}.start_time", "time"),
    "end_time": ("{t}.end_time", "time"),
    "latency": ("{t}.latency", "number"),
    "error": ("{t}.error", "text"),
    "status": (_STATUS_SQL, "status"),
    "is_root": ("({t}.parent_run_id IS NULL)", "bool"),
    "thread_id": (_THREAD_SQL, "text"),
    "tags": ("{t}.tags", "tags"),
    "metadata": ("{t}.metadata", "metadata"),
}
"""Filter field -> (SQL expression over the store's ``runs`` columns, with ``{t}`` the table alias; kind)."""

_COMPARATORS = ("eq", "neq", "gt", "gte", "lt", "lte")
_FUNCTIONS = ("and", "or", "not", *_COMPARATORS, "has", "exists", "search")
_STATUSES = ("success", "error", "pending")

# Fields every answered run carries: schemas.Run cannot be built without them.
_ALWAYS = ("id", "name", "run_type", "start_time", "trace_id")
_COMPUTED = ("session_id", "status", "parent_run_ids", "thread_id")
_STORED = (
    "dotted_order", "end_time", "error", "events", "extra", "inputs", "outputs", "parent_run_id",
    "reference_example_id", "serialized", "tags",
)
# Known to the service's client but not kept here: answered as null.
_NOT_KEPT = (
    "app_path", "child_run_ids", "completion_cost", "completion_cost_details", "completion_token_details",
    "completion_tokens", "feedback_stats", "first_token_time", "in_dataset", "manifest_id", "prompt_cost",
    "prompt_cost_details", "prompt_token_details", "prompt_tokens", "s3_urls", "total_cost", "total_tokens",
)
SELECTABLE = frozenset((*_ALWAYS, *_COMPUTED, *_STORED, *_NOT_KEPT))
"""Names ``select`` accepts: the SDK's default selection and the rest of its ``Run`` model."""

_BODY_KEYS = (
    "session", "session_id", "id", "trace", "parent_run", "reference_example", "run_type", "is_root", "error", "start_time",
    "query", "filter", "trace_filter", "tree_filter", "select", "limit", "order", "cursor", "execution_order",
)


class QueryError(Refuse):
    """A read request the local service cannot answer: where in the request, and what is supported instead (a 422)."""

    def __init__(self, loc: Sequence[str | int], msg: str) -> None:
        self.loc = tuple(loc)
        self.msg = msg
        super().__init__(422, self.as_detail())
        self.args = (msg,)

    def as_detail(self) -> dict[str, Any]:
        """The spec 2.2 HTTPValidationError body for this error."""
        key = self.loc[1] if len(self.loc) > 1 else "body"
        return {"detail": [{"loc": list(self.loc), "msg": self.msg, "type": f"query.{key}"}]}


@dataclass(frozen=True)
class Where:
    """A SQL condition and the values bound to its ``?`` placeholders, in order."""

    sql: str
    params: tuple[Any, ...] = ()

    @staticmethod
    def all_of(parts: Sequence[Where]) -> Where:
        if not parts:
            return Where("1")
        return Where(" AND ".join(f"({p.sql})" for p in parts), tuple(v for p in parts for v in p.params))


# --- filter expressions -------------------------------------------------------------

_TOKEN = re.compile(
    r"""\s*(?:
        (?P<name>[A-Za-z_][A-Za-z0-9_]*)
      | (?P<dq>"(?:[^"\\]|\\.)*")
      | (?P<sq>'(?:[^'\\]|\\.)*')
      | (?P<num>-?\d+(?:\.\d+)?(?:[eE][+-]?\d+)?)
      | (?P<punct>[(),])
    )""",
    re.VERBOSE | re.DOTALL,
)


@dataclass(frozen=True)
class _Call:
    name: str
    args: tuple[_Node, ...]
    pos: int


@dataclass(frozen=True)
class _Ident:
    name: str
    pos: int


@dataclass(frozen=True)
class _Lit:
    value: Any
    pos: int


_Node = _Call | _Ident | _Lit


_SQL_INT_MAX = 2**63 - 1


def _sql_int(raw: str) -> int | None:
    """``raw`` as an int SQLite can bind, else None."""
    if len(raw.lstrip("-")) > 19:
        return None
    value = int(raw)
    return value if -_SQL_INT_MAX - 1 <= value <= _SQL_INT_MAX else None


@dataclass
class _Token:
    kind: str
    text: str
    pos: int
    value: Any = None


def _tokens(text: str, key: str) -> list[_Token]:
    out: list[_Token] = []
    pos = 0
    while True:
        while pos < len(text) and text[pos].isspace():
            pos += 1
        if pos >= len(text):
            return out
        match = _TOKEN.match(text, pos)
        if match is None or match.end() == pos:
            raise QueryError(("body", key), f"{key} (at position {pos}): unexpected {text[pos:pos + 20]!r}")
        kind = match.lastgroup or ""
        raw = match.group(kind)
        start = match.start(kind)
        value: Any = None
        if kind == "dq":
            try:
                value = json.loads(raw)  # the SDK writes its strings with json.dumps
            except json.JSONDecodeError:
                raise QueryError(("body", key), f"{key} (at position {start}): bad escape in the string") from None
            kind = "str"
        elif kind == "sq":
            value, kind = re.sub(r"\\(.)", r"\1", raw[1:-1], flags=re.DOTALL), "str"
        elif kind == "num":
            value = float(raw) if any(c in raw for c in ".eE") else _sql_int(raw)
            if value is None:
                # int() refuses past 4,300 digits, SQLite past 64 bits: a 422, not a 500.
                raise QueryError(("body", key), f"{key} (at position {start}): {raw[:40]!r} is out of range")
        out.append(_Token(kind, raw, start, value))
        pos = match.end()


class _Parser:
    def __init__(self, text: str, key: str) -> None:
        self.key = key
        self.tokens = _tokens(text, key)
        self.index = 0

    def error(self, msg: str, pos: int | None = None) -> QueryError:
        where = f" (at position {pos})" if pos is not None else ""
        return QueryError(("body", self.key), f"{self.key}{where}: {msg}")

    def peek(self, offset: int = 0) -> _Token | None:
        at = self.index + offset
        return self.tokens[at] if at < len(self.tokens) else None

    def take(self) -> _Token:
        token = self.peek()
        if token is None:
            raise self.error("the expression ends too early; is a ')' missing?")
        self.index += 1
        return token

    def expect(self, text: str) -> None:
        token = self.take()
        if token.text != text:
            raise self.error(f"expected {text!r}, found {token.text[:20]!r}", token.pos)

    def parse(self) -> _Call:
        node = self.node(0)
        if not isinstance(node, _Call):
            raise self.error("the expression must be a call such as eq(name, \"x\")", node.pos)
        extra = self.peek()
        if extra is not None:
            raise self.error(f"unexpected {extra.text[:20]!r} after the expression", extra.pos)
        return node

    def node(self, depth: int) -> _Node:
        if depth > _MAX_DEPTH:
            raise self.error(f"nested more than {_MAX_DEPTH} levels deep")
        token = self.take()
        if token.kind == "name":
            following = self.peek()
            if following is not None and following.text == "(":
                self.index += 1
                args: list[_Node] = []
                closing = self.peek()
                if closing is not None and closing.text == ")":
                    self.index += 1
                else:
                    while True:
                        args.append(self.node(depth + 1))
                        sep = self.take()
                        if sep.text == ")":
                            break
                        if sep.text != ",":
                            raise self.error(f"expected ',' or ')', found {sep.text[:20]!r}", sep.pos)
                return _Call(token.text, tuple(args), token.pos)
            literal = {"true": True, "false": False, "null": None}
            if token.text in literal:
                return _Lit(literal[token.text], token.pos)
            return _Ident(token.text, token.pos)
        if token.kind in ("str", "num"):
            return _Lit(token.value, token.pos)
        raise self.error(f"unexpected {token.text!r}", token.pos)


def parse_filter(text: str, key: str = "filter", alias: str = "r") -> Where:
    """A filter expression as a SQL condition over ``runs AS <alias>``; :class:`QueryError` naming ``key`` if unsupported.

    >>> w = parse_filter('and(eq(run_type, "llm"), gt(latency, 2))')
    >>> w.sql, w.params
    ('((r.run_type = ?) AND (r.latency > ?))', ('llm', 2))
    """
    if not isinstance(text, str):
        raise QueryError(("body", key), f"{key} must be a filter expression as a string, got {type(text).__name__}")
    if len(text) > _MAX_FILTER_CHARS:
        raise QueryError(("body", key), f"{key} is longer than {_MAX_FILTER_CHARS} characters")
    parser = _Parser(text, key)
    if not parser.tokens:
        raise QueryError(("body", key), f"{key} is empty; leave it out to match every run")
    return _Compiler(parser, alias).call(parser.parse())


class _Compiler:
    def __init__(self, parser: _Parser, alias: str) -> None:
        self.p = parser
        self.alias = alias

    def call(self, node: _Call) -> Where:
        name = node.name
        if name in ("and", "or"):
            if not node.args:
                raise self.p.error(f"{name}() needs at least one condition", node.pos)
            parts = [self.call(self.condition(arg, name)) for arg in node.args]
            joiner = " AND " if name == "and" else " OR "
            return Where("(" + joiner.join(f"({p.sql})" for p in parts) + ")", tuple(v for p in parts for v in p.params))
        if name == "not":
            if len(node.args) != 1:
                raise self.p.error("not() takes exactly one condition", node.pos)
            inner = self.call(self.condition(node.args[0], name))
            # A run whose column is null neither matches nor fails a comparison; not() must still include it.
            return Where(f"NOT COALESCE(({inner.sql}), 0)", inner.params)
        if name in _COMPARATORS:
            return self.compare(node)
        if name == "has":
            return self.has(node)
        if name == "exists":
            return self.exists(node)
        if name == "search":
            if len(node.args) != 1 or not isinstance(node.args[0], _Lit) or not isinstance(node.args[0].value, str):
                raise self.p.error('search() takes one string, as in search("timeout")', node.pos)
            return search_where(node.args[0].value, self.alias, self.p.key)
        raise self.p.error(f"unsupported function {name!r}; supported: {', '.join(_FUNCTIONS)}", node.pos)

    def condition(self, node: _Node, within: str) -> _Call:
        if not isinstance(node, _Call):
            raise self.p.error(f"{within}() takes conditions such as eq(name, \"x\"), not a bare value", node.pos)
        return node

    def field(self, node: _Node, func: str) -> tuple[str, str, Kind]:
        if not isinstance(node, _Ident):
            raise self.p.error(f"{func}() takes a field name first (unquoted), as in {func}(name, ...)", node.pos)
        if node.name not in FIELDS:
            raise self.p.error(
                f"unsupported field {node.name!r}; supported fields: {', '.join(FIELDS)}", node.pos
            )
        sql, kind = FIELDS[node.name]
        return node.name, sql.format(t=self.alias), kind

    def literal(self, node: _Node, func: str) -> _Lit:
        if not isinstance(node, _Lit):
            raise self.p.error(
                f"{func}() takes a value second: a quoted string, a number, true, false or null", node.pos
            )
        return node

    def field_and_value(self, node: _Call, usage: str) -> tuple[str, str, Kind, _Lit]:
        """The arguments of a function taking a field, then a value; ``usage`` is the error when there are not two."""
        if len(node.args) != 2:
            raise self.p.error(usage, node.pos)
        name, sql, kind = self.field(node.args[0], node.name)
        return name, sql, kind, self.literal(node.args[1], node.name)

    def compare(self, node: _Call) -> Where:
        func = node.name
        name, sql, kind, lit = self.field_and_value(node, f"{func}() takes a field and a value")
        if kind in ("tags", "metadata"):
            raise self.p.error(f"{name} is matched with has() or exists(), not {func}()", node.pos)
        ordered = func in ("gt", "gte", "lt", "lte")
        if ordered and kind not in ("time", "number"):
            raise self.p.error(f"{func}() compares start_time, end_time or latency, not {name}", node.pos)
        if lit.value is None:
            if ordered:
                raise self.p.error(f"{func}() cannot compare with null", lit.pos)
            if kind == "bool":
                raise self.p.error(f"{name} is true or false, not null", lit.pos)
            return Where(f"{sql} IS {'NOT ' if func == 'neq' else ''}NULL")
        value = self.value(name, kind, lit)
        op = {"eq": "=", "neq": "IS NOT", "gt": ">", "gte": ">=", "lt": "<", "lte": "<="}[func]
        return Where(f"{sql} {op} ?", (value,))

    def value(self, name: str, kind: Kind, lit: _Lit) -> Any:
        value = lit.value
        if kind == "bool":
            if not isinstance(value, bool):
                raise self.p.error(f"{name} is true or false", lit.pos)
            return int(value)
        if kind == "number":
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise self.p.error(f"{name} is a number of seconds", lit.pos)
            return value
        if not isinstance(value, str):
            raise self.p.error(f"{name} takes a quoted string", lit.pos)
        if kind == "id":
            canon = canonical_id(value)
            if canon is None:
                raise self.p.error(f"{name} takes a UUID, got {value[:60]!r}", lit.pos)
            return canon
        if kind == "time":
            moment = sortable_time(value)
            if moment is None:
                raise self.p.error(f"{name} takes an ISO 8601 timestamp, got {value[:60]!r}", lit.pos)
            return moment
        if kind == "status" and value not in _STATUSES:
            raise self.p.error(f"status is one of {', '.join(_STATUSES)}, got {value[:60]!r}", lit.pos)
        return value

    def has(self, node: _Call) -> Where:
        name, sql, kind, lit = self.field_and_value(node, 'has() takes a field and a value, as in has(tags, "beta")')
        if kind == "tags":
            if not isinstance(lit.value, str):
                raise self.p.error("has(tags, ...) takes a quoted tag", lit.pos)
            return Where(f"EXISTS (SELECT 1 FROM json_each({sql}) AS tag WHERE tag.value = ?)", (lit.value,))
        if kind == "metadata":
            pairs = self.metadata_pairs(lit)
            parts = [Where(f"json_extract({sql}, ?) = ?", (_json_path(k, self.p, lit.pos), v)) for k, v in pairs]
            return Where.all_of(parts)
        raise self.p.error(f"has() applies to tags or metadata, not {name}", node.pos)

    def metadata_pairs(self, lit: _Lit) -> list[tuple[str, Any]]:
        hint = """has(metadata, '{"key": "value"}')"""
        if not isinstance(lit.value, str):
            raise self.p.error(f"has(metadata, ...) takes a JSON object as a string, as in {hint}", lit.pos)
        try:
            wanted = json.loads(lit.value)
        except json.JSONDecodeError:
            wanted = None
        if not isinstance(wanted, dict) or not wanted:
            raise self.p.error(f"has(metadata, ...) takes a non-empty JSON object as a string, as in {hint}", lit.pos)
        pairs = []
        for key, value in wanted.items():
            if value is None or isinstance(value, (dict, list)):
                raise self.p.error(f"has(metadata, ...) matches text, numbers and booleans; {key!r} is not one", lit.pos)
            pairs.append((key, int(value) if isinstance(value, bool) else value))
        return pairs

    def exists(self, node: _Call) -> Where:
        usage = 'exists() takes metadata and a key, as in exists(metadata, "user_id")'
        name, sql, kind, lit = self.field_and_value(node, usage)
        if kind != "metadata" or not isinstance(lit.value, str):
            raise self.p.error(usage, node.pos)
        return Where(f"json_type({sql}, ?) IS NOT NULL", (_json_path(lit.value, self.p, lit.pos),))


def _json_path(key: str, parser: _Parser, pos: int) -> str:
    if not key or '"' in key or "\\" in key:
        raise parser.error(f"metadata key {key[:40]!r} must be non-empty, without quotes or backslashes", pos)
    return f'$."{key}"'


def search_where(text: str, alias: str, key: str) -> Where:
    """Case-insensitive (ASCII) substring anywhere in the stored run, as the client sent it."""
    if not text.strip():
        raise QueryError(("body", key), f"{key}: the search text is empty")
    # The stored run is JSON: look for the text as orjson wrote it, so quotes and newlines match too.
    needle = orjson.dumps(text).decode()[1:-1]
    return Where(
        f"instr(lower(COALESCE({alias}.post_data, '') || ' ' || COALESCE({alias}.patch_data, '')), lower(?)) > 0",
        (needle,),
    )


# --- the request ------------------------------------------------------------------------


@dataclass(frozen=True)
class RunQuery:
    """A checked ``POST /runs/query`` body, ready for :meth:`RunStore.query_runs`."""

    where: Where
    page_size: int = MAX_PAGE
    order: Literal["asc", "desc"] = "desc"
    after: tuple[str, int] | None = None
    select: frozenset[str] | None = None


def _ids(body: Mapping[str, Any], key: str) -> list[str]:
    values = body[key]
    if not isinstance(values, list):
        raise QueryError(("body", key), f"{key} must be a list of UUIDs, got {type(values).__name__}")
    if len(values) > _MAX_LIST:
        raise QueryError(("body", key), f"{key} lists {len(values)} ids; at most {_MAX_LIST} in one query")
    out = []
    for index, value in enumerate(values):
        canon = canonical_id(value)
        if canon is None:
            raise QueryError(("body", key, index), f"{key}[{index}] {str(value)[:60]!r} is not a UUID")
        out.append(canon)
    return out


def _one_id(body: Mapping[str, Any], key: str) -> str:
    canon = canonical_id(body[key])
    if canon is None:
        raise QueryError(("body", key), f"{key} {str(body[key])[:60]!r} is not a UUID")
    return canon


# What the hosted service's request models take for a boolean: besides true and false, 0 and 1
# (list_runs' docstring shows is_root=1) and the usual words.
_TRUE_WORDS = frozenset({"1", "true", "t", "yes", "y", "on"})
_FALSE_WORDS = frozenset({"0", "false", "f", "no", "n", "off"})


def flag(value: Any, key: str) -> bool:
    """A boolean as the hosted service reads one: ``true``/``false``, ``1``/``0``, or a word such as ``"yes"``.

    >>> flag(1, "is_root"), flag("False", "error")
    (True, False)
    """
    if isinstance(value, bool):
        return value
    if isinstance(value, (int, float)) and value in (0, 1):
        return bool(value)
    if isinstance(value, str) and value.strip().lower() in _TRUE_WORDS | _FALSE_WORDS:
        return value.strip().lower() in _TRUE_WORDS
    raise QueryError(("body", key), f"{key} must be true or false (or 1 or 0), got {json.dumps(value)[:60]}")


def _flag(body: Mapping[str, Any], key: str) -> bool:
    return flag(body[key], key)


def _in(column: str, values: Sequence[str]) -> Where:
    if not values:
        return Where("0")
    return Where(f"{column} IN ({', '.join('?' * len(values))})", tuple(values))


def parse_run_query(body: Any) -> RunQuery:
    """Check a ``POST /runs/query`` body and turn it into a :class:`RunQuery`; :class:`QueryError` if it cannot be.

    >>> q = parse_run_query({"trace": "0190b3c5f1b87a3e9c1d2e3f4a5b6c7d", "is_root": True, "limit": 2})
    >>> q.where.sql, q.page_size
    ('(r.trace_id = ?) AND (r.parent_run_id IS NULL)', 2)
    """
    if not isinstance(body, dict):
        raise QueryError(("body",), "the body must be a JSON object of query keys")
    body = {k: v for k, v in body.items() if v is not None}
    unknown = sorted(set(body) - set(_BODY_KEYS))
    if unknown:
        hint = "; for a start time range use start_time with filter lt(start_time, \"...\")" if "end_time" in unknown else ""
        raise QueryError(
            ("body", unknown[0]),
            f"{unknown[0]} is not supported by the local service; supported keys: {', '.join(_BODY_KEYS)}{hint}",
        )
    parts: list[Where] = []
    if "session" in body:
        parts.append(_in("r.project_id", _ids(body, "session")))
    if "session_id" in body:
        if isinstance(body["session_id"], list):
            parts.append(_in("r.project_id", _ids(body, "session_id")))
        else:
            parts.append(Where("r.project_id = ?", (_one_id(body, "session_id"),)))
    if "id" in body:
        parts.append(_in("r.id", _ids(body, "id")))
    if "reference_example" in body:
        parts.append(_in("r.reference_example_id", _ids(body, "reference_example")))
    if "trace" in body:
        parts.append(Where("r.trace_id = ?", (_one_id(body, "trace"),)))
    if "parent_run" in body:
        parts.append(Where("r.parent_run_id = ?", (_one_id(body, "parent_run"),)))
    if "run_type" in body:
        run_type = body["run_type"]
        if not isinstance(run_type, str) or not run_type:
            raise QueryError(("body", "run_type"), "run_type must be a run type such as \"llm\" or \"chain\"")
        parts.append(Where("r.run_type = ?", (run_type,)))
    if "is_root" in body:
        parts.append(Where(f"r.parent_run_id IS {'' if _flag(body, 'is_root') else 'NOT '}NULL"))
    if "error" in body:
        parts.append(Where(f"r.error IS {'NOT ' if _flag(body, 'error') else ''}NULL"))
    if "execution_order" in body:
        # The key before dotted_order: 1 was a trace's root. The SDK's docs still show execution_order=1.
        if body["execution_order"] != 1 or isinstance(body["execution_order"], bool):
            raise QueryError(
                ("body", "execution_order"),
                "execution_order: only 1 (the root runs) is supported; runs are ordered by dotted_order now",
            )
        parts.append(Where("r.parent_run_id IS NULL"))
    if "start_time" in body:
        since = sortable_time(body["start_time"])
        if since is None:
            raise QueryError(
                ("body", "start_time"), f"start_time {str(body['start_time'])[:60]!r} is not an ISO 8601 timestamp"
            )
        parts.append(Where("r.start_time >= ?", (since,)))
    if "query" in body:
        if not isinstance(body["query"], str):
            raise QueryError(("body", "query"), "query must be the text to search for")
        parts.append(search_where(body["query"], "r", "query"))
    if "filter" in body:
        parts.append(parse_filter(body["filter"], "filter", "r"))
    if "trace_filter" in body:
        inner = parse_filter(body["trace_filter"], "trace_filter", "t")
        parts.append(
            Where(
                "r.trace_id IN (SELECT t.id FROM runs AS t WHERE t.posted = 1 AND t.parent_run_id IS NULL"
                f" AND ({inner.sql}))",
                inner.params,
            )
        )
    if "tree_filter" in body:
        inner = parse_filter(body["tree_filter"], "tree_filter", "t")
        parts.append(
            Where(f"r.trace_id IN (SELECT t.trace_id FROM runs AS t WHERE t.posted = 1 AND ({inner.sql}))", inner.params)
        )
    order = body.get("order", "desc")
    if order not in ("asc", "desc"):
        raise QueryError(("body", "order"), f"order is \"asc\" or \"desc\", got {json.dumps(order)[:60]}")
    page = MAX_PAGE
    if "limit" in body:
        limit = body["limit"]
        if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
            raise QueryError(("body", "limit"), f"limit must be a whole number of runs, 1 or more, got {json.dumps(limit)[:60]}")
        page = min(limit, MAX_PAGE)
    select = None
    if "select" in body:
        select = _select(body["select"])
    after = _decode_cursor(body["cursor"], order) if "cursor" in body else None
    return RunQuery(Where.all_of(parts), page, order, after, select)


def _select(value: Any) -> frozenset[str]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise QueryError(("body", "select"), "select must be a list of field names")
    unknown = [v for v in value if v not in SELECTABLE]
    if unknown:
        raise QueryError(
            ("body", "select"),
            f"select: unknown field {unknown[0]!r}; supported: {', '.join(sorted(SELECTABLE))}",
        )
    return frozenset(value)


def _encode_cursor(order: str, position: tuple[str, int]) -> str:
    return base64.urlsafe_b64encode(orjson.dumps([order, position[0], position[1]])).decode().rstrip("=")


def _decode_cursor(cursor: Any, order: str) -> tuple[str, int]:
    bad = QueryError(("body", "cursor"), "cursor is not one this service handed out; pass cursors.next unchanged")
    if not isinstance(cursor, str) or len(cursor) > 1000:
        raise bad
    try:
        decoded = orjson.loads(base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)))
    except (binascii.Error, ValueError):
        raise bad from None
    if (
        not isinstance(decoded, list)
        or len(decoded) != 3
        or decoded[0] not in ("asc", "desc")
        or not isinstance(decoded[1], str)
        or isinstance(decoded[2], bool)
        or not isinstance(decoded[2], int)
        or not 0 <= decoded[2] <= _SQL_INT_MAX  # a forged one past 64 bits would reach SQLite
    ):
        raise bad
    if decoded[0] != order:
        raise QueryError(("body", "cursor"), f"cursor belongs to a query in {decoded[0]} order, not {order}")
    return decoded[1], decoded[2]


# --- the answer -----------------------------------------------------------------------------


def _parent_run_ids(dotted_order: Any) -> list[str] | None:
    if not isinstance(dotted_order, str) or not dotted_order:
        return None
    ids = []
    for entry in dotted_order.split(".")[:-1]:
        canon = canonical_id(entry.partition("Z")[2])
        if canon is None:
            return None
        ids.append(canon)
    return ids


def _thread_id(run: Mapping[str, Any]) -> str | None:
    extra = run.get("extra")
    metadata = extra.get("metadata") if isinstance(extra, dict) else None
    if not isinstance(metadata, dict):
        return None
    for key in ("session_id", "thread_id", "conversation_id"):
        if metadata.get(key) is not None:
            return str(metadata[key])
    return None


def api_run(run: Mapping[str, Any], project_id: str | None, select: frozenset[str] | None = None) -> dict[str, Any]:
    """A stored run as the service's read API shows it, whole or only the ``select``-ed fields.

    ``attachments`` never leaves: the SDK builds ``Run(attachments=..., **answer)``
    from what it downloads through ``s3_urls``, so an ``attachments`` key in the
    answer (the SDK's own basic tracing posts ``"attachments": {}``) makes that a
    TypeError. Attachment bytes are not kept here, so ``s3_urls`` is null.
    ``session_id`` is the project's id, however the run named its project.
    """
    computed = {
        "session_id": project_id,
        "status": "error" if run.get("error") is not None else "success" if run.get("end_time") is not None else "pending",
        "parent_run_ids": _parent_run_ids(run.get("dotted_order")),
        "thread_id": _thread_id(run),
    }
    if select is None:
        out = {k: v for k, v in run.items() if k != "attachments"}
        out.update(computed)
        return out
    out = {}
    for name in (*_ALWAYS, *sorted(select)):
        if name in computed:
            out[name] = computed[name]
        elif name in _NOT_KEPT:
            out[name] = None
        else:
            out[name] = run.get(name)
    return out


def page_body(found: Sequence[QueriedRun], query: RunQuery) -> dict[str, Any]:
    """The answer to one page: ``found`` holds up to one run more than the page, which says a next page exists."""
    page = found[: query.page_size]
    more = len(found) > query.page_size
    return {
        "runs": [api_run(q.run, q.project_id, query.select) for q in page],
        "cursors": {"next": _encode_cursor(query.order, page[-1].position) if more and page else None},
    }
