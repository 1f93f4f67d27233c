"""Issue 35's part of the report ("lean documents, speed as production runs it"): its
done-when ratios from the same run, W1 at ``w1_long_turns`` (300) turns, each saver's
cost above "LangGraph alone" there, and DOCS (MongoDB documents and MongoDB-server CPU
per checkpoint, ``mongo_docs.py``).

Records come from ``run.py``: ``W1 sync``/``W1 async``/``W1 async dsync`` (100 turns) and
the same with ``@<turns>`` (W1L), carrying ``step_ms``; ``W3`` carrying ``cps``; ``DOCS``
carrying ``docs_per_cp``, ``server_cpu_ms_per_cp`` and the rest of ``mongo_docs``.
"""

from __future__ import annotations

import statistics
from typing import Any

from .report_speed import W1_APIS, _med, _paired, _verdict, fastest_peer

Row = tuple[str, str, str, str]

W1_BOUNDS = {"W1 sync": 1.2, "W1 async": 1.0, "W1 async dsync": 1.3}
"""W1 (100 turns): DurableSaver's ms per super-step at most this many times
InMemorySaver's, per API."""
W3_VS_INMEMORY = 0.8
W3_VS_PEER = 2.0
W1_LONG_VS_INMEMORY = 0.7
"""W1 at 300 turns, sync and async: at most this many times InMemorySaver's."""
DOCS_PER_CP = 3.0
"""MongoDB documents per checkpoint of the agent loop, at most."""
APP_ONLY = "durable_worker"
"""The saver whose rows say the application's own cost: write-behind with a flusher worker
process (pinned mode: on the servers' CPU)."""


def long_turns(records: list[dict[str, Any]]) -> int | None:
    """The turns of the W1L runs (the ``@<turns>`` of ``W1 sync@<turns>``), if any ran."""
    got = {int(r["workload"].split("@")[1]) for r in records
           if r["workload"].startswith("W1 ") and "@" in r["workload"]}
    return max(got) if got else None


def metrics(records: list[dict[str, Any]]) -> list[tuple[str, str, str, str, bool]]:
    """Rows for the report's overview and details: W1L and DOCS, as ``report.METRICS``."""
    out = []
    n = long_turns(records)
    if n:
        for w, what in W1_APIS:
            out.append((f"{w}@{n}", "step_ms",
                        f"W1 agent loop, {n} turns, {what}: wall time per super-step", "ms",
                        False))
    if any(r["workload"] == "DOCS" for r in records):
        out += [("DOCS", "docs_per_cp", "DOCS: MongoDB documents per checkpoint", "", False),
                ("DOCS", "server_cpu_ms_per_cp", "DOCS: MongoDB-server CPU per checkpoint",
                 "ms", False)]
    return out


def _ratio_row(records: list[dict[str, Any]], w: str, metric: str, bound: float,
               label: str, lower: bool, other: str = "inmemory",
               saver: str = "durable") -> Row:
    d, m = _med(records, w, metric, saver), _med(records, w, metric, other)
    ratio = None if d is None or not m else d / m
    reps = _paired(records, w, metric, saver, other)
    unit = "ms" if metric == "step_ms" else "cp/s"
    fmt = (lambda v: "–" if v is None else f"{v:.2f} ms") if unit == "ms" else (
        lambda v: "–" if v is None else f"{v:,.0f} cp/s")
    detail = "–" if ratio is None else f"{ratio:.2f}×" + (
        f"; per repetition {min(reps):.2f}–{max(reps):.2f}×" if len(reps) > 1 else "")
    ok = None if ratio is None else (ratio <= bound if lower else ratio >= bound)
    return (label, f"{fmt(d)} vs {fmt(m)}", detail, _verdict(ok))


def targets(records: list[dict[str, Any]], peers: list[str], short: dict[str, str]
            ) -> list[Row]:
    """Issue 35's done-when rows (the ratios of the medians of this run)."""
    out: list[Row] = []
    for w, what in W1_APIS:
        b = W1_BOUNDS[w]
        out.append(_ratio_row(records, w, "step_ms", b,
                              f"W1 ({what}): DurableSaver ≤ {b}× InMemorySaver", True))
    threads = next((r["threads"] for r in records if r["workload"] == "W3"
                    and "threads" in r), "?")
    out.append(_ratio_row(records, "W3", "cps", W3_VS_INMEMORY,
                          f"W3 ({threads} threads): DurableSaver ≥ {W3_VS_INMEMORY}× "
                          "InMemorySaver", False))
    best = fastest_peer(records, peers)
    if best is not None:
        out.append(_ratio_row(records, "W3", "cps", W3_VS_PEER,
                              f"W3 ({threads} threads): DurableSaver ≥ {W3_VS_PEER:g}× the "
                              f"fastest durable peer ({short.get(best, best)})", False, best))
    else:
        out.append((f"W3: DurableSaver ≥ {W3_VS_PEER:g}× the fastest durable peer",
                    "no peer ran", "–", "n/a"))
    if any(r["saver"] == APP_ONLY and r["workload"] in ("W1 sync", "W3") for r in records):
        # the application's own cost: write-behind with its outbox drained by a worker
        # process (in pinned mode on the servers' CPU, as on another machine)
        for w, what in W1_APIS:
            b = W1_BOUNDS[w]
            out.append(_ratio_row(records, w, "step_ms", b,
                                  f"W1 ({what}), app only (flusher worker elsewhere): ≤ {b}× "
                                  "InMemorySaver", True, saver=APP_ONLY))
        out.append(_ratio_row(records, "W3", "cps", W3_VS_INMEMORY,
                              f"W3 ({threads} threads), app only (flusher worker elsewhere): "
                              f"≥ {W3_VS_INMEMORY}× InMemorySaver", False, saver=APP_ONLY))
        if best is not None:
            out.append(_ratio_row(records, "W3", "cps", W3_VS_PEER,
                                  f"W3 ({threads} threads), app only: ≥ {W3_VS_PEER:g}× the "
                                  f"fastest durable peer ({short.get(best, best)})", False,
                                  best, saver=APP_ONLY))
    n = long_turns(records)
    if n:
        for w, what in W1_APIS:
            bound = W1_LONG_VS_INMEMORY if w != "W1 async dsync" else None
            row = _ratio_row(records, f"{w}@{n}", "step_ms", bound or 0.0,
                             f"W1 {n} turns ({what}): DurableSaver"
                             + (f" ≤ {bound}× InMemorySaver" if bound else
                                " vs InMemorySaver (no bound)"), True)
            out.append(row if bound else (*row[:3], "–"))
    dpc = _med(records, "DOCS", "docs_per_cp", "durable")
    turns = next((f"{r['threads']} threads × {r['turns']} turns" for r in records
                  if r["workload"] == "DOCS" and "turns" in r), "")
    out.append((f"DOCS ({turns}): ≤ {DOCS_PER_CP:g} MongoDB documents per checkpoint "
                "(DurableSaver)", "–" if dpc is None else f"{dpc:.2f}", _docs_detail(records),
                _verdict(None if dpc is None else dpc <= DOCS_PER_CP)))
    sc = _med(records, "DOCS", "server_cpu_ms_per_cp", "durable")
    vals = _vals(records, "DOCS", "server_cpu_ms_per_cp", "durable")
    out.append((f"DOCS ({turns}): MongoDB-server CPU per checkpoint at least halved "
                "(DurableSaver; against a baseline run)",
                "–" if sc is None else f"{sc:.2f} ms",
                "" if not vals else f"per repetition {min(vals):.2f}–{max(vals):.2f} ms; "
                "the baseline to halve", "n/a"))
    return out


def _vals(records: list[dict[str, Any]], w: str, metric: str, saver: str) -> list[float]:
    return [float(r[metric]) for r in records if r["workload"] == w and r["saver"] == saver
            and isinstance(r.get(metric), (int, float))]


def _docs_detail(records: list[dict[str, Any]]) -> str:
    r = next((r for r in records if r["workload"] == "DOCS" and r["saver"] == "durable"
              and "mongo_collections_docs" in r), None)
    if r is None:
        return "–"
    return (f"{r['docs']:,} documents over {r['checkpoint_docs']:,} checkpoint documents: "
            + ", ".join(f"{k} {v:,}" for k, v in r["mongo_collections_docs"].items() if v))


def _ms(v: float | None) -> str:
    return "–" if v is None else f"{v:.2f} ms"


def section(L: list[str], records: list[dict[str, Any]], names: list[str],
            peers: list[str], short: dict[str, str], cpu_mode: str) -> None:
    """Append issue 35's tables to ``L``: done-when ratios, W1L's cost above the floor,
    DOCS per saver, and the load average the records were taken under."""
    rows = targets(records, peers, short)
    if not any(r["workload"] in ("W1 sync", "W3", "DOCS") or "@" in r["workload"]
               for r in records):
        return
    L.append(f"## Issue 35: done-when ratios ({cpu_mode} mode, this run)")
    L.append("")
    L.append("| target | measured (DurableSaver vs the other) | ratio / detail | verdict |")
    L.append("|---|---|---|---|")
    for t in rows:
        L.append("| " + " | ".join(t) + " |")
    L.append("")
    loads = [float(r["load1"]) for r in records if isinstance(r.get("load1"), (int, float))]
    if loads:
        L.append(f"1-minute load average when the records were taken: median "
                 f"{statistics.median(loads):.2f}, range {min(loads):.2f}–{max(loads):.2f} "
                 "(2 cores; other jobs shared the machine: the numbers were taken under that "
                 "load). Each record's `load1` is in `results.json`.")
        L.append("")
    n = long_turns(records)
    if n:
        L.append(f'### W1 at {n} turns: cost above "LangGraph alone"')
        L.append("")
        L.append(f"One `invoke` of the {n}-turn agent loop ({2 * n + 2} checkpoints); each "
                 "saver's median ms per super-step and, in brackets, its distance to "
                 "LangGraph alone's median in the same run; `× InMemory` per API.")
        L.append("")
        L.append("| saver | " + " | ".join(f"{what}" for _, what in W1_APIS) + " |")
        L.append("|---|" + "---|" * len(W1_APIS))
        floor = {w: _med(records, f"{w}@{n}", "step_ms", "reference") for w, _ in W1_APIS}
        mem = {w: _med(records, f"{w}@{n}", "step_ms", "inmemory") for w, _ in W1_APIS}
        for s in names:
            cells = []
            for w, _ in W1_APIS:
                v = _med(records, f"{w}@{n}", "step_ms", s)
                if v is None:
                    cells.append("–")
                    continue
                c, f, m = _ms(v), floor[w], mem[w]
                if s != "reference" and f is not None:
                    c += f" ({v - f:+.2f} ms)"
                if s not in ("reference", "inmemory") and m:
                    c += f", {v / m:.2f}×"
                cells.append(c)
            if any(c != "–" for c in cells):
                L.append(f"| {short.get(s, s)} | " + " | ".join(cells) + " |")
        L.append("")
    _docs_table(L, records, names, short)


def _docs_table(L: list[str], records: list[dict[str, Any]], names: list[str],
                short: dict[str, str]) -> None:
    docs = [r for r in records if r["workload"] == "DOCS"]
    if not docs:
        return
    r0 = next((r for r in docs if "turns" in r), None)
    what = "" if r0 is None else (f"{r0['threads']} threads × {r0['turns']} turns of the "
                                  f"agent loop at once ({r0['graph_checkpoints']} checkpoints "
                                  "made by the graph)")
    L.append("### DOCS: MongoDB documents and server CPU per checkpoint")
    L.append("")
    L.append(f"{what}; documents counted after the drain in the saver's own database, per "
             "checkpoint = over the checkpoints collection's documents; CPU from "
             "`/proc/<pid>/stat` (utime+stime) from the first `ainvoke` to the end of the "
             "drain, medians of the repetitions (min–max). MongoDB commands: those the "
             "benchmark process' clients sent (command monitoring), so not a worker "
             "process'; a worker's CPU is its own column.")
    L.append("")
    L.append("| saver | documents per checkpoint | by collection | MongoDB bytes per checkpoint "
             "| MongoDB-server CPU per checkpoint | Redis CPU per checkpoint | benchmark "
             "process CPU per checkpoint | flusher worker process CPU per checkpoint | "
             "MongoDB commands per checkpoint |")
    L.append("|---|---|---|---|---|---|---|---|---|")
    seen = [s for s in names if any(r["saver"] == s for r in docs)]
    seen += sorted({r["saver"] for r in docs} - set(seen))
    for s in seen:
        rows = [r for r in docs if r["saver"] == s and "docs_per_cp" in r]
        if not rows:
            err = next((r["error"] for r in docs if r["saver"] == s and "error" in r), "")
            L.append(f"| {short.get(s, s)} | error: {err[:120]} | | | | | | | |")
            continue

        def cell(k: str, unit: str = "ms", rows: list[dict[str, Any]] = rows) -> str:
            v = [float(r[k]) for r in rows if isinstance(r.get(k), (int, float))]
            if not v:
                return "–"
            u = f" {unit}" if unit else ""
            return (f"{statistics.median(v):.2f}{u} ({min(v):.2f}–{max(v):.2f})"
                    if len(v) > 1 else f"{v[0]:.2f}{u}")

        by = rows[0]["mongo_collections_docs"]
        L.append(f"| {short.get(s, s)} | {rows[0]['docs_per_cp']:.2f} "
                 f"({rows[0]['docs']:,} / {rows[0]['checkpoint_docs']:,}) | "
                 + ", ".join(f"{k} {v:,}" for k, v in by.items() if v) + " | "
                 f"{statistics.median(r['bytes_per_cp'] for r in rows):,.0f} B | "
                 f"{cell('server_cpu_ms_per_cp')} | {cell('redis_cpu_ms_per_cp')} | "
                 f"{cell('client_cpu_ms_per_cp')} | {cell('worker_cpu_ms_per_cp')} | "
                 f"{cell('mongo_cmds_per_cp', '')} |")
    L.append("")
