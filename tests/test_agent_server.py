"""LangGraph's Agent Server (issue 23 item 2): ``langgraph dev`` (langgraph-cli[inmem]) runs
``examples/agent_server`` with DurableSaver as its checkpointer (``langgraph.json``'s
``"checkpointer": {"path": ...}``), with run threads on their own event loops
(``BG_JOB_ISOLATED_LOOPS=true``). A thread run to an interrupt survives SIGKILL of the
server: a new server shows its state and history and the run resumes there. The servers
are real (``redis_url``/``mongo_url``), offline (no tracing, no analytics, no license)."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pymongo
import pytest
import redis
from langgraph_sdk import get_sync_client
from langgraph_sdk.client import SyncLangGraphClient

from langgraph_durable import DurableSaver
from langgraph_durable.hot.keys import prefix_pattern
from langgraph_durable.testing import drop_namespace, unique_options, wait_for

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "examples" / "agent_server"
LANGGRAPH = Path(sys.executable).parent / "langgraph"
START_TIMEOUT_S = 60.0


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class AgentServer:
    """One ``langgraph dev`` process (its own process group) on a free loopback port."""

    def __init__(self, workdir: Path, env: dict[str, str], name: str) -> None:
        self.port = _free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = workdir / f"{name}.log"
        with self.log.open("wb") as out:
            self.proc = subprocess.Popen(
                [str(LANGGRAPH), "dev", "--host", "127.0.0.1", "--port", str(self.port),
                 "--no-browser", "--no-reload", "--config", "langgraph.json"],
                cwd=workdir, env=env, stdout=out, stderr=subprocess.STDOUT,
                start_new_session=True)

    def wait_ready(self) -> SyncLangGraphClient:
        """Poll ``/ok`` until it answers 200 (at most ``START_TIMEOUT_S``); raises with the
        server's log when it exits or never answers."""

        def ok() -> bool:
            if self.proc.poll() is not None:
                raise RuntimeError(f"langgraph dev exited ({self.proc.returncode}):\n"
                                   + self.tail())
            try:
                return httpx.get(f"{self.url}/ok", timeout=2.0).status_code == 200
            except httpx.HTTPError:
                return False

        try:
            wait_for(ok, START_TIMEOUT_S, f"langgraph dev on {self.url}/ok", pause_s=0.1)
        except TimeoutError as exc:
            raise TimeoutError(f"{exc}; log:\n{self.tail()}") from None
        return get_sync_client(url=self.url, api_key=None)

    def tail(self, chars: int = 4000) -> str:
        return self.log.read_text(errors="replace")[-chars:]

    def terminate(self, timeout_s: float = 60.0) -> int:
        """SIGTERM (a graceful shutdown, as ``docker stop`` sends) and wait for the exit
        (at most ``timeout_s``); returns the exit code."""
        os.killpg(self.proc.pid, signal.SIGTERM)
        return self.proc.wait(timeout=timeout_s)

    def kill(self) -> None:
        """SIGKILL the whole process group and reap the process."""
        if self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait(timeout=30)


@pytest.fixture
def example(tmp_path: Path) -> Path:
    """A copy of the example (``langgraph dev`` resolves its paths against the working
    directory and keeps its own runtime files there, ``.langgraph_api/``)."""
    work = tmp_path / "agent_server"
    shutil.copytree(EXAMPLE, work, ignore=shutil.ignore_patterns("__pycache__"))
    return work


@pytest.fixture
def server_env(redis_url: str, mongo_url: str) -> dict[str, str]:
    opts = unique_options()
    env = {k: v for k, v in os.environ.items()
           if not k.upper().startswith(("LGD_", "LANGSMITH_", "LANGCHAIN_", "LANGGRAPH_"))}
    env.update({
        "REDIS_URL": redis_url, "MONGODB_URL": mongo_url,
        "LGD_KEY_PREFIX": str(opts["key_prefix"]), "LGD_DATABASE": str(opts["database"]),
        "PYTHONPATH": os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")]).rstrip(
            os.pathsep),  # this checkout's langgraph_durable
        "BG_JOB_ISOLATED_LOOPS": "true",  # run threads with event loops of their own
        "LANGSMITH_TRACING": "false", "LANGCHAIN_TRACING_V2": "false",
        "LANGGRAPH_CLI_NO_ANALYTICS": "1", "LANGSMITH_API_KEY": "",
    })
    return env


@contextlib.contextmanager
def running(workdir: Path, env: dict[str, str], name: str
            ) -> Iterator[tuple[AgentServer, SyncLangGraphClient]]:
    server = AgentServer(workdir, env, name)
    try:
        yield server, server.wait_ready()
    finally:
        server.kill()


def _consumers_by_pid(r: redis.Redis, outboxes: list[str], pid: int) -> set[str]:
    """Names of the outbox consumers (one per flusher) of process ``pid``."""
    names = set()
    for stream in outboxes:
        for group in r.xinfo_groups(stream):
            for c in r.xinfo_consumers(stream, group["name"]):
                name = c["name"].decode() if isinstance(c["name"], bytes) else c["name"]
                if f"-{pid}-" in name:
                    names.add(name)
    return names


def _history_ids(client: SyncLangGraphClient, thread_id: str) -> list[str]:
    return [h["checkpoint"]["checkpoint_id"]
            for h in client.threads.get_history(thread_id, limit=100)]


def test_a_thread_interrupted_under_langgraph_dev_survives_sigkill_and_resumes(
        example: Path, server_env: dict[str, str], redis_url: str, mongo_url: str) -> None:
    prefix, database = server_env["LGD_KEY_PREFIX"], server_env["LGD_DATABASE"]
    names = DurableSaver.from_urls(redis_url, mongo_url, key_prefix=prefix, database=database)
    outboxes = list(names.context.outboxes)
    names.close()  # never set up: it only named the outbox streams
    r = redis.Redis.from_url(redis_url)
    m: pymongo.MongoClient[dict[str, Any]] = pymongo.MongoClient(mongo_url)
    try:
        with running(example, server_env, "first") as (first, client):
            thread_id = client.threads.create()["thread_id"]
            client.runs.wait(thread_id, "counter", input={"goal": 4, "ask_at": 2})
            state = client.threads.get_state(thread_id)
            assert state["values"]["count"] == 2 and state["next"] == ["check"]
            assert state["tasks"][0]["interrupts"][0]["value"] == {
                "question": "the count is 2: go on?", "count": 2}
            history = _history_ids(client, thread_id)
            # DurableSaver served it: its keys in Redis, its documents in MongoDB
            assert list(r.scan_iter(match=prefix_pattern(prefix), count=1000))
            stored = wait_for(lambda: m[database]["checkpoints"].count_documents(
                {"thread_id": thread_id}) >= len(history) and
                m[database]["checkpoints"].count_documents({"thread_id": thread_id}),
                30, "the first server's checkpoints in MongoDB")
            assert stored == len(history)
            assert len(_consumers_by_pid(r, outboxes, first.proc.pid)) == 1
            # the server dies without a word (SIGKILL of its process group)

        # the dev server's own tables (threads, runs; saved to .langgraph_api/ every 10 s)
        # go too, as with a new container: whatever the next server knows of the thread's
        # state it reads from DurableSaver
        shutil.rmtree(example / ".langgraph_api", ignore_errors=True)
        with running(example, server_env, "second") as (second, client):
            client.threads.create(thread_id=thread_id, metadata={"graph_id": "counter"})
            state = client.threads.get_state(thread_id)
            assert state["values"] == {"count": 2, "goal": 4, "ask_at": 2,
                                       "log": ["count 1", "count 2"]}
            assert state["next"] == ["check"]
            assert _history_ids(client, thread_id) == history
            done = client.runs.wait(thread_id, "counter", command={"resume": "yes"})
            assert done == {"count": 4, "goal": 4, "ask_at": 2,
                            "log": ["count 1", "count 2", "asked at 2: yes", "count 3",
                                    "count 4"]}
            final = _history_ids(client, thread_id)
            assert len(final) > len(history) and final[-len(history):] == history
            # every run thread of this server used the one shared saver: one flusher
            assert len(_consumers_by_pid(r, outboxes, second.proc.pid)) == 1
            # a graceful stop closes it (the server leaves its start-up entry): the
            # outbox drained, the flusher out of the consumer group
            # (uvicorn re-raises SIGTERM once its shutdown is done: exit status -15)
            assert second.terminate() in (0, -signal.SIGTERM), second.tail()
            assert _consumers_by_pid(r, outboxes, second.proc.pid) == set()
            assert sum(int(r.xlen(s)) for s in outboxes) == 0
            assert m[database]["checkpoints"].count_documents(
                {"thread_id": thread_id}) == len(final)
    finally:
        r.close()
        m.close()
        drop_namespace(redis_url, mongo_url, prefix, database)


def test_memories_put_under_langgraph_dev_survive_sigkill_and_are_found_by_another_thread(
        example: Path, server_env: dict[str, str], redis_url: str, mongo_url: str) -> None:
    """``langgraph.json``'s ``"store"`` (``store.py``: a ``DurableStore`` on the shared
    saver): the ``memory`` graph puts memories in one thread; after SIGKILL and a new
    server, another thread's run and the server's store API find them by search."""
    prefix, database = server_env["LGD_KEY_PREFIX"], server_env["LGD_DATABASE"]
    names = DurableSaver.from_urls(redis_url, mongo_url, key_prefix=prefix, database=database)
    outboxes = list(names.context.outboxes)
    names.close()
    r = redis.Redis.from_url(redis_url)
    try:
        with running(example, server_env, "first") as (first, client):
            writer = client.threads.create()["thread_id"]
            out = client.runs.wait(writer, "memory", input={"user": "ada",
                                                            "remember": "likes tea"})
            assert out["found"] == ["likes tea"]
            out = client.runs.wait(writer, "memory", input={"user": "ada",
                                                            "remember": "lives in Oslo"})
            assert out["found"] == ["likes tea", "lives in Oslo"]
            # the checkpointer and the store share one saver: one flusher in the process
            assert len(_consumers_by_pid(r, outboxes, first.proc.pid)) == 1

        shutil.rmtree(example / ".langgraph_api", ignore_errors=True)
        with running(example, server_env, "second") as (_, client):
            reader = client.threads.create()["thread_id"]
            assert reader != writer
            out = client.runs.wait(reader, "memory", input={"user": "ada"})
            assert out["found"] == ["likes tea", "lives in Oslo"]
            items = client.store.search_items(("memories", "ada"), limit=10)["items"]
            assert sorted(i["value"]["text"] for i in items) == ["likes tea",
                                                                 "lives in Oslo"]
            assert client.store.search_items(("memories", "bob"))["items"] == []
    finally:
        r.close()
        drop_namespace(redis_url, mongo_url, prefix, database)
