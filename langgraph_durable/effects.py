"""Side effects once: a resumed or retried step does not repeat what it already did.

LangGraph re-executes a node from its first line when it resumes after ``interrupt()``,
after a crash that came before the node's writes were stored, and on every attempt of a
retry policy. Code with a side effect (an e-mail, a payment, a POST) in such a node runs
again. Inside a node or a ``@task`` of a graph whose checkpointer is a ``DurableSaver``:

- ``once(name, fn, *args, **kwargs)`` (``await aonce(...)`` in async code) calls ``fn``
  the first time and journals *started* before the call and the result after it, in the
  saver's storage (Redis, one round trip each; flushed to MongoDB like pending writes).
  A re-execution of the same task returns the journaled result without calling ``fn``;
  one that finds *started* without a result (the process died in between) raises
  ``EffectInDoubtError`` (``in_doubt="raise"``) or calls ``fn`` again with the same
  ``idempotency_key`` (``in_doubt="retry"``), never silently.
- ``idempotency_key(name)`` gives the same key on every re-execution of the same task
  (same thread, task checkpoint_ns, task id, name and call number), a different one for
  any other task, run or thread: pass it to APIs that deduplicate (Stripe's
  ``Idempotency-Key``). Inside ``fn`` of ``once(name, ...)`` it is that effect's key.

An effect is identified by the task (LangGraph's task id, made from the checkpoint the
step started from, the node and the step: the same on a resume, after a crash and on a
retry) and by the call number of ``name`` within the task's execution (the first
``once("mail", ...)`` is call 0, the next call 1, counted again from 0 by every
execution). A fork (``checkpoint_id`` in the config, ``update_state``) or a new run makes
new task ids, so its effects run again. See ``docs/effects.md``.
"""

from __future__ import annotations

import asyncio
import hashlib
import inspect
import threading
from collections import OrderedDict
from collections.abc import Callable, Generator, Mapping
from contextlib import closing
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any, Literal

from .core.drive import Steps
from .core.records import check_id
from .errors import (
    ConfigurationError,
    EffectFailedError,
    EffectInDoubtError,
    InvalidIdentifierError,
    SerializationError,
)
from .plans.effect_journal import EffectRef, Entry, begin_plan, end_plan, task_checkpoint_plan
from .plans.write import dumps
from .saver import DurableSaver

InDoubt = Literal["raise", "retry"]
"""What ``once`` does with an effect journaled as started without an outcome."""

# LangGraph's configurable keys of a running task (langgraph._internal._constants)
_TASK_ID = "__pregel_task_id"
_CHECKPOINTER = "__pregel_checkpointer"
_SCRATCHPAD = "__pregel_scratchpad"
_DURABILITY = "__pregel_durability"  # set when the run was given one; "async" by default
_CALL = "__pregel_call"  # binds the running loop's accept_push (``_loop_stores``)

_running: ContextVar[tuple[str, str] | None] = ContextVar("lgd_effect", default=None)

MAX_RESULT_BYTES = 16 * 1024 * 1024 - 64 * 1024
"""Largest serialized result of an effect: its journal entry is one MongoDB document
(16 MiB at most, with room for the entry's other fields); ``once`` refuses a bigger one
rather than journal what can never be flushed."""

_crash_hook: Callable[[str, EffectRef], None] | None = None
"""Tests only: called with ``("started" | "called" | "journaled", ref)`` at the three
points a crash can hit (after the started entry, after ``fn`` returned, after the
outcome was journaled)."""


class _Counters:
    """Call numbers per task execution and name. An execution is told apart by LangGraph's
    scratchpad ``interrupt_counter`` object: a new one for every prepared task (a resume,
    a restart) and for every retry attempt (``pregel/_retry.py`` replaces it), so each
    execution counts from 0. Holds the ``size`` most recent executions (the tiny counter objects,
    which keeps their ``id`` unique while held)."""

    def __init__(self, size: int = 16384) -> None:
        # id(owner) -> (owner, call numbers by name, calls of a name still running)
        self._calls: OrderedDict[int, tuple[object, dict[str, int], dict[str, int]]] = (
            OrderedDict())
        self._size = size
        self._lock = threading.Lock()

    def next(self, owner: object, name: str, running: bool = False) -> int | None:
        """The next call number of ``name`` in the execution ``owner`` (0 first). With
        ``running``, the call stays counted as running until ``done``; then None is
        returned (and no number taken) while another running call of ``name`` has not
        finished: concurrent calls of one name would be numbered in the order they
        started, which may differ in the next execution."""
        with self._lock:
            held = self._calls.get(id(owner))
            if held is None or held[0] is not owner:
                held = self._calls[id(owner)] = (owner, {}, {})
            self._calls.move_to_end(id(owner))
            while len(self._calls) > self._size:
                self._calls.popitem(last=False)
            if running:
                if held[2].get(name):
                    return None
                held[2][name] = 1
            n = held[1].get(name, 0)
            held[1][name] = n + 1
            return n

    def done(self, owner: object, name: str) -> None:
        """The running call of ``name`` in the execution ``owner`` ended."""
        with self._lock:
            held = self._calls.get(id(owner))
            if held is not None and held[0] is owner:
                held[2].pop(name, None)


_COUNTERS = _Counters()


@dataclass(frozen=True)
class _Task:
    """The running task as its config tells it: ``checkpoint_id`` is the checkpoint it runs
    from, ``checkpoint_ns`` the namespace storing that checkpoint (its graph's; for a
    functional API ``@task``, its caller's loop's), ``durability`` LangGraph's mode of the
    run."""

    thread_id: str
    task_ns: str
    task_id: str
    checkpoint_ns: str
    checkpoint_id: str
    owner: object
    checkpointer: Any
    durability: str = "async"
    loop_stores: bool = True

    @property
    def stores_checkpoints(self) -> bool:
        """Whether the run stores its checkpoints as it goes (LangGraph's durability
        ``"async"`` or ``"sync"``; ``"exit"`` stores one when the run ends) and the task's
        loop stores any (not a subgraph compiled with ``checkpointer=False``)."""
        return self.durability != "exit" and self.loop_stores

    def ref(self, name: str, kind: str) -> EffectRef:
        """The next effect (``kind`` "fx", counted as running until ``done``) or key
        (``kind`` "key") of ``name`` in this execution. Raises ``ConfigurationError`` for
        an effect while another effect of ``name`` of this execution is running."""
        n = _COUNTERS.next(self.owner, f"{kind}\x00{name}", running=kind == "fx")
        if n is None:
            raise ConfigurationError(
                f"once({name!r}) in task {self.task_id!r} of thread {self.thread_id!r}: "
                f"another once({name!r}) of this task is still running. Effects of one "
                "name are told apart by the order they start, which concurrent calls do "
                "not keep from one execution to the next (a resume would hand one call "
                "another's result): give each concurrent effect a name of its own, e.g. "
                f"once(f\"{name}:{{item_id}}\", ...); nothing was called or journaled")
        return EffectRef(self.thread_id, self.task_ns, self.task_id, name, n,
                         self.checkpoint_ns, self.checkpoint_id)

    def done(self, name: str) -> None:
        """The running effect of ``name`` ended (returned, raised or was abandoned)."""
        _COUNTERS.done(self.owner, f"fx\x00{name}")


def _current_task(what: str) -> _Task:
    """The task running ``what`` (``ConfigurationError`` outside a node or task of a graph
    run with a checkpointer and a thread_id)."""
    # imported here: langgraph.config loads langgraph.types, LangChain's tracers and
    # LangSmith (1 s), which a process using the package without a graph (the CLI, a
    # flusher worker) never needs; a graph's process has them loaded already
    from langgraph.config import get_config

    try:
        config = get_config()
    except RuntimeError:
        config = {}
    conf = config.get("configurable") or {}
    task_id, scratchpad = conf.get(_TASK_ID), conf.get(_SCRATCHPAD)
    if not task_id or scratchpad is None:
        raise ConfigurationError(
            f"{what} works inside a node or @task of a running LangGraph graph; it was "
            "called outside one (no task in the current config; a thread started by a "
            "node does not inherit it: submit contextvars.copy_context().run, and give "
            "each concurrent effect a name of its own)")
    thread_id = conf.get("thread_id")
    if thread_id is None:
        raise ConfigurationError(
            f"{what} in task {task_id!r}: the run has no config['configurable']"
            "['thread_id'] (a graph without a checkpointer, or invoked without a thread)")
    tid = check_id("thread_id", thread_id)  # the journal's keys hold these (NUL-separated)
    task_ns = check_id("checkpoint_ns", conf.get("checkpoint_ns") or "", thread_id=tid)
    graph_ns = task_ns.rpartition("|")[0]
    checkpoint_map = conf.get("checkpoint_map") or {}
    cid = check_id("checkpoint_id", checkpoint_map.get(graph_ns) or "", thread_id=tid)
    # the namespace that stores that checkpoint: a task a node started (a functional
    # API @task) runs in its caller's loop, whose checkpoint the map repeats under the
    # caller's namespace; a subgraph's tasks map to its own namespace
    stored_ns = min((k for k, v in checkpoint_map.items()
                     if v == cid and graph_ns.startswith(k)), key=len, default=graph_ns)
    return _Task(tid, task_ns, check_id("task_id", task_id, thread_id=tid), stored_ns, cid,
                 getattr(scratchpad, "interrupt_counter", scratchpad), conf.get(_CHECKPOINTER),
                 str(conf.get(_DURABILITY) or "async"), _loop_stores(conf))


_NO_LOOP = object()


def _loop_stores(conf: Mapping[str, Any]) -> bool:
    """Whether the LangGraph loop running the task stores checkpoints. A subgraph compiled
    with ``checkpointer=False`` runs in a loop without a checkpointer (it stores nothing),
    while its tasks' config still names the parent's (``__pregel_checkpointer``); its loop
    is the owner of the ``schedule_task`` bound in the task's ``__pregel_call`` (langgraph
    1.x). True whenever that cannot be told (the wait is then kept)."""
    call = conf.get(_CALL)
    schedule = (getattr(call, "keywords", None) or {}).get("schedule_task")
    loop = getattr(schedule, "__self__", None)
    return getattr(loop, "checkpointer", _NO_LOOP) is not None


def _key_of(ref: EffectRef) -> str:
    parts = "\x00".join((ref.thread_id, ref.task_ns, ref.task_id, ref.name, str(ref.n)))
    return "lgd-" + hashlib.sha256(parts.encode("utf-8", "surrogateescape")).hexdigest()[:40]


def idempotency_key(name: str) -> str:
    """A key for ``name`` in the running task: ``"lgd-"`` and 40 hex digits, the same on
    every re-execution of the task (resume after ``interrupt()``, restart after a crash,
    retry) for the same call number of ``name`` within it, different for every other
    task, run or thread. Inside ``fn`` of ``once(name, fn)`` it is that effect's key (the
    key a ``once(..., in_doubt="retry")`` calls ``fn`` again with). Works with any
    checkpointer. Raises ``ConfigurationError`` outside a node or task of a graph run
    with a thread_id."""
    running = _running.get()
    if running is not None and running[0] == name:
        return running[1]
    return _key_of(_current_task("idempotency_key()").ref(name, "key"))


def _journal_task(name: str, in_doubt: str) -> tuple[_Task, DurableSaver]:
    if not isinstance(name, str) or not name or "\x00" in name:
        raise InvalidIdentifierError(
            f"an effect's name must be non-empty text without NUL, got {name!r}")
    check_id("an effect's name", name)  # storable text (no lone surrogate)
    if in_doubt not in ("raise", "retry"):
        raise ValueError(f"in_doubt must be 'raise' or 'retry', got {in_doubt!r}")
    task = _current_task(f"once({name!r})")
    saver = task.checkpointer
    if not isinstance(saver, DurableSaver):
        raise ConfigurationError(
            f"once({name!r}) in task {task.task_id!r} of thread {task.thread_id!r} needs a "
            "DurableSaver as the graph's checkpointer (it journals the effect in the "
            f"saver's storage); the graph runs with {type(saver).__name__}")
    return task, saver


class _AwaitableResult(TypeError):
    """``fn`` of a sync ``once`` returned a coroutine or future: it did not run. Journaled
    as cleared whatever ``journal_errors`` says."""


def _returned_awaitable(name: str, result: Any) -> _AwaitableResult:
    if inspect.iscoroutine(result):
        result.close()  # never run: no "was never awaited" warning
    return _AwaitableResult(
        f"once({name!r}): fn returned a coroutine ({type(result).__name__}), which once "
        "does not await, so the effect did not run; use await aonce(...) in an async node")


def _safe_str(exc: BaseException) -> str:
    """``str(exc)`` as text the journal can store (its ``str()`` may raise, or hold lone
    surrogates that UTF-8 cannot encode)."""
    try:
        text = str(exc)
    except Exception as failed:
        return f"<str() of the error raised {type(failed).__name__}>"
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


@dataclass(frozen=True)
class _Run:
    """Step of ``_steps``: run this plan on the saver."""

    plan: Any


@dataclass(frozen=True)
class _Call:
    """Step of ``_steps``: call ``fn``; the reply is ``(True, result)`` or ``(False, exc)``."""


@dataclass(frozen=True)
class _Dump:
    """Step of ``_steps``: serialize ``value`` (off the event loop when the serializer may
    do I/O); the reply is the typed value."""

    value: Any
    ref: EffectRef


def _steps(task: _Task, saver: DurableSaver, name: str, in_doubt: str,
           journal_errors: bool) -> Generator[Any, Any, Any]:
    """``once`` written once for both drivers: yields ``_Run``/``_Call``/``_Dump``."""
    ref = task.ref(name, "fx")
    try:
        return (yield from _journaled(task, saver, ref, name, in_doubt, journal_errors))
    finally:
        task.done(name)


def _journaled(task: _Task, saver: DurableSaver, ref: EffectRef, name: str, in_doubt: str,
               journal_errors: bool) -> Generator[Any, Any, Any]:
    """The body of ``_steps`` for the effect ``ref``."""
    ctx = saver.context
    key = _key_of(ref)
    if task.stores_checkpoints:
        yield _Run(task_checkpoint_plan(ctx, ref))
    started = _entry(ctx, ref, "s")
    found: Entry | None = yield _Run(begin_plan(ctx, ref, started))
    if found is not None and found.state == "d":
        assert found.value is not None
        return saver.serde.loads_typed(found.value)
    if found is not None and found.state == "e":
        etype, message = found.error or ("Exception", "")
        raise EffectFailedError(
            f"{ref.describe()} failed in an earlier execution with {etype}: {message} "
            "(journaled with journal_errors=True; not called again)",
            thread_id=ref.thread_id, task_id=ref.task_id, effect=name, call=ref.n,
            error_type=etype, error_message=message)
    if found is not None and in_doubt == "raise":
        raise EffectInDoubtError(
            f"{ref.describe()} was started by an earlier execution that ended before its "
            "outcome was journaled: it may or may not have happened. Check with the "
            f"service (idempotency key {key!r}), then call once(..., in_doubt='retry') "
            "to call it again with the same key",
            thread_id=ref.thread_id, checkpoint_ns=ref.task_ns, task_id=ref.task_id,
            effect=name, call=ref.n, idempotency_key=key)
    _hook("started", ref)
    token = _running.set((name, key))
    try:
        ok, result = yield _Call()
    finally:
        _running.reset(token)
    if not ok:
        if isinstance(result, Exception):
            failed = journal_errors and not isinstance(result, _AwaitableResult)
            state = "e" if failed else "c"
            error = (f"{type(result).__module__}.{type(result).__qualname__}",
                     _safe_str(result))
            yield _Run(end_plan(ctx, ref, _entry(ctx, ref, state, error=error)))
        raise result  # a BaseException (KeyboardInterrupt...) leaves it started: in doubt
    _hook("called", ref)
    typed = yield _Dump(result, ref)
    yield _Run(end_plan(ctx, ref, _entry(ctx, ref, "d", value=typed)))
    _hook("journaled", ref)
    return result


def _entry(ctx: Any, ref: EffectRef, state: str, *, value: Any = None,
           error: tuple[str, str] | None = None) -> Entry:
    return Entry(0, state, value, error, ref.checkpoint_ns, ref.checkpoint_id,
                 ctx.clock.time_ns() // 1_000_000)


def _hook(point: str, ref: EffectRef) -> None:
    if _crash_hook is not None:
        _crash_hook(point, ref)


def _dump(saver: DurableSaver, ref: EffectRef, value: Any) -> Any:
    what = (f"the result of effect {ref.name!r} (call {ref.n}) of task {ref.task_id!r} "
            f"(checkpoint_ns {ref.task_ns!r})")
    typed = dumps(saver.context, value, thread_id=ref.thread_id, what=what)
    if len(typed[1]) > MAX_RESULT_BYTES:
        raise SerializationError(
            f"{what} of thread {ref.thread_id!r} is {len(typed[1])} bytes serialized; its "
            "journal entry must fit in one MongoDB document (16 MiB): return something "
            "small (an id, a receipt) and keep big data in the state or a blob store. The "
            "effect ran and stays journaled as started (in doubt)")
    return typed


async def _adump(saver: DurableSaver, ref: EffectRef, value: Any) -> Any:
    """``_dump`` from an async node: in a worker thread when the serializer may upload to
    a blob store (it has ``adumps_typed``), so the event loop never waits on it."""
    if hasattr(saver.serde, "adumps_typed"):
        return await asyncio.to_thread(_dump, saver, ref, value)
    return _dump(saver, ref, value)


def once(name: str, fn: Callable[..., Any], /, *args: Any, in_doubt: InDoubt = "raise",
         journal_errors: bool = False, **kwargs: Any) -> Any:
    """Call ``fn(*args, **kwargs)`` once per task: the first execution calls it and
    journals its result; every re-execution of the same task (resume after
    ``interrupt()``, restart after a crash, retry) returns the journaled result, decoded
    by the saver's serializer, without calling ``fn``.

    Args:
        name: the effect's name within the task (text without NUL); the n-th call of a
            name in one execution is the n-th effect of that name.
        fn: the side effect (any callable; its result must be serializable by the
            saver's serializer, like a channel value).
        in_doubt: when an earlier execution started the effect and died before its
            outcome was journaled: ``"raise"`` (default) raises ``EffectInDoubtError``;
            ``"retry"`` calls ``fn`` again (pass ``idempotency_key(name)`` to the service
            so it can deduplicate).
        journal_errors: True journals an exception ``fn`` raises, so a re-execution raises
            ``EffectFailedError`` instead of calling it again; False (default) journals
            nothing of it (the next execution calls ``fn`` again).

    Raises ``ConfigurationError`` outside a node or task of a graph run, or when the
    graph's checkpointer is not a ``DurableSaver``; ``InvalidIdentifierError`` (a
    ``ValueError``) for an empty name, a name with a NUL or a thread_id or task identifier
    the journal's keys cannot hold, ``ValueError`` for another ``in_doubt``;
    ``TypeError`` when ``fn`` is a coroutine function (nothing journaled) or returns an
    awaitable (journaled as cleared: it did not run; use ``aonce``);
    ``EffectInDoubtError``; ``EffectFailedError``;
    ``SerializationError`` when the result cannot be serialized or is over
    ``MAX_RESULT_BYTES`` serialized (the effect then stays journaled as started: in
    doubt); ``OutboxFullError`` (``fn`` not called);
    ``TierUnavailableError`` when Redis (or, for a journal Redis cannot vouch for,
    MongoDB) does not answer before the call; whatever ``fn`` raises.
    """
    if inspect.iscoroutinefunction(fn):
        raise TypeError(f"once({name!r}): fn {getattr(fn, '__qualname__', fn)!r} is a "
                        "coroutine function; use await aonce(...) in an async node")
    task, saver = _journal_task(name, in_doubt)
    # closed on every way out: the effect stops counting as running (_Task.done)
    with closing(_steps(task, saver, name, in_doubt, journal_errors)) as gen:
        steps = Steps(gen)
        for step in steps:
            if isinstance(step, _Run):
                steps.send(saver.run(step.plan))
            elif isinstance(step, _Dump):
                steps.send(_dump(saver, step.ref, step.value))
            else:
                try:
                    result = fn(*args, **kwargs)
                    if inspect.isawaitable(result):
                        steps.send((False, _returned_awaitable(name, result)))
                    else:
                        steps.send((True, result))
                except BaseException as exc:
                    steps.send((False, exc))
        return steps.value


async def aonce(name: str, fn: Callable[..., Any], /, *args: Any,
                in_doubt: InDoubt = "raise", journal_errors: bool = False,
                **kwargs: Any) -> Any:
    """Async ``once``: ``fn`` may be a coroutine function (awaited) or a plain callable
    (called on the event loop); the journal is read and written with the saver's async
    API. Arguments, result and errors as ``once``."""
    task, saver = _journal_task(name, in_doubt)
    # closed on every way out: the effect stops counting as running (_Task.done)
    with closing(_steps(task, saver, name, in_doubt, journal_errors)) as gen:
        steps = Steps(gen)
        for step in steps:
            if isinstance(step, _Run):
                steps.send(await saver.arun(step.plan))
            elif isinstance(step, _Dump):
                steps.send(await _adump(saver, step.ref, step.value))
            else:
                try:
                    result = fn(*args, **kwargs)
                    if asyncio.iscoroutine(result) or isinstance(result, asyncio.Future):
                        result = await result
                    steps.send((True, result))
                except BaseException as exc:
                    steps.send((False, exc))
        return steps.value

