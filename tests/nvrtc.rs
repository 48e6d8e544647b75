//! NVRTC, the in-process compiler of HIP's NVIDIA platform, against the real library: PyPI's
//! nvidia-cuda-nvrtc, which scripts/setup.sh installs beside nvcc in
//! `$HIPJIT_CI_CACHE/nvcc-venv` (`nvidia/cu13/lib/libnvrtc.so.13` beside
//! `nvidia/cu13/bin/nvcc`). No GPU is needed to compile cubins.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use hipjit::code_object::cubin::Cubin;
use hipjit::compiler::nvrtc::{self, NvRtc};
use hipjit::compiler::rtc::{RtcError, RtcInput};
use hipjit::cuda::target::SmTarget;

/// The PyPI nvcc of scripts/setup.sh's venv.
fn venv_nvcc() -> PathBuf {
    let cache = std::env::var_os("HIPJIT_CI_CACHE")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/var/cache/hipjit-ci"));
    let lib = cache.join("nvcc-venv/lib");
    std::fs::read_dir(&lib)
        .into_iter()
        .flatten()
        .flatten()
        .map(|d| d.path().join("site-packages/nvidia/cu13/bin/nvcc"))
        .find(|p| p.is_file())
        .unwrap_or_else(|| {
            panic!(
                "no nvcc under {}: scripts/setup.sh installs nvcc and NVRTC from PyPI there",
                lib.display()
            )
        })
}

/// NVRTC found the way hipjit finds it beside an nvcc, with no variable set.
fn nvrtc() -> NvRtc {
    NvRtc::open_with_env(Some(&venv_nvcc()), |_| None).unwrap_or_else(|e| panic!("{e}"))
}

const SAXPY: &str = r#"
extern "C" __global__ void saxpy(float a, const float* x, float* y, unsigned n) {
    unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = a * x[i] + y[i];
}
template <int N> __global__ void scale(float* x) { x[threadIdx.x] *= N; }
template __global__ void scale<3>(float*);
"#;

fn sm90() -> Vec<String> {
    vec![
        nvrtc::arch_option(SmTarget::new(90)),
        "-default-device".to_owned(),
    ]
}

fn input<'a>(source: &'a [u8], options: &'a [String]) -> RtcInput<'a> {
    RtcInput {
        source,
        name: "saxpy.cu",
        headers: &[],
        options,
    }
}

#[test]
fn nvrtc_is_found_beside_pips_nvcc() {
    let nvcc = venv_nvcc();
    let rtc = nvrtc();
    let lib_dir = nvcc.parent().unwrap().parent().unwrap().join("lib");
    assert_eq!(rtc.path().parent(), Some(lib_dir.as_path()), "{rtc:?}");
    assert!(rtc.found().starts_with("beside "), "{rtc:?}");
    assert_eq!(
        rtc.version().map(|v| v.0),
        Some(13),
        "PyPI's nvidia-cuda-nvrtc 13.5"
    );
}

#[test]
fn saxpy_compiles_to_an_sm_90_cubin() {
    let out = nvrtc().compile(&input(SAXPY.as_bytes(), &sm90())).unwrap();
    let cubin = Cubin::from_bytes(&out.code).unwrap();
    assert_eq!(cubin.target(), SmTarget::new(90));
    let mut names: Vec<&str> = cubin.kernels().iter().map(|k| k.name.as_str()).collect();
    names.sort();
    assert_eq!(names, ["_Z5scaleILi3EEvPf", "saxpy"]);
}

#[test]
fn a_virtual_architecture_is_refused_before_compiling() {
    let opts = vec!["-arch=compute_90".to_owned()];
    let err = nvrtc()
        .compile(&input(SAXPY.as_bytes(), &opts))
        .unwrap_err();
    let RtcError::Arch { arch, reason, .. } = &err else {
        panic!("{err:?}")
    };
    assert_eq!(arch, "compute_90");
    assert!(reason.contains("use sm_90"), "{err}");
}

#[test]
fn a_syntax_error_returns_the_program_log() {
    let source = "extern \"C\" __global__ void k(int* o) { o[0] = 1; }\nint bad = ;\n";
    let err = nvrtc()
        .compile(&RtcInput {
            name: "broken.cu",
            ..input(source.as_bytes(), &sm90())
        })
        .unwrap_err();
    let RtcError::Compile { log, .. } = &err else {
        panic!("{err:?}")
    };
    // NVRTC's format: `name(line): error: ...`, no column.
    assert!(
        log.contains("broken.cu(2): error: expected an expression"),
        "{log}"
    );
}

#[test]
fn headers_in_memory_are_included() {
    let headers = vec![("shape.h".to_owned(), b"#define WIDTH 7\n".to_vec())];
    let source =
        "#include \"shape.h\"\nextern \"C\" __global__ void fill(int* o) { o[0] = WIDTH; }\n";
    let out = nvrtc()
        .compile(&RtcInput {
            headers: &headers,
            ..input(source.as_bytes(), &sm90())
        })
        .unwrap();
    let cubin = Cubin::from_bytes(&out.code).unwrap();
    assert!(cubin.kernel("fill").is_ok());
}

#[test]
fn a_nul_byte_in_a_header_is_refused_before_compiling() {
    let headers = vec![("shape.h".to_owned(), b"#define WIDTH 7\0\n".to_vec())];
    let err = nvrtc()
        .compile(&RtcInput {
            headers: &headers,
            ..input(b"#include \"shape.h\"\n", &sm90())
        })
        .unwrap_err();
    let RtcError::NulByte { what, offset, .. } = &err else {
        panic!("{err:?}")
    };
    assert_eq!((what.as_str(), *offset), ("header \"shape.h\"", 15));
}

#[test]
fn the_variable_wins_and_a_bad_value_is_an_error_naming_it() {
    let lib = nvrtc().path().to_path_buf();
    let env = |name: &str| (name == nvrtc::NVRTC_LIBRARY_ENV).then(|| lib.clone().into_os_string());
    let rtc = NvRtc::open_with_env(None, env).unwrap();
    assert_eq!(rtc.found(), nvrtc::NVRTC_LIBRARY_ENV);
    let bad = |name: &str| (name == nvrtc::NVRTC_LIBRARY_ENV).then(|| OsString::from("libm.so.6"));
    let err = NvRtc::open_with_env(None, bad).unwrap_err();
    assert!(
        matches!(
            err,
            RtcError::MissingSymbol {
                symbol: "nvrtcCreateProgram",
                ..
            }
        ),
        "{err:?}"
    );
}

#[test]
fn every_candidate_is_listed_when_none_opens() {
    let empty = tempfile::tempdir().unwrap();
    let cuda_path = empty.path().to_path_buf();
    let env = move |name: &str| (name == "CUDA_PATH").then(|| cuda_path.clone().into_os_string());
    let fake_nvcc = Path::new("/nonexistent/cuda/bin/nvcc");
    match NvRtc::open_with_env(Some(fake_nvcc), env) {
        Err(err @ RtcError::NotFound { .. }) => {
            let text = err.to_string();
            assert!(
                text.contains(&format!(
                    "{}/lib64 (lib64 under CUDA_PATH)",
                    empty.path().display()
                )),
                "{text}"
            );
            assert!(
                text.contains("/nonexistent/cuda/lib (beside /nonexistent/cuda/bin/nvcc)"),
                "{text}"
            );
            assert!(text.contains("libnvrtc.so.13 (dynamic loader)"), "{text}");
        }
        // The dynamic loader may know an NVRTC of the machine: then it is the last resort.
        Ok(rtc) => assert_eq!(rtc.found(), "dynamic loader"),
        Err(other) => panic!("{other:?}"),
    }
}

#[test]
fn the_identity_lists_the_library_and_its_builtins() {
    let files = nvrtc().identity_files();
    let names: Vec<String> = files
        .iter()
        .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
        .collect();
    assert_eq!(
        names,
        ["libnvrtc-builtins.so.13.5", "libnvrtc.so.13"],
        "{files:?}"
    );
}
