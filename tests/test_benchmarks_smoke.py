"""Smoke test of the benchmark harness (``python -m benchmarks.run --quick``).

Runs the harness end to end in quick mode with InMemorySaver and DurableSaver (both
modes) against the real servers it starts itself, and checks that the report and the
plots are written and name every workload. No timing is asserted.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
WORKLOAD_ROWS = {
    "W1": "| W1 agent loop, sync",
    "W1 async": "| W1 agent loop, async",
    "W2": "| W2 wide state",
    "W3": "| W3 concurrency",
    "W4": "| W4 resume",
    "W5": "| W5 write-behind",
    "W6": "| W6 storage",
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
    pngs = sorted(p.name for p in out.glob("*.png"))
    assert pngs, "no PNG written"
    for p in out.glob("*.png"):
        assert p.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert {"summary.png", "w1_turns.png", "w5_outbox.png", "w6_storage.png"} <= set(pngs)
    data = json.loads((out / "results.json").read_text())
    savers = {r["saver"] for r in data["records"]}
    assert {"inmemory", "durable", "durable_strict"} <= savers
    errors = [r for r in data["records"] if "error" in r]
    assert not errors, errors
    assert "error" not in data["rt"], data["rt"]
