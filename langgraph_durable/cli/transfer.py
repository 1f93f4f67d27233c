"""``export THREAD`` / ``import FILE``: a thread's stored records as JSON Lines.

The first line is a header ``{"format": "langgraph-durable-export", "format_version": V,
"schema_version": N, "thread_id": ..., "exported_at": ..., "counts": {...}}`` (V is 1, 2
or 3: the lowest that holds the records, below); then one
record a line, sorted by identity, with its ``type`` (``checkpoint``, ``blob``,
``write``), its schema version ``v`` and every serialized value as ``[serializer type,
base64 bytes]``. Values an ``ExternalRefSerializer`` moved to a blob store come along as
``extblob`` records (``key``, base64 ``data``; format version 2), read from ``--blob-store``
and written to the importing side's ``--blob-store``; ``--without-blobs`` leaves them out
(the header then counts them in ``blobs_left_out``). The items of list values
(``core/items.py``) come as ``item`` records (``d``: hex digest, ``value``: the item's typed
value, or ``["lgd.node", base64 digests]`` for a node; format version 3, written only when
there are some). The effect journal (``langgraph_durable.effects``) comes as ``effect``
records (``task_ns``, ``task_id``, ``name``, ``n``, ``entry``: the stored entry, base64;
format version 4, written only when there are some). Records are copied, not decoded, so
the serializer (and an encryption key) is not needed and an import recreates exactly the
documents that were exported. References inside an encrypted envelope cannot be seen, so
they are neither exported nor refused: copy that store yourself. The objects carried are
those every kind of record names (``admin/referrers.py``: the effect journal's too).

``import`` checks the whole file before it deletes or writes anything
(``cli/import_checks.py``): every identifier of every record as the API checks it (a NUL,
a number where an identifier is text), and every carried object against its sha256; the
error names the line, the record and what was wrong.

The memory store's items are exported apart (``export --store``, format version 5) and
imported by the same ``import``, which tells the files apart by the header
(``cli/store_transfer.py``).
"""

from __future__ import annotations

import base64
import datetime
import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import typer

from ..admin.referrers import REFERRERS, refs_of_documents
from ..core.items import NODE_MAGIC, NODE_TYPE
from ..core.records import (
    SCHEMA_VERSION,
    CheckpointRecord,
    WriteRecord,
    blob_field,
    check_id,
    pack_blob,
    split_field,
)
from ..core.schema import check_not_newer
from ..durable.chunks import split_all, upserts
from ..durable.documents import blob_value_of, checkpoint_doc, record_of, upsert
from ..durable.inline import inline_values, place_values
from ..durable.item_docs import entries, item_doc, upsert_item
from ..durable.write_groups import pending_of, write_docs
from ..errors import CorruptRecordError, InvalidIdentifierError
from ..inspection import storage
from ..io.drivers import run_sync, to_pymongo
from ..plans.effect_journal import effect_doc
from ..plans.history_edits import release_plan
from ..plans.thread_registry import register_plan
from ..serde.external import ExternalRefSerializer, collect_refs
from . import store_transfer
from .import_checks import CHECKS, check_thread_id, naming, verify_blobs
from .session import CliError, command, confirm, session_of
from .store_commands import parse_namespace

FORMAT = "langgraph-durable-export"
FORMAT_VERSION = 4
"""Newest export format: 2 adds ``extblob`` records, 3 ``item`` records, 4 ``effect``
records (each written only when there are some, so an export without them stays readable
by older importers)."""


def _typed(t: tuple[str, bytes] | None) -> list[str] | None:
    return None if t is None else [t[0], base64.b64encode(t[1]).decode()]


def _untyped(v: list[str] | None) -> tuple[str, bytes] | None:
    return None if v is None else (v[0], base64.b64decode(v[1], validate=True))


def export_lines(db: Any, cols: Any, thread_id: str, store: Any = None,
                 without_blobs: bool = False) -> Iterator[str]:
    """The export of ``thread_id`` from MongoDB (flush first), header first. Blob-store
    objects its values refer to (``ExternalRefSerializer``) are read from ``store`` and
    exported too; with ``without_blobs`` they are left out and counted. Raises
    ``CliError`` when there are some, no ``store`` and no ``without_blobs``."""
    q = {"thread_id": thread_id}
    # every collection that can hold a value (admin/referrers.py), chunks reassembled
    docs = {ref.collection: storage.loaded(db, cols, list(db[getattr(cols, ref.collection)]
                                                          .find(q)))
            for ref in REFERRERS}
    cps = sorted((record_of(d) for d in docs["checkpoints"]),
                 key=lambda r: (r.ns, r.checkpoint_id))
    # channel values: blobs documents and those inside checkpoints (durable/inline.py)
    values = dict(map(blob_value_of, docs["blobs"]))
    for d in docs["checkpoints"]:
        values.update(inline_values(d))
    blobs = sorted(values.items(), key=lambda kv: kv[0])
    wrecs = _pending_writes(docs["writes"])
    # a node held by its item on its own record; once though also stored on its own
    items = sorted(dict(e for d in docs["items"] for e in entries(d)).items())
    effects = sorted(docs["effects"],
                     key=lambda d: (d["task_ns"], d["task_id"], d["name"], d["n"]))
    refs = sorted(collect_refs(refs_of_documents(docs)))
    if refs and store is None and not without_blobs:
        raise CliError(f"thread {thread_id!r} refers to {len(refs)} blob-store object(s) "
                       "(ExternalRefSerializer): pass --blob-store to export them with the "
                       "thread, or --without-blobs to leave them out")
    carried = [] if without_blobs else refs
    counts = {"checkpoint": len(cps), "blob": len(blobs), "write": len(wrecs)}
    if items:
        counts["item"] = len(items)
    if effects:
        counts["effect"] = len(effects)
    header: dict[str, Any] = {
        "format": FORMAT,
        "format_version": 4 if effects else 3 if items else 2 if carried else 1,
        "schema_version": SCHEMA_VERSION, "thread_id": thread_id,
        "exported_at": datetime.datetime.now(datetime.timezone.utc).isoformat(),
        "counts": {**counts, **({"extblob": len(carried)} if carried else {})}}
    if without_blobs and refs:
        header["blobs_left_out"] = len(refs)
    yield json.dumps(header)
    for key in carried:
        yield json.dumps({"type": "extblob", "v": SCHEMA_VERSION, "key": key,
                          "data": base64.b64encode(store.get(key)).decode()})
    for digest, item in items:  # before the values naming them
        yield json.dumps({"type": "item", "v": SCHEMA_VERSION, "d": digest.hex(),
                          "value": _typed(item)})
    for r in cps:
        yield json.dumps({
            "type": "checkpoint", "v": SCHEMA_VERSION, "ns": r.ns,
            "checkpoint_id": r.checkpoint_id, "parent_id": r.parent_id, "run_id": r.run_id,
            "checkpoint": _typed(r.checkpoint), "metadata": _typed(r.metadata),
            "md": [list(kv) for kv in r.md_query],
            "blob_fields": [split_field(f)[1:] for f in r.blob_fields]})
    for field, value in blobs:
        ns, channel, version = split_field(field)
        yield json.dumps({"type": "blob", "v": SCHEMA_VERSION, "ns": ns, "channel": channel,
                          "version": version, "value": _typed(value)})
    for (ns, cid), w in wrecs:
        yield json.dumps({
            "type": "write", "v": SCHEMA_VERSION, "ns": ns,
            "checkpoint_id": cid, "task_id": w.task_id, "idx": w.idx,
            "channel": w.channel, "task_path": w.task_path, "seq": w.seq,
            "value": _typed(w.value)})
    for d in effects:
        yield json.dumps({"type": "effect", "v": SCHEMA_VERSION, "task_ns": d["task_ns"],
                          "task_id": d["task_id"], "name": d["name"], "n": d["n"],
                          "entry": base64.b64encode(bytes(d["raw"])).decode()})



def _pending_writes(docs: list[dict[str, Any]]
                   ) -> list[tuple[tuple[str, str], WriteRecord]]:
    """The pending writes the writes documents ``docs`` hold (either form: one per write
    or one per ``put_writes`` call, ``durable/write_groups.py``), each ``(task_id, idx)``
    once by LangGraph's rule, as ``((checkpoint_ns, checkpoint_id), record)`` in
    (ns, checkpoint, task, idx) order."""
    by_cp: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for d in docs:
        by_cp.setdefault((d["checkpoint_ns"], d["checkpoint_id"]), []).append(d)
    return [(cp, w) for cp in sorted(by_cp)
            for _, w in sorted(pending_of(by_cp[cp]).items())]


def parse_export(lines: list[str], where: str) -> tuple[dict[str, Any], dict[str, list[dict]]]:
    """Validate an export: ``(header, {"checkpoint": docs-to-be, ...})`` keyed by kind,
    still without thread ids. Raises ``CliError``/``SchemaVersionError`` before anything
    is written."""
    rows = [(n, line) for n, line in enumerate(lines, 1) if line.strip()]
    if not rows:
        raise CliError(f"{where} is empty")
    try:
        header = json.loads(rows[0][1])
    except (ValueError, RecursionError) as exc:
        raise CliError(f"{where}:1 is not JSON: {exc}") from exc
    if not isinstance(header, dict) or header.get("format") != FORMAT:
        raise CliError(f"{where} is not a langgraph-durable export (no {FORMAT} header)")
    version, counts = header.get("format_version", 0), header.get("counts") or {}
    if isinstance(version, bool) or not isinstance(version, int):
        raise CliError(f"{where}:1: header: format_version must be an integer, got "
                       f"{version!r:.80} (nothing written)")
    if not isinstance(counts, dict):
        raise CliError(f"{where}:1: header: counts must be an object, got {counts!r:.80} "
                       "(nothing written)")
    if version > FORMAT_VERSION:
        raise CliError(f"{where} has export format {header['format_version']}, newer than "
                       f"{FORMAT_VERSION}; upgrade langgraph_durable")
    try:
        thread_id = check_thread_id(header.get("thread_id"))
    except (InvalidIdentifierError, ValueError) as exc:
        raise CliError(f"{where}:1: header: {exc} (nothing written)") from exc
    records: dict[str, list[dict]] = {"checkpoint": [], "blob": [], "write": [],
                                      "extblob": [], "item": [], "effect": []}
    for n, line in rows[1:]:
        try:
            rec = json.loads(line)
            kind, v = rec["type"], rec["v"]
        except (ValueError, KeyError, TypeError, RecursionError) as exc:
            raise CliError(f"{where}:{n}: malformed record ({type(exc).__name__}: {exc})") \
                from exc
        if not isinstance(rec, dict) or isinstance(v, bool) or not isinstance(v, int):
            raise CliError(f"{where}:{n}: malformed record (not an object with an integer "
                           "version 'v')")
        check_not_newer(v, f"{where}:{n}: record", then=" (nothing written)")
        if v < SCHEMA_VERSION or not isinstance(kind, str) or kind not in records:
            raise CliError(f"{where}:{n}: unsupported record (type {kind!r}, version {v})")
        try:
            CHECKS[kind](rec, thread_id)
        except (InvalidIdentifierError, CorruptRecordError, KeyError, TypeError,
                ValueError) as exc:
            problem = f"missing field {exc}" if type(exc) is KeyError else str(exc)
            raise CliError(f"{where}:{n}: {kind} record{naming(kind, rec)} of thread "
                           f"{thread_id!r}: {problem} (nothing written)") from exc
        records[kind].append(rec)
    for kind, count in counts.items():
        if len(records.get(kind, [])) != count:
            raise CliError(f"{where}: header counts {count} {kind} records, file has "
                           f"{len(records.get(kind, []))} (truncated?)")
    return header, records


def documents_of(records: dict[str, list[dict]], thread_id: str) -> dict[str, list[dict]]:
    """MongoDB documents of parsed records for ``thread_id`` (the flusher's shapes)."""
    try:
        cps = [checkpoint_doc(thread_id, CheckpointRecord(
            ns=r["ns"], checkpoint_id=r["checkpoint_id"], parent_id=r["parent_id"],
            checkpoint=_untyped(r["checkpoint"]), metadata=_untyped(r["metadata"]),  # type: ignore[arg-type]
            run_id=r["run_id"], md_query=tuple((k, v) for k, v in r["md"]),
            blob_fields=tuple(blob_field(r["ns"], ch, ver) for ch, ver in r["blob_fields"])))
            for r in records["checkpoint"]]
        # the small values inside the checkpoint introducing them, as the flusher does
        blobs = place_values(thread_id, cps, {
            blob_field(r["ns"], r["channel"], r["version"]): _untyped(r["value"])
            for r in records["blob"]})
        writes = _write_docs(thread_id, records["write"])
        items = [item_doc(thread_id, bytes.fromhex(r["d"]), _stored(_untyped(r["value"])))
                 for r in records["item"]]
        effects = [effect_doc(thread_id, "\x00".join(
            (r["task_ns"], r["task_id"], r["name"], str(int(r["n"])))),
            base64.b64decode(r["entry"], validate=True), 0) for r in records["effect"]]
    except (KeyError, TypeError, ValueError, CorruptRecordError) as exc:
        raise CliError(f"malformed record in export: {type(exc).__name__}: {exc}") from exc
    return {"checkpoints": cps, "blobs": blobs, "writes": writes, "items": items,
            "effects": effects}


def _write_docs(thread_id: str, records: list[dict]) -> list[dict]:
    """The writes documents of exported write records: one per call (a task's writes of
    one ``seq``, ``write_groups.write_docs``) of each checkpoint, chunked later as the
    other documents."""
    by_cp: dict[tuple[str, str], list[WriteRecord]] = {}
    for r in records:
        by_cp.setdefault((r["ns"], r["checkpoint_id"]), []).append(WriteRecord(
            r["task_id"], int(r["idx"]), r["channel"], _untyped(r["value"]),  # type: ignore[arg-type]
            r["task_path"], int(r["seq"])))
    out: list[dict] = []
    for (ns, cid), recs in by_cp.items():
        out += write_docs(thread_id, ns, cid, recs)
    return out


def _stored(value: tuple[str, bytes] | None) -> bytes:
    """The stored form of an exported item or node (``core/items.py``)."""
    if value is None:
        raise ValueError("an item record without a value")
    if value[0] == NODE_TYPE:
        return NODE_MAGIC + value[1]
    return pack_blob(value)


def _first_header(lines: list[str]) -> dict[str, Any] | None:
    """The header of a store export (its first non-blank line), None for any other."""
    first = next((line for line in lines if line.strip()), "")
    try:
        header = json.loads(first)
    except (ValueError, RecursionError):
        return None
    return header if store_transfer.is_store_export(header) else None


WITHOUT_BLOBS = typer.Option(False, "--without-blobs", help="leave blob-store objects "
                             "(ExternalRefSerializer values) out; reads of them fail "
                             "where the store lacks them")


def _cipher_of(serde: Any) -> Any:
    """The cipher of an encrypting ``ExternalRefSerializer`` (None for any other)."""
    if isinstance(serde, ExternalRefSerializer) and serde.encrypted:
        return getattr(serde.inner, "cipher", None)
    return None


def _store(session: Any, saver: Any) -> Any:
    return session.blob_store() or getattr(saver.serde, "store", None)


@command
def export(ctx: typer.Context,
           thread: str | None = typer.Argument(None, metavar="[THREAD]", show_default=False,
                                               help="thread_id (not with --store)"),
           output: str = typer.Option("-", "--output", "-o", help="file (default stdout)"),
           without_blobs: bool = WITHOUT_BLOBS,
           store: bool = typer.Option(False, "--store", help="export the long-term memory "
                                      "store's items instead of a thread"),
           namespace: str = typer.Option("", "--namespace", help="with --store: only the "
                                         "items under these labels (a.b)")) -> None:
    """Write every stored record of THREAD as JSON Lines (after flushing the outbox), with
    the blob-store objects its values refer to (read from --blob-store; without it a
    thread that has some is refused unless --without-blobs). With --store instead: the
    memory store's live items (every one, or those under --namespace) with their times,
    TTL and embeddings."""
    if store == (thread is not None):
        raise CliError("give a THREAD to export, or --store for the memory store's items")
    if namespace and not store:
        raise CliError("--namespace selects store items: it goes with --store")
    if without_blobs and store:
        raise CliError("--without-blobs goes with a THREAD: store items refer to no blobs "
                       "(their values are in the export file)")
    session = session_of(ctx)
    saver = session.saver(flusher=True)
    if thread is not None and not storage.thread_exists(saver.context, session.clients,
                                                        thread):
        raise CliError(f"thread {thread!r} not found")
    saver.flush()
    if thread is None:
        prefix = parse_namespace(namespace, what="--namespace", empty=True)
        lines = list(store_transfer.export_lines(
            session.clients.db, saver.context.collections.store, prefix,
            saver.context.clock.time_ns() // 1_000_000))
        what = "store items" + (f" under {namespace}" if namespace else "")
    else:
        lines = list(export_lines(session.clients.db, saver.context.collections, thread,
                                  _store(session, saver), without_blobs))
        what = f"records of {thread}"
    text = "\n".join(lines) + "\n"
    if output == "-":
        sys.stdout.write(text)
    else:
        Path(output).write_text(text)
        typer.echo(f"exported {len(lines) - 1} {what} to {output}", err=True)


@command
def import_(ctx: typer.Context,
            file: str = typer.Argument(..., metavar="FILE", help="export file ('-' = stdin)"),
            thread: str = typer.Option(None, "--thread", help="import under this thread_id "
                                       "(default: the exported one)"),
            yes: bool = typer.Option(False, "--yes", "-y", help="replace an existing thread "
                                     "without asking"),
            without_blobs: bool = WITHOUT_BLOBS) -> None:
    """Recreate a thread from an export; an existing thread of that id is replaced. The
    blob-store objects it carries go to --blob-store first (required when it has some,
    unless --without-blobs). A store export (export --store) puts its items into the
    memory store instead: items of the same namespace and key are replaced (asking
    first), nothing is deleted."""
    try:
        lines = (sys.stdin.read() if file == "-" else Path(file).read_text()).splitlines()
    except OSError as exc:
        raise CliError(f"cannot read {file}: {exc.strerror}") from exc
    if _first_header(lines) is not None:  # a store export
        if thread is not None:
            raise CliError(f"{file} is a store export: --thread names a thread's import")
        _header, items = store_transfer.parse(lines, file)  # every record checked
        typer.echo(store_transfer.import_store(session_of(ctx).saver(flusher=True), items,
                                               file, yes))
        return
    header, records = parse_export(lines, file)  # every record checked as the API does
    try:
        target = check_id("thread_id", thread) if thread is not None else header["thread_id"]
    except InvalidIdentifierError as exc:
        raise CliError(f"--thread: {exc}") from exc
    docs = documents_of(records, target)
    session = session_of(ctx)
    saver = session.saver(flusher=True)
    extblobs = [] if without_blobs else records["extblob"]
    store = _store(session, saver) if extblobs else None
    if extblobs and store is None:
        raise CliError(f"{file} carries {len(extblobs)} blob-store object(s): pass "
                       "--blob-store (the store the importing application reads) or "
                       "--without-blobs")
    if extblobs:  # before anything is deleted or written
        verify_blobs({**records, "extblob": extblobs}, _cipher_of(saver.serde))
    if storage.thread_exists(saver.context, session.clients, target):
        confirm(f"thread {target!r} exists; replace it with {file}?", yes)
    for rec in extblobs:  # before any reference to them is written
        assert store is not None
        store.put_if_absent(rec["key"], base64.b64decode(rec["data"], validate=True))
    saver.delete_thread(target)
    saver.flush()
    sec, usec = session.clients.redis.time()  # stored now: writes naming them are not
    for d in (*docs["checkpoints"], *docs["blobs"], *docs["writes"],  # (late writes of a
              *docs["items"]):
        d["put_ms"] = int(sec) * 1000 + int(usec) // 1000  # deleted thread are not taken)
    cols, db = saver.context.collections, session.clients.db
    effects = docs.pop("effects")
    # registered before MongoDB holds it, so a complete registry never lacks it
    run_sync(register_plan(saver.context, target), session.clients)
    chunks: list[dict] = []
    for kind in docs:  # values over chunks.THRESHOLD_BYTES go to the chunks collection
        docs[kind], more = split_all(kind, docs[kind])
        chunks += more
    if chunks:
        db[cols.chunks].bulk_write([to_pymongo(m) for m in upserts(chunks)], ordered=False)
    if docs["items"]:  # the flusher's order, after the chunks
        db[cols.items].bulk_write([to_pymongo(upsert_item(d)) for d in docs["items"]],
                                  ordered=False)
    for kind in ("blobs", "writes", "checkpoints"):
        if docs[kind]:
            db[getattr(cols, kind)].bulk_write([to_pymongo(upsert(d)) for d in docs[kind]],
                                               ordered=False)
    if effects:  # the effect journal (its Redis hash went with delete_thread)
        for d in effects:
            d["put_ms"] = int(sec) * 1000 + int(usec) // 1000
        db[cols.effects].bulk_write(
            [to_pymongo(upsert(d)) for d in effects], ordered=False)
    # the target's hot keys would shadow MongoDB (kept until what they hold is flushed)
    run_sync(release_plan(saver.context, target), session.clients)
    n = sum(len(records[k]) for k in ("checkpoint", "blob", "write", "item", "effect"))
    typer.echo(f"imported {n} records into thread {target}"
               + (f" and {len(extblobs)} blob-store objects" if extblobs else ""))
