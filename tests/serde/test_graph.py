"""A real LangGraph StateGraph carries a DataFrame through several steps, is interrupted and
resumed from stored bytes only (a new saver and serializer, as after a process restart)."""

from __future__ import annotations

import operator
from typing import Annotated, Any, TypedDict

import pandas as pd
import pytest
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, StateGraph

from langgraph_durable.serde import (
    EXTREF_TYPE,
    BlobStore,
    ExternalRefSerializer,
    LocalBlobStore,
    S3BlobStore,
    collect_refs,
)

from ._helpers import blob_count


class State(TypedDict):
    df: pd.DataFrame
    log: Annotated[list[str], operator.add]


def load(state: State) -> dict[str, Any]:
    df = pd.DataFrame(
        {"price": [10.0, 20.0, 30.0], "qty": pd.array([1, None, 3], dtype="Int64")},
        index=pd.Index(["a", "b", "c"], name="sku"),
    )
    return {"df": df, "log": ["load"]}


def enrich(state: State) -> dict[str, Any]:
    df = state["df"].copy()
    df["total"] = df["price"] * df["qty"].astype("Float64")
    df["when"] = pd.Timestamp("2024-05-01", tz="Europe/Paris")
    return {"df": df, "log": ["enrich"]}


def note(state: State) -> dict[str, Any]:
    return {"log": [f"rows={len(state['df'])}"]}  # df unchanged: not re-uploaded


def summarize(state: State) -> dict[str, Any]:
    df = state["df"]
    return {"df": df[df["total"].notna()], "log": ["summarize"]}


def build(saver: InMemorySaver) -> Any:
    graph = StateGraph(State)
    for fn in (load, enrich, note, summarize):
        graph.add_node(fn.__name__, fn)
    graph.add_edge(START, "load")
    graph.add_edge("load", "enrich")
    graph.add_edge("enrich", "note")
    graph.add_edge("note", "summarize")
    graph.add_edge("summarize", END)
    return graph.compile(checkpointer=saver, interrupt_before=["summarize"])


def restarted(saver: InMemorySaver, store: BlobStore) -> InMemorySaver:
    """A new saver with a new serializer over the same stored bytes and blob store."""
    if isinstance(store, LocalBlobStore):
        fresh_store: BlobStore = LocalBlobStore(store.root)
    else:
        assert isinstance(store, S3BlobStore)
        fresh_store = S3BlobStore(store.bucket, prefix=store.prefix, client=store.client)
    fresh = InMemorySaver(serde=ExternalRefSerializer(store=fresh_store))
    fresh.storage, fresh.writes, fresh.blobs = saver.storage, saver.writes, saver.blobs
    return fresh


def _expected_enriched() -> pd.DataFrame:
    return enrich({"df": load({"df": None, "log": []})["df"], "log": []})["df"]  # type: ignore[typeddict-item]


@pytest.mark.parametrize("use_async", [False, True], ids=["sync", "async"])
async def test_dataframe_through_graph_with_resume(store: BlobStore, use_async: bool) -> None:
    saver = InMemorySaver(serde=ExternalRefSerializer(store=store))
    config = {"configurable": {"thread_id": "t-1"}}
    app = build(saver)
    if use_async:
        await app.ainvoke({"log": []}, config)
    else:
        app.invoke({"log": []}, config)
    paused = app.get_state(config)
    assert paused.next == ("summarize",)
    pd.testing.assert_frame_equal(paused.values["df"], _expected_enriched(), check_exact=True)

    stored_df = [v for (tid, _, ch, _), v in saver.blobs.items() if ch == "df" and tid == "t-1"]
    assert stored_df and all(t == EXTREF_TYPE and len(d) < 400 for t, d in stored_df)
    assert blob_count(store) == 2  # loaded and enriched frames; "note" re-uploaded nothing

    resumed_app = build(restarted(saver, store))
    if use_async:
        final = await resumed_app.ainvoke(None, config)
    else:
        final = resumed_app.invoke(None, config)
    expected = _expected_enriched()
    expected = expected[expected["total"].notna()]
    pd.testing.assert_frame_equal(final["df"], expected, check_exact=True)
    assert final["log"] == ["load", "enrich", "rows=3", "summarize"]

    history = list(resumed_app.get_state_history(config))
    frames = [s.values["df"] for s in history if "df" in s.values]
    assert len(frames) >= 4 and all(isinstance(f, pd.DataFrame) for f in frames)
    referenced = collect_refs(saver.blobs.values()) | collect_refs(
        v for w in saver.writes.values() for (_, _, v, _) in w.values()
    )
    assert referenced == {i.key for i in store.list_keys()}


def test_two_threads_share_one_blob(local_store: LocalBlobStore) -> None:
    saver = InMemorySaver(serde=ExternalRefSerializer(store=local_store))
    app = build(saver)
    for thread in ("a", "b", "c"):
        app.invoke({"log": []}, {"configurable": {"thread_id": thread}})
    assert blob_count(local_store) == 2
