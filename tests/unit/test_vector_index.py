"""The Redis vector index's commands and plans without a server (canned replies)."""

from __future__ import annotations

import struct

import pytest

from langgraph_durable.core.ops import Pipeline
from langgraph_durable.hot.vector_index import (
    QueryEngine,
    VectorIndexSpec,
    create_index,
    detect_query_engine,
    ensure_index,
    escape_tag,
    item_id,
    knn,
    knn_command,
    namespace_tags,
    parse_item_id,
    parse_knn_reply,
    tag_filter,
    upsert_vectors,
    vector_key,
)
from langgraph_durable.io.drivers import run_with

SPEC = VectorIndexSpec("tp", dims=2)


def _replay(plan, replies):  # type: ignore[no-untyped-def]
    """Run ``plan`` answering each Pipeline with the next canned reply; returns the plan's
    value and the commands it sent."""
    sent, replies = [], iter(replies)

    def execute(op):  # type: ignore[no-untyped-def]
        assert isinstance(op, Pipeline)
        sent.append([list(cmd) for cmd in op.commands])
        return next(replies)

    return run_with(plan, execute), sent


def test_namespace_prefixes_are_tags_and_a_prefix_search_is_one_escaped_tag() -> None:
    assert namespace_tags(("a", "b", "c")) == "a\x1fa.b\x1fa.b.c"
    assert tag_filter(("users", "ann-1")) == "@ns:{users\\.ann\\-1}"
    assert tag_filter(()) == "*"
    assert escape_tag("a b{c}|d*é") == "a\\ b\\{c\\}\\|d\\*\\é"


def test_item_ids_round_trip_whatever_the_labels_hold() -> None:
    ns, key = ("a", 'q"u\x1fx', "ü"), "k:1"
    assert parse_item_id(item_id(ns, key)) == (ns, key)
    assert parse_item_id(item_id(ns, key).encode()) == (ns, key)
    assert item_id(("a",), "b.c") != item_id(("a", "b"), "c")
    with pytest.raises(ValueError, match="not an item id"):
        parse_item_id(b"[1, 2]")


def test_create_index_names_tag_and_vector_fields() -> None:
    assert create_index(VectorIndexSpec("tp", dims=3, algorithm="FLAT")) == [
        "FT.CREATE", "tp:vidx", "ON", "HASH", "PREFIX", 1, "tp:vec:", "SCHEMA",
        "ns", "TAG", "SEPARATOR", "\x1f", "CASESENSITIVE",
        "vec", "VECTOR", "FLAT", 6, "TYPE", "FLOAT32", "DIM", 3, "DISTANCE_METRIC", "COSINE",
    ]  # fmt: skip
    hnsw = create_index(VectorIndexSpec("tp", dims=3, m=8, ef_construction=100, ef_runtime=20))
    assert hnsw[15:] == ["HNSW", 12, "TYPE", "FLOAT32", "DIM", 3, "DISTANCE_METRIC", "COSINE",
                         "M", 8, "EF_CONSTRUCTION", 100, "EF_RUNTIME", 20]  # fmt: skip
    with pytest.raises(ValueError, match="dims must be >= 1"):
        VectorIndexSpec("tp", dims=0)


def test_detection_reads_ft_list_and_the_module_list() -> None:
    found, _ = _replay(detect_query_engine(),
                       [[[], [[b"name", b"search", b"ver", 21005]]]])  # fmt: skip
    assert found == QueryEngine(available=True, module="search")
    missing, _ = _replay(detect_query_engine(), [[Exception("unknown command 'FT._LIST'"), []]])
    assert missing == QueryEngine(available=False, module=None)


def test_ensure_index_is_idempotent() -> None:
    created, sent = _replay(ensure_index(SPEC), [[b"OK"]])
    assert created is True and sent[0][0][0] == "FT.CREATE"
    again, _ = _replay(ensure_index(SPEC), [[Exception("Index already exists")]])
    assert again is False
    with pytest.raises(Exception, match="unknown command"):
        _replay(ensure_index(SPEC), [[Exception("unknown command 'FT.CREATE'")]])


def test_upsert_writes_one_hash_per_vector_and_deletes_the_old_extra_ones() -> None:
    item = item_id(("a", "b"), "k")
    deleted, sent = _replay(upsert_vectors(SPEC, ("a", "b"), "k", [[1.0, 0.0], [0.0, 1.0]]),
                            [[[b"3", None]], [1, 1, 1]])  # fmt: skip
    assert deleted == 1
    assert sent == [
        [["HMGET", vector_key(SPEC, item, 0), "n", "seq"]],
        [["HSET", vector_key(SPEC, item, 0), "item", item, "ns", "a\x1fa.b",
          "vec", struct.pack("<2f", 1.0, 0.0), "n", 2],
         ["HSET", vector_key(SPEC, item, 1), "item", item, "ns", "a\x1fa.b",
          "vec", struct.pack("<2f", 0.0, 1.0)],
         ["DEL", vector_key(SPEC, item, 2)]],
    ]  # fmt: skip
    with pytest.raises(ValueError, match="length 3 for an index of 2 dims"):
        _replay(upsert_vectors(SPEC, ("a",), "k", [[1.0, 2.0, 3.0]]), [[[None, None]]])


def test_knn_reply_scores_are_cosine_similarities_in_either_protocol() -> None:
    resp2 = [2, b"tp:vec:x:0", [b"item", b"i1", b"d", b"0.25"],
             b"tp:vec:y:0", [b"item", b"i2", b"d", b"1.5"]]  # fmt: skip
    resp3 = {b"results": [{b"id": b"tp:vec:x:0",
                           b"extra_attributes": {b"item": b"i1", b"d": b"0.25"}},
                          {b"id": b"tp:vec:y:0",
                           b"extra_attributes": {b"item": b"i2", b"d": b"1.5"}}]}  # fmt: skip
    assert parse_knn_reply(resp2) == parse_knn_reply(resp3) == [("i1", 0.75), ("i2", -0.5)]


def test_knn_asks_again_until_it_has_k_distinct_items() -> None:
    def reply(*rows):  # type: ignore[no-untyped-def]
        flat: list[object] = [len(rows)]
        for item, d in rows:
            flat += [b"key", [b"item", item, b"d", d]]
        return [flat]

    first = reply((b"i1", b"0.1"), (b"i1", b"0.2"))  # item i1's two vectors
    second = reply((b"i1", b"0.1"), (b"i1", b"0.2"), (b"i2", b"0.3"), (b"i3", b"0.4"))
    found, sent = _replay(knn(SPEC, ("a",), [1.0, 0.0], 2), [first, second])
    assert [(i, round(s, 6)) for i, s in found] == [("i1", 0.9), ("i2", 0.7)]
    assert [cmds[0][-3] for cmds in sent] == [2, 4]  # LIMIT 0 <k>: 2, then 4
    assert sent[0][0][2] == "(@ns:{a})=>[KNN 2 @vec $q EF_RUNTIME 64 AS d]"
    short, _ = _replay(knn(SPEC, (), [1.0, 0.0], 5), [reply((b"i1", b"0"))])
    assert short == [("i1", 1.0)]


def test_flat_knn_has_no_ef_runtime() -> None:
    cmd = knn_command(VectorIndexSpec("tp", dims=2, algorithm="FLAT"), (), [1.0, 0.0], 3)
    assert cmd[2] == "(*)=>[KNN 3 @vec $q AS d]"


def test_a_hybrid_policy_is_named_only_with_a_namespace_filter() -> None:
    batches = VectorIndexSpec("tp", dims=2, hybrid_policy="BATCHES")
    assert knn_command(batches, ("a",), [1.0, 0.0], 3)[2] == (
        "(@ns:{a})=>[KNN 3 @vec $q EF_RUNTIME 64 HYBRID_POLICY BATCHES AS d]")
    assert knn_command(batches, (), [1.0, 0.0], 3)[2] == "(*)=>[KNN 3 @vec $q EF_RUNTIME 64 AS d]"
    adhoc = VectorIndexSpec("tp", dims=2, hybrid_policy="ADHOC_BF")
    assert knn_command(adhoc, ("a",), [1.0, 0.0], 3)[2] == (
        "(@ns:{a})=>[KNN 3 @vec $q HYBRID_POLICY ADHOC_BF AS d]")
    with pytest.raises(ValueError, match="hybrid_policy must be"):
        VectorIndexSpec("tp", dims=2, hybrid_policy="FAST")  # type: ignore[arg-type]
