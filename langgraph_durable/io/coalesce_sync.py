"""Group commit of Lua script calls made by several OS threads at once on one blocking
Redis client (the io layer; used by ``io/drivers.py``'s blocking handlers): the blocking
twin of ``coalesce.ScriptBatcher``. A call made while no batch is on the wire goes at once,
alone; calls made while one is on the wire go together as the next one, each with its
own reply or error. Commands are packed by hiredis and written to a pooled connection
when the client allows it (``_packs_direct_sync``), else sent through redis-py.
"""

from __future__ import annotations

import os
import threading
import weakref
from collections.abc import Sequence
from typing import Any

import redis
import redis.cluster
import redis.exceptions

from .coalesce import _own_command_path
from .kept import HOLD_MIN_POOL
from .wire import pack as _pack


class _Pending:
    """One sync call in a ``SyncScriptBatcher``: its command, its reply once sent, and
    (a call queued behind a batch on the wire) the event it waits on; ``lead``: it was
    woken to send the next batch."""

    __slots__ = ("command", "source", "done", "reply", "lead")

    def __init__(self, command: tuple[Any, ...], source: str) -> None:
        self.command, self.source = command, source
        self.done: threading.Event | None = None
        self.reply: Any = None
        self.lead = False


class SyncScriptBatcher:
    """Group commit of script calls made by several OS threads at once on one blocking
    ``redis.Redis`` client (e.g. graphs run by a ``ThreadPoolExecutor``).

    A call made while no batch is on the wire is sent at once, alone (a plain
    ``EVALSHA``: a lone caller waits for nobody). Calls made while a batch is on the wire
    queue; when it is answered, the first of them is woken to send them all as one
    pipeline (``transaction=False``) and the others are woken with their replies. So a
    call waits at most for the batch in flight, and each keeps its own reply or error, as
    in ``ScriptBatcher``. Not used on a Redis Cluster (there each call goes on its own)."""

    def __init__(self, redis_client: Any) -> None:
        self.redis = redis_client
        self.batches = 0
        """Pipelines (or lone ``EVALSHA``s) sent so far."""
        self.calls = 0
        """Script calls sent so far."""
        self._lock = threading.Lock()
        self._queue: list[_Pending] = []
        """Calls waiting for the batch on the wire (empty when none is)."""
        self._busy = False
        """True while a batch is on the wire (its sender hands over when answered)."""
        self._direct = _packs_direct_sync(redis_client)
        """Whether commands are packed by hiredis and sent on the pool's connections."""
        pool = getattr(redis_client, "connection_pool", None)
        size = getattr(pool, "max_connections", 0)
        self._hold = self._direct and isinstance(size, int) and size >= HOLD_MIN_POOL
        """Whether the batches go on one connection the batcher keeps (``HOLD_MIN_POOL``)."""
        self._held: Any = None
        """That connection, once taken from the pool."""
        _SYNC_BATCHERS.add(self)

    def release(self) -> None:
        """Give the connection kept between batches back to the client's pool and keep
        none from now on (the saver closes; the client's owner may go on using the pool):
        while a batch is on the wire, its sender gives it back once no batch is left."""
        with self._lock:
            self._hold = False
            if self._busy:
                return
            conn, self._held = self._held, None
        if conn is not None:
            self.redis.connection_pool.release(conn)

    def _after_fork(self) -> None:
        """In a forked child: no batch of the parent's threads is on the wire here, and
        the parent's connection is not the child's to use."""
        self._lock = threading.Lock()
        self._queue, self._busy = [], False
        self._held = None

    def call(self, sha: str, source: str, keys: Sequence[Any], args: Sequence[Any]) -> Any:
        """Run one script call (``EVALSHA sha``, ``EVAL source`` after ``NOSCRIPT``);
        returns the script's reply, or raises its ``ResponseError`` or the client's
        ``ConnectionError``/``TimeoutError``."""
        me = _Pending(("EVALSHA", sha, len(keys), *keys, *args), source)
        with self._lock:
            queued = self._busy
            if queued:
                me.done = threading.Event()
                self._queue.append(me)
            self._busy = True
        if not queued:
            self._send_then_hand_over([me])
        else:
            assert me.done is not None
            me.done.wait()
            if me.lead:
                self._send_queued()
        if isinstance(me.reply, BaseException):
            raise me.reply
        return me.reply

    def _send_queued(self) -> None:
        """Send every queued call (this thread's among them) as the next batch."""
        with self._lock:
            batch, self._queue = self._queue, []
        self._send_then_hand_over(batch)

    def _send_then_hand_over(self, batch: list[_Pending]) -> None:
        """Send ``batch``, then wake the first call queued meanwhile to send the next
        batch (or mark the batcher idle) and wake the batch's waiting callers. When Redis
        did not answer ``batch`` (a ``TimeoutError``: the socket timeout passed), the calls
        queued behind it fail with that error, unsent: they have waited that long already,
        and sending them would make each wait a timeout more (a call is bounded by about
        one ``socket_timeout``, not by one per batch ahead of it)."""
        stranded: list[_Pending] = []
        released: Any = None
        try:
            self._send(batch)
        finally:
            unanswered = batch[0].reply if batch else None
            with self._lock:
                if self._queue and isinstance(unanswered, redis.exceptions.TimeoutError):
                    stranded, self._queue = self._queue, []
                    self._busy = False
                elif self._queue:
                    self._queue[0].lead = True
                    nxt = self._queue[0].done
                    assert nxt is not None
                    nxt.set()
                else:
                    self._busy = False
                if not self._busy and not self._hold:  # released while on the wire
                    released, self._held = self._held, None
            if released is not None:
                self.redis.connection_pool.release(released)
            for p in stranded:
                p.reply = unanswered
                assert p.done is not None
                p.done.set()
            for p in batch:
                if p.done is not None and not p.lead:
                    p.done.set()

    def _send(self, batch: list[_Pending]) -> None:
        self.batches += 1
        self.calls += len(batch)
        try:
            replies = self._exchange([p.command for p in batch])
            again = [i for i, r in enumerate(replies)
                     if isinstance(r, redis.exceptions.NoScriptError)]
            if again:
                resent = self._exchange([("EVAL", batch[i].source, *batch[i].command[2:])
                                         for i in again])
                for i, reply in zip(again, resent):
                    replies[i] = reply
        except Exception as exc:  # the batch's connection failed: every call fails
            replies = [exc] * len(batch)
        for p, reply in zip(batch, replies):
            p.reply = reply

    def _exchange(self, commands: list[tuple[Any, ...]]) -> list[Any]:
        """Send ``commands`` and read their replies (a ``ResponseError`` in its command's
        place): packed by hiredis and written on a pooled connection when the client
        allows it (``_packs_direct_sync``), else through redis-py (one command, or a
        pipeline)."""
        if self._hold:  # only the sender of the batch on the wire is here: one at a time
            if self._held is None:
                self._held = self.redis.connection_pool.get_connection()
            else:
                _check(self._held)
            return _exchange_on(self._held, commands)
        if self._direct:
            return _exchange_sync(self.redis.connection_pool, commands)
        if len(commands) == 1:
            try:
                return [self.redis.execute_command(*commands[0])]
            except redis.exceptions.ResponseError as exc:
                return [exc]
        pipe = self.redis.pipeline(transaction=False)
        for cmd in commands:
            pipe.execute_command(*cmd)
        return list(pipe.execute(raise_on_error=False))


def _packs_direct_sync(client: Any) -> bool:
    """Whether ``client``'s commands can be packed by hiredis and sent on its pool's
    connections: a pooled blocking ``redis.Redis`` (no single connection, no client-side
    cache) encoding text as UTF-8, whose command path is redis-py's own (``_own_command_path``)."""
    if _pack is None or getattr(client, "connection", None) is not None:
        return False
    pool = getattr(client, "connection_pool", None)
    kwargs = getattr(pool, "connection_kwargs", None)
    if kwargs is None or not hasattr(pool, "get_connection"):
        return False
    if getattr(pool, "cache", None) is not None or not _own_command_path(client, redis.Redis):
        return False
    return str(kwargs.get("encoding", "utf-8")).lower().replace("-", "") == "utf8"


def _exchange_sync(pool: Any, commands: list[tuple[Any, ...]]) -> list[Any]:
    """The blocking twin of ``ScriptBatcher._exchange``: ``commands`` packed by hiredis,
    one write on a pooled connection, then their replies; retried with the connection's
    ``retry`` as redis-py retries a command. redis-py's own command path (argument
    filtering, response callbacks, its operation metrics) cost as much client CPU as the
    rest of a ``put``'s driver. Raises the client's ``ConnectionError``/``TimeoutError``;
    the connection is closed on any error (no reply is ever left unread on it)."""
    conn = pool.get_connection()
    try:
        return _exchange_on(conn, commands)
    finally:
        pool.release(conn)


def _check(conn: Any) -> None:
    """What redis-py's pool does to a connection it hands out: one the server closed
    (or that holds unread data) is reconnected first."""
    try:
        if conn.can_read():
            raise redis.exceptions.ConnectionError("Connection has data")
    except (redis.exceptions.ConnectionError, TimeoutError, OSError):
        conn.disconnect()
        conn.connect()


def _exchange_on(conn: Any, commands: list[tuple[Any, ...]]) -> list[Any]:
    """``_exchange_sync`` on the connection ``conn`` (connected first when it is not)."""
    assert _pack is not None
    packed = [b"".join([_pack(cmd) for cmd in commands])]
    n = len(commands)

    def send_read() -> list[Any]:
        try:
            conn.send_packed_command(packed)
            replies: list[Any] = []
            for _ in range(n):
                try:
                    replies.append(conn.read_response())
                except redis.exceptions.ResponseError as exc:
                    replies.append(exc)
            return replies
        except BaseException:
            conn.disconnect()  # replies may be left unread: never reuse it as it is
            raise

    return conn.retry.call_with_retry(  # type: ignore[no-any-return]
        send_read, lambda _error: conn.disconnect())


_SYNC_BATCHERS: weakref.WeakSet[SyncScriptBatcher] = weakref.WeakSet()
"""Every live ``SyncScriptBatcher``: reset in a forked child (a thread of the parent may
have been sending a batch, which nobody in the child ever answers)."""


def _reset_after_fork() -> None:
    for batcher in list(_SYNC_BATCHERS):
        batcher._after_fork()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_reset_after_fork)


def sync_batchable(client: Any) -> bool:
    """Whether ``SyncScriptBatcher`` serves ``client``: a blocking client, not a Redis
    Cluster's."""
    return not isinstance(client, redis.cluster.RedisCluster)
