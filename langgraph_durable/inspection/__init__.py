"""What the operator's tools (the CLI and the dashboard) share: decoded values as JSON
data and previews, the per-channel diff (``render``, pure), direct reads of both tiers
(``storage``: threads, sizes, outbox and memory figures), finding checkpoints and forking
a thread (``lookup``), and a thread's status and timeline (``timeline``)."""
