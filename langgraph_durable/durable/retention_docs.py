"""The retention facts of threads in MongoDB (sans-I/O): one document per thread in
``<collection_prefix>retention``, and the sweep's lease in ``<collection_prefix>meta``.

A thread's document ``{_id: thread_id, at, exp, ttl, pinned, held}``:

- ``at``: its last activity (ms since the epoch, Redis time: the outbox entry id of its
  newest ``put``/``put_writes`` the flusher copied), only grows (``$max``);
- ``exp``: when it expires (ms): at least ``at + TTL`` of each activity (``$max``, so a
  replayed or late entry never moves it back); absent when nothing expires it (no
  ``default_ttl`` and no TTL of its own) or after a sweep acted on it (``held``);
- ``ttl``: the TTL (minutes) its runs named (``lgd_ttl_minutes``) or ``set_thread_ttl``
  set, absent when none;
- ``pinned``: True while an operator pinned it (``pin_thread``): never swept;
- ``held``: why the last sweep left it without an expiry: ``"interrupt"`` (its newest
  checkpoint waits for an answer to an interrupt) or ``"pruned"`` (``keep_latest`` pruned
  it). The next activity clears it and arms ``exp`` again.

The lease document ``{_id: "retention:sweep", owner, until, next_at, last}`` in ``meta``:
a sweeper holds it while ``until`` (ms) is ahead, renews it per thread, and on finishing
sets ``next_at`` (ms): no scheduled sweep of any process starts before it.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, NamedTuple, TypeGuard

from ..config import MAX_TTL_MINUTES as MAX_TTL_MINUTES  # (ThreadTTL's bound too)
from ..core.ops import DeleteDoc, UpdateDoc
from ..errors import CorruptRecordError, InvalidIdentifierError

TTL_KEY = "lgd_ttl_minutes"
"""``config["configurable"]`` key naming a thread's TTL in minutes at run time (a number
> 0); LangGraph copies it into the checkpoint's metadata too."""

LEASE_ID = "retention:sweep"
"""``_id`` of the sweep's lease document in the ``meta`` collection."""

HELD_INTERRUPT = "interrupt"
"""``held``: the sweep found an unanswered interrupt on the thread's newest checkpoint."""
HELD_PRUNED = "pruned"
"""``held``: the sweep pruned the thread to its newest checkpoints (``keep_latest``)."""

MINUTE_MS = 60_000



def usable_ttl(ttl: object) -> TypeGuard[int | float]:
    """Whether ``ttl`` is a TTL in minutes the retention documents can hold: a number
    (not a bool), finite, > 0 and at most ``MAX_TTL_MINUTES``."""
    return (not isinstance(ttl, bool) and isinstance(ttl, (int, float))
            and math.isfinite(ttl) and 0 < ttl <= MAX_TTL_MINUTES)


def ttl_of_config(configurable: Mapping[str, Any], thread_id: str) -> float | None:
    """The thread TTL (minutes) a run names in ``configurable[TTL_KEY]``, None when it
    names none. Raises ``InvalidIdentifierError`` naming the thread for a value that is
    not a finite number > 0 and at most ``MAX_TTL_MINUTES`` (a bool, text, 0, a negative,
    NaN, infinity, 1e300)."""
    ttl = configurable.get(TTL_KEY)
    if ttl is None:
        return None
    if not usable_ttl(ttl):
        raise InvalidIdentifierError(
            f"config['configurable'][{TTL_KEY!r}] of thread {thread_id!r} must be a number "
            f"of minutes > 0 and at most {MAX_TTL_MINUTES} (100 years), got {ttl!r}")
    return float(ttl)


class Activity(NamedTuple):
    """What one flush round learned of a thread: its newest activity (ms) and the TTL
    (minutes) the newest of its entries that named one named (None: none did)."""

    at_ms: int
    ttl_min: float | None

    def seen(self, at_ms: int, ttl_min: float | None) -> Activity:
        """This activity with one more entry (at ``at_ms``, naming ``ttl_min``)."""
        if at_ms >= self.at_ms:
            return Activity(at_ms, ttl_min if ttl_min is not None else self.ttl_min)
        return Activity(self.at_ms, self.ttl_min if self.ttl_min is not None else ttl_min)


def activity_update(thread_id: str, a: Activity, own_ttl_min: float | None,
                    default_ttl_min: float | None) -> UpdateDoc:
    """The upsert recording ``a``: ``$max`` of ``at`` and of ``exp`` = ``at`` + the TTL
    (the one ``a`` named, else the thread's own ``own_ttl_min``, else the policy's
    ``default_ttl_min``; no ``exp`` when none), so a replay or a late round changes
    nothing; ``held`` cleared; ``ttl`` set when ``a`` named one. A TTL that is no
    ``usable_ttl`` (a damaged retention document's, a damaged outbox entry's) counts as
    none: it never makes an expiry MongoDB cannot store, which would fail every flush
    round."""
    update: dict[str, Any] = {"$max": {"at": a.at_ms}, "$unset": {"held": ""}}
    named = a.ttl_min if usable_ttl(a.ttl_min) else None
    ttl = next((t for t in (named, own_ttl_min, default_ttl_min) if usable_ttl(t)), None)
    if ttl is not None:
        update["$max"]["exp"] = a.at_ms + int(ttl * MINUTE_MS)
    if named is not None:
        update["$set"] = {"ttl": named}
    return UpdateDoc({"_id": thread_id}, update, upsert=True)


def ttl_update(thread_id: str, minutes: float, now_ms: int) -> UpdateDoc:
    """``set_thread_ttl``: the thread's TTL and its expiry ``now + minutes`` set outright
    (0 minutes: due now), ``held`` cleared."""
    return UpdateDoc({"_id": thread_id},
                     {"$set": {"ttl": minutes, "exp": now_ms + int(minutes * MINUTE_MS)},
                      "$unset": {"held": ""}, "$setOnInsert": {"at": now_ms}}, upsert=True)


def pin_update(thread_id: str, pinned: bool) -> UpdateDoc:
    """``pin_thread`` (``pinned`` True) / ``unpin_thread``."""
    return UpdateDoc({"_id": thread_id}, {"$set": {"pinned": pinned}}, upsert=True)


def due_query(now_ms: int) -> dict[str, Any]:
    """Threads whose expiry passed at ``now_ms`` and that are not pinned (index ``exp``)."""
    return {"exp": {"$lte": now_ms}, "pinned": {"$ne": True}}


UPCOMING_QUERY: dict[str, Any] = {"exp": {"$gt": 0}, "pinned": {"$ne": True}}
"""Threads with an expiry, not pinned (sorted by ``exp``: those due next)."""


def done_update(doc: Mapping[str, Any], held: str) -> UpdateDoc:
    """After the sweep held or pruned a thread: its ``exp`` removed, ``held`` set; only if
    no activity moved ``exp`` since the sweep read ``doc`` (filter on the same ``exp``)."""
    return UpdateDoc({"_id": doc["_id"], "exp": doc["exp"]},
                     {"$unset": {"exp": ""}, "$set": {"held": held}})


def gone_delete(doc: Mapping[str, Any]) -> DeleteDoc:
    """After the sweep deleted a thread (or found it gone): its document removed, only if
    no activity moved ``exp`` since (a new run of the same thread_id keeps its facts)."""
    return DeleteDoc({"_id": doc["_id"], "exp": doc["exp"]})


def lease_acquire(owner: str, now_ms: int, lease_ms: int, scheduled: bool
                  ) -> tuple[dict[str, Any], dict[str, Any]]:
    """``(filter, update)`` of the ``FindOneAndUpdate`` (upsert) taking the sweep's lease
    for ``owner`` until ``now + lease_ms``: free (``until`` passed) or already ``owner``'s,
    and, when ``scheduled``, only once ``next_at`` passed. A taken lease matches nothing:
    the upsert then fails with a duplicate key (not acquired)."""
    free: dict[str, Any] = {"$or": [{"until": {"$lte": now_ms}}, {"owner": owner}]}
    cond: list[dict[str, Any]] = [free]
    if scheduled:
        cond.append({"$or": [{"next_at": {"$exists": False}}, {"next_at": {"$lte": now_ms}}]})
    return ({"_id": LEASE_ID, "$and": cond},
            {"$set": {"owner": owner, "until": now_ms + lease_ms, "started": now_ms}})


def lease_renew(owner: str, now_ms: int, lease_ms: int
                ) -> tuple[dict[str, Any], dict[str, Any]]:
    """``(filter, update)`` renewing ``owner``'s lease; matches nothing once lost."""
    return ({"_id": LEASE_ID, "owner": owner}, {"$set": {"until": now_ms + lease_ms}})


def lease_release(owner: str, next_at_ms: int, last: Mapping[str, Any]) -> UpdateDoc:
    """Give the lease back (``until`` 0), no scheduled sweep before ``next_at_ms``, and
    what this sweep did (``last``)."""
    return UpdateDoc({"_id": LEASE_ID, "owner": owner},
                     {"$set": {"until": 0, "next_at": next_at_ms, "last": dict(last)}})


def retention_of(thread_ids: Sequence[str]) -> dict[str, Any]:
    """Filter of the retention documents of ``thread_ids`` (``_id``)."""
    return {"_id": {"$in": thread_ids}}


def own_ttls_of(thread_ids: Iterable[str]) -> dict[str, Any]:
    """Filter of the retention documents of ``thread_ids`` holding a TTL of their own
    (``ttl``; ``_id``s sorted)."""
    return {"_id": {"$in": sorted(thread_ids)}, "ttl": {"$exists": True}}


def thread_ids(docs: Iterable[Mapping[str, Any]]) -> list[str]:
    """The ``_id`` of each retention document."""
    return [str(d["_id"]) for d in docs]


class ThreadRetention(NamedTuple):
    """A thread's retention facts (``DurableSaver.thread_retention``): ``thread_id``;
    ``last_activity_ms`` (its newest flushed ``put``/``put_writes``, ms since the epoch,
    None before any was recorded); ``expires_ms`` (when a sweep takes it, None when nothing
    expires it: no TTL, pinned threads keep theirs but are never swept, ``held``);
    ``ttl_minutes`` (its own TTL, None: the policy's ``default_ttl``); ``pinned``;
    ``held`` (``"interrupt"``, ``"pruned"`` or None: see the module)."""

    thread_id: str
    last_activity_ms: int | None
    expires_ms: int | None
    ttl_minutes: float | None
    pinned: bool
    held: str | None

    @classmethod
    def of(cls, doc: Mapping[str, Any]) -> ThreadRetention:
        """From a retention document. Raises ``CorruptRecordError`` naming the thread and
        the field when a field holds another type (``at``/``exp`` not an integer of ms,
        ``ttl`` not a number, ``held`` not text)."""
        tid = str(doc.get("_id"))
        for name, kinds in (("at", (int, float)), ("exp", (int, float)),
                            ("ttl", (int, float)), ("held", (str,))):
            v = doc.get(name)
            if v is not None and (isinstance(v, bool) or not isinstance(v, kinds) or (
                    isinstance(v, float) and not math.isfinite(v))):
                raise CorruptRecordError(
                    f"MongoDB retention document of thread {tid!r} is damaged: field "
                    f"{name!r} holds {type(v).__name__} {str(v)[:40]!r}", tier="durable",
                    thread_id=tid, key=tid)
        at, exp, ttl = doc.get("at"), doc.get("exp"), doc.get("ttl")
        return cls(tid, None if at is None else int(at), None if exp is None else int(exp),
                   None if ttl is None else float(ttl),
                   bool(doc.get("pinned")), doc.get("held"))

    def as_dict(self) -> dict[str, Any]:
        """JSON data (the CLI's ``--json``, the dashboard)."""
        return self._asdict()


def check_minutes(minutes: object, thread_id: str) -> float:
    """``minutes`` for ``set_thread_ttl``: a finite number >= 0 (0: due now) and at most
    ``MAX_TTL_MINUTES``; raises ``ValueError`` naming the thread otherwise."""
    if usable_ttl(minutes):
        return float(minutes)
    if isinstance(minutes, (int, float)) and not isinstance(minutes, bool) and minutes == 0:
        return 0.0
    raise ValueError(f"TTL of thread {thread_id!r} must be minutes >= 0 and at most "
                     f"{MAX_TTL_MINUTES} (100 years), got {minutes!r}")
