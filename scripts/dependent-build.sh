#!/usr/bin/env bash
# The build a crate depending on hipjit gets: a clean debug `cargo build` of a small crate
# outside the workspace with hipjit as a path dependency on this checkout, in a target directory
# of its own, timed by /usr/bin/time -v (wall-clock and user CPU seconds) and by cargo's
# --timings (each unit's share). The README's "Building" figures come from it. With --first-hit,
# then the first cache hit on a fresh machine in that debug build.
#
# Usage: scripts/dependent-build.sh [--no-default-features] [--features LIST] [--jobs N]
#                                   [--keep DIR] [--first-hit] [--split] [--hipjit DIR]
#   --no-default-features  hipjit with default-features = false (no build-time bindgen: the
#                          pregenerated bindings)
#   --features LIST        hipjit's features to add (comma-separated)
#   --jobs N               cargo's jobs (default 2, the machine the figures are for)
#   --keep DIR             build in DIR and keep it (the --timings report is under
#                          DIR/target/cargo-timings); default: a temporary directory, removed
#   --first-hit            then build the dependent's program `first-hit` (debug, as a crate's
#                          tests are) and run it three times with one fresh cache directory:
#                          a miss (the compiler runs), the first hit on a fresh machine (a fresh
#                          XDG_CACHE_HOME: no per-user memo, so the compiler's identity is
#                          computed again, hashing its installation), and a hit with the
#                          memos; each prints the seconds of Jit::new plus one compile of a
#                          saxpy kernel for gfx90a by the default compiler (needs one: hipcc
#                          or hipRTC)
#   --split                then clean hipjit and the dependent alone (`cargo clean -p`) and
#                          build them again, timed the same way: hipjit's own user time, and
#                          by difference that of everything else the build compiles (its
#                          dependencies and build dependencies)
#   --hipjit DIR           the hipjit checkout to depend on (default: this one), e.g. a
#                          worktree of an earlier commit, for a before-and-after
# The dependent's Cargo.lock starts as a copy of the workspace's, so the same versions are
# built. CARGO_INCREMENTAL=0: cargo builds a path dependency incrementally, a registry one not;
# the figures are for a crate taking hipjit from the registry. RUSTFLAGS and other build
# settings of the environment are cleared. Prints the wall-clock and user time, the number of
# crates and units compiled, and the twenty units that took longest (their own time, in
# seconds, from the --timings data).
set -euo pipefail

repo="$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")/.." && pwd -P)"
default_features=true
features=""
jobs=2
keep=""
first_hit=0
split=0
while (($#)); do
    case "$1" in
    --no-default-features) default_features=false ;;
    --features) features="${2:?--features needs a list}"; shift ;;
    --jobs) jobs="${2:?--jobs needs a number}"; shift ;;
    --keep) keep="${2:?--keep needs a directory}"; shift ;;
    --first-hit) first_hit=1 ;;
    --split) split=1 ;;
    --hipjit) repo="$(cd -- "${2:?--hipjit needs a directory}" && pwd -P)"; shift ;;
    *) echo "dependent-build.sh: unknown argument $1" >&2; exit 2 ;;
    esac
    shift
done
if ! command -v cargo >/dev/null 2>&1 && [[ -x "${HOME:-/root}/.cargo/bin/cargo" ]]; then
    PATH="${HOME:-/root}/.cargo/bin:$PATH"
fi

if [[ -n "$keep" ]]; then
    rm -rf -- "$keep"
    mkdir -p -- "$keep"
    dir="$(cd -- "$keep" && pwd -P)"
else
    dir=$(mktemp -d "${TMPDIR:-/tmp}/hipjit-dependent.XXXXXX")
    trap 'rm -rf -- "$dir"' EXIT
fi
feature_list=""
if [[ -n "$features" ]]; then
    feature_list=", features = [\"${features//,/\", \"}\"]"
fi
mkdir -p -- "$dir/src"
cat >"$dir/Cargo.toml" <<TOML
[package]
name = "hipjit-dependent"
version = "0.0.0"
edition = "2021"
publish = false

[dependencies]
hipjit = { path = "$repo", default-features = $default_features$feature_list }

[workspace]
TOML
cat >"$dir/src/lib.rs" <<'RS'
//! A crate depending on hipjit.
pub use hipjit;
RS
mkdir -p -- "$dir/src/bin"
cat >"$dir/src/bin/first-hit.rs" <<'RS'
//! Jit::new and one compile of saxpy for gfx90a; prints hit or miss and the seconds taken.
use hipjit::compiler::CompileOptions;
use hipjit::jit::{Jit, JitOptions};
use hipjit::prelude::TargetId;

const SAXPY: &str = r#"
#include <hip/hip_runtime.h>
extern "C" __global__ void saxpy(float a, const float* x, float* y, unsigned n) {
    unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = a * x[i] + y[i];
}
"#;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let start = std::time::Instant::now();
    let jit = Jit::new(JitOptions::default())?;
    let compiled = jit.compile(SAXPY, &CompileOptions::for_target(TargetId::parse("gfx90a")?))?;
    let seconds = start.elapsed().as_secs_f64();
    println!("{} in {seconds:.2} s", if compiled.is_hit() { "hit" } else { "miss" });
    Ok(())
}
RS
cp -- "$repo/Cargo.lock" "$dir/Cargo.lock"

cd -- "$dir"
unset RUSTFLAGS CARGO_ENCODED_RUSTFLAGS CARGO_BUILD_RUSTFLAGS CARGO_TARGET_DIR CARGO_BUILD_TARGET_DIR \
    CARGO_PROFILE_DEV_OPT_LEVEL CARGO_PROFILE_DEV_DEBUG RUSTC_WRAPPER CARGO_BUILD_RUSTC_WRAPPER
export CARGO_INCREMENTAL=0 CARGO_BUILD_JOBS="$jobs" CARGO_TERM_PROGRESS_WHEN=never
# The sources fetched first, outside the timing.
cargo fetch -q
/usr/bin/time -v -o time.txt cargo build -q --lib --timings 2>build.log || {
    cat build.log >&2
    exit 1
}
wall=$(sed -n 's/^\tElapsed (wall clock) time (h:mm:ss or m:ss): //p' time.txt)
user=$(sed -n 's/^\tUser time (seconds): //p' time.txt)
sys=$(sed -n 's/^\tSystem time (seconds): //p' time.txt)
units=$(cargo tree -e normal --prefix none -q | sort -u | wc -l)
printf 'hipjit %s (default features: %s; features: %s), %s jobs\n' \
    "$(git -C "$repo" rev-parse --short HEAD 2>/dev/null || echo '?')" "$default_features" "${features:-none}" "$jobs"
printf 'wall %s, user %s s, system %s s; %s distinct crates in the normal dependency tree (hipjit and the dependent included)\n' \
    "$wall" "$user" "$sys" "$units"
python3 - target/cargo-timings/cargo-timing.html <<'PY'
import json, re, sys
html = open(sys.argv[1]).read()
m = re.search(r"const UNIT_DATA = (\[.*?\]);\n", html, re.S)
units = json.loads(m.group(1)) if m else []
crates = {(u["name"], u["version"]) for u in units}
print(f"{len(crates)} crates compiled (build dependencies, hipjit and the dependent included), "
      f"{len(units)} units "
      "(libraries, build scripts and their runs)")
units.sort(key=lambda u: -u["duration"])
print("longest units (seconds of their own, wall-clock on a busy machine):")
for u in units[:20]:
    print(f'  {u["duration"]:6.1f}  {u["name"]} {u["version"]} {u["target"].strip()}')
PY

if ((split)); then
    cargo clean -q -p hipjit -p hipjit-dependent
    /usr/bin/time -v -o time-own.txt cargo build -q --lib 2>>build.log
    own=$(sed -n 's/^\tUser time (seconds): //p' time-own.txt)
    printf 'hipjit and the dependent alone, built again: user %s s; everything else: user %s s\n' \
        "$own" "$(python3 -c "print(f'{$user - $own:.2f}')")"
fi

if ((first_hit)); then
    cargo build -q --bin first-hit
    mkdir -p -- "$dir/cache" "$dir/home-1" "$dir/home-2"
    run() { env HIPJIT_CACHE_DIR="$dir/cache" XDG_CACHE_HOME="$dir/$1" target/debug/first-hit; }
    echo "cold (the compiler runs): $(run home-1)"
    echo "first hit on a fresh machine (no per-user memo): $(run home-2)"
    echo "hit with the per-user memos: $(run home-2)"
fi
