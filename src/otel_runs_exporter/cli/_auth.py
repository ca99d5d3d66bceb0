"""``otel-runs auth wait AUTH_ID``: wait for an OAuth authentication (spec 4.1)."""

from __future__ import annotations

import argparse
from typing import Any

from . import _output as output
from ._api import api_group, leaf


def register_auth(sub: Any) -> None:
    """``otel-runs auth wait AUTH_ID``: wait for an OAuth authentication (spec 4.1)."""
    auth = api_group(sub, "auth", "wait for an OAuth authentication to complete", "{wait}")
    wait = leaf(auth, "wait", "wait for an authentication (the service waits up to --timeout seconds)", _cmd_auth_wait)
    wait.add_argument("auth_id")
    wait.add_argument("--timeout", type=output.count, default=30, metavar="S", help="seconds the service waits (default 30)")
    wait.add_argument("--show-token", action="store_true", help="print the token (it is a credential: hidden by default)")
    wait.add_argument("--quiet", action="store_true", help="no progress line on stderr")


def _cmd_auth_wait(client: Any, args: argparse.Namespace) -> int:
    """The service does the waiting (one request); the token is shown only with --show-token."""
    if not args.quiet:
        output.note(f"waiting up to {args.timeout}s for authentication {args.auth_id} ...")
    result = client.wait_for_auth(args.auth_id, timeout=args.timeout)
    status = str(result.status)
    if args.json:
        shown: dict[str, Any] = {**result.raw, "status": status, "token_present": result.token is not None}
        if args.show_token:
            shown["token"] = result.token
        output.print_json(shown)
    else:
        output.say(f"status: {status}")
        if result.token is not None:
            output.say(f"token:  {result.token if args.show_token else '<hidden; --show-token prints it>'}")
    return output.AUTH_EXIT.get(status, output.EXIT_ERROR)
