"""Mistakes a type checker must catch in code using the API; ``test_typing.py`` checks that
``mypy --strict`` reports each marked line with the error code after ``# E:``, and nothing else."""

from __future__ import annotations

from collections.abc import Iterator

from otel_runs_exporter import RunsSpanExporter, RunsSpanProcessor, configure, traceable


@traceable
def add(a: int, b: int = 1) -> int:
    return a + b


@traceable(run_type="tool")
def numbers(n: int) -> Iterator[int]:
    yield from range(n)


@traceable(name="answer")
async def answer(question: str) -> str:
    return question


def mistakes() -> None:
    configure(projcet="typo")  # E: call-arg
    configure(timeout_s="ten")  # E: arg-type
    configure(mode="fast")  # E: arg-type
    RunsSpanProcessor(max_queue_sise=10)  # E: call-arg
    RunsSpanExporter(endpoint=1984)  # E: arg-type
    add("one")  # E: arg-type
    add(1, c=2)  # E: call-arg
    total: str = add(1)  # E: assignment
    first: str = next(numbers(3))  # E: assignment
    text: str = answer("q")  # E: assignment
    traceable(run_type="agent")  # E: call-overload
    configure(instrument="yes")  # E: arg-type
    traceable(project_name=1)  # E: call-overload
    # The SDK's per-call keyword works at run time, untyped: the decorated function keeps its own signature.
    add(1, langsmith_extra={"tags": ["x"]})  # E: call-arg
