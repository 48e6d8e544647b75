//! The disk cache never serves code built from other headers than the ones on disk now, with
//! the real compiler of the environment named by `HIPJIT_TEST_ENV` (`bookworm`: hipcc 5.2.3;
//! `sid`: hipcc 7.0.2, run by scripts/sid-test.sh): the key covers every file the compiler's own
//! dependency output lists, whatever preprocessor spelling reached it, and the directories
//! searched for them.
//!
//! Every compile uses a fresh `Jit` (no in-process hit). An unchanged tree is checked to be a
//! disk hit first, so that each miss after an edit is the edit's doing.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::time::Duration;

use hipjit::compiler::{CompileError, CompileOptions, CompilerConfig, ENV_ALLOWLIST};
use hipjit::jit::{CacheLocation, Compiled, Jit, JitError, JitOptions, Origin};
use hipjit::target_id::TargetId;

fn target() -> TargetId {
    let t = match std::env::var("HIPJIT_TEST_ENV").as_deref() {
        Ok("sid") => "gfx942",
        _ => "gfx90a",
    };
    TargetId::parse(t).unwrap()
}

/// Waits past the filesystem's timestamp granularity: a header written just before a compile
/// starts is "too new" for its result to be published.
fn settle() {
    std::thread::sleep(Duration::from_millis(60));
}

fn process_env() -> Vec<(String, OsString)> {
    ENV_ALLOWLIST
        .iter()
        .filter_map(|k| std::env::var_os(k).map(|v| (k.to_string(), v)))
        .collect()
}

fn jit(cache: &Path, env: Option<Vec<(String, OsString)>>, hipcc: Option<PathBuf>) -> Jit {
    Jit::new(JitOptions {
        // hipcc, whatever HIPJIT_COMPILER says: these tests are about it.
        compiler: Some(hipjit::compiler::selection::CompilerChoice::Hipcc),
        cache: CacheLocation::Roots(vec![cache.to_path_buf()]),
        compiler_config: CompilerConfig {
            env,
            hipcc,
            ..CompilerConfig::default()
        },
        ..JitOptions::default()
    })
    .unwrap_or_else(|e| panic!("{e}"))
}

fn compile(cache: &Path, src: &str, opts: &CompileOptions) -> Compiled {
    compile_env(cache, src, opts, None)
}

fn compile_env(
    cache: &Path,
    src: &str,
    opts: &CompileOptions,
    env: Option<Vec<(String, OsString)>>,
) -> Compiled {
    jit(cache, env, None)
        .compile(src, opts)
        .unwrap_or_else(|e| panic!("{e}"))
}

fn write(path: &Path, text: &str) {
    if let Some(p) = path.parent() {
        std::fs::create_dir_all(p).unwrap();
    }
    std::fs::write(path, text).unwrap();
}

/// A kernel storing `V`, after `preamble` (which must define it).
fn kernel(preamble: &str) -> String {
    format!("{preamble}\nextern \"C\" __global__ void k(int* x) {{ x[0] = V; }}\n")
}

/// One source reaching eight headers by each spelling and search path the key must cover;
/// each step edits one of them (or adds a file), and the next compile must be a miss with
/// different code (one compile per step keeps the real-compiler time down: the previous step
/// published its result, so a hit would be the stale entry).
///
/// | step | reached by |
/// |---|---|
/// | `include_next` | `a/next.h` doing `#include_next <next.h>`, value in `b/next.h` (`-I a -I b`) |
/// | `import` | `#import <imp.h>` |
/// | `backslash-newline` | `#inc\` newline `lude <bs.h>` |
/// | `macro` | `#define H <hidden.h>` then `#include H` |
/// | `symlink` | `a/link.h` -> `real/r.h`, whose `#include "lb.h"` resolves next to the link (`a/lb.h`) |
/// | `cpath` | `CPATH=c`, `#include <cp.h>` |
/// | `shadowing` | `b/sub/sh.h` read; a new `a/sub/sh.h` (searched first) shadows it |
/// | `has_include` | `__has_include(<opt.h>)` false; a new `b/opt.h` makes it true |
#[test]
fn every_spelling_and_search_path_of_a_header_is_covered_by_the_key() {
    let t = tempfile::tempdir().unwrap();
    let root = t.path();
    let (a, b, c) = (root.join("a"), root.join("b"), root.join("c"));
    write(&a.join("next.h"), "#include_next <next.h>\n");
    write(&b.join("next.h"), "#define V1 1\n");
    write(&a.join("imp.h"), "#define V2 1\n");
    write(&a.join("bs.h"), "#define V3 1\n");
    write(&a.join("hidden.h"), "#define V4 1\n");
    write(&root.join("real/r.h"), "#include \"lb.h\"\n");
    write(&a.join("lb.h"), "#define V5 1\n");
    std::os::unix::fs::symlink(root.join("real/r.h"), a.join("link.h")).unwrap();
    write(&c.join("cp.h"), "#define V6 1\n");
    std::fs::create_dir_all(a.join("sub")).unwrap();
    write(&b.join("sub/sh.h"), "#define V7 1\n");
    let src = "#include <next.h>\n#import <imp.h>\n#inc\\\nlude <bs.h>\n\
               #define HIDDEN <hidden.h>\n#include HIDDEN\n#include <link.h>\n\
               #include <cp.h>\n#include <sub/sh.h>\n\
               #if __has_include(<opt.h>)\n#include <opt.h>\n#else\n#define V8 1\n#endif\n\
               extern \"C\" __global__ void k(int* x) {\n\
               x[0] = V1; x[1] = V2; x[2] = V3; x[3] = V4;\n\
               x[4] = V5; x[5] = V6; x[6] = V7; x[7] = V8; }\n";
    let mut env = process_env();
    env.retain(|(k, _)| k != "CPATH");
    env.push(("CPATH".into(), c.clone().into_os_string()));
    let opts = CompileOptions::for_target(target())
        .include_dir(&a)
        .include_dir(&b);
    let cache = root.join("cache");
    settle();
    let mut previous = compile_env(&cache, src, &opts, Some(env.clone()));
    assert_eq!(previous.origin(), Origin::Compiler);
    let hit = compile_env(&cache, src, &opts, Some(env.clone()));
    assert_eq!(hit.origin(), Origin::Disk, "an unchanged tree hits");
    let steps: [(&str, PathBuf, &str); 8] = [
        ("include_next", b.join("next.h"), "#define V1 2\n"),
        ("import", a.join("imp.h"), "#define V2 2\n"),
        ("backslash-newline", a.join("bs.h"), "#define V3 2\n"),
        ("macro", a.join("hidden.h"), "#define V4 2\n"),
        ("symlink", a.join("lb.h"), "#define V5 2\n"),
        ("cpath", c.join("cp.h"), "#define V6 2\n"),
        ("shadowing", a.join("sub/sh.h"), "#define V7 2\n"),
        ("has_include", b.join("opt.h"), "#define V8 2\n"),
    ];
    for (step, file, text) in steps {
        assert!(
            previous.entry_path().is_some(),
            "before {step}: the previous result is published"
        );
        write(&file, text);
        settle();
        let next = compile_env(&cache, src, &opts, Some(env.clone()));
        assert_eq!(
            next.origin(),
            Origin::Compiler,
            "{step}: the edit must be a miss, not the old code from the disk cache"
        );
        assert_ne!(next.key(), previous.key(), "{step}");
        assert_ne!(
            next.code_object().unwrap().elf(),
            previous.code_object().unwrap().elf(),
            "{step}: the new value is in the new code"
        );
        previous = next;
    }
}

/// A compile for two targets: clang writes the dependency list once per target into one file,
/// so a header included only under the first target's `#if` must still be covered.
#[test]
fn a_header_read_for_one_target_of_several_is_covered() {
    let (first, second) = match std::env::var("HIPJIT_TEST_ENV").as_deref() {
        Ok("sid") => ("gfx942", "gfx1100"),
        _ => ("gfx906", "gfx90a"),
    };
    let t = tempfile::tempdir().unwrap();
    write(&t.path().join("first.h"), "#define V 1\n");
    write(&t.path().join("second.h"), "#define V 7\n");
    let src = kernel(&format!(
        "#if defined(__{first}__)\n#include <first.h>\n#else\n#include <second.h>\n#endif"
    ));
    let mut opts =
        CompileOptions::for_target(TargetId::parse(first).unwrap()).include_dir(t.path());
    opts.targets.push(TargetId::parse(second).unwrap());
    let cache = t.path().join("cache");
    settle();
    let before = compile(&cache, &src, &opts);
    assert_eq!(before.origin(), Origin::Compiler);
    assert!(before.entry_path().is_some(), "published");
    write(&t.path().join("first.h"), "#define V 2\n");
    settle();
    let after = compile(&cache, &src, &opts);
    assert_eq!(
        after.origin(),
        Origin::Compiler,
        "the first target's header changed: a miss"
    );
    assert_ne!(
        after.code_objects()[0].elf(),
        before.code_objects()[0].elf(),
        "the first target's code has the new value"
    );
}

/// A script standing in for hipcc: `--version`, `-###` and `-fsyntax-only` go to the real hipcc; a compile runs
/// `body` (sh) with the arguments.
fn fake_hipcc(dir: &Path, body: &str) -> PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let real = which_hipcc();
    let path = dir.join("hipcc");
    std::fs::write(
        &path,
        format!(
            "#!/bin/sh\ncase \"$1\" in --version|-###|-fsyntax-only) exec '{}' \"$@\";; esac\n{body}\n",
            real.display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    path
}

fn which_hipcc() -> PathBuf {
    std::env::var_os("PATH")
        .iter()
        .flat_map(std::env::split_paths)
        .map(|d| d.join("hipcc"))
        .find(|p| p.is_file())
        .expect("hipcc on PATH")
}

#[test]
fn a_compile_that_leaves_no_dependency_list_is_an_error() {
    let t = tempfile::tempdir().unwrap();
    // Writes a real code object where the compile's output goes, and no dependency list.
    let object = crate::common::code_object("kernels-gfx90a.hsaco");
    let fake = fake_hipcc(t.path(), &format!("cp '{}' out.hsaco", object.display()));
    let err = jit(&t.path().join("cache"), None, Some(fake))
        .compile(kernel("#define V 1"), &CompileOptions::for_target(target()))
        .expect_err("no dependency list, no result");
    match err {
        JitError::Compile(CompileError::NoDependencies { reason, .. }) => {
            assert!(reason.contains("cannot be read"), "{reason}")
        }
        other => panic!("expected NoDependencies, got {other}"),
    }
}

/// A header edited while the real compiler runs: the result goes to the caller but is not
/// published, so the next compile reads the header as it is now.
#[test]
fn a_header_edited_during_the_compile_is_not_published() {
    let t = tempfile::tempdir().unwrap();
    let inc = t.path().join("inc");
    write(&inc.join("x.h"), "#define V 1\n");
    // The real compiler in the background; the header rewritten while it runs (after the
    // preprocessor has read it, on this machine's timing, but what matters is only that the
    // write falls inside the compile).
    let fake = fake_hipcc(
        t.path(),
        &format!(
            "'{}' \"$@\" &\npid=$!\nsleep 0.3\nprintf '#define V 2\\n' > '{}'\nwait $pid",
            which_hipcc().display(),
            inc.join("x.h").display()
        ),
    );
    let cache = t.path().join("cache");
    let opts = CompileOptions::for_target(target()).include_dir(&inc);
    let src = kernel("#include <x.h>");
    settle();
    let during = jit(&cache, None, Some(fake))
        .compile(&src, &opts)
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(during.origin(), Origin::Compiler);
    assert!(
        during.entry_path().is_none(),
        "a result built while its header changed is not published"
    );
    settle();
    let next = compile(&cache, &src, &opts);
    assert_eq!(next.origin(), Origin::Compiler, "no stale entry to hit");
    assert!(next.entry_path().is_some(), "a quiet compile is published");
    let again = compile(&cache, &src, &opts);
    assert_eq!(again.origin(), Origin::Disk);
}

/// The stat the header manifest under `src`'s direct key records for the file named `name`.
fn recorded_stat(
    cache: &Path,
    src: &str,
    opts: &CompileOptions,
    name: &str,
) -> hipjit::compiler::identity::FileStat {
    let direct = jit(cache, None, None).source_key(src, opts).unwrap();
    let disk = hipjit::cache::disk::DiskCache::open(&[cache.to_path_buf()]).unwrap();
    let entry = disk.get(&direct).entry.expect("a header manifest");
    let bytes = entry
        .artefact(hipjit::cache::manifest::MANIFEST_ARTEFACT)
        .unwrap();
    let manifest = hipjit::cache::manifest::Manifest::from_bytes(bytes).unwrap();
    manifest
        .files
        .iter()
        .find(|f| f.name.ends_with(name.as_bytes()))
        .unwrap_or_else(|| panic!("{name} is not in the manifest"))
        .stat
}

/// A header whose stat changes and whose bytes do not (touched, linked, copied over): a hit
/// hashes it again, and stores its stat as it is now once that stat is two seconds old, so
/// that later hits trust the stat instead of hashing the file at every lookup; an edit of its
/// bytes afterwards, keeping its size, is still a miss.
#[test]
fn a_touched_header_is_hashed_again_once_then_trusted_and_a_later_edit_is_still_seen() {
    let d = tempfile::tempdir().unwrap();
    let cache = d.path().join("cache");
    let inc = d.path().join("inc");
    let header = inc.join("touched.h");
    write(&header, "#define V 1\n");
    settle();
    let opts = CompileOptions {
        include_dirs: vec![inc.clone()],
        ..CompileOptions::for_target(target())
    };
    let src = kernel("#include <touched.h>");
    let first = compile(&cache, &src, &opts);
    assert_eq!(first.origin(), Origin::Compiler);
    let now = || hipjit::compiler::identity::FileStat::read(&header).unwrap();
    assert_eq!(recorded_stat(&cache, &src, &opts, "touched.h"), now());

    // Touched: new times, same bytes. A hit at once hashes it and does not trust its new
    // stat yet (it may still be changing).
    std::fs::File::options()
        .write(true)
        .open(&header)
        .unwrap()
        .set_modified(std::time::SystemTime::now())
        .unwrap();
    let hit = compile(&cache, &src, &opts);
    assert_eq!((hit.origin(), hit.key()), (Origin::Disk, first.key()));
    assert_ne!(recorded_stat(&cache, &src, &opts, "touched.h"), now());
    // Two seconds later, a hit stores the stat as it is now.
    std::thread::sleep(Duration::from_millis(2100));
    let hit = compile(&cache, &src, &opts);
    assert_eq!((hit.origin(), hit.key()), (Origin::Disk, first.key()));
    assert_eq!(recorded_stat(&cache, &src, &opts, "touched.h"), now());
    let again = compile(&cache, &src, &opts);
    assert_eq!((again.origin(), again.key()), (Origin::Disk, first.key()));

    // Edited, same size: a miss with another result.
    write(&header, "#define V 2\n");
    settle();
    let edited = compile(&cache, &src, &opts);
    assert_eq!(edited.origin(), Origin::Compiler);
    assert_ne!(edited.key(), first.key());
}
