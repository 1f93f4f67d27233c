"""The dashboard's actions in a real browser (Debian's chromium via Playwright, as
tests/test_dashboard.py): answering an interrupt resumes the thread and the audit log
shows it, live; a failed thread is retried with the graph the operator chooses."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from playwright.sync_api import Page, expect

from langgraph_durable import DurableSaver
from langgraph_durable.dashboard import create_app
from langgraph_durable.inspection import lookup
from langgraph_durable.testing import unique_options

from . import action_graphs
from .cli.clikit import first_input
from .test_dashboard import TOKEN, Served, browser, page  # noqa: F401 - fixtures

__all__ = ["browser", "page"]


@pytest.fixture(scope="module")
def saver(redis_url: str, mongo_url: str) -> Iterator[DurableSaver]:
    with DurableSaver.from_urls(redis_url, mongo_url, **unique_options()) as s:
        yield s


@pytest.fixture(scope="module")
def acting(saver: DurableSaver) -> Iterator[str]:
    """A dashboard with writes, a token and three graphs."""
    served = Served(create_app(saver, token=TOKEN, allow_writes=True, poll_s=0.2,
                               graphs={"approval": action_graphs.approval,
                                       "flaky": action_graphs.flaky,
                                       "gated": action_graphs.gated}))
    yield served.url
    served.close()


def _run(saver: DurableSaver, graph: Any, thread: str, data: Any,
         metadata: dict[str, Any] | None = None) -> None:
    try:
        graph.copy(update={"checkpointer": saver}).invoke(
            data, {"configurable": {"thread_id": thread}, "metadata": metadata or {}})
    except RuntimeError:
        pass  # the flaky node failed: the thread keeps its error


def _values(saver: DurableSaver, thread: str) -> dict[str, Any]:
    tup = saver.get_tuple({"configurable": {"thread_id": thread}})
    assert tup is not None
    return dict(tup.checkpoint["channel_values"])


def test_answering_an_interrupt_resumes_the_thread_and_the_audit_log_shows_it(
        saver: DurableSaver, acting: str, page: Page) -> None:
    _run(saver, action_graphs.approval, "web-ask", first_input(),
         {"lgd_graph": "approval"})  # the thread names its graph: no choice asked
    page.goto(acting + "?token=" + TOKEN)
    page.goto(acting + "thread?thread_id=web-ask")
    expect(page.locator("#thread-status")).to_have_text("interrupted")
    form = page.locator("form.act.resume")
    expect(form).to_have_count(1)
    expect(form.locator(".interrupt")).to_contain_text("publish?")
    assert page.locator("#actions select").count() == 0
    expect(page.locator("#audit-none")).to_be_visible()
    # a value that is not JSON is refused, recorded, and nothing runs
    form.locator("textarea.answer").fill("yes please")
    form.locator("button.answer-button").click()
    expect(page.locator("#error-message")).to_contain_text("the value is not JSON")
    page.goto(acting + "thread?thread_id=web-ask")
    page.locator("form.act.resume textarea.answer").fill('{"approved": true}')
    page.locator("form.act.resume button.answer-button").click()
    expect(page.locator("#thread-id")).to_have_text("web-ask")  # back on the thread
    page.evaluate("window.__same_page = 1")
    first = page.locator("#audit .audit-row").first
    expect(first).to_have_attribute("data-state", "done")  # updated live, no reload
    expect(first.locator(".audit-action")).to_have_text("resume")
    expect(first.locator(".audit-result")).to_contain_text("done at step 4")
    expect(first.locator(".audit-input")).to_contain_text('"approved": true')
    expect(page.locator("#audit .audit-row").nth(1)).to_have_attribute("data-state",
                                                                        "refused")
    assert page.evaluate("window.__same_page") == 1
    assert _values(saver, "web-ask")["notes"]["answer"] == {"approved": True}
    page.reload()
    expect(page.locator("#thread-status")).to_have_text("done")
    expect(page.locator("#actions-none")).to_contain_text("Nothing to do")
    data = page.request.get(acting + "api/audit?thread_id=web-ask").json()
    assert [e["state"] for e in data["entries"]] == ["done", "refused"]
    assert data["entries"][0]["who"].startswith("token:")


def test_a_failed_thread_is_retried_with_the_graph_chosen_on_the_page(
        saver: DurableSaver, acting: str, page: Page) -> None:
    action_graphs.FAILING.add("web-flaky")
    _run(saver, action_graphs.flaky, "web-flaky", {"count": 0})  # no graph named
    page.goto(acting + "?token=" + TOKEN)
    page.goto(acting + "thread?thread_id=web-flaky")
    expect(page.locator("#thread-status")).to_have_text("error")
    expect(page.locator(".act-command")).to_have_text(
        "langgraph-durable retry web-flaky --graph MODULE:ATTR")
    page.locator("#graph-retry").select_option("flaky")  # two graphs: the operator's choice
    page.locator("#retry-button").click()
    first = page.locator("#audit .audit-row").first
    expect(first).to_have_attribute("data-state", "done")
    expect(first.locator(".audit-result")).to_contain_text("done at step 2")
    expect(page.locator("#runs .run-state").first).to_have_text("done")
    assert _values(saver, "web-flaky")["count"] == 11
    tup = saver.get_tuple({"configurable": {"thread_id": "web-flaky"}})
    assert tup is not None and tup.metadata["lgd_graph"] == "flaky"  # stamped by the run
    page.reload()
    expect(page.locator("#thread-status")).to_have_text("done")


def test_a_fork_is_run_from_the_page_and_its_run_is_shown_live(
        saver: DurableSaver, acting: str, page: Page) -> None:
    action_graphs.GATE.set()
    _run(saver, action_graphs.gated, "g-src", {"count": 0}, {"lgd_graph": "gated"})
    history = list(saver.list({"configurable": {"thread_id": "g-src"}}))
    before_hold = next(t for t in history if t.metadata.get("step") == 1)
    lookup.fork(saver, saver.sync_clients, "g-src",
                before_hold.config["configurable"]["checkpoint_id"], "g-fork")
    action_graphs.GATE.clear()
    try:
        page.goto(acting + "?token=" + TOKEN)
        page.goto(acting + "thread?thread_id=g-fork")
        expect(page.locator("#thread-status")).to_have_text("ready")
        page.locator("#run-button").click()
        first = page.locator("#audit .audit-row").first
        expect(first).to_have_attribute("data-state", "running")
        expect(page.locator("#runs .run-state").first).to_have_text("running")
        page.evaluate("window.__same_page = 1")
        # a second action on the thread while it runs here is refused
        r = page.request.post(acting + "act", form={
            "csrf": page.locator("input[name=csrf]").first.get_attribute("value") or "",
            "thread_id": "g-fork", "action": "run"})
        assert r.status in (400, 409), r.status
    finally:
        action_graphs.GATE.set()
    rows = page.locator("#audit .audit-row")
    expect(rows.first).to_have_attribute("data-state", "refused")  # the second, newest
    expect(rows.first.locator(".audit-result")).to_contain_text("already has a run running")
    expect(rows.nth(1)).to_have_attribute("data-state", "done")  # without a reload
    expect(page.locator("#runs .run-state").first).to_have_text("done")
    assert page.evaluate("window.__same_page") == 1
    assert _values(saver, "g-fork")["count"] == 101
