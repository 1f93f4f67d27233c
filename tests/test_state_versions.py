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
from collections.abc import Callable, Iterator
from typing import Any, TypedDict

import pymongo
import pytest
import redis
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, StateGraph
from langgraph.types import Command, interrupt

from langgraph_durable import (
    STATE_VERSION_KEY,
    DurableSaver,
    StateMigration,
    StateMigrationError,
    StateVersionError,
)
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
    """Every record the saver's key prefix and database hold, as bytes (Redis ``DUMP``)
    and documents (MongoDB), after a flush: to compare before and after a read."""
    saver.flush()
    cfg_ = saver.config
    r = redis.Redis.from_url(redis_url)
    try:
        keys = sorted(r.scan_iter(match="{" + cfg_.key_prefix + ":*", count=1000))
        hot = {k: r.dump(k) for k in keys if not k.endswith(b":hb")}
    finally:
        r.close()
    with pymongo.MongoClient(mongo_url) as m:
        db = m[cfg_.database]
        cold = {c: sorted(db[c].find({}), key=repr) for c in sorted(db.list_collection_names())}
    return {"redis": {k: v for k, v in hot.items() if b"heartbeat" not in k and b"hb" not in k},
            "mongo": cold}


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
