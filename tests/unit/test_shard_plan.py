"""The MongoDB side of many machines (issue 14 item 5; docs/operations.md "Sharding"):
``thread_id`` leads every index of ``INDEXES`` (one documented exception), every index is
in the documented plan, and every upsert's filter holds ``thread_id``, the shard key, so
mongos can route it to one shard."""

from __future__ import annotations

from pathlib import Path

from langgraph_durable.durable import chunks as C
from langgraph_durable.durable import documents as D
from langgraph_durable.durable import effect_docs as E
from langgraph_durable.durable import item_docs as IT

DOC = Path(__file__).resolve().parents[2] / "docs" / "operations.md"

NOT_LED_BY_THREAD = {("checkpoints", "run_id"), ("tombstones", "deleted_at_ttl"),
                     ("store", "ns_key"), ("store", "ns_cseq_key"),
                     ("store", "exp"), ("store", "purge_at_ttl"),
                     ("threads", "u"), ("retention", "exp")}
"""``delete_for_runs(run_ids)`` looks up checkpoints by run id across all threads: a
scatter-gather on a sharded cluster, each shard using its own ``run_id`` index; the
tombstones expire through a TTL index, which MongoDB allows on one field only (see
docs/operations.md "Sharding"); the thread summaries' ``u`` serves the readers' census
over every thread (the operators' thread list: scatter-gather, documented). The memory
store (``store``) holds no thread: its indexes serve namespace prefixes and expiry,
and it stays unsharded (documented). The retention sweep finds due threads by expiry
(``retention.exp``: its ``_id`` is the thread_id, the shard key)."""

UNSHARDED = {"store"}
"""Collections with indexes that the documented plan leaves unsharded, with the reason in
docs/operations.md "Sharding"."""


def _indexes() -> list[tuple[str, str, list[str]]]:
    return [(col, m.name, [k for k, _direction in m.keys])
            for col, models in D.INDEXES.items() for m in models]


def test_thread_id_leads_every_index_but_the_documented_run_id_one() -> None:
    not_led = {(col, name) for col, name, keys in _indexes() if keys[0] != "thread_id"}
    assert not_led == NOT_LED_BY_THREAD
    assert {col for col, _n, _k in _indexes()} == {"checkpoints", "blobs", "writes", "items",
                                                    "chunks", "tombstones", "effects",
                                                    "store", "audit", "threads",
                                                    "retention"}


def test_every_index_and_collection_is_in_the_documented_shard_plan() -> None:
    text = DOC.read_text()
    plan = text[text.index("## Sharding"):]
    plan = plan[:plan.index("\n## ", 1)] if "\n## " in plan[1:] else plan
    for col, name, keys in _indexes():
        assert f"`{name}`" in plan, (col, name)
        if col in UNSHARDED:
            assert f"`{col}` stays unsharded" in plan, col
        else:
            assert f'sh.shardCollection("<db>.{col}"' in plan, col
        assert ", ".join(keys) in plan, (col, name, keys)


def test_every_upsert_filter_holds_the_shard_key() -> None:
    base = {"_id": "9:thread-01|0:|3:abc", "thread_id": "thread-01"}
    ops = [
        D.upsert({**base, "put_ms": 5}),  # checkpoints and blobs
        D.upsert(dict(base)),  # a document without put_ms (copied)
        D.upsert_write({**base, "idx": 0, "seq": 1, "put_ms": 5}),
        D.upsert_write({**base, "idx": -1, "seq": 1, "put_ms": 5}),  # special channel
        *C.upserts([dict(base)]),
        IT.upsert_item({**base, "d": b"\x00" * 16, "put_ms": 5}),
        E.effect_upsert({**base, "v": 2, "put_ms": 5}),  # the effect journal
    ]
    for op in ops:
        assert op.filter["_id"] == base["_id"]
        assert op.filter["thread_id"] == "thread-01", op
    (stone,) = D.tombstone_upserts("thread-01", ["\x00abc"], 5)
    assert stone.filter == {"_id": D.doc_id("thread-01", "\x00abc"), "thread_id": "thread-01"}
