"""A deleted thread stays deleted: late writes of a run still going are refused.

InMemorySaver takes a ``put``/``put_writes`` naming a checkpoint that ``delete_thread``
removed, and so recreates a thread whose first checkpoint points at a missing parent.
DurableSaver refuses it with ``ThreadDeletedError`` (nothing written, in either tier),
while a new run on the same ``thread_id`` works, and so do writes naming checkpoints that
``copy_thread`` stored after the delete.
"""

from __future__ import annotations

import operator
import threading
from typing import Annotated, Any

import pymongo
import pytest
from langgraph.checkpoint.base import empty_checkpoint
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, StateGraph
from langgraph.types import Command, interrupt
from typing_extensions import TypedDict

from faults.common import tap
from langgraph_durable import DurableSaver, ThreadDeletedError
from langgraph_durable.core.ops import FindOne, MongoOp, Parallel, Script
from langgraph_durable.io.drivers import run_sync
from langgraph_durable.plans import history_edits, write
from langgraph_durable.testing import unique_options


def cfg(thread: str, checkpoint_id: str | None = None) -> dict:
    conf: dict[str, Any] = {"thread_id": thread, "checkpoint_ns": ""}
    if checkpoint_id:
        conf["checkpoint_id"] = checkpoint_id
    return {"configurable": conf}


def put(saver: Any, config: dict, i: int, run_id: str = "r1") -> dict:
    cp = empty_checkpoint()
    cp["channel_values"] = {"v": i}
    cp["channel_versions"] = {"v": f"{i + 1:032}.0"}
    md = {"step": i - 1, "source": "input" if i == 0 else "loop", "run_id": run_id}
    return saver.put(config, cp, md, {"v": f"{i + 1:032}.0"})


async def aput(saver: Any, config: dict, i: int) -> dict:
    cp = empty_checkpoint()
    cp["channel_values"] = {"v": i}
    cp["channel_versions"] = {"v": f"{i + 1:032}.0"}
    md = {"step": i - 1, "source": "input" if i == 0 else "loop"}
    return await saver.aput(config, cp, md, {"v": f"{i + 1:032}.0"})


def stored(saver: DurableSaver, thread: str) -> list[Any]:
    """Every checkpoint of ``thread``, after a flush (both tiers merged)."""
    saver.flush()
    return list(saver.list(cfg(thread)))


def test_late_put_and_put_writes_naming_a_deleted_checkpoint_are_refused(saver) -> None:
    c1 = put(saver, cfg("t"), 0)
    c2 = put(saver, c1, 1)
    saver.delete_thread("t")
    with pytest.raises(ThreadDeletedError) as err:
        put(saver, c2, 2)
    assert err.value.thread_id == "t" and err.value.checkpoint_ns == ""
    assert err.value.checkpoint_id == c2["configurable"]["checkpoint_id"]
    assert "'t'" in str(err.value) and c2["configurable"]["checkpoint_id"] in str(err.value)
    with pytest.raises(ThreadDeletedError):
        saver.put_writes(c2, [("v", 5)], "task-1")
    assert stored(saver, "t") == []
    assert saver.get_tuple(cfg("t")) is None


async def test_late_aput_and_aput_writes_are_refused_and_a_new_run_works(asaver) -> None:
    c1 = await aput(asaver, cfg("a"), 0)
    await asaver.adelete_thread("a")
    with pytest.raises(ThreadDeletedError):
        await aput(asaver, c1, 1)
    with pytest.raises(ThreadDeletedError):
        await asaver.aput_writes(c1, [("v", 5)], "task-1")
    n1 = await aput(asaver, cfg("a"), 0)  # a new run: no checkpoint_id
    n2 = await aput(asaver, n1, 1)
    await asaver.aput_writes(n2, [("v", 7)], "task-2")
    got = await asaver.aget_tuple(cfg("a"))
    assert got is not None and got.config == n2
    assert got.parent_config == n1 and got.pending_writes == [("task-2", "v", 7)]


def test_refused_when_mongodb_alone_held_the_thread_before_the_delete(
    saver, redis_client
) -> None:
    c1 = put(saver, cfg("c"), 0)
    saver.flush()
    redis_client.delete(*saver.context.keys("c").all)  # the hot window expired
    saver.delete_thread("c")
    with pytest.raises(ThreadDeletedError):
        put(saver, c1, 1)
    assert stored(saver, "c") == []


def _mongo(saver: DurableSaver, mongo_url: str) -> pymongo.collection.Collection:
    client: pymongo.MongoClient = pymongo.MongoClient(mongo_url)
    return client[saver.config.database][saver.context.collections.checkpoints]


def test_a_checkpoint_mongodb_still_holds_during_the_delete_is_refused(
    saver, mongo_url
) -> None:
    """The delete removes Redis (with its tombstone) before MongoDB: a write arriving in
    between finds the old checkpoint in MongoDB, stored before the delete: refused."""
    c1 = put(saver, cfg("m"), 0)
    saver.flush()
    col = _mongo(saver, mongo_url)
    doc = col.find_one({"thread_id": "m"})
    assert doc is not None and doc["put_ms"] > 0
    saver.delete_thread("m")
    col.insert_one(doc)  # as if MongoDB's part of the delete had not run yet
    with pytest.raises(ThreadDeletedError):
        put(saver, c1, 1)
    col.update_one({"_id": doc["_id"]}, {"$set": {"put_ms": 2**62}})  # stored after it
    c2 = put(saver, c1, 1)
    assert saver.get_tuple(cfg("m")).config == c2


def test_writes_naming_checkpoints_copied_after_the_delete_are_taken(saver) -> None:
    s1 = put(saver, cfg("src"), 0)
    put(saver, cfg("dst"), 0)
    saver.delete_thread("dst")
    saver.copy_thread("src", "dst")
    same = cfg("dst", s1["configurable"]["checkpoint_id"])
    d2 = put(saver, same, 1)
    saver.put_writes(d2, [("v", 3)], "task-1")
    assert [t.config for t in stored(saver, "dst")] == [d2, same]


def test_writes_naming_pruned_or_run_deleted_checkpoints_are_refused(saver) -> None:
    c1 = put(saver, cfg("p"), 0)
    c2 = put(saver, c1, 1)
    c3 = put(saver, c2, 2)
    saver.prune(["p"], strategy="keep_latest")
    with pytest.raises(ThreadDeletedError):
        put(saver, c2, 9)
    c4 = put(saver, c3, 3)  # the kept latest checkpoint still takes writes
    saver.put_writes(c4, [("v", 1)], "task-1")
    r1 = put(saver, cfg("q"), 0, run_id="doomed")
    saver.delete_for_runs(["doomed"])
    with pytest.raises(ThreadDeletedError):
        saver.put_writes(r1, [("v", 1)], "task-1")
    assert [t.config for t in stored(saver, "p")] == [c4, c3]
    assert stored(saver, "q") == []


def test_a_subgraph_entered_after_the_delete_is_refused(saver) -> None:
    """A subgraph's first checkpoint has no parent in its namespace: it names the
    enclosing checkpoint in LangGraph's ``checkpoint_map``, which was deleted."""
    root = put(saver, cfg("s"), 0)
    sub = {"configurable": {"thread_id": "s", "checkpoint_ns": "sub:1",
                            "checkpoint_map": {"": root["configurable"]["checkpoint_id"]}}}
    inner = put(saver, sub, 0)  # entering the subgraph while the thread lives
    assert inner["configurable"]["checkpoint_ns"] == "sub:1"
    saver.delete_thread("s")
    with pytest.raises(ThreadDeletedError) as err:
        put(saver, {"configurable": {**sub["configurable"], "checkpoint_ns": "sub:2"}}, 0)
    assert err.value.checkpoint_ns == "" and err.value.checkpoint_id == \
        root["configurable"]["checkpoint_id"]
    assert stored(saver, "s") == []


class Count(TypedDict):
    n: int


def _counting_graph(saver: DurableSaver, started: threading.Event, go: threading.Event) -> Any:
    def step(state: Count) -> Count:
        if state["n"] == 3:
            started.set()
            go.wait(10)  # the thread is deleted while this node runs
        return {"n": state["n"] + 1}

    def more(state: Count) -> str:
        return "step" if state["n"] < 6 else END

    g = StateGraph(Count)
    g.add_node("step", step)
    g.add_edge(START, "step")
    g.add_conditional_edges("step", more)
    return g.compile(checkpointer=saver)


@pytest.mark.parametrize("flusher", ["auto", "off"])
def test_a_run_going_on_while_its_thread_is_deleted_cannot_revive_it(
    redis_url, mongo_url, flusher
) -> None:
    """A graph deleted mid-run (with the in-process flusher racing it, or entries left
    for a later flusher) fails its next write; neither tier keeps anything of it."""
    opts = unique_options(flusher=flusher, delete_flush_timeout_s=10)
    with DurableSaver.from_urls(redis_url, mongo_url, **opts) as saver:
        started, go = threading.Event(), threading.Event()
        graph = _counting_graph(saver, started, go)
        errors: list[BaseException] = []

        def run() -> None:
            try:
                graph.invoke({"n": 0}, cfg("g"), durability="sync")
            except BaseException as exc:  # noqa: BLE001 - handed to the test
                errors.append(exc)

        worker = threading.Thread(target=run)
        worker.start()
        assert started.wait(10)
        if flusher == "off":
            drainer = DurableSaver.from_urls(redis_url, mongo_url, **{**opts, "flusher": "auto"})
            with drainer:
                drainer.delete_thread("g")
        else:
            saver.delete_thread("g")
        go.set()
        worker.join(10)
        assert len(errors) == 1 and isinstance(errors[0], ThreadDeletedError), errors
        with DurableSaver.from_urls(redis_url, mongo_url, **{**opts, "flusher": "auto"}) as s:
            assert stored(s, "g") == []  # stored() flushes first


# ---------------------------------------------------------------- found by trying to break it


def test_writes_for_a_checkpoint_not_stored_yet_after_a_delete_are_taken(saver) -> None:
    """``durability="async"``: a task's put_writes for checkpoint N may arrive before
    put(N). After a delete of the thread (or of an id never used) that is a new run's
    checkpoint, not a deleted one: taken, as InMemorySaver takes it."""
    saver.delete_thread("t")
    c1 = put(saver, cfg("t"), 0)
    cp = empty_checkpoint()
    saver.put_writes(cfg("t", cp["id"]), [("v", 5)], "task-1")
    c2 = saver.put(c1, cp, {"step": 0, "source": "loop"}, {})
    got = saver.get_tuple(cfg("t"))
    assert got is not None and got.config == c2
    assert got.pending_writes == [("task-1", "v", 5)]


class Log(TypedDict):
    v: Annotated[list, operator.add]


def _subgraph_with_interrupt(saver: Any, runs: list[str]) -> Any:
    def s1(state: Log) -> Log:
        runs.append("s1")
        return {"v": ["s1"]}

    def ask(state: Log) -> Log:
        return {"v": [f"answer={interrupt('q')}"]}

    inner = StateGraph(Log)
    inner.add_node("s1", s1)
    inner.add_node("ask", ask)
    inner.add_edge(START, "s1")
    inner.add_edge("s1", "ask")
    outer = StateGraph(Log)
    outer.add_node("sub", inner.compile())
    outer.add_edge(START, "sub")
    return outer.compile(checkpointer=saver)


@pytest.mark.parametrize("durability", ["exit", "async", "sync"])
def test_graphs_on_a_thread_id_deleted_before_run_as_in_memory_saver(
    saver, durability: str
) -> None:
    """A thread id a cleanup job deleted (or never used) runs like a new one, whatever the
    durability mode: a subgraph interrupt and its resume, each node once."""
    def play(checkpointer: Any) -> tuple[list[str], list[str]]:
        runs: list[str] = []
        graph = _subgraph_with_interrupt(checkpointer, runs)
        checkpointer.delete_thread("x")
        graph.invoke({"v": ["in"]}, cfg("x"), durability=durability)
        out = graph.invoke(Command(resume="1"), cfg("x"), durability=durability)
        return runs, out["v"]

    ours = play(saver)
    assert ours == play(InMemorySaver()) and ours[0] == ["s1"]


def _delete_before_the_first(op_kind: type, saver: DurableSaver, after: Any = None) -> Any:
    """A ``tap`` hook deleting thread ``t`` right before the first operation of
    ``op_kind`` (once ``after`` is true, when given)."""
    done: list[int] = []

    def before(op: Any) -> None:
        if isinstance(op, op_kind) and not done and (after is None or after()):
            done.append(1)
            saver.delete_thread("t")
    return before


def _mongo_left(saver: DurableSaver, mongo_url: str) -> int:
    db = pymongo.MongoClient(mongo_url)[saver.config.database]
    cols = saver.context.collections
    return sum(db[c].count_documents({"thread_id": "t"})
               for c in (cols.checkpoints, cols.blobs, cols.writes))


def test_strict_put_and_put_writes_overtaken_by_a_delete_leave_nothing(
    redis_url, mongo_url
) -> None:
    """Strict mode writes MongoDB itself after the Redis script: a delete running in
    between must not be undone by that write (it takes back what the delete removed)."""
    with DurableSaver.from_urls(redis_url, mongo_url,
                                **unique_options(durability="strict")) as s:
        c1 = put(s, cfg("t"), 0)
        cp = empty_checkpoint()
        cp["channel_values"], cp["channel_versions"] = {"v": 1}, {"v": f"{2:032}.0"}
        plan = write.put_plan(s.context, write.prepare_put(s.context, c1, cp, {"step": 0},
                                                       {"v": f"{2:032}.0"}))
        run_sync(tap(plan, _delete_before_the_first(Parallel, s)), s.sync_clients)
        assert stored(s, "t") == [] and _mongo_left(s, mongo_url) == 0
        c1 = put(s, cfg("t"), 0)
        plan = write.put_writes_plan(s.context, write.prepare_put_writes(
            s.context, c1, [("v", 1), ("__error__", "x")], "task", ""))
        run_sync(tap(plan, _delete_before_the_first(MongoOp, s)), s.sync_clients)
        assert stored(s, "t") == [] and _mongo_left(s, mongo_url) == 0


def test_a_delete_between_the_mongodb_check_and_the_retry_still_refuses(
    saver, mongo_url
) -> None:
    """A write naming a checkpoint ``copy_thread`` stored again after a delete passes the
    MongoDB check; a second delete before it is sent again refuses it."""
    s1 = put(saver, cfg("src"), 0)
    saver.copy_thread("src", "t")
    saver.delete_thread("t")
    saver.copy_thread("src", "t")
    checked: list[int] = []

    def seen(op: Any, result: Any, error: Any) -> None:
        if isinstance(op, FindOne):
            checked.append(1)

    plan = write.put_writes_plan(saver.context, write.prepare_put_writes(
        saver.context, cfg("t", s1["configurable"]["checkpoint_id"]), [("v", 1)], "task", ""))
    with pytest.raises(ThreadDeletedError):
        run_sync(tap(plan, _delete_before_the_first(Script, saver, lambda: checked), seen),
                 saver.sync_clients)
    assert checked == [1, 1]  # passed the first time; the second delete removed it
    assert stored(saver, "t") == [] and _mongo_left(saver, mongo_url) == 0


def test_a_new_run_flushed_while_the_delete_runs_is_not_deleted_with_it(
    saver, redis_client
) -> None:
    """The delete removes Redis, then MongoDB: a new run's first checkpoint, put and
    flushed in between, is newer than the delete and stays (it used to be deleted from
    MongoDB and lost once its hot keys expired). Stored-at times have millisecond
    precision: a put in the very millisecond of the delete counts as before it, so this
    one waits for the next millisecond of the Redis clock."""
    put(saver, cfg("t"), 0)
    deleted_at: list[int] = []
    new: list[dict] = []

    def redis_ms() -> int:
        sec, usec = redis_client.time()
        return sec * 1000 + usec // 1000

    def after(op: Any, result: Any, error: Any) -> None:
        if isinstance(op, Script) and op.name == "delete_thread":
            deleted_at.append(result.deleted_at_ms)  # DELETE_THREAD's DeleteThreadReply

    def between(op: Any) -> None:
        if isinstance(op, Parallel) and not new:  # the delete's MongoDB step comes next
            while redis_ms() <= deleted_at[0]:
                pass
            cp = empty_checkpoint()  # a version of its own, as get_next_version makes one
            cp["channel_values"], cp["channel_versions"] = {"v": 0}, {"v": "1.5"}
            new.append(saver.put(cfg("t"), cp, {"step": -1, "source": "input",
                                                "run_id": "new"}, {"v": "1.5"}))
            saver.flush()

    plan = history_edits.delete_thread_plan(saver.context, "t")
    run_sync(tap(plan, between, after), saver.sync_clients)
    saver.flush()
    redis_client.delete(*saver.context.keys("t").all)  # hot_ttl_s later: MongoDB alone
    assert [t.config for t in saver.list(cfg("t"))] == new
    got = saver.get_tuple(cfg("t"))
    assert got is not None and got.metadata["run_id"] == "new"
    assert got.checkpoint["channel_values"] == {"v": 0}
