//! nvcc's host compiler: which program nvcc would run, and what it is, for nvcc's identity
//! ([`crate::compiler::identity`]) and so for the cache key.
//!
//! nvcc preprocesses device code with a host C++ compiler (`gcc -E -x c++ ...`) and tells its
//! front end that compiler's version (`cicc --gnu_version=...`), so the host compiler's
//! predefined macros and version reach the cubin: two host compilers, or one changed in place,
//! can compile one source to different cubins. Its headers are in nvcc's dependency list (so
//! in the header manifest); the program itself is keyed here, by content.
//!
//! # Which program
//! As nvcc finds it (measured with CUDA 13's `nvcc -dryrun`): `NVCC_CCBIN` when set, naming
//! the program (`/usr/bin/g++-12`), a directory (its `gcc`), or a bare name looked up as
//! below; else `gcc` looked up in the toolkit's `nvvm/bin`, then nvcc's own directory (which
//! nvcc's `nvcc.profile` puts first on `PATH`), then each absolute directory of `PATH`.
//! `-ccbin` is not taken from the caller's flags (refused,
//! [`crate::compiler::flags`]), nor from `NVCC_PREPEND_FLAGS`/`NVCC_APPEND_FLAGS`
//! ([`crate::compiler::nvcc::NvccError::HostCompilerFlag`]).
//!
//! hipjit then hands nvcc that program explicitly (`-ccbin host/<name>`, a link in the build
//! directory, so that nvcc, which runs its steps through a shell, never sees the caller's path),
//! so what runs is what was keyed even if `PATH` changes later in the process.
//!
//! # What it is
//! [`HostCompiler::fingerprint`]: sha256 over the program's file name (a wrapper such as
//! ccache, or clang against clang++, decides by it), the program's content (links resolved),
//! the content of the compilers it names for `-print-prog-name=cc1plus` and `-print-prog-name=cc1`
//! when those are absolute paths of files (gcc's; clang names none), and its predefined macros
//! for C++ (`-dM -E -x c++ /dev/null`), which also cover a wrapper script that adds `-D`
//! flags or runs another compiler. Computed with nvcc's identity and remembered with it: a
//! fresh process checks by `stat` the program (as found and resolved), the compilers it
//! named, and every directory looked in up to the one that held it (a program added earlier
//! on `PATH` changes that directory), a missing directory through its nearest existing
//! ancestor. Not seen: a wrapper that runs another compiler chosen by something other than
//! its own content and those files (an environment variable it reads) and whose macros are
//! unchanged.

use std::ffi::OsString;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use super::process::{self, RunError};

/// The environment variable that names nvcc's host compiler (nvcc's own).
pub const HOST_COMPILER_ENV: &str = "NVCC_CCBIN";

/// The host compiler nvcc looks for when nothing names one (Linux).
pub const DEFAULT_HOST_COMPILER: &str = "gcc";

/// What nvcc's host compiler is (see the module documentation).
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct HostCompiler {
    /// The program as found (absolute; links not resolved): what nvcc is given.
    pub path: PathBuf,
    /// The first line of its `--version` output (recorded, not hashed into keys: the
    /// fingerprint covers it).
    pub version: String,
    /// sha256 (64 hex digits) of its file name, contents, the compilers it names, and its
    /// predefined macros (see the module documentation).
    pub fingerprint: String,
}

impl HostCompiler {
    /// The program's file name (`gcc`, `g++-12`), as nvcc is given it.
    pub fn name(&self) -> String {
        self.path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default()
    }
}

/// Why nvcc's host compiler could not be found or identified.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum HostCompilerError {
    /// No executable of that name in the directories nvcc looks in.
    #[error(
        "nvcc's host compiler `{name}` was not found (looked in: {}); install gcc or name \
         the host compiler with NVCC_CCBIN",
        searched.iter().map(|d| d.display().to_string()).collect::<Vec<_>>().join(", ")
    )]
    NotFound {
        /// The program's name.
        name: String,
        /// The directories looked in, in order.
        searched: Vec<PathBuf>,
    },
    /// `NVCC_CCBIN` names something that is not an executable file (nor a directory holding
    /// `gcc`).
    #[error("NVCC_CCBIN={} is not an executable file: {reason}", path.display())]
    NotExecutable {
        /// The path it names (with `gcc` added when it named a directory).
        path: PathBuf,
        /// What is wrong.
        reason: String,
    },
    /// The program's file name holds a character other than ASCII letters, digits, `.`, `_`,
    /// `+` and `-`: nvcc runs its steps through a shell, which could misparse it.
    #[error(
        "nvcc's host compiler {} has a file name nvcc's shell could misparse; name it through \
         a link whose name is letters, digits, `.`, `_`, `+` and `-` only (NVCC_CCBIN)",
        path.display()
    )]
    UnsafeName {
        /// The program.
        path: PathBuf,
    },
    /// The host compiler failed where it must answer (`--version`, `-dM -E`).
    #[error("`{} {args}` (nvcc's host compiler) failed: {reason}", path.display())]
    Run {
        /// The program.
        path: PathBuf,
        /// The arguments.
        args: String,
        /// The exit status and stderr, or why it could not run.
        reason: String,
    },
    /// A file of the host compiler could not be read for hashing.
    #[error("cannot read {} to fingerprint nvcc's host compiler: {source}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// The OS error.
        source: std::io::Error,
    },
}

/// The host compiler found: the program and the directories whose change could make another
/// one found.
#[derive(Debug)]
pub(crate) struct Located {
    pub(crate) path: PathBuf,
    pub(crate) watched: Vec<PathBuf>,
}

/// The value of `name` in `env`.
fn var<'a>(env: &'a [(String, OsString)], name: &str) -> Option<&'a OsString> {
    env.iter()
        .find(|(k, _)| k == name)
        .map(|(_, v)| v)
        .filter(|v| !v.is_empty())
}

fn executable(path: &Path) -> Result<(), String> {
    match crate::file_observe::metadata(path) {
        Ok(m) if !m.is_file() => Err("not a regular file".into()),
        Ok(m) if m.permissions().mode() & 0o111 == 0 => Err("not executable".into()),
        Ok(_) => Ok(()),
        Err(e) => Err(e.to_string()),
    }
}

/// `dir`, or its nearest existing ancestor: what changes when `dir` is created.
fn existing_ancestor(dir: &Path) -> PathBuf {
    dir.ancestors()
        .find(|a| crate::file_observe::metadata(a).is_ok())
        .unwrap_or(Path::new("/"))
        .to_path_buf()
}

/// The host compiler nvcc at `nvcc` (symlinks resolved) would run under `env` (the
/// variables nvcc's identity is computed with: `NVCC_CCBIN`, `PATH`), found as the module
/// documentation says.
///
/// Errors: [`HostCompilerError::NotExecutable`] for an `NVCC_CCBIN` path that names no
/// executable, [`HostCompilerError::NotFound`] with the directories looked in.
pub(crate) fn locate(
    env: &[(String, OsString)],
    nvcc: &Path,
) -> Result<Located, HostCompilerError> {
    let mut name = OsString::from(DEFAULT_HOST_COMPILER);
    if let Some(v) = var(env, HOST_COMPILER_ENV) {
        if v.as_bytes().contains(&b'/') {
            let given = std::path::absolute(Path::new(v)).unwrap_or_else(|_| PathBuf::from(v));
            let (path, watched) = if crate::file_observe::metadata(&given).is_ok_and(|m| m.is_dir())
            {
                (given.join(DEFAULT_HOST_COMPILER), given.clone())
            } else {
                let parent = given.parent().unwrap_or(Path::new("/")).to_path_buf();
                (given.clone(), parent)
            };
            executable(&path).map_err(|reason| HostCompilerError::NotExecutable {
                path: path.clone(),
                reason,
            })?;
            return Ok(Located {
                path,
                watched: vec![existing_ancestor(&watched)],
            });
        }
        name = v.clone();
    }
    let mut dirs: Vec<PathBuf> = Vec::new();
    if let Some(bin) = nvcc.parent() {
        if let Some(root) = bin.parent() {
            dirs.push(root.join("nvvm/bin"));
        }
        dirs.push(bin.to_path_buf());
    }
    if let Some(path) = var(env, "PATH") {
        dirs.extend(std::env::split_paths(path).filter(|d| d.is_absolute()));
    }
    let mut watched = Vec::new();
    for d in &dirs {
        let w = existing_ancestor(d);
        if !watched.contains(&w) {
            watched.push(w);
        }
        let candidate = d.join(&name);
        if executable(&candidate).is_ok() {
            return Ok(Located {
                path: candidate,
                watched,
            });
        }
    }
    Err(HostCompilerError::NotFound {
        name: name.to_string_lossy().into_owned(),
        searched: dirs,
    })
}

/// The host compiler the nvcc at `nvcc` would run under this process's environment
/// (`NVCC_CCBIN`, `PATH`), found as the module documentation says, without running anything:
/// what `hipjit doctor` reports.
///
/// Errors: [`HostCompilerError::NotExecutable`],
/// [`HostCompilerError::NotFound`].
pub fn find(nvcc: &Path) -> Result<PathBuf, HostCompilerError> {
    let env: Vec<(String, OsString)> = [HOST_COMPILER_ENV, "PATH"]
        .iter()
        .filter_map(|k| std::env::var_os(k).map(|v| (k.to_string(), v)))
        .collect();
    let resolved = crate::file_observe::canonicalize(nvcc).unwrap_or_else(|_| nvcc.to_path_buf());
    locate(&env, &resolved).map(|l| l.path)
}

/// Whether `name` is one nvcc's shell reads as one word, unchanged.
fn safe_name(name: &[u8]) -> bool {
    !name.is_empty()
        && name
            .iter()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'+' | b'-'))
}

/// Runs the host compiler at `path` with `args` and `env` (cleared otherwise, `LC_ALL=C`);
/// its standard output.
fn run(
    path: &Path,
    args: &[&str],
    env: &[(String, OsString)],
    timeout: Duration,
) -> Result<String, HostCompilerError> {
    let mut cmd = Command::new(path);
    cmd.args(args)
        .env_clear()
        .envs(env.iter().map(|(k, v)| (k, v)))
        .env("LC_ALL", "C");
    let err = |reason: String| HostCompilerError::Run {
        path: path.to_path_buf(),
        args: args.join(" "),
        reason,
    };
    match process::run(&mut cmd, timeout) {
        Ok(f) if f.status.success() => Ok(String::from_utf8_lossy(&f.stdout).into_owned()),
        Ok(f) => Err(err(format!(
            "{}; stderr: {}",
            f.status,
            String::from_utf8_lossy(&f.stderr).trim_end()
        ))),
        Err(RunError::Spawn(e)) => Err(err(e.to_string())),
        Err(RunError::Timeout(_)) => {
            Err(err(format!("no answer within {} s", timeout.as_secs_f64())))
        }
        Err(RunError::Cancelled) => Err(err("cancelled before it answered".into())),
    }
}

/// What the host compiler `found` is (see the module documentation), run with `env`, and the
/// files a fresh process checks by `stat` to trust it: the program as found and resolved, and
/// the compilers it named.
///
/// Errors: [`HostCompilerError::UnsafeName`], [`HostCompilerError::Run`] when `--version` or
/// `-dM -E` fails, [`HostCompilerError::Read`] when a file cannot be hashed.
pub(crate) fn identify(
    found: &Located,
    env: &[(String, OsString)],
    timeout: Duration,
) -> Result<(HostCompiler, Vec<PathBuf>), HostCompilerError> {
    let path = &found.path;
    let name = path.file_name().map(|n| n.as_bytes()).unwrap_or_default();
    if !safe_name(name) {
        return Err(HostCompilerError::UnsafeName { path: path.clone() });
    }
    let resolved = crate::file_observe::canonicalize(path).unwrap_or_else(|_| path.clone());
    let version = run(path, &["--version"], env, timeout)?
        .lines()
        .next()
        .unwrap_or_default()
        .to_string();
    let mut programs = vec![path.clone(), resolved.clone()];
    for prog in ["cc1plus", "cc1"] {
        // gcc names its compilers; clang and others answer with the bare name.
        let Ok(out) = run(path, &[&format!("-print-prog-name={prog}")], env, timeout) else {
            continue;
        };
        let named = PathBuf::from(out.trim_end());
        if named.is_absolute() && crate::file_observe::metadata(&named).is_ok_and(|m| m.is_file()) {
            let named = crate::file_observe::canonicalize(&named).unwrap_or(named);
            if !programs.contains(&named) {
                programs.push(named);
            }
        }
    }
    let macros = run(path, &["-dM", "-E", "-x", "c++", "/dev/null"], env, timeout)?;
    let mut fp = Sha256::new();
    let mut item = |b: &[u8]| {
        fp.update((b.len() as u64).to_le_bytes());
        fp.update(b);
    };
    item(name);
    for p in &programs[1..] {
        let digest = super::identity::hash_file(p).map_err(|source| HostCompilerError::Read {
            path: p.clone(),
            source,
        })?;
        item(p.file_name().map(|n| n.as_bytes()).unwrap_or_default());
        item(&digest);
    }
    item(macros.as_bytes());
    Ok((
        HostCompiler {
            path: path.clone(),
            version,
            fingerprint: crate::cache::key::hex(&fp.finalize()),
        },
        programs,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_nvccs_shell_reads_as_one_word_are_safe_and_others_are_not() {
        for ok in [
            "gcc",
            "g++-12",
            "x86_64-linux-gnu-g++-12",
            "clang++",
            "cc_1.2",
        ] {
            assert!(safe_name(ok.as_bytes()), "{ok}");
        }
        for bad in [
            "", "g cc", "gcc;id", "$(id)", "g`id`", "g\"cc", "g'cc", "gcc\n", "g\\cc",
        ] {
            assert!(!safe_name(bad.as_bytes()), "{bad:?}");
        }
    }

    fn exe(path: &Path) {
        std::fs::write(path, "#!/bin/sh\nexit 0\n").unwrap();
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
    }

    #[test]
    fn gcc_is_found_in_the_toolkit_then_on_path_and_the_directories_before_it_are_watched() {
        let t = tempfile::tempdir().unwrap();
        let root = t.path();
        for d in ["cuda/bin", "cuda/nvvm/bin", "a", "b"] {
            std::fs::create_dir_all(root.join(d)).unwrap();
        }
        exe(&root.join("b/gcc"));
        let nvcc = root.join("cuda/bin/nvcc");
        let path = std::env::join_paths([
            root.join("missing/dir"),
            PathBuf::from("relative"),
            root.join("a"),
            root.join("b"),
        ])
        .unwrap();
        let env = vec![("PATH".to_string(), path)];
        let found = locate(&env, &nvcc).unwrap();
        assert_eq!(found.path, root.join("b/gcc"));
        assert_eq!(
            found.watched,
            [
                root.join("cuda/nvvm/bin"),
                root.join("cuda/bin"),
                root.to_path_buf(),
                root.join("a"),
                root.join("b")
            ]
        );
        // A gcc beside nvcc comes first, as nvcc's profile puts its directory first on PATH.
        exe(&root.join("cuda/bin/gcc"));
        assert_eq!(locate(&env, &nvcc).unwrap().path, root.join("cuda/bin/gcc"));
    }

    #[test]
    fn nvcc_ccbin_names_a_program_a_directory_or_a_name_to_look_up() {
        let t = tempfile::tempdir().unwrap();
        let root = t.path();
        std::fs::create_dir_all(root.join("d")).unwrap();
        exe(&root.join("d/gcc"));
        exe(&root.join("d/g++-9"));
        let nvcc = root.join("cuda/bin/nvcc");
        let with = |v: &Path| {
            vec![
                ("NVCC_CCBIN".to_string(), v.as_os_str().to_owned()),
                ("PATH".to_string(), root.join("d").into_os_string()),
            ]
        };
        assert_eq!(
            locate(&with(&root.join("d/g++-9")), &nvcc).unwrap().path,
            root.join("d/g++-9")
        );
        assert_eq!(
            locate(&with(&root.join("d")), &nvcc).unwrap().path,
            root.join("d/gcc")
        );
        assert_eq!(
            locate(&with(Path::new("g++-9")), &nvcc).unwrap().path,
            root.join("d/g++-9")
        );
        let e = locate(&with(&root.join("d/clang")), &nvcc).unwrap_err();
        assert!(matches!(e, HostCompilerError::NotExecutable { .. }), "{e}");
        assert!(e.to_string().contains("d/clang"), "{e}");
        let e = locate(&with(Path::new("clang")), &nvcc).unwrap_err();
        assert!(matches!(e, HostCompilerError::NotFound { .. }), "{e}");
        assert!(e.to_string().contains("`clang` was not found"), "{e}");
    }
}
