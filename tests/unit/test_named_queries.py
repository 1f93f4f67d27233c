"""The MongoDB queries the plans send, named in ``durable/`` beside the documents they
query (issue 37): each builder's exact output, field order included (MongoDB picks the
index from the filter's shape, so the order written here is the one sent), and no
MongoDB operator written inline in ``plans/``."""

from __future__ import annotations

import ast
import datetime
from pathlib import Path

from langgraph_durable.durable import checkpoint_queries as Q
from langgraph_durable.durable import documents as D
from langgraph_durable.durable import effect_docs as F
from langgraph_durable.durable import footprint_queries as Size
from langgraph_durable.durable import meta_docs as Meta
from langgraph_durable.durable import retention_docs as R
from langgraph_durable.durable import store_docs as S
from langgraph_durable.durable import summary_docs as Summary
from langgraph_durable.durable import write_groups as G

PLANS = Path(__file__).resolve().parents[2] / "langgraph_durable" / "plans"

ITEMS_LOOKUP = {"$lookup": {
    "from": "items", "localField": "refs", "foreignField": "d", "as": "found",
    "pipeline": [{"$match": {"thread_id": "t"}}, {"$lookup": {
        "from": "items", "localField": "refs", "foreignField": "d", "as": "sub",
        "pipeline": [{"$match": {"thread_id": "t"}}]}}]}}
"""``Q.item_lookup("items", "t")``: a document's items and, for a node, its items."""


def test_a_list_page_reads_the_checkpoints_below_the_cursor_with_the_metadata_filter() -> None:
    q = Q.checkpoints_page("t", "", before="c5",
                           metadata=D.metadata_query({"step": 1}, queryable=True))
    assert q == {"thread_id": "t", "checkpoint_ns": "", "checkpoint_id": {"$lt": "c5"},
                 "$nor": [{"md": {"$elemMatch": {"k": "step", "v": {"$nin": [1, 1.0, True]}}}}]}
    assert list(q) == ["thread_id", "checkpoint_ns", "checkpoint_id", "$nor"]
    assert Q.checkpoints_before("t", "sub", "c5") == {
        "thread_id": "t", "checkpoint_ns": "sub", "checkpoint_id": {"$lt": "c5"}}
    # what Redis answered is left out (sorted, whatever order it comes in), merged into
    # the page's own range on checkpoint_id: one flat filter
    assert Q.excluding(q, {"c4", "c2"}) == {
        **q, "checkpoint_id": {"$lt": "c5", "$nin": ["c2", "c4"]}}
    assert Q.excluding(Q.checkpoints_up_to("t", "", "c5"), {"c2"})["checkpoint_id"] == {
        "$lte": "c5", "$nin": ["c2"]}


def test_a_cold_get_tuple_reads_one_checkpoint_its_writes_and_their_items() -> None:
    assert Q.checkpoints_page("t", "", exact="c1") == {
        "thread_id": "t", "checkpoint_ns": "", "checkpoint_id": "c1"}
    assert Q.checkpoints_page("t", "") == {"thread_id": "t", "checkpoint_ns": ""}  # latest
    assert Q.item_lookup("items", "t") == ITEMS_LOOKUP
    assert Q.writes_pipeline("t", "", ["c1"], [ITEMS_LOOKUP]) == [
        {"$match": {"thread_id": "t", "checkpoint_ns": "", "checkpoint_id": {"$in": ["c1"]}}},
        ITEMS_LOOKUP]
    assert Q.items_pipeline("items", "t", [bytearray(b"\x01" * 16)]) == [
        {"$match": {"thread_id": "t", "d": {"$in": [b"\x01" * 16]}}},
        {"$lookup": {"from": "items", "localField": "refs", "foreignField": "d", "as": "sub",
                     "pipeline": [{"$match": {"thread_id": "t"}}]}}]


def test_delete_for_runs_finds_checkpoints_by_run_id_and_removes_their_chunks() -> None:
    class Run:
        def __str__(self) -> str:
            return "r2"

    assert Q.checkpoints_of_runs(["r1", Run()]) == {"run_id": {"$in": ["r1", "r2"]}}
    assert Q.chunks_of_checkpoints("t", "", ["c1", "c2"]) == {
        "thread_id": "t", "checkpoint_ns": "", "checkpoint_id": {"$in": ["c1", "c2"]}}
    assert Q.chunks_of_owners("t", ["b1"]) == {"thread_id": "t", "owner": {"$in": ["b1"]}}


def test_prune_reads_the_documents_naming_items_before_collecting_them() -> None:
    assert Q.manifests_of("t") == {"thread_id": "t", "refs": {"$exists": True}}
    assert Q.inline_manifests_of("t") == {"thread_id": "t", "vals.refs": {"$exists": True}}
    assert Q.items_stored_before("t", [b"\xab" * 2], 7) == {
        "_id": {"$in": [D.doc_id("t", "abab")]}, "put_ms": {"$not": {"$gt": 7}}}


def test_the_thread_listings_group_the_checkpoints_by_thread() -> None:
    assert Q.each_thread() == [{"$group": {"_id": "$thread_id"}}]
    assert Q.first_per_thread() == [
        {"$group": {"_id": "$thread_id", "first": {"$min": "$checkpoint_id"}}}]
    assert Q.first_per_namespace("t") == [
        {"$match": {"thread_id": "t"}},
        {"$group": {"_id": "$checkpoint_ns", "first": {"$min": "$checkpoint_id"}}}]
    assert Q.thread_ids_after(None, 3) == [
        {"$match": {}}, {"$group": {"_id": "$thread_id"}}, {"$sort": {"_id": 1}}, {"$limit": 3}]
    assert Q.thread_ids_after("a", 3)[0] == {"$match": {"thread_id": {"$gt": "a"}}}
    assert Q.namespace_counts("a", "k") == [
        {"$match": {"thread_id": {"$lte": "k", "$gt": "a"}}},
        {"$group": {"_id": {"t": "$thread_id", "ns": "$checkpoint_ns"}, "n": {"$sum": 1},
                    "last": {"$max": "$checkpoint_id"}}}]
    assert Q.checkpoints_between("t", "", "c1", "c9") == {
        "thread_id": "t", "checkpoint_ns": "", "checkpoint_id": {"$gte": "c1", "$lte": "c9"}}
    assert Q.checkpoints_up_to("t", "", "c9") == {
        "thread_id": "t", "checkpoint_ns": "", "checkpoint_id": {"$lte": "c9"}}


def test_a_fenced_write_is_removed_only_as_stored_before_the_delete() -> None:
    assert G.calls_stored_before("t", "", "c1", ["task"], 9) == {
        "thread_id": "t", "checkpoint_ns": "", "checkpoint_id": "c1",
        "task_id": {"$in": ["task"]}, "v": 5, "put_ms": {"$not": {"$gt": 9}}}
    assert Q.chunks_of_threads(["t"], ["x"]) == {"thread_id": {"$in": ["t"]},
                                                 "owner": {"$in": ["x"]}}
    assert D.tombstones_of_threads(["t"]) == {"thread_id": {"$in": ["t"]}}
    assert Summary.summary_on_writes_of("t", "c1") == [  # each found by its _id
        {"_id": "1:t", "thread_id": "t", "cid": "c1"},
        {"_id": "1:t", "thread_id": "t", "cid": None, "pw_cid": "c1"}]


def test_the_memory_store_pages_a_prefix_by_keyset() -> None:
    rng = S.prefix_range(("a",))
    # every page asks for a cseq: MongoDB leaves the tombstones (no cseq) out
    assert S.page_query(rng, None, "start") == {"ns": {"$gte": "a.", "$lt": "a/"},
                                                "cseq": {"$gte": 0}}
    assert S.page_query({}, None, "start") == {"ns": {"$gte": ""}, "cseq": {"$gte": 0}}
    assert S.page_query(rng, ("a.", 4, "k"), "values") == {"ns": "a.", "cseq": {"$gte": 4}}
    assert S.page_query(rng, ("a.", 4, "k"), "after") == {"ns": {"$gt": "a.", "$lt": "a/"},
                                                          "cseq": {"$gte": 0}}
    assert S.values_under(("a",)) == {"ns": {"$gte": "a.", "$lt": "a/"}, "cseq": {"$gte": 0}}
    assert S.values_under(()) == {"ns": {"$gte": ""}, "cseq": {"$gte": 0}}
    assert [S.is_live(d, 5) for d in (
        {"exp": 0}, {"exp": 6}, {"exp": 5}, {"dead": True, "exp": 0}, {})] == [
        True, True, False, False, False]  # what live_query(5) matches
    assert S.live_per_namespace(5) == [
        {"$match": {"dead": {"$exists": False}, "$or": [{"exp": 0}, {"exp": {"$gt": 5}}]}},
        {"$group": {"_id": "$ns", "n": {"$sum": 1}}}]
    assert S.vectors_after(None) == {"vec": {"$ne": None}, "dead": {"$exists": False}}
    assert S.vectors_after("x") == {"vec": {"$ne": None}, "dead": {"$exists": False},
                                    "_id": {"$gt": "x"}}


def test_the_other_documents_queries() -> None:
    up = F.effect_upsert({"_id": "e", "thread_id": "t", "v": 2, "put_ms": 5})
    assert (up.filter, up.update, up.upsert) == (
        {"_id": "e", "thread_id": "t", "v": {"$lt": 2}},
        {"$set": {"thread_id": "t", "v": 2}, "$setOnInsert": {"put_ms": 5}}, True)
    assert F.effects_of_members("t", ["\x00c1"]) == {"thread_id": "t",
                                                     "member": {"$in": ["\x00c1"]}}
    assert R.own_ttls_of({"b", "a"}) == {"_id": {"$in": ["a", "b"]}, "ttl": {"$exists": True}}
    assert Summary.summaries_of(["t"]) == {"_id": {"$in": [Summary.summary_id("t")]}}
    assert Summary.list_filter_without(Summary.ListQuery(), []) == {}
    assert Summary.list_filter_without(Summary.ListQuery(q="x"), ["h"]) == {
        "thread_id": {"$regex": "x", "$options": "i", "$nin": ["h"]}}
    # several conditions: one flat filter (SecantusDB scans the collection for an $and)
    assert Summary.list_filter(Summary.ListQuery(where={"user": "u1", "step": 3},
                                                 search="Hi", q="t")) == {
        "md.user": {"$eq": "u1"}, "md.step": {"$eq": 3}, "text": {"$regex": "hi"},
        "thread_id": {"$regex": "t", "$options": "i"}}
    # keys no summary holds match nothing, together as well
    assert Summary.list_filter(Summary.ListQuery(where={"a.b": 1, "$x": 2})) == {
        "$and": [{"_id": {"$in": []}}, {"_id": {"$in": []}}]}
    now = datetime.datetime(2026, 1, 1, tzinfo=datetime.timezone.utc)
    assert Meta.cursor_saved("x", now, 1) == {"$set": {"after": "x", "target": 1, "at": now}}
    assert Meta.cursor_saved("x", now) == {"$set": {"after": "x", "at": now}}
    assert D.after_id({"v": 1}, "x") == {"v": 1, "_id": {"$gt": "x"}}


def test_and_field_is_flat_where_it_can_be_and_an_and_where_conditions_collide() -> None:
    """``documents.and_field``: the same documents as ``{"$and": [query, {field: cond}]}``,
    written flat unless the field already has a value or the same operator."""
    assert D.and_field({"a": 1}, "b", {"$gt": 2}) == {"a": 1, "b": {"$gt": 2}}
    assert D.and_field({"b": {"$lt": 9}}, "b", {"$gt": 2}) == {"b": {"$lt": 9, "$gt": 2}}
    assert D.and_field({"b": 5}, "b", {"$gt": 2}) == {"$and": [{"b": 5}, {"b": {"$gt": 2}}]}
    assert D.and_field({"b": {"$gt": 1}}, "b", {"$gt": 2}) == {
        "$and": [{"b": {"$gt": 1}}, {"b": {"$gt": 2}}]}
    assert D.and_field({"b": None}, "b", {"$ne": 1}) == {"$and": [{"b": None}, {"b": {"$ne": 1}}]}
    assert D.and_field({"b": {"x": 1}}, "b", {"$ne": 1}) == {  # an embedded document
        "$and": [{"b": {"x": 1}}, {"b": {"$ne": 1}}]}
    assert D.and_field({"$or": [{"a": 1}]}, "t", "x") == {"$or": [{"a": 1}], "t": "x"}
    assert D.and_field({"t": "y"}, "t", "x") == {"$and": [{"t": "y"}, {"t": "x"}]}
    assert D.and_field({"t": {"$regex": "a"}}, "t", {"$options": "i"}) == {
        "$and": [{"t": {"$regex": "a"}}, {"t": {"$options": "i"}}]}


def test_the_admin_passes_and_the_storage_figures_queries() -> None:
    assert G.per_write_docs() == {"idx": {"$exists": True}, "chunked": {"$exists": False},
                                  "v": {"$in": [1, 3]}}
    assert G.per_write_docs("x")["_id"] == {"$gt": "x"}
    assert Size.collection_size() == [{"$group": {
        "_id": None, "n": {"$sum": 1}, "b": {"$sum": {"$bsonSize": "$$ROOT"}}}}]
    assert Size.size_per_thread(["t"]) == [
        {"$match": {"thread_id": {"$in": ["t"]}}},
        {"$group": {"_id": "$thread_id", "n": {"$sum": 1},
                    "bytes": {"$sum": {"$bsonSize": "$$ROOT"}}}}]
    assert Size.thread_size("t", writes=True)[1]["$group"]["n"] == {
        "$sum": {"$cond": [{"$isArray": "$writes"}, {"$size": "$writes"}, 1]}}


def _operator_literals(path: Path) -> list[str]:
    """``"$..."`` string constants of ``path`` outside docstrings."""
    tree = ast.parse(path.read_text())
    docstrings = {id(n.value) for n in ast.walk(tree) if isinstance(n, ast.Expr)
                  and isinstance(n.value, ast.Constant)}
    return [f"{path.name}:{n.lineno}: {n.value!r}" for n in ast.walk(tree)
            if isinstance(n, ast.Constant) and isinstance(n.value, str)
            and n.value.startswith("$") and id(n) not in docstrings]


def test_no_plan_writes_a_mongodb_operator_inline() -> None:
    # store_match.py's operators are LangGraph's store filter ($eq, $gt, ...), evaluated
    # in Python as InMemoryStore does: no MongoDB query
    found = [x for p in sorted(PLANS.glob("*.py")) if p.name != "store_match.py"
             for x in _operator_literals(p)]
    assert found == []
