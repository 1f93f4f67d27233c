"""Shared by the notebook generators (scripts/make_notebooks.py, scripts/nb_*.py): turns a
list of ``("md"|"code", source)`` cells into notebooks/<name>.ipynb."""

from __future__ import annotations

from pathlib import Path

import nbformat
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

NOTEBOOKS = Path(__file__).resolve().parent.parent / "notebooks"


def write(name: str, cells: list[tuple[str, str]]) -> Path:
    """Write ``notebooks/<name>.ipynb`` (Python 3 kernel) from ``cells``; returns its path."""
    nb = new_notebook(cells=[new_markdown_cell(src) if kind == "md" else new_code_cell(src)
                             for kind, src in cells])
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3",
                                 "language": "python"}
    path = NOTEBOOKS / f"{name}.ipynb"
    nbformat.write(nb, path)
    return path
