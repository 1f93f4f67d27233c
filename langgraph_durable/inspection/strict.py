"""Decoding for the operator's tools (the CLI and the dashboard) that never runs stored
data: msgpack constructor entries revive only the types of an allowlist (LangChain
messages, LangGraph's own types, what the operator names); any other one becomes a
``NotDecoded`` placeholder, decided on the names alone (the named module is never
imported to find out).

LangGraph's ``JsonPlusSerializer`` revives every ``(module, name)`` a stored value names
unless it is made strict (``LANGGRAPH_STRICT_MSGPACK`` or ``allowed_msgpack_modules``);
even strict, it returns a blocked entry's raw arguments, which look like data. The tools
show a typed placeholder instead: ``<not decoded: os.system (not in the allowlist)>``.
"""

from __future__ import annotations

import copy
import importlib
import logging
import re
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import ormsgpack
from langgraph.checkpoint.serde import _msgpack as lg_msgpack
from langgraph.checkpoint.serde import jsonplus
from langgraph.checkpoint.serde.encrypted import EncryptedSerializer
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer
from langgraph.checkpoint.serde.types import _DeltaSnapshot

from ..serde.external import ExternalRefSerializer
from .tolerant import TolerantSerde, Undecodable

__all__ = ["TOOL_TYPES", "NotDecoded", "contains_placeholder", "parse_type", "strict_serde",
           "strict_view"]

log = logging.getLogger("langgraph_durable.inspection")

TOOL_TYPES: frozenset[tuple[str, str]] = frozenset(
    {(str(k[0]), str(k[1])) for k in lg_msgpack.SAFE_MSGPACK_TYPES if len(k) == 2}
    | {("langchain_core.agents", n)
       for n in ("AgentAction", "AgentActionMessageLog", "AgentFinish", "AgentStep")}
    | {("pydantic.types", "SecretStr"), ("pydantic.types", "SecretBytes")})
"""The ``(module, name)`` pairs the tools revive without being told: LangGraph's own
``SAFE_MSGPACK_TYPES`` (datetime, UUID, Decimal, sets, deques, paths, ``ZoneInfo``, the
LangChain messages and ``Document``, LangGraph's ``Send``, ``Interrupt``, ``Command``,
``Overwrite``, the store's ``Item`` ...), LangChain's agent steps and pydantic's secret
strings (data classes whose construction runs nothing of the stored data's choosing).
DataFrames, Series and arrays need no entry:
``ExternalRefSerializer`` reads them with its own codecs (Parquet, ``.npy``), and an
inline NumPy array is plain bytes."""

_CONSTRUCTORS = frozenset({jsonplus.EXT_CONSTRUCTOR_SINGLE_ARG, jsonplus.EXT_CONSTRUCTOR_POS_ARGS,
                           jsonplus.EXT_CONSTRUCTOR_KW_ARGS, jsonplus.EXT_METHOD_SINGLE_ARG,
                           jsonplus.EXT_PYDANTIC_V1, jsonplus.EXT_PYDANTIC_V2})
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*")


class NotDecoded:
    """Stands for a stored msgpack entry the tools did not revive: ``name`` is what it
    names (``"os.system"``, ``"myapp.models.Order"``), ``reason`` why it was not revived
    (``"not in the allowlist"``, ``"failed: TypeError"``). Shown, never written back (no
    serializer can store it, so a fork that meets one is refused)."""

    __slots__ = ("name", "reason")

    def __init__(self, name: str, reason: str) -> None:
        self.name, self.reason = name, reason

    def __repr__(self) -> str:
        return f"<not decoded: {self.name} ({self.reason})>"

    __str__ = __repr__

    def __eq__(self, other: object) -> bool:
        return (isinstance(other, NotDecoded)
                and (self.name, self.reason) == (other.name, other.reason))

    def __hash__(self) -> int:
        return hash((self.name, self.reason))


def parse_type(text: str) -> tuple[str, str]:
    """An ``--allow-type`` value, ``module.Class`` or ``module:Class``, as the ``(module,
    name)`` pair a msgpack entry names (the class's ``__module__`` and ``__name__``).
    Nothing is imported. Raises ``ValueError`` naming the text when it is not of that
    form."""
    raw = text.strip()
    module, sep, name = raw.partition(":")
    if not sep:
        module, _, name = raw.rpartition(".")
    if not module or not name or not _NAME.fullmatch(module) or not _NAME.fullmatch(name) \
            or "." in name:
        raise ValueError(f"expected a type as module.Class (or module:Class), got {text!r}")
    return module, name


def _normalized(types: Iterable[tuple[str, ...] | type | str]) -> frozenset[tuple[str, str]]:
    out: set[tuple[str, str]] = set()
    for t in types:
        if isinstance(t, str):
            out.add(parse_type(t))
        elif isinstance(t, type):
            out.add((t.__module__, t.__name__))
        elif len(t) >= 2:
            out.add((str(".".join(t[:-1])), str(t[-1])))
    return frozenset(out)


def _build(code: int, cls: Any, args: Any) -> Any:
    """What LangGraph's ext hook builds from an allowed entry of ``code``."""
    if code == jsonplus.EXT_CONSTRUCTOR_SINGLE_ARG:
        return cls(args)
    if code == jsonplus.EXT_CONSTRUCTOR_POS_ARGS:
        return cls(*args)
    if code == jsonplus.EXT_CONSTRUCTOR_KW_ARGS:
        return cls(**args)
    try:  # pydantic v1 / v2: validated, else as stored (LangGraph does the same)
        return cls(**args)
    except Exception:
        construct = getattr(cls, "model_construct" if code == jsonplus.EXT_PYDANTIC_V2
                            else "construct")
        return construct(**args)


def strict_ext_hook(allowed: Iterable[tuple[str, str]]) -> Callable[[int, bytes], Any]:
    """A msgpack ``ext_hook`` for ``JsonPlusSerializer`` that revives a constructor entry
    only when its ``(module, name)`` is in ``allowed`` (a method entry only for LangGraph's
    ``SAFE_MSGPACK_METHODS``: ``datetime.fromisoformat``), checked before anything is
    imported; any other entry becomes ``NotDecoded``, as does an allowed one that fails to
    build. Nested entries go through the same hook."""
    names = frozenset(allowed)

    def unpack(data: bytes) -> Any:
        return ormsgpack.unpackb(data, ext_hook=hook, option=ormsgpack.OPT_NON_STR_KEYS)

    def hook(code: int, data: bytes) -> Any:
        if code == jsonplus.EXT_DELTA_SNAPSHOT:
            return _DeltaSnapshot(unpack(data))
        if code == jsonplus.EXT_NUMPY_ARRAY:  # dtype, shape, order, bytes: nothing to run
            return jsonplus._msgpack_ext_hook(code, data)
        if code not in _CONSTRUCTORS:
            return NotDecoded(f"msgpack extension {code}", "unknown extension type")
        try:
            tup = unpack(data)
        except Exception as exc:
            return NotDecoded(f"msgpack extension {code}", f"corrupt: {type(exc).__name__}")
        if not (isinstance(tup, (list, tuple)) and len(tup) >= 3
                and isinstance(tup[0], str) and isinstance(tup[1], str)):
            return NotDecoded(f"msgpack extension {code}", "malformed entry")
        module, name, args = tup[0], tup[1], tup[2]
        if code == jsonplus.EXT_METHOD_SINGLE_ARG:
            method = tup[3] if len(tup) > 3 and isinstance(tup[3], str) else "?"
            if (module, name, method) not in lg_msgpack.SAFE_MSGPACK_METHODS:
                return NotDecoded(f"{module}.{name}.{method}", "method not in the allowlist")
            try:
                return getattr(getattr(importlib.import_module(module), name), method)(args)
            except Exception as exc:
                return NotDecoded(f"{module}.{name}.{method}", f"failed: {type(exc).__name__}")
        if (module, name) not in names:
            return NotDecoded(f"{module}.{name}", "not in the allowlist")
        try:
            if (module, name) == ("langgraph.types", "Send"):
                return jsonplus._send_from_args(args)
            return _build(code, getattr(importlib.import_module(module), name), args)
        except Exception as exc:
            return NotDecoded(f"{module}.{name}", f"failed: {type(exc).__name__}")

    return hook


def _strict_jsonplus(serde: JsonPlusSerializer, extra: frozenset[tuple[str, str]]
                     ) -> JsonPlusSerializer:
    """A copy of ``serde`` (its class kept) that decodes with ``strict_ext_hook``: the
    tools' types, ``extra`` and the pairs ``serde``'s own allowlist names (not its
    "allow everything"); no pickle; JSON constructors only of those types."""
    own = serde.__dict__.get("_allowed_msgpack_modules")
    names = TOOL_TYPES | extra | (_normalized(own) if isinstance(own, (set, frozenset))
                                  else frozenset())
    clone = copy.copy(serde)
    clone.pickle_fallback = False
    clone._allowed_msgpack_modules = set(names)
    clone._custom_unpack_ext_hook = True
    clone._unpack_ext_hook = strict_ext_hook(names)
    clone._allowed_json_modules = {(*m.split("."), n) for m, n in names} or None
    return clone


def strict_serde(serde: Any, allow_types: Iterable[tuple[str, ...] | type | str] = ()) -> Any:
    """The tools' version of an application's serializer ``serde`` (None: LangGraph's
    default): the same structure, ciphers and blob store, every ``JsonPlusSerializer`` in
    it (also inside an ``EncryptedSerializer``, an ``ExternalRefSerializer`` or a
    ``TolerantSerde``) made strict (``strict_ext_hook`` over ``TOOL_TYPES``,
    ``allow_types`` and its own allowlist). ``allow_types``: ``"module.Class"`` strings,
    ``(module, name)`` pairs or classes. A serializer of another kind is kept as it is,
    with a warning (the tools cannot tell what it revives). Raises ``ValueError`` for an
    ``allow_types`` string not of the form ``module.Class``."""
    extra = _normalized(allow_types)
    if serde is None:
        return _strict_jsonplus(JsonPlusSerializer(), extra)
    if isinstance(serde, TolerantSerde):
        return TolerantSerde(strict_serde(serde.inner, extra))
    if isinstance(serde, ExternalRefSerializer):  # a JsonPlusSerializer subclass: first
        clone = copy.copy(serde)
        clone.inner = strict_serde(serde.inner, extra)
        return clone
    if isinstance(serde, EncryptedSerializer):
        sealed = copy.copy(serde)
        sealed.serde = strict_serde(serde.serde, extra)
        return sealed
    if isinstance(serde, JsonPlusSerializer):
        return _strict_jsonplus(serde, extra)
    log.warning("the tools cannot make serializer %s.%s strict: stored values are decoded as "
                "it decodes them", type(serde).__module__, type(serde).__qualname__)
    return serde


def strict_view(saver: Any, allow_types: Iterable[tuple[str, ...] | type | str] = (), *,
                tolerant: bool = True) -> Any:
    """A shallow copy of ``saver`` (a ``DurableSaver``: same clients, runtime, flusher)
    whose serializer is ``strict_serde(saver.serde, allow_types)`` (wrapped in a
    ``TolerantSerde`` with ``tolerant``: undecodable values shown, not raised), with an
    item store of its own: nothing the application decoded is reused."""
    view = copy.copy(saver)
    serde = strict_serde(saver.serde, allow_types)
    if tolerant and not isinstance(serde, TolerantSerde):
        serde = TolerantSerde(serde)
    view.serde = serde
    return view


def contains_placeholder(value: Any, depth: int = 0) -> str | None:
    """The first ``NotDecoded`` or ``Undecodable`` found in ``value`` (containers,
    pydantic models, dataclasses and objects' attributes, down to 30 levels), as text;
    None when there is none."""
    if isinstance(value, (NotDecoded, Undecodable)):
        return repr(value)
    if depth > 30 or value is None or isinstance(value, (str, bytes, bytearray, int, float)):
        return None
    if isinstance(getattr(value, "shape", None), tuple):  # a DataFrame, an array
        return None
    if isinstance(value, Mapping):
        items: Iterable[Any] = [*value.keys(), *value.values()]
    elif isinstance(value, (list, tuple, set, frozenset)):
        items = value
    else:
        fields = getattr(value, "__dict__", None)
        items = list(fields.values()) if isinstance(fields, dict) else []
        items += [getattr(value, s, None) for s in getattr(type(value), "__slots__", ())
                  if isinstance(s, str)]
    for item in items:
        found = contains_placeholder(item, depth + 1)
        if found is not None:
            return found
    return None
