"""W7 conversation storage: the 100-turn agent loop of issue 13 (per turn one AIMessage of
~600 chars with one tool call and one ToolMessage of ~1,500 chars; ``graphs.
build_conversation``), run on one thread for each of ``Params.w7_turns`` (20, 100 and 200
turns in the full run), each length a fresh run in a fresh namespace.

Per run and saver it measures:

- bytes kept for the thread, after ``flush()`` (DurableSaver) and before the hot keys
  expire: InMemorySaver's payload (the serialized bytes it holds: checkpoints, metadata,
  channel values, pending writes); DurableSaver's MongoDB bytes (``$bsonSize`` summed over
  every document of every collection whose name starts with its ``collection_prefix`` in
  its database, so a collection added later is counted without a change here) and Redis
  bytes (``MEMORY USAGE key SAMPLES 0`` summed over every key ``SCAN MATCH``
  ``hot.keys.prefix_pattern(key_prefix)`` finds); the peers as ``savers.py`` measures them
  (MongoDBSaver also by ``$bsonSize``).
- client->server bytes: the Redis server's ``INFO stats`` ``total_net_input_bytes`` delta
  from just after the saver opened to just after its ``flush()`` returned (the harness
  starts its own redis-server and nothing else uses it then, so the delta is this saver's:
  the call path *and* the flusher thread's commands, whose reads of the outbox and values
  are server->client bytes and not counted, but whose command arguments are), and the
  BSON size of every command PyMongo sends to the saver's database (command monitoring:
  the flusher's bulk writes in write-behind, the call path's in strict). Divided by the
  run's super-steps (its checkpoints, ``2 * turns + 2``).
"""

from __future__ import annotations

import threading
import time
from typing import Any

import bson
import pymongo
import redis
from pymongo import monitoring

from langgraph_durable.hot.keys import prefix_pattern

from . import graphs
from .savers import Handle, SaverSpec


def checkpoints_of(turns: int) -> int:
    """Checkpoints (= super-steps) one W7 run of ``turns`` turns makes: the input
    checkpoint, the one after ``__start__``, then agent and tools per turn."""
    return 2 * turns + 2


def mongo_bson_bytes(url: str, database: str, collection_prefix: str = ""
                     ) -> dict[str, Any]:
    """``$bsonSize`` of every document, summed per collection of ``database`` whose name
    starts with ``collection_prefix`` (``system.*`` excluded). Returns ``{"bytes": total,
    "docs": documents, "collections": {name: bytes}}``."""
    per: dict[str, int] = {}
    docs = 0
    with pymongo.MongoClient[dict[str, Any]](url) as c:
        db = c[database]
        for name in sorted(db.list_collection_names()):
            if not name.startswith(collection_prefix) or name.startswith("system."):
                continue
            got = list(db[name].aggregate([{"$group": {
                "_id": None, "b": {"$sum": {"$bsonSize": "$$ROOT"}}, "n": {"$sum": 1}}}]))
            per[name] = int(got[0]["b"]) if got else 0
            docs += int(got[0]["n"]) if got else 0
    return {"bytes": sum(per.values()), "docs": docs, "collections": per}


def redis_prefix_bytes(url: str, key_prefix: str) -> tuple[int, int]:
    """(``MEMORY USAGE key SAMPLES 0`` summed over every key under ``key_prefix``, number
    of keys): ``SCAN MATCH prefix_pattern(key_prefix)``, the pattern the package itself
    uses for all of a prefix's keys (threads, tombstones, outbox)."""
    total, keys = 0, 0
    with redis.Redis.from_url(url) as r:
        for k in r.scan_iter(match=prefix_pattern(key_prefix), count=1000):
            total += int(r.memory_usage(k, samples=0) or 0)
            keys += 1
    return total, keys


def redis_input_bytes(url: str) -> int:
    """The Redis server's ``total_net_input_bytes`` (``INFO stats``): bytes every client
    sent it since it started."""
    with redis.Redis.from_url(url) as r:
        return int(r.info("stats")["total_net_input_bytes"])


class CommandBytes(monitoring.CommandListener):
    """Sums the BSON size of every command PyMongo sends to one database (``watch``),
    document sequences (bulk ``updates``/``documents``) included, as command monitoring
    shows them. Sees only clients made after it was registered (``register``)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.database: str | None = None
        self.bytes = 0
        self.commands = 0

    def watch(self, database: str | None) -> None:
        """Count commands to ``database`` from now on (``None``: stop), from zero."""
        with self.lock:
            self.database, self.bytes, self.commands = database, 0, 0

    def started(self, event: Any) -> None:
        if self.database is None or event.database_name != self.database:
            return
        n = len(bson.encode(event.command))
        with self.lock:
            self.bytes += n
            self.commands += 1

    def succeeded(self, event: Any) -> None:
        pass

    def failed(self, event: Any) -> None:
        pass


COMMAND_BYTES = CommandBytes()
_REGISTERED = False


def register() -> None:
    """Register ``COMMAND_BYTES`` with PyMongo once (before the W7 savers make clients)."""
    global _REGISTERED
    if not _REGISTERED:
        monitoring.register(COMMAND_BYTES)
        _REGISTERED = True


def _storage(spec: SaverSpec, h: Handle) -> dict[str, Any]:
    """Bytes kept for the run's thread by the saver of ``h``, see the module docstring."""
    if spec.is_durable_saver:
        cfg = h.saver.context.config
        m = mongo_bson_bytes(spec.env.mongo_url, cfg.database, cfg.collection_prefix)
        rb, rk = redis_prefix_bytes(spec.env.redis_url, cfg.key_prefix)
        return {"bytes": m["bytes"], "mongo_bytes": m["bytes"], "mongo_docs": m["docs"],
                "mongo_collections": m["collections"], "redis_bytes": rb, "redis_keys": rk,
                "method": "MongoDB $bsonSize over the collection_prefix's collections; "
                          "Redis MEMORY USAGE over the key_prefix's keys"}
    st = spec.storage(h)
    out = {"bytes": st["bytes"], "method": st["method"]}
    if spec.name == "mongodb":
        m = mongo_bson_bytes(spec.env.mongo_url, h.ns)
        out.update(mongo_bytes=m["bytes"], mongo_docs=m["docs"],
                   mongo_collections=m["collections"])
    return out


def run_once(spec: SaverSpec, turns: int) -> dict[str, Any]:
    """One W7 run of ``turns`` turns on a fresh thread in a fresh namespace: storage and
    client->server bytes, keys as in ``w7``."""
    register()
    steps = checkpoints_of(turns)
    with spec.open_sync() as h:
        g = graphs.build_conversation(h.saver, turns)
        cfg = {"configurable": {"thread_id": f"w7-{turns}"}, "recursion_limit": 2 * turns + 10}
        redis_in = redis_input_bytes(spec.env.redis_url) if spec.is_durable_saver else None
        COMMAND_BYTES.watch(h.ns)
        try:
            t0 = time.perf_counter()
            g.invoke(graphs.conversation_input(), cfg)
            wall = time.perf_counter() - t0
            spec.drain(h)
            with COMMAND_BYTES.lock:
                mongo_cmd, mongo_n = COMMAND_BYTES.bytes, COMMAND_BYTES.commands
        finally:
            COMMAND_BYTES.watch(None)
        out: dict[str, Any] = {"steps": steps, "wall_s": wall, "step_ms": wall / steps * 1e3}
        if redis_in is not None:
            out["redis_in_bytes"] = redis_input_bytes(spec.env.redis_url) - redis_in
            out["redis_in_per_step"] = out["redis_in_bytes"] / steps
        if mongo_n:
            out["mongo_cmd_bytes"] = mongo_cmd
            out["mongo_cmds"] = mongo_n
            out["mongo_cmd_per_step"] = mongo_cmd / steps
        out.update(_storage(spec, h))
    return out


def w7(spec: SaverSpec, turns: tuple[int, ...]) -> dict[str, Any]:
    """W7 for one saver: ``run_once`` for each length in ``turns``; every metric is keyed
    ``<metric>@<turns>`` (``bytes@100``, ``redis_bytes@100``, ``redis_in_per_step@20``,
    ...)."""
    out: dict[str, Any] = {"turns": list(turns)}
    for n in turns:
        for k, v in run_once(spec, n).items():
            if k == "method":
                out["method"] = v
            else:
                out[f"{k}@{n}"] = v
    return out
