"""``dead-letters list|replay|drop``: the entries flushers set aside, end to end."""

from __future__ import annotations

from langgraph.checkpoint.base import empty_checkpoint

from langgraph_durable.core.outbox_entry import OutboxEntry
from langgraph_durable.io.drivers import run_sync
from langgraph_durable.outbox.flusher import consumer_name, flush_batch_plan

from .clikit import Cli


def _round(saver) -> None:
    run_sync(flush_batch_plan(saver.context, consumer_name(), block_ms=0, claim=False),
             saver.sync_clients)


def test_dead_letters_are_listed_replayed_after_a_fix_and_dropped(cli: Cli) -> None:
    with cli.saver(flusher="off") as s:
        r, ctx = s.sync_clients.redis, s.context
        cfg = s.put({"configurable": {"thread_id": "a", "checkpoint_ns": ""}},
                    empty_checkpoint(), {"step": 0}, {})
        cid = cfg["configurable"]["checkpoint_id"]
        k = ctx.keys("a")
        r.rename(k.cp, k.cp + ":backup")  # damaged: a string where the hash was
        r.set(k.cp, "damaged")
        bad = OutboxEntry("b", "cp", "no-separator", [], [], 0).fields()
        r.xadd(ctx.outbox_of("b"), bad)
        _round(s)
    rows = sorted(cli.json("dead-letters", "list"), key=lambda x: x["thread_id"])
    assert [(x["thread_id"], x["step"], x["error"].split(":")[0]) for x in rows] == [
        ("a", "copy", "ResponseError"), ("b", "parse", "ValueError")]
    assert rows[1]["fields"] == {"t": b"b".hex(), "p": bad[b"p"].hex()}
    assert rows[0]["payload_bytes"] > 0 and rows[0]["stream"] == ctx.outbox_of("a")
    text = cli("dead-letters", "list").stdout
    assert "WRONGTYPE" in text and rows[0]["entry_id"] in text
    # naming nothing is an error; an unknown id too
    assert "--all" in cli("dead-letters", "drop", "--yes", code=1).output
    assert "no dead letter has the id 9-9" in cli("dead-letters", "drop", "9-9", "--yes",
                                                  code=1).output
    with cli.saver(flusher="off") as s:  # the fix
        r.delete(k.cp)
        r.rename(k.cp + ":backup", k.cp)
    out = cli("dead-letters", "replay", "--thread", "a", "--yes").stdout
    assert out.strip() == "replayed 1 dead letters; skipped 0"
    with cli.saver(flusher="off") as s:
        assert r.xlen(ctx.outbox_of("a")) == 1
        _round(s)
        assert s.sync_clients.db[ctx.collections.checkpoints].count_documents(
            {"thread_id": "a", "checkpoint_id": cid}) == 1
    assert [x["thread_id"] for x in cli.json("dead-letters", "list")] == ["b"]
    out = cli("dead-letters", "drop", rows[1]["entry_id"], "--yes").stdout
    assert out.strip() == "dropped 1 dead letters"
    assert cli.json("dead-letters", "list") == []
    assert cli.json("status")["outbox"]["dead_letters"] == 0


def test_status_names_a_damaged_dead_letter_stream_and_shows_the_rest(cli: Cli) -> None:
    """The dead-letter stream holding another type: ``status`` (and ``--probe``, the
    health check) still shows the outbox and says which key is damaged (was exit 1 with
    a bare ``ResponseError: WRONGTYPE`` naming no key)."""
    from langgraph_durable.outbox.group import dead_letter_key

    with cli.saver(flusher="off") as s:
        key = dead_letter_key(s.context)
        s.sync_clients.redis.set(key, "damaged")
    expected = (f"the dead-letter stream {key} holds another type than a stream: flushers "
                "cannot set entries aside; rename or delete it")
    for probe in ((), ("--probe",)):
        data = cli.json("status", *probe)
        assert data["outbox"]["dead_letters"] is None
        assert data["outbox"]["dead_letter_error"] == expected
        assert data["health"]["verdict"] == "degraded"
        assert {"level": "degraded", "text": expected} in data["health"]["reasons"]
    assert "rename or delete it" in cli("status").stdout
