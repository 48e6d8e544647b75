//! Which file the HIP runtime loader names: the library it actually opened, whatever led to it.

use std::ffi::OsString;
use std::path::Path;

use hipjit::error::LoadError;
use hipjit::runtime::Runtime;

/// A real shared library that is not a HIP runtime (zlib): it loads, and exports no HIP symbol.
const NOT_HIP: &str = "/lib/x86_64-linux-gnu/libz.so.1";

#[test]
fn a_library_from_hipjit_hip_library_without_hip_symbols_is_named_in_the_error() {
    assert!(
        Path::new(NOT_HIP).exists(),
        "{NOT_HIP} is installed (zlib1g)"
    );
    let env = |name: &str| (name == "HIPJIT_HIP_LIBRARY").then(|| OsString::from(NOT_HIP));
    let err = Runtime::load_with_env(&env).expect_err("zlib is no HIP runtime");
    match &err {
        LoadError::MissingSymbol { path, .. } => {
            let real = std::fs::canonicalize(NOT_HIP).expect("zlib resolves");
            assert!(
                path == Path::new(NOT_HIP) || *path == real,
                "the error names {}, not the file opened ({NOT_HIP})",
                path.display()
            );
        }
        other => panic!("expected a missing symbol in {NOT_HIP}, got {other}"),
    }
    let text = err.to_string();
    assert!(text.contains("libz.so"), "{text}");
    assert!(!text.contains("libamdhip64"), "{text}");
}
