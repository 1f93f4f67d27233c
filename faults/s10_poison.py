"""Scenario 10: poison pills. One bad record never blocks the others.

Before a flusher runs, ``per_kind`` threads are damaged in each of seven ways: their
checkpoint hash (``cp``) or channel-value hash (``bl``) or ``meta`` hash replaced by a
string (Redis answers ``WRONGTYPE``), a checkpoint record MongoDB's driver refuses (an
integer no BSON type holds in its queryable metadata), and outbox entries added by hand:
one whose member lacks the NUL separator, one of a kind this release does not know (as a
newer release would write), one whose fields are garbage. Then a flusher starts while
``threads`` healthy threads write ``steps`` super-steps each from ``writers`` threads.

Expected: every acknowledged checkpoint of a healthy thread reaches MongoDB (0 lost); each
damaged entry is dead-lettered with its payload and named by ``flush()``
(``DeadLetteredError``); after the damage is repaired, replaying the dead letters of the
repairable kinds brings their checkpoints into MongoDB (the others are dropped), and
``flush()`` is green again.
"""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import ormsgpack
from langgraph.checkpoint.base import empty_checkpoint

from langgraph_durable import DurableSaver
from langgraph_durable.core.outbox_entry import OutboxEntry
from langgraph_durable.errors import DeadLetteredError
from langgraph_durable.io.drivers import run_sync
from langgraph_durable.outbox import dead

from .common import Env, cleanup, names
from .result import Result

KINDS = ("cp-wrongtype", "bl-wrongtype", "meta-wrongtype", "mongo-refuses", "no-separator",
         "unknown-kind", "garbage-fields")
REPAIRABLE = {"cp-wrongtype", "bl-wrongtype", "meta-wrongtype", "mongo-refuses"}
"""Kinds whose thread's data can be repaired and the dead letter replayed (the others are
entries that name nothing real: dropped)."""


def _steps(saver: DurableSaver, thread: str, steps: int) -> list[str]:
    """``steps`` super-steps (a put with one channel value and a put_writes); returns the
    acknowledged checkpoint ids."""
    cfg: Any = {"configurable": {"thread_id": thread, "checkpoint_ns": ""}}
    ids = []
    for i in range(steps):
        cp = empty_checkpoint()
        cp["channel_values"] = {"count": i}
        cp["channel_versions"] = {"count": f"{i + 1:032}.0"}
        cfg = saver.put(cfg, cp, {"step": i, "n": i}, {"count": f"{i + 1:032}.0"})
        saver.put_writes(cfg, [("count", i + 1)], f"task-{i}")
        ids.append(cfg["configurable"]["checkpoint_id"])
    return ids


def _damage(saver: DurableSaver, kind: str, thread: str) -> dict[str, Any]:
    """Damage ``thread`` (one super-step written) in the way ``kind``; returns how to
    repair it."""
    r, ctx = saver.sync_clients.redis, saver.context
    k = ctx.keys(thread)
    if kind in ("cp-wrongtype", "bl-wrongtype", "meta-wrongtype"):
        key = {"cp-wrongtype": k.cp, "bl-wrongtype": k.bl, "meta-wrongtype": k.meta}[kind]
        r.rename(key, key + ":backup")
        r.set(key, "damaged")
        return {"restore": key}
    if kind == "mongo-refuses":
        (m,) = r.hkeys(k.cp)
        raw = r.hget(k.cp, m)
        rec = ormsgpack.unpackb(raw)
        rec[7] = [["n", 2**63]]  # no BSON integer holds it
        r.hset(k.cp, m, ormsgpack.packb(rec))
        return {"record": (k.cp, m, raw)}
    fields = {
        "no-separator": OutboxEntry(thread, "cp", "no-separator", [], [], 0).fields(),
        "unknown-kind": OutboxEntry(thread, "zz", "", [], [], 0).fields(),
        "garbage-fields": {b"t": thread.encode(), b"x": b"\xff\x00"},
    }[kind]
    r.xadd(ctx.outbox_of(thread), fields)
    return {}


def _repair(saver: DurableSaver, how: dict[str, Any]) -> None:
    r = saver.sync_clients.redis
    if "restore" in how:
        key = how["restore"]
        r.delete(key)
        r.rename(key + ":backup", key)
    if "record" in how:
        key, m, raw = how["record"]
        r.hset(key, m, raw)


def run(env: Env, threads: int = 200, per_kind: int = 10, steps: int = 3,
        writers: int = 8) -> Result:
    res = Result("s10", "10. poison pills: damaged records among threads under load")
    began = time.monotonic()
    prefix, database = names("s10")
    opts = {"key_prefix": prefix, "database": database}
    try:
        with DurableSaver.from_urls(env.redis_url, env.mongo_url, flusher="off",
                                    **opts) as app:
            damaged: dict[str, tuple[str, dict[str, Any], list[str]]] = {}
            for kind in KINDS:
                for i in range(per_kind):
                    t = f"{kind}-{i}"
                    ids = _steps(app, t, 1)
                    damaged[t] = (kind, _damage(app, kind, t), ids)
            healthy = [f"ok-{i}" for i in range(threads)]
            with DurableSaver.from_urls(env.redis_url, env.mongo_url, flusher="auto",
                                        **opts):  # the flusher
                with ThreadPoolExecutor(writers) as pool:
                    acked = dict(zip(healthy, pool.map(lambda t: _steps(app, t, steps),
                                                       healthy)))
                named: list[tuple[str, str, str]] = []
                try:
                    app.flush(timeout_s=120)
                except DeadLetteredError as exc:
                    named = exc.entries
                _check(res, app, acked, damaged, named)
                _replay(res, app, damaged)
            res.records = [{"named": len(named)}]
    finally:
        cleanup(env.redis_url, env.mongo_url, prefix, database)
    res.seconds = time.monotonic() - began
    return res


def _in_mongo(saver: DurableSaver, thread_ids: list[str]) -> set[tuple[str, str]]:
    col = saver.sync_clients.db[saver.context.collections.checkpoints]
    return {(d["thread_id"], d["checkpoint_id"]) for d in col.find(
        {"thread_id": {"$in": thread_ids}}, {"thread_id": 1, "checkpoint_id": 1})}


def _check(res: Result, app: DurableSaver, acked: dict[str, list[str]],
           damaged: dict[str, tuple[str, dict[str, Any], list[str]]],
           named: list[tuple[str, str, str]]) -> None:
    stored = _in_mongo(app, list(acked))
    want = {(t, c) for t, ids in acked.items() for c in ids}
    res.trials = len(acked) + len(damaged)
    res.faults = len(damaged)
    res.acked = len(want)
    res.lost = len(want - stored)
    letters = run_sync(dead.list_plan(app.context), app.sync_clients)
    by_thread = {d.thread_id: d for d in letters}
    missing = sorted(t for t in damaged if t not in by_thread)
    # a thread whose settle failed has its records in MongoDB; its dead letter follows
    # the acknowledgement by one round trip, so a flush may return in between
    unnamed = sorted(t for t, (kind, _h, _i) in damaged.items()
                     if t not in {n[0] for n in named} and kind != "meta-wrongtype")
    no_payload = sorted(d.thread_id for d in letters if not d.fields)
    strays = sorted(d.thread_id for d in letters if d.thread_id not in damaged)
    res.mismatches = len(missing) + len(unnamed) + len(no_payload) + len(strays)
    for what, ts in (("not dead-lettered", missing), ("not named by flush()", unnamed),
                     ("dead-lettered without payload", no_payload),
                     ("healthy threads dead-lettered", strays)):
        if ts:
            res.findings.append(f"{len(ts)} {what}: {', '.join(ts[:5])}")
    steps: dict[str, int] = {}
    for d in letters:
        steps[d.step] = steps.get(d.step, 0) + 1
    res.measures["dead letters"] = len(letters)
    res.measures["by step"] = ", ".join(f"{k} {v}" for k, v in sorted(steps.items()))
    res.measures["named by flush()"] = len(named)


def _replay(res: Result, app: DurableSaver,
            damaged: dict[str, tuple[str, dict[str, Any], list[str]]]) -> None:
    letters = run_sync(dead.list_plan(app.context), app.sync_clients)
    fixable = [d for d in letters if damaged.get(d.thread_id, ("",))[0] in REPAIRABLE]
    for kind, how, _ids in damaged.values():
        if kind in REPAIRABLE:
            _repair(app, how)
    done = run_sync(dead.replay_plan(app.context, fixable), app.sync_clients)
    dropped = run_sync(dead.drop_plan(app.context, [d for d in letters if d not in fixable]),
                       app.sync_clients)
    green = True
    try:
        app.flush(timeout_s=120)
    except DeadLetteredError as exc:
        green = False
        res.findings.append(f"flush() after replay still raises: {exc}")
    want = {(t, c) for t, (kind, _h, ids) in damaged.items() if kind in REPAIRABLE
            for c in ids}
    brought = want & _in_mongo(app, [t for t, _ in want])
    res.measures["replayed"] = len(done.replayed)
    res.measures["replayed checkpoints in MongoDB"] = f"{len(brought)} of {len(want)}"
    res.measures["dropped (unrepairable)"] = dropped
    res.measures["flush() green after replay"] = green
    if len(brought) != len(want):
        res.findings.append(f"{len(want) - len(brought)} repaired checkpoints did not reach "
                            "MongoDB after replay")
