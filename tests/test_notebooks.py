"""Every notebook in notebooks/ runs top to bottom against the real test servers."""

from __future__ import annotations

import os
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

NOTEBOOKS = sorted((Path(__file__).resolve().parent.parent / "notebooks").glob("*.ipynb"))


def test_there_are_notebooks() -> None:
    assert "quickstart.ipynb" in [p.name for p in NOTEBOOKS]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_notebook_executes_without_error(path: Path, redis_url: str, mongo_url: str,
                                         s3_endpoint_url: str, monkeypatch, tmp_path) -> None:
    monkeypatch.setenv("REDIS_URL", redis_url)
    monkeypatch.setenv("MONGODB_URL", mongo_url)
    monkeypatch.setenv("S3_ENDPOINT_URL", s3_endpoint_url)
    monkeypatch.setenv("LANGGRAPH_BLOB_DIR", str(tmp_path / "blobs"))
    nb = nbformat.read(path, as_version=4)
    NotebookClient(nb, timeout=300, kernel_name="python3",
                   resources={"metadata": {"path": str(path.parent)}}).execute()
    errors = [o for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", [])
              if o.get("output_type") == "error"]
    assert errors == []
    assert os.environ["REDIS_URL"] == redis_url
    if path.stem == "quickstart":
        text = "".join(o.get("text", "") for c in nb.cells for o in c.get("outputs", []))
        assert "6 messages; served by the hot tier" in text
        assert "after FLUSHDB: 6 messages from durable" in text
