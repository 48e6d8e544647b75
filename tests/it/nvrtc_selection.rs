//! Which compiler the one `Jit` takes for SM targets, with nvcc and NVRTC from PyPI
//! (`$HIPJIT_CI_CACHE/nvcc-venv`, installed by scripts/setup.sh; NVRTC found beside that nvcc),
//! and that a compiler of the other platform is refused. AMD: tests/real/selection.rs.

use crate::common;

use std::path::{Path, PathBuf};

use hipjit::compiler::rtc::RtcError;
use hipjit::compiler::selection::CompilerChoice;
use hipjit::compiler::{CompileError, CompileOptions, CompilerConfig, CompilerError, CompilerKind};
use hipjit::cuda::target::SmTarget;
use hipjit::jit::{CacheLocation, Jit, JitError, JitOptions, Origin};
use hipjit::target_id::TargetId;

// nvcc from PyPI (scripts/setup.sh installs it; its absence is a failure, not a skip).
use common::toolchain::pypi_nvcc;

// The source the tests compile, and the identity directory they share.
use common::toolchain::{identity_home as home, SAXPY};

/// A JIT with `choice`, nvcc from PyPI, identities remembered under `home`, the disk cache in
/// `cache` (none when `None`).
fn jit(choice: CompilerChoice, home: &Path, cache: Option<&Path>) -> Jit {
    Jit::new(JitOptions {
        compiler: Some(choice),
        compiler_config: CompilerConfig {
            nvcc: Some(pypi_nvcc()),
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

fn sm90() -> CompileOptions {
    CompileOptions::for_sm(SmTarget::new(90))
}

fn gfx(name: &str) -> CompileOptions {
    CompileOptions::for_target(TargetId::parse(name).unwrap())
}

#[test]
fn auto_takes_nvrtc_for_sm_90_where_its_parity_with_nvcc_was_proven() {
    let home = home();
    let c = jit(CompilerChoice::Auto, home, None)
        .compile(SAXPY, &sm90())
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(c.compiler().kind, CompilerKind::Nvrtc, "{:?}", c.compiler());
    assert!(
        c.compiler().reason.contains("identical SASS"),
        "{}",
        c.compiler().reason
    );
    let cubin = c.cubin().expect("a cubin");
    assert_eq!(cubin.target(), SmTarget::new(90));
    assert_eq!(cubin.kernels()[0].name, "saxpy");
}

/// Auto's rule for what a source needs holds on NVIDIA too: host code goes to nvcc, named in
/// the reason; a source NVRTC refuses where nvcc compiles it (a `__host__`-only function) is
/// compiled by nvcc after NVRTC failed, and the failure remembered for a fresh JIT.
#[test]
fn auto_takes_nvcc_for_host_code_and_after_nvrtc_failed() {
    let home = tempfile::tempdir().unwrap();
    let program = format!("{SAXPY}\nint main() {{ return hipDeviceSynchronize(); }}\n");
    let chosen = jit(CompilerChoice::Auto, home.path(), None)
        .compiler_for(&program, &sm90())
        .unwrap();
    assert_eq!(
        chosen.backend.kind(),
        CompilerKind::Nvcc,
        "{}",
        chosen.reason
    );
    assert!(
        chosen.reason.contains("host code (`int main(`"),
        "{}",
        chosen.reason
    );
    let host_only = format!("{SAXPY}\n__host__ int on_the_host(int x) {{ return x + 1; }}\n");
    let nvrtc = jit(CompilerChoice::Nvrtc, home.path(), None).compile(&host_only, &sm90());
    assert!(nvrtc.is_err(), "NVRTC now compiles a __host__ function");
    let c = jit(CompilerChoice::Auto, home.path(), None)
        .compile(&host_only, &sm90())
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(c.compiler().kind, CompilerKind::Nvcc);
    assert!(
        c.compiler()
            .reason
            .contains("NVRTC 13.5 failed on this source"),
        "{}",
        c.compiler().reason
    );
    let fresh = jit(CompilerChoice::Auto, home.path(), None)
        .compiler_for(&host_only, &sm90())
        .unwrap();
    assert_eq!(fresh.backend.kind(), CompilerKind::Nvcc);
    assert!(fresh.reason.contains("remembered"), "{}", fresh.reason);
}

/// Where NVRTC's files cannot all be known (an include directory of more directories than a
/// watch takes, such as a kernel in `$HOME`), Auto compiles with nvcc, which lists what it
/// reads, and says why; NVRTC asked for explicitly refuses, naming the tree.
#[test]
fn auto_takes_nvcc_where_nvrtcs_files_cannot_be_observed() {
    let home = tempfile::tempdir().unwrap();
    let wide = tempfile::tempdir().unwrap();
    for i in 0..=hipjit::compiler::opened_files::MAX_WATCHED_DIRS {
        std::fs::create_dir(wide.path().join(i.to_string())).unwrap();
    }
    let mut options = sm90();
    options.include_dirs = vec![wide.path().to_path_buf()];
    let explicit = jit(CompilerChoice::Nvrtc, home.path(), None).compile(SAXPY, &options);
    let err = explicit
        .expect_err("NVRTC keyed a tree it could not watch")
        .to_string();
    assert!(err.contains("directories"), "{err}");
    let c = jit(CompilerChoice::Auto, home.path(), None)
        .compile(SAXPY, &options)
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(c.compiler().kind, CompilerKind::Nvcc);
    assert!(
        c.compiler()
            .reason
            .contains("NVRTC 13.5 failed on this source")
            && c.compiler().reason.contains("cannot all be known"),
        "{}",
        c.compiler().reason
    );
}

#[test]
fn auto_takes_nvcc_for_a_source_with_a_nul_byte_and_says_so() {
    let home = home();
    let source = format!("// a NUL \0 in a comment\n{SAXPY}");
    let c = jit(CompilerChoice::Auto, home, None)
        .compile(&source, &sm90())
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(c.compiler().kind, CompilerKind::Nvcc, "{:?}", c.compiler());
    assert!(
        c.compiler().reason.contains("NUL byte"),
        "{}",
        c.compiler().reason
    );
}

#[test]
fn nvrtc_asked_for_refuses_a_nul_byte_naming_the_source_and_offset() {
    let home = home();
    let source = format!("// a NUL \0 in a comment\n{SAXPY}");
    let err = jit(CompilerChoice::Nvrtc, home, None)
        .compile(&source, &sm90())
        .unwrap_err();
    match &err {
        JitError::Compile(CompileError::InProcess(e)) => match &**e {
            RtcError::NulByte { what, offset, .. } => {
                assert_eq!((what.as_str(), *offset), ("the source", 9), "{err}")
            }
            other => panic!("expected a NUL-byte refusal, got {other}"),
        },
        other => panic!("expected a NUL-byte refusal, got {other}"),
    }
}

#[test]
fn nvcc_and_nvrtc_results_have_different_keys_in_one_cache() {
    let home = home();
    let cache = tempfile::tempdir().unwrap();
    let by_nvcc = jit(CompilerChoice::Nvcc, home, Some(cache.path()))
        .compile(SAXPY, &sm90())
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(by_nvcc.compiler().kind, CompilerKind::Nvcc);
    let by_nvrtc = jit(CompilerChoice::Nvrtc, home, Some(cache.path()))
        .compile(SAXPY, &sm90())
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        by_nvrtc.origin(),
        Origin::Compiler,
        "nvcc's cubin was served to NVRTC"
    );
    assert_ne!(by_nvrtc.key(), by_nvcc.key());
    let again = jit(CompilerChoice::Nvrtc, home, Some(cache.path()))
        .compile(SAXPY, &sm90())
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        (again.origin(), again.key()),
        (Origin::Disk, by_nvrtc.key())
    );
    assert_eq!(again.compiler().kind, CompilerKind::Nvrtc);
}

#[test]
fn a_compiler_of_the_other_platform_is_refused_naming_both() {
    let home = home();
    for (choice, options) in [
        (CompilerChoice::HipRtc, sm90()),
        (CompilerChoice::Hipcc, sm90()),
        (CompilerChoice::Nvrtc, gfx("gfx90a")),
        (CompilerChoice::Nvcc, gfx("gfx90a")),
    ] {
        let err = jit(choice, home, None)
            .compile(SAXPY, &options)
            .unwrap_err();
        assert!(
            matches!(&err, JitError::Compiler(CompilerError::NoCompiler { .. })),
            "{choice}: {err}"
        );
        let text = err.to_string();
        assert!(
            text.contains(choice.as_str()) && text.contains(&options.target_names()[0]),
            "{text}"
        );
    }
}

#[test]
fn nvrtc_compiles_half_through_the_toolkit_headers_beside_it_which_are_its_installations() {
    let source = "#include <hip/hip_fp16.h>\n\
                  extern \"C\" __global__ void h(__half* x) { x[0] = __float2half(2.0f); }\n";
    let c = jit(CompilerChoice::Nvrtc, home(), None)
        .compile(source, &sm90())
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(c.cubin().unwrap().kernels()[0].name, "h");
    let include = c
        .command()
        .iter()
        .find_map(|o| o.strip_prefix("-I"))
        .unwrap_or_else(|| panic!("the toolkit's headers were not handed: {:?}", c.command()));
    let id = jit(CompilerChoice::Nvrtc, home(), None)
        .compiler_for(source, &sm90())
        .unwrap()
        .backend
        .identity()
        .clone();
    assert!(id.covered.is_empty(), "{:?}", id.covered);
    assert_eq!(
        id.header_dirs,
        [Path::new(include), &Path::new(include).join("cccl")],
        "{id:?}"
    );
    assert_eq!(
        Some(id.root.as_path()),
        Path::new(include).parent(),
        "{id:?}"
    );
}

/// A `consteval` helper without an execution-space attribute: nvcc compiles it for the host and
/// evaluates it for device code (examples/nvidia_e2e.rs's front-door source).
const UNANNOTATED_HELPERS: &str = r#"
#include <hip/hip_runtime.h>
consteval long long sq(long long x) { return x * x; }
extern "C" __global__ void front(long long* out) {
    out[0] = __cplusplus;
    out[1] = SCALE * sq(3);
}
"#;

/// Compiles `source` with nvcc and with NVRTC (both from PyPI) and asserts that NVRTC accepts
/// it, compiles it itself, and gives `kernel` the same SASS as nvcc; `what` names the case.
fn assert_nvrtc_matches_nvcc(source: &str, options: &CompileOptions, kernel: &str, what: &str) {
    let home = home();
    let by_nvcc = jit(CompilerChoice::Nvcc, home, None)
        .compile(source, options)
        .unwrap_or_else(|e| panic!("nvcc, {what}: {e}"));
    let by_nvrtc = jit(CompilerChoice::Nvrtc, home, None)
        .compile(source, options)
        .unwrap_or_else(|e| panic!("NVRTC refused what nvcc accepts, {what}: {e}"));
    assert_eq!(by_nvrtc.compiler().kind, CompilerKind::Nvrtc);
    let code = |c: &hipjit::jit::Compiled| {
        c.cubin()
            .expect("a cubin")
            .kernel_code(kernel)
            .unwrap()
            .to_vec()
    };
    assert_eq!(
        code(&by_nvrtc),
        code(&by_nvcc),
        "{what}: NVRTC's SASS for `{kernel}` differs from nvcc's"
    );
}

#[test]
fn a_source_nvcc_accepts_with_an_unannotated_helper_compiles_under_nvrtc_to_the_same_code() {
    let mut options = sm90().define("SCALE", "3");
    options.std = hipjit::compiler::CxxStd::Cxx20;
    assert_nvrtc_matches_nvcc(UNANNOTATED_HELPERS, &options, "front", "C++20");
}

/// Macros nvcc's sources get from the host's `<math.h>` and `<limits.h>` through
/// `<cuda_runtime.h>` (examples/downstream's softmax starts its maximum at `-INFINITY`).
const HOST_MACROS: &str = r#"
#include <hip/hip_runtime.h>
constexpr float kInf = INFINITY;
extern "C" __global__ void host_macros(float* f, double* d, long long* i) {
    f[0] = -kInf;
    f[1] = NAN;
    f[2] = HUGE_VALF;
    d[0] = HUGE_VAL;
    d[1] = M_PI * M_SQRT2 + M_E + M_LN2;
    i[0] = INT_MAX;
    i[1] = INT_MIN;
    i[2] = UINT_MAX;
    i[3] = LLONG_MIN;
    i[4] = CHAR_BIT + SHRT_MAX + UCHAR_MAX;
}
"#;

#[test]
fn math_and_limits_macros_compile_under_nvrtc_to_nvccs_code() {
    for std in [
        hipjit::compiler::CxxStd::Cxx14,
        hipjit::compiler::CxxStd::Cxx17,
        hipjit::compiler::CxxStd::Cxx20,
    ] {
        let mut options = sm90();
        options.std = std;
        assert_nvrtc_matches_nvcc(HOST_MACROS, &options, "host_macros", &format!("{std:?}"));
    }
}

/// The toolkit's cooperative groups, WMMA (`mma.h` includes "mma.hpp" beside it) and CCCL's
/// `cuda::std` (below `include/cccl`, which nvcc's profile puts on its search path).
const TOOLKIT_LIBRARIES: &str = r#"
#include <hip/hip_runtime.h>
#include <cooperative_groups.h>
#include <mma.h>
#include <cuda/std/limits>
namespace cg = cooperative_groups;
using namespace nvcuda;
extern "C" __global__ void toolkit_libraries(const half* a, const half* b, float* c, float* m) {
    cg::thread_block block = cg::this_thread_block();
    wmma::fragment<wmma::matrix_a, 16, 16, 16, half, wmma::row_major> fa;
    wmma::fragment<wmma::matrix_b, 16, 16, 16, half, wmma::col_major> fb;
    wmma::fragment<wmma::accumulator, 16, 16, 16, float> fc;
    wmma::fill_fragment(fc, 0.0f);
    wmma::load_matrix_sync(fa, a, 16);
    wmma::load_matrix_sync(fb, b, 16);
    wmma::mma_sync(fc, fa, fb, fc);
    wmma::store_matrix_sync(c, fc, 16, wmma::mem_row_major);
    block.sync();
    m[block.thread_rank()] = cuda::std::numeric_limits<float>::max();
}
"#;

#[test]
fn cooperative_groups_wmma_and_cccl_compile_under_nvrtc_to_nvccs_code() {
    assert_nvrtc_matches_nvcc(
        TOOLKIT_LIBRARIES,
        &sm90(),
        "toolkit_libraries",
        "cooperative groups, WMMA, cuda::std",
    );
}

/// A header reached by `..` from an include directory: NVRTC would read it without reporting it.
fn escaping_include_tree() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("src")).unwrap();
    std::fs::create_dir_all(dir.path().join("inc")).unwrap();
    std::fs::write(dir.path().join("inc/v.h"), "#define VAL 3.5f\n").unwrap();
    let src = dir.path().join("src");
    (dir, src)
}

const ESCAPING: &str = "#include \"../inc/v.h\"\n\
    extern \"C\" __global__ void kern(float* y) { y[threadIdx.x] = VAL; }\n";

#[test]
fn nvrtc_refuses_an_include_it_could_not_report_instead_of_caching_it_unkeyed() {
    let home = home();
    let cache = tempfile::tempdir().unwrap();
    let (_tree, src) = escaping_include_tree();
    let mut options = sm90();
    options.include_dirs = vec![src.clone()];
    let err = jit(CompilerChoice::Nvrtc, home, Some(cache.path()))
        .compile(ESCAPING, &options)
        .expect_err("NVRTC compiled a source whose header it cannot report");
    let text = err.to_string();
    assert!(
        text.contains("#include \"../inc/v.h\"") && text.contains("HIPJIT_COMPILER=nvcc"),
        "{text}"
    );
    // Refused before NVRTC ran: nothing says it compiled.
    assert!(!text.contains("compiled"), "{text}");
    // The same from a header inside the include directory, and with an absolute name.
    std::fs::write(src.join("wrap.h"), "#include \"../inc/v.h\"\n").unwrap();
    let err = jit(CompilerChoice::Nvrtc, home, None)
        .compile(
            "#include \"wrap.h\"\nextern \"C\" __global__ void k(float* y) { y[0] = VAL; }\n",
            &options,
        )
        .expect_err("a header's escaping include was not refused");
    assert!(err.to_string().contains("wrap.h"), "{err}");
    let absolute = format!(
        "#include \"{}\"\nextern \"C\" __global__ void k(float* y) {{ y[0] = VAL; }}\n",
        src.parent().unwrap().join("inc/v.h").display()
    );
    assert!(jit(CompilerChoice::Nvrtc, home, None)
        .compile(&absolute, &options)
        .is_err());
}

#[test]
fn auto_takes_nvcc_for_an_include_nvrtc_could_not_report_and_an_edit_is_a_miss() {
    let home = home();
    let cache = tempfile::tempdir().unwrap();
    let (tree, src) = escaping_include_tree();
    let mut options = sm90();
    options.include_dirs = vec![src];
    let first = jit(CompilerChoice::Auto, home, Some(cache.path()))
        .compile(ESCAPING, &options)
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        first.compiler().kind,
        CompilerKind::Nvcc,
        "{:?}",
        first.compiler()
    );
    assert!(
        first.compiler().reason.contains("../inc/v.h"),
        "{}",
        first.compiler().reason
    );
    std::thread::sleep(std::time::Duration::from_millis(1100));
    std::fs::write(tree.path().join("inc/v.h"), "#define VAL 7.25f\n").unwrap();
    let second = jit(CompilerChoice::Auto, home, Some(cache.path()))
        .compile(ESCAPING, &options)
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        second.origin(),
        Origin::Compiler,
        "the edited header was served stale"
    );
    assert_ne!(second.key(), first.key());
}

/// A disk-cache root inside an include directory (the default `~/.cache/hipjit` with `-I ~`):
/// NVRTC keys every file under its include directories, and the root's own files change while
/// hipjit compiles, which made every such compile unpublishable. The root carries hipjit's
/// cache directory tag and is left out of the walk; a header in a directory tagged by another
/// program (cargo's `target`) is still keyed.
#[test]
fn a_cache_root_inside_an_include_directory_still_caches() {
    let home = home();
    let project = tempfile::tempdir().unwrap();
    let root = project.path().join(".cache/hipjit");
    let generated = project.path().join("target");
    std::fs::create_dir_all(&generated).unwrap();
    std::fs::write(
        generated.join("CACHEDIR.TAG"),
        "Signature: 8a477f597d28d172789f06886806bc55\n# created by cargo\n",
    )
    .unwrap();
    std::fs::write(generated.join("scale.h"), "#define SCALE 2.0f\n").unwrap();
    let source = r#"
#include "target/scale.h"
extern "C" __global__ void scale(float* x) { x[threadIdx.x] *= SCALE; }
"#;
    let options = sm90().include_dir(project.path());
    let compile = || {
        jit(CompilerChoice::Nvrtc, home, Some(&root))
            .compile(source, &options)
            .unwrap_or_else(|e| panic!("{e}"))
    };
    let first = compile();
    assert_eq!(first.origin(), Origin::Compiler);
    assert_eq!(first.cache_warnings(), &[] as &[String]);
    assert!(
        hipjit::cache::tag::is_hipjit_cache(&root),
        "the root carries hipjit's tag"
    );
    let second = compile();
    assert_eq!(
        (second.origin(), second.key()),
        (Origin::Disk, first.key()),
        "{:?}",
        second.cache_warnings()
    );
    // The header under cargo's tag is still keyed: an edit misses.
    std::fs::write(generated.join("scale.h"), "#define SCALE 3.0f\n").unwrap();
    let third = compile();
    assert_eq!(third.origin(), Origin::Compiler);
    assert_ne!(third.cubin().unwrap().elf(), first.cubin().unwrap().elf());
}
