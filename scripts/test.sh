#!/usr/bin/env bash
# Run the whole test suite: set-up, Rust tests, lint, then pytest.
# pytest exit status 5 (nothing collected) is a failure, not a pass.
set -euo pipefail
cd "$(dirname "$0")/.."
# The host check: on a machine the project has not run on before (no cached virtualenvs), the
# first run of the suite records the machine's CPU, whether the suite passed and how long it
# took, in $PWB_CACHE_DIR/host-checks.jsonl, and prints it (docs/contributing.md).
started=$(date +%s)
pytest_s=""
cache_dir="${PWB_CACHE_DIR:-$HOME/.cache/pywebbench}"
new_host=0
[ -d "$cache_dir/venvs" ] || new_host=1
record_host_check() {
    local rc=$1
    [ "$new_host" = 1 ] || return 0
    local cpu cache line
    cpu=$(grep -m1 '^model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//;s/"/\\"/g')
    cache=$(grep -m1 '^cache size' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//')
    line=$(printf '{"date": "%s", "cpu": "%s", "cache": "%s", "cores": %s, "kernel": "%s", "commit": "%s", "passed": %s, "pytest_s": %s, "whole_s": %s}' \
        "$(date -u +%FT%TZ)" "$cpu" "$cache" "$(nproc)" "$(uname -r)" \
        "$(git rev-parse --short HEAD 2>/dev/null || echo unknown)" \
        "$([ "$rc" = 0 ] && echo true || echo false)" "${pytest_s:-null}" "$(($(date +%s) - started))")
    mkdir -p "$cache_dir" && echo "$line" >>"$cache_dir/host-checks.jsonl"
    echo "host check (first run on this machine): $line"
}
trap 'record_host_check $?' EXIT
# In CI (a clean clone each job, the cache directory kept between jobs) Cargo and mypy keep
# their work under the cache directory:
# - Cargo then compiles the workspace's own crates (a new clone's files are newer than any
#   earlier build of them) and not every dependency again: about a minute less of the engine's
#   release build, clippy and the crates' test build on 2 cores;
# - mypy checks each cached module against its file's hash, so it checks only what changed
#   (18.7 s -> 1.1 s for a new clone here).
if [ "${CI:-}" = "true" ]; then
    cache="${PWB_CACHE_DIR:-$HOME/.cache/pywebbench}"
    if [ -z "${CARGO_TARGET_DIR:-}" ]; then
        export CARGO_TARGET_DIR="$cache/cargo-target"
        # Cargo never prunes it; clones at new paths each leave their crates' builds behind
        if [ -d "$CARGO_TARGET_DIR" ] && [ "$(du -sm "$CARGO_TARGET_DIR" | cut -f1)" -gt 4000 ]; then
            rm -rf "$CARGO_TARGET_DIR"
        fi
    fi
    export MYPY_CACHE_DIR="${MYPY_CACHE_DIR:-$cache/mypy}"
fi
./scripts/setup.sh
export PATH="$PWD/.venv/bin:$PATH"
# The tests use a free-threaded CPython 3.13t too, built from Debian's source package once
# (setup.sh with PWB_SETUP_FREE_THREADED=1: cached under $PWB_CACHE_DIR/pythons, ~4 minutes
# on 2 cores the first time; everything else it does is done by then). It builds in its own
# process group, at the lowest priority, while the Rust and lint steps run (their serial
# stretches leave a core idle; at nice 19 it takes what they leave, and the Rust tests'
# timings keep their cores), and pytest starts once it is there.
ft_log=$(mktemp -t pwb-free-threaded-build.XXXXXX)
PWB_SETUP_FREE_THREADED=1 PWB_SETUP_QUIET=1 nice -n 19 setsid ./scripts/setup.sh >"$ft_log" 2>&1 &
ft_build=$!
trap 'rc=$?; kill -- "-$ft_build" 2>/dev/null || true; rm -f "$ft_log"; record_host_check $rc' EXIT
echo "== rust: fmt, clippy, tests (CPython 3.13t builds beside them: $ft_log)"
cargo fmt --all --check
cargo clippy --workspace --release --quiet -- -D warnings
# The binding crate is a cdylib linked against the interpreter at import time; its behaviour
# is covered by the Python tests. The pure crates are tested here, in the ci profile of
# Cargo.toml: the release build without its link-time optimisation (some tests time the
# engine; in the dev profile io_uring's overhead failed one of them).
cargo test --profile ci --quiet -p pywebbench-sys -p pywebbench-engine -p pywebbench-refserver
echo "== python: ruff"
ruff check python tests benchmarks
ruff format --check python tests benchmarks
echo "== python: mypy --strict (configured in pyproject.toml)"
mypy
echo "== CPython 3.13t (free-threaded), for the tests"
if ! wait "$ft_build"; then
    cat "$ft_log" >&2
    echo "the free-threaded CPython build failed" >&2
    exit 1
fi
trap 'rc=$?; rm -f "$ft_log"; record_host_check $rc' EXIT  # its group is gone now
cat "$ft_log"
echo "== pytest"
set +e
# Tests marked benchmark (statistical power on real servers' timings, issue 52) are not in
# the suite: they are run on their own, python -m pytest -m benchmark FILE (docs/contributing.md).
# Two workers (pytest-xdist), a file's tests on one of them (its module fixtures built
# once): the tests assert function and bounds that hold beside other load (issue 52), and
# many of them wait on servers starting (docs/contributing.md, "Two workers").
# The longest files go first (tests/conftest.py's HEAVY_FIRST, not xdist's reorder by test
# count), so that no long file is left for one worker at the end.
pytest_started=$(date +%s)
python -m pytest -n 2 --dist loadfile --no-loadscope-reorder -ra --durations=25 \
    -m "not benchmark" "$@"
rc=$?
pytest_s=$(($(date +%s) - pytest_started))
set -e
if [ "$rc" -eq 5 ]; then
    echo "pytest collected no tests: failing" >&2
    exit 1
fi
exit "$rc"
