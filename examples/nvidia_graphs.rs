//! Prepared launches, stream capture and graphs on a real NVIDIA GPU (scripts/h200.sh runs this
//! on the H200 machine): checks, element by element against values computed here, then the
//! benchmarks of launch and graph costs against raw CUDA driver calls in the same process.
//!
//! Checks: 1,000 launches of two kernels captured into one graph and replayed 10 times; a graph
//! replayed after the `Stream`, `Kernel`, `Library` and `Jit` that built it were dropped; a
//! hipjit load attempted inside a global-mode capture refused by name, the capture intact.
//!
//! Benchmarks (each printed as a `BENCH` line): batches of 512 launches followed by a
//! synchronize, only the launch calls timed, hipjit and raw batches alternating, 200 batches
//! each; the median per launch of each side, the absolute overhead and the ratio; for the
//! launches, three such runs and the median of their overheads and ratios. Graph costs:
//! capture per launch, instantiation, node update per node, and replay, each against the raw
//! driver calls on a graph of the same launches. The kernel-level cache hit
//! (`Jit::kernel`) is timed with a fresh `String` of equal contents on each call.

use std::error::Error;
use std::ffi::c_void;
use std::time::Instant;

use hipjit::args;
use hipjit::compiler::CompileOptions;
use hipjit::cuda::driver::{self, Driver, KernelNodeParams};
use hipjit::device::Device;
use hipjit::graph::{CaptureMode, GraphExec, Written};
use hipjit::jit::{CacheLocation, Jit, JitOptions};
use hipjit::kernel::Kernel;
use hipjit::launch::LaunchConfig;
use hipjit::memory::{DeviceBuffer, DeviceMemory};
use hipjit::runtime::{Platform, Runtime};
use hipjit::stream::{Stream, StreamFlags};

type R<T> = Result<T, Box<dyn Error>>;

const KERNELS: &str = r#"
#include <hip/hip_runtime.h>

extern "C" __global__ void saxpy(float a, const float* x, float* y, unsigned n) {
    unsigned i = hipBlockIdx_x * hipBlockDim_x + hipThreadIdx_x;
    if (i < n) y[i] = a * x[i] + y[i];
}

extern "C" __global__ void scale_shift(float* y, float s, float b, unsigned n) {
    unsigned i = hipBlockIdx_x * hipBlockDim_x + hipThreadIdx_x;
    if (i < n) y[i] = s * y[i] + b;
}
"#;

/// Elements of the checked buffers.
const N: u32 = 1 << 16;
/// Launches per benchmark batch.
const BATCH: usize = 512;
/// Batches per side.
const BATCHES: usize = 200;
/// Runs of the launch benchmarks; the median of their overheads and ratios is reported.
const RUNS: usize = 3;

fn check(name: &str, ok: bool, detail: String) -> R<()> {
    if ok {
        println!("PASS {name}: {detail}");
        Ok(())
    } else {
        println!("FAIL {name}: {detail}");
        Err(format!("check {name} failed: {detail}").into())
    }
}

fn drv() -> R<&'static Driver> {
    Ok(driver::get().ok_or("the CUDA driver is not loaded")?)
}

fn need<T>(f: Option<T>, name: &str) -> R<T> {
    f.ok_or_else(|| format!("the driver does not export {name}").into())
}

fn cu(rc: i32, call: &str) -> R<()> {
    if rc == 0 {
        Ok(())
    } else {
        Err(format!("{call} failed: CUresult {rc}").into())
    }
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

/// The coefficients of launch `j` of the 1,000: even `j` is saxpy with `a`, odd `j` is
/// scale_shift with `(s, b)`. Every value is a small integer, so every result is exact in f32
/// whether or not the compiler fuses the multiply-add.
fn coefficients() -> Vec<(f32, f32, f32)> {
    (0..1000u32)
        .map(|j| {
            let h = j / 2;
            let a = (h % 3) as f32;
            let s = if h % 2 == 0 { 1.0 } else { -1.0 };
            let b = (h % 4) as f32;
            (a, s, b)
        })
        .collect()
}

fn host_replay(x: &[f32], y: &mut [f32], coef: &[(f32, f32, f32)], replays: usize) {
    for _ in 0..replays {
        for (j, &(a, s, b)) in coef.iter().enumerate() {
            for (y, &x) in y.iter_mut().zip(x) {
                *y = if j % 2 == 0 { a * x + *y } else { s * *y + b };
            }
        }
    }
}

/// hipjit's one JIT with its disk cache in `cache` (the compiler `HIPJIT_COMPILER` names, else
/// Auto's).
fn jit(cache: &std::path::Path) -> R<Jit> {
    Ok(Jit::new(JitOptions {
        cache: CacheLocation::Roots(vec![cache.to_path_buf()]),
        ..JitOptions::default()
    })?)
}

fn main() -> R<()> {
    let rt = Runtime::load_platform(Platform::Nvidia)?;
    let dev = rt.device(0)?;
    let cache = std::env::temp_dir().join(format!("hipjit-graphs-{}", std::process::id()));
    let jit = jit(&cache)?;
    let lib = jit.load(&dev, KERNELS, &CompileOptions::default())?.library;
    let saxpy = lib.kernel("saxpy")?;
    let scale_shift = lib.kernel("scale_shift")?;
    let stream = Stream::new(&dev, StreamFlags::NON_BLOCKING)?;

    thousand_launches_replayed(&dev, &saxpy, &scale_shift, &stream)?;
    replay_after_builders_dropped(&dev, &cache)?;
    load_refused_during_global_capture(&dev, &jit, &stream)?;

    launch_after_another_context(&dev, &saxpy, &stream)?;

    bench_kernel_hit(&dev, &jit)?;
    bench_launches(&dev, &saxpy, &stream)?;
    bench_graphs(&dev, &saxpy, &stream)?;
    let _ = std::fs::remove_dir_all(&cache);
    println!("== graphs: all passed");
    Ok(())
}

fn thousand_launches_replayed(
    dev: &Device,
    saxpy: &Kernel,
    scale_shift: &Kernel,
    stream: &Stream,
) -> R<()> {
    let x_host: Vec<f32> = (0..N).map(|i| (i % 7) as f32).collect();
    let y_host: Vec<f32> = (0..N).map(|i| (i % 5) as f32).collect();
    let x = DeviceBuffer::from_slice(dev, &x_host)?;
    let y = DeviceBuffer::from_slice(dev, &y_host)?;
    let coef = coefficients();
    let n = N;
    let cfg = LaunchConfig::for_num_elems(N, 256);
    let t = Instant::now();
    let mut cap = stream.begin_capture(CaptureMode::Global)?;
    for (j, (a, s, b)) in coef.iter().enumerate() {
        // SAFETY: saxpy(float, const float*, float*, unsigned) and scale_shift(float*, float,
        // float, unsigned) on buffers of n floats.
        unsafe {
            if j % 2 == 0 {
                cap.launch(saxpy, cfg, args![a, &x, Written(&y), &n])?;
            } else {
                cap.launch(scale_shift, cfg, args![Written(&y), s, b, &n])?;
            }
        }
    }
    let graph = cap.end_capture()?;
    let captured = t.elapsed();
    let nodes = graph.kernel_nodes()?.len();
    let exec = graph.instantiate()?;
    for _ in 0..10 {
        exec.launch(stream)?;
    }
    stream.synchronize()?;
    let got = y.to_vec()?;
    let mut want = y_host.clone();
    host_replay(&x_host, &mut want, &coef, 10);
    let bad = got.iter().zip(&want).filter(|(g, w)| g != w).count();
    check(
        "graph of 1,000 launches of two kernels, replayed 10 times",
        nodes == 1000 && bad == 0,
        format!(
            "{nodes} kernel nodes, captured in {:.1} ms, {N} elements, {bad} wrong",
            captured.as_secs_f64() * 1e3
        ),
    )
}

fn replay_after_builders_dropped(dev: &Device, cache: &std::path::Path) -> R<()> {
    let x_host: Vec<f32> = (0..N).map(|i| (i % 3) as f32).collect();
    let x = DeviceBuffer::from_slice(dev, &x_host)?;
    let y = DeviceBuffer::from_slice(dev, &vec![1.0f32; N as usize])?;
    let (a, n) = (2.0f32, N);
    let exec: GraphExec<'_> = {
        let jit = jit(&cache.join("second"))?;
        let lib = jit.load(dev, KERNELS, &CompileOptions::default())?.library;
        let kernel = lib.kernel("saxpy")?;
        let stream = Stream::new(dev, StreamFlags::NON_BLOCKING)?;
        let mut cap = stream.begin_capture(CaptureMode::Global)?;
        // SAFETY: saxpy on buffers of n floats.
        unsafe {
            cap.launch(
                &kernel,
                LaunchConfig::for_num_elems(N, 256),
                args![&a, &x, Written(&y), &n],
            )?
        };
        let exec = cap.end_capture()?.instantiate()?;
        drop((kernel, lib, stream, jit));
        exec
    };
    let other = Stream::new(dev, StreamFlags::NON_BLOCKING)?;
    exec.launch(&other)?;
    exec.launch(&other)?;
    other.synchronize()?;
    let got = y.to_vec()?;
    let bad = got
        .iter()
        .zip(&x_host)
        .filter(|(g, x)| **g != 1.0 + 2.0 * 2.0 * **x)
        .count();
    check(
        "graph replayed after its Stream, Kernel, Library and Jit were dropped",
        bad == 0,
        format!("2 replays on a new stream, {N} elements, {bad} wrong"),
    )
}

fn load_refused_during_global_capture(dev: &Device, jit: &Jit, stream: &Stream) -> R<()> {
    let source = format!(
        "{KERNELS}\n// a source not loaded yet: {}\n",
        std::process::id()
    );
    let cap = stream.begin_capture(CaptureMode::Global)?;
    let err = match jit.load(dev, &source, &CompileOptions::default()) {
        Ok(_) => {
            return check(
                "load refused during a global capture",
                false,
                "it loaded".into(),
            )
        }
        Err(e) => e.to_string(),
    };
    let other_thread = std::thread::scope(|s| {
        s.spawn(|| DeviceBuffer::<f32>::alloc(dev, 16).map(|_| ()))
            .join()
    })
    .map_err(|_| "thread panicked")?;
    let intact = cap.end_capture().is_ok();
    check(
        "a hipjit load inside a global-mode capture is refused by name, the capture intact",
        err.contains("hipErrorStreamCaptureUnsupported")
            && err.contains("refused by hipjit before the call")
            && other_thread.as_ref().is_err_and(|e| e.code() == 900)
            && intact,
        format!(
            "load: {err}; hipMalloc on another thread: {:?}; end_capture ok: {intact}",
            other_thread.err().map(|e| e.to_string())
        ),
    )
}

/// A launch finds its context whatever the thread's current one: hipjit launches on a stream
/// without binding first, and binds only when the driver refuses the launch. Checked with
/// another context of the same device made current behind hipjit's back (`cuCtxCreate_v2`,
/// which makes it current), through `Kernel::launch` and a prepared launch, then from a fresh
/// thread with no context at all; every element checked. Which context the thread is left in
/// is reported, not required: the H200's driver (580, CUDA 13) runs a launch on a stream of the
/// primary context with another context current, so hipjit never needs to bind there and the
/// caller's context stays current; a driver that refuses it gets the primary context bound.
fn launch_after_another_context(dev: &Device, saxpy: &Kernel, stream: &Stream) -> R<()> {
    type Create = unsafe extern "C" fn(*mut *mut c_void, u32, i32) -> i32;
    type Destroy = unsafe extern "C" fn(*mut c_void) -> i32;
    let d = drv()?;
    // SAFETY: the driver hipjit loaded is already in the process; RTLD_NOLOAD opens no other.
    let h = unsafe { libc::dlopen(c"libcuda.so.1".as_ptr(), libc::RTLD_NOW | libc::RTLD_NOLOAD) };
    if h.is_null() {
        return Err("libcuda.so.1 is not loaded".into());
    }
    // SAFETY: live handle, NUL-terminated names; the types are cuda.h's cuCtxCreate_v2 and
    // cuCtxDestroy_v2.
    let (create, destroy): (Create, Destroy) = unsafe {
        let c = libc::dlsym(h, c"cuCtxCreate_v2".as_ptr());
        let x = libc::dlsym(h, c"cuCtxDestroy_v2".as_ptr());
        if c.is_null() || x.is_null() {
            return Err("the driver exports no cuCtxCreate_v2 / cuCtxDestroy_v2".into());
        }
        (
            std::mem::transmute::<*mut c_void, Create>(c),
            std::mem::transmute::<*mut c_void, Destroy>(x),
        )
    };
    let n = N as usize;
    let x_host: Vec<f32> = (0..n).map(|i| (i % 1000) as f32).collect();
    let x = DeviceBuffer::from_slice(dev, &x_host)?;
    let mut y = DeviceBuffer::<f32>::zeroed(dev, n)?;
    let cfg = LaunchConfig::for_num_elems(N, 256);
    let (two, nn) = (2.0f32, N);
    let mut primary: *mut c_void = std::ptr::null_mut();
    // SAFETY: valid out pointer.
    cu(
        unsafe { (d.cuCtxGetCurrent)(&mut primary) },
        "cuCtxGetCurrent",
    )?;
    let mut other: *mut c_void = std::ptr::null_mut();
    // SAFETY: valid out pointer, device 0; the new context becomes this thread's current one.
    cu(unsafe { create(&mut other, 0, 0) }, "cuCtxCreate_v2")?;
    // SAFETY: saxpy's arguments; y written.
    unsafe { saxpy.launch(stream, cfg, &mut args![&two, &x, &mut y, &nn])? };
    let mut now: *mut c_void = std::ptr::null_mut();
    // SAFETY: valid out pointer.
    cu(unsafe { (d.cuCtxGetCurrent)(&mut now) }, "cuCtxGetCurrent")?;
    let left_in = if now == primary {
        "the primary context (hipjit bound it after a refused launch)"
    } else if now == other {
        "the caller's other context (the driver ran the launch as it was)"
    } else {
        "an unexpected context"
    };
    // The other context current again, then a prepared launch.
    let prepared = saxpy.prepare(stream, cfg, &args![&two, &x, &mut y, &nn])?;
    // SAFETY: a live context.
    cu(unsafe { (d.cuCtxSetCurrent)(other) }, "cuCtxSetCurrent")?;
    // SAFETY: saxpy's arguments, as prepared.
    unsafe { prepared.launch(&mut args![&two, &x, &mut y, &nn])? };
    // A fresh thread: no context current at all.
    let fresh: Result<(), String> = std::thread::scope(|s| {
        s.spawn(|| {
            // SAFETY: saxpy's arguments, as prepared.
            unsafe { prepared.launch(&mut args![&two, &x, &mut y, &nn]) }.map_err(|e| e.to_string())
        })
        .join()
        .map_err(|_| "the launching thread panicked".to_string())?
    });
    drop(prepared);
    let got = y.to_vec_on(stream)?;
    // SAFETY: the context created above, no longer used.
    cu(unsafe { destroy(other) }, "cuCtxDestroy_v2")?;
    let bad = got
        .iter()
        .zip(&x_host)
        .filter(|(g, x)| **g != 6.0 * **x)
        .count();
    check(
        "launch after another context was made current",
        (now == primary || now == other) && bad == 0 && fresh.is_ok(),
        format!(
            "Kernel::launch and a prepared launch with another context of device 0 current, one from a fresh thread: {bad} of {n} elements wrong, thread left in {left_in}, fresh thread: {fresh:?}"
        ),
    )
}

/// `Jit::kernel` hits for a 4 KiB source, each call handed a fresh `String` of equal contents,
/// two ways, in batches of `BATCH`:
/// - made just before the call, as a caller that builds its source does: batches that make the
///   `String` and call `Jit::kernel` alternate with batches that only make it, and the hit is
///   the difference of the two medians (the `String` is in the core's caches, as it is for
///   such a caller);
/// - all made before the clock starts (2 MiB of them: each call reads its source from the
///   last-level cache or memory, so the figure includes that read).
fn bench_kernel_hit(dev: &Device, jit: &Jit) -> R<()> {
    let mut src = format!("{KERNELS}\n// kernel-level hit benchmark\n");
    while src.len() < 4096 {
        src.push_str("// padding to make the source 4 KiB long, as a generated kernel would be\n");
    }
    src.truncate(4096);
    let options = CompileOptions::default();
    let first = jit.kernel(dev, &src, "saxpy", &options)?;
    let (mut with_hit, mut make_only) = (Vec::with_capacity(BATCHES), Vec::with_capacity(BATCHES));
    for _ in 0..BATCHES {
        let t = Instant::now();
        for _ in 0..BATCH {
            let s = String::from(std::hint::black_box(src.as_str()));
            let k = jit.kernel(dev, &s, "saxpy", &options)?;
            if !k.same_as(&first) {
                return Err("a kernel-level hit returned another kernel".into());
            }
        }
        with_hit.push(t.elapsed().as_secs_f64() * 1e9 / BATCH as f64);
        let t = Instant::now();
        for _ in 0..BATCH {
            let s = String::from(std::hint::black_box(src.as_str()));
            std::hint::black_box(&s);
        }
        make_only.push(t.elapsed().as_secs_f64() * 1e9 / BATCH as f64);
    }
    let (hit, make) = (median(&mut with_hit), median(&mut make_only));
    let mut per_call = Vec::with_capacity(BATCHES);
    for _ in 0..BATCHES {
        let fresh: Vec<String> = (0..BATCH).map(|_| String::from(src.as_str())).collect();
        let t = Instant::now();
        for s in &fresh {
            let k = jit.kernel(dev, s, "saxpy", &options)?;
            if !k.same_as(&first) {
                return Err("a kernel-level hit returned another kernel".into());
            }
        }
        per_call.push(t.elapsed().as_secs_f64() * 1e9 / BATCH as f64);
    }
    println!(
        "BENCH kernel-level hit, 4 KiB source as a String just made: Jit::kernel {:.0} ns per call (making the String and the call {hit:.0} ns, making it alone {make:.0} ns; medians of {BATCHES} alternating batches of {BATCH}; target < 300 ns)",
        hit - make
    );
    println!(
        "BENCH kernel-level hit, 4 KiB source as a String made beforehand (2 MiB of them): Jit::kernel median {:.0} ns per call ({BATCHES} batches of {BATCH})",
        median(&mut per_call)
    );
    Ok(())
}

/// Times `BATCHES` alternating batches of `BATCH` calls of `raw` and `ours` (each batch timed as
/// a whole, then a synchronize outside the clock); returns the medians per call in ns.
fn alternate(
    stream: &Stream,
    mut raw: impl FnMut() -> R<()>,
    mut ours: impl FnMut() -> R<()>,
) -> R<(f64, f64)> {
    let (mut r, mut o) = (Vec::with_capacity(BATCHES), Vec::with_capacity(BATCHES));
    for _ in 0..BATCHES {
        let t = Instant::now();
        for _ in 0..BATCH {
            raw()?;
        }
        r.push(t.elapsed().as_secs_f64() * 1e9 / BATCH as f64);
        stream.synchronize()?;
        let t = Instant::now();
        for _ in 0..BATCH {
            ours()?;
        }
        o.push(t.elapsed().as_secs_f64() * 1e9 / BATCH as f64);
        stream.synchronize()?;
    }
    Ok((median(&mut r), median(&mut o)))
}

fn bench_launches(dev: &Device, saxpy: &Kernel, stream: &Stream) -> R<()> {
    let d = drv()?;
    let x = DeviceBuffer::<f32>::zeroed(dev, N as usize)?;
    let mut y = DeviceBuffer::<f32>::zeroed(dev, N as usize)?;
    let (a, n) = (1.0f32, N);
    let cfg = LaunchConfig::for_num_elems(N, 256);
    let f = saxpy.as_raw() as *mut c_void;
    let s = stream.as_raw() as *mut c_void;
    let (xp, yp) = (x.as_raw() as u64, y.as_raw() as u64);
    let raw = || -> R<()> {
        let mut params: [*mut c_void; 4] = [
            &a as *const f32 as *mut c_void,
            &xp as *const u64 as *mut c_void,
            &yp as *const u64 as *mut c_void,
            &n as *const u32 as *mut c_void,
        ];
        // SAFETY: saxpy's four parameters, live for the call; live function and stream.
        let rc = unsafe {
            (d.cuLaunchKernel)(
                f,
                cfg.grid.x,
                1,
                1,
                cfg.block.x,
                1,
                1,
                0,
                s,
                params.as_mut_ptr(),
                std::ptr::null_mut(),
            )
        };
        cu(rc, "cuLaunchKernel")
    };

    let prepared = saxpy.prepare(stream, cfg, &args![&a, &x, &mut y, &n])?;
    let (over, ratio) = three_runs("PreparedLaunch::launch", stream, raw, || {
        // SAFETY: saxpy's arguments, as prepared.
        unsafe { prepared.launch(&mut args![&a, &x, &mut y, &n]) }?;
        Ok(())
    })?;
    println!(
        "BENCH prepared launch, 4 arguments: PreparedLaunch::launch overhead over raw cuLaunchKernel, median of {RUNS} runs of {BATCHES} alternating batches of {BATCH}: {over:+.0} ns, ratio {ratio:.3} (target: raw + 40 ns)"
    );
    drop(prepared);

    let (over, ratio) = three_runs("Kernel::launch", stream, raw, || {
        // SAFETY: saxpy's arguments.
        unsafe { saxpy.launch(stream, cfg, &mut args![&a, &x, &mut y, &n]) }?;
        Ok(())
    })?;
    println!(
        "BENCH Kernel::launch, 4 arguments: overhead over raw cuLaunchKernel, median of {RUNS} runs of {BATCHES} alternating batches of {BATCH}: {over:+.0} ns, ratio {ratio:.3} (target <= 1.03)"
    );
    Ok(())
}

/// [`RUNS`] runs of [`alternate`], each printed; returns the medians of the overheads (ns) and
/// of the ratios.
fn three_runs(
    what: &str,
    stream: &Stream,
    mut raw: impl FnMut() -> R<()>,
    mut ours: impl FnMut() -> R<()>,
) -> R<(f64, f64)> {
    let (mut over, mut ratio) = (Vec::with_capacity(RUNS), Vec::with_capacity(RUNS));
    for run in 1..=RUNS {
        let (mr, mo) = alternate(stream, &mut raw, &mut ours)?;
        println!(
            "  run {run}: {what} median {mo:.0} ns vs raw cuLaunchKernel {mr:.0} ns per launch: {:+.0} ns, ratio {:.3}",
            mo - mr,
            mo / mr
        );
        over.push(mo - mr);
        ratio.push(mo / mr);
    }
    Ok((median(&mut over), median(&mut ratio)))
}

fn bench_graphs(dev: &Device, saxpy: &Kernel, stream: &Stream) -> R<()> {
    let d = drv()?;
    let begin = need(d.cuStreamBeginCapture_v2, "cuStreamBeginCapture_v2")?;
    let end = need(d.cuStreamEndCapture, "cuStreamEndCapture")?;
    let instantiate = need(d.cuGraphInstantiateWithFlags, "cuGraphInstantiateWithFlags")?;
    let launch = need(d.cuGraphLaunch, "cuGraphLaunch")?;
    let get_nodes = need(d.cuGraphGetNodes, "cuGraphGetNodes")?;
    let set_params = need(
        d.cuGraphExecKernelNodeSetParams_v2,
        "cuGraphExecKernelNodeSetParams_v2",
    )?;
    let destroy = need(d.cuGraphDestroy, "cuGraphDestroy")?;
    let exec_destroy = need(d.cuGraphExecDestroy, "cuGraphExecDestroy")?;

    let x = DeviceBuffer::<f32>::zeroed(dev, N as usize)?;
    let y = DeviceBuffer::<f32>::zeroed(dev, N as usize)?;
    let (a, n) = (1.0f32, N);
    let cfg = LaunchConfig::for_num_elems(N, 256);
    let f = saxpy.as_raw() as *mut c_void;
    let s = stream.as_raw() as *mut c_void;
    let (xp, yp) = (x.as_raw() as u64, y.as_raw() as u64);
    let mut params: [*mut c_void; 4] = [
        &a as *const f32 as *mut c_void,
        &xp as *const u64 as *mut c_void,
        &yp as *const u64 as *mut c_void,
        &n as *const u32 as *mut c_void,
    ];
    const REPS: usize = 50;

    // Capture: BATCH launches each, raw and hipjit alternating.
    let raw_capture = |params: &mut [*mut c_void; 4]| -> R<*mut c_void> {
        let mut g: *mut c_void = std::ptr::null_mut();
        // SAFETY: live stream; global mode 0; saxpy's parameters live for each call.
        unsafe {
            cu(begin(s, 0), "cuStreamBeginCapture_v2")?;
            for _ in 0..BATCH {
                cu(
                    (d.cuLaunchKernel)(
                        f,
                        cfg.grid.x,
                        1,
                        1,
                        cfg.block.x,
                        1,
                        1,
                        0,
                        s,
                        params.as_mut_ptr(),
                        std::ptr::null_mut(),
                    ),
                    "cuLaunchKernel",
                )?;
            }
            cu(end(s, &mut g), "cuStreamEndCapture")?;
        }
        Ok(g)
    };
    // Each side's time per launch: the raw capture (its graph destroyed outside the clock),
    // and hipjit's (its graph dropped outside the clock).
    let raw_side = |params: &mut [*mut c_void; 4]| -> R<f64> {
        let t = Instant::now();
        let g = raw_capture(params)?;
        let ns = t.elapsed().as_secs_f64() * 1e9 / BATCH as f64;
        // SAFETY: the graph just captured.
        cu(unsafe { destroy(g) }, "cuGraphDestroy")?;
        Ok(ns)
    };
    let hipjit_side = || -> R<f64> {
        let t = Instant::now();
        let mut cap = stream.begin_capture(CaptureMode::Global)?;
        for _ in 0..BATCH {
            // SAFETY: saxpy's arguments.
            unsafe { cap.launch(saxpy, cfg, args![&a, &x, Written(&y), &n])? };
        }
        let graph = cap.end_capture()?;
        let ns = t.elapsed().as_secs_f64() * 1e9 / BATCH as f64;
        drop(graph);
        Ok(ns)
    };
    let (mut cr, mut co) = (Vec::new(), Vec::new());
    for rep in 0..REPS {
        // Which side runs first alternates: the second may find the caches otherwise.
        if rep % 2 == 0 {
            cr.push(raw_side(&mut params)?);
            co.push(hipjit_side()?);
        } else {
            co.push(hipjit_side()?);
            cr.push(raw_side(&mut params)?);
        }
    }
    let (mr, mo) = (median(&mut cr), median(&mut co));
    println!(
        "BENCH graph capture per launch ({BATCH} launches, {REPS} captures each): hipjit {mo:.0} ns vs raw cuStreamBeginCapture_v2 + cuLaunchKernel + cuStreamEndCapture {mr:.0} ns: overhead {:+.0} ns, ratio {:.3}",
        mo - mr,
        mo / mr
    );
    // Where the capture's overhead goes: between the raw driver calls' begin and end, the
    // launches made by `PreparedLaunch::launch` (the arguments built each launch, the checks
    // made once) and by `Kernel::launch` (checks each launch), beside the raw side again and
    // `Capture::launch`, the four alternating.
    let prepared = saxpy.prepare(stream, cfg, &args![&a, &x, Written(&y), &n])?;
    let captured_by = |how: &mut dyn FnMut() -> R<()>| -> R<f64> {
        let mut g: *mut c_void = std::ptr::null_mut();
        let t = Instant::now();
        // SAFETY: live stream; global mode 0.
        cu(unsafe { begin(s, 0) }, "cuStreamBeginCapture_v2")?;
        for _ in 0..BATCH {
            how()?;
        }
        // SAFETY: the capture begun above.
        cu(unsafe { end(s, &mut g) }, "cuStreamEndCapture")?;
        let ns = t.elapsed().as_secs_f64() * 1e9 / BATCH as f64;
        // SAFETY: the graph just captured.
        cu(unsafe { destroy(g) }, "cuGraphDestroy")?;
        Ok(ns)
    };
    let mut split: [Vec<f64>; 4] = Default::default();
    for rep in 0..REPS {
        // The order rotates each round, as the node update's split below does.
        for side in (0..4).map(|i| (i + rep) % 4) {
            let ns = match side {
                0 => raw_side(&mut params)?,
                1 => captured_by(&mut || {
                    // SAFETY: saxpy's arguments.
                    unsafe { prepared.launch(&mut args![&a, &x, Written(&y), &n])? };
                    Ok(())
                })?,
                2 => captured_by(&mut || {
                    // SAFETY: saxpy's arguments.
                    unsafe { saxpy.launch(stream, cfg, &mut args![&a, &x, Written(&y), &n])? };
                    Ok(())
                })?,
                _ => hipjit_side()?,
            };
            split[side].push(ns);
        }
    }
    let [r, p, k, c] = split.map(|mut v| median(&mut v));
    println!(
        "BENCH graph capture per launch, split ({BATCH} launches, {REPS} captures each, \
         the order rotating): raw {r:.0} ns; between raw begin and end, PreparedLaunch::launch {p:.0} ns \
         ({:+.0}), Kernel::launch {k:.0} ns ({:+.0}); Capture::launch {c:.0} ns ({:+.0})",
        p - r,
        k - r,
        c - r
    );

    // Instantiate, node update and replay on graphs of the same BATCH launches.
    let raw_graph = raw_capture(&mut params)?;
    let mut cap = stream.begin_capture(CaptureMode::Global)?;
    for _ in 0..BATCH {
        // SAFETY: saxpy's arguments.
        unsafe { cap.launch(saxpy, cfg, args![&a, &x, Written(&y), &n])? };
    }
    let graph = cap.end_capture()?;
    let (mut ir, mut io) = (Vec::new(), Vec::new());
    for _ in 0..REPS {
        let mut e: *mut c_void = std::ptr::null_mut();
        let t = Instant::now();
        // SAFETY: a live graph; valid out pointer.
        cu(
            unsafe { instantiate(&mut e, raw_graph, 0) },
            "cuGraphInstantiateWithFlags",
        )?;
        ir.push(t.elapsed().as_secs_f64() * 1e6);
        // SAFETY: the executable graph just made.
        cu(unsafe { exec_destroy(e) }, "cuGraphExecDestroy")?;
        let t = Instant::now();
        let exec = graph.instantiate()?;
        io.push(t.elapsed().as_secs_f64() * 1e6);
        drop(exec);
    }
    let (mr, mo) = (median(&mut ir), median(&mut io));
    println!(
        "BENCH graph instantiate ({BATCH} kernel nodes, {REPS} each): Graph::instantiate (with the kernel-node list) {mo:.1} us vs raw cuGraphInstantiateWithFlags {mr:.1} us: overhead {:+.1} us, ratio {:.3}",
        mo - mr,
        mo / mr
    );

    let mut raw_exec: *mut c_void = std::ptr::null_mut();
    // SAFETY: a live graph; valid out pointer.
    cu(
        unsafe { instantiate(&mut raw_exec, raw_graph, 0) },
        "cuGraphInstantiateWithFlags",
    )?;
    let mut count = BATCH;
    let mut raw_nodes: Vec<*mut c_void> = vec![std::ptr::null_mut(); BATCH];
    // SAFETY: room for BATCH nodes.
    cu(
        unsafe { get_nodes(raw_graph, raw_nodes.as_mut_ptr(), &mut count) },
        "cuGraphGetNodes",
    )?;
    raw_nodes.truncate(count);
    let mut exec = graph.instantiate()?;
    let nodes = exec.kernel_nodes().to_vec();
    // One pass of the raw update over `nodes` of the graph instantiated as `exec_raw`, and one
    // of `GraphExec::set_kernel_params` over hipjit's nodes: the time per node.
    let raw_pass =
        |exec_raw: *mut c_void, nodes: &[*mut c_void], params: &mut [*mut c_void; 4]| -> R<f64> {
            let t = Instant::now();
            for &node in nodes {
                let p = KernelNodeParams {
                    func: f,
                    gridDimX: cfg.grid.x,
                    gridDimY: 1,
                    gridDimZ: 1,
                    blockDimX: cfg.block.x,
                    blockDimY: 1,
                    blockDimZ: 1,
                    sharedMemBytes: 0,
                    kernelParams: params.as_mut_ptr(),
                    extra: std::ptr::null_mut(),
                    kern: std::ptr::null_mut(),
                    ctx: std::ptr::null_mut(),
                };
                // SAFETY: a kernel node of the graph instantiated as `exec_raw`; parameters live.
                cu(
                    unsafe { set_params(exec_raw, node, &p) },
                    "cuGraphExecKernelNodeSetParams_v2",
                )?;
            }
            Ok(t.elapsed().as_secs_f64() * 1e9 / nodes.len() as f64)
        };
    let hipjit_nodes: Vec<*mut c_void> = nodes.iter().map(|n| n.as_raw() as *mut c_void).collect();
    let hipjit_exec = exec.as_raw() as *mut c_void;
    let mut hipjit_pass = || -> R<f64> {
        let t = Instant::now();
        for &node in &nodes {
            // SAFETY: saxpy's arguments.
            unsafe { exec.set_kernel_params(node, saxpy, cfg, args![&a, &x, Written(&y), &n])? };
        }
        Ok(t.elapsed().as_secs_f64() * 1e9 / nodes.len() as f64)
    };
    let (mut ur, mut uo) = (Vec::new(), Vec::new());
    for _ in 0..REPS {
        ur.push(raw_pass(raw_exec, &raw_nodes, &mut params)?);
        uo.push(hipjit_pass()?);
    }
    let (mr, mo) = (median(&mut ur), median(&mut uo));
    println!(
        "BENCH graph kernel-node update per node ({} nodes, {REPS} passes each): GraphExec::set_kernel_params {mo:.0} ns vs raw cuGraphExecKernelNodeSetParams_v2 {mr:.0} ns: overhead {:+.0} ns, ratio {:.3}",
        nodes.len(),
        mo - mr,
        mo / mr
    );
    // Where the update's overhead goes: the raw update on the raw graph, the raw update on
    // hipjit's executable graph (captured by `Capture::launch`, instantiated by
    // `Graph::instantiate`), and `GraphExec::set_kernel_params` there, in an order that
    // rotates each pass (whichever runs second or third may find the caches otherwise).
    let mut usplit: [Vec<f64>; 3] = Default::default();
    for rep in 0..REPS {
        for side in (0..3).map(|i| (i + rep) % 3) {
            let ns = match side {
                0 => raw_pass(raw_exec, &raw_nodes, &mut params)?,
                1 => raw_pass(hipjit_exec, &hipjit_nodes, &mut params)?,
                _ => hipjit_pass()?,
            };
            usplit[side].push(ns);
        }
    }
    let [ur_raw, ur_ours, uo_ours] = usplit.map(|mut v| median(&mut v));
    println!(
        "BENCH graph kernel-node update per node, split ({REPS} passes each, the order rotating): raw cuGraphExecKernelNodeSetParams_v2 on the raw graph {ur_raw:.0} ns; on hipjit's graph {ur_ours:.0} ns; GraphExec::set_kernel_params on hipjit's graph {uo_ours:.0} ns ({:+.0} over the raw update of the same graph)",
        uo_ours - ur_ours
    );

    let (mut rr, mut ro) = (Vec::new(), Vec::new());
    for _ in 0..BATCHES {
        let t = Instant::now();
        // SAFETY: a live executable graph and stream.
        cu(unsafe { launch(raw_exec, s) }, "cuGraphLaunch")?;
        stream.synchronize()?;
        rr.push(t.elapsed().as_secs_f64() * 1e6);
        let t = Instant::now();
        exec.launch(stream)?;
        stream.synchronize()?;
        ro.push(t.elapsed().as_secs_f64() * 1e6);
    }
    let (mr, mo) = (median(&mut rr), median(&mut ro));
    println!(
        "BENCH graph replay of {BATCH} launches, launch + synchronize ({BATCHES} alternating): GraphExec::launch {mo:.1} us vs raw cuGraphLaunch {mr:.1} us: ratio {:.3} (regression guard: equal)",
        mo / mr
    );
    drop(exec);
    // SAFETY: the raw executable graph and graph, destroyed once.
    unsafe {
        cu(exec_destroy(raw_exec), "cuGraphExecDestroy")?;
        cu(destroy(raw_graph), "cuGraphDestroy")?;
    }
    Ok(())
}
