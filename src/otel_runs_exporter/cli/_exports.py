"""``otel-runs exports list|get|runs|cancel|wait``: bulk exports (spec 4.3).

``exports wait`` exits with the export's final status (:data:`._output.EXPORT_EXIT`),
so a CI job can branch on how the export ended.
"""

from __future__ import annotations

import argparse
from functools import partial
from typing import Any

from . import _output as output
from ._api import api_group, leaf, wait_showing

_EXPORT_COLUMNS = ["ID", "STATUS", "CREATED", "RUNS"]


def register_exports(sub: Any) -> None:
    """``otel-runs exports list|get|runs|cancel|wait``: bulk exports (spec 4.3)."""
    ex = api_group(sub, "exports", "read, cancel and wait for bulk exports", "{list,get,runs,cancel,wait}")
    leaf(ex, "list", "every export of the workspace", _cmd_exports_list)
    leaf(ex, "get", "one export and its status", _cmd_exports_get).add_argument("export_id")
    leaf(ex, "runs", "the export's runs (one per day) with their retry errors", _cmd_exports_runs).add_argument("export_id")
    leaf(ex, "cancel", "cancel an export (PATCH status Cancelled)", _cmd_exports_cancel).add_argument("export_id")
    leaf(ex, "wait", "wait until the export is final; the exit code says how it ended", _cmd_exports_wait, wait=(3600.0, 10.0)).add_argument("export_id")


def _export_row(export: Any) -> list[Any]:
    raw = export.raw
    runs = f"{raw['runs_completed']}/{raw['runs_total']}" if "runs_total" in raw and "runs_completed" in raw else ""
    return [export.id, export.status, export.created_at, runs]


def _export_line(export: Any) -> str:
    return f"export {export.id}: {export.status}"


def _export_progress(export: Any) -> str:
    runs = _export_row(export)[3]
    return _export_line(export) + (f"  runs completed {runs}" if runs else "")


def _cmd_exports_list(client: Any, args: argparse.Namespace) -> int:
    exports = client.list_exports()
    output.out(
        args,
        [e.raw for e in exports],
        lambda: output.table(_EXPORT_COLUMNS, [_export_row(e) for e in exports]) if exports else "no exports",
    )
    return output.EXIT_OK


def _cmd_exports_get(client: Any, args: argparse.Namespace) -> int:
    export = client.get_export(args.export_id)
    output.out(args, export.raw, lambda: output.table(_EXPORT_COLUMNS, [_export_row(export)]))
    return output.EXIT_OK


def _cmd_exports_runs(client: Any, args: argparse.Namespace) -> int:
    runs = client.list_export_runs(args.export_id)
    output.out(args, [{**r.raw, "errors": dict(r.errors)} for r in runs], lambda: _runs_table(runs))
    return output.EXIT_OK


def _runs_table(runs: list[Any]) -> str:
    rows = [[r.id, r.raw.get("partition", ""), r.status, r.rows_exported, r.retries, (r.last_error or "")[:60]] for r in runs]
    return output.table(["ID", "PARTITION", "STATUS", "ROWS", "RETRIES", "LAST ERROR"], rows) if runs else "no runs"


def _cmd_exports_cancel(client: Any, args: argparse.Namespace) -> int:
    export = client.cancel_export(args.export_id)
    output.out(args, export.raw, lambda: _export_line(export))
    return output.EXIT_OK


def _cmd_exports_wait(client: Any, args: argparse.Namespace) -> int:
    export = wait_showing(args, partial(client.wait_for_export, args.export_id), _export_progress)
    output.out(args, export.raw, lambda: _export_line(export))
    return output.EXPORT_EXIT.get(str(export.status), output.EXIT_ERROR)
