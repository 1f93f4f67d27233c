"""What every CLI command shares: the saver built from the global options, consoles,
one-line errors, confirmation and progress bars."""

from __future__ import annotations

import contextlib
import functools
import importlib
import json
import logging
import os
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from ..config import DurableConfig
from ..errors import ConfigurationError, TierUnavailableError
from ..inspection.strict import NotDecoded, parse_type, strict_serde  # noqa: F401 - re-exported
from ..inspection.tolerant import TolerantSerde, Undecodable  # noqa: F401 - re-exported
from ..io.drivers import Clients
from ..saver import DurableSaver
from ..settings import (
    check_mongo_url,
    database_of_url,
    hide_password,
    resolve_config,
    server_settings,
    with_database,
)

F = TypeVar("F", bound=Callable[..., Any])


class CliError(Exception):
    """An error the CLI reports as one line (``error: ...``) with exit code 1."""


def console(*, stderr: bool = False) -> Console:
    """A rich console on stdout (or stderr); width from ``COLUMNS``, else the terminal,
    else 160 columns when not a terminal (so captured tables are not squeezed)."""
    cols = os.environ.get("COLUMNS")
    stream = sys.stderr if stderr else sys.stdout
    tty = stream.isatty()
    width = int(cols) if cols and cols.isdigit() else (None if tty else 160)
    return Console(stderr=stderr, width=width, highlight=False, soft_wrap=False,
                   force_terminal=tty, color_system="auto" if tty else None)


def echo_json(data: Any) -> None:
    """Print ``data`` as indented JSON on stdout."""
    typer.echo(json.dumps(data, indent=2, default=str, ensure_ascii=False))


def open_blob_store(spec: str) -> Any:
    """A blob store from ``--blob-store``: ``s3://bucket/prefix`` (boto3; endpoint as for
    every ``S3BlobStore``: ``S3_ENDPOINT_URL``, else boto3's configuration) or a folder
    (``file:///path`` or a plain path)."""
    from urllib.parse import unquote, urlparse

    from ..serde import LocalBlobStore

    url = urlparse(spec)
    if url.scheme == "s3":
        from ..serde import S3BlobStore

        # the endpoint follows S3BlobStore's rule (S3_ENDPOINT_URL, then boto3's own)
        return S3BlobStore(url.netloc, prefix=url.path.lstrip("/"))
    if url.scheme in ("", "file"):
        return LocalBlobStore(unquote(url.path) if url.scheme else spec)
    raise CliError(f"--blob-store must be s3://bucket/prefix or a folder, got {spec!r}")


class Session:
    """The servers and options of one CLI invocation; the saver is built on first use.

    Args:
        redis_url, mongo_url: server URLs (``--redis-url``, ``--mongo-url``); None takes
            ``REDIS_URL`` / ``MONGODB_URL`` (``langgraph_durable.settings``).
        options: ``DurableConfig`` fields given on the command line (``LGD_*`` variables
            are read by ``langgraph_durable.settings``, as for the library).
        serde: ``module:attribute`` of a serializer, or of a factory returning one.
        blob_store: where ``ExternalRefSerializer`` blobs live (``--blob-store``); without
            ``serde`` it makes the serializer an ``ExternalRefSerializer`` on it.
        allow_types: ``module.Class`` names (``--allow-type``) decoded besides the
            built-in allowlist (``inspection.strict.TOOL_TYPES``).

    Every command decodes with ``strict_serde`` of that serializer: its cipher and blob
    store kept, a stored msgpack entry naming a type outside the allowlist shown as
    ``<not decoded: module.Name (not in the allowlist)>``, never imported nor run.
    Raises ``CliError`` for an ``allow_types`` name not of the form ``module.Class``.
    """

    def __init__(self, redis_url: str | None, mongo_url: str | None,
                 options: dict[str, Any], serde: str | None,
                 blob_store: str | None = None, allow_types: list[str] | None = None) -> None:
        env = server_settings()
        self.redis_url = redis_url or env.redis_url
        self.mongo_url = mongo_url or env.mongodb_url
        self.options = options
        self.serde_path = serde
        self.blob_store_spec = blob_store
        try:
            self.allow_types = [parse_type(t) for t in allow_types or []]
        except ValueError as exc:
            raise CliError(f"--allow-type: {exc}") from None
        self._saver: DurableSaver | None = None

    @property
    def config(self) -> DurableConfig:
        """The validated configuration: the options over ``LGD_*`` over the defaults, the
        database of the MongoDB URL when none is given (``langgraph_durable.settings``;
        ``flusher`` is chosen per command)."""
        config = resolve_config(None, self.options)
        if self.mongo_url:
            config = with_database(config, database_of_url(check_mongo_url(self.mongo_url)),
                                   f"MongoDB URL {hide_password(self.mongo_url)!r}")
        return config

    def saver(self, *, flusher: bool = False, tolerant: bool = False,
              setup: bool = True, extra: dict[str, Any] | None = None) -> DurableSaver:
        """The saver; with ``flusher`` an in-process flusher runs (from the first call) and
        ``setup()`` is done unless ``setup=False`` (writing commands); without it nothing
        is written by opening it. Its serializer is strict (``strict_serde``: stored data
        never runs code). ``tolerant`` (read-only commands) shows undecodable values as
        ``Undecodable`` and checks, writing nothing, that the key prefix and the database
        belong together (``check_deployment``: ``ConfigurationError`` as ``setup()``
        raises it for writing commands) and shows checkpoints as stored: a
        ``state_version`` option (``LGD_STATE_VERSION``) is not applied (no migration
        on read, no refusal of newer threads). ``extra``: more ``from_urls`` options of
        this command (``state_version``, ``state_migrations``), used when the saver is
        built (the first call)."""
        if self._saver is None:
            if not self.redis_url or not self.mongo_url:
                raise CliError("--redis-url and --mongo-url (or REDIS_URL and MONGODB_URL) "
                               "are required")
            self.config  # noqa: B018 - validate the options before connecting
            serde = strict_serde(self.serde(), self.allow_types)
            if tolerant:
                serde = TolerantSerde(serde)
            self._saver = DurableSaver.from_urls(
                self.redis_url, self.mongo_url, serde=serde,
                **{**self.options, **({"state_version": None} if tolerant else {}),
                   **(extra or {}), "flusher": "auto" if flusher else "off"})
            if flusher and setup:
                self._saver.setup()
            elif tolerant:
                try:
                    self._saver.check_deployment()
                except BaseException:
                    saver, self._saver = self._saver, None
                    saver.close(drain_timeout_s=0)
                    raise
        return self._saver

    @property
    def clients(self) -> Clients:
        """The saver's sync clients (``.redis``, ``.db``)."""
        return self.saver().sync_clients

    def blob_store(self) -> Any:
        """The ``--blob-store`` store, or None."""
        return open_blob_store(self.blob_store_spec) if self.blob_store_spec else None

    def serde(self) -> Any:
        """The serializer from ``--serde`` / ``--blob-store`` as configured (None = the
        saver's default); ``saver()`` decodes with its strict version."""
        if not self.serde_path:
            store = self.blob_store()
            if store is None:
                return None
            from ..serde import ExternalRefSerializer

            return ExternalRefSerializer(store=store)
        module, _, attr = self.serde_path.partition(":")
        try:
            obj: Any = importlib.import_module(module)
            for part in attr.split(".") if attr else []:
                obj = getattr(obj, part)
        except (ImportError, AttributeError) as exc:
            raise CliError(f"--serde {self.serde_path!r} cannot be imported: {exc}") from exc
        return obj if hasattr(obj, "dumps_typed") else obj()

    def close(self, *, drain: bool = True) -> None:
        """Close the saver (draining the outbox if this command ran a flusher, unless not
        ``drain``: after a tier did not answer, waiting for it helps no one)."""
        saver, self._saver = self._saver, None
        if saver is not None:
            saver.close(drain_timeout_s=None if drain else 0)


def one_line(exc: BaseException) -> str:
    """An exception as one line of text (pydantic errors name the option)."""
    errors = getattr(exc, "errors", None)
    if type(exc).__name__ == "ValidationError" and callable(errors):
        parts = [f"--{'.'.join(str(x) for x in e['loc']).replace('_', '-')}: {e['msg']}"
                 for e in errors()]
        return "invalid option " + "; ".join(parts)
    from ..errors import DurableSaverError

    lines = str(exc).strip().splitlines()
    text = lines[0] if lines else ""
    if isinstance(exc, TierUnavailableError) and exc.tier is not None:
        text = tier_line(exc)
    elif not isinstance(exc, (DurableSaverError, CliError)):
        text = f"{type(exc).__name__}: {text}"
    if isinstance(exc, ConfigurationError):  # its end says what to do: never cut
        return text
    return text if len(text) <= 400 else text[:397] + "..."


def short_reason(reason: str) -> str:
    """A client's error without what only a debugger needs: its first line, up to
    PyMongo's timeouts and topology description (``(configured timeouts``, ``, Timeout:``,
    ``, Topology Description``)."""
    lines = reason.strip().splitlines()
    text = lines[0] if lines else ""
    for cut in (" (configured timeouts", ", Timeout:", ", Topology Description"):
        text = text.split(cut)[0]
    return text.strip()


def tier_line(err: TierUnavailableError) -> str:
    """A tier that did not answer, in one line naming it: ``hot tier (Redis) at
    127.0.0.1:6379 did not answer (scan): Error 111 connecting to 127.0.0.1:6379.
    Connection refused.`` (``durable tier (MongoDB) at host:port/database ...``)."""
    if err.tier is None:
        return str(err).strip().splitlines()[0] if str(err).strip() else "a tier did not answer"
    where = f" at {err.server}" if err.server else ""
    what = f" ({err.operation})" if err.operation else ""
    reason = short_reason(err.reason or "")
    return f"{err.tier_name}{where} did not answer{what}" + (f": {reason}" if reason else "")


def tier_error(exc: BaseException, session: Any = None) -> TierUnavailableError | None:
    """A connection failure a command met calling a client directly (not through a plan,
    whose driver already raises ``TierUnavailableError``), as the library's
    ``TierUnavailableError`` naming the tier and server; None for any other error."""
    import redis.exceptions
    from pymongo.errors import ConnectionFailure

    clients = None
    if isinstance(session, Session) and session._saver is not None:
        clients = session._saver.sync_clients
    if isinstance(exc, (redis.exceptions.ConnectionError, redis.exceptions.TimeoutError)):
        name = clients.redis_name if clients else "redis"
        return TierUnavailableError(f"Redis {name} (hot tier) did not answer: {exc}",
                                    tier="hot", server=name, reason=str(exc))
    if isinstance(exc, ConnectionFailure):
        name = clients.mongo_name if clients else "mongodb"
        first = str(exc).split(",")[0].split(";")[0]
        return TierUnavailableError(f"MongoDB {name} (durable tier) did not answer: {first}",
                                    tier="durable", server=name, reason=str(exc))
    return None


class _Held(logging.Handler):
    """Keeps the package's log records of one command (``command``)."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


@contextmanager
def held_logs() -> Iterator[_Held]:
    """While inside, the warnings the package logs (``langgraph_durable.*``: a flusher's
    retries, the saver's close) are kept, not printed; ``print_held`` shows them."""
    logger = logging.getLogger("langgraph_durable")
    held, propagate = _Held(), logger.propagate
    logger.addHandler(held)
    logger.propagate = False
    try:
        yield held
    finally:
        logger.removeHandler(held)
        logger.propagate = propagate


def print_held(held: _Held) -> None:
    """The kept warnings on stderr, one line each (``warning: ...``, its first line up to
    400 characters); a message logged again (the same format) is counted, not repeated."""
    counts: dict[Any, list[Any]] = {}
    for rec in held.records:
        key = (rec.name, rec.msg)
        if key in counts:
            counts[key][1] += 1
        else:
            counts[key] = [rec, 1]
    for rec, n in counts.values():
        lines = rec.getMessage().strip().splitlines()
        text = short_reason(lines[0]) if lines else ""
        text = text if len(text) <= 400 else text[:397] + "..."
        more = f" ({n - 1} more like it)" if n > 1 else ""
        typer.echo(f"warning: {text}{more}", err=True)


# how a command ends through typer, not by an error: Exit, Abort and click's ClickException
# of the click typer runs on (the click package for typer releases that depend on it, its
# own copy for those that vendor it, which need no click installed)
_ENDINGS: tuple[type[BaseException], ...] = (
    typer.Exit, typer.Abort,
    next(k for k in typer.BadParameter.__mro__ if k.__name__ == "ClickException"))


def _failed(exc: BaseException) -> bool:
    """Whether ``exc`` ends a command unsuccessfully (any error, or a non-zero exit)."""
    if isinstance(exc, typer.Exit):
        return bool(exc.exit_code)
    return True


def command(fn: F) -> F:
    """Wrap a command: errors become one line on stderr and exit code 1; the session is
    closed afterwards (a close that fails is reported the same way). What the package
    logs meanwhile is held (``held_logs``): after a command that failed (or exited
    non-zero) it is dropped, since the error line (or the command's report) says what
    went wrong, with a tier that did not answer named once; after one that succeeded each
    warning is printed once, one line. A tier that did not answer also ends the close's
    wait for the outbox (entries stay in Redis for the next flusher)."""
    return _wrap_command(fn, hold=True)


def live_command(fn: F) -> F:
    """``command`` for a long-running command whose log lines are printed as they come
    (``flusher``: the worker's own logging)."""
    return _wrap_command(fn, hold=False)


def _wrap_command(fn: F, *, hold: bool) -> F:
    @functools.wraps(fn)
    def run(*args: Any, **kwargs: Any) -> Any:
        ctx = kwargs.get("ctx")
        with contextlib.ExitStack() as stack:
            held = stack.enter_context(held_logs()) if hold else None
            failed = down = False
            try:
                try:
                    return fn(*args, **kwargs)
                except BaseException as exc:
                    failed = _failed(exc)
                    tier = tier_error(exc, ctx.obj if ctx is not None else None)
                    down = tier is not None or isinstance(exc, TierUnavailableError)
                    if tier is not None:  # named while the session's clients are known
                        raise tier from exc
                    raise
                finally:
                    if ctx is not None and isinstance(ctx.obj, Session):
                        ctx.obj.close(drain=not down)
            except _ENDINGS:
                raise
            except Exception as exc:
                typer.echo(f"error: {one_line(tier_error(exc) or exc)}", err=True)
                raise typer.Exit(1) from None
            finally:
                if held is not None and not failed:
                    stack.close()  # the package's loggers as they were, then the warnings
                    print_held(held)

    return run  # type: ignore[return-value]


def session_of(ctx: typer.Context) -> Session:
    """The ``Session`` the global callback stored in the typer context."""
    obj = ctx.obj
    if not isinstance(obj, Session):  # pragma: no cover - the callback always sets it
        raise CliError("no session")
    return obj


def confirm(question: str, yes: bool) -> None:
    """Ask ``question`` unless ``yes``; a "no" (or no terminal) aborts with exit code 1."""
    if not yes:
        typer.confirm(question, abort=True, err=True)


@contextmanager
def progress(description: str, total: int | None) -> Iterator[Callable[[int], None]]:
    """A progress bar on stderr; yields ``advance(n)``."""
    bar = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                   TimeElapsedColumn(), console=console(stderr=True), transient=False)
    with bar:
        task = bar.add_task(description, total=total)

        def advance(n: int = 1) -> None:
            bar.advance(task, n)

        yield advance
