"""``store/admission.py``: at most ``MAX_ASYNC_BATCHES`` calls of a loop run at once,
the others in arrival order; a call cancelled while waiting, or right after it was
handed a slot, never keeps one (no servers: the batch is a coroutine of the test)."""

from __future__ import annotations

import asyncio

import pytest
from langgraph.store.base import GetOp, Op, Result

from langgraph_durable.store import admission


async def test_calls_past_the_limit_wait_in_order_and_cancelled_ones_leave_no_slot_taken(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(admission, "MAX_ASYNC_BATCHES", 2)
    gate = admission.Admission()
    release = asyncio.Event()
    running: list[str] = []
    order: list[str] = []

    def batch_of(name: str):  # type: ignore[no-untyped-def]
        async def batch(ops: list[Op]) -> list[Result]:
            running.append(name)
            order.append(name)
            assert len(running) <= 2
            await release.wait()
            running.remove(name)
            return [name]
        return batch

    ops: list[Op] = [GetOp(("a",), "k")]
    tasks = {n: asyncio.ensure_future(gate.run(ops, batch_of(n))) for n in "abcdef"}
    await asyncio.sleep(0)
    assert order == ["a", "b"]
    tasks["c"].cancel()  # cancelled while waiting for a slot
    await asyncio.sleep(0)
    release.set()
    for _ in range(10):
        await asyncio.sleep(0)
    tasks["e"].cancel()  # handed a slot meanwhile or cancelled waiting: either way gone
    results = await asyncio.gather(*tasks.values(), return_exceptions=True)
    assert order[:4] == ["a", "b", "d", "e"] or order[:3] == ["a", "b", "d"]
    assert "c" not in order
    assert isinstance(results[2], asyncio.CancelledError)
    state = gate._loop()
    assert state.free == 2 and not state.queue  # every slot given back
    assert await gate.run(ops, batch_of("g")) == ["g"]


async def test_a_call_cancelled_just_after_it_was_handed_a_slot_gives_it_back(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(admission, "MAX_ASYNC_BATCHES", 1)
    state = admission._Loop()
    await state.acquire()  # the one slot taken without waiting
    waiter = asyncio.ensure_future(state.acquire())
    await asyncio.sleep(0)
    assert len(state.queue) == 1 and state.free == 0
    state.release()  # handed to the waiter, which has not run yet
    waiter.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiter
    assert state.free == 1 and not state.queue
