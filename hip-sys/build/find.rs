//! Finds the HIP header directory, in the order of `src/discovery.rs`.

use std::path::{Path, PathBuf};

#[allow(dead_code)]
#[path = "../src/discovery.rs"]
mod discovery;

pub use discovery::{Env, ProcessEnv};

/// The variable naming the header directory explicitly (the directory holding `hip/`).
pub const HIP_INCLUDE_DIR: &str = "HIP_INCLUDE_DIR";

/// The file whose presence makes a directory a HIP header directory.
pub const MARKER: &str = "hip/hip_runtime_api.h";

/// Every environment variable the search reads.
pub fn env_vars() -> Vec<&'static str> {
    let mut vars = vec![HIP_INCLUDE_DIR];
    vars.extend_from_slice(discovery::ENV_VARS);
    vars
}

/// A HIP header directory that was found.
#[derive(Debug, Clone)]
pub struct Found {
    /// The directory holding `hip/hip_runtime_api.h`.
    pub dir: PathBuf,
    /// Where it came from, in words (`HIP_INCLUDE_DIR`, `ROCM_PATH`, `/usr`...).
    pub origin: String,
}

/// One candidate that was looked at.
#[derive(Debug, Clone)]
pub struct Tried {
    /// Where the candidate came from, in words.
    pub origin: String,
    /// The header directory checked (`<root>/include`), when there was one.
    pub dir: Option<PathBuf>,
    /// Why it was not used.
    pub why: String,
}

impl std::fmt::Display for Tried {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.dir {
            Some(dir) => write!(f, "{}: {} ({})", self.origin, dir.display(), self.why),
            None => write!(f, "{}: {}", self.origin, self.why),
        }
    }
}

/// The outcome of the search.
#[derive(Debug)]
pub enum Headers {
    /// The first candidate holding `hip/hip_runtime_api.h`.
    Found(Found),
    /// No candidate holds the headers; every candidate tried, in order.
    NotFound(Vec<Tried>),
}

/// Whether `dir` holds the HIP runtime API header.
pub fn is_header_dir(dir: &Path) -> bool {
    dir.join(MARKER).is_file()
}

/// Searches in the documented order: `HIP_INCLUDE_DIR` (explicit: set but without
/// `hip/hip_runtime_api.h` is an error), then `include/` of each installation root of
/// [`discovery::install_roots_in`]. `opt` is normally `/opt`.
pub fn find_headers(env: &impl Env, opt: &Path) -> Result<Headers, String> {
    let mut tried = Vec::new();
    match env.var_os(HIP_INCLUDE_DIR).filter(|v| !v.is_empty()) {
        Some(dir) => {
            let dir = PathBuf::from(dir);
            if is_header_dir(&dir) {
                return Ok(Headers::Found(Found {
                    dir,
                    origin: HIP_INCLUDE_DIR.to_string(),
                }));
            }
            return Err(format!(
                "{HIP_INCLUDE_DIR}={} does not contain {MARKER}; set it to the directory that \
                 holds hip/ (for ROCm: <rocm>/include), or unset it to search the usual places",
                dir.display()
            ));
        }
        None => tried.push(Tried {
            origin: HIP_INCLUDE_DIR.to_string(),
            dir: None,
            why: "not set".to_string(),
        }),
    }
    // Walk the documented order; a step with no candidate is listed too, saying why.
    let roots = discovery::install_roots_in(env, opt);
    for step in 1..=7 {
        let mut any = false;
        for root in roots.iter().filter(|r| step_of(&r.origin) == step) {
            any = true;
            let dir = root.root.join("include");
            if is_header_dir(&dir) {
                return Ok(Headers::Found(Found {
                    dir,
                    origin: root.origin.to_string(),
                }));
            }
            let why = if dir.is_dir() {
                format!("no {MARKER}")
            } else {
                "no such directory".to_string()
            };
            tried.push(Tried {
                origin: root.origin.to_string(),
                dir: Some(dir),
                why,
            });
        }
        if !any {
            tried.push(missing_step(env, opt, step));
        }
    }
    Ok(Headers::NotFound(tried))
}

/// `HIP_VERSION_MAJOR.MINOR.PATCH` read from `hip/hip_version.h` under `dir`, if present
/// ([`discovery::hip_version_from_header`]).
pub fn hip_version(dir: &Path) -> Option<String> {
    let text = std::fs::read_to_string(dir.join("hip/hip_version.h")).ok()?;
    match discovery::hip_version_from_header(&text)? {
        (major, minor, Some(patch)) => Some(format!("{major}.{minor}.{patch}")),
        (_, _, None) => None,
    }
}

/// The position of an origin in the documented order (1 = `HIP_PATH` ... 7 = `/usr`).
fn step_of(origin: &discovery::Origin) -> u8 {
    match origin {
        discovery::Origin::HipPath => 1,
        discovery::Origin::RocmPath => 2,
        discovery::Origin::PythonPackage { .. } => 3,
        discovery::Origin::OnPath(_) => 4,
        discovery::Origin::OptRocm => 5,
        discovery::Origin::OptRocmVersioned => 6,
        discovery::Origin::Usr => 7,
    }
}

/// The entry of the tried list for a step that yielded no candidate root.
fn missing_step(env: &impl Env, opt: &Path, step: u8) -> Tried {
    let set = |var: &str| env.var_os(var).is_some_and(|v| !v.is_empty());
    let (origin, why) = match step {
        1 | 2 => {
            let var = if step == 1 { "HIP_PATH" } else { "ROCM_PATH" };
            let why = if set(var) {
                "same directory as an earlier candidate"
            } else {
                "not set"
            };
            (var.to_string(), why)
        }
        3 => (
            "Python packages (VIRTUAL_ENV, HIPJIT_PYTHON)".to_string(),
            "none found",
        ),
        4 => ("hipconfig/hipcc on PATH".to_string(), "not found"),
        5 => (
            opt.join("rocm").display().to_string(),
            "same directory as an earlier candidate",
        ),
        6 => (format!("{}/rocm-*", opt.display()), "none"),
        _ => ("/usr".to_string(), "same directory as an earlier candidate"),
    };
    Tried {
        origin,
        dir: None,
        why: why.to_string(),
    }
}
