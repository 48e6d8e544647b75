#!/bin/sh
# Rebuilds the code objects in this directory from kernels.hip and single.hip.
#
#   tests/data/code-objects/regen.sh
#
# Needs Debian bookworm's hipcc 5.2.3 (apt-get install hipcc rocm-device-libs llvm-15) on the
# host, and a Debian sid root filesystem with hipcc 7.0.2 and llvm-21 at $HIPJIT_SID_ROOT
# (default /var/cache/hipjit-ci/sid-root; see docs ENVIRONMENT.md), entered with unshare and
# chroot (run as root). Output names: <source>-<target ID with ':' as '_'>[-<variant>].<ext>:
#   .hsaco  raw ELF code object (--no-gpu-bundle-output)
#   .hipfb  clang offload bundle (hipcc --genco without --no-gpu-bundle-output)
#   .ccob   compressed offload bundle (--offload-compress), header version 2 and 3
# The tests compare the reader with `llvm-readelf-15 --notes`, which decodes the metadata of
# every object here (code object v4, v5 and v6).
set -eu

here=$(cd "$(dirname "$0")" && pwd)
cd "$here"
flags="-x hip --genco -O3"

if [ "${1:-}" = "--inside-sid" ]; then
    # hipcc 7.0.2 (clang-21): code object v6 by default.
    for arch in gfx942 gfx950 gfx1100 gfx1151 gfx942:sramecc+:xnack-; do
        name=$(echo "$arch" | tr ':' '_')
        hipcc $flags --offload-arch="$arch" --no-gpu-bundle-output kernels.hip -o "kernels-$name.hsaco"
    done
    for arch in gfx942 gfx1201; do
        hipcc $flags --offload-arch=$arch --no-gpu-bundle-output single.hip -o single-$arch.hsaco
    done
    # A generic processor (code object v6 only) next to one of its members.
    hipcc $flags --offload-arch=gfx11-generic --offload-arch=gfx1100 single.hip \
        -o single-gfx11-generic-gfx1100.hipfb
    # Uncompressed and compressed bundles. clang-offload-bundler 21 writes compressed header
    # version 2 (zstd) by default and version 3 when COMPRESSED_BUNDLE_FORMAT_VERSION=3; it
    # refuses to write version 1.
    hipcc $flags --offload-arch=gfx942 --offload-arch=gfx1100 kernels.hip -o kernels-gfx942-gfx1100.hipfb
    hipcc $flags --offload-compress --offload-arch=gfx942 --offload-arch=gfx1100 kernels.hip \
        -o kernels-gfx942-gfx1100-v2.ccob
    COMPRESSED_BUNDLE_FORMAT_VERSION=3 hipcc $flags --offload-compress --offload-arch=gfx942 \
        --offload-arch=gfx1100 kernels.hip -o kernels-gfx942-gfx1100-v3.ccob
    # clang-21 records .actual_access (read_only, write_only) for __restrict__ pointers.
    hipcc $flags --offload-arch=gfx90a --no-gpu-bundle-output ../../kernels/access.hip \
        -o access-gfx90a.hsaco
    exit 0
fi

# Debian bookworm hipcc 5.2.3 (clang-15): code object v4 by default.
for arch in gfx90a gfx908 gfx1030 gfx90a:xnack-; do
    name=$(echo "$arch" | tr ':' '_')
    hipcc $flags --offload-arch="$arch" --no-gpu-bundle-output kernels.hip -o "kernels-$name.hsaco"
done
hipcc $flags -mcode-object-version=5 --offload-arch=gfx90a --no-gpu-bundle-output kernels.hip \
    -o kernels-gfx90a-v5.hsaco
# More processors and feature settings, from the smallest source: gfx940 is written with
# EF_AMDGPU_MACH 0x040, which LLVM 20 and later no longer know.
for arch in gfx90a gfx900 gfx906 gfx940 gfx908:sramecc-:xnack+; do
    name=$(echo "$arch" | tr ':' '_')
    hipcc $flags --offload-arch="$arch" --no-gpu-bundle-output single.hip -o "single-$name.hsaco"
done
# Code object v3: e_flags hold on/off bits, set for "any" as well as for "on".
hipcc $flags -mcode-object-version=3 --offload-arch=gfx906 --no-gpu-bundle-output single.hip \
    -o single-gfx906-v3.hsaco
hipcc $flags --offload-arch=gfx90a --offload-arch=gfx1030 kernels.hip -o kernels-gfx90a-gfx1030.hipfb

# The rest inside the sid root, in a private mount namespace so that no mount leaks.
root=${HIPJIT_SID_ROOT:-/var/cache/hipjit-ci/sid-root}
if [ ! -x "$root/usr/bin/hipcc" ]; then
    echo "regen.sh: no hipcc 7.0.2 at $root/usr/bin/hipcc; set HIPJIT_SID_ROOT" >&2
    exit 1
fi
unshare -m sh -c '
    set -e
    mount -t proc proc "$1/proc"
    mkdir -p "$1$2"
    mount --bind "$2" "$1$2"
    chroot "$1" sh "$2/regen.sh" --inside-sid
' regen "$root" "$here"

# cuda/add_one-sm_90.{cubin,fatbin}: real CUDA outputs the reader must reject by name. They need
# an NVIDIA CUDA toolkit (made with nvcc 13.0), so this script does not rebuild them:
#   nvcc -cubin -arch=sm_90 cuda/add_one.cu -o cuda/add_one-sm_90.cubin
#   nvcc -fatbin -arch=sm_90 cuda/add_one.cu -o cuda/add_one-sm_90.fatbin
# cuda/occupancy-sm_{75,80,86,90,120}.cubin: kernels of known registers and shared memory for the
# SM occupancy rules (code_object/occupancy/sm.rs), made with nvcc 13.0 from PyPI:
#   for sm in 75 80 86 90 120; do
#     nvcc -cubin -arch=sm_$sm -Xptxas -v cuda/occupancy.cu -o cuda/occupancy-sm_$sm.cubin; done
