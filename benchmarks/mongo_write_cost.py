"""Measurement (not a test): what the MongoDB-wire server's CPU per checkpoint is made of
(issue 35: "which commands and indexes cost most per checkpoint").

    python -m benchmarks.mongo_write_cost [--threads 8] [--turns 50] [--reps 5]

Starts its own Redis and SecantusDB (or uses REDIS_URL / MONGODB_URL; the server's CPU is
read from ``/proc`` only for one it started). Writes ``--threads`` agent-loop threads of
``--turns`` turns (DOCS' workload) with the flusher off, drains them, then inserts the
drained documents again, per collection, into fresh collections with every index
``setup()`` creates and with ``_id`` alone (and the checkpoints' without each of their
secondary indexes), 100 per ``insert_many``, repetitions alternated; then times one
thread summary write (a ``ReplaceOne`` guarded by ``rev``, as ``plans/summary_upkeep.py``
writes them, 30 a bulk write) with the threads collection's indexes, with the
``thread_id`` index of earlier releases besides, and with ``_id`` alone. Prints the
server's CPU per checkpoint of each insert variant and per summary write (medians; the
first repetition warms up).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import statistics
import uuid
from typing import Any

import pymongo
from pymongo import ReplaceOne

from langgraph_durable import DurableSaver
from langgraph_durable.core.ops import Index
from langgraph_durable.durable.documents import INDEXES
from langgraph_durable.testing import drop_namespace, mongo_server, redis_server

from . import graphs
from .ab_flush_rounds import _server_cpu
from .flush_rounds import drain


async def _fill(saver: DurableSaver, threads: int, turns: int, tag: str) -> None:
    g = graphs.build_conversation(saver, turns, asynchronous=True)
    await asyncio.gather(*[g.ainvoke(graphs.conversation_input(k), {
        "configurable": {"thread_id": f"{tag}-{k}"}, "recursion_limit": 4 * turns + 10})
        for k in range(threads)])


def _models(specs: list[Any]) -> list[pymongo.IndexModel]:
    return [pymongo.IndexModel(list(i.keys), name=i.name, sparse=i.sparse) for i in specs]


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--threads", type=int, default=8)
    p.add_argument("--turns", type=int, default=50)
    p.add_argument("--reps", type=int, default=5)
    a = p.parse_args()
    with contextlib.ExitStack() as stack:
        r_url = stack.enter_context(redis_server()).url
        mongo = stack.enter_context(mongo_server())
        m_url = mongo.url
        pids = [mongo._proc.pid] if getattr(mongo, "_proc", None) is not None else []
        if not pids:
            raise SystemExit("the server's CPU is read from /proc: unset MONGODB_URL")
        ns = f"mwc{uuid.uuid4().hex[:6]}"
        with DurableSaver.from_urls(r_url, m_url, key_prefix=ns, database=ns,
                                    flusher="off") as saver:
            asyncio.run(_fill(saver, a.threads, a.turns, ns))
            drain(saver)
            cols = saver.context.collections
        client: pymongo.MongoClient[dict[str, Any]] = stack.enter_context(
            pymongo.MongoClient(m_url))
        docs = {k: list(client[ns][getattr(cols, k)].find())
                for k in ("checkpoints", "items", "writes")}
        n_cp = len(docs["checkpoints"])
        cp_secondary = INDEXES["checkpoints"]
        variants: list[tuple[str, str, list[Any] | None]] = [
            ("checkpoints", "every index", cp_secondary),
            ("checkpoints", "_id alone", []),
            *[("checkpoints", f"without {i.name}", [j for j in cp_secondary if j is not i])
              for i in cp_secondary],
            ("items", "every index", INDEXES["items"]), ("items", "_id alone", []),
            ("writes", "every index", INDEXES["writes"]), ("writes", "_id alone", [])]
        got: dict[tuple[str, str], list[float]] = {}
        for _ in range(a.reps):
            for kind, name, specs in variants:
                db = client[f"mwc{uuid.uuid4().hex[:6]}"]
                db.create_collection(kind)
                if specs:
                    db[kind].create_indexes(_models(specs))
                batch = [dict(d) for d in docs[kind]]
                before = _server_cpu(pids)
                for i in range(0, len(batch), 100):
                    db[kind].insert_many(batch[i:i + 100], ordered=False)
                got.setdefault((kind, name), []).append(
                    (_server_cpu(pids) - before) * 1000 / n_cp)
                client.drop_database(db.name)
        print(f"{len(docs['checkpoints'])} checkpoints, {len(docs['items'])} items, "
              f"{len(docs['writes'])} writes documents of {a.threads} threads x {a.turns} "
              "turns; server CPU per checkpoint (ms), medians:")
        for (kind, name), vals in got.items():
            print(f"  insert {kind:12} {name:32} {statistics.median(vals[1:]):.3f}")
        summaries = [d for d in client[ns][cols.threads].find()]
        if summaries:
            _summary_writes(client, pids, summaries[0], a.reps)
        drop_namespace(r_url, m_url, ns, ns)


def _summary_writes(client: pymongo.MongoClient[dict[str, Any]], pids: list[int],
                    summary: dict[str, Any], reps: int, n: int = 30, rounds: int = 40
                    ) -> None:
    """Server CPU of one summary write, guarded by ``rev`` as ``upkeep_plan`` writes it
    (``n`` summaries a bulk write), with the threads collection's indexes, with them and
    the ``thread_id`` index of earlier releases (``RETIRED_INDEXES``), and with ``_id``
    alone."""
    retired = [Index((("thread_id", 1),), "thread_id")]
    for name, specs in (("every index", INDEXES["threads"]),
                        ("+ thread_id", [*retired, *INDEXES["threads"]]), ("_id alone", [])):
        vals = []
        for _ in range(reps):
            db = client[f"mwc{uuid.uuid4().hex[:6]}"]
            db.create_collection("threads")
            if specs:
                db.threads.create_indexes(_models(specs))
            db.threads.insert_many([{**summary, "_id": f"s{i}", "thread_id": f"t{i}", "rev": 0}
                                    for i in range(n)])
            before = _server_cpu(pids)
            for k in range(1, rounds + 1):
                db.threads.bulk_write([ReplaceOne(
                    {"_id": f"s{i}", "thread_id": f"t{i}", "rev": k - 1},
                    {**summary, "_id": f"s{i}", "thread_id": f"t{i}", "rev": k, "u": k},
                    upsert=True) for i in range(n)])
            vals.append((_server_cpu(pids) - before) * 1e6 / (n * rounds))
            client.drop_database(db.name)
        print(f"  summary write (guarded replace), threads {name:12} "
              f"{statistics.median(vals[1:]):.0f} µs each")


if __name__ == "__main__":
    main()
