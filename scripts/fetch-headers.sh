#!/usr/bin/env bash
# Makes the HIP header sets of hipjit's header-compatibility matrix, each at
# $CACHE/headers/<name>/include (CACHE=${HIPJIT_CI_CACHE:-/var/cache/hipjit-ci}):
#   hip-7.1-triton  HIP 7.1 headers from PyPI's triton 3.9.0 wheel (triton/backends/amd/include)
#   hip-6.2-triton  HIP 6.2 headers from PyPI's triton 3.4.0 wheel
#   hip-6.1-triton  HIP 6.1 headers from PyPI's triton 3.2.0 wheel
#   hip-5.2-debian  a symlink to /usr/include (Debian bookworm's libamdhip64-dev 5.2.3)
#   hip-6.4-sid     a symlink to the sid root filesystem's /usr/include (HIP 6.4.3)
# The wheels are downloaded once (pip download --no-deps, never installed) into $CACHE/wheels
# and unpacked into a temporary directory that is renamed into place when complete, so a set
# that exists is whole. A rerun with everything in place only checks. Prints one line per set:
# name, include directory, HIP version (from hip/hip_version.h).
#
# Usage: scripts/fetch-headers.sh
set -euo pipefail

CACHE="${HIPJIT_CI_CACHE:-/var/cache/hipjit-ci}"
HEADERS="$CACHE/headers"
WHEELS="$CACHE/wheels"
# name  triton version
TRITON_SETS=("hip-7.1-triton 3.9.0" "hip-6.2-triton 3.4.0" "hip-6.1-triton 3.2.0")

log() { printf 'fetch-headers: %s\n' "$*" >&2; }
die() {
    printf 'fetch-headers: error: %s\n' "$*" >&2
    exit 1
}

# Whether directory $1 holds a HIP header set.
is_header_set() { [[ -f "$1/hip/hip_runtime_api.h" && -f "$1/hip/hip_version.h" ]]; }

# Prints HIP_VERSION_MAJOR.MINOR.PATCH of the set in directory $1.
hip_version() {
    local f="$1/hip/hip_version.h" major minor patch
    major=$(sed -n 's/^#define HIP_VERSION_MAJOR \([0-9]*\).*/\1/p' "$f")
    minor=$(sed -n 's/^#define HIP_VERSION_MINOR \([0-9]*\).*/\1/p' "$f")
    patch=$(sed -n 's/^#define HIP_VERSION_PATCH \([0-9]*\).*/\1/p' "$f")
    printf '%s.%s.%s\n' "${major:-?}" "${minor:-?}" "${patch:-?}"
}

# Prints the path of the cached wheel of PyPI package $1 (as pip names the file: dashes become
# underscores) at version $2, downloading it first when missing; further arguments go to pip
# download (a platform or Python version for a wheel not built for this one).
cached_wheel() {
    local package="$1" version="$2" tmp file
    shift 2
    local -a found
    file=${package//-/_}
    shopt -s nullglob
    found=("$WHEELS/$file-$version-"*.whl)
    shopt -u nullglob
    if ((${#found[@]} == 0)); then
        command -v python3 >/dev/null 2>&1 || die "python3 is missing (needed for pip download)"
        python3 -m pip --version >/dev/null 2>&1 ||
            die "pip is missing: apt-get install python3-pip (used only to download wheels)"
        mkdir -p "$WHEELS"
        tmp=$(mktemp -d "$WHEELS/.download.XXXXXX")
        log "downloading $package==$version (unpacked in part; not installed)"
        if ! python3 -m pip download --quiet --no-deps --only-binary=:all: "$@" \
            --dest "$tmp" "$package==$version" >&2; then
            rm -rf -- "$tmp"
            die "pip download $package==$version failed"
        fi
        shopt -s nullglob
        found=("$tmp/$file-$version-"*.whl)
        shopt -u nullglob
        ((${#found[@]} == 1)) || die "pip download $package==$version did not leave one wheel in $tmp"
        mv -f -- "${found[0]}" "$WHEELS/"
        rm -rf -- "$tmp"
        found=("$WHEELS/$(basename -- "${found[0]}")")
    fi
    printf '%s\n' "${found[0]}"
}

# Prints the path of the cached triton wheel of version $1, downloading it first when missing.
triton_wheel() { cached_wheel triton "$1"; }

# Unpacks triton/backends/amd/include of triton $2's wheel into $HEADERS/$1/include.
unpack_triton_set() {
    local name="$1" version="$2" wheel tmp
    is_header_set "$HEADERS/$name/include" && return 0
    wheel=$(triton_wheel "$version")
    mkdir -p "$HEADERS"
    tmp=$(mktemp -d "$HEADERS/.$name.XXXXXX")
    log "unpacking $name from $(basename -- "$wheel")"
    if ! unzip -q "$wheel" 'triton/backends/amd/include/*' -d "$tmp/wheel"; then
        rm -rf -- "$tmp"
        die "unzip of triton/backends/amd/include from $wheel failed"
    fi
    mkdir -p "$tmp/set"
    mv -- "$tmp/wheel/triton/backends/amd/include" "$tmp/set/include"
    if ! is_header_set "$tmp/set/include"; then
        rm -rf -- "$tmp"
        die "$wheel holds no HIP header set under triton/backends/amd/include"
    fi
    # rename(2) is atomic; an incomplete set left by an interrupted run is replaced.
    [[ -e "$HEADERS/$name" ]] && rm -rf -- "${HEADERS:?}/${name:?}"
    mv -T -- "$tmp/set" "$HEADERS/$name"
    rm -rf -- "$tmp"
}

# Makes $HEADERS/$1/include a symlink to directory $2 (replaced atomically when it differs).
link_set() {
    local name="$1" target="$2"
    if ! is_header_set "$target"; then
        log "skipping $name: no HIP headers in $target"
        return 0
    fi
    [[ "$(readlink -- "$HEADERS/$name/include" 2>/dev/null || true)" == "$target" ]] && return 0
    mkdir -p "$HEADERS/$name"
    ln -sfn -- "$target" "$HEADERS/$name/.include.tmp"
    mv -T -- "$HEADERS/$name/.include.tmp" "$HEADERS/$name/include"
}

main() {
    local entry name version
    case "${1:-}" in
    -h | --help)
        sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed '$d; s/^# \{0,1\}//'
        return 0
        ;;
    "") ;;
    *) die "unknown argument: $1 (see --help)" ;;
    esac
    command -v unzip >/dev/null 2>&1 || die "unzip is missing: apt-get install unzip"
    for entry in "${TRITON_SETS[@]}"; do
        read -r name version <<<"$entry"
        unpack_triton_set "$name" "$version"
    done
    link_set hip-5.2-debian /usr/include
    link_set hip-6.4-sid "$CACHE/sid-root/usr/include"
    for name in hip-5.2-debian hip-6.1-triton hip-6.2-triton hip-6.4-sid hip-7.1-triton; do
        if is_header_set "$HEADERS/$name/include"; then
            printf '%-16s %s HIP %s\n' "$name" "$HEADERS/$name/include" "$(hip_version "$HEADERS/$name/include")"
        fi
    done
}

main "$@"
