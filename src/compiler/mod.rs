//! The compilers hipjit drives: one [`CompilerKind`] names each (`kind`), one file or folder
//! holds each backend (`hipcc`, `nvcc`, and the in-process hipRTC and NVRTC in `rtc`),
//! and `backend` puts them behind one interface and turns a kind into a compiler. Shared
//! here: the settings ([`CompilerConfig`]), the errors, a compile's output, the private run
//! directories every compiler works in, and the shell-free display of a command line.
#[doc(hidden)]
pub mod backend;
#[doc(hidden)]
pub mod depfile;
#[doc(hidden)]
pub mod diagnostics;
#[doc(hidden)]
pub mod discovery;
#[doc(hidden)]
#[cfg(feature = "testing")]
pub mod fake;
#[doc(hidden)]
pub mod flags;
#[doc(hidden)]
pub mod hipcc;
#[doc(hidden)]
pub mod host_compiler;
#[doc(hidden)]
pub mod identity;
#[doc(hidden)]
pub mod include_names;
#[doc(hidden)]
pub mod kind;
mod later;
#[doc(hidden)]
pub mod library_search;
#[doc(hidden)]
pub mod nvcc;
#[doc(hidden)]
pub mod opened_files;
#[doc(hidden)]
pub mod options;
#[doc(hidden)]
pub mod refusal;
#[doc(hidden)]
pub mod request;
#[doc(hidden)]
pub mod rtc;
#[doc(hidden)]
pub mod selection;
#[doc(hidden)]
pub mod shell_env;
#[doc(hidden)]
pub mod source_scan;
#[doc(hidden)]
pub mod special_include;

use std::ffi::OsString;
use std::fmt;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use hipcc::DEPS_NAME;

/// Cancelling compiles from another thread.
pub use crate::process::cancel::CancelToken;
#[doc(hidden)]
pub use backend::{Backend, RtcProgram};
pub use depfile::Dependency;
pub use diagnostics::{Diagnostic, IncludedFrom, Layout, Severity};
pub use discovery::{Candidate, DiscoveryError, HIPCC_ENV};
#[doc(hidden)]
pub use flags::check_extra_flag;
pub use flags::RejectedBecause;
#[doc(hidden)]
pub use hipcc::{device_library_dirs, Compiler, ENV_ALLOWLIST};
pub use host_compiler::HostCompilerError;
pub use identity::{CompilerIdentity, IdentityError};
pub use kind::{BadCompilerChoice, CompilerChoice, CompilerKind, FlagRules};
pub use nvcc::NvccError;
pub use options::{
    is_valid_header_name, is_valid_source_name, Checks, CompileOptions, CxxStd, OptLevel,
    OptionsError, UnknownStd,
};
pub use rtc::worker::WorkerConfig;
pub use rtc::RtcError;
/// The in-process compilers' modules, kept at their long-standing paths
/// (`hipjit::compiler::hiprtc::HipRtc`...).
#[doc(hidden)]
pub use rtc::{comgr, hiprtc, nvrtc, worker};
pub use selection::COMPILER_ENV;
pub use shell_env::{UnsafeProgramPath, UnsafeVariable};
pub use special_include::SpecialInclude;

/// Cancelling compiles from another thread ([`crate::process::cancel`], kept at this path).
#[doc(hidden)]
pub use crate::process::cancel;
#[doc(hidden)]
pub use crate::process::cpu_count;

/// How to find and run the compiler.
#[derive(Clone, Debug)]
pub struct CompilerConfig {
    /// An explicit hipcc; `None` reads `HIPJIT_HIPCC`, then searches (see `discovery`).
    pub hipcc: Option<PathBuf>,
    /// An explicit nvcc (HIP's NVIDIA platform); `None` reads `HIPJIT_NVCC`, then searches
    /// (`find`).
    pub nvcc: Option<PathBuf>,
    /// How long one compiler run may take before its process group is killed. Default 300 s.
    pub timeout: Duration,
    /// At most this many compiles run at once. 0 (the default): the number of CPU cores
    /// (`cpu_count`), read at the first compile, so that a cache hit never reads it.
    pub max_concurrent: usize,
    /// The compiler's environment: `None` takes the `ENV_ALLOWLIST` variables from hipjit's
    /// own environment; `Some` uses these values instead (names outside the allowlist are
    /// dropped).
    pub env: Option<Vec<(String, OsString)>>,
    /// Where the compiler's identity is remembered between processes; `None`: the per-user
    /// default (`identity_dir`).
    pub identity_dir: Option<PathBuf>,
    /// Run the in-process compilers (hipRTC, NVRTC) in worker processes (`worker`), with
    /// that worker's timeout, memory bound and crash isolation, and in parallel up to
    /// `max_concurrent`; `None` (the default): in this process, one hipRTC program at a time,
    /// exempt from the timeout and from any memory bound.
    pub rtc_worker: Option<worker::WorkerConfig>,
}

impl Default for CompilerConfig {
    fn default() -> Self {
        CompilerConfig {
            hipcc: None,
            nvcc: None,
            timeout: Duration::from_secs(300),
            max_concurrent: 0,
            env: None,
            identity_dir: None,
            rtc_worker: None,
        }
    }
}

/// Errors of `Compiler::new`.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CompilerError {
    /// Discovery failed.
    #[error(transparent)]
    Discovery(#[from] DiscoveryError),
    /// A variable hipcc pastes into its shell command line holds what the shell would
    /// misparse (`shell_env`).
    #[error(transparent)]
    UnsafeEnvironment(#[from] shell_env::UnsafeVariable),
    /// nvcc could not be found or identified.
    #[error(transparent)]
    Nvcc(Box<nvcc::NvccError>),
    /// hipRTC or NVRTC could not be opened or identified (every candidate tried).
    #[error(transparent)]
    InProcess(Box<rtc::RtcError>),
    /// `HIPJIT_COMPILER` names no compiler.
    #[error("{} (from {})", .0, selection::COMPILER_ENV)]
    Choice(#[from] selection::BadCompilerChoice),
    /// No compiler can compile the request: the choice does not fit the platform (hipRTC for
    /// an SM target...), or Auto found none, or the source holds a NUL byte and only an
    /// in-process compiler was found. The reason names what was asked and what was found.
    #[error("no compiler for {targets}: {reason}")]
    NoCompiler {
        /// The targets asked for.
        targets: String,
        /// Why, in words.
        reason: String,
    },
    /// The compiler's identity could not be read: `hipcc --version` or `hipcc -###` could not
    /// run or failed, or a file of its closed list could not be read (`identity`).
    #[error(transparent)]
    Identity(#[from] IdentityError),
}

/// A failed compiler run: everything needed to reproduce and understand it.
#[derive(Debug, Clone)]
pub struct CompileFailure {
    /// The full command line (program first), with the build directory's relative names.
    pub command: Vec<String>,
    /// The directory it ran in (the names in `command` and `stderr` are relative to it). It is
    /// removed when `Compiler::compile` returns: the path is a record, not a place to look.
    pub build_dir: PathBuf,
    /// The exit status (`None` when killed by a signal).
    pub exit_code: Option<i32>,
    /// The complete standard error (lossy where it is not UTF-8; the diagnostics carry an
    /// escaped form).
    pub stderr: String,
    /// The diagnostics parsed from it, every warning and error with its notes, include chain
    /// and excerpt, file names as the user knows them ([`Diagnostic::file`]).
    pub diagnostics: Vec<Diagnostic>,
}

impl fmt::Display for CompileFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.exit_code {
            Some(c) => write!(f, "compiler exited with status {c}")?,
            None => write!(f, "compiler was killed by a signal")?,
        }
        write!(f, ": {}", shell_words(&self.command))?;
        let errors: Vec<&Diagnostic> = self.diagnostics.iter().filter(|d| d.is_error()).collect();
        if errors.is_empty() {
            write!(f, "\n{}", self.stderr.trim_end())
        } else {
            for d in errors {
                write!(f, "\n{}", d.render().trim_end())?;
            }
            Ok(())
        }
    }
}

/// Errors of a compile: the compiler rejected the source (its diagnostics:
/// [`CompileError::diagnostics`]), or could not be run or read.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CompileError {
    /// The options are invalid.
    #[error(transparent)]
    Options(#[from] OptionsError),
    /// hipcc's installation holds a path its shell would misparse (checked before each run:
    /// `check_hipcc`, `check_hipcc_derived`); nothing was run.
    #[error(transparent)]
    UnsafePath(#[from] shell_env::UnsafeProgramPath),
    /// The compiler does not know the processor.
    #[error("{0}")]
    UnsupportedTarget(Box<UnsupportedTarget>),
    /// The compiler knows the processor but its ROCm device library is not installed.
    #[error("{0}")]
    MissingDeviceLibrary(Box<MissingDeviceLibrary>),
    /// The compiler failed (syntax errors and the like).
    #[error("{0}")]
    Failed(Box<CompileFailure>),
    /// The compiler ran past the timeout and was killed.
    #[error("compiler ran longer than {} s and was killed: {}", timeout.as_secs_f64(), shell_words(command))]
    Timeout {
        /// The command line.
        command: Vec<String>,
        /// The timeout.
        timeout: Duration,
        /// Standard error up to the kill.
        stderr: String,
    },
    /// An `#include` names a FIFO, socket or device, which the compiler would block on or
    /// never finish reading (`special_include`); refused before the compiler runs.
    #[error("{0}")]
    SpecialInclude(Box<special_include::SpecialInclude>),
    /// The CUDA toolkit's header tree NVRTC compiles with holds a FIFO, socket or device
    /// (found by the walk of `watch`): NVRTC runs in this process
    /// without a timeout and would block on it, or never finish reading it, were it included.
    /// Refused before NVRTC runs.
    #[error(
        "the CUDA toolkit's headers hold {} (a {kind}): NVRTC would block or never finish \
         reading it, were it included; hipjit compiles with NVRTC only when every file there \
         is a regular file (remove it, or compile with nvcc)",
        path.display()
    )]
    SpecialToolkitFile {
        /// The file, below the toolkit's `include`.
        path: PathBuf,
        /// `FIFO`, `socket`, `character device` or `block device`.
        kind: &'static str,
    },
    /// The compile was cancelled ([`cancel::CancelToken`]): the compiler was killed, or never
    /// started.
    #[error(
        "the compile was cancelled and its compiler killed: {}",
        shell_words(command)
    )]
    Cancelled {
        /// The command line.
        command: Vec<String>,
    },
    /// The compiler could not be started.
    #[error("cannot run {}: {source}", program.display())]
    Spawn {
        /// The compiler.
        program: PathBuf,
        /// The OS error.
        source: std::io::Error,
    },
    /// Preparing the build directory failed.
    #[error("cannot prepare build directory {}: {source}", path.display())]
    BuildDir {
        /// The path involved.
        path: PathBuf,
        /// The OS error.
        source: std::io::Error,
    },
    /// An include directory does not exist or is not a directory.
    #[error("include directory {} is not usable: {reason}", path.display())]
    IncludeDir {
        /// The directory as given.
        path: PathBuf,
        /// What is wrong.
        reason: String,
    },
    /// The compiler succeeded but its output file cannot be read (none was written, or it is
    /// unreadable).
    #[error(
        "compiler exited 0 but its output {} cannot be read ({}): {}",
        output,
        reason,
        shell_words(command)
    )]
    NoOutput {
        /// The file expected.
        output: String,
        /// Why it cannot be read (the OS error).
        reason: String,
        /// The command line.
        command: Vec<String>,
    },
    /// nvcc failed, or could not run (`NvccError`).
    #[error(transparent)]
    Nvcc(Box<nvcc::NvccError>),
    /// hipRTC or NVRTC refused the input or failed (`RtcError`).
    #[error(transparent)]
    InProcess(Box<rtc::RtcError>),
    /// The compiler succeeded but left no readable dependency list: the files it read are
    /// unknown, so the result cannot be cached safely.
    #[error(
        "compiler exited 0 but its dependency list {DEPS_NAME} {reason}: {}",
        shell_words(command)
    )]
    NoDependencies {
        /// What is wrong with it (missing, unreadable, no rule).
        reason: String,
        /// The command line.
        command: Vec<String>,
    },
}

impl CompileError {
    /// The compiler's diagnostics of a compile it rejected, whichever compiler it was
    /// (hipcc, nvcc, hipRTC, NVRTC): errors, warnings and notes with their files, lines and
    /// source excerpts ([`Diagnostic::render`] prints one as the compiler would). Empty for a
    /// failure with no diagnostics (a timeout, a crash, a refused request).
    pub fn diagnostics(&self) -> &[Diagnostic] {
        match self {
            CompileError::Failed(f) => &f.diagnostics,
            CompileError::UnsupportedTarget(u) => &u.failure.diagnostics,
            CompileError::MissingDeviceLibrary(m) => &m.failure.diagnostics,
            CompileError::Nvcc(e) => match &**e {
                nvcc::NvccError::Failed { diagnostics, .. } => diagnostics,
                _ => &[],
            },
            CompileError::InProcess(e) => match &**e {
                rtc::RtcError::Compile { diagnostics, .. } => diagnostics,
                _ => &[],
            },
            _ => &[],
        }
    }
}

/// The compiler does not know a processor: "`<compiler> (<version>) does not support gfx942`".
#[derive(Debug, Clone, thiserror::Error)]
#[error("{compiler} ({version}) does not support {target}")]
pub struct UnsupportedTarget {
    /// The compiler path.
    pub compiler: String,
    /// Its version summary.
    pub version: String,
    /// The target ID asked for.
    pub target: String,
    /// The failed run (its stderr holds the compiler's own message).
    pub failure: CompileFailure,
}

/// The compiler knows a processor but lacks its ROCm device library.
#[derive(Debug, Clone, thiserror::Error)]
#[error("{compiler} ({version}) has no ROCm device library for {target}: {file} is not in {}",
    if searched.is_empty() { "any device-library directory (none found)".to_string() }
    else { searched.iter().map(|p| p.display().to_string()).collect::<Vec<_>>().join(", ") })]
pub struct MissingDeviceLibrary {
    /// The compiler path.
    pub compiler: String,
    /// Its version summary.
    pub version: String,
    /// The target ID asked for.
    pub target: String,
    /// The device-library file that would be needed (`oclc_isa_version_1100.bc`).
    pub file: String,
    /// The directories searched for it.
    pub searched: Vec<PathBuf>,
    /// The failed run.
    pub failure: CompileFailure,
}

/// A compile the compiler rejected (it ran, exited with a failure status, and wrote its
/// dependency list): the files it read, as [`CompileOutput::dependencies`], and when it
/// started, as [`CompileOutput::started`]. What the JIT keys a remembered failure by, as it
/// keys a result.
#[derive(Debug, Clone)]
pub(crate) struct Rejection {
    pub dependencies: Vec<Dependency>,
    pub started: SystemTime,
}

/// The result of one successful compiler run.
#[derive(Debug, Clone)]
pub struct CompileOutput {
    /// The output file: a raw ELF code object with one target, a clang offload bundle with
    /// several; a cubin for an SM target.
    pub code_object: Vec<u8>,
    /// The command line that produced it (program first, build-directory-relative names).
    pub command: Vec<String>,
    /// The compiler's standard error (warnings; the commands run with `verbose`).
    pub log: String,
    /// The warnings (and remarks) parsed from the log, with their notes, include chains and
    /// excerpts, file names as the user knows them.
    pub diagnostics: Vec<Diagnostic>,
    /// Every file the preprocessor read but the source (cc1 `-dependency-file` with
    /// `-sys-header-deps`: user, system and compiler headers), with staged include paths mapped
    /// back to their `-I` directory.
    pub dependencies: Vec<Dependency>,
    /// The filesystem's clock just before the compiler started
    /// (`filesystem_now`): a file read with a modification or change
    /// time at or after it may have changed during the compile.
    pub started: SystemTime,
    /// Device LLVM bitcode, when [`CompileOptions::dump_llvm_ir`] was set (one target: its
    /// bitcode; several: the first target's).
    pub llvm_ir: Option<Vec<u8>>,
    /// Device assembly text, when [`CompileOptions::dump_isa`] was set.
    pub isa: Option<String>,
    /// Wall time of the compiler run.
    pub duration: Duration,
}

/// The folder of a process compiler's build directory (hipcc, nvcc) holding the in-memory
/// headers ([`CompileOptions::headers`]), handed to the compiler as the first `-I`: so
/// `#include "name"` (and `<name>`) finds them ahead of the include directories, as NVRTC and
/// hipRTC find the headers they are handed. Its files are keyed by the options (the key's
/// `headers` field), so they are left out of the dependencies.
pub(crate) const HEADERS_DIR: &str = "headers";

/// Writes `headers` (names checked by [`CompileOptions::validate`]: relative, no `..`) below
/// `build/headers/`.
///
/// Errors: the file or directory that could not be written, and why.
pub(crate) fn write_headers(
    build: &std::path::Path,
    headers: &[(String, String)],
) -> Result<(), (PathBuf, std::io::Error)> {
    let root = build.join(HEADERS_DIR);
    std::fs::create_dir(&root).map_err(|e| (root.clone(), e))?;
    for (name, contents) in headers {
        let path = root.join(name);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).map_err(|e| (parent.to_path_buf(), e))?;
        }
        std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&path)
            .and_then(|mut f| std::io::Write::write_all(&mut f, contents.as_bytes()))
            .map_err(|e| (path.clone(), e))?;
    }
    Ok(())
}

/// `include_dirs` with symbolic links resolved, in order: what every compiler reads.
///
/// Errors: the first directory that does not resolve or is not a directory, as given, and
/// what is wrong (each compiler's error type carries them).
pub(crate) fn canonical_include_dirs(
    include_dirs: &[PathBuf],
) -> Result<Vec<PathBuf>, (PathBuf, String)> {
    include_dirs
        .iter()
        .map(|d| match crate::fs::observe::canonicalize(d) {
            Ok(real) if crate::fs::observe::is_dir(&real) => Ok(real),
            Ok(_) => Err((d.clone(), "not a directory".to_owned())),
            Err(e) => Err((d.clone(), e.to_string())),
        })
        .collect()
}

/// A directory a compiler runs in: `b` inside a private (0700) directory named
/// `<prefix><pid>-...` under [`build_base`], so that its parent holds nothing but it: hipcc 7
/// takes `<working directory>/../lib/bitcode`, when that exists, as its device library
/// directory, and pastes its path, resolved, into its shell line (measured with hipcc 7.0.2:
/// a `lib/bitcode` planted in the temporary directory was handed to clang). Removed with it.
pub(crate) struct RunDir {
    _outer: tempfile::TempDir,
    inner: PathBuf,
}

impl RunDir {
    /// A new run directory in `base` ([`build_base`]) whose outer directory's name starts with
    /// `prefix` ([`BUILD_PREFIX`], [`IDENTITY_PREFIX`], [`WORKER_PREFIX`], [`HIPRTC_PREFIX`])
    /// and this process's ID. The run directories of that prefix left in `base` by processes
    /// that no longer run (killed with SIGKILL, or crashed, before they could remove their
    /// own) are removed first ([`sweep_dead`]).
    pub(crate) fn new(prefix: &str, base: &Path) -> std::io::Result<RunDir> {
        sweep_dead(base, &[prefix]);
        Self::create(prefix, base)
    }

    /// A new run directory as [`RunDir::new`] makes it, without removing anything first.
    fn create(prefix: &str, base: &Path) -> std::io::Result<RunDir> {
        use std::os::unix::fs::DirBuilderExt;
        let outer = tempfile::Builder::new()
            .prefix(&format!("{prefix}{}-", std::process::id()))
            .permissions(std::fs::Permissions::from_mode(0o700))
            .tempdir_in(base)?;
        let inner = outer.path().join("b");
        std::fs::DirBuilder::new().mode(0o700).create(&inner)?;
        Ok(RunDir {
            _outer: outer,
            inner,
        })
    }

    /// The directory to run in.
    pub(crate) fn path(&self) -> &Path {
        &self.inner
    }
}

/// A private directory (mode 0700) for a process's own temporary files,
/// `<TMPDIR>/hipjit-run-<pid>-.../b`, removed when this value drops, or by a later hipjit
/// process once this one no longer runs (killed with SIGKILL, or crashed).
///
/// The `hipjit` command points its own `TMPDIR` at one while it compiles, before it starts any
/// thread: then every temporary file of the run is below it, hipjit's build directories and
/// also what hipjit does not name itself, such as the `comgr-*` directories in which comgr (under
/// hipRTC) stages the source and the headers of an in-process compile, which a crash inside
/// hipRTC would otherwise leave in `/tmp`. A library cannot do that for its host process
/// (`TMPDIR` is the whole process's, read by other threads at any time): a program embedding
/// hipjit that needs it confined runs hipRTC in workers (`worker`, whose `TMPDIR` is private
/// to each compile) or does the same as the command.
pub struct ProcessTmpDir(RunDir);

/// The directory [`ProcessTmpDir::install`] pointed `TMPDIR` at, and `TMPDIR` before that.
static PROCESS_TMPDIR: std::sync::OnceLock<(std::ffi::OsString, Option<std::ffi::OsString>)> =
    std::sync::OnceLock::new();

/// `TMPDIR`'s value `value` as the process was given it: where it is the directory
/// [`ProcessTmpDir::install`] set, what it was before (`None`: it was not set); otherwise
/// `value` itself.
#[doc(hidden)]
pub fn tmpdir_as_given(value: &std::ffi::OsStr) -> Option<&std::ffi::OsStr> {
    match PROCESS_TMPDIR.get() {
        Some((installed, given)) if installed == value => given.as_deref(),
        _ => Some(value),
    }
}

impl ProcessTmpDir {
    /// Makes the directory under `TMPDIR` (resolved and shell-safe, else `/tmp`: where hipjit
    /// makes its build directories), first removing every run, build, identity-probe, worker
    /// and hipRTC directory there left by a process of this user that no longer runs.
    ///
    /// Errors: `TMPDIR` names a directory whose path a compiler's shell would interpret
    /// ([`std::io::ErrorKind::InvalidInput`]: the compile itself refuses it, naming it, and the
    /// command leaves `TMPDIR` as it is for that); the directory cannot be made (the OS error).
    pub fn new() -> std::io::Result<ProcessTmpDir> {
        let base = build_base();
        let tmp = std::env::temp_dir();
        if base != tmp && std::fs::canonicalize(&tmp).is_ok_and(|real| real != base) {
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                format!(
                    "TMPDIR {} holds what a compiler's shell would interpret",
                    tmp.display()
                ),
            ));
        }
        sweep_dead(
            &base,
            &[
                RUN_PREFIX,
                BUILD_PREFIX,
                IDENTITY_PREFIX,
                WORKER_PREFIX,
                HIPRTC_PREFIX,
            ],
        );
        RunDir::create(RUN_PREFIX, &base).map(ProcessTmpDir)
    }

    /// Points this process's `TMPDIR` at the directory, remembering what it was (see
    /// [`tmpdir_as_given`]: the hit memo names a process's environment by the `TMPDIR` it
    /// was given, which this directory, new in every run, would otherwise change each time).
    /// Call it before any other thread starts: `TMPDIR` is the whole process's.
    pub fn install(&self) {
        let given = std::env::var_os("TMPDIR");
        if PROCESS_TMPDIR
            .set((self.path().as_os_str().to_owned(), given))
            .is_ok()
        {
            std::env::set_var("TMPDIR", self.path());
        }
    }

    /// The directory (absolute, shell-safe).
    pub fn path(&self) -> &Path {
        self.0.path()
    }
}

/// The name of every build directory starts with this, then the creating process's ID and `-`.
pub(crate) const BUILD_PREFIX: &str = "hipjit-build-";
/// The same for the run directories of a compiler's identity probes (`identity`).
pub(crate) const IDENTITY_PREFIX: &str = "hipjit-id-";
/// The same for the directories of worker compiles (`worker`): the request, the result and
/// the worker's `TMPDIR`.
pub(crate) const WORKER_PREFIX: &str = "hipjit-worker-";
/// The same for the private directories of in-process hipRTC compiles ([`hiprtc`]).
pub(crate) const HIPRTC_PREFIX: &str = "hipjit-hiprtc-";
/// The same for a process's own temporary directory ([`ProcessTmpDir`]).
const RUN_PREFIX: &str = "hipjit-run-";

/// Removes the run directories named `<prefix><pid>-...`, for each of `prefixes`, in `base`
/// left by processes of this user that no longer run (a hipjit killed mid-compile or
/// mid-probe cannot remove its own), in one listing of `base`. A directory of a live process,
/// of another user, or not so named is left alone; failures are ignored.
fn sweep_dead(base: &Path, prefixes: &[&str]) {
    use std::os::unix::fs::MetadataExt;
    let me = crate::fs::user::uid();
    for e in crate::fs::observe::read_dir(base)
        .into_iter()
        .flatten()
        .flatten()
    {
        let name = e.file_name();
        let Some(rest) = name
            .to_str()
            .and_then(|n| prefixes.iter().find_map(|p| n.strip_prefix(p)))
        else {
            continue;
        };
        let Some(pid) = rest
            .split_once('-')
            .and_then(|(p, _)| p.parse::<libc::pid_t>().ok())
            .filter(|&p| p > 0)
        else {
            continue;
        };
        // Not followed: a link planted under that name is not ours to clear.
        let Ok(meta) = std::fs::symlink_metadata(e.path()) else {
            continue;
        };
        if !meta.is_dir() || meta.uid() != me {
            continue;
        }
        // SAFETY: kill with signal 0 only checks whether the process exists.
        let alive = unsafe { libc::kill(pid, 0) } == 0
            || std::io::Error::last_os_error().raw_os_error() == Some(libc::EPERM);
        if !alive {
            let _ = std::fs::remove_dir_all(e.path());
        }
    }
}

/// The directory under which build directories are made: `TMPDIR` (or `/tmp`) with its links
/// resolved, when both its path and the resolved one are shell-safe (hipcc 7 reads its working
/// directory resolved and pastes paths below it into its shell line), else `/tmp`.
fn build_base() -> PathBuf {
    let safe = |p: &Path| {
        p.to_str().is_some_and(|s| {
            s.split('/')
                .all(|c| c.is_empty() || options::is_safe_name(c))
        })
    };
    let tmp = std::env::temp_dir();
    if !safe(&tmp) {
        return PathBuf::from("/tmp");
    }
    match std::fs::canonicalize(&tmp) {
        Ok(real) if safe(&real) => real,
        Ok(_) => PathBuf::from("/tmp"),
        // Not there: the build directory's creation names it.
        Err(_) => tmp,
    }
}

/// Joins a command line for display, quoting words that need it (for people, never run).
#[doc(hidden)]
pub fn shell_words(words: &[String]) -> String {
    words
        .iter()
        .map(|w| {
            if !w.is_empty()
                && w.bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b"-_=./:+,@%".contains(&b))
            {
                w.clone()
            } else {
                format!("'{}'", w.replace('\'', "'\\''"))
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

#[cfg(test)]
mod run_dir_tests {
    use super::*;

    /// A probe killed with SIGKILL left its `hipjit-id-<pid>-...` directory, and nothing removed
    /// it: a new run directory removes those of its kind whose process no longer runs, and
    /// leaves a live process's and other kinds' alone.
    #[test]
    fn a_run_directory_sweeps_those_its_kind_left_by_dead_processes() {
        let base = tempfile::tempdir().unwrap();
        let mut t = std::process::Command::new("true").spawn().unwrap();
        let dead = t.id();
        t.wait().unwrap();
        let left = base.path().join(format!("hipjit-id-{dead}-abc123"));
        std::fs::create_dir_all(left.join("b")).unwrap();
        let live = base
            .path()
            .join(format!("hipjit-id-{}-abc123", std::process::id()));
        std::fs::create_dir(&live).unwrap();
        let other = base.path().join(format!("hipjit-elsewhere-{dead}-abc123"));
        std::fs::create_dir(&other).unwrap();
        let d = RunDir::new("hipjit-id-", base.path()).unwrap();
        assert!(
            !left.exists(),
            "a dead process's probe directory is still there"
        );
        assert!(live.exists() && other.exists());
        assert!(d.path().starts_with(base.path()));
    }
}
