"""status, flush, flusher, prune, delete, copy, fork, gc, migrate, end to end."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pymongo
import pytest
import redis
from langgraph.checkpoint.base import empty_checkpoint

from langgraph_durable.durable import inline
from langgraph_durable.hot.keys import CONSUMER_GROUP, heartbeats_key
from langgraph_durable.outbox.flusher import dead_letter_key
from langgraph_durable.testing import wait_for

from ..write_forms import ungroup
from .clikit import Cli, build_graph, first_input


def _put(cli: Cli, thread: str, n: int) -> None:
    """``n`` checkpoints of ``thread`` in Redis, left in the outbox (no flusher)."""
    with cli.saver(flusher="off") as s:
        cfg: Any = {"configurable": {"thread_id": thread, "checkpoint_ns": ""}}
        for i in range(n):
            cfg = s.put(cfg, empty_checkpoint(), {"step": i}, {})


def test_status_reports_outbox_consumers_dead_letters_and_sizes(cli: Cli) -> None:
    _put(cli, "s", 3)
    with cli.saver(flusher="off") as s:
        r, ctx = s.sync_clients.redis, s.context
        r.xreadgroup(CONSUMER_GROUP, "worker-1", {ctx.outbox: ">"}, count=2)
        r.xadd(dead_letter_key(ctx), {"entry": "1-0", "thread": "s", "error": "x"})
        # heartbeats: worker-2's lapses in an hour (alive), worker-3's has lapsed (dead)
        r.xgroup_createconsumer(ctx.outbox, CONSUMER_GROUP, "worker-2")
        r.xgroup_createconsumer(ctx.outbox, CONSUMER_GROUP, "worker-3")
        now_ms = int(r.time()[0]) * 1000
        r.zadd(heartbeats_key(ctx.config.key_prefix), {"worker-2": now_ms + 3_600_000,
                                                        "worker-3": 0})
    st = cli.json("status")
    o = st["outbox"]
    assert o["length"] == 3 and o["pending"] == 2
    assert [(c["name"], c["pending"], c["heartbeat"]) for c in o["consumers"]] == [
        ("worker-1", 2, None), ("worker-2", 0, "alive"), ("worker-3", 0, "lapsed")]
    assert 0 <= o["oldest_age_s"] < 60 and o["dead_letters"] == 1
    assert st["hot"]["bytes"] > 0 and st["hot"]["threads"] == 1
    assert st["hot"]["keys"] == 11  # cp cv idx ns meta, outbox, dead letters, heartbeats,
    #                    binding, thread registry, gone (a new thread: no tombstone anywhere)
    assert st["durable"]["checkpoints"]["documents"] == 0
    assert st["schema"] == {"package": 1, "deployed": 1}
    text = cli("status").stdout
    assert "0 pending, idle" in text and "heartbeat alive" in text
    for label in ("outbox length", "consumer worker-1", "oldest unflushed entry",
                  "dead letters", "redis (hot tier)", "mongodb checkpoints", "schema version"):
        assert label in text

    out = cli("--claim-idle-s", "0.2", "flush").stdout  # claims worker-1's entries too
    assert out.startswith("flushed: 3 outbox entries were waiting")
    st = cli.json("status")
    assert (st["outbox"]["length"], st["outbox"]["pending"]) == (0, 0)
    assert st["outbox"]["oldest_age_s"] is None
    assert st["durable"]["checkpoints"]["documents"] == 3


def test_status_probe_exits_3_once_the_oldest_unflushed_entry_is_older_than_the_limit(
    cli: Cli,
) -> None:
    _put(cli, "p", 2)
    st = cli.json("status", "--probe", "--max-oldest-age-s", "3600")
    assert (st["outbox"]["length"], st["outbox"]["pending"]) == (2, 0)
    assert st["schema"] == {"package": 1, "deployed": 1} and st["exceeded"] == []
    assert "hot" not in st and "durable" not in st  # no key scan, no collection sizes
    wait_for(lambda: cli.json("status", "--probe")["outbox"]["oldest_age_s"] > 0.5, 30,
             "an outbox entry older than 0.5 s")
    late = cli("status", "--probe", "--json", "--max-oldest-age-s", "0.5", code=3)
    assert json.loads(late.stdout)["exceeded"][0].startswith("oldest unflushed entry ")
    assert "LIMIT EXCEEDED" in cli("status", "--probe", "--max-oldest-age-s", "0.5",
                                   code=3).stdout
    cli("flush")
    st = cli.json("status", "--probe", "--max-oldest-age-s", "0")  # exit 0: nothing waits
    assert (st["outbox"]["length"], st["outbox"]["oldest_age_s"], st["exceeded"]) == (
        0, None, [])


def test_status_verdict_and_its_exit_codes_with_fail_on(cli: Cli) -> None:
    _put(cli, "v", 2)  # entries wait, no flusher alive: failing
    st = cli.json("status", "--probe")  # the default --fail-on down: exit 0 as before
    assert st["health"]["verdict"] == "failing" and st["health"]["value"] == 2
    assert st["health"]["reasons"][0]["text"].startswith(
        "no flusher is alive and 2 outbox entries wait for MongoDB")
    out = cli("status", "--probe", "--fail-on", "failing", code=4).stdout
    assert "HEALTH" in out and "FAILING" in out and "no flusher is alive" in out
    cli("status", "--probe", "--fail-on", "degraded", code=4)
    cli("flush")  # drained; its flusher stopped: nothing waits, no flusher alive: degraded
    with cli.saver(flusher="off") as s:
        s.sync_clients.redis.xadd(dead_letter_key(s.context), {"entry": "1-0", "error": "x"})
    st = json.loads(cli("status", "--probe", "--json", "--fail-on", "degraded",
                        code=5).stdout)
    assert st["health"]["verdict"] == "degraded"
    assert [r["text"].split(": ")[0] for r in st["health"]["reasons"]] == [
        "no flusher is alive", f"1 dead letter(s) in {st['outbox']['dead_letter_stream']}"]
    cli("status", "--probe", "--fail-on", "failing")  # degraded: exit 0
    cli("status", "--probe", "--fail-on", "sometimes", code=1)


def _both_tiers(cli: Cli) -> tuple[dict, dict]:
    """Every Redis key of the test's prefix with its DUMP, and every MongoDB document of
    the test's database by collection."""
    r, mongo = redis.Redis.from_url(cli.redis_url), pymongo.MongoClient(cli.mongo_url)
    try:  # plain clients: a saver's start would write to both tiers itself
        db = mongo[cli.opts["database"]]
        keys = sorted(r.scan_iter(match="{" + cli.opts["key_prefix"] + "*"))
        redis_state = {k: r.dump(k) for k in keys}
        mongo_state = {name: sorted(map(repr, db[name].find({})))
                       for name in db.list_collection_names()}
    finally:
        r.close()
        mongo.close()
    return redis_state, mongo_state


def test_prune_dry_run_lists_what_would_go_and_changes_nothing(cli: Cli, t1: dict) -> None:
    _put(cli, "t2", 1)  # a thread with one checkpoint, left in the outbox
    before = _both_tiers(cli)
    out = cli("prune", "t1", "t2", "--dry-run").stdout  # no question asked
    lines = out.splitlines()
    assert lines[0].startswith("t1: 4 of 5 checkpoint(s) (ns '': 4), ")
    assert lines[1] == "t2: nothing (0 checkpoint(s) kept)"  # MongoDB holds none of it
    assert lines[2].startswith("dry run (keep_latest): would prune 1 of 2 thread(s): "
                               "4 checkpoint(s), ")
    assert lines[2].endswith("nothing was changed")
    assert lines[3].startswith("note: 1 outbox entry not yet in MongoDB are not counted")
    assert _both_tiers(cli) == before
    out = cli("prune", "--all", "--strategy", "delete", "--dry-run").stdout
    assert "t1: whole thread, 5 checkpoint(s)" in out
    assert "would prune 2 of 2 thread(s): 5 checkpoint(s)" in out  # t2: only in Redis
    assert _both_tiers(cli) == before
    assert len(cli.json("history", "t1")["checkpoints"]) == 5
    cli("prune", "t1", "--yes")  # the real prune drops what the dry run said
    assert [c["checkpoint_id"] for c in cli.json("history", "t1")["checkpoints"]] == \
        t1["ids"][:1]


def test_flusher_command_runs_the_worker_until_sigterm(cli: Cli) -> None:
    _put(cli, "w", 4)
    env = {**os.environ, **cli.env}
    proc = subprocess.Popen([sys.executable, "-m", "langgraph_durable.cli", "flusher"],
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        wait_for(lambda: not cli.json("status")["outbox"]["length"], 30, "an empty outbox",
                 pause_s=0.1)
        assert cli.json("status")["durable"]["checkpoints"]["documents"] == 4
    finally:
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=30)
    assert proc.returncode == 0, err
    assert "4 entries" in out


def test_prune_and_delete_ask_first_then_act(cli: Cli, t1: dict) -> None:
    r = cli("prune", "t1", code=1)  # no terminal answer: aborted, nothing done
    assert "Aborted" in r.output
    cli("prune", "t1", input="n\n", code=1)
    assert len(cli.json("history", "t1")["checkpoints"]) == 5
    r = cli("prune", "t1", input="y\n")
    assert "pruned 1 thread(s) (keep_latest)" in r.stdout
    assert [c["checkpoint_id"] for c in cli.json("history", "t1")["checkpoints"]] == \
        [t1["ids"][0]]
    cli("prune", "--strategy", "sideways", "t1", "--yes", code=1)
    _put(cli, "other", 2)
    r = cli("delete", "t1", "other", code=1)
    assert "Aborted" in r.output
    r = cli("delete", "t1", "other", "--yes")
    assert "deleted 2 thread(s)" in r.stdout and "deleting" in r.stderr  # progress bar
    assert cli.json("threads")["threads"] == []
    cli("delete", code=2)  # usage error: no thread named


def test_prune_all_threads(cli: Cli, t1: dict) -> None:
    _put(cli, "x", 3)
    cli("prune", "--all", "--yes")
    rows = {r["thread_id"]: r["checkpoints"] for r in cli.json("threads")["threads"]}
    assert rows == {"t1": 1, "x": 1}


def test_copy_duplicates_a_thread(cli: Cli, t1: dict) -> None:
    cli("copy", "t1", "t1-copy")
    src = cli.json("history", "t1")["checkpoints"]
    dst = cli.json("history", "t1-copy")["checkpoints"]
    assert [c["checkpoint_id"] for c in dst] == [c["checkpoint_id"] for c in src]
    assert cli.json("show", "t1-copy")["channel_values"] == \
        cli.json("show", "t1")["channel_values"]
    cli("copy", "t1", "t1-copy", code=1)  # exists: asks, no answer aborts
    cli("copy", "t1", "t1-copy", "--yes")
    r = cli("copy", "missing", "x", code=1)
    assert r.stderr == "error: thread 'missing' not found\n"


def test_fork_makes_a_thread_that_resumes_from_the_checkpoint(cli: Cli, t1: dict) -> None:
    step1 = t1["ids"][2]  # after "a": next is "b"
    r = cli("fork", "t1", "--checkpoint", step1, "--to", "f1")
    assert r.stdout.startswith(f"forked t1@{step1} -> f1@")
    shown = cli.json("show", "f1")
    src = cli.json("show", "t1", "--checkpoint", step1)
    assert shown["channel_values"] == src["channel_values"]
    assert shown["metadata"]["source"] == "fork" and shown["metadata"]["step"] == 1
    assert shown["metadata"]["forked_from_checkpoint"] == step1
    assert [w["channel"] for w in shown["pending_writes"]] == \
        [w["channel"] for w in src["pending_writes"]]
    with cli.saver() as s:
        graph = build_graph(s)
        final = graph.invoke(None, {"configurable": {"thread_id": "f1"}})
        hist = [h.metadata["source"] for h in
                graph.get_state_history({"configurable": {"thread_id": "f1"}})]
    assert final == t1["final"]
    assert hist[-1] == "fork" and len(hist) == 3  # the fork, then "c"
    assert cli("fork", "t1", "--checkpoint", step1, "--to", "f1", code=1).stderr == \
        "error: thread 'f1' already exists; delete it or choose another name\n"
    cli("fork", "t1", "--checkpoint", "nope", "--to", "f2", code=1)


def test_fork_with_set_stores_the_edited_channel_value_and_resumes_from_it(
        cli: Cli, t1: dict) -> None:
    step1 = t1["ids"][2]  # after "a": count 1, next is "b"
    r = cli("fork", "t1", "--checkpoint", step1, "--to", "e1", "--set", "count=10")
    assert r.stdout.endswith(", count set)\n")
    shown = cli.json("show", "e1")
    assert shown["channel_values"]["count"] == 10
    assert shown["channel_values"]["notes"] == {"a": 1}
    with cli.saver() as s:
        final = build_graph(s).invoke(None, {"configurable": {"thread_id": "e1"}})
    assert final["count"] == 12 and final["notes"] == {"a": 1, "b": 11, "c": 12}
    assert cli("fork", "t1", "--checkpoint", step1, "--to", "e2", "--set", "nope=1",
               code=1).stderr.startswith(f"error: checkpoint {step1!r} of thread 't1' "
                                         "(ns '') has no channel 'nope' to edit")
    assert cli("fork", "t1", "--checkpoint", step1, "--to", "e2", "--set", "count",
               code=1).stderr == "error: --set expects channel=JSON, got 'count'\n"
    assert cli("fork", "t1", "--checkpoint", step1, "--to", "e2", "--set", "count=ten",
               code=1).stderr.startswith("error: --set count: the value is not JSON (")
    assert cli("show", "e2", code=1).stderr == "error: thread 'e2' (ns '') not found\n"


def test_fork_keeps_an_interrupt_pending(cli: Cli) -> None:
    from langgraph.types import Command

    with cli.saver() as s:
        graph = build_graph(s, ask=True)
        graph.invoke(first_input(), {"configurable": {"thread_id": "q"}})
    latest = cli.json("show", "q")
    cli("fork", "q", "--checkpoint", latest["checkpoint_id"], "--to", "q2")
    assert cli.json("show", "q2")["interrupts"] == latest["interrupts"]
    with cli.saver() as s:
        graph = build_graph(s, ask=True)
        out = graph.invoke(Command(resume="yes"), {"configurable": {"thread_id": "q2"}})
    assert out["notes"]["answer"] == "yes" and out["log"] == ["a", "b", "c", "ask"]


def test_gc_removes_unreferenced_blobs(cli: Cli, tmp_path: Path) -> None:
    from langgraph_durable.serde import ExternalRefSerializer, LocalBlobStore

    store = LocalBlobStore(tmp_path / "blobs")
    with cli.saver(serde=ExternalRefSerializer(store=store, threshold_bytes=300)) as s:
        for thread in ("keep", "drop"):
            cp = empty_checkpoint()
            cp["channel_values"] = {"big": (thread * 100).encode()}
            cp["channel_versions"] = {"big": "1"}
            s.put({"configurable": {"thread_id": thread, "checkpoint_ns": ""}}, cp, {},
                  {"big": "1"})
    assert len(list(store.list_keys())) == 2
    cli("delete", "drop", "--yes")
    spec = ["--blob-store", str(tmp_path / "blobs")]
    r = cli(*spec, "gc", "--grace-period-s", "0", "--dry-run")
    assert "would delete 1" in r.stdout and len(list(store.list_keys())) == 2
    cli(*spec, "gc", "--grace-period-s", "0", code=1)  # asks first
    r = cli(*spec, "gc", "--grace-period-s", "0", "--yes")
    assert "deleted 1" in r.stdout and "kept 1 referenced" in r.stdout
    assert len(list(store.list_keys())) == 1
    shown = cli.json(*spec, "show", "keep")  # decoded through the store
    assert shown["channel_values"]["big"] == {"$bytes": __import__("base64").b64encode(
        b"keep" * 100).decode()}
    undecodable = cli.json("show", "keep")["channel_values"]["big"]  # no store given
    assert undecodable["$type"] == "Undecodable" and undecodable["type"] == "extref"
    r = cli("gc", code=1)
    assert r.stderr.startswith("error: gc needs the blob store")


def _to_v0(cli: Cli) -> None:
    with cli.saver(flusher="off") as s:
        ungroup(s)  # v0 stored one document per write
        db, cols = s.sync_clients.db, s.context.collections
        for d in db[cols.checkpoints].find():
            md = s.serde.loads_typed((d["metadata_type"], bytes(d["metadata"])))
            keep = {k: v for k, v in d.items() if k not in ("checkpoint", "metadata_type",
                                                            "md", "run_id", "metadata")}
            db[cols.checkpoints].replace_one({"_id": d["_id"]}, {
                **keep, "v": 0, "checkpoint_bytes": d["checkpoint"], "metadata": md})
        db[cols.blobs].update_many({}, {"$set": {"v": 0}})
        db[cols.writes].update_many({}, {"$set": {"v": 0}})


def test_migrate_rewrites_old_documents_resumably(cli: Cli, t1: dict) -> None:
    before = cli.json("show", "t1")
    with cli.saver() as s:
        s.sync_clients.redis.delete(*s.context.keys("t1").all)
    _to_v0(cli)
    assert cli.json("show", "t1") == before  # read through the chain
    r = cli("migrate", "--dry-run")
    assert r.stdout.startswith("schema version 1: ")
    total = int(r.stdout.split(": ")[1].split()[0])
    assert total > 10
    r = cli("migrate", "--batch-size", "3", "--max-batches", "2")
    assert r.stdout.splitlines()[-1].startswith("rewrote 5 documents (checkpoints 5, blobs 0")
    r = cli("migrate", "--batch-size", "3")
    assert f"{total - 5} older documents" in r.stdout
    assert r.stdout.splitlines()[1].startswith(f"rewrote {total - 5} documents")
    assert "migrating" in r.stderr  # the progress bar
    assert cli("migrate").stdout.splitlines()[0] == "schema version 1: 0 older documents " \
        "(checkpoints 0, blobs 0, writes 0)"
    assert cli.json("show", "t1") == before
    with cli.saver(flusher="off") as s:
        db = s.sync_clients.db
        db[s.context.collections.checkpoints].update_one({}, {"$set": {"v": 99}})
    r = cli("migrate", code=1)
    assert r.stderr.startswith("error: 1 checkpoints documents (e.g. ") \
        and "version 99" in r.stderr
    assert r.stderr.count("\n") == 1


def test_write_concern_options(cli: Cli, t1: dict) -> None:
    r = cli("--write-concern-w", "0", "threads", code=1)
    assert r.stderr.startswith("error: invalid option --write-concern-w:")
    assert "'majority' or a number from 1 to 50" in r.stderr and r.stderr.count("\n") == 1
    r = cli("--write-concern-w", "all", "threads", code=1)
    assert r.stderr.startswith("error: invalid option --write-concern-w:")
    cli("--write-concern-w", "1", "--no-write-concern-j", "copy", "t1", "t1-copy")
    assert "t1-copy" in cli("threads").stdout
    # the option reaches MongoDB: one server cannot satisfy w=3
    r = cli("--write-concern-w", "3", "--write-concern-timeout-s", "0.2", "copy", "t1", "t1-x",
            code=1)
    assert "Not enough data-bearing nodes" in r.stderr and r.stderr.count("\n") == 1


def test_gc_refuses_when_no_thread_refers_to_any_object_of_the_store(
        cli: Cli, tmp_path: Path) -> None:
    """A store shared with another app (or a misspelled prefix/database): this namespace
    refers to nothing, so gc would delete everything; it refuses without --force."""
    from langgraph_durable.serde import ExternalRefSerializer, LocalBlobStore

    store = LocalBlobStore(tmp_path / "shared")
    other = Cli(cli.redis_url, cli.mongo_url)  # another app: own prefix and database
    with other.saver(serde=ExternalRefSerializer(store=store, threshold_bytes=300)) as s:
        cp = empty_checkpoint()
        cp["channel_values"] = {"big": b"x" * 1000}
        cp["channel_versions"] = {"big": "1"}
        s.put({"configurable": {"thread_id": "theirs", "checkpoint_ns": ""}}, cp, {},
              {"big": "1"})
    spec = ["--blob-store", str(tmp_path / "shared")]
    r = cli(*spec, "gc", "--grace-period-s", "0", "--yes", code=1)
    assert "refers to any object" in r.stderr and "--force" in r.stderr
    assert len(list(store.list_keys())) == 1  # nothing deleted
    r = cli(*spec, "gc", "--grace-period-s", "0", "--yes", "--force")
    assert "deleted 1" in r.stdout and list(store.list_keys()) == []


def test_prune_all_with_named_threads_is_an_error_and_threads_count_once(
        cli: Cli, t1: dict) -> None:
    r = cli("prune", "--all", "t1", "--yes", code=1)
    assert r.stderr == "error: name threads or pass --all, not both (nothing done)\n"
    assert cli("delete", "t1", "t1", "--yes").stdout == "deleted 1 thread(s)\n"


def test_fork_takes_a_step_number_or_an_id_prefix_like_show(cli: Cli, t1: dict) -> None:
    cli("fork", "t1", "--checkpoint", "1", "--to", "f1")
    assert cli.json("show", "f1")["metadata"]["forked_from_checkpoint"] == \
        cli.json("show", "t1", "1")["checkpoint_id"]
    oldest = t1["ids"][-1]
    cli("fork", "t1", "--checkpoint", oldest[:13], "--to", "f2")
    assert cli.json("show", "f2")["metadata"]["forked_from_checkpoint"] == oldest
    r = cli("fork", "nosuch", "--checkpoint", "1", "--to", "f3", code=1)
    assert r.stderr == "error: thread 'nosuch' not found\n"


def _writes_of(col: Any, *channels: str) -> list[dict]:
    """The pending writes the writes collection ``col`` holds (of a document per write or
    per call), of ``channels`` (all when none is named)."""
    out = [w for d in col.find() for w in d.get("writes", [d])]
    return [w for w in out if not channels or w["channel"] in channels]


def test_migrate_converts_whole_lists_to_manifests(cli: Cli,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """A thread written with whole lists (list_items=False): ``migrate`` stores its list
    values as manifests over items (MongoDB only), reads stay the same, a second run
    converts nothing; ``--dry-run`` counts only."""
    # written as before inline values (every value a blobs document, which migrate reads)
    monkeypatch.setattr(inline, "INLINE_MAX_BYTES", -1)
    with cli.saver(list_items=False) as s:
        build_graph(s, ask=True).invoke(first_input(), {"configurable": {"thread_id": "w"}})
        s.flush()
        s.sync_clients.redis.delete(*s.context.keys("w").all)
        db, cols = s.sync_clients.db, s.context.collections
        # messages: 4 blob versions and 4 writes (start, a, b, c); log: 3 blob versions
        # and 3 writes (a, b, c; the input's empty list stays as it is); the interrupt
        lists = 4 + 4 + 3 + 3 + 1
        assert db[cols.blobs].count_documents({"channel": {"$in": ["messages", "log"]},
                                               "type": {"$ne": "empty"}}) == 4 + 3 + 1
        assert len(_writes_of(db[cols.writes], "messages", "log", "__interrupt__")) == \
            4 + 3 + 1 + 1
    # documents: 7 blobs; 5 writes documents (one per call: the input, a, b, c, ask's
    # interrupt), a and b and c each holding two lists
    docs = 7 + 5
    before = cli.json("show", "w")
    r = cli("migrate", "--dry-run")
    assert r.stdout.splitlines()[-3].startswith(f"list values: would convert {docs} of ")
    assert r.stdout.splitlines()[-2:] == [
        "writes: would regroup 0 per-write documents into 0 documents of one call",
        "retired indexes: would drop 0"]
    r = cli("migrate", "--batch-size", "4")
    assert r.stdout.splitlines()[0].startswith("schema version 1: 0 older documents")
    assert r.stdout.splitlines()[-3].startswith(f"list values: converted {docs} of ")
    assert "converting lists" in r.stderr  # the progress bar
    with cli.saver() as s:
        db, cols = s.sync_clients.db, s.context.collections
        assert db[cols.blobs].count_documents({"type": "lgd.items"}) + len(
            [w for w in _writes_of(db[cols.writes]) if w["type"] == "lgd.items"]) == lists
        # 4 messages (hello, a, b, c says ...), "a", "b", "c", the Interrupt
        assert db[cols.items].count_documents({"thread_id": "w"}) == 8
        s.sync_clients.redis.delete(*s.context.keys("w").all)
    assert cli.json("show", "w") == before
    r = cli("migrate")
    assert r.stdout.splitlines()[-3].startswith("list values: converted 0 of ")
    with cli.saver(list_items=False) as s:
        assert s.get_tuple({"configurable": {"thread_id": "w"}}) is not None


def test_registry_shows_each_partitions_state_and_rebuild_makes_it_complete(
        cli: Cli) -> None:
    _put(cli, "s", 2)
    with cli.saver(flusher="off") as s:
        reg = s.context.registries[0]
        s.sync_clients.redis.hset(reg, "\x00epoch", "partial x")
    assert cli.json("registry") == [{"key": reg, "state": "partial", "threads": 1}]
    r = cli("registry", "--rebuild")
    assert "registered 1 threads of both tiers" in r.stderr
    assert "complete" in r.stdout
    assert cli.json("registry") == [{"key": reg, "state": "complete", "threads": 1}]


def test_migrate_drops_the_summaries_thread_id_index_that_earlier_releases_made(
        cli: Cli, t1: dict) -> None:
    """The thread summaries are found by ``_id``: ``setup()`` no longer makes their
    ``thread_id`` index, and ``migrate`` drops the one an earlier release made (after a
    dry run that only names it); a second ``migrate`` finds none."""
    with cli.saver(flusher="off") as s:
        db_name, threads = s.sync_clients.db.name, s.context.collections.threads
    name = f"{threads}.thread_id"
    client: pymongo.MongoClient[dict[str, Any]] = pymongo.MongoClient(cli.mongo_url)
    coll = client[db_name][threads]
    assert sorted(ix["name"] for ix in coll.list_indexes()) == ["_id_", "u"]
    coll.create_index([("thread_id", 1)], name="thread_id")  # as releases before made it
    r = cli("migrate", "--dry-run")
    assert r.stdout.splitlines()[-1] == f"retired indexes: would drop 1 ({name})"
    assert "thread_id" in {ix["name"] for ix in coll.list_indexes()}
    r = cli("migrate")
    assert r.stdout.splitlines()[-1] == f"retired indexes: dropped 1 ({name})"
    assert sorted(ix["name"] for ix in coll.list_indexes()) == ["_id_", "u"]
    assert cli("migrate").stdout.splitlines()[-1] == "retired indexes: dropped 0"
    assert [t["thread_id"] for t in cli.json("threads")["threads"]] == ["t1"]
    client.close()
