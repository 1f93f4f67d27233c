"""The ``langgraph-durable`` command: global options like ``DurableSaver.from_urls``
(``--redis-url``/``REDIS_URL``, ``--mongo-url``/``MONGODB_URL``, ``--serde``, and every
``DurableConfig`` field as ``--field-name`` / ``LGD_FIELD_NAME``), then a subcommand."""

from __future__ import annotations

import inspect
import typing
from typing import Any

import typer
from typer.core import TyperArgument, TyperCommand

from ..config import config_options
from . import browse, ops, transfer
from .session import Session

HELP = """Inspect and operate langgraph_durable storage (Redis hot tier, MongoDB durable tier).

Servers and options are given like DurableSaver.from_urls: --redis-url/REDIS_URL,
--mongo-url/MONGODB_URL, and DurableConfig fields such as --key-prefix and --database
(env LGD_KEY_PREFIX, LGD_DATABASE, ...). Destructive commands ask before acting (--yes
skips the question). Errors print one line and exit 1."""

app = typer.Typer(name="langgraph-durable", help=HELP, no_args_is_help=True,
                  add_completion=False, pretty_exceptions_enable=False,
                  rich_markup_mode="markdown")

_SKIPPED = frozenset({"flusher"})  # chosen per command: read-only commands never flush


def _config_params() -> list[inspect.Parameter]:
    params = []
    for opt in config_options(skip=_SKIPPED):
        flag = opt.flag + (f"/--no-{opt.flag[2:]}" if opt.kind is bool else "")
        desc = f"{opt.help}; env LGD_{opt.name.upper()}"  # read by langgraph_durable.settings
        option = typer.Option(None, flag, help=desc, show_default=False,
                              rich_help_panel="DurableConfig")
        params.append(inspect.Parameter(opt.name, inspect.Parameter.KEYWORD_ONLY,
                                        default=option,
                                        annotation=typing.Optional[opt.kind]))  # noqa: UP045
    return params


def _version(value: bool) -> None:
    if value:
        from .. import __version__

        typer.echo(f"langgraph-durable {__version__}")
        raise typer.Exit()


def _main(ctx: typer.Context, **kwargs: Any) -> None:
    kwargs.pop("version", None)
    redis_url, mongo_url = kwargs.pop("redis_url"), kwargs.pop("mongo_url")
    serde, store = kwargs.pop("serde"), kwargs.pop("blob_store")
    options = {k: v for k, v in kwargs.items() if v is not None}
    ctx.obj = Session(redis_url, mongo_url, options, serde, store)


_main.__signature__ = inspect.Signature([  # type: ignore[attr-defined]
    inspect.Parameter("ctx", inspect.Parameter.POSITIONAL_OR_KEYWORD, annotation=typer.Context),
    inspect.Parameter("redis_url", inspect.Parameter.KEYWORD_ONLY, annotation=typing.Optional[str],  # noqa: UP045
                      default=typer.Option(None, "--redis-url",
                                           help="Redis URL of the hot tier (env REDIS_URL)")),
    inspect.Parameter("mongo_url", inspect.Parameter.KEYWORD_ONLY, annotation=typing.Optional[str],  # noqa: UP045
                      default=typer.Option(None, "--mongo-url",
                                           help="MongoDB URL of the durable tier; its "
                                           "database is used unless --database is given "
                                           "(env MONGODB_URL)")),
    inspect.Parameter("serde", inspect.Parameter.KEYWORD_ONLY, annotation=typing.Optional[str],  # noqa: UP045
                      default=typer.Option(None, "--serde", envvar="LGD_SERDE",
                                           help="serializer as module:attribute (an object "
                                           "or a factory), e.g. for EncryptedSerializer")),
    inspect.Parameter("blob_store", inspect.Parameter.KEYWORD_ONLY,
                      annotation=typing.Optional[str],  # noqa: UP045
                      default=typer.Option(None, "--blob-store", envvar="LGD_BLOB_STORE",
                                           help="blob store of ExternalRefSerializer values: "
                                           "s3://bucket/prefix or a folder (decoding, gc)")),
    inspect.Parameter("version", inspect.Parameter.KEYWORD_ONLY, annotation=bool,
                      default=typer.Option(False, "--version", callback=_version,
                                           is_eager=True, help="print the version and exit")),
    *_config_params(),
])
_main.__annotations__ = {}
app.callback()(_main)

class _Command(TyperCommand):
    """Usage lines name arguments by their metavar (``THREAD``), not typer's ``{thread}``."""

    def collect_usage_pieces(self, ctx: Any) -> list[str]:
        pieces = [self.options_metavar] if self.options_metavar else []
        for param in self.get_params(ctx):
            if isinstance(param, TyperArgument) and param.metavar:
                pieces.append(param.metavar)
            else:
                pieces.extend(param.get_usage_pieces(ctx))
        return pieces


app.command("threads", cls=_Command)(browse.threads)
app.command("history", cls=_Command)(browse.history)
app.command("show", cls=_Command)(browse.show)
app.command("diff", cls=_Command)(browse.diff)
app.command("fork", cls=_Command)(ops.fork)
app.command("copy", cls=_Command)(ops.copy)
app.command("export", cls=_Command)(transfer.export)
app.command("import", cls=_Command)(transfer.import_)
app.command("flush", cls=_Command)(ops.flush)
app.command("registry", cls=_Command)(ops.registry)
app.command("flusher", cls=_Command)(ops.flusher)
app.command("status", cls=_Command)(ops.status)
app.command("gc", cls=_Command)(ops.gc)
app.command("prune", cls=_Command)(ops.prune)
app.command("delete", cls=_Command)(ops.delete)
app.command("migrate", cls=_Command)(ops.migrate)


def main() -> None:
    """Entry point of the ``langgraph-durable`` console script."""
    app()
