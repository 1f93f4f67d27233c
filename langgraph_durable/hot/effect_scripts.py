"""Lua scripts of the effect journal (``langgraph_durable.effects``): one round trip each.

The journal of a thread is the hash ``ThreadKeys.fx`` (``<tag>:fx``, in the thread's slot):
field ``task_ns NUL task_id NUL name NUL n`` (``n`` = the call number of ``name`` within
the task's execution) -> *entry*: 8 decimal digits of version (1, 2, ... per write of the
field), one state letter, then a msgpack body (``plans/effect_journal.py``):

=====  ==============================================================================
state  meaning
=====  ==============================================================================
``s``  *started*: the effect's function was about to be called (no result yet)
``d``  *done*: the body holds the result (serialized by the saver's serializer)
``e``  *failed*, journaled (``journal_errors=True``): the body names the exception
``c``  *cleared*: the function raised and the error is not journaled; as if absent
=====  ==============================================================================

The hash's field ``!`` says Redis holds every entry of the thread (set when the journal
starts on a thread Redis holds all of: ``meta.complete``); the ``meta`` field ``fx`` says
the thread has had a journal in Redis. A miss in a journal without ``!`` is asked of
MongoDB (``<collection_prefix>effects``) before anything is called.

Each write adds an outbox entry ``[ "fx", "", [field], [], bytes ]`` and raises the
thread's unflushed count (``meta.dirty``) like a checkpoint's, so the flusher copies it
(``plans/effect_journal.copy_effects_plan``) and ACK_SETTLE lowers the count again. The journal
key never expires while it holds unflushed entries (PERSIST); the flusher gives it the
thread's ``hot_ttl_s`` once it copied them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ..core.ops import RedisReply, Refusal, Script
from . import lua

TRUST_FIELD = "!"
"""Journal field: Redis holds every journal entry of the thread."""

EFFECT_SCRIPTS = lua.sources(("effect_begin", "effect_end"))
"""Script name -> Lua source of the journal's scripts (``hot/lua/effect_*.lua``; part of
``hot.scripts.SCRIPTS``)."""


@dataclass(frozen=True, slots=True)
class BeginReply:
    """EFFECT_BEGIN's reply: ``status`` ``"found"`` (``entry``: the live entry stored),
    ``"new"`` (``entry``: the started entry this call stored) or ``"ask"`` (Redis cannot
    tell: ask MongoDB, then call again with ``checked``; ``entry`` is ``b""``)."""

    status: str
    entry: bytes = b""

    @classmethod
    def of(cls, raw: RedisReply) -> BeginReply:
        """From the raw reply ``[status]`` or ``[status, entry]``."""
        status = raw[0].decode() if isinstance(raw[0], bytes) else str(raw[0])
        return cls(status, bytes(raw[1]) if len(raw) > 1 else b"")


def begin_op(keys: Sequence[str], thread_id: str, field: str, body: bytes, payload: bytes,
             max_outbox: int, *, floor: int = 0, checked: bool = False,
             known: bytes = b"", hot_ttl_s: int = 0) -> Script[BeginReply]:
    """EFFECT_BEGIN on ``keys`` = (journal, meta, outbox stream, tombstones) of
    ``thread_id``; refused with ``OUTBOX_FULL`` (``errors.ScriptRefused``)."""
    return Script("effect_begin", list(keys), [
        field, body, payload, max_outbox, floor, thread_id, "1" if checked else "0", known,
        hot_ttl_s], decode=BeginReply.of, refusals=frozenset({Refusal.OUTBOX_FULL}))


def end_op(keys: Sequence[str], thread_id: str, field: str, body: bytes,
           payload: bytes) -> Script[bytes]:
    """EFFECT_END on ``keys`` = (journal, meta, outbox stream, tombstones) of
    ``thread_id``; replies the entry stored (version and body)."""
    return Script("effect_end", list(keys), [field, body, payload, 0, 0, thread_id],
                  decode=bytes)
