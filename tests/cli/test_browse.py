"""threads, history, show, diff (read-only) and one-line errors, end to end."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

from langgraph.checkpoint.base import empty_checkpoint

from .clikit import Cli, build_graph, first_input


def test_threads_counts_both_tiers_and_filters_on_metadata(cli: Cli, t1: dict) -> None:
    with cli.saver() as s:  # t3: in MongoDB only
        s.put({"configurable": {"thread_id": "t3", "checkpoint_ns": ""}}, empty_checkpoint(),
              {"step": 7, "source": "input"}, {})
        s.flush()
        s.sync_clients.redis.delete(*s.context.keys("t3").all)
    with cli.saver(flusher="off") as s:  # t2: two checkpoints in Redis only, never flushed
        cfg: Any = {"configurable": {"thread_id": "t2", "checkpoint_ns": ""}}
        for n in range(2):
            cfg = s.put(cfg, empty_checkpoint(), {"step": n, "source": "loop"}, {})
    rows = {r["thread_id"]: r for r in cli.json("threads")["threads"]}
    assert set(rows) == {"t1", "t2", "t3"}
    assert rows["t1"]["checkpoints"] == len(t1["ids"]) == 5
    assert (rows["t1"]["step"], rows["t1"]["source"]) == (3, "loop")
    assert rows["t1"]["latest"] == t1["ids"][0]
    assert rows["t1"]["hot_bytes"] > 0 and rows["t1"]["durable_bytes"] > 0
    assert (rows["t2"]["checkpoints"], rows["t2"]["step"], rows["t2"]["durable_bytes"]) == (2, 1, 0)
    assert (rows["t3"]["checkpoints"], rows["t3"]["step"], rows["t3"]["hot_bytes"]) == (1, 7, 0)
    assert rows["t1"]["updated"].endswith("+00:00")
    only = cli.json("threads", "--where", "user=alice")["threads"]
    assert [r["thread_id"] for r in only] == ["t1"]
    assert [r["thread_id"] for r in cli.json("threads", "--where", "step=7")["threads"]] == ["t3"]
    assert len(cli.json("threads", "--limit", "1")["threads"]) == 1
    table = cli("threads").stdout
    assert "t1" in table and "updated (UTC)" in table and "KiB" in table


def test_history_is_newest_first_and_paged(cli: Cli, t1: dict) -> None:
    page1 = cli.json("history", "t1", "--limit", "2")
    ids = [c["checkpoint_id"] for c in page1["checkpoints"]]
    assert ids == t1["ids"][:2] and page1["next_before"] == ids[-1]
    page2 = cli.json("history", "t1", "--limit", "2", "--before", ids[-1])
    assert [c["checkpoint_id"] for c in page2["checkpoints"]] == t1["ids"][2:4]
    rows = cli.json("history", "t1")["checkpoints"]
    assert [r["step"] for r in rows] == [3, 2, 1, 0, -1]
    assert [r["source"] for r in rows][-1] == "input"
    assert all(r["parent"] == nxt["checkpoint_id"] for r, nxt in zip(rows, rows[1:]))
    with cli.saver() as s:
        tuples = list(s.list({"configurable": {"thread_id": "t1"}}))
    assert [r["writes"] for r in rows] == [len(t.pending_writes or []) for t in tuples]
    text = cli("history", "t1", "--limit", "2").stdout
    assert f"next page: --before {ids[-1]}" in text and "checkpoint_id" in text


def test_show_decodes_values_pending_writes_and_interrupts(cli: Cli, t1: dict) -> None:
    latest = cli.json("show", "t1")
    assert latest["checkpoint_id"] == t1["ids"][0]
    assert latest["channel_values"]["notes"] == {"a": 1, "b": 2, "c": 3}
    msgs = latest["channel_values"]["messages"]
    assert [(m["type"], m["id"]) for m in msgs] == [("human", "h-0"), ("ai", "a-1"),
                                                   ("ai", "b-2"), ("ai", "c-3")]
    older = cli.json("show", "t1", "--checkpoint", t1["ids"][2])
    assert older["metadata"]["step"] == 1 and older["pending_writes"]
    assert {w["channel"] for w in older["pending_writes"]} >= {"messages", "notes", "count"}
    with cli.saver() as s:
        graph = build_graph(s, ask=True)
        graph.invoke(first_input(), {"configurable": {"thread_id": "q"}})
    waiting = cli.json("show", "q")
    assert waiting["interrupts"][0]["value"] == {"question": "publish?", "count": 3}
    text = cli("show", "q").stdout
    assert "channel values" in text and "pending writes" in text and "interrupts:" in text


def test_diff_names_messages_and_keys(cli: Cli, t1: dict) -> None:
    step0, step3 = t1["ids"][3], t1["ids"][0]
    d = cli.json("diff", "t1", step0, step3)
    assert d["steps"] == [0, 3]
    rows = {r["channel"]: r for r in d["channels"]}
    assert rows["messages"]["added"] == ["ai a-1", "ai b-2", "ai c-3"]
    assert rows["messages"]["removed"] == [] and rows["messages"]["count"] == [1, 4]
    assert rows["notes"]["added"] == ["a", "b", "c"] and rows["notes"]["kind"] == "dict"
    assert rows["count"]["before"] == "0" and rows["count"]["after"] == "3"
    step1 = t1["ids"][2]
    back = {r["channel"]: r for r in cli.json("diff", "t1", step3, step1)["channels"]}
    assert back["messages"]["removed"] == ["ai b-2", "ai c-3"]
    assert back["notes"]["removed"] == ["b", "c"]
    text = cli("diff", "t1", step0, step3).stdout
    assert "added 3 (ai a-1, ai b-2, ai c-3)" in text
    assert "no channel changed" in cli("diff", "t1", step3, step3).stdout


def test_errors_are_one_line_and_exit_non_zero(cli: Cli, t1: dict) -> None:
    r = cli("show", "nope", code=1)
    assert r.stderr == "error: thread 'nope' (ns '') not found\n"
    r = cli("history", "nope", code=1)
    assert r.stderr.count("\n") == 1 and "not found" in r.stderr
    r = cli("--flush-batch-size", "0", "threads", code=1)
    assert r.stderr.startswith("error: invalid option --flush-batch-size:")
    assert r.stderr.count("\n") == 1
    cli.env = {**cli.env, "REDIS_URL": "redis://127.0.0.1:1/0"}
    r = cli("--socket-timeout-s", "0.5", "show", "t1", code=1)
    assert r.stderr.startswith("error: hot tier (Redis) at 127.0.0.1:1 did not answer")
    assert r.stderr.count("\n") == 1
    cli.env = {k: v for k, v in cli.env.items() if k != "REDIS_URL"}
    r = cli("status", code=1)
    assert r.stderr == ("error: --redis-url and --mongo-url (or REDIS_URL and MONGODB_URL) "
                        "are required\n")


def test_console_script_and_module_entry_points(cli: Cli, t1: dict) -> None:
    script = Path(sys.executable).parent / "langgraph-durable"
    argv = [str(script)] if script.exists() else [sys.executable, "-m", "langgraph_durable.cli"]
    env = {**cli.env, "PATH": str(Path(sys.executable).parent)}
    out = subprocess.run([*argv, "history", "t1", "--json"], capture_output=True, text=True,
                         env=env, timeout=120)
    assert out.returncode == 0, out.stderr
    assert t1["ids"][0] in out.stdout
    out = subprocess.run([sys.executable, "-m", "langgraph_durable.cli", "show", "nope"],
                         capture_output=True, text=True, env=env, timeout=120)
    assert out.returncode == 1 and out.stderr.startswith("error: thread 'nope'")
