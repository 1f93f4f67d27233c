"""``saver.serde = ...`` after construction takes effect, as with LangGraph's savers.

Each test does the same calls on InMemorySaver (which reads ``self.serde`` at every call)
and compares the answers; what is stored is checked in the bytes of both tiers.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage
from langgraph.checkpoint.base import empty_checkpoint
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.checkpoint.serde.encrypted import EncryptedSerializer
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer
from pydantic import BaseModel

from langgraph_durable import DurableSaver
from langgraph_durable.durable import inline
from langgraph_durable.errors import ConfigurationError
from langgraph_durable.testing import drop_key_prefix, unique_options

ROOT = {"configurable": {"thread_id": "t", "checkpoint_ns": ""}}
KEY = b"0123456789abcdef"


class Note(BaseModel):
    """A type no allowlist names: a strict serializer gives its fields (a dict)."""

    text: str


def _put(saver: Any, cfg: dict[str, Any], values: dict[str, Any], step: int,
         writes: Sequence[tuple[str, Any]] = (), **md: Any) -> dict[str, Any]:
    cp = empty_checkpoint()
    cp["channel_values"] = dict(values)
    cp["channel_versions"] = {ch: f"{step + 1:032}.0" for ch in values}
    saved = saver.put(cfg, cp, {"step": step, **md}, dict(cp["channel_versions"]))
    if writes:
        saver.put_writes(saved, list(writes), "task-1")
    return saved


def _answer(tup: Any) -> Any:
    return tup.checkpoint["channel_values"], [(c, v) for _t, c, v in tup.pending_writes]


def _cold(saver: DurableSaver, redis_client: Any) -> None:
    """Flush, then empty Redis of the saver's keys: reads come from MongoDB alone."""
    saver.flush()
    drop_key_prefix(redis_client, saver.config.key_prefix)
    saver.context.items.forget("t")


NOTES = {"notes": [Note(text="a"), Note(text="b")], "one": Note(text="c")}
NOTE_WRITES = [("notes", [Note(text="w")])]


def test_a_strict_allowlist_assigned_after_construction_refuses_unlisted_types(
        saver: DurableSaver, redis_client: Any) -> None:
    """Read once with the default serializer (the saver keeps the decoded Notes to rebuild
    them), then assign a strict one: Notes are no longer made, hot or cold, from items
    (``notes``) or whole values (``one``), in channel values and pending writes."""
    ref = InMemorySaver()
    for s in (ref, saver):
        _put(s, ROOT, NOTES, 0, NOTE_WRITES)
        assert _answer(s.get_tuple(ROOT)) == (NOTES, NOTE_WRITES)
        s.serde = JsonPlusSerializer(allowed_msgpack_modules=None)
    want = ({"notes": [{"text": "a"}, {"text": "b"}], "one": {"text": "c"}},
            [("notes", [{"text": "w"}])])
    assert _answer(ref.get_tuple(ROOT)) == want
    assert saver.context.serde is saver.serde
    assert _answer(saver.get_tuple(ROOT)) == want
    assert saver.last_read_tier == "hot"
    assert [_answer(t) for t in saver.list(ROOT)] == [want]
    _cold(saver, redis_client)
    assert _answer(saver.get_tuple(ROOT)) == want
    assert saver.last_read_tier == "durable"


async def test_a_strict_allowlist_assigned_after_construction_refuses_async(
        asaver: DurableSaver) -> None:
    cp = empty_checkpoint()
    cp["channel_values"] = dict(NOTES)
    cp["channel_versions"] = {"notes": "1", "one": "1"}
    saved = await asaver.aput(ROOT, cp, {"step": 0}, {"notes": "1", "one": "1"})
    await asaver.aput_writes(saved, NOTE_WRITES, "task-1")
    assert _answer(await asaver.aget_tuple(ROOT)) == (NOTES, NOTE_WRITES)
    asaver.serde = JsonPlusSerializer(allowed_msgpack_modules=None)
    assert _answer(await asaver.aget_tuple(ROOT)) == (
        {"notes": [{"text": "a"}, {"text": "b"}], "one": {"text": "c"}},
        [("notes", [{"text": "w"}])])


def test_a_copy_with_an_allowlist_made_after_the_assignment_allows_its_types(
        saver: DurableSaver) -> None:
    _put(saver, ROOT, NOTES, 0, NOTE_WRITES)
    saver.serde = JsonPlusSerializer(allowed_msgpack_modules=None)
    clone = saver.with_allowlist([(__name__, "Note")])
    assert clone is not saver and clone.context.serde is clone.serde
    assert clone.context.heads is saver.context.heads
    assert _answer(clone.get_tuple(ROOT)) == (NOTES, NOTE_WRITES)


SECRETS = (b"secret-value", b"secret-user", b"secret-message", b"secret-write")


def _stored_bytes(saver: DurableSaver, redis_client: Any) -> tuple[bytes, bytes]:
    """Everything the thread's Redis hashes and the saver's MongoDB collections hold."""
    hot = b"".join(v for k in saver.context.keys("t").all if redis_client.type(k) == b"hash"
                   for v in redis_client.hgetall(k).values())
    db = saver.sync_clients.db
    cols = saver.context.collections
    cold = b"".join(str(d).encode() for name in (cols.checkpoints, cols.blobs, cols.writes,
                                                 cols.items) for d in db[name].find({}))
    return hot, cold


def test_an_encrypted_serializer_assigned_after_construction_encrypts_what_is_stored(
        redis_url: str, mongo_url: str, redis_client: Any) -> None:
    """No plaintext value, metadata, message or write in either tier; items encrypted one
    by one with keyed digests; reads equal InMemorySaver's, hot and cold, and a saver
    constructed with the same EncryptedSerializer reads the same."""
    values = {"v": "secret-value",
              "messages": [HumanMessage("secret-message 1", id="h1"),
                           AIMessage("secret-message 2", id="a1")]}
    writes = [("v", "secret-write"), ("messages", [HumanMessage("secret-write 2", id="h2")])]
    ref = InMemorySaver()
    ref.serde = EncryptedSerializer.from_pycryptodome_aes(key=KEY)
    _put(ref, ROOT, values, 0, writes, user="secret-user")
    want = _answer(ref.get_tuple(ROOT))
    opts = unique_options()
    with DurableSaver.from_urls(redis_url, mongo_url, **opts) as s:
        s.serde = EncryptedSerializer.from_pycryptodome_aes(key=KEY)
        assert s.context.queryable is False and s.context.items.enabled
        _put(s, ROOT, values, 0, writes, user="secret-user")
        assert _answer(s.get_tuple(ROOT)) == want
        assert [t.metadata["user"] for t in s.list(ROOT, filter={"user": "secret-user"})] \
            == ["secret-user"]
        s.flush()
        hot, cold = _stored_bytes(s, redis_client)
        assert len(hot) > 0 and len(cold) > 0
        for secret in SECRETS:
            assert secret not in hot and secret not in cold
        items = list(s.sync_clients.db[s.context.collections.items].find({"thread_id": "t"}))
        assert len(items) == 3 and all(d["type"].endswith("+aes") for d in items)
        _cold(s, redis_client)
        assert _answer(s.get_tuple(ROOT)) == want
    serde = EncryptedSerializer.from_pycryptodome_aes(key=KEY)
    with DurableSaver.from_urls(redis_url, mongo_url, serde=serde, **opts) as again:
        assert _answer(again.get_tuple(ROOT)) == want


def test_messages_serialized_before_the_assignment_are_stored_again_by_the_new_one(
        saver: DurableSaver) -> None:
    """The saver remembers the bytes of the messages it serialized: after an
    EncryptedSerializer is assigned, a put of the same message objects stores them
    encrypted under keyed digests; what was stored before stays as it was."""
    msgs = [HumanMessage("hello there", id="h1")]
    ref = InMemorySaver()
    for s in (ref, saver):
        first = _put(s, ROOT, {"messages": msgs}, 0)
        s.serde = EncryptedSerializer.from_pycryptodome_aes(key=KEY)
        _put(s, first, {"messages": [*msgs, AIMessage("hi", id="a1")]}, 1)
    assert [_answer(t) for t in saver.list(ROOT)] == [_answer(t) for t in ref.list(ROOT)]
    saver.flush()
    db = saver.sync_clients.db
    cols = saver.context.collections
    blobs = {inline.split_key(e["k"])[1]: e["refs"]  # the manifests, inside checkpoints
             for d in db[cols.checkpoints].find({"thread_id": "t"}) for e in d["vals"]}
    assert db[cols.blobs].count_documents({"thread_id": "t"}) == 0
    kinds = {bytes(d["d"]): d["type"] for d in db[cols.items].find({"thread_id": "t"})}
    assert len(kinds) == 3  # h1 plain, then h1 and a1 encrypted
    assert [kinds[bytes(r)] for r in blobs[f"{1:032}.0"]] == ["msgpack"]
    assert [kinds[bytes(r)] for r in blobs[f"{2:032}.0"]] == ["msgpack+aes", "msgpack+aes"]


@pytest.mark.parametrize("value", [None, "msgpack", object()],
                         ids=["None", "a string", "an object"])
def test_assigning_something_that_is_not_a_serializer_is_refused_and_changes_nothing(
        saver: DurableSaver, value: Any) -> None:
    serde, ctx = saver.serde, saver.context
    with pytest.raises(ConfigurationError, match=r"DurableSaver\.serde must be a LangGraph "
                       rf"serializer .*key prefix '{saver.config.key_prefix}'"):
        saver.serde = value
    assert saver.serde is serde and saver.context is ctx
    _put(saver, ROOT, {"v": [1, 2]}, 0)
    assert saver.get_tuple(ROOT).checkpoint["channel_values"] == {"v": [1, 2]}
