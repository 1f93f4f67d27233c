"""``once``/``aonce`` used the wrong way, or with awkward values: a clear error, and a
journal that tells the truth about what happened (nothing left *started* for an effect
that never ran; nothing journaled that can never reach MongoDB)."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

import pytest
from langgraph.graph import END, START, StateGraph
from langgraph.types import Command, interrupt
from typing_extensions import TypedDict

from langgraph_durable import DurableSaver, effects
from langgraph_durable.errors import EffectFailedError, SerializationError
from langgraph_durable.outbox.group import dead_letter_key
from langgraph_durable.plans.effect_journal import collection, journal_plan


class State(TypedDict, total=False):
    out: Any
    approved: Any


def _config() -> dict[str, Any]:
    return {"configurable": {"thread_id": f"m-{uuid.uuid4().hex[:8]}"}}


def _graph(saver: DurableSaver, node: Callable[[State], Any]) -> Any:
    g = StateGraph(State)
    g.add_node("node", node)
    g.add_edge(START, "node")
    g.add_edge("node", END)
    return g.compile(checkpointer=saver)


def _states(saver: DurableSaver, config: dict[str, Any]) -> list[tuple[str, str]]:
    docs = saver.run(journal_plan(saver.context, config["configurable"]["thread_id"]))
    return [(d["name"], d["state"]) for d in docs]


def test_once_with_a_coroutine_function_raises_type_error_naming_aonce_and_journals_nothing(
        saver: DurableSaver) -> None:
    ran: list[int] = []

    async def send() -> str:
        ran.append(1)
        return "sent"

    config = _config()
    graph = _graph(saver, lambda state: {"out": effects.once("mail", send)})
    with pytest.raises(TypeError, match=r"once\('mail'\).*coroutine function.*aonce"):
        graph.invoke({}, config)
    assert ran == []
    assert _states(saver, config) == []


def test_once_whose_fn_returns_a_coroutine_raises_type_error_and_leaves_the_effect_cleared(
        saver: DurableSaver) -> None:
    ran: list[int] = []

    async def send() -> str:
        ran.append(1)
        return "sent"

    class Sender:  # a callable object whose __call__ makes a coroutine
        def __call__(self) -> Any:
            return send()

    config = _config()
    graph = _graph(saver, lambda state: {
        "out": effects.once("mail", Sender(), journal_errors=True)})
    with pytest.raises(TypeError, match=r"once\('mail'\).*returned a coroutine.*aonce"):
        graph.invoke({}, config)
    assert ran == []
    assert _states(saver, config) == [("mail", "cleared")]  # not in doubt: it never ran


class _StrRaises(Exception):
    def __str__(self) -> str:
        raise RuntimeError("str() of this error fails")


@pytest.mark.parametrize("error", [_StrRaises(), ValueError("bad byte \udcff")],
                         ids=["str-raises", "lone-surrogate"])
def test_journal_errors_keeps_an_error_whose_message_cannot_be_encoded(
        saver: DurableSaver, error: Exception) -> None:
    calls: list[int] = []

    def refuse() -> None:
        calls.append(1)
        raise error

    def node(state: State) -> dict[str, Any]:
        try:
            effects.once("pay", refuse, journal_errors=True)
        except type(error):
            return {"out": "raised", "approved": interrupt("ok?")}
        except EffectFailedError as exc:
            return {"out": exc.error_type}
        return {}

    config = _config()
    graph = _graph(saver, node)
    graph.invoke({}, config)  # the original error reached the node
    assert _states(saver, config) == [("pay", "failed")]
    done = graph.invoke(Command(resume=True), config)
    assert calls == [1]
    assert done["out"] == f"{type(error).__module__}.{type(error).__qualname__}"


def test_a_result_the_serializer_refuses_names_the_effect_and_its_thread_once(
        saver: DurableSaver) -> None:
    config = _config()
    graph = _graph(saver, lambda state: {"out": effects.once("pay", lambda: object())})
    with pytest.raises(SerializationError) as caught:
        graph.invoke({}, config)
    assert str(caught.value).count(f"thread {config['configurable']['thread_id']!r}") == 1
    assert "effect 'pay' (call 0)" in str(caught.value)


def test_a_result_too_big_for_a_mongodb_document_is_refused_instead_of_dead_lettered(
        saver: DurableSaver) -> None:
    config = _config()
    graph = _graph(saver, lambda state: {"out": len(effects.once("big", lambda: "x" * (17 << 20)))})
    with pytest.raises(SerializationError, match=r"effect 'big'.*16 MiB"):
        graph.invoke({}, config)
    assert _states(saver, config) == [("big", "started")]  # it did happen: in doubt
    saver.flush()
    assert saver.sync_clients.redis.xlen(dead_letter_key(saver.context)) == 0


def test_in_strict_durability_the_journal_is_in_mongodb_before_once_returns(
        redis_url: str, mongo_url: str) -> None:
    from langgraph_durable.testing import unique_options

    calls: list[int] = []

    def node(state: State) -> dict[str, Any]:
        receipt = effects.once("pay", lambda: (calls.append(1), "receipt-1")[1])
        return {"out": receipt, "approved": interrupt("ok?")}

    config = _config()
    tid = config["configurable"]["thread_id"]
    options = unique_options(durability="strict", flusher="off")  # no flusher copies it
    with DurableSaver.from_urls(redis_url, mongo_url, **options) as saver:
        graph = _graph(saver, node)
        graph.invoke({}, config)
        docs = saver.sync_clients.db[collection(saver.context)].find({"thread_id": tid})
        assert [(d["name"], d["state"]) for d in docs] == [("pay", "done")]
        keys = saver.context.keys(tid)
        saver.sync_clients.redis.delete(*keys.all, keys.fx)  # Redis lost the thread
        done = graph.invoke(Command(resume=True), config)
    assert calls == [1]
    assert done["out"] == "receipt-1"


def _answers(saver: DurableSaver) -> bool:
    """Whether the saver's sync MongoDB client reaches its server now."""
    try:
        saver.sync_clients.db.command("ping")
        return True
    except Exception:
        return False


def test_in_strict_durability_a_mongodb_down_before_the_call_leaves_the_effect_not_in_doubt(
        redis_url: str) -> None:
    from langgraph.config import get_config

    from langgraph_durable.errors import TierUnavailableError
    from langgraph_durable.testing import mongo_server, unique_options, wait_for

    calls: list[int] = []
    stopped: list[int] = []
    with mongo_server() as ms:
        def node(state: State) -> dict[str, Any]:
            if not stopped:
                stopped.append(1)
                conf = get_config()["configurable"]
                tid, cid = conf["thread_id"], conf["checkpoint_map"][""]
                # the step's checkpoint is stored (its put returned: both tiers, strict),
                # then MongoDB goes away between the step's start and the effect (a put
                # failing first would stop the effect before its own write:
                # test_effects_checkpoint_wait.py). Waiting for a read of the checkpoint
                # was not enough: Redis answers it while the put's MongoDB write is still
                # under way, and stopping MongoDB then failed the put (seen in CI)
                wait_for(lambda: saver.context.heads.get(tid, "") == cid, 10,
                         "the step's put to return")
                ms.stop()
            return {"out": effects.once("pay", lambda: (calls.append(1), "receipt-1")[1])}

        config = _config()
        options = unique_options(durability="strict", server_selection_timeout_s=0.5)
        with DurableSaver.from_urls(redis_url, ms.url, **options) as saver:
            graph = _graph(saver, node)
            with pytest.raises(TierUnavailableError):
                graph.invoke({}, config)
            assert calls == []  # never called, so not in doubt:
            ms.start()
            # the saver's client sees the server again (its monitor may take longer than
            # the 0.5 s server selection timeout on a loaded machine: a full run failed so)
            wait_for(lambda: _answers(saver), 10, "the saver's MongoDB client to reconnect")
            assert _states(saver, config) == [("pay", "cleared")]
            done = graph.invoke(None, config)
    assert calls == [1]
    assert done["out"] == "receipt-1"


def test_with_more_required_replicas_than_confirm_the_outcome_raises_and_is_kept(
        redis_sentinel_url: str, mongo_url: str) -> None:
    from langgraph_durable.errors import ReplicationTimeoutError
    from langgraph_durable.testing import unique_options

    calls: list[int] = []

    def node(state: State) -> dict[str, Any]:
        return {"out": effects.once("pay", lambda: (calls.append(1), "receipt-1")[1])}

    config = _config()
    tid = config["configurable"]["thread_id"]
    options = unique_options(redis_min_replicas=2, redis_wait_timeout_s=0.05)  # 1 exists
    with DurableSaver.from_urls(redis_sentinel_url, mongo_url, **options) as saver:
        with pytest.raises(ReplicationTimeoutError) as caught:
            # durability "exit": no put before the effect (each would raise the same way,
            # and an effect does not start under a checkpoint whose put failed)
            _graph(saver, node).invoke({}, config, durability="exit")
        e = caught.value
        assert (e.thread_id, e.wanted, e.replicas) == (tid, 2, 1)
        assert str(e).startswith("the outcome of effect 'pay' (call 0)")
        assert _states(saver, config) == [("pay", "done")]
    assert calls == [1]


def test_a_second_effect_of_one_name_while_the_first_runs_is_refused_and_journals_nothing(
        saver: DurableSaver) -> None:
    """Concurrent effects of one name would be numbered in the order they start, which a
    re-execution need not keep (a resume would hand one call the other's result)."""
    import contextvars
    import threading

    first_running, second_tried = threading.Event(), threading.Event()
    calls: list[str] = []
    refused: list[BaseException] = []

    def charge(who: str) -> str:
        calls.append(who)
        first_running.set()
        assert second_tried.wait(30)
        return f"receipt-{who}"

    def node(state: State) -> dict[str, Any]:
        ctx = contextvars.copy_context()
        t = threading.Thread(target=ctx.run, args=(effects.once, "charge", charge, "a"))
        t.start()
        assert first_running.wait(30)
        try:
            effects.once("charge", charge, "b")
        except Exception as exc:  # the second, while the first runs
            refused.append(exc)
        finally:
            second_tried.set()
        t.join()
        return {"out": effects.once("charge", charge, "c")}  # after it: the next number

    config = _config()
    out = _graph(saver, node).invoke({}, config)
    assert [type(e).__name__ for e in refused] == ["ConfigurationError"]
    assert "another once('charge') of this task is still running" in str(refused[0])
    assert calls == ["a", "c"] and out["out"] == "receipt-c"
    assert sorted(_states(saver, config)) == [("charge", "done"), ("charge", "done")]
