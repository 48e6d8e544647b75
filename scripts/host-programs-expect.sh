#!/usr/bin/env bash
# Writes tests/data/host-programs/EXPECTED: which sources of that corpus bare hipcc compiles,
# device code for one target, on each toolchain of the test suite: Debian 12's hipcc 5.2.3 for
# gfx90a on this host, and hipcc 7.0.2 for gfx942 inside the Debian sid root (scripts/sid-run.sh).
# The command is the one the examples' own builds would give the device side:
#   hipcc -x hip --genco --offload-arch=TARGET -std=c++17 -I common -o OUT SOURCE
# tests/real/host_programs.rs reads the list and checks that hipjit's default compiler choice
# compiles every source listed as `ok` for its toolchain; this script is the list's only
# source, so the suite runs no bare hipcc itself.
#
# Usage: scripts/host-programs-expect.sh           rewrite the list
#        scripts/host-programs-expect.sh --check   compare with the checked-in list (exit 1 when
#                                                  it differs)
# Needs root for the sid root (unshare, chroot), as scripts/sid-run.sh does.
set -euo pipefail

script_dir="$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")" && pwd -P)"
corpus="$(dirname -- "$script_dir")/tests/data/host-programs"

# Inside one toolchain: `SOURCE ok` or `SOURCE fails` for each source, in name order.
compile_all() {
    local target="$1" out f
    out="$(mktemp -d)"
    cd -- "$corpus"
    for f in *.hip *.cpp; do
        if hipcc -x hip --genco --offload-arch="$target" -std=c++17 -I common \
            -o "$out/$f.co" "$f" >"$out/$f.log" 2>&1; then
            printf '%s ok\n' "$f"
        else
            printf '%s fails\n' "$f"
        fi
    done
    rm -rf -- "$out"
}

main() {
    if [[ "${1:-}" == --inside ]]; then
        compile_all "$2"
        return
    fi
    local check=0 bookworm sid table
    [[ "${1:-}" == --check ]] && check=1
    bookworm="$(compile_all gfx90a | sort)"
    sid="$(bash "$script_dir/sid-run.sh" -- bash "$script_dir/host-programs-expect.sh" --inside gfx942 | sort)"
    table="$(
        printf '# Which sources bare hipcc compiles (device code, one target), written by\n'
        printf '# scripts/host-programs-expect.sh:\n'
        printf '#   hipcc -x hip --genco --offload-arch=TARGET -std=c++17 -I common -o OUT SOURCE\n'
        printf '# source\tbookworm gfx90a (hipcc 5.2.3)\tsid gfx942 (hipcc 7.0.2)\n'
        join <(printf '%s\n' "$bookworm") <(printf '%s\n' "$sid") | tr ' ' '\t'
    )"
    if ((check)); then
        if ! diff <(printf '%s\n' "$table") "$corpus/EXPECTED"; then
            echo "host-programs-expect: tests/data/host-programs/EXPECTED differs from what hipcc does now (above)" >&2
            return 1
        fi
        echo "host-programs-expect: tests/data/host-programs/EXPECTED holds"
    else
        printf '%s\n' "$table" >"$corpus/EXPECTED"
        echo "host-programs-expect: wrote tests/data/host-programs/EXPECTED ($(grep -vc '^#' "$corpus/EXPECTED") sources)"
    fi
}

main "$@"
