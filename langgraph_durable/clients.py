"""Recognise and build the Redis and MongoDB clients a saver is given (sync or asyncio)."""

from __future__ import annotations

from typing import Any

import redis
import redis.asyncio
import redis.asyncio.cluster
import redis.cluster

from .config import DurableConfig
from .drivers import Clients
from .hot.scripts import SCRIPTS


def is_async_redis(client: Any) -> bool:
    """True for ``redis.asyncio.Redis`` / ``redis.asyncio.RedisCluster``."""
    return isinstance(client, (redis.asyncio.Redis, redis.asyncio.cluster.RedisCluster))


def is_cluster(client: Any) -> bool:
    """True for a Redis Cluster client (sync or async)."""
    return isinstance(client, (redis.cluster.RedisCluster, redis.asyncio.cluster.RedisCluster))


def is_async_mongo(client: Any) -> bool:
    """True for ``pymongo.AsyncMongoClient``/``AsyncDatabase`` and Motor clients/databases."""
    name = type(client).__name__
    return name.startswith("Async") or name.startswith("AsyncIOMotor") or "Motor" in name


def is_database(client: Any) -> bool:
    """True for a MongoDB database object (not a client)."""
    return hasattr(client, "list_collection_names") and not hasattr(client,
                                                                     "list_database_names")


def named_database(client: Any) -> str | None:
    """The database a MongoDB client names by itself: a database object's name, or the
    default database of the URL the client was made from (``mongodb://h:p/myappdb``); None
    when it names none."""
    if is_database(client):
        return str(client.name)
    try:
        return str(client.get_default_database().name)
    except Exception:  # ConfigurationError: no database in the URL
        return None


def database_of(client: Any, config: DurableConfig) -> Any:
    """The configured database of a MongoDB client (or the database itself if given one),
    with the saver's write concern (``DurableConfig.write_concern``) on every write."""
    db = client if is_database(client) else client[config.database]
    return db.with_options(write_concern=config.write_concern)


def describe_redis(client: Any) -> str:
    """``host:port`` of a Redis client, for error messages."""
    try:
        kw = client.connection_pool.connection_kwargs
        return f"{kw.get('host', '?')}:{kw.get('port', '?')}"
    except Exception:
        return type(client).__name__


def describe_mongo(db: Any) -> str:
    """``host:port/database`` of a MongoDB database, for error messages."""
    try:
        client = db.client
        nodes = getattr(client, "_topology_settings", None)
        seeds = ",".join(f"{h}:{p}" for h, p in nodes.seeds) if nodes else "?"
        return f"{seeds}/{db.name}"
    except Exception:
        return getattr(db, "name", "?")


def make_clients(redis_client: Any, db: Any) -> Clients:
    """Wrap one side's clients for the I/O drivers."""
    return Clients(redis=redis_client, db=db, scripts=SCRIPTS,
                   redis_name=describe_redis(redis_client), mongo_name=describe_mongo(db))


def redis_from_url(url: str, config: DurableConfig, *, asyncio: bool) -> Any:
    """A Redis client for ``url`` with the configured socket timeout (seconds) and a
    blocking pool of ``redis_max_connections``: a call waits up to ``socket_timeout_s``
    for a free connection instead of failing when many run at once."""
    module = redis.asyncio if asyncio else redis
    timeout = config.socket_timeout_s + config.flush_interval_s
    pool = module.BlockingConnectionPool.from_url(
        url, max_connections=config.redis_max_connections, timeout=config.socket_timeout_s,
        socket_timeout=timeout, socket_connect_timeout=config.socket_timeout_s)
    return module.Redis(connection_pool=pool)


def mongo_from_url(url: str, config: DurableConfig, *, asyncio: bool) -> Any:
    """A PyMongo client (``AsyncMongoClient`` when ``asyncio``) for ``url``."""
    import pymongo

    cls = pymongo.AsyncMongoClient if asyncio else pymongo.MongoClient
    ms = int(config.server_selection_timeout_s * 1000)
    return cls(url, serverSelectionTimeoutMS=ms, connectTimeoutMS=ms, tz_aware=True)
