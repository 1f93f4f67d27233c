"""The plan of a batch of one ``GetOp`` or one ``PutOp`` (sans-I/O): what ``aget``,
``aput``, ``adelete`` and their sync twins send (LangGraph's ``BaseStore`` makes each a
batch of one op). Same answers, errors and writes as ``batch.batch_plan`` gives for that
batch (one STORE_GET, MongoDB on a miss, a TTL refresh when asked; one STORE_PUT), without
its per-batch bookkeeping, which cost a lone call more client CPU than the plans it ran.
"""

from __future__ import annotations

from collections.abc import Sequence

from langgraph.store.base import GetOp, Op, PutOp, Result

from ..core.ops import Plan
from ..plans import store_items as P
from ..plans.context import Context
from .batch import Answers, Prepared


def get_one_plan(ctx: Context, answers: Answers, op: GetOp,
                 now_ms: int) -> Plan[list[Result]]:
    """``[item]`` of ``op`` (``[None]`` when it is deleted, expired at ``now_ms`` or was
    never stored); refreshes the item's TTL when ``op.refresh_ttl`` says so."""
    (rec,) = yield from P.get_plan(ctx, [(op.namespace, op.key)], now_ms)
    if rec is None:
        return [None]
    item = answers.item(rec)
    if op.refresh_ttl:
        touches = yield from P.touch_plan(ctx, [rec], now_ms)
        yield from P.write_plan(ctx, touches)
    return [item]


def put_one_plan(ctx: Context, put: Prepared, now_ms: int) -> Plan[list[Result]]:
    """``[None]`` once Redis holds ``put`` (prepared by ``batch.prepare_put``: a value, or
    a delete when its body is empty) and its outbox entry; raises ``OutboxFullError``
    when the outbox is full."""
    mode = "put" if put.body else "del"
    yield from P.write_plan(ctx, [P.write_op(ctx, put.namespace, put.key, mode, put.body,
                                             put.expires_ms, now_ms=now_ms)])
    return [None]


def lone(ops: Sequence[Op], indexed: bool) -> GetOp | PutOp | None:
    """The op of ``ops`` when it is one ``GetOp``, or one ``PutOp`` with nothing to embed
    (``indexed``: the store has a vector index); None otherwise (the general path)."""
    if len(ops) != 1:
        return None
    op = ops[0]
    if type(op) is GetOp:
        return op
    if type(op) is PutOp and (not indexed or op.value is None or op.index is False):
        return op
    return None


__all__ = ["get_one_plan", "lone", "put_one_plan"]
