"""A small LangGraph agent that analyses the Palmer penguins table, for the crash demo.

    plan -> load -> tools -> clean -> tools -> model_a -> tools -> model_b -> tools -> report

* ``plan`` asks the chat model for a plan; ``load``/``clean``/``model_a``/``model_b`` ask it
  for a tool call (an ``AIMessage`` with ``tool_calls``) that the ``tools`` node runs with
  LangGraph's prebuilt ``ToolNode``; ``report`` builds the final report from the state.
* The data is the table shipped inside the ``palmerpenguins`` wheel
  (``palmerpenguins.load_penguins()`` reads ``data/penguins.csv`` from the package; no
  network). The loaded and the cleaned tables stay in the state as pandas DataFrames
  (``raw``, ``clean``): the checkpointer's serializer must store them, which
  ``langgraph_durable.serde.ExternalRefSerializer`` does (each frame is a Parquet blob in a
  local folder or S3; checkpoints hold a small reference). LangGraph's default serializer
  refuses DataFrames. Tool results reach the state as artifacts, which the ``tools`` node moves
  out of the ``ToolMessage`` into the state (a message never carries a frame).
* Everything is deterministic (fixed ``random_state``, one job), so two runs give the same
  report whatever happens between them.
* The chat model is scripted (``ScriptedChatModel``: offline, deterministic; each call
  takes ``LANGGRAPH_DURABLE_DEMO_STEP_S / 2`` seconds and reports usage metadata). Set
  ``LANGGRAPH_DURABLE_DEMO_MODEL="provider:model"`` (e.g. ``openai:gpt-4o-mini``) to use a real
  model through ``langchain.chat_models.init_chat_model`` (needs ``pip install langchain``
  and the provider package); the metrics still come from the tools.
* With a ``DurableSaver`` every model call goes through ``langgraph_durable.journaled``: a
  re-executed node (after a crash) gets the answers its killed execution already had from
  the model-call journal instead of calling the model again. ``report`` makes three calls
  (a comment on each model, then the summary), so a kill can land between them.
* Every node sleeps ``LANGGRAPH_DURABLE_DEMO_STEP_S`` seconds (default 0.3) so a crash can land
  mid-run, and appends ``{"node", "pid", "ts", "step", "event"}`` JSON lines (``event`` is
  ``"start"`` or ``"end"``; ``"model"``, with ``call``, the call's number in the node, for
  each answer the scripted model gives: replays from the journal are not logged) to the
  file named by ``LANGGRAPH_DURABLE_DEMO_LOG`` (or the ``log_path`` argument), so re-runs
  and model calls can be counted across processes.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import time
from collections.abc import Callable
from typing import Annotated, Any, Literal, TypedDict

import pandas as pd
from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import (
    AIMessage,
    AnyMessage,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
)
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import tool
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages
from langgraph.prebuilt import InjectedState, ToolNode

ENV_STEP_S = "LANGGRAPH_DURABLE_DEMO_STEP_S"
ENV_LOG = "LANGGRAPH_DURABLE_DEMO_LOG"
ENV_MODEL = "LANGGRAPH_DURABLE_DEMO_MODEL"
DEFAULT_STEP_S = 0.3

FEATURES = ["bill_length_mm", "bill_depth_mm", "flipper_length_mm", "body_mass_g"]
TARGET = "species"
RANDOM_STATE = 7
TASK = ("Analyse the Palmer penguins table: load it, clean it, train two species classifiers "
        "and report which one is better.")
SYSTEM = ("You are a careful data analyst. Use exactly one tool call when a tool is offered; "
          "keep prose short.")


# --------------------------------------------------------------------------- state

def merge_dicts(left: dict[str, Any] | None, right: dict[str, Any] | None) -> dict[str, Any]:
    """Reducer: later keys win (each model adds its own metrics)."""
    return {**(left or {}), **(right or {})}


class PenguinState(TypedDict, total=False):
    messages: Annotated[list[AnyMessage], add_messages]
    plan: list[str]
    raw: pd.DataFrame        # the table as loaded (344 rows, 8 columns)
    clean: pd.DataFrame      # complete rows only, index 0..n-1
    split: dict[str, Any]    # {"dropped": n, "train_idx": [...], "test_idx": [...]}
    models: Annotated[dict[str, Any], merge_dicts]  # metrics per model
    report: dict[str, Any]
    mailed: dict[str, Any]   # the e-mail of the report (the mail node, with smtp)


def initial_input() -> dict[str, Any]:
    return {"messages": [HumanMessage(TASK)]}


# --------------------------------------------------------------------------- data helpers

def _r(x: float) -> float:
    return round(float(x), 4)


def _xy(state: dict[str, Any]) -> tuple[Any, Any, Any, Any, list[str]]:
    df, split = state.get("clean"), state.get("split")
    if df is None or not split:
        raise ValueError("no clean table in the state yet: run clean_table first")
    tr, te = split["train_idx"], split["test_idx"]
    x, y = df[FEATURES].to_numpy(dtype=float), df[TARGET].to_numpy()
    return x[tr], x[te], y[tr], y[te], sorted(set(y))


def _metrics(name: str, params: dict[str, Any], model: Any, x_te: Any, y_te: Any,
             labels: list[str]) -> dict[str, Any]:
    from sklearn.metrics import accuracy_score, confusion_matrix, f1_score

    pred = model.predict(x_te)
    return {
        "model": name,
        "params": params,
        "n_test": len(y_te),
        "accuracy": _r(accuracy_score(y_te, pred)),
        "macro_f1": _r(f1_score(y_te, pred, average="macro")),
        "labels": labels,
        "confusion": confusion_matrix(y_te, pred, labels=labels).tolist(),
    }


# --------------------------------------------------------------------------- tools

@tool(response_format="content_and_artifact")
def load_penguins_table(dataset: Literal["penguins"] = "penguins"
                        ) -> tuple[str, dict[str, Any]]:
    """Load the Palmer penguins table (344 rows, 8 columns) shipped with the palmerpenguins
    package (a CSV file inside the package; no network)."""
    import palmerpenguins

    df = palmerpenguins.load_penguins()
    missing = {c: int(n) for c, n in df.isna().sum().items() if n}
    content = f"Loaded {dataset}: {len(df)} rows x {df.shape[1]} columns; missing: {missing}"
    return content, {"raw": df}


@tool(response_format="content_and_artifact")
def clean_table(state: Annotated[dict, InjectedState], test_size: float = 0.3
                ) -> tuple[str, dict[str, Any]]:
    """Drop rows missing a measurement or the species, then make a stratified train/test
    split (fixed random_state)."""
    import numpy as np
    from sklearn.model_selection import train_test_split

    df = state.get("raw")
    if df is None:
        raise ValueError("no raw table in the state yet: run load_penguins_table first")
    kept = df.dropna(subset=[*FEATURES, TARGET]).reset_index(drop=True)
    tr, te = train_test_split(np.arange(len(kept)), test_size=test_size,
                              stratify=kept[TARGET], random_state=RANDOM_STATE)
    split = {"dropped": len(df) - len(kept),
             "train_idx": sorted(int(i) for i in tr), "test_idx": sorted(int(i) for i in te)}
    content = (f"Kept {len(kept)} of {len(df)} rows ({split['dropped']} dropped); "
               f"train {len(tr)}, test {len(te)}")
    return content, {"clean": kept, "split": split}


@tool(response_format="content_and_artifact")
def train_logistic_regression(state: Annotated[dict, InjectedState], c: float = 1.0
                              ) -> tuple[str, dict[str, Any]]:
    """Model A: standardised features + multinomial logistic regression (inverse
    regularisation strength ``c``); returns test metrics."""
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    x_tr, x_te, y_tr, y_te, labels = _xy(state)
    model = make_pipeline(StandardScaler(), LogisticRegression(C=c, max_iter=1000))
    model.fit(x_tr, y_tr)
    m = _metrics("logistic_regression", {"C": c}, model, x_te, y_te, labels)
    return f"logistic_regression: accuracy {m['accuracy']}, macro F1 {m['macro_f1']}", \
        {"models": {"logistic_regression": m}}


@tool(response_format="content_and_artifact")
def train_random_forest(state: Annotated[dict, InjectedState], n_estimators: int = 200,
                        max_depth: int | None = None) -> tuple[str, dict[str, Any]]:
    """Model B: random forest (fixed random_state, one job); returns test metrics and
    feature importances."""
    from sklearn.ensemble import RandomForestClassifier

    x_tr, x_te, y_tr, y_te, labels = _xy(state)
    model = RandomForestClassifier(n_estimators=n_estimators, max_depth=max_depth,
                                   random_state=RANDOM_STATE, n_jobs=1)
    model.fit(x_tr, y_tr)
    m = _metrics("random_forest", {"n_estimators": n_estimators, "max_depth": max_depth},
                 model, x_te, y_te, labels)
    m["feature_importance"] = {f: _r(v) for f, v in zip(FEATURES, model.feature_importances_)}
    return f"random_forest: accuracy {m['accuracy']}, macro F1 {m['macro_f1']}", \
        {"models": {"random_forest": m}}


TOOLS = [load_penguins_table, clean_table, train_logistic_regression, train_random_forest]
NEXT_AFTER_TOOL = {"load_penguins_table": "clean", "clean_table": "model_a",
                   "train_logistic_regression": "model_b", "train_random_forest": "report"}


# --------------------------------------------------------------------------- the chat model

PLAN = ["load the table with load_penguins_table",
        "clean it and split it with clean_table",
        "model A: train_logistic_regression",
        "model B: train_random_forest",
        "compare both models and write the report"]


def _call(name: str, call_id: str, args: dict[str, Any], text: str) -> AIMessage:
    return AIMessage(content=text, tool_calls=[{"name": name, "args": args, "id": call_id,
                                                "type": "tool_call"}])


def scripted_reply(node: str, state: dict[str, Any], part: str = "") -> AIMessage:
    """What the scripted model answers in ``node`` (fresh objects; deterministic); in
    ``report``, ``part`` is the model commented on, or "" for the summary."""
    if node == "plan":
        return AIMessage("Plan:\n" + "\n".join(f"{i}. {s}" for i, s in enumerate(PLAN, 1)))
    if node == "load":
        return _call("load_penguins_table", "call_load", {"dataset": "penguins"},
                     "Loading the penguins table.")
    if node == "clean":
        return _call("clean_table", "call_clean", {"test_size": 0.3},
                     "Dropping incomplete rows and splitting 70/30.")
    if node == "model_a":
        return _call("train_logistic_regression", "call_model_a", {"c": 1.0},
                     "Training model A (logistic regression).")
    if node == "model_b":
        return _call("train_random_forest", "call_model_b", {"n_estimators": 200},
                     "Training model B (random forest).")
    if node == "report" and part:
        m = state["report"]["models"][part]
        return AIMessage(f"{part}: accuracy {m['accuracy']:.4f}, macro F1 "
                         f"{m['macro_f1']:.4f} on {state['report']['test']} test penguins.")
    if node == "report":
        return AIMessage(render_report(state["report"]))
    raise KeyError(node)


class ScriptedChatModel(BaseChatModel):
    """The demo's offline chat model: answers ``reply`` after ``delay_s`` seconds, with
    usage metadata (about 4 characters a token), and logs the answer (``model`` event of
    ``node`` at ``step``, ``call`` its number in the node) to ``log_path``. Its identifying
    parameters leave the reply out, so a journaled call's request digest is the prompt's
    and the same in every process."""

    reply: AIMessage
    delay_s: float = 0.0
    log_path: str = ""
    node: str = ""
    step: int | None = None
    call: int = 0

    @property
    def _llm_type(self) -> str:
        return "penguins-scripted"

    @property
    def _identifying_params(self) -> dict[str, Any]:
        return {"script": "penguins"}

    def _generate(self, messages: list[BaseMessage], stop: list[str] | None = None,
                  run_manager: CallbackManagerForLLMRun | None = None,
                  **kwargs: Any) -> ChatResult:
        if self.delay_s > 0:
            time.sleep(self.delay_s)
        prompt = sum(len(str(m.content)) for m in messages) // 4 + 1
        answer = len(str(self.reply.content)) // 4 + 12 * len(self.reply.tool_calls) + 1
        message = self.reply.model_copy(update={"usage_metadata": {
            "input_tokens": prompt, "output_tokens": answer,
            "total_tokens": prompt + answer}})
        ExecutionLog(self.log_path).append(self.node, "model", self.step, call=self.call)
        return ChatResult(generations=[ChatGeneration(message=message)])


def real_model() -> Any | None:
    """The chat model named by ``LANGGRAPH_DURABLE_DEMO_MODEL`` or None (scripted)."""
    spec = os.environ.get(ENV_MODEL, "").strip()
    if not spec:
        return None
    try:
        from langchain.chat_models import init_chat_model  # type: ignore[import-not-found]
    except ImportError as exc:
        raise RuntimeError(
            f"{ENV_MODEL}={spec!r} asks for a real chat model, but the `langchain` package is "
            "not installed: `pip install langchain langchain-<provider>` (e.g. "
            "langchain-openai), or unset the variable to use the scripted offline model"
        ) from exc
    try:
        return init_chat_model(spec, temperature=0)
    except (ImportError, ValueError) as exc:  # provider package missing, unknown provider
        raise RuntimeError(f"{ENV_MODEL}={spec!r}: cannot make the chat model: {exc}") from exc


# --------------------------------------------------------------------------- report

def build_report(state: dict[str, Any]) -> dict[str, Any]:
    """The deterministic report (what the crash demo compares)."""
    df, split, models = state["clean"], state["split"], state["models"]
    means = df.groupby(TARGET)[FEATURES].mean().round(2)
    body = {
        "plan": state.get("plan", []),
        "rows_raw": len(state["raw"]),
        "rows_clean": len(df),
        "dropped": split["dropped"],
        "train": len(split["train_idx"]),
        "test": len(split["test_idx"]),
        "species": {k: int(v) for k, v in df[TARGET].value_counts().sort_index().items()},
        "means_by_species": {s: {f: float(means.loc[s, f]) for f in FEATURES}
                             for s in means.index},
        "models": {k: {"accuracy": v["accuracy"], "macro_f1": v["macro_f1"],
                       "confusion": v["confusion"]} for k, v in sorted(models.items())},
        "best_model": max(sorted(models), key=lambda k: (models[k]["macro_f1"],
                                                          models[k]["accuracy"])),
    }
    digest = hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()[:16]
    return {**body, "digest": digest}


def render_report(report: dict[str, Any]) -> str:
    lines = [f"Palmer penguins: {report['rows_clean']} of {report['rows_raw']} rows used "
             f"({report['dropped']} dropped), train {report['train']} / test {report['test']}",
             "species: " + ", ".join(f"{k} {v}" for k, v in report["species"].items())]
    for name, m in report["models"].items():
        lines.append(f"{name}: accuracy {m['accuracy']:.4f}, macro F1 {m['macro_f1']:.4f}")
    lines.append(f"best model: {report['best_model']} (report digest {report['digest']})")
    return "\n".join(lines)


# --------------------------------------------------------------------------- the graph

class ExecutionLog:
    """Append-only JSON-lines log of node executions (one ``write`` per line, O_APPEND)."""

    def __init__(self, path: str | os.PathLike[str] | None) -> None:
        self.path = os.fspath(path) if path else None

    def append(self, node: str, event: str, step: int | None, **extra: Any) -> None:
        """Append one event (``extra``: more fields, e.g. a model call's ``call``)."""
        if not self.path:
            return
        line = json.dumps({"node": node, "pid": os.getpid(), "ts": time.time(),
                           "step": step, "event": event, **extra}) + "\n"
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, line.encode())
        finally:
            os.close(fd)


def read_log(path: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """The events of an execution log (a torn last line, from a kill, is skipped)."""
    out = []
    try:
        with open(path, encoding="utf-8") as f:
            for line in f:
                try:
                    out.append(json.loads(line))
                except ValueError:
                    pass
    except FileNotFoundError:
        pass
    return out


def send_report_mail(smtp: str, report: dict[str, Any], message_id: str) -> dict[str, Any]:
    """E-mail ``report`` through the SMTP server ``smtp`` (``host:port``) with the
    ``Message-ID`` ``<message_id@langgraph-durable>`` (a sink can deduplicate by it).
    Returns what was sent: ``{"to", "message_id", "digest"}``."""
    import smtplib
    from email.message import EmailMessage

    host, port = smtp.rsplit(":", 1)
    msg = EmailMessage()
    msg["From"], msg["To"] = "agent@penguins.example", "biologist@penguins.example"
    msg["Subject"] = f"penguins report {report.get('digest')}"
    msg["Message-ID"] = f"<{message_id}@langgraph-durable>"
    msg.set_content(render_report(report))
    with smtplib.SMTP(host, int(port), timeout=10) as client:
        client.send_message(msg)
    return {"to": msg["To"], "message_id": msg["Message-ID"], "digest": report.get("digest")}


def build_agent(checkpointer: Any = None, *, step_s: float | None = None,
                log_path: str | os.PathLike[str] | None = None, model: Any = "env",
                smtp: str | None = None, journal: bool | None = None) -> Any:
    """The compiled agent. ``step_s``/``log_path`` default to the environment variables;
    ``model="env"`` reads ``LANGGRAPH_DURABLE_DEMO_MODEL`` (None = scripted). ``smtp``
    (``host:port``, needs a ``DurableSaver``): a last node, ``mail``, e-mails the report
    once (``langgraph_durable.once``), then waits ``step_s`` (room for a kill
    after the send). ``journal`` (default: when ``checkpointer`` is a ``DurableSaver``):
    every model call goes through ``journaled``, so a re-executed node does not call the
    model again for the answers its earlier execution journaled."""
    from langgraph_durable import DurableSaver, journaled

    delay = float(os.environ.get(ENV_STEP_S, DEFAULT_STEP_S)) if step_s is None else step_s
    log = ExecutionLog(log_path if log_path is not None else os.environ.get(ENV_LOG))
    llm = real_model() if model == "env" else model
    tool_node = ToolNode(TOOLS)
    if journal is None:
        journal = isinstance(checkpointer, DurableSaver)

    def ask(node: str, state: dict[str, Any], config: RunnableConfig, instruction: str,
            tool_: Any = None, *, part: str = "", call: int = 0) -> AIMessage:
        """Call ``call`` of ``node``: the prompt is the system message, the conversation
        and ``instruction``; journaled when ``journal``."""
        prompt = [SystemMessage(SYSTEM), *state.get("messages", []), HumanMessage(instruction)]
        chat: Any
        if llm is None:
            chat = ScriptedChatModel(
                reply=scripted_reply(node, state, part), delay_s=delay / 2,
                log_path=log.path or "", node=node, call=call,
                step=config.get("metadata", {}).get("langgraph_step"))
        else:
            chat = llm.bind_tools([tool_], tool_choice=tool_.name) if tool_ is not None else llm
        return (journaled(chat) if journal else chat).invoke(prompt)  # type: ignore[no-any-return]

    def node(name: str) -> Callable[[Callable[..., dict[str, Any]]], Callable[..., Any]]:
        def wrap(fn: Callable[..., dict[str, Any]]) -> Callable[..., Any]:
            @functools.wraps(fn)
            def run(state: PenguinState, config: RunnableConfig) -> dict[str, Any]:
                step = config.get("metadata", {}).get("langgraph_step")
                log.append(name, "start", step)
                if delay > 0:
                    time.sleep(delay)
                out = fn(state, config)
                log.append(name, "end", step)
                return out
            return run
        return wrap

    @node("plan")
    def plan(state: PenguinState, config: RunnableConfig) -> dict[str, Any]:
        msg = ask("plan", state, config, "Write a numbered plan of at most five steps.")
        steps = [line.split(". ", 1)[1] for line in str(msg.content).splitlines()
                 if ". " in line and line.split(". ", 1)[0].strip().isdigit()]
        return {"messages": [msg], "plan": steps}

    def tool_step(name: str, instruction: str, tool_: Any) -> Callable[..., Any]:
        @node(name)
        def step(state: PenguinState, config: RunnableConfig) -> dict[str, Any]:
            msg = ask(name, state, config, instruction, tool_)
            if not getattr(msg, "tool_calls", None):
                raise RuntimeError(f"{name}: the model did not call {tool_.name}")
            return {"messages": [msg]}
        return step

    @node("tools")
    def tools(state: PenguinState, config: RunnableConfig) -> dict[str, Any]:
        out = tool_node.invoke(state, config)
        update: dict[str, Any] = {}
        messages = []
        for msg in out["messages"]:
            if isinstance(msg, ToolMessage) and msg.status == "error":
                raise RuntimeError(f"tool {msg.name} failed: {msg.content}")
            if isinstance(msg, ToolMessage) and isinstance(msg.artifact, dict):
                update.update(msg.artifact)  # DataFrames go to the state, not the message
                msg = msg.model_copy(update={"artifact": None})
            messages.append(msg)
        return {**update, "messages": messages}

    @node("report")
    def report(state: PenguinState, config: RunnableConfig) -> dict[str, Any]:
        # three model calls: a comment on each model, then the summary that uses them
        rep = build_report(state)
        seen = {**state, "report": rep}
        comments = [str(ask("report", seen, config, f"Comment on {name}'s test results in "
                            "one sentence:\n" + json.dumps(rep["models"][name]),
                            part=name, call=i).content)
                    for i, name in enumerate(sorted(rep["models"]))]
        msg = ask("report", seen, config, "Summarise the results for a biologist:\n"
                  + json.dumps(rep, indent=1) + "\nYour comments:\n" + "\n".join(comments),
                  call=len(comments))
        return {"messages": [msg], "report": rep}

    def after_tools(state: PenguinState) -> str:
        last = state["messages"][-1]
        return NEXT_AFTER_TOOL[getattr(last, "name", "")]

    g = StateGraph(PenguinState)
    g.add_node("plan", plan)
    g.add_node("load", tool_step("load", "Load the penguins table.", load_penguins_table))
    g.add_node("clean", tool_step("clean", "Clean the table and split it.", clean_table))
    g.add_node("model_a", tool_step("model_a", "Train model A.", train_logistic_regression))
    g.add_node("model_b", tool_step("model_b", "Train model B.", train_random_forest))
    g.add_node("tools", tools)
    g.add_node("report", report)
    g.add_edge(START, "plan")
    g.add_edge("plan", "load")
    for name in ("load", "clean", "model_a", "model_b"):
        g.add_edge(name, "tools")
    g.add_conditional_edges("tools", after_tools, ["clean", "model_a", "model_b", "report"])
    if smtp is None:
        g.add_edge("report", END)
        return g.compile(checkpointer=checkpointer)

    @node("mail")
    def mail(state: PenguinState, config: RunnableConfig) -> dict[str, Any]:
        from langgraph_durable import idempotency_key, once

        def send() -> dict[str, Any]:
            return send_report_mail(smtp, state["report"],
                                    idempotency_key("mail the report"))

        # in doubt (killed between the send and its journal): send again with the same
        # Message-ID, which the receiving side deduplicates
        sent = once("mail the report", send, in_doubt="retry")
        if delay > 0:
            time.sleep(delay)
        return {"mailed": sent}

    g.add_node("mail", mail)
    g.add_edge("report", "mail")
    g.add_edge("mail", END)
    return g.compile(checkpointer=checkpointer)


def transcript(messages: list[Any]) -> list[list[Any]]:
    """Messages without their ids (those differ between runs): type, content, tool calls."""
    out = []
    for m in messages:
        calls = [[c["name"], c["args"], c["id"]] for c in getattr(m, "tool_calls", None) or []]
        out.append([m.type, m.content, calls, getattr(m, "tool_call_id", None)])
    return out


def dataframe_serde(store: Any = None) -> Any:
    """The serializer the agent's checkpointer needs: ``ExternalRefSerializer`` (DataFrames as
    Parquet blobs in ``store``; default a new temporary folder) over a strict
    ``JsonPlusSerializer`` (``allowed_msgpack_modules=None``: only LangGraph's safe types,
    messages included, are revived; the state holds no other)."""
    import tempfile

    from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

    from langgraph_durable.serde import ExternalRefSerializer, LocalBlobStore

    if store is None:
        store = LocalBlobStore(tempfile.mkdtemp(prefix="lgd-penguins-blobs-"))
    return ExternalRefSerializer(JsonPlusSerializer(allowed_msgpack_modules=None),
                                 store=store)


if __name__ == "__main__":  # a quick uninterrupted run
    from langgraph.checkpoint.memory import InMemorySaver

    graph = build_agent(InMemorySaver(serde=dataframe_serde()), step_s=0)
    final = graph.invoke(initial_input(), {"configurable": {"thread_id": "demo"}})
    for m in final["messages"]:
        m.pretty_print()
