"""Starting a saver: its set-up as one plan (``start_plan``) and the gate that runs it once
per saver (``SetupGate``), whether it is entered (``with``/``async with``), set up
(``setup()``) or just used (``checkpointer=DurableSaver.from_urls(...)``, as one uses
``InMemorySaver()``): the first call then sets the saver up with the same checks."""

from __future__ import annotations

import asyncio
import logging
import threading
import weakref
from collections.abc import Awaitable, Callable
from typing import Any

from langgraph.checkpoint.serde.encrypted import EncryptedSerializer
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

from ..core.ops import CreateIndexes, LoadScripts, Parallel, Pipeline, Plan
from ..durable.documents import INDEXES
from ..errors import TierUnavailableError
from ..hot.scripts import SCRIPTS
from ..outbox.group import ensure_group_plan
from ..plans import binding, tombstones
from ..plans import thread_registry as registry
from ..plans.context import Context
from ..plans.migrations import check_owner_plan, record_version_plan

WHO = "this saver"
"""How the saver names itself in a binding or owner mismatch."""

log = logging.getLogger("langgraph_durable.saver")
_warned_eviction: set[str] = set()  # key prefixes warned about in this process
_warned_serde: list[bool] = []  # not empty once the permissive serializer was warned about

PERMISSIVE_SERDE_WARNING = (
    "the saver's serializer (%s) revives any Python type or function a stored value names "
    "(LangGraph's permissive default): whoever can write to Redis or MongoDB can run code "
    "in this process. Make it strict: set LANGGRAPH_STRICT_MSGPACK=true (before langgraph "
    "is imported), or pass serde=JsonPlusSerializer(allowed_msgpack_modules=[(\"myapp.state\", "
    "\"Order\"), ...]) naming your own types (docs/reliability.md, \"Operator tools decode "
    "safely\")")
"""Logged once per process by the first saver set up with such a serializer."""


def revives_any_constructor(serde: Any) -> bool:
    """Whether ``serde`` decodes a stored msgpack entry naming any ``module.name`` by
    importing and calling it: a ``JsonPlusSerializer`` (also inside an
    ``EncryptedSerializer`` or another wrapper's ``inner``, as ``ExternalRefSerializer``
    holds one) without an allowlist (``allowed_msgpack_modules=True``, LangGraph's
    default unless ``LANGGRAPH_STRICT_MSGPACK`` was set when it was imported) and without
    an ext hook of its own, or one reviving any JSON constructor or falling back to
    pickle. False for every other serializer (what it revives cannot be told)."""
    for _ in range(8):  # wrappers within wrappers, bounded
        if isinstance(serde, EncryptedSerializer):
            serde = serde.serde
        elif getattr(serde, "inner", None) is not None:
            serde = serde.inner
        else:
            break
    if not isinstance(serde, JsonPlusSerializer):
        return False
    fields = serde.__dict__
    return bool((fields.get("_allowed_msgpack_modules") is True
                 and not fields.get("_custom_unpack_ext_hook"))
                or fields.get("_allowed_json_modules") is True
                or fields.get("pickle_fallback"))


def warn_permissive_serde(serde: Any) -> bool:
    """Log ``PERMISSIVE_SERDE_WARNING`` when ``serde`` ``revives_any_constructor`` and it
    was not logged before in this process. Returns whether it was logged now."""
    if _warned_serde or not revives_any_constructor(serde):
        return False
    _warned_serde.append(True)
    log.warning(PERMISSIVE_SERDE_WARNING, type(serde).__name__)
    return True


def _policy_of(info: Any) -> str | None:
    """``maxmemory_policy`` of an ``INFO memory`` reply (a dict, or one per node)."""
    if not isinstance(info, dict):
        return None
    policy = info.get("maxmemory_policy")
    if policy is None:  # a cluster client's reply: {node: {...}}
        found = [_policy_of(v) for v in info.values() if isinstance(v, dict)]
        bad = [p for p in found if p and p != "noeviction"]
        policy = bad[0] if bad else found[0] if found else None
    return policy.decode() if isinstance(policy, bytes) else policy


def eviction_check_plan(ctx: Context) -> Plan[str | None]:
    """Read Redis's ``maxmemory-policy`` (``INFO memory``: one round trip, at set-up only)
    and log a warning, once per key prefix and process, when it is not ``noeviction``:
    the hot tier trusts what Redis holds, so an evicted unflushed checkpoint, journal or
    outbox entry would be lost without an error. Returns the policy, None when Redis
    does not tell (``INFO`` refused or not routable); never raises."""
    try:
        (info,) = yield Pipeline([["INFO", "memory"]])
    except Exception:
        return None
    policy = _policy_of(info)
    prefix = ctx.config.key_prefix
    if policy and policy != "noeviction" and prefix not in _warned_eviction:
        _warned_eviction.add(prefix)
        log.warning(
            "Redis of key prefix %r runs with maxmemory-policy %s: it may evict keys the "
            "saver has not flushed to MongoDB yet (checkpoints, pending writes, the outbox), "
            "which would then be lost; set maxmemory-policy noeviction (docs/deployment.md)",
            prefix, policy)
    return policy


def redis_setup_plan(ctx: Context) -> Plan[None]:
    """The Redis part of the set-up: load the Lua scripts (so the first put is already one
    round trip) and create the outbox consumer groups."""
    yield LoadScripts(list(SCRIPTS.values()))
    yield from ensure_group_plan(ctx)


def mongo_setup_plan(ctx: Context) -> Plan[None]:
    """The MongoDB part of the set-up: the indexes (the tombstones' TTL index with the
    configured ``tombstone_ttl_s``), the ``meta`` record (schema
    version; the owning key prefix, checked: ``migrations.record_version_plan``), then
    the thread registries, decided with both tiers answering (``plans/thread_registry.py``;
    retried with the rest of this part when MongoDB did not answer)."""
    cols = ctx.collections
    yield Parallel([CreateIndexes(getattr(cols, kind), models)
                    for kind, models in INDEXES.items() if kind != "tombstones"])
    yield from tombstones.setup_indexes_plan(ctx)  # with the configured TTL
    yield from record_version_plan(ctx)
    yield from registry.setup_plan(ctx)


def start_plan(ctx: Context, *, strict: bool) -> Plan[TierUnavailableError | None]:
    """The set-up of a saver of ``ctx``, in this order: the key prefix's binding is read
    (``plans/binding.py``; a binding to another database or collection_prefix raises
    ``ConfigurationError`` before anything is written), ``mongo_setup_plan`` (raises
    ``ConfigurationError`` for collections owned by another key prefix, before anything is
    written in Redis), ``redis_setup_plan``, then the binding is recorded if absent (and
    compared again: of two savers starting at once with different databases, the second
    raises).

    With ``strict`` False a MongoDB that does not answer (``TierUnavailableError`` from
    ``mongo_setup_plan``) does not stop it: the error is returned, for the caller to set
    MongoDB up in the background; otherwise it is raised. Returns None when MongoDB was
    set up."""
    yield from binding.check_plan(ctx, WHO)
    missed: TierUnavailableError | None = None
    try:
        yield from mongo_setup_plan(ctx)
    except TierUnavailableError as exc:
        if strict:
            raise
        missed = exc
    yield from redis_setup_plan(ctx)
    yield from binding.bind_plan(ctx, WHO, binding.describe_process("saver"))
    yield from eviction_check_plan(ctx)
    return missed


def check_plan(ctx: Context) -> Plan[None]:
    """What ``start_plan`` checks, writing nothing: the binding in Redis (raises
    ``ConfigurationError`` for another database or collection_prefix) and the owner of the
    collections in MongoDB's ``meta`` (raises for another key prefix; skipped when MongoDB
    does not answer, as reads from Redis still work then)."""
    yield from binding.check_plan(ctx, WHO)
    try:
        yield from check_owner_plan(ctx)
    except TierUnavailableError:
        pass


class SetupGate:
    """Runs a saver's set-up once, for the saver and its ``with_allowlist`` copies, from
    any number of threads (one ``threading.Lock``) or asyncio tasks (one ``asyncio.Lock``
    per event loop). ``ready`` is True once a set-up succeeded; a set-up that raises leaves
    it False, so the next call tries again (and the error reaches the caller)."""

    def __init__(self) -> None:
        self.ready = False
        self._saver: Callable[[], Any] | None = None
        self._lock = threading.Lock()
        self._guard = threading.Lock()
        self._loop_locks: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop,
                                                    asyncio.Lock] = weakref.WeakKeyDictionary()

    def watch(self, saver: Any) -> None:
        """After each set-up, check ``saver``'s serializer (``warn_permissive_serde``;
        held by a weak reference)."""
        self._saver = weakref.ref(saver)

    def _set_up_done(self) -> None:
        self.ready = True
        saver = self._saver() if self._saver is not None else None
        if saver is not None:
            warn_permissive_serde(getattr(saver, "serde", None))

    def once(self, set_up: Callable[[], None], *, again: bool = False) -> None:
        """Run ``set_up()`` unless ``ready`` (or anyway with ``again``: ``setup()``),
        holding the lock: other threads wait for it, then find ``ready``."""
        if self.ready and not again:
            return
        with self._lock:
            if again or not self.ready:
                set_up()
                self._set_up_done()

    async def aonce(self, set_up: Callable[[], Awaitable[None]], *, again: bool = False
                    ) -> None:
        """Async ``once``: tasks of one event loop wait on that loop's ``asyncio.Lock``
        (for savers with asyncio clients only, whose set-up runs on their one loop)."""
        if self.ready and not again:
            return
        loop = asyncio.get_running_loop()
        with self._guard:
            lock = self._loop_locks.get(loop)
            if lock is None:
                lock = self._loop_locks[loop] = asyncio.Lock()
        async with lock:
            if again or not self.ready:
                await set_up()
                self._set_up_done()
