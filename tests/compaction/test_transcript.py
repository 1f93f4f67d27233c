"""``transcript``: the whole conversation from checkpoint history, on the current branch."""

from __future__ import annotations

import pytest
from langchain_core.messages import AIMessage, HumanMessage
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.memory import InMemorySaver

from langgraph_durable import CheckpointNotFoundError
from langgraph_durable.compaction import SlidingWindow, atranscript, transcript

from .test_durable_resume import chat_graph, turn

CONFIG: RunnableConfig = {"configurable": {"thread_id": "long-chat"}}


def ids(messages: list) -> list[str]:
    return [str(m.id) for m in messages]


async def test_transcript_rebuilds_what_compaction_removed() -> None:
    saver = InMemorySaver()
    graph = chat_graph(SlidingWindow(max_tokens=50, keep_last=3), saver)
    for n in range(1, 13):
        graph.invoke(turn(n), CONFIG)
    current = graph.get_state(CONFIG).values["messages"]
    assert len(current) < 10  # compacted
    full = transcript(saver, CONFIG)
    expected = ["sys"]
    for n in range(1, 13):
        expected += [f"h{n}"] + ([f"c{n}", f"t{n}"] if n % 3 == 0 else []) + [f"a{n}"]
    assert ids(full) == expected
    assert ids(await atranscript(saver, CONFIG)) == expected


def test_transcript_follows_the_branch_of_the_named_checkpoint() -> None:
    saver = InMemorySaver()
    graph = chat_graph(SlidingWindow(max_tokens=50, keep_last=3), saver)
    for n in range(1, 5):
        graph.invoke(turn(n), CONFIG)
    after_two = next(
        s.config for s in graph.get_state_history(CONFIG)
        if [m.id for m in s.values["messages"]][-1:] == ["a2"] and not s.next
    )
    # Time travel: continue from turn 2 with another question; the old branch is a sibling.
    graph.invoke({"messages": [HumanMessage("h3 again", id="h3")]}, after_two)
    latest = transcript(saver, CONFIG)
    assert ids(latest) == ["sys", "h1", "a1", "h2", "a2", "h3", "c3", "t3", "a3"]
    assert latest[5].content == "h3 again"  # the fork's turn 3, not the sibling's
    # Naming an old checkpoint gives the conversation up to it.
    assert ids(transcript(saver, after_two)) == ["sys", "h1", "a1", "h2", "a2"]
    # A rewritten message (same id) appears once, in its latest version.
    graph.update_state(CONFIG, {"messages": [AIMessage("a3, corrected", id="a3")]})
    assert transcript(saver, CONFIG)[-1].content == "a3, corrected"


async def test_transcript_of_unknown_thread_and_unknown_checkpoint() -> None:
    saver = InMemorySaver()
    graph = chat_graph(SlidingWindow(max_tokens=50, keep_last=3), saver)
    graph.invoke(turn(1), CONFIG)
    unknown: RunnableConfig = {"configurable": {"thread_id": "never-used"}}
    # Like get_state on an unknown thread (empty values): no checkpoints, no messages.
    assert transcript(saver, unknown) == []
    assert await atranscript(saver, unknown) == []
    assert graph.get_state(unknown).values == {}
    missing: RunnableConfig = {
        "configurable": {"thread_id": "long-chat", "checkpoint_id": "1f0-missing"}
    }
    with pytest.raises(CheckpointNotFoundError) as raised:
        transcript(saver, missing)
    assert str(raised.value).startswith(
        "transcript: thread 'long-chat' (checkpoint_ns '') has no checkpoint '1f0-missing'"
    )
    assert (raised.value.thread_id, raised.value.checkpoint_id) == ("long-chat", "1f0-missing")
    with pytest.raises(CheckpointNotFoundError, match="no checkpoint '1f0-missing'"):
        await atranscript(saver, missing)
    assert isinstance(raised.value, LookupError)
