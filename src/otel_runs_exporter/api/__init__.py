"""Typed client for bulk exports, the deployment control plane and auth waits.

Built on the exporter's settings and HTTP stack (one session, one retry loop)::

    from otel_runs_exporter.api import ServiceClient, ExportStatus

    with ServiceClient() as client:            # settings from OTEL_EXPORTER_RUNS_* / LANGSMITH_*
        export = client.wait_for_export(export_id, timeout=3600)
        assert export.status is ExportStatus.COMPLETED

        deployment = client.create_deployment({"name": "my-agent", ...})
        client.wait_until_deployed(deployment.id)   # polls latest_revision_id until DEPLOYED

Errors: the package's :class:`~otel_runs_exporter.ServiceError` tree for answers
(``NotFoundError``, ``UnauthorizedError``, ``RateLimitedError.retry_after``,
``ValidationError.errors``, ``ServerError``), plus :class:`NoAnswerError`,
:class:`WaitTimeoutError` and :class:`DeploymentFailedError` from here; all are
:class:`~otel_runs_exporter.RunsExporterError`. See ``docs/api.md``.
"""

from . import _models
from ._client import DeploymentFailedError, NoAnswerError, ServiceClient, WaitTimeoutError, exports_base
from ._models import *  # noqa: F403 - the names _models lists, added to __all__ below

__all__ = ["ServiceClient", "NoAnswerError", "WaitTimeoutError", "DeploymentFailedError", "exports_base"]
# The typed views, as the module that owns them lists them.
__all__ += _models.__all__
