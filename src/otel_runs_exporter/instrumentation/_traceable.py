"""``traceable``: turn a function call or a block of code into an OTel span that becomes a run.

The span carries the attributes the converter reads (``langsmith.span.kind``, ``input.value``,
``output.value``, ``langsmith.metadata.<key>``, ``langsmith.span.tags``), so a decorated call
becomes a run of the chosen type with its arguments as inputs and its return value as outputs.

Two promises shape the code:

* Our failures never reach user code. Everything we do around the user's function (binding
  arguments, serializing, starting and ending spans) is guarded; on a failure we log on
  ``otel_runs_exporter.instrumentation`` and the function still runs once and returns normally.
  The user's own exceptions are recorded on the span and re-raised unchanged, except that their
  traceback no longer shows our wrapper: it goes from the caller to the user's function.
* Parenting follows the OTel context. Asyncio tasks copy it by themselves; threads do not, so
  :func:`copy_context_wrapper` and :class:`ContextThreadPoolExecutor` carry it into executors.
"""

from __future__ import annotations

import contextvars
import functools
import inspect
import logging
from concurrent.futures import Future, ThreadPoolExecutor
from contextvars import Token
from typing import Any, Callable, Iterable, Literal, Mapping, ParamSpec, TypeVar, cast, overload

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.trace import Span, Status, StatusCode

from .._encode import dumps, json_value
from ..mapping import RUN_TYPES

__all__ = ["traceable", "Traceable", "RunType", "RunHandle", "copy_context_wrapper", "ContextThreadPoolExecutor", "json_dumps"]

logger = logging.getLogger("otel_runs_exporter.instrumentation")

# A decorated function keeps its type: its parameters (P) and its result (R, which for a
# coroutine, generator or async generator function is the coroutine or generator type).
P = ParamSpec("P")
R = TypeVar("R")
C = TypeVar("C")  # the class a classmethod is bound to

RunType = Literal["llm", "chain", "tool", "retriever", "embedding", "prompt", "parser"]
"""The run types the service knows (``mapping.RUN_TYPES``; a test keeps the two the same).
Another string is still accepted at run time, with a warning; a type checker refuses it."""

_tracer: trace.Tracer | None = None


def _get_tracer() -> trace.Tracer:
    # The API hands out a proxy tracer until a provider is installed and then forwards to it,
    # so creating it once is still correct when ``configure()`` runs after the decoration.
    global _tracer
    if _tracer is None:
        _tracer = trace.get_tracer("otel_runs_exporter")
    return _tracer


# --------------------------------------------------------------------------- serialization


def json_dumps(value: Any) -> str:
    """Serialize ``value`` to a JSON string for a span attribute; never raises.

    The exporter's one coercion rule applies (``_encode.dumps``, whose fallback is
    ``_encode.json_value``): a Decimal a number, a path its string, pydantic models and
    dataclasses dicts, arrays lists, sets listed, cycles and excessive depth marked where
    they occur, only what no rule knows ``repr``-ed, so one odd argument never loses the others.

    >>> json_dumps({"a": {1, 2}, "b": object}).startswith('{"a":[')
    True
    """
    return dumps(value).decode()


def _attribute_value(value: Any) -> Any:
    """A value OTel accepts as an attribute: primitives as they are, anything else as JSON.

    A value JSON has no type for is first what ``json_value`` makes of it, so a Decimal stays a
    number and a path a plain string, as they would inside the inputs.
    """
    if not isinstance(value, (str, bool, int, float, list, tuple, dict)):
        value = json_value(value)
    if isinstance(value, (str, bool, int, float)):
        return value
    if isinstance(value, (list, tuple)) and value and all(isinstance(v, str) for v in value):
        return list(value)
    return json_dumps(value)


# --------------------------------------------------------------------------- the run handle


class RunHandle:
    """What ``with traceable(...) as run`` yields: a way to fill in the run before it ends.

    >>> with traceable("lookup", run_type="retriever", inputs={"q": "x"}) as run:  # doctest: +SKIP
    ...     run.set_outputs({"documents": []})
    ...     run.add_metadata({"index": "v2"})
    """

    __slots__ = ("span", "_outputs")

    def __init__(self, span: Span) -> None:
        self.span = span
        self._outputs: Any = _UNSET

    def set_inputs(self, inputs: Mapping[str, Any] | Any) -> None:
        """Replace the run's inputs (a mapping; anything else becomes ``{"input": value}``)."""
        _guard(self.span.set_attribute, "input.value", json_dumps(_as_object(inputs, "input")))

    def set_outputs(self, outputs: Mapping[str, Any] | Any) -> None:
        """Set the run's outputs, written when the block ends (non-mappings become ``{"output": value}``)."""
        self._outputs = outputs

    def add_metadata(self, metadata: Mapping[str, Any]) -> None:
        """Add ``langsmith.metadata.<key>`` attributes."""
        _guard(_set_metadata, self.span, metadata)

    def add_tags(self, tags: Iterable[str]) -> None:
        """Set the run's tags (replacing any given to ``traceable``)."""
        _guard(_set_tags, self.span, tags)


class _Unset:
    def __repr__(self) -> str:
        return "<unset>"


_UNSET: Any = _Unset()


def _guard(fn: Callable[..., Any], *args: Any) -> None:
    try:
        fn(*args)
    except Exception:
        logger.warning("traceable: %s failed", getattr(fn, "__name__", fn), exc_info=True)


def _tags_text(tags: Iterable[str]) -> str:
    return json_dumps([str(t) for t in tags])


def _set_tags(span: Span, tags: Iterable[str]) -> None:
    span.set_attribute("langsmith.span.tags", _tags_text(tags))


def _shown(exc: BaseException) -> str:
    """``str(exc)``, or a stand-in when the exception's own ``__str__`` fails."""
    try:
        return str(exc)
    except Exception:
        return f"<{type(exc).__name__} whose str() failed>"


def _as_object(value: Any, key: str) -> Any:
    return value if isinstance(value, Mapping) else {key: value}


def _set_metadata(span: Span, metadata: Mapping[str, Any]) -> None:
    for key, value in metadata.items():
        span.set_attribute(f"langsmith.metadata.{key}", _attribute_value(value))


# --------------------------------------------------------------------------- one traced call


class SpanCall:
    """The span of one traced call, shared by ``traceable`` and the client instrumentors.

    ``with call:`` runs a stretch of the user's code with the span current. An exception that
    leaves the block is the user's: it is recorded by :meth:`fail` (which ends the span) and goes
    on unchanged. Ending on success is the caller's part, since only it knows the outputs.
    """

    __slots__ = ("span", "ctx", "_token")

    def __init__(self, span: Span, ctx: otel_context.Context) -> None:
        self.span = span
        self.ctx = ctx
        self._token: Token[otel_context.Context] | None = None

    def attach(self) -> Token[otel_context.Context] | None:
        """Make the span current; the token for :meth:`detach`, or None if that failed (logged)."""
        try:
            return otel_context.attach(self.ctx)
        except Exception:
            logger.warning("could not make the span current", exc_info=True)
            return None

    @staticmethod
    def detach(token: Token[otel_context.Context] | None) -> None:
        """Undo :meth:`attach`."""
        if token is not None:
            otel_context.detach(token)  # logs its own failures, never raises

    def fail(self, exc: BaseException) -> None:
        """Record the user's exception and end the span; must not raise."""
        raise NotImplementedError

    def __enter__(self) -> None:
        self._token = self.attach()

    def __exit__(self, exc_type: Any, exc: BaseException | None, tb: Any) -> None:
        token, self._token = self._token, None
        self.detach(token)
        if exc is not None:
            self.fail(exc)


class _Call(SpanCall):
    """The span of one decorated call or ``with`` block, with every operation on it guarded."""

    __slots__ = ("handle", "so_far")

    def __init__(self, span: Span) -> None:
        super().__init__(span, trace.set_span_in_context(span))
        self.handle = RunHandle(span)
        #: The outputs of a call that fails midway: a generator's items yielded before the error.
        self.so_far: Any = _UNSET

    def __exit__(self, exc_type: Any, exc: BaseException | None, tb: Any) -> None:
        if exc is not None:
            _drop_our_frames(exc)  # before it is recorded, so the span's stack trace starts at the user's code too
        super().__exit__(exc_type, exc, tb)

    def fail(self, exc: BaseException) -> None:
        # Each step on its own: an exception whose __str__ fails (the SDK's record_exception calls it)
        # left the span open for good, its run "running" at the service.
        if not isinstance(exc, GeneratorExit):  # closing a generator early is not an error
            _guard(self.span.record_exception, exc)
            _guard(self.span.set_status, Status(StatusCode.ERROR, f"{type(exc).__name__}: {_shown(exc)}"))
            _guard(self.span.set_attribute, "error.type", type(exc).__qualname__)
        self.finish(self.so_far)

    def finish(self, result: Any) -> None:
        """End the span with ``result`` as outputs, unless the run handle was given outputs."""
        try:
            self._end(result)
        except Exception:
            logger.warning("traceable: could not end the span", exc_info=True)

    def _end(self, result: Any) -> None:
        try:
            outputs = self.handle._outputs
            if outputs is _UNSET:
                outputs = result
            if outputs is not _UNSET:
                self.span.set_attribute("output.value", json_dumps(_as_object(outputs, "output")))
        finally:
            self.span.end()  # outputs that cannot be written still end the run


def _drop_our_frames(exc: BaseException) -> None:
    """Start the traceback of the user's exception at the user's code, not at our wrapper.

    An exception from a decorated function passed through the wrapper, whose frame then came
    first in its traceback (and between the caller's frame and the user's, in what is printed).
    The ``with`` statement that re-raises it uses the exception's ``__traceback__`` (Python
    3.11 and later; before, the one it caught, so this changes nothing there), and a re-raise
    adds no frame: the caller sees its own frame, then the user's. The last frame stays, so
    an exception raised here (a call with the wrong arguments) still says where it came from.
    """
    try:
        tb = exc.__traceback__
        while tb is not None and tb.tb_next is not None and tb.tb_frame.f_code.co_filename == __file__:
            tb = tb.tb_next
        if tb is not exc.__traceback__:
            exc.__traceback__ = tb
    except Exception:  # an exception type that refuses a traceback keeps its own
        logger.debug("traceable: could not shorten a traceback", exc_info=True)


class _Untraced(_Call):
    """Stands in when no span could be started: the user's code runs as if undecorated (whatever
    span was current stays current) and recording is a no-op, so every wrapper takes one path."""

    __slots__ = ()

    def __init__(self) -> None:
        # A handle on a non-recording span keeps ``run.set_outputs`` and the rest working as no-ops.
        super().__init__(trace.INVALID_SPAN)

    def attach(self) -> Token[otel_context.Context] | None:
        return None

    def fail(self, exc: BaseException) -> None:
        pass

    def finish(self, result: Any) -> None:
        pass


class _Consumer:
    """What the consumer of a traced generator did at its last ``yield`` (sent a value or threw an
    exception), to be passed on to the user's generator, and the items yielded so far.

    The wrappers drive the user's generator step by step rather than ``yield from`` it, so that
    our span is current only while the user's code runs, never in the consumer's.
    """

    __slots__ = ("items", "sent", "thrown")

    def __init__(self) -> None:
        self.items: list[Any] = []
        self.sent: Any = None
        self.thrown: BaseException | None = None

    def resume(self, send: Callable[[Any], Any], throw: Callable[[BaseException], Any]) -> Any:
        """Resume the user's generator as ours was resumed (for an async one: the awaitable)."""
        exc, self.thrown = self.thrown, None
        return send(self.sent) if exc is None else throw(exc)

    def outputs(self) -> dict[str, Any]:
        """The run's outputs: the items yielded so far (the same list, so it grows with them)."""
        return {"output": self.items}


# --------------------------------------------------------------------------- the decorator


class _Signature:
    """What is computed once per decorated function so each call only binds and dumps."""

    __slots__ = ("sig", "drop_first", "var_kw")

    def __init__(self, fn: Callable[..., Any]) -> None:
        try:
            self.sig: inspect.Signature | None = inspect.signature(fn)
        except (TypeError, ValueError):
            self.sig = None
        params = list(self.sig.parameters.values()) if self.sig else []
        # Methods are decorated as plain functions in the class body: their receiver is noise.
        self.drop_first = bool(params) and params[0].name in ("self", "cls") and params[0].kind in (
            inspect.Parameter.POSITIONAL_ONLY,
            inspect.Parameter.POSITIONAL_OR_KEYWORD,
        )
        self.var_kw = next((p.name for p in params if p.kind is inspect.Parameter.VAR_KEYWORD), None)

    def inputs(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> dict[str, Any]:
        if self.sig is None:
            return {"args": list(args), **kwargs}
        try:
            bound = self.sig.bind(*args, **kwargs)
        except TypeError:
            # The call itself is wrong; the user's function will raise the real error.
            return {"args": list(args), **kwargs}
        bound.apply_defaults()
        inputs = dict(bound.arguments)
        if self.drop_first:
            inputs.pop(next(iter(self.sig.parameters)), None)
        if self.var_kw is not None:
            # ``**kwargs`` reads better flattened, as the caller wrote it.
            extra = inputs.pop(self.var_kw, None) or {}
            for key, value in extra.items():
                inputs.setdefault(key, value)
        return inputs


_Begin = Callable[[tuple[Any, ...], dict[str, Any]], _Call]
"""Starts the span of one call from its arguments (an :class:`_Untraced` one when it could not)."""


def _trace_function(fn: Callable[..., Any], begin: _Begin) -> Callable[..., Any]:
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        call = begin(args, kwargs)
        with call:
            result = fn(*args, **kwargs)
        call.finish(result)
        return result

    return wrapper


def _trace_coroutine(fn: Callable[..., Any], begin: _Begin) -> Callable[..., Any]:
    async def async_wrapper(*args: Any, **kwargs: Any) -> Any:
        call = begin(args, kwargs)
        with call:
            result = await fn(*args, **kwargs)
        call.finish(result)
        return result

    return async_wrapper


def _trace_generator(fn: Callable[..., Any], begin: _Begin) -> Callable[..., Any]:
    def gen_wrapper(*args: Any, **kwargs: Any) -> Any:
        call = begin(args, kwargs)
        with call:  # a call with the wrong arguments fails here, and must end the span too
            gen = fn(*args, **kwargs)
        consumer = _Consumer()
        call.so_far = consumer.outputs()  # the live list: a failure keeps what was yielded before it
        while True:
            # Our span is current only while the user's generator runs, never in the consumer.
            with call:
                try:
                    item = consumer.resume(gen.send, gen.throw)
                except StopIteration as stop:
                    call.finish(consumer.outputs())
                    return stop.value
            consumer.items.append(item)
            try:
                consumer.sent = yield item
            except GeneratorExit:
                with call:  # the user's cleanup runs, in the span, and may fail
                    gen.close()
                call.finish(consumer.outputs())
                raise
            except BaseException as exc:  # gen.throw() from the consumer goes into the user's generator
                consumer.thrown = exc

    return gen_wrapper


def _trace_async_generator(fn: Callable[..., Any], begin: _Begin) -> Callable[..., Any]:
    async def async_gen_wrapper(*args: Any, **kwargs: Any) -> Any:
        call = begin(args, kwargs)
        with call:
            agen = fn(*args, **kwargs)
        consumer = _Consumer()
        call.so_far = consumer.outputs()
        while True:
            with call:
                try:
                    item = await consumer.resume(agen.asend, agen.athrow)
                except StopAsyncIteration:
                    call.finish(consumer.outputs())
                    return
            consumer.items.append(item)
            try:
                consumer.sent = yield item
            except GeneratorExit:
                with call:
                    await agen.aclose()
                call.finish(consumer.outputs())
                raise
            except BaseException as exc:
                consumer.thrown = exc

    return async_gen_wrapper


_Wrap = Callable[[Callable[..., Any], _Begin], Callable[..., Any]]

# Each wrapper is of the same kind as the function it wraps, for callers that check (frameworks
# await coroutine functions and stream generators); anything else gets ``_trace_function``.
_WRAPPERS: tuple[tuple[Callable[[Any], bool], _Wrap], ...] = (
    (inspect.isasyncgenfunction, _trace_async_generator),
    (inspect.isgeneratorfunction, _trace_generator),
    (inspect.iscoroutinefunction, _trace_coroutine),
)


class Traceable:
    """What ``traceable(...)`` returns: a decorator and a context manager (sync and async).

    Made by :func:`traceable`, not directly; named so that annotations can say what it is.
    """

    def __init__(
        self,
        name: str | None = None,
        *,
        run_type: RunType | str = "chain",
        metadata: Mapping[str, Any] | None = None,
        tags: Iterable[str] | None = None,
        inputs: Mapping[str, Any] | None = None,
    ) -> None:
        if run_type not in RUN_TYPES:
            logger.warning("traceable: unknown run_type %r, the service may not accept it", run_type)
        self.name = name
        self.run_type = run_type
        self.metadata = dict(metadata) if metadata else None
        self.tags: str | None = None
        if tags:
            try:
                self.tags = _tags_text(tags)
            except Exception:
                logger.warning("traceable: the tags of %r could not be read; it goes without them", name, exc_info=True)
        self.inputs = inputs
        # Context-manager entries; a stack so a (discouraged) nested reuse of one object still pairs up.
        self._entered: list[_Call] = []

    # -- shared

    def _start(self, name: str, inputs: Any) -> _Call:
        try:
            attributes: dict[str, Any] = {"langsmith.span.kind": self.run_type}
            if inputs is not None:
                attributes["input.value"] = json_dumps(_as_object(inputs, "input"))
            if self.tags is not None:
                attributes["langsmith.span.tags"] = self.tags
            span = _get_tracer().start_span(name, attributes=attributes)
            if self.metadata:
                _set_metadata(span, self.metadata)
            return _Call(span)
        except Exception:
            logger.warning("traceable: could not start a span for %r", name, exc_info=True)
            return _Untraced()

    # -- context manager

    def __enter__(self) -> RunHandle:
        call = self._start(self.name or "traceable", self.inputs)
        self._entered.append(call)
        call.__enter__()
        return call.handle

    def __exit__(self, exc_type: Any, exc: BaseException | None, tb: Any) -> None:
        if not self._entered:
            return
        call = self._entered.pop()
        call.__exit__(exc_type, exc, tb)
        if exc is None:
            call.finish(_UNSET)

    async def __aenter__(self) -> RunHandle:
        return self.__enter__()

    async def __aexit__(self, exc_type: Any, exc: BaseException | None, tb: Any) -> None:
        self.__exit__(exc_type, exc, tb)

    # -- decorator

    @overload
    def __call__(self, fn: classmethod[C, P, R]) -> classmethod[C, P, R]: ...

    @overload
    def __call__(self, fn: staticmethod[P, R]) -> staticmethod[P, R]: ...

    @overload
    def __call__(self, fn: Callable[P, R]) -> Callable[P, R]: ...

    def __call__(self, fn: Any) -> Any:
        if isinstance(fn, (classmethod, staticmethod)):
            # ``@traceable`` above ``@classmethod``: decorate the function, keep the descriptor.
            return type(fn)(self(fn.__func__))
        try:
            return self._decorate(fn)
        except Exception:
            logger.warning("traceable: could not decorate %r; it runs untraced", fn, exc_info=True)
            return fn

    def _decorate(self, fn: Callable[P, R]) -> Callable[P, R]:
        sig = _Signature(fn)
        name = self.name or getattr(fn, "__name__", None) or type(fn).__name__
        start = self._start

        def begin(args: tuple[Any, ...], kwargs: dict[str, Any]) -> _Call:
            try:
                inputs = sig.inputs(args, kwargs)
            except Exception:
                logger.warning("traceable: could not bind the arguments of %r", name, exc_info=True)
                inputs = {}
            return start(name, inputs)

        make = next((make for is_kind, make in _WRAPPERS if is_kind(fn)), _trace_function)
        # The wrapper is of the function's own kind (see _WRAPPERS), so it has its type.
        return cast("Callable[P, R]", functools.wraps(fn)(make(fn, begin)))


# Three forms, so that a type checker keeps the decorated function's type (its parameters and
# its result, coroutine and generator types included): bare ``@traceable`` on a function (or
# above ``@classmethod`` / ``@staticmethod``), and ``traceable(...)`` with options, which gives
# a :class:`Traceable` to decorate with or to use as a context manager.


@overload
def traceable(func: classmethod[C, P, R], /) -> classmethod[C, P, R]: ...


@overload
def traceable(func: staticmethod[P, R], /) -> staticmethod[P, R]: ...


@overload
def traceable(func: Callable[P, R], /) -> Callable[P, R]: ...


@overload
def traceable(
    func: str | None = None,
    /,
    *,
    name: str | None = None,
    run_type: RunType = "chain",
    metadata: Mapping[str, Any] | None = None,
    tags: Iterable[str] | None = None,
    inputs: Mapping[str, Any] | None = None,
) -> Traceable: ...


def traceable(
    func: Any = None,
    *,
    name: str | None = None,
    run_type: RunType | str = "chain",
    metadata: Mapping[str, Any] | None = None,
    tags: Iterable[str] | None = None,
    inputs: Mapping[str, Any] | None = None,
) -> Any:
    """Trace a function (decorator) or a block of code (context manager) as a run.

    ``run_type`` is one of chain, llm, tool, retriever, embedding, prompt, parser. As a decorator
    the inputs are the call's arguments, bound to the signature with defaults applied (``self`` and
    ``cls`` left out), and the outputs are the return value (a non-mapping becomes
    ``{"output": value}``; a generator's yielded items become ``{"output": [...]}``, kept with the
    error when it fails midway). As a context
    manager, pass ``inputs=`` and set outputs on the yielded :class:`RunHandle`.

    >>> @traceable
    ... def add(a, b=1):
    ...     return a + b
    >>> add(2)
    3
    >>> @traceable(run_type="tool", metadata={"team": "search"}, tags=["beta"])
    ... def search(query: str) -> list[str]:
    ...     return [query]
    >>> with traceable("step", run_type="chain", inputs={"x": 1}) as run:
    ...     run.set_outputs({"y": 2})
    """
    if isinstance(func, str):  # ``traceable("step")``: the name, given first
        name, func = func, None
    made = Traceable(name, run_type=run_type, metadata=metadata, tags=tags, inputs=inputs)
    if isinstance(func, (classmethod, staticmethod)) or callable(func):  # used bare, as ``@traceable``
        return made(func)
    return made


# --------------------------------------------------------------------------- executors


def copy_context_wrapper(fn: Callable[P, R]) -> Callable[P, R]:
    """Bind ``fn`` to the current context (and so the current span) for running in another thread.

    The context is captured now; each call runs in a fresh copy of it, so the wrapper can be
    submitted many times and run concurrently.

    >>> with traceable("parent"):  # doctest: +SKIP
    ...     threading.Thread(target=copy_context_wrapper(child)).start()
    """
    captured = contextvars.copy_context()

    @functools.wraps(fn)
    def run_in_context(*args: P.args, **kwargs: P.kwargs) -> R:
        # A Context can be entered by one thread at a time; a copy per call avoids that limit.
        return captured.copy().run(fn, *args, **kwargs)

    return run_in_context


class ContextThreadPoolExecutor(ThreadPoolExecutor):
    """A ``ThreadPoolExecutor`` whose tasks run in the context of the code that submitted them.

    Runs created inside the tasks become children of the run that was current at ``submit``
    (``map`` goes through ``submit`` too).

    >>> with ContextThreadPoolExecutor() as pool, traceable("fan-out"):  # doctest: +SKIP
    ...     results = list(pool.map(child, range(3)))
    """

    def submit(self, fn: Callable[P, R], /, *args: P.args, **kwargs: P.kwargs) -> Future[R]:
        run_in_context = cast("Callable[..., R]", contextvars.copy_context().run)  # mypy cannot infer through it
        return super().submit(run_in_context, fn, *args, **kwargs)
