"""``retention``, ``sweep [--dry-run]``, ``pin``, ``unpin``: the policy from ``LGD_TTL`` or
``--policy``, the threads due next, a sweep that takes expired threads and leaves pinned
ones and those waiting for an interrupt's answer."""

from __future__ import annotations

import json

from langgraph_durable.durable.retention_docs import TTL_KEY

from .clikit import Cli, build_graph, first_input

POLICY = {"strategy": "delete", "default_ttl": 60, "sweep_interval_minutes": 60}


def _threads(cli: Cli) -> None:
    """``old`` (TTL 1 minute, set to expire now), ``asking`` (waits for an interrupt's
    answer, expired too), ``kept`` (pinned, expired) and ``young`` (60 minutes)."""
    with cli.saver(ttl=POLICY) as saver:
        plain, asking = build_graph(saver), build_graph(saver, ask=True)
        for tid in ("old", "kept", "young"):
            plain.invoke(first_input(), {"configurable": {"thread_id": tid}})
        asking.invoke(first_input(), {"configurable": {"thread_id": "asking",
                                                       TTL_KEY: 1}})
        saver.flush()
        for tid in ("old", "kept", "asking"):
            saver.set_thread_ttl(tid, 0)
        saver.pin_thread("kept")


def test_retention_shows_the_policy_and_the_threads_due_next(cli: Cli) -> None:
    _threads(cli)
    cli.env["LGD_TTL"] = json.dumps(POLICY)
    data = cli.json("retention")
    assert data["policy"] == {"strategy": "delete", "default_ttl": 60.0,
                              "sweep_interval_minutes": 60.0, "sweep_limit": 1000,
                              "lease_s": 60.0}
    due = [d["thread_id"] for d in data["due"]]
    assert due[:2] == ["old", "asking"] or due[:2] == ["asking", "old"]
    assert due[2:] == ["young"]  # pinned "kept" is not listed
    text = cli("retention").stdout
    assert "policy: delete, default TTL 60 min, sweep every 60 min" in text
    assert "young" in text and "due" in text


def test_sweep_dry_run_then_sweep_then_unpin(cli: Cli) -> None:
    _threads(cli)
    policy = json.dumps(POLICY)
    dry = json.loads(cli("sweep", "--dry-run", "--policy", policy, "--json").stdout)
    assert (dry["deleted"], dry["held"], dry["dry_run"]) == (["old"], ["asking"], True)
    with cli.saver(ttl=POLICY) as saver:
        assert saver.get_tuple({"configurable": {"thread_id": "old"}}) is not None
    out = cli("sweep", "--policy", policy, "--yes").stdout
    assert "deleted: old" in out and "held (unanswered interrupt): asking" in out
    with cli.saver(ttl=POLICY) as saver:
        assert saver.get_tuple({"configurable": {"thread_id": "old"}}) is None
        assert saver.get_tuple({"configurable": {"thread_id": "asking"}}) is not None
        assert saver.get_tuple({"configurable": {"thread_id": "kept"}}) is not None
        saver.sync_clients.db[saver.context.collections.meta].update_one(
            {"_id": "retention:sweep"}, {"$set": {"next_at": 0}})
    assert "unpinned 1 thread(s)" in cli("unpin", "kept").stdout
    out = cli("sweep", "--policy", policy, "--yes").stdout
    assert "deleted: kept" in out
    assert "pinned 2 thread(s)" in cli("pin", "young", "asking").stdout
    with cli.saver(ttl=POLICY) as saver:
        assert saver.get_tuple({"configurable": {"thread_id": "kept"}}) is None
        assert saver.thread_retention("young").pinned  # type: ignore[union-attr]


def test_sweep_without_a_policy_says_so(cli: Cli) -> None:
    result = cli("sweep", "--dry-run", code=1)
    assert "no retention policy" in result.output
    result = cli("sweep", "--policy", '{"strategy": "forever"}', "--yes", code=1)
    assert "--policy is not a retention policy" in result.output
