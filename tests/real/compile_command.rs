//! `hipjit compile` takes what hipcc takes: sources in any encoding, the C++ standard, extra
//! flags, and gives back the compiler's whole message with the user's own paths. Run against
//! the real compiler of the environment named by `HIPJIT_TEST_ENV` (`bookworm`: Debian's
//! hipcc 5.2.3 over clang-15, the default; `sid`: hipcc 7.0.2 over clang-21, inside the sid
//! root filesystem through scripts/sid-test.sh), with sources written here.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use hipjit::compiler::{CompileOptions, CxxStd};
use hipjit::jit::{CacheLocation, Jit, JitOptions, Origin};
use hipjit::target_id::TargetId;

const TARGET: &str = "gfx90a";

fn hipjit(cache: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_hipjit"))
        .args(args)
        .env("HIPJIT_CACHE_DIR", cache)
        .env_remove("HIPJIT_HIPCC")
        // hipcc's command line is what these tests are about (Auto takes hipRTC 6 for gfx90a).
        .env("HIPJIT_COMPILER", "hipcc")
        .output()
        .expect("the hipjit binary runs")
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn json(o: &Output) -> serde_json::Value {
    serde_json::from_slice(&o.stdout).unwrap_or_else(|e| {
        panic!(
            "stdout is not JSON ({e}):\n{}\nstderr:\n{}",
            String::from_utf8_lossy(&o.stdout),
            stderr(o)
        )
    })
}

fn write(dir: &Path, name: &str, bytes: &[u8]) -> PathBuf {
    let p = dir.join(name);
    if let Some(parent) = p.parent() {
        std::fs::create_dir_all(parent).unwrap();
    }
    std::fs::write(&p, bytes).unwrap();
    p
}

fn s(p: &Path) -> &str {
    p.to_str().expect("a UTF-8 path")
}

/// `hipjit compile --json --arch gfx90a ARGS`, asserting the exit status.
fn compile_json(cache: &Path, args: &[&str], status: i32) -> serde_json::Value {
    let mut all = vec!["compile", "--json", "--arch", TARGET];
    all.extend_from_slice(args);
    let o = hipjit(cache, &all);
    assert_eq!(o.status.code(), Some(status), "{all:?}\n{}", stderr(&o));
    json(&o)
}

#[test]
fn latin1_source_and_header_compile_and_are_keyed_by_their_bytes() {
    let dir = tempfile::tempdir().unwrap();
    // A copyright sign in Latin-1 (one byte 0xa9, not UTF-8) in the source and in a header.
    write(
        dir.path(),
        "inc/latin1.h",
        b"// \xa9 2026\n#define SCALE 3\n",
    );
    let src = write(
        dir.path(),
        "latin1.hip",
        b"// \xa9 2026 (Latin-1)\n#include \"latin1.h\"\n\
          extern \"C\" __global__ void scale(int* p) { p[0] *= SCALE; }\n",
    );
    let inc = dir.path().join("inc");
    let v = compile_json(&dir.path().join("cache"), &["-I", s(&inc), s(&src)], 0);
    let r = &v["results"][0];
    assert_eq!(r["ok"], true, "{v:#}");
    assert_eq!(r["code_objects"][0]["kernels"][0]["name"], "scale", "{v:#}");

    // The library: the same text in Latin-1 and in UTF-8 are two keys.
    let jit = Jit::new(JitOptions {
        // hipcc, whatever HIPJIT_COMPILER says: these tests are about it.
        compiler: Some(hipjit::compiler::selection::CompilerChoice::Hipcc),
        cache: CacheLocation::Disabled,
        ..JitOptions::default()
    })
    .unwrap();
    let o = CompileOptions::for_target(TargetId::parse(TARGET).unwrap());
    let latin1: &[u8] = b"// \xa9\nextern \"C\" __global__ void k() {}\n";
    let utf8 = "// \u{a9}\nextern \"C\" __global__ void k() {}\n";
    assert_ne!(
        jit.source_key(latin1, &o).unwrap(),
        jit.source_key(utf8, &o).unwrap()
    );
    let owned: Vec<u8> = latin1.into();
    assert_eq!(
        jit.source_key(latin1, &o).unwrap(),
        jit.source_key(owned, &o).unwrap()
    );
}

/// A kernel that compiles only when `LOW <= __cplusplus < HIGH`.
const STD_PROBE: &[u8] = b"static_assert(__cplusplus >= LOW, \"standard older than asked\");\n\
    static_assert(__cplusplus < HIGH, \"standard newer than asked\");\n\
    extern \"C\" __global__ void k(long* p) { p[0] = __cplusplus; }\n";

#[test]
fn std_selects_the_standard_cxx17_by_default_and_cxx23_on_every_clang() {
    let dir = tempfile::tempdir().unwrap();
    let src = write(dir.path(), "std.hip", STD_PROBE);
    let cache = dir.path().join("cache");
    let run = |extra: &[&str], low: &str, high: &str| {
        let (l, h) = (format!("LOW={low}"), format!("HIGH={high}"));
        let mut args = vec!["-D", &l, "-D", &h];
        args.extend_from_slice(extra);
        args.push(s(&src));
        compile_json(&cache, &args, 0)
    };
    // The default: C++17 (201703L).
    let v = run(&[], "201703L", "201704L");
    assert_eq!(v["std"], "c++17", "{v:#}");
    // -std=c++20, the compiler's own spelling, on hipjit's command line.
    let v = run(&["-std=c++20"], "202002L", "202003L");
    assert_eq!(v["std"], "c++20", "{v:#}");
    // C++23: -std=c++2b for clang-15 (__cplusplus 202101L), -std=c++23 for clang-21
    // (202302L); both are past C++20.
    let v = run(&["--std", "c++23"], "202100L", "202303L");
    assert_eq!(v["std"], "c++23", "{v:#}");
}

/// A kernel with an unused variable: a warning under -Wunused-variable, an error with -Werror.
const UNUSED: &[u8] =
    b"extern \"C\" __global__ void k(int* p) {\n    int unused_here;\n    p[0] = 1;\n}\n";

#[test]
fn cflags_and_words_after_dashes_reach_the_compiler_and_the_key() {
    let dir = tempfile::tempdir().unwrap();
    let src = write(dir.path(), "unused.hip", UNUSED);
    let cache = dir.path().join("cache");
    let plain = compile_json(&cache, &[s(&src)], 0);
    assert_eq!(
        plain["results"][0]["diagnostics"],
        serde_json::json!([]),
        "{plain:#}"
    );
    let warned = compile_json(&cache, &["--cflag", "-Wunused-variable", s(&src)], 0);
    let r = &warned["results"][0];
    assert_ne!(r["key"], plain["results"][0]["key"], "{warned:#}");
    assert_eq!(
        warned["extra_flags"],
        serde_json::json!(["-Wunused-variable"])
    );
    let d = &r["diagnostics"][0];
    assert_eq!(d["severity"], "warning", "{warned:#}");
    assert_eq!(d["file"], s(&src), "{warned:#}");
    assert_eq!(
        (d["line"].as_u64(), d["column"].as_u64()),
        (Some(2), Some(9))
    );
    assert!(
        d["message"].as_str().unwrap().contains("unused_here"),
        "{d}"
    );
    let failed = compile_json(
        &cache,
        &["--cflag=-Wunused-variable", s(&src), "--", "-Werror"],
        1,
    );
    let d = &failed["results"][0]["diagnostics"][0];
    assert_eq!(d["severity"], "error", "{failed:#}");
    assert!(
        d["message"].as_str().unwrap().contains("unused_here"),
        "{d}"
    );
}

#[test]
fn refused_flags_are_usage_errors_naming_the_flag_and_the_compiler() {
    let dir = tempfile::tempdir().unwrap();
    let src = write(dir.path(), "unused.hip", UNUSED);
    for flags in [
        &["--cflag", "-MD"][..],
        &["--cflag=--offload-arch=gfx906"],
        &["--cflag", "-save-temps"],
        &["--", "-include", "x.h"],
        &["--", "@flags.rsp"],
        &["--cflag=--rocm-path=/opt/rocm"],
        &["--", "-Xclang", "-mlink-bitcode-file"],
    ] {
        let mut args = vec!["compile", "--arch", TARGET, s(&src)];
        args.extend_from_slice(flags);
        let o = hipjit(&dir.path().join("cache"), &args);
        let err = stderr(&o);
        assert_eq!(o.status.code(), Some(2), "{flags:?}: {err}");
        let named = flags
            .iter()
            .rev()
            .find(|f| f.starts_with(['-', '@']))
            .unwrap();
        let named = named.strip_prefix("--cflag=").unwrap_or(named);
        assert!(err.contains(named), "{flags:?}: {err}");
        assert!(err.contains("hipcc"), "{flags:?}: {err}");
    }
}

#[test]
fn header_warning_shows_the_users_paths_include_chain_and_caret_and_replays_on_a_hit() {
    let dir = tempfile::tempdir().unwrap();
    write(
        dir.path(),
        "inc/deeper.h",
        b"#pragma once\n__device__ inline int twice(int x) {\n    int spare;\n    return 2 * x;\n}\n",
    );
    write(
        dir.path(),
        "inc/util.h",
        b"#pragma once\n// helpers\n#include \"deeper.h\"\n",
    );
    let src = write(
        dir.path(),
        "main.hip",
        b"#include \"util.h\"\nextern \"C\" __global__ void k(int* p) { p[0] = twice(p[0]); }\n",
    );
    let inc = dir.path().join("inc");
    let cache = dir.path().join("cache");
    // Headers written as a compile starts leave its result unpublished (the "too new" rule of
    // hipjit::cache::manifest); the second compile below must be a hit.
    std::thread::sleep(std::time::Duration::from_millis(60));
    let args = ["-I", s(&inc), "--cflag", "-Wunused-variable", s(&src)];
    let v = compile_json(&cache, &args, 0);
    let d = &v["results"][0]["diagnostics"][0];
    assert_eq!(d["severity"], "warning", "{v:#}");
    assert_eq!(d["file"], s(&inc.join("deeper.h")), "{v:#}");
    assert_eq!(
        (d["line"].as_u64(), d["column"].as_u64()),
        (Some(3), Some(9))
    );
    assert_eq!(
        d["included_from"],
        serde_json::json!([
            {"file": s(&src), "line": 1},
            {"file": s(&inc.join("util.h")), "line": 3},
        ]),
        "{v:#}"
    );
    let excerpt: Vec<&str> = d["excerpt"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|l| l.as_str())
        .collect();
    // As the compiler printed them: clang-21 puts the line number in a margin (`3 |`).
    assert!(excerpt[0].ends_with("    int spare;"), "{v:#}");
    assert!(excerpt[1].contains('^'), "{v:#}");

    // The same compile again: a disk hit that prints the recorded warning as clang did.
    let mut text_args = vec!["compile", "--arch", TARGET];
    text_args.extend_from_slice(&args);
    let o = hipjit(&cache, &text_args);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(String::from_utf8_lossy(&o.stdout).contains("hit (disk)"));
    let err = stderr(&o);
    let want = format!(
        "In file included from {}:1:\nIn file included from {}:3:\n{}:3:9: warning: unused variable 'spare'",
        s(&src),
        s(&inc.join("util.h")),
        s(&inc.join("deeper.h"))
    );
    assert!(err.contains(&want), "wanted\n{want}\nin\n{err}");
    assert!(!err.contains("include/0"), "a staging path leaked: {err}");
}

#[test]
fn error_with_a_note_carries_the_note_its_location_and_both_carets() {
    let dir = tempfile::tempdir().unwrap();
    write(
        dir.path(),
        "inc/one.h",
        b"#pragma once\n__device__ inline int one(int x) { return x; }\n",
    );
    let src = write(
        dir.path(),
        "call.hip",
        b"#include \"one.h\"\nextern \"C\" __global__ void k(int* p) {\n    p[0] = one(1, 2);\n}\n",
    );
    let inc = dir.path().join("inc");
    let cache = dir.path().join("cache");
    let v = compile_json(&cache, &["-I", s(&inc), s(&src)], 1);
    let d = &v["results"][0]["diagnostics"][0];
    assert_eq!(d["severity"], "error", "{v:#}");
    assert_eq!(
        (d["file"].as_str(), d["line"].as_u64()),
        (Some(s(&src)), Some(3))
    );
    let note = &d["notes"][0];
    assert_eq!(note["severity"], "note", "{v:#}");
    assert_eq!(note["file"], s(&inc.join("one.h")), "{v:#}");
    assert_eq!(note["line"], 2, "{v:#}");
    assert_eq!(
        note["included_from"],
        serde_json::json!([{"file": s(&src), "line": 1}]),
        "{v:#}"
    );
    assert!(
        note["excerpt"][1].as_str().unwrap_or("").contains('^'),
        "{v:#}"
    );
    let o = hipjit(
        &cache,
        &["compile", "--arch", TARGET, "-I", s(&inc), s(&src)],
    );
    assert_eq!(o.status.code(), Some(1));
    let err = stderr(&o);
    assert!(
        err.contains(&format!("{}:3:12: error: no matching function", s(&src))),
        "{err}"
    );
    assert!(
        err.contains(&format!("{}:2:", s(&inc.join("one.h")))) && err.contains("note: "),
        "{err}"
    );
    assert!(err.contains("    p[0] = one(1, 2);\n"), "{err}");
}

#[test]
fn library_std_cxx23_compiles_on_this_clang() {
    let jit = Jit::new(JitOptions {
        // hipcc, whatever HIPJIT_COMPILER says: these tests are about it.
        compiler: Some(hipjit::compiler::selection::CompilerChoice::Hipcc),
        cache: CacheLocation::Disabled,
        ..JitOptions::default()
    })
    .unwrap();
    let o = CompileOptions {
        std: CxxStd::Cxx23,
        defines: vec![
            ("LOW".into(), Some("202100L".into())),
            ("HIGH".into(), Some("202303L".into())),
        ],
        ..CompileOptions::for_target(TargetId::parse(TARGET).unwrap())
    };
    let c = jit.compile(STD_PROBE, &o).unwrap_or_else(|e| panic!("{e}"));
    // Measured: clang-15 (bookworm) rejects -std=c++23 and takes c++2b; clang-21 (sid)
    // takes c++23.
    let spelled = match std::env::var("HIPJIT_TEST_ENV").as_deref() {
        Ok("sid") => "-std=c++23",
        _ => "-std=c++2b",
    };
    assert!(
        c.command().iter().any(|a| a == spelled),
        "{:?}",
        c.command()
    );
}

#[test]
fn library_compiled_carries_its_warnings_and_a_disk_hit_replays_them() {
    let dir = tempfile::tempdir().unwrap();
    let jit = |cache: &Path| {
        Jit::new(JitOptions {
            // hipcc, whatever HIPJIT_COMPILER says: these tests are about it.
            compiler: Some(hipjit::compiler::selection::CompilerChoice::Hipcc),
            cache: CacheLocation::Roots(vec![cache.to_path_buf()]),
            ..JitOptions::default()
        })
        .unwrap()
    };
    let cache = dir.path().join("cache");
    let o = CompileOptions {
        source_name: Some("unused.hip".into()),
        ..CompileOptions::for_target(TargetId::parse(TARGET).unwrap())
    }
    .flag("-Wunused-variable");
    let first = jit(&cache).compile(UNUSED, &o).unwrap();
    assert_eq!(first.origin(), Origin::Compiler);
    let w = &first.diagnostics()[0];
    assert_eq!(w.severity, hipjit::compiler::Severity::Warning);
    assert_eq!(w.file.as_deref(), Some("unused.hip"));
    assert_eq!((w.line, w.column), (Some(2), Some(9)));
    assert!(w.message.contains("unused_here"), "{}", w.message);
    // A fresh process's view: the disk entry, which recorded the warning.
    let again = jit(&cache).compile(UNUSED, &o).unwrap();
    assert_eq!(again.origin(), Origin::Disk);
    assert_eq!(again.diagnostics(), first.diagnostics());
}

#[test]
fn hiprtc_takes_the_standard_as_hipjit_spells_it_for_hiprtc() {
    use hipjit::compiler::hiprtc::{self, HipRtc};
    use hipjit::compiler::rtc::RtcInput;
    use hipjit::compiler::CompilerKind;
    let rtc = HipRtc::open(None).unwrap_or_else(|e| panic!("{e}"));
    // hipRTC's version (9.0 on both 5.2.3 and 6.4.3) does not name its clang: an identity
    // without a clang version, as the in-process backend has.
    let identity = crate::common::toolchain::bare_identity(CompilerKind::HipRtc, rtc.path());
    let target = TargetId::parse(TARGET).unwrap();
    for (std, low, high) in [
        (CxxStd::Cxx20, "202002L", "202003L"),
        (CxxStd::Cxx23, "202100L", "202303L"),
    ] {
        let options = vec![
            hiprtc::arch_option(&target),
            CompilerKind::HipRtc.std_flag(std, &identity),
            format!("-DLOW={low}"),
            format!("-DHIGH={high}"),
        ];
        rtc.compile(&RtcInput {
            source: STD_PROBE,
            name: "std.hip",
            headers: &[],
            include_dirs: &[],
            options: &options,
        })
        .unwrap_or_else(|e| panic!("{std:?} as {options:?}: {e}"));
    }
}

#[test]
fn extra_flags_with_shell_metacharacters_reach_clang_as_one_word() {
    // hipcc 5.2.3 (Perl) and 7.x run clang through a shell command line: a flag holding a
    // space, `$`, `;`, a backquote or a quote must reach clang as the word given, or the key
    // would describe a different compile. The test asks for hipcc: that shell is hipcc's (and
    // hipRTC's built-in header uses `V` as a template parameter, which `-DV=...` breaks).
    let dir = tempfile::tempdir().unwrap();
    let content = "s p$HOME;`id`'x";
    let src = write(
        dir.path(),
        "word.hip",
        format!(
            "static_assert(sizeof(V) == {}, V);\n\
             extern \"C\" __global__ void k(int* p) {{ p[0] = 1; }}\n",
            content.len() + 1
        )
        .as_bytes(),
    );
    let flag = format!("-DV=\"{content}\"");
    let o = hipjit(
        &dir.path().join("cache"),
        &[
            "compile",
            "--arch",
            TARGET,
            "--compiler",
            "hipcc",
            s(&src),
            "--cflag",
            &flag,
        ],
    );
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
}

/// A source hipcc rejects is remembered: a second `Jit` on the same root returns the same
/// error without running hipcc; a header edit runs it again; `--retry-failed` (and
/// `HIPJIT_RETRY_FAILED=1`) too.
#[test]
fn a_rejected_source_is_remembered_until_its_header_changes() {
    let dir = tempfile::tempdir().unwrap();
    let header = write(dir.path(), "inc/v.h", b"#pragma once\n// no V here\n");
    let src = b"#include \"v.h\"\nextern \"C\" __global__ void k(int* p) { p[0] = V; }\n";
    let inc = dir.path().join("inc");
    let cache = dir.path().join("cache");
    let jit = || {
        Jit::new(JitOptions {
            compiler: Some(hipjit::compiler::selection::CompilerChoice::Hipcc),
            cache: CacheLocation::Roots(vec![cache.clone()]),
            ..JitOptions::default()
        })
        .unwrap()
    };
    let o = CompileOptions::for_target(TargetId::parse(TARGET).unwrap()).include_dir(&inc);
    let first = jit()
        .compile(src, &o)
        .expect_err("V is undeclared")
        .to_string();
    assert!(
        first.contains("use of undeclared identifier 'V'"),
        "{first}"
    );
    let j = jit();
    assert_eq!(j.compile(src, &o).unwrap_err().to_string(), first);
    let st = j.stats();
    assert_eq!((st.failures_remembered, st.compiles), (1, 0));
    std::fs::write(&header, "#pragma once\n// still no V\n").unwrap();
    let j = jit();
    j.compile(src, &o).unwrap_err();
    assert_eq!(j.stats().failures_remembered, 0, "a header edit runs hipcc");
    let file = write(dir.path(), "k.hip", src);
    let args = ["compile", "--arch", TARGET, "-I", s(&inc), s(&file)];
    let o1 = hipjit(&cache, &args);
    assert_eq!(o1.status.code(), Some(1), "{}", stderr(&o1));
    let o2 = hipjit(&cache, &[&args[..], &["--retry-failed"]].concat());
    assert_eq!(o2.status.code(), Some(1), "{}", stderr(&o2));
    assert_eq!(
        stderr(&o1),
        stderr(&o2),
        "the same message, remembered or not"
    );
    std::fs::write(&header, "#pragma once\n#define V 1\n").unwrap();
    assert_eq!(hipjit(&cache, &args).status.code(), Some(0));
}

/// `hipjit cache verify --rebuild`: hipcc compiles a recorded request to the same bytes
/// again (reproducible, exit 0), and the verdict is kept for `doctor`.
#[test]
fn verify_rebuild_finds_hipcc_reproducible() {
    let dir = tempfile::tempdir().unwrap();
    let src = write(
        &dir.path().join("src"),
        "k.hip",
        b"#include <hip/hip_runtime.h>\nextern \"C\" __global__ void k(float* x) { x[threadIdx.x] *= 2.0f; }\n",
    );
    let cache = dir.path().join("cache");
    let record = dir.path().join("requests.jsonl");
    let run = |args: &[&str]| {
        Command::new(env!("CARGO_BIN_EXE_hipjit"))
            .args(args)
            .env("HIPJIT_CACHE_DIR", &cache)
            .env("HIPJIT_RECORD", &record)
            .env("HIPJIT_COMPILER", "hipcc")
            .env_remove("HIPJIT_HIPCC")
            .output()
            .unwrap()
    };
    let o = run(&["compile", "--arch", TARGET, s(&src)]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let o = run(&["cache", "verify", "--rebuild", s(&record), "--json"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let v = json(&o);
    assert_eq!(v["results"][0]["status"], "reproducible", "{v:#}");
    assert_eq!(v["compilers"][0]["kind"], "hipcc", "{v:#}");
    assert_eq!(v["compilers"][0]["reproducible"], true, "{v:#}");
    assert!(cache.join("reproducibility.json").is_file());
}
