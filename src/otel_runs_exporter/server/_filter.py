"""Filter expressions of the local service's read API: parsed, checked, and turned into SQL.

The documented syntax the SDK builds itself (``read_thread``'s ``and(eq(thread_id, "..."), <filter>)``)
and shows in ``list_runs``' docstring; ``POST /runs/query`` (:mod:`._query`), ``/api/v2``
(:mod:`._v2`) and threads (:mod:`._threads`) all take it::

    and(e, ...)   or(e, ...)   not(e)
    eq(field, value)   neq(field, value)          value: "text", 'text', number, true, false, null
    gt / gte / lt / lte(field, value)             start_time, end_time (ISO 8601), latency (seconds)
    has(tags, "tag")   has(metadata, '{"key": "value"}')   exists(metadata, "key")
    and(eq(metadata_key, "key"), eq(metadata_value, "value"))     one metadata entry with that key and value
    search("text")                                case-insensitive (ASCII), anywhere in the stored run

Pure: :func:`parse_filter` gives a :class:`Where` (a SQL condition over ``runs AS <alias>``
built from the fixed expressions of :data:`FIELDS`, every value a bound parameter) or raises
a :class:`QueryError` naming the request's key and saying what is supported (a 422).
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

import orjson

from . import _store_search as store_search
from ._numbers import SQL_INT_MAX
from ._reply import Refuse
from ._store_schema import sortable_time
from ._validate import canonical_id

__all__ = ["FIELDS", "QueryError", "Where", "parse_filter", "search_where"]

_MAX_FILTER_CHARS = 10_000
_MAX_DEPTH = 32
# What one expression may ask of every stored run: a search() reads the run's whole text (a short one
# without the index), so 760 of them in 10,000 characters held the store for 15 s; one has(metadata)
# key is one json_extract, and SQLite refuses past ~1,000 terms.
_MAX_SEARCHES = 8
_MAX_METADATA_KEYS = 64

Kind = Literal[
    "id", "text", "time", "number", "bool", "status", "tags", "metadata", "feedback_key", "feedback_score",
    "metadata_key", "metadata_value",
]

_STATUS_SQL = "(CASE WHEN {t}.error IS NOT NULL THEN 'error' WHEN {t}.end_time IS NOT NULL THEN 'success' ELSE 'pending' END)"
# The metadata keys the service reads a thread from, the first present winning; CAST, because a
# numeric thread id must still equal the text read_thread sends.
_THREAD_SQL = (
    "CAST(COALESCE(json_extract({t}.metadata, '$.session_id'), json_extract({t}.metadata, '$.thread_id'),"
    " json_extract({t}.metadata, '$.conversation_id')) AS TEXT)"
)

# A metadata entry's value as text (json_each over the run's metadata as ``m``): what the hosted service, which keeps
# metadata values as text, compares metadata_value with; a number 5 is "5", true is "true", an object its JSON.
_METADATA_TEXT = (
    "(CASE m.type WHEN 'true' THEN 'true' WHEN 'false' THEN 'false' WHEN 'null' THEN 'null'"
    " ELSE CAST(m.value AS TEXT) END)"
)

# A run's own column, or for a root the sum over its trace (the read API puts a trace's totals on its root).
_TRACE_TOTAL = (
    "(CASE WHEN {{t}}.parent_run_id IS NULL THEN (SELECT SUM(tot.{c}) FROM runs AS tot"
    " WHERE tot.trace_id = {{t}}.trace_id AND tot.posted = 1) ELSE {{t}}.{c} END)"
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
    "model": ("{t}.model", "text"),
    # Tokens as the read API answers them: a run's own, a root's the whole trace's.
    "prompt_tokens": (_TRACE_TOTAL.format(c="prompt_tokens"), "number"),
    "completion_tokens": (_TRACE_TOTAL.format(c="completion_tokens"), "number"),
    "total_tokens": (_TRACE_TOTAL.format(c="total_tokens"), "number"),
    # Feedback kept for the run (:mod:`._feedback`): a condition on one item of it, as the hosted service reads
    # and(eq(feedback_key, "k"), eq(feedback_score, 1)): an item with that key and that score.
    "feedback_key": ("f.key", "feedback_key"),
    "feedback_score": ("f.score", "feedback_score"),
    # One entry of the run's metadata, as the service's SDK and its users find runs by metadata:
    # and(eq(metadata_key, "k"), eq(metadata_value, "v")) is an entry with that key and that value.
    "metadata_key": ("m.key", "metadata_key"),
    "metadata_value": (_METADATA_TEXT, "metadata_value"),
}
"""Filter field -> (SQL expression over the store's ``runs`` columns, with ``{t}`` the table alias; kind)."""

_COMPARATORS = ("eq", "neq", "gt", "gte", "lt", "lte")
_FUNCTIONS = ("and", "or", "not", *_COMPARATORS, "has", "exists", "search")
_STATUSES = ("success", "error", "pending")



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




def _sql_int(raw: str) -> int | None:
    """``raw`` as an int SQLite can bind, else None."""
    if len(raw.lstrip("-")) > 19:
        return None
    value = int(raw)
    return value if -SQL_INT_MAX - 1 <= value <= SQL_INT_MAX else None


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
        self.searches = 0

    def call(self, node: _Call) -> Where:
        name = node.name
        if name in ("and", "or"):
            if not node.args:
                raise self.p.error(f"{name}() needs at least one condition", node.pos)
            calls: list[_Call | Where] = [self.condition(arg, name) for arg in node.args]
            if name == "and":
                calls = self.one_metadata_entry(self.one_feedback_item(calls))
            parts = [c if isinstance(c, Where) else self.call(c) for c in calls]
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
            self.searches += 1
            if self.searches > _MAX_SEARCHES:
                raise self.p.error(f"at most {_MAX_SEARCHES} search() in one expression: each reads every run", node.pos)
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

    def one_metadata_entry(self, calls: list[_Call | Where]) -> list[_Call | Where]:
        """In and(): one ``metadata_key`` and one ``metadata_value`` are about one entry (the rest stays as it was)."""
        keys = [c for c in calls if isinstance(c, _Call) and self.field_name(c) == "metadata_key"]
        values = [c for c in calls if isinstance(c, _Call) and self.field_name(c) == "metadata_value"]
        if len(keys) != 1 or len(values) != 1:
            return calls
        entry = Where.all_of([self.metadata_condition(keys[0]), self.metadata_condition(values[0])])
        return [*(c for c in calls if c is not keys[0] and c is not values[0]), self.metadata_exists(entry)]

    def metadata_exists(self, entry: Where) -> Where:
        return Where(f"EXISTS (SELECT 1 FROM json_each({self.alias}.metadata) AS m WHERE {entry.sql})", entry.params)

    def metadata_condition(self, node: _Call) -> Where:
        """``m.key = ?`` or the entry's value as text ``= ?``, over one metadata entry ``m``."""
        name, sql, kind, lit = self.field_and_value(node, f"{node.name}() takes a field and a value")
        usage = f'{name} takes eq() and a value, as in and(eq(metadata_key, "user"), eq(metadata_value, "u1"))'
        if node.name != "eq" or lit.value is None or (kind == "metadata_key" and not isinstance(lit.value, str)):
            raise self.p.error(usage, node.pos)
        value = lit.value if isinstance(lit.value, str) else json.dumps(lit.value)
        return Where(f"{sql} = ?", (value,))

    def field_name(self, node: _Call) -> str | None:
        first = node.args[0] if node.args else None
        return first.name if isinstance(first, _Ident) else None

    def one_feedback_item(self, calls: list[_Call | Where]) -> list[_Call | Where]:
        """In and(): a feedback key and score comparisons are about one item (the rest stays as it was)."""
        key = [c for c in calls if isinstance(c, _Call) and c.name == "eq" and self.feedback_field(c) == "feedback_key"]
        scores = [c for c in calls if isinstance(c, _Call) and self.feedback_field(c) == "feedback_score"]
        if len(key) != 1 or not scores:
            return list(calls)
        joined = [self.feedback_condition(c) for c in (*key, *scores)]
        item = Where.all_of(joined)
        rest: list[_Call | Where] = [c for c in calls if c is not key[0] and c not in scores]
        return [*rest, self.feedback_exists(item)]

    def feedback_field(self, node: _Call) -> str | None:
        name = self.field_name(node)
        return name if name in ("feedback_key", "feedback_score") else None

    def feedback_exists(self, item: Where) -> Where:
        return Where(f"EXISTS (SELECT 1 FROM feedback AS f WHERE f.run_id = {self.alias}.id AND {item.sql})", item.params)

    def feedback_condition(self, node: _Call) -> Where:
        """``f.key = ?`` or ``f.score <op> ?`` over one feedback item ``f``."""
        func = node.name
        name, sql, kind, lit = self.field_and_value(node, f"{func}() takes a field and a value")
        if kind == "feedback_key":
            if func != "eq" or not isinstance(lit.value, str):
                raise self.p.error('feedback_key takes eq() and a quoted key, as in eq(feedback_key, "thumbs")', node.pos)
            return Where("f.key = ?", (lit.value,))
        if func not in _COMPARATORS or isinstance(lit.value, bool) or not isinstance(lit.value, (int, float)):
            raise self.p.error("feedback_score is compared with a number, as in gte(feedback_score, 1)", node.pos)
        op = {"eq": "=", "neq": "!=", "gt": ">", "gte": ">=", "lt": "<", "lte": "<="}[func]
        return Where(f"f.score {op} ?", (lit.value,))

    def compare(self, node: _Call) -> Where:
        func = node.name
        if self.feedback_field(node) is not None:
            return self.feedback_exists(self.feedback_condition(node))
        if self.field_name(node) in ("metadata_key", "metadata_value"):
            # Alone: the run has an entry with that key (or some entry with that value).
            return self.metadata_exists(self.metadata_condition(node))
        name, sql, kind, lit = self.field_and_value(node, f"{func}() takes a field and a value")
        if kind in ("tags", "metadata"):
            raise self.p.error(f"{name} is matched with has() or exists(), not {func}()", node.pos)
        ordered = func in ("gt", "gte", "lt", "lte")
        if ordered and kind not in ("time", "number"):
            raise self.p.error(f"{func}() compares times and numbers (start_time, end_time, latency, tokens), not {name}", node.pos)
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
                raise self.p.error(f"{name} is a number" + (" of seconds" if name == "latency" else ""), lit.pos)
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
        except (ValueError, RecursionError):  # not JSON, or nested past the parser's stack
            wanted = None
        if not isinstance(wanted, dict) or not wanted:
            raise self.p.error(f"has(metadata, ...) takes a non-empty JSON object as a string, as in {hint}", lit.pos)
        if len(wanted) > _MAX_METADATA_KEYS:
            raise self.p.error(f"has(metadata, ...) takes at most {_MAX_METADATA_KEYS} keys, got {len(wanted)}", lit.pos)
        pairs = []
        for key, value in wanted.items():
            if value is None or isinstance(value, (dict, list)):
                raise self.p.error(f"has(metadata, ...) matches text, numbers and booleans; {key[:40]!r} is not one", lit.pos)
            if isinstance(value, int) and not isinstance(value, bool) and not -SQL_INT_MAX - 1 <= value <= SQL_INT_MAX:
                raise self.p.error(f"has(metadata, ...): the number for {key[:40]!r} is out of range", lit.pos)
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
    """Case-insensitive (ASCII) substring anywhere in the stored run, as the client sent it.

    Through the search index when it can (:mod:`._store_search`): its candidates, checked by the same condition.
    """
    if not text.strip():
        raise QueryError(("body", key), f"{key}: the search text is empty")
    # The stored run is JSON: look for the text as orjson wrote it, so quotes and newlines match too.
    needle = orjson.dumps(text).decode()[1:-1]
    scan = Where(f"instr(lower({store_search.TEXT.format(t=alias)}), lower(?)) > 0", (needle,))
    if len(needle) < store_search.MIN_CHARS or not store_search.available():
        return scan
    return Where(
        f"{alias}.seq IN (SELECT rowid FROM runs_fts WHERE runs_fts MATCH ?) AND {scan.sql}",
        (store_search.match(needle), *scan.params),
    )