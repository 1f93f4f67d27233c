"""The thread-wide methods of a ``DurableSaver`` (LangGraph's ``delete_thread``,
``delete_for_runs``, ``copy_thread``, ``prune``, and ``list_threads``): each validates its
identifiers and runs one plan of ``plans/history_edits.py``, ``plans/thread_copy.py`` or
``plans/threads.py`` on the saver's runtime; the saver inherits them (``saver.py`` keeps
reading, writing and listing checkpoints)."""

from __future__ import annotations

from collections.abc import Sequence

from ..core.ops import Plan
from ..core.records import check_id, check_ids
from ..plans import history_edits, thread_copy, threads
from ..plans.context import Context
from ..plans.threads import ThreadPage
from .base import SaverRuntime


def _run_ids(run_ids: Sequence[str]) -> list[str]:
    """``run_ids`` as a list; a lone string is refused (``InvalidIdentifierError``), as
    ``check_ids`` does for thread ids."""
    if isinstance(run_ids, (str, bytes)):
        check_ids("run_id", run_ids)
    return list(run_ids)


class ThreadMethods:
    """Delete, copy, prune and list whole threads in both tiers."""

    _runtime: SaverRuntime
    _ctx: Context

    def delete_thread(self, thread_id: str) -> None:
        """Delete every checkpoint, blob and write of ``thread_id`` in both tiers, after the
        outbox drained (so no late flush brings any of it back)."""
        thread_id = check_id("thread_id", thread_id)
        self._runtime.run(history_edits.delete_thread_plan(self._ctx, thread_id))

    async def adelete_thread(self, thread_id: str) -> None:
        """Async ``delete_thread``."""
        await self._runtime.arun(history_edits.delete_thread_plan(self._ctx,
                                                          check_id("thread_id", thread_id)))

    def delete_for_runs(self, run_ids: Sequence[str]) -> None:
        """Delete the checkpoints whose metadata ``run_id`` is in ``run_ids``, with their
        writes, in both tiers. Blobs stay (other checkpoints may share them). A thread
        whose found documents are damaged is left as it was and the others are done; then
        ``CorruptRecordError`` names each such thread (``.damaged``: their errors)."""
        self._runtime.run(history_edits.delete_for_runs_plan(self._ctx, _run_ids(run_ids)))

    async def adelete_for_runs(self, run_ids: Sequence[str]) -> None:
        """Async ``delete_for_runs``."""
        await self._runtime.arun(history_edits.delete_for_runs_plan(self._ctx, _run_ids(run_ids)))

    def copy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        """Copy every checkpoint, blob and write (the whole parent chain) of one thread to
        another; the source is unchanged. The target keeps its other checkpoints; a
        checkpoint it already held (an earlier copy) becomes the source's, pending writes
        included: the target's own writes to it are removed. Waits for the outbox first
        (``FlushTimeoutError`` after ``delete_flush_timeout_s`` seconds); a damaged source
        document raises ``CorruptRecordError`` naming it, and nothing is copied. A delete
        of the source (``delete_thread``, ``delete_for_runs``, ``prune``) running at the
        same time is taken as if it ran first: what it removes is not copied. InMemorySaver
        does not implement ``copy_thread``."""
        self._runtime.run(thread_copy.copy_thread_plan(
            self._ctx, check_id("thread_id", source_thread_id),
            check_id("thread_id", target_thread_id)))

    async def acopy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        """Async ``copy_thread``."""
        await self._runtime.arun(thread_copy.copy_thread_plan(
            self._ctx, check_id("thread_id", source_thread_id),
            check_id("thread_id", target_thread_id)))

    def _prune_plan(self, thread_ids: Sequence[str], strategy: str, keep_last: int | None,
                    older_than_s: float | None) -> Plan:
        history_edits.check_prune(strategy, keep_last, older_than_s)
        ids = check_ids("thread_id", thread_ids)
        return history_edits.prune_plan(self._ctx, ids, strategy, keep_last=keep_last,
                                older_than_s=older_than_s)

    def prune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest",
              keep_last: int | None = None, older_than_s: float | None = None) -> None:
        """Retention for ``thread_ids`` in both tiers; LangGraph's ``prune(thread_ids, *,
        strategy)`` plus two keyword options.

        Args:
            thread_ids: threads to prune (unknown ones are left alone).
            strategy: ``"keep_latest"`` keeps each namespace's newest checkpoint;
                ``"delete"`` removes the threads.
            keep_last: with ``keep_latest``, keep the newest ``keep_last`` checkpoints of
                each namespace instead of one (``keep_last=1`` is ``keep_latest``).
            older_than_s: with ``keep_latest``, also keep every checkpoint younger than
                this many seconds (so only older ones go; the newest always stays); with
                ``delete``, remove only threads whose newest checkpoint is older. A
                checkpoint's time is read from its uuid6 ``checkpoint_id``; a custom id
                counts as young.

        Kept checkpoints keep the DeltaChannel ancestors they need (back to a stored value
        of each delta channel) and the blobs they refer to; dropped ones go with their
        pending writes, after the outbox drained (no late flush brings them back). One
        read round, one Redis script and one bulk delete per collection per thread.
        Raises ``ValueError`` for another strategy, ``keep_last`` < 1 or with
        ``delete``, or a negative ``older_than_s``; ``FlushTimeoutError`` when the outbox
        does not drain within ``delete_flush_timeout_s``; ``CorruptRecordError`` after
        pruning every other thread, naming each thread whose records are damaged (met in
        its read round, so left as it was; ``.damaged``: their errors)."""
        self._runtime.run(self._prune_plan(thread_ids, strategy, keep_last, older_than_s))

    async def aprune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest",
                     keep_last: int | None = None, older_than_s: float | None = None) -> None:
        """Async ``prune``."""
        await self._runtime.arun(self._prune_plan(thread_ids, strategy, keep_last, older_than_s))

    def list_threads(self, *, limit: int = 100, cursor: str | None = None) -> ThreadPage:
        """A page of the threads either tier holds, in ``thread_id`` order: for each, its
        checkpoint count (every namespace, both tiers merged, each checkpoint once), newest
        ``checkpoint_id`` and last activity (UTC ``datetime`` read from that uuid6 id), and
        which tiers hold it. ``limit``: most threads in the page (>= 1, else
        ``ValueError``); ``cursor``: the ``next_cursor`` of the previous page. Returns a
        ``ThreadPage``; its ``next_cursor`` is ``None`` on the last page. Costs a SCAN of
        this key prefix in Redis and two or three MongoDB queries per page."""
        return self._runtime.run(threads.list_threads_plan(self._ctx, limit, cursor))

    async def alist_threads(self, *, limit: int = 100, cursor: str | None = None
                            ) -> ThreadPage:
        """Async ``list_threads``."""
        return await self._runtime.arun(threads.list_threads_plan(self._ctx, limit, cursor))
