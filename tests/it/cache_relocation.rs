//! What a moved installation or project still hits, with Debian's real hipcc: a project tree
//! moved elsewhere with the same sources and headers; the same compiler reached through a
//! symbolic link farm. And what must not hit: a header edited after the move.

use crate::common;

use std::path::{Path, PathBuf};

use common::installation::{installation, jit as stand_in_jit, Compile};

use hipjit::compiler::{CompileOptions, CompilerConfig};
use hipjit::jit::{CacheLocation, Jit, JitOptions, Origin, RemoteLocation};
use hipjit::target_id::TargetId;

const SOURCE: &str = "#include <hip/hip_runtime.h>\n#include \"scale.h\"\n\
    extern \"C\" __global__ void scale(float* x) { x[threadIdx.x] = twice(x[threadIdx.x]); }\n";
const HEADER: &str = "__device__ inline float twice(float v) { return 2.0f * v; }\n";

fn jit(root: &Path, hipcc: Option<PathBuf>) -> Jit {
    Jit::new(JitOptions {
        // These tests relocate hipcc's installation.
        compiler: Some(hipjit::compiler::selection::CompilerChoice::Hipcc),
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

#[test]
fn a_copy_of_the_compiler_under_another_prefix_hits_and_another_compiler_misses() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("cache");
    let identity = dir.path().join("identity");
    let include = project(&dir.path().join("p"));
    let original = installation(
        &dir.path().join("opt/rocm-a"),
        "0.0-relocation",
        Compile::CopyCodeObject,
    );
    let first = stand_in_jit(&root, &original, &identity)
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
    let hit = stand_in_jit(&root, &copy, &identity)
        .compile(SOURCE, &options(&include))
        .unwrap();
    assert_eq!(hit.origin(), Origin::Disk, "the copied compiler missed");
    assert_eq!(hit.key(), first.key());

    // Another compiler: the same layout, one device library different.
    std::fs::write(dir.path().join("elsewhere/bitcode/ocml.bc"), "ocml 2\n").unwrap();
    let other = stand_in_jit(&root, &copy, &identity)
        .compile(SOURCE, &options(&include))
        .unwrap();
    assert_eq!(other.origin(), Origin::Compiler, "another compiler hit");
    assert_ne!(other.key(), first.key());
}

// ---- copies of Debian's real HIP 5.2.3 installation ------------------------------------------

/// What a copy of Debian's hipcc 5.2.3 installation holds, below `/usr`: the driver, clang and
/// lld with the libraries they load, clang's resource headers, the device libraries and the
/// HIP headers, laid out as under `/usr` (symbolic links kept, relative as they are there).
const INSTALLATION: &[&str] = &[
    "bin/hipcc",
    "bin/hipcc.pl",
    "bin/hipcc_cmake_linker_helper",
    "bin/hipconfig",
    "bin/hipconfig.pl",
    "bin/hipvars.pm",
    "bin/rocm_agent_enumerator",
    "bin/clang++-15",
    "lib/llvm-15/bin/clang",
    "lib/llvm-15/bin/clang++",
    "lib/llvm-15/bin/clang-15",
    "lib/llvm-15/bin/lld",
    "lib/llvm-15/bin/ld.lld",
    "lib/llvm-15/lib/clang/15.0.6/include",
    "lib/llvm-15/lib/libclang-cpp.so.15",
    "lib/clang/15.0.6",
    "lib/x86_64-linux-gnu/libLLVM-15.so",
    "lib/x86_64-linux-gnu/libLLVM-15.so.1",
    "lib/x86_64-linux-gnu/libclang-cpp.so.15",
    "lib/x86_64-linux-gnu/amdgcn/bitcode",
    "include/hip",
    "include/hsa",
];

/// Copies `src` to `dst`: a symbolic link as the same link, a directory entry by entry, a file
/// as a copy (`std::fs::copy`, which the kernel may do by reference where the filesystem can).
/// Never a hard link: making or removing one changes the original's inode (its link count and
/// ctime), and a changed ctime of a compiler file on the machine makes every remembered
/// compiler identity of other processes, tests run at the same time among them, recompute.
fn mirror(src: &Path, dst: &Path) {
    let meta = std::fs::symlink_metadata(src).unwrap_or_else(|e| {
        panic!(
            "{}: {e} (Debian's hipcc 5.2.3 is installed by scripts/setup.sh)",
            src.display()
        )
    });
    std::fs::create_dir_all(dst.parent().unwrap()).unwrap();
    if meta.file_type().is_symlink() {
        std::os::unix::fs::symlink(std::fs::read_link(src).unwrap(), dst).unwrap();
    } else if meta.is_dir() {
        std::fs::create_dir_all(dst).unwrap();
        for e in std::fs::read_dir(src).unwrap() {
            let e = e.unwrap();
            mirror(&e.path(), &dst.join(e.file_name()));
        }
    } else {
        std::fs::copy(src, dst).unwrap();
    }
}

/// A copy of Debian's HIP installation under `prefix`; its `bin/hipcc`.
fn copy_installation(prefix: &Path) -> PathBuf {
    for rel in INSTALLATION {
        mirror(&Path::new("/usr").join(rel), &prefix.join(rel));
    }
    // clang searches its resource directory's parent too (`.../15.0.6/include/..` in its
    // search list), whose listing the header manifest records: the copy lists the same names
    // there, its other entries (runtime libraries, 43 MB) as links to the originals.
    let resource = Path::new("/usr/lib/llvm-15/lib/clang/15.0.6");
    for e in std::fs::read_dir(resource).unwrap() {
        let e = e.unwrap();
        let dst = prefix
            .join("lib/llvm-15/lib/clang/15.0.6")
            .join(e.file_name());
        if !dst.exists() {
            std::os::unix::fs::symlink(e.path(), dst).unwrap();
        }
    }
    prefix.join("bin/hipcc")
}

/// The link count and ctime (seconds, nanoseconds) of every file below `path`, links not
/// followed.
fn inodes(path: &Path) -> Vec<(PathBuf, u64, i64, i64)> {
    use std::os::unix::fs::MetadataExt;
    let meta = std::fs::symlink_metadata(path).unwrap();
    if meta.is_dir() {
        let mut all = Vec::new();
        for e in std::fs::read_dir(path).unwrap() {
            all.extend(inodes(&e.unwrap().path()));
        }
        all
    } else {
        vec![(
            path.to_path_buf(),
            meta.nlink(),
            meta.ctime(),
            meta.ctime_nsec(),
        )]
    }
}

/// Making a copy of the installation and removing it leaves the original files' inodes as they
/// were: a hard link would change their link count and ctime, and with them every compiler
/// identity remembered on the machine (tests run at the same time among them).
#[test]
fn copying_the_installation_leaves_the_original_files_untouched() {
    let originals = || -> Vec<_> {
        INSTALLATION
            .iter()
            .flat_map(|rel| inodes(&Path::new("/usr").join(rel)))
            .collect()
    };
    let before = originals();
    let dir = tempfile::tempdir().unwrap();
    copy_installation(&dir.path().join("rocm"));
    assert_eq!(originals(), before, "making the copy changed an original");
    drop(dir);
    assert_eq!(originals(), before, "removing the copy changed an original");
}

/// Replaces `file` (in a copy) by a new file (a new inode) with a comment appended.
fn change(file: &Path) {
    let mut text = std::fs::read(file).unwrap();
    text.extend_from_slice(b"\n/* changed in this copy */\n");
    std::fs::remove_file(file).unwrap();
    std::fs::write(file, text).unwrap();
}

const HIP_SOURCE: &str = "#include <hip/hip_runtime.h>\n#include \"scale.h\"\n\
    extern \"C\" __global__ void scale(float* x) { x[threadIdx.x] = twice(x[threadIdx.x]); }\n";

fn environment(identity: &Path, vars: &[(&str, &Path)]) -> Vec<(String, std::ffi::OsString)> {
    let mut env: Vec<(String, std::ffi::OsString)> = vec![
        ("HOME".into(), identity.as_os_str().to_owned()),
        ("PATH".into(), "/usr/bin:/bin".into()),
    ];
    env.extend(
        vars.iter()
            .map(|(k, v)| (k.to_string(), v.as_os_str().to_owned())),
    );
    env
}

/// The installation root of the identity of `hipcc` run with `vars`.
fn installation_root(hipcc: &Path, identity: &Path, vars: &[(&str, &Path)]) -> PathBuf {
    hipjit::compiler::identity::identify(
        hipjit::compiler::CompilerKind::Hipcc,
        hipcc,
        &environment(identity, vars),
        std::time::Duration::from_secs(60),
        Some(identity),
    )
    .unwrap()
    .root
}

/// A `Jit` running `hipcc` with `HOME`, `PATH` and `vars` as its whole environment, its
/// identity remembered in `identity`.
fn real_jit(root: &Path, hipcc: &Path, identity: &Path, vars: &[(&str, &Path)]) -> Jit {
    let env = environment(identity, vars);
    Jit::new(JitOptions {
        compiler: Some(hipjit::compiler::selection::CompilerChoice::Hipcc),
        compiler_config: CompilerConfig {
            hipcc: Some(hipcc.to_path_buf()),
            env: Some(env),
            identity_dir: Some(identity.to_path_buf()),
            ..CompilerConfig::default()
        },
        cache: CacheLocation::Roots(vec![root.to_path_buf()]),
        remote_cache: RemoteLocation::Disabled,
        ..JitOptions::default()
    })
    .unwrap_or_else(|e| panic!("{e} (Debian's hipcc is installed by scripts/setup.sh)"))
}

#[test]
fn a_copy_of_the_real_installation_hits_for_hip_runtime_h_and_a_changed_header_misses() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("cache");
    let identity = dir.path().join("identity");
    let include = project(&dir.path().join("p"));
    let first = real_jit(&root, Path::new("/usr/bin/hipcc"), &identity, &[])
        .compile(HIP_SOURCE, &options(&include))
        .unwrap();
    assert_eq!(first.origin(), Origin::Compiler);

    let hipcc = copy_installation(&dir.path().join("elsewhere/rocm"));
    let copy = real_jit(&root, &hipcc, &identity, &[]);
    let hit = copy.compile(HIP_SOURCE, &options(&include)).unwrap();
    assert_eq!(
        installation_root(&hipcc, &identity, &[]),
        dir.path().join("elsewhere/rocm"),
        "the copy's own installation was not the one identified"
    );
    assert_eq!(hit.origin(), Origin::Disk, "the copied installation missed");
    assert_eq!(hit.key(), first.key());

    // One HIP header of the copy differs: a miss, whatever the stat cache remembers.
    change(&dir.path().join("elsewhere/rocm/include/hip/hip_version.h"));
    let changed = real_jit(&root, &hipcc, &identity, &[])
        .compile(HIP_SOURCE, &options(&include))
        .unwrap();
    assert_eq!(changed.origin(), Origin::Compiler, "a changed header hit");
    assert_ne!(changed.key(), first.key());
    // The original gets its own entry back. Its first lookup may compile again, to the same
    // key: the manifest the copy wrote names the copy's search directories, and Debian's
    // hipcc, whose installation is `/usr`, searches `/usr/include` both as the system's and
    // as HIP's, which the copy names apart (its own `include` below its root). The next
    // lookup hits.
    let again = real_jit(&root, Path::new("/usr/bin/hipcc"), &identity, &[])
        .compile(HIP_SOURCE, &options(&include))
        .unwrap();
    assert_eq!(again.key(), first.key());
    let hit = real_jit(&root, Path::new("/usr/bin/hipcc"), &identity, &[])
        .compile(HIP_SOURCE, &options(&include))
        .unwrap();
    assert_eq!(hit.origin(), Origin::Disk);
    assert_eq!(hit.key(), first.key());
}

#[test]
fn hip_path_is_keyed_by_the_installation_it_selects() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("cache");
    let identity = dir.path().join("identity");
    let include = project(&dir.path().join("p"));
    let hipcc = Path::new("/usr/bin/hipcc");
    let (a, b, c) = (
        dir.path().join("node-a/rocm"),
        dir.path().join("node-b/opt/rocm-5.2.3"),
        dir.path().join("node-c/rocm"),
    );
    for p in [&a, &b, &c] {
        copy_installation(p);
    }
    change(&c.join("include/hip/hip_version.h"));

    let first = real_jit(&root, hipcc, &identity, &[("HIP_PATH", &a)])
        .compile(HIP_SOURCE, &options(&include))
        .unwrap();
    assert_eq!(first.origin(), Origin::Compiler);
    // hipcc 5.2.3 honours HIP_PATH: the installation identified is the copy it names.
    assert_eq!(installation_root(hipcc, &identity, &[("HIP_PATH", &a)]), a);

    let same = real_jit(&root, hipcc, &identity, &[("HIP_PATH", &b)])
        .compile(HIP_SOURCE, &options(&include))
        .unwrap();
    assert_eq!(
        same.origin(),
        Origin::Disk,
        "HIP_PATH at an equal copy missed"
    );
    assert_eq!(same.key(), first.key());

    let other = real_jit(&root, hipcc, &identity, &[("HIP_PATH", &c)])
        .compile(HIP_SOURCE, &options(&include))
        .unwrap();
    assert_eq!(
        other.origin(),
        Origin::Compiler,
        "a copy with a changed header hit"
    );
    assert_ne!(other.key(), first.key());
}
