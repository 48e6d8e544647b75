#!/usr/bin/env bash
# Runs hipjit's real-toolchain tests a second time, inside the Debian sid root filesystem
# (hipcc 7.0.2 over clang-21, HIP 6.4.3 runtime): builds, on this host, the test binaries of
# the integration test target named `real` (tests/real/main.rs of any workspace package), then
# runs each inside the root with scripts/sid-run.sh and
# HIPJIT_TEST_ENV=sid, from its package's directory as cargo would. Prints each binary's libtest
# output, summary line included; exits non-zero when any test binary fails. There is no cargo
# inside the root: only the prebuilt binaries run there, with the repository bind-mounted.
#
# Usage: scripts/sid-test.sh [CARGO TEST ARGS...] [-- TEST BINARY ARGS...]
#   e.g. scripts/sid-test.sh --features hipjit/cli -- --test-threads 1
# Pass the same cargo arguments as the host's `cargo test` run, so the binaries it built are
# reused instead of rebuilt.
set -euo pipefail

script_dir="$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")" && pwd -P)"

die() {
    printf 'sid-test: error: %s\n' "$*" >&2
    exit 1
}

# Selects, from `cargo metadata` or `cargo test --message-format=json` output, the targets of
# kind "test" named real.
JQ_REAL='(.target.kind | index("test")) and .target.name == "real"'

main() {
    local -a cargo_args=() test_args=() failed=() extra_binds=()
    local repo metadata target_dir name exe manifest pkg_dir rel_src count=0
    local -a run_env=(-e HIPJIT_TEST_ENV=sid)
    # What cargo test would pass on from this environment.
    local var
    for var in RUST_BACKTRACE RUST_TEST_THREADS RUST_LOG; do
        [[ -n "${!var:-}" ]] && run_env+=(-e "$var=${!var}")
    done
    while (($# > 0)); do
        if [[ "$1" == -- ]]; then
            shift
            test_args=("$@")
            break
        fi
        cargo_args+=("$1")
        shift
    done
    command -v jq >/dev/null 2>&1 || die "jq is missing: apt-get install jq (scripts/setup.sh installs it)"
    repo="$(git -C "$script_dir" rev-parse --show-toplevel 2>/dev/null || dirname -- "$script_dir")"
    cd -- "$repo"

    metadata=$(cargo metadata --no-deps --format-version 1)
    if [[ -z "$(jq -r ".packages[].targets[] | {target: .} | select($JQ_REAL) | .target.name" <<<"$metadata")" ]]; then
        echo "sid-test: no test target named real (tests/real/main.rs) in this workspace: nothing to run in the sid root"
        return 0
    fi
    target_dir=$(jq -r .target_directory <<<"$metadata")
    case "$target_dir/" in
    "$repo"/*) ;;
    *) extra_binds=(--bind "$target_dir") ;;
    esac
    # The HIP 5.4 runtime of pytorch-triton-rocm that scripts/setup.sh unpacks
    # (tests/real/python_rocm.rs lays it out as Python packages do), at the same path inside.
    local ci_cache="${HIPJIT_CI_CACHE:-/var/cache/hipjit-ci}"
    if [[ -d "$ci_cache/rocm-5.4-triton" ]]; then
        extra_binds+=(--bind "$ci_cache/rocm-5.4-triton")
        [[ -n "${HIPJIT_CI_CACHE:-}" ]] && run_env+=(-e "HIPJIT_CI_CACHE=$HIPJIT_CI_CACHE")
    fi

    echo "sid-test: building the real test binary: cargo test --workspace --no-run ${cargo_args[*]}"
    local artifacts
    artifacts=$(cargo test --workspace --no-run --message-format=json "${cargo_args[@]}" |
        jq -r "select(.reason == \"compiler-artifact\" and .profile.test and .executable != null and $JQ_REAL)
               | [.target.name, .executable, .manifest_path, .target.src_path] | @tsv")
    [[ -n "$artifacts" ]] || die "cargo built no real test binary although the workspace has such targets"

    while IFS=$'\t' read -r name exe manifest rel_src; do
        count=$((count + 1))
        pkg_dir=$(dirname -- "$manifest")
        rel_src=${rel_src#"$pkg_dir"/}
        printf '\n     Running %s (%s) in the sid root, HIPJIT_TEST_ENV=sid\n' "$rel_src" "${exe#"$repo"/}"
        if ! (cd -- "$pkg_dir" && bash "$script_dir/sid-run.sh" "${extra_binds[@]}" \
            "${run_env[@]}" -e CARGO_MANIFEST_DIR="$pkg_dir" \
            -- "$exe" "${test_args[@]}"); then
            failed+=("$name")
        fi
    done <<<"$artifacts"

    if ((${#failed[@]} > 0)); then
        echo "sid-test: FAILED in the sid root: ${failed[*]} ($((count - ${#failed[@]})) of $count test binaries passed)" >&2
        return 1
    fi
    echo "sid-test: all $count real test binaries passed in the sid root"
}

main "$@"
