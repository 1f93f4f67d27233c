"""The schema migration plans (``plans/migrations.py``) stepped without servers: what
``record_version_plan`` writes and refuses, the census, and ``migrate_plan``'s batches and
resumable cursor, with the operations each yields written down."""

from __future__ import annotations

import logging
from typing import Any

import ormsgpack
import pytest

from langgraph_durable.core.ops import (
    BulkResult,
    BulkWrite,
    Find,
    FindOne,
    FindOneAndUpdate,
    Mongo,
    Op,
    ReplaceDoc,
)
from langgraph_durable.core.schema import (
    HOSTED_NODE_VERSION,
    INLINE_VERSION,
    NEWEST_DOCUMENT_VERSION,
    SCHEMA_VERSION,
    WRITES_GROUP_VERSION,
)
from langgraph_durable.durable import meta_docs as Meta
from langgraph_durable.errors import ConfigurationError, SchemaVersionError
from langgraph_durable.plans import migrations as M

from .stepping import Drive, context, drive

OLD = Meta.old_query()
NEWER = {"v": {"$gt": NEWEST_DOCUMENT_VERSION}}


def test_the_queries_name_the_versions_of_this_package() -> None:
    # SCHEMA_VERSION 1: a document without v is version 1 (current); chunked (2),
    # manifests (3), checkpoints with inline values (4) and writes documents of one
    # put_writes call (5) and items holding their node (6) are read, so not "newer"
    assert SCHEMA_VERSION == 1
    assert WRITES_GROUP_VERSION == 5 and INLINE_VERSION == 4
    assert NEWEST_DOCUMENT_VERSION == HOSTED_NODE_VERSION == 6
    assert OLD == {"v": {"$lt": 1}}
    assert Meta.newer_query() == {"v": {"$gt": NEWEST_DOCUMENT_VERSION}}


def test_record_version_upserts_the_schema_document_with_this_prefix_as_owner() -> None:
    ctx = context()

    def answer(op: Op[Any]) -> Any:
        return {"_id": "schema", "v": 1, "key_prefix": "u"}

    done = drive(M.record_version_plan(ctx), answer)
    (op,) = done.ops
    assert isinstance(op, FindOneAndUpdate)
    assert (op.collection, op.filter, op.upsert) == ("meta", {"_id": "schema"}, True)
    assert op.update["$max"] == {"v": 1}
    assert op.update["$setOnInsert"]["key_prefix"] == "u"
    assert list(op.update["$set"]) == ["seen.1"]
    assert done.result == {"_id": "schema", "v": 1, "key_prefix": "u"}


def test_record_version_refuses_collections_owned_by_another_key_prefix() -> None:
    ctx = context()
    with pytest.raises(ConfigurationError) as err:
        drive(M.record_version_plan(ctx), lambda op: {"_id": "schema", "v": 1,
                                                       "key_prefix": "other"})
    text = str(err.value)
    assert "MongoDB database 'unit' (collection_prefix '')" in text
    assert "holds the threads of key_prefix 'other', not 'u'" in text
    assert text.endswith("key_prefix='other'")


def test_record_version_gives_a_document_set_up_before_owners_this_prefix() -> None:
    ctx = context()
    replies = iter([{"_id": "schema", "v": 1}, None,
                    {"_id": "schema", "v": 1, "key_prefix": "u"}])
    done = drive(M.record_version_plan(ctx), lambda op: next(replies))
    assert done.kinds() == ["FindOneAndUpdate", "Mongo", "FindOne"]
    claim = done.ops[1]
    assert isinstance(claim, Mongo) and claim.method == "update_one"
    assert list(claim.args) == [{"_id": "schema", "key_prefix": {"$exists": False}},
                                {"$set": {"key_prefix": "u"}}]
    assert done.ops[2] == FindOne("meta", {"_id": "schema"})
    assert done.result == {"_id": "schema", "v": 1, "key_prefix": "u"}


def test_record_version_warns_when_a_newer_version_set_the_database_up(
        caplog: pytest.LogCaptureFixture) -> None:
    ctx = context()
    with caplog.at_level(logging.WARNING, "langgraph_durable.plans.migrations"):
        done = drive(M.record_version_plan(ctx),
                     lambda op: {"_id": "schema", "v": 4, "key_prefix": "u"})
    assert done.result["v"] == 4
    assert [r.getMessage() for r in caplog.records] == [
        "database unit was set up by schema version 4; this langgraph_durable writes "
        "version 1 and cannot read newer records"]


def test_check_owner_reads_only_and_returns_none_before_any_set_up() -> None:
    ctx = context()
    done = drive(M.check_owner_plan(ctx), lambda op: None)
    assert done.ops == [FindOne("meta", {"_id": "schema"})] and done.result is None
    with pytest.raises(ConfigurationError, match="key_prefix 'x', not 'u'"):
        drive(M.check_owner_plan(ctx), lambda op: {"_id": "schema", "key_prefix": "x"})


def _census_answer(counts: dict[tuple[str, str], int]) -> Any:
    def answer(op: Op[Any]) -> Any:
        if isinstance(op, Mongo) and op.method == "count_documents":
            which = "old" if op.args[0] == OLD else "newer"
            return counts.get((op.collection, which), 0)
        if isinstance(op, FindOne):
            return {"_id": f"{op.collection}-first", "v": 99}
        raise AssertionError(op)
    return answer


def test_the_census_counts_old_and_newer_documents_per_kind() -> None:
    ctx = context()
    done = drive(M.census_plan(ctx), _census_answer({
        ("checkpoints", "old"): 3, ("writes", "newer"): 2}))
    assert done.result == {
        "checkpoints": {"old": 3, "newer": 0, "newer_id": None, "newer_v": None},
        "blobs": {"old": 0, "newer": 0, "newer_id": None, "newer_v": None},
        "writes": {"old": 0, "newer": 2, "newer_id": "writes-first", "newer_v": 99},
    }
    # an example of a newer document is read only where there is one
    assert [op for op in done.ops if isinstance(op, FindOne)] == [
        FindOne("writes", NEWER, {"_id": 1, "v": 1})]


def test_migrate_refuses_newer_documents_and_writes_nothing() -> None:
    ctx = context()
    record = Drive()
    with pytest.raises(SchemaVersionError) as err:
        drive(M.migrate_plan(ctx), _census_answer({("blobs", "newer"): 1}), record=record)
    assert str(err.value) == (
        "1 blobs documents (e.g. 'blobs-first') have schema version 99, newer than "
        f"{NEWEST_DOCUMENT_VERSION} understood by this langgraph_durable; upgrade the "
        "package. Nothing was rewritten.")
    assert {type(op).__name__ for op in record.ops} == {"Mongo", "FindOne"}
    assert all(op.method == "count_documents" for op in record.ops if isinstance(op, Mongo))


def _v0_checkpoint(i: str) -> dict[str, Any]:
    return {"_id": i, "v": 0, "thread_id": "t", "checkpoint_bytes": b"cp-" + i.encode(),
            "metadata": {"step": 1}}


class _Collections:
    """Canned MongoDB for ``migrate_plan``: ``docs`` old documents per collection, found
    in ``_id`` order from the query's ``$gt``; ``cursors`` = the ``meta`` cursors."""

    def __init__(self, docs: dict[str, list[dict[str, Any]]],
                 cursors: dict[str, Any] | None = None) -> None:
        self.docs = docs
        self.cursors = dict(cursors or {})

    def __call__(self, op: Op[Any]) -> Any:
        if isinstance(op, Mongo) and op.method == "count_documents":
            return len(self.docs.get(op.collection, [])) if op.args[0] == OLD else 0
        if isinstance(op, FindOne):
            return self.cursors.get(op.filter["_id"])
        if isinstance(op, Find):
            after = op.filter.get("_id", {}).get("$gt")
            rows = [d for d in self.docs.get(op.collection, [])
                    if after is None or d["_id"] > after]
            return rows[:op.limit]
        if isinstance(op, BulkWrite):
            return BulkResult(matched=len(op.requests), modified=len(op.requests))
        if isinstance(op, Mongo) and op.method in ("update_one", "delete_one"):
            return None
        raise AssertionError(op)


def test_migrate_rewrites_old_documents_in_batches_saving_the_cursor() -> None:
    ctx = context()
    docs = [_v0_checkpoint(i) for i in "abc"]
    done = drive(M.migrate_plan(ctx, batch_size=2), _Collections({"checkpoints": docs}))
    assert done.result == {"checkpoints": 3, "blobs": 0, "writes": 0}
    finds = [op for op in done.ops if isinstance(op, Find) and op.collection == "checkpoints"]
    assert [op.filter for op in finds] == [
        OLD, {**OLD, "_id": {"$gt": "b"}}, {**OLD, "_id": {"$gt": "c"}}]
    assert {(tuple(op.sort or ()), op.limit) for op in finds} == {((("_id", 1),), 2)}
    first, second = [op for op in done.ops if isinstance(op, BulkWrite)]
    assert (first.collection, first.ordered) == ("checkpoints", False)
    # replaced only while the stored version is the one read: safe beside flushers
    assert [r.filter for r in first.requests] == [{"_id": "a", "v": 0}, {"_id": "b", "v": 0}]
    assert all(isinstance(r, ReplaceDoc) and not r.upsert for r in first.requests)
    up = second.requests[0]
    assert isinstance(up, ReplaceDoc) and dict(up.doc) == {
        "_id": "c", "v": 1, "thread_id": "t", "checkpoint": b"cp-c", "metadata_type": "msgpack",
        "metadata": ormsgpack.packb({"step": 1}), "run_id": None, "md": [{"k": "step", "v": 1}]}
    saves = [op for op in done.ops if isinstance(op, Mongo) and op.method == "update_one"]
    assert [(s.args[0], s.args[1]["$set"]["after"], s.args[1]["$set"]["target"])
            for s in saves] == [({"_id": "migration:checkpoints"}, "b", 1),
                                ({"_id": "migration:checkpoints"}, "c", 1)]
    assert all(s.kwargs == {"upsert": True} for s in saves)
    # a finished pass removes each kind's cursor
    removed = [op.args for op in done.ops if isinstance(op, Mongo) and op.method == "delete_one"]
    assert removed == [({"_id": f"migration:{k}"},) for k in ("checkpoints", "blobs", "writes")]


def test_migrate_resumes_after_its_saved_cursor_and_stops_at_max_batches() -> None:
    ctx = context()
    docs = {"checkpoints": [_v0_checkpoint(i) for i in "abcd"]}
    cursors = {"migration:checkpoints": {"after": "b", "target": SCHEMA_VERSION}}
    done = drive(M.migrate_plan(ctx, batch_size=1, max_batches=1),
                 _Collections(docs, cursors))
    assert done.result == {"checkpoints": 1, "blobs": 0, "writes": 0}
    (find,) = [op for op in done.ops if isinstance(op, Find)]
    assert find.filter == {**OLD, "_id": {"$gt": "b"}}
    (bulk,) = [op for op in done.ops if isinstance(op, BulkWrite)]
    assert [r.filter for r in bulk.requests] == [{"_id": "c", "v": 0}]
    # stopped early: the cursor moved to c and stays for the next run
    assert [op.method for op in done.ops if isinstance(op, Mongo)][-1] == "update_one"
    assert not [op for op in done.ops if isinstance(op, Mongo) and op.method == "delete_one"]


def test_migrate_ignores_a_cursor_saved_for_another_target_version() -> None:
    ctx = context()
    docs = {"checkpoints": [_v0_checkpoint("a")]}
    cursors = {"migration:checkpoints": {"after": "z", "target": 0}}
    batches: list[tuple[str, int]] = []
    done = drive(M.migrate_plan(ctx, on_batch=lambda k, n: batches.append((k, n))),
                 _Collections(docs, cursors))
    assert done.result == {"checkpoints": 1, "blobs": 0, "writes": 0}
    assert [op.filter for op in done.ops if isinstance(op, Find)][0] == OLD
    assert batches == [("checkpoints", 1)]


@pytest.mark.parametrize("drop_error, dropped, kept", [
    (None, ["uthreads.thread_id"], []),
    (27, ["uthreads.thread_id"], []),  # IndexNotFound: another process dropped it now
    (20, [], ["uthreads.thread_id: MongoDB refused drop_index on collection 'uthreads' "
              "(code 20): cannot drop the shard key's index"]),
])
def test_retired_indexes_are_dropped_and_a_refused_drop_is_kept_and_named(
        drop_error: int | None, dropped: list[str], kept: list[str]) -> None:
    """``migrate``'s last pass lists the collection's indexes, drops the retired one it
    finds (nothing else), and keeps, naming MongoDB's reason, one whose drop MongoDB
    refuses (the index of a range shard key) instead of stopping."""
    from langgraph_durable.core.ops import CommandFailed

    ctx = context(collection_prefix="u")

    def answer(op: Op[Any]) -> Any:
        assert isinstance(op, Mongo) and op.collection == "uthreads"
        if op.method == "list_indexes":
            return [{"name": "_id_"}, {"name": "u"}, {"name": "thread_id"}]
        assert (op.method, op.args) == ("drop_index", ("thread_id",))
        if drop_error is not None:
            raise CommandFailed("uthreads", "drop_index", drop_error,
                                "cannot drop the shard key's index")
        return None

    got = drive(M.retired_indexes_plan(ctx), answer)
    assert got.result == (dropped, kept)
    assert [getattr(op, "method", None) for op in got.ops] == ["list_indexes", "drop_index"]
    dry = drive(M.retired_indexes_plan(ctx, dry_run=True), answer)
    assert dry.result == (["uthreads.thread_id"], [])
    assert [getattr(op, "method", None) for op in dry.ops] == ["list_indexes"]
