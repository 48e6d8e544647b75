//! The names rule of the header manifest: a directory the compile searched is keyed by the
//! names looked up in it, so a new file there misses only when it could shadow or satisfy an
//! `#include` or `__has_include`; any other file (the compile's own `-o` output beside the
//! source, an editor's swap file, a log) leaves the next compile a hit. Against the real
//! compilers of this machine, through `hipjit compile`: hipRTC 5.2.3 (inside Debian's
//! `libamdhip64.so.5`; clang's dependency list) and hipcc 5.2.3.

use std::path::{Path, PathBuf};
use std::process::Command;

/// A project: `src/k.hip` (including `"util.h"` and, by `<lib.h>`, a header of the include
/// directory `inc2`, after `inc1` in the search order, and testing for `opt.h`), a cache root
/// and a home.
struct Project {
    dir: tempfile::TempDir,
}

const SOURCE: &str = "#include \"util.h\"\n#include <lib.h>\n\
    #if __has_include(<opt.h>)\n#define OPT 2\n#else\n#define OPT 1\n#endif\n\
    extern \"C\" __global__ void k(int* x) { x[0] = UTIL + LIB + OPT; }\n";

impl Project {
    fn new() -> Project {
        let dir = tempfile::tempdir().unwrap();
        for d in ["src", "inc1", "inc2", "home"] {
            std::fs::create_dir(dir.path().join(d)).unwrap();
        }
        std::fs::write(dir.path().join("src/k.hip"), SOURCE).unwrap();
        std::fs::write(dir.path().join("src/util.h"), "#define UTIL 10\n").unwrap();
        std::fs::write(dir.path().join("inc2/lib.h"), "#define LIB 100\n").unwrap();
        Project { dir }
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    /// [`compile_in`] on this project.
    fn compile(&self, compiler: &str, out: &Path) -> String {
        compile_in(self.dir.path(), compiler, out)
    }

    fn expect(&self, compiler: &str, origin: &str, after: &str) {
        let out = self.path("home/out.co");
        let line = self.compile(compiler, &out);
        assert!(
            line.contains(origin),
            "after {after}: expected {origin}: {line}"
        );
    }
}

/// `hipjit compile --compiler COMPILER --arch gfx90a -I inc1 -I inc2 src/k.hip -o OUT` in
/// project directory `dir` (its cache root and home there too); the first line of its output
/// (`...: miss (compiled) ...` or `...: hit (disk) ...`).
fn compile_in(dir: &Path, compiler: &str, out: &Path) -> String {
    let o = Command::new(env!("CARGO_BIN_EXE_hipjit"))
        .args(["compile", "--compiler", compiler, "--arch", "gfx90a", "-I"])
        .arg(dir.join("inc1"))
        .arg("-I")
        .arg(dir.join("inc2"))
        .arg("-o")
        .arg(out)
        .arg(dir.join("src/k.hip"))
        .env("HIPJIT_CACHE_DIR", dir.join("cache"))
        .env("HOME", dir.join("home"))
        .env_remove("XDG_CACHE_HOME")
        .env_remove("HIPJIT_REMOTE_CACHE")
        .env_remove("HIPJIT_HIPRTC_LIBRARY")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&o.stdout).into_owned();
    assert_eq!(
        o.status.code(),
        Some(0),
        "{stdout}{}",
        String::from_utf8_lossy(&o.stderr)
    );
    stdout.lines().next().unwrap_or_default().to_owned()
}

/// Each step of the rule with one compiler: the output beside the source and unrelated files
/// hit; a shadowing header and one a `__has_include` now finds miss.
fn names_rule(compiler: &str) {
    let p = Project::new();
    // `-o` beside the source: the second compile (its output now there) is a hit.
    let beside = p.path("src/k.co");
    assert!(p.compile(compiler, &beside).contains("miss"));
    let again = p.compile(compiler, &beside);
    assert!(
        again.contains("hit (disk)"),
        "-o beside the source: {again}"
    );

    // Files of names nothing looks up, in every directory searched: hits.
    for f in [
        "src/.k.hip.swp",
        "src/notes.log",
        "inc1/other.h",
        "inc2/lib.hpp",
    ] {
        std::fs::write(p.path(f), "x\n").unwrap();
    }
    std::fs::create_dir(p.path("src/__pycache__")).unwrap();
    p.expect(compiler, "hit (disk)", "unrelated files were added");

    // A `lib.h` in `inc1`, searched before `inc2`, shadows the one read: a miss.
    std::fs::write(p.path("inc1/lib.h"), "#define LIB 200\n").unwrap();
    p.expect(
        compiler,
        "miss",
        "inc1/lib.h shadowing inc2/lib.h was added",
    );
    p.expect(compiler, "hit (disk)", "nothing changed");

    // A file that the source's `__has_include(<opt.h>)` now finds: a miss.
    std::fs::write(p.path("inc2/opt.h"), "\n").unwrap();
    p.expect(
        compiler,
        "miss",
        "inc2/opt.h, which a __has_include tests for, was added",
    );

    // A directory on the way to a looked-up name does not change by an unrelated entry.
    std::fs::write(p.path("inc1/unrelated.txt"), "x\n").unwrap();
    p.expect(compiler, "hit (disk)", "one more unrelated file was added");
}

#[test]
fn names_rule_with_hiprtc_5() {
    names_rule("hiprtc");
}

#[test]
fn names_rule_with_hipcc_5() {
    names_rule("hipcc");
}

/// A project of `src/k.hip` = `source` (its kernel writes `VAL`), `inc1`, `inc2` and what
/// `setup` adds; compiled, changed by `change`, compiled again: a miss is expected (the
/// preprocessor now reads other bytes), never a stale hit.
fn misses_after(what: &str, source: &str, setup: impl Fn(&Path), change: impl Fn(&Path)) {
    let d = tempfile::tempdir().unwrap();
    for sub in ["src", "inc1", "inc2", "home"] {
        std::fs::create_dir_all(d.path().join(sub)).unwrap();
    }
    std::fs::write(
        d.path().join("src/k.hip"),
        format!("{source}\nextern \"C\" __global__ void k(int* x) {{ x[0] = VAL; }}\n"),
    )
    .unwrap();
    setup(d.path());
    assert!(
        compile_in(d.path(), "hiprtc", &d.path().join("out.co")).contains("miss"),
        "{what}: the first compile"
    );
    change(d.path());
    let second = compile_in(d.path(), "hiprtc", &d.path().join("out.co"));
    assert!(second.contains("miss"), "{what}: a stale hit: {second}");
}

/// Ways a name hides from a lexical scan, each found by a tester: the key falls back or reads
/// the name as the preprocessor does, and the change misses.
#[test]
fn names_hidden_from_a_lexical_scan_still_miss() {
    let has_x = "#else\n#define VAL 1\n#endif";
    let add_x = |d: &Path| std::fs::write(d.join("inc1/x.h"), "\n").unwrap();
    misses_after(
        "a continued __has_include",
        &format!("#if __has_include \\\n(\"x.h\")\n#define VAL 2\n{has_x}"),
        |_| {},
        add_x,
    );
    misses_after(
        "a /* in a string before it",
        &format!(
            "static const char* s = \"/*\";\n#if __has_include(\"x.h\")\n#define VAL 2\n\
             {has_x}\nstatic const char* t = \"*/\";"
        ),
        |_| {},
        add_x,
    );
    misses_after(
        "__has_include under another name",
        &format!("#define HI __has_include\n#if HI(\"x.h\")\n#define VAL 2\n{has_x}"),
        |_| {},
        add_x,
    );
    misses_after(
        "a digraph include in a subdirectory's header",
        "#include \"sub/h.h\"",
        |d| {
            std::fs::create_dir(d.join("inc1/sub")).unwrap();
            std::fs::write(d.join("inc1/sub/h.h"), "%:include \"a.h\"\n").unwrap();
            std::fs::write(d.join("inc2/a.h"), "#define VAL 1\n").unwrap();
        },
        |d| std::fs::write(d.join("inc1/sub/a.h"), "#define VAL 2\n").unwrap(),
    );
}

/// `..` through a symbolic link is resolved by the kernel, not the text; and a dangling link
/// among the names looked up gains its target elsewhere: both miss.
#[test]
fn a_parent_name_through_a_link_and_a_dangling_links_target_miss() {
    misses_after(
        "\"../cfg.h\" from an include directory that is a link",
        "#include \"../cfg.h\"",
        |d| {
            std::fs::remove_dir(d.join("inc1")).unwrap();
            std::fs::create_dir_all(d.join("x/y/inc")).unwrap();
            std::os::unix::fs::symlink(d.join("x/y/inc"), d.join("inc1")).unwrap();
            std::fs::write(d.join("cfg.h"), "#define VAL 1\n").unwrap();
        },
        |d| std::fs::write(d.join("x/y/cfg.h"), "#define VAL 2\n").unwrap(),
    );
    misses_after(
        "a dangling link's target written",
        "#include \"a.h\"",
        |d| {
            std::fs::write(d.join("inc2/a.h"), "#define VAL 1\n").unwrap();
            std::os::unix::fs::symlink(d.join("gen/a.h"), d.join("inc1/a.h")).unwrap();
        },
        |d| {
            std::fs::create_dir(d.join("gen")).unwrap();
            std::fs::write(d.join("gen/a.h"), "#define VAL 2\n").unwrap();
        },
    );
}
