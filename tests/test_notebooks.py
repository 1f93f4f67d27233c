"""Every notebook in notebooks/ runs top to bottom against real servers that also hold
another application's data: the notebook must leave that data exactly as it was and take
away everything it stored itself (its own key prefix and database only), and leave nothing
in the temporary directory."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import nbformat
import pymongo
import pytest
import redis
from nbclient import NotebookClient

from langgraph_durable.testing import mongo_server, redis_server

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))

FOREIGN_KEYS: dict[str, bytes] = {
    "{lgd:7:other-1}:cp": b"another application's checkpoint (default key prefix)",
    "app:session:42": b"an unrelated key",
}
FOREIGN_DOC = {"_id": "other-1", "thread_id": "other-1", "note": "another application's"}
FOREIGN_DATABASES = ("langgraph_durable", "someapp")


class Servers:
    """Redis and MongoDB seeded with a foreign application's data."""

    def __init__(self, redis_url: str, mongo_url: str) -> None:
        self.redis_url, self.mongo_url = redis_url, mongo_url
        self.r = redis.Redis.from_url(redis_url)
        self.r1 = redis.Redis.from_url(redis_url, db=1)
        self.m = pymongo.MongoClient[dict[str, Any]](mongo_url)
        for key, value in FOREIGN_KEYS.items():
            self.r.set(key, value)
        self.r1.set("db1:key", b"in database 1")
        self.r.xadd("{lgd:outbox}", {"t": "other-1", "p": b"\x90"}, id="1-1")
        self.r.xgroup_create("{lgd:outbox}", "flushers", id="0")
        for name in FOREIGN_DATABASES:
            self.m[name]["checkpoints"].insert_one(dict(FOREIGN_DOC))

    def snapshot(self) -> dict[str, Any]:
        return {
            "keys": sorted(self.r.scan_iter(count=1000)),
            "values": {k: self.r.get(k) for k in FOREIGN_KEYS},
            "db1": self.r1.get("db1:key"),
            "outbox": self.r.xrange("{lgd:outbox}"),
            "groups": [g["name"] for g in self.r.xinfo_groups("{lgd:outbox}")],
            "databases": sorted(self.m.list_database_names()),
            "docs": [self.m[n]["checkpoints"].find_one({"_id": "other-1"})
                     for n in FOREIGN_DATABASES],
        }

    def close(self) -> None:
        for key in [*FOREIGN_KEYS, "{lgd:outbox}"]:
            self.r.delete(key)
        self.r1.delete("db1:key")
        for name in FOREIGN_DATABASES:
            self.m.drop_database(name)
        self.r.close()
        self.r1.close()
        self.m.close()


@pytest.fixture(scope="module")
def shared() -> Iterator[Servers]:
    """Servers of this module's own (``REDIS_URL``/``MONGODB_URL`` when set), holding a
    foreign application's keys, stream, consumer group and documents."""
    with redis_server() as rs, mongo_server() as ms:
        servers = Servers(rs.url, ms.url)
        try:
            yield servers
        finally:
            servers.close()


def test_there_are_notebooks() -> None:
    assert "quickstart.ipynb" in [p.name for p in NOTEBOOKS]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_notebook_executes_and_leaves_other_data_alone(path: Path, shared: Servers,
                                                       s3_endpoint_url: str, monkeypatch,
                                                       tmp_path) -> None:
    monkeypatch.setenv("REDIS_URL", shared.redis_url)
    monkeypatch.setenv("MONGODB_URL", shared.mongo_url)
    monkeypatch.setenv("S3_ENDPOINT_URL", s3_endpoint_url)
    monkeypatch.setenv("LANGGRAPH_BLOB_DIR", str(tmp_path / "blobs"))
    # the kernel's temporary directory is this test's: what a notebook leaves there shows
    kernel_tmp = tmp_path / "tmp"
    kernel_tmp.mkdir()
    monkeypatch.setenv("TMPDIR", str(kernel_tmp))
    # the kernel (and the CLI it runs) import this checkout, not another installed copy
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(
        [str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])]))
    before = shared.snapshot()
    assert before["values"] == FOREIGN_KEYS and before["db1"] == b"in database 1"
    nb = nbformat.read(path, as_version=4)
    NotebookClient(nb, timeout=300, kernel_name="python3",
                   resources={"metadata": {"path": str(path.parent)}}).execute()
    errors = [o for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", [])
              if o.get("output_type") == "error"]
    assert errors == []
    assert os.environ["REDIS_URL"] == shared.redis_url
    # the foreign data is untouched and the notebook took away all it stored, on the
    # servers and in the temporary directory (its servers' and its own folders)
    assert shared.snapshot() == before
    assert sorted(p.name for p in kernel_tmp.iterdir()) == []
    if path.stem == "quickstart":
        text = "".join(o.get("text", "") for c in nb.cells for o in c.get("outputs", []))
        assert "6 messages; served by the hot tier" in text
        assert "after deleting them: 6 messages from durable" in text
