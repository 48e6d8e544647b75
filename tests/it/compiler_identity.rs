//! What a cache hit trusts about the compiler, and what makes it miss.
//!
//! The remembered compiler identity ([`hipjit::compiler::identity`]): a fresh process takes it
//! from the per-user file after one `stat` per program and per directory holding one, and any
//! change to the programs (one rewritten in place, replaced by a rename, added or removed)
//! recomputes it: the fingerprint, hence every cache key, changes. A fake CUDA toolkit (an
//! `nvcc` shell script that counts its runs, a `ptxas`, a `cicc`, a few headers) stands in
//! for a real one, so that the test may change its files.
//!
//! The toolkit's headers are not in the identity but in each compile's header manifest: with
//! the real nvcc of PyPI's nvidia-cuda-nvcc, run from a mirror of its toolkit (nvcc copied,
//! the rest symbolic links, so the original is never touched), a header the compile read,
//! swapped by a rename or rewritten in place, makes the next lookup of a fresh `Jit` a miss.

use crate::common;

use std::path::{Path, PathBuf};
use std::time::Duration;

use common::toolchain::pypi_toolkit;

use hipjit::compiler::nvcc::Nvcc;
use hipjit::compiler::selection::CompilerChoice;
use hipjit::compiler::{CompileOptions, CompilerConfig};
use hipjit::cuda::target::SmTarget;
use hipjit::jit::{CacheLocation, Jit, JitOptions, Origin};

struct Toolkit {
    root: tempfile::TempDir,
    calls: PathBuf,
}

impl Toolkit {
    fn new() -> Toolkit {
        use std::os::unix::fs::PermissionsExt;
        let root = tempfile::tempdir().unwrap();
        let calls = root.path().join("calls");
        let r = root.path();
        for d in ["bin", "nvvm/bin", "include/crt"] {
            std::fs::create_dir_all(r.join(d)).unwrap();
        }
        let nvcc = r.join("bin/nvcc");
        std::fs::write(
            &nvcc,
            format!(
                "#!/bin/sh\necho run >> '{}'\necho 'Cuda compilation tools, release 13.5, V13.5.37'\n",
                calls.display()
            ),
        )
        .unwrap();
        std::fs::set_permissions(&nvcc, std::fs::Permissions::from_mode(0o755)).unwrap();
        std::fs::write(r.join("bin/ptxas"), "ptxas 1").unwrap();
        std::fs::write(r.join("nvvm/bin/cicc"), "cicc 1").unwrap();
        std::fs::write(
            r.join("include/cuda_runtime.h"),
            "#include \"crt/host_config.h\"\n",
        )
        .unwrap();
        std::fs::write(r.join("include/crt/host_config.h"), "#define V 1\n").unwrap();
        Toolkit { root, calls }
    }

    fn path(&self, rel: &str) -> PathBuf {
        self.root.path().join(rel)
    }

    fn runs(&self) -> usize {
        std::fs::read_to_string(&self.calls)
            .map(|s| s.lines().count())
            .unwrap_or(0)
    }

    /// The identity through the remembered file in `dir`: (fingerprint, whether nvcc ran).
    fn identify(&self, dir: &Path) -> (String, bool) {
        let before = self.runs();
        let n = Nvcc::discover_cached(Some(&self.path("bin/nvcc")), dir)
            .unwrap_or_else(|e| panic!("{e}"));
        (n.identity().fingerprint, self.runs() > before)
    }
}

/// Past the filesystem's timestamp granularity, so that a rewrite changes mtime and ctime.
fn settle() {
    std::thread::sleep(Duration::from_millis(20));
}

/// A remembered identity, then `change` to the toolkit: the next identity must run nvcc again
/// and have another fingerprint.
fn recomputed_after(change: impl FnOnce(&Toolkit)) {
    let t = Toolkit::new();
    let dir = tempfile::tempdir().unwrap();
    let (first, ran) = t.identify(dir.path());
    assert!(ran, "the first identity runs nvcc --version");
    let (again, ran) = t.identify(dir.path());
    assert!(
        !ran,
        "an unchanged toolkit is taken from the remembered file"
    );
    assert_eq!(again, first);
    settle();
    change(&t);
    let (after, ran) = t.identify(dir.path());
    assert!(
        ran,
        "the change was not seen: the remembered identity was served"
    );
    assert_ne!(after, first, "the fingerprint must change with the toolkit");
}

#[test]
fn a_toolkit_program_rewritten_in_place_recomputes_the_identity() {
    recomputed_after(|t| {
        // Same size, same inode: only its times and content change.
        use std::io::Write;
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .open(t.path("nvvm/bin/cicc"))
            .unwrap();
        f.write_all(b"cicc 2").unwrap();
    });
}

#[test]
fn a_toolkit_program_swapped_by_a_rename_recomputes_the_identity() {
    recomputed_after(|t| {
        // How package managers and installers replace a file: a new one renamed over it.
        let tmp = t.path("bin/.ptxas.new");
        std::fs::write(&tmp, "ptxas 2").unwrap();
        std::fs::rename(&tmp, t.path("bin/ptxas")).unwrap();
    });
}

#[test]
fn a_program_added_beside_nvcc_recomputes_the_identity() {
    recomputed_after(|t| {
        std::fs::write(t.path("nvvm/bin/nvvm-new"), "new").unwrap();
    });
}

#[test]
fn a_toolkit_program_removed_recomputes_the_identity() {
    recomputed_after(|t| {
        std::fs::remove_file(t.path("bin/ptxas")).unwrap();
    });
}

/// Headers are the manifest's business: a swapped header leaves the identity as it was (and
/// the next test shows the lookup missing).
#[test]
fn a_toolkit_header_change_leaves_the_identity_to_the_manifest() {
    let t = Toolkit::new();
    let dir = tempfile::tempdir().unwrap();
    let (first, _) = t.identify(dir.path());
    settle();
    let tmp = t.path("include/crt/.host_config.h.new");
    std::fs::write(&tmp, "#define V 2\n").unwrap();
    std::fs::rename(&tmp, t.path("include/crt/host_config.h")).unwrap();
    let (after, ran) = t.identify(dir.path());
    assert!(!ran, "a header is not part of the identity");
    assert_eq!(after, first);
}

// ---------------------------------------------------------------------------------------------
// The real nvcc, from a hard-linked copy of its toolkit.

/// A stand-in for the PyPI toolkit that leaves the original untouched (no hard link, whose
/// creation and removal would change the original files' ctimes under other tests' feet):
/// `bin/nvcc` and `bin/nvcc.profile` copied (nvcc finds the toolkit from its own directory),
/// the other programs and `nvvm`, `lib`, `cccl` as symbolic links, and `include` a tree of
/// directories whose files are symbolic links to the original headers, each of which a test
/// may replace by a file of its own.
fn mirrored_toolkit() -> tempfile::TempDir {
    use std::os::unix::fs::symlink;
    fn mirror(from: &Path, to: &Path) {
        std::fs::create_dir_all(to).unwrap();
        for e in std::fs::read_dir(from).unwrap().flatten() {
            let (src, dst) = (e.path(), to.join(e.file_name()));
            if e.file_type().unwrap().is_dir() {
                mirror(&src, &dst);
            } else {
                symlink(&src, &dst).unwrap();
            }
        }
    }
    let src = pypi_toolkit();
    let copy = tempfile::Builder::new()
        .prefix("hipjit-test-toolkit-")
        .tempdir()
        .unwrap();
    let dst = copy.path();
    std::fs::create_dir(dst.join("bin")).unwrap();
    for e in std::fs::read_dir(src.join("bin")).unwrap().flatten() {
        let to = dst.join("bin").join(e.file_name());
        if e.file_name() == "nvcc" || e.file_name() == "nvcc.profile" {
            std::fs::copy(e.path(), &to).unwrap();
        } else {
            symlink(e.path(), &to).unwrap();
        }
    }
    for d in ["nvvm", "lib", "cccl"] {
        if src.join(d).exists() {
            symlink(src.join(d), dst.join(d)).unwrap();
        }
    }
    mirror(&src.join("include"), &dst.join("include"));
    copy
}

const SOURCE: &str = r#"
#include <hip/hip_runtime.h>
extern "C" __global__ void twice(float* x, unsigned n) {
    unsigned i = hipBlockIdx_x * hipBlockDim_x + hipThreadIdx_x;
    if (i < n) x[i] *= 2.0f;
}
"#;

/// A fresh `Jit` over the toolkit copy's nvcc (as a new process would make), its cache in
/// `cache` and its identity in `ids`; compiles SOURCE for sm_90 and says where it came from.
fn origin(toolkit: &Path, cache: &Path, ids: &Path) -> Origin {
    let jit = Jit::new(JitOptions {
        compiler_config: CompilerConfig {
            nvcc: Some(toolkit.join("bin/nvcc")),
            identity_dir: Some(ids.to_path_buf()),
            ..CompilerConfig::default()
        },
        cache: CacheLocation::Roots(vec![cache.to_path_buf()]),
        // nvcc itself, not NVRTC (which reads the headers of its own library's toolkit).
        compiler: Some(CompilerChoice::Nvcc),
        ..JitOptions::default()
    })
    .unwrap_or_else(|e| panic!("{e}"));
    let compiled = jit
        .compile(SOURCE, &CompileOptions::for_sm(SmTarget::new(90)))
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(compiled.compiler().kind.as_str(), "nvcc");
    compiled.origin()
}

/// Compiles, checks an unchanged toolkit hits, applies `change` to the copy (given its root),
/// and checks the next lookup misses.
fn missed_after(change: impl FnOnce(&Path)) {
    let toolkit = mirrored_toolkit();
    let cache = tempfile::tempdir().unwrap();
    let ids = tempfile::tempdir().unwrap();
    assert_eq!(
        origin(toolkit.path(), cache.path(), ids.path()),
        Origin::Compiler
    );
    assert_eq!(
        origin(toolkit.path(), cache.path(), ids.path()),
        Origin::Disk
    );
    settle();
    change(toolkit.path());
    assert_eq!(
        origin(toolkit.path(), cache.path(), ids.path()),
        Origin::Compiler,
        "a changed toolkit header was served from the cache"
    );
}

/// `crt/host_config.h` is read by every nvcc compile (through the `cuda_runtime.h` nvcc
/// includes first).
const HEADER: &str = "include/crt/host_config.h";

#[test]
fn a_toolkit_header_swapped_by_a_rename_is_a_miss() {
    missed_after(|root| {
        let header = root.join(HEADER);
        let mut text = std::fs::read(&header).unwrap();
        text.extend_from_slice(b"\n/* swapped */\n");
        let tmp = root.join("include/crt/.host_config.h.new");
        std::fs::write(&tmp, text).unwrap();
        std::fs::rename(&tmp, &header).unwrap();
    });
}

#[test]
fn a_toolkit_header_rewritten_in_place_is_a_miss() {
    let toolkit = mirrored_toolkit();
    // The header a file of this copy's own (not a link to the original), so that rewriting
    // it in place leaves the original toolkit alone; then the cache starts from that state.
    let header = toolkit.path().join(HEADER);
    let text = std::fs::read(&header).unwrap();
    std::fs::remove_file(&header).unwrap();
    std::fs::write(&header, &text).unwrap();
    settle();
    let cache = tempfile::tempdir().unwrap();
    let ids = tempfile::tempdir().unwrap();
    assert_eq!(
        origin(toolkit.path(), cache.path(), ids.path()),
        Origin::Compiler
    );
    assert_eq!(
        origin(toolkit.path(), cache.path(), ids.path()),
        Origin::Disk
    );
    settle();
    let ino = std::os::unix::fs::MetadataExt::ino(&std::fs::metadata(&header).unwrap());
    let mut changed = text.clone();
    changed.extend_from_slice(b"\n/* rewritten */\n");
    std::fs::write(&header, changed).unwrap();
    assert_eq!(
        std::os::unix::fs::MetadataExt::ino(&std::fs::metadata(&header).unwrap()),
        ino,
        "rewritten in place"
    );
    assert_eq!(
        origin(toolkit.path(), cache.path(), ids.path()),
        Origin::Compiler,
        "a toolkit header rewritten in place was served from the cache"
    );
}

/// The result key and origin of SOURCE compiled by the nvcc of `toolkit` into `cache`.
fn compiled(toolkit: &Path, cache: &Path, ids: &Path) -> (hipjit::cache::CacheKey, Origin) {
    let jit = Jit::new(JitOptions {
        compiler_config: CompilerConfig {
            nvcc: Some(toolkit.join("bin/nvcc")),
            identity_dir: Some(ids.to_path_buf()),
            ..CompilerConfig::default()
        },
        cache: CacheLocation::Roots(vec![cache.to_path_buf()]),
        compiler: Some(CompilerChoice::Nvcc),
        ..JitOptions::default()
    })
    .unwrap_or_else(|e| panic!("{e}"));
    let c = jit
        .compile(SOURCE, &CompileOptions::for_sm(SmTarget::new(90)))
        .unwrap_or_else(|e| panic!("{e}"));
    (c.key(), c.origin())
}

#[test]
fn a_toolkit_copy_under_another_prefix_hits_and_one_with_a_changed_header_misses() {
    // Two copies of the PyPI toolkit (nvcc and its profile real files, the rest links), as two
    // nodes would have it under different prefixes.
    let (a, b) = (mirrored_toolkit(), mirrored_toolkit());
    let cache = tempfile::tempdir().unwrap();
    let ids = tempfile::tempdir().unwrap();
    let (first, origin) = compiled(a.path(), cache.path(), ids.path());
    assert_eq!(origin, Origin::Compiler);
    let (key, origin) = compiled(b.path(), cache.path(), ids.path());
    assert_eq!(
        origin,
        Origin::Disk,
        "the toolkit under another prefix missed"
    );
    assert_eq!(key, first);

    // One toolkit header of the second copy differs (a real file in place of the link).
    let header = b.path().join(HEADER);
    let mut text = std::fs::read(&header).unwrap();
    text.extend_from_slice(b"\n/* this copy's own */\n");
    std::fs::remove_file(&header).unwrap();
    std::fs::write(&header, text).unwrap();
    let (key, origin) = compiled(b.path(), cache.path(), ids.path());
    assert_eq!(origin, Origin::Compiler, "a changed toolkit header hit");
    assert_ne!(key, first);
}

/// A hipjit killed (SIGKILL) while it probes a compiler's identity left its private probe
/// directory (`hipjit-id-<pid>-...`, hipcc's working directory) in TMPDIR, and nothing removed
/// it. The next hipjit removes what a process that no longer runs left there. The stand-in
/// hipcc of tests/common/installation.rs sleeps in its include-path probe while `hold` exists.
#[cfg(feature = "cli")]
#[test]
fn a_probe_directory_left_by_a_killed_hipjit_is_swept_by_the_next_one() {
    use common::installation::{installation, Compile};
    let dir = tempfile::tempdir().unwrap();
    let hipcc = installation(&dir.path().join("rocm"), "5.2.3", Compile::CopyCodeObject);
    let (hold, probing) = (dir.path().join("hold"), dir.path().join("probing"));
    let script = std::fs::read_to_string(&hipcc).unwrap().replace(
        "-fsyntax-only) exit 0;;",
        &format!(
            "-fsyntax-only) if [ -e '{}' ]; then echo $$ > '{}'; exec sleep 60; fi; exit 0;;",
            hold.display(),
            probing.display()
        ),
    );
    std::fs::write(&hipcc, script).unwrap();
    std::fs::write(&hold, "").unwrap();
    let (tmp, home) = (dir.path().join("tmp"), dir.path().join("home"));
    std::fs::create_dir(&tmp).unwrap();
    std::fs::create_dir(&home).unwrap();
    let source = dir.path().join("k.hip");
    std::fs::write(
        &source,
        "extern \"C\" __global__ void k(int* x) { x[0] = 1; }\n",
    )
    .unwrap();
    let compile = || {
        let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_hipjit"));
        cmd.args(["compile", "--compiler", "hipcc", "--arch", "gfx90a", "-o"])
            .arg(dir.path().join("k.hsaco"))
            .arg(&source)
            .env("HIPJIT_HIPCC", &hipcc)
            .env("TMPDIR", &tmp)
            .env("HOME", &home)
            .env("XDG_CACHE_HOME", home.join("xdg"))
            .env("HIPJIT_CACHE_DIR", home.join("cache"))
            .env_remove("HIPJIT_COMPILER")
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null());
        cmd
    };
    let mut child = compile().spawn().unwrap();
    let started = std::time::Instant::now();
    // The stand-in's shell creates the file before `echo` writes the PID into it: wait for the
    // whole line, or the read below can find it empty.
    while !std::fs::read_to_string(&probing).is_ok_and(|s| s.ends_with('\n')) {
        assert!(
            child.try_wait().unwrap().is_none(),
            "hipjit ended before the probe"
        );
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "no probe within 60 s"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    child.kill().unwrap();
    child.wait().unwrap();
    let sleeper: i32 = std::fs::read_to_string(&probing)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    // SAFETY: kill(2) of the stand-in's sleep, which this test's child started.
    unsafe { libc::kill(sleeper, libc::SIGKILL) };
    let probe_dirs = |d: &Path| {
        fn walk(d: &Path, out: &mut Vec<PathBuf>) {
            for e in std::fs::read_dir(d).into_iter().flatten().flatten() {
                if e.file_name().to_string_lossy().starts_with("hipjit-id-") {
                    out.push(e.path());
                }
                if e.file_type().is_ok_and(|t| t.is_dir()) {
                    walk(&e.path(), out);
                }
            }
        }
        let mut out = Vec::new();
        walk(d, &mut out);
        out
    };
    let left = probe_dirs(&tmp);
    assert!(!left.is_empty(), "the killed probe left nothing to sweep");

    std::fs::remove_file(&hold).unwrap();
    let o = compile().output().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(probe_dirs(&tmp), Vec::<PathBuf>::new(), "was {left:?}");
    let after: Vec<_> = std::fs::read_dir(&tmp)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .collect();
    assert!(after.is_empty(), "left in TMPDIR: {after:?}");
}
