"""End to end: the crash demo (examples/crash_demo.py) kills a run and resumes it.

Each test runs the demo as a subprocess, the way a user does, with its own real Redis and
MongoDB-wire servers (or REDIS_URL / MONGODB_URL when set), and checks its exit code and
the key lines of its report. The agent keeps its tables in the state as DataFrames, stored by
ExternalRefSerializer in a local folder (hot test) or in S3 (cold test, the session's moto
server through S3_ENDPOINT_URL). Every model call is journaled: the report counts the calls
each process made, and the two together must make those of an uninterrupted run, none
twice.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DEMO = ROOT / "examples" / "crash_demo.py"


def run_demo(*flags: str, s3_endpoint_url: str | None = None) -> str:
    env = {k: v for k, v in os.environ.items()
           if k not in ("LANGGRAPH_DURABLE_DEMO_MODEL", "S3_ENDPOINT_URL")}
    if s3_endpoint_url:
        env["S3_ENDPOINT_URL"] = s3_endpoint_url
    proc = subprocess.run([sys.executable, str(DEMO), *flags], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=180)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, f"demo exited with {proc.returncode}:\n{out}"
    return out


def line(out: str, start: str) -> str:
    found = [x for x in out.splitlines() if x.startswith(start)]
    assert found, f"no line starting with {start!r} in:\n{out}"
    return found[0]


def check_common(out: str, *, tier: str) -> None:
    assert "RESULT: PASS" in out
    # the last node e-mailed the report to the demo's SMTP sink, once
    assert re.search(r"\ne-mail \(SMTP sink 127\.0\.0\.1:\d+\): 1 message\(s\) received, 1 "
                     r"distinct Message-ID; 0 before the kill", out), out
    assert re.search(r"check: the report was e-mailed once +yes", out), out
    for check in ("final report equals the reference", "message transcript equals the reference",
                  "no acknowledged node re-ran", f"resumed state served by the {tier} tier"):
        assert re.search(rf"check: {check} +yes", out), out
    assert line(out, "re-run of acknowledged nodes:").endswith(": 0")
    # every model call goes through journaled(...): the two processes together made the
    # calls of an uninterrupted run, none twice
    assert re.search(r"check: the resumed process made only the calls the killed one had "
                     r"not made +yes", out), out
    assert line(out, "  made by both processes (paid twice):").endswith(": 0")
    total = int(re.search(r"(\d+) in an uninterrupted run:", out)[1])
    first = int(re.search(r"\n  1st process made (\d+): ", out)[1])
    second = int(re.search(r"\n  2nd process made (\d+): ", out)[1])
    assert total == 8 and first + second == total, out
    assert line(out, "state served by:").split()[3] == tier
    digests = re.search(r"final report digest: +(\w+) \(reference (\w+)\)", out)
    assert digests and digests[1] == digests[2], out
    done, total = re.search(r"completed nodes not re-run: (\d+) of (\d+)", out).groups()
    # with durability="async" a node that completed just before the kill may not have its
    # checkpoint stored yet: it re-runs, as it should (the demo kills only once the first
    # three nodes' checkpoint is stored)
    unacked = re.search(r"re-run, completed but not yet acknowledged at the kill: (.+)", out)
    n_unacked = len(unacked[1].split(", ")) if unacked else 0
    assert int(done) + n_unacked == int(total) and int(done) >= 3, out
    # the table: the completed nodes of the first process were not re-run by the second
    assert re.search(r"\n +1  plan +completed \+ acked +not re-run", out), out
    assert "RE-RUN" not in out
    # the loaded and the cleaned DataFrames: two Parquet blobs, both referenced
    assert re.search(r"check: DataFrames stored in the blob store +yes", out), out
    assert re.search(r"\nblob store \S+: 2 objects, [\d,]+ bytes \(2 referenced", out), out
    listed = re.findall(r"\n  ([0-9a-f]{64}\.parquet) +([\d,]+) B  referenced", out)
    assert len(listed) == 2 and all(int(size.replace(",", "")) > 1000 for _, size in listed)


def test_crash_and_resume_from_redis_mid_node_between_model_calls() -> None:
    """The default kill: inside the report node, once 2 of its 3 model calls are
    journaled; the resumed process re-runs the node, replays those two and makes the
    third (on a machine slow enough that the third was journaled before the signal
    landed, it replays three and makes none: still no call paid twice)."""
    out = run_demo("--step-s", "0.2")
    check_common(out, tier="hot")
    assert "kill after 2 of the report node's 3 model calls" in out
    assert "interrupted by the kill: report@10" in out
    assert re.search(r"resumed from: +step 9 \(next: report;", out), out
    made = re.search(r"\n    of them in the node the kill interrupted: (\d+)", out)
    replayed = re.search(r"\n  2nd process made (\d+): .*; replayed (\d+) from the journal "
                         r"\((\d+) tokens not spent again\)", out)
    assert made and replayed, out
    assert int(made[1]) >= 2 and int(made[1]) == int(replayed[2]) and int(replayed[3]) > 0
    assert int(replayed[1]) == 3 - int(made[1]), out
    assert "(local folder)" in line(out, "blob store: file://")
    assert "(Redis hot tier)" in line(out, "state served by:")
    assert re.search(r"resumed from: +step \d+ \(next: \w+", out), out


def test_crash_and_resume_from_mongodb_cold(s3_endpoint_url: str) -> None:
    out = run_demo("--cold", "--step-s", "0.25", "--kill-after", "5", "--durability", "sync",
                   s3_endpoint_url=s3_endpoint_url)
    check_common(out, tier="durable")
    assert f"(S3 at {s3_endpoint_url})" in line(out, "blob store: s3://lgd-demo-")
    assert "(MongoDB durable tier)" in line(out, "state served by:")
    assert re.search(r"cold: outbox drained to MongoDB \(\d+ checkpoints", out), out
    assert "reads by tier in the 2nd process: hot 0," in out
    # durability=sync: the five completed nodes are stored before the sixth starts, and
    # the kill lands inside the sixth (model_a), so the run resumes right there
    assert re.search(r"resumed from: +step 5 \(next: model_a;", out), out
    assert line(out, "completed nodes not re-run:") == "completed nodes not re-run: 5 of 5"
    assert "interrupted by the kill: model_a@6" in out
    assert re.search(r"check: every completed node was acknowledged \(sync\) +yes", out), out
