"""``python -m faults.run --only K`` in a checkout without the runner's figures file
(``faults/last_results.json`` is not committed) replaces only the rows it ran in
docs/reliability.md's results table: every other scenario's row stays as written."""

from __future__ import annotations

from pathlib import Path

import pytest

from faults import run
from faults.result import Result

HEAD = ("| scenario | trials | faults injected | checkpoints acked | lost | duplicated | "
        "resurrected | final-state mismatches | other figures | result | time |")
DOC = f"""# Reliability

<!-- faults:results:begin -->
Run of 2026-11-29: `python -m faults.run` in 16.7 min.

{HEAD}
|---|---|---|---|---|---|---|---|---|---|---|
| 1. app killed | 100 | 96 | 1199 | 0 | 0 | - | 0 | x 1 | pass | 130 s |
| 2. worker killed | 10 | 10 | 1080 | 0 | 0 | - | 0 | y 2 | pass | 19 s |

**1. app killed**

- a note
<!-- faults:results:end -->
tail
"""


def result(title: str, acked: int) -> Result:
    return Result(key="s", title=title, trials=3, faults=1, acked=acked, lost=0, seconds=2)


@pytest.fixture
def doc(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "reliability.md"
    path.write_text(DOC)
    monkeypatch.setattr(run, "DOC", path)
    return path


def test_a_row_run_again_is_replaced_and_the_others_stay(doc: Path) -> None:
    run.update_rows([result("2. worker killed", 7)], "Run of 2026-12-02: --only 2")
    text = doc.read_text()
    assert "| 1. app killed | 100 | 96 | 1199 | 0 | 0 | - | 0 | x 1 | pass | 130 s |" in text
    assert "| 2. worker killed | 3 | 1 | 7 | 0 | - | - | - |  | pass | 2 s |" in text
    assert "| 2. worker killed | 10 |" not in text
    assert text.count("Run of") == 2 and text.endswith("<!-- faults:results:end -->\ntail\n")
    assert "**1. app killed**\n\n- a note" in text


def test_a_scenario_not_in_the_table_is_added_after_the_last_row(doc: Path) -> None:
    run.update_rows([result("10. poison pills", 600)], "Run of 2026-12-02: --only 10")
    lines = doc.read_text().split("\n")
    at = lines.index("| 10. poison pills | 3 | 1 | 600 | 0 | - | - | - |  | pass | 2 s |")
    assert lines[at - 1].startswith("| 2. worker killed | 10 |") and lines[at + 1] == ""
