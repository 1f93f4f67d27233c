"""Saver operations written once as sans-I/O plans: generators of the typed operations
of ``core.ops`` (``Plan[T]``), driven by ``io.drivers.run_sync`` or
``io.drivers.run_async``. docs/architecture.md names where every plan lives.

``write``: put and put_writes (values serialized beforehand by ``prepare_put`` /
``prepare_put_writes``). ``read``: get_tuple and list pages (records, decoded afterwards
by ``finish_page``). ``delta``: delta-channel history. ``history_edits``: flush-wait, deletes,
prune, copy, release. ``threads``: list_threads. ``fence``: what the saver and the
flusher share (the fence against writes a delete overtook, insert-once bulk writes).
``binding``: the key prefix's binding to one database and collection_prefix (read and
recorded at set-up by savers and flusher workers).
Plans read time only from ``Context.clock`` and never do I/O themselves; only
``prune_choice.choice_plan`` (for ``history_edits.prune_plan``) still decodes (metadata, to find
delta channels).
"""
