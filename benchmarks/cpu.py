"""CPU seconds used by the benchmark process and by each server process tree (Linux
/proc), so a run's cost on a shared 2-core machine can be told apart from its wall time;
and the part of the benchmark process' CPU spent in Python's cyclic garbage collector
(``gc.callbacks``, every thread), which the savers' allocations drive (docs/speed.md,
"The garbage collector")."""

from __future__ import annotations

import gc
import os
import resource
import time
from typing import Any

GC_KEY = "client gc"
"""``snapshot``'s key for the CPU seconds the collector took so far (part of ``client``)."""
_gc = {"s": 0.0, "t0": 0.0}


def _on_gc(phase: str, info: dict[str, Any]) -> None:
    """Time each collection with the collecting thread's CPU clock (collections never
    overlap: they hold the GIL)."""
    if phase == "start":
        _gc["t0"] = time.thread_time()
    else:
        _gc["s"] += time.thread_time() - _gc["t0"]


gc.callbacks.append(_on_gc)

_TICK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
SERVERS: dict[str, list[int]] = {}
"""Server name -> root pids (filled by ``find_servers``)."""


def _procs() -> dict[int, tuple[int, str]]:
    out = {}
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open(f"/proc/{d}/cmdline", "rb") as fh:
                cmd = fh.read().replace(b"\0", b" ").decode(errors="replace")
            with open(f"/proc/{d}/stat") as fh:
                ppid = int(fh.read().rsplit(")", 1)[1].split()[1])
            out[int(d)] = (ppid, cmd)
        except (OSError, ValueError, IndexError):
            continue
    return out


def find_servers(redis_port: int | None, mongo_port: int | None,
                 postgres_port: int | None) -> dict[str, list[int]]:
    """Find the server processes by the ports they listen on (from their command lines)."""
    SERVERS.clear()
    if not os.path.isdir("/proc"):
        return SERVERS
    for pid, (_ppid, cmd) in _procs().items():
        if redis_port and "redis-server" in cmd and f":{redis_port}" in cmd:
            SERVERS.setdefault("redis-server", []).append(pid)
        elif mongo_port and "secantus" in cmd and f"--port {mongo_port}" in cmd:
            SERVERS.setdefault("SecantusDB", []).append(pid)
        elif postgres_port and cmd.split(" ", 1)[0].endswith("/postgres") \
                and f"-p {postgres_port}" in cmd:
            SERVERS.setdefault("PostgreSQL", []).append(pid)
    return SERVERS


def _tree_cpu(roots: list[int], procs: dict[int, tuple[int, str]]) -> float:
    kids: dict[int, list[int]] = {}
    for pid, (ppid, _c) in procs.items():
        kids.setdefault(ppid, []).append(pid)
    total, todo, seen = 0.0, list(roots), set()
    while todo:
        pid = todo.pop()
        if pid in seen:
            continue
        seen.add(pid)
        try:
            with open(f"/proc/{pid}/stat") as fh:
                f = fh.read().rsplit(")", 1)[1].split()
            total += (int(f[11]) + int(f[12]) + int(f[13]) + int(f[14])) / _TICK
        except (OSError, ValueError, IndexError):
            pass
        todo += kids.get(pid, [])
    return total


def machine_busy() -> float:
    """CPU seconds the whole machine has been busy (all cores, /proc/stat; steal included)."""
    try:
        with open("/proc/stat") as fh:
            f = [int(x) for x in fh.readline().split()[1:]]
    except (OSError, ValueError):
        return float("nan")
    user, nice, system, _idle, _iowait, irq, softirq, steal = (f + [0] * 8)[:8]
    return (user + nice + system + irq + softirq + steal) / _TICK


def snapshot() -> dict[str, float]:
    """CPU seconds so far: ``client`` (this process, all threads), ``GC_KEY`` (of it, in
    the garbage collector), each server tree and
    ``machine`` (everything on the machine, to tell other users' jobs apart)."""
    ru = resource.getrusage(resource.RUSAGE_SELF)
    out = {"client": ru.ru_utime + ru.ru_stime, GC_KEY: _gc["s"], "machine": machine_busy()}
    if SERVERS:
        procs = _procs()
        for name, roots in SERVERS.items():
            out[name] = _tree_cpu(roots, procs)
    return out


def delta(before: dict[str, float], after: dict[str, float]) -> dict[str, Any]:
    return {f"cpu_{k}_s": round(after[k] - before.get(k, 0.0), 3) for k in after}
