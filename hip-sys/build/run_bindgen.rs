//! Runs bindgen on `hip/hip_runtime_api.h` of one header directory.

use std::path::{Component, Path, PathBuf};
use std::sync::{Arc, Mutex};

use bindgen::callbacks::ParseCallbacks;

/// The translation unit bindgen parses (kept in memory so hip-sys needs no file of the
/// workspace around it).
pub const WRAPPER: &str = "#include <hip/hip_runtime_api.h>\n";

/// The clang arguments, exactly: C++ (the HIP headers are C++), the AMD platform, and the
/// header directory as a system directory. Nothing else, so no other `hip/` directory can be
/// put ahead of the chosen one.
pub fn clang_args(dir: &Path) -> Vec<String> {
    vec![
        "-x".to_string(),
        "c++".to_string(),
        "-D__HIP_PLATFORM_AMD__".to_string(),
        "-isystem".to_string(),
        dir.display().to_string(),
    ]
}

/// Environment variables that change what libclang reads, besides the ones bindgen reports.
pub const CLANG_ENV_VARS: &[&str] = &[
    "LIBCLANG_PATH",
    "LIBCLANG_STATIC_PATH",
    "CLANG_PATH",
    "CPATH",
    "C_INCLUDE_PATH",
    "CPLUS_INCLUDE_PATH",
    "BINDGEN_EXTRA_CLANG_ARGS",
];

/// Records every file libclang reads.
#[derive(Debug, Default)]
struct Callbacks {
    files: Arc<Mutex<Vec<PathBuf>>>,
}

impl ParseCallbacks for Callbacks {
    fn include_file(&self, filename: &str) {
        if let Ok(mut files) = self.files.lock() {
            files.push(PathBuf::from(filename));
        }
    }

    fn read_env_var(&self, key: &str) {
        println!("cargo::rerun-if-env-changed={key}");
    }
}

/// The generated bindings and the files libclang read.
pub struct Generated {
    /// Rust source of the bindings.
    pub text: String,
    /// Every file included while parsing, as libclang named it.
    pub files: Vec<PathBuf>,
}

/// Configures bindgen the way hip-sys's bindings are defined (shared by the build and by
/// `scripts/gen-pregenerated.sh`, which goes through this build script).
pub fn generate(dir: &Path) -> Result<Generated, String> {
    if !clang_sys::is_loaded() {
        clang_sys::load().map_err(|e| {
            format!(
                "HIP headers were found in {} but libclang, which bindgen needs, could not be \
                 loaded ({e}); install it (Debian: apt-get install libclang1-15) or point \
                 LIBCLANG_PATH at it, or set HIP_SYS_BINDINGS=pregenerated to use the \
                 committed bindings",
                dir.display()
            )
        })?;
    }
    let files = Arc::new(Mutex::new(Vec::new()));
    let rust_target = bindgen::RustTarget::stable(77, 0)
        .map_err(|e| format!("bindgen does not accept Rust 1.77 as target: {e}"))?;
    let config = bindgen::CodegenConfig::FUNCTIONS
        | bindgen::CodegenConfig::TYPES
        | bindgen::CodegenConfig::VARS;
    let bindings = bindgen::Builder::default()
        .header_contents("hip_sys_wrapper.h", WRAPPER)
        .clang_args(clang_args(dir))
        .rust_target(rust_target)
        .with_codegen_config(config)
        .allowlist_function("hip.*")
        .allowlist_type("hip.*|HIP.*|ihip.*")
        .allowlist_var("hip.*|HIP.*")
        // C++ helpers in namespace hip_impl (C++ linkage, not runtime API).
        .blocklist_function("hip_impl.*")
        .default_enum_style(bindgen::EnumVariation::Consts)
        .prepend_enum_name(false)
        .derive_default(true)
        .merge_extern_blocks(true)
        // libclang drops comments of headers reached through -isystem, and the arguments stay
        // exactly those of `clang_args`: the bindings carry no header documentation.
        .generate_comments(false)
        .parse_callbacks(Box::new(Callbacks {
            files: Arc::clone(&files),
        }))
        .generate()
        .map_err(|e| {
            format!(
                "bindgen could not parse {}/hip/hip_runtime_api.h with clang arguments {:?}: {e}",
                dir.display(),
                clang_args(dir)
            )
        })?;
    let files = files.lock().map(|f| f.clone()).unwrap_or_default();
    check_hip_headers_from(dir, &files)?;
    Ok(Generated {
        text: bindings.to_string(),
        files,
    })
}

/// Fails when libclang read a `hip/` header from anywhere but `dir` (a stray `-I` from
/// `CPATH`, `CPLUS_INCLUDE_PATH` or `BINDGEN_EXTRA_CLANG_ARGS` would mix two HIP releases).
fn check_hip_headers_from(dir: &Path, files: &[PathBuf]) -> Result<(), String> {
    let canonical_dir = std::fs::canonicalize(dir).unwrap_or_else(|_| dir.to_path_buf());
    for file in files {
        let in_hip_dir = file
            .components()
            .any(|c| matches!(c, Component::Normal(name) if name == "hip"));
        if !in_hip_dir {
            continue;
        }
        let canonical = std::fs::canonicalize(file).unwrap_or_else(|_| file.clone());
        if !file.starts_with(dir) && !canonical.starts_with(&canonical_dir) {
            return Err(format!(
                "libclang read {} while parsing the HIP headers of {}: another hip/ directory \
                 is on the include path (check CPATH, CPLUS_INCLUDE_PATH and \
                 BINDGEN_EXTRA_CLANG_ARGS)",
                file.display(),
                dir.display()
            ));
        }
    }
    Ok(())
}
