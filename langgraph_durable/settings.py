"""Configuration from the environment, in one place for the library, the CLI and the worker.

Read through pydantic-settings:

- ``REDIS_URL``, ``MONGODB_URL``: the servers (``DurableSaver.from_conn_string`` without
  URLs, ``langgraph-durable``, ``python -m langgraph_durable.outbox.worker``);
- ``S3_ENDPOINT_URL``: the endpoint of every ``S3BlobStore`` built without a client or an
  explicit ``endpoint_url`` (then boto3's own ``AWS_ENDPOINT_URL*`` rules apply);
- ``LGD_<FIELD>`` for every ``DurableConfig`` field, i.e. every keyword option of
  ``config/options.py``, whatever its group (``LGD_KEY_PREFIX``, ``LGD_FLUSH_INTERVAL_S``,
  ``LGD_WRITE_CONCERN_W``, ``LGD_TTL`` as JSON, ...); an ``S3BlobStore`` reads two of them
  itself, ``LGD_BLOB_TIMEOUT_S`` and ``LGD_BLOB_RETRIES`` (``blob_bounds``).

How a saver's configuration is chosen (``resolve_config``), one rule everywhere:

1. ``config=`` (a ``DurableConfig``) is used as it is: the environment is not read.
   Passing ``config=`` and keyword options together raises ``ConfigurationError``.
2. Otherwise every field comes from the keyword options (command-line flags for the CLI
   and the worker), else from ``LGD_<FIELD>``, else from the default.
3. ``database``: when it is given nowhere (options, ``LGD_DATABASE``, ``config=`` with an
   explicit ``database``), the database of the MongoDB URL (``mongodb://h:p/myappdb``) or
   client is used, else ``"langgraph_durable"``. A database given both ways and different
   raises ``ConfigurationError``.
"""

from __future__ import annotations

import difflib
import os
import re
from collections.abc import Mapping
from typing import Any

from pydantic import AliasChoices, Field, ValidationError
from pydantic_settings import BaseSettings, SettingsConfigDict

from .config import DurableConfig
from .config.options import CLIENT_OPTIONS
from .errors import ConfigurationError


class ServerSettings(BaseSettings):
    """``REDIS_URL``, ``MONGODB_URL`` and ``S3_ENDPOINT_URL`` (None when unset or empty)."""

    model_config = SettingsConfigDict(extra="ignore", env_ignore_empty=True,
                                      case_sensitive=True)

    redis_url: str | None = Field(default=None, validation_alias=AliasChoices("REDIS_URL"))
    mongodb_url: str | None = Field(default=None,
                                    validation_alias=AliasChoices("MONGODB_URL"))
    s3_endpoint_url: str | None = Field(default=None,
                                        validation_alias=AliasChoices("S3_ENDPOINT_URL"))


class EnvConfig(DurableConfig, BaseSettings):
    """``DurableConfig`` read from ``LGD_<FIELD>`` environment variables (validated as the
    fields are; ``LGD_QUERYABLE_METADATA=true``, ``LGD_WRITE_CONCERN_W=1``, ...)."""

    model_config = SettingsConfigDict(env_prefix="LGD_", extra="ignore", frozen=True,
                                      env_ignore_empty=True, case_sensitive=False)


def server_settings() -> ServerSettings:
    """The server URLs of the environment, read now."""
    return ServerSettings()


CLI_VARIABLES = frozenset({"LGD_SERDE", "LGD_BLOB_STORE"})
"""``LGD_*`` variables that are not ``DurableConfig`` fields: the CLI's ``--serde`` and
``--blob-store``."""


BLOB_BOUNDS = ("blob_timeout_s", "blob_retries")
"""The ``DurableConfig`` fields that bound an ``S3BlobStore``'s own client."""


def blob_bounds() -> dict[str, Any]:
    """The bounds of an ``S3BlobStore``'s own client, ``{"blob_timeout_s": seconds,
    "blob_retries": n}``: from ``LGD_BLOB_TIMEOUT_S`` and ``LGD_BLOB_RETRIES`` now, else
    ``DurableConfig``'s defaults, validated as ``DurableConfig`` validates them. Only these
    two variables are read (a store is no saver: other ``LGD_*`` names are not its
    business). Raises ``ConfigurationError`` naming a variable with a bad value."""
    wanted = {f"LGD_{name}".upper(): name for name in BLOB_BOUNDS}
    found: dict[str, Any] = {wanted[k.upper()]: v for k, v in os.environ.items()
                             if k.upper() in wanted and v}
    try:
        config = DurableConfig(**found)
    except ValidationError as exc:
        bad = "; ".join(f"LGD_{str(err['loc'][0]).upper()}={err.get('input')!r}: {err['msg']}"
                        for err in exc.errors())
        raise ConfigurationError(f"invalid environment variable: {bad}") from None
    return {name: getattr(config, name) for name in BLOB_BOUNDS}


def env_options() -> dict[str, Any]:
    """The ``DurableConfig`` fields set by ``LGD_*`` variables now, validated. Raises
    ``ConfigurationError`` naming the variable for a bad value, and for an ``LGD_*`` name
    that is no ``DurableConfig`` field (a misspelling such as ``LGD_KEY_PREFX`` would
    otherwise leave the default key prefix and database in use, shared with other apps)."""
    fields = {f"LGD_{name}".upper() for name in DurableConfig.model_fields}
    unknown = sorted(k for k in os.environ
                     if k.upper().startswith("LGD_") and k.upper() not in fields
                     and k.upper() not in CLI_VARIABLES)
    if unknown:
        hints = []
        for k in unknown:
            close = difflib.get_close_matches(k.upper(), sorted(fields | CLI_VARIABLES), 1)
            hints.append(f"{k} (did you mean {close[0]}?)" if close else k)
        raise ConfigurationError(
            f"unknown langgraph_durable environment variable(s): {', '.join(hints)}; the "
            "LGD_* names are LGD_<DurableConfig field>, e.g. LGD_KEY_PREFIX, LGD_DATABASE")
    if not any(v and k.upper().startswith("LGD_") and k.upper() not in CLI_VARIABLES
               for k, v in os.environ.items()):
        return {}  # what EnvConfig() would give, without its 8 ms of reading sources
    try:
        env = EnvConfig()
    except ValidationError as exc:
        bad = "; ".join(
            f"LGD_{'_'.join(str(p) for p in err['loc']).upper()}="
            f"{os.environ.get('LGD_' + '_'.join(str(p) for p in err['loc']).upper(), '')!r}: "
            f"{err['msg']}" for err in exc.errors())
        raise ConfigurationError(f"invalid environment variable: {bad}") from None
    return {name: getattr(env, name) for name in env.model_fields_set}


def resolve_config(config: DurableConfig | None,
                   options: Mapping[str, Any]) -> DurableConfig:
    """The configuration a saver uses (the module docstring has the rule). Raises
    ``ConfigurationError`` for ``config=`` together with keyword options and for a bad
    ``LGD_*`` variable, pydantic's ``ValidationError`` for an invalid keyword option."""
    if config is not None:
        if options:
            raise ConfigurationError(
                "pass either config=DurableConfig(...) or keyword options, not both (got "
                f"config= and {sorted(options)}); put the options in the DurableConfig, e.g. "
                "config.model_copy(update={...})")
        return config
    return DurableConfig(**{**env_options(), **options})


def saver_config(config: DurableConfig | None, options: Mapping[str, Any], *,
                 builds_clients: bool = True) -> DurableConfig:
    """``resolve_config`` for the library's constructors (``DurableSaver(...)``,
    ``from_urls``): an unknown or invalid keyword option raises ``ConfigurationError``
    naming it, with the closest option name for a misspelling (``flush_intervl_s=1``: did
    you mean ``flush_interval_s``?) and the allowed form of a bad ``key_prefix``, as for
    ``LGD_*`` variables (the CLI and the worker report pydantic's errors as flags).

    ``builds_clients=False`` (``DurableSaver(redis, mongo, ...)``, given clients): a
    keyword option of ``ClientOptions`` (``redis_max_connections``, ``socket_timeout_s``,
    ``server_selection_timeout_s``, ``mongo_socket_timeout_s``) raises
    ``ConfigurationError`` too, since it would configure nothing. Set in ``config=`` or
    ``LGD_*`` it is accepted (and unused), as before: one environment serves every saver
    of a process."""
    if not builds_clients:
        unused = sorted(CLIENT_OPTIONS & set(options))
        if unused:
            raise ConfigurationError(
                f"option(s) {', '.join(f'{n}={options[n]!r}' for n in unused)} only "
                "configure the clients DurableSaver.from_urls builds: DurableSaver(redis, "
                "mongo, ...) uses the clients given, so set them there (redis.Redis("
                "socket_timeout=..., max_connections=...), MongoClient("
                "serverSelectionTimeoutMS=..., socketTimeoutMS=...)) or use DurableSaver.from_urls")
    try:
        return resolve_config(config, options)
    except ValidationError as exc:
        raise options_error(exc) from None


_KEY_PREFIX_BAD = re.compile(r"[^A-Za-z0-9_.\-]+")


def options_error(exc: ValidationError) -> ConfigurationError:
    """A ``ConfigurationError`` naming each keyword option pydantic refused in ``exc``:
    ``unknown option NAME=VALUE (did you mean FIELD?)`` or ``invalid option NAME=VALUE:
    why`` (for ``key_prefix`` with an allowed spelling)."""
    fields = sorted(DurableConfig.model_fields)
    parts = []
    for err in exc.errors():
        name = ".".join(str(p) for p in err["loc"]) or "?"
        value = err.get("input")
        if err["type"] == "extra_forbidden":
            close = difflib.get_close_matches(name, fields, 1, 0.6)
            hint = (f"did you mean {close[0]}?" if close
                    else "the options are the DurableConfig fields: " + ", ".join(fields))
            parts.append(f"unknown option {name}={value!r} ({hint})")
            continue
        text = f"invalid option {name}={value!r}: {err['msg']}"
        if name == "key_prefix" and isinstance(value, str):
            fixed = _KEY_PREFIX_BAD.sub("-", value).strip("-")[:64]
            text += (" (a key_prefix is 1 to 64 letters, digits, '_', '.' and '-', with no "
                     "':', so no two prefixes and thread ids make the same Redis key"
                     + (f"; e.g. {fixed!r})" if fixed else ")"))
        parts.append(text)
    return ConfigurationError("; ".join(parts))


def check_mongo_url(url: Any) -> str:
    """``url`` when it is a MongoDB URL (``mongodb://`` or ``mongodb+srv://``); else
    raises ``ConfigurationError`` naming it (password hidden) with the likely fix: a
    misspelt scheme (``mongodb//h``, ``mongo://h``), a Redis URL given for MongoDB."""
    if isinstance(url, str) and url.startswith(("mongodb://", "mongodb+srv://")):
        return url
    fix = ""
    if isinstance(url, str):
        scheme, sep, _ = url.partition("://")
        typo = re.match(r"^mongo(db)?(\+srv)?:?/*", url)
        if url.startswith(("redis://", "rediss://", "redis+", "unix://")):
            fix = "; that is a Redis URL: are the Redis and MongoDB URLs swapped?"
        elif typo and (not sep or scheme.startswith("mongo")):
            good = "mongodb+srv://" if typo.group(2) else "mongodb://"
            fix = f"; did you mean {good + hide_password(url[typo.end():])!r}?"
    shown = hide_password(url) if isinstance(url, str) else url
    raise ConfigurationError(
        f"MongoDB URL {shown!r} is not a MongoDB connection string: it must begin with "
        f"mongodb:// or mongodb+srv:// (e.g. mongodb://localhost:27017/myappdb){fix}")


def hide_password(url: str) -> str:
    """``url`` with the user and password before ``@`` shown as ``***``."""
    if "@" not in url:
        return url
    head, _, rest = url.rpartition("@")
    cut = head.rfind("/") + 1  # the user info starts after the scheme's slashes
    return f"{head[:cut]}***@{rest}"


def database_of_url(url: str) -> str | None:
    """The database named in a MongoDB URL's path (``mongodb://h:p/myappdb`` -> ``myappdb``),
    or None."""
    from urllib.parse import unquote

    rest = url.split("://", 1)[-1]  # no DNS lookup, unlike pymongo's parser for +srv
    if "/" not in rest:
        return None
    return unquote(rest.split("/", 1)[1].split("?", 1)[0]) or None


def with_database(config: DurableConfig, found: str | None, where: str) -> DurableConfig:
    """``config`` with the database named by the MongoDB URL or client (``found``, from
    ``where``) when the configuration gives none; raises ``ConfigurationError`` when both
    name one and they differ, or when ``found`` is no name MongoDB takes (naming it and
    ``where``)."""
    if not found:
        return config
    if "database" in config.model_fields_set:
        if config.database != found:
            raise ConfigurationError(
                f"two MongoDB databases given: database={config.database!r} and "
                f"{found!r} in the {where}; give one, or make them equal")
        return config
    try:
        return DurableConfig(**{**{k: getattr(config, k) for k in config.model_fields_set},
                                "database": found})
    except ValidationError as exc:
        why = "; ".join(e["msg"].removeprefix("Value error, ") for e in exc.errors())
        raise ConfigurationError(f"the database {found!r} in the {where}: {why}") from None
