"""The operator's tools never run stored data: a checkpoint holding msgpack constructor
entries that name ``os.system`` (written the way LangGraph's serializer writes an Enum)
is shown by ``show``, ``diff``, the dashboard's pages and its JSON as a placeholder,
and the command is never run; messages, DataFrames (blob store) and a type the operator
allows still decode. The dashboard answers only allowed Host names and redirects only to
its own paths; a saver set up with a permissive serializer warns once per process."""

from __future__ import annotations

import dataclasses
import enum
import http.client
import json
import logging
import os
import socket
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import pandas as pd
import pytest
import uvicorn
from langchain_core.messages import AIMessage, HumanMessage
from langgraph.checkpoint.base import empty_checkpoint
from langgraph.checkpoint.serde.encrypted import EncryptedSerializer
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

from langgraph_durable import DurableSaver
from langgraph_durable.dashboard import create_app, security
from langgraph_durable.runtime import startup
from langgraph_durable.serde import ExternalRefSerializer, LocalBlobStore
from langgraph_durable.testing import unique_options, wait_for

from .cli.clikit import Cli

TOKEN = "test-token-0123456789"
PLACEHOLDER = "<not decoded: os.system (not in the allowlist)>"
NOT_DECODED = {"$not_decoded": "os.system", "reason": "not in the allowlist"}
POINT = "tests.test_tool_safety.Point"
AES_KEY = b"0123456789abcdef"


@dataclasses.dataclass
class Point:
    """A type of the application's own (allowed with --allow-type / allow_types)."""

    x: int
    y: int


def encrypted_serde() -> ExternalRefSerializer:
    """``--serde tests.test_tool_safety:encrypted_serde``: blobs in the folder
    ``$SAFETY_BLOBS``, values and blobs encrypted with AES (the tests' key)."""
    return ExternalRefSerializer(EncryptedSerializer.from_pycryptodome_aes(key=AES_KEY),
                                 store=LocalBlobStore(os.environ["SAFETY_BLOBS"]))


def payload(marker: Path) -> Any:
    """A value LangGraph's serializer stores as the msgpack entry ``("os", "system",
    "touch <marker>")`` (an Enum's module, name and value): its permissive decoding runs
    ``os.system("touch <marker>")``."""
    return enum.Enum("system", {"CMD": f"touch {marker}"}, module="os").CMD


def poison(saver: DurableSaver, marker: Path, thread: str = "poisoned") -> list[str]:
    """Two checkpoints of ``thread``: a first with one message; a second holding the
    payload as a channel value, as an item of the message list, inside a dict and as a
    pending write, beside a DataFrame and a ``Point``. Returns their ids, oldest first."""
    evil = payload(marker)
    config: Any = {"configurable": {"thread_id": thread, "checkpoint_ns": ""}}
    ids = []
    states = [{"messages": [HumanMessage("hi", id="h-1")], "count": 1},
              {"messages": [HumanMessage("hi", id="h-1"), AIMessage("done", id="a-1"), evil],
               "count": 2, "evil": evil, "nested": {"ok": 1, "bad": evil},
               "table": pd.DataFrame({"city": ["Oslo", "Rome", "Lima"], "temp": [12, 25, 18]}),
               "point": Point(1, 2)}]
    for step, values in enumerate(states):
        cp = empty_checkpoint()
        cp["channel_values"] = values
        cp["channel_versions"] = {ch: f"{step + 1:032}.0" for ch in values}
        config = saver.put(config, cp, {"step": step, "source": "loop"},
                           cp["channel_versions"])
        ids.append(cp["id"])
    saver.put_writes(config, [("evil", evil), ("count", 3)], "task-1")
    return ids


def _store(tmp_path: Path) -> LocalBlobStore:
    return LocalBlobStore(tmp_path / "blobs")


# --------------------------------------------------------------------------- CLI


def test_show_and_diff_show_a_type_outside_the_allowlist_as_a_placeholder_and_never_run_it(
        redis_url: str, mongo_url: str, tmp_path: Path) -> None:
    cli, marker = Cli(redis_url, mongo_url), tmp_path / "pwned"
    serde = ExternalRefSerializer(store=_store(tmp_path))
    with cli.saver(serde=serde) as saver:
        first, second = poison(saver, marker)
    shown = cli.json("show", "poisoned")  # no blob store, no allowed type
    values = shown["channel_values"]
    assert values["evil"] == NOT_DECODED
    assert values["nested"] == {"ok": 1, "bad": NOT_DECODED}
    assert values["messages"][2] == NOT_DECODED
    assert [(m["type"], m["content"]) for m in values["messages"][:2]] == [
        ("human", "hi"), ("ai", "done")]
    assert values["point"] == {"$not_decoded": POINT, "reason": "not in the allowlist"}
    assert shown["pending_writes"][0] == {"task_id": "task-1", "channel": "evil",
                                          "value": NOT_DECODED}
    assert not marker.exists()
    full = cli.json("--blob-store", str(tmp_path / "blobs"), "--allow-type", POINT,
                    "show", "poisoned")["channel_values"]
    assert full["point"] == {"$type": "Point", "x": 1, "y": 2}
    assert full["table"] == {"$type": "DataFrame", "shape": [3, 2], "columns": ["city", "temp"]}
    assert full["evil"] == NOT_DECODED
    text = cli("--blob-store", str(tmp_path / "blobs"), "show", "poisoned").stdout
    assert PLACEHOLDER in text and "DataFrame 3x2 (city, temp)" in text
    rows = {r["channel"]: r for r in cli.json("diff", "poisoned", first, second)["channels"]}
    assert rows["evil"] == {"channel": "evil", "change": "added", "after": PLACEHOLDER}
    assert rows["messages"]["added"] == ["ai a-1", PLACEHOLDER]
    assert PLACEHOLDER in cli("diff", "poisoned", first, second).stdout
    history = cli.json("history", "poisoned")["checkpoints"]
    assert [(h["step"], h["writes"]) for h in history] == [(1, 2), (0, 0)]
    assert not marker.exists()
    bad = cli("--allow-type", "os", "show", "poisoned", code=2)
    assert "--allow-type" in bad.stderr and "module.Class" in bad.stderr


def test_the_cli_decrypts_with_an_encrypted_serializer_and_stays_strict(
        redis_url: str, mongo_url: str, tmp_path: Path) -> None:
    cli, marker = Cli(redis_url, mongo_url), tmp_path / "pwned"
    cli.env["SAFETY_BLOBS"] = str(tmp_path / "blobs")
    with pytest.MonkeyPatch.context() as env:
        env.setenv("SAFETY_BLOBS", cli.env["SAFETY_BLOBS"])
        with cli.saver(serde=encrypted_serde()) as saver:
            first, second = poison(saver, marker)
    stored = [p for p in (tmp_path / "blobs").rglob("*") if p.is_file()]
    assert [p.suffixes for p in stored] == [[".parquet", ".aes"]]  # encrypted at rest
    values = cli.json("--serde", "tests.test_tool_safety:encrypted_serde", "--allow-type",
                      POINT, "show", "poisoned")["channel_values"]
    assert values["evil"] == NOT_DECODED and values["messages"][2] == NOT_DECODED
    assert values["messages"][1]["content"] == "done" and values["count"] == 2
    assert values["point"] == {"$type": "Point", "x": 1, "y": 2}
    assert values["table"] == {"$type": "DataFrame", "shape": [3, 2],
                               "columns": ["city", "temp"]}
    refused = cli("--serde", "tests.test_tool_safety:encrypted_serde", "fork", "poisoned",
                  "--checkpoint", second, "--to", "copy", code=1)
    assert refused.stderr.startswith("error: channel ")
    assert PLACEHOLDER in refused.stderr and "--allow-type" in refused.stderr
    assert not marker.exists()


# --------------------------------------------------------------------------- dashboard


class Served:
    """An ASGI app served by uvicorn in a thread on a free loopback port; ``get`` sends
    a raw request (the target and Host exactly as given)."""

    def __init__(self, app: Any) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        self.server = uvicorn.Server(uvicorn.Config(app, log_level="warning", access_log=False,
                                                    timeout_graceful_shutdown=2))
        self.thread = threading.Thread(target=self.server.run, kwargs={"sockets": [self.sock]},
                                       daemon=True)
        self.thread.start()
        wait_for(lambda: self.server.started, 10, "uvicorn to start")

    def request(self, method: str, target: str, host: str | None = None,
                body: str | None = None, headers: dict[str, str] | None = None
                ) -> tuple[int, dict[str, str], str]:
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)
        try:
            conn.putrequest(method, target, skip_host=True)
            conn.putheader("Host", host or f"127.0.0.1:{self.port}")
            for k, v in (headers or {}).items():
                conn.putheader(k, v)
            data = body.encode() if body is not None else None
            if data is not None:
                conn.putheader("Content-Length", str(len(data)))
            conn.endheaders(data)
            r = conn.getresponse()
            return r.status, {k.lower(): v for k, v in r.getheaders()}, r.read().decode()
        finally:
            conn.close()

    def get(self, target: str, host: str | None = None, bearer: bool = False
            ) -> tuple[int, dict[str, str], str]:
        return self.request("GET", target, host,
                            headers={"Authorization": f"Bearer {TOKEN}"} if bearer else None)

    def close(self) -> None:
        self.server.should_exit = True
        self.thread.join(10)
        self.sock.close()


@pytest.fixture(scope="module")
def poisoned(redis_url: str, mongo_url: str, tmp_path_factory: Any
             ) -> Iterator[dict[str, Any]]:
    """A saver with the application's permissive serializer (ExternalRefSerializer over
    LangGraph's default) and the poisoned thread; the marker its payload would create."""
    tmp = tmp_path_factory.mktemp("safety")
    serde = ExternalRefSerializer(store=_store(tmp))
    with DurableSaver.from_urls(redis_url, mongo_url, serde=serde, **unique_options()) as s:
        ids = poison(s, tmp / "pwned")
        yield {"saver": s, "ids": ids, "marker": tmp / "pwned"}


@pytest.fixture(scope="module")
def served(poisoned: dict[str, Any]) -> Iterator[Served]:
    app = create_app(poisoned["saver"], token=TOKEN, allow_writes=True, index_ttl_s=0,
                     allow_types=[POINT], allowed_hosts=["dash.example"])
    s = Served(app)
    yield s
    s.close()


def _auth(target: str) -> str:
    return target + ("&" if "?" in target else "?") + "token=" + TOKEN


def test_the_dashboard_shows_the_placeholder_escaped_and_never_runs_the_payload(
        poisoned: dict[str, Any], served: Served) -> None:
    status, _h, body = served.get(_auth("/api/thread?thread_id=poisoned"))
    assert status == 200, body
    state = json.loads(body)["state"]
    views = {c["channel"]: c["view"] for c in state["channels"]}
    assert views["evil"] == {"kind": "not_decoded", "name": "os.system",
                             "reason": "not in the allowlist", "text": PLACEHOLDER}
    assert views["table"]["kind"] == "frame" and views["table"]["shape"] == [3, 2]
    assert json.loads(views["point"]["text"]) == {"$type": "Point", "x": 1, "y": 2}
    assert '"$not_decoded": "os.system"' in views["nested"]["text"]
    assert '"$not_decoded": "os.system"' in views["messages"]["text"]
    assert state["writes"][0]["view"]["kind"] == "not_decoded"
    status, _h, page = served.get("/thread?thread_id=poisoned", bearer=True)
    assert status == 200
    assert "&lt;not decoded: os.system (not in the allowlist)&gt;" in page
    assert "<not decoded" not in page
    first, second = poisoned["ids"]
    status, _h, diff = served.get(f"/diff?thread_id=poisoned&a={first}&b={second}",
                                  bearer=True)
    assert status == 200 and "&lt;not decoded: os.system" in diff
    # a fork would store the placeholder: refused, nothing written
    form = urlencode({"thread_id": "poisoned", "checkpoint_id": second, "to": "forked",
                      "csrf": security.csrf_token(TOKEN)})
    status, _h, refused = served.request(
        "POST", "/fork", body=form,
        headers={"Content-Type": "application/x-www-form-urlencoded",
                 "Authorization": f"Bearer {TOKEN}"})
    assert status == 400 and "&lt;not decoded: os.system" in refused
    assert not poisoned["marker"].exists()
    assert poisoned["saver"].get_tuple({"configurable": {"thread_id": "forked"}}) is None


def test_the_dashboard_answers_only_allowed_host_names(served: Served) -> None:
    target = _auth("/api/threads")
    status, headers, body = served.get(target, host="evil.example")
    assert (status, body) == (400, "this dashboard does not answer to this host name: start "
                              "it with --allowed-host NAME (create_app(allowed_hosts=[...])) "
                              "to reach it by that name\n")
    assert headers["x-frame-options"] == "DENY"
    assert served.get(target, host=f"evil.example:{served.port}")[0] == 400
    assert served.get(target, host="localhost.evil.example")[0] == 400
    for host in (f"localhost:{served.port}", f"127.0.0.1:{served.port}",
                 f"[::1]:{served.port}", "dash.example:8443", "Dash.Example"):
        assert served.get(target, host=host)[0] == 200, host


def test_a_token_redirect_never_leaves_the_dashboard(served: Served) -> None:
    for target in ("//attacker.example/", "/\\attacker.example/", "//attacker.example/x?a=1",
                   "///attacker.example/"):
        status, headers, _b = served.get(target + ("&" if "?" in target else "?")
                                          + "token=" + TOKEN)
        assert (status, headers["location"]) == (303, "/"), target
    status, headers, _b = served.get("/thread?thread_id=poisoned&token=" + TOKEN)
    assert (status, headers["location"]) == (303, "/thread?thread_id=poisoned")


def test_allowed_hosts_and_redirect_paths_are_checked_as_written() -> None:
    names = security.allowed_host_names(["dash.example.com:8443", "*.corp.example"])
    assert security.host_ok("dash.example.com", names)
    assert security.host_ok("a.b.corp.example:1", names)
    assert not security.host_ok("corp.example", names)
    assert not security.host_ok(None, names)
    assert security.safe_redirect("/\t/attacker.example") == "/"
    assert security.safe_redirect("thread") == "/"
    assert security.safe_redirect("/thread") == "/thread"
    with pytest.raises(Exception, match="is not a host name"):
        security.allowed_host_names(["http://dash.example.com"])
    assert security.bound_host("0.0.0.0") is None
    assert security.bound_host("10.0.0.5") == "10.0.0.5"


def test_the_dashboard_command_refuses_an_allowed_host_that_is_no_name(
        redis_url: str, mongo_url: str) -> None:
    cli = Cli(redis_url, mongo_url)
    r = cli("dashboard", "--host", "0.0.0.0", "--token", TOKEN, "--allowed-host",
            "http://dash.example", code=1)
    assert r.stderr.startswith("error: dashboard: allowed host 'http://dash.example' is not "
                               "a host name")


# --------------------------------------------------------------------------- warning


def test_setup_warns_once_per_process_about_a_permissive_serializer(
        redis_url: str, mongo_url: str, monkeypatch: pytest.MonkeyPatch,
        caplog: pytest.LogCaptureFixture, tmp_path: Path) -> None:
    monkeypatch.setattr(startup, "_warned_serde", [])

    def warned() -> list[str]:
        return [r.getMessage() for r in caplog.records
                if "LANGGRAPH_STRICT_MSGPACK" in r.getMessage()]

    with caplog.at_level(logging.WARNING, logger="langgraph_durable.saver"):
        strict = JsonPlusSerializer(allowed_msgpack_modules=[("myapp.state", "Order")])
        for serde in (strict, JsonPlusSerializer(allowed_msgpack_modules=None),
                      EncryptedSerializer.from_pycryptodome_aes(serde=strict, key=AES_KEY)):
            with DurableSaver.from_urls(redis_url, mongo_url, serde=serde,
                                        **unique_options()):
                pass
        assert warned() == []
        for serde in (None, ExternalRefSerializer(store=_store(tmp_path)), None):
            with DurableSaver.from_urls(redis_url, mongo_url, serde=serde,
                                        **unique_options()):
                pass
    assert warned() == [startup.PERMISSIVE_SERDE_WARNING % "JsonPlusSerializer"]
    assert warned()[0].startswith("the saver's serializer (JsonPlusSerializer) revives any "
                                  "Python type or function a stored value names")
