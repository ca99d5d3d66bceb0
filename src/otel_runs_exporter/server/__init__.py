"""A local implementation of the service's tracing interface: ``otel-runs serve`` and tests.

It accepts what the hosted service accepts (basic tracing, batch and multipart
ingestion), checks every rule of the spec it can (see :mod:`._validate`), stores
runs in SQLite, and can misbehave on purpose (:class:`FaultConfig`, rate limits)
so a client can be tested against failures. Example::

    from otel_runs_exporter.server import LocalService

    with LocalService() as svc:
        exporter = RunsSpanExporter(endpoint=svc.url, api_key="test")
        ...
        runs = svc.wait_for_runs(3)
        assert svc.violations() == []
"""

from ._app import LocalService
from ._faults import FaultConfig
from ._ratelimit import RateRule
from ._store import RunStore

__all__ = ["LocalService", "FaultConfig", "RateRule", "RunStore"]
