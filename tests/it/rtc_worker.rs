//! hipRTC and NVRTC in a worker process (`hipjit rtc-worker`, hipjit::compiler::worker): the
//! same results as in process, with a timeout, a memory bound and crash isolation. Against
//! Debian's hipRTC 5.2.3, PyPI's NVRTC 13.5, and a stand-in hipRTC
//! (tests/fixtures/fake_hiprtc.c, built here with `cc`) that aborts, hangs or allocates on
//! request.

use crate::common;
use common::fixture_lib::fake_hiprtc;

use std::path::PathBuf;
use std::time::Duration;

use hipjit::code_object::CodeObject;
use hipjit::compiler::hiprtc::{self, HipRtc};
use hipjit::compiler::nvrtc::{self, NvRtc};
use hipjit::compiler::rtc::{RtcError, RtcInput};
use hipjit::compiler::worker::{self, WorkerConfig};
use hipjit::compiler::CompilerKind;
use hipjit::cuda::target::SmTarget;
use hipjit::target_id::TargetId;

fn config() -> WorkerConfig {
    WorkerConfig {
        program: Some(PathBuf::from(env!("CARGO_BIN_EXE_hipjit"))),
        ..WorkerConfig::default()
    }
}

fn gfx90a() -> Vec<String> {
    vec![hiprtc::arch_option(&TargetId::parse("gfx90a").unwrap())]
}

const INCLUDES: &str = "#include \"shape.h\"\n\
    extern \"C\" __global__ void k(int* o) { o[threadIdx.x] = WIDTH; }\n";

fn input<'a>(source: &'a [u8], options: &'a [String], include_dirs: &'a [PathBuf]) -> RtcInput<'a> {
    RtcInput {
        source,
        name: "kern.hip",
        headers: &[],
        include_dirs,
        options,
    }
}

#[test]
fn a_hiprtc_worker_gives_what_the_in_process_compile_gives() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("shape.h"), "#define WIDTH 7\n").unwrap();
    let include_dirs = [dir.path().to_path_buf()];
    let opts = gfx90a();
    let rtc = HipRtc::open(None).unwrap();
    let here = rtc
        .compile(&input(INCLUDES.as_bytes(), &opts, &include_dirs))
        .unwrap();
    let there = worker::compile(
        &config(),
        CompilerKind::HipRtc,
        rtc.path(),
        &input(INCLUDES.as_bytes(), &opts, &include_dirs),
    )
    .unwrap();
    let kernels = |code: &[u8]| {
        let co = CodeObject::from_bytes(code, None).unwrap();
        co.kernels()
            .iter()
            .map(|k| k.name.clone())
            .collect::<Vec<_>>()
    };
    assert_eq!(kernels(&there.code), kernels(&here.code));
    assert_eq!(there.code, here.code);
    assert_eq!(there.dependencies, here.dependencies);
    assert!(there.started >= here.started);
}

#[test]
fn a_compile_error_comes_back_whole_with_its_diagnostics() {
    let opts = gfx90a();
    let rtc = HipRtc::open(None).unwrap();
    let err = worker::compile(
        &config(),
        CompilerKind::HipRtc,
        rtc.path(),
        &input(
            b"extern \"C\" __global__ void k() {}\nint bad = ;\n",
            &opts,
            &[],
        ),
    )
    .unwrap_err();
    let RtcError::Compile {
        name, diagnostics, ..
    } = &err
    else {
        panic!("{err:?}")
    };
    assert_eq!(name, "kern.hip");
    let d = &diagnostics[0];
    assert_eq!(
        (d.file.as_deref(), d.line, d.column, d.message.as_str()),
        (Some("kern.hip"), Some(2), Some(11), "expected expression")
    );
}

#[test]
fn hiprtc_5_runs_in_parallel_workers() {
    // In one process hipRTC 5.2.3 crashes when two threads compile at once; each worker has
    // its own.
    let rtc = HipRtc::open(None).unwrap();
    let library = rtc.path().to_path_buf();
    let opts = gfx90a();
    std::thread::scope(|s| {
        let handles: Vec<_> = (0..3)
            .map(|i| {
                let (library, opts) = (&library, &opts);
                s.spawn(move || {
                    let src = format!(
                        "extern \"C\" __global__ void k{i}(int* o) {{ o[threadIdx.x] = {i}; }}\n"
                    );
                    let out = worker::compile(
                        &config(),
                        CompilerKind::HipRtc,
                        library,
                        &input(src.as_bytes(), opts, &[]),
                    )
                    .unwrap();
                    let co = CodeObject::from_bytes(&out.code, None).unwrap();
                    assert!(co.kernel(&format!("k{i}")).is_ok());
                })
            })
            .collect();
        for h in handles {
            h.join().unwrap();
        }
    });
}

#[test]
fn an_nvrtc_worker_compiles_a_cubin() {
    let nvcc = common::toolchain::pypi_nvcc();
    let rtc = NvRtc::open_with_env(Some(&nvcc), |_| None).unwrap();
    let opts = vec![nvrtc::arch_option(SmTarget::new(90))];
    let src = b"extern \"C\" __global__ void k(int* o) { o[threadIdx.x] = 1; }\n";
    let here = rtc.compile(&input(src, &opts, &[])).unwrap();
    let there = worker::compile(
        &config(),
        CompilerKind::Nvrtc,
        rtc.path(),
        &input(src, &opts, &[]),
    )
    .unwrap();
    assert_eq!(there.code, here.code);
}

fn fake(source: &str, config: &WorkerConfig) -> Result<Vec<u8>, RtcError> {
    worker::compile(
        config,
        CompilerKind::HipRtc,
        fake_hiprtc(),
        &input(source.as_bytes(), &[], &[]),
    )
    .map(|o| o.code)
}

#[test]
fn the_stand_in_compiles_when_asked_nothing_odd() {
    assert_eq!(fake("plain", &config()).unwrap(), b"CODE");
}

#[test]
fn a_crash_in_the_worker_is_an_error_and_this_process_lives_on() {
    let err = fake("HIPJIT_ABORT", &config()).unwrap_err();
    let text = err.to_string();
    assert!(matches!(err, RtcError::Worker { .. }), "{err:?}");
    assert!(text.contains("was killed by signal 6 (SIGABRT)"), "{text}");
}

#[test]
fn a_compile_past_the_timeout_is_killed() {
    let config = WorkerConfig {
        timeout: Duration::from_secs(2),
        ..config()
    };
    let err = fake("HIPJIT_HANG", &config).unwrap_err();
    assert!(
        err.to_string()
            .contains("ran past the worker's timeout of 2 s and was killed"),
        "{err}"
    );
}

#[test]
fn the_memory_bound_holds_the_worker() {
    // 1 GiB of address space is refused under a 512 MiB bound and granted without one.
    let bounded = WorkerConfig {
        memory_limit: Some(512 << 20),
        ..config()
    };
    let err = fake("HIPJIT_ALLOC", &bounded).unwrap_err();
    assert!(
        err.to_string()
            .contains("killed by signal 6 (SIGABRT) (memory bound 512 MiB)"),
        "{err}"
    );
    assert_eq!(fake("HIPJIT_ALLOC", &config()).unwrap(), b"CODE");
}

#[test]
fn a_worker_program_that_cannot_run_is_named() {
    let config = WorkerConfig {
        program: Some(PathBuf::from("/nonexistent/hipjit")),
        ..WorkerConfig::default()
    };
    let err = fake("plain", &config).unwrap_err();
    assert!(
        err.to_string().contains("cannot run /nonexistent/hipjit"),
        "{err}"
    );
}
