"""``size THREAD``: how many bytes one thread takes in each tier (``inspection.thread_size``)."""

from __future__ import annotations

import typer
from rich.table import Table

from ..inspection.thread_size import ThreadSize, thread_size
from .browse import JSON, THREAD
from .session import command, console, echo_json, session_of


def _tables(report: ThreadSize) -> list[Table]:
    """The report as rich tables: each tier's channels, the other kinds per tier, blobs."""
    hot, cold = report.redis, report.mongodb
    out = []
    for tier, what in ((hot, "stored value length"), (cold, "BSON document size")):
        if tier.down:
            continue
        spaces = {c.ns for c in tier.channels}
        table = Table(title=f"{'Redis' if tier is hot else 'MongoDB'}: channels of "
                      f"{report.thread_id} (bytes: {what})")
        cols = (["ns"] if spaces - {""} else []) + ["channel", "latest", "all versions",
                                                     "versions"]
        for col in cols:
            table.add_column(col, justify="left" if col in ("ns", "channel") else "right",
                             no_wrap=True)
        for c in tier.channels:
            cells = [c.channel, str(c.latest_bytes), str(c.all_bytes), str(c.versions)]
            table.add_row(*(([c.ns or '""'] if "ns" in cols else []) + cells))
        out.append(table)
    kinds = Table(title="records (count, bytes)")
    for col in ("kind", "Redis", "bytes", "MongoDB", "bytes"):
        kinds.add_column(col, justify="left" if col == "kind" else "right", no_wrap=True)
    for kind in dict.fromkeys([*hot.kinds, *cold.kinds]):
        cells = []
        for tier in (hot, cold):
            k = tier.kinds.get(kind)
            cells += ["-", "-"] if k is None else [str(k.count), str(k.bytes)]
        kinds.add_row("pending writes" if kind == "writes" else kind, *cells)
    kinds.add_row("total", "", str(hot.total), "", str(cold.total))
    kinds.caption = ("Redis total: MEMORY USAGE of the thread's keys; MongoDB total: BSON "
                     "sizes of its documents")
    out.append(kinds)
    if report.blobs:
        blobs = Table(title=f"external blobs ({len(report.blobs)}, "
                      f"{report.blob_bytes} bytes)")
        for col in ("key", "format", "bytes", "named in"):
            blobs.add_column(col, justify="right" if col == "bytes" else "left",
                             no_wrap=True, overflow="ellipsis")
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
