"""The exporter's settings as keyword arguments, typed: what ``configure()`` and the constructors take.

``configure(**settings)``, ``RunsSpanProcessor(**overrides)`` and ``RunsSpanExporter(**overrides)``
are typed ``Unpack[SettingsArguments]``, so a type checker refuses a misspelt setting
(``configure(projcet="x")``) or a value of the wrong type where it is written. At run time
nothing changes: :func:`~otel_runs_exporter._settings.resolve` still accepts and validates
them (a string is parsed as the environment variable would be; an unknown name is a
``ConfigError`` that lists the known ones).

The settings table (``_settings._DECLS``) stays the one place a setting is declared, with its
default, parser and meaning; this is its type, and a test checks that both name exactly the
same settings and the same choices. Every key is optional, and None means "not given": the
setting then comes from the environment, else its default::

    from otel_runs_exporter import SettingsArguments, configure

    options: SettingsArguments = {"project": "my-app", "schedule_delay_s": 0.1}
    configure(**options)
"""

from __future__ import annotations

import os
import sys
from typing import Any, Callable, Literal, Mapping, Sequence, TypedDict

from opentelemetry.sdk.trace import ReadableSpan

if sys.version_info >= (3, 11):
    from typing import Unpack
else:  # opentelemetry-api depends on typing_extensions
    from typing_extensions import Unpack

from ._cost import PriceTable

__all__ = ["SettingsArguments", "Unpack"]


class SettingsArguments(TypedDict, total=False):
    """The exporter's settings as keyword arguments; see docs/settings.md for each one."""

    endpoint: str | None
    control_plane_url: str | None
    region: Literal["us", "eu"] | None
    api_key: str | None
    bearer_token: str | None
    workspace_id: str | None
    project: str | None
    project_id: str | None
    headers: Mapping[str, str] | str | None
    timeout_s: float | None
    mode: Literal["auto", "multipart", "basic"] | None
    compression: Literal["auto", "none", "gzip", "zstd"] | None
    id_scheme: Literal["v7", "otlp"] | None
    schedule_delay_s: float | None
    max_schedule_delay_s: float | None
    max_queue_size: int | None
    max_export_batch_size: int | None
    export_timeout_s: float | None
    exit_budget_s: float | None
    retry_backoff: tuple[float, float] | str | None
    max_batch_bytes: int | None
    max_queue_bytes: int | None
    max_value_chars: int | None
    hold_max_spans: int | None
    hold_max_s: float | None
    spans: Literal["all", "genai"] | None
    blocked_scopes: Sequence[str] | str | None
    should_export: Callable[[ReadableSpan], bool] | None
    sample_rate: float | None
    keep_errors: bool | None
    keep_slower_than_s: float | None
    sample_hold_max_spans: int | None
    sample_hold_max_s: float | None
    sample_hold_max_bytes: int | None
    certificate: str | os.PathLike[str] | None
    client_certificate: str | os.PathLike[str] | None
    client_key: str | os.PathLike[str] | None
    spool_dir: str | os.PathLike[str] | None
    spool_max_bytes: int | None
    spool_write_ahead: bool | None
    hide_inputs: bool | Callable[[dict[str, Any]], dict[str, Any]] | None
    hide_outputs: bool | Callable[[dict[str, Any]], dict[str, Any]] | None
    mask: Callable[[Any], Any] | None
    scrub_secrets: bool | None
    langsmith_bridge: bool | None
    capture_log_events: bool | None
    prices: str | os.PathLike[str] | PriceTable | None
    langsmith_otel_enabled: bool | None
    handle_sigterm: bool | None
    close_open_runs_at_exit: bool | None
    open_runs_max: int | None
    open_run_max_age_s: float | None
    disabled: bool | None
