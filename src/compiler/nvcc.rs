//! nvcc, the compiler of HIP's NVIDIA platform: discovery, identity, and compiling HIP source
//! written in the common HIP/CUDA subset to a cubin, with a small device-side prelude of
//! hipjit's own.
//!
//! # Discovery
//! In this order: an explicit path; `HIPJIT_NVCC`; `bin/nvcc` under `CUDA_PATH`, then
//! `CUDA_HOME`; `nvcc` on `PATH`; `/usr/local/cuda/bin/nvcc`.
//!
//! # The prelude
//! Kernels that include `<hip/hip_runtime.h>` and use HIP's kernel-language names compile
//! unchanged: the compile puts a directory first on the include path whose
//! `hip/hip_runtime.h` (and `hip/hip_runtime_api.h`, `hip/hip_fp16.h`) is [`PRELUDE`], and
//! force-includes it (`-include hip/hip_runtime.h`), so sources that include nothing compile
//! too. It maps `hipThreadIdx_x`, `hipBlockIdx_x`, `hipBlockDim_x`, `hipGridDim_x` (and y,
//! z), `HIP_DYNAMIC_SHARED`, `HIP_KERNEL_NAME`, the `__shfl*` family without mask (HIP's) onto
//! CUDA's `_sync` forms with a full mask, and defines `__HIP_PLATFORM_NVIDIA__`.
//!
//! # Command
//! `nvcc -ccbin <host compiler> -cubin -arch=sm_NN -std=c++17 -O3 -I include -include
//! hip/hip_runtime.h [flags] -o kernel.cubin -x cu kernel.cu`, run with
//! `std::process::Command` (no shell) in a private temporary directory holding the prelude
//! (`include/`) and the source (`kernel.cu`, its bytes as given), so that nvcc's diagnostics
//! name `kernel.cu`, with the environment of [`nvcc_run_env`] (`TMPDIR=.`: nvcc's
//! intermediate files there). The host compiler is the one of nvcc's identity
//! (`host_compiler`); nvcc runs its own steps through a shell, so the
//! command line holds no path of the caller's, the host compiler's only when nvcc's shell
//! reads it as it is, and a temporary directory whose path that shell would interpret is
//! refused ([`NvccError::TempDir`]), as is a flag or define holding what that shell would
//! act on ([`NvccError::ShellSyntax`]: nvcc double-quotes its own `-D`, `-U` and `-I` words,
//! where `$`, `` ` `` and `\` still act, and pastes every other word as it is, where only
//! letters, digits and `_-+=.,/:@%` are taken literally). The standard is C++17 unless
//! [`Nvcc::with_std`] says otherwise; nvcc ignores, with a warning, a standard its host
//! compiler lacks (`-std=c++23` with GCC 12): hipjit makes that an error
//! ([`NvccError::StdIgnored`]) rather than compile under another standard. The caller's flags
//! are checked with nvcc's rules (`flags`; `-I DIR` is accepted).
//!
//! The JIT ([`crate::jit::Jit`]) compiles through [`Nvcc::compile_options`], which takes the
//! same [`crate::compiler::CompileOptions`] as hipcc (with an SM target), stages include
//! directories under safe names and reads nvcc's dependency list (`-MD -MF`) for the header
//! manifest.

use std::ffi::{OsStr, OsString};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::compiler::diagnostics::{parse_nvcc, Diagnostic};
use crate::compiler::host_compiler::{HostCompilerError, HOST_COMPILER_ENV};
use crate::compiler::identity::{identify, CompilerKind, IdentityError};
use crate::compiler::request::{FromKeyRecord, KeyRecord, TrackedHeader};
use crate::compiler::{CompilerIdentity, CxxStd, OptionsError};
use crate::digest::{hex, sha256};
use crate::target::SmTarget;

/// How long one nvcc run may take before it and its children are killed: 300 s (the AMD
/// compile timeout's default).
pub const NVCC_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(300);

/// The environment variable naming nvcc explicitly.
pub const NVCC_ENV: &str = "HIPJIT_NVCC";
/// How errors name the API setting of an explicit nvcc.
pub const EXPLICIT_SETTING: &str = "CompilerConfig::nvcc";

/// hipjit's device-side prelude for nvcc (the text of its `hip/hip_runtime.h`).
pub const PRELUDE: &str = r#"// hipjit's HIP-on-NVIDIA prelude: HIP kernel-language names onto CUDA's.
#pragma once
#ifndef HIPJIT_NVIDIA_PRELUDE
#define HIPJIT_NVIDIA_PRELUDE 1
#ifndef __HIP_PLATFORM_NVIDIA__
#define __HIP_PLATFORM_NVIDIA__ 1
#endif
#ifndef __HIP_PLATFORM_NVCC__
#define __HIP_PLATFORM_NVCC__ 1
#endif
#include <cuda_runtime.h>
#define hipThreadIdx_x threadIdx.x
#define hipThreadIdx_y threadIdx.y
#define hipThreadIdx_z threadIdx.z
#define hipBlockIdx_x blockIdx.x
#define hipBlockIdx_y blockIdx.y
#define hipBlockIdx_z blockIdx.z
#define hipBlockDim_x blockDim.x
#define hipBlockDim_y blockDim.y
#define hipBlockDim_z blockDim.z
#define hipGridDim_x gridDim.x
#define hipGridDim_y gridDim.y
#define hipGridDim_z gridDim.z
#define HIP_DYNAMIC_SHARED(type, var) extern __shared__ type var[];
#define HIP_DYNAMIC_SHARED_ATTRIBUTE
#define HIP_KERNEL_NAME(...) __VA_ARGS__
#define HIP_SYMBOL(X) X
template <typename T> __device__ inline T __shfl(T v, int src, int width = warpSize) {
    return __shfl_sync(0xffffffffu, v, src, width);
}
template <typename T> __device__ inline T __shfl_up(T v, unsigned d, int width = warpSize) {
    return __shfl_up_sync(0xffffffffu, v, d, width);
}
template <typename T> __device__ inline T __shfl_down(T v, unsigned d, int width = warpSize) {
    return __shfl_down_sync(0xffffffffu, v, d, width);
}
template <typename T> __device__ inline T __shfl_xor(T v, int m, int width = warpSize) {
    return __shfl_xor_sync(0xffffffffu, v, m, width);
}
#endif
"#;

/// The files of the prelude directory (under `hip/`) and their text.
const PRELUDE_FILES: [(&str, &str); 3] = [
    ("hip_runtime.h", PRELUDE),
    ("hip_runtime_api.h", PRELUDE),
    ("hip_fp16.h", "#pragma once\n#include <cuda_fp16.h>\n"),
];

/// The build directory's names in [`Nvcc::compile_options`]: the prelude directory, the staged
/// include directories, the dependency list and the output.
const PRELUDE_DIR: &str = "prelude";
const STAGED_INCLUDE: &str = "include";
const DEPS_NAME: &str = "deps.d";
/// The build directory's link to nvcc's host compiler ([`Nvcc::host_compiler_flags`]).
const HOST_DIR: &str = "host";
const CUBIN_NAME: &str = "kernel.cubin";

/// The environment variables nvcc reads that change its output, hashed into the cache key:
/// its own; those its `bin/nvcc.profile` appends to the flags it hands its stages
/// (`INCLUDES`, `SYSTEM_INCLUDES`, `LIBRARIES`, `CUDAFE_FLAGS`, `PTXAS_FLAGS`:
/// `INCLUDES=-DX=1` defines a macro in every compile); those its host compiler reads for
/// headers (`CPATH`, `CPLUS_INCLUDE_PATH`, `C_INCLUDE_PATH`: a header put earlier on them
/// shadows one the manifest names); and `LD_LIBRARY_PATH`, which chooses the shared libraries
/// its stages and host compiler run with. nvcc runs with these, `PATH` and `HOME` alone
/// ([`nvcc_run_env`]). Not `NVCC_CCBIN`, nor `PATH`: the host compiler they select is keyed by
/// content (`host_compiler`).
pub const NVCC_KEY_ENV: &[&str] = &[
    "NVCC_PREPEND_FLAGS",
    "NVCC_APPEND_FLAGS",
    "INCLUDES",
    "SYSTEM_INCLUDES",
    "LIBRARIES",
    "CUDAFE_FLAGS",
    "PTXAS_FLAGS",
    "CPATH",
    "CPLUS_INCLUDE_PATH",
    "C_INCLUDE_PATH",
    "LD_LIBRARY_PATH",
];

/// The variables of hipjit's environment nvcc gets besides [`NVCC_KEY_ENV`] (the host
/// compiler it selects through them is keyed by content): see [`nvcc_run_env`].
pub const NVCC_UNKEYED_ENV: &[&str] = &["PATH", "HOME"];

/// The environment nvcc (and its host compiler, which it runs) gets: [`NVCC_KEY_ENV`] and
/// [`NVCC_UNKEYED_ENV`] from hipjit's own, everything else cleared (gcc's `COMPILER_PATH` and
/// `GCC_EXEC_PREFIX` would choose programs the key does not see), and `LC_ALL=C`, `TMPDIR=.`
/// (nvcc's intermediate files in the private build directory, named there by relative paths in
/// the command lines nvcc hands its shell). The names of the variables taken from hipjit's
/// environment.
pub fn nvcc_run_env() -> impl Iterator<Item = &'static str> + Clone {
    NVCC_KEY_ENV.iter().chain(NVCC_UNKEYED_ENV).copied()
}

/// The bytes nvcc's shell gives a meaning to inside the double quotes nvcc writes paths in.
const SHELL_QUOTED_SPECIAL: &[u8] = crate::compiler::shell_env::NVCC_PATH_REFUSED;

/// A private (mode 0700) build directory for one nvcc run, in the temporary directory
/// ([`std::env::temp_dir`], `TMPDIR`). nvcc writes the absolute path of its input into the
/// command lines it runs through a shell, in double quotes: a temporary directory whose path
/// holds `"`, `$`, `` ` ``, `\` or a newline is refused.
///
/// Errors: [`NvccError::TempDir`] for such a path, [`NvccError::Io`] when it cannot be made.
fn build_directory() -> Result<tempfile::TempDir, NvccError> {
    let parent = std::env::temp_dir();
    if let Some(&b) = parent
        .as_os_str()
        .as_bytes()
        .iter()
        .find(|b| SHELL_QUOTED_SPECIAL.contains(b))
    {
        return Err(NvccError::TempDir {
            path: parent,
            byte: b as char,
        });
    }
    tempfile::Builder::new()
        .prefix("hipjit-nvcc-")
        .permissions(std::os::unix::fs::PermissionsExt::from_mode(0o700))
        .tempdir()
        .map_err(|source| NvccError::Io {
            what: "cannot create a temporary directory in",
            path: parent,
            source,
        })
}

/// Whether `b` may stand in a flag nvcc pastes into its shell command lines unquoted: ASCII
/// letters, digits and `_ - + = . , / : @ %`, which `sh` takes literally. The variables its
/// profile pastes (`INCLUDES`...) may hold these and spaces (between words) alone: a quote
/// would change how the rest of the line is read, `*?[` and `~` would expand.
fn unquoted_safe(b: u8) -> bool {
    b.is_ascii_alphanumeric()
        || matches!(
            b,
            b'_' | b'-' | b'+' | b'=' | b'.' | b',' | b'/' | b':' | b'@' | b'%'
        )
}

/// Checks the words hipjit hands nvcc (`what` names them in the error: "the flag", or the
/// variable they come from); `own`: words hipjit writes itself (its defines among them), else
/// the caller's, where a word's place cannot be told (`-Xptxas -D`, `--entries -DX` hand the
/// `-D` word on unquoted), so every caller's word is held to the unquoted rule. nvcc runs its steps through a shell, pasting the caller's words
/// into the command lines (measured with CUDA 13's `nvcc -dryrun`): a `-D`, `-U` or `-I`
/// word (or the word after a bare one) of nvcc's own in double quotes, where `$`, `` ` `` and
/// `\` still act, and every other word (`-Xcompiler` words, even `-D` ones, `-Xptxas`
/// values) as it is, where anything but [`unquoted_safe`] bytes may act. Such a byte is
/// refused rather than run.
///
/// Errors: [`NvccError::ShellSyntax`] naming the word and the byte.
fn check_shell_words(words: &[String], what: &str, own: bool) -> Result<(), NvccError> {
    const BARE: [&str; 6] = [
        "-D",
        "-U",
        "-I",
        "--define-macro",
        "--undefine-macro",
        "--include-path",
    ];
    let mut after_bare = false;
    let mut after_passing = false;
    for w in words {
        // A word handed on to a stage (`-Xcompiler -DZ=1`) is pasted as it is.
        let quoted = own
            && !after_passing
            && (after_bare || ["-D", "-U", "-I"].iter().any(|p| w.starts_with(p)));
        after_bare = BARE.contains(&w.as_str());
        after_passing = w.starts_with("-X") && !w.contains('=') || w.ends_with("-options");
        let bad = w.bytes().find(|&b| {
            b.is_ascii_control()
                || if quoted {
                    matches!(b, b'$' | b'`' | b'\\')
                } else {
                    !unquoted_safe(b)
                }
        });
        if let Some(b) = bad {
            return Err(NvccError::ShellSyntax {
                what: format!("{what} `{w}`"),
                byte: b as char,
            });
        }
    }
    Ok(())
}

/// `cmd` (nvcc) with its environment set as [`nvcc_run_env`] says.
fn run_environment(cmd: &mut Command) -> &mut Command {
    cmd.env_clear();
    for k in nvcc_run_env() {
        if let Some(v) = std::env::var_os(k) {
            cmd.env(k, v);
        }
    }
    cmd.env("LC_ALL", "C").env("TMPDIR", ".")
}

/// An error finding or running nvcc.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum NvccError {
    /// No nvcc in the discovery order.
    #[error(
        "nvcc not found; tried: {}. Install the CUDA toolkit, or `pip install nvidia-cuda-nvcc \
         nvidia-cuda-crt nvidia-cuda-runtime` and set HIPJIT_NVCC",
        tried.join(", ")
    )]
    NotFound {
        /// Each candidate tried.
        tried: Vec<String>,
    },
    /// `HIPJIT_NVCC` or [`CompilerConfig::nvcc`](crate::compiler::CompilerConfig::nvcc)
    /// names no usable nvcc: missing, not an executable regular file, or a path its shell
    /// would misparse. Never a fallback to another nvcc or compiler.
    #[error("the nvcc set by {what} ({}) is not usable: {problem}", path.display())]
    ExplicitNotUsable {
        /// The setting: `EXPLICIT_SETTING` or `NVCC_ENV`.
        what: &'static str,
        /// The path as given.
        path: PathBuf,
        /// What is wrong with it.
        problem: String,
    },
    /// Running nvcc failed to start, or an I/O step around it failed.
    #[error("{what} {}: {source}", path.display())]
    Io {
        /// What was being done.
        what: &'static str,
        /// The path involved.
        path: PathBuf,
        /// The error.
        source: std::io::Error,
    },
    /// A flag nvcc is not given (`flags`).
    #[error(transparent)]
    Options(#[from] OptionsError),
    /// nvcc's host compiler could not be found or identified
    /// (`host_compiler`).
    #[error(transparent)]
    HostCompiler(#[from] HostCompilerError),
    /// `NVCC_PREPEND_FLAGS` or `NVCC_APPEND_FLAGS` names a host compiler (`-ccbin`,
    /// `--compiler-bindir`): hipjit keys the host compiler by content and names it to nvcc
    /// itself, from `NVCC_CCBIN` or `PATH`.
    #[error(
        "{variable} names a host compiler ({flag}); hipjit keys nvcc's host compiler by its \
         content and takes it from NVCC_CCBIN or PATH: set NVCC_CCBIN instead"
    )]
    HostCompilerFlag {
        /// The variable.
        variable: &'static str,
        /// The flag as found in it.
        flag: String,
    },
    /// A flag, or a variable nvcc pastes into its command lines, holds a byte the shell nvcc
    /// runs its steps with would interpret (see the module documentation).
    #[error(
        "refusing to run nvcc with {what}: it holds {byte:?}, which the shell nvcc runs its \
         steps with would interpret (nvcc pastes flags into sh command lines; hipjit itself \
         starts no shell)"
    )]
    ShellSyntax {
        /// The flag or variable, with its text.
        what: String,
        /// The byte.
        byte: char,
    },
    /// The temporary directory's path holds a byte nvcc's shell would interpret: nvcc writes
    /// paths below it into the command lines it runs through a shell.
    #[error(
        "the temporary directory {} holds {byte:?}, which the shell nvcc runs its steps with \
         would interpret in the paths below it; set TMPDIR to a directory without `\"`, `$`, \
         `` ` ``, `\\` or a newline",
        path.display()
    )]
    TempDir {
        /// The directory ([`std::env::temp_dir`]).
        path: PathBuf,
        /// The byte.
        byte: char,
    },
    /// nvcc's path (as given or resolved) holds `"`, `$`, `` ` ``, `\` or a newline: nvcc
    /// writes its own directory in double quotes into the command lines it runs with `sh`
    /// (`check_program`).
    #[error(transparent)]
    UnsafePath(#[from] crate::compiler::shell_env::UnsafeProgramPath),
    /// `NVCC_PREPEND_FLAGS` or `NVCC_APPEND_FLAGS` holds a flag the caller's flags could not
    /// hold (`flags`): nvcc adds them to every command line.
    #[error("{variable}: {reason}")]
    EnvironmentFlag {
        /// The variable.
        variable: &'static str,
        /// Why its flag is refused.
        reason: Box<NvccError>,
    },
    /// nvcc said it ignored the standard asked for (its host compiler lacks it).
    #[error(
        "nvcc ignored {flag}: {message} (the host compiler nvcc uses does not support it; \
             pick an older standard or point nvcc at a newer host compiler)"
    )]
    StdIgnored {
        /// The flag, e.g. `-std=c++23`.
        flag: String,
        /// nvcc's warning.
        message: String,
    },
    /// An include directory of the options does not exist or is not a directory.
    #[error("include directory {} is not usable: {reason}", path.display())]
    IncludeDir {
        /// The directory as given.
        path: PathBuf,
        /// What is wrong.
        reason: String,
    },
    /// nvcc succeeded but left no readable dependency list (`-MD -MF`): the files it read are
    /// unknown, so the result cannot be cached safely.
    #[error(
        "nvcc exited 0 but its dependency list {reason}: {}",
        super::shell_words(command)
    )]
    NoDependencies {
        /// What is wrong with it.
        reason: String,
        /// The command line, program first, one argument per item (build-directory-relative
        /// names).
        command: Vec<String>,
    },
    /// nvcc exited with an error.
    #[error("nvcc failed ({status}): {}\n{log}", super::shell_words(command))]
    Failed {
        /// The exit status.
        status: String,
        /// The command line, program first, one argument per item (build-directory-relative
        /// names).
        command: Vec<String>,
        /// nvcc's output (lossy where it is not UTF-8).
        log: String,
        /// The diagnostics parsed from it (`parse_nvcc`), the
        /// source named `kernel.cu`, with escaped forms where the output was not UTF-8.
        diagnostics: Vec<Diagnostic>,
    },
}

/// A discovered nvcc with its identity.
#[derive(Debug, Clone)]
pub struct Nvcc {
    std: CxxStd,
    path: PathBuf,
    identity: CompilerIdentity,
}

fn executable(p: &Path) -> bool {
    hip_sys::discovery::is_executable_file(p)
}

/// [`Nvcc::prelude_headers`], hashed once per process (the prelude is a constant of this
/// build), not at every key.
fn prelude_tracked() -> &'static [TrackedHeader] {
    static MADE: std::sync::OnceLock<Vec<TrackedHeader>> = std::sync::OnceLock::new();
    MADE.get_or_init(|| {
        PRELUDE_FILES
            .iter()
            .map(|(name, text)| TrackedHeader {
                include: format!("hip/{name}"),
                path: PathBuf::from(format!("<hipjit nvcc prelude>/hip/{name}")),
                sha256: hex(&sha256(text.as_bytes())),
            })
            .collect()
    })
}

impl Nvcc {
    /// Finds nvcc in the documented order (`explicit` first) and reads `nvcc --version`.
    ///
    /// Errors: [`NvccError::ExplicitNotUsable`] for an explicit or `HIPJIT_NVCC` path that is
    /// missing, not an executable or refused, [`NvccError::NotFound`] listing the candidates, [`NvccError::UnsafePath`]
    /// for an nvcc whose path its shell would misparse, [`NvccError::Failed`] when `--version`
    /// fails.
    pub fn discover(explicit: Option<&Path>) -> Result<Nvcc, NvccError> {
        Nvcc::at(&Nvcc::find(explicit)?)
    }

    /// [`Nvcc::discover`], with the identity remembered in `dir` instead of the per-user
    /// default ([`crate::compiler::identity`]), so that a fresh process with a warm directory
    /// starts no nvcc and hashes nothing. `dir` must be private to the user (never a shared
    /// cache root).
    ///
    /// Errors: as [`Nvcc::discover`] (a directory that cannot be written is not an error: the
    /// identity is then not remembered).
    pub fn discover_cached(explicit: Option<&Path>, dir: &Path) -> Result<Nvcc, NvccError> {
        Nvcc::identify(&Nvcc::find(explicit)?, Some(dir))
    }

    /// The nvcc executable in the documented order, without running it.
    ///
    /// Errors: as [`Nvcc::discover`], less the `--version` failure.
    pub fn find(explicit: Option<&Path>) -> Result<PathBuf, NvccError> {
        let explicit = match explicit {
            Some(p) => Some((EXPLICIT_SETTING, p.to_path_buf())),
            None => std::env::var_os(NVCC_ENV)
                .filter(|v| !v.is_empty())
                .map(|p| (NVCC_ENV, PathBuf::from(p))),
        };
        if let Some((what, path)) = explicit {
            let problem = crate::compiler::discovery::problem_with(&path).or_else(|| {
                let absolute = std::path::absolute(&path).unwrap_or_else(|_| path.clone());
                crate::compiler::shell_env::check_program("nvcc", &absolute, SHELL_QUOTED_SPECIAL)
                    .err()
                    .map(|e| format!("refused: {e}"))
            });
            return match problem {
                None => Ok(path),
                Some(problem) => Err(NvccError::ExplicitNotUsable {
                    what,
                    path,
                    problem,
                }),
            };
        }
        let mut tried = Vec::new();
        let mut candidates: Vec<PathBuf> = Vec::new();
        for var in ["CUDA_PATH", "CUDA_HOME"] {
            if let Some(root) = std::env::var_os(var).filter(|v| !v.is_empty()) {
                candidates.push(Path::new(&root).join("bin/nvcc"));
            }
        }
        if let Some(p) = hip_sys::discovery::find_on_path(&hip_sys::discovery::ProcessEnv, "nvcc") {
            candidates.push(p);
        }
        candidates.push(PathBuf::from("/usr/local/cuda/bin/nvcc"));
        for c in candidates {
            if executable(&c) {
                return Ok(c);
            }
            tried.push(c.display().to_string());
        }
        Err(NvccError::NotFound { tried })
    }

    /// nvcc at `path` (not checked to be executable), its identity from the per-user directory
    /// or computed (`--version` run, its toolkit's files hashed: [`crate::compiler::identity`]).
    ///
    /// Errors: as [`Nvcc::discover`].
    pub fn at(path: &Path) -> Result<Nvcc, NvccError> {
        Nvcc::identify(path, None)
    }

    fn identify(path: &Path, dir: Option<&Path>) -> Result<Nvcc, NvccError> {
        // nvcc runs in its build directory: a relative path is made absolute here, against the
        // working directory it was found from.
        let path = &std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf());
        crate::compiler::shell_env::check_program("nvcc", path, SHELL_QUOTED_SPECIAL)?;
        let mut env: Vec<(String, OsString)> = nvcc_run_env()
            .chain([HOST_COMPILER_ENV])
            .filter_map(|k| std::env::var_os(k).map(|v| (k.to_string(), v)))
            .collect();
        // A relative `NVCC_CCBIN` path names a program by the working directory: the identity
        // (and its memo's name) holds it made absolute, so that another directory is another
        // host compiler.
        for (k, v) in &mut env {
            if k == HOST_COMPILER_ENV && v.as_bytes().contains(&b'/') && !Path::new(v).is_absolute()
            {
                if let Ok(abs) = std::path::absolute(Path::new(v)) {
                    *v = abs.into_os_string();
                }
            }
        }
        let identity = identify(
            CompilerKind::Nvcc,
            path,
            &env,
            std::time::Duration::from_secs(120),
            dir,
        )
        .map_err(|e| match e {
            IdentityError::Run { reason, args, .. } => NvccError::Failed {
                status: reason,
                command: std::iter::once(path.display().to_string())
                    .chain(args.split_whitespace().map(String::from))
                    .collect(),
                log: String::new(),
                diagnostics: Vec::new(),
            },
            IdentityError::Read { path, source } => NvccError::Io {
                what: "cannot read (to fingerprint nvcc)",
                path,
                source,
            },
            IdentityError::HostCompiler(e) => NvccError::HostCompiler(e),
            IdentityError::UnsafePath(e) => NvccError::UnsafePath(e),
        })?;
        Ok(Nvcc {
            std: CxxStd::default(),
            path: path.to_path_buf(),
            identity,
        })
    }

    /// This nvcc compiling with the standard `std` (the default is C++17), spelled by
    /// [`CompilerKind::std_flag`].
    pub fn with_std(mut self, std: CxxStd) -> Nvcc {
        self.std = std;
        self
    }

    /// The C++ standard its compiles use.
    pub fn std(&self) -> CxxStd {
        self.std
    }

    fn std_flag(&self) -> String {
        CompilerKind::Nvcc.std_flag(self.std, &self.identity())
    }

    /// The executable.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// `nvcc --version` output (its identity in cache keys).
    pub fn version_text(&self) -> &str {
        &self.identity.version
    }

    /// The release, e.g. `13.0` (from `release 13.0, V13.0.88`), when present.
    pub fn release(&self) -> Option<&str> {
        let v = &self.identity.version;
        let i = v.find("release ")? + "release ".len();
        let rest = &v[i..];
        Some(&rest[..rest.find(',')?])
    }

    /// The compiler identity hashed into cache keys and recorded in cache entries: kind, path
    /// with symlinks resolved, `--version` output, toolkit fingerprint.
    pub fn identity(&self) -> CompilerIdentity {
        self.identity.clone()
    }

    /// [`Nvcc::identity`], borrowed.
    pub fn identity_ref(&self) -> &CompilerIdentity {
        &self.identity
    }

    /// The command line of compiling for `sm` with `flags` (after the nvcc path) less its
    /// file names: what an entry records as its command.
    pub fn key_flags(&self, sm: SmTarget, flags: &[String]) -> Vec<String> {
        let mut f = self.own_flags(sm);
        f.insert(2, self.std_flag());
        f.extend(flags.iter().cloned());
        f.extend(["-x".to_string(), "cu".to_string()]);
        f
    }

    /// hipjit's own flags (the key record's `flags` field): `-cubin -arch=sm_NN -O3 -include
    /// hip/hip_runtime.h`.
    fn own_flags(&self, sm: SmTarget) -> Vec<String> {
        vec![
            "-cubin".to_string(),
            format!("-arch={sm}"),
            "-O3".into(),
            "-include".into(),
            "hip/hip_runtime.h".into(),
        ]
    }

    /// The headers of hipjit's own that every compile sees, as hashed into the key: the
    /// [`PRELUDE`] (as `hip/hip_runtime.h` and `hip/hip_runtime_api.h`) and `hip/hip_fp16.h`.
    pub fn prelude_headers() -> Vec<TrackedHeader> {
        prelude_tracked().to_vec()
    }

    /// The request record ([`crate::compiler::request`]) of compiling `source` (its bytes) for
    /// `sm` with `flags`, handed to `K` (the cache's key or the record's fields): the source, the prelude as tracked headers
    /// ([`Nvcc::prelude_headers`]), hipjit's own flags, the standard as nvcc is given it,
    /// `flags` as the extra flags, the SM target in place of target IDs, code object version
    /// 0, nvcc's identity ([`Nvcc::identity`]) and the variables of [`NVCC_KEY_ENV`] as read
    /// now.
    pub fn key<K: FromKeyRecord>(
        &self,
        source: impl AsRef<[u8]>,
        sm: SmTarget,
        flags: &[String],
    ) -> K {
        let headers = prelude_tracked();
        let own = self.own_flags(sm);
        let std = self.std_flag();
        let targets = [sm.to_string()];
        let values: Vec<Option<OsString>> = NVCC_KEY_ENV.iter().map(std::env::var_os).collect();
        let env: Vec<(&str, Option<&OsStr>)> = NVCC_KEY_ENV
            .iter()
            .zip(&values)
            .map(|(n, v)| (*n, v.as_deref()))
            .collect();
        K::from_record(&KeyRecord {
            source: source.as_ref(),
            // `Nvcc::compile` writes the source as this file.
            source_name: "kernel.cu",
            flags: &own,
            std: &std,
            extra_flags: flags,
            targets: &targets,
            code_object_version: 0,
            compiler: &self.identity,
            env: &env,
            builtin_headers: headers,
            headers: &[],
            extra: &[],
        })
    }

    /// Checks the flags of `NVCC_PREPEND_FLAGS` and `NVCC_APPEND_FLAGS` (nvcc adds them to
    /// every command line) with the rules of the caller's (`flags`; a host
    /// compiler named there, `-ccbin`, has a message of its own), and names nvcc's host
    /// compiler, the one its identity holds, so that what runs is what is keyed: by its
    /// absolute path when every byte of it is one nvcc's shell reads as it is (ASCII letters,
    /// digits, `/`, `.`, `_`, `+`, `-`), else through a link in the build directory `build`
    /// (`host/<name>`; the program then sees that as its `argv[0]`). Gives the flags
    /// (`-ccbin <program>`).
    ///
    /// Errors: [`NvccError::HostCompilerFlag`], [`NvccError::EnvironmentFlag`],
    /// [`NvccError::Io`] when the link cannot be made.
    fn host_compiler_flags(&self, build: &Path) -> Result<[String; 2], NvccError> {
        for variable in ["NVCC_PREPEND_FLAGS", "NVCC_APPEND_FLAGS"] {
            let Some(value) = std::env::var_os(variable) else {
                continue;
            };
            let value = value.to_string_lossy();
            let words: Vec<String> = value.split_ascii_whitespace().map(String::from).collect();
            if let Some(flag) = words
                .iter()
                .find(|w| w.starts_with("-ccbin") || w.starts_with("--compiler-bindir"))
            {
                return Err(NvccError::HostCompilerFlag {
                    variable,
                    flag: flag.clone(),
                });
            }
            Nvcc::check_flags(&words).map_err(|e| NvccError::EnvironmentFlag {
                variable,
                reason: Box::new(e),
            })?;
            check_shell_words(&words, variable, false)?;
        }
        // nvcc.profile pastes these into its command lines as they are: shell syntax there
        // would run.
        for variable in [
            "INCLUDES",
            "SYSTEM_INCLUDES",
            "LIBRARIES",
            "CUDAFE_FLAGS",
            "PTXAS_FLAGS",
        ] {
            let Some(value) = std::env::var_os(variable) else {
                continue;
            };
            if let Some(&b) = value
                .as_bytes()
                .iter()
                .find(|&&b| !(unquoted_safe(b) || b == b' '))
            {
                return Err(NvccError::ShellSyntax {
                    what: format!("{variable}={}", value.to_string_lossy()),
                    byte: b as char,
                });
            }
        }
        let host = self.identity.host_compiler.as_ref().ok_or_else(|| {
            NvccError::HostCompiler(HostCompilerError::NotFound {
                name: crate::compiler::host_compiler::DEFAULT_HOST_COMPILER.into(),
                searched: Vec::new(),
            })
        })?;
        let path = host.path.as_os_str().as_bytes();
        if path
            .iter()
            .all(|&b| b.is_ascii_alphanumeric() || matches!(b, b'/' | b'.' | b'_' | b'+' | b'-'))
        {
            return Ok(["-ccbin".into(), host.path.display().to_string()]);
        }
        let dir = build.join(HOST_DIR);
        std::fs::create_dir(&dir).map_err(|source| NvccError::Io {
            what: "cannot create",
            path: dir.clone(),
            source,
        })?;
        let name = host.name();
        let link = dir.join(&name);
        std::os::unix::fs::symlink(&host.path, &link).map_err(|source| NvccError::Io {
            what: "cannot create",
            path: link,
            source,
        })?;
        Ok(["-ccbin".into(), format!("{HOST_DIR}/{name}")])
    }

    /// The arguments of compiling `source_file` to `out` (after the nvcc path).
    pub fn arguments(
        &self,
        sm: SmTarget,
        prelude_dir: &Path,
        flags: &[String],
        source_file: &Path,
        out: &Path,
    ) -> Vec<OsString> {
        let mut a: Vec<OsString> = vec![
            "-cubin".into(),
            format!("-arch={sm}").into(),
            self.std_flag().into(),
            "-O3".into(),
            "-I".into(),
            prelude_dir.into(),
            "-include".into(),
            "hip/hip_runtime.h".into(),
        ];
        a.extend(flags.iter().map(OsString::from));
        a.extend([
            "-o".into(),
            out.into(),
            "-x".into(),
            "cu".into(),
            source_file.into(),
        ]);
        a
    }

    /// Compiles `source` (its bytes) for `sm` to a cubin (its bytes), in a temporary
    /// directory.
    ///
    /// Errors: as [`Nvcc::compile_logged`].
    pub fn compile(
        &self,
        source: impl AsRef<[u8]>,
        sm: SmTarget,
        flags: &[String],
    ) -> Result<Vec<u8>, NvccError> {
        self.compile_logged(source, sm, flags)
            .map(|(cubin, _)| cubin)
    }

    /// Checks `flags` with nvcc's rules ([`CompilerKind::check_extra_flags`]), `-I DIR` and
    /// `-IDIR` accepted.
    ///
    /// Errors: [`NvccError::Options`] naming the flag.
    pub fn check_flags(flags: &[String]) -> Result<(), NvccError> {
        let mut rest = Vec::with_capacity(flags.len());
        let mut it = flags.iter();
        while let Some(f) = it.next() {
            if f == "-I" {
                let _ = it.next();
            } else if !f.starts_with("-I") {
                rest.push(f.clone());
            }
        }
        CompilerKind::Nvcc.check_extra_flags(&rest)?;
        Ok(())
    }

    /// hipjit's own flags for `options` (an SM target's), as hashed into the direct key and
    /// written on the command line, include directories by their staged names
    /// (`include/<index>`): `-cubin -arch=sm_NN -O<level> -include hip/hip_runtime.h
    /// [--use_fast_math] [-lineinfo] [-v] -DNAME[=VALUE]... -I include/<i>...`.
    pub fn option_flags(&self, options: &crate::compiler::CompileOptions) -> Vec<String> {
        let sm = options
            .sm_targets
            .first()
            .map_or_else(String::new, |t| t.to_string());
        let mut f = vec![
            "-cubin".to_string(),
            format!("-arch={sm}"),
            options.opt_level.flag().to_string(),
            "-include".into(),
            "hip/hip_runtime.h".into(),
        ];
        if options.fast_math {
            f.push("--use_fast_math".into());
        }
        if options.line_info {
            f.push("-lineinfo".into());
        }
        if options.verbose {
            f.push("-v".into());
        }
        for (name, value) in &options.defines {
            match value {
                Some(v) => f.push(format!("-D{name}={v}")),
                None => f.push(format!("-D{name}")),
            }
        }
        for i in 0..options.include_dirs.len() {
            f.push("-I".into());
            f.push(format!("{STAGED_INCLUDE}/{i}"));
        }
        f
    }

    /// The request record ([`crate::compiler::request`]) of compiling `source` with `options` (an SM
    /// target's) and the caller's signature `extra`: the source, [`Nvcc::option_flags`], the
    /// standard as nvcc is given it, the extra flags, the SM target, code object version 0,
    /// nvcc's identity, the variables of [`NVCC_KEY_ENV`] as read now and the prelude
    /// ([`Nvcc::prelude_headers`]), handed to `K` (the cache's direct key or the record's fields).
    pub fn request<K: FromKeyRecord>(
        &self,
        source: &[u8],
        options: &crate::compiler::CompileOptions,
        extra: &[u8],
    ) -> K {
        let headers = prelude_tracked();
        let flags = self.option_flags(options);
        let std = CompilerKind::Nvcc.std_flag(options.std, &self.identity);
        let targets = options.target_names();
        let values: Vec<Option<OsString>> = NVCC_KEY_ENV.iter().map(std::env::var_os).collect();
        let env: Vec<(&str, Option<&OsStr>)> = NVCC_KEY_ENV
            .iter()
            .zip(&values)
            .map(|(n, v)| (*n, v.as_deref()))
            .collect();
        crate::compiler::request::keyed_options(options);
        K::from_record(&KeyRecord {
            source,
            source_name: options.source_file_name(),
            flags: &flags,
            std: &std,
            extra_flags: &options.extra_flags,
            targets: &targets,
            code_object_version: 0,
            compiler: &self.identity,
            env: &env,
            builtin_headers: headers,
            headers: &options.headers,
            extra,
        })
    }

    /// Compiles `source` (its bytes) with `options` (one SM target: checked by
    /// [`crate::compiler::CompileOptions::validate`]) to a cubin, in a private build directory
    /// (mode 0700) holding the source under [`crate::compiler::CompileOptions::source_name`],
    /// the prelude and each include directory as a symlink `include/<index>`, so that the
    /// command line holds no user path and the diagnostics name the user's files. nvcc writes
    /// its dependency list (`-MD -MF deps.d`), which becomes
    /// [`crate::compiler::CompileOutput::dependencies`] (the prelude left out: it is in the
    /// key). nvcc and its children are killed after `timeout`.
    ///
    /// Errors: [`NvccError::Options`] for invalid options, [`NvccError::IncludeDir`],
    /// [`NvccError::Io`] for the build directory or a run that could not start or timed out,
    /// [`NvccError::StdIgnored`], [`NvccError::Failed`] with the command line, nvcc's output
    /// and its parsed diagnostics, [`NvccError::NoDependencies`].
    pub fn compile_options(
        &self,
        source: &[u8],
        options: &crate::compiler::CompileOptions,
        timeout: std::time::Duration,
    ) -> Result<crate::compiler::CompileOutput, NvccError> {
        options.validate()?;
        let io = |what, path: &Path| {
            let path = path.to_path_buf();
            move |source| NvccError::Io { what, path, source }
        };
        let tmp = build_directory()?;
        let hip = tmp.path().join(PRELUDE_DIR).join("hip");
        std::fs::create_dir_all(&hip).map_err(io("cannot create", &hip))?;
        for (name, text) in PRELUDE_FILES {
            let p = hip.join(name);
            std::fs::write(&p, text).map_err(io("cannot write", &p))?;
        }
        if !options.headers.is_empty() {
            super::write_headers(tmp.path(), &options.headers)
                .map_err(|(path, source)| io("cannot write", &path)(source))?;
        }
        if !options.include_dirs.is_empty() {
            let inc = tmp.path().join(STAGED_INCLUDE);
            std::fs::create_dir(&inc).map_err(io("cannot create", &inc))?;
            let canonical = super::canonical_include_dirs(&options.include_dirs)
                .map_err(|(path, reason)| NvccError::IncludeDir { path, reason })?;
            for (i, real) in canonical.iter().enumerate() {
                let link = inc.join(i.to_string());
                std::os::unix::fs::symlink(real, &link).map_err(io("cannot create", &link))?;
            }
        }
        let source_name = options.source_file_name();
        let src = tmp.path().join(source_name);
        std::fs::write(&src, source).map_err(io("cannot write", &src))?;
        let mut command: Vec<String> = vec![self.path.display().to_string()];
        let mut flags = self.option_flags(options).into_iter();
        // hipjit's flags with the prelude directory first on the include path.
        command.extend(flags.by_ref().take(3));
        command.push(CompilerKind::Nvcc.std_flag(options.std, &self.identity));
        command.extend(["-I".into(), PRELUDE_DIR.into()]);
        if !options.headers.is_empty() {
            // The in-memory headers next, ahead of the include directories.
            command.extend(["-I".into(), super::HEADERS_DIR.into()]);
        }
        command.extend(self.host_compiler_flags(tmp.path())?);
        command.extend(flags);
        command.extend(options.extra_flags.iter().cloned());
        command.extend(
            [
                "-MD",
                "-MF",
                DEPS_NAME,
                "-o",
                CUBIN_NAME,
                "-x",
                "cu",
                source_name,
            ]
            .map(String::from),
        );
        check_shell_words(&command[1..], "the flag", true)?;
        check_shell_words(&options.extra_flags, "the flag", false)?;
        let mut cmd = Command::new(&self.path);
        run_environment(&mut cmd)
            .args(&command[1..])
            .current_dir(tmp.path());
        let started_at = crate::fs::stat::filesystem_now(tmp.path());
        let started = std::time::Instant::now();
        let output = match crate::process::run(&mut cmd, timeout) {
            Ok(f) => f,
            Err(crate::process::RunError::Timeout(_)) => {
                return Err(io("cannot run", &self.path)(std::io::Error::new(
                    std::io::ErrorKind::TimedOut,
                    format!(
                        "it ran longer than {} s and was killed",
                        timeout.as_secs_f64()
                    ),
                )))
            }
            Err(e) => return Err(io("cannot run", &self.path)(std::io::Error::other(e))),
        };
        let duration = started.elapsed();
        let mut raw = output.stderr.clone();
        raw.extend_from_slice(&output.stdout);
        let log = String::from_utf8_lossy(&raw).into_owned();
        let include_dirs = &options.include_dirs;
        let rename = |f: &str| {
            let rel = f.strip_prefix("./").unwrap_or(f);
            if let Some(name) = rel.strip_prefix(&format!("{}/", super::HEADERS_DIR)) {
                return name.to_string();
            }
            rel.strip_prefix(&format!("{STAGED_INCLUDE}/"))
                .and_then(|rest| rest.split_once('/'))
                .and_then(|(i, tail)| {
                    let dir = include_dirs.get(i.parse::<usize>().ok()?)?;
                    Some(dir.join(tail).display().to_string())
                })
                .unwrap_or_else(|| f.to_string())
        };
        let diagnostics = parse_nvcc(&raw, &rename);
        let std_flag = CompilerKind::Nvcc.std_flag(options.std, &self.identity);
        if let Some(line) = log
            .lines()
            .find(|l| l.contains(&std_flag) && l.contains("Flag will be ignored"))
        {
            return Err(NvccError::StdIgnored {
                flag: std_flag,
                message: line.trim().to_string(),
            });
        }
        let command_text = || command.clone();
        if !output.status.success() {
            return Err(NvccError::Failed {
                status: output.status.to_string(),
                command: command_text(),
                log,
                diagnostics,
            });
        }
        let out = tmp.path().join(CUBIN_NAME);
        let cubin = crate::fs::read::read_file(
            &out,
            crate::fs::read::CODE_OBJECT_LIMIT,
            "nvcc's output",
            crate::fs::read::Streams::None,
        )
        .map_err(|e| io("cannot read", &out)(e.into_io_error()))?;
        let deps_path = tmp.path().join(DEPS_NAME);
        let text = crate::fs::read::read_file(
            &deps_path,
            crate::fs::read::TEXT_OUTPUT_LIMIT,
            "nvcc's dependency list",
            crate::fs::read::Streams::None,
        )
        .map_err(|e| NvccError::NoDependencies {
            reason: format!("cannot be read ({})", e.reason()),
            command: command_text(),
        })?;
        let deps = super::depfile::parse(&text).ok_or_else(|| NvccError::NoDependencies {
            reason: "holds no rule".into(),
            command: command_text(),
        })?;
        let prelude = tmp.path().join(PRELUDE_DIR);
        let headers = tmp.path().join(super::HEADERS_DIR);
        let dependencies = super::depfile::map_build_paths(
            &deps,
            source_name,
            STAGED_INCLUDE,
            include_dirs,
            tmp.path(),
        )
        .into_iter()
        .filter(|d| !d.path.starts_with(&prelude) && !d.path.starts_with(&headers))
        .collect();
        Ok(crate::compiler::CompileOutput {
            code_object: cubin,
            command,
            log: String::from_utf8_lossy(&output.stderr).into_owned(),
            diagnostics,
            dependencies,
            started: started_at,
            llvm_ir: None,
            isa: None,
            duration,
        })
    }

    /// [`Nvcc::compile`], also returning nvcc's warnings, parsed (its source named
    /// `kernel.cu`).
    ///
    /// Errors: [`NvccError::Options`] for a refused flag, [`NvccError::Io`] for the temporary
    /// files, [`NvccError::StdIgnored`] when nvcc ignored the standard, [`NvccError::Failed`]
    /// with the command line and nvcc's output.
    pub fn compile_logged(
        &self,
        source: impl AsRef<[u8]>,
        sm: SmTarget,
        flags: &[String],
    ) -> Result<(Vec<u8>, Vec<Diagnostic>), NvccError> {
        Nvcc::check_flags(flags)?;
        let source = source.as_ref();
        let io = |what, path: &Path| {
            let path = path.to_path_buf();
            move |source| NvccError::Io { what, path, source }
        };
        let tmp = build_directory()?;
        let inc = tmp.path().join("include");
        let hip = inc.join("hip");
        std::fs::create_dir_all(&hip).map_err(io("cannot create", &hip))?;
        for (name, text) in PRELUDE_FILES {
            let p = hip.join(name);
            std::fs::write(&p, text).map_err(io("cannot write", &p))?;
        }
        let src = tmp.path().join("kernel.cu");
        std::fs::write(&src, source).map_err(io("cannot write", &src))?;
        let out = tmp.path().join("kernel.cubin");
        // Names relative to the directory nvcc runs in: its diagnostics say `kernel.cu`.
        let mut args: Vec<OsString> = self
            .host_compiler_flags(tmp.path())?
            .into_iter()
            .map(OsString::from)
            .collect();
        args.extend(self.arguments(
            sm,
            Path::new("include"),
            flags,
            Path::new("kernel.cu"),
            Path::new("kernel.cubin"),
        ));
        // Through the compiler stage's runner: a deadline covering its output, bounded
        // output, and nvcc and its children die with hipjit (see `process`).
        let words: Vec<String> = args
            .iter()
            .map(|a| a.to_string_lossy().into_owned())
            .collect();
        check_shell_words(&words, "the flag", true)?;
        check_shell_words(flags, "the flag", false)?;
        let mut cmd = Command::new(&self.path);
        run_environment(&mut cmd)
            .args(&args)
            .current_dir(tmp.path());
        let output = match crate::process::run(&mut cmd, NVCC_TIMEOUT) {
            Ok(f) => f,
            Err(crate::process::RunError::Timeout(_)) => {
                return Err(io("cannot run", &self.path)(std::io::Error::new(
                    std::io::ErrorKind::TimedOut,
                    format!(
                        "it ran longer than {} s and was killed",
                        NVCC_TIMEOUT.as_secs()
                    ),
                )))
            }
            Err(e) => return Err(io("cannot run", &self.path)(std::io::Error::other(e))),
        };
        let mut raw = output.stderr.clone();
        raw.extend_from_slice(&output.stdout);
        let log = String::from_utf8_lossy(&raw).into_owned();
        let diagnostics = parse_nvcc(&raw, &|f: &str| f.to_string());
        let std_flag = self.std_flag();
        if let Some(line) = log
            .lines()
            .find(|l| l.contains(&std_flag) && l.contains("Flag will be ignored"))
        {
            return Err(NvccError::StdIgnored {
                flag: std_flag,
                message: line.trim().to_string(),
            });
        }
        if !output.status.success() {
            return Err(NvccError::Failed {
                status: output.status.to_string(),
                command: std::iter::once(self.path.as_os_str())
                    .chain(args.iter().map(|a| a.as_os_str()))
                    .map(|a| a.to_string_lossy().into_owned())
                    .collect(),
                log,
                diagnostics,
            });
        }
        let cubin = crate::fs::read::read_file(
            &out,
            crate::fs::read::CODE_OBJECT_LIMIT,
            "nvcc's output",
            crate::fs::read::Streams::None,
        )
        .map_err(|e| io("cannot read", &out)(e.into_io_error()))?;
        Ok((cubin, diagnostics))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn an_explicit_nvcc_that_cannot_be_used_is_an_error_naming_the_setting_and_why() {
        let dir = tempfile::tempdir().unwrap();
        let plain = dir.path().join("nvcc");
        std::fs::write(&plain, "#!/bin/sh\n").unwrap();
        std::fs::set_permissions(&plain, std::fs::Permissions::from_mode(0o644)).unwrap();
        let quoted = dir.path().join("a\"b");
        std::fs::create_dir(&quoted).unwrap();
        let quoted = quoted.join("nvcc");
        std::fs::write(&quoted, "#!/bin/sh\n").unwrap();
        std::fs::set_permissions(&quoted, std::fs::Permissions::from_mode(0o755)).unwrap();
        for (path, why) in [
            (Path::new("/opt/nowhere/nvcc"), "missing"),
            (plain.as_path(), "not executable"),
            (dir.path(), "not a regular file"),
            (quoted.as_path(), "refused"),
        ] {
            let err = Nvcc::find(Some(path)).unwrap_err();
            assert!(
                matches!(&err, NvccError::ExplicitNotUsable { what, .. } if *what == EXPLICIT_SETTING),
                "{err}"
            );
            let text = err.to_string();
            assert!(
                text.contains(EXPLICIT_SETTING)
                    && text.contains(&path.display().to_string())
                    && text.contains(why),
                "{why}: {text}"
            );
        }
    }
}
