"""The ``langgraph-durable`` command: global options like ``DurableSaver.from_urls``
(``--redis-url``/``REDIS_URL``, ``--mongo-url``/``MONGODB_URL``, ``--serde``, and every
``DurableConfig`` field as ``--field-name`` / ``LGD_FIELD_NAME``), then a subcommand."""

from __future__ import annotations

import inspect
import shlex
import typing
from typing import Any

import typer
from typer.core import TyperArgument, TyperCommand

from ..config import DurableConfig, config_options
from . import action_commands as actions
from . import browse, deadletters, transfer
from . import migrate_state as state
from . import operating as ops
from . import retention_commands as retention
from . import size_command as size
from . import store_commands as store
from .dashboard import dashboard
from .session import CliError, Session

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
    """One option per ``DurableConfig`` field (``--no-<flag>`` too for a bool field, as an
    option of its own: the help stays two columns wide at 80 columns)."""
    params = []
    for opt in config_options(skip=_SKIPPED):
        default = DurableConfig.model_fields[opt.name].default
        choices = f"; {opt.choices}" if opt.choices else ""
        env = f"env LGD_{opt.name.upper()}"  # read by langgraph_durable.settings
        desc = f"default {default!r}{choices}; {env}"
        params.append(_param(opt.name, opt.flag, desc, typing.Optional[opt.kind]))  # noqa: UP045
        if opt.kind is bool:
            params.append(_param(_NO + opt.name, f"--no-{opt.flag[2:]}",
                                 f"{opt.name} False; {env}=false", bool, False))
    return params


_NO = "no_"
"""Parameter-name prefix of the ``--no-<flag>`` option of a bool field."""


def _param(name: str, flag: str, desc: str, kind: Any, default: Any = None
           ) -> inspect.Parameter:
    option = typer.Option(default, flag, help=desc, show_default=False,
                          rich_help_panel="DurableConfig")
    return inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=option,
                             annotation=kind)


def _bool_options(kwargs: dict[str, Any]) -> None:
    """Fold each ``--no-<flag>`` given into its field (False); both forms is an error."""
    for key in [k for k in kwargs if k.startswith(_NO) and k[len(_NO):] in _BOOLS]:
        field, negated = key[len(_NO):], kwargs.pop(key)
        if negated:
            if kwargs.get(field) is not None:
                flag = "--" + field.replace("_", "-")
                raise typer.BadParameter(f"{flag} and --no-{flag[2:]} contradict each "
                                         "other")
            kwargs[field] = False


_BOOLS = frozenset(o.name for o in config_options(skip=_SKIPPED) if o.kind is bool)


def _version(value: bool) -> None:
    if value:
        from .. import __version__

        typer.echo(f"langgraph-durable {__version__}")
        raise typer.Exit()


def _main(ctx: typer.Context, **kwargs: Any) -> None:
    kwargs.pop("version", None)
    redis_url, mongo_url = kwargs.pop("redis_url"), kwargs.pop("mongo_url")
    serde, store = kwargs.pop("serde"), kwargs.pop("blob_store")
    allow_types = kwargs.pop("allow_type")
    _bool_options(kwargs)
    options = {k: v for k, v in kwargs.items() if v is not None}
    try:
        ctx.obj = Session(redis_url, mongo_url, options, serde, store, allow_types)
    except CliError as exc:
        raise typer.BadParameter(str(exc).removeprefix("--allow-type: "),
                                 param_hint="--allow-type") from None


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
    inspect.Parameter("allow_type", inspect.Parameter.KEYWORD_ONLY,
                      annotation=list[str],
                      default=typer.Option([], "--allow-type", envvar="LGD_ALLOW_TYPES",
                                           help="decode stored values of this type too, as "
                                           "module.Class (repeatable; the variable: "
                                           "space-separated): others show as <not decoded: "
                                           "...>, never imported nor run")),
    inspect.Parameter("version", inspect.Parameter.KEYWORD_ONLY, annotation=bool,
                      default=typer.Option(False, "--version", callback=_version,
                                           is_eager=True, help="print the version and exit")),
    *_config_params(),
])
_main.__annotations__ = {}
app.callback()(_main)

class _Command(TyperCommand):
    """Usage lines name arguments by their metavar (``THREAD``), not typer's ``{thread}``;
    a global option given after the command is a usage error that says where it goes."""

    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:
        """click's parsing; an option of ``langgraph-durable`` itself found after the
        command raises ``UsageError`` showing the command line with it moved before."""
        try:
            return super().parse_args(ctx, list(args))  # type: ignore[no-any-return]
        except Exception as exc:
            # typer carries its own copy of click: its classes, known by name
            if type(exc).__name__ != "NoSuchOption":
                raise
            hint = _misplaced_hint(ctx, args, getattr(exc, "option_name", ""))
            if hint is None:
                raise
            usage = next(k for k in type(exc).__mro__ if k.__name__ == "UsageError")
            raise usage(hint, ctx) from None

    def collect_usage_pieces(self, ctx: Any) -> list[str]:
        pieces = [self.options_metavar] if self.options_metavar else []
        for param in self.get_params(ctx):
            if isinstance(param, TyperArgument) and param.metavar:
                pieces.append(param.metavar)
            else:
                pieces.extend(param.get_usage_pieces(ctx))
        return pieces


def _misplaced_hint(ctx: Any, args: list[str], name: str) -> str | None:
    """For ``name``, an option of the parent command (``--key-prefix``) given after the
    subcommand: the message saying it goes before the command, with the command line
    that does so (every such option, and its value, moved). None for any other option."""
    parent = ctx.parent
    if parent is None:
        return None
    own = {o for p in ctx.command.params for o in (*p.opts, *p.secondary_opts)}
    globals_ = {o: p for p in parent.command.params if p.param_type_name == "option"
                for o in (*p.opts, *p.secondary_opts) if o not in own}
    if name not in globals_:
        return None
    moved: list[str] = []
    rest: list[str] = []
    tokens = iter(args)
    for token in tokens:
        flag = token.split("=", 1)[0]
        if flag in globals_:
            moved.append(token)
            if "=" not in token and not getattr(globals_[flag], "is_flag", False):
                moved.append(next(tokens, "VALUE"))
        else:
            rest.append(token)
    line = " ".join(shlex.quote(x) for x in [*moved, ctx.info_name, *rest])
    return (f"{name} is a global option, not one of {ctx.info_name}: it goes before the "
            f"command: {parent.command_path} {line}")


app.command("threads", cls=_Command)(browse.threads)
app.command("history", cls=_Command)(browse.history)
app.command("show", cls=_Command)(browse.show)
app.command("diff", cls=_Command)(browse.diff)
app.command("size", cls=_Command)(size.size)
app.command("fork", cls=_Command)(ops.fork)
app.command("resume", cls=_Command)(actions.resume)
app.command("retry", cls=_Command)(actions.retry)
app.command("audit", cls=_Command)(actions.audit_log)
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
app.command("retention", cls=_Command)(retention.retention)
app.command("sweep", cls=_Command)(retention.sweep)
app.command("pin", cls=_Command)(retention.pin)
app.command("unpin", cls=_Command)(retention.unpin)
app.command("migrate", cls=_Command)(ops.migrate)
app.command("migrate-state", cls=_Command)(state.migrate_state)
app.command("dashboard", cls=_Command)(dashboard)
deadletters.app.command("list", cls=_Command)(deadletters.list_)
deadletters.app.command("replay", cls=_Command)(deadletters.replay)
deadletters.app.command("drop", cls=_Command)(deadletters.drop)
app.add_typer(deadletters.app, name="dead-letters")
for _name, _fn in (("namespaces", store.namespaces), ("get", store.get),
                   ("search", store.search), ("put", store.put), ("delete", store.delete),
                   ("reindex", store.reindex)):
    store.app.command(_name, cls=_Command)(_fn)
app.add_typer(store.app, name="store")


def main() -> None:
    """Entry point of the ``langgraph-durable`` console script."""
    app()
