"""An operations dashboard in the browser: threads (live), a thread's timeline, state and
diffs, the time machine (fork at a checkpoint), and the tiers' figures.

``create_app(saver, ...)`` is an ASGI app to mount in your own FastAPI/Starlette app;
``serve(saver, host=..., port=...)`` runs it with uvicorn (``langgraph-durable
dashboard`` does that). Both need the ``dashboard`` extra (``pip install
'langgraph-durable[dashboard]'``: starlette, uvicorn, jinja2); without it they raise
``ImportError`` naming the extra. ``new_token()`` and ``check_bind(host, token,
allow_writes)`` (what ``serve`` checks before it binds) need no extra: for serving
``create_app`` with your own server. See docs/dashboard.md.
"""

from __future__ import annotations

from typing import Any

from .security import check_bind, new_token

__all__ = ["check_bind", "create_app", "new_token", "serve"]


def _app_module() -> Any:
    try:
        from . import app
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise ImportError(f"the langgraph_durable dashboard needs the dashboard extra "
                          f"(pip install 'langgraph-durable[dashboard]'): {exc}") from exc
    return app


def create_app(saver: Any, **options: Any) -> Any:
    """The dashboard's ASGI app for ``saver``; ``options`` as
    ``langgraph_durable.dashboard.app.create_app`` (``token``, ``allow_writes``,
    ``poll_s``, ``running_window_s``, ``lag_every_s``, ``allowed_hosts``: Host names
    answered besides the loopback ones, ``allow_types``: types decoded besides the
    built-in allowlist). Raises ``ImportError`` naming the ``dashboard`` extra when
    starlette or jinja2 is missing, ``ConfigurationError`` for ``allow_writes`` without
    a token."""
    return _app_module().create_app(saver, **options)


def serve(saver: Any, **options: Any) -> None:
    """Serve the dashboard with uvicorn (``host`` default 127.0.0.1, ``port`` 8765,
    ``token``, ``allow_writes``, ``allowed_hosts``, ``allow_types``); a non-loopback
    ``host`` without a token raises
    ``ConfigurationError`` before anything is bound."""
    _app_module().serve(saver, **options)
