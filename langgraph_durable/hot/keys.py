"""Redis key names. Every key of a thread shares one hash tag, and so one Redis Cluster slot.

Two layouts, chosen by the number of outbox *partitions* P (``DurableConfig.
outbox_partitions``):

- P = 1 (a single Redis or Sentinel, the default there): a thread's keys are
  ``{<prefix>:<len>:<thread>}:<suffix>`` and the one outbox stream is ``{<prefix>:outbox}``.
- P >= 2 (required on a Redis Cluster, default 16 there): a thread belongs to partition
  ``k = crc32(thread_id) mod P`` and its keys are ``<tag k>:<len>:<thread>:<suffix>``;
  partition k's outbox stream ``<tag k>:outbox`` shares that tag, so the script writing a
  checkpoint also appends its outbox entry, and the flusher acknowledges and settles in
  one script per partition, on a cluster too. Tag k is ``{<prefix>:p<k>.<n>}`` with the
  smallest ``n`` that puts it in the k-th of P equal ranges of the 16384 slots, so the
  partitions spread evenly over masters that own even slot ranges (as ``redis-cli
  --cluster create`` assigns them).

Beside the threads' keys and the outbox streams, a prefix has the dead-letter stream
``{<prefix>:outbox:dead}`` and the flushers' heartbeat registry
``{<prefix>:heartbeats}`` (``heartbeats_key``).

The length prefix makes the mapping from thread to keys unique whatever characters a
thread_id holds. This module is the one home of building a
thread's keys, parsing a key back into its thread (``thread_keys_of``) and the glob
patterns that ``SCAN MATCH`` them (``glob_escape``, ``prefix_pattern``).

Stored names and what they hold in field terms
-----------------------------------------------
The suffixes and ``meta`` field names are stored (live deployments have them, the Lua
scripts in ``hot/lua/*.lua`` use them), so they are kept as they are; code and docs use
the field terms on the right.

========  ===========================================================================
suffix    holds
========  ===========================================================================
``cp``    checkpoint records (hash: checkpoint member -> envelope)
``cv``    checkpoint blob index read by Lua (hash: member -> ``[parent, blob field...]``)
``idx``   the *checkpoint index*: sorted set of the thread's checkpoint members
``bl``    channel values, LangGraph's "blobs" (hash: blob field -> envelope)
``w``     pending writes (hash: write field -> envelope)
``wi``    the *pending-write index*: sorted set of the ``w`` fields
``ns``    namespace order (hash: checkpoint_ns -> first checkpoint_id seen)
``meta``  thread state (hash, fields below)
``it``    items and nodes of list values (hash: 16-byte digest -> stored bytes, see
          ``items.py``)
``gone``  tombstones of deletes (hash: field -> deletion time in ms)
``fx``    the *effect journal* (hash: effect field -> journal entry, see
          ``hot/effect_scripts.py``); not in ``all``
========  ===========================================================================

Keys of the whole prefix, not of a thread: the outbox streams (``outbox_key``), the dead
letters (``{<prefix>:outbox:dead}``) and the *binding* ``{<prefix>:binding}``
(``binding_key``: the database and collection_prefix this prefix belongs to).

Besides the threads' keys and the outbox streams, each partition has a *thread registry*
(``registry_key``): a hash of every thread_id Redis has stored a checkpoint of (field
thread_id -> ``1``), plus the field ``EPOCH_FIELD`` saying whether the registry is
*complete* (see ``plans/thread_registry.py``). It has no TTL and lives as long as the key prefix.

``meta`` fields: ``dirty`` = the thread's *unflushed count* (outbox entries not yet
acknowledged as written to MongoDB); ``writes`` = its writes count (PUT and PUT_WRITES
raise it, nothing lowers it: a prune collecting items asks whether the thread was written
since it read it, ``collect_items.lua``); ``born`` = the keys' *generation* (creation time in
ms, or one past the last ``delete_thread``'s tombstone when that is not earlier: every
entry of a generation is stamped at or after it, ``include/generation_entry.lua``; outbox
entries older than it belong to an earlier generation of a deleted thread);
``complete`` = *hot_complete*, 1 when the thread started in Redis, so Redis holds all of
it and MongoDB is not asked about what Redis lacks; 2 once the hot window trimmed it:
Redis still holds every namespace and its newest checkpoints (the latest of a namespace
Redis lacks is none), not every older one; ``u<member>`` = a checkpoint's unflushed
entries (the hot window keeps it while above 0); ``h<checkpoint_ns>`` = the namespace's
*head*, the member PUT last wrote there (what a run that read it as the latest expects:
``ConcurrentRunError``; not the largest checkpoint_id, since ids made on hosts whose clocks
differ need not increase); ``r<dead letter id>`` = a replay's claim of that dead letter
(its time in ms; ``hot/lua/dead_replay.lua``: the entry goes back once).

"idx" means three different things, always spelled out in docs: the ``idx`` key above
(the checkpoint index); a pending write's ``idx`` (LangGraph's write index: position in
the task's writes, negative for the special channels of ``WRITES_IDX_MAP``); and ``wi``
(the pending-write index key). "blob" in this module and in ``records`` means a channel
value; an object of an external blob store (``serde/``) is an *external object* and its
collector is ``extref_gc.py``.
"""

from __future__ import annotations

import functools
import re
import zlib
from binascii import crc_hqx

_GLOB_SPECIAL = re.compile(r"([\\*?\[\]])")


def glob_escape(text: str) -> str:
    """``text`` with the Redis glob specials ``* ? [ ] \\`` escaped, to match literally in
    ``SCAN MATCH``/``KEYS`` (``{`` and ``:`` are literals there already)."""
    return _GLOB_SPECIAL.sub(r"\\\1", text)


def prefix_pattern(prefix: str) -> str:
    """``SCAN MATCH`` pattern of every key under ``prefix``: every thread's keys and the
    outbox streams, ``{<prefix>:*`` with the prefix glob-escaped."""
    return "{" + glob_escape(prefix) + ":*"


class ThreadKeys:
    """The Redis keys of one thread.

    Attributes are named after the stored suffixes (see the module docstring):

    - ``cp``: hash, member -> checkpoint record envelope
    - ``cv``: hash, member -> msgpack ``[parent_id, blob_field, ...]`` (read by Lua)
    - ``idx``: checkpoint index, sorted set (score 0) of members ``ns NUL checkpoint_id``
      in lexical order
    - ``bl``: hash, ``ns NUL channel NUL version`` -> channel value envelope (``""`` =
      empty)
    - ``w``: hash, ``ns NUL checkpoint_id NUL task_id NUL write_idx`` -> write envelope
    - ``wi``: pending-write index, sorted set (score 0) of the ``w`` fields, for range
      reads per checkpoint
    - ``ns``: hash, checkpoint_ns -> first checkpoint_id seen (namespace order)
    - ``meta``: thread state: ``dirty`` (unflushed count), ``born`` (generation, ms),
      ``complete`` (hot_complete), ``h<ns>`` (the namespace's head)
    - ``it``: items and nodes of list values (hash: digest -> stored bytes, ``items.py``)
    - ``gone``: tombstones of deletes (field -> deletion time, ms; ``*`` = whole thread;
      ``!`` = it holds every tombstone of the thread, loaded from MongoDB),
      kept ``TOMBSTONE_TTL_S``; not in ``all`` (it outlives the thread's data)
    - ``fx``: the effect journal of ``langgraph_durable.effects`` (``hot/effect_scripts.py``);
      not in ``all`` (the scripts of checkpoints never touch it)
    """

    __slots__ = ("thread_id", "tag", "cp", "cv", "idx", "bl", "w", "wi", "ns", "meta", "it",
                 "gone", "fx")

    def __init__(self, prefix: str, thread_id: str, partitions: int = 1) -> None:
        self.thread_id = thread_id
        if partitions <= 1:
            self._name("{" + f"{prefix}:{len(thread_id)}:{thread_id}" + "}")
        else:
            k = partition_of(thread_id, partitions)
            self._name(partition_tag(prefix, k, partitions)
                       + f":{len(thread_id)}:{thread_id}")

    def _name(self, tag: str) -> None:
        self.tag = t = tag
        self.cp, self.cv, self.idx, self.bl = f"{t}:cp", f"{t}:cv", f"{t}:idx", f"{t}:bl"
        self.w, self.wi, self.ns, self.meta = f"{t}:w", f"{t}:wi", f"{t}:ns", f"{t}:meta"
        self.it, self.gone, self.fx = f"{t}:it", f"{t}:gone", f"{t}:fx"

    @property
    def all(self) -> list[str]:
        """Every key of the thread, in the order the Lua scripts expect them."""
        return [self.cp, self.cv, self.idx, self.bl, self.w, self.wi, self.ns, self.meta,
                self.it]

    def suffix_of(self, key: str) -> str | None:
        """The stored suffix (``"cp"``, ``"idx"``, ... ``"gone"``) naming ``key`` among
        this thread's keys, or ``None`` if ``key`` is not one of them."""
        head = self.tag + ":"
        if not key.startswith(head):
            return None
        suffix = key[len(head):]
        return suffix if suffix in _SUFFIXES else None


_SUFFIXES = frozenset(ThreadKeys.__slots__[2:])


def thread_keys_of(prefix: str, key: str | bytes) -> ThreadKeys | None:
    """The keys of the thread of ``prefix`` that ``key`` is one of (any suffix, ``gone``
    included; either layout), or ``None`` for any other key (an outbox stream, another
    prefix, a foreign key). Inverse of ``ThreadKeys``: reads the length prefix, so any
    thread_id parses."""
    if isinstance(key, bytes):
        key = key.decode("utf-8", "surrogateescape")
    head = "{" + prefix + ":"
    if not key.startswith(head):
        return None
    rest = key[len(head):]
    partitions = 1
    if rest.startswith("p"):  # {prefix:p<k>.<n>}:<len>:<thread>:<suffix>
        tag_end = rest.find("}:")
        k, dot, n = rest[1:max(tag_end, 0)].partition(".")
        if tag_end < 0 or not (k.isdigit() and dot and n.isdigit()):
            return None
        rest, partitions = rest[tag_end + 2:], 0  # P unknown here: checked below
    length, sep, rest = rest.partition(":")
    if not sep or not length.isdigit():
        return None
    thread_id = rest[: int(length)]
    keys = ThreadKeys(prefix, thread_id)
    if partitions == 0:  # the same keys under the partition's tag
        keys._name(key[:key.index("}:") + 1] + f":{len(thread_id)}:{thread_id}")
    return keys if keys.suffix_of(key) is not None else None


def partition_of(thread_id: str, partitions: int) -> int:
    """The outbox partition of ``thread_id``: ``crc32(utf-8 thread_id) mod partitions``
    (stable across processes and versions)."""
    return zlib.crc32(thread_id.encode("utf-8", "surrogateescape")) % partitions


@functools.lru_cache(maxsize=4096)
def partition_tag(prefix: str, k: int, partitions: int) -> str:
    """The hash tag of partition ``k`` of ``partitions``: ``{<prefix>:p<k>.<n>}`` with the
    smallest ``n`` whose slot (``CRC16 mod 16384``) lies in the k-th of ``partitions``
    equal slot ranges."""
    lo, hi = k * SLOTS // partitions, (k + 1) * SLOTS // partitions
    n = 0
    while True:
        tag = f"{prefix}:p{k}.{n}"
        if lo <= key_slot(tag.encode()) < hi:
            return "{" + tag + "}"
        n += 1


SLOTS = 16384
"""Hash slots of a Redis Cluster."""


def key_slot(key: bytes) -> int:
    """The Redis Cluster hash slot of ``key`` (0 to ``SLOTS`` - 1): CRC16-XMODEM (the
    stdlib's ``binascii.crc_hqx`` from 0) of its hash tag, mod ``SLOTS``. The hash tag is
    what lies between the first ``{`` and the first ``}`` after it, when not empty; else
    the whole key (the cluster specification's rule)."""
    start = key.find(b"{")
    if start > -1:
        end = key.find(b"}", start + 1)
        if end > start + 1:
            key = key[start + 1:end]
    return crc_hqx(key, 0) % SLOTS


def outbox_key(prefix: str, partition: int | None = None, partitions: int = 1) -> str:
    """An outbox stream (read by the ``flushers`` consumer group): the single stream
    ``{<prefix>:outbox}`` (``partition`` None), or ``<tag>:outbox`` of partition
    ``partition`` of ``partitions``."""
    if partition is None:
        return "{" + prefix + ":outbox}"
    return partition_tag(prefix, partition, partitions) + ":outbox"


def outbox_keys(prefix: str, partitions: int) -> list[str]:
    """Every outbox stream of ``prefix`` with ``partitions`` partitions."""
    if partitions <= 1:
        return [outbox_key(prefix)]
    return [outbox_key(prefix, k, partitions) for k in range(partitions)]


def binding_key(prefix: str) -> str:
    """The *binding* of a key prefix: ``{<prefix>:binding}``, a hash naming the one MongoDB
    ``database`` and ``collection_prefix`` the threads of ``prefix`` are flushed to, with
    ``by`` (which process recorded it) and ``at`` (when, ms since the epoch). Set once
    (``plans/binding.py``), never expires; a saver or flusher worker configured with
    another database refuses to start. Under ``prefix_pattern`` (so a prefix's footprint
    and clean-up see it), never a thread's key (``thread_keys_of`` gives None)."""
    return "{" + prefix + ":binding}"


def registry_key(prefix: str, partition: int | None = None, partitions: int = 1) -> str:
    """The thread registry of one outbox partition: ``{<prefix>:threads}`` with one
    partition (``partition`` None), else ``<tag>:threads`` in partition ``partition``'s
    hash tag, so the scripts of a thread of that partition reach it in the thread's slot
    on a Redis Cluster (``thread_keys_of`` gives None for it: it is no thread's key)."""
    if partition is None:
        return "{" + prefix + ":threads}"
    return partition_tag(prefix, partition, partitions) + ":threads"


def registry_keys(prefix: str, partitions: int) -> list[str]:
    """The thread registry of every outbox partition, in partition order (the same order
    as ``outbox_keys``)."""
    if partitions <= 1:
        return [registry_key(prefix)]
    return [registry_key(prefix, k, partitions) for k in range(partitions)]


EPOCH_FIELD = "\x00epoch"
"""The registry field holding its epoch, ``"<state> <nonce>"`` with state ``pending``
(being decided), ``complete`` (every thread Redis or MongoDB holds is a field) or
``partial`` (it may miss threads: a miss asks MongoDB). No thread_id contains a NUL."""

TOMBSTONE_TTL_S = 7 * 24 * 3600
"""Seconds a delete's tombstones stay: longer than any flusher round can stall."""

def heartbeats_key(prefix: str) -> str:
    """The *heartbeat registry* of ``prefix``: ``{<prefix>:heartbeats}``, a sorted set of
    the flushers' consumer names scored by when each one's heartbeat lapses (Redis server
    time, ms; ``outbox/heartbeat.py``). Not a thread's key (``thread_keys_of`` gives
    ``None``); in its own slot on a Redis Cluster."""
    return "{" + prefix + ":heartbeats}"


def dead_letter_key(prefix: str) -> str:
    """The *dead letters* of ``prefix``: ``{<prefix>:outbox:dead}``, a stream of the outbox
    entries a flusher set aside (``core/outbox_entry.py`` ``DeadLetter``: the entry's own
    fields, its stream and id, the error). Not a thread's key; in its own slot."""
    return "{" + prefix + ":outbox:dead}"


CONSUMER_GROUP = "flushers"
"""Name of the consumer group every flusher (in-process or worker) joins."""


KEY_TYPES = {"cp": "hash", "cv": "hash", "idx": "zset", "bl": "hash", "w": "hash",
             "wi": "zset", "ns": "hash", "meta": "hash", "it": "hash", "gone": "hash",
             "fx": "hash"}
"""The Redis type (as ``TYPE`` names it) of each stored suffix of a thread's keys; a key
of another type is damaged (the scripts then fail with ``WRONGTYPE``)."""
