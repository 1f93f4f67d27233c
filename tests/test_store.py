"""DurableStore, LangGraph's long-term memory store on the saver's tiers: put / get /
delete / search / list_namespaces in Redis (hot), from MongoDB alone (cold: flushed, then
the key prefix's Redis keys deleted), before any flush (read-your-writes), with MongoDB
down, and no resurrection of a delete by a late copy of an older version."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pymongo
import pytest
import redis
from langgraph.store.base import InvalidNamespaceError

from langgraph_durable import ConfigurationError, DurableStore, TierUnavailableError
from langgraph_durable.core.store_records import StoreRecord, item_field
from langgraph_durable.durable.store_docs import store_doc, upsert_record
from langgraph_durable.plans.context import Clock
from langgraph_durable.plans.fence import bulk_ignoring_newer
from langgraph_durable.testing import drop_key_prefix, mongo_server, unique_options, wait_for


@pytest.fixture
def opts() -> dict[str, object]:
    return unique_options()


@pytest.fixture
def store(redis_url: str, mongo_url: str, opts: dict[str, object]) -> Iterator[DurableStore]:
    with DurableStore.from_urls(redis_url, mongo_url, **opts) as s:
        yield s


def _fill(store: DurableStore) -> None:
    store.put(("users", "u1"), "prefs", {"theme": "dark", "size": 3})
    store.put(("users", "u1"), "notes", {"text": "likes tea", "size": 1})
    store.put(("users", "u2"), "prefs", {"theme": "light", "size": 5, "n": {"a": 1}})
    store.put(("docs",), "d1", {"text": "hello"})


def _keys(items: list) -> list[tuple[tuple[str, ...], str]]:
    return [(tuple(i.namespace), i.key) for i in items]


def _check_answers(store: DurableStore) -> None:
    item = store.get(("users", "u1"), "prefs")
    assert item is not None and item.value == {"theme": "dark", "size": 3}
    assert item.namespace == ("users", "u1") and item.key == "prefs"
    assert item.created_at.tzinfo is not None and item.updated_at >= item.created_at
    assert store.get(("users", "u1"), "nope") is None
    assert _keys(store.search(("users",))) == [
        (("users", "u1"), "prefs"), (("users", "u1"), "notes"), (("users", "u2"), "prefs")]
    assert _keys(store.search(("users",), filter={"size": {"$gte": 3}})) == [
        (("users", "u1"), "prefs"), (("users", "u2"), "prefs")]
    assert _keys(store.search(("users",), filter={"theme": {"$ne": "dark"}})) == [
        (("users", "u1"), "notes"), (("users", "u2"), "prefs")]
    assert _keys(store.search(("users",), filter={"n": {"a": 1}})) == [
        (("users", "u2"), "prefs")]
    assert _keys(store.search((), limit=2, offset=1)) == [
        (("users", "u1"), "prefs"), (("users", "u1"), "notes")]
    assert store.list_namespaces() == [("docs",), ("users", "u1"), ("users", "u2")]
    assert store.list_namespaces(prefix=("users",), max_depth=1) == [("users",)]
    assert store.list_namespaces(suffix=("*", "u2")) == [("users", "u2")]
    assert store.list_namespaces(limit=1, offset=1) == [("users", "u1")]


def test_put_get_search_list_namespaces_hot_then_cold(store, redis_url, opts) -> None:
    _fill(store)
    store.put(("gone",), "x", {"v": 1})
    store.delete(("gone",), "x")
    _check_answers(store)
    assert store.get(("gone",), "x") is None
    store.flush()
    with redis.Redis.from_url(redis_url) as r:
        assert drop_key_prefix(r, str(opts["key_prefix"])) > 0
    _check_answers(store)  # MongoDB alone
    assert store.get(("gone",), "x") is None


async def test_async_put_get_delete_search_and_cold_reads(redis_url, mongo_url) -> None:
    opts = unique_options()
    async with DurableStore.from_urls(redis_url, mongo_url, **opts) as store:
        await store.aput(("a", "b"), "k", {"v": 1})
        await store.aput(("a", "c"), "k", {"v": 2})
        await store.aput(("a", "b"), "k", {"v": 3})  # an update keeps its place
        await store.adelete(("a", "c"), "k")
        got = await store.aget(("a", "b"), "k")
        assert got is not None and got.value == {"v": 3}
        assert _keys(await store.asearch(("a",))) == [(("a", "b"), "k")]
        assert await store.alist_namespaces() == [("a", "b")]
        await store.aflush()
        with redis.Redis.from_url(redis_url) as r:
            drop_key_prefix(r, str(opts["key_prefix"]))
        got = await store.aget(("a", "b"), "k")
        assert got is not None and got.value == {"v": 3}
        assert await store.aget(("a", "c"), "k") is None
        assert await store.alist_namespaces() == [("a", "b")]


def test_reads_see_unflushed_writes(redis_url, mongo_url) -> None:
    opts = unique_options(flusher="off")
    with DurableStore.from_urls(redis_url, mongo_url, **opts) as store:
        _fill(store)
        with pymongo.MongoClient(mongo_url) as m:
            assert m[str(opts["database"])]["store"].count_documents({}) == 0
        _check_answers(store)
    # flushed by a second store (its flusher), then written over and deleted unflushed
    with DurableStore.from_urls(redis_url, mongo_url, **{**opts, "flusher": "auto"}) as s2:
        s2.flush()
    with DurableStore.from_urls(redis_url, mongo_url, **opts) as store:
        store.delete(("users", "u2"), "prefs")
        store.put(("users", "u1"), "prefs", {"theme": "blue", "size": 0})
        assert store.list_namespaces() == [("docs",), ("users", "u1")]
        assert _keys(store.search(("users",), filter={"size": {"$lt": 2}})) == [
            (("users", "u1"), "prefs"), (("users", "u1"), "notes")]
        assert store.get(("users", "u2"), "prefs") is None
        with pymongo.MongoClient(mongo_url) as m:
            assert m[str(opts["database"])]["store"].count_documents({"dead": True}) == 0


def test_namespace_labels_are_validated(store) -> None:
    with pytest.raises(InvalidNamespaceError):
        store.put(("langgraph", "x"), "k", {})
    with pytest.raises(InvalidNamespaceError):
        store.put(("a.b",), "k", {})
    with pytest.raises(InvalidNamespaceError):
        store.put(("a", ""), "k", {})
    with pytest.raises(InvalidNamespaceError):
        store.search(("a.b",))


def test_a_nul_in_a_label_or_a_key_is_refused_before_anything_is_written(
        store, redis_url, opts) -> None:
    from langgraph.store.base import PutOp

    from langgraph_durable import InvalidIdentifierError

    with pytest.raises(InvalidNamespaceError, match="NUL"):
        store.put(("a\x00b",), "k", {"v": 1})
    with pytest.raises(InvalidNamespaceError, match="NUL"):
        store.batch([PutOp(("a", "b\x00"), "k", {"v": 1})])
    with pytest.raises(InvalidIdentifierError, match="'k\\\\x00x' of namespace \\('a',\\)"):
        store.put(("a",), "k\x00x", {"v": 1})
    with pytest.raises(InvalidIdentifierError):  # the whole batch is refused
        store.batch([PutOp(("a",), "fine", {"v": 1}), PutOp(("a",), "\x00", {"v": 2})])
    with pytest.raises(InvalidIdentifierError):
        store.get(("a",), "k\x00x")
    # a lone surrogate has no UTF-8 form (a bare TypeError of the encoder before); a key
    # that is not a str (a raw PutOp) is named too
    with pytest.raises(InvalidNamespaceError, match="lone surrogate"):
        store.put(("a\ud800",), "k", {"v": 1})
    with pytest.raises(InvalidIdentifierError, match="lone surrogate"):
        store.put(("a",), "k\ud800", {"v": 1})
    with pytest.raises(InvalidIdentifierError) as got:
        store.batch([PutOp(("a",), 7, {"v": 1})])  # type: ignore[arg-type]
    assert str(got.value) == "store item key 7 of namespace ('a',) is of type int, not str"
    from langgraph_durable.errors import SerializationError
    with pytest.raises(SerializationError, match="store item 'k' of namespace \\('a',\\): "
                       "its value cannot be serialized"):
        store.put(("a",), "k", {"v": object()})
    assert isinstance(InvalidIdentifierError("x"), ValueError)
    with redis.Redis.from_url(redis_url) as r:
        assert list(r.scan_iter(match="{" + f"{opts['key_prefix']}:store}}*")) == []
    assert store.search(()) == [] and store.list_namespaces() == []


def test_puts_keep_working_while_mongodb_is_down(redis_url) -> None:
    opts = unique_options(server_selection_timeout_s=0.3)
    with mongo_server() as ms:
        with DurableStore.from_urls(redis_url, ms.url, **opts) as store:
            store.put(("m",), "before", {"v": 0})
            store.flush()
            ms.stop()
            for i in range(20):
                store.put(("m",), f"k{i}", {"v": i})
            store.delete(("m",), "before")
            got = store.get(("m",), "k7")
            assert got is not None and got.value == {"v": 7}
            with pytest.raises(TierUnavailableError):
                store.search(("m",))
            ms.start()
            wait_for(lambda: store.runtime.stats()["outbox_length"] == 0, 30,
                     "the outbox to drain once MongoDB is back")
            with redis.Redis.from_url(redis_url) as r:
                drop_key_prefix(r, str(opts["key_prefix"]))
            assert [i.value["v"] for i in store.search(("m",), limit=50)] == list(range(20))
            assert store.get(("m",), "before") is None


def test_a_late_copy_of_an_older_version_changes_nothing(store, redis_url, opts) -> None:
    store.put(("n",), "k", {"v": 1})
    with redis.Redis.from_url(redis_url) as r:
        field = item_field(("n",), "k")
        # the item's key (the unflushed index loses it once the flusher settled it)
        raw = r.get("{" + f"{opts['key_prefix']}:store}}:si:" + field)
    old = StoreRecord.of_redis(field, raw)
    store.delete(("n",), "k")
    store.flush()
    # a stalled round writes the first version after the delete reached MongoDB
    doc = store_doc(old, 3600)
    store.runtime.run(bulk_ignoring_newer(store.runtime.context.collections.store,
                                          [upsert_record(doc)]))
    store.runtime.run(bulk_ignoring_newer(store.runtime.context.collections.store,
                                          [upsert_record(doc)]))
    with redis.Redis.from_url(redis_url) as r:
        drop_key_prefix(r, str(opts["key_prefix"]))
    assert store.get(("n",), "k") is None
    assert store.search(("n",)) == []
    assert store.list_namespaces() == []


class StepClock(Clock):
    """A wall clock the test moves forward (``advance``); monotonic time is the system's."""

    def __init__(self) -> None:
        self.offset_ns = 0

    def time_ns(self) -> int:
        return time.time_ns() + self.offset_ns

    def advance(self, seconds: float) -> None:
        self.offset_ns += int(seconds * 1e9)


def _drop(redis_url: str, opts: dict[str, object]) -> None:
    with redis.Redis.from_url(redis_url) as r:
        drop_key_prefix(r, str(opts["key_prefix"]))


@pytest.mark.parametrize("omit", [{}, {"omit_expired": True}, {"omit_expired": False}])
def test_an_item_expires_ttl_minutes_after_its_put_hot_and_cold(redis_url, mongo_url,
                                                                 omit) -> None:
    """With LangGraph's ``omit_expired`` either way, no read returns an expired item."""
    clock, opts = StepClock(), unique_options()
    with DurableStore.from_urls(redis_url, mongo_url, clock=clock,
                                ttl={"refresh_on_read": False, **omit}, **opts) as store:
        store.put(("t",), "short", {"v": 1}, ttl=1)
        store.put(("t",), "long", {"v": 2}, ttl=10)
        store.put(("u",), "short", {"v": 3}, ttl=1)
        clock.advance(59)
        assert [i.key for i in store.search(("t",))] == ["short", "long"]
        clock.advance(2)
        assert store.get(("t",), "short") is None
        assert [i.key for i in store.search(("t",))] == ["long"]
        assert store.list_namespaces() == [("t",)]
        store.flush()
        _drop(redis_url, opts)
        assert store.get(("t",), "short") is None
        assert store.get(("t",), "long") is not None
        assert [i.key for i in store.search(())] == ["long"]
        assert store.list_namespaces() == [("t",)]


def test_reads_refresh_the_ttl_unless_told_not_to(redis_url, mongo_url) -> None:
    clock, opts = StepClock(), unique_options()
    with DurableStore.from_urls(redis_url, mongo_url, clock=clock,
                                ttl={"default_ttl": 1}, **opts) as store:
        store.put(("r",), "a", {"v": 1})  # default_ttl: 1 minute
        store.put(("r",), "b", {"v": 2})
        clock.advance(50)
        assert store.get(("r",), "a") is not None  # refreshed: expires at 110 s
        assert store.get(("r",), "b", refresh_ttl=False) is not None
        store.flush()
        _drop(redis_url, opts)  # the refresh reached MongoDB
        clock.advance(20)  # 70 s
        assert store.get(("r",), "b") is None
        got = store.get(("r",), "a", refresh_ttl=False)
        assert got is not None and got.value == {"v": 1}
        assert [i.key for i in store.search(("r",))] == ["a"]  # refreshed: 130 s
        clock.advance(55)  # 125 s
        assert [i.key for i in store.search(("r",), refresh_ttl=False)] == ["a"]
        clock.advance(10)  # 135 s
        assert store.search(("r",)) == []


async def test_the_sweep_deletes_expired_items_from_both_tiers(redis_url, mongo_url) -> None:
    clock, opts = StepClock(), unique_options()
    async with DurableStore.from_urls(redis_url, mongo_url, clock=clock, **opts) as store:
        assert store.supports_ttl
        await store.aput(("s",), "old", {"v": 1}, ttl=1)
        await store.aput(("s",), "kept", {"v": 2})
        await store.aflush()
        clock.advance(61)
        assert await store.asweep_ttl() == 1
        await store.aflush()
        assert await store.asweep_ttl() == 0
        with pymongo.MongoClient(mongo_url) as m:
            docs = {d["key"]: bool(d.get("dead")) for d in m[str(opts["database"])]["store"].find()}
        assert docs == {"old": True, "kept": False}
        with redis.Redis.from_url(redis_url) as r:
            left = [k for k in r.scan_iter(match="{" + str(opts["key_prefix"]) + ":store}:si:*")]
        assert left == [b"{" + str(opts["key_prefix"]).encode() + b":store}:si:s\x00kept"]
        assert [i.key for i in await store.asearch(("s",))] == ["kept"]


DIMS = 8


def fake_embed(texts: list[str]) -> list[list[float]]:
    """A deterministic embedder: letter counts folded into ``DIMS`` buckets."""
    out = []
    for text in texts:
        v = [0.0] * DIMS
        for ch in text.lower():
            if ch.isalpha():
                v[(ord(ch) - 97) % DIMS] += 1.0
        out.append(v)
    return out


async def afake_embed(texts: list[str]) -> list[list[float]]:
    return fake_embed(texts)


DOCS = [
    (("docs", "a"), "d1", {"text": "python tutorial", "kind": "guide"}, None),
    (("docs", "a"), "d2", {"text": "typescript guide", "kind": "guide"}, None),
    (("docs", "b"), "d3", {"text": "cooking pasta", "kind": "recipe"}, None),
    (("docs", "b"), "d4", {"text": "no vectors here", "kind": "guide"}, False),
    (("docs", "b"), "d5", {"text": "zzz", "title": "python snakes", "kind": "zoo"},
     ["title"]),
    (("docs", "c"), "d6", {"text": ["java beans", "python eggs"], "kind": "guide"}, None),
]


def _ranked(items: list) -> list[tuple[str, float | None]]:
    return [(i.key, None if i.score is None else round(i.score, 5)) for i in items]


def test_semantic_search_ranks_as_in_memory_store_hot_and_cold(redis_url, mongo_url) -> None:
    from langgraph.store.memory import InMemoryStore

    index = {"dims": DIMS, "embed": fake_embed, "fields": ["text"]}
    opts = unique_options()
    model = InMemoryStore(index=index)
    with DurableStore.from_urls(redis_url, mongo_url, index=index, **opts) as store:
        for ns, key, value, idx in DOCS:
            store.put(ns, key, value, index=idx)
            model.put(ns, key, value, index=idx)
        asks = [dict(query="python"), dict(query="python", limit=2, offset=1),
                dict(query="guide pasta", filter={"kind": "guide"}),
                dict(query="snake", limit=10), dict(query=None)]

        def check() -> None:
            for ask in asks:
                want = _ranked(model.search(("docs",), **ask))
                assert _ranked(store.search(("docs",), **ask)) == want, ask

        check()
        assert _ranked(store.search(("docs",), query="python", limit=3)) == [
            ("d1", 0.82496), ("d6", 0.74261), ("d5", 0.72169)]
        store.flush()
        _drop(redis_url, opts)
        check()  # vectors from MongoDB


async def test_async_semantic_search_with_an_async_embedder(redis_url, mongo_url) -> None:
    from langgraph.store.memory import InMemoryStore

    index = {"dims": DIMS, "embed": afake_embed}
    model = InMemoryStore(index=index)
    async with DurableStore.from_urls(redis_url, mongo_url, index=index,
                                      **unique_options()) as store:
        for ns, key, value, idx in DOCS[:3]:
            await store.aput(ns, key, value, index=idx)
            await model.aput(ns, key, value, index=idx)
        got = _ranked(await store.asearch(("docs",), query="pasta"))
        assert got == _ranked(await model.asearch(("docs",), query="pasta"))
        assert [k for k, _ in got] == ["d3", "d2", "d1"]


def test_on_a_redis_cluster_each_put_is_one_script_in_its_namespaces_slot(
        redis_cluster_url: str, mongo_url: str) -> None:
    from langgraph_durable.config import DurableConfig
    from langgraph_durable.io.redis_urls import redis_client_from_url

    opts = unique_options()
    with DurableStore.from_urls(redis_cluster_url, mongo_url, **opts) as store:
        for i in range(12):
            store.put(("c", f"n{i}"), "k", {"v": i})
        store.delete(("c", "n3"), "k")
        assert store.runtime.context.partitions == 16
        assert [i.value["v"] for i in store.search(("c",), limit=20)] == [
            0, 1, 10, 11, 2, 4, 5, 6, 7, 8, 9]  # namespaces in order, ("c", "n10") < ("c", "n2")
        assert len(store.list_namespaces(prefix=("c",))) == 11
        store.flush()
        with redis_client_from_url(redis_cluster_url, DurableConfig(), asyncio=False) as r:
            assert drop_key_prefix(r, str(opts["key_prefix"])) > 0
        got = store.get(("c", "n5"), "k")
        assert got is not None and got.value == {"v": 5}
        assert store.get(("c", "n3"), "k") is None
        assert len(store.search(("c",), limit=20)) == 11


def test_a_put_that_returned_survives_a_kill_of_the_application(redis_url, mongo_url) -> None:
    import subprocess
    import sys
    import textwrap

    opts = unique_options(flusher="off")
    code = textwrap.dedent(f"""
        import os
        from langgraph_durable import DurableStore
        store = DurableStore.from_urls({redis_url!r}, {mongo_url!r}, **{opts!r})
        store.put(("k",), "a", {{"v": 1}})
        store.delete(("k",), "gone")
        store.put(("k",), "b", {{"v": 2}})
        os._exit(9)  # killed: nothing drained, nothing closed
    """)
    subprocess.run([sys.executable, "-c", code], check=False, timeout=60)
    with DurableStore.from_urls(redis_url, mongo_url, **{**opts, "flusher": "auto"}) as store:
        assert [i.value for i in store.search(("k",))] == [{"v": 1}, {"v": 2}]
        store.flush()
    with pymongo.MongoClient(mongo_url) as m:
        assert sorted(d["key"] for d in m[str(opts["database"])]["store"].find()) == [
            "a", "b", "gone"]  # "gone": the delete's tombstone


def test_puts_beyond_max_outbox_are_refused_not_dropped(redis_url, mongo_url) -> None:
    from langgraph_durable import OutboxFullError

    opts = unique_options(flusher="off", max_outbox=3)
    with DurableStore.from_urls(redis_url, mongo_url, **opts) as store:
        for i in range(3):
            store.put(("o",), f"k{i}", {"v": i})
        with pytest.raises(OutboxFullError, match="max_outbox=3"):
            store.put(("o",), "k3", {"v": 3})
        assert store.get(("o",), "k3") is None
        assert len(store.search(("o",))) == 3


def test_the_sweeper_thread_sweeps_while_the_store_is_entered(redis_url, mongo_url) -> None:
    clock, opts = StepClock(), unique_options()
    with DurableStore.from_urls(redis_url, mongo_url, clock=clock,
                                ttl={"sweep_interval_minutes": 0.001}, **opts) as store:
        store.put(("w",), "old", {"v": 1}, ttl=1)
        store.flush()
        clock.advance(61)

        def swept() -> bool:
            store.flush()
            with pymongo.MongoClient(mongo_url) as m:
                doc = m[str(opts["database"])]["store"].find_one({"key": "old"})
            return bool(doc and doc.get("dead"))

        wait_for(swept, 20, "the sweeper to delete the expired item")
        assert store.stop_ttl_sweeper(timeout=5)


@pytest.mark.parametrize(("distance_type", "want"), [
    ("cosine", 0.707107), ("inner_product", 1.0), ("l2", -1.0)])
def test_the_index_distance_type_sets_the_score(redis_url, mongo_url, distance_type,
                                                want) -> None:
    def embed(texts: list[str]) -> list[list[float]]:
        return [[1.0, 0.0] if t == "x" else [1.0, 1.0] for t in texts]

    index = {"dims": 2, "embed": embed, "fields": ["t"], "distance_type": distance_type}
    with DurableStore.from_urls(redis_url, mongo_url, index=index,
                                **unique_options()) as store:
        store.put(("d",), "k", {"t": "y"})  # [1, 1] against the query's [1, 0]
        (hit,) = store.search(("d",), query="x")
        assert round(hit.score, 6) == want


def test_entries_of_a_killed_flusher_are_claimed_and_written_once(redis_url, mongo_url) -> None:
    from langgraph_durable.core.outbox_entry import OutboxEntry
    from langgraph_durable.outbox.streams import read_plan
    from langgraph_durable.plans.store_items import flush_store_plan

    opts = unique_options(flusher="off", claim_idle_s=0.5)
    with DurableStore.from_urls(redis_url, mongo_url, **opts) as store:
        for i in range(6):
            store.put(("f",), f"k{i}", {"v": i})
        ctx = store.runtime.context
        # a flusher took every entry, wrote half of them to MongoDB, and was killed
        taken = store.runtime.run(read_plan(ctx, "killed", 100, ">"))
        entries = [(eid, OutboxEntry.of(f)) for _, (eid, f) in taken]
        parsed = [(eid, e.thread_id, e) for eid, e in entries]
        assert len(parsed) == 6
        assert store.runtime.run(flush_store_plan(ctx, parsed[:3])) == 3
    with DurableStore.from_urls(redis_url, mongo_url, **{**opts, "flusher": "auto"}) as store:
        store.flush(timeout_s=30)  # the killed consumer's pending entries, claimed
        with pymongo.MongoClient(mongo_url) as m:
            docs = list(m[str(opts["database"])]["store"].find({}, {"key": 1, "seq": 1}))
        assert sorted(d["key"] for d in docs) == [f"k{i}" for i in range(6)]
        with redis.Redis.from_url(redis_url) as r:
            assert r.hlen("{" + f"{opts['key_prefix']}:store}}:sd") == 0
        _drop(redis_url, opts)
        assert [i.value["v"] for i in store.search(("f",))] == list(range(6))


def test_an_update_of_an_item_only_mongodb_holds_keeps_its_creation(store, redis_url,
                                                                     opts) -> None:
    store.put(("c",), "a", {"v": 1})
    store.put(("c",), "b", {"v": 2})
    created = store.get(("c",), "a").created_at
    store.flush()
    _drop(redis_url, opts)  # out of the hot window (or Redis lost its data)
    store.put(("c",), "a", {"v": 3})
    store.flush()  # the flusher keeps MongoDB's cseq, in MongoDB and in Redis
    for tier in ("hot", "cold"):
        got = store.get(("c",), "a")
        assert got.value == {"v": 3} and got.created_at == created, tier
        assert got.updated_at > created, tier
        assert [(i.key, i.value["v"]) for i in store.search(("c",))] == [
            ("a", 3), ("b", 2)], tier
        _drop(redis_url, opts)


def test_redis_min_replicas_applies_to_store_puts(redis_url, mongo_url) -> None:
    from langgraph_durable import ReplicationTimeoutError

    opts = unique_options(redis_min_replicas=1, redis_wait_timeout_s=0.05)
    with DurableStore.from_urls(redis_url, mongo_url, **opts) as store:
        with pytest.raises(ReplicationTimeoutError):  # this Redis has no replica
            store.put(("r",), "k", {"v": 1})
        got = store.get(("r",), "k")  # stored on the primary all the same
        assert got is not None and got.value == {"v": 1}


def test_a_ttl_refresh_by_a_search_without_query_keeps_the_embeddings_cold(
        redis_url, mongo_url) -> None:
    """A search without a query reads MongoDB without embeddings; its TTL refresh of an
    item Redis no longer holds wrote that vector-less body back, so the item lost its
    place in semantic search (the property test's explicit example)."""
    index = {"dims": DIMS, "embed": fake_embed, "fields": ["text"]}
    clock, opts = StepClock(), unique_options()
    with DurableStore.from_urls(redis_url, mongo_url, index=index, clock=clock,
                                **opts) as store:
        store.put(("v",), "k1", {"text": "python tea"}, ttl=1)
        store.put(("v",), "k2", {"text": "pasta"})
        store.flush()
        _drop(redis_url, opts)  # MongoDB alone
        clock.advance(50)
        assert [i.key for i in store.search(("v",))] == ["k1", "k2"]  # refreshes k1
        store.flush()
        _drop(redis_url, opts)
        clock.advance(50)  # 100 s: alive only because the search refreshed it
        assert _ranked(store.search(("v",), query="python")) == [
            ("k1", 0.91287), ("k2", 0.66815)]  # InMemoryStore's scores


def test_a_filter_key_with_dots_reads_a_nested_path_unless_the_value_has_that_key(
        store) -> None:
    """As SqliteStore and PostgresStore (their suites' test_filter_keys_with_hyphens_and_
    digits); a literal top-level key with a dot still matches as in InMemoryStore."""
    store.put(("f",), "hyphen", {"access-level": "public", "user": {"access-level": "n"}})
    store.put(("f",), "digit", {"123abc": "ok", "user": {"123abc": "ok2"}})
    store.put(("f",), "dotted", {"user.123abc": "literal", "user": {"123abc": "deep"}})
    assert [i.key for i in store.search(("f",), filter={"user.access-level": "n"})] == [
        "hyphen"]
    assert [i.key for i in store.search(("f",), filter={"user.123abc": "ok2"})] == ["digit"]
    assert [i.key for i in store.search(("f",), filter={"user.123abc": "literal"})] == [
        "dotted"]
    assert store.search(("f",), filter={"user.123abc.x": "ok2"}) == []


def test_from_conn_string_reads_the_urls_it_is_not_given_from_the_environment(
        redis_url, mongo_url, monkeypatch) -> None:
    monkeypatch.setenv("REDIS_URL", redis_url)
    monkeypatch.setenv("MONGODB_URL", mongo_url)
    opts = unique_options()
    with DurableStore.from_conn_string(ttl={"default_ttl": 5}, **opts) as store:
        store.put(("env",), "k", {"v": 1})
        got = store.get(("env",), "k")
        assert got is not None and got.value == {"v": 1}
    monkeypatch.delenv("MONGODB_URL")
    with pytest.raises(ConfigurationError, match="needs a Redis URL and a MongoDB URL"):
        DurableStore.from_conn_string(**opts)


def test_puts_the_store_cannot_keep_are_refused_and_the_rest_of_the_store_stays_readable(
        store: DurableStore) -> None:
    # an item over MongoDB's 16 MiB was taken, then dead-lettered and lost with Redis's
    # data; a TTL of sys.maxsize minutes made every search and listing reaching it fail
    import sys

    from langgraph_durable.errors import SerializationError

    store.put(("b",), "kept", {"x": 1})
    with pytest.raises(SerializationError, match="store item 'big' of namespace"):
        store.put(("b",), "big", {"d": "x" * 17_000_000})
    with pytest.raises(ValueError, match=r"ttl=9223372036854775807 is not a number"):
        store.put(("b",), "forever", {"x": 1}, ttl=sys.maxsize)
    assert [i.key for i in store.search(("b",))] == ["kept"]
    assert store.list_namespaces() == [("b",)]
    store.flush()  # raises DeadLetteredError for an entry set aside


def test_a_closed_store_says_it_is_the_store_that_is_closed(redis_url: str,
                                                            mongo_url: str) -> None:
    from langgraph_durable import SaverClosedError

    store = DurableStore.from_urls(redis_url, mongo_url, **unique_options())
    with store:
        store.put(("a",), "k", {"x": 1})
    with pytest.raises(SaverClosedError) as got:
        store.get(("a",), "k")
    assert str(got.value) == "this DurableStore is closed; create a new one"
