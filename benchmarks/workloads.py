"""The workloads W2 and W4-W6 (W1 and W3, on the agent loop, are in ``agent_loop.py``;
W7 in ``conversation.py``). Each function runs one repetition
against one saver spec and returns a flat dict of metrics; ``run.py`` interleaves them
(round robin per repetition).
"""

from __future__ import annotations

import asyncio
import contextlib
import statistics
import threading
import time
import uuid
from collections import defaultdict
from dataclasses import dataclass
from typing import Any

import pymongo
import redis
from langgraph.checkpoint.base import empty_checkpoint

from langgraph_durable.durable.documents import doc_id

from . import graphs
from .savers import Handle, SaverSpec


@dataclass(frozen=True)
class Params:
    """Sizes of every workload; ``FULL`` and ``QUICK`` below."""

    reps: int
    w1_turns: int
    w2_steps: int
    w3_threads: int
    w3_turns: int
    w3_sweep: tuple[int, ...]
    w4_checkpoints: int
    w4_gets: int
    w4_history: int
    w4_history_calls: int
    w5_seconds: float
    w5_threads: int
    w5_fraction: float
    w5_sat_seconds: float
    w6_turns: tuple[int, int]
    w7_turns: tuple[int, int, int]
    rt_turns: int
    profile_turns: int
    w1_long_turns: int = 300
    docs_threads: int = 4
    docs_turns: int = 50


FULL = Params(reps=3, w1_turns=100, w2_steps=200, w3_threads=50, w3_turns=10,
              w3_sweep=(1, 10, 50, 200),
              w4_checkpoints=1000, w4_gets=30, w4_history=100, w4_history_calls=3,
              w5_seconds=60.0, w5_threads=20, w5_fraction=0.5, w5_sat_seconds=5.0,
              w6_turns=(100, 200), w7_turns=(20, 100, 200), rt_turns=10, profile_turns=100)
QUICK = Params(reps=2, w1_turns=4, w2_steps=10, w3_threads=4, w3_turns=2,
               w3_sweep=(1, 4),
               w4_checkpoints=40, w4_gets=5, w4_history=10, w4_history_calls=1,
               w5_seconds=3.0, w5_threads=4, w5_fraction=0.5, w5_sat_seconds=1.5,
               w6_turns=(3, 6), w7_turns=(2, 4, 8), rt_turns=2, profile_turns=4,
               w1_long_turns=8, docs_threads=2, docs_turns=3)


def thread_cfg(prefix: str = "t") -> dict[str, Any]:
    return {"configurable": {"thread_id": f"{prefix}-{uuid.uuid4().hex[:8]}"}}


def pct(values: list[float], q: float) -> float:
    """The ``q`` quantile (0..1) by nearest rank; NaN for no values."""
    if not values:
        return float("nan")
    s = sorted(values)
    return s[min(len(s) - 1, max(0, int(round(q * (len(s) - 1)))))]


def steps_per_turn() -> int:
    """Checkpoints one agent turn makes (counted with InMemorySaver)."""
    from langgraph.checkpoint.memory import InMemorySaver

    s = InMemorySaver()
    g = graphs.build_agent(s, 2)
    cfg = thread_cfg()
    g.invoke({"messages": [graphs.human(0)]}, cfg)
    return sum(len(v) for v in s.storage[cfg["configurable"]["thread_id"]].values())


# ---------------------------------------------------------------- W2: wide state


def w2(spec: SaverSpec, p: Params) -> dict[str, Any]:
    with spec.open_sync() as h:
        g = graphs.build_wide(h.saver, p.w2_steps)
        cfg = {**thread_cfg("w2"), "recursion_limit": p.w2_steps + 10}
        t0 = time.perf_counter()
        g.invoke(graphs.wide_input(), cfg)
        wall = time.perf_counter() - t0
        spec.drain(h)
        st = spec.storage(h)
    out = {"wall_s": wall, "step_ms": wall / p.w2_steps * 1e3, "bytes": st["bytes"],
           "bytes_per_step": st["bytes"] / p.w2_steps, "method": st["method"]}
    if "redis_bytes" in st:
        out["redis_bytes_per_step"] = st["redis_bytes"] / p.w2_steps
    return out


# ---------------------------------------------------------------- W4: resume


@dataclass
class ResumeThread:
    """A thread with ``w4_checkpoints`` checkpoints, kept open across repetitions."""

    handle: Handle
    graph: Any
    cfg: dict[str, Any]
    build_s: float


def w4_build(h: Handle, p: Params) -> ResumeThread:
    g = graphs.build_loop(h.saver)
    steps = p.w4_checkpoints - 2  # + the input checkpoint + __start__
    cfg = {**thread_cfg("w4"), "recursion_limit": steps + 10}
    t0 = time.perf_counter()
    g.invoke(graphs.loop_input(steps), cfg)
    build = time.perf_counter() - t0
    h.spec.drain(h)
    return ResumeThread(h, g, {"configurable": cfg["configurable"]}, build)


def _median_time(fn: Any, n: int) -> float:
    times = []
    for _ in range(n):
        a = time.perf_counter()
        fn()
        times.append(time.perf_counter() - a)
    return statistics.median(times)


def w4_measure(rt: ResumeThread, p: Params, tier: str = "hot") -> dict[str, Any]:
    s = rt.handle.saver
    got = s.get_tuple(rt.cfg)
    assert got is not None
    out: dict[str, Any] = {}
    if tier != "hot" or rt.handle.spec.is_durable_saver:
        seen = getattr(s, "last_read_tier", None)
        if seen != tier:
            raise AssertionError(f"expected a {tier} read, got {seen}")
        out["tier"] = seen
    out["resume_ms"] = _median_time(lambda: s.get_tuple(rt.cfg), p.w4_gets) * 1e3
    n = 0

    def history() -> None:
        nonlocal n
        n = len(list(rt.graph.get_state_history(rt.cfg, limit=p.w4_history)))

    out["history_ms"] = _median_time(history, p.w4_history_calls) * 1e3
    out["history_n"] = n
    return out


def empty_redis_of(h: Handle, redis_url: str, thread_id: str) -> int:
    """Delete the thread's hot keys (DurableSaver: Redis 'emptied' for this thread after a
    flush); returns how many keys were removed."""
    keys = h.saver.context.keys(thread_id).all
    with redis.Redis.from_url(redis_url) as r:
        return int(r.delete(*keys))


# ---------------------------------------------------------------- W5: write-behind lag


def _entries_read(redis_url: str, outboxes: list[str]) -> int:
    """Outbox entries the flushers' consumer group has read so far (``XINFO GROUPS``
    ``entries-read``, summed over the partitions): counts a worker process's too."""
    from langgraph_durable.hot.keys import CONSUMER_GROUP

    n = 0
    with redis.Redis.from_url(redis_url) as r:
        for stream in outboxes:
            try:
                groups = r.xinfo_groups(stream)
            except redis.ResponseError:  # no stream yet
                continue
            for g in groups:
                name = g.get("name")
                if name in (CONSUMER_GROUP, CONSUMER_GROUP.encode()):
                    n += int(g.get("entries-read") or 0)
    return n


def checkpoint_time(checkpoint_id: str) -> float:
    """Unix time at which LangGraph made ``checkpoint_id`` (a UUIDv6: 100 ns ticks since
    1582-10-15 in its first 60 bits)."""
    i = uuid.UUID(checkpoint_id).int
    ticks = ((i >> 80) << 12) | ((i >> 64) & 0x0FFF)
    return (ticks - 0x01B21DD213814000) / 1e7


class _BulkWatch(pymongo.monitoring.CommandListener):
    """Watches the flusher's bulk writes (inserts, upserts) into ``<db>.checkpoints``:
    documents per bulk write, and for every checkpoint the lag from its creation (its
    UUIDv6 time) to the server's acknowledgement of the bulk write that made it durable."""

    def __init__(self) -> None:
        self.db: str | None = None
        self.phase = ""
        self.pending: dict[int, tuple[str, list[float]]] = {}
        self.sizes: dict[str, list[int]] = defaultdict(list)
        self.lags: dict[str, list[float]] = defaultdict(list)
        self.lock = threading.Lock()

    def reset(self, db: str | None) -> None:
        with self.lock:
            self.db, self.phase = db, ""
            self.pending.clear()
            self.sizes.clear()
            self.lags.clear()

    def started(self, event: Any) -> None:
        name = event.command_name
        if (self.db is None or event.database_name != self.db
                or name not in ("update", "insert")
                or event.command.get(name) != "checkpoints"):
            return
        # the flusher inserts (``documents``); a checkpoint already stored gets an
        # upsert (``updates``: ``$set``) or a replacement (the document itself)
        docs = [u.get("u") or {} for u in event.command.get("updates", ())]
        docs += list(event.command.get("documents", ()))
        born = []
        for doc in docs:
            cid = (doc.get("$set") or doc).get("checkpoint_id")
            if isinstance(cid, str):
                with contextlib.suppress(ValueError):
                    born.append(checkpoint_time(cid))
        with self.lock:
            self.sizes[self.phase].append(len(docs))
            self.pending[event.request_id] = (self.phase, born)

    def succeeded(self, event: Any) -> None:
        now = time.time()
        with self.lock:
            got = self.pending.pop(event.request_id, None)
            if got is not None:
                self.lags[got[0]].extend(now - b for b in got[1])

    def failed(self, event: Any) -> None:
        with self.lock:
            self.pending.pop(event.request_id, None)


_WATCH = _BulkWatch()
_WATCH_REGISTERED = False


def w5(spec: SaverSpec, p: Params, redis_url: str, mongo_url: str) -> dict[str, Any]:
    """Sustained async load on DurableSaver: a saturating phase (no think time) for
    ``w5_sat_seconds`` measures how many outbox entries per second the flusher moves on
    this machine; then a paced phase (steps granted at a fixed rate over all threads, the
    wait standing for a model call, so the offered load is ``w5_fraction`` of that
    capacity: ``Pacer``) for ``w5_seconds``. Lag from
    checkpoint creation to MongoDB, checkpoints per bulk write, XLEN over time."""
    global _WATCH_REGISTERED
    if not _WATCH_REGISTERED:  # only clients made after this see it: W5 runs last
        pymongo.monitoring.register(_WATCH)
        _WATCH_REGISTERED = True
    return asyncio.run(_w5(spec, p, redis_url, mongo_url))


class Pacer:
    """Grants steps at ``rate`` per second over all callers (W5's paced phase): each call
    waits for the next free slot, ``1 / rate`` s after the one before, or none when the
    run fell behind (no burst to catch up). Offers the same load whatever each step's own
    time is (a fixed think time would offer more when steps get faster)."""

    def __init__(self, rate: float) -> None:
        self.interval = 1.0 / rate
        self.next = time.perf_counter()

    async def __call__(self) -> None:
        now = time.perf_counter()
        self.next = max(self.next + self.interval, now)
        await asyncio.sleep(self.next - now)


async def _w5(spec: SaverSpec, p: Params, redis_url: str, mongo_url: str) -> dict[str, Any]:
    series: list[tuple[float, int]] = []
    probes: dict[str, list[float]] = defaultdict(list)
    stop = threading.Event()
    phase_box = {"name": ""}
    out: dict[str, Any] = {}
    async with spec.open_async() as h:
        _WATCH.reset(h.ns)
        s = h.saver
        outbox = s.context.outbox
        t0 = time.perf_counter()

        def sample() -> None:
            with redis.Redis.from_url(redis_url) as r:
                while not stop.is_set():
                    series.append((time.perf_counter() - t0, int(r.xlen(outbox))))
                    stop.wait(0.25)

        def probe() -> None:
            """Own tiny puts on a probe thread; poll MongoDB until each one is there."""
            with pymongo.MongoClient(mongo_url) as mc:
                col = mc[h.ns]["checkpoints"]
                cfg = {"configurable": {"thread_id": "w5-probe", "checkpoint_ns": ""}}
                while not stop.is_set():
                    cp = empty_checkpoint()
                    ph = phase_box["name"]
                    s.put(cfg, cp, {"source": "probe", "step": 0}, {})
                    put_at = time.perf_counter()
                    while not stop.is_set():
                        # by _id: a filter no index serves would scan the collection
                        # every 5 ms and take the server's time from the flusher
                        if col.find_one({"_id": doc_id("w5-probe", "", cp["id"])},
                                        {"_id": 1}):
                            if ph:
                                probes[ph].append(time.perf_counter() - put_at)
                            break
                        time.sleep(0.005)
                    stop.wait(0.2)

        ths = [threading.Thread(target=sample, daemon=True),
               threading.Thread(target=probe, daemon=True)]
        for t in ths:
            t.start()
        plan: list[tuple[str, float, float]] = [("saturated", p.w5_sat_seconds, 0.0)]
        while plan:
            phase, seconds, rate = plan.pop(0)  # rate: steps per second (0: no pacing)
            g = graphs.build_loop(s, asynchronous=True, pace=Pacer(rate) if rate else None)
            before = s.stats()
            read0 = _entries_read(redis_url, s.context.outboxes)
            _WATCH.phase = phase_box["name"] = phase
            began = time.perf_counter()
            deadline = began + seconds
            done = 0

            async def worker(i: int, g: Any = g, deadline: float = deadline,
                             phase: str = phase) -> None:
                nonlocal done
                cfg = {**thread_cfg(f"w5{phase}-{i}"), "recursion_limit": 100}
                n = 0
                while time.perf_counter() < deadline:
                    await g.ainvoke(graphs.loop_input(20, n), cfg)
                    n += 20
                    done += 20

            await asyncio.gather(*(worker(i) for i in range(p.w5_threads)))
            load_s = time.perf_counter() - began
            a = time.perf_counter()
            await s.aflush(300)
            drain_s = time.perf_counter() - a
            phase_box["name"] = ""
            _WATCH.phase = ""
            after = s.stats()
            lags = list(_WATCH.lags.get(phase, []))
            sizes = list(_WATCH.sizes.get(phase, []))
            puts = after.get("puts", 0) - before.get("puts", 0)
            pws = after.get("put_writes", 0) - before.get("put_writes", 0)
            f1 = after.get("flusher") or {}
            # read by the flushers' consumer group: whichever process runs the flusher
            entries = _entries_read(redis_url, s.context.outboxes) - read0
            pr = probes.get(phase, [])
            out[phase] = {
                "start_s": began - t0, "end_s": time.perf_counter() - t0,
                "threads": p.w5_threads, "steps_per_s_offered": rate,
                "load_s": load_s, "drain_s": drain_s, "steps": done,
                "puts": puts, "put_writes": pws, "cps": puts / load_s,
                "entries": entries, "entries_per_s": entries / (load_s + drain_s),
                "lag_p50_s": pct(lags, 0.5), "lag_p99_s": pct(lags, 0.99),
                "lag_max_s": max(lags or [float("nan")]), "lag_n": len(lags),
                "probe_p50_s": pct(pr, 0.5), "probe_p99_s": pct(pr, 0.99), "probe_n": len(pr),
                "bulk_writes": len(sizes),
                "cp_per_bulk_mean": statistics.mean(sizes) if sizes else float("nan"),
                "cp_per_bulk_p50": pct([float(x) for x in sizes], 0.5),
                "outbox_max": max((x for t, x in series if began - t0 <= t), default=0),
                "stats_lag_p50_s": f1.get("lag_p50_s"), "stats_lag_max_s": f1.get("lag_max_s"),
            }
            out[phase]["entries_per_s_load"] = entries / max(1e-9, load_s)
            if phase == "saturated":
                # the flusher's capacity on this machine, then a paced load at a fraction
                cap = entries / max(1e-9, load_s + drain_s)
                per_step = entries / max(1, done)
                steps_per_s = p.w5_fraction * cap / max(1e-9, per_step)
                out[phase]["capacity_entries_per_s"] = cap
                out[phase]["entries_per_step"] = per_step
                plan.append(("paced", p.w5_seconds, steps_per_s))
            else:
                cap = out["saturated"]["capacity_entries_per_s"]
                out[phase]["offered_fraction"] = out[phase]["entries_per_s_load"] / cap
        stop.set()
        for t in ths:
            t.join(5)
        _WATCH.reset(None)
    flat: dict[str, Any] = {"outbox_series": series,
                            "phases": {k: {kk: vv for kk, vv in v.items()} for k, v in out.items()}}
    for k, v in out.get("paced", {}).items():
        flat[k] = v
    return flat


# ---------------------------------------------------------------- W6: storage


def w6(spec: SaverSpec, p: Params) -> dict[str, Any]:
    """Bytes stored after ``w6_turns[0]`` and ``w6_turns[1]`` agent turns (one thread)."""
    a, b = p.w6_turns
    out: dict[str, Any] = {}
    with spec.open_sync() as h:
        g = graphs.build_agent(h.saver, b)
        cfg = thread_cfg("w6")
        for t in range(b):
            g.invoke({"messages": [graphs.human(t)]}, cfg)
            if t + 1 in (a, b):
                spec.drain(h)
                st = spec.storage(h)
                for k, v in st.items():
                    out[f"{k}@{t + 1}"] = v
    return out


# ---------------------------------------------------------------- helpers


def rotate(items: list[Any], rep: int) -> list[Any]:
    """Round-robin order for repetition ``rep`` (each saver goes first once in a while)."""
    k = rep % max(1, len(items))
    return items[k:] + items[:k]


@contextlib.contextmanager
def timer(store: dict[str, float], key: str) -> Any:
    a = time.perf_counter()
    try:
        yield
    finally:
        store[key] = time.perf_counter() - a
