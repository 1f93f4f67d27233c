"""Documents of the items collection (sans-I/O): the items and nodes of list values
(``core/items.py``), one document per thread and item.

An item's document holds its digest as ``d`` and its value as ``type``/``data``. The
flusher stores a node (the digests of 32 consecutive items of a list) inside the document
of the item that completes it (``schema.HOSTED_NODE_VERSION``): ``d`` is then the array
``[item digest, node digest]`` and ``refs`` the node's item digests, so the
``thread_digest`` index (multikey) and ``$lookup`` on ``d`` find the document by either
digest, and a node costs no document of its own. The item is new in the same round
(``round_docs``), or stored before (an agent's message, written by ``put_writes`` before
the ``put`` that makes the node; a replayed round: ``lone_nodes_plan`` updates its
document). Otherwise (that document holds another node, or is not in MongoDB; a copy, an
import, a migration) a node has its own document: ``d`` its digest, ``type`` ``items.NODE_TYPE``,
``refs`` its item digests. Reads take both forms (``entries``).

A hosting document is deleted with its item: a node names its items, so whatever keeps
the node keeps the item too (the collector, ``prune_choice.unreferenced_items``); a node
no longer named while its item is stays inside it (about 0.5 KiB) until the item goes.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..core.items import DIGEST_BYTES, NODE_MAGIC, NODE_TYPE, split_digests
from ..core.ops import BulkWrite, Doc, DocView, Plan, UpdateDoc
from ..core.records import CHUNKED_VERSION, Typed, unpack_blob
from ..core.schema import HOSTED_NODE_VERSION, SCHEMA_VERSION
from ..errors import CorruptRecordError
from .checks import damaged
from .documents import bin_data, check_document, doc_id, target


def item_doc(thread_id: str, digest: bytes, stored: bytes, *,
             put_ms: int = 0) -> Doc:
    """The items-collection document of an item or node as Redis stores it (``stored``:
    a blob envelope, or ``NODE_MAGIC`` + digests). ``put_ms``: the latest time it was
    stored (``upsert_item``), so a delete removes it only when no write stored it since."""
    doc: Doc = {"_id": doc_id(thread_id, digest.hex()), "v": SCHEMA_VERSION,
                "thread_id": thread_id, "d": bin_data(digest)}
    if stored[:2] == NODE_MAGIC:
        doc.update(type=NODE_TYPE, data=b"", refs=split_digests(stored[2:]))
    else:
        typed = unpack_blob(stored, f"item {digest.hex()} of thread {thread_id!r}")
        if typed is None:
            raise CorruptRecordError(f"item {digest.hex()} of thread {thread_id!r} is empty")
        doc.update(type=typed[0], data=bin_data(typed[1]))
    doc["put_ms"] = put_ms
    return doc


def round_docs(thread_id: str, read: Mapping[Any, bytes | None], put_ms: Mapping[bytes, int],
               lone: list[Doc]) -> list[tuple[Doc, bytes]]:
    """The documents of the items and nodes ``read`` from Redis (digest -> stored bytes,
    as ``item_doc`` takes them; None: deleted since, left out) for one flush round of
    ``thread_id``, each with the stored bytes of its item. A node whose last item is among
    them is inside that item's document (``hosted``; one node an item); a node whose last
    item is not (it was stored before: an agent's message is written by ``put_writes``,
    the node by the next ``put``) is appended to ``lone``, for ``lone_nodes_plan``.
    ``put_ms``: per digest."""
    stored = {d: raw for d, raw in read.items() if raw is not None and isinstance(d, bytes)}
    hosts: dict[bytes, bytes] = {}  # item digest -> node digest it holds
    for d, raw in stored.items():
        if raw[:2] == NODE_MAGIC and len(raw) > 2:
            last = raw[-DIGEST_BYTES:]
            got = stored.get(last)
            if got is not None and got[:2] != NODE_MAGIC and last not in hosts:
                hosts[last] = d
    held = set(hosts.values())
    out: list[tuple[Doc, bytes]] = []
    for d, raw in stored.items():
        if d in held:
            continue
        doc = item_doc(thread_id, d, raw, put_ms=put_ms[d])
        node = hosts.get(d)
        if node is not None:
            doc = hosted(doc, node, stored[node], max(put_ms[d], put_ms[node]))
        if doc["type"] == NODE_TYPE:
            lone.append(doc)
        else:
            out.append((doc, raw))
    return out


def lone_nodes_plan(collection: str, nodes: list[Doc]) -> Plan[None]:
    """Store the lone nodes of a flush round (``round_docs``), after its items: each
    inside the document of its last item, stored before, while that one holds its item
    alone or this node (one unordered bulk of ``host_update``s). When fewer matched than
    were sent (an item not in MongoDB yet or any more, or holding another node), every one
    of them is upserted as a document of its own too: a node is never lost, and one stored
    in both forms reads alike."""
    if not nodes:
        return
    done = yield BulkWrite(collection, [host_update(n) for n in nodes])
    if done.matched < len(nodes):
        yield BulkWrite(collection, [upsert_item(n) for n in nodes])


def host_update(node: DocView) -> UpdateDoc:
    """Update putting the node ``node`` (its own document's form, ``item_doc``) inside
    the document of its last item, only while that one holds its item alone or this node
    already (not another: a filter on ``d`` matches an array holding the item too),
    keeping the later ``put_ms`` of the two (a delete that keeps the node keeps the item
    holding it)."""
    refs = [bytes(c) for c in node["refs"]]
    tid, last, digest = node["thread_id"], refs[-1], bytes(node["d"])
    return UpdateDoc({"_id": doc_id(tid, last.hex()), "thread_id": tid, "d": last,
                      "$or": [{"d.1": {"$exists": False}}, {"d.1": digest}]},
                     {"$set": {"d": [last, digest], "refs": refs},
                      "$max": {"v": HOSTED_NODE_VERSION, "put_ms": node.get("put_ms") or 0}})


def hosted(item: Doc, node: bytes, node_stored: bytes, put_ms: int) -> Doc:
    """``item`` (an item's document) holding also the node ``node`` whose stored bytes
    are ``node_stored`` (``NODE_MAGIC`` + its item digests, the last of them ``item``'s)."""
    return {**item, "v": max(HOSTED_NODE_VERSION, item["v"]), "d": [item["d"], bin_data(node)],
            "refs": split_digests(node_stored[2:]), "put_ms": put_ms}


def split_hosted(doc: Doc) -> list[Doc]:
    """``doc`` as documents that each hold one item or node: a hosting document
    (``hosted``) as its item's and its node's own; any other as it is. Its chunks, if
    any, stay the item's (same ``_id``)."""
    d = doc.get("d")
    if not isinstance(d, list):
        return [doc]
    item_digest, node_digest = _pair(doc)
    item = {k: v for k, v in doc.items() if k != "refs"}
    item["d"] = item_digest
    item["v"] = CHUNKED_VERSION if doc.get("chunked") else SCHEMA_VERSION
    node = {"_id": doc_id(doc["thread_id"], node_digest.hex()), "v": SCHEMA_VERSION,
            "thread_id": doc["thread_id"], "d": node_digest, "type": NODE_TYPE, "data": b"",
            "refs": list(doc.get("refs") or ()), "put_ms": doc.get("put_ms", 0)}
    return [item, node]


def upsert_item(doc: Doc) -> UpdateDoc:
    """Insert-once upsert of the document of one item or node (its content is fixed by
    its digest; a hosting one goes through ``upserts``); ``put_ms`` only grows (``$max``),
    recording the latest write that stored it."""
    fields = {k: v for k, v in doc.items() if k not in ("_id", "put_ms")}
    return UpdateDoc(target(doc),
                     {"$setOnInsert": fields, "$max": {"put_ms": doc["put_ms"]}}, upsert=True)


def upsert_stored(doc: Doc, lone: list[Doc]) -> UpdateDoc:
    """``upsert_item`` of an items document stored already (a replayed round, an item
    sent again); of a hosting one (``hosted``), its item's, its node appended to ``lone``
    (for ``lone_nodes_plan``: inside the stored item's document, else on its own)."""
    item, *node = split_hosted(doc)
    lone += node
    return upsert_item(item)


def digests_of(doc: DocView) -> list[bytes]:
    """The digests an items document is found by: its item's or node's, or an item's
    and the node it holds (the node last); ``CorruptRecordError`` naming the document
    when ``d`` is malformed."""
    d = doc.get("d")
    if isinstance(d, list):
        return list(_pair(doc))
    if not isinstance(d, bytes):
        raise damaged(doc, "items", "field 'd' is missing or not binary data")
    return [d]


def entries(doc: DocView) -> list[tuple[bytes, Typed]]:
    """``(digest, parsed item)`` of each item and node an items document holds (a node
    as ``(NODE_TYPE, digests)``, see ``items.parse_stored``): one, or an item and the node
    it holds. ``CorruptRecordError`` naming the document when a field is missing or
    malformed, ``SchemaVersionError`` for a newer format."""
    d = doc.get("d")
    if isinstance(d, list):
        item_digest, node_digest = _pair(doc)
        check_document({**doc, "d": item_digest}, "items")
        refs = b"".join(bytes(c) for c in doc.get("refs") or ())
        if not refs:
            raise damaged(doc, "items", "it holds a node without items ('refs')")
        return [(item_digest, (doc["type"], bytes(doc["data"]))),
                (node_digest, (NODE_TYPE, refs))]
    check_document(doc, "items")
    digest = bytes(doc["d"])
    if doc["type"] == NODE_TYPE:
        return [(digest, (NODE_TYPE, b"".join(bytes(c) for c in doc.get("refs", []))))]
    return [(digest, (doc["type"], bytes(doc["data"])))]


def _pair(doc: DocView) -> tuple[bytes, bytes]:
    """``(item digest, node digest)`` of a hosting document."""
    d: Any = doc["d"]
    if len(d) != 2 or not all(isinstance(x, bytes) and len(x) == DIGEST_BYTES for x in d):
        raise damaged(doc, "items", "field 'd' holds an array that is not [item digest, "
                                    "node digest]")
    return d[0], d[1]

