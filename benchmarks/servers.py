"""Servers the benchmark needs: Redis and SecantusDB through ``langgraph_durable.testing``
(as the tests start them), and PostgreSQL from Debian's ``postgresql`` package (or the
``pg_ctl``/``initdb`` found on ``PATH``), started here with ``initdb``/``pg_ctl`` on a
free loopback port in a temporary folder.

PostgreSQL refuses to run as root, so when this process is root the server runs as the
``postgres`` system user (created by the Debian package) through ``runuser``.
"""

from __future__ import annotations

import contextlib
import glob
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass


class PostgresUnavailable(RuntimeError):
    """PostgreSQL could not be found or started; the message says why."""


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _pg_bin() -> str:
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/pg_ctl"),
                   key=lambda p: int(p.split("/")[4]) if p.split("/")[4].isdigit() else 0)
    if found:
        return os.path.dirname(found[-1])
    on_path = shutil.which("pg_ctl")  # e.g. /usr/local/bin/pg_ctl, maybe a symlink
    if on_path and os.path.exists(os.path.join(os.path.dirname(os.path.realpath(on_path)),
                                               "initdb")):
        return os.path.dirname(os.path.realpath(on_path))
    raise PostgresUnavailable(
        "no /usr/lib/postgresql/*/bin/pg_ctl and no pg_ctl (with initdb beside it) on PATH: "
        "install Debian's package with `apt-get update && apt-get install -y postgresql`")


@dataclass
class PostgresServer:
    """A running PostgreSQL: ``url`` (libpq URI), ``version``, ``settings``."""

    url: str
    port: int
    version: str
    settings: str
    bindir: str
    admin_url: str


@contextlib.contextmanager
def postgres_server() -> Iterator[PostgresServer]:
    """Start PostgreSQL (``POSTGRES_URL`` if set, else a local one) and stop it on exit.

    Raises :class:`PostgresUnavailable` with the reason when it cannot be started."""
    external = os.environ.get("POSTGRES_URL")
    if external:
        yield PostgresServer(external, 0, "external", "external server", "", external)
        return
    bindir = _pg_bin()
    as_root = os.geteuid() == 0
    prefix: list[str] = []
    if as_root:
        try:
            pwd.getpwnam("postgres")
        except KeyError as exc:
            raise PostgresUnavailable("running as root and no `postgres` user to run "
                                      "PostgreSQL as") from exc
        runuser = shutil.which("runuser")
        if runuser is None:
            raise PostgresUnavailable("running as root and no `runuser` to drop privileges")
        prefix = [runuser, "-u", "postgres", "--"]
    work = tempfile.mkdtemp(prefix="lgd-bench-pg-")
    data, sock = os.path.join(work, "data"), os.path.join(work, "sock")
    os.makedirs(sock)
    if as_root:
        pw = pwd.getpwnam("postgres")
        for p in (work, sock):
            os.chown(p, pw.pw_uid, pw.pw_gid)
    log = os.path.join(work, "server.log")
    user = "postgres" if as_root else pwd.getpwuid(os.geteuid()).pw_name

    def run(argv: list[str]) -> None:
        res = subprocess.run(prefix + argv, capture_output=True, text=True, timeout=120)
        if res.returncode != 0:
            raise PostgresUnavailable(f"{' '.join(argv[:2])} failed: "
                                      f"{(res.stderr or res.stdout)[-1500:]}")

    started = False
    try:
        run([f"{bindir}/initdb", "-D", data, "-A", "trust", "-U", user, "-E", "UTF8",
             "--no-instructions"])
        port = _free_port()
        # defaults kept (fsync=on, synchronous_commit=on), like a real deployment
        opts = (f"-p {port} -k {sock} -c listen_addresses=127.0.0.1 "
                f"-c max_connections=300 -c shared_buffers=256MB")
        run([f"{bindir}/pg_ctl", "-D", data, "-l", log, "-o", opts, "-w", "-t", "60", "start"])
        started = True
        url = f"postgresql://{user}@127.0.0.1:{port}/postgres"
        version = subprocess.run([f"{bindir}/postgres", "--version"], capture_output=True,
                                 text=True).stdout.strip()
        yield PostgresServer(url, port, version,
                             "fsync=on, synchronous_commit=on, shared_buffers=256MB",
                             bindir, url)
    finally:
        if started:
            with contextlib.suppress(Exception):
                run([f"{bindir}/pg_ctl", "-D", data, "-m", "fast", "-w", "stop"])
        shutil.rmtree(work, ignore_errors=True)


def wait_port(host: str, port: int, timeout_s: float = 10.0) -> None:
    """Wait until ``host:port`` accepts TCP connections."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            with socket.create_connection((host, port), 0.5):
                return
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)
