#!/usr/bin/env bash
# One-time set-up for a fresh Debian machine (idempotent): redis-server and chromium from
# Debian's packages where missing, a virtualenv in .venv, the package with its extras.
# Called by `make test` and `make demo`; safe to run again.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV="${VENV:-.venv}"
PYTHON="${PYTHON:-python3}"

# redis-server for the hot tier's tests, chromium for the dashboard's browser tests
apt_missing=""
command -v redis-server >/dev/null 2>&1 || apt_missing="$apt_missing redis-server"
[ -x /usr/bin/chromium ] || apt_missing="$apt_missing chromium"
if [ -n "$apt_missing" ]; then
  echo "setup: installing$apt_missing (Debian packages)"
  SUDO=""
  if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
  $SUDO apt-get update -qq
  # shellcheck disable=SC2086
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq $apt_missing >/dev/null
fi

if [ ! -x "$VENV/bin/python" ]; then
  echo "setup: creating $VENV"
  "$PYTHON" -m venv "$VENV"
fi

stamp="$VENV/.installed-$(sha1sum pyproject.toml | cut -c1-12)"
if [ ! -f "$stamp" ]; then
  echo "setup: installing langgraph-durable and its test extras into $VENV"
  extras=".[test,s3,dataframes,cli,dashboard]"
  # uv (from PyPI, into the venv) resolves and installs the same versions as pip, bytecode
  # compiled as pip does, in about 25 s where pip takes about 60 s (measured on the 2-core
  # machine); pip when uv is not to be had
  if "$VENV/bin/python" -m pip install -q uv >/dev/null 2>&1 \
      && "$VENV/bin/python" -m uv pip install -q --compile-bytecode --python "$VENV/bin/python" -e "$extras"; then
    :
  else
    echo "setup: uv unavailable or failed; installing with pip"
    "$VENV/bin/python" -m pip install -q --upgrade pip
    "$VENV/bin/python" -m pip install -q -e "$extras"
  fi
  rm -f "$VENV"/.installed-*
  touch "$stamp"
fi
