"""Model calls are not paid twice (``langgraph_durable.journal``): real graphs on real
servers calling chat models that count their calls (``tests/model_journal_support.py``)."""

from __future__ import annotations

import operator
import os
import signal
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Annotated, Any

import pytest
from langchain_core.messages import AIMessageChunk, HumanMessage
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, StateGraph
from langgraph.types import Command, RetryPolicy, Send, interrupt
from typing_extensions import TypedDict

from langgraph_durable import (
    ConfigurationError,
    DurableSaver,
    ModelCallChangedError,
    ModelJournalMiddleware,
    journaled,
)
from langgraph_durable.journal import STATS
from langgraph_durable.testing import unique_options

from .model_journal_support import (
    Counting,
    State,
    ToolCalling,
    ask_twice_then_approve,
    calls,
)

ROOT = Path(__file__).resolve().parent.parent


def _config() -> dict[str, Any]:
    return {"configurable": {"thread_id": f"t-{uuid.uuid4().hex[:8]}"}}


def _key() -> str:
    return f"m-{uuid.uuid4().hex[:8]}"


def test_a_plain_model_is_called_again_by_the_resume(saver: DurableSaver) -> None:
    key = _key()  # the baseline: what journaled() prevents
    graph, config = ask_twice_then_approve(saver, Counting(key=key)), _config()
    graph.invoke({"prompt": "q"}, config)
    done = graph.invoke(Command(resume=True), config)
    assert calls(key) == 4
    assert done["out"] == "answer-3 answer-4"


def test_two_calls_then_interrupt_the_resume_makes_no_call(saver: DurableSaver) -> None:
    key = _key()
    graph, config = ask_twice_then_approve(saver, journaled(Counting(key=key))), _config()
    first = graph.invoke({"prompt": "q"}, config)
    assert first["__interrupt__"][0].value == "approve answer-1 answer-2?"
    before = STATS.snapshot()
    done = graph.invoke(Command(resume="yes"), config)
    assert calls(key) == 2
    assert (done["out"], done["ok"]) == ("answer-1 answer-2", "yes")
    after = STATS.snapshot()
    assert after["replayed"] - before["replayed"] == 2
    assert after["tokens_saved"] - before["tokens_saved"] == 30
    assert saver.stats()["model_calls"] == {"called": 2, "replayed": 2, "tokens_saved": 30}


async def test_two_async_calls_then_interrupt_the_resume_makes_no_call(
        asaver: DurableSaver) -> None:
    key = _key()
    model = journaled(Counting(key=key))

    async def node(state: State) -> dict[str, Any]:
        a = (await model.ainvoke("q 0")).content
        b = (await model.ainvoke([HumanMessage("q 1")])).content
        return {"out": f"{a} {b}", "ok": interrupt(f"approve {a} {b}?")}

    g = StateGraph(State)
    g.add_node("node", node)
    g.add_edge(START, "node")
    g.add_edge("node", END)
    graph, config = g.compile(checkpointer=asaver), _config()
    first = await graph.ainvoke({"prompt": "q"}, config)
    assert first["__interrupt__"][0].value == "approve answer-1 answer-2?"
    done = await graph.ainvoke(Command(resume=True), config)
    assert calls(key) == 2
    assert done["out"] == "answer-1 answer-2"


def test_a_streamed_call_is_replayed_as_one_chunk(saver: DurableSaver) -> None:
    key = _key()
    model = journaled(Counting(key=key))
    seen: list[list[Any]] = []

    def node(state: State) -> dict[str, Any]:
        chunks = list(model.stream("q"))
        seen.append(chunks)
        return {"out": "".join(str(c.content) for c in chunks), "ok": interrupt("ok?")}

    g = StateGraph(State)
    g.add_node("node", node)
    g.add_edge(START, "node")
    g.add_edge("node", END)
    graph, config = g.compile(checkpointer=saver), _config()
    graph.invoke({"prompt": "q"}, config)
    done = graph.invoke(Command(resume=True), config)
    assert calls(key) == 1
    assert done["out"] == "answer-1"
    assert len(seen[1]) == 1 and isinstance(seen[1][0], AIMessageChunk)
    assert seen[1][0].usage_metadata["total_tokens"] == 15


def test_a_changed_prompt_calls_the_model_again_or_raises_when_asked(
        saver: DurableSaver) -> None:
    key = _key()
    graph, config = ask_twice_then_approve(saver, journaled(Counting(key=key))), _config()
    graph.invoke({"prompt": "q"}, config)
    prompts = {"q": "changed"}  # the code's second prompt changed, not the state

    def node(state: State) -> dict[str, Any]:
        model = journaled(Counting(key=key))
        a = str(model.invoke([HumanMessage(f"{state['prompt']} 0")]).content)
        b = str(model.invoke([HumanMessage(f"{prompts[state['prompt']]} 1")]).content)
        return {"out": f"{a} {b}", "ok": interrupt(f"approve {a} {b}?")}

    g = StateGraph(State)
    g.add_node("node", node)  # the same node name: the same task id on resume
    g.add_edge(START, "node")
    g.add_edge("node", END)
    done = g.compile(checkpointer=saver).invoke(Command(resume=True), config)
    assert calls(key) == 3  # call 0 replayed, call 1 changed: paid
    assert done["out"] == "answer-1 answer-3"

    key2 = _key()
    graph2, config2 = ask_twice_then_approve(saver, journaled(Counting(key=key2))), _config()
    graph2.invoke({"prompt": "q"}, config2)

    def changed(state: State) -> dict[str, Any]:
        model = journaled(Counting(key=key2), on_change="raise")
        model.invoke([HumanMessage("other 0")])
        return {}

    g2 = StateGraph(State)
    g2.add_node("node", changed)
    g2.add_edge(START, "node")
    g2.add_edge("node", END)
    with pytest.raises(ModelCallChangedError) as raised:
        g2.compile(checkpointer=saver).invoke(Command(resume=True), config2)
    assert raised.value.thread_id == config2["configurable"]["thread_id"]
    assert (raised.value.effect, raised.value.call) == ("model:Counting", 0)
    assert calls(key2) == 2


def test_a_retried_attempt_replays_the_call_its_failed_attempt_made(
        saver: DurableSaver) -> None:
    key = _key()
    model = journaled(Counting(key=key))
    failures = [1]

    def node(state: State) -> dict[str, Any]:
        answer = str(model.invoke("q").content)
        if failures[0]:
            failures[0] -= 1
            raise ConnectionError("the next service is down")
        return {"out": answer}

    g = StateGraph(State)
    g.add_node("node", node, retry_policy=RetryPolicy(initial_interval=0.01,
                                                        retry_on=ConnectionError))
    g.add_edge(START, "node")
    g.add_edge("node", END)
    done = g.compile(checkpointer=saver).invoke({"prompt": "q"}, _config())
    assert failures == [0]
    assert calls(key) == 1
    assert done["out"] == "answer-1"


class Fan(TypedDict, total=False):
    items: list[str]
    outs: Annotated[list[str], operator.add]


def test_parallel_tasks_each_replay_their_own_calls(saver: DurableSaver) -> None:
    key = _key()
    model = journaled(Counting(key=key))

    def work(arg: dict[str, str]) -> dict[str, Any]:
        a = str(model.invoke(f"{arg['item']} 0").content)
        b = str(model.invoke(f"{arg['item']} 1").content)
        interrupt(f"{arg['item']}: {a} {b}")
        return {"outs": [f"{arg['item']}: {a} {b}"]}

    g = StateGraph(Fan)
    g.add_node("work", work)
    g.add_conditional_edges(START, lambda s: [Send("work", {"item": i}) for i in s["items"]])
    g.add_edge("work", END)
    graph, config = g.compile(checkpointer=saver), _config()
    first = graph.invoke({"items": ["x", "y", "z"]}, config)
    asked = sorted(i.value for i in first["__interrupt__"])
    assert calls(key) == 6 and len(asked) == 3
    done = graph.invoke(Command(resume={i.id: True for i in first["__interrupt__"]}), config)
    assert calls(key) == 6
    assert sorted(done["outs"]) == asked
    answers = " ".join(asked)
    assert sorted(answers.replace(":", "").split()[1::3] + answers.split()[2::3]) == sorted(
        f"answer-{n}" for n in range(1, 7))


def test_an_agent_resumed_after_its_interrupts_pays_no_model_call_again(
        saver: DurableSaver) -> None:
    from langchain.agents import create_agent
    from langchain.agents.middleware import AgentMiddleware, HumanInTheLoopMiddleware

    class Review(AgentMiddleware):  # type: ignore[type-arg]
        """Asks a human to look at every answer inside the model node (so the model
        node itself re-runs on resume)."""

        def wrap_model_call(self, request: Any, handler: Any) -> Any:
            response = handler(request)
            interrupt({"review": [m.content for m in response.result]})
            return response

    @tool
    def send_email(to: str, body: str) -> str:
        """Send an e-mail."""
        return f"sent to {to}"

    key = _key()
    agent = create_agent(
        model=ToolCalling(key=key), tools=[send_email], checkpointer=saver,
        middleware=[Review(), HumanInTheLoopMiddleware(interrupt_on={"send_email": True}),
                    ModelJournalMiddleware()])
    config = _config()
    out = agent.invoke({"messages": [HumanMessage("mail bob")]}, config)
    rounds = 0
    while "__interrupt__" in out and rounds < 10:
        rounds += 1
        value = out["__interrupt__"][0].value
        answer = True if "review" in value else {"decisions": [{"type": "approve"}]}
        out = agent.invoke(Command(resume=answer), config)
    assert calls(key) == 2  # one tool call, one answer: no call paid twice
    assert rounds == 3  # review, approve the tool, review
    assert out["messages"][-1].content == "sent (2)"
    assert out["messages"][-2].content == "sent to bob"
    # replayed: the tool call on the review's resume, the answer on the last review's
    assert saver.stats()["model_calls"] == {"called": 2, "replayed": 2, "tokens_saved": 30}


def test_the_journal_comes_from_mongodb_when_redis_lost_the_thread(
        redis_url: str, mongo_url: str) -> None:
    key, config = _key(), _config()
    tid = config["configurable"]["thread_id"]
    with DurableSaver.from_urls(redis_url, mongo_url, **unique_options()) as saver:
        graph = ask_twice_then_approve(saver, journaled(Counting(key=key)))
        graph.invoke({"prompt": "q"}, config)
        saver.flush()
        keys = saver.context.keys(tid)
        saver.sync_clients.redis.delete(*keys.all, keys.fx)  # Redis lost the thread
        assert saver.sync_clients.redis.exists(*keys.all, keys.fx) == 0
        done = graph.invoke(Command(resume=True), config)
    assert calls(key) == 2
    assert done["out"] == "answer-1 answer-2"


def test_outside_a_durable_graph_the_model_is_called_or_strict_raises(
        caplog: pytest.LogCaptureFixture) -> None:
    key = _key()
    assert journaled(Counting(key=key)).invoke("q").content == "answer-1"
    with pytest.raises(ConfigurationError):
        journaled(Counting(key=key), strict=True).invoke("q")
    graph = ask_twice_then_approve(InMemorySaver(), journaled(Counting(key=key)))
    config = _config()
    graph.invoke({"prompt": "q"}, config)
    graph.invoke(Command(resume=True), config)
    assert calls(key) == 5  # 1, then 2 + 2 again: InMemorySaver journals nothing
    strict = ask_twice_then_approve(InMemorySaver(), journaled(Counting(key=key), strict=True))
    with pytest.raises(ConfigurationError, match="InMemorySaver"):
        strict.invoke({"prompt": "q"}, _config())


def test_a_sigkilled_node_resumed_in_another_process_makes_only_the_missing_call(
        redis_url: str, mongo_url: str) -> None:
    options, key, thread = unique_options(), _key(), f"t-{uuid.uuid4().hex[:8]}"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    child = subprocess.run(
        [sys.executable, "-m", "tests.model_journal_support", redis_url, mongo_url,
         str(options["key_prefix"]), str(options["database"]), thread, key, "3"],
        cwd=ROOT, env=env, timeout=120, capture_output=True, text=True)
    assert child.returncode == -signal.SIGKILL, child.stderr[-3000:]
    with DurableSaver.from_urls(redis_url, mongo_url, **options) as saver:
        graph = ask_twice_then_approve(saver, journaled(Counting(key=key)), calls_per_run=3)
        config = {"configurable": {"thread_id": thread}}
        first = graph.invoke(None, config)
        assert calls(key) == 1  # calls 0 and 1 replayed, call 2 (in doubt) made again
        assert first["__interrupt__"][0].value == "approve answer-1 answer-2 answer-1?"
        done = graph.invoke(Command(resume=True), config)
    assert calls(key) == 1
    assert done["out"] == "answer-1 answer-2 answer-1"


def test_a_chain_over_a_model_replays_its_structured_output(saver: DurableSaver) -> None:
    from langchain_core.runnables import RunnableLambda

    key = _key()
    chain = journaled(Counting(key=key) | RunnableLambda(lambda m: {"text": m.content}))
    seen: list[Any] = []

    def node(state: State) -> dict[str, Any]:
        seen.append(chain.invoke("q"))
        return {"ok": interrupt("ok?")}

    g = StateGraph(State)
    g.add_node("node", node)
    g.add_edge(START, "node")
    g.add_edge("node", END)
    graph, config = g.compile(checkpointer=saver), _config()
    graph.invoke({"prompt": "q"}, config)
    graph.invoke(Command(resume=True), config)
    assert calls(key) == 1
    assert seen == [{"text": "answer-1"}, {"text": "answer-1"}]
    assert chain.effect == "model:Counting"


async def test_an_async_agent_resumed_after_its_review_pays_no_model_call_again(
        asaver: DurableSaver) -> None:
    from langchain.agents import create_agent
    from langchain.agents.middleware import AgentMiddleware

    class Review(AgentMiddleware):  # type: ignore[type-arg]
        async def awrap_model_call(self, request: Any, handler: Any) -> Any:
            response = await handler(request)
            interrupt({"review": [m.content for m in response.result]})
            return response

    key = _key()
    agent = create_agent(model=Counting(key=key), tools=[], checkpointer=asaver,
                         middleware=[Review(), ModelJournalMiddleware()])
    config = _config()
    out = await agent.ainvoke({"messages": [HumanMessage("hi")]}, config)
    assert out["__interrupt__"][0].value == {"review": ["answer-1"]}
    out = await agent.ainvoke(Command(resume=True), config)
    assert calls(key) == 1
    assert out["messages"][-1].content == "answer-1"


def test_tool_calls_of_a_bound_model_are_replayed_by_invoke_and_stream(
        saver: DurableSaver) -> None:
    @tool
    def send_email(to: str, body: str) -> str:
        """Send an e-mail."""
        return f"sent to {to}"

    key = _key()
    model = journaled(ToolCalling(key=key)).bind_tools([send_email])
    seen: list[Any] = []

    def node(state: State) -> dict[str, Any]:
        seen.append([c.tool_calls for c in model.stream("mail bob")])
        seen.append(model.invoke("mail bob").content)
        return {"ok": interrupt("ok?")}

    g = StateGraph(State)
    g.add_node("node", node)
    g.add_edge(START, "node")
    g.add_edge("node", END)
    graph, config = g.compile(checkpointer=saver), _config()
    graph.invoke({"prompt": "q"}, config)
    graph.invoke(Command(resume=True), config)
    assert calls(key) == 2
    call = {"name": "send_email", "args": {"to": "bob", "body": "hi"}, "id": "call-1",
            "type": "tool_call"}
    assert seen[0] == seen[2] == [[call]]  # replayed as one chunk with the tool call
    assert seen[1] == seen[3] == "sent (2)"
    assert model.effect == "model:ToolCalling"


@pytest.mark.parametrize("allowed, paid", [(True, 1), (False, 2)])
def test_a_response_the_serializer_does_not_revive_is_not_replayed_as_another_type(
        redis_url: str, mongo_url: str, allowed: bool, paid: int) -> None:
    from langchain_core.runnables import RunnableLambda
    from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

    from .model_journal_support import Plan

    key = _key()
    chain = journaled(Counting(key=key) | RunnableLambda(lambda m: Plan(steps=[m.content])))
    seen: list[Any] = []

    def node(state: State) -> dict[str, Any]:
        seen.append(chain.invoke("q"))
        return {"ok": interrupt("ok?")}

    g = StateGraph(State)
    g.add_node("node", node)
    g.add_edge(START, "node")
    g.add_edge("node", END)
    modules = [("tests.model_journal_support", "Plan")] if allowed else []
    serde = JsonPlusSerializer(allowed_msgpack_modules=modules)
    with DurableSaver.from_urls(redis_url, mongo_url, serde=serde,
                                **unique_options()) as saver:
        graph, config = g.compile(checkpointer=saver), _config()
        graph.invoke({"prompt": "q"}, config)
        graph.invoke(Command(resume=True), config)
    assert calls(key) == paid
    assert seen == [Plan(steps=["answer-1"]), Plan(steps=[f"answer-{paid}"])]


def test_the_request_digest_ignores_message_ids_and_sees_tools_params_and_kwargs() -> None:
    from langgraph_durable.journal.calls import describe, digest, messages_of

    @tool
    def send_email(to: str, body: str) -> str:
        """Send an e-mail."""
        return to

    def of(model: Any, value: Any, **kwargs: Any) -> str:
        return digest(messages_of(value), describe(model), kwargs)

    plain, other = Counting(key="a"), Counting(key="b")
    bound = ToolCalling(key="a").bind_tools([send_email])
    base = of(plain, [HumanMessage("hi", id="1")])
    assert of(plain, [HumanMessage("hi", id="2")]) == base == of(plain, [("human", "hi")])
    assert of(plain, "hi") == base  # a string is one human message
    assert len({base, of(other, "hi"), of(plain, "hi!"), of(plain, "hi", stop=["x"]),
                of(bound, "hi"), of(ToolCalling(key="a").bind_tools([]), "hi")}) == 6
