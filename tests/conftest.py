"""Shared fixtures: savers on the real servers of ``langgraph_durable.testing``.

Every saver gets its own key prefix and MongoDB database (``testing.unique_options``), so
tests never see each other's data and need no FLUSHALL between them. Shared helpers live
in ``langgraph_durable.testing`` (``unique_options``, ``wait_for``), imported from there,
never from a conftest.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest
import redis

from langgraph_durable import DurableSaver
from langgraph_durable.testing import unique_options


@pytest.fixture
def saver(redis_url: str, mongo_url: str) -> Iterator[DurableSaver]:
    """A sync-constructed saver (sync clients; async methods work too)."""
    with DurableSaver.from_urls(redis_url, mongo_url, **unique_options()) as s:
        yield s


@pytest.fixture
async def asaver(redis_url: str, mongo_url: str) -> AsyncIterator[DurableSaver]:
    """A saver entered with ``async with`` (asyncio clients for this event loop)."""
    async with DurableSaver.from_urls(redis_url, mongo_url, **unique_options()) as s:
        yield s


@pytest.fixture
def svc() -> Iterator[Any]:
    """A running ``effects_support.Service``: a local HTTP service that counts the calls
    and effects of the effect tests."""
    from .effects_support import service

    with service() as s:
        yield s


@pytest.fixture
def redis_client(redis_url: str) -> Iterator[redis.Redis]:
    """A plain Redis client, to look at or damage what the saver stored."""
    client = redis.Redis.from_url(redis_url)
    yield client
    client.close()


# --- parallel runs: `make test` runs pytest with `-n 4` (pytest-xdist) ---------------------
# Each worker is its own pytest session: the session fixtures of langgraph_durable.testing
# start a Redis, a SecantusDB, a moto, a cluster... per worker, and every saver has its own
# key prefix and database, so tests do not see each other across workers either.

ONE_WORKER = {
    "tests/test_wheel.py": "setuptools builds the wheel inside the source tree (build/, "
                           "*.egg-info): two builds at once break each other",
    "tests/compaction/test_compaction_figure.py": "its module fixture runs the script (8 s)",
    "tests/test_dashboard.py": "a browser and a served saver per module",
    "tests/test_dashboard_actions.py": "a browser and a served saver per module",
    "tests/test_dashboard_find.py": "a browser and a served saver per module",
    "tests/test_run_view.py": "a browser and a served saver per module",
}
"""Modules whose tests all run on one worker, in order (module fixtures shared or that must
not run twice at once). pytest-xdist's ``xdist_group`` mark cannot say it: with pytest 9.2
``--dist loadgroup`` silently ignores it (pytest-xdist issue 1386), so the scheduler below
groups by this table."""

_SUITES = ("tests/store/test_langgraph_store_suite.py::"
           "test_durable_store_passes_langgraph_store_tests")
RUN_FIRST = (
    f"{_SUITES}[postgres-cold]",
    f"{_SUITES}[sqlite-",
    f"{_SUITES}[checkpoint-",
    "tests/test_benchmarks_smoke.py::test_quick_run_writes_report_and_plots",
    "tests/faults/test_fault_mongo_down.py::test_mongodb_down_bounded_backlog",
    "tests/test_demo.py::",
    "tests/test_notebooks.py::",
    f"{_SUITES}[postgres-hot]",
    "tests/test_many_processes.py::",
    "tests/faults/test_fault_delete_races.py::",
    "tests/store/test_langgraph_store_suite.py::test_durable_store_on_a_redis_cluster",
    "tests/faults/test_fault_app_killed.py::",
    "tests/store/test_langgraph_store_suite.py::test_durable_store_on_the_redis_index",
    "tests/test_previous_release.py::",
    "tests/cli/test_process_output.py::test_with_",
    "tests/faults/test_fault_failover.py::",
    "tests/faults/test_fault_flusher_killed.py::",
    "tests/test_big_values.py::",
    "tests/test_heartbeat.py::test_a_consumer_without_a_heartbeat",
    "tests/test_wheel.py::",
    "tests/compaction/test_compaction_figure.py::",
    "tests/test_conformance.py::",
    "tests/test_store_benchmark_smoke.py::",
    "tests/faults/",
)
"""Node id prefixes of the slowest tests (measured: 5 to 110 s each), slowest first: a
worker run starts them first, so that no long test starts last while the others idle.
The Postgres suite hot starts after the demo and notebooks, not beside the same suite
cold: each sleeps 34 s in its TTL tests, and started together they slept at the same
time, 100-125 s into the run, with the CPU idle 35-94% (vmstat)."""


def _first_rank(nodeid: str) -> int:
    return next((i for i, p in enumerate(RUN_FIRST) if nodeid.startswith(p)), len(RUN_FIRST))


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """On an xdist worker: the tests of ``RUN_FIRST`` first (stable: in collection order
    within a prefix), then the rest; every worker collects the same order."""
    if hasattr(config, "workerinput"):
        items.sort(key=lambda item: _first_rank(item.nodeid))


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: object) -> object | None:
    """``--dist load`` (what ``-n`` gives) and ``--dist loadgroup``: each test its own unit
    of work, handed to the next idle worker in the (``RUN_FIRST``) order, except the
    modules of ``ONE_WORKER``, each one unit."""
    if config.getvalue("dist") not in ("load", "loadgroup"):
        return None
    from xdist.scheduler import LoadScopeScheduling

    class Scheduler(LoadScopeScheduling):  # type: ignore[misc]
        def __init__(self, config: pytest.Config, log: object = None) -> None:
            super().__init__(config, log)  # type: ignore[arg-type]
            config.option.loadscopereorder = False  # keep the collection's order

        def _split_scope(self, nodeid: str) -> str:
            module = nodeid.split("::", 1)[0]
            return module if module in ONE_WORKER else nodeid

    return Scheduler(config, log)
