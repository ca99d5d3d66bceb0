"""Mixed run trees with the service's own SDK (``langsmith``) in one process.

A user with ``@traceable`` functions (runs the SDK sends) and OTel-instrumented
libraries (runs we send) gets one tree, in both directions:

* an OTel span started while an SDK run is current nests under that run
  (:func:`current_sdk_run`, asked by the processor's ``on_start``);
* an SDK run started while one of our spans is current nests under that span's
  run: the SDK asks ``run_helpers._get_parent_run`` for a parent, and the hook
  installed here answers with our run when ours is the innermost.

The first direction uses only the SDK's public ``get_current_run_tree``. The
second has no public hook (``tracing_context(parent=...)`` needs the user's
code), so it wraps one internal function; that is kept to this module, checked
against :data:`TESTED_VERSIONS`, and tested against the pinned SDK. Nothing
here imports ``langsmith``: the processor calls in only once the application
has imported it.

The bridge stays off with ``OTEL_EXPORTER_RUNS_LANGSMITH_BRIDGE=false``, and
when the SDK runs in its own OTel mode (``LANGSMITH_OTEL_ENABLED=true``,
``LANGSMITH_TRACING_MODE=otel`` ...; ``_settings`` reads it as the SDK does): its
spans then come through us already, and bridging would send them twice.
"""

from __future__ import annotations

import logging
import sys
from datetime import datetime, timezone
from typing import Any
from uuid import UUID

from opentelemetry import trace

from . import _registry
from ._fork import ForkSafeLock
from ._ids import DottedOrderError, RunIds, ids_from_dotted_order
from ._logging import RateLimitedLog

__all__ = ["current_sdk_run", "install_parent_hook", "sdk_run_helpers", "TESTED_VERSIONS"]

logger = logging.getLogger(__name__)

# (major, minor) releases of langsmith the internal hook was tested with.
TESTED_VERSIONS = ((0, 15),)
_MODULE = "langsmith.run_helpers"

_lock = ForkSafeLock()

_hooked: Any = None  # the run_helpers module whose _get_parent_run we wrapped
_once = RateLimitedLog(logger, interval_s=float("inf"))  # each problem said once per process


def sdk_run_helpers() -> Any:
    """``langsmith.run_helpers`` if the application imported it, else None (never imports it)."""
    return sys.modules.get(_MODULE)


def current_sdk_run(run_helpers: Any) -> RunIds | None:
    """The SDK's current run as :class:`RunIds` (with its project), or None."""
    try:
        run_tree = run_helpers.get_current_run_tree()
    except Exception:  # noqa: BLE001 - the SDK's trouble must not become the app's
        return None
    if run_tree is None:
        return None
    dotted_order = getattr(run_tree, "dotted_order", None)
    if not dotted_order:
        return None
    try:
        return ids_from_dotted_order(dotted_order, getattr(run_tree, "session_name", None))
    except DottedOrderError:
        _once.warning("bad_dotted_order", "the langsmith SDK's current run has a dotted_order we cannot read; not nesting under it")
        return None


def innermost(ours: RunIds | None, sdk: RunIds | None) -> RunIds | None:
    """Of two candidate parents, the one nested inside the other; ``ours`` when unrelated.

    >>> a = ids_from_dotted_order("20231114T221320000001Z018bcfe5-6800-7000-8000-000000000001")
    >>> b = ids_from_dotted_order(a.dotted_order + ".20231114T221320000002Z018bcfe5-6800-7000-8000-000000000002")
    >>> innermost(a, b) is b and innermost(b, a) is b and innermost(None, a) is a
    True
    """
    if ours is None or sdk is None:
        return sdk if ours is None else ours
    return sdk if sdk.dotted_order.startswith(ours.dotted_order + ".") else ours


def install_parent_hook(run_helpers: Any) -> bool:
    """Make SDK runs nest under our current span's run; True when the hook is in place."""
    global _hooked
    with _lock:
        if _hooked is run_helpers:
            return True
        version = _version()
        if version not in TESTED_VERSIONS:
            _once.warning(
                "version",
                "langsmith %s is not a version the run-tree bridge was tested with (%s); "
                "@traceable runs will not nest under OTel spans (OTel spans still nest under them)",
                ".".join(map(str, version)) if version else "?",
                ", ".join("%d.%d" % v for v in TESTED_VERSIONS),
            )
            return False
        original = getattr(run_helpers, "_get_parent_run", None)
        if original is None or getattr(original, "_otel_runs_bridge", False):
            return original is not None
        run_helpers._get_parent_run = _make_hook(original, run_helpers)
        _hooked = run_helpers
        return True


def _version() -> tuple[int, int] | None:
    try:
        from importlib.metadata import version

        major, minor = version("langsmith").split(".")[:2]
        return int(major), int(minor)
    except Exception:  # noqa: BLE001
        return None


def _make_hook(original: Any, run_helpers: Any) -> Any:
    def _get_parent_run(langsmith_extra: Any, config: Any = None) -> Any:
        parent = original(langsmith_extra, config)
        try:
            if langsmith_extra.get("parent") is not None or langsmith_extra.get("run_tree") is not None:
                return parent  # the caller named a parent: theirs wins
            ours = _our_current_run()
            if ours is None:
                return parent
            if parent is None:
                # No SDK run around: we only lend a parent where the SDK traces anyway,
                # since a parent would switch its tracing on.
                from langsmith import utils

                if not utils.tracing_is_enabled():
                    return parent
            else:
                sdk = ids_from_dotted_order(parent.dotted_order, parent.session_name)
                if innermost(ours, sdk) is sdk:
                    return parent
            return _placeholder(ours, langsmith_extra.get("client"))
        except Exception:  # noqa: BLE001 - never break the user's traced call
            _once.warning("hook", "could not nest a langsmith run under the current OTel span", exc_info=True)
            return parent

    _get_parent_run._otel_runs_bridge = True  # type: ignore[attr-defined]
    _get_parent_run.__wrapped__ = original  # type: ignore[attr-defined]
    return _get_parent_run


def _our_current_run() -> RunIds | None:
    span_context = trace.get_current_span().get_span_context()
    if not span_context.is_valid or span_context.is_remote:
        return None
    return _registry.run_ids_for(span_context.span_id)


def _placeholder(ids: RunIds, client: Any) -> Any:
    """An SDK RunTree standing for our run, for the SDK to create children of (never posted by it)."""
    from langsmith.run_trees import RunTree

    kwargs: dict[str, Any] = {
        "id": UUID(ids.run_id),
        "trace_id": UUID(ids.trace_id),
        "dotted_order": ids.dotted_order,
        "start_time": datetime.fromtimestamp(ids.start_time_ns / 1e9, tz=timezone.utc),
        "name": "parent",
        "run_type": "chain",
    }
    if ids.parent_run_id is not None:
        kwargs["parent_run_id"] = UUID(ids.parent_run_id)
    if ids.project:
        kwargs["project_name"] = ids.project
    if client is not None:
        kwargs["client"] = client
    return RunTree(**kwargs)
