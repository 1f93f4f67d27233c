"""Many processes (issue 14 item 4), short form of fault scenario 9
(``faults/s9_many_processes.py``; the full form, 200 threads, runs in ``python -m
faults.run --only 9``): 4 application processes and 2 standalone flusher workers share
one key prefix and database; one application process and one worker are SIGKILLed
mid-run and restarted. Every acknowledged checkpoint reaches MongoDB, none twice, and
every thread ends in the state of an uninterrupted run, read from MongoDB alone.

Scaled down to run in about a minute each on 2 cores: 32 threads (24 on the cluster)
instead of 200, 3 Python threads per application process instead of 4; the shape (4 + 2
processes, both kills, the restarts, the checks) is the full form's.
"""

from __future__ import annotations

from pathlib import Path

from faults import graphs, s9_many_processes
from faults.common import Env


def _check(res: s9_many_processes.Result, threads: int) -> None:
    rec = res.records[0]
    assert res.faults == 2, res.notes  # an app process and a worker SIGKILLed mid-run
    assert rec["resumed"] >= 1, rec  # runs the kill cut were resumed by the new process
    assert res.lost == 0, rec  # every acknowledged checkpoint is in MongoDB
    assert res.duplicated == 0, rec  # no identity stored twice, none acknowledged twice
    assert rec["unfinished"] == 0 and rec["errors"] == [], rec
    assert rec["state_mismatches"] == 0, rec  # final states == uninterrupted runs
    assert rec["mongo_checkpoints"] >= threads * graphs.count_calls("async")["put"], rec
    assert rec["lag_n"] > 0 and rec["lag_p99_s"] is not None  # the lag was measured
    assert not res.findings, res.findings


def test_many_processes_on_a_single_redis_with_4_partitions(
        redis_url: str, mongo_url: str, tmp_path: Path) -> None:
    res = s9_many_processes.run(Env(redis_url, mongo_url, work=tmp_path), threads=32,
                                apps=4, workers=2, concurrency=3, partitions=4)
    _check(res, 32)


def test_many_processes_on_a_redis_cluster(redis_cluster_url: str, mongo_url: str,
                                           tmp_path: Path) -> None:
    res = s9_many_processes.run(Env(redis_cluster_url, mongo_url, work=tmp_path),
                                threads=24, apps=4, workers=2, concurrency=3)
    assert res.records[0]["cluster"]
    _check(res, 24)
