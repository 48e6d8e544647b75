//! The cache hits' host cost, without a GPU, so that the figures are reproducible here:
//!
//! 1. the kernel-level hit (`Jit::kernel`) of a 4 KiB source over the fixture CUDA driver
//!    (`tests/fixtures/fake_cuda.c`, built with `-O2 -DFIXTURE_NO_LOG`), timed two ways: the
//!    H200 benchmark's (each call handed one of 512 fresh `String`s of equal contents made
//!    before the clock starts, batches of 512) and with the `String` made in the loop (a
//!    batch of creations alone, then a batch of creation + hit, alternating: the hit is the
//!    difference, with the source in the cache as a generator's just-written text is);
//! 2. the disk hit in fresh processes, the entries older than the hit memo's margin (as a
//!    user's later job finds them): the whole hit (`Jit::new` and one `compile`) the long way
//!    (`JitOptions::disable_hit_memo`) and through the hit memo, alternating (the memo's whole
//!    hit split by `hipjit::phases`: `Jit::new`, the frozen bundle's look, the process
//!    context and request name, the memo's recall with its `stat`s, the entry read and
//!    checked, its artefacts); and the long way
//!    one public call at a time (the steps of `examples/nvidia_e2e.rs`'s breakdown):
//!    `Jit::new`, compiler found + identity checked, direct key, manifest check, entry read +
//!    verify + parse, and on the NVIDIA platform (the fixture driver) the
//!    load through each loader and the kernel; for `sm_90` with NVRTC
//!    (`HIPJIT_COMPILER=nvrtc`, what Auto takes), nvcc, and `gfx90a` with hipcc and Auto.
//!    Each child prints `STEP name us`; medians of `HIPJIT_BENCH_RUNS` (default 15) children
//!    of each kind per case, cases interleaved. The compiler identities live in a directory
//!    of this run (remembered by a first child, as a user's first run remembers them).
//!
//! Needs nvcc and NVRTC (`HIPJIT_NVCC`, else PyPI's under `$HIPJIT_CI_CACHE/nvcc-venv`) and
//! hipcc. Run: `cargo bench --bench hit`.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use hipjit::code_object::cubin::Cubin;
use hipjit::compiler::selection::CompilerChoice;
use hipjit::compiler::{CompileOptions, CompilerConfig};
use hipjit::cuda::target::SmTarget;
use hipjit::jit::{CacheLocation, Jit, JitOptions, Origin};
use hipjit::runtime::{CodeObjectLoader, Runtime};
use hipjit::target_id::TargetId;

type R<T> = Result<T, Box<dyn std::error::Error>>;

const BATCH: usize = 512;
const BATCHES: usize = 200;

const KERNELS: &str = r#"#include <hip/hip_runtime.h>
extern "C" __global__ void saxpy(float a, const float* x, float* y, unsigned n) {
    unsigned i = hipBlockIdx_x * hipBlockDim_x + hipThreadIdx_x;
    if (i < n) y[i] = a * x[i] + y[i];
}
extern "C" __global__ void empty() {}
"#;

fn source_of_4kib() -> String {
    let mut src = format!("{KERNELS}\n// kernel-level hit benchmark\n");
    while src.len() < 4096 {
        src.push_str("// padding to make the source 4 KiB long, as a generated kernel would be\n");
    }
    src.truncate(4096);
    src
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

/// The kernel-level hit over the fixture driver (see the module documentation).
fn kernel_hit(dir: &Path, driver: &Path) -> R<()> {
    let rt = Runtime::load_cuda(Some(driver))?;
    let dev = rt.device(0)?;
    let jit = Jit::new(JitOptions {
        compiler: Some(CompilerChoice::Nvcc),
        compiler_config: CompilerConfig {
            nvcc: Some(nvcc()?),
            identity_dir: Some(dir.join("ids")),
            ..CompilerConfig::default()
        },
        cache: CacheLocation::Roots(vec![dir.join("kernel-cache")]),
        ..JitOptions::default()
    })?;
    let src = source_of_4kib();
    let options = CompileOptions::for_sm(SmTarget::new(90));
    let first = jit.kernel(&dev, &src, "saxpy", &options)?;
    // The H200 benchmark's method: fresh Strings made before the clock.
    let mut premade = Vec::with_capacity(BATCHES);
    for _ in 0..BATCHES {
        let fresh: Vec<String> = (0..BATCH).map(|_| String::from(src.as_str())).collect();
        let t = Instant::now();
        for s in &fresh {
            let k = jit.kernel(&dev, s, "saxpy", &options)?;
            if !k.same_as(&first) {
                return Err("a kernel-level hit returned another kernel".into());
            }
        }
        premade.push(t.elapsed().as_secs_f64() * 1e9 / BATCH as f64);
    }
    // The String made in the loop: creation alone, then creation + hit, alternating.
    let (mut make, mut make_hit) = (Vec::new(), Vec::new());
    for _ in 0..BATCHES {
        let t = Instant::now();
        for _ in 0..BATCH {
            std::hint::black_box(String::from(std::hint::black_box(src.as_str())));
        }
        make.push(t.elapsed().as_secs_f64() * 1e9 / BATCH as f64);
        let t = Instant::now();
        for _ in 0..BATCH {
            let s = String::from(std::hint::black_box(src.as_str()));
            let k = jit.kernel(&dev, &s, "saxpy", &options)?;
            std::hint::black_box(&k);
        }
        make_hit.push(t.elapsed().as_secs_f64() * 1e9 / BATCH as f64);
    }
    let (p, m, mh) = (
        median(&mut premade),
        median(&mut make),
        median(&mut make_hit),
    );
    println!(
        "kernel-level hit, 4 KiB source, fixture driver ({BATCHES} batches of {BATCH}, medians per call):"
    );
    println!("  Jit::kernel, a fresh String made before the clock (the H200 method): {p:.0} ns");
    println!(
        "  String::from of the source alone: {m:.0} ns; String::from + Jit::kernel: {mh:.0} ns; the hit: {:.0} ns",
        mh - m
    );
    Ok(())
}

/// One case of the disk-hit children: the compiler choice and the target.
struct Case {
    name: &'static str,
    compiler: &'static str,
    target: &'static str,
}

const CASES: &[Case] = &[
    Case {
        name: "sm_90, NVRTC",
        compiler: "nvrtc",
        target: "sm_90",
    },
    Case {
        name: "sm_90, nvcc",
        compiler: "nvcc",
        target: "sm_90",
    },
    Case {
        name: "gfx90a, hipcc",
        compiler: "hipcc",
        target: "gfx90a",
    },
    Case {
        name: "gfx90a, auto",
        compiler: "auto",
        target: "gfx90a",
    },
];

fn options_for(target: &str) -> R<CompileOptions> {
    Ok(match target.strip_prefix("sm_") {
        Some(n) => CompileOptions::for_sm(SmTarget::new(n.parse()?)),
        None => CompileOptions::for_target(TargetId::parse(target)?),
    })
}

fn jit_for(cache: &Path, ids: &Path, compiler: &str) -> R<Jit> {
    jit_with(cache, ids, compiler, true)
}

/// [`jit_for`], reading and writing hit memos or not.
fn jit_with(cache: &Path, ids: &Path, compiler: &str, hit_memo: bool) -> R<Jit> {
    Ok(Jit::new(JitOptions {
        compiler: Some(compiler.parse()?),
        compiler_config: CompilerConfig {
            identity_dir: Some(ids.to_path_buf()),
            ..CompilerConfig::default()
        },
        cache: CacheLocation::Roots(vec![cache.to_path_buf()]),
        disable_hit_memo: !hit_memo,
        ..JitOptions::default()
    })?)
}

fn step(t: &mut Instant, name: &str) {
    println!("STEP {name} {:.1}", t.elapsed().as_secs_f64() * 1e6);
    *t = Instant::now();
}

/// A fresh-process disk hit as a user's process makes it: `Jit::new` and one `compile`
/// (through the hit memo when there is one); prints the time and whether the memo served it.
fn child_whole(args: &[String]) -> R<()> {
    let [cache, ids, compiler, target, way] = args else {
        return Err("usage: hit-whole CACHE IDS COMPILER TARGET memo|long-way".into());
    };
    let (cache, ids) = (Path::new(cache), Path::new(ids));
    let o = options_for(target)?;
    let t = Instant::now();
    let (result, phases) = hipjit::phases::measure(|| -> R<_> {
        let jit = jit_with(cache, ids, compiler, way == "memo")?;
        let new = t.elapsed();
        Ok((jit.compile(KERNELS, &o)?, jit, new))
    });
    let (compiled, jit, new) = result?;
    println!("STEP whole {:.1}", t.elapsed().as_secs_f64() * 1e6);
    // The split of the same clock: `Jit::new`, then hipjit's phases of the compile.
    println!("STEP phase Jit::new {:.1}", new.as_secs_f64() * 1e6);
    for (name, took) in phases {
        if let Some(sub) = name.strip_prefix("frozen bundle and hit memo: ") {
            println!("STEP phase {sub} {:.1}", took.as_secs_f64() * 1e6);
        }
    }
    println!("STEP remembered {}", jit.stats().remembered_hits);
    if compiled.origin() != Origin::Disk {
        return Err(format!("expected a disk hit, got {:?}", compiled.origin()).into());
    }
    Ok(())
}

/// A fresh-process disk hit, one public call at a time.
fn child(args: &[String]) -> R<()> {
    let [cache, ids, compiler, target, driver] = args else {
        return Err("usage: hit-steps CACHE IDS COMPILER TARGET DRIVER".into());
    };
    let (cache, ids) = (Path::new(cache), Path::new(ids));
    let o = options_for(target)?;
    // The runtime and device exist before the clock starts, as a context does on a GPU.
    let device = if o.sm_targets.is_empty() {
        None
    } else {
        let rt = Runtime::load_cuda(Some(Path::new(driver)))?;
        Some(rt.device(0)?)
    };
    let mut t = Instant::now();
    let jit = jit_with(cache, ids, compiler, false)?;
    step(&mut t, "Jit::new");
    jit.compiler_for(KERNELS, &o)?;
    step(&mut t, "compiler found + identity checked");
    jit.source_key(KERNELS, &o)?;
    step(&mut t, "direct key");
    let _ = jit.key(KERNELS, &o)?;
    step(&mut t, "direct key + manifest check");
    let compiled = jit.compile(KERNELS, &o)?;
    step(&mut t, "compile (disk hit)");
    if compiled.origin() != Origin::Disk {
        return Err(format!("expected a disk hit, got {:?}", compiled.origin()).into());
    }
    if let Some(dev) = device {
        let cubin = Cubin::from_bytes(compiled.artefacts()[0].elf())?;
        for loader in [CodeObjectLoader::ModuleApi, CodeObjectLoader::LibraryApi] {
            dev.runtime().set_code_object_loader(loader)?;
            let mut t = Instant::now();
            let lib = hipjit::library::Library::load_cubin(&dev, &cubin)?;
            step(&mut t, &format!("load ({loader})"));
            let k = lib.kernel("empty")?;
            step(&mut t, &format!("kernel ({loader})"));
            drop(k);
        }
    }
    Ok(())
}

/// Runs the children of every case, interleaved; prints the medians per step.
fn disk_hits(dir: &Path, driver: &Path) -> R<()> {
    let exe = std::env::current_exe()?;
    let runs: usize = std::env::var("HIPJIT_BENCH_RUNS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(15);
    let nvcc = nvcc()?;
    let ids = dir.join("ids");
    let run_as = |mode: &str, case: &Case| -> R<Vec<(String, f64)>> {
        let cache = dir.join(format!("cache-{}-{}", case.compiler, case.target));
        let mut cmd = Command::new(&exe);
        cmd.arg(if mode == "hit-steps" {
            mode
        } else {
            "hit-whole"
        })
        .arg(&cache)
        .arg(&ids)
        .args([case.compiler, case.target]);
        match mode {
            "hit-steps" => cmd.arg(driver),
            "hit-whole" => cmd.arg("memo"),
            _ => cmd.arg("long-way"),
        };
        let out = cmd.env("HIPJIT_NVCC", &nvcc).output()?;
        let text = String::from_utf8_lossy(&out.stdout);
        if !out.status.success() {
            return Err(format!(
                "{}: child failed: {text} {}",
                case.name,
                String::from_utf8_lossy(&out.stderr)
            )
            .into());
        }
        text.lines()
            .filter_map(|l| l.strip_prefix("STEP "))
            .map(|rest| -> R<(String, f64)> {
                let (name, us) = rest.rsplit_once(' ').ok_or("a STEP line without a time")?;
                Ok((name.to_owned(), us.parse()?))
            })
            .collect()
    };
    let run = |case: &Case| run_as("hit-steps", case);
    // Fill each cache (a compile, then one hit to remember the identities).
    for case in CASES {
        let jit = jit_for(
            &dir.join(format!("cache-{}-{}", case.compiler, case.target)),
            &ids,
            case.compiler,
        )?;
        jit.compile(KERNELS, &options_for(case.target)?)?;
        drop(jit);
    }
    // A first child remembers the identities; the entries are then let age past the hit
    // memo's margin, as a user's later job finds them.
    for case in CASES {
        run(case)?;
    }
    std::thread::sleep(hipjit::jit::hit_memo::MIN_AGE + std::time::Duration::from_millis(200));
    // Then a child remembers each hit.
    for case in CASES {
        run_as("hit-whole", case)?;
    }
    let mut all: Vec<Vec<(String, Vec<f64>)>> = CASES.iter().map(|_| Vec::new()).collect();
    let add = |steps: &mut Vec<(String, Vec<f64>)>, prefix: &str, got: Vec<(String, f64)>| {
        for (name, us) in got {
            let name = format!("{prefix}{name}");
            match steps.iter_mut().find(|(n, _)| *n == name) {
                Some((_, v)) => v.push(us),
                None => steps.push((name, vec![us])),
            }
        }
    };
    for _ in 0..runs {
        for (case, steps) in CASES.iter().zip(&mut all) {
            // The long way whole, then one public call at a time, then through the memo.
            add(steps, "long way ", run_as("hit-whole-long-way", case)?);
            add(steps, "", run(case)?);
            add(steps, "memo ", run_as("hit-whole", case)?);
        }
    }
    println!("disk hit in a fresh process, one public call at a time (median us of {runs} processes per case):");
    for (case, steps) in CASES.iter().zip(&mut all) {
        let mut m = |n: &str| {
            steps
                .iter_mut()
                .find(|(s, _)| s == n)
                .map_or(f64::NAN, |(_, v)| median(v))
        };
        let (long, memo) = (m("long way whole"), m("memo whole"));
        let (long_memo, memo_memo) = (m("long way remembered"), m("memo remembered"));
        if long_memo != 0.0 || memo_memo < 1.0 {
            return Err(format!(
                "{}: the long way and the memo were not taken as asked ({long_memo}, {memo_memo})",
                case.name
            )
            .into());
        }
        println!(
            "  {}: the whole hit (Jit::new + compile): the long way {long:.0}, through the hit memo {memo:.0}: ratio {:.2}",
            case.name,
            memo / long
        );
        let split: Vec<String> = [
            "Jit::new",
            "frozen bundle",
            "context and name",
            "recall",
            "entry read and checked",
            "artefacts",
        ]
        .iter()
        .map(|p| format!("{p} {:.0}", m(&format!("memo phase {p}"))))
        .collect();
        println!(
            "  {}: through the hit memo, by phase: {}",
            case.name,
            split.join("; ")
        );
        let (new, compiler, direct, key, compile) = (
            m("Jit::new"),
            m("compiler found + identity checked"),
            m("direct key"),
            m("direct key + manifest check"),
            m("compile (disk hit)"),
        );
        print!(
            "  {}: Jit::new {new:.0}; compiler found + identity checked {compiler:.0}; direct key {direct:.0}; manifest check {:.0}; entry read + verify + parse {:.0}; host total {:.0}",
            case.name,
            key - direct,
            compile - key,
            new + compiler + compile,
        );
        if case.target.starts_with("sm_") {
            print!(
                "; fixture load module API {:.0} + kernel {:.0}, library API {:.0} + kernel {:.0}",
                m("load (module API)"),
                m("kernel (module API)"),
                m("load (library API)"),
                m("kernel (library API)"),
            );
        }
        println!();
    }
    Ok(())
}

fn main() -> R<()> {
    let args: Vec<String> = std::env::args().collect();
    if args.get(1).map(String::as_str) == Some("hit-steps") {
        return child(&args[2..]);
    }
    if args.get(1).map(String::as_str) == Some("hit-whole") {
        return child_whole(&args[2..]);
    }
    // `cargo bench` passes `--bench`; `cargo test --all-targets` runs this binary without it,
    // and then it only checks that it was built.
    if !args.iter().any(|a| a == "--bench") {
        println!("benches/hit.rs: run with `cargo bench --bench hit`");
        return Ok(());
    }
    let dir = tempfile::tempdir()?;
    let driver = fixture_driver(dir.path())?;
    std::env::set_var("HIPJIT_NVCC", nvcc()?);
    kernel_hit(dir.path(), &driver)?;
    disk_hits(dir.path(), &driver)
}
