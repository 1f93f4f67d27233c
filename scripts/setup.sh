#!/usr/bin/env bash
# One-time set-up for a fresh Debian machine (idempotent): redis-server from Debian's
# package where missing, a virtualenv in .venv, the package with its extras.
# Called by `make test` and `make demo`; safe to run again.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV="${VENV:-.venv}"
PYTHON="${PYTHON:-python3}"

if ! command -v redis-server >/dev/null 2>&1; then
  echo "setup: installing redis-server (Debian package)"
  SUDO=""
  if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq redis-server >/dev/null
fi

if [ ! -x "$VENV/bin/python" ]; then
  echo "setup: creating $VENV"
  "$PYTHON" -m venv "$VENV"
fi

stamp="$VENV/.installed-$(sha1sum pyproject.toml | cut -c1-12)"
if [ ! -f "$stamp" ]; then
  echo "setup: installing langgraph-durable and its test extras into $VENV"
  "$VENV/bin/python" -m pip install -q --upgrade pip
  "$VENV/bin/python" -m pip install -q -e ".[test,s3,dataframes,cli]"
  rm -f "$VENV"/.installed-*
  touch "$stamp"
fi
