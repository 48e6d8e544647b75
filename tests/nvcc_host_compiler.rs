//! nvcc's host compiler is keyed by content ([`hipjit::compiler::host_compiler`]): nvcc
//! preprocesses device code with it, so its predefined macros reach the cubin. Each test puts a
//! wrapper `gcc` (the machine's gcc with `-DHOSTVAL=N`, standing in for a host compiler
//! upgraded or swapped) on `PATH` for `hipjit compile --compiler nvcc` with PyPI's nvcc, and
//! checks that a changed host compiler is compiled again, never served the old cubin: the long
//! way, and through the hit memo a fresh process takes.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

use common::toolchain::pypi_nvcc;

/// The kernel: stores `HOSTVAL`, 99 when the host compiler does not define it.
const KERNEL: &str = "#ifndef HOSTVAL\n#define HOSTVAL 99\n#endif\n\
                      extern \"C\" __global__ void k(int* p) { p[0] = HOSTVAL; }\n";

/// The machine's gcc (found on this process's `PATH`); its absence fails the test.
fn real_gcc() -> PathBuf {
    std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default())
        .map(|d| d.join("gcc"))
        .find(|p| p.is_file())
        .expect("gcc on PATH (nvcc needs a host compiler: apt-get install gcc g++)")
}

/// Writes `dir/gcc`: a wrapper running the real gcc with `-DHOSTVAL=value` (one digit, so that
/// every version has the same size), its modification time set an hour back (as a package
/// upgrade leaves the packaged time), renamed into place.
fn wrapper(dir: &Path, value: u8) {
    use std::os::unix::fs::PermissionsExt;
    assert!(value < 10);
    std::fs::create_dir_all(dir).unwrap();
    let path = dir.join("gcc");
    let tmp = dir.join(".gcc.tmp");
    std::fs::write(
        &tmp,
        format!(
            "#!/bin/sh\nexec {} -DHOSTVAL={value} \"$@\"\n",
            real_gcc().display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(&tmp, std::fs::Permissions::from_mode(0o755)).unwrap();
    let old = std::time::SystemTime::now() - std::time::Duration::from_secs(3600);
    std::fs::File::options()
        .write(true)
        .open(&tmp)
        .unwrap()
        .set_times(
            std::fs::FileTimes::new()
                .set_modified(old)
                .set_accessed(old),
        )
        .unwrap();
    std::fs::rename(&tmp, &path).unwrap();
}

/// `hipjit compile --compiler nvcc --arch sm_90` of `home/project/k.hip` with the cache and
/// per-user directories under `home`, `path_dirs` first on `PATH` and `env` added: the exit
/// status, stdout and stderr.
fn compile(home: &Path, path_dirs: &[PathBuf], env: &[(&str, &str)]) -> (bool, String, String) {
    let path = std::env::join_paths(path_dirs.iter().cloned().chain(std::env::split_paths(
        &std::env::var_os("PATH").unwrap_or_default(),
    )))
    .unwrap();
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_hipjit"));
    cmd.args(["compile", "--compiler", "nvcc", "--arch", "sm_90", "-o"])
        .arg(home.join("out.cubin"))
        .arg(home.join("project/k.hip"))
        .env("PATH", path)
        .env("HIPJIT_CACHE_DIR", home.join("cache"))
        .env("XDG_CACHE_HOME", home.join("xdg"))
        .env("HIPJIT_NVCC", pypi_nvcc())
        .env_remove("HIPJIT_COMPILER")
        .env_remove("NVCC_CCBIN")
        .env_remove("NVCC_PREPEND_FLAGS")
        .env_remove("NVCC_APPEND_FLAGS");
    for (k, v) in env {
        cmd.env(k, v);
    }
    let o = cmd.output().expect("hipjit runs");
    (
        o.status.success(),
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

/// [`compile`], which must succeed: its first line of output and the cubin written.
fn compiled(home: &Path, path_dirs: &[PathBuf]) -> (String, Vec<u8>) {
    let (ok, out, err) = compile(home, path_dirs, &[]);
    assert!(ok, "hipjit compile failed: {err}");
    let first = out.lines().next().unwrap_or_default().to_string();
    (first, std::fs::read(home.join("out.cubin")).unwrap())
}

fn project(home: &Path) {
    std::fs::create_dir_all(home.join("project")).unwrap();
    std::fs::write(home.join("project/k.hip"), KERNEL).unwrap();
}

fn hit_memos(home: &Path) -> usize {
    std::fs::read_dir(home.join("xdg/hipjit/compilers/hits"))
        .map(|d| d.count())
        .unwrap_or(0)
}

/// The tester's case: a host compiler changed in place (same size, same name) is compiled
/// again, through the hit memo and the long way, and the cubins differ as the macro does.
#[test]
fn a_host_compiler_changed_in_place_is_compiled_again_through_the_memo_and_the_long_way() {
    let home = tempfile::tempdir().unwrap();
    let home = home.path();
    project(home);
    let bin = home.join("bin");
    wrapper(&bin, 1);
    let dirs = [bin.clone()];
    let (first, one) = compiled(home, &dirs);
    assert!(first.contains("miss (compiled)"), "{first}");
    // Aged past the memo's margin: the next hit, found the long way, writes the hit memo.
    std::thread::sleep(hipjit::jit::hit_memo::MIN_AGE + std::time::Duration::from_millis(300));
    let (hit, same) = compiled(home, &dirs);
    assert!(hit.contains("hit (disk)"), "{hit}");
    assert_eq!(same, one);
    assert_eq!(hit_memos(home), 1, "the hit wrote its memo");
    // Changed in place: the memo's recorded stat of the wrapper no longer holds.
    wrapper(&bin, 2);
    let (after, two) = compiled(home, &dirs);
    assert!(
        after.contains("miss (compiled)"),
        "a changed host compiler must be compiled again, not served the old cubin: {after}"
    );
    assert_ne!(two, one, "the host compiler's macro reached the cubin");
    // The long way (no memo): back to the first host compiler is the first entry again, a
    // third one is compiled.
    std::fs::remove_dir_all(home.join("xdg/hipjit/compilers/hits")).unwrap();
    wrapper(&bin, 1);
    let (back, again) = compiled(home, &dirs);
    assert!(back.contains("hit (disk)"), "{back}");
    assert_eq!(again, one, "the first host compiler's cubin");
    std::fs::remove_dir_all(home.join("xdg/hipjit/compilers/hits")).ok();
    wrapper(&bin, 3);
    let (third, three) = compiled(home, &dirs);
    assert!(third.contains("miss (compiled)"), "{third}");
    assert!(three != one && three != two);
    // What differs, as `hipjit cache explain` names it against the nearest entry.
    wrapper(&bin, 4);
    let path = std::env::join_paths(
        dirs.iter()
            .cloned()
            .chain(std::env::split_paths(&std::env::var_os("PATH").unwrap())),
    )
    .unwrap();
    let o = Command::new(env!("CARGO_BIN_EXE_hipjit"))
        .args(["cache", "explain", "--compiler", "nvcc", "--arch", "sm_90"])
        .arg(home.join("project/k.hip"))
        .env("PATH", path)
        .env("HIPJIT_CACHE_DIR", home.join("cache"))
        .env("XDG_CACHE_HOME", home.join("xdg"))
        .env("HIPJIT_NVCC", pypi_nvcc())
        .env_remove("HIPJIT_COMPILER")
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(
        text.contains("1 field(s) differ") && text.contains("\n  host-compiler\n"),
        "explain names the host compiler as what differs:\n{text}{}",
        String::from_utf8_lossy(&o.stderr)
    );
}

/// A gcc put in a directory earlier on `PATH` than the one used is another host compiler.
#[test]
fn a_host_compiler_put_earlier_on_path_is_compiled_again() {
    let home = tempfile::tempdir().unwrap();
    let home = home.path();
    project(home);
    let (early, late) = (home.join("early"), home.join("late"));
    std::fs::create_dir_all(&early).unwrap();
    wrapper(&late, 5);
    let dirs = [early.clone(), late];
    let (first, five) = compiled(home, &dirs);
    assert!(first.contains("miss (compiled)"), "{first}");
    std::thread::sleep(hipjit::jit::hit_memo::MIN_AGE + std::time::Duration::from_millis(300));
    assert!(compiled(home, &dirs).0.contains("hit (disk)"));
    wrapper(&early, 6);
    let (after, six) = compiled(home, &dirs);
    assert!(after.contains("miss (compiled)"), "{after}");
    assert_ne!(six, five);
}

/// A host compiler named in `NVCC_APPEND_FLAGS` or `NVCC_PREPEND_FLAGS` would run unkeyed (or
/// be overridden): refused naming the variable and the flag; a name nvcc's shell could
/// misparse is refused; no host compiler at all is an error naming where it was looked for.
#[test]
fn host_compilers_hipjit_cannot_key_or_hand_to_nvcc_safely_are_refused_naming_why() {
    let home = tempfile::tempdir().unwrap();
    let home = home.path();
    project(home);
    for var in ["NVCC_APPEND_FLAGS", "NVCC_PREPEND_FLAGS"] {
        let (ok, _, err) = compile(home, &[], &[(var, "-O3 -ccbin /usr/bin/gcc")]);
        assert!(!ok);
        assert!(
            err.contains(&format!("{var} names a host compiler (-ccbin)"))
                && err.contains("NVCC_CCBIN"),
            "{err}"
        );
    }
    let (ok, _, err) = compile(home, &[], &[("NVCC_APPEND_FLAGS", "--compiler-bindir=/x")]);
    assert!(!ok && err.contains("(--compiler-bindir=/x)"), "{err}");
    let odd = home.join("odd");
    wrapper(&odd, 7);
    let named = odd.join("g$(id)cc");
    std::fs::rename(odd.join("gcc"), &named).unwrap();
    let (ok, _, err) = compile(home, &[], &[("NVCC_CCBIN", named.to_str().unwrap())]);
    assert!(!ok && err.contains("nvcc's shell could misparse"), "{err}");
    let (ok, _, err) = compile(home, &[], &[("NVCC_CCBIN", "/nonexistent/g++")]);
    assert!(
        !ok && err.contains("NVCC_CCBIN=/nonexistent/g++ is not an executable file"),
        "{err}"
    );
    let empty = home.join("empty");
    std::fs::create_dir_all(&empty).unwrap();
    let o = Command::new(env!("CARGO_BIN_EXE_hipjit"))
        .args(["compile", "--compiler", "nvcc", "--arch", "sm_90", "-o"])
        .arg(home.join("out.cubin"))
        .arg(home.join("project/k.hip"))
        .env("PATH", &empty)
        .env("HIPJIT_CACHE_DIR", home.join("cache"))
        .env("XDG_CACHE_HOME", home.join("xdg"))
        .env("HIPJIT_NVCC", pypi_nvcc())
        .env_remove("HIPJIT_COMPILER")
        .env_remove("NVCC_CCBIN")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        !o.status.success()
            && err.contains("nvcc's host compiler `gcc` was not found")
            && err.contains(empty.to_str().unwrap()),
        "{err}"
    );
}

/// `NVCC_CCBIN` naming a program: that program is the one run and keyed, under its own name.
#[test]
fn nvcc_ccbin_names_the_host_compiler_that_runs_and_is_keyed() {
    let home = tempfile::tempdir().unwrap();
    let home = home.path();
    project(home);
    let d = home.join("ccbin");
    wrapper(&d, 8);
    let (ok, out, err) = compile(
        home,
        &[],
        &[("NVCC_CCBIN", d.join("gcc").to_str().unwrap())],
    );
    assert!(ok, "{err}");
    assert!(out.contains("miss (compiled)"), "{out}");
    let eight = std::fs::read(home.join("out.cubin")).unwrap();
    let (ok, out, err) = compile(home, &[], &[("NVCC_CCBIN", d.to_str().unwrap())]);
    assert!(ok, "{err}");
    assert!(
        out.contains("hit (disk)"),
        "the directory names the same gcc, keyed by content, not by the variable's text: {out}"
    );
    wrapper(&d, 9);
    let (ok, out, err) = compile(home, &[], &[("NVCC_CCBIN", d.to_str().unwrap())]);
    assert!(ok, "{err}");
    assert!(out.contains("miss (compiled)"), "{out}");
    assert_ne!(std::fs::read(home.join("out.cubin")).unwrap(), eight);
}
