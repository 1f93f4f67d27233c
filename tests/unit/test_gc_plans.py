"""The external-object collector's plans (``admin/extref_gc.py``) stepped without servers:
which Redis keys and MongoDB documents ``referenced_keys_plan`` reads and which blob
keys it finds referenced (what the collector keeps; every other old key is deleted), and
what ``footprint_plan`` measures."""

from __future__ import annotations

from typing import Any

import ormsgpack
import pytest

from langgraph_durable.admin import extref_gc as G
from langgraph_durable.core.ops import Aggregate, Find, Op, Pipeline, Scan
from langgraph_durable.core.records import WriteRecord, pack_blob
from langgraph_durable.plans.effect_journal import Entry
from langgraph_durable.serde.extref_errors import ExternalRefError

from .stepping import context, drive


def _env(*keys: str) -> bytes:
    """An ``extref`` envelope naming blob ``keys``."""
    return ormsgpack.packb({"v": 1, "parts": [{"key": k, "sha256": "0" * 64} for k in keys]})


def test_references_are_read_from_redis_hashes_then_every_mongodb_collection() -> None:
    ctx = context()
    t = ctx.keys("t")
    w = WriteRecord(task_id="task", idx=0, channel="c", task_path="", value=("extref", _env("w1")),
                    seq=1)
    done_fx = Entry(3, "d", ("extref", _env("e1")), None, "", "c1", 5).body()
    scanned = [t.bl.encode(), t.w.encode(), t.cp.encode(), t.fx.encode(), t.cv.encode(),
               ctx.outbox.encode(), b"{other:x}"]

    def answer(op: Op[Any]) -> Any:
        if isinstance(op, Scan):
            return scanned
        if isinstance(op, Pipeline):  # HSCAN of the thread's bl, w, cp and fx hashes
            return [(0, {b"f1": pack_blob(("extref", _env("b1", "b2"))),
                         b"f2": pack_blob(("msgpack", b"\x01"))}),
                    (0, {b"f": w.pack()}), (0, {}),
                    (0, {b"!": b"1", b"ns\x00task\x00pay\x000": b"00000003" + done_fx})]
        assert isinstance(op, Find)
        return {"checkpoints": [{"_id": "c1", "type": "msgpack", "checkpoint": b"x",
                                 "metadata_type": "extref", "metadata": _env("m1")}],
                "writes": [{"_id": "w9", "type": "extref", "data": _env("w1", "w2")},
                           {"_id": "w8", "v": 5, "writes": [  # one put_writes call
                               {"idx": 0, "channel": "a", "type": "extref",
                                "data": _env("w3")},
                               {"idx": 1, "channel": "b", "type": "json", "data": b"1"}]}],
                "items": [{"_id": "i1", "type": "extref", "data": _env("i1")}],
                "effects": [{"_id": "x1", "raw": b"00000001" + Entry(
                    1, "d", ("extref", _env("e2")), None, "", "c1", 5).body()}],
                }.get(op.collection, [])

    done = drive(G.referenced_keys_plan(ctx), answer)
    assert done.result == {"b1", "b2", "w1", "w2", "w3", "m1", "i1", "e1", "e2"}
    scan, hscan, *finds = done.ops
    assert scan == Scan("{u:*", 1000)
    assert isinstance(hscan, Pipeline)
    assert [list(c) for c in hscan.commands] == [  # no index, stream nor foreign key
        ["HSCAN", k, 0, "COUNT", 1000] for k in (t.bl, t.w, t.cp, t.fx)]
    assert [(f.collection, f.filter) for f in finds if isinstance(f, Find)] == [
        ("checkpoints", {"$or": [{"type": "extref"}, {"metadata_type": "extref"},
                                 {"vals.type": "extref"}]}),  # and its inline values
        ("blobs", {"type": "extref"}),
        ("writes", {"$or": [{"type": "extref"}, {"writes.type": "extref"}]}),
        ("items", {"type": "extref"}), ("effects", {"state": "done"})]
    first = finds[0]
    assert isinstance(first, Find) and dict(first.projection or {}) == {
        "type": 1, "checkpoint": 1, "metadata_type": 1, "metadata": 1, "checkpoint_ns": 1,
        "vals": 1, "thread_id": 1, "chunked": 1}
    assert (first.sort, first.limit) == ([("_id", 1)], 1000)


def test_mongodb_is_read_in_pages_by_id(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(G, "SCAN_COUNT", 2)
    ctx = context()
    blobs = [{"_id": f"b{i}", "type": "extref", "data": _env(f"k{i}")} for i in range(3)]

    def answer(op: Op[Any]) -> Any:
        if isinstance(op, Scan):
            return []
        assert isinstance(op, Find)
        if op.collection != "blobs":
            return []
        after = op.filter.get("_id", {}).get("$gt", "")
        return [d for d in blobs if d["_id"] > after][:op.limit]

    done = drive(G.referenced_keys_plan(ctx), answer)
    assert done.result == {"k0", "k1", "k2"}
    assert [op.filter for op in done.ops if isinstance(op, Find) and op.collection == "blobs"
            ] == [{"type": "extref"}, {"type": "extref", "_id": {"$gt": "b1"}}]


def test_a_corrupt_envelope_stops_the_scan_so_nothing_is_deleted() -> None:
    ctx = context()

    def answer(op: Op[Any]) -> Any:
        if isinstance(op, Scan):
            return []
        assert isinstance(op, Find)
        return [{"_id": "b", "type": "extref", "data": b"\x93\x01\x02\x03"}
                ] if op.collection == "blobs" else []

    with pytest.raises(ExternalRefError, match="unsupported extref envelope"):
        drive(G.referenced_keys_plan(ctx), answer)


def test_the_footprint_counts_the_prefix_keys_and_each_collection() -> None:
    ctx = context()
    t = ctx.keys("t")
    scanned = [t.cp.encode(), t.gone.encode(), ctx.outbox.encode(), b"{u:not-a-thread-key"]

    def answer(op: Op[Any]) -> Any:
        if isinstance(op, Scan):
            return scanned
        if isinstance(op, Pipeline):
            return [100, 20, 3]
        assert isinstance(op, Aggregate)
        return [{"_id": None, "n": 2, "b": 500}] if op.collection == "checkpoints" else []

    done = drive(G.footprint_plan(ctx), answer)
    assert done.result == (123, 3, 500, {"checkpoints": 2, "blobs": 0, "writes": 0,
                                         "items": 0, "effects": 0, "chunks": 0})
    pipe = done.ops[1]
    assert isinstance(pipe, Pipeline) and [c[2] for c in pipe.commands] == [
        t.cp, t.gone, ctx.outbox]
    assert [op.collection for op in done.ops if isinstance(op, Aggregate)] == [
        "checkpoints", "blobs", "writes", "items", "effects", "chunks"]
