//! `Jit::load`: compile for a device, load, cache the loaded library per (device, key), and
//! recompile once when the runtime rejects an image as invalid. The runtime is the fixture HIP
//! runtime of tests/fixtures/fake_hip.c (one device, gfx90a:sramecc+:xnack-; no real runtime
//! with a device exists here), the compiler the real hipcc.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use hipjit::compiler::CompileOptions;
use hipjit::device::Device;
use hipjit::error::{HipError, LibraryError};
use hipjit::jit::{CacheLocation, Jit, JitError, JitOptions, Origin};
use hipjit::runtime::Runtime;

use crate::common::fixture_lib::{self, log as fixture_log};

const SOURCE: &str = "#include <hip/hip_runtime.h>\n\
    extern \"C\" __global__ void scale(float* x, float a, unsigned n) {\n\
    unsigned i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) x[i] *= a; }\n";

/// Builds a private copy of the fixture runtime (its own file, so its call record is this
/// test's alone) and opens device 0.
fn fixture_device(name: &str) -> (Device, PathBuf) {
    let lib = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join("jit-load")
        .join(name)
        .join("libamdhip64.so");
    fixture_lib::hip_runtime(&lib, &[]);
    let rt = Runtime::load_from(&lib).unwrap_or_else(|e| panic!("{e}"));
    (rt.device(0).unwrap_or_else(|e| panic!("{e}")), lib)
}

fn jit(cache: CacheLocation) -> Jit {
    Jit::new(JitOptions {
        // hipcc, whatever HIPJIT_COMPILER says: these tests are about it.
        compiler: Some(hipjit::compiler::selection::CompilerChoice::Hipcc),
        cache,
        ..JitOptions::default()
    })
    .unwrap_or_else(|e| panic!("{e}"))
}

fn invalid_image() -> LibraryError {
    LibraryError::Hip(HipError::new(
        200,
        "hipModuleLoadData",
        None,
        "injected".into(),
    ))
}

#[test]
fn load_compiles_for_the_device_target_and_reuses_the_loaded_library() {
    let (device, lib) = fixture_device("reuse");
    let jit = jit(CacheLocation::Disabled);
    let opts = CompileOptions::default(); // no target: the device's is used
    let first = jit
        .load(&device, SOURCE, &opts)
        .unwrap_or_else(|e| panic!("{e}"));
    let second = jit
        .load(&device, SOURCE, &opts)
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(Arc::ptr_eq(&first.library, &second.library));
    assert_eq!(
        first
            .compiled
            .code_object()
            .unwrap()
            .target_id()
            .to_string(),
        "gfx90a:sramecc+:xnack-"
    );
    assert_eq!(second.compiled.origin(), Origin::Memory);
    let loads = fixture_log(&lib)
        .iter()
        .filter(|l| l.starts_with("hipModuleLoadData"))
        .count();
    assert_eq!(loads, 1);
    assert!(first.library.kernel("scale").is_ok());
}

#[test]
fn invalid_image_evicts_the_cached_entry_and_recompiles_once() {
    let (device, _lib) = fixture_device("invalid-once");
    let dir = tempfile::tempdir().unwrap();
    let opts = CompileOptions::default();
    // Populate the disk cache, then load through a fresh Jit whose first load is rejected.
    let seeded = jit(CacheLocation::Roots(vec![dir.path().into()]))
        .load(&device, SOURCE, &opts)
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(seeded.compiled.origin(), Origin::Compiler);
    let calls = AtomicUsize::new(0);
    let loaded = jit(CacheLocation::Roots(vec![dir.path().into()]))
        .load_with(&device, SOURCE, &opts, |co, d| {
            if calls.fetch_add(1, Ordering::SeqCst) == 0 {
                Err(invalid_image())
            } else {
                co.load(d)
            }
        })
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(calls.load(Ordering::SeqCst), 2);
    assert_eq!(
        loaded.compiled.origin(),
        Origin::Compiler,
        "was not recompiled"
    );
    assert!(
        loaded.compiled.entry_path().is_some_and(|p| p.exists()),
        "no fresh entry"
    );
}

#[test]
fn invalid_image_after_the_recompile_is_returned() {
    let (device, _lib) = fixture_device("invalid-twice");
    let jit = jit(CacheLocation::Disabled);
    let calls = AtomicUsize::new(0);
    let err = jit
        .load_with(&device, SOURCE, &CompileOptions::default(), |_, _| {
            calls.fetch_add(1, Ordering::SeqCst);
            Err(invalid_image())
        })
        .unwrap_err();
    assert_eq!(calls.load(Ordering::SeqCst), 2);
    let JitError::Load(e) = &err else {
        panic!("expected a load error, got {err}")
    };
    assert!(
        matches!(&**e, LibraryError::Hip(h) if h.is_invalid_image()),
        "{err}"
    );
}

#[test]
fn kernel_hit_returns_the_same_handle_for_an_equal_fresh_source_without_runtime_calls() {
    let (device, lib) = fixture_device("kernel-hit");
    let jit = jit(CacheLocation::Disabled);
    let opts = CompileOptions::default();
    let first = jit
        .kernel(&device, SOURCE, "scale", &opts)
        .unwrap_or_else(|e| panic!("{e}"));
    let calls = fixture_log(&lib).len();
    let again = jit
        .kernel(&device, String::from(SOURCE), "scale", &opts)
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(first.same_as(&again), "a hit returns the cached handle");
    assert_eq!(
        fixture_log(&lib).len(),
        calls,
        "a hit makes no runtime call"
    );
    // A source of the same length differing inside is another kernel.
    let other = SOURCE.replacen("blockIdx.x * blockDim.x", "blockDim.x * blockIdx.x", 1);
    assert_eq!((other.len(), other != SOURCE), (SOURCE.len(), true));
    let changed = jit
        .kernel(&device, &other, "scale", &opts)
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(!changed.same_as(&first));
    let err = jit.kernel(&device, SOURCE, "missing", &opts).unwrap_err();
    assert!(err.to_string().contains("missing"), "{err}");
    jit.clear_memory();
    let after = jit
        .kernel(&device, SOURCE, "scale", &opts)
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(!after.same_as(&first), "clear_memory forgets kernels too");
}

#[test]
fn a_load_keys_its_source_as_a_compile_only_build_host_does() {
    // The runtime accepts more than one code object version; the key must not depend on it.
    let (device, _) = fixture_device("keys-like-a-build-host");
    let dir = tempfile::tempdir().unwrap();
    let root = || CacheLocation::Roots(vec![dir.path().to_path_buf()]);
    let loaded = jit(root())
        .load(&device, SOURCE, &CompileOptions::default())
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(loaded.compiled.origin(), Origin::Compiler);
    // A host with no runtime, compiling for the device's target: the same key, a hit.
    let target = device.target_id().unwrap().clone();
    let built = jit(root())
        .compile(SOURCE, &CompileOptions::for_target(target))
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(built.origin(), Origin::Disk);
    assert_eq!(built.key(), loaded.compiled.key());
}
