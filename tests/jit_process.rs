//! How hipjit runs a compiler: cleared environment, relative paths in a private build
//! directory, timeout killing the whole process group, concurrency cap. The compilers here are
//! shell-script fixtures under tests/fixtures (no real compiler hangs or reports its
//! environment on demand); tests/real_compiler.rs runs the real ones.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use hipjit::compiler::{CompileError, CompileOptions, Compiler, CompilerConfig};
use hipjit::target_id::TargetId;

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name)
}

fn compiler(script: &str, home: &Path, timeout: Duration, max: usize) -> Compiler {
    Compiler::new(CompilerConfig {
        hipcc: Some(fixture(script)),
        timeout,
        max_concurrent: max,
        env: Some(vec![
            ("HOME".into(), OsString::from(home)),
            ("PATH".into(), "/usr/bin:/bin".into()),
            ("NOT_ALLOWED".into(), "x".into()),
        ]),
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
    let pwd = std::fs::read_to_string(home.path().join("pwd.txt")).unwrap();
    assert!(Path::new(pwd.trim())
        .file_name()
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
        hipcc: Some(fixture("does-not-exist")),
        ..CompilerConfig::default()
    })
    .unwrap_err();
    assert!(err.to_string().contains("does-not-exist"), "{err}");
}
