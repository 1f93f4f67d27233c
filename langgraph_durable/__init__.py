"""langgraph_durable: LangGraph checkpointers that survive crashes.

``DurableSaver`` commits every checkpoint to Redis (write-through hot tier) before it
returns and moves it to MongoDB (durable tier) through a crash-safe outbox.
"""

from typing import TYPE_CHECKING, Any

from .admin.extref_gc import (
    StorageFootprint,
    acollect_saver_garbage,
    areferenced_blob_keys,
    collect_saver_garbage,
    referenced_blob_keys,
    storage_footprint,
)
from .config import DurableConfig, ThreadTTL
from .core.state_versions import STATE_VERSION_KEY, StateMigration
from .durable.retention_docs import ThreadRetention
from .effects import aonce, idempotency_key, once
from .errors import (
    CheckpointNotFoundError,
    ConcurrentRunError,
    ConfigurationError,
    CorruptRecordError,
    DeadLetteredError,
    DurableSaverError,
    EffectCheckpointError,
    EffectFailedError,
    EffectInDoubtError,
    EventLoopNotRunningError,
    FlushTimeoutError,
    InvalidIdentifierError,
    MissingValueError,
    ModelCallChangedError,
    OutboxFullError,
    ReplicationTimeoutError,
    SaverClosedError,
    SchemaVersionError,
    SerializationError,
    StateMigrationError,
    StateVersionError,
    SyncCallInEventLoopError,
    ThreadDeletedError,
    TierUnavailableError,
)
from .metrics import INSTRUMENTS
from .plans.retention_policy import SweepReport
from .plans.threads import ThreadInfo, ThreadPage
from .saver import DurableSaver
from .shared import SharedSaver, SharedSaverEntry, env_saver
from .store import DurableStore

__all__ = [
    "CheckpointNotFoundError",
    "ConcurrentRunError",
    "ConfigurationError",
    "CorruptRecordError",
    "DeadLetteredError",
    "DurableConfig",
    "DurableSaver",
    "DurableSaverError",
    "DurableStore",
    "EffectCheckpointError",
    "EffectFailedError",
    "EffectInDoubtError",
    "EventLoopNotRunningError",
    "FlushTimeoutError",
    "INSTRUMENTS",
    "InvalidIdentifierError",
    "MissingValueError",
    "ModelCallChangedError",
    "ModelJournalMiddleware",
    "OutboxFullError",
    "ReplicationTimeoutError",
    "STATE_VERSION_KEY",
    "SaverClosedError",
    "SchemaVersionError",
    "SerializationError",
    "SharedSaver",
    "SharedSaverEntry",
    "StateMigration",
    "StateMigrationError",
    "StateVersionError",
    "StorageFootprint",
    "SweepReport",
    "SyncCallInEventLoopError",
    "ThreadDeletedError",
    "ThreadInfo",
    "ThreadPage",
    "ThreadRetention",
    "ThreadTTL",
    "TierUnavailableError",
    "acollect_saver_garbage",
    "aonce",
    "areferenced_blob_keys",
    "collect_saver_garbage",
    "env_saver",
    "idempotency_key",
    "journaled",
    "once",
    "referenced_blob_keys",
    "storage_footprint",
]

__version__ = "0.1.0"

if TYPE_CHECKING:  # imported on first use (``__getattr__``), typed for editors here
    from .journal import journaled


def __getattr__(name: str) -> Any:
    """``journaled`` and ``ModelJournalMiddleware`` on first use: they import LangChain's
    chat-model classes (with its tracers and LangSmith, about 1 s of CPU) and ``langchain``
    (the agents extra), which a process of the package without a model (the CLI, a flusher
    worker) never needs."""
    if name == "journaled":
        from .journal import journaled

        return journaled
    if name == "ModelJournalMiddleware":
        from .journal.journal_middleware import ModelJournalMiddleware

        return ModelJournalMiddleware
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

