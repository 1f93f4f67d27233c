"""Hostile input: each case names the exact exception and message (or the exact answer
InMemorySaver gives), and then checks that what was stored before is intact and the thread
still resumable (a real LangGraph graph continues from its stored state).

``tests/test_errors.py`` holds 17 more cases (bad thread_ids, unserializable channel value,
max_value_bytes, put_writes without checkpoint_id, operator filter keys, corrupt and
newer-schema records, outbox full, closed saver, sync call in the loop, Redis down); none is
repeated here.
"""

from __future__ import annotations

import dataclasses
import operator
import socket
from typing import Annotated, Any

import ormsgpack
import pytest
import redis
from langgraph.checkpoint.base import empty_checkpoint
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer
from langgraph.graph import END, START, StateGraph
from typing_extensions import TypedDict

from faults.common import thread_answers, tuple_form
from langgraph_durable import DurableSaver, InvalidIdentifierError, SerializationError
from langgraph_durable.testing import unique_options

T = {"configurable": {"thread_id": "t"}}
MB = 1 << 20
DEFAULT_MAX = 256 * MB  # DurableConfig.max_value_bytes


# --------------------------------------------------------------------------- fixtures


class Counter(TypedDict, total=False):
    n: int
    log: Annotated[list[str], operator.add]


def counter_graph(saver: Any) -> Any:
    def inc(state: Counter) -> dict[str, Any]:
        return {"n": state.get("n", 0) + 1, "log": [f"inc to {state.get('n', 0) + 1}"]}

    g = StateGraph(Counter)
    g.add_node("inc", inc)
    g.add_edge(START, "inc")
    g.add_edge("inc", END)
    return g.compile(checkpointer=saver)


class Guarded:
    """A saver with thread "t" stored by a real graph run, and the answers it gave."""

    def __init__(self, saver: DurableSaver) -> None:
        self.saver = saver
        self.graph = counter_graph(saver)
        self.graph.invoke({"n": 0, "log": ["start"]}, T)
        saver.flush()
        self.before = thread_answers(saver, "t")

    def assert_intact_and_resumable(self) -> None:
        assert thread_answers(self.saver, "t") == self.before  # nothing of "t" changed
        n = self.graph.get_state(T).values["n"]
        out = self.graph.invoke({"log": ["again"]}, T)  # resumes from the stored state
        assert out["n"] == n + 1 and out["log"][-2:] == ["again", f"inc to {n + 1}"]


@pytest.fixture
def g(redis_url: str, mongo_url: str) -> Any:
    with DurableSaver.from_urls(redis_url, mongo_url, **unique_options()) as saver:
        yield Guarded(saver)


def cp_with(values: dict[str, Any], step: int = 1) -> tuple[dict, dict]:
    cp = empty_checkpoint()
    cp["channel_values"] = dict(values)
    versions = {ch: f"{step:032}.0" for ch in values}
    cp["channel_versions"] = dict(versions)
    return cp, versions


def put(saver: Any, cfg: dict, values: dict[str, Any], md: dict | None = None,
        cp: dict | None = None) -> dict:
    c, versions = cp_with(values)
    if cp is not None:
        c["id"] = cp["id"]
    return saver.put(cfg, c, md if md is not None else {"step": 1}, versions)


def cold(saver: DurableSaver) -> None:
    """Everything to MongoDB, then Redis forgets the saver's threads."""
    saver.flush()
    r = saver.sync_clients.redis
    keys = list(r.scan_iter(match="{" + saver.context.config.key_prefix + ":*"))
    if keys:
        r.delete(*keys)


H = {"configurable": {"thread_id": "h", "checkpoint_ns": ""}}


# --------------------------------------------------------------------------- metadata


def test_dollar_and_dotted_metadata_keys_round_trip_unchanged_hot_and_cold(g) -> None:
    md = {"step": 1, "$where": "sleep(1000)", "a.b": {"$gt": 1}, "$": "$$", "x.y.z": [".", "$"]}
    put(g.saver, H, {"v": 1}, md)
    assert g.saver.get_tuple(H).metadata == md
    cold(g.saver)
    assert g.saver.get_tuple(H).metadata == md
    assert [t.metadata for t in g.saver.list(H, filter={"$where": "sleep(1000)"})] == [md]
    assert [t.metadata for t in g.saver.list(H, filter={"a.b": {"$gt": 1}})] == [md]
    assert list(g.saver.list(H, filter={"a": {"b": {"$gt": 1}}})) == []  # not a path
    g.assert_intact_and_resumable()


def test_filter_on_a_long_metadata_string_matches_hot_and_cold(g) -> None:
    md = {"step": 1, "note": "n" * 5000, "who": "x"}
    cfg = put(g.saver, H, {"v": 1}, md)
    assert [t.config for t in g.saver.list(H, filter={"note": "n" * 5000})] == [cfg]
    cold(g.saver)  # MongoDB alone: the long text is not in the queryable copy
    assert [t.config for t in g.saver.list(H, filter={"note": "n" * 5000})] == [cfg]
    assert [t.config for t in g.saver.list(H, filter={"note": "n" * 5000, "who": "x"})] == [cfg]
    g.assert_intact_and_resumable()


def test_non_string_metadata_keys_round_trip_as_in_memory_saver(g) -> None:
    md = {"step": 1, 5: "five", 2.5: "x"}
    mem = InMemorySaver()
    put(mem, H, {"v": 1}, md)
    put(g.saver, H, {"v": 1}, md)
    assert g.saver.get_tuple(H).metadata == mem.get_tuple(H).metadata
    assert len(list(g.saver.list(H, filter={5: "five"}))) == 1
    g.assert_intact_and_resumable()


def test_unserializable_metadata_names_the_checkpoint_and_writes_nothing(g) -> None:
    c, versions = cp_with({"v": 1})
    with pytest.raises(SerializationError, match=(
            rf"^cannot serialize metadata of checkpoint '{c['id']}' of thread 'h': value of "
            r"type builtins\.dict: Type is not msgpack serializable: socket$")):
        g.saver.put(H, c, {"step": 1, "sock": socket.socket()}, versions)
    assert g.saver.get_tuple(H) is None
    g.assert_intact_and_resumable()


# --------------------------------------------------------------------------- safety


CALLS: list[Any] = []


@dataclasses.dataclass
class Sentinel:
    """Not on any msgpack allowlist; constructing it has a visible side effect."""

    x: int

    def __post_init__(self) -> None:
        CALLS.append(self.x)


@pytest.fixture
def strict(redis_url: str, mongo_url: str) -> Any:
    """A saver whose serializer has LANGGRAPH_STRICT_MSGPACK semantics (built-in allowlist
    only; what the environment variable selects)."""
    serde = JsonPlusSerializer(allowed_msgpack_modules=None)
    with DurableSaver.from_urls(redis_url, mongo_url, serde=serde, **unique_options()) as s:
        yield Guarded(s)


def test_class_off_the_allowlist_is_decoded_as_plain_data_never_constructed(strict) -> None:
    put(strict.saver, H, {"v": Sentinel(7)})
    CALLS.clear()
    assert strict.saver.get_tuple(H).checkpoint["channel_values"] == {"v": {"x": 7}}
    cold(strict.saver)
    assert strict.saver.get_tuple(H).checkpoint["channel_values"] == {"v": {"x": 7}}
    assert CALLS == []  # __post_init__ never ran
    strict.assert_intact_and_resumable()


def boom(arg: Any) -> None:  # what a hostile payload would like to call
    CALLS.append(("boom", arg))


def test_crafted_call_payload_in_redis_is_never_executed(strict, redis_url: str) -> None:
    cfg = put(strict.saver, H, {"v": 1})
    strict.saver.flush()
    evil = ormsgpack.packb(ormsgpack.Ext(0, ormsgpack.packb(
        ("test_hostile_input", "boom", "rm -rf /"))))  # module, callable, argument
    r = redis.Redis.from_url(redis_url)
    keys = strict.saver.context.keys("h")
    field = next(f for f in r.hkeys(keys.bl) if f.split(b"\x00")[1] == b"v")
    r.hset(keys.bl, field, ormsgpack.packb([1, "msgpack", evil]))  # a blob envelope
    r.close()
    CALLS.clear()
    # blocked: the argument comes back as plain data; the callable is never called
    assert strict.saver.get_tuple(cfg).checkpoint["channel_values"] == {"v": "rm -rf /"}
    assert CALLS == []
    strict.assert_intact_and_resumable()


# --------------------------------------------------------------------------- sizes


def test_channel_value_over_max_value_bytes_is_refused_before_anything_is_written(g) -> None:
    with pytest.raises(SerializationError, match=(
            r"^channel 'v' \(ns ''\) of thread 'h' is 269484037 bytes serialized, over "
            rf"max_value_bytes={DEFAULT_MAX}$")):
        put(g.saver, H, {"small": 1, "v": "x" * (DEFAULT_MAX + MB)})
    assert g.saver.get_tuple(H) is None
    assert g.saver.sync_clients.redis.xlen(g.saver.context.outbox) == 0  # no outbox entry either
    g.assert_intact_and_resumable()


def test_write_over_max_value_bytes_names_channel_and_task_and_writes_nothing(g) -> None:
    cfg = put(g.saver, H, {"v": 1})
    with pytest.raises(SerializationError, match=(
            r"^write to channel 'big' by task 'task-9' of thread 'h' is 269484037 bytes "
            rf"serialized, over max_value_bytes={DEFAULT_MAX}$")):
        g.saver.put_writes(cfg, [("ok", 1), ("big", "x" * (DEFAULT_MAX + MB))], "task-9")
    assert g.saver.get_tuple(cfg).pending_writes == []  # not even the small one
    g.assert_intact_and_resumable()


def test_checkpoint_over_16_mb_in_total_is_stored_as_separate_blobs(g) -> None:
    values = {"a": "a" * (9 * MB), "b": "b" * (9 * MB)}
    cfg = put(g.saver, H, values)
    cold(g.saver)  # each blob is its own MongoDB document, under 16 MB
    assert g.saver.get_tuple(cfg).checkpoint["channel_values"] == values
    g.assert_intact_and_resumable()


def test_large_metadata_text_is_stored_once_and_flushes(g) -> None:
    # a 9 MB metadata string: kept in the serialized metadata only (long text is not copied
    # into the queryable md pairs), so the MongoDB document stays under 16 MB and flushes
    cfg = put(g.saver, H, {"v": 1}, {"step": 1, "note": "n" * (9 * MB)})
    g.saver.flush(timeout_s=60)
    assert g.saver.get_tuple(H).metadata["note"] == "n" * (9 * MB)
    doc = g.saver.sync_clients.db[g.saver.context.collections.checkpoints].find_one(
        {"checkpoint_id": cfg["configurable"]["checkpoint_id"]})
    assert [kv["k"] for kv in doc["md"]] == ["step"]
    assert [t.metadata["step"] for t in g.saver.list(H, filter={"note": "n" * (9 * MB)})] == [1]
    g.assert_intact_and_resumable()


def test_deeply_nested_value_is_refused_naming_the_channel(g) -> None:
    deep: list[Any] = []
    cur = deep
    for _ in range(2000):
        cur.append([])
        cur = cur[0]
    with pytest.raises(SerializationError, match=(
            r"^cannot serialize item 0 of channel 'v' \(ns ''\) of thread 'h': value of type "
            r"builtins\.list: Recursion limit reached$")):
        put(g.saver, H, {"v": deep})
    assert g.saver.get_tuple(H) is None
    g.assert_intact_and_resumable()


# --------------------------------------------------------------------------- identifiers


@pytest.mark.parametrize("thread_id, message", [
    (True, "thread_id must be a str, int or UUID, got bool"),
    (1.5, "thread_id must be a str, int or UUID, got float"),
])
def test_bool_and_float_thread_ids_are_refused(g, thread_id, message) -> None:
    with pytest.raises(InvalidIdentifierError, match=f"^{message}$"):
        put(g.saver, {"configurable": {"thread_id": thread_id}}, {"v": 1})
    g.assert_intact_and_resumable()


def test_thread_id_with_a_lone_surrogate_is_refused_as_invalid(g) -> None:
    with pytest.raises(InvalidIdentifierError, match="thread_id"):
        put(g.saver, {"configurable": {"thread_id": "bad\ud800"}}, {"v": 1})
    g.assert_intact_and_resumable()


def test_config_without_configurable_is_refused(g) -> None:
    with pytest.raises(InvalidIdentifierError, match=(
            r"^config\['configurable'\]\['thread_id'\] is required by DurableSaver$")):
        g.saver.get_tuple({})
    g.assert_intact_and_resumable()


def test_empty_string_thread_id_is_a_thread_like_any_other(g) -> None:
    cfg = put(g.saver, {"configurable": {"thread_id": ""}}, {"v": "empty"})
    assert cfg["configurable"]["thread_id"] == ""
    cold(g.saver)
    got = g.saver.get_tuple({"configurable": {"thread_id": ""}})
    assert got.checkpoint["channel_values"] == {"v": "empty"}
    g.assert_intact_and_resumable()


@pytest.mark.parametrize("ns", ["子图:1|ñ", "a:1|b:2|c:3", "x" * 4096])
def test_unicode_nested_and_long_checkpoint_ns_round_trip(g, ns) -> None:
    cfg = put(g.saver, {"configurable": {"thread_id": "h", "checkpoint_ns": ns}}, {"v": ns[:9]})
    assert cfg["configurable"]["checkpoint_ns"] == ns
    cold(g.saver)
    got = g.saver.get_tuple({"configurable": {"thread_id": "h", "checkpoint_ns": ns}})
    assert got.config == cfg and got.checkpoint["channel_values"] == {"v": ns[:9]}
    g.assert_intact_and_resumable()


def test_none_checkpoint_ns_is_the_root_namespace(g) -> None:
    cfg = put(g.saver, {"configurable": {"thread_id": "h", "checkpoint_ns": None}}, {"v": 1})
    assert cfg["configurable"]["checkpoint_ns"] == ""
    assert g.saver.get_tuple(H).config == cfg
    g.assert_intact_and_resumable()


def test_checkpoint_ns_with_nul_is_refused(g) -> None:
    with pytest.raises(InvalidIdentifierError, match=(
            r"^checkpoint_ns of thread 'h' contains a NUL character: 'a\\x00b'$")):
        put(g.saver, {"configurable": {"thread_id": "h", "checkpoint_ns": "a\x00b"}}, {"v": 1})
    g.assert_intact_and_resumable()


def test_an_identifier_at_the_length_limit_round_trips_and_one_byte_more_is_refused(g) -> None:
    # 65,536 bytes in UTF-8 (records.MAX_ID_BYTES); a 9 MB thread_id used to be taken by
    # put, then dead-lettered, each error message repeating it whole
    longest = "é" * 32_768  # 2 bytes each
    cfg = put(g.saver, {"configurable": {"thread_id": longest}}, {"v": "long"})
    cold(g.saver)
    got = g.saver.get_tuple({"configurable": {"thread_id": longest}})
    assert got.config == cfg and got.checkpoint["channel_values"] == {"v": "long"}
    with pytest.raises(InvalidIdentifierError, match=(
            r"^thread_id is 65,537 bytes in UTF-8, over the 65,536-byte limit of an "
            r"identifier: 'éééé")):
        put(g.saver, {"configurable": {"thread_id": longest + "x"}}, {"v": 1})
    with pytest.raises(InvalidIdentifierError, match=(
            r"^checkpoint_ns of thread 'h' is 9,437,184 bytes in UTF-8, over the")):
        put(g.saver, {"configurable": {"thread_id": "h", "checkpoint_ns": "n" * (9 << 20)}},
            {"v": 1})
    with pytest.raises(InvalidIdentifierError, match=r"^thread_id is 65,537 bytes"):
        g.saver.copy_thread(longest, longest + "x")
    assert g.saver.get_tuple(H) is None
    g.assert_intact_and_resumable()


def test_channel_name_with_nul_is_refused_in_put(g) -> None:
    with pytest.raises(InvalidIdentifierError, match=(
            r"^channel of thread 'h' contains a NUL character: 'a\\x00b'$")):
        put(g.saver, H, {"a\x00b": 1})
    assert g.saver.get_tuple(H) is None
    g.assert_intact_and_resumable()


def test_channel_name_with_nul_in_a_write_is_data_and_round_trips(g) -> None:
    cfg = put(g.saver, H, {"v": 1})
    g.saver.put_writes(cfg, [("a\x00b", 1)], "task")
    cold(g.saver)
    assert g.saver.get_tuple(cfg).pending_writes == [("task", "a\x00b", 1)]
    g.assert_intact_and_resumable()


def test_checkpoint_id_with_nul_is_refused(g) -> None:
    with pytest.raises(InvalidIdentifierError, match=(
            r"^checkpoint_id of thread 't' contains a NUL character: 'x\\x00y'$")):
        g.saver.get_tuple({"configurable": {"thread_id": "t", "checkpoint_id": "x\x00y"}})
    g.assert_intact_and_resumable()


@pytest.mark.parametrize("task_id, kind", [(["t"], "list"), (None, "NoneType"),
                                           (b"t", "bytes")])
def test_non_string_task_ids_are_refused(g, task_id, kind) -> None:
    cfg = put(g.saver, H, {"v": 1})
    with pytest.raises(InvalidIdentifierError, match=(
            rf"^task_id must be a str, int or UUID, got {kind} \(thread 'h'\)$")):
        g.saver.put_writes(cfg, [("v", 2)], task_id)
    assert g.saver.get_tuple(cfg).pending_writes == []
    g.assert_intact_and_resumable()


async def test_async_put_writes_refuses_a_bad_task_id_the_same_way(g) -> None:
    cfg = put(g.saver, H, {"v": 1})
    with pytest.raises(InvalidIdentifierError, match=(
            r"^task_id must be a str, int or UUID, got list \(thread 'h'\)$")):
        await g.saver.aput_writes(cfg, [("v", 2)], ["bad"])
    g.assert_intact_and_resumable()


def test_unserializable_write_names_channel_and_task_and_stores_none_of_the_call(g) -> None:
    cfg = put(g.saver, H, {"v": 1})
    with pytest.raises(SerializationError, match=(
            r"^cannot serialize write to channel 'w' by task 'task-1' of thread 'h': value "
            r"of type socket\.socket: Type is not msgpack serializable: socket$")):
        g.saver.put_writes(cfg, [("ok", 1), ("w", socket.socket())], "task-1")
    assert g.saver.get_tuple(cfg).pending_writes == []
    g.assert_intact_and_resumable()


# --------------------------------------------------------------------------- odd calls


def test_put_writes_for_a_checkpoint_that_does_not_exist_is_accepted_and_invisible(g) -> None:
    ghost = {"configurable": {"thread_id": "h", "checkpoint_ns": "",
                              "checkpoint_id": "1f000000-0000-6000-8000-000000000000"}}
    mem = InMemorySaver()
    for s in (mem, g.saver):
        assert s.put_writes(ghost, [("v", 1)], "task") is None
        assert s.get_tuple(ghost) is None and list(s.list(H)) == []
    g.assert_intact_and_resumable()


def test_put_writes_with_no_writes_is_a_no_op(g) -> None:
    cfg = put(g.saver, H, {"v": 1})
    outbox = g.saver.sync_clients.redis.xlen(g.saver.context.outbox)
    assert g.saver.put_writes(cfg, [], "task") is None
    assert g.saver.sync_clients.redis.xlen(g.saver.context.outbox) == outbox
    g.assert_intact_and_resumable()


def test_get_tuple_of_an_unknown_checkpoint_id_is_none(g) -> None:
    missing = {"configurable": {"thread_id": "t", "checkpoint_ns": "",
                                "checkpoint_id": "1f000000-0000-6000-8000-000000000001"}}
    assert g.saver.get_tuple(missing) is None
    g.assert_intact_and_resumable()


def _twins(saver: DurableSaver) -> tuple[InMemorySaver, list[dict]]:
    """The same three checkpoints (same ids) in InMemorySaver and in ``saver``."""
    mem = InMemorySaver()
    cfgs = []
    cfg_m: dict = dict(H)
    cfg_d: dict = dict(H)
    for i, md in enumerate([{"step": 0, "tags": ["a"]}, {"step": 1, "tags": ["a", "b"],
                                                          "big": 2**63 + 5},
                            {"step": 2, "q": {"$gt": 1}}]):
        c, versions = cp_with({"v": i}, i + 1)
        cfg_m = mem.put(cfg_m, c, md, versions)
        cfg_d = saver.put(cfg_d, c, md, versions)
        cfgs.append(cfg_d)
    return mem, cfgs


def _same(mem: InMemorySaver, saver: DurableSaver, **kw: Any) -> list[str]:
    a = [tuple_form(t) for t in mem.list(H, **kw)]
    b = [tuple_form(t) for t in saver.list(H, **kw)]
    assert a == b
    return b


@pytest.mark.parametrize("flt, n", [({"tags": ["a", "b"]}, 1), ({"tags": ["a"]}, 1),
                                    ({"q": {"$gt": 1}}, 1), ({"big": 2**63 + 5}, 1),
                                    ({"tags": "a"}, 0), ({"step": 1.0}, 1)])
def test_list_filter_with_non_scalar_values_matches_as_in_memory_saver(g, flt, n) -> None:
    mem, _ = _twins(g.saver)
    assert len(_same(mem, g.saver, filter=flt)) == n
    cold(g.saver)
    assert len(_same(mem, g.saver, filter=flt)) == n
    g.assert_intact_and_resumable()


@pytest.mark.parametrize("before", ["zzzz", "0", "1f000000", "middle"])
def test_list_before_an_id_that_does_not_exist_as_in_memory_saver(g, before) -> None:
    mem, cfgs = _twins(g.saver)
    if before == "middle":  # between the 2nd and 3rd ids, equal to neither
        before = cfgs[1]["configurable"]["checkpoint_id"] + "0"
    _same(mem, g.saver, before={"configurable": {"checkpoint_id": before}})
    g.assert_intact_and_resumable()


@pytest.mark.parametrize("limit", [0, -1, -100])
def test_list_with_zero_or_negative_limit_is_empty(g, limit) -> None:
    mem, _ = _twins(g.saver)
    assert _same(mem, g.saver, limit=limit) == []
    g.assert_intact_and_resumable()


def test_prune_with_an_unknown_strategy_is_refused_and_deletes_nothing(g) -> None:
    with pytest.raises(ValueError, match=(
            r"^prune strategy must be 'keep_latest' or 'delete', got 'everything'$")):
        g.saver.prune(["t"], strategy="everything")
    g.assert_intact_and_resumable()


def test_copy_thread_onto_itself_changes_nothing(g) -> None:
    g.saver.copy_thread("t", "t")
    g.assert_intact_and_resumable()


def test_copy_thread_from_a_thread_that_does_not_exist_leaves_the_target_alone(g) -> None:
    g.saver.copy_thread("nobody", "t")
    g.assert_intact_and_resumable()


def test_delete_of_a_thread_that_does_not_exist_is_a_no_op(g) -> None:
    g.saver.delete_thread("nobody")
    g.saver.delete_for_runs([])
    g.saver.delete_for_runs(["no-such-run"])
    g.saver.prune([])
    g.assert_intact_and_resumable()
