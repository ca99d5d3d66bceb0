"""The deployment control plane through ServiceClient: spec 4.2's create, read, poll, patch."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from otel_runs_exporter import NotFoundError, ValidationError
from otel_runs_exporter.api import DeploymentFailedError, Revision, ServiceClient, WaitTimeoutError
from otel_runs_exporter.server import LocalService

Advance = Callable[[float], None]


def test_create_read_poll_patch(client: ServiceClient, svc: LocalService) -> None:
    body = {"name": "agent", "source": "github", "config": {"replicas": 2}}
    created = client.create_deployment(body)
    assert created.id and created.latest_revision_id and created.name == "agent"
    assert created.extra["config"] == {"replicas": 2}  # fields the spec does not show are kept
    read = client.get_deployment(created.id)
    assert (read.id, read.latest_revision_id) == (created.id, created.latest_revision_id)

    seen: list[str] = []
    revision = client.wait_until_deployed(created.id, timeout=10, poll_interval=0.0005, progress=lambda r: seen.append(r.status))
    assert revision.id == created.latest_revision_id and revision.is_deployed
    assert seen[-1] == "DEPLOYED"

    patched = client.update_deployment(created.id, {"config": {"replicas": 3}})
    assert patched.extra["config"] == {"replicas": 3}
    assert patched.latest_revision_id != created.latest_revision_id  # a patch rolls out a new revision
    assert client.wait_until_deployed(created.id, timeout=10, poll_interval=0.001).id == patched.latest_revision_id


def test_revision_moves_through_its_phases(client: ServiceClient, frozen: Advance) -> None:
    deployment = client.create_deployment({"name": "a"})
    phases = []
    for _ in range(4):
        phases.append(client.get_revision(deployment.id, deployment.latest_revision_id).status)
        frozen(1.0)  # deploy_delay_s is 3 s: three phases of 1 s
    assert phases == ["QUEUED", "BUILDING", "DEPLOYING", "DEPLOYED"]


def test_an_explicit_revision_is_waited_for(client: ServiceClient) -> None:
    first = client.create_deployment({"name": "a"})
    client.update_deployment(first.id, {"name": "b"})
    revision = client.wait_until_deployed(first.id, first.latest_revision_id, timeout=10, poll_interval=0.001)
    assert revision.id == first.latest_revision_id


@pytest.mark.parametrize("failure", ["BUILD_FAILED", "DEPLOY_FAILED"])
def test_a_failed_revision_raises_a_clear_error(client: ServiceClient, failure: str) -> None:
    deployment = client.create_deployment({"name": "broken", "local": {"fail": failure}})
    with pytest.raises(DeploymentFailedError) as info:
        client.wait_until_deployed(deployment.id, timeout=10, poll_interval=0.001)
    assert info.value.revision.status == failure
    assert failure in str(info.value) and deployment.latest_revision_id in str(info.value)


def test_wait_times_out_with_the_last_revision(client: ServiceClient, frozen: Advance) -> None:
    deployment = client.create_deployment({"name": "slow"})
    with pytest.raises(WaitTimeoutError) as info:
        client.wait_until_deployed(deployment.id, timeout=0.1, poll_interval=0.02)
    assert isinstance(info.value.last, Revision) and info.value.last.status == "QUEUED"


def test_missing_deployment_and_revision_are_404(client: ServiceClient) -> None:
    with pytest.raises(NotFoundError):
        client.get_deployment("nope")
    deployment = client.create_deployment({"name": "a"})
    with pytest.raises(NotFoundError):
        client.get_revision(deployment.id, "nope")
    with pytest.raises(NotFoundError):
        client.update_deployment("nope", {"name": "b"})


def test_deploy_delay_is_configurable(svc: LocalService) -> None:
    with LocalService(clock_speed=0, deploy_delay_s=600) as slow:
        with ServiceClient(control_plane_url=slow.url) as client:
            deployment = client.create_deployment({"name": "a", "local": {"deploy_seconds": 60}})
            slow.control.clock.advance(60)
            assert client.get_revision(deployment.id, deployment.latest_revision_id).is_deployed
            other = client.create_deployment({"name": "b"})
            slow.control.clock.advance(599)
            assert client.get_revision(other.id, other.latest_revision_id).status == "DEPLOYING"


def test_bad_failure_knob_is_422(client: ServiceClient) -> None:
    with pytest.raises(ValidationError) as info:
        client.create_deployment({"name": "a", "local": {"fail": "MAYBE"}})
    assert info.value.errors[0]["loc"] == ["body", "local", "fail"]
