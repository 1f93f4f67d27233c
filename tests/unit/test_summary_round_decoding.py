"""The flusher's summary facts decode only what they read (issue 35): a round holding a
thread's whole message list reads its first human message (the title) and the last
``TEXT_MESSAGES`` items, not every item, and says what decoding them all said; a
LangChain message is read from its stored bytes without being revived."""

from __future__ import annotations

from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

from langgraph_durable.core.items import MANIFEST_TYPE, Items, packed, parse_stored
from langgraph_durable.core.records import pack_blob, unpack_blob
from langgraph_durable.durable import summary_docs as S
from langgraph_durable.outbox.round_summaries import _Decoded, _item
from langgraph_durable.plans import summary_upkeep as P


class Counting:
    """JsonPlusSerializer counting its ``loads_typed`` calls."""

    def __init__(self) -> None:
        self.inner, self.loads = JsonPlusSerializer(), 0

    def loads_typed(self, typed: Any) -> Any:
        self.loads += 1
        return self.inner.loads_typed(typed)


def _stored(messages: list[Any]) -> tuple[bytes, dict[bytes, bytes]]:
    serde = JsonPlusSerializer()
    split = Items().split(messages, lambda m, _i: serde.dumps_typed(m), pack_blob, "t")
    return split.refs, packed(split.parts, pack_blob)


def _counted(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Count the items the summary reads (``plans.summary_upkeep._message``)."""
    reads = [0]
    read = P._message

    def counting(serde: Any, typed: Any) -> Any:
        reads[0] += 1
        return read(serde, typed)

    monkeypatch.setattr(P, "_message", counting)
    return reads


def test_a_whole_list_in_the_round_decodes_the_title_and_the_latest_items_only(
        monkeypatch: pytest.MonkeyPatch) -> None:
    reads = _counted(monkeypatch)
    messages = [AIMessage("system hello", id="a0"), HumanMessage("the question", id="h")]
    messages += [AIMessage(f"answer {i}", id=f"a{i + 1}") for i in range(40)]  # a node too
    refs, parts = _stored(messages)
    serde = Counting()
    facts = S.Facts()
    P._round_messages(facts, serde, (MANIFEST_TYPE, refs), _Decoded(parts, _item))
    assert reads[0] == 2 + S.TEXT_MESSAGES  # up to the human one, then the last six
    assert serde.loads == 0  # LangChain messages are read from their bytes, not revived
    # what decoding every item gives (the parsed mapping a read hands over)
    whole = S.Facts()
    parsed = {d: parse_stored(raw, lambda r: unpack_blob(r, "an item"))
              for d, raw in parts.items()}
    P._round_messages(whole, JsonPlusSerializer(), (MANIFEST_TYPE, refs), parsed)
    assert (facts.messages, facts.title, facts.recent) == (
        whole.messages, whole.title, whole.recent) == (
        42, "the question", [[f"a{i}", f"answer {i - 1}"] for i in range(35, 41)])


def test_a_round_holding_the_newest_items_only_decodes_those(
        monkeypatch: pytest.MonkeyPatch) -> None:
    reads = _counted(monkeypatch)
    messages = [HumanMessage("the question", id="h")]
    messages += [AIMessage(f"answer {i}", id=f"a{i}") for i in range(10)]
    refs, parts = _stored(messages)
    newest = {d: raw for d, raw in parts.items() if d in (refs[-16:], refs[-32:-16])}
    serde = Counting()
    facts = S.Facts()
    # the list's full nodes as the flusher finds them in Redis (``wanted_items``' probe)
    P._round_messages(facts, serde, (MANIFEST_TYPE, refs), _Decoded(newest, _item), 0)
    assert reads[0] == 2 and serde.loads == 0
    assert facts.messages == 11 and facts.title is None and facts.appended
    assert facts.recent == [["a8", "answer 8"], ["a9", "answer 9"]]
    # without them 11 digests may be 11 messages or a node and 10 (42): not known
    unknown = S.Facts()
    P._round_messages(unknown, serde, (MANIFEST_TYPE, refs), _Decoded(newest, _item))
    assert unknown.messages is None and unknown.recent == facts.recent


def test_a_message_is_read_from_its_bytes_as_the_serializer_reads_it() -> None:
    from langchain_core.messages import AIMessageChunk, ChatMessage, ToolMessage

    from langgraph_durable.core.thread_summary import is_message, message_text

    serde = JsonPlusSerializer()
    values: list[Any] = [
        HumanMessage("plain", id="h"),
        HumanMessage([{"type": "text", "text": "a block"}, {"type": "image_url",
                                                           "image_url": {"url": "x"}}]),
        AIMessage("calls", id="a", tool_calls=[{"name": "f", "id": "c", "args": {"q": 1}}]),
        AIMessageChunk("chunk", id="k"), ToolMessage("out", tool_call_id="c", id="t"),
        ChatMessage("chat", role="critic"), {"not": "a message"}, [1, 2], "text"]
    for value in values:
        typed = serde.dumps_typed(value)
        light, full = P._message(Counting(), typed), serde.loads_typed(typed)
        assert is_message(light) == is_message(full), value
        if is_message(full):
            assert type(light) is P._Message, value  # read without reviving it
            assert (light.type, message_text(light), light.id) == (
                full.type, message_text(full), full.id)
        else:
            assert light == full
