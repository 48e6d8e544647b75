#!/usr/bin/env bash
# Header-compatibility matrix: builds hip-sys, checks hipjit (library) and runs hip-sys's tests
# against every HIP header set this project can get, and against none at all.
#
#   hip-5.2-debian   /usr/include (Debian bookworm libamdhip64-dev 5.2.3), found by hip-sys's
#                    own discovery (no variable set)
#   hip-6.1-triton   HIP 6.1 headers of PyPI's triton 3.2.0 wheel
#   hip-6.2-triton   HIP 6.2 headers of PyPI's triton 3.4.0 wheel
#   hip-6.4-sid      HIP 6.4.3 headers of the Debian sid root filesystem (hip/ only: see below)
#   hip-7.1-triton   HIP 7.1 headers of PyPI's triton 3.9.0 wheel
#   hip-7.2-overlay  the HIP 7.1 set plus scripts/header-overlay/hip-7.2/hip_runtime_api.h,
#                    which declares the two library-API functions HIP 7.1 lacks (a ROCm 7.2+
#                    stand-in; the header says how it is stacked)
#   none             no headers anywhere: in a private mount namespace (unshare -m) a tmpfs
#                    hides /usr/include/hip (and /opt/rocm*/include/hip), /dev/null is bound
#                    over every hipcc/hipconfig on PATH, HIP_PATH/ROCM_PATH are unset; hip-sys
#                    must fall back to its pregenerated bindings and warn, listing what it tried
#
# For each set it checks:
#   - zero warnings in cargo's output (for `none`: only hip-sys's "no HIP headers found"
#     warning, which must name every candidate of the search);
#   - the hip_api_* cfg flags hip-sys emitted, and those hipjit's build.rs re-emitted, equal
#     the declaration inventory of the set, taken from the header text itself (a
#     `hipError_t NAME(` declaration under hip/, or one of a macro `#define ALIAS NAME`); for
#     `none`, the inventory of the set the pregenerated bindings were made from;
#   - the library API matches the expected table (5.2, 6.1, 6.2, 6.4: none; 7.1: LoadData,
#     LoadFromFile, Unload, GetKernel, GetKernelCount; overlay: all seven);
#   - for the set the pregenerated bindings come from, that they are still what it gives;
#   - `cargo test -p hipjit-sys` passes: device-property layouts against the set's structs (as
#     bindgen and as a C++ compiler see them), the API contract, the build-script tests; for
#     hip-5.2-debian also `--features link --test linked_runtime` (linking the real runtime).
# It builds hipjit's runtime probe (examples/runtime_probe.rs) against each set, and at the end
# scripts/runtime-matrix.sh runs every set's probe against every runtime shape (the header x
# runtime matrix; its own header says what each cell must show).
# All sets share one target directory (target/header-matrix); each set rebuilds hip-sys and
# what depends on it, nothing else. Prints a table; exits non-zero when any set fails.
#
# The sid root's /usr/include is a whole system include directory (glibc 2.41, libstdc++,
# clang-21 headers): handed to libclang-15 with -isystem it would shadow the host's C library
# headers (`bits/stdint-least.h` not found). What the matrix tests is the HIP headers, so it
# uses a directory holding only `hip -> <sid>/usr/include/hip` (built under the target dir).
#
# Usage: scripts/header-matrix.sh [SET...]   (default: all, in the order above)
# Environment: HIPJIT_CI_CACHE (default /var/cache/hipjit-ci; header sets under headers/, made
# by scripts/fetch-headers.sh), HEADER_MATRIX_TARGET_DIR (default <repo>/target/header-matrix).
set -uo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
CACHE=${HIPJIT_CI_CACHE:-/var/cache/hipjit-ci}
HEADERS=$CACHE/headers
TARGET=${HEADER_MATRIX_TARGET_DIR:-$ROOT/target/header-matrix}
LOGS=$TARGET/logs
PROBES=$TARGET/probes
VIEWS=$TARGET/sets
OVERLAY_SRC=$ROOT/scripts/header-overlay/hip-7.2/hip_runtime_api.h
PREGENERATED=$ROOT/hip-sys/pregenerated/hip_runtime_api.rs
ALL_SETS=(hip-5.2-debian hip-6.1-triton hip-6.2-triton hip-6.4-sid hip-7.1-triton hip-7.2-overlay none)
LIBRARY_APIS=(hipLibraryLoadData hipLibraryLoadFromFile hipLibraryUnload hipLibraryGetKernel
    hipLibraryGetKernelCount hipLibraryEnumerateKernels hipKernelGetFunction)

die() {
    printf 'header-matrix: error: %s\n' "$*" >&2
    exit 2
}

# The probed APIs, read from hip-sys's build script (the one list).
mapfile -t PROBED < <(sed -n '/^pub const PROBED_APIS/,/^];/p' "$ROOT/hip-sys/build/probe.rs" |
    sed -n 's/^ *"\(hip[A-Za-z0-9_]*\)",$/\1/p')
((${#PROBED[@]} > 0)) || die "could not read PROBED_APIS from hip-sys/build/probe.rs"

# hipLibraryEnumerateKernels -> hip_api_library_enumerate_kernels (the naming rule of the
# contract, applied independently of hip-sys's own code).
cfg_name() {
    printf 'hip_api_%s\n' "$(printf '%s' "${1#hip}" |
        sed -E 's/([a-z0-9])([A-Z])/\1_\2/g; s/([A-Z])([A-Z][a-z])/\1_\2/g' | tr '[:upper:]' '[:lower:]')"
}

# Expected library API (the table of the issue), as the list of declared names.
expected_library_api() {
    case "$1" in
    hip-5.2-debian | hip-6.1-triton | hip-6.2-triton | hip-6.4-sid) ;;
    hip-7.1-triton | none) printf '%s\n' "${LIBRARY_APIS[@]:0:5}" ;;
    hip-7.2-overlay) printf '%s\n' "${LIBRARY_APIS[@]}" ;;
    esac
}

# Declared probed APIs of header directory $1, from the header text: a line
# `hipError_t NAME(` in a header under hip/ (NVIDIA platform headers excluded: hip-sys parses
# for AMD), NAME being the API or a macro alias of it (`#define hipGetDeviceProperties
# hipGetDevicePropertiesR0600` + `hipError_t hipGetDeviceProperties(`).
inventory() {
    local dir=$1 api alias
    local -a files
    mapfile -t files < <(find -L "$dir/hip" -path '*/nvidia_detail' -prune -o -type f \
        \( -name '*.h' -o -name '*.hpp' \) -print)
    for api in "${PROBED[@]}"; do
        if grep -qE "^[[:space:]]*hipError_t[[:space:]]+${api}[[:space:]]*\(" "${files[@]}"; then
            echo "$api"
            continue
        fi
        while read -r alias; do
            if grep -qE "^[[:space:]]*hipError_t[[:space:]]+${alias}[[:space:]]*\(" "${files[@]}"; then
                echo "$api"
                break
            fi
        done < <(sed -nE "s/^[[:space:]]*#[[:space:]]*define[[:space:]]+([A-Za-z_][A-Za-z0-9_]*)[[:space:]]+${api}[[:space:]]*$/\1/p" "${files[@]}")
    done
}

hip_version() {
    awk '$1 == "#define" && $2 ~ /^HIP_VERSION_(MAJOR|MINOR|PATCH)$/ { v[$2] = $3 }
        END { print v["HIP_VERSION_MAJOR"] "." v["HIP_VERSION_MINOR"] "." v["HIP_VERSION_PATCH"] }' \
        "$1/hip/hip_version.h"
}

set_dir() { printf '%s/%s/include\n' "$HEADERS" "$1"; }

# hip/ of the sid root only (see the header of this script).
make_sid_view() {
    local src view=$VIEWS/hip-6.4-sid/include
    src=$(set_dir hip-6.4-sid)
    [[ -f $src/hip/hip_runtime_api.h ]] || src=$CACHE/sid-root/usr/include
    [[ -f $src/hip/hip_runtime_api.h ]] || return 1
    mkdir -p "$view"
    ln -sfn "$(readlink -f "$src/hip")" "$view/hip"
    printf '%s\n' "$view"
}

# $HEADERS/hip-7.2-overlay/include: every entry of the 7.1 set as a symlink, hip/ a directory
# of symlinks to 7.1's hip/ files except hip_runtime_api.h, which is the overlay (including
# 7.1's original as hip_runtime_api.hip-7.1.h). Rebuilt (atomically) when the overlay changed.
make_overlay() {
    local base dest=$HEADERS/hip-7.2-overlay tmp entry
    base=$(set_dir hip-7.1-triton)
    [[ -f $base/hip/hip_runtime_api.h ]] || return 1
    base=$(readlink -f "$base")
    if cmp -s "$OVERLAY_SRC" "$dest/include/hip/hip_runtime_api.h" &&
        [[ $(readlink "$dest/include/hip/hip_runtime_api.hip-7.1.h") == "$base/hip/hip_runtime_api.h" ]]; then
        printf '%s\n' "$dest/include"
        return 0
    fi
    mkdir -p "$HEADERS"
    tmp=$(mktemp -d "$HEADERS/.hip-7.2-overlay.XXXXXX") || return 1
    mkdir -p "$tmp/include/hip"
    for entry in "$base"/*; do
        [[ $(basename "$entry") == hip ]] || ln -s "$entry" "$tmp/include/"
    done
    for entry in "$base"/hip/*; do
        ln -s "$entry" "$tmp/include/hip/"
    done
    rm "$tmp/include/hip/hip_runtime_api.h"
    ln -s "$base/hip/hip_runtime_api.h" "$tmp/include/hip/hip_runtime_api.hip-7.1.h"
    cp "$OVERLAY_SRC" "$tmp/include/hip/hip_runtime_api.h"
    [[ -e $dest ]] && rm -rf -- "$dest"
    mv -T "$tmp" "$dest"
    printf '%s\n' "$dest/include"
}

# Runs "$@" with the environment of set $1 (HIP_INCLUDE_DIR=$2 unless empty).
run_in_set() {
    local set=$1 dir=$2
    shift 2
    local -a clean=(env -u HIP_PATH -u ROCM_PATH -u HIP_INCLUDE_DIR -u HIP_SYS_BINDINGS
        -u CPATH -u C_INCLUDE_PATH -u CPLUS_INCLUDE_PATH -u BINDGEN_EXTRA_CLANG_ARGS)
    if [[ $set == none ]]; then
        # shellcheck disable=SC2016 # expanded by the inner shell
        unshare -m bash -c '
            set -e
            for d in /usr/include/hip /opt/rocm*/include/hip; do
                [ -d "$d" ] && mount -t tmpfs tmpfs "$d"
            done
            IFS=:
            for p in $PATH; do
                for t in "$p/hipcc" "$p/hipconfig"; do
                    [ -e "$t" ] && mount --bind /dev/null "$t"
                done
            done
            unset IFS
            exec "$@"' bash "${clean[@]}" "$@"
    elif [[ -n $dir ]]; then
        "${clean[@]}" HIP_INCLUDE_DIR="$dir" "$@"
    else
        "${clean[@]}" "$@"
    fi
}

# cfgs of package $2's build script from cargo JSON messages in file $1 (hip_api_* only).
cfgs_of() {
    grep '"reason":"build-script-executed"' "$1" | grep "\"package_id\":\"[^\"]*$2" |
        tail -n 1 | sed -n 's/.*"cfgs":\[\([^]]*\)\].*/\1/p' | tr ',' '\n' | tr -d '"' |
        grep '^hip_api_' | sort
}

out_dir_of() {
    grep '"reason":"build-script-executed"' "$1" | grep "\"package_id\":\"[^\"]*$2" |
        tail -n 1 | sed -n 's/.*"out_dir":"\([^"]*\)".*/\1/p'
}

# Warning lines of cargo's rendered output in file $1, minus `allowed` (a fixed string).
warnings_in() {
    local allowed=${2:-}
    grep -E '^warning' "$1" | { if [[ -n $allowed ]]; then grep -vF "$allowed"; else cat; fi; } |
        grep -vE '^warning: .[^ ]+. \(.*\) generated [0-9]+ warnings?' || true
}

# The lines of $1 joined by spaces.
words() { tr '\n' ' ' <<<"$1" | sed 's/ $//'; }

mark() { if grep -qx "$1" <<<"$2"; then printf '%-5s' y; else printf '%-5s' -; fi; }

declare -a ROWS=()
FAILED=0

check_set() {
    local set=$1 dir="" inv_dir="" version bindings="generated" t0 t1 problems=() api
    local log=$LOGS/$set
    t0=$(date +%s)
    case $set in
    hip-5.2-debian) inv_dir=$(set_dir "$set"); [[ -f $inv_dir/hip/hip_runtime_api.h ]] || inv_dir=/usr/include ;;
    hip-6.1-triton | hip-6.2-triton | hip-7.1-triton) dir=$(set_dir "$set"); inv_dir=$dir ;;
    hip-6.4-sid) dir=$(make_sid_view) || dir=""; inv_dir=$dir ;;
    hip-7.2-overlay) dir=$(make_overlay) || dir=""; inv_dir=$dir ;;
    none)
        if ! unshare -m true 2>/dev/null; then
            ROWS+=("$set|?|pregenerated|cannot hide the headers: unshare -m needs root|FAIL|0")
            FAILED=1
            return
        fi
        bindings=pregenerated
        local pinned
        pinned=$(sed -n 's|^// Header set: \([^,]*\),.*|\1|p' "$PREGENERATED")
        inv_dir=$(set_dir "$pinned")
        ;;
    *) die "unknown set $set (sets: ${ALL_SETS[*]})" ;;
    esac
    if [[ -z $inv_dir || ! -f $inv_dir/hip/hip_runtime_api.h ]]; then
        ROWS+=("$set|?|?|missing: run scripts/fetch-headers.sh|FAIL|0")
        FAILED=1
        return
    fi
    version=$(hip_version "$inv_dir")
    local inv expected_cfgs
    inv=$(inventory "$inv_dir")
    expected_cfgs=$(for api in $inv; do cfg_name "$api"; done | sort)

    # Each set starts from a fresh hip-sys build: cargo reruns a build script only when its
    # inputs' file times move forward, and the `none` set hides /usr/include/hip in a private
    # mount namespace, after which the real (older) files look unchanged and a stale probe of
    # the hidden state would be reused by the next set.
    if ! cargo clean -q -p hipjit-sys --target-dir "$TARGET" >"$log.clean.txt" 2>&1; then
        ROWS+=("$set|?|?|cargo clean -p hipjit-sys failed: see $log.clean.txt|FAIL|0")
        FAILED=1
        return
    fi
    # Build hipjit's runtime probe against the set (hip-sys, hipjit's library compiled with the
    # set's bindings and cfgs), kept for scripts/runtime-matrix.sh; then build and run hip-sys's
    # tests.
    run_in_set "$set" "$dir" cargo build -p hipjit --example runtime_probe --target-dir "$TARGET" \
        --message-format=json-render-diagnostics >"$log.build.json" 2>"$log.build.txt"
    local build_rc=$?
    rm -rf -- "${PROBES:?}/$set"
    if ((build_rc == 0)); then
        mkdir -p "$PROBES/$set" && cp -- "$TARGET/debug/examples/runtime_probe" "$PROBES/$set/"
    fi
    run_in_set "$set" "$dir" cargo test -p hipjit-sys --target-dir "$TARGET" >"$log.test.txt" 2>&1
    local test_rc=$?
    if [[ $set == hip-5.2-debian ]]; then
        # Feature `link`: the declarations link against the installed runtime (HIP 5.2.3).
        run_in_set "$set" "$dir" cargo test -p hipjit-sys --features link --test linked_runtime \
            --target-dir "$TARGET" >>"$log.test.txt" 2>&1 || test_rc=1
    fi
    ((build_rc == 0)) || problems+=("build failed (see $log.build.txt)")
    ((test_rc == 0)) || problems+=("hip-sys tests failed (see $log.test.txt)")

    local sys_cfgs jit_cfgs out_dir
    sys_cfgs=$(cfgs_of "$log.build.json" "hipjit-sys")
    jit_cfgs=$(cfgs_of "$log.build.json" "hipjit")
    out_dir=$(out_dir_of "$log.build.json" "hipjit-sys")
    [[ $sys_cfgs == "$expected_cfgs" ]] ||
        problems+=("hip-sys cfgs [$(words "$sys_cfgs")] != inventory [$(words "$expected_cfgs")]")
    [[ $jit_cfgs == "$expected_cfgs" ]] ||
        problems+=("hipjit cfgs [$(words "$jit_cfgs")] != inventory [$(words "$expected_cfgs")]")
    local lib_declared lib_expected
    lib_declared=$(for api in "${LIBRARY_APIS[@]}"; do grep -qx "$api" <<<"$inv" && echo "$api"; done)
    lib_expected=$(expected_library_api "$set")
    [[ $lib_declared == "$lib_expected" ]] ||
        problems+=("library API [$(words "$lib_declared")] != expected [$(words "$lib_expected")]")

    # What hip-sys says it used (links metadata in its build script output).
    local meta=""
    [[ -n $out_dir && -f $out_dir/../output ]] && meta=$(grep '^cargo::metadata=' "$out_dir/../output")
    grep -qx "cargo::metadata=bindings=$bindings" <<<"$meta" ||
        problems+=("hip-sys did not use $bindings bindings")
    if [[ $set == hip-5.2-debian ]]; then
        grep -qx "cargo::metadata=include_dir=/usr/include" <<<"$meta" ||
            problems+=("discovery did not find /usr/include")
    elif [[ -n $dir ]]; then
        grep -qxF "cargo::metadata=include_dir=$dir" <<<"$meta" ||
            problems+=("hip-sys did not use $dir")
    fi

    # The committed pregenerated bindings must be what the pinned set gives today.
    local pinned_set
    pinned_set=$(sed -n 's|^// Header set: \([^,]*\),.*|\1|p' "$PREGENERATED")
    if [[ $set == "$pinned_set" && -n $out_dir ]]; then
        tail -n +6 "$PREGENERATED" | cmp -s - "$out_dir/bindings.rs" ||
            problems+=("hip-sys/pregenerated is stale: run scripts/gen-pregenerated.sh")
    fi

    local allowed="" warns
    if [[ $set == none ]]; then
        allowed="warning: hipjit-sys@"
        local notice
        notice=$(grep -F "warning: hipjit-sys@" "$log.build.txt" | head -n 1)
        [[ $notice == *"no HIP headers found"* ]] || problems+=("no 'no HIP headers found' warning")
        for c in HIP_INCLUDE_DIR HIP_PATH ROCM_PATH "hipconfig/hipcc on PATH" /opt/rocm /usr/include; do
            [[ $notice == *"$c"* ]] || problems+=("the warning does not name $c")
        done
    fi
    warns=$(warnings_in "$log.build.txt" "$allowed"; warnings_in "$log.test.txt" "$allowed")
    local nwarn=0
    [[ -n $warns ]] && nwarn=$(wc -l <<<"$warns")
    ((nwarn == 0)) || problems+=("$nwarn warning(s): $(head -n 1 <<<"$warns")")

    local marks=""
    for api in "${PROBED[@]}"; do marks+="$(mark "$(cfg_name "$api")" "$sys_cfgs")"; done
    t1=$(date +%s)
    local result=PASS
    if ((${#problems[@]})); then
        result=FAIL
        FAILED=1
        printf '%s: %s\n' "$set" "${problems[@]}" >>"$LOGS/problems.txt"
    fi
    ROWS+=("$set|$version|$bindings|$marks|$result|$((t1 - t0))")
}

main() {
    local -a sets=("$@")
    ((${#sets[@]})) || sets=("${ALL_SETS[@]}")
    command -v cargo >/dev/null || die "cargo not found"
    mkdir -p "$LOGS"
    : >"$LOGS/problems.txt"
    local start set
    start=$(date +%s)
    for set in "${sets[@]}"; do
        printf 'header-matrix: %s ...\n' "$set" >&2
        check_set "$set"
    done
    local abbrev="" api
    for api in "${PROBED[@]}"; do
        abbrev+="$(printf '%-5s' "$(printf '%s' "${api#hip}" | sed -E 's/[^A-Z0-9]//g' | cut -c1-4)")"
    done
    echo
    echo "hip_api_* cfg flags per header set (y = declared and emitted; columns: ${PROBED[*]})"
    printf '%-16s %-10s %-13s %s %-6s %s\n' set HIP bindings "$abbrev" result seconds
    printf '%s\n' "(abbreviations: capitals of the names without hip, e.g. LGKC = LibraryGetKernelCount)"
    local row
    for row in "${ROWS[@]}"; do
        IFS='|' read -r set version bindings marks result secs <<<"$row"
        printf '%-16s %-10s %-13s %s %-6s %s\n' "$set" "$version" "$bindings" "$marks" "$result" "$secs"
    done
    echo "total: $(($(date +%s) - start)) s; logs in $LOGS"
    # The header x runtime matrix, over the probes of every set (only for a run of all sets).
    if ((${#sets[@]} == ${#ALL_SETS[@]})); then
        local m0=$SECONDS
        bash "$ROOT/scripts/runtime-matrix.sh" "$PROBES" || {
            FAILED=1
            echo "runtime-matrix: failed (see above)" >>"$LOGS/problems.txt"
        }
        echo "runtime matrix: $((SECONDS - m0)) s"
    fi
    if ((FAILED)); then
        echo
        cat "$LOGS/problems.txt"
        exit 1
    fi
}

main "$@"
