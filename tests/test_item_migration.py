"""``item_migration.convert_lists_plan``: whole-list values written before the item store
(here by a saver with ``list_items=False``) become manifests over items, in MongoDB only;
reads are unchanged, the pass resumes after an interruption, a second pass converts
nothing, and a 30-turn agent thread takes fewer MongoDB bytes."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage
from langgraph.graph import START, MessagesState, StateGraph
from langgraph.types import Command, interrupt

from benchmarks import graphs
from benchmarks.conversation import mongo_bson_bytes
from langgraph_durable import DurableSaver
from langgraph_durable.admin import item_migration as IM
from langgraph_durable.core.items import MANIFEST_TYPE
from langgraph_durable.core.ops import BulkWrite
from langgraph_durable.core.schema import ITEMS_VERSION
from langgraph_durable.durable import inline
from langgraph_durable.errors import CorruptRecordError
from langgraph_durable.io.drivers import execute_sync, run_sync, run_with
from langgraph_durable.plans import migrations as M
from langgraph_durable.testing import unique_options

from .write_forms import ungroup


@pytest.fixture(autouse=True)
def _values_in_blobs_documents(monkeypatch: pytest.MonkeyPatch) -> None:
    """The data these tests migrate predates inline channel values: every value a blobs
    document (``durable/inline.py``; the in-process flusher reads the bound per call)."""
    monkeypatch.setattr(inline, "INLINE_MAX_BYTES", -1)

TURNS = 30
DEFAULT = "default"


def _history(saver: DurableSaver, thread: str) -> list[Any]:
    return [(t.config, t.checkpoint, t.metadata, t.parent_config, t.pending_writes)
            for t in saver.list({"configurable": {"thread_id": thread}})]


def _cold(saver: DurableSaver, *threads: str) -> None:
    """Drop the threads' Redis keys: reads come from MongoDB alone."""
    r = saver.sync_clients.redis
    for tid in threads:
        r.delete(*saver.context.keys(tid).all)
        saver.context.items.forget(tid)


def _ask_graph(saver: Any) -> Any:
    """START -> ask (interrupts; a special-channel write holding a list) -> END."""
    def ask(state: MessagesState) -> dict[str, Any]:
        answer = interrupt({"question": "go on?"})
        return {"messages": [AIMessage(f"answer {answer}", id="ask-answer")]}

    b = StateGraph(MessagesState)
    b.add_node("ask", ask)
    b.add_edge(START, "ask")
    return b.compile(checkpointer=saver)


def _mongo_bytes(saver: DurableSaver, mongo_url: str) -> int:
    cfg = saver.context.config
    return int(mongo_bson_bytes(mongo_url, cfg.database, cfg.collection_prefix)["bytes"])


def _list_docs(saver: DurableSaver) -> dict[str, int]:
    """Documents holding a ``messages`` list or the interrupt list, counted apart from the
    conversion: every messages blob that is not empty, every write to ``messages`` and
    every ``__interrupt__`` write."""
    db, cols = saver.sync_clients.db, saver.context.collections
    return {"blobs": db[cols.blobs].count_documents(
                {"channel": "messages", "type": {"$ne": "empty"}}),
            "writes": db[cols.writes].count_documents(
                {"channel": {"$in": ["messages", "__interrupt__"]}})}


def test_whole_lists_become_manifests_resumably_and_reads_do_not_change(
        redis_url: str, mongo_url: str) -> None:
    opts = unique_options()
    with DurableSaver.from_urls(redis_url, mongo_url, list_items=False, **opts) as old:
        graphs.build_conversation(old, TURNS).invoke(
            graphs.conversation_input(),
            {"configurable": {"thread_id": "conv"}, "recursion_limit": 2 * TURNS + 10})
        ask = _ask_graph(old)
        cfg = {"configurable": {"thread_id": "ask"}}
        ask.invoke({"messages": [HumanMessage("start", id="ask-h")]}, cfg)
        old.flush()
        ungroup(old)  # the release before items stored one document per write
        _cold(old, "conv", "ask")
        before = {t: _history(old, t) for t in ("conv", "ask")}
        db, cols = old.sync_clients.db, old.context.collections
        assert db[cols.items].count_documents({}) == 0
        interrupt_doc = db[cols.writes].find_one({"channel": "__interrupt__"})
        assert interrupt_doc is not None and interrupt_doc["idx"] == -3
        lists = _list_docs(old)
        bytes_before = _mongo_bytes(old, mongo_url)
        # reads the same through the conversion's own decoding (one doc per kind, dry)
        assert run_sync(IM.remaining_plan(old.context), old.sync_clients) == (
            db[cols.blobs].count_documents({"type": {"$nin": list(IM.NEVER_LISTS)}})
            + db[cols.writes].count_documents({"type": {"$nin": list(IM.NEVER_LISTS)}}))
        # the item store disabled: nothing to convert into
        got = run_sync(IM.convert_lists_plan(old.context), old.sync_clients)
        assert got.converted == {"blobs": 0, "writes": 0} and got.items == 0

    with DurableSaver.from_urls(redis_url, mongo_url, **opts) as saver:
        ctx, clients = saver.context, saver.sync_clients
        db = clients.db
        dry = run_sync(IM.convert_lists_plan(ctx, dry_run=True), clients)
        assert dry.converted == lists and dry.items == 0
        assert db[cols.items].count_documents({}) == 0
        assert db[cols.meta].count_documents({"_id": {"$regex": "^migration:lists"}}) == 0

        seen: list[tuple[str, int]] = []
        began = time.perf_counter()
        first = run_sync(IM.convert_lists_plan(ctx, batch_size=10, max_batches=3,
                                               on_batch=lambda k, n: seen.append((k, n))),
                         clients)
        assert not first.finished and seen == [("blobs", 10)] * 3
        assert db[cols.meta].find_one({"_id": IM.cursor_id("blobs")}) is not None
        rest = run_sync(IM.convert_lists_plan(ctx, batch_size=10,
                                              on_batch=lambda k, n: seen.append((k, n))),
                        clients)
        took = time.perf_counter() - began  # printed, not asserted
        assert rest.finished
        assert {k: first.converted[k] + rest.converted[k] for k in lists} == lists
        assert sum(n for _, n in seen) == dry.examined["blobs"] + dry.examined["writes"]
        assert db[cols.meta].count_documents({"_id": {"$regex": "^migration:lists"}}) == 0

        # MongoDB: exactly those documents are manifests, over 1 + 2 * TURNS messages
        # (+ the ask thread's HumanMessage and its Interrupt) and one node per thread
        # whose lists passed 32 messages
        manifests = {k: db[getattr(cols, k)].count_documents({"type": MANIFEST_TYPE})
                     for k in lists}
        assert manifests == lists
        assert db[cols.blobs].count_documents({"type": MANIFEST_TYPE,
                                               "v": {"$ne": ITEMS_VERSION}}) == 0
        items = {t: db[cols.items].count_documents({"thread_id": t}) for t in ("conv", "ask")}
        assert items == {"conv": 1 + 2 * TURNS + 1, "ask": 2}
        assert first.items + rest.items >= sum(items.values())
        after = db[cols.writes].find_one({"_id": interrupt_doc["_id"]})
        assert after is not None and after["type"] == MANIFEST_TYPE and len(after["refs"]) == 1
        assert (after["seq"], after["put_ms"], after["idx"]) == (
            interrupt_doc["seq"], interrupt_doc["put_ms"], -3)

        _cold(saver, "conv", "ask")
        assert {t: _history(saver, t) for t in ("conv", "ask")} == before
        bytes_after = _mongo_bytes(saver, mongo_url)
        print(f"\n30-turn agent thread (+ ask thread): MongoDB {bytes_before} bytes with "
              f"whole lists, {bytes_after} bytes with manifests; converted in {took:.2f} s")
        assert bytes_after * 5 < bytes_before

        # idempotent, also driven by run_async; the schema pass sees no newer documents
        async def again() -> Any:
            async with DurableSaver.from_urls(redis_url, mongo_url, **opts) as a:
                return await a.arun(IM.convert_lists_plan(a.context))

        second = asyncio.run(again())
        assert second.converted == {"blobs": 0, "writes": 0} and second.items == 0
        assert second.examined["blobs"] > 0  # read again, left alone
        assert run_sync(M.migrate_plan(ctx), clients) == dict.fromkeys(M.KINDS, 0)

        # the converted items are the saver's own: resuming the interrupted thread (hot
        # emptied) stores only its new values
        ask = _ask_graph(saver)
        ask.invoke(Command(resume="yes"), {"configurable": {"thread_id": "ask"}})
        saver.flush()
        # + the AIMessage and the resume value (LangGraph writes ["yes"] to __resume__);
        # the HumanMessage and the Interrupt were not stored again
        assert db[cols.items].count_documents({"thread_id": "ask"}) == 4
        assert [m.content for m in ask.get_state(
            {"configurable": {"thread_id": "ask"}}).values["messages"]] == [
                "start", "answer yes"]


def test_a_document_changed_since_it_was_read_is_left_alone(
        redis_url: str, mongo_url: str) -> None:
    """A special-channel write overwritten (new ``seq``) between the conversion's read and
    its replace keeps the newer value; the next run converts it."""
    opts = unique_options()
    with DurableSaver.from_urls(redis_url, mongo_url, list_items=False, **opts) as old:
        _ask_graph(old).invoke({"messages": [HumanMessage("start", id="ask-h")]},
                               {"configurable": {"thread_id": "ask"}})
        old.flush()
        ungroup(old)  # the release before items stored one document per write
    with DurableSaver.from_urls(redis_url, mongo_url, **opts) as saver:
        db, cols = saver.sync_clients.db, saver.context.collections
        target = db[cols.writes].find_one({"channel": "__interrupt__"})
        assert target is not None

        def execute(op: Any) -> Any:
            if isinstance(op, BulkWrite) and op.collection == cols.writes:
                db[cols.writes].update_one({"_id": target["_id"]},
                                           {"$set": {"seq": target["seq"] + 1}})
            return execute_sync(op, saver.sync_clients)

        got = run_with(IM.convert_lists_plan(saver.context), execute)
        # the messages blob and write converted; the interrupt write left alone
        assert got.converted == {"blobs": 1, "writes": 1}
        assert db[cols.writes].find_one({"channel": "messages"})["type"] == MANIFEST_TYPE
        doc = db[cols.writes].find_one({"_id": target["_id"]})
        assert doc is not None and doc["type"] == target["type"]
        assert doc["seq"] == target["seq"] + 1
        again = run_sync(IM.convert_lists_plan(saver.context), saver.sync_clients)
        assert again.converted == {"blobs": 0, "writes": 1}


def test_an_undecodable_value_is_named_and_nothing_after_it_written(
        redis_url: str, mongo_url: str) -> None:
    kind = "blobs"
    opts = unique_options()
    with DurableSaver.from_urls(redis_url, mongo_url, list_items=False, **opts) as old:
        _ask_graph(old).invoke({"messages": [HumanMessage("start", id="ask-h")]},
                               {"configurable": {"thread_id": "ask"}})
        old.flush()
        ungroup(old)  # the release before items stored one document per write
    with DurableSaver.from_urls(redis_url, mongo_url, **opts) as saver:
        db, cols = saver.sync_clients.db, saver.context.collections
        bad = db[getattr(cols, kind)].find_one({"channel": "messages",
                                                "type": {"$ne": "empty"}})
        assert bad is not None
        db[getattr(cols, kind)].update_one({"_id": bad["_id"]},
                                           {"$set": {"data": b"\xc1 not msgpack"}})
        with pytest.raises(CorruptRecordError) as err:
            run_sync(IM.convert_lists_plan(saver.context, batch_size=1000),
                     saver.sync_clients)
        assert repr(bad["_id"]) in str(err.value) and "'ask'" in str(err.value)
        assert db[cols.items].count_documents({}) == 0
        assert db[cols.blobs].count_documents({"type": MANIFEST_TYPE}) == 0
