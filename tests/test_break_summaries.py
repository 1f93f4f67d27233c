"""Thread summaries against bad data and bad input: damaged summary documents, a stale
summary of a thread with damaged records, a stalled flush round of a deleted thread's
pending writes, metadata filters given as JSON operators, searches too long to be a
regular expression, metadata keys MongoDB cannot store. The list, the flusher and the
rebuild keep working for every other thread."""

from __future__ import annotations

from typing import Any
from unittest import mock

import pytest
from langgraph.checkpoint.base import empty_checkpoint

from langgraph_durable import DurableSaver
from langgraph_durable.cli.thread_pages import rebuild
from langgraph_durable.core.ops import BulkWrite
from langgraph_durable.dashboard.listing import ListArgs, thread_list
from langgraph_durable.durable import summary_docs as S
from langgraph_durable.durable.summary_docs import SEARCH_MAX_CHARS, ListQuery
from langgraph_durable.io.drivers import run_sync
from langgraph_durable.outbox.group import ensure_group_plan
from langgraph_durable.outbox.rounds import flush_batch_plan
from langgraph_durable.plans import history_edits
from langgraph_durable.plans.thread_list import Census
from langgraph_durable.testing import drop_key_prefix, unique_options

WINDOW_S = 30.0


def put(saver: DurableSaver, tid: str, step: int = 0, parent: Any = None,
        **metadata: Any) -> Any:
    cfg: Any = {"configurable": {"thread_id": tid, "checkpoint_ns": ""}}
    if parent is not None:
        cfg["configurable"]["checkpoint_id"] = parent["configurable"]["checkpoint_id"]
    cp = empty_checkpoint()
    cp["channel_values"] = {"v": step}
    cp["channel_versions"] = {"v": f"{step + 1:032}.0"}
    return saver.put(cfg, cp, {"step": step, **metadata}, {"v": f"{step + 1:032}.0"})


def listed(saver: DurableSaver, census: Census | None = None, **args: Any) -> list[str]:
    page = thread_list(saver, ListArgs(**args), running_window_s=WINDOW_S, census=census)
    return [r["thread_id"] for r in page["rows"]]


def threads_col(saver: DurableSaver) -> Any:
    return saver.sync_clients.db[saver.context.collections.threads]


DAMAGES = [
    {"title": 5, "messages": "x", "next": "abc", "last": 7},
    {"step": {"a": 1}, "sv": [1], "graph": {"x": 1}},
    {"state": 5, "u": "x", "at": "yesterday"},
    {"rev": "x", "pw": [1], "pw_cid": 5, "recent": 7, "cid": 3},
    {"errors": "x", "error": 5, "interrupts": "y", "md": "m", "text": 5, "stale": "no"},
]


@pytest.mark.parametrize("damage", DAMAGES)
def test_a_damaged_summary_never_breaks_the_list_nor_the_flush_and_is_rewritten(
        saver: DurableSaver, damage: dict[str, Any]) -> None:
    first = {t: put(saver, t, 0, None, user="u") for t in ("a", "b")}
    saver.flush()
    whole = threads_col(saver).find_one({"thread_id": "a"})
    assert S.readable(whole)[1] == [] and "stale" not in whole  # a sound one is no damage
    threads_col(saver).update_one({"thread_id": "a"}, {"$set": damage})
    census = Census()
    assert sorted(listed(saver, census)) == ["a", "b"]
    assert sorted(listed(saver, None, where=("user=u",))) == ["a", "b"]
    assert sorted(listed(saver, census, status="done")) == ["a", "b"]
    # the list wrote the damaged summary again from the thread's latest checkpoint
    again = threads_col(saver).find_one({"thread_id": "a"})
    assert {k: again.get(k) for k in whole if k not in ("rev", "u")} == {
        k: v for k, v in whole.items() if k not in ("rev", "u")}
    assert "stale" not in again
    # a damaged summary never keeps the thread's records from MongoDB (no dead letter)
    threads_col(saver).update_one({"thread_id": "a"}, {"$set": damage})
    second = put(saver, "a", 1, first["a"], user="u")
    saver.put_writes(second, [("__error__", ValueError("boom"))], "task-1")
    saver.flush()
    cps = saver.sync_clients.db[saver.context.collections.checkpoints]
    assert cps.count_documents({"thread_id": "a"}) == 2
    summary = threads_col(saver).find_one({"thread_id": "a"})
    assert (summary["cid"], summary["step"]) == (second["configurable"]["checkpoint_id"], 1)
    assert listed(saver, census, status="error") == ["a"]


def test_a_stale_summary_of_a_thread_with_damaged_records_leaves_list_and_rebuild_working(
        saver: DurableSaver, redis_client: Any) -> None:
    for tid in ("a", "b", "c"):
        put(saver, tid, 1, put(saver, tid, 0))
    saver.flush()
    drop_key_prefix(redis_client, saver.config.key_prefix)
    cps = saver.sync_clients.db[saver.context.collections.checkpoints]
    newest = cps.find_one({"thread_id": "a"}, sort=[("checkpoint_id", -1)])
    cps.update_one({"_id": newest["_id"]}, {"$set": {"vals": "x"}})
    threads_col(saver).update_many({}, {"$set": {"stale": True}})
    assert sorted(listed(saver, Census())) == ["a", "b", "c"]
    assert sorted(listed(saver, None, search="")) == ["a", "b", "c"]
    # the others were refreshed; the damaged thread's summary is left as it was
    assert [d["thread_id"] for d in threads_col(saver).find({"stale": True})] == ["a"]
    threads_col(saver).update_many({}, {"$set": {"stale": True}})
    done, last = rebuild(saver, None)
    assert (done, last) == (3, "c")
    assert [d["thread_id"] for d in threads_col(saver).find({"stale": True})] == ["a"]


def test_a_stalled_round_of_pending_writes_leaves_no_summary_of_a_deleted_thread(
        redis_url: str, mongo_url: str) -> None:
    """A flush round reads an error write of thread T from Redis; another consumer
    flushes it and T is deleted; the stalled round then writes: its fence takes back the
    summary the round made, as it does for a round holding T's checkpoint."""
    with DurableSaver.from_urls(redis_url, mongo_url, **unique_options(flusher="off")) as s:
        run_sync(ensure_group_plan(s.context), s.sync_clients)

        def one_round(hook: Any = None) -> Any:
            plan = flush_batch_plan(s.context, "stalled", block_ms=0, claim=False)

            def hooked() -> Any:
                pending = [hook] if hook is not None else []
                op = plan.send(None)
                while True:
                    if pending and isinstance(op, BulkWrite):
                        pending.pop()()
                    reply = yield op
                    try:
                        op = plan.send(reply)
                    except StopIteration as done:
                        return done.value

            return run_sync(hooked(), s.sync_clients)

        cfg = put(s, "T")
        put(s, "other")
        while one_round().entries:
            pass
        s.put_writes(cfg, [("__error__", ValueError("boom"))], "task-1")

        def deleted_meanwhile() -> None:
            def drained(ctx: Any, timeout_s: float) -> Any:  # another consumer flushed
                return 0
                yield
            with mock.patch.object(history_edits, "flush_wait_plan", drained):
                s.run(history_edits.delete_thread_plan(s.context, "T"))

        one_round(deleted_meanwhile)
        assert threads_col(s).find_one({"thread_id": "T"}) is None
        assert s.get_tuple({"configurable": {"thread_id": "T"}}) is None
        assert listed(s, Census()) == ["other"]


def test_metadata_filters_compare_values_and_never_run_operators(saver: DurableSaver) -> None:
    for n in range(1, 5):
        put(saver, f"t{n}", 0, None, n=n, user="u")
    saver.flush()
    assert listed(saver, None, where=("n=3",)) == ["t3"]
    for where in ('n={"$gt": 2}', 'user={"$ne": null}', 'n={"$in": [1, 2]}',
                  'n={"$where": "1"}', 'user={"$regex": "(a+)+$"}', "$where=1", "a.b=1",
                  "n.x=1"):
        assert listed(saver, None, where=(where,)) == [], where
    page = thread_list(saver, ListArgs(where=('n={"$gt": 2}',)), running_window_s=WINDOW_S)
    assert page["total"] == 0


def test_a_search_too_long_to_match_is_refused_before_any_query(saver: DurableSaver) -> None:
    put(saver, "t")
    saver.flush()
    for field in ("search", "q"):
        with pytest.raises(ValueError, match=f"at most {SEARCH_MAX_CHARS}"):
            ListQuery(**{field: "a" * (SEARCH_MAX_CHARS + 1)})
        with pytest.raises(ValueError, match=f"at most {SEARCH_MAX_CHARS}"):
            listed(saver, None, **{field: "(" * 5000})
        # the longest search, of characters each escaped, is a query the server takes
        assert listed(saver, None, **{field: "(" * SEARCH_MAX_CHARS}) == []
        assert listed(saver, None, where=("x=1",), **{field: "(" * SEARCH_MAX_CHARS}) == []


def test_a_metadata_key_mongodb_cannot_store_never_dead_letters_its_checkpoint(
        saver: DurableSaver) -> None:
    saver.put({"configurable": {"thread_id": "n", "checkpoint_ns": ""}}, empty_checkpoint(),
              {"step": 0, "a\x00b": 1, "ok": 2}, {})
    saver.flush()  # raised DeadLetteredError: the summary's md held the key
    summary = threads_col(saver).find_one({"thread_id": "n"})
    assert summary["md"] == {"step": 0, "ok": 2}
    assert listed(saver, None, where=("ok=2",)) == ["n"]
