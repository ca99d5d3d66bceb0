"""Redaction: what never leaves the process.

Applied to each run record on the worker thread, before it is encoded, so
nothing hidden reaches the service, the logs or the spool:

* ``hide_inputs`` / ``hide_outputs``: ``True`` sends ``{}``; a callable gets the
  dict and returns what to send.
* ``mask``: a callable applied to inputs, outputs, ``extra.metadata``, the
  events list and the error text; it returns the replacement.
* ``scrub_secrets``: the built-in mask for common secret shapes (API keys,
  bearer tokens, and values whose key names a password, secret, token or key).

A redaction callable that raises fails *closed*: the field is replaced by a
marker rather than sent as it was.

    >>> redact = make_redactor(hide_inputs=True, scrub_secrets=True)
    >>> run = {"inputs": {"q": 1}, "outputs": {"auth": "Bearer abc.def"}, "extra": {"metadata": {"password": "x"}}}
    >>> redact(run)
    >>> run["inputs"], run["outputs"], run["extra"]["metadata"]
    ({}, {'auth': '[REDACTED]'}, {'password': '[REDACTED]'})
"""

from __future__ import annotations

import logging
import re
from typing import Any, Callable

from ._logging import RateLimitedLog
from ._parsed import plain

__all__ = ["make_redactor", "scrub", "REDACTED"]

logger = logging.getLogger(__name__)
_rl = RateLimitedLog(logger)

REDACTED = "[REDACTED]"
_FAILED = "[redaction failed; value withheld]"

# Key names whose values are secrets whatever they look like: the secret word must end
# the key, so "auth_token" and "x-api-key" match but "input_tokens" and "max_tokens" do not.
_SECRET_KEY = re.compile(
    r"(?:^|[._\-\s])(?:pass(?:word|wd)?|pwd|secret(?:[_-]?key)?|token|api[_-]?key|apikey"
    r"|authorization|credentials?|private[_-]?key|access[_-]?key)$",
    re.I,
)
# Shapes of secrets inside free text.
_SECRET_TEXT = re.compile(
    r"(?i:bearer\s+[a-z0-9._~+/=-]{6,})"  # Authorization: Bearer ...
    r"|\bsk-[A-Za-z0-9_-]{16,}"  # OpenAI-style keys
    r"|\bsk-ant-[A-Za-z0-9_-]{16,}"  # Anthropic keys
    r"|\bls(v2)?_(pt|sk)_[A-Za-z0-9_]{16,}"  # the service's own keys
    r"|\bAKIA[0-9A-Z]{16}\b"  # AWS access key ids
    r"|\bgh[pousr]_[A-Za-z0-9]{30,}"  # GitHub tokens
    r"|\bxox[abprs]-[A-Za-z0-9-]{10,}"  # Slack tokens
)
_MAX_DEPTH = 64


def scrub(value: Any, _depth: int = 0) -> Any:
    """The built-in mask: a copy of ``value`` with secret shapes replaced.

    >>> scrub({"api_key": "abc", "text": "use sk-abcdefghijklmnopqrstu now"})
    {'api_key': '[REDACTED]', 'text': 'use [REDACTED] now'}
    """
    if isinstance(value, str):
        return _SECRET_TEXT.sub(REDACTED, value)
    if _depth >= _MAX_DEPTH:
        return value
    if isinstance(value, dict):
        return {
            k: (REDACTED if isinstance(k, str) and _SECRET_KEY.search(k) and v not in (None, "") else scrub(v, _depth + 1))
            for k, v in value.items()
        }
    if isinstance(value, (list, tuple)):
        return [scrub(v, _depth + 1) for v in value]
    return value


def _apply(fn: Callable[[Any], Any], value: Any, what: str) -> Any:
    try:
        return _shaped(fn(value), what)
    except Exception:  # noqa: BLE001 - a user's callable; fail closed
        _rl.error("redact_" + what, "redaction of %s raised; the %s were withheld", what, what, exc_info=True)
        return {"redacted": _FAILED} if isinstance(value, dict) else _FAILED


# The shape the service takes for each field a callable may replace; another shape got the run refused.
_SHAPES: dict[str, tuple[type, Callable[[Any], Any]]] = {
    "inputs": (dict, lambda v: {"input": v}),
    "outputs": (dict, lambda v: {"output": v}),
    "metadata": (dict, lambda v: {"metadata": v}),
    "events": (list, lambda v: [{"name": "redacted", "kwargs": {"value": v}}]),
    "error": (str, str),
}


def _shaped(value: Any, what: str) -> Any:
    """A callable's replacement in the shape its field needs (``mask=lambda v: "[hidden]"`` on inputs
    sends ``{"input": "[hidden]"}``); None stays None."""
    kind, wrap = _SHAPES[what]
    if value is None or isinstance(value, kind):
        return value
    _rl.warning("redact_shape_" + what, "a redaction returned %s for %s; sent wrapped as the service needs it",
                type(value).__name__, what)
    return wrap(value)


def make_redactor(
    hide_inputs: bool | Callable[[dict], dict] = False,
    hide_outputs: bool | Callable[[dict], dict] = False,
    mask: Callable[[Any], Any] | None = None,
    scrub_secrets: bool = False,
) -> Callable[[dict[str, Any]], None] | None:
    """A function that redacts a run record in place, or None when nothing is to be hidden."""
    if not (hide_inputs or hide_outputs or mask or scrub_secrets):
        return None
    masks = [m for m in (mask, scrub if scrub_secrets else None) if m is not None]

    def hide(field: str, rule: Any, run: dict[str, Any]) -> None:
        if field not in run or not rule:
            return
        run[field] = {} if rule is True else _apply(rule, run[field], field)

    def redact(run: dict[str, Any]) -> None:
        for field in ("inputs", "outputs"):
            if field in run:
                # A callable may change the value in place; the encoder must then check it as any value.
                run[field] = plain(run[field])
        hide("inputs", hide_inputs, run)
        hide("outputs", hide_outputs, run)
        for fn in masks:
            for field in ("inputs", "outputs", "events", "error"):
                if field in run:
                    run[field] = _apply(fn, run[field], field)
            extra = run.get("extra")
            if isinstance(extra, dict) and "metadata" in extra:
                extra["metadata"] = _apply(fn, extra["metadata"], "metadata")

    return redact
