"""The ``meta`` collection's documents and their queries (sans-I/O): the deployed schema
version with the owner of the collections (``SCHEMA_DOC_ID``, ``plans/migrations.py``
``record_version_plan``), and the cursors of the bulk migrations (``_id``
``migration:<kind>`` and the admin passes' own), each ``{after, target, at}``: the last
``_id`` rewritten, the version it was rewritten to, when.
"""

from __future__ import annotations

import datetime

from ..core.schema import NEWEST_DOCUMENT_VERSION, SCHEMA_VERSION

SCHEMA_DOC_ID = "schema"
"""``_id`` of the ``meta`` document recording the deployed schema version."""


def version_seen(key_prefix: str, now: datetime.datetime) -> dict[str, object]:
    """Update of the schema document by a package of ``SCHEMA_VERSION`` set up at
    ``now``: the stored ``v`` only grows (``$max``); a new document records
    ``created_at`` and ``key_prefix`` as the collections' owner; ``seen.<version>``
    the time."""
    return {"$max": {"v": SCHEMA_VERSION},
            "$setOnInsert": {"created_at": now, "key_prefix": key_prefix},
            "$set": {f"seen.{SCHEMA_VERSION}": now}}


def without_owner() -> dict[str, object]:
    """Filter of the schema document when it records no owner (set up before owners
    were recorded)."""
    return {"_id": SCHEMA_DOC_ID, "key_prefix": {"$exists": False}}


def owner_set(key_prefix: str) -> dict[str, object]:
    """Update recording ``key_prefix`` as the collections' owner."""
    return {"$set": {"key_prefix": key_prefix}}


def old_query() -> dict[str, object]:
    """MongoDB filter of documents older than ``SCHEMA_VERSION`` (no ``v`` means 1)."""
    q: dict[str, object] = {"v": {"$lt": SCHEMA_VERSION}}
    return {"$or": [q, {"v": {"$exists": False}}]} if SCHEMA_VERSION > 1 else q


def newer_query() -> dict[str, object]:
    """MongoDB filter of documents this package cannot read: a version above
    ``schema.NEWEST_DOCUMENT_VERSION`` (the forms up to it, ``CHUNKED_VERSION``,
    ``ITEMS_VERSION``, ``INLINE_VERSION``, ``WRITES_GROUP_VERSION`` and
    ``HOSTED_NODE_VERSION``, are the current format with chunked fields, a manifest, inline
    values, the writes of one call or an item holding its node, which reads take as they
    are)."""
    return {"v": {"$gt": NEWEST_DOCUMENT_VERSION}}


def cursor_saved(after: object, now: datetime.datetime,
                 target: int | None = None) -> dict[str, object]:
    """Update of a migration's cursor document: ``after`` (the last ``_id`` done), the
    ``target`` version (left out when None) and the time ``at``."""
    fields: dict[str, object] = {"after": after}
    if target is not None:
        fields["target"] = target
    fields["at"] = now
    return {"$set": fields}
