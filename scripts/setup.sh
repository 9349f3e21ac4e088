#!/usr/bin/env bash
# Set up everything pywebbench and its tests need on a Debian bookworm machine, idempotently:
#   1. Debian packages (PyPy, redis-server, PostgreSQL, nginx, wrk, chromium, libev-dev, ...)
#   2. the project virtualenv .venv (CPython), with pywebbench built by maturin (Rust engine)
#   3. CPython's Debian source packages (deb-src, trixie: 3.13, sid: 3.14), and for the tests
#      (PWB_SETUP_FREE_THREADED=1: scripts/test.sh runs it so, beside its Rust and lint steps)
#      a free-threaded CPython 3.13t built from them once into $PWB_CACHE_DIR/pythons
#      (docs/interpreters.md); `./pwb run` does not wait for that build
# Re-running is cheap: each step is skipped when its inputs did not change.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD

APT_PACKAGES=(pypy3 pypy3-venv pypy3-dev redis-server postgresql nginx wrk nghttp2-client chromium libev-dev strace valgrind
              build-essential python3-dev pkg-config curl dpkg-dev)

log() { printf '\033[1m[setup]\033[0m %s\n' "$*" >&2; }

missing=()
for p in "${APT_PACKAGES[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
    SUDO=""
    [ "$(id -u)" = 0 ] || SUDO="sudo"
    log "installing Debian packages: ${missing[*]}"
    # Services must not be started by the package scripts: pywebbench starts its own on loopback.
    if [ ! -e /usr/sbin/policy-rc.d ]; then
        printf '#!/bin/sh\nexit 101\n' | $SUDO tee /usr/sbin/policy-rc.d >/dev/null
        $SUDO chmod +x /usr/sbin/policy-rc.d
    fi
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
fi

PY=${PYWEBBENCH_PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
    log "creating .venv with $($PY --version 2>&1)"
    "$PY" -m venv .venv
fi
# Rebuild when anything that defines the build is newer than the last successful build.
if [ ! -f .pwb-setup-stamp ] || [ -n "$(find crates pyproject.toml Cargo.toml -newer .pwb-setup-stamp -type f 2>/dev/null | head -1)" ] \
   || ! .venv/bin/python -c 'import pywebbench._engine' 2>/dev/null; then
    log "installing Python dependencies and building the Rust engine (release)"
    .venv/bin/python -m pip install -q --upgrade pip
    .venv/bin/python -m pip install -q "maturin>=1.7,<2" uv
    .venv/bin/python -m uv pip install -q --python .venv/bin/python -e ".[test,ray]"
    touch .pwb-setup-stamp
fi
# Bytecode for everything a pywebbench process imports, written once: where the environment
# sets PYTHONDONTWRITEBYTECODE (containers, CI) Python never writes it, and every command
# compiled scipy & co from source again (3.6 s of CPU per `pywebbench --help` here).
# compileall skips what is up to date; failures are third-party files meant for other versions.
if [ ! -f .pwb-bytecode-stamp ] || [ .pwb-setup-stamp -nt .pwb-bytecode-stamp ]; then
    log "byte-compiling the virtualenv (once)"
    .venv/bin/python -m compileall -q -j 0 .venv/lib >/dev/null 2>&1 || true
    touch .pwb-bytecode-stamp
fi
.venv/bin/python -m compileall -q -j 0 python/pywebbench >/dev/null
# CPython sources (deb-src only: no binary package comes from trixie/sid) and, for the tests,
# the cached free-threaded build; both steps do nothing when already done.
SOURCES=/etc/apt/sources.list.d/pywebbench-python-src.sources
if [ ! -f "$SOURCES" ]; then
    SUDO=""
    [ "$(id -u)" = 0 ] || SUDO="sudo"
    log "adding deb-src lines for CPython's source packages: $SOURCES"
    .venv/bin/python -c 'from pywebbench.provision.pythons import SOURCES_TEXT; print(SOURCES_TEXT, end="")' \
        | $SUDO tee "$SOURCES" >/dev/null
    $SUDO apt-get update -qq
fi
if [ -n "${PWB_SETUP_FREE_THREADED:-}" ]; then  # scripts/test.sh: the tests use it
    log "CPython 3.13t (free-threaded) from source, once (a few minutes the first time)"
    .venv/bin/python -c 'from pywebbench.provision.pythons import PythonRequest, build_from_source
print(build_from_source(PythonRequest("cpython", "3.13", True), print))'
fi
[ -n "${PWB_SETUP_QUIET:-}" ] || log "ready: $ROOT/.venv/bin/pywebbench"
