"""Small channel values inside the checkpoint document that introduced them
(``durable/inline.py``): what the flusher writes, that every read finds a value in either
place (a blobs document, the form before; a ``vals`` entry of an older checkpoint) hot and
cold, sync and async, and that prune, ``delete_for_runs``, ``copy_thread`` and both
collectors (items, external objects) keep the values other checkpoints still name."""

from __future__ import annotations

import re
from typing import Any

import pytest
from langgraph.checkpoint.base import empty_checkpoint
from langgraph.checkpoint.memory import InMemorySaver

from benchmarks import graphs
from langgraph_durable import DurableSaver
from langgraph_durable.core.schema import INLINE_VERSION, NEWEST_DOCUMENT_VERSION
from langgraph_durable.durable import documents as D
from langgraph_durable.durable import inline
from langgraph_durable.errors import CorruptRecordError, SchemaVersionError
from langgraph_durable.testing import drop_key_prefix, unique_options

BIG = "x" * (inline.INLINE_MAX_BYTES + 500)
"""A value too big for a checkpoint document: a blobs document of its own."""


def cfg(tid: str, **more: Any) -> Any:
    return {"configurable": {"thread_id": tid, "checkpoint_ns": "", **more}}


def put(saver: Any, config: Any, step: int, changed: dict[str, Any],
        values: dict[str, Any], versions: dict[str, str], run_id: str = "run-1") -> Any:
    """A checkpoint whose channels are ``values`` (``changed`` of them new at ``step``)."""
    values.update(changed)
    for ch in changed:
        versions[ch] = f"{step + 1:032}.0"
    cp = empty_checkpoint()
    cp["id"] = f"1ef00000-0000-6000-8000-{step:012}"
    cp["channel_values"] = dict(values)
    cp["channel_versions"] = dict(versions)
    return saver.put(config, cp, {"step": step, "run_id": run_id},
                     {ch: versions[ch] for ch in changed})


def thread_of(saver: Any, tid: str, steps: int = 6, start: int = 0,
              state: tuple[dict[str, Any], dict[str, str], Any] | None = None
              ) -> tuple[dict[str, Any], dict[str, str], Any]:
    """``steps`` checkpoints from ``start``: ``user`` set once at step 0 (every later
    checkpoint inherits it), ``big`` (a blobs document) at step 1, ``messages`` (a
    manifest) and ``n`` at every step; a pending write on each. ``state`` (values,
    versions, config) continues a chain; returns the state after the last."""
    values, versions, config = state or ({}, {}, cfg(tid))
    for step in range(start, start + steps):
        changed: dict[str, Any] = {"messages": [f"m{i}" for i in range(step + 1)], "n": step}
        if step == 0:
            changed["user"] = {"name": "ada", "id": 7}
        if step == 1:
            changed["big"] = BIG
        config = put(saver, config, step, changed, values, versions)
        saver.put_writes(config, [("n", step * 10)], f"task-{step}")
    return values, versions, config


def snapshot(saver: Any, tid: str) -> list[Any]:
    return [(t.config["configurable"]["checkpoint_id"], t.checkpoint["channel_values"],
             t.metadata, t.pending_writes) for t in saver.list(cfg(tid))]


async def asnapshot(saver: Any, tid: str) -> list[Any]:
    return [(t.config["configurable"]["checkpoint_id"], t.checkpoint["channel_values"],
             t.metadata, t.pending_writes) async for t in saver.alist(cfg(tid))]


def collections(saver: DurableSaver) -> tuple[Any, Any]:
    return saver.sync_clients.db, saver.context.collections


def test_small_values_go_inside_their_checkpoint_and_a_big_one_to_blobs(
        saver: DurableSaver) -> None:
    thread_of(saver, "t")
    saver.flush()
    db, cols = collections(saver)
    # the only blobs document: the value over INLINE_MAX_BYTES
    assert [(d["channel"], d["version"]) for d in db[cols.blobs].find({"thread_id": "t"})] \
        == [("big", f"{2:032}.0")]
    docs = list(db[cols.checkpoints].find({"thread_id": "t"}, sort=[("checkpoint_id", 1)]))
    assert {d["v"] for d in docs} == {INLINE_VERSION}
    first = {inline.split_key(e["k"])[0]: e for e in docs[0]["vals"]}
    assert sorted(first) == ["messages", "n", "user"]
    assert first["messages"]["type"] == "lgd.items" and len(first["messages"]["refs"]) == 1
    assert sorted(inline.split_key(e["k"])[0] for e in docs[1]["vals"]) == ["messages", "n"]
    assert inline.split_key(docs[1]["vals"][0]["k"])[1] == f"{2:032}.0"


def test_an_agent_loop_writes_no_blobs_documents(saver: DurableSaver) -> None:
    turns = 4
    graph = graphs.build_conversation(saver, turns)
    graph.invoke(graphs.conversation_input(0), {**cfg("agent"), "recursion_limit": 50})
    saver.flush()
    db, cols = collections(saver)
    checkpoints = db[cols.checkpoints].count_documents({"thread_id": "agent"})
    assert checkpoints == 2 * turns + 2
    assert db[cols.blobs].count_documents({}) == 0
    hot = graph.get_state(cfg("agent")).values
    drop_key_prefix(saver.sync_clients.redis, saver.config.key_prefix)
    assert graph.get_state(cfg("agent")).values == hot
    assert len(hot["messages"]) == 1 + 2 * turns


@pytest.mark.parametrize("older", ["blobs documents", "inside checkpoints"])
def test_old_and_new_forms_read_as_inmemorysaver_hot_and_cold(
        saver: DurableSaver, redis_client: Any, monkeypatch: pytest.MonkeyPatch,
        older: str) -> None:
    ref = InMemorySaver()
    if older == "blobs documents":  # the first half written as before inline values
        monkeypatch.setattr(inline, "INLINE_MAX_BYTES", -1)
    states = [thread_of(s, "t", steps=3) for s in (saver, ref)]
    saver.flush()
    monkeypatch.undo()
    db, cols = collections(saver)
    assert db[cols.blobs].count_documents({"thread_id": "t"}) == (
        8 if older == "blobs documents" else 1)  # 3 + 3 + 2 values; or big alone
    for s, state in zip((saver, ref), states):  # inherits user and big from the first half
        thread_of(s, "t", steps=3, start=3, state=state)
    expected = snapshot(ref, "t")
    assert snapshot(saver, "t") == expected  # hot
    saver.flush()
    drop_key_prefix(redis_client, saver.config.key_prefix)
    assert snapshot(saver, "t") == expected  # MongoDB alone
    for t in expected:  # each one on its own (one checkpoint: items joined in the round)
        got = saver.get_tuple(cfg("t", checkpoint_id=t[0]))
        assert (got.checkpoint["channel_values"], got.pending_writes) == (t[1], t[3])
    hist = saver.get_delta_channel_history(config=cfg("t"), channels=["n", "user"])
    assert hist == ref.get_delta_channel_history(config=cfg("t"), channels=["n", "user"])


async def test_the_async_api_reads_both_forms_cold(asaver: DurableSaver, redis_client: Any,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(inline, "INLINE_MAX_BYTES", -1)
    state = thread_of(asaver, "a", steps=2)
    await asaver.aflush()
    monkeypatch.undo()
    thread_of(asaver, "a", steps=2, start=2, state=state)  # goes on inline
    hot = await asnapshot(asaver, "a")
    await asaver.aflush()
    drop_key_prefix(redis_client, asaver.config.key_prefix)
    assert await asnapshot(asaver, "a") == hot
    latest = await asaver.aget_tuple(cfg("a"))
    assert latest is not None and latest.checkpoint["channel_values"] == hot[0][1]


def test_prune_keeps_the_values_a_kept_checkpoint_inherits(
        saver: DurableSaver, redis_client: Any) -> None:
    thread_of(saver, "p")
    expected = snapshot(saver, "p")[0]
    saver.prune(["p"], keep_last=1)
    db, cols = collections(saver)
    assert db[cols.checkpoints].count_documents({"thread_id": "p"}) == 1
    # user came inside the dropped first checkpoint: now a blobs document of its own
    assert sorted(d["channel"] for d in db[cols.blobs].find({"thread_id": "p"})) == [
        "big", "user"]
    drop_key_prefix(redis_client, saver.config.key_prefix)
    assert snapshot(saver, "p") == [expected]


def test_delete_for_runs_leaves_the_values_of_the_runs_after(
        saver: DurableSaver, redis_client: Any) -> None:
    values: dict[str, Any] = {}
    versions: dict[str, str] = {}
    config = put(saver, cfg("r"), 0, {"user": "ada", "n": 0}, values, versions, "run-1")
    put(saver, config, 1, {"n": 1}, values, versions, "run-2")
    saver.flush()
    saver.delete_for_runs(["run-1"])
    saver.flush()
    drop_key_prefix(redis_client, saver.config.key_prefix)
    (left,) = list(saver.list(cfg("r")))
    assert left.checkpoint["channel_values"] == {"user": "ada", "n": 1}


def test_copy_thread_copies_the_values_inside_checkpoints(
        saver: DurableSaver, redis_client: Any) -> None:
    thread_of(saver, "src", steps=3)
    expected = [t[1:] for t in snapshot(saver, "src")]
    saver.copy_thread("src", "dst")
    saver.flush()
    drop_key_prefix(redis_client, saver.config.key_prefix)
    assert [t[1:] for t in snapshot(saver, "dst")] == expected


def test_prune_collects_no_item_that_only_an_inline_manifest_names(
        saver: DurableSaver, redis_client: Any) -> None:
    thread_of(saver, "i")
    saver.prune(["i"], keep_last=1)
    db, cols = collections(saver)
    # the kept checkpoint's manifest (inside its document) names m0..m5: all kept
    assert db[cols.items].count_documents({"thread_id": "i"}) == 6
    drop_key_prefix(redis_client, saver.config.key_prefix)
    assert saver.get_tuple(cfg("i")).checkpoint["channel_values"]["messages"] == [
        f"m{i}" for i in range(6)]


def test_gc_sees_external_references_inside_checkpoint_documents(
        redis_url: str, mongo_url: str, redis_client: Any, tmp_path: Any) -> None:
    from langgraph_durable.admin.extref_gc import collect_saver_garbage, referenced_blob_keys
    from langgraph_durable.serde import ExternalRefSerializer, LocalBlobStore

    store = LocalBlobStore(tmp_path)
    serde = ExternalRefSerializer(store=store, threshold_bytes=100)
    with DurableSaver.from_urls(redis_url, mongo_url, serde=serde,
                                **unique_options()) as s:
        put(s, cfg("g"), 0, {"doc": "y" * 5000}, {}, {})
        s.flush()
        db, cols = collections(s)
        (doc,) = db[cols.checkpoints].find({"thread_id": "g"})
        assert [e["type"] for e in doc["vals"]] == ["extref"]  # the envelope, inline
        assert db[cols.blobs].count_documents({}) == 0
        hot = referenced_blob_keys(s)  # the value's object (and the checkpoint's: >100 B)
        drop_key_prefix(redis_client, s.config.key_prefix)  # MongoDB alone names them
        assert referenced_blob_keys(s) == hot and len(hot) == 2
        collect_saver_garbage(s, store, grace_period_s=0)
        assert {i.key for i in store.list_keys()} == hot  # nothing collected
        assert s.get_tuple(cfg("g")).checkpoint["channel_values"] == {"doc": "y" * 5000}


def test_a_checkpoint_document_of_a_newer_version_is_refused(
        saver: DurableSaver, redis_client: Any) -> None:
    thread_of(saver, "v", steps=1)
    saver.flush()
    db, cols = collections(saver)
    db[cols.checkpoints].update_many({"thread_id": "v"},
                                     {"$set": {"v": NEWEST_DOCUMENT_VERSION + 1}})
    drop_key_prefix(redis_client, saver.config.key_prefix)
    with pytest.raises(SchemaVersionError, match=f"schema version {NEWEST_DOCUMENT_VERSION + 1}"):
        saver.get_tuple(cfg("v"))


def test_a_malformed_inline_value_names_its_checkpoint_document() -> None:
    doc = {"_id": "x", "thread_id": "t", "checkpoint_ns": "", "checkpoint_id": "c",
           "vals": [{"k": "not-a-key", "type": "json", "data": b"1"}]}
    with pytest.raises(Exception, match=r"MongoDB checkpoints document 'x' .*vals"):
        inline.inline_values(doc)
    assert inline.split_key(D.doc_id("messages", "00.1")) == ("messages", "00.1")


def test_a_damaged_inline_value_is_named_with_its_checkpoint_on_a_cold_read(
        saver: DurableSaver, redis_client: Any) -> None:
    thread_of(saver, "d", steps=2)
    saver.flush()
    db, cols = collections(saver)
    first = db[cols.checkpoints].find_one({"thread_id": "d"}, sort=[("checkpoint_id", 1)])
    at = next(i for i, e in enumerate(first["vals"]) if e["k"].startswith("4:user|"))
    db[cols.checkpoints].update_one({"_id": first["_id"]},
                                    {"$set": {f"vals.{at}.data": "not binary"}})
    drop_key_prefix(redis_client, saver.config.key_prefix)
    with pytest.raises(CorruptRecordError,
                       match=rf"MongoDB checkpoints document '{re.escape(first['_id'])}' "
                             rf"\(thread 'd', ns '', checkpoint '{first['checkpoint_id']}'\)"):
        saver.get_tuple(cfg("d"))  # the latest inherits user from the first


def test_two_different_values_of_one_version_in_a_checkpoint_are_named_not_chosen(
        saver: DurableSaver, redis_client: Any) -> None:
    """A second ``vals`` entry of the same version with other bytes: which is the value
    cannot be told, so the read names the document instead of returning either one (the
    aggregate returned both and the last one read won, silently)."""
    thread_of(saver, "d", steps=2)
    thread_of(saver, "other", steps=1)
    saver.flush()
    db, cols = collections(saver)
    first = db[cols.checkpoints].find_one({"thread_id": "d"}, sort=[("checkpoint_id", 1)])
    entry = next(e for e in first["vals"] if e["k"].startswith("4:user|"))
    db[cols.checkpoints].update_one({"_id": first["_id"]}, {"$push": {"vals": {
        **entry, "data": saver.serde.dumps_typed({"name": "eve", "id": 8})[1]}}})
    drop_key_prefix(redis_client, saver.config.key_prefix)
    with pytest.raises(CorruptRecordError,
                       match=rf"MongoDB checkpoints document '{re.escape(first['_id'])}' .*"
                             r"is damaged: field 'vals' holds two different values of "
                             r"'user' version"):
        saver.get_tuple(cfg("d"))  # the latest inherits user from the first
    with pytest.raises(CorruptRecordError, match="two different values of 'user'"):
        inline.inline_values(db[cols.checkpoints].find_one({"_id": first["_id"]}))
    assert saver.get_tuple(cfg("other")) is not None
    # the same entry twice (a replayed write adds nothing new) is one value
    db[cols.checkpoints].update_one({"_id": first["_id"]}, {"$pull": {"vals": {
        "k": entry["k"]}}})
    db[cols.checkpoints].update_one({"_id": first["_id"]},
                                    {"$push": {"vals": {"$each": [entry, entry]}}})
    assert saver.get_tuple(cfg("d")).checkpoint["channel_values"]["user"] == {
        "name": "ada", "id": 7}
