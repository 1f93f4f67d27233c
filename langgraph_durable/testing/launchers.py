"""The test servers' launchers: one Redis, MongoDB-wire or S3 server each, from its
environment variable, a Docker container or a local process (the order is in
:mod:`langgraph_durable.testing`), with its life cycle (start, stop, kill, cleanup at exit).
"""

from __future__ import annotations

import atexit
import contextlib
import functools
import importlib.util
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import urlparse

import pymongo
import redis

__all__ = ["MongoServer", "RedisServer", "S3Server", "ServerError"]
__all__ += ["mongo_server", "redis_server", "s3_server", "without_database"]

START_TIMEOUT = 30.0
"""Seconds a server has to answer its first ping before :class:`ServerError` is raised."""
STOP_TIMEOUT = 10.0
"""Seconds ``stop()`` waits after SIGTERM before it sends SIGKILL."""
_LIVE: set[_Server] = set()
_S = TypeVar("_S", bound="_Server")


class ServerError(RuntimeError):
    """A test server could not be found, started or controlled (message says why)."""


class _EarlyExit(ServerError):
    """The server process exited before it answered (e.g. its port was taken)."""


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _find_exe(name: str, hint: str) -> str:
    beside = Path(sys.executable).parent / name
    found = str(beside) if beside.exists() else shutil.which(name)
    if found is None:
        raise ServerError(f"{name} not found next to {sys.executable} or on PATH: {hint}")
    return found


@functools.cache
def _docker_answers() -> bool:
    if os.environ.get("LANGGRAPH_DURABLE_NO_DOCKER"):
        return False
    try:
        import docker  # type: ignore[import-not-found]
        import testcontainers.core.container  # type: ignore[import-not-found]  # noqa: F401

        return bool(docker.from_env(timeout=3).ping())
    except Exception:
        return False


class _Server:
    """Common life cycle of one server: boot, readiness ping, stop/start/kill, cleanup."""

    kind, env_var, image, image_port, url_format = "server", "", "", 0, ""
    local_only = False
    """True for members of a cluster or sentinel setup: always a local process."""

    def __init__(self, *, data_dir: str | None = None) -> None:
        url = os.environ.get(self.env_var) or None
        self.external = url is not None
        self._external_url = url or ""
        self._host = "127.0.0.1"
        self.port = (urlparse(url).port or 0) if url else 0
        self._proc: subprocess.Popen[bytes] | None = None
        self._container: Any = None
        self._workdir = "" if url else tempfile.mkdtemp(prefix=f"lgd-{self.kind}-")
        self.data_dir = data_dir or (os.path.join(self._workdir, "data") if self._workdir else "")
        self._log = os.path.join(self._workdir, "server.log") if self._workdir else ""
        self.startup_seconds = 0.0
        """Seconds the last (re)start took until the server answered its ping."""

    @property
    def url(self) -> str:
        """Connection URL of the server."""
        return self._external_url or self.url_format.format(host=self._host, port=self.port)

    def _argv(self) -> list[str]:
        raise NotImplementedError

    def _container_command(self) -> str | None:
        return None

    def _ping(self) -> None:
        raise NotImplementedError

    def _log_tail(self, chars: int = 3000) -> str:
        with contextlib.suppress(OSError):
            return Path(self._log).read_text(errors="replace")[-chars:]
        return "(no log)"

    def _wait_ready(self) -> None:
        began = time.monotonic()
        deadline = began + START_TIMEOUT
        while True:
            if self._proc is not None and self._proc.poll() is not None:
                raise _EarlyExit(
                    f"{self.kind} exited with code {self._proc.returncode} before answering on "
                    f"{self.url}; log tail:\n{self._log_tail()}"
                )
            try:
                self._ping()
                self.startup_seconds = time.monotonic() - began
                return
            except Exception as exc:
                if time.monotonic() > deadline:
                    tail = self._log_tail() if self._log else ""
                    raise ServerError(
                        f"{self.kind} did not answer on {self.url} within {START_TIMEOUT:.0f} s "
                        f"({exc!r}); log tail:\n{tail}"
                    ) from exc
                time.sleep(0.05)

    def _boot(self) -> None:
        began = time.monotonic()
        if self.external:
            self._wait_ready()
        elif not self.local_only and _docker_answers():
            from testcontainers.core.container import DockerContainer

            container = DockerContainer(self.image).with_exposed_ports(self.image_port)
            command = self._container_command()
            self._container = container.with_command(command) if command else container
            self._container.start()
            self._host = self._container.get_container_host_ip()
            self.port = int(self._container.get_exposed_port(self.image_port))
            self._wait_ready()
        else:
            for attempt in range(3):  # a freshly picked port may be taken before the bind
                self._pick_ports()
                try:
                    self._spawn()
                    break
                except _EarlyExit as exc:
                    self._signal(signal.SIGKILL)
                    if attempt == 2 or "in use" not in str(exc):
                        raise
        self.startup_seconds = time.monotonic() - began

    def _pick_ports(self) -> None:
        self.port = _free_port()

    def _spawn(self) -> None:
        os.makedirs(self.data_dir, exist_ok=True)
        with open(self._log, "ab") as log:
            self._proc = subprocess.Popen(
                self._argv(), cwd=self._workdir, stdin=subprocess.DEVNULL, stdout=log,
                stderr=subprocess.STDOUT, start_new_session=True,
            )  # fmt: skip
        _LIVE.add(self)
        self._wait_ready()

    def _check_local(self, action: str) -> None:
        if self.external:
            raise ServerError(
                f"cannot {action} the {self.kind} server at {self.url}: it is external "
                f"(set by {self.env_var}); unset {self.env_var} to get a local process"
            )
        if self._container is not None:
            raise ServerError(f"cannot {action} a {self.kind} container; only local processes")

    def _signal(self, sig: int) -> None:
        proc = self._proc
        if proc is None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, sig)
            deadline = time.monotonic() + STOP_TIMEOUT
            while sig != signal.SIGKILL and proc.poll() is None and time.monotonic() < deadline:
                time.sleep(0.02)
                self._nudge()
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        self._proc = None

    def _nudge(self) -> None:
        """Called while a stopping server has not exited yet."""

    def start(self) -> None:
        """Restart a stopped local server on the same port and data dir; waits until it answers.

        Raises :class:`ServerError` if the server is external or a container, is already
        running, or does not answer within ``START_TIMEOUT`` seconds.
        """
        self._check_local("start")
        if self._proc is not None and self._proc.poll() is None:
            raise ServerError(f"{self.kind} on port {self.port} is already running")
        self._spawn()

    def stop(self) -> None:
        """Stop gracefully (SIGTERM, SIGKILL after ``STOP_TIMEOUT`` s); the data dir stays.

        Raises :class:`ServerError` if the server is external.
        """
        if self._container is not None:
            self._container.stop()
            self._container = None
            return
        self._check_local("stop")
        self._signal(signal.SIGTERM)

    def kill(self) -> None:
        """Kill the process group with SIGKILL (a crash). Raises :class:`ServerError` if external
        or a container."""
        self._check_local("kill")
        self._signal(signal.SIGKILL)

    def close(self) -> None:
        """Stop the server if this interpreter owns it and remove its temporary folder."""
        if self._container is not None:
            self.stop()
        self._signal(signal.SIGTERM)
        _LIVE.discard(self)
        if self._workdir:
            shutil.rmtree(self._workdir, ignore_errors=True)


class RedisServer(_Server):
    """A Redis server: ``.url`` ("redis://127.0.0.1:PORT/0"), ``.port``, ``.data_dir``,
    ``.appendonly``, ``.startup_seconds``, ``.start()``, ``.stop()``, ``.kill()``."""

    kind, env_var, image, image_port = "redis", "REDIS_URL", "redis:7-alpine", 6379
    url_format = "redis://{host}:{port}/0"

    def __init__(self, *, appendonly: bool = False, data_dir: str | None = None) -> None:
        self.appendonly = appendonly
        super().__init__(data_dir=data_dir)

    def _argv(self) -> list[str]:
        exe = shutil.which("redis-server")
        if exe is None:
            raise ServerError(
                "redis-server not found on PATH: install it with `apt-get install redis-server`, "
                "or set REDIS_URL to a running server"
            )
        aof = "yes" if self.appendonly else "no"
        flags = f"--port {self.port} --bind 127.0.0.1 --appendonly {aof} --daemonize no"
        return [exe, *flags.split(), "--save", "", "--dir", self.data_dir]

    def _container_command(self) -> str:
        return f"redis-server --save '' --appendonly {'yes' if self.appendonly else 'no'}"

    def _ping(self) -> None:
        with redis.Redis.from_url(self.url, socket_timeout=1, socket_connect_timeout=1) as client:
            client.ping()


def without_database(url: str) -> str:
    """``url`` without the database in its path (``mongodb://h:p/mydb?x=1`` ->
    ``mongodb://h:p/?authSource=mydb&x=1``): the servers from ``MONGODB_URL`` serve tools
    that choose their own database; the named database stays the authentication source
    when the URL gave none, as the driver would have used it."""
    scheme, _, rest = url.partition("://")
    hosts, slash, path = rest.partition("/")
    db, _, query = path.partition("?")
    if not slash or not db:
        return url
    params = [p for p in query.split("&") if p]
    if not any(p.lower().startswith("authsource=") for p in params):
        params.insert(0, f"authSource={db}")
    return f"{scheme}://{hosts}/?{'&'.join(params)}"


_SECANTUS_DAEMON = str(Path(__file__).with_name("secantus_daemon.py"))
"""SecantusDB's daemon with its TTL sweeper off and ``$in`` of strings matched by a set
(``secantus_daemon.py``: why, and why no client sees a difference)."""


class MongoServer(_Server):
    """A MongoDB-wire server (SecantusDB locally): ``.url``, ``.port``, ``.data_dir``,
    ``.startup_seconds``, ``.start()``, ``.stop()``, ``.kill()``."""

    kind, env_var, image, image_port = "mongodb", "MONGODB_URL", "mongo:7", 27017
    url_format = "mongodb://{host}:{port}/?directConnection=true"

    def __init__(self, *, data_dir: str | None = None, replica_set: bool = False,
                 in_memory: bool = False) -> None:
        self.replica_set = replica_set
        self.in_memory = in_memory
        """SecantusDB keeps its data in memory only (``--storage-path :memory:``): no
        journal written, about a fifth less of the server's CPU under tests that write,
        and nothing kept across ``stop()``/``start()``. Ignored for an external server
        or a container."""
        super().__init__(data_dir=data_dir)
        if self.external:  # tests, notebooks and the demo name their own databases
            self._external_url = without_database(self._external_url)

    def _argv(self) -> list[str]:
        exe = _find_exe("secantusd-py", "`pip install secantusdb`, or set MONGODB_URL")
        flags = f"--host 127.0.0.1 --port {self.port}" + (
            "" if self.replica_set else " --standalone"
        )
        args = [*flags.split(), "--storage-path", ":memory:" if self.in_memory else self.data_dir]
        if importlib.util.find_spec("secantus") is not None:  # its daemon, patched
            return [sys.executable, _SECANTUS_DAEMON, *args]
        return [exe, *args]

    def _nudge(self) -> None:
        # After SIGTERM SecantusDB's accept thread stays blocked in accept() and its stop()
        # waits 2 s for it, unless a client connects: a bare TCP connect makes stop ~0.05 s.
        with contextlib.suppress(OSError), socket.create_connection((self._host, self.port), 0.2):
            pass

    def _ping(self) -> None:
        with pymongo.MongoClient[dict[str, Any]](self.url, serverSelectionTimeoutMS=1000) as client:
            client.admin.command("ping")


class S3Server(_Server):
    """An S3 endpoint (moto locally): ``.endpoint_url`` ("http://127.0.0.1:PORT"), ``.port``,
    ``.startup_seconds``, ``.stop()``. Any access key and secret are accepted."""

    kind, env_var, image, image_port = "s3", "S3_ENDPOINT_URL", "motoserver/moto:latest", 5000
    url_format = "http://{host}:{port}"

    @property
    def endpoint_url(self) -> str:
        """The S3 endpoint URL to pass to ``boto3.client("s3", endpoint_url=...)``."""
        return self.url

    def _argv(self) -> list[str]:
        exe = _find_exe("moto_server", "`pip install 'moto[server]'`, or set S3_ENDPOINT_URL")
        return [exe, "-H", "127.0.0.1", "-p", str(self.port)]

    def _ping(self) -> None:
        try:
            with urllib.request.urlopen(self.url + "/", timeout=1):
                pass
        except urllib.error.HTTPError:
            pass  # any HTTP answer means the server is up


@contextlib.contextmanager
def _running(server: _S) -> Iterator[_S]:
    try:
        server._boot()
        yield server
    finally:
        server.close()


def redis_server(
    *, appendonly: bool = False, data_dir: str | None = None
) -> contextlib.AbstractContextManager[RedisServer]:
    """Context manager yielding a running :class:`RedisServer` (``REDIS_URL`` if set).

    ``appendonly`` turns on AOF so data survives ``stop()``/``start()``; ``data_dir`` defaults
    to a temporary folder. Raises :class:`ServerError` if no server can be started.
    """
    return _running(RedisServer(appendonly=appendonly, data_dir=data_dir))


def mongo_server(
    *, data_dir: str | None = None, replica_set: bool = False, in_memory: bool = False
) -> contextlib.AbstractContextManager[MongoServer]:
    """Context manager yielding a running :class:`MongoServer` (``MONGODB_URL`` if set).

    ``replica_set`` advertises SecantusDB as a single-node replica set (needed for change
    streams, slower writes); ``in_memory`` keeps its data in memory only (no journal, lost
    on ``stop()``: ``MongoServer.in_memory``). Raises :class:`ServerError` if no server
    can be started.
    """
    return _running(MongoServer(data_dir=data_dir, replica_set=replica_set,
                                in_memory=in_memory))


def s3_server() -> contextlib.AbstractContextManager[S3Server]:
    """Context manager yielding a running :class:`S3Server` (``S3_ENDPOINT_URL`` if set).

    Raises :class:`ServerError` if no server can be started."""
    return _running(S3Server())


@atexit.register
def _kill_leftovers() -> None:
    for server in list(_LIVE):
        server._signal(signal.SIGKILL)
        server.close()
