"""Mistakes in the options of the library's constructors are ``ConfigurationError``s naming
the option and the likely fix, as the ``LGD_*`` variables already are (issue 21 item 9)."""

from __future__ import annotations

import pytest
import redis

import langgraph_durable
from langgraph_durable import ConfigurationError, DurableSaver
from langgraph_durable.errors import ReplicationTimeoutError


def test_a_misspelt_keyword_option_names_the_closest_option(redis_url: str,
                                                            mongo_url: str) -> None:
    with pytest.raises(ConfigurationError) as err:
        DurableSaver.from_urls(redis_url, mongo_url, flush_intervl_s=1)
    assert str(err.value) == ("unknown option flush_intervl_s=1 (did you mean "
                              "flush_interval_s?)")
    with pytest.raises(ConfigurationError) as err:
        DurableSaver(redis.Redis.from_url(redis_url), None, keyprefix="app")
    assert str(err.value) == "unknown option keyprefix='app' (did you mean key_prefix?)"
    with pytest.raises(ConfigurationError, match=r"^unknown option zzz=1 \(the options are "
                       r"the DurableConfig fields: blob_retries, blob_timeout_s, claim_idle_s, "):
        DurableSaver.from_urls(redis_url, mongo_url, zzz=1)


def test_a_key_prefix_with_a_colon_names_an_allowed_spelling(redis_url: str,
                                                            mongo_url: str) -> None:
    with pytest.raises(ConfigurationError) as err:
        DurableSaver.from_urls(redis_url, mongo_url, key_prefix="my:app")
    assert str(err.value).startswith("invalid option key_prefix='my:app': String should "
                                     "match pattern")
    assert str(err.value).endswith("(a key_prefix is 1 to 64 letters, digits, '_', '.' and "
                                   "'-', with no ':', so no two prefixes and thread ids make "
                                   "the same Redis key; e.g. 'my-app')")
    with pytest.raises(ConfigurationError, match=r"invalid option flush_batch_size=0: Input "
                       r"should be greater than or equal to 1; unknown option x=2"):
        DurableSaver.from_urls(redis_url, mongo_url, flush_batch_size=0, x=2)


@pytest.mark.parametrize("url, fix", [
    ("mongodb//127.0.0.1:27017/app", "; did you mean 'mongodb://127.0.0.1:27017/app'?"),
    ("mongodb+srv:/u:secret@cluster0.example.net/app",
     "; did you mean 'mongodb+srv://***@cluster0.example.net/app'?"),
    ("redis://127.0.0.1:6379/0",
     "; that is a Redis URL: are the Redis and MongoDB URLs swapped?"),
    ("localhost:27017", ""),
])
def test_a_bad_mongodb_url_names_the_fix(redis_url: str, url: str, fix: str) -> None:
    with pytest.raises(ConfigurationError) as err:
        DurableSaver.from_urls(redis_url, url)
    shown = url.replace("u:secret@", "***@")
    assert str(err.value) == (
        f"MongoDB URL {shown!r} is not a MongoDB connection string: it must begin with "
        "mongodb:// or mongodb+srv:// (e.g. mongodb://localhost:27017/myappdb)" + fix)
    assert "secret" not in str(err.value)


def test_a_mongodb_url_pymongo_refuses_is_a_configuration_error(redis_url: str) -> None:
    with pytest.raises(ConfigurationError, match=r"^MongoDB URL 'mongodb://\*\*\*@h:99999/': Port "
                       r"must be an integer between 0 and 65535$"):
        DurableSaver.from_urls(redis_url, "mongodb://u:pw@h:99999/")


def test_replication_timeout_error_is_importable_from_the_package() -> None:
    assert langgraph_durable.ReplicationTimeoutError is ReplicationTimeoutError
    assert "ReplicationTimeoutError" in langgraph_durable.__all__


@pytest.mark.parametrize("options, why", [
    ({"database": "my app"}, "not a MongoDB database name: it contains ' '"),
    ({"database": "app.prod"}, "not a MongoDB database name: it contains '.'"),
    ({"database": "a/b$"}, "not a MongoDB database name: it contains '$', '/'"),
    ({"database": "d" * 64}, "not a MongoDB database name: it is 64 bytes long"),
    ({"collection_prefix": "$app_"}, "the collections <collection_prefix>checkpoints"),
    ({"collection_prefix": "system."}, "the collections <collection_prefix>checkpoints"),
])
def test_a_database_or_collection_prefix_mongodb_refuses_is_a_configuration_error(
        redis_url: str, mongo_url: str, options: dict[str, str], why: str) -> None:
    (name, value), = options.items()
    with pytest.raises(ConfigurationError) as err:
        DurableSaver.from_urls(redis_url, mongo_url, key_prefix="never-bound", **options)
    assert str(err.value).startswith(f"invalid option {name}={value!r}: Value error, {why}")
    assert redis.Redis.from_url(redis_url).exists("{never-bound:binding}") == 0


@pytest.mark.parametrize(("option", "url_query", "message"), [
    ({"decode_responses": True}, "decode_responses=true",
     "decode_responses=True is not supported (the saver stores and reads bytes); build "
     "the client without it"),
    ({"protocol": 3}, "protocol=3",
     "protocol=3 (RESP3) is not supported; use protocol=2, redis-py's default"),
])
def test_a_redis_client_decoding_replies_or_speaking_resp3_is_refused_when_given(
        redis_url: str, mongo_url: str, option: dict[str, object], url_query: str,
        message: str) -> None:
    import pymongo
    import redis.asyncio

    m = pymongo.MongoClient(mongo_url)
    for client in (redis.Redis.from_url(redis_url, **option),
                   redis.asyncio.Redis.from_url(redis_url, **option)):
        with pytest.raises(ConfigurationError, match=r"^Redis client .*: ") as err:
            DurableSaver(client, m if isinstance(client, redis.Redis) else
                         pymongo.AsyncMongoClient(mongo_url))
        assert str(err.value).endswith(message)
    with pytest.raises(ConfigurationError) as err:
        DurableSaver.from_urls(f"{redis_url}?{url_query}", mongo_url)
    assert str(err.value).endswith(message)
    m.close()


def test_urls_given_to_the_constructor_name_from_urls(redis_url: str, mongo_url: str) -> None:
    # the constructor takes clients; a newcomer passing URLs got "string indices must be
    # integers" from deep inside; the URL (it may hold a password) is not echoed
    with pytest.raises(ConfigurationError) as caught:
        DurableSaver(redis_url, mongo_url)
    assert str(caught.value) == (
        "DurableSaver(redis=...) takes a client, got a str (a URL?): build the saver from "
        "URLs with DurableSaver.from_urls(redis_url, mongo_url, ...) or "
        "DurableSaver.from_conn_string()")
    with pytest.raises(ConfigurationError, match=r"DurableSaver\(mongo=\.\.\.\)"):
        DurableSaver(None, mongo_url)


def test_a_database_in_the_mongodb_url_mongodb_refuses_is_a_configuration_error(
        redis_url: str, mongo_url: str) -> None:
    url = mongo_url.split("?")[0].rstrip("/").replace("mongodb://", "mongodb://u:secret@")
    with pytest.raises(ConfigurationError) as err:
        DurableSaver.from_urls(redis_url, url + "/bad.db")
    message = str(err.value)
    assert message.startswith("the database 'bad.db' in the MongoDB URL 'mongodb://***@")
    assert message.endswith("/bad.db': not a MongoDB database name: it contains '.' (a "
                            "database name has at most 63 bytes and none of / \\ . space \" "
                            "$ or NUL)")
    assert "secret" not in message


def _first_put(saver: DurableSaver) -> None:
    saver.put({"configurable": {"thread_id": "t", "checkpoint_ns": ""}},
              {"v": 1, "id": "1f000000-0000-6000-8000-000000000001",
               "ts": "2026-12-05T00:00:00+00:00", "channel_values": {}, "channel_versions": {},
               "versions_seen": {}, "pending_sends": []}, {}, {})  # type: ignore[typeddict-item]


async def test_a_redis_database_number_the_server_refuses_is_a_configuration_error(
        redis_url: str, mongo_url: str) -> None:
    url = redis_url.rsplit("/", 1)[0] + "/99"  # the server has 16 databases
    saver = DurableSaver.from_urls(url, mongo_url, flusher="off")
    try:
        with pytest.raises(ConfigurationError, match=(
                r"^Redis .* refused the database number of its URL \(.*\): DB index is out "
                r"of range\. Use a number below the server's `databases` setting")):
            _first_put(saver)
        with pytest.raises(ConfigurationError, match="refused the database number"):
            await saver.aget_tuple({"configurable": {"thread_id": "t"}})
    finally:
        saver.close(drain_timeout_s=0)
