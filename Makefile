# Two commands on a fresh Debian machine (each does its own set-up):
#   make demo   - kill an agent mid-run with SIGKILL and resume it in a new process
#   make test   - the whole test suite against real Redis, MongoDB-wire and S3 servers
VENV ?= .venv
PY := $(VENV)/bin/python

.PHONY: setup test demo lint bench

setup:
	@bash scripts/setup.sh

test: setup
	$(PY) -m ruff check .
	$(PY) -m mypy --explicit-package-bases langgraph_durable
	$(PY) -m pytest -q

demo: setup
	$(PY) examples/crash_demo.py

lint: setup
	$(PY) -m ruff check .
	$(PY) -m mypy --explicit-package-bases langgraph_durable
