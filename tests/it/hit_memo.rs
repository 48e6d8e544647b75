//! The hit memo ([`hipjit::jit::hit_memo`]) against the real compilers here (Debian's hipcc
//! 5.2.3, PyPI's nvcc and NVRTC), through the `hipjit compile` command, each case with a
//! private cache root and identity directory and a source including a header of the project:
//!
//! - completeness: every path a disk hit found the long way touches (every `open`, `stat`,
//!   `readlink` and `access` that `strace -f -y` shows, the ones that fail included) is one
//!   the memo it writes checks, so that nothing the lookup depended on goes unchecked;
//! - a later process serves the hit through the memo, touching no other per-user memo;
//! - a header rewritten in place (same size) after the memo was written is a miss, compiled
//!   again with the new header, never the remembered result.

use crate::common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use common::toolchain::{pypi_nvcc, utf8 as s};

const SOURCE: &str = r#"#include <hip/hip_runtime.h>
#include "project.h"
extern "C" __global__ void fill(int* out) { out[0] = PROJECT_VALUE; }
"#;

/// `hipjit compile --compiler COMPILER --arch ARCH -I project -o out src`, its cache root and
/// identity directory under `home`, optionally under `strace` writing `log`.
fn compile(home: &Path, compiler: &str, arch: &str, log: Option<&Path>) -> Output {
    let mut cmd = match log {
        Some(log) => {
            let mut c = Command::new("strace");
            c.args(["-f", "-qq", "-y", "-e", "trace=%file,%desc", "-o", s(log)])
                .arg(env!("CARGO_BIN_EXE_hipjit"));
            c
        }
        None => Command::new(env!("CARGO_BIN_EXE_hipjit")),
    };
    let project = home.join("project");
    cmd.args(["compile", "--compiler", compiler, "--arch", arch, "-I"])
        .arg(&project)
        .arg("-o")
        .arg(home.join("out.bin"))
        .arg(project.join("kernel.hip"))
        .current_dir(home)
        .env("HIPJIT_CACHE_DIR", home.join("cache"))
        .env("XDG_CACHE_HOME", home.join("xdg"))
        .env("HIPJIT_NVCC", pypi_nvcc())
        .env_remove("HIPJIT_HIPCC")
        .env_remove("HIPJIT_COMPILER");
    let o = cmd
        .output()
        .unwrap_or_else(|e| panic!("cannot run hipjit ({e}); strace: apt-get install strace"));
    assert_eq!(
        o.status.code(),
        Some(0),
        "{compiler} {arch}\n{}",
        String::from_utf8_lossy(&o.stderr)
    );
    o
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// The paths a `strace -y` log shows touched by a path (open, the stat family, readlink,
/// access; a name relative to a directory descriptor `N</dir>` joined to it), with whether the
/// call was an open.
fn touched(log: &str) -> Vec<(PathBuf, bool)> {
    common::strace::paths(log, common::strace::LOOKUPS)
        .into_iter()
        .map(|(p, call)| (p, call.starts_with("open")))
        .collect()
}

/// The lines of `log` from the request's first look for its memo on (after `Jit::new`, whose
/// checks of the cache root every process makes).
fn from_the_request(log: &str, home: &Path) -> String {
    let hits = home.join("xdg/hipjit/compilers/hits/");
    let start = log.find(s(&hits)).expect("the memo is looked for");
    let line_start = log[..start].rfind('\n').map_or(0, |i| i + 1);
    log[line_start..].to_string()
}

/// The memo files under `home`'s identity directory.
fn memos(home: &Path) -> Vec<PathBuf> {
    let dir = home.join("xdg/hipjit/compilers/hits");
    let mut v: Vec<PathBuf> = std::fs::read_dir(&dir)
        .map(|rd| rd.flatten().map(|e| e.path()).collect())
        .unwrap_or_default();
    v.retain(|p| p.extension().is_some_and(|e| e == "hit"));
    v
}

fn project(home: &Path, value: u32) {
    let project = home.join("project");
    std::fs::create_dir_all(&project).unwrap();
    std::fs::write(project.join("kernel.hip"), SOURCE).unwrap();
    std::fs::write(
        project.join("project.h"),
        format!("#define PROJECT_VALUE {value}\n"),
    )
    .unwrap();
}

/// Each case: the compile (a miss), the entries let age past the memo's margin, a hit the long
/// way under strace (which writes the memo), then the checks of the module documentation.
fn case(compiler: &str, arch: &str) {
    let home = tempfile::tempdir().unwrap();
    let home = home.path();
    project(home, 1111);
    let miss = compile(home, compiler, arch, None);
    assert!(stdout(&miss).contains("miss"), "{}", stdout(&miss));
    let first = std::fs::read(home.join("out.bin")).unwrap();
    // A first hit remembers what the compile's process did not (the in-process compiler's
    // search with its identity); all is then let age.
    let hit = compile(home, compiler, arch, None);
    assert!(stdout(&hit).contains("hit (disk)"), "{}", stdout(&hit));
    std::thread::sleep(hipjit::jit::hit_memo::MIN_AGE + std::time::Duration::from_millis(300));

    // The long way, remembered.
    let log = home.join("long.log");
    let hit = compile(home, compiler, arch, Some(&log));
    assert!(stdout(&hit).contains("hit (disk)"), "{}", stdout(&hit));
    let memo = memos(home);
    assert_eq!(
        memo.len(),
        1,
        "{compiler} {arch}: one memo written: {memo:?}\n{}",
        String::from_utf8_lossy(&hit.stderr)
    );
    // nvcc's headers are named through `bin/..` (its own discovery); strace names the directory
    // a descriptor is open on without it: fold such spellings on both sides.
    let fold = common::strace::fold_parent_dirs;
    let checked: Vec<PathBuf> = hipjit::jit::hit_memo::observed_paths(&memo[0])
        .expect("the memo reads")
        .iter()
        .map(|p| fold(p))
        .collect();
    let log = from_the_request(&std::fs::read_to_string(&log).unwrap(), home);
    let hits = home.join("xdg/hipjit/compilers/hits");
    let missing: Vec<PathBuf> = touched(&log)
        .into_iter()
        .map(|(p, _)| fold(&p))
        .filter(|p| {
            !p.starts_with(&hits)
                && !p.starts_with(home.join("cache/tmp"))
                // The output, written through a temporary file beside it.
                && p.parent() != Some(home)
                // glibc's malloc reads this the first time it releases a thread arena's heap
                // (whenever that falls): the allocator's, not the lookup's.
                && *p != Path::new("/proc/sys/vm/overcommit_memory")
                // The boot's ID, read once per process: part of every stat's mount identity
                // (hipjit::file_stat), which each observation checks.
                && *p != Path::new("/proc/sys/kernel/random/boot_id")
                // Where a path leads is read back from the descriptor just opened on it
                // (`fs::observe::resolve`): the path itself is the observation checked.
                && !p.starts_with("/proc/self/fd")
                // The command's private temporary directory (hipjit::compiler::ProcessTmpDir),
                // made and removed by every run: hipjit's own scratch, no input.
                && !p.components().any(|c| {
                    c.as_os_str().as_encoded_bytes().starts_with(b"hipjit-run-")
                })
                && !checked.contains(p)
                // A realpath(3) the memo checks reads the links on its way.
                && !checked.iter().any(|c| c.starts_with(p))
        })
        .collect();
    assert!(
        missing.is_empty(),
        "{compiler} {arch}: the long way touched paths its memo does not check: {missing:#?}\nchecked: {checked:#?}"
    );

    // A fresh process takes the memo: no other per-user memo is opened.
    let log = home.join("memo.log");
    let hit = compile(home, compiler, arch, Some(&log));
    assert!(stdout(&hit).contains("hit (disk)"), "{}", stdout(&hit));
    assert_eq!(std::fs::read(home.join("out.bin")).unwrap(), first);
    let ids = home.join("xdg/hipjit/compilers");
    let opened_memos: Vec<PathBuf> = touched(&std::fs::read_to_string(&log).unwrap())
        .into_iter()
        .filter(|(p, open)| *open && p.starts_with(&ids) && !p.starts_with(&hits))
        .map(|(p, _)| p)
        .collect();
    assert!(
        opened_memos.is_empty(),
        "{compiler} {arch}: the second hit went the long way: {opened_memos:?}"
    );

    // The header rewritten in place, same size: compiled again, with the new value.
    let header = home.join("project/project.h");
    std::fs::write(&header, "#define PROJECT_VALUE 2222\n").unwrap();
    let again = compile(home, compiler, arch, None);
    assert!(
        stdout(&again).contains("miss"),
        "{compiler} {arch}: a changed header must be compiled again: {}",
        stdout(&again)
    );
    assert_ne!(std::fs::read(home.join("out.bin")).unwrap(), first);
}

#[test]
fn nvrtc_hits_are_remembered_completely() {
    case("nvrtc", "sm_90");
}

#[test]
fn nvcc_hits_are_remembered_completely() {
    case("nvcc", "sm_90");
}

#[test]
fn auto_nvidia_hits_are_remembered_completely() {
    case("auto", "sm_90");
}

#[test]
fn hipcc_hits_are_remembered_completely() {
    case("hipcc", "gfx90a");
}

#[test]
fn auto_amd_hits_are_remembered_completely() {
    case("auto", "gfx90a");
}

/// A compiler found by one request and used by a later one in the same process: the later
/// request's memo checks the compiler's files too (what finding it saw, kept with it), and a
/// fresh process serves both requests through their memos.
#[test]
fn a_compiler_found_by_an_earlier_request_is_checked_by_a_later_requests_memo() {
    use hipjit::compiler::selection::CompilerChoice;
    use hipjit::compiler::{CompileOptions, CompilerConfig};
    use hipjit::cuda::target::SmTarget;
    use hipjit::jit::{CacheLocation, Jit, JitOptions, Origin};

    let d = tempfile::tempdir().unwrap();
    let (cache, ids) = (d.path().join("cache"), d.path().join("ids"));
    let jit = || {
        Jit::new(JitOptions {
            compiler: Some(CompilerChoice::Nvrtc),
            compiler_config: CompilerConfig {
                nvcc: Some(pypi_nvcc()),
                identity_dir: Some(ids.clone()),
                ..CompilerConfig::default()
            },
            cache: CacheLocation::Roots(vec![cache.clone()]),
            ..JitOptions::default()
        })
        .unwrap()
    };
    let o = CompileOptions::for_sm(SmTarget::new(90));
    let a = "extern \"C\" __global__ void a(int* p) { p[0] = 1; }\n";
    let b = "extern \"C\" __global__ void b(int* p) { p[0] = 2; }\n";
    {
        let j = jit();
        assert_eq!(j.compile(a, &o).unwrap().origin(), Origin::Compiler);
        assert_eq!(j.compile(b, &o).unwrap().origin(), Origin::Compiler);
    }
    // A first hit remembers the library search with its identity; then all is let age.
    assert_eq!(jit().compile(a, &o).unwrap().origin(), Origin::Disk);
    std::thread::sleep(hipjit::jit::hit_memo::MIN_AGE + std::time::Duration::from_millis(300));
    let library = {
        let j = jit();
        let first = j.compile(a, &o).unwrap();
        assert_eq!(first.origin(), Origin::Disk);
        // NVRTC is found by the request for `a`; the request for `b` uses it as found.
        assert_eq!(j.compile(b, &o).unwrap().origin(), Origin::Disk);
        assert_eq!(j.stats().remembered_hits, 0);
        first.compiler().path.clone()
    };
    let hits = ids.join("hits");
    let memos: Vec<PathBuf> = std::fs::read_dir(&hits)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == "hit"))
        .collect();
    assert_eq!(memos.len(), 2, "{memos:?}");
    for m in &memos {
        let checked = hipjit::jit::hit_memo::observed_paths(m).unwrap();
        assert!(
            checked.contains(&library),
            "{}: NVRTC's library {} is not checked: {checked:#?}",
            m.display(),
            library.display()
        );
    }
    let j = jit();
    assert_eq!(j.compile(a, &o).unwrap().origin(), Origin::Disk);
    assert_eq!(j.compile(b, &o).unwrap().origin(), Origin::Disk);
    assert_eq!(j.stats().remembered_hits, 2);
}

/// A hipcc that compiles with `-DTKVAL=1` added (a stand-in for another installation: its own
/// identity, its own output), in `dir`.
fn hipcc_defining_tkval(dir: &Path) -> PathBuf {
    use std::os::unix::fs::PermissionsExt;
    std::fs::create_dir_all(dir).unwrap();
    let hipcc = dir.join("hipcc");
    std::fs::write(&hipcc, "#!/bin/sh\nexec /usr/bin/hipcc \"$@\" -DTKVAL=1\n").unwrap();
    std::fs::set_permissions(&hipcc, std::fs::Permissions::from_mode(0o755)).unwrap();
    hipcc
}

const TKVAL_SOURCE: &str =
    "#include <hip/hip_runtime.h>\n#ifndef TKVAL\n#define TKVAL 99\n#endif\n\
    extern \"C\" __global__ void k(int* p) { p[0] = TKVAL; }\n";

/// `hipjit compile --compiler hipcc --arch gfx90a` of `src` in `home` (cache root and identity
/// directory there) with exactly the environment `env`, in order and duplicates kept (an
/// `execve` through Python's ctypes: `Command` keeps one value per name). Returns stdout.
fn compile_with_raw_env(home: &Path, src: &Path, env: &[String]) -> String {
    let script = "import ctypes, sys\n\
        i = sys.argv.index('--'); env = sys.argv[1:i]; argv = sys.argv[i + 1:]\n\
        libc = ctypes.CDLL(None, use_errno=True)\n\
        A = ctypes.c_char_p * (len(argv) + 1); E = ctypes.c_char_p * (len(env) + 1)\n\
        libc.execve(argv[0].encode(), A(*[x.encode() for x in argv], None), E(*[x.encode() for x in env], None))\n\
        sys.exit('execve failed: %d' % ctypes.get_errno())\n";
    let mut all = vec![
        format!("HOME={}", s(home)),
        format!("XDG_CACHE_HOME={}", s(&home.join("xdg"))),
        format!("HIPJIT_CACHE_DIR={}", s(&home.join("cache"))),
        "PATH=/usr/bin:/bin".to_string(),
    ];
    all.extend(env.iter().cloned());
    let o = Command::new("python3")
        .arg("-c")
        .arg(script)
        .args(&all)
        .arg("--")
        .arg(env!("CARGO_BIN_EXE_hipjit"))
        .args(["compile", "--compiler", "hipcc", "--arch", "gfx90a", "-o"])
        .arg(home.join("out.bin"))
        .arg(src)
        .current_dir(home)
        .output()
        .expect("python3 runs");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    stdout(&o)
}

/// A variable set twice is read by its first occurrence: two environments holding the same
/// entries in another order are other requests, never one memo.
#[test]
fn an_environment_with_a_variable_twice_names_its_memo_by_the_order_too() {
    let home = tempfile::tempdir().unwrap();
    let home = home.path();
    let a = hipcc_defining_tkval(&home.join("wrapper"));
    // Not beside the output: a file added to the source's directory is a changed listing.
    std::fs::create_dir(home.join("project")).unwrap();
    let src = home.join("project/k.hip");
    std::fs::write(&src, TKVAL_SOURCE).unwrap();
    let a_first = [
        format!("HIPJIT_HIPCC={}", s(&a)),
        "HIPJIT_HIPCC=/usr/bin/hipcc".to_string(),
    ];
    let b_first = [a_first[1].clone(), a_first[0].clone()];
    let first = compile_with_raw_env(home, &src, &a_first);
    assert!(first.contains("miss"), "{first}");
    let second = compile_with_raw_env(home, &src, &a_first);
    assert!(second.contains("hit (disk)"), "{second}");
    std::thread::sleep(hipjit::jit::hit_memo::MIN_AGE + std::time::Duration::from_millis(300));
    assert!(compile_with_raw_env(home, &src, &a_first).contains("hit (disk)"));
    assert_eq!(
        memos(home).len(),
        1,
        "the hit with the wrapper first is remembered"
    );
    // The real hipcc first: another compiler, another key, compiled.
    let b = compile_with_raw_env(home, &src, &b_first);
    assert!(
        b.contains("miss"),
        "/usr/bin/hipcc first must compile with it, not take the wrapper's result: {b}"
    );
}

/// The child half of the next test: with `HIPJIT_HIPCC` as the parent set it, when the file
/// `mode` in `HIPJIT_TEST_HOME` says `switch`, compiles `HIPJIT_TEST_OTHER` (finding hipcc) and
/// sets `HIPJIT_HIPCC` to /usr/bin/hipcc; then compiles `HIPJIT_TEST_SOURCE` and prints
/// `ORIGIN <origin>`. (The mode is not in the environment, so that a switched process ends
/// with the very environment of one started with /usr/bin/hipcc.)
#[test]
#[ignore = "the child half of a_compiler_found_before_the_environment_changed_is_not_remembered_under_the_new_one"]
fn child_compiles_around_an_environment_change() {
    use hipjit::compiler::selection::CompilerChoice;
    use hipjit::compiler::{CompileOptions, CompilerConfig};
    use hipjit::jit::{CacheLocation, Jit, JitOptions};
    use hipjit::target_id::TargetId;
    let var = |n: &str| std::env::var_os(n).map(PathBuf::from);
    let home = var("HIPJIT_TEST_HOME").expect("run by the parent test");
    let jit = Jit::new(JitOptions {
        compiler: Some(CompilerChoice::Hipcc),
        compiler_config: CompilerConfig {
            identity_dir: Some(home.join("ids")),
            ..CompilerConfig::default()
        },
        cache: CacheLocation::Roots(vec![home.join("cache")]),
        ..JitOptions::default()
    })
    .unwrap();
    let o = CompileOptions::for_target(TargetId::parse("gfx90a").unwrap());
    if std::fs::read_to_string(home.join("mode")).unwrap() == "switch" {
        let other = var("HIPJIT_TEST_OTHER").unwrap();
        jit.compile(std::fs::read(other).unwrap(), &o).unwrap();
        std::env::set_var("HIPJIT_HIPCC", "/usr/bin/hipcc");
    }
    let c = jit
        .compile(
            std::fs::read(var("HIPJIT_TEST_SOURCE").unwrap()).unwrap(),
            &o,
        )
        .unwrap();
    println!("ORIGIN {:?}", c.origin());
}

/// A `Jit` keeps the compiler it found; a request made after the environment changed (here
/// `HIPJIT_HIPCC` pointed at another hipcc) still uses it, and its hit must not be remembered
/// under the new environment, where a fresh process finds the other compiler.
#[test]
fn a_compiler_found_before_the_environment_changed_is_not_remembered_under_the_new_one() {
    let home = tempfile::tempdir().unwrap();
    let home = home.path();
    let a = hipcc_defining_tkval(&home.join("wrapper"));
    std::fs::create_dir(home.join("project")).unwrap();
    let (src, other) = (home.join("project/k.hip"), home.join("project/other.hip"));
    std::fs::write(&src, TKVAL_SOURCE).unwrap();
    std::fs::write(
        &other,
        "#include <hip/hip_runtime.h>\nextern \"C\" __global__ void o(int* p) { p[0] = 5; }\n",
    )
    .unwrap();
    let child = |hipcc: &Path, switch: bool| -> String {
        let mut c = common::child_test(
            module_path!(),
            "child_compiles_around_an_environment_change",
        );
        c.env("HIPJIT_TEST_HOME", home)
            .env("HIPJIT_TEST_SOURCE", &src)
            .env("HIPJIT_TEST_OTHER", &other)
            .env("HIPJIT_HIPCC", hipcc)
            .env_remove("HIPJIT_COMPILER");
        std::fs::write(home.join("mode"), if switch { "switch" } else { "plain" }).unwrap();
        let o = c.output().unwrap();
        assert!(
            o.status.success(),
            "{}{}",
            stdout(&o),
            String::from_utf8_lossy(&o.stderr)
        );
        let out = stdout(&o);
        out.lines()
            .find_map(|l| l.split_once("ORIGIN ").map(|(_, o)| o.trim()))
            .unwrap_or_else(|| panic!("no ORIGIN line: {out}"))
            .to_string()
    };
    assert_eq!(child(&a, false), "Compiler");
    assert_eq!(child(&a, true), "Disk");
    std::thread::sleep(hipjit::jit::hit_memo::MIN_AGE + std::time::Duration::from_millis(300));
    // Found with the wrapper, then HIPJIT_HIPCC=/usr/bin/hipcc: a hit of the wrapper's result.
    assert_eq!(child(&a, true), "Disk");
    // A fresh process with HIPJIT_HIPCC=/usr/bin/hipcc from the start: the real hipcc compiles.
    assert_eq!(
        child(Path::new("/usr/bin/hipcc"), false),
        "Compiler",
        "served the wrapper's result remembered under /usr/bin/hipcc's environment"
    );
}
