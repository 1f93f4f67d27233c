"""CLI test fixtures: ``cli`` (a ``clikit.Cli``) and ``t1`` (a finished thread)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from .clikit import Cli, build_graph, first_input


@pytest.fixture
def cli(redis_url: str, mongo_url: str) -> Iterator[Cli]:
    yield Cli(redis_url, mongo_url)


@pytest.fixture
def t1(cli: Cli) -> dict[str, Any]:
    """Thread "t1" run to the end (user alice): 5 checkpoints, flushed; returns its ids
    newest first and the final state."""
    with cli.saver() as saver:
        graph = build_graph(saver)
        config = {"configurable": {"thread_id": "t1"}, "metadata": {"user": "alice"}}
        final = graph.invoke(first_input(), config)
        ids = [s.config["configurable"]["checkpoint_id"]
               for s in graph.get_state_history({"configurable": {"thread_id": "t1"}})]
    return {"ids": ids, "final": final}
