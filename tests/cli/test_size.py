"""``size THREAD`` and ``inspection.thread_size.thread_size``: the bytes of one thread per
channel, kind of record and tier, checked against lengths measured here independently
(HSTRLEN of each Redis field, ``bson.encode`` of each MongoDB document)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import bson
import redis

from langgraph_durable.core.records import blob_field
from langgraph_durable.durable.inline import split_key
from langgraph_durable.serde import ExternalRefSerializer, LocalBlobStore

from .clikit import Cli, build_graph, first_input


def _expected(cli: Cli, thread: str) -> dict[str, Any]:
    """Per channel of the root namespace, per tier: (latest bytes, all bytes, versions),
    and the pending writes' and items' (count, bytes), measured directly."""
    with cli.saver() as s:
        tup = s.get_tuple({"configurable": {"thread_id": thread}})
        latest = tup.checkpoint["channel_versions"]
        keys = s.context.keys(thread)
        cols = s.context.collections
        r: redis.Redis = s.sync_clients.redis
        db = s.sync_clients.db
        hot: dict[str, list[int]] = {}
        for f in r.hkeys(keys.bl):
            _ns, ch, _ver = f.decode().split("\x00")
            n = r.hstrlen(keys.bl, f)
            row = hot.setdefault(ch, [0, 0, 0])
            row[1] += n
            row[2] += 1
            if f.decode() == blob_field("", ch, latest.get(ch)):
                row[0] = n
        cold: dict[str, list[int]] = {}
        for d in db[cols.blobs].find({"thread_id": thread}):
            n = len(bson.encode(d))
            row = cold.setdefault(d["channel"], [0, 0, 0])
            row[1] += n
            row[2] += 1
            if d["version"] == str(latest.get(d["channel"])):
                row[0] = n
        for d in db[cols.checkpoints].find({"thread_id": thread, "checkpoint_ns": ""}):
            for e in d.get("vals", []):  # values inside checkpoint documents: each entry
                ch, ver = split_key(e["k"])
                n = len(bson.encode(e))
                row = cold.setdefault(ch, [0, 0, 0])
                row[1] += n
                row[2] += 1
                if ver == str(latest.get(ch)):
                    row[0] = n
        writes_hot = [r.hstrlen(keys.w, f) for f in r.hkeys(keys.w)]
        items_hot = [r.hstrlen(keys.it, f) for f in r.hkeys(keys.it)]
        wdocs = list(db[cols.writes].find({"thread_id": thread}))
        writes_cold = [len(bson.encode(d)) for d in wdocs]
        # each write counts, also inside a document of one put_writes call
        n_writes = sum(len(d["writes"]) if "writes" in d else 1 for d in wdocs)
        items_cold = [len(bson.encode(d)) for d in db[cols.items].find({"thread_id": thread})]
    return {"hot": hot, "cold": cold,
            "writes": ([len(writes_hot), sum(writes_hot)], [n_writes, sum(writes_cold)]),
            "items": ([len(items_hot), sum(items_hot)], [len(items_cold), sum(items_cold)])}


def test_size_reports_each_channel_and_kind_in_both_tiers(cli: Cli, t1: dict) -> None:
    report = cli.json("size", "t1")
    want = _expected(cli, "t1")
    for tier, key in (("redis", "hot"), ("mongodb", "cold")):
        got = {c["channel"]: [c["latest_bytes"], c["all_bytes"], c["versions"]]
               for c in report[tier]["channels"] if c["ns"] == ""}
        assert got == want[key], tier
        assert {"messages", "notes", "count", "log"} <= set(got)
    assert want["hot"]["count"][2] == want["cold"]["count"][2] == 4  # input, a, b, c
    for kind in ("writes", "items"):
        hot, cold = want[kind]
        assert [report["redis"]["kinds"][kind]["count"],
                report["redis"]["kinds"][kind]["bytes"]] == hot, kind
        assert [report["mongodb"]["kinds"][kind]["count"],
                report["mongodb"]["kinds"][kind]["bytes"]] == cold, kind
    assert report["mongodb"]["kinds"]["items"]["count"] == 7  # 4 messages, log "a" "b" "c"
    assert report["redis"]["total"] > 0 and report["mongodb"]["total"] > 0
    assert report["blobs"] == [] and report["blob_bytes"] == 0
    text = cli("size", "t1").stdout
    assert "channels of t1" in text and "messages" in text and "MEMORY USAGE" in text


def test_size_counts_external_blobs_once_and_refuses_an_unknown_thread(
        cli: Cli, tmp_path: Path) -> None:
    store = LocalBlobStore(tmp_path / "blobs")
    serde = ExternalRefSerializer(store=store, threshold_bytes=4000)
    big = "x" * 20000
    with cli.saver(serde=serde) as s:
        build_graph(s).invoke({**first_input(), "notes": {"big": big}},
                              {"configurable": {"thread_id": "ext"}})
    report = cli.json("size", "ext")
    files = sorted(p for p in (tmp_path / "blobs").rglob("*") if p.is_file())
    assert len(report["blobs"]) >= 1
    assert {b["key"] for b in report["blobs"]} <= {p.name for p in files} | {
        str(p.relative_to(tmp_path / "blobs")) for p in files}
    assert all(set(b["tiers"]) == {"redis", "mongodb"} for b in report["blobs"])
    assert report["blob_bytes"] == sum(b["size"] for b in report["blobs"])
    assert all(b["size"] > len(big) for b in report["blobs"])  # the notes dict, serialized
    r = cli("size", "nope", code=1)
    assert r.stderr == "error: thread 'nope' not found\n"
