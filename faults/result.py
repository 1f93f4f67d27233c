"""The figures of one scenario and the table the runner prints and writes."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

COLUMNS = ["trials", "faults", "acked", "lost", "duplicated", "resurrected", "mismatches"]
HEADERS = ["trials", "faults injected", "checkpoints acked", "lost", "duplicated",
           "resurrected", "final-state mismatches"]


@dataclass
class Result:
    """One scenario's figures. ``None`` means "not applicable" (shown as ``-``)."""

    key: str
    title: str
    trials: int = 0
    faults: int = 0
    acked: int | None = None
    lost: int | None = None
    duplicated: int | None = None
    resurrected: int | None = None
    mismatches: int | None = None
    measures: dict[str, Any] = field(default_factory=dict)
    """Other measured figures (backlog, drain time, ...), shown in the last column."""
    findings: list[str] = field(default_factory=list)
    """Departures from the expected behaviour (bugs), one line each."""
    notes: list[str] = field(default_factory=list)
    seconds: float = 0.0
    records: list[dict[str, Any]] = field(default_factory=list, repr=False)
    """Per-trial details (for tests and debugging)."""

    def add(self, name: str, n: int) -> None:
        cur = getattr(self, name)
        setattr(self, name, (cur or 0) + n)

    @property
    def ok(self) -> bool:
        bad = [getattr(self, c) for c in ("lost", "duplicated", "resurrected", "mismatches")]
        return not self.findings and not any(bad)


def to_json(r: Result) -> dict[str, Any]:
    """The figures of ``r`` as plain JSON (per-trial records left out)."""
    return {k: v for k, v in r.__dict__.items() if k != "records"}


def from_json(d: dict[str, Any]) -> Result:
    return Result(**d)


def _cell(v: Any) -> str:
    if v is None:
        return "-"
    if isinstance(v, float):
        return f"{v:.3g}"
    return str(v)


def _measures(r: Result) -> str:
    return "; ".join(f"{k} {_cell(v)}" for k, v in r.measures.items())


def table(results: list[Result]) -> str:
    """A Markdown table: one row per scenario."""
    head = ["scenario", *HEADERS, "other figures", "result", "time"]
    lines = ["| " + " | ".join(head) + " |", "|" + "|".join("---" for _ in head) + "|"]
    for r in results:
        cells = [r.title, *(_cell(getattr(r, c)) for c in COLUMNS), _measures(r),
                 "pass" if r.ok else "**FAIL**", f"{r.seconds:.0f} s"]
        lines.append("| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |")
    return "\n".join(lines)


def details(results: list[Result]) -> str:
    """Findings and notes per scenario, as Markdown."""
    out = []
    for r in results:
        if not r.findings and not r.notes:
            continue
        out.append(f"**{r.title}**\n")
        out += [f"- FINDING: {f}" for f in r.findings]
        out += [f"- {n}" for n in r.notes]
        out.append("")
    return "\n".join(out)
