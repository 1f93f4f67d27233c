"""Threads written by the release before the layout by layer (commit ``ad6c001``) read,
continue, delete and flush with this code, and each release's flusher drains the outbox
the other wrote (as during a rolling upgrade, when both run).

The old release runs in subprocesses with ``PYTHONPATH`` on ``ad6c001``'s package
(``tests/data/release_ad6c001.tar.gz``, a ``git archive`` of it) extracted in
``tmp_path``; this code runs in the test process. Both use the same key prefix and
database (``unique_options``) on the session's servers.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tarfile
import textwrap
from pathlib import Path
from typing import Any

import pymongo
import pytest
from langgraph.checkpoint.base import empty_checkpoint
from langgraph.types import Command

from langgraph_durable import DurableSaver
from langgraph_durable.errors import ThreadDeletedError
from langgraph_durable.io.drivers import run_sync
from langgraph_durable.plans.history_edits import release_plan
from langgraph_durable.plans.migrations import migrate_plan
from langgraph_durable.testing import drop_namespace, unique_options

ROOT = Path(__file__).resolve().parent.parent
PREVIOUS = "ad6c001"
ARCHIVE = Path(__file__).parent / "data" / f"release_{PREVIOUS}.tar.gz"

GRAPH = textwrap.dedent("""
    from typing import TypedDict
    from langgraph.graph import END, START, StateGraph
    from langgraph.types import interrupt
    from langgraph_durable import effects

    class State(TypedDict):
        n: int
        paid: str

    def charge_with(log_path):
        def charge(who):
            with open(log_path, "a") as f:
                f.write(who + "\\n")
            return "receipt-1"
        return charge

    def build(log_path, who):
        def pay(state):
            receipt = effects.once("charge", charge_with(log_path), who)
            answer = interrupt("ok?")
            return {"paid": f"{receipt}:{answer}"}
        def step(state):
            return {"n": state["n"] + 1}
        paying = StateGraph(State)
        paying.add_node("pay", pay)
        paying.add_edge(START, "pay")
        paying.add_edge("pay", END)
        counting = StateGraph(State)
        counting.add_node("step", step)
        counting.add_edge(START, "step")
        counting.add_edge("step", END)
        return paying, counting

    def cfg(thread_id):
        return {"configurable": {"thread_id": thread_id}}
""")

OLD_WRITE = GRAPH + textwrap.dedent("""
    import json, os, sys
    from langgraph_durable import DurableSaver
    opts = {"key_prefix": os.environ["KEY_PREFIX"], "database": os.environ["DATABASE"]}
    urls = os.environ["REDIS_URL"], os.environ["MONGODB_URL"]
    paying, counting = build(os.environ["EFFECT_LOG"], "old")
    with DurableSaver.from_urls(*urls, **opts) as saver:
        pay = paying.compile(checkpointer=saver)
        count = counting.compile(checkpointer=saver)
        pay.invoke({"n": 0, "paid": ""}, cfg("t-effect"))  # journals charge, interrupts
        count.invoke({"n": 0, "paid": ""}, cfg("t-flushed"))
        count.invoke({"n": 10, "paid": ""}, cfg("t-flushed"))
        count.invoke({"n": 0, "paid": ""}, cfg("t-deleted"))
        deleted_head = saver.get_tuple(cfg("t-deleted")).config
        saver.flush()
        saver.delete_thread("t-deleted")
    with DurableSaver.from_urls(*urls, flusher="off", **opts) as saver:
        counting.compile(checkpointer=saver).invoke({"n": 5, "paid": ""}, cfg("t-outbox"))
    import langgraph_durable
    json.dump({"deleted_head": deleted_head, "file": langgraph_durable.__file__}, sys.stdout)
""")

OLD_FLUSH_AND_READ = GRAPH + textwrap.dedent("""
    import json, os, sys
    from langgraph_durable import DurableSaver
    opts = {"key_prefix": os.environ["KEY_PREFIX"], "database": os.environ["DATABASE"]}
    urls = os.environ["REDIS_URL"], os.environ["MONGODB_URL"]
    paying, counting = build(os.environ["EFFECT_LOG"], "old")
    with DurableSaver.from_urls(*urls, **opts) as saver:
        saver.flush()
        state = counting.compile(checkpointer=saver).get_state(cfg("t-new"))
        outbox = saver.stats()["outbox_length"]
    import langgraph_durable
    json.dump({"values": state.values, "outbox": outbox, "file": langgraph_durable.__file__},
              sys.stdout)
""")


OLD_READ_COLD = GRAPH + textwrap.dedent("""
    import json, os, sys
    from langgraph_durable import DurableSaver
    from langgraph_durable.errors import SchemaVersionError
    opts = {"key_prefix": os.environ["KEY_PREFIX"], "database": os.environ["DATABASE"]}
    urls = os.environ["REDIS_URL"], os.environ["MONGODB_URL"]
    with DurableSaver.from_urls(*urls, flusher="off", **opts) as saver:
        try:
            saver.get_tuple(cfg("t-inline"))
            refused = None
        except SchemaVersionError as exc:
            refused = str(exc)
    import langgraph_durable
    json.dump({"refused": refused, "file": langgraph_durable.__file__}, sys.stdout)
""")


@pytest.fixture(scope="module")
def previous_release(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder holding ``ad6c001``'s ``langgraph_durable`` package (for PYTHONPATH)."""
    out = tmp_path_factory.mktemp("previous")
    # ``git archive --format=tar.gz ad6c001 langgraph_durable``, kept in the repository so
    # that a checkout without history (a shallow CI clone) runs this test too
    with tarfile.open(ARCHIVE) as tar:
        tar.extractall(out, filter="data")
    return out


def _old(code: str, old: Path, env: dict[str, str]) -> Any:
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120, env={**os.environ, **env, "PYTHONPATH": str(old)},
                          cwd=old)
    assert done.returncode == 0, done.stderr[-4000:]
    out = json.loads(done.stdout)
    assert Path(out.pop("file")).is_relative_to(old)  # the previous release ran, not this
    return out


def test_threads_of_the_previous_release_read_continue_delete_and_flush_with_this_code(
    previous_release: Path, tmp_path: Path, redis_url: str, mongo_url: str,
) -> None:
    opts = unique_options()
    log = tmp_path / "effects.log"
    env = {"REDIS_URL": redis_url, "MONGODB_URL": mongo_url, "EFFECT_LOG": str(log),
           "KEY_PREFIX": str(opts["key_prefix"]), "DATABASE": str(opts["database"])}
    graph: dict[str, Any] = {}
    exec(GRAPH, graph)
    paying, counting = graph["build"](str(log), "new")
    cfg = graph["cfg"]
    try:
        written = _old(OLD_WRITE, previous_release, env)
        assert log.read_text() == "old\n"
        with DurableSaver.from_urls(redis_url, mongo_url, **opts) as saver:  # type: ignore[arg-type]
            pay = paying.compile(checkpointer=saver)
            count = counting.compile(checkpointer=saver)
            assert saver.stats()["outbox_length"] > 0  # t-outbox, never flushed
            saver.flush()  # this code's flusher drains the old release's outbox
            assert saver.stats()["outbox_length"] == 0
            docs = pymongo.MongoClient(mongo_url)[str(opts["database"])][
                saver.context.collections.checkpoints]
            assert docs.count_documents({"thread_id": "t-outbox"}) == 3  # input, step 0, 1
            assert count.get_state(cfg("t-outbox")).values == {"n": 6, "paid": ""}
            assert count.get_state(cfg("t-flushed")).values == {"n": 11, "paid": ""}
            assert len(list(saver.list(cfg("t-flushed")))) == 6
            count.invoke({"n": 20}, cfg("t-flushed"))  # continues the old thread
            assert count.get_state(cfg("t-flushed")).values == {"n": 21, "paid": ""}
            # MongoDB alone: the old release's blobs documents and this code's inline values
            saver.flush()
            assert docs.count_documents({"thread_id": "t-flushed", "v": 4}) == 3
            hot = [(t.config, t.checkpoint, t.pending_writes)
                   for t in saver.list(cfg("t-flushed"))]
            assert len(hot) == 9
            run_sync(release_plan(saver.context, "t-flushed"), saver.sync_clients)
            assert count.get_state(cfg("t-flushed")).values == {"n": 21, "paid": ""}
            assert saver.last_read_tier == "durable"
            assert [(t.config, t.checkpoint, t.pending_writes)
                    for t in saver.list(cfg("t-flushed"))] == hot
            # ... and migrate leaves both forms readable (it rewrites only older versions)
            assert run_sync(migrate_plan(saver.context), saver.sync_clients) == {
                "checkpoints": 0, "blobs": 0, "writes": 0}
            assert count.get_state(cfg("t-flushed")).values == {"n": 21, "paid": ""}
            # the journaled effect is not called again when the old run resumes here
            assert pay.invoke(Command(resume="yes"), cfg("t-effect")) == {
                "n": 0, "paid": "receipt-1:yes"}
            assert log.read_text() == "old\n"
            # the old release's tombstone refuses a write on the deleted thread
            assert saver.get_tuple(cfg("t-deleted")) is None
            assert list(saver.list(cfg("t-deleted"))) == []
            with pytest.raises(ThreadDeletedError):
                saver.put(written["deleted_head"], empty_checkpoint(), {}, {})
            saver.delete_thread("t-flushed")
            saver.flush()
            assert saver.get_tuple(cfg("t-flushed")) is None
            assert docs.count_documents({"thread_id": "t-flushed"}) == 0
        with DurableSaver.from_urls(redis_url, mongo_url, flusher="off",  # type: ignore[arg-type]
                                    **opts) as saver:
            counting.compile(checkpointer=saver).invoke({"n": 40}, cfg("t-new"))
            assert saver.stats()["outbox_length"] > 0
        # the old release's flusher drains this code's outbox and reads its thread
        assert _old(OLD_FLUSH_AND_READ, previous_release, env) == {
            "values": {"n": 41}, "outbox": 0}
        assert docs.count_documents({"thread_id": "t-new"}) == 3
        # a checkpoint document holding inline values: the old release refuses it
        with DurableSaver.from_urls(redis_url, mongo_url, **opts) as saver:  # type: ignore[arg-type]
            counting.compile(checkpointer=saver).invoke({"n": 50}, cfg("t-inline"))
            saver.flush()
            run_sync(release_plan(saver.context, "t-inline"), saver.sync_clients)
        refused = _old(OLD_READ_COLD, previous_release, env)["refused"]
        assert refused is not None and "has schema version 4, newer than" in refused
    finally:
        drop_namespace(redis_url, mongo_url, str(opts["key_prefix"]), str(opts["database"]))


OLD_READ_GROUPED = textwrap.dedent("""
    import json, os, sys
    from langgraph_durable import DurableSaver
    from langgraph_durable.errors import SchemaVersionError
    opts = {"key_prefix": os.environ["KEY_PREFIX"], "database": os.environ["DATABASE"]}
    urls = os.environ["REDIS_URL"], os.environ["MONGODB_URL"]
    with DurableSaver.from_urls(*urls, flusher="off", **opts) as saver:
        try:
            tup = saver.get_tuple({"configurable": {"thread_id": "t-grouped"}})
            got = {"read": repr(tup.pending_writes)}
        except SchemaVersionError as exc:
            got = {"refused": str(exc)}
    import langgraph_durable
    json.dump({**got, "file": langgraph_durable.__file__}, sys.stdout)
""")


def test_the_previous_release_refuses_a_writes_document_of_one_call(
    previous_release: Path, redis_url: str, mongo_url: str,
) -> None:
    """This code stores a ``put_writes`` call as one document of version 5; the release
    before reads one document per write and refuses it instead of misreading it."""
    opts = unique_options()
    env = {"REDIS_URL": redis_url, "MONGODB_URL": mongo_url,
           "KEY_PREFIX": str(opts["key_prefix"]), "DATABASE": str(opts["database"])}
    try:
        with DurableSaver.from_urls(redis_url, mongo_url, **opts) as saver:  # type: ignore[arg-type]
            cfg = saver.put({"configurable": {"thread_id": "t-grouped", "checkpoint_ns": ""}},
                            empty_checkpoint(), {}, {})
            saver.put_writes(cfg, [("a", 1), ("b", 2)], "task-1")
            saver.flush()
            saver.sync_clients.redis.delete(*saver.context.keys("t-grouped").all)
        got = _old(OLD_READ_GROUPED, previous_release, env)
        assert "has schema version 5, newer than 1" in got["refused"]
    finally:
        drop_namespace(redis_url, mongo_url, str(opts["key_prefix"]), str(opts["database"]))
