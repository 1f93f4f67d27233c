"""``flusher="process"``: the saver's flusher as one child process it supervises.

The child is the standalone worker (``python -m langgraph_durable.outbox.worker
--supervised``) run with the saver's own settings: the server URLs and the
``DurableConfig`` go as one JSON line on its stdin (never in its argv, which ``ps``
shows). It answers one JSON line on its stdout, ``{"ready": consumer}`` once it joined
the consumer group (its key prefix's binding checked first, ``plans/binding.py``), or
``{"error": text, "code": 2|1}`` before it exits; then, once a second, its counters.

The child keeps reading its stdin: end of file means the parent is gone (even a parent
SIGKILLed, whose end of the pipe the kernel closes), and the child stops after its round;
``wake`` on a line of its own ends a pause after failures (``Flusher.wake``). A child that
dies is started again after a backoff (0.5 s doubling to ``MAX_BACKOFF_S``, logged);
``stop`` sends SIGTERM (the worker finishes its round, leaves the group and exits 0),
then SIGKILL after ``timeout_s``.

Supervision is one daemon thread of the parent blocked on the child's stdout: it holds
the GIL only to parse a line a second, whatever the application does (sync or asyncio).
"""

from __future__ import annotations

import json
import logging
import os
import signal
import subprocess
import sys
import threading
import time
from typing import IO, Any

from ..config import DurableConfig
from ..errors import ConfigurationError, TierUnavailableError
from ..settings import hide_password

log = logging.getLogger("langgraph_durable.flusher")

MAX_BACKOFF_S = 30.0
"""Longest pause, in seconds, before a dead flusher process is started again."""

START_TIMEOUT_S = 60.0
"""Seconds ``start`` waits for the child's first answer (its imports and the binding
check) before it gives up with ``TierUnavailableError``."""

_PACKAGE_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def child_settings(redis_url: str, mongo_url: str, config: DurableConfig) -> dict[str, Any]:
    """What the child is told on its stdin: the URLs, the configuration (without
    ``item_digest_key``: the worker copies bytes and needs no secret), the parent's pid
    and the level of the ``langgraph_durable`` logger."""
    return {"redis_url": redis_url, "mongo_url": mongo_url,
            "config": config.model_dump(mode="json", exclude={"item_digest_key"}),
            "parent_pid": os.getpid(),
            "log_level": logging.getLogger("langgraph_durable").getEffectiveLevel()}


class FlusherProcess:
    """A supervised flusher child process: the parent-side handle a saver holds with
    ``flusher="process"``. It has the attributes ``stats()`` reports of an in-process
    ``Flusher`` (``consumer``, ``rounds``, ``entries``, ``reaped``, ``errors``,
    ``last_error``, ``lags_s``: the child's, as it last reported them, at most a second
    old; the counters add up the children before it) and ``pid`` (the running child's,
    None between a death and its restart), ``restarts`` (children started again after
    one died)."""

    def __init__(self, redis_url: str, mongo_url: str, config: DurableConfig) -> None:
        self._settings = json.dumps(child_settings(redis_url, mongo_url, config)) + "\n"
        self._where = f"key prefix {config.key_prefix!r}, Redis {hide_password(redis_url)}"
        self.config = config
        self.consumer = ""
        self.rounds = self.entries = self.reaped = self.errors = 0
        self.last_error: str | None = None
        self.lags_s: list[float] = []
        self.restarts = 0
        self.left_group = False
        self._proc: subprocess.Popen[bytes] | None = None
        self._stopping = threading.Event()
        self._lock = threading.Lock()  # the stdin pipe: wake() and stop() from any thread
        self._thread: threading.Thread | None = None
        self._base = (0, 0, 0, 0)  # rounds, entries, reaped, errors of children before
        self._owner = os.getpid()  # a process forked from the saver's does not own the child

    def _mine(self) -> bool:
        return os.getpid() == self._owner

    @property
    def pid(self) -> int | None:
        """The running child's pid (None before ``start``, between a death and its
        restart, and after ``stop``)."""
        proc = self._proc
        return proc.pid if proc is not None and proc.poll() is None else None

    # ----------------------------------------------------------------- the child

    def _spawn(self) -> tuple[subprocess.Popen[bytes], dict[str, Any]]:
        """Start a child and wait for its first line: ``(process, answer)``; the answer
        is ``{"ready": consumer}``, or ``{"error": text, "code": n}`` of a child that
        exits (also made up here for one that died without a word)."""
        env = dict(os.environ)
        path = env.get("PYTHONPATH")
        env["PYTHONPATH"] = _PACKAGE_ROOT + (os.pathsep + path if path else "")
        proc = subprocess.Popen(
            [sys.executable, "-m", "langgraph_durable.outbox.worker", "--supervised"],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env, close_fds=True,
            start_new_session=True)  # a Ctrl-C at the terminal reaches the parent only
        with self._lock:
            self._proc = proc  # stop() reaches a child still starting, too
        assert proc.stdin is not None and proc.stdout is not None
        try:
            proc.stdin.write(self._settings.encode())
            proc.stdin.flush()
        except OSError:
            pass  # it died already: its exit is read below
        answer = _first_answer(proc, proc.stdout)
        return proc, answer

    def start(self) -> None:
        """Start the child and its supervisor thread; returns once the child joined the
        consumer group. Raises ``ConfigurationError`` with the child's message when it
        refuses its settings (e.g. the key prefix is bound to another database or
        collection_prefix), ``TierUnavailableError`` when it cannot reach Redis or gives
        no answer within ``START_TIMEOUT_S`` (then it is killed)."""
        proc, answer = self._spawn()
        if "ready" not in answer:
            _reap(proc, 5.0)
            text = f"the flusher process of the saver ({self._where}) did not start: " \
                f"{answer.get('error')}"
            if answer.get("code") == 2:
                raise ConfigurationError(text)
            raise TierUnavailableError(text)
        self._took(proc, answer)
        self._thread = threading.Thread(target=self._supervise, daemon=True,
                                        name=f"langgraph-durable-flusher-process-{proc.pid}")
        self._thread.start()

    def _took(self, proc: subprocess.Popen[bytes], answer: dict[str, Any]) -> None:
        self.consumer = str(answer["ready"])
        log.info("flusher process %d (consumer %s) started for %s", proc.pid, self.consumer,
                 self._where)

    def _supervise(self) -> None:
        """Read the running child's reports until it exits; start another after a backoff
        unless stopping."""
        backoff = 0.5
        while True:
            proc = self._proc
            assert proc is not None and proc.stdout is not None
            started = time.monotonic()
            self._read_reports(proc.stdout)
            code = proc.wait()
            self._close_pipes(proc)
            # a new child counts from 0: what this one did stays counted
            self._base = (self.rounds, self.entries, self.reaped, self.errors)
            if self._stopping.is_set():
                return
            if time.monotonic() - started > 60.0:
                backoff = 0.5  # it ran a good while: this death is a new one
            log.warning("flusher process %d of %s exited with code %s; starting another in "
                        "%.1f s (its pending entries are claimed once its heartbeat lapsed)",
                        proc.pid, self._where, code, backoff)
            while not self._stopping.wait(backoff):
                new, answer = self._spawn()
                if self._stopping.is_set():
                    _reap(new, self.config.close_drain_timeout_s)
                    return
                if "ready" in answer:
                    self.restarts += 1
                    self._took(new, answer)
                    break
                _reap(new, 5.0)
                backoff = min(backoff * 2, MAX_BACKOFF_S)
                log.error("flusher process of %s could not start: %s; trying again in "
                          "%.1f s", self._where, answer.get("error"), backoff)
            else:
                return
            backoff = min(backoff * 2, MAX_BACKOFF_S)

    def _read_reports(self, out: IO[bytes]) -> None:
        for line in out:
            try:
                report = json.loads(line)
            except ValueError:
                continue
            if isinstance(report, dict) and "rounds" in report:
                rounds, entries, reaped, errors = self._base
                self.rounds = rounds + int(report["rounds"])
                self.entries = entries + int(report["entries"])
                self.reaped = reaped + int(report["reaped"])
                self.errors = errors + int(report["errors"])
                self.last_error = report.get("last_error")
                self.lags_s = [float(x) for x in report.get("lags_s", [])]
                self.left_group = bool(report.get("left_group", False))

    # ----------------------------------------------------------------- control

    @property
    def running(self) -> bool:
        """True from ``start`` until ``stop``/``request_stop`` (also while a dead child
        waits for its restart: its outbox entries are still being taken care of)."""
        return self._thread is not None and self._thread.is_alive() \
            and not self._stopping.is_set()

    def wake(self) -> None:
        """Tell the child to end its wait now: a pause after failures, or the wait between
        rounds (``flush()`` and ``request_stop()`` call it)."""
        if not self._mine():
            return
        with self._lock:
            proc = self._proc
            if proc is None or proc.stdin is None or proc.poll() is not None:
                return
            try:
                proc.stdin.write(b"wake\n")
                proc.stdin.flush()
            except (OSError, ValueError):
                pass  # it just died: the supervisor starts another

    def request_stop(self) -> None:
        """SIGTERM to the child and no restart; returns at once. Nothing in a process
        forked from the saver's (the child is the original process's)."""
        if not self._mine():
            return
        self._stopping.set()
        proc = self._proc
        if proc is not None and proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            # and end the child's wait between rounds (up to flush_interval_s with
            # several outbox streams) through its stdin too, as its signal pipe does
            self.wake()

    def stop(self, timeout_s: float | None = None) -> None:
        """Stop the child: SIGTERM (it finishes its round and leaves the consumer group),
        then SIGKILL when it has not exited after ``timeout_s`` seconds (default
        ``close_drain_timeout_s``); waits for it and the supervisor thread."""
        if not self._mine():
            return
        wait_s = self.config.close_drain_timeout_s if timeout_s is None else timeout_s
        self.request_stop()
        proc = self._proc
        if proc is not None:
            _reap(proc, wait_s)
        if self._thread is not None:
            self._thread.join(5.0)
        if proc is not None:
            self._close_pipes(proc)

    def _close_pipes(self, proc: subprocess.Popen[bytes]) -> None:
        with self._lock:
            for pipe in (proc.stdin, proc.stdout):
                if pipe is not None:
                    try:
                        pipe.close()
                    except OSError:
                        pass

    async def astop(self, timeout_s: float | None = None) -> None:
        """Async ``stop`` (in a worker thread)."""
        import asyncio

        await asyncio.to_thread(self.stop, timeout_s)


def _first_answer(proc: subprocess.Popen[bytes], out: IO[bytes]) -> dict[str, Any]:
    """The child's first JSON line, or an error made up for a child that exited (or did
    not answer within ``START_TIMEOUT_S``) without one."""
    box: list[bytes] = []
    reader = threading.Thread(target=lambda: box.append(out.readline()), daemon=True)
    reader.start()
    reader.join(START_TIMEOUT_S)
    line = box[0] if box else b""
    try:
        answer = json.loads(line) if line else None
    except ValueError:
        answer = None
    if isinstance(answer, dict) and ("ready" in answer or "error" in answer):
        return answer
    if reader.is_alive():
        proc.kill()
        return {"error": f"no answer within {START_TIMEOUT_S:.0f} s", "code": 1}
    code = proc.wait()
    return {"error": f"it exited with code {code} before it was ready (its stderr is "
            "this process's)", "code": 1}


def _reap(proc: subprocess.Popen[bytes], timeout_s: float) -> None:
    """Wait up to ``timeout_s`` seconds for ``proc`` to exit, then SIGKILL it and wait."""
    try:
        proc.wait(timeout_s)
    except subprocess.TimeoutExpired:
        log.warning("flusher process %d did not exit within %.1f s of SIGTERM: killed",
                    proc.pid, timeout_s)
        proc.kill()
        proc.wait()
