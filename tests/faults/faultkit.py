"""Shared bits of the fault tests: makes the ``faults`` package (repository root)
importable under any pytest invocation, and gives each test an ``Env``.

No ``conftest.py`` here on purpose: a second root-less ``conftest`` module would shadow
``tests/conftest.py`` (``from conftest import unique_options``) for the rest of the run.
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from faults.common import Env  # noqa: E402

__all__ = ["ROOT", "Env", "make_env"]


def make_env(redis_url: str, mongo_url: str, tmp_path: Path) -> Env:
    return Env(redis_url, mongo_url, work=tmp_path)
