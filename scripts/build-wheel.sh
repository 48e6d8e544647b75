#!/usr/bin/env bash
# Builds the Python package (python/: the pyo3 crate hipjit-python and the hipjit package) into
# one abi3 wheel for CPython 3.9+ with maturin, from the venv scripts/setup.sh makes
# ($HIPJIT_CI_CACHE/python-venv). The wheel lands in OUT (default target/wheels).
#
# Usage: scripts/build-wheel.sh [--release] [OUT]
#   --release  an optimised build (what is installed for use and for benchmarks); without it a
#              debug build (the test suite's, quicker to build).
set -euo pipefail
cd "$(dirname -- "${BASH_SOURCE[0]}")/.."
cache="${HIPJIT_CI_CACHE:-/var/cache/hipjit-ci}"
maturin="${MATURIN:-$cache/python-venv/bin/maturin}"
profile=(--profile dev)
if [[ "${1:-}" == --release ]]; then
    profile=(--release --strip)
    shift
fi
out="${1:-target/wheels}"
if [[ ! -x "$maturin" ]]; then
    echo "build-wheel: maturin not found at $maturin: run scripts/setup.sh (or set MATURIN)" >&2
    exit 1
fi
mkdir -p -- "$out"
rm -f -- "$out"/hipjit-*.whl
"$maturin" build --manifest-path python/Cargo.toml "${profile[@]}" --out "$out" \
    --compatibility linux --interpreter python3 --quiet
ls -l -- "$out"/hipjit-*.whl
