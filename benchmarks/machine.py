"""A description of the machine and of every component's version."""

from __future__ import annotations

import contextlib
import importlib.metadata as md
import os
import platform
import sqlite3
import sys
from typing import Any

import pymongo
import redis

_DISTS = [
    "langgraph", "langgraph-checkpoint", "langgraph-durable", "langchain-core", "redis",
    "pymongo", "SecantusDB", "langgraph-checkpoint-postgres", "psycopg", "psycopg-pool",
    "langgraph-checkpoint-mongodb", "langgraph-checkpoint-sqlite", "aiosqlite",
    "langgraph-checkpoint-redis", "py-spy", "matplotlib",
]


def _cpu_model() -> str:
    with contextlib.suppress(OSError), open("/proc/cpuinfo") as fh:
        for line in fh:
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return platform.processor() or "unknown"


def _ram_gib() -> float:
    with contextlib.suppress(OSError), open("/proc/meminfo") as fh:
        for line in fh:
            if line.startswith("MemTotal:"):
                return int(line.split()[1]) / 1024 / 1024
    return float("nan")


def _os() -> str:
    with contextlib.suppress(OSError), open("/etc/os-release") as fh:
        for line in fh:
            if line.startswith("PRETTY_NAME="):
                return line.split("=", 1)[1].strip().strip('"')
    return platform.platform()


def _source() -> str:
    import subprocess

    import langgraph_durable

    where = os.path.dirname(os.path.abspath(langgraph_durable.__file__))
    origin = os.environ.get("LANGGRAPH_DURABLE_BENCH_SOURCE") or "working tree"
    try:
        git = ["git", "-C", os.path.dirname(os.path.abspath(__file__))]
        sha = subprocess.run([*git, "rev-parse", "--short=12", "HEAD"], capture_output=True,
                             text=True, timeout=10).stdout.strip()
        dirty = subprocess.run([*git, "status", "--porcelain", "--", "../langgraph_durable"],
                               capture_output=True, text=True, timeout=10).stdout.strip()
        state = f"git HEAD {sha}" + (", uncommitted changes in langgraph_durable/"
                                     if dirty and origin == "working tree" else "")
    except Exception:
        state = "git state unknown"
    return f"{origin} ({state}); imported from {where}"


def describe(redis_url: str, mongo_url: str, postgres_url: str | None,
             redis_stack_url: str | None = None) -> dict[str, Any]:
    """Machine, OS, server and package versions as an ordered dict of strings."""
    out: dict[str, Any] = {
        "CPU": _cpu_model(),
        "cores (logical)": str(os.cpu_count()),
        "RAM": f"{_ram_gib():.1f} GiB",
        "OS": f"{_os()} (kernel {platform.release()})",
        "python": sys.version.split()[0],
        "load average at start (1/5/15 min)": " / ".join(f"{x:.2f}" for x in os.getloadavg()),
    }
    try:
        with redis.Redis.from_url(redis_url) as r:
            info = r.info("server")
        out["redis-server"] = f"{info.get('redis_version')} (no AOF, no RDB saves)"
    except Exception as exc:  # pragma: no cover - reported, not fatal
        out["redis-server"] = f"unknown ({exc})"
    try:
        with pymongo.MongoClient(mongo_url) as c:
            bi = c.admin.command("buildInfo")
        out["MongoDB-wire server"] = (f"SecantusDB {md.version('SecantusDB')} "
                                      f"(reports MongoDB {bi.get('version')}), standalone")
    except Exception as exc:  # pragma: no cover
        out["MongoDB-wire server"] = f"unknown ({exc})"
    if postgres_url:
        try:
            import psycopg

            with psycopg.connect(postgres_url) as c:
                v = c.execute("SHOW server_version").fetchone()[0]
                fs = c.execute("SHOW fsync").fetchone()[0]
                sc = c.execute("SHOW synchronous_commit").fetchone()[0]
            out["PostgreSQL"] = f"{v} (fsync={fs}, synchronous_commit={sc})"
        except Exception as exc:  # pragma: no cover
            out["PostgreSQL"] = f"unknown ({exc})"
    else:
        out["PostgreSQL"] = "not running"
    out["SQLite"] = sqlite3.sqlite_version
    if redis_stack_url:
        out["Redis Stack (REDIS_STACK_URL)"] = "set"
    out["langgraph_durable under test"] = _source()
    pk = []
    for d in _DISTS:
        with contextlib.suppress(md.PackageNotFoundError):
            pk.append(f"{d} {md.version(d)}")
    out["packages"] = ", ".join(pk)
    return out
