"""The Redis URLs a saver accepts (``DurableSaver.from_urls``/``from_conn_string``, the CLI's
``--redis-url``, the flusher worker, ``REDIS_URL``) and the redis-py clients made from them.

redis-py has no URL for a cluster with several seed nodes nor for Sentinel, so two schemes
are added to its own (``redis://``, ``rediss://``, ``unix://``, passed to redis-py as they
are):

* ``redis+cluster://[user:password@]host:port[,host:port...][/0]``: a Redis Cluster;
  the hosts are startup nodes (any reachable node will do; the client learns the rest);
  the port defaults to 6379; a cluster has only database 0. Becomes
  ``redis.cluster.RedisCluster(startup_nodes=[ClusterNode(host, port), ...])`` (or
  ``redis.asyncio.cluster.RedisCluster``).
* ``redis+sentinel://[user:password@]host:port[,host:port...]/service_name[/db]``: the
  primary that the sentinels at the hosts name for ``service_name`` (port default 26379,
  ``db`` default 0). Becomes ``redis.sentinel.Sentinel([(host, port), ...]).master_for(
  service_name, db=db)`` (or ``redis.asyncio.sentinel``); the user and password are the
  data nodes' (sentinels without a password are assumed). After a failover the client asks
  the sentinels for the new primary on its next connection.

Neither takes query options or TLS (``rediss+...``) yet: give the saver clients you built
(``DurableSaver(redis=..., mongo=...)``) for those. A URL that cannot be used raises
:class:`~langgraph_durable.errors.ConfigurationError` naming what is wrong in it.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any, Literal
from urllib.parse import unquote

import redis
import redis.asyncio
import redis.asyncio.cluster
import redis.asyncio.sentinel
import redis.cluster
import redis.sentinel

from ..config import DurableConfig
from ..errors import ConfigurationError

__all__ = ["RedisUrl", "parse_redis_url", "redis_client_from_url"]

_SINGLE = ("redis://", "rediss://", "unix://")
_KINDS = {"redis+cluster": "cluster", "redis+sentinel": "sentinel"}
_DEFAULT_PORT = {"cluster": 6379, "sentinel": 26379}


@dataclass(frozen=True)
class RedisUrl:
    """A parsed Redis URL: ``kind`` (``"single"``, ``"cluster"``, ``"sentinel"``), the
    ``url`` as given, ``nodes`` (``(host, port)`` of the startup nodes or sentinels; empty
    for ``single``), ``service`` (sentinel only), ``db``, ``username``, ``password``."""

    kind: Literal["single", "cluster", "sentinel"]
    url: str
    nodes: tuple[tuple[str, int], ...] = ()
    service: str | None = None
    db: int = 0
    username: str | None = None
    password: str | None = None


def _bad(url: str, what: str) -> ConfigurationError:
    shown = url
    if "@" in url:  # never print a password
        scheme, _, rest = url.partition("://")
        shown = f"{scheme}://***@{rest.rpartition('@')[2]}"
    return ConfigurationError(f"Redis URL {shown!r}: {what}")


def _node(url: str, text: str, default_port: int) -> tuple[str, int]:
    if text.startswith("["):  # [ipv6]:port
        host, _, port = text[1:].partition("]")
        port = port.removeprefix(":")
    else:
        host, _, port = text.rpartition(":") if ":" in text else (text, "", "")
    if not host:
        raise _bad(url, f"node {text!r} has no host (expected host:port)")
    if not port:
        return host, default_port
    if not port.isdigit() or not 0 < int(port) < 65536:
        raise _bad(url, f"node {text!r} has port {port!r}, not a number from 1 to 65535")
    return host, int(port)


def parse_redis_url(url: str) -> RedisUrl:
    """Parse ``url`` (schemes in the module docstring). Raises ``ConfigurationError``
    naming the problem: an unknown scheme, no hosts, a bad port, a cluster database other
    than 0, a sentinel URL without service name, a bad database number, query options."""
    if url.startswith(_SINGLE):
        return RedisUrl("single", url)
    scheme, sep, rest = url.partition("://")
    kind = _KINDS.get(scheme.lower())
    known = ", ".join([*(s.removesuffix("://") for s in _SINGLE), *_KINDS])
    if not sep:
        raise _bad(url, f"no scheme: a Redis URL starts with one of {known} and :// "
                        "(e.g. redis://localhost:6379/0)")
    if kind is None:
        raise _bad(url, f"unknown scheme {scheme!r} (use one of {known})")
    if "?" in rest or "#" in rest:
        raise _bad(url, f"{scheme} URLs take no query options or fragment; build the client "
                        "yourself and pass it to DurableSaver(redis=...) for those")
    userinfo, _, hostpath = rest.rpartition("@")
    username = password = None
    if userinfo:
        user, colon, pw = userinfo.partition(":")
        username, password = (unquote(user) or None), (unquote(pw) if colon else None)
    hosts, _, path = hostpath.partition("/")
    if not hosts:
        raise _bad(url, "no host:port given")
    nodes = tuple(_node(url, h, _DEFAULT_PORT[kind]) for h in hosts.split(",") if h)
    if not nodes:
        raise _bad(url, "no host:port given")
    parts = [p for p in path.split("/") if p] if path else []
    if kind == "cluster":
        if parts not in ([], ["0"]):
            raise _bad(url, f"a Redis Cluster has only database 0, the path is /{path}")
        return RedisUrl("cluster", url, nodes, None, 0, username, password)
    if not parts or len(parts) > 2:
        raise _bad(url, "expected redis+sentinel://host:port[,host:port...]/service_name[/db]"
                        f", the path is /{path}")
    db = parts[1] if len(parts) == 2 else "0"
    if not db.isdigit():
        raise _bad(url, f"database {db!r} is not a number")
    return RedisUrl("sentinel", url, nodes, unquote(parts[0]), int(db), username, password)


def redis_client_from_url(url: str, config: DurableConfig, *, asyncio: bool) -> Any:
    """A Redis client (``redis.asyncio`` when ``asyncio``) for ``url`` in any scheme of
    ``parse_redis_url``, with the configured socket timeouts (seconds) and at most
    ``redis_max_connections`` connections per server. A single server's and a sync
    cluster's pool is blocking: past the limit a call waits up to ``socket_timeout_s``
    for a free connection; the asyncio cluster and Sentinel pools raise instead.
    Raises ``ConfigurationError`` for a bad URL, and for ``redis_max_connections=1`` with
    a cluster or Sentinel (a cluster pipeline asks a node for its keys on a second
    connection to it, and waits for it for good; a Sentinel pool refuses a second caller
    instead of waiting): one connection serves a single server only."""
    parsed = parse_redis_url(url)
    if parsed.kind != "single" and config.redis_max_connections < 2:
        raise _bad(url, f"redis_max_connections={config.redis_max_connections} with a "
                   f"Redis {parsed.kind}: one connection per server serves a single server "
                   "only (a cluster pipeline needs a second connection to a node, a "
                   "Sentinel pool refuses a second caller); use redis_max_connections=2 "
                   "or more")
    # a flusher's XREADGROUP blocks up to flush_interval_s, a put's WAIT redis_wait_timeout_s
    waits = config.redis_wait_timeout_s if config.redis_min_replicas else 0.0
    read_timeout = config.socket_timeout_s + max(config.flush_interval_s, waits)
    timeouts: dict[str, Any] = {"socket_timeout": read_timeout,
                                "socket_connect_timeout": config.socket_timeout_s}
    cap = config.redis_max_connections
    if parsed.kind == "single":
        module: Any = redis.asyncio if asyncio else redis
        pool = module.BlockingConnectionPool.from_url(
            url, max_connections=cap, timeout=config.socket_timeout_s, **timeouts)
        return module.Redis.from_pool(pool)  # closing the client closes its connections
    auth: dict[str, Any] = {"username": parsed.username, "password": parsed.password}
    if parsed.kind == "cluster":
        if asyncio:
            nodes = [redis.asyncio.cluster.ClusterNode(h, p) for h, p in parsed.nodes]
            return redis.asyncio.cluster.RedisCluster(
                startup_nodes=nodes, max_connections=cap, **auth, **timeouts)
        sync_nodes = [redis.cluster.ClusterNode(h, p) for h, p in parsed.nodes]
        blocking = functools.partial(redis.BlockingConnectionPool, timeout=config.socket_timeout_s)
        return redis.cluster.RedisCluster(startup_nodes=sync_nodes, connection_pool_class=blocking,
                                          max_connections=cap, **auth, **timeouts)
    sentinel_module: Any = redis.asyncio.sentinel if asyncio else redis.sentinel
    sentinel = sentinel_module.Sentinel(list(parsed.nodes), sentinel_kwargs=dict(timeouts),
                                        **timeouts)
    return sentinel.master_for(parsed.service, db=parsed.db, max_connections=cap, **auth)
