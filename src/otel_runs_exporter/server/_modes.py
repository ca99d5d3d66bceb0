"""Which rule violations the local service refuses: its three validation modes.

Every request is checked against every rule of :mod:`._validate`, and every
violation found is recorded (``otel-runs runs check``, the viewer, :meth:`LocalService.violations
<._app.LocalService.violations>`). The mode only decides whether the request is
then refused (422, nothing stored) or stored anyway:

``hosted`` (the default)
    Refuses what the hosted service refuses, stores what it stores: a local stand-in
    must not be stricter than the service it stands in for, or an app that works
    there fails here. The rules the hosted service does not enforce are
    :data:`HOSTED_ACCEPTS`; their violations are stored and recorded as accepted.
``strict`` (``otel-runs serve --strict``, ``LocalService(strict=True)``)
    Refuses every violation: what this project's own tests run, so the exporter's
    output stays held to every rule.
``lenient`` (``--lenient``)
    Stores whatever can be read, refusing nothing, for looking at what a broken
    producer sends.

>>> from ._validate import Violation
>>> late = Violation("r1", "start_time_entry", "start_time does not match its dotted_order entry")
>>> bad_id = Violation("r1", "uuid", "id is not a UUID")
>>> [refuses(m, [late]) for m in ("strict", "hosted", "lenient")]
[True, False, False]
>>> refuses("hosted", [late, bad_id])
True
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Literal

from ._validate import LIMIT_RULES, Violation

__all__ = ["Validation", "VALIDATION_MODES", "HOSTED_ACCEPTS", "refuses", "mode_from_flags"]

Validation = Literal["strict", "hosted", "lenient"]
VALIDATION_MODES: tuple[Validation, ...] = ("hosted", "strict", "lenient")

HOSTED_ACCEPTS = frozenset(
    {
        # The SDK builds a run's dotted_order entry from its start time as a wall clock: an aware
        # start_time in another zone than UTC, or a start_time changed after the run was made, gives
        # an entry that disagrees with start_time. The hosted service takes such runs (it orders by
        # dotted_order and shows start_time); it does refuse entries out of order along the chain.
        "start_time_entry",
    }
)
"""Rules the hosted service does not enforce: in ``hosted`` mode their violations are stored and recorded."""


def refuses(mode: Validation, violations: Iterable[Violation]) -> bool:
    """Whether a request with these violations is refused (422) in ``mode``."""
    if mode == "lenient":
        # A limit (a dotted_order past MAX_DEPTH) is what keeps the store bounded: refused in every mode.
        return any(v.rule in LIMIT_RULES for v in violations)
    if mode == "strict":
        return any(True for _ in violations)
    return any(v.rule not in HOSTED_ACCEPTS for v in violations)


def mode_from_flags(*, strict: bool, lenient: bool) -> Validation:
    """The mode ``strict=`` and ``lenient=`` name; both at once is a ValueError saying why.

    >>> mode_from_flags(strict=False, lenient=False), mode_from_flags(strict=True, lenient=False)
    ('hosted', 'strict')
    """
    if strict and lenient:
        raise ValueError(
            "strict and lenient exclude each other: strict refuses every rule violation, lenient none; "
            "leave both off to refuse what the hosted service refuses"
        )
    return "strict" if strict else "lenient" if lenient else "hosted"
