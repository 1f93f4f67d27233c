"""Compatibility name of :mod:`langgraph_durable.extref_gc` (garbage collection of the
external blob store's objects); the notebooks and earlier releases import it from here.
New code imports ``langgraph_durable.extref_gc``."""

from .extref_gc import *  # noqa: F403
from .extref_gc import __all__ as __all__
from .extref_gc import scan_pattern as scan_pattern
from .extref_gc import thread_hash as thread_hash
