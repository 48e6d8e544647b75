//! Several devices in one process, on the fixture HIP runtime (tests/fixtures/fake_hip.c) with
//! four pretend devices chosen by `HIPJIT_FIXTURE_DEVICES`: 0 and 2 are
//! `gfx90a:sramecc+:xnack-` (wave64, 104 compute units), 1 is `gfx1030` (wave32, 40 compute
//! units), 3 is `gfx906` without peer access. The fixture refuses work queued on a stream of a
//! device that is not current, an event recorded on another device's stream, a kernel launched
//! on a device it was not loaded on and a peer copy whose devices do not match its pointers; it
//! records every call. Code objects are compiled by the real compiler.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Barrier, Once};

use hipjit::args;
use hipjit::compiler::CompileOptions;
use hipjit::device::Device;
use hipjit::event::{Event, EventFlags};
use hipjit::jit::{CacheLocation, Jit, JitOptions, Origin};
use hipjit::launch::LaunchConfig;
use hipjit::memory::{DeviceBuffer, DeviceMemory, DeviceMemoryMut};
use hipjit::runtime::Runtime;
use hipjit::stream::{Stream, StreamFlags};

use crate::common::fixture_lib::{self, log};

const DEVICES: &str = "gfx90a:sramecc+:xnack-,gfx1030,gfx90a:sramecc+:xnack-,gfx906/nopeer";

const SOURCE: &str = "#include <hip/hip_runtime.h>\n\
    extern \"C\" __global__ void scale(float* x, float a, unsigned n) {\n\
    unsigned i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) x[i] *= a; }\n";

/// Builds a private copy of the fixture runtime (its own file, so its state and call record
/// are this test's alone) and loads it with the four devices.
fn fixture(name: &str) -> (Runtime, PathBuf) {
    static ENV: Once = Once::new();
    // Set once, before any fixture of this process reads it (each reads it at its first call).
    ENV.call_once(|| std::env::set_var("HIPJIT_FIXTURE_DEVICES", DEVICES));
    let lib = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join("multi-device")
        .join(name)
        .join("libamdhip64.so");
    fixture_lib::hip_runtime(&lib, &[]);
    let rt = Runtime::load_from(&lib).unwrap_or_else(|e| panic!("{e}"));
    (rt, lib)
}

fn devices(rt: &Runtime) -> Vec<Device> {
    (0..4)
        .map(|i| rt.device(i).unwrap_or_else(|e| panic!("device {i}: {e}")))
        .collect()
}

fn count(log: &[String], prefix: &str) -> usize {
    log.iter().filter(|l| l.starts_with(prefix)).count()
}

fn position(log: &[String], line: &str) -> usize {
    log.iter()
        .position(|l| l == line)
        .unwrap_or_else(|| panic!("no line {line:?} in {log:#?}"))
}

/// The device bound (by the last `hipSetDevice`) when line `at` was recorded.
fn bound_at(log: &[String], at: usize) -> &str {
    log[..at]
        .iter()
        .rev()
        .find_map(|l| l.strip_prefix("hipSetDevice "))
        .unwrap_or_else(|| panic!("no device bound before line {at}: {log:#?}"))
}

fn p<T>(ptr: *mut T) -> String {
    if ptr.is_null() {
        "(nil)".into()
    } else {
        format!("{ptr:p}")
    }
}

fn no_wrong_device(log: &[String]) {
    assert!(
        !log.iter()
            .any(|l| l.contains("wrong device") || l == "unbound call"),
        "{log:#?}"
    );
}

#[test]
fn each_device_has_its_own_target_id_and_limits() {
    let (rt, _) = fixture("properties");
    assert_eq!(rt.device_count().unwrap(), 4);
    let d = devices(&rt);
    let p0 = d[0].properties();
    let p1 = d[1].properties();
    assert_eq!(
        (p0.arch_name.as_str(), p0.wavefront_size, p0.compute_units),
        ("gfx90a:sramecc+:xnack-", 64, 104)
    );
    assert_eq!(
        (p1.arch_name.as_str(), p1.wavefront_size, p1.compute_units),
        ("gfx1030", 32, 40)
    );
    assert_eq!(d[3].arch_name(), "gfx906");
    let err = rt.device(4).unwrap_err();
    assert_eq!(err.code(), 101, "{err}");
}

#[test]
fn peer_access_is_reported_per_pair_and_enabled_once_per_direction() {
    let (rt, lib) = fixture("peer-access");
    let d = devices(&rt);
    assert!(d[0].can_access_peer(&d[1]).unwrap());
    assert!(d[1].can_access_peer(&d[0]).unwrap());
    assert!(
        !d[0].can_access_peer(&d[0]).unwrap(),
        "a device is not its own peer"
    );
    assert!(!d[0].can_access_peer(&d[3]).unwrap());
    assert!(!d[0].peer_access_enabled(&d[1]));
    d[0].enable_peer_access(&d[1]).unwrap();
    // Again: the runtime answers hipErrorPeerAccessAlreadyEnabled, which is success.
    d[0].enable_peer_access(&d[1]).unwrap();
    assert!(d[0].peer_access_enabled(&d[1]));
    assert!(
        rt.device(0).unwrap().peer_access_enabled(&d[1]),
        "peer access belongs to the devices, not to one Device value"
    );
    assert!(!d[1].peer_access_enabled(&d[0]), "one direction only");
    let log = log(&lib);
    assert_eq!(count(&log, "hipDeviceEnablePeerAccess 0->1"), 2, "{log:#?}");
    let enable = position(&log, "hipDeviceEnablePeerAccess 0->1");
    assert_eq!(bound_at(&log, enable), "0", "{log:#?}");
}

#[test]
fn enabling_peer_access_to_itself_or_an_incapable_device_fails_with_a_named_error() {
    let (rt, lib) = fixture("peer-access-errors");
    let d = devices(&rt);
    let err = d[1].enable_peer_access(&d[1]).unwrap_err();
    assert_eq!(
        (err.name(), err.call()),
        ("hipErrorInvalidDevice", "hipDeviceEnablePeerAccess")
    );
    assert!(err.to_string().contains("same device (1)"), "{err}");
    assert_eq!(count(&log(&lib), "hipDeviceEnablePeerAccess"), 0);
    let err = d[0].enable_peer_access(&d[3]).unwrap_err();
    assert_eq!(err.name(), "hipErrorPeerAccessUnsupported", "{err}");
    assert!(!d[0].peer_access_enabled(&d[3]));
}

#[test]
fn peer_copy_moves_the_data_between_devices_on_the_destination_stream() {
    let (rt, lib) = fixture("peer-copy");
    let d = devices(&rt);
    let s1 = Stream::new(&d[1], StreamFlags::NON_BLOCKING).unwrap();
    let src: Vec<f32> = (0..1000).map(|i| i as f32 * 0.5).collect();
    let a = DeviceBuffer::from_slice(&d[0], &src).unwrap();
    let mut b = DeviceBuffer::<f32>::zeroed(&d[1], 1000).unwrap();
    b.copy_from_peer_async(&a, &s1).unwrap();
    assert_eq!(b.to_vec_on(&s1).unwrap(), src);
    let log = log(&lib);
    no_wrong_device(&log);
    let copy = position(
        &log,
        &format!("hipMemcpyPeerAsync 4000 1<-0 {} peer=0", p(s1.as_raw())),
    );
    assert_eq!(bound_at(&log, copy), "1", "{log:#?}");
}

#[test]
fn peer_copy_on_the_source_stream_after_enabling_peer_access() {
    let (rt, lib) = fixture("peer-copy-source-stream");
    let d = devices(&rt);
    d[0].enable_peer_access(&d[2]).unwrap();
    let s0 = Stream::new(&d[0], StreamFlags::NON_BLOCKING).unwrap();
    let a = DeviceBuffer::from_slice(&d[0], &[7u32; 64]).unwrap();
    let mut b = DeviceBuffer::<u32>::zeroed(&d[2], 64).unwrap();
    b.copy_from_peer_async(&a, &s0).unwrap();
    s0.synchronize().unwrap();
    assert_eq!(b.to_vec().unwrap(), vec![7u32; 64]);
    let log = log(&lib);
    no_wrong_device(&log);
    position(
        &log,
        &format!("hipMemcpyPeerAsync 256 2<-0 {} peer=1", p(s0.as_raw())),
    );
}

#[test]
fn peer_copy_orders_stream_ordered_buffers_across_both_devices() {
    let (rt, lib) = fixture("peer-copy-ordered");
    let d = devices(&rt);
    let s0 = Stream::new(&d[0], StreamFlags::NON_BLOCKING).unwrap();
    let s1 = Stream::new(&d[1], StreamFlags::NON_BLOCKING).unwrap();
    let mut a = DeviceBuffer::<u8>::alloc_async(&s0, 32).unwrap();
    a.memset_async(9, &s0).unwrap();
    let mut b = DeviceBuffer::<u8>::alloc_async(&s1, 32).unwrap();
    b.copy_from_peer_async(&a, &s1).unwrap();
    assert_eq!(b.to_vec_on(&s1).unwrap(), vec![9u8; 32]);
    drop(a);
    let log = log(&lib);
    no_wrong_device(&log);
    let (r0, r1) = (p(s0.as_raw()), p(s1.as_raw()));
    // Before the copy: an event of device 0 recorded on s0 (the allocation and fill), waited
    // for by s1.
    let copy = position(&log, &format!("hipMemcpyPeerAsync 32 1<-0 {r1} peer=0"));
    let before = &log[..copy];
    let record = before
        .iter()
        .rposition(|l| l.starts_with("hipEventRecord ") && l.ends_with(&format!(" {r0}")))
        .unwrap_or_else(|| panic!("{log:#?}"));
    let event = log[record].split(' ').nth(1).unwrap().to_owned();
    let wait = position(&log, &format!("hipStreamWaitEvent {r1} {event}"));
    assert!(record < wait && wait < copy, "{log:#?}");
    // After it: an event recorded on s1, waited for by s0, before a's free on s0.
    let after = &log[copy..];
    let record = after
        .iter()
        .position(|l| l.starts_with("hipEventRecord ") && l.ends_with(&format!(" {r1}")))
        .unwrap_or_else(|| panic!("{log:#?}"));
    let event = after[record].split(' ').nth(1).unwrap();
    let wait = after
        .iter()
        .position(|l| *l == format!("hipStreamWaitEvent {r0} {event}"))
        .unwrap_or_else(|| panic!("{log:#?}"));
    let free = after
        .iter()
        .position(|l| l.starts_with("hipFreeAsync ") && l.ends_with(&format!(" {r0}")))
        .unwrap_or_else(|| panic!("{log:#?}"));
    assert!(record < wait && wait < free, "{log:#?}");
}

#[test]
fn hipfree_of_a_buffer_waits_for_another_devices_copy_first() {
    let (rt, lib) = fixture("peer-copy-hipfree");
    let d = devices(&rt);
    let s1 = Stream::new(&d[1], StreamFlags::NON_BLOCKING).unwrap();
    let a = DeviceBuffer::from_slice(&d[0], &[1u16; 8]).unwrap();
    let mut b = DeviceBuffer::<u16>::zeroed(&d[1], 8).unwrap();
    b.copy_from_peer_async(&a, &s1).unwrap();
    let a_ptr = p(a.as_raw());
    drop(a);
    let log = log(&lib);
    no_wrong_device(&log);
    let copy = position(
        &log,
        &format!("hipMemcpyPeerAsync 16 1<-0 {} peer=0", p(s1.as_raw())),
    );
    let record = copy
        + log[copy..]
            .iter()
            .position(|l| l.starts_with("hipEventRecord "))
            .unwrap_or_else(|| panic!("{log:#?}"));
    let event = log[record].split(' ').nth(1).unwrap();
    let destroy = position(&log, &format!("hipEventDestroy {event}"));
    let free = position(&log, &format!("hipFree {a_ptr}"));
    assert!(record < destroy && destroy < free, "{log:#?}");
}

#[test]
fn peer_copy_refuses_bad_inputs_before_the_call() {
    let (rt, lib) = fixture("peer-copy-errors");
    let d = devices(&rt);
    let s0 = Stream::new(&d[0], StreamFlags::NON_BLOCKING).unwrap();
    let s1 = Stream::new(&d[1], StreamFlags::NON_BLOCKING).unwrap();
    let s2 = Stream::new(&d[2], StreamFlags::NON_BLOCKING).unwrap();
    let a = DeviceBuffer::<f32>::zeroed(&d[0], 16).unwrap();
    let mut same = DeviceBuffer::<f32>::zeroed(&d[0], 16).unwrap();
    let mut short = DeviceBuffer::<f32>::zeroed(&d[1], 15).unwrap();
    let mut b = DeviceBuffer::<f32>::zeroed(&d[1], 16).unwrap();

    let err = same.copy_from_peer_async(&a, &s0).unwrap_err();
    assert_eq!(err.name(), "hipErrorInvalidDevice", "{err}");
    assert!(err.to_string().contains("same device (0)"), "{err}");
    assert!(err.to_string().contains("copy_from_device_async"), "{err}");

    let err = short.copy_from_peer_async(&a, &s1).unwrap_err();
    assert_eq!(err.name(), "hipErrorInvalidValue", "{err}");
    assert!(err.to_string().contains("16"), "{err}");

    let err = b.copy_from_peer_async(&a, &s2).unwrap_err();
    assert_eq!(err.name(), "hipErrorInvalidValue", "{err}");
    assert!(err.to_string().contains("stream is on device 2"), "{err}");
    assert_eq!(count(&log(&lib), "hipMemcpyPeerAsync"), 0);
}

#[test]
fn device_to_device_copy_from_another_device_needs_peer_access() {
    let (rt, lib) = fixture("d2d-needs-peer");
    let d = devices(&rt);
    let s1 = Stream::new(&d[1], StreamFlags::NON_BLOCKING).unwrap();
    let a = DeviceBuffer::from_slice(&d[0], &[3i32; 4]).unwrap();
    let mut b = DeviceBuffer::<i32>::zeroed(&d[1], 4).unwrap();
    let err = b.copy_from_device_async(&a, &s1).unwrap_err();
    assert_eq!(err.name(), "hipErrorPeerAccessNotEnabled", "{err}");
    assert!(
        err.to_string()
            .contains("peer access from device 1 to device 0 is not enabled"),
        "{err}"
    );
    assert_eq!(count(&log(&lib), "hipMemcpyAsync"), 0);
    d[1].enable_peer_access(&d[0]).unwrap();
    b.copy_from_device_async(&a, &s1).unwrap();
    assert_eq!(b.to_vec_on(&s1).unwrap(), vec![3i32; 4]);
    no_wrong_device(&log(&lib));
}

#[test]
fn an_event_of_one_device_orders_a_stream_of_another() {
    let (rt, lib) = fixture("cross-device-event");
    let d = devices(&rt);
    let s0 = Stream::new(&d[0], StreamFlags::NON_BLOCKING).unwrap();
    let s1 = Stream::new(&d[1], StreamFlags::NON_BLOCKING).unwrap();
    let event = Event::new(&d[0], EventFlags::DISABLE_TIMING).unwrap();
    event.record(&s0).unwrap();
    s1.wait_event(&event).unwrap();
    let log = log(&lib);
    no_wrong_device(&log);
    let (e, r0, r1) = (p(event.as_raw()), p(s0.as_raw()), p(s1.as_raw()));
    let record = position(&log, &format!("hipEventRecord {e} {r0}"));
    let wait = position(&log, &format!("hipStreamWaitEvent {r1} {e}"));
    assert!(record < wait);
    assert_eq!(bound_at(&log, record), "0", "{log:#?}");
    assert_eq!(bound_at(&log, wait), "1", "{log:#?}");
}

#[test]
fn an_event_is_not_recorded_on_another_devices_stream() {
    let (rt, lib) = fixture("event-wrong-stream");
    let d = devices(&rt);
    let s1 = Stream::new(&d[1], StreamFlags::NON_BLOCKING).unwrap();
    let event = Event::new(&d[0], EventFlags::empty()).unwrap();
    let err = event.record(&s1).unwrap_err();
    assert_eq!(
        (err.name(), err.call()),
        ("hipErrorInvalidHandle", "hipEventRecord")
    );
    assert!(
        err.to_string()
            .contains("the event belongs to device 0 and the stream to device 1"),
        "{err}"
    );
    assert_eq!(count(&log(&lib), "hipEventRecord"), 0);
}

#[test]
fn jit_compiles_once_per_target_and_loads_once_per_device_from_many_threads() {
    let (rt, lib) = fixture("jit-threads");
    let d = devices(&rt);
    let jit = Jit::new(JitOptions {
        // hipcc, whatever HIPJIT_COMPILER says: these tests are about it.
        compiler: Some(hipjit::compiler::selection::CompilerChoice::Hipcc),
        cache: CacheLocation::Disabled,
        ..JitOptions::default()
    })
    .unwrap_or_else(|e| panic!("{e}"));
    // Two threads per device, on devices 0 and 2 (one target) and 1 (another), all at once.
    let on: Vec<usize> = vec![0, 0, 1, 1, 2, 2];
    let barrier = Barrier::new(on.len());
    let loaded: Vec<_> = std::thread::scope(|s| {
        let handles: Vec<_> = on
            .iter()
            .map(|&i| {
                let (dev, jit, barrier) = (&d[i], &jit, &barrier);
                s.spawn(move || {
                    barrier.wait();
                    // The load is slowed down so that the threads of one device overlap in
                    // it: without single flight both would load.
                    let l = jit
                        .load_with(dev, SOURCE, &CompileOptions::default(), |co, d| {
                            std::thread::sleep(std::time::Duration::from_millis(300));
                            co.load(d)
                        })
                        .unwrap_or_else(|e| panic!("device {i}: {e}"));
                    (i, l)
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let log = log(&lib);
    no_wrong_device(&log);
    for dev in 0..3 {
        assert_eq!(
            count(&log, "hipModuleLoadData ")
                - log
                    .iter()
                    .filter(|l| l.starts_with("hipModuleLoadData ")
                        && !l.ends_with(&format!(" device={dev}")))
                    .count(),
            1,
            "device {dev}: {log:#?}"
        );
    }
    assert_eq!(count(&log, "hipModuleLoadData "), 3, "{log:#?}");
    // One library per device, shared by that device's two threads.
    for pair in loaded.chunks(2) {
        assert!(Arc::ptr_eq(&pair[0].1.library, &pair[1].1.library));
    }
    assert!(!Arc::ptr_eq(&loaded[0].1.library, &loaded[4].1.library));
    // One compile per distinct target: devices 0 and 2 share theirs.
    let compiles = loaded
        .iter()
        .filter(|(_, l)| l.compiled.origin() == Origin::Compiler)
        .count();
    assert_eq!(compiles, 2);
    let target = |i: usize| {
        loaded[i]
            .1
            .compiled
            .code_object()
            .unwrap()
            .target_id()
            .to_string()
    };
    assert_eq!(target(0), "gfx90a:sramecc+:xnack-");
    assert_eq!(target(2), "gfx1030");
    assert_eq!(loaded[0].1.compiled.key(), loaded[4].1.compiled.key());
}

#[test]
fn each_devices_kernel_runs_on_its_own_device_only() {
    let (rt, lib) = fixture("kernel-per-device");
    let d = devices(&rt);
    let jit = Jit::new(JitOptions {
        // hipcc, whatever HIPJIT_COMPILER says: these tests are about it.
        compiler: Some(hipjit::compiler::selection::CompilerChoice::Hipcc),
        cache: CacheLocation::Disabled,
        ..JitOptions::default()
    })
    .unwrap_or_else(|e| panic!("{e}"));
    let mut outputs = Vec::new();
    for (i, dev) in d.iter().enumerate().take(2) {
        let loaded = jit
            .load(dev, SOURCE, &CompileOptions::default())
            .unwrap_or_else(|e| panic!("{e}"));
        let kernel = loaded.library.kernel("scale").unwrap();
        let stream = Stream::new(dev, StreamFlags::NON_BLOCKING).unwrap();
        let mut x = DeviceBuffer::from_slice(dev, &[1.0f32; 64]).unwrap();
        let a = (i + 2) as f32;
        // SAFETY: scale(float*, float, unsigned) takes exactly these arguments.
        unsafe {
            kernel
                .launch(
                    &stream,
                    LaunchConfig::for_num_elems(64, 64),
                    &mut args![&mut x, &a, &64u32],
                )
                .unwrap()
        };
        outputs.push(x.to_vec_on(&stream).unwrap());
        // A kernel loaded on device i refuses a stream of the other device before the call.
        let other = Stream::new(&d[1 - i], StreamFlags::NON_BLOCKING).unwrap();
        let mut y = DeviceBuffer::<f32>::zeroed(&d[1 - i], 64).unwrap();
        // SAFETY: as above; refused before the call.
        let err = unsafe {
            kernel.launch(
                &other,
                LaunchConfig::for_num_elems(64, 64),
                &mut args![&mut y, &a, &64u32],
            )
        }
        .unwrap_err();
        assert!(err.to_string().contains("device"), "{err}");
    }
    assert_eq!(outputs[0], vec![2.0f32; 64]);
    assert_eq!(outputs[1], vec![3.0f32; 64]);
    let log = log(&lib);
    no_wrong_device(&log);
    assert_eq!(count(&log, "hipModuleLaunchKernel scale"), 2, "{log:#?}");
}

#[test]
fn a_graph_is_not_replayed_on_a_stream_of_another_device() {
    let (rt, lib) = fixture("graph-other-device");
    let devs = devices(&rt);
    let s0 = Stream::new(&devs[0], StreamFlags::NON_BLOCKING).unwrap();
    let s1 = Stream::new(&devs[1], StreamFlags::NON_BLOCKING).unwrap();
    let cap = s0
        .begin_capture(hipjit::graph::CaptureMode::Global)
        .unwrap();
    let exec = cap.end_capture().unwrap().instantiate().unwrap();
    let err = exec.launch(&s1).unwrap_err();
    assert_eq!(err.code(), 400, "{err}");
    assert!(
        err.to_string().contains("device 0") && err.to_string().contains("device 1"),
        "{err}"
    );
    assert_eq!(
        count(&log(&lib), "hipGraphLaunch"),
        0,
        "refused before the call"
    );
    assert_eq!(
        count(&log(&lib), "hipEventCreate"),
        0,
        "refused before the call"
    );
    exec.launch(&s0).unwrap();
    drop(exec);
    let log = log(&lib);
    assert_eq!(count(&log, "hipGraphLaunch"), 1, "{log:#?}");
    no_wrong_device(&log);
}
