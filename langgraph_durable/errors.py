"""The exception hierarchy of langgraph_durable: one base class, context in every message."""

from __future__ import annotations

from collections.abc import Callable


class DurableSaverError(Exception):
    """Base class of every error raised by langgraph_durable."""


class InvalidIdentifierError(DurableSaverError, ValueError):
    """A thread_id, checkpoint_ns, checkpoint_id, channel or task_id cannot be stored,
    nor a memory-store item key (``DurableStore``: a key holding NUL, the separator of
    the store's Redis fields and outbox members).

    Raised before anything is written, so stored data is never touched.
    """


class SerializationError(DurableSaverError, TypeError):
    """A value could not be encoded by the serializer; names thread, channel and type."""


class CorruptRecordError(DurableSaverError, ValueError):
    """A stored record is damaged: it could not be decoded, a Redis key of a thread holds
    the wrong type (``WRONGTYPE``), a MongoDB document lacks a field or holds one of the
    wrong type, or a checkpoint names a channel version whose value neither tier holds.
    The message names the tier and the key or document.

    Attributes (``None`` when not known): ``tier`` (``"hot"``: Redis, ``"durable"``:
    MongoDB), ``thread_id``, ``checkpoint_ns``, ``checkpoint_id``, ``key`` (the Redis key
    or the MongoDB document ``_id``), ``channel`` and ``version`` (a missing channel
    value); ``damaged`` (``list(None)`` only: the error of each thread it could not list,
    see ``DurableSaver.list``, else empty)."""

    def __init__(self, message: str, *, tier: str | None = None,
                 thread_id: str | None = None, checkpoint_ns: str | None = None,
                 checkpoint_id: str | None = None, key: str | None = None,
                 channel: str | None = None, version: str | None = None,
                 damaged: list[CorruptRecordError] | None = None) -> None:
        super().__init__(message)
        self.tier, self.thread_id, self.key = tier, thread_id, key
        self.checkpoint_ns, self.checkpoint_id = checkpoint_ns, checkpoint_id
        self.channel, self.version = channel, version
        self.damaged = damaged or []

    @classmethod
    def gathered(cls, head: str, damaged: list[CorruptRecordError],
                 **attrs: str | None) -> CorruptRecordError:
        """One error for the ``damaged`` records an operation went past (``list(None)``,
        ``prune``, ``delete_for_runs``, ``migrate``): ``"<head> (see .damaged): "`` and
        the first three errors' texts (``" ..."`` when there are more); ``attrs`` as the
        constructor's (``tier``, ``thread_id``...)."""
        shown = "; ".join(str(e) for e in damaged[:3]) + (" ..." if len(damaged) > 3 else "")
        return cls(f"{head} (see .damaged): {shown}", damaged=damaged, **attrs)


class SchemaVersionError(CorruptRecordError):
    """A stored record carries a schema version newer than this package understands."""


class OutboxFullError(DurableSaverError):
    """The outbox holds ``max_outbox`` entries that MongoDB has not taken yet.

    Raised by ``put``/``put_writes`` (nothing is written) when the durable tier falls
    behind past the configured bound and the policy is ``"raise"`` or the
    ``"block"`` policy timed out.
    """


class ConcurrentRunError(DurableSaverError):
    """Another run extended this thread (and namespace) after this run read its latest
    checkpoint: continuing would fork the thread silently and hide one run's messages from
    the latest state. Nothing was written; reload the thread (``get_state``) and retry.

    The two runs may be in two processes or in one (two threads or asyncio tasks: each run
    keeps the heads it read and wrote in its own context). Raised only with
    ``on_concurrent_run="raise"`` (the default). Forks you ask for (a
    ``checkpoint_id`` in the config, ``update_state`` on an old checkpoint) never raise.
    "Extended" means another put was stored in the namespace after the one this run read
    (Redis keeps the head each put writes), not that a larger ``checkpoint_id`` exists:
    ids from hosts whose clocks differ need not increase, and such a run is no concurrent
    run (it is stored, with a "clock skew" warning, as InMemorySaver stores it).
    """


class FlushTimeoutError(DurableSaverError, TimeoutError):
    """``flush()`` (or a delete, which flushes first) did not finish within its timeout."""


class TierUnavailableError(DurableSaverError, ConnectionError):
    """Redis or MongoDB did not answer; names the server and the operation.

    Attributes (``None`` when not known): ``tier``, ``"hot"`` (Redis) or ``"durable"``
    (MongoDB); ``server``, the server as the clients name it (``host:port``,
    ``host:port/database``, ``cluster h:p,...``); ``operation``, what was asked (a
    script's name, ``pipeline``, ``collection.method``); ``reason``, the client's error.
    """

    def __init__(self, message: str, *, tier: str | None = None, server: str | None = None,
                 operation: str | None = None, reason: str | None = None) -> None:
        super().__init__(message)
        self.tier, self.server, self.operation, self.reason = tier, server, operation, reason

    @property
    def tier_name(self) -> str:
        """``"hot tier (Redis)"``, ``"durable tier (MongoDB)"``, else ``"a tier"``."""
        return {"hot": "hot tier (Redis)", "durable": "durable tier (MongoDB)"}.get(
            self.tier or "", "a tier")


class ReplicationTimeoutError(DurableSaverError, TimeoutError):
    """A ``put``/``put_writes`` with ``redis_min_replicas`` = n ran: the checkpoint (or the
    pending writes) IS stored on the Redis primary and in the outbox (so it reaches MongoDB
    as usual), but Redis ``WAIT`` reported fewer than n replicas holding it within
    ``redis_wait_timeout_s``. A failover of the primary before a replica receives it can
    lose it. Nothing to undo: retrying the call stores the same data again.

    Attributes: ``wanted`` (n), ``replicas`` (the count ``WAIT`` reached), ``timeout_s``,
    and, once a plan named them, ``thread_id``, ``checkpoint_ns``, ``checkpoint_id``,
    ``task_id`` (``None`` for a ``put``).
    """

    def __init__(self, message: str, *, wanted: int, replicas: int, timeout_s: float,
                 thread_id: str | None = None, checkpoint_ns: str | None = None,
                 checkpoint_id: str | None = None, task_id: str | None = None) -> None:
        super().__init__(message)
        self.wanted = wanted
        self.replicas = replicas
        self.timeout_s = timeout_s
        self.thread_id = thread_id
        self.checkpoint_ns = checkpoint_ns
        self.checkpoint_id = checkpoint_id
        self.task_id = task_id


class SyncCallInEventLoopError(DurableSaverError, RuntimeError):
    """A sync method of a saver with asyncio clients only was called from inside the event
    loop that owns (or, on first use, would own) those clients.

    Waiting there would deadlock, so the call raises instead (use the ``a*`` method).
    """


class EventLoopNotRunningError(DurableSaverError, RuntimeError):
    """A sync method was called on a saver with asyncio clients only, and no running event
    loop owns those clients (none yet, or it stopped or closed): there is nowhere to run
    them. Use the ``a*`` method inside the loop, or give the saver sync clients too."""


class SaverClosedError(DurableSaverError, RuntimeError):
    """The saver was used after ``close()``/``aclose()`` or after its context manager exited."""


class ThreadDeletedError(DurableSaverError):
    """A ``put`` or ``put_writes`` names a checkpoint (the put's parent, the writes'
    checkpoint) that a ``delete_thread``, ``delete_for_runs`` or ``prune`` removed: a run
    still going while its thread was deleted. Nothing was written, so the deleted thread
    stays deleted (InMemorySaver would recreate it, pointing at a missing parent).

    A new run on the same ``thread_id`` (no ``checkpoint_id`` in its config) still works.
    Attributes: ``thread_id``, ``checkpoint_ns``, ``checkpoint_id``, ``deleted_at_ms``
    (Redis server time of the delete, ms since the epoch).
    """

    def __init__(self, message: str, *, thread_id: str, checkpoint_ns: str,
                 checkpoint_id: str, deleted_at_ms: int) -> None:
        super().__init__(message)
        self.thread_id = thread_id
        self.checkpoint_ns = checkpoint_ns
        self.checkpoint_id = checkpoint_id
        self.deleted_at_ms = deleted_at_ms


class CheckpointNotFoundError(DurableSaverError, LookupError):
    """A config names a ``checkpoint_id`` that the thread does not hold (never written,
    pruned, or of another thread or namespace). Attributes: ``thread_id``,
    ``checkpoint_ns``, ``checkpoint_id``. Raised by ``compaction.transcript``."""

    def __init__(self, message: str, *, thread_id: str, checkpoint_ns: str,
                 checkpoint_id: str) -> None:
        super().__init__(message)
        self.thread_id = thread_id
        self.checkpoint_ns = checkpoint_ns
        self.checkpoint_id = checkpoint_id


class ConfigurationError(DurableSaverError, ValueError):
    """The options of a saver contradict each other (``config=`` together with keyword
    options; a ``database`` different from the one named in the MongoDB URL). Raised before
    any server is contacted."""


class EffectInDoubtError(DurableSaverError):
    """``effects.once``/``aonce`` found an effect journaled as *started* with no outcome:
    an earlier execution of the same task called its function and died (a crash, a kill)
    before the outcome was journaled, so whether the side effect happened is unknown.
    Raised with ``in_doubt="raise"`` (the default) instead of calling it a second time;
    find out (e.g. ask the external service with the effect's ``idempotency_key``), then
    pass ``in_doubt="retry"`` to call again with the same key. Attributes: ``thread_id``,
    ``checkpoint_ns`` (the task's), ``task_id``, ``effect`` (the name), ``call`` (its call
    number within the task), ``idempotency_key``."""

    def __init__(self, message: str, *, thread_id: str, checkpoint_ns: str, task_id: str,
                 effect: str, call: int, idempotency_key: str) -> None:
        super().__init__(message)
        self.thread_id = thread_id
        self.checkpoint_ns = checkpoint_ns
        self.task_id = task_id
        self.effect = effect
        self.call = call
        self.idempotency_key = idempotency_key


class EffectCheckpointError(DurableSaverError):
    """``effects.once``/``aonce`` (or a journaled model call) did not call its function
    because the checkpoint its task runs from was not stored: the put of that checkpoint
    failed (``reason`` names its error), or was not stored within
    ``effect_checkpoint_wait_s`` seconds. LangGraph's default durability (``"async"``)
    stores a step's checkpoint while the step's tasks already run; an effect journaled
    under a task whose checkpoint a crash then loses would belong to a task the resumed
    run never makes again (new task ids), and run a second time, with another idempotency
    key. So an effect waits for its task's checkpoint first (without I/O when this process
    stored it). Attributes: ``thread_id``, ``checkpoint_ns``, ``checkpoint_id`` (the
    task's checkpoint), ``effect`` (the name), ``reason``."""

    def __init__(self, message: str, *, thread_id: str, checkpoint_ns: str,
                 checkpoint_id: str, effect: str, reason: str) -> None:
        super().__init__(message)
        self.thread_id = thread_id
        self.checkpoint_ns = checkpoint_ns
        self.checkpoint_id = checkpoint_id
        self.effect = effect
        self.reason = reason


class EffectFailedError(DurableSaverError):
    """A re-execution of a task reached an effect whose function raised the first time and
    whose error was journaled (``journal_errors=True``): the function is not called again;
    this carries the journaled error. Attributes: ``thread_id``, ``task_id``, ``effect``,
    ``call``, ``error_type`` (qualified name of the original exception's class),
    ``error_message`` (its ``str``)."""

    def __init__(self, message: str, *, thread_id: str, task_id: str, effect: str,
                 call: int, error_type: str, error_message: str) -> None:
        super().__init__(message)
        self.thread_id = thread_id
        self.task_id = task_id
        self.effect = effect
        self.call = call
        self.error_type = error_type
        self.error_message = error_message


class ScriptRefused(DurableSaverError):
    """A Lua script of the hot tier refused its call (``redis.error_reply``): nothing of
    the call was written. Raised by the drivers (``io/op_errors.wrap``) in place of the Redis
    client's error for the codes the script's operation declares (``Script.refusals``),
    and handled by the plans (``plans/write.py`` turns ``OUTBOX_FULL`` into
    ``OutboxFullError``, ``STALE_HEAD`` into ``ConcurrentRunError``...). Attributes:
    ``script`` (its name, e.g. ``"put"``), ``code`` (the first word of the reply, e.g.
    ``"STALE_HEAD"``) and ``detail`` (the rest, ``""`` when none: a checkpoint_id, a
    deletion time in ms, a count)."""

    def __init__(self, script: str, code: str, detail: str = "") -> None:
        super().__init__(f"Redis script {script!r} refused the call: {code}"
                         + (f" {detail}" if detail else ""))
        self.script = script
        self.code = code
        self.detail = detail

    @classmethod
    def parse(cls, script: str, text: str) -> ScriptRefused:
        """The refusal whose error reply reads ``text`` (``"<CODE> <detail>"``)."""
        code, _, detail = text.strip().partition(" ")
        return cls(script, code, detail)


class DeadLetteredError(DurableSaverError):
    """``flush()``/``aflush()``: outbox entries it waited for were set aside in the
    dead-letter stream instead of reaching MongoDB (their data is bad: a damaged Redis
    key of the thread, a malformed entry, a document MongoDB refuses), so not everything
    written before the flush is durable. ``entries``: ``(thread_id, entry id, error)``
    per dead letter; ``stream``: the dead-letter stream. List, replay after a fix, or
    drop them with ``langgraph-durable dead-letters``; until then the saver's later
    flushes name those of entries written since its last green flush again
    (docs/reliability.md, "Bad data")."""

    def __init__(self, entries: list[tuple[str, str, str]], stream: str) -> None:
        # a thread id may be up to 64 KiB: the message shows the start of long ones
        shown = "; ".join(f"{_owner(t)} entry {e} ({_clipped(err, 300)})"
                          for t, e, err in entries[:5])
        more = f"; and {len(entries) - 5} more" if len(entries) > 5 else ""
        super().__init__(f"{len(entries)} outbox entries were dead-lettered in {stream!r} "
                         f"instead of reaching MongoDB: {shown}{more}")
        self.entries = entries
        self.stream = stream


def _owner(thread_id: str) -> str:
    """Whose outbox entry a dead letter holds: a thread, or a memory store namespace
    (the entry's ``thread`` is ``"\\x00s"`` and the namespace's labels joined by ``.``:
    ``core/store_records.store_tid``)."""
    if thread_id.startswith("\x00s"):
        return f"store namespace {_clipped(thread_id[2:], 120, repr)}"
    return f"thread {_clipped(thread_id, 120, repr)}"


def _clipped(text: str, limit: int, show: Callable[[str], str] = str) -> str:
    """``show(text)``, or for a text over ``limit`` characters ``show`` of its start and
    its length: a message stays readable whatever it names."""
    if len(text) <= limit:
        return show(text)
    return f"{show(text[:limit])}... ({len(text):,} characters)"


class MissingValueError(CorruptRecordError):
    """A checkpoint names a channel version (its ``channel_versions``) whose value neither
    tier holds: the record was lost or deleted by hand (a channel with no value is stored
    as an empty value, so this is never LangGraph's "no value"). Attributes as
    ``CorruptRecordError``; ``channel`` and ``version`` name the first missing one, ``key``
    its MongoDB ``_id``."""


class ModelCallChangedError(DurableSaverError):
    """``journaled(model, on_change="raise")``/``ModelJournalMiddleware(on_change=
    "raise")``: a re-execution of a task made a model call whose request (messages,
    tools, model parameters) differs from the one journaled under the same call number,
    so the journaled answer does not fit it; the model was not called. Attributes:
    ``thread_id``, ``checkpoint_ns`` (the task's), ``task_id``, ``effect`` (the journal's
    name, ``"model:..."``), ``call`` (its call number within the task)."""

    def __init__(self, message: str, *, thread_id: str, checkpoint_ns: str, task_id: str,
                 effect: str, call: int) -> None:
        super().__init__(message)
        self.thread_id = thread_id
        self.checkpoint_ns = checkpoint_ns
        self.task_id = task_id
        self.effect = effect
        self.call = call


class StateVersionError(DurableSaverError):
    """A checkpoint's *application* state version (``state_version``, kept in its
    metadata under ``STATE_VERSION_KEY``) does not fit the running code: it is newer than
    the code's version (a rollback of a deploy: old code must not run on new state), or it
    is not a positive int. Raised by ``get_tuple`` (the resume path) always, and by
    ``list``/delta-channel history unless ``newer_state="read"``. Nothing stored is
    changed. (The *storage format*'s version is ``SchemaVersionError``.)

    ``DurableStore`` raises it for a store item of a newer version than the store's
    (``newer_state="read"`` returns it as stored), naming the item.

    Attributes: ``thread_id``, ``checkpoint_ns``, ``checkpoint_id`` (None for a store
    item), ``namespace`` and ``key`` (a store item's; None for a checkpoint), ``stored``
    (the version as read) and ``running`` (the code's)."""

    def __init__(self, message: str, *, thread_id: str | None = None,
                 checkpoint_ns: str | None = None, checkpoint_id: str | None = None,
                 stored: object, running: int, namespace: tuple[str, ...] | None = None,
                 key: str | None = None) -> None:
        super().__init__(message)
        self.thread_id = thread_id
        self.checkpoint_ns = checkpoint_ns
        self.checkpoint_id = checkpoint_id
        self.namespace = namespace
        self.key = key
        self.stored = stored
        self.running = running


class StateMigrationError(StateVersionError):
    """A checkpoint older than the running state version could not be migrated on read:
    the chain of ``state_migrations`` has a gap (``missing``: the version with no
    migration to the next), or a migration raised (chained ``from`` its error) or returned
    something else than a ``dict`` (a list of ``(task_id, channel, value)`` for a writes
    hook). The message names thread, checkpoint_ns, checkpoint_id (a store item: its
    namespace and key, ``items`` hooks) and the step ``from -> to``; ``step`` holds that
    ``(from, to)``. Nothing stored is changed (a read never writes)."""

    def __init__(self, message: str, *, thread_id: str | None = None,
                 checkpoint_ns: str | None = None, checkpoint_id: str | None = None,
                 stored: object, running: int, step: tuple[int, int],
                 missing: int | None = None, namespace: tuple[str, ...] | None = None,
                 key: str | None = None) -> None:
        super().__init__(message, thread_id=thread_id, checkpoint_ns=checkpoint_ns,
                         checkpoint_id=checkpoint_id, stored=stored, running=running,
                         namespace=namespace, key=key)
        self.step = step
        self.missing = missing
