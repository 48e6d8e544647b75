//! The toolchains scripts/setup.sh installs, as the tests find them, the environment the tests
//! against the real ones assert the measured facts of, and the example kernel.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use hipjit::compiler::nvcc::Nvcc;
use hipjit::compiler::{CompilerIdentity, CompilerKind};

/// `examples/kernels/saxpy.hip`.
pub fn saxpy() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/kernels/saxpy.hip")
}

/// A saxpy kernel as source text (`y[i] = a * x[i] + y[i]`), including the HIP runtime header.
pub const SAXPY: &str = r#"
#include <hip/hip_runtime.h>
extern "C" __global__ void saxpy(float a, const float* x, float* y, unsigned n) {
    unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = a * x[i] + y[i];
}
"#;

/// The environment whose real toolchain the tests run against (`HIPJIT_TEST_ENV`).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum TestEnv {
    /// Debian 12's HIP 5.2.3 and hipcc 5.2.3 over clang-15 (the default).
    Bookworm,
    /// The sid root of scripts/sid-test.sh: hipcc 7.0.2 over clang-21, HIP 6.4.3.
    Sid,
}

/// `HIPJIT_TEST_ENV`: `bookworm` (also when unset or empty) or `sid`; any other value fails the
/// test.
pub fn test_env() -> TestEnv {
    match std::env::var("HIPJIT_TEST_ENV").as_deref() {
        Ok("sid") => TestEnv::Sid,
        Ok("bookworm") | Ok("") | Err(_) => TestEnv::Bookworm,
        Ok(other) => panic!("HIPJIT_TEST_ENV={other:?}: expected bookworm or sid"),
    }
}

/// `bash scripts/sid-run.sh`, run from the repository (which it binds): a command inside the
/// Debian sid root filesystem of scripts/setup.sh (`HIPJIT_SID_ROOT`, default
/// `/var/cache/hipjit-ci/sid-root`), whose absence (no `usr/bin/hipcc` there) fails the test.
/// The caller adds sid-run's `-e VAR=value` options, `--` and the command.
pub fn sid_run() -> Command {
    let root = std::env::var("HIPJIT_SID_ROOT")
        .unwrap_or_else(|_| "/var/cache/hipjit-ci/sid-root".to_owned());
    assert!(
        Path::new(&root).join("usr/bin/hipcc").exists(),
        "needs the Debian sid root filesystem with hipcc at {root}: run scripts/setup.sh"
    );
    let repo = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut cmd = Command::new("bash");
    cmd.arg(repo.join("scripts/sid-run.sh")).current_dir(repo);
    cmd
}

/// One identity directory for the whole test binary: each compiler is fingerprinted once.
pub fn identity_home() -> &'static Path {
    static HOME: OnceLock<tempfile::TempDir> = OnceLock::new();
    HOME.get_or_init(|| tempfile::tempdir().unwrap()).path()
}

/// A stand-in identity of the compiler `kind` at `path`, for a header manifest: no version or
/// fingerprint, and it covers no directory.
pub fn bare_identity(kind: CompilerKind, path: &Path) -> CompilerIdentity {
    CompilerIdentity {
        kind,
        path: path.to_path_buf(),
        version: String::new(),
        fingerprint: String::new(),
        covered: Vec::new(),
        root: Default::default(),
        header_dirs: Vec::new(),
        host_compiler: None,
        system_include_dirs: Vec::new(),
    }
}

/// `p` as text (the tests' temporary paths are UTF-8).
pub fn utf8(p: &Path) -> &str {
    p.to_str().expect("a UTF-8 path")
}

/// `$HIPJIT_CI_CACHE` (default `/var/cache/hipjit-ci`), where scripts/setup.sh keeps what it
/// installs.
fn ci_cache() -> PathBuf {
    std::env::var_os("HIPJIT_CI_CACHE")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/var/cache/hipjit-ci"))
}

/// The ROCm of PyPI's pytorch-triton-rocm 2.1.0 (HIP 5.4.22803: `lib/libamdhip64.so` with
/// hipRTC inside, hsa-runtime, comgr, `include/hip`), unpacked by scripts/setup.sh at
/// `$HIPJIT_CI_CACHE/rocm-5.4-triton`; a missing one fails the test saying so.
pub fn rocm_5_4() -> PathBuf {
    let dir = ci_cache().join("rocm-5.4-triton");
    assert!(
        dir.join("lib/libamdhip64.so").is_file(),
        "{} holds no lib/libamdhip64.so: run scripts/setup.sh (it unpacks the ROCm of PyPI's \
         pytorch-triton-rocm 2.1.0 there)",
        dir.display()
    );
    dir
}

/// The nvcc of PyPI's nvidia-cuda-nvcc (cu13) under `$HIPJIT_CI_CACHE/nvcc-venv`
/// (`lib/python3.*/site-packages/nvidia/cu13/bin/nvcc`), or `None` where it is not installed.
pub fn pypi_nvcc_if_installed() -> Option<PathBuf> {
    std::fs::read_dir(ci_cache().join("nvcc-venv/lib"))
        .into_iter()
        .flatten()
        .flatten()
        .map(|d| d.path().join("site-packages/nvidia/cu13/bin/nvcc"))
        .find(|p| p.is_file())
}

/// [`pypi_nvcc_if_installed`], whose absence fails the test (a panic naming scripts/setup.sh),
/// never skips it. NVRTC (`nvidia/cu13/lib/libnvrtc.so.13`) and the toolkit headers
/// (`nvidia/cu13/include`) are installed beside it.
pub fn pypi_nvcc() -> PathBuf {
    pypi_nvcc_if_installed().unwrap_or_else(|| {
        panic!(
            "no nvcc under {}/nvcc-venv: scripts/setup.sh installs nvcc and NVRTC there from \
             PyPI (pip install nvidia-cuda-nvcc nvidia-cuda-crt nvidia-cuda-runtime \
             nvidia-cuda-nvrtc nvidia-cuda-cccl)",
            ci_cache().display()
        )
    })
}

/// PyPI's CUDA toolkit: the `nvidia/cu13` directory above [`pypi_nvcc`]'s `bin/nvcc`
/// (`lib/` with NVRTC, `include/` with the toolkit headers). Fails the test where it is absent.
pub fn pypi_toolkit() -> PathBuf {
    let nvcc = pypi_nvcc();
    nvcc.ancestors()
        .nth(2)
        .expect("nvidia/cu13/bin/nvcc")
        .to_path_buf()
}

/// The nvcc of the tests that take whichever one the machine has: `HIPJIT_NVCC`'s when that is
/// set, else PyPI's ([`pypi_nvcc_if_installed`]), else the one hipjit discovers
/// (`Nvcc::discover`); none at all fails the test, naming scripts/setup.sh.
pub fn nvcc() -> Nvcc {
    if std::env::var_os("HIPJIT_NVCC").is_none() {
        if let Some(p) = pypi_nvcc_if_installed() {
            return Nvcc::at(&p).expect("run nvcc --version");
        }
    }
    Nvcc::discover(None).unwrap_or_else(|e| {
        panic!("{e}\nscripts/setup.sh installs nvcc from PyPI into $HIPJIT_CI_CACHE/nvcc-venv")
    })
}
