"""What ``prune`` removes of one thread, read from MongoDB and changing nothing
(``choice_plan``, the ``PruneChoice``; ``plans/history_edits.py`` ``prune_plan`` and
``prune_preview_plan`` act on it): the checkpoints kept (the newest, the young, and the
DeltaChannel ancestors they need), the values no kept checkpoint names, the values inside
dropped checkpoint documents that kept ones name (written as blobs documents first:
``durable/inline.py``), and the items no kept value names (``unreferenced_items``)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from ..core.ops import Doc, Find, Parallel, Plan, ask
from ..core.records import blob_field, checkpoint_time_s
from ..durable import chunks as C
from ..durable import inline as I
from ..durable import item_docs as IT
from .context import Context


def _older(checkpoint_id: str, cutoff_s: float | None) -> bool:
    """True when the checkpoint's id time is before ``cutoff_s`` (Unix seconds); a
    checkpoint without a readable time (not a uuid6 id) is never "older"."""
    if cutoff_s is None:
        return True
    made = checkpoint_time_s(checkpoint_id)
    return made is not None and made < cutoff_s


@dataclass(frozen=True)
class PruneChoice:
    """What a prune removes of one thread, as MongoDB holds it: ``checkpoints``
    (checkpoint_ns -> checkpoint_ids dropped), ``kept`` (checkpoints kept),
    ``blob_fields`` (channel values no kept checkpoint refers to), ``write_ids`` (the
    dropped checkpoints' pending writes), ``whole_thread`` (strategy ``delete``: every
    checkpoint goes; then ``checkpoints`` lists them all) and ``spill`` (blobs documents
    of the values inside dropped checkpoints' documents that kept ones name)."""

    checkpoints: dict[str, list[str]]
    kept: int
    blob_fields: list[str]
    write_ids: list[Any]
    whole_thread: bool = False
    spill: list[Doc] = field(default_factory=list)

    @property
    def dropped(self) -> int:
        """Number of checkpoints removed."""
        return sum(len(c) for c in self.checkpoints.values())


def choice_plan(ctx: Context, tid: str, strategy: str, keep_last: int | None,
                cutoff: float | None, preview: bool = False
                ) -> Plan[PruneChoice | None]:
    """What ``prune_plan`` removes of thread ``tid`` (reads MongoDB only); None when a
    ``delete`` with a cutoff keeps the thread (its newest checkpoint is recent). A
    ``delete`` lists the thread's checkpoints only for a ``preview``."""
    cols = ctx.collections
    q = {"thread_id": tid}
    if strategy == "delete":
        if cutoff is not None:
            newest = yield from ask(Find(cols.checkpoints, q, {"checkpoint_id": 1},
                                         sort=[("checkpoint_id", -1)], limit=1))
            if not newest or not _older(newest[0]["checkpoint_id"], cutoff):
                return None
        if not preview:
            return PruneChoice({}, 0, [], [], whole_thread=True)
        docs = yield from ask(Find(cols.checkpoints, q, {"checkpoint_ns": 1,
                                                         "checkpoint_id": 1}))
        every: dict[str, list[str]] = defaultdict(list)
        for d in docs:
            every[d["checkpoint_ns"]].append(d["checkpoint_id"])
        return PruneChoice(dict(every), 0, [], [], whole_thread=True)
    docs, bdocs, wdocs = yield Parallel([
        Find(cols.checkpoints, q, {"checkpoint": 0}),
        Find(cols.blobs, q, {"data": 0, "refs": 0}),
        Find(cols.writes, q, {"checkpoint_ns": 1, "checkpoint_id": 1}),
    ])
    non_empty = {blob_field(b["checkpoint_ns"], b["channel"], b["version"])
                 for b in bdocs if b["type"] != "empty"}
    all_blobs = {blob_field(b["checkpoint_ns"], b["channel"], b["version"]) for b in bdocs}
    for d in docs:  # and the values inside the checkpoint documents (inline.py)
        inline = I.inline_values(d)
        all_blobs |= set(inline)
        non_empty |= {f for f, v in inline.items() if v is not None}
    by_ns: dict[str, dict[str, Doc]] = defaultdict(dict)
    for d in docs:
        by_ns[d["checkpoint_ns"]][d["checkpoint_id"]] = d
    # the metadata of each namespace's latest checkpoint says which channels are deltas
    latest = [cps[max(cps)] for cps in by_ns.values()]
    for d in (yield from C.load_plan(cols.chunks, latest)):
        by_ns[d["checkpoint_ns"]][d["checkpoint_id"]] = d
    drop: dict[str, list[str]] = {}
    keep_blobs: set[str] = set()
    kept = 0
    for ns, cps in by_ns.items():
        ids = sorted(cps, reverse=True)
        heads = set(ids[:keep_last or 1])
        if cutoff is not None:
            heads |= {c for c in ids if not _older(c, cutoff)}
        keep = _keep_chains(ctx, ns, cps, non_empty, heads)
        kept += len(keep)
        drop[ns] = [c for c in cps if c not in keep]
        for c in keep:
            keep_blobs |= {blob_field(ns, ch, v) for ch, v in cps[c]["blob_fields"]}
    dropped = {(ns, c) for ns, cids in drop.items() for c in cids}
    write_ids = [d["_id"] for d in wdocs if (d["checkpoint_ns"], d["checkpoint_id"]) in dropped]
    spill = [b for ns, cids in drop.items() for c in cids
             for b in I.spill_docs(tid, by_ns[ns][c], keep_blobs)]
    return PruneChoice(drop, kept, sorted(all_blobs - keep_blobs), write_ids, spill=spill)


def unreferenced_items(kept: Sequence[Doc], item_docs: Sequence[Doc],
                       before_ms: int) -> list[bytes]:
    """Digests of the items (``item_docs``) that no kept blob or write document names
    (``refs``, through nodes too) and that no write stored after ``before_ms`` (a put
    running during a prune may name an item it sent then)."""
    found = [(IT.digests_of(d), d) for d in item_docs]  # an item holding a node: both
    nodes = {ds[-1]: [bytes(c) for c in d["refs"]] for ds, d in found if d.get("refs")}
    todo = [bytes(r) for d in kept for r in d.get("refs") or ()]
    reached: set[bytes] = set()
    while todo:
        d = todo.pop()
        if d not in reached:
            reached.add(d)
            todo += nodes.get(d, ())
    return sorted(x for ds, d in found for x in ds
                  if x not in reached and int(d.get("put_ms") or 0) <= before_ms)


def _keep_chains(ctx: Context, ns: str, cps: dict[str, Doc], non_empty: set[str],
                 heads: set[str]) -> set[str]:
    """``heads`` plus the DeltaChannel ancestors every kept checkpoint needs: from each
    (heads, and the ancestors this adds), back to the nearest one holding a stored
    (non-empty) value of every delta channel its metadata lists
    (``counters_since_delta_snapshot``), so every kept checkpoint rebuilds as before."""
    keep = set(heads)
    todo = sorted(heads, reverse=True)
    walked: set[tuple[str, frozenset[str]]] = set()
    done: set[str] = set()
    while todo:
        head = todo.pop()
        if head in done:
            continue
        done.add(head)
        md = ctx.serde.loads_typed((cps[head]["metadata_type"], bytes(cps[head]["metadata"])))
        delta = set((md or {}).get("counters_since_delta_snapshot") or {})
        cur: str | None = head
        while delta and cur in cps:
            state = (cur, frozenset(delta))
            if state in walked:  # an earlier walk went on from here with these needs
                break
            walked.add(state)
            if cur not in keep:
                keep.add(cur)
                todo.append(cur)
            fields = {ch: blob_field(ns, ch, v) for ch, v in cps[cur]["blob_fields"]}
            delta -= {ch for ch in delta if fields.get(ch) in non_empty}
            cur = cps[cur].get("parent_checkpoint_id")
    return keep


