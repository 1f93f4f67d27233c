"""DOCS (issue 35): MongoDB documents per checkpoint and the MongoDB-wire server's CPU per
checkpoint, for every saver that writes to MongoDB (DurableSaver in each durability and
flusher placement, MongoDBSaver when langgraph-checkpoint-mongodb is installed).

The workload is the issue's agent loop: ``docs_threads`` threads (4) of ``docs_turns``
turns (50) of ``graphs.build_conversation`` (per turn an AIMessage of ~600 characters with
a tool call and a ToolMessage of ~1,500), all at once with ``asyncio.gather`` on one
saver in a fresh namespace (its own MongoDB database). Per run:

- the server's CPU: utime+stime (children included) of the SecantusDB process tree from
  ``/proc/<pid>/stat`` (``cpu.snapshot``) just before the first ``ainvoke`` and just after
  the drain (DurableSaver's ``flush()``: everything acknowledged is in MongoDB), so the
  flusher's bulk writes are inside the window; the same for redis-server and the
  benchmark process (client).
- the documents: ``count_documents({})`` of every collection of the namespace's database
  (``system.*`` excluded), counted after the drain, and their ``$bsonSize``.
- per checkpoint = over the documents of the checkpoints collection (the name ending in
  ``checkpoints``: DurableSaver's ``<prefix>checkpoints``, MongoDBSaver's
  ``checkpoints``), as the issue counts; ``graph_checkpoints`` is what the graph made
  (``threads * (2 * turns + 2)``), for comparison.
- MongoDB commands the saver's clients sent to its database (PyMongo command monitoring,
  ``conversation.COMMAND_BYTES``), and their BSON bytes.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pymongo

from . import conversation, cpu, graphs
from .savers import SaverSpec
from .workloads import Params, thread_cfg

MONGO_SERVER = "SecantusDB"
"""The ``cpu.SERVERS`` name of the MongoDB-wire server."""


def count_docs(url: str, database: str) -> dict[str, Any]:
    """``{"docs": total, "collections": {name: documents}, "bytes": total $bsonSize}`` over
    every collection of ``database`` (``system.*`` excluded)."""
    per: dict[str, int] = {}
    with pymongo.MongoClient[dict[str, Any]](url) as c:
        db = c[database]
        for name in sorted(db.list_collection_names()):
            if not name.startswith("system."):
                per[name] = int(db[name].count_documents({}))
    size = conversation.mongo_bson_bytes(url, database)["bytes"]
    return {"docs": sum(per.values()), "collections": per, "bytes": size}


def database_of(spec: SaverSpec, h: Any) -> str:
    """The MongoDB database the saver of ``h`` writes to."""
    if spec.is_durable_saver:
        return str(h.saver.context.config.database)
    return str(h.ns)


async def _run(spec: SaverSpec, threads: int, turns: int) -> dict[str, Any]:
    conversation.register()
    async with spec.open_async() as h:
        db = database_of(spec, h)
        g = graphs.build_conversation(h.saver, turns, asynchronous=True)
        cfgs = [{**thread_cfg(f"docs-{i}"), "recursion_limit": 2 * turns + 10}
                for i in range(threads)]
        conversation.COMMAND_BYTES.watch(db)
        try:
            c0 = cpu.snapshot()
            t0 = time.perf_counter()
            await asyncio.gather(*(g.ainvoke(graphs.conversation_input(i), cfg)
                                   for i, cfg in enumerate(cfgs)))
            wall = time.perf_counter() - t0
            await asyncio.to_thread(spec.drain, h)
            c1 = cpu.snapshot()
            with conversation.COMMAND_BYTES.lock:
                cmds = conversation.COMMAND_BYTES.commands
                cmd_bytes = conversation.COMMAND_BYTES.bytes
        finally:
            conversation.COMMAND_BYTES.watch(None)
        counted = count_docs(spec.env.mongo_url, db)
    made = threads * (2 * turns + 2)
    cp_docs = sum(n for name, n in counted["collections"].items()
                  if name.endswith("checkpoints"))
    per = cp_docs or made
    out: dict[str, Any] = {
        "threads": threads, "turns": turns, "graph_checkpoints": made,
        "checkpoint_docs": cp_docs, "wall_s": wall, "docs": counted["docs"],
        "docs_per_cp": counted["docs"] / per, "mongo_bytes": counted["bytes"],
        "bytes_per_cp": counted["bytes"] / per,
        "mongo_collections_docs": counted["collections"],
        "mongo_cmds": cmds, "mongo_cmds_per_cp": cmds / per, "mongo_cmd_bytes": cmd_bytes,
        **cpu.delta(c0, c1)}
    for key, name in (("server_cpu_ms_per_cp", MONGO_SERVER),
                      ("redis_cpu_ms_per_cp", "redis-server"), ("client_cpu_ms_per_cp", "client"),
                      ("worker_cpu_ms_per_cp", "flusher worker")):
        if name in c1:
            out[key] = (c1[name] - c0.get(name, 0.0)) * 1e3 / per
    return out


def docs(spec: SaverSpec, p: Params) -> dict[str, Any]:
    """One DOCS run of ``spec`` (``p.docs_threads`` x ``p.docs_turns``); see the module
    docstring for what each metric is."""
    return asyncio.run(_run(spec, p.docs_threads, p.docs_turns))


def mongo_writers(specs: list[SaverSpec]) -> list[SaverSpec]:
    """The specs whose saver writes to MongoDB (DOCS runs these)."""
    return [s for s in specs if s.writes_mongo]
