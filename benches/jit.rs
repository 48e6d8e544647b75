//! JIT cache latencies: the in-process hit for a 4 KiB source and the disk hit (a fresh `Jit`
//! on the same cache root). Run: `cargo bench --bench jit` (needs hipcc; set `HIPJIT_BENCH_TARGET`
//! to pick the target, default gfx90a).

use std::time::{Duration, Instant};

use hipjit::compiler::CompileOptions;
use hipjit::jit::{CacheLocation, Jit, JitOptions, Origin};
use hipjit::target_id::TargetId;

fn source_of_4kib() -> String {
    let mut s = String::from(
        "#include <hip/hip_runtime.h>\n\
         extern \"C\" __global__ void bench(float* x, float a, int n) {\n\
         int i = blockIdx.x * blockDim.x + threadIdx.x;\n\
         if (i < n) x[i] = a * x[i] + 1.0f;\n}\n",
    );
    let mut line = 0;
    while s.len() < 4096 {
        s.push_str(&format!(
            "// padding line {line:04} to make the source four KiB long.....\n"
        ));
        line += 1;
    }
    s.truncate(4096);
    s
}

fn stats(mut samples: Vec<Duration>) -> (Duration, Duration, Duration) {
    samples.sort();
    let n = samples.len();
    (samples[n / 2], samples[n * 99 / 100], samples[0])
}

fn main() {
    // `cargo bench` passes `--bench`; `cargo test --all-targets` runs this binary without it,
    // and then it only checks that it was built.
    if !std::env::args().any(|a| a == "--bench") {
        println!("benches/jit.rs: run with `cargo bench --bench jit`");
        return;
    }
    let target = std::env::var("HIPJIT_BENCH_TARGET").unwrap_or_else(|_| "gfx90a".into());
    let target = match TargetId::parse(&target) {
        Ok(t) => t,
        Err(e) => {
            eprintln!("HIPJIT_BENCH_TARGET: {e}");
            std::process::exit(2);
        }
    };
    let dir = match tempfile::tempdir() {
        Ok(d) => d,
        Err(e) => {
            eprintln!("cannot make a temporary cache root: {e}");
            std::process::exit(2);
        }
    };
    let make_jit = || {
        Jit::new(JitOptions {
            // hipcc, whatever HIPJIT_COMPILER says: these tests are about it.
            compiler: Some(hipjit::compiler::selection::CompilerChoice::Hipcc),
            cache: CacheLocation::Roots(vec![dir.path().to_path_buf()]),
            ..JitOptions::default()
        })
        .unwrap_or_else(|e| {
            eprintln!("{e}");
            std::process::exit(2)
        })
    };
    let src = source_of_4kib();
    let opts = CompileOptions::for_target(target.clone());
    let jit = make_jit();
    let t = Instant::now();
    let first = jit.compile(&src, &opts).unwrap_or_else(|e| {
        eprintln!("{e}");
        std::process::exit(1)
    });
    let compile_time = t.elapsed();
    assert_eq!(first.origin(), Origin::Compiler);

    // In-process hits: warm up, then time batches (one Instant pair per batch of 1000).
    const BATCH: u32 = 1000;
    for _ in 0..10_000 {
        std::hint::black_box(jit.compile(std::hint::black_box(&src), &opts).ok());
    }
    let mut mem = Vec::new();
    for _ in 0..200 {
        let t = Instant::now();
        for _ in 0..BATCH {
            let c = jit.compile(std::hint::black_box(&src), &opts);
            std::hint::black_box(&c);
        }
        mem.push(t.elapsed() / BATCH);
    }
    let (mem_med, mem_p99, mem_min) = stats(mem);

    // Disk hits: a fresh Jit each time (the compiler's identity is read once per Jit, outside
    // the timed part).
    let mut disk = Vec::new();
    for _ in 0..20 {
        let fresh = make_jit();
        let t = Instant::now();
        let c = fresh.compile(&src, &opts).unwrap_or_else(|e| {
            eprintln!("{e}");
            std::process::exit(1)
        });
        disk.push(t.elapsed());
        assert_eq!(c.origin(), Origin::Disk);
    }
    let (disk_med, disk_p99, disk_min) = stats(disk);

    println!(
        "hipjit JIT cache latency ({}, target {target}, source {} bytes, code object {} bytes)",
        first.compiler().version,
        src.len(),
        first.code_object().unwrap().elf().len()
    );
    println!(
        "{:<28} {:>12} {:>12} {:>12}",
        "case", "median", "p99", "min"
    );
    let row = |name: &str, a: Duration, b: Duration, c: Duration| {
        println!("{name:<28} {:>12.3?} {:>12.3?} {:>12.3?}", a, b, c)
    };
    row("in-memory hit (per call)", mem_med, mem_p99, mem_min);
    row("disk hit (fresh Jit)", disk_med, disk_p99, disk_min);
    row(
        "compile (miss, once)",
        compile_time,
        compile_time,
        compile_time,
    );
}
