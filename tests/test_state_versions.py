"""Application state versions and migrations across a deploy (issue 34).

Yesterday's graph (v1) keeps ``steps: list[str]`` (a step is marked ``":done"`` once
executed); today's (v2) keeps ``plan`` and ``executed_steps``. Three v1 threads are left
behind by the deploy: one paused in ``interrupt()``, one finished, one failed (its node
raised). What LangGraph does without migrations (measured here by
``test_without_migrations_langgraph_drops_the_old_field_and_the_resume_fails``, on this
saver and on LangGraph's ``InMemorySaver`` alike, since no checkpointer has a hook): it
runs the newest graph code over the stored values. The v2 graph has no ``steps`` channel,
so the stored ``steps`` value is dropped silently (``get_state`` shows none of it), and
the paused thread's resume runs v2's ``execute`` over a state without ``plan``: it fails
with ``KeyError: 'plan'``; nothing tells that the thread was of another shape.

With ``state_version=2`` and ``state_migrations={1: v1_to_v2}`` the saver turns every v1
checkpoint into v2 when it is read (nothing stored changes), so all three threads resume
to the end under v2 (sync and async, from Redis and from MongoDB only, inside a
subgraph too); the first checkpoint stored after the resume carries version 2 and the
migrated values, so a saver that has no migrations at all reads it.
"""

from __future__ import annotations

import asyncio
import os
import re
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypedDict

import pymongo
import pytest
import redis
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import empty_checkpoint
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, StateGraph
from langgraph.types import Command, interrupt

from langgraph_durable import (
    STATE_VERSION_KEY,
    ConfigurationError,
    DurableSaver,
    StateMigration,
    StateMigrationError,
    StateVersionError,
)
from langgraph_durable.core.state_versions import marked_versions as sv_marked
from langgraph_durable.durable import documents as D
from langgraph_durable.testing import drop_key_prefix, unique_options

PLAN = ["fetch", "parse", "report"]
THREADS = ("paused", "finished", "failed")


# ---------------------------------------------------------------- the three graphs


class V1(TypedDict):
    steps: list[str]


class V2(TypedDict):
    plan: list[str]
    executed_steps: list[str]


class V3(TypedDict):
    plan: list[str]
    executed_steps: list[str]
    notes: list[str]


def _thread(config: RunnableConfig) -> str:
    return str(config["configurable"]["thread_id"]).rsplit("-", 1)[-1]


def v1_builder() -> StateGraph:
    """plan -> review (interrupts on a "paused" thread) -> execute (raises on "failed")."""
    def plan(state: V1) -> dict[str, Any]:
        return {"steps": list(PLAN)}

    def review(state: V1, config: RunnableConfig) -> dict[str, Any]:
        if _thread(config) == "paused":
            interrupt("approve the plan?")
        return {}

    def execute(state: V1, config: RunnableConfig) -> dict[str, Any]:
        if _thread(config) == "failed":
            raise RuntimeError("the tool is down")
        return {"steps": [s + ":done" for s in state["steps"]]}

    g = StateGraph(V1)
    g.add_node("plan", plan)
    g.add_node("review", review)
    g.add_node("execute", execute)
    g.add_edge(START, "plan")
    g.add_edge("plan", "review")
    g.add_edge("review", "execute")
    g.add_edge("execute", END)
    return g


def v2_builder(schema: type = V2) -> StateGraph:
    """The same nodes in v2's shape; ``execute`` no longer fails."""
    def plan(state: V2) -> dict[str, Any]:
        return {"plan": list(PLAN), "executed_steps": []}

    def review(state: V2, config: RunnableConfig) -> dict[str, Any]:
        if _thread(config) == "paused":
            interrupt("approve the plan?")
        return {}

    def execute(state: V2) -> dict[str, Any]:
        return {"executed_steps": list(state["plan"])}

    g = StateGraph(schema)
    g.add_node("plan", plan)
    g.add_node("review", review)
    g.add_node("execute", execute)
    g.add_edge(START, "plan")
    g.add_edge("plan", "review")
    g.add_edge("review", "execute")
    g.add_edge("execute", END)
    return g


def v1_to_v2(values: dict[str, Any]) -> dict[str, Any]:
    """``steps`` (``"x:done"`` once executed) -> ``plan`` and ``executed_steps``."""
    out = dict(values)
    steps = out.pop("steps", None)
    if steps is not None:
        out["plan"] = [s.removesuffix(":done") for s in steps]
        out["executed_steps"] = [s.removesuffix(":done") for s in steps
                                 if s.endswith(":done")]
    return out


def v2_to_v3(values: dict[str, Any]) -> dict[str, Any]:
    return {**values, "notes": [f"migrated with {len(values.get('plan', []))} steps"]}


def nested(builder: StateGraph, schema: type) -> StateGraph:
    """A parent graph whose one node is the compiled ``builder`` (same state keys)."""
    g = StateGraph(schema)
    g.add_node("inner", builder.compile())
    g.add_edge(START, "inner")
    g.add_edge("inner", END)
    return g


# ---------------------------------------------------------------- helpers


def cfg(thread: str, **extra: Any) -> dict[str, Any]:
    return {"configurable": {"thread_id": thread, **extra}}


def run_v1(saver: Any, prefix: str, *, subgraph: bool = False) -> None:
    """The three v1 threads, left paused, finished and failed (by a saver of version 1)."""
    builder = nested(v1_builder(), V1) if subgraph else v1_builder()
    graph = builder.compile(checkpointer=saver)
    for t in THREADS:
        config = cfg(f"{prefix}-{t}")
        if t == "failed":
            with pytest.raises(RuntimeError, match="the tool is down"):
                graph.invoke({"steps": []}, config)
        else:
            graph.invoke({"steps": []}, config)
    paused = graph.get_state(cfg(f"{prefix}-paused"), subgraphs=True)
    assert paused.next == (("inner",) if subgraph else ("review",))
    assert graph.get_state(cfg(f"{prefix}-finished")).values == {
        "steps": [s + ":done" for s in PLAN]}


def resume_all(graph: Any, prefix: str) -> dict[str, dict[str, Any]]:
    """Resume the three threads to the end (sync): the paused one with its answer, the
    failed one with ``None``, the finished one with a new input."""
    graph.invoke(Command(resume=True), cfg(f"{prefix}-paused"))
    graph.invoke(None, cfg(f"{prefix}-failed"))
    graph.invoke({"plan": [], "executed_steps": []}, cfg(f"{prefix}-finished"))
    return {t: graph.get_state(cfg(f"{prefix}-{t}")).values for t in THREADS}


async def aresume_all(graph: Any, prefix: str) -> dict[str, dict[str, Any]]:
    await graph.ainvoke(Command(resume=True), cfg(f"{prefix}-paused"))
    await graph.ainvoke(None, cfg(f"{prefix}-failed"))
    await graph.ainvoke({"plan": [], "executed_steps": []}, cfg(f"{prefix}-finished"))
    return {t: (await graph.aget_state(cfg(f"{prefix}-{t}"))).values for t in THREADS}


DONE = {"plan": PLAN, "executed_steps": PLAN}


def stored(saver: DurableSaver, redis_url: str, mongo_url: str) -> dict[str, Any]:
    """Every record of the saver's threads, as bytes (Redis ``DUMP`` of each thread key:
    the hash tag ``{<prefix>:<len>:<thread>}``) and documents (MongoDB: checkpoints, blobs,
    writes, items), after a flush: to compare before and after a read. The outbox stream
    and the flushers' bookkeeping are left out (they change as flushers run)."""
    saver.flush()
    prefix = saver.config.key_prefix
    r = redis.Redis.from_url(redis_url)
    try:
        keys = sorted(k for k in r.scan_iter(match="{" + prefix + ":*", count=1000)
                      if re.match(rb"\{[^:]+:\d+:", k))
        hot = {k: (r.hgetall(k) if r.type(k) == b"hash" else r.dump(k)) for k in keys}
    finally:
        r.close()
    with pymongo.MongoClient(mongo_url) as m:
        db = m[saver.config.database]
        cold = {c: sorted(db[c].find({}), key=repr)
                for c in ("checkpoints", "blobs", "writes", "items")}
    return {"redis": hot, "mongo": cold}


@pytest.fixture
def opts() -> dict[str, object]:
    return unique_options()


@pytest.fixture
def open_saver(redis_url: str, mongo_url: str, opts: dict[str, object]
               ) -> Iterator[Callable[..., DurableSaver]]:
    """Savers on one key prefix and database, closed at the end."""
    made: list[DurableSaver] = []

    def make(**kw: Any) -> DurableSaver:
        s = DurableSaver.from_urls(redis_url, mongo_url, **{**opts, **kw})
        s.__enter__()
        made.append(s)
        return s

    yield make
    for s in made:
        s.close()


def go_cold(saver: DurableSaver, redis_url: str) -> None:
    """Flush, then empty Redis of the key prefix: later savers read MongoDB alone."""
    saver.flush()
    saver.close()
    r = redis.Redis.from_url(redis_url)
    try:
        assert drop_key_prefix(r, saver.config.key_prefix) > 0
    finally:
        r.close()


# ---------------------------------------------------------------- the measured baseline


def test_without_migrations_langgraph_drops_the_old_field_and_the_resume_fails(
        open_saver: Callable[..., DurableSaver]) -> None:
    for saver in (open_saver(), InMemorySaver()):
        run_v1(saver, "base")
        v2 = v2_builder().compile(checkpointer=saver)
        # the stored `steps` value is silently dropped: v2 has no such channel
        assert v2.get_state(cfg("base-finished")).values == {}
        assert v2.get_state(cfg("base-paused")).values == {}
        with pytest.raises(KeyError, match="plan"):
            v2.invoke(Command(resume=True), cfg("base-paused"))


# ---------------------------------------------------------------- resume under v2


@pytest.mark.parametrize("tier", ["hot", "cold"])
def test_v1_threads_resume_to_the_end_under_v2(open_saver: Callable[..., DurableSaver],
                                                redis_url: str, tier: str) -> None:
    v1 = open_saver(state_version=1)
    run_v1(v1, "s")
    assert v1.get_tuple(cfg("s-paused")).metadata[STATE_VERSION_KEY] == 1
    if tier == "cold":
        go_cold(v1, redis_url)
    v2saver = open_saver(state_version=2, state_migrations={1: v1_to_v2})
    graph = v2_builder().compile(checkpointer=v2saver)
    before = graph.get_state(cfg("s-paused"))
    assert before.values == {"plan": PLAN, "executed_steps": []}
    assert before.next == ("review",)
    if tier == "cold":
        assert v2saver.last_read_tier == "durable"
    assert resume_all(graph, "s") == {t: DONE for t in THREADS}
    latest = v2saver.get_tuple(cfg("s-paused"))
    assert latest.metadata[STATE_VERSION_KEY] == 2


@pytest.mark.parametrize("tier", ["hot", "cold"])
async def test_v1_threads_resume_to_the_end_under_v2_async(
        redis_url: str, mongo_url: str, opts: dict[str, object], tier: str) -> None:
    v1 = DurableSaver.from_urls(redis_url, mongo_url, state_version=1, **opts)
    with v1:
        await asyncio.to_thread(run_v1, v1, "a")
        if tier == "cold":
            go_cold(v1, redis_url)
    async with DurableSaver.from_urls(redis_url, mongo_url, state_version=2,
                                      state_migrations={1: v1_to_v2}, **opts) as v2saver:
        graph = v2_builder().compile(checkpointer=v2saver)
        state = await graph.aget_state(cfg("a-finished"))
        assert state.values == DONE
        if tier == "cold":
            assert v2saver.last_read_tier == "durable"
        assert await aresume_all(graph, "a") == {t: DONE for t in THREADS}
        latest = await v2saver.aget_tuple(cfg("a-failed"))
        assert latest.metadata[STATE_VERSION_KEY] == 2
        seen = [t async for t in v2saver.alist(cfg("a-paused"))]
        assert seen and all("steps" not in t.checkpoint["channel_values"] for t in seen)


@pytest.mark.parametrize("api", ["sync", "async"])
def test_v1_threads_resume_inside_a_subgraph(open_saver: Callable[..., DurableSaver],
                                             api: str) -> None:
    run_v1(open_saver(state_version=1), "sub", subgraph=True)
    v2saver = open_saver(state_version=2, state_migrations={1: v1_to_v2})
    graph = nested(v2_builder(), V2).compile(checkpointer=v2saver)
    inner = graph.get_state(cfg("sub-paused"), subgraphs=True).tasks[0].state
    assert inner.values == {"plan": PLAN, "executed_steps": []}
    assert inner.next == ("review",)
    got = (resume_all(graph, "sub") if api == "sync"
           else asyncio.run(aresume_all(graph, "sub")))
    assert got == {t: DONE for t in THREADS}


def test_state_history_of_a_migrated_thread_shows_v2_shapes(
        open_saver: Callable[..., DurableSaver]) -> None:
    run_v1(open_saver(state_version=1), "h")
    v2saver = open_saver(state_version=2, state_migrations={1: v1_to_v2})
    graph = v2_builder().compile(checkpointer=v2saver)
    resume_all(graph, "h")
    history = list(graph.get_state_history(cfg("h-paused")))
    versions = [s.metadata.get(STATE_VERSION_KEY) for s in history]
    assert 1 in versions and 2 in versions  # stored versions, newest first
    assert versions == sorted(versions, reverse=True)
    for snap in history:
        assert "steps" not in snap.values, snap
    shapes = [snap.values for snap in history if snap.values]
    assert shapes[0] == DONE
    assert {"plan": PLAN, "executed_steps": []} in shapes


def test_a_v3_migration_chains_after_v2(open_saver: Callable[..., DurableSaver]) -> None:
    run_v1(open_saver(state_version=1), "c3")
    v3saver = open_saver(state_version=3, state_migrations={1: v1_to_v2, 2: v2_to_v3})
    graph = v2_builder(V3).compile(checkpointer=v3saver)
    assert graph.get_state(cfg("c3-paused")).values == {
        "plan": PLAN, "executed_steps": [], "notes": ["migrated with 3 steps"]}
    graph.invoke(Command(resume=True), cfg("c3-paused"))
    assert graph.get_state(cfg("c3-paused")).values == {
        **DONE, "notes": ["migrated with 3 steps"]}
    assert v3saver.get_tuple(cfg("c3-paused")).metadata[STATE_VERSION_KEY] == 3


def _boom(values: dict[str, Any]) -> dict[str, Any]:
    raise ValueError("cannot split steps")


@pytest.mark.parametrize("case", ["gap", "raises", "not a dict"])
def test_a_gap_or_a_failing_migration_is_named_and_changes_nothing(
        open_saver: Callable[..., DurableSaver], redis_url: str, mongo_url: str,
        case: str) -> None:
    v1 = open_saver(state_version=1)
    run_v1(v1, "g")
    before = stored(v1, redis_url, mongo_url)
    migrations: dict[int, Any] = {
        "gap": {1: v1_to_v2}, "raises": {1: v1_to_v2, 2: _boom},
        "not a dict": {1: v1_to_v2, 2: lambda v: list(v)}}[case]
    bad = open_saver(state_version=3, state_migrations=migrations)
    graph = v2_builder(V3).compile(checkpointer=bad)
    with pytest.raises(StateMigrationError) as info:
        graph.invoke(Command(resume=True), cfg("g-paused"))
    err = info.value
    assert (err.thread_id, err.checkpoint_ns, err.stored, err.running) == ("g-paused", "", 1, 3)
    assert err.checkpoint_id and err.checkpoint_id in str(err)
    assert "'g-paused'" in str(err) and "nothing stored was changed" in str(err)
    assert err.step == (2, 3)
    if case == "gap":
        assert err.missing == 2
        assert "no migration from 2 to 3" in str(err)
    elif case == "raises":
        assert isinstance(err.__cause__, ValueError)
        assert "raised ValueError: cannot split steps" in str(err)
    else:
        assert "returned list, not a dict" in str(err)
    with pytest.raises(StateMigrationError):
        list(bad.list(cfg("g-finished")))
    after = stored(bad, redis_url, mongo_url)
    for tier in ("redis", "mongo"):
        for k in sorted(set(before[tier]) | set(after[tier])):
            assert before[tier].get(k) == after[tier].get(k), (tier, k)


def test_a_v2_thread_opened_by_v1_code_raises(open_saver: Callable[..., DurableSaver]) -> None:
    run_v1(open_saver(state_version=1), "n")
    v2saver = open_saver(state_version=2, state_migrations={1: v1_to_v2})
    resume_all(v2_builder().compile(checkpointer=v2saver), "n")
    rolled_back = open_saver(state_version=1)
    graph = v1_builder().compile(checkpointer=rolled_back)
    with pytest.raises(StateVersionError) as info:
        graph.invoke(None, cfg("n-paused"))
    err = info.value
    assert not isinstance(err, StateMigrationError)
    assert (err.thread_id, err.stored, err.running) == ("n-paused", 2, 1)
    assert "newer than the running code's 1" in str(err)
    with pytest.raises(StateVersionError, match="newer_state='read'"):
        list(rolled_back.list(cfg("n-paused")))
    reader = open_saver(state_version=1, newer_state="read")
    listed = list(reader.list(cfg("n-paused")))
    assert [t.metadata.get(STATE_VERSION_KEY) for t in listed][:1] == [2]
    assert listed[0].checkpoint["channel_values"]["plan"] == PLAN
    with pytest.raises(StateVersionError):  # the resume path refuses it all the same
        reader.get_tuple(cfg("n-paused"))


def _never(values: dict[str, Any]) -> dict[str, Any]:
    raise AssertionError("a checkpoint stored after the resume needed a migration")


def test_the_next_put_stores_the_migrated_values(open_saver: Callable[..., DurableSaver],
                                                 redis_url: str, mongo_url: str) -> None:
    run_v1(open_saver(state_version=1), "p")
    v2saver = open_saver(state_version=2, state_migrations={1: v1_to_v2})
    graph = v2_builder().compile(checkpointer=v2saver)
    # the first put after the resume: review's step; `plan` is not written by it
    graph.invoke(Command(resume=True), cfg("p-paused"), interrupt_after=["review"])
    tup = v2saver.get_tuple(cfg("p-paused"))
    assert tup.metadata[STATE_VERSION_KEY] == 2
    plan_version = tup.checkpoint["channel_versions"]["plan"]
    assert ".-m2" in plan_version  # the migrated value, not written again by a node
    v2saver.flush()
    # another process with no migration it could use reads it from either tier
    fresh = open_saver(state_version=2, state_migrations={1: _never})
    got = fresh.get_tuple(cfg("p-paused"))
    assert got.checkpoint["channel_values"]["plan"] == PLAN
    assert "steps" not in got.checkpoint["channel_values"]
    assert got.checkpoint["channel_versions"]["plan"] == plan_version
    with pymongo.MongoClient(mongo_url) as m:  # the migrated value, inside its checkpoint
        cps = m[fresh.config.database]["checkpoints"]
        assert cps.count_documents({"thread_id": "p-paused",
                                    "vals.k": D.doc_id("plan", plan_version)}) == 1
    rest = v2_builder().compile(checkpointer=fresh)
    rest.invoke(None, cfg("p-paused"))
    assert rest.get_state(cfg("p-paused")).values == DONE


def test_a_put_stores_a_marked_value_once_per_process(
        open_saver: Callable[..., DurableSaver]) -> None:
    v1 = open_saver(state_version=1)
    config = cfg("once", checkpoint_ns="")
    cp = empty_checkpoint()
    cp["channel_values"] = {"steps": ["a:done"]}
    cp["channel_versions"] = {"steps": f"{3:032}.5"}
    config = v1.put(config, cp, {"step": 1}, {"steps": cp["channel_versions"]["steps"]})
    v2saver = open_saver(state_version=2, state_migrations={1: v1_to_v2})
    got = v2saver.get_tuple(config)
    # both are new channels (`steps` was dropped): integer part 1, below any node's seen
    source = config["configurable"]["checkpoint_id"]
    assert got.checkpoint["channel_versions"] == {"plan": f"{1:032}.-m2.{source}",
                                                  "executed_steps": f"{1:032}.-m2.{source}"}
    assert got.metadata[STATE_VERSION_KEY] == 1 and got.metadata["step"] == 1
    md: dict[str, Any] = {"step": 2}
    sent = []
    for step in (2, 3):
        nxt = {**got.checkpoint, "id": f"1fff-{step}"}
        marks = sv_marked(nxt["channel_versions"])
        nv = v2saver.state_versions.marks.unwritten("once", "", marks)
        sent.append(sorted(nv))
        config = v2saver.put(config, nxt, md, {})
    assert md == {"step": 2}  # the caller's metadata is not changed
    assert sent == [["executed_steps", "plan"], []]
    last = open_saver(state_version=2).get_tuple(cfg("once"))
    assert last.metadata[STATE_VERSION_KEY] == 2
    assert last.checkpoint["channel_values"] == {"plan": ["a"], "executed_steps": ["a"]}


def test_pending_writes_go_through_the_writes_hook(
        open_saver: Callable[..., DurableSaver]) -> None:
    v1 = open_saver(state_version=1)
    config = v1.put(cfg("w", checkpoint_ns=""), empty_checkpoint(), {"step": 1}, {})
    v1.put_writes(config, [("steps", ["x"])], "task-1")

    def rename(writes: list[tuple[str, str, Any]]) -> list[tuple[str, str, Any]]:
        return [(t, "plan" if c == "steps" else c, v) for t, c, v in writes]

    v2saver = open_saver(state_version=2,
                         state_migrations={1: StateMigration(values=v1_to_v2, writes=rename)})
    assert v2saver.get_tuple(config).pending_writes == [("task-1", "plan", ["x"])]
    assert list(v2saver.list(config))[0].pending_writes == [("task-1", "plan", ["x"])]
    assert v1.get_tuple(config).pending_writes == [("task-1", "steps", ["x"])]


def test_delta_channel_history_writes_are_migrated(
        open_saver: Callable[..., DurableSaver]) -> None:
    v1 = open_saver(state_version=1)
    cp = empty_checkpoint()
    cp["channel_values"] = {"log": "seed"}
    cp["channel_versions"] = {"log": f"{1:032}.1"}
    first = v1.put(cfg("d", checkpoint_ns=""), cp, {"step": 0}, dict(cp["channel_versions"]))
    v1.put_writes(first, [("log", "entry")], "task-1")
    cp2 = {**empty_checkpoint(), "channel_versions": {"log": f"{2:032}.1"}}
    second = v1.put(first, cp2, {"step": 1}, dict(cp2["channel_versions"]))

    def upper(writes: list[tuple[str, str, Any]]) -> list[tuple[str, str, Any]]:
        return [(t, c, v.upper()) for t, c, v in writes]

    v2saver = open_saver(state_version=2, state_migrations={
        1: StateMigration(values=lambda v: v, writes=upper)})
    expected = {"log": {"writes": [("task-1", "log", "ENTRY")], "seed": "seed"}}
    assert v2saver.get_delta_channel_history(config=second, channels=["log"]) == expected
    assert asyncio.run(v2saver.aget_delta_channel_history(
        config=second, channels=["log"])) == expected
    assert v1.get_delta_channel_history(config=second, channels=["log"]) == {
        "log": {"writes": [("task-1", "log", "entry")], "seed": "seed"}}
    with pytest.raises(StateVersionError):
        open_saver(state_version=1, unversioned_state_version=1).get_delta_channel_history(
            config=v2saver.put(second, {**empty_checkpoint(), "id": "1ef-x"}, {}, {}),
            channels=["log"])


def test_the_config_of_a_call_overrides_the_saver_version(
        open_saver: Callable[..., DurableSaver]) -> None:
    saver = open_saver(state_migrations={1: v1_to_v2})
    run_v1(saver, "o")
    plain = saver.get_tuple(cfg("o-finished"))
    assert STATE_VERSION_KEY not in plain.metadata  # no version: nothing stamped
    assert plain.checkpoint["channel_values"]["steps"] == [s + ":done" for s in PLAN]
    got = saver.get_tuple(cfg("o-finished", state_version=2))
    assert got.checkpoint["channel_values"]["plan"] == PLAN  # unversioned reads as 1
    with pytest.raises(ConfigurationError, match="state_version"):
        saver.get_tuple(cfg("o-finished", state_version="2"))


def test_bad_options_are_refused(redis_url: str, mongo_url: str) -> None:
    with pytest.raises(ConfigurationError, match="state_migrations key 0"):
        DurableSaver.from_urls(redis_url, mongo_url, state_migrations={0: v1_to_v2})
    with pytest.raises(ConfigurationError, match=r"state_migrations\[1\]"):
        DurableSaver.from_urls(redis_url, mongo_url, state_migrations={1: "v1_to_v2"})
    with pytest.raises(ConfigurationError, match="state_version"):
        DurableSaver.from_urls(redis_url, mongo_url, state_version=0)


def test_the_deploy_example_runs(redis_url: str, mongo_url: str) -> None:
    """``examples/deploy_new_version.py`` (README's "Deploying a new version of your
    graph") prints the migrated state, the finished run and version 2."""
    root = Path(__file__).resolve().parent.parent
    opts = unique_options()
    env = {**os.environ, "REDIS_URL": redis_url, "MONGODB_URL": mongo_url,
           "LGD_KEY_PREFIX": str(opts["key_prefix"]), "LGD_DATABASE": str(opts["database"]),
           "PYTHONPATH": str(root)}
    done = subprocess.run([sys.executable, str(root / "examples" / "deploy_new_version.py")],
                          env=env, capture_output=True, text=True, timeout=120, cwd=root)
    assert done.returncode == 0, done.stderr
    assert done.stdout == (
        "before: {'plan': ['fetch', 'report'], 'executed_steps': []}\n"
        "after: {'plan': ['fetch', 'report'], 'executed_steps': ['fetch', 'report']}\n"
        "stored as version 2\n")


def test_a_copied_v1_thread_is_migrated_on_read_too(
        open_saver: Callable[..., DurableSaver]) -> None:
    run_v1(open_saver(state_version=1), "cp")
    v2saver = open_saver(state_version=2, state_migrations={1: v1_to_v2})
    v2saver.copy_thread("cp-paused", "cp-copy-paused")
    stamps = [t.metadata.get(STATE_VERSION_KEY) for t in v2saver.list(cfg("cp-copy-paused"))]
    assert set(stamps) == {1}  # copied as stored
    graph = v2_builder().compile(checkpointer=v2saver)
    graph.invoke(Command(resume=True), cfg("cp-copy-paused"))
    assert graph.get_state(cfg("cp-copy-paused")).values == DONE


def test_two_checkpoints_migrated_to_different_values_keep_them_apart(
        open_saver: Callable[..., DurableSaver]) -> None:
    """Siblings with the same channel version integer (a fork) migrate to different
    values; each child stored after them reads its own (the marked version names the
    checkpoint it was migrated from)."""
    v1 = open_saver(state_version=1)
    root = v1.put(cfg("fork", checkpoint_ns=""), {**empty_checkpoint(), "id": "1fff-0"},
                  {"step": 0}, {})
    ids = []
    for name, steps in (("1fff-a", ["x:done"]), ("1fff-b", ["y"])):
        cp = {**empty_checkpoint(), "id": name, "channel_values": {"steps": steps},
              "channel_versions": {"steps": f"{3:032}.{name}"}}
        ids.append(v1.put(root, cp, {"step": 1}, dict(cp["channel_versions"])))
    v2saver = open_saver(state_version=2, state_migrations={1: v1_to_v2})
    children = []
    for n, parent in enumerate(ids):
        got = v2saver.get_tuple(parent)
        child = {**got.checkpoint, "id": f"1fff-c{n}"}
        children.append(v2saver.put(parent, child, {"step": 2}, {}))
    fresh = open_saver(state_version=2)
    assert [fresh.get_tuple(c).checkpoint["channel_values"] for c in children] == [
        {"plan": ["x"], "executed_steps": ["x"]}, {"plan": ["y"], "executed_steps": []}]


def test_the_readme_section_shows_the_examples_own_lines() -> None:
    """README's "Deploying a new version of your graph" quotes
    ``examples/deploy_new_version.py`` (run above): every line of its code blocks is a
    line of the example, so the README cannot drift from what runs."""
    root = Path(__file__).resolve().parent.parent
    readme = (root / "README.md").read_text()
    section = readme.split("## Deploying a new version of your graph", 1)[1].split("\n## ")[0]
    blocks = section.split("```python\n")[1:]
    assert len(blocks) == 2
    example = (root / "examples" / "deploy_new_version.py").read_text().splitlines()
    for block in blocks:
        for line in block.split("```", 1)[0].splitlines():
            assert line in example, line
