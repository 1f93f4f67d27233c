"""get_tuple and list pages with canned replies: Redis alone (the thread's complete flag, a
full hot page), a page only MongoDB answers with pending writes merged from both tiers,
the metadata filter and the cursor applied after the plan (``finish_page``)."""

from __future__ import annotations

from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage
from langgraph.checkpoint.base import empty_checkpoint

from langgraph_durable.core.items import parse_stored
from langgraph_durable.core.ops import Aggregate, Find, Op, Script
from langgraph_durable.core.records import WriteRecord, member, pack_blob, unpack_blob
from langgraph_durable.core.schema import INLINE_VERSION
from langgraph_durable.durable import documents as D
from langgraph_durable.durable import inline as I
from langgraph_durable.durable import item_docs as IT
from langgraph_durable.errors import MissingValueError
from langgraph_durable.hot.scripts import PageReply, PageRow, PartsReply
from langgraph_durable.plans import read, write

from .stepping import context, drive

IDS = [f"1ef00000-0000-6000-8000-00000000000{i}" for i in range(1, 4)]


def stored(ctx: Any, i: int, value: Any) -> write.PreparedPut:
    """The i-th checkpoint of thread t (parent: the one before), serialized."""
    cp = empty_checkpoint()
    cp["id"] = IDS[i]
    cp["channel_values"] = {"v": value}
    cp["channel_versions"] = {"v": str(i + 1)}
    conf: dict[str, Any] = {"thread_id": "t", "checkpoint_ns": ""}
    if i:
        conf["checkpoint_id"] = IDS[i - 1]
    return write.prepare_put(ctx, {"configurable": conf}, cp, {"step": i, "who": f"s{i}"},
                             {"v": str(i + 1)})


def writes(ctx: Any, i: int, pairs: list[tuple[str, Any]], seq: int = 0) -> list[WriteRecord]:
    conf = {"thread_id": "t", "checkpoint_ns": "", "checkpoint_id": IDS[i]}
    ctx.clock.wall_ns += seq
    prepared = write.prepare_put_writes(ctx, {"configurable": conf}, pairs, "task", "")
    assert prepared is not None
    return prepared.records


def hot_row(p: write.PreparedPut, ws: list[WriteRecord] = ()) -> PageRow:  # type: ignore[assignment]
    return PageRow(member("", p.checkpoint_id).encode(), p.args.record, p.args.index,
                   [w.pack() for w in ws])


def page_reply(rows: list[PageRow], blobs: list[write.PreparedPut], complete: int,
               items: dict[bytes, bytes] | None = None) -> PageReply:
    items = items or {}  # none: no list values
    return PageReply(rows, [f.encode() for p in blobs for f, _ in p.args.blobs],
                     [v for p in blobs for _, v in p.args.blobs], complete, list(items),
                     list(items.values()))


def test_latest_of_a_thread_redis_holds_whole_is_one_script_call() -> None:
    ctx = context()
    p = stored(ctx, 0, "zero")
    ws = writes(ctx, 0, [("v", 5)])
    done = drive(read.get_tuple_plan(ctx, "t", "", None),
                 lambda op: page_reply([hot_row(p, ws)], [p], complete=1))
    assert done.kinds() == ["page"]
    page = read.finish_page(ctx, done.result)
    (tup,) = page.tuples
    assert tup.checkpoint["channel_values"] == {"v": "zero"}
    assert tup.metadata["who"] == "s0"
    assert tup.pending_writes == [("task", "v", 5)]
    assert (page.hot, page.durable) == (1, 0)
    assert page.learned is not None and page.learned.head == ("", IDS[0])
    assert ctx.heads.get("t", "") is None  # the plan learned it; the caller applies it
    ctx.learn(*page.learned)
    assert ctx.heads.get("t", "") == IDS[0]  # the run builds on what it read


def test_an_exact_checkpoint_found_in_redis_does_not_ask_mongodb() -> None:
    ctx = context()
    p = stored(ctx, 1, "one")
    done = drive(read.get_tuple_plan(ctx, "t", "", IDS[1]),
                 lambda op: page_reply([hot_row(p)], [p], complete=0))
    assert done.kinds() == ["page"]
    op = done.ops[0]
    assert isinstance(op, Script) and list(op.args) == ["[" + member("", IDS[1])] * 2 + [
        1, b"", "t"]  # the thread_id, for its registry (the last of KEYS)
    assert op.keys[-1] == ctx.registry_of("t")
    assert read.finish_page(ctx, done.result).learned is None  # an exact read is no head


def test_a_page_redis_answers_partly_reads_the_rest_from_mongodb() -> None:
    ctx = context()
    cold, hot = stored(ctx, 0, "zero"), stored(ctx, 1, "one")
    mongo_w = writes(ctx, 0, [("v", "mongo"), ("__error__", "old")])
    redis_w = writes(ctx, 0, [("v", "redis"), ("__error__", "new")], seq=10)
    cols = ctx.collections

    def answer(op: Op[Any]) -> Any:
        if isinstance(op, Script) and op.name == "page":
            return page_reply([hot_row(hot)], [hot], complete=0)
        if isinstance(op, Find) and op.collection == cols.checkpoints:
            return [D.checkpoint_doc("t", cold.record, put_ms=1)]
        if isinstance(op, Aggregate) and op.collection == cols.checkpoints:
            # the value is in a blobs document (written before inline values)
            return [D.blob_doc("t", f, v) for f, v in cold.blobs]
        if isinstance(op, Aggregate) and op.collection == cols.writes:
            return [D.write_doc("t", "", IDS[0], w) for w in mongo_w]
        if isinstance(op, Script) and op.name == "parts":  # writes made after expiry
            return PartsReply([[w.pack() for w in redis_w]], [], [], [])  # no blobs, no items
        raise AssertionError(op)

    done = drive(read.page_plan(ctx, "t", "", count=2), answer)
    assert done.kinds() == ["page", "Find", "Parallel", "Aggregate", "Aggregate", "parts"]
    find = done.ops[1]
    assert isinstance(find, Find) and find.limit == 2
    assert find.filter["checkpoint_id"] == {"$nin": [IDS[1]]}
    blobs, cold_writes = done.ops[3], done.ops[4]
    assert isinstance(blobs, Aggregate) and isinstance(cold_writes, Aggregate)
    # the values: inside older checkpoint documents or blobs documents, one aggregate; a
    # page of two checkpoints joins no items (read once each afterwards, when needed)
    fields = [f for f, _ in cold.blobs]
    assert list(blobs.pipeline) == list(I.values_op(cols, "t", fields).pipeline)
    assert blobs.pipeline[-1] == {"$unionWith": {"coll": cols.blobs, "pipeline": [
        {"$match": {"_id": {"$in": D.blob_ids("t", fields)}}}]}}
    assert list(cold_writes.pipeline) == [{"$match": {
        "thread_id": "t", "checkpoint_ns": "", "checkpoint_id": {"$in": [IDS[0]]}}}]
    page = read.finish_page(ctx, done.result)
    assert [t.checkpoint["channel_values"]["v"] for t in page.tuples] == ["one", "zero"]
    # insert-once write: MongoDB's first value stays; special channel: the newer seq wins
    assert page.tuples[1].pending_writes == [("task", "__error__", "new"),
                                             ("task", "v", "mongo")]
    assert (page.hot, page.durable, page.cursor) == (1, 1, IDS[0])


def test_a_page_reads_the_values_a_cold_checkpoint_holds_inside_its_document() -> None:
    ctx = context()
    cold, hot = stored(ctx, 0, "zero"), stored(ctx, 1, "one")
    cols = ctx.collections

    def answer(op: Op[Any]) -> Any:
        if isinstance(op, Script) and op.name == "page":
            return page_reply([hot_row(hot)], [hot], complete=0)
        if isinstance(op, Find) and op.collection == cols.checkpoints:
            doc, big = I.checkpoint_docs("t", cold.record, cold.blobs, put_ms=1)
            assert big == [] and doc["v"] == INLINE_VERSION
            return [doc]
        if isinstance(op, Aggregate) and op.collection == cols.writes:
            return []
        if isinstance(op, Script) and op.name == "parts":
            return PartsReply([[]], [], [], [])
        raise AssertionError(op)

    done = drive(read.page_plan(ctx, "t", "", count=2), answer)
    # no values aggregate: the cold checkpoint's only value came with its document
    assert done.kinds() == ["page", "Find", "Parallel", "Aggregate", "parts"]
    page = read.finish_page(ctx, done.result)
    assert [t.checkpoint["channel_values"]["v"] for t in page.tuples] == ["one", "zero"]


def test_a_trimmed_thread_answers_the_latest_of_an_unseen_namespace_from_redis() -> None:
    """complete = 2 (the hot window trimmed a thread that started in Redis): every
    namespace's newest checkpoint is in Redis, so the latest of a namespace Redis lacks
    (a subgraph's first step) is none without asking MongoDB; an exact id still asks."""
    ctx = context()
    reply = lambda op: page_reply([], [], 2) if isinstance(op, Script) else []  # noqa: E731
    done = drive(read.get_tuple_plan(ctx, "t", "sub:1", None), reply)
    assert done.kinds() == ["page"]
    assert read.finish_page(ctx, done.result).tuples == []
    done = drive(read.get_tuple_plan(ctx, "t", "", IDS[0]), reply)
    assert done.kinds() == ["page", "Find"]


def test_an_empty_thread_asks_both_tiers_and_returns_nothing() -> None:
    ctx = context()
    done = drive(read.get_tuple_plan(ctx, "t", "", None),
                 lambda op: page_reply([], [], 0) if isinstance(op, Script) else [])
    assert done.kinds() == ["page", "Find"]
    page = read.finish_page(ctx, done.result)
    assert (page.tuples, page.cursor) == ([], None)


def test_the_metadata_filter_applies_after_decoding_and_keeps_the_cursor() -> None:
    ctx = context()
    p0, p1 = stored(ctx, 0, "zero"), stored(ctx, 1, "one")
    done = drive(read.page_plan(ctx, "t", "", count=2, filter={"who": "s0"}),
                 lambda op: page_reply([hot_row(p1), hot_row(p0)], [p0, p1], complete=1))
    page = read.finish_page(ctx, done.result)
    assert [t.metadata["step"] for t in page.tuples] == [0]
    assert page.cursor == IDS[0]  # a full page: the next one starts below its last id


def test_a_list_value_redis_holds_comes_with_its_items_in_the_page_reply() -> None:
    ctx = context()
    p = stored(ctx, 0, ["a", "b"])
    assert len(p.parts) == 2  # two items, no node
    reply = page_reply([hot_row(p)], [p], complete=1, items=dict(p.parts))
    done = drive(read.get_tuple_plan(ctx, "t", "", None), lambda op: reply)
    assert done.kinds() == ["page"]  # nothing asked of MongoDB
    assert ctx.items.unknown("t", p.parts, pack_blob) == p.parts
    page = read.finish_page(ctx, done.result)
    (tup,) = page.tuples
    assert tup.checkpoint["channel_values"] == {"v": ["a", "b"]}
    assert page.learned is not None and list(page.learned.items) == list(p.parts)
    ctx.learn(*page.learned)
    # read from Redis: the next put omits them
    assert ctx.items.unknown("t", p.parts, pack_blob) == {}


def test_one_checkpoint_only_mongodb_holds_joins_its_items_in_the_same_round() -> None:
    ctx = context()
    cold = stored(ctx, 0, ["a", "b"])
    cols = ctx.collections

    def answer(op: Op[Any]) -> Any:
        if isinstance(op, Script) and op.name == "page":
            return page_reply([], [], complete=0)
        if isinstance(op, Find) and op.collection == cols.checkpoints:
            return [doc]
        if isinstance(op, Aggregate) and op.collection == cols.checkpoints:
            # its manifest, inside its own document, with the items it names joined
            found = [IT.item_doc("t", d, v) for d, v in cold.parts.items()]
            return [{"checkpoint_ns": "", "vals": e, "found": found} for e in doc["vals"]]
        if isinstance(op, Aggregate) and op.collection == cols.writes:
            return []
        if isinstance(op, Script) and op.name == "parts":
            return PartsReply([[]], [], [], [])
        raise AssertionError(op)

    doc, _ = I.checkpoint_docs("t", cold.record, cold.blobs, put_ms=1)
    done = drive(read.get_tuple_plan(ctx, "t", "", None), answer)
    assert done.kinds() == ["page", "Find", "Parallel", "Aggregate", "Aggregate", "parts"]
    values = done.ops[3]
    assert isinstance(values, Aggregate)
    entries = next(s["$lookup"] for s in values.pipeline if "$lookup" in s)
    union = values.pipeline[-1]["$unionWith"]["pipeline"][1]["$lookup"]
    for lookup, local in ((entries, "vals.refs"), (union, "refs")):
        assert (lookup["from"], lookup["localField"], lookup["foreignField"],
                lookup["as"]) == (cols.items, local, "d", "found")
        assert lookup["pipeline"][0] == {"$match": {"thread_id": "t"}}
    page = read.finish_page(ctx, done.result)
    assert page.tuples[0].checkpoint["channel_values"] == {"v": ["a", "b"]}
    assert (page.hot, page.durable) == (0, 1)
    assert ctx.items.unknown("t", cold.parts, pack_blob) == cold.parts  # not taken as held in Redis


def test_items_this_process_can_rebuild_are_not_read_again() -> None:
    ctx = context()
    msgs = [HumanMessage("hi", id="1"), AIMessage("hello", id="2")]
    p = stored(ctx, 0, msgs)
    sent = {d: parse_stored(v, lambda raw: unpack_blob(raw, "t")) for d, v in p.args.items.items()}

    def reply(held: bytes) -> Any:
        def answer(op: Op[Any]) -> Any:
            assert isinstance(op, Script) and op.args[3] == held
            return page_reply([hot_row(p)], [p], 1,
                              {d: v for d, v in p.args.items.items() if d not in held})
        return answer

    first = drive(read.get_tuple_plan(ctx, "t", "", None), reply(b""))
    assert read.finish_page(ctx, first.result).tuples[0].checkpoint["channel_values"] == {
        "v": msgs}
    held = ctx.items.cached("t")
    assert held == sent  # both messages decoded once: their bytes are held
    second = drive(read.get_tuple_plan(ctx, "t", "", None), reply(b"".join(held)))
    got = read.finish_page(ctx, second.result).tuples[0].checkpoint["channel_values"]["v"]
    assert got == msgs and got[0] is not msgs[0]  # rebuilt; Redis sent no item back


def _cold_answers(ctx: Any, found: list[list[dict[str, Any]]]) -> Any:
    """Replies to a read of a checkpoint only MongoDB holds whose blob documents are gone;
    the checkpoints query answers ``found`` in turn (one list per read)."""
    def answer(op: Op[Any]) -> Any:
        if isinstance(op, Script):
            return (PageReply([], [], [], 0, [], []) if op.name == "page"
                    else PartsReply([[]], [], [], []))
        if isinstance(op, Find) and op.collection == ctx.collections.checkpoints:
            return found.pop(0)
        return []  # no blob documents, no writes
    return answer


def test_a_checkpoint_deleted_between_its_record_and_its_values_is_read_again() -> None:
    ctx = context()
    doc = D.checkpoint_doc("t", stored(ctx, 0, "zero").record, put_ms=1)
    done = drive(read.get_tuple_plan(ctx, "t", "", None), _cold_answers(ctx, [[doc], []]))
    assert done.kinds().count("page") == 2  # the second read no longer finds it
    assert done.result.rows == []


def test_a_checkpoint_whose_values_neither_tier_holds_raises_missing_value_error() -> None:
    ctx = context()
    doc = D.checkpoint_doc("t", stored(ctx, 0, "zero").record, put_ms=1)
    with pytest.raises(MissingValueError, match=rf"checkpoint '{IDS[0]}' \(thread 't', ns ''\) "
                                                r"names version '1' of channel 'v'") as info:
        drive(read.get_tuple_plan(ctx, "t", "", None), _cold_answers(ctx, [[doc], [doc]]))
    assert (info.value.channel, info.value.version, info.value.key) == ("v", "1", "1:t|0:|1:v|1:1")
