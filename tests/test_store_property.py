"""Property test: any sequence of put / delete / get / search / list_namespaces (with
TTLs, refreshes, flushes, sweeps, Redis losing its data after a flush and a
deterministic embedder) answers as LangGraph's ``InMemoryStore`` does, before and after a
flush, and from MongoDB alone at the end.

``InMemoryStore`` has no TTL, so the model deletes an item once its TTL passed (and moves
its expiry on a refreshing read); its ``list_namespaces`` also lists namespaces left
empty, so the model's namespaces are those of its live items; without a query its search
lists namespaces in first-use order where ``DurableStore`` sorts them as text (the
model's answer is sorted the same way, stably, before the page is cut); a query's ties between equal
scores are compared sorted by namespace and key; and a put replaces an item's
embeddings (InMemoryStore keeps those of the previous value where the new put embeds
nothing: ``index=False``), so the model drops them first; after Redis lost its data, an
update of an item only MongoDB holds keeps its place in search once flushed (until then
it is listed as new), so the test flushes after such puts."""

from __future__ import annotations

from typing import Any

import redis
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from langgraph.store.memory import InMemoryStore

from langgraph_durable import DurableStore
from langgraph_durable.plans.context import Clock
from langgraph_durable.testing import drop_key_prefix, unique_options

DIMS = 8


def fake_embed(texts: list[str]) -> list[list[float]]:
    """Letter counts folded into ``DIMS`` buckets: deterministic, no model."""
    out = []
    for text in texts:
        v = [0.0] * DIMS
        for ch in text:
            if ch.isalpha():
                v[(ord(ch) - 97) % DIMS] += 1.0
        out.append(v)
    return out


INDEX: Any = {"dims": DIMS, "embed": fake_embed, "fields": ["text"]}


class FrozenClock(Clock):
    """Wall time that moves only when the test says (``advance``)."""

    def __init__(self, start_ns: int) -> None:
        self.now_ns = start_ns

    def time_ns(self) -> int:
        return self.now_ns

    def advance(self, seconds: float) -> None:
        self.now_ns += int(seconds * 1e9)


class Model:
    """InMemoryStore with TTLs kept beside it (see the module docstring)."""

    def __init__(self, clock: FrozenClock) -> None:
        self.mem = InMemoryStore(index=INDEX)
        self.clock = clock
        self.expires: dict[tuple[tuple[str, ...], str], tuple[int, float]] = {}
        self.cold = False  # Redis lost its data once

    def _now(self) -> int:
        return self.clock.now_ns // 1_000_000

    def _purge(self) -> None:
        for (ns, key), (at, _) in list(self.expires.items()):
            if at <= self._now():
                self.mem.delete(ns, key)
                del self.expires[(ns, key)]

    def _refresh(self, ns: tuple[str, ...], key: str) -> None:
        if (ns, key) in self.expires:
            ttl = self.expires[(ns, key)][1]
            self.expires[(ns, key)] = (self._now() + round(ttl * 60_000), ttl)

    def put(self, ns, key, value, ttl, index) -> None:
        self._purge()
        self.mem._vectors[ns].pop(key, None)  # no stale embeddings (module docstring)
        self.mem.put(ns, key, value, index=index)
        self.expires.pop((ns, key), None)
        if ttl:
            self.expires[(ns, key)] = (self._now() + round(ttl * 60_000), ttl)

    def delete(self, ns, key) -> None:
        self._purge()
        self.mem.delete(ns, key)
        self.expires.pop((ns, key), None)

    def get(self, ns, key, refresh):
        self._purge()
        item = self.mem.get(ns, key)
        if item is not None and refresh:
            self._refresh(ns, key)
        return None if item is None else item.value

    def search(self, prefix, query, filter, limit, offset, refresh):
        self._purge()
        found = self.mem.search(prefix, query=query, filter=filter, limit=10**6)
        if query is None:  # DurableStore's search order: the namespace as text, labels
            # joined by "." with a final "." (MongoDB's index order, plans/store_search.py),
            # so ("a-b",) comes before ("a", "b") ("-" < "."); stable: insertion order within
            found = sorted(found, key=lambda i: ".".join(i.namespace) + ".")
            found = found[offset:offset + limit]
        if refresh:
            for i in found:
                self._refresh(tuple(i.namespace), i.key)
        return _answer(found, query)

    def list_namespaces(self, **kw):
        self._purge()
        clean = InMemoryStore()
        for i in self.mem.search((), limit=10**6):
            clean.put(tuple(i.namespace), i.key, i.value)
        return clean.list_namespaces(**kw)


def _answer(items, query) -> list:
    rows = [(tuple(i.namespace), i.key, i.value,
             None if i.score is None else round(i.score, 4)) for i in items]
    if query is not None:  # ties between equal scores: any order
        rows.sort(key=lambda r: (r[3] is None, -(r[3] or 0), r[0], r[1]))
    return rows


NAMESPACES = [("a",), ("a", "b"), ("a", "c"), ("a-b",), ("b",), ("b", "x", "y")]
ns_st = st.sampled_from(NAMESPACES)
key_st = st.sampled_from(["k1", "k2", "k3"])
value_st = st.fixed_dictionaries({"v": st.integers(0, 4),
                                  "text": st.sampled_from(["python tea", "cat", "pasta"])})
OPS = st.one_of(
    st.tuples(st.just("put"), ns_st, key_st, value_st, st.sampled_from([None, 1, 2]),
              st.sampled_from([None, False])),
    st.tuples(st.just("delete"), ns_st, key_st),
    st.tuples(st.just("get"), ns_st, key_st, st.booleans()),
    st.tuples(st.just("search"), st.sampled_from([(), ("a",), ("b",), ("a", "b")]),
              st.sampled_from([None, None, "python", "cats"]),
              st.sampled_from([None, {"v": {"$gte": 2}}, {"text": "cat"}]),
              st.integers(1, 4), st.integers(0, 2), st.booleans()),
    st.tuples(st.just("list"), st.sampled_from([None, ("a",), ("*", "b")]),
              st.sampled_from([None, ("b",), ("y",)]), st.sampled_from([None, 1, 2]),
              st.integers(1, 5), st.integers(0, 2)),
    st.tuples(st.just("tick"), st.sampled_from([20, 40, 70])),
    st.tuples(st.just("flush")),
    st.tuples(st.just("cold")),
    st.tuples(st.just("sweep")),
)


@settings(max_examples=40, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture,
                                 HealthCheck.too_slow])
@given(ops=st.lists(OPS, min_size=1, max_size=25))
@example(ops=[('put', ('a',), 'k1', {'v': 0, 'text': 'python tea'}, None, None),
              ('put', ('a',), 'k1', {'v': 0, 'text': 'python tea'}, 1, None),
              ('cold',), ('search', (), None, None, 1, 0, True)])
def test_any_sequence_answers_as_in_memory_store(redis_url, mongo_url, ops) -> None:
    import time

    clock = FrozenClock(time.time_ns())
    model = Model(clock)
    opts = unique_options()
    with DurableStore.from_urls(redis_url, mongo_url, index=INDEX, clock=clock,
                                ttl={"refresh_on_read": True}, **opts) as store:
        def drop() -> None:
            with redis.Redis.from_url(redis_url) as r:
                drop_key_prefix(r, str(opts["key_prefix"]))

        for op in ops:
            run(store, model, clock, op, drop)
        store.flush()
        drop()
        for prefix in [(), ("a",), ("b",)]:  # MongoDB alone
            for query in (None, "python"):
                want = model.search(prefix, query, None, 100, 0, False)
                assert _answer(store.search(prefix, query=query, limit=100,
                                            refresh_ttl=False), query) == want
        assert store.list_namespaces() == model.list_namespaces()


def run(store: DurableStore, model: Model, clock: FrozenClock, op: tuple,
        drop: Any) -> None:
    kind = op[0]
    if kind == "put":
        _, ns, key, value, ttl, index = op
        store.put(ns, key, value, index=index, ttl=ttl)
        model.put(ns, key, value, ttl, index)
        if model.cold:  # a put of an item only MongoDB holds takes its place when flushed
            store.flush()
    elif kind == "delete":
        store.delete(op[1], op[2])
        model.delete(op[1], op[2])
    elif kind == "get":
        _, ns, key, refresh = op
        got = store.get(ns, key, refresh_ttl=refresh)
        assert (None if got is None else got.value) == model.get(ns, key, refresh), op
    elif kind == "search":
        _, prefix, query, filter, limit, offset, refresh = op
        if query is not None:
            limit, offset = 100, 0
        got = store.search(prefix, query=query, filter=filter, limit=limit, offset=offset,
                           refresh_ttl=refresh)
        assert _answer(got, query) == model.search(prefix, query, filter, limit, offset,
                                                   refresh), op
    elif kind == "list":
        _, prefix, suffix, depth, limit, offset = op
        kw = dict(prefix=prefix, suffix=suffix, max_depth=depth, limit=limit, offset=offset)
        assert store.list_namespaces(**kw) == model.list_namespaces(**kw), op
    elif kind == "tick":
        clock.advance(op[1])
    elif kind == "flush":
        store.flush()
    elif kind == "cold":  # Redis loses everything after a flush: MongoDB answers
        store.flush()
        drop()
        model.cold = True
    elif kind == "sweep":
        store.sweep_ttl()
