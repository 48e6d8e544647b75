//! hipRTC through [`Jit`] against bare hipcc on the 4 KiB benchmark source (it includes
//! `hip/hip_runtime.h`), and a 16-kernel batch with `hipjit compile -j 2` against `-j 1`; no
//! GPU needed. Each figure is the median of 7 interleaved runs of:
//! - a fresh process that makes a `Jit` with `JitOptions::compiler = HipRtc` and no disk cache
//!   and compiles the source (the whole process, spawn to exit, less its second compile);
//! - bare `hipcc -x hip --genco --offload-arch=T -O3 --no-gpu-bundle-output -std=c++17` on it;
//! - in that same process, a second `Jit::compile` of another source (in process, hipRTC
//!   already loaded);
//! - `hipjit compile -j 2` of 16 distinct sources with a fresh cache, and the same with `-j 1`,
//!   with the compiler `HIPJIT_BENCH_COMPILER` picks (default `auto`).
//!
//! Medians and ratios are printed. Run: `cargo bench --features cli --bench compilers` (needs
//! hipcc and hipRTC; `HIPJIT_BENCH_TARGET` picks the target, default gfx90a). With `-- batch`
//! only the batch is timed (`HIPJIT_BENCH_COMPILER=hiprtc cargo bench --features cli --bench
//! compilers -- batch`: serving workers against one process), and the speed-up of `-j 2` over
//! `-j 1` printed, with each side's CPU time (the command and its workers), how many cores the
//! `-j 2` side kept busy (and the `-j 1` side: below 1, it waited for a core), the best it
//! could do on 2 cores (half its CPU time), and the 1-minute load average before each pair: a
//! figure taken while other work held a core shows it there.
//! `-- batch warm` times `hipjit cache warm -j 2` and `-j 1` of the 16 requests instead
//! (recorded with `HIPJIT_RECORD` while `hipjit compile` compiled them into a cache of their
//! own; each warm into a fresh cache). `-- worker-cost` times what a serving worker costs
//! over compiling in process: 16 compiles one after the other on one CPU, a `Jit` in process
//! against one whose hipRTC runs in a serving worker.
//!
//! With `-- cold [hiprtc] [nvrtc] [hipcc]` (all three when none is named) only the cold-compile
//! benchmarks run ([`cold`]): in this one process, hipRTC and NVRTC (where hipjit finds it,
//! `HIPJIT_NVRTC_LIBRARY` say) called directly with the program hipjit hands them, and hipcc run
//! bare with hipjit's command line, each against `Jit::compile` in a new `Jit` with a new cache
//! root, publishing before it returns and in the background (`JitOptions::publish_in_background`),
//! `HIPJIT_BENCH_RUNS` (default 7) interleaved runs; medians, ratios (`BENCH` lines) and where
//! hipjit's time goes (`hipjit::phases`). docs/performance.md, "Cold compiles against the raw
//! compilers", has the method and the figures.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use hipjit::compiler::selection::CompilerChoice;
use hipjit::compiler::{Backend, CompileOptions};
use hipjit::cuda::target::SmTarget;
use hipjit::jit::{CacheLocation, Jit, JitOptions, Origin};
use hipjit::target_id::TargetId;

#[path = "support/raw_rtc.rs"]
mod raw_rtc;
use raw_rtc::RawRtc;

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
    // A last line cut to a lone `/` would be no comment: blanks instead, the size kept.
    let tail = s.len() - s.rfind('\n').map_or(0, |i| i + 1);
    if tail < 2 {
        s.truncate(s.len() - tail);
        s.push_str(&" ".repeat(tail));
    }
    s
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

fn target() -> TargetId {
    let t = std::env::var("HIPJIT_BENCH_TARGET").unwrap_or_else(|_| "gfx90a".into());
    TargetId::parse(&t).unwrap_or_else(|e| panic!("HIPJIT_BENCH_TARGET: {e}"))
}

/// The child: a `Jit` taking hipRTC, no disk cache; one compile, and with "twice" a second one,
/// timed and printed.
fn child(seed: &str, twice: bool) {
    let jit = Jit::new(JitOptions {
        compiler: Some(CompilerChoice::HipRtc),
        cache: CacheLocation::Disabled,
        ..JitOptions::default()
    })
    .unwrap_or_else(|e| panic!("{e}"));
    let options = CompileOptions::for_target(target());
    let compiled = jit
        .compile(source_of_4kib(seed), &options)
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(compiled.compiler().kind.as_str(), "hiprtc");
    if twice {
        let t = Instant::now();
        jit.compile(source_of_4kib(&format!("{seed}-second")), &options)
            .unwrap_or_else(|e| panic!("{e}"));
        println!("SECOND_MS {:.3}", t.elapsed().as_secs_f64() * 1e3);
    }
}

/// A batch's wall time and CPU time (user and system, of the `hipjit` process and the worker
/// processes it waited for), in ms.
#[derive(Clone, Copy)]
struct Timed {
    wall: f64,
    cpu: f64,
}

/// The CPU time (user and system) of this process's children waited for so far, and of
/// theirs they waited for, in ms.
fn children_cpu_ms() -> f64 {
    let mut u = std::mem::MaybeUninit::<libc::rusage>::zeroed();
    // SAFETY: getrusage writes the struct it is given.
    let rc = unsafe { libc::getrusage(libc::RUSAGE_CHILDREN, u.as_mut_ptr()) };
    assert_eq!(rc, 0, "getrusage: {}", std::io::Error::last_os_error());
    // SAFETY: getrusage returned 0 and filled it.
    let u = unsafe { u.assume_init() };
    let ms = |t: libc::timeval| t.tv_sec as f64 * 1e3 + t.tv_usec as f64 / 1e3;
    ms(u.ru_utime) + ms(u.ru_stime)
}

/// The 1-minute load average (`/proc/loadavg`), where it can be read.
fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|l| l.split_whitespace().next().map(str::to_owned))
        .unwrap_or_else(|| "?".into())
}

/// The serial child: pinned to one CPU, a `Jit` taking hipRTC, no disk cache, in process or
/// (`worker`) in one serving worker (`WorkerConfig` naming the hipjit command); 16 distinct
/// sources compiled one after the other; prints the whole time from before the `Jit` is made.
fn serial_child(seed: &str, worker: bool) {
    // SAFETY: a zeroed cpu_set_t is an empty set; CPU_SET and sched_setaffinity write and read
    // only it.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(0, &mut set);
        assert_eq!(
            libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set),
            0,
            "sched_setaffinity: {}",
            std::io::Error::last_os_error()
        );
    }
    let t = Instant::now();
    let jit = Jit::new(JitOptions {
        compiler: Some(CompilerChoice::HipRtc),
        cache: CacheLocation::Disabled,
        compiler_config: hipjit::compiler::CompilerConfig {
            rtc_worker: worker.then(|| hipjit::compiler::worker::WorkerConfig {
                program: Some(PathBuf::from(env!("CARGO_BIN_EXE_hipjit"))),
                ..Default::default()
            }),
            ..Default::default()
        },
        ..JitOptions::default()
    })
    .unwrap_or_else(|e| panic!("{e}"));
    let options = CompileOptions::for_target(target());
    for k in 0..16 {
        jit.compile(source_of_4kib(&format!("{seed} kernel {k}")), &options)
            .unwrap_or_else(|e| panic!("{e}"));
    }
    println!("SERIAL_MS {:.3}", t.elapsed().as_secs_f64() * 1e3);
}

/// What a serving worker costs over compiling in process: 16 compiles one after the other on
/// one CPU, in process against in one serving worker (its start, and a request and answer a
/// compile), each a fresh process (`serial-child`), interleaved, medians of 5 runs.
fn worker_cost() {
    let exe = std::env::current_exe().expect("the bench's own path");
    let (mut here, mut there) = (vec![], vec![]);
    for run in 0..5 {
        for worker in [false, true] {
            let seed = format!("run {run} of {} worker {worker}", std::process::id());
            let mut cmd = Command::new(&exe);
            cmd.args(["serial-child", &seed]);
            if worker {
                cmd.arg("worker");
            }
            let o = cmd.output().expect("the bench runs itself");
            assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
            let ms: f64 = String::from_utf8_lossy(&o.stdout)
                .lines()
                .find_map(|l| l.strip_prefix("SERIAL_MS "))
                .expect("the child's time")
                .trim()
                .parse()
                .unwrap();
            if worker { &mut there } else { &mut here }.push(ms);
        }
    }
    let (h, w) = (median(&mut here), median(&mut there));
    println!(
        "16 kernels one after the other on one CPU, hipRTC, --arch {}, medians of 5 interleaved \
         runs: in process {h:.0} ms, in one serving worker {w:.0} ms ({:+.1}%)",
        target(),
        (w / h - 1.0) * 100.0
    );
}

/// `hipjit compile -j JOBS` of `files` into a fresh cache: its wall and CPU time.
fn batch(files: &[PathBuf], jobs: u32, compiler: &str, cache: &Path, out: &Path) -> Timed {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_hipjit"));
    cmd.arg("compile")
        .args(files)
        .args(["--arch", &target().to_string(), "-j", &jobs.to_string()])
        .args(["--compiler", compiler, "-o"])
        .arg(out)
        .env("HIPJIT_CACHE_DIR", cache);
    timed(cmd)
}

/// `cmd` run to its end, which must be a success: its wall and CPU time.
fn timed(mut cmd: Command) -> Timed {
    let cpu = children_cpu_ms();
    let t = Instant::now();
    let o = cmd.output().expect("the hipjit command runs");
    let wall = t.elapsed().as_secs_f64() * 1e3;
    let cpu = children_cpu_ms() - cpu;
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    Timed { wall, cpu }
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.get(1).map(String::as_str) == Some("child") {
        child(&args[2], args.get(3).map(String::as_str) == Some("twice"));
        return;
    }
    if args.get(1).map(String::as_str) == Some("serial-child") {
        serial_child(&args[2], args.get(3).map(String::as_str) == Some("worker"));
        return;
    }
    // `cargo bench` passes `--bench`; `cargo test --all-targets` runs this binary without it,
    // and then it only checks that it was built.
    if !args.iter().any(|a| a == "--bench") {
        println!("benches/compilers.rs: run with `cargo bench --features cli --bench compilers`");
        return;
    }
    let target = target();
    let compiler = std::env::var("HIPJIT_BENCH_COMPILER").unwrap_or_else(|_| "auto".into());
    if args.iter().any(|a| a == "worker-cost") {
        worker_cost();
        return;
    }
    if args.iter().any(|a| a == "batch") {
        batch_only(&compiler, args.iter().any(|a| a == "warm"));
        return;
    }
    if args.iter().any(|a| a == "cold") {
        cold(&target);
        return;
    }
    let exe = std::env::current_exe().expect("the bench's own path");
    let hipcc = which("hipcc").expect("hipcc on PATH");
    let dir = tempfile::tempdir().expect("a temporary directory");
    let (mut rtc_ms, mut hipcc_ms, mut second_ms, mut j2_ms, mut j1_ms) =
        (vec![], vec![], vec![], vec![], vec![]);
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

        j2_ms.push(batch_of_16(dir.path(), &seed, run, 2, &compiler).wall);
        j1_ms.push(batch_of_16(dir.path(), &seed, run, 1, &compiler).wall);
    }
    let (r, h, s, j2, j1) = (
        median(&mut rtc_ms),
        median(&mut hipcc_ms),
        median(&mut second_ms),
        median(&mut j2_ms),
        median(&mut j1_ms),
    );
    println!(
        "4 KiB source with hip_runtime.h, {target}, medians of 7 interleaved runs:\n  \
         fresh process, Jit with hipRTC: {r:.0} ms ({:.2}x hipcc; target <= 0.5x)\n  \
         bare hipcc --genco:             {h:.0} ms\n  \
         second Jit compile (hipRTC) in the same process: {s:.0} ms ({:.2}x hipcc)\n  \
         16 kernels, hipjit compile --compiler {compiler}: -j 2 {j2:.0} ms, -j 1 {j1:.0} ms \
         ({:.2}x serial)",
        r / h,
        s / h,
        j2 / j1
    );
}

/// `hipjit compile -j JOBS` of 16 distinct 4 KiB sources (made distinct by `seed`, `run` and
/// `jobs`) under `dir` into a fresh cache: its wall and CPU time.
fn batch_of_16(dir: &Path, seed: &str, run: u32, jobs: u32, compiler: &str) -> Timed {
    let batch_dir = dir.join(format!("batch{run}-j{jobs}"));
    let files = sources_of_16(&batch_dir, &format!("{seed} j{jobs}"));
    batch(
        &files,
        jobs,
        compiler,
        &batch_dir.join("cache"),
        &batch_dir.join("out"),
    )
}

/// 16 distinct 4 KiB sources (made distinct by `seed`), written to a new directory `dir`.
fn sources_of_16(dir: &Path, seed: &str) -> Vec<PathBuf> {
    std::fs::create_dir(dir).unwrap();
    (0..16)
        .map(|k| {
            let f = dir.join(format!("k{k}.hip"));
            std::fs::write(&f, source_of_4kib(&format!("{seed} kernel {k}"))).unwrap();
            f
        })
        .collect()
}

/// `hipjit cache warm -j 2` and `-j 1` of the same 16 recorded requests (16 distinct 4 KiB
/// sources under `dir`, made distinct by `seed` and `run`, recorded with `HIPJIT_RECORD` while
/// `hipjit compile` compiled them into a cache of their own), each into a fresh cache: their
/// wall and CPU times.
fn warm_of_16(dir: &Path, seed: &str, run: u32, compiler: &str) -> (Timed, Timed) {
    let warm_dir = dir.join(format!("warm{run}"));
    let files = sources_of_16(&warm_dir, seed);
    let record = warm_dir.join("record.jsonl");
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_hipjit"));
    cmd.arg("compile")
        .args(&files)
        .args(["--arch", &target().to_string(), "-j", "2"])
        .args(["--compiler", compiler, "-o"])
        .arg(warm_dir.join("out"))
        .env("HIPJIT_CACHE_DIR", warm_dir.join("recording"))
        .env("HIPJIT_RECORD", &record);
    timed(cmd);
    let warm = |jobs: u32| {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_hipjit"));
        cmd.args(["cache", "warm"])
            .arg(&record)
            .args(["-j", &jobs.to_string()])
            .env("HIPJIT_CACHE_DIR", warm_dir.join(format!("cache-j{jobs}")));
        timed(cmd)
    };
    (warm(2), warm(1))
}

/// The batch alone: `-j 2` and `-j 1` interleaved, medians of 5 runs, and the speed-up; with
/// each side's CPU time (the command and its workers) and the 1-minute load average before each
/// pair. Two processes on two cores can at best halve the `-j 2` side's CPU time: its CPU time
/// over its wall time says how many cores it had (a core taken by other work shows there).
/// With `warm`, `hipjit cache warm` of 16 recorded requests instead of `hipjit compile`.
fn batch_only(compiler: &str, warm: bool) {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let (mut j2_ms, mut j1_ms, mut j2_cpu, mut j1_cpu, mut busy, mut busy1) =
        (vec![], vec![], vec![], vec![], vec![], vec![]);
    let mut loads = vec![];
    for run in 0..5 {
        loads.push(load_average());
        let seed = format!("run {run} of {}", std::process::id());
        let (j2, j1) = if warm {
            warm_of_16(dir.path(), &seed, run, compiler)
        } else {
            (
                batch_of_16(dir.path(), &seed, run, 2, compiler),
                batch_of_16(dir.path(), &seed, run, 1, compiler),
            )
        };
        println!(
            "  run {run} (load average {}): -j 2 {:.0} ms ({:.0} ms CPU), -j 1 {:.0} ms \
             ({:.0} ms CPU)",
            loads[run as usize], j2.wall, j2.cpu, j1.wall, j1.cpu
        );
        j2_ms.push(j2.wall);
        j1_ms.push(j1.wall);
        j2_cpu.push(j2.cpu);
        j1_cpu.push(j1.cpu);
        busy.push(j2.cpu / j2.wall);
        busy1.push(j1.cpu / j1.wall);
    }
    let (j2, j1) = (median(&mut j2_ms), median(&mut j1_ms));
    let (c2, c1, b, b1) = (
        median(&mut j2_cpu),
        median(&mut j1_cpu),
        median(&mut busy),
        median(&mut busy1),
    );
    println!(
        "16 kernels, hipjit {} --compiler {compiler} --arch {}, medians of 5 interleaved \
         runs: -j 2 {j2:.0} ms, -j 1 {j1:.0} ms: -j 2 is {:.2}x faster than serial\n  \
         CPU time: -j 2 {c2:.0} ms ({b:.2} cores busy), -j 1 {c1:.0} ms ({b1:.2}); on 2 cores -j 2 \
         takes at least {:.0} ms (half its CPU time), {:.2}x serial at best; load averages \
         before each pair: {}",
        if warm {
            "cache warm (of their recorded requests)"
        } else {
            "compile"
        },
        target(),
        j1 / j2,
        c2 / 2.0,
        j1 / (c2 / 2.0),
        loads.join(", ")
    );
}

/// Per-phase medians over runs: each run's phases summed by name, then the median of each
/// name over the runs (0 in a run that did not meet it).
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

/// Prints the split of hipjit's time: each phase's median, and what no top-level phase
/// covers (the median of each run's total less its top-level phases).
fn print_split(what: &str, runs: &[Vec<(&'static str, Duration)>], totals: &[f64]) {
    println!("  where {what}'s time goes (medians over the runs, ms; \"a: b\" lies inside \"a\"):");
    for (name, ms) in phase_medians(runs) {
        println!("    {ms:9.3}  {name}");
    }
    let mut rest: Vec<f64> = runs
        .iter()
        .zip(totals)
        .map(|(r, t)| {
            t - r
                .iter()
                .filter(|(n, _)| !n.contains(": "))
                .map(|(_, d)| d.as_secs_f64() * 1e3)
                .sum::<f64>()
        })
        .collect();
    println!("    {:9.3}  outside every phase above", median(&mut rest));
}

/// A `Jit` with `choice` and the disk cache in `root` alone (a new, empty root), publishing
/// its results before they are returned or, with `background`, after
/// (`JitOptions::publish_in_background`).
fn jit_with_root(choice: CompilerChoice, root: &Path, background: bool) -> Jit {
    Jit::new(JitOptions {
        compiler: Some(choice),
        cache: CacheLocation::Roots(vec![root.to_path_buf()]),
        publish_in_background: background,
        ..JitOptions::default()
    })
    .unwrap_or_else(|e| panic!("{e}"))
}

/// One timed miss of `Jit::compile` of `src` in a new `Jit` (new cache root `root`): its wall
/// time in ms and hipjit's phases; a background publish is waited for after the clock stops.
fn time_miss(
    choice: CompilerChoice,
    root: &Path,
    background: bool,
    src: &str,
    options: &CompileOptions,
) -> (f64, Vec<(&'static str, Duration)>, Vec<String>) {
    let jit = jit_with_root(choice, root, background);
    let t = Instant::now();
    let (compiled, phases) = hipjit::phases::measure(|| jit.compile(src, options));
    let ms = t.elapsed().as_secs_f64() * 1e3;
    let compiled = compiled.unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(compiled.origin(), Origin::Compiler);
    jit.flush_cache_writes();
    let entry = compiled.entry_path().expect("the result is published");
    assert!(entry.is_file(), "{} was not published", entry.display());
    (ms, phases, compiled.command().to_vec())
}

/// The three sides of a cold-compile benchmark, each timed once per run, the order rotated
/// from run to run: the raw compiler (`raw`, given the run), `Jit::compile` publishing before
/// it returns, and publishing in the background. Returns the medians (raw, default,
/// background) and the two `Jit` sides' phases and times.
#[allow(clippy::type_complexity)]
fn three_sides(
    runs: usize,
    raw: &mut dyn FnMut(usize) -> f64,
    jit: &mut dyn FnMut(usize, bool) -> (f64, Vec<(&'static str, Duration)>),
) -> (
    [f64; 3],
    [(Vec<Vec<(&'static str, Duration)>>, Vec<f64>); 2],
) {
    let mut raw_ms = vec![];
    let mut sides: [(Vec<Vec<(&'static str, Duration)>>, Vec<f64>); 2] = Default::default();
    for run in 0..runs {
        for k in 0..3 {
            match (run + k) % 3 {
                0 => raw_ms.push(raw(run)),
                side => {
                    let (ms, phases) = jit(run, side == 2);
                    sides[side - 1].0.push(phases);
                    sides[side - 1].1.push(ms);
                }
            }
        }
    }
    let medians = [
        median(&mut raw_ms),
        median(&mut sides[0].1.clone()),
        median(&mut sides[1].1.clone()),
    ];
    (medians, sides)
}

/// The cold-compile benchmark of an in-process compiler (hipRTC, or NVRTC where found) in this
/// one process: the library called directly with the program hipjit hands it
/// (`RtcProgram`: its options and in-memory headers), against `Jit::compile` of the same
/// source and options in a `Jit` with a new empty cache root (a miss: key, compile, header
/// manifest, entry published), publishing before it returns and in the background, `runs`
/// interleaved runs of distinct sources after one warm-up of each; medians, the ratios and
/// hipjit's split. `None` when the compiler is not found.
fn cold_rtc(
    choice: CompilerChoice,
    label: &str,
    options: &CompileOptions,
    dir: &Path,
    runs: usize,
) -> Option<[f64; 3]> {
    let probe = jit_with_root(choice, &dir.join(format!("{label}-probe")), false);
    let chosen = match probe.compiler_for(source_of_4kib("probe"), options) {
        Ok(c) => c,
        Err(e) => {
            println!("{label}: not measured, the compiler is not found: {e}");
            return None;
        }
    };
    let program = |src: &str| {
        match &chosen.backend {
            Backend::HipRtc(b) => b.program(src.as_bytes(), options),
            Backend::Nvrtc(b) => b.program(src.as_bytes(), options),
            other => panic!("{label}: {:?} is no in-process compiler", other.kind()),
        }
        .unwrap_or_else(|e| panic!("{e}"))
    };
    let library = match &chosen.backend {
        Backend::HipRtc(b) => b.library.path().to_path_buf(),
        Backend::Nvrtc(b) => b.library.path().to_path_buf(),
        _ => unreachable!(),
    };
    let raw = RawRtc::open(&library, matches!(chosen.backend, Backend::Nvrtc(_)));
    let seed = std::process::id();
    // Warm-up: the library's first compile (its own start), hipjit's first (its identity).
    let p = program(&source_of_4kib(&format!("{label} warm raw {seed}")));
    raw.compile(&p.source, &p.name, &p.headers, &p.options)
        .unwrap_or_else(|e| panic!("{e}"));
    probe
        .compile(source_of_4kib(&format!("{label} warm jit {seed}")), options)
        .unwrap_or_else(|e| panic!("{e}"));
    let mut time_raw = |run: usize| {
        let p = program(&source_of_4kib(&format!("{label} raw {run} {seed}")));
        let t = Instant::now();
        let code = raw
            .compile(&p.source, &p.name, &p.headers, &p.options)
            .unwrap_or_else(|e| panic!("{e}"));
        let ms = t.elapsed().as_secs_f64() * 1e3;
        assert!(!code.is_empty());
        ms
    };
    let mut time_jit = |run: usize, background: bool| {
        let src = source_of_4kib(&format!("{label} jit {run} {background} {seed}"));
        let root = dir.join(format!("{label}-root-{run}-{background}"));
        let (ms, phases, _) = time_miss(choice, &root, background, &src, options);
        (ms, phases)
    };
    let ([r, j, b], [default, background]) = three_sides(runs, &mut time_raw, &mut time_jit);
    println!(
        "BENCH cold {label} miss, 4 KiB source, {}, medians of {runs} interleaved runs in one \
         process: raw {label} (create, compile, get code, destroy; hipjit's options and \
         headers) {r:.1} ms; Jit::compile (new Jit, new cache root) {j:.1} ms: {:.3}x raw; \
         with publish_in_background {b:.1} ms: {:.3}x raw (target <= 1.2)",
        options.target_names().join(","),
        j / r,
        b / r
    );
    println!("  raw options: {}", program("x").options.join(" "));
    print_split("Jit::compile", &default.0, &default.1);
    print_split(
        "Jit::compile with publish_in_background",
        &background.0,
        &background.1,
    );
    Some([r, j, b])
}

/// The cold-compile benchmark of hipcc: `Jit::compile` with hipcc (new `Jit`, new cache root;
/// publishing before it returns, and in the background) against hipcc run bare with the
/// command line hipjit runs (`Compiled::command`), in a directory holding the same source
/// file, `runs` interleaved runs after a warm-up of each; medians, the ratios and hipjit's
/// split.
fn cold_hipcc(target: &TargetId, dir: &Path, runs: usize) -> [f64; 3] {
    let options = CompileOptions::for_target(target.clone());
    let seed = std::process::id();
    let (_, _, command) = time_miss(
        CompilerChoice::Hipcc,
        &dir.join("hipcc-warm"),
        false,
        &source_of_4kib(&format!("hipcc warm {seed}")),
        &options,
    );
    let source_name = options.source_file_name().to_owned();
    assert!(command.contains(&source_name), "{command:?}");
    let bare = |src: &str, name: &str| {
        let d = dir.join(name);
        std::fs::create_dir_all(&d).unwrap();
        std::fs::write(d.join(&source_name), src).unwrap();
        let t = Instant::now();
        let out = Command::new(&command[0])
            .args(&command[1..])
            .current_dir(&d)
            .output()
            .unwrap();
        let ms = t.elapsed().as_secs_f64() * 1e3;
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        ms
    };
    bare(
        &source_of_4kib(&format!("hipcc warm bare {seed}")),
        "bare-warm",
    );
    let mut time_bare = |run: usize| {
        bare(
            &source_of_4kib(&format!("hipcc bare {run} {seed}")),
            &format!("bare-{run}"),
        )
    };
    let mut time_jit = |run: usize, background: bool| {
        let src = source_of_4kib(&format!("hipcc jit {run} {background} {seed}"));
        let root = dir.join(format!("hipcc-root-{run}-{background}"));
        let (ms, phases, used) =
            time_miss(CompilerChoice::Hipcc, &root, background, &src, &options);
        assert_eq!(used, command);
        (ms, phases)
    };
    let ([r, j, b], [default, background]) = three_sides(runs, &mut time_bare, &mut time_jit);
    println!(
        "BENCH cold hipcc miss, 4 KiB source, {target}, medians of {runs} interleaved runs: \
         bare hipcc (hipjit's command line, the same source file) {r:.0} ms; Jit::compile (new \
         Jit, new cache root) {j:.0} ms: {:.3}x bare; with publish_in_background {b:.0} ms: \
         {:.3}x bare (target <= 1.05)",
        j / r,
        b / r
    );
    println!("  command: {}", command.join(" "));
    print_split("Jit::compile", &default.0, &default.1);
    print_split(
        "Jit::compile with publish_in_background",
        &background.0,
        &background.1,
    );
    [r, j, b]
}

/// The cold-compile benchmarks: hipRTC, NVRTC (where found: `HIPJIT_NVRTC_LIBRARY`, or
/// beside nvcc) and hipcc, each against its raw counterpart.
fn cold(target: &TargetId) {
    let runs: usize = std::env::var("HIPJIT_BENCH_RUNS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(7);
    let dir = tempfile::tempdir().expect("a temporary directory");
    let only: Vec<String> = std::env::args()
        .skip_while(|a| a != "cold")
        .skip(1)
        .filter(|a| !a.starts_with('-'))
        .collect();
    let wanted = |name: &str| only.is_empty() || only.iter().any(|o| o == name);
    if wanted("hiprtc") {
        cold_rtc(
            CompilerChoice::HipRtc,
            "hipRTC",
            &CompileOptions::for_target(target.clone()),
            dir.path(),
            runs,
        );
    }
    if wanted("nvrtc") {
        cold_rtc(
            CompilerChoice::Nvrtc,
            "NVRTC",
            &CompileOptions::for_sm(SmTarget::parse("sm_90").unwrap()),
            dir.path(),
            runs,
        );
    }
    if wanted("hipcc") {
        cold_hipcc(target, dir.path(), runs);
    }
}

fn which(name: &str) -> Option<PathBuf> {
    std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|p| p.join(name))
            .find(|p| p.is_file())
    })
}
