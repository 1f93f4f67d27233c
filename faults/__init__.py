"""Fault-injection suite for langgraph_durable: real processes, real servers, loopback only.

Every scenario compares what a ``DurableSaver`` run gives after a fault with what the same
graph gives uninterrupted on ``InMemorySaver``. ``python -m faults.run`` runs the full forms
and writes the table to ``docs/reliability.md``; ``tests/faults`` runs short forms of the
same code.

Modules:

- ``graphs``: the deterministic multi-step graphs the scenarios run (a fan-out workflow with
  a subgraph, a chat graph for concurrent runs) and their InMemorySaver references;
- ``child``: the child-process entry points (``python -m faults.child``) with kill hooks;
- ``tiers``: looking straight at Redis and MongoDB (what is stored where, raw);
- ``result``: the figures of a scenario and the table;
- ``s1_app_killed`` ... ``s7_shutdown``: the scenarios;
- ``run``: the runner.
"""
