"""Writes notebooks/dataframes_in_state.ipynb from the cell sources below.

Run it after editing the cells: ``.venv/bin/python scripts/nb_dataframes.py``.
tests/test_notebooks.py executes the written notebook top to bottom against real servers
(it sets ``REDIS_URL``, ``MONGODB_URL`` and ``LANGGRAPH_BLOB_DIR``).
"""

from __future__ import annotations

from nbkit import write

NAME = "dataframes_in_state"

CELLS = [
    ("md", """# DataFrames in LangGraph state, checkpointed by DurableSaver

LangGraph's default serializer refuses a pandas DataFrame, and even a JSON copy of a large
table would blow past `DurableSaver`'s `max_value_bytes` (15 MiB) and bloat Redis and MongoDB
with one copy per checkpoint. `ExternalRefSerializer` stores each DataFrame (and NumPy array,
and any value over `threshold_bytes`) once, as a content-addressed Parquet blob in a local
folder or an S3 bucket; checkpoints hold a reference of a few hundred bytes.

This notebook runs a DataFrame-carrying graph up to an interrupt, "restarts" (a new saver and
serializer, Redis emptied, as on a new machine), resumes it from MongoDB plus the blob store,
and lists what the blob store holds.

Servers come from `langgraph_durable.testing`: `REDIS_URL` / `MONGODB_URL` when set,
otherwise local `redis-server` and SecantusDB processes on free ports."""),
    ("code", """from contextlib import ExitStack

from langgraph_durable.testing import mongo_server, redis_server

servers = ExitStack()  # holds the context managers: a local server lives until servers.close()
redis_srv = servers.enter_context(redis_server())
mongo_srv = servers.enter_context(mongo_server())
print(redis_srv.url, mongo_srv.url)"""),
    ("md", """## The blob store

A `LocalBlobStore` in `$LANGGRAPH_BLOB_DIR` (a temporary folder when unset). For S3 use
`S3BlobStore("bucket", prefix="blobs")`; nothing else changes."""),
    ("code", """import os
import tempfile

from langgraph_durable.serde import ExternalRefSerializer, LocalBlobStore

blob_dir = os.environ.get("LANGGRAPH_BLOB_DIR") or tempfile.mkdtemp(prefix="lgd-blobs-")
store = LocalBlobStore(blob_dir)
print(store)"""),
    ("md", """## A graph that carries DataFrames

`load` makes 200,000 sales rows, `clean` drops refunds, `summarize` aggregates per region;
the graph stops before `report` (`interrupt_before`), as a human-review step would."""),
    ("code", """import operator
from typing import Annotated, TypedDict

import numpy as np
import pandas as pd
from langgraph.graph import END, START, StateGraph


class State(TypedDict, total=False):
    sales: pd.DataFrame
    clean: pd.DataFrame
    summary: pd.DataFrame
    log: Annotated[list[str], operator.add]


def load(state: State) -> dict:
    rng = np.random.default_rng(42)
    n = 200_000
    sales = pd.DataFrame({
        "region": pd.Categorical(rng.choice(["north", "south", "east", "west"], n)),
        "amount": rng.gamma(2.0, 40.0, n).round(2),
        "refund": rng.random(n) < 0.03,
        "at": pd.date_range("2024-01-01", periods=n, freq="min", tz="UTC"),
    })
    return {"sales": sales, "log": [f"loaded {len(sales):,} rows"]}


def clean(state: State) -> dict:
    kept = state["sales"][~state["sales"]["refund"]].drop(columns="refund")
    return {"clean": kept.reset_index(drop=True), "log": [f"kept {len(kept):,} rows"]}


def summarize(state: State) -> dict:
    summary = state["clean"].groupby("region", observed=True)["amount"].agg(["count", "sum"])
    return {"summary": summary, "log": ["summarized"]}


def report(state: State) -> dict:
    best = state["summary"]["sum"].idxmax()
    return {"log": [f"best region: {best}"]}


builder = StateGraph(State)
for fn in (load, clean, summarize, report):
    builder.add_node(fn.__name__, fn)
builder.add_edge(START, "load")
builder.add_edge("load", "clean")
builder.add_edge("clean", "summarize")
builder.add_edge("summarize", "report")
builder.add_edge("report", END);"""),
    ("md", """## First process: run until the interrupt

`storage_footprint` measures what the saver holds in each tier: Redis (`MEMORY USAGE` of its
keys), MongoDB (BSON size of its documents) and the blob store."""),
    ("code", """import uuid

from langgraph_durable import DurableSaver
from langgraph_durable import storage_footprint

tag = uuid.uuid4().hex[:6]  # this notebook's own key prefix and database
options = {"key_prefix": "nb-df-" + tag, "database": "nb_dataframes_" + tag}
config = {"configurable": {"thread_id": "sales-1"}}

with DurableSaver.from_urls(redis_srv.url, mongo_srv.url,
                            serde=ExternalRefSerializer(store=store), **options) as saver:
    graph = builder.compile(checkpointer=saver, interrupt_before=["report"])
    graph.invoke({"log": []}, config)
    paused = graph.get_state(config)
    saver.flush()
    first = storage_footprint(saver)

print("paused before:", paused.next, "| log:", paused.values["log"])
print(first.summary())
expected_summary = paused.values["summary"]
expected_summary"""),
    ("md", """## The restart: new saver, new serializer, Redis emptied

Leaving the `with` block drained the outbox to MongoDB. Now the thread's Redis keys are
deleted (only this notebook's, by key prefix), and a new saver with a new serializer opens the
same MongoDB database and the same blob folder, as another process on another machine would."""),
    ("code", """import redis

from langgraph_durable.testing import drop_key_prefix

with redis.Redis.from_url(redis_srv.url) as r:
    deleted = drop_key_prefix(r, options["key_prefix"])
print(f"deleted {deleted} Redis keys")

with DurableSaver.from_urls(redis_srv.url, mongo_srv.url,
                            serde=ExternalRefSerializer(store=LocalBlobStore(blob_dir)),
                            **options) as saver:
    graph = builder.compile(checkpointer=saver, interrupt_before=["report"])
    state = graph.get_state(config)
    tier = saver.last_read_tier
    print("after the restart:", state.next, "served by the", tier, "tier")
    pd.testing.assert_frame_equal(state.values["summary"], expected_summary, check_exact=True)
    assert tier == "durable" and state.next == ("report",)
    final = graph.invoke(None, config)  # resume: only `report` runs
    history = list(graph.get_state_history(config))
    after = storage_footprint(saver)

print(final["log"])
print(len(history), "checkpoints;", after.summary())"""),
    ("md", """## What the blob store holds

Three DataFrames were produced (`sales`, `clean`, `summary`): three Parquet blobs, each
stored once however many checkpoints refer to it. `referenced_blob_keys` reads only the small
references in Redis and MongoDB; `collect_saver_garbage` would delete blobs nothing references
any more once they are older than its grace period (here: a dry run)."""),
    ("code", """from langgraph_durable import collect_saver_garbage, referenced_blob_keys

with DurableSaver.from_urls(redis_srv.url, mongo_srv.url,
                            serde=ExternalRefSerializer(store=store), **options) as saver:
    referenced = referenced_blob_keys(saver)
    gc = collect_saver_garbage(saver, dry_run=True)

for info in sorted(store.list_keys()):
    print(f"{info.key}  {info.size:>10,} B  "
          f"{'referenced' if info.key in referenced else 'unreferenced'}")
print(f"{gc.scanned} blobs, {gc.kept_referenced} referenced, would delete {len(gc.deleted)}")
assert len(referenced) == 3 and gc.deleted == []"""),
    ("md", """Clean up: remove the notebook's Redis keys and database (nothing else) and stop the
servers."""),
    ("code", """from langgraph_durable.testing import drop_namespace

drop_namespace(redis_srv.url, mongo_srv.url, options["key_prefix"], options["database"])
servers.close()"""),
]




if __name__ == "__main__":
    print(write(NAME, CELLS))
