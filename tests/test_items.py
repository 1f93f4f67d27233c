"""Incremental storage: list values stored as manifests of content-addressed items.

Every test compares what the saver returns with InMemorySaver's answer for the same calls,
and looks at what each tier holds: a message is stored once per thread however many
versions of ``messages`` (and pending writes) hold it.
"""

from __future__ import annotations

import hashlib
from typing import Any

import pymongo
import pytest
from langchain_core.messages import AIMessage, HumanMessage, RemoveMessage, ToolMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.checkpoint.serde.encrypted import EncryptedSerializer
from langgraph.graph import START, MessagesState, StateGraph

from langgraph_durable import DurableSaver
from langgraph_durable.core.items import DIGEST_BYTES, NODE_SIZE
from langgraph_durable.testing import drop_key_prefix, unique_options

from .graphs import build_answering
from .test_chunk_races import put


def _graph(saver: Any, mutate: Any = None) -> Any:
    """One node appending a 300-character AI answer (``mutate`` first changes earlier
    messages in place, as user code may)."""
    return build_answering(saver, mutate, chars=300)


def _turns(graph: Any, thread: str, n: int, start: int = 0) -> None:
    cfg = {"configurable": {"thread_id": thread}}
    for t in range(start, start + n):
        graph.invoke({"messages": [HumanMessage(f"question {t}", id=f"h-{t}")]}, cfg,
                     durability="sync")


def _history(saver: Any, thread: str) -> list[Any]:
    cfg = {"configurable": {"thread_id": thread}}
    return [(t.checkpoint["channel_values"], t.metadata["step"],
             [(c, v) for _task, c, v in t.pending_writes])  # task ids: random per run
            for t in saver.list(cfg)]


def _mongo(saver: DurableSaver, mongo_url: str) -> Any:
    client: pymongo.MongoClient = pymongo.MongoClient(mongo_url)
    return client[saver.config.database]


def _cold(saver: DurableSaver, redis_client: Any) -> None:
    """Flush, then empty Redis of the saver's keys: reads come from MongoDB alone."""
    saver.flush()
    drop_key_prefix(redis_client, saver.config.key_prefix)
    saver.context.items.forget("t")


def test_each_message_is_stored_once_per_thread(saver: DurableSaver, redis_client: Any,
                                                mongo_url: str) -> None:
    """40 turns = 80 messages in 80 versions of ``messages``: 80 items and 2 nodes in
    each tier (in MongoDB each node inside the document of the item completing it,
    ``durable/item_docs.py``), and every checkpoint reads back as InMemorySaver's."""
    ref = InMemorySaver()
    _turns(_graph(ref), "t", 40)
    _turns(_graph(saver), "t", 40)
    assert _history(saver, "t") == _history(ref, "t")
    keys = saver.context.keys("t")
    fields = redis_client.hkeys(keys.it)
    assert all(len(f) == DIGEST_BYTES for f in fields)
    assert len(fields) == 80 + 80 // NODE_SIZE
    saver.flush()
    db = _mongo(saver, mongo_url)
    items = saver.context.collections.items
    assert db[items].count_documents({"thread_id": "t"}) == 80
    assert db[items].count_documents({"thread_id": "t", "type": "lgd.node"}) == 0
    assert db[items].count_documents({"thread_id": "t", "d.1": {"$exists": True}}) == 2
    # the manifest of 80 messages: 2 nodes + 16 items, not 80 digests
    # (small: inside the checkpoint document that introduced it, durable/inline.py)
    cps = db[saver.context.collections.checkpoints].find(
        {"thread_id": "t", "vals.k": {"$exists": True}}, sort=[("checkpoint_id", -1)])
    latest = next(e for d in cps for e in d["vals"] if e["k"].startswith("8:messages|"))
    assert latest["type"] == "lgd.items" and len(latest["refs"]) == 2 + 80 - 64
    assert db[saver.context.collections.blobs].count_documents({"thread_id": "t"}) == 0
    _cold(saver, redis_client)
    assert _history(saver, "t") == _history(ref, "t")


async def test_async_reads_and_writes_equal_inmemory(asaver: DurableSaver,
                                                     redis_client: Any) -> None:
    ref = InMemorySaver()
    cfg = {"configurable": {"thread_id": "t"}}
    for saver in (ref, asaver):
        g = _graph(saver)
        for t in range(35):
            await g.ainvoke({"messages": [HumanMessage(f"q {t}", id=f"h-{t}")]}, cfg)
    def row(t: Any) -> Any:
        return t.checkpoint["channel_values"], [(c, v) for _task, c, v in t.pending_writes]

    want = [row(t) async for t in ref.alist(cfg)]
    assert [row(t) async for t in asaver.alist(cfg)] == want
    await asaver.aflush()
    drop_key_prefix(redis_client, asaver.config.key_prefix)
    assert [row(t) async for t in asaver.alist(cfg)] == want


@pytest.mark.parametrize("how", ["content", "nested_append", "additional_kwargs"])
def test_message_changed_in_place_between_steps(saver: DurableSaver, redis_client: Any,
                                                how: str) -> None:
    """User code mutating a message object in place between steps: the saver must not
    reuse the bytes it serialized before (its per-object cache compares with a copy).
    (``_turns`` runs with durability "sync": with "async" LangGraph stores a checkpoint
    while the next step runs, so a node mutating in place races with every saver.)"""

    def mutate(messages: list[Any]) -> None:
        first = messages[0]
        if how == "content":
            first.content = first.content + " (edited)"
        elif how == "nested_append":
            if isinstance(first.content, str):
                first.content = [{"type": "text", "text": first.content}]
            first.content.append({"type": "text", "text": f"part {len(first.content)}"})
        else:
            first.additional_kwargs.setdefault("seen", []).append(len(messages))

    ref = InMemorySaver()
    _turns(_graph(ref, mutate), "t", 6)
    _turns(_graph(saver, mutate), "t", 6)
    want = _history(ref, "t")
    assert _history(saver, "t") == want
    assert want[0][0]["messages"][0] != want[-2][0]["messages"][0]  # it did change
    _cold(saver, redis_client)
    assert _history(saver, "t") == want


def test_remove_message_and_replace_by_id(saver: DurableSaver, redis_client: Any) -> None:
    """Edits are other manifests over the same items: RemoveMessage, replace by id."""

    def edits(state: MessagesState) -> dict[str, Any]:
        msgs = state["messages"]
        out: list[Any] = [RemoveMessage(id=m.id) for m in msgs[:2]]
        out.append(AIMessage("replaced", id=msgs[-1].id))
        return {"messages": out}

    def build(s: Any) -> Any:
        b = StateGraph(MessagesState)
        b.add_node("edit", edits)
        b.add_edge(START, "edit")
        return b.compile(checkpointer=s)

    ref = InMemorySaver()
    for s in (ref, saver):
        _turns(_graph(s), "t", 5)
        build(s).invoke({"messages": [HumanMessage("last", id="h-last")]},
                        {"configurable": {"thread_id": "t"}})
    assert _history(saver, "t") == _history(ref, "t")
    _cold(saver, redis_client)
    assert _history(saver, "t") == _history(ref, "t")


def test_lost_items_are_sent_again(saver: DurableSaver, redis_client: Any) -> None:
    """Redis lost the thread's items (this process still takes them as held): the put is
    refused for missing items and sent again with all of them, in the same call."""
    ref = InMemorySaver()
    _turns(_graph(ref), "t", 6)
    g = _graph(saver)
    _turns(g, "t", 3)
    saver.flush()
    redis_client.delete(saver.context.keys("t").it)
    _turns(g, "t", 3, start=3)
    assert _history(saver, "t") == _history(ref, "t")
    assert redis_client.hlen(saver.context.keys("t").it) == 12


@pytest.mark.parametrize("at", [31, 5])  # a node's last item; one of many a put adds
@pytest.mark.parametrize("removed_by", ["delete_thread", "prune"])
def test_an_item_removed_then_met_again_in_a_new_node_is_sent_again(
        saver: DurableSaver, redis_client: Any, removed_by: str, at: int) -> None:
    """"S" was stored, then removed from both tiers (by ``delete_thread``, or by ``prune``
    once no kept checkpoint named it) while this process still took Redis as holding it.
    A later list holds it in a new node (its last item, or one of the 32 the put adds),
    which names it where no manifest does: the PUT script counts a sent node's items too,
    refuses (``MISSING_ITEMS``), and the put is sent again with every item. Before,
    neither tier ever had "S" again (``CorruptRecordError`` on every read; a helper's
    fuzzer found it)."""
    first = [f"a{i}" for i in range(33)] + ["S"]
    again = [f"b{i}" for i in range(31)]
    again.insert(at, "S")  # in node 0
    cfg = put(saver, "t", 0, None, first)
    if removed_by == "delete_thread":
        saver.flush()
        saver.delete_thread("t")
        cfg = None
    else:
        cfg = put(saver, "t", 1, cfg, ["z"])
        saver.prune(["t"], strategy="keep_latest")
        assert redis_client.hlen(saver.context.keys("t").it) == 1  # "z" alone
    put(saver, "t", 2, cfg, again)
    assert redis_client.hlen(saver.context.keys("t").it) == 32 + 1 + (removed_by == "prune")
    for _ in ("hot", "cold"):
        got = saver.get_tuple({"configurable": {"thread_id": "t"}})
        assert got.checkpoint["channel_values"]["messages"] == again
        _cold(saver, redis_client)


def test_encrypted_items_dedup_without_plaintext_or_plain_digests(
        redis_url: str, mongo_url: str, redis_client: Any) -> None:
    """With an EncryptedSerializer each item is encrypted on its own and its digest is
    keyed: neither tier holds a message's text or its unkeyed digest, and a message is
    still stored once."""
    serde = EncryptedSerializer.from_pycryptodome_aes(key=b"0123456789abcdef")
    ref = InMemorySaver()
    _turns(_graph(ref), "t", 5)
    opts = unique_options()
    with DurableSaver.from_urls(redis_url, mongo_url, serde=serde, **opts) as s:
        g = _graph(s)
        _turns(g, "t", 5)
        assert _history(s, "t") == _history(ref, "t")
        it = redis_client.hgetall(s.context.keys("t").it)
        assert len(it) == 10
        s.flush()
        db = _mongo(s, mongo_url)
        docs = list(db[s.context.collections.items].find({"thread_id": "t"}))
        assert len(docs) == 10
        plain = JsonPlusDigests()
        for m in ref.get_tuple({"configurable": {"thread_id": "t"}}).checkpoint[
                "channel_values"]["messages"]:
            text = m.content.encode()
            assert not any(text[:20] in v for v in it.values())
            assert not any(text[:20] in bytes(d["data"]) for d in docs)
            assert plain.of(m) not in it
            assert plain.of(m) not in {bytes(d["d"]) for d in docs}
        assert all(d["type"].endswith("+aes") for d in docs)
        _cold(s, redis_client)
        assert _history(s, "t") == _history(ref, "t")


class JsonPlusDigests:
    """The unkeyed digest a plain serializer would give an item (must not be stored)."""

    def __init__(self) -> None:
        from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

        self.serde = JsonPlusSerializer()

    def of(self, value: Any) -> bytes:
        t, b = self.serde.dumps_typed(value)
        return hashlib.blake2b(t.encode() + b"\x00" + b, digest_size=16,
                               person=b"lgd-item").digest()


def test_prune_and_delete_leave_no_orphan_items(saver: DurableSaver, redis_client: Any,
                                                mongo_url: str) -> None:
    """After compaction removed early messages, prune keep_latest keeps exactly the items
    the latest checkpoint names; delete_thread removes them all, in both tiers."""

    def compact(state: MessagesState) -> dict[str, Any]:
        return {"messages": [RemoveMessage(id=m.id) for m in state["messages"][:-2]]}

    b = StateGraph(MessagesState)
    b.add_node("compact", compact)
    b.add_edge(START, "compact")
    _turns(_graph(saver), "t", 20)
    b.compile(checkpointer=saver).invoke(
        {"messages": [HumanMessage("q", id="h-x")]}, {"configurable": {"thread_id": "t"}})
    latest = saver.get_tuple({"configurable": {"thread_id": "t"}})
    assert len(latest.checkpoint["channel_values"]["messages"]) == 2
    saver.prune(["t"], strategy="keep_latest")
    db = _mongo(saver, mongo_url)
    items = saver.context.collections.items
    assert db[items].count_documents({"thread_id": "t"}) == 2
    assert redis_client.hlen(saver.context.keys("t").it) == 2
    assert saver.get_tuple({"configurable": {"thread_id": "t"}}).checkpoint == latest.checkpoint
    saver.delete_thread("t")
    assert db[items].count_documents({"thread_id": "t"}) == 0
    assert redis_client.exists(saver.context.keys("t").it) == 0


def test_copy_thread_copies_items(saver: DurableSaver, redis_client: Any) -> None:
    """The copy holds its own items: it reads the same after the source is deleted
    (InMemorySaver has no copy_thread; the source's history is the reference)."""
    ref = InMemorySaver()
    _turns(_graph(ref), "t", 4)
    _turns(_graph(saver), "t", 4)
    saver.copy_thread("t", "u")
    saver.delete_thread("t")
    assert _history(saver, "u") == _history(ref, "t")
    assert redis_client.exists(saver.context.keys("t").it) == 0


def test_lists_stored_whole_when_disabled(redis_url: str, mongo_url: str,
                                          redis_client: Any) -> None:
    """``list_items=False`` keeps the former format: no item hash, equal answers."""
    ref = InMemorySaver()
    _turns(_graph(ref), "t", 3)
    with DurableSaver.from_urls(redis_url, mongo_url, list_items=False,
                                **unique_options()) as s:
        _turns(_graph(s), "t", 3)
        assert redis_client.exists(s.context.keys("t").it) == 0
        assert _history(s, "t") == _history(ref, "t")


def test_tool_messages_and_writes_share_items(saver: DurableSaver) -> None:
    """A pending write holding a list is a manifest too: the message it carries and the
    same message in ``messages`` later are one item."""
    cfg = {"configurable": {"thread_id": "t", "checkpoint_ns": ""}}
    ref = InMemorySaver()
    msg = ToolMessage("result " * 50, tool_call_id="c1", id="tm-1")
    for s in (ref, saver):
        from langgraph.checkpoint.base import empty_checkpoint

        cp = empty_checkpoint()
        cp["channel_values"] = {"messages": [msg]}
        saved = s.put(cfg, cp, {"step": 1}, {"messages": s.get_next_version(None, None)})
        s.put_writes(saved, [("messages", [msg]), ("other", [1, 2])], "task-1")
    got = saver.get_tuple(cfg)
    assert got.pending_writes == ref.get_tuple(cfg).pending_writes
    assert got.checkpoint["channel_values"] == ref.get_tuple(cfg).checkpoint["channel_values"]
