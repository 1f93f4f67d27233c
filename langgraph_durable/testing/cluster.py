"""Real multi-node Redis setups for tests (never mocks): a Redis Cluster and a Sentinel group.

Part of :mod:`langgraph_durable.testing` (which re-exports every public name here, and
whose pytest plugin provides the fixtures below). Each setup resolves its servers in this
order:

1. an environment variable (``REDIS_CLUSTER_URL``, ``REDIS_SENTINEL_URL``, in the URL schemes
   of :mod:`langgraph_durable.io.redis_urls`): the setup is external, so ``kill_master`` and
   ``stop`` raise :class:`~langgraph_durable.testing.ServerError`;
2. local ``redis-server`` processes on free 127.0.0.1 ports, each with a temporary folder
   removed on exit (no Docker: cluster and sentinel nodes announce their own addresses).

* :class:`RedisClusterServer`: ``masters`` primaries with ``replicas`` replicas each
  (default 3 + 3), made with ``redis-cli --cluster create``; ready when every node reports
  ``cluster_state:ok``, all 16384 slots are served and every replica's link is up.
* :class:`RedisSentinelServer`: one primary, ``replicas`` replicas (default 1) and
  ``sentinels`` sentinels (default 3, quorum 2), each sentinel ``redis-server --sentinel``
  with its own config file; ready when every sentinel names the primary and knows the
  replicas and the other sentinels.

Both fail over fast (``node_timeout_ms`` / ``down_after_ms``, default 1000 ms) so tests can
SIGKILL a primary (``kill_master``) and poll (``wait_for``) until a replica is promoted.

Measured on the 2-core development machine (median of 3, Redis 7.0.15): the 3 + 3 cluster
is ready 2.2 s after the first process starts (``redis-cli --cluster create`` itself waits
about 1 s for the join), the Sentinel group 2.3 s (sentinels find each other through hello
messages every 2 s); from SIGKILL of a primary to healthy again: cluster 2.6 s, Sentinel
2.2 s. A one-node SecantusDB replica set (``mongo_replica_set_url``) starts in 1.1 s, a
single ``redis-server`` in 0.06 s. Replicas sync with ``repl-diskless-sync-delay 0``: with
Redis's default 5 s delay each setup took over 5 s longer.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import time
from collections.abc import Iterator
from typing import Any

import redis

from ..io.redis_urls import parse_redis_url
from . import wait_for
from .launchers import START_TIMEOUT, RedisServer, ServerError, _free_port, _Server, mongo_server

try:
    import pytest
except ImportError:  # pragma: no cover - the demo may run without pytest
    pytest = None  # type: ignore[assignment]

__all__ = ["RedisClusterServer", "RedisSentinelServer", "redis_cluster", "redis_sentinel"]

SERVICE_NAME = "mymaster"
"""Service name the local sentinels monitor (the path of ``RedisSentinelServer.url``)."""


def _client(port: int) -> redis.Redis:
    return redis.Redis("127.0.0.1", port, socket_timeout=2, socket_connect_timeout=1)


class _Node(RedisServer):
    """One local ``redis-server`` of a setup, with extra command-line arguments."""

    kind, env_var, local_only = "redis-node", "", True

    def __init__(self, extra: list[str]) -> None:
        self.extra = extra
        super().__init__()

    def _argv(self) -> list[str]:
        # a replica's first sync must not wait the default 5 s for more replicas to join
        return [*super()._argv(), "--repl-diskless-sync-delay", "0", *self.extra]

    def info(self, section: str) -> dict[str, Any]:
        """``INFO section`` of this node as a dict."""
        with _client(self.port) as c:
            return dict(c.info(section))


class _ClusterNode(_Node):
    kind = "redis-cluster-node"

    def __init__(self, node_timeout_ms: int) -> None:
        self.bus_port = 0
        self.node_timeout_ms = node_timeout_ms
        super().__init__([])

    def _pick_ports(self) -> None:
        self.port = _free_port()
        self.bus_port = _free_port()
        while self.bus_port == self.port:  # pragma: no cover - the OS rarely repeats a port
            self.bus_port = _free_port()

    def _argv(self) -> list[str]:
        conf = os.path.join(self.data_dir, "nodes.conf")
        self.extra = ["--cluster-enabled", "yes", "--cluster-config-file", conf,
                      "--cluster-node-timeout", str(self.node_timeout_ms),
                      "--cluster-port", str(self.bus_port)]
        return super()._argv()


class _SentinelNode(_Server):
    """One ``redis-server --sentinel`` with its own config file (the sentinel rewrites it)."""

    kind, local_only = "redis-sentinel", True
    url_format = "redis://{host}:{port}"

    def __init__(self, master_port: int, down_after_ms: int) -> None:
        self.master_port = master_port
        self.down_after_ms = down_after_ms
        self._conf_port = 0
        super().__init__()
        self.conf = os.path.join(self._workdir, "sentinel.conf")

    def _argv(self) -> list[str]:
        exe = shutil.which("redis-server")
        if exe is None:
            raise ServerError("redis-server not found on PATH: `apt-get install redis-server`")
        if self._conf_port != self.port:  # first start, or a retry on another port
            s = SERVICE_NAME
            lines = [f"port {self.port}", "bind 127.0.0.1", "daemonize no",
                     f"dir {self.data_dir}",
                     f"sentinel monitor {s} 127.0.0.1 {self.master_port} 2",
                     f"sentinel down-after-milliseconds {s} {self.down_after_ms}",
                     f"sentinel failover-timeout {s} {max(3 * self.down_after_ms, 3000)}",
                     f"sentinel parallel-syncs {s} 1"]
            with open(self.conf, "w") as f:
                f.write("\n".join(lines) + "\n")
            self._conf_port = self.port
        return [exe, self.conf, "--sentinel"]

    def _ping(self) -> None:
        with _client(self.port) as c:
            c.ping()

    def master(self) -> dict[str, Any]:
        """``SENTINEL MASTER <service>`` of this sentinel, as a dict of str."""
        with _client(self.port) as c:
            raw = c.execute_command("SENTINEL", "MASTER", SERVICE_NAME)
        if isinstance(raw, dict):
            return {_s(k): _s(v) for k, v in raw.items()}
        return {_s(k): _s(v) for k, v in zip(raw[::2], raw[1::2])}


def _s(value: Any) -> Any:
    return value.decode() if isinstance(value, bytes) else value


class _Setup:
    """Life cycle shared by the cluster and the sentinel group: several processes, one URL."""

    kind, env_var = "setup", ""

    def __init__(self) -> None:
        url = os.environ.get(self.env_var) or None
        self.external = url is not None
        self._external_url = url or ""
        if url:
            parse_redis_url(url)  # a bad URL fails here, naming what is wrong
        self.nodes: list[_Server] = []
        self.startup_seconds = 0.0
        """Seconds from the first process start until the whole setup was ready."""

    def _check_local(self, action: str) -> None:
        if self.external:
            raise ServerError(f"cannot {action} the {self.kind} at {self.url}: it is external "
                              f"(set by {self.env_var}); unset it to get local processes")

    @property
    def url(self) -> str:
        raise NotImplementedError

    def _start_node(self, node: _Server) -> _Server:
        self.nodes.append(node)
        node._boot()
        return node

    def close(self) -> None:
        """Kill every process this setup started and remove their temporary folders."""
        for node in self.nodes:
            node.close()
        self.nodes.clear()

    def stop(self) -> None:
        """Stop the whole setup (``close``). Raises ``ServerError`` if it is external."""
        self._check_local("stop")
        self.close()


class RedisClusterServer(_Setup):
    """A Redis Cluster on loopback: ``.url`` (``redis+cluster://h:p,h:p,.../0``, every
    node), ``.nodes`` (the processes, each with ``.port``, ``.kill()``, ``.start()``),
    ``.masters()``, ``.kill_master(i)``, ``.wait_healthy()``, ``.startup_seconds``.

    ``masters`` primaries share the 16384 slots, each with ``replicas`` replicas;
    ``node_timeout_ms`` is ``cluster-node-timeout`` (a killed primary's replica is promoted
    about that long after the kill). ``REDIS_CLUSTER_URL`` makes it external."""

    kind, env_var = "redis cluster", "REDIS_CLUSTER_URL"

    def __init__(self, *, masters: int = 3, replicas: int = 1,
                 node_timeout_ms: int = 1000) -> None:
        super().__init__()
        self.n_masters, self.n_replicas = masters, replicas
        self.node_timeout_ms = node_timeout_ms

    @property
    def url(self) -> str:
        """``redis+cluster://127.0.0.1:P1,...,127.0.0.1:Pn/0`` (every node is a startup node)."""
        if self.external:
            return self._external_url
        return "redis+cluster://" + ",".join(f"127.0.0.1:{n.port}" for n in self.nodes) + "/0"

    def boot(self) -> None:
        """Start the nodes, join them with ``redis-cli --cluster create`` and wait until the
        cluster is healthy (``wait_healthy``). Raises ``ServerError`` if it is not within
        ``START_TIMEOUT`` seconds."""
        began = time.monotonic()
        if self.external:
            return
        cli = shutil.which("redis-cli")
        if cli is None:
            raise ServerError("redis-cli not found on PATH: `apt-get install redis-tools`")
        for _ in range(self.n_masters * (1 + self.n_replicas)):
            self._start_node(_ClusterNode(self.node_timeout_ms))
        addrs = [f"127.0.0.1:{n.port}" for n in self.nodes]
        done = subprocess.run(
            [cli, "--cluster", "create", *addrs, "--cluster-replicas", str(self.n_replicas),
             "--cluster-yes"], capture_output=True, text=True, timeout=START_TIMEOUT)
        if done.returncode != 0:
            raise ServerError(f"redis-cli --cluster create failed ({done.returncode}):\n"
                              f"{done.stdout[-2000:]}{done.stderr[-2000:]}")
        self.wait_healthy(START_TIMEOUT)
        self.startup_seconds = time.monotonic() - began

    def _live(self) -> list[_ClusterNode]:
        return [n for n in self.nodes if isinstance(n, _ClusterNode) and n._proc is not None]

    def cluster_nodes(self) -> list[dict[str, Any]]:
        """``CLUSTER NODES`` as one live node sees it: dicts with ``port``, ``flags`` (set of
        str), ``master_id`` (None for a primary), ``id``, ``slots`` (``"first-last"`` ranges)."""
        live = self._live()
        if not live:
            raise ServerError("no node of the cluster is running")
        with _client(live[0].port) as c:
            raw = c.execute_command("CLUSTER NODES")  # redis-py parses it into a dict
        return [{"id": v["node_id"], "port": int(addr.split("@")[0].rsplit(":", 1)[1]),
                 "flags": set(v["flags"].split(",")),
                 "master_id": None if v["master_id"] == "-" else v["master_id"],
                 "slots": ["-".join(r) for r in v["slots"]]} for addr, v in raw.items()]

    def healthy(self) -> bool:
        """True when every running node reports ``cluster_state:ok`` with all 16384 slots
        ok, there are ``masters`` primaries serving slots, every other node is a replica
        and every running replica's link to its primary is up."""
        live = self._live()
        for node in live:
            info = node.info("replication")
            with _client(node.port) as c:
                fields = c.execute_command("CLUSTER INFO")  # parsed into a dict of str
            if fields.get("cluster_state") != "ok" or fields.get("cluster_slots_ok") != "16384":
                return False
            if info.get("role") == "slave" and info.get("master_link_status") != "up":
                return False
        rows = [r for r in self.cluster_nodes() if not {"fail", "fail?"} & r["flags"]]
        if any("slave" not in r["flags"] and not r["slots"] for r in rows):
            return False  # a node not yet a replica (CLUSTER REPLICATE still propagating)
        return sum(1 for r in rows if "master" in r["flags"] and r["slots"]) == self.n_masters

    def wait_healthy(self, timeout_s: float = START_TIMEOUT) -> None:
        """Poll ``healthy`` until true; raises ``TimeoutError`` after ``timeout_s`` s."""
        wait_for(lambda: _quiet(self.healthy), timeout_s, f"{self.kind} healthy", 0.05)

    def masters(self) -> list[_Node]:
        """The running primaries that serve slots now, ordered by their first slot (so
        ``masters()[0]`` serves slot 0). Changes after a failover."""
        by_port = {n.port: n for n in self._live()}
        rows = [r for r in self.cluster_nodes()
                if "master" in r["flags"] and r["slots"] and not {"fail", "fail?"} & r["flags"]]
        rows.sort(key=lambda r: int(r["slots"][0].split("-")[0]))
        return [by_port[r["port"]] for r in rows if r["port"] in by_port]

    def kill_master(self, index: int = 0) -> _Node:
        """SIGKILL the primary ``masters()[index]`` and return its node (``.start()`` brings
        it back, as a replica once it learns of the failover). Raises ``ServerError`` if
        external."""
        self._check_local("kill a primary of")
        node = self.masters()[index]
        node.kill()
        return node


class RedisSentinelServer(_Setup):
    """One primary, ``replicas`` replicas and ``sentinels`` sentinels (quorum 2) on
    loopback: ``.url`` (``redis+sentinel://h:p,h:p,h:p/mymaster/0``, the sentinels),
    ``.primary``/``.replicas`` (nodes as started), ``.sentinels``, ``.master_port()``
    (what the sentinels say now), ``.kill_master()``, ``.startup_seconds``.

    ``down_after_ms`` is ``down-after-milliseconds``: a killed primary is replaced a little
    after it. ``REDIS_SENTINEL_URL`` makes it external."""

    kind, env_var = "redis sentinel group", "REDIS_SENTINEL_URL"

    def __init__(self, *, replicas: int = 1, sentinels: int = 3,
                 down_after_ms: int = 1000) -> None:
        super().__init__()
        self.n_replicas, self.n_sentinels = replicas, sentinels
        self.down_after_ms = down_after_ms
        self.data_nodes: list[_Node] = []
        self.sentinels: list[_SentinelNode] = []

    @property
    def url(self) -> str:
        """``redis+sentinel://127.0.0.1:S1,...,127.0.0.1:Sn/mymaster/0``."""
        if self.external:
            return self._external_url
        hosts = ",".join(f"127.0.0.1:{s.port}" for s in self.sentinels)
        return f"redis+sentinel://{hosts}/{SERVICE_NAME}/0"

    def boot(self) -> None:
        """Start the primary, its replicas and the sentinels; wait until ``healthy``."""
        began = time.monotonic()
        if self.external:
            return
        primary = self._start_node(_Node([]))
        self.data_nodes.append(primary)  # type: ignore[arg-type]
        for _ in range(self.n_replicas):
            node = self._start_node(_Node(["--replicaof", "127.0.0.1", str(primary.port)]))
            self.data_nodes.append(node)  # type: ignore[arg-type]
        for _ in range(self.n_sentinels):
            s = self._start_node(_SentinelNode(primary.port, self.down_after_ms))
            self.sentinels.append(s)  # type: ignore[arg-type]
        self.wait_healthy(START_TIMEOUT)
        self.startup_seconds = time.monotonic() - began

    def master_port(self) -> int | None:
        """The primary's port as the first running sentinel names it now (None if none)."""
        for s in self.sentinels:
            if s._proc is None:
                continue
            with _client(s.port) as c:
                addr = c.execute_command("SENTINEL", "GET-MASTER-ADDR-BY-NAME", SERVICE_NAME)
            return int(addr[1]) if addr else None
        return None

    def healthy(self) -> bool:
        """True when every sentinel names the same running primary, sees no primary down,
        knows ``replicas`` replicas and the other sentinels, and every running replica's link
        to that primary is up."""
        ports = {n.port: n for n in self.data_nodes if n._proc is not None}
        masters = set()
        for s in self.sentinels:
            m = s.master()
            masters.add(int(m["port"]))
            if "down" in m["flags"] or int(m["num-slaves"]) < self.n_replicas:
                return False
            if int(m["num-other-sentinels"]) != self.n_sentinels - 1:
                return False
        if len(masters) != 1 or next(iter(masters)) not in ports:
            return False
        port = masters.pop()
        if ports[port].info("replication").get("role") != "master":
            return False
        for node in ports.values():
            info = node.info("replication")
            if node.port != port and (info.get("role") != "slave"
                                      or info.get("master_port") != port
                                      or info.get("master_link_status") != "up"):
                return False
        return True

    def wait_healthy(self, timeout_s: float = START_TIMEOUT) -> None:
        """Poll ``healthy`` until true; raises ``TimeoutError`` after ``timeout_s`` s."""
        wait_for(lambda: _quiet(self.healthy), timeout_s, f"{self.kind} healthy", 0.05)

    def kill_master(self) -> _Node:
        """SIGKILL the current primary (as the sentinels name it) and return its node.
        Raises ``ServerError`` if external or no sentinel names a running primary."""
        self._check_local("kill the primary of")
        port = self.master_port()
        for node in self.data_nodes:
            if node.port == port and node._proc is not None:
                node.kill()
                return node
        raise ServerError(f"no running primary on port {port} among {self.data_nodes}")


def _quiet(pred: Any) -> bool:
    """``pred()``, with a node that does not answer (yet) counted as False."""
    try:
        return bool(pred())
    except (redis.RedisError, OSError, KeyError, ValueError, IndexError):
        return False


@contextlib.contextmanager
def redis_cluster(*, masters: int = 3, replicas: int = 1,
                  node_timeout_ms: int = 1000) -> Iterator[RedisClusterServer]:
    """Context manager yielding a healthy :class:`RedisClusterServer` (``REDIS_CLUSTER_URL``
    if set). Raises ``ServerError`` if it cannot be made."""
    setup = RedisClusterServer(masters=masters, replicas=replicas,
                               node_timeout_ms=node_timeout_ms)
    try:
        setup.boot()
        yield setup
    finally:
        setup.close()


@contextlib.contextmanager
def redis_sentinel(*, replicas: int = 1, sentinels: int = 3,
                   down_after_ms: int = 1000) -> Iterator[RedisSentinelServer]:
    """Context manager yielding a healthy :class:`RedisSentinelServer`
    (``REDIS_SENTINEL_URL`` if set). Raises ``ServerError`` if it cannot be made."""
    setup = RedisSentinelServer(replicas=replicas, sentinels=sentinels,
                                down_after_ms=down_after_ms)
    try:
        setup.boot()
        yield setup
    finally:
        setup.close()


if pytest is not None:

    @pytest.fixture(scope="session")
    def redis_cluster_proc() -> Iterator[RedisClusterServer]:
        """Session-wide 3 + 3 :class:`RedisClusterServer`. Never kill its nodes: tests that
        fail over make their own with :func:`redis_cluster`."""
        with redis_cluster() as setup:
            yield setup

    @pytest.fixture(scope="session")
    def redis_cluster_url(redis_cluster_proc: RedisClusterServer) -> str:
        """``redis+cluster://`` URL of the session cluster."""
        return redis_cluster_proc.url

    @pytest.fixture(scope="session")
    def redis_sentinel_proc() -> Iterator[RedisSentinelServer]:
        """Session-wide :class:`RedisSentinelServer` (1 primary, 1 replica, 3 sentinels).
        Never kill its primary: tests that fail over make their own with
        :func:`redis_sentinel`."""
        with redis_sentinel() as setup:
            yield setup

    @pytest.fixture(scope="session")
    def redis_sentinel_url(redis_sentinel_proc: RedisSentinelServer) -> str:
        """``redis+sentinel://`` URL of the session sentinel group."""
        return redis_sentinel_proc.url

    @pytest.fixture(scope="session")
    def mongo_replica_set_url() -> Iterator[str]:
        """URL of a session-wide MongoDB-wire server that is a one-node replica set
        (SecantusDB with ``replica_set=True``; ``MONGODB_URL``'s server if set), for
        tests that need write concern ``majority`` acknowledged by a replica set."""
        with mongo_server(replica_set=True) as server:
            yield server.url
