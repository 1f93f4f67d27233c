"""Saver operations written once as sans-I/O plans (generators of ``io`` operations).

``write``: put and put_writes. ``read``: get_tuple, list pages, delta-channel history.
``admin``: flush-wait, deletes, prune, copy. The saver drives them with ``io.run_sync``
or ``io.run_async``.
"""
