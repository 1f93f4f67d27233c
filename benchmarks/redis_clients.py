"""Client CPU of one script call under asyncio, per Redis client library: redis-py (one
``EVALSHA`` per call, and through ``coalesce.ScriptBatcher``), coredis and valkey-glide
when installed (neither is a dependency; a missing one is reported and left out).

    python -m benchmarks.redis_clients [--tasks T] [--calls N] [--rounds R] [--bytes B]

``T`` concurrent tasks each run ``N`` calls of a put-shaped script (``SET`` of one key
with a ``B``-byte value, reply 1) on one redis-server of its own; variants interleaved
round robin, ``R`` rounds after one warm-up. Prints the median process CPU microseconds
per call and calls per second (wall), with ratios to redis-py's plain ``EVALSHA``.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import importlib.util
import os
import statistics
import time
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

SCRIPT = "redis.call('SET', KEYS[1], ARGV[1]) return 1"
SHA = hashlib.sha1(SCRIPT.encode()).hexdigest()

Caller = Callable[[str, bytes], Awaitable[Any]]


def _batcher_class() -> Any:
    """``coalesce.ScriptBatcher`` by file (it needs only redis-py), so that this runs in a
    venv holding the client libraries but not the package."""
    path = os.path.join(os.path.dirname(__file__), "..", "langgraph_durable", "io",
                        "coalesce.py")
    spec = importlib.util.spec_from_file_location("lgd_coalesce", path)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.ScriptBatcher


async def _redis_py(host: str, port: int, coalesce: bool) -> tuple[Caller, Any]:
    import redis.asyncio

    r = redis.asyncio.Redis(connection_pool=redis.asyncio.BlockingConnectionPool(
        host=host, port=port, max_connections=64, timeout=30))
    await r.script_load(SCRIPT)
    if coalesce:
        b = _batcher_class()(r)
        return (lambda k, v: b.call(SHA, SCRIPT, [k], [v])), r.aclose
    return (lambda k, v: r.evalsha(SHA, 1, k, v)), r.aclose


async def _coredis(host: str, port: int) -> tuple[Caller, Any]:
    import coredis

    c = coredis.Redis(host=host, port=port, max_connections=64)
    ctx = c.__aenter__() if hasattr(c, "__aenter__") else None
    if ctx is not None:
        await ctx

    async def close() -> None:
        if ctx is not None:
            await c.__aexit__(None, None, None)

    return (lambda k, v: c.evalsha(SHA, keys=[k], args=[v])), close


async def _glide(host: str, port: int) -> tuple[Caller, Any]:
    from glide import GlideClient, GlideClientConfiguration, NodeAddress, Script

    client = await GlideClient.create(GlideClientConfiguration([NodeAddress(host, port)]))
    script = Script(SCRIPT)
    return (lambda k, v: client.invoke_script(script, keys=[k], args=[v])), client.close


VARIANTS: dict[str, Callable[[str, int], Awaitable[tuple[Caller, Any]]]] = {
    "redis-py evalsha": lambda h, p: _redis_py(h, p, False),
    "redis-py coalesced": lambda h, p: _redis_py(h, p, True),
    "coredis": _coredis,
    "valkey-glide": _glide,
}


async def _run(call: Caller, tasks: int, calls: int, value: bytes, tag: str
               ) -> tuple[float, float]:
    async def one(i: int) -> None:
        for _ in range(calls):
            assert await call(f"lgd-bench-{tag}-{i}", value) == 1, "script reply"

    c0, t0 = time.process_time(), time.perf_counter()
    await asyncio.gather(*(one(i) for i in range(tasks)))
    n = tasks * calls
    return (time.process_time() - c0) / n * 1e6, n / (time.perf_counter() - t0)


async def _main(a: argparse.Namespace, host: str, port: int) -> None:
    made: dict[str, tuple[Caller, Any]] = {}
    for name, make in VARIANTS.items():
        try:
            made[name] = await make(host, port)
        except ImportError as exc:
            print(f"{name}: not installed ({exc})")
    value = b"x" * a.bytes
    got: dict[str, list[tuple[float, float]]] = {n: [] for n in made}
    names = list(made)
    for k in range(a.rounds + 1):
        for name in names[k % len(names):] + names[:k % len(names)]:
            r = await _run(made[name][0], a.tasks, a.calls, value, uuid.uuid4().hex[:6])
            if k:
                got[name].append(r)
    for _, close in made.values():
        await close()
    print(f"{a.tasks} tasks x {a.calls} calls, {a.bytes}-byte value, medians of {a.rounds}")
    base = None
    for name in names:
        cpu = statistics.median(r[0] for r in got[name])
        rate = statistics.median(r[1] for r in got[name])
        base = base or (cpu, rate)
        print(f"{name:20} {cpu:7.1f} CPU us/call ({cpu / base[0]:.2f}x)  "
              f"{rate:8.0f} calls/s ({rate / base[1]:.2f}x)")


def main() -> None:
    """Command line: start a redis-server, run every installed client, print medians."""
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--tasks", type=int, default=50)
    p.add_argument("--calls", type=int, default=200)
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--bytes", type=int, default=600)
    a = p.parse_args()
    import subprocess
    import tempfile

    import redis

    with tempfile.TemporaryDirectory() as d:
        import socket

        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        srv = subprocess.Popen(["redis-server", "--port", str(port), "--bind", "127.0.0.1",
                                "--save", "", "--dir", d], stdout=subprocess.DEVNULL)
        try:
            for _ in range(100):
                try:
                    redis.Redis(port=port).ping()
                    break
                except redis.ConnectionError:
                    time.sleep(0.05)
            asyncio.run(_main(a, "127.0.0.1", port))
        finally:
            srv.terminate()
            srv.wait(10)


if __name__ == "__main__":
    main()
