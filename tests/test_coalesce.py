"""Auto-pipelining of script calls under asyncio (``coalesce.ScriptBatcher``): calls of
one event-loop turn share one pipeline, each keeps its own reply and error."""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from typing import Any

import pymongo
import pytest
import redis
import redis.asyncio
import redis.exceptions
from langgraph.checkpoint.base import empty_checkpoint

from langgraph_durable import DurableConfig, DurableSaver
from langgraph_durable.core.ops import Pipeline, Script
from langgraph_durable.errors import TierUnavailableError
from langgraph_durable.io import coalesce_sync, drivers, wire
from langgraph_durable.io.clients import redis_from_url
from langgraph_durable.io.coalesce import ScriptBatcher
from langgraph_durable.io.coalesce_sync import SyncScriptBatcher
from langgraph_durable.io.drivers import Clients, execute_async, execute_sync
from langgraph_durable.testing import unique_options
from langgraph_durable.testing.launchers import _free_port


class Packets:
    """Counts packets the asyncio redis-py connections send (one per command or pipeline),
    redis-py's or the batcher's own writes."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.sent = 0
        original = redis.asyncio.connection.AbstractConnection.send_packed_command

        async def counting(conn: Any, command: Any, check_health: bool = True) -> None:
            self.sent += 1
            await original(conn, command, check_health)

        monkeypatch.setattr(redis.asyncio.connection.AbstractConnection,
                            "send_packed_command", counting)
        direct = wire._write  # the batcher's own write to a connection's stream

        def counting_direct(conn: Any, writer: Any, packed: bytes) -> None:
            self.sent += 1
            direct(conn, writer, packed)

        monkeypatch.setattr(wire, "_write", counting_direct)


def _cfg(thread: str) -> dict[str, Any]:
    return {"configurable": {"thread_id": thread, "checkpoint_ns": ""}}


def _script(body: str) -> tuple[str, str]:
    """A Lua script no server has seen (a unique comment), with its SHA1 digest."""
    import hashlib

    source = f"-- {uuid.uuid4().hex}\n{body}"
    return hashlib.sha1(source.encode()).hexdigest(), source


def _async_clients(saver: DurableSaver) -> Clients:
    clients = saver.runtime.clients.for_running_loop()
    assert clients is not None
    return clients


async def _puts_of_many_threads(redis_client: Any, mongo_url: str, threads: int,
                                monkeypatch: pytest.MonkeyPatch) -> tuple[int, Clients]:
    m = pymongo.AsyncMongoClient(mongo_url)
    saver = DurableSaver(redis_client, m, **unique_options(flusher="off"))
    await saver.asetup()
    clients = _async_clients(saver)
    counted = clients.batcher()
    counted.batches = counted.calls = 0  # the set-up's scripts (thread registry) not counted
    packets = Packets(monkeypatch)
    cps = [empty_checkpoint() for _ in range(threads)]
    done = await asyncio.gather(*(saver.aput(_cfg(f"t{i}"), cp, {"step": i}, {})
                                  for i, cp in enumerate(cps)))
    sent = packets.sent
    monkeypatch.undo()
    for i, cp in enumerate(cps):
        got = await saver.aget_tuple(_cfg(f"t{i}"))
        assert got is not None and got.checkpoint["id"] == cp["id"]
        assert got.metadata["step"] == i
        assert done[i]["configurable"]["checkpoint_id"] == cp["id"]
    await saver.aclose()
    await m.close()
    return sent, clients


async def test_puts_of_twenty_threads_in_one_loop_turn_are_one_redis_packet(
        redis_url: str, mongo_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    r = redis.asyncio.Redis.from_url(redis_url)
    sent, clients = await _puts_of_many_threads(r, mongo_url, 20, monkeypatch)
    assert sent == 1
    # the puts, the reads above, then aclose's read of the outbox length (XLEN)
    assert clients.batcher().calls == 20 + 20 + 1
    await r.aclose()


async def test_puts_of_threads_on_every_cluster_node_keep_their_own_replies(
        redis_cluster_url: str, mongo_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    r = redis_from_url(redis_cluster_url, DurableConfig(), asyncio=True)
    sent, clients = await _puts_of_many_threads(r, mongo_url, 12, monkeypatch)
    nodes = len(r.get_primaries())
    assert nodes == 3
    assert sent <= nodes  # one pipeline per node that owns one of the threads
    await r.aclose()


async def test_a_lone_async_put_is_one_evalsha_without_a_pipeline(
        redis_url: str, mongo_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    r = redis.asyncio.Redis.from_url(redis_url)
    sent, clients = await _puts_of_many_threads(r, mongo_url, 1, monkeypatch)
    assert sent == 1
    assert (clients.batcher().batches, clients.batcher().calls) == (3, 3)  # and aclose's XLEN
    await r.aclose()


async def test_a_failing_script_in_a_batch_fails_only_its_own_call(redis_url: str) -> None:
    r = redis.asyncio.Redis.from_url(redis_url)
    batcher = ScriptBatcher(r)
    ok_sha, ok = _script("return ARGV[1]")
    bad_sha, bad = _script("return redis.error_reply('refused: ' .. ARGV[1])")
    calls = [batcher.call(ok_sha, ok, [], ["a"]), batcher.call(bad_sha, bad, [], ["b"]),
             batcher.call(ok_sha, ok, [], ["c"])]
    got = await asyncio.gather(*calls, return_exceptions=True)
    assert got[0] == b"a" and got[2] == b"c"
    assert isinstance(got[1], redis.exceptions.ResponseError)
    assert str(got[1]) == "refused: b"
    assert (batcher.batches, batcher.calls) == (1, 3)
    await r.aclose()


async def test_scripts_the_server_has_not_cached_are_sent_again_with_their_source(
        redis_url: str) -> None:
    r = redis.asyncio.Redis.from_url(redis_url)
    key = f"lgd-test-coalesce-{uuid.uuid4().hex}"
    batcher = ScriptBatcher(r)
    sha, source = _script("return redis.call('INCR', KEYS[1])")
    got = await asyncio.gather(*(batcher.call(sha, source, [key], []) for _ in range(4)))
    assert sorted(got) == [1, 2, 3, 4]  # NOSCRIPT ran nothing: each script ran once
    assert await batcher.call(sha, source, [key], []) == 5  # lone, now cached
    await r.delete(key)
    await r.aclose()


async def test_a_lost_connection_fails_every_call_of_its_batch_as_tier_unavailable() -> None:
    r = redis.asyncio.Redis(port=_free_port(), socket_connect_timeout=1, retry=None)
    sha, source = _script("return 1")
    observed: list[tuple[str, bool]] = []
    clients = Clients(redis=r, db=None, scripts={"probe": source}, redis_name="down:1",
                      observer=lambda op, seconds, ok: observed.append((op.name, ok)))
    got = await asyncio.gather(*(execute_async(Script("probe", [f"k{i}"], []), clients)
                                 for i in range(3)), return_exceptions=True)
    assert [type(g) for g in got] == [TierUnavailableError] * 3
    assert all(str(g).startswith("Redis down:1 did not answer (probe)") for g in got)
    assert observed == [("probe", False)] * 3  # each failed call timed as failed
    assert (clients.batcher().batches, clients.batcher().calls) == (1, 3)
    await r.aclose()


async def test_a_plan_run_again_goes_through_a_hook_on_execute_async_set_since(
        redis_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    # the fault children hook drivers.execute_async(op, clients) (faults/store_child.py):
    # run_async's step, made once per clients, must look it up at each call
    r = redis.asyncio.Redis.from_url(redis_url)
    sha, source = _script("return 7")
    clients = Clients(redis=r, db=None, scripts={"seven": source})

    def plan() -> Any:
        return (yield Script("seven", [f"lgd-test-coalesce-{uuid.uuid4().hex}"], []))

    assert await drivers.run_async(plan(), clients) == 7  # its first use makes the step
    seen: list[str] = []
    original = drivers.execute_async

    async def hooked(op: Any, c: Any) -> Any:
        seen.append(op.name)
        return await original(op, c)

    monkeypatch.setattr(drivers, "execute_async", hooked)
    assert await drivers.run_async(plan(), clients) == 7
    assert seen == ["seven"]
    await r.aclose()


async def test_cancelling_the_first_call_of_a_turn_still_sends_the_others(
        redis_url: str) -> None:
    r = redis.asyncio.Redis.from_url(redis_url)
    key = f"lgd-test-coalesce-{uuid.uuid4().hex}"
    batcher = ScriptBatcher(r)
    sha, source = _script("return redis.call('INCR', KEYS[1])")
    tasks = [asyncio.ensure_future(batcher.call(sha, source, [key], [])) for _ in range(3)]
    await asyncio.sleep(0)  # the first call now yields in its loop turn, the others queued
    tasks[0].cancel()
    got = await asyncio.gather(*tasks, return_exceptions=True)
    assert isinstance(got[0], asyncio.CancelledError)
    assert sorted(got[1:]) == [1, 2]
    assert await r.get(key) == b"2"  # the cancelled call never ran
    await r.delete(key)
    await r.aclose()


async def test_a_fresh_cluster_client_sends_its_first_batch_to_every_node_it_names(
        redis_cluster_url: str) -> None:
    r = redis_from_url(redis_cluster_url, DurableConfig(), asyncio=True)  # no slot map yet
    batcher = ScriptBatcher(r)
    sha, source = _script("return redis.call('INCR', KEYS[1])")
    keys = [f"{{lgd-test-coalesce-{uuid.uuid4().hex}}}:n" for _ in range(9)]
    got = await asyncio.gather(*(batcher.call(sha, source, [k], []) for k in keys))
    assert got == [1] * 9
    assert len({r.get_node_from_key(k).name for k in keys}) > 1  # the batch crossed nodes
    assert await asyncio.gather(*(batcher.call(sha, source, [k], []) for k in keys)) == [2] * 9
    for k in keys:
        await r.delete(k)
    await r.aclose()


async def test_calls_after_a_failing_script_on_a_one_connection_pool_get_their_own_replies(
        redis_url: str) -> None:
    pool = redis.asyncio.BlockingConnectionPool.from_url(redis_url, max_connections=1)
    r = redis.asyncio.Redis(connection_pool=pool)
    batcher = ScriptBatcher(r)
    assert batcher._direct  # packed by hiredis, written to the pool's connection
    ok_sha, ok = _script("return ARGV[1]")
    bad_sha, bad = _script("return redis.error_reply('refused: ' .. ARGV[1])")
    with pytest.raises(redis.exceptions.ResponseError, match="^refused: x$"):
        await batcher.call(bad_sha, bad, [], ["x"])
    assert await batcher.call(ok_sha, ok, [], ["after"]) == b"after"
    got = await asyncio.gather(batcher.call(bad_sha, bad, [], ["y"]),
                               batcher.call(ok_sha, ok, [], ["z"]), return_exceptions=True)
    assert str(got[0]) == "refused: y" and got[1] == b"z"
    assert await r.execute_command("ECHO", "clean") == b"clean"  # nothing left unread
    await r.aclose()


async def test_a_single_connection_client_is_sent_through_redis_py_with_the_same_replies(
        redis_url: str) -> None:
    r = redis.asyncio.Redis.from_url(redis_url, single_connection_client=True,
                                     decode_responses=True)
    batcher = ScriptBatcher(r)
    assert not batcher._direct
    sha, source = _script("return ARGV[1]")
    got = await asyncio.gather(*(batcher.call(sha, source, [], [f"v{i}"]) for i in range(3)))
    assert got == ["v0", "v1", "v2"]
    assert await batcher.call(sha, source, [], ["lone"]) == "lone"
    await r.aclose()


async def test_a_call_larger_than_the_socket_buffer_is_written_whole(redis_url: str) -> None:
    r = redis.asyncio.Redis.from_url(redis_url, socket_timeout=30)
    batcher = ScriptBatcher(r)
    sha, source = _script("return string.len(ARGV[1])")
    big = b"v" * (16 * 1024 * 1024)  # far above a socket's send buffer: the write waits
    got = await asyncio.gather(batcher.call(sha, source, [], [big]),
                               batcher.call(sha, source, [], [b"small"]))
    assert got == [len(big), 5]
    assert await batcher.call(sha, source, [], [big]) == len(big)  # lone
    await r.aclose()


async def test_shared_reads_and_scripts_of_one_turn_are_one_packet_each_with_its_replies(
        redis_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    r = redis.asyncio.Redis.from_url(redis_url)
    h, s = f"lgd-test-coalesce-{uuid.uuid4().hex}", f"lgd-test-coalesce-{uuid.uuid4().hex}"
    await r.hset(h, mapping={"a": "1", "b": "2"})
    await r.set(s, "text")
    sha, source = _script("return ARGV[1]")
    await r.script_load(source)
    clients = Clients(redis=r, db=None, scripts={"probe": source})
    packets = Packets(monkeypatch)
    got = await asyncio.gather(
        execute_async(Pipeline([["HGETALL", h], ["HMGET", h, "a", "zz"]]), clients),
        execute_async(Script("probe", [], ["x"]), clients),
        execute_async(Pipeline([["GET", s], ["HGET", s, "f"]], raise_on_error=False),
                      clients),
        execute_async(Pipeline([["HGET", s, "f"]]), clients),  # WRONGTYPE: raised
        return_exceptions=True)
    assert packets.sent == 1
    assert got[0] == [{b"a": b"1", b"b": b"2"}, [b"1", None]]
    assert got[1] == b"x"
    assert got[2][0] == b"text" and isinstance(got[2][1], redis.exceptions.ResponseError)
    assert isinstance(got[3], redis.exceptions.ResponseError)
    assert "WRONGTYPE" in str(got[3])
    assert (clients.batcher().batches, clients.batcher().calls) == (1, 4)
    await r.delete(h, s)
    await r.aclose()


async def test_a_pipeline_of_other_commands_is_sent_on_its_own(redis_url: str) -> None:
    r = redis.asyncio.Redis.from_url(redis_url)
    key = f"lgd-test-coalesce-{uuid.uuid4().hex}"
    sha, source = _script("return ARGV[1]")
    clients = Clients(redis=r, db=None, scripts={"probe": source})
    got = await asyncio.gather(execute_async(Pipeline([["GET", key], ["TYPE", key]]), clients),
                               execute_async(Script("probe", [], ["x"]), clients))
    assert got == [[None, b"none"], b"x"]
    assert clients.batcher().calls == 1  # TYPE is not a shared read: not in the batch
    await r.aclose()


async def test_calls_in_the_backlog_behind_a_batch_redis_does_not_answer_fail_unsent() -> None:
    # the asyncio twin of the sync case below: Redis stopped while the only batch the
    # wire may hold (max_in_flight 1) is on it; the call waiting in the backlog fails with
    # that batch's TimeoutError without being sent; the batcher is usable after
    import os
    import signal

    from langgraph_durable.testing import redis_server

    with redis_server() as rs:
        r = redis.asyncio.Redis.from_url(rs.url, socket_timeout=2.0)
        batcher = ScriptBatcher(r, max_in_flight=1)
        sha, source = _script("return ARGV[1]")
        assert await batcher.call(sha, source, [], ["before"]) == b"before"
        pid = rs._proc.pid if rs._proc else None
        assert pid is not None
        in_backlog = asyncio.Event()
        real_lone = batcher._lone

        async def lone(call: Any) -> Any:
            # the first call is sent (its 2 s socket timeout starts) only once the second
            # is in the backlog behind it, however long a loaded machine takes to get there
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(in_backlog.wait(), 10)
            return await real_lone(call)

        batcher._lone = lone  # type: ignore[method-assign]
        os.kill(pid, signal.SIGSTOP)
        try:
            first = asyncio.ensure_future(batcher.call(sha, source, [], ["first"]))
            while batcher.in_flight == 0:
                await asyncio.sleep(0.001)
            backlog = asyncio.ensure_future(batcher.call(sha, source, [], ["backlog"]))
            while not batcher._backlog:
                await asyncio.sleep(0.001)
            in_backlog.set()
            got = await asyncio.gather(first, backlog, return_exceptions=True)
        finally:
            os.kill(pid, signal.SIGCONT)
        assert isinstance(got[0], redis.exceptions.TimeoutError)
        assert got[1] is got[0]
        assert (batcher.batches, batcher.calls) == (2, 2)  # the backlog was not sent
        assert batcher.in_flight == 0 and not batcher._backlog
        assert await batcher.call(sha, source, [], ["after"]) == b"after"
        await r.aclose()


async def test_a_burst_holds_at_most_max_in_flight_connections_and_never_waits_for_the_pool(
        redis_url: str) -> None:
    """300 tasks x 10 calls each, paced differently so that calls keep arriving while a
    batch is on the wire, on a pool of 2 connections whose wait gives up at once: the
    batcher (at most 1 batch on the wire: half the pool) sends them all, each once."""
    pool = redis.asyncio.BlockingConnectionPool.from_url(redis_url, max_connections=2,
                                                         timeout=0.001)
    r = redis.asyncio.Redis(connection_pool=pool)
    key = f"lgd-test-coalesce-{uuid.uuid4().hex}"
    batcher = ScriptBatcher(r)
    assert batcher.max_in_flight == 1
    sha, source = _script("return redis.call('INCR', KEYS[1])")

    async def task(i: int) -> list[Any]:
        got = []
        for _ in range(10):
            for _ in range(i % 4):
                await asyncio.sleep(0)
            got.append(await batcher.call(sha, source, [key], []))
            got.append(await batcher.commands([["GET", key]]))
        return got

    done = await asyncio.gather(*(task(i) for i in range(300)))
    counts = sorted(v for got in done for v in got[::2])
    assert counts == list(range(1, 3001))  # every call ran once
    assert all(int(v[0]) >= 1 for got in done for v in got[1::2])
    assert batcher.calls == 6000 and batcher.peak_in_flight == 1
    await r.delete(key)
    await r.aclose()


async def test_asyncio_calls_on_a_pool_of_eight_keep_one_connection_reopened_when_lost(
        redis_url: str) -> None:
    """The client's retry is off, so the call after the server closed the kept connection
    succeeds only because the batcher checks it before sending, as the pool would."""
    from redis.asyncio.retry import Retry
    from redis.backoff import NoBackoff

    pool = redis.asyncio.BlockingConnectionPool.from_url(
        redis_url, max_connections=8, retry=Retry(NoBackoff(), 0))
    r = redis.asyncio.Redis(connection_pool=pool)
    batcher = ScriptBatcher(r)
    sha, source = _script("return ARGV[1]")
    assert [await batcher.call(sha, source, [], [str(i)]) for i in range(20)] == [
        str(i).encode() for i in range(20)]
    got = await asyncio.gather(*(batcher.call(sha, source, [], [f"b{i}"]) for i in range(5)))
    assert got == [f"b{i}".encode() for i in range(5)]  # a pipelined batch uses it too
    (held,) = batcher.kept.idle
    assert set(pool._in_use_connections) == {held}  # taken once, kept
    await held.send_command("CLIENT", "ID")
    async with redis.asyncio.Redis.from_url(redis_url) as other:  # the server closes it
        await other.client_kill_filter(_id=await held.read_response())
    for _ in range(500):  # let the loop see the closed socket (a bounded wait)
        if held._reader is None or held._reader.at_eof():
            break
        await asyncio.sleep(0.01)
    assert await batcher.call(sha, source, [], ["again"]) == b"again"  # reopened first
    assert batcher.kept.idle == [held] and set(pool._in_use_connections) == {held}
    with pytest.raises(redis.exceptions.ResponseError, match="^refused$"):
        await batcher.call(*_script("return redis.error_reply('refused')"), [], [])
    assert batcher.kept.idle == [held]  # a script's error reply is an answer: still kept
    await batcher.release()
    assert batcher.kept.idle == [] and not pool._in_use_connections
    assert held in pool._available_connections
    assert await batcher.call(sha, source, [], ["x"]) == b"x"
    assert batcher.kept.idle == [] and not pool._in_use_connections  # none kept any more
    small = redis.asyncio.BlockingConnectionPool.from_url(redis_url, max_connections=4)
    lone = ScriptBatcher(redis.asyncio.Redis(connection_pool=small))
    assert await lone.call(sha, source, [], ["x"]) == b"x"
    assert lone.kept.idle == [] and len(small._available_connections) == 1  # given back
    await r.aclose()
    await small.disconnect()


async def test_asyncio_batches_on_the_wire_together_keep_one_connection_per_eight_pooled(
        redis_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Six slow calls sent in six loop turns are six batches on the wire at once; a pool
    of 32 lets the batcher keep four of their connections (one per eight). Kept ones no
    batch used for ``IDLE_RELEASE_S`` go back to the pool."""
    from langgraph_durable.io import kept

    monkeypatch.setattr(kept, "IDLE_RELEASE_S", 600.0)  # not while the batches run
    pool = redis.asyncio.BlockingConnectionPool.from_url(redis_url, max_connections=32)
    r = redis.asyncio.Redis(connection_pool=pool)
    batcher = ScriptBatcher(r)
    assert (batcher.max_in_flight, batcher.kept.limit) == (16, 4)
    slow_sha, slow = _script("local t = 0 for i = 1, 3000000 do t = t + i end return ARGV[1]")

    async def paced(i: int) -> Any:  # one call a loop turn: each while the others run
        for _ in range(i):
            await asyncio.sleep(0)
        return await batcher.call(slow_sha, slow, [], [f"p{i}"])

    assert await asyncio.gather(*(paced(i) for i in range(6))) == [
        f"p{i}".encode() for i in range(6)]
    assert batcher.peak_in_flight >= 4 and len(batcher.kept.idle) == 4  # (6 unless slowed)
    assert set(pool._in_use_connections) == set(batcher.kept.idle)
    await batcher.release()
    monkeypatch.setattr(kept, "IDLE_RELEASE_S", 0.05)
    batcher = ScriptBatcher(r)
    sha, source = _script("return ARGV[1]")
    assert await batcher.call(sha, source, [], ["kept"]) == b"kept"
    assert len(batcher.kept.idle) == 1 and len(pool._in_use_connections) == 1
    for _ in range(1000):  # unused: given back (a bounded wait)
        if not pool._in_use_connections:
            break
        await asyncio.sleep(0.01)
    assert batcher.kept.idle == [] and not pool._in_use_connections
    assert await batcher.call(sha, source, [], ["again"]) == b"again"  # and kept anew
    assert len(batcher.kept.idle) == 1
    await r.aclose()


async def test_a_saver_on_given_clients_gives_its_kept_connections_back_when_closed(
        redis_url: str, mongo_url: str) -> None:
    """The caller's pools are whole again once the saver is closed: nothing the batchers
    kept between calls stays taken from them."""
    apool = redis.asyncio.BlockingConnectionPool.from_url(redis_url, max_connections=16)
    spool = redis.BlockingConnectionPool.from_url(redis_url, max_connections=16)
    ar, r = redis.asyncio.Redis(connection_pool=apool), redis.Redis(connection_pool=spool)
    am, m = pymongo.AsyncMongoClient(mongo_url), pymongo.MongoClient(mongo_url)
    saver = DurableSaver(r, m, async_redis=ar, async_mongo=am, **unique_options())
    async with saver:
        await saver.aput(_cfg("a"), empty_checkpoint(), {"step": 1}, {})
        await asyncio.to_thread(saver.put, _cfg("s"), empty_checkpoint(), {"step": 2}, {})
        assert _async_clients(saver).batcher().kept.idle
        assert saver.runtime.clients.sync is not None
        sync_batcher = saver.runtime.clients.sync.sync_batcher()
        assert sync_batcher is not None and sync_batcher._held is not None
    idle = [c for c in spool.pool.queue if c is not None]  # a blocking pool's idle ones
    assert not apool._in_use_connections and len(idle) == len(spool._connections) >= 1
    assert await ar.ping() and r.ping()  # the caller's clients still work
    await ar.aclose()
    r.close()
    await am.close()
    m.close()


async def test_a_saver_closed_by_its_sync_close_gives_back_its_asyncio_kept_connections(
        redis_url: str, mongo_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """``close()`` from a worker thread while the event loop owning the asyncio clients
    runs: their batcher's kept connections go back in that loop (not by idling: that
    would take a minute here)."""
    from langgraph_durable.io import kept

    monkeypatch.setattr(kept, "IDLE_RELEASE_S", 60.0)
    apool = redis.asyncio.BlockingConnectionPool.from_url(redis_url, max_connections=16)
    ar, r = redis.asyncio.Redis(connection_pool=apool), redis.Redis.from_url(redis_url)
    am, m = pymongo.AsyncMongoClient(mongo_url), pymongo.MongoClient(mongo_url)
    saver = DurableSaver(r, m, async_redis=ar, async_mongo=am, **unique_options())
    await saver.aput(_cfg("a"), empty_checkpoint(), {"step": 1}, {})
    assert _async_clients(saver).batcher().kept.idle and apool._in_use_connections
    await asyncio.to_thread(saver.close)
    for _ in range(500):  # given back by a callback of this loop (a bounded wait)
        if not apool._in_use_connections:
            break
        await asyncio.sleep(0.01)
    assert not apool._in_use_connections and await ar.ping()
    await ar.aclose()
    r.close()
    await am.close()
    m.close()


async def _close_while_calls_are_on_the_wire(saver: DurableSaver) -> None:
    """Close ``saver`` while 20 tasks and 4 threads keep calling it (until it refuses)."""
    import threading
    import time

    from langgraph_durable.errors import SaverClosedError

    await saver.asetup()
    done = [0]

    async def worker(k: int) -> None:
        while True:
            try:
                await saver.aput(_cfg(f"a{k}"), empty_checkpoint(), {"step": k}, {})
            except SaverClosedError:
                return
            done[0] += 1

    def sync_worker(k: int) -> None:
        while True:
            try:
                saver.put(_cfg(f"s{k}"), empty_checkpoint(), {"step": k}, {})
            except SaverClosedError:
                return
            done[0] += 1

    threads = [threading.Thread(target=sync_worker, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    tasks = [asyncio.ensure_future(worker(k)) for k in range(20)]
    deadline = time.monotonic() + 30
    while done[0] < 200:  # calls of both kinds on the wire (a bounded wait)
        assert time.monotonic() < deadline, f"only {done[0]} calls in 30 s"
        await asyncio.sleep(0.005)
    await saver.aclose()
    await asyncio.gather(*tasks)
    await asyncio.to_thread(lambda: [t.join(30) for t in threads])


async def test_a_saver_closed_while_calls_are_on_the_wire_leaves_the_callers_pools_whole(
        redis_url: str, mongo_url: str) -> None:
    """Calls of both APIs keep coming while the saver closes: a batch answered after the
    close gives its connection back instead of keeping it (one saver per tenant on one
    shared client would otherwise drain the caller's pool, a connection per saver)."""
    apool = redis.asyncio.BlockingConnectionPool.from_url(redis_url, max_connections=8)
    spool = redis.BlockingConnectionPool.from_url(redis_url, max_connections=8)
    ar, r = redis.asyncio.Redis(connection_pool=apool), redis.Redis(connection_pool=spool)
    am, m = pymongo.AsyncMongoClient(mongo_url), pymongo.MongoClient(mongo_url)
    for _ in range(3):
        await _close_while_calls_are_on_the_wire(DurableSaver(
            r, m, async_redis=ar, async_mongo=am, **unique_options(flusher="off")))
    idle = [c for c in spool.pool.queue if c is not None]
    assert not apool._in_use_connections and len(idle) == len(spool._connections)
    assert await ar.ping() and r.ping()
    await ar.aclose()
    r.close()
    await am.close()
    m.close()


async def test_shared_reads_are_refused_on_a_cluster_client(redis_cluster_url: str) -> None:
    r = redis_from_url(redis_cluster_url, DurableConfig(), asyncio=True)
    with pytest.raises(ValueError, match="not on a Redis Cluster"):
        await ScriptBatcher(r).commands([["GET", "k"]])
    await r.aclose()


# --------------------------------------------------------------------------- sync API


def _wait_until(check: Any, what: str, timeout_s: float = 10.0) -> None:
    """Poll ``check()`` until true (event-driven enough for threads queueing), bounded."""
    import time

    deadline = time.monotonic() + timeout_s
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.001)


def _queued_behind_a_batch_in_flight(batcher: SyncScriptBatcher, calls: list[Any]) -> list[Any]:
    """Run ``calls`` (argument tuples of ``batcher.call``) in threads while a batch is
    taken to be on the wire, then let it be answered: they go as the next batch."""
    import threading

    with batcher._lock:
        batcher._busy = True  # a batch on the wire: every call now queues behind it
    got: list[Any] = [None] * len(calls)

    def one(i: int) -> None:
        try:
            got[i] = batcher.call(*calls[i])
        except Exception as exc:
            got[i] = exc

    threads = [threading.Thread(target=one, args=(i,)) for i in range(len(calls))]
    for t in threads:
        t.start()
    _wait_until(lambda: len(batcher._queue) == len(calls), "the calls to queue")
    batcher._send_queued()  # the batch in flight (none) answered: hand over to the queue
    for t in threads:
        t.join(10)
    return got


def test_sync_calls_queued_behind_a_batch_in_flight_go_as_one_pipeline_with_own_replies(
        redis_url: str) -> None:
    r = redis.Redis.from_url(redis_url)
    batcher = SyncScriptBatcher(r)
    key = f"lgd-test-coalesce-{uuid.uuid4().hex}"
    ok_sha, ok = _script("return ARGV[1]")
    bad_sha, bad = _script("return redis.error_reply('refused: ' .. ARGV[1])")
    inc_sha, inc = _script("return redis.call('INCR', KEYS[1])")
    calls = [(ok_sha, ok, [], [f"v{i}"]) for i in range(4)]
    calls += [(bad_sha, bad, [], ["b"]), (inc_sha, inc, [key], []), (inc_sha, inc, [key], [])]
    got = _queued_behind_a_batch_in_flight(batcher, calls)
    assert got[:4] == [b"v0", b"v1", b"v2", b"v3"]
    assert isinstance(got[4], redis.exceptions.ResponseError) and str(got[4]) == "refused: b"
    assert sorted(got[5:]) == [1, 2]  # NOSCRIPT ran nothing: each ran once, sent again
    # one handed-over batch: the pipeline, and its NOSCRIPT calls sent again as EVAL
    assert (batcher.batches, batcher.calls) == (1, 7)
    assert not batcher._busy and batcher.call(ok_sha, ok, [], ["lone"]) == b"lone"
    assert (batcher.batches, batcher.calls) == (2, 8)
    r.delete(key)
    r.close()


def test_sync_calls_queued_behind_a_batch_redis_does_not_answer_fail_unsent() -> None:
    # Redis stopped (SIGSTOP: connections open, nothing answers) while a call is on the
    # wire: the call queued behind it fails with the same TimeoutError without being
    # sent (it would wait a whole socket timeout more), and the batcher is usable after
    import os
    import signal
    import threading

    from langgraph_durable.testing import redis_server

    with redis_server() as rs:
        r = redis.Redis.from_url(rs.url, socket_timeout=2.0)
        batcher = SyncScriptBatcher(r)
        sha, source = _script("return ARGV[1]")
        assert batcher.call(sha, source, [], ["before"]) == b"before"
        assert (batcher.batches, batcher.calls) == (1, 1)
        pid = rs._proc.pid if rs._proc else None
        assert pid is not None
        got: dict[str, Any] = {}

        def one(name: str) -> None:
            try:
                got[name] = batcher.call(sha, source, [], [name])
            except Exception as exc:
                got[name] = exc

        in_queue = threading.Event()
        real_exchange = batcher._exchange

        def exchange(commands: Any) -> Any:
            # the first call is sent (its 2 s socket timeout starts) only once the second
            # is queued behind it, however long a loaded machine takes to get there
            in_queue.wait(10)
            return real_exchange(commands)

        batcher._exchange = exchange  # type: ignore[method-assign]
        os.kill(pid, signal.SIGSTOP)
        try:
            first = threading.Thread(target=one, args=("first",))
            first.start()
            _wait_until(lambda: batcher._busy, "the first call to be on the wire")
            queued = threading.Thread(target=one, args=("queued",))
            queued.start()
            _wait_until(lambda: len(batcher._queue) == 1, "the second call to queue")
            in_queue.set()
            first.join(10)
            queued.join(10)
        finally:
            os.kill(pid, signal.SIGCONT)
        assert isinstance(got["first"], redis.exceptions.TimeoutError)
        assert got["queued"] is got["first"]
        assert (batcher.batches, batcher.calls) == (2, 2)  # the queued call was not sent
        assert not batcher._busy
        assert batcher.call(sha, source, [], ["after"]) == b"after"
        r.close()


def test_sync_puts_of_threads_at_once_are_each_stored_and_a_lost_connection_fails_them(
        redis_url: str, mongo_url: str) -> None:
    from concurrent.futures import ThreadPoolExecutor

    with DurableSaver.from_urls(redis_url, mongo_url, **unique_options(flusher="off")) as s:
        cps = [empty_checkpoint() for _ in range(16)]
        with ThreadPoolExecutor(16) as pool:
            done = list(pool.map(lambda i: s.put(_cfg(f"t{i}"), cps[i], {"step": i}, {}),
                                 range(16)))
        for i, cp in enumerate(cps):
            assert done[i]["configurable"]["checkpoint_id"] == cp["id"]
            got = s.get_tuple(_cfg(f"t{i}"))
            assert got is not None and got.checkpoint["id"] == cp["id"]
            assert got.metadata["step"] == i
        batcher = s.sync_clients.sync_batcher()
        assert batcher is not None and batcher.calls >= 16
    down = redis.Redis(port=_free_port(), socket_connect_timeout=1, retry=None)
    sha, source = _script("return 1")
    clients = Clients(redis=down, db=None, scripts={"probe": source}, redis_name="down:2")
    with pytest.raises(TierUnavailableError, match=r"^Redis down:2 did not answer \(probe\)"):
        execute_sync(Script("probe", ["k"], []), clients)
    down.close()


def test_a_forked_child_sends_its_calls_though_a_parent_batch_was_on_the_wire(
        redis_url: str) -> None:
    import os

    r = redis.Redis.from_url(redis_url)
    batcher = SyncScriptBatcher(r)
    sha, source = _script("return ARGV[1]")
    assert batcher.call(sha, source, [], ["parent"]) == b"parent"
    with batcher._lock:
        batcher._busy = True  # a parent thread's batch on the wire at the fork
    pid = os.fork()
    if pid == 0:  # the child: its call must not wait for the parent's batch
        try:
            ok = batcher.call(sha, source, [], ["child"]) == b"child"
        except BaseException:
            ok = False
        os._exit(0 if ok else 1)
    status: int | None = None

    def exited() -> bool:
        nonlocal status
        done, code = os.waitpid(pid, os.WNOHANG)
        if done == pid:
            status = code
        return done == pid

    try:
        _wait_until(exited, "the forked child to exit", timeout_s=20)
    finally:
        if status is None:  # still running: never leave it behind
            with contextlib.suppress(ProcessLookupError, ChildProcessError):
                os.kill(pid, 9)
                os.waitpid(pid, 0)
    assert status is not None and os.waitstatus_to_exitcode(status) == 0
    batcher._after_fork()
    r.close()


def test_sync_calls_are_packed_by_hiredis_on_a_pooled_client_and_by_redis_py_otherwise(
        redis_url: str) -> None:
    sha, source = _script("return {ARGV[1], tonumber(ARGV[2]) + 1}")
    bad_sha, bad = _script("return redis.error_reply('refused: ' .. ARGV[1])")
    for kwargs, direct in (({}, True), ({"decode_responses": True}, True),
                           ({"single_connection_client": True}, False)):
        r = redis.Redis.from_url(redis_url, **kwargs)
        batcher = SyncScriptBatcher(r)
        assert batcher._direct is direct, kwargs
        want = ["ok", 42] if kwargs.get("decode_responses") else [b"ok", 42]
        assert batcher.call(sha, source, [], ["ok", 41]) == want  # NOSCRIPT, then EVAL
        assert batcher.call(sha, source, [], ["ok", 41]) == want  # EVALSHA
        with pytest.raises(redis.exceptions.ResponseError, match="^refused: x$"):
            batcher.call(bad_sha, bad, [], ["x"])
        got = batcher._exchange([("EVALSHA", sha, 0, "a", 1), ("EVALSHA", bad_sha, 0, "y"),
                                 ("ECHO", "tail")])
        assert got[0] == (["a", 2] if kwargs.get("decode_responses") else [b"a", 2])
        assert isinstance(got[1], redis.exceptions.ResponseError) and str(got[1]) == "refused: y"
        assert got[2] in (b"tail", "tail")
        assert r.echo("clean") in (b"clean", "clean")  # nothing left unread on the pool
        r.close()


def test_sync_calls_on_a_pool_of_eight_keep_one_connection_reopened_when_lost(
        redis_url: str) -> None:
    pool = redis.BlockingConnectionPool.from_url(redis_url, max_connections=8)
    r = redis.Redis(connection_pool=pool)
    batcher = SyncScriptBatcher(r)
    sha, source = _script("return ARGV[1]")
    assert [batcher.call(sha, source, [], [str(i)]) for i in range(20)] == [
        str(i).encode() for i in range(20)]
    assert len(pool._connections) == 1  # taken once, kept by the batcher
    held = batcher._held
    held.send_command("CLIENT", "ID")
    with redis.Redis.from_url(redis_url) as other:  # the server closes the batcher's one
        other.client_kill_filter(_id=held.read_response())
    assert batcher.call(sha, source, [], ["again"]) == b"again"  # retried on a new one
    assert batcher._held is held and len(pool._connections) == 1
    small = redis.BlockingConnectionPool.from_url(redis_url, max_connections=4)
    batcher = SyncScriptBatcher(redis.Redis(connection_pool=small))
    assert batcher.call(sha, source, [], ["x"]) == b"x"
    assert batcher._held is None  # a small pool: each batch gives its connection back
    r.close()
    small.disconnect()


def test_a_sync_call_whose_reply_never_comes_closes_its_connection(redis_url: str) -> None:
    from redis.backoff import NoBackoff
    from redis.retry import Retry

    pool = redis.BlockingConnectionPool.from_url(redis_url, max_connections=1,
                                                 socket_timeout=0.3, retry=Retry(NoBackoff(), 0))
    key = f"lgd-test-coalesce-{uuid.uuid4().hex}"

    def socket_name() -> Any:
        conn = pool.get_connection()
        try:
            return conn._sock.getsockname()
        finally:
            pool.release(conn)

    before = socket_name()
    assert coalesce_sync._exchange_sync(pool, [("ECHO", "first")]) == [b"first"]
    assert socket_name() == before  # the connection is kept between calls
    with pytest.raises(redis.exceptions.TimeoutError):
        coalesce_sync._exchange_sync(pool, [("BLPOP", key, 5)])  # its reply would come later
    assert socket_name() != before  # closed: the late reply can never reach another call
    assert coalesce_sync._exchange_sync(pool, [("ECHO", "next"), ("LLEN", key)]) == [b"next", 0]
    pool.disconnect()


def test_a_sync_client_whose_class_overrides_execute_command_keeps_its_override(
        redis_url: str) -> None:
    seen: list[Any] = []

    class Traced(redis.Redis):  # e.g. a user's tracing or metrics subclass
        def execute_command(self, *args: Any, **options: Any) -> Any:
            seen.append(args[0])
            return super().execute_command(*args, **options)

    sha, source = _script("return tonumber(ARGV[1]) + 1")
    r = Traced.from_url(redis_url)
    batcher = SyncScriptBatcher(r)
    assert batcher.call(sha, source, [], [41]) == 42
    assert seen == ["EVALSHA", "EVAL"]  # NOSCRIPT, then EVAL: both through the override
    assert batcher.call(sha, source, [], [1]) == 2 and seen[-1] == "EVALSHA"
    assert batcher._direct is False
    r.close()


def test_a_sync_lone_call_is_retried_on_an_error_reply_the_client_retries(
        redis_url: str) -> None:
    from redis.backoff import NoBackoff
    from redis.retry import Retry

    key = f"lgd-test-coalesce-{uuid.uuid4().hex}"
    sha, source = _script("redis.call('INCR', KEYS[1]); return redis.error_reply('refused')")
    r = redis.Redis.from_url(redis_url, retry=Retry(NoBackoff(), 2),
                             retry_on_error=[redis.exceptions.ResponseError])
    try:
        batcher = SyncScriptBatcher(r)
        with pytest.raises(redis.exceptions.ResponseError, match="^refused$"):
            batcher.call(sha, source, [key], [])  # NOSCRIPT (retried too), then EVAL
        r.set(key, 0)
        with pytest.raises(redis.exceptions.ResponseError, match="^refused$"):
            batcher.call(sha, source, [key], [])
        assert r.get(key) == b"3"  # as redis-py retries a command: 1 + 2 retries
        assert batcher._direct is False
        replica_retrying = redis.Redis.from_url(
            redis_url, retry_on_error=[redis.exceptions.ReadOnlyError])
        assert SyncScriptBatcher(replica_retrying)._direct is False
        plain_retrying = redis.Redis.from_url(redis_url, retry=Retry(NoBackoff(), 2))
        assert SyncScriptBatcher(plain_retrying)._direct is True  # connection errors only
        replica_retrying.close()
        plain_retrying.close()
    finally:
        r.delete(key)
        r.close()


async def test_asyncio_calls_keep_a_client_override_and_its_error_reply_retries(
        redis_url: str) -> None:
    from redis.asyncio.retry import Retry
    from redis.backoff import NoBackoff

    seen: list[Any] = []

    class Traced(redis.asyncio.Redis):
        async def execute_command(self, *args: Any, **options: Any) -> Any:
            seen.append(args[0])
            return await super().execute_command(*args, **options)

    sha, source = _script("return tonumber(ARGV[1]) + 1")
    traced = Traced.from_url(redis_url)
    assert await ScriptBatcher(traced).call(sha, source, [], [41]) == 42
    assert seen == ["EVALSHA", "EVAL"]
    key = f"lgd-test-coalesce-{uuid.uuid4().hex}"
    bad_sha, bad = _script("redis.call('INCR', KEYS[1]); return redis.error_reply('refused')")
    r = redis.asyncio.Redis.from_url(redis_url, retry=Retry(NoBackoff(), 2),
                                     retry_on_error=[redis.exceptions.ResponseError])
    try:
        batcher = ScriptBatcher(r)
        with pytest.raises(redis.exceptions.ResponseError, match="^refused$"):
            await batcher.call(bad_sha, bad, [key], [])  # NOSCRIPT (retried too), then EVAL
        await r.set(key, 0)
        with pytest.raises(redis.exceptions.ResponseError, match="^refused$"):
            await batcher.call(bad_sha, bad, [key], [])
        assert await r.get(key) == b"3"  # 1 + 2 retries, as redis-py retries a command
        assert batcher._direct is False
    finally:
        await r.delete(key)
        await r.aclose()
        await traced.aclose()


async def test_a_put_waiting_in_a_batch_holds_one_frame_per_layer(
        redis_url: str, mongo_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """While two puts of one loop turn wait for their batch's reply, each holds exactly
    the saver's call, the runtime's ``arun``, the plan's driver, the plan and its send
    step, the batched script and the batcher's queue: a layer that only awaited the next
    one (``run_async``, ``execute_async``, ``ScriptBatcher.call``, ``ask``) is a frame more
    alive per call for Python's garbage collector to walk (docs/speed.md, "The garbage
    collector")."""
    import gc
    import types

    r = redis.asyncio.Redis.from_url(redis_url)
    m = pymongo.AsyncMongoClient(mongo_url)
    saver = DurableSaver(r, m, **unique_options(flusher="off"))
    await saver.asetup()
    held: list[str] = []
    direct = wire._write

    def seen_at_write(conn: Any, writer: Any, packed: bytes) -> None:
        if not held:
            for obj in gc.get_objects():
                if type(obj) is types.CoroutineType:
                    code, frame = obj.cr_code, obj.cr_frame
                elif type(obj) is types.GeneratorType:
                    code, frame = obj.gi_code, obj.gi_frame
                else:
                    continue
                if (frame is not None and "langgraph_durable" in code.co_filename
                        and "/testing/" not in code.co_filename):  # the test servers
                    held.append(f"{code.co_filename.rsplit('/', 1)[-1]}:{obj.__qualname__}")
        direct(conn, writer, packed)

    monkeypatch.setattr(wire, "_write", seen_at_write)
    await asyncio.gather(*(saver.aput(_cfg(f"t{i}"), empty_checkpoint(), {"step": i}, {})
                           for i in range(2)))
    monkeypatch.undo()
    callers = sorted(h for h in held if not h.startswith(("coalesce.py:ScriptBatcher._send",
                                                         "coalesce.py:ScriptBatcher._p",
                                                         "coalesce.py:ScriptBatcher._one",
                                                         "coalesce.py:ScriptBatcher._ex",
                                                         "wire.py:")))
    assert callers == sorted(2 * [
        "saver.py:DurableSaver.aput", "base.py:SaverRuntime.arun", "drive.py:adrive",
        "write.py:put_plan", "write.py:_send", "drivers.py:_batched_script",
        "coalesce.py:ScriptBatcher._submit"])
    await saver.aclose()
    await m.close()
    await r.aclose()
