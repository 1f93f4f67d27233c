"""The keyword options of the constructors are typed, grouped and the same names as
``DurableConfig``'s fields and the ``LGD_<NAME>`` variables (``config/options.py``)."""

from __future__ import annotations

import ast
import os
import pathlib
import re
import shutil
import subprocess
import sys
import textwrap
import types
import typing
from collections.abc import Mapping
from typing import Any

import pytest

from langgraph_durable import ConfigurationError, DurableSaver, DurableStore
from langgraph_durable.config import DurableConfig, ThreadTTL
from langgraph_durable.config import options as O
from langgraph_durable.settings import env_options, resolve_config, saver_config

ROOT = pathlib.Path(__file__).resolve().parents[2]

ENV: dict[str, tuple[str, Any]] = {
    # option -> (LGD_<NAME>'s text, the value DurableConfig holds), none its default
    "key_prefix": ("envapp", "envapp"),
    "redis_min_replicas": ("2", 2),
    "redis_wait_timeout_s": ("0.25", 0.25),
    "database": ("envdb", "envdb"),
    "collection_prefix": ("p_", "p_"),
    "write_concern_w": ("2", 2),
    "write_concern_j": ("false", False),
    "write_concern_timeout_s": ("3.5", 3.5),
    "durability": ("strict", "strict"),
    "on_concurrent_run": ("fork", "fork"),
    "flusher": ("off", "off"),
    "flush_interval_s": ("0.2", 0.2),
    "flush_batch_size": ("42", 42),
    "flush_linger_s": ("0", 0.0),
    "claim_idle_s": ("7", 7.0),
    "heartbeat_ttl_s": ("4", 4.0),
    "max_outbox": ("1000", 1000),
    "outbox_partitions": ("4", 4),
    "on_outbox_full": ("raise", "raise"),
    "outbox_full_timeout_s": ("1.5", 1.5),
    "delete_flush_timeout_s": ("12", 12.0),
    "close_drain_timeout_s": ("2", 2.0),
    "hot_ttl_s": ("600", 600),
    "hot_max_checkpoints": ("9", 9),
    "tombstone_ttl_s": ("3600", 3600),
    "ttl": ('{"strategy": "keep_latest", "default_ttl": 90}',
            ThreadTTL(strategy="keep_latest", default_ttl=90)),
    "max_value_bytes": ("1048576", 1048576),
    "queryable_metadata": ("true", True),
    "list_items": ("false", False),
    "item_cache_bytes": ("0", 0),
    "item_digest_key": ("sixteen-chars-or-more", "sixteen-chars-or-more"),
    "blob_timeout_s": ("3", 3.0),
    "blob_retries": ("5", 5),
    "effect_checkpoint_wait_s": ("30", 30.0),
    "state_version": ("3", 3),
    "unversioned_state_version": ("2", 2),
    "newer_state": ("read", "read"),
    "vector_search": ("exact", "exact"),
    "redis_max_connections": ("9", 9),
    "socket_timeout_s": ("2.5", 2.5),
    "server_selection_timeout_s": ("1.5", 1.5),
    "mongo_socket_timeout_s": ("90", 90.0),
}


def _keys(options: type) -> set[str]:
    return set(options.__required_keys__) | set(options.__optional_keys__)  # type: ignore[attr-defined]


def test_the_options_are_the_settable_fields_of_durable_config() -> None:
    assert _keys(O.FromUrlsOptions) == set(DurableConfig.model_fields)
    assert O.FromUrlsOptions.__required_keys__ == frozenset()  # every option may be left out
    assert _keys(O.SaverOptions) == set(DurableConfig.model_fields) - O.CLIENT_OPTIONS
    assert O.CLIENT_OPTIONS == {"redis_max_connections", "socket_timeout_s",
                                "server_selection_timeout_s", "mongo_socket_timeout_s"}
    assert _keys(O.StoreFromUrlsOptions) == set(DurableConfig.model_fields) - {"ttl"}


def test_each_option_has_the_type_of_its_field() -> None:
    hints = typing.get_type_hints(O.FromUrlsOptions)
    for name, field in DurableConfig.model_fields.items():
        if name == "ttl":  # a ThreadTTL or its dict, as langgraph.json's checkpointer.ttl
            assert hints[name] == ThreadTTL | Mapping[str, Any] | None
            assert field.annotation == ThreadTTL | None
        else:
            assert hints[name] == field.annotation, name


def test_durable_config_lists_its_fields_group_by_group() -> None:
    in_groups = [name for group in O.OPTION_GROUPS for name in group.__annotations__]
    assert in_groups == list(DurableConfig.model_fields)
    doc = DurableConfig.__doc__ or ""
    for group in O.OPTION_GROUPS:
        assert f"``{group.__name__}``" in doc
        listed = doc.split(f"``{group.__name__}``", 1)[1].split("- ``", 1)[0]
        assert all(f"``{name}``" in listed for name in group.__annotations__), group


def test_every_group_and_option_is_documented_once_in_options_py() -> None:
    tree = ast.parse(pathlib.Path(O.__file__).read_text())
    documented: list[str] = []
    for cls in (n for n in tree.body if isinstance(n, ast.ClassDef)):
        assert ast.get_docstring(cls), cls.name
        body = cls.body
        for i, node in enumerate(body):
            if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) \
                    and cls.name.endswith("Options"):
                doc = body[i + 1] if i + 1 < len(body) else None
                assert isinstance(doc, ast.Expr) and isinstance(doc.value, ast.Constant) \
                    and len(doc.value.value) > 40, f"{cls.name}.{node.target.id}"
                documented.append(node.target.id)
    assert sorted(documented) == sorted(DurableConfig.model_fields)


def test_every_option_is_read_from_its_lgd_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    assert set(ENV) == set(DurableConfig.model_fields)
    for name, (text, _) in ENV.items():
        monkeypatch.setenv(f"LGD_{name.upper()}", text)
    monkeypatch.setenv("LGD_SERDE", "not:a-field")  # a CLI variable, not a config field
    config = resolve_config(None, {})
    hints = typing.get_type_hints(O.FromUrlsOptions)
    for name, (text, value) in ENV.items():
        got = getattr(config, name)
        assert got == value and type(got) is type(value), (name, text, got)
        assert value != DurableConfig.model_fields[name].default, name  # really read
        assert isinstance(got, _runtime_types(hints[name])), name
    assert env_options() == {name: value for name, (_, value) in ENV.items()}


def _runtime_types(hint: Any) -> tuple[type, ...]:
    """The classes ``isinstance`` checks for an option's type (``float`` takes an int)."""
    out: list[type] = []
    union = typing.get_origin(hint) in (typing.Union, types.UnionType)
    for t in typing.get_args(hint) if union else (hint,):
        if typing.get_origin(t) is typing.Literal:
            out.extend({type(a) for a in typing.get_args(t)})
        elif t is type(None):
            out.append(type(None))
        else:
            out.append(typing.get_origin(t) or t)
    return tuple(out)


def test_an_unknown_option_is_still_a_configuration_error_naming_the_closest() -> None:
    with pytest.raises(ConfigurationError) as err:
        DurableSaver(None, None, keyprefix="app")  # type: ignore[call-arg]
    assert str(err.value) == "unknown option keyprefix='app' (did you mean key_prefix?)"
    with pytest.raises(ConfigurationError) as err:  # refused before any client is made
        DurableSaver.from_urls("redis://127.0.0.1:1/0", "mongodb://127.0.0.1:1/",
                               flush_intervl_s=1)  # type: ignore[call-arg]
    assert str(err.value) == ("unknown option flush_intervl_s=1 (did you mean "
                              "flush_interval_s?)")
    with pytest.raises(ConfigurationError, match=r"^invalid option flush_batch_size='x'"):
        DurableStore.from_urls("redis://127.0.0.1:1/0", "mongodb://127.0.0.1:1/",
                               flush_batch_size="x")  # type: ignore[typeddict-item]


@pytest.mark.parametrize("name, value", [("socket_timeout_s", 1.0),
                                         ("redis_max_connections", 8),
                                         ("server_selection_timeout_s", 0.3),
                                         ("mongo_socket_timeout_s", 2.0)])
def test_a_client_option_given_to_the_constructor_is_refused(name: str, value: Any) -> None:
    with pytest.raises(ConfigurationError) as err:
        DurableSaver(None, None, **{name: value})
    assert str(err.value).startswith(
        f"option(s) {name}={value!r} only configure the clients DurableSaver.from_urls "
        "builds: DurableSaver(redis, mongo, ...) uses the clients given")
    # where clients are built they configure them, and from config= or LGD_* they are
    # accepted everywhere (one environment serves every saver of a process)
    assert getattr(saver_config(None, {name: value}), name) == value
    config = DurableConfig(**{name: value})
    assert saver_config(config, {}, builds_clients=False) is config


MYPY_BAD = """
    from langgraph_durable import DurableSaver, DurableStore

    DurableSaver.from_urls("redis://h", "mongodb://h", flush_intervl_s=0.1)
    DurableSaver.from_urls("redis://h", "mongodb://h", flush_batch_size="500")
    DurableSaver(None, None, socket_timeout_s=1.0)
    DurableSaver.from_conn_string(durability="eventually")
    DurableStore.from_urls("redis://h", "mongodb://h", hot_ttl_s=1.5)
    DurableStore.from_conn_string(flush_intervl_s=0.1)
"""

MYPY_GOOD = """
    from langgraph_durable import DurableSaver, DurableStore, ThreadTTL
    from langgraph_durable.config import FromUrlsOptions

    opts: FromUrlsOptions = {"key_prefix": "app", "socket_timeout_s": 2.0}
    DurableSaver.from_urls("redis://h", "mongodb://h", flush_interval_s=0.1,
                           flush_batch_size=500, write_concern_w=1, durability="strict",
                           ttl={"default_ttl": 60}, outbox_partitions=None)
    DurableSaver.from_urls("redis://h", "mongodb://h", **opts)
    DurableSaver.from_conn_string(write_concern_w="majority", ttl=ThreadTTL())
    DurableSaver(None, None, key_prefix="app", flush_linger_s=0, state_version=2)
    DurableStore.from_urls("redis://h", "mongodb://h", vector_search="exact",
                           ttl={"refresh_on_read": True}, redis_max_connections=4)
    DurableStore.from_conn_string(ttl={"default_ttl": 5, "omit_expired": True},
                                  key_prefix="app", vector_search="exact")
"""


def test_mypy_rejects_a_misspelt_option_and_a_wrong_type(tmp_path: pathlib.Path) -> None:
    (tmp_path / "bad_options.py").write_text(textwrap.dedent(MYPY_BAD))
    (tmp_path / "good_options.py").write_text(textwrap.dedent(MYPY_GOOD))
    env = {**os.environ, "MYPYPATH": str(ROOT)}  # this checkout's package, not an install
    if (ROOT / ".mypy_cache").is_dir():  # `make test`'s lint step ran: start from its cache
        shutil.copytree(ROOT / ".mypy_cache", tmp_path / "cache")
    done = subprocess.run(
        [sys.executable, "-m", "mypy", "--config-file", str(ROOT / "pyproject.toml"),
         "--cache-dir", str(tmp_path / "cache"), "--no-error-summary", "--hide-error-context",
         "bad_options.py", "good_options.py"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    errors = [line for line in done.stdout.splitlines() if ": error:" in line]
    assert not [e for e in errors if e.startswith("good_options.py")], done.stdout
    lines = {int(e.split(":")[1]): e for e in errors if e.startswith("bad_options.py")}
    assert sorted(lines) == [4, 5, 6, 7, 8, 9], done.stdout + done.stderr
    assert 'Unexpected keyword argument "flush_intervl_s"' in lines[4]
    assert '"flush_batch_size"' in lines[5] and 'type "str"; expected "int"' in lines[5]
    assert 'Unexpected keyword argument "socket_timeout_s"' in lines[6]
    assert '"durability"' in lines[7] and "Literal['write_behind', 'strict']" in lines[7]
    assert '"hot_ttl_s"' in lines[8] and 'type "float"; expected "int"' in lines[8]
    assert 'Unexpected keyword argument "flush_intervl_s"' in lines[9]  # typed as from_urls


def test_readme_lists_every_option_under_its_group() -> None:
    text = (ROOT / "README.md").read_text()
    section = text.split("\n## Configuration\n", 1)[1].split("\n## ", 1)[0]
    for group in O.OPTION_GROUPS:
        head = f" (`{group.__name__}`)\n"
        assert section.count(head) == 1, group.__name__
        table = section.split(head, 1)[1].strip("\n").split("\n\n", 1)[0]
        listed = re.findall(r"^\| `([a-z_]+)` \|", table, flags=re.MULTILINE)
        assert listed == list(group.__annotations__), group.__name__
