"""Checks of an export file's records before ``import`` deletes or writes anything.

Every identifier of an imported record goes through the saver's own checks
(``core/records.check_id``, ``plans/write.check_version``): what ``put``/``put_writes``
would refuse is refused here. An export writes every identifier as text, so another JSON
type (an integer checkpoint_ns) is refused rather than converted: MongoDB would store it
as a number that no read ever matches. Every carried blob-store object is checked against
its content hash (``verify_blobs``), so an export cannot plant other bytes under the key
of a value.
"""

from __future__ import annotations

import base64
import hashlib
from collections.abc import Iterator
from typing import Any

from ..core.items import DIGEST_BYTES, NODE_TYPE
from ..core.records import check_id
from ..core.schema import fits_int64
from ..errors import InvalidIdentifierError
from ..plans.effect_journal import Entry
from ..plans.write import check_version
from ..serde.external import parse_refs
from ..serde.extref_errors import ExternalRefError
from ..serde.gc import DEFAULT_KEY_PATTERN
from .session import CliError

__all__ = ["CHECKS", "check_thread_id", "naming", "verify_blobs"]


def _untyped(v: list[str] | None) -> tuple[str, bytes] | None:
    return None if v is None else (v[0], base64.b64decode(v[1], validate=True))


def check_thread_id(value: object) -> str:
    """The header's ``thread_id``: a ``str`` ``check_id`` accepts; raises
    ``InvalidIdentifierError``."""
    return _text("thread_id", value, None)


def _text(kind: str, value: object, thread_id: str | None) -> str:
    """``value`` as a stored identifier: a ``str`` that ``check_id`` accepts."""
    if not isinstance(value, str):
        raise InvalidIdentifierError(f"{kind} must be a str, got {type(value).__name__} "
                                     f"{value!r:.80}")
    return check_id(kind, value, thread_id=thread_id)


def _optional_text(kind: str, value: object, thread_id: str) -> None:
    if value is not None:
        _text(kind, value, thread_id)


def _version(channel: str, value: object, thread_id: str) -> None:
    if not isinstance(value, str):  # the export writes versions as their stored text
        raise InvalidIdentifierError(f"the version of channel {channel!r} must be a str, "
                                     f"got {type(value).__name__} {value!r:.80}")
    check_version(value, thread_id=thread_id, channel=channel)


def _integer(kind: str, value: object) -> int:
    """``value`` when it is an ``int`` MongoDB can hold (64-bit signed)."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"{kind} must be an integer, got {type(value).__name__} {value!r:.80}")
    if not fits_int64(value):
        raise ValueError(f"{kind} {value} does not fit in 64 bits (MongoDB cannot store it)")
    return value


def _md_pair(kv: object) -> None:
    """A checkpoint's queryable metadata pair as ``schema.md_query_of`` makes it: a
    ``[str key, value]`` whose value is None, a bool, a 64-bit int, a float or a str."""
    if not (isinstance(kv, list) and len(kv) == 2 and isinstance(kv[0], str)):
        raise ValueError(f"md must be a list of [key, value] pairs, got {kv!r:.80}")
    v = kv[1]
    if not (v is None or type(v) in (str, bool, float) or (type(v) is int and fits_int64(v))):
        raise ValueError(f"md value of {kv[0]!r} must be None, a bool, a 64-bit int, a float "
                         f"or a str, got {type(v).__name__} {v!r:.80}")


def _typed_value(kind: str, value: object, *, optional: bool = False) -> None:
    """A serialized value as the export writes it: ``[type, base64 bytes]``."""
    if value is None and optional:
        return
    if not (isinstance(value, list) and len(value) == 2 and isinstance(value[0], str)
            and isinstance(value[1], str)):
        raise ValueError(f"{kind} must be [type, base64 bytes], got {value!r:.80}")
    base64.b64decode(value[1], validate=True)


def _check_checkpoint(r: dict, tid: str) -> None:
    _text("checkpoint_ns", r["ns"], tid)
    _text("checkpoint_id", r["checkpoint_id"], tid)
    _optional_text("parent checkpoint_id", r["parent_id"], tid)
    _optional_text("run_id", r["run_id"], tid)
    _typed_value("checkpoint", r["checkpoint"])
    _typed_value("metadata", r["metadata"])
    if not isinstance(r["md"], list):
        raise ValueError(f"md must be a list of [key, value] pairs, got {r['md']!r:.80}")
    for kv in r["md"]:
        _md_pair(kv)
    for pair in r["blob_fields"]:
        if not (isinstance(pair, list) and len(pair) == 2):
            raise ValueError(f"blob_fields must be [channel, version] pairs, got {pair!r:.80}")
        _version(_text("channel", pair[0], tid), pair[1], tid)


def _check_blob(r: dict, tid: str) -> None:
    _text("checkpoint_ns", r["ns"], tid)
    _version(_text("channel", r["channel"], tid), r["version"], tid)
    _typed_value("value", r["value"], optional=True)


def _check_write(r: dict, tid: str) -> None:
    _text("checkpoint_ns", r["ns"], tid)
    _text("checkpoint_id", r["checkpoint_id"], tid)
    _text("task_id", r["task_id"], tid)
    if not isinstance(r["channel"], str):  # a write's channel is data: any text
        raise InvalidIdentifierError(f"channel must be a str, got "
                                     f"{type(r['channel']).__name__} {r['channel']!r:.80}")
    _text("task_path", r["task_path"], tid)
    _integer("idx", r["idx"])
    _integer("seq", r["seq"])
    _typed_value("value", r["value"])


def _check_item(r: dict, _tid: str) -> None:
    d = r["d"]
    if not (isinstance(d, str) and len(d) == 2 * DIGEST_BYTES):
        raise ValueError(f"d must be {2 * DIGEST_BYTES} hex digits, got {d!r:.80}")
    bytes.fromhex(d)
    _typed_value("value", r["value"])


def _check_effect(r: dict, tid: str) -> None:
    _text("checkpoint_ns (task_ns)", r["task_ns"], tid)
    _text("task_id", r["task_id"], tid)
    name = _text("an effect's name", r["name"], tid)
    if not name:
        raise InvalidIdentifierError("an effect's name must be non-empty")
    if _integer("n", r["n"]) < 0:
        raise ValueError(f"n must be >= 0, got {r['n']}")
    if not isinstance(r["entry"], str):
        raise ValueError("entry must be base64 text")
    entry = Entry.unpack(base64.b64decode(r["entry"], validate=True), "of the export")
    _text("checkpoint_ns of the entry", entry.checkpoint_ns, tid)
    _text("checkpoint_id of the entry", entry.checkpoint_id, tid)


def _check_extblob(r: dict, _tid: str) -> None:
    key = r["key"]
    if not isinstance(key, str) or not DEFAULT_KEY_PATTERN.fullmatch(key):
        raise ValueError(f"key {key!r:.80} is not a key the ExternalRefSerializer writes "
                         "(<sha256 hex>.<extension>)")
    if not isinstance(r["data"], str):
        raise ValueError("data must be base64 text")
    base64.b64decode(r["data"], validate=True)


CHECKS = {"checkpoint": _check_checkpoint, "blob": _check_blob, "write": _check_write,
           "item": _check_item, "effect": _check_effect, "extblob": _check_extblob}
"""Record type -> its check (raises before anything is written)."""


def naming(kind: str, r: dict) -> str:
    """`` (checkpoint_ns '', checkpoint_id '...')``: what names the record, as far as the
    file says it."""
    names = {"checkpoint": ("ns", "checkpoint_id"), "blob": ("ns", "channel", "version"),
             "write": ("ns", "checkpoint_id", "task_id", "idx"), "item": ("d",),
             "effect": ("task_ns", "task_id", "name", "n"), "extblob": ("key",)}[kind]
    shown = [f"{'checkpoint_ns' if f == 'ns' else f} {r[f]!r:.80}" for f in names if f in r]
    return f" ({', '.join(shown)})" if shown else ""


def verify_blobs(records: dict[str, list[dict]], cipher: Any = None) -> None:
    """Check every carried blob-store object (``extblob``) against the references the
    export's values hold (``ExternalRefSerializer`` envelopes): its key must be named by
    one, and its bytes must hash (sha256) to the digest the reference and the key hold,
    with the size it states. An encrypted object (the reference's ``enc``) is decrypted
    with ``cipher`` first (an ``EncryptedSerializer``'s cipher); without one it cannot be
    verified and is refused. Raises ``CliError`` naming the key (nothing written)."""
    named: dict[str, list[dict[str, Any]]] = {}
    try:
        for value in _values_of(records):
            for ref in parse_refs(*value):
                named.setdefault(str(ref["key"]), []).append(ref)
    except ExternalRefError as exc:
        raise CliError(f"a value of the export holds a corrupt reference: {exc} "
                       "(nothing written)") from exc
    for rec in records["extblob"]:
        key, data = rec["key"], base64.b64decode(rec["data"], validate=True)
        refs = named.get(key)
        if not refs:
            raise CliError(f"blob-store object {key!r} of the export is named by none of its "
                           "records (nothing written)")
        for ref in refs:
            payload = data
            if ref.get("enc"):
                if cipher is None:
                    raise CliError(
                        f"blob-store object {key!r} is encrypted ({ref['enc']}): pass the "
                        "serializer with its cipher (--serde) to verify it, or "
                        "--without-blobs (nothing written)")
                try:
                    payload = cipher.decrypt(str(ref["enc"]), data)
                except Exception as exc:
                    raise CliError(f"blob-store object {key!r} cannot be decrypted with the "
                                   f"serializer's cipher: {exc!r} (nothing written)") from exc
            actual = hashlib.sha256(payload).hexdigest()
            if actual != ref.get("sha256") or not key.startswith(actual) or \
                    len(payload) != ref.get("size"):
                raise CliError(
                    f"blob-store object {key!r} of the export is corrupt or forged: sha256 "
                    f"{actual} ({len(payload)} bytes), its reference says "
                    f"{ref.get('sha256')} ({ref.get('size')} bytes) (nothing written)")


def _values_of(records: dict[str, list[dict]]) -> Iterator[tuple[str, bytes]]:
    """Every serialized value the (checked) records hold, decoded from base64."""
    for r in records["checkpoint"]:
        yield from (_untyped(r["checkpoint"]), _untyped(r["metadata"]))  # type: ignore[misc]
    for kind in ("blob", "write", "item"):
        for r in records[kind]:
            value = _untyped(r["value"])
            if value is not None and value[0] != NODE_TYPE:
                yield value
    for r in records["effect"]:
        entry = Entry.unpack(base64.b64decode(r["entry"], validate=True), "of the export")
        if entry.value is not None:
            yield entry.value
