"""``langgraph-durable``: the operator's command line (typer + rich; the ``cli`` extra).

``main()`` is the console script; ``app`` the typer application (for ``CliRunner``).
"""

from __future__ import annotations

import sys
from typing import Any

__all__ = ["app", "main"]


def main() -> None:
    """Run the CLI; without typer/rich installed, say how to get them (exit code 2)."""
    try:
        from .commands import main as run
    except ImportError as exc:  # pragma: no cover - depends on the environment
        print(f"error: the langgraph-durable CLI needs the cli extra "
              f"(pip install 'langgraph-durable[cli]'): {exc}", file=sys.stderr)
        raise SystemExit(2) from None
    run()


def __getattr__(name: str) -> Any:
    if name == "app":
        from .commands import app

        return app
    raise AttributeError(name)
