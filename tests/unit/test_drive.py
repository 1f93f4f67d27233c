"""``core/drive.py``: the one loop that sends replies into a generator of steps, throws
errors into it and returns what it returned."""

from __future__ import annotations

import asyncio
from collections.abc import Generator
from typing import Any

import pytest

from langgraph_durable.core.drive import Steps, adrive, drive


def echo_twice() -> Generator[str, Any, list[Any]]:
    """Yields "a" and "b"; returns what each was answered with (an error by its text)."""
    got: list[Any] = []
    for name in ("a", "b"):
        try:
            got.append((yield name))
        except ValueError as exc:
            got.append(f"error {exc}")
    return got


def test_drive_sends_each_reply_and_returns_the_generators_value() -> None:
    assert drive(echo_twice(), str.upper) == ["A", "B"]


def test_drive_throws_an_error_into_the_generator_which_may_handle_it() -> None:
    def step(name: str) -> str:
        if name == "a":
            raise ValueError("no a")
        return name

    assert drive(echo_twice(), step) == ["error no a", "b"]


def test_an_error_not_in_throws_propagates_and_the_generator_is_not_told() -> None:
    def step(name: str) -> str:
        raise ValueError(name)

    gen = echo_twice()
    with pytest.raises(ValueError, match="a"):
        drive(gen, step, throws=())
    assert gen.send("answered later") == "b"  # it still waits at "a"


def test_adrive_awaits_each_reply() -> None:
    async def step(name: str) -> str:
        await asyncio.sleep(0)
        return name * 2

    assert asyncio.run(adrive(echo_twice(), step)) == ["aa", "bb"]


def test_steps_sends_none_to_a_step_answered_by_neither() -> None:
    steps = Steps(echo_twice())
    seen = []
    for name in steps:
        seen.append(name)
        if name == "b":
            steps.throw(ValueError("late"))
    assert seen == ["a", "b"]
    assert steps.value == [None, "error late"]


def test_an_error_the_generator_does_not_handle_leaves_the_loop() -> None:
    steps = Steps(echo_twice())
    with pytest.raises(KeyError):
        for _ in steps:
            steps.throw(KeyError("x"))
    assert steps.value is None
