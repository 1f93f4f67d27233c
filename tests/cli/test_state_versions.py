"""The application's state version for operators (issue 34 item 4): ``threads`` shows
each thread's version and filters by it, ``show`` shows a checkpoint's."""

from __future__ import annotations

from typing import Any

from .clikit import Cli, build_graph, first_input

KEY = "lgd_state_version"


def run_threads(cli: Cli, versions: dict[str, int | None]) -> None:
    """One finished thread per entry, its checkpoints stamped with that state version
    (None: unversioned, as a saver without ``state_version`` writes)."""
    with cli.saver() as saver:
        graph = build_graph(saver)
        for tid, version in versions.items():
            md = {} if version is None else {KEY: version}
            config: Any = {"configurable": {"thread_id": tid}, "metadata": md}
            graph.invoke(first_input(), config)


def test_threads_shows_each_threads_state_version_and_filters_by_it(cli: Cli) -> None:
    run_threads(cli, {"v1": 1, "v2": 2, "old": None, "v3": 3})
    rows = {r["thread_id"]: r["state_version"] for r in cli.json("threads")["threads"]}
    assert rows == {"v1": 1, "v2": 2, "old": None, "v3": 3}
    assert [r["thread_id"] for r in cli.json("threads", "--state-version", "2")[
        "threads"]] == ["v2"]
    assert [r["thread_id"] for r in cli.json("threads", "--state-version", "unversioned")[
        "threads"]] == ["old"]
    below = cli.json("threads", "--state-version-below", "2")
    assert sorted(r["thread_id"] for r in below["threads"]) == ["old", "v1"]
    assert below["total"] == 2
    below = cli.json("--unversioned-state-version", "2", "threads",
                     "--state-version-below", "2")  # unversioned read as 2: current
    assert [r["thread_id"] for r in below["threads"]] == ["v1"]
    # the metadata filter sees the key too
    assert [r["thread_id"] for r in cli.json("threads", "--where", f"{KEY}=3")[
        "threads"]] == ["v3"]
    text = cli("threads").stdout
    header = next(line for line in text.splitlines() if "thread" in line and "step" in line)
    assert "state" in header
    old = next(line for line in text.splitlines() if " old " in line)
    assert "unversioned" in old
    r = cli("threads", "--state-version", "two", code=1)
    assert r.stderr == ("error: --state-version expects a version (an int >= 1) or "
                        "'unversioned', got 'two'\n")


def test_show_names_the_checkpoints_state_version(cli: Cli) -> None:
    run_threads(cli, {"v2": 2, "old": None})
    assert cli.json("show", "v2")["state_version"] == 2
    assert cli.json("show", "v2")["metadata"][KEY] == 2
    assert cli.json("show", "old")["state_version"] is None
    assert "state version 2" in cli("show", "v2").stdout
    assert "state version unversioned" in cli("show", "old").stdout


def test_read_only_commands_show_checkpoints_as_stored_whatever_the_state_version_option(
        cli: Cli) -> None:
    """The application's LGD_STATE_VERSION in the operator's environment does not make
    ``show`` refuse a thread of a newer version, nor migrate an older one: it shows what
    is stored."""
    run_threads(cli, {"v3": 3, "v1": 1})
    cli.env = {**cli.env, "LGD_STATE_VERSION": "2"}
    assert cli.json("show", "v3")["state_version"] == 3
    shown = cli.json("show", "v1")
    assert shown["state_version"] == 1 and shown["channel_values"]["count"] == 3
    assert {r["thread_id"] for r in cli.json("threads")["threads"]} == {"v1", "v3"}


def test_a_fork_keeps_the_state_version_of_the_checkpoint_it_copies(cli: Cli) -> None:
    """The rollback recipe of docs/operations.md: a thread v2 continued is forked at its
    last v1 checkpoint; the fork's latest checkpoint is of version 1."""
    run_threads(cli, {"t": 1})
    with cli.saver(state_version=2, state_migrations={1: lambda v: v}) as v2:
        build_graph(v2).invoke(first_input(), {"configurable": {"thread_id": "t"}})
    history = cli.json("history", "t", "--limit", "100")["checkpoints"]
    last_v1 = next(c for c in history
                   if cli.json("show", "t", c["checkpoint_id"])["state_version"] == 1)
    assert cli.json("show", "t")["state_version"] == 2
    cli("fork", "t", "--checkpoint", last_v1["checkpoint_id"], "--to", "t-v1")
    assert cli.json("show", "t-v1")["state_version"] == 1
