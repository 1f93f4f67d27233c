"""The saver's runtime on its own (issue 25 item 4): a ``SaverRuntime`` is built, set up and
run without a ``DurableSaver`` (a tool or a worker may hold one), and a saver holds one,
shared by its ``with_allowlist`` copies."""

from __future__ import annotations

import pytest
from langgraph.checkpoint.base import empty_checkpoint
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

from langgraph_durable import DurableConfig, DurableSaver, SaverClosedError
from langgraph_durable.core.records import pack_blob
from langgraph_durable.plans import history_edits, write
from langgraph_durable.runtime.base import SaverRuntime
from langgraph_durable.testing import unique_options

from .saver_life import put_flush_wait_close


def test_a_runtime_without_a_saver_sets_up_flushes_a_savers_writes_and_closes(
        redis_url: str, mongo_url: str) -> None:
    options = unique_options()
    runtime = SaverRuntime.from_urls(redis_url, mongo_url, config=DurableConfig(**options))
    runtime.start()  # set-up and its flusher thread, as entering a saver does
    with DurableSaver.from_urls(redis_url, mongo_url, flusher="off", **options) as saver:
        cp = empty_checkpoint()
        saver.put({"configurable": {"thread_id": "t", "checkpoint_ns": ""}}, cp,
                  {"step": 0}, {})
    runtime.flush(timeout_s=30)
    db = runtime.sync_clients.db
    assert db["checkpoints"].count_documents({"thread_id": "t"}) == 1
    stats = runtime.stats()
    assert stats["outbox_length"] == 0
    assert stats["flusher"]["entries"] == 1  # flush() waited for the round to be counted
    runtime.close()
    assert runtime.closed is True
    plan = history_edits.flush_wait_plan(runtime.context, 1.0)
    with pytest.raises(SaverClosedError):
        runtime.run(plan)


def test_a_savers_allowlist_copy_shares_its_runtime_and_is_closed_with_it(
        redis_url: str, mongo_url: str) -> None:
    saver = DurableSaver.from_urls(redis_url, mongo_url, flusher="off",
                                   serde=JsonPlusSerializer(allowed_msgpack_modules=None),
                                   **unique_options())
    copy = saver.with_allowlist([("mymodule", "MyType")])
    assert copy is not saver
    assert copy.runtime is saver.runtime
    assert copy.context.heads is saver.context.heads
    assert copy.context.serde is copy.serde and saver.context.serde is saver.serde
    saver.close()
    assert copy.is_closed is True


def test_what_a_put_and_a_read_learned_is_applied_to_the_savers_context(
        redis_url: str, mongo_url: str) -> None:
    options = unique_options(flusher="off")
    cfg = {"configurable": {"thread_id": "t", "checkpoint_ns": ""}}
    cp = empty_checkpoint()
    cp["channel_values"] = {"v": ["a", "b"]}
    cp["channel_versions"] = {"v": f"{1:032}.0"}
    with DurableSaver.from_urls(redis_url, mongo_url, **options) as writer, \
            DurableSaver.from_urls(redis_url, mongo_url, **options) as reader:
        writer.put(cfg, cp, {"step": 0}, {"v": f"{1:032}.0"})
        assert writer.context.heads.get("t", "") == cp["id"]  # its own put is the head
        again = write.prepare_put(reader.context, cfg, cp, {"step": 0}, {"v": f"{1:032}.0"})
        assert len(again.parts) == 2  # the two items of the list
        assert reader.context.items.unknown("t", again.parts, pack_blob).keys() == set(
            again.parts)
        assert reader.context.heads.get("t", "") is None
        reader.get_tuple(cfg)  # the latest, its items read from Redis
        assert reader.context.heads.get("t", "") == cp["id"]
        assert reader.context.items.unknown("t", again.parts, pack_blob) == {}


@pytest.mark.parametrize("api", ["sync", "async"])
def test_close_ends_the_flusher_of_a_partitioned_outbox_in_its_wait_between_rounds(
        redis_url: str, mongo_url: str, api: str) -> None:
    """With several outbox streams an empty round is followed by a wait of
    ``flush_interval_s`` (here 60 s); ``close()`` ends that wait: the flusher has
    stopped and left its consumer group when ``close()`` returns (``stop`` waits up to
    5 s for it, so a wait that close did not end would leave it running)."""
    options = unique_options(outbox_partitions=4, flush_interval_s=60)
    saver = DurableSaver.from_urls(redis_url, mongo_url, **options)

    def two_rounds() -> bool:
        # the first round took the put (then the next, empty, waits) or found nothing
        # (then the second took it and its linger is a wait close ends as well)
        f = saver.runtime.flusher
        return f.rounds >= 2 and f.entries == 1

    put_flush_wait_close(saver, api, two_rounds, "two rounds")
    flusher = saver.runtime.flusher
    assert (flusher.running, flusher.left_group) == (False, True)
