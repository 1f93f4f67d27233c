"""Crash and resume on real data: SIGKILL a LangGraph run mid-flight, resume it elsewhere.

Run from the repository root (either form works)::

    python -m examples.crash_demo            # resume from the Redis hot tier
    python -m examples.crash_demo --cold     # empty Redis first: resume from MongoDB
    python examples/crash_demo.py --step-s 0.1 --kill-after 5

What it does:

1. starts a Redis and a MongoDB-wire server (``langgraph_durable.testing``; ``REDIS_URL`` /
   ``MONGODB_URL`` are used instead when set);
2. runs the penguins agent (``examples/penguins_agent.py``) uninterrupted with
   ``InMemorySaver`` on thread "reference": the expected report;
3. runs the same agent with ``DurableSaver`` on thread "penguins-1" in a child process and
   kills it with SIGKILL: by default inside the ``report`` node, once the model-call
   journal holds ``--kill-after-calls`` (2) of that node's 3 model calls (the third is
   being made); with ``--kill-after N``, once the execution log shows N completed nodes
   and the next one running;
4. ``--cold`` only: a saver drains what the dead process left in the outbox to MongoDB
   (``flush()``), then the demo's Redis keys are deleted (its key prefix only: other keys
   on that Redis are never touched);
5. a fresh child process opens a new ``DurableSaver``, reads the thread's state
   (``last_read_tier`` tells which tier answered) and resumes with ``invoke(None, config)``;
6. prints what ran where and which model calls each process made (counted from the
   execution log: the scripted model logs each answer it gives, a replay from the journal
   is not a call), what the blob store holds and checks the result.

Every model call of the agent goes through ``journaled(...)`` (the model-call journal):
the resumed process re-executes the node the kill interrupted, gets the answers the killed
process had already paid for from the journal, and calls the model only for the rest.

The agent's last node e-mails the report (``effects.once``) to an SMTP sink the demo
starts itself (aiosmtpd, on a free loopback port); the demo counts the messages the sink
received and their distinct ``Message-ID``\ s: one ``Message-ID``, however the run was
killed and resumed (a kill between the SMTP send and its journal entry leaves the send in
doubt, and ``in_doubt="retry"`` sends again under the same ``Message-ID``, the effect's
idempotency key, which a receiving server deduplicates). ``--kill-after-mail`` kills the
first process as soon as the sink holds the message (the mail node is still running): the
resumed process re-runs that node, and ``once`` returns the journaled send instead of
sending again.

The agent keeps its loaded and cleaned tables in the state as pandas DataFrames, so every
saver (and the reference ``InMemorySaver``) uses ``ExternalRefSerializer``: the frames are
Parquet blobs in a ``LocalBlobStore`` in the work dir, or in a new S3 bucket when
``S3_ENDPOINT_URL`` is set; checkpoints in Redis and MongoDB hold small references. Both
child processes open the same store by name (``--blob-store``).

Exit code 0 only when all checks pass: the resumed report equals the reference report, the
message transcript equals the reference transcript, no node execution that was acknowledged
(its checkpoint or its task writes stored) before the kill ran again (the node that was
running at the kill re-runs, as it should), the resumed process made only the model calls
the killed one had not made (together they made exactly the calls of an uninterrupted run),
the resumed state came from the expected tier ("hot" by default, "durable" with
``--cold``), and the report was e-mailed once.
1 when a check fails, 2 when the demo could not run.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if __package__ in (None, ""):  # `python examples/crash_demo.py`: make `examples` importable
    sys.path.insert(0, str(ROOT))

from examples.blob_store import drop_bucket, open_blob_store, store_from_name  # noqa: E402
from examples.penguins_agent import (  # noqa: E402
    DEFAULT_STEP_S,
    ENV_LOG,
    ENV_STEP_S,
    build_agent,
    dataframe_serde,
    initial_input,
    read_log,
    real_model,
    render_report,
    transcript,
)

THREAD_ID = "penguins-1"
REFERENCE_THREAD_ID = "reference"


def _config(thread_id: str) -> dict[str, Any]:
    return {"configurable": {"thread_id": thread_id}}


def _saver_options(args: argparse.Namespace) -> dict[str, Any]:
    # claim_idle_s: a resuming process takes over the outbox entries the dead flusher had
    # read but not acknowledged after 1 s (instead of DurableConfig's default)
    return {"key_prefix": args.key_prefix, "database": args.database, "claim_idle_s": 1.0}


# =========================================================================== child side

def child_main(args: argparse.Namespace) -> int:
    from langgraph_durable import DurableSaver

    out: dict[str, Any] = {"pid": os.getpid()}
    config = _config(args.thread_id)
    began = time.perf_counter()
    serde = dataframe_serde(store_from_name(args.blob_store))
    with DurableSaver.from_urls(args.redis, args.mongo, serde=serde,
                                **_saver_options(args)) as saver:
        graph = build_agent(saver, smtp=args.smtp)
        out["open_s"] = time.perf_counter() - began
        if args.child == "run":
            graph.invoke(initial_input(), config, durability=args.durability)  # killed
            out["finished"] = True
        else:
            t0 = time.perf_counter()
            snap = graph.get_state(config)  # the first read of this process
            out["first_read_s"] = time.perf_counter() - t0
            out["tier"] = saver.last_read_tier
            if not snap.metadata:
                raise SystemExit(f"no checkpoint of thread {args.thread_id!r} was stored "
                                 f"before the kill (tier {saver.last_read_tier})")
            step = snap.metadata["step"]
            out["resumed"] = {
                "step": step, "next": [t.name for t in snap.tasks],
                "checkpoint_id": snap.config["configurable"].get("checkpoint_id"),
                "pending_done": [t.name for t in snap.tasks if t.result is not None],
            }
            # executions the store acknowledges: every task behind a later checkpoint, plus
            # tasks of the newest checkpoint whose writes are stored (LangGraph skips them)
            acked = [[t.name, step + 1] for t in snap.tasks if t.result is not None]
            for past in graph.get_state_history(config):
                k = past.metadata["step"]
                if k < step:
                    acked += [[name, k + 1] for name in past.next if name != "__start__"]
            out["acknowledged"] = sorted(acked, key=lambda a: a[1])
            t0 = time.perf_counter()
            final = graph.invoke(None, config, durability=args.durability)
            out["resume_run_s"] = time.perf_counter() - t0
            out["report"] = final.get("report")
            out["mailed"] = final.get("mailed")
            out["transcript"] = transcript(final.get("messages", []))
            out["stats"] = saver.stats()
        t_close = time.perf_counter()
    out["close_s"] = time.perf_counter() - t_close  # drains the outbox to MongoDB
    if args.out:
        Path(args.out).write_text(json.dumps(out, default=str))
    return 0


# =========================================================================== parent side

def _spawn(mode: str, args: argparse.Namespace, work: Path, urls: tuple[str, str]) -> Any:
    argv = [sys.executable, str(Path(__file__).resolve()), "--child", mode,
            "--redis", urls[0], "--mongo", urls[1], "--thread-id", THREAD_ID,
            "--key-prefix", args.key_prefix, "--database", args.database,
            "--durability", args.durability, "--out", str(work / f"{mode}.json"),
            "--blob-store", args.blob_store, "--smtp", args.smtp]
    env = {**os.environ, ENV_LOG: str(work / "executions.jsonl"), ENV_STEP_S: str(args.step_s)}
    with open(work / f"{mode}.stderr", "wb") as err:  # the child keeps its own descriptor
        proc = subprocess.Popen(argv, cwd=str(ROOT), env=env, stdin=subprocess.DEVNULL,
                                stdout=err, stderr=subprocess.STDOUT)
    proc.stderr_path = work / f"{mode}.stderr"  # type: ignore[attr-defined]
    return proc


def _tail(path: Path, chars: int = 2500) -> str:
    with contextlib.suppress(OSError):
        return path.read_text(errors="replace")[-chars:]
    return "(no output)"


class DemoError(RuntimeError):
    pass


class MailSink:
    """An SMTP server (aiosmtpd, in a thread of this process) that keeps the ``Message-ID``
    of every message it receives."""

    def __init__(self) -> None:
        import socket

        from aiosmtpd.controller import Controller

        self.message_ids: list[str] = []
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        sink = self

        class Handler:
            async def handle_DATA(self, server: Any, session: Any, envelope: Any) -> str:  # noqa: N802
                from email import message_from_bytes

                msg = message_from_bytes(envelope.content)
                sink.message_ids.append(str(msg["Message-ID"]))
                return "250 OK"

        self.controller = Controller(Handler(), hostname="127.0.0.1", port=port)
        self.address = f"127.0.0.1:{port}"

    def __enter__(self) -> MailSink:
        self.controller.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.controller.stop()


def _kill_after_mail(proc: Any, sink: MailSink, timeout_s: float) -> dict[str, Any]:
    """SIGKILL ``proc`` as soon as ``sink`` received a message (the mail node is still
    running: it waits a step after the send)."""
    deadline = time.monotonic() + timeout_s
    while not sink.message_ids:
        if proc.poll() is not None:
            raise DemoError(f"the first child exited (code {proc.returncode}) before it "
                            f"sent the e-mail:\n{_tail(proc.stderr_path)}")
        if time.monotonic() > deadline:
            proc.kill()
            raise DemoError(f"no e-mail within {timeout_s} s:\n{_tail(proc.stderr_path)}")
        time.sleep(0.005)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    return {"killed_at": time.time(), "returncode": proc.returncode}


def _kill_mid_node(proc: Any, log_path: Path, kill_after: int, delay_s: float,
                   timeout_s: float, stored_step: Any = None) -> dict[str, Any]:
    """Wait until ``proc`` logged ``kill_after`` completed nodes and started the next one,
    and (``stored_step``: a callable giving the step of the thread's latest stored
    checkpoint) until the checkpoint of that many steps is stored: with LangGraph's default
    ``durability="async"`` it is written while the next node already runs, so a loaded
    machine could otherwise kill before it. Then wait ``delay_s`` more (into that node),
    SIGKILL it. Returns what was seen."""
    deadline = time.monotonic() + timeout_s
    while True:
        events = [e for e in read_log(log_path) if e["pid"] == proc.pid]
        ends = [e for e in events if e["event"] == "end"]
        starts = [e for e in events if e["event"] == "start"]
        if len(ends) >= kill_after and len(starts) > kill_after and (
                stored_step is None or stored_step() >= kill_after):
            break
        if proc.poll() is not None:
            raise DemoError(f"the first child exited (code {proc.returncode}) before the "
                            f"kill point:\n{_tail(proc.stderr_path)}")
        if time.monotonic() > deadline:
            proc.kill()
            raise DemoError(f"no kill point within {timeout_s} s:\n{_tail(proc.stderr_path)}")
        time.sleep(0.005)
    time.sleep(delay_s)
    if proc.poll() is not None:
        raise DemoError("the first child finished before it could be killed; use a larger "
                        "--step-s or a smaller --kill-after")
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    return {"killed_at": time.time(), "returncode": proc.returncode}


def _kill_after_calls(proc: Any, watcher: Any, calls: int, timeout_s: float
                      ) -> dict[str, Any]:
    """Wait until the model-call journal of thread ``THREAD_ID`` (read through
    ``watcher``, a saver, decoding strictly; ``inspection.effect_view.thread_effects``, as
    ``langgraph-durable show`` reads it) holds ``calls`` answered calls of the ``report``
    node, then SIGKILL ``proc`` at once: it is inside the node's next call (the scripted
    model takes ``--step-s``/2 a call)."""
    from langgraph_durable.inspection.effect_view import thread_effects
    from langgraph_durable.inspection.strict import strict_view

    reader = strict_view(watcher)  # decodes as the operator's tools do: runs no stored data
    deadline = time.monotonic() + timeout_s
    while True:
        rows, _ = thread_effects(reader, THREAD_ID)
        done = [r for r in rows if r["kind"] == "model_call" and r["state"] == "done"
                and r["task_ns"].split(":", 1)[0] == "report"]
        if len(done) >= calls:
            break
        if proc.poll() is not None:
            raise DemoError(f"the first child exited (code {proc.returncode}) before its "
                            f"report node journaled {calls} model calls:\n"
                            f"{_tail(proc.stderr_path)}")
        if time.monotonic() > deadline:
            proc.kill()
            raise DemoError(f"no kill point within {timeout_s} s:\n{_tail(proc.stderr_path)}")
        time.sleep(0.005)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    return {"killed_at": time.time(), "returncode": proc.returncode}


def _empty_hot_tier(args: argparse.Namespace, urls: tuple[str, str], owned: bool
                    ) -> dict[str, Any]:
    """--cold: drain the dead process's outbox into MongoDB, then empty Redis."""
    import pymongo
    import redis

    from langgraph_durable import DurableSaver

    t0 = time.perf_counter()
    serde = dataframe_serde(store_from_name(args.blob_store))
    with DurableSaver.from_urls(*urls, serde=serde, **_saver_options(args)) as saver:
        saver.flush(timeout_s=60)
    drain_s = time.perf_counter() - t0
    with redis.Redis.from_url(urls[0]) as r:
        # only this demo's keys, even on a server the demo started itself
        keys = list(r.scan_iter(match="{" + args.key_prefix + ":*", count=1000))
        if keys:
            r.delete(*keys)
        how = f"deleted {len(keys)} demo keys"
        left = len(list(r.scan_iter(match="{" + args.key_prefix + ":*"))) if owned else None
    with pymongo.MongoClient(urls[1]) as m:
        n = m[args.database]["checkpoints"].count_documents({"thread_id": THREAD_ID})
    return {"drain_s": drain_s, "how": how, "redis_keys_left": left, "mongo_checkpoints": n}


def _reference(work: Path) -> tuple[dict[str, Any], list[Any], float, list[tuple[Any, ...]]]:
    """The uninterrupted run (``InMemorySaver``, no journal): its report, transcript,
    duration and model calls (``_model_calls``)."""
    from langgraph.checkpoint.memory import InMemorySaver

    from langgraph_durable.serde import LocalBlobStore

    t0 = time.perf_counter()
    serde = dataframe_serde(LocalBlobStore(work / "reference-blobs"))
    log_path = work / "reference.jsonl"
    graph = build_agent(InMemorySaver(serde=serde), step_s=0, log_path=log_path)
    final = graph.invoke(initial_input(), _config(REFERENCE_THREAD_ID))
    calls = _model_calls(read_log(log_path), os.getpid())
    return final["report"], transcript(final["messages"]), time.perf_counter() - t0, calls


def _model_calls(events: list[dict[str, Any]], pid: int) -> list[tuple[Any, ...]]:
    """The model calls process ``pid`` made (answers the scripted model gave; a replay
    from the journal is none): ``(step, node, call number in the node)``, in order."""
    return sorted((e["step"], e["node"], e.get("call", 0)) for e in events
                  if e["event"] == "model" and e["pid"] == pid)


def _fmt_calls(calls: list[tuple[Any, ...]]) -> str:
    return ", ".join(f"{n}@{s}#{c}" for s, n, c in calls) or "none"


def _executions(events: list[dict[str, Any]], pids: dict[int, str]) -> list[dict[str, Any]]:
    """One row per (step, node): what each process did with it."""
    rows: dict[tuple[int, str], dict[str, Any]] = {}
    for e in events:
        who = pids.get(e["pid"])
        if who is None or e["event"] not in ("start", "end"):
            continue
        row = rows.setdefault((e["step"], e["node"]), {"step": e["step"], "node": e["node"],
                                                       "first": "", "second": ""})
        if e["event"] == "start" and not row[who]:
            row[who] = "started"
        elif e["event"] == "end":
            row[who] = "completed"
    return [rows[k] for k in sorted(rows)]


def _table(rows: list[dict[str, Any]], acked: set[tuple[str, int]]) -> str:
    head = f"{'step':>4}  {'node':<8}  {'1st process (killed)':<22}  {'2nd process (resumed)':<22}"
    lines = [head, "-" * len(head)]
    for r in rows:
        first = {"started": "interrupted (kill)", "completed": "completed"}.get(r["first"], "-")
        if r["first"] == "completed" and (r["node"], r["step"]) in acked:
            first = "completed + acked"
        second = {"started": "started (killed?)", "completed": "ran"}.get(r["second"], "")
        if not second:
            second = "not re-run" if r["first"] else "-"
        elif r["first"]:
            second = "RE-RUN" if (r["node"], r["step"]) in acked else "re-ran (in flight)"
        lines.append(f"{r['step']:>4}  {r['node']:<8}  {first:<22}  {second:<22}")
    return "\n".join(lines)


def _blob_inventory(args: argparse.Namespace, urls: tuple[str, str]) -> dict[str, Any]:
    """What the blob store holds after the run, and which of it the saver references."""
    from langgraph_durable import DurableSaver, referenced_blob_keys

    store = store_from_name(args.blob_store)
    objects = sorted((i.key, i.size) for i in store.list_keys())
    with DurableSaver.from_urls(*urls, serde=dataframe_serde(store),
                                **_saver_options(args)) as saver:
        referenced = referenced_blob_keys(saver)
    return {"objects": objects, "referenced": sorted(referenced)}


def parent_main(args: argparse.Namespace) -> int:
    from langgraph_durable import DurableSaver
    from langgraph_durable.testing import mongo_server, redis_server

    timings: dict[str, float] = {}
    work = Path(tempfile.mkdtemp(prefix="lgd-crash-demo-"))
    log_path = work / "executions.jsonl"
    tag = uuid.uuid4().hex[:8]
    args.key_prefix, args.database = f"demo{tag}", f"penguins_demo_{tag}"
    mode = "cold (Redis emptied, resume from MongoDB)" if args.cold else "hot (resume from Redis)"
    kill_at = ("the report's e-mail" if args.kill_after_mail else
               f"{args.kill_after} completed nodes" if args.kill_after is not None else
               f"{args.kill_after_calls} of the report node's 3 model calls")
    print(f"crash demo: {mode}; step delay {args.step_s} s; kill after {kill_at}; "
          f"durability={args.durability}; work dir {work}", flush=True)
    t0 = time.perf_counter()
    store, where = open_blob_store(work / "blobs", bucket=f"lgd-demo-{tag}")
    args.blob_store = store.name
    with redis_server() as rs, mongo_server() as ms, MailSink() as sink:
        args.smtp = sink.address
        urls = (rs.url, ms.url)
        owned = not rs.external
        timings["servers start"] = time.perf_counter() - t0
        print(f"servers: redis {rs.url}  mongodb {ms.url}", flush=True)
        print(f"blob store: {where}", flush=True)

        ref_report, ref_transcript, timings["reference run (InMemorySaver)"], ref_calls = \
            _reference(work)
        print(f"reference report digest {ref_report['digest']}", flush=True)

        t0 = time.perf_counter()
        first = _spawn("run", args, work, urls)
        with DurableSaver.from_urls(*urls, serde=dataframe_serde(store_from_name(
                args.blob_store)), **{**_saver_options(args), "flusher": "off"}) as watcher:
            def stored_step() -> int:
                tup = watcher.get_tuple(_config(THREAD_ID))
                return int(tup.metadata.get("step", -1)) if tup else -1

            if args.kill_after_mail:
                kill = _kill_after_mail(first, sink, args.timeout_s)
            elif args.kill_after is None:
                kill = _kill_after_calls(first, watcher, args.kill_after_calls,
                                         args.timeout_s)
            else:
                kill = _kill_mid_node(first, log_path, args.kill_after, args.step_s / 2,
                                      timeout_s=args.timeout_s, stored_step=stored_step)
            mails_at_kill = len(sink.message_ids)
        timings["1st process: start -> SIGKILL"] = time.perf_counter() - t0
        print(f"killed pid {first.pid} with SIGKILL (exit code {kill['returncode']})",
              flush=True)

        cold: dict[str, Any] | None = None
        if args.cold:
            cold = _empty_hot_tier(args, urls, owned)
            timings["cold: drain outbox + empty Redis"] = cold["drain_s"]
            left = "" if cold["redis_keys_left"] is None else \
                f"; {cold['redis_keys_left']} keys left"
            print(f"cold: outbox drained to MongoDB ({cold['mongo_checkpoints']} checkpoints "
                  f"of the thread there), Redis emptied ({cold['how']}{left})", flush=True)

        t0 = time.perf_counter()
        second = _spawn("resume", args, work, urls)
        try:
            second.wait(timeout=args.timeout_s)
        except subprocess.TimeoutExpired:
            second.kill()
            second.wait()
            raise DemoError(f"the resumed run took over {args.timeout_s} s:\n"
                            f"{_tail(second.stderr_path)}") from None
        timings["2nd process: start -> exit"] = time.perf_counter() - t0
        if second.returncode != 0:
            raise DemoError(f"the resumed run failed (exit code {second.returncode}):\n"
                            f"{_tail(second.stderr_path)}")
        res = json.loads((work / "resume.json").read_text())
        timings["2nd process: first get_state"] = res["first_read_s"]
        timings["2nd process: invoke(None) to the end"] = res["resume_run_s"]
        timings["2nd process: close (outbox drained)"] = res["close_s"]
        blobs = _blob_inventory(args, urls)
        mails = list(sink.message_ids)

        if not owned:  # external servers: remove what the demo stored
            import pymongo
            import redis
            with redis.Redis.from_url(urls[0]) as r:
                keys = list(r.scan_iter(match="{" + args.key_prefix + ":*", count=1000))
                if keys:
                    r.delete(*keys)
            with pymongo.MongoClient(urls[1]) as m:
                m.drop_database(args.database)

    # ------------------------------------------------------------------ analysis
    events = read_log(log_path)
    pids = {first.pid: "first", res["pid"]: "second"}
    rows = _executions(events, pids)
    acked = {(n, s) for n, s in res["acknowledged"]}
    ran_first = [(r["step"], r["node"]) for r in rows if r["first"] == "completed"]
    interrupted = [(r["step"], r["node"]) for r in rows if r["first"] == "started"]
    ran_second = {(r["step"], r["node"]) for r in rows if r["second"]}
    not_rerun = [x for x in ran_first if x not in ran_second]
    reran_acked = [x for x in ran_first + interrupted if x in ran_second and (x[1], x[0]) in acked]
    reran_unacked = [x for x in ran_first if x in ran_second and (x[1], x[0]) not in acked]
    resumed = res["resumed"]
    calls_first, calls_second = _model_calls(events, first.pid), _model_calls(events, res["pid"])
    paid_twice = sorted(set(calls_first) & set(calls_second))
    expected_tier = "durable" if args.cold else "hot"
    checks = {
        "DataFrames stored in the blob store": bool(blobs["referenced"]) and all(
            key.endswith(".parquet") for key in blobs["referenced"]),
        "final report equals the reference": res["report"] == ref_report,
        "message transcript equals the reference": res["transcript"] == ref_transcript,
        "no acknowledged node re-ran": not reran_acked,
        "the resumed process made only the calls the killed one had not made":
            not paid_twice and sorted(calls_first + calls_second) == ref_calls,
        f"resumed state served by the {expected_tier} tier": res["tier"] == expected_tier,
        # a kill between the SMTP send and its journal entry leaves the send in doubt:
        # in_doubt="retry" sends again under the same Message-ID (the idempotency key),
        # which a receiving server deduplicates; one distinct Message-ID is one e-mail
        "the report was e-mailed once": len(set(mails)) == 1 and res["mailed"] is not None
        and res["mailed"]["message_id"] == mails[0],
    }
    if args.durability == "sync":  # each step's writes are stored before the next step starts
        checks["every completed node was acknowledged (sync)"] = not reran_unacked and all(
            (n, s) in acked for s, n in ran_first)

    def fmt(xs: list[tuple[int, str]]) -> str:
        return ", ".join(f"{n}@{s}" for s, n in xs) or "none"

    print()
    print("=" * 72)
    print(f"CRASH & RESUME REPORT ({'cold' if args.cold else 'hot'})")
    print("=" * 72)
    print(_table(rows, acked))
    print()
    pend = f"\n                         + stored writes of {', '.join(resumed['pending_done'])}" \
        if resumed["pending_done"] else ""
    print(f"resumed from:            step {resumed['step']} (next: "
          f"{', '.join(resumed['next']) or 'END'}; checkpoint {resumed['checkpoint_id']})"
          f"{pend}")
    tier_name = {"hot": "Redis hot tier", "durable": "MongoDB durable tier"}.get(res["tier"], "")
    print(f"state served by:         {res['tier']} ({tier_name})")
    print(f"1st process (pid {first.pid}) completed {len(ran_first)}: {fmt(ran_first)}")
    print(f"  interrupted by the kill: {fmt(interrupted)}")
    print(f"2nd process (pid {res['pid']}) ran {len(ran_second)}: {fmt(sorted(ran_second))}")
    print(f"completed nodes not re-run: {len(not_rerun)} of {len(ran_first)}")
    print(f"re-run of acknowledged nodes: {len(reran_acked)}"
          + (f" ({fmt(reran_acked)})" if reran_acked else ""))
    if reran_unacked:
        print(f"re-run, completed but not yet acknowledged at the kill: {fmt(reran_unacked)}")
    journal = res["stats"].get("model_calls", {})
    in_node = [c for c in calls_first if c[:2] in {(s, n) for s, n in interrupted}]
    print(f"model calls (answers the model gave; a replay from the journal is not a call), "
          f"{len(ref_calls)} in an uninterrupted run:")
    print(f"  1st process made {len(calls_first)}: {_fmt_calls(calls_first)}")
    if interrupted:
        print(f"    of them in the node the kill interrupted: {len(in_node)}")
    print(f"  2nd process made {len(calls_second)}: {_fmt_calls(calls_second)}; replayed "
          f"{journal.get('replayed', 0)} from the journal "
          f"({journal.get('tokens_saved', 0)} tokens not spent again)")
    print(f"  made by both processes (paid twice): {len(paid_twice)}"
          + (f" ({_fmt_calls(paid_twice)})" if paid_twice else ""))
    print(f"final report digest:     {res['report']['digest'] if res['report'] else None} "
          f"(reference {ref_report['digest']})")
    print("reads by tier in the 2nd process: "
          f"hot {res['stats'].get('reads_hot', 0)}, durable "
          f"{res['stats'].get('reads_durable', 0)}, miss {res['stats'].get('reads_miss', 0)}")
    print(f"e-mail (SMTP sink {args.smtp}): {len(mails)} message(s) received, "
          f"{len(set(mails))} distinct Message-ID; {mails_at_kill} before the kill")
    total = sum(size for _, size in blobs["objects"])
    print(f"blob store {args.blob_store}: {len(blobs['objects'])} objects, {total:,} bytes "
          f"({len(blobs['referenced'])} referenced by the thread's checkpoints)")
    for key, size in blobs["objects"]:
        mark = "referenced" if key in blobs["referenced"] else "unreferenced"
        print(f"  {key}  {size:>9,} B  {mark}")
    print()
    print("final report:")
    print("  " + render_report(res["report"]).replace("\n", "\n  ") if res["report"] else "  -")
    print()
    print("timings:")
    for k, v in timings.items():
        print(f"  {k:<40} {v:7.3f} s")
    print()
    width = max(48, *(len(k) for k in checks))
    for k, ok in checks.items():
        print(f"check: {k:<{width}} {'yes' if ok else 'NO'}")
    passed = all(checks.values())
    print(f"RESULT: {'PASS' if passed else 'FAIL'}")
    if passed and not args.keep:
        drop_bucket(store)
    if passed and not args.keep:
        shutil.rmtree(work, ignore_errors=True)
    else:
        print(f"execution log and child outputs kept in {work}")
    return 0 if passed else 1


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--cold", action="store_true",
                   help="empty Redis after the kill so the state comes from MongoDB")
    p.add_argument("--step-s", type=float,
                   default=float(os.environ.get(ENV_STEP_S, DEFAULT_STEP_S)),
                   help=f"seconds each node sleeps (default ${ENV_STEP_S} or {DEFAULT_STEP_S})")
    p.add_argument("--kill-after-calls", type=int, default=None,
                   help="kill the first process inside the report node once N of its 3 "
                   "model calls are journaled (1-2; the default, with N=2, unless "
                   "--kill-after or --kill-after-mail is given)")
    p.add_argument("--kill-after", type=int, default=None,
                   help="kill after this many completed nodes instead (1-9), mid-node")
    p.add_argument("--kill-after-mail", action="store_true",
                   help="kill the first process as soon as the report's e-mail arrived (in "
                   "the mail node) instead of after --kill-after nodes")
    p.add_argument("--durability", choices=["sync", "async"], default="async",
                   help="LangGraph durability mode of both runs (default async: a step's "
                   "checkpoint is saved while the next step runs)")
    p.add_argument("--timeout-s", type=float, default=120.0, help="limit for each child")
    p.add_argument("--keep", action="store_true",
                   help="keep the work dir (execution log, child outputs) after a pass")
    p.add_argument("--child", choices=["run", "resume"], help=argparse.SUPPRESS)
    for flag in ("--redis", "--mongo", "--thread-id", "--key-prefix", "--database", "--out",
                 "--blob-store", "--smtp"):
        p.add_argument(flag, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.child:
        return child_main(args)
    if sum(x is not None and x is not False for x in
           (args.kill_after, args.kill_after_calls, args.kill_after_mail or None)) > 1:
        p.error("give one of --kill-after, --kill-after-calls and --kill-after-mail")
    if args.kill_after is not None and not 1 <= args.kill_after <= 9:
        p.error("--kill-after must be between 1 and 9 (the agent runs 11 nodes, the last "
                "one mails the report)")
    if args.kill_after_calls is None:
        args.kill_after_calls = 2
    elif not 1 <= args.kill_after_calls <= 2:
        p.error("--kill-after-calls must be 1 or 2 (the report node makes 3 model calls)")
    try:
        real_model()  # fail early, with a clear message, on a bad LANGGRAPH_DURABLE_DEMO_MODEL
        return parent_main(args)
    except (DemoError, RuntimeError) as exc:
        print(f"demo could not run: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
