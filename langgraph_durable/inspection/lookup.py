"""Finding and copying checkpoints for the operator's tools (the CLI's ``show``/``diff``/
``fork`` and the dashboard): a checkpoint named by step number or id prefix, one
checkpoint as JSON data, and a fork of a thread at a checkpoint (time travel)."""

from __future__ import annotations

import concurrent.futures
import copy
import datetime
import logging
import re
from collections import defaultdict
from collections.abc import Iterable, Mapping
from typing import Any

from langgraph.checkpoint.base import CheckpointTuple
from langgraph.checkpoint.base.id import uuid6

from ..core.records import load_value
from ..durable.write_groups import pending_of
from ..errors import DurableSaverError, TierUnavailableError
from ..io.drivers import Clients
from ..plans import read
from . import render, storage
from .strict import contains_placeholder
from .versions import version_of


class LookupFailedError(DurableSaverError, LookupError):
    """A thread or checkpoint an operator named is not there (or not uniquely); the
    message names the thread, the namespace and what did not match."""


class ForkError(DurableSaverError):
    """A fork was refused before anything was written: the new thread exists, a channel
    to edit is not in the checkpoint, or the pending writes changed while forking."""


STEP = re.compile(r"-?\d{1,7}")
"""A checkpoint reference that is a step number (uuid6 ids and their prefixes are longer
or hold letters)."""


def _where(thread: str, ns: str | None) -> str:
    return f"thread {thread!r} (ns {ns or ''!r})"


def resolve(saver: Any, clients: Clients, thread: str, ref: str | None,
            ns: str | None) -> str | None:
    """The checkpoint_id ``ref`` names in ``thread``/``ns``: a step number (``"3"``,
    ``"-1"``; refused when branches share it), a checkpoint_id, or a unique prefix of one
    (at least 4 characters). ``None`` stays ``None`` (the latest). Raises
    ``LookupFailedError`` naming the thread, the namespace and what did not match."""
    if ref is None or len(ref) == 36:
        return ref
    where = _where(thread, ns)
    by_step = STEP.fullmatch(ref) is not None
    ids = []
    for tup in outline(saver, thread, ns or ""):
        cid = tup.config["configurable"]["checkpoint_id"]
        if (tup.metadata.get("step") == int(ref)) if by_step else cid.startswith(ref):
            ids.append(cid)
    if len(ids) == 1:
        return str(ids[0])
    missing = not ids and not storage.thread_exists(saver.context, clients, thread)
    if missing:
        raise LookupFailedError(f"thread {thread!r} not found")
    if by_step:
        if ids:  # branches (time travel, forks) share step numbers
            raise LookupFailedError(
                f"step {ref} of {where} names {len(ids)} checkpoints (branches): give one "
                f"by id prefix: {', '.join(c[:13] for c in ids)}")
        raise LookupFailedError(f"{where} has no checkpoint at step {ref}")
    if len(ref) < 4:
        raise LookupFailedError(f"checkpoint {ref!r}: give a step number, or at least 4 "
                                "characters of a checkpoint_id")
    if not ids:
        raise LookupFailedError(f"no checkpoint of {where} starts with {ref!r}")
    raise LookupFailedError(f"checkpoint prefix {ref!r} is ambiguous in {where}: {len(ids)} "
                            "checkpoints start with it")


def get(saver: Any, clients: Clients, thread: str, ref: str | None,
        ns: str | None) -> CheckpointTuple:
    """The checkpoint tuple ``ref`` names (``resolve``; None: the latest). Raises
    ``LookupFailedError`` when the thread or the checkpoint is not there."""
    checkpoint = resolve(saver, clients, thread, ref, ns)
    conf: dict[str, Any] = {"thread_id": thread, "checkpoint_ns": ns or ""}
    if checkpoint:
        conf["checkpoint_id"] = checkpoint
    tup = saver.get_tuple({"configurable": conf})
    if tup is None:
        if not checkpoint or not storage.thread_exists(saver.context, clients, thread):
            raise LookupFailedError(f"{_where(thread, ns)} not found")
        raise LookupFailedError(f"checkpoint {checkpoint!r} of {_where(thread, ns)} not found")
    return tup  # type: ignore[no-any-return]


def tuple_data(tup: CheckpointTuple) -> dict[str, Any]:
    """One checkpoint as JSON data: ids, parent, metadata, ``state_version`` (from the
    metadata; None: unversioned), ``ts``, ``channel_values``, ``pending_writes``
    (task_id, channel, value) and the interrupts among them."""
    c = tup.config["configurable"]
    writes = [{"task_id": t, "channel": ch, "value": render.jsonable(v)}
              for t, ch, v in tup.pending_writes or []]
    interrupts = [render.jsonable(i) for _t, ch, v in tup.pending_writes or []
                  if ch == render.INTERRUPT_CHANNEL
                  for i in (v if isinstance(v, (list, tuple)) else [v])]
    return {
        "thread_id": c["thread_id"], "checkpoint_ns": c["checkpoint_ns"],
        "checkpoint_id": c["checkpoint_id"],
        "parent_checkpoint_id": tup.parent_config["configurable"]["checkpoint_id"]
        if tup.parent_config else None,
        "metadata": render.jsonable(tup.metadata),
        "state_version": version_of(tup.metadata), "ts": tup.checkpoint.get("ts"),
        "channel_values": render.jsonable(tup.checkpoint.get("channel_values", {})),
        "pending_writes": writes, "interrupts": interrupts,
    }


OUTLINE_PAGE = 64
"""Checkpoints read per round by ``outline``."""

DECODED_WRITES = frozenset({render.INTERRUPT_CHANNEL, "__error__"})
"""Pending-write channels whose values ``outline`` decodes (interrupts, errors)."""


def outline(saver: Any, thread: str, ns: str = "", limit: int | None = None
            ) -> list[CheckpointTuple]:
    """Every checkpoint of ``thread``/``ns`` (the newest ``limit``), newest first, as
    ``saver.list`` returns them but without decoding channel values: ``channel_values``
    is empty, and pending writes carry their values only on the interrupt and error
    channels (``None`` elsewhere). For timelines and status of long threads: a
    1,000-step conversation's ``list`` decodes every message of every checkpoint
    (quadratic), this decodes none. Both tiers are merged as ``list`` merges them
    (``plans.read.page_plan``; ``limit=1`` reads MongoDB only when Redis lacks it)."""
    serde, cursor = saver.serde, None
    out: list[CheckpointTuple] = []
    while True:
        count = OUTLINE_PAGE if limit is None else min(OUTLINE_PAGE, limit - len(out))
        raw = saver.run(read.page_plan(saver.context, thread, ns, before=cursor,
                                       count=count, hot_first=limit == 1))
        for rec, writes in raw.rows:
            checkpoint = serde.loads_typed(rec.checkpoint)
            checkpoint["channel_values"] = {}
            pending = [(w.task_id, w.channel, load_value(
                serde, w.value, raw.items, f"write {w.channel!r} of checkpoint "
                f"{rec.checkpoint_id!r} (thread {thread!r})") if w.channel in DECODED_WRITES
                else None) for w in sorted(writes, key=lambda w: w.sort_key())]
            parent = ({"configurable": {"thread_id": thread, "checkpoint_ns": rec.ns,
                                        "checkpoint_id": rec.parent_id}}
                      if rec.parent_id else None)
            out.append(CheckpointTuple(
                {"configurable": {"thread_id": thread, "checkpoint_ns": rec.ns,
                                  "checkpoint_id": rec.checkpoint_id}},
                checkpoint, serde.loads_typed(rec.metadata), parent, pending))  # type: ignore[arg-type]
        if raw.cursor is None or (limit is not None and len(out) >= limit):
            return out[:limit]
        cursor = raw.cursor


def fork(saver: Any, clients: Clients, thread: str, ref: str, to: str, ns: str = "",
         values: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """Time travel: a new thread ``to`` whose latest checkpoint holds exactly the state of
    checkpoint ``ref`` of ``thread`` (channel values, versions, pending writes with their
    task paths), metadata ``source="fork"``, ``forked_from_thread``,
    ``forked_from_checkpoint``. ``values`` replaces those channels' values in the fork
    (each gets a new version, as ``update_state`` stores an edit; no reducer is applied:
    the value given is the value stored). ``saver`` needs a running flusher (the writes'
    task paths are read from MongoDB after a flush). Returns ``{"thread_id", "checkpoint_id",
    "source_checkpoint_id", "step", "pending_writes"}``. Raises ``LookupFailedError``
    (source not found) or ``ForkError`` (``to`` exists, an edited channel is not in the
    checkpoint, pending writes changed meanwhile, a value the tools' strict serializer did
    not decode: its placeholder would be written instead) before writing anything."""
    if storage.thread_exists(saver.context, clients, to):
        raise ForkError(f"thread {to!r} already exists; delete it or choose another name")
    tup = get(saver, clients, thread, ref, ns)
    checkpoint = tup.config["configurable"]["checkpoint_id"]
    cp = copy.deepcopy(tup.checkpoint)
    unknown = sorted(set(values or {}) - set(cp["channel_values"]))
    if unknown:
        raise ForkError(f"checkpoint {checkpoint!r} of {_where(thread, ns)} has no channel "
                        f"{', '.join(map(repr, unknown))} to edit (channels: "
                        f"{', '.join(sorted(cp['channel_values']))})")
    for channel, value in [*((c, v) for c, v in cp["channel_values"].items()
                             if c not in (values or {})),
                           *((c, v) for _t, c, v in tup.pending_writes or [])]:
        found = contains_placeholder(value)
        if found is not None:
            raise ForkError(f"channel {channel!r} of checkpoint {checkpoint!r} of "
                            f"{_where(thread, ns)} holds {found}: a fork would store the "
                            "placeholder; allow its type (--allow-type module.Class) to "
                            "fork it")
    saver.flush()  # the writes' task paths are read from MongoDB
    cols = saver.context.collections
    wdocs = storage.loaded(clients.db, cols, list(clients.db[cols.writes].find(
        {"thread_id": thread, "checkpoint_ns": ns, "checkpoint_id": checkpoint})))
    # the values as read (list values rebuilt from their items), in the same order
    # (LangGraph's writes_sort_key); the task paths from the documents
    ordered = sorted(pending_of(wdocs).values(), key=lambda w: w.sort_key())
    pending = tup.pending_writes or []
    if [(w.task_id, w.channel) for w in ordered] != [(t, c) for t, c, _ in pending]:
        raise ForkError(f"the pending writes of checkpoint {checkpoint!r} changed while "
                        "forking; try again")
    cp["id"] = str(uuid6())
    cp["ts"] = datetime.datetime.now(datetime.timezone.utc).isoformat()
    versions = dict(cp["channel_versions"])
    for channel, value in (values or {}).items():
        cp["channel_values"][channel] = value
        versions[channel] = saver.get_next_version(versions.get(channel), None)
    cp["channel_versions"] = versions
    md: dict[str, Any] = {**tup.metadata, "source": "fork", "forked_from_thread": thread,
                          "forked_from_checkpoint": checkpoint}
    new = saver.put({"configurable": {"thread_id": to, "checkpoint_ns": ns}}, cp, md,
                    versions)
    tasks: dict[tuple[str, str], list[Any]] = defaultdict(list)
    for w, (_t, _c, value) in zip(ordered, pending):
        tasks[(w.task_path, w.task_id)].append((w.channel, value))
    for (path, task_id), writes in tasks.items():
        saver.put_writes(new, writes, task_id, path)
    return {"thread_id": to, "checkpoint_id": new["configurable"]["checkpoint_id"],
            "source_checkpoint_id": checkpoint, "step": md.get("step"),
            "pending_writes": len(ordered)}


log = logging.getLogger("langgraph_durable.inspection")

READERS = 8
"""Threads whose latest checkpoint ``latest_versions`` reads side by side."""


def latest_versions(saver: Any, thread_ids: Iterable[str]) -> dict[str, int | None]:
    """Per thread, the state version of its latest root checkpoint (None: unversioned,
    or no root checkpoint), read without decoding channel values
    (``lookup.outline(limit=1)``: Redis when it holds the thread, else MongoDB), ``READERS``
    threads side by side. A thread whose checkpoint cannot be read (a damaged record) is
    left out, logged by its error's type; ``TierUnavailableError`` is raised."""
    def one(tid: str) -> tuple[bool, int | None]:
        try:
            found = outline(saver, tid, "", limit=1)
        except TierUnavailableError:
            raise
        except Exception as exc:  # by type only: no stored value in the logs
            log.warning("the state version of a thread could not be read: %s",
                        type(exc).__name__)
            return False, None
        return True, version_of(found[0].metadata) if found else None

    ids = list(thread_ids)
    if not ids:
        return {}
    with concurrent.futures.ThreadPoolExecutor(min(READERS, len(ids))) as pool:
        return {tid: v for tid, (ok, v) in zip(ids, pool.map(one, ids)) if ok}
