"""Modules small enough to read (issue 37): no module of the package over 500 lines and
the drivers, the I/O edge every plan goes through, under 350."""

from __future__ import annotations

from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "langgraph_durable"


def _lines(path: Path) -> int:
    return len(path.read_text(encoding="utf-8").splitlines())


def test_no_module_of_the_package_is_over_500_lines() -> None:
    sizes = {str(p.relative_to(PACKAGE)): _lines(p) for p in PACKAGE.rglob("*.py")}
    assert len(sizes) > 100  # the package, not an empty folder
    assert {p: n for p, n in sizes.items() if n > 500} == {}


def test_the_drivers_stay_under_350_lines() -> None:
    assert _lines(PACKAGE / "io" / "drivers.py") < 350
