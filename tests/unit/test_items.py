"""Content-addressed items without servers: a list split into nodes and tail items and
expanded again, a missing item named by its digest, the per-object serialization cache,
keyed digests, and the manifest envelopes of blobs and pending writes (``core/records.py``)."""

from __future__ import annotations

import functools
from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

from langgraph_durable.core.items import (
    DIGEST_BYTES,
    MANIFEST_MAGIC,
    MANIFEST_TYPE,
    NODE_MAGIC,
    NODE_SIZE,
    NODE_TYPE,
    Items,
    Typed,
    expand,
    parse_stored,
    split_digests,
    unwrap_manifest,
)
from langgraph_durable.core.records import WriteRecord, load_value, pack_blob, unpack_blob
from langgraph_durable.errors import CorruptRecordError

SERDE = JsonPlusSerializer()


class CountingDumps:
    """``serde.dumps_typed`` as ``Items.split``'s ``dumps`` callback, counting its calls
    (the positions it was called for)."""

    def __init__(self) -> None:
        self.positions: list[int] = []

    def __call__(self, item: Any, pos: int) -> Typed:
        self.positions.append(pos)
        return SERDE.dumps_typed(item)


def parsed(parts: dict[bytes, bytes]) -> dict[bytes, Typed]:
    """The stored parts of a split in the form reads hand to ``expand``."""
    unpack = functools.partial(unpack_blob, where="test")
    return {d: parse_stored(raw, unpack) for d, raw in parts.items()}


def test_a_list_of_70_items_is_two_nodes_and_six_tail_items() -> None:
    items = Items()
    value = [f"message {i}" for i in range(70)]
    split = items.split(value, CountingDumps(), pack_blob)
    refs = split_digests(split.refs)
    assert len(split.refs) == 8 * DIGEST_BYTES and len(refs) == 8
    item_digests = [items.digest(SERDE.dumps_typed(v)) for v in value]
    first = b"".join(item_digests[:NODE_SIZE])
    second = b"".join(item_digests[NODE_SIZE:2 * NODE_SIZE])
    assert refs == [items.node_digest(first), items.node_digest(second), *item_digests[64:]]
    assert split.parts[refs[0]] == NODE_MAGIC + first
    assert split.parts[refs[1]] == NODE_MAGIC + second
    assert len(split.parts) == 70 + 2  # every item once, both nodes
    assert split.parts[item_digests[3]] == pack_blob(SERDE.dumps_typed("message 3"))


def test_expand_gives_back_the_list_in_order() -> None:
    value: list[Any] = [{"i": i} for i in range(70)] + ["tail", 7, None]
    split = Items().split(value, CountingDumps(), pack_blob)
    stored = parsed(split.parts)
    assert sum(1 for t in stored.values() if t[0] == NODE_TYPE) == 2
    typed = expand(split.refs, stored, "test list")
    assert [SERDE.loads_typed(t) for _d, t in typed] == value
    assert load_value(SERDE, (MANIFEST_TYPE, split.refs), stored, "test list") == value


def test_equal_items_are_stored_once() -> None:
    split = Items().split(["same", "other", "same"], CountingDumps(), pack_blob)
    refs = split_digests(split.refs)
    assert refs[0] == refs[2] != refs[1] and len(split.parts) == 2


def test_a_missing_tail_item_raises_naming_its_digest_and_the_value() -> None:
    split = Items().split([f"m{i}" for i in range(40)], CountingDumps(), pack_blob)
    stored = parsed(split.parts)
    lost = split_digests(split.refs)[-1]  # "m39", after the node of m0..m31
    del stored[lost]
    with pytest.raises(CorruptRecordError,
                       match=f"item {lost.hex()} of channel 'messages' is missing"):
        expand(split.refs, stored, "channel 'messages'")


def test_a_missing_item_inside_a_node_raises_naming_it_and_the_node() -> None:
    split = Items().split([f"m{i}" for i in range(40)], CountingDumps(), pack_blob)
    stored = parsed(split.parts)
    node = split_digests(split.refs)[0]
    lost = split_digests(stored[node][1])[5]  # "m5"
    del stored[lost]
    with pytest.raises(CorruptRecordError,
                       match=f"item {lost.hex()} \\(in node {node.hex()}\\) of w is missing"):
        expand(split.refs, stored, "w")


def test_a_message_object_met_again_unchanged_is_not_serialized_again() -> None:
    items = Items()
    msgs = [HumanMessage("hi", id="1"), AIMessage("hello", id="2")]
    dumps = CountingDumps()
    first = items.split(msgs, dumps, pack_blob)
    assert dumps.positions == [0, 1]
    msgs.append(HumanMessage("and now?", id="3"))
    second = items.split(msgs, dumps, pack_blob)
    assert dumps.positions == [0, 1, 2]  # only the message added
    assert second.refs[:2 * DIGEST_BYTES] == first.refs
    uncached = Items(cache_bytes=0).split(msgs, CountingDumps(), pack_blob)
    assert (second.refs, second.parts) == (uncached.refs, uncached.parts)


def test_a_message_changed_in_place_is_serialized_again() -> None:
    items = Items()
    msg = AIMessage("draft", id="2")
    dumps = CountingDumps()
    before = items.split([HumanMessage("hi", id="1"), msg], dumps, pack_blob)
    assert dumps.positions == [0, 1]
    msg.content = "final"
    after = items.split([HumanMessage("hi", id="1"), msg], dumps, pack_blob)
    assert dumps.positions == [0, 1, 0, 1]  # a new (equal) first object, the changed one
    assert after.refs[:DIGEST_BYTES] == before.refs[:DIGEST_BYTES]
    assert after.refs[DIGEST_BYTES:] == items.digest(SERDE.dumps_typed(msg))
    assert after.refs[DIGEST_BYTES:] != before.refs[DIGEST_BYTES:]
    assert SERDE.loads_typed(parsed(after.parts)[after.refs[DIGEST_BYTES:]]).content == "final"


def _conversation(n: int) -> list[Any]:
    return [AIMessage(f"answer {i}", id=f"a{i}",
                      tool_calls=[{"name": "search", "args": {"q": f"q{i}"}, "id": f"c{i}"}])
            if i % 2 else HumanMessage(f"question {i}", id=f"h{i}") for i in range(n)]


def test_a_list_whose_every_message_is_cached_and_unchanged_serializes_nothing() -> None:
    items = Items()
    msgs = _conversation(70)  # two nodes and six tail items
    dumps = CountingDumps()
    first = items.split(msgs, dumps, pack_blob, "t")
    again = items.split(msgs, dumps, pack_blob, "t")
    assert dumps.positions == list(range(70))  # the second split serialized none
    assert (again.refs, again.parts) == (first.refs, first.parts)
    uncached = Items(cache_bytes=0).split(msgs, CountingDumps(), pack_blob, "t")
    assert (again.refs, again.parts) == (uncached.refs, uncached.parts)


def test_a_nested_field_changed_in_place_in_a_cached_list_is_serialized_again() -> None:
    items = Items()
    msgs = _conversation(40)
    dumps = CountingDumps()
    before = items.split(msgs, dumps, pack_blob, "t")
    msgs[33].tool_calls[0]["args"]["q"] = "changed"  # deep in a message of the tail
    after = items.split(msgs, dumps, pack_blob, "t")
    assert dumps.positions == [*range(40), 33]  # only the changed message again
    tail = after.refs[DIGEST_BYTES:]  # one node (items 0-31), then the tail's digests
    assert after.refs[:DIGEST_BYTES] == before.refs[:DIGEST_BYTES]
    changed = tail[DIGEST_BYTES:2 * DIGEST_BYTES]
    assert changed == items.digest(SERDE.dumps_typed(msgs[33]))
    assert changed != before.refs[2 * DIGEST_BYTES:3 * DIGEST_BYTES]
    loaded = SERDE.loads_typed(parsed(after.parts)[changed])
    assert loaded.tool_calls[0]["args"] == {"q": "changed"}


class _Ambiguous(dict):  # type: ignore[type-arg]
    """A mapping whose ``==`` raises (as a NumPy array's truth value does); serialized
    as the dict it holds."""

    def __eq__(self, other: object) -> bool:
        raise ValueError("the truth value is ambiguous")

    __hash__ = None  # type: ignore[assignment]


def test_a_field_whose_comparison_raises_makes_only_its_message_serialized_again() -> None:
    items = Items()
    msgs = _conversation(5)
    dumps = CountingDumps()
    items.split(msgs, dumps, pack_blob, "t")
    msgs[2].additional_kwargs["blob"] = _Ambiguous(a=1)
    after = items.split(msgs, dumps, pack_blob, "t")  # compared with its snapshot: raises
    assert dumps.positions == [0, 1, 2, 3, 4, 2]  # the others were not serialized again
    loaded = SERDE.loads_typed(parsed(after.parts)[after.refs[2 * DIGEST_BYTES:3 * DIGEST_BYTES]])
    assert loaded.additional_kwargs == {"blob": {"a": 1}}
    items.split(msgs, dumps, pack_blob, "t")  # its new snapshot holds the raising value
    assert dumps.positions == [0, 1, 2, 3, 4, 2, 2]


class CountingLoads:
    """``serde.loads_typed`` counting its calls."""

    def __init__(self) -> None:
        self.calls = 0

    def __call__(self, typed: Typed) -> Any:
        self.calls += 1
        return SERDE.loads_typed(typed)


def test_an_item_decoded_again_is_rebuilt_equal_and_sharing_nothing() -> None:
    items = Items()
    msgs = [HumanMessage("hi", id="1"),
            AIMessage([{"type": "text", "text": "a"}], id="2", additional_kwargs={"k": [1]},
                      tool_calls=[{"name": "f", "args": {"q": [1, 2]}, "id": "c1"}])]
    found = [(items.digest(t), t) for t in map(SERDE.dumps_typed, msgs)]
    loads = CountingLoads()
    first = items.decode("t", found, loads, remember=True, fresh=True)
    assert loads.calls == 2
    first[1].content.append({"type": "text", "text": "mutated"})  # user code, in place
    first[1].tool_calls[0]["args"]["q"].append(3)
    first[1].additional_kwargs["k"].append(2)
    second = items.decode("t", found, loads, remember=True, fresh=True)
    assert loads.calls == 2  # rebuilt, not decoded
    plain = [SERDE.loads_typed(t) for _, t in found]
    assert second == plain and [type(m) for m in second] == [HumanMessage, AIMessage]
    assert [m.model_fields_set for m in second] == [m.model_fields_set for m in plain]
    assert [list(m.__dict__) for m in second] == [list(m.__dict__) for m in plain]
    assert [repr(m) for m in second] == [repr(m) for m in plain]
    assert second[1].content == [{"type": "text", "text": "a"}]
    assert second[1].tool_calls[0]["args"] == {"q": [1, 2]}
    assert second[1] is not first[1] and second[1].content is not first[1].content
    # a rebuilt object is remembered too: put it unchanged and nothing is serialized
    dumps = CountingDumps()
    items.split(second, dumps, pack_blob, "t")
    assert dumps.positions == []
    # another thread has no templates of its own
    items.decode("u", found, loads)
    assert loads.calls == 4
    assert Items(cache_bytes=0).decode("t", found, loads) == plain and loads.calls == 6


def test_keyed_digests_differ_from_unkeyed_ones() -> None:
    typed = SERDE.dumps_typed("secret message")
    plain, keyed = Items(), Items(key=b"k" * 32)
    assert keyed.digest(typed) != plain.digest(typed)
    assert keyed.digest(typed) == Items(key=b"k" * 32).digest(typed)  # stable per key
    assert keyed.digest(typed) != Items(key=b"j" * 32).digest(typed)
    children = plain.digest(typed) * 2
    assert keyed.node_digest(children) != plain.node_digest(children)
    assert len(keyed.digest(typed)) == DIGEST_BYTES


def test_a_manifest_blob_round_trips_with_its_digests_at_a_fixed_offset() -> None:
    refs = bytes(range(32))  # two digests
    raw = pack_blob((MANIFEST_TYPE, refs))
    assert raw[:2] == MANIFEST_MAGIC and int.from_bytes(raw[2:6], "big") == 32
    assert raw[6:38] == refs  # where the Lua scripts read them
    assert unwrap_manifest(raw)[0] == refs
    assert unpack_blob(raw, "test") == (MANIFEST_TYPE, refs)
    plain = pack_blob(("json", b"[1]"))
    assert unwrap_manifest(plain) == (None, plain)
    assert unpack_blob(plain, "test") == ("json", b"[1]")


def test_a_manifest_write_round_trips() -> None:
    refs = bytes(range(48))  # three digests
    w = WriteRecord("task", 0, "messages", (MANIFEST_TYPE, refs), "~__pregel_pull", 5)
    raw = w.pack()
    assert raw[:2] == MANIFEST_MAGIC and raw[6:54] == refs
    assert WriteRecord.unpack(raw, "test") == w
    plain = WriteRecord("task", -1, "__error__", ("json", b'"x"'), "", 6)
    assert plain.pack()[:2] != MANIFEST_MAGIC
    assert WriteRecord.unpack(plain.pack(), "test") == plain


def test_a_digest_list_of_a_wrong_length_is_corrupt() -> None:
    with pytest.raises(CorruptRecordError, match="malformed digest list \\(17 bytes\\) at x"):
        split_digests(b"\x00" * 17, "at x")
