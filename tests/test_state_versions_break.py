"""Trying to break state versions and migrations (issue 34) as a user would: what broke.

Each test is a case a LangGraph user hit while deploying a new version of a graph (real
servers, no mocks); the cases that held are listed in the helper's report, not here.

- A thread *recreated with the same checkpoint ids* (``delete_thread`` then
  ``copy_thread`` from a template thread again, or an export imported over it) and
  resumed again by a process that had already migrated it: the process remembered it had
  stored the migrated values (``WrittenMarks``) and did not store them again, so the new
  checkpoint named values neither tier held (``MissingValueError`` on every later read:
  the thread was lost). A marked value may be left out of a put only when the put's
  parent is a checkpoint this process stored holding it.
- ``state_version=True`` (or ``2.0``) as an option was taken as version 1 (2) by
  pydantic's lax mode, while ``config["configurable"]["state_version"]=True`` and a
  ``state_migrations`` key ``True`` were refused; a version past int64 was accepted and
  then failed every put with ``SerializationError``.
- ``migrate-state --migrations`` naming a dict with a key that is not an int said "is a
  dict, not a mapping ..." (it is a mapping), and a registry module that raised on import
  gave a bare ``error: RuntimeError: ...`` that did not name ``--migrations``.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypedDict

import pytest
from langgraph.graph import END, START, StateGraph
from langgraph.types import Command, interrupt

from langgraph_durable import (
    STATE_VERSION_KEY,
    ConfigurationError,
    DurableConfig,
    DurableSaver,
    StateMigration,
    StateMigrationError,
    StateVersionError,
)
from langgraph_durable.inspection import state_migration as sm
from langgraph_durable.testing import unique_options


class V1(TypedDict):
    steps: list[str]


class V2(TypedDict):
    plan: list[str]
    executed_steps: list[str]


def v1_graph() -> StateGraph:
    g = StateGraph(V1)
    g.add_node("plan", lambda s: {"steps": ["fetch", "report"]})
    g.add_node("review", lambda s: interrupt("approve?") and {})
    g.add_edge(START, "plan")
    g.add_edge("plan", "review")
    g.add_edge("review", END)
    return g


def v2_graph() -> StateGraph:
    g = StateGraph(V2)
    g.add_node("plan", lambda s: {"plan": ["fetch", "report"], "executed_steps": []})
    g.add_node("review", lambda s: interrupt("approve?") and {})
    g.add_node("execute", lambda s: {"executed_steps": list(s["plan"])})
    g.add_edge(START, "plan")
    g.add_edge("plan", "review")
    g.add_edge("review", "execute")
    g.add_edge("execute", END)
    return g


def v1_to_v2(values: dict[str, Any]) -> dict[str, Any]:
    out = dict(values)
    if "steps" in out:
        out["plan"] = out.pop("steps")
        out["executed_steps"] = []
    return out


def cfg(thread: str) -> Any:
    return {"configurable": {"thread_id": thread}}


DONE = {"plan": ["fetch", "report"], "executed_steps": ["fetch", "report"]}


@pytest.fixture
def open_saver(redis_url: str, mongo_url: str) -> Iterator[Callable[..., DurableSaver]]:
    """Savers on one key prefix and database, closed at the end."""
    opts = unique_options()
    made: list[DurableSaver] = []

    def make(**kw: Any) -> DurableSaver:
        s = DurableSaver.from_urls(redis_url, mongo_url, **{**opts, **kw})
        s.__enter__()
        made.append(s)
        return s

    yield make
    for s in made:
        s.close()


@pytest.mark.parametrize("recreate", ["copy_thread", "delete_and_copy"])
def test_a_thread_recreated_with_the_same_checkpoint_ids_keeps_its_migrated_values(
        open_saver: Callable[..., DurableSaver], recreate: str) -> None:
    """A template thread (v1) is copied to a working thread, which one long-lived v2
    process resumes; the working thread is then reset from the template (the same
    checkpoint ids come back) and resumed again by the same process. Every reader must
    see the finished v2 state, not a checkpoint naming values nobody stored."""
    v1 = open_saver(state_version=1)
    v1_graph().compile(checkpointer=v1).invoke({"steps": []}, cfg("template"))
    app = open_saver(state_version=2, state_migrations={1: v1_to_v2})
    graph = v2_graph().compile(checkpointer=app)
    app.copy_thread("template", "work")
    assert graph.invoke(Command(resume=True), cfg("work")) == DONE
    # reset the working thread from the template: the same v1 checkpoint ids again
    app.delete_thread("work")
    if recreate == "delete_and_copy":
        app.copy_thread("template", "work")
    else:
        v1.copy_thread("template", "work")
    assert graph.get_state(cfg("work")).values == {"plan": ["fetch", "report"],
                                                    "executed_steps": []}
    assert graph.invoke(Command(resume=True), cfg("work")) == DONE
    app.flush()
    # the same process and another one (no migrations needed: all of it is v2 now)
    assert graph.get_state(cfg("work")).values == DONE
    other = open_saver(state_version=2)
    state = v2_graph().compile(checkpointer=other).get_state(cfg("work"))
    assert state.values == DONE and state.metadata[STATE_VERSION_KEY] == 2


def test_later_puts_of_a_resumed_thread_still_store_a_migrated_value_once(
        open_saver: Callable[..., DurableSaver]) -> None:
    """The fix above keeps what ``WrittenMarks`` is for: after the first v2 checkpoint
    stored the migrated values, the puts that follow it (its children) do not send them
    again."""
    v1 = open_saver(state_version=1)
    v1_graph().compile(checkpointer=v1).invoke({"steps": []}, cfg("t"))
    app = open_saver(state_version=2, state_migrations={1: v1_to_v2})
    sent: list[list[str]] = []
    real = app._state.for_put  # type: ignore[attr-defined]

    def spy(config: Any, checkpoint: Any, metadata: Any, new_versions: Any) -> Any:
        out = real(config, checkpoint, metadata, new_versions)
        sent.append(sorted(out[2]))
        return out

    object.__setattr__(app._state, "for_put", spy)  # type: ignore[attr-defined]
    assert v2_graph().compile(checkpointer=app).invoke(Command(resume=True), cfg("t")) == DONE
    assert sent[0] == ["executed_steps", "plan"]
    assert all(s == [] for s in sent[1:]) and len(sent) >= 2


@pytest.mark.parametrize("bad", [True, False, 2.0, 1.5, "two", 2**63, 10**30])
def test_a_state_version_option_that_is_not_an_int_is_refused(
        bad: Any, redis_url: str, mongo_url: str) -> None:
    with pytest.raises(ConfigurationError, match="state_version"):
        DurableSaver.from_urls(redis_url, mongo_url, **unique_options(state_version=bad))
    with pytest.raises(ValueError, match="state_version"):
        DurableConfig(state_version=bad)
    with pytest.raises(ValueError, match="unversioned_state_version"):
        DurableConfig(unversioned_state_version=bad)


def test_a_state_version_from_the_environment_is_still_read(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from langgraph_durable.settings import env_options
    monkeypatch.setenv("LGD_STATE_VERSION", "3")
    monkeypatch.setenv("LGD_UNVERSIONED_STATE_VERSION", " 2 ")
    assert env_options()["state_version"] == 3
    assert env_options()["unversioned_state_version"] == 2
    assert DurableConfig(state_version=2**63 - 1).state_version == 2**63 - 1
    monkeypatch.setenv("LGD_STATE_VERSION", "2.0")
    with pytest.raises(ConfigurationError, match="LGD_STATE_VERSION"):
        env_options()


BAD_KEYS = {"1": v1_to_v2}
RAISES = "raises_on_import_for_break34"


def test_migrate_state_names_what_is_wrong_with_the_registry(tmp_path: Path,
                                                             monkeypatch: pytest.MonkeyPatch
                                                             ) -> None:
    spec = f"{__name__}:BAD_KEYS"
    with pytest.raises(ValueError) as bad_key:
        sm.load_registry(spec)
    assert "'1'" in str(bad_key.value) and "str" in str(bad_key.value)
    assert "not a mapping" not in str(bad_key.value)
    (tmp_path / f"{RAISES}.py").write_text("raise RuntimeError('no settings at import')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(ValueError, match=rf"--migrations '{RAISES}:X'.*RuntimeError: no "
                                         "settings at import"):
        sm.load_registry(f"{RAISES}:X")
    sys.modules.pop(RAISES, None)


@pytest.mark.parametrize("bad", [True, 2.0, "2", 0, 2**63, 2**64])
def test_a_store_state_version_that_no_record_can_hold_is_refused_up_front(
        saver: DurableSaver, bad: Any) -> None:
    """``saver.store(state_version=2**64)`` was taken, and the first ``put`` raised a bare
    ``TypeError: Integer exceeds 64-bit range`` from msgpack."""
    with pytest.raises(ConfigurationError, match="DurableStore state_version"):
        saver.store(state_version=bad)
    assert saver.store(state_version=2**63 - 1).put(("a",), "k", {"x": 1}) is None


def _pairs(writes: list[tuple[str, str, Any]]) -> list[Any]:
    return [(t, c) for t, c, _v in writes]  # forgot the value


def _dicts(writes: list[tuple[str, str, Any]]) -> list[Any]:
    return [{"task_id": t, "channel": c, "value": v} for t, c, v in writes]


def _int_keys(values: dict[str, Any]) -> dict[Any, Any]:
    return {**v1_to_v2(values), 1: "x"}


@pytest.mark.parametrize("hook", [
    StateMigration(values=v1_to_v2, writes=_pairs),
    StateMigration(values=v1_to_v2, writes=_dicts),
    StateMigration(values=_int_keys),
], ids=["writes-pairs", "writes-dicts", "values-int-key"])
def test_a_hook_returning_the_wrong_shape_is_named(
        open_saver: Callable[..., DurableSaver], hook: StateMigration) -> None:
    """A writes hook returning 2-tuples or dicts gave LangGraph's bare ``ValueError: not
    enough values to unpack`` / ``KeyError: 0`` on resume, naming neither the migration
    nor the thread."""
    v1 = open_saver(state_version=1)
    v1_graph().compile(checkpointer=v1).invoke({"steps": []}, cfg("t"))
    app = open_saver(state_version=2, state_migrations={1: hook})
    graph = v2_graph().compile(checkpointer=app)
    with pytest.raises(StateMigrationError, match=r"state_migrations\[1\].*thread 't'") as e:
        graph.invoke(Command(resume=True), cfg("t"))
    assert e.value.step == (1, 2)
    # nothing stored changed: the thread resumes once the hook is fixed
    fixed = open_saver(state_version=2, state_migrations={1: v1_to_v2})
    assert v2_graph().compile(checkpointer=fixed).invoke(Command(resume=True), cfg("t")) == DONE


def test_an_unversioned_checkpoint_made_newer_by_the_configuration_says_so(
        open_saver: Callable[..., DurableSaver]) -> None:
    """``unversioned_state_version=3`` with ``state_version=2`` (a typo in a deploy) said
    the unversioned thread "was written by state version 3 ... a rolled-back deploy?"."""
    plain = open_saver()
    v1_graph().compile(checkpointer=plain).invoke({"steps": []}, cfg("t"))
    app = open_saver(state_version=2, unversioned_state_version=3,
                     state_migrations={1: v1_to_v2})
    with pytest.raises(StateVersionError, match="has no state version, read as "
                       "unversioned_state_version=3") as e:
        app.get_tuple(cfg("t"))
    assert "rolled-back" not in str(e.value) and e.value.stored == 3


@pytest.mark.xfail(strict=True, reason="the operator's tools (threads, show, migrate-state, "
                   "the dashboard) read a malformed stored version ('2', -1) as unversioned "
                   "or as a version, while the saver refuses the checkpoint as not a state "
                   "version; showing it as invalid needs a third state in "
                   "inspection/versions.py and its callers (left for the integrator)")
def test_the_tools_do_not_show_a_malformed_stored_version_as_unversioned() -> None:
    """``migrate-state`` printed ``failed str: state version unversioned: ... its metadata
    'lgd_state_version' holds '2', not a state version``; ``threads`` listed that thread as
    ``unversioned`` and one holding -1 as version ``-1`` (``--state-version-below 3``
    included both)."""
    from langgraph_durable.inspection import versions
    assert versions.shown(versions.version_of({STATE_VERSION_KEY: "2"})) != "unversioned"
    assert versions.version_of({STATE_VERSION_KEY: -1}) is None


async def test_a_recreated_thread_keeps_its_migrated_values_async(
        redis_url: str, mongo_url: str) -> None:
    """The same reset as above with asyncio clients (``ainvoke``, ``acopy_thread``,
    ``adelete_thread``): ``aput`` shares the fix."""
    opts = unique_options()
    async with DurableSaver.from_urls(redis_url, mongo_url, **opts, state_version=1) as v1:
        await v1_graph().compile(checkpointer=v1).ainvoke({"steps": []}, cfg("template"))
    async with DurableSaver.from_urls(redis_url, mongo_url, **opts, state_version=2,
                                      state_migrations={1: v1_to_v2}) as app:
        graph = v2_graph().compile(checkpointer=app)
        for _ in range(2):
            await app.acopy_thread("template", "work")
            assert await graph.ainvoke(Command(resume=True), cfg("work")) == DONE
            assert (await graph.aget_state(cfg("work"))).values == DONE
            await app.adelete_thread("work")
            await app.acopy_thread("template", "work")
            assert await graph.ainvoke(Command(resume=True), cfg("work")) == DONE
            await app.adelete_thread("work")
        await app.acopy_thread("template", "work")
        assert await graph.ainvoke(Command(resume=True), cfg("work")) == DONE
    async with DurableSaver.from_urls(redis_url, mongo_url, **opts, state_version=2) as other:
        state = await v2_graph().compile(checkpointer=other).aget_state(cfg("work"))
        assert state.values == DONE


def test_an_unversioned_item_made_newer_by_the_configuration_says_so(
        saver: DurableSaver) -> None:
    """The store's twin of the checkpoint case above."""
    saver.store().put(("a",), "k", {"x": 1})  # the saver has no state version
    store = saver.store(state_version=2, unversioned_state_version=3)
    with pytest.raises(StateVersionError, match="has no state version, read as "
                       "unversioned_state_version=3") as e:
        store.get(("a",), "k")
    assert "rolled-back" not in str(e.value)
