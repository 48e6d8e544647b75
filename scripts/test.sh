#!/usr/bin/env bash
# hipjit's whole test suite, the command .ci/run runs. Steps, each named and timed:
#   setup         scripts/setup.sh: Debian packages, the sid root filesystem, the header sets
#   fmt           cargo fmt --all --check
#   lint-scripts  shellcheck on .ci/run and scripts/*.sh
#   clippy        cargo clippy --workspace --all-targets --all-features -- -D warnings, then
#                 hipjit and hipjit-sys alone without features (the code a crate depending on
#                 hipjit builds; alone, or the workspace's dev-dependencies would add features)
#   doc           cargo doc --no-deps -p hipjit-sys -p hipjit with hipjit's features of those,
#                 rustdoc's warnings (broken or private links) as errors; then as docs.rs
#                 builds them (its features, --cfg docsrs) with every link and each feature's
#                 doc(cfg) marks checked by scripts/doc-links.py; then hipjit's default
#                 features' pages checked by it (no link into a hidden item,
#                 at most 25 module and 300 item pages) and the public API compared with
#                 docs/public-api.txt (scripts/public-api.sh)
#   test          HIPJIT_TEST_ENV=bookworm cargo test --workspace --no-fail-fast [--features hipjit/cli,...]
#                 (unit tests, the three integration-test binaries tests/it, tests/real and
#                 tests/isolated, doc tests; on this host's Debian HIP 5.2.3), then
#                 examples/downstream's softmax-demo --testing (the testing runtime), then its
#                 tests again with no compiler, from the bundle it ships (strict serving). Each test
#                 binary runs with libtest's --report-time (scripts/test-runner.sh)
#   sid-test      scripts/sid-test.sh: the tests/real binary again inside the sid root
#                 (hipcc 7.0.2, HIP 6.4.3)
#   python        scripts/test-python.sh: the Python package's wheel built, installed into a
#                 fresh venv and its pytest suite run (python/tests)
#   header-matrix scripts/header-matrix.sh (when present): hip-sys and hipjit against each
#                 HIP header set
#   fuzz          scripts/fuzz-brief.sh: a brief libFuzzer run of each fuzz target (fuzz/)
#   msrv          cargo check of hipjit and hipjit-sys with the Rust of hipjit's rust-version
#                 (Cargo.toml; the toolchain scripts/setup.sh installed in
#                 $HIPJIT_CI_CACHE/rustup), the locked dependencies, features testing,half:
#                 with the default features (build-time bindgen), then without them (the
#                 pregenerated bindings), in target/msrv
# A failing setup stops the run; any other failing step is reported and the run goes on, so one
# run shows every problem. python, header-matrix, fuzz and msrv run at the same time (CONCURRENT_STEPS:
# each builds in its own target directory, and none fills both cores alone); their output is
# kept apart and printed whole, in order, when the last of them ends. Ends with each step's wall-clock and CPU time (user + system, of the
# step's processes and all their children), the totals, the ten slowest tests and, alone on the
# last line,
# "N passed, N failed, N skipped", summed over the libtest "test result:" lines of every step
# (skipped = ignored tests; a step that failed with no failing test, such as a build error or
# a crashed test binary, counts as one failure). Exits non-zero when any step failed.
#
# Usage: scripts/test.sh [STEP...]      (no step: all of them, in the order above)
# Environment: CARGO_BUILD_JOBS (default 2), HIPJIT_CI_CACHE (see scripts/setup.sh).
set -euo pipefail

script_dir="$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")" && pwd -P)"
repo="$(git -C "$script_dir" rev-parse --show-toplevel 2>/dev/null || dirname -- "$script_dir")"
cd -- "$repo"

ALL_STEPS=(setup fmt lint-scripts clippy doc test sid-test python header-matrix fuzz msrv)
# Run together, when the first of them is reached (see above).
CONCURRENT_STEPS=(python header-matrix fuzz msrv)

# The machine this runs on has 2 cores (and CI's too): two rustc jobs at a time.
export CARGO_BUILD_JOBS="${CARGO_BUILD_JOBS:-2}"
export CARGO_TERM_PROGRESS_WHEN=never
if ! command -v cargo >/dev/null 2>&1 && [[ -x "${HOME:-/root}/.cargo/bin/cargo" ]]; then
    PATH="${HOME:-/root}/.cargo/bin:$PATH"
fi

log_file=$(mktemp "${TMPDIR:-/tmp}/hipjit-test.XXXXXX")
times_file=$(mktemp "${TMPDIR:-/tmp}/hipjit-times.XXXXXX")
step_log=$(mktemp "${TMPDIR:-/tmp}/hipjit-step.XXXXXX")
work_dir=$(mktemp -d "${TMPDIR:-/tmp}/hipjit-steps.XXXXXX")
trap 'rm -rf -- "$log_file" "$times_file" "$step_log" "$work_dir"' EXIT

# Whether the hipjit package declares the cargo feature $1.
has_feature() {
    cargo metadata --no-deps --format-version 1 |
        jq -e --arg f "$1" '.packages[] | select(.name == "hipjit") | .features | has($f)' >/dev/null
}

step_setup() { bash scripts/setup.sh; }
step_fmt() { cargo fmt --all --check; }
step_lint_scripts() {
    local -a files=(.ci/run scripts/*.sh)
    shellcheck "${files[@]}" && echo "shellcheck: ${#files[@]} scripts clean"
}
step_clippy() {
    local rc=0
    cargo clippy --workspace --all-targets --all-features -- -D warnings || rc=$?
    # hipjit and hipjit-sys alone: in the workspace, examples/downstream's dev-dependency
    # would turn hipjit's `testing` feature on.
    cargo clippy -p hipjit -p hipjit-sys --all-targets -- -D warnings || rc=$?
    return "$rc"
}
step_doc() {
    local -a f
    local rc=0
    read -ra f < <(hipjit_features)
    (
        IFS=,
        RUSTDOCFLAGS="-D warnings" cargo doc --no-deps -p hipjit-sys -p hipjit --features "${f[*]}"
    ) || rc=$?
    # As docs.rs builds them: its features (Cargo.toml's package.metadata.docs.rs) and
    # `--cfg docsrs`, which turns on the `doc(cfg)` marks (a nightly feature: RUSTC_BOOTSTRAP
    # lets this stable rustdoc take it). Every link resolves (none into a hidden item) and each
    # of those features marks its items. Then the default features, as a crate depending on
    # hipjit sees them: the default surface stays within docs/semver.md's bounds.
    local docs_rs
    docs_rs=$(cargo metadata --no-deps --format-version 1 |
        jq -r '.packages[] | select(.name == "hipjit") | .metadata.docs.rs.features // [] | join(",")')
    if RUSTC_BOOTSTRAP=1 RUSTDOCFLAGS="--cfg docsrs -D warnings" \
        cargo doc --no-deps -p hipjit --features "$docs_rs"; then
        python3 scripts/doc-links.py target/doc hipjit --feature-marks "$docs_rs" || rc=$?
    else
        rc=1
    fi
    if RUSTDOCFLAGS="-D warnings" cargo doc --no-deps -p hipjit; then
        python3 scripts/doc-links.py target/doc hipjit --max-modules 25 --max-items 300 || rc=$?
    else
        rc=1
    fi
    if [[ -f scripts/public-api.sh ]]; then
        bash scripts/public-api.sh || rc=$?
    fi
    return "$rc"
}
# hipjit's own features of cli, testing (the testing runtime) and half (f16/bf16 element
# types), those it declares, separated by spaces.
hipjit_features() {
    local name
    for name in cli testing half; do
        if has_feature "$name"; then printf '%s ' "$name"; fi
    done
    echo
}
# --features with hipjit/cli, hipjit/testing (the testing runtime), hipjit/half (f16/bf16
# element types) and hipjit-softmax/testing (examples/downstream's demo on the testing runtime),
# those the workspace has. `test` and `sid-test` pass the same features, so sid-test reuses the
# test binaries that `test` built.
feature_args() {
    local -a f=() own
    local name
    read -ra own < <(hipjit_features)
    for name in "${own[@]}"; do f+=("hipjit/$name"); done
    if has_package hipjit-softmax; then f+=(hipjit-softmax/testing); fi
    if ((${#f[@]})); then
        local IFS=,
        echo "--features ${f[*]}"
    fi
}
# Whether the workspace has the package $1.
has_package() {
    cargo metadata --no-deps --format-version 1 |
        jq -e --arg p "$1" '.packages[] | select(.name == $p)' >/dev/null
}
step_test() {
    local -a features
    read -ra features < <(feature_args)
    # main runs each step behind `||`, where `set -e` does not act: every failure is
    # collected here by hand, or a failing `cargo test` followed by a passing demo would
    # report the step ok.
    local rc=0
    # --no-fail-fast: every failing test binary is reported, not only the first.
    # The runner adds --report-time to each test binary's arguments: the summary's ten slowest.
    # Cargo splits a runner setting at whitespace: a checkout path with any goes without.
    local -a runner=()
    if [[ "$repo" =~ [[:space:]] ]]; then
        echo "test: the checkout's path has whitespace: no test runner, no ten slowest"
    else
        runner=(CARGO_TARGET_X86_64_UNKNOWN_LINUX_GNU_RUNNER="$repo/scripts/test-runner.sh")
    fi
    env HIPJIT_TEST_ENV=bookworm "${runner[@]}" \
        cargo test --workspace --no-fail-fast "${features[@]}" || rc=$?
    # examples/downstream, the crate-author path end to end on the testing runtime.
    if has_package hipjit-softmax; then
        cargo run -p hipjit-softmax "${features[@]}" --bin softmax-demo -- --testing || rc=$?
        downstream_without_compiler "${features[@]}" || rc=$?
    fi
    return "$rc"
}
# `cargo check`, not `build`: what a Rust release adds (language features, standard library
# APIs, a dependency's rust-version) is refused by the type check, and build scripts (hip-sys's
# bindgen run included) are built and run by `check` as by `build`; code generation would add
# minutes of CPU for nothing the version decides. The features of the remote stores (redis,
# http, and cli, which has both) are left out: the locked redis 1.8 and the ICU crates that
# url needs want Rust 1.88 (README's "Install" says so).
step_msrv() {
    local version dir
    version=$(sed -n 's/^rust-version = "\([0-9.]*\)"$/\1/p' Cargo.toml | head -n 1)
    [[ "$version" =~ ^[0-9]+\.[0-9]+$ ]] && version="$version.0"
    dir="${HIPJIT_CI_CACHE:-/var/cache/hipjit-ci}/rustup/toolchains/$version-$(uname -m)-unknown-linux-gnu"
    if [[ ! -x "$dir/bin/cargo" ]]; then
        echo "msrv: Rust $version is not installed in $dir: run scripts/setup.sh"
        return 1
    fi
    # One job: it runs beside python, header-matrix and fuzz (CONCURRENT_STEPS).
    local -a msrv_env=(PATH="$dir/bin:$PATH" RUSTC="$dir/bin/rustc" RUSTDOC="$dir/bin/rustdoc"
        CARGO_BUILD_JOBS=1 CARGO_INCREMENTAL=0)
    echo "msrv: $("$dir/bin/rustc" --version)"
    local rc=0
    env "${msrv_env[@]}" cargo check --locked -p hipjit -p hipjit-sys --features testing,half \
        --target-dir target/msrv || rc=$?
    env "${msrv_env[@]}" cargo check --locked -p hipjit -p hipjit-sys --no-default-features \
        --features testing,half --target-dir target/msrv || rc=$?
    return "$rc"
}
# examples/downstream's tests again as on a machine with no hipcc, no hipRTC and no HIP
# headers: the test binary `test` built, run with an empty environment but for hipcc and
# hipRTC named at paths that do not exist, HIP_PATH and ROCM_PATH likewise, PATH naming
# nothing, a fresh cache, and strict serving (HIPJIT_STRICT=1: a request that would start a
# compiler fails naming it). Its kernels come from the bundle the crate ships alone
# (examples/downstream/frozen/softmax.hjfz; scripts/freeze-downstream.sh makes it).
downstream_without_compiler() {
    local exe dir rc=0
    exe=$(cargo test -p hipjit-softmax "$@" --test softmax --no-run --message-format=json |
        jq -r 'select(.reason == "compiler-artifact" and .target.name == "softmax")
               | .executable // empty' | tail -n 1)
    if [[ -z "$exe" ]]; then
        echo "downstream without a compiler: no test binary of hipjit-softmax"
        return 1
    fi
    dir=$(mktemp -d "${TMPDIR:-/tmp}/hipjit-nocompiler.XXXXXX")
    echo "examples/downstream's tests with no compiler, from its frozen bundle: $exe"
    env -i PATH=/nonexistent HOME="$dir" TMPDIR="$dir" HIPJIT_CACHE_DIR="$dir/cache" \
        HIPJIT_HIPCC=/nonexistent/hipcc HIPJIT_HIPRTC_LIBRARY=/nonexistent/libhiprtc.so \
        HIP_PATH=/nonexistent ROCM_PATH=/nonexistent HIPJIT_STRICT=1 "$exe" || rc=$?
    rm -rf -- "$dir"
    return "$rc"
}
step_sid_test() {
    local -a features
    read -ra features < <(feature_args)
    bash scripts/sid-test.sh "${features[@]}"
}
step_python() {
    if [[ ! -f scripts/test-python.sh ]]; then
        echo "python: scripts/test-python.sh does not exist yet: nothing to run"
        return 0
    fi
    bash scripts/test-python.sh
}
step_header_matrix() {
    if [[ ! -f scripts/header-matrix.sh ]]; then
        echo "header-matrix: scripts/header-matrix.sh does not exist yet: nothing to run"
        return 0
    fi
    bash scripts/header-matrix.sh
}
step_fuzz() { bash scripts/fuzz-brief.sh; }

# Sets cpu_ms to the CPU time, in milliseconds, of this shell's children waited for so far
# (user + system): the second line of `times`, run in this shell (in a command substitution it
# would report the subshell's own).
children_cpu() {
    local line
    times >"$times_file"
    line=$(sed -n 2p "$times_file")
    cpu_ms=0
    if [[ "$line" =~ ^([0-9]+)m([0-9]+)\.([0-9]{3})s\ ([0-9]+)m([0-9]+)\.([0-9]{3})s$ ]]; then
        local -a m=("${BASH_REMATCH[@]}")
        cpu_ms=$(((10#${m[1]} * 60 + 10#${m[2]} + 10#${m[4]} * 60 + 10#${m[5]}) * 1000 + 10#${m[3]} + 10#${m[6]}))
    fi
}

# The ten slowest tests of the log (lines `test NAME ... ok <SECONDS>` that --report-time
# gives), each with its test binary's name (cargo's `Running ... (DIR/NAME-HASH)` line). sed,
# not head: head would leave sort writing to a closed pipe, and SIGPIPE under pipefail would
# end the script before its last line.
slowest_tests() {
    awk '/^ +Running / { bin = $NF; gsub(/[()]/, "", bin); sub(/.*\//, "", bin); sub(/-[0-9a-f]+$/, "", bin) }
         /^test .* \.\.\. ok <[0-9.]+s>$/ {
             t = $NF; gsub(/[<>s]/, "", t); name = $2
             printf "%8.1f s  %-8s %s\n", t, bin, name }' "$log_file" | sort -rn | sed -n 1,10p
}

# Whether step $1 is one of CONCURRENT_STEPS.
is_concurrent() {
    local s
    for s in "${CONCURRENT_STEPS[@]}"; do [[ "$s" == "$1" ]] && return 0; done
    return 1
}

# Runs those of the steps "$@" that are CONCURRENT_STEPS at the same time, each in a subshell
# whose output goes to $work_dir/STEP.log and whose exit status, wall-clock and CPU seconds
# (its own `times`: user + system of its children) go to $work_dir/STEP.rc; waits for all of
# them and marks them in concurrent_done (main's), for main to report each in order.
run_concurrent() {
    local s
    local -a pids=()
    for s in "$@"; do
        is_concurrent "$s" || continue
        concurrent_done[$s]=1
        date -u +%H:%M:%S >"$work_dir/$s.start"
        (
            begin=$SECONDS
            r=0
            times_file="$work_dir/$s.times"
            "step_${s//-/_}" >"$work_dir/$s.log" 2>&1 </dev/null || r=$?
            children_cpu
            echo "$r $((SECONDS - begin)) $((cpu_ms / 1000))" >"$work_dir/$s.rc"
        ) &
        pids+=($!)
    done
    echo "test.sh: ${!concurrent_done[*]} running at the same time; each one's output follows when all have ended"
    for s in "${pids[@]}"; do wait "$s" || true; done
}

main() {
    local -a steps=("$@") failed=() times=() uncounted=()
    local step start rc cpu_start cpu cpu_ms wall total_start=$SECONDS total_cpu_start
    ((${#steps[@]} > 0)) || steps=("${ALL_STEPS[@]}")
    for step in "${steps[@]}"; do
        declare -F "step_${step//-/_}" >/dev/null || {
            echo "test.sh: unknown step '$step' (steps: ${ALL_STEPS[*]})" >&2
            exit 2
        }
    done
    command -v cargo >/dev/null 2>&1 || { echo "test.sh: cargo is not on PATH" >&2; exit 1; }
    children_cpu
    total_cpu_start=$cpu_ms

    local -A concurrent_done=()
    for step in "${steps[@]}"; do
        if [[ -z "${concurrent_done[$step]:-}" ]] && is_concurrent "$step"; then
            run_concurrent "${steps[@]}"
        fi
        if [[ -n "${concurrent_done[$step]:-}" ]]; then
            # Ran with the other concurrent steps: its output, status and times as kept.
            read -r rc wall cpu <"$work_dir/$step.rc"
            printf '\n===== [%s] start (%s, at the same time as %s)\n' "$step" \
                "$(cat "$work_dir/$step.start")" "${CONCURRENT_STEPS[*]}" | tee -a "$log_file"
            tee -a "$log_file" <"$work_dir/$step.log" >"$step_log"
            cat -- "$step_log"
        else
            printf '\n===== [%s] start (%s)\n' "$step" "$(date -u +%H:%M:%S)" | tee -a "$log_file"
            start=$SECONDS
            children_cpu
            cpu_start=$cpu_ms
            rc=0
            : >"$step_log"
            "step_${step//-/_}" 2>&1 </dev/null | tee -a "$log_file" "$step_log" || rc=$?
            children_cpu
            cpu=$(((cpu_ms - cpu_start) / 1000))
            wall=$((SECONDS - start))
        fi
        times+=("$(printf '%-14s %5d s wall %6d s CPU  %s' "$step" "$wall" "$cpu" "$( ((rc == 0)) && echo ok || echo "FAILED (exit $rc)")")")
        printf '===== [%s] %s in %d s (CPU %d s)\n' "$step" "$( ((rc == 0)) && echo ok || echo "FAILED (exit $rc)")" "$wall" "$cpu" | tee -a "$log_file"
        if ((rc != 0)); then
            failed+=("$step")
            # A step that failed with no failing test counted (a crashed test binary, a build
            # error, clippy) counts as one failure on the last line.
            if ! grep -qE '^test result: [A-Za-z]+\. [0-9]+ passed; [1-9][0-9]* failed;' "$step_log"; then
                uncounted+=("$step")
            fi
            if [[ "$step" == setup ]]; then
                echo "test.sh: setup failed: the other steps need what it installs; stopping" >&2
                break
            fi
        fi
    done

    local passed failures skipped
    read -r passed failures skipped < <(
        sed -nE 's/^test result: [A-Za-z]+\. ([0-9]+) passed; ([0-9]+) failed; ([0-9]+) ignored;.*/\1 \2 \3/p' "$log_file" |
            awk '{p += $1; f += $2; s += $3} END {print p + 0, f + 0, s + 0}'
    )
    printf '\n===== summary\n'
    printf '%s\n' "${times[@]}"
    children_cpu
    printf '%-14s %5d s wall %6d s CPU  (%s, load average now %s)\n' total $((SECONDS - total_start)) \
        $(((cpu_ms - total_cpu_start) / 1000)) "$(nproc) cores" "$(cut -d' ' -f1-3 /proc/loadavg)"
    local slow
    slow=$(slowest_tests)
    if [[ -n "$slow" ]]; then
        printf '\nthe ten slowest tests:\n%s\n' "$slow"
    fi
    if ((${#failed[@]} > 0)); then
        echo "FAILED steps: ${failed[*]}"
    fi
    if ((${#uncounted[@]} > 0)); then
        echo "counted as one failure each, having failed with no failing test: ${uncounted[*]}"
        failures=$((failures + ${#uncounted[@]}))
    fi
    echo "$passed passed, $failures failed, $skipped skipped"
    ((${#failed[@]} == 0))
}

main "$@"
