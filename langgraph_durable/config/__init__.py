"""Typed configuration of a DurableSaver, validated once (pydantic): ``DurableConfig``,
whose fields are the options of ``options.py`` (grouped and documented there), and
``config_options``, the same fields as command-line options."""

from __future__ import annotations

import typing
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator
from pymongo import WriteConcern

from .options import MAX_TTL_MINUTES as MAX_TTL_MINUTES
from .options import FromUrlsOptions as FromUrlsOptions
from .options import SaverOptions as SaverOptions
from .options import StoreFromUrlsOptions as StoreFromUrlsOptions
from .options import ThreadTTL as ThreadTTL

_DATABASE_BAD = frozenset("/\\. \"$\0")
"""Characters MongoDB refuses in a database name."""

MAX_STATE_VERSION = 2**63 - 1
"""The largest ``state_version``: a 64-bit signed int, as msgpack metadata and MongoDB
store it."""


class DurableConfig(BaseModel):
    """Options of :class:`~langgraph_durable.DurableSaver`, validated once; every unit is in
    the name (``_s`` seconds, ``_bytes`` bytes).

    The fields are the keyword options of ``DurableSaver``, ``from_urls`` and
    ``DurableStore.from_urls`` and the environment variables ``LGD_<NAME>``, one name each,
    in the groups of ``langgraph_durable.config.options``, where each is documented (meaning,
    unit, default, bounds; the ``TypedDict`` editors and mypy check keyword options with):

    - ``RedisOptions``: ``key_prefix``, ``redis_min_replicas``, ``redis_wait_timeout_s``;
    - ``MongoOptions``: ``database``, ``collection_prefix``, ``write_concern_w``,
      ``write_concern_j``, ``write_concern_timeout_s``;
    - ``DurabilityOptions``: ``durability``, ``on_concurrent_run``;
    - ``FlusherOptions`` (the outbox and the flusher): ``flusher``, ``flush_interval_s``,
      ``flush_batch_size``, ``flush_linger_s``, ``claim_idle_s``, ``heartbeat_ttl_s``,
      ``max_outbox``, ``outbox_partitions``, ``on_outbox_full``, ``outbox_full_timeout_s``,
      ``delete_flush_timeout_s``, ``close_drain_timeout_s``;
    - ``RetentionOptions``: ``hot_ttl_s``, ``hot_max_checkpoints``, ``tombstone_ttl_s``;
    - ``RetentionPolicyOptions``: ``ttl`` (a ``ThreadTTL``);
    - ``ValueOptions`` (serialization and limits): ``max_value_bytes``,
      ``queryable_metadata``, ``list_items``, ``item_cache_bytes``, ``item_digest_key``,
      ``blob_timeout_s``, ``blob_retries``;
    - ``EffectOptions``: ``effect_checkpoint_wait_s``;
    - ``StateVersionOptions``: ``state_version``, ``unversioned_state_version``,
      ``newer_state``;
    - ``StoreOptions``: ``vector_search``;
    - ``ClientOptions``, for the clients built from URLs only (``from_urls``,
      ``from_conn_string``, the CLI, the worker): ``redis_max_connections``,
      ``socket_timeout_s``, ``server_selection_timeout_s``, ``mongo_socket_timeout_s``.

    Raises pydantic's ``ValidationError`` for an unknown field or a value out of its
    bounds (the constructors turn it into a ``ConfigurationError`` naming the option).
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    # RedisOptions
    key_prefix: str = Field(default="lgd", min_length=1, max_length=64,
                            pattern=r"^[A-Za-z0-9_.\-]+$")
    redis_min_replicas: int = Field(default=0, ge=0, le=100)
    redis_wait_timeout_s: float = Field(default=1.0, ge=0.001, le=3600)
    # MongoOptions
    database: str = Field(default="langgraph_durable", min_length=1)
    collection_prefix: str = ""
    write_concern_w: Literal["majority"] | int = Field(default="majority")
    write_concern_j: bool = True
    write_concern_timeout_s: float = Field(default=10.0, ge=0, le=86_400)
    # DurabilityOptions
    durability: Literal["write_behind", "strict"] = "write_behind"
    on_concurrent_run: Literal["raise", "fork"] = "raise"
    # FlusherOptions
    flusher: Literal["auto", "off", "process"] = "auto"
    flush_interval_s: float = Field(default=0.05, gt=0, le=60)
    flush_batch_size: int = Field(default=500, ge=1, le=10_000)
    flush_linger_s: float = Field(default=0.1, ge=0, le=10)
    claim_idle_s: float = Field(default=5.0, gt=0)
    heartbeat_ttl_s: float = Field(default=2.0, ge=0.1, le=3600)
    max_outbox: int = Field(default=100_000, ge=0)
    outbox_partitions: int | None = Field(default=None, ge=1, le=1024)
    on_outbox_full: Literal["block", "raise"] = "block"
    outbox_full_timeout_s: float = Field(default=10.0, ge=0)
    delete_flush_timeout_s: float = Field(default=30.0, gt=0)
    close_drain_timeout_s: float = Field(default=10.0, ge=0)
    # RetentionOptions
    hot_ttl_s: int = Field(default=24 * 3600, ge=0)
    hot_max_checkpoints: int = Field(default=50, ge=0)
    tombstone_ttl_s: int = Field(default=30 * 24 * 3600, ge=60, le=10 * 366 * 24 * 3600)
    # RetentionPolicyOptions
    ttl: ThreadTTL | None = None
    # ValueOptions
    max_value_bytes: int = Field(default=256 * 1024 * 1024, gt=0, le=512 * 1024 * 1024 - 1024)
    queryable_metadata: bool | None = None
    list_items: bool = True
    item_cache_bytes: int = Field(default=64 * 1024 * 1024, ge=0)
    item_digest_key: str | None = Field(default=None, min_length=16, repr=False)
    blob_timeout_s: float = Field(default=10.0, gt=0, le=3600)
    blob_retries: int = Field(default=2, ge=0, le=10)
    # EffectOptions
    effect_checkpoint_wait_s: float = Field(default=60.0, gt=0, le=3600)
    # StateVersionOptions
    state_version: int | None = Field(default=None, ge=1)
    unversioned_state_version: int = Field(default=1, ge=1)
    newer_state: Literal["raise", "read"] = "raise"
    # StoreOptions
    vector_search: Literal["auto", "exact", "redis", "mongodb"] = "auto"
    # ClientOptions (clients built from URLs only)
    redis_max_connections: int = Field(default=256, ge=1)
    socket_timeout_s: float = Field(default=5.0, gt=0)
    server_selection_timeout_s: float = Field(default=5.0, gt=0)
    mongo_socket_timeout_s: float = Field(default=60.0, gt=0, le=86400)

    @field_validator("write_concern_w", mode="before")
    @classmethod
    def _w_majority_or_positive(cls, w: object) -> object:
        if isinstance(w, str) and w.strip().isdigit():
            w = int(w)  # from the command line or an environment variable
        if w == "majority" or (isinstance(w, int) and not isinstance(w, bool)
                               and 1 <= w <= 50):
            return w
        raise ValueError(f"write_concern_w must be 'majority' or a number from 1 to 50 (the "
                         f"most members a replica set has), got {w!r} (w=0 would not wait "
                         "for MongoDB at all)")

    @field_validator("state_version", "unversioned_state_version", mode="before")
    @classmethod
    def _a_state_version(cls, v: object, info: ValidationInfo) -> object:
        # an int, or its digits (an environment variable, the command line); never a bool
        # or a float, which pydantic's lax mode would turn into one (True -> version 1),
        # as config["configurable"]["state_version"] and state_migrations keys refuse them
        if v is None:
            return v
        if isinstance(v, str) and v.strip().isdigit():
            v = int(v)
        if isinstance(v, bool) or not isinstance(v, int):
            raise ValueError(f"{info.field_name} is a state version, an int >= 1, got "
                             f"{v!r} ({type(v).__name__})")
        if v > MAX_STATE_VERSION:
            raise ValueError(f"{info.field_name} {v} is past the largest state version, "
                             f"{MAX_STATE_VERSION} (a 64-bit signed int: stored in every "
                             "checkpoint's metadata and in MongoDB)")
        return v

    @field_validator("database")
    @classmethod
    def _mongodb_database_name(cls, name: str) -> str:
        bad = sorted({c for c in name if c in _DATABASE_BAD})
        if bad or len(name.encode()) > 63:
            why = (f"it contains {', '.join(repr(c) for c in bad)}" if bad
                   else f"it is {len(name.encode())} bytes long")
            raise ValueError(f"not a MongoDB database name: {why} (a database name has at "
                             "most 63 bytes and none of / \\ . space \" $ or NUL)")
        return name

    @field_validator("collection_prefix")
    @classmethod
    def _mongodb_collection_prefix(cls, prefix: str) -> str:
        if "$" in prefix or "\0" in prefix or prefix.startswith("system."):
            raise ValueError("the collections <collection_prefix>checkpoints, ... would not "
                             "be MongoDB collection names: a collection_prefix has no '$' "
                             "and no NUL and does not begin with 'system.'")
        return prefix

    @field_validator("write_concern_timeout_s")
    @classmethod
    def _wtimeout_ms(cls, s: float) -> float:
        if 0 < s < 0.001:
            raise ValueError(f"write_concern_timeout_s is in seconds, with millisecond "
                             f"resolution: {s} would round to 0 (no limit); use 0 for no "
                             "limit or at least 0.001")
        return s

    @property
    def write_concern(self) -> WriteConcern:
        """The ``pymongo.WriteConcern`` built from the ``write_concern_*`` options."""
        ms = int(self.write_concern_timeout_s * 1000)
        return WriteConcern(w=self.write_concern_w, j=self.write_concern_j,
                            wtimeout=ms or None)


@dataclass(frozen=True)
class ConfigOption:
    """One ``DurableConfig`` field as a command-line option (``config_options``)."""

    name: str
    """The field name, e.g. ``"flush_batch_size"``; also the environment's ``LGD_<NAME>``."""
    flag: str
    """``--field-name``."""
    kind: type
    """``int``, ``float``, ``str`` or ``bool``: the type a parser hands to pydantic."""
    choices: str
    """Allowed values for the help text (``"auto | off"``), ``""`` when any of ``kind``."""
    help: str
    """``DurableConfig.<name> (default ...; choices)``."""

    def parse(self, text: str) -> Any:
        """``text`` as given on a command line, converted for ``DurableConfig``: numbers
        for ``int``/``float`` fields and for ``write_concern_w`` digits, ``true``/``false``
        (also ``1``/``0``, ``yes``/``no``, any case) for ``bool``; raises ``ValueError``."""
        if self.kind is bool:
            low = text.strip().lower()
            if low not in ("true", "false", "1", "0", "yes", "no"):
                raise ValueError(f"{self.flag} takes true or false, got {text!r}")
            return low in ("true", "1", "yes")
        if self.kind is str and text.isdigit() and "int" in self.choices.split(" | "):
            return int(text)
        return self.kind(text)


def config_options(*, skip: frozenset[str] = frozenset()) -> list[ConfigOption]:
    """The ``DurableConfig`` fields a command line can set, derived once from the model:
    ``str``/``int``/``float``/``bool`` fields, ``int | None`` fields (``outbox_partitions``:
    not given leaves the default), ``Literal`` choices (as ``str``) and unions of a
    ``Literal`` with a type (``write_concern_w``: ``majority | int``). Fields of other
    types (``queryable_metadata``: ``bool | None``, ``item_digest_key``: a secret, never on
    a command line) and the names in ``skip`` are left out. Used by the
    ``langgraph-durable`` CLI (typer) and the flusher worker (argparse)."""
    out = []
    for name, field in DurableConfig.model_fields.items():
        ann = field.annotation
        if name in skip:
            continue
        if typing.get_origin(ann) is Literal:
            kind: type = str
            choices = " | ".join(str(a) for a in typing.get_args(ann))
        elif ann in (int, float, str, bool):
            kind, choices = ann, ""  # type: ignore[assignment]
        elif ann == int | None:
            kind, choices = int, ""  # outbox_partitions: unset means the default
        elif any(typing.get_origin(a) is Literal for a in typing.get_args(ann)):
            kind = str  # e.g. write_concern_w: 'majority' or a number
            choices = " | ".join(str(x) for a in typing.get_args(ann)
                                 for x in (typing.get_args(a) or [a.__name__]))
        else:
            continue
        extra = f"; {choices}" if choices else ""
        out.append(ConfigOption(name, f"--{name.replace('_', '-')}", kind, choices,
                                f"DurableConfig.{name} (default {field.default!r}{extra})"))
    return out
