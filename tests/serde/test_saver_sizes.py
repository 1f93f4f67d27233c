"""ExternalRefSerializer behind DurableSaver, through real graphs on the real servers: a state
far over ``max_value_bytes`` is stored (it spills to the blob store), and a DataFrame carried
through 20 super-steps is stored once. Bytes per tier are measured with
``langgraph_durable.admin.extref_gc.storage_footprint`` (Redis ``MEMORY USAGE``, MongoDB BSON sizes,
blob object sizes) and printed (``pytest -s``); docs/external_refs.md has the numbers."""

from __future__ import annotations

import time
from typing import Any, TypedDict

import numpy as np
import pandas as pd
import pytest
import redis
from langgraph.graph import END, START, StateGraph

from langgraph_durable import DurableSaver, SerializationError
from langgraph_durable.admin.extref_gc import referenced_blob_keys, scan_pattern, storage_footprint
from langgraph_durable.serde import BlobStore, ExternalRefSerializer, LocalBlobStore, S3BlobStore
from langgraph_durable.testing import unique_options

MB = 1024 * 1024


def reopen(store: BlobStore) -> BlobStore:
    """The same store through a new object (as a new process would open it)."""
    if isinstance(store, LocalBlobStore):
        return LocalBlobStore(store.root)
    assert isinstance(store, S3BlobStore)
    return S3BlobStore(store.bucket, prefix=store.prefix, client=store.client)


def empty_redis(redis_url: str, prefix: str) -> int:
    with redis.Redis.from_url(redis_url) as r:
        keys = list(r.scan_iter(match=scan_pattern(prefix), count=1000))
        if keys:
            r.delete(*keys)
        return len(keys)


def table(rows: int, seed: int = 0) -> pd.DataFrame:
    """A mixed-type frame: ints, floats, a categorical, strings, timestamps, nullable ints."""
    rng = np.random.default_rng(seed)
    return pd.DataFrame({
        "id": np.arange(rows, dtype="int64"),
        "value": rng.normal(size=rows),
        "kind": pd.Categorical(rng.choice(["alpha", "beta", "gamma"], rows)),
        "label": pd.array(rng.choice(["north", "south", "east", "west"], rows), dtype="string"),
        "at": pd.date_range("2024-01-01", periods=rows, freq="s", tz="UTC"),
        "count": pd.array(rng.integers(0, 100, rows), dtype="Int64"),
    })


# ----------------------------------------------------------------------------- 40 MB state


class BigState(TypedDict, total=False):
    payload: bytes
    df: pd.DataFrame
    n: int


PAYLOAD = np.random.default_rng(1).bytes(40 * MB)  # incompressible
BIG_FRAME = table(300_000, seed=2)


def big_graph(saver: DurableSaver) -> Any:
    g = StateGraph(BigState)
    g.add_node("make", lambda s: {"payload": PAYLOAD, "df": BIG_FRAME, "n": 1})
    g.add_node("bump", lambda s: {"n": s["n"] + 1})
    g.add_edge(START, "make")
    g.add_edge("make", "bump")
    g.add_edge("bump", END)
    return g.compile(checkpointer=saver)


def test_without_external_refs_a_40mb_state_over_max_value_bytes_is_refused(
        redis_url: str, mongo_url: str) -> None:
    with DurableSaver.from_urls(redis_url, mongo_url,
                                **unique_options(max_value_bytes=32 * MB)) as saver:
        g = StateGraph(BigState)
        g.add_node("make", lambda s: {"payload": PAYLOAD})
        g.add_edge(START, "make")
        g.add_edge("make", END)
        with pytest.raises(SerializationError, match="max_value_bytes"):
            g.compile(checkpointer=saver).invoke({}, {"configurable": {"thread_id": "big"}})


def test_a_40mb_state_spills_to_the_blob_store_and_reloads_from_mongodb(
    redis_url: str, mongo_url: str, store: BlobStore
) -> None:
    options = unique_options()
    config = {"configurable": {"thread_id": "big"}}
    began = time.perf_counter()
    with DurableSaver.from_urls(redis_url, mongo_url, serde=ExternalRefSerializer(store=store),
                                **options) as saver:
        big_graph(saver).invoke({}, config)
        saver.flush()
        run_s = time.perf_counter() - began
        fp = storage_footprint(saver)
        assert len(referenced_blob_keys(saver)) == 2
    print(f"\n40 MB state ({type(store).__name__}, {run_s:.2f} s): {fp.summary()}; {fp.blobs}")
    state_bytes = len(PAYLOAD) + int(BIG_FRAME.memory_usage(deep=True).sum())
    assert fp.blob_count == 2  # the payload (raw) and the frame (Parquet), each once
    assert fp.blob_bytes > 40 * MB
    assert fp.redis_bytes < 200_000 and fp.mongo_bytes < 200_000  # envelopes only
    assert fp.redis_bytes + fp.mongo_bytes < state_bytes / 500

    assert empty_redis(redis_url, options["key_prefix"]) >= 8
    fresh = ExternalRefSerializer(store=reopen(store))
    with DurableSaver.from_urls(redis_url, mongo_url, serde=fresh, **options) as saver:
        snap = big_graph(saver).get_state(config)
        assert saver.last_read_tier == "durable"
        assert snap.values["payload"] == PAYLOAD and snap.values["n"] == 2
        pd.testing.assert_frame_equal(snap.values["df"], BIG_FRAME, check_exact=True)


# ----------------------------------------------------------------------------- frame stored once


class FrameState(TypedDict, total=False):
    df: pd.DataFrame
    step: int
    totals: list[float]


STEPS = 20


def carrying_graph(saver: DurableSaver, rows: int) -> Any:
    """``load`` makes the frame; ``work`` runs 20 super-steps, each returning the frame
    (a new channel version every step) and a statistic of it."""

    def load(state: FrameState) -> dict[str, Any]:
        return {"df": table(rows), "step": 0, "totals": []}

    def work(state: FrameState) -> dict[str, Any]:
        df = state["df"]
        total = float(df["value"].iloc[state["step"]::STEPS].sum())
        return {"df": df, "step": state["step"] + 1, "totals": [*state["totals"], total]}

    g = StateGraph(FrameState)
    g.add_node("load", load)
    g.add_node("work", work)
    g.add_edge(START, "load")
    g.add_edge("load", "work")
    g.add_conditional_edges("work", lambda s: END if s["step"] >= STEPS else "work")
    return g.compile(checkpointer=saver)


def test_a_frame_carried_through_20_super_steps_is_stored_once(
    redis_url: str, mongo_url: str, local_store: LocalBlobStore
) -> None:
    rows = 200_000
    options = unique_options()
    config = {"configurable": {"thread_id": "frames"}, "recursion_limit": 100}
    began = time.perf_counter()
    with DurableSaver.from_urls(redis_url, mongo_url,
                                serde=ExternalRefSerializer(store=local_store),
                                **options) as saver:
        app = carrying_graph(saver, rows)
        final = app.invoke({}, config)
        saver.flush()
        run_s = time.perf_counter() - began
        fp = storage_footprint(saver)
        history = list(app.get_state_history(config))
    ((key, parquet_bytes),) = fp.blobs  # one blob: the frame, stored once
    assert key.endswith(".parquet")
    print(f"\n{rows:,}-row frame, {STEPS} super-steps ({run_s:.2f} s), Parquet "
          f"{parquet_bytes:,} B: {fp.summary()}")
    assert final["step"] == STEPS and len(final["totals"]) == STEPS
    assert len(history) == STEPS + 3  # input, load, 20 work steps, and the final checkpoint
    assert fp.mongo_docs["checkpoints"] == len(history)
    assert fp.redis_bytes < parquet_bytes / 10 and fp.mongo_bytes < parquet_bytes / 10

    assert empty_redis(redis_url, options["key_prefix"]) >= 8
    fresh = ExternalRefSerializer(store=LocalBlobStore(local_store.root))
    with DurableSaver.from_urls(redis_url, mongo_url, serde=fresh, **options) as saver:
        snap = carrying_graph(saver, rows).get_state(config)
        assert saver.last_read_tier == "durable"
        pd.testing.assert_frame_equal(snap.values["df"], table(rows), check_exact=True)
