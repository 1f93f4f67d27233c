"""The flusher's summary facts decode only what they read (issue 35): a round holding a
thread's whole message list decodes its first human message (the title) and the last
``TEXT_MESSAGES`` items, not every item, and says what decoding them all said."""

from __future__ import annotations

from typing import Any

from langchain_core.messages import AIMessage, HumanMessage
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

from langgraph_durable.core.items import MANIFEST_TYPE, Items, packed, parse_stored
from langgraph_durable.core.records import pack_blob, unpack_blob
from langgraph_durable.durable import summaries as S
from langgraph_durable.outbox.rounds import _Decoded, _item
from langgraph_durable.plans import summaries as P


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


def test_a_whole_list_in_the_round_decodes_the_title_and_the_latest_items_only() -> None:
    messages = [AIMessage("system hello", id="a0"), HumanMessage("the question", id="h")]
    messages += [AIMessage(f"answer {i}", id=f"a{i + 1}") for i in range(40)]  # a node too
    refs, parts = _stored(messages)
    serde = Counting()
    facts = S.Facts()
    P._round_messages(facts, serde, (MANIFEST_TYPE, refs), _Decoded(parts, _item))
    assert serde.loads == 2 + S.TEXT_MESSAGES  # up to the human one, then the last six
    # what decoding every item gives (the parsed mapping a read hands over)
    whole = S.Facts()
    parsed = {d: parse_stored(raw, lambda r: unpack_blob(r, "an item"))
              for d, raw in parts.items()}
    P._round_messages(whole, JsonPlusSerializer(), (MANIFEST_TYPE, refs), parsed)
    assert (facts.messages, facts.title, facts.recent) == (
        whole.messages, whole.title, whole.recent) == (
        42, "the question", [[f"a{i}", f"answer {i - 1}"] for i in range(35, 41)])


def test_a_round_holding_the_newest_items_only_decodes_those() -> None:
    messages = [HumanMessage("the question", id="h")]
    messages += [AIMessage(f"answer {i}", id=f"a{i}") for i in range(10)]
    refs, parts = _stored(messages)
    newest = {d: raw for d, raw in parts.items() if d in (refs[-16:], refs[-32:-16])}
    serde = Counting()
    facts = S.Facts()
    P._round_messages(facts, serde, (MANIFEST_TYPE, refs), _Decoded(newest, _item))
    assert serde.loads == 2
    assert facts.messages == 11 and facts.title is None and facts.appended
    assert facts.recent == [["a8", "answer 8"], ["a9", "answer 9"]]
