//! The toolchains scripts/setup.sh installs, as the tests find them, and the example kernel.

use std::path::{Path, PathBuf};

/// `examples/kernels/saxpy.hip`.
pub fn saxpy() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/kernels/saxpy.hip")
}

/// `p` as text (the tests' temporary paths are UTF-8).
pub fn utf8(p: &Path) -> &str {
    p.to_str().expect("a UTF-8 path")
}

/// The nvcc of PyPI's nvidia-cuda-nvcc (cu13) under `$HIPJIT_CI_CACHE/nvcc-venv` (default
/// `/var/cache/hipjit-ci`).
pub fn pypi_nvcc() -> PathBuf {
    let cache = std::env::var_os("HIPJIT_CI_CACHE")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/var/cache/hipjit-ci"));
    std::fs::read_dir(cache.join("nvcc-venv/lib"))
        .into_iter()
        .flatten()
        .flatten()
        .map(|d| d.path().join("site-packages/nvidia/cu13/bin/nvcc"))
        .find(|p| p.is_file())
        .unwrap_or_else(|| {
            panic!(
                "no nvcc under {}/nvcc-venv: scripts/setup.sh installs it from PyPI (pip \
                 install nvidia-cuda-nvcc nvidia-cuda-crt nvidia-cuda-runtime)",
                cache.display()
            )
        })
}
