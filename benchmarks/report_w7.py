"""The W7 (conversation storage) part of the report: issue 13's storage and wire targets,
the overview row and the W7 section. Every figure comes from the W7 records of the same
run (``conversation.w7``: metrics keyed ``<metric>@<turns>``)."""

from __future__ import annotations

from typing import Any

Target = tuple[str, str, str, str]

STORAGE_SHARE = 1 / 20
"""Each DurableSaver tier may keep at most this share of InMemorySaver's payload bytes."""
GROWTH_MAX = 2.2
"""Stored bytes may grow at most this much from the middle to the longest run."""
PER_STEP_MAX = 1.5
"""Bytes sent per super-step in the middle run over the shortest run, at most."""

_SHORT = {"inmemory": "InMemory", "durable": "Durable (wb)", "durable_strict": "Durable (strict)",
          "postgres": "Postgres", "mongodb": "MongoDB", "sqlite": "SQLite"}


def _rows(records: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {r["saver"]: r for r in records if r["workload"] == "W7"}


def turns_of(records: list[dict[str, Any]]) -> tuple[int, int, int] | None:
    """The three run lengths (short, middle, long) W7 ran with, or ``None``."""
    for r in _rows(records).values():
        t = r.get("turns")
        if isinstance(t, list) and len(t) == 3:
            return int(t[0]), int(t[1]), int(t[2])
    return None


def _num(r: dict[str, Any] | None, key: str) -> float | None:
    v = None if r is None else r.get(key)
    return float(v) if isinstance(v, (int, float)) else None


def _b(v: float | None) -> str:
    if v is None:
        return "–"
    for unit, k in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if abs(v) >= k:
            return f"{v / k:.2f} {unit}"
    return f"{v:.0f} B"


def _x(a: float | None, b: float | None) -> str:
    return "–" if a is None or b is None or b == 0 else f"{a / b:.2f}×"


def _verdict(ok: bool | None) -> str:
    return "n/a" if ok is None else ("**met**" if ok else "**missed**")


def targets(records: list[dict[str, Any]]) -> list[Target]:
    """Issue 13's storage targets for DurableSaver (write-behind), from W7:
    (target, measured, ratio/detail, verdict)."""
    tt = turns_of(records)
    if tt is None:
        return [("W7: conversation storage and bytes per super-step", "W7 not run", "–",
                 "n/a")]
    a, b, c = tt
    rows = _rows(records)
    d, mem = rows.get("durable"), rows.get("inmemory")
    out: list[Target] = []
    payload = _num(mem, f"bytes@{b}")
    for tier, key in (("MongoDB", "mongo_bytes"), ("Redis", "redis_bytes")):
        v = _num(d, f"{key}@{b}")
        ok = None if v is None or payload is None else v <= payload * STORAGE_SHARE
        share = "–" if v is None or not payload else f"{v / payload:.3f}× (≤ {STORAGE_SHARE}×)"
        out.append((f"W7: after {b} turns, DurableSaver {tier} bytes ≤ 1/20 of InMemorySaver "
                    f"payload bytes", f"{_b(v)} vs {_b(payload)}", share, _verdict(ok)))
    for tier, key in (("MongoDB", "mongo_bytes"), ("Redis", "redis_bytes")):
        lo, hi = _num(d, f"{key}@{b}"), _num(d, f"{key}@{c}")
        ok = None if lo is None or hi is None or lo == 0 else hi / lo <= GROWTH_MAX
        out.append((f"W7: DurableSaver {tier} bytes grow ≤ {GROWTH_MAX}× from {b} to {c} turns",
                    f"{_b(lo)} → {_b(hi)}", _x(hi, lo), _verdict(ok)))
    for to, key, how in (("Redis", "redis_in_per_step", "INFO total_net_input_bytes, "
                                                        "call path + flusher"),
                         ("MongoDB", "mongo_cmd_per_step", "BSON of the commands sent")):
        lo, hi = _num(d, f"{key}@{a}"), _num(d, f"{key}@{b}")
        ok = None if lo is None or hi is None or lo == 0 else hi / lo <= PER_STEP_MAX
        out.append((f"W7: client→{to} bytes per super-step, {b}-turn run ≤ {PER_STEP_MAX}× the "
                    f"{a}-turn run", f"{_b(hi)} vs {_b(lo)} per step ({how})", _x(hi, lo),
                    _verdict(ok)))
    return out


def overview_row(records: list[dict[str, Any]], names: list[str]) -> str | None:
    """The overview table's W7 row: bytes kept after the middle run, per saver."""
    tt = turns_of(records)
    if tt is None:
        return None
    b = tt[1]
    rows = _rows(records)
    cells = []
    for n in names:
        r = rows.get(n)
        if r is None:
            cells.append("–")
        elif "error" in r:
            cells.append("error")
        elif f"redis_bytes@{b}" in r:
            cells.append(f"{_b(_num(r, f'mongo_bytes@{b}'))} MongoDB + "
                         f"{_b(_num(r, f'redis_bytes@{b}'))} Redis")
        else:
            cells.append(_b(_num(r, f"bytes@{b}")))
    return (f"| W7 conversation storage: bytes kept for the thread after {b} turns | "
            + " | ".join(cells) + " |")


def section(L: list[str], records: list[dict[str, Any]], names: list[str]) -> None:
    """The W7 section: bytes kept per tier, client→server bytes per super-step, time."""
    tt = turns_of(records)
    rows = _rows(records)
    if tt is None and not rows:
        return
    L.append("## W7 conversation storage (issue 13's agent loop, one thread)")
    L.append("")
    errs = [f"- {_SHORT.get(n, n)}: error {r['error'][:200]}" for n, r in rows.items()
            if "error" in r]
    if tt is None:
        L.extend(errs)
        L.append("")
        return
    a, b, c = tt
    mem = _num(rows.get("inmemory"), f"bytes@{b}")
    L.append(f"| saver | kept in | after {a} turns | after {b} turns | after {c} turns "
             f"| growth {c}/{b} | × InMemorySaver payload ({b} turns) | measured as |")
    L.append("|---|---|---|---|---|---|---|---|")
    for n in names:
        r = rows.get(n)
        if r is None or "error" in r:
            continue
        tiers: list[tuple[str, str, str]] = []
        if f"redis_bytes@{b}" in r:
            tiers += [("MongoDB", "mongo_bytes", "sum of `$bsonSize` over every collection of "
                                                 "the collection_prefix"),
                      ("Redis", "redis_bytes", "sum of `MEMORY USAGE` over every key of the "
                                               "key_prefix")]
        else:
            tiers.append(("payload" if n == "inmemory" else "store", "bytes",
                          str(r.get("method", ""))))
            if f"mongo_bytes@{b}" in r:
                tiers.append(("MongoDB ($bsonSize)", "mongo_bytes",
                              "sum of `$bsonSize` over the database's collections"))
        for tier, key, how in tiers:
            v = [_num(r, f"{key}@{t}") for t in tt]
            L.append(f"| {_SHORT.get(n, n)} | {tier} | {_b(v[0])} | {_b(v[1])} | {_b(v[2])} | "
                     f"{_x(v[2], v[1])} | {_x(v[1], mem)} | {how} |")
    L.append("")
    L.append(f"| saver | client→server bytes per super-step | {a}-turn run | {b}-turn run | "
             f"{c}-turn run | {b}-turn / {a}-turn |")
    L.append("|---|---|---|---|---|---|")
    for n in names:
        r = rows.get(n)
        if r is None or "error" in r:
            continue
        for to, key in (("to Redis (server's `total_net_input_bytes` delta)",
                         "redis_in_per_step"),
                        ("to MongoDB (BSON size of the commands)", "mongo_cmd_per_step")):
            v = [_num(r, f"{key}@{t}") for t in tt]
            if all(x is None for x in v):
                continue
            L.append(f"| {_SHORT.get(n, n)} | {to} | {_b(v[0])} | {_b(v[1])} | {_b(v[2])} | "
                     f"{_x(v[1], v[0])} |")
    L.append("")
    L.append(f"| saver | ms per super-step, {a} / {b} / {c} turns (one run each) |")
    L.append("|---|---|")
    for n in names:
        r = rows.get(n)
        if r is None or "error" in r:
            continue
        ms = [_num(r, f"step_ms@{t}") for t in tt]
        L.append(f"| {_SHORT.get(n, n)} | "
                 + " / ".join("–" if m is None else f"{m:.2f}" for m in ms) + " |")
    L.append("")
    if errs:
        L.extend([*errs, ""])
    L.append(f"Each length is its own run: a fresh namespace, one thread, one `invoke` of "
             f"`graphs.build_conversation` (per turn one AIMessage of ~600 chars with one tool "
             f"call, then one ToolMessage of ~1,500 chars; {2 * b + 2} checkpoints for {b} "
             f"turns). Bytes kept are measured after `flush()` returned (DurableSaver) and "
             f"before the hot keys expire (`hot_ttl_s`). Client→server bytes run from just "
             f"after the saver opened to just after its `flush()` returned, divided by the "
             f"run's checkpoints (`2 × turns + 2`): Redis counts everything this saver sent "
             f"its Redis, the flusher thread's commands included (its reads of entries and "
             f"values are server→client and not counted); MongoDB counts the commands PyMongo "
             f"sent to the saver's database (PyMongo command monitoring). ms per super-step "
             f"is one run's `invoke` wall time over its checkpoints (the drain not included); "
             f"the timing targets come from W1.")
    L.append("")


def plot(records: list[dict[str, Any]], names: list[str], short: dict[str, str]) -> Any:
    """Bytes kept against turns, one line per saver and tier (log-log: a slope of 1 is
    linear growth, 2 quadratic), or ``None`` without W7 results."""
    import matplotlib.pyplot as plt
    from matplotlib.ticker import NullFormatter

    tt = turns_of(records)
    rows = _rows(records)
    if tt is None:
        return None
    fig, ax = plt.subplots(figsize=(8, 4.5))
    for n in names:
        r = rows.get(n)
        if r is None or "error" in r:
            continue
        series = ([("MongoDB", "mongo_bytes", "-"), ("Redis", "redis_bytes", "--")]
                  if f"redis_bytes@{tt[1]}" in r
                  else [("payload" if n == "inmemory" else "", "bytes", "-")])
        for tier, key, style in series:
            ys = [_num(r, f"{key}@{t}") for t in tt]
            pts = [(t, y / 1e6) for t, y in zip(tt, ys) if y]
            if pts:
                ax.plot(*zip(*pts), style, marker="o", lw=1.2,
                        label=f"{short.get(n, n)} {tier}".strip())
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xticks(list(tt))
    ax.xaxis.set_minor_formatter(NullFormatter())
    ax.set_xticklabels([str(t) for t in tt])
    ax.set_xlabel("turns (one thread)")
    ax.set_ylabel("MB kept")
    ax.set_title("W7: bytes kept for one conversation (log-log; slope 1 = linear, "
                 "2 = quadratic)", fontsize=9)
    ax.legend(fontsize=7)
    fig.tight_layout()
    return fig
