"""Fetch and run LangGraph's own store tests against a store of this package.

    python scripts/langgraph_store_tests.py fetch                  # all three suites
    python scripts/langgraph_store_tests.py run sqlite \\
        --factory langgraph_durable.testing.store_factories:inmemory [--mode hot] [-- -k ttl]

``fetch`` downloads the sdists of the installed langgraph-checkpoint,
langgraph-checkpoint-sqlite and langgraph-checkpoint-postgres from PyPI and extracts
their store tests into the cache folder (``$LANGGRAPH_DURABLE_SUITE_CACHE``, default
``~/.cache/langgraph-durable/store-suites``); ``run`` runs one suite and prints each
failure, skip and exclusion. The DurableStore factory reads ``REDIS_URL`` and
``MONGODB_URL``. See ``langgraph_durable/testing/store_suite.py``.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from langgraph_durable.testing.store_suite import SUITES, ensure_suite, run_suite  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    fetch = sub.add_parser("fetch", help="download and extract the suites")
    fetch.add_argument("suites", nargs="*", default=sorted(SUITES))
    run = sub.add_parser("run", help="run one suite")
    run.add_argument("suite", choices=sorted(SUITES))
    run.add_argument("--factory", default="langgraph_durable.testing.store_factories:durable")
    run.add_argument("--mode", default="hot", choices=("hot", "cold"))
    run.add_argument("pytest_args", nargs="*", help="after --: passed to pytest")
    args = parser.parse_args(argv)
    if args.command == "fetch":
        for name in args.suites:
            print(f"{name}: {ensure_suite(name)}")
        return 0
    result = run_suite(args.suite, args.factory, args.mode, extra_args=tuple(args.pytest_args))
    for nodeid, reason in result.deselected.items():
        print(f"EXCLUDED {nodeid}: {reason}")
    for nodeid, reason in result.skipped.items():
        print(f"SKIPPED {nodeid}: {reason}")
    for nodeid, report in result.failed.items():
        print(f"FAILED {nodeid}\n{report}\n")
    for pattern in result.unmatched_exclusions:
        print(f"UNMATCHED EXCLUSION {pattern}")
    print(f"{len(result.passed)} passed, {len(result.failed)} failed, "
          f"{len(result.skipped)} skipped, {len(result.deselected)} excluded "
          f"(pytest exit {result.exit_code})")
    if not result.passed and not result.failed:
        print(result.output[-5000:])
    return 0 if result.exit_code == 0 and not result.failed else 1


if __name__ == "__main__":
    sys.exit(main())
