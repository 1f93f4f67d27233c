"""pytest plugin that runs LangGraph's store suites on the store under test.

Loaded by :func:`langgraph_durable.testing.store_suite.run_suite` in a pytest subprocess
(``-p langgraph_durable.testing.store_suite_plugin``) whose working directory is an
extracted suite. Options: ``--store-suite`` (``checkpoint``, ``sqlite``, ``postgres``),
``--store-factory`` (``module:callable``), ``--store-mode`` (``hot`` or ``cold``),
``--store-exclusions`` (the file of excluded tests), ``--store-report`` (a JSON file
this plugin writes with every test's outcome, and the failed attempts of the tests
pytest-retry ran again) and ``--store-part`` (``all``; ``ttl``: only
the tests whose node id names TTL; ``rest``: the others; exclusions are matched against
every test either way, so each part reports the same stale ones).

**The factory.** ``callable(mode)`` returns a :class:`StoreFactory`: the class of the
stores it builds, the features it lacks (``missing``: ``"ttl"`` deselects the TTL tests,
each reported with that reason), ``open``/``aopen`` (a context manager yielding a
ready store for an index config and a TTL config, and closing it), and
``make_cold``/``amake_cold`` (cold mode: flush to the durable tier, then empty the hot
tier of that store's keys). :mod:`langgraph_durable.testing.store_factories` has the
factories of ``InMemoryStore`` and ``DurableStore``.

**How a suite's stores become the store under test.** When a test module is imported, the
names it builds stores with are replaced in its namespace before pytest reads its
fixtures: ``InMemoryStore``, ``SqliteStore``, ``AsyncSqliteStore``, ``PostgresStore``,
``AsyncPostgresStore`` become a *shim*: a subclass of the factory's store class whose
``Cls(index=...)`` and ``Cls.from_conn_string(conn, index=..., ttl=...)`` open a store
through the factory (the connection string and backend options such as ``pipeline`` or
``pool_config`` are ignored) and give it the shim as its class, so ``mocker.spy(Cls,
"batch")`` watches the store under test. Where an async suite awaits ``setup``,
``sweep_ttl``, ``start_ttl_sweeper`` or ``stop_ttl_sweeper``, the async shim awaits the
store's ``asetup``, ``asweep_ttl``... when it has them. A store built by ``Cls(...)``
is closed when its test ends. In cold mode the shim's ``batch``/``abatch`` call
``make_cold`` before any batch that reads (get, search, list_namespaces), except a sync
call inside the event loop on a store opened with ``async with``. The Postgres
modules' ``store`` fixture and ``_create_vector_store`` (they create a database first)
are replaced by ones with the same store options. Index configs are passed as
``{"dims", "embed", "fields"}`` (SQLite's ``text_fields`` is its name for ``fields``;
``distance_type`` and ``ann_index_config`` are dropped: every non-cosine test is
excluded).
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import inspect
import json
from collections.abc import AsyncIterator, Iterator
from contextlib import AbstractAsyncContextManager, AbstractContextManager
from pathlib import Path
from typing import Any, Protocol

import pytest
from langgraph.store.base import BaseStore, GetOp, ListNamespacesOp, SearchOp

from .store_suite import Exclusion, load_exclusions


class StoreFactory(Protocol):
    """What ``--store-factory`` names (after calling it with the mode)."""

    store_class: type[BaseStore]
    missing: tuple[str, ...]
    """Features the store lacks (``"ttl"``): the tests of each are deselected."""
    excluded: tuple[tuple[str, str, str], ...]
    """Optional: more tests to deselect for this store, as (suite, pattern, reason)."""

    def open(self, *, index: dict[str, Any] | None,
             ttl: dict[str, Any] | None) -> AbstractContextManager[BaseStore]: ...

    def aopen(self, *, index: dict[str, Any] | None,
              ttl: dict[str, Any] | None) -> AbstractAsyncContextManager[BaseStore]: ...

    def make_cold(self, store: BaseStore) -> None: ...

    async def amake_cold(self, store: BaseStore) -> None: ...


MISSING_FEATURE_TESTS: dict[str, tuple[tuple[str, str], ...]] = {
    "ttl": (
        ("sqlite", "tests/test_ttl.py::*"),
        ("postgres", "tests/test_store.py::test_store_ttl*"),
        ("postgres", "tests/test_async_store.py::test_store_ttl*"),
    ),
}
"""The tests a factory lacking a feature cannot pass, by feature (suite, pattern)."""

_READS = (GetOp, SearchOp, ListNamespacesOp)
_STATE: dict[str, Any] = {"stack": None}


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("store-suite")
    group.addoption("--store-suite", required=True, help="checkpoint, sqlite or postgres")
    group.addoption("--store-factory", required=True, help="module:callable")
    group.addoption("--store-mode", default="hot", choices=("hot", "cold"))
    group.addoption("--store-exclusions", default=None, help="file of excluded tests")
    group.addoption("--store-report", default=None, help="JSON file of the outcomes")
    group.addoption("--store-part", default="all", choices=("all", "ttl", "rest"),
                    help="run every test, only those whose node id names TTL, or the rest")


def _load_factory(spec: str, mode: str) -> StoreFactory:
    module, _, name = spec.partition(":")
    if not name:
        raise pytest.UsageError(f"--store-factory must be 'module:callable', got {spec!r}")
    factory: StoreFactory = getattr(importlib.import_module(module), name)(mode)
    return factory


def pytest_configure(config: pytest.Config) -> None:
    mode = config.getoption("--store-mode")
    factory = _load_factory(config.getoption("--store-factory"), mode)
    path = config.getoption("--store-exclusions")
    exclusions = load_exclusions(Path(path) if path else None)
    suite = config.getoption("--store-suite")
    for s, pattern, reason in getattr(factory, "excluded", ()):
        exclusions.append(Exclusion(s, pattern, reason))
    for feature in factory.missing:
        for s, pattern in MISSING_FEATURE_TESTS.get(feature, ()):
            reason = f"the store under test has no {feature} ({factory.store_class.__name__})"
            exclusions.append(Exclusion(s, pattern, reason))
    _STATE.update(
        suite=suite, factory=factory, cold=mode == "cold", exclusions=exclusions,
        outcomes={"passed": [], "failed": {}, "skipped": {}, "retried": {}}, deselected={},
        shims={},
    )  # fmt: skip


# ----------------------------------------------------------------------------- shims


def _index(index: dict[str, Any] | None) -> dict[str, Any] | None:
    if not index:
        return None
    fields = index.get("fields", index.get("text_fields"))
    return {"dims": index["dims"], "embed": index["embed"], "fields": fields}


_AWAITED = ("setup", "sweep_ttl", "start_ttl_sweeper", "stop_ttl_sweeper")
"""Methods the async suites ``await`` (``await store.setup()``): the async shim's version
awaits the store's ``a<name>`` when it has one, else calls ``<name>`` (awaiting what it
returns if that is awaitable); ``setup`` does nothing when the store has neither."""


def _awaitable(base: type, method: str) -> Any:
    async def call(self: BaseStore, *args: Any, **kwargs: Any) -> Any:
        if hasattr(base, "a" + method):
            return await getattr(base, "a" + method)(self, *args, **kwargs)
        if not hasattr(base, method):
            return None
        done = getattr(base, method)(self, *args, **kwargs)
        return await done if inspect.isawaitable(done) else done

    call.__name__ = method
    return call


def _in_loop() -> bool:
    """True in a thread running an event loop: a sync call there on a store opened with
    ``async with`` is the one the async suites expect to fail (``test_no_running_loop``);
    flushing first would block the loop the flush waits for."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True


def _shim(name: str, *, is_async: bool) -> type[BaseStore]:
    key = (name, is_async)
    if key in _STATE["shims"]:
        return _STATE["shims"][key]  # type: ignore[no-any-return]
    factory: StoreFactory = _STATE["factory"]
    base = factory.store_class
    cold = _STATE["cold"]

    class _Meta(type(base)):  # type: ignore[misc]
        def __call__(cls, *args: Any, index: Any = None, ttl: Any = None, **_: Any) -> Any:
            stack = _STATE["stack"]
            if stack is None:
                raise RuntimeError(f"{name}(...) outside a test of the store suite")
            return stack.enter_context(_sync_open(cls, index, ttl))

    def _sync_open(cls: type, index: Any, ttl: Any) -> AbstractContextManager[BaseStore]:
        @contextlib.contextmanager
        def opened() -> Iterator[BaseStore]:
            with factory.open(index=_index(index), ttl=ttl) as store:
                store.__class__ = cls
                yield store

        return opened()

    def _async_open(cls: type, index: Any, ttl: Any) -> AbstractAsyncContextManager[BaseStore]:
        @contextlib.asynccontextmanager
        async def opened() -> AsyncIterator[BaseStore]:
            async with factory.aopen(index=_index(index), ttl=ttl) as store:
                store.__class__ = cls
                yield store

        return opened()

    def from_conn_string(cls: type, conn_string: Any = None, *, index: Any = None,
                         ttl: Any = None, **_backend_options: Any) -> Any:
        return (_async_open if is_async else _sync_open)(cls, index, ttl)

    namespace: dict[str, Any] = {"__slots__": (), "from_conn_string": classmethod(from_conn_string)}
    if is_async:
        for method in _AWAITED:
            if method == "setup" or hasattr(base, method) or hasattr(base, "a" + method):
                namespace[method] = _awaitable(base, method)
    elif not hasattr(base, "setup"):
        namespace["setup"] = lambda self: None
    if cold:
        def batch(self: BaseStore, ops: Any) -> Any:
            ops = list(ops)
            if any(isinstance(op, _READS) for op in ops) and not (is_async and _in_loop()):
                factory.make_cold(self)
            return base.batch(self, ops)

        async def abatch(self: BaseStore, ops: Any) -> Any:
            ops = list(ops)
            if any(isinstance(op, _READS) for op in ops):
                await factory.amake_cold(self)
            return await base.abatch(self, ops)

        namespace.update(batch=batch, abatch=abatch)
    shim = _Meta(name, (base,), namespace)
    _STATE["shims"][key] = shim
    return shim  # type: ignore[no-any-return]


# ------------------------------------------------------- the Postgres modules' fixtures


def _postgres_ttl(module: Any) -> dict[str, Any]:
    minutes = module.TTL_MINUTES
    return {"default_ttl": minutes, "refresh_on_read": True,
            "sweep_interval_minutes": minutes / 2}  # fmt: skip


def _patch_postgres_sync(module: Any) -> None:
    shim = _shim("PostgresStore", is_async=False)
    module.PostgresStore = shim

    @pytest.fixture(name="store")
    def store() -> Iterator[BaseStore]:
        with shim.from_conn_string("", ttl=_postgres_ttl(module)) as s:  # type: ignore[attr-defined]
            s.setup()
            if hasattr(s, "start_ttl_sweeper"):
                s.start_ttl_sweeper()
            yield s
            if hasattr(s, "stop_ttl_sweeper"):
                s.stop_ttl_sweeper()

    @contextlib.contextmanager
    def _create_vector_store(vector_type: str, distance_type: str, fake_embeddings: Any,
                             text_fields: list[str] | None = None,
                             enable_ttl: bool = True) -> Iterator[BaseStore]:
        index = {"dims": fake_embeddings.dims, "embed": fake_embeddings, "fields": text_fields}
        ttl = {"default_ttl": 2, "refresh_on_read": True} if enable_ttl else None
        with shim.from_conn_string("", index=index, ttl=ttl) as s:  # type: ignore[attr-defined]
            s.setup()
            yield s

    module.store = store
    module._create_vector_store = _create_vector_store


def _patch_postgres_async(module: Any) -> None:
    shim = _shim("AsyncPostgresStore", is_async=True)
    module.AsyncPostgresStore = shim

    @pytest.fixture(name="store")
    async def store() -> AsyncIterator[BaseStore]:
        async with shim.from_conn_string("", ttl=_postgres_ttl(module)) as s:  # type: ignore[attr-defined]
            await s.setup()
            if hasattr(s, "start_ttl_sweeper"):
                await s.start_ttl_sweeper()
            yield s
            if hasattr(s, "stop_ttl_sweeper"):
                await s.stop_ttl_sweeper()

    @contextlib.asynccontextmanager
    async def _create_vector_store(vector_type: str, distance_type: str,
                                   fake_embeddings: Any,
                                   text_fields: list[str] | None = None) -> AsyncIterator[Any]:
        index = {"dims": fake_embeddings.dims, "embed": fake_embeddings, "fields": text_fields}
        async with shim.from_conn_string("", index=index) as s:  # type: ignore[attr-defined]
            await s.setup()
            yield s

    module.store = store
    module._create_vector_store = _create_vector_store


def _patch(module: Any, suite: str, rel: str) -> None:
    if suite == "postgres" and rel == "tests/test_store.py":
        _patch_postgres_sync(module)
    elif suite == "postgres" and rel == "tests/test_async_store.py":
        _patch_postgres_async(module)
    else:
        for name, is_async in (("InMemoryStore", False), ("SqliteStore", False),
                               ("AsyncSqliteStore", True)):  # fmt: skip
            if name in vars(module):
                setattr(module, name, _shim(name, is_async=is_async))


class _SuiteModule(pytest.Module):
    """A test module whose store names are replaced right after its import."""

    def _getobj(self) -> Any:
        module = super()._getobj()
        rel = self.path.relative_to(self.config.rootpath).as_posix()
        _patch(module, _STATE["suite"], rel)
        return module


def pytest_pycollect_makemodule(module_path: Path, parent: Any) -> Any:
    if module_path.name.startswith("test_"):
        return _SuiteModule.from_parent(parent, path=module_path)
    return None


# ------------------------------------------------------- exclusions, stacks, the report


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    keep, drop = [], []
    used: set[Exclusion] = set()
    for item in items:
        hit = next((e for e in _STATE["exclusions"] if e.matches(_STATE["suite"], item.nodeid)),
                   None)  # fmt: skip
        if hit is None:
            keep.append(item)
        else:
            used.add(hit)
            drop.append(item)
            _STATE["deselected"][item.nodeid] = hit.reason
    # an exclusion is stale only when it matches no test at all (one an earlier exclusion
    # already took, e.g. a factory's own difference, still names a test)
    used |= {e for e in _STATE["exclusions"]
             if any(e.matches(_STATE["suite"], item.nodeid) for item in items)}
    _STATE["unmatched"] = [
        e.pattern for e in _STATE["exclusions"] if e.suite == _STATE["suite"] and e not in used
    ]
    part = config.getoption("--store-part")
    if part != "all":  # the other part's tests: run by the other subprocess, not reported
        drop += [item for item in keep if is_ttl_test(item.nodeid) != (part == "ttl")]
        keep = [item for item in keep if is_ttl_test(item.nodeid) == (part == "ttl")]
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = keep


def is_ttl_test(nodeid: str) -> bool:
    """True for a test of the ``ttl`` part: its node id names TTL (``test_ttl.py``,
    ``test_store_ttl``, ``test_search_with_ttl``...), any case."""
    return "ttl" in nodeid.lower()


@pytest.fixture(autouse=True)
def _store_suite_stack() -> Iterator[None]:
    """Closes the stores a test built with ``Cls(...)`` when it ends."""
    with contextlib.ExitStack() as stack:
        _STATE["stack"] = stack
        try:
            yield
        finally:
            _STATE["stack"] = None


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    outcomes = _STATE["outcomes"]
    if report.failed:
        outcomes["failed"][report.nodeid] = str(report.longrepr)[-3000:]
    elif report.skipped:
        outcomes["skipped"][report.nodeid] = str(report.longrepr)[-500:]
    elif report.when == "call" and report.passed:
        outcomes["passed"].append(report.nodeid)
    elif report.outcome == "retried":  # pytest-retry: a failed attempt, run again
        outcomes["retried"][report.nodeid] = str(report.longrepr)[-3000:]


def pytest_unconfigure(config: pytest.Config) -> None:
    path = config.getoption("--store-report")
    if path and "outcomes" in _STATE:
        passed = [n for n in _STATE["outcomes"]["passed"] if n not in _STATE["outcomes"]["failed"]]
        Path(path).write_text(json.dumps({
            "passed": passed, "failed": _STATE["outcomes"]["failed"],
            "skipped": _STATE["outcomes"]["skipped"], "retried": _STATE["outcomes"]["retried"],
            "deselected": _STATE["deselected"],
            "unmatched_exclusions": _STATE.get("unmatched", []),
        }))  # fmt: skip
