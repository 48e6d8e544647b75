//! The one order in which hipjit looks for a HIP installation.
//!
//! Headers (hip-sys's build script), the runtime library and the compiler (the `hipjit` crate)
//! all start from the same list of installation roots, so the three searches agree and are
//! documented once. Each consumer puts its own explicit setting first and then maps every root
//! to the file it needs:
//!
//! | # | root | headers | runtime | compiler |
//! |---|------|---------|---------|----------|
//! | 0 | explicit | `HIP_INCLUDE_DIR` | `HIPJIT_HIP_LIBRARY` (or the API) | `HIPJIT_HIPCC` (or the API) |
//! | 1 | `HIP_PATH` | `include/` | `lib/` | `bin/hipcc` |
//! | 2 | `ROCM_PATH` | `include/` | `lib/` | `bin/hipcc` |
//! | 3 | Python packages of the active environment ([`python`]: `_rocm_sdk_devel`, `_rocm_sdk_core`, `torch`, `triton/third_party/rocm`) | `include/` | `lib/` | `bin/hipcc` |
//! | 4 | `hipconfig`, then `hipcc`, found on `PATH` (symlinks resolved; a virtual environment's wrapper mapped to the real tool, [`python::real_tool`]) | `include/` of its installation | (not used: see below) | the `hipcc` itself |
//! | 5 | `/opt/rocm` | `include/` | `lib/` | `bin/hipcc` |
//! | 6 | `/opt/rocm-*`, newest version first | `include/` | (not used) | `bin/hipcc` |
//! | 7 | `/usr` | `include/` | sonames through the dynamic loader | (already covered by `PATH`) |
//!
//! The runtime search also prefers a HIP runtime already loaded in the process, and after the
//! roots it asks the dynamic loader for the sonames `libamdhip64.so`, `.so.7`, `.so.6`, `.so.5`,
//! which covers `/usr` and `ld.so.conf`; a compiler's installation is only where its runtime
//! was built to be found when `hipcc` is a wrapper of a distribution, so the runtime does not
//! follow `PATH`.
//!
//! [`hip_version_from_header`] reads the version of a header set found this way, for the build
//! script's `build_info::HIP_VERSION` and `hipjit doctor` alike.
//!
//! This module uses only `std`: hip-sys's build script includes it with `#[path]`.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

#[path = "python_rocm.rs"]
pub mod python;

/// Where an installation root came from, in the order of [`install_roots`].
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Origin {
    /// The `HIP_PATH` environment variable.
    HipPath,
    /// The `ROCM_PATH` environment variable.
    RocmPath,
    /// A package of the Python environment searched ([`python::packages`]): its name
    /// (`_rocm_sdk_core`, `torch`...) and the environment.
    PythonPackage {
        /// The package's name.
        package: String,
        /// The environment it is in.
        source: python::Source,
    },
    /// The installation of a tool (`hipconfig` or `hipcc`) found on `PATH`; holds the tool's
    /// path after resolving symlinks.
    OnPath(PathBuf),
    /// `/opt/rocm`.
    OptRocm,
    /// A versioned `/opt/rocm-X.Y.Z` directory.
    OptRocmVersioned,
    /// `/usr`, where distributions install HIP.
    Usr,
}

impl std::fmt::Display for Origin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Origin::HipPath => f.write_str("HIP_PATH"),
            Origin::RocmPath => f.write_str("ROCM_PATH"),
            Origin::PythonPackage { package, source } => {
                write!(f, "Python package {package} of {source}")
            }
            Origin::OnPath(tool) => write!(f, "{} on PATH", tool.display()),
            Origin::OptRocm => f.write_str("/opt/rocm"),
            Origin::OptRocmVersioned => f.write_str("versioned /opt/rocm-*"),
            Origin::Usr => f.write_str("/usr"),
        }
    }
}

/// One candidate installation root: a directory that may hold `include/`, `lib/` and `bin/`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InstallRoot {
    /// Why this directory is a candidate.
    pub origin: Origin,
    /// The directory (not checked for existence: consumers check what they need in it).
    pub root: PathBuf,
}

/// Reads environment variables; lets tests and the build script supply their own.
pub trait Env {
    /// The variable's value, or `None` when it is unset.
    fn var_os(&self, name: &str) -> Option<OsString>;
}

/// The process environment ([`std::env::var_os`]).
#[derive(Debug, Clone, Copy, Default)]
pub struct ProcessEnv;

impl Env for ProcessEnv {
    fn var_os(&self, name: &str) -> Option<OsString> {
        std::env::var_os(name)
    }
}

impl<F: Fn(&str) -> Option<OsString>> Env for F {
    fn var_os(&self, name: &str) -> Option<OsString> {
        self(name)
    }
}

/// One filesystem query of this module, as told to an [`Observer`].
#[derive(Debug)]
pub enum Query<'a> {
    /// `stat(2)` of the path, symbolic links followed, and its result.
    Metadata(&'a Path, &'a std::io::Result<std::fs::Metadata>),
    /// `realpath(3)` of the path and its result.
    Canonical(&'a Path, &'a std::io::Result<PathBuf>),
}

/// A function told of every filesystem query this module makes, with its result: a caller
/// that remembers what a search saw (hipjit's hit memo) records them. Directories listed are
/// told as their `stat` (an entry added or removed changes the directory's times).
pub type Observer = fn(Query<'_>);

static OBSERVER: std::sync::OnceLock<Observer> = std::sync::OnceLock::new();

/// Sets the [`Observer`] for the process; the first call wins (returns `false` after it).
pub fn set_observer(observer: Observer) -> bool {
    OBSERVER.set(observer).is_ok()
}

fn metadata(path: &Path) -> std::io::Result<std::fs::Metadata> {
    let r = std::fs::metadata(path);
    if let Some(o) = OBSERVER.get() {
        o(Query::Metadata(path, &r));
    }
    r
}

fn canonicalize(path: &Path) -> std::io::Result<PathBuf> {
    let r = std::fs::canonicalize(path);
    if let Some(o) = OBSERVER.get() {
        o(Query::Canonical(path, &r));
    }
    r
}

fn read_dir(path: &Path) -> std::io::Result<std::fs::ReadDir> {
    let r = std::fs::read_dir(path);
    if let Some(o) = OBSERVER.get() {
        match &r {
            Ok(_) => o(Query::Metadata(path, &std::fs::metadata(path))),
            Err(e) => o(Query::Metadata(
                path,
                &Err(std::io::Error::from_raw_os_error(
                    e.raw_os_error().unwrap_or(0),
                )),
            )),
        }
    }
    r
}

/// The environment variables this module reads (for `rerun-if-env-changed` and cache keys).
pub const ENV_VARS: &[&str] = &[
    "HIP_PATH",
    "ROCM_PATH",
    "PATH",
    python::VIRTUAL_ENV,
    python::PYTHON_ENV,
];

/// The candidate installation roots, in the documented order (see the module documentation),
/// without duplicates (the first occurrence of a directory wins). Empty variables are ignored.
/// `opt` is the directory scanned for `rocm` and `rocm-*` (normally `/opt`; tests pass their
/// own).
pub fn install_roots_in(env: &impl Env, opt: &Path) -> Vec<InstallRoot> {
    let mut roots: Vec<InstallRoot> = Vec::new();
    let mut push = |origin: Origin, root: PathBuf| {
        if !roots.iter().any(|r| same_dir(&r.root, &root)) {
            roots.push(InstallRoot { origin, root });
        }
    };
    for (var, origin) in [
        ("HIP_PATH", Origin::HipPath),
        ("ROCM_PATH", Origin::RocmPath),
    ] {
        if let Some(v) = env.var_os(var).filter(|v| !v.is_empty()) {
            push(origin, PathBuf::from(v));
        }
    }
    for package in python::packages(env) {
        push(
            Origin::PythonPackage {
                package: package.name.to_owned(),
                source: package.source,
            },
            package.root,
        );
    }
    for tool in ["hipconfig", "hipcc"] {
        if let Some(found) = find_on_path(env, tool) {
            // A virtual environment's wrapper names the environment, not an installation.
            let resolved = python::real_tool(&found)
                .or_else(|| canonicalize(&found).ok())
                .unwrap_or(found);
            // <root>/bin/<tool>: the installation is two levels up.
            if let Some(root) = resolved.parent().and_then(Path::parent) {
                let root = root.to_path_buf();
                push(Origin::OnPath(resolved.clone()), root);
            }
        }
    }
    push(Origin::OptRocm, opt.join("rocm"));
    for dir in versioned_rocm_dirs(opt) {
        push(Origin::OptRocmVersioned, dir);
    }
    push(Origin::Usr, PathBuf::from("/usr"));
    roots
}

/// [`install_roots_in`] with the process environment and `/opt`.
pub fn install_roots() -> Vec<InstallRoot> {
    install_roots_in(&ProcessEnv, Path::new("/opt"))
}

/// The first executable file named `tool` in the directories of `PATH`, unresolved.
pub fn find_on_path(env: &impl Env, tool: &str) -> Option<PathBuf> {
    let path = env.var_os("PATH")?;
    std::env::split_paths(&path)
        .filter(|dir| !dir.as_os_str().is_empty())
        .map(|dir| dir.join(tool))
        .find(|candidate| is_executable_file(candidate))
}

/// Whether `path` is a regular file (after symlinks) with an execute bit set.
pub fn is_executable_file(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    metadata(path)
        .map(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        .unwrap_or(false)
}

/// `opt/rocm-*` directories, newest version first (numeric comparison of the dotted parts,
/// so `rocm-6.10.0` sorts above `rocm-6.9.1`; names that do not parse sort last, by name).
pub fn versioned_rocm_dirs(opt: &Path) -> Vec<PathBuf> {
    let Ok(entries) = read_dir(opt) else {
        return Vec::new();
    };
    let mut dirs: Vec<(Option<Vec<u64>>, PathBuf)> = entries
        .filter_map(Result::ok)
        .filter_map(|e| {
            let name = e.file_name().into_string().ok()?;
            let version = name.strip_prefix("rocm-")?;
            metadata(&e.path())
                .is_ok_and(|m| m.is_dir())
                .then(|| (parse_version(version), e.path()))
        })
        .collect();
    dirs.sort_by(|(va, pa), (vb, pb)| match (va, vb) {
        (Some(a), Some(b)) => b.cmp(a),
        (Some(_), None) => std::cmp::Ordering::Less,
        (None, Some(_)) => std::cmp::Ordering::Greater,
        (None, None) => pa.cmp(pb),
    });
    dirs.into_iter().map(|(_, p)| p).collect()
}

fn parse_version(s: &str) -> Option<Vec<u64>> {
    s.split('.').map(|part| part.parse().ok()).collect()
}

fn same_dir(a: &Path, b: &Path) -> bool {
    if a == b {
        return true;
    }
    match (canonicalize(a), canonicalize(b)) {
        (Ok(a), Ok(b)) => a == b,
        _ => false,
    }
}

/// The version the text of a `hip/hip_version.h` defines: `(major, minor, patch)` from its
/// `#define HIP_VERSION_MAJOR N`, `HIP_VERSION_MINOR N` and `HIP_VERSION_PATCH N` lines (the
/// first line of each whose value is a decimal `u32`); the patch is `None` when not defined.
/// `None` when the major or minor version is missing.
pub fn hip_version_from_header(text: &str) -> Option<(u32, u32, Option<u32>)> {
    let define = |name: &str| -> Option<u32> {
        text.lines().find_map(|line| {
            let mut words = line.split_whitespace();
            (words.next()? == "#define" && words.next()? == name)
                .then(|| words.next()?.parse().ok())
                .flatten()
        })
    };
    Some((
        define("HIP_VERSION_MAJOR")?,
        define("HIP_VERSION_MINOR")?,
        define("HIP_VERSION_PATCH"),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hip_version_is_read_from_the_defines() {
        let text = "// HIP_VERSION_MAJOR 9\n#define HIP_VERSION_MAJOR 7\n\
                    #define HIP_VERSION_MINOR 1 // minor\n#define HIP_VERSION_PATCH 25424\n";
        assert_eq!(hip_version_from_header(text), Some((7, 1, Some(25424))));
        let no_patch = "#define HIP_VERSION_MAJOR 5\n#define HIP_VERSION_MINOR 2\n";
        assert_eq!(hip_version_from_header(no_patch), Some((5, 2, None)));
        assert_eq!(
            hip_version_from_header("#define HIP_VERSION_MAJOR 5\n"),
            None
        );
    }

    fn env_of(vars: &'static [(&'static str, &'static str)]) -> impl Env {
        move |name: &str| {
            vars.iter()
                .find(|(k, _)| *k == name)
                .map(|(_, v)| OsString::from(v))
        }
    }

    #[test]
    fn versioned_dirs_sort_newest_first_numerically() {
        let opt = std::env::temp_dir().join(format!("hip-sys-disc-{}", std::process::id()));
        for d in [
            "rocm-6.9.1",
            "rocm-6.10.0",
            "rocm-5.7.0",
            "rocm-nightly",
            "other",
        ] {
            std::fs::create_dir_all(opt.join(d)).unwrap();
        }
        let names: Vec<String> = versioned_rocm_dirs(&opt)
            .iter()
            .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
            .collect();
        std::fs::remove_dir_all(&opt).unwrap();
        assert_eq!(
            names,
            ["rocm-6.10.0", "rocm-6.9.1", "rocm-5.7.0", "rocm-nightly"]
        );
    }

    #[test]
    fn roots_follow_documented_order_and_skip_empty_variables() {
        let env = env_of(&[
            ("HIP_PATH", "/nonexistent/hip"),
            ("ROCM_PATH", ""),
            ("PATH", ""),
        ]);
        let opt = std::env::temp_dir().join(format!("hip-sys-disc2-{}", std::process::id()));
        std::fs::create_dir_all(opt.join("rocm-7.1.0")).unwrap();
        let roots = install_roots_in(&env, &opt);
        std::fs::remove_dir_all(&opt).unwrap();
        let origins: Vec<&Origin> = roots.iter().map(|r| &r.origin).collect();
        assert_eq!(
            origins,
            [
                &Origin::HipPath,
                &Origin::OptRocm,
                &Origin::OptRocmVersioned,
                &Origin::Usr
            ]
        );
        assert_eq!(roots[0].root, PathBuf::from("/nonexistent/hip"));
    }

    #[test]
    fn tool_on_path_names_its_installation() {
        let base = std::env::temp_dir().join(format!("hip-sys-disc3-{}", std::process::id()));
        let bin = base.join("inst dir/bin");
        std::fs::create_dir_all(&bin).unwrap();
        let tool = bin.join("hipcc");
        std::fs::write(&tool, "#!/bin/sh\n").unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&tool, std::fs::Permissions::from_mode(0o755)).unwrap();
        let path = OsString::from(bin.as_os_str());
        let env = move |name: &str| (name == "PATH").then(|| path.clone());
        let roots = install_roots_in(&env, Path::new("/nonexistent-opt"));
        std::fs::remove_dir_all(&base).unwrap();
        assert!(matches!(roots[0].origin, Origin::OnPath(_)), "{roots:?}");
        assert!(roots[0].root.ends_with("inst dir"), "{roots:?}");
    }
}
