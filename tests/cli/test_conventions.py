"""What a new user met (issue 15): unknown threads are errors, retention options,
checkpoints by step or prefix, --version, usage lines, 80 columns, --blob-store hints,
and every command with a tier down (real servers stopped, bad ports)."""

from __future__ import annotations

import json
import logging
import os
import re
import time
from pathlib import Path
from typing import Any

import pytest
from langgraph.checkpoint.base import empty_checkpoint

from langgraph_durable import __version__
from langgraph_durable.serde import ExternalRefSerializer, LocalBlobStore
from langgraph_durable.testing import mongo_server

from ..test_retention import uuid6_at
from .clikit import Cli, build_graph, first_input


def test_delete_and_prune_of_unknown_threads_are_errors(cli: Cli, t1: dict) -> None:
    r = cli("delete", "no-such", "--yes", code=1)
    assert r.stderr == "error: thread 'no-such' not found (nothing done)\n"
    r = cli("delete", "t1", "no-such", "other", "--yes", code=1)
    assert r.stderr == "error: threads 'no-such', 'other' not found (nothing done)\n"
    r = cli("prune", "no-such", "--yes", code=1)
    assert r.stderr == "error: thread 'no-such' not found (nothing done)\n"
    assert len(cli.json("history", "t1")["checkpoints"]) == 5  # t1 untouched


def test_prune_keep_last_and_older_than(cli: Cli, t1: dict) -> None:
    out = cli("prune", "t1", "--keep-last", "3", "--yes").stdout
    assert "pruned 1 thread(s) (keep_latest, keep last 3)" in out
    assert [c["step"] for c in cli.json("history", "t1")["checkpoints"]] == [3, 2, 1]
    with cli.saver() as s:
        cfg: Any = {"configurable": {"thread_id": "old", "checkpoint_ns": ""}}
        for i, age_s in enumerate([40 * 86400, 39 * 86400, 3600]):
            cp = empty_checkpoint()
            cp["id"] = uuid6_at(time.time() - age_s)
            cfg = s.put(cfg, cp, {"step": i}, {})
    cli("prune", "old", "--older-than", "30d", "--yes")
    assert [c["step"] for c in cli.json("history", "old")["checkpoints"]] == [2]
    out = cli("prune", "--all", "--strategy", "delete", "--older-than", "2h", "--yes").stdout
    assert out.endswith("deleted 0 of 2 thread(s) (delete, older than 2h)\n")  # both active
    assert {r["thread_id"] for r in cli.json("threads")["threads"]} == {"t1", "old"}
    out = cli("prune", "--all", "--strategy", "delete", "--older-than", "30m", "--yes").stdout
    assert out.endswith("deleted 1 of 2 thread(s) (delete, older than 30m)\n")
    assert [r["thread_id"] for r in cli.json("threads")["threads"]] == ["t1"]
    r = cli("prune", "t1", "--older-than", "3 weeks", "--yes", code=1)
    assert r.stderr == ("error: expected a duration such as 30d, 12h, 15m or 90s, "
                        "got '3 weeks'\n")
    r = cli("prune", "t1", "--strategy", "delete", "--keep-last", "2", "--yes", code=1)
    assert r.stderr == "error: --keep-last applies to strategy 'keep_latest', not 'delete'\n"


def test_checkpoints_by_step_number_and_id_prefix(cli: Cli, t1: dict) -> None:
    ids = t1["ids"]  # newest first: steps 3, 2, 1, 0, -1
    assert cli.json("show", "t1", "1")["checkpoint_id"] == ids[2]
    out = cli("show", "--json", "t1", "--", "-1").stdout  # "--": -1 is not an option
    assert json.loads(out)["checkpoint_id"] == ids[4]
    assert cli.json("show", "t1", ids[3][:18])["checkpoint_id"] == ids[3]
    assert cli.json("show", "t1", "--checkpoint", "2")["checkpoint_id"] == ids[1]
    d = cli.json("diff", "t1", "0", "3")
    assert (d["a"], d["b"], d["steps"]) == (ids[3], ids[0], [0, 3])
    assert cli("show", "t1", "9", code=1).stderr == (
        "error: thread 't1' (ns '') has no checkpoint at step 9\n")
    assert cli("show", "t1", "ffff0000", code=1).stderr == (
        "error: no checkpoint of thread 't1' (ns '') starts with 'ffff0000'\n")
    # uuid6 ids start with the time's high bits; ids[0][:8] changes every 27 s, so two
    # checkpoints a moment apart may differ there: take what all five share.
    common = os.path.commonprefix(ids)
    assert len(common) >= 4, ids  # the CLI's shortest prefix; changes only every ~20 days
    assert cli("show", "t1", common, code=1).stderr == (
        f"error: checkpoint prefix '{common}' is ambiguous in thread 't1' (ns ''): "
        "5 checkpoints start with it\n")
    assert cli("diff", "nope", "0", "3", code=1).stderr == "error: thread 'nope' not found\n"
    with cli.saver() as s:  # a branch from step 1: step 2 now names two checkpoints
        graph = build_graph(s)
        fork = graph.update_state({"configurable": {"thread_id": "t1", "checkpoint_id":
                                                    ids[2]}}, {"count": 10})
    branch = fork["configurable"]["checkpoint_id"]
    step = str(cli.json("show", "t1", branch)["metadata"]["step"])
    r = cli("show", "t1", step, code=1)
    assert r.stderr.startswith(f"error: step {step} of thread 't1' (ns '') names 2 "
                               "checkpoints (branches): give one by id prefix: ")
    assert branch[:13] in r.stderr
    assert cli("diff", "nope", ids[3], ids[0], code=1).stderr == (
        "error: thread 'nope' (ns '') not found\n")


def test_version_and_usage_lines_name_arguments(cli: Cli) -> None:
    assert cli("--version").stdout == f"langgraph-durable {__version__}\n"
    cli.env["COLUMNS"] = "120"
    usage = {c: re.search(r"Usage: \S+ \S+ (.*?)\s*$", cli(c, "--help").stdout, re.M)
             .group(1) for c in ("diff", "show", "delete", "prune", "copy")}  # type: ignore[union-attr]
    assert usage == {"diff": "[OPTIONS] THREAD A B", "show": "[OPTIONS] THREAD [CHECKPOINT]",
                     "delete": "[OPTIONS] THREAD...", "prune": "[OPTIONS] [THREAD]...",
                     "copy": "[OPTIONS] SRC DST"}


def test_history_at_80_columns_keeps_time_and_parent_readable(cli: Cli, t1: dict) -> None:
    cli.env["COLUMNS"] = "80"
    text = cli("history", "t1").stdout
    lines = text.splitlines()
    assert max(len(line) for line in lines) <= 80
    full = cli.json("history", "t1")["checkpoints"]
    rows = [line for line in lines if re.search(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\dZ", line)]
    assert len(rows) == 5
    for row, c in zip(rows, full):
        cells = row.split()
        cid, parent = cells[0], cells[1]
        assert c["checkpoint_id"].startswith(cid) and len(cid) >= 13
        assert parent == "-" if c["parent"] is None else c["parent"].startswith(parent)
        assert cells[-2:] == [c["ts"][:10], c["ts"][11:19] + "Z"]
        # a shown prefix addresses the checkpoint
    assert cli.json("show", "t1", rows[2].split()[0])["checkpoint_id"] == full[2]["checkpoint_id"]
    assert "ns ''" in text


def test_history_at_120_and_200_columns_cuts_nothing(cli: Cli, t1: dict) -> None:
    full = cli.json("history", "t1")["checkpoints"]
    for columns, whole_ids in (("120", False), ("200", True)):
        cli.env["COLUMNS"] = columns
        lines = cli("history", "t1").stdout.splitlines()
        assert max(len(line) for line in lines) <= int(columns)
        assert not any("…" in line for line in lines), lines  # no cell cut short
        rows = [line for line in lines
                if re.search(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\dZ", line)]
        assert len(rows) == 5
        for row, c in zip(rows, full):
            assert (c["checkpoint_id"] in row) == whole_ids
            assert c["ts"][:10] + " " + c["ts"][11:19] + "Z" in row


def test_show_of_an_external_reference_without_blob_store_says_to_pass_it(
        cli: Cli, tmp_path: Path) -> None:
    serde = ExternalRefSerializer(store=LocalBlobStore(tmp_path / "blobs"), threshold_bytes=4000)
    with cli.saver(serde=serde) as s:
        build_graph(s).invoke({**first_input(), "notes": {"big": "x" * 20000}},
                              {"configurable": {"thread_id": "ext"}})
    text = cli("show", "ext").stdout
    assert "NotImplementedError" not in text
    assert ("note: 1 value(s) are external references (ExternalRefSerializer): pass "
            "--blob-store s3://bucket/prefix or a folder") in " ".join(text.split())
    assert "--blob-store" in cli.json("show", "ext")["note"]
    shown = cli("--blob-store", str(tmp_path / "blobs"), "show", "ext", "--json").stdout
    assert '"big": "' + "x" * 100 in shown


# ------------------------------------------------------------------ a tier down (item 4)


def test_commands_with_mongodb_stopped_show_what_redis_holds(redis_url: str) -> None:
    with mongo_server() as ms:
        cli = Cli(redis_url, ms.url)
        cli.env["LGD_SERVER_SELECTION_TIMEOUT_S"] = "0.5"
        with cli.saver() as s:  # a thread started in Redis: Redis holds all of it
            build_graph(s).invoke(first_input(), {"configurable": {"thread_id": "hot"}})
        ms.stop()
        began = time.monotonic()
        r = cli("status", code=2)
        assert time.monotonic() - began < 5
        assert "outbox length" in r.stdout and "redis (hot tier)" in r.stdout
        assert "mongodb DOWN" in r.stdout and "MongoDB" in r.stdout
        down = json.loads(cli("status", "--json", code=2).stdout)["down"]
        assert list(down) == ["mongodb"]
        host = ms.url.split("//")[1].split("/")[0]
        assert down["mongodb"].startswith(
            f"durable tier (MongoDB) at {host}/{cli.opts['database']} did not answer")
        rows = cli.json("history", "hot")["checkpoints"]
        assert [c["step"] for c in rows] == [3, 2, 1, 0, -1]
        assert cli.json("show", "hot", "1")["metadata"]["step"] == 1
        r = cli("threads", code=1)  # listing needs MongoDB: said in one line, our type
        assert r.stderr.startswith(f"error: durable tier (MongoDB) at {host}/")
        assert "did not answer" in r.stderr
        assert r.stderr.count("\n") == 1
        ms.start()


def test_commands_with_a_bad_redis_port_name_the_hot_tier(cli: Cli) -> None:
    cli.env["REDIS_URL"] = "redis://127.0.0.1:1/0"
    cli.env["LGD_SOCKET_TIMEOUT_S"] = "0.5"
    for command in (["threads"], ["delete", "t", "--yes"], ["history", "t"]):
        r = cli(*command, code=1)
        assert r.stderr.startswith("error: hot tier (Redis) at 127.0.0.1:1 "), (
            command, r.stderr)
        assert "did not answer" in r.stderr and r.stderr.count("\n") == 1
        assert "ConnectionError" not in r.stderr
    r = cli("status", "--json", code=2)
    data = json.loads(r.stdout)
    assert list(data["down"]) == ["redis"] and "durable" in data
    assert data["down"]["redis"].startswith("hot tier (Redis) at 127.0.0.1:1 did not answer")


def test_status_probe_with_mongodb_stopped_waits_for_server_selection_once(
        redis_url: str, caplog: pytest.LogCaptureFixture) -> None:
    with mongo_server() as ms:
        cli = Cli(redis_url, ms.url)
        cli.env["LGD_SERVER_SELECTION_TIMEOUT_S"] = "0.5"
        with cli.saver():
            pass
        ms.stop()
        with caplog.at_level(logging.DEBUG, logger="pymongo.serverSelection"):
            down = json.loads(cli("status", "--probe", "--json", code=2).stdout)["down"]
        assert list(down) == ["mongodb"]
        failed = [r for r in caplog.records if r.name == "pymongo.serverSelection"
                  and "Server selection failed" in r.getMessage()]
        assert len(failed) == 1  # a probe with a 1-5 s timeout waits once, not twice
        ms.start()


def test_status_of_a_key_prefix_bound_to_another_database_exits_1_naming_both(cli: Cli) -> None:
    with cli.saver():  # binds the key prefix to cli's database
        pass
    other = "lgd_other_" + cli.opts["database"][4:]
    r = cli("--database", other, "status", "--probe", code=1)
    assert r.stderr.count("\n") == 1
    assert cli.opts["database"] in r.stderr and other in r.stderr
