"""Fault children started from a fork server that has already imported LangGraph and the
package (``multiprocessing``'s ``forkserver``), not as fresh interpreters.

A fresh ``python -m faults.child`` spends about 1.2 s of CPU importing LangGraph,
LangChain Core, redis-py, PyMongo and this package before it does anything; the fault
scenarios start about 45 children in ``make test``. Forked from one server per test
process that imported them once, a child starts in a few milliseconds.

What a child sees is what ``python -m MODULE ARGS`` would give it: ``MODULE`` run as
``__main__`` (``runpy``), ``sys.argv``, the working directory and the environment as
given, stdin from ``/dev/null``, stdout and stderr into the log file, the default signal
dispositions, and at exit its non-daemon threads joined and ``atexit`` functions run.
It is a real process of its own: ``SIGKILL`` kills it alone, ``SIGTERM`` reaches its
handlers. The handle (``Forked``) answers as much of ``subprocess.Popen`` as the fault
scenarios use: ``pid``, ``poll``, ``wait``, ``send_signal``, ``returncode`` (negative
for a signal, as ``Popen``'s).

``FAULT_CHILDREN=exec`` starts them as fresh interpreters instead (``Popen``).
"""

from __future__ import annotations

import atexit
import multiprocessing
import os
import runpy
import signal
import subprocess
import sys
import threading
from multiprocessing.context import ForkServerContext

PRELOAD = ["langgraph.graph", "langgraph.store.base", "langgraph_durable", "faults.graphs",
           "faults.tiers"]
"""Modules the server imports once (with them redis-py, PyMongo and LangChain Core). The
child modules themselves are not among them, so each runs as ``__main__`` from a fresh
module object, as with ``python -m``."""

_context: ForkServerContext | None = None


def _ctx() -> ForkServerContext:
    global _context
    if _context is None:
        _context = multiprocessing.get_context("forkserver")
        _context.set_forkserver_preload(PRELOAD)
    return _context


def forked() -> bool:
    """True when children are started from the fork server (the default on Linux)."""
    return (os.environ.get("FAULT_CHILDREN", "fork") != "exec"
            and "forkserver" in multiprocessing.get_all_start_methods())


def _main(module: str, args: list[str], cwd: str, env: dict[str, str], log: str,
          root: str) -> None:
    fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    os.close(fd)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    os.chdir(cwd)
    os.environ.clear()
    os.environ.update(env)
    if root not in sys.path:
        sys.path.insert(0, root)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    for sig in (signal.SIGTERM, signal.SIGUSR1):
        signal.signal(sig, signal.SIG_DFL)
    sys.argv = [module, *args]
    try:
        runpy.run_module(module, run_name="__main__", alter_sys=True)
    finally:
        # what an interpreter's exit does, in its order (multiprocessing would end the
        # process with os._exit, its atexit functions not run): join the non-daemon
        # threads, then the atexit functions
        threading._shutdown()  # type: ignore[attr-defined]
        atexit._run_exitfuncs()


class Forked:
    """A started fault child (see the module docstring)."""

    def __init__(self, module: str, args: list[str], *, cwd: str, env: dict[str, str],
                 log: str, root: str) -> None:
        self.args = [module, *args]
        self._proc = _ctx().Process(target=_main, args=(module, args, cwd, env, log, root),
                                    name=module, daemon=False)
        self._proc.start()

    @property
    def pid(self) -> int:
        assert self._proc.pid is not None
        return self._proc.pid

    @property
    def returncode(self) -> int | None:
        return self._proc.exitcode

    def poll(self) -> int | None:
        return self._proc.exitcode

    def wait(self, timeout: float | None = None) -> int:
        self._proc.join(timeout)
        code = self._proc.exitcode
        if code is None:
            raise subprocess.TimeoutExpired(self.args, timeout or 0.0)
        return code

    def send_signal(self, sig: int) -> None:
        if self._proc.exitcode is None:
            os.kill(self.pid, sig)


def start(module: str, args: list[str], *, cwd: str, env: dict[str, str], log: str,
          root: str) -> Forked | subprocess.Popen[bytes]:
    """Start ``python -m module *args`` (from the fork server when ``forked()``, else as
    ``subprocess.Popen``); returns its handle."""
    if forked():
        return Forked(module, args, cwd=cwd, env=env, log=log, root=root)
    with open(log, "wb") as out:
        return subprocess.Popen([sys.executable, "-m", module, *args], cwd=cwd, env=env,
                                stdin=subprocess.DEVNULL, stdout=out,
                                stderr=subprocess.STDOUT)
