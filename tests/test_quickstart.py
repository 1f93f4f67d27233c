"""README's quick start is examples/quickstart.py, and it prints what README shows."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from langgraph_durable.testing import unique_options

ROOT = Path(__file__).resolve().parent.parent


def _quick_start_blocks() -> tuple[str, str]:
    """The code block and the output block of README's "A first graph"."""
    text = (ROOT / "README.md").read_text()
    section = text.split("### A first graph", 1)[1].split("\n### ", 1)[0]
    code, out = re.findall(r"```[a-z]*\n(.*?)```", section, flags=re.S)[:2]
    return code, out


def test_the_readme_quick_start_runs_and_prints_what_the_readme_shows(
    redis_url: str, mongo_url: str,
) -> None:
    code, shown = _quick_start_blocks()
    script = ROOT / "examples" / "quickstart.py"
    assert code == script.read_text()
    opts = unique_options()
    env = {**os.environ, "REDIS_URL": redis_url, "MONGODB_URL": mongo_url,
           "LGD_KEY_PREFIX": str(opts["key_prefix"]), "LGD_DATABASE": str(opts["database"]),
           "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, str(script)], env=env, capture_output=True,
                          text=True, timeout=120, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    assert done.stdout == shown
