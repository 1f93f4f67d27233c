"""DurableStore on a Redis Cluster where only Redis holds the items (no flusher): a search
and a list of namespaces read every outbox partition's unflushed index, and those indexes
live on every primary, so each read is one pipeline that the cluster client splits per
node (sync and async alike)."""

from __future__ import annotations

from langgraph_durable import DurableStore
from langgraph_durable.config import DurableConfig
from langgraph_durable.hot.store_scripts import dirty_keys
from langgraph_durable.io.redis_urls import redis_client_from_url
from langgraph_durable.testing import unique_options

NAMESPACES = [("c", f"n{i:02d}") for i in range(40)]


def _primaries_of(redis_cluster_url: str, keys: list[str]) -> set[str]:
    with redis_client_from_url(redis_cluster_url, DurableConfig(), asyncio=False) as r:
        return {r.get_node_from_key(k).name for k in keys}


def test_unflushed_items_of_every_partition_are_read_from_every_primary(
        redis_cluster_url: str, mongo_url: str) -> None:
    opts = unique_options(flusher="off")
    with DurableStore.from_urls(redis_cluster_url, mongo_url, **opts) as store:
        ctx = store.runtime.context
        assert ctx.partitions == 16
        assert len(_primaries_of(redis_cluster_url, dirty_keys(ctx.config.key_prefix,
                                                               ctx.partitions))) == 3
        for i, ns in enumerate(NAMESPACES):
            store.put(ns, "k", {"v": i})
        store.delete(NAMESPACES[7], "k")
        want = [i for i in range(40) if i != 7]
        assert [x.value["v"] for x in store.search(("c",), limit=100)] == want
        assert store.list_namespaces(prefix=("c",), limit=100) == [
            ns for i, ns in enumerate(NAMESPACES) if i != 7]


async def test_unflushed_items_of_every_partition_are_read_async(
        redis_cluster_url: str, mongo_url: str) -> None:
    opts = unique_options(flusher="off")
    async with DurableStore.from_urls(redis_cluster_url, mongo_url, **opts) as store:
        for i, ns in enumerate(NAMESPACES):
            await store.aput(ns, "k", {"v": i})
        await store.adelete(NAMESPACES[7], "k")
        found = await store.asearch(("c",), limit=100)
        assert [x.value["v"] for x in found] == [i for i in range(40) if i != 7]
        assert len(await store.alist_namespaces(prefix=("c",), limit=100)) == 39
