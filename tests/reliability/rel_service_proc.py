"""A LocalService in its own process, driven over stdin/stdout, for the tests too big for one GIL.

The soak and the 100k-children test push more runs than the exporter and the
service can process in one interpreter within the time budget; in a second
process the service gets the machine's second core. The service is the same
``LocalService`` the other tests use; this only carries commands to it.

Protocol, one JSON object per line: the process prints ``{"url": ...}`` once
listening, then answers each command line with one line:

* ``{"cmd": "faults", "settings": {...}}`` -> ``{"ok": true}`` (``FaultConfig.update``)
* ``{"cmd": "tally"}`` -> counts of what the service stored (see :func:`_tally`)
* ``{"cmd": "quit"}`` -> stops the service and exits
"""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

from otel_runs_exporter.server import FaultConfig, LocalService


def _tally(svc: LocalService, names: bool) -> dict[str, Any]:
    runs = svc.runs()
    completed = [r for r in runs if r.get("end_time") is not None]
    faults: dict[str, int] = {}
    statuses: dict[str, int] = {}
    for entry in svc.requests():
        if entry["fault"]:
            faults[entry["fault"]] = faults.get(entry["fault"], 0) + 1
        statuses[str(entry["status"])] = statuses.get(str(entry["status"]), 0) + 1
    check = svc.check()
    out: dict[str, Any] = {
        "posted": len(runs),
        "completed": len(completed),
        "duplicates": sum(svc.duplicate_posts().values()),
        "faults_fired": faults,
        "statuses": statuses,  # of the last 10,000 requests (the service's log is bounded)
        "missing_parents": len(check["missing_parents"]),
        "patched_not_posted": len(check["patched_not_posted"]),
        "violations": len(svc.violations()),
    }
    parents: dict[str, int] = {}
    for r in completed:
        key = str(r.get("parent_run_id"))
        parents[key] = parents.get(key, 0) + 1
    out["children_per_parent"] = parents  # "None" counts the roots
    out["root_ids"] = [r["id"] for r in completed if not r.get("parent_run_id")][:10]
    if names:
        out["completed_names"] = sorted(r["name"] for r in completed)
    return out


def main() -> None:
    svc = LocalService(faults=FaultConfig(seed=int(sys.argv[1]) if len(sys.argv) > 1 else None), strict=True).start()
    print(json.dumps({"url": svc.url}), flush=True)
    for line in sys.stdin:
        command = json.loads(line)
        if command["cmd"] == "faults":
            svc.faults.update(**command["settings"])
            reply: dict[str, Any] = {"ok": True}
        elif command["cmd"] == "tally":
            reply = _tally(svc, bool(command.get("names")))
        else:
            break
        print(json.dumps(reply), flush=True)
    svc.stop()


class ServiceProcess:
    """The parent's handle: ``url``, ``faults(**settings)``, ``tally()``, ``close()``."""

    def __init__(self, seed: int = 0) -> None:
        self._proc = subprocess.Popen(
            [sys.executable, __file__, str(seed)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
        )
        self.url = self._read()["url"]

    def _read(self) -> dict[str, Any]:
        line = self._proc.stdout.readline()  # type: ignore[union-attr]
        if not line:
            raise RuntimeError(f"the service process ended (exit {self._proc.poll()})")
        return json.loads(line)

    def _call(self, **command: Any) -> dict[str, Any]:
        self._proc.stdin.write(json.dumps(command) + "\n")  # type: ignore[union-attr]
        self._proc.stdin.flush()  # type: ignore[union-attr]
        return self._read()

    def faults(self, **settings: Any) -> None:
        self._call(cmd="faults", settings=settings)

    def tally(self, names: bool = False) -> dict[str, Any]:
        return self._call(cmd="tally", names=names)

    def close(self) -> None:
        if self._proc.poll() is None:
            try:
                self._call(cmd="quit")
            except (OSError, RuntimeError, ValueError):
                pass
            try:
                self._proc.wait(10)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait()


if __name__ == "__main__":
    main()
