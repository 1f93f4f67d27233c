"""langgraph_durable: LangGraph checkpointers that survive crashes.

``DurableSaver`` commits every checkpoint to Redis (write-through hot tier) before it
returns and moves it to MongoDB (durable tier) through a crash-safe outbox.
"""

from typing import Any

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
from .journal import journaled
from .plans.retention_policy import SweepReport
from .plans.threads import ThreadInfo, ThreadPage
from .saver import DurableSaver
from .shared import SharedSaver
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
    "InvalidIdentifierError",
    "MissingValueError",
    "ModelCallChangedError",
    "ModelJournalMiddleware",
    "OutboxFullError",
    "ReplicationTimeoutError",
    "SaverClosedError",
    "SchemaVersionError",
    "STATE_VERSION_KEY",
    "SerializationError",
    "SharedSaver",
    "StateMigration",
    "StateMigrationError",
    "StateVersionError",
    "SweepReport",
    "SyncCallInEventLoopError",
    "ThreadDeletedError",
    "ThreadInfo",
    "ThreadPage",
    "ThreadRetention",
    "ThreadTTL",
    "TierUnavailableError",
    "aonce",
    "idempotency_key",
    "journaled",
    "once",
]

__version__ = "0.1.0"


def __getattr__(name: str) -> Any:
    """``ModelJournalMiddleware`` (it imports ``langchain``, the agents extra) on first use."""
    if name == "ModelJournalMiddleware":
        from .journal.journal_middleware import ModelJournalMiddleware

        return ModelJournalMiddleware
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

