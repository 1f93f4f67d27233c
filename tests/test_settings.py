"""Configuration: the database of the MongoDB URL, from_conn_string, REDIS_URL/MONGODB_URL
and LGD_<FIELD> from the environment (one rule for the library, the CLI and the worker)."""

from __future__ import annotations

import contextlib
import threading
from typing import Any

import pymongo
import pytest
import redis
from langgraph.checkpoint.base import empty_checkpoint
from typer.testing import CliRunner

from langgraph_durable import ConfigurationError, DurableConfig, DurableSaver
from langgraph_durable.settings import env_options
from langgraph_durable.testing import unique_options, wait_for


# a value different from the default for every DurableConfig field, as an environment
# variable would give it, and as the field holds it once validated
def with_db(mongo_url: str, name: str) -> str:
    """``mongodb://h:p/?opts`` -> ``mongodb://h:p/<name>?opts``."""
    base, _, query = mongo_url.partition("?")
    return base.rstrip("/") + "/" + name + ("?" + query if query else "")


def _put(saver: DurableSaver, thread: str) -> None:
    saver.put({"configurable": {"thread_id": thread, "checkpoint_ns": ""}},
              empty_checkpoint(), {"step": -1}, {})


def test_keyword_options_win_over_lgd_variables(redis_url, mongo_url, monkeypatch) -> None:
    opts = unique_options()
    monkeypatch.setenv("LGD_FLUSH_BATCH_SIZE", "7")
    monkeypatch.setenv("LGD_KEY_PREFIX", "from_env")
    with DurableSaver.from_urls(redis_url, mongo_url, **opts) as saver:
        assert saver.config.flush_batch_size == 7
        assert saver.config.key_prefix == opts["key_prefix"]


def test_an_explicit_config_ignores_the_environment(redis_url, mongo_url, monkeypatch) -> None:
    monkeypatch.setenv("LGD_FLUSH_BATCH_SIZE", "7")
    with DurableSaver.from_urls(redis_url, mongo_url,
                                config=DurableConfig(**unique_options())) as saver:
        assert saver.config.flush_batch_size == 500


def test_config_and_keyword_options_together_are_refused(redis_url, mongo_url) -> None:
    with pytest.raises(ConfigurationError, match=r"either config=DurableConfig\(...\) or "
                       r"keyword options, not both \(got config= and \['flush_batch_size'\]\)"):
        DurableSaver.from_urls(redis_url, mongo_url, config=DurableConfig(),
                               flush_batch_size=3)


def _outbox_reads(redis_url: str, prefix: str, seen: list[str]) -> Any:
    """A ``MONITOR`` thread adding to ``seen`` the ``XREADGROUP`` commands that name the
    key prefix ``prefix``; returns the monitor (disconnect it to end the thread)."""
    mon = redis.Redis.from_url(redis_url).monitor()
    mon.__enter__()

    def run() -> None:
        with contextlib.suppress(Exception):  # ends when the test disconnects it
            for got in mon.listen():
                cmd = got.get("command", "")
                if cmd.upper().startswith("XREADGROUP") and prefix in cmd:
                    seen.append(cmd)

    threading.Thread(target=run, daemon=True).start()
    return mon


@pytest.mark.parametrize("connections", [1, 2])
def test_the_in_process_flusher_shares_a_pool_of_one_connection(redis_url, mongo_url,
                                                               connections) -> None:
    """With ``redis_max_connections=1`` the in-process flusher reads the outbox without
    ``BLOCK`` and waits ``flush_interval_s`` between empty reads, so the application's
    calls get the one connection between them (with a blocking read the flusher held it
    and won it back first: a put after an idle moment took 2.2 s, ``flush()`` 2.5 s);
    with 2 or more it reads with ``BLOCK`` as before."""
    opts = unique_options()
    seen: list[str] = []
    mon = _outbox_reads(redis_url, opts["key_prefix"], seen)
    try:
        with DurableSaver.from_urls(redis_url, mongo_url, redis_max_connections=connections,
                                    **opts) as saver:
            _put(saver, "shared")
            saver.flush()
            wait_for(lambda: len(seen) >= 3, 10, "three reads of the outbox")
            got = saver.get_tuple({"configurable": {"thread_id": "shared"}})
            assert got is not None and got.metadata["step"] == -1
    finally:
        mon.connection.disconnect()
    blocking = [c for c in seen if " BLOCK " in c.upper()]
    if connections == 1:
        assert blocking == [], blocking[:3]
    else:
        assert blocking, seen[:3]


@pytest.mark.parametrize("url, kind", [
    ("redis+cluster://127.0.0.1:7000,127.0.0.1:7001", "cluster"),
    ("redis+sentinel://:secret@127.0.0.1:26379/mymaster", "sentinel")])
def test_one_redis_connection_is_refused_for_a_cluster_or_sentinel(mongo_url, url,
                                                                   kind) -> None:
    """One connection per server serves a single server only: a cluster pipeline asks a
    node for its keys on a second connection (the outbox never drained: a helper's run),
    a Sentinel pool refuses a second caller ("Too many connections" on the first put).
    Refused before any connection, naming the URL without its password."""
    with pytest.raises(ConfigurationError, match=rf"redis_max_connections=1 with a Redis "
                       rf"{kind}: one connection per server serves a single server only"
                       ) as got:
        DurableSaver.from_urls(url, mongo_url, redis_max_connections=1, **unique_options())
    assert "secret" not in str(got.value)


@pytest.mark.parametrize("is_async", [False, True])
def test_a_given_pool_of_one_that_refuses_a_second_caller_is_refused_with_the_flusher(
        redis_url, mongo_url, is_async) -> None:
    """redis-py's default pool with ``max_connections=1`` refuses a caller while its
    connection is in use, instead of waiting: with the in-process flusher sharing it, a
    helper's run failed about 1 call in 100, saying Redis "did not answer". Refused when
    the saver is made; a ``BlockingConnectionPool`` of one, or ``flusher="off"``, is
    taken."""
    import redis.asyncio

    module = redis.asyncio if is_async else redis
    client = module.Redis.from_url(redis_url, max_connections=1)
    waiting = module.Redis(connection_pool=module.BlockingConnectionPool.from_url(
        redis_url, max_connections=1))
    mongo = pymongo.AsyncMongoClient(mongo_url) if is_async else pymongo.MongoClient(mongo_url)
    try:
        with pytest.raises(ConfigurationError, match=r"pool of one connection that refuses a "
                           r"second caller .*BlockingConnectionPool .*flusher='off'"):
            DurableSaver(client, mongo, **unique_options())
        DurableSaver(waiting, mongo, **unique_options())
        DurableSaver(client, mongo, **unique_options(flusher="off"))
        if not is_async:  # with a sync pair given the flusher uses it, not the asyncio one
            DurableSaver(redis.Redis.from_url(redis_url, max_connections=4), mongo,
                         async_redis=redis.asyncio.Redis.from_url(redis_url, max_connections=1),
                         async_mongo=pymongo.AsyncMongoClient(mongo_url), **unique_options())
    finally:
        mongo.close() if not is_async else None


def test_a_given_cluster_client_with_one_connection_per_node_is_refused(
        redis_cluster_url, mongo_url) -> None:
    """As ``redis_max_connections=1`` with a cluster URL: its pipelines ask a node for keys
    on a second connection, so even with ``flusher="off"`` the first call failed ("Too
    many connections" loading the scripts)."""
    from redis.cluster import ClusterNode, RedisCluster

    host, port = redis_cluster_url.split("//")[1].split(",")[0].split("/")[0].split(":")
    node = [ClusterNode(host, int(port))]
    with RedisCluster(startup_nodes=node, max_connections=1) as one, \
            RedisCluster(startup_nodes=node, max_connections=2) as two, \
            pymongo.MongoClient(mongo_url) as mongo:
        for flusher in ("auto", "off"):
            with pytest.raises(ConfigurationError, match="one connection per node"):
                DurableSaver(one, mongo, **unique_options(flusher=flusher))
        DurableSaver(two, mongo, **unique_options())


def test_a_call_finding_a_full_pool_says_so(redis_url, mongo_url) -> None:
    """A call refused by the client's full non-blocking pool raises
    ``TierUnavailableError`` naming the pool and what to change, not "did not answer"."""
    from langgraph_durable import TierUnavailableError

    client = redis.Redis.from_url(redis_url, max_connections=1)
    with pymongo.MongoClient(mongo_url) as mongo, \
            DurableSaver(client, mongo, **unique_options(flusher="off")) as saver:
        _put(saver, "warm")
        held = client.connection_pool.get_connection()
        try:
            with pytest.raises(TierUnavailableError, match=r"was not asked \(put\): the Redis "
                               r"client's connection pool had no free connection .*"
                               r"BlockingConnectionPool") as got:
                _put(saver, "refused")
            assert got.value.tier == "hot"
        finally:
            client.connection_pool.release(held)
        _put(saver, "taken")  # the connection back: calls go on
        assert saver.get_tuple({"configurable": {"thread_id": "taken"}}) is not None
    client.close()


def test_the_database_of_the_mongodb_url_is_used(redis_url, mongo_url) -> None:
    opts = unique_options()
    del opts["database"]
    name = "lgd_url_" + opts["key_prefix"]
    with DurableSaver.from_urls(redis_url, with_db(mongo_url, name), **opts) as saver:
        assert saver.config.database == name
        _put(saver, "t")
        saver.flush()
    with pymongo.MongoClient(mongo_url) as client:
        assert client[name]["checkpoints"].count_documents({"thread_id": "t"}) == 1
        assert client["langgraph_durable"]["checkpoints"].count_documents(
            {"thread_id": "t"}) == 0
        client.drop_database(name)


def test_a_database_different_from_the_urls_is_refused(redis_url, mongo_url) -> None:
    with pytest.raises(ConfigurationError, match="two MongoDB databases given: "
                       "database='other' and 'mine' in the MongoDB URL"):
        DurableSaver.from_urls(redis_url, with_db(mongo_url, "mine"), database="other")
    # equal is fine
    saver = DurableSaver.from_urls(redis_url, with_db(mongo_url, "mine"), database="mine")
    assert saver.config.database == "mine"
    saver.close()


def test_the_default_database_of_a_given_client_is_used(redis_url, mongo_url) -> None:
    import redis

    r = redis.Redis.from_url(redis_url)
    m = pymongo.MongoClient(with_db(mongo_url, "clientdb"))
    try:
        assert DurableSaver(r, m).config.database == "clientdb"
        with pytest.raises(ConfigurationError, match="database='x' and 'clientdb' in the "
                           "MongoDB client given"):
            DurableSaver(r, m, database="x")
    finally:
        r.close()
        m.close()


def test_from_conn_string_takes_urls_from_the_environment(redis_url, mongo_url,
                                                         monkeypatch) -> None:
    opts = unique_options()
    monkeypatch.setenv("REDIS_URL", redis_url)
    monkeypatch.setenv("MONGODB_URL", mongo_url)
    with DurableSaver.from_conn_string(**opts) as saver:
        _put(saver, "env")
        assert saver.get_tuple({"configurable": {"thread_id": "env"}}) is not None
    with DurableSaver.from_conn_string(redis_url, mongo_url, **opts) as saver:
        assert saver.get_tuple({"configurable": {"thread_id": "env"}}) is not None


async def test_from_conn_string_as_an_async_context_manager(redis_url, mongo_url) -> None:
    opts = unique_options()
    async with DurableSaver.from_conn_string(redis_url, mongo_url, **opts) as saver:
        await saver.aput({"configurable": {"thread_id": "a", "checkpoint_ns": ""}},
                         empty_checkpoint(), {"step": -1}, {})
        assert (await saver.aget_tuple({"configurable": {"thread_id": "a"}})) is not None


def test_from_conn_string_without_urls_names_what_is_missing(monkeypatch) -> None:
    monkeypatch.delenv("REDIS_URL", raising=False)
    monkeypatch.delenv("MONGODB_URL", raising=False)
    with pytest.raises(ConfigurationError, match=r"set REDIS_URL and MONGODB_URL \(missing: "
                       r"mongo_url\)"):
        DurableSaver.from_conn_string("redis://127.0.0.1:1/0")


def test_the_cli_reads_the_same_environment(redis_url, mongo_url) -> None:
    from langgraph_durable.cli import app

    opts = unique_options()
    env = {"REDIS_URL": redis_url, "MONGODB_URL": with_db(mongo_url, opts["database"]),
           "LGD_KEY_PREFIX": opts["key_prefix"], "LGD_DATABASE": None, "COLUMNS": "200"}
    res = CliRunner().invoke(app, ["status", "--json"], env=env)
    assert res.exit_code == 0, res.output
    assert '"database": "' + opts["database"] + '"' in res.stdout
    assert '"key_prefix": "' + opts["key_prefix"] + '"' in res.stdout
    env["LGD_DATABASE"] = "different"
    res = CliRunner().invoke(app, ["status", "--json"], env=env)
    assert res.exit_code == 1
    assert res.stderr == (f"error: two MongoDB databases given: database='different' and "
                          f"{opts['database']!r} in the MongoDB URL "
                          f"{env['MONGODB_URL']!r}; give one, or make them equal\n")


def test_the_worker_reads_the_same_environment(monkeypatch, capsys) -> None:
    from langgraph_durable.outbox.worker import run

    monkeypatch.setenv("REDIS_URL", "redis://127.0.0.1:1/0")
    monkeypatch.setenv("MONGODB_URL", "mongodb://127.0.0.1:1/urldb")
    monkeypatch.setenv("LGD_FLUSH_BATCH_SIZE", "0")
    assert run([]) == 2
    assert capsys.readouterr().err == (
        "error: invalid environment variable: LGD_FLUSH_BATCH_SIZE='0': Input should be "
        "greater than or equal to 1\n")
    monkeypatch.delenv("LGD_FLUSH_BATCH_SIZE")
    assert run(["--database", "other"]) == 2
    assert capsys.readouterr().err == ("error: two MongoDB databases given: "
                                       "database='other' and 'urldb' in the MongoDB URL; give "
                                       "one, or make them equal\n")


def test_a_misspelled_lgd_variable_is_an_error_naming_it(monkeypatch) -> None:
    monkeypatch.setenv("LGD_KEY_PREFX", "typo")
    with pytest.raises(ConfigurationError) as err:
        env_options()
    assert "LGD_KEY_PREFX (did you mean LGD_KEY_PREFIX?)" in str(err.value)


def test_a_bad_lgd_value_is_a_configuration_error_naming_the_variable(monkeypatch) -> None:
    monkeypatch.setenv("LGD_FLUSH_INTERVAL_S", "abc")
    with pytest.raises(ConfigurationError) as err:
        env_options()
    assert str(err.value).startswith("invalid environment variable: LGD_FLUSH_INTERVAL_S='abc'")


def test_savers_of_two_key_prefixes_cannot_share_collections(redis_url, mongo_url) -> None:
    """Their thread ids would mix in MongoDB, and one's deletes, prune --all and gc would
    act on the other's threads: the second key prefix is refused at set-up."""
    opts = unique_options()
    with DurableSaver.from_urls(redis_url, mongo_url, **opts):
        pass
    other = {**opts, "key_prefix": opts["key_prefix"] + "x"}
    with pytest.raises(ConfigurationError) as err:
        with DurableSaver.from_urls(redis_url, mongo_url, **other):
            pass
    assert f"holds the threads of key_prefix {opts['key_prefix']!r}" in str(err.value)
    with DurableSaver.from_urls(redis_url, mongo_url, **{**other, "collection_prefix": "b_"}):
        pass  # its own collections: fine


def test_test_servers_from_a_mongodb_url_with_a_database_leave_the_database_choice_to_tools(
) -> None:
    from langgraph_durable.testing.launchers import without_database

    assert without_database("mongodb://h:1/mydb?x=1") == "mongodb://h:1/?authSource=mydb&x=1"
    assert without_database("mongodb://u:p@h:1/mydb?authSource=admin") == \
        "mongodb://u:p@h:1/?authSource=admin"
    assert without_database("mongodb://h:1/?x=1") == "mongodb://h:1/?x=1"
    assert without_database("mongodb://h:1") == "mongodb://h:1"


def test_prune_and_delete_for_runs_refuse_a_lone_string(saver) -> None:
    from langgraph_durable import InvalidIdentifierError

    with pytest.raises(InvalidIdentifierError, match=r"pass \['ab'\]"):
        saver.prune("ab", keep_last=3)
    with pytest.raises(InvalidIdentifierError):
        saver.delete_for_runs("run-1")
