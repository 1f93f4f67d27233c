"""``export --store`` / ``import``: the memory store's items from one key prefix and
database into another, equal there (values, created_at/updated_at, TTL and expiry,
embeddings: a semantic search answers the same), hot and from MongoDB alone; bad files
refused before anything is written."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest
import redis

from .clikit import Cli

ALICE = ("users", "alice", "memories")
BOB = ("users", "bob", "memories")
DIMS = 8


def embed(texts: list[str]) -> list[list[float]]:
    """A deterministic embedder: letter counts folded into ``DIMS`` buckets."""
    out = []
    for text in texts:
        v = [0.0] * DIMS
        for ch in text.lower():
            if ch.isalpha():
                v[(ord(ch) - 97) % DIMS] += 1.0
        out.append(v)
    return out


INDEX: Any = {"dims": DIMS, "embed": embed, "fields": ["text"]}


@dataclasses.dataclass
class Secret:
    """A type outside the tools' allowlist: copied as bytes, never decoded by the CLI."""

    code: str


def _fill(cli: Cli) -> None:
    with cli.saver() as saver:
        store = saver.store(index=INDEX)
        store.put(ALICE, "m1", {"text": "likes green tea", "kind": "note"})
        store.put(ALICE, "m2", {"text": "lives in Lyon", "kind": "fact"}, ttl=600)
        store.put(ALICE, "m3", {"text": "plays chess", "kind": "note"})
        store.put(ALICE, "m1", {"text": "likes black tea", "kind": "note"})  # updated
        store.put(BOB, "m1", {"text": "likes coffee", "s": Secret("x")}, index=False)
        store.put(BOB, "gone", {"text": "deleted"})
        store.delete(BOB, "gone")
        saver.flush()


def _docs(cli: Cli) -> list[dict[str, Any]]:
    """The store's MongoDB documents but their version ``seq`` (an import writes a new
    version on the importing side's clock)."""
    with cli.saver(flusher="off") as saver:
        col = saver.sync_clients.db[saver.context.collections.store]
        return sorted((d for d in col.find({}, {"seq": 0}) if not d.get("dead")),
                      key=lambda d: d["_id"])


def _answers(cli: Cli) -> dict[str, Any]:
    with cli.saver(flusher="off") as saver:
        store = saver.store(index=INDEX)
        items = store.search(("users",), limit=100)
        found = store.search(("users",), query="tea", limit=3)
        return {"items": [(i.namespace, i.key, i.value, i.created_at, i.updated_at)
                          for i in items],
                "tea": [(i.namespace, i.key, round(float(i.score or 0), 6)) for i in found],
                "get": store.get(ALICE, "m2", refresh_ttl=False)}


def _drop_store_keys(cli: Cli) -> None:
    r = redis.Redis.from_url(cli.redis_url)
    keys = list(r.scan_iter(match="{" + cli.opts["key_prefix"] + ":*"))
    if keys:
        r.delete(*keys)


def test_store_round_trip_into_another_prefix_and_database(
        redis_url: str, mongo_url: str, tmp_path: Path) -> None:
    src, dst = Cli(redis_url, mongo_url), Cli(redis_url, mongo_url)
    _fill(src)
    path = tmp_path / "store.jsonl"
    assert "exported 4 store items" in src("export", "--store", "-o", str(path)).stderr
    header, *records = [json.loads(line) for line in path.read_text().splitlines()]
    assert (header["format_version"], header["store"], header["counts"]) == (
        5, {"namespace_prefix": []}, {"store_item": 4})
    assert [(r["namespace"][1], r["key"]) for r in records] == [
        ("alice", "m1"), ("alice", "m2"), ("alice", "m3"), ("bob", "m1")]
    assert records[1]["ttl"] == 600 and records[1]["exp"] > 0
    assert records[0]["paths"] == ["text"] and records[3]["vectors"] is None
    assert dst("import", str(path)).stdout == "imported 4 store items\n"

    assert _docs(dst) == _docs(src)  # every field: value, times, TTL, expiry, embeddings
    want = _answers(src)
    assert want["tea"][0][:2] == (ALICE, "m1") and want["get"] is not None
    assert _answers(dst) == want  # the same items, times and search scores
    _drop_store_keys(dst)
    assert _answers(dst) == want  # from MongoDB alone
    bob = dst.json("store", "get", "users.bob.memories", "m1")["value"]
    assert bob["s"] == "<not decoded: tests.cli.test_store_transfer.Secret (not in the " \
        "allowlist)>"  # copied, never revived

    dst("import", str(path), code=1)  # the items exist: asks; no answer aborts
    out = dst("import", str(path), "--yes").stdout
    assert out == "imported 4 store items (4 replaced)\n"
    assert _answers(dst) == want


def test_store_export_of_a_namespace_and_items_expired_by_the_import(
        cli: Cli, redis_url: str, mongo_url: str, tmp_path: Path) -> None:
    _fill(cli)
    path = tmp_path / "alice.jsonl"
    cli("export", "--store", "--namespace", "users.alice", "-o", str(path))
    header, *records = [json.loads(line) for line in path.read_text().splitlines()]
    assert header["store"] == {"namespace_prefix": ["users", "alice"]}
    assert {r["key"] for r in records} == {"m1", "m2", "m3"}
    records[1]["exp"] = 1  # expired long ago
    path.write_text("\n".join(json.dumps(x) for x in (header, *records)) + "\n")
    other = Cli(redis_url, mongo_url)
    assert other("import", str(path)).stdout == (
        "imported 2 store items; 1 expired items left out\n")
    assert other.json("store", "namespaces") == ["users.alice.memories"]
    # a thread export never carries the store; export takes one or the other
    assert "give a THREAD" in cli("export", code=1).output
    assert "give a THREAD" in cli("export", "t", "--store", code=1).output
    assert "--namespace selects store items" in cli("export", "t", "--namespace", "a",
                                                    code=1).output
    assert "--without-blobs goes with a THREAD" in cli("export", "--store",
                                                        "--without-blobs", code=1).output


def _bad(record: dict[str, Any], **change: Any) -> dict[str, Any]:
    return {**record, **change}


@pytest.mark.parametrize(("change", "message"), [
    ({"namespace": ["users", "a.b"]}, "label 'a.b' is not a namespace label"),
    ({"namespace": ["users", ""]}, "label '' is not a namespace label"),
    ({"namespace": []}, "namespace must be a non-empty list"),
    ({"namespace": ["other"]}, "is not under the header's namespace_prefix"),
    ({"key": "k\x00"}, "key must be a str without NUL"),
    ({"key": 7}, "key must be a str without NUL"),
    ({"value": ["json", "%%%"]}, "Only base64 data is allowed"),
    ({"value": "x"}, "value must be [type, base64 bytes]"),
    ({"cseq": "1"}, "cseq must be a 64-bit integer >= 1"),
    ({"exp": -1}, "exp must be a 64-bit integer >= 0"),
    ({"ttl": True}, "ttl must be null or minutes > 0"),
    ({"paths": ["text", "tags", "x"]}, "are not 3 float32 rows"),
    ({"vectors": None}, "are not 1 float32 rows"),
    ({"type": "checkpoint"}, "unsupported record in a store export"),
    ({"v": 99}, "newer"),
])
def test_bad_store_files_are_refused_and_nothing_is_written(
        cli: Cli, redis_url: str, mongo_url: str, tmp_path: Path,
        change: dict[str, Any], message: str) -> None:
    _fill(cli)
    path = tmp_path / "s.jsonl"
    cli("export", "--store", "--namespace", "users", "-o", str(path))
    header, *records = [json.loads(line) for line in path.read_text().splitlines()]
    records[0] = _bad(records[0], **change)
    path.write_text("\n".join(json.dumps(x) for x in (header, *records)) + "\n")
    other = Cli(redis_url, mongo_url)
    out = other("import", str(path), "--yes", code=1).output
    assert message in out and f"{path}:2" in out, out
    assert other.json("store", "search", "") == []


def test_embeddings_of_another_width_than_the_files_others_are_refused(
        cli: Cli, redis_url: str, mongo_url: str, tmp_path: Path) -> None:
    _fill(cli)
    path = tmp_path / "s.jsonl"
    cli("export", "--store", "-o", str(path))
    header, *records = [json.loads(line) for line in path.read_text().splitlines()]
    records[2]["paths"] = ["text", "tags"]  # 8 floats read as 2 rows of 4
    path.write_text("\n".join(json.dumps(x) for x in (header, *records)) + "\n")
    other = Cli(redis_url, mongo_url)
    out = other("import", str(path), code=1).output
    assert f"{path}:4: store_item" in out and "embeddings of 4 floats, line 2's of 8" in out
    assert other.json("store", "search", "") == []


def test_truncated_duplicated_or_misdirected_store_files_are_refused(
        cli: Cli, redis_url: str, mongo_url: str, tmp_path: Path) -> None:
    _fill(cli)
    path = tmp_path / "s.jsonl"
    cli("export", "--store", "-o", str(path))
    lines = path.read_text().splitlines()
    other = Cli(redis_url, mongo_url)
    cut = tmp_path / "cut.jsonl"
    cut.write_text("\n".join(lines[:-1]) + "\n")
    assert "(truncated?)" in other("import", str(cut), code=1).output
    twice = tmp_path / "twice.jsonl"
    header = json.loads(lines[0])
    header["counts"]["store_item"] += 1
    twice.write_text("\n".join([json.dumps(header), *lines[1:], lines[1]]) + "\n")
    assert "appears twice" in other("import", str(twice), code=1).output
    out = other("import", str(path), "--thread", "t", code=1).output
    assert "is a store export: --thread names a thread's import" in out
    assert other.json("store", "search", "") == []
