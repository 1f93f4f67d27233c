"""Smoke test of the store benchmark (``python -m benchmarks.store``) at tiny sizes.

Runs it end to end against the real servers it starts (Redis, SecantusDB, PostgreSQL when
Debian's package is installed, Redis with RediSearch and RedisJSON) and checks that the
report has every store's row in both modes, no store failed, every get found its item and
the ratio, target and machine sections are there. No timing is asserted.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from benchmarks.servers import PostgresUnavailable, _pg_bin

ROOT = Path(__file__).resolve().parent.parent


def _has_postgres() -> bool:
    try:
        _pg_bin()
    except PostgresUnavailable:
        return False
    return True


def test_store_benchmark_writes_every_store_row(tmp_path: Path) -> None:
    out = tmp_path / "store"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get(
        "PYTHONPATH", "")])}
    proc = subprocess.run(
        [sys.executable, "-m", "benchmarks.store", "--sizes", "30", "--ops", "60",
         "--queries", "5", "--reps", "1", "--out", str(out)],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=240,
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    report = (out / "report.md").read_text()
    rows = ["| InMemoryStore | sync |", "| InMemoryStore | async |",
            "| DurableStore | sync |", "| DurableStore | async |",
            "| RedisStore | sync |", "| AsyncRedisStore | async |",
            "| DurableStore (Redis FLAT) | sync |", "| DurableStore (Redis FLAT) | async |"]
    if _has_postgres():
        rows += ["| PostgresStore | sync |", "| AsyncPostgresStore | async |"]
    for row in rows:
        assert row in report, f"no row {row!r} in report.md"
    assert "error:" not in report, report
    assert "## Ratios" in report and "## Targets" in report and "## Machine" in report
    assert "| put (sync, 30 items): DurableStore ≥ 2×" in report
    assert "recall@10 against InMemoryStore's exact top 10 | 1.000 | met" in report
    records = json.loads((out / "results.json").read_text())["records"]
    assert len(records) == len(rows)
    assert all(r["get_misses"] == 0 for r in records), records
    assert all(r["put"]["p50_ms"] > 0 and r["get"]["p50_ms"] > 0 for r in records)
    assert all(("vector" in r) == (r["store"] not in ("PostgresStore", "AsyncPostgresStore"))
               for r in records)
