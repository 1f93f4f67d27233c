"""The one place the package's MongoDB models (``core.ops``) become PyMongo's, and
PyMongo's results and errors become the package's, for the sync and the async driver
alike (``io/drivers.py``)."""

from __future__ import annotations

from typing import Any

import bson
from bson.raw_bson import RawBSONDocument
from pymongo import DeleteOne, IndexModel, InsertOne, ReplaceOne, ReturnDocument, UpdateOne
from pymongo.errors import BulkWriteError

from ..core.ops import (
    BulkResult,
    BulkWrite,
    BulkWriteFailed,
    DeleteDoc,
    DeleteMany,
    Doc,
    Index,
    InsertDoc,
    Mongo,
    MongoOp,
    ReplaceDoc,
    UpdateDoc,
    WriteFailure,
    WriteModel,
)
from ..plans.context import DocCodec


def is_cursor(op: MongoOp[Any]) -> bool:
    """True when ``op``'s method returns a cursor (its reply is the list of documents)."""
    return op.is_cursor if isinstance(op, Mongo) else type(op).cursor


def to_pymongo(model: WriteModel | Index) -> Any:
    """PyMongo's write model (``InsertOne``, ``ReplaceOne``, ``UpdateOne``, ``DeleteOne``)
    or ``IndexModel`` for one of the package's; raises ``TypeError`` for anything else.
    Public for tools that call PyMongo themselves (``cli/transfer.py``)."""
    t = type(model)
    if t is InsertDoc:  # the flusher's most common model: first
        assert isinstance(model, InsertDoc)
        return InsertOne(model.doc)
    if t is UpdateDoc:
        assert isinstance(model, UpdateDoc)
        return UpdateOne(model.filter, model.update, upsert=model.upsert)
    if t is ReplaceDoc:
        assert isinstance(model, ReplaceDoc)
        return ReplaceOne(model.filter, model.doc, upsert=model.upsert)
    if t is DeleteDoc:
        assert isinstance(model, DeleteDoc)
        return DeleteOne(model.filter)
    if t is Index:
        assert isinstance(model, Index)
        kw: dict[str, Any] = {"name": model.name}
        if model.sparse:
            kw["sparse"] = True
        if model.unique:
            kw["unique"] = True
        if model.expire_after_s is not None:
            kw["expireAfterSeconds"] = model.expire_after_s
        return IndexModel(list(model.keys), **kw)
    raise TypeError(f"not a MongoDB write model or index: {model!r}")


_MODELS = (InsertDoc, ReplaceDoc, UpdateDoc, DeleteDoc, Index)


def mongo_call(op: MongoOp[Any]) -> tuple[tuple[Any, ...], dict[str, Any]]:
    """``op.call()`` with the package's models made PyMongo's: a list argument of write
    models or indexes, and ``return_document`` "after"/"before"."""
    args, kwargs = op.call()
    if any(isinstance(a, list) and a and isinstance(a[0], _MODELS) for a in args):
        args = tuple([InsertOne(m.doc) if type(m) is InsertDoc else to_pymongo(m)
                      for m in a] if isinstance(a, list) and a
                     and isinstance(a[0], _MODELS) else a for a in args)
    rd = kwargs.get("return_document")
    if isinstance(rd, str):
        kwargs["return_document"] = (ReturnDocument.AFTER if rd == "after"
                                     else ReturnDocument.BEFORE)
    return args, kwargs


def mongo_reply(op: MongoOp[Any], result: Any) -> Any:
    """A MongoDB reply as plans see it: ``BulkWrite`` -> ``BulkResult``, ``DeleteMany`` ->
    the deleted count; others unchanged."""
    if isinstance(op, BulkWrite):
        if not result.acknowledged:  # w=0: MongoDB tells no counts
            return BulkResult()
        return BulkResult(result.inserted_count, result.matched_count,
                          result.modified_count, result.deleted_count,
                          result.upserted_count)
    if isinstance(op, DeleteMany):
        return result.deleted_count if result.acknowledged else 0
    return result


def _failures(errors: Any) -> list[WriteFailure]:
    return [WriteFailure(int(e.get("index", -1)), int(e.get("code") or 0),
                         str(e.get("errmsg", "")), str(e.get("codeName", "")))
            for e in errors or []]


def bulk_write_failed(collection: str, exc: BulkWriteError) -> BulkWriteFailed:
    """PyMongo's ``BulkWriteError`` on ``collection`` as the package's ``BulkWriteFailed``
    (each write error's index, code and message; write-concern errors; the counts of what
    was applied)."""
    d = exc.details or {}
    result = BulkResult(int(d.get("nInserted", 0)), int(d.get("nMatched", 0)),
                        int(d.get("nModified", 0)), int(d.get("nRemoved", 0)),
                        int(d.get("nUpserted", 0)))
    return BulkWriteFailed(collection, _failures(d.get("writeErrors")),
                           _failures(d.get("writeConcernErrors")), result)


def _encoded(doc: Doc) -> Doc:
    """``doc`` encoded to BSON now (``bson.encode`` with PyMongo's default codec options:
    a flush round's documents hold text, numbers, bytes, lists and dicts only); PyMongo
    sends a ``RawBSONDocument`` as it is."""
    return RawBSONDocument(bson.encode(doc))  # type: ignore[return-value]


def _decoded(doc: Doc) -> Doc:
    """An ``_encoded`` document as a dict again (any other as it is)."""
    if isinstance(doc, RawBSONDocument):
        return bson.decode(doc.raw)
    return doc


BSON_DOCS = DocCodec(_encoded, _decoded)
"""The flush rounds' documents encoded to BSON as they are built (``plans.context.DocCodec``):
set on the contexts of every saver runtime and worker."""
