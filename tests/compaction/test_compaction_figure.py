"""Smoke run of ``scripts/compaction_figure.py --quick`` and checks of the numbers it returns."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "compaction_figure.py"
COMPACTING = ["summary", "sliding", "delta_summary"]


@pytest.fixture(scope="module")
def figure(tmp_path_factory: pytest.TempPathFactory, redis_url: str, mongo_url: str
           ) -> tuple[dict[str, Any], Path]:
    out = tmp_path_factory.mktemp("figure")
    env = {**os.environ, "REDIS_URL": redis_url, "MONGODB_URL": mongo_url, "MPLBACKEND": "Agg"}
    done = subprocess.run(
        [sys.executable, str(SCRIPT), "--quick", "--out", str(out), "--doc",
         str(out / "compaction.md"), "--json", str(out / "results.json")],
        env=env, capture_output=True, text=True, timeout=600, cwd=ROOT,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads((out / "results.json").read_text()), out


def test_outputs_are_written(figure: tuple[dict[str, Any], Path]) -> None:
    results, out = figure
    assert results["turns"] == 30
    assert set(results["runs"]) == {"none", "summary", "sliding", "delta", "delta_summary"}
    for name in ("compaction_tokens.png", "compaction_storage.png"):
        assert (out / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    doc = (out / "compaction.md").read_text()
    assert "<!-- compaction-figure:start -->" in doc and "<!-- compaction-figure:end -->" in doc
    assert "| SummaryBuffer |" in doc and "](compaction_tokens.png)" in doc


def test_history_tokens_stay_flat_after_the_budget(figure: tuple[dict[str, Any], Path]) -> None:
    results, _ = figure
    limit, budget = results["max_tokens"], results["budget_turn"]
    turn_tokens = results["turn_tokens"]
    assert 3 <= budget <= 20  # the quick run passes the budget early enough to matter
    base = results["runs"]["none"]["tokens"]
    assert base == sorted(base) and base[-1] > 2 * limit
    assert results["runs"]["delta"]["tokens"] == base  # DeltaChannel alone does not compact
    for name in COMPACTING:
        tokens = results["runs"][name]["tokens"]
        assert tokens[:budget - 1] == base[:budget - 1]  # identical until the budget
        for turn in range(budget + 1, results["turns"] + 1):
            assert tokens[turn - 1] <= limit + turn_tokens[turn - 1], (name, turn)
        assert max(tokens[budget:]) <= limit + max(turn_tokens)
    assert results["runs"]["summary"]["summaries"] >= 2


def test_stored_bytes_grow_linearly_with_or_without_compaction(
    figure: tuple[dict[str, Any], Path],
) -> None:
    """A message is stored once (items): MongoDB grows by about the same bytes every few
    turns in every run, compacted or not (the bytes of the last 3 turns at most twice those
    of the first 3; the whole list stored per step made it 10x), and the hot window keeps
    Redis from growing with the thread."""
    runs = figure[0]["runs"]
    for name, run in runs.items():
        sizes = [b for _turn, b in run["mongo_bytes"]]
        steps = [b - a for a, b in zip([0, *sizes], sizes)]
        assert 0 < steps[-1] <= 2 * steps[0], (name, steps)
        assert run["bytes_per_turn_late"] <= 1.5 * run["bytes_per_turn_early"], name
    assert runs["none"]["mongo_final"] < 1.2 * runs["summary"]["mongo_final"]
