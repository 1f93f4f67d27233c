"""Graph-level equivalence: real LangGraph graphs give the same results and the same
history with DurableSaver as with InMemorySaver, through the sync and the async API,
from Redis (hot) and from MongoDB alone (cold: ``flush()`` + the saver's Redis keys deleted
at the script's ``COLD`` points and before every read of the final record).

Checkpoint ids, task ids, interrupt ids, random message ids and timestamps differ
between two runs of the same graph, so runs are compared after ``Normalizer``: every id
becomes a label in order of first appearance, checkpoint ids first, by their position in
the thread's ``list()`` (so parent links and ``checkpoint_map``/``parents`` compare as
positions); channel versions lose their random fraction; ``created_at``/``ts`` go.
Everything else compares exactly: values, ``next``, metadata (``source``, ``step``,
``parents``; LangGraph 1.x metadata has no ``writes`` any more), tasks with their
interrupts, results and subgraph states, and each checkpoint's raw channel values,
versions and pending writes.
"""

from __future__ import annotations

import dataclasses
import itertools
import re
from typing import Any

import pytest
import redis
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Send

from langgraph_durable import DurableSaver
from langgraph_durable.io.clients import redis_from_url
from langgraph_durable.testing import drop_key_prefix, unique_options

from .graphs import (
    COLD,
    CONFIG,
    SCENARIOS,
    THREAD,
    build_delta,
    build_fanout,
    delta_script,
    fanout_script,
)

# ------------------------------------------------------------------ normalization

ID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}|[0-9a-f]{32}")
VERSION = re.compile(r"(\d{32})\..+")  # "<int:032>.<random()>", e.g. "...14.8.6e-05"


class Normalizer:
    """Replaces run-specific ids by labels; seeded with the checkpoint ids in list order."""

    def __init__(self, checkpoint_ids: list[str]) -> None:
        self.labels = {cid: f"cp{i}" for i, cid in enumerate(checkpoint_ids)}

    def _label(self, m: re.Match[str]) -> str:
        return self.labels.setdefault(m.group(), f"id{len(self.labels)}")

    def __call__(self, obj: Any) -> Any:
        if isinstance(obj, str):
            if v := VERSION.fullmatch(obj):
                return int(v.group(1))
            return ID.sub(self._label, obj)
        if isinstance(obj, dict):
            keys = sorted(obj, key=lambda k: ID.sub("#", str(k)))  # storage order may differ
            return {self(k): self(obj[k]) for k in keys}
        if isinstance(obj, Send):
            return ("Send", obj.node, self(obj.arg))
        if hasattr(obj, "model_dump"):  # messages
            return (type(obj).__name__, self(obj.model_dump()))
        if hasattr(obj, "_asdict"):  # StateSnapshot, PregelTask, CheckpointTuple, ...
            fields = {k: v for k, v in obj._asdict().items() if k != "created_at"}
            return (type(obj).__name__, self(fields))
        if dataclasses.is_dataclass(obj):  # Interrupt
            return (type(obj).__name__, self({f.name: getattr(obj, f.name)
                                              for f in dataclasses.fields(obj)}))
        if isinstance(obj, (list, tuple)):
            return [self(x) for x in obj]
        return obj


def differences(got: Any, expected: Any, path: str = "") -> list[str]:
    """Paths where two normalized records differ (for readable failure messages)."""
    if type(got) is not type(expected):
        return [f"{path}: {got!r:.300} != {expected!r:.300}"]
    if isinstance(got, dict):
        return [d for k in {**got, **expected} for d in (
            differences(got.get(k, "<missing>"), expected.get(k, "<missing>"), f"{path}.{k}"))]
    if isinstance(got, list) and len(got) == len(expected):
        return [d for i, (g, e) in enumerate(zip(got, expected))
                for d in differences(g, e, f"{path}[{i}]")]
    return [] if got == expected else [f"{path}: {got!r:.300} != {expected!r:.300}"]


def _tuple_view(t: Any) -> dict[str, Any]:
    cp = {k: v for k, v in t.checkpoint.items() if k != "ts"}
    return {"config": t.config, "checkpoint": cp, "metadata": t.metadata,
            "parent_config": t.parent_config, "pending_writes": t.pending_writes}


def _namespaces(tuples: list[Any]) -> list[str]:
    return list(dict.fromkeys(t.config["configurable"]["checkpoint_ns"] for t in tuples))


def _ns_config(ns: str) -> dict[str, Any]:
    return {"configurable": {"thread_id": THREAD, "checkpoint_ns": ns}}


# ------------------------------------------------------------------ drivers


def _settle(call: Any, result: Any) -> Any:
    if call.parallel:  # sort each run of chunks of one node (see graphs.Call)
        return [c for _, run in itertools.groupby(result, key=lambda c: list(c))
                for c in sorted(run, key=repr)]
    return result


class Run:
    """A graph on one checkpointer; ``redis`` set = a DurableSaver run with COLD points."""

    def __init__(self, build: Any, saver: Any, redis_client: redis.Redis | None = None):
        self.graph, self.saver, self.redis = build(saver), saver, redis_client

    def cold(self) -> None:
        if self.redis is not None:
            self.saver.flush()
            drop_key_prefix(self.redis, self.saver.config.key_prefix)

    async def acold(self) -> None:
        if self.redis is not None:
            await self.saver.aflush()
            drop_key_prefix(self.redis, self.saver.config.key_prefix)

    def play(self, script: Any) -> list[Any]:
        outputs, gen, result = [], script(), None
        while True:
            try:
                call = gen.send(result)
            except StopIteration:
                return outputs
            if call is COLD:
                self.cold()
                result = None
                continue
            result = getattr(self.graph, call.method)(*call.args, **call.kwargs)
            if call.method in ("stream", "get_state_history"):
                result = _settle(call, list(result))
            outputs.append(result)

    async def aplay(self, script: Any) -> list[Any]:
        outputs, gen, result = [], script(), None
        while True:
            try:
                call = gen.send(result)
            except StopIteration:
                return outputs
            if call is COLD:
                await self.acold()
                result = None
                continue
            method = getattr(self.graph, "a" + call.method)
            if call.method in ("stream", "get_state_history"):
                result = _settle(call, [x async for x in method(*call.args, **call.kwargs)])
            else:
                result = await method(*call.args, **call.kwargs)
            outputs.append(result)

    def record(self, outputs: list[Any]) -> dict[str, Any]:
        """Everything a user can read back about the thread, normalized."""
        self.cold()
        tuples = list(self.saver.list(CONFIG))  # every namespace, newest first in each
        nss = _namespaces(tuples)
        raw = {
            "outputs": outputs,
            "list": [_tuple_view(t) for t in tuples],
            "history": {ns: list(self.graph.get_state_history(_ns_config(ns))) for ns in nss},
            "loop_steps_page": list(self.graph.get_state_history(
                CONFIG, filter={"source": "loop"}, before=tuples[1].config, limit=3)),
            "state": self.graph.get_state(CONFIG, subgraphs=True),
        }
        return Normalizer([t.checkpoint["id"] for t in tuples])(raw)

    async def arecord(self, outputs: list[Any]) -> dict[str, Any]:
        await self.acold()
        tuples = [t async for t in self.saver.alist(CONFIG)]
        history = {}
        for ns in _namespaces(tuples):
            history[ns] = [s async for s in self.graph.aget_state_history(_ns_config(ns))]
        raw = {
            "outputs": outputs,
            "list": [_tuple_view(t) for t in tuples],
            "history": history,
            "loop_steps_page": [s async for s in self.graph.aget_state_history(
                CONFIG, filter={"source": "loop"}, before=tuples[1].config, limit=3)],
            "state": await self.graph.aget_state(CONFIG, subgraphs=True),
        }
        return Normalizer([t.checkpoint["id"] for t in tuples])(raw)


def _expected_tier(tier: str) -> str:
    return "durable" if tier == "cold" else "hot"


TIERS = ["hot", "cold"]


# ------------------------------------------------------------------ every scenario


@pytest.mark.parametrize("tier", TIERS)
@pytest.mark.parametrize("name", list(SCENARIOS))
def test_sync_run_gives_in_memory_results_and_history(
    name: str, tier: str, saver: DurableSaver, redis_client: redis.Redis
) -> None:
    build, script = SCENARIOS[name]
    memory = Run(build, InMemorySaver())
    durable = Run(build, saver, redis_client if tier == "cold" else None)

    expected = memory.record(memory.play(script))
    got = durable.record(durable.play(script))

    assert got == expected, "\n".join(differences(got, expected)[:20])
    assert len(got["list"]) >= 3
    durable.graph.get_state(CONFIG)
    assert saver.last_read_tier == _expected_tier(tier)


@pytest.mark.parametrize("tier", TIERS)
@pytest.mark.parametrize("name", list(SCENARIOS))
async def test_async_run_gives_in_memory_results_and_history(
    name: str, tier: str, asaver: DurableSaver, redis_client: redis.Redis
) -> None:
    build, script = SCENARIOS[name]
    memory = Run(build, InMemorySaver())
    durable = Run(build, asaver, redis_client if tier == "cold" else None)

    expected = await memory.arecord(await memory.aplay(script))
    got = await durable.arecord(await durable.aplay(script))

    assert got == expected, "\n".join(differences(got, expected)[:20])
    await durable.graph.aget_state(CONFIG)
    assert asaver.last_read_tier == _expected_tier(tier)


# ------------------------------------------------------------------ expected values


def _plain(values: dict[str, Any]) -> dict[str, Any]:
    """State values with messages as ``"type: content"`` (tool calls as ``name(args)``)."""
    def msg(m: Any) -> str:
        calls = "".join(f"{c['name']}({c['args']})" for c in getattr(m, "tool_calls", []))
        return f"{m.type}: {m.content}{calls}"
    return {k: [msg(m) for m in v] if k == "messages" else v for k, v in values.items()}


def _shape(graph: Any) -> list[tuple[Any, ...]]:
    """(parent position, source, step, next) of each root checkpoint, newest first."""
    history = list(graph.get_state_history(CONFIG))
    pos = {s.config["configurable"]["checkpoint_id"]: i for i, s in enumerate(history)}
    return [(pos[s.parent_config["configurable"]["checkpoint_id"]] if s.parent_config else None,
             s.metadata["source"], s.metadata["step"], s.next) for s in history]


LOG = ["go", *(f"s{i}" for i in range(1, 8)), "again", *(f"s{i}" for i in range(8, 15))]
FINAL = {
    "tool_calling_agent_over_three_turns": {"messages": [
        "human: 2+3?", "ai: add({'a': 2, 'b': 3})", "tool: 5", "ai: 2 + 3 = 5",
        "human: 4*5 and 1+1?", "ai: multiply({'a': 4, 'b': 5})add({'a': 1, 'b': 1})",
        "tool: 20", "tool: 2", "ai: 20 and 2", "human: thanks", "ai: bye"]},
    "interrupt_then_two_resumes": {"draft": "draft of memo (shorter)",
                                   "log": ["write", "review:shorter", "confirm:True"]},
    "subgraph_interrupted_then_resumed": {"topic": "tides", "answer": "moon (checked)",
                                          "notes": ["prepared tides", "answer: moon (checked)"]},
    "send_fan_out_with_reducer": {"topics": ["d", "e"], "results": ["a!", "b!", "c!", "d!", "e!"],
                                  "summary": "a!, b!, c!, d!, e!"},
    "update_state_and_forks_from_old_checkpoint": {"trail": ["start", "a", "b", "c", "note"]},
    "delta_channel_with_snapshots": {"n": 14, "log": [*LOG, "manual"]},
    "delta_channel_in_exit_durability": {"n": 21, "log": [*LOG, "more", *(
        f"s{i}" for i in range(15, 22))]},
    "durability_sync_async_exit": {"trail": ["sync", *"abc", "async", *"abc", "exit", *"abc"]},
}


@pytest.mark.parametrize("name", list(SCENARIOS))
def test_final_state_read_from_mongodb_is_as_scripted(
    name: str, saver: DurableSaver, redis_client: redis.Redis
) -> None:
    build, script = SCENARIOS[name]
    run = Run(build, saver, redis_client)
    run.play(script)
    run.cold()
    assert _plain(run.graph.get_state(CONFIG).values) == FINAL[name]
    assert saver.last_read_tier == "durable"


def test_forks_hang_off_the_checkpoint_before_b_in_history_read_from_mongodb(
    saver: DurableSaver, redis_client: redis.Redis
) -> None:
    build, script = SCENARIOS["update_state_and_forks_from_old_checkpoint"]
    run = Run(build, saver, redis_client)
    run.play(script)
    run.cold()
    assert _shape(run.graph) == [
        (1, "update", 5, ()),  # update_state on the latest (after the replay)
        (2, "loop", 4, ()),
        (3, "loop", 3, ("c",)),
        (9, "fork", 2, ("b",)),  # branch 2: replay from the checkpoint before b
        (5, "loop", 4, ()),
        (6, "loop", 3, ("c",)),
        (9, "update", 2, ("b",)),  # branch 1: update_state(as_node="a") on it
        (8, "loop", 3, ()),  # the first run
        (9, "loop", 2, ("c",)),
        (10, "loop", 1, ("b",)),
        (11, "loop", 0, ("a",)),
        (None, "input", -1, ("__start__",)),
    ]


async def test_exit_durability_stores_only_the_runs_last_checkpoint(
    asaver: DurableSaver, redis_client: redis.Redis
) -> None:
    build, script = SCENARIOS["durability_sync_async_exit"]
    run = Run(build, asaver, redis_client)
    await run.aplay(script)
    await run.acold()
    assert _shape(run.graph) == [
        (1, "loop", 13, ()),  # durability="exit": steps 9-12 never stored
        (2, "loop", 8, ()),  # durability="async"
        (3, "loop", 7, ("c",)),
        (4, "loop", 6, ("b",)),
        (5, "loop", 5, ("a",)),
        (6, "input", 4, ("__start__",)),
        (7, "loop", 3, ()),  # durability="sync"
        (8, "loop", 2, ("c",)),
        (9, "loop", 1, ("b",)),
        (10, "loop", 0, ("a",)),
        (None, "input", -1, ("__start__",)),
    ]


def test_subgraph_state_at_its_interrupt_is_read_from_mongodb(
    saver: DurableSaver, redis_client: redis.Redis
) -> None:
    build, _ = SCENARIOS["subgraph_interrupted_then_resumed"]
    run = Run(build, saver, redis_client)
    run.graph.invoke({"topic": "tides", "notes": []}, CONFIG)
    run.cold()
    state = run.graph.get_state(CONFIG, subgraphs=True)
    (task,) = state.tasks
    child = task.state
    assert (state.next, task.name, [i.value for i in task.interrupts]) == (
        ("child",), "child", [{"topic": "tides"}])
    assert child.config["configurable"]["checkpoint_ns"] == f"child:{task.id}"
    assert (child.values, child.next, child.metadata["parents"]) == (
        {"topic": "tides"}, ("ask",), {"": state.config["configurable"]["checkpoint_id"]})
    child_history = list(run.graph.get_state_history(
        _ns_config(child.config["configurable"]["checkpoint_ns"])))
    assert [s.metadata["step"] for s in child_history] == [0, -1]
    assert saver.last_read_tier == "durable"


async def test_send_fan_out_streams_one_update_per_send(asaver: DurableSaver) -> None:
    run = Run(build_fanout, asaver)
    (chunks, _) = await run.aplay(fanout_script)
    assert chunks == [{"work": {"results": ["a!"]}}, {"work": {"results": ["b!"]}},
                      {"work": {"results": ["c!"]}}, {"summarize": {"summary": "a!, b!, c!"}}]


# ------------------------------------------------------------------ DeltaChannel + prune


@pytest.mark.parametrize("tier", TIERS)
def test_delta_channel_state_survives_prune_keep_latest(
    tier: str, saver: DurableSaver, redis_client: redis.Redis
) -> None:
    """InMemorySaver has no prune: the pruned DurableSaver thread is compared with the
    unpruned in-memory one, by state and by how the graph goes on from it."""
    memory = Run(build_delta, InMemorySaver())
    durable = Run(build_delta, saver, redis_client if tier == "cold" else None)
    memory.play(delta_script)
    durable.play(delta_script)

    saver.prune([THREAD], strategy="keep_latest")
    durable.cold()

    assert durable.graph.get_state(CONFIG).values == {"n": 14, "log": [*LOG, "manual"]}
    # the latest (step 17) and its ancestors back to the log snapshot taken at step 15
    assert [s.metadata["step"] for s in durable.graph.get_state_history(CONFIG)] == [17, 16, 15]
    assert saver.last_read_tier == _expected_tier(tier)
    for run in (memory, durable):
        run.graph.invoke({"log": ["after"]}, CONFIG)
    assert durable.graph.get_state(CONFIG).values == memory.graph.get_state(CONFIG).values
    assert durable.graph.get_state(CONFIG).values["n"] == 21


async def test_delta_channel_state_survives_aprune_keep_latest(asaver: DurableSaver) -> None:
    memory = Run(build_delta, InMemorySaver())
    durable = Run(build_delta, asaver)
    await memory.aplay(delta_script)
    await durable.aplay(delta_script)

    await asaver.aprune([THREAD], strategy="keep_latest")

    assert (await durable.graph.aget_state(CONFIG)).values == {"n": 14, "log": [*LOG, "manual"]}
    for run in (memory, durable):
        await run.graph.ainvoke({"log": ["after"]}, CONFIG)
    assert (await durable.graph.aget_state(CONFIG)).values == (
        await memory.graph.aget_state(CONFIG)).values


# ------------------------------------------------------------------ on a Redis Cluster


@pytest.mark.parametrize("tier", TIERS)
@pytest.mark.parametrize("name", list(SCENARIOS))
def test_sync_run_on_a_redis_cluster_gives_in_memory_results_and_history(
    name: str, tier: str, redis_cluster_url: str, mongo_url: str
) -> None:
    with (DurableSaver.from_urls(redis_cluster_url, mongo_url, **unique_options()) as saver,
          redis_from_url(redis_cluster_url, saver.config, asyncio=False) as cluster):
        test_sync_run_gives_in_memory_results_and_history(name, tier, saver, cluster)


@pytest.mark.parametrize("tier", TIERS)
@pytest.mark.parametrize("name", list(SCENARIOS))
async def test_async_run_on_a_redis_cluster_gives_in_memory_results_and_history(
    name: str, tier: str, redis_cluster_url: str, mongo_url: str
) -> None:
    async with DurableSaver.from_urls(redis_cluster_url, mongo_url, **unique_options()) as s:
        with redis_from_url(redis_cluster_url, s.config, asyncio=False) as cluster:
            await test_async_run_gives_in_memory_results_and_history(name, tier, s, cluster)
