"""Redis key names. Every key of a thread shares the hash tag ``{<prefix>:<len>:<thread>}``.

The length prefix makes the mapping from thread to keys unique whatever characters a
thread_id holds; the shared tag puts a whole thread in one Redis Cluster slot, so its
multi-key scripts are legal on a cluster.
"""

from __future__ import annotations


class ThreadKeys:
    """The Redis keys of one thread.

    - ``cp``: hash, member -> checkpoint record envelope
    - ``cv``: hash, member -> msgpack ``[parent_id, blob_field, ...]`` (read by Lua)
    - ``idx``: sorted set (score 0), members ``ns NUL checkpoint_id`` in lexical order
    - ``bl``: hash, ``ns NUL channel NUL version`` -> blob envelope (``""`` = empty)
    - ``w``: hash, ``ns NUL checkpoint_id NUL task_id NUL idx`` -> write envelope
    - ``wi``: sorted set (score 0) of the ``w`` fields, for range reads per checkpoint
    - ``ns``: hash, checkpoint_ns -> first checkpoint_id seen (namespace order)
    - ``meta``: hash with ``dirty`` = outbox entries of this thread not yet in MongoDB,
      ``born`` = when these keys were created (ms; entries older than it belong to a
      deleted incarnation) and ``complete`` = 1 when the thread started in Redis, so
      Redis holds all of it (MongoDB is not asked about what Redis lacks)
    - ``gone``: tombstones of deletes (field -> deletion time, ms; ``*`` = whole thread),
      kept ``TOMBSTONE_TTL_S``; not in ``all`` (it outlives the thread's data)
    """

    __slots__ = ("thread_id", "tag", "cp", "cv", "idx", "bl", "w", "wi", "ns", "meta", "gone")

    def __init__(self, prefix: str, thread_id: str) -> None:
        self.thread_id = thread_id
        self.tag = "{" + f"{prefix}:{len(thread_id)}:{thread_id}" + "}"
        t = self.tag
        self.cp, self.cv, self.idx, self.bl = f"{t}:cp", f"{t}:cv", f"{t}:idx", f"{t}:bl"
        self.w, self.wi, self.ns, self.meta = f"{t}:w", f"{t}:wi", f"{t}:ns", f"{t}:meta"
        self.gone = f"{t}:gone"

    @property
    def all(self) -> list[str]:
        """Every key of the thread, in the order the Lua scripts expect them."""
        return [self.cp, self.cv, self.idx, self.bl, self.w, self.wi, self.ns, self.meta]


def outbox_key(prefix: str) -> str:
    """The outbox stream (read by the ``flushers`` consumer group)."""
    return "{" + prefix + ":outbox}"


TOMBSTONE_TTL_S = 7 * 24 * 3600
"""Seconds a delete's tombstones stay: longer than any flusher round can stall."""

CONSUMER_GROUP = "flushers"
"""Name of the consumer group every flusher (in-process or worker) joins."""
