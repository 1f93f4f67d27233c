"""Markdown report and PNG plots (matplotlib, Agg) from the harness' records."""

from __future__ import annotations

import math
import os
import statistics
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import asdict
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from . import report_lean, report_speed, report_w7  # noqa: E402
from .cpu import GC_KEY  # noqa: E402

# (workload, metric, label, unit, higher_is_better)
METRICS = [
    ("W1 sync", "step_ms", "W1 agent loop, sync: wall time per super-step", "ms", False),
    ("W1 async", "step_ms", "W1 agent loop, async: wall time per super-step", "ms", False),
    ("W1 async dsync", "step_ms",
     'W1 agent loop, async, durability="sync": wall time per super-step', "ms", False),
    ("W2", "step_ms", "W2 wide state: time per super-step", "ms", False),
    ("W2", "bytes_per_step", "W2 wide state: bytes stored per super-step", "B", False),
    ("W3", "cps", "W3 concurrency: checkpoints per second", "cp/s", True),
    ("W3", "cp_ms", "W3 concurrency: wall time per checkpoint", "ms", False),
    ("W3", "p50_ms", "W3 concurrency: p50 super-step latency", "ms", False),
    ("W3", "p99_ms", "W3 concurrency: p99 super-step latency", "ms", False),
    ("W4 hot", "resume_ms", "W4 resume: latest of 1,000 checkpoints (hot)", "ms", False),
    ("W4 hot", "history_ms", "W4 get_state_history, 100 checkpoints (hot)", "ms", False),
    ("W4 cold", "resume_ms", "W4 resume: latest, cold (Redis emptied, MongoDB only)", "ms", False),
    ("W4 cold", "history_ms", "W4 get_state_history, 100 checkpoints (cold)", "ms", False),
]

SHORT = {"reference": "LangGraph alone", "inmemory": "InMemory", "durable": "Durable (wb)",
         "durable_strict": "Durable (strict)",
         "durable_worker": "Durable (wb, worker proc)",
         "postgres": "Postgres", "mongodb": "MongoDB", "sqlite": "SQLite",
         "redis_stack": "AsyncRedis"}


def _values(records: list[dict[str, Any]], workload: str, metric: str
            ) -> dict[str, list[float]]:
    out: dict[str, list[float]] = defaultdict(list)
    for r in records:
        if r["workload"] == workload and isinstance(r.get(metric), (int, float)):
            v = float(r[metric])
            if not math.isnan(v):
                out[r["saver"]].append(v)
    return out


def _errors(records: list[dict[str, Any]], workload: str) -> dict[str, str]:
    return {r["saver"]: r["error"] for r in records if r["workload"] == workload and "error" in r}


def _fmt(v: float | None, unit: str = "") -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "–"
    if unit == "B":
        return _bytes(v)
    if abs(v) >= 100:
        s = f"{v:,.0f}"
    elif abs(v) >= 10:
        s = f"{v:.1f}"
    else:
        s = f"{v:.2f}"
    return f"{s} {unit}".strip()


def _bytes(v: float) -> str:
    for unit, k in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if abs(v) >= k:
            return f"{v / k:.2f} {unit}"
    return f"{v:.0f} B"


def _ratio(a: float | None, b: float | None) -> str:
    if a is None or b is None or b == 0 or math.isnan(a) or math.isnan(b):
        return "–"
    return f"{a / b:.2f}×"


def med(vals: Sequence[float]) -> float | None:
    return statistics.median(vals) if vals else None


def _order(specs: list[Any]) -> list[str]:
    return [s.name for s in specs]


# ---------------------------------------------------------------- targets


def targets(records: list[dict[str, Any]], rt: dict[str, Any], peers: list[str]
            ) -> list[tuple[str, str, str, str]]:
    """(target, measured, ratio/detail, met|missed|n/a)."""
    out = []

    def mv(w: str, m: str, s: str) -> float | None:
        return med(_values(records, w, m).get(s, []))

    def verdict(ok: bool | None) -> str:
        return "n/a" if ok is None else ("**met**" if ok else "**missed**")

    out.extend(report_w7.targets(records))
    out.extend(report_speed.targets(records, peers, SHORT))
    hot = rt.get("hot_get")
    if isinstance(hot, dict):
        out.append(("W4: hot resume = 1 Redis round trip",
                    f"{hot['redis']} Redis, {hot['mongo']} MongoDB", "get_tuple (sync)",
                    verdict(hot["redis"] == 1 and hot["mongo"] == 0)))
    else:
        out.append(("W4: hot resume = 1 Redis round trip", "not measured", "–", "n/a"))
    for key, api in (("cold_get", "sync"), ("async.cold_get", "async")):
        cold = rt.get(key)
        if isinstance(cold, dict):
            out.append((f"W4: cold resume ≤ 2 MongoDB round trips ({api})",
                        f"{cold['mongo']} MongoDB commands in {cold['mongo_rounds']} sequential "
                        f"rounds (+{cold['redis']} Redis)",
                        ", ".join(cold["mongo_cmds"]), verdict(cold["mongo_rounds"] <= 2)))
    lag = mv("W5", "lag_p99_s", "durable")
    probe = mv("W5", "probe_p99_s", "durable")
    rate = mv("W5", "cps", "durable")
    out.append(("W5: p99 lag put → MongoDB ≤ 0.5 s (paced load)",
                f"p99 {_fmt(lag, 's')} (probe p99 {_fmt(probe, 's')}) at {_fmt(rate, 'cp/s')}",
                "every checkpoint, creation → bulk write acknowledged",
                verdict(None if lag is None else lag <= 0.5)))
    cpb = mv("W5", "cp_per_bulk_mean", "durable")
    out.append(("W5: ≥ 10 checkpoints per bulk write under load (paced)",
                f"{_fmt(cpb)} checkpoints per bulk write (mean)",
                "MongoDB insert and update commands",
                verdict(None if cpb is None else cpb >= 10)))
    d = mv("W6", "bytes@" + _w6_last(records), "durable")
    mg = mv("W6", "bytes@" + _w6_last(records), "mongodb")
    out.append((f"W6: after {_w6_last(records)} turns DurableSaver ≤ 1/10 of MongoDBSaver bytes",
                f"{_fmt(d, 'B')} vs {_fmt(mg, 'B')}", _ratio(d, mg),
                verdict(None if d is None or mg is None else d / mg <= 0.1)))
    return out


def _w6_last(records: list[dict[str, Any]]) -> str:
    turns = [int(k.split("@")[1]) for r in records if r["workload"] == "W6"
             for k in r if k.startswith("bytes@")]
    return str(max(turns)) if turns else "200"


# ---------------------------------------------------------------- plots


def _bar(ax: Any, names: list[str], vals: dict[str, list[float]], title: str, unit: str) -> None:
    xs = [n for n in names if vals.get(n)]
    if not xs:
        ax.set_visible(False)
        return
    m = [statistics.median(vals[n]) for n in xs]
    lo = [mm - min(vals[n]) for mm, n in zip(m, xs)]
    hi = [max(vals[n]) - mm for mm, n in zip(m, xs)]
    colors = ["#d62728" if n.startswith("durable") else "#7f7f7f" if n == "inmemory"
              else "#1f77b4" for n in xs]
    ax.bar(range(len(xs)), m, yerr=[lo, hi], color=colors, capsize=3)
    ax.set_xticks(range(len(xs)))
    ax.set_xticklabels([SHORT.get(n, n) for n in xs], rotation=30, ha="right", fontsize=8)
    ax.set_title(title, fontsize=9)
    ax.set_ylabel(unit, fontsize=8)
    ax.tick_params(axis="y", labelsize=8)


def plots(out: str, records: list[dict[str, Any]], names: list[str]) -> list[str]:
    files = []
    panels = [("W1 sync", "step_ms", "W1 sync: ms per super-step", "ms", False),
              ("W1 async", "step_ms", "W1 async: ms per super-step", "ms", False),
              ("W1 async dsync", "step_ms", 'W1 async, durability="sync": ms per super-step',
               "ms", False),
              ("W3", "cps", "W3: checkpoints / s (higher is better)", "cp/s", False),
              ("W3", "p99_ms", "W3: p99 super-step latency (log)", "ms", True),
              ("W4 hot", "resume_ms", "W4: resume latest of 1,000, hot (log)", "ms", True)]
    fig, axes = plt.subplots(2, 3, figsize=(13, 7.5))
    for ax, (w, m, title, unit, log) in zip(axes.flat, panels):
        _bar(ax, names, _values(records, w, m), title, unit)
        if log and ax.get_visible():
            ax.set_yscale("log")
    fig.suptitle("Medians with min–max over repetitions (red: DurableSaver, grey: InMemorySaver)",
                 fontsize=10)
    fig.tight_layout()
    files.append(_save(fig, out, "summary.png"))

    fig = report_speed.plot(records, names, SHORT)
    if fig is not None:
        files.append(_save(fig, out, "w3_sweep.png"))

    w5 = [r for r in records if r["workload"] == "W5" and r.get("outbox_series")]
    if w5:
        fig, ax = plt.subplots(figsize=(8, 3.5))
        for r in w5:
            xs, ys = zip(*r["outbox_series"])
            ax.plot(xs, ys, lw=1.2, label="XLEN")
            for name, ph in sorted(r.get("phases", {}).items(), key=lambda x: x[1]["start_s"]):
                ax.axvspan(ph["start_s"], ph["start_s"] + ph["load_s"], alpha=0.12,
                           color="tab:blue" if name == "paced" else "tab:red",
                           label=f"{name} load")
        ax.set_title("W5: outbox length (XLEN) under sustained load", fontsize=9)
        ax.set_xlabel("s since load start")
        ax.set_ylabel("entries waiting")
        ax.legend(fontsize=8)
        fig.tight_layout()
        files.append(_save(fig, out, "w5_outbox.png"))

    w6 = {r["saver"]: r for r in records if r["workload"] == "W6" and "error" not in r}
    if w6:
        keys = sorted({k for r in w6.values() for k in r if k.startswith("bytes@")},
                      key=lambda k: int(k.split("@")[1]))
        fig, ax = plt.subplots(figsize=(9, 4))
        xs = [n for n in names if n in w6]
        width = 0.8 / max(1, len(keys))
        for i, k in enumerate(keys):
            ax.bar([j + i * width for j in range(len(xs))],
                   [w6[n].get(k, 0) / 1e6 for n in xs], width, label=f"after {k[6:]} turns")
        ax.set_xticks([j + width * (len(keys) - 1) / 2 for j in range(len(xs))])
        ax.set_xticklabels([SHORT.get(n, n) for n in xs], rotation=20, ha="right", fontsize=8)
        ax.set_ylabel("MB stored (durable store)")
        ax.set_title("W6: bytes stored per saver after the agent loop", fontsize=9)
        ax.legend(fontsize=8)
        fig.tight_layout()
        files.append(_save(fig, out, "w6_storage.png"))
    fig = report_w7.plot(records, names, SHORT)
    if fig is not None:
        files.append(_save(fig, out, "w7_storage.png"))
    return files


def _save(fig: Any, out: str, name: str) -> str:
    path = os.path.join(out, name)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return name


# ---------------------------------------------------------------- markdown


def write_report(out: str, *, params: Any, quick: bool, records: list[dict[str, Any]],
                 durations: dict[str, float], machine: dict[str, Any], notes: list[str],
                 rt: dict[str, Any], profiles: dict[str, Any], specs: list[Any], spt: int,
                 total_s: float, checks: dict[str, str] | None = None,
                 w3_threads: int = 0, cpu_mode: str = "shared") -> str:
    names = _order(specs)
    metrics = METRICS + report_lean.metrics(records)
    peers = [s.name for s in specs if s.durable_peer]
    L: list[str] = []
    L.append("# langgraph-durable benchmarks" + (" (QUICK smoke run: no timing claims)"
                                                 if quick else ""))
    L.append("")
    L.append(f"Generated by `python -m benchmarks.run{' --quick' if quick else ''}` in "
             f"{total_s / 60:.1f} min. Every workload ran against every saver in the same run, "
             f"repetitions interleaved round robin (the order rotates each repetition); "
             f"{params.reps} repetitions unless a table says otherwise. Medians, with min–max.")
    L.append("")
    L.append("## Machine")
    L.append("")
    L.append("| | |")
    L.append("|---|---|")
    for k, v in machine.items():
        L.append(f"| {k} | {v} |")
    L.append("")
    if cpu_mode == "pinned":
        L.append("All servers run on this machine (loopback). **Pinned mode**: the benchmark "
                 "process (graph, saver, DurableSaver's flusher thread) on one CPU, every "
                 "server (Redis, SecantusDB, PostgreSQL) on the other, as if the servers ran "
                 "on other machines; the affinities above are read back from the kernel. "
                 "py-spy (profiles) runs on the servers' CPU.")
    else:
        L.append("All servers run on this machine (loopback), sharing its cores with the "
                 "benchmark process (shared mode).")
    L.append("")
    if notes:
        L.append("## Savers left out")
        L.append("")
        for n in notes:
            L.append(f"- {n}")
        L.append("")

    L.append("## Targets")
    L.append("")
    L.append("| target | measured | ratio / detail | verdict |")
    L.append("|---|---|---|---|")
    for t in targets(records, rt, peers):
        L.append("| " + " | ".join(t) + " |")
    L.append("")
    report_speed.section(L, records, names, SHORT)
    report_lean.section(L, records, names, peers, SHORT, cpu_mode)

    # overview: one row per workload metric, one column per saver
    L.append("## Overview (medians)")
    L.append("")
    L.append("| workload | " + " | ".join(SHORT.get(n, n) for n in names) + " |")
    L.append("|---" * (len(names) + 1) + "|")
    for w, m, label, unit, _hib in metrics:
        vals = _values(records, w, m)
        errs = _errors(records, w)
        if not vals and not errs:
            continue
        cells = []
        for n in names:
            cells.append(_fmt(med(vals[n]), unit) if vals.get(n)
                         else ("error" if n in errs else "–"))
        L.append(f"| {label} | " + " | ".join(cells) + " |")
    w5 = [r for r in records if r["workload"] == "W5" and "error" not in r]
    for r in w5:
        L.append("| W5 write-behind (paced): lag p50 / p99, checkpoints per bulk write | "
                 + " | ".join(
                     f"{_fmt(r['lag_p50_s'], 's')} / {_fmt(r['lag_p99_s'], 's')}, "
                     f"{r['cp_per_bulk_mean']:.1f} cp/bulk" if n == r["saver"] else "–"
                     for n in names) + " |")
    w6 = {r["saver"]: r for r in records if r["workload"] == "W6" and "error" not in r}
    if w6:
        last = _w6_last(records)
        L.append(f"| W6 storage: bytes in the durable store after {last} turns | "
                 + " | ".join(_fmt(w6[n].get(f"bytes@{last}"), "B") if n in w6 else "–"
                              for n in names) + " |")
    w7_row = report_w7.overview_row(records, names)
    if w7_row:
        L.append(w7_row)
    L.append("")

    L.append("## Details")
    L.append("")
    L.append("`× InMemory` is the saver's median over InMemorySaver's; `Durable (wb) vs it` is "
             "how many times better DurableSaver (write-behind) does than that saver (for "
             "times: its time / DurableSaver's; for throughput: DurableSaver's / its).")
    for w, m, label, unit, hib in metrics:
        vals = _values(records, w, m)
        errs = _errors(records, w)
        if not vals and not errs:
            continue
        L.append("")
        L.append(f"### {label}")
        L.append("")
        L.append("| saver | median | min–max | runs | × InMemory | Durable (wb) vs it |")
        L.append("|---|---|---|---|---|---|")
        mem = med(vals.get("inmemory", []))
        dur = med(vals.get("durable", []))
        for n in names:
            v = vals.get(n)
            if not v:
                if n in errs:
                    L.append(f"| {SHORT.get(n, n)} | error: {errs[n][:120]} | | | | |")
                continue
            mm = med(v)
            adv = (_ratio(mm, dur) if not hib else _ratio(dur, mm)) if n != "durable" else "1×"
            L.append(f"| {SHORT.get(n, n)} | {_fmt(mm, unit)} | {_fmt(min(v), unit)} – "
                     f"{_fmt(max(v), unit)} | {len(v)} | {_ratio(mm, mem)} | {adv} |")
    L.append("")
    _w1_notes(L, records, spt, params)
    _cpu_section(L, records, names)
    _checks_section(L, checks or {}, w3_threads)
    _w2_notes(L, records, names)
    _w4_notes(L, records, names)
    _w5_section(L, records)
    _w6_section(L, records, names)
    report_w7.section(L, records, names)
    _rt_section(L, rt)
    _profile_section(L, profiles, out)

    L.append("## Plots")
    L.append("")
    for f in plots(out, records, names):
        L.append(f"![{f}]({f})")
        L.append("")
    L.append("## Parameters and durations")
    L.append("")
    L.append("`" + ", ".join(f"{k}={v}" for k, v in asdict(params).items()) + "`")
    L.append("")
    L.append("| workload | wall time of the whole workload (all savers, all reps) |")
    L.append("|---|---|")
    for k, v in durations.items():
        L.append(f"| {k} | {v:.0f} s |")
    L.append("")
    _method(L, params, spt)
    path = os.path.join(out, "report.md")
    with open(path, "w") as fh:
        fh.write("\n".join(L) + "\n")
    return path


def _w1_notes(L: list[str], records: list[dict[str, Any]], spt: int, params: Any) -> None:
    rows = [r for r in records if r["workload"].startswith("W1") and "settle_s" in r
            and r["saver"] == "durable"]
    if rows:
        st = med([r["settle_s"] for r in rows])
        L.append(f"W1: one `invoke` of {params.w1_turns} turns, {2 * params.w1_turns + 2} "
                 f"checkpoints. DurableSaver's outbox drain after it (not in the wall time, "
                 f"since write-behind returns before MongoDB has the data): median "
                 f"{_fmt(st, 's')}.")
        L.append("")


def _cpu_section(L: list[str], records: list[dict[str, Any]], names: list[str]) -> None:
    """CPU seconds per run (median), client process and each server."""
    keys = sorted({k for r in records for k in r if k.startswith("cpu_") and k.endswith("_s")
                   and k != "cpu_machine_s"},
                  key=lambda k: (k != "cpu_client_s", k != f"cpu_{GC_KEY}_s", k))
    if not keys:
        return
    for r in records:
        if "cpu_machine_s" in r:
            ours = sum(v for k, v in r.items() if k.startswith("cpu_") and k.endswith("_s")
                       and k not in ("cpu_machine_s", "cpu_other processes_s",
                                     f"cpu_{GC_KEY}_s"))
            r["cpu_other processes_s"] = max(0.0, r["cpu_machine_s"] - ours)
    keys.append("cpu_other processes_s")
    L.append("### CPU seconds per run (median; the timed part plus the drain to the durable "
             "store)")
    L.append("")
    L.append("| workload | saver | wall | " + " | ".join(k[4:-2] for k in keys) + " |")
    L.append("|---|---|---|" + "---|" * len(keys))
    long_w = sorted({r["workload"] for r in records if r["workload"].startswith("W1 ")
                     and "@" in r["workload"]})
    for w in ("W1 sync", "W1 async", "W1 async dsync", *long_w, "W3", "DOCS"):
        for n in names:
            rows = [r for r in records if r["workload"] == w and r["saver"] == n
                    and "cpu_client_s" in r]
            if not rows:
                continue
            wall = med([r["wall_s"] for r in rows])
            cells = [_fmt(med([r.get(k, float("nan")) for r in rows]), "s") for k in keys]
            L.append(f"| {w} | {SHORT.get(n, n)} | {_fmt(wall, 's')} | " + " | ".join(cells)
                     + " |")
    L.append("")
    L.append("The machine has 2 cores: the benchmark process (graph, saver, DurableSaver's "
             "flusher thread) and the servers share them. `other processes` = CPU the machine "
             "spent outside the benchmark and its servers during the run (other jobs on the "
             "machine, kernel; from /proc/stat): large values mean the run was disturbed. "
             f"`{GC_KEY}` = the part of `client` spent in Python's cyclic garbage collector "
             "(every thread; `gc.callbacks`): it grows with the objects a saver allocates "
             "that outlive a few hundred allocations (docs/speed.md, \"The garbage "
             "collector\").")
    L.append("")


def _checks_section(L: list[str], checks: dict[str, str], w3_threads: int) -> None:
    got = checks.get("from_urls_concurrency")
    if got is None:
        return
    L.append(f"### `DurableSaver.from_urls` under {w3_threads} concurrent async threads: "
             f"{'ok' if got == 'ok' else 'FAILS'}")
    L.append("")
    if got != "ok":
        L.append(f"`{got[:300]}`. The async DurableSaver runs in W1–W5 therefore pass their own "
                 "asyncio Redis client with a `BlockingConnectionPool` (64 connections), "
                 "otherwise built like `from_urls` (`benchmarks/savers.py: durable_async`).")
    else:
        L.append("The async DurableSaver runs still use a blocking pool of 64 connections "
                 "(`benchmarks/savers.py: durable_async`).")
    L.append("")


def _w2_notes(L: list[str], records: list[dict[str, Any]], names: list[str]) -> None:
    rows = [r for r in records if r["workload"] == "W2" and "bytes" in r]
    if not rows:
        return
    by = {r["saver"]: r for r in rows}
    L.append("W2 bytes: total stored after 200 steps (including the initial 10 × 10 KB state) "
             "divided by the steps; measured as: " + "; ".join(
                 f"{SHORT.get(n, n)}: {by[n]['method']}" for n in names if n in by) + ".")
    if "durable" in by and "redis_bytes_per_step" in by["durable"]:
        L.append(f"DurableSaver's Redis (hot tier) also holds "
                 f"{_bytes(by['durable']['redis_bytes_per_step'])} per step until its keys "
                 f"expire (`hot_ttl_s`).")
    L.append("")


def _w4_notes(L: list[str], records: list[dict[str, Any]], names: list[str]) -> None:
    rows = {r["saver"]: r for r in records if r["workload"] == "W4 hot" and "build_s" in r}
    if rows:
        L.append("W4: time to write the 1,000-checkpoint thread (one `invoke` of a loop graph): "
                 + ", ".join(f"{SHORT.get(n, n)} {_fmt(rows[n]['build_s'], 's')}"
                             for n in names if n in rows)
                 + ". Resume = `saver.get_tuple` of the thread's latest checkpoint; history = "
                 "`graph.get_state_history(limit=100)`. Cold = after `flush()`, the thread's "
                 "Redis keys deleted (reads then come from MongoDB; checked with "
                 "`last_read_tier`).")
        L.append("")


def _w5_section(L: list[str], records: list[dict[str, Any]]) -> None:
    rows = [r for r in records if r["workload"] == "W5"]
    if not rows:
        return
    L.append("## W5 write-behind under sustained load")
    L.append("")
    for r in rows:
        if "error" in r:
            L.append(f"- {SHORT.get(r['saver'], r['saver'])}: error {r['error']}")
            continue
        L.append("| phase | load | checkpoints/s | lag p50 | lag p99 | lag max | probe p50 / p99 "
                 "| checkpoints per bulk write (mean / median) | flusher entries/s | max XLEN "
                 "| drain after load |")
        L.append("|---|---|---|---|---|---|---|---|---|---|---|")
        for name, ph in sorted(r.get("phases", {}).items(), key=lambda x: x[1]["start_s"]):
            rate = ph.get("steps_per_s_offered")
            if rate:
                load = (f"{ph['threads']} threads paced to {rate:.0f} steps/s "
                        f"({_fmt(ph.get('offered_fraction'))} of capacity)")
            elif ph.get("think_s"):  # results of runs before the pacer
                load = f"{ph['threads']} threads, {ph['think_s'] * 1e3:.0f} ms think time"
            else:
                load = f"{ph['threads']} threads, no think time"
            load += f", {ph['load_s']:.0f} s"
            L.append(f"| {name} | {load} | {ph['cps']:.0f} | {_fmt(ph['lag_p50_s'], 's')} | "
                     f"{_fmt(ph['lag_p99_s'], 's')} | {_fmt(ph['lag_max_s'], 's')} | "
                     f"{_fmt(ph['probe_p50_s'], 's')} / {_fmt(ph['probe_p99_s'], 's')} | "
                     f"{_fmt(ph['cp_per_bulk_mean'])} / {_fmt(ph['cp_per_bulk_p50'])} "
                     f"({ph['bulk_writes']} bulk writes) | {ph['entries_per_s']:.0f} | "
                     f"{ph['outbox_max']} | {ph['drain_s']:.2f} s |")
        L.append("")
        L.append("Lag = from the checkpoint's creation (the time in its UUIDv6 id, set by "
                 "LangGraph just before `put`) to MongoDB's acknowledgement of the bulk write "
                 "that holds it, for every checkpoint (PyMongo command monitoring on the "
                 "flusher's client). Probe = a `put` every 0.2 s from another thread, then "
                 "MongoDB polled every 5 ms for it by `_id`. Flusher entries = outbox "
                 "entries (puts and "
                 "put_writes) moved per second of load + drain. The saturated phase measures "
                 "the flusher's capacity on this machine "
                 f"({_fmt(r.get('phases', {}).get('saturated', {}).get('capacity_entries_per_s'))}"
                 " entries/s); the paced phase offers a fixed fraction of it, and the targets "
                 "use the paced phase. "
                 "`stats()['flusher']` at the end (both phases): lag p50 "
                 f"{_fmt(r.get('stats_lag_p50_s'), 's')}, "
                 f"max {_fmt(r.get('stats_lag_max_s'), 's')}.")
    L.append("")


def _w6_section(L: list[str], records: list[dict[str, Any]], names: list[str]) -> None:
    rows = {r["saver"]: r for r in records if r["workload"] == "W6"}
    if not rows:
        return
    keys = sorted({k for r in rows.values() for k in r if k.startswith("bytes@")},
                  key=lambda k: int(k.split("@")[1]))
    L.append("## W6 storage after the agent loop (one thread)")
    L.append("")
    L.append("| saver | " + " | ".join(f"after {k[6:]} turns" for k in keys)
             + " | × MongoDBSaver (last) | measured as |")
    L.append("|---|" + "---|" * (len(keys) + 2))
    mg = rows.get("mongodb", {}).get(keys[-1]) if keys else None
    for n in names:
        r = rows.get(n)
        if r is None:
            continue
        if "error" in r:
            L.append(f"| {SHORT.get(n, n)} | error: {r['error'][:100]} |")
            continue
        cells = []
        for k in keys:
            c = _bytes(r[k])
            t = k.split("@")[1]
            if f"redis_bytes@{t}" in r:
                c += f" (+ Redis {_bytes(r[f'redis_bytes@{t}'])})"
            cells.append(c)
        method = r.get(f"method@{keys[-1].split('@')[1]}", "")
        L.append(f"| {SHORT.get(n, n)} | " + " | ".join(cells)
                 + f" | {_ratio(r[keys[-1]], mg)} | {method} |")
    L.append("")
    L.append("MongoDB dataSize comes from SecantusDB's `dbStats` (BSON size of the documents, "
             "indexes not included); Redis from `MEMORY USAGE key SAMPLES 0` over the saver's "
             "keys after the outbox drained (kept until `hot_ttl_s`).")
    L.append("")


def _rt_section(L: list[str], rt: dict[str, Any]) -> None:
    if not rt:
        return
    L.append("## Round trips (DurableSaver, counted on the wire)")
    L.append("")
    if "error" in rt:
        L.append(f"error: {rt['error']}")
        L.append("")
        return
    L.append("Redis: packets sent by redis-py (one per command or pipeline); MongoDB: commands "
             "sent by PyMongo (command monitoring), rounds = sequential waits.")
    L.append("")
    L.append("| operation | Redis | MongoDB | MongoDB rounds | MongoDB commands |")
    L.append("|---|---|---|---|---|")
    rows = [("put (write-behind)", "w.put"), ("put_writes (write-behind)", "w.put_writes"),
            ("put (strict)", "s.put"), ("put_writes (strict)", "s.put_writes"),
            ("latest get_tuple, hot (sync)", "hot_get"),
            ("latest get_tuple, hot (async)", "async.hot_get"),
            ("latest get_tuple, cold (sync)", "cold_get"),
            ("latest get_tuple, cold (async)", "async.cold_get"),
            ("get_state_history(limit=100), hot", "history100_hot"),
            ("get_state_history(limit=100), cold", "history100_cold")]
    for label, k in rows:
        d = rt.get(k)
        if isinstance(d, dict):
            cmds = defaultdict(int)
            for c in d["mongo_cmds"]:
                cmds[c] += 1
            L.append(f"| {label} | {d['redis']} | {d['mongo']} | {d['mongo_rounds']} | "
                     + (", ".join(f"{c}×{n}" for c, n in cmds.items()) or "–") + " |")
    L.append("")
    for tag, name in (("w", "write-behind"), ("s", "strict")):
        if f"{tag}.w1_step_redis" in rt:
            L.append(f"- W1 agent loop, {name}: {rt[f'{tag}.w1_step_redis']:.2f} Redis round "
                     f"trips and {rt[f'{tag}.w1_step_mongo']:.2f} MongoDB commands per super-step "
                     f"on the call path ({rt[f'{tag}.w1_calls']})")
    if isinstance(rt.get("flusher_20_threads"), dict):
        d = rt["flusher_20_threads"]
        L.append(f"- flusher, one batch of 20 puts on 20 different threads: {d['redis']} Redis "
                 f"round trips and {d['mongo']} MongoDB commands")
    if "flusher_per_step_redis" in rt:
        L.append(f"- flusher, amortised: {rt['flusher_per_step_redis']:.2f} Redis round trips "
                 f"and {rt['flusher_per_step_mongo']:.2f} MongoDB commands per super-step "
                 f"({rt['flusher_rounds_note']})")
    L.append("")


PROFILE_TITLES = {"w1": "W1 agent loop (sync)",
                  "w3": "W3 concurrency (asyncio, the small loop graph)",
                  "w3conv": "W3 (asyncio, the agent loop: the benchmark's W3)"}


def _profile_md(out: str, which: str, title: str, p: dict[str, Any]) -> str:
    """Write ``profile_<which>.md`` (top 15 by self time, layers, entry points) beside the
    report; returns its name."""
    name = f"profile_{which}.md"
    L = [f"# py-spy profile: DurableSaver, {title}", "",
         f"{p['samples']} samples at 100 Hz (GIL holders, every thread), workload wall "
         f"{_fmt(p.get('wall_s'), 's')}; raw stacks: `{p['raw']}`.", "",
         "| top 15 by self time | % |", "|---|---|"]
    L += [f"| `{k}` | {v:.1f} |" for k, v in p["self"][:15]]
    L += ["", "| by layer (innermost frame) | % |", "|---|---|"]
    L += [f"| {k} | {v:.1f} |" for k, v in p["layers"]]
    L += ["", "| DurableSaver entry points (inclusive) | % |", "|---|---|"]
    L += [f"| `{k}` | {v:.1f} |" for k, v in p["entry"][:12]]
    with open(os.path.join(out, name), "w") as fh:
        fh.write("\n".join(L) + "\n")
    return name


def _profile_section(L: list[str], profiles: dict[str, Any], out: str = "") -> None:
    if not profiles:
        return
    L.append("## Profiles (py-spy at 100 Hz, DurableSaver, all threads, samples of the "
             "thread holding the GIL)")
    L.append("")
    for which, p in profiles.items():
        title = PROFILE_TITLES.get(which, which)
        if "error" in p:
            L.append(f"### {title}: not profiled ({p['error']})")
            L.append("")
            continue
        extra = {"w1": " per agent thread, 3 threads in a row",
                 "w3conv": " per round (median), 5 rounds in a row"}.get(which, "")
        md = f"; top 15: `{_profile_md(out, which, title, p)}`" if out else ""
        L.append(f"### {title}: {p['samples']} samples, workload wall {_fmt(p['wall_s'], 's')}"
                 f"{extra} (raw stacks: {p['raw']}{md})")
        L.append("")
        L.append("| by layer (innermost frame) | % | | by thread | % |")
        L.append("|---|---|---|---|---|")
        layers, threads = p["layers"], p["threads"]
        for i in range(max(len(layers), len(threads))):
            a = layers[i] if i < len(layers) else ("", None)
            b = threads[i] if i < len(threads) else ("", None)
            L.append(f"| {a[0]} | {'' if a[1] is None else f'{a[1]:.1f}'} | | {b[0]} | "
                     f"{'' if b[1] is None else f'{b[1]:.1f}'} |")
        L.append("")
        L.append("| top self time | % |")
        L.append("|---|---|")
        for k, v in p["self"][:15]:
            L.append(f"| `{k}` | {v:.1f} |")
        L.append("")
        L.append("| DurableSaver entry points (inclusive) | % |")
        L.append("|---|---|")
        for k, v in p["entry"][:10]:
            L.append(f"| `{k}` | {v:.1f} |")
        L.append("")


def _method(L: list[str], params: Any, spt: int) -> None:
    L.append("## Method")
    L.append("")
    L.append(f"""- "LangGraph alone" (W1, W3): `benchmarks/floor.py`'s ReferenceSaver keeps each
  thread's latest checkpoint by reference and serializes nothing: what LangGraph itself
  costs, the floor no checkpointer can beat (not a saver, not a peer in the targets).
- Savers: InMemorySaver; DurableSaver write-behind (default options) and
  `durability="strict"` (`from_urls`, flusher thread in the process), and write-behind
  with `flusher="off"` plus one `python -m langgraph_durable.outbox.worker` process
  (W1 and W3 only; "worker proc"); PostgresSaver /
  AsyncPostgresSaver (one connection for sync, an `AsyncConnectionPool` of up to 20 for
  async); MongoDBSaver on the same SecantusDB (its async methods run the sync ones in the
  default executor); SqliteSaver / AsyncSqliteSaver on a file (WAL). Each run opens a
  fresh namespace (Redis key prefix + MongoDB database, PostgreSQL database, SQLite file)
  and removes it afterwards; setup is outside the timings.
- LangGraph runs with its default `durability="async"` (a step's checkpoint is written
  while the next step runs; `invoke` returns after every write finished), except in
  `W1 async dsync` (`durability="sync"`: each checkpoint written before the next step).
- W1: the agent loop (`graphs.build_conversation`): one `invoke` from one HumanMessage
  runs {params.w1_turns} turns on one thread; per turn the agent adds one AIMessage
  (560–640 chars, one tool call) and the tools node one ToolMessage (1,400–1,600 chars);
  {2 * params.w1_turns + 2} checkpoints; ms per super-step = wall time / checkpoints.
  Sync API (`invoke`), async API (`ainvoke`, the agent node a coroutine), and async with
  `durability="sync"`.
- W2: 10 channels of 10 KB; each super-step rewrites one (round robin) and a small counter;
  {params.w2_steps} steps in one `invoke`.
- W3: {params.w3_threads} threads, each one run of the agent loop of {params.w3_turns}
  turns ({2 * params.w3_turns + 2} checkpoints), all at once with `asyncio.gather` and
  `astream` on one saver; latency = time between consecutive step updates of a thread.
  Sweep: the same at {", ".join(str(t) for t in params.w3_sweep)} threads.
- W4: one thread of {params.w4_checkpoints} checkpoints per saver, built once; resume =
  median of {params.w4_gets} `get_tuple` calls; history = median of
  {params.w4_history_calls} `get_state_history(limit={params.w4_history})` calls.
- W5: {params.w5_threads} concurrent async threads looping a small loop graph (counter +
  300–700 char note per step) against
  DurableSaver write-behind (one run): saturated (no think time) for
  {params.w5_sat_seconds:.0f} s, which measures the flusher's capacity (outbox entries moved
  per second of load + drain); then paced for {params.w5_seconds:.0f} s: steps granted at a
  fixed rate over all threads (the wait stands for a model call), chosen to offer
  {params.w5_fraction:.0%} of that capacity (the offered fraction measured is in the W5 table).
- W6: one thread of {params.w6_turns[1]} agent turns per saver (one run; storage is
  deterministic), measured after {params.w6_turns[0]} and {params.w6_turns[1]} turns.
- W7: issue 13's conversation (one `invoke`, per turn one AIMessage of ~600 chars with one
  tool call and one ToolMessage of ~1,500 chars), one run per length
  ({", ".join(str(t) for t in params.w7_turns)} turns), each on one thread in a fresh
  namespace: bytes kept per tier after the drain, client→server bytes per super-step.
""")
