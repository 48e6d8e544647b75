//! Warm-up from history with Debian's real hipcc 5.2.3: `HIPJIT_RECORD` (here
//! `JitOptions::record`) appends one JSON line per distinct compile request, and
//! `hipjit cache warm FILE` replays them, compiling only what no tier holds; the remote tier
//! is a real redis-server started by the test on a free port.

use crate::common;

use std::net::TcpListener;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use hipjit::cache::key::CacheKey;
use hipjit::cache::remote::RemoteConfig;
use hipjit::compiler::selection::CompilerChoice;
use hipjit::compiler::CompileOptions;
use hipjit::jit::explain::Hit;
use hipjit::jit::record::RecordedRequest;
use hipjit::jit::{CacheLocation, Jit, JitOptions, Origin, RecordLocation, RemoteLocation};
use hipjit::target_id::TargetId;

use common::installation::{installation, Compile};

const SCALE: &str = "#include <hip/hip_runtime.h>\n#include \"scale.h\"\n\
    extern \"C\" __global__ void scale(float* x) { x[threadIdx.x] = twice(x[threadIdx.x]) * N; }\n";
const HEADER: &str = "__device__ inline float twice(float v) { return 2.0f * v; }\n";
/// Not UTF-8: a Latin-1 `©` in a comment (recorded as hex).
const LATIN1: &[u8] = b"// \xa9 hipjit\nextern \"C\" __global__ void one(int* x) { x[0] = 1; }\n";
const BROKEN: &str = "extern \"C\" __global__ void bad(int* x) { x[0] = undeclared; }\n";

fn options(include: &Path, n: &str) -> CompileOptions {
    let mut o = CompileOptions::for_target(TargetId::parse("gfx90a").unwrap());
    o.include_dirs = vec![include.to_path_buf()];
    o.defines = vec![("N".into(), Some(n.into()))];
    o
}

fn plain() -> CompileOptions {
    CompileOptions::for_target(TargetId::parse("gfx90a").unwrap())
}

fn jit(root: &Path, record: RecordLocation) -> Jit {
    Jit::new(JitOptions {
        // hipcc, whatever HIPJIT_COMPILER says: these tests are about it.
        compiler: Some(CompilerChoice::Hipcc),
        cache: CacheLocation::Roots(vec![root.to_path_buf()]),
        remote_cache: RemoteLocation::Disabled,
        record,
        ..JitOptions::default()
    })
    .unwrap_or_else(|e| panic!("{e} (Debian's hipcc is installed by scripts/setup.sh)"))
}

fn project(dir: &Path) -> PathBuf {
    let include = dir.join("include");
    std::fs::create_dir_all(&include).unwrap();
    std::fs::write(include.join("scale.h"), HEADER).unwrap();
    include
}

fn lines(file: &Path) -> Vec<serde_json::Value> {
    std::fs::read_to_string(file)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect()
}

/// Record lines written by hand (no compile needed to make them): [`LATIN1`] for gfx90a with
/// hipcc, once with each `N` of `ns`.
fn hand_records(ns: &[&str]) -> String {
    let mut text = String::new();
    for n in ns {
        let mut o = plain();
        o.defines.push(("N".into(), Some(n.to_string())));
        let r = RecordedRequest::new(
            LATIN1,
            &o,
            CompilerChoice::Hipcc,
            None,
            b"",
            &CacheKey([0; 32]),
        );
        text.push_str(&serde_json::to_string(&r).unwrap());
        text.push('\n');
    }
    text
}

/// `hipjit cache warm FILE --json` with this cache root and remote tier (none: unset).
fn warm(file: &Path, root: &Path, remote: Option<&str>, jobs: &str) -> (Output, serde_json::Value) {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_hipjit"));
    cmd.args(["cache", "warm", "--json", "-j", jobs])
        .arg(file)
        .env("HIPJIT_CACHE_DIR", root)
        .env_remove("HIPJIT_RECORD")
        .env_remove("HIPJIT_REMOTE_CACHE_KEY");
    match remote {
        Some(url) => cmd.env("HIPJIT_REMOTE_CACHE", url),
        None => cmd.env_remove("HIPJIT_REMOTE_CACHE"),
    };
    let out = cmd.output().unwrap();
    let json = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "{e}: stdout {} stderr {}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    });
    (out, json)
}

/// `hipjit cache warm --json ARGS FILE` with tests/fixtures/fake-hipcc-act.sh as hipcc (its
/// `$HOME/act.sh` in `home`), the cache root and the per-user memos under `dir`, no remote
/// tier and no recording: its output, its JSON report and its stderr.
fn warm_with_act(
    dir: &Path,
    home: &Path,
    file: &Path,
    args: &[&str],
) -> (Output, serde_json::Value, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_hipjit"))
        .args(["cache", "warm", "--json"])
        .args(args)
        .arg(file)
        .env("HIPJIT_HIPCC", crate::common::fake_hipcc())
        .env("HOME", home)
        .env("XDG_CACHE_HOME", dir.join("xdg"))
        .env("HIPJIT_CACHE_DIR", dir.join("cache"))
        .env_remove("HIPJIT_REMOTE_CACHE")
        .env_remove("HIPJIT_RECORD")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    let v = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {stderr}"));
    (out, v, stderr)
}

/// `hipjit compile --json --compiler hipcc --arch gfx90a -DN=3 -I include scale.hip` run in
/// `project_dir` with the disk cache root `root`, recording into `record` when given (not
/// otherwise), with no remote tier.
fn compile_in_project(project_dir: &Path, root: &Path, record: Option<&Path>) -> Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_hipjit"));
    cmd.args([
        "compile",
        "--json",
        "--compiler",
        "hipcc",
        "--arch",
        "gfx90a",
        "-DN=3",
    ])
    .args(["-I", "include", "scale.hip"])
    .current_dir(project_dir)
    .env("HIPJIT_CACHE_DIR", root)
    .env_remove("HIPJIT_REMOTE_CACHE");
    match record {
        Some(file) => cmd.env("HIPJIT_RECORD", file),
        None => cmd.env_remove("HIPJIT_RECORD"),
    };
    cmd.output().unwrap()
}

#[test]
fn each_distinct_request_is_recorded_once_with_its_source_options_and_key() {
    let dir = tempfile::tempdir().unwrap();
    let include = project(dir.path());
    let file = dir.path().join("requests.jsonl");
    let cache = dir.path().join("cache");
    let first = jit(&cache, RecordLocation::Disabled)
        .compile(SCALE, &options(&include, "3"))
        .unwrap();
    assert_eq!(first.origin(), Origin::Compiler);
    // A disk hit is recorded, the same request again (a memory hit) is not; then another
    // define (a compile), then bytes.
    let j = jit(&cache, RecordLocation::File(file.clone()));
    let hit = j.compile(SCALE, &options(&include, "3")).unwrap();
    assert_eq!(hit.origin(), Origin::Disk);
    j.compile(SCALE, &options(&include, "3")).unwrap();
    j.compile(SCALE, &options(&include, "4")).unwrap();
    j.compile(LATIN1, &plain()).unwrap();
    // Another Jit of this process serving a recorded request does not record it again.
    let again = jit(&cache, RecordLocation::File(file.clone()))
        .compile(SCALE, &options(&include, "4"))
        .unwrap();
    assert_eq!(again.origin(), Origin::Disk);

    let l = lines(&file);
    assert_eq!(l.len(), 3, "{l:#?}");
    assert_eq!(l[0]["schema_version"], 2);
    assert_eq!(
        l[0]["direct_key"],
        j.source_key(SCALE, &options(&include, "3"))
            .unwrap()
            .to_hex()
    );
    assert_eq!(l[0]["source"], SCALE);
    assert_eq!(l[0]["source_encoding"], "utf-8");
    assert_eq!(l[0]["targets"], serde_json::json!(["gfx90a"]));
    assert_eq!(l[0]["compiler"], "hipcc");
    assert_eq!(l[0]["compiler_used"], "hipcc");
    assert_eq!(l[0]["options"]["defines"], serde_json::json!([["N", "3"]]));
    assert_eq!(
        l[0]["options"]["include_dirs"],
        serde_json::json!([include.to_str().unwrap()])
    );
    assert_eq!(l[0]["options"]["std"], "c++17");
    assert_eq!(l[0]["options"]["opt"], "-O3");
    assert_eq!(l[1]["options"]["defines"], serde_json::json!([["N", "4"]]));
    assert_eq!(l[2]["source_encoding"], "hex");
    assert_eq!(
        l[2]["source"],
        LATIN1
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect::<String>()
    );
}

#[test]
fn an_unwritable_record_file_is_one_warning_and_never_a_failed_compile() {
    let dir = tempfile::tempdir().unwrap();
    // A directory where the file should be; then a FIFO, which must not block.
    let as_dir = dir.path().join("is-a-directory");
    std::fs::create_dir(&as_dir).unwrap();
    let fifo = dir.path().join("fifo");
    let c = std::ffi::CString::new(fifo.as_os_str().as_bytes()).unwrap();
    // SAFETY: mkfifo on a NUL-terminated path this test owns.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
    for file in [as_dir, fifo] {
        let j = jit(
            &dir.path().join("cache"),
            RecordLocation::File(file.clone()),
        );
        let first = j.compile(LATIN1, &plain()).unwrap();
        let warned: Vec<_> = first
            .cache_warnings()
            .iter()
            .filter(|w| w.contains("not recorded"))
            .collect();
        assert_eq!(warned.len(), 1, "{:?}", first.cache_warnings());
        assert!(warned[0].contains(file.to_str().unwrap()), "{}", warned[0]);
        let mut o = plain();
        o.defines.push(("OTHER".into(), None));
        let second = j.compile(LATIN1, &o).unwrap();
        assert!(
            !second
                .cache_warnings()
                .iter()
                .any(|w| w.contains("not recorded")),
            "warned twice: {:?}",
            second.cache_warnings()
        );
    }
}

#[test]
fn warm_compiles_what_is_missing_skips_bad_lines_and_names_failures() {
    let dir = tempfile::tempdir().unwrap();
    let include = project(dir.path());
    let file = dir.path().join("requests.jsonl");
    let j = jit(
        &dir.path().join("built"),
        RecordLocation::File(file.clone()),
    );
    j.compile(SCALE, &options(&include, "3")).unwrap();
    j.compile(LATIN1, &plain()).unwrap();
    // A request recorded twice (two processes), a line that is not a record, a line from a
    // future hipjit, and a request that does not compile.
    let mut text = std::fs::read_to_string(&file).unwrap();
    let first_line = text.lines().next().unwrap().to_string();
    text.push_str(&first_line);
    text.push_str("\n{\"schema_version\": 1, \"source\": 3}\n");
    text.push_str(&first_line.replace("\"schema_version\":2", "\"schema_version\":7"));
    text.push('\n');
    let broken = RecordedRequest::new(
        BROKEN.as_bytes(),
        &plain(),
        CompilerChoice::Hipcc,
        None,
        b"",
        &CacheKey([0; 32]),
    );
    text.push_str(&serde_json::to_string(&broken).unwrap());
    text.push('\n');
    std::fs::write(&file, text).unwrap();

    let fresh = dir.path().join("fresh");
    let (out, json) = warm(&file, &fresh, None, "2");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{json:#} {stderr}");
    assert_eq!(json["requests"], 3, "{json:#}");
    assert_eq!(json["duplicates"], 1);
    assert_eq!(json["compiled"], 2);
    assert_eq!(json["present"], 0);
    assert_eq!(json["failed"], 1);
    let bad: Vec<u64> = json["bad_lines"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| b["line"].as_u64().unwrap())
        .collect();
    assert_eq!(bad, [4, 5], "{json:#}");
    assert!(json["bad_lines"][1]["reason"]
        .as_str()
        .unwrap()
        .contains("schema_version 7"));
    let failed: Vec<&serde_json::Value> = json["results"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["ok"] == false)
        .collect();
    assert_eq!(failed.len(), 1);
    assert_eq!(failed[0]["line"], 6);
    assert!(
        failed[0]["error"].as_str().unwrap().contains("undeclared"),
        "{failed:?}"
    );
    let file_text = file.display().to_string();
    assert!(
        stderr.contains(&format!(
            "{file_text}:4: line skipped, nothing warmed for it: source: invalid type"
        )),
        "{stderr}"
    );
    assert!(stderr.contains(&format!("{file_text}:6:")), "{stderr}");
    // The warmed root serves the recording's keys.
    let keys: Vec<&str> = json["results"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|r| r["key"].as_str())
        .collect();
    let served = jit(&fresh, RecordLocation::Disabled)
        .compile(SCALE, &options(&include, "3"))
        .unwrap();
    assert_eq!(served.origin(), Origin::Disk);
    assert!(keys.contains(&served.key().to_hex().as_str()));

    // Again: everything present on disk, nothing compiled.
    let (_, again) = warm(&file, &fresh, None, "1");
    assert_eq!(again["compiled"], 0, "{again:#}");
    assert_eq!(again["present_in"]["disk"], 2);
}

// ---- a real redis-server -------------------------------------------------------------------

struct Server {
    child: Option<Child>,
    port: u16,
    _dir: tempfile::TempDir,
}

impl Server {
    /// redis-server on 127.0.0.1 at a free port, with a private directory; stopped (only it)
    /// when dropped.
    fn start() -> Server {
        let dir = tempfile::tempdir().unwrap();
        for _ in 0..5 {
            let port = TcpListener::bind("127.0.0.1:0")
                .unwrap()
                .local_addr()
                .unwrap()
                .port();
            let mut child = Command::new("redis-server")
                .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
                .args(["--save", "", "--appendonly", "no", "--daemonize", "no"])
                .arg("--dir")
                .arg(dir.path())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .unwrap_or_else(|e| {
                    panic!("cannot run redis-server ({e}): install it with scripts/setup.sh")
                });
            let deadline = Instant::now() + Duration::from_secs(10);
            while Instant::now() < deadline {
                if child.try_wait().unwrap().is_some() {
                    break; // the port was taken: another one
                }
                let ping = redis::Client::open(format!("redis://127.0.0.1:{port}/0"))
                    .and_then(|c| c.get_connection_with_timeout(Duration::from_secs(1)))
                    .and_then(|mut c| redis::cmd("PING").query::<String>(&mut c));
                if ping.is_ok() {
                    return Server {
                        child: Some(child),
                        port,
                        _dir: dir,
                    };
                }
                std::thread::sleep(Duration::from_millis(20));
            }
            let _ = child.kill();
            let _ = child.wait();
        }
        panic!("redis-server did not start on a free port in five tries");
    }

    fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/0", self.port)
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            // SAFETY: kill(2) on the pid of a child this test spawned and has not reaped.
            unsafe { libc::kill(c.id() as i32, libc::SIGKILL) };
            let _ = c.wait();
        }
    }
}

#[test]
fn an_entry_present_in_the_remote_tier_counts_as_present() {
    let server = Server::start();
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("requests.jsonl");
    // Records written by hand: no compile needed to make them.
    std::fs::write(&file, hand_records(&["1", "2"])).unwrap();

    // Node one compiles and publishes to the server.
    let (out, one) = warm(&file, &dir.path().join("node-1"), Some(&server.url()), "2");
    assert!(out.status.success(), "{one:#}");
    assert_eq!(one["compiled"], 2, "{one:#}");
    // Node two, with an empty disk, finds both in the remote tier.
    let node2 = dir.path().join("node-2");
    let (out, two) = warm(&file, &node2, Some(&server.url()), "2");
    assert!(out.status.success(), "{two:#}");
    assert_eq!(two["compiled"], 0, "{two:#}");
    assert_eq!(two["present"], 2);
    assert_eq!(two["present_in"]["remote"], 2);
    // `explain` sees the same: a third node with an empty disk hits in the remote tier.
    let mut o = plain();
    o.defines.push(("N".into(), Some("1".into())));
    let explained = Jit::new(JitOptions {
        compiler: Some(CompilerChoice::Hipcc),
        cache: CacheLocation::Roots(vec![dir.path().join("node-3")]),
        remote_cache: RemoteLocation::Server(RemoteConfig::new(server.url()).unwrap()),
        record: RecordLocation::Disabled,
        ..JitOptions::default()
    })
    .unwrap()
    .explain(LATIN1, &o)
    .unwrap();
    assert!(
        matches!(explained.hit, Some(Hit::Remote(_))),
        "{explained:#?}"
    );
    // ... and node two copied them to its disk.
    let (_, three) = warm(&file, &node2, None, "1");
    assert_eq!(three["present_in"]["disk"], 2, "{three:#}");
    assert_eq!(three["compiled"], 0);
}

#[test]
fn an_interrupted_warm_stops_its_compilers_and_exits_130() {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("home");
    std::fs::create_dir_all(&home).unwrap();
    let hipcc = installation(&dir.path().join("rocm"), "0.0-slow", Compile::Sleep);
    let file = dir.path().join("requests.jsonl");
    std::fs::write(&file, hand_records(&["1", "2"])).unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_hipjit"))
        .args(["cache", "warm", "-j", "2"])
        .arg(&file)
        .env("HIPJIT_HIPCC", &hipcc)
        .env("HOME", &home)
        .env("XDG_CACHE_HOME", dir.path().join("xdg"))
        .env("HIPJIT_CACHE_DIR", dir.path().join("cache"))
        .env_remove("HIPJIT_REMOTE_CACHE")
        .env_remove("HIPJIT_RECORD")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let started = home.join("started");
    let deadline = Instant::now() + Duration::from_secs(60);
    while !std::fs::read_to_string(&started).is_ok_and(|s| s.lines().count() == 2) {
        assert!(Instant::now() < deadline, "the compilers did not start");
        assert!(child.try_wait().unwrap().is_none(), "warm ended early");
        std::thread::sleep(Duration::from_millis(20));
    }
    // SAFETY: kill(2) on the pid of a child this test spawned and has not reaped.
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let deadline = Instant::now() + Duration::from_secs(20);
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        assert!(Instant::now() < deadline, "warm did not end after SIGINT");
        std::thread::sleep(Duration::from_millis(20));
    };
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(status.code(), Some(130), "{status:?}: {stderr}");
    assert!(stderr.contains("interrupted by SIGINT"), "{stderr}");
    // The compilers are gone (their process groups killed), not left sleeping.
    for pid in std::fs::read_to_string(&started).unwrap().lines() {
        let pid: i32 = pid.trim().parse().unwrap();
        let deadline = Instant::now() + Duration::from_secs(5);
        // SAFETY: kill(2) with signal 0 only checks whether the process exists.
        while unsafe { libc::kill(pid, 0) } == 0 {
            assert!(Instant::now() < deadline, "compiler {pid} still runs");
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

/// A compile whose result cannot be stored (a header it read changed while it ran) warmed
/// nothing: `cache warm` says so per line (`"cached": false`), counts it apart from the
/// compiled ones, and exits 1. The compiler is tests/fixtures/fake-hipcc-act.sh, whose
/// `$HOME/act.sh` copies a real gfx90a code object, lists the header as read, and rewrites it.
#[test]
fn a_compile_that_could_not_be_cached_is_not_counted_as_warmed() {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("home");
    std::fs::create_dir_all(&home).unwrap();
    let include = project(dir.path());
    let header = include.join("scale.h");
    let code_object = crate::common::code_object("single-gfx90a.hsaco");
    std::fs::write(
        home.join("act.sh"),
        format!(
            "cp {} out.hsaco\nfor a; do case \"$a\" in *.hip) src=\"$a\";; esac; done\n\
             echo \"out.hsaco: $src {h}\" > deps.d\nsleep 0.05\necho '// edited' >> {h}\n",
            code_object.display(),
            h = header.display()
        ),
    )
    .unwrap();
    let r = RecordedRequest::new(
        SCALE.as_bytes(),
        &options(&include, "2"),
        CompilerChoice::Hipcc,
        None,
        b"",
        &CacheKey([0; 32]),
    );
    let file = dir.path().join("requests.jsonl");
    std::fs::write(&file, serde_json::to_string(&r).unwrap() + "\n").unwrap();
    let (out, v, stderr) = warm_with_act(dir.path(), &home, &file, &[]);
    assert_eq!(v["results"][0]["ok"], true, "{v} {stderr}");
    assert_eq!(v["results"][0]["cached"], false, "{v} {stderr}");
    assert_eq!(
        (v["compiled"].as_u64(), v["not_cached"].as_u64()),
        (Some(0), Some(1)),
        "{v}"
    );
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("not cached"), "{stderr}");
}

/// A request recorded by a process whose include directories were relative (`hipjit compile`
/// run in the project with `-I include`) is recorded with absolute ones, so that warm run
/// from another directory finds the headers.
#[test]
fn relative_include_directories_are_recorded_absolute_and_warm_runs_from_anywhere() {
    let dir = tempfile::tempdir().unwrap();
    let project_dir = dir.path().join("project");
    project(&project_dir);
    std::fs::write(project_dir.join("scale.hip"), SCALE).unwrap();
    let file = dir.path().join("requests.jsonl");
    let out = compile_in_project(&project_dir, &dir.path().join("built"), Some(&file));
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let l = lines(&file);
    assert_eq!(l.len(), 1, "{l:#?}");
    // The -I directory, then the source's own directory (`.` here), both absolute.
    let project_abs = std::path::absolute(&project_dir).unwrap();
    assert_eq!(
        l[0]["options"]["include_dirs"],
        serde_json::json!([
            project_abs.join("include").to_str().unwrap(),
            project_abs.to_str().unwrap()
        ])
    );
    // Replayed from another directory into a fresh root: compiled, and that root serves the
    // request as the project compiles it.
    let fresh = dir.path().join("fresh");
    let elsewhere = dir.path().join("elsewhere");
    std::fs::create_dir(&elsewhere).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_hipjit"))
        .args(["cache", "warm", "--json"])
        .arg(&file)
        .current_dir(&elsewhere)
        .env("HIPJIT_CACHE_DIR", &fresh)
        .env_remove("HIPJIT_RECORD")
        .env_remove("HIPJIT_REMOTE_CACHE")
        .output()
        .unwrap();
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(
        out.status.success(),
        "{json:#} {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(json["compiled"], 1, "{json:#}");
    let again = compile_in_project(&project_dir, &fresh, None);
    let json: serde_json::Value = serde_json::from_slice(&again.stdout).unwrap();
    assert_eq!(json["results"][0]["cache"], "disk", "{json:#}");
}

/// Dumps (`dump_isa`, `dump_llvm_ir`: `-save-temps`) make clang compile a preprocessed `.cui`
/// file whose compile job writes the dependency list last, naming that file alone: the result
/// was never cached (the `.cui` "cannot be read after the compile", blamed on a changed input)
/// and warm exited 1. Warmed, it is now cached, served with its dumps, and an edit of a header
/// it read is a miss.
#[test]
fn a_compile_with_dumps_is_warmed_cached_and_its_headers_tracked() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("root");
    let include = project(dir.path());
    let mut o = options(&include, "2");
    o.dump_isa = true;
    o.dump_llvm_ir = true;
    let r = RecordedRequest::new(
        SCALE.as_bytes(),
        &o,
        CompilerChoice::Hipcc,
        None,
        b"",
        &CacheKey([0; 32]),
    );
    let file = dir.path().join("requests.jsonl");
    std::fs::write(&file, serde_json::to_string(&r).unwrap() + "\n").unwrap();
    let (out, v) = warm(&file, &root, None, "1");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{v} {stderr}");
    assert_eq!(v["compiled"], 1, "{v} {stderr}");
    assert_eq!(v["results"][0]["cached"], true, "{v} {stderr}");

    let hit = jit(&root, RecordLocation::Disabled)
        .compile(SCALE, &o)
        .unwrap();
    assert_eq!(hit.origin(), Origin::Disk, "{:?}", hit.cache_warnings());
    assert!(hit
        .isa()
        .expect("ISA dump")
        .contains(".amdhsa_kernel scale"));
    assert_eq!(&hit.llvm_ir().expect("LLVM IR dump")[..4], b"BC\xc0\xde");

    // `twice` now triples: a header the compile read, so a miss, and cached again.
    std::fs::write(include.join("scale.h"), HEADER.replace("2.0f", "3.0f")).unwrap();
    let edited = jit(&root, RecordLocation::Disabled)
        .compile(SCALE, &o)
        .unwrap();
    assert_eq!(edited.origin(), Origin::Compiler);
    assert!(
        edited.cache_warnings().is_empty(),
        "{:?}",
        edited.cache_warnings()
    );
    assert_ne!(edited.isa(), hit.isa());
}

/// `cache warm -j 2` runs one thread more than its jobs (it keys and publishes while the
/// workers compile) and still at most two hipRTC workers: five slow requests (the stand-in
/// hipRTC of tests/fixtures/fake_hiprtc.c sleeps a second on `HIPJIT_SLOW`) start two
/// `rtc-worker` processes (`strace -f -e trace=execve`), each request reaching one.
#[test]
fn warm_j2_runs_at_most_two_hiprtc_workers() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("requests.jsonl");
    let mut text = String::new();
    for i in 0..5 {
        let source = format!("// HIPJIT_SLOW {i}\nextern \"C\" __global__ void k() {{}}\n");
        let r = RecordedRequest::new(
            source.as_bytes(),
            &plain(),
            CompilerChoice::HipRtc,
            None,
            b"",
            &CacheKey([0; 32]),
        );
        text.push_str(&serde_json::to_string(&r).unwrap());
        text.push('\n');
    }
    std::fs::write(&file, text).unwrap();
    let log = dir.path().join("strace.log");
    let out = Command::new("strace")
        .args(["-f", "-e", "trace=execve", "-e", "signal=none", "-o"])
        .arg(&log)
        .arg(env!("CARGO_BIN_EXE_hipjit"))
        .args(["cache", "warm", "--json", "-j", "2"])
        .arg(&file)
        .env("HIPJIT_CACHE_DIR", dir.path().join("cache"))
        .env("HIPJIT_HIPRTC_LIBRARY", common::fixture_lib::fake_hiprtc())
        .env_remove("HIPJIT_RECORD")
        .env_remove("HIPJIT_REMOTE_CACHE")
        .output()
        .unwrap_or_else(|e| panic!("cannot run strace ({e}): apt-get install strace"));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "{e}: stdout {} stderr {}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    });
    let results = v["results"].as_array().unwrap();
    assert_eq!(results.len(), 5, "{v:#}");
    for r in results {
        // Each reached the stand-in and came back: its 4 bytes are no code object.
        let error = r["error"].as_str().unwrap_or_default();
        assert!(
            !error.contains("worker") && !error.contains("signal"),
            "{v:#}"
        );
    }
    let log = std::fs::read_to_string(&log).unwrap();
    let workers = log
        .lines()
        .filter(|l| l.contains("execve(") && l.contains("\"rtc-worker\", \"--serve\""))
        .count();
    assert_eq!(workers, 2, "{log}");
}

/// `cache warm -j 2` runs at most two compiles at once when its requests need two JITs (here
/// two callers' signatures, each JIT with its own hipcc and so its own bound of two): the
/// thread more than the jobs is only for requests that one bound holds. The compiler is
/// tests/fixtures/fake-hipcc-act.sh, whose `$HOME/act.sh` notes its process in
/// `$HOME/running` for half a second and counts the compiles running beside it as it starts.
#[test]
fn warm_j2_runs_at_most_two_compiles_over_two_jits() {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("home");
    let running = home.join("running");
    std::fs::create_dir_all(&running).unwrap();
    let code_object = crate::common::code_object("single-gfx90a.hsaco");
    std::fs::write(
        home.join("act.sh"),
        format!(
            "touch {r}/$$\nls {r} | wc -l >> {h}/counts\nsleep 0.5\nrm {r}/$$\n\
             cp {co} out.hsaco\nfor a; do case \"$a\" in *.hip) src=\"$a\";; esac; done\n\
             echo \"out.hsaco: $src\" > deps.d\n",
            r = running.display(),
            h = home.display(),
            co = code_object.display(),
        ),
    )
    .unwrap();
    let mut text = String::new();
    for i in 0..6 {
        let source = format!("extern \"C\" __global__ void k{i}() {{}}\n");
        let signature: &[u8] = if i % 2 == 0 { b"one" } else { b"two" };
        let r = RecordedRequest::new(
            source.as_bytes(),
            &plain(),
            CompilerChoice::Hipcc,
            None,
            signature,
            &CacheKey([0; 32]),
        );
        text.push_str(&serde_json::to_string(&r).unwrap());
        text.push('\n');
    }
    let file = dir.path().join("requests.jsonl");
    std::fs::write(&file, text).unwrap();
    let (_, v, stderr) = warm_with_act(dir.path(), &home, &file, &["-j", "2"]);
    assert_eq!(v["compiled"].as_u64(), Some(6), "{v} {stderr}");
    let counts: Vec<u32> = std::fs::read_to_string(home.join("counts"))
        .unwrap()
        .lines()
        .map(|l| l.trim().parse().unwrap())
        .collect();
    assert_eq!(counts.len(), 6, "{counts:?}");
    assert!(
        counts.iter().all(|&c| c <= 2),
        "more than two compiles at once under -j 2: {counts:?}"
    );
}
