"""How many bytes one thread takes, per channel and per kind of record, in each tier.

``thread_size(saver, thread_id)`` reads both tiers directly (read only, like the rest of
``inspection``) and returns a ``ThreadSize``. Units are bytes everywhere; each tier is
measured as it stores the data, so the two tiers' figures are not the same quantity:

- Redis: the length of each stored value (``HSTRLEN`` of the hash field: the envelope
  the saver wrote, serializer bytes and a few bytes of header), summed per channel, and
  ``MEMORY USAGE ... SAMPLES 0`` of each of the thread's keys for its total (what Redis
  spends, overhead and index keys included).
- MongoDB: the BSON size of each document (``$bsonSize`` in an aggregation), summed per
  channel and per collection (field names, ids and ``put_ms`` included).

A list value (messages) is stored as a manifest of 32-byte item digests: its channel
figures count the manifest, and the messages themselves are under ``items`` (each stored
once per thread, shared by every version). ``blobs`` are the objects an
``ExternalRefSerializer`` moved to its blob store (DataFrames, arrays, large values) that
the thread's records name, with the size their reference records (bytes before
encryption); they are counted once per key whichever tier names them.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from typing import Any

import ormsgpack

from ..admin.referrers import REFERRERS
from ..core.records import SEP, split_field
from ..durable import footprint_queries as Size
from ..durable.documents import blob_ids
from ..durable.inline import split_key
from ..serde.external import parse_refs
from . import storage
from .lookup import LookupFailedError

PER_KIND = ("checkpoints", "writes", "items", "effects")
"""The kinds of records besides channel values, reported per tier."""


@dataclasses.dataclass
class ChannelSize:
    """One channel of one namespace in one tier: ``versions`` stored, ``all_bytes`` of
    every stored version, ``latest_bytes`` of the version the namespace's latest
    checkpoint (in that tier) refers to (0 when that tier lacks it)."""

    ns: str
    channel: str
    versions: int = 0
    all_bytes: int = 0
    latest_bytes: int = 0


@dataclasses.dataclass
class Kind:
    """A kind of record in one tier: how many and their bytes."""

    count: int = 0
    bytes: int = 0


@dataclasses.dataclass
class TierSize:
    """One tier's figures for the thread (see the module docs for what a byte is here):
    ``channels`` (channel values), ``kinds`` (``checkpoints``, ``writes`` (pending
    writes), ``items``, ``effects``; MongoDB also ``chunks``), ``total`` (Redis: MEMORY
    USAGE of every key of the thread; MongoDB: BSON size of every document), ``down``
    (the error text when the tier did not answer; figures then zero)."""

    tier: str
    unit: str
    channels: list[ChannelSize] = dataclasses.field(default_factory=list)
    kinds: dict[str, Kind] = dataclasses.field(default_factory=dict)
    total: int = 0
    down: str | None = None


@dataclasses.dataclass
class BlobRef:
    """An external object (blob store) named by the thread's records: its ``key``,
    ``format``, ``size`` (bytes, as its reference records them) and the tiers naming it."""

    key: str
    format: str
    size: int
    tiers: list[str]


@dataclasses.dataclass
class ThreadSize:
    """``thread_size``'s answer: the thread, its two tiers and its external blobs
    (``blob_bytes`` sums their sizes, each key once)."""

    thread_id: str
    redis: TierSize
    mongodb: TierSize
    blobs: list[BlobRef]
    blob_bytes: int

    def as_dict(self) -> dict[str, Any]:
        """JSON data (``--json``, ``/api/thread/<id>/size``)."""
        return dataclasses.asdict(self)


def _text(v: Any) -> str:
    return v.decode() if isinstance(v, bytes) else str(v)


def _channel(rows: dict[tuple[str, str], ChannelSize], ns: str, ch: str) -> ChannelSize:
    return rows.setdefault((ns, ch), ChannelSize(ns, ch))


def _refs(typed: Iterable[Any], found: dict[str, BlobRef], tier: str) -> None:
    for type_, data in typed:
        for part in parse_refs(type_, data):
            key = str(part["key"])
            ref = found.setdefault(key, BlobRef(key, str(part.get("format")),
                                                int(part.get("size") or 0), []))
            if tier not in ref.tiers:
                ref.tiers.append(tier)


def _latest_fields(index: dict[str, bytes]) -> set[str]:
    """The blob fields of the newest checkpoint of each namespace of a thread's blob
    index (Redis ``cv``: member -> msgpack ``[parent_id, blob_field, ...]``)."""
    newest: dict[str, str] = {}
    for m in index:
        ns, cid = m.split(SEP)
        if cid > newest.get(ns, ""):
            newest[ns] = cid
    fields: set[str] = set()
    for ns, cid in newest.items():
        entry = ormsgpack.unpackb(index[f"{ns}{SEP}{cid}"])
        fields.update(str(f) for f in entry[1:])
    return fields


def redis_size(ctx: Any, r: Any, thread_id: str, found: dict[str, BlobRef]) -> TierSize:
    """The Redis figures of ``thread_id`` (see ``TierSize``); external references found
    in its values are added to ``found``."""
    keys = ctx.keys(thread_id)
    out = TierSize("redis", "stored value length (HSTRLEN); total: MEMORY USAGE")
    hashes = {ref.suffix: getattr(keys, ref.suffix) for ref in REFERRERS}
    pipe = r.pipeline(transaction=False)
    for key in hashes.values():
        pipe.hgetall(key)
    pipe.hgetall(keys.cv)
    everything = [*keys.all, keys.fx]
    for key in everything:
        pipe.execute_command("MEMORY", "USAGE", key, "SAMPLES", "0")
    replies = pipe.execute()
    values = dict(zip(hashes, replies[:len(hashes)]))
    index = {_text(k): bytes(v) for k, v in replies[len(hashes)].items()}
    out.total = sum(int(x or 0) for x in replies[len(hashes) + 1:])
    where = f"redis thread {thread_id!r}"
    for ref in REFERRERS:
        _refs((t for f, raw in values[ref.suffix].items()
               for t in ref.of_hash(bytes(f), bytes(raw), where)), found, "redis")
    latest = _latest_fields(index)
    rows: dict[tuple[str, str], ChannelSize] = {}
    for f, raw in values["bl"].items():
        field = _text(f)
        ns, ch, _version = split_field(field)
        row = _channel(rows, ns, ch)
        row.versions += 1
        row.all_bytes += len(raw)
        if field in latest:
            row.latest_bytes += len(raw)
    out.channels = sorted(rows.values(), key=lambda c: (c.ns, c.channel))
    for kind, suffix in (("checkpoints", "cp"), ("writes", "w"), ("items", "it"),
                         ("effects", "fx")):
        entries = values[suffix]
        out.kinds[kind] = Kind(len(entries), sum(len(v) for v in entries.values()))
    return out


def mongo_size(ctx: Any, db: Any, thread_id: str, found: dict[str, BlobRef]) -> TierSize:
    """The MongoDB figures of ``thread_id`` (see ``TierSize``); external references found
    in its documents are added to ``found``."""
    cols = ctx.collections
    out = TierSize("mongodb", "BSON document size ($bsonSize)")
    rows: dict[tuple[str, str], ChannelSize] = {}
    for d in db[cols.blobs].aggregate(Size.channel_sizes(thread_id)):
        row = _channel(rows, d["_id"]["ns"], d["_id"]["ch"])
        row.versions, row.all_bytes = int(d["n"]), int(d["bytes"])
    latest: set[str] = set()
    for ns in set(db[cols.checkpoints].distinct("checkpoint_ns", {"thread_id": thread_id})) | {""}:
        doc = db[cols.checkpoints].find_one({"thread_id": thread_id, "checkpoint_ns": ns},
                                            {"blob_fields": 1}, sort=[("checkpoint_id", -1)])
        if doc is not None:
            latest.update(f"{ns}{SEP}{ch}{SEP}{ver}" for ch, ver in doc["blob_fields"])
    if latest:
        for d in db[cols.blobs].aggregate(
                Size.blob_sizes(blob_ids(thread_id, sorted(latest)))):
            _channel(rows, d["_id"]["ns"], d["_id"]["ch"]).latest_bytes = int(d["bytes"])
    inline = _inline_sizes(db[cols.checkpoints], thread_id, rows, latest)
    out.channels = sorted(rows.values(), key=lambda c: (c.ns, c.channel))
    for kind in (*PER_KIND, "chunks"):
        # writes count one each, also inside a document of one put_writes call
        got = list(db[getattr(cols, kind)].aggregate(
            Size.thread_size(thread_id, writes=kind == "writes")))
        out.kinds[kind] = Kind(int(got[0]["n"]), int(got[0]["bytes"])) if got else Kind()
    if "checkpoints" in out.kinds:  # the values inside them are counted as channels
        k = out.kinds["checkpoints"]
        out.kinds["checkpoints"] = Kind(k.count, max(0, k.bytes - inline))
    out.total = sum(c.all_bytes for c in out.channels) + sum(
        k.bytes for k in out.kinds.values())
    for ref in REFERRERS:
        projection = {name: 1 for name in ref.projection}
        projection["chunked"] = 1
        docs = list(db[getattr(cols, ref.collection)].find(
            Size.of_thread(thread_id, ref.query), projection))
        docs = storage.loaded(db, cols, docs)
        _refs((t for doc in docs for t in ref.of_document(doc)), found, "mongodb")
    return out


def _inline_sizes(checkpoints: Any, thread_id: str, rows: dict[tuple[str, str], ChannelSize],
                  latest: set[str]) -> int:
    """Add to ``rows`` the channel values inside the thread's checkpoint documents
    (``vals``: ``durable/inline.py``; each entry's ``$bsonSize``); returns their bytes."""
    total = 0
    for d in checkpoints.aggregate(Size.inline_value_sizes(thread_id)):
        try:
            ch, ver = split_key(d["k"])
        except (TypeError, ValueError):
            continue  # a damaged entry: the reads name it
        row = _channel(rows, d["ns"], ch)
        row.versions += 1
        row.all_bytes += int(d["bytes"])
        total += int(d["bytes"])
        if f"{d['ns']}{SEP}{ch}{SEP}{ver}" in latest:
            row.latest_bytes += int(d["bytes"])
    return total


def thread_size(saver: Any, thread_id: str) -> ThreadSize:
    """The storage report of ``thread_id``: per tier, each channel's bytes (every stored
    version, and the version its namespace's latest checkpoint refers to), pending
    writes, items, checkpoints and effect-journal entries (count and bytes), the tier's
    total; and the external blobs the thread's records name. A tier that does not answer
    is reported ``down`` (its error's text), the other still measured. Raises
    ``LookupFailedError`` when neither tier holds the thread."""

    clients = saver.sync_clients
    ctx = saver.context
    found: dict[str, BlobRef] = {}
    tiers: list[TierSize] = []
    for name, measure, client in (("redis", redis_size, clients.redis),
                                  ("mongodb", mongo_size, clients.db)):
        try:
            tiers.append(measure(ctx, client, thread_id, found))
        except Exception as exc:  # a tier down: say so, measure the other
            if type(exc).__name__ in ("ExternalRefError", "CorruptRecordError"):
                raise
            tiers.append(TierSize(name, "", down=f"{type(exc).__name__}: {exc}"))
    hot, cold = tiers
    if not any(t.down or t.kinds["checkpoints"].count for t in tiers):
        raise LookupFailedError(f"thread {thread_id!r} not found")
    blobs = sorted(found.values(), key=lambda b: b.key)
    return ThreadSize(thread_id, hot, cold, blobs, sum(b.size for b in blobs))
