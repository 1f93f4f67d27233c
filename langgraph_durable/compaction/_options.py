"""Trigger and keep options in LangChain's ``SummarizationMiddleware`` forms (internal).

A *context size* is ``("tokens", n)``, ``("messages", n)`` or ``("fraction", f)`` (a fraction
of the model profile's ``max_input_tokens``). A *trigger* is one context size, a clause dict
such as ``{"tokens": 4000, "messages": 10}`` (all must hold), or a list of either (any
clause may hold). Fractions are resolved to tokens once, when a compactor is built.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Literal

ContextSize = tuple[Literal["tokens", "messages", "fraction"], int | float]
"""``("tokens", n)``, ``("messages", n)`` or ``("fraction", f)`` with ``0 < f <= 1``."""

TriggerSpec = ContextSize | Mapping[str, int | float] | Sequence[Any]
"""A context size, a clause dict (AND) or a list of them (OR)."""

Clause = dict[str, int]
"""A resolved trigger clause: ``{"tokens": n}`` and/or ``{"messages": n}``, all must hold."""

_KINDS = ("tokens", "messages", "fraction")
_TRIGGER_FORMS = (
    "('tokens', n), ('messages', n), ('fraction', f), a dict such as "
    "{'tokens': n, 'messages': m} (all must hold) or a list of these (any may hold)"
)
_KEEP_FORMS = "('messages', n), ('tokens', n) or ('fraction', f)"
START_ON_VALUES = ("human",)
"""Accepted ``start_on`` values (besides ``None``)."""


def resolve_start_on(start_on: Any) -> str | None:
    """Validate ``start_on``: ``"human"`` or ``None``.

    Only a human start makes sense for a kept history: providers reject one that starts
    (after system messages) on an assistant or tool message, and a tool message cannot
    start a pair-safe window. A misspelling must not silently turn the guarantee off.

    Raises:
        ValueError: On any other value, naming it and the accepted ones.
    """
    if start_on is None:
        return None
    if isinstance(start_on, str) and start_on in START_ON_VALUES:
        return start_on
    hint = " (LangChain's type of a user message is 'human')" if start_on == "user" else ""
    raise ValueError(
        f"start_on must be one of {START_ON_VALUES} or None, got {start_on!r}{hint}"
    )


def resolve_keep(keep: Any, limit: int | None) -> tuple[str, int]:
    """Validate a ``keep`` context size; a fraction becomes ``("tokens", n)``.

    Raises:
        ValueError: When ``keep`` is not a ``(kind, value)`` pair or the size is invalid
            (see ``resolve_size``).
    """
    if not isinstance(keep, (tuple, list)) or len(keep) != 2 or not isinstance(keep[0], str):
        raise ValueError(f"keep: cannot read {keep!r}; use {_KEEP_FORMS}")
    return resolve_size(keep[0], keep[1], limit, "keep")


def profile_limit(model: Any) -> int | None:
    """``max_input_tokens`` of a chat model's ``profile``, or ``None`` when unknown."""
    profile = getattr(model, "profile", None)
    if isinstance(profile, Mapping):
        limit = profile.get("max_input_tokens")
        if isinstance(limit, int) and not isinstance(limit, bool) and limit > 0:
            return limit
    return None


def resolve_size(kind: str, value: Any, limit: int | None, what: str) -> tuple[str, int]:
    """Validate one context size and turn a fraction into ``("tokens", n)``.

    Raises:
        ValueError: On an unknown kind, a non-numeric or non-positive value, an integer
            kind given a float, a fraction outside ``(0, 1]``, or a fraction without a
            model profile ``limit``.
    """
    if kind not in _KINDS:
        raise ValueError(f"{what}: unknown kind {kind!r} (use one of {', '.join(_KINDS)})")
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError(f"{what}: {kind} must be a number, got {value!r}")
    if kind == "fraction":
        if not 0 < value <= 1:
            raise ValueError(f"{what}: fraction must be in (0, 1], got {value}")
        if limit is None:
            raise ValueError(
                f"{what}: ('fraction', {value}) needs the model profile's max_input_tokens; "
                "pass a model with profile={'max_input_tokens': ...} or use tokens"
            )
        return "tokens", max(1, int(limit * value))
    if not isinstance(value, int) or value <= 0:
        raise ValueError(f"{what}: {kind} must be a positive integer, got {value!r}")
    return kind, value


def normalize_trigger(trigger: TriggerSpec | None, limit: int | None) -> list[Clause]:
    """Resolve ``trigger`` into clauses (OR of ANDs); ``None`` gives no clause.

    Raises:
        ValueError: On a value of none of the accepted forms (a bare number, a string),
            an empty clause or any invalid size (see ``resolve_size``); the message shows
            the accepted forms.
    """
    if trigger is None:
        return []
    items: Sequence[Any]
    if isinstance(trigger, (tuple, Mapping)):
        items = [trigger]
    elif isinstance(trigger, list):
        items = trigger
    else:
        raise ValueError(f"trigger: cannot read {trigger!r}; use {_TRIGGER_FORMS}")
    clauses: list[Clause] = []
    for item in items:
        if isinstance(item, Mapping):
            pairs = list(item.items())
        elif isinstance(item, (tuple, list)) and len(item) == 2:
            pairs = [tuple(item)]
        else:
            pairs = []
        if not pairs or not all(isinstance(kind, str) for kind, _ in pairs):
            raise ValueError(f"trigger: cannot read clause {item!r}; use {_TRIGGER_FORMS}")
        clause: Clause = {}
        for kind, value in pairs:
            key, number = resolve_size(kind, value, limit, "trigger")
            clause[key] = min(number, clause.get(key, number))
        clauses.append(clause)
    return clauses


def clause_met(clause: Mapping[str, int], tokens: int, messages: int) -> bool:
    """Whether ``tokens`` and ``messages`` reach every threshold of ``clause``."""
    return tokens >= clause.get("tokens", 0) and messages >= clause.get("messages", 0)


def token_threshold(clauses: Sequence[Mapping[str, int]]) -> int | None:
    """The smallest ``tokens`` threshold among ``clauses`` (``None`` when there is none)."""
    values = [c["tokens"] for c in clauses if "tokens" in c]
    return min(values) if values else None
