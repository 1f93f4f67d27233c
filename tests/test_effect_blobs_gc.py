"""The collector keeps what only the effect journal names: a ``once()`` whose result is a
DataFrame (stored in the blob store by ``ExternalRefSerializer``), then ``interrupt()``
waiting past the grace period, then ``gc``: the resume returns the journaled frame
without running the effect again, whether the journal is in Redis or in MongoDB alone;
once the thread is deleted, the frame is collected.

The grace period is 0 and ``now`` a few seconds ahead, instead of waiting an hour."""

from __future__ import annotations

import time
import uuid
from pathlib import Path
from typing import Any

import pytest
import redis
from langgraph.checkpoint.base import empty_checkpoint
from langgraph.types import Command

from langgraph_durable import DurableSaver
from langgraph_durable.admin.extref_gc import referenced_blob_keys, storage_footprint
from langgraph_durable.hot.keys import prefix_pattern, thread_keys_of
from langgraph_durable.serde import refs_in
from langgraph_durable.testing import unique_options, wait_for

from .frame_effects import ROWS, Loads, frame, load_then_ask, serde


def _key_of_frame(saver: DurableSaver) -> str:
    (key,) = refs_in(*saver.serde.dumps_typed(frame()))
    return key


def _stored(saver: DurableSaver) -> set[str]:
    return {info.key for info in saver.serde.store.list_keys()}


def _config() -> dict[str, Any]:
    return {"configurable": {"thread_id": f"fx-{uuid.uuid4().hex[:8]}"}}


def test_gc_keeps_a_frame_only_the_effect_journal_in_redis_names(
        redis_url: str, mongo_url: str, tmp_path: Path) -> None:
    loads, config = Loads(), _config()
    with DurableSaver.from_urls(redis_url, mongo_url, serde=serde(tmp_path / "blobs"),
                                **unique_options()) as saver:
        graph = load_then_ask(saver, loads)
        first = graph.invoke({"rows": 0}, config)
        assert first["__interrupt__"][0].value == "use it?" and loads.calls == 1
        key = _key_of_frame(saver)
        assert referenced_blob_keys(saver) == {key}  # named by the journal alone
        report = saver.gc(grace_period_s=0, now=time.time() + 5)
        assert (report.deleted, report.kept_referenced) == ([], 1)
        assert key in _stored(saver)
        done = graph.invoke(Command(resume="yes"), config)
        assert loads.calls == 1  # journaled as done: not called again
        assert (done["rows"], done["answer"]) == (ROWS, "yes")
        assert done["total"] == pytest.approx(float(frame()["x"].sum()))

        saver.delete_thread(config["configurable"]["thread_id"])  # its journal goes too
        report = saver.gc(grace_period_s=0, now=time.time() + 5)
        assert report.deleted == [key] and key not in _stored(saver)


def test_gc_keeps_a_frame_the_effect_journal_in_mongodb_alone_names(
        redis_url: str, mongo_url: str, tmp_path: Path, redis_client: redis.Redis) -> None:
    loads, config = Loads(), _config()
    tid = config["configurable"]["thread_id"]
    with DurableSaver.from_urls(redis_url, mongo_url, serde=serde(tmp_path / "blobs"),
                                **unique_options(hot_ttl_s=1)) as saver:
        graph = load_then_ask(saver, loads)
        graph.invoke({"rows": 0}, config)
        saver.flush()
        keys = saver.context.keys(tid)
        # flushed: the thread's keys and its journal expire from Redis (hot_ttl_s)
        wait_for(lambda: not redis_client.exists(keys.fx, *keys.all), 10,
                 "the thread's Redis keys to expire")
        journal = saver.sync_clients.db[saver.context.collections.effects]
        assert [d["state"] for d in journal.find({"thread_id": tid})] == ["done"]
        key = _key_of_frame(saver)
        assert referenced_blob_keys(saver) == {key}
        assert storage_footprint(saver).mongo_docs["effects"] == 1
        report = saver.gc(grace_period_s=0, now=time.time() + 5)
        assert (report.deleted, report.kept_referenced) == ([], 1)
        done = graph.invoke(Command(resume="later"), config)
    assert loads.calls == 1
    assert (done["rows"], done["answer"]) == (ROWS, "later")


async def test_agc_keeps_the_frame_of_an_effect_journal(
        redis_url: str, mongo_url: str, tmp_path: Path) -> None:
    loads, config = Loads(), _config()
    async with DurableSaver.from_urls(redis_url, mongo_url, serde=serde(tmp_path / "blobs"),
                                      **unique_options()) as saver:
        graph = load_then_ask(saver, loads)
        await graph.ainvoke({"rows": 0}, config)
        report = await saver.agc(grace_period_s=0, now=time.time() + 5)
        assert (report.deleted, report.kept_referenced) == ([], 1)
        done = await graph.ainvoke(Command(resume="yes"), config)
    assert loads.calls == 1 and done["rows"] == ROWS


def test_every_key_and_collection_the_saver_stores_is_classified(
        redis_url: str, mongo_url: str, tmp_path: Path, redis_client: redis.Redis) -> None:
    """Live twin of ``tests/unit/test_referrers.py``: after checkpoints, list items,
    pending writes and an effect journal are stored and flushed, every Redis key under the
    prefix and every MongoDB collection of the database is known to
    ``admin/referrers.py`` (a referrer, or listed as holding no serialized value)."""
    from langgraph_durable.admin import referrers as R
    loads, config = Loads(), _config()
    with DurableSaver.from_urls(redis_url, mongo_url, serde=serde(tmp_path / "blobs"),
                                **unique_options(outbox_partitions=2)) as saver:
        load_then_ask(saver, loads).invoke({"rows": 0}, config)
        cp = empty_checkpoint()
        cp["channel_values"] = {"log": ["a", "b"]}  # a list value: items
        cp["channel_versions"] = {"log": "1"}
        cfg = saver.put({"configurable": {"thread_id": "lists"}}, cp, {"step": 0},
                        {"log": "1"})
        saver.put_writes(cfg, [("log", ["c"])], "task")
        saver.flush()
        ctx, prefix = saver.context, saver.config.key_prefix
        suffixes = {r.suffix for r in R.REFERRERS} | set(R.REDIS_SUFFIXES_WITHOUT_VALUES)
        whole_prefix = {k for keys in R.prefix_keys(ctx).values() for k in keys}
        seen: set[str] = set()
        for raw in redis_client.scan_iter(match=prefix_pattern(prefix), count=1000):
            key = raw.decode()
            thread = thread_keys_of(prefix, key)
            suffix = thread.suffix_of(key) if thread is not None else None
            assert suffix in suffixes or key in whole_prefix, f"unclassified key {key!r}"
            seen.add(suffix or key)
        assert {"cp", "bl", "w", "it", "fx"} <= seen  # every referrer was exercised
        db = saver.sync_clients.db
        names = {getattr(ctx.collections, f) for f in
                 {r.collection for r in R.REFERRERS} | set(R.COLLECTIONS_WITHOUT_VALUES)}
        stored = set(db.list_collection_names())
        assert stored <= names, f"unclassified collections {sorted(stored - names)}"
        assert {ctx.collections.effects, ctx.collections.items} <= stored

