"""``otel-runs deployments create|get|wait|update``: the deployment control plane (spec 4.2)."""

from __future__ import annotations

import argparse
from functools import partial
from typing import Any

from . import _output as output
from ._api import JSON_BODY_HELP, api_group, json_object, leaf, wait_showing


def register_deployments(sub: Any) -> None:
    """``otel-runs deployments create|get|wait|update``: the deployment control plane (spec 4.2)."""
    dep = api_group(sub, "deployments", "create, read, update and wait for deployments", "{create,get,wait,update}")
    create = leaf(dep, "create", "create a deployment (POST /v2/deployments)", _cmd_deployments_create)
    create.add_argument("--json-body", metavar="FILE", type=json_object, default={}, help=JSON_BODY_HELP % "request body")
    leaf(dep, "get", "one deployment", _cmd_deployments_get).add_argument("deployment_id")
    wait = leaf(dep, "wait", "wait until a revision (default: the latest) is DEPLOYED", _cmd_deployments_wait, wait=(900.0, 5.0))
    wait.add_argument("deployment_id")
    wait.add_argument("--revision", default=None, metavar="REV", help="revision id (default: latest_revision_id)")
    update = leaf(dep, "update", "update a deployment (PATCH)", _cmd_deployments_update)
    update.add_argument("deployment_id")
    update.add_argument("--json-body", metavar="FILE", type=json_object, required=True, help=JSON_BODY_HELP % "patch")


def _deployment_out(deployment: Any, args: argparse.Namespace) -> None:
    row = [deployment.id, deployment.name, deployment.latest_revision_id]
    output.out(args, deployment.raw, lambda: output.table(["ID", "NAME", "LATEST REVISION"], [row]))


def _cmd_deployments_create(client: Any, args: argparse.Namespace) -> int:
    _deployment_out(client.create_deployment(args.json_body), args)
    return output.EXIT_OK


def _cmd_deployments_get(client: Any, args: argparse.Namespace) -> int:
    _deployment_out(client.get_deployment(args.deployment_id), args)
    return output.EXIT_OK


def _cmd_deployments_update(client: Any, args: argparse.Namespace) -> int:
    _deployment_out(client.update_deployment(args.deployment_id, args.json_body), args)
    return output.EXIT_OK


def _revision_line(revision: Any) -> str:
    return f"revision {revision.id}: {revision.status}"


def _cmd_deployments_wait(client: Any, args: argparse.Namespace) -> int:
    """DEPLOYED exits 0; a failed revision and our own --timeout are errors that :func:`._api.api_handler` maps."""
    revision = wait_showing(args, partial(client.wait_until_deployed, args.deployment_id, args.revision), _revision_line)
    output.out(args, revision.raw, lambda: _revision_line(revision))
    return output.EXIT_OK
