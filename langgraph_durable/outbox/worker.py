"""Standalone flusher worker: ``python -m langgraph_durable.outbox.worker``.

Joins the outbox consumer group and drains it to MongoDB until SIGTERM/SIGINT; run as
many as you like beside the application processes (give those ``flusher="off"`` if the
workers should do all the flushing). It starts only if its key prefix is bound to its
database and collection_prefix (or not bound yet: then it binds it,
``plans/binding.py``); otherwise it exits 2 naming both, having flushed nothing.
On SIGTERM it finishes its round, then exits 0.
``--supervised`` is the mode of a saver's ``flusher="process"`` (``outbox/process.py``):
settings on stdin as JSON, answers on stdout, stopping when the saver's process is gone.
Its pending entries when killed are claimed by another flusher once its heartbeat lapsed
(``heartbeat_ttl_s``; ``outbox/heartbeat.py``).
The worker copies bytes; it needs no serializer or encryption key.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import signal
import sys
import threading
from collections.abc import Callable
from typing import Any

import redis
from pydantic import ValidationError

from ..config import ConfigOption, DurableConfig, config_options
from ..errors import ConfigurationError, TierUnavailableError
from ..io.clients import database_of, is_cluster, make_clients, mongo_from_url, redis_from_url
from ..io.drivers import run_sync
from ..io.mongo_calls import BSON_DOCS
from ..plans import binding
from ..plans.context import NO_SERIALIZER, Context, partitions_for
from ..settings import (
    check_mongo_url,
    database_of_url,
    resolve_config,
    server_settings,
    with_database,
)
from .flusher import Flusher

log = logging.getLogger("langgraph_durable.worker")


def build_parser() -> argparse.ArgumentParser:
    """Command-line options; what is not given comes from the environment (``REDIS_URL``,
    ``MONGODB_URL``, ``LGD_<FIELD>``: ``langgraph_durable.settings``)."""
    p = argparse.ArgumentParser(prog="python -m langgraph_durable.outbox.worker",
                                description=__doc__.split("\n\n")[0])
    p.add_argument("--redis-url", default=None, help="Redis URL (env REDIS_URL)")
    p.add_argument("--mongo-url", default=None,
                   help="MongoDB URL (env MONGODB_URL); its database is used unless "
                   "--database is given")
    p.add_argument("--supervised", action="store_true", help=argparse.SUPPRESS)
    for opt in config_options(skip=frozenset({"flusher"})):  # a worker is a flusher
        p.add_argument(opt.flag, type=_converter(opt), default=None, help=opt.help,
                       metavar=opt.name.upper())
    return p


def _converter(opt: ConfigOption) -> Callable[[str], Any]:
    """``opt.parse`` with its ``ValueError`` as argparse's one-line usage error."""
    def convert(text: str) -> Any:
        try:
            return opt.parse(text)
        except ValueError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None
    return convert


def run(argv: list[str] | None = None) -> int:
    """Run the worker until SIGTERM/SIGINT; returns the exit code: 0 after a signal, 2 for
    a bad option or URL and for a key prefix bound to another database or
    collection_prefix (``plans/binding.py``: nothing flushed), 1 when Redis fails."""
    args = build_parser().parse_args(argv)
    if args.supervised:
        return _run_supervised()
    env = server_settings()
    args.redis_url = args.redis_url or env.redis_url
    args.mongo_url = args.mongo_url or env.mongodb_url
    if not args.redis_url or not args.mongo_url:
        print("error: --redis-url and --mongo-url (or REDIS_URL, MONGODB_URL) are required",
              file=sys.stderr)
        return 2
    options: dict[str, Any] = {
        k: v for k, v in vars(args).items() if k in DurableConfig.model_fields and v is not None
    }
    try:
        config = with_database(resolve_config(None, options),
                               database_of_url(check_mongo_url(args.mongo_url)), "MongoDB URL")
    except ConfigurationError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except ValidationError as exc:
        for e in exc.errors():
            name = str(e["loc"][0]).replace("_", "-") if e["loc"] else "?"
            print(f"error: invalid option --{name}: {e['msg']}", file=sys.stderr)
        return 2
    return _serve(args.redis_url, args.mongo_url, config, None)


def _fail(report: _Reports | None, text: str, code: int) -> int:
    """Print ``error: text`` to stderr (and tell a supervising saver); returns ``code``."""
    print(f"error: {text}", file=sys.stderr)
    if report is not None:
        report.send({"error": text, "code": code})
    return code


def _serve(redis_url: str, mongo_url: str, config: DurableConfig,
           report: _Reports | None) -> int:
    """Check the binding, then flush until stopped (the exit codes of ``run``);
    ``report``: the supervising saver's channel (``--supervised``), else None."""
    try:
        r = redis_from_url(redis_url, config, asyncio=False)
    except ConfigurationError as exc:
        return _fail(report, str(exc), 2)
    try:
        ctx = Context(config, serde=NO_SERIALIZER, queryable=True, cluster=is_cluster(r),
                      partitions=partitions_for(config, is_cluster(r)), docs=BSON_DOCS)
    except ConfigurationError as exc:
        return _fail(report, str(exc), 2)
    m = mongo_from_url(mongo_url, config, asyncio=False)
    clients = make_clients(r, database_of(m, config))
    what = "flusher process" if report is not None else "flusher worker"
    try:  # before anything is flushed: this prefix's threads belong to one database
        run_sync(binding.bind_plan(ctx, f"this {what}", binding.describe_process(what)),
                 clients)
    except (ConfigurationError, TierUnavailableError) as exc:
        r.close()
        m.close()
        return _fail(report, str(exc), 2 if isinstance(exc, ConfigurationError) else 1)
    flusher = Flusher(ctx)
    _stop_on_signals(flusher)
    log.info("flusher worker %s draining %s", flusher.consumer, ctx.outbox)
    if report is not None:
        report.start(flusher)
    try:
        flusher.run(clients)
    except redis.exceptions.RedisError as exc:
        return _fail(report, str(exc), 1)
    finally:
        if report is not None:
            report.counters(flusher)
        r.close()
        m.close()
    if report is None:  # a supervised worker's stdout is the saver's pipe (gone, maybe)
        print(f"flusher {flusher.consumer}: {flusher.entries} entries in {flusher.rounds} "
              f"rounds, {flusher.errors} errors")
    return 0


STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)


def _stop_on_signals(flusher: Flusher) -> None:
    """SIGTERM and SIGINT stop ``flusher`` after its round, ending any wait at once (an
    idle wait with several outbox streams, a backoff, one stream's blocking read).

    A Python signal handler runs in the main thread, the flusher's, between two of its
    bytecodes: it could not wake the flusher's wait (that takes the lock the interrupted
    code may hold). So the handlers do nothing; the interpreter also writes each signal's
    number to a pipe (``signal.set_wakeup_fd``), and a thread that reads it asks the
    flusher to stop, wakes it and ends its blocking read of one stream (``Flusher.
    interrupt``). Call from the main thread."""
    read_fd, write_fd = os.pipe()
    os.set_blocking(write_fd, False)
    signal.set_wakeup_fd(write_fd, warn_on_full_buffer=False)
    for signum in STOP_SIGNALS:
        signal.signal(signum, lambda _signum, _frame: None)

    def watch() -> None:
        while data := os.read(read_fd, 64):
            got = [n for n in data if n in STOP_SIGNALS]
            if got:
                log.info("signal %s: stopping after this round", got[0])
                flusher.request_stop()
                flusher.wake()
                flusher.interrupt()

    threading.Thread(target=watch, name="lgd-worker-signals", daemon=True).start()


def _run_supervised() -> int:
    """``--supervised``: the settings come as one JSON line on stdin from the saver that
    started this process (``outbox/process.py``); answers and counters go to stdout."""
    report = _Reports(sys.stdout)
    try:
        got = json.loads(sys.stdin.readline())
        config = DurableConfig.model_validate(got["config"])
        redis_url, mongo_url = str(got["redis_url"]), str(got["mongo_url"])
        parent = int(got["parent_pid"])
    except (ValueError, KeyError, TypeError) as exc:  # pydantic's ValidationError included
        return _fail(report, f"bad settings from the saver on stdin: {exc}", 2)
    logging.getLogger().setLevel(int(got.get("log_level", logging.WARNING)))
    report.parent = parent
    return _serve(redis_url, mongo_url, config, report)


class _Reports:
    """The supervised worker's side of the pipes: JSON lines to the saver on stdout
    (the first ``{"ready": consumer}`` or ``{"error": ...}``, then the counters once a
    second), and, on stdin, ``wake`` lines and the end of file that means the saver's
    process is gone (then the flusher stops after its round; also when this process's
    parent pid is no longer the saver's)."""

    INTERVAL_S = 1.0

    def __init__(self, out: Any) -> None:
        self.out = out
        self.parent = 0
        self._lock = threading.Lock()

    def send(self, message: dict[str, Any]) -> None:
        with self._lock:
            try:
                self.out.write(json.dumps(message) + "\n")
                self.out.flush()
            except (OSError, ValueError):
                pass  # the saver is gone: the stdin watcher stops the flusher

    def counters(self, f: Flusher) -> None:
        self.send({"rounds": f.rounds, "entries": f.entries, "reaped": f.reaped,
                   "errors": f.errors, "last_error": f.last_error,
                   "lags_s": [round(x, 4) for x in f.lags_s[-1000:]],
                   "left_group": f.left_group})

    def start(self, f: Flusher) -> None:
        self.send({"ready": f.consumer, "pid": os.getpid()})
        threading.Thread(target=self._watch_stdin, args=(f,), daemon=True).start()
        threading.Thread(target=self._tick, args=(f,), daemon=True).start()

    def _watch_stdin(self, f: Flusher) -> None:
        for line in sys.stdin:
            if line.strip() == "wake":
                f.wake()
        log.warning("the saver that started this flusher process is gone: stopping")
        f.request_stop()

    def _tick(self, f: Flusher) -> None:
        while not f.wait_stop(self.INTERVAL_S):
            self.counters(f)
            if self.parent and os.getppid() != self.parent:
                log.warning("the saver process %d that started this flusher process is "
                            "gone: stopping", self.parent)
                f.request_stop()


if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    sys.exit(run())
