"""``Heads``' refusals: what makes an effect stop at once (``task_checkpoint_plan``)."""

from __future__ import annotations

from langgraph_durable.plans.context import Heads


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
