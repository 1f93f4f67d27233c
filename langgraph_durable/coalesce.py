"""Auto-pipelining of Lua script calls under asyncio (the drivers room; used by
``drivers._exec_async``).

Many LangGraph threads driven by one event loop (``ainvoke``/``astream`` in an ASGI app)
call ``put``/``put_writes`` at nearly the same moment. Each call is one ``EVALSHA``; sent
one by one, each pays redis-py's command path (a connection from the pool, a socket write,
a read) on its own. ``ScriptBatcher`` queues the calls that arrive in the same turn of the
event loop and sends them as one pipeline (``transaction=False``: one write, one read,
no ``MULTI``), as ioredis' auto-pipelining does:

- each call is still its own atomic script, with its own reply or its own error;
- nobody waits for a batch to fill: the first call of a turn schedules the send with
  ``loop.call_soon``, so a lone call pays one event-loop hop, and calls that arrive while
  a batch is on the wire go in the next one (sent at once, on another connection);
- a ``NOSCRIPT`` reply (the server's script cache was flushed, or a node that has never
  seen the script) is answered by sending those calls again as ``EVAL`` with the source
  (``NOSCRIPT`` means the script did not run, so this never runs a script twice);
- a batch of one is sent as a plain ``EVALSHA`` (no pipeline object), and a lost
  connection fails every call of its batch with the client's error.

On a Redis Cluster, redis-py's cluster pipeline sends each node its own commands (a
script's keys share one hash tag, so each script goes whole to one node), keeps each
command's reply or error, and resends a ``MOVED``/``ASK``-redirected command on its own.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

import redis.exceptions

Call = tuple[str, str, Sequence[Any], Sequence[Any]]
"""One script call: ``(sha1 digest, Lua source, keys, args)``."""


class ScriptBatcher:
    """Queues script calls of one event loop and sends those of one loop turn together.

    ``redis`` is a ``redis.asyncio.Redis`` or ``redis.asyncio.RedisCluster`` client bound
    to that loop. ``batches`` and ``calls`` count what was sent (``calls / batches`` is
    the mean batch size)."""

    def __init__(self, redis_client: Any) -> None:
        self.redis = redis_client
        self.batches = 0
        """Pipelines (or lone ``EVALSHA``s) sent so far."""
        self.calls = 0
        """Script calls sent so far."""
        self._queue: list[tuple[Call, asyncio.Future[Any]]] = []
        self._loop: asyncio.AbstractEventLoop | None = None
        self._tasks: set[asyncio.Task[None]] = set()

    async def call(self, sha: str, source: str, keys: Sequence[Any],
                   args: Sequence[Any]) -> Any:
        """Run one script call (``EVALSHA sha``, ``EVAL source`` after ``NOSCRIPT``) in the
        next batch; returns the script's reply unchanged, or raises its error (a
        ``ResponseError`` of the script, or the client's ``ConnectionError``/
        ``TimeoutError`` when the batch's connection failed)."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[Any] = loop.create_future()
        if loop is not self._loop:  # a new loop: what an old one queued is gone with it
            self._loop, self._queue = loop, []
        self._queue.append(((sha, source, keys, args), future))
        if len(self._queue) == 1:
            loop.call_soon(self._send_queued)
        return await future

    def _send_queued(self) -> None:
        batch, self._queue = self._queue, []
        task = asyncio.ensure_future(self._send(batch))
        self._tasks.add(task)  # keep a reference until it is done
        task.add_done_callback(self._tasks.discard)

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
        try:
            try:
                return await self.redis.evalsha(sha, len(keys), *keys, *args)
            except redis.exceptions.NoScriptError:
                return await self.redis.eval(source, len(keys), *keys, *args)
        except redis.exceptions.ResponseError as exc:  # the script's own error
            return exc

    async def _pipelined(self, calls: list[Call]) -> list[Any]:
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
        pipe = self.redis.pipeline(transaction=False)
        for cmd in commands:
            pipe.execute_command(*cmd)
        return list(await pipe.execute(raise_on_error=False))
