"""Real-server tests for langgraph_durable.testing: Redis, MongoDB wire (SecantusDB), S3 (moto)."""

from __future__ import annotations

import uuid
from typing import Any

import boto3
import pymongo
import pytest
import redis

from langgraph_durable.testing import (
    MongoServer,
    RedisServer,
    S3Server,
    ServerError,
    mongo_server,
    redis_server,
)


def _restartable(server: RedisServer | MongoServer) -> None:
    if server.external or server._container is not None:
        pytest.skip("stop/start needs a local server process")


def test_redis_ping_set_get(redis_server_proc: RedisServer, redis_url: str) -> None:
    assert redis_url == redis_server_proc.url
    assert redis_url.startswith("redis://")
    with redis.Redis.from_url(redis_url) as client:
        assert client.ping() is True
        client.set("testing:key", b"value")
        assert client.get("testing:key") == b"value"


def test_redis_appendonly_survives_restart() -> None:
    with redis_server(appendonly=True) as server:
        _restartable(server)
        port = server.port
        with redis.Redis.from_url(server.url) as client:
            client.set("durable", "yes")
        server.stop()
        with pytest.raises(redis.ConnectionError), redis.Redis.from_url(server.url) as client:
            client.ping()
        server.start()
        assert server.port == port
        with redis.Redis.from_url(server.url) as client:
            assert client.get("durable") == b"yes"


def test_redis_kill_then_start() -> None:
    with redis_server(appendonly=True) as server:
        _restartable(server)
        with redis.Redis.from_url(server.url) as client:
            client.set("k", "v")
        server.kill()
        server.start()  # AOF fsyncs every second, so the key may or may not be there
        with redis.Redis.from_url(server.url) as client:
            assert client.ping() is True
        with pytest.raises(ServerError, match="already running"):
            server.start()


def test_mongo_sync_insert_find(mongo_url: str, clean_servers: tuple[str, str]) -> None:
    with pymongo.MongoClient[dict[str, Any]](mongo_url) as client:
        coll = client[clean_servers[1]]["docs"]
        coll.insert_one({"_id": "a", "n": 1})
        assert coll.find_one({"_id": "a"}) == {"_id": "a", "n": 1}


async def test_mongo_async_insert_find(mongo_url: str, clean_servers: tuple[str, str]) -> None:
    client = pymongo.AsyncMongoClient[dict[str, Any]](mongo_url)
    try:
        coll = client[clean_servers[1]]["docs"]
        await coll.insert_one({"_id": "b", "n": 2})
        assert await coll.find_one({"_id": "b"}) == {"_id": "b", "n": 2}
    finally:
        await client.close()


def test_drop_namespace_removes_only_its_own_keys_and_database(mongo_url: str,
                                                              redis_url: str) -> None:
    from langgraph_durable.testing import drop_namespace

    with redis.Redis.from_url(redis_url) as r, \
            pymongo.MongoClient[dict[str, Any]](mongo_url) as m:
        r.set("{mine:1:t}:cp", 1)
        r.set("{mine:outbox}", 1)
        r.set("{mine-2:1:t}:cp", 1)  # another prefix that starts the same
        r.set("{other:1:t}:cp", 1)
        r.set("plain", 1)
        m["mine_db"]["c"].insert_one({"_id": 1})
        m["other_db"]["c"].insert_one({"_id": 1})
        drop_namespace(redis_url, mongo_url, "mine", "mine_db")
        assert r.exists("{mine:1:t}:cp", "{mine:outbox}") == 0
        assert r.exists("{mine-2:1:t}:cp", "{other:1:t}:cp", "plain") == 3
        assert "mine_db" not in m.list_database_names()
        assert m["other_db"]["c"].count_documents({}) == 1
        r.delete("{mine-2:1:t}:cp", "{other:1:t}:cp", "plain")
        m.drop_database("other_db")


def test_mongo_survives_restart() -> None:
    with mongo_server() as server:
        _restartable(server)
        with pymongo.MongoClient[dict[str, Any]](server.url) as client:
            client["restart_db"]["c"].insert_one({"_id": 1, "v": "kept"})
        server.stop()
        server.start()
        with pymongo.MongoClient[dict[str, Any]](server.url) as client:
            assert client["restart_db"]["c"].find_one({"_id": 1}) == {"_id": 1, "v": "kept"}


def test_mongo_in_memory_serves_data_writes_no_file_and_forgets_on_restart() -> None:
    import os

    with mongo_server(in_memory=True) as server:
        _restartable(server)
        with pymongo.MongoClient[dict[str, Any]](server.url) as client:
            client["mem_db"]["c"].insert_one({"_id": 1, "v": "held"})
            assert client["mem_db"]["c"].find_one({"_id": 1}) == {"_id": 1, "v": "held"}
        assert os.listdir(server.data_dir) == []  # no journal, no data files
        server.stop()
        server.start()
        with pymongo.MongoClient[dict[str, Any]](server.url) as client:
            assert client["mem_db"]["c"].find_one({"_id": 1}) is None


def test_s3_put_get_and_conditional_put(s3_server_proc: S3Server, s3_endpoint_url: str) -> None:
    from botocore.exceptions import ClientError

    assert s3_endpoint_url == s3_server_proc.endpoint_url
    s3 = boto3.client(
        "s3",
        endpoint_url=s3_endpoint_url,
        aws_access_key_id="test",
        aws_secret_access_key="test",
        region_name="us-east-1",
    )
    bucket = f"testing-{uuid.uuid4().hex[:12]}"
    s3.create_bucket(Bucket=bucket)
    s3.put_object(Bucket=bucket, Key="k", Body=b"first")
    assert s3.get_object(Bucket=bucket, Key="k")["Body"].read() == b"first"
    with pytest.raises(ClientError) as info:
        s3.put_object(Bucket=bucket, Key="k", Body=b"second", IfNoneMatch="*")
    assert info.value.response["Error"]["Code"] == "PreconditionFailed"
    assert info.value.response["ResponseMetadata"]["HTTPStatusCode"] == 412
    assert s3.get_object(Bucket=bucket, Key="k")["Body"].read() == b"first"
    s3.put_object(Bucket=bucket, Key="new", Body=b"x", IfNoneMatch="*")  # absent key: accepted


def test_external_server_refuses_control(monkeypatch: pytest.MonkeyPatch, redis_url: str) -> None:
    monkeypatch.setenv("REDIS_URL", redis_url)
    with redis_server() as server:
        assert server.external and server.url == redis_url
        for action in (server.stop, server.start, server.kill):
            with pytest.raises(ServerError, match="external"):
                action()


def test_startup_times_recorded(
    redis_server_proc: RedisServer, mongo_server_proc: MongoServer, s3_server_proc: S3Server
) -> None:
    for server in (redis_server_proc, mongo_server_proc, s3_server_proc):
        assert 0 < server.startup_seconds < 30
        print(f"{server.kind}: started in {server.startup_seconds:.3f} s")


def test_the_local_mongodb_server_answers_in_of_strings_as_secantusdb_does() -> None:
    """``secantus_daemon.string_in_by_set`` (the local server's ``$in`` of strings by a
    set) gives SecantusDB's own answer in every case, the ones it leaves to SecantusDB
    (numbers, arrays, regexes, null, missing, a collation) included."""
    from bson import Int64, Regex
    from secantus import query
    from secantus.collation import Collation

    from langgraph_durable.testing.secantus_daemon import string_in_by_set

    own = query._op_matches
    by_set = string_in_by_set(own)
    missing = query.MISSING
    args: list[list[Any]] = [[], ["a"], ["a", "b", "c"], ["b", 1], ["A"], [None],
                             [Regex("^a")], [["a", "b"]], [1.0], [Int64(1)], ["", "a"]]
    values: list[list[Any]] = [["a"], ["b"], ["z"], [""], ["a", "z"], [missing], [None],
                               [["a", "b"]], [1], [True], [["z"]], ["A"]]
    answers = [(v, a, by_set(v, "$in", a)) for a in args for v in values]
    assert answers == [(v, a, own(v, "$in", a)) for a in args for v in values]
    assert [by_set(["a"], "$in", ["a", "b"]), by_set(["c"], "$in", ["a", "b"])] == [True, False]
    caseless = Collation(strength=2)
    assert by_set(["A"], "$in", ["a"], caseless) is own(["A"], "$in", ["a"], caseless) is True
    assert by_set(["a"], "$nin", ["a"]) is own(["a"], "$nin", ["a"]) is False


def test_the_local_mongodb_server_finds_by_in_of_many_ids(mongo_url: str,
                                                         clean_servers: tuple[str, str]) -> None:
    with pymongo.MongoClient[dict[str, Any]](mongo_url) as client:
        coll = client[clean_servers[1]]["docs"]
        coll.insert_many([{"_id": f"k{i}", "tags": [f"t{i}", "all"]} for i in range(2_000)]
                         + [{"_id": 7, "tags": "seven"}])
        ids: list[Any] = [f"k{i}" for i in range(0, 2_000, 2)] + ["absent", 7]
        assert len(list(coll.find({"_id": {"$in": ids}}))) == 1_001
        assert coll.count_documents({"tags": {"$in": ["t3", "seven"]}}) == 2
        assert coll.count_documents({"tags": {"$in": ["all"]}}) == 2_000
