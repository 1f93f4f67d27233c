"""SecantusDB's daemon (``secantusd-py``, the same flags) as the local test servers run it
(``launchers.MongoServer``), with two changes to the server, neither visible to a client:

- **No TTL sweeper.** The sweeper walks every collection of every database with a TTL
  index each 60 s; a test server holds hundreds of databases, each with a tombstones
  collection (TTL index on ``deleted_at``), and under that sweep the server stalled for
  good in one ``make test`` run (every connection waiting on its storage lock). Tests
  check the TTL index's options, never that MongoDB expires documents; the daemon offers
  no flag for the sweeper.
- **``$in`` of strings matched by a set.** SecantusDB matches ``{f: {$in: [...]}}``
  against each document by comparing the field with every candidate in turn, so a find
  of n ``_id``s costs n * n / 2 comparisons (about 2 us each): 1,000 ``_id``s, 1 s of
  the server's CPU. MongoDB keeps an ``$in``'s candidates in a set. When the field's
  values and every candidate are strings and no collation applies, the answer is
  membership in the set of candidates (string equality is exact then, in SecantusDB as in
  MongoDB); every other case (numbers, arrays, documents, regexes, ``null``, a
  collation) goes to SecantusDB's own matching. ``tests/test_testing_servers.py`` checks
  that both give the same answers.

Run as a script (``python path/to/secantus_daemon.py --port ...``), so the daemon imports
SecantusDB alone, not this package.
"""

from __future__ import annotations

import sys
from typing import Any


def patch() -> None:
    """Apply both changes to the ``secantus`` modules (once, before the daemon starts)."""
    import secantus.query as query
    import secantus.server as server

    init = server.SecantusDBServer.__init__

    def no_ttl_sweeper(self: Any, *args: Any, **kwargs: Any) -> None:
        kwargs["ttl_sweep_seconds"] = 0
        init(self, *args, **kwargs)

    server.SecantusDBServer.__init__ = no_ttl_sweeper  # type: ignore[method-assign]
    query._op_matches = string_in_by_set(query._op_matches)


def string_in_by_set(op_matches: Any) -> Any:
    """``op_matches`` (SecantusDB's ``query._op_matches(values, op, arg, collation, *,
    field, descend)``) answering ``$in`` by set membership where the field's ``values``
    and the candidates ``arg`` are all ``str`` and ``collation`` is None; the same
    list ``arg`` is matched against every document of a query, so its set is built once
    (the last one is kept)."""
    last: list[tuple[Any, frozenset[str] | None]] = [(None, None)]  # (arg, its set)

    def matches(values: list[Any], op: str, arg: Any, collation: Any = None,
                **kwargs: Any) -> bool:
        if op == "$in" and collation is None and type(arg) is list and values \
                and all(type(v) is str for v in values):
            held = last[0]  # one read: the server matches from many threads
            if held[0] is not arg:
                strings = all(type(c) is str for c in arg)
                held = (arg, frozenset(arg) if strings else None)
                last[0] = held
            if held[1] is not None:
                return any(v in held[1] for v in values)
        return bool(op_matches(values, op, arg, collation, **kwargs))

    return matches


def main() -> None:
    """Run SecantusDB's daemon with :func:`patch` applied; exits with its status."""
    patch()
    from secantus.cli import main as daemon

    sys.argv[0] = "secantusd-py"
    sys.exit(daemon())


if __name__ == "__main__":
    main()
