"""Looking straight at the two tiers (raw Redis keys, raw MongoDB documents), without the
saver's read path, so a scenario can tell what is stored where.

Functions reading a thread's Redis keys take ``partitions``, the saver's number of outbox
partitions (``Context.partitions``: 1 on a single Redis by default, 16 on a cluster), which
names the keys (``hot/keys.py``); ``common.partitions_of`` gives it for a URL.

Identities:
- checkpoint: ``(thread_id, checkpoint_ns, checkpoint_id)``
- write: ``(thread_id, checkpoint_ns, checkpoint_id, task_id, idx)``
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from typing import Any

import redis

from langgraph_durable.core.records import (
    SEP,
    CheckpointRecord,
    WriteRecord,
    member,
    split_field,
    unpack_blob,
)
from langgraph_durable.durable.documents import checkpoint_doc, doc_id, write_doc
from langgraph_durable.durable.inline import place_values
from langgraph_durable.durable.item_docs import item_doc, split_hosted
from langgraph_durable.durable.write_groups import pending_of, records_of
from langgraph_durable.hot.keys import ThreadKeys
from langgraph_durable.testing import drop_key_prefix
from langgraph_durable.testing import wait_for as wait_for  # the one wait helper

Cp = tuple[str, str, str]
Wr = tuple[str, str, str, str, int]


# --------------------------------------------------------------------------- Redis


def redis_checkpoints(r: redis.Redis, prefix: str, threads: Iterable[str],
                      partitions: int = 1) -> set[Cp]:
    out: set[Cp] = set()
    for t in threads:
        for m in r.hkeys(ThreadKeys(prefix, t, partitions).cp):
            ns, cid = m.decode().split(SEP)
            out.add((t, ns, cid))
    return out


def redis_writes(r: redis.Redis, prefix: str, threads: Iterable[str],
                 partitions: int = 1) -> set[Wr]:
    out: set[Wr] = set()
    for t in threads:
        for f in r.hkeys(ThreadKeys(prefix, t, partitions).w):
            ns, cid, task, idx = split_field(f)
            out.add((t, ns, cid, task, int(idx)))
    return out


def redis_has(r: redis.Redis, prefix: str, cps: Iterable[Cp], partitions: int = 1) -> list[bool]:
    cps = list(cps)
    pipe = r.pipeline(transaction=False)
    for t, ns, cid in cps:
        pipe.hexists(ThreadKeys(prefix, t, partitions).cp, member(ns, cid))
    return [bool(x) for x in pipe.execute()] if cps else []


def drop_prefix(r: redis.Redis, prefix: str) -> int:
    """Delete every Redis key of a saver with ``key_prefix=prefix`` (threads and outbox)."""
    return drop_key_prefix(r, prefix)  # on a cluster: every primary, DEL split by slot


# --------------------------------------------------------------------------- MongoDB


def mongo_checkpoints(db: Any, threads: Iterable[str] | None = None) -> set[Cp]:
    q = {} if threads is None else {"thread_id": {"$in": list(threads)}}
    return {(d["thread_id"], d["checkpoint_ns"], d["checkpoint_id"])
            for d in db["checkpoints"].find(q, {"thread_id": 1, "checkpoint_ns": 1,
                                                "checkpoint_id": 1})}


def mongo_writes(db: Any, threads: Iterable[str] | None = None) -> set[Wr]:
    """The pending writes MongoDB holds, one per document or several in a document of one
    ``put_writes`` call (``durable/write_groups.py``)."""
    q = {} if threads is None else {"thread_id": {"$in": list(threads)}}
    return {(d["thread_id"], d["checkpoint_ns"], d["checkpoint_id"], d["task_id"], int(i))
            for d in db["writes"].find(q, {"data": 0, "writes.data": 0})
            for i in ([e["idx"] for e in d["writes"]] if "writes" in d else [d["idx"]])}


def mongo_has(db: Any, cps: Iterable[Cp]) -> list[bool]:
    cps = list(cps)
    ids = [doc_id(t, ns, cid) for t, ns, cid in cps]
    found = {d["_id"] for d in db["checkpoints"].find({"_id": {"$in": ids}}, {"_id": 1})}
    return [i in found for i in ids]


def mongo_identity_duplicates(db: Any) -> int:
    """Documents beyond the first with the same identity (``_id`` aside), all collections."""
    n = 0
    for col, ident in (("checkpoints", ["thread_id", "checkpoint_ns", "checkpoint_id"]),
                       ("blobs", ["thread_id", "checkpoint_ns", "channel", "version"])):
        seen: dict[tuple[Any, ...], int] = {}
        for d in db[col].find({}, {k: 1 for k in ident}):
            key = tuple(d.get(k) for k in ident)
            seen[key] = seen.get(key, 0) + 1
        n += sum(c - 1 for c in seen.values() if c > 1)
    # a write: (thread, ns, checkpoint, task, idx) of one call (seq), in either form (a
    # special channel's newer call is another write of the same idx, not a duplicate)
    writes: dict[tuple[Any, ...], int] = {}
    for d in db["writes"].find({}):
        for w in records_of(d):
            key = (d["thread_id"], d["checkpoint_ns"], d["checkpoint_id"], w.task_id, w.idx,
                   w.seq)
            writes[key] = writes.get(key, 0) + 1
    return n + sum(c - 1 for c in writes.values() if c > 1)


# --------------------------------------------------------------------------- both


def expected_docs_from_redis(r: redis.Redis, prefix: str, threads: Iterable[str],
                             partitions: int = 1) -> dict[str, dict[str, dict]]:
    """The MongoDB documents a complete, exact flush of what Redis holds must produce:
    ``{collection: {_id: document}}`` (documents built from the raw Redis records)."""
    out: dict[str, dict[str, dict]] = {"checkpoints": {}, "blobs": {}, "writes": {},
                                       "items": {}}
    for t in threads:
        k = ThreadKeys(prefix, t, partitions)
        cvs = r.hgetall(k.cv)
        cps = []
        for m, raw in r.hgetall(k.cp).items():
            ns, cid = m.decode().split(SEP)
            cps.append(checkpoint_doc(t, CheckpointRecord.unpack(ns, cid, raw, cvs[m])))
        # small values inside the checkpoint that introduced them (the earliest naming
        # them), as the flusher writes them (durable/inline.py); the others blobs
        blobs = place_values(t, cps, {f.decode(): unpack_blob(raw, "expected")
                                      for f, raw in r.hgetall(k.bl).items()})
        for doc in cps:
            out["checkpoints"][doc["_id"]] = doc
        for doc in blobs:
            out["blobs"][doc["_id"]] = doc
        for f, raw in r.hgetall(k.w).items():
            ns, cid, _task, _idx = split_field(f)
            doc = write_doc(t, ns, cid, WriteRecord.unpack(raw, "expected"))
            out["writes"][doc["_id"]] = doc
        for d, raw in r.hgetall(k.it).items():
            doc = item_doc(t, d, raw)
            out["items"][doc["_id"]] = doc
    return out


def compare_docs(expected: dict[str, dict[str, dict]], db: Any, threads: Iterable[str]
                 ) -> dict[str, int]:
    """Compare MongoDB with ``expected``: documents missing, extra, or different. The
    writes are compared as reads see them (``_resolved_writes``)."""
    threads = list(threads)
    missing = extra = different = 0
    for col, want in expected.items():
        found = list(db[col].find({"thread_id": {"$in": threads}}))
        if col == "items":  # a node inside the item completing it: as its own document
            found = [p for d in found for p in split_hosted(d)]
        have = {d["_id"]: d for d in (_resolved_writes(found) if col == "writes" else found)}
        missing += len(set(want) - set(have))
        extra += len(set(have) - set(want))
        for i in set(want) & set(have):
            a, b = dict(want[i]), dict(have[i])
            if _norm(a) != _norm(b):
                different += 1
    return {"missing": missing, "extra": extra, "different": different}


def _resolved_writes(docs: list[dict]) -> list[dict]:
    """The pending writes MongoDB's writes documents ``docs`` hold (one per write, or
    one per ``put_writes`` call), each ``(task, idx)`` of a checkpoint once by LangGraph's
    rule (``write_groups.pending_of``), as the one-per-write documents
    ``expected_docs_from_redis`` builds from Redis."""
    by_cp: dict[tuple[str, str, str], list[dict]] = {}
    for d in docs:
        by_cp.setdefault((d["thread_id"], d["checkpoint_ns"], d["checkpoint_id"]), []).append(d)
    return [write_doc(t, ns, cid, w) for (t, ns, cid), ds in by_cp.items()
            for w in pending_of(ds).values()]


def _norm(doc: dict) -> dict:
    """``doc`` comparable with the one built from Redis: bytes as ``bytes``, and without
    ``put_ms`` (the outbox entry's stream time, which the Redis records do not hold)."""
    return {k: _plain(v) for k, v in doc.items() if k != "put_ms"}


def _plain(value: Any) -> Any:
    """Binary (as built) and bytes (as read back) alike, in lists too (``refs``)."""
    if isinstance(value, (bytes, bytearray)):
        return bytes(value)
    if isinstance(value, list):
        return [_plain(v) for v in value]
    if isinstance(value, dict):  # the entries of vals
        return {k: _plain(v) for k, v in value.items()}
    return value


# --------------------------------------------------------------------------- ack log


class AckLog:
    """Append-only JSON-lines file; each line is written with one ``write`` and fsynced,
    so whatever a killed process recorded is on disk."""

    def __init__(self, path: str) -> None:
        self.path = path
        self._fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)

    def append(self, **rec: Any) -> None:
        os.write(self._fd, (json.dumps(rec) + "\n").encode())
        os.fsync(self._fd)

    @staticmethod
    def read(path: str) -> list[dict[str, Any]]:
        out = []
        try:
            with open(path, encoding="utf-8") as f:
                for line in f:
                    try:
                        out.append(json.loads(line))
                    except ValueError:
                        pass  # a torn last line
        except FileNotFoundError:
            pass
        return out
