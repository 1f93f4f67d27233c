"""Child processes of the fault scenarios: ``python -m faults.child '<json spec>'``.

Modes (``spec["mode"]``):

- ``flow-run``: run the workflow graph on a ``HookedSaver`` that records every
  acknowledged ``put`` (its checkpoint id) and ``put_writes`` to an fsynced append-only log,
  and SIGKILLs its own process at the kill point of ``spec["kill"]``:

  - ``{"kind": "call", "method": "put"|"put_writes", "n": N, "pos": P}``: at the N-th call,
    ``before`` it is sent, ``during`` it (after Redis ran the script, before the call
    returns: committed but not acknowledged), or ``after`` it returned and was logged;
  - ``{"kind": "node", "n": N}``: at the start of the N-th node execution (between steps);
  - ``{"kind": "flush", "n": N, "point": P}``: in the N-th non-empty round of the in-process
    flusher, ``before_mongo`` (entries read, nothing written), ``mid_mongo`` (some
    collections written), ``before_ack`` (all written, not acknowledged) or
    ``after_ack`` (the round's acknowledging step ran: on a single Redis one script that
    acknowledges and settles, so the thread's hot keys got their TTL; the round not ended);
  - ``{"kind": "none"}`` or ``{"kind": "time"}`` (the parent kills at a random time).

- ``flow-resume``: open a plain ``DurableSaver``, read the thread's state, resume it
  (``invoke(None)``; a fresh ``invoke`` when nothing was stored), write the final state.
- ``chat``: wait for ``spec["start_at"]`` (a wall-clock barrier shared with a sibling), then
  send one user message on a shared thread.
- ``shutdown``: keep running workflows until SIGTERM; ``spec["handler"]`` says what the
  process does about SIGTERM (``none``: Python's default, ``exit``: ``sys.exit`` from a
  handler, so the ``with`` block closes the saver).

Every mode writes ``spec["out"]`` (JSON) when it ends normally.
"""

from __future__ import annotations

import faulthandler
import json
import os
import signal
import sys
import threading
import time
from typing import Any

from langgraph_durable import DurableSaver
from langgraph_durable.core.records import write_idx
from langgraph_durable.io import drivers
from langgraph_durable.io.drivers import BulkWrite, MongoOp, Parallel, Script
from langgraph_durable.outbox import flusher as flusher_mod

from . import graphs
from .common import tap
from .tiers import AckLog

ACK: AckLog | None = None
_tls = threading.local()
_lock = threading.Lock()
_counts: dict[str, int] = {"put": 0, "put_writes": 0, "node": 0, "flush": 0}


def die(reason: str) -> None:
    """Record the kill point, then SIGKILL this process (no cleanup of any kind runs)."""
    if ACK is not None:
        ACK.append(k="kill", at=reason, t=time.time())
    os.kill(os.getpid(), signal.SIGKILL)


class HookedSaver(DurableSaver):
    """A DurableSaver that logs what it acknowledged and dies at the configured call."""

    kill: dict[str, Any] = {"kind": "none"}

    def _tick(self, method: str) -> int:
        with _lock:
            _counts[method] += 1
            return _counts[method]

    def _at(self, method: str, n: int, pos: str) -> None:
        k = self.kill
        if k["kind"] == "call" and k["method"] == method and k["n"] == n and k["pos"] == pos:
            die(f"{pos} {method} #{n}")

    def _call(self, method: str, fn: Any) -> Any:
        n = self._tick(method)
        self._at(method, n, "before")
        k = self.kill
        _tls.during = (k["kind"] == "call" and k["method"] == method and k["n"] == n
                       and k["pos"] == "during")
        _tls.label = f"during {method} #{n}"
        try:
            out = fn()
        finally:
            _tls.during = False
        return n, out

    def put(self, config: Any, checkpoint: Any, metadata: Any, new_versions: Any) -> Any:
        n, out = self._call("put", lambda: super(HookedSaver, self).put(
            config, checkpoint, metadata, new_versions))
        c = out["configurable"]
        if ACK is not None:
            ACK.append(k="cp", t=c["thread_id"], ns=c["checkpoint_ns"], id=c["checkpoint_id"])
        self._at("put", n, "after")
        return out

    def put_writes(self, config: Any, writes: Any, task_id: str, task_path: str = "") -> None:
        n, _ = self._call("put_writes", lambda: super(HookedSaver, self).put_writes(
            config, writes, task_id, task_path))
        c = config["configurable"]
        if ACK is not None and writes:
            ACK.append(k="w", t=str(c["thread_id"]), ns=c.get("checkpoint_ns") or "",
                       id=c["checkpoint_id"], task=task_id,
                       idx=[write_idx(ch, i) for i, (ch, _) in enumerate(writes)])
        self._at("put_writes", n, "after")


def _install_driver_hook() -> None:
    """Kill right after Redis ran a put/put_writes script, before the call returns."""
    orig = drivers.execute_sync

    def hooked(op: Any, c: Any) -> Any:
        res = orig(op, c)
        if getattr(_tls, "during", False) and isinstance(op, Script) and op.name in (
                "put", "put_writes"):
            die(_tls.label)
        return res

    drivers.execute_sync = hooked  # type: ignore[assignment]


def _classify(op: Any) -> str:
    if isinstance(op, MongoOp):
        return "mongo"
    if isinstance(op, Script) and op.name == "ack_settle":
        return "ack"  # acknowledge and settle in one script (one outbox partition)
    if isinstance(op, Parallel) and op.ops and isinstance(op.ops[0], Script) and \
            op.ops[0].name == "ack_settle":
        return "ack"  # one such script per outbox partition, run together
    return "other"


def _install_flush_hook(kill: dict[str, Any]) -> None:
    """Wrap the flusher's round plan so the process dies at a point of its N-th round."""
    orig = flusher_mod.flush_batch_plan

    def hooked(ctx: Any, consumer: str, **kw: Any) -> Any:
        at = {"mongo_ops": 0, "round": 0}  # MongoDB writes so far, this round's number

        def before(op: Any) -> None:
            kind = _classify(op)
            if kind == "mongo" and at["mongo_ops"] == 0:
                with _lock:
                    _counts["flush"] += 1
                    at["round"] = _counts["flush"]
            if at["round"] == kill["n"]:
                p, n = kill["point"], at["mongo_ops"]
                if (p == "before_mongo" and kind == "mongo" and n == 0) or \
                        (p == "mid_mongo" and kind in ("mongo", "ack") and n == 1) or \
                        (p == "before_ack" and kind == "ack"):
                    die(f"flush round #{at['round']} {p}")

        def after(op: Any, _result: Any, _err: Any) -> None:
            kind = _classify(op)
            if at["round"] == kill["n"] and kill["point"] == "after_ack" and kind == "ack":
                die(f"flush round #{at['round']} after_ack")
            if kind == "mongo":
                at["mongo_ops"] += 1

        return tap(orig(ctx, consumer, **kw), before, after)

    flusher_mod.flush_batch_plan = hooked  # type: ignore[assignment]


def _acked_ids(op: Any) -> list[str]:
    """The entry ids an acknowledging operation names (ACK_SETTLE script or XACK pipeline)."""
    if isinstance(op, Script):  # args: group, ttl, then per thread: k, k entry ids
        ids, args, i = [], list(op.args), 2
        while i < len(args):
            k = int(args[i])
            ids += args[i + 1:i + 1 + k]
            i += k + 1
    else:
        ids = [c[3] for c in op.commands if c[0] == "XACK"]
    return [x.decode() if isinstance(x, bytes) else x for x in ids]


def _install_flush_trace() -> None:
    """Log every MongoDB write of the in-process flusher and its result, then the entries it
    acknowledged (``FAULTS_TRACE_FLUSH=1``): to tell, after a loss, who acknowledged what."""
    orig = flusher_mod.flush_batch_plan

    def after(op: Any, result: Any, err: Any) -> None:
        if ACK is None:
            return
        if isinstance(op, BulkWrite):
            ids = [getattr(r, "_filter", {}).get("_id") for r in op.requests]
            res = None if err else {k: getattr(result, k, None) for k in (
                "upserted_count", "matched_count", "modified_count")}
            ACK.append(k="mongo", col=op.collection, ids=ids[:3], n=len(ids), res=res,
                       err=repr(err)[:120] if err else None, t=time.time())
        if _classify(op) == "ack" and err is None:
            ACK.append(k="acked", ids=_acked_ids(op), t=time.time())

    def traced(ctx: Any, consumer: str, **kw: Any) -> Any:
        return tap(orig(ctx, consumer, **kw), after=after)

    flusher_mod.flush_batch_plan = traced  # type: ignore[assignment]


def _install_node_hook(kill: dict[str, Any]) -> None:
    def hook(name: str) -> None:
        with _lock:
            _counts["node"] += 1
            n = _counts["node"]
        if n == kill["n"]:
            die(f"start of node #{n} ({name})")

    graphs.NODE_HOOK = hook


def _options(spec: dict[str, Any]) -> dict[str, Any]:
    return {"key_prefix": spec["prefix"], "database": spec["database"],
            **spec.get("options", {})}


def _write(spec: dict[str, Any], out: dict[str, Any]) -> None:
    with open(spec["out"], "w", encoding="utf-8") as f:
        json.dump(out, f)


def flow_run(spec: dict[str, Any]) -> int:
    global ACK
    ACK = AckLog(spec["ack"])
    kill = spec.get("kill", {"kind": "none"})
    HookedSaver.kill = kill
    if kill["kind"] == "call" and kill["pos"] == "during":
        _install_driver_hook()
    if kill["kind"] == "flush":
        _install_flush_hook(kill)
    if kill["kind"] == "node":
        _install_node_hook(kill)
    cfg = {"configurable": {"thread_id": spec["thread"]}}
    with HookedSaver.from_urls(spec["redis"], spec["mongo"], **_options(spec)) as saver:
        graph = graphs.build_flow(saver, step_s=spec.get("step_s", 0.0))
        ACK.append(k="start", t=time.time())
        graph.invoke(graphs.flow_input(), cfg, durability=spec.get("durability", "async"))
        ACK.append(k="end", t=time.time())
        values = graph.get_state(cfg).values
    _write(spec, {"finished": True, "values": graphs.canonical(values)})
    return 0


def flow_resume(spec: dict[str, Any]) -> int:
    cfg = {"configurable": {"thread_id": spec["thread"]}}
    out: dict[str, Any] = {}
    with DurableSaver.from_urls(spec["redis"], spec["mongo"], **_options(spec)) as saver:
        graph = graphs.build_flow(saver)
        snap = graph.get_state(cfg)
        out["tier"] = saver.last_read_tier
        out["step"] = (snap.metadata or {}).get("step")
        if not snap.metadata:
            out["action"] = "fresh"
            graph.invoke(graphs.flow_input(), cfg, durability=spec.get("durability", "async"))
        elif snap.tasks:  # tasks to run, or done ones whose writes wait to be applied
            out["action"] = "resume"
            graph.invoke(None, cfg, durability=spec.get("durability", "async"))
        else:
            out["action"] = "none"
        final = graph.get_state(cfg)
        out["values"] = graphs.canonical(final.values)
        out["next"] = [t.name for t in final.tasks]
        seen = [(t.config["configurable"]["checkpoint_ns"], t.config["configurable"]
                 ["checkpoint_id"]) for t in saver.list(cfg)]
        out["listed"] = len(seen)
        out["listed_twice"] = len(seen) - len(set(seen))
        t0 = time.monotonic()
    out["close_s"] = time.monotonic() - t0
    _write(spec, out)
    return 0


def _meet_before_first_put(saver: DurableSaver, spec: dict[str, Any]) -> None:
    """Both chat children read the thread's latest checkpoint before either writes: each
    one's first ``put`` (the run's input checkpoint, right after ``invoke`` read the
    latest) waits until its sibling has reached its own first ``put`` (a counter under the
    trial's own key prefix; 30 s at most). The race is then the same on a loaded machine."""
    import redis

    r = redis.Redis.from_url(spec["redis"])
    key = "{" + spec["prefix"] + ":barrier}:" + spec["thread"]
    put, first = saver.put, [True]

    def met(*args: Any, **kwargs: Any) -> Any:
        if first:
            first.clear()
            r.incr(key)
            deadline = time.monotonic() + 30
            while int(r.get(key) or 0) < 2 and time.monotonic() < deadline:
                time.sleep(0.001)
        return put(*args, **kwargs)

    saver.put = met  # type: ignore[method-assign]


def chat(spec: dict[str, Any]) -> int:
    cfg = {"configurable": {"thread_id": spec["thread"]}}
    with DurableSaver.from_urls(spec["redis"], spec["mongo"], **_options(spec)) as saver:
        graph = graphs.build_chat(saver, step_s=spec["step_s"])
        graph.get_state(cfg)  # connections warm before the barrier
        _meet_before_first_put(saver, spec)
        while time.time() < spec["start_at"]:
            time.sleep(0.0005)
        began = time.time()
        out: dict[str, Any] = {"began": began}
        try:
            out["messages"] = graph.invoke({"messages": [spec["message"]]}, cfg)["messages"]
        except Exception as exc:  # e.g. ConcurrentRunError: recorded, not hidden
            out["error"] = f"{type(exc).__name__}: {exc}"
        out["ended"] = time.time()
    _write(spec, out)
    return 0


def shutdown(spec: dict[str, Any]) -> int:
    """Run workflows until SIGTERM. ``handler``: ``none`` (Python's default action: the
    process ends at once), ``flag`` (the handler sets a flag; the loop stops after the
    current run and leaves the ``with`` block, which closes the saver), ``exit``
    (``sys.exit(143)`` from the handler: an exception raised wherever the main thread is).
    The saver is closed by the ``with`` block, or by ``close(drain_timeout_s=...)`` when
    ``spec["drain_s"]`` is given."""
    global ACK
    ACK = AckLog(spec["ack"])
    if os.environ.get("FAULTS_TRACE_FLUSH"):
        _install_flush_trace()
    stop = threading.Event()
    if spec["handler"] == "exit":
        signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    elif spec["handler"] == "flag":
        signal.signal(signal.SIGTERM, lambda *_: stop.set())
    ready = False

    def work(saver: DurableSaver) -> None:
        nonlocal ready
        graph = graphs.build_flow(saver)
        r = saver.sync_clients.redis
        i = 0
        while not stop.is_set():  # until SIGTERM
            graph.invoke(graphs.flow_input(), {"configurable": {"thread_id": f"s7-{i}"}})
            i += 1
            if not ready and r.xlen(saver.context.outbox) >= spec["backlog"]:
                ACK.append(k="ready", t=time.time())
                ready = True

    try:
        if "drain_s" in spec:
            saver = HookedSaver.from_urls(spec["redis"], spec["mongo"], **_options(spec))
            saver.setup()
            try:
                work(saver)
            finally:
                saver.close(drain_timeout_s=spec["drain_s"])
        else:
            with HookedSaver.from_urls(spec["redis"], spec["mongo"], **_options(spec)) as saver:
                work(saver)
    finally:  # not reached with handler "none"
        ACK.append(k="closed", t=time.time())
    return 0


MODES = {"flow-run": flow_run, "flow-resume": flow_resume, "chat": chat, "shutdown": shutdown}


def main(argv: list[str]) -> int:
    faulthandler.register(signal.SIGUSR1, all_threads=True)  # a hung child can be looked at
    spec = json.loads(argv[1])
    return MODES[spec["mode"]](spec)


if __name__ == "__main__":
    sys.exit(main(sys.argv))
