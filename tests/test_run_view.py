"""The run view on the thread page, in a real browser (Debian's chromium via Playwright):
per super-step the node(s) that ran (a ``Send`` resolved to the node it targets), the
failing node with its error, internal channels hidden unless asked, paging and jump to
step on a 1,000-checkpoint thread, no overlap of timeline and state at 1400 px."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

import bson
import pytest
from langchain_core.messages import HumanMessage
from langgraph.checkpoint.base import empty_checkpoint
from playwright.sync_api import Browser, Page, expect

from langgraph_durable import DurableSaver
from langgraph_durable.dashboard import create_app
from langgraph_durable.durable.inline import split_key
from langgraph_durable.inspection import runview
from langgraph_durable.testing import unique_options

from .run_graphs import send_graph
from .test_dashboard import WAIT_MS, Served, browser  # noqa: F401

LONG = 1000


@pytest.fixture(scope="module")
def saver(redis_url: str, mongo_url: str) -> Iterator[DurableSaver]:
    with DurableSaver.from_urls(redis_url, mongo_url, **unique_options()) as s:
        graph = send_graph(s)
        graph.invoke({"messages": [HumanMessage("Oslo", id="h-1")]},
                     {"configurable": {"thread_id": "oslo"}})
        with pytest.raises(ValueError, match="Atlantis"):
            graph.invoke({"messages": [HumanMessage("Atlantis", id="h-1")]},
                         {"configurable": {"thread_id": "atlantis"}})
        cfg: Any = {"configurable": {"thread_id": "long", "checkpoint_ns": ""}}
        for step in range(-1, LONG - 1):  # 1,000 checkpoints, steps -1..998
            cp = {**empty_checkpoint(), "channel_values": {"n": step},
                  "channel_versions": {"n": step + 2}}
            cfg = s.put(cfg, cp, {"step": step, "source": "input" if step < 0 else "loop"},
                        {"n": step + 2})
        yield s


@pytest.fixture(scope="module")
def served(saver: DurableSaver) -> Iterator[str]:
    app = Served(create_app(saver, poll_s=0.2, index_ttl_s=0))
    yield app.url
    app.close()


@pytest.fixture
def page(browser: Browser) -> Iterator[Page]:  # noqa: F811
    expect.set_options(timeout=WAIT_MS)
    context = browser.new_context(viewport={"width": 1400, "height": 900})
    p = context.new_page()
    p.set_default_timeout(WAIT_MS)
    yield p
    context.close()


def _row(page: Page, step: int) -> Any:
    return page.locator(f'#timeline tbody tr[data-step="{step}"]')


def test_a_send_shows_the_node_it_targets_and_each_step_its_writes(
        served: str, page: Page) -> None:
    page.goto(served + "thread?thread_id=oslo")
    rows = page.locator("#timeline tbody tr")
    assert rows.evaluate_all("rs => rs.map(r => r.dataset.step)") == ["3", "2", "1", "0", "-1"]
    made = rows.locator(".made").all_inner_texts()
    assert made == ["agent", "weather_tool", "agent", "__start__", "input"]
    expect(_row(page, 1).locator(".ran")).to_have_text("weather_tool")  # not "Send"
    expect(page.locator("#timeline")).not_to_contain_text("Send")
    expect(_row(page, 2).locator(".wrote")).to_contain_text("messages")
    expect(_row(page, 2).locator(".wrote")).to_contain_text("log")
    durations = rows.locator(".dt").all_inner_texts()
    assert durations[-1] == "-"
    assert all(re.fullmatch(r"\d+\.\d (ms)|\d+\.\d\d s", d) for d in durations[:-1]), durations
    data = json.loads(page.request.get(served + "api/thread?thread_id=oslo").text())
    by_step = {r["step"]: r for r in data["timeline"]}
    assert by_step[2]["made_by"] == ["weather_tool"] and by_step[1]["next"] == ["weather_tool"]
    parent_ts = {r["checkpoint_id"]: r["ts"] for r in data["timeline"]}
    import datetime as dt
    for r in data["timeline"]:
        if r["parent"]:
            want = (dt.datetime.fromisoformat(r["ts"])
                    - dt.datetime.fromisoformat(parent_ts[r["parent"]])).total_seconds()
            assert r["duration_s"] == pytest.approx(want)


def test_a_failing_node_is_named_with_its_error(served: str, page: Page) -> None:
    page.goto(served + "thread?thread_id=atlantis")
    expect(page.locator("#thread-status")).to_have_text("error")
    failed = page.locator("#timeline tr.failed")
    expect(failed).to_have_count(1)
    expect(failed).to_have_attribute("data-step", "1")
    node = failed.locator(".failed-node")
    expect(node).to_have_attribute("data-node", "weather_tool")
    expect(node).to_contain_text("weather_tool failed:")
    expect(node).to_contain_text("the weather service does not know Atlantis")
    expect(failed.locator(".ran")).to_have_text("weather_tool")


def test_internal_channels_are_hidden_until_the_toggle_shows_them(
        served: str, page: Page) -> None:
    page.goto(served + "thread?thread_id=oslo")
    internal = page.locator("#timeline .write.internal")
    assert internal.count() >= 2  # the Send (__pregel_tasks), branch:to:agent
    names = set(internal.all_inner_texts())
    assert "branch:to:agent" in names and "__pregel_tasks" in names
    for i in range(internal.count()):
        expect(internal.nth(i)).to_be_hidden()
    expect(_row(page, 2).locator(".write:not(.internal)").first).to_be_visible()
    page.locator("#show-internal").check()
    for i in range(internal.count()):
        expect(internal.nth(i)).to_be_visible()
    assert "all_channels=1" in page.url  # the choice is kept in the link
    page.reload()
    expect(page.locator("#show-internal")).to_be_checked()
    expect(internal.first).to_be_visible()
    page.locator("#show-internal").uncheck()
    expect(internal.first).to_be_hidden()


def test_at_1400_px_timeline_and_state_do_not_overlap(served: str, page: Page) -> None:
    for thread in ("oslo", "atlantis", "long"):
        page.goto(served + "thread?thread_id=" + thread)
        page.locator("#timeline").wait_for()
        boxes = page.evaluate("""() => ['timeline-section', 'timeline', 'state'].map(id => {
            const r = document.getElementById(id).getBoundingClientRect();
            return {left: r.left, right: r.right, top: r.top, bottom: r.bottom}; })""")
        section, table, state = boxes

        def meet(a: dict, b: dict) -> bool:
            return (a["left"] < b["right"] and b["left"] < a["right"]
                    and a["top"] < b["bottom"] and b["top"] < a["bottom"])

        assert not meet(section, state), (thread, boxes)
        assert not meet(table, state), (thread, boxes)
        assert table["right"] <= section["right"] + 0.5, (thread, boxes)  # fits its column


def test_a_1000_checkpoint_thread_is_paged_and_jumps_to_a_step(
        saver: DurableSaver, served: str, page: Page) -> None:
    page.goto(served + "thread?thread_id=long")
    rows = page.locator("#timeline tbody tr")
    expect(rows).to_have_count(runview.PAGE)
    assert rows.first.get_attribute("data-step") == str(LONG - 2)
    page.locator("#page-older").click()
    expect(rows.first).to_have_attribute("data-step", str(LONG - 2 - runview.PAGE))
    page.fill("#jump-step", "123")
    page.locator("#jump-button").click()
    expect(rows.first).to_have_attribute("data-step", "123")
    expect(rows).to_have_count(runview.PAGE)
    assert rows.last.get_attribute("data-step") == str(123 - runview.PAGE + 1)
    expect(page.locator("#page-newest")).to_be_visible()
    page.locator("#page-newest").click()
    expect(rows.first).to_have_attribute("data-step", str(LONG - 2))
    page.fill("#jump-step", "5000")
    page.locator("#jump-button").click()
    expect(page.locator("main")).to_contain_text("has no checkpoint at step 5000")


def test_the_storage_panel_and_its_api_show_the_stored_bytes(
        saver: DurableSaver, served: str, page: Page) -> None:
    saver.flush()
    keys = saver.context.keys("oslo")
    r = saver.sync_clients.redis
    fields = [f for f in r.hkeys(keys.bl) if f.split(b"\x00")[1] == b"messages"]
    hot_all = sum(r.hstrlen(keys.bl, f) for f in fields)
    db = saver.sync_clients.db
    cold_all = sum(len(bson.encode(d)) for d in db[saver.context.collections.blobs].find(
        {"thread_id": "oslo", "channel": "messages"}))
    cold_all += sum(len(bson.encode(e)) for d in db[saver.context.collections.checkpoints]
                    .find({"thread_id": "oslo"}) for e in d.get("vals", [])
                    if split_key(e["k"])[0] == "messages")  # values inside checkpoints
    items = sum(len(bson.encode(d)) for d in db[saver.context.collections.items].find(
        {"thread_id": "oslo"}))
    data = json.loads(page.request.get(served + "api/thread/oslo/size").text())
    messages = {t: next(c for c in data[t]["channels"] if c["channel"] == "messages")
                for t in ("redis", "mongodb")}
    assert (messages["redis"]["all_bytes"], messages["mongodb"]["all_bytes"]) == (
        hot_all, cold_all)
    assert data["mongodb"]["kinds"]["items"]["bytes"] == items
    page.goto(served + "thread?thread_id=oslo")
    row = page.locator('#size-channels tr[data-channel="messages"] td')
    assert row.nth(2).get_attribute("data-bytes") == str(hot_all)
    assert row.nth(4).get_attribute("data-bytes") == str(cold_all)
    kinds = page.locator('#size-kinds tr[data-kind="items"] td')
    assert kinds.nth(4).get_attribute("data-bytes") == str(items)
    expect(page.locator("#size-blobs")).to_contain_text("external blobs: 0")
