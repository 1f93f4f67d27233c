"""The Jinja environment of the dashboard's pages: its templates folder, autoescaping of
every value (also in templates given as strings), and the filters (``bytes``, ``age``,
``utc``, ``short``, ``seconds``, ``duration``), tests and globals (``qs``) they use."""

from __future__ import annotations

from pathlib import Path
from urllib.parse import urlencode

from jinja2 import Environment, FileSystemLoader, select_autoescape

from ..inspection import render, runview
from . import views

HERE = Path(__file__).parent
"""The dashboard's folder (``templates/``, ``static/``)."""


def templates() -> Environment:
    """The pages' Jinja environment: the templates of ``dashboard/templates``, every
    value autoescaped, and the filters, tests and globals the templates use."""
    env = Environment(loader=FileSystemLoader(HERE / "templates"),
                      autoescape=select_autoescape(default=True, default_for_string=True))
    env.filters["bytes"] = render.human_bytes
    env.filters["age"] = views.human_age
    env.filters["utc"] = render.utc
    env.filters["short"] = lambda cid: (cid or "-")[:13]
    env.filters["seconds"] = lambda s: "-" if s is None else f"{s:.2f} s"
    env.tests["internal_channel"] = runview.is_internal
    env.filters["duration"] = runview.duration_text
    env.globals["qs"] = lambda **kw: urlencode({k: v for k, v in kw.items() if v is not None},
                                               doseq=True)
    return env
