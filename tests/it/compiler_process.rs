//! How hipjit runs a compiler that misbehaves: output that stays open past the compiler's
//! exit, endless output, an output file that is a device, a build directory others could
//! read, and hipjit itself killed mid-compile. The "compiler" is tests/fixtures/
//! fake-hipcc-act.sh, which runs a script each test writes (no real compiler misbehaves on
//! demand); every wait here has a deadline so that a hang fails the test.

use crate::common;
use common::fake_hipcc;

use std::ffi::OsString;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use hipjit::compiler::{CompileError, CompileOptions, Compiler, CompilerConfig};
use hipjit::file_read::TEXT_OUTPUT_LIMIT;
use hipjit::target_id::TargetId;

/// A compiler whose every compile runs `act` (sh) in the build directory, `$HOME` = `home`.
fn compiler(home: &Path, act: &str, timeout: Duration) -> Compiler {
    std::fs::write(home.join("act.sh"), act).unwrap();
    Compiler::new(CompilerConfig {
        hipcc: Some(fake_hipcc()),
        nvcc: None,
        timeout,
        max_concurrent: 1,
        env: Some(vec![
            ("HOME".into(), OsString::from(home)),
            ("PATH".into(), "/usr/bin:/bin".into()),
        ]),
        identity_dir: Some(home.join("identity")),
        rtc_worker: None,
    })
    .unwrap_or_else(|e| panic!("{e}"))
}

fn opts() -> CompileOptions {
    CompileOptions::for_target(TargetId::parse("gfx90a").unwrap())
}

/// Compiles on another thread; fails the test when it takes longer than `limit`.
fn compile_within(c: Compiler, limit: Duration) -> Result<(), CompileError> {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(c.compile("int x;", &opts()).map(|_| ()));
    });
    rx.recv_timeout(limit)
        .unwrap_or_else(|_| panic!("the compile did not return within {limit:?}"))
}

fn read_pid(file: &Path) -> i32 {
    let started = Instant::now();
    loop {
        if let Some(p) = std::fs::read_to_string(file)
            .ok()
            .and_then(|s| s.trim().parse().ok())
        {
            return p;
        }
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "no {}",
            file.display()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The live (not zombie) processes whose process group is `pgid`.
fn group_members(pgid: i32) -> Vec<i32> {
    let mut out = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = e.file_name().to_string_lossy().parse::<i32>() else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
            continue;
        };
        // pid (comm) state ppid pgrp ...; comm may hold spaces and parentheses.
        let Some(rest) = stat.rsplit_once(") ").map(|(_, r)| r) else {
            continue;
        };
        let f: Vec<&str> = rest.split_whitespace().collect();
        if f.len() > 2 && f[0] != "Z" && f[2] == pgid.to_string() {
            out.push(pid);
        }
    }
    out
}

#[test]
fn the_timeout_covers_output_held_open_by_a_process_that_left_the_group() {
    let home = tempfile::tempdir().unwrap();
    // The compiler exits at once, but a descendant in its own session keeps stdout and
    // stderr open for 30 s.
    // The script exits only once the sleeper is in a session of its own: until then, hipjit's
    // kill of the compiler's process group at its exit could still reach it (a race that made
    // this test fail now and then).
    let act = format!(
        "setsid sleep 30 &\npid=$!\necho $pid > {}/pid\n\
         while [ \"$(cut -d' ' -f6 /proc/$pid/stat)\" = \"$(cut -d' ' -f6 /proc/$$/stat)\" ]; do sleep 0.01; done\n\
         exit 0\n",
        home.path().display()
    );
    let c = compiler(home.path(), &act, Duration::from_secs(1));
    let started = Instant::now();
    let r = compile_within(c, Duration::from_secs(15));
    let pid = read_pid(&home.path().join("pid"));
    // SAFETY: kill of the sleep this test started.
    unsafe { libc::kill(pid, libc::SIGKILL) };
    let e = r.expect_err("output still open at the deadline");
    assert!(matches!(e, CompileError::Timeout { .. }), "{e}");
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "{:?}",
        started.elapsed()
    );
}

#[test]
fn compiler_output_beyond_the_limit_is_dropped_and_said_so() {
    let home = tempfile::tempdir().unwrap();
    let act = "head -c 67108864 /dev/zero | tr '\\000' x >&2\nexit 1\n";
    let c = compiler(home.path(), act, Duration::from_secs(60));
    let e = compile_within(c, Duration::from_secs(60)).expect_err("exit 1");
    let CompileError::Failed(f) = e else {
        panic!("expected a failed compile, got {e}")
    };
    assert!(
        f.stderr.len() as u64 <= TEXT_OUTPUT_LIMIT + 200,
        "kept {} bytes of stderr",
        f.stderr.len()
    );
    assert!(
        f.stderr.ends_with(&format!(
            "[hipjit: {} more bytes of standard error not kept (limit {TEXT_OUTPUT_LIMIT} bytes)]\n",
            (64u64 << 20) - TEXT_OUTPUT_LIMIT
        )),
        "{}",
        &f.stderr[f.stderr.len().saturating_sub(200)..]
    );
}

#[test]
fn a_compiler_output_that_is_a_link_to_dev_zero_is_refused() {
    let home = tempfile::tempdir().unwrap();
    let c = compiler(
        home.path(),
        "ln -s /dev/zero out.hsaco\nexit 0\n",
        Duration::from_secs(60),
    );
    let e = compile_within(c, Duration::from_secs(30)).expect_err("not a file");
    assert!(matches!(e, CompileError::NoOutput { .. }), "{e}");
    assert!(e.to_string().contains("character device"), "{e}");
}

#[test]
fn the_build_directory_is_private_whatever_the_umask() {
    let home = tempfile::tempdir().unwrap();
    let act = format!("stat -c %a . > {}/mode\nexit 1\n", home.path().display());
    let c = compiler(home.path(), &act, Duration::from_secs(60));
    // SAFETY: umask has no preconditions; 022 is the usual default that made 0755.
    let old = unsafe { libc::umask(0o022) };
    let _ = compile_within(c, Duration::from_secs(30));
    // SAFETY: as above.
    unsafe { libc::umask(old) };
    let mode = std::fs::read_to_string(home.path().join("mode")).unwrap();
    assert_eq!(mode.trim(), "700");
}

/// hipjit killed with SIGKILL mid-compile: 2 s later no process of the compiler's group is
/// left (the compiler, the `sh`, and the `sleep` it started).
#[test]
fn the_compiler_and_its_children_die_with_hipjit() {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("home");
    std::fs::create_dir(&home).unwrap();
    std::fs::write(
        home.join("act.sh"),
        format!(
            "echo $$ > {h}/pgid\nsleep 600 &\nsleep 600\n",
            h = home.display()
        ),
    )
    .unwrap();
    std::fs::write(dir.path().join("k.hip"), "int x;\n").unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_hipjit"))
        .args(["compile", "--compiler", "hipcc", "--arch", "gfx90a"])
        .arg(dir.path().join("k.hip"))
        .env("HIPJIT_CACHE_DIR", dir.path().join("cache"))
        .env("HIPJIT_HIPCC", fake_hipcc())
        .env("HOME", &home)
        .env("PATH", "/usr/bin:/bin")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let pgid = read_pid(&home.join("pgid"));
    let started = Instant::now();
    while group_members(pgid).len() < 3 && started.elapsed() < Duration::from_secs(20) {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(group_members(pgid).len() >= 2, "the compile is running");
    child.kill().unwrap();
    child.wait().unwrap();
    std::thread::sleep(Duration::from_secs(2));
    let left = group_members(pgid);
    for p in &left {
        // SAFETY: cleaning up what the test started.
        unsafe { libc::kill(*p, libc::SIGKILL) };
    }
    assert!(left.is_empty(), "processes of the group left: {left:?}");
}

#[test]
fn build_directories_of_dead_processes_are_swept() {
    let dir = tempfile::tempdir().unwrap();
    let tmp = dir.path().join("tmp");
    std::fs::create_dir(&tmp).unwrap();
    // The ID of a process that has exited.
    let mut t = Command::new("true").spawn().unwrap();
    let dead = t.id();
    t.wait().unwrap();
    let left = tmp.join(format!("hipjit-build-{dead}-abc123"));
    std::fs::create_dir(&left).unwrap();
    std::fs::write(left.join("kernel.hip"), "int x;").unwrap();
    let live = tmp.join(format!("hipjit-build-{}-abc123", std::process::id()));
    std::fs::create_dir(&live).unwrap();
    let home = dir.path().join("home");
    std::fs::create_dir(&home).unwrap();
    std::fs::write(home.join("act.sh"), "exit 1\n").unwrap();
    std::fs::write(dir.path().join("k.hip"), "int x;\n").unwrap();
    let o = Command::new(env!("CARGO_BIN_EXE_hipjit"))
        .args(["compile", "--compiler", "hipcc", "--arch", "gfx90a"])
        .arg(dir.path().join("k.hip"))
        .env("HIPJIT_CACHE_DIR", dir.path().join("cache"))
        .env("HIPJIT_HIPCC", fake_hipcc())
        .env("HOME", &home)
        .env("TMPDIR", &tmp)
        .output()
        .unwrap();
    assert_eq!(
        o.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(
        !left.exists(),
        "the dead process's build directory is still there"
    );
    assert!(
        live.exists(),
        "a live process's build directory was removed"
    );
}
