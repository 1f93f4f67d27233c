"""CPU placement of a benchmark run (issue 35): ``shared`` (the default: the benchmark
process and the servers it starts share every core, as before) or ``pinned`` (the
benchmark process on one CPU, every server it started on another, as if the servers ran
on other machines, as in production).

Pinned mode uses ``os.sched_setaffinity`` for this process (every thread it has when
called; threads and processes started later inherit it) and ``taskset -a -p -c`` for each
server process and its children (``-a``: every thread). PostgreSQL forks a backend per
connection from its postmaster, so backends opened later inherit the postmaster's CPU;
:func:`pin_servers` is called again before each workload to catch any process that did
not. The report shows the affinities as read back from ``/proc/<pid>/task/*/status``
(``Cpus_allowed_list``), not as intended.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from typing import Any

MODES = ("shared", "pinned")
APP_CPU = 0
"""The CPU the benchmark process runs on in pinned mode."""
SERVER_CPU = 1
"""The CPU every server process (and the profiler) runs on in pinned mode."""
PINNED = False
"""True once ``pin_self`` ran (pinned mode): a flusher worker process the benchmark starts
goes on ``SERVER_CPU`` with the servers (``savers.DurableWorkerSpec``), as a worker on
another machine would, so that saver measures the application's cost alone."""


class PinningUnavailable(RuntimeError):
    """Pinned mode cannot run here (fewer than 2 CPUs allowed, no ``taskset``); the message
    says which."""


def check() -> None:
    """Raise :class:`PinningUnavailable` unless CPUs ``APP_CPU`` and ``SERVER_CPU`` are both
    in this process' affinity and ``taskset`` (util-linux) is on ``PATH``."""
    allowed = os.sched_getaffinity(0)
    if not {APP_CPU, SERVER_CPU} <= allowed:
        raise PinningUnavailable(
            f"--cpu-mode pinned needs CPUs {APP_CPU} and {SERVER_CPU}; this process may run on "
            f"{sorted(allowed)} only (nproc {len(allowed)})")
    if shutil.which("taskset") is None:
        raise PinningUnavailable("--cpu-mode pinned needs `taskset` (Debian: apt-get install "
                                 "-y util-linux)")


def _tasks(pid: int) -> list[int]:
    try:
        return [int(t) for t in os.listdir(f"/proc/{pid}/task")]
    except OSError:
        return []


def pin_self(cpu: int = APP_CPU) -> None:
    """Put every thread of this process on ``cpu`` (new threads and children inherit it)."""
    global PINNED
    PINNED = True
    for tid in _tasks(os.getpid()) or [0]:
        try:
            os.sched_setaffinity(tid, {cpu})
        except OSError:  # a thread that ended meanwhile
            continue


def tree(roots: list[int]) -> list[int]:
    """``roots`` and every descendant process (from ``/proc/*/stat``), roots first."""
    kids: dict[int, list[int]] = {}
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open(f"/proc/{d}/stat") as fh:
                ppid = int(fh.read().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        kids.setdefault(ppid, []).append(int(d))
    out: list[int] = []
    todo = list(roots)
    while todo:
        pid = todo.pop(0)
        if pid not in out:
            out.append(pid)
            todo += sorted(kids.get(pid, []))
    return out


def pin_servers(servers: dict[str, list[int]], cpu: int = SERVER_CPU) -> None:
    """``taskset -a -p -c cpu`` on every process of every server tree (``cpu.SERVERS``).

    Raises ``RuntimeError`` naming the process when ``taskset`` refuses one that still
    exists."""
    for name, roots in servers.items():
        for pid in tree(roots):
            res = subprocess.run(["taskset", "-a", "-p", "-c", str(cpu), str(pid)],
                                 capture_output=True, text=True)
            if res.returncode != 0 and os.path.exists(f"/proc/{pid}"):
                raise RuntimeError(f"taskset could not pin {name} pid {pid} to CPU {cpu}: "
                                   f"{res.stderr.strip()}")


def allowed_lists(pid: int) -> list[str]:
    """The distinct ``Cpus_allowed_list`` of every thread of ``pid`` (read back)."""
    got: list[str] = []
    for tid in _tasks(pid):
        try:
            with open(f"/proc/{pid}/task/{tid}/status") as fh:
                for line in fh:
                    if line.startswith("Cpus_allowed_list:"):
                        v = line.split(":", 1)[1].strip()
                        if v not in got:
                            got.append(v)
        except OSError:
            continue
    return got


def read_back(servers: dict[str, list[int]]) -> dict[str, str]:
    """Affinities as the kernel reports them now: this process (all its threads) and each
    server tree (every process, every thread), as ``{"what": "CPUs (detail)"}``."""
    me = os.getpid()
    out = {f"benchmark process (pid {me}, {len(_tasks(me))} threads)":
           "CPUs " + " / ".join(allowed_lists(me))}
    for name, roots in servers.items():
        pids = tree(roots)
        lists: list[str] = []
        threads = 0
        for pid in pids:
            threads += len(_tasks(pid))
            for v in allowed_lists(pid):
                if v not in lists:
                    lists.append(v)
        out[f"{name} ({len(pids)} processes, {threads} threads)"] = (
            "CPUs " + " / ".join(lists) if lists else "not readable")
    return out


def describe(mode: str, servers: dict[str, list[int]]) -> dict[str, Any]:
    """The machine-section rows of a run in ``mode``: the mode in words and the
    affinities read back."""
    if mode == "pinned":
        what = (f"pinned: benchmark process on CPU {APP_CPU}, servers on CPU {SERVER_CPU} "
                f"(`os.sched_setaffinity`, `taskset -a -p -c {SERVER_CPU}`)")
    else:
        what = "shared: benchmark process and servers on every core (no pinning)"
    rows: dict[str, Any] = {"CPU mode": what}
    for k, v in read_back(servers).items():
        rows[f"affinity read back: {k}"] = v
    return rows
