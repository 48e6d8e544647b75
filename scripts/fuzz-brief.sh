#!/usr/bin/env bash
# A brief libFuzzer run of each fuzz target (fuzz/), the `fuzz` step of scripts/test.sh.
# Built as `cargo fuzz build --dev --sanitizer none` builds them, without installing cargo-fuzz
# (minutes of compiling on a fresh machine): cargo with the same flags, libFuzzer's coverage
# instrumentation (`-Cpasses=sancov-module` and the sanitizer-coverage options, all stable),
# `--cfg fuzzing`, debug assertions and overflow checks on (an overflow is a crash), no
# sanitizer. Each target runs FUZZ_SECONDS (default 12) from its seeds (the real code objects,
# fuzz/seeds) plus the corpus kept from earlier runs, FUZZ_JOBS (default 2, the cores here) at a
# time, and prints libFuzzer's final cov/ft line. A crash fails the step; the input is left in
# fuzz/artifacts/TARGET/.
#
# Kept between runs under $HIPJIT_CI_CACHE (default /var/cache/hipjit-ci): the dependencies'
# build (fuzz-target; the workspace's own packages are removed from it at the start of each
# run) and the corpora (fuzz-corpus/TARGET), so only the first run pays for the dependencies;
# later ones rebuild hipjit.
#
# Usage: scripts/fuzz-brief.sh [TARGET...]   (default: every target of fuzz/Cargo.toml)
set -euo pipefail

repo="$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")/.." && pwd -P)"
cache="${HIPJIT_CI_CACHE:-/var/cache/hipjit-ci}"
seconds="${FUZZ_SECONDS:-12}"
jobs="${FUZZ_JOBS:-2}"
triple=x86_64-unknown-linux-gnu

cd -- "$repo/fuzz"
export CARGO_TARGET_DIR="$cache/fuzz-target"
# Each checkout builds the workspace's packages under a new hash (its path is part of it), so
# the earlier checkouts' builds are removed first, and incremental state (of no use to the next
# checkout) is not kept: the kept build stays the dependencies' alone instead of growing by
# ~0.5 GB a run.
export CARGO_INCREMENTAL=0
rm -rf -- "$CARGO_TARGET_DIR/$triple/debug/incremental" "$CARGO_TARGET_DIR/debug/incremental"
if [[ -d "$CARGO_TARGET_DIR" ]]; then
    cargo clean -q --target "$triple" -p hipjit -p hipjit-sys -p hipjit-fuzz
    cargo clean -q -p hipjit -p hipjit-sys -p hipjit-fuzz
fi
mapfile -t all < <(sed -nE 's/^name = "([a-z_]+)"$/\1/p' Cargo.toml | grep -v '^hipjit-fuzz$')
targets=("$@")
((${#targets[@]} > 0)) || targets=("${all[@]}")

# cargo-fuzz's flags for `build --dev --sanitizer none` (coverage level 4, trace-compares).
RUSTFLAGS="-Cpasses=sancov-module -Cllvm-args=-sanitizer-coverage-level=4"
RUSTFLAGS+=" -Cllvm-args=-sanitizer-coverage-inline-8bit-counters"
RUSTFLAGS+=" -Cllvm-args=-sanitizer-coverage-pc-table"
RUSTFLAGS+=" -Cllvm-args=-sanitizer-coverage-trace-compares"
RUSTFLAGS+=" --cfg fuzzing -Cdebug-assertions -Coverflow-checks"
export RUSTFLAGS
# The build's last lines, or all of it when it fails (its errors).
build_log=$(mktemp)
if ! cargo build --target "$triple" --bins >"$build_log" 2>&1; then
    cat -- "$build_log"
    rm -f -- "$build_log"
    echo "fuzz: the fuzz targets did not build"
    exit 1
fi
tail -n 3 -- "$build_log"
rm -f -- "$build_log"

seeds_of() {
    case "$1" in
        code_object) echo "$repo/tests/data/code-objects $repo/tests/data/code-objects/cuda" ;;
        cubin) echo "$repo/tests/data/code-objects/cuda" ;;
        *) echo "$repo/fuzz/seeds/$1" ;;
    esac
}

# Runs target $1 for $seconds; prints one line; exits non-zero on a crash.
run_one() {
    local t=$1 corpus="$cache/fuzz-corpus/$1" log rc=0 final
    local -a seeds
    mkdir -p "$corpus" "artifacts/$t"
    read -ra seeds < <(seeds_of "$t")
    log=$(mktemp)
    "$CARGO_TARGET_DIR/$triple/debug/$t" "$corpus" "${seeds[@]}" \
        -max_total_time="$seconds" -rss_limit_mb=2048 -max_len=65536 \
        -artifact_prefix="artifacts/$t/" >"$log" 2>&1 || rc=$?
    final=$(grep -E '^#[0-9]+[[:space:]]+(DONE|pulse|NEW|REDUCE|INITED)' "$log" | tail -n 1 || true)
    if ((rc == 0)); then
        echo "fuzz $t: ${seconds} s, ok: $final"
    else
        echo "fuzz $t: CRASH (exit $rc): $final"
        grep -E 'panicked|ERROR|Test unit written' "$log" || true
    fi
    rm -f -- "$log"
    return "$rc"
}

failed=()
declare -A running=()
# Waits for one running target and records it when it crashed.
reap() {
    local pid rc=0 t
    wait -n -p pid || rc=$?
    t=${running[$pid]}
    unset "running[$pid]"
    if ((rc != 0)); then failed+=("$t"); fi
}
for t in "${targets[@]}"; do
    while ((${#running[@]} >= jobs)); do reap; done
    run_one "$t" &
    running[$!]=$t
done
while ((${#running[@]} > 0)); do reap; done
if ((${#failed[@]} > 0)); then
    echo "fuzz: crashes in ${failed[*]}"
    exit 1
fi
