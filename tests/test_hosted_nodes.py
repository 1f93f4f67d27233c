"""A node of a list (32 consecutive items, ``core/items.py``) stored inside the MongoDB
document of the item that completes it (``durable/item_docs.py``,
``schema.HOSTED_NODE_VERSION``), so a conversation costs no document per 32 messages.

Every test runs on the session's real servers, with the flush rounds driven by hand, and
reads back from MongoDB alone (the thread's Redis keys dropped), where the node is needed
to rebuild any list of 32 items or more. The saver and its hand-driven flush rounds are
``test_chunk_races.hand``'s (values over 1 KiB chunked: none of these lists' items)."""

from __future__ import annotations

from typing import Any

import pytest

from langgraph_durable import DurableSaver
from langgraph_durable.core.items import NODE_TYPE
from langgraph_durable.core.records import pack_blob
from langgraph_durable.core.schema import HOSTED_NODE_VERSION
from langgraph_durable.durable import item_docs as IT
from langgraph_durable.errors import CorruptRecordError

from . import test_chunk_races
from .test_chunk_races import cold_values, put

hand = test_chunk_races.hand  # the fixture: a saver whose flush rounds the test runs

MESSAGES = [f"message {i}" for i in range(70)]  # 2 full nodes and 6 items after them


def items(s: DurableSaver, tid: str) -> list[dict[str, Any]]:
    """The items documents of ``tid``, as stored."""
    return list(s.sync_clients.db[s.context.collections.items].find({"thread_id": tid}))


def kinds(docs: list[dict[str, Any]]) -> tuple[int, int, int]:
    """(items documents, of them holding a node, nodes on their own)."""
    return (len(docs), sum(isinstance(d["d"], list) for d in docs),
            sum(d["type"] == NODE_TYPE for d in docs))


def test_a_growing_list_stores_its_nodes_inside_the_items_completing_them(hand: Any) -> None:
    cfg = None
    for step, n in enumerate((20, 31, 32, 33, 64, 70)):  # one flush round per checkpoint
        cfg = put(hand, "T", step, cfg, messages=MESSAGES[:n])
        hand.drain()
    docs = items(hand, "T")
    assert kinds(docs) == (70, 2, 0)  # one document per message; no node of its own
    hosts = sorted((d for d in docs if isinstance(d["d"], list)), key=lambda d: d["put_ms"])
    assert [d["v"] for d in hosts] == [HOSTED_NODE_VERSION] * 2
    assert [hand.serde.loads_typed(IT.entries(d)[0][1]) for d in hosts] == [
        "message 31", "message 63"]  # the items completing nodes 0 and 1
    assert [len(d["refs"]) for d in hosts] == [32, 32]
    assert [bytes(d["refs"][-1]) for d in hosts] == [bytes(d["d"][0]) for d in hosts]
    want = [{"v": "small", "messages": MESSAGES[:n]} for n in (70, 64, 33, 32, 31, 20)]
    assert cold_values(hand, "T") == want  # list's page: the items read once each
    got = hand.get_tuple({"configurable": {"thread_id": "T"}})  # one checkpoint: $lookup
    assert got.checkpoint["channel_values"]["messages"] == MESSAGES


def test_a_node_whose_last_item_was_stored_before_goes_inside_that_items_document(
        hand: Any) -> None:
    """Item 31 repeats item 5, flushed a round earlier: Redis held it, so the put that
    completes the node does not send it again (as an agent's message, written by
    ``put_writes`` before the ``put`` that makes the node). The node goes inside the
    item's stored document; one that holds a node already keeps it, and the other node
    gets a document of its own."""
    listed = MESSAGES[:31] + [MESSAGES[5]]
    cfg = put(hand, "T", 0, messages=listed[:10])
    hand.drain()
    cfg = put(hand, "T", 1, cfg, messages=listed)
    hand.drain()
    assert kinds(items(hand, "T")) == (31, 1, 0)  # 31 distinct items, one holding the node
    assert cold_values(hand, "T")[0]["messages"] == listed
    other = [f"other {i}" for i in range(31)] + [MESSAGES[5]]  # a node ending the same
    put(hand, "T", 2, cfg, messages=other)
    hand.drain()
    assert kinds(items(hand, "T")) == (63, 1, 1)  # 31 more items and the second node
    assert cold_values(hand, "T")[0]["messages"] == other


def test_an_item_stored_already_takes_the_node_its_round_brings(hand: Any) -> None:
    """The completing item is in MongoDB before the round (a replayed round, another
    flusher, an item sent again): the round's insert of the hosting document is a
    duplicate; the item is upserted and the node put inside its stored document."""
    put(hand, "T", 0, messages=MESSAGES[:32])
    ctx, redis = hand.context, hand.sync_clients.redis
    node = next(raw for raw in redis.hvals(ctx.keys("T").it) if raw.startswith(b"\xc1N"))
    last = node[-16:]  # the node's last item digest
    stored = IT.item_doc("T", last, redis.hget(ctx.keys("T").it, last), put_ms=1)
    hand.sync_clients.db[ctx.collections.items].insert_one(stored)
    hand.drain()
    assert kinds(items(hand, "T")) == (32, 1, 0)
    assert cold_values(hand, "T")[0]["messages"] == MESSAGES[:32]


def test_prune_takes_a_hosting_item_with_its_node_and_keeps_one_still_named(
        hand: Any) -> None:
    """The kept checkpoint names the completing item (at another place) but not the node:
    the document stays, node inside; the other node's item goes, node with it."""
    cfg = put(hand, "T", 0, messages=MESSAGES[:64])
    hand.drain()
    kept = MESSAGES[:10] + [MESSAGES[31]]
    put(hand, "T", 1, cfg, messages=kept)
    hand.drain()
    hand.prune(["T"])
    docs = items(hand, "T")
    assert kinds(docs) == (11, 1, 0)
    assert cold_values(hand, "T") == [{"v": "small", "messages": kept}]
    put(hand, "T", 2, None, messages=MESSAGES[:1])
    hand.drain()
    hand.prune(["T"])  # now nothing names message 31: its document goes, node and all
    assert kinds(items(hand, "T")) == (1, 0, 0)


def test_copy_thread_carries_a_node_held_by_an_item(hand: Any) -> None:
    put(hand, "S", 0, messages=MESSAGES[:40])
    hand.drain()
    hand.copy_thread("S", "T")  # copied as an item and a node of their own
    assert kinds(items(hand, "T")) == (41, 0, 1)
    assert cold_values(hand, "T")[0]["messages"] == MESSAGES[:40]
    assert cold_values(hand, "S")[0]["messages"] == MESSAGES[:40]


def test_a_damaged_hosting_document_is_named() -> None:
    doc = IT.hosted(IT.item_doc("T", b"i" * 16, pack_blob(("json", b"1")), put_ms=1), b"n" * 16,
                    b"\xc1N" + b"a" * 16 * 31 + b"i" * 16, 1)
    assert [d for d, _ in IT.entries(doc)] == [b"i" * 16, b"n" * 16]
    with pytest.raises(CorruptRecordError, match=r"items document .*thread 'T'.*field 'd' "
                                                  r"holds an array that is not \[item"):
        IT.entries({**doc, "d": [b"i" * 16]})
    with pytest.raises(CorruptRecordError, match="holds a node without items"):
        IT.entries({**doc, "refs": []})
    item, node = IT.split_hosted(doc)
    assert (item["d"], item["v"], "refs" in item) == (b"i" * 16, 1, False)
    assert (node["d"], node["type"], node["_id"]) == (b"n" * 16, NODE_TYPE,
                                                       IT.doc_id("T", (b"n" * 16).hex()))
    lone: list[Any] = []
    assert IT.upsert_stored(doc, lone).filter["_id"] == item["_id"]
    assert lone == [node]  # for lone_nodes_plan
    assert IT.host_update(node).filter["thread_id"] == "T"  # the shard key


def test_a_node_held_by_its_item_and_stored_on_its_own_too_is_exported_once(
        hand: Any) -> None:
    """A node in both forms (its own document, e.g. a fallback of ``lone_nodes_plan``
    or an earlier copy, and inside its item's): the export names it once (a helper's
    script: 34 item records, 33 distinct, before)."""
    import json

    from langgraph_durable.cli.transfer import export_lines

    put(hand, "T", 0, messages=MESSAGES[:32])
    hand.drain()
    (host,) = [d for d in items(hand, "T") if isinstance(d["d"], list)]
    hand.sync_clients.db[hand.context.collections.items].insert_one(IT.split_hosted(host)[1])
    assert kinds(items(hand, "T")) == (33, 1, 1)
    assert cold_values(hand, "T")[0]["messages"] == MESSAGES[:32]
    lines = list(export_lines(hand.sync_clients.db, hand.context.collections, "T"))
    digests = [json.loads(line)["d"] for line in lines[1:]
               if json.loads(line)["type"] == "item"]
    assert len(digests) == len(set(digests)) == 33  # 32 messages and the node
    assert json.loads(lines[0])["counts"]["item"] == 33



def test_a_node_sent_again_to_the_item_holding_it_stays_inside(hand: Any) -> None:
    """The prune keeps message 31 (named alone) and its document with the node inside;
    Redis drops the node. The list put again sends the node without its item (Redis has
    it): the node's update matches the document holding this very node, so it is not
    stored on its own too (a helper counted 5-10 such nodes in 110 turns, before)."""
    cfg = put(hand, "T", 0, messages=MESSAGES[:32])
    hand.drain()
    cfg = put(hand, "T", 1, cfg, messages=MESSAGES[31:32])
    hand.drain()
    hand.prune(["T"], keep_last=1)
    assert kinds(items(hand, "T")) == (1, 1, 0)
    put(hand, "T", 2, cfg, messages=MESSAGES[:32])
    hand.drain()
    assert kinds(items(hand, "T")) == (32, 1, 0)
    assert cold_values(hand, "T")[0]["messages"] == MESSAGES[:32]
