//! hipjit's own host cost per launch, without a GPU: the NVIDIA platform over the fixture CUDA
//! driver (`tests/fixtures/fake_cuda.c`, built here with `-O2 -DFIXTURE_NO_LOG`, whose
//! `cuLaunchKernel` stores its arguments and returns), so that what is measured is hipjit's
//! path around the driver call: argument packing, checks, the context bind, the entry-point
//! mapping. The kernel is saxpy (4 arguments) compiled by nvcc (`HIPJIT_NVCC`, else PyPI's
//! under `$HIPJIT_CI_CACHE/nvcc-venv`) and loaded on the fixture.
//!
//! Method (the one `examples/nvidia_graphs.rs` uses on a GPU): batches of 512 launches, only
//! the launch calls timed, each batch followed by a stream synchronize outside the clock, raw
//! `cuLaunchKernel` and hipjit batches alternating, 200 batches each; the median per launch of
//! each side; three such runs, and the median of their overheads and ratios.
//!
//! The same for a launch recorded into a stream capture (`Capture::launch` against
//! `cuLaunchKernel` on a capturing stream, each capture of 512 launches begun and ended inside
//! the clock on both sides, the graph destroyed outside it) and for a kernel-node update of an
//! executable graph (`GraphExec::set_kernel_params` against
//! `cuGraphExecKernelNodeSetParams_v2`, 64 nodes a pass); and, with no raw counterpart, a
//! memory hit to a launchable kernel (`Jit::load` of a 4 KiB source held in memory, then
//! `Library::kernel`).
//!
//! Run: `cargo bench --bench launch`.

use std::ffi::c_void;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use hipjit::args;
use hipjit::compiler::{CompileOptions, CompilerConfig};
use hipjit::cuda::driver::{self, KernelNodeParams};
use hipjit::cuda::target::SmTarget;
use hipjit::graph::{CaptureMode, Written};
use hipjit::jit::{CacheLocation, Jit, JitOptions};
use hipjit::launch::LaunchConfig;
use hipjit::memory::DeviceBuffer;
use hipjit::runtime::Runtime;
use hipjit::stream::{Stream, StreamFlags};

type R<T> = Result<T, Box<dyn std::error::Error>>;

const BATCH: usize = 512;
const BATCHES: usize = 200;
const RUNS: usize = 3;

const SAXPY: &str = r#"
#include <hip/hip_runtime.h>
extern "C" __global__ void saxpy(float a, const float* x, float* y, unsigned n) {
    unsigned i = hipBlockIdx_x * hipBlockDim_x + hipThreadIdx_x;
    if (i < n) y[i] = a * x[i] + y[i];
}
"#;

/// The driver's entry point `name`, which the fixture exports.
fn need<F>(f: Option<F>, name: &str) -> R<F> {
    f.ok_or_else(|| format!("the fixture lacks {name}").into())
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

fn nvcc() -> R<PathBuf> {
    if let Some(p) = std::env::var_os("HIPJIT_NVCC") {
        return Ok(PathBuf::from(p));
    }
    let cache = std::env::var_os("HIPJIT_CI_CACHE")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/var/cache/hipjit-ci"));
    std::fs::read_dir(cache.join("nvcc-venv/lib"))?
        .flatten()
        .map(|d| d.path().join("site-packages/nvidia/cu13/bin/nvcc"))
        .find(|p| p.is_file())
        .ok_or_else(|| "no nvcc: set HIPJIT_NVCC or run scripts/setup.sh".into())
}

fn fixture_driver(dir: &Path) -> R<PathBuf> {
    let out = dir.join("libcuda.so.1");
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/fake_cuda.c");
    let o = Command::new("cc")
        .args([
            "-shared",
            "-fPIC",
            "-fvisibility=hidden",
            "-O2",
            "-DFIXTURE_NO_LOG",
            "-o",
        ])
        .arg(&out)
        .arg(&src)
        .output()?;
    if !o.status.success() {
        return Err(format!("cc failed: {}", String::from_utf8_lossy(&o.stderr)).into());
    }
    Ok(out)
}

/// `BATCHES` alternating batches of `BATCH` calls of `raw` and `ours`; the medians per call in
/// ns.
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

/// Three runs of [`alternate`]; prints each and the medians of the overheads and ratios.
fn three_runs(
    what: &str,
    stream: &Stream,
    mut raw: impl FnMut() -> R<()>,
    mut ours: impl FnMut() -> R<()>,
) -> R<()> {
    runs(
        what,
        "raw cuLaunchKernel",
        "launch",
        &format!("{RUNS} runs of {BATCHES} alternating batches of {BATCH}"),
        || alternate(stream, &mut raw, &mut ours),
    )
}

/// `RUNS` runs of `one_run`, which gives the medians per call of the raw side and of
/// hipjit's, in ns; prints each run (hipjit's against `raw`, per `per`) and then the medians
/// of the overheads and ratios, with `how` they were measured.
fn runs(
    what: &str,
    raw: &str,
    per: &str,
    how: &str,
    mut one_run: impl FnMut() -> R<(f64, f64)>,
) -> R<()> {
    let (mut over, mut ratio) = (Vec::new(), Vec::new());
    for run in 1..=RUNS {
        let (mr, mo) = one_run()?;
        println!(
            "  run {run}: {what} {mo:.1} ns vs {raw} {mr:.1} ns per {per}: {:+.1} ns, ratio {:.3}",
            mo - mr,
            mo / mr
        );
        over.push(mo - mr);
        ratio.push(mo / mr);
    }
    println!(
        "{what}, 4 arguments, fixture driver: overhead median {:+.1} ns, ratio median {:.3} ({how})",
        median(&mut over),
        median(&mut ratio)
    );
    Ok(())
}

fn main() -> R<()> {
    // `cargo bench` passes `--bench`; `cargo test --all-targets` runs this binary without it,
    // and then it only checks that it was built.
    if !std::env::args().any(|a| a == "--bench") {
        println!("benches/launch.rs: run with `cargo bench --bench launch`");
        return Ok(());
    }
    let dir = tempfile::tempdir()?;
    let rt = Runtime::load_cuda(Some(&fixture_driver(dir.path())?))?;
    let dev = rt.device(0)?;
    let jit = Jit::new(JitOptions {
        compiler_config: CompilerConfig {
            nvcc: Some(nvcc()?),
            ..CompilerConfig::default()
        },
        cache: CacheLocation::Roots(vec![dir.path().join("cache")]),
        ..JitOptions::default()
    })?;
    let lib = jit
        .load(&dev, SAXPY, &CompileOptions::for_sm(SmTarget::new(90)))?
        .library;
    let saxpy = lib.kernel("saxpy")?;
    let stream = Stream::new(&dev, StreamFlags::NON_BLOCKING)?;
    let d = driver::get().ok_or("the fixture driver is not loaded")?;
    const N: u32 = 1 << 16;
    let x = DeviceBuffer::<f32>::zeroed(&dev, N as usize)?;
    let mut y = DeviceBuffer::<f32>::zeroed(&dev, N as usize)?;
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
        // SAFETY: saxpy's four parameters, live for the call; live function and stream (the
        // fixture runs nothing).
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
        if rc == 0 {
            Ok(())
        } else {
            Err(format!("cuLaunchKernel: {rc}").into())
        }
    };
    let prepared = saxpy.prepare(&stream, cfg, &args![&a, &x, &mut y, &n])?;
    three_runs("PreparedLaunch::launch", &stream, raw, || {
        // SAFETY: saxpy's arguments, as prepared; the fixture runs nothing.
        unsafe { prepared.launch(&mut args![&a, &x, &mut y, &n]) }?;
        Ok(())
    })?;
    drop(prepared);
    three_runs("Kernel::launch", &stream, raw, || {
        // SAFETY: saxpy's arguments; the fixture runs nothing.
        unsafe { saxpy.launch(&stream, cfg, &mut args![&a, &x, &mut y, &n]) }?;
        Ok(())
    })?;

    // Capture: per launch, captures of BATCH launches begun and ended inside the clock.
    let begin = need(d.cuStreamBeginCapture_v2, "cuStreamBeginCapture_v2")?;
    let end = need(d.cuStreamEndCapture, "cuStreamEndCapture")?;
    let destroy = need(d.cuGraphDestroy, "cuGraphDestroy")?;
    let instantiate = need(d.cuGraphInstantiateWithFlags, "cuGraphInstantiateWithFlags")?;
    let exec_destroy = need(d.cuGraphExecDestroy, "cuGraphExecDestroy")?;
    let get_nodes = need(d.cuGraphGetNodes, "cuGraphGetNodes")?;
    let set_params = need(
        d.cuGraphExecKernelNodeSetParams_v2,
        "cuGraphExecKernelNodeSetParams_v2",
    )?;
    let cu = |rc: i32, what: &str| -> R<()> {
        if rc == 0 {
            Ok(())
        } else {
            Err(format!("{what}: {rc}").into())
        }
    };
    runs(
        "Capture::launch",
        "raw cuLaunchKernel while capturing",
        "launch (begin and end included)",
        &format!(
            "{RUNS} runs of {} captures of {BATCH} launches each side",
            BATCHES / 4
        ),
        || {
            let (mut r, mut o) = (Vec::with_capacity(BATCHES), Vec::with_capacity(BATCHES));
            for _ in 0..BATCHES / 4 {
                let mut g: *mut c_void = std::ptr::null_mut();
                let t = Instant::now();
                // SAFETY: a live stream; global mode (0).
                cu(unsafe { begin(s, 0) }, "cuStreamBeginCapture_v2")?;
                for _ in 0..BATCH {
                    raw()?;
                }
                // SAFETY: the stream capturing since the begin above; valid out pointer.
                cu(unsafe { end(s, &mut g) }, "cuStreamEndCapture")?;
                r.push(t.elapsed().as_secs_f64() * 1e9 / BATCH as f64);
                // SAFETY: the graph just captured, destroyed once.
                cu(unsafe { destroy(g) }, "cuGraphDestroy")?;
                let t = Instant::now();
                let mut cap = stream.begin_capture(CaptureMode::Global)?;
                for _ in 0..BATCH {
                    // SAFETY: saxpy's arguments; the fixture runs nothing.
                    unsafe { cap.launch(&saxpy, cfg, args![&a, &x, Written(&y), &n]) }?;
                }
                let graph = cap.end_capture()?;
                o.push(t.elapsed().as_secs_f64() * 1e9 / BATCH as f64);
                drop(graph);
            }
            Ok((median(&mut r), median(&mut o)))
        },
    )?;

    // Kernel-node updates of a graph of NODES launches.
    const NODES: usize = 64;
    let mut cap = stream.begin_capture(CaptureMode::Global)?;
    for _ in 0..NODES {
        // SAFETY: saxpy's arguments; the fixture runs nothing.
        unsafe { cap.launch(&saxpy, cfg, args![&a, &x, Written(&y), &n]) }?;
    }
    let graph = cap.end_capture()?;
    let mut exec = graph.instantiate()?;
    let nodes = exec.kernel_nodes().to_vec();
    let mut raw_exec: *mut c_void = std::ptr::null_mut();
    // SAFETY: a live graph; valid out pointer.
    cu(
        unsafe { instantiate(&mut raw_exec, graph.as_raw() as *mut c_void, 0) },
        "cuGraphInstantiateWithFlags",
    )?;
    let mut raw_nodes: Vec<*mut c_void> = vec![std::ptr::null_mut(); NODES];
    let mut count = NODES;
    // SAFETY: room for NODES nodes.
    cu(
        unsafe {
            get_nodes(
                graph.as_raw() as *mut c_void,
                raw_nodes.as_mut_ptr(),
                &mut count,
            )
        },
        "cuGraphGetNodes",
    )?;
    raw_nodes.truncate(count);
    runs(
        "GraphExec::set_kernel_params",
        "raw cuGraphExecKernelNodeSetParams_v2",
        "node",
        &format!("{RUNS} runs of {BATCHES} passes over {NODES} nodes"),
        || {
            let (mut r, mut o) = (Vec::with_capacity(BATCHES), Vec::with_capacity(BATCHES));
            for _ in 0..BATCHES {
                let t = Instant::now();
                for &node in &raw_nodes {
                    let mut params: [*mut c_void; 4] = [
                        &a as *const f32 as *mut c_void,
                        &xp as *const u64 as *mut c_void,
                        &yp as *const u64 as *mut c_void,
                        &n as *const u32 as *mut c_void,
                    ];
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
                    // SAFETY: a node of the graph raw_exec was instantiated from; live parameters.
                    cu(
                        unsafe { set_params(raw_exec, node, &p) },
                        "cuGraphExecKernelNodeSetParams_v2",
                    )?;
                }
                r.push(t.elapsed().as_secs_f64() * 1e9 / raw_nodes.len() as f64);
                let t = Instant::now();
                for &node in &nodes {
                    // SAFETY: saxpy's arguments; the fixture runs nothing.
                    unsafe {
                        exec.set_kernel_params(node, &saxpy, cfg, args![&a, &x, Written(&y), &n])
                    }?;
                }
                o.push(t.elapsed().as_secs_f64() * 1e9 / nodes.len() as f64);
            }
            Ok((median(&mut r), median(&mut o)))
        },
    )?;
    drop(exec);
    drop(graph);
    // SAFETY: the raw executable graph, destroyed once.
    cu(unsafe { exec_destroy(raw_exec) }, "cuGraphExecDestroy")?;

    // A memory hit to a launchable kernel.
    let mut four_k = String::from(SAXPY);
    while four_k.len() < 4096 {
        four_k
            .push_str("// padding to make the source 4 KiB long, as a generated kernel would be\n");
    }
    four_k.truncate(4096);
    // The target named in the options, and implied by the device (the options' default, as
    // `examples/nvidia_e2e.rs` asks).
    for (options, how) in [
        (
            CompileOptions::for_sm(SmTarget::new(90)),
            "the target named",
        ),
        (CompileOptions::default(), "the device's target implied"),
    ] {
        jit.load(&dev, &four_k, &options)?.library.kernel("saxpy")?;
        let mut runs = Vec::new();
        for _ in 0..RUNS {
            let mut per = Vec::with_capacity(BATCHES);
            for _ in 0..BATCHES {
                let t = Instant::now();
                for _ in 0..BATCH / 8 {
                    let k = jit.load(&dev, &four_k, &options)?.library.kernel("saxpy")?;
                    std::hint::black_box(k);
                }
                per.push(t.elapsed().as_secs_f64() * 1e9 / (BATCH / 8) as f64);
            }
            runs.push(median(&mut per));
        }
        println!(
            "memory hit to a launchable kernel (Jit::load of a 4 KiB source held in memory, {how}, then Library::kernel), fixture driver: median {:.0} ns ({RUNS} runs of {BATCHES} batches of {})",
            median(&mut runs),
            BATCH / 8
        );
    }
    Ok(())
}
