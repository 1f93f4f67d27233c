"""Saver-level blob garbage collection (langgraph_durable/admin/extref_gc.py) on real servers:
Redis, the MongoDB-wire server and moto's S3 (``s3_endpoint_url``) or a local folder.

The clock is injected (``now``) past the grace period instead of sleeping."""

from __future__ import annotations

import os
import threading
import time
import uuid
from collections.abc import Iterator
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any, TypedDict

import boto3
import numpy as np
import pandas as pd
import pytest
import redis
from langgraph.checkpoint.base import empty_checkpoint
from langgraph.graph import END, START, StateGraph

from langgraph_durable import DurableSaver
from langgraph_durable.admin.extref_gc import (
    acollect_saver_garbage,
    areferenced_blob_keys,
    collect_saver_garbage,
    referenced_blob_keys,
    scan_pattern,
    storage_footprint,
    thread_hash,
)
from langgraph_durable.serde import (
    EXTREF_TYPE,
    BlobNotFoundError,
    BlobStore,
    ExternalRefError,
    ExternalRefSerializer,
    LocalBlobStore,
    S3BlobStore,
    refs_in,
)
from langgraph_durable.testing import unique_options, wait_for

LATER = timedelta(hours=2)  # past the default grace period of one hour


@pytest.fixture(autouse=True)
def _blob_dir(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("LANGGRAPH_BLOB_DIR", str(tmp_path / "default-blobs"))


@pytest.fixture(scope="module")
def s3_client(s3_endpoint_url: str) -> Any:
    return boto3.client("s3", endpoint_url=s3_endpoint_url, aws_access_key_id="testing",
                        aws_secret_access_key="testing", region_name="us-east-1")


@pytest.fixture(params=["local", "s3"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> BlobStore:
    if request.param == "local":
        return LocalBlobStore(tmp_path / "blobs")
    client = request.getfixturevalue("s3_client")
    bucket = f"lgd-gc-{uuid.uuid4().hex[:16]}"
    client.create_bucket(Bucket=bucket)
    return S3BlobStore(bucket, prefix="blobs", client=client)


@pytest.fixture
def local_store(tmp_path: Path) -> LocalBlobStore:
    return LocalBlobStore(tmp_path / "blobs")


def open_saver(redis_url: str, mongo_url: str, store: BlobStore, **options: Any) -> DurableSaver:
    serde = ExternalRefSerializer(store=store, threshold_bytes=4096)
    opts = options if "key_prefix" in options else unique_options(**options)
    return DurableSaver.from_urls(redis_url, mongo_url, serde=serde, **opts)


@pytest.fixture
def saver(redis_url: str, mongo_url: str, store: BlobStore) -> Iterator[DurableSaver]:
    with open_saver(redis_url, mongo_url, store) as s:
        yield s


def frame(seed: int, rows: int = 40) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    return pd.DataFrame({"x": rng.random(rows), "k": rng.integers(0, 9, rows)})


def key_of(saver: DurableSaver, value: Any) -> str:
    (key,) = refs_in(*saver.serde.dumps_typed(value))
    return key


def put(saver: DurableSaver, thread: str, values: dict[str, Any], step: int,
        parent: dict | None = None, **metadata: Any) -> dict:
    """One checkpoint storing ``values`` (each channel at version ``step + 1``)."""
    cfg = parent or {"configurable": {"thread_id": thread, "checkpoint_ns": ""}}
    cp = empty_checkpoint()
    versions = {ch: f"{step + 1:032}.0" for ch in values}
    cp["channel_values"], cp["channel_versions"] = dict(values), dict(versions)
    return saver.put(cfg, cp, {"step": step, **metadata}, versions)


def newest_blob(store: BlobStore) -> datetime:
    return max(i.last_modified for i in store.list_keys())


def stored_keys(store: BlobStore) -> set[str]:
    return {i.key for i in store.list_keys()}


# ----------------------------------------------------------------------------- scanning


def test_references_are_found_in_redis_then_in_mongodb_alone(
    redis_url: str, mongo_url: str, local_store: LocalBlobStore, redis_client: redis.Redis
) -> None:
    thread = "odd}:bl*{thread"  # braces, glob characters and a key suffix in the thread id
    with open_saver(redis_url, mongo_url, local_store, flusher="off") as hot:
        options = {"key_prefix": hot.config.key_prefix, "database": hot.config.database}
        cfg = put(hot, thread, {"df": frame(1), "n": 1}, 0, note="m" * 10_000)
        hot.put_writes(cfg, [("df", frame(2)), ("n", 2)], "task-1")
        frames = {key_of(hot, frame(1)), key_of(hot, frame(2))}
        expected = referenced_blob_keys(hot)
        (metadata,) = expected - frames  # the metadata, over threshold_bytes, spilled too
        assert frames < expected and metadata.endswith(".bin")
        assert storage_footprint(hot).mongo_docs == {"checkpoints": 0, "blobs": 0, "writes": 0,
                                                     "items": 0, "effects": 0, "chunks": 0}
    with open_saver(redis_url, mongo_url, local_store, **options) as cold:
        cold.flush()
        keys = list(redis_client.scan_iter(match=scan_pattern(options["key_prefix"])))
        assert len(keys) >= 8
        redis_client.delete(*keys)  # Redis emptied: only MongoDB holds the references
        assert referenced_blob_keys(cold) == expected
        assert stored_keys(local_store) == expected
        state = cold.get_tuple({"configurable": {"thread_id": thread}})
        assert cold.last_read_tier == "durable"
        pd.testing.assert_frame_equal(state.checkpoint["channel_values"]["df"], frame(1))


def test_thread_hash_matches_exactly_the_saver_keys() -> None:
    from langgraph_durable.hot.keys import ThreadKeys

    keys = ThreadKeys("p*", "a}:bl")
    assert thread_hash("p*", keys.bl) == ("a}:bl", "bl")
    assert thread_hash("p*", keys.w) == ("a}:bl", "w")
    assert thread_hash("p*", keys.cp) == ("a}:bl", "cp")
    assert thread_hash("p*", keys.fx) == ("a}:bl", "fx")  # the effect journal
    assert thread_hash("p*", keys.cv) is None and thread_hash("p*", keys.wi) is None
    assert thread_hash("p", ThreadKeys("p*", "a").bl) is None
    assert thread_hash("p*", "{p*:outbox}") is None
    assert scan_pattern("a*b?[c]\\") == "{a\\*b\\?\\[c\\]\\\\:*"


def test_prefixes_sharing_a_start_see_only_their_own_keys(
    redis_url: str, mongo_url: str, local_store: LocalBlobStore
) -> None:
    # (glob characters cannot occur in a key_prefix: it is letters, digits, _ . -)
    tag = uuid.uuid4().hex[:8]
    with open_saver(redis_url, mongo_url, local_store, key_prefix=f"g{tag}",
                    database=f"lgd_a{tag}", flusher="off") as a, \
            open_saver(redis_url, mongo_url, local_store, key_prefix=f"g{tag}x",
                       database=f"lgd_b{tag}", flusher="off") as b:
        put(a, "t", {"df": frame(10)}, 0)
        put(b, "t", {"df": frame(11)}, 0)
        mine, theirs = referenced_blob_keys(a), referenced_blob_keys(b)
        assert mine == {key_of(a, frame(10))} and theirs == {key_of(b, frame(11))}
        # a shared store is collected with every saver's references
        later = newest_blob(local_store) + LATER
        dry = collect_saver_garbage(a, now=later, dry_run=True)
        assert dry.deleted == sorted(theirs)
        report = collect_saver_garbage(a, now=later, also_referenced=theirs)
        assert report.deleted == [] and report.kept_referenced == 2


def test_a_corrupt_envelope_stops_the_collection(saver: DurableSaver, store: BlobStore) -> None:
    put(saver, "t", {"df": frame(1)}, 0)
    saver.serde.dumps_typed(frame(2))  # an orphan
    saver.flush()
    saver.sync_clients.db[saver.context.collections.blobs].insert_one(
        {"_id": "bad", "thread_id": "x", "type": EXTREF_TYPE, "data": b"\xc1junk"})
    with pytest.raises(ExternalRefError):
        collect_saver_garbage(saver, now=newest_blob(store) + LATER)
    assert len(stored_keys(store)) == 2


# ----------------------------------------------------------------------------- after deletes


def test_delete_thread_collects_its_blobs_but_not_shared_or_pending_ones(
    saver: DurableSaver, store: BlobStore
) -> None:
    shared, own, pending = frame(1), frame(2), frame(3)
    cfg = put(saver, "a", {"df": shared, "extra": own}, 0)
    saver.put_writes(cfg, [("df", pending)], "task-a")
    put(saver, "b", {"df": shared}, 0)
    keys = {name: key_of(saver, v) for name, v in
            {"shared": shared, "own": own, "pending": pending}.items()}
    later = newest_blob(store) + LATER

    report = collect_saver_garbage(saver, now=later)  # everything is referenced
    assert report.deleted == [] and report.kept_referenced == 3 and report.referenced == 3

    saver.delete_thread("a")
    report = collect_saver_garbage(saver, now=later)
    assert sorted(report.deleted) == sorted([keys["own"], keys["pending"]])
    assert report.bytes_deleted > 0 and stored_keys(store) == {keys["shared"]}
    got = saver.get_tuple({"configurable": {"thread_id": "b"}})
    pd.testing.assert_frame_equal(got.checkpoint["channel_values"]["df"], shared)
    assert collect_saver_garbage(saver, now=later).deleted == []


def test_delete_for_runs_collects_the_runs_writes_and_metadata(
    saver: DurableSaver, store: BlobStore
) -> None:
    cfg = put(saver, "t", {"df": frame(1)}, 0, run_id="r1", note="a" * 9000)
    saver.put_writes(cfg, [("df", frame(2))], "task-1")
    cfg = put(saver, "t", {"df": frame(1)}, 1, parent=cfg, run_id="r2")
    saver.put_writes(cfg, [("df", frame(3))], "task-2")
    before = referenced_blob_keys(saver)
    saver.delete_for_runs(["r1"])
    run1 = before - referenced_blob_keys(saver)  # the write's frame and the spilled metadata
    assert key_of(saver, frame(2)) in run1 and len(run1) == 2
    report = collect_saver_garbage(saver, now=newest_blob(store) + LATER)
    # channel values stay (delete_for_runs keeps blobs, like InMemorySaver): frame 1 is kept
    assert set(report.deleted) == run1
    assert stored_keys(store) == {key_of(saver, frame(1)), key_of(saver, frame(3))}
    (tup,) = saver.list({"configurable": {"thread_id": "t"}})
    assert tup.metadata["run_id"] == "r2"
    assert [w[0] for w in tup.pending_writes] == ["task-2"]
    pd.testing.assert_frame_equal(tup.pending_writes[0][2], frame(3))


class State(TypedDict, total=False):
    df: pd.DataFrame
    n: int


def _graph(saver: DurableSaver) -> Any:
    g = StateGraph(State)
    g.add_node("bump", lambda s: {"n": s.get("n", 0) + 1})
    g.add_edge(START, "bump")
    g.add_edge("bump", END)
    return g.compile(checkpointer=saver)


def test_prune_keep_latest_collects_the_older_frames(saver: DurableSaver, store: BlobStore) -> None:
    app = _graph(saver)
    config = {"configurable": {"thread_id": "p"}}
    for seed in (1, 2, 3):
        app.invoke({"df": frame(seed)}, config)
    keys = [key_of(saver, frame(seed)) for seed in (1, 2, 3)]  # (computing a key uploads)
    assert stored_keys(store) == set(keys)
    saver.prune(["p"])
    report = collect_saver_garbage(saver, now=newest_blob(store) + LATER)
    assert sorted(report.deleted) == sorted(keys[:2])
    assert stored_keys(store) == {keys[2]}
    pd.testing.assert_frame_equal(app.get_state(config).values["df"], frame(3))


async def test_async_collection_after_adelete_thread(
    redis_url: str, mongo_url: str, store: BlobStore
) -> None:
    async with open_saver(redis_url, mongo_url, store) as s:
        cfg = {"configurable": {"thread_id": "a", "checkpoint_ns": ""}}
        cp = empty_checkpoint()
        cp["channel_values"], cp["channel_versions"] = {"df": frame(5)}, {"df": "1"}
        await s.aput(cfg, cp, {"step": 0}, {"df": "1"})
        key = key_of(s, frame(5))
        assert await areferenced_blob_keys(s) == {key}
        await s.adelete_thread("a")
        report = await acollect_saver_garbage(s, now=newest_blob(store) + LATER)
        assert report.deleted == [key] and stored_keys(store) == set()


# ----------------------------------------------------------------------------- concurrency


def test_a_blob_written_a_moment_ago_is_never_collected(
    saver: DurableSaver, store: BlobStore
) -> None:
    typed = saver.serde.dumps_typed(frame(7))  # uploaded; its checkpoint is not stored yet
    report = collect_saver_garbage(saver)  # the real clock and the default grace period
    assert report.deleted == [] and report.kept_recent == 1
    cfg = put(saver, "late", {"df": frame(7)}, 0)  # the writer finishes its put
    got = saver.get_tuple(cfg)
    pd.testing.assert_frame_equal(got.checkpoint["channel_values"]["df"], frame(7))
    assert refs_in(*typed) == referenced_blob_keys(saver)


def test_an_old_orphan_reused_by_a_writer_is_refreshed_and_kept(
    redis_url: str, mongo_url: str, local_store: LocalBlobStore
) -> None:
    # (a local file's mtime can be set back; S3's LastModified cannot)
    with open_saver(redis_url, mongo_url, local_store) as saver:
        key = key_of(saver, frame(8))
        old = time.time() - 3 * 3600
        os.utime(local_store.root / key[:2] / key, (old, old))  # an orphan, 3 hours old
        assert collect_saver_garbage(saver, dry_run=True).deleted == [key]
        put(saver, "reuse", {"df": frame(8)}, 0)  # a writer stores the same frame again
        report = collect_saver_garbage(saver)  # the real clock
        assert report.deleted == [] and report.kept_referenced == 1
        # the reuse refreshed the file, so even before the put was stored it was safe
        assert local_store.stat(key).last_modified.timestamp() > time.time() - 60


def test_collection_running_alongside_writers_never_breaks_a_checkpoint(
    saver: DurableSaver, store: BlobStore
) -> None:
    stop = threading.Event()
    errors: list[BaseException] = []
    deleted: list[str] = []

    def collector() -> None:
        try:
            while not stop.is_set():
                deleted.extend(collect_saver_garbage(saver, grace_period_s=1.0).deleted)
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    worker = threading.Thread(target=collector)
    worker.start()
    try:
        cfg = None
        for step in range(30):
            cfg = put(saver, "busy", {"df": frame(100 + step)}, step, parent=cfg)
            if step % 10 == 9:
                wait_for(lambda: all(  # every blob so far is past the grace period
                    time.time() - info.last_modified.timestamp() > 1.0
                    for info in store.list_keys()), 10, "blobs older than 1 s")
                before = len(deleted)
                saver.prune(["busy"])  # orphans the older frames
                # the collector deletes them while the writes go on (a round that began
                # before the prune may not: wait for the next, whatever the load)
                wait_for(lambda: len(deleted) > before or errors,  # noqa: B023 (at once)
                         30, "the collector to delete pruned frames")
    finally:
        stop.set()
        worker.join()
    assert errors == []
    assert deleted  # the collector did collect pruned frames meanwhile
    for tup in saver.list({"configurable": {"thread_id": "busy"}}):
        df = tup.checkpoint["channel_values"]["df"]  # every remaining checkpoint loads
        assert isinstance(df, pd.DataFrame)
    with pytest.raises(BlobNotFoundError):
        store.get(deleted[0])


def test_references_and_footprint_on_a_redis_cluster(
    redis_cluster_url: str, redis_cluster_proc: Any, mongo_url: str,
    local_store: LocalBlobStore,
) -> None:
    # SCAN runs on every primary: the threads' keys live on all three masters
    threads = [f"gc-{i}" for i in range(8)]
    with open_saver(redis_cluster_url, mongo_url, local_store, flusher="off") as s:
        for i, t in enumerate(threads):
            put(s, t, {"df": frame(i), "n": i}, 0)
        s.put_writes({"configurable": {"thread_id": "gc-0", "checkpoint_ns": "",
                                       "checkpoint_id": "1"}}, [("df", frame(99))], "task")
        expected = {key_of(s, frame(i)) for i in (*range(8), 99)}
        assert referenced_blob_keys(s) == expected
        prefix = s.config.key_prefix
        per_master = {}
        for m in redis_cluster_proc.masters():
            with redis.Redis(port=m.port) as r:
                per_master[m.port] = set(r.scan_iter(match=scan_pattern(prefix)))
        assert sum(1 for keys in per_master.values() if keys) >= 2
        every = set().union(*per_master.values())
        fp = storage_footprint(s)
        # the thread keys and the outbox partitions (nothing flushed: MongoDB is empty)
        assert fp.redis_keys == len(every) and fp.redis_bytes > 0
        assert sum(fp.mongo_docs.values()) == 0
    with open_saver(redis_cluster_url, mongo_url, local_store, key_prefix=prefix,
                    database=s.config.database) as again:
        again.flush()
        fp = storage_footprint(again)
        assert fp.mongo_docs["checkpoints"] == len(threads)
        assert fp.mongo_docs["writes"] == 1
        assert referenced_blob_keys(again) == expected


def test_footprint_counts_items_and_every_outbox_partition(
    redis_url: str, mongo_url: str, local_store: LocalBlobStore,
) -> None:
    with open_saver(redis_url, mongo_url, local_store, flusher="off",
                    outbox_partitions=4) as s:
        for i in range(8):  # list values: stored as items
            put(s, f"items-{i}", {"log": [f"entry {i}", f"entry {i + 1}"]}, 0)
        r = redis.Redis.from_url(redis_url)
        streams = [k for k in s.context.outboxes if r.exists(k)]
        assert len(streams) >= 2
        fp = storage_footprint(s)
        keys = set(r.scan_iter(match=scan_pattern(s.config.key_prefix)))
        assert fp.redis_keys == len(keys)  # thread keys and the partitions' streams
    with open_saver(redis_url, mongo_url, local_store, key_prefix=s.config.key_prefix,
                    database=s.config.database, outbox_partitions=4) as again:
        again.flush()
        fp = storage_footprint(again)
        assert fp.mongo_docs["items"] == 16  # items are per thread: two in each of eight
