"""Child processes of scenario 9 (many processes): ``python -m faults.many_child '<spec>'``.

Modes (``spec["mode"]``):

- ``app``: an application process. Runs the workflow graph (``graphs.build_flow``) on
  every thread of ``spec["threads"]`` with ``spec["concurrency"]`` Python threads, on a
  ``HookedSaver`` (``faults/child.py``) that records every acknowledged ``put`` to the
  fsynced ``AckLog`` at ``spec["ack"]`` (``{"k": "cp", ...}``), and each finished thread
  (``{"k": "done", "t": thread}``); it starts at wall-clock time ``spec["start_at"]``
  (seconds, a barrier shared with sibling processes) if given. A thread is picked up
  where it stands: nothing stored, a fresh ``invoke``; tasks left (a run cut by a
  kill), ``invoke(None)``; finished, nothing. So a restarted process given the same
  threads completes what its killed predecessor left. ``spec["ack"]`` may be ``None``
  (throughput runs: no log).
- ``flusher``: a standalone flusher worker (``langgraph_durable.outbox.worker.run`` with
  ``spec["argv"]``: the same code as ``python -m langgraph_durable.outbox.worker``), with
  a pymongo command listener appending, for each checkpoint document its bulk upserts
  made durable, the put -> MongoDB lag in seconds (acknowledgement of the ``update``
  command minus the document's ``put_ms``, the outbox entry's stream time) to
  ``spec["lags"]``, one number a line (written at once, so a SIGKILL keeps them).

``app`` writes ``spec["out"]`` (JSON: threads run, seconds) when it ends normally.
"""

from __future__ import annotations

import faulthandler
import json
import os
import queue
import signal
import sys
import threading
import time
from typing import Any

import pymongo.monitoring

from . import child, graphs
from .tiers import AckLog


def topic_of(thread: str) -> str:
    """The topic a thread's run is given (four distinct ones, so states differ)."""
    return f"topic-{sum(thread.encode()) % 4}"


def run_thread(graph: Any, thread: str) -> str:
    """Run or resume ``thread`` to its end; returns what was done (fresh/resume/none)."""
    cfg = {"configurable": {"thread_id": thread}}
    snap = graph.get_state(cfg)
    if not snap.metadata:
        graph.invoke(graphs.flow_input(topic_of(thread)), cfg)
        return "fresh"
    if snap.tasks:
        graph.invoke(None, cfg)
        return "resume"
    return "none"


def app(spec: dict[str, Any]) -> int:
    child.ACK = AckLog(spec["ack"]) if spec.get("ack") else None
    todo: queue.Queue[str] = queue.Queue()
    for t in spec["threads"]:
        todo.put(t)
    actions: dict[str, int] = {}
    errors: list[str] = []
    lock = threading.Lock()
    opts = {"key_prefix": spec["prefix"], "database": spec["database"],
            **spec.get("options", {})}
    with child.HookedSaver.from_urls(spec["redis"], spec["mongo"], **opts) as saver:
        graph = graphs.build_flow(saver, step_s=spec.get("step_s", 0.0))

        def work() -> None:
            while True:
                try:
                    t = todo.get_nowait()
                except queue.Empty:
                    return
                try:
                    did = run_thread(graph, t)
                except Exception as exc:  # recorded: the parent reports it
                    with lock:
                        errors.append(f"{t}: {type(exc).__name__}: {exc}")
                    continue
                if child.ACK is not None:
                    child.ACK.append(k="done", t=t)
                with lock:
                    actions[did] = actions.get(did, 0) + 1

        while time.time() < spec.get("start_at", 0.0):  # a barrier shared with siblings
            time.sleep(0.005)
        began, wall = time.monotonic(), time.time()
        pool = [threading.Thread(target=work) for _ in range(spec.get("concurrency", 4))]
        for th in pool:
            th.start()
        for th in pool:
            th.join()
        seconds = time.monotonic() - began
        puts = saver.stats()["puts"]
    with open(spec["out"], "w", encoding="utf-8") as f:
        json.dump({"actions": actions, "errors": errors, "seconds": seconds,
                   "began": wall, "ended": wall + seconds,
                   "puts": puts}, f)
    return 0


class _LagLog(pymongo.monitoring.CommandListener):
    """Appends the put -> MongoDB lag of each checkpoint written (see the module doc)."""

    def __init__(self, path: str) -> None:
        self.fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        self.pending: dict[int, list[int]] = {}
        self.lock = threading.Lock()

    def started(self, event: Any) -> None:
        name = event.command_name
        if name not in ("insert", "update") or event.command.get(name) != "checkpoints":
            return
        put_ms = []
        # the flusher inserts; a checkpoint already stored gets an upsert
        docs = [u.get("u") or {} for u in event.command.get("updates", ())]
        for doc in [*docs, *event.command.get("documents", ())]:
            ms = doc.get("put_ms", (doc.get("$setOnInsert") or {}).get("put_ms"))
            if isinstance(ms, int):
                put_ms.append(ms)
        with self.lock:
            self.pending[event.request_id] = put_ms

    def succeeded(self, event: Any) -> None:
        now = time.time()
        with self.lock:
            got = self.pending.pop(event.request_id, None)
        if got:
            os.write(self.fd, "".join(f"{now - ms / 1000:.4f}\n" for ms in got).encode())

    def failed(self, event: Any) -> None:
        with self.lock:
            self.pending.pop(event.request_id, None)


def flusher(spec: dict[str, Any]) -> int:
    from langgraph_durable.outbox import worker

    pymongo.monitoring.register(_LagLog(spec["lags"]))
    return worker.run(spec["argv"])


def main(argv: list[str]) -> int:
    faulthandler.register(signal.SIGUSR1, all_threads=True)
    spec = json.loads(argv[1])
    return {"app": app, "flusher": flusher}[spec["mode"]](spec)


if __name__ == "__main__":
    sys.exit(main(sys.argv))
