//! HIP's NVIDIA platform against a fixture CUDA driver (`tests/fixtures/fake_cuda.c`, compiled
//! here with `cc`): a stand-in for libcuda.so.1 on machines without an NVIDIA driver. It checks
//! that hipjit's HIP shims map each call onto the driver, read device attributes into the same
//! `Device` fields, translate `CUresult` into HIP's named errors, pass launches through
//! unchanged, bind a context on every thread, and pair every create with its destroy. The
//! cubin loaded is real (nvcc-built test data). The driver is process-wide, so every test here
//! shares the one fixture.

use crate::common;

use std::ffi::{c_int, c_uint, c_void};
use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard, OnceLock};

use hipjit::args;
use hipjit::cache::disk::{DiskCache, EntryMeta};
use hipjit::code_object::cubin::Cubin;
use hipjit::compiler::{CompileOptions, CompilerConfig};
use hipjit::cuda::target::SmTarget;
use hipjit::jit::{CacheLocation, Jit, JitError, JitOptions, Origin, CUBIN_ARTEFACT};
use hipjit::launch::LaunchConfig;
use hipjit::library::Library;
use hipjit::memory::DeviceBuffer;
use hipjit::runtime::{CodeObjectLoader, Platform, Runtime};
use hipjit::stream::{Stream, StreamFlags};

use common::toolchain::nvcc;

#[repr(C)]
struct LastLaunch {
    grid: [c_uint; 3],
    block: [c_uint; 3],
    shared: c_uint,
    stream: *mut c_void,
    f: *mut c_void,
    params: *mut *mut c_void,
    count: c_int,
}

#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Live {
    streams: c_int,
    events: c_int,
    modules: c_int,
    libraries: c_int,
    allocations: c_int,
}

struct Fixture {
    path: PathBuf,
    handle: *mut c_void,
}
// SAFETY: a dlopen handle used only for dlsym.
unsafe impl Send for Fixture {}
// SAFETY: as above.
unsafe impl Sync for Fixture {}

fn fixture() -> &'static Fixture {
    static F: OnceLock<Fixture> = OnceLock::new();
    F.get_or_init(|| {
        let out = common::fixture_lib::fake_cuda().to_path_buf();
        let c = std::ffi::CString::new(out.to_str().unwrap()).unwrap();
        // SAFETY: a library just built; hipjit opens the same file and gets the same handle.
        let handle = unsafe { libc::dlopen(c.as_ptr(), libc::RTLD_NOW | libc::RTLD_NODELETE) };
        assert!(!handle.is_null());
        Fixture { path: out, handle }
    })
}

fn sym(name: &std::ffi::CStr) -> *mut c_void {
    // SAFETY: live handle, NUL-terminated name.
    let p = unsafe { libc::dlsym(fixture().handle, name.as_ptr()) };
    assert!(!p.is_null(), "fixture lacks {name:?}");
    p
}

fn fail_next(code: c_int) {
    // SAFETY: fixture_fail_next(int).
    let f: extern "C" fn(c_int) = unsafe { std::mem::transmute(sym(c"fixture_fail_next")) };
    f(code);
}

fn live() -> Live {
    // SAFETY: the fixture's fixture_live struct, laid out as `Live`.
    unsafe { *(sym(c"fixture_live") as *const Live) }
}

fn current_ctx() -> *mut c_void {
    // SAFETY: fixture_current_ctx(void).
    let f: extern "C" fn() -> *mut c_void =
        unsafe { std::mem::transmute(sym(c"fixture_current_ctx")) };
    f()
}

/// Tests change the fixture's shared state (fail_next, counters): one at a time.
fn serial() -> MutexGuard<'static, ()> {
    static M: Mutex<()> = Mutex::new(());
    M.lock().unwrap_or_else(|e| e.into_inner())
}

fn runtime() -> Runtime {
    Runtime::load_cuda(Some(&fixture().path)).expect("the fixture driver loads")
}

fn cubin() -> Cubin {
    let bytes = std::fs::read(common::code_object("cuda/add_one-sm_90.cubin")).unwrap();
    Cubin::from_bytes(&bytes).unwrap()
}

#[test]
fn fixture_driver_loads_as_the_nvidia_platform() {
    let _g = serial();
    let rt = runtime();
    assert_eq!(rt.platform(), Platform::Nvidia);
    assert_eq!(rt.path(), fixture().path.as_path());
    assert_eq!(
        rt.version().map(|v| v.to_string()).as_deref(),
        Some("12.4.0")
    );
    assert_eq!(rt.code_object_loader(), CodeObjectLoader::ModuleApi);
    assert!(rt.require_library_api().is_ok());
    assert!(rt.has_cooperative_launch());
}

#[test]
fn cubins_load_through_the_module_api_unless_the_library_api_is_chosen() {
    let _g = serial();
    let rt = runtime();
    let dev = rt.device(0).unwrap();
    let before = live();
    let module = Library::load_cubin(&dev, &cubin()).unwrap();
    assert_eq!(module.loader(), CodeObjectLoader::ModuleApi);
    assert_eq!(
        (live().modules, live().libraries),
        (before.modules + 1, before.libraries)
    );
    assert_eq!(module.runtime_kernel_count().unwrap(), None);
    rt.set_code_object_loader(CodeObjectLoader::LibraryApi)
        .unwrap();
    assert_eq!(
        dev.runtime().code_object_loader(),
        CodeObjectLoader::LibraryApi
    );
    let library = Library::load_cubin(&dev, &cubin()).unwrap();
    assert_eq!(library.loader(), CodeObjectLoader::LibraryApi);
    assert_eq!(
        (live().modules, live().libraries),
        (before.modules + 1, before.libraries + 1)
    );
    // The same kernel metadata either way (from the cubin), and both launch.
    assert_eq!(
        module.kernel_names().collect::<Vec<_>>(),
        library.kernel_names().collect::<Vec<_>>()
    );
    let buf = DeviceBuffer::<i32>::zeroed(&dev, 64).unwrap();
    let stream = Stream::new(&dev, StreamFlags::empty()).unwrap();
    for lib in [&module, &library] {
        let k = lib.kernel("add_one").unwrap();
        // SAFETY: add_one's one pointer argument; the fixture runs nothing.
        unsafe {
            k.launch(
                &stream,
                LaunchConfig::for_num_elems(64, 64),
                &mut args![&buf],
            )
            .unwrap()
        };
    }
    rt.set_code_object_loader(CodeObjectLoader::ModuleApi)
        .unwrap();
    assert_eq!(rt.code_object_loader(), CodeObjectLoader::ModuleApi);
}

#[test]
fn device_properties_come_from_driver_attributes() {
    let _g = serial();
    let dev = runtime().device(0).unwrap();
    let p = dev.properties();
    assert_eq!(p.name, "Fixture GPU");
    assert_eq!(p.arch_name, "sm_90");
    assert_eq!(
        dev.sm_target().map(|s| s.to_string()).as_deref(),
        Some("sm_90")
    );
    assert_eq!(dev.target_id(), None);
    assert_eq!(
        (p.compute_units, p.wavefront_size, p.max_threads_per_block),
        (132, 32, 1024)
    );
    assert_eq!(
        (p.lds_per_block, p.max_block_dims),
        (49152, [1024, 1024, 64])
    );
    assert_eq!(p.total_global_mem, 141 << 30);
    assert_eq!(p.clock_khz, 1_980_000);
}

#[test]
fn out_of_range_ordinal_is_hip_error_invalid_device() {
    let _g = serial();
    let err = runtime().device(1).unwrap_err();
    assert_eq!((err.code(), err.name()), (101, "hipErrorInvalidDevice"));
}

#[test]
fn memory_round_trips_through_the_driver() {
    let _g = serial();
    let dev = runtime().device(0).unwrap();
    let mut buf = DeviceBuffer::from_slice(&dev, &[1u32, 2, 3, 4]).unwrap();
    assert_eq!(buf.to_vec().unwrap(), [1, 2, 3, 4]);
    buf.memset(0xff).unwrap();
    assert_eq!(buf.to_vec().unwrap(), [u32::MAX; 4]);
}

#[test]
fn zero_length_device_buffer_allocates_nothing_as_on_hip() {
    let _g = serial();
    let dev = runtime().device(0).unwrap();
    let before = live().allocations;
    let buf = DeviceBuffer::<u32>::alloc(&dev, 0).unwrap();
    assert!(buf.as_raw().is_null());
    assert_eq!(live().allocations, before);
    drop(buf);
    assert_eq!(live().allocations, before);
}

#[test]
fn mapped_cu_result_keeps_its_value_and_hip_name() {
    let _g = serial();
    let dev = runtime().device(0).unwrap();
    fail_next(200);
    let err = Library::load_cubin(&dev, &cubin()).unwrap_err().to_string();
    assert!(err.contains("hipModuleLoadData"), "{err}");
    assert!(err.contains("hipErrorInvalidImage (200)"), "{err}");
    assert!(
        err.contains("fixture: device kernel image is invalid"),
        "{err}"
    );
}

#[test]
fn unmapped_cu_result_is_hip_error_unknown_with_the_driver_string() {
    let _g = serial();
    let dev = runtime().device(0).unwrap();
    fail_next(220);
    let err = Stream::new(&dev, StreamFlags::NON_BLOCKING).unwrap_err();
    assert_eq!((err.code(), err.name()), (999, "hipErrorUnknown"));
    assert!(
        err.to_string().contains("CUDA_ERROR_NVLINK_UNCORRECTABLE"),
        "{err}"
    );
}

#[test]
fn launch_passes_geometry_stream_and_arguments_through() {
    let _g = serial();
    let dev = runtime().device(0).unwrap();
    let lib = Library::load_cubin(&dev, &cubin()).unwrap();
    let kernel = lib.kernel("add_one").unwrap();
    let stream = Stream::new(&dev, StreamFlags::NON_BLOCKING).unwrap();
    let buf = DeviceBuffer::<i32>::zeroed(&dev, 64).unwrap();
    let cfg = LaunchConfig {
        grid: (3, 2, 1).into(),
        block: (64, 1, 1).into(),
        dynamic_lds_bytes: 256,
    };
    // SAFETY: the fixture runs nothing; add_one(int*) takes one pointer.
    unsafe { kernel.launch(&stream, cfg, &mut args![&buf]).unwrap() };
    // SAFETY: the fixture's record, laid out as `LastLaunch`; read after the launch returned.
    let last = unsafe { &*(sym(c"fixture_last_launch") as *const LastLaunch) };
    assert_eq!(
        (last.grid, last.block, last.shared),
        ([3, 2, 1], [64, 1, 1], 256)
    );
    assert_eq!(last.stream, stream.as_raw() as *mut c_void);
    assert_eq!(last.f, kernel.as_raw() as *mut c_void);
    // SAFETY: params[0] points at the argument value, the buffer's device pointer.
    let arg0 = unsafe { *(*last.params as *const *mut c_void) };
    assert_eq!(arg0, buf.as_raw());
}

#[test]
fn set_max_dynamic_lds_raises_the_launch_check_to_the_opt_in() {
    let _g = serial();
    let dev = runtime().device(0).unwrap();
    let lib = Library::load_cubin(&dev, &cubin()).unwrap();
    let kernel = lib.kernel("add_one").unwrap();
    let stream = Stream::new(&dev, StreamFlags::NON_BLOCKING).unwrap();
    let buf = DeviceBuffer::<i32>::zeroed(&dev, 64).unwrap();
    let cfg = LaunchConfig {
        grid: 1.into(),
        block: 64.into(),
        dynamic_lds_bytes: 96 * 1024,
    };
    // SAFETY: refused before the call (above the fixture's 49152 bytes per block).
    let err = unsafe { kernel.launch(&stream, cfg, &mut args![&buf]) }.unwrap_err();
    assert!(err.to_string().contains("98304 bytes dynamic LDS"), "{err}");
    kernel.set_max_dynamic_lds(96 * 1024).unwrap();
    // SAFETY: the fixture runs nothing; add_one(int*) takes one pointer.
    unsafe { kernel.launch(&stream, cfg, &mut args![&buf]) }.unwrap();
    // SAFETY: the fixture's record, laid out as `LastLaunch`; read after the launch returned.
    let last = unsafe { &*(sym(c"fixture_last_launch") as *const LastLaunch) };
    assert_eq!(last.shared, 96 * 1024);
}

#[test]
fn the_dynamic_lds_raise_is_the_functions_whichever_kernel_of_it_set_it() {
    let _g = serial();
    let dev = runtime().device(0).unwrap();
    let lib = Library::load_cubin(&dev, &cubin()).unwrap();
    let (first, second) = (
        lib.kernel("add_one").unwrap(),
        lib.kernel("add_one").unwrap(),
    );
    assert_eq!(first.as_raw(), second.as_raw(), "one function, two Kernels");
    let stream = Stream::new(&dev, StreamFlags::NON_BLOCKING).unwrap();
    let buf = DeviceBuffer::<i32>::zeroed(&dev, 64).unwrap();
    let cfg = LaunchConfig {
        grid: 1.into(),
        block: 64.into(),
        dynamic_lds_bytes: 96 * 1024,
    };
    // Raised through one Kernel, the function allows it through the other, and through a
    // Kernel asked for later.
    first.set_max_dynamic_lds(96 * 1024).unwrap();
    let later = lib.kernel("add_one").unwrap();
    for k in [&first, &second, &later] {
        // SAFETY: the fixture runs nothing; add_one(int*) takes one pointer.
        unsafe { k.launch(&stream, cfg, &mut args![&buf]) }.unwrap();
    }
    // Lowered through another, no Kernel of the function passes the check with more: the
    // driver's attribute is the function's, whichever Kernel raised it before.
    second.set_max_dynamic_lds(0).unwrap();
    for k in [&first, &second, &later] {
        // SAFETY: refused before the call (above the fixture's 49152 bytes per block).
        let err = unsafe { k.launch(&stream, cfg, &mut args![&buf]) }.unwrap_err();
        assert!(err.to_string().contains("98304 bytes dynamic LDS"), "{err}");
    }
}

#[test]
fn launch_checks_argument_count_against_the_cubin() {
    let _g = serial();
    let dev = runtime().device(0).unwrap();
    let lib = Library::load_cubin(&dev, &cubin()).unwrap();
    let kernel = lib.kernel("add_one").unwrap();
    let stream = Stream::new(&dev, StreamFlags::empty()).unwrap();
    let n = 1u32;
    // SAFETY: refused before the driver is called.
    let err = unsafe {
        kernel.launch(
            &stream,
            LaunchConfig::for_num_elems(1, 1),
            &mut args![&n, &n],
        )
    }
    .unwrap_err()
    .to_string();
    assert!(
        err.contains("add_one") && err.contains('1') && err.contains('2'),
        "{err}"
    );
}

#[test]
fn every_create_has_its_destroy() {
    let _g = serial();
    let dev = runtime().device(0).unwrap();
    let before = live();
    {
        let lib = Library::load_cubin(&dev, &cubin()).unwrap();
        let _k = lib.kernel("add_one").unwrap();
        let _s = Stream::new(&dev, StreamFlags::empty()).unwrap();
        let _e = hipjit::event::Event::new(&dev, hipjit::event::EventFlags::empty()).unwrap();
        let _b = DeviceBuffer::<u8>::zeroed(&dev, 10).unwrap();
        let during = live();
        assert_eq!(
            (
                during.modules,
                during.streams,
                during.events,
                during.allocations
            ),
            (
                before.modules + 1,
                before.streams + 1,
                before.events + 1,
                before.allocations + 1
            )
        );
    }
    assert_eq!(live(), before);
}

#[test]
fn a_fresh_thread_gets_the_primary_context_bound() {
    let _g = serial();
    let dev = runtime().device(0).unwrap();
    std::thread::spawn(move || {
        assert!(
            current_ctx().is_null(),
            "a new thread starts with no context"
        );
        let s = Stream::new(&dev, StreamFlags::empty()).expect("works on a fresh thread");
        assert!(!current_ctx().is_null());
        drop(s);
    })
    .join()
    .unwrap();
}

fn ctx_queries() -> c_int {
    // SAFETY: the fixture's counter, an int.
    unsafe { std::ptr::read_volatile(sym(c"fixture_ctx_queries") as *const c_int) }
}

fn launches() -> c_int {
    // SAFETY: the fixture's record, laid out as `LastLaunch`.
    unsafe { std::ptr::read_volatile(&(*(sym(c"fixture_last_launch") as *const LastLaunch)).count) }
}

/// On a thread whose current context is the device's, a launch on a stream is the driver's
/// `cuLaunchKernel` alone: no `cuCtxGetCurrent`, through `Kernel::launch` and a prepared launch.
#[test]
fn a_launch_on_a_bound_thread_asks_the_driver_nothing_but_the_launch() {
    let _g = serial();
    let dev = runtime().device(0).unwrap();
    let lib = Library::load_cubin(&dev, &cubin()).unwrap();
    let kernel = lib.kernel("add_one").unwrap();
    let stream = Stream::new(&dev, StreamFlags::NON_BLOCKING).unwrap();
    let buf = DeviceBuffer::<i32>::zeroed(&dev, 64).unwrap();
    let cfg = LaunchConfig::for_num_elems(64, 64);
    let prepared = kernel.prepare(&stream, cfg, &args![&buf]).unwrap();
    let (queries, count) = (ctx_queries(), launches());
    for _ in 0..10 {
        // SAFETY: the fixture runs nothing; add_one(int*) takes one pointer.
        unsafe { kernel.launch(&stream, cfg, &mut args![&buf]).unwrap() };
        // SAFETY: as above.
        unsafe { prepared.launch(&mut args![&buf]).unwrap() };
    }
    assert_eq!(launches() - count, 20);
    assert_eq!(
        ctx_queries() - queries,
        0,
        "cuCtxGetCurrent called on the launch path"
    );
}

/// A thread with no current context: the driver refuses the launch
/// (CUDA_ERROR_INVALID_CONTEXT), hipjit binds the primary context and launches once more; one
/// launch is queued.
#[test]
fn a_launch_on_a_fresh_thread_binds_the_context_the_driver_asks_for() {
    let _g = serial();
    let dev = runtime().device(0).unwrap();
    let lib = Library::load_cubin(&dev, &cubin()).unwrap();
    let kernel = lib.kernel("add_one").unwrap();
    let stream = Stream::new(&dev, StreamFlags::NON_BLOCKING).unwrap();
    let buf = DeviceBuffer::<i32>::zeroed(&dev, 64).unwrap();
    let cfg = LaunchConfig::for_num_elems(64, 64);
    let prepared = kernel.prepare(&stream, cfg, &args![&buf]).unwrap();
    let (kernel, stream, buf, prepared) = (&kernel, &stream, &buf, &prepared);
    std::thread::scope(|s| {
        for use_prepared in [false, true] {
            s.spawn(move || {
                assert!(
                    current_ctx().is_null(),
                    "a new thread starts with no context"
                );
                let count = launches();
                if use_prepared {
                    // SAFETY: the fixture runs nothing; add_one(int*) takes one pointer.
                    unsafe { prepared.launch(&mut args![buf]).unwrap() };
                } else {
                    // SAFETY: as above.
                    unsafe { kernel.launch(stream, cfg, &mut args![buf]).unwrap() };
                }
                assert_eq!(launches() - count, 1);
                assert!(!current_ctx().is_null(), "the primary context is bound");
            })
            .join()
            .unwrap();
        }
    });
}

/// Another context made current behind hipjit's back (as another library on the thread may
/// do): the driver refuses the launch (CUDA_ERROR_INVALID_HANDLE), hipjit makes the device's
/// primary context current and launches once more.
#[test]
fn a_launch_after_another_context_was_made_current_rebinds_and_launches_once() {
    let _g = serial();
    let dev = runtime().device(0).unwrap();
    let lib = Library::load_cubin(&dev, &cubin()).unwrap();
    let kernel = lib.kernel("add_one").unwrap();
    let stream = Stream::new(&dev, StreamFlags::NON_BLOCKING).unwrap();
    let buf = DeviceBuffer::<i32>::zeroed(&dev, 64).unwrap();
    let cfg = LaunchConfig::for_num_elems(64, 64);
    let primary = current_ctx();
    assert!(!primary.is_null());
    // SAFETY: the fixture's cuCtxSetCurrent(CUcontext).
    let set: extern "C" fn(*mut c_void) -> c_int =
        unsafe { std::mem::transmute(sym(c"cuCtxSetCurrent")) };
    let mut other = 0u64;
    assert_eq!(set(&mut other as *mut u64 as *mut c_void), 0);
    let count = launches();
    // SAFETY: the fixture runs nothing; add_one(int*) takes one pointer.
    unsafe { kernel.launch(&stream, cfg, &mut args![&buf]).unwrap() };
    assert_eq!(launches() - count, 1);
    assert_eq!(current_ctx(), primary);
    // A driver error that is not about the context is returned as it is, without a retry.
    fail_next(700);
    // SAFETY: as above.
    let err = unsafe { kernel.launch(&stream, cfg, &mut args![&buf]) }.unwrap_err();
    assert!(err.to_string().contains("hipModuleLaunchKernel"), "{err}");
    assert_eq!(launches() - count, 1);
}

#[test]
fn cooperative_launch_is_checked_against_occupancy_then_passed_through() {
    let _g = serial();
    let dev = runtime().device(0).unwrap();
    let lib = Library::load_cubin(&dev, &cubin()).unwrap();
    let kernel = lib.kernel("add_one").unwrap();
    let stream = Stream::new(&dev, StreamFlags::empty()).unwrap();
    let buf = DeviceBuffer::<i32>::zeroed(&dev, 64).unwrap();
    // The fixture reports 8 resident blocks per multiprocessor and 132 multiprocessors.
    // SAFETY: refused before the driver is called.
    let err = unsafe {
        kernel.launch_cooperative(
            &stream,
            LaunchConfig::for_num_elems(1057 * 64, 64),
            &mut args![&buf],
        )
    }
    .unwrap_err()
    .to_string();
    assert!(err.contains("1057") && err.contains("1056"), "{err}");
    // SAFETY: the fixture runs nothing; add_one(int*) takes one pointer.
    unsafe {
        kernel
            .launch_cooperative(
                &stream,
                LaunchConfig::for_num_elems(1056 * 64, 64),
                &mut args![&buf],
            )
            .unwrap()
    };
    // SAFETY: the fixture's record.
    let last = unsafe { &*(sym(c"fixture_last_launch") as *const LastLaunch) };
    assert_eq!(last.grid, [1056, 1, 1]);
}

#[test]
fn enumeration_goes_through_the_library_api() {
    let _g = serial();
    let rt = runtime();
    rt.set_code_object_loader(CodeObjectLoader::LibraryApi)
        .unwrap();
    let dev = rt.device(0).unwrap();
    let lib = Library::load_cubin(&dev, &cubin()).unwrap();
    let functions = lib.enumerated_functions().unwrap().expect("library API");
    // The fixture enumerates one kernel whose function is its first function slot.
    assert_eq!(functions.len(), 1);
    assert_eq!(lib.runtime_kernel_count().unwrap(), Some(1));
}

const JIT_SOURCE: &str = r#"
#include <hip/hip_runtime.h>
extern "C" __global__ void twice(float* x, unsigned n) {
    unsigned i = hipBlockIdx_x * hipBlockDim_x + hipThreadIdx_x;
    if (i < n) x[i] *= 2.0f;
}
"#;

/// The one JIT over the test's nvcc (asked for: Auto would take NVRTC beside it), its disk
/// cache over `roots` (none: no disk cache).
fn nv_jit(roots: &[&Path]) -> Jit {
    Jit::new(JitOptions {
        compiler: Some(hipjit::compiler::selection::CompilerChoice::Nvcc),
        compiler_config: CompilerConfig {
            nvcc: Some(nvcc().path().to_path_buf()),
            ..CompilerConfig::default()
        },
        cache: if roots.is_empty() {
            CacheLocation::Disabled
        } else {
            CacheLocation::Roots(roots.iter().map(|r| r.to_path_buf()).collect())
        },
        ..JitOptions::default()
    })
    .unwrap_or_else(|e| panic!("{e}"))
}

/// No target: the JIT takes the device's SM target.
fn no_target() -> CompileOptions {
    CompileOptions::default()
}

#[test]
fn nvidia_jit_compiles_then_hits_memory_then_disk() {
    let _g = serial();
    let dev = runtime().device(0).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let jit = nv_jit(&[dir.path()]);
    let first = jit.load(&dev, JIT_SOURCE, &no_target()).unwrap();
    assert_eq!(first.compiled.origin(), Origin::Compiler);
    assert_eq!(first.compiled.compiler().kind.as_str(), "nvcc");
    assert_eq!(first.compiled.targets(), ["sm_90"]);
    assert!(first.compiled.cubin().is_some() && first.compiled.code_object().is_none());
    assert!(DiskCache::entry_path(dir.path(), &first.compiled.key()).is_file());
    assert_eq!(first.library.kernel_names().collect::<Vec<_>>(), ["twice"]);
    let second = jit.load(&dev, JIT_SOURCE, &no_target()).unwrap();
    assert_eq!(second.compiled.origin(), Origin::Memory);
    assert!(std::sync::Arc::ptr_eq(&first.library, &second.library));
    let fresh = nv_jit(&[dir.path()]);
    let third = fresh.load(&dev, JIT_SOURCE, &no_target()).unwrap();
    assert_eq!(
        (third.compiled.origin(), third.compiled.key()),
        (Origin::Disk, first.compiled.key())
    );
}

/// The cubin of `key`'s entry in the one root `root`, read through the disk cache.
fn cached_cubin(root: &Path, key: &hipjit::cache::key::CacheKey) -> Option<Vec<u8>> {
    let cache = DiskCache::open(&[root.to_path_buf()]).unwrap();
    let entry = cache.get(key).entry?;
    entry.artefact(CUBIN_ARTEFACT).map(<[u8]>::to_vec)
}

#[test]
fn nvidia_jit_replaces_a_corrupt_cache_entry() {
    let _g = serial();
    let dev = runtime().device(0).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let key = nv_jit(&[dir.path()])
        .load(&dev, JIT_SOURCE, &no_target())
        .unwrap()
        .compiled
        .key();
    let entry = DiskCache::entry_path(dir.path(), &key);
    let mut bytes = std::fs::read(&entry).unwrap();
    let last = bytes.len() - 1;
    bytes[last] ^= 0xff;
    std::fs::write(&entry, &bytes).unwrap();
    assert_eq!(
        cached_cubin(dir.path(), &key),
        None,
        "the flipped byte is seen"
    );
    let again = nv_jit(&[dir.path()])
        .load(&dev, JIT_SOURCE, &no_target())
        .unwrap();
    assert_eq!(again.compiled.origin(), Origin::Compiler);
    let cubin = cached_cubin(dir.path(), &key).expect("a valid entry in its place");
    assert!(Cubin::from_bytes(&cubin).is_ok());
}

#[test]
fn nvidia_jit_replaces_an_intact_entry_whose_cubin_does_not_read() {
    let _g = serial();
    let dev = runtime().device(0).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let key = nv_jit(&[dir.path()])
        .load(&dev, JIT_SOURCE, &no_target())
        .unwrap()
        .compiled
        .key();
    // The result entry replaced by an intact one (its sums match) holding no cubin.
    let entry = DiskCache::entry_path(dir.path(), &key);
    std::fs::remove_file(&entry).unwrap();
    let cache = DiskCache::open(&[dir.path().to_path_buf()]).unwrap();
    let meta = EntryMeta {
        format_version: 0,
        key: String::new(),
        command: vec![],
        compiler: nvcc().identity(),
        options: Default::default(),
        tracked_headers: vec![],
        dependencies: vec![],
        created_unix_ms: 0,
        artefacts: vec![],
    };
    cache
        .put(&key, meta, &[(CUBIN_ARTEFACT, b"not a cubin")])
        .unwrap();
    let loaded = nv_jit(&[dir.path()])
        .load(&dev, JIT_SOURCE, &no_target())
        .unwrap();
    assert_eq!(
        (loaded.compiled.origin(), loaded.compiled.key()),
        (Origin::Compiler, key)
    );
    assert_eq!(
        loaded.compiled.bad_entries().len(),
        1,
        "the bad entry is reported"
    );
    let cubin = cached_cubin(dir.path(), &key).expect("a good entry in its place");
    assert!(Cubin::from_bytes(&cubin).is_ok());
}

#[test]
fn nvidia_jit_hits_through_a_read_only_second_root() {
    let _g = serial();
    let dev = runtime().device(0).unwrap();
    let shared = tempfile::tempdir().unwrap();
    let own = tempfile::tempdir().unwrap();
    let first = nv_jit(&[shared.path()])
        .load(&dev, JIT_SOURCE, &no_target())
        .unwrap();
    let jit = nv_jit(&[own.path(), shared.path()]);
    let hit = jit.load(&dev, JIT_SOURCE, &no_target()).unwrap();
    assert_eq!(
        (hit.compiled.origin(), hit.compiled.key()),
        (Origin::Disk, first.compiled.key())
    );
    let written = DiskCache::open(&[own.path().to_path_buf()]).unwrap();
    assert!(
        written.list().unwrap().is_empty(),
        "nothing written on a read-only hit"
    );
}

#[test]
fn disk_cache_lists_and_verifies_a_cubin_entry() {
    let _g = serial();
    let dev = runtime().device(0).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let n = nvcc();
    let loaded = nv_jit(&[dir.path()])
        .load(&dev, JIT_SOURCE, &no_target())
        .unwrap();
    let cache = DiskCache::open(&[dir.path().to_path_buf()]).unwrap();
    let key = loaded.compiled.key();
    // The result entry and the header manifest under the direct key.
    let listed = cache.list().unwrap();
    assert_eq!(listed.len(), 2, "{listed:?}");
    assert!(listed.iter().any(|e| e.key == Some(key)));
    let entry = cache.get(&key).entry.unwrap();
    let names: Vec<&str> = entry
        .meta
        .artefacts
        .iter()
        .map(|a| a.name.as_str())
        .collect();
    // The cubin, and the direct key's record that `hipjit cache explain` reads.
    assert_eq!(names, ["cubin", hipjit::cache::key::KEY_RECORD_ARTEFACT]);
    assert_eq!(
        entry.meta.compiler.path,
        std::fs::canonicalize(n.path()).unwrap()
    );
    assert!(entry.meta.command.iter().any(|a| a == "-arch=sm_90"));
    let verified = cache.verify().unwrap();
    assert_eq!(verified.len(), 2);
    assert!(verified.iter().all(|v| v.status == Ok(())), "{verified:?}");
}

#[test]
fn nvidia_jit_size_cap_prunes_the_written_root() {
    // The fixture driver counts live objects process-wide: one test at a time.
    let _g = serial();
    let dir = tempfile::tempdir().unwrap();
    let jit = Jit::new(JitOptions {
        compiler_config: CompilerConfig {
            nvcc: Some(nvcc().path().to_path_buf()),
            ..CompilerConfig::default()
        },
        cache: CacheLocation::Roots(vec![dir.path().to_path_buf()]),
        max_cache_bytes: Some(0),
        ..JitOptions::default()
    })
    .unwrap();
    let c = jit
        .compile(JIT_SOURCE, &CompileOptions::for_sm(SmTarget::new(90)))
        .unwrap();
    assert_eq!(c.origin(), Origin::Compiler);
    let listed = DiskCache::open(&[dir.path().to_path_buf()])
        .unwrap()
        .list()
        .unwrap();
    assert!(
        listed.is_empty(),
        "a cap of 0 bytes leaves no entry: {listed:?}"
    );
}

#[test]
fn nvidia_jit_refuses_a_cache_root_writable_by_others() {
    // The fixture driver counts live objects process-wide: one test at a time.
    let _g = serial();
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o777)).unwrap();
    let err = Jit::new(JitOptions {
        cache: CacheLocation::Roots(vec![dir.path().to_path_buf()]),
        ..JitOptions::default()
    })
    .unwrap_err();
    assert!(
        matches!(&err, JitError::Cache(hipjit::cache::CacheError::Unsafe { path, .. }) if path == dir.path()),
        "{err}"
    );
}

#[test]
fn nvidia_jit_compile_error_names_nvcc_and_the_source_line() {
    let _g = serial();
    let dev = runtime().device(0).unwrap();
    let jit = nv_jit(&[]);
    let err = jit
        .load(
            &dev,
            "extern \"C\" __global__ void k() { undeclared_name(); }",
            &no_target(),
        )
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("nvcc failed") && err.contains("undeclared_name"),
        "{err}"
    );
}

#[test]
fn nvidia_jit_with_auto_loads_an_nvrtc_cubin_on_the_device() {
    let _g = serial();
    let dev = runtime().device(0).unwrap();
    let jit = Jit::new(JitOptions {
        compiler: Some(hipjit::compiler::selection::CompilerChoice::Auto),
        compiler_config: CompilerConfig {
            nvcc: Some(nvcc().path().to_path_buf()),
            ..CompilerConfig::default()
        },
        cache: CacheLocation::Disabled,
        ..JitOptions::default()
    })
    .unwrap();
    let loaded = jit.load(&dev, JIT_SOURCE, &no_target()).unwrap();
    assert_eq!(
        loaded.compiled.compiler().kind,
        hipjit::compiler::CompilerKind::Nvrtc,
        "{:?}",
        loaded.compiled.compiler()
    );
    assert_eq!(loaded.library.kernel_names().collect::<Vec<_>>(), ["twice"]);
}

#[test]
fn nvidia_jit_refuses_what_only_amd_compilers_do_naming_the_option() {
    // The fixture driver counts live objects process-wide: one test at a time.
    let _g = serial();
    let jit = nv_jit(&[]);
    let mut o = CompileOptions::for_sm(SmTarget::new(90));
    o.code_object_version = Some(5);
    let err = jit.compile(JIT_SOURCE, &o).unwrap_err().to_string();
    assert!(
        err.contains("code_object_version") && err.contains("sm_90"),
        "{err}"
    );
    let two = CompileOptions {
        sm_targets: vec![SmTarget::new(80), SmTarget::new(90)],
        ..CompileOptions::default()
    };
    let err = jit.compile(JIT_SOURCE, &two).unwrap_err().to_string();
    assert!(err.contains("sm_80, sm_90"), "{err}");
}

#[test]
fn nvidia_jit_header_edit_is_a_miss_through_nvccs_dependency_list() {
    // The fixture driver counts live objects process-wide: one test at a time.
    let _g = serial();
    let dir = tempfile::tempdir().unwrap();
    let inc = dir.path().join("inc");
    std::fs::create_dir(&inc).unwrap();
    std::fs::write(inc.join("scale.h"), "#define SCALE 2.0f\n").unwrap();
    let source =
        "#include \"scale.h\"\nextern \"C\" __global__ void k(float* x) { x[0] *= SCALE; }\n";
    let o = CompileOptions::for_sm(SmTarget::new(90)).include_dir(&inc);
    let cache = dir.path().join("cache");
    let first = nv_jit(&[&cache]).compile(source, &o).unwrap();
    assert_eq!(first.origin(), Origin::Compiler);
    let hit = nv_jit(&[&cache]).compile(source, &o).unwrap();
    assert_eq!((hit.origin(), hit.key()), (Origin::Disk, first.key()));
    // Another size, so the stat check sees the edit whatever the clock's granularity.
    std::fs::write(inc.join("scale.h"), "#define SCALE 3.0f /* edited */\n").unwrap();
    let edited = nv_jit(&[&cache]).compile(source, &o).unwrap();
    assert_eq!(
        edited.origin(),
        Origin::Compiler,
        "a stale cubin was served"
    );
    assert_ne!(edited.key(), first.key());
}

#[test]
fn nvcc_identity_is_remembered_in_the_cache_dir() {
    // The fixture driver counts live objects process-wide: one test at a time.
    let _g = serial();
    use hipjit::compiler::nvcc::Nvcc;
    let n = nvcc();
    let dir = tempfile::tempdir().unwrap();
    let a = Nvcc::discover_cached(Some(n.path()), dir.path()).unwrap();
    let remembered: Vec<_> = std::fs::read_dir(dir.path()).unwrap().flatten().collect();
    assert_eq!(remembered.len(), 1);
    assert_eq!(a.version_text(), n.version_text());
    let b = Nvcc::discover_cached(Some(n.path()), dir.path()).unwrap();
    assert_eq!(a.identity(), b.identity());
    assert_eq!(a.identity().fingerprint.len(), 64);
}

#[test]
fn nvidia_jit_compiles_once_for_concurrent_callers() {
    let _g = serial();
    let dev = runtime().device(0).unwrap();
    let jit = nv_jit(&[]);
    let source = format!("{JIT_SOURCE}\n// concurrent\n");
    let results: Vec<_> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..4)
            .map(|_| s.spawn(|| jit.load(&dev, &source, &no_target()).unwrap()))
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let compiled = results
        .iter()
        .filter(|r| r.compiled.origin() == Origin::Compiler)
        .count();
    assert_eq!(compiled, 1);
    assert!(results
        .iter()
        .all(|r| std::sync::Arc::ptr_eq(&r.library, &results[0].library)));
}

#[test]
fn load_file_takes_a_cubin_on_the_nvidia_platform() {
    let _g = serial();
    let dev = runtime().device(0).unwrap();
    let lib = Library::load_file(&dev, common::code_object("cuda/add_one-sm_90.cubin")).unwrap();
    assert_eq!(lib.kernel_names().collect::<Vec<_>>(), ["add_one"]);
    assert_eq!(lib.loader(), CodeObjectLoader::ModuleApi);
}

#[test]
fn kernel_outlives_its_library_handle_and_launches_from_other_threads() {
    let _g = serial();
    let dev = runtime().device(0).unwrap();
    let before = live();
    let kernel = Library::load_cubin(&dev, &cubin())
        .unwrap()
        .kernel("add_one")
        .unwrap();
    // The Library value is gone; the kernel keeps the driver's library loaded.
    assert_eq!(
        live().libraries + live().modules,
        before.libraries + before.modules + 1
    );
    std::thread::scope(|s| {
        for _ in 0..3 {
            let kernel = kernel.clone();
            let dev = dev.clone();
            s.spawn(move || {
                let stream = Stream::new(&dev, StreamFlags::NON_BLOCKING).unwrap();
                let buf = DeviceBuffer::<i32>::zeroed(&dev, 64).unwrap();
                // SAFETY: the fixture runs nothing; add_one(int*) takes one pointer.
                unsafe {
                    kernel.launch(
                        &stream,
                        LaunchConfig::for_num_elems(64, 64),
                        &mut args![&buf],
                    )
                }
                .unwrap();
                stream.synchronize().unwrap();
            });
        }
    });
    drop(kernel);
    assert_eq!(live(), before, "the last clone unloads the library");
}

/// The fixture driver's record of stream-ordered operations (`fixture_log`), one per line.
fn op_log() -> Vec<String> {
    // SAFETY: fixture_log(void) returns a NUL-terminated static buffer.
    let f: extern "C" fn() -> *const std::ffi::c_char =
        unsafe { std::mem::transmute(sym(c"fixture_log")) };
    // SAFETY: as above.
    let text = unsafe { std::ffi::CStr::from_ptr(f()) }.to_string_lossy();
    text.lines().map(str::to_owned).collect()
}

/// Asserts that lines starting with each of `prefixes` follow one another in `log` (others may
/// come between).
fn assert_in_order(log: &[String], prefixes: &[String]) {
    let mut from = 0;
    for p in prefixes {
        from += log[from..]
            .iter()
            .position(|l| l.starts_with(p.as_str()))
            .unwrap_or_else(|| panic!("no line {p:?} after line {from} in {log:#?}"))
            + 1;
    }
}

#[test]
fn stream_ordered_memory_and_waits_between_streams_map_onto_the_driver() {
    use hipjit::event::{Event, EventFlags};
    use hipjit::memory::{DeviceMemory, DeviceMemoryMut};
    let _g = serial();
    let rt = runtime();
    assert!(rt.has_stream_ordered_alloc());
    let dev = rt.device(0).unwrap();
    let live_before = live();
    let start = op_log().len();
    let a = Stream::new(&dev, StreamFlags::NON_BLOCKING).unwrap();
    let b = Stream::new(&dev, StreamFlags::NON_BLOCKING).unwrap();
    let (sa, sb) = (format!("{:?}", a.as_raw()), format!("{:?}", b.as_raw()));
    let mut x = DeviceBuffer::<u32>::alloc_async(&a, 4).unwrap();
    x.copy_from_host_on(&[1, 2, 3, 4], &a).unwrap();
    let done = Event::new(&dev, EventFlags::DISABLE_TIMING).unwrap();
    done.record(&a).unwrap();
    b.wait_event(&done).unwrap();
    let mut y = DeviceBuffer::<u32>::alloc_async(&b, 4).unwrap();
    y.copy_from_device_async(&x, &b).unwrap();
    y.slice_mut(..1).unwrap().memset_async(0, &b).unwrap();
    assert_eq!(y.to_vec_on(&b).unwrap(), [0, 2, 3, 4]);
    drop((x, y));
    let e = format!("{:?}", done.as_raw());
    let log = op_log()[start..].to_vec();
    assert_in_order(
        &log,
        &[
            format!("cuMemAllocAsync 16 {sa}"),
            format!("cuMemcpyHtoDAsync_v2 16 {sa}"),
            format!("cuEventRecord {e} {sa}"),
            format!("cuStreamWaitEvent {sb} {e}"),
            format!("cuMemAllocAsync 16 {sb}"),
            format!("cuMemcpyDtoDAsync_v2 16 {sb}"),
            format!("cuMemsetD8Async 4 {sb}"),
            format!("cuMemcpyDtoHAsync_v2 16 {sb}"),
            format!("cuMemFreeAsync {sa}"),
            format!("cuMemFreeAsync {sb}"),
        ],
    );
    drop((a, b, done));
    assert_eq!(live(), live_before);
}

#[test]
fn zero_length_stream_ordered_buffer_allocates_and_frees_nothing() {
    let _g = serial();
    let rt = runtime();
    let dev = rt.device(0).unwrap();
    let stream = Stream::new(&dev, StreamFlags::NON_BLOCKING).unwrap();
    let before = live().allocations;
    let start = op_log().len();
    let empty = DeviceBuffer::<u32>::alloc_async(&stream, 0).unwrap();
    assert!(empty.as_raw().is_null());
    drop(empty);
    // cuMemAllocAsync refuses 0 bytes; HIP's answer, a null pointer, needs no free either.
    assert_eq!(op_log()[start..], [] as [String; 0]);
    assert_eq!(live().allocations, before);
}

#[repr(C)]
struct NodeParams {
    func: *mut c_void,
    grid: [c_uint; 3],
    block: [c_uint; 3],
    shared: c_uint,
    params: *mut *mut c_void,
    extra: *mut *mut c_void,
    kern: *mut c_void,
    ctx: *mut c_void,
}

#[test]
fn capture_and_graphs_go_through_the_versioned_driver_entry_points() {
    use hipjit::graph::{CaptureMode, Written};
    let _g = serial();
    let dev = runtime().device(0).unwrap();
    let kernel = Library::load_cubin(&dev, &cubin())
        .unwrap()
        .kernel("add_one")
        .unwrap();
    let stream = Stream::new(&dev, StreamFlags::NON_BLOCKING).unwrap();
    let a = DeviceBuffer::<i32>::zeroed(&dev, 64).unwrap();
    let b = DeviceBuffer::<i32>::zeroed(&dev, 64).unwrap();
    let graphs_live = || {
        // SAFETY: the fixture's `int fixture_graphs_live`.
        unsafe { *(sym(c"fixture_graphs_live") as *const c_int) }
    };
    let before = graphs_live();
    let cfg = LaunchConfig::for_num_elems(64, 64);
    let mut cap = stream.begin_capture(CaptureMode::Global).unwrap();
    for _ in 0..3 {
        // SAFETY: the fixture runs nothing; add_one(int*) takes one pointer.
        unsafe { cap.launch(&kernel, cfg, args![Written(&a)]) }.unwrap();
    }
    let graph = cap.end_capture().unwrap();
    let mut exec = graph.instantiate().unwrap();
    assert_eq!(exec.kernel_nodes().len(), 3);
    let node = exec.kernel_nodes()[1];
    let wide = LaunchConfig {
        grid: (7, 1, 1).into(),
        block: (32, 2, 1).into(),
        dynamic_lds_bytes: 128,
    };
    // SAFETY: as above.
    unsafe { exec.set_kernel_params(node, &kernel, wide, args![Written(&b)]) }.unwrap();
    // SAFETY: the fixture's record, laid out as `NodeParams`, read after the call returned.
    let p = unsafe { &*(sym(c"fixture_last_node_params") as *const NodeParams) };
    assert_eq!(
        (p.func, p.grid, p.block, p.shared),
        (kernel.as_raw() as *mut c_void, [7, 1, 1], [32, 2, 1], 128)
    );
    assert!(p.extra.is_null() && p.kern.is_null() && p.ctx.is_null());
    exec.launch(&stream).unwrap();
    drop((exec, graph));
    assert_eq!(
        graphs_live(),
        before,
        "every graph and executable graph destroyed"
    );
    let log = op_log();
    assert_in_order(
        &log,
        &[
            "cuStreamBeginCapture_v2".into(),
            "cuLaunchKernel".into(),
            "cuStreamEndCapture".into(),
            "cuGraphInstantiateWithFlags".into(),
            "cuGraphExecKernelNodeSetParams_v2".into(),
            "cuGraphLaunch".into(),
            "cuGraphExecDestroy".into(),
            "cuGraphDestroy".into(),
        ],
    );
    assert!(
        log.iter().any(|l| l.ends_with("nodes=3")),
        "three launches recorded: {log:#?}"
    );
    assert!(
        !log.iter().any(|l| l.starts_with("LEGACY")),
        "a legacy entry point was called: {log:#?}"
    );
}

/// Node updates with the kernel last set with every check go to the driver at once, and still
/// check what each update brings: the node, the configuration and the arguments (named, the
/// driver not called; a cubin's metadata says nothing of which arguments are written). A
/// refusal of the thread's context is bound and updated once more; any other driver error is
/// returned after one call. Another kernel is checked in full again.
#[test]
fn repeated_node_updates_check_what_each_brings_and_rebind_when_refused() {
    use hipjit::error::LaunchError;
    use hipjit::graph::{CaptureMode, GraphError, Written};
    let _g = serial();
    let dev = runtime().device(0).unwrap();
    let kernel = Library::load_cubin(&dev, &cubin())
        .unwrap()
        .kernel("add_one")
        .unwrap();
    let stream = Stream::new(&dev, StreamFlags::NON_BLOCKING).unwrap();
    let a = DeviceBuffer::<i32>::zeroed(&dev, 64).unwrap();
    let b = DeviceBuffer::<i32>::zeroed(&dev, 64).unwrap();
    let cfg = LaunchConfig::for_num_elems(64, 64);
    let capture = || {
        let mut cap = stream.begin_capture(CaptureMode::Global).unwrap();
        for _ in 0..2 {
            // SAFETY: the fixture runs nothing; add_one(int*) takes one pointer.
            unsafe { cap.launch(&kernel, cfg, args![Written(&a)]) }.unwrap();
        }
        cap.end_capture().unwrap()
    };
    let (graph, other_graph) = (capture(), capture());
    let mut exec = graph.instantiate().unwrap();
    let other_exec = other_graph.instantiate().unwrap();
    let node = exec.kernel_nodes()[1];
    let updates = || {
        op_log()
            .iter()
            .filter(|l| l.starts_with("cuGraphExecKernelNodeSetParams_v2"))
            .count()
    };
    // SAFETY (every update below): as above.
    let mut update = |k: &hipjit::kernel::Kernel, cfg: LaunchConfig, args| unsafe {
        exec.set_kernel_params(node, k, cfg, args)
    };
    let n = updates();
    update(&kernel, cfg, args![Written(&b)]).unwrap();
    update(&kernel, cfg, args![Written(&a)]).unwrap();
    assert_eq!(updates() - n, 2);
    // SAFETY: the fixture's record, laid out as `NodeParams`, read after the call returned.
    let p = unsafe { &*(sym(c"fixture_last_node_params") as *const NodeParams) };
    assert_eq!(
        (p.func, p.grid, p.block, p.shared),
        (kernel.as_raw() as *mut c_void, [1, 1, 1], [64, 1, 1], 0)
    );
    // What each update brings is checked, before the driver.
    let n = updates();
    let err = update(&kernel, cfg, args![]).unwrap_err();
    assert!(
        matches!(&err, GraphError::Launch(e) if matches!(**e, LaunchError::ArgCount { .. })),
        "{err:?}"
    );
    let too_big = LaunchConfig {
        block: 4096.into(),
        ..cfg
    };
    let err = update(&kernel, too_big, args![Written(&b)]).unwrap_err();
    assert!(
        matches!(&err, GraphError::Launch(e) if matches!(**e, LaunchError::BlockDim { .. })),
        "{err:?}"
    );
    let foreign = other_exec.kernel_nodes()[0];
    // SAFETY: refused before the driver.
    let err = unsafe { exec.set_kernel_params(foreign, &kernel, cfg, args![Written(&b)]) };
    assert!(
        matches!(err, Err(GraphError::ForeignNode { .. })),
        "{err:?}"
    );
    assert_eq!(updates() - n, 0, "the driver saw a refused update");
    // A refused context (the fixture logs only calls that succeed): bound, and updated once
    // more.
    fail_next(201);
    // SAFETY: as above.
    unsafe { exec.set_kernel_params(node, &kernel, cfg, args![Written(&b)]) }.unwrap();
    assert_eq!(updates() - n, 1);
    // Another driver error: returned, named (a second call would have succeeded).
    fail_next(700);
    // SAFETY: as above.
    let err = unsafe { exec.set_kernel_params(node, &kernel, cfg, args![Written(&b)]) }
        .unwrap_err()
        .to_string();
    assert!(err.contains("hipGraphExecKernelNodeSetParams"), "{err}");
    assert_eq!(updates() - n, 1);
    // Another kernel (another load of the same code): checked in full, then remembered.
    let again = Library::load_cubin(&dev, &cubin())
        .unwrap()
        .kernel("add_one")
        .unwrap();
    for k in [&again, &again, &kernel] {
        // SAFETY: as above.
        unsafe { exec.set_kernel_params(node, k, cfg, args![Written(&b)]) }.unwrap();
    }
    assert_eq!(updates() - n, 4);
    // SAFETY: as above.
    let p = unsafe { &*(sym(c"fixture_last_node_params") as *const NodeParams) };
    assert_eq!(p.func, kernel.as_raw() as *mut c_void);
}

#[test]
fn load_during_a_global_capture_is_refused_before_the_driver_sees_it() {
    use hipjit::graph::CaptureMode;
    let _g = serial();
    let dev = runtime().device(0).unwrap();
    let stream = Stream::new(&dev, StreamFlags::NON_BLOCKING).unwrap();
    let modules = live().modules + live().libraries;
    let cap = stream.begin_capture(CaptureMode::Global).unwrap();
    let err = Library::load_cubin(&dev, &cubin()).unwrap_err();
    assert!(
        err.to_string()
            .contains("hipErrorStreamCaptureUnsupported (900): refused by hipjit before the call"),
        "{err}"
    );
    assert_eq!(live().modules + live().libraries, modules);
    let err = stream.synchronize().unwrap_err();
    assert_eq!(err.code(), 900, "{err}");
    cap.end_capture().unwrap();
    stream.synchronize().unwrap();
}

#[test]
fn nvidia_jit_kernel_hit_is_the_cached_handle_and_flags_are_part_of_the_key() {
    let _g = serial();
    let dev = runtime().device(0).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let jit = nv_jit(&[dir.path()]);
    let first = jit.kernel(&dev, JIT_SOURCE, "twice", &no_target()).unwrap();
    let modules = live();
    let again = jit
        .kernel(&dev, String::from(JIT_SOURCE), "twice", &no_target())
        .unwrap();
    assert!(first.same_as(&again));
    assert_eq!(live(), modules, "a hit loads nothing");
    let flagged = jit
        .kernel(&dev, JIT_SOURCE, "twice", &no_target().flag("-DUNUSED=1"))
        .unwrap();
    assert!(!flagged.same_as(&first), "other flags: another kernel");
    let err = jit
        .kernel(&dev, JIT_SOURCE, "thrice", &no_target())
        .unwrap_err();
    assert!(err.to_string().contains("thrice"), "{err}");
}
