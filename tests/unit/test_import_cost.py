"""What importing the package loads: a process that uses it without a graph or a model
(the CLI, a flusher worker) does not pay for LangChain's tracers and LangSmith."""

from __future__ import annotations

import json
import subprocess
import sys

HEAVY = ("langsmith", "langchain_core.tracers", "langchain_core.language_models.base",
         "langgraph.types", "langgraph.config")  # fmt: skip
"""Modules LangGraph's graphs and LangChain's chat models load (about 0.7 s of CPU
measured here: importing the CLI took 1.33 s of CPU with them, 0.60 s without)."""


def _loaded_after(statement: str) -> list[str]:
    code = (f"import json, sys\n{statement}\n"
            f"print(json.dumps(sorted(m for m in {HEAVY!r} if m in sys.modules)))")  # fmt: skip
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True)  # fmt: skip
    return list(json.loads(done.stdout))


def test_importing_the_package_and_its_cli_loads_no_tracer_model_or_graph_module() -> None:
    assert _loaded_after("import langgraph_durable, langgraph_durable.cli") == []


def test_journaled_is_still_importable_from_the_root_and_loads_the_model_classes() -> None:
    loaded = _loaded_after("from langgraph_durable import journaled\n"
                           "assert journaled.__module__ == 'langgraph_durable.journal.model'")
    assert "langchain_core.language_models.base" in loaded
