"""A LangGraph serializer that moves large values into a content-addressed blob store.

Stored form
-----------
A value with nothing to move out is stored exactly as the inner serializer writes it, so
existing checkpoints stay readable and small values cost nothing extra. Otherwise the stored
value is ``("extref", msgpack(envelope))`` with::

    envelope = {"v": 1, "body": [type, bytes] | None, "parts": [ref, ...]}
    ref = {"store": "s3://bucket/p/", "key": "<sha256>.parquet", "sha256": "<hex>",
           "format": "pandas.DataFrame/parquet", "size": <payload bytes>,
           "enc": <cipher name> | None, "path": [<dict key or list index>, ...],
           "inner": <inner type, only for format "raw">}

``body`` is the inner serializer's output for the value *with every moved-out part replaced by
None*; each part's ``path`` says where its value goes back (``[]``: the value itself). When
that body is larger than ``threshold_bytes`` it becomes a ``"raw"`` part as well.

Nested values
-------------
Codec values (DataFrame, Series, ndarray, polars DataFrame) are found at the top level and
inside plain ``dict`` / ``list`` / ``tuple`` containers down to ``max_depth`` levels (dict keys
must be ``str`` or ``int``). Containers are copied along the paths that change, never mutated.
Values inside other objects (dataclasses, pydantic models, LangGraph ``Send``) are left to the
inner serializer, which cannot store a DataFrame (``TypeError``).

Encryption
----------
If ``inner`` is an :class:`~langgraph.checkpoint.serde.encrypted.EncryptedSerializer`, blob
payloads are encrypted with its cipher before upload and the body is encrypted exactly as the
inner would. Hashes and keys are computed on the plaintext (so dedup still works) and are
visible in the bucket; use one store (or prefix) per encryption key.
"""

from __future__ import annotations

import asyncio
import copy
import hashlib
import logging
import re
from collections.abc import Iterable, Sequence
from typing import Any

import ormsgpack
from langgraph.checkpoint.serde.base import CipherProtocol, SerializerProtocol
from langgraph.checkpoint.serde.encrypted import EncryptedSerializer
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

from langgraph_durable.serde.codecs import Codec, codecs_by_format, default_codecs
from langgraph_durable.serde.extref_errors import BlobIntegrityError, ExternalRefError
from langgraph_durable.serde.stores import BlobStore, _ensure_store, default_local_store

__all__ = ["EXTREF_TYPE", "ExternalRefSerializer", "collect_refs", "parse_refs", "refs_in"]

EXTREF_TYPE = "extref"
"""The ``type`` under which :class:`ExternalRefSerializer` stores an envelope."""
RAW_FORMAT = "raw"
_RAW_EXT = ".bin"
_SAFE = re.compile(r"[^A-Za-z0-9_-]")
logger = logging.getLogger(__name__)
_Path = list[str | int]


def _unpack_envelope(data: bytes) -> dict[str, Any]:
    try:
        envelope = ormsgpack.unpackb(data)
    except ormsgpack.MsgpackDecodeError as exc:
        raise ExternalRefError(f"corrupt {EXTREF_TYPE} envelope: {exc}") from exc
    if not isinstance(envelope, dict) or envelope.get("v") != 1:
        raise ExternalRefError(f"unsupported {EXTREF_TYPE} envelope: {envelope!r:.200}")
    return envelope


def parse_refs(type_: str, data: bytes) -> list[dict[str, Any]]:
    """The blob references of one stored typed value, without touching any blob.

    Returns ``[]`` for values not written as ``"extref"``. Raises :class:`ExternalRefError` for
    a corrupt envelope (so garbage collection stops rather than deleting referenced blobs).
    """
    if type_ != EXTREF_TYPE:
        return []
    return list(_unpack_envelope(data)["parts"])


def refs_in(type_: str, data: bytes) -> set[str]:
    """The blob keys referenced by one stored ``(type, bytes)`` value (see :func:`parse_refs`)."""
    return {str(ref["key"]) for ref in parse_refs(type_, data)}


def collect_refs(values: Iterable[tuple[str, bytes]]) -> set[str]:
    """The union of :func:`refs_in` over stored ``(type, bytes)`` values (e.g. a saver scan)."""
    keys: set[str] = set()
    for type_, data in values:
        keys |= refs_in(type_, data)
    return keys


def _set_path(container: Any, path: Sequence[str | int], value: Any) -> Any:
    """``container`` with ``value`` placed at ``path`` (tuples are rebuilt)."""
    if not path:
        return value
    head, rest = path[0], path[1:]
    if isinstance(container, tuple):
        items = list(container)
        items[int(head)] = _set_path(items[int(head)], rest, value)
        return tuple(items)
    container[head] = _set_path(container[head], rest, value)
    return container


class ExternalRefSerializer(JsonPlusSerializer):
    """``SerializerProtocol`` that stores DataFrames, Series, arrays and large values as blobs.

    Subclasses :class:`JsonPlusSerializer` only so that ``BaseCheckpointSaver.with_allowlist``
    (which dispatches on that type) reaches :meth:`with_msgpack_allowlist`; every
    serialization is delegated to ``inner``.

    Args:
        inner: serializer for everything that is not moved out (default: a new
            ``JsonPlusSerializer()``); an ``EncryptedSerializer`` also encrypts the blobs.
        store: where blobs go (default: :class:`LocalBlobStore` at ``$LANGGRAPH_BLOB_DIR`` or
            ``./.langgraph_blobs``, created on first write).
        threshold_bytes: inner-serialized values larger than this many bytes are moved out as
            raw blobs; ``None`` never moves them.
        codecs: codecs tried in order (default :func:`default_codecs`).
        max_depth: how many container levels to search for codec values (0: top level only).

    Raises (from ``dumps_typed``): :class:`UnsupportedValueError` for a value a codec cannot
    store exactly; the store's I/O errors. (from ``loads_typed``): :class:`BlobNotFoundError`,
    :class:`BlobIntegrityError`, :class:`ExternalRefError` (unknown format, no cipher).
    """

    def __init__(
        self,
        inner: SerializerProtocol | None = None,
        store: BlobStore | None = None,
        threshold_bytes: int | None = 256_000,
        *,
        codecs: Sequence[Codec] | None = None,
        max_depth: int = 8,
    ) -> None:
        super().__init__()
        if threshold_bytes is not None and threshold_bytes < 0:
            raise ValueError(f"threshold_bytes must be >= 0 or None, got {threshold_bytes}")
        self.inner: SerializerProtocol = inner if inner is not None else JsonPlusSerializer()
        self.store: BlobStore = _ensure_store(store if store is not None else default_local_store())
        self.threshold_bytes = threshold_bytes
        self.codecs: list[Codec] = list(codecs) if codecs is not None else default_codecs()
        self._by_format = codecs_by_format(self.codecs)
        self.max_depth = max_depth

    def __repr__(self) -> str:
        return (
            f"ExternalRefSerializer(inner={type(self.inner).__name__}, store={self.store!r}, "
            f"threshold_bytes={self.threshold_bytes})"
        )

    # -- inner plumbing ---------------------------------------------------------------------

    @property
    def _plain(self) -> SerializerProtocol:
        return self.inner.serde if isinstance(self.inner, EncryptedSerializer) else self.inner

    @property
    def _cipher(self) -> CipherProtocol | None:
        return self.inner.cipher if isinstance(self.inner, EncryptedSerializer) else None

    @property
    def encrypted(self) -> bool:
        """Whether values and blobs are encrypted (``inner`` is an ``EncryptedSerializer``);
        savers should treat this serializer like an ``EncryptedSerializer`` (e.g. not store
        queryable plaintext metadata)."""
        return self._cipher is not None

    def _seal(self, type_: str, payload: bytes) -> tuple[str, bytes]:
        """What ``inner.dumps_typed`` returns for a value ``plain`` serialized to ``payload``."""
        cipher = self._cipher
        if cipher is None:
            return type_, payload
        name, ciphertext = cipher.encrypt(payload)
        return f"{type_}+{name}", ciphertext

    def with_msgpack_allowlist(
        self, extra_allowlist: Iterable[tuple[str, ...] | type]
    ) -> ExternalRefSerializer:
        """A copy whose inner serializer also allows ``extra_allowlist`` (``self`` if unchanged).

        Mirrors LangGraph: a ``JsonPlusSerializer`` inner (or one wrapped by an
        ``EncryptedSerializer``) gets the merged allowlist; other inners are kept with a warning.
        """
        extra = tuple(extra_allowlist)
        inner = self.inner
        updated: SerializerProtocol = inner
        if hasattr(inner, "with_msgpack_allowlist"):
            updated = inner.with_msgpack_allowlist(extra)
        elif isinstance(inner, EncryptedSerializer) and hasattr(
            inner.serde, "with_msgpack_allowlist"
        ):
            new_plain = inner.serde.with_msgpack_allowlist(extra)
            if new_plain is not inner.serde:
                updated = EncryptedSerializer(inner.cipher, new_plain)
        else:
            logger.warning(
                "Inner serializer %s does not support msgpack allowlist; strict msgpack "
                "deserialization will not be enforced.",
                type(inner).__name__,
            )
        if updated is inner:
            return self
        clone = copy.copy(self)
        clone.inner = updated
        return clone

    # -- dumps ------------------------------------------------------------------------------

    def _codec_for(self, obj: Any) -> Codec | None:
        for codec in self.codecs:
            if codec.matches(obj):
                return codec
        return None

    def _extract(self, obj: Any, path: _Path, found: list[tuple[_Path, Codec, Any]]) -> Any:
        """``obj`` with codec values replaced by None (recorded in ``found``)."""
        kind = type(obj)
        if len(path) >= self.max_depth or kind not in (dict, list, tuple):
            return obj
        items = obj.items() if kind is dict else enumerate(obj)
        replaced: dict[Any, Any] = {}
        for key, value in items:
            if kind is dict and type(key) not in (str, int):
                continue
            codec = self._codec_for(value)
            if codec is not None:
                found.append(([*path, key], codec, value))
                replaced[key] = None
            elif type(value) in (dict, list, tuple):
                new = self._extract(value, [*path, key], found)
                if new is not value:
                    replaced[key] = new
        if not replaced:
            return obj
        if kind is dict:
            return {k: replaced[k] if k in replaced else v for k, v in obj.items()}
        out = [replaced[i] if i in replaced else v for i, v in enumerate(obj)]
        return out if kind is list else tuple(out)

    def _put(
        self, payload: bytes, fmt: str, ext: str, path: _Path, inner_type: str | None = None
    ) -> dict[str, Any]:
        digest = hashlib.sha256(payload).hexdigest()
        enc: str | None = None
        stored = payload
        cipher = self._cipher
        if cipher is not None:
            enc, stored = cipher.encrypt(payload)
        key = f"{digest}{ext}" + (f".{_SAFE.sub('-', enc)}" if enc else "")
        self.store.put_if_absent(key, stored)
        ref: dict[str, Any] = {
            "store": self.store.name,
            "key": key,
            "sha256": digest,
            "format": fmt,
            "size": len(payload),
            "enc": enc,
            "path": path,
        }
        if inner_type is not None:
            ref["inner"] = inner_type
        return ref

    def dumps_typed(self, obj: Any) -> tuple[str, bytes]:
        """Serialize ``obj``; codec values and large values are uploaded (see module docs)."""
        codec = self._codec_for(obj)
        if codec is not None:
            part = self._put(codec.encode(obj), codec.format, codec.extension, [])
            return EXTREF_TYPE, ormsgpack.packb({"v": 1, "body": None, "parts": [part]})
        found: list[tuple[_Path, Codec, Any]] = []
        skeleton = self._extract(obj, [], found)
        type_, payload = self._plain.dumps_typed(skeleton)
        parts = [self._put(c.encode(v), c.format, c.extension, p) for p, c, v in found]
        body: list[Any] | None = None
        if self.threshold_bytes is not None and len(payload) > self.threshold_bytes:
            parts.insert(0, self._put(payload, RAW_FORMAT, _RAW_EXT, [], inner_type=type_))
        elif not parts:
            return self._seal(type_, payload)
        else:
            body = list(self._seal(type_, payload))
        return EXTREF_TYPE, ormsgpack.packb({"v": 1, "body": body, "parts": parts})

    # -- loads ------------------------------------------------------------------------------

    def _fetch(self, ref: dict[str, Any]) -> bytes:
        """The verified plaintext payload of one reference."""
        key = str(ref["key"])
        stored = self.store.get(key)
        payload = stored
        if ref.get("enc"):
            cipher = self._cipher
            if cipher is None:
                raise ExternalRefError(
                    f"blob {key!r} is encrypted ({ref['enc']}) but the inner serializer of "
                    "this ExternalRefSerializer has no cipher",
                    key=key,
                    store=self.store.name,
                )
            try:
                payload = cipher.decrypt(str(ref["enc"]), stored)
            except Exception as exc:
                raise BlobIntegrityError(
                    f"blob {key!r} in {self.store.name} could not be decrypted: {exc!r}",
                    key=key,
                    store=self.store.name,
                    expected=str(ref["sha256"]),
                ) from exc
        actual = hashlib.sha256(payload).hexdigest()
        if actual != ref["sha256"]:
            raise BlobIntegrityError(
                f"blob {key!r} in {self.store.name} is corrupt: sha256 {actual} "
                f"({len(payload)} bytes) != {ref['sha256']} ({ref['size']} bytes) in the reference",
                key=key,
                store=self.store.name,
                expected=str(ref["sha256"]),
                actual=actual,
            )
        return payload

    def _decode_part(self, ref: dict[str, Any]) -> Any:
        fmt = str(ref["format"])
        codec = self._by_format.get(fmt)
        if codec is None:
            raise ExternalRefError(
                f"blob {ref['key']!r} has format {fmt!r}, which no configured codec reads "
                f"(known: {sorted(self._by_format)}; is its library installed?)",
                key=str(ref["key"]),
                store=self.store.name,
            )
        return codec.decode(self._fetch(ref))

    def loads_typed(self, data: tuple[str, bytes]) -> Any:
        """Deserialize; blobs are fetched and verified (raises :class:`BlobNotFoundError`,
        :class:`BlobIntegrityError` naming the key). Non-``extref`` values go to ``inner``."""
        type_, raw = data
        if type_ != EXTREF_TYPE:
            return self.inner.loads_typed(data)
        envelope = _unpack_envelope(raw)
        value: Any = None
        if envelope["body"] is not None:
            body_type, body = envelope["body"]
            value = self.inner.loads_typed((body_type, body))
        for ref in envelope["parts"]:
            if ref["format"] == RAW_FORMAT:
                value = self._plain.loads_typed((str(ref["inner"]), self._fetch(ref)))
            else:
                value = _set_path(value, ref["path"], self._decode_part(ref))
        return value

    async def adumps_typed(self, obj: Any) -> tuple[str, bytes]:
        """:meth:`dumps_typed` in a worker thread (encoding and uploads never block the loop)."""
        return await asyncio.to_thread(self.dumps_typed, obj)

    async def aloads_typed(self, data: tuple[str, bytes]) -> Any:
        """:meth:`loads_typed` in a worker thread."""
        return await asyncio.to_thread(self.loads_typed, data)
