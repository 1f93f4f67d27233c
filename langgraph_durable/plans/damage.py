"""Plans naming damaged records (sans-I/O): which Redis key of a thread has the wrong
type (``damaged_keys_plan``, after a script's ``WRONGTYPE``), the facts a
``CorruptRecordError`` lacks (``about``), the ``MissingValueError`` of a channel value
neither tier holds (``missing_values``). Used by the reads (``read.py``, ``delta.py``)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TypeVar

from ..core.ops import Pipeline, Plan
from ..core.records import split_field
from ..durable import documents as D
from ..errors import CorruptRecordError, MissingValueError
from ..hot.keys import KEY_TYPES
from .context import Context

T = TypeVar("T")


def damaged_keys_plan(ctx: Context, thread_id: str) -> Plan[None]:
    """Ask Redis the ``TYPE`` of each key of ``thread_id`` (and its partition's thread
    registry): raise ``CorruptRecordError`` (tier ``"hot"``) naming the thread, the first
    key whose type is not the one stored there (``hot.keys.KEY_TYPES``), its type and the
    one expected; return when every key has its type (or does not exist). One pipeline,
    run only after a read failed."""
    keys = ctx.keys(thread_id)
    names = [*keys.all, keys.gone, keys.fx, ctx.registry_of(thread_id)]
    kinds = [*(keys.suffix_of(k) for k in names[:-1]), "registry"]
    types = yield Pipeline([["TYPE", k] for k in names])
    for key, kind, t in zip(names, kinds, types):
        got = t.decode() if isinstance(t, bytes) else str(t)
        want = KEY_TYPES.get(kind or "", "hash")
        if got not in ("none", want):
            what = ("the thread registry of its partition" if kind == "registry"
                    else f"its {kind!r} key")
            raise CorruptRecordError(
                f"Redis key {key!r} ({what}) of thread {thread_id!r} holds a {got}, not a "
                f"{want}: the key is damaged (set by hand or by another program?); "
                "repair or delete it", tier="hot", thread_id=thread_id, key=key)
    return None


def hot_checked(ctx: Context, thread_id: str, plan: Plan[T]) -> Plan[T]:
    """Run ``plan`` (reading ``thread_id``); when a script of it fails with ``WRONGTYPE``
    (the drivers' ``CorruptRecordError`` naming no thread), find the damaged key
    (``damaged_keys_plan``) and raise the error naming it and the thread."""
    try:
        return (yield from plan)
    except CorruptRecordError as exc:
        if exc.tier != "hot" or exc.thread_id is not None:
            raise
        yield from damaged_keys_plan(ctx, thread_id)
        exc.thread_id = thread_id
        raise


def about(exc: CorruptRecordError, **facts: str | None) -> CorruptRecordError:
    """``exc`` with those of the attributes ``facts`` names (``tier``, ``thread_id``,
    ``checkpoint_ns``, ``checkpoint_id``...) that it did not know yet set."""
    for name, value in facts.items():
        if getattr(exc, name, None) is None:
            setattr(exc, name, value)
    return exc


def missing_values(thread_id: str, lost: Sequence[tuple[str, str]]) -> MissingValueError:
    """``MissingValueError`` naming the first ``(checkpoint_id, blob field)`` of ``lost``
    (a channel version neither tier holds) and how many more there are."""
    cid, f = lost[0]
    ns, channel, version = split_field(f)
    key = D.blob_ids(thread_id, [f])[0]
    more = f" (and {len(lost) - 1} more)" if len(lost) > 1 else ""
    return MissingValueError(
        f"checkpoint {cid!r} (thread {thread_id!r}, ns {ns!r}) names version "
        f"{version!r} of channel {channel!r}, whose value neither Redis nor MongoDB holds "
        f"(blobs document {key!r}, nor an entry of a checkpoint document's 'vals'){more}: "
        "the record was lost or deleted by hand",
        tier="durable", thread_id=thread_id, checkpoint_ns=ns,
        checkpoint_id=cid, key=key, channel=channel, version=version)
