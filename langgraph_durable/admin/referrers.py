"""Every kind of stored record that can hold a serialized value, so name an external object.

A value an :class:`~langgraph_durable.serde.ExternalRefSerializer` moved to a blob store is
stored as a small ``("extref", envelope)`` typed value naming the object's key. Any record
that holds a typed value from the serializer can therefore hold such a reference, and the
external-object collector (``admin/extref_gc.py``: it deletes what no record names),
``export`` (``cli/transfer.py``: it carries what the thread's records name) and the storage
figures (``storage_footprint``, ``inspection/storage.py``) must all know every such kind.
This module is the one list of them, :data:`REFERRERS`; the kinds that hold no serialized
value are listed too, each with the reason (:data:`REDIS_SUFFIXES_WITHOUT_VALUES`,
:data:`PREFIX_KEYS_WITHOUT_VALUES`, :data:`COLLECTIONS_WITHOUT_VALUES`).
``tests/unit/test_referrers.py`` fails when a Redis key suffix of ``hot/keys.py``
(``ThreadKeys``), a key of the whole prefix (a ``*_key`` function of ``hot/keys.py``) or a
MongoDB collection of ``durable/documents.py`` (``Collections``) is in neither list.

Adding a kind of record that holds serialized values (a new Redis hash, a new MongoDB
collection): add a :class:`Referrer` to :data:`REFERRERS` with how to find its values in
each tier (hashes that are not a thread's: ``suffix=""`` and ``owns_key``). Adding one that
holds none: add it with its reason to the matching ``*_WITHOUT_VALUES`` table. Values are
read from Redis hashes (``HSCAN``) and from MongoDB documents; a kind stored otherwise
needs its own reader in ``extref_gc.py``.

========== ======= ============= ==========================================================
kind       Redis   MongoDB       values
========== ======= ============= ==========================================================
checkpoint ``cp``  checkpoints   the checkpoint and its metadata; in MongoDB also the small
                                 channel values it introduced (``vals``)
channel    ``bl``  blobs         one channel value per (namespace, channel, version)
write      ``w``   writes        pending writes' values (one, or one call's: ``writes``)
item       ``it``  items         one item of a list value (a node holds digests only)
effect     ``fx``  effects       the journaled result of ``once()`` (state ``done``)
========== ======= ============= ==========================================================

Values over 16 MiB are stored in the ``chunks`` collection in pieces, reassembled with
their owner document (``durable/chunks.py`` ``load_plan``) before they are read here.
References inside an encrypted value (an ``EncryptedSerializer`` around the
``ExternalRefSerializer``) cannot be seen by anyone but the serializer.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import ormsgpack

from ..core.items import NODE_MAGIC
from ..core.records import CheckpointRecord, Typed, WriteRecord, unpack_blob
from ..durable.inline import inline_values
from ..hot.effect_scripts import TRUST_FIELD
from ..hot.keys import binding_key, heartbeats_key, thread_keys_of
from ..outbox.group import dead_letter_key
from ..plans.context import Context
from ..plans.effect_journal import STATES, Entry
from ..serde.external import EXTREF_TYPE

__all__ = [
    "COLLECTIONS_WITHOUT_VALUES",
    "PREFIX_KEYS_WITHOUT_VALUES",
    "REDIS_SUFFIXES_WITHOUT_VALUES",
    "REFERRERS",
    "Referrer",
    "collections_of_threads",
    "prefix_keys",
    "redis_referrer",
    "refs_of_documents",
]

MARKER = EXTREF_TYPE.encode()
"""Bytes every stored value holding a reference contains (its type name): a Redis value
without them is skipped undecoded."""

_EMPTY_INDEX = ormsgpack.packb([""])


def _extref(values: Iterable[Typed | None]) -> list[Typed]:
    return [v for v in values if v is not None and v[0] == EXTREF_TYPE]


@dataclass(frozen=True)
class Referrer:
    """A kind of record that can hold serialized values, and how to find them.

    ``name``: the record kind (for messages and docs). ``suffix``: the ``ThreadKeys``
    suffix of the per-thread Redis hash holding them (field -> stored bytes); a kind kept
    in hashes that are not a thread's (a store's namespaces) leaves it ``""`` and gives
    ``owns_key(prefix, key)``, true for each such hash of the prefix.
    ``collection``: the ``Collections`` attribute of the MongoDB collection holding them.
    ``query``: the MongoDB filter of the documents that may hold a reference;
    ``projection``: the fields ``of_document`` reads. ``of_hash``: ``(field, raw, where)``
    -> the reference-holding typed values of one Redis hash entry (``where`` names it for
    errors); ``of_document``: the same for one MongoDB document (chunks reassembled).
    Both raise ``CorruptRecordError``/``ExternalRefError`` for what they cannot decode,
    so a collection stops rather than delete what a record it could not read names."""

    name: str
    suffix: str
    collection: str
    query: Mapping[str, Any]
    projection: tuple[str, ...]
    of_hash: Callable[[bytes, bytes, str], list[Typed]]
    of_document: Callable[[Mapping[str, Any]], list[Typed]]
    owns_key: Callable[[str, str], bool] | None = None


def _typed_fields(*pairs: tuple[str, str]) -> Callable[[Mapping[str, Any]], list[Typed]]:
    """``of_document`` of a document whose values are ``(type field, data field)`` pairs."""
    def values(doc: Mapping[str, Any]) -> list[Typed]:
        return [(EXTREF_TYPE, bytes(doc[d])) for t, d in pairs if doc.get(t) == EXTREF_TYPE]
    return values


def _checkpoint_document(doc: Mapping[str, Any]) -> list[Typed]:
    """The checkpoint's and metadata's references, and those of the channel values inside
    the document (``vals``: ``durable/inline.py``)."""
    own = _typed_fields(("type", "checkpoint"), ("metadata_type", "metadata"))(doc)
    return own + _extref(inline_values(doc).values())


def _checkpoint_hash(_field: bytes, raw: bytes, _where: str) -> list[Typed]:
    rec = CheckpointRecord.unpack("", "", raw, _EMPTY_INDEX)
    return _extref((rec.checkpoint, rec.metadata))


def _blob_hash(_field: bytes, raw: bytes, where: str) -> list[Typed]:
    return _extref([unpack_blob(raw, where)])


def _item_hash(field: bytes, raw: bytes, where: str) -> list[Typed]:
    if raw[:2] == NODE_MAGIC:  # a node holds digests only
        return []
    return _blob_hash(field, raw, where)


def _write_hash(_field: bytes, raw: bytes, where: str) -> list[Typed]:
    return _extref([WriteRecord.unpack(raw, where).value])


def _write_document(doc: Mapping[str, Any]) -> list[Typed]:
    """A writes document's references: its value, or each write's of a document of one
    ``put_writes`` call (``durable/write_groups.py``: the array ``writes``)."""
    found = _typed_fields(("type", "data"))(doc)
    for e in doc.get("writes") or ():
        if isinstance(e, Mapping) and e.get("type") == EXTREF_TYPE:
            found.append((EXTREF_TYPE, bytes(e["data"])))
    return found


def _effect_hash(field: bytes, raw: bytes, where: str) -> list[Typed]:
    if field == TRUST_FIELD.encode():
        return []
    return _extref([Entry.unpack(raw, where).value])


def _effect_document(doc: Mapping[str, Any]) -> list[Typed]:
    where = f"MongoDB document {doc.get('_id')!r} (thread {doc.get('thread_id')!r})"
    return _extref([Entry.unpack(bytes(doc["raw"]), where).value])


REFERRERS: tuple[Referrer, ...] = (
    Referrer("checkpoint", "cp", "checkpoints",
             {"$or": [{"type": EXTREF_TYPE}, {"metadata_type": EXTREF_TYPE},
                      {"vals.type": EXTREF_TYPE}]},
             ("type", "checkpoint", "metadata_type", "metadata", "checkpoint_ns", "vals"),
             _checkpoint_hash, _checkpoint_document),
    Referrer("channel value", "bl", "blobs", {"type": EXTREF_TYPE}, ("type", "data"),
             _blob_hash, _typed_fields(("type", "data"))),
    Referrer("pending write", "w", "writes",
             {"$or": [{"type": EXTREF_TYPE}, {"writes.type": EXTREF_TYPE}]},
             ("type", "data", "writes"), _write_hash, _write_document),
    Referrer("item", "it", "items", {"type": EXTREF_TYPE}, ("type", "data"),
             _item_hash, _typed_fields(("type", "data"))),
    Referrer("effect journal entry", "fx", "effects", {"state": STATES["d"]},
             ("raw",), _effect_hash, _effect_document),
)
"""Every kind of record that can hold a serialized value (see the module docs)."""

REDIS_SUFFIXES_WITHOUT_VALUES: dict[str, str] = {
    "cv": "the checkpoint blob index: member -> [parent, blob field...], names only",
    "idx": "the checkpoint index: a sorted set of checkpoint members",
    "wi": "the pending-write index: a sorted set of write fields",
    "ns": "namespace order: checkpoint_ns -> first checkpoint_id",
    "meta": "thread state: counters, generation, heads (members)",
    "gone": "tombstones: member -> deletion time",
}
"""``ThreadKeys`` suffixes whose keys hold no serialized value, with the reason."""

PREFIX_KEYS_WITHOUT_VALUES: dict[str, str] = {
    "outbox_key": "outbox entries name records (fields, item digests), never a value: "
                  "the flusher reads the values from the thread's hashes",
    "registry_key": "the thread registry: thread_id -> 1 or d, and the epoch",
    "binding_key": "the binding: database, collection_prefix, partitions",
    "heartbeats_key": "the flushers' heartbeats: consumer -> lapse time",
    "dead_letter_key": "dead letters: the outbox entry's fields (thread, payload naming "
                       "records), entry id, step and error text (outbox/dead.py); a dead "
                       "letter that carried record bytes would be a referrer",
}
"""Keys of the whole prefix (by the function of ``hot/keys.py`` or ``outbox/group.py``
naming them) that hold no serialized value, with the reason."""

COLLECTIONS_WITHOUT_VALUES: dict[str, str] = {
    "store": "the memory store's items (store/): serialized values, but a DurableStore "
             "refuses an ExternalRefSerializer, so none names an external object; a store "
             "that took one would make this a referrer",
    "meta": "the schema version, the owner key prefix and migration cursors",
    "tombstones": "the deletes' tombstones: member -> deletion time",
    "audit": "the operators' actions on threads (inspection/audit.py): JSON text of what "
             "was given and one-line results, no serialized value",
    "threads": "one summary per thread (durable/summary_docs.py): status facts, counts, "
               "and the title and latest messages' text as plain text (none with an "
               "encrypting serializer), never a serialized value",
    "retention": "threads' activity and expiry times, TTLs and pins (durable/retention_docs.py)",
    "chunks": "pieces of values over 16 MiB of the referrers' documents, read through "
              "their owner document (durable/chunks.py load_plan), never on their own",
}
"""``Collections`` attributes whose collections hold no serialized value of their own,
with the reason."""


def prefix_keys(ctx: Context) -> dict[str, list[str]]:
    """The keys of the whole prefix of ``ctx`` (not of a thread), by the name of the
    function naming them (the keys of :data:`PREFIX_KEYS_WITHOUT_VALUES`): every outbox
    partition, every partition's thread registry, the binding, the heartbeats and the
    dead letters."""
    prefix = ctx.config.key_prefix
    return {"outbox_key": list(ctx.outboxes), "registry_key": list(ctx.registries),
            "binding_key": [binding_key(prefix)], "heartbeats_key": [heartbeats_key(prefix)],
            "dead_letter_key": [dead_letter_key(ctx)]}


def redis_referrer(prefix: str, key: str) -> tuple[str, Referrer] | None:
    """``(thread_id, referrer)`` when ``key`` is the Redis hash of a kind of
    :data:`REFERRERS` of a thread of ``prefix`` (exactly as ``ThreadKeys`` names it;
    ``("", referrer)`` for a hash its ``owns_key`` claims), else ``None``."""
    keys = thread_keys_of(prefix, key)
    suffix = keys.suffix_of(key) if keys is not None else None
    for ref in REFERRERS:
        if keys is not None and ref.suffix and ref.suffix == suffix:
            return keys.thread_id, ref
        if ref.owns_key is not None and ref.owns_key(prefix, key):
            return "", ref
    return None


def collections_of_threads() -> tuple[str, ...]:
    """``Collections`` attributes of every collection holding threads' records and values:
    the referrers' and ``chunks`` (for storage figures)."""
    return (*(r.collection for r in REFERRERS), "chunks")


def refs_of_documents(docs: Mapping[str, Iterable[Mapping[str, Any]]]) -> list[Typed]:
    """The reference-holding typed values of MongoDB documents given by ``Collections``
    attribute (``{"checkpoints": [...], "effects": [...]}``, chunks reassembled); a
    referrer's collection missing from ``docs`` is a ``KeyError`` (every one must be
    read)."""
    return [typed for ref in REFERRERS for doc in docs[ref.collection]
            for typed in ref.of_document(doc)]
