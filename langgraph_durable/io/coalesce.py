"""Auto-pipelining of Lua script calls under asyncio (the io layer; used by
``io/drivers.py`` ``_exec_async``).

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
  connection);
- a ``NOSCRIPT`` reply (the server's script cache was flushed, or a node that has never
  seen the script) is answered by sending those calls again as ``EVAL`` with the source
  (``NOSCRIPT`` means the script did not run, so this never runs a script twice);
- a batch of one is sent as a plain ``EVALSHA`` (no pipeline object), and a lost
  connection fails every call of its batch with the client's error.

Off a cluster the commands are packed by hiredis' C packer (``hiredis.pack_command``) and
written to a connection taken from the client's pool (retried as redis-py retries a
pipeline, the connection closed on any error so no reply is left unread): redis-py's
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
from collections.abc import Sequence
from typing import Any

import redis.asyncio.cluster
import redis.exceptions

_pack: Any
try:
    from hiredis import pack_command as _pack
except ImportError:  # pragma: no cover - hiredis is a default dependency
    _pack = None

Call = tuple[str, str, Sequence[Any], Sequence[Any]]
"""One script call: ``(sha1 digest, Lua source, keys, args)``."""


class ScriptBatcher:
    """Queues script calls of one event loop and sends those of one loop turn together.

    ``redis`` is a ``redis.asyncio.Redis`` or ``redis.asyncio.RedisCluster`` client bound
    to that loop. ``batches`` and ``calls`` count what was sent (``calls / batches`` is
    the mean batch size)."""

    def __init__(self, redis_client: Any) -> None:
        self.redis = redis_client
        self.cluster = isinstance(redis_client, redis.asyncio.cluster.RedisCluster)
        """True for a Redis Cluster client: a batch is split by node."""
        self.batches = 0
        """Pipelines (or lone ``EVALSHA``s) sent so far."""
        self.calls = 0
        """Script calls sent so far."""
        self._queue: list[tuple[Call, asyncio.Future[Any]]] | None = None
        """Calls queued in this loop turn behind the turn's first (None: no first yet)."""
        self._loop: asyncio.AbstractEventLoop | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self._direct = not self.cluster and _packs_direct(redis_client)
        """True: commands are packed by hiredis and written to a pooled connection."""

    async def call(self, sha: str, source: str, keys: Sequence[Any],
                   args: Sequence[Any]) -> Any:
        """Run one script call (``EVALSHA sha``, ``EVAL source`` after ``NOSCRIPT``) in the
        batch of this event-loop turn; returns the script's reply unchanged, or raises its
        error (a ``ResponseError`` of the script, or the client's ``ConnectionError``/
        ``TimeoutError`` when the batch's connection failed).

        The turn's first call yields to the loop once (``asyncio.sleep(0)``), then sends
        alone if no other call came (a plain ``EVALSHA`` from its own task), else hands
        the batch to a task of its own, so that cancelling one caller never cancels the
        others' calls."""
        loop = asyncio.get_running_loop()
        if loop is not self._loop:  # a new loop: what an old one queued is gone with it
            self._loop, self._queue = loop, None
        call: Call = (sha, source, keys, args)
        if self._queue is not None:  # behind the turn's first call
            future: asyncio.Future[Any] = loop.create_future()
            self._queue.append((call, future))
            return await future
        self._queue = []
        try:
            await asyncio.sleep(0)  # let the other calls of this turn queue
        except BaseException:
            self._send_queued(None)  # cancelled: the others still go
            raise
        own = self._send_queued(call)
        if own is None:
            self.batches += 1
            self.calls += 1
            reply = await self._lone(call)
            if isinstance(reply, Exception):
                raise reply
            return reply
        return await own

    def _send_queued(self, first: Call | None) -> asyncio.Future[Any] | None:
        """Send the queued calls (and ``first``, ahead of them) in a task; returns
        ``first``'s future, or None when nothing was queued (``first`` is then the
        caller's to send)."""
        queued, self._queue = self._queue or [], None
        if not queued:
            return None
        own: asyncio.Future[Any] | None = None
        if first is not None:
            own = asyncio.get_running_loop().create_future()
            queued.insert(0, (first, own))
        task = asyncio.ensure_future(self._send(queued))
        self._tasks.add(task)  # keep a reference until it is done
        task.add_done_callback(self._tasks.discard)
        return own

    async def _send(self, batch: list[tuple[Call, asyncio.Future[Any]]]) -> None:
        self.batches += 1
        self.calls += len(batch)
        try:
            if len(batch) == 1:
                replies = [await self._lone(batch[0][0])]
            else:
                replies = await self._pipelined([call for call, _ in batch])
        except BaseException as exc:  # the batch's connection failed: every call fails
            for _, future in batch:
                if future.done():
                    continue
                if isinstance(exc, Exception):
                    future.set_exception(exc)
                else:  # cancelled (the loop is shutting down): so are its callers
                    future.cancel()
            if not isinstance(exc, Exception):
                raise
            return
        for (_, future), reply in zip(batch, replies):
            if future.done():  # its caller was cancelled
                continue
            if isinstance(reply, Exception):
                future.set_exception(reply)
            else:
                future.set_result(reply)

    async def _lone(self, call: Call) -> Any:
        sha, source, keys, args = call
        if self._direct:
            (reply,) = await self._exchange([("EVALSHA", sha, len(keys), *keys, *args)])
            if isinstance(reply, redis.exceptions.NoScriptError):
                (reply,) = await self._exchange([("EVAL", source, len(keys), *keys, *args)])
            return reply
        try:
            try:
                return await self.redis.evalsha(sha, len(keys), *keys, *args)
            except redis.exceptions.NoScriptError:
                return await self.redis.eval(source, len(keys), *keys, *args)
        except redis.exceptions.ResponseError as exc:  # the script's own error
            return exc

    async def _pipelined(self, calls: list[Call]) -> list[Any]:
        if self.cluster:
            return await self._per_node(calls)
        return await self._one_pipeline(calls)

    async def _per_node(self, calls: list[Call]) -> list[Any]:
        """A cluster pipeline per node owning calls of the batch; a node's failure is
        the reply of each of its calls."""
        groups: dict[Any, list[int]] = {}
        try:
            for i, (_, _, keys, _) in enumerate(calls):
                node = self.redis.get_node_from_key(keys[0]) if keys else None
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

    async def _one_pipeline(self, calls: list[Call]) -> list[Any]:
        replies = await self._pipeline(
            [("EVALSHA", sha, len(keys), *keys, *args) for sha, _, keys, args in calls])
        again = [i for i, r in enumerate(replies) if isinstance(r, redis.exceptions.NoScriptError)]
        if again:
            resent = await self._pipeline(
                [("EVAL", calls[i][1], len(calls[i][2]), *calls[i][2], *calls[i][3])
                 for i in again])
            for i, reply in zip(again, resent):
                replies[i] = reply
        return replies

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
        pool = self.redis.connection_pool
        conn = await pool.get_connection()
        try:
            return await conn.retry.call_with_retry(
                lambda: _send_read(conn, packed, len(commands)),
                lambda _error: conn.disconnect())  # type: ignore[no-any-return]
        finally:
            await pool.release(conn)


async def _send_read(conn: Any, packed: bytes, n: int) -> list[Any]:
    """One write of ``packed`` (``n`` commands) on ``conn``, then its ``n`` replies.

    On a connected connection without health checks the bytes go straight to its stream
    writer (waiting, under the socket timeout, only when the transport buffers them):
    redis-py's ``send_packed_command`` runs every write in a task of its own
    (``asyncio.wait_for``), one more event-loop turn per call."""
    try:
        writer = getattr(conn, "_writer", None)
        if writer is None or conn.health_check_interval or not conn.is_connected:
            await conn.send_packed_command(packed)
        else:
            _write(conn, writer, packed)
            if writer.transport.get_write_buffer_size():
                await _drain(conn, writer)
        replies: list[Any] = []
        for _ in range(n):
            try:
                replies.append(await conn.read_response())
            except redis.exceptions.ResponseError as exc:
                replies.append(exc)
        return replies
    except BaseException:
        await conn.disconnect(nowait=True)  # replies may be left unread: never reuse it
        raise


def _write(conn: Any, writer: Any, packed: bytes) -> None:
    try:
        writer.write(packed)
    except OSError as exc:
        raise redis.exceptions.ConnectionError(f"Error while writing to socket: {exc}") from exc


async def _drain(conn: Any, writer: Any) -> None:
    """Wait until the transport took the buffered bytes (rare: a large batch), within the
    connection's socket timeout."""
    try:
        await asyncio.wait_for(writer.drain(), conn.socket_timeout or None)
    except asyncio.TimeoutError:
        raise redis.exceptions.TimeoutError("Timeout writing to socket") from None
    except OSError as exc:
        raise redis.exceptions.ConnectionError(f"Error while writing to socket: {exc}") from exc


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
