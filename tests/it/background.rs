//! Compiles off the launch path (`Jit::compile_in_background`, `Jit::kernel_in_background`,
//! `SwitchingKernel`) on the testing runtime. The compiler is the fixture `fake-hipcc-act.sh`
//! copying a real gfx90a code object; a source containing `SLOW` makes it wait until the test
//! creates `$HOME/go` (so "the launch returned before the compile ended" is a fact, not a
//! timing), one containing `FAIL` makes it fail; every compile appends a line to
//! `$HOME/compiles`.

use crate::common;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use hipjit::jit::{BackgroundError, BackgroundOptions, CacheLocation, Jit, JitOptions};
use hipjit::jit::{Pending, SwitchingKernel};
use hipjit::prelude::*;
use hipjit::testing::{TestDevice, TestRuntime};

/// The kernel both code objects hold: axpy_f32(float a, const float* x, float* y, int n).
const FALLBACK: &str = "// generic axpy_f32\n";
const SPECIALISED: &str = "// SLOW: axpy_f32 for n = 1000\n";

struct Setup {
    _dir: tempfile::TempDir,
    home: PathBuf,
    jit: Arc<Jit>,
    test: TestRuntime,
}

fn setup(background: BackgroundOptions) -> Setup {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("home");
    std::fs::create_dir_all(&home).unwrap();
    std::fs::write(
        home.join("act.sh"),
        format!(
            "for a; do case \"$a\" in *.hip) src=\"$a\";; esac; done\n\
             echo $$ >> \"$HOME/compiles\"\n\
             if grep -q FAIL \"$src\"; then echo 'k.hip:1:1: error: told to fail' >&2; exit 1; fi\n\
             if grep -q SLOW \"$src\"; then\n\
               i=0; while [ ! -f \"$HOME/go\" ] && [ $i -lt 1200 ]; do sleep 0.05; i=$((i+1)); done\n\
             fi\n\
             cp {} out.hsaco\n\
             echo \"out.hsaco: $src\" > deps.d\n",
            common::code_object("kernels-gfx90a.hsaco").display()
        ),
    )
    .unwrap();
    let jit = Jit::new(JitOptions {
        compiler: Some(hipjit::compiler::selection::CompilerChoice::Hipcc),
        compiler_config: common::fake_hipcc_config(&home),
        cache: CacheLocation::Roots(vec![dir.path().join("cache")]),
        background,
        ..JitOptions::default()
    })
    .unwrap();
    let test = TestDevice::new("gfx90a")
        .unwrap()
        .host_kernel("axpy_f32", |l| {
            // SAFETY: axpy_f32(float a, const float* x, float* y, int n), checked by hipjit
            // against the code object before the launch.
            let (a, n): (f32, i32) = unsafe { (l.arg(0), l.arg(3)) };
            let n = n as usize;
            let x = unsafe { l.slice::<f32>(1, n) }.to_vec();
            let y = unsafe { l.slice_mut::<f32>(2, n) };
            for (y, x) in y.iter_mut().zip(x) {
                *y += a * x;
            }
            Ok(())
        })
        .start()
        .unwrap();
    Setup {
        _dir: dir,
        home,
        jit: Arc::new(jit),
        test,
    }
}

fn go(home: &Path) {
    std::fs::write(home.join("go"), "").unwrap();
}

fn options() -> CompileOptions {
    CompileOptions::default()
}

/// One launch of `k` (y += 2 x over 1000 elements), returning how long the call took.
fn launch(k: &SwitchingKernel, device: &Device, y: &DeviceBuffer<f32>) -> Duration {
    let n = 1000i32;
    let x = DeviceBuffer::from_slice(device, &[1.0f32; 1000]).unwrap();
    let stream = Stream::new(device, StreamFlags::NON_BLOCKING).unwrap();
    let started = Instant::now();
    // SAFETY: both kernels are axpy_f32(float, const float*, float*, int) over 1000 elements.
    unsafe {
        k.launch(
            &stream,
            LaunchConfig::for_num_elems(n as u32, 256),
            &mut args![&2.0f32, &x, y, &n],
        )
    }
    .unwrap();
    let took = started.elapsed();
    stream.synchronize().unwrap();
    took
}

#[test]
fn the_first_launch_runs_the_fallback_while_the_compile_runs_then_the_specialised_kernel() {
    let s = setup(BackgroundOptions::default());
    let device = s.test.device();
    let fallback = s
        .jit
        .kernel(device, FALLBACK, "axpy_f32", &options())
        .unwrap();
    let started = Instant::now();
    let pending = s
        .jit
        .kernel_in_background(device, SPECIALISED, "axpy_f32", &options());
    let k = SwitchingKernel::new(fallback.clone(), pending.clone());
    let y = DeviceBuffer::from_slice(device, &[0.0f32; 1000]).unwrap();
    let first = launch(&k, device, &y);
    // The compile is still waiting for `go`: the launch did not wait for it.
    assert!(!pending.is_ready());
    assert!(k.current().same_as(&fallback) && !k.is_switched());
    assert!(k.error().is_none());
    assert_eq!(y.to_vec().unwrap(), vec![2.0f32; 1000]);
    go(&s.home);
    let specialised = k.wait().unwrap().clone();
    let compile = started.elapsed();
    assert!(!specialised.same_as(&fallback));
    assert!(k.is_switched() && k.current().same_as(&specialised));
    launch(&k, device, &y);
    assert_eq!(y.to_vec().unwrap(), vec![4.0f32; 1000]);
    // Published as a normal compile: Jit::kernel is a hit on the same handle, with no compile.
    let before = common::compiles(&s.home);
    let again = s
        .jit
        .kernel(device, SPECIALISED, "axpy_f32", &options())
        .unwrap();
    assert!(again.same_as(&specialised));
    assert_eq!(common::compiles(&s.home), before);
    assert_eq!(s.test.launches().len(), 2);
    eprintln!("first launch (fallback) {first:?}, background compile and load {compile:?}");
    // A kernel already cached is ready at once.
    let hit = s
        .jit
        .kernel_in_background(device, SPECIALISED, "axpy_f32", &options());
    assert!(hit.is_ready());
}

#[test]
fn arguments_that_differ_keep_the_fallback_with_the_error() {
    let s = setup(BackgroundOptions::default());
    go(&s.home);
    let device = s.test.device();
    let fallback = s
        .jit
        .kernel(device, FALLBACK, "axpy_f32", &options())
        .unwrap();
    // axpy_f64(double a, const double* x, double* y, int n): the first argument is 8 bytes.
    let pending = s
        .jit
        .kernel_in_background(device, SPECIALISED, "axpy_f64", &options());
    let k = SwitchingKernel::new(fallback.clone(), pending);
    let err = k.wait().unwrap_err().to_string();
    assert_eq!(
        err,
        "kernel axpy_f64: not switching to the specialised kernel: its arguments (4 of 8, 8, 8, 4 \
         bytes) are not the fallback's (4 of 4, 8, 8, 4 bytes)"
    );
    assert!(matches!(
        k.error(),
        Some(BackgroundError::ArgumentsDiffer { .. })
    ));
    assert!(k.current().same_as(&fallback) && !k.is_switched());
    let y = DeviceBuffer::from_slice(device, &[0.0f32; 1000]).unwrap();
    launch(&k, device, &y);
    assert_eq!(y.to_vec().unwrap(), vec![2.0f32; 1000]);
}

#[test]
fn a_failed_compile_is_the_handles_error_and_keeps_the_fallback() {
    let s = setup(BackgroundOptions::default());
    let device = s.test.device();
    let fallback = s
        .jit
        .kernel(device, FALLBACK, "axpy_f32", &options())
        .unwrap();
    let pending = s
        .jit
        .kernel_in_background(device, "// FAIL\n", "axpy_f32", &options());
    let k = SwitchingKernel::new(fallback.clone(), pending.clone());
    let err = k.wait().unwrap_err();
    assert!(matches!(err, BackgroundError::Jit(_)), "{err:?}");
    assert!(err.to_string().contains("told to fail"), "{err}");
    assert!(matches!(pending.poll(), Some(Err(BackgroundError::Jit(_)))));
    assert!(k.current().same_as(&fallback));
    // The crate-wide error takes it.
    let e: hipjit::Error = err.clone().into();
    assert!(matches!(e, hipjit::Error::Background(_)));
    // The pool thread lives on.
    go(&s.home);
    let c = s.jit.compile_in_background(SPECIALISED, &gfx90a());
    assert!(c.wait().is_ok());
}

fn gfx90a() -> CompileOptions {
    CompileOptions::for_target("gfx90a".parse().unwrap())
}

#[test]
fn a_request_waiting_or_compiling_is_not_queued_twice_and_the_queue_is_bounded() {
    let s = setup(BackgroundOptions {
        threads: 1,
        max_queued: 1,
    });
    let a: Pending<_> = s.jit.compile_in_background(SPECIALISED, &gfx90a());
    let a2 = s.jit.compile_in_background(SPECIALISED, &gfx90a());
    // The thread takes `a` (held until `go`); then `b` waits in the queue; `c` is one too many.
    let deadline = Instant::now() + Duration::from_secs(30);
    while common::compiles(&s.home) == 0 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(10));
    }
    let b = s
        .jit
        .compile_in_background("// SLOW b\n", &gfx90a().define("B", "1"));
    let c = s.jit.compile_in_background("// SLOW c\n", &gfx90a());
    assert!(matches!(
        c.poll(),
        Some(Err(BackgroundError::QueueFull { max: 1 }))
    ));
    go(&s.home);
    let (ra, ra2) = (a.wait().as_ref().unwrap(), a2.wait().as_ref().unwrap());
    assert_eq!(ra.key(), ra2.key());
    assert!(b.wait().is_ok());
    assert_eq!(common::compiles(&s.home), 2);
    // A memory hit is ready at once.
    assert!(s
        .jit
        .compile_in_background(SPECIALISED, &gfx90a())
        .is_ready());
}

#[test]
fn dropping_the_jit_does_not_wait_for_a_compile_and_ends_the_waiting_ones() {
    let s = setup(BackgroundOptions {
        threads: 1,
        max_queued: 8,
    });
    let a = s.jit.compile_in_background(SPECIALISED, &gfx90a());
    let b = s
        .jit
        .compile_in_background("// SLOW b\n", &gfx90a().define("B", "1"));
    let deadline = Instant::now() + Duration::from_secs(30);
    while common::compiles(&s.home) == 0 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(10));
    }
    let Setup {
        _dir, home, jit, ..
    } = s;
    let started = Instant::now();
    drop(jit);
    assert!(started.elapsed() < Duration::from_secs(5));
    assert!(!a.is_ready());
    go(&home);
    // The compile under way ends with its result; the one waiting never runs.
    assert!(a.wait().is_ok());
    assert!(matches!(b.wait(), Err(BackgroundError::NotRun { .. })));
    assert_eq!(common::compiles(&home), 1);
    drop(_dir);
}
