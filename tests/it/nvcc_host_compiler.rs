//! nvcc's host compiler is keyed by content ([`hipjit::compiler::host_compiler`]): nvcc
//! preprocesses device code with it, so its predefined macros reach the cubin. Each test puts a
//! wrapper `gcc` (the machine's gcc with `-DHOSTVAL=N`, standing in for a host compiler
//! upgraded or swapped) on `PATH` for `hipjit compile --compiler nvcc` with PyPI's nvcc, and
//! checks that a changed host compiler is compiled again, never served the old cubin: the long
//! way, and through the hit memo a fresh process takes.

use crate::common;

use std::path::{Path, PathBuf};
use std::process::Command;

use common::cli;
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

/// Writes `dir/gcc`: a compiled wrapper (a program, not a script: a script's macros are asked
/// again by every process, which is tested apart) running the real gcc with `-DHOSTVAL=value`
/// (one digit, so that every version has the same size), its modification time set an hour
/// back (as a package upgrade leaves the packaged time), renamed into place.
fn wrapper(dir: &Path, value: u8) {
    assert!(value < 10);
    wrapper_with(dir, &[format!("-DHOSTVAL={value}")]);
}

/// [`wrapper`] adding the arguments `extra` (each free of `"` and `\\`) before the caller's.
fn wrapper_with(dir: &Path, extra: &[String]) {
    std::fs::create_dir_all(dir).unwrap();
    let c = dir.join(".gcc.c");
    let n = extra.len();
    let set: String = extra
        .iter()
        .enumerate()
        .map(|(i, a)| format!("  a[{}] = \"{a}\";\n", i + 1))
        .collect();
    std::fs::write(
        &c,
        format!(
            "#include <stdlib.h>\n#include <unistd.h>\n\
             int main(int argc, char** argv) {{\n\
               char** a = malloc((argc + {n} + 1) * sizeof *a);\n\
               a[0] = \"{gcc}\";\n{set}\
               for (int i = 1; i < argc; i++) a[i + {n}] = argv[i];\n\
               a[argc + {n}] = 0;\n\
               execv(\"{gcc}\", a);\n\
               return 127;\n\
             }}\n",
            gcc = real_gcc().display()
        ),
    )
    .unwrap();
    let tmp = dir.join(".gcc.tmp");
    let o = Command::new("cc")
        .arg("-o")
        .arg(&tmp)
        .arg(&c)
        .output()
        .expect("cc runs (apt-get install gcc)");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    std::fs::remove_file(&c).unwrap();
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
    std::fs::rename(&tmp, dir.join("gcc")).unwrap();
}

/// `hipjit compile --compiler nvcc --arch sm_90` of `home/project/k.hip` with the cache and
/// per-user directories under `home`, `path_dirs` first on `PATH` and `env` added: the exit
/// status, stdout and stderr.
fn compile(home: &Path, path_dirs: &[PathBuf], env: &[(&str, &str)]) -> (bool, String, String) {
    compile_in(home, home, path_dirs, env)
}

/// [`compile`] run in the working directory `cwd`, with the cache root `home/cache`.
fn compile_in(
    home: &Path,
    cwd: &Path,
    path_dirs: &[PathBuf],
    env: &[(&str, &str)],
) -> (bool, String, String) {
    let path = std::env::join_paths(path_dirs.iter().cloned().chain(std::env::split_paths(
        &std::env::var_os("PATH").unwrap_or_default(),
    )))
    .unwrap();
    let mut cmd = nvcc_compile(home, &[]);
    cmd.env("PATH", path)
        .current_dir(cwd)
        .env_remove("NVCC_CCBIN")
        .env_remove("NVCC_PREPEND_FLAGS")
        .env_remove("NVCC_APPEND_FLAGS");
    for (k, v) in env {
        cmd.env(k, v);
    }
    cli::outcome(&cmd.output().expect("hipjit runs"))
}

/// `hipjit compile --compiler nvcc --arch sm_90 -o home/out.cubin <flags> home/project/k.hip`
/// with the cache under `home` and `HIPJIT_NVCC` the PyPI nvcc.
fn nvcc_compile(home: &Path, flags: &[String]) -> Command {
    let mut cmd = cli::compile(
        home,
        "nvcc",
        "sm_90",
        &home.join("out.cubin"),
        flags,
        &home.join("project/k.hip"),
    );
    cmd.env("HIPJIT_NVCC", pypi_nvcc());
    cmd
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
    let o = cli::hipjit(
        home,
        &["cache", "explain", "--compiler", "nvcc", "--arch", "sm_90"],
    )
    .arg(home.join("project/k.hip"))
    .env("PATH", path)
    .env("HIPJIT_NVCC", pypi_nvcc())
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
    // The rules of the caller's flags hold for these variables' flags.
    let (ok, _, err) = compile(home, &[], &[("NVCC_APPEND_FLAGS", "-Xcompiler -B/tmp/x/")]);
    assert!(
        !ok && err.contains("NVCC_APPEND_FLAGS: ") && err.contains("-Xcompiler -B/tmp/x/"),
        "{err}"
    );
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
    let o = nvcc_compile(home, &[])
        .env("PATH", &empty)
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

/// The cc1plus the machine's gcc runs (`gcc -print-prog-name=cc1plus`).
fn real_cc1plus() -> PathBuf {
    let o = Command::new(real_gcc())
        .arg("-print-prog-name=cc1plus")
        .output()
        .unwrap();
    let p = PathBuf::from(String::from_utf8_lossy(&o.stdout).trim());
    assert!(
        p.is_absolute() && p.is_file(),
        "gcc names its cc1plus: {p:?}"
    );
    p
}

/// An executable script at `path` with `text` after its `#!/bin/sh` line.
fn script(path: &Path, text: &str) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, format!("#!/bin/sh\n{text}\n")).unwrap();
    std::fs::set_permissions(&tmp, std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::rename(&tmp, path).unwrap();
}

/// gcc's own variables that choose its programs (`COMPILER_PATH`, `GCC_EXEC_PREFIX`) do not
/// reach nvcc: a cc1plus that defines `HOSTVAL` on `COMPILER_PATH` changes nothing, so the hit
/// serves what a fresh compile under it gives.
#[test]
fn gccs_program_search_variables_do_not_reach_nvcc() {
    let home = tempfile::tempdir().unwrap();
    let home = home.path();
    project(home);
    let (first, plain) = compiled(home, &[]);
    assert!(first.contains("miss (compiled)"), "{first}");
    let dir = home.join("cc1");
    script(
        &dir.join("cc1plus"),
        &format!("exec {} -DHOSTVAL=7 \"$@\"", real_cc1plus().display()),
    );
    let with = [("COMPILER_PATH", dir.to_str().unwrap())];
    let (ok, out, err) = compile(home, &[], &with);
    assert!(ok, "{err}");
    assert!(out.contains("hit (disk)"), "{out}");
    // A fresh cache under the same variable: the same cubin.
    let fresh = home.join("fresh");
    std::fs::create_dir_all(fresh.join("project")).unwrap();
    std::fs::copy(home.join("project/k.hip"), fresh.join("project/k.hip")).unwrap();
    let (ok, out, err) = compile(&fresh, &[], &with);
    assert!(ok && out.contains("miss (compiled)"), "{out}{err}");
    assert_eq!(std::fs::read(fresh.join("out.cubin")).unwrap(), plain);
}

/// The host compiler's header path variables are keyed: a header put earlier on `CPATH`
/// shadows the one the manifest names, and is compiled, not served the old cubin.
#[test]
fn a_header_put_earlier_on_cpath_is_compiled_again() {
    let home = tempfile::tempdir().unwrap();
    let home = home.path();
    std::fs::create_dir_all(home.join("project")).unwrap();
    std::fs::write(
        home.join("project/k.hip"),
        "#include <hv.h>\nextern \"C\" __global__ void k(int* p) { p[0] = HV; }\n",
    )
    .unwrap();
    let (a, b) = (home.join("a"), home.join("b"));
    std::fs::create_dir_all(&a).unwrap();
    std::fs::create_dir_all(&b).unwrap();
    std::fs::write(a.join("hv.h"), "#define HV 1\n").unwrap();
    std::fs::write(b.join("hv.h"), "#define HV 2\n").unwrap();
    let run = |cpath: String| {
        let (ok, out, err) = compile(home, &[], &[("CPATH", &cpath)]);
        assert!(ok, "{err}");
        (out, std::fs::read(home.join("out.cubin")).unwrap())
    };
    let (first, one) = run(a.display().to_string());
    assert!(first.contains("miss (compiled)"), "{first}");
    let (again, _) = run(a.display().to_string());
    assert!(again.contains("hit (disk)"), "{again}");
    let (shadowed, two) = run(format!("{}:{}", b.display(), a.display()));
    assert!(shadowed.contains("miss (compiled)"), "{shadowed}");
    assert_ne!(two, one);
}

/// A relative `NVCC_CCBIN` names a program by the working directory: the same text in another
/// directory is another host compiler, compiled with, not served the first one's cubin.
#[test]
fn a_relative_nvcc_ccbin_is_taken_from_the_working_directory() {
    let home = tempfile::tempdir().unwrap();
    let home = home.path();
    project(home);
    let (x, y) = (home.join("x"), home.join("y"));
    wrapper(&x.join("bin"), 1);
    wrapper(&y.join("bin"), 2);
    let (ok, out, err) = compile_in(home, &x, &[], &[("NVCC_CCBIN", "bin/gcc")]);
    assert!(ok && out.contains("miss (compiled)"), "{out}{err}");
    let one = std::fs::read(home.join("out.cubin")).unwrap();
    let (ok, out, err) = compile_in(home, &y, &[], &[("NVCC_CCBIN", "bin/gcc")]);
    assert!(ok, "{err}");
    assert!(out.contains("miss (compiled)"), "{out}");
    assert_ne!(std::fs::read(home.join("out.cubin")).unwrap(), one);
}

/// A wrapper script that runs a compiler named inside it: that compiler changed (out of any
/// directory looked in) is seen, because a script's macros are asked again by every process
/// that takes the remembered identity.
#[test]
fn a_compiler_run_by_a_wrapper_script_changed_is_compiled_again() {
    let home = tempfile::tempdir().unwrap();
    let home = home.path();
    project(home);
    let inner = home.join("elsewhere");
    wrapper(&inner, 1);
    let bin = home.join("bin");
    script(
        &bin.join("gcc"),
        &format!("exec {} \"$@\"", inner.join("gcc").display()),
    );
    let dirs = [bin];
    let (first, one) = compiled(home, &dirs);
    assert!(first.contains("miss (compiled)"), "{first}");
    std::thread::sleep(hipjit::jit::hit_memo::MIN_AGE + std::time::Duration::from_millis(300));
    assert!(compiled(home, &dirs).0.contains("hit (disk)"));
    assert_eq!(hit_memos(home), 0, "no hit memo trusts a script by stat");
    wrapper(&inner, 2);
    let (after, two) = compiled(home, &dirs);
    assert!(after.contains("miss (compiled)"), "{after}");
    assert_ne!(two, one);
}

/// A compiled (not script) wrapper first on `PATH` that runs a gcc of a later `PATH` directory:
/// that gcc retargeted (as `update-alternatives` does) is seen, since every directory of the
/// search is watched, not only those up to the wrapper's.
#[test]
fn a_later_gcc_on_path_retargeted_behind_a_compiled_wrapper_is_compiled_again() {
    let home = tempfile::tempdir().unwrap();
    let home = home.path();
    project(home);
    let (front, back, impls) = (home.join("front"), home.join("back"), home.join("impls"));
    std::fs::create_dir_all(&front).unwrap();
    std::fs::create_dir_all(&back).unwrap();
    wrapper(&impls.join("one"), 1);
    wrapper(&impls.join("two"), 2);
    std::os::unix::fs::symlink(impls.join("one/gcc"), back.join("gcc")).unwrap();
    let c = home.join("wrap.c");
    std::fs::write(
        &c,
        format!(
            "#include <unistd.h>\nint main(int argc, char** argv) {{ (void)argc; \
             argv[0] = \"{0}\"; execv(\"{0}\", argv); return 127; }}\n",
            back.join("gcc").display()
        ),
    )
    .unwrap();
    let o = Command::new("cc")
        .arg("-o")
        .arg(front.join("gcc"))
        .arg(&c)
        .output()
        .expect("cc runs (apt-get install gcc)");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let dirs = [front, back.clone()];
    let (first, one) = compiled(home, &dirs);
    assert!(first.contains("miss (compiled)"), "{first}");
    std::thread::sleep(hipjit::jit::hit_memo::MIN_AGE + std::time::Duration::from_millis(300));
    assert!(compiled(home, &dirs).0.contains("hit (disk)"));
    assert_eq!(hit_memos(home), 1, "the hit wrote its memo");
    let tmp = back.join("gcc.new");
    std::os::unix::fs::symlink(impls.join("two/gcc"), &tmp).unwrap();
    std::fs::rename(&tmp, back.join("gcc")).unwrap();
    let (after, two) = compiled(home, &dirs);
    assert!(after.contains("miss (compiled)"), "{after}");
    assert_ne!(two, one);
}

/// A `PATH` entry that is a link to a directory that does not exist yet: the directory
/// created later with a gcc in it is seen, through the memo too.
#[test]
fn a_gcc_in_a_dangling_path_links_directory_created_later_is_compiled_again() {
    let home = tempfile::tempdir().unwrap();
    let home = home.path();
    project(home);
    // Apart from `home`, where each compile writes its output.
    std::fs::create_dir_all(home.join("links")).unwrap();
    std::fs::create_dir_all(home.join("t")).unwrap();
    let link = home.join("links/link");
    std::os::unix::fs::symlink(home.join("t/later/deep"), &link).unwrap();
    let late = home.join("late");
    wrapper(&late, 3);
    let dirs = [link, late];
    let (first, three) = compiled(home, &dirs);
    assert!(first.contains("miss (compiled)"), "{first}");
    std::thread::sleep(hipjit::jit::hit_memo::MIN_AGE + std::time::Duration::from_millis(300));
    assert!(compiled(home, &dirs).0.contains("hit (disk)"));
    assert_eq!(hit_memos(home), 1, "the hit wrote its memo");
    wrapper(&home.join("t/later/deep"), 4);
    let (after, four) = compiled(home, &dirs);
    assert!(after.contains("miss (compiled)"), "{after}");
    assert_ne!(four, three);
}

/// nvcc is handed the host compiler by its absolute path when that is safe for nvcc's shell,
/// so a wrapper that finds a companion beside itself (`$(dirname "$0")`) works; a `TMPDIR`
/// holding shell syntax is refused, naming it, and never handed to nvcc's shell.
#[test]
fn the_host_compiler_sees_its_own_path_and_tmpdir_never_reaches_nvccs_shell() {
    let home = tempfile::tempdir().unwrap();
    let home = home.path();
    project(home);
    let bin = home.join("bin");
    wrapper(&home.join("companion"), 5);
    std::fs::create_dir_all(&bin).unwrap();
    std::fs::rename(home.join("companion/gcc"), bin.join("real-gcc")).unwrap();
    script(
        &bin.join("gcc"),
        "exec \"$(dirname \"$0\")/real-gcc\" \"$@\"",
    );
    let dirs = [bin];
    let (first, _) = compiled(home, &dirs);
    assert!(first.contains("miss (compiled)"), "{first}");
    let pwned = home.join("PWNED");
    let tmp = home.join(format!("tmp $(touch {})", pwned.display()));
    std::fs::create_dir_all(&tmp).unwrap();
    std::fs::write(home.join("project/k.hip"), format!("{KERNEL}// another\n")).unwrap();
    let (ok, _, err) = compile(home, &dirs, &[("TMPDIR", tmp.to_str().unwrap())]);
    assert!(!ok, "compiled under a TMPDIR nvcc's shell would interpret");
    assert!(
        err.contains("the temporary directory") && err.contains("set TMPDIR"),
        "{err}"
    );
    assert!(!pwned.exists(), "TMPDIR's $(...) ran");
}

/// The kernel reading `HV` from `<hv.h>`, in `home/project`.
fn hv_project(home: &Path) {
    std::fs::create_dir_all(home.join("project")).unwrap();
    std::fs::write(
        home.join("project/k.hip"),
        "#include <hv.h>\nextern \"C\" __global__ void k(int* p) { p[0] = HV; }\n",
    )
    .unwrap();
}

/// A header added later to a `CPATH` directory searched before the one that held it (the
/// variable's text unchanged) is seen: nvcc's header search directories are in the manifest.
#[test]
fn a_header_added_to_an_earlier_cpath_directory_is_compiled_again() {
    let home = tempfile::tempdir().unwrap();
    let home = home.path();
    hv_project(home);
    let (a, b) = (home.join("a"), home.join("b"));
    std::fs::create_dir_all(&a).unwrap();
    std::fs::create_dir_all(&b).unwrap();
    std::fs::write(b.join("hv.h"), "#define HV 1\n").unwrap();
    let cpath = format!("{}:{}", a.display(), b.display());
    let run = || {
        let (ok, out, err) = compile(home, &[], &[("CPATH", &cpath)]);
        assert!(ok, "{err}");
        (out, std::fs::read(home.join("out.cubin")).unwrap())
    };
    let (first, one) = run();
    assert!(first.contains("miss (compiled)"), "{first}");
    assert!(run().0.contains("hit (disk)"));
    std::fs::write(a.join("hv.h"), "#define HV 2\n").unwrap();
    let (after, two) = run();
    assert!(after.contains("miss (compiled)"), "{after}");
    assert_ne!(two, one);
}

/// The host compiler's own include search list (here a wrapper's `-isystem` directories,
/// standing in for `/usr/local/include` before `/usr/include`) is in the manifest: a header
/// added to a directory searched before the one that held it is seen.
#[test]
fn a_header_added_to_an_earlier_system_directory_of_the_host_compiler_is_compiled_again() {
    let home = tempfile::tempdir().unwrap();
    let home = home.path();
    hv_project(home);
    let (a, b) = (home.join("sys/a"), home.join("sys/b"));
    std::fs::create_dir_all(&a).unwrap();
    std::fs::create_dir_all(&b).unwrap();
    std::fs::write(b.join("hv.h"), "#define HV 1\n").unwrap();
    let bin = home.join("bin");
    wrapper_with(
        &bin,
        &[
            "-isystem".into(),
            a.display().to_string(),
            "-isystem".into(),
            b.display().to_string(),
        ],
    );
    let dirs = [bin];
    let (first, one) = compiled(home, &dirs);
    assert!(first.contains("miss (compiled)"), "{first}");
    assert!(compiled(home, &dirs).0.contains("hit (disk)"));
    std::fs::write(a.join("hv.h"), "#define HV 2\n").unwrap();
    let (after, two) = compiled(home, &dirs);
    assert!(after.contains("miss (compiled)"), "{after}");
    assert_ne!(two, one);
}

/// nvcc pastes the caller's words into command lines it runs with `sh`: define values and
/// flags holding shell syntax are refused, naming the word, and nothing runs; so are the
/// variables its profile pastes as they are.
#[test]
fn shell_syntax_in_defines_flags_and_pasted_variables_is_refused_and_never_runs() {
    let home = tempfile::tempdir().unwrap();
    let home = home.path();
    project(home);
    let pwned = home.join("PWNED");
    let p = pwned.display();
    let hipjit = |args: &[String], env: &[(&str, String)]| {
        let mut cmd = nvcc_compile(home, args);
        for (k, v) in env {
            cmd.env(k, v);
        }
        let o = cmd.output().unwrap();
        (
            o.status.success(),
            String::from_utf8_lossy(&o.stderr).into_owned(),
        )
    };
    for args in [
        vec!["-D".to_string(), format!("HOSTVAL=$(touch {p})")],
        vec!["-D".to_string(), format!("HOSTVAL=`touch {p}`")],
        vec![format!("--cflag=-DZ=$(touch {p})")],
        vec![
            "--cflag=-Xcompiler".to_string(),
            format!("--cflag=-DZ=1;touch {p}"),
        ],
        vec![format!("--cflag=-Xptxas=-v;touch {p}")],
        // A -D word handed on to a stage is pasted unquoted: every caller's word is held to
        // the unquoted rule.
        vec![
            "--cflag=--entries".to_string(),
            format!("--cflag=-DQQ=k;touch {p}"),
        ],
        vec![
            "--cflag=-Xptxas".to_string(),
            "--cflag=-D".to_string(),
            format!("--cflag=--entries=k;touch {p}"),
        ],
    ] {
        let (ok, err) = hipjit(&args, &[]);
        assert!(!ok, "{args:?} compiled");
        assert!(
            err.contains("refusing to run nvcc with") && err.contains("would interpret"),
            "{args:?}: {err}"
        );
        assert!(!pwned.exists(), "{args:?} ran");
    }
    for var in ["INCLUDES", "PTXAS_FLAGS"] {
        let (ok, err) = hipjit(&[], &[(var, format!("-O3;touch {p}"))]);
        assert!(
            !ok && err.contains(&format!("refusing to run nvcc with {var}=")),
            "{err}"
        );
    }
    // A quote would turn the rest of the line inside out; `[` and `~` would expand.
    for value in ["-DA=\"", "-I/x/in[c]", "-I~/inc"] {
        let (ok, err) = hipjit(&[], &[("INCLUDES", value.to_string())]);
        assert!(
            !ok && err.contains("refusing to run nvcc with INCLUDES="),
            "{value}: {err}"
        );
    }
    let (ok, err) = hipjit(
        &[],
        &[("NVCC_APPEND_FLAGS", format!("-DZ=$(touch{{IFS}}{p})"))],
    );
    assert!(!ok && err.contains("NVCC_APPEND_FLAGS"), "{err}");
    assert!(!pwned.exists());
    // What the shell takes literally still compiles: a define value with spaces, quotes and
    // parentheses (nvcc double-quotes -D words).
    let (ok, err) = hipjit(&["-D".into(), "HOSTVAL=(1 << 2)".into()], &[]);
    assert!(ok, "{err}");
}
