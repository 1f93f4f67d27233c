"""Side effects once across a SIGKILL: a child process runs six threads of a graph whose
node charges a real local HTTP service through ``once``; each thread stops at one of the
three crash points (after the started entry, after the call, after the journal), with
``in_doubt="raise"`` or ``"retry"``; the child then kills itself with SIGKILL. This
process resumes every thread with a new saver and counts what the service did.

The child stores each step's checkpoint 0.3 s late (``slowed_puts``): under LangGraph's
default durability the step's task starts before its checkpoint is stored, and ``once``
must wait for it. Without that wait a kill lost the checkpoint, the resumed step got new
task ids and the effect ran again with another idempotency key (CI saw it once in a
while, on a busy machine)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

from langgraph_durable import DurableSaver
from langgraph_durable.errors import EffectInDoubtError
from langgraph_durable.testing import unique_options

from .effects_support import CRASH_POINTS, pay_only, service

ROOT = Path(__file__).resolve().parent.parent

# (crash point, in_doubt) -> (raises EffectInDoubtError on resume, calls the service saw,
# distinct effects it carried out)
EXPECTED = {
    ("started", "raise"): (True, 0, 0),
    ("started", "retry"): (False, 1, 1),
    ("called", "raise"): (True, 1, 1),
    ("called", "retry"): (False, 2, 1),  # called again with the same key: deduplicated
    ("journaled", "raise"): (False, 1, 1),
    ("journaled", "retry"): (False, 1, 1),
}


def test_a_sigkilled_run_resumed_in_another_process_never_repeats_an_effect(
        redis_url: str, mongo_url: str, tmp_path: Path) -> None:
    options = unique_options()
    tag = uuid.uuid4().hex[:6]
    runs = [{"thread": f"{tag}-{point}-{mode}", "point": point, "in_doubt": mode}
            for point in CRASH_POINTS for mode in ("raise", "retry")]
    ready = tmp_path / "ready"
    with service() as svc:
        args = {"redis_url": redis_url, "mongo_url": mongo_url, "options": options,
                "url": svc.url, "runs": runs, "ready": str(ready), "slow_put_s": 0.3}
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        child = subprocess.run([sys.executable, "-m", "tests.effects_support",
                                json.dumps(args)], cwd=ROOT, env=env, timeout=120,
                               capture_output=True, text=True)
        assert child.returncode == -signal.SIGKILL, child.stderr[-3000:]
        assert ready.read_text() == "ready"
        before = {r["thread"]: svc.calls_of(r["thread"]) for r in runs}
        assert before == {r["thread"]: 0 if r["point"] == "started" else 1 for r in runs}
        outcome: dict[tuple[str, str], Any] = {}
        with DurableSaver.from_urls(redis_url, mongo_url, **options) as saver:
            graph = pay_only(saver)
            for r in runs:
                config = {"configurable": {"thread_id": r["thread"]}}
                try:
                    graph.invoke(None, config)
                    raised: EffectInDoubtError | None = None
                except EffectInDoubtError as exc:
                    raised = exc
                    assert (exc.thread_id, exc.effect, exc.call) == (r["thread"], "pay", 0)
                    assert r["thread"] in str(exc) and exc.task_id in str(exc)
                outcome[(r["point"], r["in_doubt"])] = (
                    raised is not None, svc.calls_of(r["thread"]), svc.effects_of(r["thread"]))
    assert outcome == EXPECTED

