"""One verdict on a key prefix's health, for the CLI (``status``) and the dashboard (the
tiers page): ``ok``, ``degraded`` (something for a person to look at; everything still
works) or ``failing`` (writes pile up or are refused, or a tier does not answer), with
the reasons in words.

The figures come from reads of both tiers that write nothing (``redis_facts``,
``mongodb_facts``, ``storage.outbox_status``); ``judge`` turns them into the verdict and
reads nothing, so the rules are a pure function:

Failing:

- a tier does not answer (Redis or MongoDB);
- outbox entries wait and no flusher is alive (no live heartbeat);
- an outbox partition holds its whole share of ``max_outbox`` (puts are refused).

Degraded:

- no flusher is alive, nothing waits yet;
- the oldest unflushed entry is older than ``max_flush_lag_s``;
- dead letters are present;
- an outbox partition holds ``outbox_warn_ratio`` or more of its share of ``max_outbox``;
- Redis lost the key prefix's data: MongoDB's ``meta`` says the prefix set its
  collections up, and Redis lacks the binding or a thread registry's epoch.

A flusher is alive when its heartbeat (``outbox/heartbeat.py``) has not lapsed; a flusher
of a release without heartbeats is not seen. ``max_outbox`` is the one of the process
asking (the CLI's and the dashboard's configuration: ``LGD_MAX_OUTBOX``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..hot.keys import EPOCH_FIELD, binding_key
from ..plans.context import Context
from ..plans.migrations import SCHEMA_DOC_ID
from . import storage

OK, DEGRADED, FAILING = "ok", "degraded", "failing"
LEVELS = (OK, DEGRADED, FAILING)
"""The verdicts, best first; a verdict's index is its metric value (0, 1, 2)."""


@dataclass(frozen=True)
class HealthOptions:
    """Thresholds of the verdict.

    Attributes:
        max_flush_lag_s: the oldest unflushed outbox entry older than this (seconds)
            makes the verdict ``degraded``. Default 60.
        outbox_warn_ratio: an outbox partition holding this fraction of its
            share of ``max_outbox`` or more makes it ``degraded`` (its whole share: ``failing``,
            puts are refused). Default 0.8.
    """

    max_flush_lag_s: float = 60.0
    outbox_warn_ratio: float = 0.8

    def __post_init__(self) -> None:
        if not self.max_flush_lag_s >= 0:
            raise ValueError("max_flush_lag_s must be >= 0 seconds, got "
                             f"{self.max_flush_lag_s}")
        if not 0 < self.outbox_warn_ratio <= 1:
            raise ValueError("outbox_warn_ratio must be in (0, 1], got "
                             f"{self.outbox_warn_ratio}")


@dataclass(frozen=True)
class Verdict:
    """``level`` (``"ok"``, ``"degraded"``, ``"failing"``) and ``reasons``: one sentence
    per finding, ``(level, text)``, worst first."""

    level: str
    reasons: list[tuple[str, str]] = field(default_factory=list)

    @property
    def value(self) -> int:
        """0 ok, 1 degraded, 2 failing (the metric's value)."""
        return LEVELS.index(self.level)

    def as_dict(self) -> dict[str, Any]:
        """``{"verdict": level, "value": 0|1|2, "reasons": [{"level", "text"}, ...]}``."""
        return {"verdict": self.level, "value": self.value,
                "reasons": [{"level": lv, "text": t} for lv, t in self.reasons]}


def redis_facts(ctx: Context, r: Any) -> dict[str, Any]:
    """What the verdict needs from Redis besides ``storage.outbox_status`` (a few reads,
    nothing written): ``alive`` (flushers whose heartbeat has not lapsed), ``lengths``
    (entries per outbox partition), ``bound`` (the prefix's binding key exists) and
    ``registries_without_epoch`` (partition registries lacking their epoch). Raises the
    client's error when Redis does not answer."""
    beats = storage.heartbeats(ctx, r)
    pipe = r.pipeline(transaction=False)
    for stream in ctx.outboxes:
        pipe.xlen(stream)
    pipe.exists(binding_key(ctx.config.key_prefix))
    for reg in ctx.registries:
        pipe.hexists(reg, EPOCH_FIELD)
    replies = pipe.execute()
    n = len(ctx.outboxes)
    return {"alive": sum(v == "alive" for v in beats.values()),
            "lengths": [int(x) for x in replies[:n]], "bound": bool(replies[n]),
            "registries_without_epoch": sum(not x for x in replies[n + 1:])}


def mongodb_facts(ctx: Context, db: Any) -> dict[str, Any]:
    """What the verdict needs from MongoDB (one ``find_one``): ``set_up_by_prefix``, True
    when ``meta``'s schema document names this key prefix as the collections' owner (a
    saver of the prefix set them up, so it bound the prefix in Redis). Raises the
    client's error when MongoDB does not answer."""
    doc = db[ctx.collections.meta].find_one({"_id": SCHEMA_DOC_ID}, {"key_prefix": 1})
    return {"set_up_by_prefix": bool(doc) and doc.get("key_prefix") == ctx.config.key_prefix}


def _share(ctx: Context) -> int:
    m = ctx.config.max_outbox
    return 0 if m <= 0 else -(-m // ctx.partitions)


def judge(ctx: Context, *, down: dict[str, str], outbox: dict[str, Any] | None,
          redis: dict[str, Any] | None, mongodb: dict[str, Any] | None,
          options: HealthOptions | None = None) -> Verdict:
    """The verdict (the module docstring's rules) from what was read: ``down`` (tier -> its
    error, for a tier that did not answer), ``outbox`` (``storage.outbox_status``),
    ``redis`` (``redis_facts``), ``mongodb`` (``mongodb_facts``); a part not read is
    None (a part of a tier that is down). Reads nothing."""
    o = options or HealthOptions()
    found: list[tuple[str, str]] = []
    for tier, error in down.items():
        found.append((FAILING, f"{'Redis' if tier == 'redis' else 'MongoDB'} does not "
                      f"answer: {error}"))
    if outbox is not None and redis is not None:
        waiting = int(outbox["length"])
        if not redis["alive"]:
            if waiting:
                found.append((FAILING, f"no flusher is alive and {waiting} outbox "
                              "entr" + ("y waits" if waiting == 1 else "ies wait")
                              + " for MongoDB: start a worker (langgraph-durable flusher) "
                              "or a saver with a flusher"))
            else:
                found.append((DEGRADED, "no flusher is alive: entries written now will "
                              "wait in Redis until one starts"))
        age = outbox.get("oldest_age_s")
        if age is not None and age > o.max_flush_lag_s:
            found.append((DEGRADED, f"flush lag {age:.0f} s: the oldest unflushed entry is "
                          f"older than {o.max_flush_lag_s:g} s"))
        if outbox.get("dead_letter_error"):
            found.append((DEGRADED, str(outbox["dead_letter_error"])))
        if outbox.get("dead_letters"):
            found.append((DEGRADED, f"{outbox['dead_letters']} dead letter(s) in "
                          f"{outbox.get('dead_letter_stream')}: outbox entries that could "
                          "not be written to MongoDB"))
        share = _share(ctx)
        fullest = max(redis["lengths"], default=0)
        if share and fullest >= share:
            found.append((FAILING, f"an outbox partition is full ({fullest} of its "
                          f"{share} entries of max_outbox): puts are refused"))
        elif share and fullest >= o.outbox_warn_ratio * share:
            found.append((DEGRADED, f"an outbox partition holds {fullest} of its {share} "
                          f"entries of max_outbox ({o.outbox_warn_ratio:.0%} or more)"))
    if redis is not None and mongodb is not None and mongodb["set_up_by_prefix"]:
        lost = [what for what, gone in (
            ("the key prefix's binding", not redis["bound"]),
            (f"the epoch of {redis['registries_without_epoch']} thread registr"
             + ("y" if redis["registries_without_epoch"] == 1 else "ies"),
             redis["registries_without_epoch"])) if gone]
        if lost:
            found.append((DEGRADED, "Redis lost this key prefix's data (it lacks "
                          + " and ".join(lost) + " while MongoDB says the prefix was set "
                          "up): reads are served by MongoDB and unflushed entries Redis "
                          "held are gone; restart a saver to bind again, then "
                          "`langgraph-durable registry --rebuild`"))
    found.sort(key=lambda f: -LEVELS.index(f[0]))
    level = found[0][0] if found else OK
    return Verdict(level, found)


def check(ctx: Context, clients: Any, options: HealthOptions | None = None) -> Verdict:
    """Read both tiers (``clients``: ``.redis`` sync Redis, ``.db`` the PyMongo database)
    and judge (``judge``). A tier that does not answer is a reason (failing), never an
    exception."""
    down: dict[str, str] = {}
    outbox = redis = mongodb = None
    try:
        outbox = storage.outbox_status(ctx, clients.redis)
        redis = redis_facts(ctx, clients.redis)
    except Exception as exc:  # noqa: BLE001 - the verdict names it
        down["redis"] = _line(exc)
    try:
        mongodb = mongodb_facts(ctx, clients.db)
    except Exception as exc:  # noqa: BLE001 - the verdict names it
        down["mongodb"] = _line(exc)
    return judge(ctx, down=down, outbox=outbox, redis=redis, mongodb=mongodb,
                 options=options)


def _line(exc: BaseException) -> str:
    text = str(exc).splitlines()[0][:300] if str(exc) else ""
    return f"{type(exc).__name__}: {text}"
