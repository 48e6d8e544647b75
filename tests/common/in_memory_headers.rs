//! In-memory headers (`CompileOptions::header`) with a real compiler: what the AMD tests
//! (tests/real/in_memory_headers.rs: hipcc, hipRTC, hipRTC in a worker) and the NVIDIA tests
//! (tests/it/in_memory_headers.rs: nvcc, NVRTC, NVRTC in a worker) share.

use std::path::Path;

use hipjit::compiler::selection::CompilerChoice;
use hipjit::compiler::{CompileOptions, CompilerConfig, CompilerKind};
use hipjit::jit::{Artefact, CacheLocation, Compiled, Jit, JitOptions, Origin};

/// Includes a header by a nested name, which includes another by a plain name.
pub const SOURCE: &str = r#"#include <hip/hip_runtime.h>
#include "shape/width.h"
extern "C" __global__ void fill(int* out) { out[threadIdx.x] = WIDTH * SCALE; }
"#;

/// `shape/width.h` defining WIDTH as `width`, and including `scale.h`.
pub fn width_h(width: u32) -> String {
    format!("#pragma once\n#include \"scale.h\"\n#define WIDTH {width}\n")
}

/// `options` with the two headers, WIDTH = `width`.
pub fn with_headers(options: CompileOptions, width: u32) -> CompileOptions {
    options
        .header("shape/width.h", width_h(width))
        .header("scale.h", "#define SCALE 7\n")
}

/// A JIT with `kind` (`config` for the rest), its disk cache under `cache`.
pub fn jit(kind: CompilerKind, config: CompilerConfig, cache: &Path) -> Jit {
    Jit::new(JitOptions {
        compiler: Some(CompilerChoice::Kind(kind)),
        compiler_config: config,
        cache: CacheLocation::Roots(vec![cache.to_path_buf()]),
        ..JitOptions::default()
    })
    .unwrap_or_else(|e| panic!("{e}"))
}

/// The code of the first artefact.
pub fn code(c: &Compiled) -> Vec<u8> {
    match &c.artefacts()[0] {
        Artefact::CodeObject(o) => o.elf().to_vec(),
        Artefact::Cubin(b) => b.elf().to_vec(),
    }
}

/// The checks every backend passes: the headers are found (nested names, one including the
/// other), the compile is the named compiler's; a fresh JIT on the same cache hits on disk (the
/// headers, never files, leave nothing in the manifest that vanishes); other contents are another
/// key and other code; without the headers the compile fails naming the missing one.
pub fn check(kind: CompilerKind, config: impl Fn() -> CompilerConfig, base: CompileOptions) {
    let cache = tempfile::tempdir().unwrap();
    let first = jit(kind, config(), cache.path())
        .compile(SOURCE, &with_headers(base.clone(), 3))
        .unwrap_or_else(|e| panic!("{kind:?}: {e}"));
    assert_eq!(first.compiler().kind, kind);
    assert_eq!(first.origin(), Origin::Compiler);
    let again = jit(kind, config(), cache.path())
        .compile(SOURCE, &with_headers(base.clone(), 3))
        .unwrap_or_else(|e| panic!("{kind:?}: {e}"));
    assert_eq!(
        again.origin(),
        Origin::Disk,
        "{kind:?}: a fresh JIT hits on disk"
    );
    assert_eq!(again.key(), first.key());
    let other = jit(kind, config(), cache.path())
        .compile(SOURCE, &with_headers(base.clone(), 4))
        .unwrap_or_else(|e| panic!("{kind:?}: {e}"));
    assert_eq!(
        other.origin(),
        Origin::Compiler,
        "{kind:?}: other header contents"
    );
    assert_ne!(other.key(), first.key());
    assert_ne!(
        code(&other),
        code(&first),
        "{kind:?}: 3 * 7 and 4 * 7 compile differently"
    );
    let err = jit(kind, config(), cache.path())
        .compile(SOURCE, &base)
        .unwrap_err()
        .to_string();
    assert!(err.contains("shape/width.h"), "{kind:?}: {err}");
}

/// A quoted `#include` of an in-memory header names a file the compiler may look up in the
/// process's current directory (NVRTC 13.5 does: an in-memory header has no directory of its
/// own), which nothing keys: with a file of that name there, a compile read it and a later
/// compile, the file changed, hit the entry built from the old file. Either the compile is
/// refused, naming the `#include`, or the file's contents are keyed: the two compiles may not
/// give one key.
pub fn cwd_file_is_never_served_stale(
    kind: CompilerKind,
    config: CompilerConfig,
    options: CompileOptions,
) {
    struct Removed(std::path::PathBuf);
    impl Drop for Removed {
        fn drop(&mut self) {
            let _ = std::fs::remove_file(&self.0);
        }
    }
    let name = format!("hipjit-test-cwd-{}-{kind:?}.h", std::process::id());
    let file = Removed(std::env::current_dir().unwrap().join(&name));
    let source = "#include \"outer.h\"\n\
        extern \"C\" __global__ void fill(int* out) { out[threadIdx.x] = FROM_CWD; }\n";
    let options = options.header("outer.h", format!("#include \"{name}\"\n"));
    let cache = tempfile::tempdir().unwrap();
    let compile = |value: u32| {
        std::fs::write(&file.0, format!("#define FROM_CWD {value}\n")).unwrap();
        jit(kind, config.clone(), cache.path()).compile(source, &options)
    };
    match (compile(3), compile(4)) {
        (Ok(three), Ok(four)) => assert!(
            three.key() != four.key(),
            "a file in the current directory changed and the second compile ({:?}) got the \
             first's key: the file was read ({:?} compiled) and not keyed",
            four.origin(),
            three.origin()
        ),
        (Err(e), _) | (_, Err(e)) => assert!(
            e.to_string().contains(&name),
            "{kind:?}: the refusal does not name the include: {e}"
        ),
    }
}
