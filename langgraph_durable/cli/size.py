"""``size THREAD``: how many bytes one thread takes in each tier (``inspection.size``)."""

from __future__ import annotations

import typer
from rich.table import Table

from ..inspection import render
from ..inspection.size import ThreadSize, thread_size
from .browse import JSON, THREAD
from .session import command, console, echo_json, session_of


def _tables(report: ThreadSize) -> list[Table]:
    """The report as rich tables: channels per tier, the other kinds per tier, blobs."""
    hot, cold = report.redis, report.mongodb
    channels = Table(title=f"channels of {report.thread_id} (bytes; Redis: stored value "
                     "length, MongoDB: BSON size)")
    for col in ("ns", "channel", "redis latest", "redis all", "redis versions",
                "mongodb latest", "mongodb all", "mongodb versions"):
        channels.add_column(col, justify="left" if col in ("ns", "channel") else "right",
                            no_wrap=True)
    by_key = {(c.ns, c.channel): [c, None] for c in hot.channels}
    for c in cold.channels:
        by_key.setdefault((c.ns, c.channel), [None, None])[1] = c
    for (ns, ch), (h, m) in sorted(by_key.items()):
        cells = []
        for c in (h, m):
            cells += (["-", "-", "-"] if c is None else
                      [str(c.latest_bytes), str(c.all_bytes), str(c.versions)])
        channels.add_row(ns or '""', ch, *cells)
    kinds = Table(title="records (count, bytes)")
    for col in ("kind", "redis count", "redis bytes", "mongodb count", "mongodb bytes"):
        kinds.add_column(col, justify="left" if col == "kind" else "right", no_wrap=True)
    names = list(dict.fromkeys([*hot.kinds, *cold.kinds]))
    for kind in names:
        cells = []
        for tier in (hot, cold):
            k = tier.kinds.get(kind)
            cells += ["-", "-"] if k is None else [str(k.count), str(k.bytes)]
        kinds.add_row(kind, *cells)
    kinds.add_row("total", "", f"{hot.total} ({render.human_bytes(hot.total)})", "",
                  f"{cold.total} ({render.human_bytes(cold.total)})")
    kinds.caption = "Redis total: MEMORY USAGE of the thread's keys; MongoDB: BSON sizes"
    out = [channels, kinds]
    if report.blobs:
        blobs = Table(title=f"external blobs ({len(report.blobs)}, "
                      f"{report.blob_bytes} bytes)")
        for col in ("key", "format", "bytes", "named in"):
            blobs.add_column(col, justify="right" if col == "bytes" else "left",
                             no_wrap=True)
        for b in report.blobs:
            blobs.add_row(b.key, b.format, str(b.size), ", ".join(b.tiers))
        out.append(blobs)
    return out


@command
def size(ctx: typer.Context, thread: str = THREAD, as_json: bool = JSON) -> None:
    """Bytes THREAD takes, per tier: each channel (the latest value and every stored
    version), pending writes, items (messages), checkpoints, effect-journal entries, the
    tier's total, and the external blobs its records name. Redis figures are stored value
    lengths (total: MEMORY USAGE), MongoDB's BSON document sizes."""
    session = session_of(ctx)
    report = thread_size(session.saver(tolerant=True), thread)
    if as_json:
        echo_json(report.as_dict())
        return
    out = console()
    for tier in (report.redis, report.mongodb):
        if tier.down:
            out.print(f"{tier.tier} DOWN: {tier.down}")
    for table in _tables(report):
        out.print(table)
