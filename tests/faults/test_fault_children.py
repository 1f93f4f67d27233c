"""The fault children's start (``faults/forkserver.py``): a child forked from the
pre-imported server behaves as ``python -m MODULE ARGS`` would."""

from __future__ import annotations

import signal
import subprocess
import textwrap
from pathlib import Path

import pytest

from faults import forkserver
from langgraph_durable.testing import wait_for

PROBE = textwrap.dedent('''
    import atexit, os, sys, threading, time
    print("argv", sys.argv[1:], "cwd", os.path.basename(os.getcwd()), "x", os.environ.get("X"),
          "main", __name__, flush=True)
    atexit.register(lambda: print("atexit", flush=True))
    def late():
        time.sleep(0.2)
        print("thread", flush=True)
    threading.Thread(target=late).start()
    if sys.argv[1] == "wait":
        print("waiting", flush=True)
        threading.Event().wait()
    sys.exit(3)
''')


def _start(tmp_path: Path, arg: str) -> tuple[forkserver.Forked, Path]:
    (tmp_path / "probe_mod.py").write_text(PROBE)
    (tmp_path / "cwd").mkdir(exist_ok=True)
    log = tmp_path / f"{arg}.log"
    child = forkserver.Forked("probe_mod", [arg], cwd=str(tmp_path / "cwd"), env={"X": "1"},
                              log=str(log), root=str(tmp_path))
    return child, log


def test_a_forked_child_runs_its_module_as_main_and_exits_as_python_would(
        tmp_path: Path) -> None:
    child, log = _start(tmp_path, "exit")
    assert child.wait(30) == 3
    assert child.returncode == child.poll() == 3
    assert log.read_text().splitlines() == [
        "argv ['exit'] cwd cwd x 1 main __main__", "thread", "atexit"]


@pytest.mark.parametrize(("sig", "code"), [(signal.SIGTERM, -15), (signal.SIGKILL, -9)])
def test_a_forked_child_dies_of_a_signal_as_a_process_of_its_own(
        tmp_path: Path, sig: int, code: int) -> None:
    child, log = _start(tmp_path, "wait")
    with pytest.raises(subprocess.TimeoutExpired):
        child.wait(0.01)
    # the child opens its log: none before it started (a busy machine: seen in CI)
    wait_for(lambda: log.exists() and "waiting" in log.read_text(), 30, "the child's start")
    assert child.poll() is None
    child.send_signal(sig)
    assert child.wait(30) == code
    child.send_signal(sig)  # after its end: nothing, as Popen.send_signal
    assert "atexit" not in log.read_text()
