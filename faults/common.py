"""Parent-side helpers shared by the scenarios: servers, names, child processes."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import tempfile
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pymongo
import redis

from langgraph_durable.config import DurableConfig
from langgraph_durable.io.redis_urls import redis_client_from_url

from . import forkserver

ROOT = Path(__file__).resolve().parent.parent


def tap(plan: Any, before: Any = None, after: Any = None) -> Any:
    """A plan that runs ``plan`` unchanged (each operation to the driver, each error back to
    ``plan``), calling ``before(op)`` before an operation runs and ``after(op, result,
    error)`` once it has: the hook the scenarios use to kill, trace or interleave."""
    send: Any = None
    err: BaseException | None = None
    while True:
        try:
            op = plan.throw(err) if err is not None else plan.send(send)
        except StopIteration as stop:
            return stop.value
        if before is not None:
            before(op)
        try:
            send, err = (yield op), None
        except Exception as exc:  # handed back to the inner plan
            send, err = None, exc
        if after is not None:
            after(op, send, err)


@dataclass
class Env:
    """What a scenario runs against: the shared servers' URLs and a work folder.

    Scenarios that stop or kill a server start their own with ``langgraph_durable.testing``;
    the shared ones are never stopped."""

    redis_url: str
    mongo_url: str
    work: Path = field(default_factory=lambda: Path(tempfile.mkdtemp(prefix="lgd-faults-")))
    verbose: bool = False

    def log(self, msg: str) -> None:
        if self.verbose:
            print(f"  {msg}", flush=True)


def names(tag: str = "f") -> tuple[str, str]:
    """A fresh ``(key_prefix, database)`` pair no other trial uses."""
    u = uuid.uuid4().hex[:10]
    return f"{tag}{u}", f"lgdf_{u}"


@contextlib.contextmanager
def clients(redis_url: str, mongo_url: str) -> Iterator[tuple[redis.Redis, pymongo.MongoClient]]:
    """A Redis client for ``redis_url`` in any scheme a saver takes (a
    ``redis+cluster://`` URL gives a cluster client) and a MongoDB client."""
    r = redis_client_from_url(redis_url, DurableConfig(), asyncio=False)
    m: pymongo.MongoClient = pymongo.MongoClient(mongo_url, serverSelectionTimeoutMS=10_000)
    try:
        yield r, m
    finally:
        r.close()
        m.close()


def partitions_of(redis_url: str, options: dict[str, Any] | None = None) -> int:
    """The number of outbox partitions a saver with ``options`` has on ``redis_url``
    (``Context.partitions``: ``outbox_partitions``, else 16 on a Redis Cluster, else 1)."""
    from langgraph_durable.plans.context import partitions_for

    cfg = DurableConfig(**{k: v for k, v in (options or {}).items()
                           if k == "outbox_partitions"})
    return partitions_for(cfg, redis_url.startswith("redis+cluster://"))


def cleanup(redis_url: str, mongo_url: str, prefix: str, database: str) -> None:
    """Remove what a trial stored (its Redis keys and its MongoDB database)."""
    from .tiers import drop_prefix

    with contextlib.suppress(Exception), clients(redis_url, mongo_url) as (r, m):
        drop_prefix(r, prefix)
        m.drop_database(database)


class Child:
    """A ``python -m faults.child`` process (output in ``<work>/<name>.log``); ``module``
    names another child module (``faults.many_child``). Started from the fork server
    (``faults/forkserver.py``: the same process, without importing LangGraph again)."""

    def __init__(self, spec: dict[str, Any], work: Path, name: str,
                 env: dict[str, str] | None = None, module: str = "faults.child") -> None:
        self.spec = spec
        self.log_path = work / f"{name}.log"
        spec.setdefault("out", str(work / f"{name}.json"))
        self.proc = forkserver.start(
            module, [json.dumps(spec)], cwd=str(ROOT), log=str(self.log_path), root=str(ROOT),
            env={**os.environ, "PYTHONPATH": str(ROOT), **(env or {})})

    @property
    def pid(self) -> int:
        return self.proc.pid

    def kill(self) -> None:
        with contextlib.suppress(ProcessLookupError):
            self.proc.send_signal(signal.SIGKILL)

    def wait(self, timeout_s: float) -> int:
        try:
            return self.proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                self.proc.send_signal(signal.SIGUSR1)  # faulthandler: dump every thread
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.proc.wait(timeout=1.0)
            self.kill()
            self.proc.wait()
            raise RuntimeError(f"child {self.spec.get('mode')} did not end within "
                               f"{timeout_s} s; log:\n{self.tail()}") from None

    def out(self) -> dict[str, Any]:
        try:
            with open(self.spec["out"], encoding="utf-8") as f:
                return json.load(f)
        except FileNotFoundError:
            raise RuntimeError(f"child {self.spec.get('mode')} wrote no output (exit "
                               f"{self.proc.returncode}); log:\n{self.tail()}") from None

    def tail(self, chars: int = 12000) -> str:
        with contextlib.suppress(OSError):
            return self.log_path.read_text(errors="replace")[-chars:]
        return "(no log)"


def worker(redis_url: str, mongo_url: str, prefix: str, database: str, log: Path,
           **options: Any) -> subprocess.Popen:
    """A standalone flusher worker process (``python -m langgraph_durable.outbox.worker``)."""
    argv = [sys.executable, "-m", "langgraph_durable.outbox.worker", "--redis-url", redis_url,
            "--mongo-url", mongo_url, "--key-prefix", prefix, "--database", database]
    for k, v in options.items():
        argv += [f"--{k.replace('_', '-')}", str(v)]
    with open(log, "wb") as f:
        return subprocess.Popen(argv, cwd=str(ROOT), stdin=subprocess.DEVNULL, stdout=f,
                                stderr=subprocess.STDOUT)


def tuple_form(t: Any) -> str:
    """A ``CheckpointTuple`` as stable text (what "the same answer" compares)."""
    return json.dumps([t.config, t.checkpoint, t.metadata, t.parent_config,
                       [list(w) for w in t.pending_writes or []]], sort_keys=True, default=repr)


def thread_answers(saver: Any, thread: str) -> dict[str, Any]:
    """Every read a graph makes of ``thread``, as text: the latest tuple of each namespace,
    ``list`` of the whole thread, and ``get_tuple`` of each listed checkpoint."""
    cfg = {"configurable": {"thread_id": thread}}
    listed = list(saver.list(cfg))
    out: dict[str, Any] = {"list": [tuple_form(t) for t in listed]}
    for ns in sorted({t.config["configurable"]["checkpoint_ns"] for t in listed}):
        latest = saver.get_tuple({"configurable": {"thread_id": thread, "checkpoint_ns": ns}})
        out[f"latest {ns!r}"] = tuple_form(latest) if latest else None
    for t in listed:
        got = saver.get_tuple(t.config)
        out[f"get {t.config['configurable']['checkpoint_id']}"] = tuple_form(got) if got else None
    return out
