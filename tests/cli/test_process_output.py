"""What the real ``python -m langgraph_durable.cli`` process prints (issue 21 item 9):
CliRunner does not show what the logging module writes to stderr, so these tests run the
command as a process. A tier that does not answer is one line naming it; ``--help`` reads
at 80 columns (the root's from the process, each command's through CliRunner: the same
text); a global option after the command says where it goes."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from langgraph.checkpoint.base import empty_checkpoint

from langgraph_durable import DurableSaver
from langgraph_durable.testing import mongo_server, redis_server, unique_options

ROOT = Path(__file__).resolve().parents[2]
COMMANDS = ["threads", "history", "show", "diff", "fork", "copy", "export", "import",
            "flush", "flusher", "status", "gc", "prune", "delete", "migrate", "migrate-state",
            "dashboard"]


def run_cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """``python -m langgraph_durable.cli ARGS`` with this worktree first on the path."""
    full = {**os.environ, "PYTHONPATH": str(ROOT), **(env or {})}
    return subprocess.run([sys.executable, "-m", "langgraph_durable.cli", *args], cwd=ROOT,
                          env=full, capture_output=True, text=True, timeout=120)


def _env(redis_url: str, mongo_url: str, opts: dict[str, Any]) -> dict[str, str]:
    return {"REDIS_URL": redis_url, "MONGODB_URL": mongo_url,
            "LGD_KEY_PREFIX": str(opts["key_prefix"]), "LGD_DATABASE": str(opts["database"]),
            "LGD_SOCKET_TIMEOUT_S": "0.5", "LGD_SERVER_SELECTION_TIMEOUT_S": "0.5"}


def _one_thread(redis_url: str, mongo_url: str, opts: dict[str, Any]) -> None:
    with DurableSaver.from_urls(redis_url, mongo_url, **opts | {"flusher": "off"}) as s:
        s.put({"configurable": {"thread_id": "t", "checkpoint_ns": ""}}, empty_checkpoint(),
              {"step": 0}, {})


def test_with_redis_stopped_each_command_prints_one_line_naming_the_hot_tier(
        mongo_url: str) -> None:
    opts = unique_options()
    with redis_server() as rs:
        _one_thread(rs.url, mongo_url, opts)
        host = rs.url.split("//")[1].split("/")[0]
        rs.stop()
        env = _env(rs.url, mongo_url, opts)
        for command in (["threads"], ["show", "t"], ["history", "t"], ["flush"],
                        ["delete", "t", "--yes"]):
            r = run_cli(*command, env=env)
            assert r.returncode == 1, (command, r.stderr)
            assert r.stderr.startswith(f"error: hot tier (Redis) at {host} did not answer"), (
                command, r.stderr)
            assert r.stderr.count("\n") == 1, (command, r.stderr)  # no close warning first
            assert "Connection refused" in r.stderr
        r = run_cli("status", env=env)  # the tier is reported in the table, not as a log
        assert (r.returncode, r.stderr) == (2, "")
        assert "redis DOWN" in r.stdout
        rs.start()


def test_with_mongodb_stopped_each_command_prints_one_line_naming_the_durable_tier(
        redis_url: str) -> None:
    opts = unique_options()
    with mongo_server() as ms:
        _one_thread(redis_url, ms.url, opts)
        host = ms.url.split("//")[1].split("/")[0]
        ms.stop()
        env = _env(redis_url, ms.url, opts)
        where = f"{host}/{opts['database']}"
        for command in (["threads"], ["history", "t"], ["flush", "--timeout-s", "2"],
                        ["delete", "t", "--yes"]):
            r = run_cli(*command, env=env)
            assert r.returncode == 1, (command, r.stderr)
            assert r.stderr.startswith(
                f"error: durable tier (MongoDB) at {where} did not answer"), (command, r.stderr)
            # one line: no flusher retries, no close warning, no topology description
            assert r.stderr.count("\n") == 1, (command, r.stderr)
            assert "Topology" not in r.stderr and "configured timeouts" not in r.stderr
        r = run_cli("status", env=env)
        assert (r.returncode, r.stderr) == (2, "")
        assert "mongodb DOWN" in r.stdout
        r = run_cli("show", "t", env=env)  # Redis holds all of it: shown, nothing printed
        assert (r.returncode, r.stderr) == (0, "")
        ms.start()


def _help(command: list[str]) -> str:
    """``COMMAND --help`` at 80 columns: the root's from the real process; a command's
    in this process (typer's CliRunner, the process's program name: the same text, byte
    for byte, measured for the root and three commands), 2 s of CPU less each."""
    if not command:
        r = run_cli("--help", env={"COLUMNS": "80"})
        assert r.returncode == 0, r.stderr
        return r.stdout
    from typer.testing import CliRunner

    from langgraph_durable.cli import app

    result = CliRunner().invoke(app, [*command, "--help"], env={"COLUMNS": "80"},
                                prog_name="python -m langgraph_durable.cli")
    assert result.exit_code == 0, result.output
    return result.output


@pytest.mark.parametrize("command", [[], *([c] for c in COMMANDS)])
def test_help_reads_at_80_columns(command: list[str]) -> None:
    text = _help(command)
    lines = text.splitlines()
    assert len(lines) > 5
    assert [x for x in lines if len(x) > 80] == []
    assert [x for x in lines if "…" in x] == []  # nothing cut short with an ellipsis
    if not command:  # every DurableConfig option is there whole, its variable too
        for flag in ("--server-selection-timeout-s", "--no-write-concern-j",
                     "--heartbeat-ttl-s", "LGD_SERVER_SELECTION_TIMEOUT_S"):
            assert flag in text
    else:
        usage = next(x.strip() for x in lines if x.strip())
        assert usage.startswith(f"Usage: python -m langgraph_durable.cli {command[0]} "), usage


def test_a_global_option_after_the_command_says_it_goes_before_the_command() -> None:
    r = run_cli("threads", "--key-prefix", "x", "--json", env={"COLUMNS": "80"})
    assert r.returncode == 2
    said = " ".join(r.stderr.replace("│", " ").split())
    assert ("--key-prefix is a global option, not one of threads: it goes before the "
            "command: python -m langgraph_durable.cli --key-prefix x threads --json") in said
    r = run_cli("history", "t", "--no-list-items", env={"COLUMNS": "80"})
    said = " ".join(r.stderr.replace("│", " ").split())
    assert "python -m langgraph_durable.cli --no-list-items history t" in said
    r = run_cli("threads", "--bogus", env={"COLUMNS": "80"})  # not a global one: click's
    assert r.returncode == 2 and "No such option: --bogus" in r.stderr


def test_a_bool_option_and_its_no_form_together_are_refused() -> None:
    r = run_cli("--list-items", "--no-list-items", "threads", env={"COLUMNS": "80"})
    assert r.returncode == 2
    assert "--list-items and --no-list-items contradict each other" in r.stderr


def test_the_cli_starts_without_loading_langgraph_types() -> None:
    """``langgraph.types`` (with the LangSmith run trees it loads: about 0.35 s of CPU,
    a third of a command's) is imported only by the command that resumes an interrupt."""
    probe = ("import sys; import langgraph_durable.cli.commands, langgraph_durable.dashboard.app; "
             "print(sorted(m for m in ('langgraph.types', 'langsmith.run_trees') "
             "if m in sys.modules))")
    done = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": str(ROOT)}, check=True)
    assert done.stdout == "[]\n"
