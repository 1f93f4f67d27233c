"""``inspection.effect_view.model_call``: how the tools (``show``, the dashboard) sum up a
model-call journal entry, decoded strictly as they decode it."""

from __future__ import annotations

from typing import Any

from langchain_core.messages import AIMessage
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

from langgraph_durable.inspection.effect_view import JOURNALED_NOTE, STARTED_NOTE, model_call
from langgraph_durable.inspection.strict import NotDecoded, strict_serde
from langgraph_durable.journal.calls import kinds

from ..model_journal_support import Plan

USAGE = {"input_tokens": 10, "output_tokens": 5, "total_tokens": 15}


def stored(response: Any) -> Any:
    """The record ``journal.calls._steps`` journals, written by the application's
    serializer and read back by the tools' strict one."""
    record = {"digest": "ab" * 32, "response": response, "kinds": kinds(response)}
    return strict_serde(None).loads_typed(JsonPlusSerializer().dumps_typed(record))


def test_an_ai_message_gives_model_tokens_answer_and_tool_calls() -> None:
    answer = AIMessage("line one\nline two " + "x" * 300, usage_metadata=USAGE,
                       tool_calls=[{"name": "send_email", "args": {"to": "bob"}, "id": "c1"}])
    got = model_call("model:ChatOpenAI:gpt-4o", stored(answer))
    assert got is not None
    assert (got["model"], got["answered"], got["tokens"], got["tool_calls"], got["note"]) == (
        "ChatOpenAI:gpt-4o", True, {"input": 10, "output": 5, "total": 15}, ["send_email"],
        JOURNALED_NOTE)
    assert got["answer"].startswith("line one line two xxx") and len(got["answer"]) == 160
    assert got["digest"] == "ab" * 32


def test_a_middleware_record_sums_its_messages_and_shows_its_structured_response() -> None:
    response = {"result": [AIMessage("a", usage_metadata=USAGE),
                           AIMessage("b", usage_metadata=USAGE)],
                "structured_response": {"steps": ["x", "y"]}}
    got = model_call("model:Fake", stored(response))
    assert got is not None and got["tokens"] == {"input": 20, "output": 10, "total": 30}
    assert got["answer"] == '{"steps": ["x", "y"]}'


def test_a_structured_output_of_a_type_not_allowed_is_shown_as_its_placeholder() -> None:
    got = model_call("model:Fake", stored(Plan(steps=["a"])))
    assert got is not None and got["tokens"] is None
    assert got["answer"] == repr(NotDecoded("tests.model_journal_support.Plan",
                                            "not in the allowlist"))


def test_no_answer_journaled_and_an_effect_that_only_looks_like_a_model_call() -> None:
    started = model_call("model:Fake", None)
    assert started is not None and started["answered"] is False
    assert started["note"] == STARTED_NOTE
    assert model_call("model:Fake", {"paid": 12}) is None  # once("model:Fake", ...)
