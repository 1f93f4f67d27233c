"""Writes notebooks/operations.ipynb from the cell sources below.

Run it after editing the cells: ``.venv/bin/python scripts/nb_operations.py``.
tests/test_notebooks.py executes the written notebook top to bottom against real servers.
"""

from __future__ import annotations

from nbkit import SERVERS, cli_helper, write

NAME = "operations"

CELLS = [
    ("md", """# Operations: status, metrics, a backlog and its drain

An application writes checkpoints while **no flusher runs** (think: the flusher workers are
down, or MongoDB is): the outbox grows. `langgraph-durable status` shows the backlog; then
a flusher starts and drains it while the application keeps writing. OpenTelemetry metrics
(read here with the SDK's `InMemoryMetricReader`; in production an OTLP or Prometheus
exporter) and `DurableSaver.stats()` give the same numbers: calls, bytes per tier,
round-trip times, flush batch sizes and put -> MongoDB lag.

The servers come from `langgraph_durable.testing`: `REDIS_URL` / `MONGODB_URL` when set,
otherwise local `redis-server` and SecantusDB processes on free ports."""),
    ("code", """%matplotlib inline
import os, subprocess, sys, threading, time, uuid
from contextlib import ExitStack

from langgraph_durable.testing import mongo_server, redis_server

""" + SERVERS + """
options = {"key_prefix": "nbops" + uuid.uuid4().hex[:6],
           "database": "nb_operations_" + uuid.uuid4().hex[:6]}
""" + cli_helper(110)),
    ("md", """## Metrics: an OpenTelemetry SDK with an in-memory reader

Without an SDK the instruments are no-ops (and without `opentelemetry-api` installed the
saver keeps only `stats()`). Pass `meter_provider=` or configure the global one."""),
    ("code", """from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader

from langgraph_durable import INSTRUMENTS

reader = InMemoryMetricReader()
provider = MeterProvider(metric_readers=[reader])
for name, (kind, unit, description) in INSTRUMENTS.items():
    print(f"{name:36} {kind:9} {unit:10} {description[:60]}")"""),
    ("md", """## A workload, and a backlog

Four application threads run a small graph in a loop (about 40 runs a second each) for
5 s through a saver with `flusher="off"`. A sampler records the outbox length and the age of
its oldest entry (what has not reached MongoDB yet) every 50 ms. After 1.5 s a second saver
(another process, in real life) starts its flusher."""),
    ("code", """import operator
from typing import Annotated, TypedDict

import redis
from langgraph.graph import END, START, StateGraph

from langgraph_durable import DurableSaver


class Counter(TypedDict):
    n: int
    seen: Annotated[list, operator.add]


builder = StateGraph(Counter)
builder.add_node("step", lambda s: {"n": s["n"] + 1, "seen": [s["n"]]})
builder.add_edge(START, "step")
builder.add_edge("step", END)

app = DurableSaver.from_urls(redis_srv.url, mongo_srv.url, flusher="off",
                             meter_provider=provider, **options)
app.setup()
graph = builder.compile(checkpointer=app)
stop, samples, began = threading.Event(), [], time.monotonic()
probe = redis.Redis.from_url(redis_srv.url)


def work(i):
    config = {"configurable": {"thread_id": f"user-{i}"}}
    while not stop.is_set():
        graph.invoke({"n": 0, "seen": []}, config)
        time.sleep(0.02)


def sample():
    while not stop.is_set() or probe.xlen(app.context.outbox):
        oldest = probe.xrange(app.context.outbox, count=1)
        age = time.time() - int(oldest[0][0].split(b"-")[0]) / 1000 if oldest else 0.0
        samples.append((time.monotonic() - began, probe.xlen(app.context.outbox), age))
        time.sleep(0.05)
    samples.append((time.monotonic() - began, 0, 0.0))


workers = [threading.Thread(target=work, args=(i,)) for i in range(4)]
sampler = threading.Thread(target=sample)
for t in [*workers, sampler]:
    t.start()
time.sleep(1.5)
print(f"after 1.5 s: {probe.xlen(app.context.outbox)} outbox entries, nothing flushed yet")"""),
    ("md", """Start a flusher (here a second saver with the default `flusher="auto"`;
`langgraph-durable flusher` runs the same loop as a worker process), and look at `status`
while it catches up: the backlog, the age of its oldest entry, the new consumer."""),
    ("code", """flusher_started = time.monotonic() - began
drainer = DurableSaver.from_urls(redis_srv.url, mongo_srv.url, meter_provider=provider,
                                 **options)
drainer.setup()  # its flusher thread starts with the first call
cli("status");"""),
    ("md", "The application stops at 5 s; then everything is flushed:"),
    ("code", """time.sleep(max(0.0, 5.0 - (time.monotonic() - began)))
stop.set()
for t in workers:
    t.join()
drainer.flush(timeout_s=120)
sampler.join()
print(f"drained: {probe.xlen(app.context.outbox)} entries left")
cli("status");"""),
    ("md", """## Outbox length and lag over time

Left: entries waiting for MongoDB. Right: the age of the oldest of them, i.e. how far
MongoDB is behind (`status` shows it as "oldest unflushed entry"; the flusher's
`langgraph_durable.flush.lag` histogram measures it per entry when it lands)."""),
    ("code", """import matplotlib.pyplot as plt

data = reader.get_metrics_data()
metrics = {m.name: m for rm in data.resource_metrics for sm in rm.scope_metrics
           for m in sm.metrics}
lag = metrics["langgraph_durable.flush.lag"].data.data_points[0]

fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 3.6))
times = [t for t, _, _ in samples]
ax1.plot(times, [n for _, n, _ in samples], color="tab:blue")
ax2.plot(times, [age for _, _, age in samples], color="tab:orange")
for ax in (ax1, ax2):
    ax.axvline(flusher_started, color="tab:green", linestyle="--", label="flusher starts")
    ax.axvline(5.0, color="gray", linestyle=":", label="application stops")
    ax.set_xlabel("seconds")
    ax.legend(fontsize=8)
ax1.set_ylabel("outbox entries")
ax1.set_title("outbox length")
ax2.set_ylabel("seconds")
ax2.set_title("age of the oldest unflushed entry")
plt.tight_layout()
plt.show()
buckets = [f"<={b:g} s: {c}" for b, c in zip(lag.explicit_bounds, lag.bucket_counts) if c]
print(f"flush.lag histogram ({lag.count} entries, max {lag.max:.2f} s):", ", ".join(buckets))"""),
    ("md", "## The same numbers: OpenTelemetry and `stats()`"),
    ("code", """def total(name, **attrs):
    points = [p for p in metrics[name].data.data_points
              if all(p.attributes.get(k) == v for k, v in attrs.items())]
    return sum(getattr(p, "value", None) or getattr(p, "count", 0) for p in points)

a, d = app.stats(), drainer.stats()
rows = [
    ("puts", total("langgraph_durable.puts"), a["puts"] + d["puts"]),
    ("put_writes", total("langgraph_durable.put_writes"), a["put_writes"] + d["put_writes"]),
    ("bytes written to Redis", total("langgraph_durable.bytes_written", tier="hot"),
     a["bytes_written"]["hot"] + d["bytes_written"]["hot"]),
    ("bytes written to MongoDB", total("langgraph_durable.bytes_written", tier="durable"),
     a["bytes_written"]["durable"] + d["bytes_written"]["durable"]),
    ("entries flushed", lag.count, a["flush"]["entries"] + d["flush"]["entries"]),
    ("flush batches", total("langgraph_durable.flush.batch_size"),
     a["flush"]["batches"] + d["flush"]["batches"]),
    ("put round trips", total("langgraph_durable.op.duration", op="put"),
     a["op_duration_s"]["hot.put"]["count"]),
]
print(f"{'':26}{'OpenTelemetry':>15}{'stats()':>12}")
for label, otel, plain in rows:
    print(f"{label:26}{otel:>15}{plain:>12}")
    assert otel == plain, label
put = a["op_duration_s"]["hot.put"]
print(f"mean put round trip: {1000 * put['sum'] / put['count']:.2f} ms (max "
      f"{1000 * put['max']:.1f} ms); max flush lag {d['flush']['lag_s']['max']:.2f} s; "
      f"largest batch {d['flush']['batch_size']['max']:.0f} entries")"""),
    ("code", """app.close()
drainer.close()
probe.close()
cli("delete", *[f"user-{i}" for i in range(4)], "--yes")
from langgraph_durable.testing import drop_namespace

drop_namespace(redis_srv.url, mongo_srv.url, options["key_prefix"], options["database"])
servers.close()"""),
]




if __name__ == "__main__":
    print(write(NAME, CELLS))
