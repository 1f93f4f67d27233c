"""The binding of a key prefix to one MongoDB database and collection_prefix (sans-I/O).

The threads of a key prefix live in Redis under the prefix and in MongoDB in the
collections of one ``(database, collection_prefix)``. A process configured with the same
prefix and another database (a flusher worker started with a bare ``MONGODB_URL``, a
second saver) would flush them where the application never reads them: once Redis loses
them, they are gone from the application's view. A process with another number of outbox
partitions would look for every thread under other Redis keys (a thread's keys carry its
partition's hash tag) and never read the other partitions' streams. So the three are
recorded where every saver and flusher worker of the prefix meets them, in Redis
(``hot.keys.binding_key``: ``{<prefix>:binding}``, a hash of ``database``,
``collection_prefix``, ``partitions``, ``by``, ``at``), and a process configured otherwise
refuses to start with ``ConfigurationError``.

``check_plan`` reads the binding (writes nothing); ``bind_plan`` records it when absent
(BIND, ``hot/binding_scripts.py``: one atomic script, the first process wins) and
compares. The other direction (the
collections of a database belong to one key prefix) is the owner recorded in MongoDB's
``meta`` document (``migrations.record_version_plan``).
"""

from __future__ import annotations

import datetime
import os
import socket

from ..core.ops import Pipeline, Plan, ask
from ..errors import ConfigurationError, CorruptRecordError
from ..hot.binding_scripts import BINDING_FIELDS, BindArgs, Binding
from ..hot.keys import binding_key
from .context import Context

FIELDS = BINDING_FIELDS
"""The fields of the binding hash, in the order ``BIND`` returns them
(``hot.binding_scripts.BINDING_FIELDS``)."""


def _matches(found: Binding, ctx: Context) -> bool:
    """True when ``found`` names the database, collection_prefix and (when recorded) the
    number of outbox partitions of ``ctx``."""
    c = ctx.config
    return found.matches(c.database, c.collection_prefix, ctx.partitions)


def describe_process(role: str) -> str:
    """``"<role> pid <pid> on host <hostname>"``: what ``bind_plan`` records as ``by``."""
    return f"{role} pid {os.getpid()} on host {socket.gethostname()}"


def mismatch_error(ctx: Context, found: Binding, who: str) -> ConfigurationError:
    """The ``ConfigurationError`` for ``who`` (``"this saver"``, ``"this flusher
    worker"``...) configured with ``ctx``'s database and collection_prefix while the key
    prefix is bound to ``found``: names the key prefix, both sides and the way out."""
    c, key = ctx.config, binding_key(ctx.config.key_prefix)
    when = ("" if found.at_ms is None else " at " + datetime.datetime.fromtimestamp(
        found.at_ms / 1000, tz=datetime.timezone.utc).isoformat(timespec="seconds"))
    if (found.database, found.collection_prefix) == (c.database, c.collection_prefix):
        return ConfigurationError(
            f"key_prefix {c.key_prefix!r} has {found.partitions} outbox partition(s) "
            f"(recorded in Redis key {key!r} by {found.by or 'an unknown process'}{when}), "
            f"but {who} is configured with {ctx.partitions} (outbox_partitions, "
            "LGD_OUTBOX_PARTITIONS; unset: 1 on a single Redis or Sentinel, 16 on a "
            "cluster): a thread's Redis keys and outbox stream depend on that number, so it "
            "would neither see the threads the other processes wrote nor flush their "
            f"outbox. Give {who} outbox_partitions={found.partitions}. To change the number, "
            "stop every process of the key prefix, drain the outbox (`langgraph-durable "
            f"flush`), delete the Redis key {key!r}, then start with the new number.")
    return ConfigurationError(
        f"key_prefix {c.key_prefix!r} belongs to MongoDB database {found.database!r} with "
        f"collection_prefix {found.collection_prefix!r} (recorded in Redis key {key!r} by "
        f"{found.by or 'an unknown process'}{when}), but {who} is configured with database "
        f"{c.database!r} and collection_prefix {c.collection_prefix!r}: it would flush or "
        "read the threads of this key prefix where the other processes using it never "
        f"look. Give {who} database={found.database!r} (the database of the MongoDB URL, "
        f"--database or LGD_DATABASE) and collection_prefix={found.collection_prefix!r}, "
        "or its own key_prefix. If the threads of this key prefix really moved to another "
        f"database, delete the Redis key {key!r} while no process uses key_prefix "
        f"{c.key_prefix!r}, then start again.")


def check_plan(ctx: Context, who: str) -> Plan[Binding | None]:
    """Read the binding of ``ctx``'s key prefix (one round trip, nothing written); raises
    ``ConfigurationError`` (``mismatch_error``) when it names another database,
    collection_prefix or number of outbox partitions, ``CorruptRecordError`` naming the
    key when it is not a hash. Returns it, or None when the prefix is not bound yet."""
    key = binding_key(ctx.config.key_prefix)
    (values,) = yield Pipeline([["HMGET", key, *FIELDS]], raise_on_error=False)
    if isinstance(values, Exception):
        if not str(values).startswith("WRONGTYPE"):
            raise values
        raise CorruptRecordError(
            f"the binding of key_prefix {ctx.config.key_prefix!r} (Redis key {key!r}) holds "
            "another type than a hash, so which MongoDB database the prefix's threads "
            f"belong to cannot be read: delete the Redis key {key!r} while no process uses "
            "the key prefix (the next one to start binds it again)", tier="hot", key=key)
    if all(v is None for v in values):
        return None
    found = Binding.of(values)
    if not _matches(found, ctx):
        raise mismatch_error(ctx, found, who)
    return found


def bind_plan(ctx: Context, who: str, by: str) -> Plan[Binding]:
    """Bind ``ctx``'s key prefix to its database, collection_prefix and number of outbox
    partitions unless it is bound
    already (one atomic script, one round trip: of two processes starting at once, the
    first wins), recording ``by`` and the time of ``ctx.clock``. Raises
    ``ConfigurationError`` (``mismatch_error``) when it is bound to another pair. Returns
    the binding."""
    c = ctx.config
    found = yield from ask(BindArgs(
        binding_key(c.key_prefix), c.database, c.collection_prefix, by,
        ctx.clock.time_ns() // 1_000_000, ctx.partitions).op())
    if not _matches(found, ctx):
        raise mismatch_error(ctx, found, who)
    return found
