"""Adversarial cases against issue 31's dead letters, validation at the door and tools
(a review of what landed): each test states the case, on real servers."""

from __future__ import annotations

from typing import Any

import pytest

from langgraph_durable import DurableSaver
from langgraph_durable.core.outbox_entry import OutboxEntry
from langgraph_durable.io.drivers import run_sync
from langgraph_durable.outbox import dead
from langgraph_durable.outbox.flusher import consumer_name, flush_batch_plan
from langgraph_durable.outbox.group import dead_letter_key
from langgraph_durable.outbox.rounds import RoundChoice
from langgraph_durable.testing import unique_options

from .test_bad_data import drain, letters, put_one


@pytest.fixture
def manual(redis_url: str, mongo_url: str) -> Any:
    """A saver with no in-process flusher: the test runs the flush rounds."""
    with DurableSaver.from_urls(redis_url, mongo_url, **unique_options(flusher="off")) as s:
        yield s


def test_two_replays_of_the_same_dead_letter_put_it_back_once(manual, redis_client) -> None:
    """Two operators (or a retried command) that listed the same dead letter both replay
    it: it goes back once (was: both re-added it, the duplicate's settle lowered the
    thread's 'dirty' count a second time and its keys got their TTL while another of its
    entries was still a dead letter)."""
    r, ctx = redis_client, manual.context
    put_one(manual, "t")
    put_one(manual, "t")
    k = ctx.keys("t")
    r.rename(k.cp, k.cp + ":backup")
    r.set(k.cp, "damaged")
    assert drain(manual) == 2  # both checkpoints set aside at copy
    assert r.hget(k.meta, "dirty") == b"2"
    r.delete(k.cp)
    r.rename(k.cp + ":backup", k.cp)  # the fix
    first, second = letters(manual)
    seen_by_a = [first]  # two operators list the dead letters at the same time ...
    seen_by_b = [first]
    done_a = run_sync(dead.replay_plan(ctx, seen_by_a), manual.sync_clients)
    done_b = run_sync(dead.replay_plan(ctx, seen_by_b), manual.sync_clients)
    assert len(done_a.replayed) + len(done_b.replayed) == 1  # ... it goes back once
    assert r.xlen(ctx.outbox_of("t")) == 1
    drain(manual)
    # the second checkpoint is still a dead letter: the thread's keys must not expire
    assert r.hget(k.meta, "dirty") == b"1"
    assert r.ttl(k.cp) == -1
    assert [d.id for d in letters(manual)] == [second.id]


def test_a_damaged_dead_letter_stream_never_stalls_the_flusher(manual, redis_client) -> None:
    """The dead-letter stream itself holding another type (a hand edit, a foreign tool on
    the prefix): a round that has an entry to set aside must not fail forever, taking
    only its own pending poison first and never reaching the entries behind it."""
    r, ctx = redis_client, manual.context
    r.set(dead_letter_key(ctx), "damaged")
    r.xadd(ctx.outbox_of("bad"), OutboxEntry("bad", "cp", "no-separator", [], [], 0).fields())
    choice, consumer = RoundChoice(ctx), consumer_name()
    errors = []
    for i in range(6):
        if i == 2:
            put_one(manual, "good")  # written after the poison was first taken
        claim, own = choice.next()
        try:
            run_sync(flush_batch_plan(ctx, consumer, block_ms=0, claim=False, own=own),
                     manual.sync_clients)
            choice.succeeded()
        except Exception as exc:  # the flusher retries a failed round
            errors.append(exc)
            choice.failed()
    db, cols = manual.sync_clients.db, ctx.collections
    assert db[cols.checkpoints].count_documents({"thread_id": "good"}) == 1, errors


def test_flush_names_a_damaged_dead_letter_stream_and_close_does_not_raise(
        redis_url, mongo_url, redis_client, caplog) -> None:
    """With the dead-letter stream of another type, ``flush()`` raises
    ``CorruptRecordError`` naming the key and what to do (was a bare redis
    ``ResponseError``), and leaving the saver's ``with`` block only logs it."""
    from langgraph_durable.errors import CorruptRecordError

    with DurableSaver.from_urls(redis_url, mongo_url, **unique_options()) as s:
        key = dead_letter_key(s.context)
        redis_client.set(key, "damaged")
        put_one(s, "a")
        with pytest.raises(CorruptRecordError) as got:
            s.flush()
        assert str(got.value) == (
            f"the dead-letter stream {key!r} holds another type than a stream: flushers "
            "cannot set entries aside and flush() cannot check them; rename or delete it")
        assert s.sync_clients.db[s.context.collections.checkpoints].count_documents(
            {"thread_id": "a"}) == 1  # the entry itself was flushed
    assert any(key in r.getMessage() for r in caplog.records if r.levelname == "WARNING")


def test_an_s3_endpoint_that_answers_a_byte_at_a_time_is_bounded(monkeypatch) -> None:
    """botocore's read timeout is per socket read: an endpoint trickling its answer a byte
    every 0.3 s would hold a get forever; the store's own deadline (3 s for
    ``timeout_s=1, retries=0``) ends it with ``BlobStoreError``."""
    import socket
    import threading
    import time

    from langgraph_durable.serde.extref_errors import BlobStoreError
    from langgraph_durable.serde.s3_store import S3BlobStore

    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "test")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "test")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    stop = threading.Event()

    def trickle() -> None:  # answers one byte every 0.3 s, for up to 15 s
        listener.settimeout(15)
        try:
            conn, _ = listener.accept()
        except OSError:
            return
        with conn:
            conn.recv(65536)
            for b in b"HTTP/1.1 200 OK\r\nContent-Length: 100000\r\n" * 10:
                if stop.wait(0.3):
                    return
                conn.sendall(bytes([b]))

    server = threading.Thread(target=trickle, daemon=True)
    server.start()
    store = S3BlobStore("bucket", endpoint_url=f"http://127.0.0.1:{port}", timeout_s=1,
                        retries=0)
    outcome: list[object] = []
    caller = threading.Thread(target=lambda: outcome.append(_try(store.get, "k")),
                              daemon=True)
    t0 = time.monotonic()
    caller.start()
    try:
        # 1 s timeout, no retry: a deadline of 3 s, far below the 120 s the endpoint
        # trickles for (the bound leaves a loaded machine room)
        caller.join(15)
        assert not caller.is_alive(), "get still running after 15 s"
        assert isinstance(outcome[0], BlobStoreError)
        assert time.monotonic() - t0 < 15
        assert str(outcome[0]) == (
            f"blob store s3://bucket/ failed to read blob 'k' (endpoint "
            f"http://127.0.0.1:{port}): no answer within the deadline; the request was "
            "abandoned (deadline 3 s)")
    finally:
        stop.set()
        listener.close()


def _try(fn: Any, *args: Any) -> object:
    try:
        return fn(*args)
    except Exception as exc:
        return exc


def test_short_event_loops_on_a_redis_cluster_keep_sockets_bounded(
        redis_cluster_url: str, mongo_url: str) -> None:
    """Issue 31's per-loop release, on a Redis Cluster URL (a cluster client opens a
    connection per node): 60 ``asyncio.run`` calls leave the open descriptors bounded."""
    import asyncio

    from langgraph.checkpoint.base import empty_checkpoint

    from .test_loop_resources import open_fds

    async def one(saver: DurableSaver, step: int) -> None:
        config = {"configurable": {"thread_id": "loops", "checkpoint_ns": ""}}
        stored = await saver.aput(config, empty_checkpoint(), {"step": step}, {})
        assert (await saver.aget_tuple(stored)) is not None

    with DurableSaver.from_urls(redis_cluster_url, mongo_url, **unique_options()) as saver:
        asyncio.run(one(saver, 0))
        before = open_fds()
        for step in range(60):
            asyncio.run(one(saver, step + 1))
        assert open_fds() <= before + 10
        assert saver.runtime.clients.loops == 0


def test_replaying_settle_dead_letters_never_lowers_the_unflushed_count_twice(
        redis_url, mongo_url, redis_client) -> None:
    """A 'settle' dead letter whose settle failed in the hot-window trim (a damaged idx)
    had lowered its thread's 'dirty' count already (Lua keeps the writes made before the
    error): its replay must not lower it again (was: the thread's keys got their TTL
    while a later put of it was still unflushed)."""
    opts = unique_options(flusher="off", hot_max_checkpoints=1, flush_batch_size=18)
    with DurableSaver.from_urls(redis_url, mongo_url, **opts) as s:
        r, ctx = redis_client, s.context
        for _ in range(18):  # the trim runs from 1 + 16 checkpoints on
            put_one(s, "t")
        k = ctx.keys("t")
        r.rename(k.idx, k.idx + ":backup")
        r.set(k.idx, "damaged")
        assert drain(s) == 18
        assert {d.step for d in letters(s)} == {"settle"}
        r.delete(k.idx)
        r.rename(k.idx + ":backup", k.idx)  # the fix
        done = run_sync(dead.replay_plan(ctx, letters(s)), s.sync_clients)
        assert len(done.replayed) == 18
        put_one(s, "t")  # a new put, behind the 18 replayed entries
        assert r.hget(k.meta, "dirty") == b"1"
        run_sync(flush_batch_plan(ctx, consumer_name(), block_ms=0, claim=False),
                 s.sync_clients)  # takes the 18 replayed entries only
        assert r.xlen(ctx.outbox_of("t")) == 1
        assert r.hget(k.meta, "dirty") == b"1"  # the new put is still unflushed
        assert r.ttl(k.cp) == -1


@pytest.mark.parametrize("key", ["cp", "cv", "idx", "bl", "w", "wi", "ns", "meta", "it",
                                 "gone"])
def test_delete_thread_removes_a_thread_whose_key_is_damaged(manual, redis_client,
                                                              key) -> None:
    """A thread with a key of the wrong type: reads name the key and say "repair or delete
    it"; ``delete_thread`` (the API's way to give a thread up) must then work."""
    put_one(manual, "t")
    put_one(manual, "t")
    drain(manual)
    k = getattr(manual.context.keys("t"), key)
    redis_client.delete(k)
    redis_client.set(k, "damaged")
    manual.delete_thread("t")  # was CorruptRecordError for a damaged idx or gone key
    assert manual.get_tuple({"configurable": {"thread_id": "t", "checkpoint_ns": ""}}) is None
    keys = manual.context.keys("t")
    assert redis_client.exists(*keys.all) == 0
    assert redis_client.type(keys.gone) == b"hash"  # the tombstones, '*' among them
    assert redis_client.hget(keys.gone, "*") is not None
    put_one(manual, "t")  # the thread can be written again
    assert drain(manual) == 0


def test_a_blob_key_with_a_trailing_newline_is_refused(tmp_path) -> None:
    """``^...$`` with ``re.match`` takes a key ending in a newline (``$`` matches before
    it): a hostile export's carried object, or any caller, wrote a file whose name ends
    in a newline. The local store and import's key check refuse it."""
    from langgraph_durable.cli.import_checks import CHECKS
    from langgraph_durable.serde.stores import LocalBlobStore

    key = "ab" * 32 + ".bin\n"
    with pytest.raises(ValueError, match="invalid blob key"):
        LocalBlobStore(tmp_path).put_if_absent(key, b"x")
    assert list(tmp_path.rglob("*.bin*")) == []
    with pytest.raises(ValueError, match="is not a key the ExternalRefSerializer writes"):
        CHECKS["extblob"]({"key": key, "data": ""}, "t")


def test_the_tiers_page_names_a_damaged_dead_letter_stream(manual, redis_client) -> None:
    """The dashboard's tiers data with the dead-letter stream of another type: answered
    (200), the key named, the other figures there (was a failed request)."""
    from starlette.testclient import TestClient

    from langgraph_durable.dashboard.app import create_app

    key = dead_letter_key(manual.context)
    redis_client.set(key, "damaged")
    put_one(manual, "a")
    with TestClient(create_app(manual), base_url="http://127.0.0.1") as client:
        got = client.get("/api/tiers")
        page = client.get("/tiers")
    assert got.status_code == 200, got.text[:300]
    data = got.json()
    assert data["outbox"]["length"] == 1 and data["dead_letters"] == []
    assert data["outbox"]["dead_letter_error"].startswith(
        f"the dead-letter stream {key} holds another type")
    assert page.status_code == 200 and "rename or delete it" in page.text
