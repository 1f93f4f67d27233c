"""The flusher's thread summary across flush rounds (plans/summary_upkeep.py ``round_facts``,
outbox/round_summaries.py ``_summary_facts``): whatever round each outbox entry is flushed in, the
summary the flusher keeps is the one ``--rebuild-summary`` writes (``refresh_plan``).

Rounds are driven by hand (``flusher="off"``, ``flush_batch_size=1``: one entry a round),
so the order is fixed: a message's item reaches Redis with the pending write that made it
(``put_writes``) and its checkpoint names it without bringing it again."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage
from langgraph.checkpoint.base import empty_checkpoint

from langgraph_durable import DurableSaver
from langgraph_durable.core.items import NODE_BYTES
from langgraph_durable.core.records import pack_blob
from langgraph_durable.durable import summary_docs as S
from langgraph_durable.outbox.flusher import flush_batch_plan
from langgraph_durable.plans import summary_upkeep as P
from langgraph_durable.testing import unique_options

FIELDS = ("cid", "messages", "title", "recent", "text", "state")


@pytest.fixture
def manual(redis_url: str, mongo_url: str) -> Iterator[DurableSaver]:
    with DurableSaver.from_urls(redis_url, mongo_url, **unique_options(flusher="off")) as s:
        yield s


def one_a_round(saver: DurableSaver) -> int:
    """Flush the outbox one entry a round; returns the rounds."""
    ctx = dataclasses.replace(saver.context, config=saver.context.config.model_copy(
        update={"flush_batch_size": 1}))
    rounds = 0
    while saver.run(flush_batch_plan(ctx, "hand", block_ms=0, claim=False)).entries:
        rounds += 1
    return rounds


def summary(saver: DurableSaver, tid: str) -> dict[str, Any]:
    doc = saver.sync_clients.db[saver.context.collections.threads].find_one(
        {"_id": S.summary_id(tid)})
    assert doc is not None, tid
    return {k: doc.get(k) for k in FIELDS}


def rebuilt(saver: DurableSaver, tid: str) -> dict[str, Any]:
    """The summary ``langgraph-durable threads --rebuild-summary`` writes."""
    saver.run(P.refresh_plan(saver.context, [tid]))
    return summary(saver, tid)


def step(saver: DurableSaver, cfg: Any, messages: list[Any], n: int) -> Any:
    """A checkpoint holding ``messages`` (version ``n``) that triggers node ``agent``."""
    cp = empty_checkpoint()
    cp["channel_values"] = {"messages": list(messages)}
    cp["channel_versions"] = {"messages": f"{n:032}.0"}
    cp["updated_channels"] = ["messages", "branch:to:agent"]  # type: ignore[typeddict-unknown-key]
    return saver.put(cfg, cp, {"step": n, "source": "loop"}, cp["channel_versions"])


def test_a_message_whose_write_was_flushed_a_round_before_its_checkpoint_is_in_the_summary(
        manual: DurableSaver) -> None:
    cfg: Any = {"configurable": {"thread_id": "t", "checkpoint_ns": ""}}
    messages: list[Any] = [HumanMessage("the question", id="h")]
    cfg = step(manual, cfg, messages, 1)
    for i in range(3):  # the agent's answer: a pending write, then the next checkpoint
        answer = AIMessage(f"answer {i}", id=f"a{i}")
        manual.put_writes(cfg, [("messages", [answer])], f"task-{i}")
        messages.append(answer)
        cfg = step(manual, cfg, messages, i + 2)
    assert one_a_round(manual) == 7  # 4 checkpoints, 3 writes: each its own round
    want = {"messages": 4, "title": "the question",
            "recent": [["h", "the question"], ["a0", "answer 0"], ["a1", "answer 1"],
                       ["a2", "answer 2"]],
            "text": "the question the question answer 0 answer 1 answer 2"}
    kept = summary(manual, "t")
    assert {k: kept[k] for k in want} == want
    assert kept == rebuilt(manual, "t")


def test_two_writes_of_one_step_flushed_in_different_rounds_keep_both_messages(
        manual: DurableSaver) -> None:
    """Two parallel tasks: the first one's write in a round of its own, the second's
    flushed with the checkpoint (its item is in that round, the first one's is not)."""
    cfg: Any = {"configurable": {"thread_id": "p", "checkpoint_ns": ""}}
    messages: list[Any] = [HumanMessage("compare them", id="h")]
    cfg = step(manual, cfg, messages, 1)
    assert one_a_round(manual) == 1
    a, b = AIMessage("from a", id="a"), AIMessage("from b", id="b")
    manual.put_writes(cfg, [("messages", [a])], "task-a")
    assert one_a_round(manual) == 1
    manual.put_writes(cfg, [("messages", [b])], "task-b")
    step(manual, cfg, [*messages, a, b], 2)
    assert manual.run(flush_batch_plan(manual.context, "hand", block_ms=0,
                                       claim=False)).entries == 2  # one round
    kept = summary(manual, "p")
    assert kept["recent"] == [["h", "compare them"], ["a", "from a"], ["b", "from b"]]
    assert kept == rebuilt(manual, "p")


def test_the_round_that_makes_a_node_keeps_the_count_and_the_latest_messages(
        manual: DurableSaver) -> None:
    """At ``NODE_SIZE`` (32) messages the list's first 32 items become one node: the round
    that makes it holds the node and the newest item only, the next rounds neither."""
    cfg: Any = {"configurable": {"thread_id": "long", "checkpoint_ns": ""}}
    messages: list[Any] = [HumanMessage("the question", id="h")]
    for i in range(37):  # up to 37 messages: the node and 5 items
        cfg = step(manual, cfg, messages, i + 1)
        one_a_round(manual)
        kept = summary(manual, "long")
        assert kept["messages"] == len(messages), i
        assert kept["recent"] == [[m.id, m.content] for m in messages[-S.TEXT_MESSAGES:]], i
        messages.append(AIMessage(f"answer {i}", id=f"a{i}"))
    assert kept == rebuilt(manual, "long")


LENGTHS = (31, 32, 33, 37, 38, 64, 65, 100, 200)
"""Lists around the node boundaries (``NODE_SIZE`` = 32): the summary's count is checked
at every length up to the last, these also against the rebuild's."""


def rebuild_facts(saver: DurableSaver, tid: str) -> Any:
    """What ``--rebuild-summary`` would write (its facts), written nowhere: the summary the
    rounds keep is not replaced."""
    facts = saver.run(P.latest_facts_plan(saver.context, tid))
    assert facts is not None, tid
    return facts


def check(saver: DurableSaver, tid: str, messages: list[Any]) -> None:
    kept = summary(saver, tid)
    n = len(messages)
    assert kept["messages"] == n, n
    assert kept["recent"] == [[m.id, m.content] for m in messages[-S.TEXT_MESSAGES:]], n
    if n in LENGTHS:
        facts = rebuild_facts(saver, tid)
        assert (facts.messages, facts.recent) == (kept["messages"], kept["recent"]), n


def test_a_long_thread_flushed_one_entry_a_round_keeps_its_count(
        manual: DurableSaver) -> None:
    """Each answer reaches Redis with a pending write a round before its checkpoint: from
    38 messages on the latest six positions of the manifest are single messages and the
    round holds no node, yet the count is the list's length."""
    cfg: Any = {"configurable": {"thread_id": "count", "checkpoint_ns": ""}}
    messages: list[Any] = [HumanMessage("the question", id="h")]
    cfg = step(manual, cfg, messages, 1)
    one_a_round(manual)
    check(manual, "count", messages)
    for i in range(max(LENGTHS) - 1):
        answer = AIMessage(f"answer {i}", id=f"a{i}")
        manual.put_writes(cfg, [("messages", [answer])], f"task-{i}")
        messages.append(answer)
        cfg = step(manual, cfg, messages, i + 2)
        assert one_a_round(manual) == 2
        check(manual, "count", messages)
    assert summary(manual, "count") == rebuilt(manual, "count")


@pytest.mark.parametrize("every", [3, 10, 40])
def test_a_long_thread_flushed_in_normal_rounds_keeps_its_count(
        manual: DurableSaver, every: int) -> None:
    """Rounds of the saver's batch size, each holding ``every`` steps' entries."""
    tid = f"normal-{every}"
    cfg: Any = {"configurable": {"thread_id": tid, "checkpoint_ns": ""}}
    messages: list[Any] = [HumanMessage("the question", id="h")]
    for i in range(max(LENGTHS)):
        cfg = step(manual, cfg, messages, i + 1)
        if (i + 1) % every == 0 or len(messages) in LENGTHS:
            assert manual.run(flush_batch_plan(manual.context, "hand", block_ms=0,
                                               claim=False)).entries
            check(manual, tid, messages)
        messages.append(AIMessage(f"answer {i}", id=f"a{i}"))
    assert summary(manual, tid) == rebuilt(manual, tid)


def test_messages_as_long_as_a_node_are_not_counted_as_nodes(manual: DurableSaver) -> None:
    """The items after the first node stored in as many bytes as a node (``NODE_BYTES``):
    where the nodes end is told by a node's first bytes, not by its length."""
    serde = manual.context.serde

    def node_long(i: int) -> AIMessage:
        for n in range(NODE_BYTES):
            m = AIMessage("x" * n, id=f"a{i}")
            if len(pack_blob(serde.dumps_typed(m))) == NODE_BYTES:
                return m
        raise AssertionError("no content gives a message as long as a node")

    cfg: Any = {"configurable": {"thread_id": "sized", "checkpoint_ns": ""}}
    messages: list[Any] = [HumanMessage("the question", id="h")]
    for i in range(45):
        cfg = step(manual, cfg, messages, i + 1)
        one_a_round(manual)
        check(manual, "sized", messages)
        messages.append(node_long(i) if i in (30, 31, 32) else AIMessage(f"{i}", id=f"a{i}"))
    assert summary(manual, "sized") == rebuilt(manual, "sized")
