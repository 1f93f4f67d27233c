"""A reference, not a saver: ``ReferenceSaver`` keeps the latest checkpoint of each thread
by reference and serializes nothing, so a workload run with it measures what LangGraph
itself costs per super-step (W1) or caps throughput at (W3). No real checkpointer can be
faster; the distance to it is what a saver adds."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator, Sequence
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    BaseCheckpointSaver,
    ChannelVersions,
    Checkpoint,
    CheckpointMetadata,
    CheckpointTuple,
)


class ReferenceSaver(BaseCheckpointSaver[int]):
    """The latest checkpoint per (thread, namespace), held as given (no copy, no
    serialization); pending writes and history are not kept. For benchmarks only: a
    resumed run after a failure, ``list`` and time travel do not work with it."""

    def __init__(self) -> None:
        super().__init__()
        self.latest: dict[tuple[str, str], CheckpointTuple] = {}

    def get_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        c = config["configurable"]
        return self.latest.get((c["thread_id"], c.get("checkpoint_ns", "")))

    def put(self, config: RunnableConfig, checkpoint: Checkpoint,
            metadata: CheckpointMetadata, new_versions: ChannelVersions) -> RunnableConfig:
        c = config["configurable"]
        tid, ns = c["thread_id"], c.get("checkpoint_ns", "")
        stored: RunnableConfig = {"configurable": {
            "thread_id": tid, "checkpoint_ns": ns, "checkpoint_id": checkpoint["id"]}}
        parent = config if c.get("checkpoint_id") else None
        self.latest[(tid, ns)] = CheckpointTuple(stored, checkpoint, metadata, parent, [])
        return stored

    def put_writes(self, config: RunnableConfig, writes: Sequence[tuple[str, Any]],
                   task_id: str, task_path: str = "") -> None:
        return None

    def list(self, config: RunnableConfig | None, **kwargs: Any) -> Iterator[CheckpointTuple]:
        return iter(())

    async def aget_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        return self.get_tuple(config)

    async def aput(self, config: RunnableConfig, checkpoint: Checkpoint,
                   metadata: CheckpointMetadata, new_versions: ChannelVersions
                   ) -> RunnableConfig:
        return self.put(config, checkpoint, metadata, new_versions)

    async def aput_writes(self, config: RunnableConfig, writes: Sequence[tuple[str, Any]],
                          task_id: str, task_path: str = "") -> None:
        return None

    async def alist(self, config: RunnableConfig | None, **kwargs: Any
                    ) -> AsyncIterator[CheckpointTuple]:
        for t in ():
            yield t
