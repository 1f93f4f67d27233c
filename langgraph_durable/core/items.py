"""Content-addressed items (sans-I/O): a list value is stored as a *manifest* of its items.

A channel value or pending write value that is a plain, non-empty ``list`` is not stored
whole. Each element is serialized on its own (``serde.dumps_typed``) and stored once per
thread under its *digest*, a 128-bit BLAKE2b of its type and bytes; the value itself is
stored as a manifest, the ordered digests. Appending a message to a conversation stores one
item and one small manifest, so a thread costs bytes linear in its length.

Manifests stay small as lists grow: every run of ``NODE_SIZE`` consecutive items from the
start of the list (positions 0-31, 32-63, ...) is a *node*, itself stored once under the
digest of its item digests; a manifest is the digests of the list's full nodes followed
by the digests of the items after them (fewer than ``NODE_SIZE``). Appending to a list
changes only the tail; a full tail becomes one node shared by every later version.

Stored forms (both tiers keep the same bytes; ``hot/keys.py`` ``it``, the MongoDB
``items`` collection):

- item: the blob envelope ``[SCHEMA_VERSION, type, bytes]`` (``records.pack_blob``)
- node: ``NODE_MAGIC`` + its item digests (16 bytes each)
- a manifest value in a channel blob or write envelope: ``MANIFEST_MAGIC`` + 4-byte
  big-endian length + the manifest's digests + the ordinary envelope with the typed value
  ``(MANIFEST_TYPE, b"")``. ``0xc1`` never starts a msgpack document, so no other envelope
  is taken for one, and the Lua scripts find the digests at a fixed offset.

Digests: ``blake2b(type NUL bytes, digest_size=16, person="lgd-item")`` over the
*plaintext* serialization. With an encrypting serializer items are encrypted one by one
(their stored bytes differ at every write, their digests do not) and the digest is keyed
(``key`` derived from the serializer's key or ``item_digest_key``), so no unkeyed hash of
plaintext is ever stored. Without a key for an encrypting serializer, lists are stored
whole as before (``Items.enabled`` is False).

Serialization cost: ``Items`` remembers, per object, the digest and stored bytes of the
LangChain messages (pydantic models) it serialized, with a deep copy taken at that time
(``core/model_copies.py``). The same object met again is not serialized again when its
fields still equal the copy's (``==`` of ``__dict__`` and the extra fields, what
``model_dump`` serializes), so a step serializes only the messages it added or changed (a
channel's list of 32 items or more is compared as a whole with the one split last:
``split_memo.py``). A field changed in place to a value that compares equal under ``==``
but serializes differently (``1`` to ``1.0`` or ``True``) keeps its earlier bytes: set
``item_cache_bytes=0`` to serialize every item at every step.
"""

from __future__ import annotations

import hashlib
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Literal

from langgraph.checkpoint.serde.base import CipherProtocol, SerializerProtocol

from ..errors import ConfigurationError, CorruptRecordError
from .model_copies import ModelTemplate, Snapshot, is_model, model_snapshot, unchanged
from .split_memo import MIN_ITEMS, LastSplit, full_nodes

Typed = tuple[str, bytes]

MANIFEST_TYPE = "lgd.items"
"""Type of a typed value that is a manifest (its bytes are the digests)."""
NODE_TYPE = "lgd.node"
"""Type of a parsed node (its bytes are its item digests)."""
MANIFEST_MAGIC = b"\xc1I"
"""First bytes of a Redis envelope holding a manifest (see the module docstring)."""
NODE_MAGIC = b"\xc1N"
"""First bytes of a stored node."""
DIGEST_BYTES = 16
"""Length of a digest (128 bits)."""
NODE_SIZE = 32
"""Items per node."""
NODE_BYTES = len(NODE_MAGIC) + NODE_SIZE * DIGEST_BYTES
"""Length of a stored node (514): an item's stored bytes may have it too."""


def split_digests(data: bytes, where: str = "") -> list[bytes]:
    """``data`` cut into its 16-byte digests; ``CorruptRecordError`` when its length is
    not a multiple of 16."""
    if len(data) % DIGEST_BYTES:
        raise CorruptRecordError(f"malformed digest list ({len(data)} bytes) {where}".rstrip())
    return [data[i:i + DIGEST_BYTES] for i in range(0, len(data), DIGEST_BYTES)]


def wrap_manifest(refs: bytes, inner: bytes) -> bytes:
    """The Redis envelope of a manifest value: header, digests, then ``inner`` (the
    ordinary envelope whose typed value is ``(MANIFEST_TYPE, b"")``)."""
    return MANIFEST_MAGIC + len(refs).to_bytes(4, "big") + refs + inner


def unwrap_manifest(raw: bytes) -> tuple[bytes | None, bytes]:
    """``(digests, inner envelope)`` of a manifest envelope, ``(None, raw)`` for any
    other envelope."""
    if raw[:2] != MANIFEST_MAGIC:
        return None, raw
    n = int.from_bytes(raw[2:6], "big")
    return raw[6:6 + n], raw[6 + n:]


def parse_stored(raw: bytes, unpack_item: Callable[[bytes], Typed | None]) -> Typed:
    """A stored item or node in its parsed form: the item's typed value, or
    ``(NODE_TYPE, item digests)`` for a node."""
    if raw[:2] == NODE_MAGIC:
        return NODE_TYPE, bytes(raw[2:])
    typed = unpack_item(raw)
    if typed is None:
        raise CorruptRecordError("an empty stored item")
    return typed


def expand(refs: bytes, items: Mapping[bytes, Typed], where: str
           ) -> list[tuple[bytes, Typed]]:
    """``(digest, typed item)`` of the items a manifest names, in list order (nodes
    expanded). Raises ``CorruptRecordError`` naming ``where`` and the digest when one is
    missing."""
    out: list[tuple[bytes, Typed]] = []
    for d in split_digests(refs, where):
        got = items.get(d)
        if got is None:
            raise CorruptRecordError(f"item {d.hex()} of {where} is missing")
        if got[0] == NODE_TYPE:
            for c in split_digests(got[1], where):
                child = items.get(c)
                if child is None or child[0] == NODE_TYPE:
                    raise CorruptRecordError(f"item {c.hex()} (in node {d.hex()}) of {where} "
                                             "is missing")
                out.append((c, child))
        else:
            out.append((d, got))
    return out


def load_item(loads: Callable[[Typed], object], typed: Typed) -> object:
    """One stored item decoded as inside its whole list: LangGraph's serializers read a
    lone ``bytearray`` back as one but, nested in a list (msgpack bin), as ``bytes``, so a
    ``bytearray`` item is given as ``bytes``. (Their other top-level cases, ``None`` and
    ``bytes``, decode alike at both levels.) Raises what ``loads`` raises."""
    obj = loads(typed)
    return bytes(obj) if type(obj) is bytearray else obj


def node_children(items: Mapping[bytes, Typed], refs: Iterable[bytes]) -> set[bytes]:
    """The item digests the nodes among ``refs`` hold (nodes ``items`` has)."""
    out: set[bytes] = set()
    for d in refs:
        got = items.get(d)
        if got is not None and got[0] == NODE_TYPE:
            out.update(split_digests(got[1]))
    return out


@dataclass(frozen=True)
class SplitList:
    """A list value as stored: ``refs`` (the manifest's digests) and ``parts``: every
    item and node it needs, digest -> stored bytes."""

    refs: bytes
    parts: dict[bytes, Stored]


Stored = bytes | tuple[str, bytes]
"""An item or node as stored (bytes), or an item's typed value not packed yet (``pack``
makes its stored bytes when it must be sent)."""


def packed(parts: Mapping[bytes, Stored], pack: Callable[[Typed], bytes]) -> dict[bytes, bytes]:
    """``parts`` with every value in its stored bytes."""
    return {d: v if isinstance(v, bytes) else pack(v) for d, v in parts.items()}


class _Entry:
    __slots__ = ("obj", "snapshot", "digest", "stored", "size")

    def __init__(self, obj: object, snapshot: Snapshot, digest: bytes, stored: Stored
                 ) -> None:
        self.obj, self.snapshot, self.digest, self.stored = obj, snapshot, digest, stored
        self.size = len(stored) if isinstance(stored, bytes) else len(stored[1])


class Items:
    """The item store's process-side state for one saver: how to digest, the per-object
    serialization cache (per thread, at most ``cache_bytes`` of stored bytes in all, the
    least recently used threads dropped first; a read of a thread's latest checkpoint
    starts its entries afresh) and, per thread, the digests this process knows Redis holds
    (written or read), so a put sends only new items. Thread-safe.

    ``key``: BLAKE2b key (``b""`` = unkeyed); ``decrypt``: for an encrypting serializer,
    turns a stored typed value back into its plaintext typed value (digests are taken over
    the plaintext); ``enabled`` False stores lists whole."""

    def __init__(self, *, key: bytes = b"", decrypt: Callable[[Typed], Typed] | None = None,
                 enabled: bool = True, cache_bytes: int = 64 * 1024 * 1024,
                 max_threads: int = 10_000) -> None:
        self.enabled = enabled
        self._key = key
        self._decrypt = decrypt
        # per thread, object id -> entry; threads least recently used first
        self._cache: OrderedDict[str, dict[int, _Entry]] = OrderedDict()
        # per thread, digest -> how to rebuild what decoding that item gave (same LRU)
        self._templates: dict[str, dict[bytes, ModelTemplate]] = {}
        # per thread and list name, the list last split (split_memo.py; same LRU)
        self._last: dict[str, dict[str, LastSplit]] = {}
        self._cache_bytes = cache_bytes
        self._cached_bytes = 0
        self._known: OrderedDict[str, set[bytes]] = OrderedDict()
        self._max_threads = max_threads
        self._lock = threading.Lock()

    # ------------------------------------------------------------------ digests

    def digest(self, typed: Typed) -> bytes:
        """The digest of a stored item's typed value (plaintext; keyed when encrypted)."""
        if self._decrypt is not None and "+" in typed[0]:
            typed = self._decrypt(typed)
        h = hashlib.blake2b(digest_size=DIGEST_BYTES, key=self._key, person=b"lgd-item")
        h.update(typed[0].encode())
        h.update(b"\x00")
        h.update(typed[1])
        return h.digest()

    def node_digest(self, children: bytes) -> bytes:
        """The digest of a node holding ``children`` (concatenated item digests)."""
        return hashlib.blake2b(children, digest_size=DIGEST_BYTES, key=self._key,
                               person=b"lgd-node").digest()

    # ------------------------------------------------------------------ splitting

    def split(self, value: list[object], dumps: Callable[[object, int], Typed],
              pack: Callable[[Typed], bytes], thread_id: str = "",
              reuse: str | None = None) -> SplitList:
        """Split a list of ``thread_id`` into items and nodes. ``dumps(item, position)``
        serializes one item (raising the caller's errors); ``pack`` makes its stored
        envelope. ``reuse``: a name for this list among the thread's (a channel): when
        the list starts with the objects of the one last split under that name and none of
        them changed, their digests and nodes are reused as they are (``split_memo.py``)."""
        digests: list[bytes] = []
        stored_all: list[Stored] = []
        parts: dict[bytes, Stored] = {}
        entries: list[_Entry | None] = [None] * len(value)
        last: LastSplit | None = None
        start = 0
        if self._cache_bytes:
            with self._lock:
                cache = self._cache.get(thread_id)
                if cache is not None:
                    self._cache.move_to_end(thread_id)
                    if reuse:
                        last = (self._last.get(thread_id) or {}).get(reuse)
                    if last is None:
                        entries = [cache.get(id(item)) for item in value]
            if last is not None and cache is not None:
                start = last.prefix_of(value)
                if start:
                    digests, stored_all = last.digests[:start], last.stored[:start]
                    parts = dict(zip(digests, stored_all))
                with self._lock:
                    entries[start:] = [cache.get(id(item)) for item in value[start:]]
        snaps: list[Snapshot] | None = (
            [] if reuse and self._cache_bytes and len(value) >= MIN_ITEMS else None)
        for pos in range(start, len(value)):
            item, entry = value[pos], entries[pos]
            stored: Stored
            if entry is None or entry.obj is not item or not unchanged(entry.snapshot, item):
                snap = model_snapshot(item) if self._cache_bytes else None  # before: a
                typed = dumps(item, pos)  # change while serialized is seen by the next put
                stored = pack(typed)
                d = self.digest(typed)
                entry = self._remember_one(thread_id, item, d, stored, snap)
            else:
                d, stored = entry.digest, entry.stored
            if snaps is not None:
                if entry is None:  # not a model: nothing to compare it with next time
                    snaps = None
                else:
                    snaps.append(entry.snapshot)
                    stored_all.append(stored)
            digests.append(d)
            parts[d] = stored
        nodes, node_bytes = full_nodes(digests, last if start else None, self.node_digest,
                                       NODE_SIZE, NODE_MAGIC)
        parts.update(zip(nodes, node_bytes))
        if snaps is not None:
            self._memo(thread_id, reuse, (
                last.extended(value, snaps, start, digests, stored_all, nodes, node_bytes)
                if start and last is not None else
                LastSplit(list(value), snaps, digests, stored_all, nodes, node_bytes)))
        elif last is not None:
            self._memo(thread_id, reuse, None)
        return SplitList(b"".join(nodes) + b"".join(digests[len(nodes) * NODE_SIZE:]), parts)

    def _remember_one(self, thread_id: str, item: object, digest: bytes, stored: Stored,
                      snap: Snapshot | None) -> _Entry | None:
        """Remember ``item`` serialized as ``digest``/``stored`` with ``snap``, its snapshot
        taken before it was serialized; its entry, or None without a snapshot."""
        if snap is None:
            return None
        entry = _Entry(item, snap, digest, stored)
        self._remember(thread_id, [(entry, digest, stored)])
        return entry

    def _memo(self, thread_id: str, reuse: str | None, memo: LastSplit | None) -> None:
        """Keep ``memo`` as ``thread_id``'s last split named ``reuse`` while the thread's
        entries are kept (``_drop`` drops both); None forgets the one kept."""
        with self._lock:
            if memo is None:
                self._last.get(thread_id, {}).pop(reuse or "", None)
            elif reuse and thread_id in self._cache:
                self._last.setdefault(thread_id, {})[reuse] = memo

    def _remember(self, thread_id: str, found: Iterable[tuple[object, bytes, Stored]],
                  fresh: bool = False, templates: Mapping[bytes, ModelTemplate] | None = None
                  ) -> None:
        """Add entries (and ``templates``) to ``thread_id``'s cache (``fresh``: replacing
        what it held), then drop the least recently used threads' entries while over
        ``cache_bytes``."""
        if not self._cache_bytes:
            return
        entries = []
        for item, digest, stored in found:
            if isinstance(item, _Entry):
                entries.append(item)
            elif (snap := model_snapshot(item)) is not None:
                entries.append(_Entry(item, snap, digest, stored))
        with self._lock:
            cache = self._cache.get(thread_id)
            held = self._templates.get(thread_id)
            if cache is None or fresh:
                self._drop(thread_id)
                cache = self._cache[thread_id] = {}
                held = None
            if held is None:
                held = self._templates[thread_id] = {}
            self._cache.move_to_end(thread_id)
            for entry in entries:
                old = cache.get(id(entry.obj))
                if old is not None:
                    self._cached_bytes -= old.size
                cache[id(entry.obj)] = entry
                self._cached_bytes += entry.size
            for d, t in (templates or {}).items():
                if d not in held:
                    held[d] = t
                    self._cached_bytes += len(t.typed[1])
            while self._cached_bytes > self._cache_bytes and len(self._cache) > 1:
                self._drop(next(iter(self._cache)))

    def _drop(self, thread_id: str) -> None:
        """Forget ``thread_id``'s entries, templates and last splits (lock held)."""
        self._last.pop(thread_id, None)
        cache = self._cache.pop(thread_id, None)
        if cache is not None:
            self._cached_bytes -= sum(e.size for e in cache.values())
        held = self._templates.pop(thread_id, None)
        if held is not None:
            self._cached_bytes -= sum(len(t.typed[1]) for t in held.values())

    def decode(self, thread_id: str, found: Iterable[tuple[bytes, Typed]],
               loads: Callable[[Typed], object], remember: bool = False, fresh: bool = False
               ) -> list[object]:
        """The objects of ``thread_id``'s items ``(digest, typed value)``, in order. An
        item this process decoded before for the thread (same digest, so the same bytes)
        is not decoded again: it is rebuilt from a copy taken right after that decode
        (type, fields, extra and set fields, deep-copied plain data), which equals what
        ``loads`` gives and shares nothing with any object handed out before. Others are
        decoded with ``loads`` as they decode inside their list (``load_item``).
        ``remember``: also remember the objects, so a put of the same unchanged object does
        not serialize it again (a read of the latest checkpoint: the run goes on from these
        objects); with ``fresh`` (its first list) the thread's older entries and copies are
        dropped first (they would keep objects nothing uses alive, and cost Python's
        garbage collector)."""
        found = list(found)
        if not self._cache_bytes:
            return [load_item(loads, typed) for _, typed in found]
        with self._lock:
            held = self._templates.get(thread_id) or {}
            got = [held.get(d) for d, _ in found]
        out: list[object] = []
        entries: list[tuple[object, bytes, Stored]] = []
        made: dict[bytes, ModelTemplate] = {}
        for (d, typed), t in zip(found, got):
            obj: object = None
            if t is not None:
                try:
                    obj = t.build()
                except Exception:
                    t, obj = None, None
            if t is None:
                obj = load_item(loads, typed)
                if is_model(obj):
                    try:
                        t = ModelTemplate(obj, typed)
                    except Exception:
                        t = None
            if t is not None:
                made[d] = t
                entries.append((_Entry(obj, t.snapshot, d, t.typed), d, t.typed))
            out.append(obj)
        self._remember(thread_id, entries if remember else [], fresh and remember, made)
        return out

    def cached(self, thread_id: str) -> dict[bytes, Typed]:
        """The stored items (digest -> typed value) of ``thread_id`` that ``decode`` can
        rebuild without their bytes being read again: a read need not fetch them."""
        with self._lock:
            held = self._templates.get(thread_id)
            return {d: t.typed for d, t in held.items()} if held else {}

    # ------------------------------------------------------------------ known in Redis

    def unknown(self, thread_id: str, parts: Mapping[bytes, Stored],
                pack: Callable[[Typed], bytes]) -> dict[bytes, bytes]:
        """The parts this process does not know Redis holds for ``thread_id``, packed."""
        with self._lock:
            known = self._known.get(thread_id)
            if known is not None:
                parts = {d: v for d, v in parts.items() if d not in known}
        return packed(parts, pack)

    def learn(self, thread_id: str, digests: Iterable[bytes]) -> None:
        """Record that Redis holds ``digests`` for ``thread_id`` (written or read)."""
        with self._lock:
            known = self._known.get(thread_id)
            if known is None:
                known = self._known[thread_id] = set()
                while len(self._known) > self._max_threads:
                    self._known.popitem(last=False)
            else:
                self._known.move_to_end(thread_id)
            known.update(digests)

    def forget(self, thread_id: str) -> None:
        """Drop what this process knew Redis holds for ``thread_id`` (after a delete,
        or when Redis refused a put for missing items)."""
        with self._lock:
            self._known.pop(thread_id, None)


def _cipher_of(serde: SerializerProtocol) -> CipherProtocol | Literal[False] | None:
    """The cipher of an encrypting serializer (``EncryptedSerializer``, or an
    ``ExternalRefSerializer`` around one), ``None`` for a plain one; ``False`` when the
    serializer says it encrypts but shows no cipher."""
    from langgraph.checkpoint.serde.encrypted import EncryptedSerializer

    if isinstance(serde, EncryptedSerializer):
        return serde.cipher
    if getattr(serde, "encrypted", False):
        return getattr(serde, "_cipher", None) or False
    return None


def _cipher_secret(cipher: CipherProtocol) -> bytes | None:
    """The AES key of LangGraph's ``EncryptedSerializer.from_pycryptodome_aes`` cipher
    (held by its methods), else ``LANGGRAPH_AES_KEY``; ``None`` when neither is there."""
    import os

    fn = getattr(type(cipher), "encrypt", None)
    code, cells = getattr(fn, "__code__", None), getattr(fn, "__closure__", None)
    if code is not None and cells and "key" in code.co_freevars:
        found = cells[code.co_freevars.index("key")].cell_contents
        if isinstance(found, (bytes, bytearray)) and len(found) >= 16:
            return bytes(found)
    env = os.environ.get("LANGGRAPH_AES_KEY")
    return env.encode() if env else None


def items_for(serde: SerializerProtocol, *, enabled: bool = True,
              cache_bytes: int = 64 * 1024 * 1024, digest_key: str | None = None) -> Items:
    """The ``Items`` of a saver using ``serde``: unkeyed digests for a plain serializer;
    for an encrypting one, digests keyed with a key derived (BLAKE2b) from ``digest_key``,
    else from the cipher's key (see ``_cipher_secret``), and taken over the decrypted
    plaintext. An encrypting serializer with no key found stores lists whole (logged)."""
    cipher = _cipher_of(serde)
    if cipher is None or not enabled:
        return Items(enabled=enabled, cache_bytes=cache_bytes)
    secret = digest_key.encode() if digest_key else (
        _cipher_secret(cipher) if cipher is not False else None)
    if secret is None:
        import logging

        logging.getLogger(__name__).warning(
            "the serializer encrypts and no item digest key was found (set "
            "item_digest_key or LANGGRAPH_AES_KEY): list values are stored whole")
        return Items(enabled=False)
    key = hashlib.blake2b(secret, digest_size=32, person=b"lgd-item-key").digest()

    def decrypt(typed: Typed) -> Typed:
        if cipher is False:
            raise ConfigurationError("the serializer says it encrypts and shows no cipher: "
                                     "its list items cannot be decrypted")
        base, name = typed[0].split("+", 1)
        return base, cipher.decrypt(name, typed[1])

    return Items(key=key, decrypt=decrypt, enabled=True, cache_bytes=cache_bytes)
