#!/usr/bin/env bash
# A brief libFuzzer run of each fuzz target (fuzz/), the `fuzz` step of scripts/test.sh.
# cargo-fuzz on the stable toolchain (RUSTC_BOOTSTRAP=1, no sanitizer), built with --dev
# (unoptimised, debug assertions on: quicker to build, and an overflow is a crash). Each
# target runs FUZZ_SECONDS (default 12) from its seeds (the real code objects, fuzz/seeds)
# plus the corpus kept from earlier runs, and prints libFuzzer's final cov/ft line. A crash
# fails the step; the input is left in fuzz/artifacts/TARGET/.
#
# Kept between runs under $HIPJIT_CI_CACHE (default /var/cache/hipjit-ci): cargo-fuzz
# (cargo-fuzz/bin), the build (fuzz-target) and the corpora (fuzz-corpus/TARGET), so only the
# first run pays for cargo-fuzz and the dependencies (minutes); later ones rebuild hipjit.
#
# Usage: scripts/fuzz-brief.sh [TARGET...]   (default: every target of fuzz/Cargo.toml)
set -euo pipefail

repo="$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")/.." && pwd -P)"
cache="${HIPJIT_CI_CACHE:-/var/cache/hipjit-ci}"
seconds="${FUZZ_SECONDS:-12}"

if ! command -v cargo-fuzz >/dev/null 2>&1; then
    if [[ ! -x "$cache/cargo-fuzz/bin/cargo-fuzz" ]]; then
        cargo install --locked --root "$cache/cargo-fuzz" cargo-fuzz
    fi
    PATH="$cache/cargo-fuzz/bin:$PATH"
fi

cd -- "$repo/fuzz"
export CARGO_TARGET_DIR="$cache/fuzz-target"
export RUSTC_BOOTSTRAP=1
mapfile -t all < <(sed -nE 's/^name = "([a-z_]+)"$/\1/p' Cargo.toml | grep -v '^hipjit-fuzz$')
targets=("$@")
((${#targets[@]} > 0)) || targets=("${all[@]}")

cargo fuzz build --dev --sanitizer none 2>&1 | tail -n 3

seeds_of() {
    case "$1" in
        code_object) echo "$repo/tests/data/code-objects $repo/tests/data/code-objects/cuda" ;;
        cubin) echo "$repo/tests/data/code-objects/cuda" ;;
        *) echo "$repo/fuzz/seeds/$1" ;;
    esac
}

failed=()
for t in "${targets[@]}"; do
    corpus="$cache/fuzz-corpus/$t"
    mkdir -p "$corpus" "artifacts/$t"
    read -ra seeds < <(seeds_of "$t")
    log=$(mktemp)
    rc=0
    "$CARGO_TARGET_DIR/x86_64-unknown-linux-gnu/debug/$t" "$corpus" "${seeds[@]}" \
        -max_total_time="$seconds" -rss_limit_mb=2048 -max_len=65536 \
        -artifact_prefix="artifacts/$t/" >"$log" 2>&1 || rc=$?
    final=$(grep -E '^#[0-9]+[[:space:]]+(DONE|pulse|NEW|REDUCE|INITED)' "$log" | tail -n 1 || true)
    if ((rc == 0)); then
        echo "fuzz $t: ${seconds} s, ok: $final"
    else
        echo "fuzz $t: CRASH (exit $rc): $final"
        grep -E 'panicked|ERROR|Test unit written' "$log" || true
        failed+=("$t")
    fi
    rm -f -- "$log"
done
if ((${#failed[@]} > 0)); then
    echo "fuzz: crashes in ${failed[*]}"
    exit 1
fi
