"""``resume``, ``retry``, ``audit`` and ``threads --status`` against real servers, their
one-line errors, and the dashboard's ``/act`` refused without writes, token or CSRF."""

from __future__ import annotations

import urllib.error
import urllib.parse
import urllib.request
from typing import Any

import pytest

from langgraph_durable.dashboard import create_app

from .. import action_graphs
from ..test_dashboard import Served
from .clikit import Cli, first_input

APPROVAL = "tests.action_graphs:approval"
FLAKY = "tests.action_graphs:flaky"
TWO = "tests.action_graphs:two_asks"


def _run(cli: Cli, graph: Any, thread: str, data: Any) -> None:
    with cli.saver() as saver:
        try:
            graph.copy(update={"checkpointer": saver}).invoke(
                data, {"configurable": {"thread_id": thread}})
        except RuntimeError:
            pass  # the flaky node failed: the thread keeps its error


def _statuses(cli: Cli, status: str) -> list[str]:
    return [r["thread_id"] for r in cli.json("threads", "--status", status)["threads"]]


def test_resume_answers_the_interrupt_and_runs_to_the_end(cli: Cli, t1: dict) -> None:
    _run(cli, action_graphs.approval, "ask-1", first_input())
    assert _statuses(cli, "interrupted") == ["ask-1"]
    assert _statuses(cli, "done") == ["t1"]
    r = cli("resume", "ask-1", "--graph", APPROVAL, "--value", '{"ok": true}')
    assert r.stdout.startswith("resumed ask-1: now done at step 4 (checkpoint ")
    with cli.saver() as saver:
        state = action_graphs.approval.copy(update={"checkpointer": saver}).get_state(
            {"configurable": {"thread_id": "ask-1"}})
    assert state.values["notes"]["answer"] == {"ok": True} and state.next == ()
    assert "lgd_graph" not in state.metadata  # the CLI stamps no name of its own
    entries = cli.json("audit", "--thread", "ask-1")["entries"]
    assert [(e["action"], e["state"], e["via"]) for e in entries] == [
        ("resume", "done", "cli")]
    assert entries[0]["result"]["status"] == "done" and entries[0]["who"].startswith("cli:")
    assert entries[0]["graph"] == APPROVAL
    assert list(entries[0]["input"]["answers"].values()) == [{"ok": True}]
    table = cli("audit").stdout
    assert "ask-1" in table and "resume" in table and "done at step 4" in table


def test_resume_and_retry_errors_are_one_line(cli: Cli, t1: dict) -> None:
    _run(cli, action_graphs.approval, "ask-2", first_input())
    cases = [
        (["resume", "nope", "--graph", APPROVAL, "--value", "1"], "not found"),
        (["resume", "t1", "--graph", APPROVAL, "--value", "1"],
         "error: thread 't1' is done, nothing pending to resume"),
        (["resume", "ask-2", "--graph", APPROVAL, "--value", "yes please"],
         "error: the value is not JSON"),
        (["resume", "ask-2", "--graph", APPROVAL, "--value", "1", "--interrupt-id", "bogus"],
         "error: interrupt bogus is not pending in thread 'ask-2' (pending: "),
        (["resume", "ask-2", "--graph", "tests.action_graphs:nothing", "--value", "1"],
         "error: --graph 'tests.action_graphs:nothing' cannot be imported"),
        (["resume", "ask-2", "--graph", "tests.action_graphs:FAILING", "--value", "1"],
         "error: --graph 'tests.action_graphs:FAILING' is a set, not a compiled"),
        (["retry", "ask-2", "--graph", APPROVAL],
         "error: thread 'ask-2' is interrupted, cannot retry: it waits for an answer"),
        (["retry", "t1", "--graph", APPROVAL], "error: thread 't1' is done, cannot retry"),
        (["threads", "--status", "sleepy"], "error: --status must be one of running, "),
    ]
    for argv, start in cases:
        r = cli(*argv, code=1)
        assert r.stderr.count("\n") == 1 and r.stderr.startswith("error: "), r.stderr
        assert start in r.stderr, (argv, r.stderr)
    assert _statuses(cli, "interrupted") == ["ask-2"]  # nothing ran
    refused = cli.json("audit", "--thread", "ask-2")["entries"]
    # those checked against the thread are recorded (a bad value or graph is not)
    assert [(e["action"], e["state"]) for e in refused] == [("retry", "refused"),
                                                            ("resume", "refused")]
    assert refused[1]["error"].startswith("interrupt bogus is not pending")


def test_retry_runs_a_failed_thread_again_from_its_latest_checkpoint(cli: Cli) -> None:
    action_graphs.FAILING.add("flaky-1")
    _run(cli, action_graphs.flaky, "flaky-1", {"count": 0})
    assert _statuses(cli, "error") == ["flaky-1"]
    r = cli("retry", "flaky-1", "--graph", FLAKY)
    assert r.stdout.startswith("retried flaky-1: now done at step 2")
    assert _statuses(cli, "done") == ["flaky-1"]
    with cli.saver() as saver:
        assert saver.get_tuple({"configurable": {"thread_id": "flaky-1"}}
                               ).checkpoint["channel_values"]["count"] == 11
    # a retry that fails again is an error line, recorded as failed
    action_graphs.FAILING.add("flaky-2")
    _run(cli, action_graphs.flaky, "flaky-2", {"count": 0})
    action_graphs.FAILING.add("flaky-2")
    r = cli("retry", "flaky-2", "--graph", FLAKY, code=1)
    assert r.stderr == ("error: the run of thread 'flaky-2' failed: RuntimeError: flaky "
                        "failed on flaky-2\n")
    entry = cli.json("audit", "--thread", "flaky-2")["entries"][0]
    assert entry["state"] == "failed" and entry["result"]["status"] == "error"


def test_several_interrupts_are_answered_by_id(cli: Cli) -> None:
    _run(cli, action_graphs.two_asks(), "two", {})
    r = cli("resume", "two", "--graph", TWO, "--value", '"a"', code=1)
    assert r.stderr.startswith("error: 2 interrupts are pending in thread 'two': give the "
                               "interrupt id (one of ")
    with cli.saver() as saver:
        tup = saver.get_tuple({"configurable": {"thread_id": "two"}})
        ids = [i.id for _t, ch, v in tup.pending_writes if ch == "__interrupt__" for i in v]
    assert len(ids) == 2
    out = cli("resume", "two", "--graph", TWO, "--value", '"L"', "--interrupt-id", ids[0])
    assert "now interrupted" in out.stdout  # the other one still waits
    out = cli("resume", "two", "--graph", TWO, "--value", '"R"', "--interrupt-id", ids[1])
    assert "now done" in out.stdout
    with cli.saver() as saver:
        values = saver.get_tuple({"configurable": {"thread_id": "two"}}
                                 ).checkpoint["channel_values"]
    assert sorted(values["answers"]) in (["left=L", "right=R"], ["left=R", "right=L"])


def _post(url: str, form: dict[str, str], headers: dict[str, str] | None = None
          ) -> tuple[int, str]:
    req = urllib.request.Request(url, data=urllib.parse.urlencode(form).encode(),
                                 headers={"Content-Type": "application/x-www-form-urlencoded",
                                          **(headers or {})}, method="POST")
    try:
        with urllib.request.urlopen(req) as resp:
            return resp.status, resp.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


@pytest.mark.parametrize("mode", ["read-only", "no token", "no csrf"])
def test_the_dashboard_refuses_actions_without_writes_token_or_csrf(
        cli: Cli, mode: str) -> None:
    _run(cli, action_graphs.approval, "ask-web", first_input())
    with cli.saver() as saver:
        token = None if mode == "read-only" else "tok-0123456789"
        app = create_app(saver, token=token, allow_writes=mode != "read-only",
                         graphs={"approval": action_graphs.approval})
        served = Served(app)
        try:
            form = {"thread_id": "ask-web", "action": "resume", "value": "true"}
            auth = {} if mode == "no token" else (
                {"Authorization": f"Bearer {token}"} if token else {})
            code, body = _post(served.url + "act", form, auth)
            assert code == {"read-only": 403, "no token": 401, "no csrf": 403}[mode]
            if mode == "read-only":
                assert "--allow-writes" in body
            if mode == "no csrf":
                assert "CSRF" in body
        finally:
            served.close()
    assert _statuses(cli, "interrupted") == ["ask-web"]
    assert cli.json("audit")["entries"] == []  # refused before any action was checked


def test_the_run_executor_is_bounded_refuses_a_busy_thread_and_cancels_queued_runs(
        ) -> None:
    import threading

    from langgraph_durable.dashboard.run_executor import QueueFullError, Runs, ThreadBusyError

    runs = Runs(workers=1, max_queued=1)
    gate, ended = threading.Event(), []
    try:
        first = runs.submit("a", "retry", lambda: {"ok": gate.wait(30)}, ended.append)
        queued = runs.submit("b", "retry", lambda: {"ok": True}, ended.append)
        with pytest.raises(QueueFullError, match="as many as this dashboard allows"):
            runs.submit("c", "retry", lambda: {})
        with pytest.raises(ThreadBusyError, match="thread 'a' already has a run"):
            runs.submit("a", "retry", lambda: {})
        assert runs.cancel(queued["id"])["state"] == "cancelled"
        assert runs.cancel(first["id"]) is None  # started: not stopped
        gate.set()
        runs.wait(30)
        assert [(r["thread_id"], r["state"]) for r in ended] == [("a", "done")]
        assert runs.of_thread("b")[0]["state"] == "cancelled"
    finally:
        gate.set()
        runs.shutdown()


def test_dashboard_graph_options_are_checked_before_serving(cli: Cli) -> None:
    r = cli("dashboard", "--graph", "tests.action_graphs:approval", code=1)
    assert r.stderr == ("error: --graph 'tests.action_graphs:approval' must be "
                        "NAME=MODULE:ATTR\n")
    r = cli("dashboard", "--graph", "a=tests.action_graphs:nothing", code=1)
    assert r.stderr.startswith("error: --graph a 'tests.action_graphs:nothing' cannot be "
                               "imported: ")
    r = cli("dashboard", "--graph", f"a={APPROVAL}", "--graph", f"a={FLAKY}", code=1)
    assert r.stderr == "error: --graph 'a' is given twice\n"


def test_an_answer_is_checked_against_the_interrupts_json_schema(cli: Cli) -> None:
    _run(cli, action_graphs.schemed, "schemed", {})
    spec = "tests.action_graphs:schemed"
    r = cli("resume", "schemed", "--graph", spec, "--value", "true", code=1)
    assert r.stderr.startswith("error: the value does not match interrupt ")
    assert r.stderr.endswith("'s schema: True is not of type 'object'\n")
    r = cli("resume", "schemed", "--graph", spec, "--value", '{"approved": "y"}', code=1)
    assert "'y' is not of type 'boolean'" in r.stderr
    out = cli("resume", "schemed", "--graph", spec, "--value", '{"approved": false}').stdout
    assert out.startswith("resumed schemed: now done")
