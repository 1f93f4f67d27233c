"""The speed part of the report (issue 22, "fast where servers run agents"): the done-when
targets of W1 and W3 as ratios of the same run, every saver's cost above "LangGraph
alone" (``floor.ReferenceSaver``) per super-step and per checkpoint, and the W3 sweep
(throughput against concurrent threads) as a table and a plot.

Records come from ``run.py``: W1 (``W1 sync``, ``W1 async``, ``W1 async dsync``) carry
``step_ms`` (wall time of the one ``invoke`` over its checkpoints); W3 (50 threads) and
its sweep (``W3@<threads>``) carry ``cps`` (checkpoints per second of wall time), ``cp_ms``
(wall time per checkpoint) and ``threads``.
"""

from __future__ import annotations

import math
import statistics
from typing import Any

Target = tuple[str, str, str, str]

W1_VS_INMEMORY = 1.2
"""W1 sync and async: DurableSaver's ms per super-step at most this many times
InMemorySaver's."""
W1_DSYNC_VS_INMEMORY = 1.5
"""W1 async with LangGraph's ``durability="sync"``: at most this many times InMemorySaver's."""
W3_VS_PEER = 2.0
"""W3: DurableSaver's checkpoints per second at least this many times the fastest durable
peer's."""
W3_VS_INMEMORY = 0.6
"""W3: DurableSaver's checkpoints per second at least this share of InMemorySaver's."""

W1_APIS = (("W1 sync", "sync API"), ("W1 async", "async API"),
           ("W1 async dsync", 'async API, durability="sync"'))
"""The W1 workloads: (record ``workload``, what it runs)."""


def _med(records: list[dict[str, Any]], workload: str, metric: str, saver: str
         ) -> float | None:
    v = [float(r[metric]) for r in records if r["workload"] == workload
         and r["saver"] == saver and isinstance(r.get(metric), (int, float))
         and not math.isnan(float(r[metric]))]
    return statistics.median(v) if v else None


def _paired(records: list[dict[str, Any]], workload: str, metric: str, a: str, b: str
            ) -> list[float]:
    """``a / b`` per repetition (the two savers' runs of the same round, adjacent in time)."""
    got: dict[str, dict[int, float]] = {a: {}, b: {}}
    for r in records:
        if r["workload"] == workload and r["saver"] in got and isinstance(
                r.get(metric), (int, float)):
            got[r["saver"]][int(r["rep"])] = float(r[metric])
    return [got[a][k] / got[b][k] for k in sorted(got[a]) if k in got[b] and got[b][k]]


def _verdict(ok: bool | None) -> str:
    return "n/a" if ok is None else ("**met**" if ok else "**missed**")


def _ms(v: float | None) -> str:
    return "–" if v is None else f"{v:.2f} ms"


def _cps(v: float | None) -> str:
    return "–" if v is None else f"{v:,.0f} cp/s"


def _reps(ratios: list[float]) -> str:
    return (f"; per repetition {min(ratios):.2f}–{max(ratios):.2f}×" if len(ratios) > 1
            else "")


def fastest_peer(records: list[dict[str, Any]], peers: list[str]) -> str | None:
    """The peer with the highest median W3 ``cps`` (``None`` when none ran)."""
    pv = {p: v for p in peers if (v := _med(records, "W3", "cps", p)) is not None}
    return max(pv, key=lambda p: pv[p]) if pv else None


def targets(records: list[dict[str, Any]], peers: list[str], short: dict[str, str]
            ) -> list[Target]:
    """Issue 22's done-when rows: (target, measured, ratio and detail, verdict). W1: ratio
    of the medians of ``step_ms``; W3 (the ``w3_threads`` run): ratio of the medians of
    ``cps``; a bound is met when the ratio is exactly at it."""
    out: list[Target] = []
    for w, what in W1_APIS:
        bound = W1_DSYNC_VS_INMEMORY if w == "W1 async dsync" else W1_VS_INMEMORY
        d, m = _med(records, w, "step_ms", "durable"), _med(records, w, "step_ms", "inmemory")
        ratio = None if d is None or m is None or m == 0 else d / m
        out.append((f"W1 ({what}): DurableSaver ≤ {bound}× InMemorySaver per super-step",
                    f"{_ms(d)} vs {_ms(m)}",
                    "–" if ratio is None else f"{ratio:.2f}×"
                    + _reps(_paired(records, w, "step_ms", "durable", "inmemory")),
                    _verdict(None if ratio is None else ratio <= bound)))
    d = _med(records, "W3", "cps", "durable")
    threads = next((r["threads"] for r in records if r["workload"] == "W3"
                    and "threads" in r), "?")
    best = fastest_peer(records, peers)
    pv = None if best is None else _med(records, "W3", "cps", best)
    ratio = None if d is None or not pv else d / pv
    out.append((f"W3 ({threads} threads): DurableSaver ≥ {W3_VS_PEER:g}× the fastest durable "
                "peer's checkpoints/s",
                f"{_cps(d)} vs {short.get(best or '', best or 'no peer ran')} {_cps(pv)}",
                "–" if ratio is None else f"{ratio:.2f}×"
                + ("" if best is None else _reps(_paired(records, "W3", "cps", "durable",
                                                         best))),
                _verdict(None if ratio is None else ratio >= W3_VS_PEER)))
    m = _med(records, "W3", "cps", "inmemory")
    ratio = None if d is None or not m else d / m
    out.append((f"W3 ({threads} threads): DurableSaver ≥ {W3_VS_INMEMORY}× InMemorySaver's "
                "checkpoints/s", f"{_cps(d)} vs {_cps(m)}",
                "–" if ratio is None else f"{ratio:.2f}×"
                + _reps(_paired(records, "W3", "cps", "durable", "inmemory")),
                _verdict(None if ratio is None else ratio >= W3_VS_INMEMORY)))
    return out


def cost_rows(records: list[dict[str, Any]], names: list[str]
              ) -> list[tuple[str, list[tuple[float | None, float | None]]]]:
    """Per saver (not the floor): for each W1 workload (ms per super-step, ms above
    LangGraph alone), then W3 (ms of wall time per checkpoint, ms above LangGraph alone).
    Above = the saver's median minus the floor's median of the same workload."""
    cols = [(w, "step_ms") for w, _ in W1_APIS] + [("W3", "cp_ms")]
    floor = {w: _med(records, w, m, "reference") for w, m in cols}
    out = []
    for n in names:
        if n == "reference":
            continue
        cells = []
        for w, m in cols:
            v, f = _med(records, w, m, n), floor[w]
            cells.append((v, None if v is None or f is None else v - f))
        if any(v is not None for v, _ in cells):
            out.append((n, cells))
    return out


def sweep(records: list[dict[str, Any]]) -> dict[int, dict[str, float]]:
    """{threads: {saver: median cps}} over W3 and every ``W3@<threads>``."""
    out: dict[int, dict[str, float]] = {}
    for r in records:
        if (r["workload"] == "W3" or r["workload"].startswith("W3@")) and "threads" in r:
            out.setdefault(int(r["threads"]), {})
    for n in out:
        w = [r["workload"] for r in records if r.get("threads") == n
             and (r["workload"] == "W3" or r["workload"].startswith("W3@"))][0]
        for s in {r["saver"] for r in records if r["workload"] == w}:
            v = _med(records, w, "cps", s)
            if v is not None:
                out[n][s] = v
    return dict(sorted(out.items()))


def sweep_savers(records: list[dict[str, Any]], names: list[str]) -> list[str]:
    """The savers the sweep ran at every thread count except W3's own (the ``W3@`` runs)."""
    ran = {r["saver"] for r in records if r["workload"].startswith("W3@")}
    return [n for n in names if n in ran]


def section(L: list[str], records: list[dict[str, Any]], names: list[str],
            short: dict[str, str]) -> None:
    """Append the cost-above-the-floor table and the W3 sweep table to ``L``."""
    rows = cost_rows(records, names)
    if rows:
        L.append('## Cost above "LangGraph alone"')
        L.append("")
        w1 = next((r["steps"] for r in records if r["workload"] == "W1 sync"
                   and "steps" in r), "?")
        w3 = next((r["threads"] for r in records if r["workload"] == "W3"
                   and "threads" in r), "?")
        L.append("Each saver's median, and in brackets its distance to LangGraph alone's "
                 "(`benchmarks/floor.py`: keeps each thread's latest checkpoint by "
                 "reference, serializes nothing) in the same run. Per super-step: W1, one "
                 f"thread, one `invoke` of the agent loop over its {w1} checkpoints; per "
                 f"checkpoint: W3, the wall time of {w3} threads running at once over all "
                 "their checkpoints. A negative distance is noise: no saver does less work "
                 "than the floor. W1 sync runs the sync savers (SqliteSaver, PostgresSaver), "
                 "the async runs and W3 the async ones (AsyncSqliteSaver, AsyncPostgresSaver "
                 "on a pool).")
        L.append("")
        heads = ["W1 sync, per super-step", "W1 async, per super-step",
                 'W1 async durability="sync", per super-step', "W3, per checkpoint",
                 "W3 checkpoints/s"]
        L.append("| saver | " + " | ".join(heads) + " |")
        L.append("|---|" + "---|" * len(heads))
        fl = [(w, "step_ms") for w, _ in W1_APIS] + [("W3", "cp_ms")]
        L.append("| LangGraph alone | " + " | ".join(
            _ms(_med(records, w, m, "reference")) for w, m in fl) + " | "
            + _cps(_med(records, "W3", "cps", "reference")) + " |")
        for n, cells in rows:
            L.append(f"| {short.get(n, n)} | " + " | ".join(
                "–" if v is None else (f"{_ms(v)} ({a:+.2f} ms)" if a is not None else _ms(v))
                for v, a in cells) + " | " + _cps(_med(records, "W3", "cps", n)) + " |")
        L.append("")
    sw = sweep(records)
    if len(sw) > 1:
        cols = [n for n in names if any(n in v for v in sw.values())]
        L.append("## W3 sweep: checkpoints per second against concurrent threads")
        L.append("")
        L.append("| threads | " + " | ".join(short.get(n, n) for n in cols)
                 + " | Durable (wb) ÷ InMemory |")
        L.append("|---|" + "---|" * (len(cols) + 1))
        for t, v in sw.items():
            d, m = v.get("durable"), v.get("inmemory")
            L.append(f"| {t} | " + " | ".join(_cps(v.get(n)) for n in cols) + " | "
                     + ("–" if d is None or not m else f"{d / m:.2f}×") + " |")
        L.append("")
        L.append("Medians of the interleaved repetitions; each thread runs the W3 agent loop "
                 "once, all threads at once. The sweep runs LangGraph alone, InMemorySaver, "
                 "DurableSaver (write-behind) and the fastest durable peer of W3; the other "
                 "savers only at W3's thread count. Plot: `w3_sweep.png`.")
        L.append("")


def plot(records: list[dict[str, Any]], names: list[str], short: dict[str, str]) -> Any:
    """The W3 sweep as a matplotlib figure (checkpoints/s against threads, log x), or
    ``None`` when the sweep did not run."""
    sw = sweep(records)
    keep = sweep_savers(records, names)
    if len(sw) < 2 or not keep:
        return None
    import matplotlib.pyplot as plt
    from matplotlib.ticker import NullLocator

    fig, ax = plt.subplots(figsize=(7.5, 4.2))
    style = {"reference": ("#7f7f7f", "--"), "inmemory": ("#2ca02c", "-"),
             "durable": ("#d62728", "-")}
    for n in keep:
        pts = [(t, v[n]) for t, v in sw.items() if n in v]
        color, ls = style.get(n, ("#1f77b4", "-"))
        label = short.get(n, n) + (" (the fastest durable peer in W3)" if n not in style
                                   else "")
        ax.plot([t for t, _ in pts], [c for _, c in pts], marker="o", color=color, ls=ls,
                label=label)
    ax.set_xscale("log")
    ax.xaxis.set_minor_locator(NullLocator())
    ax.set_xticks(list(sw))
    ax.set_xticklabels([str(t) for t in sw])
    ax.set_xlabel("concurrent threads (asyncio, one process)")
    ax.set_ylabel("checkpoints per second")
    ax.set_ylim(bottom=0)
    turns = next((r["turns"] for r in records if r["workload"] == "W3" and "turns" in r), "?")
    ax.set_title(f"W3 sweep: the agent loop ({turns} turns per thread, all threads at "
                 "once), medians of the repetitions", fontsize=9)
    ax.legend(fontsize=8)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    return fig
