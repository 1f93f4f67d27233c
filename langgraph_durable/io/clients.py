"""Recognise and build the Redis and MongoDB clients a saver is given (sync or asyncio),
and the two kinds of client set a saver runs on (``GivenClients``, ``UrlClients``)."""

from __future__ import annotations

import asyncio
import contextlib
import threading
from abc import ABC, abstractmethod
from collections.abc import AsyncGenerator, Callable
from typing import Any

import pymongo
import redis
import redis.asyncio
import redis.asyncio.cluster
import redis.cluster

from ..config import DurableConfig
from ..errors import ConfigurationError, EventLoopNotRunningError, SyncCallInEventLoopError
from ..hot.scripts import SCRIPTS
from ..settings import check_mongo_url, hide_password
from .drivers import Clients
from .redis_urls import redis_client_from_url
from .wire import pooled_connections, raw_socket


def is_async_redis(client: Any) -> bool:
    """True for ``redis.asyncio.Redis`` / ``redis.asyncio.RedisCluster``."""
    return isinstance(client, (redis.asyncio.Redis, redis.asyncio.cluster.RedisCluster))


def is_cluster(client: Any) -> bool:
    """True for a Redis Cluster client (sync or async)."""
    return isinstance(client, (redis.cluster.RedisCluster, redis.asyncio.cluster.RedisCluster))


def refuses_when_busy(client: Any) -> bool:
    """True for a Redis client whose connection pool holds one connection and refuses a
    second caller instead of waiting (redis-py's ``ConnectionPool``, sync or async, with
    ``max_connections=1``; a ``BlockingConnectionPool`` waits)."""
    pool = getattr(client, "connection_pool", None)
    cap = getattr(pool, "max_connections", None)
    return (isinstance(cap, int) and cap < 2
            and not isinstance(pool, (redis.BlockingConnectionPool,
                                      redis.asyncio.BlockingConnectionPool)))


def one_connection_per_node(client: Any) -> bool:
    """True for a Redis Cluster client (sync or async) made with ``max_connections=1``:
    its pipelines ask a node for keys on a second connection, so the saver's first
    pipeline fails ("Too many connections"), as ``redis_max_connections=1`` with a
    cluster URL would (``io/redis_urls.py`` refuses that)."""
    if not is_cluster(client):
        return False
    kwargs = getattr(getattr(client, "nodes_manager", None), "connection_kwargs", None)
    cap = kwargs.get("max_connections") if isinstance(kwargs, dict) else None
    return isinstance(cap, int) and cap < 2


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
    """``host:port`` of a Redis client (``cluster h:p,...`` for a cluster's startup nodes,
    ``sentinel service NAME`` for a Sentinel-managed primary), for error messages."""
    try:
        if is_cluster(client):
            nodes = client.nodes_manager.startup_nodes.values()
            return "cluster " + ",".join(f"{n.host}:{n.port}" for n in nodes)
        service = getattr(client.connection_pool, "service_name", None)
        if service is not None:
            return f"sentinel service {service}"
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


def check_redis_client(client: Any) -> None:
    """Raise ``ConfigurationError`` for a Redis client the saver cannot use, naming it:
    one that decodes replies to ``str`` (``decode_responses=True``: records, digests and
    outbox entries are bytes) or speaks RESP3 (``protocol=3``: the outbox's stream
    replies are read in RESP2's shapes). Both are redis-py options off by default (also
    URL query options, ``?decode_responses=true``, ``?protocol=3``)."""
    get = getattr(client, "get_connection_kwargs", None)
    kwargs = get() if callable(get) else {}
    if not isinstance(kwargs, dict):
        return
    if kwargs.get("decode_responses"):
        raise ConfigurationError(
            f"Redis client {describe_redis(client)}: decode_responses=True is not "
            "supported (the saver stores and reads bytes); build the client without it")
    if str(kwargs.get("protocol") or 2) == "3":
        raise ConfigurationError(
            f"Redis client {describe_redis(client)}: protocol=3 (RESP3) is not supported; "
            "use protocol=2, redis-py's default")


def make_clients(redis_client: Any, db: Any) -> Clients:
    """Wrap one side's clients for the I/O drivers. Raises ``ConfigurationError`` for a
    Redis client the saver cannot use (``check_redis_client``)."""
    check_redis_client(redis_client)
    return Clients(redis=redis_client, db=db, scripts=SCRIPTS, cluster=is_cluster(redis_client),
                   redis_name=describe_redis(redis_client), mongo_name=describe_mongo(db))


def redis_from_url(url: str, config: DurableConfig, *, asyncio: bool) -> Any:
    """A Redis client for ``url``: a single server (``redis://``, ``rediss://``,
    ``unix://``), a cluster (``redis+cluster://``) or a Sentinel-managed primary
    (``redis+sentinel://``), with the configured socket timeout (seconds) and pool of
    ``redis_max_connections`` (``redis_urls.redis_client_from_url``). Raises
    ``ConfigurationError`` for a URL that cannot be used, naming what is wrong."""
    return redis_client_from_url(url, config, asyncio=asyncio)


def mongo_from_url(url: str, config: DurableConfig, *, asyncio: bool) -> Any:
    """A PyMongo client (``AsyncMongoClient`` when ``asyncio``) for ``url``, with the
    configured server selection and connect timeout (``server_selection_timeout_s``) and
    socket timeout (``mongo_socket_timeout_s``), in seconds. Raises
    ``ConfigurationError`` for a URL PyMongo refuses (not ``mongodb://``/``mongodb+srv://``,
    a bad option or port), naming the URL with its password hidden."""
    check_mongo_url(url)
    cls = pymongo.AsyncMongoClient if asyncio else pymongo.MongoClient
    ms = int(config.server_selection_timeout_s * 1000)
    socket_ms = int(config.mongo_socket_timeout_s * 1000)
    try:
        return cls(url, serverSelectionTimeoutMS=ms, connectTimeoutMS=ms,
                   socketTimeoutMS=socket_ms, tz_aware=True)
    except (pymongo.errors.ConfigurationError, ValueError) as exc:
        raise ConfigurationError(f"MongoDB URL {hide_password(url)!r}: {exc}") from None


# --------------------------------------------------------------------------- client sets


Observer = Callable[[Any, float, bool], None]


def _running_loop() -> asyncio.AbstractEventLoop | None:
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None


class ClientSet(ABC):
    """The clients a saver runs its plans with. Two kinds, chosen by how the saver was made:
    :class:`GivenClients` (the caller's clients: sync, asyncio, or both) and
    :class:`UrlClients` (``from_urls``: sync clients made now, asyncio clients made per
    event loop). One object is shared by a saver and the copies ``with_allowlist`` makes."""

    sync: Clients | None
    """Blocking clients, if any: sync methods run on them in the calling thread."""

    @abstractmethod
    def for_running_loop(self) -> Clients | None:
        """Asyncio clients for the running event loop; None when there are none (async
        methods then run the sync clients in a worker thread)."""

    @abstractmethod
    def loop_for_sync_call(self) -> asyncio.AbstractEventLoop:
        """The event loop a sync call on a saver without sync clients is sent
        to. Raises ``SyncCallInEventLoopError`` when called from inside a running event loop
        that owns (or would own) the asyncio clients, ``EventLoopNotRunningError`` when no
        running loop owns them."""

    @abstractmethod
    def close(self) -> None:
        """Close the clients this set made itself (not the caller's)."""

    async def aclose(self) -> None:
        """Async ``close``; also closes asyncio clients made per event loop."""
        await asyncio.to_thread(self.close)

    def describe(self) -> str:
        """`` (Redis host:port, MongoDB host:port/db)`` of these clients, or ``""``."""
        found = self.sync
        if found is None:
            try:
                found = self.for_running_loop()
            except Exception:  # no usable asyncio clients here: name none
                found = None
        if found is None:
            return ""
        return f" (Redis {found.redis_name}, MongoDB {found.mongo_name})"


class GivenClients(ClientSet):
    """Clients the caller made and keeps ownership of (the saver never closes them): sync
    clients, asyncio clients, or one pair of each. Asyncio clients belong to the event loop
    running when the saver was made, else to the loop of the first async call."""

    def __init__(self, sync: Clients | None, async_: Clients | None) -> None:
        if sync is None and async_ is None:
            raise ValueError("GivenClients needs sync or asyncio clients")
        self.sync = sync
        self.async_ = async_
        self.loop = _running_loop() if async_ is not None else None

    def for_running_loop(self) -> Clients | None:
        if self.async_ is not None and self.loop is None:
            self.loop = asyncio.get_running_loop()
        return self.async_

    def loop_for_sync_call(self) -> asyncio.AbstractEventLoop:
        running, loop = _running_loop(), self.loop
        if running is not None and (loop is None or running is loop):
            owns = "owns" if loop is not None else "would own (on their first use)"
            raise SyncCallInEventLoopError(
                "A sync DurableSaver method was called from inside the event loop that "
                f"{owns} this saver's asyncio clients; waiting there would deadlock. Use the "
                "async method (a-prefixed), or give the saver sync clients too.")
        if loop is None:
            raise EventLoopNotRunningError(
                "A sync DurableSaver method needs an event loop to run this saver's "
                "asyncio clients on, and none owns them yet: the saver was made outside a "
                "running event loop and no async method has run. Call the async method "
                "(a-prefixed) inside your event loop, or give sync clients (redis=, mongo=, "
                "together with async_redis=, async_mongo=), or use DurableSaver.from_urls.")
        if loop.is_closed() or not loop.is_running():
            state = "closed" if loop.is_closed() else "not running"
            raise EventLoopNotRunningError(
                "A sync DurableSaver method would be sent to the event loop that owns this "
                f"saver's asyncio clients, and that loop is {state}: nothing would ever run "
                "it. Call the async method (a-prefixed) inside a running loop, or give the "
                "saver sync clients too.")
        return loop

    def close(self) -> None:
        """Nothing to close: the caller made these clients and closes them. The
        connections the batchers kept between calls go back to their pools (the asyncio
        ones in their event loop, if it still runs), and they keep none from now on."""
        if self.sync is not None:
            self.sync.release_held()
        if self.async_ is not None and self.loop is not None:
            self.async_.stop_keeping(self.loop)

    async def aclose(self) -> None:
        """``close``; on the event loop owning the asyncio clients, their batcher's kept
        connections are given back before it returns."""
        if self.async_ is not None and self.loop is not None and _running_loop() is self.loop:
            await self.async_.arelease_held()
        await super().aclose()


class UrlClients(ClientSet):
    """Clients this saver makes itself from two URLs (``from_urls``) and closes on
    ``close``: sync clients made now, asyncio clients made on first async use in each event
    loop (asyncio clients cannot cross loops).

    The asyncio clients of a loop are released with it, so a saver called from many short
    loops (``asyncio.run`` per request or task, as Celery tasks and sync web views do)
    holds the sockets of the loops alive now, not of every loop it ever met: they are
    closed while the loop shuts down (``asyncio.run``'s ``shutdown_asyncgens``: a watcher
    of each loop, an async generator, closes them after the loop's tasks were cancelled),
    and those of a loop closed without that step are dropped when the saver next makes
    clients for a loop, or closes (the Redis sockets closed at once, the rest left to the
    garbage collector)."""

    def __init__(self, redis_url: str, mongo_url: str, config: DurableConfig,
                 observer: Observer | None = None) -> None:
        self.urls = (redis_url, mongo_url)
        self.config = config
        self.observer = observer
        self._redis = redis_from_url(redis_url, config, asyncio=False)
        self.cluster = is_cluster(self._redis)
        """True for a ``redis+cluster://`` URL."""
        try:
            self._mongo = mongo_from_url(mongo_url, config, asyncio=False)
        except BaseException:
            self._redis.close()
            raise
        self.sync = make_clients(self._redis, database_of(self._mongo, config))
        self.sync.observer = observer
        self._per_loop: dict[asyncio.AbstractEventLoop, Clients] = {}
        self._watchers: dict[asyncio.AbstractEventLoop, AsyncGenerator[None, None]] = {}
        self._lock = threading.Lock()

    @property
    def loops(self) -> int:
        """Event loops whose asyncio clients this set holds now."""
        return len(self._per_loop)

    def for_running_loop(self) -> Clients | None:
        loop = asyncio.get_running_loop()
        found = self._per_loop.get(loop)
        if found is None:
            found = self._make_for(loop)
        return found

    def _make_for(self, loop: asyncio.AbstractEventLoop) -> Clients:
        """The running ``loop``'s asyncio clients, made now, with the watcher that closes
        them when the loop shuts down; first drops those of loops that are closed."""
        self._drop_closed_loops()
        r = redis_from_url(self.urls[0], self.config, asyncio=True)
        m = mongo_from_url(self.urls[1], self.config, asyncio=True)
        found = make_clients(r, database_of(m, self.config))
        found.observer = self.observer
        watcher = self._watch(loop)
        with self._lock:
            self._per_loop[loop] = found
            self._watchers[loop] = watcher
        _start(watcher)  # registered with the running loop's shutdown_asyncgens
        return found

    async def _watch(self, loop: asyncio.AbstractEventLoop) -> AsyncGenerator[None, None]:
        """Waits at its ``yield`` until the loop shuts down (``shutdown_asyncgens``, after
        the loop's tasks were cancelled) or ``aclose`` closes it, then closes the loop's
        clients on the loop (errors ignored: a server gone is nothing to report here)."""
        try:
            yield
        finally:
            clients, _ = self._forget(loop)
            if clients is not None and not loop.is_closed():
                with contextlib.suppress(Exception):
                    await _aclose_clients(clients)

    def _forget(self, loop: asyncio.AbstractEventLoop
                ) -> tuple[Clients | None, AsyncGenerator[None, None] | None]:
        """Remove ``loop``'s clients and watcher from this set and return them."""
        with self._lock:
            return self._per_loop.pop(loop, None), self._watchers.pop(loop, None)

    def _drop_closed_loops(self) -> None:
        """Drop the clients of loops closed without their watcher having run (a loop
        closed by ``loop.close()`` without ``shutdown_asyncgens``): their Redis sockets
        are closed now (no loop can close them any more), the rest when collected."""
        with self._lock:
            closed = [loop for loop in self._per_loop if loop.is_closed()]
        for loop in closed:
            clients, watcher = self._forget(loop)
            if watcher is not None:
                _finish(watcher)
            if clients is not None:
                _drop_sockets(clients)

    def loop_for_sync_call(self) -> asyncio.AbstractEventLoop:
        raise AssertionError("UrlClients always has sync clients")  # pragma: no cover

    def close(self) -> None:
        """Close the sync clients and drop the asyncio clients of closed loops; those of
        a loop still open are closed when it shuts down (their watcher)."""
        self._drop_closed_loops()
        self._redis.close()
        self._mongo.close()

    async def aclose(self) -> None:
        """Close the sync clients and the asyncio clients of every event loop: those of
        the running loop here; those of another loop that is running (another thread's),
        on that loop (waiting up to 5 s); those of a closed loop are dropped; those of a
        loop not running now (e.g. an Agent Server run thread between runs) when it shuts
        down."""
        here = asyncio.get_running_loop()
        with self._lock:
            watchers = list(self._watchers.items())
        for loop, watcher in watchers:
            if loop is here:
                await watcher.aclose()
            elif loop.is_running() and not loop.is_closed():
                done = asyncio.run_coroutine_threadsafe(watcher.aclose(), loop)
                try:
                    await asyncio.wait_for(asyncio.wrap_future(done), 5.0)
                except Exception:  # that loop stopped or hung: leave them to the process
                    pass
        await asyncio.to_thread(self.close)


def _start(watcher: AsyncGenerator[None, None]) -> None:
    """Run ``watcher`` to its ``yield`` now, in the running loop's thread (its first step
    registers it with the loop's ``shutdown_asyncgens``)."""
    step = watcher.asend(None)
    try:
        step.send(None)
    except StopIteration:
        return
    step.close()  # pragma: no cover - a watcher awaits nothing before its yield


def _finish(watcher: AsyncGenerator[None, None]) -> None:
    """End ``watcher`` without a loop (its loop is closed): its ``finally`` finds its
    clients forgotten already and awaits nothing."""
    closing = watcher.aclose()
    try:
        closing.send(None)
    except (StopIteration, RuntimeError):  # ended (RuntimeError: it is running now)
        return
    closing.close()  # pragma: no cover - it awaited: not expected


def _drop_sockets(clients: Clients) -> None:
    """Close the Redis sockets of asyncio clients whose loop is closed (closing them
    through the client needs their loop). redis-py's pooled connections of a single
    server client are reached; others (a cluster client's, MongoDB's) are closed when the
    garbage collector takes their transports."""
    for conn in pooled_connections(getattr(clients.redis, "connection_pool", None)):
        sock = raw_socket(conn)
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.close()


async def _aclose_clients(clients: Clients) -> None:
    """Close one event loop's asyncio Redis and MongoDB clients (on that loop)."""
    await clients.redis.aclose()
    await clients.db.client.close()
