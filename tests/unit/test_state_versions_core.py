"""``core/state_versions.py`` without servers: the marked-version order, the chain, the
checks and what a put stores."""

from __future__ import annotations

from typing import Any

import pytest
from langgraph.checkpoint.base import CheckpointTuple

from langgraph_durable import ConfigurationError, StateMigrationError, StateVersionError
from langgraph_durable.core.state_versions import (
    STATE_VERSION_KEY,
    StateMigration,
    StateVersions,
    as_migrations,
    is_marked,
    marked,
)


def tup(values: dict[str, Any], versions: dict[str, Any], version: int | None = 1,
        writes: list[Any] | None = None) -> CheckpointTuple:
    md: dict[str, Any] = {"step": 3}
    if version is not None:
        md[STATE_VERSION_KEY] = version
    cp: Any = {"v": 4, "id": "cp-1", "ts": "", "channel_values": values,
               "channel_versions": versions, "versions_seen": {}}
    return CheckpointTuple({"configurable": {"thread_id": "t", "checkpoint_ns": "",
                                             "checkpoint_id": "cp-1"}}, cp, md, None,
                           writes if writes is not None else [])


def rename(values: dict[str, Any]) -> dict[str, Any]:
    out = dict(values)
    out["plan"] = out.pop("steps")
    return out


def test_a_marked_version_sorts_below_its_stored_version_and_above_lower_ones() -> None:
    stored = f"{5:032}.0.123456"
    m = marked(stored, 2, "cp-1")
    assert f"{4:032}.0.999" < m < stored < f"{5:032}.0.2"
    assert m == f"{5:032}.-m2.cp-1" and is_marked(m) and not is_marked(stored)
    assert marked(None, 3, "c") == f"{1:032}.-m3.c" and marked(7, 2, "c") == f"{7:032}.-m2.c"


def test_migrating_renames_drops_and_marks_channels_and_keeps_absent_ones() -> None:
    sv = StateVersions(2, as_migrations({1: rename}))
    before = tup({"steps": ["a"], "branch:to:x": None},
                 {"steps": f"{4:032}.1", "branch:to:x": f"{2:032}.9", "delta": f"{3:032}.1"})
    got = sv.migrate_tuple(before, 2, resume=True)
    assert got.checkpoint["channel_values"] == {"plan": ["a"], "branch:to:x": None}
    assert got.checkpoint["channel_versions"] == {
        "plan": f"{1:032}.-m2.cp-1", "branch:to:x": f"{2:032}.-m2.cp-1",
        "delta": f"{3:032}.1"}  # a channel never in the values (a DeltaChannel) stays
    assert got.metadata[STATE_VERSION_KEY] == 1  # what is at rest
    assert before.checkpoint["channel_values"] == {"steps": ["a"], "branch:to:x": None}
    assert sv.migrate_tuple(got._replace(metadata={STATE_VERSION_KEY: 2}), 2,
                            resume=True).checkpoint["channel_values"] == {
        "plan": ["a"], "branch:to:x": None}


def test_unversioned_checkpoints_read_as_the_configured_version() -> None:
    old = tup({"steps": []}, {"steps": "1"}, version=None)
    assert StateVersions(2, as_migrations({1: rename})).migrate_tuple(
        old, 2, resume=True).checkpoint["channel_values"] == {"plan": []}
    assert StateVersions(2, {}, unversioned=2).migrate_tuple(old, 2, resume=True) is old


def test_writes_hooks_run_in_order() -> None:
    sv = StateVersions(3, as_migrations({
        1: StateMigration(rename, lambda w: [(t, "plan", v) for t, _, v in w]),
        2: StateMigration(lambda v: v, lambda w: [(t, c, v * 2) for t, c, v in w])}))
    got = sv.migrate_tuple(tup({"steps": 1}, {"steps": "1"}, writes=[("t1", "steps", 2)]),
                           3, resume=True)
    assert got.pending_writes == [("t1", "plan", 4)]


def test_errors_name_the_checkpoint_and_the_step() -> None:
    sv = StateVersions(3, as_migrations({1: rename}))
    with pytest.raises(StateMigrationError, match=r"no migration from 2 to 3 \(it has \[1\]\)"):
        sv.migrate_tuple(tup({"steps": 1}, {}), 3, resume=False)
    newer = tup({}, {}, version=4)
    with pytest.raises(StateVersionError, match="version 4, newer than the running code's 3"):
        sv.migrate_tuple(newer, 3, resume=False)
    assert StateVersions(3, newer="read").migrate_tuple(newer, 3, resume=False) is newer
    with pytest.raises(StateVersionError):
        StateVersions(3, newer="read").migrate_tuple(newer, 3, resume=True)
    with pytest.raises(StateVersionError, match="not a state version"):
        sv.migrate_tuple(tup({}, {}, version="2"), 3, resume=True)  # type: ignore[arg-type]


def test_a_put_is_stamped_and_brings_marked_channels_once() -> None:
    sv = StateVersions(2)
    md = {"step": 1}
    cp: Any = {"channel_versions": {"plan": f"{1:032}.-m2.c", "x": f"{3:032}.5"}}
    config: Any = {"configurable": {"thread_id": "t", "checkpoint_ns": ""}}
    stamped, new, marks = sv.for_put(config, cp, md, {"x": f"{3:032}.5"})
    assert stamped == {"step": 1, STATE_VERSION_KEY: 2} and md == {"step": 1}
    assert new == {"plan": f"{1:032}.-m2.c", "x": f"{3:032}.5"} and list(marks) == ["plan"]
    sv.marks.written("t", "", marks)
    assert sv.for_put(config, cp, md, {})[1:] == ({}, {})
    assert StateVersions().for_put(config, cp, md, {}) == (md, {}, {})


def test_bad_migrations_and_call_versions_are_refused() -> None:
    with pytest.raises(ConfigurationError, match="key True"):
        as_migrations({True: rename})  # type: ignore[dict-item]
    with pytest.raises(ConfigurationError, match="mapping"):
        as_migrations([rename])  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="int >= 1"):
        StateVersions(2).running({"configurable": {"state_version": 0}})
    assert StateVersions(2).running({"configurable": {"state_version": 5}}) == 5
    assert StateVersions(2).running(None) == 2
