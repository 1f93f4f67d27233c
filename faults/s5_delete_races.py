"""Scenario 5: deletes racing the flusher, against a model of what must exist.

Each interleaving is a random sequence of saver calls on three threads (two namespaces,
two run ids): ``put``, ``put_writes`` (to any stored checkpoint, special channels
included), ``delete_thread``, ``delete_for_runs``, ``prune`` (both strategies),
``copy_thread``, flush rounds by several consumers with random batch sizes (the saver has
``flusher="off"``; rounds are ``flush_batch_plan`` driven by ``run_sync``, as a worker
does), re-deliveries of old outbox entries (copies added to the stream, as in
``tests/test_outbox.py``), entries read and abandoned by a "ghost" consumer (so they stay
pending until another consumer claims them with ``XAUTOCLAIM``), and hot-window expiry
(a settled thread's Redis keys removed, as their TTL would). An admin call (delete, prune,
copy) runs in its own thread while this one keeps flushing, re-delivering and writing to
threads the call does not touch. A model (a dict of what InMemorySaver would hold)
follows the same sequence.

After a delete, a run still going may write to a checkpoint it removed (``late_write``):
that write must be refused (``ThreadDeletedError``).

After every step: each thread's ``list`` (checkpoints, metadata, channel values, pending
writes) equals the model; no checkpoint or write the model does not hold is stored in
Redis or in MongoDB (resurrected); nothing the model holds is missing from both (lost).
At the end the outbox is drained, every old entry re-delivered once more and drained,
Redis emptied, and the threads compared again from MongoDB alone.

After some admin calls Redis loses its data (``redis_loss``, on in every variant): once the
outbox is drained (what was acknowledged and not yet flushed would be lost with any
Redis), either every key of the key prefix goes (a new Redis: threads, tombstones, outbox
and consumer group) or only the threads' tombstones (their 7-day TTL passed); then runs
still going write to checkpoints deleted at any time before (``late_write``), and each
must be refused from MongoDB's tombstones. Stalled rounds (5b) are woken first: a round
that read its records from the lost Redis and wrote them after a delete that Redis lost
the tombstones of is not modelled (the fence asks Redis's tombstones only).

``stalled_rounds=True`` (scenario 5b) adds a stalled flusher: a round that read its entries and
the records from Redis, then stops before its MongoDB write (a GC pause, a slow network)
past ``claim_idle_s``; another consumer claims and flushes its entries, an admin call
deletes, and the stalled round then completes its write.
"""

from __future__ import annotations

import dataclasses
import random
import threading
import time
from collections import defaultdict
from typing import Any

import ormsgpack
from langgraph.checkpoint.base import WRITES_IDX_MAP, empty_checkpoint

from langgraph_durable import DurableSaver, ThreadDeletedError
from langgraph_durable.hot.keys import CONSUMER_GROUP
from langgraph_durable.io.drivers import MongoOp, Plan, run_sync
from langgraph_durable.outbox.flusher import flush_batch_plan
from langgraph_durable.outbox.group import ensure_group_plan
from langgraph_durable.testing import drop_key_prefix

from .common import Env, cleanup, clients, names
from .result import Result
from .tiers import mongo_checkpoints, mongo_writes, redis_checkpoints, redis_writes

# A copy of an outbox entry counted as a put counts it (see Interleaving.readd), the
# thread's generation ('born') included: a counted entry is never older than 'born', or
# the settle that skips older generations' entries would leave it counted forever. A
# thread deleted since (no meta) gets its copy uncounted, as a retried put of it would be
# refused. KEYS: the thread's nine keys, its outbox partition; ARGV: member, thread_id,
# payload.
_READD = r"""
if redis.call('EXISTS', KEYS[8]) == 1 then
  if redis.call('HSETNX', KEYS[8], 'born', 0) == 1 then  -- a released thread's marker
    local clock = redis.call('TIME')
    redis.call('HSET', KEYS[8], 'born', tonumber(clock[1]) * 1000
               + math.floor(tonumber(clock[2]) / 1000))
  end
  redis.call('HINCRBY', KEYS[8], 'dirty', 1)
  redis.call('HINCRBY', KEYS[8], 'u' .. ARGV[1], 1)
  for i = 1, 9 do redis.call('PERSIST', KEYS[i]) end
end
return redis.call('XADD', KEYS[10], '*', 't', ARGV[2], 'p', ARGV[3])
"""

AFTER_LOSS = " after Redis lost its data"
"""Suffix of the late-write figures counted after ``lose_redis``."""

NAMESPACES = ["", "sub:1"]
TASKS = ["task-a", "task-b", "task-c"]
WRITE_CHANNELS = ["x", "y", "__interrupt__", "__error__"]


class Model:
    """What must exist: InMemorySaver's view of the same calls."""

    def __init__(self) -> None:
        self.cps: dict[tuple[str, str, str], dict[str, Any]] = {}
        self.writes: dict[tuple[str, str, str, str, int], tuple[str, Any]] = {}

    def latest(self, t: str, ns: str) -> str | None:
        ids = [c for (tt, n, c) in self.cps if tt == t and n == ns]
        return max(ids) if ids else None

    def put(self, t: str, ns: str, cid: str, rec: dict[str, Any]) -> None:
        self.cps[(t, ns, cid)] = rec

    def put_writes(self, t: str, ns: str, cid: str, task: str, writes: list[Any]) -> None:
        for pos, (ch, v) in enumerate(writes):
            key = (t, ns, cid, task, WRITES_IDX_MAP.get(ch, pos))
            if key[4] >= 0 and key in self.writes:
                continue
            self.writes[key] = (ch, v)

    def _drop(self, cps: set[tuple[str, str, str]]) -> None:
        for k in cps:
            self.cps.pop(k, None)
        for w in [w for w in self.writes if w[:3] in cps]:
            del self.writes[w]

    def delete_thread(self, t: str) -> None:
        self._drop({k for k in self.cps if k[0] == t})

    def delete_for_runs(self, runs: list[str]) -> None:
        self._drop({k for k, v in self.cps.items() if v["md"]["run_id"] in runs})

    def prune_keep_latest(self, t: str) -> None:
        keep = {(t, ns, self.latest(t, ns)) for ns in NAMESPACES}
        self._drop({k for k in self.cps if k[0] == t and k not in keep})

    def copy_thread(self, src: str, dst: str) -> None:
        # a copied checkpoint's pending writes on dst become the source's, exactly
        copied = {(ns, cid) for (t, ns, cid) in self.cps if t == src}
        theirs = {k[1:]: v for k, v in self.writes.items() if k[0] == src}
        for key in [k for k in self.writes if k[0] == dst and k[1:3] in copied]:
            del self.writes[key]
        for (t, ns, cid), v in list(self.cps.items()):
            if t == src:
                self.cps[(dst, ns, cid)] = v
        for rest, v in theirs.items():
            self.writes[(dst, *rest)] = v

    def view(self, t: str) -> dict[tuple[str, str], Any]:
        out = {}
        for (tt, ns, cid), v in self.cps.items():
            if tt != t:
                continue
            ws = sorted(((task, idx, ch, val) for (t2, n2, c2, task, idx), (ch, val)
                         in self.writes.items() if (t2, n2, c2) == (t, ns, cid)),
                        key=lambda w: ("", w[0], w[1]))
            out[(ns, cid)] = (v["parent"], v["md"], v["values"],
                              [(task, ch, val) for task, _idx, ch, val in ws])
        return out


def saver_view(saver: DurableSaver, t: str) -> dict[tuple[str, str], Any]:
    out = {}
    for tup in saver.list({"configurable": {"thread_id": t}}):
        c = tup.config["configurable"]
        parent = (tup.parent_config or {}).get("configurable", {}).get("checkpoint_id")
        out[(c["checkpoint_ns"], c["checkpoint_id"])] = (
            parent, dict(tup.metadata), dict(tup.checkpoint["channel_values"]),
            [tuple(w) for w in tup.pending_writes or []])
    return out


def _until_mongo(gen: Plan) -> Plan:
    """Drive a flush round up to (not including) its first MongoDB write; return that op
    (None when the round had nothing to write)."""
    send: Any = None
    while True:
        try:
            op = gen.send(send)
        except StopIteration:
            return None
        if isinstance(op, MongoOp):
            return op
        send = yield op


def _resume(gen: Plan, op: Any) -> Plan:
    """Finish a parked round: execute ``op``, then the rest of the round."""
    while True:
        try:
            send = yield op
        except Exception as exc:
            try:
                op = gen.throw(exc)
            except StopIteration as stop:
                return stop.value
            continue
        try:
            op = gen.send(send)
        except StopIteration as stop:
            return stop.value


class Interleaving:
    def __init__(self, env: Env, i: int, rng: random.Random, saver: DurableSaver,
                 r: Any, db: Any, *, copies: bool, stalled_rounds: bool,
                 repeat_tasks: bool, redis_loss: bool = True) -> None:
        self.env, self.rng, self.saver, self.r, self.db = env, rng, saver, r, db
        self.ctx = saver.context
        self.copies, self.stalled_rounds = copies, stalled_rounds
        self.repeat_tasks = repeat_tasks
        self.redis_loss = redis_loss
        self.removed: set[tuple[str, str, str]] = set()  # every checkpoint a call removed
        self.race_copies = stalled_rounds and copies
        self.written: set[tuple[str, str, str, str, int]] = set()
        self.threads = [f"s5-{i}-{k}" for k in range(3)]
        self.runs = [f"run-{i}-a", f"run-{i}-b"]
        self.model = Model()
        self.seen: list[dict[bytes, bytes]] = []
        self.step = 0
        self.parked: list[tuple[Plan, Any]] = []
        self.figures = defaultdict(int)
        self.trace: list[str] = []

    # ------------------------------------------------------------------ operations

    def put(self, t: str, *, run: str | None = None) -> None:
        """A checkpoint child of the latest of (thread, ns), as LangGraph makes them:
        channel ``n`` changes every time, ``tag`` now and then (so blobs are shared)."""
        rng = self.rng
        ns = rng.choice(NAMESPACES)
        run = run or rng.choice(self.runs)
        parent = self.model.latest(t, ns)
        base = self.model.cps[(t, ns, parent)] if parent else None
        self.step += 1
        vals = dict(base["values"]) if base else {}
        versions = dict(base["versions"]) if base else {}
        vals["n"] = self.step
        changed = ["n"]
        if base is None or rng.random() < 0.3:
            vals["tag"] = f"tag-{self.step}"
            changed.append("tag")
        new = {}
        for ch in changed:
            new[ch] = versions[ch] = self.saver.get_next_version(versions.get(ch), None)
        cp = empty_checkpoint()
        cp["channel_values"] = dict(vals)
        cp["channel_versions"] = dict(versions)
        md = {"step": self.step, "run_id": run, "source": "loop"}
        cfg: dict[str, Any] = {"configurable": {"thread_id": t, "checkpoint_ns": ns}}
        if parent:
            cfg["configurable"]["checkpoint_id"] = parent
        self.saver.put(cfg, cp, md, new)
        self.model.put(t, ns, cp["id"], {"parent": parent, "md": md, "values": vals,
                                         "versions": versions})
        self.trace.append(f"put {t} {ns!r} {cp['id'][-6:]} {run}")

    def put_writes(self, t: str) -> None:
        stored = [k for k in self.model.cps if k[0] == t]
        if not stored:
            return self.put(t)
        _, ns, cid = self.rng.choice(stored)
        task = self.rng.choice(TASKS)
        writes = [(ch, f"{ch}-{self.step}-{self.rng.randint(0, 9)}")
                  for ch in self.rng.sample(WRITE_CHANNELS, self.rng.randint(1, 2))]
        if self.repeat_tasks and self.rng.random() < 0.6:  # the same task writes again
            task, writes = TASKS[0], [("x", f"x-{self.step}")]
        if not self.repeat_tasks:  # an ordinary (task, idx) is written once, as LangGraph does
            writes = [(ch, v) for pos, (ch, v) in enumerate(writes)
                      if ch in WRITES_IDX_MAP or (t, ns, cid, task, pos) not in self.written]
            if not writes:
                return None
        self.written |= {(t, ns, cid, task, pos) for pos in range(len(writes))}
        self.step += 1
        cfg = {"configurable": {"thread_id": t, "checkpoint_ns": ns, "checkpoint_id": cid}}
        self.saver.put_writes(cfg, writes, task)
        self.model.put_writes(t, ns, cid, task, writes)
        self.trace.append(f"put_writes {t} {cid[-6:]} {task} {[w[0] for w in writes]}")
        return None

    def late_write(self, key: tuple[str, str, str], when: str = "") -> None:
        """A run still going writes to a checkpoint a delete just removed: refused with
        ``ThreadDeletedError``; one taken would be found resurrected by ``check``."""
        t, ns, cid = key
        cfg = {"configurable": {"thread_id": t, "checkpoint_ns": ns, "checkpoint_id": cid}}
        try:
            if self.rng.random() < 0.5:
                self.saver.put_writes(cfg, [("x", f"late-{self.step}")], "task-late")
            else:
                cp = empty_checkpoint()
                cp["channel_values"] = {"n": -1}
                cp["channel_versions"] = {"n": self.saver.get_next_version(None, None)}
                self.saver.put(cfg, cp, {"step": -1, "run_id": "late", "source": "loop"},
                               dict(cp["channel_versions"]))
        except ThreadDeletedError:
            self.figures["late writes refused" + when] += 1
            self.trace.append(f"late write {t} {cid[-6:]} refused{when}")
            return
        self.figures["late writes taken" + when] += 1
        self.trace.append(f"late write {t} {cid[-6:]} TAKEN{when}")

    def snapshot_outbox(self) -> None:
        for stream in self.ctx.outboxes:  # one per partition (16 on a cluster)
            for _eid, fields in self.r.xrange(stream):
                if fields not in self.seen:
                    self.seen.append(fields)

    def readd(self, fields: dict[bytes, bytes]) -> None:
        """Add a copy of an old entry to its thread's outbox partition, as the product
        can: only its put scripts add outbox entries, and each counts the entry it adds
        (meta ``dirty`` and ``u<member>``, keys persisted) in the same script, as a put
        retried after its reply was lost would. A bare ``XADD`` broke that invariant: the
        copy's acknowledgement settled the thread while a real entry was pending, the
        simulated TTL expiry then removed its records (the 5c loss on the cluster)."""
        t = fields[b"t"].decode()
        keys = self.ctx.keys(t).all
        member = ormsgpack.unpackb(fields[b"p"])[1]
        self.r.eval(_READD, len(keys) + 1, *keys, self.ctx.outbox_of(t), member,
                    fields[b"t"], fields[b"p"])

    def backlog(self) -> int:
        return sum(self.r.xlen(s) for s in self.ctx.outboxes)

    def flush_round(self, claim: bool | None = None) -> int:
        self.snapshot_outbox()
        batch = self.rng.choice([1, 2, 5, 500])
        ctx = dataclasses.replace(  # the same partitions, cluster flag and heads
            self.ctx, config=self.ctx.config.model_copy(update={"flush_batch_size": batch}))
        claim = self.rng.random() < 0.5 if claim is None else claim
        consumer = self.rng.choice(["c1", "c2"])
        stats = run_sync(flush_batch_plan(ctx, consumer, block_ms=0, claim=claim),
                         self.saver.sync_clients)
        self.figures["flush rounds"] += 1
        return stats.entries

    def redeliver(self) -> None:
        if self.copies and self.seen:
            self.readd(self.rng.choice(self.seen))
            self.figures["re-deliveries (copies)"] += 1

    def ghost(self) -> None:
        stream = self.ctx.outbox_of(self.rng.choice(self.threads))  # one slot per call
        got = self.r.xreadgroup(CONSUMER_GROUP, "ghost", {stream: ">"},
                                count=self.rng.randint(1, 3))
        self.figures["entries abandoned by a ghost"] += sum(len(e) for _, e in got or [])

    def expire(self) -> None:
        t = self.rng.choice(self.threads)
        keys = self.ctx.keys(t)
        if self.r.ttl(keys.cp) > 0:  # settled: everything of it is in MongoDB
            self.r.delete(*keys.all)
            self.figures["hot windows expired"] += 1
            self.trace.append(f"expire {t}")

    def park_stalled_round(self) -> None:
        gen = flush_batch_plan(self.ctx, f"stalled-{len(self.parked)}", block_ms=0, claim=False)
        op = run_sync(_until_mongo(gen), self.saver.sync_clients)
        if op is not None:
            self.parked.append((gen, op))
            self.trace.append("stalled round parked")

    def wake_stalled_round(self) -> None:
        if self.parked:
            gen, op = self.parked.pop(0)
            run_sync(_resume(gen, op), self.saver.sync_clients)
            self.figures["stalled rounds resumed"] += 1
            self.trace.append("stalled round resumed")

    def admin(self) -> None:
        rng, s, m = self.rng, self.saver, self.model
        kind = rng.choice(["delete_thread", "delete_for_runs", "prune_keep_latest",
                           "prune_delete", "copy_thread"])
        t, other = rng.sample(self.threads, 2)
        if kind == "delete_thread":
            call, apply, busy = (lambda: s.delete_thread(t)), (lambda: m.delete_thread(t)), {t}
        elif kind == "delete_for_runs":
            run = rng.choice(self.runs)
            call = lambda: s.delete_for_runs([run])  # noqa: E731
            apply, busy = (lambda: m.delete_for_runs([run])), set(self.threads)
            t = run
        elif kind == "prune_keep_latest":
            call = lambda: s.prune([t], strategy="keep_latest")  # noqa: E731
            apply, busy = (lambda: m.prune_keep_latest(t)), {t}
        elif kind == "prune_delete":
            call = lambda: s.prune([t], strategy="delete")  # noqa: E731
            apply, busy = (lambda: m.delete_thread(t)), {t}
        else:
            call = lambda: s.copy_thread(t, other)  # noqa: E731

            def apply() -> None:
                m.copy_thread(t, other)  # the target's copied checkpoints: the source's writes
                self.written |= {(other, *w[1:]) for w in self.written if w[0] == t}

            busy = {t, other}
        errors: list[BaseException] = []

        def go() -> None:
            try:
                call()
            except BaseException as exc:
                errors.append(exc)

        if self.stalled_rounds and rng.random() < 0.7:
            self.park_stalled_round()  # a round stalls with its records read
        worker = threading.Thread(target=go)
        worker.start()
        free = [x for x in self.threads if x not in busy]
        deadline = time.monotonic() + 60
        while worker.is_alive():  # keep the outbox moving (and racing) meanwhile
            x = rng.random()
            if x < 0.75:
                self.flush_round(claim=True)
            elif x < 0.85:
                if self.race_copies:  # a duplicate delivery while the call runs
                    self.redeliver()
            elif free:
                self.put(rng.choice(free), run=f"free-{self.step}")
            worker.join(0.001)
            if time.monotonic() > deadline:
                raise RuntimeError(f"{kind} did not finish in 60 s")
        if errors:
            raise errors[0]
        before = set(m.cps)
        apply()
        removed = sorted(before - set(m.cps))
        self.removed |= set(removed)
        if removed and rng.random() < 0.6:
            self.late_write(rng.choice(removed))
        self.figures[kind] += 1
        self.trace.append(f"{kind} {t}" + (f" -> {other}" if kind == "copy_thread" else ""))
        if self.stalled_rounds:
            self.wake_stalled_round()
        if self.redis_loss and rng.random() < 0.3:
            self.lose_redis()

    def lose_redis(self) -> None:
        """Redis loses its data after deletes (see the module docstring), then up to three
        late writes name checkpoints removed at any time before: each refused."""
        while self.parked:
            self.wake_stalled_round()
        self.drain()
        if self.rng.random() < 0.5:
            drop_key_prefix(self.r, self.ctx.config.key_prefix)  # a new Redis
            # its outbox and consumer group, made again as a flusher's next round does
            run_sync(ensure_group_plan(self.ctx), self.saver.sync_clients)
            self.seen.clear()  # the lost outbox's entries are never delivered again
            self.figures["Redis data lost (a new Redis)"] += 1
            self.trace.append("Redis lost its data")
        else:
            self.r.delete(*[self.ctx.keys(t).gone for t in self.threads])
            self.figures["Redis data lost (tombstones expired)"] += 1
            self.trace.append("Redis's tombstones expired")
        gone = sorted(self.removed - set(self.model.cps))  # not stored again by a copy
        for key in self.rng.sample(gone, min(3, len(gone))):
            self.late_write(key, AFTER_LOSS)

    # ------------------------------------------------------------------ checks

    def check(self, where: str) -> dict[str, int]:
        got = {"mismatch": 0, "resurrected": 0, "lost": 0}
        differ: list[str] = []  # the first mismatches: thread, key, the model's, the saver's
        for t in self.threads:
            want, have = self.model.view(t), saver_view(self.saver, t)
            keys = [k for k in set(want) | set(have) if want.get(k) != have.get(k)]
            got["mismatch"] += len(keys)
            differ += [f"{t} {k!r}: model {want.get(k)!r}, saver {have.get(k)!r}"[:400]
                       for k in sorted(keys, key=repr)[:2]]
        prefix = self.ctx.config.key_prefix
        parts = self.ctx.partitions
        cps_r = redis_checkpoints(self.r, prefix, self.threads, parts)
        cps_m = mongo_checkpoints(self.db, self.threads)
        ws_r = redis_writes(self.r, prefix, self.threads, parts)
        ws_m = mongo_writes(self.db, self.threads)
        cps, ws = set(self.model.cps), set(self.model.writes)
        extra = sorted([("redis", *k) for k in (cps_r - cps) | (ws_r - ws)]
                       + [("mongo", *k) for k in (cps_m - cps) | (ws_m - ws)])
        got["resurrected"] = len(cps_r - cps) + len(cps_m - cps) + len(ws_r - ws) + \
            len(ws_m - ws)
        got["lost"] = len(cps - cps_r - cps_m) + len(ws - ws_r - ws_m)
        if any(got.values()) and "first_failure" not in self.figures:
            self.figures["first_failure"] = 1
            self.trace.append(f"FAILED at {where}: {got}; extra {extra[:4]}; "
                              f"differ {differ[:3]}")
        return got

    def drain(self) -> None:
        deadline = time.monotonic() + 60
        while self.backlog():
            self.flush_round(claim=True)
            if time.monotonic() > deadline:
                raise RuntimeError("the outbox did not drain in 60 s")

    def run(self, steps: int) -> dict[str, int]:
        total = {"mismatch": 0, "resurrected": 0, "lost": 0}

        def add(d: dict[str, int]) -> None:
            for k, v in d.items():
                total[k] += v

        for t in self.threads:  # every thread starts with a little history
            self.put(t)
        for n in range(steps):
            x = self.rng.random()
            if x < 0.25:
                self.put(self.rng.choice(self.threads))
            elif x < 0.42:
                self.put_writes(self.rng.choice(self.threads))
            elif x < 0.62:
                self.flush_round()
            elif x < 0.70:
                self.redeliver()
            elif x < 0.76:
                self.ghost()
            elif x < (0.88 if self.repeat_tasks else 0.80):
                self.expire()
            elif x < 0.83 and self.stalled_rounds:
                self.park_stalled_round()
            else:
                self.admin()
            add(self.check(f"step {n}"))
        # the end: drain, re-deliver everything once more, drain, then MongoDB alone
        self.drain()
        while self.parked:
            self.wake_stalled_round()
        if self.copies:
            for fields in self.seen:
                self.readd(fields)
        self.drain()
        add(self.check("drained"))
        for t in self.threads:
            self.r.delete(*self.ctx.keys(t).all)
        add(self.check("MongoDB alone"))
        return total


TITLES = {
    "s5": "5. deletes racing the flusher (randomized interleavings against a model)",
    "s5b": "5b. as 5, plus duplicate deliveries while a delete runs: old entries re-added, "
           "flusher rounds stalled past claim_idle_s",
    "s5c": "5c. as 5, with put_writes repeating a task's (task_id, idx) (insert-once)",
}


def run(env: Env, interleavings: int, steps: int = 24, seed: int = 5,
        stalled_rounds: bool = False, repeat_tasks: bool = False) -> Result:
    key = "s5b" if stalled_rounds else "s5c" if repeat_tasks else "s5"
    res = Result(key, TITLES[key])
    began = time.monotonic()
    figures: dict[str, int] = defaultdict(int)
    failed: list[list[str]] = []
    totals = {"mismatch": 0, "resurrected": 0, "lost": 0}
    chunk = 50  # a fresh key prefix and database per chunk keeps every query small
    for first in range(0, interleavings, chunk):
        prefix, database = names("s5")
        opts = {"key_prefix": prefix, "database": database, "flusher": "off",
                "claim_idle_s": 0.001, "delete_flush_timeout_s": 30}
        try:
            with DurableSaver.from_urls(env.redis_url, env.mongo_url, **opts) as saver, \
                    clients(env.redis_url, env.mongo_url) as (r, m):
                for i in range(first, min(first + chunk, interleavings)):
                    it = Interleaving(env, i, random.Random(seed * 1_000_003 + i), saver, r,
                                      m[database], copies=i % 2 == 0,
                                      stalled_rounds=stalled_rounds, repeat_tasks=repeat_tasks)
                    got = it.run(steps)
                    for k, v in got.items():
                        totals[k] += v
                    for k, v in it.figures.items():
                        figures[k] += v
                    if any(got.values()):
                        failed.append(it.trace)
                    res.acked = (res.acked or 0) + sum(1 for x in it.trace
                                                       if x.startswith("put "))
        finally:
            cleanup(env.redis_url, env.mongo_url, prefix, database)
    res.trials = interleavings
    res.faults = sum(v for k, v in figures.items() if k in (
        "re-deliveries (copies)", "entries abandoned by a ghost", "hot windows expired",
        "stalled rounds resumed", "delete_thread", "delete_for_runs", "prune_keep_latest",
        "prune_delete", "copy_thread", "Redis data lost (a new Redis)",
        "Redis data lost (tombstones expired)"))
    res.resurrected = totals["resurrected"]
    res.lost = totals["lost"]
    res.mismatches = totals["mismatch"]
    figures.pop("first_failure", None)
    res.measures = dict(sorted(figures.items()))
    res.measures["interleavings failing"] = len(failed)
    if failed:
        first = failed[0]
        at = next((k for k, x in enumerate(first) if x.startswith("FAILED")), len(first))
        res.notes.append("first failing interleaving (steps before the failure): "
                         + " / ".join(first[max(0, at - 7):at + 1]))
    res.records = [{"trace": t} for t in failed]
    res.seconds = time.monotonic() - began
    return res

