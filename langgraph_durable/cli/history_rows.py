"""``history``'s rows and table: the run view of ``inspection.runview`` (which node(s)
made each checkpoint, the step's duration, what it triggers, failures) fitted to the
terminal's width."""

from __future__ import annotations

from typing import Any

from rich import box
from rich.table import Table

from ..inspection import render, runview
from ..plans import read


def history_rows(saver: Any, thread: str, ns: str | None, before: str | None, limit: int,
                 all_channels: bool) -> tuple[list[dict[str, Any]], bool]:
    """Up to ``limit`` checkpoints of ``thread`` older than ``before``, newest first, of
    namespace ``ns`` (None: every namespace, merged by id), each a JSON row: ``ns``,
    ``checkpoint_id``, ``parent``, ``step``, ``source``, ``writes`` (its pending
    writes), ``ts``, and the run view's ``ran`` (node(s) whose step made it, or its
    source), ``duration_s``, ``wrote`` (channels they wrote; internal ones only with
    ``all_channels``), ``next``, ``failed``, ``interrupted``. Also whether more are
    older. Values are not decoded (errors and interrupts excepted)."""
    spaces = [ns] if ns is not None else saver.run(read.namespaces_plan(saver.context, thread))
    rows: list[dict[str, Any]] = []
    more = False
    for space in spaces:
        view = runview.run_view(saver, thread, space, before=before, page_size=limit,
                                all_channels=all_channels)
        more = more or view["next_before"] is not None
        for r in view["rows"]:
            rows.append({
                "ns": space, "checkpoint_id": r["checkpoint_id"], "parent": r["parent"],
                "step": r["step"], "source": r["source"],
                "writes": sum(n for _ch, n in r["writes"]), "ts": r["ts"],
                "ran": r["made_by"], "duration_s": r["duration_s"],
                "wrote": sorted({c["channel"] for w in r["wrote"] for c in w["channels"]}),
                "next": r["next"], "failed": r["failed"], "interrupted": r["interrupted"]})
    rows.sort(key=lambda r: r["checkpoint_id"], reverse=True)
    return rows[:limit], more or len(rows) > limit


def short_ids(ids: list[str], least: int = 13) -> dict[str, str]:
    """Each id cut to the shortest prefix (``least`` characters or more: a uuid6's time
    to 0.4 ms) that no other of ``ids`` shares; ``show``/``diff`` accept such prefixes."""
    distinct = sorted(set(ids))
    n = least
    while n < 36 and len({i[:n] for i in distinct}) < len(distinct):
        n += 1
    return {i: i[:n] for i in distinct}


HEADS = ["checkpoint_id", "parent", "step", "source", "ran", "wrote", "Δt", "next", "writes",
         "time (UTC)"]
OPTIONAL = ["wrote", "source", "writes", "next", "Δt"]
"""Columns left out, in this order, until the table fits the terminal."""


def _cell(row: dict[str, Any], col: str, short: Any) -> str:
    if col == "checkpoint_id":
        return str(short(row["checkpoint_id"]))
    if col == "parent":
        return str(short(row["parent"])) if row["parent"] else "-"
    if col == "ran":
        return ", ".join(row["ran"]) or "-"
    if col == "wrote":
        return ", ".join(row["wrote"]) or "-"
    if col == "Δt":
        return runview.duration_text(row["duration_s"])
    if col == "next":
        failed = {f["node"] for f in row["failed"]}
        return ", ".join(f"{n} FAILED" if n in failed else n for n in row["next"]) or "-"
    if col == "time (UTC)":
        return render.utc(row["ts"])
    if col == "ns":
        return row["ns"] or '""'
    return str(row[col])


def _needed(rows: list[dict[str, Any]], cols: list[str], short: Any) -> int:
    return sum(max(len(c), *(len(_cell(r, c, short)) for r in rows)) + 3 for c in cols) + 1


def history_table(thread: str, rows: list[dict[str, Any]], width: int) -> Table:
    """Full ids, the namespace column and box lines when the table fits in ``width``
    columns with every column but ``wrote``; narrower, ids and parents become unique
    prefixes, the namespace goes to the title when there is one, and the columns of
    ``OPTIONAL`` are left out in order until it fits; no column is squeezed."""
    spaces = {row["ns"] for row in rows}
    same = (lambda x: x)  # noqa: E731
    prefixes = short_ids([r["checkpoint_id"] for r in rows]
                         + [r["parent"] for r in rows if r["parent"]]).get
    choice = None
    for wide, dropped in ((True, 0), (True, 1), *((False, k) for k in range(len(OPTIONAL) + 1))):
        cols = (["ns"] if wide or len(spaces) > 1 else []) + [
            c for c in HEADS if c not in OPTIONAL[:dropped]]
        choice = (wide, cols)
        if _needed(rows, cols, same if wide else prefixes) <= width:
            break
    assert choice is not None
    wide, cols = choice
    short = same if wide else prefixes
    title = f"history of {thread}"
    if "ns" not in cols:
        title += f" (ns {next(iter(spaces), '')!r})"
    table = Table(title=title, box=box.HEAVY_HEAD if wide else None, pad_edge=False)
    for col in cols:
        table.add_column(col, justify="right" if col in ("step", "writes", "Δt") else "left",
                         no_wrap=True, overflow="ellipsis")
    for row in rows:
        table.add_row(*(_cell(row, c, short) for c in cols))
    if not wide:
        table.caption = "ids cut to unique prefixes (show/diff take them; --json: full ids)"
    return table


def failure_lines(rows: list[dict[str, Any]]) -> list[str]:
    """One line per node that failed from a shown checkpoint: step, node, error."""
    return [f"step {r['step']} ({r['checkpoint_id'][:13]}): {f['node']} failed: {f['error']}"
            for r in rows for f in r["failed"]]
