"""``io.tasks.cancellable``: a cancel of the caller always ends the caller, even when the
step it awaits swallows the cancel (as ``asyncio.wait_for`` does on Python < 3.12 when its
inner task finished in the same loop turn: PyMongo's asynchronous sends go through it).
The in-process flusher, its heartbeat and the deferred set-up await their steps this way,
so ``asyncio.run`` returns with a saver that was never closed (issue 31)."""

from __future__ import annotations

import asyncio

import pytest

from langgraph_durable.io.tasks import cancellable


class Steps:
    """A background loop whose every step swallows a cancel, as a library can."""

    def __init__(self, *, guarded: bool) -> None:
        self.guarded = guarded
        self.answers: list[str] = []
        self.started = asyncio.Event()
        self.stop = False

    async def step(self) -> str:
        self.started.set()
        try:
            await asyncio.sleep(10)
        except asyncio.CancelledError:
            return "swallowed"
        return "slept"

    async def loop(self) -> None:
        while not self.stop:
            answer = await cancellable(self.step()) if self.guarded else await self.step()
            self.answers.append(str(answer))


async def test_a_swallowed_cancel_still_ends_a_loop_awaiting_its_steps_through_it() -> None:
    steps = Steps(guarded=True)
    task = asyncio.create_task(steps.loop())
    await steps.started.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await asyncio.wait_for(task, 5)
    assert steps.answers == []  # the step's "swallowed" answer never reached the loop


async def test_awaited_directly_the_loop_runs_on_after_the_cancel() -> None:
    steps = Steps(guarded=False)
    task = asyncio.create_task(steps.loop())
    await steps.started.wait()
    steps.started.clear()
    task.cancel()
    await asyncio.wait_for(steps.started.wait(), 5)  # the next step began: cancel lost
    assert steps.answers == ["swallowed"] and not task.done()
    steps.stop = True  # what cancellable makes unnecessary
    task.cancel()
    await asyncio.wait_for(task, 5)
    assert steps.answers == ["swallowed", "swallowed"]


async def test_it_returns_the_result_raises_the_error_or_gives_none_after_the_timeout(
        ) -> None:
    async def answer() -> int:
        return 42

    async def fails() -> None:
        raise ZeroDivisionError("step failed")

    assert await cancellable(answer()) == 42
    with pytest.raises(ZeroDivisionError, match="step failed"):
        await cancellable(fails())
    never = asyncio.Event()
    assert await cancellable(never.wait(), 0.01) is None
