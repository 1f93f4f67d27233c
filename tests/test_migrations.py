"""Schema versions: older records (a v0 format built on purpose here) are read through the
migration chain in both tiers and rewritten in bulk by migrate_plan (resumable,
idempotent); newer ones raise SchemaVersionError and are never overwritten."""

from __future__ import annotations

import logging
from typing import Any

import ormsgpack
import pytest
import redis
from bson import Binary
from langgraph.checkpoint.base import empty_checkpoint

from langgraph_durable import DurableSaver
from langgraph_durable.core import schema
from langgraph_durable.core.records import SCHEMA_VERSION
from langgraph_durable.durable import inline
from langgraph_durable.errors import CorruptRecordError, SchemaVersionError
from langgraph_durable.io.drivers import run_sync
from langgraph_durable.plans import (
    migrations as M,  # lines shared with part B (_sync): rename M later
)
from langgraph_durable.testing import unique_options

from .write_forms import ungroup


@pytest.fixture(autouse=True)
def _values_in_blobs_documents(monkeypatch: pytest.MonkeyPatch) -> None:
    """The data these tests migrate predates inline channel values: every value a blobs
    document (``durable/inline.py``; the in-process flusher reads the bound per call)."""
    monkeypatch.setattr(inline, "INLINE_MAX_BYTES", -1)


def _fill(saver: DurableSaver, thread: str = "old") -> Any:
    """Three checkpoints with channel values, metadata (run_id) and pending writes."""
    cfg: Any = {"configurable": {"thread_id": thread, "checkpoint_ns": ""}}
    for n in range(3):
        cp = empty_checkpoint()
        cp["channel_values"] = {"notes": [f"note {n}"], "count": n}
        cp["channel_versions"] = {"notes": f"{n + 1:032}.0", "count": f"{n + 1:032}.1"}
        cfg = saver.put(cfg, cp, {"step": n, "source": "loop", "run_id": f"run-{n}",
                                  "tags": ["x"]}, dict(cp["channel_versions"]))
        saver.put_writes(cfg, [("notes", f"w{n}"), ("count", n)], f"task-{n}", "path")
    return cfg


def _snapshot(saver: DurableSaver, thread: str = "old") -> list[Any]:
    return [(t.config, t.checkpoint, t.metadata, t.parent_config, t.pending_writes)
            for t in saver.list({"configurable": {"thread_id": thread}})]


def _docs(saver: DurableSaver) -> dict[str, list[dict]]:
    db, cols = saver.sync_clients.db, saver.context.collections
    return {k: sorted(db[getattr(cols, k)].find(), key=lambda d: d["_id"]) for k in M.KINDS}


def _to_v0(saver: DurableSaver) -> None:
    """Rewrite every document in the pretend v0 format (see schema.py)."""
    ungroup(saver)  # v0 stored one document per write
    db, cols = saver.sync_clients.db, saver.context.collections
    for d in db[cols.checkpoints].find():
        md = saver.serde.loads_typed((d["metadata_type"], bytes(d["metadata"])))
        old = {k: v for k, v in d.items() if k not in ("checkpoint", "metadata_type", "md",
                                                     "run_id", "metadata")}
        db[cols.checkpoints].replace_one({"_id": d["_id"]}, {
            **old, "v": 0, "checkpoint_bytes": d["checkpoint"], "metadata": md})
    db[cols.blobs].update_many({}, {"$set": {"v": 0}})
    db[cols.writes].update_many({}, {"$set": {"v": 0}, "$unset": {"seq": "", "task_path": ""}})


def test_documents_of_an_older_version_are_read_and_migrated_in_bulk(
    redis_url: str, mongo_url: str
) -> None:
    # version 0 stored lists whole (items came with version 3)
    with DurableSaver.from_urls(redis_url, mongo_url, list_items=False,
                                **unique_options()) as saver:
        _fill(saver)
        saver.flush()
        ungroup(saver)  # v0 stored one document per write
        with redis.Redis.from_url(redis_url) as r:
            r.delete(*saver.context.keys("old").all)  # MongoDB alone answers
        # v0 had no seq/task_path: what a v0 write reads back as
        saver.sync_clients.db[saver.context.collections.writes].update_many(
            {}, {"$set": {"seq": 0, "task_path": ""}})
        expected_docs = _docs(saver)
        expected = _snapshot(saver)
        _to_v0(saver)
        assert {d["v"] for docs in _docs(saver).values() for d in docs} == {0}
        assert _snapshot(saver) == expected  # read through the chain, in memory
        filtered = list(saver.list({"configurable": {"thread_id": "old"}},
                                   filter={"run_id": "run-1"}))
        assert [t.metadata["step"] for t in filtered] == [1]
        assert {d["v"] for docs in _docs(saver).values() for d in docs} == {0}  # unchanged

        clients = saver.sync_clients
        assert clients is not None
        seen: list[tuple[str, int]] = []
        done = run_sync(M.migrate_plan(saver.context, batch_size=2, max_batches=2,
                                       on_batch=lambda k, n: seen.append((k, n))), clients)
        assert done == {"checkpoints": 3, "blobs": 0, "writes": 0}  # stopped after 2 batches
        meta = clients.db[saver.context.collections.meta]
        cursor = meta.find_one({"_id": "migration:checkpoints"})
        assert cursor is not None and cursor["target"] == SCHEMA_VERSION
        done = run_sync(M.migrate_plan(saver.context, batch_size=2,
                                       on_batch=lambda k, n: seen.append((k, n))), clients)
        assert done == {"checkpoints": 0, "blobs": 6, "writes": 6}  # resumed
        assert sum(n for _, n in seen) == 15
        assert meta.find_one({"_id": "migration:checkpoints"}) is None  # finished: no cursor
        assert _docs(saver) == expected_docs  # exactly what v1 would have written
        assert _snapshot(saver) == expected
        again = run_sync(M.migrate_plan(saver.context), clients)
        assert again == {"checkpoints": 0, "blobs": 0, "writes": 0}  # idempotent
        saver.delete_thread("old")


def test_a_damaged_old_document_is_left_and_every_other_one_is_migrated(
    redis_url: str, mongo_url: str
) -> None:
    with DurableSaver.from_urls(redis_url, mongo_url, list_items=False,
                                **unique_options()) as saver:
        _fill(saver)
        saver.flush()
        clients = saver.sync_clients
        cols = saver.context.collections
        _to_v0(saver)
        first = clients.db[cols.checkpoints].find_one(sort=[("_id", 1)])
        clients.db[cols.checkpoints].update_one({"_id": first["_id"]},
                                                {"$unset": {"checkpoint_bytes": ""}})
        with pytest.raises(CorruptRecordError, match="migrate rewrote every other document "
                           r"\(checkpoints 2, blobs 6, writes 6\) but left 1 damaged") as err:
            run_sync(M.migrate_plan(saver.context, batch_size=2), clients)
        assert [str(first["_id"]) in str(e) for e in err.value.damaged] == [True]
        versions = {k: sorted((str(d["_id"]) == str(first["_id"]), d["v"]) for d in docs)
                    for k, docs in _docs(saver).items()}
        assert versions["checkpoints"] == [(False, SCHEMA_VERSION)] * 2 + [(True, 0)]
        assert {v for _, v in versions["blobs"] + versions["writes"]} == {SCHEMA_VERSION}
        # a later run finds it again, and only it
        with pytest.raises(CorruptRecordError, match=r"\(checkpoints 0, blobs 0, writes 0\)"):
            run_sync(M.migrate_plan(saver.context), clients)


def test_redis_envelopes_of_an_older_version_are_read_and_flushed_upgraded(
    redis_url: str, mongo_url: str
) -> None:
    opts = unique_options(flusher="off", list_items=False)  # v0 stored lists whole
    with DurableSaver.from_urls(redis_url, mongo_url, **opts) as saver:
        _fill(saver)
        expected = _snapshot(saver)
        keys = saver.context.keys("old")
        r = saver.sync_clients.redis
        for m, raw in r.hgetall(keys.cp).items():
            v = ormsgpack.unpackb(raw)
            md = saver.serde.loads_typed((v[4], v[5]))
            r.hset(keys.cp, m, ormsgpack.packb([0, v[1], v[2], v[3], md]))
        for f, raw in r.hgetall(keys.w).items():
            v = ormsgpack.unpackb(raw)
            r.hset(keys.w, f, ormsgpack.packb([0, *v[1:6]]))
        for f, raw in r.hgetall(keys.bl).items():
            if raw:
                r.hset(keys.bl, f, ormsgpack.packb([0, *ormsgpack.unpackb(raw)[1:]]))
        assert _snapshot(saver) == expected  # upgraded in memory on every read
        assert ormsgpack.unpackb(r.hget(keys.w, next(iter(r.hkeys(keys.w)))))[0] == 0
    with DurableSaver.from_urls(redis_url, mongo_url, **{**opts, "flusher": "auto"}) as s2:
        s2.flush()
        docs = _docs(s2)
        assert {k: {d["v"] for d in ds} for k, ds in docs.items()} == {
            "checkpoints": {SCHEMA_VERSION}, "blobs": {SCHEMA_VERSION},
            "writes": {schema.WRITES_GROUP_VERSION}}  # one document per put_writes call
        assert len(docs["writes"]) == 3
        assert sorted(d["run_id"] for d in docs["checkpoints"]) == ["run-0", "run-1", "run-2"]
        assert {d["task_path"] for d in docs["writes"]} == {""}  # v0 had none
        s2.sync_clients.redis.delete(*keys.all)
        assert [g[:4] for g in _snapshot(s2)] == [e[:4] for e in expected]
        s2.delete_thread("old")


def test_newer_versions_raise_and_are_never_overwritten(redis_url: str, mongo_url: str) -> None:
    with DurableSaver.from_urls(redis_url, mongo_url, **unique_options()) as saver:
        _fill(saver)
        saver.flush()
        clients = saver.sync_clients
        assert clients is not None
        cols = saver.context.collections
        _to_v0(saver)
        newest = clients.db[cols.checkpoints].find_one(sort=[("checkpoint_id", -1)])
        clients.db[cols.checkpoints].update_one({"_id": newest["_id"]}, {"$set": {"v": 99}})
        keys = saver.context.keys("old")
        clients.redis.delete(*keys.all)
        before = _docs(saver)
        with pytest.raises(SchemaVersionError, match="schema version 99"):
            saver.get_tuple({"configurable": {"thread_id": "old"}})
        with pytest.raises(SchemaVersionError, match="Nothing was rewritten"):
            run_sync(M.migrate_plan(saver.context), clients)
        assert _docs(saver) == before  # the v0 documents were not rewritten either

        _fill(saver, "hot")  # a Redis envelope of a newer version
        hk = saver.context.keys("hot")
        m, raw = next(iter(clients.redis.hgetall(hk.cp).items()))
        newer = ormsgpack.packb([99, *ormsgpack.unpackb(raw)[1:]])
        clients.redis.hset(hk.cp, m, newer)
        with pytest.raises(SchemaVersionError, match="schema version 99"):
            list(saver.list({"configurable": {"thread_id": "hot"}}))
        assert clients.redis.hget(hk.cp, m) == newer
        clients.db[cols.checkpoints].delete_many({})
        clients.redis.delete(*hk.all)


def test_setup_records_the_deployed_version_and_warns_about_a_newer_one(
    redis_url: str, mongo_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    opts = unique_options()
    with DurableSaver.from_urls(redis_url, mongo_url, **opts) as saver:
        clients = saver.sync_clients
        assert clients is not None
        meta = clients.db[saver.context.collections.meta]
        doc = meta.find_one({"_id": M.SCHEMA_DOC_ID})
        assert doc["v"] == SCHEMA_VERSION and str(SCHEMA_VERSION) in doc["seen"]
        assert run_sync(M.deployed_version_plan(saver.context), clients) == SCHEMA_VERSION
        meta.update_one({"_id": M.SCHEMA_DOC_ID}, {"$set": {"v": 7}})
    caplog.set_level(logging.WARNING, logger="langgraph_durable")
    with DurableSaver.from_urls(redis_url, mongo_url, **opts) as saver:
        assert saver.run(M.deployed_version_plan(saver.context)) == 7  # never lowered
    assert any("schema version 7" in r.getMessage() for r in caplog.records)


def test_the_chain_applies_every_step_in_order(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(schema, "SCHEMA_VERSION", 3)
    monkeypatch.setitem(schema.DOCUMENT_STEPS, "blobs", {
        0: lambda d: {**d, "v": 1, "trail": ["0->1"]},
        1: lambda d: {**d, "v": 2, "trail": d.get("trail", []) + ["1->2"]},
        2: lambda d: {**d, "v": 3, "trail": d.get("trail", []) + ["2->3"]},
    })
    monkeypatch.setitem(schema.ENVELOPE_STEPS, "bl", {1: lambda v: [2, *v[1:], "a"],
                                                 2: lambda v: [3, *v[1:], "b"]})
    doc = {"_id": "x", "v": 0, "data": Binary(b"1")}
    assert schema.upgrade_document("blobs", doc)["trail"] == ["0->1", "1->2", "2->3"]
    assert doc["v"] == 0  # the argument is not changed
    assert schema.upgrade_document("blobs", {"_id": "y"})["trail"] == ["1->2", "2->3"]  # no v = 1
    assert schema.upgrade_envelope("bl", [1, "t", b"b"], "here") == [3, "t", b"b", "a", "b"]
    with pytest.raises(SchemaVersionError, match="newer than 3"):
        schema.upgrade_document("blobs", {"_id": "z", "v": 4})
    with pytest.raises(SchemaVersionError, match="no migration"):
        schema.upgrade_document("writes", {"_id": "w", "v": 1})
