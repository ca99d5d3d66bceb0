"""The @traceable decorator on sync, async and generator functions, with inputs, outputs and an error.

    python examples/traceable.py

Each decorated call becomes a run: its arguments (bound from the signature) are
the inputs, its return value the outputs; a generator's outputs are the items it
yielded. An exception is recorded on the run and re-raised unchanged, so the
caller handles it as without tracing. Runs nest the way the calls do, across
`await` too. `with traceable(...) as run:` traces a block that is not a function.

With OTEL_EXPORTER_RUNS_ENDPOINT unset the script starts the embedded local
service and prints the tree it received; with it set, it sends there.
"""

import asyncio
from collections.abc import Iterator

from otel_runs_exporter import configure, get_processor, traceable
from otel_runs_exporter.testing import local_service_unless_configured, show_runs

INVENTORY = {"apples": 3, "pears": 0}
PRICES = {"apples": 0.5, "pears": 0.8}


@traceable(run_type="tool")
def check_stock(item: str) -> int:
    if item not in INVENTORY:
        raise KeyError(f"no such item: {item}")
    return INVENTORY[item]


@traceable(run_type="parser")
def format_lines(counts: dict[str, int | None]) -> Iterator[str]:
    for item, count in counts.items():
        yield f"{item}: {'unknown' if count is None else count}"


@traceable
async def summarize(lines: list[str]) -> str:
    await asyncio.sleep(0.01)  # stands in for a slow call, e.g. to a model
    return "; ".join(lines)


@traceable(name="stock_report")
async def report(items: list[str]) -> dict[str, object]:
    counts: dict[str, int | None] = {}
    for item in items:
        try:
            counts[item] = check_stock(item)
        except KeyError:
            counts[item] = None  # the tool's run records the error; the report carries on
    with traceable("lookup_prices", run_type="retriever", inputs={"items": items}) as run:
        known = [item for item in items if item in PRICES]
        run.set_outputs({"documents": [{"page_content": f"{i} cost {PRICES[i]}", "metadata": {"item": i}} for i in known]})
    lines = list(format_lines(counts))
    return {"counts": counts, "summary": await summarize(lines)}


if __name__ == "__main__":
    with local_service_unless_configured() as service:
        configure()
        print("report:", asyncio.run(report(["apples", "kiwis"])))
        processor = get_processor()  # None only if configure() could not install it
        if processor is not None and not processor.force_flush():  # deliver now, so the tree printed below is complete
            print("not everything was delivered:", processor.stats())
        # stock_report; check_stock twice (one fails), lookup_prices, format_lines, summarize
        show_runs(service, expected=6)
