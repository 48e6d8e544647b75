//! Parity of NVRTC with nvcc on HIP's NVIDIA platform: HIP sources compiled through hipjit's
//! prelude by nvcc (`Nvcc::compile`, the command hipjit runs) and by NVRTC (the prelude handed
//! in memory, [`nvrtc::hip_options`]) must give the same kernels: names, parameters, parameter
//! block, launch bounds, and the same SASS (`.text.<kernel>`), byte for byte. Both come from
//! PyPI (13.5.37; scripts/setup.sh), no GPU needed.
//!
//! The corpus is tests/kernels/parity/ less what the NVIDIA platform does not have: HIP's
//! mask-less `__ballot`/`__any`/`__all` (CUDA removed them for sm_70+), so warp.hip is left out.

use crate::common;

use std::path::Path;

use hipjit::code_object::cubin::Cubin;
use hipjit::compiler::nvcc::Nvcc;
use hipjit::compiler::nvrtc::{self, NvRtc};
use hipjit::compiler::rtc::RtcInput;
use hipjit::cuda::target::SmTarget;

use common::toolchain::pypi_nvcc as venv_nvcc;

const CORPUS: &[&str] = &["atomics.hip", "basic.hip", "lds.hip", "math.hip"];

#[test]
fn nvrtc_compiles_the_corpus_to_the_same_cubins_as_nvcc() {
    let nvcc_path = venv_nvcc();
    let nvcc = Nvcc::at(&nvcc_path).unwrap();
    let rtc = NvRtc::open_with_env(Some(&nvcc_path), |_| None).unwrap();
    let include = rtc.include_dir();
    assert!(
        include.is_some(),
        "PyPI's nvidia/cu13/include holds cuda_fp16.h"
    );
    let headers = nvrtc::prelude_headers(include.as_deref());
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/kernels/parity");
    let mut kernels = 0;
    let mut diffs = Vec::new();
    for sm in [80, 90] {
        let target = SmTarget::new(sm);
        let options = nvrtc::hip_options(target, include.as_deref());
        for file in CORPUS {
            let source = std::fs::read_to_string(dir.join(file)).unwrap();
            let from_nvcc = nvcc
                .compile(&source, target, &[])
                .unwrap_or_else(|e| panic!("nvcc, {file} for {target}: {e}"));
            let from_nvcc = Cubin::from_bytes(&from_nvcc).unwrap();
            let out = rtc
                .compile(&RtcInput {
                    source: source.as_bytes(),
                    name: file,
                    headers: &headers,
                    include_dirs: &[],
                    options: &options,
                })
                .unwrap_or_else(|e| panic!("NVRTC, {file} for {target}: {e}"));
            let from_rtc = Cubin::from_bytes(&out.code).unwrap();
            let names = |c: &Cubin| {
                let mut v: Vec<String> = c.kernels().iter().map(|k| k.name.clone()).collect();
                v.sort();
                v
            };
            assert_eq!(names(&from_nvcc), names(&from_rtc), "{file} {target}");
            for k in from_nvcc.kernels() {
                kernels += 1;
                let r = from_rtc.kernel(&k.name).unwrap();
                if k != r {
                    diffs.push(format!(
                        "{file} {target} {}: metadata\n  nvcc  {k:?}\n  NVRTC {r:?}",
                        k.name
                    ));
                }
                if from_nvcc.kernel_code(&k.name).unwrap() != from_rtc.kernel_code(&k.name).unwrap()
                {
                    diffs.push(format!("{file} {target} {}: SASS differs", k.name));
                }
            }
        }
    }
    assert!(kernels >= 2 * 20, "{kernels} kernels compared");
    assert!(
        diffs.is_empty(),
        "{} differences:\n{}",
        diffs.len(),
        diffs.join("\n")
    );
}

#[test]
fn hip_fp16_without_the_toolkit_headers_is_an_error_naming_them() {
    let nvcc_path = venv_nvcc();
    let rtc = NvRtc::open_with_env(Some(&nvcc_path), |_| None).unwrap();
    let headers = nvrtc::prelude_headers(None);
    let err = rtc
        .compile(&RtcInput {
            source: b"#include <hip/hip_fp16.h>\n__global__ void k(__half* h) {}\n",
            name: "half.hip",
            headers: &headers,
            include_dirs: &[],
            options: &nvrtc::hip_options(SmTarget::new(90), None),
        })
        .unwrap_err();
    assert!(
        err.to_string()
            .contains("hip/hip_fp16.h needs the CUDA toolkit's cuda_fp16.h"),
        "{err}"
    );
}
