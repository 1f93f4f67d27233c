"""How many of a store's asyncio calls run at once, and which share one run (the io side
of ``DurableStore.abatch``; plans know nothing of it).

A burst of thousands of gathered calls (``asyncio.gather`` of ``aput``/``aget``/``asearch``)
would otherwise start every call in one loop turn: each call's decoding and serializing
then runs between the same two I/O waits, the loop's turns grow to seconds, and a server
timeout (a Redis reply's, MongoDB's heartbeat) expires while the loop is busy with others'
work. ``Admission`` lets ``MAX_ASYNC_BATCHES`` calls of a store run at once per event loop;
the others wait their turn, without a timeout.

While a search or a namespace listing waits for its turn, an identical one (same op) made
meanwhile joins it: one run answers both. That is the answer the later call would get
from a run of its own started at the same moment, because the shared run starts after
both calls were made (a read never joins a run already started, so it sees every write
that returned before it was made). Each joiner gets its own copy of the answer.
"""

from __future__ import annotations

import asyncio
import collections
import copy
import weakref
from collections.abc import Awaitable, Callable

from langgraph.store.base import ListNamespacesOp, Op, Result, SearchOp

MAX_ASYNC_BATCHES = 64
"""Most ``abatch`` calls (each ``aget``, ``aput``... is one) of one store that run at once
on an event loop; Redis still receives the calls of a loop turn together
(``io/coalesce.py``)."""


class _Loop:
    """One event loop's slots and the shareable reads waiting for one: ``free`` slots,
    and the calls waiting for one in arrival order (``queue``, each a future a leaving
    call hands its slot to). A call that finds a slot free and nobody waiting takes it
    without awaiting anything (an ``asyncio.Semaphore``'s ``async with`` cost a lone
    call two more coroutines)."""

    __slots__ = ("free", "queue", "waiting")

    def __init__(self) -> None:
        self.free = MAX_ASYNC_BATCHES
        self.queue: collections.deque[asyncio.Future[None]] = collections.deque()
        self.waiting: dict[Op, asyncio.Future[list[Result]]] = {}

    async def acquire(self) -> None:
        """Take a slot, waiting for one (first come, first served) when none is free."""
        if self.free > 0 and not self.queue:
            self.free -= 1
            return
        turn: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self.queue.append(turn)
        try:
            await turn
        except asyncio.CancelledError:
            if turn.done() and not turn.cancelled():  # handed a slot, then cancelled
                self.release()
            raise

    def release(self) -> None:
        """Give a slot back: to the first call still waiting, else to ``free``."""
        while self.queue:
            turn = self.queue.popleft()
            if not turn.done():
                turn.set_result(None)
                return
        self.free += 1


class Admission:
    """Per event loop: ``MAX_ASYNC_BATCHES`` slots, and identical waiting reads shared."""

    def __init__(self) -> None:
        self._loops: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _Loop] = (
            weakref.WeakKeyDictionary())
        self._last: tuple[weakref.ref[asyncio.AbstractEventLoop], _Loop] | None = None

    def _loop(self) -> _Loop:
        loop = asyncio.get_running_loop()
        last = self._last
        if last is not None and last[0]() is loop:  # the loop of the previous call
            return last[1]
        state = self._loops.get(loop)
        if state is None:
            state = self._loops[loop] = _Loop()
        self._last = (weakref.ref(loop), state)
        return state

    async def run(self, ops: list[Op],
                  batch: Callable[[list[Op]], Awaitable[list[Result]]]) -> list[Result]:
        """``await batch(ops)`` in a slot of the running loop; a lone search or namespace
        listing joins an identical one waiting for a slot (its own deep copy of the
        answer, or the same error)."""
        state = self._loop()
        key = _shareable(ops)
        if key is None:
            await state.acquire()
            try:
                return await batch(ops)
            finally:
                state.release()
        waiting = state.waiting.get(key)
        if waiting is not None:
            try:
                answer = await asyncio.shield(waiting)
            except asyncio.CancelledError:
                if not waiting.cancelled():  # this call was cancelled
                    raise
                return await self.run(ops, batch)  # the run joined was: run anew
            return copy.deepcopy(answer)
        shared: asyncio.Future[list[Result]] = asyncio.get_running_loop().create_future()
        state.waiting[key] = shared
        try:
            await state.acquire()
            try:
                if state.waiting.get(key) is shared:  # from now on, a new call runs anew
                    del state.waiting[key]
                answer = await batch(ops)
            finally:
                state.release()
        except BaseException as exc:
            if state.waiting.get(key) is shared:
                del state.waiting[key]
            if isinstance(exc, Exception):
                shared.set_exception(exc)
                shared.exception()  # retrieved: no warning when nobody joined
            else:
                shared.cancel()
            raise
        shared.set_result(answer)
        return answer


def _shareable(ops: list[Op]) -> Op | None:
    """The op of a batch of one search or namespace listing, when it is hashable (a
    filter holding a dict or a list is not); else None."""
    if len(ops) != 1 or not isinstance(ops[0], (SearchOp, ListNamespacesOp)):
        return None
    try:
        hash(ops[0])
    except TypeError:
        return None
    return ops[0]


__all__ = ["MAX_ASYNC_BATCHES", "Admission"]
