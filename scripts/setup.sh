#!/usr/bin/env bash
# Installs everything hipjit's test suite needs, idempotently:
#   1. Debian packages: Debian's HIP 5.2.3 toolchain and runtime (hipcc, libamdhip64), LLVM 15,
#      libclang for bindgen, debootstrap, unzip, jq, shellcheck, redis-server (the remote
#      cache tier's tests start their own servers on free ports and need no service), nginx-light
#      (its WebDAV module serves the HTTP store's tests, each starting its own server);
#   2. a Debian sid root filesystem with hipcc 7.0.2 / HIP 6.4.3 at $CACHE/sid-root;
#   3. the HIP header sets of the header-compatibility matrix (scripts/fetch-headers.sh);
#   4. nvcc and NVRTC from PyPI in a venv at $CACHE/nvcc-venv, for the NVIDIA-platform tests (no GPU);
#   5. maturin, pytest and numpy from PyPI in a venv at $CACHE/python-venv, for the Python
#      package (python/: scripts/build-wheel.sh, scripts/test-python.sh);
#   6. the ROCm inside PyPI's pytorch-triton-rocm 2.1.0 wheel (a real HIP 5.4.22803 runtime with
#      hipRTC inside it, hsa-runtime, comgr, HIP 5.4 headers) at $CACHE/rocm-5.4-triton, the
#      wheel's triton/third_party/rocm unpacked, never installed: the tests lay it out as
#      Python packages do (tests/real/python_rocm.rs);
#   7. the Rust toolchain of hipjit's stated minimum version (Cargo.toml's rust-version), minimal
#      profile, in a rustup home of its own at $CACHE/rustup (the test suite's msrv step).
# Downloads are cached under CACHE=${HIPJIT_CI_CACHE:-/var/cache/hipjit-ci}, so a rerun finds
# them; a rerun with everything in place only checks and returns in about a second.
#
# Usage: scripts/setup.sh [--only-compiler]
#   --only-compiler  install only Debian's hipcc and HIP runtime (what scripts/demo.sh needs);
#                    no sid root, no header sets.
# Environment: HIPJIT_CI_CACHE (cache directory), HIPJIT_SID_MIRROR (Debian mirror for the sid
# root, default http://deb.debian.org/debian).
# Needs root for apt-get, debootstrap and chroot; without it, it prints the commands to run.
set -euo pipefail

script_dir="$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")" && pwd -P)"
CACHE="${HIPJIT_CI_CACHE:-/var/cache/hipjit-ci}"
SID_MIRROR="${HIPJIT_SID_MIRROR:-http://deb.debian.org/debian}"

# What the tests need on the host (Debian 12 bookworm). hipcc pulls in clang-15, lld-15,
# rocm-device-libs and libamdhip64-dev; clang-15 pulls in libclang1-15, the libclang that
# bindgen loads at build time (libclang-15-dev is not needed). llvm-15 gives llvm-readelf-15.
# e2fsprogs (mkfs.ext4, debugfs) and bindfs (a FUSE filesystem) for the stat-trust tests.
TEST_PACKAGES=(hipcc libamdhip64-dev libamdhip64-5 rocm-device-libs llvm-15 clang-15
    libclang1-15 debootstrap unzip jq shellcheck python3-venv redis-server strace e2fsprogs
    bindfs time nginx-light)
# What compiling a kernel needs (Debian 12+, Ubuntu 24.04+): hipcc and the HIP runtime.
COMPILER_PACKAGES=(hipcc libamdhip64-dev)
# What the sid root filesystem holds: hipcc 7.0.2 over clang-21, HIP 6.4.3, llvm-readelf-21.
SID_PACKAGES=(hipcc libamdhip64-dev rocm-device-libs-21 llvm-21)
SID_MARKER=".hipjit-sid-root"

log() { printf 'setup: %s\n' "$*" >&2; }
die() { printf 'setup: error: %s\n' "$*" >&2; exit 1; }

# Runs "$@" and logs how long it took, in seconds. A failure inside ends the script (set -e,
# which a `cmd || ...` here would switch off for the whole function); the EXIT trap names it.
current_step=""
timed() {
    local name="$1" start
    shift
    start=$(date +%s)
    current_step="$name"
    log "[$name] start"
    "$@"
    current_step=""
    log "[$name] done in $(($(date +%s) - start)) s"
}
on_exit() {
    local rc=$?
    if ((rc != 0)) && [[ -n "$current_step" ]]; then
        log "[$current_step] FAILED (exit $rc)"
    fi
}
trap on_exit EXIT

is_root() { [[ $(id -u) -eq 0 ]]; }

# Prints the packages among "$@" that dpkg does not list as installed (under admin dir $ADMINDIR
# when set, e.g. the sid root's /var/lib/dpkg).
missing_packages() {
    local pkg status
    local -a admin=()
    [[ -n "${ADMINDIR:-}" ]] && admin=(--admindir="$ADMINDIR")
    for pkg in "$@"; do
        status=$(dpkg-query "${admin[@]}" -W -f='${Status}' "$pkg" 2>/dev/null || true)
        [[ "$status" == "install ok installed" ]] || printf '%s\n' "$pkg"
    done
}

apt_updated=0
install_debian_packages() {
    local -a missing
    if ! command -v dpkg-query >/dev/null 2>&1 || ! command -v apt-get >/dev/null 2>&1; then
        die "this machine has no apt-get/dpkg. hipjit's test suite runs on Debian 12 (bookworm); to only
compile kernels elsewhere, install ROCm from AMD (see scripts/README-setup.md)."
    fi
    mapfile -t missing < <(missing_packages "$@")
    if ((${#missing[@]} == 0)); then
        log "Debian packages present: $*"
        return 0
    fi
    if ! is_root; then
        printf 'setup: these Debian packages are missing: %s\n' "${missing[*]}" >&2
        printf 'setup: install them as root, then run this script again:\n' >&2
        printf '    sudo apt-get update && sudo apt-get install -y %s\n' "${missing[*]}" >&2
        exit 1
    fi
    # Debian's docker images delete /var/cache/apt/archives/*.deb after each install; keep the
    # downloaded packages in the cache instead, where a rerun on a fresh root finds them.
    local archives="$CACHE/apt-archives"
    mkdir -p "$archives/partial"
    if ((apt_updated == 0)); then
        DEBIAN_FRONTEND=noninteractive apt-get update -q
        apt_updated=1
    fi
    log "installing Debian packages: ${missing[*]}"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends \
        -o Dir::Cache::archives="$archives" "${missing[@]}"
}

# Records the versions of the sid root's packages in its marker file (rewritten only when they
# changed, so a rerun leaves the root untouched).
write_sid_marker() {
    local root="$1" content
    content=$(
        printf '# hipjit sid root filesystem: debootstrap --variant=minbase sid, then apt-get install %s\n' \
            "${SID_PACKAGES[*]}"
        dpkg-query --admindir="$root/var/lib/dpkg" -W -f='${Package} ${Version}\n' "${SID_PACKAGES[@]}" libamdhip64-6 2>/dev/null || true
    )
    if [[ ! -f "$root/$SID_MARKER" ]] || [[ "$(cat -- "$root/$SID_MARKER")" != "$content" ]]; then
        printf '%s\n' "$content" >"$root/$SID_MARKER.tmp"
        mv -f -- "$root/$SID_MARKER.tmp" "$root/$SID_MARKER"
        log "wrote $root/$SID_MARKER"
    fi
}

# Installs packages "$@" inside the root filesystem $root with its own apt, with /proc mounted
# and the package cache in $CACHE/sid-debs, in a private mount namespace.
sid_apt_install() {
    local root="$1"
    shift
    mkdir -p "$CACHE/sid-debs/partial"
    (cd / && bash "$script_dir/sid-run.sh" --root "$root" --no-repo \
        --bind-to "$CACHE/sid-debs" /var/cache/apt/archives \
        -e DEBIAN_FRONTEND=noninteractive -- \
        sh -c 'apt-get -q -o Acquire::Check-Valid-Until=false update &&
            apt-get install -y -q "$@"' sh "$@")
}

ensure_sid_root() {
    local root="$CACHE/sid-root" partial="$CACHE/sid-root.partial"
    local -a missing
    if [[ -x "$root/usr/bin/hipcc" ]]; then
        mapfile -t missing < <(ADMINDIR="$root/var/lib/dpkg" missing_packages "${SID_PACKAGES[@]}")
        if ((${#missing[@]} > 0)); then
            is_root || die "the sid root $root lacks ${missing[*]}; run this script as root"
            log "sid root: installing ${missing[*]}"
            sid_apt_install "$root" "${missing[@]}"
        fi
        write_sid_marker "$root"
        log "sid root present: $root ($(grep '^hipcc ' "$root/$SID_MARKER" || echo 'hipcc version unknown'))"
        return 0
    fi
    [[ -e "$root" ]] && die "$root exists but has no usr/bin/hipcc (an unfinished root made by \
hand?); remove it (rm -rf --one-file-system \"$root\") and run this script again"
    is_root || die "building the sid root filesystem needs root (debootstrap, chroot); run: sudo $0"
    command -v debootstrap >/dev/null 2>&1 || die "debootstrap is missing: apt-get install debootstrap"
    # A leftover of an interrupted build: debootstrap cannot resume into it, start again.
    if [[ -e "$partial" ]]; then
        log "removing the unfinished $partial"
        rm -rf --one-file-system -- "$partial"
    fi
    mkdir -p "$CACHE/debootstrap-cache"
    timed "debootstrap sid" debootstrap --variant=minbase \
        --cache-dir="$CACHE/debootstrap-cache" sid "$partial" "$SID_MIRROR"
    timed "sid apt-get install" sid_apt_install "$partial" "${SID_PACKAGES[@]}"
    [[ -x "$partial/usr/bin/hipcc" ]] || die "apt-get in $partial finished but usr/bin/hipcc is missing"
    write_sid_marker "$partial"
    mv -T -- "$partial" "$root"
    log "sid root ready: $root"
}

# nvcc and NVRTC for tests/it/nvcc_cubin.rs, tests/it/nvrtc*.rs: PyPI's nvidia-cuda-nvcc (with -crt,
# -runtime and nvidia-nvvm) and nvidia-cuda-nvrtc compile cubins on a machine without a GPU;
# NVRTC lands in nvidia/cu13/lib beside nvidia/cu13/bin/nvcc; nvidia-cuda-cccl brings
# <nv/target>, which cuda_fp16.h includes. The wheels stay in $CACHE/nvcc-wheels, so a fresh
# venv is made without downloading again.
NVCC_PACKAGES=(nvidia-cuda-nvcc==13.5.37 nvidia-cuda-crt==13.5.37 nvidia-cuda-runtime==13.5.37
    nvidia-cuda-nvrtc==13.5.37 nvidia-cuda-cccl==13.3.5.0.6)
ensure_nvcc() {
    local venv="$CACHE/nvcc-venv" wheels="$CACHE/nvcc-wheels" nvcc nvrtc
    nvcc=$(find "$venv/lib" -path '*/nvidia/cu*/bin/nvcc' -type f 2>/dev/null | head -n 1 || true)
    nvrtc=$(find "$venv/lib" -path '*/nvidia/cu*/lib/libnvrtc.so.*' -type f 2>/dev/null | head -n 1 || true)
    if [[ -n "$nvcc" && -n "$nvrtc" ]] && compgen -G "$venv/lib/*/site-packages/nvidia/cu*/include/nv/target" >/dev/null; then
        log "nvcc present: $nvcc; NVRTC present: $nvrtc"
        return 0
    fi
    [[ -x "$venv/bin/pip" ]] || python3 -m venv "$venv"
    if ! compgen -G "$wheels/nvidia_cuda_nvcc-*.whl" >/dev/null ||
        ! compgen -G "$wheels/nvidia_cuda_nvrtc-*.whl" >/dev/null ||
        ! compgen -G "$wheels/nvidia_cuda_cccl-*.whl" >/dev/null; then
        "$venv/bin/pip" download -q -d "$wheels" "${NVCC_PACKAGES[@]}"
    fi
    "$venv/bin/pip" install -q --no-index --find-links "$wheels" "${NVCC_PACKAGES[@]}"
    log "nvcc installed: $(find "$venv/lib" -path '*/nvidia/cu*/bin/nvcc' -type f | head -n 1)"
    log "NVRTC installed: $(find "$venv/lib" -path '*/nvidia/cu*/lib/libnvrtc.so.*' -type f | head -n 1)"
}

# What the Python package needs here: maturin builds the wheel (scripts/build-wheel.sh), pytest
# and numpy run its tests (scripts/test-python.sh, which installs them into a fresh venv from
# the same wheels, without the network). Versions pinned: the wheels stay in
# $CACHE/python-wheels.
PYTHON_PACKAGES=(maturin==1.16.0 pytest==9.2.0 numpy==2.4.6)
# The wheel carrying a real HIP 5.4 runtime, and where its ROCm is unpacked.
ROCM_WHEEL="pytorch-triton-rocm==2.1.0"
ROCM_WHEEL_DIR="rocm-5.4-triton"

ensure_rocm_wheel() {
    local dest="$CACHE/$ROCM_WHEEL_DIR" wheels="$CACHE/wheels" tmp
    local -a found
    if [[ -f "$dest/lib/libamdhip64.so" && -f "$dest/include/hip/hip_version.h" ]]; then
        log "HIP 5.4 runtime present: $dest/lib/libamdhip64.so"
        return 0
    fi
    shopt -s nullglob
    found=("$wheels"/pytorch_triton_rocm-2.1.0-*.whl)
    shopt -u nullglob
    if ((${#found[@]} == 0)); then
        mkdir -p "$wheels"
        tmp=$(mktemp -d "$wheels/.download.XXXXXX")
        # cp311 manylinux2014 is the build that carries the ROCm; the download is 169 MB.
        if ! python3 -m pip download --quiet --no-deps --only-binary=:all: --python-version 3.11 \
            --platform manylinux2014_x86_64 --dest "$tmp" "$ROCM_WHEEL" >&2; then
            rm -rf -- "$tmp"
            die "pip download $ROCM_WHEEL failed"
        fi
        shopt -s nullglob
        found=("$tmp"/pytorch_triton_rocm-2.1.0-*.whl)
        shopt -u nullglob
        ((${#found[@]} == 1)) || die "pip download $ROCM_WHEEL did not leave one wheel in $tmp"
        mv -f -- "${found[0]}" "$wheels/"
        rm -rf -- "$tmp"
        found=("$wheels/$(basename -- "${found[0]}")")
    fi
    tmp=$(mktemp -d "$CACHE/.$ROCM_WHEEL_DIR.XXXXXX")
    if ! unzip -q "${found[0]}" 'triton/third_party/rocm/*' -d "$tmp/wheel"; then
        rm -rf -- "$tmp"
        die "unzip of triton/third_party/rocm from ${found[0]} failed"
    fi
    [[ -f "$tmp/wheel/triton/third_party/rocm/lib/libamdhip64.so" ]] ||
        die "${found[0]} holds no triton/third_party/rocm/lib/libamdhip64.so"
    # rename(2) is atomic; an incomplete copy left by an interrupted run is replaced.
    [[ -e "$dest" ]] && rm -rf -- "${dest:?}"
    mv -T -- "$tmp/wheel/triton/third_party/rocm" "$dest"
    rm -rf -- "$tmp"
    log "HIP 5.4 runtime unpacked: $dest/lib/libamdhip64.so"
}

ensure_python_tools() {
    local venv="$CACHE/python-venv" wheels="$CACHE/python-wheels"
    if [[ -x "$venv/bin/maturin" && -x "$venv/bin/pytest" ]] &&
        "$venv/bin/python" -c 'import numpy' 2>/dev/null; then
        log "maturin present: $("$venv/bin/maturin" --version)"
        return 0
    fi
    [[ -x "$venv/bin/pip" ]] || python3 -m venv "$venv"
    if ! "$venv/bin/pip" download -q --no-index --find-links "$wheels" -d "$wheels" \
        "${PYTHON_PACKAGES[@]}" 2>/dev/null; then
        "$venv/bin/pip" download -q -d "$wheels" "${PYTHON_PACKAGES[@]}"
    fi
    "$venv/bin/pip" install -q --no-index --find-links "$wheels" "${PYTHON_PACKAGES[@]}"
    log "maturin installed: $("$venv/bin/maturin" --version)"
}

# The Rust toolchain of hipjit's `rust-version`, for scripts/test.sh's msrv step: installed by
# rustup (from static.rust-lang.org) with the minimal profile (rustc, cargo, the standard
# library: about 70 MB) into RUSTUP_HOME=$CACHE/rustup, so that it stays with the other
# downloads and the user's own rustup settings are untouched. The step runs
# $CACHE/rustup/toolchains/<version>-<host>/bin/cargo directly.
ensure_msrv_toolchain() {
    local version home="$CACHE/rustup" rustup_bin
    version=$(msrv_version)
    if [[ -x "$(msrv_toolchain_dir "$version")/bin/cargo" ]]; then
        log "Rust $version present: $(msrv_toolchain_dir "$version")"
        return 0
    fi
    rustup_bin=$(command -v rustup || echo "${HOME:-/root}/.cargo/bin/rustup")
    [[ -x "$rustup_bin" ]] || die "rustup not found: it installs the Rust $version toolchain"
    RUSTUP_HOME="$home" "$rustup_bin" toolchain install "$version" --profile minimal \
        --no-self-update
    log "Rust $version installed: $(msrv_toolchain_dir "$version")"
}
# hipjit's rust-version, from the checkout's Cargo.toml (`rust-version = "1.87"` -> 1.87.0).
msrv_version() {
    local v
    v=$(sed -n 's/^rust-version = "\([0-9.]*\)"$/\1/p' "$script_dir/../Cargo.toml" | head -n 1)
    [[ -n "$v" ]] || die "no rust-version in $script_dir/../Cargo.toml"
    [[ "$v" =~ ^[0-9]+\.[0-9]+$ ]] && v="$v.0"
    echo "$v"
}
msrv_toolchain_dir() { echo "$CACHE/rustup/toolchains/$1-$(uname -m)-unknown-linux-gnu"; }

main() {
    local only_compiler=0
    while (($# > 0)); do
        case "$1" in
        --only-compiler) only_compiler=1 ;;
        -h | --help)
            sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed '$d; s/^# \{0,1\}//'
            return 0
            ;;
        *) die "unknown argument: $1 (see --help)" ;;
        esac
        shift
    done
    if ((only_compiler)); then
        timed "Debian packages" install_debian_packages "${COMPILER_PACKAGES[@]}"
        return 0
    fi
    if [[ -r /etc/os-release ]] && ! grep -qx 'VERSION_CODENAME=bookworm' /etc/os-release; then
        log "warning: the test suite's expectations were measured on Debian 12 (bookworm);" \
            "this is $(sed -n 's/^PRETTY_NAME=//p' /etc/os-release | tr -d '"')"
    fi
    if is_root; then
        mkdir -p "$CACHE"
    fi
    # fetch-headers.sh downloads wheels with `python3 -m pip download`: take Debian's pip when
    # this machine's python3 has none.
    local -a packages=("${TEST_PACKAGES[@]}")
    if ! python3 -m pip --version >/dev/null 2>&1; then
        packages+=(python3-pip)
    fi
    timed "Debian packages" install_debian_packages "${packages[@]}"
    timed "sid root" ensure_sid_root
    timed "header sets" bash "$script_dir/fetch-headers.sh"
    timed "nvcc and NVRTC (PyPI)" ensure_nvcc
    timed "maturin, pytest, numpy (PyPI)" ensure_python_tools
    timed "HIP 5.4 runtime ($ROCM_WHEEL, PyPI)" ensure_rocm_wheel
    timed "Rust $(msrv_version) (rustup)" ensure_msrv_toolchain
}

main "$@"
