"""What every plan needs to know: configuration, serializer, key and collection names."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .config import DurableConfig
from .durable.documents import Collections
from .hot.keys import ThreadKeys, outbox_key


@dataclass(frozen=True)
class Context:
    """Immutable facts shared by the saver, its plans and the flusher."""

    config: DurableConfig
    serde: Any
    queryable: bool
    cluster: bool = False

    @property
    def outbox(self) -> str:
        """Name of the outbox stream."""
        return outbox_key(self.config.key_prefix)

    @property
    def collections(self) -> Collections:
        """Names of the MongoDB collections."""
        return Collections.with_prefix(self.config.collection_prefix)

    def keys(self, thread_id: str) -> ThreadKeys:
        """The Redis keys of ``thread_id``."""
        return ThreadKeys(self.config.key_prefix, thread_id)

    def script_keys(self, thread_id: str) -> list[str]:
        """KEYS for a writing script: the thread's keys, plus the outbox unless on a cluster."""
        keys = self.keys(thread_id).all
        return keys if self.cluster else [*keys, self.outbox]
