"""Finding threads on the dashboard's list (issue 36 item 2), in a real browser (Debian's
chromium via Playwright, as tests/test_dashboard.py): the status filters' counts equal
each thread's status as the dashboard computes it from its latest checkpoint; status,
metadata and text filters find the right threads and deep links and the pager keep them;
"needs attention" lists the oldest first; a change of one thread replaces its row only."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any
from urllib.parse import parse_qs, urlparse

import pytest
from langgraph.types import Command
from playwright.sync_api import Browser, Page, expect, sync_playwright

from langgraph_durable import DurableSaver
from langgraph_durable.dashboard import create_app, listing
from langgraph_durable.testing import unique_options

from .test_dashboard import CHROMIUM_ARGS, Served
from .test_thread_summary import _ask, _fail, _reply, graph, run, truth, waiting

WAIT_MS = 15_000
THREADS = ("t-done", "t-ask", "t-fail", "t-stalled", "t-running", "t-ready")


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    with sync_playwright() as pw:
        b = pw.chromium.launch(executable_path="/usr/bin/chromium", args=CHROMIUM_ARGS)
        yield b
        b.close()


@pytest.fixture
def page(browser: Browser) -> Iterator[Page]:
    # expect()'s own timeout too (5 s by default): it was 15 s only when
    # tests/test_dashboard.py's page fixture had set it earlier in the same process
    expect.set_options(timeout=WAIT_MS)
    context = browser.new_context()
    context.set_default_timeout(WAIT_MS)
    p = context.new_page()
    yield p
    context.close()


@pytest.fixture
def served(redis_url: str, mongo_url: str) -> Iterator[tuple[DurableSaver, str]]:
    with DurableSaver.from_urls(redis_url, mongo_url, **unique_options()) as saver:
        run(saver, "t-done", _reply, "what is the weather", team="red")
        run(saver, "t-ask", _ask, "please deploy", team="blue")
        run(saver, "t-fail", _fail, "break it", team="red")
        waiting(saver, "t-stalled", 3600)
        waiting(saver, "t-running", 0)
        waiting(saver, "t-ready", 0, "update")
        saver.flush()
        app = Served(create_app(saver, poll_s=0.2))
        try:
            yield saver, app.url
        finally:
            app.close()


def _rows(page: Page) -> list[str]:
    return page.locator("#rows tr[data-thread]").evaluate_all(
        "rs => rs.map(r => r.dataset.thread)")


def _query(page: Page) -> dict[str, list[str]]:
    return parse_qs(urlparse(page.url).query)


def test_status_filter_counts_equal_the_truth_and_filters_find_the_right_threads(
        served: tuple[DurableSaver, str], page: Page, monkeypatch: Any) -> None:
    saver, url = served
    truth_of = {t: truth(saver, t)["status"] for t in THREADS}
    page.goto(url)
    for status in listing.FILTERS:
        want = sum(1 for s in truth_of.values() if s == status)
        expect(page.locator(f'.count[data-count="{status}"]')).to_have_text(str(want))
    expect(page.locator('.count[data-count="attention"]')).to_have_text("3")
    for tid, status in truth_of.items():
        expect(page.locator(f'tr[data-thread="{tid}"] .status')).to_have_text(status)
    expect(page.locator('tr[data-thread="t-done"] .title')).to_have_text(
        "what is the weather")
    page.locator("#filter-error").click()
    expect(page.locator("#rows tr[data-thread]")).to_have_count(1)
    assert _rows(page) == ["t-fail"] and _query(page) == {"status": ["error"]}
    expect(page.locator('tr[data-thread="t-fail"] .detail')).to_have_text(
        "RuntimeError('the tool broke')")
    # a deep link with a metadata filter; a status filter clicked keeps it
    page.goto(url + "?where=team%3Dred")
    expect(page.locator("#rows tr[data-thread]")).to_have_count(2)
    assert sorted(_rows(page)) == ["t-done", "t-fail"]
    expect(page.locator('.count[data-count="done"]')).to_have_text("1")
    expect(page.locator('.count[data-count="interrupted"]')).to_have_text("0")
    page.locator("#filter-done").click()
    expect(page.locator("#rows tr[data-thread]")).to_have_count(1)
    assert _rows(page) == ["t-done"]
    assert _query(page) == {"status": ["done"], "where": ["team=red"]}
    # content search from the form
    page.goto(url)
    page.locator("#search").fill("DEPLOY")
    page.locator(".search button").click()
    expect(page.locator("#rows tr[data-thread]")).to_have_count(1)
    assert _rows(page) == ["t-ask"] and _query(page) == {"search": ["DEPLOY"]}
    # needs attention: oldest first; the pager keeps the filter
    monkeypatch.setattr(listing, "PAGE_SIZE", 2)
    page.goto(url)
    page.locator("#filter-attention").click()
    expect(page.locator("#rows tr[data-thread]")).to_have_count(2)
    assert _rows(page) == ["t-stalled", "t-ask"]
    page.locator("#older").click()
    expect(page.locator("#rows tr[data-thread]")).to_have_count(1)
    assert _rows(page) == ["t-fail"]
    assert _query(page) == {"status": ["attention"], "page": ["2"]}


def test_a_change_of_one_thread_replaces_its_row_only(
        served: tuple[DurableSaver, str], page: Page) -> None:
    saver, url = served
    page.goto(url)
    expect(page.locator('tr[data-thread="t-ask"] .status')).to_have_text("interrupted")
    # the stream's first update re-sends every row of the page: mark the rows after it
    expect(page.locator("#rows")).to_have_attribute("data-updates", "1")
    page.evaluate("""() => document.querySelectorAll('#rows tr[data-thread]')
                     .forEach(tr => { tr.__kept = tr.dataset.thread; })""")
    graph(saver, _ask).invoke(Command(resume=True), {"configurable": {"thread_id": "t-ask"}})
    saver.flush()
    expect(page.locator('tr[data-thread="t-ask"] .status')).to_have_text("done")
    expect(page.locator('.count[data-count="interrupted"]')).to_have_text("0")
    expect(page.locator('.count[data-count="done"]')).to_have_text("2")
    kept = page.evaluate("""() => Array.from(document.querySelectorAll(
        '#rows tr[data-thread]')).filter(tr => tr.__kept).map(tr => tr.__kept).sort()""")
    assert kept == ["t-done", "t-fail", "t-ready", "t-running", "t-stalled"]
    expect(page.locator('tr[data-thread="t-stalled"] .age')).to_have_text("1h 0m")
