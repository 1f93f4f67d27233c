"""``langgraph-durable migrate-state`` (issue 34 item 4): threads older than the new
state version are rewritten in it under the same checkpoint_id (their pending writes
stay attached: a paused thread resumes under v2 code that has no migrations at all and
does not run its finished task again), threads at the version are skipped (a re-run
finishes an interrupted one), newer threads are left alone, failures are named; a run
SIGKILLed midway leaves every thread readable."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import redis
from langgraph.types import Command

from langgraph_durable import STATE_VERSION_KEY
from langgraph_durable.testing import drop_key_prefix

from . import statekit
from .clikit import Cli

ROOT = Path(__file__).resolve().parents[2]
REGISTRY = "tests.cli.statekit:MIGRATIONS"
V1_INPUT = {"steps": ["draft", "send"], "log": []}


def cfg(thread: str) -> Any:
    return {"configurable": {"thread_id": thread}}


def run_v1(cli: Cli, threads: list[str], version: int | None = 1,
           steps: list[str] | None = None) -> None:
    """Run the v1 graph on ``threads`` with a saver stamping ``version`` (None: none);
    a thread whose id contains "ask" pauses in ``interrupt()``."""
    options = {} if version is None else {"state_version": version}
    with cli.saver(**options) as saver:
        graph = statekit.graph(statekit.V1, saver)
        for t in threads:
            graph.invoke({**V1_INPUT, **({"steps": steps} if steps else {})}, cfg(t))


def migrate(cli: Cli, *args: str, code: int = 0, registry: str = REGISTRY) -> Any:
    return cli("migrate-state", "--migrations", registry, "--state-version", "2", *args,
               code=code)


def test_old_threads_are_rewritten_in_place_and_resume_under_v2_without_migrations(
        cli: Cli, redis_url: str) -> None:
    run_v1(cli, ["ask-1", "ask-2", "done-1"])
    run_v1(cli, ["old"], version=None)  # unversioned: read as version 1
    run_v1(cli, ["new"], version=3)  # written by newer code
    before = {t: cli.json("history", t)["checkpoints"] for t in ("ask-1", "done-1")}
    assert before["ask-1"][0]["writes"] == 2  # work's update and ask's interrupt

    out = migrate(cli, "--dry-run").stdout.splitlines()
    assert "would migrate ask-1: state version 1 -> 2 (1 checkpoint(s))" in out
    assert "would migrate old: state version unversioned -> 2 (1 checkpoint(s))" in out
    assert "newer new: state version 3" in out
    assert out[-1] == ("state version 2 (dry run): 4 would be migrated, 0 already current, "
                       "1 newer (left alone), 0 skipped (migrate on read), 0 failed")
    assert cli.json("threads", "--state-version-below", "2")["total"] == 4  # untouched

    done = cli.json("migrate-state", "--migrations", REGISTRY, "--state-version", "2")
    assert done["counts"] == {"migrated": 4, "would_migrate": 0, "current": 0, "newer": 1,
                              "skipped": 0, "failed": 0}
    assert {t["thread_id"]: (t["outcome"], t["from"], t["rewritten"])
            for t in done["threads"]} == {
        "ask-1": ("migrated", 1, [""]), "ask-2": ("migrated", 1, [""]),
        "done-1": ("migrated", 1, [""]), "old": ("migrated", None, [""]),
        "new": ("newer", 3, [])}
    assert sorted(r["thread_id"] for r in cli.json("threads", "--state-version", "2")[
        "threads"]) == ["ask-1", "ask-2", "done-1", "old"]
    for t, rows in before.items():  # same checkpoints, same pending writes
        after = cli.json("history", t)["checkpoints"]
        assert [(r["checkpoint_id"], r["parent"], r["writes"]) for r in after] == [
            (r["checkpoint_id"], r["parent"], r["writes"]) for r in rows]

    def stored(saver: Any) -> dict[str, Any]:
        tup = saver.get_tuple(cfg("done-1"))  # no state version: the bytes at rest
        return {"version": tup.metadata[STATE_VERSION_KEY],
                "values": {k: v for k, v in tup.checkpoint["channel_values"].items()
                           if not k.startswith("branch:")}}

    want = {"version": 2, "values": {"plan": ["draft", "send"], "executed_steps": [],
                                     "log": ["work"], "answer": "auto"}}
    with cli.saver() as plain:
        assert stored(plain) == want
        plain.flush()
        r = redis.Redis.from_url(redis_url)
        try:
            assert drop_key_prefix(r, plain.config.key_prefix) > 0
        finally:
            r.close()
    with cli.saver() as cold:  # MongoDB alone: the flush overwrote the document too
        assert stored(cold) == want and cold.last_read_tier == "durable"

    runs = statekit.RUNS["ask-1"]
    with cli.saver(state_version=2) as v2:  # no migrations: nothing old is left to read
        graph = statekit.graph(statekit.V2, v2)
        final = graph.invoke(Command(resume="yes"), cfg("ask-1"))
    assert final == {"plan": ["draft", "send"], "executed_steps": [],
                     "log": ["work"], "answer": "yes"}
    assert statekit.RUNS["ask-1"] == runs  # work's pending write was still attached

    again = migrate(cli).stdout.splitlines()
    assert again == ["newer new: state version 3",
                     "state version 2: 0 migrated, 4 already current, 1 newer (left alone), "
                     "0 skipped (migrate on read), 0 failed"]


def test_limit_thread_failures_writes_hooks_and_bad_registries(cli: Cli) -> None:
    run_v1(cli, ["a1", "a2", "a3", "ask-w"])
    run_v1(cli, ["boom"], steps=["boom"])
    r = migrate(cli, "--thread", "boom", code=1)
    line, summary = r.stdout.splitlines()
    assert line.startswith("failed boom: state version 1: StateMigrationError: the values "
                           "migration from state version 1 to 2 (state_migrations[1]) of "
                           "checkpoint ")
    assert "raised ValueError: cannot plan 'boom'" in line
    assert summary.endswith("0 skipped (migrate on read), 1 failed")
    assert cli.json("show", "boom")["state_version"] == 1  # nothing changed

    out = migrate(cli, "--limit", "2").stdout.splitlines()
    assert out == ["migrated a1: state version 1 -> 2 (1 checkpoint(s))",
                   "migrated a2: state version 1 -> 2 (1 checkpoint(s))",
                   "state version 2: 2 migrated, 0 already current, 0 newer (left alone), "
                   "0 skipped (migrate on read), 0 failed; stopped at --limit 2: run again "
                   "for the rest"]

    r = cli("migrate-state", "--migrations", REGISTRY, code=1)
    assert r.stderr == ("error: give the version to migrate to: --state-version N (or the "
                        "global --state-version / LGD_STATE_VERSION)\n")
    r = cli("--state-version", "2", "migrate-state", "--migrations",  # the global option
            "tests.cli.statekit:WITH_WRITES", "--thread", "ask-w", "--thread", "a3")
    skipped, migrated, summary = r.stdout.splitlines()
    assert skipped.startswith("skipped ask-w: state version 1: checkpoint ")
    assert skipped.endswith("has pending writes a writes migration applies to: they are "
                            "stored insert-once, so it migrates on read when the thread "
                            "resumes")
    assert migrated == "migrated a3: state version 1 -> 2 (1 checkpoint(s))"
    assert cli.json("show", "ask-w")["state_version"] == 1

    r = migrate(cli, registry="tests.cli.statekit:NOT_A_REGISTRY", code=1)
    assert r.stderr == ("error: --migrations 'tests.cli.statekit:NOT_A_REGISTRY' is a list, "
                        "not a mapping of state version (int) -> migration\n")
    r = migrate(cli, registry="tests.cli.no_such_module:X", code=1)
    assert r.stderr.startswith("error: --migrations 'tests.cli.no_such_module:X' cannot be "
                               "imported: No module named 'tests.cli.no_such_module'")
    r = migrate(cli, registry="tests.cli.statekit", code=1)
    assert r.stderr == ("error: --migrations expects module:attribute, got "
                        "'tests.cli.statekit'\n")


def test_a_run_killed_midway_leaves_every_thread_readable_and_a_rerun_finishes(
        cli: Cli) -> None:
    """SIGKILL once the process reported K threads migrated (its output is read line by
    line; no timing): every thread reads under v2 (the rewritten ones as stored, the
    others migrated on read), and running the command again migrates exactly the rest."""
    threads = [f"k{i:03d}" for i in range(60)]
    run_v1(cli, threads)
    env = {**os.environ, **cli.env, "PYTHONPATH": str(ROOT), "PYTHONUNBUFFERED": "1"}
    proc = subprocess.Popen([sys.executable, "-m", "langgraph_durable.cli", "migrate-state",
                             "--migrations", REGISTRY, "--state-version", "2"],
                            cwd=ROOT, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    reported = []
    try:
        assert proc.stdout is not None
        while len(reported) < 5:
            line = proc.stdout.readline()
            assert line, proc.stderr.read() if proc.stderr else "no output"
            if line.startswith("migrated "):
                reported.append(line.split()[1].rstrip(":"))
        proc.send_signal(signal.SIGKILL)
    finally:
        proc.kill()
        proc.communicate(timeout=60)
    assert proc.returncode == -signal.SIGKILL
    assert reported == threads[:5]

    at_2 = {r["thread_id"] for r in cli.json("threads", "--state-version", "2", "--limit",
                                             "1000")["threads"]}
    assert set(reported) <= at_2 and len(at_2) < len(threads)  # killed midway
    with cli.saver(state_version=2, state_migrations=statekit.MIGRATIONS) as v2:
        graph = statekit.graph(statekit.V2, v2)
        for t in threads:  # every thread reads, rewritten or not
            assert graph.get_state(cfg(t)).values == {
                "plan": ["draft", "send"], "executed_steps": [], "log": ["work"],
                "answer": "auto"}, t
    out = migrate(cli).stdout.splitlines()
    assert out[-1] == (f"state version 2: {len(threads) - len(at_2)} migrated, "
                       f"{len(at_2)} already current, 0 newer (left alone), 0 skipped "
                       "(migrate on read), 0 failed")
    assert cli.json("threads", "--state-version", "2", "--limit", "1000")["total"] == 60



def test_a_pruned_thread_is_rewritten_without_the_link_to_its_deleted_parent(
        cli: Cli) -> None:
    run_v1(cli, ["p1", "ask-p"])
    cli("prune", "p1", "ask-p", "--keep-last", "1", "--yes")
    before = cli.json("history", "ask-p")["checkpoints"]
    assert len(before) == 1 and before[0]["parent"] is not None  # pruned away
    out = migrate(cli).stdout.splitlines()
    assert out[-1].startswith("state version 2: 2 migrated, 0 already current")
    after = cli.json("history", "ask-p")["checkpoints"]
    assert [(r["checkpoint_id"], r["parent"], r["writes"]) for r in after] == [
        (before[0]["checkpoint_id"], None, 2)]
    runs = statekit.RUNS["ask-p"]
    with cli.saver(state_version=2) as v2:
        final = statekit.graph(statekit.V2, v2).invoke(Command(resume="ok"), cfg("ask-p"))
    assert final["answer"] == "ok" and final["plan"] == ["draft", "send"]
    assert statekit.RUNS["ask-p"] == runs


def test_a_paused_subgraph_is_rewritten_before_its_root_and_resumes_under_v2(
        cli: Cli) -> None:
    with cli.saver(state_version=1) as v1:
        statekit.parent_graph(statekit.V1, v1).invoke(V1_INPUT, cfg("ask-sub"))
    done = cli.json("migrate-state", "--migrations", REGISTRY, "--state-version", "2")
    (row,) = done["threads"]
    assert row["outcome"] == "migrated" and len(row["rewritten"]) == 2
    assert row["rewritten"][0].startswith("sub:") and row["rewritten"][1] == ""
    sub = row["rewritten"][0]
    assert cli.json("show", "ask-sub", "--ns", sub)["state_version"] == 2
    runs = statekit.RUNS["ask-sub"]
    with cli.saver(state_version=2) as v2:  # no migrations
        final = statekit.parent_graph(statekit.V2, v2).invoke(Command(resume="go"),
                                                              cfg("ask-sub"))
    assert final == {"plan": ["draft", "send"], "executed_steps": [], "log": ["work"],
                     "answer": "go"}
    assert statekit.RUNS["ask-sub"] == runs  # the subgraph's finished task kept its write


def test_a_thread_only_mongodb_holds_is_rewritten_there(cli: Cli, redis_url: str) -> None:
    """After the hot tier lost the thread (Redis emptied of the key prefix), the rewrite
    goes through Redis as any put (the tombstones are learnt from MongoDB first) and the
    flush overwrites the MongoDB document."""
    run_v1(cli, ["ask-cold"])
    with cli.saver() as s:
        s.flush()
        r = redis.Redis.from_url(redis_url)
        try:
            assert drop_key_prefix(r, s.config.key_prefix) > 0
        finally:
            r.close()
    ids = [c["checkpoint_id"] for c in cli.json("history", "ask-cold")["checkpoints"]]
    assert migrate(cli).stdout.splitlines()[0] == (
        "migrated ask-cold: state version 1 -> 2 (1 checkpoint(s))")
    assert [c["checkpoint_id"] for c in cli.json("history", "ask-cold")["checkpoints"]] == ids
    runs = statekit.RUNS["ask-cold"]
    with cli.saver(state_version=2) as v2:
        final = statekit.graph(statekit.V2, v2).invoke(Command(resume="y"), cfg("ask-cold"))
    assert final["answer"] == "y" and final["plan"] == ["draft", "send"]
    assert statekit.RUNS["ask-cold"] == runs
