"""The effect journal's MongoDB documents and their queries (sans-I/O).

The collection ``<collection_prefix>effects`` (``Collections.effects``) holds one
document per effect, built by ``plans/effect_journal.py`` (``effect_doc``): ``_id`` =
``doc_id(thread_id, task_ns, task_id, name, n)``, ``thread_id`` (the shard key),
``member`` (``ns NUL checkpoint_id`` of the checkpoint its task ran from), the entry's
version ``v`` and ``put_ms``. Index ``thread_checkpoint`` (``thread_id``, ``member``:
``documents.INDEXES``).
"""

from __future__ import annotations

from collections.abc import Iterable

from ..core.ops import Doc, UpdateDoc


def effect_upsert(doc: Doc) -> UpdateDoc:
    """Upsert of a journal document replacing only an older version (a newer one stored:
    duplicate key error, ignored by ``bulk_ignoring_newer``); its filter holds
    ``thread_id``, the shard key; ``put_ms`` is set once, when it is inserted."""
    fields = {k: v for k, v in doc.items() if k not in ("_id", "put_ms")}
    return UpdateDoc({"_id": doc["_id"], "thread_id": doc["thread_id"], "v": {"$lt": doc["v"]}},
                     {"$set": fields, "$setOnInsert": {"put_ms": doc["put_ms"]}}, upsert=True)


def effects_of_members(thread_id: str, members: Iterable[str]) -> dict[str, object]:
    """Filter of the effects of ``thread_id`` whose tasks ran from the checkpoints
    ``members`` (``ns NUL checkpoint_id``; as a list in their iteration order)."""
    return {"thread_id": thread_id, "member": {"$in": list(members)}}
