//! The remote tier on loopback against the local disk, with a real redis-server started on a
//! free port (Debian's, from scripts/setup.sh) and Debian's hipcc:
//! * a remote hit (an empty local root, the entry fetched from the server, checked and written
//!   to the root) against a disk hit (a fresh `Jit` on a root holding the entry), medians of
//!   30, as a ratio measured in the same run;
//! * 50 distinct entries fetched into an empty root, in all (served, and until their copies
//!   are written to the root in the background), against compiling the same 50 sources with
//!   hipcc (what filled the server).
//!
//! Run: `cargo bench --features redis --bench remote`.

use std::net::TcpListener;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use hipjit::cache::remote::RemoteConfig;
use hipjit::compiler::CompileOptions;
use hipjit::jit::{CacheLocation, Jit, JitOptions, Origin, RemoteLocation};
use hipjit::target_id::TargetId;

const ENTRIES: usize = 50;
const SAMPLES: usize = 30;

fn source(i: usize) -> String {
    format!(
        "#include <hip/hip_runtime.h>\n\
         extern \"C\" __global__ void saxpy_{i}(float a, const float* x, float* y, unsigned n) {{\n\
         unsigned t = blockIdx.x * blockDim.x + threadIdx.x;\n\
         if (t < n) y[t] = a * x[t] + y[t] + {i}.0f;\n}}\n"
    )
}

struct Server(Child);

impl Drop for Server {
    fn drop(&mut self) {
        // SAFETY: kill(2) on the pid of the server this benchmark started.
        unsafe { libc::kill(self.0.id() as i32, libc::SIGKILL) };
        let _ = self.0.wait();
    }
}

fn start_server(dir: &std::path::Path) -> Result<(Server, String), String> {
    let port = TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map_err(|e| format!("no free port: {e}"))?
        .port();
    let child = Command::new("redis-server")
        .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
        .args(["--save", "", "--appendonly", "no", "--daemonize", "no"])
        .arg("--dir")
        .arg(dir)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|e| format!("cannot run redis-server ({e}): run scripts/setup.sh"))?;
    let server = Server(child);
    let url = format!("redis://127.0.0.1:{port}/0");
    let deadline = Instant::now() + Duration::from_secs(10);
    while Instant::now() < deadline {
        let ping = redis::Client::open(url.as_str())
            .and_then(|c| c.get_connection_with_timeout(Duration::from_secs(1)))
            .and_then(|mut c| redis::cmd("PING").query::<String>(&mut c));
        if ping.is_ok() {
            return Ok((server, url));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    Err(format!("redis-server on port {port} did not answer"))
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn jit(root: &std::path::Path, remote: Option<&str>) -> Result<Jit, String> {
    Jit::new(JitOptions {
        cache: CacheLocation::Roots(vec![root.to_path_buf()]),
        remote_cache: match remote {
            Some(url) => RemoteLocation::Server(RemoteConfig::new(url).map_err(|e| e.to_string())?),
            None => RemoteLocation::Disabled,
        },
        ..JitOptions::default()
    })
    .map_err(|e| e.to_string())
}

fn run() -> Result<(), String> {
    let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
    let (_server, url) = start_server(dir.path())?;
    let options = CompileOptions::for_target(TargetId::parse("gfx90a").map_err(|e| e.to_string())?);
    let compile = |jit: &Jit, i: usize, want: Origin| -> Result<Duration, String> {
        let c = jit
            .compile(source(i), &options)
            .map_err(|e| e.to_string())?;
        if c.origin() != want {
            return Err(format!("source {i}: {:?}, expected {want:?}", c.origin()));
        }
        Ok(c.elapsed())
    };

    // Fill the server by compiling the 50 sources with hipcc.
    let writer = jit(&dir.path().join("writer"), Some(&url))?;
    let started = Instant::now();
    for i in 0..ENTRIES {
        compile(&writer, i, Origin::Compiler)?;
    }
    let compiled_all = started.elapsed();

    // Disk hits: a fresh in-process cache on the root holding the entries.
    let disk = jit(&dir.path().join("writer"), None)?;
    let mut disk_hits = Vec::new();
    for _ in 0..SAMPLES {
        disk.clear_memory();
        disk_hits.push(compile(&disk, 0, Origin::Disk)?);
    }
    // Remote hits: an empty root each time.
    let mut remote_hits = Vec::new();
    for s in 0..SAMPLES {
        let j = jit(&dir.path().join(format!("empty-{s}")), Some(&url))?;
        remote_hits.push(compile(&j, 0, Origin::Remote)?);
    }
    // 50 entries fetched into one empty root.
    let fresh = jit(&dir.path().join("fresh"), Some(&url))?;
    let started = Instant::now();
    for i in 0..ENTRIES {
        compile(&fresh, i, Origin::Remote)?;
    }
    let fetched_all = started.elapsed();
    fresh.flush_cache_writes();
    let written_all = started.elapsed();

    let (d, r) = (median(disk_hits), median(remote_hits));
    println!(
        "disk hit (median of {SAMPLES}):   {:>9.1} us",
        d.as_secs_f64() * 1e6
    );
    println!(
        "remote hit (median of {SAMPLES}): {:>9.1} us  ({:.2}x the disk hit)",
        r.as_secs_f64() * 1e6,
        r.as_secs_f64() / d.as_secs_f64()
    );
    println!(
        "{ENTRIES} entries fetched into an empty root: {:.3} s served, {:.3} s until all written \
         to the root; compiled with hipcc: {:.1} s ({:.0}x the written time)",
        fetched_all.as_secs_f64(),
        written_all.as_secs_f64(),
        compiled_all.as_secs_f64(),
        compiled_all.as_secs_f64() / written_all.as_secs_f64()
    );
    Ok(())
}

fn main() {
    if !std::env::args().any(|a| a == "--bench") {
        println!("benches/remote.rs: run with `cargo bench --features redis --bench remote`");
        return;
    }
    if let Err(e) = run() {
        eprintln!("benches/remote.rs: {e}");
        std::process::exit(1);
    }
}
