//! Parity of the in-process compiler with the process compiler: every kernel of the corpus in
//! tests/kernels/parity/ compiled by hipcc (through hipjit's `Jit`, the flags it always uses)
//! and by hipRTC with the same flags must give the same kernels: the same metadata (arguments,
//! kernarg segment, SGPR/VGPR/AGPR counts, spills, LDS, scratch, wavefront size, workgroup
//! limit), the same kernel descriptor (WGP-mode bit included) and the same machine code, byte
//! for byte. Run here on HIP 5.2.3 (`bookworm`: gfx90a, gfx1030) and inside the sid root by
//! scripts/sid-test.sh (`sid`, HIP 6.4.3: gfx90a, gfx942, gfx1100).
//!
//! Measured: on HIP 6.4.3 every kernel is identical on all three targets as it comes. hipRTC
//! 5.2.3 as it comes gives different machine code for 9 of 28 kernels on gfx90a and 5 on
//! gfx1030 (instruction order, register assignment, a different sqrt and wave reduction): it
//! compiles in three comgr steps (source to bitcode at `-O3` with `-mllvm -amdgpu-prelink`, a
//! link with comgr's device libraries chosen without its options (`oclc_wavefrontsize64_off`,
//! `oclc_correctly_rounded_sqrt_off`), then code generation with a fixed `-O3 -mcumode` that
//! optimises a second time), hipcc 5.2.3 in one `-cc1` with `-mlink-builtin-bitcode`. With
//! [`hiprtc::hip5_parity_options`] (`-Xclang -disable-llvm-passes` and hipcc's device libraries
//! linked in the first step) every kernel is identical on both targets; the test checks the
//! device-library list against `hipcc -###` too.
//!
//! The corpus's host programs (tests/kernels/parity/host/: host code, standard headers) are not
//! compared: only a process compiler compiles them as hipcc does, and the test checks that Auto
//! gives hipcc's result for them.
//!
//! The mode of gfx10+ targets is pinned on both sides (`-mcumode`): hipcc 5.2.3 compiles
//! gfx1030 in WGP mode and hipRTC 5.2.3 in CU mode by default, and forcing WGP mode on that
//! hipRTC (`-mno-cumode`) stops device-library inlining (ENVIRONMENT.md).

use std::path::{Path, PathBuf};

use hipjit::code_object::CodeObject;
use hipjit::compiler::hiprtc::{self, HipRtc};
use hipjit::compiler::rtc::RtcInput;
use hipjit::compiler::CompileOptions;
use hipjit::jit::{CacheLocation, Jit, JitOptions};
use hipjit::target_id::TargetId;

/// One target of the matrix and the flags pinned on both sides.
struct Case {
    target: &'static str,
    flags: &'static [&'static str],
}

fn cases() -> &'static [Case] {
    match std::env::var("HIPJIT_TEST_ENV").as_deref() {
        Ok("sid") => &[
            Case {
                target: "gfx90a",
                flags: &[],
            },
            Case {
                target: "gfx942",
                flags: &[],
            },
            Case {
                target: "gfx1100",
                flags: &["-mcumode"],
            },
        ],
        Ok("bookworm") | Err(_) => &[
            Case {
                target: "gfx90a",
                flags: &[],
            },
            Case {
                target: "gfx1030",
                flags: &["-mcumode"],
            },
        ],
        Ok(other) => panic!("HIPJIT_TEST_ENV={other:?}: expected bookworm or sid"),
    }
}

fn corpus() -> Vec<(String, String)> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/kernels/parity");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "hip"))
        .collect();
    files.sort();
    files
        .into_iter()
        .map(|p| {
            let name = p.file_name().unwrap().to_string_lossy().into_owned();
            (name, std::fs::read_to_string(&p).unwrap())
        })
        .collect()
}

fn jit(compiler: hipjit::compiler::selection::CompilerChoice) -> Jit {
    Jit::new(JitOptions {
        // Whatever HIPJIT_COMPILER says: these tests are about the two compilers.
        compiler: Some(compiler),
        cache: CacheLocation::Disabled,
        ..JitOptions::default()
    })
    .unwrap_or_else(|e| panic!("{e}"))
}

/// Every difference between the two compilers' code objects, one line each, and the kernels
/// whose machine code alone differs, as (file, target, kernel).
fn differences(
    file: &str,
    case: &Case,
    hipcc: &CodeObject,
    rtc: &CodeObject,
    code_differs: &mut Vec<(String, String, String)>,
) -> Vec<String> {
    let mut out = Vec::new();
    let names = |co: &CodeObject| {
        let mut v: Vec<String> = co.kernels().iter().map(|k| k.name.clone()).collect();
        v.sort();
        v
    };
    if names(hipcc) != names(rtc) {
        out.push(format!(
            "{file} {}: kernels differ: hipcc {:?}, hipRTC {:?}",
            case.target,
            names(hipcc),
            names(rtc)
        ));
        return out;
    }
    if hipcc.code_object_version() != rtc.code_object_version() || hipcc.e_flags() != rtc.e_flags()
    {
        out.push(format!(
            "{file} {}: code object v{} e_flags {:#x} (hipcc) vs v{} e_flags {:#x} (hipRTC)",
            case.target,
            hipcc.code_object_version(),
            hipcc.e_flags(),
            rtc.code_object_version(),
            rtc.e_flags()
        ));
    }
    for k in hipcc.kernels() {
        let r = rtc.kernel(&k.name).unwrap();
        let at = format!("{file} {} {}", case.target, k.name);
        if k != r {
            out.push(format!(
                "{at}: metadata differs:\n  hipcc  {k:?}\n  hipRTC {r:?}"
            ));
        }
        let (dh, dr) = (
            hipcc.kernel_descriptor(&k.name).unwrap(),
            rtc.kernel_descriptor(&k.name).unwrap(),
        );
        if dh != dr {
            out.push(format!(
                "{at}: kernel descriptor differs (WGP mode {} vs {}):\n  hipcc  {dh:?}\n  hipRTC {dr:?}",
                dh.wgp_mode(),
                dr.wgp_mode()
            ));
        }
        let (ch, cr) = (
            hipcc.kernel_code(&k.name).unwrap(),
            rtc.kernel_code(&k.name).unwrap(),
        );
        if ch != cr {
            code_differs.push((file.to_owned(), case.target.to_owned(), k.name.clone()));
        }
    }
    out
}

/// The `-mlink-builtin-bitcode` files of hipcc's device compile for `case` (`hipcc -###`, the
/// flags hipjit gives it).
fn hipcc_device_libraries(case: &Case) -> Vec<PathBuf> {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("probe.hip"), "").unwrap();
    let mut cmd = std::process::Command::new("hipcc");
    cmd.current_dir(dir.path())
        .args(["-###", "-x", "hip", "--genco"])
        .arg(format!("--offload-arch={}", case.target))
        .args(["-O3", "--no-gpu-bundle-output", "-std=c++17"])
        .args(case.flags)
        .args(["probe.hip", "-o", "probe.co"]);
    let out = cmd.output().unwrap_or_else(|e| panic!("hipcc -###: {e}"));
    let text =
        String::from_utf8_lossy(&out.stderr).into_owned() + &String::from_utf8_lossy(&out.stdout);
    let words: Vec<&str> = text
        .split_whitespace()
        .map(|w| w.trim_matches('"'))
        .collect();
    words
        .windows(2)
        .filter(|w| w[0] == "-mlink-builtin-bitcode")
        .map(|w| std::fs::canonicalize(w[1]).unwrap_or_else(|e| panic!("{}: {e}", w[1])))
        .collect()
}

#[test]
fn hiprtc_compiles_the_corpus_to_the_same_kernels_as_hipcc() {
    let hipcc_jit = jit(hipjit::compiler::selection::CompilerChoice::Hipcc);
    // hipRTC through hipjit's own backend (its options, hip5_parity_options for HIP 5.x).
    let rtc_jit = jit(hipjit::compiler::selection::CompilerChoice::HipRtc);
    let mut backend_differs = Vec::new();
    let rtc = HipRtc::open(None).unwrap_or_else(|e| panic!("{e}"));
    let corpus = corpus();
    let mut kernels = 0;
    let mut diffs = Vec::new();
    let mut code_differs = Vec::new();
    let options_of = |case: &Case| {
        let mut options = CompileOptions::for_target(TargetId::parse(case.target).unwrap());
        for f in case.flags {
            options = options.flag(*f);
        }
        options
    };
    // hipcc's compiles first, two at a time (each is a process of its own); hipRTC's below
    // one at a time (hipRTC 5.x is not safe to call from two threads).
    let jobs: Vec<(&Case, &(String, String))> = cases()
        .iter()
        .flat_map(|case| corpus.iter().map(move |f| (case, f)))
        .collect();
    let run = |part: &[(&Case, &(String, String))]| {
        part.iter()
            .map(|(case, (file, source))| {
                hipcc_jit
                    .compile(source, &options_of(case))
                    .unwrap_or_else(|e| panic!("hipcc, {file} for {}: {e}", case.target))
            })
            .collect::<Vec<_>>()
    };
    let (first, second) = jobs.split_at(jobs.len().div_ceil(2));
    let by_hipcc: Vec<hipjit::jit::Compiled> = std::thread::scope(|s| {
        let other = s.spawn(|| run(second));
        let mut all = run(first);
        all.extend(other.join().unwrap());
        all
    });
    let mut by_hipcc = by_hipcc.iter();
    for case in cases() {
        let target = TargetId::parse(case.target).unwrap();
        for (file, source) in &corpus {
            let options = options_of(case);
            let hipcc = by_hipcc.next().unwrap().code_object().unwrap();
            let mut rtc_options = vec![
                hiprtc::arch_option(&target),
                "-O3".to_owned(),
                "-std=c++17".to_owned(),
            ];
            rtc_options.extend(case.flags.iter().map(|f| f.to_string()));
            if rtc.hip_major() == Some(5) {
                let dir = hiprtc::hip5_device_library_dir(rtc.path())
                    .expect("HIP 5.x's device libraries beside its hipRTC");
                let libraries = hiprtc::hip5_device_libraries(&dir, &target, &rtc_options);
                let canonical: Vec<PathBuf> = libraries
                    .iter()
                    .map(|l| {
                        std::fs::canonicalize(l).unwrap_or_else(|e| panic!("{}: {e}", l.display()))
                    })
                    .collect();
                assert_eq!(
                    canonical,
                    hipcc_device_libraries(case),
                    "the device libraries hipcc links for {}",
                    case.target
                );
                rtc_options.extend(hiprtc::hip5_parity_options(&libraries));
            }
            let (rtc_source, rtc_headers) = if rtc.hip_major() == Some(5) {
                (
                    format!("{source}{}", hiprtc::HIP5_SOURCE_END),
                    hiprtc::hip5_parity_headers(),
                )
            } else {
                (source.clone(), Vec::new())
            };
            let out = rtc
                .compile(&RtcInput {
                    source: rtc_source.as_bytes(),
                    name: file,
                    headers: &rtc_headers,
                    include_dirs: &[],
                    options: &rtc_options,
                })
                .unwrap_or_else(|e| panic!("hipRTC, {file} for {}: {e}", case.target));
            let from_rtc = CodeObject::from_bytes(&out.code, Some(&target)).unwrap();
            // HIPJIT_PARITY_DUMP=DIR keeps both code objects, to disassemble a difference
            // (`llvm-objdump-15 -d --mcpu=gfx90a DIR/*.co`).
            if let Some(dir) = std::env::var_os("HIPJIT_PARITY_DUMP") {
                let stem = Path::new(&dir).join(format!("{file}.{}", case.target));
                std::fs::write(
                    stem.with_extension(format!("{}.hipcc.co", case.target)),
                    hipcc.elf(),
                )
                .unwrap();
                std::fs::write(
                    stem.with_extension(format!("{}.hiprtc.co", case.target)),
                    from_rtc.elf(),
                )
                .unwrap();
            }
            let through_jit = rtc_jit
                .compile(source, &options)
                .unwrap_or_else(|e| panic!("hipRTC through Jit, {file} for {}: {e}", case.target));
            let through_jit = through_jit.code_object().unwrap();
            for k in hipcc.kernels() {
                if hipcc.kernel_code(&k.name).ok() != through_jit.kernel_code(&k.name).ok() {
                    backend_differs.push(format!("{file} {} {}", case.target, k.name));
                }
            }
            kernels += hipcc.kernels().len();
            diffs.extend(differences(file, case, hipcc, &from_rtc, &mut code_differs));
        }
    }
    assert!(
        kernels >= 2 * 20,
        "the corpus holds at least 20 kernels ({kernels} compiled)"
    );
    assert!(
        diffs.is_empty(),
        "{} differences:\n{}",
        diffs.len(),
        diffs.join("\n")
    );
    assert!(
        backend_differs.is_empty(),
        "hipRTC through Jit differs from hipcc for {backend_differs:?}"
    );
    code_differs.sort();
    assert_eq!(
        code_differs,
        Vec::<(String, String, String)>::new(),
        "kernels whose machine code differs (HIPJIT_PARITY_DUMP=DIR keeps the code objects)"
    );
}

/// The corpus's host programs (tests/kernels/parity/host/): host code and standard headers,
/// which the in-process compiler does not compile as the process compiler does (hipRTC
/// compiles device code against built-in headers of its own, and no host code). For them,
/// Auto must give the process compiler's code: the result of Auto and that of hipcc asked for
/// by name have one key (the same compiler, flags and headers read), so the second is a disk
/// hit of the first. One target per toolchain.
#[test]
fn auto_gives_hipccs_code_for_the_host_programs_of_the_corpus() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/kernels/parity/host");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "hip"))
        .collect();
    files.sort();
    assert!(files.len() >= 3, "{files:?}");
    let case = &cases()[0];
    let options = CompileOptions::for_target(TargetId::parse(case.target).unwrap());
    let cache = tempfile::tempdir().unwrap();
    let home = tempfile::tempdir().unwrap();
    let jit_with = |choice| {
        Jit::new(JitOptions {
            compiler: Some(choice),
            compiler_config: hipjit::compiler::CompilerConfig {
                identity_dir: Some(home.path().join("identity")),
                ..Default::default()
            },
            cache: CacheLocation::Roots(vec![cache.path().to_path_buf()]),
            ..JitOptions::default()
        })
        .unwrap_or_else(|e| panic!("{e}"))
    };
    for file in &files {
        let name = file.file_name().unwrap().to_string_lossy();
        let source = std::fs::read(file).unwrap();
        let auto = jit_with(hipjit::compiler::selection::CompilerChoice::Auto)
            .compile(&source, &options)
            .unwrap_or_else(|e| panic!("Auto, {name} for {}: {e}", case.target));
        assert_eq!(
            auto.compiler().kind,
            hipjit::compiler::CompilerKind::Hipcc,
            "{name}: {}",
            auto.compiler().reason
        );
        let hipcc = jit_with(hipjit::compiler::selection::CompilerChoice::Hipcc)
            .compile(&source, &options)
            .unwrap_or_else(|e| panic!("hipcc, {name}: {e}"));
        assert_eq!(
            (hipcc.origin(), hipcc.key()),
            (hipjit::jit::Origin::Disk, auto.key()),
            "{name}: Auto's result is not hipcc's"
        );
        assert!(!auto.code_object().unwrap().kernels().is_empty(), "{name}");
    }
}
