"""The Lua scripts of the package, one file per script (``<name>.lua`` here), and the
loader that gives their final source.

A script file opens with a header naming every KEYS and ARGV entry, its reply and the
errors it raises (``redis.error_reply``), then names its KEYS once as locals. Parts shared
by several scripts live in ``include/<part>.lua`` and are pulled in by a line
``--- @include "<part>"`` (as BullMQ's ``src/commands/*.lua``): the loader replaces the line
by the part's text, itself resolved the same way. A part is included once per script
however many lines name it (the later lines are dropped); a cycle of includes raises
``LuaIncludeError`` naming the files. Nothing here generates Lua: a part that needs an
ARGV offset or a key takes it as a function parameter.

``source(name)`` is the text Redis runs (its SHA1 is what EVALSHA sends); sources are
read once, from the package data (``importlib.resources``). ``eval_command(op)`` is a
``Script`` operation as a command of a ``Pipeline`` (``EVAL``), for the few scripts sent
many to one round trip beside other commands.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Sequence
from importlib import resources
from typing import Any

from ...core.ops import Script

_INCLUDE = re.compile(r'^--- @include "([A-Za-z0-9_]+)"\s*$')


class LuaIncludeError(ValueError):
    """A ``--- @include`` that cannot be resolved: a missing part or a cycle of parts
    (the message names the files)."""


def _read(path: str) -> str:
    """The text of the package's Lua file ``path`` (relative to this package)."""
    try:
        return resources.files(__package__).joinpath(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise LuaIncludeError(f"no Lua file {path!r} in {__package__}") from None


def resolve(name: str, read: Callable[[str], str] = _read) -> str:
    """The source of script ``name``: ``read("<name>.lua")`` with each ``--- @include
    "<part>"`` line replaced by the resolved text of ``read("include/<part>.lua")`` the
    first time the script names the part, and dropped after. Raises ``LuaIncludeError``
    for an include cycle (naming the files in order) or a missing file."""
    return "\n".join(_resolve(read, f"{name}.lua", set(), ())) + "\n"


def _resolve(read: Callable[[str], str], path: str, done: set[str],
             stack: tuple[str, ...]) -> list[str]:
    """The lines of ``path`` with its includes expanded; ``done``: parts already included
    in this script; ``stack``: the files being expanded (a cycle check)."""
    lines: list[str] = []
    for line in read(path).splitlines():
        m = _INCLUDE.match(line)
        if m is None:
            lines.append(line)
            continue
        part = f"include/{m.group(1)}.lua"
        if part in stack or part == path:
            raise LuaIncludeError("Lua include cycle: " + " -> ".join((*stack, path, part)))
        if part in done:
            continue
        done.add(part)
        lines.extend(_resolve(read, part, done, (*stack, path)))
    return lines


@functools.cache
def source(name: str) -> str:
    """The final Lua source of the package's script ``name`` (``resolve`` of
    ``hot/lua/<name>.lua``, read once): the text Redis runs, whose SHA1 EVALSHA sends."""
    return resolve(name)


def sources(names: Sequence[str]) -> dict[str, str]:
    """Script name -> final source, for each of ``names``."""
    return {n: source(n) for n in names}


def eval_command(op: Script[Any]) -> list[object]:
    """``op`` as a command of a ``Pipeline``: ``EVAL`` of its script's final source with its
    KEYS and ARGV (the source sent each time, as ``EVAL`` does: the pipeline needs no
    loaded script). The pipeline's reply in its place is the raw reply: ``op.reply_of``
    types it. ``op``'s ``refusals`` and ``wait_replicas`` do not apply there."""
    return ["EVAL", source(op.name), len(op.keys), *op.keys, *op.args]
