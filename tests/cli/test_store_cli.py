"""``langgraph-durable store ...`` and the store's counts in ``status``, against a
``DurableStore`` written through the library: hot (only Redis holds the items) and cold
(flushed, then the store's Redis keys deleted: only MongoDB holds them)."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from typing import Any

import pytest
import redis
from langgraph.checkpoint.serde.encrypted import EncryptedSerializer
from pymongo import MongoClient

from .clikit import Cli

ALICE = ("users", "alice", "memories")
BOB = ("users", "bob", "memories")


@dataclasses.dataclass
class Secret:
    """A type outside the tools' allowlist: shown as a placeholder, never revived."""

    code: str


def _write(cli: Cli, *, flush: bool) -> None:
    """Three items through the API; with ``flush`` in MongoDB before returning, without
    it only in Redis and the outbox (no flusher runs)."""
    with cli.saver(flusher="auto" if flush else "off") as saver:
        store = saver.store()
        store.put(ALICE, "m1", {"text": "likes tea", "kind": "note"})
        store.put(ALICE, "m2", {"text": "lives in Lyon", "kind": "fact"})
        store.put(BOB, "m1", {"text": "likes coffee", "kind": "note", "s": Secret("x")})
        if flush:
            saver.flush()


def _drop_store_keys(cli: Cli) -> int:
    r = redis.Redis.from_url(cli.redis_url)
    keys = list(r.scan_iter(match="{" + cli.opts["key_prefix"] + ":store}*"))
    if keys:
        r.delete(*keys)
    return len(keys)


@pytest.fixture(params=["hot", "cold"])
def written(request: Any, cli: Cli) -> Iterator[str]:
    if request.param == "hot":
        _write(cli, flush=False)
    else:
        _write(cli, flush=True)
        assert _drop_store_keys(cli) >= 3  # the items' keys at least
    yield request.param


def test_reads_of_a_store_written_by_the_api(cli: Cli, written: str) -> None:
    got = cli.json("store", "get", "users.alice.memories", "m1")
    assert (got["namespace"], got["key"], got["value"]) == (
        "users.alice.memories", "m1", {"text": "likes tea", "kind": "note"})
    assert got["created_at"] and got["updated_at"]
    assert cli.json("store", "namespaces") == ["users.alice.memories", "users.bob.memories"]
    assert cli.json("store", "namespaces", "--prefix", "users", "--max-depth", "2") == [
        "users.alice", "users.bob"]
    assert cli.json("store", "namespaces", "--suffix", "memories", "--prefix",
                    "users.bob") == ["users.bob.memories"]
    found = cli.json("store", "search", "users.alice")
    assert [(i["key"], i["value"]["text"]) for i in found] == [
        ("m1", "likes tea"), ("m2", "lives in Lyon")]
    notes = cli.json("store", "search", "users", "--filter", '{"kind": "note"}')
    assert [(i["namespace"], i["key"]) for i in notes] == [
        ("users.alice.memories", "m1"), ("users.bob.memories", "m1")]
    assert len(cli.json("store", "search", "", "--limit", "1", "--offset", "2")) == 1
    # a type outside the allowlist: a placeholder, never revived
    bob = cli.json("store", "get", "users.bob.memories", "m1")
    assert bob["value"]["s"] == (
        "<not decoded: tests.cli.test_store_cli.Secret (not in the allowlist)>")
    table = cli("store", "get", "users.alice.memories", "m2").stdout
    assert "lives in Lyon" in table and "users.alice.memories" in table


def test_get_of_a_missing_item_exits_1(cli: Cli) -> None:
    out = cli("store", "get", "users.nobody", "k", code=1).output
    assert "error: no item 'k' in namespace 'users.nobody'" in out


def test_put_and_delete_through_the_cli(cli: Cli) -> None:
    cli("store", "put", "users.carol", "pref", '{"lang": "fr"}', "--yes")
    with cli.saver(flusher="off") as saver:
        item = saver.store().get(("users", "carol"), "pref")
        assert item is not None and item.value == {"lang": "fr"}
    # flushed before the command ended
    db = MongoClient(cli.mongo_url)[cli.opts["database"]]
    doc = db[_store_collection(cli)].find_one({"key": "pref"})
    assert doc is not None and doc["namespace"] == ["users", "carol"]
    assert cli.json("store", "get", "users.carol", "pref")["value"] == {"lang": "fr"}
    cli("store", "delete", "users.carol", "pref", "--yes")
    with cli.saver(flusher="off") as saver:
        assert saver.store().get(("users", "carol"), "pref") is None
    assert cli.json("store", "namespaces") == []
    out = cli("store", "delete", "users.carol", "pref", "--yes", code=1).output
    assert "no item 'pref' in namespace 'users.carol'" in out


def _store_collection(cli: Cli) -> str:
    with cli.saver(flusher="off") as saver:
        return str(saver.context.collections.store)


def test_writes_ask_first(cli: Cli) -> None:
    out = cli("store", "put", "users.dan", "k", '{"a": 1}', input="n\n", code=1).output
    assert "put 'k' in namespace 'users.dan'?" in out
    _write(cli, flush=False)
    out = cli("store", "delete", "users.alice.memories", "m1", input="n\n", code=1).output
    assert "delete 'm1' from namespace 'users.alice.memories'?" in out
    with cli.saver(flusher="off") as saver:
        store = saver.store()
        assert store.get(("users", "dan"), "k") is None
        assert store.get(ALICE, "m1") is not None
    cli("store", "put", "users.dan", "k", '{"a": 1}', input="y\n")
    assert cli.json("store", "get", "users.dan", "k")["value"] == {"a": 1}


@pytest.mark.parametrize(("namespace", "message"), [
    ("users..alice", "namespace 'users..alice': label 2 is empty"),
    (".users", "namespace '.users': label 1 is empty"),
    ("users.al\x00ice", "namespace 'users.al\\x00ice': label 2 ('al\\x00ice') holds a NUL"),
    ("", "namespace is empty"),
])
def test_a_bad_namespace_is_refused(cli: Cli, namespace: str, message: str) -> None:
    for args in (["get", namespace, "k"], ["put", namespace, "k", "{}", "--yes"],
                 ["delete", namespace, "k", "--yes"]):
        out = cli("store", *args, code=1).output
        assert message in out, (args, out)
    assert "--prefix 'a..b': label 2 is empty" in cli(
        "store", "namespaces", "--prefix", "a..b", code=1).output


def test_bad_values_and_a_query_are_refused_clearly(cli: Cli) -> None:
    assert "the value must be a JSON object" in cli(
        "store", "put", "a", "k", "[1]", "--yes", code=1).output
    assert "JSON value is not JSON" in cli("store", "put", "a", "k", "{x", "--yes",
                                           code=1).output
    assert "--filter must be a JSON object" in cli("store", "search", "a", "--filter", "3",
                                                   code=1).output
    out = " ".join(cli("store", "search", "a", "--query", "tea", code=1).output.split())
    assert "--query needs semantic search, which needs the store's index" in out


def test_status_shows_the_store_counts(cli: Cli) -> None:
    _write(cli, flush=False)
    store = cli.json("status")["store"]
    assert store == {"unflushed": 3, "mongodb_items": 0, "vector_index": None,
                     "outbox": {"entries": 3, "scanned": 3, "complete": True}}
    assert "0 items in MongoDB, 3 unflushed in Redis, 3 outbox entries" in " ".join(
        cli("status").stdout.split())
    with cli.saver(flusher="auto") as saver:
        saver.flush()
    store = cli.json("status")["store"]
    assert (store["mongodb_items"], store["unflushed"], store["outbox"]["entries"]) == (3, 0, 0)
    assert "store" not in cli.json("status", "--probe")


def test_status_tells_store_entries_from_checkpoints(cli: Cli) -> None:
    from .clikit import build_graph, first_input

    with cli.saver(flusher="off") as saver:
        build_graph(saver).invoke(first_input(), {"configurable": {"thread_id": "t"}})
        saver.store().put(ALICE, "m1", {"a": 1})
    data = cli.json("status")
    assert data["outbox"]["length"] > 1
    assert data["store"]["outbox"]["entries"] == 1


def encrypted() -> EncryptedSerializer:
    """The serializer of ``test_an_encrypted_store`` (``--serde`` names this factory)."""
    return EncryptedSerializer.from_pycryptodome_aes(key=b"0123456789abcdef")


def test_an_encrypted_store_reads_with_its_serde_and_deletes_without(cli: Cli) -> None:
    with cli.saver(flusher="auto") as saver:
        saver.store(serde=encrypted()).put(ALICE, "secret", {"pin": "1234"})
    serde = "tests.cli.test_store_cli:encrypted"
    got = cli.json("--serde", serde, "store", "get", "users.alice.memories", "secret")
    assert got["value"] == {"pin": "1234"}
    shown = cli.json("store", "get", "users.alice.memories", "secret")["value"]
    assert shown.startswith("<undecodable msgpack+aes value") and "1234" not in shown
    cli("store", "delete", "users.alice.memories", "secret", "--yes")
    assert cli.json("store", "namespaces") == []
