# Two commands on a fresh Debian machine (each does its own set-up):
#   make demo   - kill an agent mid-run with SIGKILL and resume it in a new process
#   make test   - the whole test suite against real Redis, MongoDB-wire and S3 servers
#   make bench  - the benchmark harness (adds PostgreSQL and the peer savers)
#   make bench-speed - its speed report alone (W1, W3 and the W3 sweep)
#   make bench-pinned - issue 35's speed report with the servers on their own CPU
VENV ?= .venv
PY := $(VENV)/bin/python
# pytest-xdist workers for `make test` (each starts its own servers; tests/conftest.py
# schedules the slowest first): 4; -n 5 measured slower here (627 s against 583-586 s),
# and no faster on a quiet machine (441.7 s against 445.2 s, 808 CPU-s against 780)
TEST_WORKERS ?= 4

.PHONY: setup test demo lint bench bench-deps bench-speed bench-pinned bench-store

setup:
	@bash scripts/setup.sh

# bytecode written beside the sources (__pycache__, ignored by git) even where the
# environment sets PYTHONDONTWRITEBYTECODE=1: a later run's pytest workers then collect in
# 4 s, not 12.5 s, each (pytest keeps its rewritten test modules there), and the CLI,
# notebook kernels and suite subprocesses a run starts import compiled modules
test: export PYTHONDONTWRITEBYTECODE :=
test: setup
	$(PY) -m ruff check .
	$(PY) -m mypy --explicit-package-bases langgraph_durable
	$(PY) -m pytest -q -n $(TEST_WORKERS)

demo: setup
	$(PY) examples/crash_demo.py

bench-deps: setup
	@ls /usr/lib/postgresql/*/bin/pg_ctl >/dev/null 2>&1 || command -v pg_ctl >/dev/null || ( \
	  SUDO=$$( [ "$$(id -u)" -eq 0 ] || echo sudo ); \
	  $$SUDO apt-get update -qq && $$SUDO apt-get install -y -qq postgresql >/dev/null )
	$(VENV)/bin/python -m pip install -q -e ".[bench]"

# both CPU modes: everything with the servers sharing the cores (13.9 min when last committed,
# before W1L and DOCS), then issue 35's pinned report (bench-pinned, 5-6 min measured)
bench: bench-deps
	$(PY) -m benchmarks.run --out benchmarks/results
	$(MAKE) --no-print-directory bench-pinned

# issue 22's speed report alone (W1, W3 and its sweep against the peers it names): ~10 min
bench-speed: bench-deps
	$(PY) -m benchmarks.run --workloads W1,W3 --savers reference,inmemory,durable,sqlite,postgres \
	  --no-profile --out benchmarks/results/speed

# issue 35's report as production runs it: the benchmark on CPU 0, Redis, SecantusDB and
# PostgreSQL on CPU 1 (taskset); W1 at 100 and 300 turns, W3 at 50 threads, documents and
# MongoDB-server CPU per checkpoint, 5 interleaved repetitions, profiles; durable_worker (a
# flusher worker process on the servers' CPU) gives the application's own cost: 6-7 min
bench-pinned: bench-deps
	$(PY) -m benchmarks.run --cpu-mode pinned --workloads W1,W1L,W3,DOCS --no-sweep --reps 5 \
	  --savers reference,inmemory,durable,durable_worker,sqlite,postgres \
	  --out benchmarks/results/pinned \
	  --docs-img ''

# issue 32's store benchmark: DurableStore against InMemoryStore, PostgresStore, RedisStore
bench-store: bench-deps
	$(PY) -m benchmarks.store --out benchmarks/results/store

lint: setup
	$(PY) -m ruff check .
	$(PY) -m mypy --explicit-package-bases langgraph_durable
