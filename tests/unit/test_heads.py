"""``Heads``: its refusals (what makes an effect stop at once, ``task_checkpoint_plan``)
and the heads each run (context) expects (``ConcurrentRunError``)."""

from __future__ import annotations

import contextvars

from langgraph_durable.plans.context import _RUN_HEADS, Heads


def test_a_refusal_stops_that_checkpoint_and_newer_ones_until_a_put_or_a_read() -> None:
    heads = Heads()
    heads.refused("t", "", "1f0-b", "TierUnavailableError: down")
    assert heads.refusal("t", "", "1f0-b") == (
        "its put of checkpoint '1f0-b' failed: TierUnavailableError: down")
    assert heads.refusal("t", "", "1f0-c") is not None
    assert heads.refusal("t", "", "1f0-a") is None  # older: stored before (a replay)
    assert heads.refusal("t", "sub", "1f0-c") is None
    heads.read("t", "")  # the next run of the namespace starts
    assert heads.refusal("t", "", "1f0-c") is None
    heads.refused("t", "", "1f0-d", "x")
    heads.seen("t", "", "1f0-e")  # a put of the namespace succeeded
    assert heads.refusal("t", "", "1f0-d") is None


def test_refusals_are_bounded_and_a_repeated_one_is_kept_as_the_newest() -> None:
    heads = Heads(size=2)
    heads.refused("a", "", "1", "x")
    heads.refused("b", "", "1", "x")
    heads.refused("a", "", "2", "y")  # "a" again: now the newest
    heads.refused("c", "", "1", "x")  # evicts the oldest, "b"
    assert heads.refusal("a", "", "2") is not None
    assert heads.refusal("b", "", "1") is None
    assert heads.refusal("c", "", "1") is not None


def test_each_context_expects_the_heads_its_own_run_read_and_wrote() -> None:
    heads = Heads()

    def run(read_head: str, stored: list[str], parent: str) -> bool:
        heads.read("t", "")
        heads.seen("t", "", read_head)  # the read found it the latest
        for cid in stored:
            heads.seen("t", "", cid)  # the run's own puts
        return heads.expects("t", "", parent)

    # two runs read "x"; run A stored "a1": run B's put on "x" still expects "x"
    assert contextvars.copy_context().run(run, "x", ["a1"], "a1") is True
    assert contextvars.copy_context().run(run, "x", [], "x") is True
    assert heads.get("t", "") == "x"  # the process saw "x" last (B's read)
    # no read in this context: the process's head, as before
    assert contextvars.copy_context().run(heads.expects, "t", "", "x") is True
    assert contextvars.copy_context().run(heads.expects, "t", "", "a1") is False


def test_a_read_of_a_given_checkpoint_expects_nothing_until_the_runs_own_put() -> None:
    heads = Heads()

    def fork() -> list[bool]:
        heads.read("t", "")  # a read of a given checkpoint: no head learned
        first = heads.expects("t", "", "old")
        heads.seen("t", "", "f1")  # its own put
        return [first, heads.expects("t", "", "f1")]

    heads.seen("t", "", "old")
    assert contextvars.copy_context().run(fork) == [False, True]


def test_a_contexts_record_holds_one_threads_namespaces() -> None:
    heads, other = Heads(), Heads()

    def run() -> dict:
        heads.read("t1", "")
        heads.seen("t1", "", "a")
        heads.read("t1", "sub")  # a subgraph of the same thread, run inline
        heads.seen("t1", "sub", "s")
        other.read("t1", "")  # another saver's read: a record of its own token
        heads.seen("t2", "", "b")  # a put of a thread this context never read
        keep = dict(_RUN_HEADS.get() or {})
        heads.read("t3", "")  # a read of another thread: t1's entries go
        return {"before": keep, "after": dict(_RUN_HEADS.get() or {})}

    got = contextvars.copy_context().run(run)
    assert sorted(k[1:] for k in got["before"]) == [("t1", "")]  # only other's
    assert sorted(k[1:] for k in got["after"]) == [("t3", "")]
    assert heads.get("t2", "") == "b"  # the process still learns every put
