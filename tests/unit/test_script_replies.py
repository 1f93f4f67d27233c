"""Typed script replies and the outbox entry: the only places that know positions."""

from __future__ import annotations

import re

import ormsgpack
import pytest

from langgraph_durable.core.ops import Refusal
from langgraph_durable.core.outbox_entry import OutboxEntry
from langgraph_durable.errors import ScriptRefused
from langgraph_durable.hot import lua
from langgraph_durable.hot.binding_scripts import BindArgs, Binding
from langgraph_durable.hot.effect_scripts import BeginReply
from langgraph_durable.hot.flusher_scripts import (
    BeatArgs,
    LastNodeArgs,
    ReapArgs,
    ReapReply,
    UpkeepReply,
)
from langgraph_durable.hot.registry_scripts import ClaimReply
from langgraph_durable.hot.scripts import (
    SCRIPTS,
    WRITE_REFUSALS,
    AckSettleReply,
    ChainReply,
    ChainRow,
    ChainStatus,
    DeadReplayReply,
    DeleteThreadReply,
    PageReply,
    PageRow,
    PartsReply,
    PutReply,
    chain_op,
    page_op,
)


def test_put_replies_the_entry_id_alone_or_with_the_newest_checkpoint_id() -> None:
    assert PutReply.of(b"1-0") == PutReply(b"1-0", None)
    assert PutReply.of([b"1-0", b"cid-9"]) == PutReply(b"1-0", "cid-9")


def test_page_reply_names_rows_values_completeness_and_items() -> None:
    raw = [[[b"\x00c1", b"rec", b"cv", [b"w1", None]]], [b"f"], [None], 1, [b"d" * 16], [b"i"]]
    assert PageReply.of(raw) == PageReply(
        rows=[PageRow(b"\x00c1", b"rec", b"cv", [b"w1", None])], blob_fields=[b"f"],
        blob_values=[None], complete=1, item_digests=[b"d" * 16], item_values=[b"i"])
    assert page_op(["k"] * 9, "[a", "[a", 1).reply_of(raw) == PageReply.of(raw)


def test_page_reply_rows_read_by_name_and_a_row_of_another_shape_is_refused() -> None:
    reply = PageReply.of([[[b"\x00c1", b"rec", b"cv", [b"w1"]]], [], [], 3, [], []])
    row = reply.rows[0]
    assert (row.member, row.record, row.index, row.write_values) == (
        b"\x00c1", b"rec", b"cv", [b"w1"])
    assert reply.complete == 3
    with pytest.raises(ValueError, match="3 elements, not 4"):
        PageReply.of([[[b"\x00c1", b"rec", b"cv"]], [], [], 0, [], []])


def test_chain_reply_pairs_each_rows_seeds_and_names_its_status() -> None:
    raw = [2, [[b"c1", b"cv", [], [b"f1", b"v1", b"f2", b"v2"], [b"f3"]]], b"c1", [], []]
    assert chain_op(["k"] * 9, "", "c2", 8, ["ch"]).reply_of(raw) == ChainReply(
        ChainStatus.BLOB_MISSING, [ChainRow(b"c1", b"cv", [], [(b"f1", b"v1"), (b"f2", b"v2")],
                                            [b"f3"])], "c1", [], [])


def test_the_other_replies_read_their_fields() -> None:
    assert PartsReply.of([[[b"w"]], [b"v"], [], []]) == PartsReply([[b"w"]], [b"v"], [], [])
    assert DeleteThreadReply.of([17, [b"\x00c1"]]) == DeleteThreadReply(17, ["\x00c1"])
    assert AckSettleReply.of([[1, 0], 5]) == AckSettleReply([True, False], 5)
    assert ClaimReply.of([b"", 3]).claimed and ClaimReply.of([b"", 3]).outbox_length == 3
    assert not ClaimReply.of([b"complete n", -1]).claimed
    assert BeginReply.of([b"ask"]) == BeginReply("ask", b"")
    assert BeginReply.of([b"new", b"00000001s.."]) == BeginReply("new", b"00000001s..")


def test_a_refusal_splits_its_code_from_its_detail() -> None:
    r = ScriptRefused.parse("put", "STALE_HEAD 1ef-cid")
    assert (r.script, r.code, r.detail) == ("put", "STALE_HEAD", "1ef-cid")
    assert (ScriptRefused.parse("put", "OUTBOX_FULL").code,
            ScriptRefused.parse("put", "OUTBOX_FULL").detail) == ("OUTBOX_FULL", "")


def test_a_refusal_code_is_its_enum_member_and_the_lua_refuses_with_no_other() -> None:
    code = ScriptRefused.parse("put", "STALE_HEAD 1ef-cid").code
    assert code == Refusal.STALE_HEAD
    assert code in WRITE_REFUSALS and "OUTBOX_FULL" in frozenset({Refusal.OUTBOX_FULL})
    assert [m.name for m in Refusal] == [m.value for m in Refusal] == [
        "OUTBOX_FULL", "DELETED", "UNKNOWN", "STALE_HEAD", "MISSING_ITEMS"]
    in_lua = {c for src in SCRIPTS.values()
              for c in re.findall(r"redis\.error_reply\('([A-Z_]+)", src)}
    assert in_lua == {m.value for m in Refusal}


def test_an_outbox_entry_packs_to_the_bytes_earlier_versions_wrote() -> None:
    entry = OutboxEntry("t-1", "cp", "\x00c1", ["\x00ch\x001"], [b"d" * 16], 42)
    assert entry.payload() == ormsgpack.packb(["cp", "\x00c1", ["\x00ch\x001"], [b"d" * 16], 42])
    assert entry.fields() == {b"t": b"t-1", b"p": entry.payload()}
    assert OutboxEntry.of(entry.fields()) == entry


def test_an_outbox_entry_of_an_older_version_reads_without_size_or_digests() -> None:
    fields = {b"t": b"t-1", b"p": ormsgpack.packb(["w", "\x00c1", ["f"]])}
    assert OutboxEntry.of(fields) == OutboxEntry("t-1", "w", "\x00c1", ["f"], [], None)
    fields = {b"t": b"t-1", b"p": ormsgpack.packb(["cp", "\x00c1", [], []])}
    assert OutboxEntry.of(fields).size is None


def test_ack_settle_names_the_threads_whose_settle_failed() -> None:
    # the third element: thread number (1-based, in the order sent), error text
    raw = [[1, 1, 1], 0, [2, b"WRONGTYPE Operation against a key"]]
    assert AckSettleReply.of(raw) == AckSettleReply(
        [True, True, True], 0, {1: "WRONGTYPE Operation against a key"})


def test_ack_settle_names_the_failed_threads_whose_counts_were_lowered() -> None:
    # the fourth element: thread numbers (1-based) whose settle lowered counts, then failed
    raw = [[1, 1], 0, [1, b"WRONGTYPE a", 2, b"WRONGTYPE b"], [2]]
    assert AckSettleReply.of(raw) == AckSettleReply(
        [True, True], 0, {0: "WRONGTYPE a", 1: "WRONGTYPE b"}, frozenset({1}))


def test_dead_replay_reply_names_its_status_and_new_entry() -> None:
    assert DeadReplayReply.of([b"ADDED", b"1-0"]) == DeadReplayReply("ADDED", "1-0")
    assert DeadReplayReply.of([b"REPLAYED", b""]) == DeadReplayReply("REPLAYED", "")


def test_the_flusher_scripts_name_their_keys_and_argv_and_decode_their_replies() -> None:
    beat = BeatArgs("{p:heartbeats}", "c1", 3000, 604_800_000, 100).op()
    assert (beat.name, list(beat.keys), list(beat.args)) == (
        "heartbeat_beat", ["{p:heartbeats}"], ["c1", 3000, 604_800_000, 100])
    assert beat.reply_of([b"c2", b"c3"]) == ["c2", "c3"]
    reap = ReapArgs("{p:p0.1}:outbox", "g", "me", 3000, 10, ["d1", "d2"]).op()
    assert list(reap.args) == ["g", "me", 3000, 10, "d1", "d2"]
    assert reap.reply_of([[[b"1-0", [b"t", b"x", b"p", b"y"]]], [b"d1"]]) == ReapReply(
        [(b"1-0", {b"t": b"x", b"p": b"y"})], ["d1"])
    assert ReapReply.of([[], []]) == ReapReply([], [])
    assert UpkeepReply.of([2, 0]) == UpkeepReply(2, False, None)
    assert UpkeepReply.of([0, 1, b"5-1"]) == UpkeepReply(0, True, "5-1")
    probe = LastNodeArgs("{t}:it", 1026, b"\xc1N", [b"a", b"b"]).op()
    assert lua.eval_command(probe) == [
        "EVAL", lua.source("last_node"), 1, "{t}:it", 1026, b"\xc1N", b"a", b"b"]
    assert probe.reply_of(-1) == -1


def test_bind_names_its_argv_and_its_reply_is_the_stored_binding() -> None:
    op = BindArgs("{p:binding}", "db", "lgd_", "saver pid 1 on host h", 1700, 4).op()
    assert (op.name, list(op.keys), list(op.args)) == (
        "bind", ["{p:binding}"], ["db", "lgd_", "saver pid 1 on host h", 1700, 4])
    found = op.reply_of([b"db", b"lgd_", b"saver pid 1 on host h", b"1700", None])
    assert found == Binding("db", "lgd_", "saver pid 1 on host h", 1700, None)
    assert found.matches("db", "lgd_", 4) and not found.matches("db", "other_", 4)
