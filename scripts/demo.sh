#!/usr/bin/env bash
# hipjit's main job in one command, no GPU needed: compiles the example kernel
# examples/kernels/saxpy.hip for gfx90a through hipjit's code-object cache and shows its kernels,
# their arguments and resources: twice, the first a cache miss (hipcc runs), the second a hit.
# When no hipcc is found and this runs as root on Debian 12+/Ubuntu 24.04+, it first installs
# Debian's hipcc and HIP runtime (scripts/setup.sh --only-compiler); not as root, it prints the
# apt-get command to run. Elsewhere see scripts/README-setup.md.
#
# Usage: scripts/demo.sh [--arch TARGET] [HIP FILE]   (defaults: gfx90a, examples/kernels/saxpy.hip)
# The demo's code-object cache is a fresh temporary directory, removed at the end, so the first
# compile is always a miss.
set -euo pipefail

script_dir="$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")" && pwd -P)"
repo="$(dirname -- "$script_dir")"
# A FILE argument is relative to where the demo was started, not to the repository.
caller_dir="$PWD"
cd -- "$repo"

die() {
    printf 'demo: error: %s\n' "$*" >&2
    exit 1
}

# Whether a hipcc that hipjit's discovery would find is installed.
have_hipcc() {
    local dir
    command -v hipcc >/dev/null 2>&1 && return 0
    for dir in "${HIP_PATH:-}" "${ROCM_PATH:-}" /opt/rocm /opt/rocm-*; do
        [[ -n "$dir" && -x "$dir/bin/hipcc" ]] && return 0
    done
    return 1
}

main() {
    local arch=gfx90a file=examples/kernels/saxpy.hip
    while (($# > 0)); do
        case "$1" in
        --arch)
            (($# >= 2)) || die "--arch needs a target ID, e.g. gfx90a or gfx942:sramecc+:xnack-"
            arch="$2"
            shift 2
            ;;
        -h | --help)
            sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed '$d; s/^# \{0,1\}//'
            return 0
            ;;
        -*) die "unknown option: $1 (see --help)" ;;
        *)
            if [[ "$1" == /* ]]; then file="$1"; else file="$caller_dir/$1"; fi
            shift
            ;;
        esac
    done
    [[ -f "$file" ]] || die "no such file: $file"

    if ! have_hipcc; then
        echo "demo: no hipcc found (PATH, \$HIP_PATH, \$ROCM_PATH, /opt/rocm, /opt/rocm-*): installing Debian's"
        bash "$script_dir/setup.sh" --only-compiler
    fi
    if ! command -v cargo >/dev/null 2>&1; then
        [[ -x "${HOME:-/root}/.cargo/bin/cargo" ]] || die "cargo is missing: install Rust (https://rustup.rs), then run this again"
        PATH="${HOME:-/root}/.cargo/bin:$PATH"
    fi

    echo "demo: building the hipjit command: cargo build --release --features cli --bin hipjit"
    cargo build --release --features cli --bin hipjit
    # Global, not local: the EXIT trap runs after main has returned.
    demo_cache=$(mktemp -d "${TMPDIR:-/tmp}/hipjit-demo-cache.XXXXXX")
    trap 'rm -rf -- "$demo_cache"' EXIT
    export HIPJIT_CACHE_DIR="$demo_cache"

    local round
    for round in "first (a cache miss: hipcc compiles)" "second (a cache hit: no compiler run)"; do
        printf '\ndemo: %s run:\n$ hipjit compile %q --arch %q\n' "$round" "$file" "$arch"
        cargo run --quiet --release --features cli --bin hipjit -- compile "$file" --arch "$arch"
    done
}

main "$@"
