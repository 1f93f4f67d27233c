"""Where do the bytes go when a LangGraph state carries a large DataFrame?

Runs a graph whose state holds a ``rows``-row pandas DataFrame through 20 super-steps with
``DurableSaver`` and ``ExternalRefSerializer`` and measures what each tier stores
(``langgraph_durable.storage_footprint``): Redis (``MEMORY USAGE`` of the saver's
keys), MongoDB (BSON size of its documents, i.e. ``dbStats`` ``dataSize``) and the blob store
(object sizes and count). Two variants:

* ``rewritten``: every super-step returns the frame (unchanged), so every step stores a new
  channel version: the content hash makes them all one blob;
* ``read-only``: the steps only read the frame; it is stored in one channel version.

Then it empties Redis and reloads the final state from MongoDB plus the blob store.

    python examples/dataframe_storage.py                 # 1,000,000 rows
    python examples/dataframe_storage.py --rows 200000

Servers come from ``langgraph_durable.testing`` (``REDIS_URL``/``MONGODB_URL`` when set);
blobs go to a temporary folder, or to S3 when ``S3_ENDPOINT_URL`` is set.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any, TypedDict

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parent.parent
if __package__ in (None, ""):
    sys.path.insert(0, str(ROOT))

from examples.blob_store import open_blob_store  # noqa: E402

STEPS = 20


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


class FrameState(TypedDict, total=False):
    df: pd.DataFrame
    step: int
    totals: list[float]


def build(checkpointer: Any, frame: pd.DataFrame, *, rewrite: bool) -> Any:
    from langgraph.graph import END, START, StateGraph

    def load(state: FrameState) -> dict[str, Any]:
        return {"df": frame, "step": 0, "totals": []}

    def work(state: FrameState) -> dict[str, Any]:
        df = state["df"]
        total = float(df["value"].iloc[state["step"]::STEPS].sum())
        out: dict[str, Any] = {"step": state["step"] + 1, "totals": [*state["totals"], total]}
        if rewrite:
            out["df"] = df
        return out

    g = StateGraph(FrameState)
    g.add_node("load", load)
    g.add_node("work", work)
    g.add_edge(START, "load")
    g.add_edge("load", "work")
    g.add_conditional_edges("work", lambda s: END if s["step"] >= STEPS else "work")
    return g.compile(checkpointer=checkpointer)


def measure(urls: tuple[str, str], frame: pd.DataFrame, *, rewrite: bool) -> dict[str, Any]:
    import redis

    from langgraph_durable import DurableSaver, storage_footprint
    from langgraph_durable.serde import ExternalRefSerializer
    from langgraph_durable.testing import drop_key_prefix

    tag = uuid.uuid4().hex[:8]
    options = {"key_prefix": f"dfs{tag}", "database": f"dfs_{tag}"}
    store, where = open_blob_store(tempfile.mkdtemp(prefix="lgd-dfs-blobs-"))
    config = {"configurable": {"thread_id": "frames"}, "recursion_limit": 100}
    t0 = time.perf_counter()
    with DurableSaver.from_urls(*urls, serde=ExternalRefSerializer(store=store),
                                **options) as saver:
        build(saver, frame, rewrite=rewrite).invoke({}, config)
        run_s = time.perf_counter() - t0
        saver.flush()
        fp = storage_footprint(saver)
    with redis.Redis.from_url(urls[0]) as r:
        drop_key_prefix(r, options["key_prefix"])
    t0 = time.perf_counter()
    with DurableSaver.from_urls(*urls, serde=ExternalRefSerializer(store=store),
                                **options) as saver:
        snap = build(saver, frame, rewrite=rewrite).get_state(config)
        tier = saver.last_read_tier
    reload_s = time.perf_counter() - t0
    pd.testing.assert_frame_equal(snap.values["df"], frame, check_exact=True)
    parquet = [size for key, size in fp.blobs if key.endswith(".parquet")]
    return {
        "variant": "rewritten every step" if rewrite else "read-only steps",
        "blob store": where, "run_s": round(run_s, 2), "reload_s": round(reload_s, 2),
        "reload_tier": tier, "redis_bytes": fp.redis_bytes, "redis_keys": fp.redis_keys,
        "mongo_bytes": fp.mongo_bytes, "mongo_docs": fp.mongo_docs,
        "blob_bytes": fp.blob_bytes, "blob_count": fp.blob_count,
        "parquet_bytes": parquet[0] if len(parquet) == 1 else parquet,
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rows", type=int, default=1_000_000)
    p.add_argument("--json", action="store_true", help="print the results as JSON")
    args = p.parse_args(argv)

    from contextlib import ExitStack

    from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

    from langgraph_durable.testing import mongo_server, redis_server

    frame = table(args.rows)
    in_memory = int(frame.memory_usage(deep=True).sum())
    records = len(JsonPlusSerializer().dumps_typed(frame.astype(object).to_dict("records"))[1])
    with ExitStack() as servers:
        rs = servers.enter_context(redis_server())
        ms = servers.enter_context(mongo_server())
        results = [measure((rs.url, ms.url), frame, rewrite=rewrite) for rewrite in (True, False)]
    summary = {"rows": args.rows, "steps": STEPS, "frame_in_memory_bytes": in_memory,
               "as_msgpack_records_bytes": records, "results": results}
    if args.json:
        print(json.dumps(summary, indent=1))
        return 0
    print(f"{args.rows:,}-row DataFrame, {STEPS} super-steps; {in_memory:,} B in memory; "
          f"{records:,} B as msgpack records (DurableSaver's max_value_bytes is 15 MiB)")
    for r in results:
        print(f"\n{r['variant']} (blobs: {r['blob store']}; run {r['run_s']} s, reload from "
              f"{r['reload_tier']} {r['reload_s']} s)")
        print(f"  Redis      {r['redis_bytes']:>12,} B  ({r['redis_keys']} keys)")
        print(f"  MongoDB    {r['mongo_bytes']:>12,} B  ({r['mongo_docs']})")
        print(f"  blob store {r['blob_bytes']:>12,} B  ({r['blob_count']} objects; Parquet "
              f"{r['parquet_bytes']:,} B)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
