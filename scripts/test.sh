#!/usr/bin/env bash
# Run the whole test suite: set-up, Rust tests, lint, then pytest.
# pytest exit status 5 (nothing collected) is a failure, not a pass.
set -euo pipefail
cd "$(dirname "$0")/.."
PWB_SETUP_FREE_THREADED=1 ./scripts/setup.sh  # the tests use a free-threaded 3.13t too
export PATH="$PWD/.venv/bin:$PATH"
echo "== rust: fmt, clippy, tests"
cargo fmt --all --check
cargo clippy --workspace --release --quiet -- -D warnings
# The binding crate is a cdylib linked against the interpreter at import time; its behaviour
# is covered by the Python tests. The pure crates are tested here.
cargo test --release --quiet -p pywebbench-sys -p pywebbench-engine -p pywebbench-refserver
echo "== python: ruff"
ruff check python tests benchmarks
ruff format --check python tests benchmarks
echo "== python: mypy --strict (configured in pyproject.toml)"
mypy
echo "== pytest"
set +e
python -m pytest -ra --durations=25 "$@"
rc=$?
set -e
if [ "$rc" -eq 5 ]; then
    echo "pytest collected no tests: failing" >&2
    exit 1
fi
exit "$rc"
