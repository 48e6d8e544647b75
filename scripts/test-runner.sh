#!/usr/bin/env bash
# cargo's target runner for the `test` step of scripts/test.sh
# (CARGO_TARGET_X86_64_UNKNOWN_LINUX_GNU_RUNNER): runs a test binary with libtest's
# --report-time, so each passing test's line ends with its time (`... ok <1.234s>`) and the
# summary can list the slowest. --report-time is unstable: RUSTC_BOOTSTRAP=1 is set for the test
# binary alone (set for cargo, it would change how dependencies build and rebuild them all).
# Each test binary gets a fresh XDG_CACHE_HOME of its own (below). Anything that is not a
# libtest binary cargo built for the tests (DIR/deps/NAME-HASH, HASH 16 hex digits), a run that
# lists tests, and one given its own -Z options, run unchanged.
set -euo pipefail

exe=$1
shift
name=${exe##*/}
if [[ "$exe" == */deps/"$name" && "$name" =~ ^[A-Za-z0-9_]+-[0-9a-f]{16}$ ]]; then
    for arg in "$@"; do
        [[ "$arg" == --list || "$arg" == -Z* ]] && exec "$exe" "$@"
    done
    # A per-user directory of its own (XDG_CACHE_HOME: compiler identities, the Auto memo's
    # records of sources an in-process compiler failed on), removed after the run: what one
    # run's tests record (or a full disk made a compile fail) never steers a later run's.
    xdg=$(mktemp -d "${TMPDIR:-/tmp}/hipjit-test-xdg.XXXXXX")
    rc=0
    XDG_CACHE_HOME="$xdg" RUSTC_BOOTSTRAP=1 "$exe" "$@" -Z unstable-options --report-time || rc=$?
    rm -rf -- "$xdg"
    exit "$rc"
fi
exec "$exe" "$@"
