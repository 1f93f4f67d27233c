"""The long-term memory store (``DurableStore``) under the faults of scenarios 1, 3 and 4:
puts and deletes of store items, each acknowledged one recorded, then the fault, then a
look at what MongoDB holds and what a fresh store answers (also from MongoDB alone).

- ``app_killed`` (scenario 1): a child process (``faults.store_child``) runs a sequence of
  puts, deletes and batches on ``saver.store()`` and is SIGKILLed before, during or after
  one of them, in a round of its flusher, or at a random time;
- ``mongo_down`` (scenario 3): puts and deletes while MongoDB is stopped (some refused
  with ``OutboxFullError`` past ``max_outbox``), then MongoDB restarted;
- ``redis_lost`` (scenario 4): the store's Redis keys deleted after a flush, then more
  puts and deletes (of items only MongoDB holds now), then deleted again;
  ``redis_killed`` (scenario 4): Redis with AOF SIGKILLed while a store without a flusher
  writes, restarted on its data folder.

The promise checked (``check``): every acknowledged put is there with its last
acknowledged value (else it is *lost*), every item whose last acknowledged operation is a
delete is absent (else it is *back*: resurrected). An operation that was running when the
process died may have taken effect or not (each of a batch's items on its own). Reads are
compared three ways: MongoDB's documents, a fresh store's ``get`` of each item, its
``search`` of everything; and again after the Redis keys are deleted.
"""

from __future__ import annotations

import random
import time
from dataclasses import dataclass, field
from typing import Any

from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

from langgraph_durable import DurableStore
from langgraph_durable.durable.store_docs import record_of
from langgraph_durable.errors import OutboxFullError
from langgraph_durable.testing import mongo_server

from .common import Child, Env, cleanup, clients, names
from .tiers import AckLog, drop_prefix, wait_for

NAMESPACES = (("mem", "u1"), ("mem", "u2"), ("mem", "u2", "notes"))
KEYS = ("a", "b", "c", "d")
Item = tuple[tuple[str, ...], str]
FLUSH_POINTS = ("before_mongo", "mid_mongo", "before_ack", "after_ack")


def make_ops(rng: random.Random, n: int, tag: str = "") -> list[dict[str, Any]]:
    """``n`` operations on the 12 items of ``NAMESPACES`` x ``KEYS``: about 60% one put,
    25% one delete, 15% a batch of 2 or 3 puts and deletes. Each put's value is unique:
    ``{"n": <op>, "tag": tag, "text": ...}``."""
    ops = []
    for i in range(n):
        size = rng.choice((2, 3)) if rng.random() < 0.15 else 1
        chosen = rng.sample([(ns, k) for ns in NAMESPACES for k in KEYS], size)
        items = []
        for j, (ns, key) in enumerate(chosen):
            put = rng.random() < (0.7 if size == 1 else 0.6)
            items.append([list(ns), key, {"n": i, "j": j, "tag": tag,
                                          "text": f"memory {i}.{j} {tag}"} if put else None])
        ops.append({"items": items})
    return ops


@dataclass
class Outcome:
    """What the sequence of ops should have left: per item, ``last`` (the value of its
    last acknowledged op: a dict, or None for a delete), ``maybe`` (values an op in flight
    at the fault may have left), and the counts of acknowledged puts and deletes."""

    last: dict[Item, dict[str, Any] | None] = field(default_factory=dict)
    maybe: dict[Item, list[dict[str, Any] | None]] = field(default_factory=dict)
    puts: int = 0
    deletes: int = 0

    def apply(self, op: dict[str, Any], acked: bool) -> None:
        """Record ``op``: acknowledged, or in flight (may or may not have happened)."""
        for ns, key, value in op["items"]:
            item = (tuple(ns), key)
            if acked:
                self.last[item] = value
                self.maybe.pop(item, None)
                self.puts += value is not None
                self.deletes += value is None
            else:
                self.maybe.setdefault(item, []).append(value)


def outcome_of(ops: list[dict[str, Any]], log: list[dict[str, Any]]) -> Outcome:
    """The ``Outcome`` of a child's log: ops with an ``ok`` acknowledged, the one with a
    ``try`` and no ``ok`` in flight."""
    ok = {a["i"] for a in log if a["k"] == "ok"}
    tried = {a["i"] for a in log if a["k"] == "try"}
    out = Outcome()
    for i, op in enumerate(ops):
        if i in ok:
            out.apply(op, True)
        elif i in tried:
            out.apply(op, False)
    return out


def mongo_state(db: Any, collection: str, now_ms: int | None = None
                ) -> dict[Item, dict[str, Any] | None]:
    """Every item the store's ``collection`` names: its live value, None for a tombstone
    or an expired value (values decoded with LangGraph's ``JsonPlusSerializer``)."""
    serde = JsonPlusSerializer()
    now_ms = now_ms or int(time.time() * 1000)
    out: dict[Item, dict[str, Any] | None] = {}
    for doc in db[collection].find({}):
        rec = record_of(doc)
        live = rec.live(now_ms) and rec.body is not None and rec.body.value is not None
        out[(rec.namespace, rec.key)] = (serde.loads_typed(rec.body.value)  # type: ignore[union-attr]
                                         if live else None)
    return out


def store_state(store: DurableStore) -> tuple[dict[Item, dict[str, Any] | None], int]:
    """A store's answers: ``get`` of every item of ``NAMESPACES`` x ``KEYS``, and how many
    items its ``search`` of everything answers otherwise (missing, extra, other value)."""
    got: dict[Item, dict[str, Any] | None] = {}
    for ns in NAMESPACES:
        for key in KEYS:
            item = store.get(ns, key, refresh_ttl=False)
            got[(ns, key)] = item.value if item is not None else None
    found = {(i.namespace, i.key): i.value for i in store.search((), limit=1000)}
    live = {k: v for k, v in got.items() if v is not None}
    differ = len(set(found) ^ set(live)) + sum(found[k] != live[k] for k in found if k in live)
    return got, differ


@dataclass
class Check:
    """Departures from the ``Outcome`` seen in one state: ``lost`` (an acknowledged put
    missing or holding another value), ``back`` (an acknowledged delete whose item is
    there), ``stray`` (an item no op acknowledged nor had in flight)."""

    lost: list[str] = field(default_factory=list)
    back: list[str] = field(default_factory=list)
    stray: list[str] = field(default_factory=list)

    def add(self, other: Check) -> None:
        self.lost += other.lost
        self.back += other.back
        self.stray += other.stray


def check(expected: Outcome, state: dict[Item, dict[str, Any] | None], where: str) -> Check:
    """Compare ``state`` (item -> value or None) with ``expected``."""
    out = Check()
    for item in sorted(set(expected.last) | set(expected.maybe) | set(state)):
        have = state.get(item)
        allowed = expected.maybe.get(item, [])
        if item in expected.last:
            want = expected.last[item]
            if have == want or have in allowed:
                continue
            (out.back if want is None else out.lost).append(
                f"{where}: {item}: {have!r:.60} (acknowledged: {want!r:.60})")
        elif have is not None and have not in allowed:
            out.stray.append(f"{where}: {item}: {have!r:.60} (never written)")
    return out


def verify(env_redis: str, mongo_url: str, prefix: str, database: str, expected: Outcome,
           *, options: dict[str, Any] | None = None) -> tuple[Check, int]:
    """Read with a fresh store (which also drains the outbox before closing), then MongoDB's
    documents, then a fresh store again with the prefix's Redis keys deleted (MongoDB
    alone). Returns the departures and the count of search answers that differ."""
    found = Check()
    differ = 0
    opts = {"key_prefix": prefix, "database": database, **(options or {})}
    with DurableStore.from_urls(env_redis, mongo_url, **opts) as store:
        got, d = store_state(store)
        found.add(check(expected, got, "fresh store"))
        differ += d
        store.flush(timeout_s=60)
        collection = store.runtime.context.collections.store
    with clients(env_redis, mongo_url) as (r, m):
        found.add(check(expected, mongo_state(m[database], collection), "MongoDB"))
        drop_prefix(r, prefix)
    with DurableStore.from_urls(env_redis, mongo_url, **opts) as store:
        got, d = store_state(store)
        found.add(check(expected, got, "MongoDB alone"))
        differ += d
    return found, differ


# --------------------------------------------------------------------------- scenario 1


def choose_kill(i: int, rng: random.Random, n_ops: int) -> dict[str, Any]:
    """Trial ``i``'s kill point: the kinds take turns, the position within one is random."""
    kind = ["before", "during", "after", "flush", "time"][i % 5]
    if kind == "flush":
        return {"kind": "flush", "n": rng.randint(1, 2), "point": rng.choice(FLUSH_POINTS)}
    if kind == "time":
        return {"kind": "time", "delay_s": rng.uniform(0.0, 0.6)}
    return {"kind": "op", "n": rng.randrange(n_ops), "pos": kind}


def app_killed_trial(env: Env, i: int, rng: random.Random, n_ops: int = 40,
                     options: dict[str, Any] | None = None) -> dict[str, Any]:
    """One trial of scenario 1's store form; a third of them drain the outbox with another
    process and delete the Redis keys before the fresh store reads ("cold")."""
    prefix, database = names("s1st")
    kill = choose_kill(i, rng, n_ops)
    api = rng.choice(["sync", "async"])
    cold = rng.random() < 0.33
    ops = make_ops(rng, n_ops, tag=f"t{i}")
    ack = str(env.work / f"s1st-{i}-{prefix}.ack")  # unique: a rerun of trial i appends none
    opts = {"claim_idle_s": 0.5, **(options or {})}
    rec: dict[str, Any] = {"kill": kill.get("pos", kill["kind"]), "api": api, "cold": cold}
    try:
        run = Child({"redis": env.redis_url, "mongo": env.mongo_url, "prefix": prefix,
                     "database": database, "ops": ops, "api": api, "ack": ack,
                     "kill": kill, "options": opts}, env.work, f"s1st-{i}-{prefix}",
                    module="faults.store_child")
        if kill["kind"] == "time":
            wait_for(lambda: any(a["k"] == "start" for a in AckLog.read(ack)), 60,
                     "the store child to start")
            time.sleep(kill["delay_s"])  # the fault's timing, not an assertion
            run.kill()
        code = run.wait(120)
        rec["killed"] = code == -9
        if code not in (0, -9):
            raise RuntimeError(f"the store child failed (exit {code}):\n{run.tail()}")
        log = AckLog.read(ack)
        rec["at"] = next((a["at"] for a in log if a["k"] == "kill"), None)
        expected = outcome_of(ops, log)
        if cold:
            with DurableStore.from_urls(env.redis_url, env.mongo_url, key_prefix=prefix,
                                        database=database, **opts) as drain:
                drain.flush(timeout_s=60)
            with clients(env.redis_url, env.mongo_url) as (r, _m):
                drop_prefix(r, prefix)
        found, differ = verify(env.redis_url, env.mongo_url, prefix, database, expected,
                               options=opts)
        rec.update(puts=expected.puts, deletes=expected.deletes, lost=found.lost,
                   back=found.back, stray=found.stray, search_differs=differ)
    finally:
        cleanup(env.redis_url, env.mongo_url, prefix, database)
    return rec


# --------------------------------------------------------------------------- scenario 3


def mongo_down(env: Env, seed: int = 3, n_ops: int = 40, max_outbox: int = 30
               ) -> dict[str, Any]:
    """Scenario 3's store form: ``n_ops`` ops with MongoDB up (flushed), ``n_ops`` with it
    stopped (``max_outbox`` small, so some are refused: a refused op must leave nothing),
    MongoDB restarted and the outbox drained."""
    rng = random.Random(seed)
    prefix, database = names("s3st")
    rec: dict[str, Any] = {}
    expected = Outcome()
    with mongo_server() as ms:
        opts = {"key_prefix": prefix, "database": database, "max_outbox": max_outbox,
                "on_outbox_full": "raise", "server_selection_timeout_s": 1.0}
        refused = 0
        with DurableStore.from_urls(env.redis_url, ms.url, **opts) as store:
            for k, op in enumerate(make_ops(rng, n_ops, tag="up")):
                store.batch([_put(x) for x in op["items"]])
                expected.apply(op, True)
                if k % 10 == 9:  # the outbox stays below max_outbox while MongoDB is up
                    store.flush(timeout_s=60)
            store.flush(timeout_s=60)
            ms.stop()
            # deletes of flushed items first: MongoDB holds their values
            down = [{"items": [[list(ns), k, None]]} for ns, k in
                    sorted(i for i, v in expected.last.items() if v is not None)[:4]]
            for op in down + make_ops(rng, n_ops, tag="down"):
                try:
                    store.batch([_put(x) for x in op["items"]])
                    expected.apply(op, True)
                except OutboxFullError:
                    refused += 1  # one put refused leaves nothing; of a batch's, each
                    if len(op["items"]) > 1:  # put is its own script: some may be in
                        expected.apply(op, False)
            rec["refused"] = refused
            rec["acked_while_down"] = expected.puts + expected.deletes
            ms.start()
            with clients(env.redis_url, ms.url) as (r, _m):
                wait_for(lambda: _outbox_len(r, store) == 0, 90, "the backlog to drain")
        found, differ = verify(env.redis_url, ms.url, prefix, database, expected,
                               options={"server_selection_timeout_s": 1.0})
        rec.update(puts=expected.puts, deletes=expected.deletes, lost=found.lost,
                   back=found.back, stray=found.stray, search_differs=differ)
        cleanup(env.redis_url, ms.url, prefix, database)
    return rec


def _outbox_len(r: Any, store: DurableStore) -> int:
    return sum(int(r.xlen(s)) for s in store.runtime.context.outboxes)


def _put(x: list[Any]) -> Any:
    from langgraph.store.base import PutOp

    return PutOp(tuple(x[0]), x[1], x[2])


# --------------------------------------------------------------------------- scenario 4


def redis_lost(env: Env, seed: int = 4, n_ops: int = 40) -> dict[str, Any]:
    """Scenario 4's store form: ops, a flush, the store's Redis keys deleted (Redis lost
    its data), the same store keeps going (puts and deletes of items only MongoDB holds
    now), a flush, the keys deleted again; checked after each loss."""
    rng = random.Random(seed)
    prefix, database = names("s4st")
    expected = Outcome()
    rec: dict[str, Any] = {}
    with DurableStore.from_urls(env.redis_url, env.mongo_url, key_prefix=prefix,
                                database=database) as store, \
            clients(env.redis_url, env.mongo_url) as (r, _m):
        for op in make_ops(rng, n_ops, tag="first"):
            store.batch([_put(x) for x in op["items"]])
            expected.apply(op, True)
        store.flush(timeout_s=60)
        drop_prefix(r, prefix)
        got, differ = store_state(store)
        first = check(expected, got, "after the first loss")
        # every live item deleted, every deleted one put again: all from MongoDB's answers
        again = [{"items": [[list(ns), k, None if v is not None else
                             {"n": -1, "tag": "again", "text": f"back {k}"}]]}
                 for (ns, k), v in sorted(expected.last.items())]
        for op in again + make_ops(rng, n_ops // 2, tag="second"):
            store.batch([_put(x) for x in op["items"]])
            expected.apply(op, True)
        store.flush(timeout_s=60)
    found, d2 = verify(env.redis_url, env.mongo_url, prefix, database, expected)
    found.add(first)
    rec.update(puts=expected.puts, deletes=expected.deletes, lost=found.lost,
               back=found.back, stray=found.stray, search_differs=differ + d2)
    cleanup(env.redis_url, env.mongo_url, prefix, database)
    return rec


def redis_killed(env: Env, seed: int = 4, n_ops: int = 200) -> dict[str, Any]:
    """Scenario 4's AOF form for the store: a store with ``flusher="off"`` (everything
    acknowledged is in Redis only) writes while its Redis (``appendonly yes``,
    ``appendfsync always``) is SIGKILLed at a random moment, then restarted on the same
    data folder; checked in Redis, then (a store with a flusher drains the outbox) in
    MongoDB and from MongoDB alone."""
    import threading

    from langgraph_durable.testing import redis_server

    rng = random.Random(seed)
    prefix, database = names("s4stk")
    ops = make_ops(rng, n_ops, tag="aof")
    expected = Outcome()
    rec: dict[str, Any] = {}
    with redis_server(appendonly=True) as rs, clients(rs.url, env.mongo_url) as (r, _m):
        r.config_set("appendfsync", "always")
        store = DurableStore.from_urls(rs.url, env.mongo_url, key_prefix=prefix,
                                       database=database, flusher="off",
                                       socket_timeout_s=1.0)
        store.setup()

        # the fault's timing: the kill is sent once a random early op was acknowledged,
        # while the writer goes on (no sleep: a fast machine would finish first)
        kill_at = rng.randrange(10, n_ops // 4)
        reached = threading.Event()

        def go() -> None:
            for i, op in enumerate(ops):
                try:
                    store.batch([_put(x) for x in op["items"]])
                except Exception:  # the kill: this op is in flight, the rest never sent
                    expected.apply(op, False)
                    return
                finally:
                    if i == kill_at:
                        reached.set()
                expected.apply(op, True)

        runner = threading.Thread(target=go)
        runner.start()
        reached.wait(60)
        rs.kill()
        runner.join(60)
        rs.start()
        rec["killed_mid_run"] = expected.puts + expected.deletes < sum(
            len(op["items"]) for op in ops)
        store.close()
        found, differ = verify(rs.url, env.mongo_url, prefix, database, expected)
        cleanup(rs.url, env.mongo_url, prefix, database)
    rec.update(puts=expected.puts, deletes=expected.deletes, lost=found.lost,
               back=found.back, stray=found.stray, search_differs=differ)
    return rec


def summary(recs: list[dict[str, Any]]) -> dict[str, int]:
    """Totals over store records: puts and deletes acknowledged, lost, back, strays."""
    return {"puts": sum(r["puts"] for r in recs), "deletes": sum(r["deletes"] for r in recs),
            "lost": sum(len(r["lost"]) for r in recs), "back": sum(len(r["back"]) for r in recs),
            "stray": sum(len(r["stray"]) + r["search_differs"] for r in recs)}


def report(res: Any, recs: list[dict[str, Any]]) -> None:
    """Add store records' totals to a scenario's ``Result``: lost puts to ``lost``, deletes
    back to ``resurrected``, strays and search answers that differ to ``mismatches``;
    figures in ``measures``; the first departures as findings."""
    s = summary(recs)
    res.add("lost", s["lost"])
    res.add("resurrected", s["back"])
    res.add("mismatches", s["stray"])
    res.measures.update({"store puts acked": s["puts"], "store deletes acked": s["deletes"],
                         "store puts lost": s["lost"], "store deletes back": s["back"]})
    for kind, what in (("lost", "acknowledged store puts lost"),
                       ("back", "acknowledged store deletes undone"),
                       ("stray", "store items never written")):
        seen = [x for r in recs for x in r[kind]]
        if seen:
            res.findings.append(f"{len(seen)} {what}: {'; '.join(seen[:3])}")
