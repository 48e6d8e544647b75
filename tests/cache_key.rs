//! The cache key changes when any one of its inputs changes, and only then.

use std::ffi::OsString;
use std::path::PathBuf;

use hipjit::cache::key::{compute, track_includes, CacheKey, KeyInputs, TrackedHeader};
use hipjit::compiler::{CompileOptions, CompilerIdentity};
use hipjit::target_id::TargetId;

struct Base {
    source: Vec<u8>,
    headers: Vec<TrackedHeader>,
    options: CompileOptions,
    compiler: CompilerIdentity,
    env: Vec<(String, OsString)>,
    extra: Vec<u8>,
}

impl Base {
    fn new() -> Base {
        Base {
            source: b"extern \"C\" __global__ void k() {}\n".to_vec(),
            headers: vec![TrackedHeader {
                include: "a.h".into(),
                path: PathBuf::from("/inc/a.h"),
                sha256: "00".repeat(32),
            }],
            options: CompileOptions::for_target(TargetId::parse("gfx90a").unwrap()),
            compiler: CompilerIdentity {
                path: "/usr/bin/hipcc".into(),
                version: "HIP version: 5.2.21153-0\nDebian clang version 15.0.6\n".into(),
            },
            env: vec![("HIP_PATH".into(), "/usr".into())],
            extra: b"generator v1".to_vec(),
        }
    }

    fn key(&self) -> CacheKey {
        compute(&KeyInputs {
            source: &self.source,
            headers: &self.headers,
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
fn tracked_header_content_changes_the_key() {
    assert!(changed(|b| b.headers[0].sha256 = "11".repeat(32)));
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
fn compiler_path_and_version_change_the_key() {
    assert!(changed(|b| b.compiler.path = "/opt/rocm/bin/hipcc".into()));
    assert!(changed(|b| b.compiler.version.push_str("Target: x86_64\n")));
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

#[test]
fn editing_a_nested_header_changes_its_tracked_hash() {
    let dir = tempfile::tempdir().unwrap();
    let inc = dir.path().to_path_buf();
    std::fs::create_dir_all(inc.join("lib")).unwrap();
    std::fs::write(inc.join("lib/top.h"), "#include \"inner.h\"\n").unwrap();
    std::fs::write(inc.join("lib/inner.h"), "#define N 1\n").unwrap();
    let src = "#include <lib/top.h>\n";
    let before = track_includes(src.as_bytes(), std::slice::from_ref(&inc), &[]);
    std::fs::write(inc.join("lib/inner.h"), "#define N 2\n").unwrap();
    let after = track_includes(src.as_bytes(), std::slice::from_ref(&inc), &[]);
    assert_eq!(before.len(), 2, "{before:?}");
    assert_eq!(before[0].sha256, after[0].sha256, "top.h did not change");
    assert_ne!(before[1].sha256, after[1].sha256, "inner.h changed");
}

/// The record as the module documentation lays it out, hashed independently (Python's
/// hashlib over the same length-prefixed fields): a key record given field by field, as the
/// NVIDIA JIT uses it, hashes to exactly that.
#[test]
fn record_given_field_by_field_hashes_as_documented() {
    use hipjit::cache::key::{compute_record, KeyRecord};
    use std::ffi::OsStr;
    let headers = [TrackedHeader {
        include: "hip/hip_runtime.h".into(),
        path: PathBuf::from("/not/hashed"),
        sha256: "ab".repeat(32),
    }];
    let compiler = CompilerIdentity {
        path: "/opt/cuda/bin/nvcc".into(),
        version: "release 13.0, V13.0.88\n".into(),
    };
    let key = compute_record(&KeyRecord {
        source: b"k\xa9",
        headers: &headers,
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
        extra: b"x",
    });
    assert_eq!(
        key.to_hex(),
        "bbfe24ab3a8a51e560db2f18c1beffb0455c3b60b6c5b68d1932e2e5a63b5c6d"
    );
}
