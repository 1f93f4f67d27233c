"""Counters and histograms of a DurableSaver and its flushers.

Every number is kept twice, by the same call: in a plain dict (``DurableSaver.stats()``)
and through the OpenTelemetry metrics API. The API is optional (``pip install
'langgraph-durable[otel]'``); without it only the dict is kept. With the API but no SDK
configured the instruments are OpenTelemetry's no-ops. Instruments come from the meter
``langgraph_durable`` of the global ``MeterProvider`` or of the ``meter_provider`` given
to ``DurableSaver``. ``INSTRUMENTS`` lists them with their units.

Nothing recorded here carries a stored value: attributes are tier, operation and outbox
names only.
"""

from __future__ import annotations

import os
import threading
import weakref
from collections.abc import Iterable
from typing import Any

from .core.ops import BulkWriteFailed, GatedRead, MongoOp, Pipeline, Script

try:  # optional dependency: the ``otel`` extra
    from opentelemetry import metrics as _otel
except ImportError:  # pragma: no cover - exercised in a subprocess test
    _otel = None  # type: ignore[assignment]

METER_NAME = "langgraph_durable"
"""Name of the OpenTelemetry meter every instrument comes from."""

INSTRUMENTS: dict[str, tuple[str, str, str]] = {
    "langgraph_durable.puts": (
        "counter", "{call}", "put/aput calls"),
    "langgraph_durable.put_writes": (
        "counter", "{call}", "put_writes/aput_writes calls"),
    "langgraph_durable.reads": (
        "counter", "{read}", "get_tuple answers by tier: hot (Redis), durable (MongoDB), miss"),
    "langgraph_durable.bytes_written": (
        "counter", "By", "serialized record bytes written, by tier: hot = put/put_writes "
        "script payloads sent to Redis, durable = record bytes flushers wrote to MongoDB"),
    "langgraph_durable.op.duration": (
        "histogram", "s", "round-trip time of one server operation, by tier and op "
        "(Lua script name, Redis command, or <collection>.<method>)"),
    "langgraph_durable.outbox.length": (
        "gauge", "{entry}", "outbox entries not yet in MongoDB, as this process's flusher "
        "last saw them (after its last non-empty round)"),
    "langgraph_durable.health": (
        "gauge", "1", "the key prefix's health verdict (inspection.health): 0 ok, 1 "
        "degraded, 2 failing, as this process last judged it (the dashboard does, at "
        "every flush-lag sample)"),
    "langgraph_durable.flush.batch_size": (
        "histogram", "{entry}", "outbox entries taken by one non-empty flush round"),
    "langgraph_durable.flush.lag": (
        "histogram", "s", "put -> durable lag of each flushed entry (stream id time to ack)"),
    "langgraph_durable.flush.documents": (
        "counter", "{document}", "MongoDB documents written by flushers"),
    "langgraph_durable.flush.errors": (
        "counter", "{error}", "flush failures by kind: retry (a round failed and is retried) "
        "or dead_letter (an entry moved to the dead-letter stream)"),
    "langgraph_durable.model_calls.replayed": (
        "counter", "{call}", "journaled model calls answered from the journal (not paid again)"),
    "langgraph_durable.model_calls.tokens_saved": (
        "counter", "{token}", "total tokens (usage metadata) of the replayed model calls"),
}
"""Instrument name -> (kind, UCUM unit, description)."""

_SECONDS = (0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25,
            0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0)
_ENTRIES = (1, 2, 5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10000)
_WRITING_SCRIPTS = frozenset({"put", "put_writes"})


class _Instruments:
    """The OpenTelemetry instruments of one meter provider (made once, shared)."""

    def __init__(self, provider: Any) -> None:
        meter = (provider or _otel.get_meter_provider()).get_meter(METER_NAME)
        self.live: weakref.WeakSet[Metrics] = weakref.WeakSet()

        def hist(name: str, bounds: Iterable[float]) -> Any:
            _kind, unit, desc = INSTRUMENTS[name]
            try:
                return meter.create_histogram(name, unit=unit, description=desc,
                                              explicit_bucket_boundaries_advisory=list(bounds))
            except TypeError:  # opentelemetry-api < 1.23 has no bucket advice
                return meter.create_histogram(name, unit=unit, description=desc)

        def counter(name: str) -> Any:
            _kind, unit, desc = INSTRUMENTS[name]
            return meter.create_counter(name, unit=unit, description=desc)

        self.puts = counter("langgraph_durable.puts")
        self.put_writes = counter("langgraph_durable.put_writes")
        self.reads = counter("langgraph_durable.reads")
        self.bytes_written = counter("langgraph_durable.bytes_written")
        self.documents = counter("langgraph_durable.flush.documents")
        self.errors = counter("langgraph_durable.flush.errors")
        self.duration = hist("langgraph_durable.op.duration", _SECONDS)
        self.batch_size = hist("langgraph_durable.flush.batch_size", _ENTRIES)
        self.lag = hist("langgraph_durable.flush.lag", _SECONDS)
        self.model_replayed = counter("langgraph_durable.model_calls.replayed")
        self.tokens_saved = counter("langgraph_durable.model_calls.tokens_saved")
        _kind, unit, desc = INSTRUMENTS["langgraph_durable.outbox.length"]
        meter.create_observable_gauge("langgraph_durable.outbox.length", [self._observe],
                                      unit=unit, description=desc)

        _kind, unit, desc = INSTRUMENTS["langgraph_durable.health"]
        meter.create_observable_gauge("langgraph_durable.health", [self._observe_health],
                                      unit=unit, description=desc)

    def _observe(self, _options: Any) -> list[Any]:
        return [_otel.Observation(m.outbox_length, {"outbox": m.outbox})
                for m in list(self.live) if m.outbox_length is not None]

    def _observe_health(self, _options: Any) -> list[Any]:
        return [_otel.Observation(m.health_value, {"outbox": m.outbox})
                for m in list(self.live) if m.health_value is not None]


_BY_PROVIDER: dict[int, tuple[Any, _Instruments]] = {}
_REGISTRY_LOCK = threading.Lock()


def _instruments_for(provider: Any) -> _Instruments | None:
    if _otel is None:
        return None
    with _REGISTRY_LOCK:
        found = _BY_PROVIDER.get(id(provider))
        if found is None or found[0] is not provider:
            found = _BY_PROVIDER[id(provider)] = (provider, _Instruments(provider))
        return found[1]


def _summary() -> list[float]:
    return [0, 0.0, 0.0]  # count, sum, max


def _summarize(s: list[float]) -> dict[str, float]:
    return {"count": int(s[0]), "sum": s[1], "max": s[2]}


class Metrics:
    """Counters of one saver (and its in-process flusher), or of one standalone flusher.

    Args:
        outbox: the outbox stream name (the ``outbox`` attribute of the length gauge).
        collection_prefix: stripped from collection names in the ``op`` attribute.
        meter_provider: an OpenTelemetry ``MeterProvider``; default the global one.

    All methods are thread-safe and cheap (a lock and a few dict updates; the
    OpenTelemetry calls are no-ops unless an SDK is configured).
    """

    def __init__(self, outbox: str = "", collection_prefix: str = "", *,
                 meter_provider: Any = None) -> None:
        self.outbox = outbox
        self._cprefix = collection_prefix
        self._lock = threading.Lock()
        self.counters: dict[str, int] = {"puts": 0, "put_writes": 0, "reads_hot": 0,
                                         "reads_durable": 0, "reads_miss": 0}
        self.bytes_written = {"hot": 0, "durable": 0}
        self.durations: dict[str, list[float]] = {}
        self.flush: dict[str, int] = {"batches": 0, "entries": 0, "documents": 0,
                                      "retries": 0, "dead_letters": 0}
        self.batch_sizes = _summary()
        self.lags = _summary()
        self.outbox_length: int | None = None
        self.health_value: int | None = None
        self.model_calls: dict[str, int] = {"called": 0, "replayed": 0, "tokens_saved": 0}
        self._attrs: dict[str, tuple[str, dict[str, str]]] = {}
        self._otel = _instruments_for(meter_provider)
        if self._otel is not None:
            self._otel.live.add(self)

    # ------------------------------------------------------------------ saver calls

    def call(self, name: str) -> None:
        """Count one ``put`` (``name="puts"``) or ``put_writes`` call."""
        with self._lock:
            self.counters[name] += 1
        if self._otel is not None:
            (self._otel.puts if name == "puts" else self._otel.put_writes).add(1)

    def model_call(self, replayed: bool, tokens: int) -> None:
        """Count one journaled model call (``langgraph_durable.journal``): made, or
        ``replayed`` from the journal, whose usage metadata said ``tokens`` in all."""
        with self._lock:
            if replayed:
                self.model_calls["replayed"] += 1
                self.model_calls["tokens_saved"] += tokens
            else:
                self.model_calls["called"] += 1
        if self._otel is not None and replayed:
            self._otel.model_replayed.add(1)
            self._otel.tokens_saved.add(tokens)

    def read(self, hot: int, durable: int, miss: int) -> None:
        """Count ``get_tuple`` answers: checkpoints served by each tier, or a miss."""
        with self._lock:
            self.counters["reads_hot"] += hot
            self.counters["reads_durable"] += durable
            self.counters["reads_miss"] += miss
        if self._otel is not None:
            for tier, n in (("hot", hot), ("durable", durable), ("miss", miss)):
                if n:
                    self._otel.reads.add(n, _TIER[tier])

    # ------------------------------------------------------------------ driver hook

    def observe_op(self, op: Any, seconds: float, ok: bool) -> None:
        """``Clients.observer``: one server operation took ``seconds`` (successful if ``ok``)."""
        kind = type(op)
        if kind is Script:
            key, nbytes = "hot." + op.name, 0
            if ok and op.name in _WRITING_SCRIPTS:
                nbytes = sum(len(a) for a in op.args if type(a) is bytes)
        elif kind is Pipeline or kind is GatedRead:
            name = str(op.commands[0][0]).lower() if op.commands else "pipeline"
            key, nbytes = "hot." + name, 0
        elif isinstance(op, MongoOp):
            coll = op.collection
            if self._cprefix and coll.startswith(self._cprefix):
                coll = coll[len(self._cprefix):]
            key, nbytes = f"durable.{coll}.{op.method}", 0
        else:
            return
        with self._lock:
            s = self.durations.get(key)
            if s is None:
                s = self.durations[key] = _summary()
                tier, _, name = key.partition(".")
                self._attrs[key] = (tier, {"tier": tier, "op": name})
            s[0] += 1
            s[1] += seconds
            if seconds > s[2]:
                s[2] = seconds
            if nbytes:
                self.bytes_written["hot"] += nbytes
        if self._otel is not None:
            self._otel.duration.record(seconds, self._attrs[key][1])
            if nbytes:
                self._otel.bytes_written.add(nbytes, _TIER["hot"])

    # ------------------------------------------------------------------ flusher

    def flush_round(self, entries: int, documents: int, lags_s: list[float], nbytes: int,
                    dead: int, outbox_length: int | None) -> None:
        """One flush round: ``entries`` taken, ``documents`` written, per-entry lags
        (seconds), record ``nbytes`` written to MongoDB, ``dead`` entries dead-lettered,
        the outbox length after the round (None when unknown)."""
        with self._lock:
            if outbox_length is not None:
                self.outbox_length = outbox_length
            if not entries:
                return
            f = self.flush
            f["batches"] += 1
            f["entries"] += entries
            f["documents"] += documents
            f["dead_letters"] += dead
            self.bytes_written["durable"] += nbytes
            _add(self.batch_sizes, entries)
            for lag in lags_s:
                _add(self.lags, lag)
        o = self._otel
        if o is not None:
            o.batch_size.record(entries)
            for lag in lags_s:
                o.lag.record(lag)
            if documents:
                o.documents.add(documents)
            if nbytes:
                o.bytes_written.add(nbytes, _TIER["durable"])
            if dead:
                o.errors.add(dead, _DEAD)

    def flush_failed(self) -> None:
        """A flush round failed and will be retried."""
        with self._lock:
            self.flush["retries"] += 1
        if self._otel is not None:
            self._otel.errors.add(1, _RETRY)

    def health(self, value: int) -> None:
        """Record the health verdict's value (0 ok, 1 degraded, 2 failing;
        ``inspection.health.Verdict.value``), observed by the ``langgraph_durable.health``
        gauge. Raises ``ValueError`` for another value."""
        if value not in (0, 1, 2):
            raise ValueError(f"a health value is 0, 1 or 2, got {value!r}")
        self.health_value = value

    # ------------------------------------------------------------------ reading

    def snapshot(self) -> dict[str, Any]:
        """Every number as plain data (what ``DurableSaver.stats()`` returns): the
        counters, ``bytes_written`` by tier (bytes), ``outbox_length`` (entries),
        ``model_calls`` (journaled model calls ``called`` and ``replayed``, and the
        replayed ones' ``tokens_saved``), ``flush`` (counts, ``batch_size`` and
        ``lag_s`` summaries) and ``op_duration_s`` (per ``tier.op``: count, sum and max
        in seconds)."""
        with self._lock:
            return {
                **self.counters,
                "bytes_written": dict(self.bytes_written),
                "outbox_length": self.outbox_length,
                "model_calls": dict(self.model_calls),
                "flush": {**self.flush, "batch_size": _summarize(self.batch_sizes),
                          "lag_s": _summarize(self.lags)},
                "op_duration_s": {k: _summarize(v) for k, v in sorted(self.durations.items())},
            }


def _add(s: list[float], value: float) -> None:
    s[0] += 1
    s[1] += value
    if value > s[2]:
        s[2] = value


_TIER = {t: {"tier": t} for t in ("hot", "durable", "miss")}
_RETRY = {"kind": "retry"}
_DEAD = {"kind": "dead_letter"}


def safe_error(exc: BaseException, limit: int = 300) -> str:
    """``Type: message`` of an error for logs, without stored values: MongoDB bulk-write
    errors are reduced to their error codes and document-encoding errors to their type
    (their messages can quote documents). At most ``limit`` characters."""
    name = type(exc).__name__
    if isinstance(exc, BulkWriteFailed):
        codes = sorted({e.code for e in exc.write_errors}, key=str)
        text = f"{name}: {len(exc.write_errors)} write errors, codes {codes}"
        concern = sorted({f"{e.code} {e.code_name}".strip() for e in exc.write_concern_errors})
        return text + (f"; write concern errors: {', '.join(concern)}" if concern else "")
    details = getattr(exc, "details", None)
    if name == "BulkWriteError" and isinstance(details, dict):
        codes = sorted({e.get("code") for e in details.get("writeErrors", [])}, key=str)
        text = f"{name}: {len(details.get('writeErrors', []))} write errors, codes {codes}"
        concern = sorted({f"{e.get('code')} {e.get('codeName', '')}".strip()
                          for e in details.get("writeConcernErrors", [])})
        return text + (f"; write concern errors: {', '.join(concern)}" if concern else "")
    if name in ("InvalidDocument", "DocumentTooLarge"):
        return f"{name} (document content not logged)"
    text = f"{name}: {exc}"
    return text if len(text) <= limit else text[: limit - 3] + "..."


def stats_dict(metrics: Metrics, flusher: Any, live: int | None) -> dict[str, Any]:
    """What ``DurableSaver.stats()`` returns: ``metrics.snapshot()`` with ``outbox_length``
    = ``live`` (read from Redis now; None when unknown) and ``flusher``: None without an
    in-process flusher, else its consumer name, rounds, entries, entries taken from flushers
    whose heartbeat lapsed (``reaped``), errors, last error, lag
    p50/max (seconds), the outbox length it saw after its last round
    (``outbox_length_seen``), the ``pid`` of the process it runs in (this one's, or the
    child's with ``flusher="process"``: None while a dead child waits for its restart; its
    counters are the child's, at most a second old) and ``restarts`` (children started
    again after one died)."""
    lags = sorted(flusher.lags_s) if flusher else []
    snapshot = metrics.snapshot()
    seen = snapshot.pop("outbox_length")
    return {
        **snapshot,
        "outbox_length": live,
        "flusher": None if flusher is None else {
            "consumer": flusher.consumer, "rounds": flusher.rounds,
            "entries": flusher.entries, "reaped": flusher.reaped,
            "errors": flusher.errors,
            "last_error": flusher.last_error,
            "lag_p50_s": lags[len(lags) // 2] if lags else None,
            "lag_max_s": lags[-1] if lags else None,
            "outbox_length_seen": seen,
            "pid": getattr(flusher, "pid", os.getpid()),
            "restarts": getattr(flusher, "restarts", 0),
        },
    }
