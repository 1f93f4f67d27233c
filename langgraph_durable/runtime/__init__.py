"""The saver's runtime: ``SaverRuntime`` (``base``), set-up, lifecycle, deferred calls.

Earlier releases had a module ``langgraph_durable.runtime`` (now ``runtime/base.py``);
this package took its name, so ``from langgraph_durable.runtime import SaverRuntime``
still works: a name of ``runtime.base`` read from here is given from there with a
``DeprecationWarning`` naming the new place, once per name (``AttributeError`` for any
other name, and for a module ``base`` imports).
"""

from __future__ import annotations

import importlib
import warnings
from types import ModuleType
from typing import Any


def __getattr__(name: str) -> Any:
    """The old module's name ``name`` from ``runtime.base``, with a deprecation warning.

    Raises ``AttributeError`` when ``runtime.base`` has no such name (or it is dunder).
    """
    if name.startswith("__"):
        raise AttributeError(name)
    base = importlib.import_module(f"{__name__}.base")
    try:
        value = getattr(base, name)
    except AttributeError:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}") from None
    if isinstance(value, ModuleType):  # a submodule (``from . import lifecycle``)
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    warnings.warn(f"{__name__}.{name} moved to {base.__name__}; import it from there",
                  DeprecationWarning, stacklevel=2)
    globals()[name] = value  # warned once: later reads find it here
    return value
