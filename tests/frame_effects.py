"""Support of the tests of effect results kept in a blob store: a graph whose node loads a
DataFrame once (``effects.once``), then waits at ``interrupt()``. The frame is named only
by the effect journal (the state keeps its row count), so only the journal keeps its
blob alive."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from langgraph.graph import END, START, StateGraph
from langgraph.types import interrupt
from typing_extensions import TypedDict

from langgraph_durable import effects
from langgraph_durable.serde import ExternalRefSerializer, LocalBlobStore

ROWS = 500


class FrameState(TypedDict, total=False):
    rows: int
    total: float
    answer: str


class Loads:
    """Counts how often the frame was really loaded (the effect's calls)."""

    def __init__(self) -> None:
        self.calls = 0

    def __call__(self) -> pd.DataFrame:
        self.calls += 1
        return frame()


def frame() -> pd.DataFrame:
    """The frame the effect returns (the same every call)."""
    rng = np.random.default_rng(7)
    return pd.DataFrame({"x": rng.random(ROWS), "k": rng.integers(0, 9, ROWS)})


def serde(folder: Path) -> ExternalRefSerializer:
    """An external-reference serializer on a local folder (DataFrames go there)."""
    return ExternalRefSerializer(store=LocalBlobStore(folder), threshold_bytes=4096)


def encrypted_serde(folder: Path) -> ExternalRefSerializer:
    """As ``serde``, its values and blobs encrypted (AES-GCM, ``tests/serde/_helpers.py``)."""
    from .serde._helpers import encrypted_inner

    return ExternalRefSerializer(inner=encrypted_inner(), store=LocalBlobStore(folder),
                                 threshold_bytes=4096)


def encrypted_from_env() -> ExternalRefSerializer:
    """``encrypted_serde`` on the folder ``FRAME_EFFECTS_BLOB_DIR`` names: the factory the CLI's
    ``--serde tests.frame_effects:encrypted_from_env`` calls."""
    return encrypted_serde(Path(os.environ["FRAME_EFFECTS_BLOB_DIR"]))


def load_then_ask(checkpointer: Any, loads: Loads) -> Any:
    """START -> load (once("load") returns a DataFrame, then interrupt) -> END."""
    def load(state: FrameState) -> dict[str, Any]:
        df = effects.once("load", loads)
        answer = interrupt("use it?")
        return {"rows": len(df), "total": float(df["x"].sum()), "answer": answer}

    g = StateGraph(FrameState)
    g.add_node("load", load)
    g.add_edge(START, "load")
    g.add_edge("load", END)
    return g.compile(checkpointer=checkpointer)
