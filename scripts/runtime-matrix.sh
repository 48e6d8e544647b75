#!/usr/bin/env bash
# Header set x runtime matrix: runs the probe (examples/runtime_probe.rs) that
# scripts/header-matrix.sh built against each HIP header set against every runtime shape, and
# checks in each cell that hipjit binds what the headers would have called and gives the
# right named error:
#
#   hip-5.2-debian  Debian bookworm's HIP 5.2.3 runtime (libamdhip64.so.5), real, no GPU
#   hip-5.4-wheel   the HIP 5.4 runtime of PyPI's pytorch-triton-rocm 2.1.0, real, no GPU
#                   ($CACHE/rocm-5.4-triton, unpacked by scripts/setup.sh)
#   hip-6.4-sid     Debian sid's HIP 6.4.3 runtime (libamdhip64.so.6), real, no GPU; the probe
#                   runs inside the sid root (scripts/sid-run.sh: its libraries need glibc 2.38)
#   fixture-7.2     fixture (tests/fixtures/fake_hip*.c, built here with cc): the whole library
#                   API, hipGetProcAddress, both device-properties layouts, a pretend gfx90a
#   fixture-7-distro  fixture: 3 of the 5 library-API symbols, hipGetDevicePropertiesR0600 only
#   fixture-dropin  fixture: classic entry points only (hipGetDeviceProperties, 5.x layout)
#
# The expected cell is derived from the header set's HIP version H (100 * major + minor) and
# the runtime's exports as `nm -D` lists them, not from hipjit:
#   binding  hipGetProcAddress exported: `proc-address` where it answers (the fixtures),
#            `dlsym-after-hipErrorNoDevice` on a real runtime without a GPU; else `dlsym`
#   props    the layout the headers call (H >= 600: R0600, else R0000) when the runtime
#            exports it or hipGetProcAddress answers; else the other layout it exports
#   loader   `library-api` with all five library-API symbols, else `module-api`
#   devices, device0  real runtimes: hipErrorNoDevice; fixtures: 1 and gfx90a:sramecc+:xnack-
#
# Usage: scripts/runtime-matrix.sh PROBES_DIR   (PROBES_DIR/<set>/runtime_probe and
#        PROBES_DIR/<set>/version, written by scripts/header-matrix.sh)
# Environment: HIPJIT_CI_CACHE (default /var/cache/hipjit-ci), HEADER_MATRIX_TARGET_DIR.
# Prints the table (markdown); exits non-zero when a cell differs from its expectation.
set -uo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
CACHE=${HIPJIT_CI_CACHE:-/var/cache/hipjit-ci}
TARGET=${HEADER_MATRIX_TARGET_DIR:-$ROOT/target/header-matrix}
PROBES=${1:?usage: scripts/runtime-matrix.sh PROBES_DIR}
WORK=$TARGET/runtime-matrix
SID_ROOT=$CACHE/sid-root
SID_LIB=$SID_ROOT/usr/lib/x86_64-linux-gnu/libamdhip64.so.6
SETS=(none hip-5.2-debian hip-6.1-triton hip-6.2-triton hip-6.4-sid hip-7.1-triton hip-7.2-overlay)
RUNTIMES=(hip-5.2-debian hip-5.4-wheel hip-6.4-sid fixture-7.2 fixture-7-distro fixture-dropin)
LIBRARY_API=(hipLibraryLoadFromFile hipLibraryGetKernelCount hipLibraryEnumerateKernels
    hipKernelGetFunction hipLibraryUnload)
FIXTURE_ARCH="gfx90a:sramecc+:xnack-"

die() {
    printf 'runtime-matrix: error: %s\n' "$*" >&2
    exit 2
}

# The library file of runtime $1 (for nm), and how the probe names it.
runtime_file() {
    case $1 in
    hip-5.2-debian) echo /usr/lib/x86_64-linux-gnu/libamdhip64.so.5 ;;
    hip-5.4-wheel) echo "$CACHE/rocm-5.4-triton/lib/libamdhip64.so" ;;
    hip-6.4-sid) echo "$SID_LIB" ;;
    fixture-*) echo "$WORK/fixtures/$1/libamdhip64.so" ;;
    esac
}

is_real() { [[ $1 != fixture-* ]]; }

# Builds the fixture runtimes (a few seconds of cc); the HIP 6.x layout from the sid root's
# headers (hip/ only), the 5.x layout from /usr/include.
build_fixtures() {
    local fx=$ROOT/tests/fixtures view=$WORK/sid-hip cflags dir
    cflags=(-fPIC -fvisibility=hidden -O1 -Wall -D__HIP_PLATFORM_AMD__)
    [[ -f $SID_ROOT/usr/include/hip/hip_runtime_api.h ]] || return 1
    mkdir -p "$view" && ln -sfn "$SID_ROOT/usr/include/hip" "$view/hip"
    dir=$WORK/fixtures/fixture-7.2
    mkdir -p "$dir"
    cc -c "${cflags[@]}" -o "$dir/props5.o" "$fx/fake_hip_props.c" &&
        cc -c "${cflags[@]}" -I "$view" -o "$dir/props6.o" "$fx/fake_hip_props.c" &&
        cc -shared "${cflags[@]}" -DLIBRARY_API=5 -o "$dir/libamdhip64.so" "$fx/fake_hip.c" \
            "$fx/fake_hip_proc_address.c" "$dir/props5.o" "$dir/props6.o" || return 1
    dir=$WORK/fixtures/fixture-7-distro
    mkdir -p "$dir"
    cc -shared "${cflags[@]}" -DLIBRARY_API=3 -I "$view" -o "$dir/libamdhip64.so" \
        "$fx/fake_hip.c" "$fx/fake_hip_props.c" || return 1
    dir=$WORK/fixtures/fixture-dropin
    mkdir -p "$dir"
    cc -shared "${cflags[@]}" -DLIBRARY_API=0 -DNO_MALLOC_ASYNC -DRUNTIME_VERSION=50400000 \
        -o "$dir/libamdhip64.so" "$fx/fake_hip.c" "$fx/fake_hip_props.c" || return 1
}

exports() { nm -D --defined-only "$1" 2>/dev/null | awk '{ sub(/@.*/, "", $3); print $3 }' | sort -u; }

# The expected probe words (binding props loader devices device0) for version $1, runtime $2.
expected() {
    local h=$1 rt=$2 ex want other binding props loader=module-api n=0 s
    ex=$(exports "$(runtime_file "$rt")")
    if ((h >= 600)); then want=R0600 other=R0000; else want=R0000 other=R0600; fi
    has() {
        case $1 in
        R0600) grep -qx hipGetDevicePropertiesR0600 <<<"$ex" ;;
        R0000) grep -qx hipGetDeviceProperties <<<"$ex" ;;
        *) grep -qx "$1" <<<"$ex" ;;
        esac
    }
    if has hipGetProcAddress; then
        if is_real "$rt"; then binding=dlsym-after-hipErrorNoDevice; else binding=proc-address; fi
    else
        binding=dlsym
    fi
    if [[ $binding == proc-address ]] || has "$want"; then props=$want; else props=$other; fi
    for s in "${LIBRARY_API[@]}"; do has "$s" && n=$((n + 1)); done
    ((n == 5)) && loader=library-api
    if is_real "$rt"; then
        printf 'binding=%s props=%s loader=%s devices=hipErrorNoDevice device0=hipErrorNoDevice\n' \
            "$binding" "$props" "$loader"
    else
        printf 'binding=%s props=%s loader=%s devices=1 device0=%s\n' "$binding" "$props" "$loader" "$FIXTURE_ARCH"
    fi
}

# Runs probe $1 against runtime $2; prints its words without `headers=`.
probe() {
    local exe=$1 rt=$2 out
    case $rt in
    hip-6.4-sid)
        out=$(bash "$ROOT/scripts/sid-run.sh" --bind "$(dirname "$exe")" -- \
            "$exe" libamdhip64.so.6 2>&1)
        ;;
    *) out=$(HIPJIT_FIXTURE_DEVICES="" "$exe" "$(runtime_file "$rt")" 2>&1) ;;
    esac
    tail -n 1 <<<"$out" | sed 's/^headers=[0-9]* //'
}

# One cell's text: binding, properties entry, loader, device 0.
short() {
    local w binding="" props="" loader="" device0=""
    for w in $1; do
        case $w in
        binding=proc-address) binding=gpa ;;
        binding=dlsym) binding=dlsym ;;
        binding=dlsym-after-*) binding="gpa:${w#binding=dlsym-after-hipError}>dlsym" ;;
        props=*) props=${w#props=} ;;
        loader=library-api) loader=lib ;;
        loader=module-api) loader=mod ;;
        device0=hipError*) device0=${w#device0=hipError} ;;
        device0=*) device0=${w#device0=} device0=${device0%%:*} ;;
        load=*) binding="load failed" ;;
        esac
    done
    printf '%s %s %s %s' "$binding" "$props" "$loader" "$device0"
}

# The table row of set $1 (on stdout) and its problems (in $WORK/problems.$1); status 1 when
# a cell differs.
row_of() {
    local set=$1 exe h rt got want row failed=0
    local problems=$WORK/problems.$set
    : >"$problems"
    exe=$PROBES/$set/runtime_probe
    if [[ ! -x $exe ]]; then
        echo "| $set | (no probe: the set failed to build) |"
        printf '%s: no probe built\n' "$set" >>"$problems"
        return 1
    fi
    h=$(sed -n 's/^headers=\([0-9]*\).*/\1/p' <<<"$("$exe" /nonexistent 2>/dev/null)")
    if [[ -z $h ]]; then
        echo "| $set | (the probe does not run) |"
        printf '%s: the probe does not run\n' "$set" >>"$problems"
        return 1
    fi
    row="| $set ($h) |"
    for rt in "${RUNTIMES[@]}"; do
        got=$(probe "$exe" "$rt")
        want=$(expected "$h" "$rt")
        if [[ $got == "$want" ]]; then
            row+=" $(short "$got") |"
        else
            row+=" x $(short "$got") |"
            printf '%s x %s: got [%s], expected [%s]\n' "$set" "$rt" "$got" "$want" >>"$problems"
            failed=1
        fi
    done
    echo "$row"
    return "$failed"
}

main() {
    local set rt failed=0 header line
    local -a pids=()
    mkdir -p "$WORK"
    build_fixtures || die "building the fixture runtimes failed (cc, HIP headers of /usr/include and $SID_ROOT)"
    for rt in "${RUNTIMES[@]}"; do
        [[ -f $(runtime_file "$rt") ]] ||
            die "runtime $rt missing: $(runtime_file "$rt") (scripts/setup.sh)"
    done
    # The rows at the same time (each cell mostly waits on a runtime's start-up).
    for set in "${SETS[@]}"; do
        row_of "$set" >"$WORK/row.$set" &
        pids+=($!)
    done
    for set in "${!pids[@]}"; do
        wait "${pids[$set]}" || failed=1
    done
    header="| headers (H) |"
    line="|---|"
    for rt in "${RUNTIMES[@]}"; do header+=" $rt |"; line+="---|"; done
    echo
    echo "header set x runtime: binding, device-properties entry, code-object loader, device 0"
    echo "(gpa: hipGetProcAddress; gpa:NoDevice>dlsym: it answered hipErrorNoDevice, dlsym used;"
    echo " lib/mod: library/module API; NoDevice: hipErrorNoDevice; x: differs from the expectation)"
    echo
    echo "$header"
    echo "$line"
    for set in "${SETS[@]}"; do cat "$WORK/row.$set"; done
    if ((failed)); then
        echo
        for set in "${SETS[@]}"; do cat "$WORK/problems.$set"; done
        return 1
    fi
    echo "runtime-matrix: every cell as expected"
}

main "$@"
