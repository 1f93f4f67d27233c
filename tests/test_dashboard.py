"""The operations dashboard driven in a real browser (Debian's chromium via Playwright):
the live thread list, timeline/state/diff, the time machine and its guards, hostile
content, the tiers page. One browser and two served apps (read-only; writes with a
token) for the whole module."""

from __future__ import annotations

import json
import re
import socket
import threading
from collections.abc import Iterator
from typing import Annotated, Any

import pandas as pd
import pytest
import uvicorn
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, AnyMessage, HumanMessage, ToolMessage
from langgraph.checkpoint.base import empty_checkpoint
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages
from langgraph.types import interrupt
from playwright.sync_api import Browser, Page, expect, sync_playwright
from typer.testing import CliRunner
from typing_extensions import TypedDict

from langgraph_durable import DurableSaver, journaled
from langgraph_durable.cli import app as cli_app
from langgraph_durable.dashboard import create_app
from langgraph_durable.effects import once
from langgraph_durable.errors import ConfigurationError
from langgraph_durable.inspection import lookup
from langgraph_durable.serde import ExternalRefSerializer, LocalBlobStore
from langgraph_durable.testing import unique_options, wait_for

from .model_journal_support import Counting
from .model_journal_support import State as JState

TOKEN = "test-token-0123456789"
WAIT_MS = 15_000
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run"]
HOSTILE = ('<script>window.__pwned = 1</script><img src=x onerror="window.__pwned = 2">'
           '<a href="javascript:window.__pwned = 3">click me</a>')


class State(TypedDict, total=False):
    messages: Annotated[list[AnyMessage], add_messages]
    count: int
    table: Any


def _agent(state: State) -> dict[str, Any]:
    call = {"name": "lookup", "args": {"city": "Oslo"}, "id": "call-1", "type": "tool_call"}
    return {"messages": [AIMessage("", id="ai-1", tool_calls=[call])], "count": 1}


def _tool(state: State) -> dict[str, Any]:
    return {"messages": [ToolMessage("12 degrees", tool_call_id="call-1", id="tool-1")],
            "count": 2, "table": pd.DataFrame({"city": ["Oslo", "Rome", "Lima"],
                                               "temp": [12, 25, 18]})}


def _final(state: State) -> dict[str, Any]:
    return {"messages": [AIMessage("It is 12 degrees in Oslo.", id="ai-2")],
            "count": state["count"] + 1}


def agent_graph(saver: DurableSaver) -> Any:
    """START -> agent (a tool call) -> tool (its result, a DataFrame) -> final -> END."""
    g = StateGraph(State)
    for name, fn in (("agent", _agent), ("tool", _tool), ("final", _final)):
        g.add_node(name, fn)
    g.add_edge(START, "agent")
    g.add_edge("agent", "tool")
    g.add_edge("tool", "final")
    g.add_edge("final", END)
    return g.compile(checkpointer=saver)


def gated_graph(saver: DurableSaver, gate: threading.Semaphore, steps: int) -> Any:
    """A node that runs ``steps`` times, each run waiting for one ``gate.release()``."""

    def work(state: State) -> dict[str, Any]:
        if not gate.acquire(timeout=30):
            raise TimeoutError("the test did not open the gate")
        return {"count": state.get("count", 0) + 1}

    g = StateGraph(State)
    g.add_node("work", work)
    g.add_edge(START, "work")
    g.add_conditional_edges("work", lambda s: "work" if s["count"] < steps else END)
    return g.compile(checkpointer=saver)


class Served:
    """A dashboard app served by uvicorn in a thread on a free loopback port."""

    def __init__(self, app: Any) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}/"
        self.server = uvicorn.Server(uvicorn.Config(app, log_level="warning", access_log=False,
                                                    timeout_graceful_shutdown=2))
        self.thread = threading.Thread(target=self.server.run, kwargs={"sockets": [self.sock]},
                                       daemon=True)
        self.thread.start()
        wait_for(lambda: self.server.started, 10, "uvicorn to start")

    def close(self) -> None:
        self.server.should_exit = True
        self.thread.join(10)
        self.sock.close()


@pytest.fixture(scope="module")
def saver(redis_url: str, mongo_url: str, tmp_path_factory: Any) -> Iterator[DurableSaver]:
    serde = ExternalRefSerializer(store=LocalBlobStore(tmp_path_factory.mktemp("blobs")),
                                  threshold_bytes=64)
    with DurableSaver.from_urls(redis_url, mongo_url, serde=serde, **unique_options()) as s:
        yield s


@pytest.fixture(scope="module")
def finished(saver: DurableSaver) -> dict[str, Any]:
    """Thread "weather" run to the end: 5 checkpoints (steps -1..3), ids newest first."""
    cfg = {"configurable": {"thread_id": "weather"}}
    graph = agent_graph(saver)
    graph.invoke({"messages": [HumanMessage("Weather in Oslo?", id="h-1")]}, cfg)
    ids = [s.config["configurable"]["checkpoint_id"] for s in graph.get_state_history(cfg)]
    return {"ids": ids}


@pytest.fixture(scope="module")
def readonly(saver: DurableSaver) -> Iterator[str]:
    served = Served(create_app(saver, poll_s=0.2, index_ttl_s=0))
    yield served.url
    served.close()


@pytest.fixture(scope="module")
def writable(saver: DurableSaver) -> Iterator[str]:
    served = Served(create_app(saver, token=TOKEN, allow_writes=True, poll_s=0.2))
    yield served.url
    served.close()


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    with sync_playwright() as pw:
        b = pw.chromium.launch(executable_path="/usr/bin/chromium", args=CHROMIUM_ARGS)
        yield b
        b.close()


@pytest.fixture
def page(browser: Browser) -> Iterator[Page]:
    expect.set_options(timeout=WAIT_MS)
    context = browser.new_context()
    p = context.new_page()
    p.set_default_timeout(WAIT_MS)
    yield p
    context.close()


def test_a_running_graph_appears_in_the_list_and_its_step_rises_without_a_reload(
        saver: DurableSaver, readonly: str, page: Page) -> None:
    page.goto(readonly)
    page.evaluate("window.__same_page = true")
    gate = threading.Semaphore(0)
    graph = gated_graph(saver, gate, steps=3)
    run = threading.Thread(target=graph.invoke,
                           args=({"count": 0}, {"configurable": {"thread_id": "live-1"}}))
    run.start()
    try:
        row = page.locator('tr[data-thread="live-1"]')
        expect(row.locator(".step")).to_have_text("0")  # appeared: START ran, work waits
        expect(row.locator(".status")).to_have_text("running")
        gate.release()
        expect(row.locator(".step")).to_have_text("1")
        thread_page = page.context.new_page()  # the thread's page, open while it runs
        thread_page.goto(readonly + "thread?thread_id=live-1")
        expect(thread_page.locator("#timeline tbody tr").first).to_have_attribute(
            "data-step", "1")
        assert thread_page.locator("#newer").is_hidden()
        for step in ("2", "3"):
            gate.release()
            expect(row.locator(".step")).to_have_text(step)
        expect(row.locator(".status")).to_have_text("done")
        expect(thread_page.locator("#newer-step")).to_have_text("3")  # it says so, live
        expect(thread_page.locator("#newer-status")).to_have_text("done")
        assert thread_page.locator("#newer").is_visible()
        expect(row.locator("td").nth(2)).to_have_text("work")  # the last node
        assert page.evaluate("window.__same_page") is True  # no reload happened
    finally:
        gate.release(3)
        run.join(30)


def test_timeline_state_and_diff_are_reached_by_clicking(
        finished: dict, readonly: str, page: Page) -> None:
    page.goto(readonly)
    page.locator('tr[data-thread="weather"] a').click()
    expect(page.locator("#thread-id")).to_have_text("weather")
    expect(page.locator("#thread-status")).to_have_text("done")
    rows = page.locator("#timeline tbody tr")
    expect(rows).to_have_count(5)
    assert rows.evaluate_all("rs => rs.map(r => r.dataset.step)") == ["3", "2", "1", "0", "-1"]
    expect(rows.nth(3).locator(".ran")).to_have_text("agent")  # step 0 triggers agent
    expect(rows.nth(2).locator(".ran")).to_have_text("tool")
    # the state at step 2: the tool call paired with its result, the DataFrame's head
    rows.nth(1).locator(".cid a").click()
    expect(page.locator("#state h2").first).to_contain_text("state at step 2")
    call = page.locator(".turn.ai .call")
    expect(call.locator(".call-head")).to_have_text("calls lookup call-1")
    expect(call.locator(".result .text")).to_have_text("12 degrees")
    expect(page.locator(".turn.tool")).to_have_count(0)  # shown with its call, not alone
    frame = page.locator('.channel[data-channel="table"] .frame')
    expect(frame.locator(".frame-head")).to_have_text("DataFrame 3 × 2")
    expect(frame.locator("thead th")).to_have_text(["", "city", "temp"])
    expect(frame.locator("tbody tr").first).to_have_text("0Oslo12")
    # diff: a = step 2, b = step 3 (the defaults: the two newest)
    page.goto(readonly + "thread?thread_id=weather")
    page.locator("#diff-button").click()
    expect(page.locator("h1")).to_have_text("diff of weather: step 2 → 3")
    expect(page.locator('#diff tr[data-channel="count"] .details')).to_have_text("2 -> 3")
    expect(page.locator('#diff tr[data-channel="messages"] .details')).to_have_text(
        "added 1 (ai ai-2); 3 -> 4 items")


def test_hostile_message_content_is_shown_as_text_and_never_runs(
        saver: DurableSaver, readonly: str, page: Page) -> None:
    graph = agent_graph(saver)
    graph.invoke({"messages": [HumanMessage(HOSTILE, id="h-x")]},
                 {"configurable": {"thread_id": "hostile<b>x</b>"}})
    page.goto(readonly + "?q=hostile")
    expect(page.locator("tr[data-thread] .tid")).to_have_text("hostile<b>x</b>")
    page.locator("tr[data-thread] .tid a").click()
    expect(page.locator("#thread-id")).to_have_text("hostile<b>x</b>")
    expect(page.locator(".turn.human .text")).to_have_text(HOSTILE)
    assert page.evaluate("typeof window.__pwned") == "undefined"
    assert page.locator('a[href^="javascript"]').count() == 0
    assert page.locator(".turn.human .text *").count() == 0  # no element made from it
    assert page.locator("main script, main img, h1 b").count() == 0


def test_fork_with_writes_allowed_makes_a_thread_with_the_edited_value(
        saver: DurableSaver, finished: dict, writable: str, page: Page) -> None:
    page.goto(writable + "?token=" + TOKEN)  # sets the cookie, redirects without it
    assert "token" not in page.url
    step2 = finished["ids"][1]  # after "tool": count 2, next is "final"
    page.goto(writable + f"thread?thread_id=weather&checkpoint={step2}")
    expect(page.locator("#fork-command")).to_have_text(
        f"langgraph-durable fork weather --checkpoint {step2} --to weather-fork")
    page.locator("#fork-to").fill("weather-edit")
    page.locator("#fork-channel").select_option("count")
    page.locator("#fork-value").fill("41")
    page.locator("#fork-button").click()
    expect(page.locator("#thread-id")).to_have_text("weather-edit")
    expect(page.locator('.channel[data-channel="count"] pre')).to_have_text("41")
    tup = saver.get_tuple({"configurable": {"thread_id": "weather-edit"}})
    assert tup is not None and tup.checkpoint["channel_values"]["count"] == 41
    assert tup.metadata["source"] == "fork" and tup.metadata["forked_from_checkpoint"] == step2
    final = agent_graph(saver).invoke(None, {"configurable": {"thread_id": "weather-edit"}})
    assert final["count"] == 42  # "final" ran from the edited state
    # without the CSRF field the same request is refused, and nothing is written
    r = page.request.post(writable + "fork", form={
        "thread_id": "weather", "checkpoint_id": step2, "to": "weather-csrf"})
    assert r.status == 403 and "CSRF" in r.text()
    assert saver.get_tuple({"configurable": {"thread_id": "weather-csrf"}}) is None


def test_fork_is_refused_without_allow_writes(
        saver: DurableSaver, finished: dict, readonly: str, page: Page) -> None:
    step1 = finished["ids"][2]
    page.goto(readonly + f"thread?thread_id=weather&checkpoint={step1}")
    expect(page.locator("#writes-off")).to_contain_text("Writes are off")
    assert page.locator("#fork-form").count() == 0
    r = page.request.post(readonly + "fork", form={
        "thread_id": "weather", "checkpoint_id": step1, "to": "weather-ro"})
    assert r.status == 403
    assert f"langgraph-durable fork weather --checkpoint {step1} --to weather-ro" in r.text()
    assert saver.get_tuple({"configurable": {"thread_id": "weather-ro"}}) is None


def test_a_dashboard_with_a_token_refuses_requests_without_it(
        writable: str, page: Page) -> None:
    r = page.request.get(writable + "api/threads")
    assert r.status == 401
    ok = page.request.get(writable + "api/threads",
                          headers={"Authorization": f"Bearer {TOKEN}"})
    assert ok.status == 200 and "rows" in ok.json()
    by_query = page.request.get(writable + "api/threads?token=" + TOKEN, max_redirects=0)
    assert by_query.status == 200 and by_query.json()["page"] == 1  # JSON: no redirect


def test_a_non_loopback_bind_without_a_token_is_refused(saver: DurableSaver) -> None:
    result = CliRunner().invoke(cli_app, ["dashboard", "--host", "0.0.0.0"],
                                env={"LGD_DASHBOARD_TOKEN": ""})
    assert result.exit_code == 1
    assert result.stderr == ("error: dashboard: binding '0.0.0.0' (not a loopback address) "
                             "needs a token: pass --token or set LGD_DASHBOARD_TOKEN (or bind "
                             "127.0.0.1)\n")
    with pytest.raises(ConfigurationError, match="--allow-writes needs a token"):
        create_app(saver, allow_writes=True)


def test_the_tiers_page_and_its_json_show_outbox_flushers_and_collections(
        saver: DurableSaver, finished: dict, readonly: str, page: Page) -> None:
    saver.flush()
    data = json.loads(page.request.get(readonly + "api/tiers").text())
    checkpoints = saver.sync_clients.db[saver.context.collections.checkpoints]
    assert data["outbox"]["length"] == 0 and data["outbox"]["oldest_age_s"] is None
    assert data["durable"]["checkpoints"]["documents"] == checkpoints.count_documents({})
    assert [c["heartbeat"] for c in data["outbox"]["consumers"]] == ["alive"]
    assert data["key_prefix"] == saver.context.config.key_prefix and data["down"] == {}
    assert len(data["lag"]) >= 1
    page.goto(readonly + "tiers")
    expect(page.locator("#outbox-length")).to_have_text("0")
    expect(page.locator("#consumers tbody tr")).to_have_count(1)
    expect(page.locator("#collections tbody tr").first).to_contain_text(
        saver.context.collections.checkpoints)
    assert re.fullmatch(r"\d+(\.\d)? (B|KiB|MiB)", page.locator("#hot-bytes").inner_text())


def _put_many(saver: DurableSaver, thread: str, n: int) -> None:
    cfg: Any = {"configurable": {"thread_id": thread, "checkpoint_ns": ""}}
    for i in range(n):
        cp = empty_checkpoint()
        cp["channel_values"] = {"v": i}
        cp["channel_versions"] = {"v": str(i + 1)}
        cfg = saver.put(cfg, cp, {"step": i}, {"v": str(i + 1)})


def test_the_tiers_page_shows_the_verdict_and_updates_it_without_a_reload(
        redis_url: str, mongo_url: str, page: Page) -> None:
    opts = unique_options()
    with DurableSaver.from_urls(redis_url, mongo_url, flusher="off", **opts) as off:
        off.setup()
        served = Served(create_app(off, poll_s=0.2, tiers_poll_s=0.2))
        try:
            page.goto(served.url + "tiers")
            expect(page.locator("#verdict-level")).to_have_text("degraded")
            expect(page.locator("#reasons")).to_contain_text("no flusher is alive")
            page.evaluate("window.__same_page = 1")
            _put_many(off, "waits", 2)
            expect(page.locator("#verdict-level")).to_have_text("failing")
            expect(page.locator("#reasons li").first).to_have_text(
                "failing: no flusher is alive and 2 outbox entries wait for MongoDB: start "
                "a worker (langgraph-durable flusher) or a saver with a flusher")
            expect(page.locator("#outbox-length")).to_have_text("2")
            with DurableSaver.from_urls(redis_url, mongo_url, **opts) as on:
                on.flush()
                expect(page.locator("#verdict-level")).to_have_text("ok")
                expect(page.locator("#outbox-length")).to_have_text("0")
                expect(page.locator("#verdict")).to_have_class("verdict ok")
            assert page.evaluate("window.__same_page") == 1  # never reloaded
            data = json.loads(page.request.get(served.url + "api/tiers").text())
            assert data["health"]["verdict"] == "degraded"  # its flusher stopped again
            names = [c["collection"] for c in data["durable"].values()]
            cols = off.context.collections
            assert names == [cols.checkpoints, cols.blobs, cols.writes, cols.meta,
                             cols.chunks, cols.items, cols.tombstones, cols.effects, cols.store,
                             cols.audit, cols.threads, cols.retention,
                             "total"]
            assert data["durable"]["total"]["documents"] == sum(
                c["documents"] for k, c in data["durable"].items() if k != "total")
        finally:
            served.close()


def test_the_memory_page_lists_namespaces_and_shows_a_put_item(
        saver: DurableSaver, readonly: str, page: Page) -> None:
    store = saver.store()  # the saver's runtime: the put is unflushed (Redis) at first
    store.put(("users", "alice", "memories"), "m1", {"text": HOSTILE, "kind": "note"})
    store.put(("users", "alice", "memories"), "m2", {"text": "likes tea"})
    store.put(("users", "bob"), "m1", {"text": "likes coffee"})
    page.goto(readonly)
    page.locator("header nav a", has_text="memory").click()
    expect(page.locator("main h1")).to_contain_text("memory")
    rows = page.locator("#namespaces tbody tr")
    expect(rows).to_have_count(2)
    assert rows.evaluate_all("rs => rs.map(r => [r.dataset.ns, r.querySelector('.count')"
                             ".textContent])") == [["users.alice.memories", "2"],
                                                   ["users.bob", "1"]]
    rows.first.locator("a").click()
    expect(page.locator("#memory-ns")).to_have_text("users.alice.memories")
    items = page.locator("#items tbody tr")
    expect(items).to_have_count(2)
    assert items.evaluate_all("rs => rs.map(r => r.dataset.key)") == ["m1", "m2"]
    shown = json.loads(items.first.locator(".value pre").text_content() or "")
    assert shown == {"text": HOSTILE, "kind": "note"}  # escaped: shown as text
    assert page.evaluate("typeof window.__pwned") == "undefined"
    assert page.locator("main script, main img, #items a").count() == 0
    # after a flush, the same from MongoDB
    saver.flush()
    page.reload()
    expect(page.locator("#items tbody tr")).to_have_count(2)
    page.goto(readonly + "memory?ns=users..alice")
    expect(page.locator("main")).to_contain_text("label 2 is empty")


@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_every_page_fits_a_390_px_screen_and_tables_scroll_inside_their_box(
        browser: Browser, finished: dict, readonly: str, scheme: str) -> None:
    context = browser.new_context(viewport={"width": 390, "height": 844},
                                  color_scheme=scheme)  # type: ignore[arg-type]
    try:
        p = context.new_page()
        p.set_default_timeout(WAIT_MS)
        a, b = finished["ids"][1], finished["ids"][0]
        for path in ("", "thread?thread_id=weather", "tiers", "memory?ns=users.bob",
                     f"diff?thread_id=weather&a={a}&b={b}"):
            p.goto(readonly + path)
            p.locator("main h1").wait_for()
            assert p.evaluate("document.documentElement.scrollWidth") <= 390, path
        bg = p.evaluate("getComputedStyle(document.body).backgroundColor")
        assert bg == ("rgb(255, 255, 255)" if scheme == "light" else "rgb(20, 23, 28)")
    finally:
        context.close()


def test_at_1400_px_the_timeline_stays_inside_its_column(
        browser: Browser, saver: DurableSaver, readonly: str) -> None:
    source = "weather-of-the-northern-fjords-for-the-whole-week"  # a wide timeline row
    cfg = {"configurable": {"thread_id": source}}
    agent_graph(saver).invoke({"messages": [HumanMessage("Weather?", id="h-1")]}, cfg)
    latest = saver.get_tuple(cfg).config["configurable"]["checkpoint_id"]
    lookup.fork(saver, saver.sync_clients, source, latest, source + "-fork")
    context = browser.new_context(viewport={"width": 1400, "height": 900})
    try:
        p = context.new_page()
        p.goto(readonly + "thread?thread_id=" + source + "-fork")
        p.locator("#timeline").wait_for()
        box = p.evaluate("""() => {
            const t = document.querySelector('section.timeline');
            const s = document.getElementById('state');
            const table = document.getElementById('timeline');
            return {section: t.getBoundingClientRect().right,
                    table: table.getBoundingClientRect().right,
                    clipped: getComputedStyle(t).overflowX !== 'visible',
                    state: s.getBoundingClientRect().left}; }""")
        assert box["section"] <= box["state"]
        assert box["table"] <= box["state"] or box["clipped"], box
    finally:
        context.close()


def test_form_fields_have_labels(finished: dict, writable: str, page: Page) -> None:
    page.goto(writable + "?token=" + TOKEN)
    assert page.locator("label[for=q]").count() == 1
    page.goto(writable + "thread?thread_id=weather")
    for field in ("fork-to", "fork-channel", "fork-value"):
        assert page.locator(f"label[for={field}]").count() == 1, field
    assert page.locator("#timeline input[type=radio]:not([aria-label])").count() == 0


def test_the_memory_page_says_when_it_counted_only_the_first_items(
        redis_url: str, mongo_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    from langgraph_durable.dashboard import memory_page as memory

    monkeypatch.setattr(memory, "SCAN_ITEMS", 3)
    with DurableSaver.from_urls(redis_url, mongo_url, flusher="off", **unique_options()) as s:
        store = s.store()
        for i in range(3):
            store.put(("a",), f"k{i}", {"i": i})
        store.put(("b",), "k", {"i": 9})
        view = memory.memory_view(memory.memory_store(s), "b")
        assert (view["complete"], view["scanned"]) == (False, 3)
        assert view["namespaces"] == [{"ns": "a", "count": 3}]
        assert [i["key"] for i in view["items"]] == ["k"]  # read on its own
        store.delete(("a",), "k0")
        view = memory.memory_view(memory.memory_store(s))
        assert view["complete"] and view["namespaces"] == [{"ns": "a", "count": 2},
                                                           {"ns": "b", "count": 1}]


def test_the_thread_page_lists_journaled_effects_and_marks_model_calls(
        saver: DurableSaver, readonly: str, page: Page) -> None:
    """A node journals an effect (``once``) and three model calls (one answering hostile
    markup), then interrupts: the page of the latest checkpoint lists them, the model
    calls marked as journaled with their model, call number, tokens and answer; the
    answer is text, never markup; /api/thread carries the same rows."""
    hostile = journaled(GenericFakeChatModel(messages=iter([AIMessage(
        HOSTILE, usage_metadata={"input_tokens": 7, "output_tokens": 3,
                                 "total_tokens": 10})])), name="hostile")
    counting = journaled(Counting(key="dashboard-effects"))

    def node(state: JState) -> dict[str, Any]:
        once("note", lambda: {"noted": 1})
        answers = [str(counting.invoke(f"q {i}").content) for i in range(2)]
        answers.append(str(hostile.invoke("q").content))
        return {"out": " ".join(answers), "ok": interrupt("approve?")}

    g = StateGraph(JState)
    g.add_node("node", node)
    g.add_edge(START, "node")
    g.add_edge("node", END)
    g.compile(checkpointer=saver).invoke({"prompt": "q"},
                                         {"configurable": {"thread_id": "journal-1"}})
    page.goto(readonly + "thread?thread_id=journal-1")
    rows = page.locator("#effects-table tbody tr")
    expect(rows).to_have_count(4)
    assert rows.evaluate_all("rs => rs.map(r => [r.dataset.kind, r.dataset.effect, "
                             "r.dataset.call])") == [
        ["model_call", "model:Counting", "0"], ["model_call", "model:Counting", "1"],
        ["model_call", "model:hostile", "0"], ["effect", "note", "0"]]
    first = rows.nth(0)
    expect(first.locator(".mark.model-call")).to_have_text("model call")
    expect(first.locator("td").nth(1)).to_have_text("model call Counting")
    expect(first.locator("td").nth(4)).to_have_text("15")
    expect(first.locator(".answer .text")).to_have_text("answer-1")
    expect(first.locator(".journaled")).to_have_text(
        "journaled: a re-execution of this task returns this answer without calling the "
        "model")
    expect(rows.nth(2).locator(".answer .text")).to_have_text(HOSTILE)
    assert rows.nth(2).locator(".answer .text *").count() == 0  # text, no element
    assert page.evaluate("typeof window.__pwned") == "undefined"
    expect(rows.nth(3).locator("td").nth(5)).to_contain_text('"noted": 1')
    expect(page.locator("#effects-legend")).to_contain_text(
        "3 journaled model call(s), 40 tokens")
    expect(page.locator("#effects-legend")).to_contain_text(
        "Whether an answer was replayed is not stored")
    data = json.loads(page.request.get(readonly + "api/thread?thread_id=journal-1").text())
    summary = [(r["kind"], r["call"], (r.get("model_call") or {}).get("tokens"))
               for r in data["effects"]["rows"]]
    assert summary == [("model_call", 0, {"input": 10, "output": 5, "total": 15}),
                       ("model_call", 1, {"input": 10, "output": 5, "total": 15}),
                       ("model_call", 0, {"input": 7, "output": 3, "total": 10}),
                       ("effect", 0, None)]
    # an earlier checkpoint: its tasks journaled nothing
    page.locator("#timeline tbody tr").nth(1).locator(".cid a").click()
    expect(page.locator("#effects-none")).to_have_text("none")


def test_the_thread_list_shows_state_versions_and_counts_threads_needing_migration(
        redis_url: str, mongo_url: str, readonly: str, finished: dict, page: Page) -> None:
    """Each row shows the state version of its thread's latest checkpoint (metadata
    ``lgd_state_version``; none: "unversioned"); given the application's current version
    (2) the list counts the threads older (unversioned counts as 1) and newer, live; the
    thread page says the same of its checkpoint. Without a current version nothing is
    counted."""
    key = "lgd_state_version"
    g = StateGraph(State)
    g.add_node("count", lambda state: {"count": state.get("count", 0) + 1})
    g.add_edge(START, "count")
    g.add_edge("count", END)
    opts = unique_options()
    with DurableSaver.from_urls(redis_url, mongo_url, **opts) as s, \
            DurableSaver.from_urls(redis_url, mongo_url, **opts, state_version=2) as app_s:
        graph = g.compile(checkpointer=s)

        def run(tid: str, version: int | None) -> None:
            graph.invoke({"count": 0}, {"configurable": {"thread_id": tid},
                          "metadata": {} if version is None else {key: version}})

        for tid, version in (("sv-1", 1), ("sv-2", 2), ("sv-none", None), ("sv-3", 3)):
            run(tid, version)
        # the application's own saver (state_version=2, no migrations): the dashboard
        # shows its checkpoints as stored, a v1 one unmigrated, a v3 one not refused
        served = Served(create_app(app_s, poll_s=0.2, index_ttl_s=0, state_version=2))
        try:
            page.goto(served.url)
            page.evaluate("window.__same_page = true")
            expect(page.locator("#older-count")).to_have_text("2")  # sv-1, sv-none
            expect(page.locator("#newer-count")).to_have_text("1")  # sv-3
            cell = page.locator('tr[data-thread="sv-1"] .state-version')
            expect(cell).to_have_text("1")
            expect(cell).to_have_class(re.compile(r"\bolder\b"))
            expect(page.locator('tr[data-thread="sv-none"] .state-version')).to_have_text(
                "unversioned")
            expect(page.locator('tr[data-thread="sv-2"] .state-version')).to_have_text("2")
            expect(page.locator('tr[data-thread="sv-3"] .state-version')).to_have_class(
                re.compile(r"\bnewer\b"))
            expect(page.locator("#needs-migration")).to_contain_text(
                "migrate-state --state-version 2")
            run("sv-1b", 1)  # one more old thread: counted without a reload
            expect(page.locator("#older-count")).to_have_text("3")
            assert page.evaluate("window.__same_page") is True
            data = page.request.get(served.url + "api/threads").json()
            assert data["versions"] == {"current": 2, "older": 3, "newer": 1, "same": 1}
            assert {r["thread_id"]: r["state_version"] for r in data["rows"]} == {
                "sv-1": 1, "sv-1b": 1, "sv-2": 2, "sv-none": None, "sv-3": 3}
            page.goto(served.url + "thread?thread_id=sv-1")
            expect(page.locator("#state-version")).to_have_text("1")
            expect(page.locator("#state-older")).to_have_text(
                "older than 2: migrated on read")
            expect(page.locator('.channel[data-channel="count"] pre')).to_have_text("1")
            page.goto(served.url + "thread?thread_id=sv-3")
            expect(page.locator("#state-newer")).to_have_text(
                "newer than 2: refused on resume")
        finally:
            served.close()
    page.goto(readonly)  # no current version given: versions shown, nothing counted
    expect(page.locator('tr[data-thread="weather"] .state-version')).to_have_text(
        "unversioned")
    assert page.locator("#needs-migration").count() == 0
