//! Tests against the real HIP runtime that hipjit's discovery finds, on a machine without a GPU.
//!
//! `HIPJIT_TEST_ENV` names the environment whose measured facts are asserted (ENVIRONMENT.md):
//! `bookworm` (or unset): Debian's HIP 5.2.3 runtime `libamdhip64.so.5`; `sid`: the sid root's
//! HIP 6.4.3 runtime `libamdhip64.so.6` (run the prebuilt test binary inside that root).
//! Tests that need a device are ignored unless asked for.

use hipjit::error::HipError;
use hipjit::runtime::{CodeObjectLoader, DevicePropertiesEntry, Found, Runtime, SymbolBinding};

use crate::common::toolchain::{test_env, TestEnv};

fn runtime() -> Runtime {
    Runtime::load().unwrap_or_else(|e| {
        panic!(
            "{e}\nno HIP runtime: on bookworm apt-get install libamdhip64-5; for sid see \
             ENVIRONMENT.md"
        )
    })
}

#[test]
fn discovery_loads_the_environments_runtime() {
    let rt = runtime();
    // The reported path is the name the dynamic loader opened (the development link
    // `libamdhip64.so` when installed); the file behind it is the versioned runtime.
    let real = std::fs::canonicalize(rt.path()).unwrap();
    let name = real.file_name().unwrap().to_str().unwrap().to_owned();
    let expected = match test_env() {
        TestEnv::Bookworm => "libamdhip64.so.5.2.21153",
        TestEnv::Sid => "libamdhip64.so.6.4.43484",
    };
    assert_eq!(name, expected, "{:?}", rt.path());
    // Other tests of this binary may have loaded it already.
    assert!(
        matches!(rt.found(), Found::Soname | Found::AlreadyLoaded),
        "{:?}",
        rt.found()
    );
}

#[test]
fn second_load_finds_the_runtime_already_loaded() {
    let first = runtime();
    let second = runtime();
    assert_eq!(second.found(), &Found::AlreadyLoaded);
    assert_eq!(
        std::fs::canonicalize(second.path()).unwrap(),
        std::fs::canonicalize(first.path()).unwrap()
    );
}

#[test]
fn runtime_reports_its_version() {
    let v = runtime().version().expect("hipRuntimeGetVersion");
    match test_env() {
        TestEnv::Bookworm => {
            assert_eq!(v.0, 50221153);
            assert_eq!(v.to_string(), "5.2.21153");
        }
        TestEnv::Sid => assert_eq!((v.major(), v.minor()), (6, 4), "{v}"),
    }
}

/// 100 * major + minor of the headers this test binary's hip-sys was built from.
fn header_version() -> i32 {
    (hipjit::sys::HIP_VERSION_MAJOR * 100 + hipjit::sys::HIP_VERSION_MINOR) as i32
}

#[test]
fn properties_entry_point_is_what_the_headers_would_call() {
    // HIP 5.2.3 exports only the unversioned (5.x layout) entry point. HIP 6.4.3 exports both:
    // headers of HIP 6.0+ call hipGetDevicePropertiesR0600, older ones the unversioned name.
    let expected = match test_env() {
        TestEnv::Bookworm => DevicePropertiesEntry::R0000,
        TestEnv::Sid if header_version() >= 600 => DevicePropertiesEntry::R0600,
        TestEnv::Sid => DevicePropertiesEntry::R0000,
    };
    assert_eq!(runtime().device_properties_entry(), expected);
}

#[test]
fn symbols_are_bound_by_proc_address_where_exported_and_answered() {
    // HIP 5.2.3 has no hipGetProcAddress (HIP 6.1+). HIP 6.4.3 exports it (nm -D:
    // hipGetProcAddress@@hip_6.1) but, without a GPU, answers every lookup with
    // hipErrorNoDevice: binding falls back to dlsym and says so.
    let expected = match test_env() {
        TestEnv::Bookworm => SymbolBinding::Dlsym,
        TestEnv::Sid => SymbolBinding::DlsymAfterRefusal {
            hip_version: header_version(),
            code: 100,
        },
    };
    assert_eq!(runtime().symbol_binding(), expected);
}

#[test]
fn runtime_without_library_api_loads_through_module_api() {
    let rt = runtime();
    assert_eq!(rt.code_object_loader(), CodeObjectLoader::ModuleApi);
    let err = rt.require_library_api().unwrap_err();
    assert_eq!(err.symbol, "hipLibraryLoadFromFile");
}

#[test]
fn code_object_versions_follow_the_table() {
    let expected: &[u32] = match test_env() {
        TestEnv::Bookworm => &[4, 5],
        TestEnv::Sid => &[4, 5, 6],
    };
    assert_eq!(runtime().code_object_versions(), Some(expected));
}

#[test]
fn cooperative_launch_availability_matches_the_runtime() {
    // HIP 5.2 has no hipModuleLaunchCooperativeKernel; HIP 6.x exports it.
    let expected = test_env() == TestEnv::Sid;
    assert_eq!(runtime().has_cooperative_launch(), expected);
}

fn assert_hip_error(err: &HipError, call: &str, name: &str, code: i32) {
    assert_eq!(err.call(), call, "{err}");
    assert_eq!(err.name(), name, "{err}");
    assert_eq!(err.code(), code, "{err}");
}

/// The runtime's own string for hipErrorNoDevice (measured: Debian's 5.2.3 answers with the
/// name itself).
fn no_device_string() -> &'static str {
    match test_env() {
        TestEnv::Bookworm => "hipErrorNoDevice",
        TestEnv::Sid => "no ROCm-capable device is detected",
    }
}

#[test]
fn device_count_without_a_gpu_is_hip_error_no_device() {
    let err = runtime().device_count().unwrap_err();
    assert_hip_error(&err, "hipGetDeviceCount", "hipErrorNoDevice", 100);
    assert_eq!(
        err.to_string(),
        format!(
            "hipGetDeviceCount failed: hipErrorNoDevice (100): {}",
            no_device_string()
        )
    );
}

#[test]
fn opening_a_device_without_a_gpu_is_hip_error_no_device() {
    let err = runtime().device(0).unwrap_err();
    assert_hip_error(&err, "hipGetDeviceCount", "hipErrorNoDevice", 100);
    assert_eq!(err.message(), no_device_string());
}

#[test]
fn hip_init_without_a_gpu_is_the_runtimes_error() {
    let err = runtime().init().unwrap_err();
    match test_env() {
        // Measured: HIP 5.2.3 answers hipInit with hipErrorInvalidDevice, 6.4.3 with
        // hipErrorNoDevice.
        TestEnv::Bookworm => {
            assert_hip_error(&err, "hipInit", "hipErrorInvalidDevice", 101);
            assert_eq!(err.message(), "hipErrorInvalidDevice");
        }
        TestEnv::Sid => {
            assert_hip_error(&err, "hipInit", "hipErrorNoDevice", 100);
            assert_eq!(err.message(), no_device_string());
        }
    }
}

#[test]
fn optional_families_match_the_runtime() {
    let rt = runtime();
    let present = |name: &str| {
        rt.optional_symbols()
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, p)| *p)
            .unwrap()
    };
    assert!(present(
        "hipModuleOccupancyMaxActiveBlocksPerMultiprocessor"
    ));
    assert!(present("hipFuncSetAttribute"));
    for s in hipjit::runtime::LIBRARY_API_SYMBOLS {
        assert!(!present(s), "{s}");
    }
}

#[test]
fn the_capture_and_graph_api_is_exported() {
    // HIP 5.2.3 and 6.4.3 both export every entry point hipjit's graphs use.
    let rt = runtime();
    for name in [
        "hipStreamBeginCapture",
        "hipStreamEndCapture",
        "hipStreamIsCapturing",
        "hipThreadExchangeStreamCaptureMode",
        "hipGraphInstantiateWithFlags",
        "hipGraphLaunch",
        "hipGraphDestroy",
        "hipGraphExecDestroy",
        "hipGraphGetNodes",
        "hipGraphNodeGetType",
        "hipGraphExecKernelNodeSetParams",
    ] {
        let present = rt
            .optional_symbols()
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, p)| *p);
        assert_eq!(present, Some(true), "{name}");
    }
}

#[test]
#[ignore = "needs a GPU: compiles a kernel for device 0's target ID, loads it, launches it"]
fn end_to_end_on_a_gpu_scales_a_buffer() {
    use hipjit::args;
    use hipjit::code_object::CodeObject;
    use hipjit::launch::LaunchConfig;
    use hipjit::library::Library;
    use hipjit::memory::DeviceBuffer;
    use hipjit::stream::{Stream, StreamFlags};

    let rt = runtime();
    let dev = rt.device(0).unwrap();
    let target = dev.target_id().expect("device target ID").clone();
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("scale.hip");
    std::fs::write(
        &src,
        "#include <hip/hip_runtime.h>\nextern \"C\" __global__ void scale(float* x, float a, \
         unsigned n) { unsigned i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) x[i] *= a; }\n",
    )
    .unwrap();
    let out = dir.path().join("scale.co");
    let status = std::process::Command::new("hipcc")
        .args(["-x", "hip", "--genco", "-O3", "--no-gpu-bundle-output"])
        .arg(format!("--offload-arch={target}"))
        .arg("-o")
        .arg(&out)
        .arg(&src)
        .status()
        .expect("hipcc on PATH");
    assert!(status.success());
    let co = CodeObject::from_bytes(&std::fs::read(&out).unwrap(), Some(&target)).unwrap();
    let lib = Library::load(&dev, &co).unwrap();
    let kernel = lib.kernel("scale").unwrap();
    let stream = Stream::new(&dev, StreamFlags::NON_BLOCKING).unwrap();
    let n = 1000u32;
    let host: Vec<f32> = (0..n).map(|i| i as f32).collect();
    let buf = DeviceBuffer::from_slice(&dev, &host).unwrap();
    // SAFETY: scale(float*, float, unsigned) with a buffer of n floats.
    unsafe {
        kernel.launch(
            &stream,
            LaunchConfig::for_num_elems(n, 256),
            &mut args![&buf, &2.0f32, &n],
        )
    }
    .unwrap();
    stream.synchronize().unwrap();
    let expected: Vec<f32> = host.iter().map(|x| x * 2.0).collect();
    assert_eq!(buf.to_vec().unwrap(), expected);
}

#[test]
fn stream_ordered_allocator_is_exported_by_hip_5_2_and_6_4() {
    // hipMallocAsync and hipFreeAsync arrived in HIP 5.1 (symbol version hip_5.1 in both
    // runtimes), so alloc_async takes the stream-ordered path on both, not the fallback.
    assert!(runtime().has_stream_ordered_alloc());
}
