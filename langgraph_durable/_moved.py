"""The module names of earlier releases, kept importable after the layout by layer.

``import langgraph_durable.extref_gc`` (and the other names in ``MOVED``) still works: a
meta-path finder gives the module at its new place under its old name, the same module
object (so its private names, ``isinstance`` checks and monkeypatching behave as before),
and warns once with a ``DeprecationWarning`` naming the new place. Installed by
``langgraph_durable/__init__.py``.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import sys
import warnings
from types import ModuleType

MOVED: dict[str, str] = {
    "blobs": "admin.extref_gc",
    "clients": "io.clients",
    "coalesce": "io.coalesce",
    "context": "plans.context",
    "deferred": "runtime.deferred",
    "drivers": "io.drivers",
    "extref_gc": "admin.extref_gc",
    "item_migration": "admin.item_migration",
    "items": "core.items",
    "lifecycle": "runtime.lifecycle",
    "migrations": "plans.migrations",
    "records": "core.records",
    "redis_urls": "io.redis_urls",
    "runtime": "runtime.base",
    "schema": "core.schema",
    "startup": "runtime.startup",
    "testing_cluster": "testing.cluster",
}
"""Old module name -> new one, both relative to ``langgraph_durable``."""

_PKG = __name__.rsplit(".", 1)[0]


class _Alias(importlib.abc.Loader):
    def __init__(self, new: str) -> None:
        self.new = new

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType:
        warnings.warn(f"{spec.name} moved to {self.new}; import it from there",
                      DeprecationWarning, stacklevel=2)
        return importlib.import_module(self.new)

    def exec_module(self, module: ModuleType) -> None:
        """Nothing to run: the module was executed under its new name."""


class MovedModules(importlib.abc.MetaPathFinder):
    """Finds ``langgraph_durable.<old>`` for every name in ``MOVED``."""

    def find_spec(self, fullname: str, path: object = None,
                  target: object = None) -> importlib.machinery.ModuleSpec | None:
        head, _, tail = fullname.rpartition(".")
        if head != _PKG or tail not in MOVED:
            return None
        return importlib.machinery.ModuleSpec(fullname, _Alias(f"{_PKG}.{MOVED[tail]}"))


def install() -> None:
    """Put the finder on ``sys.meta_path`` once (idempotent)."""
    if not any(isinstance(f, MovedModules) for f in sys.meta_path):
        sys.meta_path.append(MovedModules())
