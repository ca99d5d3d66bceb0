"""Pure tests of the typed models: statuses, retry ordering, unknown fields, secrets in reprs."""

from __future__ import annotations

import pytest

from otel_runs_exporter.api import (
    AuthWaitResult,
    AuthWaitStatus,
    Deployment,
    Export,
    ExportRun,
    ExportStatus,
    Revision,
    exports_base,
)


def test_export_status_has_the_six_values_and_four_are_final() -> None:
    assert [s.value for s in ExportStatus] == ["CREATED", "RUNNING", "COMPLETED", "FAILED", "CANCELLED", "TIMEDOUT"]
    assert {s for s in ExportStatus if s.is_final} == {
        ExportStatus.COMPLETED,
        ExportStatus.FAILED,
        ExportStatus.CANCELLED,
        ExportStatus.TIMEDOUT,
    }


def test_status_case_is_forgiven_and_unknown_status_is_kept_as_text() -> None:
    assert ExportStatus("Cancelled") is ExportStatus.CANCELLED
    export = Export.from_json({"id": "e", "status": "PAUSED"})
    assert export.status == "PAUSED" and not export.is_final


def test_errors_are_in_numeric_retry_order_with_other_keys_last() -> None:
    errors = {f"retry_{i}": f"e{i}" for i in (10, 2, 0, 1, 11, 3)} | {"note": "x"}
    run = ExportRun.from_json({"id": "r", "status": "FAILED", "errors": errors})
    assert list(run.errors) == ["retry_0", "retry_1", "retry_2", "retry_3", "retry_10", "retry_11", "note"]
    assert run.retries == 6
    assert run.last_error == "x"


def test_rows_exported_falls_back_to_the_progress_metadata() -> None:
    run = ExportRun.from_json({"id": "r", "status": "RUNNING", "metadata": {"rows_exported": 7, "files": []}})
    assert run.rows_exported == 7
    assert run.extra == {"metadata": {"rows_exported": 7, "files": []}}


@pytest.mark.parametrize(
    ("model", "data", "extra"),
    [
        (Export, {"id": "e", "status": "RUNNING", "created_at": "t", "destination": {"b": 1}}, {"destination": {"b": 1}}),
        (Deployment, {"id": "d", "latest_revision_id": "r", "name": "n", "source": "github"}, {"source": "github"}),
        (Revision, {"id": "r", "status": "DEPLOYED", "image": "x:1"}, {"image": "x:1"}),
    ],
)
def test_unknown_fields_are_kept(model: type, data: dict, extra: dict) -> None:
    parsed = model.from_json(data)
    assert parsed.raw == data
    assert parsed.extra == extra


@pytest.mark.parametrize(
    ("status", "deployed", "failed"),
    [("DEPLOYED", True, False), ("BUILDING", False, False), ("BUILD_FAILED", False, True), ("DEPLOY_FAILED", False, True),
     ("INTERRUPTED", False, True), ("FAILED", False, True)],
)
def test_revision_status_predicates(status: str, deployed: bool, failed: bool) -> None:
    revision = Revision.from_json({"id": "r", "status": status})
    assert (revision.is_deployed, revision.is_failed) == (deployed, failed)


def test_auth_token_is_not_in_repr_str_or_raw() -> None:
    result = AuthWaitResult.from_json({"status": "completed", "token": "tok-very-secret", "expires_in": 3600})
    assert result.status is AuthWaitStatus.COMPLETED and result.completed
    assert result.token == "tok-very-secret"
    for text in (repr(result), str(result), repr(result.raw), f"{result}"):
        assert "tok-very-secret" not in text
    assert result.raw == {"status": "completed", "expires_in": 3600}


def test_exports_base_does_not_double_api_v1() -> None:
    assert exports_base("https://h/api/v1") == "https://h"
    assert exports_base("https://h/api/v1/") == "https://h"
    assert exports_base("https://h/prefix") == "https://h/prefix"
