"""The model-call journal's machinery (``langgraph_durable.journal``): the request digest,
one journaled call written once for both drivers (on the effect journal's plans), and the
sync and async drivers that ``journaled`` and ``ModelJournalMiddleware`` share."""

from __future__ import annotations

import hashlib
import json
import logging
import threading
from collections.abc import AsyncIterator, Callable, Generator, Iterator
from contextlib import closing
from typing import Any, Literal

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, AIMessageChunk, BaseMessage, BaseMessageChunk
from langchain_core.messages.utils import convert_to_messages, message_chunk_to_message
from langchain_core.prompt_values import PromptValue
from langchain_core.runnables import RunnableBinding, RunnableSequence

from ..core.drive import Steps
from ..effects import (
    _adump,
    _Call,
    _current_task,
    _Dump,
    _dump,
    _entry,
    _hook,
    _Run,
    _Task,
)
from ..errors import ConfigurationError, ModelCallChangedError
from ..plans.effect_journal import MODEL_CALL_PREFIX, begin_plan, end_plan, task_checkpoint_plan
from ..saver import DurableSaver

EFFECT_PREFIX = MODEL_CALL_PREFIX
"""The effect journal's names of journaled model calls: ``"model:" + name``
(``plans.effect_journal.MODEL_CALL_PREFIX``, which the operator's tools read too)."""

OnChange = Literal["call", "raise"]
"""What a journaled call does when the recorded request differs from this one."""

log = logging.getLogger(__name__)

_NOTHING: Any = object()


# ---------------------------------------------------------------- request digest


def _canon(value: Any) -> Any:
    """A JSON-able, address-free form of ``value`` for the request digest."""
    if isinstance(value, BaseMessage):
        try:
            data = value.model_dump(mode="json", exclude={"id"})  # ids may be random per run
        except Exception:  # content that is not JSON: its python form, by this function
            data = value.model_dump(exclude={"id"})
        return {"message": value.type, **data}
    if isinstance(value, type):
        return f"{value.__module__}.{value.__qualname__}"
    if hasattr(value, "name") and hasattr(value, "description") and hasattr(value, "args"):
        return {"tool": value.name, "description": value.description, "args": value.args}
    if hasattr(value, "model_dump"):
        try:
            return {"type": _canon(type(value)), "data": value.model_dump(mode="json")}
        except Exception:
            pass
    if isinstance(value, (set, frozenset)):
        return sorted(map(repr, value))
    return {"type": _canon(type(value))}


def messages_of(value: Any) -> Any:
    """The messages a chat model makes of ``value`` (the value itself when it is not
    model input, e.g. the dict of a prompt template)."""
    if isinstance(value, PromptValue):
        return value.to_messages()
    if isinstance(value, str):
        return convert_to_messages([value])
    if isinstance(value, (list, tuple)):
        try:
            return convert_to_messages(value)
        except Exception:
            return value
    return value


def describe(runnable: Any) -> Any:
    """What of ``runnable`` goes in the digest: the chat model's class and identifying
    parameters, the kwargs a binding adds (tools, tool_choice, response_format...), the
    steps of a sequence (e.g. ``with_structured_output``'s parser)."""
    if isinstance(runnable, BaseChatModel):
        try:
            params = dict(runnable._identifying_params)
        except Exception:
            params = {}
        return {"model": _canon(type(runnable)), "params": params}
    if isinstance(runnable, RunnableBinding):
        return {"bound": describe(runnable.bound), "kwargs": runnable.kwargs}
    if isinstance(runnable, RunnableSequence):
        return {"steps": [describe(step) for step in runnable.steps]}
    return {"runnable": _canon(type(runnable))}


def digest(*parts: Any) -> str:
    """sha256 (hex) of the canonical JSON of ``parts`` (sorted keys; objects by
    ``_canon``): the same request gives the same digest in every process."""
    text = json.dumps(parts, sort_keys=True, default=_canon, ensure_ascii=False,
                      separators=(",", ":"))
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def chat_model_of(runnable: Any) -> BaseChatModel | None:
    """The chat model inside ``runnable`` (itself, a binding's, a sequence's first), or None."""
    if isinstance(runnable, BaseChatModel):
        return runnable
    if isinstance(runnable, RunnableBinding):
        return chat_model_of(runnable.bound)
    if isinstance(runnable, RunnableSequence):
        for step in runnable.steps:
            found = chat_model_of(step)
            if found is not None:
                return found
    return None


def identity(runnable: Any) -> str:
    """``"<class>"`` or ``"<class>:<model name>"`` of the chat model in ``runnable``."""
    model = chat_model_of(runnable)
    if model is None:
        return type(runnable).__name__
    name = getattr(model, "model_name", None) or getattr(model, "model", None)
    return f"{type(model).__name__}:{name}" if isinstance(name, str) and name else (
        type(model).__name__)


def tokens_of(response: Any) -> int:
    """Total tokens of ``response``'s usage metadata (an AIMessage, or messages), 0 if none."""
    if isinstance(response, (list, tuple)):
        return sum(tokens_of(r) for r in response)
    usage = getattr(response, "usage_metadata", None)
    return int(usage.get("total_tokens", 0)) if isinstance(usage, dict) else 0


# ---------------------------------------------------------------- the journal


class Stats:
    """Process-wide counts of journaled model calls: ``replayed`` (answered from the
    journal), ``tokens_saved`` (their usage metadata's total tokens), ``called``."""

    def __init__(self) -> None:
        self.replayed = 0
        self.tokens_saved = 0
        self.called = 0
        self._lock = threading.Lock()

    def count(self, replayed: bool, tokens: int) -> None:
        """Count one call: made, or ``replayed`` (saving ``tokens``)."""
        with self._lock:
            if replayed:
                self.replayed += 1
                self.tokens_saved += tokens
            else:
                self.called += 1

    def snapshot(self) -> dict[str, int]:
        """The counts as a dict."""
        with self._lock:
            return {"replayed": self.replayed, "tokens_saved": self.tokens_saved,
                    "called": self.called}


STATS = Stats()
"""The counts of this process (``STATS.snapshot()``)."""


def _task_or_none(what: str, strict: bool) -> tuple[_Task, DurableSaver] | None:
    """The running task and its DurableSaver, or None (logged; raised with ``strict``)."""
    try:
        task = _current_task(what)
    except ConfigurationError:
        if strict:
            raise
        _warn(what, "it is called outside a node or task of a graph run with a thread_id")
        return None
    if not isinstance(task.checkpointer, DurableSaver):
        message = (f"the graph's checkpointer is {type(task.checkpointer).__name__}, not a "
                   "DurableSaver")
        if strict:
            raise ConfigurationError(f"{what} in task {task.task_id!r} of thread "
                                     f"{task.thread_id!r}: {message}")
        _warn(what, message)
        return None
    return task, task.checkpointer


_warned: set[str] = set()


def _warn(what: str, why: str) -> None:
    if what not in _warned:
        _warned.add(what)
        log.warning("%s is not journaled: %s (the model is called; logged once; "
                    "strict=True raises instead)", what, why)


def _steps(task: _Task, saver: DurableSaver, name: str, request: str, on_change: str
           ) -> Generator[Any, Any, tuple[bool, Any]]:
    """One journaled call, for both drivers: yields ``_Run``/``_Call``/``_Dump`` like
    ``once``; returns ``(replayed, response)``."""
    try:
        ref = task.ref(name, "fx")
    except ConfigurationError:
        raise ConfigurationError(
            f"journaled model {name!r} in task {task.task_id!r} of thread "
            f"{task.thread_id!r}: another call of it in this task is still running; calls "
            "made concurrently are numbered in the order they start, which a resume may "
            "not keep: give each concurrent call its own wrapper, journaled(model, "
            "name=...)") from None
    try:
        ctx = saver.context
        if task.stores_checkpoints:
            yield _Run(task_checkpoint_plan(ctx, ref))
        found = yield _Run(begin_plan(ctx, ref, _entry(ctx, ref, "s")))
        if found is not None and found.state == "d":
            assert found.value is not None
            recorded = saver.serde.loads_typed(found.value)
            if isinstance(recorded, dict) and recorded.get("digest") == request:
                response = recorded.get("response")
                if recorded.get("kinds") == kinds(response):
                    return True, response
                # decoded to other types (a strict serializer's allowlist turned a
                # structured output into a dict): not the answer the code expects
                log.warning("%s: the journaled response decodes to %s, not the %s "
                            "journaled (allow the type in the serializer); calling the "
                            "model again", ref.describe(), kinds(response),
                            recorded.get("kinds"))
            if on_change == "raise":
                raise ModelCallChangedError(
                    f"{ref.describe()}: the request differs from the one journaled by an "
                    "earlier execution (messages, tools or model parameters changed); "
                    "not calling the model (on_change='raise')",
                    thread_id=ref.thread_id, checkpoint_ns=ref.task_ns,
                    task_id=ref.task_id, effect=name, call=ref.n)
        # none, started without an answer (a died execution: calling again is safe),
        # or a changed request: call the model
        _hook("started", ref)
        ok, result = yield _Call()
        if not ok:
            if isinstance(result, Exception):
                yield _Run(end_plan(ctx, ref, _entry(ctx, ref, "c")))
            raise result
        _hook("called", ref)
        typed = yield _Dump({"digest": request, "response": result, "kinds": kinds(result)},
                            ref)
        yield _Run(end_plan(ctx, ref, _entry(ctx, ref, "d", value=typed)))
        _hook("journaled", ref)
        return False, result
    finally:
        task.done(name)


def kinds(value: Any) -> Any:
    """The types in ``value`` (a list, dict or value) as text, to tell a response that
    decoded to other types."""
    if isinstance(value, dict) and type(value) is dict:
        return {str(k): kinds(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [kinds(v) for v in value]
    return f"{type(value).__module__}.{type(value).__qualname__}"


def _merge(acc: Any, chunk: Any) -> Any:
    if acc is _NOTHING:
        return chunk
    if isinstance(acc, BaseMessageChunk) and isinstance(chunk, BaseMessageChunk):
        return acc + chunk
    return chunk  # parsers stream whole partial values: the last is the answer


def _final(value: Any) -> Any:
    return message_chunk_to_message(value) if isinstance(value, BaseMessageChunk) else value


def _counted(saver: DurableSaver, replayed: bool, response: Any) -> None:
    tokens = tokens_of(response.get("result") if isinstance(response, dict) else response)
    saver.runtime.metrics.model_call(replayed, tokens)
    STATS.count(replayed, tokens)


def drive(steps: Generator[Any, Any, tuple[bool, Any]], saver: DurableSaver,
          call: Callable[[], Iterator[Any]]) -> Generator[Any, None, tuple[bool, Any]]:
    """Run ``steps`` on ``saver``; ``_Call`` iterates ``call()``, yielding its chunks on
    (the answer is their sum). Returns ``(replayed, response)``."""
    with closing(steps):
        run = Steps(steps)
        for step in run:
            if isinstance(step, _Run):
                run.send(saver.run(step.plan))
            elif isinstance(step, _Dump):
                run.send(_dump(saver, step.ref, step.value))
            else:
                acc = _NOTHING
                try:
                    for chunk in call():
                        yield chunk
                        acc = _merge(acc, chunk)
                    run.send((True, _final(acc)))
                except BaseException as exc:
                    run.send((False, exc))
        assert run.value is not None
        _counted(saver, *run.value)
        return run.value


async def adrive(steps: Generator[Any, Any, tuple[bool, Any]], saver: DurableSaver,
                 call: Callable[[], AsyncIterator[Any]], out: list[Any]
                 ) -> AsyncIterator[Any]:
    """Async ``drive``: ``(replayed, response)`` is appended to ``out``."""
    with closing(steps):
        run = Steps(steps)
        for step in run:
            if isinstance(step, _Run):
                run.send(await saver.arun(step.plan))
            elif isinstance(step, _Dump):
                run.send(await _adump(saver, step.ref, step.value))
            else:
                acc = _NOTHING
                try:
                    async for chunk in call():
                        yield chunk
                        acc = _merge(acc, chunk)
                    run.send((True, _final(acc)))
                except BaseException as exc:
                    run.send((False, exc))
        assert run.value is not None
        _counted(saver, *run.value)
        out.append(run.value)


def run_sync(what: str, name: str, request: str, on_change: str, strict: bool,
             call: Callable[[], Iterator[Any]]) -> Generator[Any, None, tuple[bool, Any]]:
    """A journaled call (or, outside a journaled task, a plain one): yields the chunks
    of a call made, returns ``(replayed, response)``."""
    found = _task_or_none(what, strict)
    if found is None:
        acc = _NOTHING
        for chunk in call():
            yield chunk
            acc = _merge(acc, chunk)
        return False, _final(acc)
    task, saver = found
    return (yield from drive(_steps(task, saver, name, request, on_change), saver, call))


async def run_async(what: str, name: str, request: str, on_change: str, strict: bool,
                    call: Callable[[], AsyncIterator[Any]], out: list[Any]
                    ) -> AsyncIterator[Any]:
    """Async ``run_sync``: ``(replayed, response)`` is appended to ``out``."""
    found = _task_or_none(what, strict)
    if found is None:
        acc = _NOTHING
        async for chunk in call():
            yield chunk
            acc = _merge(acc, chunk)
        out.append((False, _final(acc)))
        return
    task, saver = found
    async for chunk in adrive(_steps(task, saver, name, request, on_change), saver, call,
                              out):
        yield chunk


def complete(gen: Generator[Any, None, Any]) -> Any:
    """The return value of ``gen`` (its chunks dropped)."""
    run = Steps(gen)
    for _ in run:
        pass
    return run.value


def as_chunk(value: Any) -> Any:
    """A replayed response as one stream chunk."""
    if isinstance(value, AIMessage) and not isinstance(value, AIMessageChunk):
        data = value.model_dump(exclude={"type", "tool_calls", "invalid_tool_calls"})
        data["tool_call_chunks"] = [
            {"name": c["name"], "args": json.dumps(c["args"]), "id": c.get("id"),
             "index": i, "type": "tool_call_chunk"} for i, c in enumerate(value.tool_calls)]
        return AIMessageChunk(**data)
    return value
