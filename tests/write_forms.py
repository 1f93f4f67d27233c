"""The two forms of MongoDB writes documents, for tests: ``ungroup`` rewrites the
documents of one ``put_writes`` call each (``durable/write_groups.py``, this release) as
the one-document-per-write form releases before it stored, so a test can hold old, new
and mixed data."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from langgraph_durable import DurableSaver
from langgraph_durable.core.schema import WRITES_GROUP_VERSION
from langgraph_durable.durable import documents as D
from langgraph_durable.durable import write_groups as G


def ungroup(saver: DurableSaver, thread_id: str | None = None,
            task_id: str | None = None) -> int:
    """Replace the grouped writes documents (of ``thread_id``, of ``task_id``, or all of
    the saver's database) by one document per write, as the release before stored them
    (``documents.write_doc``, with the call's ``put_ms``); a ``(task, idx)`` two calls
    wrote is stored once, by LangGraph's rule (``write_groups.keep``). Returns the
    documents written."""
    db, cols = saver.sync_clients.db, saver.context.collections
    q: dict[str, Any] = {"v": WRITES_GROUP_VERSION}
    if thread_id is not None:
        q["thread_id"] = thread_id
    if task_id is not None:
        q["task_id"] = task_id
    groups = list(db[cols.writes].find(q))
    by_cp: dict[tuple[str, str, str], list[dict]] = defaultdict(list)
    for d in groups:
        by_cp[(d["thread_id"], d["checkpoint_ns"], d["checkpoint_id"])].append(d)
    docs = []
    for (tid, ns, cid), ds in by_cp.items():
        put_ms = max(d["put_ms"] for d in ds)
        docs += [D.write_doc(tid, ns, cid, w, put_ms=put_ms)
                 for w in G.pending_of(ds).values()]
    if docs:
        db[cols.writes].insert_many(docs)
        db[cols.writes].delete_many({"_id": {"$in": [d["_id"] for d in groups]}})
    return len(docs)
