"""One key prefix, one place in MongoDB (issue 21 item 1): the binding of a key prefix to
its (database, collection_prefix), recorded in Redis at set-up, refuses a flusher worker or
a saver configured with another database before it writes anything there."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pymongo
import pytest
import redis
from langgraph.checkpoint.base import empty_checkpoint

from langgraph_durable import ConfigurationError, CorruptRecordError, DurableSaver
from langgraph_durable.hot.keys import binding_key, prefix_pattern, thread_keys_of
from langgraph_durable.testing import unique_options, wait_for


def url_with_database(mongo_url: str, database: str) -> str:
    """``mongodb://h:p/?x`` -> ``mongodb://h:p/<database>?x`` (the application's URL)."""
    head, _, query = mongo_url.partition("/?")
    return f"{head.rstrip('/')}/{database}" + (f"?{query}" if query else "")


def put_turns(saver: DurableSaver, thread: str, turns: int) -> None:
    cfg = {"configurable": {"thread_id": thread, "checkpoint_ns": ""}}
    for n in range(turns):
        cp = empty_checkpoint()
        cp["channel_values"] = {"n": n}
        cp["channel_versions"] = {"n": f"{n + 1:032}.0"}
        cfg = saver.put(cfg, cp, {"step": n}, {"n": f"{n + 1:032}.0"})


def worker(redis_url: str, mongo_url: str, **env: str) -> subprocess.Popen:
    """``python -m langgraph_durable.outbox.worker`` configured as the README shows it:
    servers and options from the environment only."""
    clean = {k: v for k, v in os.environ.items() if not k.startswith("LGD_")}
    return subprocess.Popen(
        [sys.executable, "-m", "langgraph_durable.outbox.worker"],
        env={**clean, "REDIS_URL": redis_url, "MONGODB_URL": mongo_url, **env},
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def test_a_worker_on_another_database_refuses_to_start_and_writes_nothing_there(
        redis_url: str, mongo_url: str, redis_client: redis.Redis) -> None:
    opts = unique_options(flusher="off")
    prefix, appdb = opts.pop("key_prefix"), opts.pop("database")
    app = DurableSaver.from_urls(redis_url, url_with_database(mongo_url, appdb),
                                 key_prefix=prefix, **opts)  # no `with`: set up on first use
    try:
        put_turns(app, "th", 3)
        outbox = app.context.outbox
        assert redis_client.xlen(outbox) == 3
        # MONGODB_URL without a database: the worker would use "langgraph_durable"
        wrong = worker(redis_url, mongo_url, LGD_KEY_PREFIX=prefix)
        out, err = wrong.communicate(timeout=60)
        assert wrong.returncode == 2, (out, err)
        assert err.startswith(
            f"error: key_prefix {prefix!r} belongs to MongoDB database {appdb!r} with "
            f"collection_prefix '' (recorded in Redis key '{{{prefix}:binding}}' by saver pid "
            f"{os.getpid()} on host "), err
        assert ("but this flusher worker is configured with database 'langgraph_durable' "
                "and collection_prefix ''") in err
        assert f"Give this flusher worker database={appdb!r}" in err
        assert out == ""  # it never ran a round
        with pymongo.MongoClient(mongo_url) as m:
            assert m["langgraph_durable"]["checkpoints"].count_documents(
                {"thread_id": "th"}) == 0
        assert redis_client.xlen(outbox) == 3  # untouched: nothing read, nothing pending
        assert redis_client.xpending(outbox, "flushers")["pending"] == 0
        # the worker as it should be started drains them where the application reads
        right = worker(redis_url, url_with_database(mongo_url, appdb), LGD_KEY_PREFIX=prefix)
        try:
            wait_for(lambda: redis_client.xlen(outbox) == 0, 60, "the right worker to drain")
        finally:
            right.send_signal(signal.SIGTERM)
            out, err = right.communicate(timeout=30)
        assert right.returncode == 0, err
        assert "3 entries" in out
        cps = app.sync_clients.db[app.context.collections.checkpoints]
        assert cps.count_documents({"thread_id": "th"}) == 3
    finally:
        app.close()


def test_a_second_saver_with_the_key_prefix_on_another_database_refuses_to_start(
        redis_url: str, mongo_url: str) -> None:
    opts = unique_options()
    other_db = opts["database"] + "b"
    with DurableSaver.from_urls(redis_url, mongo_url, **opts) as first:
        put_turns(first, "t", 1)
        second = DurableSaver.from_urls(redis_url, mongo_url, **{**opts, "database": other_db})
        with pytest.raises(ConfigurationError) as err:
            with second:
                pass
        message = str(err.value)
        assert message.startswith(f"key_prefix {opts['key_prefix']!r} belongs to MongoDB "
                                  f"database {opts['database']!r} with collection_prefix ''")
        assert f"this saver is configured with database {other_db!r}" in message
        again = DurableSaver.from_urls(redis_url, mongo_url,
                                       **{**opts, "collection_prefix": "b_"})
        with pytest.raises(ConfigurationError, match="configured with database .* and "
                           "collection_prefix 'b_'"):
            put_turns(again, "t2", 1)  # without `with`: its first call refuses the same way
        again.close()
        with pymongo.MongoClient(mongo_url) as m:
            assert other_db not in m.list_database_names()  # no index, no meta, nothing
            assert "b_checkpoints" not in m[opts["database"]].list_collection_names()
        assert first.get_tuple({"configurable": {"thread_id": "t"}}) is not None


def test_a_binding_key_of_another_type_is_named_and_nothing_is_written(
        redis_url: str, mongo_url: str) -> None:
    opts = unique_options()
    key = binding_key(opts["key_prefix"])
    with redis.Redis.from_url(redis_url) as r:
        r.set(key, "not a hash")
        with pytest.raises(CorruptRecordError, match=f"the binding of key_prefix "
                           f"'{opts['key_prefix']}' \\(Redis key '{{{opts['key_prefix']}:"
                           "binding}'\\) holds another type than a hash") as err:
            with DurableSaver.from_urls(redis_url, mongo_url, **opts):
                pass
        assert (err.value.tier, err.value.key) == ("hot", key)
        assert r.get(key) == b"not a hash"  # left for the operator, as the message says
    with pymongo.MongoClient(mongo_url) as m:
        assert opts["database"] not in m.list_database_names()


def test_set_up_records_the_binding_under_the_key_prefix_and_no_thread_sees_it(
        redis_url: str, mongo_url: str, redis_client: redis.Redis) -> None:
    opts = unique_options(collection_prefix="c_")
    began_ms = time.time_ns() // 1_000_000
    with DurableSaver.from_urls(redis_url, mongo_url, **opts) as saver:
        put_turns(saver, "t", 1)
        key = binding_key(opts["key_prefix"])
        assert key == "{" + opts["key_prefix"] + ":binding}"
        stored = {k.decode(): v.decode() for k, v in redis_client.hgetall(key).items()}
        assert set(stored) == {"database", "collection_prefix", "by", "at", "partitions"}
        assert stored["partitions"] == "1"  # a single Redis, outbox_partitions unset
        assert (stored["database"], stored["collection_prefix"]) == (opts["database"], "c_")
        assert stored["by"].startswith(f"saver pid {os.getpid()} on host ")
        assert began_ms <= int(stored["at"]) <= time.time_ns() // 1_000_000
        assert redis_client.ttl(key) == -1  # lives as long as the key prefix
        keys = {k.decode() for k in redis_client.scan_iter(match=prefix_pattern(
            opts["key_prefix"]))}
        assert key in keys  # clean-up and footprint of the prefix see it
        assert thread_keys_of(opts["key_prefix"], key) is None  # not a thread's key
        assert [t.thread_id for t in saver.list_threads().threads] == ["t"]


def test_removing_the_binding_lets_a_moved_key_prefix_bind_again(
        redis_url: str, mongo_url: str, redis_client: redis.Redis) -> None:
    # the way out the error names: a key prefix really moved to another database
    opts = unique_options()
    with DurableSaver.from_urls(redis_url, mongo_url, **opts):
        pass
    moved = {**opts, "database": opts["database"] + "m"}
    saver = DurableSaver.from_urls(redis_url, mongo_url, **moved)
    try:
        with pytest.raises(ConfigurationError):
            put_turns(saver, "t", 1)
        redis_client.delete(binding_key(opts["key_prefix"]))
        put_turns(saver, "t", 1)  # the next call sets up again, and binds
        assert redis_client.hget(binding_key(opts["key_prefix"]), "database") == \
            moved["database"].encode()
    finally:
        saver.close()


def test_a_worker_started_first_binds_the_key_prefix_and_a_saver_elsewhere_refuses(
        redis_url: str, mongo_url: str, redis_client: redis.Redis) -> None:
    opts = unique_options()
    first = worker(redis_url, url_with_database(mongo_url, opts["database"]),
                   LGD_KEY_PREFIX=opts["key_prefix"])
    try:
        key = binding_key(opts["key_prefix"])
        wait_for(lambda: redis_client.exists(key), 60, "the worker to bind its key prefix")
        assert redis_client.hget(key, "database") == opts["database"].encode()
        assert redis_client.hget(key, "by").decode().startswith(
            f"flusher worker pid {first.pid} on host ")
        elsewhere = DurableSaver.from_urls(redis_url, mongo_url,
                                           **{**opts, "database": opts["database"] + "z"})
        prefix = opts["key_prefix"]
        with pytest.raises(ConfigurationError) as err:
            with elsewhere:
                pass
        assert (f"recorded in Redis key '{{{prefix}:binding}}' by flusher worker pid "
                f"{first.pid} on host ") in str(err.value)
        with DurableSaver.from_urls(redis_url, mongo_url, flusher="off", **opts) as app:
            put_turns(app, "w", 2)  # the worker's database: it flushes them
            wait_for(lambda: app.sync_clients.db[app.context.collections.checkpoints]
                     .count_documents({"thread_id": "w"}) == 2, 60, "the worker to flush")
    finally:
        first.send_signal(signal.SIGTERM)
        out, err = first.communicate(timeout=30)
    assert first.returncode == 0, err


def test_a_saver_with_another_number_of_outbox_partitions_refuses_to_start(
        redis_url: str, mongo_url: str) -> None:
    # a thread's Redis keys carry its partition's hash tag: with 2 partitions this saver
    # would look for the first one's threads under other keys and read other streams
    opts = unique_options()
    with DurableSaver.from_urls(redis_url, mongo_url, **opts) as first:
        put_turns(first, "t", 1)
        other = DurableSaver.from_urls(redis_url, mongo_url, **opts, outbox_partitions=2)
        with pytest.raises(ConfigurationError) as err:
            put_turns(other, "t", 1)
        other.close()
        message = str(err.value)
        assert message.startswith(f"key_prefix {opts['key_prefix']!r} has 1 outbox "
                                  "partition(s) (recorded in Redis key")
        assert "but this saver is configured with 2 (outbox_partitions" in message
        assert "Give this saver outbox_partitions=1" in message
        assert len(list(first.list({"configurable": {"thread_id": "t"}}))) == 1


def test_a_binding_recorded_without_partitions_gets_them_at_the_next_start(
        redis_url: str, mongo_url: str, redis_client: redis.Redis) -> None:
    opts = unique_options()
    key = binding_key(opts["key_prefix"])
    redis_client.hset(key, mapping={"database": opts["database"], "collection_prefix": "",
                                    "by": "saver of an older version", "at": "1"})
    with DurableSaver.from_urls(redis_url, mongo_url, **opts, outbox_partitions=3) as s:
        put_turns(s, "t", 1)
    assert redis_client.hget(key, "partitions") == b"3"
    assert redis_client.hget(key, "by") == b"saver of an older version"  # kept
    with pytest.raises(ConfigurationError, match="has 3 outbox partition"):
        with DurableSaver.from_urls(redis_url, mongo_url, **opts):
            pass
