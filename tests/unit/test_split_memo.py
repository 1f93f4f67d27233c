"""A channel's list split again reuses what the last split of it holds (``split_memo.py``)
and gives exactly what splitting it object by object gives: the same manifest (node and
item digests), the same parts, and a serialization only for items that are new or
changed, whatever happened to the list in between (grown, an old message changed in
place, replaced, shrunk, reordered, non-model items)."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

from langgraph_durable.core.items import NODE_SIZE, Items, SplitList
from langgraph_durable.core.records import pack_blob
from langgraph_durable.core.split_memo import MIN_ITEMS

SERDE = JsonPlusSerializer()


class Counting:
    """``Items.split``'s ``dumps``, recording the positions it serialized."""

    def __init__(self) -> None:
        self.positions: list[int] = []

    def __call__(self, item: object, pos: int) -> tuple[str, bytes]:
        self.positions.append(pos)
        return SERDE.dumps_typed(item)


def _split(items: Items, value: list[Any], reuse: str | None) -> tuple[SplitList, list[int]]:
    dumps = Counting()
    return items.split(value, dumps, pack_blob, "t", reuse), dumps.positions


def _reference(value: list[Any]) -> SplitList:
    """The list split object by object with no cache: every item serialized."""
    return Items(cache_bytes=0).split(value, Counting(), pack_blob, "t")


def _turn(k: int) -> list[Any]:
    return [AIMessage(f"thinking {k} " * 20, id=f"a{k}",
                      tool_calls=[{"name": "look", "args": {"q": k, "deep": [k, {"x": k}]},
                                   "id": f"c{k}"}]),
            ToolMessage(f"result {k} " * 40, tool_call_id=f"c{k}", id=f"t{k}")]


def _base(turns: int = 16) -> list[Any]:
    """A conversation of ``1 + 2 * turns`` messages: 33 by default, over ``MIN_ITEMS``
    (shorter lists are split without a memo)."""
    out: list[Any] = [HumanMessage("hello " * 30, id="h0")]
    for k in range(100, 100 + turns):
        out += _turn(k)
    assert len(out) >= MIN_ITEMS or turns < 16
    return out


def _same(got: SplitList, want: SplitList) -> None:
    assert got.refs == want.refs
    assert got.parts == want.parts


def test_a_growing_conversation_serializes_only_its_new_messages_and_splits_as_before(
        ) -> None:
    items = Items()
    msgs: list[Any] = [HumanMessage("hello " * 30, id="h0")]
    for k in range(40):  # 81 messages at the end: two full nodes and a tail
        msgs = msgs + _turn(k)
        got, serialized = _split(items, msgs, "\x00messages")
        _same(got, _reference(msgs))
        assert serialized == [len(msgs) - 2, len(msgs) - 1] if k else [0, 1, 2]
    assert len(msgs) // NODE_SIZE == 2


def test_the_old_messages_are_compared_as_one_list_not_one_by_one(monkeypatch: Any) -> None:
    import langgraph_durable.core.items as items_module

    calls: list[object] = []
    real = items_module.unchanged

    def counting(snapshot: Any, item: object) -> bool:
        calls.append(item)
        return real(snapshot, item)

    monkeypatch.setattr(items_module, "unchanged", counting)
    items = Items()
    msgs: list[Any] = [HumanMessage("hi", id="h0")]
    for k in range(40):
        msgs = msgs + _turn(k)
        _split(items, msgs, "m")
        if len(msgs) - 2 < MIN_ITEMS:  # the list before was short: no memo of it
            calls.clear()  # (short lists are checked object by object, as before)
    assert calls == []  # later, no per-object check of the old messages at any put
    _split(items, msgs, None)  # the same list without a name: every object checked alone
    assert len(calls) == len(msgs)


def test_a_message_changed_in_place_deep_inside_is_serialized_again() -> None:
    items = Items()
    msgs = _base()
    _split(items, msgs, "m")
    msgs[1].tool_calls[0]["args"]["deep"][1]["x"] = "changed"  # nested, in place
    msgs = msgs + _turn(2)
    got, serialized = _split(items, msgs, "m")
    _same(got, _reference(msgs))
    assert serialized == [1, 33, 34]  # the changed one and the two new ones


def test_a_field_set_on_an_old_message_and_an_extra_field_are_seen() -> None:
    items = Items()
    msgs = _base()
    _split(items, msgs, "m")
    msgs[2].content = "another result"
    got, serialized = _split(items, msgs, "m")
    _same(got, _reference(msgs))
    assert serialized == [2]
    msgs[0].__pydantic_extra__["note"] = "added"  # type: ignore[index]
    got, serialized = _split(items, msgs, "m")
    _same(got, _reference(msgs))
    assert serialized == [0]


def test_replaced_shrunk_and_reordered_lists_split_as_before() -> None:
    items = Items()
    base = _base(20)
    _split(items, base, "m")
    cases = [
        base[:10],                                   # shrunk (a summary replaced the rest)
        base[:35],                                   # shrunk, still over MIN_ITEMS
        [copy.deepcopy(m) for m in base] + _turn(99),  # equal copies, not the same objects
        list(reversed(base)),                        # reordered
        base[:5] + ["plain text", {"k": 1}] + base[5:],  # non-model items in between
        base + [base[3]],                            # the same object twice
    ]
    for value in cases:
        got, _ = _split(items, value, "m")
        _same(got, _reference(value))
        again, serialized = _split(items, value, "m")  # split again: reused, still equal
        _same(again, _reference(value))
        assert serialized == [i for i, v in enumerate(value) if not hasattr(v, "__dict__")
                              or isinstance(v, dict)]


def test_an_equal_object_that_serializes_otherwise_is_not_taken_for_the_old_one() -> None:
    items = Items()
    msgs: list[Any] = [AIMessage("n", id="a0", additional_kwargs={"n": 1})] + _base()
    _split(items, msgs, "m")
    other = AIMessage("n", id="a0", additional_kwargs={"n": 1.0})  # == the first, other bytes
    assert other == msgs[0] and SERDE.dumps_typed(other) != SERDE.dumps_typed(msgs[0])
    value = [other] + msgs[1:]
    got, serialized = _split(items, value, "m")
    _same(got, _reference(value))
    assert serialized == [0]


def test_lists_under_different_names_do_not_disturb_each_other() -> None:
    items = Items()
    convo = _base()
    for k in range(5):
        convo = convo + _turn(k)
        _split(items, convo, "\x00messages")
        write, serialized = _split(items, convo[-2:], None)  # a task's write, no memo
        _same(write, _reference(convo[-2:]))
        assert serialized == []  # the same objects: taken from the per-object cache
        other, _ = _split(items, list(reversed(convo)), "\x00other")
        _same(other, _reference(list(reversed(convo))))
    got, serialized = _split(items, convo + _turn(9), "\x00messages")
    _same(got, _reference(convo + _turn(9)))
    assert serialized == [len(convo), len(convo) + 1]


def test_without_a_cache_nothing_is_remembered() -> None:
    items = Items(cache_bytes=0)
    msgs = _base()
    _split(items, msgs, "m")
    got, serialized = _split(items, msgs + _turn(1), "m")
    _same(got, _reference(msgs + _turn(1)))
    assert serialized == list(range(len(msgs) + 2))


@pytest.mark.parametrize("length", [3, 40])  # without and with the memo
def test_a_message_changed_while_it_is_serialized_is_serialized_again_next_time(
        length: int) -> None:
    # LangGraph's durability="async" serializes a put in the background while the next
    # node runs: a change made meanwhile must not be taken as what was stored
    items = Items()
    msgs = _base(1 if length == 3 else 20)[:length]
    late = msgs[-1]

    def changing(item: object, pos: int) -> tuple[str, bytes]:
        typed = SERDE.dumps_typed(item)
        if item is late:
            late.content = "changed while it was serialized"
        return typed

    items.split(msgs, changing, pack_blob, "t", "m")
    got, serialized = _split(items, msgs, "m")
    _same(got, _reference(msgs))  # the change is stored now
    assert serialized == [length - 1]
