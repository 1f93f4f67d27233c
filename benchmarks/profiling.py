"""Profile DurableSaver's W1 and W3 with py-spy (every thread, flusher included) and
summarise the samples: self time by function, time by layer, and inclusive time of
DurableSaver's entry points."""

from __future__ import annotations

import collections
import contextlib
import os
import re
import shutil
import subprocess
import sys
from typing import Any

_FRAME = re.compile(r"^(?P<func>.*) \((?P<file>[^()]*?)(?::(?P<line>\d+))?\)$")

# Layers, matched from the innermost frame outwards: the first frame that matches names
# the layer the sample is charged to.
LAYERS = [
    ("serializer (langgraph serde / ormsgpack)", ("/langgraph/checkpoint/serde/", "ormsgpack")),
    ("redis-py (incl. socket I/O)", ("/redis/",)),
    ("pymongo / bson", ("/pymongo/", "/bson/")),
    ("langgraph_durable", ("/langgraph_durable/",)),
    ("langgraph runtime", ("/langgraph/",)),
    ("langchain_core (messages, runnables, fake model)", ("/langchain_core/",)),
    ("langsmith (run trees / tracing hooks)", ("/langsmith/",)),
    ("pydantic", ("/pydantic",)),
    ("benchmark graph code", ("/benchmarks/",)),
    ("asyncio / threading / stdlib", ("/asyncio/", "/threading.py", "/concurrent/",
                                      "/selectors.py", "/socket.py", "/queue.py")),
]


def _frames(stack: str) -> tuple[str, list[tuple[str, str]]]:
    parts = stack.split(";")
    thread = parts[0]
    frames = []
    for f in parts[1:]:
        m = _FRAME.match(f)
        frames.append((m.group("func"), m.group("file")) if m else (f, ""))
    return thread, frames


def _thread_kind(label: str) -> str:
    name = label.split(":", 1)[1].strip() if ":" in label else "main"
    if name.startswith("langgraph-durable-flusher"):
        return "flusher thread"
    if name.startswith("ThreadPoolExecutor") or name.startswith("asyncio_"):
        return "executor threads (LangGraph background puts / to_thread)"
    return "main thread"


def summarise(raw_path: str, top: int = 15) -> dict[str, Any]:
    """Aggregate a py-spy ``--format raw --threads`` file."""
    self_t: collections.Counter[str] = collections.Counter()
    layers: collections.Counter[str] = collections.Counter()
    threads: collections.Counter[str] = collections.Counter()
    entry: collections.Counter[str] = collections.Counter()
    total = 0
    with open(raw_path) as fh:
        for line in fh:
            line = line.rstrip("\n")
            if not line:
                continue
            stack, _, count_s = line.rpartition(" ")
            n = int(count_s)
            thread, frames = _frames(stack)
            if any(f[0] in ("_find_and_load", "_call_with_frames_removed") for f in frames):
                continue  # imports at start-up
            total += n
            threads[_thread_kind(thread)] += n
            if frames:
                func, file = frames[-1]
                self_t[f"{func} ({_short(file)})"] += n
            layer = "no Python frame (native code, interpreter)"
            for _func, file in reversed(frames):
                hit = next((name for name, pats in LAYERS if any(p in file for p in pats)), None)
                if hit:
                    layer = hit
                    break
            layers[layer] += n
            seen = set()
            for func, file in frames:
                if "/langgraph_durable/" in file and (func.startswith("DurableSaver.")
                                                      or func.startswith("Flusher.")
                                                      or func.endswith("_plan")):
                    if func not in seen:
                        entry[func] += n
                        seen.add(func)
    pc = (lambda n: 100.0 * n / total) if total else (lambda n: 0.0)
    return {
        "samples": total,
        "self": [(k, pc(v)) for k, v in self_t.most_common(top)],
        "layers": [(k, pc(v)) for k, v in layers.most_common()],
        "threads": [(k, pc(v)) for k, v in threads.most_common()],
        "entry": [(k, pc(v)) for k, v in entry.most_common(12)],
    }


def _short(path: str) -> str:
    m = re.search(r"(?:site-packages|lib/python3\.\d+)/(.*)$", path)
    if m:
        return m.group(1)
    m = re.search(r"/(langgraph_durable|benchmarks)/(.*)$", path)
    if m:  # the package or the harness, from whichever checkout
        return f"{m.group(1)}/{m.group(2)}"
    return path.split("/work/main/", 1)[-1]


def profile(which: str, redis_url: str, mongo_url: str, sizes: list[int], out_dir: str,
            rate: int = 100, spy_cpu: int | None = None) -> dict[str, Any]:
    """Run ``benchmarks.profile_target``, which has ``py-spy record`` sample it during the
    workload only; returns the summary, or ``{"error": ...}`` when py-spy is missing or
    not allowed to sample. ``spy_cpu``: run py-spy itself on that CPU (``taskset``; the
    pinned mode puts it beside the servers, off the application's CPU)."""
    exe = shutil.which("py-spy") or os.path.join(os.path.dirname(sys.executable), "py-spy")
    if not os.path.exists(exe):
        return {"error": "py-spy not installed (pip install py-spy)"}
    raw = os.path.join(out_dir, f"profile_{which}.txt")
    with contextlib.suppress(OSError):
        os.remove(raw)
    cmd = [sys.executable, "-m", "benchmarks.profile_target", which, redis_url, mongo_url,
           os.path.abspath(raw), exe, str(rate), *map(str, sizes)]
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (env.get("PYTHONPATH"), os.getcwd()) if p)
    if spy_cpu is not None:
        env["BENCH_SPY_CPU"] = str(spy_cpu)
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=900, env=env)
    if res.returncode != 0 or not os.path.exists(raw):
        return {"error": f"py-spy failed ({res.returncode}): {res.stderr[-800:]}"}
    summary = summarise(raw)
    m = re.search(r"wall_s=([\d.]+)", res.stdout)
    summary["wall_s"] = float(m.group(1)) if m else None
    summary["raw"] = os.path.basename(raw)
    return summary
