"""Auto-pipelining of Lua script calls under asyncio (the io layer; used by the asyncio
handlers of ``io/drivers.py``).

Many LangGraph threads driven by one event loop (``ainvoke``/``astream`` in an ASGI app)
call ``put``/``put_writes`` at nearly the same moment. Each call is one ``EVALSHA``; sent
one by one, each pays redis-py's command path (a connection from the pool, a socket write,
a read) on its own. ``ScriptBatcher`` queues the calls that arrive in the same turn of the
event loop and sends them as one pipeline (``transaction=False``: one write, one read,
no ``MULTI``), as ioredis' auto-pipelining does:

- each call is still its own atomic script, with its own reply or its own error;
- nobody waits for a batch to fill: the first call of a turn yields to the loop once
  (``asyncio.sleep(0)``) and the calls queued behind it meanwhile go with it, so a lone
  call pays one event-loop hop (and is sent from its own task as before); calls that
  arrive while a batch is on the wire go in the next one (sent at once, on another
  connection), as long as fewer than ``max_in_flight`` batches are on the wire (half the
  pool, at most ``DEFAULT_IN_FLIGHT``); past that they wait in a backlog sent as one
  batch when a batch is answered, so a burst of any size holds a bounded number of
  connections and never waits on the pool (whose wait gives up after a timeout);
- a ``Pipeline`` of non-blocking reads (``SHARED_READS``: a store search's ``HGETALL``, a
  flush's ``XRANGE``) goes in the same batch (``commands``), its commands kept together;
  a read that several calls of one batch make is sent once (they are concurrent: one
  read answers them all);
- a ``NOSCRIPT`` reply (the server's script cache was flushed, or a node that has never
  seen the script) is answered by sending those calls again as ``EVAL`` with the source
  (``NOSCRIPT`` means the script did not run, so this never runs a script twice);
- a batch of one is sent as a plain ``EVALSHA`` (no pipeline object), and a lost
  connection fails every call of its batch with the client's error.

Off a cluster the commands are packed by hiredis' C packer (``hiredis.pack_command``) and
written to a connection taken from the client's pool (retried as redis-py retries a
pipeline, the connection closed on any error so no reply is left unread; the private
redis-py internals this reads are in ``wire.py``, each with its fallback). On a pool of
``kept.HOLD_MIN_POOL`` connections or more, the connection of a batch answered without
error is kept for the next batch instead of going back to the pool (``kept.py``). redis-py's
asyncio command path packs every argument in Python and wraps each command in its own
bookkeeping, which cost more CPU than the rest of a ``put``'s driver. A client redis-py
would pack otherwise (a single-connection client, an encoding other than UTF-8, no
hiredis), whose class overrides or wraps ``execute_command``/``pipeline`` (a subclass, a
tracing instrumentation), or whose ``retry`` retries an error reply (``retry_on_error``
naming a ``ResponseError``) is sent through redis-py as before.

On a Redis Cluster a batch is split by the node that owns each call's first key (a
script's keys share one hash tag, so each script goes whole to one node) and each node's
share is its own cluster pipeline, sent concurrently: redis-py's cluster pipeline keeps
each command's reply or error and resends a ``MOVED``/``ASK``-redirected command on its
own, and a node that does not answer fails only the calls sent to it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine, Sequence
from typing import Any

import redis.asyncio.cluster
import redis.exceptions

from .kept import KeptConnections, keep_limit
from .wire import pack as _pack
from .wire import send_read

SHARED_READS = frozenset({"GET", "MGET", "HGET", "HMGET", "HGETALL", "HLEN", "XLEN",
                          "XRANGE", "XREVRANGE", "EXISTS"})
"""Commands a ``Pipeline`` may send in a shared batch (``ScriptBatcher.commands``): reads
that never block and whose raw reply is the one redis-py gives (no response callback), or
one ``redis_replies.normalise`` reads in either shape (``HGETALL``, ``XRANGE``, ``XREVRANGE``)."""


def shareable(commands: Sequence[Sequence[Any]]) -> bool:
    """Whether a ``Pipeline`` of ``commands`` may go in a shared batch: every command one
    of ``SHARED_READS`` (reads that never block: a blocking read would hold every call of
    its batch)."""
    return all(str(cmd[0]).upper() in SHARED_READS for cmd in commands)


DEFAULT_IN_FLIGHT = 32
"""Most batches on the wire at once when the client's pool names no limit."""


class _Call:
    """One caller's share of a batch: its ``commands`` (one ``EVALSHA`` for a script
    call, several for a pipeline's), the script's Lua ``source`` (sent again as ``EVAL``
    after ``NOSCRIPT``; None for a pipeline's commands, whose reply is the list of their
    replies), the first ``key`` (a cluster's routing) and the ``future`` of its reply."""

    __slots__ = ("commands", "source", "key", "future")

    def __init__(self, commands: list[tuple[Any, ...]], source: str | None,
                 key: Any = None) -> None:
        self.commands, self.source, self.key = commands, source, key
        self.future: asyncio.Future[Any] | None = None


class ScriptBatcher:
    """Queues script calls (and shared reads, ``commands``) of one event loop and sends
    those of one loop turn together, with at most ``max_in_flight`` batches on the wire.

    ``redis`` is a ``redis.asyncio.Redis`` or ``redis.asyncio.RedisCluster`` client bound
    to that loop. ``max_in_flight`` defaults to half the client pool's
    ``max_connections`` (1 to ``DEFAULT_IN_FLIGHT``): calls that come while that many
    batches are on the wire wait in a backlog, sent as one batch when one is answered,
    so a burst of any number of concurrent calls holds at most ``max_in_flight``
    connections and never waits for the pool (whose wait has a timeout). ``batches`` and
    ``calls`` count what was sent (``calls / batches`` is the mean batch size);
    ``peak_in_flight`` is the most batches that were on the wire at once."""

    def __init__(self, redis_client: Any, max_in_flight: int | None = None) -> None:
        self.redis = redis_client
        self.cluster = isinstance(redis_client, redis.asyncio.cluster.RedisCluster)
        """True for a Redis Cluster client: a batch is split by node."""
        self.max_in_flight = max_in_flight or _in_flight_cap(redis_client)
        """Most batches on the wire at once (each holds one connection while it is)."""
        self.batches = 0
        """Pipelines (or lone ``EVALSHA``s) sent so far."""
        self.calls = 0
        """Script calls sent so far."""
        self.in_flight = 0
        """Batches on the wire now."""
        self.peak_in_flight = 0
        """The most batches that were on the wire at once."""
        self._queue: list[_Call] | None = None
        """Calls queued in this loop turn behind the turn's first (None: no first yet)."""
        self._backlog: list[_Call] = []
        """Calls waiting for a batch on the wire to be answered (``max_in_flight`` are)."""
        self._loop: asyncio.AbstractEventLoop | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self._direct = not self.cluster and _packs_direct(redis_client)
        """True: commands are packed by hiredis and written to a pooled connection."""
        pool = getattr(redis_client, "connection_pool", None)
        self.kept = KeptConnections(pool, keep_limit(pool, self.max_in_flight)
                                    if self._direct else 0)
        """The connections kept between batches (``kept.py``)."""

    def call(self, sha: str, source: str, keys: Sequence[Any],
             args: Sequence[Any]) -> Coroutine[Any, Any, Any]:
        """Run one script call (``EVALSHA sha``, ``EVAL source`` after ``NOSCRIPT``) in the
        batch of this event-loop turn: a coroutine giving the script's reply unchanged, or
        raising its error (a ``ResponseError`` of the script, or the client's
        ``ConnectionError``/``TimeoutError`` when the batch's connection failed).

        The turn's first call yields to the loop once (``asyncio.sleep(0)``), then sends
        alone if no other call came (a plain ``EVALSHA`` from its own task), else hands
        the batch to a task of its own, so that cancelling one caller never cancels the
        others' calls. A plain function returning ``_submit``'s coroutine: one coroutine
        less alive per call while it waits (docs/speed.md, "The garbage collector")."""
        return self._submit(_Call([("EVALSHA", sha, len(keys), *keys, *args)], source,
                                  keys[0] if keys else None))

    async def commands(self, commands: Sequence[Sequence[Any]]) -> list[Any]:
        """Send ``commands`` (reads of ``SHARED_READS``, one caller's, kept together) in
        the batch of this event-loop turn; returns their raw replies (hiredis', or
        redis-py's for a client it packs), a ``ResponseError`` in place of a failed
        command's; raises the client's ``ConnectionError``/``TimeoutError`` when the
        batch's connection failed. Not on a Redis Cluster (``ValueError``): its commands
        may name keys of several nodes."""
        if self.cluster:
            raise ValueError("ScriptBatcher.commands: not on a Redis Cluster client")
        reply: list[Any] = await self._submit(_Call([tuple(c) for c in commands], None))
        return reply

    async def _submit(self, call: _Call) -> Any:
        """``call``'s reply; a script's error reply is raised."""
        loop = asyncio.get_running_loop()
        if loop is not self._loop:  # a new loop: what an old one queued (and the
            # connection kept, whose transport is the old loop's) is gone with it
            self._loop, self._queue, self._backlog, self.in_flight = loop, None, [], 0
            await self.kept.moved()
        if self._queue is not None:  # behind the turn's first call
            call.future = loop.create_future()
            self._queue.append(call)
            return await call.future
        self._queue = []
        try:
            await asyncio.sleep(0)  # let the other calls of this turn queue
        except BaseException:
            self._send_queued(None)  # cancelled: the others still go
            raise
        own = self._send_queued(call)
        if own is not None:
            return await own
        if self.in_flight >= self.max_in_flight:  # alone, but the wire is full: wait
            call.future = loop.create_future()
            self._backlog.append(call)
            return await call.future
        self.batches += 1
        self.calls += 1
        self._enter()
        unanswered: redis.exceptions.TimeoutError | None = None
        try:
            reply = await self._lone(call)
        except redis.exceptions.TimeoutError as exc:
            unanswered = exc
            raise
        finally:
            self._leave(cancelled=False, unanswered=unanswered)
        if isinstance(reply, Exception):  # the script's own error (a batch's futures
            raise reply                   # raise theirs: ``_send``)
        return reply

    def _send_queued(self, first: _Call | None) -> asyncio.Future[Any] | None:
        """Send the queued calls (and ``first``, ahead of them) in a task, or put them in
        the backlog while ``max_in_flight`` batches are on the wire; returns ``first``'s
        future, or None when nothing was queued (``first`` is then the caller's)."""
        queued, self._queue = self._queue or [], None
        if not queued:
            return None
        own: asyncio.Future[Any] | None = None
        if first is not None:
            own = first.future = asyncio.get_running_loop().create_future()
            queued.insert(0, first)
        if self.in_flight >= self.max_in_flight:
            self._backlog += queued
        else:
            self._start(queued)
        return own

    def _enter(self) -> None:
        self.in_flight += 1
        self.peak_in_flight = max(self.peak_in_flight, self.in_flight)

    def _leave(self, *, cancelled: bool,
               unanswered: redis.exceptions.TimeoutError | None = None) -> None:
        """A batch left the wire: send the backlog (its callers not cancelled meanwhile)
        as the next batch; ``cancelled`` (the loop is shutting down): cancel it;
        ``unanswered`` (Redis did not answer the batch within the socket timeout): fail
        it with that error, unsent, as ``SyncScriptBatcher`` does (each call waits about
        one socket timeout, not one per batch ahead of it)."""
        self.in_flight -= 1
        if not self._backlog:
            return
        waiting, self._backlog = self._backlog, []
        if cancelled or unanswered is not None:
            for call in waiting:
                assert call.future is not None
                if call.future.done():
                    continue
                if unanswered is not None:
                    call.future.set_exception(unanswered)
                else:
                    call.future.cancel()
            return
        batch = [c for c in waiting if c.future is not None and not c.future.done()]
        if batch:
            self._start(batch)

    def _start(self, batch: list[_Call]) -> None:
        self._enter()
        task = asyncio.ensure_future(self._send(batch))
        self._tasks.add(task)  # keep a reference until it is done
        task.add_done_callback(self._tasks.discard)

    async def _send(self, batch: list[_Call]) -> None:
        self.batches += 1
        self.calls += len(batch)
        cancelled = False
        unanswered: redis.exceptions.TimeoutError | None = None
        try:
            if len(batch) == 1:
                replies = [await self._lone(batch[0])]
            else:
                replies = await self._pipelined(batch)
        except BaseException as exc:  # the batch's connection failed: every call fails
            cancelled = not isinstance(exc, Exception)
            if isinstance(exc, redis.exceptions.TimeoutError):
                unanswered = exc
            for call in batch:
                assert call.future is not None
                if call.future.done():
                    continue
                if isinstance(exc, Exception):
                    call.future.set_exception(exc)
                else:  # cancelled (the loop is shutting down): so are its callers
                    call.future.cancel()
            if cancelled:
                raise
            return
        finally:
            self._leave(cancelled=cancelled, unanswered=unanswered)
        for call, reply in zip(batch, replies):
            assert call.future is not None
            if call.future.done():  # its caller was cancelled
                continue
            if isinstance(reply, Exception):
                call.future.set_exception(reply)
            else:
                call.future.set_result(reply)

    async def _lone(self, call: _Call) -> Any:
        """``call`` sent on its own: its reply (a script's error reply returned)."""
        if call.source is None:
            return await self._pipeline(call.commands)
        (command,) = call.commands
        if self._direct:
            (reply,) = await self._exchange([command])
            if isinstance(reply, redis.exceptions.NoScriptError):
                (reply,) = await self._exchange([("EVAL", call.source, *command[2:])])
            return reply
        try:
            try:
                return await self.redis.evalsha(*command[1:])
            except redis.exceptions.NoScriptError:
                return await self.redis.eval(call.source, *command[2:])
        except redis.exceptions.ResponseError as exc:  # the script's own error
            return exc

    async def _pipelined(self, calls: list[_Call]) -> list[Any]:
        if self.cluster:
            return await self._per_node(calls)
        return await self._one_pipeline(calls)

    async def _per_node(self, calls: list[_Call]) -> list[Any]:
        """A cluster pipeline per node owning calls of the batch; a node's failure is
        the reply of each of its calls."""
        groups: dict[Any, list[int]] = {}
        try:
            for i, call in enumerate(calls):
                node = (self.redis.get_node_from_key(call.key) if call.key is not None
                        else None)
                groups.setdefault(node.name if node is not None else None, []).append(i)
        except (redis.exceptions.RedisError, redis.exceptions.RedisClusterException):
            # no slot map yet: the one pipeline loads it
            groups = {None: list(range(len(calls)))}
        if len(groups) == 1:
            return await self._one_pipeline(calls)
        shares = list(groups.values())
        got = await asyncio.gather(*(self._one_pipeline([calls[i] for i in share])
                                     for share in shares), return_exceptions=True)
        replies: list[Any] = [None] * len(calls)
        for share, result in zip(shares, got):
            for n, i in enumerate(share):
                replies[i] = result if isinstance(result, BaseException) else result[n]
        for r in got:
            if isinstance(r, BaseException) and not isinstance(r, Exception):
                raise r  # cancelled
        return replies

    async def _one_pipeline(self, calls: list[_Call]) -> list[Any]:
        """Every command of ``calls`` in one pipeline; each call's reply (a script's: its
        one reply, sent again as ``EVAL`` after ``NOSCRIPT``; a pipeline's: the list).
        A read that several calls of the batch make is sent once: they are concurrent, so
        one read answers them all (a list reply copied for each)."""
        commands: list[tuple[Any, ...]] = []
        where: list[list[int]] = []  # per call, the index of each of its commands' replies
        reads: dict[tuple[Any, ...], int] = {}
        for call in calls:
            if call.source is not None:
                where.append([len(commands)])
                commands.append(call.commands[0])
                continue
            at = []
            for cmd in call.commands:
                try:
                    i = reads.setdefault(cmd, len(commands))
                except TypeError:  # an unhashable argument: sent as it is
                    i = len(commands)
                if i == len(commands):
                    commands.append(cmd)
                at.append(i)
            where.append(at)
        replies = await self._pipeline(commands)
        out: list[Any] = []
        again: list[int] = []
        shared = len(commands) < sum(len(c.commands) for c in calls)
        for call, at in zip(calls, where):
            if call.source is None:
                out.append([list(replies[i]) if shared and isinstance(replies[i], list)
                            else replies[i] for i in at])
            else:
                out.append(replies[at[0]])
                if isinstance(replies[at[0]], redis.exceptions.NoScriptError):
                    again.append(len(out) - 1)
        if again:
            resent = await self._pipeline(
                [("EVAL", calls[i].source, *calls[i].commands[0][2:]) for i in again])
            for i, reply in zip(again, resent):
                out[i] = reply
        return out

    async def _pipeline(self, commands: list[tuple[Any, ...]]) -> list[Any]:
        if self._direct:
            return await self._exchange(commands)
        pipe = self.redis.pipeline(transaction=False)
        for cmd in commands:
            pipe.execute_command(*cmd)
        return list(await pipe.execute(raise_on_error=False))

    async def _exchange(self, commands: list[tuple[Any, ...]]) -> list[Any]:
        """Send ``commands`` packed by hiredis in one write on a pooled connection and read
        their replies (a ``ResponseError`` reply in its command's place), retried with the
        connection's ``retry`` as redis-py retries a pipeline. Raises the client's
        ``ConnectionError``/``TimeoutError``; the connection is closed on any error (no
        reply of another caller is ever left on it)."""
        assert _pack is not None
        packed = b"".join([_pack(cmd) for cmd in commands])
        conn = await self.kept.take()
        answered = False
        try:
            replies: list[Any] = await conn.retry.call_with_retry(
                lambda: send_read(conn, packed, len(commands)),
                lambda _error: conn.disconnect())
            answered = True
            return replies
        finally:
            await self.kept.give(conn, answered)

    async def release(self) -> None:
        """Give the connections kept between batches back to the client's pool and keep
        none from now on (the saver closes; the client's owner may go on using the pool):
        a batch still on the wire gives its connection back when answered. Call it on the
        client's event loop."""
        await self.kept.release()


def _in_flight_cap(client: Any) -> int:
    """Half the ``max_connections`` of ``client``'s pool (1 to ``DEFAULT_IN_FLIGHT``)."""
    pool = getattr(client, "connection_pool", None)
    cap = getattr(pool, "max_connections", None)
    if not isinstance(cap, int) or cap <= 0:
        cap = getattr(client, "max_connections", None)  # a cluster's, per node
    if not isinstance(cap, int) or cap <= 0:
        return DEFAULT_IN_FLIGHT
    return max(1, min(DEFAULT_IN_FLIGHT, cap // 2))


def _packs_direct(client: Any) -> bool:
    """Whether ``client``'s commands can be packed by hiredis and sent on its pool's
    connections: a pooled ``redis.asyncio.Redis`` encoding text as UTF-8, whose command
    path is redis-py's own (``_own_command_path``)."""
    if _pack is None or getattr(client, "single_connection_client", True):
        return False
    pool = getattr(client, "connection_pool", None)
    kwargs = getattr(pool, "connection_kwargs", None)
    if kwargs is None or not hasattr(pool, "get_connection"):
        return False
    if not _own_command_path(client, redis.asyncio.Redis):
        return False
    return str(kwargs.get("encoding", "utf-8")).lower().replace("-", "") == "utf8"


def _own_command_path(client: Any, base: type) -> bool:
    """False when skipping redis-py's command path would change what a command does: the
    client's class overrides or wraps ``execute_command``/``pipeline`` of ``base``
    (``redis.Redis`` or ``redis.asyncio.Redis``: a subclass, a tracing instrumentation),
    or its connections retry an error reply (a ``ResponseError`` such as ``ReadOnlyError``
    in ``retry``/``retry_on_error``: redis-py retries a lone command on it, the hiredis
    path would read it as the script's reply)."""
    for name in ("execute_command", "pipeline"):
        method = getattr(type(client), name, None)
        if method is not getattr(base, name) or hasattr(method, "__wrapped__"):
            return False
    kwargs = client.connection_pool.connection_kwargs
    retry = kwargs.get("retry")
    retried = [*getattr(retry, "_supported_errors", ()), *(kwargs.get("retry_on_error") or ())]
    return not any(isinstance(e, type) and issubclass(e, redis.exceptions.ResponseError)
                   for e in retried)
