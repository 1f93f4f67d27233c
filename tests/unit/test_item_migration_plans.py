"""The whole-list conversion (``admin/item_migration.py``) stepped without servers: what
it reads, stores and replaces, its dry run, its resumable cursor and what it refuses."""

from __future__ import annotations

from typing import Any

import pytest

from langgraph_durable.admin import item_migration as IM
from langgraph_durable.core.items import MANIFEST_TYPE
from langgraph_durable.core.ops import (
    BulkResult,
    BulkWrite,
    BulkWriteFailed,
    Find,
    FindOne,
    Mongo,
    Op,
    ReplaceDoc,
    UpdateDoc,
    WriteFailure,
)
from langgraph_durable.core.records import blob_field
from langgraph_durable.durable import documents as D
from langgraph_durable.errors import CorruptRecordError
from langgraph_durable.plans.context import Context

from .stepping import Drive, context, drive

CANDIDATES = {"type": {"$nin": [MANIFEST_TYPE, "empty", "null", "bytes", "bytearray"]}}


def _blob(ctx: Context, channel: str, value: Any) -> dict[str, Any]:
    """A blobs document holding ``value`` whole (as a saver with list_items=False)."""
    return D.blob_doc("t", blob_field("", channel, 1), ctx.serde.dumps_typed(value), put_ms=7)


class _Db:
    """Canned MongoDB: ``docs`` per collection found in ``_id`` order after the query's
    ``$gt``; ``cursors`` = the ``meta`` cursors; ``items_error`` raised by the items' bulk."""

    def __init__(self, docs: dict[str, list[dict[str, Any]]],
                 cursors: dict[str, Any] | None = None,
                 items_error: Exception | None = None) -> None:
        self.docs, self.cursors, self.items_error = docs, dict(cursors or {}), items_error

    def __call__(self, op: Op[Any]) -> Any:
        if isinstance(op, FindOne):
            return self.cursors.get(op.filter["_id"])
        if isinstance(op, Find):
            after = op.filter.get("_id", {}).get("$gt")
            rows = [d for d in self.docs.get(op.collection, [])
                    if after is None or d["_id"] > after]
            return rows[:op.limit]
        if isinstance(op, BulkWrite):
            if op.collection == "items" and self.items_error is not None:
                raise self.items_error
            return BulkResult(matched=len(op.requests), modified=len(op.requests))
        if isinstance(op, Mongo) and op.method == "count_documents":
            after = op.args[0].get("_id", {}).get("$gt")
            return sum(1 for d in self.docs.get(op.collection, [])
                       if after is None or d["_id"] > after)
        if isinstance(op, Mongo) and op.method in ("update_one", "delete_one"):
            return None
        raise AssertionError(op)


def test_a_whole_list_becomes_a_manifest_after_its_items_are_stored() -> None:
    ctx = context()
    doc = _blob(ctx, "messages", ["hi", "there"])
    done = drive(IM.convert_lists_plan(ctx), _Db({"blobs": [doc]}))
    assert done.result == IM.ListsConverted(examined={"blobs": 1, "writes": 0},
                                            converted={"blobs": 1, "writes": 0}, items=2)
    bulks = [op for op in done.ops if isinstance(op, BulkWrite)]
    assert [op.collection for op in bulks] == ["items", "blobs"]  # items before what names them
    assert all(isinstance(r, UpdateDoc) and r.upsert for r in bulks[0].requests)
    assert {r.filter["thread_id"] for r in bulks[0].requests} == {"t"}
    (replace,) = bulks[1].requests
    assert isinstance(replace, ReplaceDoc) and not replace.upsert
    # replaced only while it holds the value that was read
    assert replace.filter == {"_id": doc["_id"], "type": "msgpack", "v": 1}
    assert replace.doc["type"] == MANIFEST_TYPE and replace.doc["put_ms"] == 7
    assert len(replace.doc["refs"]) == 2  # one digest per item
    assert [op.filter for op in done.ops if isinstance(op, Find)] == [
        CANDIDATES, {**CANDIDATES, "_id": {"$gt": doc["_id"]}}, CANDIDATES]
    cursor = [op.args for op in done.ops if isinstance(op, Mongo) and op.method == "update_one"]
    assert [(a[0], a[1]["$set"]["after"]) for a in cursor] == [
        ({"_id": "migration:lists:blobs"}, doc["_id"])]
    assert [op.args for op in done.ops if isinstance(op, Mongo) and op.method == "delete_one"
            ] == [({"_id": "migration:lists:blobs"},), ({"_id": "migration:lists:writes"},)]


def test_values_other_than_a_non_empty_list_are_left_as_they_are() -> None:
    ctx = context()
    docs = sorted([_blob(ctx, "a", {"k": 1}), _blob(ctx, "b", []), _blob(ctx, "c", "text")],
                  key=lambda d: d["_id"])
    done = drive(IM.convert_lists_plan(ctx), _Db({"blobs": docs}))
    assert done.result == IM.ListsConverted(examined={"blobs": 3, "writes": 0},
                                            converted={"blobs": 0, "writes": 0}, items=0)
    assert not [op for op in done.ops if isinstance(op, BulkWrite)]


def test_a_dry_run_counts_what_it_would_convert_and_writes_nothing() -> None:
    ctx = context()
    done = drive(IM.convert_lists_plan(ctx, dry_run=True),
                 _Db({"blobs": [_blob(ctx, "messages", [1, 2, 3])]}))
    assert done.result == IM.ListsConverted(examined={"blobs": 1, "writes": 0},
                                            converted={"blobs": 1, "writes": 0}, items=0)
    assert set(done.kinds()) == {"FindOne", "Find"}


def test_the_conversion_resumes_after_its_cursor_and_stops_at_max_batches() -> None:
    ctx = context()
    docs = sorted([_blob(ctx, c, [c]) for c in "abc"], key=lambda d: d["_id"])
    db = _Db({"blobs": docs}, {"migration:lists:blobs": {"after": docs[0]["_id"]}})
    assert drive(IM.remaining_plan(ctx), db).result == 2
    done = drive(IM.convert_lists_plan(ctx, batch_size=1, max_batches=1), db)
    assert done.result == IM.ListsConverted(examined={"blobs": 1, "writes": 0},
                                            converted={"blobs": 1, "writes": 0}, items=1,
                                            finished=False)
    (find,) = [op for op in done.ops if isinstance(op, Find)]
    assert find.filter == {**CANDIDATES, "_id": {"$gt": docs[0]["_id"]}} and find.limit == 1
    (blobs,) = [op for op in done.ops if isinstance(op, BulkWrite) and op.collection == "blobs"]
    assert [r.filter["_id"] for r in blobs.requests] == [docs[1]["_id"]]


def test_a_duplicate_item_is_the_same_content_and_other_item_errors_are_raised() -> None:
    ctx = context()
    docs = {"blobs": [_blob(ctx, "messages", ["x"])]}
    dup = BulkWriteFailed("items", [WriteFailure(0, 11000, "E11000 duplicate key")])
    assert drive(IM.convert_lists_plan(ctx), _Db(docs, items_error=dup)).result.converted == {
        "blobs": 1, "writes": 0}
    bad = BulkWriteFailed("items", [WriteFailure(0, 2, "bad value")])
    record = Drive()
    with pytest.raises(BulkWriteFailed) as err:
        drive(IM.convert_lists_plan(ctx), _Db(docs, items_error=bad), record=record)
    assert err.value is bad
    # the document naming the items is not replaced, nor the cursor moved
    assert [op.collection for op in record.ops if isinstance(op, BulkWrite)] == ["items"]
    assert "update_one" not in [op.method for op in record.ops if isinstance(op, Mongo)]


def test_a_value_that_cannot_be_decoded_stops_the_conversion_naming_the_document() -> None:
    ctx = context()
    doc = {**_blob(ctx, "messages", ["x"]), "type": "msgpack", "data": b"\xc1"}
    with pytest.raises(CorruptRecordError) as err:
        drive(IM.convert_lists_plan(ctx), _Db({"blobs": [doc]}))
    assert str(err.value).startswith(
        f"cannot convert the value of MongoDB blobs document {doc['_id']!r} (thread 't'): ")
    assert str(err.value).endswith("it and the documents after it were left as they are")
