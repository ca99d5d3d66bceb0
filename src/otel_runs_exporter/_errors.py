"""The package's one exception hierarchy.

::

    RunsExporterError
    ├── ConfigError            a setting has a bad value (names the variable and what it expects)
    │   └── EnvironmentConfigError  essential variables the exporter cannot use (``problems``: each named)
    ├── NoAnswerError          no answer before the call's deadline (also a ConnectionError)
    ├── WaitTimeoutError       a wait_* call ran out of time (``last`` state seen; also a TimeoutError)
    ├── DeploymentFailedError  a revision ended in a failed status
    └── ServiceError           the service answered with an error (status, method, path, detail)
        ├── UnauthorizedError  401 / 403
        ├── NotFoundError      404
        ├── RateLimitedError   429 (retry_after seconds when the service gave one)
        ├── ValidationError    422 (the parsed ``detail`` list: loc, msg, type)
        └── ServerError        5xx

Inside the exporter none of these reaches application code: the exporter logs,
counts and returns; an environment it cannot use turns tracing off, never the app
(``_settings.resolve_for_app``). They are raised by the API clients and by configuration,
where the caller asked for the result. Messages never contain the API key or a
token.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = [
    "RunsExporterError",
    "ConfigError",
    "EnvironmentConfigError",
    "ServiceError",
    "UnauthorizedError",
    "NotFoundError",
    "RateLimitedError",
    "ValidationError",
    "ServerError",
    "NoAnswerError",
    "WaitTimeoutError",
    "DeploymentFailedError",
]


class RunsExporterError(Exception):
    """Base of every error this package raises."""


class ConfigError(RunsExporterError, ValueError):
    """A setting has a value that cannot be used."""


class EnvironmentConfigError(ConfigError):
    """Essential variables have values the exporter cannot use: where runs go, who sends them, ...

    ``problems`` holds ``(variable, message)`` for each; a message names the value
    (a secret's never) and what is expected. Raised to callers that asked for a
    result (the CLI, the API client); inside an app tracing is turned off instead.
    """

    def __init__(self, problems: list[tuple[str, str]]) -> None:
        self.problems = list(problems)
        super().__init__("; ".join(message for _, message in self.problems))

    @property
    def variables(self) -> frozenset[str]:
        return frozenset(variable for variable, _ in self.problems)


class NoAnswerError(RunsExporterError, ConnectionError):
    """No answer before the call's deadline: the service could not be reached or never replied."""

    def __init__(self, method: str, path: str, base: str, reason: str | None = None) -> None:
        self.method, self.path, self.base, self.reason = method, path, base, reason
        super().__init__(f"{method} {path}: no answer from {base} ({reason or 'could not connect, or timed out'})")


class WaitTimeoutError(RunsExporterError, TimeoutError):
    """A ``wait_*`` call ran out of time; ``last`` is the last state seen (an Export or a Revision)."""

    def __init__(self, what: str, timeout: float, last: Any) -> None:
        self.what, self.timeout, self.last = what, timeout, last
        status = getattr(last, "status", None)
        super().__init__(f"{what} not finished after {timeout:g}s (last status {status})")


class DeploymentFailedError(RunsExporterError):
    """A revision reached a failed status (``BUILD_FAILED``, ``DEPLOY_FAILED``, ...) instead of DEPLOYED."""

    def __init__(self, revision: Any) -> None:
        self.revision = revision
        message = revision.raw.get("status_message") if isinstance(revision.raw, Mapping) else None
        super().__init__(
            f"revision {revision.id} of deployment {revision.deployment_id} failed with status {revision.status}"
            + (f": {message}" if message else "")
        )


class ServiceError(RunsExporterError):
    """The service answered a request with an error status."""

    def __init__(self, status: int, method: str, path: str, detail: Any = None) -> None:
        self.status = status
        self.method = method
        self.path = path
        self.detail = detail
        text = f"{method} {path} answered {status}"
        if detail:
            text += f": {_compact(detail)[:500]}"
        super().__init__(text)


def _compact(detail: Any) -> str:
    """A parsed JSON body as JSON again (what the service sent), not as a Python repr."""
    if isinstance(detail, str):
        return detail
    import json

    return json.dumps(detail, ensure_ascii=False, separators=(", ", ": "), default=str)


class UnauthorizedError(ServiceError):
    """401 or 403: the API key (or workspace) was not accepted."""


class NotFoundError(ServiceError):
    """404: the resource does not exist."""


class RateLimitedError(ServiceError):
    """429: too many requests; ``retry_after`` is in seconds when the service said."""

    def __init__(self, status: int, method: str, path: str, detail: Any = None, retry_after: float | None = None) -> None:
        super().__init__(status, method, path, detail)
        self.retry_after = retry_after


class ValidationError(ServiceError):
    """422: ``errors`` is the HTTPValidationError ``detail`` list (loc, msg, type)."""

    @property
    def errors(self) -> list[dict[str, Any]]:
        detail = self.detail
        if isinstance(detail, dict):
            detail = detail.get("detail")
        return list(detail) if isinstance(detail, list) else []


class ServerError(ServiceError):
    """5xx: the service failed."""


def error_for_status(status: int, method: str, path: str, detail: Any = None, retry_after: float | None = None) -> ServiceError:
    """The right :class:`ServiceError` subclass for an HTTP status."""
    if status in (401, 403):
        return UnauthorizedError(status, method, path, detail)
    if status == 404:
        return NotFoundError(status, method, path, detail)
    if status == 429:
        return RateLimitedError(status, method, path, detail, retry_after)
    if status == 422:
        return ValidationError(status, method, path, detail)
    if status >= 500:
        return ServerError(status, method, path, detail)
    return ServiceError(status, method, path, detail)
