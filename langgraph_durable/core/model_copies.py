"""Copies of pydantic models (sans-I/O), what the item cache of ``core/items.py`` keeps:
a model's *snapshot* (its type, a copy of its fields and extra fields) to tell whether an
object met again still serializes as before (``unchanged``), and a *template* that makes a
fresh object equal to what decoding a stored item gave, sharing no mutable data with it
(``ModelTemplate.build``), so a read need not decode the same item twice.
"""

from __future__ import annotations

import copy
import functools
from typing import TYPE_CHECKING, TypeGuard, overload

if TYPE_CHECKING:
    from pydantic import BaseModel

Typed = tuple[str, bytes]
"""A serializer's typed value: ``(type, bytes)`` (as in ``core/items.py``)."""

Snapshot = tuple["type[BaseModel]", dict[str, object], object]
"""A pydantic model as ``snapshot_of`` copies it: its type, its fields, its extra fields."""


def is_model(value: object) -> TypeGuard[BaseModel]:
    """Whether ``value`` is a pydantic model (pydantic imported on first use)."""
    return isinstance(value, _base_model())


@functools.lru_cache(maxsize=1)
def _base_model() -> type:
    from pydantic import BaseModel

    return BaseModel


_SCALARS = frozenset({str, int, float, bool, type(None), bytes})


@overload
def _copy(value: dict[str, object]) -> dict[str, object]: ...
@overload
def _copy(value: object) -> object: ...
def _copy(value: object) -> object:
    """A deep copy of plain data (scalars shared, dicts/lists/tuples copied), else
    ``copy.deepcopy``. Scalars are tested inline: a message's fields are mostly scalars,
    and a snapshot is taken of every message a read decodes."""
    if type(value) is dict:
        return {k: v if type(v) in _SCALARS else _copy(v) for k, v in value.items()}
    if type(value) is list:
        return [v if type(v) in _SCALARS else _copy(v) for v in value]
    if type(value) in _SCALARS:
        return value
    if type(value) is tuple:
        return tuple(v if type(v) in _SCALARS else _copy(v) for v in value)
    return copy.deepcopy(value)


def snapshot_of(item: BaseModel) -> Snapshot:
    """What a pydantic model's serialization holds (``model_dump``): its type, a copy of
    its fields (``__dict__``) and of its extra fields."""
    return type(item), _copy(item.__dict__), _copy(getattr(item, "__pydantic_extra__", None))


def model_snapshot(item: object) -> Snapshot | None:
    """``snapshot_of(item)`` for a pydantic model; None for anything else or a model whose
    fields cannot be copied."""
    if not is_model(item):
        return None
    try:
        return snapshot_of(item)
    except Exception:
        return None


class ModelTemplate:
    """How to make a fresh object equal to what decoding one stored item gave: the
    decoded model's snapshot (``snapshot_of``), its set fields and private attributes,
    taken before anyone else saw the object."""

    __slots__ = ("snapshot", "fields_set", "private", "typed", "base", "containers")

    def __init__(self, obj: BaseModel, typed: Typed) -> None:
        self.typed = typed  # the stored item it was decoded from
        self.snapshot = snapshot_of(obj)
        self.fields_set = frozenset(obj.__pydantic_fields_set__)
        self.private = copy.deepcopy(getattr(obj, "__pydantic_private__", None))
        fields = self.snapshot[1]
        # most fields are scalars (shared) or empty dicts/lists (made anew): a build
        # copies the dict (keeping the field order: repr and model_dump follow it) and
        # replaces its containers with copies
        self.base = fields  # never changed: only copied
        self.containers = [(k, v, not v and type(v) in (dict, list))
                           for k, v in fields.items() if type(v) not in _SCALARS]

    def build(self) -> BaseModel:
        """A new model equal to the decoded one, sharing no mutable data with it (what
        pydantic's ``model_copy(deep=True)`` makes, from the snapshot)."""
        cls = self.snapshot[0]
        extra = self.snapshot[2]
        fields = self.base.copy()
        for k, v, empty in self.containers:
            fields[k] = type(v)() if empty else _copy(v)
        obj = cls.__new__(cls)
        object.__setattr__(obj, "__dict__", fields)
        if extra is not None:  # a dict (LangChain's messages allow extra fields)
            extra = _copy(extra) if extra else {}
        object.__setattr__(obj, "__pydantic_extra__", extra)
        object.__setattr__(obj, "__pydantic_fields_set__", set(self.fields_set))
        object.__setattr__(obj, "__pydantic_private__", None if self.private is None
                           else copy.deepcopy(self.private))
        return obj


def unchanged(snapshot: Snapshot, item: object) -> bool:
    """Whether a pydantic model still equals its snapshot (``==`` field by field)."""
    try:
        return (snapshot[0] is type(item) and snapshot[1] == item.__dict__
                and snapshot[2] == getattr(item, "__pydantic_extra__", None))
    except Exception:
        return False
