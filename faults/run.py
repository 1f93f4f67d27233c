"""The fault-injection runner: ``python -m faults.run``.

Runs every scenario against real servers on loopback (``langgraph_durable.testing``: a
shared Redis and SecantusDB, plus servers of their own for the scenarios that stop or kill
one), prints the table of figures and writes it into ``docs/reliability.md`` (between the
``faults:results`` markers; the rest of the file is left alone).

    python -m faults.run                 # the full forms (~10 min on 2 cores)
    python -m faults.run --quick         # the short forms the tests run
    python -m faults.run --only 1,5b     # some scenarios
    python -m faults.run --no-docs       # print only
    python -m faults.run --redis cluster --only 1,2,5,5b,5c,9
                                         # against a local 3 + 3 Redis Cluster

With ``--redis cluster`` the runner starts ``testing_cluster.redis_cluster()`` (3 masters, 3
replicas) instead of a single Redis; only the scenarios in ``ON_CLUSTER`` run there (the
others stop or kill a single Redis, or do not depend on it), and their rows are kept
apart (keys ``s1@cluster`` ..., titles ending "[Redis Cluster]").

Exit code 0 when every scenario passed, 1 when one found a departure (a bug), 2 when the
runner itself failed.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import json
import os
import platform
import re
import subprocess
import sys
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .common import ROOT, Env
from .result import Result, details, from_json, table, to_json

DOC = ROOT / "docs" / "reliability.md"
LAST = Path(__file__).resolve().parent / "last_results.json"
"""Figures of the latest run of each scenario (so ``--only`` runs update their rows)."""
BEGIN, END = "<!-- faults:results:begin -->", "<!-- faults:results:end -->"

# (key, full-form arguments, quick-form arguments)
PLAN: list[tuple[str, dict[str, Any], dict[str, Any]]] = [
    ("1", {"trials": 100, "store_trials": 20}, {"trials": 10, "store_trials": 5}),
    ("2", {"trials": 10}, {"trials": 2}),
    ("3", {"trials_per_policy": 2, "mid_flush_stops": 8},
     {"trials_per_policy": 1, "subgraph_probe": False}),
    ("4", {"aof_trials": 10, "no_aof_trial": True}, {"aof_trials": 2}),
    ("5", {"interleavings": 1000}, {"interleavings": 100}),
    ("5b", {"interleavings": 150, "stalled_rounds": True},
     {"interleavings": 20, "stalled_rounds": True}),
    ("5c", {"interleavings": 150, "repeat_tasks": True},
     {"interleavings": 30, "repeat_tasks": True}),
    ("6", {"trials_per_rule": 3}, {"trials_per_rule": 1}),
    ("7", {"trials": 2, "with_default_drain": True, "sys_exit_trials": 12}, {"trials": 1}),
    ("8", {"trials": 2}, {"trials": 1, "forms": ("cut",)}),
    ("9", {"threads": 200, "scaling": (1, 2, 4), "scaling_threads": 60},
     {"threads": 40, "concurrency": 3}),
    ("9p", {"threads": 200, "step_s": 0.5}, {"threads": 40, "concurrency": 3, "step_s": 0.2}),
    ("10", {"threads": 200, "per_kind": 10, "steps": 3},
     {"threads": 40, "per_kind": 2, "steps": 2}),
    ("11", {"trials": 2, "expired": 120, "pinned": 10, "asking": 10, "live": 20},
     {"trials": 1, "expired": 30, "pinned": 4, "asking": 4, "live": 6}),
    ("hostile", {}, {}),
]
ON_CLUSTER = {"1", "2", "5", "5b", "5c", "9", "9p", "10"}
"""Scenarios ``--redis cluster`` runs (the others kill or stop a single Redis server)."""


def _scenario(key: str) -> Callable[..., Result]:
    from . import (
        s1_app_killed,
        s2_flusher_killed,
        s3_mongo_down,
        s4_redis_down,
        s5_delete_races,
        s6_concurrent,
        s7_shutdown,
        s8_failover,
        s9_many_processes,
        s10_poison,
        s11_retention,
    )

    return {"1": s1_app_killed.run, "2": s2_flusher_killed.run, "3": s3_mongo_down.run,
            "4": s4_redis_down.run, "5": s5_delete_races.run, "5b": s5_delete_races.run,
            "5c": s5_delete_races.run, "6": s6_concurrent.run, "7": s7_shutdown.run,
            "8": s8_failover.run, "9": s9_many_processes.run, "9p": s9_many_processes.run,
            "10": s10_poison.run, "11": s11_retention.run, "hostile": hostile}[key]


def hostile(env: Env) -> Result:
    """The bad-input cases of the test suite, run by pytest, counted."""
    res = Result("hostile", "hostile input (tests/faults/test_hostile_input.py + "
                 "tests/test_errors.py)")
    began = time.monotonic()
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
         "tests/faults/test_hostile_input.py", "tests/test_errors.py"],
        cwd=str(ROOT), capture_output=True, text=True,
        env={**os.environ, "REDIS_URL": env.redis_url, "MONGODB_URL": env.mongo_url})
    last = proc.stdout.strip().splitlines()[-1] if proc.stdout.strip() else proc.stderr
    counts = {k: int(n) for n, k in re.findall(r"(\d+) (passed|failed|xfailed|xpassed|error)",
                                               last)}
    res.trials = sum(counts.values())
    res.faults = res.trials
    res.mismatches = counts.get("failed", 0) + counts.get("error", 0) + counts.get("xpassed", 0)
    res.measures = {"passed": counts.get("passed", 0),
                    "known bugs (xfail)": counts.get("xfailed", 0)}
    if counts.get("xfailed"):
        xf = [line for line in proc.stdout.splitlines() if "XFAIL" in line]
        res.findings += [line.split(" - ", 1)[-1] for line in xf] or [
            f"{counts['xfailed']} cases fail today (xfail, see the test file)"]
    res.seconds = time.monotonic() - began
    return res


def write_doc(results: list[Result], header: str) -> None:
    block = f"{BEGIN}\n{header}\n\n{table(results)}\n\n{details(results)}\n{END}"
    text = DOC.read_text() if DOC.exists() else (
        "# Reliability: fault injection\n\nWritten by `python -m faults.run`.\n\n")
    if BEGIN in text and END in text:
        text = text[:text.index(BEGIN)] + block + text[text.index(END) + len(END):]
    else:
        text = text.rstrip() + "\n\n" + block + "\n"
    DOC.write_text(text)


def update_rows(results: list[Result], header: str) -> None:
    """Replace, in the results block of ``DOC``, the table rows of ``results``' scenarios
    (matched by title; a scenario not yet there is added after the last row) and add
    ``header`` below the block's run lines; every other row and note stays as written. For
    an ``--only`` run in a checkout without ``LAST`` (it is not committed): the other rows'
    figures are not known here, so they are not rewritten."""
    text = DOC.read_text()
    if BEGIN not in text or END not in text:
        write_doc(results, header)
        return
    start, end = text.index(BEGIN), text.index(END)
    lines = text[start:end].split("\n")
    new_rows = {r.title: row for r, row in zip(results, table(results).split("\n")[2:])}
    rows_at = [i for i, line in enumerate(lines) if line.startswith("| ")][2:]
    for i in rows_at:
        title = lines[i][2:].split(" | ", 1)[0]
        if title in new_rows:
            lines[i] = new_rows.pop(title)
    if new_rows and rows_at:
        lines[rows_at[-1] + 1:rows_at[-1] + 1] = list(new_rows.values())
    head_end = next(i for i, line in enumerate(lines) if i > 0 and not line.strip())
    lines.insert(head_end, header)
    DOC.write_text(text[:start] + "\n".join(lines) + text[end:])


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m faults.run", description=__doc__.split("\n\n")[0])
    p.add_argument("--quick", action="store_true", help="the short forms (as the tests)")
    p.add_argument("--only", help="comma-separated scenario keys: "
                   "1,2,3,4,5,5b,5c,6,7,8,9,9p,10,11,hostile")
    p.add_argument("--redis", choices=["single", "cluster"], default="single",
                   help="a single Redis (default) or a local 3 + 3 Redis Cluster")
    p.add_argument("--seed", type=int, default=None, help="seed of the random choices")
    p.add_argument("--no-docs", action="store_true", help=f"do not write {DOC}")
    p.add_argument("--verbose", action="store_true")
    args = p.parse_args(argv)
    wanted = set(args.only.split(",")) if args.only else None
    from langgraph_durable.testing import mongo_server, redis_server
    from langgraph_durable.testing.cluster import redis_cluster

    cluster = args.redis == "cluster"

    results: list[Result] = []
    began = time.monotonic()
    os.environ.setdefault("LANGGRAPH_DURABLE_NO_DOCKER", "1")
    with (redis_cluster() if cluster else redis_server()) as rs, mongo_server() as ms:
        env = Env(rs.url, ms.url, verbose=args.verbose)
        print(f"servers: redis {rs.url}  mongodb {ms.url}  work {env.work}", flush=True)
        for key, full, quick in PLAN:
            if (wanted and key not in wanted) or (cluster and key not in ON_CLUSTER):
                continue
            kwargs = dict(quick if args.quick else full)
            if args.seed is not None and key in ("1", "2", "5", "5b", "5c", "11"):
                kwargs["seed"] = args.seed
            print(f"scenario {key} {kwargs} ...", flush=True)
            try:
                res = _scenario(key)(env, **kwargs)
            except Exception as exc:  # a runner failure is reported, not hidden
                traceback.print_exc()
                res = Result(key if key == "hostile" else f"s{key}", f"{key}. (runner error)")
                res.findings.append(f"the scenario could not run: {type(exc).__name__}: {exc}")
            if cluster:
                res.key, res.title = f"{res.key}@cluster", f"{res.title} [Redis Cluster]"
            results.append(res)
            with contextlib.suppress(Exception):  # per-trial details, for looking into a FAIL
                (env.work / f"{res.key}-records.json").write_text(
                    json.dumps(res.records, indent=1, default=str))
            print(f"  -> {'pass' if res.ok else 'FAIL'} in {res.seconds:.0f} s; "
                  f"{res.findings or ''}", flush=True)
    total = time.monotonic() - began
    form = "quick" if args.quick else "full"
    header = (f"Run of {dt.date.today().isoformat()}: `python -m faults.run"
              f"{' --quick' if args.quick else ''}"
              f"{' --redis cluster' if cluster else ''}"
              f"{' --only ' + args.only if args.only else ''}` in {total / 60:.1f} min on "
              f"{os.cpu_count()} cores (Python {platform.python_version()}, "
              f"{'a 3 + 3 Redis Cluster' if cluster else 'Redis'} and SecantusDB on loopback).")
    print()
    print(header)
    print(table(results))
    print()
    print(details(results))
    if not args.no_docs:
        if wanted and not LAST.exists() and DOC.exists():
            update_rows(results, header)
            print(f"written to {DOC} (the rows of this run only)")
            return 0 if all(r.ok for r in results) else 1
        known = json.loads(LAST.read_text()) if LAST.exists() and wanted else {}
        known.setdefault("runs", []).append(header)
        rows = known.setdefault(form, {})
        rows.update({r.key: to_json(r) for r in results})
        LAST.write_text(json.dumps(known, indent=1, default=str))
        ordered = [from_json(rows[k]) for k in _keys() if k in rows]
        write_doc(ordered, "\n".join(known["runs"][-3:]) if wanted else header)
        print(f"written to {DOC}")
    return 0 if all(r.ok for r in results) else 1


def _keys() -> list[str]:
    """Result keys in table order."""
    keys = ["s1", "s2", "s3", "s4", "s5", "s5b", "s5c", "s6", "s7", "s8", "s9", "s9p",
            "s10", "s11", "hostile"]
    return keys + [f"s{k}@cluster" for k in ("1", "2", "5", "5b", "5c", "9", "9p", "10")]


if __name__ == "__main__":
    try:
        sys.exit(main())
    except KeyboardInterrupt:
        sys.exit(2)
