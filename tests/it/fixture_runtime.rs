//! Tests against fixture HIP runtimes: small C shared libraries (`tests/fixtures/fake_hip.c`)
//! compiled here with `cc`, exporting chosen symbol sets. They stand in for HIP runtimes that
//! cannot be had on a machine without an AMD GPU: a ROCm 7.2+ runtime with the whole library
//! API, a distro runtime exporting three of its five symbols, drop-in runtimes with only the
//! classic entry points, and a runtime with one device (target ID `gfx90a:sramecc+:xnack-`,
//! 104 compute units) whose "device memory" is host memory and whose `scale` kernel runs on the
//! host. Code objects are real: compiled by the installed hipcc.

#[allow(dead_code)]
mod fx {
    // Shared helpers of the fixture-runtime tests: building fixture HIP runtimes
    // (`tests/fixtures/fake_hip.c`) with `cc`, reading their call record, and compiling a real code
    // object with the installed `hipcc`.
    //
    // The fixtures stand in for HIP runtimes that cannot be had on a machine without an AMD GPU
    // (ROCm 7.2+ runtimes with the library API, distro runtimes exporting part of it, drop-in
    // runtimes, a runtime with one device). Their documentation is in the C source.

    use std::path::{Path, PathBuf};
    use std::process::Command;
    use std::sync::OnceLock;

    use crate::common::fixture_lib;

    /// The header set whose `hipDeviceProp_t` layout the fixture's properties entry point uses.
    #[derive(Clone, Copy, Debug)]
    pub enum Props {
        /// Debian's HIP 5.2 headers (`/usr/include/hip`): exports `hipGetDeviceProperties` with the
        /// 5.x layout.
        Hip5,
        /// The sid root's HIP 6.4 headers: exports `hipGetDevicePropertiesR0600` with the 6.0 layout.
        Hip6,
    }

    const SID_HIP: &str = "/var/cache/hipjit-ci/sid-root/usr/include/hip";

    /// Compiles the fixture runtime with `defines` into a directory of its own named `name` and
    /// returns the library's path.
    pub fn build(name: &str, defines: &[&str], props: Props) -> PathBuf {
        let dir = Path::new(env!("CARGO_TARGET_TMPDIR"))
            .join("fixture-runtimes")
            .join(name);
        std::fs::create_dir_all(&dir).unwrap();
        let out = dir.join("libamdhip64.so");
        let mut flags: Vec<String> = defines.iter().map(|d| format!("-D{d}")).collect();
        match props {
            Props::Hip5 => {
                assert!(
                    Path::new("/usr/include/hip/hip_runtime_api.h").exists(),
                    "the HIP 5.2 headers are missing: apt-get install libamdhip64-dev"
                );
            }
            Props::Hip6 => {
                assert!(
                    Path::new(SID_HIP).join("hip_runtime_api.h").exists(),
                    "the sid root's HIP 6.4 headers are missing ({SID_HIP}): see ENVIRONMENT.md"
                );
                // Only the hip/ directory of the sid root: its libc headers need glibc 2.38.
                let inc = dir.join("include");
                std::fs::create_dir_all(&inc).unwrap();
                let link = inc.join("hip");
                if !link.exists() {
                    std::os::unix::fs::symlink(SID_HIP, &link).unwrap();
                }
                flags.push("-I".to_owned());
                flags.push(inc.to_str().expect("a UTF-8 path").to_owned());
            }
        }
        let flags: Vec<&str> = flags.iter().map(String::as_str).collect();
        fixture_lib::hip_runtime(&out, &flags);
        out
    }

    pub use crate::common::fixture_lib::log;

    /// The HIP source of the test kernels: `scale` (x[i] *= a for i < n) and a device global
    /// `table` of 4 floats.
    pub const SCALE_SRC: &str = r#"#include <hip/hip_runtime.h>
    __device__ float table[4];
    extern "C" __global__ void scale(float* x, float a, unsigned n) {
        unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
        if (i < n) x[i] *= a;
    }
    "#;

    /// Compiles [`SCALE_SRC`] with Debian's hipcc for `arch` into a raw ELF code object.
    pub fn scale_code_object(arch: &str) -> Vec<u8> {
        static GFX90A: OnceLock<Vec<u8>> = OnceLock::new();
        static GFX906: OnceLock<Vec<u8>> = OnceLock::new();
        let cell = match arch {
            "gfx90a" => &GFX90A,
            "gfx906" => &GFX906,
            other => panic!("no cell for {other}"),
        };
        cell.get_or_init(|| compile(arch)).clone()
    }

    fn compile(arch: &str) -> Vec<u8> {
        let dir = Path::new(env!("CARGO_TARGET_TMPDIR"))
            .join("fixture-code-objects")
            .join(format!("{arch}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let src = dir.join("scale.hip");
        std::fs::write(&src, SCALE_SRC).unwrap();
        let out = dir.join("scale.co");
        let output = Command::new("/usr/bin/hipcc")
            .args(["-x", "hip", "--genco", "-O3", "--no-gpu-bundle-output"])
            .arg(format!("--offload-arch={arch}"))
            .arg("-o")
            .arg(&out)
            .arg(&src)
            .output()
            .unwrap_or_else(|e| panic!("cannot run /usr/bin/hipcc ({e}): apt-get install hipcc"));
        assert!(
            output.status.success(),
            "hipcc failed:\n{}",
            String::from_utf8_lossy(&output.stderr)
        );
        std::fs::read(&out).unwrap()
    }

    /// Position of the first line of `log` starting with `prefix`.
    pub fn position(log: &[String], prefix: &str) -> Option<usize> {
        log.iter().position(|l| l.starts_with(prefix))
    }

    /// Lines of `log` starting with `prefix`.
    pub fn lines<'a>(log: &'a [String], prefix: &str) -> Vec<&'a str> {
        log.iter()
            .filter(|l| l.starts_with(prefix))
            .map(String::as_str)
            .collect()
    }
}

use std::path::{Path, PathBuf};

use fx::{build, lines, log, position, scale_code_object, Props};
use hipjit::code_object::CodeObject;
use hipjit::error::{HipError, LaunchError, LibraryError, LoadError};
use hipjit::event::{Event, EventFlags};
use hipjit::launch::LaunchConfig;
use hipjit::library::Library;
use hipjit::memory::{async_scope, DeviceBuffer, PinnedBuffer};
use hipjit::runtime::{CodeObjectLoader, DevicePropertiesEntry, Found, Runtime};
use hipjit::stream::{AsStream, Stream, StreamFlags};
use hipjit::{args, target_id::TargetId};

const FIXTURE_VERSION: &str = "7.2.53211 (70253211)";

fn library_api_error(path: &Path, symbol: &str) -> String {
    format!(
        "the HIP runtime {} (version {FIXTURE_VERSION}) does not export {symbol}: the HIP library \
         API (hipLibraryLoadFromFile, hipLibraryGetKernelCount, hipLibraryEnumerateKernels, \
         hipKernelGetFunction, hipLibraryUnload; ROCm 7.2 and later) is incomplete",
        path.display()
    )
}

fn load(path: &PathBuf) -> Runtime {
    Runtime::load_from(path).unwrap_or_else(|e| panic!("loading {}: {e}", path.display()))
}

fn gfx90a() -> CodeObject {
    CodeObject::from_bytes(&scale_code_object("gfx90a"), None).unwrap()
}

#[test]
fn library_api_0_of_5_uses_module_api_and_names_first_missing_symbol() {
    let path = build("lib0", &["LIBRARY_API=0"], Props::Hip6);
    let rt = load(&path);
    assert_eq!(rt.code_object_loader(), CodeObjectLoader::ModuleApi);
    let err = rt.require_library_api().unwrap_err();
    assert_eq!(
        err.to_string(),
        library_api_error(&path, "hipLibraryLoadFromFile")
    );
}

#[test]
fn library_api_3_of_5_uses_module_api_and_names_hip_library_enumerate_kernels() {
    let path = build("lib3", &["LIBRARY_API=3"], Props::Hip6);
    let rt = load(&path);
    assert_eq!(rt.code_object_loader(), CodeObjectLoader::ModuleApi);
    let err = rt.require_library_api().unwrap_err();
    assert_eq!(
        err.to_string(),
        library_api_error(&path, "hipLibraryEnumerateKernels")
    );
    assert_eq!(err.symbol, "hipLibraryEnumerateKernels");
}

#[test]
fn library_api_5_of_5_uses_library_api() {
    let path = build("lib5", &["LIBRARY_API=5"], Props::Hip6);
    let rt = load(&path);
    rt.require_library_api().unwrap();
    assert_eq!(rt.code_object_loader(), CodeObjectLoader::LibraryApi);
}

#[test]
fn drop_in_shape_uses_module_api_and_classic_properties_entry() {
    let path = build("dropin", &["LIBRARY_API=0"], Props::Hip5);
    let rt = load(&path);
    assert_eq!(rt.code_object_loader(), CodeObjectLoader::ModuleApi);
    assert_eq!(rt.device_properties_entry(), DevicePropertiesEntry::R0000);
    assert!(!rt.has_cooperative_launch());
    let err = rt.require_library_api().unwrap_err();
    assert_eq!(
        err.to_string(),
        library_api_error(&path, "hipLibraryLoadFromFile")
    );
}

#[test]
fn reported_path_is_the_library_loaded() {
    let path = build("path", &[], Props::Hip6);
    let rt = load(&path);
    assert_eq!(rt.path(), path);
    assert_eq!(rt.found(), &Found::Explicit);
    assert_eq!(rt.version().unwrap().0, 70253211);
}

fn check_gfx90a_properties(rt: &Runtime) {
    let dev = rt.device(0).unwrap();
    let p = dev.properties();
    assert_eq!(p.name, "hipjit fixture device");
    assert_eq!(p.arch_name, "gfx90a:sramecc+:xnack-");
    assert_eq!(
        dev.target_id(),
        Some(&TargetId::parse("gfx90a:sramecc+:xnack-").unwrap())
    );
    assert_eq!(p.wavefront_size, 64);
    assert_eq!(p.compute_units, 104);
    assert_eq!(p.lds_per_block, 65536);
    assert_eq!(p.max_threads_per_block, 1024);
    assert_eq!(p.max_block_dims, [1024, 1024, 1024]);
    assert_eq!(p.max_grid_dims, [2147483647, 65536, 65536]);
    assert_eq!(p.clock_khz, 1700000);
    assert_eq!(p.total_global_mem, 64 << 30);
    assert_eq!(p.total_const_mem, 2147483648);
    assert_eq!(p.l2_cache_bytes, 8388608);
    assert_eq!(p.registers_per_block, 65536);
}

#[test]
fn r0600_entry_point_is_chosen_and_read_with_the_6_0_layout() {
    let path = build("props6", &[], Props::Hip6);
    let rt = load(&path);
    assert_eq!(rt.device_properties_entry(), DevicePropertiesEntry::R0600);
    check_gfx90a_properties(&rt);
}

#[test]
fn classic_entry_point_is_read_with_the_5_x_layout() {
    let path = build("props5", &[], Props::Hip5);
    let rt = load(&path);
    assert_eq!(rt.device_properties_entry(), DevicePropertiesEntry::R0000);
    check_gfx90a_properties(&rt);
}

#[test]
fn missing_required_symbol_is_named_with_path_and_version() {
    let path = build("nolaunch", &["NO_LAUNCH"], Props::Hip6);
    let err = Runtime::load_from(&path).unwrap_err();
    assert!(matches!(
        err,
        LoadError::MissingSymbol {
            symbol: "hipModuleLaunchKernel",
            ..
        }
    ));
    assert_eq!(
        err.to_string(),
        format!(
            "the HIP runtime {} (version {FIXTURE_VERSION}) does not export the required symbol \
             hipModuleLaunchKernel",
            path.display()
        )
    );
}

#[test]
fn explicit_path_that_does_not_exist_is_an_open_error_naming_it() {
    let err = Runtime::load_from("/nonexistent/libamdhip64.so").unwrap_err();
    assert!(matches!(err, LoadError::Open { .. }), "{err:?}");
    assert!(
        err.to_string()
            .starts_with("cannot load the HIP runtime /nonexistent/libamdhip64.so: "),
        "{err}"
    );
}

#[test]
fn env_library_set_but_invalid_is_an_error_not_a_fallthrough() {
    let env = |name: &str| {
        (name == "HIPJIT_HIP_LIBRARY").then(|| std::ffi::OsString::from("/nonexistent/libhip.so"))
    };
    let err = Runtime::load_with_env(&env).unwrap_err();
    assert!(matches!(err, LoadError::InvalidEnvPath { .. }), "{err:?}");
    assert!(
        err.to_string()
            .starts_with("HIPJIT_HIP_LIBRARY=/nonexistent/libhip.so cannot be loaded: "),
        "{err}"
    );
}

#[test]
fn env_library_is_loaded_first() {
    let path = build("env", &[], Props::Hip6);
    let p = path.clone().into_os_string();
    let env = move |name: &str| (name == "HIPJIT_HIP_LIBRARY").then(|| p.clone());
    let rt = Runtime::load_with_env(&env).unwrap();
    assert_eq!(rt.found(), &Found::Env);
    assert_eq!(rt.path(), path);
}

#[test]
fn full_path_on_library_api_fixture_scales_a_buffer() {
    let path = build("full5", &["LIBRARY_API=5"], Props::Hip6);
    let rt = load(&path);
    let dev = rt.device(0).unwrap();
    let co = gfx90a();
    let lib = Library::load(&dev, &co).unwrap();
    assert_eq!(lib.loader(), CodeObjectLoader::LibraryApi);
    let kernel = lib.kernel("scale").unwrap();
    let stream = Stream::new(&dev, StreamFlags::NON_BLOCKING).unwrap();
    let n = 300u32;
    let host: Vec<f32> = (0..n).map(|i| i as f32).collect();
    let buf = DeviceBuffer::from_slice(&dev, &host).unwrap();
    let cfg = LaunchConfig::for_num_elems(n, 128);
    // SAFETY: scale(float*, float, unsigned) with a buffer of n floats.
    unsafe { kernel.launch(&stream, cfg, &mut args![&buf, &3.0f32, &n]) }.unwrap();
    stream.synchronize().unwrap();
    let out = buf.to_vec().unwrap();
    let expected: Vec<f32> = (0..n).map(|i| i as f32 * 3.0).collect();
    assert_eq!(out, expected);
    let log = log(&path);
    let launch = lines(&log, "hipModuleLaunchKernel scale ");
    assert_eq!(launch.len(), 1, "{log:#?}");
    assert!(
        launch[0].starts_with("hipModuleLaunchKernel scale grid=3,1,1 block=128,1,1 lds=0 "),
        "{}",
        launch[0]
    );
    assert!(
        position(&log, "hipLibraryLoadFromFile").is_some(),
        "{log:#?}"
    );
    assert!(
        position(&log, "hipKernelGetFunction scale").is_some(),
        "{log:#?}"
    );
    assert!(position(&log, "hipModuleLoadData").is_none(), "{log:#?}");
}

#[test]
fn module_api_fixture_loads_through_hip_module_load_data() {
    let path = build("full3", &["LIBRARY_API=3"], Props::Hip6);
    let rt = load(&path);
    let dev = rt.device(0).unwrap();
    let lib = Library::load(&dev, &gfx90a()).unwrap();
    assert_eq!(lib.loader(), CodeObjectLoader::ModuleApi);
    let _k = lib.kernel("scale").unwrap();
    let log = log(&path);
    assert!(position(&log, "hipModuleLoadData").is_some(), "{log:#?}");
    assert!(
        position(&log, "hipModuleGetFunction scale").is_some(),
        "{log:#?}"
    );
    assert!(
        position(&log, "hipLibraryLoadFromFile").is_none(),
        "{log:#?}"
    );
}

#[test]
fn every_create_has_its_destroy_and_unload_follows_the_last_kernel() {
    let path = build("record", &["LIBRARY_API=0"], Props::Hip6);
    let rt = load(&path);
    let dev = rt.device(0).unwrap();
    {
        let lib = Library::load(&dev, &gfx90a()).unwrap();
        let stream = Stream::new(&dev, StreamFlags::empty()).unwrap();
        let start = Event::new(&dev, EventFlags::empty()).unwrap();
        let end = Event::new(&dev, EventFlags::empty()).unwrap();
        let buf = DeviceBuffer::<f32>::zeroed(&dev, 64).unwrap();
        let pinned = PinnedBuffer::<f32>::zeroed(&dev, 64).unwrap();
        {
            let kernel = lib.kernel("scale").unwrap();
            start.record(&stream).unwrap();
            let n = 64u32;
            // SAFETY: scale(float*, float, unsigned) with a buffer of 64 floats.
            unsafe {
                kernel.launch(
                    &stream,
                    LaunchConfig::for_num_elems(n, 64),
                    &mut args![&buf, &1.0f32, &n],
                )
            }
            .unwrap();
            end.record(&stream).unwrap();
            end.synchronize().unwrap();
            assert_eq!(start.elapsed_ms(&end).unwrap(), 1.5);
            drop(pinned);
        }
        // The kernel is gone, the library is not: nothing unloaded yet.
        assert!(position(&log(&path), "hipModuleUnload").is_none());
        drop(lib);
        let after = log(&path);
        let unload = position(&after, "hipModuleUnload").unwrap();
        let last_launch = after
            .iter()
            .rposition(|l| l.starts_with("hipModuleLaunchKernel"))
            .unwrap();
        assert!(unload > last_launch);
        drop((stream, start, end, buf));
    }
    let log = log(&path);
    let handles = |prefix: &str| -> Vec<String> {
        lines(&log, prefix)
            .iter()
            .map(|l| l.rsplit(' ').next().unwrap().to_owned())
            .collect()
    };
    let mut created = handles("hipStreamCreate ");
    let mut destroyed = handles("hipStreamDestroy ");
    assert_eq!(created.len(), 1);
    created.sort();
    destroyed.sort();
    assert_eq!(created, destroyed, "streams");
    let mut created = handles("hipEventCreate ");
    let mut destroyed = handles("hipEventDestroy ");
    assert_eq!(created.len(), 2);
    created.sort();
    destroyed.sort();
    assert_eq!(created, destroyed, "events");
    let mut created = handles("hipMalloc ");
    let mut destroyed = handles("hipFree ");
    created.sort();
    destroyed.sort();
    assert_eq!(created, destroyed, "device memory");
    let mut created = handles("hipHostMalloc ");
    let mut destroyed = handles("hipHostFree ");
    assert_eq!(created.len(), 1);
    created.sort();
    destroyed.sort();
    assert_eq!(created, destroyed, "pinned memory");
    let loads: Vec<String> = lines(&log, "hipModuleLoadData ")
        .iter()
        .map(|l| l.split(' ').nth(1).unwrap().to_owned())
        .collect();
    assert_eq!(loads, handles("hipModuleUnload "), "modules");
}

#[test]
fn library_api_unload_comes_after_the_last_kernel() {
    let path = build("record5", &["LIBRARY_API=5"], Props::Hip6);
    let rt = load(&path);
    let dev = rt.device(0).unwrap();
    let lib = Library::load(&dev, &gfx90a()).unwrap();
    let kernel = lib.kernel("scale").unwrap();
    drop(kernel);
    assert!(position(&log(&path), "hipLibraryUnload").is_none());
    drop(lib);
    let log = log(&path);
    let get = position(&log, "hipKernelGetFunction scale").unwrap();
    let unload = position(&log, "hipLibraryUnload").unwrap();
    assert!(unload > get);
    assert_eq!(lines(&log, "hipLibraryLoadFromFile").len(), 1);
    assert_eq!(lines(&log, "hipLibraryUnload").len(), 1);
}

#[test]
fn code_object_for_another_processor_is_refused_naming_both_targets() {
    let path = build("target", &[], Props::Hip6);
    let rt = load(&path);
    let dev = rt.device(0).unwrap();
    let co = CodeObject::from_bytes(&scale_code_object("gfx906"), None).unwrap();
    let err = Library::load(&dev, &co).unwrap_err();
    assert!(
        matches!(err, LibraryError::TargetMismatch { .. }),
        "{err:?}"
    );
    assert_eq!(
        err.to_string(),
        format!(
            "the code object is built for {}, which does not run on device 0 \
             (gfx90a:sramecc+:xnack-)",
            co.target_id()
        )
    );
    assert!(position(&log(&path), "hipModuleLoadData").is_none());
}

#[test]
fn unknown_kernel_name_lists_the_kernels_there_are() {
    let path = build("unknown", &[], Props::Hip6);
    let rt = load(&path);
    let dev = rt.device(0).unwrap();
    let lib = Library::load(&dev, &gfx90a()).unwrap();
    let err = lib.kernel("scal").unwrap_err();
    assert_eq!(
        err.to_string(),
        "no kernel named scal in the code object (kernels: scale)"
    );
}

fn with_scale_kernel(
    name: &str,
    f: impl FnOnce(&hipjit::kernel::Kernel, &Stream, &DeviceBuffer<f32>),
) -> PathBuf {
    let path = build(name, &[], Props::Hip6);
    let rt = load(&path);
    let dev = rt.device(0).unwrap();
    let lib = Library::load(&dev, &gfx90a()).unwrap();
    let kernel = lib.kernel("scale").unwrap();
    let stream = Stream::new(&dev, StreamFlags::empty()).unwrap();
    let buf = DeviceBuffer::<f32>::zeroed(&dev, 16).unwrap();
    f(&kernel, &stream, &buf);
    path
}

#[test]
fn launch_with_too_few_arguments_names_the_kernel_and_counts() {
    with_scale_kernel("argcount", |k, s, buf| {
        // SAFETY: refused before the call.
        let err = unsafe {
            k.launch(
                s,
                LaunchConfig::for_num_elems(16, 16),
                &mut args![buf, &2.0f32],
            )
        }
        .unwrap_err();
        assert!(matches!(err, LaunchError::ArgCount { .. }), "{err:?}");
        assert_eq!(err.to_string(), "kernel scale takes 3 arguments, 2 given");
    });
}

#[test]
fn launch_with_a_wrongly_sized_argument_names_its_index_and_name() {
    with_scale_kernel("argsize", |k, s, buf| {
        let n = 16u64;
        // SAFETY: refused before the call.
        let err = unsafe {
            k.launch(
                s,
                LaunchConfig::for_num_elems(16, 16),
                &mut args![buf, &2.0f32, &n],
            )
        }
        .unwrap_err();
        assert_eq!(
            err.to_string(),
            "kernel scale argument 2: 4 bytes expected, 8 given"
        );
    });
}

#[test]
fn launch_with_a_block_above_the_device_limit_is_refused() {
    with_scale_kernel("block", |k, s, buf| {
        let n = 16u32;
        let cfg = LaunchConfig {
            grid: 1.into(),
            block: (2048, 1, 1).into(),
            dynamic_lds_bytes: 0,
        };
        // SAFETY: refused before the call.
        let err = unsafe { k.launch(s, cfg, &mut args![buf, &2.0f32, &n]) }.unwrap_err();
        assert_eq!(
            err.to_string(),
            "launch configuration: block.x = 2048 exceeds the device's maximum 1024"
        );
    });
}

#[test]
fn launch_with_lds_above_the_device_limit_is_refused() {
    with_scale_kernel("lds", |k, s, buf| {
        let n = 16u32;
        let cfg = LaunchConfig {
            grid: 1.into(),
            block: 64.into(),
            dynamic_lds_bytes: 65537,
        };
        // SAFETY: refused before the call.
        let err = unsafe { k.launch(s, cfg, &mut args![buf, &2.0f32, &n]) }.unwrap_err();
        assert_eq!(
            err.to_string(),
            "launch configuration: 0 bytes static + 65537 bytes dynamic LDS exceed the device's \
             65536 bytes of LDS per block"
        );
    });
}

#[test]
fn amd_launch_check_keeps_the_device_lds_limit_after_set_max_dynamic_lds() {
    with_scale_kernel("ldsraised", |k, s, buf| {
        let n = 16u32;
        let cfg = LaunchConfig {
            grid: 1.into(),
            block: 64.into(),
            dynamic_lds_bytes: 96 * 1024,
        };
        k.set_max_dynamic_lds(96 * 1024).unwrap();
        // SAFETY: refused before the call: AMD has no opt-in above the device's LDS per block.
        let err = unsafe { k.launch(s, cfg, &mut args![buf, &2.0f32, &n]) }.unwrap_err();
        assert!(err.to_string().contains("98304 bytes dynamic LDS"), "{err}");
    });
}

#[test]
fn cooperative_launch_is_refused_without_the_entry_point() {
    with_scale_kernel("nocoop", |k, s, buf| {
        let n = 16u32;
        // SAFETY: refused before the call.
        let err = unsafe {
            k.launch_cooperative(
                s,
                LaunchConfig::for_num_elems(16, 16),
                &mut args![buf, &2.0f32, &n],
            )
        }
        .unwrap_err();
        assert!(matches!(err, LaunchError::NoCooperativeLaunch), "{err:?}");
    });
}

#[test]
fn cooperative_launch_checks_occupancy_and_runs() {
    let path = build("coop", &["COOPERATIVE"], Props::Hip6);
    let rt = load(&path);
    assert!(rt.has_cooperative_launch());
    let dev = rt.device(0).unwrap();
    let lib = Library::load(&dev, &gfx90a()).unwrap();
    let k = lib.kernel("scale").unwrap();
    let s = Stream::new(&dev, StreamFlags::empty()).unwrap();
    let buf = DeviceBuffer::from_slice(&dev, &[1.0f32; 8]).unwrap();
    let n = 8u32;
    // The fixture reports 2048 / block blocks per compute unit, 104 compute units.
    assert_eq!(k.max_active_blocks_per_cu(1024, 0).unwrap(), 2);
    let too_big = LaunchConfig {
        grid: 209.into(),
        block: 1024.into(),
        dynamic_lds_bytes: 0,
    };
    // SAFETY: refused before the call.
    let err =
        unsafe { k.launch_cooperative(&s, too_big, &mut args![&buf, &2.0f32, &n]) }.unwrap_err();
    assert_eq!(
        err.to_string(),
        "cooperative launch of 209 blocks exceeds the 208 blocks that can be resident at once \
         (2 per compute unit x 104 compute units)"
    );
    // SAFETY: scale(float*, float, unsigned) with 8 floats.
    unsafe {
        k.launch_cooperative(
            &s,
            LaunchConfig::for_num_elems(n, 64),
            &mut args![&buf, &2.0f32, &n],
        )
    }
    .unwrap();
    s.synchronize().unwrap();
    assert_eq!(buf.to_vec().unwrap(), vec![2.0f32; 8]);
}

#[test]
fn cooperative_launch_is_refused_when_the_occupancy_query_fails() {
    let path = build(
        "coop-occupancy-fails",
        &["COOPERATIVE", "FAIL_OCCUPANCY"],
        Props::Hip6,
    );
    let rt = load(&path);
    let dev = rt.device(0).unwrap();
    let lib = Library::load(&dev, &gfx90a()).unwrap();
    let k = lib.kernel("scale").unwrap();
    let s = Stream::new(&dev, StreamFlags::empty()).unwrap();
    let buf = DeviceBuffer::from_slice(&dev, &[1.0f32; 8]).unwrap();
    let n = 8u32;
    // SAFETY: scale(float*, float, unsigned) with 8 floats; refused before the launch.
    let err = unsafe {
        k.launch_cooperative(
            &s,
            LaunchConfig::for_num_elems(n, 64),
            &mut args![&buf, &2.0f32, &n],
        )
    }
    .unwrap_err();
    let LaunchError::Hip(e) = &err else {
        panic!("expected the occupancy query's error, got {err}");
    };
    assert_eq!(
        (e.call(), e.name()),
        (
            "hipModuleOccupancyMaxActiveBlocksPerMultiprocessor",
            "hipErrorInvalidDeviceFunction"
        )
    );
    let log = log(&path);
    assert!(
        position(&log, "hipModuleLaunchCooperativeKernel").is_none(),
        "{log:#?}"
    );
}

#[test]
fn async_scope_copies_through_the_stream_and_synchronizes_it() {
    let path = build("async", &[], Props::Hip6);
    let rt = load(&path);
    let dev = rt.device(0).unwrap();
    let stream = Stream::new(&dev, StreamFlags::NON_BLOCKING).unwrap();
    let src = PinnedBuffer::from_slice(&dev, &[1u32, 2, 3, 4]).unwrap();
    let mut buf = DeviceBuffer::<u32>::alloc(&dev, 4).unwrap();
    let mut back = [0u32; 4];
    async_scope(&stream, |s| {
        s.copy_to_device(&src, &mut buf)?;
        Ok::<(), hipjit::error::HipError>(())
    })
    .unwrap()
    .unwrap();
    async_scope(&stream, |s| s.copy_to_host(&buf, &mut back))
        .unwrap()
        .unwrap();
    assert_eq!(back, [1, 2, 3, 4]);
    let log = log(&path);
    let copy = position(&log, "hipMemcpyAsync 16 kind=1").unwrap();
    let sync = log
        .iter()
        .skip(copy)
        .position(|l| l.starts_with("hipStreamSynchronize"));
    assert!(sync.is_some(), "{log:#?}");
}

#[test]
fn async_copy_on_a_stream_of_another_loaded_runtime_is_refused_before_the_call() {
    // Two fixture runtimes built into different files: two loaded copies in one process.
    let path_a = build("two-runtimes-a", &[], Props::Hip6);
    let path_b = build("two-runtimes-b", &[], Props::Hip6);
    let dev_a = load(&path_a).device(0).unwrap();
    let dev_b = load(&path_b).device(0).unwrap();
    let stream_a = Stream::new(&dev_a, StreamFlags::NON_BLOCKING).unwrap();
    let mut buf_b = DeviceBuffer::<u32>::alloc(&dev_b, 4).unwrap();
    let src = [1u32, 2, 3, 4];
    let err = async_scope(&stream_a, |s| s.copy_to_device(&src, &mut buf_b))
        .unwrap()
        .unwrap_err();
    assert_eq!(err.name(), "hipErrorInvalidHandle", "{err}");
    assert_eq!(err.call(), "hipMemcpyAsync");
    assert!(
        err.message().contains(&path_a.display().to_string())
            && err.message().contains(&path_b.display().to_string()),
        "{err}"
    );
    assert!(
        position(&log(&path_b), "hipMemcpyAsync").is_none(),
        "runtime b was handed runtime a's stream: {:#?}",
        log(&path_b)
    );
}

#[test]
fn event_record_on_a_stream_of_another_loaded_runtime_is_refused_before_the_call() {
    let path_a = build("two-runtimes-event-a", &[], Props::Hip6);
    let path_b = build("two-runtimes-event-b", &[], Props::Hip6);
    let dev_a = load(&path_a).device(0).unwrap();
    let dev_b = load(&path_b).device(0).unwrap();
    let stream_a = Stream::new(&dev_a, StreamFlags::NON_BLOCKING).unwrap();
    let event_b = Event::new(&dev_b, EventFlags::empty()).unwrap();
    let err = event_b.record(&stream_a).unwrap_err();
    assert_eq!(err.name(), "hipErrorInvalidHandle", "{err}");
    assert_eq!(err.call(), "hipEventRecord");
    assert!(
        position(&log(&path_b), "hipEventRecord").is_none(),
        "runtime b was handed runtime a's stream: {:#?}",
        log(&path_b)
    );
}

#[test]
fn launch_and_prepare_on_a_stream_of_another_loaded_runtime_say_so_before_the_call() {
    // Both runtimes answer device 0: the device check alone would report "device 0, device 0".
    let path_a = build("two-runtimes-launch-a", &[], Props::Hip6);
    let path_b = build("two-runtimes-launch-b", &[], Props::Hip6);
    let dev_a = load(&path_a).device(0).unwrap();
    let dev_b = load(&path_b).device(0).unwrap();
    let stream_a = Stream::new(&dev_a, StreamFlags::NON_BLOCKING).unwrap();
    let lib_b = Library::load(&dev_b, &gfx90a()).unwrap();
    let kernel_b = lib_b.kernel("scale").unwrap();
    let n = 16u32;
    let mut buf_b = DeviceBuffer::<f32>::zeroed(&dev_b, n as usize).unwrap();
    let cfg = LaunchConfig::for_num_elems(n, 16);
    let expect_foreign = |err: LaunchError| {
        let LaunchError::Hip(h) = &err else {
            panic!("not a runtime refusal: {err:?}");
        };
        assert_eq!(
            (h.name(), h.call()),
            ("hipErrorInvalidHandle", "hipModuleLaunchKernel"),
            "{err}"
        );
        assert!(
            h.message().contains("the stream belongs to the runtime")
                && h.message().contains(&path_a.display().to_string())
                && h.message().contains(&path_b.display().to_string()),
            "{err}"
        );
    };
    // SAFETY: refused before the call.
    let err = unsafe { kernel_b.launch(&stream_a, cfg, &mut args![&mut buf_b, &2.0f32, &n]) }
        .unwrap_err();
    expect_foreign(err);
    let err = kernel_b
        .prepare(&stream_a, cfg, &args![&mut buf_b, &2.0f32, &n])
        .map(|_| ())
        .unwrap_err();
    expect_foreign(err);
    assert!(
        position(&log(&path_b), "hipModuleLaunchKernel").is_none()
            && position(&log(&path_a), "hipModuleLaunchKernel").is_none(),
        "a runtime was handed the other's stream: {:#?} {:#?}",
        log(&path_a),
        log(&path_b)
    );
}

#[test]
fn elapsed_time_to_an_event_of_another_loaded_runtime_is_refused_before_the_call() {
    let path_a = build("two-runtimes-elapsed-a", &[], Props::Hip6);
    let path_b = build("two-runtimes-elapsed-b", &[], Props::Hip6);
    let dev_a = load(&path_a).device(0).unwrap();
    let dev_b = load(&path_b).device(0).unwrap();
    let start_b = Event::new(&dev_b, EventFlags::empty()).unwrap();
    let end_a = Event::new(&dev_a, EventFlags::empty()).unwrap();
    // The fixture's hipEventElapsedTime answers 1.5 ms for any pair of handles.
    let err = start_b.elapsed_ms(&end_a).unwrap_err();
    assert_eq!(
        (err.name(), err.call()),
        ("hipErrorInvalidHandle", "hipEventElapsedTime"),
        "{err}"
    );
}

#[test]
fn allocation_whose_byte_size_overflows_is_refused_before_the_call() {
    let path = build("alloc-overflow", &[], Props::Hip6);
    let dev = load(&path).device(0).unwrap();
    let stream = Stream::new(&dev, StreamFlags::NON_BLOCKING).unwrap();
    // usize::MAX values overflow usize; isize::MAX / 4 + 1 values of 4 bytes do not, but exceed
    // isize::MAX bytes. A saturated product would ask the runtime for usize::MAX bytes instead.
    for len in [usize::MAX, isize::MAX as usize / 4 + 1] {
        let expect = |err: HipError, call: &str| {
            assert_eq!(
                (err.name(), err.call()),
                ("hipErrorOutOfMemory", call),
                "{err}"
            );
            assert!(
                err.message()
                    .starts_with("refused by hipjit before the call")
                    && err
                        .message()
                        .contains(&format!("{len} values of 4 bytes (f32)")),
                "{err}"
            );
        };
        expect(
            DeviceBuffer::<f32>::alloc(&dev, len).unwrap_err(),
            "hipMalloc",
        );
        expect(
            DeviceBuffer::<f32>::zeroed(&dev, len).unwrap_err(),
            "hipMalloc",
        );
        expect(
            DeviceBuffer::<f32>::alloc_async(&stream, len).unwrap_err(),
            "hipMallocAsync",
        );
        expect(
            DeviceBuffer::<f32>::zeroed_async(&stream, len).unwrap_err(),
            "hipMallocAsync",
        );
        expect(
            PinnedBuffer::<f32>::zeroed(&dev, len)
                .map(drop)
                .unwrap_err(),
            "hipHostMalloc",
        );
    }
    let log = log(&path);
    assert!(
        ["hipMalloc", "hipMallocAsync", "hipHostMalloc"]
            .iter()
            .all(|call| position(&log, call).is_none()),
        "{log:#?}"
    );
}

#[test]
fn allocation_the_host_cannot_back_is_out_of_memory_not_a_null_buffer() {
    // 1 PiB: more than the fixture's malloc can back (above the 128 TiB user address space).
    let path = build("alloc-oom", &[], Props::Hip6);
    let dev = load(&path).device(0).unwrap();
    let stream = Stream::new(&dev, StreamFlags::NON_BLOCKING).unwrap();
    let len = 1usize << 50;
    let err = DeviceBuffer::<u8>::alloc(&dev, len).unwrap_err();
    assert_eq!(
        (err.name(), err.call()),
        ("hipErrorOutOfMemory", "hipMalloc"),
        "{err}"
    );
    let err = DeviceBuffer::<u8>::alloc_async(&stream, len).unwrap_err();
    assert_eq!(
        (err.name(), err.call()),
        ("hipErrorOutOfMemory", "hipMallocAsync"),
        "{err}"
    );
    let err = PinnedBuffer::<u8>::zeroed(&dev, len).map(drop).unwrap_err();
    assert_eq!(
        (err.name(), err.call()),
        ("hipErrorOutOfMemory", "hipHostMalloc"),
        "{err}"
    );
    let log = log(&path);
    assert!(
        position(&log, &format!("hipMalloc {len} out of memory")).is_some()
            && position(&log, &format!("hipMallocAsync {len} out of memory")).is_some(),
        "{log:#?}"
    );
}

#[test]
fn copy_with_mismatched_length_is_refused() {
    let path = build("mismatch", &[], Props::Hip6);
    let rt = load(&path);
    let dev = rt.device(0).unwrap();
    let mut buf = DeviceBuffer::<u32>::alloc(&dev, 4).unwrap();
    let err = buf.copy_from_host(&[1, 2, 3]).unwrap_err();
    assert_eq!(
        err.to_string(),
        "hipMemcpy failed: hipErrorInvalidValue (1): refused by hipjit before the call: host \
         slice of 3 values for device memory of 4 values"
    );
}

#[test]
fn device_global_is_found_by_name_and_written() {
    let path = build("global", &[], Props::Hip6);
    let rt = load(&path);
    let dev = rt.device(0).unwrap();
    let lib = Library::load(&dev, &gfx90a()).unwrap();
    let mut g = lib.global("table").unwrap();
    assert_eq!(g.size_bytes(), 16);
    let bytes: Vec<u8> = [1.0f32, 2.0, 3.0, 4.0]
        .iter()
        .flat_map(|f| f.to_ne_bytes())
        .collect();
    g.write(&bytes).unwrap();
    assert_eq!(g.read().unwrap(), bytes);
}

#[test]
fn kernel_attributes_come_from_hip_func_get_attribute() {
    with_scale_kernel("attrs", |k, _, _| {
        assert_eq!(k.max_threads_per_block(), 1024);
        assert_eq!(k.static_lds_bytes(), 0);
        assert_eq!(k.num_registers().unwrap(), 32);
    });
}

#[test]
fn device_ordinal_out_of_range_is_the_runtimes_invalid_device() {
    let path = build("ordinal", &[], Props::Hip6);
    let rt = load(&path);
    let err = rt.device(1).unwrap_err();
    assert_eq!(
        err.to_string(),
        "hipSetDevice failed: hipErrorInvalidDevice (101): fixture: invalid device ordinal"
    );
}

#[test]
fn device_is_bound_on_each_thread_that_uses_it() {
    let path = build("threads", &[], Props::Hip6);
    let rt = load(&path);
    let dev = rt.device(0).unwrap();
    std::thread::scope(|s| {
        s.spawn(|| {
            let _b = DeviceBuffer::<u8>::alloc(&dev, 1).unwrap();
        });
    });
    // The fixture's current device is unset on each new thread and calls made without binding
    // fail, so the allocation above succeeding means the device was bound on that thread.
    let log = log(&path);
    assert_eq!(lines(&log, "hipSetDevice 0").len(), 2, "{log:#?}");
    assert!(position(&log, "unbound call").is_none(), "{log:#?}");
}

#[test]
fn pinned_buffer_dropped_on_another_thread_binds_the_device_first() {
    let path = build("pinned-drop-thread", &[], Props::Hip6);
    let rt = load(&path);
    let dev = rt.device(0).unwrap();
    let pinned = PinnedBuffer::from_slice(&dev, &[1u32, 2, 3, 4]).unwrap();
    std::thread::scope(|s| {
        s.spawn(move || drop(pinned));
    });
    // The fixture's current device is unset on each new thread and refuses unbound calls.
    let log = log(&path);
    assert!(position(&log, "hipHostFree").is_some(), "{log:#?}");
    assert!(position(&log, "unbound call").is_none(), "{log:#?}");
}

#[test]
fn zero_length_pinned_buffer_leaves_no_pinned_allocation_behind() {
    // The fixture answers hipHostMalloc of 0 bytes with a 1-byte allocation.
    let path = build("pinned-zero", &[], Props::Hip6);
    let rt = load(&path);
    let dev = rt.device(0).unwrap();
    let pinned = PinnedBuffer::<u32>::zeroed(&dev, 0).unwrap();
    assert!(pinned.is_empty());
    drop(pinned);
    let log = log(&path);
    assert_eq!(
        lines(&log, "hipHostMalloc").len(),
        lines(&log, "hipHostFree").len(),
        "{log:#?}"
    );
}

fn data(name: &str) -> Vec<u8> {
    let p = crate::common::code_object(name);
    std::fs::read(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

#[test]
fn code_object_v6_is_refused_by_a_hip_5_runtime_naming_both_versions() {
    let path = build(
        "v6on5",
        &[
            "ARCH=\"gfx942:sramecc+:xnack-\"",
            "RUNTIME_VERSION=50221153",
        ],
        Props::Hip5,
    );
    let rt = load(&path);
    let dev = rt.device(0).unwrap();
    let co = CodeObject::from_bytes(&data("kernels-gfx942.hsaco"), None).unwrap();
    assert_eq!(co.code_object_version(), 6);
    let err = Library::load(&dev, &co).unwrap_err();
    assert!(
        matches!(err, LibraryError::CodeObjectVersion { .. }),
        "{err:?}"
    );
    assert_eq!(
        err.to_string(),
        "code object v6 is not accepted by the HIP runtime 5.2.21153 (it accepts v4, v5)"
    );
    assert!(position(&log(&path), "hipModuleLoadData").is_none());
}

#[test]
fn compressed_bundle_is_handed_to_the_runtime_as_the_devices_raw_elf() {
    let path = build("ccob", &["ARCH=\"gfx942:sramecc+:xnack-\""], Props::Hip6);
    let rt = load(&path);
    let dev = rt.device(0).unwrap();
    let lib = Library::load_bytes(&dev, &data("kernels-gfx942-gfx1100-v3.ccob")).unwrap();
    let k = lib.kernel("axpy_f32").unwrap();
    assert_eq!(k.name(), "axpy_f32");
    let log = log(&path);
    // The fixture rejects anything but an ELF image with hipErrorInvalidImage.
    let load = lines(&log, "hipModuleLoadData ");
    assert_eq!(load.len(), 1, "{log:#?}");
    assert!(!load[0].contains("rejected"), "{log:#?}");
}

#[test]
fn xnack_any_code_object_loads_on_an_xnack_on_device() {
    let path = build(
        "xnackany",
        &["ARCH=\"gfx90a:sramecc+:xnack+\""],
        Props::Hip6,
    );
    let rt = load(&path);
    let dev = rt.device(0).unwrap();
    let lib = Library::load_bytes(&dev, &data("kernels-gfx90a.hsaco")).unwrap();
    assert!(lib.kernel_names().any(|n| n == "axpy_f32"));
}

#[test]
fn xnack_off_code_object_is_refused_on_an_xnack_on_device() {
    let path = build(
        "xnackoff",
        &["ARCH=\"gfx90a:sramecc+:xnack+\""],
        Props::Hip6,
    );
    let rt = load(&path);
    let dev = rt.device(0).unwrap();
    let err = Library::load_bytes(&dev, &data("kernels-gfx90a_xnack-.hsaco")).unwrap_err();
    assert_eq!(
        err.to_string(),
        "the code object is built for gfx90a:xnack-, which does not run on device 0 \
         (gfx90a:sramecc+:xnack+)"
    );
}

#[test]
fn borrowed_stream_is_used_but_never_destroyed() {
    use hipjit::stream::BorrowedStream;
    let path = build("borrowed", &[], Props::Hip6);
    let rt = load(&path);
    let dev = rt.device(0).unwrap();
    let owned = Stream::new(&dev, StreamFlags::empty()).unwrap();
    {
        // SAFETY: `owned` is a stream of `dev` in the same runtime and outlives `borrowed`.
        let borrowed = unsafe { BorrowedStream::from_raw(&dev, owned.as_raw()) };
        borrowed.synchronize().unwrap();
        let null = BorrowedStream::null(&dev);
        null.synchronize().unwrap();
    }
    assert!(position(&log(&path), "hipStreamDestroy").is_none());
    drop(owned);
    assert_eq!(lines(&log(&path), "hipStreamDestroy").len(), 1);
}

#[test]
fn launch_on_a_borrowed_stream_passes_its_handle() {
    use hipjit::stream::BorrowedStream;
    let path = build("borrowedlaunch", &[], Props::Hip6);
    let rt = load(&path);
    let dev = rt.device(0).unwrap();
    let lib = Library::load(&dev, &gfx90a()).unwrap();
    let k = lib.kernel("scale").unwrap();
    let owned = Stream::new(&dev, StreamFlags::empty()).unwrap();
    // SAFETY: `owned` is a stream of `dev` and outlives `borrowed`.
    let borrowed = unsafe { BorrowedStream::from_raw(&dev, owned.as_raw()) };
    let buf = DeviceBuffer::from_slice(&dev, &[1.0f32; 4]).unwrap();
    let n = 4u32;
    // SAFETY: scale(float*, float, unsigned) with 4 floats.
    unsafe {
        k.launch(
            &borrowed,
            LaunchConfig::for_num_elems(n, 64),
            &mut args![&buf, &5.0f32, &n],
        )
    }
    .unwrap();
    borrowed.synchronize().unwrap();
    assert_eq!(buf.to_vec().unwrap(), vec![5.0f32; 4]);
    let log = log(&path);
    let launch = lines(&log, "hipModuleLaunchKernel scale");
    assert!(
        launch[0].contains(&format!("stream={:?}", owned.as_raw())),
        "{launch:?}"
    );
}

#[test]
fn safe_types_are_send_and_sync() {
    fn send_sync<T: Send + Sync>() {}
    send_sync::<Runtime>();
    send_sync::<hipjit::device::Device>();
    send_sync::<Stream>();
    send_sync::<hipjit::stream::BorrowedStream>();
    send_sync::<DeviceBuffer<f32>>();
    send_sync::<PinnedBuffer<f32>>();
    send_sync::<Event>();
    send_sync::<Library>();
    send_sync::<hipjit::kernel::Kernel>();
}

#[test]
fn library_and_kernel_move_to_another_thread_and_launch_there() {
    let path = build("movethread", &[], Props::Hip6);
    let rt = load(&path);
    let dev = rt.device(0).unwrap();
    let lib = Library::load(&dev, &gfx90a()).unwrap();
    let buf = DeviceBuffer::from_slice(&dev, &[2.0f32; 4]).unwrap();
    std::thread::scope(|s| {
        s.spawn(|| {
            let k = lib.kernel("scale").unwrap();
            let stream = Stream::new(&dev, StreamFlags::empty()).unwrap();
            let n = 4u32;
            // SAFETY: scale(float*, float, unsigned) with 4 floats.
            unsafe {
                k.launch(
                    &stream,
                    LaunchConfig::for_num_elems(n, 64),
                    &mut args![&buf, &2.0f32, &n],
                )
            }
            .unwrap();
            stream.synchronize().unwrap();
        });
    });
    assert_eq!(buf.to_vec().unwrap(), vec![4.0f32; 4]);
    // The fixture fails calls made on a thread without a bound device.
    assert!(position(&log(&path), "unbound call").is_none());
}

/// Runs this test binary's test `name` alone in a fresh process (nothing loaded yet) with
/// `HIPJIT_FIXTURE_CHILD=name` and `env` set, `HIPJIT_HIP_LIBRARY` removed; returns its
/// combined output after asserting it succeeded.
fn run_in_child(name: &str, env: &[(&str, &std::ffi::OsStr)]) -> String {
    let mut cmd = std::process::Command::new(std::env::current_exe().unwrap());
    let exact = crate::common::test_name(module_path!(), name);
    cmd.args(["--exact", &exact, "--nocapture", "--test-threads=1"])
        .env("HIPJIT_FIXTURE_CHILD", name)
        .env_remove("HIPJIT_HIP_LIBRARY");
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = cmd.output().unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "child {name} failed:\n{text}");
    assert!(
        text.contains("1 passed"),
        "child {name} did not run:\n{text}"
    );
    text
}

fn is_child(name: &str) -> bool {
    std::env::var("HIPJIT_FIXTURE_CHILD").as_deref() == Ok(name)
}

#[test]
fn hip_path_lib_is_searched_before_the_sonames() {
    const NAME: &str = "hip_path_lib_is_searched_before_the_sonames";
    if is_child(NAME) {
        // A fresh process: no runtime mapped yet, HIP_PATH names the fixture's root.
        let rt = Runtime::load().unwrap();
        assert_eq!(
            rt.found(),
            &Found::Root(hipjit::sys::discovery::Origin::HipPath)
        );
        assert_eq!(rt.version().unwrap().0, 70253211);
        return;
    }
    let lib = build("hippath", &[], Props::Hip6);
    let root = Path::new(env!("CARGO_TARGET_TMPDIR")).join("fixture-roots/hippath");
    std::fs::create_dir_all(root.join("lib")).unwrap();
    std::fs::copy(&lib, root.join("lib/libamdhip64.so.7")).unwrap();
    run_in_child(NAME, &[("HIP_PATH", root.as_os_str())]);
}

#[test]
fn runtime_already_loaded_in_the_process_is_preferred() {
    const NAME: &str = "runtime_already_loaded_in_the_process_is_preferred";
    if is_child(NAME) {
        // A framework loaded its own copy first; discovery must pick that copy, not the
        // system runtime the sonames would find.
        let path = std::env::var_os("HIPJIT_FIXTURE_PATH").unwrap();
        let c = std::ffi::CString::new(path.as_encoded_bytes()).unwrap();
        // SAFETY: loads the fixture library (its initialisers do nothing).
        let h = unsafe { libc::dlopen(c.as_ptr(), libc::RTLD_NOW | libc::RTLD_LOCAL) };
        assert!(!h.is_null());
        let rt = Runtime::load().unwrap();
        assert_eq!(rt.found(), &Found::AlreadyLoaded);
        assert_eq!(rt.path(), Path::new(&path));
        return;
    }
    let lib = build("preloaded", &[], Props::Hip6);
    run_in_child(NAME, &[("HIPJIT_FIXTURE_PATH", lib.as_os_str())]);
}

#[test]
fn dynamic_lds_limit_is_set_through_hip_func_set_attribute() {
    let path = with_scale_kernel("setattr", |k, _, _| {
        k.set_max_dynamic_lds(96 * 1024).unwrap();
    });
    let log = log(&path);
    // hipFuncAttributeMaxDynamicSharedMemorySize = 8.
    assert_eq!(
        lines(&log, "hipFuncSetAttribute"),
        ["hipFuncSetAttribute scale attr=8 value=98304"]
    );
}

#[test]
fn library_file_that_does_not_exist_is_an_error_naming_it() {
    let path = build("nofile", &[], Props::Hip6);
    let rt = load(&path);
    let dev = rt.device(0).unwrap();
    let err = Library::load_file(&dev, "/nonexistent/scale.hsaco").unwrap_err();
    assert!(
        err.to_string()
            .starts_with("cannot read the code object /nonexistent/scale.hsaco: "),
        "{err}"
    );
}

#[test]
fn library_loads_from_a_code_object_file() {
    let path = build("fromfile", &[], Props::Hip6);
    let rt = load(&path);
    let dev = rt.device(0).unwrap();
    let lib = Library::load_file(&dev, crate::common::code_object("kernels-gfx90a.hsaco")).unwrap();
    assert!(lib.kernel("axpy_f32").is_ok());
}

/// A tracing subscriber that keeps each event as `LEVEL field=value ...`.
#[derive(Default)]
struct Capture(std::sync::Mutex<Vec<String>>);

struct Fields(String);

impl tracing::field::Visit for Fields {
    fn record_debug(&mut self, field: &tracing::field::Field, value: &dyn std::fmt::Debug) {
        self.0.push_str(&format!("{}={:?} ", field.name(), value));
    }
}

impl tracing::Subscriber for Capture {
    fn enabled(&self, _: &tracing::Metadata<'_>) -> bool {
        true
    }
    fn new_span(&self, _: &tracing::span::Attributes<'_>) -> tracing::span::Id {
        tracing::span::Id::from_u64(1)
    }
    fn record(&self, _: &tracing::span::Id, _: &tracing::span::Record<'_>) {}
    fn record_follows_from(&self, _: &tracing::span::Id, _: &tracing::span::Id) {}
    fn event(&self, event: &tracing::Event<'_>) {
        let mut fields = Fields(String::new());
        event.record(&mut fields);
        let line = format!("{} {}", event.metadata().level(), fields.0.trim_end());
        self.0.lock().unwrap().push(line);
    }
    fn enter(&self, _: &tracing::span::Id) {}
    fn exit(&self, _: &tracing::span::Id) {}
}

#[test]
fn failure_in_drop_is_logged_not_panicked() {
    let path = build("faildestroy", &["FAIL_DESTROY"], Props::Hip6);
    let rt = load(&path);
    let dev = rt.device(0).unwrap();
    let stream = Stream::new(&dev, StreamFlags::empty()).unwrap();
    let capture = std::sync::Arc::new(Capture::default());
    tracing::subscriber::with_default(capture.clone(), || drop(stream));
    let events = capture.0.lock().unwrap().clone();
    assert_eq!(
        events,
        [
            "ERROR message=failed to destroy a stream error=hipStreamDestroy failed: \
             hipErrorInvalidHandle (400): fixture: invalid handle"
        ]
    );
}

#[test]
fn pinned_buffer_round_trips_through_in_flight_copies() {
    let path = build("inflight", &[], Props::Hip6);
    let rt = load(&path);
    let dev = rt.device(0).unwrap();
    let stream = Stream::new(&dev, StreamFlags::NON_BLOCKING).unwrap();
    let mut buf = DeviceBuffer::<u16>::alloc(&dev, 3).unwrap();
    let up = PinnedBuffer::from_slice(&dev, &[7u16, 8, 9]).unwrap();
    let up = up
        .copy_to_device_async(&mut buf, &stream)
        .unwrap()
        .wait()
        .unwrap();
    let down = PinnedBuffer::<u16>::zeroed(&dev, 3).unwrap();
    let down = down
        .copy_from_device_async(&buf, &stream)
        .unwrap()
        .wait()
        .unwrap();
    assert_eq!(&*down, &[7, 8, 9]);
    drop((up, down));
    let log = log(&path);
    // Each wait synchronizes the stream after its copy, before the buffer is handed back.
    let copies: Vec<usize> = log
        .iter()
        .enumerate()
        .filter(|(_, l)| l.starts_with("hipMemcpyAsync 6 "))
        .map(|(i, _)| i)
        .collect();
    assert_eq!(copies.len(), 2, "{log:#?}");
    for c in copies {
        assert!(log[c + 1].starts_with("hipStreamSynchronize"), "{log:#?}");
    }
    assert_eq!(lines(&log, "hipHostFree").len(), 2);
}

/// A kernel library's state: loaded kernels stored beside (or without) their library, which
/// only an owned kernel handle allows.
struct ScaleOps {
    scale: hipjit::kernel::Kernel,
}

fn scale_ops(dev: &hipjit::device::Device) -> ScaleOps {
    let lib = Library::load(dev, &gfx90a()).unwrap();
    ScaleOps {
        scale: lib.kernel("scale").unwrap(),
    }
}

#[test]
fn kernel_keeps_its_library_loaded_after_the_library_handle_is_dropped() {
    let path = build("ownedkernel", &[], Props::Hip6);
    let rt = load(&path);
    let dev = rt.device(0).unwrap();
    let ops = scale_ops(&dev);
    // The Library value is gone; the kernel holds the module.
    assert!(position(&log(&path), "hipModuleUnload").is_none());
    let stream = Stream::new(&dev, StreamFlags::empty()).unwrap();
    let buf = DeviceBuffer::from_slice(&dev, &[1.0f32, 2.0, 3.0]).unwrap();
    let n = 3u32;
    // SAFETY: scale(float*, float, unsigned) with a buffer of 3 floats.
    unsafe {
        ops.scale.launch(
            &stream,
            LaunchConfig::for_num_elems(n, 64),
            &mut args![&buf, &2.0f32, &n],
        )
    }
    .unwrap();
    stream.synchronize().unwrap();
    assert_eq!(buf.to_vec().unwrap(), [2.0, 4.0, 6.0]);
    let clone = ops.scale.clone();
    drop(ops);
    assert!(position(&log(&path), "hipModuleUnload").is_none());
    drop(clone);
    let log = log(&path);
    let unload = lines(&log, "hipModuleUnload");
    assert_eq!(unload.len(), 1, "{log:#?}");
    let last_launch = log
        .iter()
        .rposition(|l| l.starts_with("hipModuleLaunchKernel"))
        .unwrap();
    assert!(position(&log, "hipModuleUnload").unwrap() > last_launch);
}

#[test]
fn clones_of_one_kernel_launch_from_many_threads_with_one_lookup() {
    let path = build("kernelthreads", &["LIBRARY_API=5"], Props::Hip6);
    let rt = load(&path);
    let dev = rt.device(0).unwrap();
    let kernel = Library::load(&dev, &gfx90a())
        .unwrap()
        .kernel("scale")
        .unwrap();
    let threads: Vec<_> = (0..4u32)
        .map(|t| {
            let kernel = kernel.clone();
            let dev = dev.clone();
            std::thread::spawn(move || {
                let stream = Stream::new(&dev, StreamFlags::NON_BLOCKING).unwrap();
                let buf = DeviceBuffer::from_slice(&dev, &[1.0f32; 100]).unwrap();
                let (n, a) = (100u32, (t + 2) as f32);
                for _ in 0..3 {
                    // SAFETY: scale(float*, float, unsigned) with a buffer of 100 floats.
                    unsafe {
                        kernel.launch(
                            &stream,
                            LaunchConfig::for_num_elems(n, 64),
                            &mut args![&buf, &a, &n],
                        )
                    }
                    .unwrap();
                }
                stream.synchronize().unwrap();
                (a, buf.to_vec().unwrap())
            })
        })
        .collect();
    for t in threads {
        let (a, out) = t.join().unwrap();
        assert_eq!(out, vec![a * a * a; 100]);
    }
    assert!(kernel.same_as(&kernel.clone()));
    let log = log(&path);
    assert_eq!(lines(&log, "hipKernelGetFunction scale").len(), 1);
    assert_eq!(lines(&log, "hipModuleLaunchKernel scale").len(), 12);
    drop(kernel);
    assert_eq!(
        lines(&self::log(&path), "hipLibraryUnload").len(),
        1,
        "the last clone unloads the library"
    );
}

#[test]
fn occupancy_from_metadata_matches_the_runtime_query_on_the_fixture_device() {
    // The fixture's hipModuleOccupancyMaxActiveBlocksPerMultiprocessor answers 2048 / block:
    // the residency of a gfx90a kernel whose registers leave all wave slots free (4 SIMDs x 8
    // waves x 64 lanes = 2048 threads per CU), as the scale kernel's (few VGPRs, no LDS).
    let path = build("coopocc", &["COOPERATIVE"], Props::Hip6);
    let rt = load(&path);
    let dev = rt.device(0).unwrap();
    let lib = Library::load(&dev, &gfx90a()).unwrap();
    let k = lib.kernel("scale").unwrap();
    let info = k.info().unwrap();
    let target = dev.target_id().unwrap();
    for block in [64, 128, 256, 512, 1024] {
        let ours = info.occupancy(target, block, 0).unwrap();
        assert_eq!(
            ours.blocks_per_cu,
            k.max_active_blocks_per_cu(block, 0).unwrap(),
            "block {block}: {ours:?}"
        );
    }
}

// Stream-ordered memory, views and waits between streams. The fixture runs every operation
// when it is queued; its record names each operation's stream, so these tests read the order
// in which work was queued on each stream.

fn fixture_device(name: &str, defines: &[&str]) -> (PathBuf, hipjit::device::Device) {
    let path = build(name, defines, Props::Hip6);
    let dev = load(&path).device(0).unwrap();
    (path, dev)
}

/// Positions in `log` of lines starting with each of `prefixes`, asserting that they appear
/// in that order.
fn in_order(log: &[String], prefixes: &[String]) -> Vec<usize> {
    let mut from = 0;
    let mut at = Vec::new();
    for p in prefixes {
        let i = log[from..]
            .iter()
            .position(|l| l.starts_with(p.as_str()))
            .unwrap_or_else(|| panic!("no line {p:?} after line {from} in {log:#?}"))
            + from;
        at.push(i);
        from = i + 1;
    }
    at
}

/// The pointer as the fixture's `%p` prints it.
fn p<T>(ptr: *mut T) -> String {
    if ptr.is_null() {
        "(nil)".to_owned()
    } else {
        format!("{ptr:?}")
    }
}

#[test]
fn stream_ordered_buffer_is_allocated_and_freed_on_its_stream_without_a_device_wide_wait() {
    let (path, dev) = fixture_device("malloc-async", &[]);
    assert!(dev.runtime().has_stream_ordered_alloc());
    let stream = Stream::new(&dev, StreamFlags::NON_BLOCKING).unwrap();
    let s = p(stream.as_raw());
    let buf = DeviceBuffer::<f32>::zeroed_async(&stream, 64).unwrap();
    assert!(buf.is_stream_ordered());
    let b = p(buf.as_raw() as _);
    let start = log(&path).len();
    drop(buf);
    let log = log(&path);
    in_order(
        &log,
        &[
            format!("hipMallocAsync 256 {b} {s}"),
            format!("hipMemsetAsync 256 {s}"),
            format!("hipFreeAsync {b} {s}"),
        ],
    );
    let dropped = &log[start..];
    assert_eq!(dropped, [format!("hipFreeAsync {b} {s}")], "{log:#?}");
    assert!(position(&log, "hipFree ").is_none(), "{log:#?}");
}

#[test]
fn without_the_stream_ordered_allocator_alloc_async_falls_back_to_hip_malloc_and_hip_free() {
    let (path, dev) = fixture_device("no-malloc-async", &["NO_MALLOC_ASYNC"]);
    assert!(!dev.runtime().has_stream_ordered_alloc());
    let present = |name: &str| {
        dev.runtime()
            .optional_symbols()
            .iter()
            .any(|&(n, p)| n == name && p)
    };
    assert!(!present("hipMallocAsync") && !present("hipFreeAsync"));
    let stream = Stream::new(&dev, StreamFlags::NON_BLOCKING).unwrap();
    let buf = DeviceBuffer::<u32>::alloc_async(&stream, 4).unwrap();
    assert!(!buf.is_stream_ordered());
    let b = p(buf.as_raw() as _);
    drop(buf);
    let log = log(&path);
    in_order(&log, &[format!("hipMalloc 16 {b}"), format!("hipFree {b}")]);
    assert!(position(&log, "hipMallocAsync").is_none(), "{log:#?}");
}

#[test]
fn stream_ordered_buffer_keeps_its_stream_until_its_free_is_queued() {
    let (path, dev) = fixture_device("malloc-async-keep", &[]);
    let stream = Stream::new(&dev, StreamFlags::NON_BLOCKING).unwrap();
    let s = p(stream.as_raw());
    let buf = DeviceBuffer::<u8>::alloc_async(&stream, 8).unwrap();
    let b = p(buf.as_raw() as _);
    drop(stream);
    assert!(position(&log(&path), "hipStreamDestroy").is_none());
    drop(buf);
    in_order(
        &log(&path),
        &[
            format!("hipFreeAsync {b} {s}"),
            format!("hipStreamDestroy {s}"),
        ],
    );
}

#[test]
fn use_on_another_stream_is_ordered_after_the_allocation_and_the_free_after_the_use() {
    let (path, dev) = fixture_device("malloc-async-cross", &[]);
    let home = Stream::new(&dev, StreamFlags::NON_BLOCKING).unwrap();
    let other = Stream::new(&dev, StreamFlags::NON_BLOCKING).unwrap();
    let (h, o) = (p(home.as_raw()), p(other.as_raw()));
    let mut buf = DeviceBuffer::<u8>::alloc_async(&home, 8).unwrap();
    let b = p(buf.as_raw() as _);
    buf.memset_async(7, &other).unwrap();
    // A synchronous call runs on the null stream: ordered the same way.
    assert_eq!(buf.to_vec().unwrap(), vec![7u8; 8]);
    drop(buf);
    let log = log(&path);
    let fence = lines(&log, "hipEventCreate");
    assert_eq!(fence.len(), 1, "one event per buffer: {log:#?}");
    let e = fence[0].trim_start_matches("hipEventCreate ");
    in_order(
        &log,
        &[
            format!("hipMallocAsync 8 {b} {h}"),
            format!("hipEventRecord {e} {h}"),
            format!("hipStreamWaitEvent {o} {e}"),
            format!("hipMemsetAsync 8 {o}"),
            format!("hipEventRecord {e} {o}"),
            format!("hipStreamWaitEvent {h} {e}"),
            format!("hipEventRecord {e} {h}"),
            format!("hipStreamWaitEvent (nil) {e}"),
            "hipMemcpy 8 kind=2".to_owned(),
            format!("hipEventRecord {e} (nil)"),
            format!("hipStreamWaitEvent {h} {e}"),
            format!("hipFreeAsync {b} {h}"),
        ],
    );
}

#[test]
fn buffer_freed_with_hip_free_is_used_on_any_stream_without_events() {
    let (path, dev) = fixture_device("malloc-cross", &[]);
    let stream = Stream::new(&dev, StreamFlags::NON_BLOCKING).unwrap();
    let mut buf = DeviceBuffer::<u8>::alloc(&dev, 8).unwrap();
    buf.memset_async(1, &stream).unwrap();
    buf.use_on(&stream).unwrap();
    buf.free_after(&stream).unwrap();
    drop(buf);
    let log = log(&path);
    assert!(position(&log, "hipEventCreate").is_none(), "{log:#?}");
    assert!(position(&log, "hipStreamWaitEvent").is_none(), "{log:#?}");
}

#[test]
fn wait_event_queues_a_wait_of_one_stream_on_an_event_recorded_on_another() {
    let (path, dev) = fixture_device("wait-event", &[]);
    let a = Stream::new(&dev, StreamFlags::NON_BLOCKING).unwrap();
    let b = Stream::new(&dev, StreamFlags::NON_BLOCKING).unwrap();
    let e = Event::new(&dev, EventFlags::DISABLE_TIMING).unwrap();
    e.record(&a).unwrap();
    b.wait_event(&e).unwrap();
    // Any stream: the null stream waits too.
    hipjit::stream::BorrowedStream::null(&dev)
        .wait_event(&e)
        .unwrap();
    let ev = p(e.as_raw() as _);
    in_order(
        &log(&path),
        &[
            format!("hipEventRecord {ev} {}", p(a.as_raw())),
            format!("hipStreamWaitEvent {} {ev}", p(b.as_raw())),
            format!("hipStreamWaitEvent (nil) {ev}"),
        ],
    );
}

#[test]
fn wait_event_on_an_event_of_another_loaded_runtime_is_refused_before_the_call() {
    let (path_a, dev_a) = fixture_device("two-runtimes-wait-a", &[]);
    let (_, dev_b) = fixture_device("two-runtimes-wait-b", &[]);
    let stream_a = Stream::new(&dev_a, StreamFlags::NON_BLOCKING).unwrap();
    let event_b = Event::new(&dev_b, EventFlags::empty()).unwrap();
    let err = stream_a.wait_event(&event_b).unwrap_err();
    assert_eq!(
        (err.name(), err.call()),
        ("hipErrorInvalidHandle", "hipStreamWaitEvent"),
        "{err}"
    );
    assert!(position(&log(&path_a), "hipStreamWaitEvent").is_none());
}

#[test]
fn mutable_view_is_a_kernel_argument_and_only_its_range_is_written() {
    use hipjit::memory::DeviceMemory;
    let (_, dev) = fixture_device("views-launch", &[]);
    let lib = Library::load(&dev, &gfx90a()).unwrap();
    let k = lib.kernel("scale").unwrap();
    let stream = Stream::new(&dev, StreamFlags::NON_BLOCKING).unwrap();
    let mut buf = DeviceBuffer::from_slice(&dev, &[1.0f32; 8]).unwrap();
    let n = 4u32;
    {
        let mut mid = buf.slice_mut(2..6).unwrap();
        let mut a = args![&mut mid, &3.0f32, &n];
        assert!(a.is_writable(0) && !a.is_writable(1) && !a.is_writable(2));
        // SAFETY: scale(float*, float, unsigned) writing n = 4 floats of a 4-float view.
        unsafe { k.launch(&stream, LaunchConfig::for_num_elems(n, 64), &mut a) }.unwrap();
    }
    assert_eq!(
        buf.to_vec_on(&stream).unwrap(),
        [1.0, 1.0, 3.0, 3.0, 3.0, 3.0, 1.0, 1.0]
    );
    let tail = buf.slice(6..).unwrap();
    assert_eq!(tail.len(), 2);
    assert_eq!(tail.as_raw() as usize, buf.as_raw() as usize + 24);
    assert_eq!(tail.to_vec_on(&stream).unwrap(), [1.0, 1.0]);
    assert_eq!(tail.slice(1..).unwrap().to_vec_on(&stream).unwrap(), [1.0]);
}

#[test]
fn view_past_the_end_is_an_error_naming_the_range_and_the_length() {
    let (_, dev) = fixture_device("views-range", &[]);
    let mut buf = DeviceBuffer::<u32>::alloc(&dev, 4).unwrap();
    let err = buf.slice(2..5).unwrap_err();
    assert_eq!(
        err.to_string(),
        "slice failed: hipErrorInvalidValue (1): refused by hipjit: the range \
         Included(2)..Excluded(5) is not within the 4 values of the device memory"
    );
    let mut view = buf.slice_mut(1..).unwrap();
    assert!(view.slice_mut(..4).is_err());
    assert_eq!(view.slice_mut(..3).unwrap().len(), 3);
}

#[test]
fn to_vec_on_copies_on_the_stream_and_waits_for_that_stream() {
    use hipjit::memory::DeviceMemory;
    let (path, dev) = fixture_device("to-vec-on", &[]);
    let stream = Stream::new(&dev, StreamFlags::NON_BLOCKING).unwrap();
    let s = p(stream.as_raw());
    let buf = DeviceBuffer::from_slice(&dev, &[1u32, 2, 3]).unwrap();
    assert_eq!(buf.to_vec_on(&stream).unwrap(), [1, 2, 3]);
    let log = log(&path);
    let at = in_order(
        &log,
        &[
            format!("hipMemcpyAsync 12 kind=2 {s}"),
            format!("hipStreamSynchronize {s}"),
        ],
    );
    assert_eq!(at[1], at[0] + 1, "{log:#?}");
}

#[test]
fn host_and_device_copies_on_a_stream_reach_views() {
    use hipjit::memory::DeviceMemoryMut;
    let (path, dev) = fixture_device("views-copies", &[]);
    let stream = Stream::new(&dev, StreamFlags::NON_BLOCKING).unwrap();
    let s = p(stream.as_raw());
    let mut a = DeviceBuffer::<u32>::zeroed_async(&stream, 4).unwrap();
    let b = DeviceBuffer::from_slice(&dev, &[9u32, 8]).unwrap();
    a.slice_mut(1..3)
        .unwrap()
        .copy_from_device_async(&b, &stream)
        .unwrap();
    a.slice_mut(3..)
        .unwrap()
        .copy_from_host_on(&[5], &stream)
        .unwrap();
    let pinned = PinnedBuffer::<u32>::zeroed(&dev, 2).unwrap();
    let pinned = pinned
        .copy_from_device_async(&a.slice(2..).unwrap(), &stream)
        .unwrap()
        .wait()
        .unwrap();
    assert_eq!(&*pinned, &[8, 5]);
    let mut first = a.slice_mut(..1).unwrap();
    async_scope(&stream, |sc| sc.copy_to_device(&[4u32], &mut first))
        .unwrap()
        .unwrap();
    let mut back = [0u32; 4];
    async_scope(&stream, |sc| sc.copy_to_host(&a, &mut back))
        .unwrap()
        .unwrap();
    assert_eq!(back, [4, 9, 8, 5]);
    let err = a
        .slice_mut(..2)
        .unwrap()
        .copy_from_device_async(&b.slice(..1).unwrap(), &stream)
        .unwrap_err();
    assert!(
        err.to_string()
            .contains("source of 1 values for device memory of 2 values"),
        "{err}"
    );
    in_order(
        &log(&path),
        &[
            format!("hipMemcpyAsync 8 kind=3 {s}"),
            format!("hipMemcpyAsync 4 kind=1 {s}"),
            format!("hipStreamSynchronize {s}"),
            format!("hipMemcpyAsync 8 kind=2 {s}"),
        ],
    );
}

#[cfg(feature = "half")]
#[test]
fn f16_and_bf16_values_round_trip_through_device_memory_and_are_2_byte_arguments() {
    use half::{bf16, f16};
    let (_, dev) = fixture_device("half", &[]);
    let h: Vec<f16> = [0.5f32, -2.0, 65504.0].map(f16::from_f32).to_vec();
    let buf = DeviceBuffer::from_slice(&dev, &h).unwrap();
    assert_eq!(buf.size_bytes(), 6);
    assert_eq!(buf.to_vec().unwrap(), h);
    let b: Vec<bf16> = [1.0f32, -0.0, 3.0e38].map(bf16::from_f32).to_vec();
    let buf = DeviceBuffer::from_slice(&dev, &b).unwrap();
    assert_eq!(buf.to_vec().unwrap(), b);
    let (x, y) = (f16::ONE, bf16::ONE);
    assert_eq!(args![&x, &y].sizes(), [2, 2]);
}

#[test]
fn synchronous_upload_copy_and_fill_are_complete_when_they_return() {
    // The CUDA driver's cuMemcpy from pageable memory returns before its DMA is done, and its
    // device-to-device cuMemcpy and cuMemsetD8 return at once: each is followed by a wait for
    // the null stream, so a kernel queued next on a NON_BLOCKING stream sees the data.
    let (path, dev) = fixture_device("sync-complete", &[]);
    let mut a = DeviceBuffer::from_slice(&dev, &[1u32, 2, 3, 4]).unwrap();
    let b = DeviceBuffer::<u32>::zeroed(&dev, 4).unwrap();
    a.copy_from_device(&b).unwrap();
    assert_eq!(a.to_vec().unwrap(), [0; 4]);
    let log = log(&path);
    let at = in_order(
        &log,
        &[
            "hipMemcpy 16 kind=1".to_owned(),
            "hipStreamSynchronize (nil)".to_owned(),
            "hipMemset 16".to_owned(),
            "hipStreamSynchronize (nil)".to_owned(),
            "hipMemcpy 16 kind=3".to_owned(),
            "hipStreamSynchronize (nil)".to_owned(),
            "hipMemcpy 16 kind=2".to_owned(),
        ],
    );
    for pair in at.chunks(2).take(3) {
        assert_eq!(pair[1], pair[0] + 1, "{log:#?}");
    }
    assert_eq!(at[6], log.len() - 1, "no wait after a download: {log:#?}");
}

#[test]
fn argument_the_code_object_says_is_written_is_refused_as_a_shared_borrow() {
    // access(const float* __restrict__ x, float* __restrict__ y, const float* w, float a,
    // unsigned n), built by hipcc 7.0.2, whose metadata says `.actual_access: write_only` of y.
    let (path, dev) = fixture_device("access-metadata", &[]);
    let co = CodeObject::from_bytes(&data("access-gfx90a.hsaco"), None).unwrap();
    let lib = Library::load(&dev, &co).unwrap();
    let k = lib.kernel("access").unwrap();
    let stream = Stream::new(&dev, StreamFlags::NON_BLOCKING).unwrap();
    let x = DeviceBuffer::<f32>::zeroed(&dev, 4).unwrap();
    let mut y = DeviceBuffer::<f32>::zeroed(&dev, 4).unwrap();
    let n = 4u32;
    let cfg = LaunchConfig::for_num_elems(n, 64);
    // SAFETY: refused before the call.
    let err = unsafe { k.launch(&stream, cfg, &mut args![&x, &y, &x, &2.0f32, &n]) }.unwrap_err();
    assert_eq!(
        err.to_string(),
        "kernel access argument 1: the code object says the kernel writes it (write_only), but \
         it was passed as a shared borrow; pass it as &mut"
    );
    assert!(position(&log(&path), "hipModuleLaunchKernel").is_none());
    // SAFETY: access(...) with 4 floats each; y written, x and w (the same buffer) read.
    unsafe { k.launch(&stream, cfg, &mut args![&x, &mut y, &x, &2.0f32, &n]) }.unwrap();
    assert_eq!(lines(&log(&path), "hipModuleLaunchKernel access").len(), 1);
    // A prepared launch keeps the rule on every launch.
    let prepared = k
        .prepare(&stream, cfg, &args![&x, &mut y, &x, &2.0f32, &n])
        .unwrap();
    // SAFETY: refused before the call.
    let err = unsafe { prepared.launch(&mut args![&x, &y, &x, &2.0f32, &n]) }.unwrap_err();
    assert!(
        matches!(err, LaunchError::ArgWritten { index: 1, .. }),
        "{err}"
    );
    // SAFETY: as the launch above.
    unsafe { prepared.launch(&mut args![&x, &mut y, &x, &2.0f32, &n]) }.unwrap();
    assert_eq!(lines(&log(&path), "hipModuleLaunchKernel access").len(), 2);
}

#[test]
fn prepared_launch_is_checked_once_then_runs_with_new_values() {
    let (path, dev) = fixture_device("prepared", &[]);
    let lib = Library::load(&dev, &gfx90a()).unwrap();
    let kernel = lib.kernel("scale").unwrap();
    let stream = Stream::new(&dev, StreamFlags::NON_BLOCKING).unwrap();
    let n = 64u32;
    let mut buf = DeviceBuffer::from_slice(&dev, &vec![1.0f32; n as usize]).unwrap();
    let cfg = LaunchConfig::for_num_elems(n, 32);
    let prepared = kernel
        .prepare(&stream, cfg, &args![&mut buf, &0.0f32, &n])
        .unwrap();
    assert_eq!(prepared.arg_sizes(), [8, 4, 4]);
    for a in [2.0f32, 3.0, 0.5] {
        // SAFETY: scale(float*, float, unsigned) with a buffer of n floats.
        unsafe { prepared.launch(&mut args![&mut buf, &a, &n]) }.unwrap();
    }
    stream.synchronize().unwrap();
    drop(prepared);
    assert_eq!(buf.to_vec().unwrap(), vec![3.0f32; n as usize]);
    let log = log(&path);
    let launches = lines(
        &log,
        "hipModuleLaunchKernel scale grid=2,1,1 block=32,1,1 lds=0 ",
    );
    assert_eq!(launches.len(), 3, "{log:#?}");
}

#[test]
fn prepared_launch_refuses_arguments_of_another_shape_naming_the_argument() {
    with_scale_kernel("prepared-shape", |k, s, buf| {
        let n = 16u32;
        let cfg = LaunchConfig::for_num_elems(16, 16);
        let prepared = k.prepare(s, cfg, &args![buf, &1.0f32, &n]).unwrap();
        // SAFETY: refused before the call.
        let err = unsafe { prepared.launch(&mut args![buf, &1.0f64, &n]) }.unwrap_err();
        assert!(
            matches!(
                err,
                LaunchError::ArgSize {
                    index: 1,
                    expected: 4,
                    given: 8,
                    ..
                }
            ),
            "{err:?}"
        );
        // SAFETY: refused before the call.
        let err = unsafe { prepared.launch(&mut args![buf, &1.0f32]) }.unwrap_err();
        assert_eq!(err.to_string(), "kernel scale takes 3 arguments, 2 given");
        // A configuration out of range is refused at preparation.
        let too_big = LaunchConfig {
            block: 4096.into(),
            ..cfg
        };
        let err = k.prepare(s, too_big, &args![buf, &1.0f32, &n]).unwrap_err();
        assert!(
            matches!(err, LaunchError::BlockDim { value: 4096, .. }),
            "{err:?}"
        );
    });
}

mod graphs {
    use super::*;
    use hipjit::graph::{CaptureMode, GraphError, Written};

    fn scale_setup(
        name: &str,
    ) -> (
        PathBuf,
        hipjit::device::Device,
        hipjit::kernel::Kernel,
        Stream,
    ) {
        let (path, dev) = fixture_device(name, &[]);
        let kernel = Library::load(&dev, &gfx90a())
            .unwrap()
            .kernel("scale")
            .unwrap();
        let stream = Stream::new(&dev, StreamFlags::NON_BLOCKING).unwrap();
        (path, dev, kernel, stream)
    }

    #[test]
    fn capture_records_launches_that_each_replay_runs_in_order() {
        let (path, dev, kernel, stream) = scale_setup("graph-replay");
        let n = 8u32;
        let (two, three) = (2.0f32, 3.0f32);
        let x = DeviceBuffer::from_slice(&dev, &[1.0f32; 8]).unwrap();
        let cfg = LaunchConfig::for_num_elems(n, 8);
        let mut cap = stream.begin_capture(CaptureMode::Global).unwrap();
        // SAFETY: scale(float*, float, unsigned) on a buffer of n floats.
        unsafe {
            cap.launch(&kernel, cfg, args![Written(&x), &two, &n])
                .unwrap();
        }
        // SAFETY: as above.
        unsafe {
            cap.launch(&kernel, cfg, args![Written(&x), &three, &n])
                .unwrap();
        }
        let graph = cap.end_capture().unwrap();
        assert_eq!(graph.kernel_nodes().unwrap().len(), 2, "{:#?}", log(&path));
        let exec = graph.instantiate().unwrap();
        exec.launch(&stream).unwrap();
        stream.synchronize().unwrap();
        assert_eq!(x.to_vec().unwrap(), [6.0f32; 8], "read between replays");
        exec.launch(&stream).unwrap();
        stream.synchronize().unwrap();
        drop((exec, graph));
        assert_eq!(x.to_vec().unwrap(), [36.0f32; 8], "(2 * 3)^2");
        let log = log(&path);
        in_order(
            &log,
            &[
                "hipStreamBeginCapture".into(),
                "captured scale".into(),
                "captured scale".into(),
                "hipStreamEndCapture".into(),
                "hipGraphInstantiateWithFlags".into(),
                "hipGraphLaunch".into(),
                "hipGraphLaunch".into(),
                "hipGraphExecDestroy".into(),
                "hipGraphDestroy".into(),
            ],
        );
        assert!(
            position(&log, "hipStreamEndCapture").is_some_and(|i| log[i].ends_with("nodes=2")),
            "{log:#?}"
        );
        assert!(
            position(&log, "hipModuleLaunchKernel").is_some(),
            "launches go through hipModuleLaunchKernel while capturing: {log:#?}"
        );
    }

    #[test]
    fn graph_replays_after_its_stream_kernel_and_library_are_dropped() {
        let (path, dev, kernel, stream) = scale_setup("graph-keepalive");
        let n = 4u32;
        let a = 2.0f32;
        let mut x = DeviceBuffer::from_slice(&dev, &[1.0f32; 4]).unwrap();
        let mut cap = stream.begin_capture(CaptureMode::ThreadLocal).unwrap();
        // SAFETY: scale on a buffer of n floats.
        unsafe {
            cap.launch(
                &kernel,
                LaunchConfig::for_num_elems(n, 4),
                args![&mut x, &a, &n],
            )
            .unwrap();
        }
        let exec = cap.end_capture().unwrap().instantiate().unwrap();
        drop((kernel, stream));
        assert!(
            position(&log(&path), "hipModuleUnload").is_none(),
            "the graph keeps the module loaded"
        );
        let other = Stream::new(&dev, StreamFlags::empty()).unwrap();
        exec.launch(&other).unwrap();
        other.synchronize().unwrap();
        drop(exec);
        assert_eq!(x.to_vec().unwrap(), [2.0f32; 4]);
        in_order(
            &log(&path),
            &[
                "hipGraphLaunch".into(),
                "hipGraphExecDestroy".into(),
                "hipGraphDestroy".into(),
                "hipModuleUnload".into(),
            ],
        );
    }

    #[test]
    fn kernel_node_update_changes_the_next_replay() {
        let (path, dev, kernel, stream) = scale_setup("graph-update");
        let n = 4u32;
        let (two, five) = (2.0f32, 5.0f32);
        let mut x = DeviceBuffer::from_slice(&dev, &[1.0f32; 4]).unwrap();
        let mut y = DeviceBuffer::from_slice(&dev, &[1.0f32; 4]).unwrap();
        let cfg = LaunchConfig::for_num_elems(n, 4);
        let mut cap = stream.begin_capture(CaptureMode::Relaxed).unwrap();
        // SAFETY: scale on a buffer of n floats.
        unsafe { cap.launch(&kernel, cfg, args![&mut x, &two, &n]) }.unwrap();
        let graph = cap.end_capture().unwrap();
        let mut exec = graph.instantiate().unwrap();
        let node = exec.kernel_nodes()[0];
        // SAFETY: as above, on y.
        unsafe { exec.set_kernel_params(node, &kernel, cfg, args![&mut y, &five, &n]) }.unwrap();
        exec.launch(&stream).unwrap();
        stream.synchronize().unwrap();
        // A wrongly shaped update is refused by the launch checks, before the call.
        // SAFETY: refused before the call.
        let err =
            unsafe { exec.set_kernel_params(node, &kernel, cfg, args![&five, &n]) }.unwrap_err();
        assert_eq!(err.to_string(), "kernel scale takes 3 arguments, 2 given");
        drop((exec, graph));
        assert_eq!(
            x.to_vec().unwrap(),
            [1.0f32; 4],
            "x is no longer in the graph"
        );
        assert_eq!(y.to_vec().unwrap(), [5.0f32; 4]);
        let log = log(&path);
        assert_eq!(
            lines(&log, "hipGraphExecKernelNodeSetParams").len(),
            1,
            "{log:#?}"
        );
    }

    #[test]
    fn dropping_an_executable_graph_waits_for_its_replays_on_every_stream() {
        // The reported use-after-free: a stream-ordered buffer written by the graph, replays on
        // two streams, the graph dropped, then the buffer (its free ordered on s1 only).
        let (path, dev, kernel, s1) = scale_setup("graph-drop-waits");
        let s2 = Stream::new(&dev, StreamFlags::NON_BLOCKING).unwrap();
        let n = 4u32;
        let a = 2.0f32;
        let y = DeviceBuffer::<f32>::zeroed_async(&s1, 4).unwrap();
        let cfg = LaunchConfig::for_num_elems(n, 4);
        let mut cap = s1.begin_capture(CaptureMode::Global).unwrap();
        // SAFETY: scale on a buffer of n floats.
        unsafe { cap.launch(&kernel, cfg, args![Written(&y), &a, &n]) }.unwrap();
        let exec = cap.end_capture().unwrap().instantiate().unwrap();
        exec.launch(&s1).unwrap();
        exec.launch(&s2).unwrap();
        exec.launch(&s1).unwrap();
        let (q1, q2) = (format!("{:p}", s1.as_raw()), format!("{:p}", s2.as_raw()));
        let y_ptr = format!("{:p}", y.as_raw());
        drop(exec);
        drop(y);
        let log = log(&path);
        let launches: Vec<usize> = log
            .iter()
            .enumerate()
            .filter(|(_, l)| l.starts_with("hipGraphLaunch "))
            .map(|(i, _)| i)
            .collect();
        assert_eq!(launches.len(), 3, "{log:#?}");
        // Each replay is followed by a record of its stream's event, one event per stream.
        let mut events = Vec::new();
        for (&at, stream) in launches.iter().zip([&q1, &q2, &q1]) {
            assert!(log[at].ends_with(&format!("stream={stream}")), "{log:#?}");
            let fields: Vec<&str> = log[at + 1].split(' ').collect();
            assert_eq!(fields[0], "hipEventRecord", "{log:#?}");
            assert_eq!(fields[2], stream.as_str(), "{log:#?}");
            events.push(fields[1].to_owned());
        }
        assert_eq!(events[0], events[2], "one event per stream: {log:#?}");
        assert_ne!(events[0], events[1], "one event per stream: {log:#?}");
        let last_launch = launches[2];
        let destroy = position(&log, "hipGraphExecDestroy").unwrap();
        for e in &events[..2] {
            let sync = log
                .iter()
                .position(|l| *l == format!("hipEventSynchronize {e}"))
                .unwrap_or_else(|| panic!("event {e} never synchronized: {log:#?}"));
            assert!(
                last_launch < sync && sync < destroy,
                "the drop waits for the replays before hipGraphExecDestroy: {log:#?}"
            );
        }
        let free = position(&log, &format!("hipFreeAsync {y_ptr}")).unwrap();
        assert!(destroy < free, "{log:#?}");
    }

    #[test]
    fn node_of_another_graph_is_refused() {
        let (_path, dev, kernel, stream) = scale_setup("graph-foreign");
        let n = 4u32;
        let a = 2.0f32;
        let x = DeviceBuffer::from_slice(&dev, &[1.0f32; 4]).unwrap();
        let cfg = LaunchConfig::for_num_elems(n, 4);
        let mut execs = Vec::new();
        for _ in 0..2 {
            let mut cap = stream.begin_capture(CaptureMode::Global).unwrap();
            // SAFETY: scale on a buffer of n floats.
            unsafe { cap.launch(&kernel, cfg, args![Written(&x), &a, &n]) }.unwrap();
            execs.push(cap.end_capture().unwrap().instantiate().unwrap());
        }
        let second = execs.pop().unwrap();
        let mut first = execs.pop().unwrap();
        let foreign = second.kernel_nodes()[0];
        // SAFETY: refused before the call.
        let err = unsafe { first.set_kernel_params(foreign, &kernel, cfg, args![&x, &a, &n]) }
            .unwrap_err();
        assert!(
            matches!(err, GraphError::ForeignNode { index: 0, count: 1 }),
            "{err:?}"
        );
    }

    #[test]
    fn load_allocation_and_synchronize_during_a_global_capture_are_refused_by_name() {
        let (path, dev, kernel, stream) = scale_setup("graph-refuse");
        let cap = stream.begin_capture(CaptureMode::Global).unwrap();
        let err = Library::load(&dev, &gfx90a()).unwrap_err();
        assert!(err.to_string().starts_with("hipModuleLoadData failed: hipErrorStreamCaptureUnsupported (900): refused by hipjit before the call"), "{err}");
        let err = DeviceBuffer::<f32>::alloc(&dev, 4).unwrap_err();
        assert_eq!((err.call(), err.code()), ("hipMalloc", 900), "{err}");
        let err = stream.synchronize().unwrap_err();
        assert_eq!(
            (err.call(), err.code()),
            ("hipStreamSynchronize", 900),
            "{err}"
        );
        assert!(
            err.to_string()
                .contains("the stream it would use is capturing"),
            "{err}"
        );
        let err = dev.synchronize().unwrap_err();
        assert_eq!(
            (err.call(), err.code()),
            ("hipDeviceSynchronize", 900),
            "{err}"
        );
        // The capture was not invalidated: it ends with its launch.
        let n = 4u32;
        let a = 2.0f32;
        let x = DeviceBuffer::<f32>::zeroed(&dev, 0).err();
        assert!(x.is_some(), "zeroed allocates: refused too");
        drop(x);
        let graph = cap.end_capture().unwrap();
        assert_eq!(graph.kernel_nodes().unwrap().len(), 0);
        drop((graph, kernel, n, a));
        let log = log(&path);
        assert!(
            position(&log, "hipModuleLoadData during capture").is_none()
                && position(&log, "hipMalloc during capture").is_none(),
            "hipjit made a forbidden call: {log:#?}"
        );
        assert_eq!(
            lines(&log, "hipModuleLoadData ").len(),
            1,
            "only the load before the capture: {log:#?}"
        );
        // After the capture, the same calls work.
        Library::load(&dev, &gfx90a()).unwrap();
        stream.synchronize().unwrap();
    }

    #[test]
    fn another_thread_may_load_during_a_thread_local_capture_but_not_during_a_global_one() {
        let (_path, dev, _kernel, stream) = scale_setup("graph-threads");
        let cap = stream.begin_capture(CaptureMode::ThreadLocal).unwrap();
        std::thread::scope(|s| {
            s.spawn(|| Library::load(&dev, &gfx90a()).unwrap());
        });
        cap.end_capture().unwrap();
        let cap = stream.begin_capture(CaptureMode::Global).unwrap();
        let err = std::thread::scope(|s| {
            s.spawn(|| Library::load(&dev, &gfx90a()).unwrap_err())
                .join()
                .unwrap()
        });
        assert!(
            err.to_string()
                .contains("a global-mode stream capture is under way"),
            "{err}"
        );
        cap.end_capture().unwrap();
    }

    /// A global-mode capture forbids unsafe calls into its own runtime on every thread, and
    /// nothing in another runtime library loaded beside it (whose captures and calls it cannot
    /// invalidate). Process-wide, it refused another test's allocation on its own fixture
    /// runtime whenever the two ran at once.
    #[test]
    fn a_global_capture_forbids_calls_into_its_own_runtime_only() {
        let (_path, dev, _kernel, stream) = scale_setup("graph-global-own");
        let (_other_path, other) = fixture_device("graph-global-other", &[]);
        let cap = stream.begin_capture(CaptureMode::Global).unwrap();
        std::thread::scope(|s| {
            s.spawn(|| {
                DeviceBuffer::<f32>::zeroed(&other, 4).unwrap();
                Library::load(&other, &gfx90a()).unwrap();
                let err = DeviceBuffer::<f32>::zeroed(&dev, 4).unwrap_err();
                assert!(
                    err.to_string()
                        .contains("a global-mode stream capture is under way"),
                    "{err}"
                );
            })
            .join()
            .unwrap()
        });
        DeviceBuffer::<f32>::zeroed(&other, 4).unwrap();
        cap.end_capture().unwrap();
        DeviceBuffer::<f32>::zeroed(&dev, 4).unwrap();
    }

    #[test]
    fn a_kernel_of_another_runtime_is_refused_at_every_launch_into_a_capture() {
        // The stream's runtime is checked against a kernel when the capture first keeps it: a
        // refused kernel is not kept, so a second launch of it is refused again, and refusing
        // it keeps out neither a kernel of the capture's own runtime nor its clones.
        let (path, dev, kernel, stream) = scale_setup("graph-foreign-a");
        let (_other_path, _other_dev, foreign, _other_stream) = scale_setup("graph-foreign-b");
        let n = 4u32;
        let a = 2.0f32;
        let x = DeviceBuffer::from_slice(&dev, &[1.0f32; 4]).unwrap();
        let cfg = LaunchConfig::for_num_elems(n, 4);
        let mut cap = stream.begin_capture(CaptureMode::ThreadLocal).unwrap();
        for _ in 0..2 {
            // SAFETY: refused before the runtime is called.
            let err = unsafe { cap.launch(&foreign, cfg, args![Written(&x), &a, &n]) }.unwrap_err();
            assert!(
                err.to_string()
                    .contains("refused by hipjit before the call"),
                "{err}"
            );
        }
        // SAFETY: scale(float*, float, unsigned) on a buffer of n floats.
        unsafe {
            cap.launch(&kernel, cfg, args![Written(&x), &a, &n])
                .unwrap();
            cap.launch(&kernel.clone(), cfg, args![Written(&x), &a, &n])
                .unwrap();
        }
        let graph = cap.end_capture().unwrap();
        assert_eq!(graph.kernel_nodes().unwrap().len(), 2, "{:#?}", log(&path));
    }

    #[test]
    fn capture_dropped_without_end_capture_ends_it_and_destroys_the_graph() {
        let (path, _dev, _kernel, stream) = scale_setup("graph-abandon");
        drop(stream.begin_capture(CaptureMode::Global).unwrap());
        stream.synchronize().unwrap();
        in_order(
            &log(&path),
            &[
                "hipStreamBeginCapture".into(),
                "hipStreamEndCapture".into(),
                "hipGraphDestroy".into(),
                "hipStreamSynchronize".into(),
            ],
        );
    }
}

#[test]
fn kernel_nodes_of_a_hip_5_runtime_are_found_by_its_own_node_type_value() {
    // HIP 5.x numbers hipGraphNodeTypeKernel 1, HIP 6.0 and later 0: the loaded runtime's value
    // counts, whatever the headers hipjit was built with say.
    let path = build("graph-hip5", &["RUNTIME_VERSION=50221153"], Props::Hip6);
    let dev = load(&path).device(0).unwrap();
    let kernel = Library::load(&dev, &gfx90a())
        .unwrap()
        .kernel("scale")
        .unwrap();
    let stream = Stream::new(&dev, StreamFlags::empty()).unwrap();
    let (n, a) = (4u32, 2.0f32);
    let x = DeviceBuffer::from_slice(&dev, &[1.0f32; 4]).unwrap();
    let mut cap = stream
        .begin_capture(hipjit::graph::CaptureMode::Global)
        .unwrap();
    // SAFETY: scale on a buffer of n floats.
    unsafe {
        cap.launch(
            &kernel,
            LaunchConfig::for_num_elems(n, 4),
            args![hipjit::graph::Written(&x), &a, &n],
        )
    }
    .unwrap();
    let graph = cap.end_capture().unwrap();
    assert_eq!(graph.kernel_nodes().unwrap().len(), 1);
}
