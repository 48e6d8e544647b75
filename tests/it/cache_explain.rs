//! `Jit::explain` and `hipjit cache explain` with Debian's real hipcc 5.2.3: after one
//! compile, a request that changes exactly one thing (a define, the standard, the target, a
//! header's content, the compiler) misses, and the explanation names exactly that field of the
//! key record; the unchanged request hits on disk. The other compiler is a copy of a stand-in
//! installation with one file different (tests/common/installation.rs).

use crate::common;

use std::path::{Path, PathBuf};
use std::process::Command;

use common::installation::{installation, jit as stand_in_jit, jit_in, Compile};
use common::toolchain::pypi_nvcc;

use hipjit::compiler::selection::CompilerChoice;
use hipjit::compiler::{CompileOptions, CxxStd};
use hipjit::jit::explain::{Explanation, FileStatus, Hit};
use hipjit::jit::{CacheLocation, Jit, JitOptions, Origin, RecordLocation, RemoteLocation};
use hipjit::target_id::TargetId;

const SOURCE: &str = "#include <hip/hip_runtime.h>\n#include \"scale.h\"\n\
    extern \"C\" __global__ void scale(float* x) { x[threadIdx.x] = twice(x[threadIdx.x]) * N; }\n";
const HEADER: &str = "__device__ inline float twice(float v) { return 2.0f * v; }\n";

fn jit(root: &Path) -> Jit {
    Jit::new(JitOptions {
        // hipcc, whatever HIPJIT_COMPILER says: these tests are about it.
        compiler: Some(CompilerChoice::Hipcc),
        cache: CacheLocation::Roots(vec![root.to_path_buf()]),
        remote_cache: RemoteLocation::Disabled,
        record: RecordLocation::Disabled,
        ..JitOptions::default()
    })
    .unwrap_or_else(|e| panic!("{e} (Debian's hipcc is installed by scripts/setup.sh)"))
}

fn options(include: &Path, target: &str, n: &str) -> CompileOptions {
    let mut o = CompileOptions::for_target(TargetId::parse(target).unwrap());
    o.include_dirs = vec![include.to_path_buf()];
    o.defines = vec![("N".into(), Some(n.into()))];
    o
}

fn project(dir: &Path) -> PathBuf {
    let include = dir.join("include");
    std::fs::create_dir_all(&include).unwrap();
    std::fs::write(include.join("scale.h"), HEADER).unwrap();
    include
}

/// The kernel the stand-in compiler's tests compile (`N` defined by [`options`]).
const KERNEL: &str = "extern \"C\" __global__ void k(int* x) { x[0] = N; }\n";

/// A stand-in hipcc installation (tests/common/installation.rs) at `opt/rocm` in a fresh
/// directory, beside a cache root, the directory where its identity is remembered, and the
/// project's include directory ([`project`]).
struct StandIn {
    dir: tempfile::TempDir,
    root: PathBuf,
    identity: PathBuf,
    include: PathBuf,
    hipcc: PathBuf,
}

impl StandIn {
    fn new() -> StandIn {
        let dir = tempfile::tempdir().unwrap();
        let include = project(dir.path());
        let hipcc = installation(
            &dir.path().join("opt/rocm"),
            "0.0-explain",
            Compile::CopyCodeObject,
        );
        StandIn {
            root: dir.path().join("cache"),
            identity: dir.path().join("identity"),
            include,
            hipcc,
            dir,
        }
    }

    /// A `Jit` compiling with the stand-in through the cache root.
    fn jit(&self) -> Jit {
        stand_in_jit(&self.root, &self.hipcc, &self.identity)
    }
}

/// The names of the fields that differ from the nearest entry.
fn differing(e: &Explanation) -> Vec<String> {
    assert!(e.hit.is_none(), "a hit: {:?}", e.hit);
    let n = e
        .nearest
        .as_ref()
        .unwrap_or_else(|| panic!("no nearest entry: {e:#?}"));
    n.differing.iter().map(|d| d.field.clone()).collect()
}

#[test]
fn explain_names_exactly_the_define_std_target_or_header_that_changed() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("cache");
    let include = project(dir.path());
    let j = jit(&root);
    let compiled = j
        .compile(SOURCE, &options(&include, "gfx90a", "3"))
        .unwrap();
    assert_eq!(compiled.origin(), Origin::Compiler);

    // The same request: in this Jit's memory; for a new one, a disk hit with every manifest
    // file unchanged.
    let in_memory = j
        .explain(SOURCE, &options(&include, "gfx90a", "3"))
        .unwrap();
    assert_eq!(in_memory.hit, Some(Hit::Memory));
    let same = jit(&root)
        .explain(SOURCE, &options(&include, "gfx90a", "3"))
        .unwrap();
    assert_eq!(same.hit, compiled.entry_path().cloned().map(Hit::Disk));
    assert_eq!(same.result_key, Some(compiled.key()));
    assert_eq!(
        same.direct_key,
        j.source_key(SOURCE, &options(&include, "gfx90a", "3"))
            .unwrap()
    );
    let manifest = same.manifest.as_ref().unwrap();
    assert!(manifest
        .files
        .iter()
        .any(|f| f.name == "include/0/scale.h" && f.status == FileStatus::Unchanged));
    let names: Vec<&str> = same.fields.0.iter().map(|f| f.name.as_str()).collect();
    assert_eq!(
        names,
        [
            "format",
            "source",
            "source-name",
            "flags",
            "std",
            "extra-flags",
            "targets",
            "code-object-version",
            "compiler-kind",
            "compiler-version",
            "compiler-fingerprint",
            "env",
            "builtin-headers",
            "extra"
        ]
    );

    // A define.
    let define = j
        .explain(SOURCE, &options(&include, "gfx90a", "4"))
        .unwrap();
    assert_eq!(differing(&define), ["flags"]);
    let d = &define.nearest.as_ref().unwrap().differing[0];
    assert_eq!(
        (&d.now[..], &d.entry[..]),
        (&["-DN=4".to_string()][..], &["-DN=3".to_string()][..])
    );
    assert_eq!(
        define.nearest.as_ref().unwrap().entry,
        compiled.entry_path().cloned().unwrap()
    );

    // The standard.
    let mut o = options(&include, "gfx90a", "3");
    o.std = CxxStd::Cxx20;
    let std = j.explain(SOURCE, &o).unwrap();
    assert_eq!(differing(&std), ["std"]);

    // The target (its --offload-arch flag is not counted as a flags change).
    let target = j
        .explain(SOURCE, &options(&include, "gfx906", "3"))
        .unwrap();
    assert_eq!(differing(&target), ["targets"]);
    let t = &target.nearest.as_ref().unwrap().differing[0];
    assert_eq!(
        (t.now.clone(), t.entry.clone()),
        (vec!["gfx906".to_string()], vec!["gfx90a".to_string()])
    );

    // A header's content: the same direct key, one manifest file changed (seen by a new
    // Jit: the in-process cache does not re-check headers).
    std::fs::write(include.join("scale.h"), HEADER.replace("2.0f", "3.0f")).unwrap();
    let header = jit(&root)
        .explain(SOURCE, &options(&include, "gfx90a", "3"))
        .unwrap();
    assert_eq!(header.direct_key, same.direct_key);
    assert_eq!(differing(&header), ["file include/0/scale.h"]);
    assert!(header
        .manifest
        .as_ref()
        .unwrap()
        .files
        .iter()
        .any(|f| f.name == "include/0/scale.h" && f.status == FileStatus::Changed));

    // Explaining wrote nothing and compiled nothing: the restored header hits.
    std::fs::write(include.join("scale.h"), HEADER).unwrap();
    let again = jit(&root)
        .compile(SOURCE, &options(&include, "gfx90a", "3"))
        .unwrap();
    assert_eq!(again.origin(), Origin::Disk);
}

#[test]
fn explain_names_the_compiler_fingerprint_when_one_compiler_file_differs() {
    let s = StandIn::new();
    let (dir, include) = (&s.dir, &s.include);
    let first = s
        .jit()
        .compile(KERNEL, &options(include, "gfx90a", "1"))
        .unwrap();
    assert_eq!(first.origin(), Origin::Compiler);

    let status = Command::new("cp")
        .arg("-a")
        .arg(dir.path().join("opt/rocm"))
        .arg(dir.path().join("elsewhere"))
        .status()
        .unwrap();
    assert!(status.success());
    let copy = dir.path().join("elsewhere/bin/hipcc");
    // The copy is the same compiler: a hit.
    let same = stand_in_jit(&s.root, &copy, &s.identity)
        .explain(KERNEL, &options(include, "gfx90a", "1"))
        .unwrap();
    assert!(matches!(same.hit, Some(Hit::Disk(_))), "{same:#?}");
    // One device library different: another compiler.
    std::fs::write(dir.path().join("elsewhere/bitcode/ocml.bc"), "ocml 2\n").unwrap();
    let other = stand_in_jit(&s.root, &copy, &s.identity)
        .explain(KERNEL, &options(include, "gfx90a", "1"))
        .unwrap();
    assert_eq!(differing(&other), ["compiler-fingerprint"]);
}

#[test]
fn an_entry_written_before_key_records_still_hits_and_is_left_out_of_the_comparison() {
    let s = StandIn::new();
    let (include, source) = (&s.include, KERNEL);
    let j = s.jit();
    let first = j.compile(source, &options(include, "gfx90a", "1")).unwrap();
    // Rewrite its entry as an older hipjit wrote it: no key-record artefact.
    let disk = j.disk_cache().unwrap();
    let entry = disk.get(&first.key()).entry.unwrap();
    let kept: Vec<(String, Vec<u8>)> = entry
        .meta
        .artefacts
        .iter()
        .filter(|a| a.name != hipjit::cache::key::KEY_RECORD_ARTEFACT)
        .map(|a| (a.name.clone(), entry.artefact(&a.name).unwrap().to_vec()))
        .collect();
    assert!(
        kept.len() < entry.meta.artefacts.len(),
        "no key record stored"
    );
    std::fs::remove_file(&entry.path).unwrap();
    let artefacts: Vec<(&str, &[u8])> = kept
        .iter()
        .map(|(n, b)| (n.as_str(), b.as_slice()))
        .collect();
    disk.put(&first.key(), entry.meta.clone(), &artefacts)
        .unwrap();

    let fresh = s.jit();
    let hit = fresh
        .compile(source, &options(include, "gfx90a", "1"))
        .unwrap();
    assert_eq!(hit.origin(), Origin::Disk);
    let other = fresh
        .explain(source, &options(include, "gfx90a", "2"))
        .unwrap();
    assert_eq!(other.hit, None);
    assert_eq!(other.nearest, None, "{other:#?}");
}

#[test]
fn the_command_prints_the_record_and_the_differing_field_as_json() {
    let dir = tempfile::tempdir().unwrap();
    let include = project(dir.path());
    let file = dir.path().join("scale.hip");
    std::fs::write(&file, SOURCE).unwrap();
    let root = dir.path().join("cache");
    let run = |sub: &[&str], n: &str| {
        let out = Command::new(env!("CARGO_BIN_EXE_hipjit"))
            .args(sub)
            .args(["--compiler", "hipcc", "--arch", "gfx90a", "-I"])
            .arg(&include)
            .arg(format!("-DN={n}"))
            .arg(&file)
            .env("HIPJIT_CACHE_DIR", &root)
            .env_remove("HIPJIT_REMOTE_CACHE")
            .env_remove("HIPJIT_RECORD")
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        out.stdout
    };
    run(&["compile"], "3");
    let hit: serde_json::Value =
        serde_json::from_slice(&run(&["cache", "explain", "--json"], "3")).unwrap();
    assert_eq!(hit["hit"], true, "{hit:#}");
    assert_eq!(hit["tier"], "disk");
    let flags = hit["fields"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["name"] == "flags")
        .unwrap();
    assert!(flags["value"]
        .as_array()
        .unwrap()
        .contains(&serde_json::json!("-DN=3")));
    let miss: serde_json::Value =
        serde_json::from_slice(&run(&["cache", "explain", "--json"], "5")).unwrap();
    assert_eq!(miss["hit"], false, "{miss:#}");
    assert_eq!(miss["tier"], serde_json::Value::Null);
    assert_eq!(
        miss["nearest"]["differing"],
        serde_json::json!([{"field": "flags", "now": ["-DN=5"], "entry": ["-DN=3"]}])
    );
    let text = String::from_utf8(run(&["cache", "explain"], "5")).unwrap();
    assert!(text.contains("miss in every tier"), "{text}");
    assert!(text.contains("now:   -DN=5"), "{text}");
}

/// `hipjit SUB... ARGS...` with the cache at `root` and `home` as the home directory; returns
/// (exit status, stdout, stderr).
fn hipjit(
    sub: &[&str],
    args: &[&std::ffi::OsStr],
    root: &Path,
    home: &Path,
) -> (i32, String, String) {
    hipjit_with(sub, args, root, home, &[])
}

/// [`hipjit`] with `env` added.
fn hipjit_with(
    sub: &[&str],
    args: &[&std::ffi::OsStr],
    root: &Path,
    home: &Path,
    env: &[(&str, &std::ffi::OsStr)],
) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_hipjit"))
        .args(sub)
        .envs(env.iter().copied())
        .args(args)
        .env("HIPJIT_CACHE_DIR", root)
        .env("HOME", home)
        .env_remove("XDG_CACHE_HOME")
        .env_remove("HIPJIT_REMOTE_CACHE")
        .env_remove("HIPJIT_RECORD")
        .env_remove("HIPJIT_COMPILER")
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn explaining_creates_no_root_and_writes_no_tag() {
    let dir = tempfile::tempdir().unwrap();
    let include = project(dir.path());
    let file = dir.path().join("scale.hip");
    std::fs::write(&file, SOURCE).unwrap();
    let home = dir.path().join("home");
    std::fs::create_dir(&home).unwrap();
    let args = [
        "--compiler".as_ref(),
        "hipcc".as_ref(),
        "--arch".as_ref(),
        "gfx90a".as_ref(),
        "-DN=1".as_ref(),
        "-I".as_ref(),
        include.as_os_str(),
        file.as_os_str(),
    ];
    // A root that does not exist: reported, a miss (exit status 0), and not created.
    let missing = dir.path().join("no/such/root");
    let (status, out, err) = hipjit(&["cache", "explain", "--json"], &args, &missing, &home);
    assert_eq!(status, 0, "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["hit"], false);
    assert_eq!(
        v["cache_roots"],
        serde_json::json!([{"path": missing.to_str().unwrap(), "exists": false}])
    );
    assert!(!dir.path().join("no").exists(), "explain created the root");
    let (status, text, err) = hipjit(&["cache", "explain"], &args, &missing, &home);
    assert_eq!(status, 0, "{err}");
    assert!(
        text.contains(&format!(
            "cache root {} (does not exist: nothing is cached there)",
            missing.display()
        )),
        "{text}"
    );
    assert!(!dir.path().join("no").exists(), "explain created the root");
    // Nor did finding and identifying hipcc remember anything in the home directory (the
    // default cache root is ~/.cache/hipjit, the identities' directory below it).
    assert_eq!(
        std::fs::read_dir(&home).unwrap().count(),
        0,
        "explain wrote into the home directory"
    );

    // A root that exists without the cache directory tag (written by an older hipjit, or
    // by hand): left as it is.
    let bare = dir.path().join("bare");
    std::fs::create_dir(&bare).unwrap();
    let (status, _, err) = hipjit(&["cache", "explain"], &args, &bare, &home);
    assert_eq!(status, 0, "{err}");
    assert_eq!(
        std::fs::read_dir(&bare).unwrap().count(),
        0,
        "explain wrote into the root"
    );
}

#[test]
fn a_read_only_cache_serves_hits_and_writes_nothing() {
    let s = StandIn::new();
    let (root, include, source) = (&s.root, &s.include, KERNEL);
    let first = s
        .jit()
        .compile(source, &options(include, "gfx90a", "1"))
        .unwrap();
    let listing = |d: &Path| {
        let mut v = walk(d);
        v.sort();
        v
    };
    let before = listing(root);
    let read_only = jit_in(
        CacheLocation::ReadOnly(Some(vec![root.clone()])),
        &s.hipcc,
        &s.identity,
    );
    let hit = read_only
        .compile(source, &options(include, "gfx90a", "1"))
        .unwrap();
    assert_eq!(hit.origin(), Origin::Disk);
    assert_eq!(hit.key(), first.key());
    // A miss is compiled and kept in memory only, without a warning.
    let miss = read_only
        .compile(source, &options(include, "gfx90a", "2"))
        .unwrap();
    assert_eq!(miss.origin(), Origin::Compiler);
    assert_eq!(miss.entry_path(), None);
    assert!(
        miss.cache_warnings().is_empty(),
        "{:?}",
        miss.cache_warnings()
    );
    assert_eq!(listing(root), before, "the read-only cache was written");
    let disk = read_only.disk_cache().unwrap();
    assert!(!disk.is_writable());
    let err = disk.clear().unwrap_err();
    assert!(err.to_string().contains("read-only"), "{err}");
    assert_eq!(listing(root), before);
}

/// Every file and directory below `d`, with its modification time.
fn walk(d: &Path) -> Vec<(PathBuf, std::time::SystemTime)> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(d).unwrap().flatten() {
        let p = e.path();
        if p.is_dir() {
            out.extend(walk(&p));
        }
        let modified = std::fs::symlink_metadata(&p).unwrap().modified().unwrap();
        out.push((p, modified));
    }
    out
}

/// A request `hipjit compile` refuses before compiling is refused by `hipjit cache explain`
/// with the same message and exit status: a flag the compiler that would run refuses (named
/// after it), several targets for hipRTC, an include directory that is not one, an
/// `#include` of a FIFO.
#[test]
fn explain_refuses_what_compile_refuses_with_the_same_message_and_status() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("scale.hip");
    std::fs::write(&file, SOURCE).unwrap();
    let fifo_dir = dir.path().join("fifo");
    std::fs::create_dir(&fifo_dir).unwrap();
    let fifo = fifo_dir.join("scale.h");
    let made = Command::new("mkfifo").arg(&fifo).status().unwrap();
    assert!(made.success());
    let home = dir.path().join("home");
    std::fs::create_dir(&home).unwrap();
    let root = dir.path().join("cache");
    let missing = dir.path().join("missing");
    let cases: Vec<Vec<&std::ffi::OsStr>> = vec![
        vec![
            "--compiler".as_ref(),
            "hiprtc".as_ref(),
            "--cflag=-save-temps".as_ref(),
        ],
        vec![
            "--compiler".as_ref(),
            "hipcc".as_ref(),
            "--cflag=-o".as_ref(),
            "--cflag=x".as_ref(),
        ],
        vec![
            "--compiler".as_ref(),
            "hiprtc".as_ref(),
            "--arch".as_ref(),
            "gfx906".as_ref(),
        ],
        vec![
            "--compiler".as_ref(),
            "hipcc".as_ref(),
            "-I".as_ref(),
            missing.as_os_str(),
        ],
        vec![
            "--compiler".as_ref(),
            "hiprtc".as_ref(),
            "-I".as_ref(),
            missing.as_os_str(),
        ],
        vec![
            "--compiler".as_ref(),
            "hipcc".as_ref(),
            "-I".as_ref(),
            fifo_dir.as_os_str(),
        ],
        vec![
            "--compiler".as_ref(),
            "hiprtc".as_ref(),
            "-I".as_ref(),
            fifo_dir.as_os_str(),
        ],
    ];
    for case in cases {
        let mut args: Vec<&std::ffi::OsStr> =
            vec!["--arch".as_ref(), "gfx90a".as_ref(), "-DN=1".as_ref()];
        args.extend(case.iter().copied());
        args.push(file.as_os_str());
        let (status, _, err) = hipjit(&["compile"], &args, &root, &home);
        assert_ne!(status, 0, "compile accepted {case:?}: {err}");
        let (e_status, e_out, e_err) = hipjit(&["cache", "explain"], &args, &root, &home);
        assert_eq!(
            (e_status, e_err.as_str()),
            (status, err.as_str()),
            "{case:?}: explain printed {e_out}"
        );
    }
    let entries: Vec<_> = walk(&root)
        .into_iter()
        .filter(|(p, _)| p.extension().is_some_and(|e| e == "hjc"))
        .collect();
    assert!(entries.is_empty(), "something was compiled: {entries:?}");
}

/// A header put beside the source under a name the compile looked up (a `__has_include`
/// that now finds it) is named, in the library's explanation and in the command's text; so is
/// one removed. Files of names nothing looked up, added beside them, are not.
#[test]
fn explain_names_a_looked_up_header_added_beside_the_source_or_removed() {
    let s = StandIn::new();
    let include = &s.include;
    let source = format!(
        "#if __has_include(\"added.h\") || __has_include(\"old.h\")\n#endif\n\
         #include \"scale.h\"\n{KERNEL}"
    );
    std::fs::write(include.join("old.h"), "// unused\n").unwrap();
    let first = s
        .jit()
        .compile(&source, &options(include, "gfx90a", "1"))
        .unwrap();
    assert_eq!(first.origin(), Origin::Compiler);

    std::fs::write(include.join("added.h"), "// new\n").unwrap();
    std::fs::write(include.join("unrelated.h"), "// new\n").unwrap();
    std::fs::create_dir(include.join("sub")).unwrap();
    std::fs::remove_file(include.join("old.h")).unwrap();
    let e = s
        .jit()
        .explain(&source, &options(include, "gfx90a", "1"))
        .unwrap();
    assert_eq!(differing(&e), ["dir include/0"]);
    let d = &e.nearest.as_ref().unwrap().differing[0];
    assert_eq!(d.now, ["added.h"]);
    assert_eq!(d.entry, ["old.h"]);
    let check = e
        .manifest
        .as_ref()
        .unwrap()
        .dirs
        .iter()
        .find(|d| d.name == "include/0")
        .unwrap();
    assert_eq!(check.added.as_deref(), Some(&["added.h".to_string()][..]));
    assert_eq!(check.removed.as_deref(), Some(&["old.h".to_string()][..]));
}

/// The command names a header added beside the source file (the source's own directory is
/// searched last, as `hipjit compile` searches it).
#[test]
fn the_command_names_a_header_added_beside_the_source_file() {
    let dir = tempfile::tempdir().unwrap();
    let src_dir = dir.path().join("src");
    std::fs::create_dir(&src_dir).unwrap();
    std::fs::write(src_dir.join("scale.h"), HEADER).unwrap();
    let file = src_dir.join("scale.hip");
    std::fs::write(
        &file,
        format!("#if __has_include(\"extra.h\")\n#endif\n{SOURCE}"),
    )
    .unwrap();
    let home = dir.path().join("home");
    std::fs::create_dir(&home).unwrap();
    let root = dir.path().join("cache");
    let args = [
        "--compiler".as_ref(),
        "hipcc".as_ref(),
        "--arch".as_ref(),
        "gfx90a".as_ref(),
        "-DN=1".as_ref(),
        file.as_os_str(),
    ];
    let (status, _, err) = hipjit(&["compile"], &args, &root, &home);
    assert_eq!(status, 0, "{err}");
    // A file of a name nothing looks up changes nothing; one the source tests for does.
    std::fs::write(src_dir.join("unrelated.h"), "// new\n").unwrap();
    let (status, text, err) = hipjit(&["cache", "explain"], &args, &root, &home);
    assert_eq!(status, 0, "{err}");
    assert!(text.contains("hit"), "{text}");
    std::fs::write(src_dir.join("extra.h"), "// new\n").unwrap();
    let (status, text, err) = hipjit(&["cache", "explain"], &args, &root, &home);
    assert_eq!(status, 0, "{err}");
    assert!(text.contains("miss in every tier"), "{text}");
    assert!(
        text.contains(&format!(
            "changed   directory include/0  ({}): added extra.h",
            src_dir.display()
        )),
        "{text}"
    );
    assert!(
        text.contains("  dir include/0\n    now:   extra.h\n    entry: (none)"),
        "{text}"
    );
}

/// NVRTC's own refusals (PyPI's NVRTC 13, found beside PyPI's nvcc): an `#include` that can
/// name a file outside the include directories, in the source or in a header under them, is
/// refused by `hipjit cache explain` as by `hipjit compile`, with the same message and exit
/// status; so is NVRTC with an optimisation level.
#[test]
fn explain_refuses_what_nvrtc_refuses_with_the_same_message_and_status() {
    let dir = tempfile::tempdir().unwrap();
    let include = dir.path().join("include");
    std::fs::create_dir(&include).unwrap();
    std::fs::write(include.join("ok.h"), "#define N 1\n").unwrap();
    std::fs::write(include.join("escapes.h"), "#include \"../outside.h\"\n").unwrap();
    let home = dir.path().join("home");
    std::fs::create_dir(&home).unwrap();
    let root = dir.path().join("cache");
    let nvcc = pypi_nvcc();
    let kernel = "extern \"C\" __global__ void k(int* x) { x[0] = N; }\n";
    let cases: Vec<(&str, String, Vec<&str>)> = vec![
        (
            "absolute",
            format!("#include \"/etc/hostname\"\n{kernel}"),
            vec![],
        ),
        (
            "computed",
            format!("#define H <ok.h>\n#include H\n{kernel}"),
            vec![],
        ),
        (
            "in a header",
            format!("#include \"escapes.h\"\n{kernel}"),
            vec![],
        ),
        (
            "opt level",
            format!("#include \"ok.h\"\n{kernel}"),
            vec!["-O", "2"],
        ),
    ];
    for (what, source, extra) in cases {
        let file = dir.path().join(format!("{}.cu", what.replace(' ', "-")));
        std::fs::write(&file, source).unwrap();
        let mut args: Vec<&std::ffi::OsStr> = vec![
            "--compiler".as_ref(),
            "nvrtc".as_ref(),
            "--arch".as_ref(),
            "sm_90".as_ref(),
            "-I".as_ref(),
            include.as_os_str(),
        ];
        args.extend(extra.iter().map(std::ffi::OsStr::new));
        args.push(file.as_os_str());
        let env = [("HIPJIT_NVCC", nvcc.as_os_str())];
        let (status, _, err) = hipjit_with(&["compile"], &args, &root, &home, &env);
        assert_eq!(status, 1, "compile accepted the {what} case: {err}");
        let (e_status, e_out, e_err) =
            hipjit_with(&["cache", "explain"], &args, &root, &home, &env);
        assert_eq!(
            (e_status, e_err.as_str()),
            (status, err.as_str()),
            "{what}: explain printed {e_out}"
        );
    }
}
