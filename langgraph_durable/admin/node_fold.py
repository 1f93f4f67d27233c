"""``migrate``'s fourth pass: nodes stored as documents of their own (releases before
``schema.HOSTED_NODE_VERSION``, copies, imports, a node whose item was stored before it)
put inside the document of the item that completes them (``durable/item_docs.py``),
sans-I/O: one MongoDB document fewer per 32 items of a list.

``fold_nodes_plan`` reads the node documents in ``_id`` order, ``batch_size`` a round.
Per node, one update sets the node into its last item's document, only while that one
holds its item alone, and keeps the later ``put_ms`` of the two; then, for each node
whose update matched, the node's own document is deleted, only while it is as read (its
``put_ms``). A node whose item has no document (a damaged or partly deleted thread) or
holds another node stays as it is. Each step keeps every node readable: between them, or
after a crash, the node is in both documents, which reads take alike. A collector or
delete running meanwhile deletes by ``_id`` and ``put_ms`` as before: a node put inside an
item that goes with it was unnamed (whatever names a node names its items), and one
whose own document a collector deleted meanwhile stays inside its item, unnamed (516
bytes, until the item goes). The cursor is saved in ``meta`` (``migration:nodes-in-items``)
after each round: an interrupted run resumes there; a second run folds what was stored
on its own since.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass

from ..core.ops import BulkWrite, DeleteDoc, Doc, Find, FindOne, Mongo, Plan, ask
from ..core.schema import HOSTED_NODE_VERSION
from ..durable import item_docs as IT
from ..plans.context import Context
from .cursor_rounds import cursor_rounds_plan

log = logging.getLogger("langgraph_durable.admin.node_fold")

CURSOR_ID = "migration:nodes-in-items"
"""``_id`` of the ``meta`` document holding the fold's cursor."""


@dataclass
class Folded:
    """What ``fold_nodes_plan`` did: node documents ``read``, nodes ``folded`` into their
    items' documents (their own documents deleted), and ``finished`` (False when
    ``max_batches`` stopped it; the cursor stays for the next run)."""

    read: int = 0
    folded: int = 0
    finished: bool = True


def remaining_plan(ctx: Context) -> Plan[int]:
    """How many node documents the fold has still to read (from the saved cursor)."""
    saved = yield FindOne(ctx.collections.meta, {"_id": CURSOR_ID})
    after = saved.get("after") if saved else None
    n: int = yield Mongo(ctx.collections.items, "count_documents", (IT.nodes_after(after),))
    return n


def fold_nodes_plan(ctx: Context, *, batch_size: int = 500,
                    on_batch: Callable[[int], None] | None = None,
                    max_batches: int | None = None, dry_run: bool = False) -> Plan[Folded]:
    """Put the nodes stored on their own inside their items' documents (see the module
    docstring). ``on_batch(n)`` is called after each round of ``n`` node documents read;
    ``max_batches`` stops after that many rounds; ``dry_run`` writes nothing (no
    documents, no cursor) and counts the nodes whose item holds none yet. A node document
    it cannot read raises ``CorruptRecordError`` naming it; the rounds before it are
    stored. Returns a ``Folded``."""
    cols = ctx.collections
    out = Folded()

    def read(after: object) -> Plan[list[Doc]]:
        docs = yield from ask(Find(cols.items, IT.nodes_after(after), sort=[("_id", 1)],
                                   limit=batch_size))
        for d in docs:
            IT.entries(d)  # a damaged node raises, naming it, before anything is written
        return docs

    def work(docs: list[Doc]) -> Plan[None]:
        out.read += len(docs)
        if dry_run:
            hosts = yield from ask(Find(cols.items, IT.lone_hosts(docs), {"_id": 1}))
            out.folded += len(hosts)
        else:
            out.folded += yield from _round_plan(ctx, docs)

    out.finished = yield from cursor_rounds_plan(
        ctx, CURSOR_ID, HOSTED_NODE_VERSION, read, work, max_batches=max_batches,
        dry_run=dry_run, on_batch=on_batch)
    if out.folded:
        log.info("put %d nodes inside the documents of their items", out.folded)
    return out


def _round_plan(ctx: Context, docs: list[Doc]) -> Plan[int]:
    """Fold one round's node documents, one update each (unordered: one that matches
    nothing is no error); then delete the own documents of those folded. Returns how
    many were folded."""
    folded = []
    for d in docs:  # one update a node: a bulk's result does not say which matched
        up = IT.host_update(d)
        res = yield Mongo(ctx.collections.items, "update_one", (up.filter, up.update))
        if getattr(res, "matched_count", 0):
            folded.append(d)
    if folded:
        yield BulkWrite(ctx.collections.items,
                        [DeleteDoc(IT.node_unchanged(d)) for d in folded])
    return len(folded)
