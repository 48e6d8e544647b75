//! NVRTC against nvcc on a real NVIDIA GPU, both through hipjit's one `Jit` (scripts/h200.sh
//! runs this on the H200 machine): kernels compiled by NVRTC (`CompilerChoice::Nvrtc`) through
//! hipjit's HIP prelude are loaded and launched and their results checked element by element,
//! and `Auto` is checked to follow the parity table for the device's SM target; then the
//! cold compile + load of a 4 KiB source through `Jit::load` is timed in fresh processes, NVRTC
//! (with its first `dlopen`, and a second source in the same process without it) against nvcc,
//! 7 interleaved runs each, medians reported. Each child's disk cache is a new empty root, so
//! the times include the key, the header manifest and publishing the entry.
//!
//! Then, in this one process, the cold compile + load against raw NVRTC
//! ([`in_process_cold`]): NVRTC opened with `dlopen` from the file hipjit uses, handed the
//! program hipjit hands it (its options and the prelude headers in memory,
//! `hipjit::compiler::RtcProgram`), `nvrtcCreateProgram` -> `nvrtcCompileProgram` ->
//! `nvrtcGetCUBIN` -> `nvrtcDestroyProgram` -> `cuModuleLoadData` -> `cuModuleGetFunction`,
//! against `Jit::load` + `Library::kernel` of the same source in a new `Jit` with a new empty
//! cache root (publishing the entry before it returns, and with
//! `JitOptions::publish_in_background`), 9 interleaved runs of distinct sources after a warm-up
//! of each, with where hipjit's time goes (`hipjit::phases`); printed as a `BENCH` line with
//! the ratios (target <= 1.2).
//!
//! `nvidia_compilers` runs everything (`nvidia_compilers cold` the in-process comparison alone);
//! `nvidia_compilers child nvrtc|nvcc SEED` is one timed
//! fresh process (it prints `COLD_MS`, and for NVRTC `SECOND_MS`). nvcc is `HIPJIT_NVCC`, else
//! hipjit's discovery; NVRTC is found beside it (or `HIPJIT_NVRTC_LIBRARY`). The compilers'
//! identities are remembered per user as usual: the first child computes them, the others (as
//! any later process) read them.

use std::error::Error;
use std::ffi::{c_char, c_int, c_uint, c_void, CStr};
use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

use hipjit::args;
use hipjit::compiler::selection::CompilerChoice;
use hipjit::compiler::{Backend, CompileOptions, CompilerKind};
use hipjit::cuda::target::SmTarget;
use hipjit::device::Device;
use hipjit::jit::{CacheLocation, Jit, JitOptions, Origin};
use hipjit::launch::LaunchConfig;
use hipjit::memory::DeviceBuffer;
use hipjit::runtime::{Platform, Runtime};
use hipjit::stream::{Stream, StreamFlags};

#[path = "../benches/support/raw_rtc.rs"]
mod raw_rtc;

type R<T> = Result<T, Box<dyn Error>>;

const KERNELS: &str = r#"
#include <hip/hip_runtime.h>
#include <hip/hip_fp16.h>

extern "C" __global__ void saxpy(float a, const float* x, float* y, unsigned n) {
    unsigned i = hipBlockIdx_x * hipBlockDim_x + hipThreadIdx_x;
    if (i < n) y[i] = a * x[i] + y[i];
}

extern "C" __global__ void block_sum(const int* in, int* out, unsigned n) {
    HIP_DYNAMIC_SHARED(int, sdata)
    unsigned t = hipThreadIdx_x;
    unsigned i = hipBlockIdx_x * hipBlockDim_x + t;
    sdata[t] = i < n ? in[i] : 0;
    __syncthreads();
    for (unsigned s = hipBlockDim_x / 2; s > 0; s >>= 1) {
        if (t < s) sdata[t] += sdata[t + s];
        __syncthreads();
    }
    if (t == 0) out[hipBlockIdx_x] = sdata[0];
}

extern "C" __global__ void warp_sum(const int* in, int* out) {
    int v = in[hipBlockIdx_x * hipBlockDim_x + hipThreadIdx_x];
    for (int o = warpSize / 2; o > 0; o >>= 1) v += __shfl_down(v, o);
    if (hipThreadIdx_x % warpSize == 0) out[(hipBlockIdx_x * hipBlockDim_x + hipThreadIdx_x) / warpSize] = v;
}

extern "C" __global__ void half_scale(__half* x, float s, unsigned n) {
    unsigned i = hipBlockIdx_x * hipBlockDim_x + hipThreadIdx_x;
    if (i < n) x[i] = __float2half(__half2float(x[i]) * s);
}
"#;

fn check(name: &str, ok: bool, detail: String) -> R<()> {
    println!("{} {name}: {detail}", if ok { "PASS" } else { "FAIL" });
    if ok {
        Ok(())
    } else {
        Err(format!("check {name} failed: {detail}").into())
    }
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

fn open() -> R<(Runtime, Device, SmTarget)> {
    let rt = Runtime::load_platform(Platform::Nvidia)?;
    let dev = rt.device(0)?;
    let sm = dev
        .sm_target()
        .ok_or("the device reports no SM architecture")?;
    Ok((rt, dev, sm))
}

/// hipjit's one JIT with `choice`, its disk cache in `cache` (none when `None`).
fn jit(choice: CompilerChoice, cache: Option<PathBuf>) -> R<Jit> {
    Ok(Jit::new(JitOptions {
        compiler: Some(choice),
        cache: match cache {
            Some(c) => CacheLocation::Roots(vec![c]),
            None => CacheLocation::Disabled,
        },
        ..JitOptions::default()
    })?)
}

/// No target: the JIT takes the device's SM target.
fn opts() -> CompileOptions {
    CompileOptions::default()
}

/// A 4 KiB source, distinct per `seed` so that nothing can be served from any cache.
fn four_k_source(seed: &str) -> String {
    let mut src = format!(
        "#include <hip/hip_runtime.h>\n// run {seed}\nextern \"C\" __global__ void four_k(float* x) {{ x[hipThreadIdx_x] += 1.0f; }}\n"
    );
    while src.len() < 4096 {
        src.push_str("// padding to make the source 4 KiB long, as a generated kernel would be\n");
    }
    src.truncate(4096);
    // A last line cut to a lone `/` would be no comment: blanks instead, the size kept.
    let tail = src.len() - src.rfind('\n').map_or(0, |i| i + 1);
    if tail < 2 {
        src.truncate(src.len() - tail);
        src.push_str(&" ".repeat(tail));
    }
    src
}

fn child(mode: &str, seed: &str) -> R<()> {
    let (_rt, dev, _sm) = open()?;
    let choice = match mode {
        "nvrtc" => CompilerChoice::Nvrtc,
        "nvcc" => CompilerChoice::Nvcc,
        other => return Err(format!("unknown child mode {other}").into()),
    };
    let cache = std::env::temp_dir().join(format!("hipjit-compilers-{seed}"));
    let _ = std::fs::remove_dir_all(&cache);
    let source = four_k_source(seed);
    let t = Instant::now();
    let jit = jit(choice, Some(cache.clone()))?;
    let loaded = jit.load(&dev, &source, &opts())?;
    let _k = loaded.library.kernel("four_k")?;
    let cold = t.elapsed();
    if loaded.compiled.origin() != Origin::Compiler
        || loaded.compiled.compiler().kind.as_str() != mode
    {
        return Err(format!(
            "expected a {mode} compile, got {:?} by {:?}",
            loaded.compiled.origin(),
            loaded.compiled.compiler()
        )
        .into());
    }
    println!("COLD_MS {:.3}", cold.as_secs_f64() * 1e3);
    if mode == "nvrtc" {
        let second = four_k_source(&format!("{seed}-second"));
        let t = Instant::now();
        let loaded = jit.load(&dev, &second, &opts())?;
        let _k = loaded.library.kernel("four_k")?;
        println!("SECOND_MS {:.3}", t.elapsed().as_secs_f64() * 1e3);
    }
    let _ = std::fs::remove_dir_all(&cache);
    Ok(())
}

fn checks(dev: &Device, sm: SmTarget) -> R<()> {
    let auto = jit(CompilerChoice::Auto, None)?.compile(KERNELS, &CompileOptions::for_sm(sm))?;
    let used = auto.compiler();
    // Auto decides by the parity table (`hipjit::compiler::selection::PARITY`), keyed by
    // NVRTC's major.minor: NVRTC where its parity with nvcc was proven, nvcc with the table's
    // reason where it was disproven or never measured (CUDA 13.0's NVRTC differs from its nvcc).
    let by_parity = match used.kind {
        CompilerKind::Nvrtc => used.reason.contains("produces nvcc's code"),
        CompilerKind::Nvcc => {
            used.reason.contains("does not produce its code") || used.reason.contains("untested")
        }
        _ => false,
    };
    check(
        "Auto takes NVRTC for the device's SM target where the parity table proves it gives \
         nvcc's code, nvcc with the table's reason otherwise",
        by_parity,
        format!(
            "{} ({}): {}",
            used.kind.as_str(),
            used.path.display(),
            used.reason
        ),
    )?;
    let loaded = jit(CompilerChoice::Nvrtc, None)?.load(dev, KERNELS, &opts())?;
    check(
        "NVRTC through Jit::load",
        loaded.compiled.compiler().kind == CompilerKind::Nvrtc,
        format!("{:?}", loaded.compiled.compiler()),
    )?;
    let lib = &loaded.library;
    let stream = Stream::new(dev, StreamFlags::NON_BLOCKING)?;

    let n = 1u32 << 20;
    let xs: Vec<f32> = (0..n).map(|i| i as f32).collect();
    let x = DeviceBuffer::from_slice(dev, &xs)?;
    let mut y = DeviceBuffer::from_slice(dev, &vec![1.0f32; n as usize])?;
    let saxpy = lib.kernel("saxpy")?;
    // SAFETY: saxpy(float, const float*, float*, unsigned), checked against the cubin too.
    unsafe {
        saxpy.launch(
            &stream,
            LaunchConfig::for_num_elems(n, 256),
            &mut args![&2.0f32, &x, &mut y, &n],
        )?
    };
    stream.synchronize()?;
    let got = y.to_vec()?;
    let bad = (0..n as usize)
        .filter(|&i| got[i] != 2.0 * i as f32 + 1.0)
        .count();
    check(
        "NVRTC saxpy",
        bad == 0,
        format!("{n} elements, {bad} wrong"),
    )?;

    let blocks = 1024u32;
    let ins: Vec<i32> = (0..blocks * 256).map(|i| (i % 97) as i32 - 40).collect();
    let input = DeviceBuffer::from_slice(dev, &ins)?;
    let mut sums = DeviceBuffer::<i32>::zeroed(dev, blocks as usize)?;
    let block_sum = lib.kernel("block_sum")?;
    let mut cfg = LaunchConfig::for_num_elems(blocks * 256, 256);
    cfg.dynamic_lds_bytes = 256 * 4;
    let total = blocks * 256;
    // SAFETY: block_sum(const int*, int*, unsigned) with 1 KiB of dynamic shared memory.
    unsafe { block_sum.launch(&stream, cfg, &mut args![&input, &mut sums, &total])? };
    let mut warps = DeviceBuffer::<i32>::zeroed(dev, (blocks * 256 / 32) as usize)?;
    let warp_sum = lib.kernel("warp_sum")?;
    // SAFETY: warp_sum(const int*, int*).
    unsafe {
        warp_sum.launch(
            &stream,
            LaunchConfig::for_num_elems(blocks * 256, 256),
            &mut args![&input, &mut warps],
        )?
    };
    stream.synchronize()?;
    let got = sums.to_vec()?;
    let want: Vec<i32> = ins.chunks(256).map(|c| c.iter().sum()).collect();
    let bad = got.iter().zip(&want).filter(|(a, b)| a != b).count();
    check(
        "NVRTC block_sum (dynamic shared memory)",
        bad == 0,
        format!("{blocks} blocks, {bad} wrong"),
    )?;
    let got = warps.to_vec()?;
    let want: Vec<i32> = ins.chunks(32).map(|c| c.iter().sum()).collect();
    let bad = got.iter().zip(&want).filter(|(a, b)| a != b).count();
    check(
        "NVRTC warp_sum (HIP's __shfl_down through the prelude)",
        bad == 0,
        format!("{} warps, {bad} wrong", want.len()),
    )?;

    // __half through cuda_fp16.h: 16-bit values in, scaled by 2 (exact for these values).
    let hs: Vec<u16> = (0..4096u32)
        .map(|i| f32_to_half((i % 512) as f32))
        .collect();
    let mut h = DeviceBuffer::from_slice(dev, &hs)?;
    let half_scale = lib.kernel("half_scale")?;
    let hn = hs.len() as u32;
    // SAFETY: half_scale(__half*, float, unsigned); __half is 2 bytes, passed as u16 storage.
    unsafe {
        half_scale.launch(
            &stream,
            LaunchConfig::for_num_elems(hn, 256),
            &mut args![&mut h, &2.0f32, &hn],
        )?
    };
    stream.synchronize()?;
    let got = h.to_vec()?;
    let bad = (0..hs.len())
        .filter(|&i| got[i] != f32_to_half(2.0 * (i % 512) as f32))
        .count();
    check(
        "NVRTC half_scale (hip_fp16.h -> cuda_fp16.h)",
        bad == 0,
        format!("{hn} halves, {bad} wrong"),
    )?;
    Ok(())
}

/// IEEE binary16 of a small non-negative integer-valued float (exact below 2048).
fn f32_to_half(v: f32) -> u16 {
    if v == 0.0 {
        return 0;
    }
    let bits = v.to_bits();
    let exp = ((bits >> 23) & 0xff) as i32 - 127 + 15;
    let mant = (bits >> 13) & 0x3ff;
    ((exp as u32) << 10 | mant) as u16
}

type LoadData = unsafe extern "C" fn(*mut *mut c_void, *const c_void) -> c_int;
type GetFunction = unsafe extern "C" fn(*mut *mut c_void, *mut c_void, *const c_char) -> c_int;
type Unload = unsafe extern "C" fn(*mut c_void) -> c_int;
/// Each run's phases, as `hipjit::phases::measure` gives them.
type Phases = Vec<(&'static str, Duration)>;

/// The CUDA driver's module calls, for the raw side of [`in_process_cold`].
struct Driver {
    load_data: LoadData,
    get_function: GetFunction,
    unload: Unload,
}

impl Driver {
    /// `libcuda.so.1`, with device `ordinal`'s primary context (the one hipjit uses) made
    /// current on this thread.
    fn open(ordinal: i32) -> R<Driver> {
        // SAFETY: dlopen of the driver (already loaded by hipjit's runtime); never closed.
        let h = unsafe { libc::dlopen(c"libcuda.so.1".as_ptr(), libc::RTLD_NOW) };
        if h.is_null() {
            return Err("dlopen libcuda.so.1 failed".into());
        }
        let sym = |name: &CStr| -> R<*mut c_void> {
            // SAFETY: a live handle and a NUL-terminated name.
            let p = unsafe { libc::dlsym(h, name.as_ptr()) };
            if p.is_null() {
                return Err(format!("{name:?} not in libcuda.so.1").into());
            }
            Ok(p)
        };
        type Init = unsafe extern "C" fn(c_uint) -> c_int;
        type DeviceGet = unsafe extern "C" fn(*mut c_int, c_int) -> c_int;
        type Retain = unsafe extern "C" fn(*mut *mut c_void, c_int) -> c_int;
        type SetCurrent = unsafe extern "C" fn(*mut c_void) -> c_int;
        // SAFETY: each pointer is the named driver function, of the type of cuda.h's
        // declaration (handles as pointers, results as int).
        unsafe {
            let init: Init = std::mem::transmute(sym(c"cuInit")?);
            let device_get: DeviceGet = std::mem::transmute(sym(c"cuDeviceGet")?);
            let retain: Retain = std::mem::transmute(sym(c"cuDevicePrimaryCtxRetain")?);
            let set_current: SetCurrent = std::mem::transmute(sym(c"cuCtxSetCurrent")?);
            let mut dev = 0;
            let mut ctx = std::ptr::null_mut();
            for (what, rc) in [
                ("cuInit", init(0)),
                ("cuDeviceGet", device_get(&mut dev, ordinal)),
                ("cuDevicePrimaryCtxRetain", retain(&mut ctx, dev)),
                ("cuCtxSetCurrent", set_current(ctx)),
            ] {
                if rc != 0 {
                    return Err(format!("{what}: CUresult {rc}").into());
                }
            }
            Ok(Driver {
                load_data: std::mem::transmute::<*mut c_void, LoadData>(sym(c"cuModuleLoadData")?),
                get_function: std::mem::transmute::<*mut c_void, GetFunction>(sym(
                    c"cuModuleGetFunction",
                )?),
                unload: std::mem::transmute::<*mut c_void, Unload>(sym(c"cuModuleUnload")?),
            })
        }
    }
}

/// Per-phase medians over runs: each run's phases summed by name, then each name's median over
/// the runs (0 in a run that did not meet it).
fn phase_medians(runs: &[Vec<(&'static str, Duration)>]) -> Vec<(&'static str, f64)> {
    let mut names: Vec<&'static str> = Vec::new();
    for r in runs {
        for (n, _) in r {
            if !names.contains(n) {
                names.push(n);
            }
        }
    }
    names
        .into_iter()
        .map(|n| {
            let mut v: Vec<f64> = runs
                .iter()
                .map(|r| {
                    r.iter()
                        .filter(|(m, _)| *m == n)
                        .map(|(_, d)| d.as_secs_f64() * 1e3)
                        .sum()
                })
                .collect();
            (n, median(&mut v))
        })
        .collect()
}

/// The cold compile + load of a 4 KiB source in this one process: raw NVRTC (the library
/// hipjit uses, opened with `dlopen`, handed hipjit's options and prelude headers) with
/// `cuModuleLoadData` and `cuModuleGetFunction`, against `Jit::load` and `Library::kernel` in a
/// new `Jit` with a new empty cache root (a miss: key, compile, header manifest, entry
/// published before it returns, or in the background), 9 runs of distinct sources after one
/// warm-up of each, and the raw side again under an inotify watch of the toolkit's include
/// trees (what hipjit's watch alone costs NVRTC), named as hipjit names it
/// (`nvrtc::PROGRAM_DIRECTORY`), and under a watch made while an earlier one is closed on another thread (as
/// hipjit's compiles follow each other), the six sides' order rotated; the medians, the
/// ratios, the command hipjit ran and the split of hipjit's time.
fn in_process_cold(dev: &Device, sm: SmTarget) -> R<()> {
    let dir = std::env::temp_dir().join(format!("hipjit-cold-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let options = CompileOptions::for_sm(sm);
    let probe = jit(CompilerChoice::Nvrtc, Some(dir.join("probe")))?;

    let chosen = probe.compiler_for(four_k_source("probe"), &options)?;
    let Backend::Nvrtc(nvrtc) = &chosen.backend else {
        return Err(format!("NVRTC was not chosen: {:?}", chosen.backend.kind()).into());
    };
    let raw = raw_rtc::RawRtc::open(nvrtc.library.path(), true);
    let driver = Driver::open(dev.ordinal())?;
    let seed = std::process::id();
    // `name`: the program's name, `None` for the name hipjit hands the library before it
    // names it under `nvrtc::PROGRAM_DIRECTORY` (a relative name).
    let raw_named = |src: &str, name: Option<&str>| -> R<f64> {
        let p = nvrtc.program(src.as_bytes(), &options)?;
        let name = name.unwrap_or(&p.name);
        let t = Instant::now();
        let cubin = raw.compile(&p.source, name, &p.headers, &p.options)?;
        let mut module = std::ptr::null_mut();
        let mut function = std::ptr::null_mut();
        // SAFETY: a cubin NVRTC just made, a live module, a NUL-terminated name.
        unsafe {
            let rc = (driver.load_data)(&mut module, cubin.as_ptr().cast());
            if rc != 0 {
                return Err(format!("cuModuleLoadData: CUresult {rc}").into());
            }
            let rc = (driver.get_function)(&mut function, module, c"four_k".as_ptr());
            if rc != 0 {
                return Err(format!("cuModuleGetFunction: CUresult {rc}").into());
            }
        }
        let ms = t.elapsed().as_secs_f64() * 1e3;
        // SAFETY: the module loaded above, no longer used.
        unsafe { (driver.unload)(module) };
        Ok(ms)
    };
    let raw_load = |src: &str| raw_named(src, None);
    // The raw side again while an inotify instance watches every directory of the toolkit's
    // include trees for opens, as hipjit watches them during an NVRTC compile (NVRTC names no
    // header it read: `hipjit::compiler::opened_files`); the watches are made before the clock
    // starts and the instance closed after it stops. What the watch alone costs NVRTC.
    let include_dirs: Vec<PathBuf> = nvrtc
        .program(b"", &options)?
        .options
        .iter()
        .filter_map(|o| o.strip_prefix("-I").map(PathBuf::from))
        .collect();
    let watch = || -> R<(i32, usize)> {
        // SAFETY: plain system calls on a descriptor the caller owns.
        let fd = unsafe { libc::inotify_init1(libc::IN_CLOEXEC | libc::IN_NONBLOCK) };
        if fd < 0 {
            return Err(format!("inotify_init1: {}", std::io::Error::last_os_error()).into());
        }
        let mut stack = include_dirs.clone();
        let mut watched = 0;
        while let Some(d) = stack.pop() {
            let c = std::ffi::CString::new(d.as_os_str().as_encoded_bytes())?;
            // SAFETY: a live inotify descriptor and a NUL-terminated path.
            let wd = unsafe {
                libc::inotify_add_watch(
                    fd,
                    c.as_ptr(),
                    libc::IN_OPEN | libc::IN_ONLYDIR | libc::IN_EXCL_UNLINK,
                )
            };
            if wd >= 0 {
                watched += 1;
            }
            for e in std::fs::read_dir(&d)?.flatten() {
                if e.file_type().is_ok_and(|t| t.is_dir()) {
                    stack.push(e.path());
                }
            }
        }
        Ok((fd, watched))
    };
    let raw_watched = |src: &str| -> R<(f64, usize)> {
        let (fd, watched) = watch()?;
        let ms = raw_load(src);
        // SAFETY: the descriptor made above, closed once.
        unsafe { libc::close(fd) };
        Ok((ms?, watched))
    };
    // The raw side under a watch made while an earlier instance with the same watches is
    // being closed on another thread, as hipjit's compile follows the one before it
    // (`opened_files::close_later`): what that overlap costs NVRTC.
    let raw_after_close = |src: &str| -> R<f64> {
        let (earlier, _) = watch()?;
        let closing = std::thread::spawn(move || {
            // SAFETY: the descriptor made above, handed to this thread, closed once.
            unsafe { libc::close(earlier) };
        });
        let (fd, _) = watch()?;
        let ms = raw_load(src);
        // SAFETY: the descriptor made above, closed once.
        unsafe { libc::close(fd) };
        let _ = closing.join();
        ms
    };
    // The raw side with the program named as hipjit names it (a name under a path that is
    // not a directory; a new name each compile made NVRTC 13.0 twice as slow on the H100).
    let hipjit_name = format!("{}/four_k.cu", hipjit::compiler::nvrtc::PROGRAM_DIRECTORY);
    let jit_load = |j: &Jit, src: &str| -> R<(f64, Phases, Vec<String>)> {
        let t = Instant::now();
        let (loaded, phases) = hipjit::phases::measure(|| -> R<_> {
            let loaded = j.load(dev, src, &opts())?;
            loaded.library.kernel("four_k")?;
            Ok(loaded)
        });
        let ms = t.elapsed().as_secs_f64() * 1e3;
        let loaded = loaded?;
        if loaded.compiled.origin() != Origin::Compiler
            || loaded.compiled.compiler().kind != CompilerKind::Nvrtc
        {
            return Err(format!(
                "expected an NVRTC compile, got {:?} by {:?}",
                loaded.compiled.origin(),
                loaded.compiled.compiler()
            )
            .into());
        }
        let command = loaded.compiled.command().to_vec();
        Ok((ms, phases, command))
    };
    // Bisecting hipjit's side: the chosen backend's compile alone (the toolkit watch and
    // `NvRtc::compile`: scratch directory, include watches, the library's calls), the
    // library's `NvRtc::compile` alone, and `Jit::load` on the one `Jit` made first (its
    // compiler found once) instead of a new one each run; each with the module loaded, as
    // the raw side, and the time of "compile: the library's calls" inside.
    let load_module = |cubin: &[u8]| -> R<()> {
        let mut module = std::ptr::null_mut();
        // SAFETY: a cubin NVRTC just made; the module is unloaded at once.
        unsafe {
            let rc = (driver.load_data)(&mut module, cubin.as_ptr().cast());
            if rc != 0 {
                return Err(format!("cuModuleLoadData: CUresult {rc}").into());
            }
            (driver.unload)(module);
        }
        Ok(())
    };
    let library_calls = |phases: &Phases| {
        phases
            .iter()
            .filter(|(n, _)| *n == "compile: the library's calls")
            .map(|(_, d)| d.as_secs_f64() * 1e3)
            .sum::<f64>()
    };
    let backend_side = |src: &str| -> R<(f64, f64)> {
        let handed = nvrtc.options(&options)?;
        let t = Instant::now();
        let (out, phases) =
            hipjit::phases::measure(|| nvrtc.compile(src.as_bytes(), &options, handed));
        load_module(&out?.code_object)?;
        Ok((t.elapsed().as_secs_f64() * 1e3, library_calls(&phases)))
    };
    let library = nvrtc.loaded()?;
    let library_side = |src: &str| -> R<(f64, f64)> {
        let p = nvrtc.program(src.as_bytes(), &options)?;
        let input = hipjit::compiler::rtc::RtcInput {
            source: &p.source,
            name: "four_k.cu",
            headers: &p.headers,
            include_dirs: &[],
            options: &p.options,
        };
        let t = Instant::now();
        let (out, phases) = hipjit::phases::measure(|| library.compile(&input));
        load_module(&out?.code)?;
        Ok((t.elapsed().as_secs_f64() * 1e3, library_calls(&phases)))
    };
    raw_load(&four_k_source(&format!("warm raw {seed}")))?;
    jit_load(&probe, &four_k_source(&format!("warm jit {seed}")))?;
    let runs = 9;
    // Nine sides, each once a run, the order rotated: raw, `Jit::load` publishing before it
    // returns, publishing in the background (`JitOptions::publish_in_background`, waited for
    // after the clock stops), the raw side under a watch, named as hipjit names it, and
    // after an earlier watch's close, and the three bisecting sides above.
    let mut raw_ms = vec![];
    let (mut watched_ms, mut watched_dirs) = (vec![], 0);
    let (mut named_ms, mut after_close_ms) = (vec![], vec![]);
    let mut sides: [(Vec<f64>, Vec<Phases>); 2] = Default::default();
    let mut command = vec![];
    // Sides 6 to 8: (total ms, the library's calls ms) of the backend alone, the library
    // alone, and the first `Jit` again.
    let mut bisect: [Vec<(f64, f64)>; 3] = Default::default();
    let mut jit_calls = vec![];
    for run in 0..runs {
        for k in 0..9 {
            match (run + k) % 9 {
                6 => bisect[0].push(backend_side(&four_k_source(&format!(
                    "backend {run} {seed}"
                )))?),
                7 => bisect[1].push(library_side(&four_k_source(&format!(
                    "library {run} {seed}"
                )))?),
                8 => {
                    let src = four_k_source(&format!("first jit {run} {seed}"));
                    let (ms, phases, _) = jit_load(&probe, &src)?;
                    probe.flush_cache_writes();
                    bisect[2].push((ms, library_calls(&phases)));
                }
                0 => raw_ms.push(raw_load(&four_k_source(&format!("raw {run} {seed}")))?),
                4 => named_ms.push(raw_named(
                    &four_k_source(&format!("raw named {run} {seed}")),
                    Some(&hipjit_name),
                )?),
                5 => after_close_ms.push(raw_after_close(&four_k_source(&format!(
                    "raw after close {run} {seed}"
                )))?),
                3 => {
                    let (ms, dirs) =
                        raw_watched(&four_k_source(&format!("raw watched {run} {seed}")))?;
                    watched_ms.push(ms);
                    watched_dirs = dirs;
                }
                side => {
                    let background = side == 2;
                    let j = Jit::new(JitOptions {
                        compiler: Some(CompilerChoice::Nvrtc),
                        cache: CacheLocation::Roots(vec![
                            dir.join(format!("root-{run}-{background}"))
                        ]),
                        publish_in_background: background,
                        ..JitOptions::default()
                    })?;
                    let src = four_k_source(&format!("jit {run} {background} {seed}"));
                    let (ms, phases, used) = jit_load(&j, &src)?;
                    command = used;
                    j.flush_cache_writes();
                    jit_calls.push(library_calls(&phases));
                    sides[side - 1].0.push(ms);
                    sides[side - 1].1.push(phases);
                }
            }
        }
    }
    let r = median(&mut raw_ms);
    let (h, b) = (
        median(&mut sides[0].0.clone()),
        median(&mut sides[1].0.clone()),
    );
    println!(
        "BENCH in-process cold compile + load, 4 KiB source, {sm}, medians of {runs} \
         interleaved runs in one process: raw NVRTC + cuModuleLoadData + cuModuleGetFunction \
         (hipjit's options and prelude headers) {r:.2} ms; Jit::load + kernel (new Jit, new \
         cache root) {h:.2} ms: {:.3}x raw; with publish_in_background {b:.2} ms: {:.3}x raw \
         (target <= 1.2)",
        h / r,
        b / r
    );
    println!(
        "BENCH in-process cold compile + load, the raw side again with an inotify watch for \
         opens on each of the toolkit include trees' {watched_dirs} directories (as hipjit's \
         NVRTC compile has; made and closed outside the clock): {:.2} ms, {:.3}x raw",
        median(&mut watched_ms.clone()),
        median(&mut watched_ms) / r
    );
    println!(
        "BENCH in-process cold compile + load, the raw side again: the program named as \
         hipjit names it ({hipjit_name}) {:.2} ms, {:.3}x raw; \
         under a watch made while an earlier instance's is closed on another thread, as \
         hipjit's compile follows the one before it, {:.2} ms, {:.3}x raw",
        median(&mut named_ms.clone()),
        median(&mut named_ms) / r,
        median(&mut after_close_ms.clone()),
        median(&mut after_close_ms) / r
    );
    println!("  Jit::load's command: {}", command.join(" "));
    println!(
        "BENCH in-process cold compile + load, bisected (median ms, and of it NVRTC's own \
         calls): raw {r:.2}; Jit::load, new Jit each run {h:.2} ({:.2}); Jit::load on the first \
         Jit {:.2} ({:.2}); the backend's compile alone {:.2} ({:.2}); the library's \
         NvRtc::compile alone {:.2} ({:.2})",
        median(&mut jit_calls),
        median(&mut bisect[2].iter().map(|p| p.0).collect::<Vec<f64>>()),
        median(&mut bisect[2].iter().map(|p| p.1).collect::<Vec<f64>>()),
        median(&mut bisect[0].iter().map(|p| p.0).collect::<Vec<f64>>()),
        median(&mut bisect[0].iter().map(|p| p.1).collect::<Vec<f64>>()),
        median(&mut bisect[1].iter().map(|p| p.0).collect::<Vec<f64>>()),
        median(&mut bisect[1].iter().map(|p| p.1).collect::<Vec<f64>>()),
    );
    let p = nvrtc.program(four_k_source("x").as_bytes(), &options)?;
    println!(
        "  raw NVRTC: {} ({} in-memory headers)",
        p.options.join(" "),
        p.headers.len()
    );
    for ((totals, split), what) in sides
        .iter()
        .zip(["Jit::load", "Jit::load with publish_in_background"])
    {
        println!("  where {what}'s time goes (medians, ms; \"a: b\" lies inside \"a\"):");
        for (name, ms) in phase_medians(split) {
            println!("    {ms:9.3}  {name}");
        }
        let mut rest: Vec<f64> = split
            .iter()
            .zip(totals)
            .map(|(ph, t)| {
                t - ph
                    .iter()
                    .filter(|(n, _)| !n.contains(": "))
                    .map(|(_, d)| d.as_secs_f64() * 1e3)
                    .sum::<f64>()
            })
            .collect();
        println!("    {:9.3}  outside every phase above", median(&mut rest));
    }
    let _ = std::fs::remove_dir_all(&dir);
    Ok(())
}

fn main() -> R<()> {
    let args: Vec<String> = std::env::args().collect();
    if args.get(1).map(String::as_str) == Some("child") {
        return child(&args[2], &args[3]);
    }
    let (_rt, dev, sm) = open()?;
    if args.get(1).map(String::as_str) == Some("cold") {
        return in_process_cold(&dev, sm);
    }
    for choice in [CompilerChoice::Nvrtc, CompilerChoice::Nvcc] {
        let chosen = jit(choice, None)?.compiler_for(KERNELS, &CompileOptions::for_sm(sm))?;
        let id = chosen.backend.identity();
        println!("{choice}: {} ({})", id.path.display(), id.version_summary());
    }
    println!("device target {sm}");
    checks(&dev, sm)?;

    let exe: PathBuf = std::env::current_exe()?;
    let (mut cold_rtc, mut second_rtc, mut cold_nvcc) = (vec![], vec![], vec![]);
    for run in 0..7 {
        for mode in ["nvrtc", "nvcc"] {
            let out = Command::new(&exe)
                .args([
                    "child",
                    mode,
                    &format!("{}-{run}-{mode}", std::process::id()),
                ])
                .output()?;
            let text = String::from_utf8_lossy(&out.stdout);
            if !out.status.success() {
                return Err(format!(
                    "{mode} child failed: {text} {}",
                    String::from_utf8_lossy(&out.stderr)
                )
                .into());
            }
            let value = |key: &str| -> R<f64> {
                Ok(text
                    .lines()
                    .find_map(|l| l.strip_prefix(key))
                    .ok_or_else(|| format!("{mode} child printed no {key}: {text}"))?
                    .trim()
                    .parse()?)
            };
            if mode == "nvrtc" {
                cold_rtc.push(value("COLD_MS ")?);
                second_rtc.push(value("SECOND_MS ")?);
            } else {
                cold_nvcc.push(value("COLD_MS ")?);
            }
        }
    }
    let (r, s, n) = (
        median(&mut cold_rtc),
        median(&mut second_rtc),
        median(&mut cold_nvcc),
    );
    println!(
        "BENCH Jit::load (compile + load) of a 4 KiB source, fresh process, new disk cache root, \
         medians of 7 interleaved runs: NVRTC with its first dlopen {r:.1} ms ({:.3}x nvcc), NVRTC second compile in the process \
         {s:.1} ms ({:.3}x nvcc, target <= 0.15x), nvcc {n:.1} ms",
        r / n,
        s / n
    );
    in_process_cold(&dev, sm)?;
    println!("== all passed");
    Ok(())
}
