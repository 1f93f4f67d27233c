"""A saver's whole life through either API, for the tests of what ``close()`` ends."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from langgraph.checkpoint.base import empty_checkpoint

from langgraph_durable import DurableSaver
from langgraph_durable.testing import wait_for


def put_flush_wait_close(saver: DurableSaver, api: str, until: Callable[[], bool],
                         what: str) -> None:
    """Enter ``saver`` (``with``, or ``async with`` when ``api`` is ``"async"``), put one
    checkpoint of thread ``t``, flush it (30 s), wait up to 30 s for ``until()`` (named
    ``what`` if it never holds), then leave: ``close()``/``aclose()`` runs last."""
    cfg: Any = {"configurable": {"thread_id": "t", "checkpoint_ns": ""}}
    if api == "sync":
        with saver:
            saver.put(cfg, empty_checkpoint(), {"step": 0}, {})
            saver.flush(timeout_s=30)
            wait_for(until, 30, what)
        return

    async def run() -> None:
        async with saver:
            await saver.aput(cfg, empty_checkpoint(), {"step": 0}, {})
            await saver.aflush(timeout_s=30)
            await asyncio.to_thread(wait_for, until, 30, what)

    asyncio.run(run())
