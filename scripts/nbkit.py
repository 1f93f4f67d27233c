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


SERVERS = """servers = ExitStack()  # keeps the servers running until servers.close()
redis_srv = servers.enter_context(redis_server())
mongo_srv = servers.enter_context(mongo_server())"""
"""Set-up lines of a notebook's first code cell: real servers from langgraph_durable.testing
(needs ``from contextlib import ExitStack`` and ``mongo_server, redis_server`` imported)."""


def cli_helper(columns: int) -> str:
    """Code defining ``cli_env`` and ``cli(*args)`` (runs ``langgraph-durable`` against the
    notebook's servers and ``options``, output ``columns`` wide)."""
    return f"""cli_env = {{**os.environ, "REDIS_URL": redis_srv.url, "MONGODB_URL": mongo_srv.url,
           "LGD_KEY_PREFIX": options["key_prefix"], "LGD_DATABASE": options["database"],
           "COLUMNS": "{columns}"}}

def cli(*args):
    \"\"\"Run `langgraph-durable ARGS` against this notebook's servers and print its output.\"\"\"
    out = subprocess.run([sys.executable, "-m", "langgraph_durable.cli", *args], env=cli_env,
                         capture_output=True, text=True)
    print(out.stdout + out.stderr, end="")
    return out"""
