"""What a model run used and cost: its tokens and models as a run reports them, and a dated price table.

Shared by the exporter (which stamps costs into ``usage_metadata`` when given a price
file) and the local service (which prices every stored model run and rolls costs up).

Tokens are read where the service's SDK and this package's mapping put them:
``outputs.usage_metadata`` (``input_tokens``, ``output_tokens``, ``total_tokens``, with
``input_token_details.cache_read`` and ``output_token_details.reasoning`` as parts of
them), else ``extra.metadata``'s ``usage_metadata`` or token keys. Models, in the order
a price is looked for:

1. what ran: ``metadata.response_model`` (this package's mapping keeps it when it
   differs from the model asked for), ``outputs.model`` (the OpenAI client's
   response, as the SDK's wrapper records it), ``outputs.llm_output.model_name``;
2. what was asked for: ``metadata.ls_model_name``, then ``invocation_params.model``.

The first the table has is the price (a dated snapshot is priced as itself when the
table has it); ``metadata.ls_provider`` picks a ``provider/model`` row first. A model
no row names has no price: its cost is None, never 0. Prices are per million tokens
in the file (:data:`PRICES_FILE`), per token here::

    input cost  = (input tokens - cache reads) * input + cache reads * cache_read
    output cost = (output tokens - reasoning) * output + reasoning * reasoning

(``cache_read`` and ``reasoning`` default to ``input`` and ``output``). A cost the run
carries (``usage_metadata``'s ``input_cost``, ``output_cost``, ``total_cost``, the
service's own fields) wins over a computed one.

>>> table = PriceTable.load()
>>> usage = usage_of({"run_type": "llm", "extra": {"metadata": {"ls_model_name": "gpt-4o-mini"}},
...                   "outputs": {"usage_metadata": {"input_tokens": 1000, "output_tokens": 500}}})
>>> cost = table.cost(usage)
>>> cost.priced_as, round(cost.input, 6), round(cost.output, 6), round(cost.total, 6)
('gpt-4o-mini', 0.00015, 0.0003, 0.00045)
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

__all__ = [
    "PRICES_FILE", "Usage", "Cost", "Price", "PriceTable", "PriceFileError", "usage_of", "token_counts", "stamp_cost",
    "USAGE_KEYS",
]

PRICES_FILE = "prices.json"
"""The shipped table, package data beside this module: the common providers' models, dated."""
_PER = 1_000_000
_TOKEN_KEYS = (
    ("in", ("input_tokens", "prompt_tokens", "gen_ai.usage.input_tokens", "gen_ai.usage.prompt_tokens")),
    ("out", ("output_tokens", "completion_tokens", "gen_ai.usage.output_tokens", "gen_ai.usage.completion_tokens")),
    ("total", ("total_tokens", "gen_ai.usage.total_tokens", "llm.usage.total_tokens")),
)
_COST_KEYS = ("input_cost", "output_cost", "total_cost")
#: What a run's ``outputs.usage_metadata`` may hold (dotted for a detail), as the service's SDK posts it
#: (its ``UsageMetadata``): the counts priced here, and the details that are parts of them. The mapping
#: writes no other key (a test holds it to this list), so every count it finds is one a cost can read.
USAGE_KEYS = frozenset({
    "input_tokens", "output_tokens", "total_tokens", "reasoning_tokens",
    "input_token_details.cache_read", "input_token_details.cache_creation", "input_token_details.audio",
    "output_token_details.reasoning", "output_token_details.audio",
})
_DATED = re.compile(r"(?:[-@]\d{4}-?\d{2}-?\d{2}|-\d{4})$")


class PriceFileError(ValueError):
    """A price file that cannot be read, naming the file and what is wrong."""


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) and value >= 0 else None


def _usage_sources(run: Mapping[str, Any]) -> Iterator[Mapping[str, Any]]:
    outputs = run.get("outputs")
    if isinstance(outputs, Mapping) and isinstance(outputs.get("usage_metadata"), Mapping):
        yield outputs["usage_metadata"]
    extra = run.get("extra")
    metadata = extra.get("metadata") if isinstance(extra, Mapping) else None
    if isinstance(metadata, Mapping):
        if isinstance(metadata.get("usage_metadata"), Mapping):
            yield metadata["usage_metadata"]
        yield metadata


def _counts(source: Mapping[str, Any]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for label, keys in _TOKEN_KEYS:
        for key in keys:
            value = source.get(key)
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                counts[label] = int(value)
                break
    if counts and "total" not in counts and "in" in counts and "out" in counts:
        counts["total"] = counts["in"] + counts["out"]
    return counts


def token_counts(run: Mapping[str, Any]) -> dict[str, int]:
    """Token counts (``in``, ``out``, ``total``) from the first usage source that has any.

    >>> token_counts({"outputs": {"usage_metadata": {"input_tokens": 3, "output_tokens": 2}}})
    {'in': 3, 'out': 2, 'total': 5}
    """
    for source in _usage_sources(run):
        counts = _counts(source)
        if counts:
            return counts
    return {}


@dataclass(frozen=True)
class Usage:
    """A run's tokens and the models it names, in the order a price is looked for."""

    models: tuple[str, ...] = ()
    provider: str | None = None
    input: int | None = None
    output: int | None = None
    total: int | None = None
    cache_read: int = 0
    reasoning: int = 0
    carried: tuple[float | None, float | None, float | None] = (None, None, None)

    @property
    def model(self) -> str | None:
        """The model to show: what ran, else what was asked for."""
        return self.models[0] if self.models else None


def _text(value: Any) -> str | None:
    return value.strip() if isinstance(value, str) and value.strip() else None


def usage_of(run: Mapping[str, Any]) -> Usage:
    """The tokens and models of a run (posted and patched, merged), wherever the common clients put them."""
    extra = run.get("extra") if isinstance(run.get("extra"), Mapping) else {}
    metadata = extra.get("metadata") if isinstance(extra.get("metadata"), Mapping) else {}
    params = extra.get("invocation_params") if isinstance(extra.get("invocation_params"), Mapping) else {}
    outputs = run.get("outputs") if isinstance(run.get("outputs"), Mapping) else {}
    llm_output = outputs.get("llm_output") if isinstance(outputs.get("llm_output"), Mapping) else {}
    # An output's "model" is a response's only in a model run; a chain's outputs are the app's own.
    answered = (outputs.get("model"), llm_output.get("model_name")) if run.get("run_type") == "llm" else ()
    candidates = (
        metadata.get("response_model"), *answered, metadata.get("ls_model_name"), params.get("model"),
        params.get("model_name"),
    )
    models = tuple(dict.fromkeys(m for m in (_text(c) for c in candidates) if m is not None))
    source = next((s for s in _usage_sources(run) if _counts(s)), None)
    if source is None:
        return Usage(models, _text(metadata.get("ls_provider")))
    counts = _counts(source)
    details_in = source.get("input_token_details") if isinstance(source.get("input_token_details"), Mapping) else {}
    details_out = source.get("output_token_details") if isinstance(source.get("output_token_details"), Mapping) else {}
    reasoning = _number(details_out.get("reasoning")) or _number(source.get("reasoning_tokens")) or 0
    carried = tuple(_number(source.get(k)) for k in _COST_KEYS)
    return Usage(
        models, _text(metadata.get("ls_provider")), counts.get("in"), counts.get("out"), counts.get("total"),
        int(_number(details_in.get("cache_read")) or 0), int(reasoning), (carried[0], carried[1], carried[2]),
    )


@dataclass(frozen=True)
class Price:
    """One model's prices, USD per token (cache reads and reasoning at input and output prices when not given)."""

    input: float
    output: float
    cache_read: float | None = None
    reasoning: float | None = None


@dataclass(frozen=True)
class Cost:
    """What a run cost, USD: ``input`` (prompt), ``output`` (completion), their ``total``; the row it was priced by."""

    input: float
    output: float
    total: float
    priced_as: str | None

    @staticmethod
    def of(usage: Usage, price: Price | None, priced_as: str | None) -> Cost | None:
        """The carried cost where the run has one, else the price's; None when neither says."""
        carried_in, carried_out, carried_total = usage.carried
        if carried_in is not None or carried_out is not None or carried_total is not None:
            total = carried_total if carried_total is not None else (carried_in or 0.0) + (carried_out or 0.0)
            return Cost(carried_in or 0.0, carried_out or 0.0, total, "carried")
        if price is None or (usage.input is None and usage.output is None):
            return None
        cache = min(usage.cache_read, usage.input or 0)
        reasoning = min(usage.reasoning, usage.output or 0)
        cost_in = ((usage.input or 0) - cache) * price.input + cache * (
            price.cache_read if price.cache_read is not None else price.input
        )
        cost_out = ((usage.output or 0) - reasoning) * price.output + reasoning * (
            price.reasoning if price.reasoning is not None else price.output
        )
        return Cost(cost_in, cost_out, cost_in + cost_out, priced_as)


def _price_row(name: str, row: Any, origin: str) -> Price:
    if not isinstance(row, Mapping):
        raise PriceFileError(f"{origin}: models.{name} must be an object with input and output prices")
    prices: dict[str, float | None] = {}
    for key in ("input", "output", "cache_read", "reasoning"):
        value = row.get(key)
        if value is None and key in ("cache_read", "reasoning"):
            prices[key] = None
            continue
        number = _number(value)
        if number is None:
            raise PriceFileError(f"{origin}: models.{name}.{key} must be a price of 0 or more (USD per million tokens)")
        prices[key] = number / _PER
    return Price(prices["input"] or 0.0, prices["output"] or 0.0, prices["cache_read"], prices["reasoning"])


class PriceTable:
    """Model name (lower case, or ``provider/model``) -> :class:`Price`, and the date the prices are from."""

    def __init__(self, rows: Mapping[str, Price], updated: str | None = None, sources: Iterable[str] = ()) -> None:
        self.rows = {name.lower(): price for name, price in rows.items()}
        self.updated = updated
        self.sources = tuple(sources)

    @classmethod
    def load(cls, path: str | Path | None = None) -> PriceTable:
        """The shipped table, with a user's file (same shape) over it: its rows replace or add models."""
        shipped = json.loads(resources.files(__package__).joinpath(PRICES_FILE).read_text(encoding="utf-8"))
        rows = {name: _price_row(name, row, PRICES_FILE) for name, row in shipped["models"].items()}
        updated, sources = shipped.get("updated"), [f"{PRICES_FILE} ({shipped.get('updated')})"]
        if path is not None:
            try:
                given = json.loads(Path(path).read_text(encoding="utf-8"))
            except (OSError, ValueError) as exc:
                raise PriceFileError(f"cannot read the price file {path}: {exc}") from None
            models = given.get("models") if isinstance(given, Mapping) else None
            if not isinstance(models, Mapping):
                raise PriceFileError(f'{path}: expected {{"models": {{"model name": {{"input": 2.5, "output": 10}}}}}}')
            rows.update({str(name): _price_row(str(name), row, str(path)) for name, row in models.items()})
            updated = given.get("updated") or updated
            sources.append(f"{path} ({given.get('updated') or 'undated'})")
        return cls(rows, updated if isinstance(updated, str) else None, sources)

    def __repr__(self) -> str:
        return f"PriceTable({len(self.rows)} models, updated {self.updated}, from {', '.join(self.sources)})"

    def fingerprint(self) -> str:
        """Changes when any price does: a store reprices what it holds when it sees another one."""
        return json.dumps(sorted((k, p.input, p.output, p.cache_read, p.reasoning) for k, p in self.rows.items()))

    def lookup(self, models: Iterable[str], provider: str | None = None) -> tuple[str, Price] | None:
        """The first of ``models`` the table prices (as written, then without a date suffix), and its price.

        >>> PriceTable.load().lookup(["my-model", "gpt-4o-2024-05-13", "gpt-4o"])[0]
        'gpt-4o-2024-05-13'
        >>> PriceTable.load().lookup(["openai/gpt-4o-mini"])[0], PriceTable.load().lookup(["no-such-model"])
        ('gpt-4o-mini', None)
        """
        names = [m.strip().lower() for m in models if m and m.strip()]
        tries = [self._forms(n) for n in names] + [self._forms(_DATED.sub("", n)) for n in names if _DATED.search(n)]
        for forms in tries:
            for form in forms:
                keys = ([f"{provider.lower()}/{form}"] if provider else []) + [form]
                for key in keys:
                    if key in self.rows:
                        return key, self.rows[key]
        return None

    @staticmethod
    def _forms(name: str) -> list[str]:
        # "openai/gpt-4o", "models/gemini-2.0-flash", "accounts/x/models/y": the name, then its last segment.
        return [name] + ([name.rsplit("/", 1)[1]] if "/" in name else [])

    def cost(self, usage: Usage) -> Cost | None:
        """What the run cost: its carried cost, else its tokens at the first price found; None: no price."""
        found = self.lookup(usage.models, usage.provider)
        return Cost.of(usage, found[1] if found else None, found[0] if found else None)


def stamp_cost(run: dict[str, Any], table: PriceTable) -> None:
    """Write the run's cost at ``table``'s prices into its ``outputs.usage_metadata`` (``input_cost``,
    ``output_cost``, ``total_cost``): what the exporter does with a price file. A run that carries a cost, has
    no ``usage_metadata`` in its outputs, or whose model has no price is left as it is.

    >>> run = {"run_type": "llm", "extra": {"metadata": {"ls_model_name": "gpt-4o-mini"}},
    ...        "outputs": {"usage_metadata": {"input_tokens": 1000, "output_tokens": 0}}}
    >>> stamp_cost(run, PriceTable.load()); round(run["outputs"]["usage_metadata"]["total_cost"], 6)
    0.00015
    """
    outputs = run.get("outputs")
    usage = outputs.get("usage_metadata") if isinstance(outputs, dict) else None
    if not isinstance(usage, dict) or any(usage.get(key) is not None for key in _COST_KEYS):
        return
    cost = table.cost(usage_of(run))
    if cost is not None and cost.priced_as != "carried":
        usage.update(input_cost=cost.input, output_cost=cost.output, total_cost=cost.total)
