"""The package's own MongoDB models (``core/ops.py``) against a real server, through the
one translation in ``io/mongo_calls.py``: write models, index specs, ``BulkResult`` and the
deleted count in; ``BulkWriteFailed`` and ``CommandFailed`` out; the same with blocking
PyMongo, asyncio PyMongo and Motor clients."""

from __future__ import annotations

from typing import Any

import pymongo
import pytest
from motor import motor_asyncio  # a test dependency only

from langgraph_durable.core.ops import (
    BulkResult,
    BulkWrite,
    BulkWriteFailed,
    CommandFailed,
    CreateIndexes,
    DeleteDoc,
    DeleteMany,
    Find,
    FindOneAndUpdate,
    Index,
    InsertDoc,
    Mongo,
    Plan,
    ReplaceDoc,
    UpdateDoc,
    WriteFailure,
)
from langgraph_durable.io.drivers import Clients, run_async, run_sync
from langgraph_durable.testing import unique_options


def _round_trip() -> Plan[dict[str, Any]]:
    """Every model once on collection ``c``; returns what the server answered."""
    seen: dict[str, Any] = {}
    seen["indexes"] = yield CreateIndexes("c", [
        Index((("thread_id", 1), ("d", -1)), "thread_d", sparse=True),
        Index((("at", 1),), "at_ttl", expire_after_s=60)])
    seen["specs"] = {ix["name"]: (dict(ix["key"]), ix.get("sparse"), ix.get("expireAfterSeconds"))
                     for ix in (yield Mongo("c", "list_indexes"))}
    seen["insert"] = yield BulkWrite("c", [InsertDoc({"_id": "a", "x": b"\x00\x01"}),
                                           InsertDoc({"_id": "b"})])
    try:
        yield BulkWrite("c", [InsertDoc({"_id": "a"}),
                              UpdateDoc({"_id": "b"}, {"$set": {"y": 1}}),
                              ReplaceDoc({"_id": "c"}, {"z": 1}, upsert=True),
                              DeleteDoc({"_id": "none"})])
    except BulkWriteFailed as exc:
        seen["failed"] = exc
    try:
        yield Mongo("c", "drop_index", ("no_such_index",))
    except CommandFailed as exc:
        seen["refused"] = exc
    seen["after"] = yield FindOneAndUpdate("c", {"_id": "n"}, {"$set": {"v": 1}}, upsert=True)
    seen["docs"] = yield Find("c", {}, sort=[("_id", 1)])
    seen["deleted"] = yield DeleteMany("c", {})
    return seen


def _check(seen: dict[str, Any]) -> None:
    assert seen["indexes"] == ["thread_d", "at_ttl"]
    assert seen["specs"] == {"_id_": ({"_id": 1}, None, None),
                             "thread_d": ({"thread_id": 1, "d": -1}, True, None),
                             "at_ttl": ({"at": 1}, None, 60)}
    assert seen["insert"] == BulkResult(inserted=2)
    failed = seen["failed"]
    assert [(e.index, e.code) for e in failed.write_errors] == [(0, 11000)]
    assert failed.write_concern_errors == () and failed.only_duplicates()
    assert failed.collection == "c"
    # unordered: the requests after the failed one were applied
    assert failed.result == BulkResult(matched=1, modified=1, upserted=1)
    assert isinstance(failed.write_errors[0], WriteFailure)
    assert str(failed) == "bulk write on MongoDB collection 'c': 1 write errors, codes [11000]"
    refused = seen["refused"]
    assert (refused.collection, refused.method, refused.code) == ("c", "drop_index", 27)
    assert seen["after"] == {"_id": "n", "v": 1}
    # bytes are stored as binary subtype 0 and read back as bytes
    assert seen["docs"] == [{"_id": "a", "x": b"\x00\x01"}, {"_id": "b", "y": 1},
                            {"_id": "c", "z": 1}, {"_id": "n", "v": 1}]
    assert type(seen["docs"][0]["x"]) is bytes
    assert seen["deleted"] == 4


def test_the_models_round_trip_with_blocking_pymongo(mongo_url: str) -> None:
    name = str(unique_options()["database"])
    with pymongo.MongoClient(mongo_url) as client:
        try:
            _check(run_sync(_round_trip(), Clients(None, client[name], {})))
        finally:
            client.drop_database(name)


@pytest.mark.parametrize("kind", ["pymongo", "motor"])
async def test_the_models_round_trip_with_asyncio_clients(mongo_url: str, kind: str) -> None:
    name = str(unique_options()["database"])
    client: Any = (pymongo.AsyncMongoClient(mongo_url) if kind == "pymongo"
                   else motor_asyncio.AsyncIOMotorClient(mongo_url))
    try:
        _check(await run_async(_round_trip(), Clients(None, client[name], {})))
    finally:
        await client.drop_database(name)
        close = client.close()
        if close is not None:
            await close
