//! hipRTC, the in-process compiler, against the real library of the environment named by
//! `HIPJIT_TEST_ENV`: `bookworm` (default; Debian's HIP 5.2.3, hipRTC inside libamdhip64.so.5)
//! or `sid` (HIP 6.4.3, libhiprtc.so.6, run inside the sid root filesystem by
//! scripts/sid-test.sh). No GPU is needed: hipRTC compiles without one (ENVIRONMENT.md).

use std::path::{Path, PathBuf};

use hipjit::cache::key::{self, CacheKey};
use hipjit::cache::manifest;
use hipjit::code_object::CodeObject;
use hipjit::compiler::hiprtc::{self, HipRtc};
use hipjit::compiler::rtc::{RtcError, RtcInput};
use hipjit::compiler::CompilerKind;
use hipjit::target_id::TargetId;

use crate::common::toolchain::{bare_identity, test_env, TestEnv, SAXPY};

fn hiprtc() -> HipRtc {
    HipRtc::open(None).unwrap_or_else(|e| panic!("{e}\n(bookworm: apt-get install libamdhip64-5)"))
}

fn options(target: &str) -> Vec<String> {
    let target = TargetId::parse(target).unwrap();
    vec![hiprtc::arch_option(&target), "-O3".to_owned()]
}

fn input<'a>(source: &'a [u8], options: &'a [String]) -> RtcInput<'a> {
    RtcInput {
        source,
        name: "saxpy.hip",
        headers: &[],
        include_dirs: &[],
        options,
    }
}

/// A source reading a header from an include directory (`shape.h`), one handed in memory
/// (`mem.h`) and the HIP runtime header.
const INCLUDES: &str = r#"
#include <hip/hip_runtime.h>
#include "shape.h"
#include "mem.h"
extern "C" __global__ void k(int* o) { o[0] = WIDTH * 1000 + IN_MEMORY; }
"#;

#[test]
fn the_library_of_the_environment_is_found() {
    let rtc = hiprtc();
    let file = rtc
        .path()
        .file_name()
        .unwrap()
        .to_string_lossy()
        .into_owned();
    match test_env() {
        // HIP 5.x keeps hipRTC inside the runtime.
        TestEnv::Bookworm => assert_eq!(file, "libamdhip64.so.5", "{rtc:?}"),
        TestEnv::Sid => assert!(file.starts_with("libhiprtc.so.6"), "{rtc:?}"),
    }
    assert_eq!(rtc.found(), "dynamic loader");
    let major = match test_env() {
        TestEnv::Bookworm => 5,
        TestEnv::Sid => 6,
    };
    assert_eq!(rtc.hip_major(), Some(major), "{rtc:?}");
    // major.minor, which Auto's parity table is keyed by: from the file the soname links to
    // (libamdhip64.so.5.2.21153, libhiprtc.so.6.4.43484).
    let minor = match test_env() {
        TestEnv::Bookworm => 2,
        TestEnv::Sid => 4,
    };
    assert_eq!(rtc.hip_version(), Some((major, Some(minor))), "{rtc:?}");
}

#[test]
fn saxpy_compiles_to_a_raw_code_object_for_gfx90a() {
    let opts = options("gfx90a");
    let out = hiprtc().compile(&input(SAXPY.as_bytes(), &opts)).unwrap();
    assert_eq!(&out.code[..4], b"\x7fELF", "a raw ELF, not a bundle");
    let co = CodeObject::from_bytes(&out.code, None).unwrap();
    assert_eq!(co.target_id().processor(), "gfx90a");
    // Code object v4 from HIP 5.2.3, v6 from 6.4.3 (ENVIRONMENT.md).
    let want_version = match test_env() {
        TestEnv::Bookworm => 4,
        TestEnv::Sid => 6,
    };
    assert_eq!(co.code_object_version(), want_version);
    let k = co.kernel("saxpy").unwrap();
    let layout: Vec<(u32, u32)> = k.args.iter().map(|a| (a.offset, a.size)).collect();
    assert_eq!(layout[..4], [(0, 4), (8, 8), (16, 8), (24, 4)]);
}

#[test]
fn a_syntax_error_returns_the_log_with_the_callers_file_name() {
    let opts = options("gfx90a");
    let source = "extern \"C\" __global__ void k(int* o) { o[0] = 1; }\nint bad = ;\n";
    let err = hiprtc()
        .compile(&RtcInput {
            name: "broken.hip",
            ..input(source.as_bytes(), &opts)
        })
        .unwrap_err();
    let RtcError::Compile {
        log, options, name, ..
    } = &err
    else {
        panic!("{err:?}")
    };
    assert_eq!(name, "broken.hip");
    assert!(options.starts_with(&opts), "{options:?}");
    assert!(
        log.contains("broken.hip:2:11: error: expected expression"),
        "{log}"
    );
    assert!(!log.contains("comgr-"), "staging paths mapped back: {log}");
    let RtcError::Compile { diagnostics, .. } = &err else {
        unreachable!()
    };
    let d = &diagnostics[0];
    assert_eq!(
        (d.file.as_deref(), d.line, d.column, d.message.as_str()),
        (Some("broken.hip"), Some(2), Some(11), "expected expression")
    );
    assert!(d.is_error(), "{d:?}");
    assert!(
        err.to_string().contains("--gpu-architecture=gfx90a -O3"),
        "{err}"
    );
}

#[test]
fn headers_in_memory_are_included() {
    let opts = options("gfx90a");
    let headers = vec![("shape.h".to_owned(), b"#define WIDTH 7\n".to_vec())];
    let source =
        "#include \"shape.h\"\nextern \"C\" __global__ void fill(int* o) { o[0] = WIDTH; }\n";
    let out = hiprtc()
        .compile(&RtcInput {
            headers: &headers,
            include_dirs: &[],
            ..input(source.as_bytes(), &opts)
        })
        .unwrap();
    let co = CodeObject::from_bytes(&out.code, None).unwrap();
    assert!(co.kernel("fill").is_ok());
    let missing = "#include \"absent.h\"\n";
    let err = hiprtc()
        .compile(&input(missing.as_bytes(), &opts))
        .unwrap_err();
    assert!(
        err.to_string().contains("'absent.h' file not found"),
        "{err}"
    );
}

#[test]
fn a_nul_byte_is_refused_before_compiling() {
    let opts = options("gfx90a");
    let err = hiprtc()
        .compile(&input(
            b"extern \"C\" __global__ void k() {}\0// tail",
            &opts,
        ))
        .unwrap_err();
    let RtcError::NulByte { offset, what, .. } = &err else {
        panic!("{err:?}")
    };
    assert_eq!((*offset, what.as_str()), (33, "the source"));
    assert!(
        err.to_string()
            .contains("hipcc and nvcc read files and accept it"),
        "{err}"
    );
}

#[test]
fn concurrent_compiles_are_serialised_and_all_succeed() {
    // hipRTC 5.2.3 crashed in 5 of 10 runs of two threads compiling at once (ENVIRONMENT.md);
    // hipjit serialises its own calls. Four threads, each its own kernel: every one gets its own
    // code back.
    let rtc = std::sync::Arc::new(hiprtc());
    let threads: Vec<_> = (0..4)
        .map(|i| {
            let rtc = rtc.clone();
            std::thread::spawn(move || {
                let opts = options("gfx90a");
                let source = format!(
                    "#include <hip/hip_runtime.h>\n\
                     extern \"C\" __global__ void k{i}(int* o) {{ o[threadIdx.x] = {i}; }}\n"
                );
                let out = rtc.compile(&input(source.as_bytes(), &opts)).unwrap();
                let co = CodeObject::from_bytes(&out.code, None).unwrap();
                co.kernel(&format!("k{i}")).map(|_| ()).unwrap();
            })
        })
        .collect();
    for t in threads {
        t.join().expect("a compile thread panicked");
    }
}

#[test]
fn a_library_without_hiprtc_is_refused_by_symbol() {
    let err = HipRtc::open_path(Path::new("libm.so.6")).unwrap_err();
    let RtcError::MissingSymbol { symbol, .. } = &err else {
        panic!("{err:?}")
    };
    assert_eq!(*symbol, "hiprtcCreateProgram");
    let err = HipRtc::open_path(Path::new("/nonexistent/libhiprtc.so")).unwrap_err();
    assert!(matches!(err, RtcError::Open { .. }), "{err:?}");
}

#[test]
fn the_identity_lists_the_library_comgr_llvm_and_the_builtins() {
    let files = hiprtc().identity_files();
    let names: Vec<String> = files
        .iter()
        .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
        .collect();
    let has = |prefix: &str| names.iter().any(|n| n.starts_with(prefix));
    let (library, comgr, llvm, builtins) = match test_env() {
        TestEnv::Bookworm => (
            "libamdhip64.so.5",
            "libamd_comgr.so.2",
            "libLLVM-15.so",
            "libhiprtc-builtins.so.5",
        ),
        TestEnv::Sid => (
            "libhiprtc.so.6",
            "libamd_comgr.so.3",
            "libLLVM.so.21",
            "libhiprtc-builtins.so.6",
        ),
    };
    for want in [library, comgr, llvm, builtins] {
        assert!(has(want), "{want} missing from {names:?}");
    }
    assert!(
        files.iter().all(|p| p.is_absolute() && p.is_file()),
        "{files:?}"
    );
    // HIP 5.x: and the device libraries its parity options link (hip5_parity_options).
    let bitcode = names.iter().filter(|n| n.ends_with(".bc")).count();
    if test_env() == TestEnv::Bookworm {
        assert!(
            has("ocml.bc") && has("oclc_wavefrontsize64_on.bc"),
            "{names:?}"
        );
    } else {
        assert_eq!(bitcode, 0, "{names:?}");
    }
    assert_eq!(names.len(), 4 + bitcode, "{names:?}");
}

#[test]
fn the_files_read_are_reported_without_comgrs_staged_copies() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("shape.h"), "#define WIDTH 7\n").unwrap();
    std::fs::write(dir.path().join("unused.h"), "#error never read\n").unwrap();
    let opts = options("gfx90a");
    let headers = vec![("mem.h".to_owned(), b"#define IN_MEMORY 3\n".to_vec())];
    let include_dirs = [dir.path().to_path_buf()];
    let out = hiprtc()
        .compile(&RtcInput {
            headers: &headers,
            include_dirs: &include_dirs,
            ..input(INCLUDES.as_bytes(), &opts)
        })
        .unwrap();
    let in_dir: Vec<_> = out
        .dependencies
        .iter()
        .filter(|d| d.include_dir.is_some())
        .map(|d| (d.include_dir, d.name.clone(), d.path.clone()))
        .collect();
    assert_eq!(
        in_dir,
        [(
            Some(0),
            PathBuf::from("shape.h"),
            dir.path().join("shape.h")
        )]
    );
    let others: Vec<&Path> = out
        .dependencies
        .iter()
        .filter(|d| d.include_dir.is_none())
        .map(|d| d.path.as_path())
        .collect();
    assert!(
        others
            .iter()
            .all(|p| p.is_absolute() && p.is_file() && !p.to_string_lossy().contains("comgr-")),
        "{others:?}"
    );
    // hip_runtime.h comes from the system header directory, as the compiler read it.
    assert!(
        others.contains(&Path::new("/usr/include/hip/hip_runtime.h")),
        "{others:?}"
    );
}

#[test]
fn editing_an_included_header_changes_the_key_and_the_code() {
    let dir = tempfile::tempdir().unwrap();
    let header = dir.path().join("shape.h");
    std::fs::write(&header, "#define WIDTH 7\n").unwrap();
    let opts = options("gfx90a");
    let headers = vec![("mem.h".to_owned(), b"#define IN_MEMORY 3\n".to_vec())];
    let include_dirs = [dir.path().to_path_buf()];
    let rtc = hiprtc();
    let compile = || {
        rtc.compile(&RtcInput {
            headers: &headers,
            include_dirs: &include_dirs,
            ..input(INCLUDES.as_bytes(), &opts)
        })
        .unwrap()
    };
    let id = bare_identity(CompilerKind::HipRtc, rtc.path());
    let direct = CacheKey([1; 32]);
    let first = compile();
    let recorded = manifest::record(
        INCLUDES.as_bytes(),
        &first.dependencies,
        &include_dirs,
        &[],
        &id,
        first.started,
        None,
    );
    let first_key = key::result_key(&direct, &recorded.manifest);
    // Unchanged: the manifest as it is now gives the same key (a hit).
    let now = recorded.manifest.current(&include_dirs, &id.root).unwrap();
    assert_eq!(key::result_key(&direct, &now), first_key);

    std::fs::write(&header, "#define WIDTH 8\n").unwrap();
    let now = recorded.manifest.current(&include_dirs, &id.root).unwrap();
    let looked_up = key::result_key(&direct, &now);
    assert_ne!(
        looked_up, first_key,
        "the edited header must not find the old entry"
    );
    let second = compile();
    assert_ne!(second.code, first.code, "WIDTH 8 compiles to other code");
    let again = manifest::record(
        INCLUDES.as_bytes(),
        &second.dependencies,
        &include_dirs,
        &[],
        &id,
        second.started,
        Some(&now),
    );
    assert_eq!(key::result_key(&direct, &again.manifest), looked_up);
}

#[test]
fn the_comgr_lists_the_processors_that_compile() {
    let rtc = hiprtc();
    let comgr = rtc.comgr().unwrap();
    let (knows, lacks): (&[&str], &[&str]) = match test_env() {
        // Measured: hipRTC 5.2.3 compiles gfx90a and gfx1030 and aborts on gfx940-gfx942/gfx11.
        TestEnv::Bookworm => (
            &["gfx900", "gfx90a", "gfx1030"],
            &["gfx940", "gfx942", "gfx1100"],
        ),
        TestEnv::Sid => (&["gfx90a", "gfx942", "gfx1100", "gfx1151"], &["gfx9999"]),
    };
    for p in knows {
        assert!(comgr.knows(p), "{p} missing from {comgr:?}");
    }
    for p in lacks {
        assert!(!comgr.knows(p), "{p} in {comgr:?}");
    }
    let name = comgr.path.file_name().unwrap().to_string_lossy();
    let soname = match test_env() {
        TestEnv::Bookworm => "libamd_comgr.so.2",
        TestEnv::Sid => "libamd_comgr.so.3",
    };
    assert!(name.starts_with(soname), "{comgr:?}");
}

#[test]
fn a_processor_its_comgr_does_not_know_is_refused_before_hiprtc_could_abort() {
    // Without the check hipRTC aborts this test process (SIGABRT, "munmap_chunk(): invalid
    // pointer" on 5.2.3, "free(): invalid pointer" on 6.4.3).
    let rtc = hiprtc();
    let mut refused = vec!["gfx9999"];
    if test_env() == TestEnv::Bookworm {
        refused.extend(["gfx940", "gfx942", "gfx1100"]);
    }
    for target in refused {
        for spelling in [
            vec![format!("--gpu-architecture={target}")],
            vec!["--offload-arch".to_owned(), target.to_owned()],
        ] {
            let err = rtc
                .compile(&input(SAXPY.as_bytes(), &spelling))
                .unwrap_err();
            let RtcError::UnsupportedTarget {
                target: t,
                library,
                reason,
                ..
            } = &err
            else {
                panic!("{target}: {err:?}")
            };
            assert_eq!(t, target);
            assert_eq!(library, rtc.path());
            assert!(
                reason.contains("libamd_comgr") && reason.contains(&format!("not know {target}")),
                "{reason}"
            );
            assert!(
                err.to_string().contains(&rtc.path().display().to_string()),
                "{err}"
            );
        }
    }
}

#[test]
fn a_feature_the_processor_lacks_is_refused_before_compiling() {
    let rtc = hiprtc();
    for target in ["gfx1030:xnack+", "gfx90a:foo+", "gfx1100:sramecc-"] {
        let opts = vec![format!("--gpu-architecture={target}")];
        let err = rtc.compile(&input(SAXPY.as_bytes(), &opts)).unwrap_err();
        assert!(
            matches!(&err, RtcError::UnsupportedTarget { target: t, .. } if t == target),
            "{target}: {err:?}"
        );
    }
    // A feature the processor has compiles.
    let opts = options("gfx90a:xnack+");
    assert!(rtc.compile(&input(SAXPY.as_bytes(), &opts)).is_ok());
}

#[test]
fn errors_in_an_included_header_are_diagnostics_naming_the_callers_paths() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("real")).unwrap();
    std::os::unix::fs::symlink(dir.path().join("real"), dir.path().join("link")).unwrap();
    std::fs::write(
        dir.path().join("real/shape.h"),
        "#define WIDTH 7\nint bad = ;\n",
    )
    .unwrap();
    let include_dirs = [dir.path().join("link")];
    let opts = options("gfx90a");
    let headers = vec![("mem.h".to_owned(), b"#define IN_MEMORY 3\n".to_vec())];
    let err = hiprtc()
        .compile(&RtcInput {
            name: "kern.hip",
            headers: &headers,
            include_dirs: &include_dirs,
            ..input(INCLUDES.as_bytes(), &opts)
        })
        .unwrap_err();
    let RtcError::Compile { diagnostics, .. } = &err else {
        panic!("{err:?}")
    };
    let errors: Vec<_> = diagnostics.iter().filter(|d| d.is_error()).collect();
    assert_eq!(errors.len(), 1, "{diagnostics:?}");
    let e = errors[0];
    let header = dir.path().join("link/shape.h").display().to_string();
    assert_eq!(
        (e.file.as_deref(), e.line, e.column, e.message.as_str()),
        (
            Some(header.as_str()),
            Some(2),
            Some(11),
            "expected expression"
        )
    );
    assert_eq!(e.included_from.len(), 1, "{e:?}");
    assert_eq!(
        (e.included_from[0].file.as_str(), e.included_from[0].line),
        ("kern.hip", 3)
    );
}

#[test]
fn an_unknown_option_is_a_diagnostic_without_a_file() {
    let mut opts = options("gfx90a");
    opts.push("-fno-such-thing".to_owned());
    let err = hiprtc()
        .compile(&input(SAXPY.as_bytes(), &opts))
        .unwrap_err();
    let RtcError::Compile { diagnostics, .. } = &err else {
        panic!("{err:?}")
    };
    assert_eq!(diagnostics.len(), 1, "{diagnostics:?}");
    let d = &diagnostics[0];
    assert!(d.is_error() && d.file.is_none(), "{d:?}");
    assert_eq!(d.message, "unknown argument: '-fno-such-thing'");
}

#[test]
fn a_note_in_an_included_header_carries_its_include_chain() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("one.h"),
        "#pragma once\n__device__ inline int one(int x) { return x; }\n",
    )
    .unwrap();
    let include_dirs = [dir.path().to_path_buf()];
    let opts = options("gfx90a");
    let source =
        "#include \"one.h\"\nextern \"C\" __global__ void k(int* p) {\n    p[0] = one(1, 2);\n}\n";
    let err = hiprtc()
        .compile(&RtcInput {
            name: "call.hip",
            include_dirs: &include_dirs,
            ..input(source.as_bytes(), &opts)
        })
        .unwrap_err();
    let RtcError::Compile { diagnostics, .. } = &err else {
        panic!("{err:?}")
    };
    let note = &diagnostics[0].notes[0];
    assert_eq!(note.line, Some(2), "{note:?}");
    assert_eq!(note.included_from.len(), 1, "{note:?}");
    assert_eq!(
        (
            note.included_from[0].file.as_str(),
            note.included_from[0].line
        ),
        ("call.hip", 1)
    );
}
