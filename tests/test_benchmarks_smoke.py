"""Smoke test of the benchmark harness (``python -m benchmarks.run --quick``).

Runs the harness end to end in quick mode with InMemorySaver and DurableSaver (both
modes) against the real servers it starts itself, and checks that the report and the
plots are written and name every workload. No timing is asserted. Also checks W7's
storage measures (which collections and keys they count) and its target verdicts.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from pathlib import Path

import bson
import pymongo
import redis

from benchmarks import conversation, report_w7

ROOT = Path(__file__).resolve().parent.parent
WORKLOAD_ROWS = {
    "W1": "| W1 agent loop, sync",
    "W1 async": "| W1 agent loop, async",
    "W2": "| W2 wide state",
    "W3": "| W3 concurrency",
    "W4": "| W4 resume",
    "W5": "| W5 write-behind",
    "W6": "| W6 storage",
    "W7": "| W7 conversation storage",
}


def test_quick_run_writes_report_and_plots(tmp_path: Path) -> None:
    out = tmp_path / "results"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get(
        "PYTHONPATH", "")])}
    proc = subprocess.run(
        [sys.executable, "-m", "benchmarks.run", "--quick", "--no-profile", "--out", str(out),
         "--savers", "inmemory,durable,durable_strict"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=240,
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    report = (out / "report.md").read_text()
    for name, row in WORKLOAD_ROWS.items():
        assert row in report, f"no {name} row in report.md"
    assert "## Targets" in report and "## Machine" in report
    assert "## Round trips" in report
    assert "## W7 conversation storage" in report
    assert "| W7: after 4 turns, DurableSaver MongoDB bytes ≤ 1/20" in report
    assert "| W1 sync: DurableSaver ≤ 1.3× InMemorySaver wall time" in report
    pngs = sorted(p.name for p in out.glob("*.png"))
    assert pngs, "no PNG written"
    for p in out.glob("*.png"):
        assert p.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert {"summary.png", "w1_turns.png", "w5_outbox.png", "w6_storage.png",
            "w7_storage.png"} <= set(pngs)
    data = json.loads((out / "results.json").read_text())
    savers = {r["saver"] for r in data["records"]}
    assert {"inmemory", "durable", "durable_strict"} <= savers
    errors = [r for r in data["records"] if "error" in r]
    assert not errors, errors
    assert "error" not in data["rt"], data["rt"]
    w7 = {r["saver"]: r for r in data["records"] if r["workload"] == "W7"}
    assert w7["inmemory"]["turns"] == [2, 4, 8]
    for t in (2, 4, 8):
        assert w7["inmemory"][f"bytes@{t}"] > 0
        for name in ("durable", "durable_strict"):
            r = w7[name]
            assert r[f"steps@{t}"] == 2 * t + 2
            assert r[f"mongo_bytes@{t}"] == sum(r[f"mongo_collections@{t}"].values()) > 0
            assert r[f"redis_bytes@{t}"] > 0 and r[f"redis_keys@{t}"] > 0
            assert r[f"redis_in_per_step@{t}"] > 0 and r[f"mongo_cmd_per_step@{t}"] > 0


def test_w7_storage_measures_count_every_collection_and_key_of_the_prefix(
        redis_url: str, mongo_url: str) -> None:
    """A collection the saver did not have before (``items``) is counted; another
    prefix's collections and keys, and ``system.*``, are not."""
    tag = uuid.uuid4().hex[:10]
    db, prefix = f"bt_{tag}", f"bp{tag}"
    mine = {"p_checkpoints": {"_id": 1, "thread_id": "t", "v": "a" * 300},
            "p_items": {"_id": "d1", "thread_id": "t", "v": b"b" * 1000}}
    with pymongo.MongoClient(mongo_url) as c, redis.Redis.from_url(redis_url) as r:
        try:
            for name, doc in mine.items():
                c[db][name].insert_one(dict(doc))
            c[db]["q_items"].insert_one({"_id": 2, "v": "c" * 5000})
            got = conversation.mongo_bson_bytes(mongo_url, db, "p_")
            want = {name: len(bson.encode(doc)) for name, doc in mine.items()}
            assert got == {"bytes": sum(want.values()), "docs": 2, "collections": want}
            assert conversation.mongo_bson_bytes(mongo_url, db)["docs"] == 3

            keys = ["{" + prefix + ":1:t}:cp", "{" + prefix + ":1:t}:items", "{" + prefix
                    + ":outbox}"]
            for k in keys:
                r.set(k, "x" * 2000)
            r.set("{" + prefix + "x:1:t}:cp", "y" * 9000)  # a longer prefix: not ours
            total, n = conversation.redis_prefix_bytes(redis_url, prefix)
            assert n == 3
            assert total == sum(int(r.memory_usage(k, samples=0)) for k in keys)
        finally:
            c.drop_database(db)
            r.delete(*keys, "{" + prefix + "x:1:t}:cp")


def _w7_records(**durable: float) -> list[dict[str, object]]:
    base = {"mongo_bytes@100": 1_000_000, "redis_bytes@100": 1_000_000,
            "mongo_bytes@200": 2_200_000, "redis_bytes@200": 2_200_000,
            "redis_in_per_step@20": 10_000, "redis_in_per_step@100": 15_000,
            "mongo_cmd_per_step@20": 10_000, "mongo_cmd_per_step@100": 15_000}
    return [{"workload": "W7", "saver": "inmemory", "turns": [20, 100, 200],
             "bytes@100": 20_000_000},
            {"workload": "W7", "saver": "durable", "turns": [20, 100, 200],
             **base, **durable}]


def test_w7_targets_meet_at_the_bounds_and_miss_past_them() -> None:
    """1/20 of the payload, 2.2x growth and 1.5x per step are met exactly at the bound."""
    at = report_w7.targets(_w7_records())
    assert [t[3] for t in at] == ["**met**"] * 6
    assert at[0][0] == ("W7: after 100 turns, DurableSaver MongoDB bytes ≤ 1/20 of "
                        "InMemorySaver payload bytes")
    assert at[0][2] == "0.050× (≤ 0.05×)"
    past = report_w7.targets(_w7_records(**{
        "mongo_bytes@100": 1_000_001, "redis_bytes@100": 1_000_001,
        "mongo_bytes@200": 2_200_003, "redis_bytes@200": 2_200_003,
        "redis_in_per_step@100": 15_001, "mongo_cmd_per_step@100": 15_001}))
    assert [t[3] for t in past] == ["**missed**"] * 6
    assert report_w7.targets([])[0][3] == "n/a"
