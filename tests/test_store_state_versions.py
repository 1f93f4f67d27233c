"""Application state versions of the memory store's items (issue 34, item 5), on real
servers: a store with ``state_version=N`` records N with each item it puts (a fifth body
element, the MongoDB field ``sv``); a store of a later version reads an older item through
the ``items`` hooks of ``state_migrations`` (get, search with a filter on the new shape,
search with a query, batches; hot, unflushed, and cold: Redis emptied after a flush; sync
and async), changing nothing stored; a gap or a failing hook names the item; a newer item
is refused unless ``newer_state="read"``; items without a version read as
``unversioned_state_version``; a store without a version writes the bodies of before,
byte for byte; export/import keeps the version.

Without migrations (LangGraph's ``InMemoryStore`` and this store without a version) a v2
reader gets the v1 value as stored: ``value["plan"]`` raises ``KeyError`` and a filter on
the new field finds nothing (``test_without_migrations_the_reader_sees_the_old_shape``).
"""

from __future__ import annotations

import json
from typing import Any

import ormsgpack
import pymongo
import pytest
import redis
from langgraph.store.base import GetOp, SearchOp
from langgraph.store.memory import InMemoryStore

from langgraph_durable import (
    ConfigurationError,
    DurableSaver,
    DurableStore,
    StateMigration,
    StateMigrationError,
    StateVersionError,
)
from langgraph_durable.cli import store_transfer as T
from langgraph_durable.core.item_versions import ItemVersions
from langgraph_durable.core.store_records import HEADER, item_field
from langgraph_durable.plans import store_items as P
from langgraph_durable.testing import drop_key_prefix, unique_options

NS = ("users", "alice")
DIMS = 4


def to_v2(namespace: tuple[str, ...], key: str, value: dict[str, Any]) -> dict[str, Any]:
    """v1 ``{"steps": ["a:done", "b"]}`` -> v2 ``{"plan": ["a", "b"], "done": 1}``."""
    out = dict(value)
    steps = out.pop("steps")
    out["plan"] = [s.removesuffix(":done") for s in steps]
    out["done"] = sum(s.endswith(":done") for s in steps)
    return out


def to_v3(namespace: tuple[str, ...], key: str, value: dict[str, Any]) -> dict[str, Any]:
    """v2 -> v3: the owner (the namespace's last label) is added."""
    return {**value, "owner": namespace[-1]}


V2 = {1: StateMigration(items=to_v2)}
V3 = {1: StateMigration(items=to_v2), 2: StateMigration(items=to_v3)}
V1_ITEMS = {"k1": {"steps": ["a:done", "b"], "text": "1"},
            "k2": {"steps": ["a:done", "b:done"], "text": "2"},
            "k3": {"steps": [], "text": "3"}}


def embed(texts: list[str]) -> list[list[float]]:
    """A deterministic embedding of the text ``n``: ``[1, n, n * n % 7, 1]``."""
    return [[1.0, float(int(t)), float(int(t) ** 2 % 7), 1.0] for t in texts]


INDEX: Any = {"dims": DIMS, "embed": embed, "fields": ["text"]}


@pytest.fixture
def opts() -> dict[str, object]:
    return unique_options()


def _store(redis_url: str, mongo_url: str, opts: dict[str, object],
           **kw: Any) -> DurableStore:
    return DurableStore.from_urls(redis_url, mongo_url, **{**opts, **kw})


def _raw_at(redis_url: str, store: DurableStore, ns: tuple[str, ...], key: str) -> bytes:
    k = P.keys_of(store._ctx, ns)[1].item(item_field(ns, key))
    with redis.Redis.from_url(redis_url) as r:
        got = r.get(k)
    assert got is not None
    return bytes(got)


def _drop_index(redis_url: str, prefix: str) -> None:
    """The Redis vector index of ``prefix`` and its hashes (``{prefix}:vidx``)."""
    with redis.Redis.from_url(redis_url) as r:
        try:
            r.execute_command("FT.DROPINDEX", f"{prefix}:vidx", "DD")
        except redis.ResponseError:
            pass
        stale = list(r.scan_iter(match=f"{prefix}:*", count=1000))
        if stale:
            r.delete(*stale)


def _docs(mongo_url: str, opts: dict[str, object]) -> dict[str, dict[str, Any]]:
    """The store's MongoDB documents by key (namespace NS)."""
    with pymongo.MongoClient(mongo_url) as m:
        return {d["key"]: d for d in m[str(opts["database"])]["store"].find({})}


def _put_v1(redis_url: str, mongo_url: str, opts: dict[str, object], **kw: Any) -> None:
    with _store(redis_url, mongo_url, opts, state_version=1, **kw) as v1:
        for key, value in V1_ITEMS.items():
            v1.put(NS, key, value)
        v1.put(NS, "ttl", {"steps": ["x"], "text": "4"}, ttl=60)


def _cold(redis_url: str, mongo_url: str, opts: dict[str, object]) -> None:
    """Flush everything to MongoDB, then empty the key prefix's Redis keys."""
    with _store(redis_url, mongo_url, {**opts, "flusher": "auto"}) as s:
        s.flush()
    with redis.Redis.from_url(redis_url) as r:
        assert drop_key_prefix(r, str(opts["key_prefix"])) > 0


def _check_v2_reads(store: DurableStore) -> None:
    got = store.get(NS, "k1")
    assert got is not None and got.value == {"plan": ["a", "b"], "done": 1, "text": "1"}
    assert [i.key for i in store.search(NS, filter={"done": 1})] == ["k1"]  # new shape
    assert [i.key for i in store.search(NS, filter={"done": {"$gte": 1}})] == ["k1", "k2"]
    assert store.search(NS, filter={"steps": []}) == []  # the old shape is gone
    found = store.search(NS, limit=10)
    assert [i.key for i in found] == ["k1", "k2", "k3", "ttl"]
    assert all("plan" in i.value and "steps" not in i.value for i in found)
    item, page = store.batch([GetOp(NS, "k2"), SearchOp(NS, {"plan": []}, 10, 0)])
    assert item is not None and item.value["plan"] == ["a", "b"]  # type: ignore[union-attr]
    assert [i.key for i in page] == ["k3"]  # type: ignore[union-attr]


def test_v1_items_read_by_a_v2_store_hot_unflushed_and_cold(redis_url, mongo_url,
                                                             opts) -> None:
    off = {**opts, "flusher": "off"}
    _put_v1(redis_url, mongo_url, off)
    assert _docs(mongo_url, opts) == {}
    with _store(redis_url, mongo_url, off, state_version=2, state_migrations=V2) as v2:
        before = {k: _raw_at(redis_url, v2, NS, k) for k in [*V1_ITEMS, "ttl"]}
        assert all(ormsgpack.unpackb(b[HEADER:])[4] == 1 for b in before.values())
        _check_v2_reads(v2)  # unflushed: MongoDB holds nothing yet
        after = {k: _raw_at(redis_url, v2, NS, k) for k in [*V1_ITEMS, "ttl"]}
        for k in V1_ITEMS:
            assert after[k] == before[k]  # a read writes nothing
        # the TTL refresh of a read rewrites the header's expiry, the stored body stays v1
        assert after["ttl"][HEADER:] == before["ttl"][HEADER:]
    _cold(redis_url, mongo_url, opts)
    docs = _docs(mongo_url, opts)
    assert {d["sv"] for d in docs.values()} == {1}
    with _store(redis_url, mongo_url, opts, state_version=2, state_migrations=V2) as v2:
        _check_v2_reads(v2)  # MongoDB alone
        v2.flush()
        assert _docs(mongo_url, opts)["k1"]["vb"] == docs["k1"]["vb"]
        assert _docs(mongo_url, opts)["k1"]["sv"] == 1
        # the application's put of the value read stores it in version 2
        got = v2.get(NS, "k1")
        assert got is not None
        v2.put(NS, "k1", got.value)
        assert ormsgpack.unpackb(_raw_at(redis_url, v2, NS, "k1")[HEADER:])[4] == 2
        v2.flush()
        assert _docs(mongo_url, opts)["k1"]["sv"] == 2
    with _store(redis_url, mongo_url, opts, state_version=2) as plain:  # no migrations
        got = plain.get(NS, "k1")
        assert got is not None and got.value == {"plan": ["a", "b"], "done": 1, "text": "1"}


async def test_async_v1_items_read_by_a_v2_store_hot_and_cold(redis_url, mongo_url,
                                                              opts) -> None:
    async with _store(redis_url, mongo_url, opts, state_version=1) as v1:
        for key, value in V1_ITEMS.items():
            await v1.aput(NS, key, value)
    async with _store(redis_url, mongo_url, opts, state_version=2,
                      state_migrations=V2) as v2:
        for cold in (False, True):
            got = await v2.aget(NS, "k2")
            assert got is not None and got.value == {"plan": ["a", "b"], "done": 2,
                                                     "text": "2"}
            found = await v2.asearch(NS, filter={"done": {"$lt": 2}})
            assert [i.key for i in found] == ["k1", "k3"]
            item, page = await v2.abatch([GetOp(NS, "k3"), SearchOp(NS, {"done": 0}, 5, 0)])
            assert item is not None and item.value == {"plan": [], "done": 0, "text": "3"}  # type: ignore[union-attr]
            assert [i.key for i in page] == ["k3"]  # type: ignore[union-attr]
            if not cold:
                await v2.aflush()
                with redis.Redis.from_url(redis_url) as r:
                    assert drop_key_prefix(r, str(opts["key_prefix"])) > 0
    assert {d["sv"] for d in _docs(mongo_url, opts).values()} == {1}


@pytest.mark.parametrize("where", ["exact", "redis"])
def test_a_search_with_a_query_migrates_and_keeps_the_embeddings(
        request: pytest.FixtureRequest, where: str, mongo_url: str,
        opts: dict[str, object]) -> None:
    """The exact path and the Redis Query Engine's index (``redis_stack_url``)."""
    redis_url = request.getfixturevalue("redis_stack_url" if where == "redis"
                                        else "redis_url")
    if where == "redis":
        request.addfinalizer(lambda: _drop_index(redis_url, str(opts["key_prefix"])))
    _put_v1(redis_url, mongo_url, opts, index=INDEX)
    vec = {k: d["vec"] for k, d in _docs(mongo_url, opts).items()}
    with _store(redis_url, mongo_url, opts, index=INDEX, vector_search=where,
                state_version=2, state_migrations=V2) as v2:
        assert v2.vector_search == where
        for cold in (False, True):
            found = v2.search(NS, query="2", limit=2)
            assert [i.key for i in found] == ["k2", "k3"]
            assert found[0].value == {"plan": ["a", "b"], "done": 2, "text": "2"}
            found = v2.search(NS, query="2", filter={"done": 1}, limit=2)
            assert [i.key for i in found] == ["k1"]
            if not cold:
                v2.flush()
                with redis.Redis.from_url(redis_url) as r:
                    drop_key_prefix(r, str(opts["key_prefix"]))
    # a migration does not recompute embeddings: the next put does
    assert {k: d["vec"] for k, d in _docs(mongo_url, opts).items()} == vec


def test_a_v3_chain_and_steps_without_an_items_hook(redis_url, mongo_url, opts) -> None:
    _put_v1(redis_url, mongo_url, opts)
    with _store(redis_url, mongo_url, opts, state_version=2) as v2:
        v2.put(NS, "v2", {"plan": ["z"], "done": 0, "text": "5"})
    with _store(redis_url, mongo_url, opts, state_version=3, state_migrations=V3) as v3:
        got = v3.get(NS, "k1")
        assert got is not None
        assert got.value == {"plan": ["a", "b"], "done": 1, "text": "1", "owner": "alice"}
        got = v3.get(NS, "v2")  # one step only
        assert got is not None and got.value["owner"] == "alice" and "steps" not in got.value
        assert [i.key for i in v3.search(NS, filter={"owner": "alice", "done": 2})] == ["k2"]
    # a plain function is a checkpoint values hook: items keep their value for its step
    mixed = {1: StateMigration(items=to_v2), 2: lambda values: {**values, "x": 1}}
    with _store(redis_url, mongo_url, opts, state_version=3, state_migrations=mixed) as v3:
        got = v3.get(NS, "k1")
        assert got is not None and got.value == {"plan": ["a", "b"], "done": 1, "text": "1"}


def test_a_gap_or_a_failing_hook_names_the_item_and_changes_nothing(redis_url, mongo_url,
                                                                   opts) -> None:
    _put_v1(redis_url, mongo_url, opts)
    with _store(redis_url, mongo_url, opts) as s:
        s.flush()
        before = {k: _raw_at(redis_url, s, NS, k) for k in [*V1_ITEMS, "ttl"]}
    docs = _docs(mongo_url, opts)
    gap = {2: StateMigration(items=to_v3)}
    with _store(redis_url, mongo_url, opts, state_version=3, state_migrations=gap) as v3:
        with pytest.raises(StateMigrationError) as caught:
            v3.get(NS, "ttl")
        err = caught.value
        assert (err.namespace, err.key, err.stored, err.running) == (NS, "ttl", 1, 3)
        assert err.missing == 1 and err.step == (1, 2)
        assert "'ttl'" in str(err) and "('users', 'alice')" in str(err)
        assert "state_migrations[1]" in str(err)
        with pytest.raises(StateMigrationError, match="no migration from 1 to 2"):
            v3.search(NS, filter={"done": 1})

    def broken(namespace: tuple[str, ...], key: str, value: dict[str, Any]) -> dict[str, Any]:
        raise KeyError("plan")

    bad = {1: StateMigration(items=broken)}
    with _store(redis_url, mongo_url, opts, state_version=2, state_migrations=bad) as v2:
        with pytest.raises(StateMigrationError) as caught:
            v2.get(NS, "k2")
        err = caught.value
        assert isinstance(err.__cause__, KeyError) and err.step == (1, 2)
        assert (err.namespace, err.key) == (NS, "k2") and "raised KeyError" in str(err)
        with pytest.raises(StateMigrationError):
            v2.batch([GetOp(NS, "k1"), SearchOp(NS, None, 10, 0)])
        with pytest.raises(StateMigrationError):
            v2.search(NS, limit=10)
    not_a_dict = {1: StateMigration(items=lambda ns, k, v: [v])}  # type: ignore[arg-type,return-value]
    with _store(redis_url, mongo_url, opts, state_version=2,
                state_migrations=not_a_dict) as v2:
        with pytest.raises(StateMigrationError, match="returned list, not a dict"):
            v2.get(NS, "k1")
        v2.flush()
        # nothing stored changed: Redis's records (the TTL item was not refreshed) and
        # MongoDB's documents
        assert {k: _raw_at(redis_url, v2, NS, k) for k in before} == before
    assert _docs(mongo_url, opts) == docs


def test_a_newer_item_is_refused_unless_newer_state_read(redis_url, mongo_url,
                                                         opts) -> None:
    with _store(redis_url, mongo_url, opts, state_version=2) as v2:
        v2.put(NS, "new", {"plan": ["a"], "done": 0})
    for cold in (False, True):
        if cold:
            _cold(redis_url, mongo_url, opts)
        with _store(redis_url, mongo_url, opts, state_version=1) as v1:
            with pytest.raises(StateVersionError) as caught:
                v1.get(NS, "new")
            assert not isinstance(caught.value, StateMigrationError)
            assert (caught.value.namespace, caught.value.key) == (NS, "new")
            assert (caught.value.stored, caught.value.running) == (2, 1)
            assert "newer_state='read'" in str(caught.value)
            with pytest.raises(StateVersionError):
                v1.search(NS)
        with _store(redis_url, mongo_url, opts, state_version=1, newer_state="read") as v1:
            got = v1.get(NS, "new")
            assert got is not None and got.value == {"plan": ["a"], "done": 0}
            assert [i.key for i in v1.search(NS)] == ["new"]


def test_items_without_a_version_and_unchanged_bodies(redis_url, mongo_url, opts) -> None:
    with _store(redis_url, mongo_url, opts) as plain:
        assert plain.state_version is None
        plain.put(NS, "old", {"steps": ["a:done"], "text": "1"})
        plain.put(NS, "ttl", {"steps": [], "text": "2"}, ttl=5)
        raw = _raw_at(redis_url, plain, NS, "old")
        typed = plain._answers.serde.dumps_typed({"steps": ["a:done"], "text": "1"})
        # the body of the releases before state versions, byte for byte
        assert raw[HEADER:] == ormsgpack.packb([[typed[0], typed[1]], None, None, []])
        assert ormsgpack.unpackb(_raw_at(redis_url, plain, NS, "ttl")[HEADER:])[1:] == \
            [5, None, []]
        plain.flush()
        assert all("sv" not in d for d in _docs(mongo_url, opts).values())
    with _store(redis_url, mongo_url, opts, state_version=1) as v1:
        v1.put(NS, "v1", {"steps": ["a:done"], "text": "1"})
        versioned = _raw_at(redis_url, v1, NS, "v1")
        # a versioned body is the same four elements and the version
        assert versioned[HEADER:] == ormsgpack.packb([[typed[0], typed[1]], None, None, [],
                                                     1])
        with pytest.raises(ValueError):  # how an older release's unpack refuses it
            _a, _b, _c, _d = ormsgpack.unpackb(versioned[HEADER:])
    for cold in (False, True):
        if cold:
            _cold(redis_url, mongo_url, opts)
        with _store(redis_url, mongo_url, opts, state_version=2, state_migrations=V2) as v2:
            got = v2.get(NS, "old")  # unversioned reads as 1
            assert got is not None and got.value == {"plan": ["a"], "done": 1, "text": "1"}
        with _store(redis_url, mongo_url, opts, state_version=2, state_migrations=V2,
                    unversioned_state_version=2) as v2:
            got = v2.get(NS, "old")
            assert got is not None and got.value == {"steps": ["a:done"], "text": "1"}


def test_without_migrations_the_reader_sees_the_old_shape(redis_url, mongo_url,
                                                          opts) -> None:
    mem = InMemoryStore()
    mem.put(NS, "k1", V1_ITEMS["k1"])
    got = mem.get(NS, "k1")
    assert got is not None
    with pytest.raises(KeyError):
        got.value["plan"]
    assert mem.search(NS, filter={"done": 1}) == []
    _put_v1(redis_url, mongo_url, opts)
    with _store(redis_url, mongo_url, opts) as plain:  # no state version: as stored
        found = plain.get(NS, "k1")
        assert found is not None and found.value == V1_ITEMS["k1"]
        assert plain.search(NS, filter={"done": 1}) == []


def test_the_store_of_a_saver_takes_its_version_and_registry(redis_url, mongo_url,
                                                             opts) -> None:
    _put_v1(redis_url, mongo_url, opts)

    def values(v: dict[str, Any]) -> dict[str, Any]:
        return v

    registry = {1: StateMigration(values=values, items=to_v2)}
    with DurableSaver.from_urls(redis_url, mongo_url, state_version=2,
                                state_migrations=registry, **opts) as saver:
        store = saver.store()
        assert store.state_version == 2 and store.state_versions.migrations[1] is registry[1]
        got = store.get(NS, "k1")
        assert got is not None and got.value["plan"] == ["a", "b"]
        store.put(NS, "fresh", {"plan": [], "done": 0})
        assert ormsgpack.unpackb(_raw_at(redis_url, store, NS, "fresh")[HEADER:])[4] == 2
        own = saver.store(state_version=1)  # its own options win
        with pytest.raises(StateVersionError):
            own.get(NS, "fresh")
        # the tools' store (cli/store_commands.py): values as stored, puts still record the version
        tool = saver.store(read_as_stored=True)
        got = tool.get(NS, "k1")
        assert got is not None and got.value == V1_ITEMS["k1"]
        assert [i.key for i in tool.search(NS, filter={"steps": []})] == ["k3"]
        tool.put(NS, "by-tool", {"plan": []})
        assert ormsgpack.unpackb(_raw_at(redis_url, tool, NS, "by-tool")[HEADER:])[4] == 2
    with pytest.raises(ConfigurationError, match="state_version"):
        _store(redis_url, mongo_url, opts, state_version=0)
    with pytest.raises(ConfigurationError, match="state_migrations"):
        DurableStore.from_urls(redis_url, mongo_url, state_migrations={0: to_v2}, **opts)
    with pytest.raises(ConfigurationError, match="items"):
        DurableStore.from_urls(redis_url, mongo_url,
                               state_migrations={1: StateMigration(items="x")},  # type: ignore[arg-type]
                               **opts)
    with pytest.raises(ConfigurationError, match="newer_state"):
        ItemVersions(2, newer="ignore")  # type: ignore[arg-type]


def test_export_and_import_keep_the_version(redis_url, mongo_url, opts) -> None:
    _put_v1(redis_url, mongo_url, opts)
    with _store(redis_url, mongo_url, opts) as plain:
        plain.put(("other",), "u", {"steps": []})  # no version
        plain.flush()
        db = plain._runtime.clients.sync.db
        lines = list(T.export_lines(db, plain._ctx.collections.store, (), plain._now_ms()))
    header, records = T.parse(lines, "export")
    assert header["format_version"] == 6
    assert {(tuple(r["namespace"]), r["key"]): r.get("sv") for r in records} == {
        **{(NS, k): 1 for k in [*V1_ITEMS, "ttl"]}, (("other",), "u"): None}
    with _store(redis_url, mongo_url, opts) as plain:  # format 5 without versions
        db = plain._runtime.clients.sync.db
        only = list(T.export_lines(db, plain._ctx.collections.store, ("other",),
                                   plain._now_ms()))
    assert json.loads(only[0])["format_version"] == 5 and "sv" not in json.loads(only[1])
    bad = [lines[0], json.dumps({**json.loads(lines[1]), "sv": 0}), *lines[2:]]
    with pytest.raises(T.CliError, match="sv must be"):
        T.parse(bad, "bad")
    other = unique_options()
    with DurableSaver.from_urls(redis_url, mongo_url, **other) as saver:
        T.import_store(saver, records, "export", yes=True)
    assert {k: d.get("sv") for k, d in _docs(mongo_url, other).items()} == {
        **{k: 1 for k in [*V1_ITEMS, "ttl"]}, "u": None}
    with _store(redis_url, mongo_url, other, state_version=2, state_migrations=V2) as v2:
        got = v2.get(NS, "k1")
        assert got is not None and got.value == {"plan": ["a", "b"], "done": 1, "text": "1"}


def test_bodies_and_item_versions_without_servers() -> None:
    """The pure parts: a body packs four elements without a version, five with one, and
    refuses a fifth that is no version; ``ItemVersions.migrate`` leaves a value alone
    when there is nothing to do (the same object) and names the item otherwise."""
    from langgraph_durable import CorruptRecordError
    from langgraph_durable.core.store_records import StoreBody

    plain = StoreBody(("json", b"{}"), 5.0, b"", ())
    assert len(ormsgpack.unpackb(plain.pack())) == 4
    assert StoreBody.unpack(plain.pack(), "x") == plain
    versioned = plain._replace(state_version=3)
    assert ormsgpack.unpackb(versioned.pack())[4] == 3
    assert StoreBody.unpack(versioned.pack(), "x") == versioned
    for bad in (0, True, "2", None):
        raw = ormsgpack.packb([["json", b"{}"], None, None, [], bad])
        with pytest.raises(CorruptRecordError, match="state version"):
            StoreBody.unpack(raw, "'k' of namespace ('a',)")
    value = {"steps": []}
    assert ItemVersions().migrate(NS, "k", 1, value) is value
    assert ItemVersions(2, V2).migrate(NS, "k", 2, value) is value
    assert ItemVersions(2, V2, as_stored=True).migrate(NS, "k", 1, value) is value
    assert ItemVersions(2, V2).migrate(NS, "k", None, value) == {"plan": [], "done": 0}
    assert ItemVersions(2, V2, unversioned=2).migrate(NS, "k", None, value) is value
    assert ItemVersions(1, newer="read").migrate(NS, "k", 5, value) is value
    with pytest.raises(StateVersionError, match=r"'k' of namespace \('users', 'alice'\)"):
        ItemVersions(1).migrate(NS, "k", 2, value)
