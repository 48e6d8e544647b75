//! How hipjit runs a compiler: cleared environment, relative paths in a private build
//! directory, timeout killing the whole process group, concurrency cap. The compilers here are
//! shell-script fixtures under tests/fixtures (no real compiler hangs or reports its
//! environment on demand); tests/real/compiler.rs runs the real ones.

use crate::common;

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use hipjit::compiler::{CompileError, CompileOptions, Compiler, CompilerConfig};
use hipjit::target_id::TargetId;

fn compiler(script: &str, home: &Path, timeout: Duration, max: usize) -> Compiler {
    Compiler::new(CompilerConfig {
        hipcc: Some(common::fixture(script)),
        nvcc: None,
        timeout,
        max_concurrent: max,
        env: Some(vec![
            ("HOME".into(), OsString::from(home)),
            ("PATH".into(), "/usr/bin:/bin".into()),
            ("NOT_ALLOWED".into(), "x".into()),
        ]),
        identity_dir: Some(home.join("identity")),
        rtc_worker: None,
    })
    .unwrap_or_else(|e| panic!("{e}"))
}

fn opts() -> CompileOptions {
    CompileOptions::for_target(TargetId::parse("gfx90a").unwrap())
}

fn process_exists(pid: i32) -> bool {
    // A zombie still has a /proc entry; its state letter is Z.
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .map(|s| !s.contains(") Z "))
        .unwrap_or(false)
}

#[test]
fn timeout_kills_the_compiler_and_its_children() {
    let home = tempfile::tempdir().unwrap();
    let c = compiler(
        "fake-hipcc-hang.sh",
        home.path(),
        Duration::from_millis(500),
        1,
    );
    let err = c.compile("int x;", &opts()).unwrap_err();
    assert!(matches!(err, CompileError::Timeout { .. }), "{err}");
    let pid: i32 = std::fs::read_to_string(home.path().join("pid"))
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    // SIGKILL is delivered before kill(2) returns; the orphan is reaped by init shortly after.
    let mut alive = process_exists(pid);
    for _ in 0..100 {
        if !alive {
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
        alive = process_exists(pid);
    }
    assert!(!alive, "the compiler's child {pid} survived the timeout");
}

#[test]
fn compiler_sees_only_allowlisted_variables_and_hipjit_settings() {
    let home = tempfile::tempdir().unwrap();
    let c = compiler("fake-hipcc-env.sh", home.path(), Duration::from_secs(60), 1);
    c.compile("int x;", &opts())
        .unwrap_or_else(|e| panic!("{e}"));
    let env = std::fs::read_to_string(home.path().join("env.txt")).unwrap();
    let mut names: Vec<&str> = env
        .lines()
        .filter_map(|l| l.split_once('=').map(|(k, _)| k))
        .filter(|k| !["PWD", "SHLVL", "_", "OLDPWD"].contains(k)) // set by sh itself
        .collect();
    names.sort();
    assert_eq!(names, ["HOME", "LC_ALL", "PATH", "TMPDIR"], "{env}");
}

#[test]
fn command_line_uses_only_build_directory_relative_paths() {
    let home = tempfile::tempdir().unwrap();
    let inc = home.path().join("odd 'dir' $x");
    std::fs::create_dir_all(&inc).unwrap();
    let c = compiler("fake-hipcc-env.sh", home.path(), Duration::from_secs(60), 1);
    c.compile("int x;", &opts().include_dir(&inc))
        .unwrap_or_else(|e| panic!("{e}"));
    let args = std::fs::read_to_string(home.path().join("args.txt")).unwrap();
    assert!(!args.contains("odd"), "{args}");
    let args: Vec<&str> = args.lines().collect();
    assert!(
        args.windows(2).any(|w| w == ["-I", "include/0"]),
        "{args:?}"
    );
    assert!(args.contains(&"kernel.hip"), "{args:?}");
    assert!(
        args.windows(2).any(|w| w == ["-o", "out.hsaco"]),
        "{args:?}"
    );
    // `b` in the private `hipjit-build-<pid>-...` directory (its parent holds nothing else).
    let pwd = std::fs::read_to_string(home.path().join("pwd.txt")).unwrap();
    let pwd = Path::new(pwd.trim());
    assert_eq!(pwd.file_name().unwrap(), "b", "{}", pwd.display());
    assert!(pwd
        .parent()
        .and_then(Path::file_name)
        .unwrap()
        .to_string_lossy()
        .starts_with("hipjit-build-"));
}

#[test]
fn concurrent_compiles_are_capped() {
    let home = tempfile::tempdir().unwrap();
    let c = Arc::new(compiler(
        "fake-hipcc-exclusive.sh",
        home.path(),
        Duration::from_secs(60),
        1,
    ));
    let threads: Vec<_> = (0..3)
        .map(|i| {
            let c = Arc::clone(&c);
            std::thread::spawn(move || c.compile(format!("int x{i};"), &opts()).map(|_| ()))
        })
        .collect();
    for t in threads {
        t.join().unwrap().unwrap_or_else(|e| panic!("{e}"));
    }
}

#[test]
fn explicit_compiler_that_is_not_executable_is_an_error() {
    let err = Compiler::new(CompilerConfig {
        hipcc: Some(common::fixture("does-not-exist")),
        ..CompilerConfig::default()
    })
    .unwrap_err();
    assert!(err.to_string().contains("does-not-exist"), "{err}");
}

/// A fake hipcc that records each run in `$HOME/calls` (one line per run, its first argument).
fn counting_hipcc(dir: &Path) -> PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let path = dir.join("hipcc");
    std::fs::write(
        &path,
        "#!/bin/sh\necho \"$1\" >> \"$HOME/calls\"\n\
         if [ \"$1\" = --version ]; then echo 'HIP version: 0.0-fake'; fi\n",
    )
    .unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    path
}

fn runs(home: &Path) -> usize {
    std::fs::read_to_string(home.join("calls"))
        .map(|s| s.lines().count())
        .unwrap_or(0)
}

/// The identity is computed once and remembered per user: a second `Compiler::new` (as a fresh
/// process would) starts no compiler; a changed compiler file is noticed.
#[test]
fn compiler_identity_is_remembered_and_a_changed_compiler_recomputes_it() {
    let home = tempfile::tempdir().unwrap();
    let bin = tempfile::tempdir().unwrap();
    let hipcc = counting_hipcc(bin.path());
    let config = || CompilerConfig {
        hipcc: Some(hipcc.clone()),
        env: Some(vec![("HOME".into(), OsString::from(home.path()))]),
        identity_dir: Some(home.path().join("identity")),
        ..CompilerConfig::default()
    };
    let first = Compiler::new(config()).unwrap_or_else(|e| panic!("{e}"));
    let cold = runs(home.path());
    assert!(cold >= 1, "the first identity runs the compiler");
    let second = Compiler::new(config()).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        runs(home.path()),
        cold,
        "a remembered identity runs nothing"
    );
    assert_eq!(first.identity(), second.identity());
    // Same size, new content and times: the fingerprint changes.
    std::thread::sleep(Duration::from_millis(30));
    let text = std::fs::read_to_string(&hipcc)
        .unwrap()
        .replace("0.0-fake", "0.1-fake");
    std::fs::write(&hipcc, text).unwrap();
    let third = Compiler::new(config()).unwrap_or_else(|e| panic!("{e}"));
    assert!(
        runs(home.path()) > cold,
        "a changed compiler is identified again"
    );
    assert_ne!(third.identity().fingerprint, first.identity().fingerprint);
    assert_ne!(third.identity().version, first.identity().version);
}
