"""The built wheel installs into a fresh virtualenv and runs a graph there.

The wheel is built from this source tree (``python -m build --wheel --no-isolation``), then
installed with its declared dependencies (and the ``cli`` extra) into a virtualenv made
in ``tmp_path`` that sees neither this source tree nor the test venv's packages, and a
small graph runs through ``DurableSaver`` against the session's servers. The install is
uv's (``uv pip install``, the uv ``scripts/setup.sh`` puts in the venv: it resolves the
wheel's declared dependencies as pip does, from its cache, in ~1.5 s); without uv, pip's,
from the dependency wheels downloaded once into pytest's cache
(``.pytest_cache/d/wheelhouse``: ~45 s on the first run).
"""

from __future__ import annotations

import email
import hashlib
import json
import os
import subprocess
import sys
import textwrap
import venv
import zipfile
from pathlib import Path
from typing import Any

import pytest

import langgraph_durable
from langgraph_durable.testing import unique_options

ROOT = Path(__file__).resolve().parent.parent

GRAPH_SCRIPT = textwrap.dedent("""
    import hashlib, json, os, sys
    from importlib import resources
    from importlib.metadata import version
    from typing import Annotated, TypedDict

    from langchain_core.messages import AIMessage, HumanMessage
    from langgraph.graph import END, START, StateGraph
    from langgraph.graph.message import add_messages

    import langgraph_durable
    from langgraph_durable import DurableSaver

    class State(TypedDict):
        messages: Annotated[list, add_messages]

    def reply(state: State) -> dict:
        return {"messages": [AIMessage(f"echo {len(state['messages'])}")]}

    builder = StateGraph(State)
    builder.add_node("reply", reply)
    builder.add_edge(START, "reply")
    builder.add_edge("reply", END)
    opts = {"key_prefix": os.environ["KEY_PREFIX"], "database": os.environ["DATABASE"]}
    config = {"configurable": {"thread_id": "wheel-1"}}
    with DurableSaver.from_urls(os.environ["REDIS_URL"], os.environ["MONGODB_URL"],
                                **opts) as saver:
        graph = builder.compile(checkpointer=saver)
        graph.invoke({"messages": [HumanMessage("hi")]}, config)
        graph.invoke({"messages": [HumanMessage("again")]}, config)
        saver.flush()
        db = saver.sync_clients.db
        in_mongodb = db[saver.context.collections.checkpoints].count_documents(
            {"thread_id": "wheel-1"})
    with DurableSaver.from_urls(os.environ["REDIS_URL"], os.environ["MONGODB_URL"],
                                **opts) as saver:  # a second saver resumes the thread
        state = builder.compile(checkpointer=saver).get_state(config)
    from langgraph_durable.hot import lua
    from langgraph_durable.hot.scripts import SCRIPTS
    lua_dir = resources.files(lua)
    lua_files = sorted([p.name for p in lua_dir.iterdir() if p.name.endswith(".lua")]
                       + ["include/" + p.name for p in lua_dir.joinpath("include").iterdir()
                          if p.name.endswith(".lua")])
    script_sha1 = {name: hashlib.sha1(src.encode()).hexdigest()
                   for name, src in SCRIPTS.items()}
    json.dump({"lua_files": lua_files, "script_sha1": script_sha1,
               "file": langgraph_durable.__file__, "version": langgraph_durable.__version__,
               "dist_version": version("langgraph-durable"), "prefix": sys.prefix,
               "messages": [m.content for m in state.values["messages"]],
               "in_mongodb": in_mongodb}, sys.stdout)
""")


def _run(argv: list[str], **kw: Any) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(argv, capture_output=True, text=True, timeout=300, **kw)
    assert done.returncode == 0, (argv, done.stdout[-3000:], done.stderr[-3000:])
    return done


def _package_files() -> set[str]:
    """Files of the source package other than modules, as paths inside the wheel."""
    root = ROOT / "langgraph_durable"
    return {str(p.relative_to(ROOT)) for p in root.rglob("*")
            if p.is_file() and p.suffix not in {".py", ".pyc"} and "__pycache__" not in p.parts}


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The wheel built from this source tree (into a temporary folder)."""
    out = tmp_path_factory.mktemp("dist")
    _run([sys.executable, "-m", "build", "--wheel", "--no-isolation", "--outdir", str(out),
          str(ROOT)], cwd=out, env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"})
    (found,) = out.glob("langgraph_durable-*.whl")
    return found


def test_the_wheel_holds_every_package_file_and_clean_metadata(wheel: Path) -> None:
    names = set(zipfile.ZipFile(wheel).namelist())
    assert "langgraph_durable/py.typed" in names
    assert _package_files() <= names, _package_files() - names
    assert {"langgraph_durable/hot/scripts.py", "langgraph_durable/cli/__main__.py",
            "langgraph_durable/outbox/worker.py"} <= names
    assert not [n for n in names if n.startswith(("tests/", "examples/", "benchmarks/"))]
    info = f"langgraph_durable-{langgraph_durable.__version__}.dist-info"
    meta = email.message_from_bytes(zipfile.ZipFile(wheel).read(f"{info}/METADATA"))
    assert meta["Version"] == langgraph_durable.__version__
    assert meta["License-Expression"] == "MIT"
    assert "Typing :: Typed" in meta.get_all("Classifier")
    extras = set(meta.get_all("Provides-Extra"))
    assert {"cli", "s3", "dataframes", "otel", "agents", "dashboard"} <= extras
    entry = zipfile.ZipFile(wheel).read(f"{info}/entry_points.txt").decode()
    assert "langgraph-durable = langgraph_durable.cli:main" in entry
    check = _run([sys.executable, "-m", "twine", "check", "--strict", str(wheel)])
    assert "PASSED" in check.stdout


def _pip_install(py: Path, target: str, env: dict[str, str], tmp_path: Path,
                 request: pytest.FixtureRequest) -> None:
    """``target`` installed into the venv of ``py`` by pip, from a wheelhouse of the
    dependencies kept in pytest's cache (downloaded on the first run: ~45 s)."""
    cache = getattr(request.config, "cache", None)  # None under -p no:cacheprovider
    house = cache.mkdir("wheelhouse") if cache is not None else tmp_path / "wheelhouse"
    house.mkdir(exist_ok=True)
    # the house holds the dependencies' wheels; a copy of this package from an earlier
    # run has the same file name, and `pip download` would keep it and read ITS metadata,
    # missing a dependency added since (seen: jsonschema for the cli extra)
    for stale in house.glob("langgraph_durable-*.whl"):
        stale.unlink()
    pip = [sys.executable, "-m", "pip", "--python", str(py)]
    offline = subprocess.run([*pip, "install", "-q", "--no-compile", "--no-index",
                              "--find-links", str(house), target],
                             capture_output=True, text=True, timeout=300, env=env, cwd=tmp_path)
    if offline.returncode != 0:  # first run: fetch the dependency wheels once
        _run([sys.executable, "-m", "pip", "download", "-q", "-d", str(house), target],
             env=env, cwd=tmp_path)
        _run([*pip, "install", "-q", "--no-compile", "--no-index", "--find-links", str(house),
              target], env=env, cwd=tmp_path)


def test_the_wheel_installs_into_a_fresh_venv_and_runs_a_graph_there(
    wheel: Path, tmp_path: Path, redis_url: str, mongo_url: str,
    request: pytest.FixtureRequest,
) -> None:
    env_dir = tmp_path / "venv"
    venv.EnvBuilder(with_pip=False).create(env_dir)
    py = env_dir / "bin" / "python"
    target = f"{wheel}[cli]"
    env = {k: v for k, v in os.environ.items() if k not in {"PYTHONPATH", "VIRTUAL_ENV"}}
    uv = Path(sys.executable).with_name("uv")  # scripts/setup.sh installs it in the venv
    if uv.exists():  # resolves from the declared metadata as pip does; its cache: ~1.5 s
        _run([str(uv), "pip", "install", "-q", "--python", str(py), target], env=env,
             cwd=tmp_path)
    else:
        _pip_install(py, target, env, tmp_path, request)

    opts = unique_options()
    run_env = {**env, "REDIS_URL": redis_url, "MONGODB_URL": mongo_url,
               "KEY_PREFIX": str(opts["key_prefix"]), "DATABASE": str(opts["database"])}
    script = tmp_path / "graph_in_venv.py"
    script.write_text(GRAPH_SCRIPT)
    out = json.loads(_run([str(py), "-I", str(script)], env=run_env, cwd=tmp_path).stdout)
    assert Path(out["file"]).is_relative_to(env_dir), out["file"]
    assert out["prefix"] == str(env_dir)
    assert out["version"] == out["dist_version"] == langgraph_durable.__version__
    assert out["messages"] == ["hi", "echo 1", "again", "echo 3"]
    assert out["in_mongodb"] == 6  # per invoke: its input (step -1), step 0, step 1
    # every Lua file of the source tree is installed, and the installed package loads
    # every script to the same text (the SHA1 EVALSHA sends) as this source tree
    lua_root = ROOT / "langgraph_durable" / "hot" / "lua"
    assert out["lua_files"] == sorted(str(p.relative_to(lua_root))
                                      for p in lua_root.rglob("*.lua"))
    from langgraph_durable.hot.scripts import SCRIPTS
    assert out["script_sha1"] == {name: hashlib.sha1(src.encode()).hexdigest()
                                  for name, src in SCRIPTS.items()}
    assert {f"{name}.lua" for name in SCRIPTS} <= set(out["lua_files"])

    cli = env_dir / "bin" / "langgraph-durable"
    version = _run([str(cli), "--version"], env=run_env, cwd=tmp_path).stdout
    assert version.strip() == f"langgraph-durable {langgraph_durable.__version__}"
    status = _run([str(cli), "--key-prefix", run_env["KEY_PREFIX"], "--database",
                   run_env["DATABASE"], "status", "--json"], env=run_env, cwd=tmp_path)
    st = json.loads(status.stdout)
    assert (st["outbox"]["length"], st["durable"]["checkpoints"]["documents"]) == (0, 6)
