"""``import`` checks a file as the API checks a call, before it deletes or writes anything:
every identifier of every record (a NUL, a number where an id is text), and every carried
blob-store object against its content hash. ``export`` carries the objects the effect
journal names, so an imported thread resumes without running its effects again."""

from __future__ import annotations

import base64
import hashlib
import json
from pathlib import Path
from typing import Any

import pytest
from langgraph.types import Command

from langgraph_durable.serde import refs_in

from ..frame_effects import ROWS, Loads, encrypted_serde, frame, load_then_ask, serde
from .clikit import Cli, build_graph, first_input


def _stored(cli: Cli, thread: str) -> dict[str, list[dict]]:
    """Every stored document of ``thread`` in MongoDB, and its Redis checkpoint index."""
    with cli.saver(flusher="off") as s:
        db, cols = s.sync_clients.db, s.context.collections
        docs = {k: sorted(db[getattr(cols, k)].find({"thread_id": thread}),
                          key=lambda d: d["_id"])
                for k in ("checkpoints", "blobs", "writes", "items", "effects")}
        docs["registry"] = [{"redis index": s.sync_clients.redis.zrange(
            s.context.keys(thread).idx, 0, -1)}]
        return docs


def _nothing(cli: Cli, thread: str) -> None:
    stored = _stored(cli, thread)
    assert stored == {"checkpoints": [], "blobs": [], "writes": [], "items": [],
                      "effects": [], "registry": [{"redis index": []}]}


def _objects(folder: Path) -> list[Path]:
    return sorted(p for p in folder.rglob("*") if p.is_file()) if folder.exists() else []


def _frame_thread(cli: Cli, folder: Path, loads: Loads) -> str:
    """Thread "fx" stopped at its interrupt after once("load") returned a DataFrame;
    returns the frame's blob key."""
    with cli.saver(serde=serde(folder)) as s:
        load_then_ask(s, loads).invoke({"rows": 0}, {"configurable": {"thread_id": "fx"}})
        (key,) = refs_in(*s.serde.dumps_typed(frame()))
    return key


def _write(path: Path, records: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


def test_export_carries_the_effect_journals_objects_and_the_import_resumes(
        cli: Cli, tmp_path: Path, redis_url: str, mongo_url: str) -> None:
    loads = Loads()
    key = _frame_thread(cli, tmp_path / "a", loads)
    path = tmp_path / "fx.jsonl"
    cli("--blob-store", str(tmp_path / "a"), "export", "fx", "-o", str(path))
    records = [json.loads(line) for line in path.read_text().splitlines()]
    assert records[0]["counts"]["extblob"] == 1 and records[0]["counts"]["effect"] == 1
    (carried,) = [r for r in records if r.get("type") == "extblob"]
    assert carried["key"] == key

    other = Cli(redis_url, mongo_url)  # another key prefix, database and blob store
    out = other("--blob-store", str(tmp_path / "b"), "import", str(path)).stdout
    assert out.endswith("and 1 blob-store objects\n")
    with other.saver(serde=serde(tmp_path / "b")) as s:
        done = load_then_ask(s, loads).invoke(Command(resume="yes"),
                                              {"configurable": {"thread_id": "fx"}})
    assert loads.calls == 1  # the journal came along: the effect is not run again
    assert (done["rows"], done["answer"]) == (ROWS, "yes")


def test_a_tampered_object_is_refused_and_nothing_is_written(
        cli: Cli, tmp_path: Path, redis_url: str, mongo_url: str) -> None:
    key = _frame_thread(cli, tmp_path / "a", Loads())
    records = [json.loads(line) for line in cli(
        "--blob-store", str(tmp_path / "a"), "export", "fx").stdout.splitlines()]
    other = Cli(redis_url, mongo_url)
    junk = b"PAR1 not the frame"
    tampered = [{**r, "data": base64.b64encode(junk).decode()} if r.get("type") == "extblob"
                else r for r in records]
    r = other("--blob-store", str(tmp_path / "b"), "import",
              str(_write(tmp_path / "tampered.jsonl", tampered)), code=1)
    assert r.stderr == (
        f"error: blob-store object {key!r} of the export is corrupt or forged: sha256 "
        f"{hashlib.sha256(junk).hexdigest()} ({len(junk)} bytes), its reference says "
        f"{key[:64]} ({len(base64.b64decode(records[1]['data']))} bytes) "
        "(nothing written)\n")
    assert _objects(tmp_path / "b") == []
    _nothing(other, "fx")

    # an object no record names (planted under the content key of some other value)
    planted = b"someone else's value"
    foreign = hashlib.sha256(planted).hexdigest() + ".bin"
    header = {**records[0], "counts": {**records[0]["counts"], "extblob": 2}}
    extra = {"type": "extblob", "v": records[1]["v"], "key": foreign,
             "data": base64.b64encode(planted).decode()}
    r = other("--blob-store", str(tmp_path / "b"), "import",
              str(_write(tmp_path / "planted.jsonl", [header, extra, *records[1:]])), code=1)
    assert r.stderr == (f"error: blob-store object {foreign!r} of the export is named by "
                        "none of its records (nothing written)\n")
    assert _objects(tmp_path / "b") == []
    _nothing(other, "fx")


def test_encrypted_objects_are_verified_with_the_serializers_cipher(
        cli: Cli, tmp_path: Path, redis_url: str, mongo_url: str,
        monkeypatch: pytest.MonkeyPatch) -> None:
    serde_arg = "tests.frame_effects:encrypted_from_env"
    loads, config = Loads(), {"configurable": {"thread_id": "fx"}}
    with cli.saver(serde=encrypted_serde(tmp_path / "a")) as s:
        load_then_ask(s, loads).invoke({"rows": 0}, config)
    monkeypatch.setenv("FRAME_EFFECTS_BLOB_DIR", str(tmp_path / "a"))
    path = tmp_path / "fx.jsonl"
    cli("--serde", serde_arg, "export", "fx", "-o", str(path))
    records = [json.loads(line) for line in path.read_text().splitlines()]
    (carried,) = [r for r in records if r.get("type") == "extblob"]
    key = carried["key"]
    assert key.endswith(".parquet.aesgcm")

    other = Cli(redis_url, mongo_url)
    r = other("--blob-store", str(tmp_path / "b"), "import", str(path), code=1)
    assert r.stderr == (f"error: blob-store object {key!r} is encrypted (aesgcm): pass the "
                        "serializer with its cipher (--serde) to verify it, or "
                        "--without-blobs (nothing written)\n")
    data = bytearray(base64.b64decode(carried["data"]))
    data[-1] ^= 1
    tampered = _write(tmp_path / "tampered.jsonl", [
        {**r, "data": base64.b64encode(bytes(data)).decode()} if r.get("type") == "extblob"
        else r for r in records])
    monkeypatch.setenv("FRAME_EFFECTS_BLOB_DIR", str(tmp_path / "b"))
    r = other("--serde", serde_arg, "import", str(tampered), code=1)
    assert r.stderr.startswith(f"error: blob-store object {key!r} cannot be decrypted with "
                               "the serializer's cipher: InvalidTag()")
    assert _objects(tmp_path / "b") == []
    _nothing(other, "fx")

    other("--serde", serde_arg, "import", str(path))
    with other.saver(serde=encrypted_serde(tmp_path / "b")) as s:
        done = load_then_ask(s, loads).invoke(Command(resume="yes"), config)
    assert loads.calls == 1 and done["rows"] == ROWS


def _thread_x(cli: Cli) -> list[dict[str, Any]]:
    """Thread "x" stopped at an interrupt; its export's records (header first)."""
    with cli.saver() as s:
        build_graph(s, ask=True).invoke(first_input(), {"configurable": {"thread_id": "x"}})
    return [json.loads(line) for line in cli("export", "x").stdout.splitlines()]


def test_identifiers_the_api_refuses_are_refused_before_anything_is_deleted(
        cli: Cli, tmp_path: Path) -> None:
    records = _thread_x(cli)
    before = _stored(cli, "x")
    assert before["checkpoints"] and before["writes"]
    first = {kind: next(n for n, r in enumerate(records) if r.get("type") == kind)
             for kind in ("checkpoint", "blob", "write")}

    def bad(kind: str, **change: Any) -> tuple[Path, int, dict[str, Any]]:
        n = first[kind]
        out = [dict(r) for r in records]
        out[n].update(change)
        return _write(tmp_path / f"bad-{kind}.jsonl", out), n + 1, out[n]

    path, line, rec = bad("checkpoint", checkpoint_id="bad\x00id")
    r = cli("import", str(path), "--yes", code=1)
    assert r.stderr == (
        f"error: {path}:{line}: checkpoint record (checkpoint_ns '', checkpoint_id "
        "'bad\\x00id') of thread 'x': checkpoint_id of thread 'x' contains a NUL "
        "character: 'bad\\x00id' (nothing written)\n")
    path, line, rec = bad("checkpoint", ns=7)
    r = cli("import", str(path), "--yes", code=1)
    assert r.stderr == (
        f"error: {path}:{line}: checkpoint record (checkpoint_ns 7, checkpoint_id "
        f"{rec['checkpoint_id']!r}) of thread 'x': checkpoint_ns must be a str, got int 7 "
        "(nothing written)\n")
    path, line, rec = bad("write", ns=0, checkpoint_id="c")
    assert f"{path}:{line}: write record (checkpoint_ns 0, checkpoint_id 'c'" in cli(
        "import", str(path), "--yes", code=1).stderr
    path, line, rec = bad("write", task_path="~a\x00b")
    assert "task_path of thread 'x' contains a NUL character" in cli(
        "import", str(path), "--yes", code=1).stderr
    path, line, rec = bad("blob", version="1\x002")
    assert (f"{path}:{line}: blob record (checkpoint_ns '', channel {rec['channel']!r}, "
            f"version '1\\x002') of thread 'x': the version of channel {rec['channel']!r} "
            "of thread 'x' contains a NUL character") in cli(
        "import", str(path), "--yes", code=1).stderr
    path, line, rec = bad("blob", channel=["messages"])
    assert "channel must be a str, got list" in cli("import", str(path), "--yes",
                                                    code=1).stderr
    header_int = _write(tmp_path / "int-thread.jsonl", [{**records[0], "thread_id": 5},
                                                         *records[1:]])
    assert cli("import", str(header_int), "--yes", code=1).stderr == (
        f"error: {header_int}:1: header: thread_id must be a str, got int 5 "
        "(nothing written)\n")
    good = _write(tmp_path / "good.jsonl", records)
    assert "thread_id contains a NUL character" in cli(
        "import", str(good), "--thread", "y\x00z", "--yes", code=1).stderr

    assert _stored(cli, "x") == before  # nothing deleted, nothing written
    _nothing(cli, "y\x00z")


@pytest.mark.parametrize(("kind", "change"), [
    ("write", {"idx": 2**64}), ("write", {"seq": -(2**70)}),
    ("checkpoint", {"md": [["step", 2**64]]})])
def test_numbers_mongodb_cannot_store_are_refused_before_anything_is_deleted(
        cli: Cli, tmp_path: Path, kind: str, change: dict[str, Any]) -> None:
    """A hostile or hand-edited export with an integer BSON cannot hold (an 8-byte int at
    most) is refused at the check, naming the record, and the existing thread is kept
    (the review of issue 31: it was deleted, then the write failed with a bare
    OverflowError)."""
    records = _thread_x(cli)
    before = _stored(cli, "x")
    n = next(i for i, r in enumerate(records) if r.get("type") == kind)
    out = [dict(r) for r in records]
    out[n].update(change)
    path = _write(tmp_path / "big.jsonl", out)
    r = cli("import", str(path), "--yes", code=1)
    assert r.stderr.startswith(f"error: {path}:{n + 1}: {kind} record")
    assert "(nothing written)" in r.stderr
    assert _stored(cli, "x") == before


def test_a_file_of_wrong_json_types_gets_errors_naming_the_line(cli: Cli, tmp_path: Path
                                                                 ) -> None:
    """Header and record fields of the wrong JSON type, and nesting deeper than Python's
    parser goes, are refused with the file and line, not a bare TypeError,
    AttributeError or RecursionError (the review of issue 31)."""
    head = {"format": "langgraph-durable-export", "format_version": 1, "thread_id": "x"}
    cases = [
        ([{**head, "format_version": "9"}], ":1: header: format_version must be an integer"),
        ([{**head, "counts": [1]}], ":1: header: counts must be an object"),
        ([head, {"type": ["checkpoint"], "v": 1}], ":2: unsupported record (type"),
    ]
    for n, (records, expected) in enumerate(cases):
        path = _write(tmp_path / f"{n}.jsonl", records)
        assert f"error: {path}{expected}" in cli("import", str(path), "--yes", code=1).stderr
    deep = tmp_path / "deep.jsonl"
    deep.write_text(json.dumps(head) + "\n" + "[" * 100_000 + "]" * 100_000 + "\n")
    assert f"error: {deep}:2: malformed record (RecursionError" in cli(
        "import", str(deep), "--yes", code=1).stderr
    _nothing(cli, "x")
