//! The remembered compiler identity ([`hipjit::compiler::identity`]): a fresh process takes it
//! from the per-user file after one `stat` per program and per directory, and any change that
//! could change the compiler's output (a program rewritten in place, a toolkit file replaced by
//! a rename, a file added or removed) makes it recompute: the fingerprint, hence every cache
//! key, changes, and nothing compiled before is served. A fake CUDA toolkit (an `nvcc` shell
//! script that counts its runs, a `ptxas`, a `cicc`, a few headers) stands in for a real one,
//! so that the test may change its files.

use std::path::{Path, PathBuf};
use std::time::Duration;

use hipjit::compiler::nvcc::Nvcc;

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
fn a_toolkit_header_swapped_by_a_rename_recomputes_the_identity() {
    recomputed_after(|t| {
        // How package managers and editors replace a file: a new one renamed over it.
        let tmp = t.path("include/crt/.host_config.h.new");
        std::fs::write(&tmp, "#define V 2\n").unwrap();
        std::fs::rename(&tmp, t.path("include/crt/host_config.h")).unwrap();
    });
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
fn a_file_added_beside_the_toolkit_headers_recomputes_the_identity() {
    recomputed_after(|t| {
        std::fs::write(t.path("include/crt/new_header.h"), "#define W 1\n").unwrap();
    });
}

#[test]
fn a_toolkit_header_removed_recomputes_the_identity() {
    recomputed_after(|t| {
        std::fs::remove_file(t.path("include/crt/host_config.h")).unwrap();
    });
}
