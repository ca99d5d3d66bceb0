"""The public API as a strictly typed app uses it: ``mypy --strict`` must accept all of it.

Checked by ``test_typing.py`` (never imported by the suite); ``assert_type`` lines say the
decorated functions kept their exact types. ``usage_rejected.py`` holds what must be refused.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Coroutine, Iterator
from pathlib import Path
from typing import Any
from uuid import UUID

from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor
from typing_extensions import assert_type

from otel_runs_exporter import (
    ExporterStats,
    RunsSpanExporter,
    RunsSpanProcessor,
    SettingsArguments,
    configure,
    get_current_run_tree,
    get_processor,
    traceable,
)
from otel_runs_exporter.instrumentation import ContextThreadPoolExecutor, RunHandle, copy_context_wrapper


@traceable
def add(a: int, b: int = 1) -> int:
    return a + b


@traceable(run_type="tool", metadata={"team": "search"}, tags=["beta"])
def search(query: str, *, limit: int = 3) -> list[str]:
    return [query] * limit


@traceable(name="answer")
async def answer(question: str) -> str:
    return question.upper()


@traceable
def numbers(n: int) -> Iterator[int]:
    yield from range(n)


@traceable(run_type="retriever")
async def stream(n: int) -> AsyncIterator[str]:
    for i in range(n):
        yield str(i)


# The service SDK's arguments, as its users write them.
@traceable(
    run_type="llm",
    name="sdk-style",
    project_name="elsewhere",
    process_inputs=lambda inputs: {k: v for k, v in inputs.items() if k != "secret"},
    process_outputs=lambda outputs: {"length": len(outputs)},
    client=None,
    enabled=True,
)
def sdk_style(question: str, secret: str = "") -> str:
    run = get_current_run_tree()
    if run is not None:
        run.add_metadata({"thread_id": "t-1", "user_id": "u-1"})
        run.add_tags(["beta"])
        run.set_outputs({"answer": question})
        run_id: UUID | None = run.id
        print(run_id, run.trace_id)
    return question


@traceable(reduce_fn=lambda items: {"text": "".join(items)})
def chunks(n: int) -> Iterator[str]:
    yield from "ab"[:n]


@traceable("tool")
def positional_run_type(x: int) -> int:
    return x


class Service:
    @traceable
    def method(self, x: int) -> str:
        return str(x)

    @traceable
    @classmethod
    def build(cls, name: str) -> Service:
        return cls()

    @traceable
    @staticmethod
    def helper(x: float) -> float:
        return x * 2


def check_types() -> None:
    assert_type(add(1), int)
    assert_type(search("q", limit=2), list[str])
    pending = answer("q")
    _ = assert_type(pending, Coroutine[Any, Any, str])
    pending.close()
    assert_type(numbers(3), Iterator[int])
    assert_type(stream(2), AsyncIterator[str])
    assert_type(Service().method(1), str)
    assert_type(Service.build("x"), Service)
    assert_type(Service.helper(1.5), float)
    assert_type(sdk_style("q"), str)
    assert_type(chunks(1), Iterator[str])
    assert_type(positional_run_type(1), int)
    wrapped = copy_context_wrapper(add)
    assert_type(wrapped(2, 3), int)
    with ContextThreadPoolExecutor() as pool:
        assert_type(pool.submit(add, 1, b=2).result(), int)


async def blocks() -> str:
    with traceable("step", run_type="chain", inputs={"x": 1}) as run:
        assert_type(run, RunHandle)
        run.set_outputs({"y": 2})
        run.add_metadata({"k": "v"})
        run.add_tags(["t"])
    async with traceable(name="async-step") as arun:
        arun.set_inputs({"q": "?"})
    return await answer("why")


def setup(spool: Path) -> ExporterStats | None:
    provider: TracerProvider = configure(
        instrument=True,
        project="typed-app",
        endpoint="http://127.0.0.1:1984",
        api_key="k",
        timeout_s=5,
        schedule_delay_s=0.1,
        max_queue_size=1000,
        headers={"x-team": "a"},
        mode="multipart",
        compression="none",
        id_scheme="v7",
        region="eu",
        spool_dir=spool,
        retry_backoff=(0.1, 1.0),
        hide_inputs=lambda inputs: {k: v for k, v in inputs.items() if k != "secret"},
        mask=lambda value: value,
        scrub_secrets=True,
        disabled=None,
    )
    provider.add_span_processor(RunsSpanProcessor(project="other", max_value_chars=1000))
    provider.add_span_processor(BatchSpanProcessor(RunsSpanExporter(project="via-exporter", hold_max_s=5.0)))
    options: SettingsArguments = {"project": "from-a-dict", "export_timeout_s": 10.0}
    RunsSpanProcessor(**options).shutdown()
    processor = get_processor()
    if processor is None:
        return None
    flushed: bool = processor.force_flush()
    stats = processor.stats()
    created: int = stats.created
    print(flushed, created)
    return stats


if __name__ == "__main__":
    check_types()
    asyncio.run(blocks())
