"""The Lua of the hot tier as files: the loader, the headers, the Redis Cluster slot."""

from __future__ import annotations

import re
from importlib import resources

import pytest
import redis.crc

from langgraph_durable.hot import lua
from langgraph_durable.hot.keys import key_slot
from langgraph_durable.hot.scripts import SCRIPTS


def _files(files: dict[str, str]):
    def read(path: str) -> str:
        if path not in files:
            raise lua.LuaIncludeError(f"no Lua file {path!r}")
        return files[path]
    return read


def test_a_part_named_twice_is_included_once_where_first_named() -> None:
    read = _files({
        "s.lua": 'local a = 1\n--- @include "p"\n--- @include "q"\n--- @include "p"\nreturn a\n',
        "include/p.lua": "local function p() return 1 end",
        "include/q.lua": '--- @include "p"\nlocal function q() return p() end',
    })
    assert lua.resolve("s", read) == (
        "local a = 1\nlocal function p() return 1 end\nlocal function q() return p() end\n"
        "return a\n")


def test_an_include_cycle_raises_naming_the_files_in_order() -> None:
    read = _files({
        "s.lua": '--- @include "a"\nreturn 1',
        "include/a.lua": '--- @include "b"',
        "include/b.lua": '--- @include "a"',
    })
    with pytest.raises(lua.LuaIncludeError) as err:
        lua.resolve("s", read)
    assert str(err.value) == (
        "Lua include cycle: s.lua -> include/a.lua -> include/b.lua -> include/a.lua")


def test_put_includes_the_registry_once_though_deleted_ref_includes_it_too() -> None:
    src = SCRIPTS["put"]
    assert src.count("local function never_stored(") == 1
    assert src.index("local function never_stored(") < src.index(
        "local function deleted_refusal(")


def test_every_script_is_final_lua_with_a_header_naming_its_keys_argv_reply_and_errors(
        ) -> None:
    for name, src in SCRIPTS.items():
        assert "@include" not in src, name
        assert src.startswith("--[[\n"), name
        header = src[:src.index("]]")]
        for part in ("Input:", "Output:", "Errors:"):
            assert part in header, (name, part)
        assert re.search(r"KEYS\[1[\].]", header), name
        # ARGV named, or said to be none (a script that only reads its keys)
        assert re.search(r"ARGV\[1[\].]", header) or "ARGV: none" in header, name
        # every fixed KEYS index the code names is named in the header
        body = src[src.index("]]"):]
        for n in set(re.findall(r"KEYS\[(\d+)\]", body)):
            assert re.search(rf"KEYS\[{n}\]|KEYS\[\d+\.\.\d+\]", header), (name, n)
        assert "local rcall = redis.call" in body, name


def test_every_lua_file_is_package_data_the_loader_reads() -> None:
    root = resources.files("langgraph_durable.hot.lua")
    scripts = sorted(p.name[:-4] for p in root.iterdir() if p.name.endswith(".lua"))
    assert scripts == sorted(SCRIPTS)


def test_the_cluster_hash_slot_is_crc16_xmodem_of_the_hash_tag_as_redis_py_computes_it(
        ) -> None:
    keys = [b"", b"a", b"{}", b"{}x", b"{a}", b"x{a}y", b"{a}{b}", b"{{a}}", b"a{", b"a}{b",
            b"{\x00\xff}", b"lgd:p3.17", b"{lgd:p3.17}:5:thread:cp", "{ü}:é".encode()]
    keys += [f"{{pre{i}:p{i % 16}.{i}}}:{i}:t{i}:meta".encode() for i in range(2000)]
    keys += [bytes(range(i % 256)) for i in range(300)]
    assert [key_slot(k) for k in keys] == [redis.crc.key_slot(k) for k in keys]
    assert key_slot(b"{user1000}.following") == key_slot(b"{user1000}.followers") == 3443
