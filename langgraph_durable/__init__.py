"""langgraph_durable: LangGraph checkpointers that survive crashes.

``DurableSaver`` commits every checkpoint to Redis (write-through hot tier) before it
returns and moves it to MongoDB (durable tier) through a crash-safe outbox.
"""

from . import _moved
from .config import DurableConfig
from .errors import (
    CheckpointNotFoundError,
    ConcurrentRunError,
    ConfigurationError,
    CorruptRecordError,
    DeadLetteredError,
    DurableSaverError,
    EventLoopNotRunningError,
    FlushTimeoutError,
    InvalidIdentifierError,
    MissingValueError,
    OutboxFullError,
    ReplicationTimeoutError,
    SaverClosedError,
    SchemaVersionError,
    SerializationError,
    SyncCallInEventLoopError,
    ThreadDeletedError,
    TierUnavailableError,
)
from .plans.threads import ThreadInfo, ThreadPage
from .saver import DurableSaver
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
    "EventLoopNotRunningError",
    "FlushTimeoutError",
    "InvalidIdentifierError",
    "MissingValueError",
    "OutboxFullError",
    "ReplicationTimeoutError",
    "SaverClosedError",
    "SchemaVersionError",
    "SerializationError",
    "SyncCallInEventLoopError",
    "ThreadDeletedError",
    "ThreadInfo",
    "ThreadPage",
    "TierUnavailableError",
]

__version__ = "0.1.0"

_moved.install()  # the module names of earlier releases (langgraph_durable.extref_gc, ...)
