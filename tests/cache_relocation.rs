//! What a moved installation or project still hits, with Debian's real hipcc: a project tree
//! moved elsewhere with the same sources and headers; the same compiler reached through a
//! symbolic link farm. And what must not hit: a header edited after the move.

use std::path::{Path, PathBuf};

use hipjit::compiler::{CompileOptions, CompilerConfig};
use hipjit::jit::{CacheLocation, Jit, JitOptions, Origin, RemoteLocation};
use hipjit::target_id::TargetId;

const SOURCE: &str = "#include <hip/hip_runtime.h>\n#include \"scale.h\"\n\
    extern \"C\" __global__ void scale(float* x) { x[threadIdx.x] = twice(x[threadIdx.x]); }\n";
const HEADER: &str = "__device__ inline float twice(float v) { return 2.0f * v; }\n";

fn jit(root: &Path, hipcc: Option<PathBuf>) -> Jit {
    Jit::new(JitOptions {
        compiler_config: CompilerConfig {
            hipcc,
            ..CompilerConfig::default()
        },
        cache: CacheLocation::Roots(vec![root.to_path_buf()]),
        remote_cache: RemoteLocation::Disabled,
        ..JitOptions::default()
    })
    .unwrap_or_else(|e| panic!("{e} (Debian's hipcc is installed by scripts/setup.sh)"))
}

fn options(include: &Path) -> CompileOptions {
    let mut o = CompileOptions::for_target(TargetId::parse("gfx90a").unwrap());
    o.include_dirs = vec![include.to_path_buf()];
    o
}

fn project(dir: &Path) -> PathBuf {
    std::fs::create_dir_all(dir.join("include")).unwrap();
    std::fs::write(dir.join("include/scale.h"), HEADER).unwrap();
    dir.join("include")
}

#[test]
fn a_moved_project_tree_with_the_same_files_hits() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("cache");
    let before = project(&dir.path().join("checkout-a"));
    let first = jit(&root, None).compile(SOURCE, &options(&before)).unwrap();
    assert_eq!(first.origin(), Origin::Compiler);

    std::fs::create_dir_all(dir.path().join("moved")).unwrap();
    std::fs::rename(
        dir.path().join("checkout-a"),
        dir.path().join("moved/checkout-b"),
    )
    .unwrap();
    let after = dir.path().join("moved/checkout-b/include");
    let moved = jit(&root, None).compile(SOURCE, &options(&after)).unwrap();
    assert_eq!(moved.origin(), Origin::Disk, "the moved tree missed");
    assert_eq!(moved.key(), first.key());

    // The same names with other content: a miss.
    std::fs::write(after.join("scale.h"), HEADER.replace("2.0f", "3.0f")).unwrap();
    let edited = jit(&root, None).compile(SOURCE, &options(&after)).unwrap();
    assert_eq!(edited.origin(), Origin::Compiler);
    assert_ne!(edited.key(), first.key());
}

#[test]
fn the_same_compiler_through_a_symlink_farm_hits() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("cache");
    let include = project(&dir.path().join("p"));
    let direct = jit(&root, None);
    let first = direct.compile(SOURCE, &options(&include)).unwrap();
    assert_eq!(first.origin(), Origin::Compiler);
    let hipcc = first.compiler().path.clone();

    let farm = dir.path().join("farm/bin");
    std::fs::create_dir_all(&farm).unwrap();
    std::os::unix::fs::symlink(&hipcc, farm.join("hipcc")).unwrap();
    let linked = jit(&root, Some(farm.join("hipcc")));
    assert_eq!(
        linked.source_key(SOURCE, &options(&include)).unwrap(),
        direct.source_key(SOURCE, &options(&include)).unwrap()
    );
    let hit = linked.compile(SOURCE, &options(&include)).unwrap();
    assert_eq!(hit.origin(), Origin::Disk, "the linked compiler missed");
    assert_eq!(hit.key(), first.key());
}
