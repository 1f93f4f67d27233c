"""``history``'s run columns: the node(s) that made each checkpoint (a ``Send`` resolved
to its node), the step's duration, what runs next and the node that failed with its
error, at 120 columns (issue 36: it broke there) and in JSON."""

from __future__ import annotations

import datetime
import re

import pytest
from langchain_core.messages import HumanMessage
from langgraph.types import Command

from langgraph_durable.inspection import runview

from ..run_graphs import send_graph
from .clikit import Cli, build_graph, first_input


def _run(cli: Cli) -> None:
    with cli.saver() as s:
        graph = send_graph(s)
        graph.invoke({"messages": [HumanMessage("Oslo", id="h-1")]},
                     {"configurable": {"thread_id": "oslo"}})
        with pytest.raises(ValueError, match="Atlantis"):
            graph.invoke({"messages": [HumanMessage("Atlantis", id="h-1")]},
                         {"configurable": {"thread_id": "atlantis"}})


def test_history_names_the_nodes_durations_and_failures_in_json(cli: Cli) -> None:
    _run(cli)
    rows = cli.json("history", "oslo")["checkpoints"]
    assert [r["step"] for r in rows] == [3, 2, 1, 0, -1]
    assert [r["ran"] for r in rows] == [["agent"], ["weather_tool"], ["agent"],
                                        ["__start__"], ["input"]]
    assert [r["next"] for r in rows] == [[], ["agent"], ["weather_tool"], ["agent"],
                                         ["__start__"]]
    assert rows[1]["wrote"] == ["log", "messages"]  # internal channels left out
    every = cli.json("history", "oslo", "--all-channels")["checkpoints"]
    assert "branch:to:agent" in every[1]["wrote"]
    assert "__pregel_tasks" in every[2]["wrote"]  # the agent's Send
    ts = {r["checkpoint_id"]: datetime.datetime.fromisoformat(r["ts"]) for r in rows}
    for r in rows:
        want = None if r["parent"] is None else (ts[r["checkpoint_id"]]
                                                 - ts[r["parent"]]).total_seconds()
        assert r["duration_s"] == (want if want is None else pytest.approx(want))
    failed = cli.json("history", "atlantis")["checkpoints"]
    assert failed[0]["step"] == 1 and failed[0]["next"] == ["weather_tool"]
    assert failed[0]["failed"] == [{"node": "weather_tool", "error": failed[0]["failed"][0][
        "error"]}]
    assert "the weather service does not know Atlantis" in failed[0]["failed"][0]["error"]


def test_history_at_120_columns_shows_node_duration_and_failure(cli: Cli) -> None:
    _run(cli)
    cli.env["COLUMNS"] = "120"
    for thread in ("oslo", "atlantis"):
        lines = cli("history", thread).stdout.splitlines()
        assert max(len(line) for line in lines) <= 120, lines
        assert not any("…" in line for line in lines), lines
        rows = [line for line in lines if re.search(r"\d\d:\d\d:\d\dZ", line)]
        assert len(rows) == (5 if thread == "oslo" else 3)
        head = next(line for line in lines if "checkpoint_id" in line).split()
        assert head[:3] == ["checkpoint_id", "parent", "step"] and "ran" in head
        assert "Δt" in head and "next" in head
        assert "Send" not in "\n".join(lines)
    text = cli("history", "oslo").stdout
    assert re.search(r"\sweather_tool\s+.*\d\.\d+ m?s\s+agent\s", text), text
    text = cli("history", "atlantis").stdout
    assert "weather_tool FAILED" in text
    assert re.search(r"^step 1 \(\S+\): weather_tool failed: .*Atlantis", text, re.M), text


def test_a_push_task_is_named_by_langgraph_s_task_id_without_decoding_values(
        cli: Cli) -> None:
    """The cheap path: the Send's node is found by recomputing the task id for each node
    name the checkpoints know, not by decoding the ``__pregel_tasks`` value."""
    _run(cli)
    with cli.saver() as s:
        page = runview.read_page(s, "oslo")
        step1 = next(t for t in page.tuples if t.metadata["step"] == 1)
        assert step1.checkpoint["channel_values"] == {}  # nothing decoded
        cid = step1.config["configurable"]["checkpoint_id"]
        paths = page.paths[cid]
        assert any(p.startswith(runview.PUSH) for _t, _c, p in paths)
        tasks = runview.tasks_of(step1, paths, {"agent", "weather_tool"})
        assert [(t.node, t.kind) for t in tasks] == [("weather_tool", "push")]
        assert [t.node for t in runview.tasks_of(step1, paths, {"agent"})] == ["Send"]


def test_an_interrupted_node_is_named_with_the_interrupt_s_value(cli: Cli) -> None:
    with cli.saver() as s:
        build_graph(s, ask=True).invoke(first_input(), {"configurable": {"thread_id": "q"}})
    latest = cli.json("history", "q")["checkpoints"][0]
    assert latest["next"] == ["ask"] and latest["failed"] == []
    assert [i["node"] for i in latest["interrupted"]] == ["ask"]
    assert "publish?" in latest["interrupted"][0]["value"]
    assert latest["ran"] == ["c"]


def test_history_names_a_resume_value_input_not_a_task_id(cli: Cli) -> None:
    with cli.saver() as s:
        graph = build_graph(s, ask=True)
        cfg = {"configurable": {"thread_id": "asked"}}
        graph.invoke(first_input(), cfg)
        graph.invoke(Command(resume="yes"), cfg)
    rows = cli.json("history", "asked")["checkpoints"]
    # the last step ran "ask" on the resume value, which no task wrote (LangGraph's
    # null task id): named "(input)", not the id's first 8 characters "00000000"
    assert rows[0]["ran"] == ["(input)", "ask"]
    assert not any("00000000" in name for r in rows for name in r["ran"])
