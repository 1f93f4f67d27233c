"""The module names of earlier releases (``langgraph_durable._moved``) still import.

Each old name gives the module at its new place (the same object, so ``isinstance``
against a class read from either path holds), warns with a ``DeprecationWarning`` naming
the new place, and works for ``import x``, ``from x import name``,
``importlib.import_module`` and as a pytest plugin name (``-p``). Each import of an old
name runs in a fresh interpreter, so the warning is not hidden by an earlier import.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import langgraph_durable
from langgraph_durable._moved import MOVED

ROOT = Path(langgraph_durable.__file__).resolve().parent.parent

PROBE = textwrap.dedent("""
    import importlib, json, sys, warnings
    warnings.simplefilter("always")
    from langgraph_durable._moved import MOVED
    out = {}
    for old, new in sorted(MOVED.items()):
        if old == "runtime":  # the package runtime/ took the name: see the next test
            continue
        with warnings.catch_warnings(record=True) as seen:
            module = importlib.import_module(f"langgraph_durable.{old}")
        out[old] = {"name": module.__name__,
                    "same": module is importlib.import_module(f"langgraph_durable.{new}"),
                    "warnings": [(w.category.__name__, str(w.message)) for w in seen]}
    json.dump(out, sys.stdout)
""")


def _python(code: str, cwd: Path) -> str:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120, env=env, cwd=cwd)
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout + done.stderr


def test_every_old_module_name_gives_the_new_module_and_warns_where_it_went(
    tmp_path: Path,
) -> None:
    out = json.loads(_python(PROBE, tmp_path).splitlines()[0])
    assert set(out) == set(MOVED) - {"runtime"}
    for old, got in out.items():
        new = f"langgraph_durable.{MOVED[old]}"
        assert got == {"name": new, "same": True, "warnings": [
            ["DeprecationWarning",
             f"langgraph_durable.{old} moved to {new}; import it from there"]]}, old


def test_classes_from_the_old_and_new_paths_are_the_same_for_isinstance(
    tmp_path: Path,
) -> None:
    code = textwrap.dedent("""
        import warnings
        warnings.simplefilter("ignore")
        from langgraph_durable.records import CheckpointRecord as Old
        from langgraph_durable.core.records import CheckpointRecord as New
        from langgraph_durable.testing_cluster import RedisClusterServer as OldServer
        from langgraph_durable.testing.cluster import RedisClusterServer as NewServer
        import langgraph_durable.extref_gc as old_gc, langgraph_durable.blobs as old_blobs
        from langgraph_durable.admin import extref_gc as new_gc
        print(Old is New, OldServer is NewServer, old_gc is new_gc is old_blobs,
              issubclass(New, Old))
    """)
    assert _python(code, tmp_path).split() == ["True", "True", "True", "True"]


def test_the_old_runtime_module_s_names_read_from_the_runtime_package_with_a_warning(
    tmp_path: Path,
) -> None:
    code = textwrap.dedent("""
        import warnings
        warnings.simplefilter("always")
        from langgraph_durable.runtime import SaverRuntime
        from langgraph_durable.runtime.base import SaverRuntime as New
        from langgraph_durable.runtime import lifecycle  # a submodule: no warning
        try:
            from langgraph_durable.runtime import no_such_name
        except ImportError as exc:
            print("ImportError", "no_such_name" in str(exc))
        print(SaverRuntime is New, lifecycle.__name__)
    """)
    out = _python(code, tmp_path)
    assert out.count("DeprecationWarning") == 1, out
    assert ("langgraph_durable.runtime.SaverRuntime moved to "
            "langgraph_durable.runtime.base; import it from there") in out
    assert "ImportError True" in out
    assert "True langgraph_durable.runtime.lifecycle" in out


def test_the_old_cluster_plugin_name_still_registers_its_fixtures(tmp_path: Path) -> None:
    (tmp_path / "test_nothing.py").write_text("def test_nothing():\n    pass\n")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
         "-p", "langgraph_durable.testing_cluster", "--fixtures", "test_nothing.py"],
        capture_output=True, text=True, timeout=120, env=env, cwd=tmp_path)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "fixtures defined from langgraph_durable.testing.cluster" in done.stdout
    for fixture in ("redis_cluster_url", "redis_sentinel_url", "mongo_replica_set_url"):
        assert f"{fixture} [session scope]" in done.stdout, fixture
