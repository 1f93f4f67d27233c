"""With an external-reference serializer, the async API never runs blob I/O (uploads on
put, downloads on read) on the event loop's thread."""

from __future__ import annotations

import threading

import numpy as np
from langgraph.checkpoint.base import empty_checkpoint

from langgraph_durable import DurableSaver
from langgraph_durable.serde import ExternalRefSerializer, LocalBlobStore
from langgraph_durable.testing import unique_options


class RecordingStore(LocalBlobStore):
    """A local store that notes which threads touched it."""

    threads: set[int]

    def put_if_absent(self, key, data):  # type: ignore[no-untyped-def]
        self.threads.add(threading.get_ident())
        return super().put_if_absent(key, data)

    def get(self, key):  # type: ignore[no-untyped-def]
        self.threads.add(threading.get_ident())
        return super().get(key)


async def test_async_put_and_read_do_blob_io_off_the_event_loop(redis_url, mongo_url,
                                                                 tmp_path) -> None:
    store = RecordingStore(tmp_path / "blobs")
    store.threads = set()
    serde = ExternalRefSerializer(store=store, threshold_bytes=1000)
    loop_thread = threading.get_ident()
    async with DurableSaver.from_urls(redis_url, mongo_url, serde=serde,
                                      **unique_options()) as saver:
        cp = empty_checkpoint()
        array = np.arange(100_000, dtype=np.int64)
        cp["channel_values"] = {"a": array}
        cp["channel_versions"] = {"a": "1"}
        cfg = {"configurable": {"thread_id": "off", "checkpoint_ns": ""}}
        await saver.aput(cfg, cp, {"step": 0}, {"a": "1"})
        got = await saver.aget_tuple(cfg)
        np.testing.assert_array_equal(got.checkpoint["channel_values"]["a"], array)
    assert store.threads and loop_thread not in store.threads
