"""Smoke run of ``scripts/compaction_figure.py --quick`` and checks of the numbers it returns."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import bson
import pymongo
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


def test_stored_bytes_per_turn_bounded_only_with_compaction(
    figure: tuple[dict[str, Any], Path],
) -> None:
    runs = figure[0]["runs"]
    def growth(run: dict[str, Any]) -> float:
        return float(run["bytes_per_turn_late"] - run["bytes_per_turn_early"])

    none = runs["none"]
    assert none["bytes_per_turn_late"] >= 1.5 * none["bytes_per_turn_early"]  # growing
    for name in COMPACTING:
        run = runs[name]
        # Bounded: a small fraction of the uncompacted growth (the quick run still has
        # the summary text growing towards its cap), and nowhere near its ratio.
        assert growth(run) < 0.25 * growth(none), name
        assert run["bytes_per_turn_late"] <= 1.4 * run["bytes_per_turn_early"], name
        assert run["bytes_per_turn_late"] < 0.6 * none["bytes_per_turn_late"], name
        assert 0 < run["redis_final"] < none["redis_final"], name
        assert 0 < run["mongo_final"] < none["mongo_final"], name
    for run in runs.values():  # MongoDB holds what Redis holds, within a factor
        assert 0.5 < run["mongo_final"] / run["redis_final"] < 2.0


def test_mongo_data_size_is_the_summed_bson_size(mongo_url: str) -> None:
    """The script's MongoDB measure (``dbStats.dataSize``) is the summed BSON size."""
    client: pymongo.MongoClient = pymongo.MongoClient(mongo_url)
    name = f"lgd_size_{uuid.uuid4().hex[:8]}"
    try:
        docs = [{"_id": f"d{i}", "v": bson.Binary(b"x" * (100 * i)), "n": i} for i in range(20)]
        client[name]["a"].insert_many(docs[:12])
        client[name]["b"].insert_many(docs[12:])
        expected = sum(len(bson.encode(d)) for d in docs)
        assert client[name].command("dbStats")["dataSize"] == expected
    finally:
        client.drop_database(name)
        client.close()
