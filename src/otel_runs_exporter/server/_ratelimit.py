"""Rate limits of spec 8.1, keyed the way its table says, so clients can be tested against them.

Which rule counts a request: for the routes this service has, the route table
names the rule (a row's ``rate``, :mod:`._routes`), and the rules below with that
``route`` count the requests the row serves. The rows of 8.1 for paths this service
does not serve (``/repos``, ``/generate``, ``/commits``, ...) keep the
regular expression of their path, searched in the path without ``/api/v1``, so
a client of those paths can still be tested against them.

The spec leaves precedence open. The choice here: the rules whose *match* fits
the request are tried in table order, and among them every rule whose identity
is present in the request applies (an API-key rule needs ``x-api-key``, a
user rule needs ``x-user-id``, an IP rule always applies). Only when no specific
rule applies do the default rules (any request with an API key / a user id) and
then the IP catch-all apply. That keeps multipart at its own 6000/10 instead of
also counting it against the 1000/10 default, which would contradict the spec's
"POST /runs/multipart has higher limits".

Windows are fixed: a key's window starts at its first request and the count
resets ``interval`` seconds later; a refused request gets ``Retry-After`` with the
seconds left in the window (whole seconds, at least 1, as HTTP writes it). A
refused request does not count.

For tests, :func:`scaled` divides every count (``otel-runs serve
--rate-limit-scale``) and every window (``--rate-limit-window-scale``), so a
handful of processes reach a limit that takes a fleet in production::

    >>> multipart = next(r for r in SPEC_RULES if r.category == "Multipart ingest")
    >>> small = scaled([multipart], count_divisor=200)[0]
    >>> (small.count, small.interval)
    (30, 10.0)
"""

from __future__ import annotations

import math
import re
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Literal

from ._routes import ROUTER
from ._routing import Rate, strip_prefix

__all__ = ["RateRule", "RateLimiter", "SPEC_RULES", "DEFAULT_RULES", "Refusal", "scaled"]

Identity = Literal["ip", "api_key", "user_ip"]


@dataclass(frozen=True)
class RateRule:
    """One row of the 8.1 table: which requests, keyed by what, how many per how long."""

    category: str
    identity: Identity
    count: int
    interval: float
    method: str | None = None
    """Upper-case method, or None for all methods."""
    pattern: str = ""
    """Regular expression searched in the path (after any ``/api/v1`` prefix is removed); unused with ``route``."""
    route: Rate | None = None
    """The :class:`~._routing.Rate` rows of the route table give this rule: the rule counts the requests they serve."""

    def matches(self, method: str, path: str, route: Rate | None = None) -> bool:
        """Whether this rule counts the request: ``path`` without ``/api/v1``, ``route`` the rule the table names for it."""
        if self.method is not None and method != self.method:
            return False
        if self.route is not None:
            return route is self.route
        return re.search(self.pattern, path) is not None


def _rule(category: str, identity: Identity, count: int, interval: float, pattern: str, method: str | None = None) -> RateRule:
    return RateRule(category, identity, count, interval, method, pattern)


def _routed(category: str, identity: Identity, count: int, interval: float, route: Rate, method: str | None = None) -> RateRule:
    return RateRule(category, identity, count, interval, method, route=route)


# US values where the table gives two.
SPEC_RULES: tuple[RateRule, ...] = (
    _rule("High throughput", "ip", 2000, 10, r"", "OPTIONS"),
    _routed("High throughput", "ip", 2000, 10, Rate.INFO),
    _rule("High throughput", "ip", 2000, 10, r"/v1/metadata/submit$"),
    _rule("High throughput", "api_key", 2000, 10, r"^/auth(/|$)"),
    _rule("High throughput", "user_ip", 2000, 10, r"^/auth(/|$)"),
    _rule("High throughput", "ip", 2000, 10, r"^/v1/beacon(/|$)"),
    _rule("Repository", "api_key", 100, 60, r"^/repos(/|$)"),
    _rule("Repository", "user_ip", 100, 60, r"^/repos(/|$)"),
    _routed("High throughput", "api_key", 2000, 10, Rate.RUNS_BATCH),
    _routed("Run ingest", "api_key", 2000, 10, Rate.OTLP, "POST"),
    _routed("Charts", "api_key", 750, 600, Rate.CHARTS, "POST"),
    _routed("Charts", "user_ip", 750, 600, Rate.CHARTS, "POST"),
    _routed("Multipart ingest", "api_key", 6000, 10, Rate.RUNS_MULTIPART),
    _routed("Run query (API)", "api_key", 15, 10, Rate.RUNS_QUERY),
    _routed("Run query (User)", "user_ip", 300, 10, Rate.RUNS_QUERY),
    _rule("Generation", "api_key", 30, 3600, r"^/generate(/|$)"),
    _rule("Generation", "user_ip", 30, 3600, r"^/generate(/|$)"),
    _rule("Commits", "api_key", 10000, 60, r"^/commits(/|$)"),
    _rule("Commits", "user_ip", 10000, 60, r"^/commits(/|$)"),
    _routed("Deletion", "api_key", 10, 60, Rate.SESSIONS_DELETE, "DELETE"),
    _rule("Deletion", "api_key", 10, 60, r"/trigger/?$"),
    _routed("Deletion", "user_ip", 30, 60, Rate.SESSIONS_DELETE, "DELETE"),
    _rule("Deletion", "user_ip", 30, 60, r"/trigger/?$"),
    _routed("Run ingest", "api_key", 2000, 10, Rate.RUNS_POST),
    _routed("Run ingest", "api_key", 2000, 10, Rate.RUNS_PATCH),
    _routed("High throughput", "api_key", 2000, 10, Rate.FEEDBACK_POST),
    _routed("Run lookup", "api_key", 30, 60, Rate.RUNS_READ, "GET"),
    _rule("Examples", "api_key", 5000, 60, r"/examples", "GET"),
    _rule("Public download", "ip", 5000, 60, r"^/public/download(/|$)"),
    _routed("Stats", "api_key", 1, 10, Rate.RUNS_STATS),
    # Not a row of 8.1: the shared-run reads carry no key, so they are counted by address (a link opened by
    # someone else), at a pace a person paging through a large shared trace stays under.
    _routed("Public shared runs", "ip", 1000, 60, Rate.PUBLIC),
)
"""The specific rows of 8.1, in table order."""

DEFAULT_RULES: tuple[RateRule, ...] = (
    _rule("Default (API key)", "api_key", 1000, 10, r""),
    _rule("Default (User)", "user_ip", 1000, 10, r""),
    _rule("Public (catch-all)", "ip", 100, 60, r""),
)
"""Rows that apply only when no specific row does, in that order."""


def scaled(rules: Sequence[RateRule], count_divisor: float = 1.0, window_divisor: float = 1.0) -> tuple[RateRule, ...]:
    """``rules`` with each count divided by ``count_divisor`` (rounded down, at least 1)
    and each window divided by ``window_divisor``."""
    if count_divisor <= 0 or window_divisor <= 0:
        raise ValueError("divisors must be greater than 0")
    return tuple(
        replace(
            rule,
            count=max(1, math.floor(rule.count / count_divisor)),
            interval=float(rule.interval) / window_divisor,
        )
        for rule in rules
    )


@dataclass(frozen=True)
class Refusal:
    """A request over its limit: the rule it hit and when to come back."""

    rule: RateRule
    retry_after: int

    @property
    def message(self) -> str:
        """The 429 body's detail."""
        return (
            f"Rate limit exceeded ({self.rule.category}: {self.rule.count} requests per "
            f"{self.rule.interval:g}s keyed by {self.rule.identity}); retry after {self.retry_after}s"
        )


def _identity_key(identity: Identity, headers: Mapping[str, str], ip: str) -> str | None:
    if identity == "ip":
        return ip
    if identity == "api_key":
        return headers.get("x-api-key") or None
    user = headers.get("x-user-id")
    return f"{user}@{ip}" if user else None


class RateLimiter:
    """Counts requests per (rule, identity) in fixed windows; thread-safe.

    ``clock`` is injectable so tests can move time instead of sleeping.
    """

    def __init__(
        self,
        rules: Sequence[RateRule] = SPEC_RULES,
        defaults: Sequence[RateRule] = DEFAULT_RULES,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.rules = tuple(rules)
        self.defaults = tuple(defaults)
        self._clock = clock
        self._lock = threading.Lock()
        self._windows: dict[tuple[int, str], tuple[float, int]] = {}

    def applicable(self, method: str, path: str, headers: Mapping[str, str], ip: str) -> list[tuple[RateRule, str]]:
        """The rules (with identity keys) that count this request, per the precedence above.

        ``path`` is the URL path as sent.
        """
        served = ROUTER.match(method, path).route
        route = served.rate if served is not None else None
        path = strip_prefix(path)
        for group in (self.rules, self.defaults):
            chosen = []
            for rule in group:
                if not rule.matches(method, path, route):
                    continue
                key = _identity_key(rule.identity, headers, ip)
                if key is not None:
                    chosen.append((rule, key))
                    if group is self.defaults:
                        return chosen  # defaults are alternatives, not cumulative
            if chosen:
                return chosen
        return []

    def hit(self, method: str, path: str, headers: Mapping[str, str], ip: str) -> Refusal | None:
        """Count one request; return a Refusal if any applicable rule is over its limit.

        ``headers`` must have lower-case names.
        """
        rules = self.applicable(method, path, headers, ip)
        now = self._clock()
        with self._lock:
            refusal: Refusal | None = None
            for rule, key in rules:
                slot = (id(rule), key)
                start, used = self._windows.get(slot, (now, 0))
                if now - start >= rule.interval:
                    start, used = now, 0
                if used >= rule.count:
                    wait = max(1, math.ceil(rule.interval - (now - start)))
                    if refusal is None or wait > refusal.retry_after:
                        refusal = Refusal(rule, wait)
                    continue
                self._windows[slot] = (start, used + 1)
            return refusal

    def reset(self) -> None:
        """Forget every window."""
        with self._lock:
            self._windows.clear()
