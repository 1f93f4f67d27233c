"""The outbox: a Redis Stream of what Redis has and MongoDB may not have yet, and the
flushers (in-process thread/task, or standalone workers) that move it."""

from .flusher import Flusher, flush_batch_plan

__all__ = ["Flusher", "flush_batch_plan"]
