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

/// A stand-in installation at `prefix`: `bin/hipcc` (answers `--version` and `-###` naming
/// its clang and device library, and "compiles" by copying a real gfx90a code object),
/// `llvm/bin/clang`, `bitcode/ocml.bc`.
fn installation(prefix: &Path) -> PathBuf {
    use std::os::unix::fs::PermissionsExt;
    for d in ["bin", "llvm/bin", "bitcode"] {
        std::fs::create_dir_all(prefix.join(d)).unwrap();
    }
    let co =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/code-objects/single-gfx90a.hsaco");
    let hipcc = prefix.join("bin/hipcc");
    std::fs::write(
        &hipcc,
        format!(
            "#!/bin/sh\nroot=$(cd \"$(dirname \"$0\")/..\" && pwd)\n\
             case \"$1\" in\n\
             --version) echo 'HIP version: 0.0-relocation'; echo 'clang version 1.0'; \
             echo \"InstalledDir: $root/llvm/bin\"; exit 0;;\n\
             -###) echo \"\\\"$root/llvm/bin/clang\\\" \\\"-cc1\\\" \
             \\\"-mlink-builtin-bitcode\\\" \\\"$root/bitcode/ocml.bc\\\"\"; exit 0;;\n\
             esac\n\
             cp {} out.hsaco\nfor a; do case \"$a\" in *.hip) src=\"$a\";; esac; done\n\
             echo \"out.hsaco: $src\" > deps.d\n",
            co.display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(&hipcc, std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::write(prefix.join("llvm/bin/clang"), "clang 1.0 stand-in\n").unwrap();
    std::fs::write(prefix.join("bitcode/ocml.bc"), "ocml 1\n").unwrap();
    hipcc
}

fn jit_with(root: &Path, hipcc: &Path, identity: &Path) -> Jit {
    Jit::new(JitOptions {
        compiler_config: CompilerConfig {
            hipcc: Some(hipcc.to_path_buf()),
            env: Some(vec![
                ("HOME".into(), identity.as_os_str().to_owned()),
                ("PATH".into(), "/usr/bin:/bin".into()),
            ]),
            identity_dir: Some(identity.to_path_buf()),
            ..CompilerConfig::default()
        },
        cache: CacheLocation::Roots(vec![root.to_path_buf()]),
        remote_cache: RemoteLocation::Disabled,
        ..JitOptions::default()
    })
    .unwrap_or_else(|e| panic!("{e}"))
}

#[test]
fn a_copy_of_the_compiler_under_another_prefix_hits_and_another_compiler_misses() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("cache");
    let identity = dir.path().join("identity");
    let include = project(&dir.path().join("p"));
    let original = installation(&dir.path().join("opt/rocm-a"));
    let first = jit_with(&root, &original, &identity)
        .compile(SOURCE, &options(&include))
        .unwrap();
    assert_eq!(first.origin(), Origin::Compiler);

    let status = std::process::Command::new("cp")
        .arg("-a")
        .arg(dir.path().join("opt/rocm-a"))
        .arg(dir.path().join("elsewhere"))
        .status()
        .unwrap();
    assert!(status.success());
    let copy = dir.path().join("elsewhere/bin/hipcc");
    let hit = jit_with(&root, &copy, &identity)
        .compile(SOURCE, &options(&include))
        .unwrap();
    assert_eq!(hit.origin(), Origin::Disk, "the copied compiler missed");
    assert_eq!(hit.key(), first.key());

    // Another compiler: the same layout, one device library different.
    std::fs::write(dir.path().join("elsewhere/bitcode/ocml.bc"), "ocml 2\n").unwrap();
    let other = jit_with(&root, &copy, &identity)
        .compile(SOURCE, &options(&include))
        .unwrap();
    assert_eq!(other.origin(), Origin::Compiler, "another compiler hit");
    assert_ne!(other.key(), first.key());
}
