//! The cache keys change when any one of their inputs changes, and only then.

use std::ffi::OsString;
use std::path::PathBuf;

use hipjit::cache::key::{compute, result_key, CacheKey, KeyInputs, TrackedHeader};
use hipjit::cache::manifest::{self, Manifest};
use hipjit::compiler::{CompileOptions, CompilerIdentity, CompilerKind, Dependency};
use hipjit::target_id::TargetId;

fn identity(path: &str, version: &str) -> CompilerIdentity {
    CompilerIdentity {
        kind: CompilerKind::Hipcc,
        path: path.into(),
        version: version.into(),
        fingerprint: "f0".repeat(32),
        covered: vec![],
        root: Default::default(),
        header_dirs: Vec::new(),
        host_compiler: None,
        system_include_dirs: Vec::new(),
    }
}

struct Base {
    source: Vec<u8>,
    options: CompileOptions,
    compiler: CompilerIdentity,
    env: Vec<(String, OsString)>,
    extra: Vec<u8>,
}

impl Base {
    fn new() -> Base {
        Base {
            source: b"extern \"C\" __global__ void k() {}\n".to_vec(),
            options: CompileOptions::for_target(TargetId::parse("gfx90a").unwrap()),
            compiler: identity(
                "/usr/bin/hipcc",
                "HIP version: 5.2.21153-0\nDebian clang version 15.0.6\n",
            ),
            env: vec![("HIP_PATH".into(), "/usr".into())],
            extra: b"generator v1".to_vec(),
        }
    }

    fn key(&self) -> CacheKey {
        compute(&KeyInputs {
            source: &self.source,
            options: &self.options,
            compiler: &self.compiler,
            env: &self.env,
            extra: &self.extra,
        })
    }
}

fn changed(f: impl FnOnce(&mut Base)) -> bool {
    let base = Base::new();
    let mut other = Base::new();
    f(&mut other);
    base.key() != other.key()
}

#[test]
fn same_inputs_give_the_same_key() {
    assert_eq!(Base::new().key(), Base::new().key());
}

#[test]
fn source_changes_the_key() {
    assert!(changed(|b| b.source.push(b' ')));
}

#[test]
fn source_is_keyed_by_its_bytes_whatever_the_encoding() {
    // The same text in Latin-1 (0xa9) and in UTF-8 (0xc2 0xa9) are two sources.
    let latin1 = |b: &mut Base| b.source.extend_from_slice(b"// \xa9\n");
    assert!(changed(latin1));
    let mut a = Base::new();
    latin1(&mut a);
    let mut u = Base::new();
    u.source.extend_from_slice("// \u{a9}\n".as_bytes());
    assert_ne!(a.key(), u.key());
}

#[test]
fn effective_flags_change_the_key() {
    assert!(changed(|b| b.options = b.options.clone().define("N", "4")));
    assert!(changed(|b| b.options.fast_math = true));
    assert!(changed(
        |b| b.options.opt_level = hipjit::compiler::OptLevel::O2
    ));
    assert!(changed(|b| b.options.std = hipjit::compiler::CxxStd::Cxx20));
    assert!(changed(|b| b
        .options
        .extra_flags
        .push("-ffp-contract=off".into())));
}

#[test]
fn target_id_changes_the_key() {
    assert!(changed(
        |b| b.options.targets = vec![TargetId::parse("gfx90a:xnack-").unwrap()]
    ));
}

#[test]
fn code_object_version_changes_the_key() {
    assert!(changed(|b| b.options.code_object_version = Some(5)));
}

#[test]
fn compiler_kind_version_and_fingerprint_change_the_key_but_its_location_does_not() {
    assert!(changed(|b| b.compiler.kind = CompilerKind::Nvcc));
    assert!(changed(|b| b.compiler.version.push_str("Target: x86_64\n")));
    assert!(changed(|b| b.compiler.fingerprint = "f1".repeat(32)));
    assert!(!changed(|b| b.compiler.path = "/opt/rocm/bin/hipcc".into()));
    assert!(!changed(|b| b
        .compiler
        .version
        .push_str("InstalledDir: /opt/rocm/llvm/bin\n")));
}

#[test]
fn include_directories_enter_the_direct_key_by_position_not_by_path() {
    // The path is not in the key (the files read from it are, through the manifest), so a
    // moved tree still hits and no path goes through lossy text.
    let with = |d: &str| {
        let mut b = Base::new();
        b.options.include_dirs = vec![PathBuf::from(d)];
        b.key()
    };
    assert_eq!(with("/a/include"), with("/moved/include"));
    assert_ne!(with("/a/include"), Base::new().key());
}

#[test]
fn allowlisted_environment_changes_the_key_but_path_and_home_do_not() {
    assert!(changed(|b| b.env[0].1 = "/opt/rocm".into()));
    assert!(changed(|b| b
        .env
        .push(("HIPCC_COMPILE_FLAGS_APPEND".into(), "-O1".into()))));
    assert!(!changed(|b| b
        .env
        .push(("HOME".into(), "/home/other".into()))));
    assert!(!changed(|b| b
        .env
        .push(("PATH".into(), "/other/bin".into()))));
}

#[test]
fn extra_signature_changes_the_key() {
    assert!(changed(|b| b.extra = b"generator v2".to_vec()));
}

#[test]
fn metadata_checks_do_not_change_the_key() {
    assert!(!changed(|b| b.options.checks.no_spills = true));
}

/// Waits past the filesystem's timestamp granularity, so that the next write gets a new
/// modification time (as the too-new rule guarantees for recorded files).
fn settle() {
    std::thread::sleep(std::time::Duration::from_millis(30));
}

fn dep_in(dir: usize, dirs: &[PathBuf], name: &str) -> Dependency {
    Dependency {
        include_dir: Some(dir),
        name: PathBuf::from(name),
        path: dirs[dir].join(name),
    }
}

fn recorded(deps: &[Dependency], dirs: &[PathBuf]) -> Manifest {
    let started = std::time::SystemTime::now() + std::time::Duration::from_secs(5);
    let r = manifest::record(
        b"",
        deps,
        dirs,
        &[],
        &identity("/usr/bin/hipcc", "v"),
        started,
        None,
    );
    assert_eq!(r.unpublishable, None);
    r.manifest
}

/// Two include directories whose names differ only in bytes that are not UTF-8 (the same
/// text through `Path::display`), holding different headers, give different result keys.
#[test]
fn non_utf8_include_directories_with_the_same_lossy_name_give_different_keys() {
    use std::os::unix::ffi::OsStrExt;
    let tmp = tempfile::tempdir().unwrap();
    let a = tmp.path().join(std::ffi::OsStr::from_bytes(b"inc\xff"));
    let b = tmp.path().join(std::ffi::OsStr::from_bytes(b"inc\xfe"));
    assert_eq!(a.display().to_string(), b.display().to_string());
    for (d, v) in [(&a, "1"), (&b, "2")] {
        std::fs::create_dir_all(d).unwrap();
        std::fs::write(d.join("x.h"), format!("#define V {v}\n")).unwrap();
    }
    let direct = Base::new().key();
    let ka = {
        let dirs = vec![a.clone()];
        result_key(&direct, &recorded(&[dep_in(0, &dirs, "x.h")], &dirs))
    };
    let kb = {
        let dirs = vec![b.clone()];
        result_key(&direct, &recorded(&[dep_in(0, &dirs, "x.h")], &dirs))
    };
    assert_ne!(ka, kb);
    // An absolute dependency's name is its raw bytes too.
    let abs = |p: &PathBuf| Dependency {
        include_dir: None,
        name: p.join("x.h"),
        path: p.join("x.h"),
    };
    std::fs::write(b.join("x.h"), "#define V 1\n").unwrap();
    let ka = result_key(&direct, &recorded(&[abs(&a)], &[]));
    let kb = result_key(&direct, &recorded(&[abs(&b)], &[]));
    assert_ne!(ka, kb);
}

#[test]
fn a_manifest_checked_now_gives_the_recorded_key_until_a_file_or_listing_changes() {
    let tmp = tempfile::tempdir().unwrap();
    let dirs = vec![tmp.path().join("a"), tmp.path().join("b")];
    std::fs::create_dir_all(dirs[0].join("sub")).unwrap();
    std::fs::create_dir_all(dirs[1].join("sub")).unwrap();
    std::fs::write(dirs[1].join("sub/x.h"), "#define V 1\n").unwrap();
    settle();
    let m = recorded(&[dep_in(1, &dirs, "sub/x.h")], &dirs);
    let direct = Base::new().key();
    let k = result_key(&direct, &m);
    assert_eq!(
        result_key(
            &direct,
            &m.current(&dirs, std::path::Path::new("")).unwrap()
        ),
        k
    );
    // Same size, new content: the stat changed (mtime/ctime), so it is hashed again.
    settle();
    std::fs::write(dirs[1].join("sub/x.h"), "#define V 2\n").unwrap();
    assert_ne!(
        result_key(
            &direct,
            &m.current(&dirs, std::path::Path::new("")).unwrap()
        ),
        k
    );
    settle();
    std::fs::write(dirs[1].join("sub/x.h"), "#define V 1\n").unwrap();
    assert_eq!(
        result_key(
            &direct,
            &m.current(&dirs, std::path::Path::new("")).unwrap()
        ),
        k
    );
    // A header that would shadow it, in a directory searched first.
    settle();
    std::fs::write(dirs[0].join("sub/x.h"), "#define V 3\n").unwrap();
    assert_ne!(
        result_key(
            &direct,
            &m.current(&dirs, std::path::Path::new("")).unwrap()
        ),
        k
    );
    settle();
    std::fs::remove_file(dirs[0].join("sub/x.h")).unwrap();
    assert_eq!(
        result_key(
            &direct,
            &m.current(&dirs, std::path::Path::new("")).unwrap()
        ),
        k
    );
    // A removed header: the manifest cannot match.
    std::fs::remove_file(dirs[1].join("sub/x.h")).unwrap();
    assert!(m.current(&dirs, std::path::Path::new("")).is_none());
}

#[test]
fn a_file_modified_at_or_after_the_compile_start_is_not_published() {
    let tmp = tempfile::tempdir().unwrap();
    let dirs = vec![tmp.path().to_path_buf()];
    let started = manifest::filesystem_now(tmp.path());
    std::fs::write(dirs[0].join("x.h"), "#define V 1\n").unwrap();
    let r = manifest::record(
        b"",
        &[dep_in(0, &dirs, "x.h")],
        &dirs,
        &[],
        &identity("/usr/bin/hipcc", "v"),
        started,
        None,
    );
    let why = r.unpublishable.expect("too new");
    assert!(why.contains("x.h"), "{why}");
}

/// The direct-key record as the module documentation lays it out, hashed independently
/// (Python's hashlib over the same length-prefixed fields).
#[test]
fn record_given_field_by_field_hashes_as_documented() {
    use hipjit::cache::key::{compute_record, KeyRecord};
    use std::ffi::OsStr;
    let headers = [TrackedHeader {
        include: "hip/hip_runtime.h".into(),
        path: PathBuf::from("/not/hashed"),
        sha256: "ab".repeat(32),
    }];
    let mut compiler = identity(
        "/opt/cuda/bin/nvcc",
        "release 13.0, V13.0.88\nInstalledDir: /not/hashed\n",
    );
    compiler.kind = CompilerKind::Nvcc;
    compiler.host_compiler = Some(hipjit::compiler::host_compiler::HostCompiler {
        path: PathBuf::from("/not/hashed/g++-14"),
        version: "not hashed".into(),
        fingerprint: "c1".repeat(32),
        script: false,
        macros: "not hashed".into(),
    });
    let key = compute_record(&KeyRecord {
        source: b"k\xa9",
        source_name: "k1.cu",
        flags: &["-cubin".into(), "-arch=sm_90".into()],
        std: "-std=c++20",
        extra_flags: &["-lineinfo".into(), "-DX=1".into()],
        targets: &["sm_90".into()],
        code_object_version: 0,
        compiler: &compiler,
        env: &[
            ("NVCC_APPEND_FLAGS", Some(OsStr::new("-G"))),
            ("NVCC_CCBIN", None),
        ],
        builtin_headers: &headers,
        // No in-memory headers: no `headers` field, the key as before they existed.
        headers: &[],
        extra: b"x",
    });
    assert_eq!(
        key.to_hex(),
        "d2610b340840d5ca690a3b55d1104b618ab18dea1d4b8637f35cee13643337e9"
    );
}

#[test]
fn path_variables_are_keyed_by_their_place_below_the_installation_root() {
    // Two nodes, the same installation under two prefixes, HIP_PATH and HIP_CLANG_PATH
    // naming it: one key.
    let node = |prefix: &str| {
        let mut b = Base::new();
        b.compiler.root = PathBuf::from(prefix);
        b.env = vec![
            ("HIP_PATH".into(), prefix.into()),
            ("HIP_CLANG_PATH".into(), format!("{prefix}/llvm/bin").into()),
        ];
        b
    };
    assert_eq!(node("/opt/rocm-a").key(), node("/shared/rocm").key());
    // Another place inside the installation: another key.
    let mut other = node("/opt/rocm-a");
    other.env[1].1 = "/opt/rocm-a/bin".into();
    assert_ne!(other.key(), node("/opt/rocm-a").key());
    // A value outside the installation is keyed by its text.
    let outside = |clang: &str| {
        let mut b = node("/opt/rocm-a");
        b.env[1].1 = clang.into();
        b.key()
    };
    assert_ne!(
        outside("/usr/lib/llvm-15/bin"),
        outside("/usr/lib/llvm-16/bin")
    );
    // A variable that is not a path is keyed by its text wherever it points.
    let flags = |v: &str| {
        let mut b = node("/opt/rocm-a");
        b.env.push(("HIPCC_COMPILE_FLAGS_APPEND".into(), v.into()));
        b.key()
    };
    assert_ne!(flags("-I/opt/rocm-a/x"), flags("-I/opt/rocm-a/y"));
}
