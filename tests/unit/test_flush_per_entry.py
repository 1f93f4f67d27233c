"""The flusher's per-entry Python, made cheaper, writes what it wrote before: the same
document ``_id``s, the same outbox entries, the same PyMongo write models."""

from __future__ import annotations

import ormsgpack
from pymongo import InsertOne, ReplaceOne

from langgraph_durable.core.ops import BulkWrite, InsertDoc, ReplaceDoc
from langgraph_durable.core.outbox_entry import OutboxEntry
from langgraph_durable.durable.documents import doc_id
from langgraph_durable.io.mongo_calls import mongo_call, to_pymongo


def test_a_document_id_is_the_length_prefixed_join_of_its_parts_whatever_their_types(
) -> None:
    assert doc_id("thread-1", "", "messages", 3) == "8:thread-1|0:|8:messages|1:3"
    assert doc_id("a|b", b"x", None) == "3:a|b|4:b'x'|4:None"
    assert doc_id() == ""


def test_an_outbox_entry_read_back_holds_the_payloads_lists_and_compares_by_value(
) -> None:
    fields = {b"t": b"t-1", b"p": ormsgpack.packb(["cp", "\x00c1", ["\x00ch\x001"],
                                                   [b"d" * 16], 42])}
    entry = OutboxEntry.of(fields)
    assert (entry.thread_id, entry.kind, entry.member, entry.names, entry.digests,
            entry.size) == ("t-1", "cp", "\x00c1", ["\x00ch\x001"], [b"d" * 16], 42)
    assert entry == OutboxEntry("t-1", "cp", "\x00c1", ["\x00ch\x001"], [b"d" * 16], 42)
    assert OutboxEntry("t-1", "w", "\x00c1").payload() == ormsgpack.packb(
        ["w", "\x00c1", [], []])


def test_a_bulk_of_inserts_and_replaces_reaches_pymongo_as_the_same_models_in_order(
) -> None:
    a, b = {"_id": "1:a", "thread_id": "a"}, {"_id": "1:b", "thread_id": "b"}
    op = BulkWrite("blobs", [InsertDoc(a), ReplaceDoc({"_id": "1:b"}, b, upsert=True),
                             InsertDoc(b)])
    (requests,), kwargs = mongo_call(op)
    assert requests == [InsertOne(a), ReplaceOne({"_id": "1:b"}, b, upsert=True),
                        InsertOne(b)]
    assert kwargs == {"ordered": False}
    assert to_pymongo(InsertDoc(a)) == InsertOne(a)
