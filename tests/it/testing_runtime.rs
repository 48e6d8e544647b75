//! The testing runtime of feature `testing` (`hipjit::testing`): a device chosen by the test,
//! real code objects compiled by the installed hipcc, kernels run by host implementations.

use std::path::PathBuf;
use std::process::Command;
use std::sync::OnceLock;

use hipjit::code_object::CodeObject;
use hipjit::error::LaunchError;
use hipjit::prelude::*;
use hipjit::testing::TestDevice;

const SOURCE: &str = r#"#include <hip/hip_runtime.h>
extern "C" __global__ void axpy(float a, const float* x, float* y, unsigned n) {
    unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = a * x[i] + y[i];
}
extern "C" __global__ void __launch_bounds__(256) bounded(float* y) { y[threadIdx.x] = 0; }
"#;

/// SOURCE compiled once by /usr/bin/hipcc for gfx90a (raw ELF).
fn code_object() -> CodeObject {
    static BYTES: OnceLock<Vec<u8>> = OnceLock::new();
    let bytes = BYTES.get_or_init(|| {
        let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
            .join(format!("testing-runtime-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("k.hip"), SOURCE).unwrap();
        let out = Command::new("/usr/bin/hipcc")
            .current_dir(&dir)
            .args(["-x", "hip", "--genco", "-O3", "--no-gpu-bundle-output"])
            .args(["--offload-arch=gfx90a", "-o", "k.co", "k.hip"])
            .output()
            .unwrap_or_else(|e| panic!("cannot run /usr/bin/hipcc ({e}): apt-get install hipcc"));
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        std::fs::read(dir.join("k.co")).unwrap()
    });
    CodeObject::from_bytes(bytes, None).unwrap()
}

fn axpy_device(target: &str) -> TestDevice {
    TestDevice::new(target).unwrap().host_kernel("axpy", |l| {
        // SAFETY: axpy(float a, const float* x, float* y, unsigned n), checked by hipjit
        // against the code object before the launch.
        let (a, n): (f32, u32) = unsafe { (l.arg(0), l.arg(3)) };
        let n = (n as u64).min(l.threads()) as usize;
        let x = unsafe { l.slice::<f32>(1, n) }.to_vec();
        let y = unsafe { l.slice_mut::<f32>(2, n) };
        for (y, x) in y.iter_mut().zip(x) {
            *y += a * x;
        }
        Ok(())
    })
}

#[test]
fn the_runtime_reports_the_chosen_device() {
    let test = TestDevice::new("gfx942:sramecc+:xnack-")
        .unwrap()
        .properties(|p| {
            p.compute_units = 80;
            p.lds_per_block = 32 * 1024;
        })
        .start()
        .unwrap();
    let d = test.device();
    assert_eq!(d.arch_name(), "gfx942:sramecc+:xnack-");
    assert_eq!(d.target_id().unwrap().processor(), "gfx942");
    let p = d.properties();
    assert_eq!((p.compute_units, p.lds_per_block), (80, 32 * 1024));
    assert_eq!(p.name, "hipjit testing device (gfx942)");
    assert_eq!(test.runtime().device_count().unwrap(), 1);
}

#[test]
fn a_real_code_object_loads_and_its_launch_runs_the_host_implementation() {
    let test = axpy_device("gfx90a:sramecc+:xnack-").start().unwrap();
    let device = test.device();
    let library = Library::load(device, &code_object()).unwrap();
    let axpy = library.kernel("axpy").unwrap();
    let stream = Stream::new(device, StreamFlags::NON_BLOCKING).unwrap();
    let n = 1000u32;
    let x = DeviceBuffer::from_slice(device, &vec![2.0f32; n as usize]).unwrap();
    let y = DeviceBuffer::from_slice(device, &vec![1.0f32; n as usize]).unwrap();
    let cfg = LaunchConfig::for_num_elems(n, 256);
    // SAFETY: axpy(float, const float*, float*, unsigned).
    unsafe { axpy.launch(&stream, cfg, &mut args![&3.0f32, &x, &y, &n]) }.unwrap();
    stream.synchronize().unwrap();
    assert_eq!(y.to_vec().unwrap(), vec![7.0f32; n as usize]);
    let launches = test.launches();
    assert_eq!(launches.len(), 1);
    assert_eq!(launches[0].kernel, "axpy");
    assert_eq!((launches[0].grid.x, launches[0].block.x), (4, 256));
    assert_eq!(launches[0].stream, stream.as_raw() as usize);
}

#[test]
fn a_kernel_without_a_host_implementation_fails_its_launch_naming_it() {
    let test = axpy_device("gfx90a").start().unwrap();
    let library = Library::load(test.device(), &code_object()).unwrap();
    let bounded = library.kernel("bounded").unwrap();
    let stream = Stream::new(test.device(), StreamFlags::empty()).unwrap();
    let y = DeviceBuffer::<f32>::zeroed(test.device(), 256).unwrap();
    // SAFETY: bounded(float*) with 256 floats; refused by the runtime.
    let err = unsafe {
        bounded.launch(
            &stream,
            LaunchConfig::for_num_elems(256, 256),
            &mut args![&y],
        )
    }
    .unwrap_err();
    let text = err.to_string();
    assert!(text.contains("hipErrorInvalidDeviceFunction"), "{text}");
    assert!(
        text.contains("no host implementation of kernel bounded"),
        "{text}"
    );
}

#[test]
fn a_panicking_host_implementation_fails_the_launch_instead_of_aborting() {
    let test = TestDevice::new("gfx90a")
        .unwrap()
        .host_kernel("bounded", |_| panic!("index 7 out of range"))
        .start()
        .unwrap();
    let library = Library::load(test.device(), &code_object()).unwrap();
    let bounded = library.kernel("bounded").unwrap();
    let stream = Stream::new(test.device(), StreamFlags::empty()).unwrap();
    let y = DeviceBuffer::<f32>::zeroed(test.device(), 256).unwrap();
    // SAFETY: bounded(float*) with 256 floats.
    let err = unsafe {
        bounded.launch(
            &stream,
            LaunchConfig::for_num_elems(256, 256),
            &mut args![&y],
        )
    }
    .unwrap_err();
    let text = err.to_string();
    assert!(text.contains("hipErrorLaunchFailure"), "{text}");
    assert!(text.contains("panicked: index 7 out of range"), "{text}");
}

#[test]
fn launch_checks_hold_the_pretended_limits_and_the_kernel_bounds() {
    let test = TestDevice::new("gfx90a")
        .unwrap()
        .properties(|p| p.lds_per_block = 16 * 1024)
        .start()
        .unwrap();
    let library = Library::load(test.device(), &code_object()).unwrap();
    let bounded = library.kernel("bounded").unwrap();
    let stream = Stream::new(test.device(), StreamFlags::empty()).unwrap();
    let y = DeviceBuffer::<f32>::zeroed(test.device(), 512).unwrap();
    // SAFETY: refused before the call: 512 threads above __launch_bounds__(256).
    let err = unsafe {
        bounded.launch(
            &stream,
            LaunchConfig::for_num_elems(512, 512),
            &mut args![&y],
        )
    }
    .unwrap_err();
    assert!(matches!(err, LaunchError::BlockThreads { .. }), "{err}");
    let cfg = LaunchConfig {
        dynamic_lds_bytes: 20 * 1024,
        ..LaunchConfig::for_num_elems(256, 256)
    };
    // SAFETY: refused before the call: 20 KiB of LDS above the device's 16 KiB.
    let err = unsafe { bounded.launch(&stream, cfg, &mut args![&y]) }.unwrap_err();
    assert!(matches!(err, LaunchError::Lds { .. }), "{err}");
    assert!(test.launches().is_empty());
}

#[test]
fn two_testing_runtimes_in_one_process_are_two_devices() {
    let a = axpy_device("gfx90a").start().unwrap();
    let b = TestDevice::new("gfx1100").unwrap().start().unwrap();
    assert_ne!(a.library_path(), b.library_path());
    assert_eq!(a.device().arch_name(), "gfx90a");
    assert_eq!(b.device().arch_name(), "gfx1100");
    assert_eq!(b.device().properties().wavefront_size, 32);
    // The gfx90a code object is refused on the gfx1100 device, naming both targets.
    let err = Library::load(b.device(), &code_object())
        .unwrap_err()
        .to_string();
    assert!(err.contains("gfx90a") && err.contains("gfx1100"), "{err}");
}

#[test]
fn a_bad_target_id_is_an_error_naming_it() {
    let err = TestDevice::new("gfx90a:xnack").unwrap_err().to_string();
    assert!(err.contains("gfx90a:xnack"), "{err}");
}
