//! The toolchains scripts/setup.sh installs, as the tests find them, and the example kernel.

use std::path::{Path, PathBuf};

use hipjit::compiler::nvcc::Nvcc;

/// `examples/kernels/saxpy.hip`.
pub fn saxpy() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/kernels/saxpy.hip")
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
