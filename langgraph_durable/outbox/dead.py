"""Dead letters: the outbox entries a flush round set aside (sans-I/O plans).

An entry whose own data is bad (a damaged key of its thread, an undecodable or malformed
entry, an entry kind this release does not know, a document MongoDB refuses) is moved to
the dead-letter stream (``hot.keys.dead_letter_key``) with its original fields (thread
and payload), its stream and id, the step that failed and the error
(``core.outbox_entry.DeadLetter``), so it never blocks the other entries. Operators list,
replay (after a fix: the entry goes back to its thread's outbox partition) and drop them
(``langgraph-durable dead-letters``); ``flush()`` raises ``DeadLetteredError`` for those
it waited for (``plans.history_edits.flush_plan``).
"""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, NamedTuple

from ..core.ops import Op, Parallel, Pipeline, Plan
from ..core.outbox_entry import COUNTED_FIELD, THREAD_FIELD, DeadLetter
from ..hot.keys import CONSUMER_GROUP
from ..hot.scripts import DeadReplayArgs, DeadReplayReply
from ..plans.context import Context
from .group import dead_letter_key

log = logging.getLogger("langgraph_durable.flusher")

ERROR_CHARS = 2000
"""Most characters of an error's text kept in a dead letter."""


class Aside(NamedTuple):
    """An entry a round sets aside: its ``stream``, entry id ``eid``, original ``fields``,
    the ``step`` that failed (``parse``, ``copy``, ``write``, ``fence``, ``settle``) and
    the ``error``."""

    stream: str
    eid: bytes
    fields: Mapping[bytes, bytes]
    step: str
    error: Exception | str


def _thread(fields: Mapping[bytes, bytes]) -> str:
    return bytes(fields.get(THREAD_FIELD, b"")).decode(errors="replace")


def _text(error: Exception | str) -> str:
    text = error if isinstance(error, str) else f"{type(error).__name__}: {error}"
    return text[:ERROR_CHARS]


def dead_letter_plan(ctx: Context, aside: Sequence[Aside]) -> Plan[list[DeadLetter]]:
    """Add ``aside`` to the dead-letter stream (one pipeline), then acknowledge and
    delete them from their outbox streams (a second one: whoever sees an entry gone from
    the outbox finds its dead letter). Returns the dead letters written. When the
    dead-letter stream itself holds another type (``WRONGTYPE``: a hand edit, a foreign
    tool), the entries stay pending in the outbox (claimed again after ``claim_idle_s``)
    and an ERROR names the key to repair: the round still ends, so the entries behind
    them are flushed. Any other error of the pipeline (a tier's) is raised."""
    if not aside:
        return []
    now_ms = ctx.clock.time_ns() // 1_000_000
    letters = [DeadLetter(a.eid.decode(), a.stream, _thread(a.fields), a.step, _text(a.error),
                          now_ms, dict(a.fields)) for a in aside]
    key = dead_letter_key(ctx)
    replies = yield Pipeline([["XADD", key, "*", *_flat(d.to_fields())] for d in letters],
                             raise_on_error=False)
    failed = [r for r in replies if isinstance(r, Exception)]
    if failed:
        if not all(str(r).startswith("WRONGTYPE") for r in failed):
            raise next(r for r in failed if not str(r).startswith("WRONGTYPE"))
        log.error("the dead-letter stream %s holds another type (%s): %d outbox entries to "
                  "set aside stay pending until it is repaired (rename or delete it)", key,
                  failed[0], len(failed))
        kept = [(a, d) for a, d, r in zip(aside, letters, replies)
                if not isinstance(r, Exception)]
        aside, letters = [a for a, _ in kept], [d for _, d in kept]
        if not aside:
            return []
    by_stream: dict[str, list[bytes]] = defaultdict(list)
    for a in aside:
        by_stream[a.stream].append(a.eid)
    cmds: list[list[Any]] = []
    for stream, ids in by_stream.items():
        cmds += [["XACK", stream, CONSUMER_GROUP, *ids], ["XDEL", stream, *ids]]
    yield Pipeline(cmds)
    return letters


def _flat(fields: Mapping[bytes, bytes]) -> list[bytes]:
    return [x for kv in fields.items() for x in kv]


def list_plan(ctx: Context, *, start: str = "-", count: int | None = None
              ) -> Plan[list[DeadLetter]]:
    """The dead letters from dead-letter id ``start`` on (``"-"``: the oldest; a time in ms
    reads those set aside since then), oldest first, at most ``count`` (None: all)."""
    cmd: list[Any] = ["XRANGE", dead_letter_key(ctx), start, "+"]
    if count is not None:
        cmd += ["COUNT", count]
    (entries,) = yield Pipeline([cmd])
    return [DeadLetter.of(i, f) for i, f in entries]


def select(letters: Iterable[DeadLetter], *, ids: Sequence[str] = (),
           thread_id: str | None = None, every: bool = False) -> list[DeadLetter]:
    """The dead letters named: by id (a dead letter's own id or its original entry's id)
    in ``ids``, of ``thread_id``, or ``every`` one."""
    wanted = set(ids)
    return [d for d in letters
            if every or (d.id in wanted or d.entry_id in wanted)
            or (thread_id is not None and d.thread_id == thread_id)]


class Replayed(NamedTuple):
    """What ``replay_plan`` did: ``replayed`` (dead letter, new entry id) pairs;
    ``skipped`` (dead letter, reason) pairs, left in the dead-letter stream unless the
    reason is a duplicate (dropped)."""

    replayed: list[tuple[DeadLetter, str]]
    skipped: list[tuple[DeadLetter, str]]


def replay_plan(ctx: Context, letters: Sequence[DeadLetter]) -> Plan[Replayed]:
    """Put ``letters`` back in their thread's outbox partition stream (their original
    fields; a flusher takes them as any entry) and delete them from the dead-letter
    stream. Each goes back once, however many replays of it run (two operators, a retried
    command): the ``DEAD_REPLAY`` script adds it only with a claim in its thread's
    ``meta``, in the same step (a process dying before the delete leaves the dead letter,
    whose next replay finds the claim, adds nothing and deletes it). A ``settle`` dead
    letter goes back flagged (``COUNTED_FIELD``) whether its thread's counts were lowered
    before the settle failed: its settle then lowers nothing again.

    Not replayed (reason given): a dead letter without the original fields (written by
    an earlier release); a ``settle`` dead letter without the flag (an earlier release's:
    its records are in MongoDB, drop it); one whose thread Redis no longer holds, or holds
    in a newer generation (``meta`` ``born`` after the original entry: a
    ``delete_thread`` since; replaying would settle the new generation's count) - drop
    those; one a replay added before (dropped); a second dead letter of the same original
    entry (dropped: the first is replayed). An entry without a readable thread goes back
    to its original stream. Raises the client's error when a thread's ``meta`` turned to
    another type between the check and the replay."""
    out = Replayed([], [])
    todo: list[DeadLetter] = []
    seen: set[tuple[str, str]] = set()
    dupes: list[DeadLetter] = []
    for d in letters:
        if not d.fields or not d.stream:
            out.skipped.append((d, "no original fields (an earlier release's dead letter)"))
        elif d.step == "settle" and COUNTED_FIELD not in d.fields:
            out.skipped.append((d, "a settle dead letter of an earlier release (whether its "
                                   "thread's count was lowered is unknown; its records are "
                                   "in MongoDB): drop it"))
        elif (d.stream, d.entry_id) in seen:
            dupes.append(d)
            out.skipped.append((d, "a second dead letter of the same entry: dropped"))
        else:
            seen.add((d.stream, d.entry_id))
            todo.append(d)
    threads = [d for d in todo if _of_thread(d)]
    born = (yield Pipeline([["HGET", ctx.keys(d.thread_id).meta, "born"] for d in threads],
                           raise_on_error=False)) if threads else []
    verdict: dict[str, str] = {}
    for d, b in zip(threads, born):
        if isinstance(b, Exception):
            verdict[d.id] = f"its thread's meta key cannot be read ({b}): repair it first"
    now_ms = ctx.clock.time_ns() // 1_000_000
    ops: list[Op[Any]] = []
    going: list[DeadLetter] = []
    for d in todo:
        if d.id in verdict:
            out.skipped.append((d, verdict[d.id]))
        elif _of_thread(d):
            ops.append(DeadReplayArgs(ctx.outbox_of(d.thread_id), ctx.keys(d.thread_id).meta,
                                      d.id, _ms(d.entry_id), now_ms, d.fields).op())
            going.append(d)
        else:
            ops.append(Pipeline([["XADD", d.stream, "*", *_flat(d.fields)]]))
            going.append(d)
    replies = (yield Parallel(ops)) if ops else []
    done: list[DeadLetter] = []
    for d, r in zip(going, replies):
        if isinstance(r, DeadReplayReply):
            if r.status == "ADDED":
                out.replayed.append((d, r.entry_id))
            elif r.status == "REPLAYED":
                out.skipped.append((d, "a replay put it back before: dropped"))
            else:
                out.skipped.append((d, _GONE[r.status]))
                continue
        else:
            out.replayed.append((d, _str(r[0])))  # type: ignore[index]
        done.append(d)
    yield from drop_plan(ctx, [*done, *dupes])
    return out


_GONE = {"GONE": "Redis no longer holds its thread (deleted or released): drop it",
         "NEWER": "its thread was deleted and written again since: drop it"}


def _of_thread(d: DeadLetter) -> bool:
    return bool(d.thread_id) and THREAD_FIELD in d.fields


def drop_plan(ctx: Context, letters: Sequence[DeadLetter]) -> Plan[int]:
    """Delete ``letters`` from the dead-letter stream (``XDEL``); returns how many were
    there. Their entries are given up: MongoDB never gets what they named, and their
    thread's unflushed count still counts them, so its Redis keys keep no TTL (until
    ``delete_thread``)."""
    if not letters:
        return 0
    (n,) = yield Pipeline([["XDEL", dead_letter_key(ctx), *[d.id for d in letters]]])
    return int(n)


def _ms(entry_id: str) -> int:
    head = entry_id.split("-")[0]
    return int(head) if head.isdigit() else 0


def _str(v: object) -> str:
    return v.decode() if isinstance(v, bytes) else str(v)
