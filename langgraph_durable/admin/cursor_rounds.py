"""The rounds of a resumable bulk pass of ``migrate`` (sans-I/O): documents read in
``_id`` order from a cursor saved in ``meta``, one round at a time (``admin/write_regroup.py``,
``admin/node_fold.py``)."""

from __future__ import annotations

import datetime
from collections.abc import Callable

from ..core.ops import Doc, FindOne, Mongo, Plan
from ..durable import meta_docs as Meta
from ..plans.context import Context


def cursor_rounds_plan(ctx: Context, cursor_id: str, target: int,
                       read: Callable[[object], Plan[list[Doc]]],
                       work: Callable[[list[Doc]], Plan[None]], *,
                       max_batches: int | None = None, dry_run: bool = False,
                       on_batch: Callable[[int], None] | None = None) -> Plan[bool]:
    """Run ``work(docs)`` on each round of documents ``read(after)`` gives (the next in
    ``_id`` order above ``after``; None: from the first), from the cursor saved in
    ``meta`` under ``cursor_id`` until a round reads none; after each round the cursor
    (the round's highest ``_id``, the ``target`` version) is saved, unless ``dry_run``,
    and ``on_batch(n)`` called with the documents read; at the end the cursor is deleted.
    Returns False when ``max_batches`` rounds stopped it first (the cursor stays for the
    next run), else True."""
    cols = ctx.collections
    saved = yield FindOne(cols.meta, {"_id": cursor_id})
    after = saved.get("after") if saved else None
    rounds = 0
    while True:
        if max_batches is not None and rounds >= max_batches:
            return False
        docs = yield from read(after)
        if not docs:
            break
        yield from work(docs)
        after = max(d["_id"] for d in docs)
        if not dry_run:
            yield Mongo(cols.meta, "update_one", (
                {"_id": cursor_id},
                Meta.cursor_saved(after, datetime.datetime.now(datetime.timezone.utc), target),
            ), {"upsert": True})
        rounds += 1
        if on_batch is not None:
            on_batch(len(docs))
    if not dry_run:
        yield Mongo(cols.meta, "delete_one", ({"_id": cursor_id},))
    return True
