"""Driving a generator of steps to its end: the one place that sends replies into a
plan (or any generator of steps: the saver's listing, the flush loop, a journaled call),
throws errors into it and takes its return value from ``StopIteration``.

Two shapes, one semantics:

- ``Steps(gen)``, a cursor for a loop whose body does more than compute a reply (it
  yields to its own caller, awaits, or decides per step what an error becomes):
  ``for step in (run := Steps(gen)): run.send(reply)`` / ``run.throw(exc)``; after the
  loop ``run.value`` is the generator's return value. A step answered by neither is sent
  ``None``.
- ``drive(gen, step)`` / ``adrive(gen, astep)``: that loop where each step's reply is
  ``step(op)`` (``await astep(op)``); an error of a type in ``throws`` (default
  ``Exception``) is thrown into the generator (which may handle it); any other error
  propagates to the caller, the generator left where it was.

Pure: no I/O, no imports of the package (``io/drivers.py`` runs plans with it)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Generator, Iterator
from typing import Any, Generic, TypeVar

S = TypeVar("S")
R = TypeVar("R")


class Steps(Generic[S, R]):
    """Iterate the steps of ``gen``: each ``next`` sends it the reply set by ``send`` (or
    throws the error set by ``throw``) since the previous step, ``None`` when neither was
    called. Iteration ends when ``gen`` returns; ``value`` is then what it returned. An
    error ``gen`` raises (also one thrown into it that it does not handle) propagates
    from ``next``."""

    __slots__ = ("_gen", "_reply", "_error", "value")

    def __init__(self, gen: Generator[S, Any, R]) -> None:
        self._gen = gen
        self._reply: Any = None
        self._error: BaseException | None = None
        self.value: R | None = None
        """What ``gen`` returned (None before it ended)."""

    def __iter__(self) -> Iterator[S]:
        return self

    def __next__(self) -> S:
        reply, error = self._reply, self._error
        self._reply = self._error = None
        try:
            return self._gen.throw(error) if error is not None else self._gen.send(reply)
        except StopIteration as stop:
            self.value = stop.value
            raise StopIteration from None

    def send(self, reply: Any) -> None:
        """Answer the current step with ``reply`` (sent in at the next step)."""
        self._reply, self._error = reply, None

    def throw(self, error: BaseException) -> None:
        """Answer the current step with ``error`` (thrown in at the next step)."""
        self._reply, self._error = None, error


def drive(gen: Generator[S, Any, R], step: Callable[[S], Any],
          throws: tuple[type[BaseException], ...] = (Exception,)) -> R:
    """Run ``gen`` to its end, ``step(op)`` giving each step's reply; an error of a type
    in ``throws`` is thrown into ``gen``, any other propagates. Returns ``gen``'s return
    value."""
    reply: Any = None
    error: BaseException | None = None
    while True:  # ``Steps`` written out: this loop runs every operation of every plan
        try:
            op = gen.send(reply) if error is None else gen.throw(error)
        except StopIteration as stop:
            return stop.value  # type: ignore[no-any-return]
        try:
            reply, error = step(op), None
        except throws as exc:
            reply, error = None, exc


async def adrive(gen: Generator[S, Any, R], astep: Callable[[S], Awaitable[Any]],
                 throws: tuple[type[BaseException], ...] = (Exception,)) -> R:
    """``drive`` under asyncio: ``await astep(op)`` gives each step's reply."""
    reply: Any = None
    error: BaseException | None = None
    while True:
        try:
            op = gen.send(reply) if error is None else gen.throw(error)
        except StopIteration as stop:
            return stop.value  # type: ignore[no-any-return]
        try:
            reply, error = await astep(op), None
        except throws as exc:
            reply, error = None, exc
