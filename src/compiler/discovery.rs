//! Finding `hipcc`, in the order of `hip_sys::discovery` (the same installation roots as the
//! headers and the runtime):
//!
//! 1. explicit: [`CompilerConfig::hipcc`](super::CompilerConfig::hipcc), else `HIPJIT_HIPCC`;
//!    when set it must name an executable regular file whose path hipcc's shell can take
//!    ([`super::shell_env::check_hipcc`]), or discovery fails naming the setting and why
//!    (missing, not executable, refused): never a fallback to another hipcc or compiler;
//! 2. `$HIP_PATH/bin/hipcc`;
//! 3. `$ROCM_PATH/bin/hipcc`;
//! 4. the installation of `hipconfig` on `PATH` (`<root>/bin/hipcc`), then `hipcc` on `PATH`
//!    itself, symlinks resolved;
//! 5. `/opt/rocm/bin/hipcc`;
//! 6. `/opt/rocm-*/bin/hipcc`, newest version first.
//!
//! When nothing is found the error lists every candidate tried and why it was not used.

use std::fmt;
use std::path::{Path, PathBuf};

use hip_sys::discovery::{self, Env, Origin};

/// The environment variable naming the compiler explicitly.
pub const HIPCC_ENV: &str = "HIPJIT_HIPCC";
/// How errors name the API setting of an explicit hipcc.
pub const EXPLICIT_SETTING: &str = "CompilerConfig::hipcc";

/// One place discovery looked.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Candidate {
    /// Where the candidate came from (`HIP_PATH`, `/opt/rocm`...).
    pub origin: String,
    /// The path tried.
    pub path: PathBuf,
    /// Why it was not used.
    pub problem: String,
}

impl fmt::Display for Candidate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} ({}): {}",
            self.path.display(),
            self.origin,
            self.problem
        )
    }
}

/// Errors of compiler discovery.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum DiscoveryError {
    /// An explicitly configured compiler path does not name an executable file.
    #[error("the compiler set by {origin} ({}) is not usable: {problem}", path.display())]
    ExplicitNotUsable {
        /// The setting: `EXPLICIT_SETTING` or [`HIPCC_ENV`].
        origin: String,
        /// The path as given.
        path: PathBuf,
        /// What is wrong with it.
        problem: String,
    },
    /// No candidate held an executable `hipcc`.
    #[error("no hipcc found (set HIPJIT_HIPCC, HIP_PATH or ROCM_PATH, or put hipcc on PATH); tried:{}",
        .candidates.iter().map(|c| format!("\n  {c}")).collect::<String>())]
    NotFound {
        /// Every candidate, in the order tried.
        candidates: Vec<Candidate>,
    },
}

/// Finds hipcc as documented in the module; `explicit` is the API setting. Returns the path
/// with symlinks resolved.
///
/// Errors: [`DiscoveryError::ExplicitNotUsable`], [`DiscoveryError::NotFound`].
pub fn find_hipcc(
    explicit: Option<&Path>,
    env: &impl Env,
    opt: &Path,
) -> Result<PathBuf, DiscoveryError> {
    let explicit = match explicit {
        Some(p) => Some((EXPLICIT_SETTING.to_string(), p.to_path_buf())),
        None => env
            .var_os(HIPCC_ENV)
            .filter(|v| !v.is_empty())
            .map(|v| (HIPCC_ENV.to_string(), PathBuf::from(v))),
    };
    if let Some((origin, path)) = explicit {
        let problem = problem_with(&path).or_else(|| {
            super::shell_env::check_hipcc(&path)
                .err()
                .map(|e| format!("refused: {e}"))
        });
        return match problem {
            None => Ok(resolve(&path)),
            Some(problem) => Err(DiscoveryError::ExplicitNotUsable {
                origin,
                path,
                problem,
            }),
        };
    }
    let mut candidates = Vec::new();
    for root in discovery::install_roots_in(env, opt) {
        let (origin, path) = match &root.origin {
            Origin::Usr => continue, // /usr/bin is reached through PATH
            Origin::OnPath(tool) if tool.file_name() == Some("hipcc".as_ref()) => {
                ("hipcc on PATH".to_string(), tool.clone())
            }
            Origin::OnPath(tool) => (
                format!("installation of {}", tool.display()),
                root.root.join("bin/hipcc"),
            ),
            other => (other.to_string(), root.root.join("bin/hipcc")),
        };
        match problem_with(&path) {
            None => return Ok(resolve(&path)),
            Some(problem) => candidates.push(Candidate {
                origin,
                path,
                problem,
            }),
        }
    }
    if discovery::find_on_path(env, "hipcc").is_none() {
        let path = env.var_os("PATH").unwrap_or_default();
        candidates.push(Candidate {
            origin: "PATH".into(),
            path: PathBuf::from("hipcc"),
            problem: format!("not in any directory of PATH={}", path.to_string_lossy()),
        });
    }
    Err(DiscoveryError::NotFound { candidates })
}

fn resolve(path: &Path) -> PathBuf {
    crate::fs::observe::canonicalize(path).unwrap_or_else(|_| path.to_path_buf())
}

/// Why `path` is not an executable regular file (`missing: ...`, `not a regular file`, `not
/// executable`); `None` when it is one.
pub(crate) fn problem_with(path: &Path) -> Option<String> {
    match crate::fs::observe::metadata(path) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Some(format!("missing ({e})")),
        Err(e) => Some(format!("{e}")),
        Ok(m) if !m.is_file() => Some("not a regular file".into()),
        // The mode of the same `stat` (no second one).
        Ok(m) if m.mode & 0o111 == 0 => Some("not executable".into()),
        Ok(_) => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    use std::ffi::OsString;

    fn env_of(vars: Vec<(&'static str, OsString)>) -> impl Env {
        move |name: &str| {
            vars.iter()
                .find(|(k, _)| *k == name)
                .map(|(_, v)| v.clone())
        }
    }

    fn fake_tool(path: &Path) {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, "#!/bin/sh\n").unwrap();
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
    }

    #[test]
    fn explicit_env_path_that_does_not_exist_is_an_error_not_a_fallback() {
        let env = env_of(vec![
            (HIPCC_ENV, "/nonexistent/hipcc".into()),
            ("PATH", "/usr/bin".into()),
        ]);
        let err = find_hipcc(None, &env, Path::new("/nonexistent-opt")).unwrap_err();
        assert!(
            matches!(&err, DiscoveryError::ExplicitNotUsable { origin, .. } if origin == HIPCC_ENV),
            "{err}"
        );
        assert!(err.to_string().contains("/nonexistent/hipcc"), "{err}");
        assert!(err.to_string().contains("missing"), "{err}");
    }

    #[test]
    fn explicit_api_path_refused_or_not_executable_names_the_setting_and_why() {
        let dir = tempfile::tempdir().unwrap();
        let env = env_of(vec![("PATH", "/usr/bin".into())]);
        let plain = dir.path().join("plain/hipcc");
        fake_tool(&plain);
        std::fs::set_permissions(&plain, std::fs::Permissions::from_mode(0o644)).unwrap();
        let spaced = dir.path().join("a b/hipcc");
        fake_tool(&spaced);
        for (path, why) in [(&plain, "not executable"), (&spaced, "refused")] {
            let err = find_hipcc(Some(path), &env, Path::new("/nonexistent-opt")).unwrap_err();
            assert!(
                matches!(&err, DiscoveryError::ExplicitNotUsable { origin, .. } if origin == EXPLICIT_SETTING),
                "{err}"
            );
            let text = err.to_string();
            assert!(
                text.contains(EXPLICIT_SETTING) && text.contains(why),
                "{why}: {text}"
            );
        }
    }

    #[test]
    fn hip_path_comes_before_path() {
        let dir = tempfile::tempdir().unwrap();
        let hip = dir.path().join("hip/bin/hipcc");
        let onpath = dir.path().join("other/bin/hipcc");
        fake_tool(&hip);
        fake_tool(&onpath);
        let env = env_of(vec![
            ("HIP_PATH", dir.path().join("hip").into()),
            ("PATH", dir.path().join("other/bin").into()),
        ]);
        let found = find_hipcc(None, &env, Path::new("/nonexistent-opt")).unwrap();
        assert_eq!(found, std::fs::canonicalize(&hip).unwrap());
    }

    #[test]
    fn nothing_found_lists_every_candidate() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("rocm-6.4.0")).unwrap();
        let env = env_of(vec![
            ("HIP_PATH", "/nonexistent/hip".into()),
            ("ROCM_PATH", "/nonexistent/rocm".into()),
            ("PATH", "/nonexistent/bin".into()),
        ]);
        let err = find_hipcc(None, &env, dir.path()).unwrap_err();
        let DiscoveryError::NotFound { candidates } = &err else {
            panic!("{err}")
        };
        let paths: Vec<String> = candidates
            .iter()
            .map(|c| c.path.display().to_string())
            .collect();
        let opt = dir.path().display();
        assert_eq!(
            paths,
            [
                "/nonexistent/hip/bin/hipcc".to_string(),
                "/nonexistent/rocm/bin/hipcc".to_string(),
                format!("{opt}/rocm/bin/hipcc"),
                format!("{opt}/rocm-6.4.0/bin/hipcc"),
                "hipcc".to_string(),
            ]
        );
    }
}
