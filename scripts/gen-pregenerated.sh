#!/bin/sh
# Regenerates hip-sys/pregenerated/hip_runtime_api.rs, the bindings hip-sys uses when no HIP
# headers are found (or HIP_SYS_BINDINGS=pregenerated, or without its feature `bindgen`), and
# their committed probe (pfn.rs, probe.txt).
#
# The bindings come from hip-sys's own build script (same bindgen configuration, same clang
# arguments), run against one pinned header set: the HIP 7.1 headers of the PyPI triton 3.9.0
# wheel (triton/backends/amd/include), the newest real set this project can fetch.
#
# Usage: scripts/gen-pregenerated.sh [INCLUDE_DIR]
#   INCLUDE_DIR  the directory holding hip/ (default: the hip-7.1-triton set below)
set -eu

root=$(cd "$(dirname "$0")/.." && pwd)
set_name=hip-7.1-triton
default_dir=/var/cache/hipjit-ci/headers/$set_name/include
dir=${1:-$default_dir}
origin="triton 3.9.0 wheel (PyPI), triton/backends/amd/include"
[ "$dir" = "$default_dir" ] || { set_name=custom; origin="$dir"; }

if [ ! -f "$dir/hip/hip_runtime_api.h" ]; then
    echo "gen-pregenerated: $dir/hip/hip_runtime_api.h not found; run scripts/fetch-headers.sh" >&2
    exit 1
fi

version=$(awk '$1 == "#define" && $2 ~ /^HIP_VERSION_(MAJOR|MINOR|PATCH)$/ { v[$2] = $3 }
    END { print v["HIP_VERSION_MAJOR"] "." v["HIP_VERSION_MINOR"] "." v["HIP_VERSION_PATCH"] }' \
    "$dir/hip/hip_version.h")
bindgen_version=$(awk '/^name = "bindgen"$/ { getline; gsub(/version = |"/, ""); print }' "$root/Cargo.lock")

target="$root/target/pregenerated"
json=$(cd "$root" && HIP_SYS_BINDINGS=generated HIP_INCLUDE_DIR="$dir" \
    cargo build -p hipjit-sys --target-dir "$target" --message-format=json)
out_dir=$(printf '%s\n' "$json" | grep '"reason":"build-script-executed"' | grep '"package_id":"[^"]*hipjit-sys' \
    | sed 's/.*"out_dir":"\([^"]*\)".*/\1/' | tail -n 1)
if [ -z "$out_dir" ] || [ ! -f "$out_dir/bindings.rs" ]; then
    echo "gen-pregenerated: could not find hip-sys's generated bindings" >&2
    exit 1
fi

dest="$root/hip-sys/pregenerated/hip_runtime_api.rs"
tmp="$dest.tmp.$$"
{
    echo "// Pregenerated hip-sys bindings: bindgen $bindgen_version output for hip/hip_runtime_api.h"
    echo "// (-x c++ -D__HIP_PLATFORM_AMD__), made by scripts/gen-pregenerated.sh; do not edit."
    echo "// Header set: $set_name, $origin"
    echo "// HIP version: $version"
    echo
    cat "$out_dir/bindings.rs"
} > "$tmp"
mv "$tmp" "$dest"
echo "gen-pregenerated: wrote $dest (HIP $version, $(wc -l < "$dest") lines)"

# The probe of these bindings (pfn.rs, probe.txt), which a build without the feature `bindgen`
# takes instead of reading them with syn: written by the test that checks it.
(cd "$root" && HIP_SYS_WRITE_PREGENERATED_PROBE=1 cargo test -q -p hipjit-sys --test build_script \
    --target-dir "$target" the_committed_probe)
echo "gen-pregenerated: wrote $root/hip-sys/pregenerated/pfn.rs and probe.txt"
