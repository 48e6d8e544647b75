//! The JIT against the real compiler of the environment named by `HIPJIT_TEST_ENV`:
//! `bookworm` (default; Debian hipcc 5.2.3 over clang-15) or `sid` (hipcc 7.0.2 over clang-21,
//! run inside the sid root filesystem). The compiler is found by hipjit's normal discovery.
//! Expectations are the measured facts of docs ENVIRONMENT.md.

use std::path::{Path, PathBuf};

use hipjit::cache::disk::DiskCache;
use hipjit::compiler::{CompileError, CompileOptions, Severity};
use hipjit::jit::{CacheLocation, Jit, JitError, JitOptions, Origin};
use hipjit::target_id::TargetId;

use crate::common::toolchain::{test_env, TestEnv};

fn kernel(name: &str) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/kernels")
        .join(name);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn target(s: &str) -> TargetId {
    TargetId::parse(s).unwrap_or_else(|e| panic!("{s}: {e}"))
}

fn jit_with_cache(dir: &Path) -> Jit {
    Jit::new(JitOptions {
        // hipcc, whatever HIPJIT_COMPILER says: these tests are about it.
        compiler: Some(hipjit::compiler::selection::CompilerChoice::Hipcc),
        cache: CacheLocation::Roots(vec![dir.to_path_buf()]),
        ..JitOptions::default()
    })
    .unwrap_or_else(|e| {
        panic!("{e}\n(install hipcc: apt-get install hipcc libamdhip64-dev rocm-device-libs)")
    })
}

/// One in-memory `Jit` shared by the tests of this binary, so a source compiled for a target
/// by one test is compiled once (single flight covers tests running at the same time).
fn jit_memory_only() -> &'static Jit {
    static JIT: std::sync::OnceLock<Jit> = std::sync::OnceLock::new();
    JIT.get_or_init(|| {
        Jit::new(JitOptions {
            // hipcc, whatever HIPJIT_COMPILER says: these tests are about it.
            compiler: Some(hipjit::compiler::selection::CompilerChoice::Hipcc),
            cache: CacheLocation::Disabled,
            ..JitOptions::default()
        })
        .unwrap_or_else(|e| panic!("{e}"))
    })
}

/// EF_AMDGPU_MACH values from LLVM AMDGPUUsage ("AMDGPU ELF Header", table
/// AMDGPU EF_AMDGPU_MACH Values), written out here rather than taken from the reader.
fn mach_of(processor: &str) -> u32 {
    match processor {
        "gfx900" => 0x2c,
        "gfx906" => 0x2f,
        "gfx908" => 0x30,
        "gfx90a" => 0x3f,
        "gfx940" => 0x40,
        "gfx1030" => 0x36,
        "gfx942" => 0x4c,
        "gfx950" => 0x4f,
        "gfx1100" => 0x41,
        "gfx1151" => 0x4a,
        "gfx1201" => 0x4e,
        other => panic!("no EF_AMDGPU_MACH value in this test for {other}"),
    }
}

fn e_flags(elf: &[u8]) -> u32 {
    assert_eq!(&elf[..4], b"\x7fELF", "not an ELF");
    assert_eq!(
        u16::from_le_bytes([elf[18], elf[19]]),
        224,
        "e_machine is not EM_AMDGPU"
    );
    u32::from_le_bytes([elf[48], elf[49], elf[50], elf[51]])
}

fn supported_targets() -> &'static [&'static str] {
    match test_env() {
        TestEnv::Bookworm => &["gfx900", "gfx906", "gfx908", "gfx90a", "gfx940", "gfx1030"],
        TestEnv::Sid => &[
            "gfx942",
            "gfx950",
            "gfx1100",
            "gfx1151",
            "gfx1201",
            "gfx942:sramecc+:xnack-",
            "gfx90a:xnack+",
        ],
    }
}

#[test]
fn every_supported_target_compiles_to_an_amdgpu_elf_for_its_processor() {
    let jit = jit_memory_only();
    let src = kernel("scale.hip");
    for t in supported_targets() {
        let t = target(t);
        let c = jit
            .compile(&src, &CompileOptions::for_target(t.clone()))
            .unwrap_or_else(|e| panic!("{t}: {e}"));
        let flags = e_flags(c.code_object().unwrap().elf());
        assert_eq!(
            flags & 0xff,
            mach_of(t.processor()),
            "{t}: e_flags {flags:#x}"
        );
        assert_eq!(c.code_object().unwrap().target_id(), &t, "{t}");
        let default_version = match test_env() {
            TestEnv::Bookworm => 4,
            TestEnv::Sid => 6,
        };
        assert_eq!(
            c.code_object().unwrap().code_object_version(),
            default_version,
            "{t}"
        );
    }
}

#[test]
fn runtime_accepted_versions_pick_the_highest_the_compiler_supports() {
    // Both clang-15 and clang-21 can write v5; clang-21 defaults to v6, which a runtime
    // accepting only 4 and 5 would reject.
    let jit = Jit::new(JitOptions {
        // hipcc, whatever HIPJIT_COMPILER says: these tests are about it.
        compiler: Some(hipjit::compiler::selection::CompilerChoice::Hipcc),
        cache: CacheLocation::Disabled,
        runtime_code_object_versions: Some(vec![4, 5]),
        ..JitOptions::default()
    })
    .unwrap_or_else(|e| panic!("{e}"));
    let opts = CompileOptions::for_target(any_target());
    assert_eq!(
        jit.effective_options(&opts).unwrap().code_object_version,
        Some(5)
    );
    let c = jit
        .compile(kernel("scale.hip"), &opts)
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(c.code_object().unwrap().code_object_version(), 5);
    assert!(
        c.command().iter().any(|a| a == "-mcode-object-version=5"),
        "{:?}",
        c.command()
    );
}

#[test]
fn target_id_features_reach_the_code_object_e_flags() {
    // EF_AMDGPU_FEATURE_XNACK_V4 bits 0x300, SRAMECC 0xc00: 0x100 any, 0x200 off, 0x300 on.
    let (t, expected) = match test_env() {
        TestEnv::Bookworm => ("gfx90a:xnack-", 0x200),
        TestEnv::Sid => ("gfx942:sramecc+:xnack-", 0xe00),
    };
    let jit = jit_memory_only();
    let c = jit
        .compile(kernel("scale.hip"), &CompileOptions::for_target(target(t)))
        .unwrap_or_else(|e| panic!("{t}: {e}"));
    let flags = e_flags(c.code_object().unwrap().elf());
    let mask = if test_env() == TestEnv::Sid {
        0xf00
    } else {
        0x300
    };
    assert_eq!(flags & mask, expected, "{t}: e_flags {flags:#x}");
}

#[test]
fn gfx942_is_unsupported_by_bookworm_hipcc_and_compiles_with_sid_hipcc() {
    let jit = jit_memory_only();
    let r = jit.compile(
        kernel("scale.hip"),
        &CompileOptions::for_target(target("gfx942")),
    );
    match test_env() {
        TestEnv::Bookworm => {
            let err = r.expect_err("hipcc 5.2.3 must reject gfx942");
            let JitError::Compile(CompileError::UnsupportedTarget(u)) = &err else {
                panic!("expected UnsupportedTarget, got {err}")
            };
            let msg = err.to_string();
            assert!(msg.ends_with("does not support gfx942"), "{msg}");
            assert!(msg.contains("hipcc (HIP version: 5.2"), "{msg}");
            assert!(
                u.failure.stderr.contains("invalid target ID 'gfx942'"),
                "{}",
                u.failure.stderr
            );
        }
        TestEnv::Sid => {
            r.unwrap_or_else(|e| panic!("{e}"));
        }
    }
}

#[test]
fn gfx1100_lacks_its_device_library_on_bookworm_and_compiles_on_sid() {
    let jit = jit_memory_only();
    let r = jit.compile(
        kernel("scale.hip"),
        &CompileOptions::for_target(target("gfx1100")),
    );
    match test_env() {
        TestEnv::Bookworm => {
            let err = r.expect_err("hipcc 5.2.3 has no gfx1100 device library");
            let JitError::Compile(CompileError::MissingDeviceLibrary(m)) = &err else {
                panic!("expected MissingDeviceLibrary, got {err}")
            };
            assert_eq!(m.file, "oclc_isa_version_1100.bc");
            assert_eq!(
                m.searched,
                [PathBuf::from("/usr/lib/x86_64-linux-gnu/amdgcn/bitcode")],
                "{err}"
            );
            assert!(err
                .to_string()
                .contains("/usr/lib/x86_64-linux-gnu/amdgcn/bitcode"));
        }
        TestEnv::Sid => {
            r.unwrap_or_else(|e| panic!("{e}"));
        }
    }
}

fn any_target() -> TargetId {
    target(match test_env() {
        TestEnv::Bookworm => "gfx90a",
        TestEnv::Sid => "gfx942",
    })
}

#[test]
fn compile_error_carries_command_status_stderr_and_located_diagnostics() {
    let jit = jit_memory_only();
    let opts = CompileOptions {
        source_name: Some("broken_kernel.hip".into()),
        ..CompileOptions::for_target(any_target())
    };
    let err = jit
        .compile(kernel("broken.hip"), &opts)
        .expect_err("must fail");
    let JitError::Compile(CompileError::Failed(f)) = &err else {
        panic!("expected Failed, got {err}")
    };
    assert_eq!(f.exit_code, Some(1));
    assert!(f
        .command
        .iter()
        .any(|a| a == &format!("--offload-arch={}", any_target())));
    assert!(
        f.command.iter().any(|a| a == "broken_kernel.hip"),
        "{:?}",
        f.command
    );
    assert!(f.stderr.contains("undeclared_name"), "{}", f.stderr);
    let e = f
        .diagnostics
        .iter()
        .find(|d| d.severity == Severity::Error)
        .unwrap_or_else(|| panic!("no error diagnostic in {:?}", f.diagnostics));
    assert_eq!(e.file.as_deref(), Some("broken_kernel.hip"));
    assert_eq!((e.line, e.column), (Some(4), Some(12)));
    assert!(e.message.contains("undeclared_name"), "{}", e.message);
}

#[test]
fn include_directory_and_cache_root_with_space_quote_dollar_and_non_ascii_work() {
    let base = tempfile::tempdir().unwrap();
    let odd = base.path().join("a b'c$HOME \"é\"");
    let inc = odd.join("include dir");
    std::fs::create_dir_all(inc.join("sub")).unwrap();
    std::fs::write(inc.join("sub/factor.h"), "#define FACTOR 3.0f\n").unwrap();
    // Past the timestamp granularity: a header written as the compile starts is "too new"
    // for the result to be published.
    std::thread::sleep(std::time::Duration::from_millis(60));
    let cache = odd.join("cache");
    let jit = jit_with_cache(&cache);
    let src = "#include <hip/hip_runtime.h>\n#include <sub/factor.h>\n\
               extern \"C\" __global__ void k(float* x) { x[0] *= FACTOR; }\n";
    let opts = CompileOptions::for_target(any_target()).include_dir(&inc);
    let c = jit.compile(src, &opts).unwrap_or_else(|e| panic!("{e}"));
    let entry = c.entry_path().expect("written to the disk cache");
    assert!(entry.starts_with(&cache), "{}", entry.display());
    let disk = DiskCache::open(&[cache]).unwrap();
    let meta = disk.get(&c.key()).entry.expect("entry readable").meta;
    assert!(
        meta.dependencies.contains(&inc.join("sub/factor.h")),
        "{:?}",
        meta.dependencies
    );
    assert!(
        meta.tracked_headers
            .iter()
            .any(|h| h.path == inc.join("sub/factor.h") && h.include == "sub/factor.h"),
        "{:?}",
        meta.tracked_headers
    );
    let verified = disk.verify().unwrap();
    assert!(verified[0].status.is_ok(), "{:?}", verified[0].status);
    assert!(
        verified[0].untracked.is_empty(),
        "{:?}",
        verified[0].untracked
    );
}

#[test]
fn second_request_is_a_memory_hit_and_a_fresh_jit_hits_the_disk() {
    let dir = tempfile::tempdir().unwrap();
    let src = kernel("scale.hip");
    let opts = CompileOptions::for_target(any_target());
    let first = jit_with_cache(dir.path()).compile(&src, &opts).unwrap();
    assert_eq!(first.origin(), Origin::Compiler);
    let jit = jit_with_cache(dir.path());
    let disk = jit.compile(&src, &opts).unwrap();
    assert_eq!(disk.origin(), Origin::Disk);
    assert_eq!(disk.key(), first.key());
    assert_eq!(
        disk.code_object().unwrap().elf(),
        first.code_object().unwrap().elf()
    );
    let mem = jit.compile(&src, &opts).unwrap();
    assert_eq!(mem.origin(), Origin::Memory);
}

#[test]
fn corrupted_entry_is_a_miss_and_is_replaced_by_a_valid_one() {
    let dir = tempfile::tempdir().unwrap();
    let src = kernel("scale.hip");
    let opts = CompileOptions::for_target(any_target());
    let first = jit_with_cache(dir.path()).compile(&src, &opts).unwrap();
    let path = first.entry_path().unwrap().clone();
    let mut bytes = std::fs::read(&path).unwrap();
    let last = bytes.len() - 1;
    bytes[last] ^= 0xff;
    std::fs::write(&path, &bytes).unwrap();
    let again = jit_with_cache(dir.path()).compile(&src, &opts).unwrap();
    assert_eq!(again.origin(), Origin::Compiler);
    assert_eq!(again.bad_entries().len(), 1);
    assert!(
        again.bad_entries()[0].reason.contains("sha256"),
        "{:?}",
        again.bad_entries()
    );
    let disk = DiskCache::open(&[dir.path().to_path_buf()]).unwrap();
    assert!(
        disk.get(&again.key()).entry.is_some(),
        "entry was not replaced"
    );
}

#[test]
fn intact_entry_whose_code_object_does_not_read_is_a_miss_and_is_replaced() {
    let dir = tempfile::tempdir().unwrap();
    let src = kernel("scale.hip");
    let opts = CompileOptions::for_target(any_target());
    let first = jit_with_cache(dir.path()).compile(&src, &opts).unwrap();
    let path = first.entry_path().unwrap().clone();
    // An entry whose sums match but whose code object is not one (another hipjit version's,
    // or written by hand): same key and metadata, a text artefact.
    let disk = DiskCache::open(&[dir.path().to_path_buf()]).unwrap();
    let meta = disk.get(&first.key()).entry.unwrap().meta;
    std::fs::remove_file(&path).unwrap();
    disk.put(&first.key(), meta, &[("code-object", b"not a code object")])
        .unwrap();
    let again = jit_with_cache(dir.path()).compile(&src, &opts).unwrap();
    assert_eq!(again.origin(), Origin::Compiler);
    assert_eq!(again.bad_entries().len(), 1, "{:?}", again.bad_entries());
    assert_eq!(again.bad_entries()[0].path, path);
    assert!(again.bad_entries()[0].writable_root);
    let third = jit_with_cache(dir.path()).compile(&src, &opts).unwrap();
    assert_eq!(third.origin(), Origin::Disk, "entry was not replaced");
    assert_eq!(
        third.code_object().unwrap().elf(),
        again.code_object().unwrap().elf()
    );
}

#[test]
fn isa_dump_holds_the_kernel_symbol() {
    let jit = jit_memory_only();
    let opts = CompileOptions {
        dump_isa: true,
        dump_llvm_ir: true,
        ..CompileOptions::for_target(any_target())
    };
    let c = jit
        .compile(kernel("scale.hip"), &opts)
        .unwrap_or_else(|e| panic!("{e}"));
    let isa = c.isa().expect("ISA dump");
    assert!(isa.contains("scale:"), "{isa}");
    assert!(isa.contains(".amdhsa_kernel scale"), "{isa}");
    let ir = c.llvm_ir().expect("LLVM IR dump");
    assert_eq!(&ir[..4], b"BC\xc0\xde", "not LLVM bitcode");
}

/// `mixed.hip` compiled once for the tests below that read it.
fn mixed() -> &'static hipjit::jit::Compiled {
    static MIXED: std::sync::OnceLock<hipjit::jit::Compiled> = std::sync::OnceLock::new();
    MIXED.get_or_init(|| {
        jit_memory_only()
            .compile(
                kernel("mixed.hip"),
                &CompileOptions::for_target(any_target()),
            )
            .unwrap_or_else(|e| panic!("{e}"))
    })
}

#[test]
fn every_kernel_of_a_multi_kernel_source_is_listed() {
    let mut names: Vec<&str> = mixed().kernels().iter().map(|k| k.name.as_str()).collect();
    names.sort();
    assert_eq!(
        names,
        ["_Z12not_extern_cPi", "axpy_f32", "axpy_f64", "mixed_args"]
    );
}

#[test]
fn kernel_without_extern_c_is_suggested_by_its_demangled_name() {
    let err = mixed()
        .code_object()
        .unwrap()
        .kernel("not_extern_c")
        .unwrap_err();
    assert!(err.to_string().contains("_Z12not_extern_cPi"), "{err}");
}

/// One kernel as `llvm-readelf --notes` prints it: name, kernarg segment size, and each
/// argument's (offset, size).
#[derive(Debug, PartialEq, Eq)]
struct ReadelfKernel {
    name: String,
    kernarg_segment_size: u32,
    args: Vec<(u32, u32)>,
}

fn llvm_readelf() -> &'static str {
    match test_env() {
        TestEnv::Bookworm => "llvm-readelf-15",
        TestEnv::Sid => "llvm-readelf-21",
    }
}

/// Parses the YAML that llvm-readelf prints for NT_AMDGPU_METADATA (only what is compared).
fn readelf_kernels(elf: &[u8]) -> Vec<ReadelfKernel> {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("k.hsaco");
    std::fs::write(&path, elf).unwrap();
    let out = std::process::Command::new(llvm_readelf())
        .arg("--notes")
        .arg(&path)
        .output()
        .unwrap_or_else(|e| panic!("{}: {e} (install llvm-15 / llvm-21)", llvm_readelf()));
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    let mut kernels: Vec<ReadelfKernel> = Vec::new();
    let mut in_args = false;
    let mut in_kernels = false;
    for line in text.lines() {
        let indent = line.len() - line.trim_start().len();
        if indent == 0 && !line.is_empty() {
            in_kernels = line.starts_with("amdhsa.kernels:");
            continue;
        }
        if !in_kernels {
            continue;
        }
        let t = line.trim_start().trim_start_matches("- ");
        let value = |t: &str| {
            t.split_once(':')
                .map(|(_, v)| v.trim().to_string())
                .unwrap()
        };
        if indent == 2 && line.trim_start().starts_with("- ") {
            kernels.push(ReadelfKernel {
                name: String::new(),
                kernarg_segment_size: 0,
                args: vec![],
            });
            in_args = false;
        }
        let Some(k) = kernels.last_mut() else {
            continue;
        };
        if indent <= 4 && !line.trim_start().starts_with("- .args") {
            in_args = false;
        }
        if t.starts_with(".args:") {
            in_args = true;
            continue;
        }
        if in_args && indent >= 6 {
            if line.trim_start().starts_with("- ") {
                k.args.push((u32::MAX, u32::MAX));
            }
            let a = k.args.last_mut().unwrap();
            if t.starts_with(".offset:") {
                a.0 = value(t).parse().unwrap();
            } else if t.starts_with(".size:") {
                a.1 = value(t).parse().unwrap();
            }
        } else if indent <= 4 {
            if t.starts_with(".name:") {
                k.name = value(t);
            } else if t.starts_with(".kernarg_segment_size:") {
                k.kernarg_segment_size = value(t).parse().unwrap();
            }
        }
    }
    kernels
}

#[test]
fn reader_argument_offsets_and_sizes_equal_llvm_readelf_notes() {
    let co = mixed().code_object().unwrap();
    let expected = readelf_kernels(co.elf());
    assert_eq!(expected.len(), 4, "{expected:?}");
    for e in &expected {
        let k = co.kernel(&e.name).unwrap_or_else(|err| panic!("{err}"));
        let got: Vec<(u32, u32)> = k.args.iter().map(|a| (a.offset, a.size)).collect();
        assert_eq!(got, e.args, "kernel {}", e.name);
        assert_eq!(
            k.kernarg_segment_size, e.kernarg_segment_size,
            "kernel {}",
            e.name
        );
    }
    let m = co.kernel("mixed_args").unwrap();
    // char, double, int2, float4, 16-byte-aligned struct, two pointers.
    let sizes: Vec<u32> = m.args.iter().take(7).map(|a| a.size).collect();
    assert_eq!(sizes, [1, 8, 8, 16, 16, 8, 8]);
}

#[test]
fn no_scratch_check_names_the_kernel_that_uses_scratch() {
    let jit = jit_memory_only();
    let mut opts = CompileOptions::for_target(any_target());
    opts.checks.no_scratch = true;
    let err = jit.compile(kernel("scratch.hip"), &opts).unwrap_err();
    let JitError::Check(c) = &err else {
        panic!("expected a check failure, got {err}")
    };
    assert!(c.what.contains("uses_scratch"), "{err}");
    assert!(c.what.contains("scratch memory"), "{err}");
}

#[test]
fn no_spills_and_no_scratch_checks_pass_for_a_simple_kernel() {
    let jit = jit_memory_only();
    let mut opts = CompileOptions::for_target(any_target());
    opts.checks.no_scratch = true;
    opts.checks.no_spills = true;
    jit.compile(kernel("scale.hip"), &opts)
        .unwrap_or_else(|e| panic!("{e}"));
}

#[test]
fn compiler_records_the_access_of_restrict_pointers() {
    // The basis of hipjit::launch's check of `&` against `&mut`: hipcc 5.2.3 marks only a
    // `const T* __restrict__` read-only (`.access`); hipcc 7.0.2 records `.actual_access` of
    // both `__restrict__` pointers, write_only for the written one; neither says anything of a
    // pointer without `__restrict__`.
    let jit = jit_memory_only();
    let compiled = jit
        .compile(
            kernel("access.hip"),
            &CompileOptions::for_target(any_target()),
        )
        .unwrap_or_else(|e| panic!("{e}"));
    let info = compiled.code_object().unwrap().kernel("access").unwrap();
    let explicit: Vec<_> = info
        .args
        .iter()
        .filter(|a| !a.value_kind.starts_with("hidden_"))
        .map(|a| {
            (
                a.access.as_deref(),
                a.actual_access.as_deref(),
                a.is_written(),
            )
        })
        .collect();
    let none = (None, None, false);
    let expected = match test_env() {
        TestEnv::Bookworm => [(Some("read_only"), None, false), none, none, none, none],
        TestEnv::Sid => [
            (None, Some("read_only"), false),
            (None, Some("write_only"), true),
            none,
            none,
            none,
        ],
    };
    assert_eq!(explicit, expected, "{:#?}", info.args);
}
