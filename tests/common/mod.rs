//! Setup shared by the integration tests (`mod common;` in each): stand-in compiler
//! installations and the `Jit` that uses one, the toolchains scripts/setup.sh installs, the
//! fixture libraries built with `cc`. Each test binary uses some of it.
#![allow(dead_code)]

pub mod cli;
pub mod fixture_lib;
pub mod in_memory_headers;
pub mod installation;
pub mod source_name;
pub mod strace;
pub mod toolchain;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use hipjit::compiler::CompilerConfig;

/// `tests/fixtures/<name>`: the stand-in compilers, runtimes and drivers.
pub fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name)
}

/// `tests/data/code-objects/<name>`: real code objects, checked in.
pub fn code_object(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/code-objects")
        .join(name)
}

/// `tests/fixtures/fake-hipcc-act.sh`: a "hipcc" that answers `--version`, `-###` and
/// `-fsyntax-only` and otherwise runs the test's own script, `$HOME/act.sh`, in the build
/// directory.
pub fn fake_hipcc() -> PathBuf {
    fixture("fake-hipcc-act.sh")
}

/// The compiler settings that run [`fake_hipcc`] with `$HOME` = `home` (where its act.sh is),
/// `PATH` = `/usr/bin:/bin` and nothing else of this process's environment.
pub fn fake_hipcc_config(home: &Path) -> CompilerConfig {
    CompilerConfig {
        hipcc: Some(fake_hipcc()),
        env: Some(vec![
            ("HOME".into(), home.as_os_str().to_owned()),
            ("PATH".into(), "/usr/bin:/bin".into()),
        ]),
        ..CompilerConfig::default()
    }
}

/// How many compiles a fake hipcc ran with `$HOME` = `home`: the lines its act.sh appended
/// to `home/compiles` (`echo $$ >> "$HOME/compiles"`), 0 before the first.
pub fn compiles(home: &Path) -> usize {
    std::fs::read_to_string(home.join("compiles")).map_or(0, |s| s.lines().count())
}

/// Writes `contents` to `path`, then waits until the filesystem's clock
/// (`manifest::filesystem_now`) has passed the file's change time, so that a compile started
/// next vouches for it. A compile that starts within the clock tick of a write to a file it
/// reads is not published (the manifest's "too new" rule), so a test that writes a header and
/// then expects the compile's result to be a hit writes it this way. Waits at most 2 s.
pub fn write_settled(path: &Path, contents: &str) {
    use std::os::unix::fs::MetadataExt;
    std::fs::write(path, contents).unwrap();
    let m = std::fs::metadata(path).unwrap();
    let changed =
        std::time::UNIX_EPOCH + std::time::Duration::new(m.ctime() as u64, m.ctime_nsec() as u32);
    let dir = path.parent().unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(2);
    while hipjit::cache::manifest::filesystem_now(dir) <= changed {
        assert!(
            std::time::Instant::now() < deadline,
            "the filesystem clock did not pass {path:?}'s change time in 2 s"
        );
        std::thread::sleep(std::time::Duration::from_millis(2));
    }
}

/// The name libtest runs the test `name` of the module `module` under (pass `module_path!()`):
/// the module's path without the crate's name, then `name`; for `--exact` when a test runs
/// another test of its binary in a child process.
pub fn test_name(module: &str, name: &str) -> String {
    match module.split_once("::") {
        Some((_crate, path)) => format!("{path}::{name}"),
        None => name.to_owned(),
    }
}

/// This test binary running only its ignored test `name` of `module` (pass `module_path!()`),
/// alone on one thread, with libtest's capture off and its stdout and stderr piped to the
/// caller: a child process of a test; the caller adds its environment.
pub fn child_test(module: &str, name: &str) -> Command {
    let mut cmd = Command::new(std::env::current_exe().unwrap());
    cmd.args([
        "--exact",
        &test_name(module, name),
        "--ignored",
        "--nocapture",
        "--test-threads=1",
    ])
    .stdout(Stdio::piped())
    .stderr(Stdio::piped());
    cmd
}

/// The stdout of `child` (spawned with its stdout and stderr piped) once it has ended, which
/// it must have done successfully (its stdout and stderr in the panic otherwise).
pub fn child_stdout(child: Child) -> String {
    let out = child.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "child failed: {stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}

/// Makes a FIFO at `path` (mode 0600); panics when mkfifo fails.
pub fn mkfifo(path: &Path) {
    let c = std::ffi::CString::new(path.as_os_str().as_encoded_bytes()).unwrap();
    // SAFETY: mkfifo with a NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0, "mkfifo");
}
