"""Hot tier: Redis, write-through. Key layout (``keys``) and atomic Lua scripts (``scripts``)."""

from .keys import ThreadKeys, outbox_key
from .scripts import SCRIPTS

__all__ = ["SCRIPTS", "ThreadKeys", "outbox_key"]
