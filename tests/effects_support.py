"""Support of the effect tests: a real external service and the graphs that call it.

``Service`` is a small HTTP server on a free loopback port (a thread of the test
process): every POST to ``/charge`` is one call; a call whose ``Idempotency-Key`` it has
seen is answered with the first answer and not counted as a new effect, like Stripe.
The graphs call it through ``once``/``aonce``; ``crash_child`` is the program a crash test
runs in a subprocess (``python -m tests.effects_support``).
"""

from __future__ import annotations

import json
import os
import signal
import sys
import threading
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Literal

from langgraph.graph import END, START, StateGraph
from langgraph.types import RetryPolicy, interrupt
from typing_extensions import TypedDict

from langgraph_durable import effects


class Service:
    """Counts calls (``calls``) and distinct effects (``effects``: one per
    ``Idempotency-Key``, or per call without one)."""

    def __init__(self) -> None:
        self.calls = 0
        self.keys: dict[str, dict[str, Any]] = {}
        self.unkeyed = 0
        self.tags: dict[str, list[str | None]] = {}
        self.lock = threading.Lock()
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 (http.server's name)
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                key = self.headers.get("Idempotency-Key")
                with outer.lock:
                    outer.calls += 1
                    outer.tags.setdefault(str(body.get("tag")), []).append(key)
                    if key is None:
                        outer.unkeyed += 1
                        answer = {"id": f"ch_{outer.calls}", **body}
                    else:
                        answer = outer.keys.setdefault(key, {"id": f"ch_{outer.calls}", **body})
                data = json.dumps(answer).encode()
                self.send_response(200)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/charge"

    def calls_of(self, tag: str) -> int:
        """Calls whose body carried ``tag``."""
        return len(self.tags.get(tag, []))

    def effects_of(self, tag: str) -> int:
        """Distinct effects of the calls tagged ``tag`` (one per distinct key)."""
        keys = self.tags.get(tag, [])
        return len({k for k in keys if k is not None}) + sum(k is None for k in keys)

    @property
    def effects(self) -> int:
        """Distinct effects the service carried out."""
        return len(self.keys) + self.unkeyed


@contextmanager
def service() -> Iterator[Service]:
    """A running ``Service`` (stopped on exit)."""
    svc = Service()
    thread = threading.Thread(target=svc.server.serve_forever, daemon=True)
    thread.start()
    try:
        yield svc
    finally:
        svc.server.shutdown()
        svc.server.server_close()


def task_checkpoint_stored(saver: Any) -> bool:
    """Whether the checkpoint the running task runs from is stored (read back through
    ``saver``). A functional API ``@task`` runs in its caller's loop: the map repeats the
    caller's checkpoint under the caller's namespaces, and the outermost one stores it."""
    from langgraph.config import get_config

    conf = get_config()["configurable"]
    cid = conf["checkpoint_map"][conf["checkpoint_ns"].rpartition("|")[0]]
    ns = min((k for k, v in conf["checkpoint_map"].items() if v == cid), key=len)
    return saver.get_tuple({"configurable": {
        "thread_id": conf["thread_id"], "checkpoint_ns": ns, "checkpoint_id": cid}}) is not None


def charge(url: str, amount: int, key: str | None = None, tag: str | None = None
           ) -> dict[str, Any]:
    """POST a charge of ``amount`` to the service (with ``Idempotency-Key`` ``key``; ``tag``
    goes in the body, for ``Service.effects_of``)."""
    headers = {"Content-Type": "application/json"}
    if key is not None:
        headers["Idempotency-Key"] = key
    body = {"amount": amount, **({"tag": tag} if tag is not None else {})}
    req = urllib.request.Request(url, json.dumps(body).encode(), headers)
    with urllib.request.urlopen(req, timeout=10) as resp:
        return json.loads(resp.read())  # type: ignore[no-any-return]


class State(TypedDict, total=False):
    url: str
    amount: int
    receipt: dict[str, Any]
    approved: Any
    in_doubt: str
    keyed: bool
    tag: str


def _pay(state: State) -> dict[str, Any]:
    mode: Literal["raise", "retry"] = state.get("in_doubt", "raise")  # type: ignore[assignment]

    def call() -> dict[str, Any]:
        key = effects.idempotency_key("pay") if state.get("keyed") else None
        return charge(state["url"], state["amount"], key, state.get("tag"))

    return {"receipt": effects.once("pay", call, in_doubt=mode)}


def pay_then_approve(checkpointer: Any) -> Any:
    """pay (an effect, then ``interrupt()``): the node re-runs from its start on resume."""
    def pay(state: State) -> dict[str, Any]:
        out = _pay(state)
        return {**out, "approved": interrupt({"receipt": out["receipt"]})}

    g = StateGraph(State)
    g.add_node("pay", pay)
    g.add_edge(START, "pay")
    g.add_edge("pay", END)
    return g.compile(checkpointer=checkpointer)


def pay_async_then_approve(checkpointer: Any) -> Any:
    """``pay_then_approve`` with an async node and ``aonce`` of a coroutine function."""
    import asyncio

    async def pay(state: State) -> dict[str, Any]:
        async def call() -> dict[str, Any]:
            return await asyncio.to_thread(charge, state["url"], state["amount"])

        receipt = await effects.aonce("pay", call)
        return {"receipt": receipt, "approved": interrupt({"receipt": receipt})}

    g = StateGraph(State)
    g.add_node("pay", pay)
    g.add_edge(START, "pay")
    g.add_edge("pay", END)
    return g.compile(checkpointer=checkpointer)


def pay_in_subgraph(checkpointer: Any) -> Any:
    """A parent whose node is a subgraph: pay (effect, then ``interrupt()``)."""
    sub = pay_then_approve(None)
    g = StateGraph(State)
    g.add_node("checkout", sub)
    g.add_edge(START, "checkout")
    g.add_edge("checkout", END)
    return g.compile(checkpointer=checkpointer)


def pay_then_fail(checkpointer: Any, failures: list[int]) -> Any:
    """pay (effect), then fail while ``failures[0]`` > 0 (decremented), under a retry
    policy of 3 attempts: each attempt re-runs the node from its start."""
    def pay(state: State) -> dict[str, Any]:
        out = _pay(state)
        if failures[0] > 0:
            failures[0] -= 1
            raise ConnectionError("the ledger did not answer")
        return out

    g = StateGraph(State)
    g.add_node("pay", pay, retry_policy=RetryPolicy(max_attempts=3, initial_interval=0.01,
                                                     jitter=False))
    g.add_edge(START, "pay")
    g.add_edge("pay", END)
    return g.compile(checkpointer=checkpointer)


def pay_only(checkpointer: Any) -> Any:
    """One node, pay: what the crash tests run."""
    g = StateGraph(State)
    g.add_node("pay", _pay)
    g.add_edge(START, "pay")
    g.add_edge("pay", END)
    return g.compile(checkpointer=checkpointer)


CRASH_POINTS = ("started", "called", "journaled")
"""Where a crash test kills the child: after the started entry (before the call), after
the call (before its outcome is journaled), after the outcome is journaled."""


def slowed_puts(saver: Any, seconds: float, fail: bool = False,
                after: threading.Event | None = None) -> Any:
    """``saver`` whose ``put``/``aput`` of a step's checkpoint (metadata source
    ``"loop"``) first waits ``seconds``: LangGraph's default durability ("async") runs the
    step's tasks meanwhile, so every task starts before its checkpoint is stored, the race
    a busy machine makes now and then. With ``fail`` the saver then refuses that put
    (``InvalidIdentifierError``: a channel version with a NUL). With ``after`` that put
    first waits (at most 30 s) until the test sets the event: a put that must be sent
    only after something the test does (a delete, a server stopped), whatever the load.
    Returns ``saver``."""
    import asyncio

    real, areal = saver.put, saver.aput

    def versions(metadata: Any, new_versions: Any) -> Any:
        return {c: "bad\x00version" for c in new_versions} if fail else new_versions

    def put(config: Any, checkpoint: Any, metadata: Any, new_versions: Any) -> Any:
        if metadata.get("source") == "loop":
            if after is not None:
                after.wait(30)
            threading.Event().wait(seconds)
            new_versions = versions(metadata, new_versions)
        return real(config, checkpoint, metadata, new_versions)

    async def aput(config: Any, checkpoint: Any, metadata: Any, new_versions: Any) -> Any:
        if metadata.get("source") == "loop":
            if after is not None:
                await asyncio.to_thread(after.wait, 30)
            await asyncio.sleep(seconds)
            new_versions = versions(metadata, new_versions)
        return await areal(config, checkpoint, metadata, new_versions)

    saver.put, saver.aput = put, aput
    return saver


def crash_child(redis_url: str, mongo_url: str, options: dict[str, Any], url: str,
                runs: list[dict[str, str]], ready: str, slow_put_s: float = 0.0) -> None:
    """Run ``runs`` (``{"thread", "point", "in_doubt"}``) at once, each in its own thread,
    each stopping at its crash point; when all are there, write ``ready`` and SIGKILL
    this process (no clean-up of any kind). With ``slow_put_s`` each step's checkpoint is
    stored that many seconds late (``slowed_puts``)."""
    from langgraph_durable import DurableSaver

    left = threading.Semaphore(0)

    def hook(point: str, ref: Any) -> None:
        if point == by_thread[ref.thread_id]:
            left.release()
            threading.Event().wait()  # here until the kill

    by_thread = {r["thread"]: r["point"] for r in runs}
    effects._crash_hook = hook
    saver = slowed_puts(DurableSaver.from_urls(redis_url, mongo_url, **options), slow_put_s)
    graph = pay_only(saver)
    for r in runs:
        state = {"url": url, "amount": 42, "in_doubt": r["in_doubt"], "keyed": True,
                 "tag": r["thread"]}
        config = {"configurable": {"thread_id": r["thread"]}}
        threading.Thread(target=graph.invoke, args=(state, config), daemon=True).start()
    for _ in runs:
        left.acquire()
    with open(ready, "w") as f:
        f.write("ready")
    os.kill(os.getpid(), signal.SIGKILL)


if __name__ == "__main__":
    crash_child(**json.loads(sys.argv[1]))
