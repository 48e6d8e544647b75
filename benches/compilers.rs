//! hipRTC against hipcc on the 4 KiB benchmark source (it includes `hip/hip_runtime.h`), no GPU
//! needed: 7 interleaved runs of each of
//! - a fresh process that opens hipRTC and compiles the source (whole process, spawn to exit);
//! - bare `hipcc -x hip --genco --offload-arch=T -O3 --no-gpu-bundle-output -std=c++17` on it;
//! - inside one process, a second hipRTC compile of a new source after a first one.
//!
//! Medians and the ratios to hipcc are printed. Run: `cargo bench --bench compilers` (needs
//! hipcc and hipRTC; `HIPJIT_BENCH_TARGET` picks the target, default gfx90a).

use std::path::Path;
use std::process::Command;
use std::time::Instant;

use hipjit::compiler::hiprtc::{self, HipRtc};
use hipjit::compiler::rtc::RtcInput;
use hipjit::target_id::TargetId;

/// The 4 KiB source of benches/jit.rs, made distinct by `seed`.
fn source_of_4kib(seed: &str) -> String {
    let mut s = format!(
        "#include <hip/hip_runtime.h>\n// {seed}\n\
         extern \"C\" __global__ void bench(float* x, float a, int n) {{\n\
         int i = blockIdx.x * blockDim.x + threadIdx.x;\n\
         if (i < n) x[i] = a * x[i] + 1.0f;\n}}\n",
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

fn compile(rtc: &HipRtc, target: &TargetId, source: &str) {
    let options = [
        hiprtc::arch_option(target),
        "-O3".to_owned(),
        "-std=c++17".to_owned(),
    ];
    let out = rtc
        .compile(&RtcInput {
            source: source.as_bytes(),
            name: "bench.hip",
            headers: &[],
            include_dirs: &[],
            options: &options,
        })
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(out.code.starts_with(b"\x7fELF"));
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

fn target() -> TargetId {
    let t = std::env::var("HIPJIT_BENCH_TARGET").unwrap_or_else(|_| "gfx90a".into());
    TargetId::parse(&t).unwrap_or_else(|e| panic!("HIPJIT_BENCH_TARGET: {e}"))
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    // The fresh-process half: open hipRTC, compile once; with "twice", time a second compile.
    if args.get(1).map(String::as_str) == Some("child") {
        let rtc = HipRtc::open(None).unwrap_or_else(|e| panic!("{e}"));
        compile(&rtc, &target(), &source_of_4kib(&args[2]));
        if args.get(3).map(String::as_str) == Some("twice") {
            let t = Instant::now();
            compile(
                &rtc,
                &target(),
                &source_of_4kib(&format!("{}-second", args[2])),
            );
            println!("SECOND_MS {:.3}", t.elapsed().as_secs_f64() * 1e3);
        }
        return;
    }
    // `cargo bench` passes `--bench`; `cargo test --all-targets` runs this binary without it,
    // and then it only checks that it was built.
    if !args.iter().any(|a| a == "--bench") {
        println!("benches/compilers.rs: run with `cargo bench --bench compilers`");
        return;
    }
    let target = target();
    let exe = std::env::current_exe().expect("the bench's own path");
    let hipcc = which("hipcc").expect("hipcc on PATH");
    let dir = tempfile::tempdir().expect("a temporary directory");
    let (mut rtc_ms, mut hipcc_ms, mut second_ms) = (vec![], vec![], vec![]);
    for run in 0..7 {
        let seed = format!("run {run} of {}", std::process::id());
        let t = Instant::now();
        let out = Command::new(&exe)
            .args(["child", &seed, "twice"])
            .output()
            .unwrap();
        let whole = t.elapsed().as_secs_f64() * 1e3;
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let text = String::from_utf8_lossy(&out.stdout);
        let second: f64 = text
            .lines()
            .find_map(|l| l.strip_prefix("SECOND_MS "))
            .expect("the child's second compile time")
            .trim()
            .parse()
            .unwrap();
        // The child compiled twice: the fresh-process figure is the whole process less the
        // second compile.
        rtc_ms.push(whole - second);
        second_ms.push(second);

        let src = dir.path().join(format!("bench{run}.hip"));
        std::fs::write(&src, source_of_4kib(&seed)).unwrap();
        let t = Instant::now();
        let status = Command::new(&hipcc)
            .args(["-x", "hip", "--genco"])
            .arg(format!("--offload-arch={target}"))
            .args(["-O3", "--no-gpu-bundle-output", "-std=c++17", "-o"])
            .arg(dir.path().join(format!("bench{run}.co")))
            .arg(&src)
            .status()
            .unwrap();
        hipcc_ms.push(t.elapsed().as_secs_f64() * 1e3);
        assert!(status.success());
    }
    let (r, h, s) = (
        median(&mut rtc_ms),
        median(&mut hipcc_ms),
        median(&mut second_ms),
    );
    println!(
        "hipRTC vs hipcc, 4 KiB source with hip_runtime.h, {target}, medians of 7 interleaved runs:\n  \
         fresh process, hipRTC: {r:.0} ms ({:.2}x hipcc; target <= 0.5x)\n  \
         bare hipcc --genco:    {h:.0} ms\n  \
         second hipRTC compile in the same process: {s:.0} ms ({:.2}x hipcc)",
        r / h,
        s / h
    );
}

fn which(name: &str) -> Option<std::path::PathBuf> {
    std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|d| d.join(name))
            .find(|p| Path::new(p).is_file())
    })
}
