"""Shared bits of the fault tests: each test gets an ``Env`` of the ``faults`` package
(repository root, importable through pytest's ``pythonpath = ["."]`` in pyproject.toml).
"""

from __future__ import annotations

from pathlib import Path

from faults.common import Env

ROOT = Path(__file__).resolve().parents[2]

__all__ = ["ROOT", "Env", "make_env"]


def make_env(redis_url: str, mongo_url: str, tmp_path: Path) -> Env:
    return Env(redis_url, mongo_url, work=tmp_path)
