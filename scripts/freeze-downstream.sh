#!/usr/bin/env bash
# Freezes the kernels examples/downstream ships (examples/downstream/frozen/softmax.hjfz): the
# crate's tests run with HIPJIT_RECORD in a fresh cache (record), then `hipjit cache freeze`
# compiles each recorded request and writes the bundle (freeze). Run it after changing the
# crate's kernel source, header or options; scripts/test.sh then runs the crate's tests with
# no compiler, served from the bundle alone.
#
# Usage: scripts/freeze-downstream.sh      (needs hipcc; Debian's /usr/bin/hipcc here)
set -euo pipefail

script_dir="$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")" && pwd -P)"
repo="$(git -C "$script_dir" rev-parse --show-toplevel 2>/dev/null || dirname -- "$script_dir")"
cd -- "$repo"

tmp=$(mktemp -d "${TMPDIR:-/tmp}/hipjit-freeze.XXXXXX")
trap 'rm -rf -- "$tmp"' EXIT

env HIPJIT_RECORD="$tmp/record.jsonl" HIPJIT_CACHE_DIR="$tmp/cache" \
    cargo test -p hipjit-softmax --test softmax
env HIPJIT_CACHE_DIR="$tmp/cache" \
    cargo run -q -p hipjit --features cli --bin hipjit -- \
    cache freeze "$tmp/record.jsonl" -o examples/downstream/frozen/softmax.hjfz
