"""The hot window: Redis keeps the newest ``hot_max_checkpoints`` flushed checkpoints of a
namespace (and everything unflushed); older ones are read from MongoDB, unchanged."""

from __future__ import annotations

from typing import Any

import ormsgpack
from langchain_core.messages import HumanMessage
from langgraph.checkpoint.memory import InMemorySaver

from langgraph_durable import DurableSaver
from langgraph_durable.testing import unique_options

from .graphs import build_answering


def _graph(saver: Any) -> Any:
    return build_answering(saver)


def _run(saver: Any, turns: int) -> None:
    g = _graph(saver)
    for t in range(turns):
        g.invoke({"messages": [HumanMessage(f"q {t}", id=f"h-{t}")]},
                 {"configurable": {"thread_id": "t"}})


def _values(saver: Any) -> list[Any]:
    return [(t.checkpoint["channel_values"], t.metadata["step"])
            for t in saver.list({"configurable": {"thread_id": "t"}})]


def test_redis_keeps_the_window_and_mongodb_the_rest(redis_url: str, mongo_url: str,
                                                     redis_client: Any) -> None:
    ref = InMemorySaver()
    _run(ref, 30)  # 90 checkpoints: 3 per turn
    with DurableSaver.from_urls(redis_url, mongo_url, hot_max_checkpoints=5,
                                **unique_options()) as s:
        keys = s.context.keys("t")
        _run(s, 10)
        s.flush()
        held_10 = redis_client.zcard(keys.idx)  # 30 checkpoints made so far
        _run_more = _graph(s)
        for t in range(10, 30):
            _run_more.invoke({"messages": [HumanMessage(f"q {t}", id=f"h-{t}")]},
                             {"configurable": {"thread_id": "t"}})
        s.flush()
        # the newest 5, plus at most max(16, 5 / 2) = 16 before the next trim
        assert 5 <= held_10 <= 21 and 5 <= redis_client.zcard(keys.idx) <= 21
        # the channel values only the evicted checkpoints named left Redis too
        named = {f for cv in redis_client.hvals(keys.cv) for f in ormsgpack.unpackb(cv)[1:]}
        assert {f.decode() for f in redis_client.hkeys(keys.bl)} == named
        # not all of it any more, but every namespace's newest checkpoints
        assert redis_client.hget(keys.meta, "complete") == b"2"
        assert _values(s) == _values(ref)
        latest = s.get_tuple({"configurable": {"thread_id": "t"}})
        assert s.last_read_tier == "hot"
        assert latest.checkpoint["channel_values"] == ref.get_tuple(
            {"configurable": {"thread_id": "t"}}).checkpoint["channel_values"]


def test_zero_keeps_every_checkpoint(redis_url: str, mongo_url: str, redis_client: Any) -> None:
    with DurableSaver.from_urls(redis_url, mongo_url, hot_max_checkpoints=0,
                                **unique_options()) as s:
        _run(s, 10)
        s.flush()
        assert redis_client.zcard(s.context.keys("t").idx) == 30
