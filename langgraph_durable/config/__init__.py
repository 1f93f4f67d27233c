"""Typed configuration of a DurableSaver, validated once (pydantic)."""

from __future__ import annotations

import typing
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator
from pymongo import WriteConcern

_DATABASE_BAD = frozenset("/\\. \"$\0")
"""Characters MongoDB refuses in a database name."""

MAX_TTL_MINUTES = 100 * 366 * 24 * 60
"""Longest TTL of retention by policy, in minutes (100 years): an expiry ``at + TTL`` in
milliseconds stays a 64-bit integer MongoDB stores and a date Python can show. A longer
TTL is refused where it is given (``lgd_ttl_minutes``, ``set_thread_ttl``,
``ThreadTTL.default_ttl``); to keep a thread for good, pin it or name no TTL."""

MAX_STATE_VERSION = 2**63 - 1
"""The largest ``state_version``: a 64-bit signed int, as msgpack metadata and MongoDB
store it."""


class ThreadTTL(BaseModel):
    """Retention by policy (``DurableConfig.ttl``), the Agent Server's ``checkpointer.ttl``
    of ``langgraph.json``: a thread idle longer than its TTL is swept.

    Attributes:
        strategy: what a sweep does to an expired thread: ``"delete"`` (default) deletes
            it in both tiers (``delete_thread``: tombstones, effect journal and all);
            ``"keep_latest"`` prunes it to each namespace's newest checkpoint
            (``prune(strategy="keep_latest")``: DeltaChannel ancestors and the newest
            checkpoint's pending writes stay).
        default_ttl: minutes a thread lives after its last activity (a ``put`` or
            ``put_writes``) when its runs name no TTL of their own (``config
            ["configurable"]["lgd_ttl_minutes"]``); None: such threads never expire. More
            than 0 and at most ``MAX_TTL_MINUTES`` (100 years; a number, not a bool).
            Counts only activity flushed while the option is set (as the Agent Server:
            threads written before keep no expiry until their next write).
        sweep_interval_minutes: minutes between two sweeps of a deployment (one sweeper at
            a time across processes: a lease in MongoDB). Default 5, more than 0.
        sweep_limit: most threads one sweep acts on (default 1000, at least 1); the rest
            wait for the next sweep.
        lease_s: seconds a sweeper's lease lasts unless renewed (it is renewed before each
            thread): a sweeper killed mid-sweep is replaced this long after its last
            renewal at most. Default 60, from 1 to 3600; keep it above the longest delete
            of one thread.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    strategy: Literal["delete", "keep_latest"] = "delete"
    default_ttl: float | None = Field(default=None, gt=0, le=MAX_TTL_MINUTES)
    sweep_interval_minutes: float = Field(default=5.0, gt=0, le=7 * 24 * 60)
    sweep_limit: int = Field(default=1000, ge=1, le=100_000)
    lease_s: float = Field(default=60.0, ge=1, le=3600)

    @field_validator("default_ttl", "sweep_interval_minutes", "sweep_limit", "lease_s",
                     mode="before")
    @classmethod
    def _no_bool(cls, v: Any) -> Any:
        if isinstance(v, bool):  # True would be 1 minute (or 1 thread), never meant
            raise ValueError(f"must be a number, not the bool {v}")
        return v


class DurableConfig(BaseModel):
    """Options of :class:`~langgraph_durable.DurableSaver`; every unit is in the name.

    Attributes:
        key_prefix: namespace of every Redis key and of the outbox stream, so several
            applications can share one Redis: letters, digits, ``_``, ``.`` and ``-``
            (no ``:``, so no two prefixes and thread ids can make the same key). Keys of
            a thread share the hash tag ``{<key_prefix>:<len>:<thread>}`` (one Redis
            Cluster slot per thread).
        database: MongoDB database name.
        collection_prefix: prefix of the MongoDB collections (``<prefix>checkpoints``,
            ``<prefix>blobs``, ``<prefix>writes``, ``<prefix>chunks``, ``<prefix>meta``,
            ``<prefix>items``, ``<prefix>tombstones``).
        durability: ``"write_behind"`` (default: a call returns once Redis committed;
            MongoDB follows within the flush lag) or ``"strict"`` (a call also waits for
            MongoDB's acknowledgement before returning). A strict call that raises after
            Redis committed (MongoDB down, write concern not met) has still stored its
            checkpoint: it is read back and reaches MongoDB through the outbox, as after
            any timeout; the error means "not confirmed durable", not "not written".
        flusher: ``"auto"`` runs the in-process flusher (a thread with sync clients, an
            asyncio task with async-only clients); ``"process"`` runs it as one child
            process the saver starts, supervises (restarted with backoff if it dies) and
            stops on ``close`` (``outbox/process.py``; needs ``from_urls`` or
            ``from_conn_string``: the child connects with the same URLs), so the flusher
            takes no CPU or GIL of the application's process; ``"off"`` leaves the
            outbox to standalone workers (``python -m langgraph_durable.outbox.worker``).
        flush_interval_s: longest time, in seconds, the flusher blocks waiting for new
            outbox entries before it looks again (bounds idle lag).
        flush_batch_size: most outbox entries moved to MongoDB in one bulk write round.
        flush_linger_s: seconds the flusher waits after a round that took fewer than a
            quarter of ``flush_batch_size`` entries (light load), so the next round writes
            more checkpoints per bulk write (fewer, larger MongoDB commands: less load on
            MongoDB, and fewer rounds competing with the application's threads for this
            process's GIL). Adds up to this much to the flush lag (none once rounds take a
            quarter batch); ``flush()`` cuts it short; 0 starts the next round at once.
            Measured on 2 shared cores (docs/storage.md): W5's lag p99 at half the
            flusher's capacity 0.17 s with 0, 0.29 s with 0.05, 0.42 s with 0.1, ~0.55 s
            with 0.2; the W1 agent loop 1.39x InMemorySaver's time with 0.05 s, 1.26-1.31x
            with 0.1 s and 1.16-1.28x with 0.2 s (same-process A/B runs).
        claim_idle_s: seconds an entry may stay pending with a consumer before another
            flusher claims it (``XAUTOCLAIM``), e.g. after the first one died. This is
            the wait for consumers without a heartbeat (an older version's); a flusher
            whose heartbeat lapsed (``heartbeat_ttl_s``) is known dead sooner.
        heartbeat_ttl_s: seconds a flusher's heartbeat lasts in the heartbeat registry
            (``outbox/heartbeat.py``); a thread (or task) beside the flush loop refreshes
            it every third of that, so a stalled round does not let it lapse. Once it has
            lapsed (the process was killed or frozen this long) live flushers claim the
            entries it holds that are idle this long at once, instead of after
            ``claim_idle_s``, and remove it from the consumer group. Default 2.0; from 0.1
            to 3600. Keep it above the longest pause a live process can make (a
            garbage collection, a long call holding the GIL): entries of a flusher paused
            past it are flushed twice (harmless: upserts), as past ``claim_idle_s``.
        max_outbox: most outbox entries waiting for MongoDB; past it, ``on_outbox_full``
            applies. 0 means no bound. With several partitions each holds at most its
            share (``max_outbox / outbox_partitions``, rounded up).
        outbox_partitions: number of outbox streams P; each thread belongs to one
            (``crc32(thread_id) mod P``) and shares its hash tag, so a put and its outbox
            entry are one script on a Redis Cluster (``hot/keys.py``). ``None`` (default):
            1 on a single Redis or Sentinel, 16 on a cluster; a cluster needs at least 2.
            Change it only with an empty outbox (a thread's keys move with it).
        on_outbox_full: ``"block"`` (wait up to ``outbox_full_timeout_s`` seconds, then
            raise ``OutboxFullError``) or ``"raise"`` (raise at once).
        outbox_full_timeout_s: seconds a put may wait for room in the outbox.
        hot_ttl_s: seconds a thread's Redis keys live after everything in them reached
            MongoDB; a new write removes the TTL again. 0 keeps them forever.
        hot_max_checkpoints: the hot window: per thread and checkpoint_ns, Redis keeps
            the newest this many checkpoints once they reached MongoDB, plus every
            checkpoint whose entries are not flushed yet; older ones (and the channel
            values no kept checkpoint names) leave Redis when a flush settles once a
            namespace holds ``max(16, N / 2)`` more than that, and are read from MongoDB.
            Default 50; 0 keeps all (until ``hot_ttl_s``). The items of list values stay
            while the thread is hot.
        delete_flush_timeout_s: seconds a delete/prune/copy waits for the outbox to drain
            before it acts on both tiers (raises ``FlushTimeoutError`` past it).
        tombstone_ttl_s: seconds a delete's tombstones stay in MongoDB (the
            ``{collection_prefix}tombstones`` collection, a TTL index on ``deleted_at``;
            MongoDB removes expired ones within about a minute). Redis keeps them 7 days
            (``hot.keys.TOMBSTONE_TTL_S``) and answers from them on the call path; MongoDB's
            are asked only when Redis cannot answer: a write naming a checkpoint that Redis
            neither holds nor has a tombstone of (Redis lost its data, its tombstones
            expired, the hot window let the checkpoint go). A ``put``/``put_writes`` naming
            a checkpoint deleted within this time raises ``ThreadDeletedError``; later, it is
            taken as InMemorySaver takes it. Default 30 days (2592000); at least 60.
            ``setup()`` changes the index of an existing deployment to the value given.
        close_drain_timeout_s: seconds ``close()`` (leaving the context manager) waits for
            the outbox to reach MongoDB; past it the saver closes anyway and what is left
            stays in Redis for the next flusher (keep it under your termination grace).
        max_value_bytes: largest serialized value (channel value, pending write,
            checkpoint or metadata), in bytes, accepted; bigger raises
            ``SerializationError`` naming thread, channel and size before anything is
            written. Default 256 MiB (268435456); at most 512 MiB - 1 KiB (a Redis string
            holds at most 512 MiB). Values over 8 MiB are stored in MongoDB in chunks
            (``{collection_prefix}chunks``), since one document holds at most 16 MiB.
        queryable_metadata: store top-level scalar metadata in plain form in MongoDB so
            ``list(filter=...)`` narrows the query on the server. ``None`` = on unless
            the serializer is an ``EncryptedSerializer`` (then metadata stays encrypted
            and filters apply after decoding).
        on_concurrent_run: what a ``put`` does when its run read the thread's latest
            checkpoint and another run has extended the thread since (two processes invoking
            one ``thread_id`` at once): ``"raise"`` (default) refuses it with
            ``ConcurrentRunError`` and writes nothing; ``"fork"`` stores it as a sibling
            branch, as InMemorySaver does (the latest state then shows one run only).
        write_concern_w: MongoDB write concern ``w`` of every write the saver makes
            (flusher bulk writes, strict-mode writes, deletes, copies): ``"majority"``
            (default) or a number of members. ``1`` trusts the primary's acknowledgement
            alone, which a failover can roll back (then an entry already removed from the
            outbox is lost).
        write_concern_j: wait for the on-disk journal before MongoDB acknowledges (default
            True; with False an acknowledged write can be lost if mongod stops).
        write_concern_timeout_s: seconds MongoDB may wait for ``w`` members before it
            answers with a write concern error (the flusher retries; a strict-mode call
            raises). 0 waits without limit.
        redis_max_connections: size of the Redis connection pool of clients built by
            ``from_urls`` (per client; calls beyond it wait for a free connection).
        socket_timeout_s: Redis socket timeout for clients built by ``from_urls``.
        redis_min_replicas: Redis replicas that must hold a ``put``/``put_writes`` before
            it returns (default 0: the primary's answer is enough, and a failover can
            lose what reached no replica yet). With n > 0 the script and ``WAIT n`` go in
            one pipeline on the connection that ran the script (the primary of the
            thread's slot on a cluster: still one round trip, plus the replication wait);
            fewer than n replicas within ``redis_wait_timeout_s`` raises
            ``ReplicationTimeoutError`` (the data IS stored on the primary and in the
            outbox). ``WAIT`` makes a loss unlikely, not impossible: Redis replication
            stays asynchronous, and a replica that was not promoted may hold the write.
        redis_wait_timeout_s: seconds ``WAIT`` may block for ``redis_min_replicas``
            (millisecond resolution, more than 0: Redis reads ``WAIT n 0`` as "forever").
        server_selection_timeout_s: MongoDB server selection timeout for clients built
            by ``from_urls``.
        blob_timeout_s: seconds an ``S3BlobStore`` that builds its own boto3 client waits
            to connect to the S3 endpoint and for each read from it (botocore's
            ``connect_timeout`` and ``read_timeout``, 60 s each by default). Default 10.
        blob_retries: retries of a failed S3 request by such a client after its first
            attempt (botocore's ``standard`` retry mode, ``total_max_attempts`` =
            ``blob_retries + 1``). Default 2. A request to an endpoint that accepts and
            never answers raises ``BlobStoreError`` after at most about ``(blob_timeout_s
            + 1) * (blob_retries + 1) + 2 ** blob_retries - 1`` seconds: each attempt waits
            ``blob_timeout_s`` for the answer (an upload first waits up to 1 s for the
            endpoint's ``100 Continue``), then botocore backs off before the next (at most
            ``2 ** (n - 1)`` s before retry n); with the defaults about 36 s, where
            botocore's own defaults take minutes. An endpoint that does not accept at all
            adds up to ``blob_timeout_s`` per attempt to connect. Each whole request is
            also held to a deadline of ``(2 * blob_timeout_s + 1 + bytes / 1 MiB/s) *
            (blob_retries + 1) + backoff`` seconds (``S3BlobStore.deadline_s``), so an
            endpoint that trickles its answer cannot hold it longer. A saver applies these two
            options, when they are set (as
            keywords, ``config=`` or ``LGD_BLOB_TIMEOUT_S``/``LGD_BLOB_RETRIES``), to the
            ``S3BlobStore`` of its ``ExternalRefSerializer`` unless that store was given a
            client or the same argument itself (``S3BlobStore.use_bounds``).
        effect_checkpoint_wait_s: seconds ``effects.once``/``aonce`` and journaled model
            calls wait, before calling their function, for the checkpoint their task runs
            from to be stored (LangGraph's default ``durability="async"`` stores it while
            the step's tasks already run). Default 60. Waited without I/O when this
            process stored it; ``EffectCheckpointError`` (function not called) when it is
            not stored in time or its put failed. Not waited with ``durability="exit"``
            (the run stores no checkpoint before it ends, so a crash loses the run and
            ``once`` protects re-executions within it only), nor in a subgraph compiled
            with ``checkpointer=False`` (it stores none).
        list_items: store plain non-empty ``list`` values (channel values and pending
            writes, e.g. ``messages``) as content-addressed items (``core/items.py``): each
            element once per thread, the value as a manifest of digests, so a growing
            conversation costs linear bytes. Default True; False stores lists whole.
        item_cache_bytes: bytes of serialized LangChain messages (pydantic models) kept
            per saver to skip serializing the same unchanged message object again at the
            next step (compared to a copy with ``==``); 0 serializes every item each time.
        item_digest_key: secret key (text, at least 16 characters) of the item digests
            when the serializer encrypts: the digests are keyed BLAKE2b, never a plain hash
            of plaintext. Default: derived from ``LANGGRAPH_AES_KEY`` or the key of
            ``EncryptedSerializer.from_pycryptodome_aes``; without any, lists are stored
            whole when the serializer encrypts.
        vector_search: where ``DurableStore``'s semantic search runs, chosen when the
            store sets up (``plans/store_vectors.py``): ``"auto"`` (default) the Redis
            Query Engine when the Redis has it (Redis 8, Redis Stack, Valkey with
            valkey-search), else ``"exact"``; ``"exact"`` every candidate scored in the
            application (NumPy); ``"redis"`` an HNSW (or FLAT) index in Redis, refused
            with ``ConfigurationError`` on a Redis without the query engine;
            ``"mongodb"`` MongoDB ``$vectorSearch``, not implemented: refused, saying
            what the server answered. The saver itself does not read it.
        state_version: the application's current state version (an int >= 1), stamped
            into the metadata of every checkpoint stored (key ``lgd_state_version``);
            older checkpoints are migrated on read by the saver's ``state_migrations``,
            newer ones refused on resume (``core/state_versions.py``). A call's
            ``config["configurable"]["state_version"]`` overrides it. Default None:
            nothing stamped, nothing checked.
        unversioned_state_version: the state version a checkpoint without
            ``lgd_state_version`` is read as (those stored before versions were used).
            Default 1.
        newer_state: what ``list`` and the delta-channel history do with a checkpoint of a
            newer state version than ``state_version``: ``"raise"`` (default,
            ``StateVersionError``) or ``"read"`` (returned as stored, not migrated).
            ``get_tuple``, the resume path, always raises for one.
        ttl: retention by policy, a ``ThreadTTL`` (or its dict: ``{"strategy":
            "delete", "default_ttl": 43200, "sweep_interval_minutes": 60}``, as
            ``langgraph.json``'s ``checkpointer.ttl``; ``LGD_TTL`` takes the same JSON).
            The flusher records each thread's last activity and expiry in MongoDB
            (``<collection_prefix>retention``) from the outbox entries it copies (no cost
            on ``put``), and the sweeper beside every flusher (in-process, ``flusher=
            "process"``, ``langgraph-durable flusher``, ``python -m
            langgraph_durable.outbox.worker``) sweeps expired threads every
            ``sweep_interval_minutes``, one at a time. Default
            None: nothing recorded, nothing swept (``plans/retention_policy.py``).
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    key_prefix: str = Field(default="lgd", min_length=1, max_length=64,
                            pattern=r"^[A-Za-z0-9_.\-]+$")
    database: str = Field(default="langgraph_durable", min_length=1)
    collection_prefix: str = ""
    durability: Literal["write_behind", "strict"] = "write_behind"
    flusher: Literal["auto", "off", "process"] = "auto"
    flush_interval_s: float = Field(default=0.05, gt=0, le=60)
    flush_batch_size: int = Field(default=500, ge=1, le=10_000)
    flush_linger_s: float = Field(default=0.1, ge=0, le=10)
    claim_idle_s: float = Field(default=5.0, gt=0)
    heartbeat_ttl_s: float = Field(default=2.0, ge=0.1, le=3600)
    max_outbox: int = Field(default=100_000, ge=0)
    outbox_partitions: int | None = Field(default=None, ge=1, le=1024)
    on_outbox_full: Literal["block", "raise"] = "block"
    outbox_full_timeout_s: float = Field(default=10.0, ge=0)
    hot_ttl_s: int = Field(default=24 * 3600, ge=0)
    hot_max_checkpoints: int = Field(default=50, ge=0)
    delete_flush_timeout_s: float = Field(default=30.0, gt=0)
    tombstone_ttl_s: int = Field(default=30 * 24 * 3600, ge=60, le=10 * 366 * 24 * 3600)
    close_drain_timeout_s: float = Field(default=10.0, ge=0)
    max_value_bytes: int = Field(default=256 * 1024 * 1024, gt=0, le=512 * 1024 * 1024 - 1024)
    queryable_metadata: bool | None = None
    on_concurrent_run: Literal["raise", "fork"] = "raise"
    write_concern_w: Literal["majority"] | int = Field(default="majority")
    write_concern_j: bool = True
    write_concern_timeout_s: float = Field(default=10.0, ge=0, le=86_400)
    redis_max_connections: int = Field(default=256, ge=1)
    socket_timeout_s: float = Field(default=5.0, gt=0)
    redis_min_replicas: int = Field(default=0, ge=0, le=100)
    redis_wait_timeout_s: float = Field(default=1.0, ge=0.001, le=3600)
    server_selection_timeout_s: float = Field(default=5.0, gt=0)
    blob_timeout_s: float = Field(default=10.0, gt=0, le=3600)
    blob_retries: int = Field(default=2, ge=0, le=10)
    effect_checkpoint_wait_s: float = Field(default=60.0, gt=0, le=3600)
    list_items: bool = True
    item_cache_bytes: int = Field(default=64 * 1024 * 1024, ge=0)
    item_digest_key: str | None = Field(default=None, min_length=16, repr=False)
    vector_search: Literal["auto", "exact", "redis", "mongodb"] = "auto"
    state_version: int | None = Field(default=None, ge=1)
    unversioned_state_version: int = Field(default=1, ge=1)
    newer_state: Literal["raise", "read"] = "raise"
    ttl: ThreadTTL | None = None

    @field_validator("write_concern_w", mode="before")
    @classmethod
    def _w_majority_or_positive(cls, w: object) -> object:
        if isinstance(w, str) and w.strip().isdigit():
            w = int(w)  # from the command line or an environment variable
        if w == "majority" or (isinstance(w, int) and not isinstance(w, bool)
                               and 1 <= w <= 50):
            return w
        raise ValueError(f"write_concern_w must be 'majority' or a number from 1 to 50 (the "
                         f"most members a replica set has), got {w!r} (w=0 would not wait "
                         "for MongoDB at all)")

    @field_validator("state_version", "unversioned_state_version", mode="before")
    @classmethod
    def _a_state_version(cls, v: object, info: ValidationInfo) -> object:
        # an int, or its digits (an environment variable, the command line); never a bool
        # or a float, which pydantic's lax mode would turn into one (True -> version 1),
        # as config["configurable"]["state_version"] and state_migrations keys refuse them
        if v is None:
            return v
        if isinstance(v, str) and v.strip().isdigit():
            v = int(v)
        if isinstance(v, bool) or not isinstance(v, int):
            raise ValueError(f"{info.field_name} is a state version, an int >= 1, got "
                             f"{v!r} ({type(v).__name__})")
        if v > MAX_STATE_VERSION:
            raise ValueError(f"{info.field_name} {v} is past the largest state version, "
                             f"{MAX_STATE_VERSION} (a 64-bit signed int: stored in every "
                             "checkpoint's metadata and in MongoDB)")
        return v

    @field_validator("database")
    @classmethod
    def _mongodb_database_name(cls, name: str) -> str:
        bad = sorted({c for c in name if c in _DATABASE_BAD})
        if bad or len(name.encode()) > 63:
            why = (f"it contains {', '.join(repr(c) for c in bad)}" if bad
                   else f"it is {len(name.encode())} bytes long")
            raise ValueError(f"not a MongoDB database name: {why} (a database name has at "
                             "most 63 bytes and none of / \\ . space \" $ or NUL)")
        return name

    @field_validator("collection_prefix")
    @classmethod
    def _mongodb_collection_prefix(cls, prefix: str) -> str:
        if "$" in prefix or "\0" in prefix or prefix.startswith("system."):
            raise ValueError("the collections <collection_prefix>checkpoints, ... would not "
                             "be MongoDB collection names: a collection_prefix has no '$' "
                             "and no NUL and does not begin with 'system.'")
        return prefix

    @field_validator("write_concern_timeout_s")
    @classmethod
    def _wtimeout_ms(cls, s: float) -> float:
        if 0 < s < 0.001:
            raise ValueError(f"write_concern_timeout_s is in seconds, with millisecond "
                             f"resolution: {s} would round to 0 (no limit); use 0 for no "
                             "limit or at least 0.001")
        return s

    @property
    def write_concern(self) -> WriteConcern:
        """The ``pymongo.WriteConcern`` built from the ``write_concern_*`` options."""
        ms = int(self.write_concern_timeout_s * 1000)
        return WriteConcern(w=self.write_concern_w, j=self.write_concern_j,
                            wtimeout=ms or None)


@dataclass(frozen=True)
class ConfigOption:
    """One ``DurableConfig`` field as a command-line option (``config_options``)."""

    name: str
    """The field name, e.g. ``"flush_batch_size"``; also the environment's ``LGD_<NAME>``."""
    flag: str
    """``--field-name``."""
    kind: type
    """``int``, ``float``, ``str`` or ``bool``: the type a parser hands to pydantic."""
    choices: str
    """Allowed values for the help text (``"auto | off"``), ``""`` when any of ``kind``."""
    help: str
    """``DurableConfig.<name> (default ...; choices)``."""

    def parse(self, text: str) -> Any:
        """``text`` as given on a command line, converted for ``DurableConfig``: numbers
        for ``int``/``float`` fields and for ``write_concern_w`` digits, ``true``/``false``
        (also ``1``/``0``, ``yes``/``no``, any case) for ``bool``; raises ``ValueError``."""
        if self.kind is bool:
            low = text.strip().lower()
            if low not in ("true", "false", "1", "0", "yes", "no"):
                raise ValueError(f"{self.flag} takes true or false, got {text!r}")
            return low in ("true", "1", "yes")
        if self.kind is str and text.isdigit() and "int" in self.choices.split(" | "):
            return int(text)
        return self.kind(text)


def config_options(*, skip: frozenset[str] = frozenset()) -> list[ConfigOption]:
    """The ``DurableConfig`` fields a command line can set, derived once from the model:
    ``str``/``int``/``float``/``bool`` fields, ``int | None`` fields (``outbox_partitions``:
    not given leaves the default), ``Literal`` choices (as ``str``) and unions of a
    ``Literal`` with a type (``write_concern_w``: ``majority | int``). Fields of other
    types (``queryable_metadata``: ``bool | None``, ``item_digest_key``: a secret, never on
    a command line) and the names in ``skip`` are left out. Used by the
    ``langgraph-durable`` CLI (typer) and the flusher worker (argparse)."""
    out = []
    for name, field in DurableConfig.model_fields.items():
        ann = field.annotation
        if name in skip:
            continue
        if typing.get_origin(ann) is Literal:
            kind: type = str
            choices = " | ".join(str(a) for a in typing.get_args(ann))
        elif ann in (int, float, str, bool):
            kind, choices = ann, ""  # type: ignore[assignment]
        elif ann == int | None:
            kind, choices = int, ""  # outbox_partitions: unset means the default
        elif any(typing.get_origin(a) is Literal for a in typing.get_args(ann)):
            kind = str  # e.g. write_concern_w: 'majority' or a number
            choices = " | ".join(str(x) for a in typing.get_args(ann)
                                 for x in (typing.get_args(a) or [a.__name__]))
        else:
            continue
        extra = f"; {choices}" if choices else ""
        out.append(ConfigOption(name, f"--{name.replace('_', '-')}", kind, choices,
                                f"DurableConfig.{name} (default {field.default!r}{extra})"))
    return out
