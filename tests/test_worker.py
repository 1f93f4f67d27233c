"""The standalone flusher worker drains the outbox of an application with flusher="off"."""

from __future__ import annotations

import signal
import subprocess
import sys

from conftest import unique_options
from langgraph.checkpoint.base import empty_checkpoint

from langgraph_durable import DurableSaver


def test_worker_process_drains_the_outbox_and_exits_cleanly_on_sigterm(
    redis_url: str, mongo_url: str
) -> None:
    opts = unique_options(flusher="off")
    with DurableSaver.from_urls(redis_url, mongo_url, **opts) as saver:
        worker = subprocess.Popen(
            [sys.executable, "-m", "langgraph_durable.outbox.worker", "--redis-url", redis_url,
             "--mongo-url", mongo_url, "--key-prefix", opts["key_prefix"],
             "--database", opts["database"]],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )
        try:
            cfg = {"configurable": {"thread_id": "w", "checkpoint_ns": ""}}
            for _ in range(5):
                cfg = saver.put(cfg, empty_checkpoint(), {"step": 1}, {})
            saver.flush(timeout_s=20)
            db = saver._sync.db
            assert db[saver.ctx.collections.checkpoints].count_documents({"thread_id": "w"}) == 5
        finally:
            worker.send_signal(signal.SIGTERM)
            out, err = worker.communicate(timeout=20)
        assert worker.returncode == 0, err
        assert "5 entries" in out
