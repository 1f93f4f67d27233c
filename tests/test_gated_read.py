"""A flusher with one outbox stream waits for new entries in ``XREADGROUP ... BLOCK``
(``flush_interval_s``); stopping it ends that wait with ``CLIENT UNBLOCK``
(``io/gated_read.py``), and never another connection's blocking command."""

from __future__ import annotations

import signal
import subprocess
import sys
import uuid
from concurrent.futures import ThreadPoolExecutor, wait

import pytest
import redis
from langgraph.checkpoint.base import empty_checkpoint

from langgraph_durable import DurableSaver
from langgraph_durable.core.ops import GatedRead, ReadGate
from langgraph_durable.hot.keys import CONSUMER_GROUP
from langgraph_durable.io.clients import make_clients
from langgraph_durable.io.drivers import execute_sync
from langgraph_durable.io.gated_read import unblock
from langgraph_durable.testing import unique_options, wait_for

from .saver_life import put_flush_wait_close

CFG = {"configurable": {"thread_id": "t", "checkpoint_ns": ""}}


def _consumers(r: redis.Redis, stream: str) -> list[bytes]:
    return [c["name"] for c in r.xinfo_consumers(stream, CONSUMER_GROUP)]


@pytest.mark.parametrize("api", ["sync", "async"])
def test_close_ends_the_blocking_read_of_a_single_stream_flusher(
        redis_url: str, mongo_url: str, redis_client: redis.Redis, api: str) -> None:
    # the read blocks up to 60 s; stop() waits 5 s for the flusher thread, so a read that
    # close() did not end would leave the thread running and the consumer in the group
    options = unique_options(flush_interval_s=60)
    saver = DurableSaver.from_urls(redis_url, mongo_url, **options)

    def blocked() -> bool:
        return saver.runtime.flusher._gate.client_id is not None

    put_flush_wait_close(saver, api, blocked, "the flusher's blocking read")
    flusher = saver.runtime.flusher
    assert (flusher.running, flusher.left_group, flusher.entries) == (False, True, 1)
    assert _consumers(redis_client, saver.context.outbox) == []


def test_sigterm_ends_a_single_stream_workers_blocking_read(
        redis_url: str, mongo_url: str, redis_client: redis.Redis) -> None:
    opts = unique_options(flusher="off")
    with DurableSaver.from_urls(redis_url, mongo_url, **opts) as saver:
        saver.put(CFG, empty_checkpoint(), {"step": 0}, {})
        outbox = saver.context.outbox
        worker = subprocess.Popen(
            [sys.executable, "-m", "langgraph_durable.outbox.worker", "--redis-url",
             redis_url, "--mongo-url", mongo_url, "--key-prefix", opts["key_prefix"],
             "--database", opts["database"], "--flush-interval-s", "60"],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            def blocked() -> bool:  # drained, and its consumer waits in XREADGROUP
                clients = redis_client.client_list()
                return redis_client.xlen(outbox) == 0 and any(
                    "b" in c["flags"] and c["cmd"] == "xreadgroup" for c in clients)
            wait_for(blocked, 30, "the worker's blocking read")
        finally:
            worker.send_signal(signal.SIGTERM)
            out, err = worker.communicate(timeout=20)  # the read blocks up to 60 s
        assert worker.returncode == 0, err
        assert "1 entries" in out
        assert _consumers(redis_client, outbox) == []


def test_unblock_ends_only_the_gated_read(redis_url: str, redis_client: redis.Redis) -> None:
    # another connection blocked on the same stream is left waiting; with no read
    # waiting, unblock sends nothing and says so
    stream = f"gated-{uuid.uuid4().hex}"
    redis_client.xgroup_create(stream, "g", id="$", mkstream=True)
    clients = make_clients(redis_client, None)
    gate = ReadGate()
    assert unblock(gate, clients) is False
    other = redis.Redis.from_url(redis_url)
    pool = ThreadPoolExecutor(2)
    try:
        other_id = other.client_id()
        other_read = pool.submit(
            lambda: other.xreadgroup("g", "other", {stream: ">"}, block=60_000))
        gated = pool.submit(lambda: execute_sync(
            GatedRead([["XREADGROUP", "GROUP", "g", "mine", "BLOCK", 60_000, "STREAMS",
                        stream, ">"]], gate=gate), clients))
        wait_for(lambda: gate.client_id is not None and any(
            c["id"] == str(other_id) and "b" in c["flags"]
            for c in redis_client.client_list()), 30, "both reads blocked")
        assert unblock(gate, clients) is True
        assert gated.result(timeout=10) == [[]]  # as if its BLOCK ran out
        assert gate.client_id is None
        blocked = {c["id"] for c in redis_client.client_list() if "b" in c["flags"]}
        assert str(other_id) in blocked
        redis_client.xadd(stream, {"k": "v"})  # ends the other read with its entry
        assert len(other_read.result(timeout=10)[0][1]) == 1
    finally:
        pool.shutdown(wait=False)
        other.close()
        redis_client.delete(stream)


def test_unblock_waits_for_a_read_sent_but_not_yet_waiting_with_its_id(
        redis_url: str, redis_client: redis.Redis) -> None:
    """A stop landing after the read was sent but before its id was published (the
    gate's lock held here keeps it there) found no id and sent nothing: the read waited
    its whole ``BLOCK`` (a CI run's worker took more than 20 s after SIGTERM). Now
    ``unblock`` waits for the id, then ends the read."""
    stream = f"gated-{uuid.uuid4().hex}"
    redis_client.xgroup_create(stream, "g", id="$", mkstream=True)
    clients = make_clients(redis.Redis.from_url(redis_url), None)
    gate = ReadGate()
    pool = ThreadPoolExecutor(2)
    try:
        with gate.lock:  # the read cannot publish its id yet
            gated = pool.submit(lambda: execute_sync(
                GatedRead([["XREADGROUP", "GROUP", "g", "mine", "BLOCK", 60_000, "STREAMS",
                            stream, ">"]], gate=gate), clients))
            wait_for(lambda: gate.starting and any(
                "b" in c["flags"] and c["cmd"] == "xreadgroup"
                for c in redis_client.client_list()), 30, "the read sent and blocked")
            stopping = pool.submit(unblock, gate, clients)
            done, _ = wait([stopping], timeout=0.2)  # (before: False at once)
            assert not done  # waiting for the id, up to STARTING_WAIT_S
        assert stopping.result(timeout=10) is True
        assert gated.result(timeout=10) == [[]]  # as if its BLOCK ran out
    finally:
        pool.shutdown(wait=False)
        redis_client.delete(stream)


def test_a_server_refusing_client_commands_leaves_the_read_to_end_by_itself(
        redis_url: str, mongo_url: str, redis_client: redis.Redis) -> None:
    # an ACL user without CLIENT (as managed Redis services give): the flusher drains
    # all the same, and close() waits for its read's BLOCK (0.2 s here) to run out
    user, password = f"lgd-{uuid.uuid4().hex[:8]}", uuid.uuid4().hex
    redis_client.acl_setuser(user, enabled=True, passwords=[f"+{password}"], keys=["*"],
                             channels=["*"], commands=["+@all", "-client"])
    try:
        url = redis_url.replace("redis://", f"redis://{user}:{password}@", 1)
        options = unique_options(flush_interval_s=0.2)
        with DurableSaver.from_urls(url, mongo_url, **options) as saver:
            saver.put(CFG, empty_checkpoint(), {"step": 0}, {})
            saver.flush(timeout_s=30)
            flusher = saver.runtime.flusher
            wait_for(lambda: flusher._gate.refused, 30, "the refused CLIENT ID")
        assert (flusher.running, flusher.left_group, flusher.entries) == (False, True, 1)
    finally:
        redis_client.acl_deluser(user)


def test_unblock_names_an_id_only_on_the_server_of_the_read(
        redis_url: str, redis_client: redis.Redis) -> None:
    # connection ids are unique per server: after a failover the pool's connections go to
    # another server, where the read's id may be anyone's (a BLPOP, a put's WAIT)
    stream = f"gated-{uuid.uuid4().hex}"
    clients = make_clients(redis_client, None)
    other = redis.Redis.from_url(redis_url)
    pool = ThreadPoolExecutor(1)
    try:
        other_id = other.client_id()
        popped = pool.submit(lambda: other.blpop([stream], timeout=60))
        wait_for(lambda: any(c["id"] == str(other_id) and "b" in c["flags"]
                             for c in redis_client.client_list()), 30, "the BLPOP blocked")
        gate = ReadGate()
        gate.client_id, gate.address = other_id, ("10.255.255.1", 6379, None)
        assert unblock(gate, clients) is False  # another server's id: nothing sent
        assert str(other_id) in {c["id"] for c in redis_client.client_list()
                                 if "b" in c["flags"]}
        conn = redis_client.connection_pool.get_connection()
        gate.address = (conn.host, conn.port, None)  # this server's: sent
        redis_client.connection_pool.release(conn)
        assert unblock(gate, clients) is True
        assert popped.result(timeout=10) is None
    finally:
        pool.shutdown(wait=False)
        other.close()


def test_unblock_waits_for_a_connection_without_holding_up_a_read_that_holds_the_last(
        redis_url: str, redis_client: redis.Redis, caplog: pytest.LogCaptureFixture) -> None:
    # a pool of one connection, held by the read: unblock() waits for a connection before
    # it takes the gate's lock, so the read ends after its BLOCK, gives the connection
    # back and unblock() finds nothing to end (holding the lock while it waited, it held
    # the read up until the pool's timeout, 5 s here, and then logged a failure)
    stream = f"gated-{uuid.uuid4().hex}"
    redis_client.xgroup_create(stream, "g", id="$", mkstream=True)
    one = redis.Redis(connection_pool=redis.BlockingConnectionPool.from_url(
        redis_url, max_connections=1, timeout=5))
    clients = make_clients(one, None)
    gate = ReadGate()
    pool = ThreadPoolExecutor(1)
    try:
        read = pool.submit(lambda: execute_sync(GatedRead(
            [["XREADGROUP", "GROUP", "g", "mine", "BLOCK", 300, "STREAMS", stream, ">"]],
            gate=gate), clients))
        wait_for(lambda: gate.client_id is not None, 30, "the read blocked")
        with caplog.at_level("INFO", logger="langgraph_durable.flusher"):
            assert unblock(gate, clients) is False
        assert read.result(timeout=10) == [[]]
        assert "CLIENT UNBLOCK" not in caplog.text
    finally:
        pool.shutdown(wait=False)
        one.close()
        redis_client.delete(stream)


@pytest.mark.parametrize(("reply", "refused"), [
    (redis.exceptions.NoPermissionError("NOPERM this user has no permissions"), True),
    (redis.exceptions.ResponseError("ERR unknown command 'CLIENT'"), True),
    (redis.exceptions.ResponseError("BUSY Redis is busy running a script"), False),
    (redis.exceptions.BusyLoadingError("LOADING Redis is loading the dataset"), False),
])
def test_only_a_refusal_turns_the_gate_off(reply: Exception, refused: bool) -> None:
    from langgraph_durable.io.gated_read import _is_refusal

    assert _is_refusal(reply) is refused
