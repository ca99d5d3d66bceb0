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

It takes the service SDK's arguments with the SDK's meaning (``name``, ``run_type``, ``metadata``,
``tags``, ``project_name``, ``process_inputs``, ``process_outputs``, ``reduce_fn``, and per call
``langsmith_extra``); the SDK's others are accepted and said once to have no effect here. Where
its spans go (the app's provider, or one set up from ``LANGSMITH_TRACING``) is :mod:`._setup`'s.
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

from .._ids import LANGSMITH_SESSION_NAME
from ..mapping import RUN_TYPES
from . import _setup
from ._options import NO_OPTIONS, Extra, Options, say_unsupported
from ._run_tree import HANDLE_KEY, UNSET, RunHandle, as_object, get_current_run_tree, guard, set_metadata, tags_text
from ._span import SpanCall, json_dumps

__all__ = [
    "traceable", "Traceable", "RunType", "RunHandle", "get_current_run_tree", "copy_context_wrapper",
    "ContextThreadPoolExecutor", "json_dumps",
]

logger = logging.getLogger("otel_runs_exporter.instrumentation")

# A decorated function keeps its type: its parameters (P) and its result (R, which for a
# coroutine, generator or async generator function is the coroutine or generator type).
P = ParamSpec("P")
R = TypeVar("R")
C = TypeVar("C")  # the class a classmethod is bound to

RunType = Literal["llm", "chain", "tool", "retriever", "embedding", "prompt", "parser"]
"""The run types the service knows (``mapping.RUN_TYPES``; a test keeps the two the same).
Another string is still accepted at run time, with a warning; a type checker refuses it."""

def _get_tracer() -> trace.Tracer:
    # Where the spans go is decided at the first call, and again if the app installs a provider later.
    return _setup.tracer()


def _shown(exc: BaseException) -> str:
    """``str(exc)``, or a stand-in when the exception's own ``__str__`` fails."""
    try:
        return str(exc)
    except Exception:
        return f"<{type(exc).__name__} whose str() failed>"


class _Call(SpanCall):
    """The span of one decorated call or ``with`` block, with every operation on it guarded.

    While the user's code runs, the call's :class:`RunHandle` is in the context, so
    :func:`get_current_run_tree` hands out this one (its outputs replace the return value's).
    """

    __slots__ = ("handle", "options", "yielded")

    def __init__(self, span: Span, tags: list[str] | None = None, options: Options = NO_OPTIONS) -> None:
        handle = RunHandle(span, tags)
        super().__init__(span, otel_context.set_value(HANDLE_KEY, handle, trace.set_span_in_context(span)))
        self.handle = handle
        self.options = options
        #: A generator's items yielded so far: its outputs, kept with the error when it fails midway.
        self.yielded: list[Any] | None = None

    def __exit__(self, exc_type: Any, exc: BaseException | None, tb: Any) -> None:
        if exc is not None:
            _drop_our_frames(exc)  # before it is recorded, so the span's stack trace starts at the user's code too
        super().__exit__(exc_type, exc, tb)

    def fail(self, exc: BaseException) -> None:
        # Each step on its own: an exception whose __str__ fails (the SDK's record_exception calls it)
        # left the span open for good, its run "running" at the service.
        if not isinstance(exc, GeneratorExit):  # closing a generator early is not an error
            guard(self.span.record_exception, exc)
            guard(self.span.set_status, Status(StatusCode.ERROR, f"{type(exc).__name__}: {_shown(exc)}"))
            guard(self.span.set_attribute, "error.type", type(exc).__qualname__)
        self.finish(UNSET)

    def finish(self, result: Any) -> None:
        """End the span with ``result`` (or a generator's items) as outputs, unless the run handle was given outputs."""
        try:
            self._end(result)
        except Exception:
            logger.warning("traceable: could not end the span", exc_info=True)

    def _end(self, result: Any) -> None:
        try:
            outputs = self.handle._outputs
            if outputs is UNSET:
                outputs = self.options.reduced(self.yielded) if self.yielded is not None else result
                if outputs is not UNSET:
                    outputs = self.options.outputs(outputs)
            if outputs is not UNSET:
                self.span.set_attribute("output.value", json_dumps(as_object(outputs, "output")))
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
        call.yielded = consumer.items  # the live list: a failure keeps what was yielded before it
        while True:
            # Our span is current only while the user's generator runs, never in the consumer.
            with call:
                try:
                    item = consumer.resume(gen.send, gen.throw)
                except StopIteration as stop:
                    call.finish(UNSET)
                    return stop.value
            consumer.items.append(item)
            try:
                consumer.sent = yield item
            except GeneratorExit:
                with call:  # the user's cleanup runs, in the span, and may fail
                    gen.close()
                call.finish(UNSET)
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
        call.yielded = consumer.items
        while True:
            with call:
                try:
                    item = await consumer.resume(agen.asend, agen.athrow)
                except StopAsyncIteration:
                    call.finish(UNSET)
                    return
            consumer.items.append(item)
            try:
                consumer.sent = yield item
            except GeneratorExit:
                with call:
                    await agen.aclose()
                call.finish(UNSET)
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
        project_name: str | None = None,
        process_inputs: Callable[[dict[str, Any]], Any] | None = None,
        process_outputs: Callable[[Any], Any] | None = None,
        reduce_fn: Callable[[list[Any]], Any] | None = None,
        enabled: bool | None = None,
        block_name: str | None = None,
        **unsupported: Any,
    ) -> None:
        if run_type not in RUN_TYPES:
            logger.warning("traceable: unknown run_type %r, the service may not accept it", run_type)
        for key in sorted(unsupported):
            say_unsupported(f"the argument {key}=")
        self.name = name
        self.block_name = block_name or name or "traceable"
        self.run_type = run_type
        self.metadata = dict(metadata) if metadata else None
        self.tags: list[str] | None = None
        if tags:
            try:
                self.tags = [str(t) for t in ([tags] if isinstance(tags, str) else tags)]
            except Exception:
                logger.warning("traceable: the tags of %r could not be read; it goes without them", name, exc_info=True)
        self.inputs = inputs
        self.project_name = project_name if isinstance(project_name, str) and project_name else None
        self.processors = (process_inputs, process_outputs, reduce_fn)
        self.enabled = enabled is not False
        # Context-manager entries; a stack so a (discouraged) nested reuse of one object still pairs up.
        self._entered: list[_Call] = []

    # -- shared

    def _start(self, name: str, inputs: Any, extra: Extra | None = None, options: Options = NO_OPTIONS) -> _Call:
        if not self.enabled:
            return _Untraced()
        try:
            tags = self.tags
            if extra is not None and extra.tags:
                tags = [*(tags or ()), *extra.tags]
            attributes: dict[str, Any] = {"langsmith.span.kind": self.run_type}
            if inputs is not None:
                attributes["input.value"] = json_dumps(as_object(inputs, "input"))
            if tags:
                attributes["langsmith.span.tags"] = tags_text(tags)
            project = (extra.project_name if extra is not None else None) or self.project_name
            if project:
                # Honoured where the span starts a tree; a nested run stays in its tree's project (_convert says so).
                attributes[LANGSMITH_SESSION_NAME] = project
            span = _get_tracer().start_span(name, attributes=attributes)
            if self.metadata:
                set_metadata(span, self.metadata)
            if extra is not None and extra.metadata:
                set_metadata(span, extra.metadata)
            return _Call(span, tags, options)
        except Exception:
            logger.warning("traceable: could not start a span for %r", name, exc_info=True)
            return _Untraced()

    # -- context manager

    def __enter__(self) -> RunHandle:
        call = self._start(self.block_name, self.inputs)
        self._entered.append(call)
        call.__enter__()
        return call.handle

    def __exit__(self, exc_type: Any, exc: BaseException | None, tb: Any) -> None:
        if not self._entered:
            return
        call = self._entered.pop()
        call.__exit__(exc_type, exc, tb)
        if exc is None:
            call.finish(UNSET)

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
        options = Options(name, *self.processors)

        def begin(args: tuple[Any, ...], kwargs: dict[str, Any]) -> _Call:
            # The service SDK's per-call argument is never the function's: taken out before it is called.
            extra = Extra(kwargs.pop("langsmith_extra"), name) if "langsmith_extra" in kwargs else None
            try:
                inputs = options.inputs(sig.inputs(args, kwargs))
            except Exception:
                logger.warning("traceable: could not bind the arguments of %r", name, exc_info=True)
                inputs = {}
            return start((extra.name if extra is not None else None) or name, inputs, extra, options)

        make = next((make for is_kind, make in _WRAPPERS if is_kind(fn)), _trace_function)
        # The wrapper is of the function's own kind (see _WRAPPERS), so it has its type.
        return cast("Callable[P, R]", functools.wraps(fn)(make(fn, begin)))


# Three forms, so that a type checker keeps the decorated function's type (its parameters and
# its result, coroutine and generator types included): bare ``@traceable`` on a function (or
# above ``@classmethod`` / ``@staticmethod``), and ``traceable(...)`` with options, which gives
# a :class:`Traceable` to decorate with or to use as a context manager. The service SDK's
# per-call ``langsmith_extra=`` is accepted at run time but not typed: a decorated function
# keeps its own signature, and a keyword it does not declare cannot be added to it.


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
    project_name: str | None = None,
    process_inputs: Callable[[dict[str, Any]], Any] | None = None,
    process_outputs: Callable[[Any], Any] | None = None,
    reduce_fn: Callable[[list[Any]], Any] | None = None,
    enabled: bool | None = None,
    client: Any = None,
    process_chunk: Callable[[Any], Any] | None = None,
    dangerously_allow_filesystem: bool = False,
    exceptions_to_handle: tuple[type[BaseException], ...] | None = None,
) -> Traceable: ...


def traceable(
    func: Any = None,
    *,
    name: str | None = None,
    run_type: RunType | str | None = None,
    metadata: Mapping[str, Any] | None = None,
    tags: Iterable[str] | None = None,
    inputs: Mapping[str, Any] | None = None,
    **options: Any,
) -> Any:
    """Trace a function (decorator) or a block of code (context manager) as a run.

    ``run_type`` is one of chain, llm, tool, retriever, embedding, prompt, parser. As a decorator
    the inputs are the call's arguments, bound to the signature with defaults applied (``self`` and
    ``cls`` left out), and the outputs are the return value (a non-mapping becomes
    ``{"output": value}``; a generator's yielded items become ``{"output": [...]}``, kept with the
    error when it fails midway). As a context
    manager, pass ``inputs=`` and set outputs on the yielded :class:`RunHandle`.

    The service SDK's arguments mean what they mean there: ``project_name`` (the project of the
    tree this run starts), ``process_inputs`` / ``process_outputs`` (what is recorded; one that
    raises withholds the payload), ``reduce_fn`` (a generator's items into one output), and per
    call ``langsmith_extra={"metadata": ..., "tags": ..., "project_name": ..., "name": ...}``
    (untyped: the decorated function keeps its own signature). ``enabled=False`` runs it
    untraced. Its other arguments (``client``, ...) are accepted and said once to do nothing.
    A first positional string is the name, or the run type when it is one (as the SDK reads it).

    >>> @traceable
    ... def add(a, b=1):
    ...     return a + b
    >>> add(2)
    3
    >>> @traceable(run_type="tool", metadata={"team": "search"}, tags=["beta"], project_name="search")
    ... def search(query: str) -> list[str]:
    ...     return [query]
    >>> search("q", langsmith_extra={"metadata": {"user_id": "u-7"}})
    ['q']
    >>> with traceable("step", run_type="chain", inputs={"x": 1}) as run:
    ...     run.set_outputs({"y": 2})
    """
    block_name = None
    if isinstance(func, str):  # ``traceable("step")``: the name, given first; ``traceable("llm")``: the SDK's run type
        if func in RUN_TYPES and run_type is None:
            run_type, block_name = func, func
        else:
            name = func
        func = None
    made = Traceable(name, run_type=run_type or "chain", metadata=metadata, tags=tags, inputs=inputs,
                     block_name=block_name, **options)
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
