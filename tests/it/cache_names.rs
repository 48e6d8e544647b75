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

    /// `hipjit compile --compiler COMPILER --arch gfx90a -I inc1 -I inc2 src/k.hip -o OUT`;
    /// its first line (`...: miss (compiled) ...` or `...: hit (disk) ...`).
    fn compile(&self, compiler: &str, out: &Path) -> String {
        let o = Command::new(env!("CARGO_BIN_EXE_hipjit"))
            .args(["compile", "--compiler", compiler, "--arch", "gfx90a", "-I"])
            .arg(self.path("inc1"))
            .arg("-I")
            .arg(self.path("inc2"))
            .arg("-o")
            .arg(out)
            .arg(self.path("src/k.hip"))
            .env("HIPJIT_CACHE_DIR", self.path("cache"))
            .env("HOME", self.path("home"))
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

    fn expect(&self, compiler: &str, origin: &str, after: &str) {
        let out = self.path("home/out.co");
        let line = self.compile(compiler, &out);
        assert!(
            line.contains(origin),
            "after {after}: expected {origin}: {line}"
        );
    }
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
