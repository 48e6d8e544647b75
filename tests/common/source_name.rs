//! The source's file name is in the cache key, with a real compiler: the code holds it
//! wherever the source says `__FILE__` (as `assert` does), so the same bytes under another
//! name are another compile, never the first name's code. What the AMD tests
//! (tests/real/source_name.rs: hipcc, hipRTC) and the NVIDIA tests (tests/it/source_name.rs:
//! nvcc, NVRTC) share.

use hipjit::compiler::{CompileOptions, CompilerConfig, CompilerKind};
use hipjit::jit::Origin;

use crate::common::in_memory_headers::{code, jit};

/// A kernel that stores the name its compiler was given for the source.
pub const SOURCE: &str = r#"#include <hip/hip_runtime.h>
__device__ const char where[] = __FILE__;
extern "C" __global__ void k(char* out) { out[threadIdx.x] = where[threadIdx.x]; }
"#;

fn holds(code: &[u8], text: &str) -> bool {
    code.windows(text.len()).any(|w| w == text.as_bytes())
}

/// One source compiled as `first.hip`, then (a fresh `Jit` on the same disk cache each time)
/// as `first.hip` again, a disk hit, and as `second.hip`: a miss under another key whose code
/// (where `name_in_code`: the compiler gives `__FILE__` the name) names `second.hip` and not
/// `first.hip`; then `second.hip` again hits its own entry. hipRTC 5.2.3 compiles every
/// program as `/tmp/comgr-<random>/input/CompileSource`, whatever its name: keyed alike, its
/// results only miss once more.
pub fn check(
    kind: CompilerKind,
    config: impl Fn() -> CompilerConfig,
    base: CompileOptions,
    name_in_code: bool,
) {
    let cache = tempfile::tempdir().unwrap();
    let named = |name: &str| CompileOptions {
        source_name: Some(name.into()),
        ..base.clone()
    };
    let compile = |name: &str| {
        jit(kind, config(), cache.path())
            .compile(SOURCE, &named(name))
            .unwrap_or_else(|e| panic!("{kind:?}, {name}: {e}"))
    };
    let first = compile("first.hip");
    assert_eq!(first.origin(), Origin::Compiler, "{kind:?}");
    if name_in_code {
        assert!(holds(&code(&first), "first.hip"), "{kind:?}: no first.hip");
    }
    assert_eq!(compile("first.hip").origin(), Origin::Disk, "{kind:?}");
    let second = compile("second.hip");
    assert_eq!(
        second.origin(),
        Origin::Compiler,
        "{kind:?}: the code compiled as first.hip was served for second.hip"
    );
    if name_in_code {
        assert!(holds(&code(&second), "second.hip"), "{kind:?}");
        assert!(!holds(&code(&second), "first.hip"), "{kind:?}");
    }
    assert_ne!(first.key(), second.key(), "{kind:?}");
    let again = compile("second.hip");
    assert_eq!(again.origin(), Origin::Disk, "{kind:?}");
    assert_eq!(code(&again), code(&second), "{kind:?}");
}
