"""Where the time goes: py-spy over one contender run, summarised per thread.

    python bench/profile.py --contender ours-processor --workload genai-shallow-1 --spans 6000

Starts a sink, runs ``contenders.py`` under ``py-spy record --gil --threads``
(samples only the thread holding the GIL, so a thread's share of samples is its
share of the interpreter), then prints, for the producer threads and for the
pipeline's worker thread, the functions with the most inclusive and self
samples. ``--raw FILE`` keeps py-spy's collapsed stacks (flamegraph input).
Needs ``py-spy`` (in the ``bench`` extra) and permission to ptrace a child,
which a normal user has.
"""

from __future__ import annotations

import argparse
import collections
import os
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import run  # noqa: E402
from contenders import COMPILED  # noqa: E402
from run import SinkProcess, _child_env  # noqa: E402


def _group(thread: str) -> str:
    name = thread.split(": ", 1)[-1]
    if name.startswith("producer"):
        return "app (producer threads)"
    if name.startswith("MainThread"):
        return "main (setup, waits)"
    return name.split(" (")[0]


def summarise(raw: str, top: int) -> str:
    inclusive: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
    own: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
    totals: collections.Counter = collections.Counter()
    for line in raw.splitlines():
        stack, _, count = line.rpartition(" ")
        if not stack:
            continue
        frames = stack.split(";")
        group = _group(frames[0])
        n = int(count)
        totals[group] += n
        funcs = [f for f in frames[1:] if f]
        for f in set(funcs):
            inclusive[group][f] += n
        if funcs:
            own[group][funcs[-1]] += n
    all_samples = sum(totals.values()) or 1
    out = []
    for group, total in totals.most_common():
        out.append(f"\n== {group}: {total} samples holding the GIL ({100 * total / all_samples:.0f} % of all) ==")
        out.append("   incl%   self%  function")
        for f, n in inclusive[group].most_common(top):
            out.append(f"  {100 * n / total:6.1f}  {100 * own[group][f] / total:6.1f}  {_short(f)}")
    return "\n".join(out)


def _short(frame: str) -> str:
    # "func (/long/path/site-packages/pkg/mod.py)" -> "func (pkg/mod.py)"
    name, _, where = frame.partition(" (")
    where = where.rstrip(")")
    for marker in ("site-packages/", "/src/", "/lib/python3"):
        if marker in where:
            where = where.split(marker, 1)[1]
            break
    return f"{name} ({where})"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--contender", default="ours-processor")
    p.add_argument("--workload", default="genai-shallow-1")
    p.add_argument("--spans", type=int, default=6000)
    p.add_argument("--rate", type=int, default=500, help="samples per second")
    p.add_argument("--top", type=int, default=25)
    p.add_argument("--raw", default=None, help="keep py-spy's collapsed stacks here")
    a = p.parse_args(argv)
    pyspy = shutil.which("py-spy") or os.path.join(os.path.dirname(sys.executable), "py-spy")
    if a.contender == COMPILED:
        failed = run.build_compiled(tempfile.mkdtemp(prefix="profile-compiled-"))
        if failed:
            raise SystemExit(failed)
    sink = SinkProcess()
    try:
        raw_path = a.raw or tempfile.mktemp(suffix=".txt")
        cmd = [
            pyspy, "record", "--gil", "--threads", "--nolineno", "--format", "raw", "-r", str(a.rate), "-o", raw_path, "--",
            sys.executable, os.path.join(HERE, "contenders.py"),
            "--contender", a.contender, "--workload", a.workload, "--spans", str(a.spans), "--sink", sink.url,
        ]
        proc = subprocess.run(cmd, capture_output=True, text=True, env=_child_env(a.contender))
        print(proc.stdout.strip().splitlines()[-1] if proc.stdout.strip() else proc.stderr[-2000:])
        with open(raw_path) as f:
            print(summarise(f.read(), a.top))
    finally:
        sink.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
