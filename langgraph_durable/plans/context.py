"""What every plan needs to know: configuration, serializer, key and collection names."""

from __future__ import annotations

import contextvars
import itertools
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from langgraph.checkpoint.serde.base import SerializerProtocol

from ..config import DurableConfig
from ..core.items import Items
from ..core.ops import Doc
from ..durable.documents import Collections
from ..errors import ConfigurationError
from ..hot.keys import (
    ThreadKeys,
    outbox_key,
    outbox_keys,
    partition_of,
    registry_key,
    registry_keys,
)

_RUN_HEADS: contextvars.ContextVar[dict[tuple[int, str, str], str] | None] = (
    contextvars.ContextVar("langgraph_durable_run_heads", default=None))
"""The heads of the run in the current context (``Heads.read``): ``(the Heads' token,
thread_id, ns) -> checkpoint_id`` ("" before its first put when its read found none or
was of a given checkpoint)."""
_TOKENS = itertools.count()


class Heads:
    """The latest checkpoint id this saver saw per ``(thread, ns)``: read as "latest" by
    ``get_tuple`` or written by its own ``put``, for the whole process and for the run in
    the current context. A put whose parent is that head expects it still to be the newest
    (see ``ConcurrentRunError``). Bounded LRU of ``size`` entries.

    The run's own heads tell two runs of one process apart (two requests of one server on
    one thread): each LangGraph run starts with a ``get_tuple`` in its thread or asyncio
    task and makes its puts in tasks started from there (LangGraph's executors copy the
    context), so ``read`` gives that context a record of its own, shared by the run's
    puts, which update it in place. A put in a context with no record of its namespace
    (the saver's API called without a read before it) expects the process's head, as
    before.

    Mutable and thread-safe (one lock): the one piece of state a ``Context`` carries, shared
    by a saver, its ``with_allowlist`` copies and every thread and task using them."""

    def __init__(self, size: int = 10_000) -> None:
        self._heads: OrderedDict[tuple[str, str], str] = OrderedDict()
        self._refused: OrderedDict[tuple[str, str], tuple[str, str]] = OrderedDict()
        self._size = size
        self._lock = threading.Lock()
        self._token = next(_TOKENS)

    def expects(self, thread_id: str, ns: str, parent: str) -> bool:
        """Whether a put of ``(thread_id, ns)`` on ``parent`` continues from the newest
        checkpoint its run knows (the run's record of the namespace, else the process's
        head), so ``parent`` must still be the namespace's newest when it is stored."""
        run = _RUN_HEADS.get()
        key = (self._token, thread_id, ns)
        if run is not None and key in run:
            return run[key] == parent
        return self.get(thread_id, ns) == parent

    def seen(self, thread_id: str, ns: str, checkpoint_id: str) -> None:
        """Record ``checkpoint_id`` as the newest known checkpoint of ``(thread_id, ns)``
        (a put stored it, or a read found it the latest), for the process and for the run
        of the current context when its record names the namespace (``read``): its
        refusal, if any, is forgotten (``refused``)."""
        run = _RUN_HEADS.get()
        key = (self._token, thread_id, ns)
        if run is not None and key in run:
            run[key] = checkpoint_id  # in place: the run's tasks share the record
        with self._lock:
            self._heads[(thread_id, ns)] = checkpoint_id
            self._heads.move_to_end((thread_id, ns))
            while len(self._heads) > self._size:
                self._heads.popitem(last=False)
            self._refused.pop((thread_id, ns), None)

    def get(self, thread_id: str, ns: str) -> str | None:
        """The recorded head of ``(thread_id, ns)``, if any."""
        with self._lock:
            return self._heads.get((thread_id, ns))

    def refused(self, thread_id: str, ns: str, checkpoint_id: str, why: str) -> None:
        """Record that this process's put of ``checkpoint_id`` in ``(thread_id, ns)``
        failed (``why``: the error's text). LangGraph then stores no later checkpoint of
        that run (each put waits for the one before and is skipped when it failed), so an
        effect waiting for its task's checkpoint (``plans/effect_journal.task_checkpoint_plan``)
        stops at once. Kept until a put of ``(thread_id, ns)`` succeeds (``seen``) or a
        read of it (``read``: the start of LangGraph's next run of that namespace);
        bounded like the heads."""
        with self._lock:
            key = (thread_id, ns)
            self._refused[key] = (checkpoint_id, f"its put of checkpoint {checkpoint_id!r} "
                                                 f"failed: {why}")
            self._refused.move_to_end(key)
            while len(self._refused) > self._size:
                self._refused.popitem(last=False)

    def read(self, thread_id: str, ns: str) -> None:
        """``get_tuple`` of ``(thread_id, ns)`` begins: the current context gets a record of
        the run's heads of its own (a copy of what the one it had holds of ``thread_id``:
        one thread's namespaces, so it stays small) whose head of the namespace is none
        yet (``seen`` sets the latest it finds; a read of a given checkpoint leaves it
        none: a fork, expecting nothing until its own put), and the namespace's refusal
        (``refused``) is forgotten. Every LangGraph run starts by that read, so a
        put that failed in an earlier run never stops an effect of a later one (whose
        puts LangGraph makes again); a read by another caller while the failing run goes
        on leaves that run's effects to their wait (``effect_checkpoint_wait_s``)
        instead."""
        run = _RUN_HEADS.get() or {}  # the thread's other namespaces (a subgraph run inline)
        fresh = {k: v for k, v in run.items() if k[0] == self._token and k[1] == thread_id}
        fresh[(self._token, thread_id, ns)] = ""
        _RUN_HEADS.set(fresh)
        with self._lock:
            if self._refused:
                self._refused.pop((thread_id, ns), None)

    def refusal(self, thread_id: str, ns: str, checkpoint_id: str) -> str | None:
        """Why this process's last put of ``(thread_id, ns)`` failed, when no put or read
        of it came since (``refused``) and ``checkpoint_id`` is that checkpoint or a newer
        one (an older one was stored before, or by another run: a replay), else None."""
        with self._lock:
            found = self._refused.get((thread_id, ns))
        if found is None or checkpoint_id < found[0]:
            return None
        return found[1]


class Learned(NamedTuple):
    """What a call learned of ``thread_id`` that later calls of this process use:
    ``head``, ``(checkpoint_ns, checkpoint_id)`` of its newest checkpoint (a read of the
    latest, or its own put: for ``Heads.seen``), and ``items``, digests Redis holds for it
    (sent or read: for ``Items.learn``). Plans return it; ``Context.learn`` applies it
    (``ctx.learn(*learned)``)."""

    thread_id: str
    head: tuple[str, str] | None = None
    items: Iterable[bytes] = ()


class Clock:
    """Where plans read the time (they never read the system clock themselves), so unit
    tests control it: ``monotonic()`` seconds for deadlines, ``time_ns()`` wall-clock
    nanoseconds (Unix epoch) for ordering and ages."""

    def monotonic(self) -> float:
        """Seconds from ``time.monotonic``."""
        return time.monotonic()

    def time_ns(self) -> int:
        """Nanoseconds since the Unix epoch from ``time.time_ns``."""
        return time.time_ns()


SYSTEM_CLOCK = Clock()
"""The system's clock (the default of ``Context.clock``)."""

PUT_KEYS_CACHE = 10_000
"""Threads whose PUT/PUT_WRITES keys a ``Context`` remembers (all are dropped at once
when full: one dict, no LRU bookkeeping on the hot path)."""


def partitions_for(config: DurableConfig, cluster: bool) -> int:
    """The number of outbox partitions: ``config.outbox_partitions``, else 16 on a Redis
    Cluster and 1 otherwise. Raises ``ConfigurationError`` for fewer than 2 on a cluster
    (the outbox must share its threads' slots)."""
    partitions = config.outbox_partitions or (16 if cluster else 1)
    if cluster and partitions < 2:
        raise ConfigurationError(
            "outbox_partitions must be at least 2 on a Redis Cluster (each partition's "
            "stream shares the slot of its threads); leave it unset for 16")
    return partitions


class NoSerializer:
    """The serializer of a context that never (de)serializes a value (the runtime's own
    plans, a standalone flusher): every call raises ``ConfigurationError``."""

    def _refuse(self) -> ConfigurationError:
        return ConfigurationError("this context has no serializer (the runtime's own plans "
                                  "or a flusher's): run the plan with a saver's context")

    def dumps_typed(self, obj: object) -> tuple[str, bytes]:
        """Raises ``ConfigurationError``: there is no serializer."""
        raise self._refuse()

    def loads_typed(self, data: tuple[str, bytes]) -> object:
        """Raises ``ConfigurationError``: there is no serializer."""
        raise self._refuse()


NO_SERIALIZER = NoSerializer()
"""The ``serde`` of a ``Context`` with no serializer."""


def _same(doc: Doc) -> Doc:
    return doc


@dataclass(frozen=True)
class DocCodec:
    """How a flush round holds the documents it builds until its bulk writes are answered
    (``encode``) and reads one back as a dict (``decode``: for the upsert of a document
    already stored, ``fence.insert_else_upsert``). As built (the default, for plans run
    without a server) or encoded at once by the I/O layer (``io/mongo_calls.BSON_DOCS``):
    a document is then one object holding its BSON bytes instead of a dict and its lists
    and entry dicts, which Python's garbage collector counts and walks while they live
    (docs/speed.md, "The flusher's documents")."""

    encode: Callable[[Doc], Doc] = _same
    decode: Callable[[Doc], Doc] = _same


@dataclass(frozen=True)
class Context:
    """Facts shared by the saver, its plans and the flusher: configuration, serializer,
    whether metadata is queryable, cluster or not, names and the clock.

    Frozen: no field is ever reassigned (a copy with another serializer is made with
    ``dataclasses.replace`` and keeps the same ``heads``). Plans only read it; ``heads`` is
    the saver's session state (a thread-safe register the saver updates after a plan
    returned, plans read when prepared), excluded from equality and ``repr``; so is
    ``items``, the item store's digests, serialization cache and the items known to be in
    Redis (``items.Items``), and ``store_keys``, the memory store's keys of the last
    ``PUT_KEYS_CACHE`` namespaces written or read (``plans/store_items.keys_of``); ``docs``
    how a flush round holds its documents (``DocCodec``)."""

    config: DurableConfig
    serde: SerializerProtocol
    queryable: bool
    cluster: bool = False
    heads: Heads = field(default_factory=Heads, compare=False, repr=False)
    clock: Clock = field(default=SYSTEM_CLOCK, compare=False, repr=False)
    items: Items = field(default_factory=Items, compare=False, repr=False)
    partitions: int = 1
    _put_keys: dict[str, tuple[str, ...]] = field(default_factory=dict, compare=False,
                                                  repr=False)
    store_keys: dict[tuple[str, ...], Any] = field(default_factory=dict, compare=False,
                                                   repr=False)
    docs: DocCodec = field(default_factory=DocCodec, compare=False, repr=False)

    @property
    def outbox(self) -> str:
        """The outbox's name: its stream with one partition (``partitions`` = 1), else
        a name for all of them (``{<prefix>:p*}:outbox``, not a key: use ``outboxes``)."""
        if self.partitions <= 1:
            return outbox_key(self.config.key_prefix)
        return "{" + self.config.key_prefix + ":p*}:outbox"

    @property
    def outboxes(self) -> list[str]:
        """Every outbox stream (one per partition)."""
        return outbox_keys(self.config.key_prefix, self.partitions)

    def outbox_of(self, thread_id: str) -> str:
        """The outbox stream of ``thread_id``'s partition (in its hash-tag slot when
        ``partitions`` >= 2)."""
        if self.partitions <= 1:
            return outbox_key(self.config.key_prefix)
        return outbox_key(self.config.key_prefix, partition_of(thread_id, self.partitions),
                          self.partitions)

    @property
    def registries(self) -> list[str]:
        """Every partition's thread registry, in the order of ``outboxes``."""
        return registry_keys(self.config.key_prefix, self.partitions)

    def registry_of(self, thread_id: str) -> str:
        """The thread registry of ``thread_id``'s partition (in its hash-tag slot when
        ``partitions`` >= 2; see ``hot/keys.py``)."""
        if self.partitions <= 1:
            return registry_key(self.config.key_prefix)
        return registry_key(self.config.key_prefix, partition_of(thread_id, self.partitions),
                            self.partitions)

    @property
    def collections(self) -> Collections:
        """Names of the MongoDB collections."""
        return Collections.with_prefix(self.config.collection_prefix)

    def keys(self, thread_id: str) -> ThreadKeys:
        """The Redis keys of ``thread_id``."""
        return ThreadKeys(self.config.key_prefix, thread_id, self.partitions)

    def script_keys(self, thread_id: str) -> list[str]:
        """KEYS for a writing script: the thread's keys, its tombstones and its outbox
        stream (one slot: see ``hot/keys.py``)."""
        keys = self.keys(thread_id)
        return [*keys.all, keys.gone, self.outbox_of(thread_id)]

    def put_keys(self, thread_id: str) -> tuple[str, ...]:
        """KEYS of PUT and PUT_WRITES: ``script_keys`` and the thread's registry
        (``registry_of``), remembered for the last ``PUT_KEYS_CACHE`` threads written (a
        put or put_writes of a thread names the same keys every time)."""
        cache = self._put_keys
        found = cache.get(thread_id)
        if found is None:
            if len(cache) >= PUT_KEYS_CACHE:
                cache.clear()
            found = cache[thread_id] = (*self.script_keys(thread_id),
                                        self.registry_of(thread_id))
        return found

    def learn(self, thread_id: str, head: tuple[str, str] | None = None,
              items: Iterable[bytes] = ()) -> None:
        """Apply what a call learned of ``thread_id`` (the fields of a ``Learned``:
        ``ctx.learn(*learned)``) to this process's session state: ``head`` to ``heads``,
        the ``items`` Redis holds to ``items``. The one place a saver's calls update them
        (a plan never does)."""
        if items:
            self.items.learn(thread_id, items)
        if head is not None:
            self.heads.seen(thread_id, head[0], head[1])
