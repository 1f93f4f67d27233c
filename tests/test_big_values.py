"""Values InMemorySaver stores, however big (up to ``max_value_bytes``, 256 MiB by default),
are stored and read back equal, from Redis (hot) and from MongoDB alone (cold), with the
default serializer and no blob store: values over ``chunks.THRESHOLD_BYTES`` are kept out
of single MongoDB documents (16 MiB limit) in the chunks collection. Deletes, prune,
delete_for_runs, copy and blob GC cover the chunks (those tests lower the threshold so
small values are chunked)."""

from __future__ import annotations

from typing import Any, TypedDict

import pytest
import redis
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, StateGraph

from langgraph_durable import DurableSaver
from langgraph_durable.core.records import CHUNKED_VERSION, SCHEMA_VERSION
from langgraph_durable.durable import chunks
from langgraph_durable.errors import CorruptRecordError
from langgraph_durable.testing import unique_options

MB = 1 << 20


def text(size: int, seed: str = "v") -> str:
    """``size`` characters (ASCII: as many bytes; ``size`` a multiple of 16), each 1 KiB
    block different from the others."""
    pad = "." * (1024 - 16)
    return "".join(f"{seed}{i:015x}{pad}" for i in range(size // 1024)) + \
        "".join(f"{seed}{i:015x}" for i in range(size % 1024 // 16))


class Big(TypedDict, total=False):
    text: str
    n: int


def big_graph(saver: Any, size: int) -> Any:
    """START -> make (writes a ``size``-byte string) -> count (reads it) -> END."""
    g = StateGraph(Big)
    g.add_node("make", lambda s: {"text": text(size), "n": 0})
    g.add_node("count", lambda s: {"n": len(s["text"])})
    g.add_edge(START, "make")
    g.add_edge("make", "count")
    g.add_edge("count", END)
    return g.compile(checkpointer=saver)


def cold(saver: DurableSaver, thread_id: str) -> None:
    """Everything to MongoDB, then the thread's Redis keys removed (MongoDB serves it)."""
    saver.flush(timeout_s=120)
    saver.sync_clients.redis.delete(*saver.context.keys(thread_id).all)


async def acold(saver: DurableSaver, thread_id: str, redis_url: str) -> None:
    await saver.aflush(timeout_s=120)
    with redis.Redis.from_url(redis_url) as r:
        r.delete(*saver.context.keys(thread_id).all)


def answers(graph: Any, config: dict, history: bool = True) -> list[Any]:
    """What a user reads back: the state, and every checkpoint of the history (values,
    next nodes, step); each value read costs seconds at 200 MiB, so ``history`` may be
    left out."""
    state = graph.get_state(config)
    steps = [(s.values, s.next, s.metadata["step"])
             for s in graph.get_state_history(config)] if history else []
    return [state.values, state.next, state.metadata["step"], steps]


async def aanswers(graph: Any, config: dict) -> list[Any]:
    state = await graph.aget_state(config)
    return [state.values, state.next, state.metadata["step"]]


def chunk_docs(saver: DurableSaver, thread_id: str | None = None) -> list[dict]:
    db = saver.sync_clients.db
    q = {} if thread_id is None else {"thread_id": thread_id}
    return list(db[saver.context.collections.chunks].find(q, {"data": 0}))


# ----------------------------------------------------------------------------- graphs


@pytest.mark.parametrize("size_mb", [40, 200])
def test_a_graph_state_value_of_many_mb_reads_back_as_in_memory_hot_and_cold(
        size_mb: int, redis_url: str, mongo_url: str) -> None:
    config = {"configurable": {"thread_id": f"big-{size_mb}"}}
    history = size_mb < 100
    memory = big_graph(InMemorySaver(), size_mb * MB)
    memory.invoke({}, config)
    expected = answers(memory, config, history)
    assert expected[0] == {"text": text(size_mb * MB), "n": size_mb * MB}
    # a 200 MB call took Redis over the default 5 s socket timeout on a loaded 2-core
    # machine (a CI run: "did not answer (put_writes)"); the bound is not what this tests
    with DurableSaver.from_urls(redis_url, mongo_url,
                                **unique_options(socket_timeout_s=60.0)) as saver:
        graph = big_graph(saver, size_mb * MB)
        graph.invoke({}, config)
        assert answers(graph, config, history) == expected
        assert saver.last_read_tier == "hot"
        cold(saver, f"big-{size_mb}")
        assert answers(graph, config, history) == expected
        assert saver.last_read_tier == "durable"
        # the string (msgpack: 5 header bytes + size) in 8 MiB chunks, stored once...
        blob = saver.sync_clients.db[saver.context.collections.blobs].find_one(
            {"channel": "text"})
        assert blob["v"] == CHUNKED_VERSION and blob["chunked"] == ["data"]
        assert blob["data"]["chunks"] == size_mb // 8 + 1
        assert blob["data"]["size"] == size_mb * MB + 5
        # and the node's write of it (a pending write of task "make") in as many more
        owners = [c["owner"] for c in chunk_docs(saver)]
        assert sorted(owners.count(o) for o in set(owners)) == [size_mb // 8 + 1] * 2
        if history:  # it resumes from MongoDB: the stored value goes on into a new run
            assert graph.invoke({"n": 1}, config)["n"] == size_mb * MB


async def test_a_40_mb_state_value_reads_back_through_the_async_api_hot_and_cold(
        redis_url: str, mongo_url: str) -> None:
    config = {"configurable": {"thread_id": "abig"}}
    memory = big_graph(InMemorySaver(), 40 * MB)
    await memory.ainvoke({}, config)
    expected = await aanswers(memory, config)
    async with DurableSaver.from_urls(redis_url, mongo_url, **unique_options()) as saver:
        graph = big_graph(saver, 40 * MB)
        await graph.ainvoke({}, config)
        assert await aanswers(graph, config) == expected
        await acold(saver, "abig", redis_url)
        assert await aanswers(graph, config) == expected
        assert saver.last_read_tier == "durable"


def test_a_20_mb_pending_write_and_its_overwrite_read_back_hot_and_cold(
        saver: DurableSaver) -> None:
    memory = InMemorySaver()
    cfg = {"configurable": {"thread_id": "w", "checkpoint_ns": ""}}
    cp = {"v": 1, "id": "1ef00000-0000-6000-8000-000000000001", "ts": "2024-01-01T00:00:00",
          "channel_values": {}, "channel_versions": {}, "versions_seen": {}}
    tuples = []
    for s in (memory, saver):
        at = s.put(cfg, dict(cp), {"step": 1}, {})  # type: ignore[arg-type]
        s.put_writes(at, [("big", text(20 * MB, "a")), ("small", 1)], "task-1")
        s.put_writes(at, [("__error__", text(20 * MB, "e"))], "task-2")
        if s is saver:
            saver.flush()  # the first value reaches MongoDB: the next replaces it there
        s.put_writes(at, [("__error__", text(20 * MB, "f"))], "task-2")  # overwrites
        tuples.append(s.get_tuple(at))
    expected = tuples[0].pending_writes
    assert [w[1] for w in expected] == ["big", "small", "__error__"]
    assert expected[2][2] == text(20 * MB, "f")
    assert tuples[1].pending_writes == expected
    cold(saver, "w")
    assert saver.get_tuple(cfg).pending_writes == expected
    assert saver.last_read_tier == "durable"
    # 3 chunks per 20 MiB value; the overwritten value's chunks stay beside, not mixed
    assert sorted((c["field"], c["n"]) for c in chunk_docs(saver, "w")) == \
        [("data", n) for n in (0, 0, 0, 1, 1, 1, 2, 2, 2)]


# ----------------------------------------------------------------------------- lifecycle


@pytest.fixture
def small_chunks(monkeypatch: pytest.MonkeyPatch) -> None:
    """Values over 1 KiB are chunked (in 1 KiB pieces)."""
    monkeypatch.setattr(chunks, "THRESHOLD_BYTES", 1024)


def _run(saver: DurableSaver, thread_id: str, steps: int = 3, run_id: str | None = None
         ) -> list[dict]:
    """``steps`` checkpoints each with a new 3 KiB value and a 3 KiB write; flushed."""
    cfg: dict = {"configurable": {"thread_id": thread_id, "checkpoint_ns": ""}}
    out = []
    for i in range(steps):
        cp = {"v": 1, "id": f"1ef00000-0000-6000-8000-{i:012d}", "ts": "2024-01-01",
              "channel_values": {"v": text(3000, str(i))},
              "channel_versions": {"v": f"{i + 1:032}.0"}, "versions_seen": {}}
        md: dict = {"step": i, **({"run_id": run_id} if run_id else {})}
        cfg = saver.put(cfg, cp, md, {"v": f"{i + 1:032}.0"})  # type: ignore[arg-type]
        saver.put_writes(cfg, [("out", text(3000, "w"))], f"task-{i}")
        out.append(cfg)
    saver.flush()
    return out


def _values(saver: DurableSaver, thread_id: str) -> list[tuple[Any, Any]]:
    cfg = {"configurable": {"thread_id": thread_id}}
    return [(t.checkpoint["channel_values"], t.pending_writes) for t in saver.list(cfg)]


def test_delete_thread_prune_and_delete_for_runs_leave_no_chunk_behind(
        saver: DurableSaver, small_chunks: None) -> None:
    for t in ("a", "b", "c", "keep"):
        _run(saver, t, run_id="r-c" if t == "c" else None)
    per_thread = 3 * 3 + 3 * 3  # 3 checkpoints x (3 value chunks + 3 write chunks)
    assert {t: len(chunk_docs(saver, t)) for t in ("a", "b", "c", "keep")} == \
        {"a": per_thread, "b": per_thread, "c": per_thread, "keep": per_thread}
    kept = _values(saver, "keep")

    saver.delete_thread("a")
    assert chunk_docs(saver, "a") == []
    saver.prune(["b"], strategy="keep_latest")
    assert len(chunk_docs(saver, "b")) == 6  # the latest checkpoint's value and write
    cold(saver, "b")
    assert _values(saver, "b") == [({"v": text(3000, "2")}, [("task-2", "out", text(3000, "w"))])]
    saver.delete_for_runs(["r-c"])
    # the checkpoints and their writes went with their chunks; the blobs stay (as in
    # InMemorySaver, delete_for_runs leaves channel values), and their chunks with them
    assert [c["checkpoint_id"] for c in chunk_docs(saver, "c")] == [None] * 9
    assert len(chunk_docs(saver, "keep")) == per_thread
    cold(saver, "keep")
    assert _values(saver, "keep") == kept


def test_copy_thread_copies_chunks_under_the_target_ids(saver: DurableSaver,
                                                        small_chunks: None) -> None:
    _run(saver, "src")
    expected = _values(saver, "src")
    saver.copy_thread("src", "dst")
    cold(saver, "src")
    cold(saver, "dst")
    assert _values(saver, "dst") == expected
    src, dst = chunk_docs(saver, "src"), chunk_docs(saver, "dst")
    assert len(dst) == len(src) == 18
    assert all(c["owner"].startswith("3:dst|") and c["thread_id"] == "dst" and c["_id"] ==
               chunks.chunk_id(c["owner"], c["field"], c["sha256"], c["n"]) for c in dst)
    saver.delete_thread("src")  # the copy stands on its own
    assert _values(saver, "dst") == expected


def _copied_then_written(saver: DurableSaver, *own: tuple[str, Any]) -> tuple[Any, Any]:
    """Thread "s": one checkpoint with a chunked ``__error__`` write of task "task",
    copied to "d", where the same task then writes ``own``; flushed. Returns the
    checkpoint's configs on "s" and "d"."""
    from langgraph.checkpoint.base import empty_checkpoint

    cp = empty_checkpoint()
    src: Any = {"configurable": {"thread_id": "s", "checkpoint_ns": "",
                                 "checkpoint_id": cp["id"]}}
    dst: Any = {"configurable": {**src["configurable"], "thread_id": "d"}}
    saver.put({"configurable": {"thread_id": "s", "checkpoint_ns": ""}}, cp, {"step": 0}, {})
    saver.put_writes(src, [("__error__", text(3000, "e"))], "task")
    saver.copy_thread("s", "d")
    saver.put_writes(dst, list(own), "task")
    saver.flush()
    return src, dst


def test_a_second_copy_over_the_targets_own_chunked_write_leaves_only_the_sources_chunks(
        saver: DurableSaver, small_chunks: None) -> None:
    # the target's own write of the same (task, idx) to a copied checkpoint, chunked
    # (one document per write, the same _id as the source's): the copy overwrites the
    # document, and its old chunks (another digest) must go with it
    _src, dst = _copied_then_written(saver, ("__error__", text(3000, "f")),
                                     ("x", text(3000, "x")))
    assert len(chunk_docs(saver, "d")) == 3 + 3 + 3  # the copy's, then the target's two
    saver.copy_thread("s", "d")
    assert sorted(c["sha256"] for c in chunk_docs(saver, "d")) == sorted(
        c["sha256"] for c in chunk_docs(saver, "s"))  # 3: the source's write alone
    cold(saver, "d")
    assert saver.get_tuple(dst).pending_writes == [("task", "__error__", text(3000, "e"))]


def test_a_chunked_write_the_target_stores_during_a_copy_keeps_its_chunks(
        saver: DurableSaver, small_chunks: None) -> None:
    # found by a helper: the target's run overwrites its chunked write to a copied
    # checkpoint after the copy stored its documents; the copy's clean-up deleted the
    # new value's chunks (a writes document naming chunks gone: CorruptRecordError).
    # Only chunks read before the copy are cleaned up now.
    from faults.common import tap
    from langgraph_durable.core.ops import BulkWrite, Parallel
    from langgraph_durable.plans import thread_copy

    _src, dst = _copied_then_written(saver, ("__error__", text(3000, "f")))
    cols, landed = saver.context.collections, []

    def target_writes_after_the_copy_stored(op: Any, _result: Any, _error: Any) -> None:
        inner = op.ops if isinstance(op, Parallel) else [op]
        if not landed and any(isinstance(o, BulkWrite) and o.collection == cols.writes
                              for o in inner):
            landed.append(saver.put_writes(dst, [("__error__", text(3000, "g"))], "task"))
            saver.flush()

    saver.run(tap(thread_copy.copy_thread_plan(saver.context, "s", "d"),
                  after=target_writes_after_the_copy_stored))
    assert landed
    cold(saver, "d")  # the target's own newer value, whole (its chunks kept)
    assert saver.get_tuple(dst).pending_writes == [("task", "__error__", text(3000, "g"))]


def test_a_missing_or_altered_chunk_is_a_corrupt_record_naming_thread_document_chunk(
        saver: DurableSaver, small_chunks: None) -> None:
    _run(saver, "t", steps=1)
    cold(saver, "t")
    col = saver.sync_clients.db[saver.context.collections.chunks]
    blob_chunk = col.find_one({"checkpoint_id": None, "n": 1})
    col.update_one({"_id": blob_chunk["_id"]}, {"$set": {"data": b"x" * 1024}})
    with pytest.raises(CorruptRecordError, match=(
            r"^the 3 chunks of field 'data' of MongoDB document '1:t\|0:\|1:v\|34:0+1.0' "
            r"\(thread 't'\) hold 2995 bytes with another digest")):
        saver.get_tuple({"configurable": {"thread_id": "t"}})
    col.delete_one({"_id": blob_chunk["_id"]})
    with pytest.raises(CorruptRecordError, match=(
            r"^chunk 1 of 3 of field 'data' of MongoDB document '1:t\|0:\|1:v\|34:0+1.0' "
            r"\(thread 't'\) is missing \(sha256 [0-9a-f]{64}\)$")):
        saver.get_tuple({"configurable": {"thread_id": "t"}})


def test_only_chunked_documents_carry_the_chunked_version(saver: DurableSaver,
                                                          small_chunks: None) -> None:
    """A package from before chunking reads ``v`` 1 only: it refuses a chunked document
    with SchemaVersionError ("newer ... upgrade the package") and reads the others."""
    _run(saver, "t", steps=1)
    db, cols = saver.sync_clients.db, saver.context.collections
    assert {(d["channel"], d["v"]) for d in db[cols.blobs].find()} == {("v", CHUNKED_VERSION)}
    assert {d["v"] for d in db[cols.checkpoints].find()} == {SCHEMA_VERSION}
    from langgraph_durable.plans.migrations import census_plan

    census = saver.run(census_plan(saver.context))
    assert {k: (c["old"], c["newer"]) for k, c in census.items()} == \
        {"checkpoints": (0, 0), "blobs": (0, 0), "writes": (0, 0)}


def test_blob_gc_finds_references_in_chunked_values(
        redis_url: str, mongo_url: str, tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from langgraph_durable.admin.extref_gc import referenced_blob_keys
    from langgraph_durable.serde import ExternalRefSerializer, LocalBlobStore

    serde = ExternalRefSerializer(store=LocalBlobStore(tmp_path), threshold_bytes=100)
    value = text(4096)  # to the blob store; its reference envelope (~200 B) is chunked
    monkeypatch.setattr(chunks, "THRESHOLD_BYTES", 64)
    with DurableSaver.from_urls(redis_url, mongo_url, serde=serde,
                                **unique_options()) as saver:
        cfg = {"configurable": {"thread_id": "g", "checkpoint_ns": ""}}
        cp = {"v": 1, "id": "1ef00000-0000-6000-8000-000000000001", "ts": "2024-01-01",
              "channel_values": {"v": value}, "channel_versions": {"v": "1"},
              "versions_seen": {}}
        saver.put(cfg, cp, {"step": 1}, {"v": "1"})  # type: ignore[arg-type]
        hot = referenced_blob_keys(saver)
        assert len(hot) == 1
        cold(saver, "g")
        assert {c["field"] for c in chunk_docs(saver, "g")} == {"data", "checkpoint"}
        assert referenced_blob_keys(saver) == hot
        assert saver.get_tuple(cfg).checkpoint["channel_values"] == {"v": value}


def test_strict_mode_writes_the_chunks_before_returning(
        redis_url: str, mongo_url: str, small_chunks: None) -> None:
    with DurableSaver.from_urls(redis_url, mongo_url, **unique_options(
            durability="strict", flusher="off")) as saver:
        cfg = {"configurable": {"thread_id": "s", "checkpoint_ns": ""}}
        cp = {"v": 1, "id": "1ef00000-0000-6000-8000-000000000001", "ts": "2024-01-01",
              "channel_values": {"v": text(3000)}, "channel_versions": {"v": "1"},
              "versions_seen": {}}
        at = saver.put(cfg, cp, {"step": 1}, {"v": "1"})  # type: ignore[arg-type]
        saver.put_writes(at, [("out", text(3000, "w"))], "task-1")
        # no flusher ran: MongoDB has the documents and their chunks from the calls alone
        assert sorted(c["owner"].split("|")[-1] for c in chunk_docs(saver, "s")) == \
            ["1:0"] * 3 + ["1:1"] * 3  # the write (idx 0) and the blob (version "1")
        saver.sync_clients.redis.delete(*saver.context.keys("s").all)
        tup = saver.get_tuple(cfg)
        assert tup.checkpoint["channel_values"] == {"v": text(3000)}
        assert tup.pending_writes == [("task-1", "out", text(3000, "w"))]


def test_a_flush_round_copies_at_most_round_bytes_at_a_time(
        redis_url: str, mongo_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    from langgraph_durable.core.ops import BulkWrite
    from langgraph_durable.io.drivers import run_sync
    from langgraph_durable.outbox import flusher, rounds

    monkeypatch.setattr(rounds, "ROUND_BYTES", 8000)  # two 3 KiB values, not three
    with DurableSaver.from_urls(redis_url, mongo_url, **unique_options(flusher="off")) as s:
        cfg: dict = {"configurable": {"thread_id": "r", "checkpoint_ns": ""}}
        for i in range(5):
            cp = {"v": 1, "id": f"1ef00000-0000-6000-8000-{i:012d}", "ts": "2024-01-01",
                  "channel_values": {"v": text(3000, str(i))},
                  "channel_versions": {"v": f"{i + 1:032}.0"}, "versions_seen": {}}
            cfg = s.put(cfg, cp, {"step": i}, {"v": f"{i + 1:032}.0"})  # type: ignore[arg-type]
        blob_writes: list[int] = []
        clients = s.sync_clients
        assert clients is not None
        clients.observer = lambda op, _s, _ok: blob_writes.append(len(op.requests)) if (
            isinstance(op, BulkWrite) and op.collection == s.context.collections.blobs) else None
        run_sync(flusher.ensure_group_plan(s.context), clients)
        stats = run_sync(flusher.flush_batch_plan(s.context, "c", block_ms=0, claim=False), clients)
        assert (stats.entries, stats.documents) == (5, 10)
        assert blob_writes == [2, 2, 1]  # entries copied in groups of at most 8000 bytes
        assert len(_values(s, "r")) == 5
