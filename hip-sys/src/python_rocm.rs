//! ROCm installed by Python packages: the installation roots that a Python environment's
//! packages hold, for [`super::install_roots_in`].
//!
//! Since ROCm 7 the mainstream install is pip: AMD's TheRock wheels put the runtime, hipRTC
//! and comgr in `site-packages/_rocm_sdk_core/lib` (versioned sonames only, no
//! `libamdhip64.so` link), the headers and compilers in `_rocm_sdk_devel`, and a `hipcc`
//! wrapper in the environment's `bin/`; PyTorch's ROCm wheels carry a runtime in `torch/lib`;
//! `pytorch-triton-rocm` 2.x carries one (HIP 5.4, hipRTC inside it) in
//! `triton/third_party/rocm/lib`. Each is a root in the sense of [`super::InstallRoot`]: a
//! directory whose `include/`, `lib/` and `bin/` the consumers look into for what they need
//! (a `torch` root has no HIP headers and no `bin/hipcc`: they are skipped there).
//!
//! The environment searched, without starting an interpreter:
//! 1. `VIRTUAL_ENV`, the active virtual environment;
//! 2. else, when `HIPJIT_PYTHON` is set, the environment of that interpreter (a path, or a
//!    name looked up on `PATH` such as `python3`): the directory above its `bin/`, as found
//!    (links not resolved: a virtual environment's `python3` is a link to the system's).
//!
//! Its package directories, in order: `lib/python3.N/site-packages` (newest `N` first), then
//! `lib/python3.N/dist-packages`, `lib/python3/dist-packages` and
//! `local/lib/python3.N/dist-packages` (Debian's system layout). In each, the packages of
//! [`PACKAGES`], in that order.
//!
//! A `hipcc` (or `hipconfig`) found on `PATH` in a virtual environment's `bin/` (a directory
//! whose parent holds `pyvenv.cfg`) is TheRock's wrapper, a Python script: [`real_tool`] maps
//! it to `_rocm_sdk_devel/bin/<tool>` of that environment, so that the root it names is the
//! real installation, not the environment.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use super::{find_on_path, is_executable_file, metadata, read_dir, Env};

/// The variable naming the active virtual environment (set by its `activate` script).
pub const VIRTUAL_ENV: &str = "VIRTUAL_ENV";

/// The variable naming a Python interpreter whose environment is searched when no virtual
/// environment is active.
pub const PYTHON_ENV: &str = "HIPJIT_PYTHON";

/// The environment variables this module reads (besides `PATH`).
pub const ENV_VARS: &[&str] = &[VIRTUAL_ENV, PYTHON_ENV];

/// The packages that hold a ROCm installation or part of one, in the order searched: the
/// package directory and the installation root below it (`""`: the package directory itself).
pub const PACKAGES: &[(&str, &str)] = &[
    // TheRock (ROCm 7+): headers, hipcc, clang, device libraries.
    ("_rocm_sdk_devel", ""),
    // TheRock (ROCm 7+): the runtime, hipRTC, comgr, hsa-runtime (`lib/`).
    ("_rocm_sdk_core", ""),
    // PyTorch's ROCm wheels: their own runtime in `torch/lib`.
    ("torch", ""),
    // pytorch-triton-rocm 2.x: HIP 5.4 runtime with hipRTC inside, comgr, headers.
    ("triton", "third_party/rocm"),
];

/// Which Python environment was searched, and why.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Source {
    /// `VIRTUAL_ENV`.
    VirtualEnv,
    /// `HIPJIT_PYTHON`; holds the interpreter's path as found.
    Interpreter(PathBuf),
}

impl std::fmt::Display for Source {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Source::VirtualEnv => f.write_str(VIRTUAL_ENV),
            Source::Interpreter(p) => write!(f, "{PYTHON_ENV}={}", p.display()),
        }
    }
}

/// A Python environment: its prefix (the directory holding `bin/` and `lib/`) and why it was
/// searched.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Environment {
    /// The prefix.
    pub prefix: PathBuf,
    /// Why it is searched.
    pub source: Source,
}

/// One package of [`PACKAGES`] found in an environment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Package {
    /// The package's name (`_rocm_sdk_core`, `torch`...).
    pub name: &'static str,
    /// The installation root inside it (`<site>/_rocm_sdk_core`,
    /// `<site>/triton/third_party/rocm`), a directory.
    pub root: PathBuf,
    /// The environment it is in.
    pub source: Source,
}

/// The Python environment searched (see the module documentation), or `None` when
/// `VIRTUAL_ENV` and `HIPJIT_PYTHON` are unset or empty, or the interpreter named is not found
/// on `PATH`.
pub fn environment(env: &impl Env) -> Option<Environment> {
    if let Some(v) = env.var_os(VIRTUAL_ENV).filter(|v| !v.is_empty()) {
        return Some(Environment {
            prefix: PathBuf::from(v),
            source: Source::VirtualEnv,
        });
    }
    let python: OsString = env.var_os(PYTHON_ENV).filter(|v| !v.is_empty())?;
    let python = if Path::new(&python).components().count() > 1 {
        PathBuf::from(python)
    } else {
        find_on_path(env, &python.to_string_lossy())?
    };
    // <prefix>/bin/python3
    let prefix = python.parent()?.parent()?.to_path_buf();
    Some(Environment {
        prefix,
        source: Source::Interpreter(python),
    })
}

/// The package directories of the environment at `prefix` that exist, in the order of the
/// module documentation.
pub fn site_dirs(prefix: &Path) -> Vec<PathBuf> {
    let versions = |lib: &Path| -> Vec<(u32, PathBuf)> {
        let Ok(entries) = read_dir(lib) else {
            return Vec::new();
        };
        let mut v: Vec<(u32, PathBuf)> = entries
            .filter_map(Result::ok)
            .filter_map(|e| {
                let name = e.file_name().into_string().ok()?;
                let minor = name.strip_prefix("python3.")?.parse().ok()?;
                Some((minor, e.path()))
            })
            .collect();
        v.sort_by(|a, b| b.0.cmp(&a.0).then_with(|| a.1.cmp(&b.1)));
        v
    };
    let is_dir = |p: &Path| metadata(p).is_ok_and(|m| m.is_dir());
    let lib = versions(&prefix.join("lib"));
    let local = versions(&prefix.join("local/lib"));
    let candidates = lib
        .iter()
        .map(|(_, d)| d.join("site-packages"))
        .chain(lib.iter().map(|(_, d)| d.join("dist-packages")))
        .chain(std::iter::once(prefix.join("lib/python3/dist-packages")))
        .chain(local.iter().map(|(_, d)| d.join("dist-packages")));
    let mut dirs: Vec<PathBuf> = Vec::new();
    for dir in candidates {
        if is_dir(&dir) && !dirs.contains(&dir) {
            dirs.push(dir);
        }
    }
    dirs
}

/// The packages of [`PACKAGES`] in the environment [`environment`] names, in order: for each
/// package directory ([`site_dirs`]), each package whose root is a directory.
pub fn packages(env: &impl Env) -> Vec<Package> {
    let Some(environment) = environment(env) else {
        return Vec::new();
    };
    let mut found = Vec::new();
    for site in site_dirs(&environment.prefix) {
        for (name, below) in PACKAGES {
            let root = if below.is_empty() {
                site.join(name)
            } else {
                site.join(name).join(below)
            };
            if metadata(&root).is_ok_and(|m| m.is_dir()) {
                found.push(Package {
                    name,
                    root,
                    source: environment.source.clone(),
                });
            }
        }
    }
    found
}

/// The places a search of [`packages`] reads, for a caller that remembers the search's end by
/// their `stat` (a package installed or removed changes its package directory): each package
/// directory of the environment and each package root found. Empty when no environment is
/// searched.
pub fn watched_places(env: &impl Env) -> Vec<PathBuf> {
    let Some(environment) = environment(env) else {
        return Vec::new();
    };
    let mut places = vec![
        environment.prefix.join("lib"),
        environment.prefix.join("local/lib"),
    ];
    places.extend(site_dirs(&environment.prefix));
    places.extend(packages(env).into_iter().map(|p| p.root));
    places
}

/// The real tool behind TheRock's wrapper: when `tool` (as found on `PATH`, links not
/// resolved) is in the `bin/` of a virtual environment (its parent holds `pyvenv.cfg`) and a
/// package directory of that environment holds an executable `_rocm_sdk_devel/bin/<name>`,
/// that file; else `None`.
pub fn real_tool(tool: &Path) -> Option<PathBuf> {
    let name = tool.file_name()?;
    let bin = tool.parent()?;
    if bin.file_name()? != "bin" {
        return None;
    }
    let prefix = bin.parent()?;
    metadata(&prefix.join("pyvenv.cfg")).ok()?;
    site_dirs(prefix)
        .into_iter()
        .map(|site| site.join("_rocm_sdk_devel/bin").join(name))
        .find(|real| is_executable_file(real))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scratch(tag: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("hip-sys-py-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    #[test]
    fn virtual_env_packages_are_found_newest_python_first_in_package_order() {
        let venv = scratch("order");
        for d in [
            "lib/python3.9/site-packages/torch/lib",
            "lib/python3.12/site-packages/_rocm_sdk_core/lib",
            "lib/python3.12/site-packages/_rocm_sdk_devel/include",
            "lib/python3.12/site-packages/triton/third_party/rocm/lib",
            "lib/python3.12/site-packages/numpy",
        ] {
            std::fs::create_dir_all(venv.join(d)).unwrap();
        }
        let v = venv.clone().into_os_string();
        let env = move |name: &str| (name == VIRTUAL_ENV).then(|| v.clone());
        let found: Vec<(&str, PathBuf)> = packages(&env)
            .into_iter()
            .map(|p| (p.name, p.root.strip_prefix(&venv).unwrap().to_path_buf()))
            .collect();
        std::fs::remove_dir_all(&venv).unwrap();
        let want = [
            (
                "_rocm_sdk_devel",
                "lib/python3.12/site-packages/_rocm_sdk_devel",
            ),
            (
                "_rocm_sdk_core",
                "lib/python3.12/site-packages/_rocm_sdk_core",
            ),
            (
                "triton",
                "lib/python3.12/site-packages/triton/third_party/rocm",
            ),
            ("torch", "lib/python3.9/site-packages/torch"),
        ];
        let want: Vec<(&str, PathBuf)> = want.iter().map(|(n, p)| (*n, p.into())).collect();
        assert_eq!(found, want);
    }

    #[test]
    fn no_environment_without_the_variables_and_an_interpreter_names_its_prefix() {
        let none = |_: &str| None::<OsString>;
        assert_eq!(environment(&none), None);
        let empty = |_: &str| Some(OsString::new());
        assert_eq!(environment(&empty), None);
        let py = |name: &str| (name == PYTHON_ENV).then(|| OsString::from("/opt/py/bin/python3"));
        assert_eq!(
            environment(&py),
            Some(Environment {
                prefix: PathBuf::from("/opt/py"),
                source: Source::Interpreter(PathBuf::from("/opt/py/bin/python3")),
            })
        );
        // A bare name is looked up on PATH; not found there is no environment.
        let missing = |name: &str| match name {
            PYTHON_ENV => Some(OsString::from("python3")),
            "PATH" => Some(OsString::from("/nonexistent-bin")),
            _ => None,
        };
        assert_eq!(environment(&missing), None);
    }

    #[test]
    fn a_wrapper_in_a_virtual_environment_maps_to_the_devel_package_tool() {
        use std::os::unix::fs::PermissionsExt;
        let venv = scratch("wrapper");
        let real_dir = venv.join("lib/python3.12/site-packages/_rocm_sdk_devel/bin");
        std::fs::create_dir_all(&real_dir).unwrap();
        std::fs::create_dir_all(venv.join("bin")).unwrap();
        for f in [venv.join("bin/hipcc"), real_dir.join("hipcc")] {
            std::fs::write(&f, "#!/bin/sh\n").unwrap();
            std::fs::set_permissions(&f, std::fs::Permissions::from_mode(0o755)).unwrap();
        }
        // Not a virtual environment yet: no pyvenv.cfg.
        let before = real_tool(&venv.join("bin/hipcc"));
        std::fs::write(venv.join("pyvenv.cfg"), "home = /usr/bin\n").unwrap();
        let after = real_tool(&venv.join("bin/hipcc"));
        std::fs::remove_dir_all(&venv).unwrap();
        assert_eq!(before, None);
        assert_eq!(after, Some(real_dir.join("hipcc")));
    }
}
