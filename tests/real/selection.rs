//! Which compiler the one `Jit` takes for AMDGPU targets, with the real compilers of this
//! machine: hipcc and hipRTC (Debian's HIP 5.2.3 on the host, hipcc 7.0.2 / hipRTC 6.4.3 when
//! run inside the sid root). What Auto takes follows the parity table
//! (`hipjit::compiler::selection::PARITY`), so each test asserts the outcome for the hipRTC it
//! finds, 5.x or 6.x; every outcome is named. NVIDIA: tests/it/nvrtc_selection.rs.

use std::path::Path;

use hipjit::compiler::selection::CompilerChoice;
use hipjit::compiler::{CompileOptions, CompilerConfig, CompilerKind};
use hipjit::jit::{CacheLocation, Jit, JitOptions, Origin};
use hipjit::target_id::TargetId;

use crate::common::toolchain::{identity_home as home, SAXPY};

/// A JIT with `choice`, identities remembered under `home`, the disk cache in `cache` (none
/// when `None`).
fn jit(choice: CompilerChoice, home: &Path, cache: Option<&Path>) -> Jit {
    Jit::new(JitOptions {
        compiler: Some(choice),
        compiler_config: CompilerConfig {
            identity_dir: Some(home.join("identity")),
            ..CompilerConfig::default()
        },
        cache: match cache {
            Some(c) => CacheLocation::Roots(vec![c.to_path_buf()]),
            None => CacheLocation::Disabled,
        },
        ..JitOptions::default()
    })
    .unwrap_or_else(|e| panic!("{e}"))
}

fn gfx(name: &str) -> CompileOptions {
    CompileOptions::for_target(TargetId::parse(name).unwrap())
}

/// The major version of the hipRTC this machine has (5 on Debian 12, 6 in the sid root).
fn hiprtc_major() -> u32 {
    hipjit::compiler::hiprtc::HipRtc::open(None)
        .unwrap_or_else(|e| panic!("{e}"))
        .hip_major()
        .expect("a hipRTC named libhiprtc.so.N or libamdhip64.so.N")
}

#[test]
fn auto_on_gfx90a_follows_the_parity_finding_of_this_hiprtc() {
    let home = home();
    let chosen = jit(CompilerChoice::Auto, home, None)
        .compiler_for(SAXPY, &gfx("gfx90a"))
        .unwrap_or_else(|e| panic!("{e}"));
    let kind = chosen.backend.kind();
    match hiprtc_major() {
        5 | 6 => {
            assert_eq!(kind, CompilerKind::HipRtc, "{}", chosen.reason);
            assert!(
                chosen.reason.contains("identical code"),
                "{}",
                chosen.reason
            );
        }
        m => panic!(
            "no parity row for hipRTC {m}: Auto takes hipcc ({})",
            chosen.reason
        ),
    }
}

#[test]
fn auto_on_gfx10_and_later_takes_hiprtc_only_with_the_cu_wgp_mode_pinned() {
    let home = home();
    let jit = jit(CompilerChoice::Auto, home, None);
    let (target, major) = match hiprtc_major() {
        5 => ("gfx1030", 5),
        m => ("gfx1100", m),
    };
    let unpinned = jit.compiler_for(SAXPY, &gfx(target)).unwrap();
    assert_eq!(
        unpinned.backend.kind(),
        CompilerKind::Hipcc,
        "{}",
        unpinned.reason
    );
    let pinned = jit
        .compiler_for(SAXPY, &gfx(target).flag("-mcumode"))
        .unwrap();
    if major == 5 {
        // hipRTC 5.2.3 cannot give hipcc's WGP-mode code on gfx1030: hipcc, pinned or not.
        assert!(unpinned.reason.contains("WGP mode"), "{}", unpinned.reason);
        assert_eq!(
            pinned.backend.kind(),
            CompilerKind::Hipcc,
            "{}",
            pinned.reason
        );
    } else {
        assert!(
            unpinned.reason.contains("not pinned"),
            "{}",
            unpinned.reason
        );
        assert_eq!(
            pinned.backend.kind(),
            CompilerKind::HipRtc,
            "{}",
            pinned.reason
        );
    }
}

#[test]
fn hiprtc_result_is_cached_under_its_own_identity_and_served_to_a_fresh_jit() {
    let home = home();
    let cache = tempfile::tempdir().unwrap();
    let first = jit(CompilerChoice::HipRtc, home, Some(cache.path()))
        .compile(SAXPY, &gfx("gfx90a"))
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(first.origin(), Origin::Compiler);
    assert_eq!(first.compiler().kind, CompilerKind::HipRtc);
    let co = first.code_object().expect("a code object");
    assert_eq!(co.kernels()[0].name, "saxpy");
    assert_eq!(co.target_id().processor(), "gfx90a");
    let hit = jit(CompilerChoice::HipRtc, home, Some(cache.path()))
        .compile(SAXPY, &gfx("gfx90a"))
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!((hit.origin(), hit.key()), (Origin::Disk, first.key()));
    let by_hipcc = jit(CompilerChoice::Hipcc, home, Some(cache.path()))
        .compile(SAXPY, &gfx("gfx90a"))
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        by_hipcc.origin(),
        Origin::Compiler,
        "hipRTC's code served to hipcc"
    );
    assert_ne!(by_hipcc.key(), first.key());
}

#[test]
fn hiprtc_refuses_several_targets_naming_them_and_auto_takes_hipcc() {
    let home = home();
    let two = CompileOptions {
        targets: vec![
            TargetId::parse("gfx90a").unwrap(),
            TargetId::parse("gfx908").unwrap(),
        ],
        ..CompileOptions::default()
    };
    let err = jit(CompilerChoice::HipRtc, home, None)
        .compile(SAXPY, &two)
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("gfx90a,gfx908") && err.contains("one target"),
        "{err}"
    );
    // The key of what hipRTC would not compile is refused the same way (an extra flag too).
    let err = jit(CompilerChoice::HipRtc, home, None)
        .source_key(SAXPY, &two.clone().flag("-DEXTRA=1"))
        .unwrap_err()
        .to_string();
    assert!(err.contains("one target"), "{err}");
    let chosen = jit(CompilerChoice::Auto, home, None)
        .compiler_for(SAXPY, &two)
        .unwrap();
    assert_eq!(
        chosen.backend.kind(),
        CompilerKind::Hipcc,
        "{}",
        chosen.reason
    );
}

/// A JIT with Auto and the explicit hipcc `hipcc` (identities under [`home`], no disk cache).
fn auto_with_hipcc(hipcc: &Path) -> Jit {
    Jit::new(JitOptions {
        compiler: Some(CompilerChoice::Auto),
        compiler_config: CompilerConfig {
            hipcc: Some(hipcc.to_path_buf()),
            identity_dir: Some(home().join("identity")),
            ..CompilerConfig::default()
        },
        cache: CacheLocation::Disabled,
        ..JitOptions::default()
    })
    .unwrap_or_else(|e| panic!("{e}"))
}

#[test]
fn auto_with_an_explicit_hipcc_that_cannot_be_used_is_an_error_not_hiprtc() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let not_executable = dir.path().join("hipcc");
    std::fs::write(&not_executable, "#!/bin/sh\n").unwrap();
    std::fs::set_permissions(&not_executable, std::fs::Permissions::from_mode(0o644)).unwrap();
    let refused = dir.path().join("a$(b)");
    std::fs::create_dir(&refused).unwrap();
    let refused = refused.join("hipcc");
    std::fs::write(&refused, "#!/bin/sh\n").unwrap();
    std::fs::set_permissions(&refused, std::fs::Permissions::from_mode(0o755)).unwrap();
    for (hipcc, why) in [
        (Path::new("/opt/nowhere/hipcc"), "missing"),
        (not_executable.as_path(), "not executable"),
        (dir.path(), "not a regular file"),
        (refused.as_path(), "refused"),
    ] {
        // gfx942 with hipRTC 6 and gfx90a with hipRTC 5 alike: hipRTC is there, and Auto
        // took it in place of the hipcc it was told to use.
        for target in ["gfx90a", "gfx942"] {
            let err = match auto_with_hipcc(hipcc).compiler_for(SAXPY, &gfx(target)) {
                Ok(c) => panic!(
                    "{target}, hipcc {}: Auto took {:?} ({})",
                    hipcc.display(),
                    c.backend.kind(),
                    c.reason
                ),
                Err(e) => e.to_string(),
            };
            assert!(
                err.contains("CompilerConfig::hipcc")
                    && err.contains(&hipcc.display().to_string())
                    && err.contains(why),
                "{target}, {why}: {err}"
            );
        }
    }
}

/// One target per toolchain: gfx90a for hipcc 5.2.3 (which has no gfx942), gfx942 in the sid
/// root.
fn host_target() -> &'static str {
    match crate::common::toolchain::test_env() {
        crate::common::toolchain::TestEnv::Bookworm => "gfx90a",
        crate::common::toolchain::TestEnv::Sid => "gfx942",
    }
}

/// SAXPY with a host program around it: `main`, the HIP host API, a standard header.
const SAXPY_PROGRAM: &str = r#"
#include <hip/hip_runtime.h>
#include <vector>
extern "C" __global__ void saxpy(float a, const float* x, float* y, unsigned n) {
    unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = a * x[i] + y[i];
}
int main() {
    std::vector<float> h(256, 1.0f);
    float* d = nullptr;
    (void)hipMalloc(&d, h.size() * sizeof(float));
    hipLaunchKernelGGL(saxpy, dim3(1), dim3(256), 0, 0, 2.0f, d, d, 256u);
    return hipFree(d) == hipSuccess ? 0 : 1;
}
"#;

/// Whether Auto takes hipRTC for a plain kernel on [`host_target`] (step 3 of its rule: the
/// parity finding of this hipRTC): only then does it weigh what a source needs (hipRTC 5.2.3
/// with hipjit's 5.x options on gfx90a, hipRTC 6.4.3 in the sid root).
fn hiprtc_for_plain_kernels() -> bool {
    jit(CompilerChoice::Auto, home(), None)
        .compiler_for(SAXPY, &gfx(host_target()))
        .unwrap_or_else(|e| panic!("{e}"))
        .backend
        .kind()
        == CompilerKind::HipRtc
}

/// Asserts that Auto took hipcc, for the reason containing `why` where it weighs what the
/// source needs.
fn assert_hipcc_for(chosen: &hipjit::jit::Chosen, why: &str) {
    assert_eq!(
        chosen.backend.kind(),
        CompilerKind::Hipcc,
        "{}",
        chosen.reason
    );
    if hiprtc_for_plain_kernels() {
        assert!(chosen.reason.contains(why), "{}", chosen.reason);
    }
}

#[test]
fn auto_takes_hipcc_for_host_code_and_standard_headers_and_names_what_it_found() {
    let home = home();
    let jit = jit(CompilerChoice::Auto, home, None);
    let chosen = jit
        .compiler_for(SAXPY_PROGRAM, &gfx(host_target()))
        .unwrap();
    // The header comes first in the source.
    assert_hipcc_for(
        &chosen,
        "`#include <vector>` (line 3), a header of the C/C++ standard",
    );
    let without_header = SAXPY_PROGRAM.replace("#include <vector>", "");
    let without_header = without_header.replace("std::vector<float> h(256, 1.0f);", "");
    let without_header = without_header.replace("h.size()", "256");
    let chosen = jit
        .compiler_for(&without_header, &gfx(host_target()))
        .unwrap();
    assert_hipcc_for(&chosen, "host code (`int main(` at line 8)");
    if !hiprtc_for_plain_kernels() {
        return; // Step 3 took hipcc: tests/real/host_programs.rs compiles such programs.
    }
    // What hipcc compiles, Auto compiles.
    let compiled = jit
        .compile(SAXPY_PROGRAM, &gfx(host_target()))
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(compiled.compiler().kind, CompilerKind::Hipcc);
    assert_eq!(compiled.code_object().unwrap().kernels()[0].name, "saxpy");
}

/// A header beside the source that includes a standard header: the scan does not read it.
fn quoted_header_tree() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("twice.hpp"),
        "#pragma once\n#include <type_traits>\n\
         template <typename T> __device__ T twice(T x) {\n\
             static_assert(std::is_arithmetic<T>::value, \"a number\");\n\
             return x + x;\n}\n",
    )
    .unwrap();
    dir
}

const TWICE: &str = "#include <hip/hip_runtime.h>\n#include \"twice.hpp\"\n\
    extern \"C\" __global__ void twice_all(float* x) { x[threadIdx.x] = twice(x[threadIdx.x]); }\n";

#[test]
fn a_source_hiprtc_fails_on_is_compiled_by_hipcc_and_a_fresh_jit_goes_straight_to_hipcc() {
    let home = tempfile::tempdir().unwrap();
    let tree = quoted_header_tree();
    let options = gfx(host_target()).include_dir(tree.path());
    if !hiprtc_for_plain_kernels() {
        // Step 3 takes hipcc: hipRTC is not tried, nothing is remembered.
        let chosen = jit(CompilerChoice::Auto, home.path(), None)
            .compiler_for(TWICE, &options)
            .unwrap();
        assert_eq!(
            chosen.backend.kind(),
            CompilerKind::Hipcc,
            "{}",
            chosen.reason
        );
        return;
    }
    // hipRTC 6.4.3 compiles against its own hiprtc_runtime.h, whose integral_constant the
    // host's <type_traits> redefines ("redefinition of 'integral_constant'"); hipcc compiles
    // the source.
    let first = jit(CompilerChoice::Auto, home.path(), None)
        .compile(TWICE, &options)
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(first.compiler().kind, CompilerKind::Hipcc);
    assert_eq!(first.code_object().unwrap().kernels()[0].name, "twice_all");
    let remembered = hipjit::jit::auto_memo::remembered_failures(&home.path().join("identity"));
    let reason = &first.compiler().reason;
    // The hipRTC by its major.minor: Debian's 5.2.3, the sid root's 6.4.3.
    let version = match crate::common::toolchain::test_env() {
        crate::common::toolchain::TestEnv::Bookworm => "hipRTC 5.2",
        crate::common::toolchain::TestEnv::Sid => "hipRTC 6.4",
    };
    assert!(
        reason.contains(&format!(
            "{version} failed on this source with these options (error: "
        )) && reason.contains("`#include \"twice.hpp\"` (line 2)"),
        "{reason}"
    );
    assert_eq!(remembered.len(), 1, "{remembered:?}");
    // A fresh JIT (as a fresh process) reads the failure and tries hipRTC no more: its reason
    // is the remembered one, not a new failure's.
    let fresh = jit(CompilerChoice::Auto, home.path(), None);
    let chosen = fresh.compiler_for(TWICE, &options).unwrap();
    assert_eq!(chosen.backend.kind(), CompilerKind::Hipcc);
    assert!(
        chosen.reason.contains("remembered per user"),
        "{}",
        chosen.reason
    );
    let again = fresh
        .compile(TWICE, &options)
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(
        again
            .compiler()
            .reason
            .contains("failed on this source with these options before (error: "),
        "{}",
        again.compiler().reason
    );
    assert_eq!(again.key(), first.key(), "the same hipcc compile");
    // Other options are another request: hipRTC is tried for them.
    let other = fresh
        .compiler_for(TWICE, &options.clone().define("OTHER", "1"))
        .unwrap();
    assert_eq!(
        other.backend.kind(),
        CompilerKind::HipRtc,
        "{}",
        other.reason
    );
}

#[test]
fn a_users_error_under_auto_is_hipccs_error_with_its_diagnostics() {
    if !hiprtc_for_plain_kernels() {
        return; // Step 3 takes hipcc: its error is the only one.
    }
    let home = tempfile::tempdir().unwrap();
    let tree = quoted_header_tree();
    let options = gfx(host_target()).include_dir(tree.path());
    for source in [
        // The scan sees nothing: hipRTC 6 fails, then hipcc.
        "#include <hip/hip_runtime.h>\n\
         extern \"C\" __global__ void k(float* x) { x[0] = undeclared_here; }\n",
        // A header the scan does not read, and the same error.
        "#include <hip/hip_runtime.h>\n#include \"twice.hpp\"\n\
         extern \"C\" __global__ void k(float* x) { x[0] = twice(undeclared_here); }\n",
    ] {
        let err = jit(CompilerChoice::Auto, home.path(), None)
            .compile(source, &options)
            .unwrap_err();
        match &err {
            hipjit::jit::JitError::Compile(hipjit::compiler::CompileError::Failed(f)) => {
                assert!(
                    Path::new(&f.command[0]).ends_with("hipcc"),
                    "{:?}",
                    f.command
                );
                assert!(
                    f.diagnostics
                        .iter()
                        .any(|d| d.is_error() && d.message.contains("undeclared_here")),
                    "{err}"
                );
            }
            other => panic!("not hipcc's failure: {other}"),
        }
    }
}
