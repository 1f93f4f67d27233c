"""Scratch measurement (not a test): how long ``prune`` takes on one long thread.

``python -m benchmarks.prune_timing [N]`` starts its own servers (or uses REDIS_URL /
MONGODB_URL), writes a thread of N checkpoints (default 1,097: the thread of issue 15),
each with a changed channel value and two pending writes, flushes it to MongoDB and
times ``prune(keep_latest)``, ``prune(keep_last=100)`` and ``prune(delete)`` on copies.
"""

from __future__ import annotations

import sys
import time
import uuid
from typing import Any

from langgraph.checkpoint.base import empty_checkpoint
from langgraph.checkpoint.base.id import uuid6

from langgraph_durable import DurableSaver
from langgraph_durable.testing import mongo_server, redis_server


def fill(saver: DurableSaver, thread: str, n: int) -> None:
    cfg: Any = {"configurable": {"thread_id": thread, "checkpoint_ns": ""}}
    for i in range(n):
        cp = empty_checkpoint()
        cp["id"] = str(uuid6())
        cp["channel_values"] = {"count": i, "note": f"step {i}"}
        cp["channel_versions"] = {"count": f"{i + 1:032}.0", "note": f"{i + 1:032}.0"}
        cfg = saver.put(cfg, cp, {"step": i, "source": "loop"},
                        {"count": f"{i + 1:032}.0", "note": f"{i + 1:032}.0"})
        saver.put_writes(cfg, [("count", i + 1), ("note", f"w{i}")], f"task-{i}")


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 1097
    with redis_server() as rs, mongo_server() as ms:
        tag = uuid.uuid4().hex[:8]
        with DurableSaver.from_urls(rs.url, ms.url, key_prefix=f"pt{tag}",
                                    database=f"prune_{tag}") as saver:
            t0 = time.perf_counter()
            fill(saver, "long", n)
            saver.flush(timeout_s=600)
            print(f"wrote and flushed {n} checkpoints in {time.perf_counter() - t0:.1f} s")
            runs: list[tuple[str, dict[str, Any]]] = [("keep_latest", {})]
            if "keep_last" in DurableSaver.prune.__code__.co_varnames:
                runs.append(("keep_last=100", {"keep_last": 100}))
            runs.append(("delete", {"strategy": "delete"}))
            for name, kwargs in runs:
                saver.copy_thread("long", f"copy-{name}")
                t0 = time.perf_counter()
                saver.prune([f"copy-{name}"], **kwargs)
                dt = time.perf_counter() - t0
                left = len(list(saver.list({"configurable": {"thread_id": f"copy-{name}"}})))
                print(f"prune {name}: {dt:.2f} s ({left} checkpoints left)")
            t0 = time.perf_counter()
            saver.prune(["long"])
            print(f"prune keep_latest on the hot original: {time.perf_counter() - t0:.2f} s")


if __name__ == "__main__":
    main()
