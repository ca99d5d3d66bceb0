"""Charts of figures (a) and (b); matplotlib is imported here only, so ``--smoke`` never needs it."""

from __future__ import annotations

import os

from report import derived, index

COLORS = {
    "floor": "#999999",
    "otlp": "#4c72b0",
    "langsmith": "#dd8452",
    "langsmith-zstd": "#c44e52",
    "ours-processor": "#55a868",
    "ours-processor-mypyc": "#2d6e3e",
    "ours-exporter": "#8172b3",
}


def draw(results: dict, out_dir: str) -> list[str]:
    import matplotlib

    matplotlib.use("Agg")  # no display on CI or servers
    import matplotlib.pyplot as plt

    idx = index(results)
    workloads = list(dict.fromkeys(r["workload"] for r in results["throughput"]))
    contenders = [c for c in COLORS if any(k[1] == c for k in idx)]
    os.makedirs(out_dir, exist_ok=True)
    paths = []

    # (a): added app-thread time per span, median bar with the p99 as a marker; log scale
    # because langsmith's and the 64 KB cases are orders of magnitude apart.
    fig, ax = plt.subplots(figsize=(14, 5.5))
    shown = [c for c in contenders if c != "floor"]
    width = 0.8 / max(1, len(shown))
    for j, c in enumerate(shown):
        xs, p50, p99 = [], [], []
        for i, wl in enumerate(workloads):
            r, floor = idx.get((wl, c)), idx.get((wl, "floor"))
            if r is None or floor is None:
                continue
            d = derived(r, floor)
            xs.append(i + (j - (len(shown) - 1) / 2) * width)
            p50.append(max(0.1, d["added_p50"]))
            p99.append(max(0.1, d["added_p99"]))
        ax.bar(xs, p50, width, color=COLORS[c], label=f"{c} (p50)")
        ax.scatter(xs, p99, color=COLORS[c], marker="_", s=120, linewidths=2)
    ax.set_yscale("log")
    ax.set_xticks(range(len(workloads)))
    ax.set_xticklabels(workloads, rotation=30, ha="right")
    ax.set_ylabel("µs added per span above no-processor (bar p50, tick p99)")
    ax.set_title("(a) application-thread time per span (start + end), above the SDK floor")
    ax.legend(fontsize=8, ncol=3)
    ax.grid(axis="y", which="both", alpha=0.3)
    fig.tight_layout()
    path = os.path.join(out_dir, "bench-app-thread.png")
    fig.savefig(path, dpi=110)
    plt.close(fig)
    paths.append(path)

    # (b): spans delivered per CPU-second of the whole process; the floor is the SDK alone.
    fig, ax = plt.subplots(figsize=(14, 5.5))
    width = 0.8 / max(1, len(contenders))
    for j, c in enumerate(contenders):
        xs, ys = [], []
        for i, wl in enumerate(workloads):
            r = idx.get((wl, c))
            if r is None:
                continue
            xs.append(i + (j - (len(contenders) - 1) / 2) * width)
            ys.append(derived(r, None)["spans_per_cpu_s"])
        ax.bar(xs, ys, width, color=COLORS[c], label=c)
    ax.set_yscale("log")
    ax.set_xticks(range(len(workloads)))
    ax.set_xticklabels(workloads, rotation=30, ha="right")
    ax.set_ylabel("spans delivered per CPU-second (higher is better)")
    ax.set_title("(b) whole-process CPU efficiency, until the sink has every span")
    ax.legend(fontsize=8, ncol=3)
    ax.grid(axis="y", which="both", alpha=0.3)
    fig.tight_layout()
    path = os.path.join(out_dir, "bench-cpu.png")
    fig.savefig(path, dpi=110)
    plt.close(fig)
    paths.append(path)
    return paths
