"""``traceable`` as the service SDK's users write it: its arguments, ``langsmith_extra``, ``get_current_run_tree()``.

In-process, on the session's tracer provider (the spans as the converter reads
them); what a user's process sends with only the SDK's variables set is in
``test_sdk_environment.py``.
"""

from __future__ import annotations

import asyncio
import json
import logging
import threading

import pytest

from otel_runs_exporter import get_current_run_tree, traceable
from otel_runs_exporter.instrumentation import _options


def attrs_json(span, key):
    return json.loads(span.attributes[key])


@pytest.fixture(autouse=True)
def _said_anew():
    # Unsupported arguments are said once per process, bad per-call ones once a minute: each test hears its own.
    _options._unsupported_said.clear()
    _options._rl.reset()


def test_the_sdks_decorator_arguments_keep_their_meaning(spans):
    @traceable(
        name="lookup",
        run_type="retriever",
        metadata={"index": "v2"},
        tags=["beta"],
        project_name="search-team",
        process_inputs=lambda inputs: {"query": inputs["query"].upper()},
        process_outputs=lambda outputs: {"count": len(outputs)},
    )
    def lookup(query: str, secret: str = "s3cr3t") -> list[str]:
        return [query, query]

    assert lookup("paris") == ["paris", "paris"]  # the call itself is untouched
    span = spans.named("lookup")
    assert span.attributes["langsmith.span.kind"] == "retriever"
    assert span.attributes["langsmith.trace.session_name"] == "search-team"
    assert attrs_json(span, "input.value") == {"query": "PARIS"}  # the secret never reached the span
    assert attrs_json(span, "output.value") == {"count": 2}
    assert span.attributes["langsmith.metadata.index"] == "v2" and attrs_json(span, "langsmith.span.tags") == ["beta"]


def test_the_sdks_positional_run_type_and_enabled_false(spans):
    @traceable("llm")
    def call_model(prompt: str) -> str:
        return prompt

    @traceable(enabled=False)
    def quiet() -> int:
        return 1

    assert call_model("hi") == "hi" and quiet() == 1
    (span,) = spans.all()
    assert span.name == "call_model" and span.attributes["langsmith.span.kind"] == "llm"


def test_reduce_fn_makes_a_generators_output(spans):
    @traceable(reduce_fn=lambda chunks: {"text": "".join(chunks)})
    def stream_words():
        yield "a"
        yield "b"

    @traceable(reduce_fn=lambda chunks: {"total": sum(chunks)})
    async def count_up():
        for i in range(4):
            yield i

    async def consume() -> list[int]:
        return [i async for i in count_up()]

    assert list(stream_words()) == ["a", "b"] and asyncio.run(consume()) == [0, 1, 2, 3]
    assert attrs_json(spans.named("stream_words"), "output.value") == {"text": "ab"}
    assert attrs_json(spans.named("count_up"), "output.value") == {"total": 6}


def test_langsmith_extra_per_call_is_taken_out_and_honoured(spans):
    @traceable(metadata={"team": "a"}, tags=["t1"])
    def answer(question: str, **options: object) -> str:
        assert "langsmith_extra" not in options  # never passed on to the function
        return question

    extra = {"metadata": {"user_id": "u-7"}, "tags": ["t2"], "project_name": "per-call", "name": "answer-v2"}
    assert answer("why?", langsmith_extra=extra) == "why?"
    span = spans.named("answer-v2")
    assert span.attributes["langsmith.metadata.team"] == "a" and span.attributes["langsmith.metadata.user_id"] == "u-7"
    assert attrs_json(span, "langsmith.span.tags") == ["t1", "t2"]
    assert span.attributes["langsmith.trace.session_name"] == "per-call"
    assert attrs_json(span, "input.value") == {"question": "why?"}


def test_what_cannot_be_honoured_is_accepted_and_said_once(spans, caplog):
    with caplog.at_level(logging.WARNING, logger="otel_runs_exporter.instrumentation"):
        decorate = traceable(client=object(), process_chunk=lambda c: c, dangerously_allow_filesystem=True)
        made = traceable(client=object())  # said already

        @decorate
        def step(x: int) -> int:
            return x

        @made
        def other(x: int) -> int:
            return x

        assert step(1, langsmith_extra={"run_id": "r", "parent": "p"}) == 1
        assert step(2, langsmith_extra={"run_id": "r"}) == 2 and other(3) == 3
    said = [r.getMessage() for r in caplog.records]
    assert sorted(said) == sorted(
        f"traceable: {what} is the langsmith SDK's and has no effect here; it is ignored"
        for what in ("the argument client=", "the argument dangerously_allow_filesystem=",
                     "the argument process_chunk=", "langsmith_extra['run_id']", "langsmith_extra['parent']")
    )
    assert len(spans.all_named("step")) == 2


@pytest.mark.parametrize(
    "what, options, extra, warned",
    [
        ("langsmith_extra not a mapping", {}, ["not", "a", "mapping"], "langsmith_extra of a call to 'work' is list"),
        ("process_inputs raises", {"process_inputs": lambda inputs: inputs["missing"]}, None,
         "process_inputs of 'work' raised KeyError"),
        ("process_outputs raises", {"process_outputs": lambda outputs: 1 / 0}, None,
         "process_outputs of 'work' raised ZeroDivisionError"),
    ],
)
def test_bad_input_the_call_runs_as_untraced_the_run_keeps_what_it_can_one_warning(
    spans, caplog, what, options, extra, warned
):
    @traceable(**options)
    def work(x: int) -> int:
        return x * 2

    with caplog.at_level(logging.WARNING, logger="otel_runs_exporter.instrumentation"):
        for _ in range(3):
            assert (work(2, langsmith_extra=extra) if extra is not None else work(2)) == 4
    assert [r.getMessage() for r in caplog.records if warned in r.getMessage()] == [
        next(r.getMessage() for r in caplog.records if warned in r.getMessage())
    ], caplog.text  # one line, not one a call
    runs = spans.all_named("work")
    assert len(runs) == 3 and all(not s.status.status_code.name == "ERROR" for s in runs)
    inputs, outputs = attrs_json(runs[0], "input.value"), attrs_json(runs[0], "output.value")
    if "process_inputs" in what:  # fail closed: a marker, never the payload it was to process
        assert inputs == {"ls_error": "Processing failed; process_inputs raised KeyError"} and outputs == {"output": 4}
    elif "process_outputs" in what:
        assert outputs == {"ls_error": "Processing failed; process_outputs raised ZeroDivisionError"}
        assert inputs == {"x": 2}
    else:
        assert inputs == {"x": 2} and outputs == {"output": 4}


def test_a_reduce_fn_that_returns_a_non_mapping_or_raises(spans, caplog):
    @traceable(reduce_fn=lambda chunks: "".join(chunks))
    def words():
        yield from "ab"

    @traceable(reduce_fn=lambda chunks: chunks[10])
    def broken():
        yield from "ab"

    with caplog.at_level(logging.WARNING, logger="otel_runs_exporter.instrumentation"):
        assert list(words()) == list(words()) == ["a", "b"] and list(broken()) == ["a", "b"]
    assert attrs_json(spans.all_named("words")[0], "output.value") == {"output": "ab"}
    assert attrs_json(spans.named("broken"), "output.value") == {"output": ["a", "b"]}  # the items it yielded
    said = [r.getMessage() for r in caplog.records]
    assert said == ["traceable: reduce_fn of 'words' returned str, not a mapping; recorded as {'output': ...}",
                    "traceable: reduce_fn of 'broken' raised IndexError; the run keeps the yielded items"]


def test_get_current_run_tree_inside_a_decorated_function(spans):
    seen = {}

    @traceable(tags=["first"])
    def answer(question: str) -> str:
        run = get_current_run_tree()
        assert run is not None
        run.add_metadata({"thread_id": "thread-1", "user_id": "u-7"})
        run.add_tags(["second"])
        run.add_tags("third")
        run.set_outputs({"answer": "from the handle"})
        seen["same"] = get_current_run_tree() is run
        return "from the return value"

    assert answer("why?") == "from the return value"
    assert seen["same"]
    span = spans.named("answer")
    assert span.attributes["langsmith.metadata.thread_id"] == "thread-1"
    assert span.attributes["langsmith.metadata.user_id"] == "u-7"
    assert attrs_json(span, "langsmith.span.tags") == ["first", "second", "third"]  # appended, as the SDK's
    assert attrs_json(span, "output.value") == {"answer": "from the handle"}


def test_get_current_run_tree_on_a_span_someone_else_made_and_nowhere(spans, tracer_provider):
    other = tracer_provider.get_tracer("someone.else")
    with other.start_as_current_span("framework-step", attributes={"langsmith.span.tags": '["theirs"]'}):
        run = get_current_run_tree()
        assert run is not None and run.id is None  # no processor of ours gave this span a run here
        run.add_tags(["ours"])
        run.set_outputs("done")
        run.add_metadata({"thread_id": "t-2"})
    span = spans.named("framework-step")
    assert attrs_json(span, "langsmith.span.tags") == ["theirs", "ours"]
    assert attrs_json(span, "output.value") == {"output": "done"}
    assert get_current_run_tree() is None
    found = []
    thread = threading.Thread(target=lambda: found.append(get_current_run_tree()))
    with traceable("busy"):
        thread.start()  # a thread with no traced call of its own
        thread.join()
    assert found == [None]
