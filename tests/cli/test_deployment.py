"""Read commands refuse a key prefix and database that do not belong together, as writing
commands do, and write nothing (issue 21 item 9)."""

from __future__ import annotations

from typing import Any

import pymongo
import redis

from langgraph_durable.hot.keys import prefix_pattern

from .clikit import Cli


def test_read_commands_refuse_a_key_prefix_on_a_database_another_prefix_owns(
        cli: Cli, t1: dict[str, Any]) -> None:
    owner, other = cli.opts["key_prefix"], cli.opts["key_prefix"] + "x"
    cli.env["LGD_KEY_PREFIX"] = other
    expected = (f"error: MongoDB database {cli.opts['database']!r} (collection_prefix '') "
                f"holds the threads of key_prefix {owner!r}, not {other!r}: savers with "
                "different key prefixes must not share collections")
    refused = {}
    for command in (["threads"], ["show", "t1"], ["history", "t1"],
                    ["delete", "t1", "--yes"]):
        r = cli(*command, code=1)
        assert r.stderr.startswith(expected), (command, r.stderr)
        assert r.stderr.count("\n") == 1
        refused[command[0]] = r.stderr
    assert len(set(refused.values())) == 1  # threads and show refuse as delete does
    with redis.Redis.from_url(cli.redis_url) as r:
        assert list(r.scan_iter(match=prefix_pattern(other))) == []  # nothing bound
    with pymongo.MongoClient(cli.mongo_url) as m:
        meta = m[cli.opts["database"]]["meta"].find_one({"_id": "schema"})
    assert meta is not None and meta["key_prefix"] == owner


def test_read_and_flush_commands_refuse_a_key_prefix_bound_to_another_database(
        cli: Cli, t1: dict[str, Any]) -> None:
    bound, other = cli.opts["database"], cli.opts["database"] + "x"
    cli.env["LGD_DATABASE"] = other
    prefix = cli.opts["key_prefix"]
    for command in (["threads"], ["show", "t1"], ["flush"]):
        r = cli(*command, code=1)
        assert r.stderr.startswith(
            f"error: key_prefix {prefix!r} belongs to MongoDB database {bound!r} with "
            "collection_prefix ''"), (command, r.stderr)
        assert f"this saver is configured with database {other!r}" in r.stderr
    with pymongo.MongoClient(cli.mongo_url) as m:
        assert other not in m.list_database_names()
    cli.env["LGD_DATABASE"] = bound
    assert [row["thread_id"] for row in cli.json("threads")["threads"]] == ["t1"]


def test_status_refuses_a_key_prefix_bound_to_another_database_and_says_what_to_do(
        cli: Cli, t1: dict[str, Any]) -> None:
    bound, other = cli.opts["database"], cli.opts["database"] + "x"
    cli.env["LGD_DATABASE"] = other
    prefix = cli.opts["key_prefix"]
    for command in (["status"], ["threads"]):
        r = cli(*command, code=1)
        assert r.stdout == ""  # no sizes of a database this key prefix never flushes to
        assert r.stderr.startswith(
            f"error: key_prefix {prefix!r} belongs to MongoDB database {bound!r} with "
            "collection_prefix ''"), (command, r.stderr)
        assert r.stderr.count("\n") == 1
        assert r.stderr.endswith(  # the way out, whole
            f"delete the Redis key '{{{prefix}:binding}}' while no process uses key_prefix "
            f"{prefix!r}, then start again.\n"), (command, r.stderr)
    cli.env["LGD_DATABASE"] = bound
    assert cli.json("status")["database"] == bound
