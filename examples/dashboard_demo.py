"""The operations dashboard on a few real LangGraph threads.

Run from the repository root (needs the ``dashboard`` extra)::

    python -m examples.dashboard_demo                  # http://127.0.0.1:8765/, Ctrl-C stops
    python -m examples.dashboard_demo --allow-writes   # the time machine on (prints the token URL)
    python -m examples.dashboard_demo --screenshots docs/img   # save the main pages as PNG, exit
    python -m examples.dashboard_demo --screenshots /tmp/shots --every-size  # 390-1920 px

It starts a Redis and a MongoDB-wire server (``langgraph_durable.testing``; ``REDIS_URL`` /
``MONGODB_URL`` are used instead when set, with a key prefix and database of its own,
deleted at the end), and makes threads to look at: ``weather-*`` (an agent whose tool
call and result are paired in the chat, and a DataFrame kept in a local blob store),
``approval`` (waits on an interrupt), ``broken`` (a node raised), ``weather-1-retry`` (a
fork of weather-1 with an edited channel, as the time machine makes it) and ``counter``,
a run that keeps going (one step every ``--step-s`` seconds) while you watch its step
count rise in the list.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path
from typing import Annotated, Any

ROOT = Path(__file__).resolve().parent.parent
if __package__ in (None, ""):  # `python examples/dashboard_demo.py`
    sys.path.insert(0, str(ROOT))

import pandas as pd  # noqa: E402
from langchain_core.messages import AIMessage, AnyMessage, HumanMessage, ToolMessage  # noqa: E402
from langgraph.graph import END, START, StateGraph  # noqa: E402
from langgraph.graph.message import add_messages  # noqa: E402
from langgraph.types import interrupt  # noqa: E402
from typing_extensions import TypedDict  # noqa: E402

from langgraph_durable import DurableSaver  # noqa: E402
from langgraph_durable.inspection import lookup  # noqa: E402
from langgraph_durable.serde import ExternalRefSerializer, LocalBlobStore  # noqa: E402
from langgraph_durable.testing import drop_namespace, mongo_server, redis_server  # noqa: E402

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run"]


class State(TypedDict, total=False):
    messages: Annotated[list[AnyMessage], add_messages]
    city: str
    readings: Any
    count: int


def agent(state: State) -> dict[str, Any]:
    city = state["city"]
    call = {"name": "weather", "args": {"city": city}, "id": f"call-{city}", "type": "tool_call"}
    return {"messages": [AIMessage("Let me look that up.", tool_calls=[call])]}


def tool(state: State) -> dict[str, Any]:
    city = state["city"]
    frame = pd.DataFrame({"hour": list(range(24)),
                          "temp_c": [10 + (h % 12) / 2 for h in range(24)],
                          "city": [city] * 24})
    return {"messages": [ToolMessage(f"{city}: 14 °C, light rain", tool_call_id=f"call-{city}")],
            "readings": frame}


def answer(state: State) -> dict[str, Any]:
    mean = float(state["readings"]["temp_c"].mean())
    return {"messages": [AIMessage(f"It is 14 °C in {state['city']} (day mean {mean:.1f} °C).")]}


def approve(state: State) -> dict[str, Any]:
    ok = interrupt({"question": f"send the report for {state['city']}?"})
    return {"messages": [AIMessage("sent" if ok else "not sent")]}


def broken(state: State) -> dict[str, Any]:
    raise RuntimeError("the weather service answered 503")


def weather_graph(saver: DurableSaver, last: Any = answer) -> Any:
    g = StateGraph(State)
    g.add_node("agent", agent)
    g.add_node("tool", tool)
    g.add_node("answer", last)
    g.add_edge(START, "agent")
    g.add_edge("agent", "tool")
    g.add_edge("tool", "answer")
    g.add_edge("answer", END)
    return g.compile(checkpointer=saver)


def counter_graph(saver: DurableSaver, step_s: float, stop: threading.Event) -> Any:
    def tick(state: State) -> dict[str, Any]:
        stop.wait(step_s)
        return {"count": state.get("count", 0) + 1}

    g = StateGraph(State)
    g.add_node("tick", tick)
    g.add_edge(START, "tick")
    g.add_conditional_edges("tick", lambda s: END if stop.is_set() or s["count"] >= 10_000
                            else "tick")
    return g.compile(checkpointer=saver)


def make_threads(saver: DurableSaver) -> None:
    """The demo's threads (see the module docstring)."""
    for i, city in enumerate(["Oslo", "Lima", "Rome"], 1):
        weather_graph(saver).invoke({"messages": [HumanMessage(f"Weather in {city}?")],
                                     "city": city},
                                    {"configurable": {"thread_id": f"weather-{i}"}})
    weather_graph(saver, approve).invoke({"messages": [HumanMessage("Weather in Kyiv?")],
                                          "city": "Kyiv"},
                                         {"configurable": {"thread_id": "approval"}})
    with contextlib.suppress(RuntimeError):
        weather_graph(saver, broken).invoke({"messages": [HumanMessage("Weather in Cairo?")],
                                             "city": "Cairo"},
                                            {"configurable": {"thread_id": "broken"}})
    history = list(saver.list({"configurable": {"thread_id": "weather-1"}}))
    at_tool = next(t for t in history if t.metadata.get("step") == 2)
    lookup.fork(saver, saver.sync_clients, "weather-1", at_tool.config["configurable"][
        "checkpoint_id"], "weather-1-retry", values={"city": "Bergen"})


PAGES = (("dashboard_threads", ""), ("dashboard_thread", "thread?thread_id=weather-1"),
         ("dashboard_diff", "thread?thread_id=weather-1"), ("dashboard_tiers", "tiers"))
"""The pages photographed: (file name, path)."""

SIZES = ((390, 844), (1400, 900), (1920, 1080))
"""Viewports of ``--every-size`` (a phone, a laptop, a desktop), in CSS pixels."""


def screenshots(url: str, folder: Path, every_size: bool = False) -> None:
    """PNGs of the thread list, a thread, a diff and the tiers page in ``folder``: at
    1400 x 900 in the light scheme (the documentation's pictures, ``<page>.png``), plus
    the tiers page in the dark scheme (``dashboard_tiers_dark.png``); with
    ``every_size`` each page at every ``SIZES`` width in light and dark
    (``<page>_<width>_<scheme>.png``)."""
    from playwright.sync_api import sync_playwright

    folder.mkdir(parents=True, exist_ok=True)
    shots = [(1400, 900, "light", ""), (1400, 900, "dark", "_dark")]
    if every_size:
        shots = [(w, h, scheme, f"_{w}_{scheme}") for w, h in SIZES
                 for scheme in ("light", "dark")]
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        for width, height, scheme, suffix in shots:
            page = browser.new_page(viewport={"width": width, "height": height},
                                    color_scheme=scheme)  # type: ignore[arg-type]
            for name, path in PAGES:
                if suffix == "_dark" and name != "dashboard_tiers":
                    continue
                page.goto(url + path)
                if name == "dashboard_diff":
                    page.locator("#diff-button").click()
                if name in ("dashboard_threads", "dashboard_tiers"):
                    page.locator("#live.on").wait_for()
                else:
                    page.wait_for_load_state("networkidle")
                wide = page.evaluate("document.documentElement.scrollWidth")
                if wide > width:
                    print(f"warning: {name} is {wide} px wide in a {width} px viewport")
                out = folder / f"{name}{suffix}.png"
                page.screenshot(path=str(out), full_page=name != "dashboard_thread")
                print(f"wrote {out}")
            page.close()
        browser.close()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--port", type=int, default=8765)
    parser.add_argument("--allow-writes", action="store_true")
    parser.add_argument("--step-s", type=float, default=2.0,
                        help="seconds between two steps of the counter thread")
    parser.add_argument("--screenshots", type=Path, help="save the main pages here and exit")
    parser.add_argument("--every-size", action="store_true", help="with --screenshots: "
                        "every page at 390, 1400 and 1920 px wide, light and dark")
    args = parser.parse_args()

    import uvicorn

    from langgraph_durable.dashboard import check_bind, create_app, new_token

    with contextlib.ExitStack() as stack:
        redis_url, mongo_url = os.environ.get("REDIS_URL"), os.environ.get("MONGODB_URL")
        if not redis_url or not mongo_url:
            redis_url = stack.enter_context(redis_server()).url
            mongo_url = stack.enter_context(mongo_server()).url
        tag = uuid.uuid4().hex[:8]
        prefix, database = f"dash{tag}", f"dashboard_demo_{tag}"
        stack.callback(drop_namespace, redis_url, mongo_url, prefix, database)
        blobs = stack.enter_context(tempfile.TemporaryDirectory(prefix="lgd-dashboard-"))
        serde = ExternalRefSerializer(store=LocalBlobStore(blobs), threshold_bytes=1024)
        saver = stack.enter_context(DurableSaver.from_urls(
            redis_url, mongo_url, serde=serde, key_prefix=prefix, database=database))
        make_threads(saver)
        stop = threading.Event()
        run = threading.Thread(target=counter_graph(saver, args.step_s, stop).invoke, args=(
            {"count": 0}, {"configurable": {"thread_id": "counter"}}), daemon=True)
        run.start()
        stack.callback(run.join, 30)
        stack.callback(stop.set)
        token = new_token() if args.allow_writes else None
        check_bind("127.0.0.1", token, args.allow_writes)
        app = create_app(saver, token=token, allow_writes=args.allow_writes, lag_every_s=2)
        server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=args.port,
                                               log_level="warning", access_log=False,
                                               timeout_graceful_shutdown=2))
        url = f"http://127.0.0.1:{args.port}/"
        if args.screenshots:
            serving = threading.Thread(target=server.run, daemon=True)
            serving.start()
            while not server.started:
                time.sleep(0.05)
            try:
                screenshots(url, args.screenshots, args.every_size)
            finally:
                server.should_exit = True
                serving.join(10)
            return 0
        print(f"dashboard on {url}" + (f"?token={token}" if token else "") + " (Ctrl-C stops)")
        server.run()
    return 0


if __name__ == "__main__":
    sys.exit(main())
