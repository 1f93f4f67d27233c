"""The benchmark harness: every workload against every saver, in one run.

    .venv/bin/python -m benchmarks.run [--quick] [--out benchmarks/results]
                                       [--savers inmemory,durable,...] [--reps N]
                                       [--workloads W1,W1L,...,W7,DOCS,RT] [--no-profile]
                                       [--cpu-mode shared|pinned] [--no-sweep]
                                       [--gc-threshold N]

Starts the servers it needs (Redis and SecantusDB as the tests do, PostgreSQL from
Debian's package with initdb/pg_ctl), runs W1-W7 with repetitions interleaved round robin
across savers, and writes ``report.md``, ``results.json`` and PNG plots into ``--out``.
``--quick`` is a smoke run of a few seconds per workload (InMemorySaver and DurableSaver
unless ``--savers`` says otherwise); it checks that the harness works, not timings.
``--cpu-mode pinned`` puts the benchmark process on CPU 0 and every server on CPU 1
(``benchmarks/pinning.py``): the application's cost as if the servers ran elsewhere.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import gc
import json
import os
import sys
import time
import traceback
from collections.abc import Callable
from typing import Any

from . import agent_loop, workloads
from .savers import Env, SaverSpec, all_specs

QUICK_SAVERS = ["inmemory", "durable", "durable_strict"]
WORKLOADS = ["W1", "W1L", "W2", "W3", "W4", "W5", "W6", "W7", "DOCS", "RT"]


def log(msg: str) -> None:
    print(f"[bench {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


class Recorder:
    """Every measurement as a flat record: workload, saver, rep, metrics (or error)."""

    def __init__(self, before: Callable[[], None] | None = None) -> None:
        self.records: list[dict[str, Any]] = []
        self.durations: dict[str, float] = {}
        self.before = before
        """Called before each workload (pinned mode: the servers pinned again)."""

    def add(self, workload: str, spec: SaverSpec, rep: int, metrics: dict[str, Any]) -> None:
        """One record; ``load1``: the 1-minute load average when it was taken."""
        self.records.append({"workload": workload, "saver": spec.name, "label": spec.label,
                             "rep": rep, "load1": round(os.getloadavg()[0], 2), **metrics})

    def run(self, workload: str, specs: list[SaverSpec], reps: int,
            fn: Callable[[SaverSpec], dict[str, Any]]) -> None:
        """``reps`` repetitions, each running every saver once (order rotated per rep)."""
        if self.before is not None:
            self.before()
        began = time.perf_counter()
        base = workload.split("@")[0]
        specs = [s for s in specs if s.only is None or base in s.only]
        for rep in range(reps):
            for spec in workloads.rotate(specs, rep):
                a = time.perf_counter()
                try:
                    m = fn(spec)
                except Exception as exc:
                    log(f"{workload} {spec.name} rep {rep}: FAILED {type(exc).__name__}: {exc}")
                    traceback.print_exc(file=sys.stderr)
                    m = {"error": f"{type(exc).__name__}: {str(exc)[:200]}"}
                self.add(workload, spec, rep, m)
                log(f"{workload} {spec.name} rep {rep + 1}/{reps}: "
                    f"{time.perf_counter() - a:.1f} s")
        self.durations[workload] = time.perf_counter() - began


def _parse(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.run", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="smoke run (seconds); no timing claims")
    ap.add_argument("--out", default=os.path.join("benchmarks", "results"),
                    help="folder for report.md, results.json and PNGs")
    ap.add_argument("--savers", default=None,
                    help="comma-separated subset: inmemory,durable,durable_strict,postgres,"
                         "mongodb,sqlite,redis_stack (default: all; quick: "
                         + ",".join(QUICK_SAVERS) + "); 'all' for all")
    ap.add_argument("--reps", type=int, default=None, help="repetitions per workload")
    ap.add_argument("--no-profile", action="store_true", help="skip the py-spy profiles")
    ap.add_argument("--workloads", default=",".join(WORKLOADS),
                    help="comma-separated subset of " + ",".join(WORKLOADS) + " (W1L: W1 at "
                         "w1_long_turns, 300; DOCS: MongoDB documents and server CPU per "
                         "checkpoint; RT: round trips)")
    ap.add_argument("--cpu-mode", choices=("shared", "pinned"), default="shared",
                    help="shared: the benchmark and the servers share every core; pinned: "
                         "the benchmark process on CPU 0, the servers on CPU 1 (taskset)")
    ap.add_argument("--docs-savers", default=None,
                    help="savers DOCS runs (default: every saver that writes to MongoDB; "
                         "quick: those of --savers that do)")
    ap.add_argument("--no-sweep", action="store_true",
                    help="run W3 at w3_threads only (not the 1..200-thread sweep)")
    ap.add_argument("--at-commit", default=None, metavar="REV",
                    help="benchmark langgraph_durable as committed at REV (e.g. HEAD), "
                         "extracted with `git archive` to a temporary folder, instead of the "
                         "working tree")
    ap.add_argument("--gc-threshold", type=int, default=None, metavar="N",
                    help="the benchmark process' gc.set_threshold(N) for every saver alike "
                         "(Python's default is 700; many services raise it, e.g. 50000: "
                         "docs/speed.md, 'The garbage collector'); the machine section says it")
    ap.add_argument("--docs-img", default=os.path.join("docs", "img"), metavar="DIR",
                    help="copy the W3 sweep plot (w3_sweep.png) into DIR after a full run "
                         "(not with --quick); '' not to copy")
    return ap.parse_args(argv)


def _at_commit(rev: str, argv: list[str]) -> int:
    """Re-run the harness with ``langgraph_durable`` from ``git archive REV`` first on the
    path (read-only git commands; the working tree is not touched)."""
    import shutil
    import subprocess
    import tempfile

    sha = subprocess.run(["git", "rev-parse", "--verify", f"{rev}^{{commit}}"],
                         capture_output=True, text=True, check=True).stdout.strip()
    tmp = tempfile.mkdtemp(prefix="lgd-bench-src-")
    try:
        archive = subprocess.run(["git", "archive", sha, "langgraph_durable"],
                                 capture_output=True, check=True).stdout
        subprocess.run(["tar", "-x", "-C", tmp], input=archive, check=True)
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(p for p in (tmp, os.getcwd(),
                                                        env.get("PYTHONPATH")) if p)
        # without it ``python -m`` puts the working directory first on sys.path, ahead of
        # PYTHONPATH, and the working tree's package is measured instead (subprocesses too)
        env["PYTHONSAFEPATH"] = "1"
        env["LANGGRAPH_DURABLE_BENCH_SOURCE"] = f"git archive {rev} ({sha[:12]})"
        rest, skip = [], False
        for a in argv:
            if skip:
                skip = False
                continue
            if a == "--at-commit":
                skip = True
                continue
            if a.startswith("--at-commit="):
                continue
            rest.append(a)
        log(f"benchmarking langgraph_durable at {rev} ({sha[:12]}) from {tmp}")
        return subprocess.run([sys.executable, "-m", "benchmarks.run", *rest],
                              env=env).returncode
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    args = _parse(argv)
    if args.at_commit:
        return _at_commit(args.at_commit, list(sys.argv[1:] if argv is None else argv))
    params = workloads.QUICK if args.quick else workloads.FULL
    if args.reps:
        params = dataclasses.replace(params, reps=args.reps)
    only: list[str] | None
    if args.savers in (None, ""):
        only = QUICK_SAVERS if args.quick else None
    elif args.savers == "all":
        only = None
    else:
        only = [s.strip() for s in args.savers.split(",") if s.strip()]
    todo = {w.strip().upper() for w in args.workloads.split(",") if w.strip()}
    unknown = todo - set(WORKLOADS)
    if unknown:
        raise SystemExit(f"--workloads: unknown {', '.join(sorted(unknown))} "
                         f"(known: {','.join(WORKLOADS)})")
    os.makedirs(args.out, exist_ok=True)
    from . import pinning

    if args.cpu_mode == "pinned":
        try:
            pinning.check()
        except pinning.PinningUnavailable as exc:
            raise SystemExit(str(exc)) from exc
        pinning.pin_self()
        log(f"pinned mode: this process on CPU {pinning.APP_CPU}, the servers on CPU "
            f"{pinning.SERVER_CPU}")
    if args.gc_threshold is not None:
        gc.set_threshold(args.gc_threshold)
    started = time.perf_counter()
    load_start = _loadavg()

    from langgraph_durable.testing import mongo_server, redis_server

    from .servers import PostgresUnavailable, postgres_server

    notes: list[str] = []
    with contextlib.ExitStack() as stack:
        log("starting redis-server and SecantusDB")
        rs = stack.enter_context(redis_server())
        ms = stack.enter_context(mongo_server())
        pg_url = None
        want_pg = only is None or "postgres" in only
        if want_pg:
            log("starting PostgreSQL")
            try:
                pg = stack.enter_context(postgres_server())
                pg_url = pg.url
            except PostgresUnavailable as exc:
                notes.append(f"PostgresSaver skipped: {exc}")
                log(notes[-1])
        env = Env(redis_url=rs.url, mongo_url=ms.url, postgres_url=pg_url,
                  redis_stack_url=os.environ.get("REDIS_STACK_URL") or None)
        stack.callback(lambda: __import__("shutil").rmtree(env.tmpdir, ignore_errors=True))
        from urllib.parse import urlparse

        from . import cpu

        servers = dict(cpu.find_servers(urlparse(rs.url).port, urlparse(ms.url).port,
                                        urlparse(pg_url).port if pg_url else None))

        def repin() -> None:
            if args.cpu_mode == "pinned":
                pinning.pin_self()
                pinning.pin_servers(servers)

        repin()
        specs, skipped = all_specs(env, only)
        notes += [s for s in skipped if not (s.startswith("PostgresSaver") and not want_pg)]
        from .machine import describe

        machine = describe(env.redis_url, env.mongo_url, env.postgres_url, env.redis_stack_url)
        machine["load average at start (1/5/15 min)"] = load_start
        machine.update(pinning.describe(args.cpu_mode, servers))
        machine["Python gc thresholds (benchmark process)"] = (
            f"{gc.get_threshold()}" + (" (--gc-threshold)" if args.gc_threshold is not None
                                       else " (Python's default)"))
        rec = Recorder(repin)
        spt = workloads.steps_per_turn()
        log(f"savers: {[s.name for s in specs]}; {spt} checkpoints per agent turn; "
            f"params {params}")
        sync_specs = [s for s in specs if s.name != "redis_stack"]
        durable = [s for s in specs if s.is_durable_saver and s.only is None]

        if todo & {"W1", "W1L", "W3"} and not args.quick:  # quick claims no timing
            for s in specs:
                log(f"warming up {s.name}")
                try:
                    agent_loop.warm_up(s)
                except Exception as exc:  # the workloads record the error
                    log(f"warm-up of {s.name} failed: {type(exc).__name__}: {exc}")
        if "W1" in todo:
            rec.run("W1 sync", sync_specs, params.reps, lambda s: agent_loop.w1_sync(s, params))
            rec.run("W1 async", specs, params.reps, lambda s: agent_loop.w1_async(s, params))
            rec.run("W1 async dsync", specs, params.reps,
                    lambda s: agent_loop.w1_async(s, params, "sync"))
        if "W1L" in todo:
            n = params.w1_long_turns
            rec.run(f"W1 sync@{n}", sync_specs, params.reps,
                    lambda s: agent_loop.w1_sync(s, params, n))
            rec.run(f"W1 async@{n}", specs, params.reps,
                    lambda s: agent_loop.w1_async(s, params, None, n))
            rec.run(f"W1 async dsync@{n}", specs, params.reps,
                    lambda s: agent_loop.w1_async(s, params, "sync", n))
        if "W2" in todo:
            rec.run("W2", sync_specs, params.reps, lambda s: workloads.w2(s, params))
        if "W3" in todo:
            rec.run("W3", specs, params.reps, lambda s: agent_loop.w3(s, params))
            if not args.no_sweep:
                _w3_sweep(rec, specs, params)
        if "W4" in todo:
            _w4(rec, [s for s in sync_specs if s.only is None], durable, params, env)
        if "W6" in todo:
            rec.run("W6", sync_specs, 1, lambda s: workloads.w6(s, params))
        if "W7" in todo:
            from . import conversation

            rec.run("W7", sync_specs, 1, lambda s: conversation.w7(s, params.w7_turns))
        if "DOCS" in todo:
            from .mongo_docs import docs, mongo_writers

            pool = specs if args.quick and not args.docs_savers else all_specs(env, None)[0]
            if args.docs_savers:
                want = {n.strip() for n in args.docs_savers.split(",") if n.strip()}
                pool = [s for s in pool if s.name in want]
            rec.run("DOCS", mongo_writers(pool), params.reps, lambda s: docs(s, params))
        checks: dict[str, str] = {}
        if "W3" in todo and any(s.name == "durable" for s in specs):
            import asyncio

            from .savers import from_urls_concurrency_check

            checks["from_urls_concurrency"] = asyncio.run(
                from_urls_concurrency_check(env, params.w3_threads))
            log(f"from_urls with {params.w3_threads} concurrent threads: "
                f"{checks['from_urls_concurrency']}")
        rt: dict[str, Any] = {}
        if "RT" in todo:
            from . import roundtrips

            log("counting round trips")
            try:
                rt = roundtrips.measure(env.redis_url, env.mongo_url, params.rt_turns, spt)
            except Exception as exc:
                traceback.print_exc(file=sys.stderr)
                rt = {"error": f"{type(exc).__name__}: {exc}"}
        profiles: dict[str, Any] = {}
        if not args.no_profile and any(s.name == "durable" for s in specs):
            from .profiling import profile

            repin()
            spy_cpu = pinning.SERVER_CPU if args.cpu_mode == "pinned" else None
            for which, sizes in (("w1", [params.profile_turns]),
                                 ("w3", [params.w3_threads, 2 * params.w3_turns]),
                                 ("w3conv", [params.w3_threads, params.w3_turns])):
                log(f"profiling DurableSaver {which} with py-spy")
                profiles[which] = profile(which, env.redis_url, env.mongo_url, sizes, args.out,
                                          spy_cpu=spy_cpu)
        if "W5" in todo:
            wb = [s for s in durable if s.name == "durable"]
            rec.run("W5", wb, 1, lambda s: workloads.w5(s, params, env.redis_url, env.mongo_url))
        if args.cpu_mode == "pinned":  # the servers still run: read back once more
            machine["affinity read back at the end"] = "; ".join(
                f"{k}: {v}" for k, v in pinning.read_back(servers).items())

    from .report import write_report

    machine["load average at end (1/5/15 min)"] = _loadavg()
    total = time.perf_counter() - started
    path = write_report(args.out, params=params, quick=args.quick, records=rec.records,
                        durations=rec.durations, machine=machine, notes=notes, rt=rt,
                        profiles=profiles, specs=specs, spt=spt, total_s=total,
                        checks=checks, w3_threads=params.w3_threads,
                        cpu_mode=args.cpu_mode)
    with open(os.path.join(args.out, "results.json"), "w") as fh:
        json.dump({"params": dataclasses.asdict(params), "quick": args.quick,
                   "cpu_mode": args.cpu_mode,
                   "machine": machine, "notes": notes, "records": rec.records, "rt": rt,
                   "profiles": profiles, "durations": rec.durations, "total_s": total,
                   "checks": checks},
                  fh, indent=1, default=str)
    if not args.quick and args.docs_img:
        _copy_to_docs(args.out, args.docs_img)
    log(f"done in {total:.0f} s: {path}")
    return 0


def _loadavg() -> str:
    return " / ".join(f"{x:.2f}" for x in os.getloadavg())


DOCS_PLOTS = ("w3_sweep.png",)
"""Plots a full run copies into ``--docs-img`` (the docs link them)."""


def _copy_to_docs(out: str, docs_img: str) -> None:
    import shutil

    os.makedirs(docs_img, exist_ok=True)
    for name in DOCS_PLOTS:
        src = os.path.join(out, name)
        if os.path.exists(src):
            shutil.copyfile(src, os.path.join(docs_img, name))
            log(f"copied {name} to {docs_img}")


def _w3_sweep(rec: Recorder, specs: list[SaverSpec], params: workloads.Params) -> None:
    """W3 at every thread count of ``params.w3_sweep`` (workload ``W3@<threads>``; the
    ``w3_threads`` point is W3 itself) for LangGraph alone, InMemorySaver, DurableSaver
    (write-behind) and the fastest durable peer of W3."""
    from .report_speed import fastest_peer

    peer = fastest_peer(rec.records, [s.name for s in specs if s.durable_peer])
    chosen = [s for s in specs if s.name in ("reference", "inmemory", "durable", peer)]
    log(f"W3 sweep {params.w3_sweep} threads: {[s.name for s in chosen]}")
    def at(n: int) -> Callable[[SaverSpec], dict[str, Any]]:
        return lambda s: agent_loop.w3(s, params, n)

    for n in params.w3_sweep:
        if n != params.w3_threads:
            rec.run(f"W3@{n}", chosen, params.reps, at(n))


def _w4(rec: Recorder, specs: list[SaverSpec], durable: list[SaverSpec], params: workloads.Params,
        env: Env) -> None:
    """Build one long thread per saver, then measure hot reads (all savers, interleaved),
    then cold reads (DurableSaver with the thread's Redis keys removed after a flush)."""
    began = time.perf_counter()
    with contextlib.ExitStack() as stack:
        threads: dict[str, workloads.ResumeThread] = {}
        for spec in specs:
            try:
                h = stack.enter_context(spec.open_sync())
                threads[spec.name] = workloads.w4_build(h, params)
                log(f"W4 built {params.w4_checkpoints} checkpoints with {spec.name} in "
                    f"{threads[spec.name].build_s:.1f} s")
            except Exception as exc:
                traceback.print_exc(file=sys.stderr)
                rec.add("W4 hot", spec, 0, {"error": f"{type(exc).__name__}: {exc}"})
        live = [s for s in specs if s.name in threads]
        for rep in range(params.reps):
            for spec in workloads.rotate(live, rep):
                try:
                    m = workloads.w4_measure(threads[spec.name], params, "hot")
                    m["build_s"] = threads[spec.name].build_s
                except Exception as exc:
                    traceback.print_exc(file=sys.stderr)
                    m = {"error": f"{type(exc).__name__}: {exc}"}
                rec.add("W4 hot", spec, rep, m)
        cold = [s for s in durable if s.name in threads]
        for spec in cold:
            rt = threads[spec.name]
            spec.drain(rt.handle)
            workloads.empty_redis_of(rt.handle, env.redis_url, rt.cfg["configurable"]["thread_id"])
        for rep in range(params.reps):
            for spec in workloads.rotate(cold, rep):
                try:
                    m = workloads.w4_measure(threads[spec.name], params, "durable")
                except Exception as exc:
                    traceback.print_exc(file=sys.stderr)
                    m = {"error": f"{type(exc).__name__}: {exc}"}
                rec.add("W4 cold", spec, rep, m)
        log(f"W4 measured in {time.perf_counter() - began:.1f} s")
    rec.durations["W4"] = time.perf_counter() - began


if __name__ == "__main__":
    sys.exit(main())
