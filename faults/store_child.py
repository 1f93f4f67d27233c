"""The store's child process of the fault scenarios: ``python -m faults.store_child '<spec>'``.

It runs ``spec["ops"]`` (``store_faults.make_ops``) in order on ``saver.store()`` of a
``DurableSaver.from_urls`` (its in-process flusher running), with the sync API or the async
one (``spec["api"]``), and records in an fsynced log (``spec["ack"]``) ``{"k": "try", "i":
i}`` before op ``i`` and ``{"k": "ok", "i": i}`` once it returned (acknowledged). It
SIGKILLs its own process at ``spec["kill"]``:

- ``{"kind": "op", "n": N, "pos": P}``: at op N, ``before`` it is sent, ``during`` it (after
  Redis ran a STORE_PUT of it, before the call returns: committed, not acknowledged; for
  a batch, after its first script) or ``after`` it returned and was logged;
- ``{"kind": "flush", "n": N, "point": P}``: in the N-th round of the in-process flusher
  (the points of ``faults.child``: ``before_mongo``, ``mid_mongo``, ``before_ack``,
  ``after_ack``);
- ``{"kind": "none"}`` or ``{"kind": "time"}`` (the parent kills it at a random time).

Writes ``spec["out"]`` (JSON) when it ends normally.
"""

from __future__ import annotations

import asyncio
import faulthandler
import json
import signal
import sys
import threading
import time
from typing import Any

from langgraph.store.base import PutOp

from langgraph_durable import DurableSaver
from langgraph_durable.io import drivers
from langgraph_durable.io.drivers import Script

from . import child
from .tiers import AckLog


def _install_during_hook(label: str) -> None:
    """Die right after Redis ran a STORE_PUT while ``_during`` is set (sync and async
    drivers alike; a batch's scripts may run on the driver's pool threads), before the
    call returns."""
    orig_sync, orig_async = drivers.execute_sync, drivers.execute_async

    def hooked(op: Any, c: Any) -> Any:
        res = orig_sync(op, c)
        if _during.is_set() and isinstance(op, Script) and op.name == "store_put":
            child.die(label)
        return res

    async def ahooked(op: Any, c: Any) -> Any:
        res = await orig_async(op, c)
        if _during.is_set() and isinstance(op, Script) and op.name == "store_put":
            child.die(label)
        return res

    drivers.execute_sync = hooked  # type: ignore[assignment]
    drivers.execute_async = ahooked  # type: ignore[assignment]


_during = threading.Event()
"""Set while the async API's op of the ``during`` kill point runs."""


def _batch(op: dict[str, Any]) -> list[PutOp]:
    return [PutOp(tuple(ns), key, value) for ns, key, value in op["items"]]


def run(spec: dict[str, Any]) -> int:
    ack = AckLog(spec["ack"])
    child.ACK = ack
    kill = spec.get("kill", {"kind": "none"})
    if kill["kind"] == "op" and kill["pos"] == "during":
        _install_during_hook(f"during store op #{kill['n']}")
    if kill["kind"] == "flush":
        child._install_flush_hook(kill)
    ops = spec["ops"]

    def at(i: int, pos: str) -> None:
        if kill["kind"] == "op" and kill["n"] == i and kill["pos"] == pos:
            child.die(f"{pos} store op #{i}")

    def during(i: int) -> bool:
        return kill["kind"] == "op" and kill["n"] == i and kill["pos"] == "during"

    with DurableSaver.from_urls(spec["redis"], spec["mongo"], key_prefix=spec["prefix"],
                                database=spec["database"], **spec.get("options", {})) as saver:
        store = saver.store()
        ack.append(k="start", t=time.time())
        if spec.get("api", "sync") == "sync":
            for i, op in enumerate(ops):
                at(i, "before")
                ack.append(k="try", i=i)
                if during(i):
                    _during.set()
                store.batch(_batch(op))
                _during.clear()
                ack.append(k="ok", i=i)
                at(i, "after")
        else:
            async def go() -> None:
                for i, op in enumerate(ops):
                    at(i, "before")
                    ack.append(k="try", i=i)
                    if during(i):
                        _during.set()
                    await store.abatch(_batch(op))
                    _during.clear()
                    ack.append(k="ok", i=i)
                    at(i, "after")

            asyncio.run(go())
        ack.append(k="end", t=time.time())
    with open(spec["out"], "w", encoding="utf-8") as f:
        json.dump({"finished": True}, f)
    return 0


if __name__ == "__main__":
    faulthandler.register(signal.SIGUSR1, all_threads=True)
    sys.exit(run(json.loads(sys.argv[1])))
