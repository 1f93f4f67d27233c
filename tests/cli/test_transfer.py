"""export / import: JSON Lines of stored records; a round trip recreates every stored
document exactly; bad files are refused before anything is written."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from langgraph_durable.core.records import SCHEMA_VERSION

from .clikit import Cli, build_graph, first_input


def _stored(cli: Cli, thread: str) -> dict[str, list[dict]]:
    """Every stored document of ``thread`` but the time its checkpoints were stored
    (``put_ms``: an import stores them anew)."""
    with cli.saver(flusher="off") as s:
        db, cols = s.sync_clients.db, s.context.collections
        return {k: sorted(db[getattr(cols, k)].find({"thread_id": thread},
                                                    {"put_ms": 0}),
                          key=lambda d: d["_id"])
                for k in ("checkpoints", "blobs", "writes", "items")}


def _thread(cli: Cli) -> None:
    """Thread "x": a finished run, then a second one stopped at an interrupt (writes of
    every kind: ordinary, branch, interrupt)."""
    with cli.saver() as s:
        graph = build_graph(s, ask=True)
        graph.invoke(first_input(), {"configurable": {"thread_id": "x"},
                                     "metadata": {"user": "bob", "score": 0.1 + 0.2}})


def test_export_import_round_trip_is_exact(cli: Cli, tmp_path: Path) -> None:
    _thread(cli)
    path = tmp_path / "x.jsonl"
    r = cli("export", "x", "--output", str(path))
    assert "exported" in r.stderr
    lines = path.read_text().splitlines()
    header = json.loads(lines[0])
    assert header["format"] == "langgraph-durable-export"
    assert header["schema_version"] == SCHEMA_VERSION and header["thread_id"] == "x"
    records = [json.loads(line) for line in lines[1:]]
    # the messages list is stored as items (format version 3)
    assert {r["type"] for r in records} == {"checkpoint", "blob", "write", "item"}
    assert header["format_version"] == 3
    assert all(r["v"] == SCHEMA_VERSION for r in records)
    assert sum(header["counts"].values()) == len(records)
    cp = next(r for r in records if r["type"] == "checkpoint")
    assert cp["checkpoint"][0] == "msgpack" and isinstance(cp["checkpoint"][1], str)

    before = _stored(cli, "x")
    shown = cli.json("show", "x")
    # a record per write (a document per put_writes call), per value inside a checkpoint
    inline = sum(len(d.get("vals", [])) for d in before["checkpoints"])
    assert inline > 0 and sum(len(d["writes"]) if k == "writes" else 1
                              for k, v in before.items() for d in v) + inline == len(records)
    cli("delete", "x", "--yes")
    assert _stored(cli, "x") == {"checkpoints": [], "blobs": [], "writes": [], "items": []}
    r = cli("import", str(path))
    assert r.stdout == f"imported {len(records)} records into thread x\n"
    assert _stored(cli, "x") == before  # every stored record, every field, exactly
    assert cli.json("show", "x") == shown
    again = cli("export", "x").stdout.splitlines()
    assert again[1:] == lines[1:]  # byte for byte, but for the header's time

    cli("import", str(path), code=1)  # x exists: asks; no answer aborts
    cli("import", str(path), "--yes")
    assert _stored(cli, "x") == before
    cli("import", str(path), "--thread", "y")
    renamed = _stored(cli, "y")
    for kind, docs in before.items():
        assert [{**d, "_id": None, "thread_id": None} for d in docs] == \
            [{**d, "_id": None, "thread_id": None} for d in renamed[kind]]
    with cli.saver() as s:
        from langgraph.types import Command

        out = build_graph(s, ask=True).invoke(Command(resume="ok"),
                                              {"configurable": {"thread_id": "y"}})
    assert out["notes"]["answer"] == "ok"


def test_export_import_round_trip_of_a_list_whose_nodes_items_hold(
        cli: Cli, tmp_path: Path) -> None:
    """A list of 40 messages: its first node is inside the document of its item 31
    (``durable/item_docs.py``). The export holds the node as a record of its own, as
    before; the import stores it as a document of its own; the thread reads the same."""
    from langchain_core.messages import HumanMessage
    from langgraph.checkpoint.base import empty_checkpoint

    messages = [HumanMessage(f"m{i}", id=str(i)) for i in range(40)]
    cp = empty_checkpoint()
    cp["channel_values"] = {"messages": messages}
    cp["channel_versions"] = {"messages": "1"}
    with cli.saver() as s:
        s.put({"configurable": {"thread_id": "n", "checkpoint_ns": ""}}, cp, {}, {"messages": "1"})
    hosts = [d for d in _stored(cli, "n")["items"] if isinstance(d["d"], list)]
    assert len(hosts) == 1 and len(_stored(cli, "n")["items"]) == 40
    path = tmp_path / "n.jsonl"
    cli("export", "n", "--output", str(path))
    records = [json.loads(line) for line in path.read_text().splitlines()[1:]]
    assert sum(r["type"] == "item" for r in records) == 41  # 40 items and the node
    cli("delete", "n", "--yes")
    cli("import", str(path))
    assert len(_stored(cli, "n")["items"]) == 41
    with cli.saver(flusher="off") as s:
        got = s.get_tuple({"configurable": {"thread_id": "n"}})
    assert got.checkpoint["channel_values"]["messages"] == messages


def test_bad_files_are_refused_and_nothing_is_written(cli: Cli, tmp_path: Path) -> None:
    _thread(cli)
    lines = cli("export", "x").stdout.splitlines()
    newer = tmp_path / "newer.jsonl"
    rec: dict[str, Any] = json.loads(lines[2])
    newer.write_text("\n".join([lines[0], lines[1], json.dumps({**rec, "v": 99}),
                                *lines[3:]]) + "\n")
    r = cli("import", str(newer), "--thread", "z", code=1)
    assert "schema version 99, newer than 1" in r.stderr and r.stderr.count("\n") == 1
    truncated = tmp_path / "cut.jsonl"
    truncated.write_text("\n".join(lines[:-2]) + "\n")
    r = cli("import", str(truncated), "--thread", "z", code=1)
    assert "truncated?" in r.stderr
    foreign = tmp_path / "foreign.jsonl"
    foreign.write_text('{"hello": 1}\n')
    assert "not a langgraph-durable export" in cli("import", str(foreign), code=1).stderr
    assert "cannot read" in cli("import", str(tmp_path / "missing"), code=1).stderr
    assert _stored(cli, "z") == {"checkpoints": [], "blobs": [], "writes": [], "items": []}
    assert cli("export", "nope", code=1).stderr == "error: thread 'nope' not found\n"


def test_export_carries_blob_store_objects_and_import_restores_them(
        cli: Cli, tmp_path: Path, redis_url: str, mongo_url: str) -> None:
    from langgraph_durable.serde import ExternalRefSerializer, LocalBlobStore

    def serde(folder: Path) -> ExternalRefSerializer:
        return ExternalRefSerializer(store=LocalBlobStore(folder), threshold_bytes=4000)

    big = {"big": "y" * 20000}
    with cli.saver(serde=serde(tmp_path / "a")) as s:
        build_graph(s).invoke({**first_input(), "notes": big},
                              {"configurable": {"thread_id": "ext"}})
    path = tmp_path / "ext.jsonl"
    r = cli("export", "ext", "-o", str(path), code=1)  # no store given: refused
    assert r.stderr == ("error: thread 'ext' refers to 5 blob-store object(s) "  # notes x5
                        "(ExternalRefSerializer): pass --blob-store to export them with the "
                        "thread, or --without-blobs to leave them out\n")
    cli("--blob-store", str(tmp_path / "a"), "export", "ext", "-o", str(path))
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    assert lines[0]["format_version"] == 3 and lines[0]["counts"]["extblob"] == 5
    assert [rec.get("type") for rec in lines].count("extblob") == 5

    other = Cli(redis_url, mongo_url)  # another key prefix, database and blob folder
    r = other("import", str(path), code=1)
    assert r.stderr.startswith(f"error: {path} carries 5 blob-store object(s): pass "
                               "--blob-store")
    out = other("--blob-store", str(tmp_path / "b"), "import", str(path)).stdout
    assert out.endswith("and 5 blob-store objects\n")
    with other.saver(serde=serde(tmp_path / "b")) as s:
        state = build_graph(s).get_state({"configurable": {"thread_id": "ext"}})
    assert state.values["notes"] == {**big, "a": 1, "b": 2, "c": 3}

    cli("export", "ext", "-o", str(path), "--without-blobs")
    header = json.loads(path.read_text().splitlines()[0])
    assert header["blobs_left_out"] == 5 and "extblob" not in header["counts"]
    assert header["format_version"] == 3  # it holds items (format 1 had neither)


def test_export_import_round_trip_of_a_thread_with_chunked_values(
        cli: Cli, tmp_path: Path, monkeypatch: Any) -> None:
    from langgraph_durable.durable import chunks

    monkeypatch.setattr(chunks, "THRESHOLD_BYTES", 256)  # the messages' values are chunked
    _thread(cli)
    before = _stored(cli, "x")
    with cli.saver(flusher="off") as s:
        col = s.sync_clients.db[s.context.collections.chunks]
        chunks_before = sorted(col.find({"thread_id": "x"}, {"put_ms": 0}),
                               key=lambda d: d["_id"])
    assert chunks_before and any(d.get("chunked") for ds in before.values() for d in ds)
    shown = cli.json("show", "x")
    path = tmp_path / "x.jsonl"
    cli("export", "x", "--output", str(path))
    records = [json.loads(line) for line in path.read_text().splitlines()[1:]]
    assert all(r["v"] == SCHEMA_VERSION for r in records)  # values inline, as ever
    cli("delete", "x", "--yes")
    with cli.saver(flusher="off") as s:
        assert s.sync_clients.db[s.context.collections.chunks].count_documents({}) == 0
    cli("import", str(path))
    assert _stored(cli, "x") == before
    with cli.saver(flusher="off") as s:
        db, cols = s.sync_clients.db, s.context.collections
        assert sorted(db[cols.chunks].find({"thread_id": "x"}, {"put_ms": 0}),
                      key=lambda d: d["_id"]) == chunks_before
        # stored at the import's time, as their owners: a delete racing it keeps them
        owners = {d["_id"]: d["put_ms"] for k in ("checkpoints", "blobs", "writes", "items")
                  for d in db[getattr(cols, k)].find({"thread_id": "x"}, {"put_ms": 1})}
        assert {c["put_ms"] for c in db[cols.chunks].find({"thread_id": "x"})} == \
            set(owners.values())
    assert cli.json("show", "x") == shown
