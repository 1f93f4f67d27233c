"""The writes documents of one put_writes call (``durable/write_groups.py``), without
servers: their shape, the split of a call over the chunk size, the reading of both forms
and LangGraph's rule across documents."""

from __future__ import annotations

import pytest

from langgraph_durable.core.items import MANIFEST_TYPE
from langgraph_durable.core.records import WriteRecord
from langgraph_durable.durable import chunks as C
from langgraph_durable.durable import documents as D
from langgraph_durable.durable import write_groups as G
from langgraph_durable.errors import CorruptRecordError, SchemaVersionError

D1, D2 = b"1" * 16, b"2" * 16


def _call(seq: int, *writes: tuple[int, str, tuple[str, bytes]], task: str = "t"
          ) -> list[WriteRecord]:
    return [WriteRecord(task, idx, ch, value, "p", seq) for idx, ch, value in writes]


def test_a_call_is_one_document_with_its_writes_in_idx_order_and_their_refs() -> None:
    recs = _call(7, (1, "messages", (MANIFEST_TYPE, D1 + D2)), (-1, "__error__",
                 ("json", b'"x"')), (0, "a", ("msgpack", b"\x01")))
    (doc,) = G.write_docs("th", "", "cp", recs, put_ms=5)
    assert doc == {
        "_id": D.doc_id("th", "", "cp", "t", "call", 7), "v": 5, "thread_id": "th",
        "checkpoint_ns": "", "checkpoint_id": "cp", "task_id": "t", "task_path": "p",
        "seq": 7, "writes": [
            {"idx": -1, "channel": "__error__", "type": "json", "data": b'"x"'},
            {"idx": 0, "channel": "a", "type": "msgpack", "data": b"\x01"},
            {"idx": 1, "channel": "messages", "type": MANIFEST_TYPE, "data": b"",
             "refs": [D1, D2]}],
        "refs": [D1, D2], "put_ms": 5}
    assert sorted(G.records_of(doc), key=lambda w: w.idx) == sorted(recs,
                                                                  key=lambda w: w.idx)
    assert G.identity_of(doc, "writes", ("checkpoint_ns", "checkpoint_id", "task_id", "idx")
                         ) == ["", "cp", "t", "call", 7]
    # an upsert merges (a document stored in part from an earlier call's entry gains the
    # entries it lacks); the fields that name the call are set on insert only
    fixed = {k: v for k, v in doc.items() if k not in ("writes", "refs")}
    assert G.upsert_any(doc).update == {
        "$setOnInsert": fixed,
        "$addToSet": {"writes": {"$each": doc["writes"]}, "refs": {"$each": doc["refs"]}}}


def test_calls_of_one_checkpoint_are_one_document_each_and_the_latest_time_is_kept() -> None:
    recs = [*_call(1, (0, "a", ("json", b"1"))), *_call(2, (0, "a", ("json", b"2")), task="u"),
            *_call(1, (1, "b", ("json", b"3")))]
    docs = G.write_docs("th", "", "cp", recs, times=[10, 30, 20])
    assert [(d["task_id"], d["seq"], len(d["writes"]), d["put_ms"]) for d in docs] == [
        ("t", 1, 2, 20), ("u", 2, 1, 30)]


def test_a_call_over_the_chunk_size_keeps_one_document_per_write(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(C, "THRESHOLD_BYTES", 10)
    recs = _call(3, (0, "a", ("bytes", b"x" * 8)), (1, "b", ("bytes", b"y" * 8)))
    docs, chunks = C.split_all("writes", G.write_docs("th", "", "cp", recs))
    assert [d["_id"] for d in docs] == [D.doc_id("th", "", "cp", "t", i) for i in (0, 1)]
    assert chunks == []  # each value under the chunk size: not chunked
    assert [G.records_of(d) for d in docs] == [[recs[0]], [recs[1]]]
    assert G.pending_of(docs) == {("t", 0): recs[0], ("t", 1): recs[1]}


@pytest.mark.parametrize("order", [1, -1])
def test_across_documents_an_ordinary_write_keeps_the_first_seq_a_special_the_newest(
        order: int) -> None:
    old = G.write_docs("th", "", "cp", _call(1, (0, "a", ("json", b"1")),
                                             (-1, "__error__", ("json", b"e1"))))
    new = G.group_doc("th", "", "cp", _call(2, (0, "a", ("json", b"2")),
                                            (-1, "__error__", ("json", b"e2"))))
    per_write = [D.write_doc("th", "", "cp", w) for w in G.records_of(old[0])]
    for docs in ([*old, new], [*per_write, new]):
        got = G.pending_of(docs[::order])
        assert {k: w.value for k, w in got.items()} == {("t", 0): ("json", b"1"),
                                                        ("t", -1): ("json", b"e2")}


def test_a_damaged_or_newer_grouped_document_is_named() -> None:
    (doc,) = G.write_docs("th", "", "cp", _call(1, (0, "a", ("json", b"1"))))
    bad = {**doc, "writes": [{"idx": "0", "channel": "a", "type": "json", "data": b"1"}]}
    with pytest.raises(CorruptRecordError, match=r"writes document .*thread 'th'.* write 0 "
                                                 r"of field 'writes' has idx '0'"):
        G.records_of(bad)
    with pytest.raises(CorruptRecordError, match="field 'seq' holds '1', not an integer"):
        G.records_of({**doc, "seq": "1"})
    with pytest.raises(SchemaVersionError, match="schema version 7, newer than 6"):
        G.records_of({**doc, "v": 7})
    # a per-write document of a newer format too (older releases refusing v 5 is
    # tests/test_previous_release.py's, against the release itself)
    (one,) = [D.write_doc("th", "", "cp", w) for w in G.records_of(doc)]
    with pytest.raises(SchemaVersionError, match="schema version 7, newer than 6"):
        D.check_document({**one, "v": 7}, "writes")
