"""traceable: spans, attributes, nesting across tasks/threads, and that our failures never reach user code."""

from __future__ import annotations

import asyncio
import inspect
import json
import logging
import sys
import threading

import pytest
from opentelemetry.trace import StatusCode

from otel_runs_exporter.instrumentation import ContextThreadPoolExecutor, copy_context_wrapper, traceable
from otel_runs_exporter.instrumentation import _traceable


def attrs_json(span, key):
    return json.loads(span.attributes[key])


def test_sync_function_inputs_bound_with_defaults_and_outputs_wrapped(spans):
    @traceable
    def add(a, b=2, *rest, scale=1, **extra):
        return (a + b) * scale

    assert add(1, scale=3, note="x") == 9
    span = spans.named("add")
    assert span.attributes["langsmith.span.kind"] == "chain"
    assert attrs_json(span, "input.value") == {"a": 1, "b": 2, "rest": [], "scale": 3, "note": "x"}
    assert attrs_json(span, "output.value") == {"output": 9}
    assert span.status.status_code is StatusCode.UNSET


def test_options_name_run_type_metadata_tags_and_dict_output(spans):
    @traceable(name="search-docs", run_type="retriever", metadata={"index": "v2", "k": 3}, tags=["beta", "x"])
    def search(query):
        return {"documents": [query]}

    search("q")
    span = spans.named("search-docs")
    assert span.attributes["langsmith.span.kind"] == "retriever"
    assert span.attributes["langsmith.metadata.index"] == "v2"
    assert span.attributes["langsmith.metadata.k"] == 3
    assert json.loads(span.attributes["langsmith.span.tags"]) == ["beta", "x"]
    assert attrs_json(span, "output.value") == {"documents": ["q"]}


def test_nesting_follows_the_context(spans):
    @traceable
    def child(x):
        return x

    @traceable
    def parent(x):
        return child(x) + child(x)

    parent(1)
    p = spans.named("parent")
    children = [s for s in spans.all() if s.name == "child"]
    assert len(children) == 2
    assert all(c.parent.span_id == p.context.span_id for c in children)
    assert all(c.context.trace_id == p.context.trace_id for c in children)


def test_async_functions_nest_across_tasks(spans):
    @traceable(run_type="tool")
    async def leaf(i):
        await asyncio.sleep(0)
        return i

    @traceable
    async def root():
        return sum(await asyncio.gather(*(leaf(i) for i in range(3))))

    assert asyncio.run(root()) == 3
    r = spans.named("root")
    leaves = [s for s in spans.all() if s.name == "leaf"]
    assert len(leaves) == 3 and all(s.parent.span_id == r.context.span_id for s in leaves)
    assert attrs_json(r, "output.value") == {"output": 3}


def test_generator_gathers_items_and_covers_iteration(spans):
    @traceable
    def inner():
        return "in"

    @traceable
    def numbers(n):
        for i in range(n):
            inner()
            yield i

    @traceable
    def consumer_step():
        return None

    gen = numbers(3)
    assert spans.all() == []  # nothing ends before iteration
    out = []
    for item in gen:
        out.append(item)
        consumer_step()  # runs between yields: must not be a child of the generator's span
    assert out == [0, 1, 2]
    g = spans.named("numbers")
    assert attrs_json(g, "output.value") == {"output": [0, 1, 2]}
    assert attrs_json(g, "input.value") == {"n": 3}
    inners = [s for s in spans.all() if s.name == "inner"]
    assert len(inners) == 3 and all(s.parent.span_id == g.context.span_id for s in inners)
    assert all(s.parent is None for s in spans.all() if s.name == "consumer_step")
    assert all(s.end_time <= g.end_time for s in inners)


def test_generator_closed_early_still_ends_the_span(spans):
    closed = []

    @traceable
    def endless():
        try:
            i = 0
            while True:
                yield i
                i += 1
        finally:
            closed.append(True)

    gen = endless()
    assert next(gen) == 0 and next(gen) == 1
    gen.close()
    assert closed == [True]
    span = spans.named("endless")
    assert attrs_json(span, "output.value") == {"output": [0, 1]}
    assert span.status.status_code is not StatusCode.ERROR


@traceable
def cleanup():
    return None


def check_cleanup_spans(spans):
    """A clean early close ran ``cleanup`` in the generator's span; a failing one ended it as failed."""
    tidy, messy = sorted(spans.all_named("closing"), key=lambda s: attrs_json(s, "input.value")["fail"])
    assert spans.named("cleanup").parent.span_id == tidy.context.span_id
    assert tidy.status.status_code is StatusCode.UNSET
    assert messy.status.status_code is StatusCode.ERROR and messy.attributes["error.type"] == "RuntimeError"


def test_generator_cleanup_on_early_close_runs_in_its_span_and_may_fail(spans):
    @traceable
    def closing(fail):
        try:
            yield 1
        finally:
            if fail:
                raise RuntimeError("cleanup failed")
            cleanup()

    gen = closing(False)
    next(gen)
    gen.close()
    gen = closing(True)
    next(gen)
    with pytest.raises(RuntimeError, match="cleanup failed"):
        gen.close()
    check_cleanup_spans(spans)


def test_async_generator_cleanup_on_early_close_runs_in_its_span_and_may_fail(spans):
    @traceable
    async def closing(fail):
        try:
            yield 1
        finally:
            if fail:
                raise RuntimeError("cleanup failed")
            cleanup()

    async def main():
        agen = closing(False)
        await agen.__anext__()
        await agen.aclose()
        agen = closing(True)
        await agen.__anext__()
        with pytest.raises(RuntimeError, match="cleanup failed"):
            await agen.aclose()

    asyncio.run(main())
    check_cleanup_spans(spans)


def test_generator_send_and_return_value_pass_through(spans):
    @traceable
    def echo():
        received = yield "ready"
        yield f"got {received}"
        return "done"

    gen = echo()
    assert next(gen) == "ready"
    assert gen.send("x") == "got x"
    with pytest.raises(StopIteration) as stop:
        next(gen)
    assert stop.value.value == "done"
    assert attrs_json(spans.named("echo"), "output.value") == {"output": ["ready", "got x"]}


def test_async_generator_and_early_aclose(spans):
    @traceable
    async def agen(n):
        for i in range(n):
            await asyncio.sleep(0)
            yield i

    async def main():
        items = [i async for i in agen(3)]
        partial = agen(10)
        first = await partial.__anext__()
        await partial.aclose()
        return items, first

    items, first = asyncio.run(main())
    assert items == [0, 1, 2] and first == 0
    done = [s for s in spans.all() if s.name == "agen"]
    assert sorted(json.loads(s.attributes["output.value"])["output"] for s in done) == [[0], [0, 1, 2]]


def test_exceptions_thrown_into_a_generator_reach_the_users_generator(spans):
    @traceable
    def handles():
        try:
            yield "ready"
        except KeyError:
            yield "recovered"

    @traceable
    def ignores():
        yield "ready"

    gen = handles()
    assert next(gen) == "ready"
    assert gen.throw(KeyError("k")) == "recovered"
    assert list(gen) == []
    span = spans.named("handles")
    assert attrs_json(span, "output.value") == {"output": ["ready", "recovered"]}
    assert span.status.status_code is StatusCode.UNSET

    error = KeyError("k")
    gen = ignores()
    next(gen)
    with pytest.raises(KeyError) as caught:
        gen.throw(error)
    assert caught.value is error
    span = spans.named("ignores")
    assert span.status.status_code is StatusCode.ERROR and span.attributes["error.type"] == "KeyError"
    assert attrs_json(span, "output.value") == {"output": ["ready"]}  # what it yielded before failing


def test_exceptions_thrown_into_an_async_generator_reach_the_users_generator(spans):
    @traceable
    async def handles():
        try:
            yield "ready"
        except KeyError:
            yield "recovered"

    @traceable
    async def ignores():
        yield "ready"

    error = KeyError("k")

    async def main():
        agen = handles()
        assert await agen.__anext__() == "ready"
        assert await agen.athrow(KeyError("k")) == "recovered"
        assert [i async for i in agen] == []
        agen = ignores()
        await agen.__anext__()
        with pytest.raises(KeyError) as caught:
            await agen.athrow(error)
        assert caught.value is error

    asyncio.run(main())
    assert attrs_json(spans.named("handles"), "output.value") == {"output": ["ready", "recovered"]}
    span = spans.named("ignores")
    assert span.status.status_code is StatusCode.ERROR and span.attributes["error.type"] == "KeyError"


def test_decorating_keeps_name_doc_signature_and_kind():
    # Frameworks pick how to call a function by its kind (FastAPI awaits coroutine functions,
    # streams generators) and build schemas from its signature: the wrapper must look the same.
    def plain(a, b=1, *, c: int) -> int:
        """doc"""
        return a

    async def coro(a, b=1, *, c: int) -> int:
        """doc"""
        return a

    def gen(a, b=1, *, c: int):
        """doc"""
        yield a

    async def agen(a, b=1, *, c: int):
        """doc"""
        yield a

    kinds = (inspect.iscoroutinefunction, inspect.isgeneratorfunction, inspect.isasyncgenfunction)
    for fn in (plain, coro, gen, agen):
        wrapped = traceable(fn)
        assert wrapped is not fn and wrapped.__wrapped__ is fn
        assert (wrapped.__name__, wrapped.__doc__) == (fn.__name__, "doc")
        assert inspect.signature(wrapped) == inspect.signature(fn)
        assert [kind(wrapped) for kind in kinds] == [kind(fn) for kind in kinds], fn.__name__


def test_methods_drop_self_and_cls(spans):
    class Agent:
        factor = 10

        @traceable
        def run(self, x):
            return x * self.factor

        @classmethod
        @traceable
        def build(cls, name):
            return name

        @traceable
        @classmethod
        def outer_build(cls, name):
            return name

        @staticmethod
        @traceable
        def helper(y):
            return y

    assert Agent().run(2) == 20
    assert Agent.build("a") == "a"
    assert Agent.outer_build("b") == "b"
    assert Agent.helper(3) == 3
    assert attrs_json(spans.named("run"), "input.value") == {"x": 2}
    assert attrs_json(spans.named("build"), "input.value") == {"name": "a"}
    assert attrs_json(spans.named("outer_build"), "input.value") == {"name": "b"}
    assert attrs_json(spans.named("helper"), "input.value") == {"y": 3}


def test_exceptions_are_recorded_and_reraised_unchanged(spans):
    error = ValueError("boom")

    @traceable
    def fails():
        raise error

    with pytest.raises(ValueError) as caught:
        fails()
    assert caught.value is error
    span = spans.named("fails")
    assert span.status.status_code is StatusCode.ERROR
    assert span.attributes["error.type"] == "ValueError"
    assert [e.name for e in span.events] == ["exception"]
    assert "output.value" not in span.attributes


def test_an_exception_whose_str_fails_still_ends_the_span_and_bad_tags_never_raise(spans):
    """Found by an audit: the SDK's record_exception calls str(exc); when that raised, the span was
    never ended (its run "running" for good), and run.add_tags(None) raised TypeError into the app."""

    class Unprintable(Exception):
        def __str__(self):
            raise RuntimeError("__str__ failed")

    class BadTag:
        def __str__(self):
            raise RuntimeError("no text")

    @traceable
    def fails():
        raise Unprintable()

    with pytest.raises(Unprintable):
        fails()
    span = spans.named("fails")
    assert span.end_time is not None and span.status.status_code is StatusCode.ERROR
    assert span.status.description == "Unprintable: <Unprintable whose str() failed>"
    with traceable("block") as run:
        run.add_tags(None)  # logged, not raised
    with traceable("tagged", tags=[BadTag()]):  # at decoration: logged, the run goes without tags
        pass
    assert spans.named("block").end_time is not None and "langsmith.span.tags" not in spans.named("tagged").attributes


def test_generator_called_with_wrong_arguments_still_ends_its_span(spans):
    @traceable
    def gen(a):
        yield a

    @traceable
    async def agen(a):
        yield a

    with pytest.raises(TypeError):
        next(gen(1, 2))

    async def main():
        with pytest.raises(TypeError):
            await agen(1, 2).__anext__()

    asyncio.run(main())
    for name in ("gen", "agen"):
        span = spans.named(name)
        assert span.status.status_code is StatusCode.ERROR and span.attributes["error.type"] == "TypeError"


def test_context_manager_sets_outputs_metadata_and_parents_children(spans):
    @traceable
    def step():
        return 1

    with traceable("pipeline", run_type="chain", inputs={"q": "hi"}) as run:
        step()
        run.set_outputs({"answer": 42})
        run.add_metadata({"user": "u1"})
    pipe = spans.named("pipeline")
    assert attrs_json(pipe, "input.value") == {"q": "hi"}
    assert attrs_json(pipe, "output.value") == {"answer": 42}
    assert pipe.attributes["langsmith.metadata.user"] == "u1"
    assert spans.named("step").parent.span_id == pipe.context.span_id


def test_context_manager_records_errors_and_works_async(spans):
    with pytest.raises(KeyError):
        with traceable("broken"):
            raise KeyError("k")
    assert spans.named("broken").status.status_code is StatusCode.ERROR

    async def main():
        async with traceable("async-block", run_type="tool") as run:
            run.set_outputs("plain")

    asyncio.run(main())
    assert attrs_json(spans.named("async-block"), "output.value") == {"output": "plain"}


def test_threads_nest_with_the_helpers_only(spans):
    @traceable
    def work(i):
        return i

    with traceable("fan-out"):
        with ContextThreadPoolExecutor(max_workers=2) as pool:
            assert list(pool.map(work, range(3))) == [0, 1, 2]
        wrapped = copy_context_wrapper(work)
        threads = [threading.Thread(target=wrapped, args=(9,)) for _ in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        bare = threading.Thread(target=work, args=(-1,))
        bare.start()
        bare.join()
    root = spans.named("fan-out")
    works = [s for s in spans.all() if s.name == "work"]
    nested = [s for s in works if s.parent is not None and s.parent.span_id == root.context.span_id]
    assert len(works) == 6 and len(nested) == 5  # the bare thread starts a trace of its own


class Unprintable:
    def __repr__(self):
        raise RuntimeError("no repr")


def test_unserializable_arguments_never_break_the_call(spans):
    @traceable
    def takes(obj, blob, big):
        return obj

    obj = Unprintable()
    assert takes(obj, {1, 2}, 2**70) is obj
    span = spans.named("takes")
    assert isinstance(span.attributes["input.value"], str)  # something readable, no exception


class BrokenTracer:
    def start_span(self, *a, **k):
        raise RuntimeError("tracer exploded")


def test_our_failures_are_logged_and_the_function_still_runs(spans, monkeypatch, caplog):
    monkeypatch.setattr(_traceable, "_get_tracer", BrokenTracer)
    calls = []

    @traceable
    def f(x):
        calls.append(x)
        return x + 1

    @traceable
    def g():
        yield 1

    with caplog.at_level(logging.WARNING, logger="otel_runs_exporter.instrumentation"):
        assert f(1) == 2
        assert list(g()) == [1]
        with traceable("blk") as run:
            run.set_outputs(1)
    assert calls == [1]
    assert "tracer exploded" in caplog.text
    assert spans.all() == []


def test_without_a_span_generators_still_pass_sends_and_throws_through(spans, monkeypatch):
    monkeypatch.setattr(_traceable, "_get_tracer", BrokenTracer)

    @traceable
    def echo():
        try:
            received = yield "ready"
            yield f"got {received}"
        except KeyError:
            yield "recovered"

    @traceable
    async def aecho():
        try:
            received = yield "ready"
            yield f"got {received}"
        except KeyError:
            yield "recovered"

    gen = echo()
    assert (next(gen), gen.send("x")) == ("ready", "got x")
    gen = echo()
    assert (next(gen), gen.throw(KeyError("k"))) == ("ready", "recovered")

    async def main():
        agen = aecho()
        assert (await agen.__anext__(), await agen.asend("x")) == ("ready", "got x")
        agen = aecho()
        assert (await agen.__anext__(), await agen.athrow(KeyError("k"))) == ("ready", "recovered")

    asyncio.run(main())
    assert spans.all() == []


def test_a_block_without_a_span_leaves_the_current_span_current(spans, monkeypatch, tracer_provider):
    # Our failure to start a span must not cut other instrumentations' spans off from their parent.
    monkeypatch.setattr(_traceable, "_get_tracer", BrokenTracer)
    other = tracer_provider.get_tracer("other")
    with other.start_as_current_span("outer"):
        with traceable("block") as run:
            run.set_outputs({"ignored": True})
            with other.start_as_current_span("inner"):
                pass
    assert [s.name for s in spans.all()] == ["inner", "outer"]
    assert spans.named("inner").parent.span_id == spans.named("outer").context.span_id


def test_json_dumps_coerces_models_and_never_raises():
    class Model:
        def model_dump(self, mode="python"):
            return {"a": 1}

    assert json.loads(_traceable.json_dumps({"m": Model(), "s": {1}, "b": b"x"})) == {"m": {"a": 1}, "s": [1], "b": "x"}
    assert isinstance(_traceable.json_dumps(2**80), str)


# --------------------------------------------------------------------------- failing midway, tracebacks


def test_a_generator_that_fails_keeps_the_items_it_yielded_with_the_error(spans):
    @traceable
    def numbers():
        yield 1
        yield 2
        raise ValueError("third")

    @traceable
    async def anumbers():
        yield 1
        yield 2
        raise ValueError("third")

    async def drain():
        got = []
        with pytest.raises(ValueError, match="third"):
            async for item in anumbers():
                got.append(item)
        return got

    with pytest.raises(ValueError, match="third"):
        assert list(numbers()) == [1, 2]
    assert asyncio.run(drain()) == [1, 2]
    for name in ("numbers", "anumbers"):
        span = spans.named(name)
        assert attrs_json(span, "output.value") == {"output": [1, 2]}
        assert span.status.status_code is StatusCode.ERROR
        assert span.status.description == "ValueError: third"


def _frames(exc: BaseException) -> list[tuple[str, str]]:
    import traceback

    return [(frame.filename, frame.name) for frame in traceback.extract_tb(exc.__traceback__)]


@pytest.mark.skipif(
    sys.version_info < (3, 11),
    reason="before 3.11 a re-raise keeps the traceback it was caught with, so the wrapper's frame cannot be left out",
)
def test_a_traceback_goes_from_the_callers_frame_to_the_users_without_ours(spans):
    """The wrapper's frame used to sit between the caller and the user's function, and started
    the traceback recorded on the span; now the user's frames are all there is of the call."""

    @traceable
    def plain():
        raise ValueError("sync")

    @traceable
    async def coroutine():
        raise ValueError("async")

    @traceable
    def gen():
        yield 1
        raise ValueError("gen")

    @traceable
    async def agen():
        yield 1
        raise ValueError("agen")

    async def drain_async(make):
        if inspect.isasyncgenfunction(make):
            return [item async for item in make()]
        return await make()

    here = __file__
    for name, run in (
        ("plain", plain),
        ("coroutine", lambda: asyncio.run(drain_async(coroutine))),
        ("gen", lambda: list(gen())),
        ("agen", lambda: asyncio.run(drain_async(agen))),
    ):
        with pytest.raises(ValueError) as caught:
            run()
        frames = _frames(caught.value)
        assert not [f for f in frames if f[0] == _traceable.__file__], (name, frames)
        assert frames[-1] == (here, name), (name, frames)  # the user's frame raised, and comes last
        # What the span recorded starts at the user's function.
        recorded = spans.named(name).events[0].attributes["exception.stacktrace"]
        assert _traceable.__file__ not in recorded and f'in {name}\n' in recorded, recorded
