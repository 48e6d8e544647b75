//! End-to-end checks and benchmarks of HIP's NVIDIA platform on a real GPU (scripts/h200.sh
//! runs this on the H200 machine). Every check compares results element by element with values
//! computed here on the host; any failure exits non-zero.
//!
//! `nvidia_e2e` runs everything; `nvidia_e2e disk-hit <cache-dir> module|library` and
//! `nvidia_e2e raw-load <cubin>` are the fresh-process halves of the disk-cache benchmark (the
//! JIT loading through the module API, its default, or the library API), and `disk-hit-steps
//! <cache-dir> module|library` and `raw-library-load <cubin>` the children of its breakdown by
//! step.

use std::error::Error;
use std::ffi::c_void;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use hipjit::args;
use hipjit::cache::disk::DiskCache;
use hipjit::code_object::cubin::Cubin;
use hipjit::compiler::CompileOptions;
use hipjit::cuda::driver::{self, Driver};
use hipjit::device::Device;
use hipjit::event::{Event, EventFlags};
use hipjit::jit::{CacheLocation, Jit, JitOptions, Origin, CUBIN_ARTEFACT};
use hipjit::launch::LaunchConfig;
use hipjit::library::Library;
use hipjit::memory::{DeviceBuffer, DeviceCopy, DeviceMemory, PinnedBuffer};
use hipjit::runtime::{CodeObjectLoader, Platform, Runtime};
use hipjit::stream::{Stream, StreamFlags};

type R<T> = Result<T, Box<dyn Error>>;

const KERNELS: &str = r#"
#include <hip/hip_runtime.h>

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

struct __align__(16) Pair { int a; double b; };

extern "C" __global__ void mixed(char c, double d, float4 f, Pair p, double* out) {
    out[0] = c; out[1] = d; out[2] = f.x; out[3] = f.y; out[4] = f.z; out[5] = f.w;
    out[6] = p.a; out[7] = p.b;
}

extern "C" __global__ void fill(unsigned* out, unsigned value, unsigned n) {
    unsigned i = hipBlockIdx_x * hipBlockDim_x + hipThreadIdx_x;
    if (i < n) out[i] = value + i;
}

extern "C" __global__ void empty() {}
"#;

#[derive(Clone, Copy, Debug, PartialEq)]
#[repr(C, align(16))]
struct Pair {
    a: i32,
    b: f64,
}
// SAFETY: plain C data (an int and a double, padding between them) with CUDA's layout.
unsafe impl DeviceCopy for Pair {}

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

fn mem_free() -> R<usize> {
    let (mut free, mut total) = (0usize, 0usize);
    // SAFETY: valid out pointers; a context is current (the device was bound).
    let rc = unsafe { (drv()?.cuMemGetInfo_v2)(&mut free, &mut total) };
    if rc != 0 {
        return Err(format!("cuMemGetInfo failed: {rc}").into());
    }
    Ok(free)
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

/// hipjit's one JIT with its disk cache in `cache`; the compiler for the device's SM target is
/// what `HIPJIT_COMPILER` names, else Auto's choice (NVRTC where its parity with nvcc was
/// proven).
fn jit(cache: &Path) -> R<Jit> {
    jit_with(cache, true)
}

/// A JIT on `cache`, reading and writing hit memos or not (then every disk hit takes the long
/// way: compiler search and identity, key, manifest).
fn jit_with(cache: &Path, hit_memo: bool) -> R<Jit> {
    Ok(Jit::new(JitOptions {
        cache: CacheLocation::Roots(vec![cache.to_path_buf()]),
        disable_hit_memo: !hit_memo,
        ..JitOptions::default()
    })?)
}

/// No target: the JIT takes the device's SM target.
fn opts() -> CompileOptions {
    CompileOptions::default()
}

fn open() -> R<(Runtime, Device)> {
    let rt = Runtime::load_platform(Platform::Nvidia)?;
    let dev = rt.device(0)?;
    Ok((rt, dev))
}

/// The loader a child is told to use (its fourth argument): `module` or `library`.
fn loader_arg(args: &[String]) -> R<CodeObjectLoader> {
    match args.get(3).map(String::as_str) {
        Some("module") => Ok(CodeObjectLoader::ModuleApi),
        Some("library") => Ok(CodeObjectLoader::LibraryApi),
        other => Err(format!("loader {other:?}: module or library").into()),
    }
}

fn loader_word(l: CodeObjectLoader) -> &'static str {
    match l {
        CodeObjectLoader::ModuleApi => "module",
        CodeObjectLoader::LibraryApi => "library",
    }
}

fn main() -> R<()> {
    let args: Vec<String> = std::env::args().collect();
    match args.get(1).map(String::as_str) {
        Some("disk-hit") => return child_disk_hit(Path::new(&args[2]), loader_arg(&args)?, true),
        Some("disk-hit-long-way") => {
            return child_disk_hit(Path::new(&args[2]), loader_arg(&args)?, false)
        }
        Some("raw-load") => return child_raw_load(Path::new(&args[2])),
        Some("disk-hit-steps") => {
            return child_disk_hit_steps(Path::new(&args[2]), loader_arg(&args)?)
        }
        Some("raw-library-load") => return child_raw_library_load(Path::new(&args[2])),
        _ => {}
    }
    let cache = std::env::var_os("HIPJIT_E2E_CACHE")
        .map(PathBuf::from)
        .unwrap_or_else(|| std::env::temp_dir().join("hipjit-e2e-cache"));
    let _ = std::fs::remove_dir_all(&cache);

    let detected = Runtime::load()?;
    check(
        "platform detection (HIP_PLATFORM unset: no AMD runtime with a device, an NVIDIA driver with one)",
        std::env::var_os("HIP_PLATFORM").is_some() || detected.platform() == Platform::Nvidia,
        format!("Runtime::load() chose {}", detected.platform()),
    )?;
    let (rt, dev) = open()?;
    let p = dev.properties();
    println!(
        "runtime: platform {} path {} version {:?} loader {}",
        rt.platform(),
        rt.path().display(),
        rt.version().map(|v| v.to_string()),
        rt.code_object_loader()
    );
    println!(
        "device 0: {} arch {} sm {:?} SMs {} warp {} smem/block {} B max threads {} global {} MiB",
        p.name,
        p.arch_name,
        dev.sm_target().map(|s| s.to_string()),
        p.compute_units,
        p.wavefront_size,
        p.lds_per_block,
        p.max_threads_per_block,
        p.total_global_mem >> 20
    );
    check(
        "require_library_api",
        rt.require_library_api().is_ok(),
        "all five symbols".into(),
    )?;

    let jit = jit(&cache)?;
    let t = Instant::now();
    let loaded = jit.load(&dev, KERNELS, &opts())?;
    let used = loaded.compiled.compiler();
    println!(
        "compiler: {} {} ({}), because {}",
        used.kind.as_str(),
        used.path.display(),
        used.version,
        used.reason
    );
    println!(
        "compile+load: {:?} in {:.1} ms (compile {:.1} ms), key {}",
        loaded.compiled.origin(),
        t.elapsed().as_secs_f64() * 1e3,
        loaded.compiled.elapsed().as_secs_f64() * 1e3,
        loaded.compiled.key()
    );
    check(
        "first load compiles",
        loaded.compiled.origin() == Origin::Compiler,
        format!("{:?}", loaded.compiled.origin()),
    )?;
    if let Some(want) = std::env::var_os("HIPJIT_COMPILER").filter(|v| v != "auto") {
        check(
            "the compiler HIPJIT_COMPILER names compiled it",
            want.to_str() == Some(used.kind.as_str()),
            format!("{want:?} asked, {} used", used.kind.as_str()),
        )?;
    }
    let again = jit.load(&dev, KERNELS, &opts())?;
    check(
        "second load is a memory hit sharing the library",
        again.compiled.origin() == Origin::Memory
            && std::sync::Arc::ptr_eq(&again.library, &loaded.library),
        format!("{:?}", again.compiled.origin()),
    )?;
    let lib = &loaded.library;
    // The cubin as a plain file, for the raw-driver comparisons: taken from its cache entry.
    let kernels_cubin = cache.join("kernels.cubin");
    {
        let disk = DiskCache::open(&[cache.to_path_buf()])?;
        let entry = disk
            .get(&loaded.compiled.key())
            .entry
            .ok_or("the compiled kernels have no disk-cache entry")?;
        let cubin = entry
            .artefact(CUBIN_ARTEFACT)
            .ok_or("the cache entry holds no cubin")?;
        std::fs::write(&kernels_cubin, cubin)?;
    }

    check(
        "the JIT loads through the module API by default",
        lib.loader() == CodeObjectLoader::ModuleApi,
        format!("{}", lib.loader()),
    )?;
    // Several kernels in one library, enumerated by the driver (through the library API,
    // chosen for this check) and by the reader.
    rt.set_code_object_loader(CodeObjectLoader::LibraryApi)?;
    let by_library =
        Library::load_cubin(&dev, &Cubin::from_bytes(&std::fs::read(&kernels_cubin)?)?);
    rt.set_code_object_loader(CodeObjectLoader::ModuleApi)?;
    let by_library = by_library?;
    let mut names: Vec<&str> = by_library.kernel_names().collect();
    names.sort();
    let count = by_library.runtime_kernel_count()?;
    let mut enumerated: Vec<usize> = by_library
        .enumerated_functions()?
        .ok_or("no library-API enumeration")?
        .into_iter()
        .map(|f| f as usize)
        .collect();
    enumerated.sort();
    let mut by_name = Vec::new();
    for name in &names {
        by_name.push(by_library.kernel(name)?.as_raw() as usize);
    }
    by_name.sort();
    check(
        "several kernels in one library",
        names == ["block_sum", "empty", "fill", "mixed", "saxpy"] && count == Some(5),
        format!("reader {names:?}, cuLibraryGetKernelCount {count:?}"),
    )?;
    check(
        "enumeration gives the kernels looked up by name",
        enumerated == by_name,
        format!(
            "{} functions from cuLibraryEnumerateKernels + cuKernelGetFunction",
            enumerated.len()
        ),
    )?;

    let stream = Stream::new(&dev, StreamFlags::NON_BLOCKING)?;

    // saxpy
    {
        let n = 1u32 << 20;
        let x: Vec<f32> = (0..n).map(|i| i as f32).collect();
        let y0: Vec<f32> = (0..n).map(|i| (i % 7) as f32).collect();
        let dx = DeviceBuffer::from_slice(&dev, &x)?;
        let dy = DeviceBuffer::from_slice(&dev, &y0)?;
        let k = lib.kernel("saxpy")?;
        // SAFETY: saxpy(float, const float*, float*, unsigned).
        unsafe {
            k.launch(
                &stream,
                LaunchConfig::for_num_elems(n, 256),
                &mut args![&2.0f32, &dx, &dy, &n],
            )?
        };
        stream.synchronize()?;
        let y = dy.to_vec()?;
        let bad = (0..n as usize)
            .filter(|&i| y[i] != 2.0 * x[i] + y0[i])
            .count();
        check("saxpy", bad == 0, format!("{n} elements, {bad} wrong"))?;
    }

    // Reduction with dynamic shared memory.
    {
        let n = 1_000_003u32;
        let block = 256u32;
        let input: Vec<i32> = (0..n).map(|i| (i % 1000) as i32 - 500).collect();
        let din = DeviceBuffer::from_slice(&dev, &input)?;
        let blocks = n.div_ceil(block);
        let dout = DeviceBuffer::<i32>::zeroed(&dev, blocks as usize)?;
        let k = lib.kernel("block_sum")?;
        let mut cfg = LaunchConfig::for_num_elems(n, block);
        cfg.dynamic_lds_bytes = block * 4;
        // SAFETY: block_sum(const int*, int*, unsigned) with blockDim ints of dynamic shared memory.
        unsafe { k.launch(&stream, cfg, &mut args![&din, &dout, &n])? };
        stream.synchronize()?;
        let out = dout.to_vec()?;
        let expect: Vec<i32> = input
            .chunks(block as usize)
            .map(|c| c.iter().sum())
            .collect();
        let bad = out.iter().zip(&expect).filter(|(a, b)| a != b).count();
        check(
            "reduction with dynamic shared memory",
            bad == 0 && out.len() == expect.len(),
            format!(
                "{blocks} block sums, {bad} wrong, total {}",
                out.iter().map(|&v| i64::from(v)).sum::<i64>()
            ),
        )?;
    }

    // Mixed argument types.
    {
        let k = lib.kernel("mixed")?;
        let info = k.info().ok_or("no cubin metadata for mixed")?;
        let sizes: Vec<u32> = info.args.iter().map(|a| a.size).collect();
        let offsets: Vec<u32> = info.args.iter().map(|a| a.offset).collect();
        check(
            "cubin parameter layout of mixed",
            sizes == [1, 8, 16, 16, 8] && offsets == [0, 8, 16, 32, 48],
            format!("sizes {sizes:?} offsets {offsets:?}"),
        )?;
        let out = DeviceBuffer::<f64>::zeroed(&dev, 8)?;
        let c = -7i8;
        let d = 3.25f64;
        let f = [1.5f32, -2.5, 3.75, 1e-3];
        let pair = Pair {
            a: 123456,
            b: -0.125,
        };
        // SAFETY: mixed(char, double, float4, Pair, double*), layouts as checked above.
        unsafe {
            k.launch(
                &stream,
                LaunchConfig::for_num_elems(1, 1),
                &mut args![&c, &d, &f, &pair, &out],
            )?
        };
        stream.synchronize()?;
        let got = out.to_vec()?;
        let want = [
            f64::from(c),
            d,
            f64::from(f[0]),
            f64::from(f[1]),
            f64::from(f[2]),
            f64::from(f[3]),
            f64::from(pair.a),
            pair.b,
        ];
        check(
            "mixed argument types (char, double, float4, 16-byte-aligned struct)",
            got == want,
            format!("{got:?}"),
        )?;
        // A wrong argument list is refused before the driver, naming the argument.
        // SAFETY: refused before any launch.
        let err = unsafe {
            k.launch(
                &stream,
                LaunchConfig::for_num_elems(1, 1),
                &mut args![&d, &d, &f, &pair, &out],
            )
        };
        check(
            "argument size checked against the cubin",
            err.is_err(),
            format!("{:?}", err.err().map(|e| e.to_string())),
        )?;
    }

    // Two streams with events and elapsed time.
    {
        let n = 1u32 << 24;
        let s1 = Stream::new(&dev, StreamFlags::NON_BLOCKING)?;
        let s2 = Stream::new(&dev, StreamFlags::NON_BLOCKING)?;
        let b1 = DeviceBuffer::<u32>::zeroed(&dev, n as usize)?;
        let b2 = DeviceBuffer::<u32>::zeroed(&dev, n as usize)?;
        let (e1a, e1b, e2a, e2b) = (
            Event::new(&dev, EventFlags::empty())?,
            Event::new(&dev, EventFlags::empty())?,
            Event::new(&dev, EventFlags::empty())?,
            Event::new(&dev, EventFlags::empty())?,
        );
        let k = lib.kernel("fill")?;
        let cfg = LaunchConfig::for_num_elems(n, 256);
        e1a.record(&s1)?;
        e2a.record(&s2)?;
        // SAFETY: fill(unsigned*, unsigned, unsigned).
        unsafe {
            k.launch(&s1, cfg, &mut args![&b1, &10u32, &n])?;
            k.launch(&s2, cfg, &mut args![&b2, &1000u32, &n])?;
        }
        e1b.record(&s1)?;
        e2b.record(&s2)?;
        e1b.synchronize()?;
        e2b.synchronize()?;
        let (t1, t2) = (e1a.elapsed_ms(&e1b)?, e2a.elapsed_ms(&e2b)?);
        let (v1, v2) = (b1.to_vec()?, b2.to_vec()?);
        let bad = (0..n as usize)
            .filter(|&i| v1[i] != 10 + i as u32 || v2[i] != 1000 + i as u32)
            .count();
        check(
            "two streams with events",
            bad == 0 && t1 > 0.0 && t2 > 0.0 && t1.is_finite() && t2.is_finite(),
            format!("{n} elements each, {bad} wrong; elapsed {t1:.3} ms and {t2:.3} ms"),
        )?;
    }

    occupancy_from_metadata(&dev, lib)?;

    // Cooperative launch (cuLaunchCooperativeKernel), checked against occupancy first.
    {
        let k = lib.kernel("fill")?;
        let per_sm = k.max_active_blocks_per_cu(256, 0)?;
        let sms = dev.properties().compute_units;
        let n = per_sm * sms * 256;
        let buf = DeviceBuffer::<u32>::zeroed(&dev, n as usize)?;
        // SAFETY: fill(unsigned*, unsigned, unsigned); every block resident at once.
        unsafe {
            k.launch_cooperative(
                &stream,
                LaunchConfig::for_num_elems(n, 256),
                &mut args![&buf, &7u32, &n],
            )?
        };
        stream.synchronize()?;
        let v = buf.to_vec()?;
        let bad = (0..n as usize).filter(|&i| v[i] != 7 + i as u32).count();
        // SAFETY: refused before the driver is called.
        let too_large = unsafe {
            k.launch_cooperative(
                &stream,
                LaunchConfig::for_num_elems(n + 256, 256),
                &mut args![&buf, &7u32, &n],
            )
        };
        check(
            "cooperative launch",
            bad == 0 && too_large.is_err(),
            format!(
                "{} blocks ({per_sm} per SM x {sms} SMs, {} registers per thread), {bad} wrong; one block more refused: {}",
                n / 256,
                k.num_registers()?,
                too_large.err().map(|e| e.to_string()).unwrap_or_default()
            ),
        )?;
    }

    // The cubin reader's resources against the driver's own figures for the same kernels
    // (cuFuncGetAttribute NUM_REGS and SHARED_SIZE_BYTES).
    {
        const RESOURCES: &str = r#"
#include <hip/hip_runtime.h>
extern "C" __global__ void tile_sum(float* out, const float* in, int n) {
    __shared__ float tile[1024];
    float acc[64];
    for (int i = 0; i < 64; ++i) acc[i] = in[(threadIdx.x * 64 + i) % n];
    tile[threadIdx.x] = acc[threadIdx.x % 64];
    __syncthreads();
    float s = 0;
    for (int i = 0; i < 64; ++i) s += acc[(i * 7 + n) % 64] * tile[(threadIdx.x + i) % 1024];
    out[blockIdx.x * blockDim.x + threadIdx.x] = s;
}
extern "C" __global__ void dynamic_only(float* out) {
    HIP_DYNAMIC_SHARED(float, d)
    d[threadIdx.x] = 1.0f;
    __syncthreads();
    out[threadIdx.x] = d[(threadIdx.x + 1) % 32];
}
extern "C" __global__ void plain(float* x) { x[threadIdx.x] += 1.0f; }
"#;
        let res = jit.load(&dev, RESOURCES, &opts())?;
        let mut rows = Vec::new();
        let mut same = true;
        for info in res.library.kernels() {
            let k = res.library.kernel(&info.name)?;
            let (regs, lds) = (k.num_registers()?, k.static_lds_bytes());
            same &= regs == info.vgpr_count as i32 && lds == info.group_segment_fixed_size;
            rows.push(format!(
                "{}: registers {} (driver {regs}), shared {} B (driver {lds}), stack frame {} B",
                info.name,
                info.vgpr_count,
                info.group_segment_fixed_size,
                info.private_segment_fixed_size
            ));
        }
        check(
            "cubin resources match the driver's",
            same && rows.len() == 3,
            rows.join("; "),
        )?;
    }

    // Drop order under RAII: memory comes back, unload happens after the last kernel.
    {
        dev.synchronize()?;
        let before = mem_free()?;
        {
            let lib2 =
                Library::load_cubin(&dev, &Cubin::from_bytes(&std::fs::read(&kernels_cubin)?)?)?;
            let k = lib2.kernel("fill")?;
            let s = Stream::new(&dev, StreamFlags::empty())?;
            let big = DeviceBuffer::<u32>::zeroed(&dev, 64 << 20)?;
            let during = mem_free()?;
            let ev = Event::new(&dev, EventFlags::empty())?;
            // SAFETY: fill over the buffer's first 1024 elements.
            unsafe {
                k.launch(
                    &s,
                    LaunchConfig::for_num_elems(1024, 256),
                    &mut args![&big, &1u32, &1024u32],
                )?
            };
            ev.record(&s)?;
            // Dropped in an order that frees the stream and kernel before the work is waited
            // for: the event and the buffer still wait (hipFree synchronizes).
            drop(s);
            drop(k);
            ev.synchronize()?;
            let head = big.to_vec()?;
            check(
                "work survives dropping its stream and kernel",
                head[..1024]
                    .iter()
                    .enumerate()
                    .all(|(i, &v)| v == 1 + i as u32),
                format!(
                    "256 MiB buffer, {} MiB in use while alive",
                    (before - during) >> 20
                ),
            )?;
            drop(big);
            drop(ev);
            drop(lib2);
        }
        dev.synchronize()?;
        let after = mem_free()?;
        check(
            "drop order under RAII",
            after == before,
            format!("free {before} -> {after} bytes"),
        )?;
    }

    // 10,000 load/unload cycles.
    {
        let cubin = Cubin::from_bytes(&std::fs::read(&kernels_cubin)?)?;
        dev.synchronize()?;
        let before = mem_free()?;
        let t = Instant::now();
        let n = 16u32;
        let buf = DeviceBuffer::<u32>::zeroed(&dev, n as usize)?;
        for i in 0..10_000u32 {
            let l = Library::load_cubin(&dev, &cubin)?;
            let k = l.kernel("fill")?;
            if i % 1000 == 0 {
                // SAFETY: fill(unsigned*, unsigned, unsigned) over 16 elements.
                unsafe {
                    k.launch(
                        &stream,
                        LaunchConfig::for_num_elems(n, 32),
                        &mut args![&buf, &i, &n],
                    )?
                };
                stream.synchronize()?;
            }
        }
        let took = t.elapsed();
        let last = buf.to_vec()?;
        drop(buf);
        dev.synchronize()?;
        let after = mem_free()?;
        check(
            "10,000 load/unload cycles",
            after == before && last[3] == 9003,
            format!(
                "free {before} -> {after} bytes, {:.1} us per cycle",
                took.as_secs_f64() * 1e6 / 1e4
            ),
        )?;
    }

    front_door(&dev, &cache, &stream)?;
    stream_ordered_memory(&dev, &jit, lib)?;
    benchmarks(&dev, &jit, lib, &stream, &cache, &kernels_cubin)?;
    println!("ALL CHECKS PASSED");
    Ok(())
}

/// A Latin-1 source (one byte 0xa9 in a comment, not UTF-8) using a C++20 feature
/// (`consteval`) and a macro given as an extra flag.
const FRONT_DOOR: &[u8] = b"// \xa9 2026, Latin-1\n\
    #include <hip/hip_runtime.h>\n\
    consteval long long sq(long long x) { return x * x; }\n\
    extern \"C\" __global__ void front(long long* out) {\n\
        out[0] = __cplusplus;\n\
        out[1] = SCALE * sq(3);\n\
    }\n";

/// What the command line's front door passes reaches the GPU code: the source as bytes, the
/// standard (CompileOptions::std), a define (SCALE=3).
/// Occupancy from a cubin's metadata (`Kernel::metadata_occupancy`, NVIDIA's occupancy rules
/// over registers, shared memory and block size) against the driver's
/// `cuOccupancyMaxActiveBlocksPerMultiprocessor` for the same loaded kernel: the kernels of
/// `lib` (compiled here for the device) and, on an sm_90 device, those of
/// tests/data/code-objects/cuda/occupancy-sm_90.cubin (few registers, 106 registers, 32 KiB
/// of static shared memory), at every block size of 32..=1024 and dynamic shared memory of
/// 0, 4 KiB and 12 KiB.
fn occupancy_from_metadata(dev: &Device, lib: &Library) -> R<()> {
    let mut libs = vec![lib.clone()];
    if dev.sm_target().map(|t| t.sm) == Some(90) {
        libs.push(Library::load_bytes(
            dev,
            include_bytes!("../tests/data/code-objects/cuda/occupancy-sm_90.cubin"),
        )?);
    }
    let (mut compared, mut differ) = (0, Vec::new());
    for lib in &libs {
        for info in lib.kernels() {
            let k = lib.kernel(&info.name)?;
            for block in (1..=32).map(|w| w * 32) {
                for lds in [0u32, 4096, 12288] {
                    let driver = k.max_active_blocks_per_cu(block, lds as usize)?;
                    let ours = k.metadata_occupancy(block, lds).map(|o| o.blocks_per_cu);
                    compared += 1;
                    if ours.as_ref().ok() != Some(&driver) {
                        differ.push(format!(
                            "{} block {block} lds {lds}: driver {driver}, metadata {ours:?}",
                            info.name
                        ));
                    }
                }
            }
        }
    }
    check(
        "occupancy from cubin metadata = cuOccupancyMaxActiveBlocksPerMultiprocessor",
        differ.is_empty(),
        format!(
            "{compared} (kernel, block, dynamic shared) cases on {}, {} differ{}",
            dev.arch_name(),
            differ.len(),
            differ
                .iter()
                .take(8)
                .map(|d| format!("\n  {d}"))
                .collect::<String>()
        ),
    )
}

fn front_door(dev: &Device, cache: &Path, stream: &Stream) -> R<()> {
    let jit = jit(cache)?;
    let options = CompileOptions {
        std: hipjit::compiler::CxxStd::Cxx20,
        ..opts()
    }
    .define("SCALE", "3");
    let loaded = jit.load(dev, FRONT_DOOR, &options)?;
    let out = DeviceBuffer::<i64>::zeroed(dev, 2)?;
    let k = loaded.library.kernel("front")?;
    // SAFETY: front(long long*) writes two elements.
    unsafe { k.launch(stream, LaunchConfig::for_num_elems(1, 1), &mut args![&out])? };
    stream.synchronize()?;
    let got = out.to_vec()?;
    check(
        "C++20, an extra flag and a Latin-1 source reach the GPU code",
        got == [202002, 27],
        format!("__cplusplus {}, SCALE * sq(3) = {}", got[0], got[1]),
    )
}

/// A kernel that spins for `cycles` clock cycles, then writes 1 to `done[0]`.
const SPIN: &str = r#"
#include <hip/hip_runtime.h>
extern "C" __global__ void spin(long long cycles, unsigned* done) {
    long long start = clock64();
    while (clock64() - start < cycles) {}
    done[0] = 1;
}
"#;

/// Stream-ordered allocation, copies on two streams with an event dependency, views as kernel
/// arguments, and a drop that does not wait for a kernel running on another stream.
fn stream_ordered_memory(dev: &Device, jit: &Jit, lib: &Library) -> R<()> {
    check(
        "stream-ordered allocator present (cuMemAllocAsync, cuMemFreeAsync)",
        dev.runtime().has_stream_ordered_alloc(),
        String::new(),
    )?;
    // Upload on stream a, compute on stream b after an event recorded on a, read back on b.
    {
        let n = 1u32 << 24;
        let a = Stream::new(dev, StreamFlags::NON_BLOCKING)?;
        let b = Stream::new(dev, StreamFlags::NON_BLOCKING)?;
        let x: Vec<f32> = (0..n).map(|i| (i % 1013) as f32).collect();
        let pinned = PinnedBuffer::from_slice(dev, &x)?;
        let mut dx = DeviceBuffer::<f32>::alloc_async(&a, n as usize)?;
        let upload = pinned.copy_to_device_async(&mut dx, &a)?;
        let uploaded = Event::new(dev, EventFlags::DISABLE_TIMING)?;
        uploaded.record(&a)?;
        let mut dy = DeviceBuffer::<f32>::zeroed_async(&b, n as usize)?;
        // Everything queued on b from here waits for the allocation and the upload on a.
        b.wait_event(&uploaded)?;
        let k = lib.kernel("saxpy")?;
        // SAFETY: saxpy(float, const float*, float*, unsigned) writing y; x was allocated on
        // a, whose work b waits for, and its free is ordered after b's kernel below.
        unsafe {
            k.launch(
                &b,
                LaunchConfig::for_num_elems(n, 256),
                &mut args![&2.0f32, &dx, &mut dy, &n],
            )?
        };
        dx.free_after(&b)?;
        // A view as a written argument: the second half of y is overwritten with 7 + i.
        let half = n / 2;
        let fill = lib.kernel("fill")?;
        {
            let mut upper = dy.slice_mut(half as usize..)?;
            // SAFETY: fill(unsigned*, unsigned, unsigned) over the view's `half` floats, read
            // back as bits below.
            unsafe {
                fill.launch(
                    &b,
                    LaunchConfig::for_num_elems(half, 256),
                    &mut args![&mut upper, &7u32, &half],
                )?
            };
        }
        let y = dy.to_vec_on(&b)?;
        let pinned = upload.wait()?;
        let bad = (0..n as usize)
            .filter(|&i| {
                if i < half as usize {
                    y[i] != 2.0 * x[i]
                } else {
                    y[i].to_bits() != 7 + (i - half as usize) as u32
                }
            })
            .count();
        drop((dx, dy, pinned));
        check(
            "async copies and allocation on two streams with an event dependency",
            bad == 0,
            format!("{n} elements (half saxpy, half a view filled), {bad} wrong"),
        )?;
    }
    // Dropping a stream-ordered buffer while a kernel runs on another stream.
    {
        let spin = jit.load(dev, SPIN, &opts())?;
        let k = spin.library.kernel("spin")?;
        let busy = Stream::new(dev, StreamFlags::NON_BLOCKING)?;
        let other = Stream::new(dev, StreamFlags::NON_BLOCKING)?;
        // About 200 ms of clock cycles.
        let cycles = i64::from(dev.properties().clock_khz) * 200;
        let mut done = DeviceBuffer::<u32>::zeroed(dev, 1)?;
        let bytes = 256usize << 20;
        let mut run = |drop_it: &mut dyn FnMut() -> R<()>| -> R<(f64, bool, f64)> {
            done.memset(0)?;
            let t0 = Instant::now();
            // SAFETY: spin(long long, unsigned*).
            unsafe {
                k.launch(
                    &busy,
                    LaunchConfig::for_num_elems(1, 1),
                    &mut args![&cycles, &mut done],
                )?
            };
            let t = Instant::now();
            drop_it()?;
            let dropped = t.elapsed().as_secs_f64() * 1e3;
            let running = !busy.query()?;
            busy.synchronize()?;
            Ok((dropped, running, t0.elapsed().as_secs_f64() * 1e3))
        };
        let ordered = DeviceBuffer::<u8>::zeroed_async(&other, bytes)?;
        other.synchronize()?;
        let mut ordered = Some(ordered);
        let (async_ms, async_running, kernel_ms) = run(&mut || {
            drop(ordered.take());
            Ok(())
        })?;
        let plain = DeviceBuffer::<u8>::zeroed(dev, bytes)?;
        let mut plain = Some(plain);
        let (sync_ms, sync_running, _) = run(&mut || {
            drop(plain.take());
            Ok(())
        })?;
        check(
            "no device-wide stall on drop: a stream-ordered buffer's drop returns while a kernel runs on another stream",
            async_running && done.to_vec()? == [1],
            format!(
                "256 MiB, drop {async_ms:.3} ms (cuMemFreeAsync) with the {kernel_ms:.0} ms kernel still running: {async_running}; \
                 baseline drop of a cuMemAlloc buffer {sync_ms:.3} ms (cuMemFree), kernel still running after it: {sync_running}"
            ),
        )?;
    }
    Ok(())
}

fn benchmarks(
    dev: &Device,
    jit: &Jit,
    lib: &Library,
    stream: &Stream,
    cache: &Path,
    cubin_path: &Path,
) -> R<()> {
    let d = drv()?;
    // 1. Kernel::launch of an empty kernel vs raw cuLaunchKernel.
    let k = lib.kernel("empty")?;
    let f = k.as_raw() as *mut c_void;
    let s = stream.as_raw() as *mut c_void;
    let cfg = LaunchConfig::for_num_elems(1, 1);
    let (mut raw, mut ours) = (Vec::with_capacity(100_000), Vec::with_capacity(100_000));
    for _round in 0..100 {
        for _ in 0..1000 {
            let t = Instant::now();
            // SAFETY: the empty kernel takes no parameters; live function and stream.
            let rc = unsafe {
                (d.cuLaunchKernel)(
                    f,
                    1,
                    1,
                    1,
                    1,
                    1,
                    1,
                    0,
                    s,
                    std::ptr::null_mut(),
                    std::ptr::null_mut(),
                )
            };
            raw.push(t.elapsed().as_secs_f64() * 1e9);
            if rc != 0 {
                return Err(format!("cuLaunchKernel: {rc}").into());
            }
        }
        stream.synchronize()?;
        for _ in 0..1000 {
            let t = Instant::now();
            // SAFETY: the empty kernel takes no arguments.
            unsafe { k.launch(stream, cfg, &mut args![])? };
            ours.push(t.elapsed().as_secs_f64() * 1e9);
        }
        stream.synchronize()?;
    }
    let (mr, mo) = (median(&mut raw), median(&mut ours));
    println!(
        "BENCH launch: Kernel::launch median {mo:.0} ns vs raw cuLaunchKernel median {mr:.0} ns over 100000 each: ratio {:.3} (target <= 1.05)",
        mo / mr
    );

    // 2. In-memory cache hit for a 4 KiB source.
    let mut src = String::from("#include <hip/hip_runtime.h>\nextern \"C\" __global__ void four_k(float* x) { x[hipThreadIdx_x] += 1.0f; }\n");
    while src.len() < 4096 {
        src.push_str("// padding to make the source 4 KiB long, as a generated kernel would be\n");
    }
    src.truncate(4096);
    let first = jit.load(dev, &src, &opts())?;
    let mut hit = Vec::with_capacity(100_000);
    let mut hit_kernel = Vec::with_capacity(10_000);
    for _ in 0..100_000 {
        let t = Instant::now();
        let l = jit.load(dev, &src, &opts())?;
        hit.push(t.elapsed().as_secs_f64() * 1e9);
        if l.compiled.origin() != Origin::Memory {
            return Err("memory cache missed".into());
        }
    }
    for _ in 0..10_000 {
        let t = Instant::now();
        let l = jit.load(dev, &src, &opts())?;
        let kk = l.library.kernel("four_k")?;
        hit_kernel.push(t.elapsed().as_secs_f64() * 1e9);
        drop(kk);
    }
    println!(
        "BENCH memory hit ({} B source, first {:?} {:.1} ms): to Arc<Library> median {:.0} ns; to a launchable Kernel (plus cuLibraryGetKernel, cuKernelGetFunction, 2 attributes) median {:.0} ns (target < 1000 ns)",
        src.len(),
        first.compiled.origin(),
        first.compiled.elapsed().as_secs_f64() * 1e3,
        median(&mut hit),
        median(&mut hit_kernel)
    );

    // 3. Disk-cache hit in a fresh process vs reading the cubin and cuModuleLoadData, with the
    // JIT loading through the module API (its default) and through the library API. The hit
    // memo trusts only files older than its margin (a user's later job finds them so): the
    // entry just written is let age, and a first child of each loader remembers the hit.
    let exe = std::env::current_exe()?;
    std::thread::sleep(hipjit::jit::hit_memo::MIN_AGE + std::time::Duration::from_millis(200));
    for l in ["module", "library"] {
        let out = Command::new(&exe)
            .args([
                std::ffi::OsStr::new("disk-hit"),
                cache.as_os_str(),
                l.as_ref(),
            ])
            .output()?;
        if !out.status.success() {
            return Err(format!(
                "the first disk-hit child failed: {}",
                String::from_utf8_lossy(&out.stderr)
            )
            .into());
        }
    }
    let modes: [(&str, &Path, Option<CodeObjectLoader>); 4] = [
        ("disk-hit", cache, Some(CodeObjectLoader::ModuleApi)),
        ("disk-hit", cache, Some(CodeObjectLoader::LibraryApi)),
        ("raw-load", cubin_path, None),
        (
            "disk-hit-long-way",
            cache,
            Some(CodeObjectLoader::ModuleApi),
        ),
    ];
    let mut us: Vec<Vec<f64>> = vec![Vec::new(); modes.len()];
    let mut proc_ms: Vec<Vec<f64>> = vec![Vec::new(); modes.len()];
    // (mode index, split name) -> the hipjit children's split of the same clock.
    let mut splits: Vec<((usize, String), Vec<f64>)> = Vec::new();
    for _ in 0..7 {
        for (i, (mode, arg, loader)) in modes.iter().enumerate() {
            let t = Instant::now();
            let mut cmd = Command::new(&exe);
            cmd.arg(mode).arg(arg);
            if let Some(l) = loader {
                cmd.arg(loader_word(*l));
            }
            let out = cmd.output()?;
            proc_ms[i].push(t.elapsed().as_secs_f64() * 1e3);
            let text = String::from_utf8_lossy(&out.stdout);
            if !out.status.success() {
                return Err(format!(
                    "{mode} child failed: {text} {}",
                    String::from_utf8_lossy(&out.stderr)
                )
                .into());
            }
            let v: f64 = text
                .lines()
                .find_map(|l| l.strip_prefix("FIRST_LAUNCH_US "))
                .ok_or_else(|| format!("{mode} child printed no time: {text}"))?
                .trim()
                .parse()?;
            us[i].push(v);
            for l in text.lines().filter_map(|l| l.strip_prefix("SPLIT ")) {
                let (name, v) = l.rsplit_once(' ').ok_or("a SPLIT line without a time")?;
                let v: f64 = v.parse()?;
                match splits.iter_mut().find(|((j, n), _)| *j == i && n == name) {
                    Some((_, vs)) => vs.push(v),
                    None => splits.push(((i, name.to_owned()), vec![v])),
                }
            }
        }
    }
    // What one system call costs on this machine: a hit checks each file it depends on with
    // one `stat`, so this bounds what any exact hit can cost.
    let mut stat_ns = Vec::with_capacity(2000);
    for _ in 0..2000 {
        let t = Instant::now();
        std::hint::black_box(std::fs::metadata(cache)?);
        stat_ns.push(t.elapsed().as_secs_f64() * 1e9);
    }
    println!(
        "BENCH one stat(2) of the cache root on this machine: median {:.0} ns (2000 calls)",
        median(&mut stat_ns)
    );
    let mr = median(&mut us[2]);
    let pr = median(&mut proc_ms[2]);
    for (i, api) in [
        (0, "module API (cuModuleLoadData, the default)"),
        (1, "library API (cuLibraryLoadData)"),
        (
            3,
            "module API, the long way (no hit memo: compiler search and identity, key, manifest)",
        ),
    ] {
        let mo = median(&mut us[i]);
        println!(
            "BENCH disk hit, fresh process, after context creation to first launch done, hipjit loading through the {api}: hipjit (compiler identity from the per-user memo, key, read, parse, load, kernel, launch) median {mo:.0} us vs read + cuModuleLoadData + cuModuleGetFunction + launch median {mr:.0} us: ratio {:.2} (target <= 1.5); whole process {:.0} ms vs {pr:.0} ms (7 runs each)",
            mo / mr,
            median(&mut proc_ms[i]),
        );
        let parts: Vec<String> = splits
            .iter_mut()
            .filter(|((j, _), _)| *j == i)
            .map(|((_, name), v)| format!("{name} {:.0}", median(v)))
            .collect();
        println!(
            "BENCH disk hit, fresh process, the same clock split, hipjit loading through the {api} (median us of 7): {}",
            parts.join("; ")
        );
    }
    let raw: Vec<String> = splits
        .iter_mut()
        .filter(|((j, _), _)| *j == 2)
        .map(|((_, name), v)| format!("{name} {:.0}", median(v)))
        .collect();
    println!(
        "BENCH disk hit, fresh process, the direct path's split (median us of 7): {}",
        raw.join("; ")
    );
    disk_hit_steps(&exe, cache, cubin_path)
}

/// Where the fresh-process disk hit goes: 7 fresh processes of each of three children, each
/// printing `STEP name us` lines (timed after context creation, as above), medians per step.
/// hipjit's path is taken one step at a time (each step a public call, so the key is computed
/// three times: the differences give the manifest check and the entry read), once loading
/// through the module API (hipjit's default on NVIDIA) and once through the library API; the
/// raw paths are the module API (`cuModuleLoadData`) and the library API (`cuLibraryLoadData`)
/// on the same cubin.
fn disk_hit_steps(exe: &Path, cache: &Path, cubin_path: &Path) -> R<()> {
    let mut steps: Vec<(String, Vec<f64>)> = Vec::new();
    for _ in 0..7 {
        for (mode, arg, loader) in [
            ("disk-hit-steps", cache, Some("module")),
            ("disk-hit-steps", cache, Some("library")),
            ("raw-load", cubin_path, None),
            ("raw-library-load", cubin_path, None),
        ] {
            let out = Command::new(exe).arg(mode).arg(arg).args(loader).output()?;
            let text = String::from_utf8_lossy(&out.stdout);
            if !out.status.success() {
                return Err(format!(
                    "{mode} child failed: {text} {}",
                    String::from_utf8_lossy(&out.stderr)
                )
                .into());
            }
            for l in text.lines() {
                let Some(rest) = l.strip_prefix("STEP ") else {
                    continue;
                };
                let (name, us) = rest.rsplit_once(' ').ok_or("a STEP line without a time")?;
                let name = match loader {
                    Some(l) => format!("{mode} {l}: {name}"),
                    None => format!("{mode}: {name}"),
                };
                let us: f64 = us.parse()?;
                match steps.iter_mut().find(|(n, _)| *n == name) {
                    Some((_, v)) => v.push(us),
                    None => steps.push((name, vec![us])),
                }
            }
        }
    }
    let mut m = |name: &str| -> f64 {
        steps
            .iter_mut()
            .find(|(n, _)| n == name)
            .map_or(f64::NAN, |(_, v)| median(v))
    };
    for l in ["module", "library"] {
        let (new, compiler, direct) = (
            m(&format!("disk-hit-steps {l}: Jit::new")),
            m(&format!(
                "disk-hit-steps {l}: compiler found and identity checked"
            )),
            m(&format!("disk-hit-steps {l}: direct key")),
        );
        let (key, compile) = (
            m(&format!("disk-hit-steps {l}: direct key + manifest check")),
            m(&format!("disk-hit-steps {l}: compile (disk hit)")),
        );
        let (load, kernel, launch) = (
            m(&format!("disk-hit-steps {l}: load")),
            m(&format!("disk-hit-steps {l}: kernel")),
            m(&format!("disk-hit-steps {l}: launch + synchronize")),
        );
        println!(
            "BENCH disk hit steps, hipjit loading through the {l} API (median us of 7 fresh processes): Jit::new {new:.0}; compiler found + identity checked {compiler:.0}; direct key {direct:.0}; manifest check {:.0}; entry read + verify + parse {:.0}; load {load:.0}; kernel {kernel:.0}; launch + synchronize {launch:.0}; host steps (Jit::new + compiler + compile) {:.0}; total {:.0}",
            key - direct,
            compile - key,
            new + compiler + compile,
            new + compiler + compile + load + kernel + launch,
        );
    }
    let (r_read, r_load, r_func, r_launch) = (
        m("raw-load: read"),
        m("raw-load: cuModuleLoadData"),
        m("raw-load: cuModuleGetFunction"),
        m("raw-load: launch + synchronize"),
    );
    let (l_read, l_load, l_func, l_launch) = (
        m("raw-library-load: read"),
        m("raw-library-load: cuLibraryLoadData"),
        m("raw-library-load: cuLibraryGetKernel + cuKernelGetFunction"),
        m("raw-library-load: launch + synchronize"),
    );
    println!(
        "BENCH disk hit steps, raw module API: read {r_read:.0}; cuModuleLoadData {r_load:.0}; cuModuleGetFunction {r_func:.0}; launch + synchronize {r_launch:.0}"
    );
    println!(
        "BENCH disk hit steps, raw library API: read {l_read:.0}; cuLibraryLoadData {l_load:.0}; cuLibraryGetKernel + cuKernelGetFunction {l_func:.0}; launch + synchronize {l_launch:.0}"
    );
    Ok(())
}

/// Prints `STEP name us` for the time since `*t`, and restarts `*t`.
fn step(t: &mut Instant, name: &str) {
    println!("STEP {name} {:.1}", t.elapsed().as_secs_f64() * 1e6);
    *t = Instant::now();
}

/// hipjit's disk hit one public call at a time (see [`disk_hit_steps`]), loading through
/// `loader`.
fn child_disk_hit_steps(cache: &Path, loader: CodeObjectLoader) -> R<()> {
    let (rt, dev) = open()?;
    rt.set_code_object_loader(loader)?;
    dev.synchronize()?;
    let s = Stream::new(&dev, StreamFlags::NON_BLOCKING)?;
    let o = CompileOptions::for_sm(dev.sm_target().ok_or("no SM target")?);
    let mut t = Instant::now();
    // The long way, each step of it.
    let jit = jit_with(cache, false)?;
    step(&mut t, "Jit::new");
    jit.compiler_for(KERNELS, &o)?;
    step(&mut t, "compiler found and identity checked");
    jit.source_key(KERNELS, &o)?;
    step(&mut t, "direct key");
    // None only without a manifest, in which case the compile below is no disk hit either
    // (and says so).
    let _ = jit.key(KERNELS, &o)?;
    step(&mut t, "direct key + manifest check");
    let compiled = jit.compile(KERNELS, &o)?;
    step(&mut t, "compile (disk hit)");
    if compiled.origin() != Origin::Disk {
        return Err(format!("expected a disk hit, got {:?}", compiled.origin()).into());
    }
    let lib = compiled
        .artefact_for(&dev)
        .ok_or("no artefact for the device")?
        .load(&dev)?;
    step(&mut t, "load");
    let k = lib.kernel("empty")?;
    step(&mut t, "kernel");
    // SAFETY: no arguments.
    unsafe { k.launch(&s, LaunchConfig::for_num_elems(1, 1), &mut args![])? };
    s.synchronize()?;
    step(&mut t, "launch + synchronize");
    // A disk hit finds the in-process compiler (Auto's NVRTC) from the per-user memo of its
    // search: libnvrtc is never loaded into this process.
    let maps = std::fs::read_to_string("/proc/self/maps")?;
    if let Some(line) = maps.lines().find(|l| l.contains("libnvrtc")) {
        return Err(format!("a disk hit loaded NVRTC: {line}").into());
    }
    Ok(())
}

/// The library API on the cubin, as hipjit loads it: read, `cuLibraryLoadData`,
/// `cuLibraryGetKernel` + `cuKernelGetFunction`, a launch.
fn child_raw_library_load(cubin: &Path) -> R<()> {
    let (_rt, dev) = open()?;
    dev.synchronize()?;
    let d = drv()?;
    let load = d.cuLibraryLoadData.ok_or("no cuLibraryLoadData")?;
    let get = d.cuLibraryGetKernel.ok_or("no cuLibraryGetKernel")?;
    let func = d.cuKernelGetFunction.ok_or("no cuKernelGetFunction")?;
    let unload = d.cuLibraryUnload.ok_or("no cuLibraryUnload")?;
    let s = Stream::new(&dev, StreamFlags::NON_BLOCKING)?;
    let mut t = Instant::now();
    let bytes = std::fs::read(cubin)?;
    step(&mut t, "read");
    let (mut lib, mut kern, mut f): (*mut c_void, *mut c_void, *mut c_void) = (
        std::ptr::null_mut(),
        std::ptr::null_mut(),
        std::ptr::null_mut(),
    );
    // SAFETY: complete cubin image, no options, valid out pointers, NUL-terminated name, live
    // stream.
    unsafe {
        let rc = load(
            &mut lib,
            bytes.as_ptr() as *const c_void,
            std::ptr::null_mut(),
            std::ptr::null_mut(),
            0,
            std::ptr::null_mut(),
            std::ptr::null_mut(),
            0,
        );
        if rc != 0 {
            return Err(format!("cuLibraryLoadData {rc}").into());
        }
        step(&mut t, "cuLibraryLoadData");
        let rc = get(&mut kern, lib, c"empty".as_ptr());
        if rc != 0 {
            return Err(format!("cuLibraryGetKernel {rc}").into());
        }
        let rc = func(&mut f, kern);
        if rc != 0 {
            return Err(format!("cuKernelGetFunction {rc}").into());
        }
        step(&mut t, "cuLibraryGetKernel + cuKernelGetFunction");
        let rc = (d.cuLaunchKernel)(
            f,
            1,
            1,
            1,
            1,
            1,
            1,
            0,
            s.as_raw() as *mut c_void,
            std::ptr::null_mut(),
            std::ptr::null_mut(),
        );
        if rc != 0 {
            return Err(format!("cuLaunchKernel {rc}").into());
        }
    }
    s.synchronize()?;
    step(&mut t, "launch + synchronize");
    // SAFETY: the library loaded above; no function of it is used after.
    unsafe { unload(lib) };
    Ok(())
}

/// Minor page faults of the process so far (`getrusage`).
fn minor_faults() -> i64 {
    // SAFETY: an all-zero rusage is valid; getrusage fills it.
    unsafe {
        let mut r: libc::rusage = std::mem::zeroed();
        libc::getrusage(libc::RUSAGE_SELF, &mut r);
        r.ru_minflt
    }
}

fn child_disk_hit(cache: &Path, loader: CodeObjectLoader, hit_memo: bool) -> R<()> {
    let (rt, dev) = open()?;
    rt.set_code_object_loader(loader)?;
    dev.synchronize()?;
    let s = Stream::new(&dev, StreamFlags::NON_BLOCKING)?;
    let faults = minor_faults();
    // The split is printed after the clock stops: nothing but the path itself is timed.
    let t = Instant::now();
    let jit = jit_with(cache, hit_memo)?;
    let t_new = t.elapsed();
    let (loaded, phases) = hipjit::phases::measure(|| jit.load(&dev, KERNELS, &opts()));
    let loaded = loaded?;
    let t_load = t.elapsed();
    let k = loaded.library.kernel("empty")?;
    let t_kernel = t.elapsed();
    // SAFETY: no arguments.
    unsafe { k.launch(&s, LaunchConfig::for_num_elems(1, 1), &mut args![])? };
    s.synchronize()?;
    let total = t.elapsed();
    if loaded.compiled.origin() != Origin::Disk {
        return Err(format!("expected a disk hit, got {:?}", loaded.compiled.origin()).into());
    }
    println!("FIRST_LAUNCH_US {:.1}", total.as_secs_f64() * 1e6);
    let us = |d: std::time::Duration| d.as_secs_f64() * 1e6;
    println!("SPLIT Jit::new {:.1}", us(t_new));
    println!("SPLIT Jit::load {:.1}", us(t_load - t_new));
    // Jit::load's own split (`hipjit::phases`): the hit memo's steps and the load.
    for (name, took) in phases {
        if let Some(sub) = name.strip_prefix("frozen bundle and hit memo: ") {
            println!("SPLIT Jit::load: {sub} {:.1}", us(took));
        } else if name == "loading on the device" {
            println!("SPLIT Jit::load: {name} {:.1}", us(took));
        }
    }
    println!("SPLIT kernel {:.1}", us(t_kernel - t_load));
    println!("SPLIT launch + synchronize {:.1}", us(total - t_kernel));
    println!("SPLIT minor page faults {}", minor_faults() - faults);
    println!(
        "SPLIT served by the hit memo (1 yes, 0 no) {}",
        jit.stats().remembered_hits
    );
    // The same disk hit again in this process through a new `Jit` (its memory cache empty):
    // the same system calls, files and driver load, with hipjit's code and heap already touched.
    // What the first costs beyond it is the first run of that code in a fresh process.
    let faults = minor_faults();
    let t = Instant::now();
    let again = jit_with(cache, hit_memo)?;
    let loaded_again = again.load(&dev, KERNELS, &opts())?;
    let t_again = t.elapsed();
    if loaded_again.compiled.origin() != Origin::Disk {
        return Err(format!(
            "expected a disk hit again, got {:?}",
            loaded_again.compiled.origin()
        )
        .into());
    }
    println!(
        "SPLIT again (a new Jit in this process): Jit::new + Jit::load {:.1}",
        us(t_again)
    );
    println!("SPLIT again: minor page faults {}", minor_faults() - faults);
    // And once more, one piece at a time: the host side of the hit (a new `Jit`, its
    // `compile`: the memo or the long way, the entry read and verified), hipjit's load of the
    // cubin (`Library::load_cubin`) against the driver's own `cuModuleLoadData` of the same
    // bytes, and the kernel lookup.
    let t = Instant::now();
    let third = jit_with(cache, hit_memo)?;
    let t_new = t.elapsed();
    let mut o = opts();
    o.sm_targets = vec![dev.sm_target().ok_or("no SM target")?];
    let compiled = third.compile(KERNELS, &o)?;
    let t_compile = t.elapsed();
    let elf = compiled.artefacts()[0].elf();
    let cubin = Cubin::from_bytes(elf)?;
    let t = Instant::now();
    let lib = Library::load_cubin(&dev, &cubin)?;
    let t_load = t.elapsed();
    let _k = lib.kernel("empty")?;
    let t_kernel = t.elapsed();
    let d = drv()?;
    let mut m: *mut c_void = std::ptr::null_mut();
    let t = Instant::now();
    // SAFETY: a complete cubin image and a valid out pointer.
    let rc = unsafe { (d.cuModuleLoadData)(&mut m, elf.as_ptr() as *const c_void) };
    let t_raw = t.elapsed();
    if rc != 0 {
        return Err(format!("cuModuleLoadData {rc}").into());
    }
    // SAFETY: the module just loaded; nothing of it is used.
    unsafe { (d.cuModuleUnload)(m) };
    println!("SPLIT again, by piece: Jit::new {:.1}", us(t_new));
    println!(
        "SPLIT again, by piece: Jit::compile (disk hit) {:.1}",
        us(t_compile - t_new)
    );
    println!(
        "SPLIT again, by piece: Library::load_cubin {:.1}",
        us(t_load)
    );
    println!(
        "SPLIT again, by piece: library.kernel {:.1}",
        us(t_kernel - t_load)
    );
    println!(
        "SPLIT again, by piece: raw cuModuleLoadData of the same bytes {:.1}",
        us(t_raw)
    );
    Ok(())
}

fn child_raw_load(cubin: &Path) -> R<()> {
    let (_rt, dev) = open()?;
    dev.synchronize()?;
    let d = drv()?;
    let s = Stream::new(&dev, StreamFlags::NON_BLOCKING)?;
    // Each step's time is kept and printed after the clock stops, as hipjit's split is.
    let mut steps: [(&str, f64); 4] = [("", 0.0); 4];
    let mut at = 0;
    let mut mark = |st: &mut Instant, name: &'static str| {
        steps[at] = (name, st.elapsed().as_secs_f64() * 1e6);
        at += 1;
        *st = Instant::now();
    };
    let faults = minor_faults();
    let t = Instant::now();
    let mut st = Instant::now();
    let bytes = std::fs::read(cubin)?;
    mark(&mut st, "read");
    let mut m: *mut c_void = std::ptr::null_mut();
    let mut f: *mut c_void = std::ptr::null_mut();
    // SAFETY: complete cubin image, valid out pointers, NUL-terminated name, live stream.
    unsafe {
        let rc = (d.cuModuleLoadData)(&mut m, bytes.as_ptr() as *const c_void);
        if rc != 0 {
            return Err(format!("cuModuleLoadData {rc}").into());
        }
        mark(&mut st, "cuModuleLoadData");
        let rc = (d.cuModuleGetFunction)(&mut f, m, c"empty".as_ptr());
        if rc != 0 {
            return Err(format!("cuModuleGetFunction {rc}").into());
        }
        mark(&mut st, "cuModuleGetFunction");
        let rc = (d.cuLaunchKernel)(
            f,
            1,
            1,
            1,
            1,
            1,
            1,
            0,
            s.as_raw() as *mut c_void,
            std::ptr::null_mut(),
            std::ptr::null_mut(),
        );
        if rc != 0 {
            return Err(format!("cuLaunchKernel {rc}").into());
        }
    }
    s.synchronize()?;
    mark(&mut st, "launch + synchronize");
    let total = t.elapsed().as_secs_f64() * 1e6;
    let faults = minor_faults() - faults;
    for (name, us) in steps {
        println!("STEP {name} {us:.1}");
    }
    println!("FIRST_LAUNCH_US {total:.1}");
    println!("SPLIT minor page faults {faults}");
    // The same read + load + function again in this process (hipjit's "again" counterpart).
    let t = Instant::now();
    let bytes = std::fs::read(cubin)?;
    let mut m2: *mut c_void = std::ptr::null_mut();
    // SAFETY: complete cubin image, valid out pointers, NUL-terminated name.
    unsafe {
        let rc = (d.cuModuleLoadData)(&mut m2, bytes.as_ptr() as *const c_void);
        if rc != 0 {
            return Err(format!("cuModuleLoadData {rc}").into());
        }
        let rc = (d.cuModuleGetFunction)(&mut f, m2, c"empty".as_ptr());
        if rc != 0 {
            return Err(format!("cuModuleGetFunction {rc}").into());
        }
    }
    println!(
        "SPLIT again (in this process): read + cuModuleLoadData + cuModuleGetFunction {:.1}",
        t.elapsed().as_secs_f64() * 1e6
    );
    // SAFETY: the modules loaded above; no function of them is used after.
    unsafe {
        (d.cuModuleUnload)(m);
        (d.cuModuleUnload)(m2);
    }
    Ok(())
}
