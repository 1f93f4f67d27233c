"""The effect journal as the operator's tools show it (``langgraph-durable show`` and the
dashboard's thread page share ``checkpoint_effects``): the entries of the tasks that ran
from one checkpoint, both tiers merged, each decoded by the saver's serializer (the tools'
one is strict: ``inspection.strict``, stored data never runs code), and the entries of
the model-call journal (``langgraph_durable.journal``) recognised and summed up: model,
call number, tokens, a preview of the answer, instead of the raw record.

What is not known at rest: whether, or how often, an entry was replayed. A replay reads the
entry and writes nothing (``plans.effect_journal.begin_plan``: one round trip); only the process
metrics count replays (``saver.stats()["model_calls"]``, the OpenTelemetry counter
``langgraph_durable.model_calls.replayed``). A journaled model call is shown as what it
is: an answer a re-execution of its task returns without calling the model.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..errors import TierUnavailableError
from ..plans.effect_journal import MODEL_CALL_PREFIX as EFFECT_PREFIX
from ..plans.effect_journal import Entry, journal_plan
from . import render
from .strict import NotDecoded
from .tolerant import Undecodable

__all__ = ["ANSWER_CHARS", "JOURNALED_NOTE", "checkpoint_effects", "model_call",
           "thread_effects"]

ANSWER_CHARS = 160
"""Characters of a model call's answer shown (``answer``; cut with an ellipsis)."""

JOURNALED_NOTE = ("journaled: a re-execution of this task returns this answer without "
                  "calling the model")
"""What a model-call row means (the dashboard's mark, ``show``'s legend)."""

STARTED_NOTE = ("started, no answer journaled (the execution died or failed during the "
                "call): a re-execution calls the model again")
"""What a model-call row without an answer means."""


def thread_effects(saver: Any, thread_id: str) -> tuple[list[dict[str, Any]], str]:
    """Every journal entry of ``thread_id`` as rows (``checkpoint_effects``' fields, plus
    ``checkpoint_ns``/``checkpoint_id``, the checkpoint the task ran from), and a note,
    not empty when MongoDB did not answer (then Redis's entries alone are listed). Raises
    ``TierUnavailableError`` when Redis does not answer, ``CorruptRecordError`` for an
    entry that is not one."""
    docs, note = _docs(saver, thread_id)
    return [_row(saver, d) for d in docs], note


def checkpoint_effects(saver: Any, thread_id: str, checkpoint_ns: str, checkpoint_id: str
                       ) -> tuple[list[dict[str, Any]], str]:
    """The journal entries of the tasks that ran from checkpoint ``checkpoint_id`` (of
    namespace ``checkpoint_ns``), in task, name and call order, and ``thread_effects``'
    note (only these entries are decoded). Each row: ``task_id``, ``task_ns``, ``name``
    (the effect), ``call`` (its number in the task's execution), ``state`` (started, done,
    failed, cleared), ``tier`` (hot or durable), ``error`` (``[type, message]`` of a
    failed one), ``kind`` (``"effect"`` or ``"model_call"``) and, for an effect, ``result``
    (JSON data); for a model call, ``model_call`` (``model_call``'s summary) and
    ``result`` None."""
    docs, note = _docs(saver, thread_id)
    return [{k: v for k, v in _row(saver, d).items()
             if k not in ("checkpoint_ns", "checkpoint_id")}
            for d in docs if (d["checkpoint_ns"], d["checkpoint_id"])
            == (checkpoint_ns, checkpoint_id)], note


def _docs(saver: Any, thread_id: str) -> tuple[list[dict[str, Any]], str]:
    """``journal_plan``'s documents, and a note when MongoDB did not answer (then
    Redis's alone)."""
    try:
        return saver.run(journal_plan(saver.context, thread_id)), ""
    except TierUnavailableError as exc:
        if exc.tier != "durable":
            raise
        return saver.run(journal_plan(saver.context, thread_id, hot_only=True)), (
            f"effects: the entries Redis holds; {exc.tier_name} did not answer, its "
            "entries are not shown")


def _row(saver: Any, d: Mapping[str, Any]) -> dict[str, Any]:
    entry = Entry.unpack(bytes(d["raw"]), f"{d['_id']!r}")
    value = saver.serde.loads_typed(entry.value) if entry.value is not None else None
    row: dict[str, Any] = {
        "task_id": d["task_id"], "task_ns": d["task_ns"], "name": d["name"], "call": d["n"],
        "state": d["state"], "tier": d["tier"],
        "error": list(entry.error) if entry.error else None,
        "checkpoint_ns": d["checkpoint_ns"], "checkpoint_id": d["checkpoint_id"]}
    summary = model_call(d["name"], value) if str(d["name"]).startswith(EFFECT_PREFIX) \
        else None
    if summary is None:
        return {**row, "kind": "effect", "result": render.jsonable(value)}
    return {**row, "kind": "model_call", "result": None, "model_call": summary}


def _recorded(value: Any) -> bool:
    """Whether ``value`` is the record of a journaled model call (``journal.calls._steps``
    stores ``{"digest", "response", "kinds"}``)."""
    return (isinstance(value, Mapping) and set(value) == {"digest", "response", "kinds"}
            and isinstance(value.get("digest"), str))


def model_call(name: str, value: Any) -> dict[str, Any] | None:
    """The summary of a model-call journal entry named ``name`` (``"model:<model>"``)
    whose decoded value is ``value`` (None: no answer journaled): ``model``, ``answered``,
    ``tokens`` (the usage metadata's ``input``/``output``/``total`` summed over the
    answer's AI messages, None when it has none), ``answer`` (a preview of the text or
    structured output, ``ANSWER_CHARS`` characters at most), ``tool_calls`` (names asked
    for), ``digest`` (the request's sha256, hex), ``note`` (``JOURNALED_NOTE`` or
    ``STARTED_NOTE``). None when ``value`` is not such a record (an ``once`` effect whose
    name happens to begin with ``model:``)."""
    model = name[len(EFFECT_PREFIX):]
    if value is None:
        return {"model": model, "answered": False, "tokens": None, "answer": None,
                "tool_calls": [], "digest": None, "note": STARTED_NOTE}
    if isinstance(value, (NotDecoded, Undecodable)):  # the record itself is not readable
        return {"model": model, "answered": True, "tokens": None, "answer": repr(value),
                "tool_calls": [], "digest": None, "note": JOURNALED_NOTE}
    if not _recorded(value):
        return None
    response = value["response"]
    messages = _messages(response)
    return {"model": model, "answered": True, "tokens": _tokens(messages),
            "answer": _answer(response, messages),
            "tool_calls": [str(c.get("name", "?")) for m in messages
                           for c in getattr(m, "tool_calls", None) or []
                           if isinstance(c, Mapping)],
            "digest": value["digest"], "note": JOURNALED_NOTE}


def _messages(response: Any) -> list[Any]:
    """The AI messages of a recorded response: an ``AIMessage`` (``journaled``), or
    ``{"result": [messages], "structured_response"}`` (``ModelJournalMiddleware``)."""
    if render.is_message(response):
        return [response]
    if isinstance(response, Mapping) and isinstance(response.get("result"), list):
        return [m for m in response["result"] if render.is_message(m)]
    return []


def _tokens(messages: list[Any]) -> dict[str, int] | None:
    usages = [u for u in (getattr(m, "usage_metadata", None) for m in messages)
              if isinstance(u, Mapping)]
    if not usages:
        return None
    out = {"input": 0, "output": 0, "total": 0}
    for u in usages:
        for key in out:
            n = u.get(f"{key}_tokens")
            out[key] += n if isinstance(n, int) and not isinstance(n, bool) else 0
    return out


def _answer(response: Any, messages: list[Any]) -> str:
    structured = response.get("structured_response") if isinstance(response, Mapping) \
        else None
    if structured is not None:
        return render.preview(structured, ANSWER_CHARS)
    if messages:
        last = messages[-1]
        return render.preview(last, ANSWER_CHARS + 10)[len(f"{last.type}: "):]
    return render.preview(response, ANSWER_CHARS)
