"""The options of ``DurableSaver``, ``DurableSaver.from_urls`` and ``DurableStore.from_urls``,
typed where editors and mypy see them, in groups, each documented here once (units in the
names: ``_s`` seconds, ``_bytes`` bytes, ``_minutes`` minutes).

Every option has one name everywhere: a keyword option (``from_urls(..., flush_linger_s=
0.2)``), a field of ``DurableConfig`` (``config=DurableConfig(flush_linger_s=0.2)``), an
environment variable ``LGD_<NAME>`` (``LGD_FLUSH_LINGER_S=0.2``; ``langgraph_durable.
settings``) and, for the command line's types, a flag ``--<name>`` (``--flush-linger-s``).

The groups: ``RedisOptions``, ``MongoOptions``, ``DurabilityOptions``, ``FlusherOptions``,
``RetentionOptions``, ``RetentionPolicyOptions``, ``ValueOptions`` (serialization and
limits), ``EffectOptions``, ``StateVersionOptions``, ``StoreOptions``, and
``ClientOptions``, which only mean something for the clients a saver builds from URLs.
``SaverOptions`` is every group but ``ClientOptions`` (what ``DurableSaver(redis, mongo,
...)`` takes); ``FromUrlsOptions`` adds ``ClientOptions`` (what ``from_urls`` and
``from_conn_string`` take); ``StoreFromUrlsOptions`` is ``FromUrlsOptions`` without
``ttl``, which ``DurableStore.from_urls`` takes as the store's own. Each is a
``TypedDict`` with ``total=False``: every option may be left out (then ``LGD_<NAME>``,
else the default of ``DurableConfig``, applies). ``tests/unit/test_options.py`` checks
that the keys and types are ``DurableConfig``'s fields.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator
from typing_extensions import TypedDict

MAX_TTL_MINUTES = 100 * 366 * 24 * 60
"""Longest TTL of retention by policy, in minutes (100 years): an expiry ``at + TTL`` in
milliseconds stays a 64-bit integer MongoDB stores and a date Python can show. A longer
TTL is refused where it is given (``lgd_ttl_minutes``, ``set_thread_ttl``,
``ThreadTTL.default_ttl``); to keep a thread for good, pin it or name no TTL."""


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


class RedisOptions(TypedDict, total=False):
    """Where the hot tier lives in Redis, and how many replicas a write waits for."""

    key_prefix: str
    """Namespace of every Redis key and of the outbox stream, so several applications can
    share one Redis: 1 to 64 letters, digits, ``_``, ``.`` and ``-`` (no ``:``, so no two
    prefixes and thread ids can make the same key). Keys of a thread share the hash tag
    ``{<key_prefix>:<len>:<thread>}`` (one Redis Cluster slot per thread). A key prefix
    belongs to one ``database``, ``collection_prefix`` and number of outbox partitions
    (``plans/binding.py``). Default ``"lgd"``."""
    redis_min_replicas: int
    """Redis replicas that must hold a ``put``/``put_writes`` before it returns (default 0:
    the primary's answer is enough, and a failover can lose what reached no replica yet).
    With n > 0 the script and ``WAIT n`` go in one pipeline on the connection that ran the
    script (the primary of the thread's slot on a cluster: still one round trip, plus the
    replication wait); fewer than n replicas within ``redis_wait_timeout_s`` raises
    ``ReplicationTimeoutError`` (the data IS stored on the primary and in the outbox).
    ``WAIT`` makes a loss unlikely, not impossible: Redis replication stays asynchronous,
    and a replica that was not promoted may hold the write. From 0 to 100."""
    redis_wait_timeout_s: float
    """Seconds ``WAIT`` may block for ``redis_min_replicas`` (millisecond resolution, more
    than 0: Redis reads ``WAIT n 0`` as "forever"). Default 1.0, from 0.001 to 3600."""


class MongoOptions(TypedDict, total=False):
    """Where the durable tier lives in MongoDB, and the write concern of every write."""

    database: str
    """MongoDB database name (at most 63 bytes, none of ``/ \\ . " $``, space or NUL).
    Default: the database of the MongoDB URL (``mongodb://h:p/myappdb``) or client, else
    ``"langgraph_durable"``; one given both ways and different raises
    ``ConfigurationError``."""
    collection_prefix: str
    """Prefix of the MongoDB collections (``<prefix>checkpoints``, ``<prefix>blobs``,
    ``<prefix>writes``, ``<prefix>chunks``, ``<prefix>meta``, ``<prefix>items``,
    ``<prefix>tombstones``, ``<prefix>retention``): no ``$``, no NUL, not beginning with
    ``system.``. Default ``""``."""
    write_concern_w: Literal["majority"] | int
    """MongoDB write concern ``w`` of every write the saver makes (flusher bulk writes,
    strict-mode writes, deletes, copies): ``"majority"`` (default) or a number of members
    from 1 to 50. ``1`` trusts the primary's acknowledgement alone, which a failover can
    roll back (then an entry already removed from the outbox is lost)."""
    write_concern_j: bool
    """Wait for the on-disk journal before MongoDB acknowledges (default True; with False
    an acknowledged write can be lost if mongod stops)."""
    write_concern_timeout_s: float
    """Seconds MongoDB may wait for ``w`` members before it answers with a write concern
    error (the flusher retries; a strict-mode call raises); millisecond resolution. 0 waits
    without limit. Default 10.0, at most 86400."""


class DurabilityOptions(TypedDict, total=False):
    """When a call returns, and what a ``put`` of a run that lost a race does."""

    durability: Literal["write_behind", "strict"]
    """``"write_behind"`` (default: a call returns once Redis committed; MongoDB follows
    within the flush lag) or ``"strict"`` (a call also waits for MongoDB's acknowledgement
    before returning). A strict call that raises after Redis committed (MongoDB down, write
    concern not met) has still stored its checkpoint: it is read back and reaches MongoDB
    through the outbox, as after any timeout; the error means "not confirmed durable", not
    "not written"."""
    on_concurrent_run: Literal["raise", "fork"]
    """What a ``put`` does when its run read the thread's latest checkpoint and another run
    has extended the thread since (two processes, or two threads or asyncio tasks of one
    process, invoking one ``thread_id`` at once; ``plans/context.Heads``):
    ``"raise"`` (default) refuses it with ``ConcurrentRunError`` and writes nothing;
    ``"fork"`` stores it as a sibling branch, as InMemorySaver does (the latest state then
    shows one run only)."""


class FlusherOptions(TypedDict, total=False):
    """The outbox (Redis streams of writes waiting for MongoDB) and the flusher that moves
    them, in bulk writes, to MongoDB."""

    flusher: Literal["auto", "off", "process"]
    """``"auto"`` (default) runs the in-process flusher (a thread with sync clients, an
    asyncio task with async-only clients); ``"process"`` runs it as one child process the
    saver starts, supervises (restarted with backoff if it dies) and stops on ``close``
    (``outbox/process.py``; needs ``from_urls`` or ``from_conn_string``: the child connects
    with the same URLs), so the flusher takes no CPU or GIL of the application's process;
    ``"off"`` leaves the outbox to standalone workers (``python -m
    langgraph_durable.outbox.worker``)."""
    flush_interval_s: float
    """Longest time, in seconds, the flusher blocks waiting for new outbox entries before it
    looks again (bounds idle lag). Default 0.05, more than 0, at most 60."""
    flush_batch_size: int
    """Most outbox entries moved to MongoDB in one bulk write round. Default 500, from 1 to
    10000."""
    flush_linger_s: float
    """Seconds the flusher waits after a round that took fewer than a quarter of
    ``flush_batch_size`` entries (light load), so the next round writes more checkpoints per
    bulk write (fewer, larger MongoDB commands: less load on MongoDB, and fewer rounds
    competing with the application's threads for this process's GIL). Adds up to this much
    to the flush lag (none once rounds take a quarter batch); ``flush()`` cuts it short; 0
    starts the next round at once. Default 0.1, at most 10. Measured on 2 shared cores
    (docs/storage.md): W5's lag p99 at half the flusher's capacity 0.17 s with 0, 0.29 s
    with 0.05, 0.42 s with 0.1, ~0.55 s with 0.2; the W1 agent loop 1.39x InMemorySaver's
    time with 0.05 s, 1.26-1.31x with 0.1 s and 1.16-1.28x with 0.2 s (same-process A/B
    runs)."""
    claim_idle_s: float
    """Seconds an entry may stay pending with a consumer before another flusher claims it
    (``XAUTOCLAIM``), e.g. after the first one died. This is the wait for consumers without
    a heartbeat (an older version's); a flusher whose heartbeat lapsed (``heartbeat_ttl_s``)
    is known dead sooner. Default 5.0."""
    heartbeat_ttl_s: float
    """Seconds a flusher's heartbeat lasts in the heartbeat registry
    (``outbox/heartbeat.py``); a thread (or task) beside the flush loop refreshes it every
    third of that, so a stalled round does not let it lapse. Once it has lapsed (the process
    was killed or frozen this long) live flushers claim the entries it holds that are idle
    this long at once, instead of after ``claim_idle_s``, and remove it from the consumer
    group. Default 2.0; from 0.1 to 3600. Keep it above the longest pause a live process can
    make (a garbage collection, a long call holding the GIL): entries of a flusher paused
    past it are flushed twice (harmless: upserts), as past ``claim_idle_s``."""
    max_outbox: int
    """Most outbox entries waiting for MongoDB; past it, ``on_outbox_full`` applies. 0 means
    no bound. With several partitions each holds at most its share (``max_outbox /
    outbox_partitions``, rounded up). Default 100000."""
    outbox_partitions: int | None
    """Number of outbox streams P; each thread belongs to one (``crc32(thread_id) mod P``)
    and shares its hash tag, so a put and its outbox entry are one script on a Redis Cluster
    (``hot/keys.py``). ``None`` (default): 1 on a single Redis or Sentinel, 16 on a cluster;
    a cluster needs at least 2. At most 1024. Change it only with an empty outbox (a
    thread's keys move with it)."""
    on_outbox_full: Literal["block", "raise"]
    """``"block"`` (default: wait up to ``outbox_full_timeout_s`` seconds, then raise
    ``OutboxFullError``) or ``"raise"`` (raise at once); nothing is dropped."""
    outbox_full_timeout_s: float
    """Seconds a put may wait for room in the outbox. Default 10.0."""
    delete_flush_timeout_s: float
    """Seconds a delete/prune/copy waits for the outbox to drain before it acts on both
    tiers (raises ``FlushTimeoutError`` past it). Default 30.0."""
    close_drain_timeout_s: float
    """Seconds ``close()`` (leaving the context manager) waits for the outbox to reach
    MongoDB; past it the saver closes anyway and what is left stays in Redis for the next
    flusher (keep it under your termination grace). Default 10.0."""


class RetentionOptions(TypedDict, total=False):
    """How long a thread's Redis keys and a delete's tombstones are kept."""

    hot_ttl_s: int
    """Seconds a thread's Redis keys live after everything in them reached MongoDB; a new
    write removes the TTL again. 0 keeps them forever. Default 86400 (a day)."""
    hot_max_checkpoints: int
    """The hot window: per thread and checkpoint_ns, Redis keeps the newest this many
    checkpoints once they reached MongoDB, plus every checkpoint whose entries are not
    flushed yet; older ones (and the channel values no kept checkpoint names) leave Redis
    when a flush settles once a namespace holds ``max(16, N / 2)`` more than that, and are
    read from MongoDB. Default 50; 0 keeps all (until ``hot_ttl_s``). The items of list
    values stay while the thread is hot."""
    tombstone_ttl_s: int
    """Seconds a delete's tombstones stay in MongoDB (the ``{collection_prefix}tombstones``
    collection, a TTL index on ``deleted_at``; MongoDB removes expired ones within about a
    minute). Redis keeps them 7 days (``hot.keys.TOMBSTONE_TTL_S``) and answers from them on
    the call path; MongoDB's are asked only when Redis cannot answer: a write naming a
    checkpoint that Redis neither holds nor has a tombstone of (Redis lost its data, its
    tombstones expired, the hot window let the checkpoint go). A ``put``/``put_writes``
    naming a checkpoint deleted within this time raises ``ThreadDeletedError``; later, it is
    taken as InMemorySaver takes it. Default 30 days (2592000); at least 60, at most 10
    years. ``setup()`` changes the index of an existing deployment to the value given."""


class RetentionPolicyOptions(TypedDict, total=False):
    """Retention by policy: threads idle past a TTL are swept."""

    ttl: ThreadTTL | Mapping[str, Any] | None
    """Retention by policy, a ``ThreadTTL`` (or its dict: ``{"strategy": "delete",
    "default_ttl": 43200, "sweep_interval_minutes": 60}``, as ``langgraph.json``'s
    ``checkpointer.ttl``; ``LGD_TTL`` takes the same JSON). The flusher records each
    thread's last activity and expiry in MongoDB (``<collection_prefix>retention``) from the
    outbox entries it copies (no cost on ``put``), and the sweeper beside every flusher
    (in-process, ``flusher="process"``, ``langgraph-durable flusher``, ``python -m
    langgraph_durable.outbox.worker``) sweeps expired threads every
    ``sweep_interval_minutes``, one at a time. A run sets its thread's own TTL with
    ``config["configurable"]["lgd_ttl_minutes"]``. Default None: nothing recorded, nothing
    swept (``plans/retention_policy.py``)."""


class ValueOptions(TypedDict, total=False):
    """How values are serialized and stored: size limit, queryable metadata, list items,
    and the bounds of an ``S3BlobStore`` for values kept outside (``ExternalRefSerializer``)."""

    max_value_bytes: int
    """Largest serialized value (channel value, pending write, checkpoint or metadata), in
    bytes, accepted; bigger raises ``SerializationError`` naming thread, channel and size
    before anything is written. Default 256 MiB (268435456); at most 512 MiB - 1 KiB (a
    Redis string holds at most 512 MiB). Values over 8 MiB are stored in MongoDB in chunks
    (``{collection_prefix}chunks``), since one document holds at most 16 MiB."""
    queryable_metadata: bool | None
    """Store top-level scalar metadata in plain form in MongoDB so ``list(filter=...)``
    narrows the query on the server. ``None`` (default) = on unless the serializer is an
    ``EncryptedSerializer`` (then metadata stays encrypted and filters apply after
    decoding)."""
    list_items: bool
    """Store plain non-empty ``list`` values (channel values and pending writes, e.g.
    ``messages``) as content-addressed items (``core/items.py``): each element once per
    thread, the value as a manifest of digests, so a growing conversation costs linear
    bytes. Default True; False stores lists whole."""
    item_cache_bytes: int
    """Bytes of serialized LangChain messages (pydantic models) kept per saver to skip
    serializing the same unchanged message object again at the next step (compared to a copy
    with ``==``); 0 serializes every item each time. Default 64 MiB (67108864)."""
    item_digest_key: str | None
    """Secret key (text, at least 16 characters) of the item digests when the serializer
    encrypts: the digests are keyed BLAKE2b, never a plain hash of plaintext. Default:
    derived from ``LANGGRAPH_AES_KEY`` or the key of
    ``EncryptedSerializer.from_pycryptodome_aes``; without any, lists are stored whole when
    the serializer encrypts. Never shown (``repr``) nor a command-line flag."""
    blob_timeout_s: float
    """Seconds an ``S3BlobStore`` that builds its own boto3 client waits to connect to the
    S3 endpoint and for each read from it (botocore's ``connect_timeout`` and
    ``read_timeout``, 60 s each by default). Default 10, at most 3600. A saver applies this
    option and ``blob_retries``, when they are set (as keywords, ``config=`` or
    ``LGD_BLOB_TIMEOUT_S``/``LGD_BLOB_RETRIES``), to the ``S3BlobStore`` of its
    ``ExternalRefSerializer`` unless that store was given a client or the same argument
    itself (``S3BlobStore.use_bounds``)."""
    blob_retries: int
    """Retries of a failed S3 request by such a client after its first attempt (botocore's
    ``standard`` retry mode, ``total_max_attempts`` = ``blob_retries + 1``). Default 2, at
    most 10. A request to an endpoint that accepts and never answers raises
    ``BlobStoreError`` after at most about ``(blob_timeout_s + 1) * (blob_retries + 1) + 2
    ** blob_retries - 1`` seconds: each attempt waits ``blob_timeout_s`` for the answer (an
    upload first waits up to 1 s for the endpoint's ``100 Continue``), then botocore backs
    off before the next (at most ``2 ** (n - 1)`` s before retry n); with the defaults about
    36 s, where botocore's own defaults take minutes. An endpoint that does not accept at
    all adds up to ``blob_timeout_s`` per attempt to connect. Each whole request is also held
    to a deadline of ``(2 * blob_timeout_s + 1 + bytes / 1 MiB/s) * (blob_retries + 1) +
    backoff`` seconds (``S3BlobStore.deadline_s``), so an endpoint that trickles its answer
    cannot hold it longer."""


class EffectOptions(TypedDict, total=False):
    """Side effects run once (``effects.once``/``aonce``) and journaled model calls."""

    effect_checkpoint_wait_s: float
    """Seconds ``effects.once``/``aonce`` and journaled model calls wait, before calling
    their function, for the checkpoint their task runs from to be stored (LangGraph's
    default ``durability="async"`` stores it while the step's tasks already run). Default
    60, more than 0, at most 3600. Waited without I/O when this process stored it;
    ``EffectCheckpointError`` (function not called) when it is not stored in time or its put
    failed. Not waited with ``durability="exit"`` (the run stores no checkpoint before it
    ends, so a crash loses the run and ``once`` protects re-executions within it only), nor
    in a subgraph compiled with ``checkpointer=False`` (it stores none)."""


class StateVersionOptions(TypedDict, total=False):
    """Versions of the application's state (``core/state_versions.py``,
    docs/state_versions.md); the migrations themselves are the ``state_migrations``
    argument."""

    state_version: int | None
    """The application's current state version (an int >= 1, at most 2**63 - 1), stamped
    into the metadata of every checkpoint stored (key ``lgd_state_version``); older
    checkpoints are migrated on read by the saver's ``state_migrations``, newer ones refused
    on resume. A call's ``config["configurable"]["state_version"]`` overrides it. Default
    None: nothing stamped, nothing checked."""
    unversioned_state_version: int
    """The state version a checkpoint without ``lgd_state_version`` is read as (those stored
    before versions were used). Default 1."""
    newer_state: Literal["raise", "read"]
    """What ``list`` and the delta-channel history do with a checkpoint of a newer state
    version than ``state_version``: ``"raise"`` (default, ``StateVersionError``) or
    ``"read"`` (returned as stored, not migrated). ``get_tuple``, the resume path, always
    raises for one."""


class StoreOptions(TypedDict, total=False):
    """``DurableStore``, LangGraph's long-term memory store (the saver does not read it)."""

    vector_search: Literal["auto", "exact", "redis", "mongodb"]
    """Where ``DurableStore``'s semantic search runs, chosen when the store sets up
    (``plans/store_vectors.py``): ``"auto"`` (default) the Redis Query Engine when the Redis
    has it (Redis 8, Redis Stack, Valkey with valkey-search), else ``"exact"``; ``"exact"``
    every candidate scored in the application (NumPy); ``"redis"`` an HNSW (or FLAT) index in
    Redis, refused with ``ConfigurationError`` on a Redis without the query engine;
    ``"mongodb"`` MongoDB ``$vectorSearch``, not implemented: refused, saying what the
    server answered."""


class ClientOptions(TypedDict, total=False):
    """The clients a saver builds itself (``from_urls``, ``from_conn_string``, the CLI, the
    worker, ``flusher="process"``'s child). Given as keywords to ``DurableSaver(redis,
    mongo, ...)``, which takes clients of yours, they raise ``ConfigurationError``
    (``CLIENT_OPTIONS``); configure those clients instead."""

    redis_max_connections: int
    """Size of the Redis connection pool of each client built (calls beyond it wait for a
    free connection, up to ``socket_timeout_s``). Default 256, at least 1."""
    socket_timeout_s: float
    """Redis socket (connect and read) timeout, in seconds, of the clients built (a put's
    ``WAIT`` time is added to the read timeout). Default 5.0, more than 0."""
    server_selection_timeout_s: float
    """MongoDB server selection timeout, in seconds, of the clients built: how long a call
    waits for a MongoDB that cannot be reached (down, stopped, unreachable), and their
    connect timeout. Default 5.0, more than 0."""
    mongo_socket_timeout_s: float
    """MongoDB socket timeout (PyMongo's ``socketTimeoutMS``), in seconds, of the clients
    built: how long a call waits for the answer to one command sent on a connection (or
    one batch of a cursor) from a MongoDB that accepted the command and is still
    reachable but does not answer (a stuck disk, a lock, a stalled primary); then it
    raises ``TierUnavailableError`` (the flusher retries its round; the command may have
    run: every write of the package is idempotent). Keep it above your slowest command:
    ``setup()``'s index builds on large collections, ``migrate``'s batches. Default 60.0,
    more than 0, at most 86400. It wins over a ``socketTimeoutMS`` in the URL, as
    ``server_selection_timeout_s`` over ``serverSelectionTimeoutMS``."""


class SaverOptions(RedisOptions, MongoOptions, DurabilityOptions, FlusherOptions,
                   RetentionOptions, RetentionPolicyOptions, ValueOptions, EffectOptions,
                   StateVersionOptions, StoreOptions, total=False):
    """Every option of ``DurableSaver(redis, mongo, **options)``: each group but
    ``ClientOptions``."""


class FromUrlsOptions(SaverOptions, ClientOptions, total=False):
    """Every option of ``DurableSaver.from_urls``/``from_conn_string`` and
    ``DurableStore.from_urls``: ``SaverOptions`` and ``ClientOptions``; the keys are the
    settable fields of ``DurableConfig``."""


class StoreFromUrlsOptions(RedisOptions, MongoOptions, DurabilityOptions, FlusherOptions,
                           RetentionOptions, ValueOptions, EffectOptions,
                           StateVersionOptions, StoreOptions, ClientOptions, total=False):
    """Every option of ``DurableStore.from_urls``: ``FromUrlsOptions`` but
    ``RetentionPolicyOptions``, since its own ``ttl`` argument is the store's
    (LangGraph's ``TTLConfig`` of items); the saver's retention by policy comes from
    ``config=`` or ``LGD_TTL`` there."""


OPTION_GROUPS: tuple[type, ...] = (
    RedisOptions, MongoOptions, DurabilityOptions, FlusherOptions, RetentionOptions,
    RetentionPolicyOptions, ValueOptions, EffectOptions, StateVersionOptions, StoreOptions,
    ClientOptions)
"""The groups, in the order ``DurableConfig`` lists its fields."""

CLIENT_OPTIONS: frozenset[str] = ClientOptions.__optional_keys__
"""The options that only mean something for clients a saver builds from URLs."""
