//! A disk-cache hit of the `hipjit compile` command never loads an in-process compiler's
//! library (NVRTC, hipRTC), whichever compiler is asked for or Auto picks: where the library
//! is, its version and its identity are remembered per user and checked by `stat`. Observed
//! from outside through the dynamic loader's own report (`LD_DEBUG=files`, which names every
//! object loaded, by dlopen too), against the real libraries: PyPI's NVRTC 13, Debian's
//! HIP 5.2.3 (hipRTC inside `libamdhip64.so.5`) and the sid root's hipRTC 6.4.3
//! (`libhiprtc.so.6`, through scripts/sid-run.sh). A library rewritten or renamed over is
//! noticed: the next run loads it again and recomputes its identity.

use crate::common;

use std::path::Path;
use std::process::{Command, Output};

use common::toolchain::{pypi_nvcc, saxpy as kernel, utf8 as s};

/// One run of `hipjit compile` and what the dynamic loader loaded during it.
struct Run {
    stdout: String,
    /// The objects the dynamic loader reports loading (`file=NAME [0];  ...` lines).
    loaded: Vec<String>,
}

impl Run {
    fn of(o: Output, what: &str) -> Run {
        let stderr = String::from_utf8_lossy(&o.stderr).into_owned();
        assert_eq!(o.status.code(), Some(0), "{what}\n{stderr}");
        Run::of_text(String::from_utf8_lossy(&o.stdout).into_owned(), &stderr)
    }

    /// The run whose standard output was `stdout` and standard error `stderr`.
    fn of_text(stdout: String, stderr: &str) -> Run {
        let loaded = stderr
            .lines()
            .filter_map(|l| {
                let rest = &l[l.find("file=")? + 5..];
                Some(rest.split_whitespace().next()?.to_owned())
            })
            .collect();
        Run { stdout, loaded }
    }

    fn loads(&self, library: &str) -> bool {
        self.loaded.iter().any(|l| l.contains(library))
    }

    fn is(&self, outcome: &str) -> bool {
        self.stdout.contains(outcome)
    }
}

/// `hipjit compile --arch ARCH [--compiler COMPILER] -o HOME/out.bin saxpy.hip` with its cache
/// root and identity directory under `home`, `env` added, and the dynamic loader reporting
/// what it loads.
fn compile(home: &Path, arch: &str, compiler: Option<&str>, env: &[(&str, &Path)]) -> Run {
    let out = home.join("out.bin");
    let src = kernel();
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_hipjit"));
    cmd.args(["compile", "--arch", arch]);
    if let Some(c) = compiler {
        cmd.args(["--compiler", c]);
    }
    cmd.args(["-o", s(&out), s(&src)])
        .env("HIPJIT_CACHE_DIR", home.join("cache"))
        .env("XDG_CACHE_HOME", home.join("xdg"))
        .env("LD_DEBUG", "files")
        .env_remove("HIPJIT_HIPCC")
        .env_remove("HIPJIT_NVCC")
        .env_remove("HIPJIT_COMPILER")
        .env_remove("HIPJIT_HIPRTC_LIBRARY")
        .env_remove("HIPJIT_NVRTC_LIBRARY");
    for (k, v) in env {
        cmd.env(k, v);
    }
    Run::of(cmd.output().expect("hipjit runs"), &format!("{cmd:?}"))
}

/// A miss that loads `library` (so that its absence on the hit means something), then a
/// disk hit that does not.
fn miss_then_hit_without(
    home: &Path,
    arch: &str,
    compiler: Option<&str>,
    env: &[(&str, &Path)],
    library: &str,
) {
    let miss = compile(home, arch, compiler, env);
    assert!(miss.is("miss"), "{}", miss.stdout);
    assert!(
        miss.loads(library),
        "the miss loads {library}: {:?}",
        miss.loaded
    );
    let hit = compile(home, arch, compiler, env);
    assert!(hit.is("hit (disk)"), "{}", hit.stdout);
    assert!(
        !hit.loads(library),
        "a disk hit loads no {library}: {:?}",
        hit.loaded
    );
}

#[test]
fn an_nvrtc_disk_hit_does_not_load_nvrtc() {
    let home = tempfile::tempdir().unwrap();
    let nvcc = pypi_nvcc();
    miss_then_hit_without(
        home.path(),
        "sm_90",
        Some("nvrtc"),
        &[("HIPJIT_NVCC", &nvcc)],
        "libnvrtc",
    );
}

#[test]
fn an_auto_disk_hit_on_sm_90_does_not_load_nvrtc() {
    let home = tempfile::tempdir().unwrap();
    let nvcc = pypi_nvcc();
    miss_then_hit_without(
        home.path(),
        "sm_90",
        None,
        &[("HIPJIT_NVCC", &nvcc)],
        "libnvrtc",
    );
}

#[test]
fn a_hiprtc_5_disk_hit_does_not_load_the_hip_runtime_holding_it() {
    let home = tempfile::tempdir().unwrap();
    miss_then_hit_without(home.path(), "gfx90a", Some("hiprtc"), &[], "libamdhip64");
}

/// Auto on gfx90a with HIP 5.2.3 takes hipcc, after asking hipRTC's version: the miss loads
/// hipRTC's library to ask it, the hit takes the remembered answer.
#[test]
fn an_auto_disk_hit_on_gfx90a_loads_no_hiprtc() {
    let home = tempfile::tempdir().unwrap();
    miss_then_hit_without(home.path(), "gfx90a", None, &[], "libamdhip64");
}

/// A copy of Debian's `libamdhip64.so.5` named by `HIPJIT_HIPRTC_LIBRARY`: rewritten in place
/// (one byte appended: a new identity), then replaced by a rename, each change is noticed by
/// the next run, which loads the library again; unchanged, it is not loaded.
#[test]
fn a_hiprtc_library_rewritten_or_renamed_over_is_loaded_again_and_reidentified() {
    let home = tempfile::tempdir().unwrap();
    let system = std::fs::canonicalize("/usr/lib/x86_64-linux-gnu/libamdhip64.so.5")
        .expect("Debian's libamdhip64.so.5 (scripts/setup.sh)");
    let dir = home.path().join("lib");
    std::fs::create_dir(&dir).unwrap();
    let lib = dir.join("libamdhip64.so.5");
    std::fs::copy(&system, &lib).unwrap();
    let env = [("HIPJIT_HIPRTC_LIBRARY", lib.as_path())];
    let name = s(&lib);
    let run = || compile(home.path(), "gfx90a", Some("hiprtc"), &env);

    let first = run();
    assert!(first.is("miss") && first.loads(name), "{}", first.stdout);
    let hit = run();
    assert!(hit.is("hit (disk)") && !hit.loads(name), "{:?}", hit.loaded);

    // Rewritten in place: same inode, new size and times, new content.
    {
        use std::io::Write;
        let mut f = std::fs::OpenOptions::new().append(true).open(&lib).unwrap();
        f.write_all(b"\0").unwrap();
    }
    let rewritten = run();
    assert!(rewritten.loads(name), "{:?}", rewritten.loaded);
    assert!(
        rewritten.is("miss"),
        "a library with other content is another compiler: {}",
        rewritten.stdout
    );
    let hit = run();
    assert!(hit.is("hit (disk)") && !hit.loads(name), "{:?}", hit.loaded);

    // Renamed over by a copy of the first content: a new inode.
    let fresh = dir.join(".new");
    std::fs::copy(&system, &fresh).unwrap();
    std::fs::rename(&fresh, &lib).unwrap();
    let renamed = run();
    assert!(renamed.loads(name), "{:?}", renamed.loaded);
    assert!(
        renamed.is("hit (disk)"),
        "the first content again, the first entry: {}",
        renamed.stdout
    );
    let hit = run();
    assert!(!hit.loads(name), "{:?}", hit.loaded);
}

/// hipRTC 6.4.3 (`libhiprtc.so.6`) in the Debian sid root, through scripts/sid-run.sh (needs
/// root and the root filesystem of scripts/setup.sh). Each sid-run mounts the root afresh:
/// new mounts, whose files' `stat`s prove nothing of what was recorded on the last ones
/// (hipjit::file_stat: an image mounted again may be another image with the same `stat`s), so
/// the first run in a new mount namespace loads the library again to identify it (a disk hit
/// still); the next run in the same namespace is a hit that loads nothing.
#[test]
fn a_hiprtc_6_disk_hit_in_the_sid_root_does_not_load_libhiprtc() {
    // Inside the repository's target directory, which sid-run binds (it mounts its own /tmp).
    let home = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let (first_out, first_err) = (home.path().join("first.out"), home.path().join("first.err"));
    // `twice`: hipjit run twice in one namespace, the first run's output in first.out and
    // first.err.
    let run = |twice: bool| {
        let out = home.path().join("out.bin");
        let twice_script = format!(
            "\"$@\" >'{}' 2>'{}'; exec \"$@\"",
            first_out.display(),
            first_err.display()
        );
        let twice: &[&str] = if twice {
            &["/bin/sh", "-c", &twice_script, "sh"]
        } else {
            &[]
        };
        let o = common::toolchain::sid_run()
            .arg("-e")
            .arg(format!(
                "HIPJIT_CACHE_DIR={}",
                home.path().join("cache").display()
            ))
            .arg("-e")
            .arg(format!(
                "XDG_CACHE_HOME={}",
                home.path().join("xdg").display()
            ))
            .args(["-e", "LD_DEBUG=files", "--"])
            .args(twice)
            .arg(env!("CARGO_BIN_EXE_hipjit"))
            .args(["compile", "--compiler", "hiprtc", "--arch", "gfx90a", "-o"])
            .arg(&out)
            .arg(kernel())
            .output()
            .expect("scripts/sid-run.sh runs");
        Run::of(o, "hipjit compile in the sid root")
    };
    let miss = run(false);
    assert!(miss.is("miss"), "{}", miss.stdout);
    assert!(miss.loads("libhiprtc.so.6"), "{:?}", miss.loaded);
    let hit = run(true);
    let first = Run::of_text(
        std::fs::read_to_string(&first_out).unwrap(),
        &std::fs::read_to_string(&first_err).unwrap(),
    );
    assert!(first.is("hit (disk)"), "{}", first.stdout);
    assert!(first.loads("libhiprtc.so.6"), "{:?}", first.loaded);
    assert!(hit.is("hit (disk)"), "{}", hit.stdout);
    assert!(!hit.loads("libhiprtc"), "{:?}", hit.loaded);
    assert!(!hit.loads("libamdhip64"), "{:?}", hit.loaded);
}
