"""Each item of a list value decodes exactly as it does inside the whole list.

List values are stored as manifests of items, each serialized on its own
(``items.py``). LangGraph's serializer types a ``bytearray`` alone as ``"bytearray"``
(read back as one) while inside a list msgpack reads it back as ``bytes``: InMemorySaver,
which stores the list whole, gives ``bytes``. ``b"x" == bytearray(b"x")`` in Python, so
every test compares the *types* as well as the values.
"""

from __future__ import annotations

from typing import Any

import pytest
from langgraph.checkpoint.base import empty_checkpoint
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.checkpoint.serde.encrypted import EncryptedSerializer

from langgraph_durable import DurableSaver
from langgraph_durable.testing import drop_key_prefix, unique_options

CFG = {"configurable": {"thread_id": "t", "checkpoint_ns": ""}}
VALUE = [bytearray(b"x"), b"y", None, "s", [bytearray(b"n")], {"k": bytearray(b"d")}]
"""A list channel value and pending write: a bytearray item, the other top-level special
cases of JsonPlusSerializer (bytes, None), a str and bytearrays nested deeper."""
WANT = [b"x", b"y", None, "s", [b"n"], {"k": b"d"}]
WANT_TYPES = [bytes, bytes, type(None), str, list, dict]


def _shape(value: Any) -> Any:
    """``value`` with every leaf replaced by its type's name (bytes vs bytearray)."""
    if isinstance(value, list):
        return [_shape(v) for v in value]
    if isinstance(value, dict):
        return {k: _shape(v) for k, v in value.items()}
    return type(value).__name__


def _answer(tup: Any) -> Any:
    """What a read says about the value: channel values, pending writes, and their
    shapes (types of every leaf)."""
    values = tup.checkpoint["channel_values"]
    writes = [(c, v) for _task, c, v in tup.pending_writes]
    return values, writes, _shape(values), [(c, _shape(v)) for c, v in writes]


def _store(saver: Any) -> None:
    cp = empty_checkpoint()
    cp["channel_values"] = {"v": list(VALUE), "whole": bytearray(b"top")}
    versions = {"v": saver.get_next_version(None, None),
                "whole": saver.get_next_version(None, None)}
    cp["channel_versions"] = dict(versions)
    saved = saver.put(CFG, cp, {"step": 1}, versions)
    saver.put_writes(saved, [("v", list(VALUE)), ("w", bytearray(b"alone"))], "task-1")


async def _astore(saver: Any) -> None:
    cp = empty_checkpoint()
    cp["channel_values"] = {"v": list(VALUE), "whole": bytearray(b"top")}
    versions = {"v": saver.get_next_version(None, None),
                "whole": saver.get_next_version(None, None)}
    cp["channel_versions"] = dict(versions)
    saved = await saver.aput(CFG, cp, {"step": 1}, versions)
    await saver.aput_writes(saved, [("v", list(VALUE)), ("w", bytearray(b"alone"))],
                            "task-1")


def _reference() -> Any:
    ref = InMemorySaver()
    _store(ref)
    want = _answer(ref.get_tuple(CFG))
    # what InMemorySaver says, written down: items as in the list, lone values as given
    assert want[0]["v"] == WANT and [type(v) for v in want[0]["v"]] == WANT_TYPES
    assert want[2] == {"v": ["bytes", "bytes", "NoneType", "str", ["bytes"], {"k": "bytes"}],
                       "whole": "bytearray"}
    assert want[3] == [("v", ["bytes", "bytes", "NoneType", "str", ["bytes"],
                              {"k": "bytes"}]), ("w", "bytearray")]
    return want


def _cold(saver: DurableSaver, redis_client: Any) -> None:
    """Flush, then empty Redis of the saver's keys: reads come from MongoDB alone."""
    saver.flush()
    drop_key_prefix(redis_client, saver.config.key_prefix)
    saver.context.items.forget("t")


def test_a_bytearray_in_a_list_reads_back_as_bytes_hot_and_cold(
        saver: DurableSaver, redis_client: Any) -> None:
    want = _reference()
    _store(saver)
    assert redis_client.hlen(saver.context.keys("t").it) > 0  # stored as items
    assert _answer(saver.get_tuple(CFG)) == want
    assert _answer(saver.get_tuple(CFG)) == want  # again: decoded items held by the saver
    assert [_answer(t) for t in saver.list(CFG)] == [want]
    _cold(saver, redis_client)
    assert saver.get_tuple(CFG) is not None and saver.last_read_tier == "durable"
    assert _answer(saver.get_tuple(CFG)) == want
    assert [_answer(t) for t in saver.list(CFG)] == [want]


async def test_a_bytearray_in_a_list_reads_back_as_bytes_async_hot_and_cold(
        asaver: DurableSaver, redis_client: Any) -> None:
    want = _reference()
    await _astore(asaver)
    assert _answer(await asaver.aget_tuple(CFG)) == want
    assert [_answer(t) async for t in asaver.alist(CFG)] == [want]
    await asaver.aflush()
    drop_key_prefix(redis_client, asaver.config.key_prefix)
    asaver.context.items.forget("t")
    assert _answer(await asaver.aget_tuple(CFG)) == want
    assert asaver.last_read_tier == "durable"
    assert [_answer(t) async for t in asaver.alist(CFG)] == [want]


@pytest.mark.parametrize("how", ["encrypted", "no_item_cache", "list_items_off"])
def test_items_decode_as_the_whole_list_with_every_item_setting(
        how: str, redis_url: str, mongo_url: str, redis_client: Any) -> None:
    """Encrypted items (type ``bytearray+aes``), the item cache off (every item decoded
    at every read), and lists stored whole: the same answer as InMemorySaver's."""
    want = _reference()
    serde = (EncryptedSerializer.from_pycryptodome_aes(key=b"0123456789abcdef")
             if how == "encrypted" else None)
    opts: dict[str, Any] = {"no_item_cache": {"item_cache_bytes": 0},
                            "list_items_off": {"list_items": False}}.get(how, {})
    with DurableSaver.from_urls(redis_url, mongo_url, serde=serde, **opts,
                                **unique_options()) as s:
        _store(s)
        held = redis_client.hlen(s.context.keys("t").it)
        assert held == (0 if how == "list_items_off" else 6)  # the 6 items, once
        assert _answer(s.get_tuple(CFG)) == want
        _cold(s, redis_client)
        assert _answer(s.get_tuple(CFG)) == want


def test_delta_history_gives_list_items_as_the_whole_list(saver: DurableSaver) -> None:
    """The other reader of manifests (``get_delta_channel_history``: seeds and writes
    along the parent chain) gives InMemorySaver's answer, types included."""

    def history(s: Any) -> Any:
        _store(s)
        parent = s.get_tuple(CFG)
        cp = empty_checkpoint()
        cp["channel_values"] = {"v": list(VALUE)}
        child = s.put(parent.config, cp, {"step": 2}, {})
        found = s.get_delta_channel_history(config=child, channels=["v", "w"])
        return found, {ch: {k: _shape([x[2] for x in v] if k == "writes" else v)
                            for k, v in h.items()} for ch, h in found.items()}

    want = history(InMemorySaver())
    assert want[1]["v"]["writes"] == [["bytes", "bytes", "NoneType", "str", ["bytes"],
                                       {"k": "bytes"}]]
    assert want[1]["w"]["writes"] == ["bytearray"]
    assert history(saver) == want
