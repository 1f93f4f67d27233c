"""One MongoDB writes document per ``put_writes`` call (``durable/write_groups.py``).

Old data (one document per write), new data (one per call) and both mixed, even within
one checkpoint and one task, read as InMemorySaver answers, hot and cold, sync and async;
LangGraph's insert-once and newest-wins rules hold across calls and across a flusher's
re-copy; the operations that read writes documents (prune and its item collection,
delete_for_runs, copy_thread, export/import, blob-store gc) see both forms; a newer
version is refused.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage
from langgraph.checkpoint.base import empty_checkpoint
from langgraph.checkpoint.memory import InMemorySaver

from langgraph_durable import DurableSaver
from langgraph_durable.core.records import write_field
from langgraph_durable.core.schema import WRITES_GROUP_VERSION
from langgraph_durable.errors import SchemaVersionError
from langgraph_durable.io.drivers import run_sync
from langgraph_durable.outbox.flusher import consumer_name, flush_batch_plan
from langgraph_durable.testing import unique_options

from .cli.clikit import Cli
from .graphs import build_agent
from .write_forms import ungroup

ERROR, INTERRUPT = "__error__", "__interrupt__"  # special channels (WRITES_IDX_MAP)
THREAD = "w"
CFG: Any = {"configurable": {"thread_id": THREAD, "checkpoint_ns": ""}}

CALLS: list[tuple[list[tuple[str, Any]], str, str]] = [
    ([("a", 1), ("messages", [AIMessage("hi", id="ai-1")])], "task-1", ""),
    ([("a", 99), ("c", 3)], "task-1", ""),  # (task-1, 0) and (task-1, 1) stay: insert-once
    ([(ERROR, "first error")], "task-2", ""),
    ([(INTERRUPT, "first interrupt"), ("b", 2)], "task-3", "path-3"),
    ([(ERROR, "second error")], "task-2", ""),  # a special channel: the newest wins
    ([(INTERRUPT, "second interrupt"), ("b", 5)], "task-3", "path-3"),
    ([("d", [HumanMessage("x", id="h-1"), AIMessage("y", id="ai-2")])], "task-4", "p4"),
]
"""put_writes calls on one checkpoint: (writes, task_id, task_path)."""


def _checkpoint(n: int) -> Any:
    cp = empty_checkpoint()
    cp["channel_values"] = {"count": n}
    cp["channel_versions"] = {"count": f"{n:032}.0"}
    return cp


def _puts(saver: Any, upto: int = 2) -> list[Any]:
    """Two checkpoints (the second the child of the first); returns their configs."""
    cfg, out = CFG, []
    for n in range(1, upto + 1):
        cfg = saver.put(cfg, _checkpoint(n), {"step": n}, {"count": f"{n:032}.0"})
        out.append(cfg)
    return out


def _reference() -> tuple[Any, list[Any]]:
    """What InMemorySaver answers for ``CALLS`` on the first of two checkpoints."""
    mem = InMemorySaver()
    first, second = _puts(mem)
    for writes, task, path in CALLS:
        mem.put_writes(first, writes, task, path)
    return _answer(mem, first, second)


def _answer(saver: Any, first: Any, second: Any) -> tuple[Any, list[Any]]:
    tup = saver.get_tuple(first)
    return (sorted(tup.pending_writes), [sorted(t.pending_writes) for t in saver.list(CFG)])


async def _aanswer(saver: Any, first: Any) -> tuple[Any, list[Any]]:
    tup = await saver.aget_tuple(first)
    return (sorted(tup.pending_writes),
            [sorted(t.pending_writes) async for t in saver.alist(CFG)])


def _cold(saver: DurableSaver) -> None:
    """Drop the thread's Redis keys: reads come from MongoDB alone."""
    saver.sync_clients.redis.delete(*saver.context.keys(THREAD).all)
    saver.context.items.forget(THREAD)


def _write(saver: DurableSaver, form: str, flush: bool = True) -> tuple[Any, Any]:
    """``CALLS`` stored in MongoDB in ``form``: ``new`` (a document per call), ``old``
    (a document per write), ``mixed`` (the first three calls per write, flushed and
    rewritten before the others are made, so one task and one special channel have
    documents of both forms). ``flush=False`` (form ``new``, a saver with
    ``flusher="off"``): the calls stay in the outbox."""
    first, second = _puts(saver)
    for n, (writes, task, path) in enumerate(CALLS):
        saver.put_writes(first, writes, task, path)
        if form == "mixed" and n == 2:
            _drain(saver)
            assert ungroup(saver, THREAD) == 3  # a, messages (c stayed out), the error
    if not flush:
        return first, second
    _drain(saver)
    if form == "old":
        ungroup(saver, THREAD)
    return first, second


def _drain(saver: DurableSaver) -> None:
    """Flush the outbox: by rounds run here on a saver with ``flusher="off"`` (the
    document counts then follow the calls alone: a background round between two calls
    would store what Redis held then, one document more), else ``flush()``."""
    if saver.config.flusher == "off":
        while _flush_round(saver):
            pass
    else:
        saver.flush()


def _forms(saver: DurableSaver) -> dict[str, int]:
    db, cols = saver.sync_clients.db, saver.context.collections
    return {"grouped": db[cols.writes].count_documents({"v": WRITES_GROUP_VERSION}),
            "per write": db[cols.writes].count_documents({"idx": {"$exists": True}})}


@pytest.mark.parametrize("form", ["new", "old", "mixed"])
def test_old_new_and_mixed_forms_read_as_inmemorysaver_hot_and_cold(
        redis_url: str, mongo_url: str, form: str) -> None:
    expected = _reference()
    assert expected[0][:3] == [("task-1", "a", 1),
                               ("task-1", "messages", [AIMessage("hi", id="ai-1")]),
                               ("task-2", ERROR, "second error")]
    with DurableSaver.from_urls(redis_url, mongo_url, **unique_options(flusher="off")) as saver:
        first, second = _write(saver, form)
        # per call: what Redis held at the flush, under the seq of the call that wrote
        # it (task-3's newer interrupt and its first call's "b" are two documents)
        assert _forms(saver) == {"new": {"grouped": 5, "per write": 0},
                                 "old": {"grouped": 0, "per write": 6},
                                 "mixed": {"grouped": 4, "per write": 3}}[form]
        assert _answer(saver, first, second) == expected  # hot
        _cold(saver)
        assert _answer(saver, first, second) == expected  # MongoDB alone
        assert saver.last_read_tier == "durable"


@pytest.mark.parametrize("form", ["new", "old", "mixed"])
async def test_old_new_and_mixed_forms_read_the_same_with_the_async_api(
        redis_url: str, mongo_url: str, form: str) -> None:
    expected = _reference()
    opts = unique_options()
    with DurableSaver.from_urls(redis_url, mongo_url, **opts) as saver:
        first, _second = _write(saver, form)
        hot = await _aanswer(saver, first)
        _cold(saver)
    async with DurableSaver.from_urls(redis_url, mongo_url, **opts) as asaver:
        assert await _aanswer(asaver, first) == hot == expected


def test_one_writes_document_per_put_writes_call_in_an_agent_loop(
        redis_url: str, mongo_url: str) -> None:
    with DurableSaver.from_urls(redis_url, mongo_url, **unique_options()) as saver:
        calls: list[tuple[str, int]] = []
        put_writes = saver.put_writes

        def counting(config: Any, writes: Any, task_id: str, task_path: str = "") -> None:
            if writes:
                calls.append((task_id, len(writes)))
            put_writes(config, writes, task_id, task_path)

        saver.put_writes = counting  # type: ignore[method-assign]
        graph = build_agent(saver)
        cfg = {"configurable": {"thread_id": "agent"}}
        graph.invoke({"messages": [HumanMessage("2+3?", id="h-1")]}, cfg)
        graph.invoke({"messages": [HumanMessage("4*5 and 1+1?", id="h-2")]}, cfg)
        saver.flush()
        db, cols = saver.sync_clients.db, saver.context.collections
        docs = list(db[cols.writes].find({"thread_id": "agent"}))
        assert len(calls) >= 8  # input, agent and tools steps of two turns
        assert len(docs) == len(calls)  # one document per call
        assert sorted((d["task_id"], len(d["writes"])) for d in docs) == sorted(calls)
        assert {d["v"] for d in docs} == {WRITES_GROUP_VERSION}
        before = graph.get_state(cfg)
        saver.sync_clients.redis.delete(*saver.context.keys("agent").all)
        saver.context.items.forget("agent")
        assert graph.get_state(cfg) == before


def _flush_round(saver: DurableSaver) -> int:
    return run_sync(flush_batch_plan(saver.context, consumer_name(), block_ms=0,
                                     claim=False), saver.sync_clients).entries


def test_insert_once_and_newest_wins_hold_across_a_flusher_re_copy(
        redis_url: str, mongo_url: str) -> None:
    expected = _reference()
    with DurableSaver.from_urls(redis_url, mongo_url,
                                **unique_options(flusher="off")) as saver:
        r = saver.sync_clients.redis
        first, second = _puts(saver)
        entries = []
        for writes, task, path in CALLS:
            saver.put_writes(first, writes, task, path)
            entries += r.xrange(saver.context.outbox)[-1:]
            while _flush_round(saver):  # each call flushed before the next one
                pass
        db, cols = saver.sync_clients.db, saver.context.collections
        stored = sorted(db[cols.writes].find(), key=lambda d: d["_id"])
        assert len(stored) == len(CALLS) - 1  # the second call of task-1 stored nothing new
        for _, fields in entries * 2:  # every put_writes entry delivered twice more, after
            r.xadd(saver.context.outbox, fields)  # newer values replaced the older ones
        assert _flush_round(saver) == 2 * len(CALLS)
        assert sorted(db[cols.writes].find(), key=lambda d: d["_id"]) == stored
        assert _answer(saver, first, second) == expected
        _cold(saver)
        assert _answer(saver, first, second) == expected


def _messages_of(saver: DurableSaver, cfg: Any) -> Any:
    return sorted(saver.get_tuple(cfg).pending_writes)


def test_prune_keeps_the_items_grouped_writes_name_and_removes_the_dropped_ones(
        redis_url: str, mongo_url: str) -> None:
    with DurableSaver.from_urls(redis_url, mongo_url, **unique_options()) as saver:
        first, second = _puts(saver)
        saver.put_writes(first, [("m", [AIMessage("old", id="ai-old")])], "t-old")
        saver.put_writes(second, [("m", [AIMessage("kept", id="ai-kept")]), ("n", 1)],
                         "t-new")
        saver.flush()
        ungroup(saver, THREAD, "t-old")  # the dropped checkpoint's writes in the old form
        db, cols = saver.sync_clients.db, saver.context.collections
        assert db[cols.items].count_documents({}) == 2
        expected = _messages_of(saver, second)
        saver.prune([THREAD], strategy="keep_latest")
        assert db[cols.writes].count_documents({}) == 1  # the kept checkpoint's call
        assert db[cols.items].count_documents({}) == 1  # "kept" is named by a grouped write
        _cold(saver)
        assert _messages_of(saver, second) == expected == [
            ("t-new", "m", [AIMessage("kept", id="ai-kept")]), ("t-new", "n", 1)]


def test_delete_for_runs_and_copy_thread_see_both_forms(redis_url: str,
                                                        mongo_url: str) -> None:
    expected = _reference()
    with DurableSaver.from_urls(redis_url, mongo_url, **unique_options(flusher="off")) as saver:
        first, second = _write(saver, "mixed")
        saver.copy_thread(THREAD, "copy")
        db, cols = saver.sync_clients.db, saver.context.collections
        assert db[cols.writes].count_documents({"thread_id": "copy"}) == 7
        copied = {"configurable": {**first["configurable"], "thread_id": "copy"}}
        assert sorted(saver.get_tuple(copied).pending_writes) == expected[0]
        saver.put({"configurable": {"thread_id": "runs", "checkpoint_ns": ""}},
                  _checkpoint(1), {"run_id": "r1"}, {"count": f"{1:032}.0"})
        run = saver.get_tuple({"configurable": {"thread_id": "runs"}}).config
        saver.put_writes(run, [("a", 1), ("b", 2)], "t")
        saver.put_writes(run, [(ERROR, "boom")], "t")
        _drain(saver)
        ungroup(saver, "runs", "t")  # ... and both forms in one checkpoint
        saver.put_writes(run, [(ERROR, "boom again")], "t")
        _drain(saver)
        assert db[cols.writes].count_documents({"thread_id": "runs"}) == 4
        saver.delete_for_runs(["r1"])
        assert db[cols.writes].count_documents({"thread_id": "runs"}) == 0
        assert saver.get_tuple({"configurable": {"thread_id": "runs"}}) is None
        assert _answer(saver, first, second) == expected  # the other thread untouched


def test_export_and_import_carry_both_forms(redis_url: str, mongo_url: str,
                                            tmp_path: Path) -> None:
    expected = _reference()
    cli = Cli(redis_url, mongo_url)
    with cli.saver() as saver:
        first, second = _write(saver, "mixed")
    path = tmp_path / "w.jsonl"
    cli("export", THREAD, "--output", str(path))
    writes = [line for line in path.read_text().splitlines() if '"type": "write"' in line]
    assert len(writes) == 6  # each (task, idx) once, whichever document held it
    cli("import", str(path), "--thread", "imported")
    with cli.saver() as saver:
        db, cols = saver.sync_clients.db, saver.context.collections
        assert db[cols.writes].count_documents(
            {"thread_id": "imported", "v": WRITES_GROUP_VERSION}) == 5  # one per call
        moved = {"configurable": {**first["configurable"], "thread_id": "imported"}}
        assert sorted(saver.get_tuple(moved).pending_writes) == expected[0]


def test_a_writes_document_of_a_newer_version_is_refused(redis_url: str,
                                                         mongo_url: str) -> None:
    with DurableSaver.from_urls(redis_url, mongo_url, **unique_options()) as saver:
        first, _second = _write(saver, "new")
        db, cols = saver.sync_clients.db, saver.context.collections
        doc = db[cols.writes].find_one({"task_id": "task-4"})
        db[cols.writes].update_one({"_id": doc["_id"]}, {"$set": {"v": 7}})
        _cold(saver)
        with pytest.raises(SchemaVersionError, match=r"schema version 7, newer than 6"):
            saver.get_tuple(first)


def _move_last(saver: DurableSaver, query: dict[str, Any]) -> None:
    """Delete and insert again the writes documents ``query`` names: MongoDB returns
    them after the others (natural order)."""
    col = saver.sync_clients.db[saver.context.collections.writes]
    docs = list(col.find(query))
    col.delete_many({"_id": {"$in": [d["_id"] for d in docs]}})
    col.insert_many(docs)


@pytest.mark.parametrize("last", ["winners", "losers"])
def test_the_rule_holds_whatever_order_mongodb_returns_the_documents_in(
        redis_url: str, mongo_url: str, last: str) -> None:
    """Two calls' documents for one ``(task, idx)``: an ordinary write Redis lost between
    them (evicted: the second call stored it again) keeps the first call's value, as
    InMemorySaver (which never lost it) does; a special channel the newest call's."""
    with DurableSaver.from_urls(redis_url, mongo_url, **unique_options()) as saver:
        (first,) = _puts(saver, 1)
        cid = first["configurable"]["checkpoint_id"]
        saver.put_writes(first, [("a", 1)], "t")
        saver.put_writes(first, [(ERROR, "e1")], "u")
        saver.flush()
        saver.sync_clients.redis.hdel(saver.context.keys(THREAD).w,
                                      write_field("", cid, "t", 0))  # evicted
        saver.put_writes(first, [("a", 2)], "t")
        saver.put_writes(first, [(ERROR, "e2")], "u")
        saver.flush()
        col = saver.sync_clients.db[saver.context.collections.writes]
        seqs = {t: sorted(d["seq"] for d in col.find({"task_id": t})) for t in "tu"}
        assert [len(s) for s in seqs.values()] == [2, 2]
        winners = [{"task_id": "t", "seq": seqs["t"][0]}, {"task_id": "u", "seq": seqs["u"][1]}]
        losers = [{"task_id": "t", "seq": seqs["t"][1]}, {"task_id": "u", "seq": seqs["u"][0]}]
        for q in winners if last == "winners" else losers:
            _move_last(saver, q)
        _cold(saver)
        assert sorted(saver.get_tuple(first).pending_writes) == [("t", "a", 1),
                                                                 ("u", ERROR, "e2")]


def test_copy_thread_replaces_the_pending_writes_of_the_checkpoints_it_copies(
        redis_url: str, mongo_url: str) -> None:
    """A copied checkpoint's pending writes on the target are the source's, whatever
    the target held of that checkpoint before (its own calls since an earlier copy,
    newer or of other tasks, go): seqs of two threads are not compared."""
    with DurableSaver.from_urls(redis_url, mongo_url, **unique_options()) as saver:
        first, _second = _puts(saver)
        saver.put_writes(first, [(ERROR, "source error")], "task-1")
        saver.put_writes(first, [("a", 1)], "task-2")
        saver.copy_thread(THREAD, "copy")
        copied: Any = {"configurable": {**first["configurable"], "thread_id": "copy"}}
        saver.put_writes(copied, [(ERROR, "target error")], "task-1")  # newer than the source's
        saver.put_writes(copied, [("b", 2)], "task-3")  # a task the source never ran
        saver.flush()
        saver.copy_thread(THREAD, "copy")  # again: the target's first is the source's again
        expected = [("task-1", ERROR, "source error"), ("task-2", "a", 1)]
        assert sorted(saver.get_tuple(first).pending_writes) == expected
        assert sorted(saver.get_tuple(copied).pending_writes) == expected
        db, cols = saver.sync_clients.db, saver.context.collections
        assert db[cols.writes].count_documents({"thread_id": "copy"}) == 2
        saver.sync_clients.redis.delete(*saver.context.keys("copy").all)
        saver.context.items.forget("copy")
        assert sorted(saver.get_tuple(copied).pending_writes) == expected
