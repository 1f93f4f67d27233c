"""``migrate``'s regrouping of per-write documents into one document per ``put_writes``
call (``admin/write_regroup.py``): resumable, idempotent, reads unchanged, a call already
stored kept, a delete that overtook a round not undone."""

from __future__ import annotations

from typing import Any

from langgraph_durable import DurableSaver
from langgraph_durable.admin import write_regroup as R
from langgraph_durable.core.ops import BulkWrite, InsertDoc
from langgraph_durable.core.schema import WRITES_GROUP_VERSION
from langgraph_durable.io.drivers import execute_sync, run_sync, run_with
from langgraph_durable.testing import unique_options

from .cli.clikit import Cli
from .test_write_groups import CFG, THREAD, _answer, _cold, _reference, _write
from .write_forms import ungroup


def _forms(saver: DurableSaver, thread: str = THREAD) -> tuple[int, int]:
    col = saver.sync_clients.db[saver.context.collections.writes]
    return (col.count_documents({"thread_id": thread, "v": WRITES_GROUP_VERSION}),
            col.count_documents({"thread_id": thread, "idx": {"$exists": True}}))


def test_per_write_documents_become_one_per_call_resumably_and_reads_do_not_change(
        redis_url: str, mongo_url: str) -> None:
    expected = _reference()
    with DurableSaver.from_urls(redis_url, mongo_url, **unique_options()) as saver:
        first, second = _write(saver, "old")
        _cold(saver)
        assert _forms(saver) == (0, 6)
        assert _answer(saver, first, second) == expected
        c = saver.sync_clients
        assert run_sync(R.remaining_plan(saver.context), c) == 6
        dry = run_sync(R.regroup_writes_plan(saver.context, dry_run=True), c)
        assert (dry.read, dry.stored, dry.removed) == (6, 5, 6) and _forms(saver) == (0, 6)
        seen: list[int] = []
        got = run_sync(R.regroup_writes_plan(saver.context, batch_size=2, max_batches=1,
                                             on_batch=seen.append), c)
        # the round's last task (task-1: a, messages) was read whole
        assert (got.read, got.stored, got.removed, got.finished) == (2, 1, 2, False)
        assert _forms(saver) == (1, 4)
        assert _answer(saver, first, second) == expected  # both forms meanwhile
        got = run_sync(R.regroup_writes_plan(saver.context, batch_size=2,
                                             on_batch=seen.append), c)
        assert (got.read, got.stored, got.removed, got.finished) == (4, 4, 4, True)
        assert sum(seen) == 6
        assert _forms(saver) == (5, 0)  # what the flusher stores for these calls
        assert _answer(saver, first, second) == expected
        again = run_sync(R.regroup_writes_plan(saver.context), c)
        assert (again.read, again.stored, again.removed) == (0, 0, 0)
        assert saver.sync_clients.db[saver.context.collections.meta].find_one(
            {"_id": R.CURSOR_ID}) is None


def test_a_call_already_stored_is_kept_and_its_per_write_copies_removed(
        redis_url: str, mongo_url: str) -> None:
    expected = _reference()
    opts = unique_options()
    # every call is in Redis before the flusher runs: a flusher round between the two
    # calls of task-2 would store its superseded first error as a document of its own,
    # which the per-write form (ungroup) does not keep (the newest special write wins)
    with DurableSaver.from_urls(redis_url, mongo_url, **opts | {"flusher": "off"}) as writer:
        first, second = _write(writer, "new", flush=False)
    with DurableSaver.from_urls(redis_url, mongo_url, **opts) as saver:
        saver.flush()
        col = saver.sync_clients.db[saver.context.collections.writes]
        groups = list(col.find())
        ungroup(saver, THREAD)
        col.insert_many([g for g in groups if g["task_id"] == "task-1"])  # a crash between
        assert _forms(saver) == (1, 6)  # the insert and the deletes of an earlier run
        got = run_sync(R.regroup_writes_plan(saver.context), saver.sync_clients)
        assert (got.stored, got.removed) == (4, 6)
        def plain(docs: Any) -> list[Any]:  # (put_ms: the latest of the call's copies')
            return sorted(({**d, "put_ms": 0} for d in docs), key=lambda d: d["_id"])
        assert plain(col.find()) == plain(groups)
        _cold(saver)
        assert _answer(saver, first, second) == expected


def test_a_delete_that_overtakes_a_round_is_not_undone(redis_url: str,
                                                       mongo_url: str) -> None:
    with DurableSaver.from_urls(redis_url, mongo_url, **unique_options()) as saver:
        _write(saver, "old")
        deleted = []

        def execute(op: Any) -> Any:
            if (isinstance(op, BulkWrite) and isinstance(op.requests[0], InsertDoc)
                    and not deleted):  # the round read the documents; then a delete
                saver.delete_thread(THREAD)
                deleted.append(True)
            return execute_sync(op, saver.sync_clients)

        got = run_with(R.regroup_writes_plan(saver.context), execute)
        assert deleted and got.stored == 5
        assert _forms(saver) == (0, 0)  # the round's documents removed again
        assert saver.get_tuple(CFG) is None


def test_migrate_regroups_the_writes_after_converting_lists(redis_url: str,
                                                            mongo_url: str) -> None:
    cli = Cli(redis_url, mongo_url)
    with cli.saver() as saver:
        first, second = _write(saver, "old")
        before = _answer(saver, first, second)
    out = cli("migrate").stdout
    assert "writes: regrouped 6 per-write documents into 5 documents of one call" in out
    with cli.saver() as saver:
        assert _forms(saver) == (5, 0)
        _cold(saver)
        assert _answer(saver, first, second) == before
    assert "writes: regrouped 0 per-write documents" in cli("migrate").stdout
