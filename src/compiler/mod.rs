//! Compiling HIP C++ source to AMDGPU code objects with `hipcc`.
//!
//! # How the compiler is run
//! * Found by [`discovery`] (the shared installation-root order of
//!   [`hip_sys::discovery`]); its identity ([`CompilerIdentity`], [`identity`]) is its kind,
//!   its `--version` standard output and a fingerprint of the files that make it up,
//!   remembered per user so that a fresh process usually starts no compiler to learn it.
//!   Standard error is left out of the version: Debian's hipcc 5.2.3 runs
//!   `rocm_agent_enumerator`, which prints a Python traceback there that depends on whether
//!   `/sys/class/kfd` exists, not on the compiler.
//! * No shell of hipjit's, and none of hipcc's either. hipcc 5.2.3 is a Perl script that
//!   joins its clang command into one string for `sh`. Measured with Debian's 5.2.3: it
//!   backslash-escapes the arguments it passes through, but writes the output path as
//!   `-o "<path>"`, so `-o 'o$HOME/x.hsaco'` made lld open `o/root/x.hsaco`; and it pastes
//!   `HIP_PATH`-derived directories unquoted or in double quotes. hipcc 7.x also runs clang
//!   through a shell command line. hipjit therefore stages everything under safe names in a
//!   private build directory (mode 0700, under `TMPDIR` when its path is shell-safe, else
//!   `/tmp`) and runs hipcc *in* that directory with relative paths only: the source as
//!   `<source_name>` (default `kernel.hip`), include directory `i` as a symlink `include/<i>`
//!   to the real directory, the output `out.hsaco`, the dependency list `deps.d`; no user path
//!   reaches the command line. Running clang directly with the flags `hipcc -###` prints was
//!   measured to save nothing (about 1.1 s either way for a small kernel) and would have to
//!   re-derive hipcc's per-version device-library and include flags, so hipjit keeps hipcc.
//! * Cleared environment plus [`ENV_ALLOWLIST`] (values taken from hipjit's own environment
//!   when it starts the compiler); `TMPDIR` is the build directory and `LC_ALL=C`.
//! * A timeout ([`CompilerConfig::timeout`]) after which the compiler's whole process group
//!   is killed, and at most [`CompilerConfig::max_concurrent`] compiles at once.

pub mod backend;
pub mod cancel;
pub mod comgr;
pub mod depfile;
pub mod diagnostics;
pub mod discovery;
pub mod flags;
pub mod hiprtc;
pub mod host_compiler;
pub mod identity;
pub mod include_names;
pub mod kind;
pub mod library_search;
pub mod nvcc;
pub mod nvrtc;
pub mod opened_files;
pub mod options;
pub mod process;
pub mod refusal;
pub mod request;
pub mod rtc;
pub mod selection;
pub mod shell_env;
pub mod source_scan;
pub mod special_include;
pub mod worker;

use std::ffi::OsString;
use std::fmt;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use crate::fs;

pub use backend::Backend;
pub use depfile::Dependency;
pub use diagnostics::{Diagnostic, IncludedFrom, Severity};
pub use discovery::{Candidate, DiscoveryError, HIPCC_ENV};
pub use flags::{check_extra_flag, RejectedBecause};
pub use identity::{CompilerIdentity, IdentityError};
pub use kind::{CompilerChoice, CompilerKind};
pub use options::{
    is_valid_source_name, Checks, CompileOptions, CxxStd, OptLevel, OptionsError, UnknownStd,
};

use process::{RunError, Slots};

/// The environment variables passed to the compiler (when set in hipjit's environment), and
/// hashed into the cache key with their values: the variables hipcc 5.x (Perl) and 6.x/7.x
/// read, and the ones clang reads for include paths.
pub const ENV_ALLOWLIST: &[&str] = &[
    "PATH",
    "HOME",
    "HIP_PATH",
    "ROCM_PATH",
    "HIP_CLANG_PATH",
    "HIP_DEVICE_LIB_PATH",
    "DEVICE_LIB_PATH",
    "HIP_LIB_PATH",
    "HIP_INCLUDE_PATH",
    "HIP_ROCCLR_HOME",
    "HSA_PATH",
    "HIP_PLATFORM",
    "HIP_COMPILER",
    "HIP_RUNTIME",
    "HIP_COMPILE_CXX_AS_HIP",
    "HIPCC_COMPILE_FLAGS_APPEND",
    "HIPCC_LINK_FLAGS_APPEND",
    "HIPCC_VERBOSE",
    "CPATH",
    "CPLUS_INCLUDE_PATH",
    "C_INCLUDE_PATH",
];

/// How to find and run the compiler.
#[derive(Clone, Debug)]
pub struct CompilerConfig {
    /// An explicit hipcc; `None` reads `HIPJIT_HIPCC`, then searches (see [`discovery`]).
    pub hipcc: Option<PathBuf>,
    /// An explicit nvcc (HIP's NVIDIA platform); `None` reads `HIPJIT_NVCC`, then searches
    /// ([`nvcc::Nvcc::find`]).
    pub nvcc: Option<PathBuf>,
    /// How long one compiler run may take before its process group is killed. Default 300 s.
    pub timeout: Duration,
    /// At most this many compiles run at once. 0 (the default): the number of CPU cores
    /// ([`cpu_count`]), read at the first compile, so that a cache hit never reads it.
    pub max_concurrent: usize,
    /// The compiler's environment: `None` takes the [`ENV_ALLOWLIST`] variables from hipjit's
    /// own environment; `Some` uses these values instead (names outside the allowlist are
    /// dropped).
    pub env: Option<Vec<(String, OsString)>>,
    /// Where the compiler's identity is remembered between processes; `None`: the per-user
    /// default ([`identity::identity_dir`]).
    pub identity_dir: Option<PathBuf>,
    /// Run the in-process compilers (hipRTC, NVRTC) in worker processes ([`worker`]), with
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

/// The number of CPU cores this process may use (`std::thread::available_parallelism`, which
/// reads the cgroup's CPU quota: a dozen system calls), read once per process; 1 when unknown.
pub fn cpu_count() -> usize {
    static COUNT: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    *COUNT.get_or_init(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
}

/// Errors of [`Compiler::new`].
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CompilerError {
    /// Discovery failed.
    #[error(transparent)]
    Discovery(#[from] DiscoveryError),
    /// A variable hipcc pastes into its shell command line holds what the shell would
    /// misparse ([`shell_env`]).
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
    /// run or failed, or a file of its closed list could not be read ([`identity`]).
    #[error(transparent)]
    Identity(#[from] IdentityError),
}

/// A failed compiler run: everything needed to reproduce and understand it.
#[derive(Debug, Clone)]
pub struct CompileFailure {
    /// The full command line (program first), with the build directory's relative names.
    pub command: Vec<String>,
    /// The directory it ran in (the names in `command` and `stderr` are relative to it). It is
    /// removed when [`Compiler::compile`] returns: the path is a record, not a place to look.
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

/// Errors of [`Compiler::compile`].
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CompileError {
    /// The options are invalid.
    #[error(transparent)]
    Options(#[from] OptionsError),
    /// hipcc's installation holds a path its shell would misparse (checked before each run:
    /// [`shell_env::check_hipcc`], [`shell_env::check_hipcc_derived`]); nothing was run.
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
    /// never finish reading ([`special_include`]); refused before the compiler runs.
    #[error("{0}")]
    SpecialInclude(Box<special_include::SpecialInclude>),
    /// The CUDA toolkit's header tree NVRTC compiles with holds a FIFO, socket or device
    /// (found by the walk of [`opened_files::OpenedFiles::watch`]): NVRTC runs in this process
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
    /// nvcc failed, or could not run ([`nvcc::NvccError`]).
    #[error(transparent)]
    Nvcc(Box<nvcc::NvccError>),
    /// hipRTC or NVRTC refused the input or failed ([`rtc::RtcError`]).
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
    /// ([`crate::cache::manifest::filesystem_now`]): a file read with a modification or change
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

/// A discovered compiler ready to run; cheap to clone (an `Arc` inside).
#[derive(Clone, Debug)]
pub struct Compiler {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    identity: CompilerIdentity,
    env: Vec<(String, OsString)>,
    timeout: Duration,
    slots: Slots,
}

impl Compiler {
    /// Finds the compiler ([`discovery`]) and reads its identity ([`identity::identify`]:
    /// remembered per user, so that a fresh process usually starts no compiler here), with the
    /// process environment.
    ///
    /// Errors: [`CompilerError::Discovery`] (nothing found, or an explicit path unusable),
    /// [`CompilerError::UnsafeEnvironment`] (a variable its shell would misparse),
    /// [`CompilerError::Identity`] (`--version` failed, a file of the compiler's closed list
    /// could not be read, or hipcc's installation holds paths its shell would misparse:
    /// checked before each run, [`shell_env::check_hipcc`]).
    pub fn new(config: CompilerConfig) -> Result<Compiler, CompilerError> {
        let path = discovery::find_hipcc(
            config.hipcc.as_deref(),
            &hip_sys::discovery::ProcessEnv,
            Path::new("/opt"),
        )?;
        let env: Vec<(String, OsString)> = match config.env {
            None => ENV_ALLOWLIST
                .iter()
                .filter_map(|k| std::env::var_os(k).map(|v| (k.to_string(), v)))
                .collect(),
            Some(vars) => vars
                .into_iter()
                .filter(|(k, _)| ENV_ALLOWLIST.contains(&k.as_str()))
                .collect(),
        };
        shell_env::check(&env)?;
        let identity = identity::identify(
            CompilerKind::Hipcc,
            &path,
            &env,
            config.timeout,
            config.identity_dir.as_deref(),
        )?;
        Ok(Compiler {
            inner: Arc::new(Inner {
                identity,
                env,
                timeout: config.timeout,
                slots: Slots::new(config.max_concurrent),
            }),
        })
    }

    /// [`Compiler::new`] with the default configuration.
    pub fn discover() -> Result<Compiler, CompilerError> {
        Compiler::new(CompilerConfig::default())
    }

    /// Checks, before hipcc runs, what its shell would misparse in the paths it derives its
    /// installation from ([`shell_env::check_hipcc`], [`shell_env::check_hipcc_derived`]): also
    /// for an identity remembered before a link moved. Not part of a lookup: a hit runs
    /// nothing.
    fn check_installation(&self) -> Result<(), shell_env::UnsafeProgramPath> {
        let id = &self.inner.identity;
        shell_env::check_hipcc(&id.path)?;
        shell_env::check_hipcc_derived(&id.path, &id.version, &self.inner.env)
    }

    /// The compiler's identity: kind, resolved path, `--version` output, fingerprint.
    pub fn identity(&self) -> &CompilerIdentity {
        &self.inner.identity
    }

    /// The allowlisted environment variables the compiler runs with, and their values.
    pub fn environment(&self) -> &[(String, OsString)] {
        &self.inner.env
    }

    /// How long one compiler run may take ([`CompilerConfig::timeout`]).
    pub fn timeout(&self) -> Duration {
        self.inner.timeout
    }

    /// The cap on concurrent compiles.
    pub fn max_concurrent(&self) -> usize {
        self.inner.slots.limit()
    }

    /// Compiles `source` (its bytes, written to the source file as they are: any encoding
    /// the compiler accepts) with `options` in a fresh private build directory, removed
    /// afterwards. Blocks while [`CompilerConfig::max_concurrent`] compiles are running.
    ///
    /// Errors: every [`CompileError`] variant; a failed compile carries the command line, exit
    /// status, stderr and parsed diagnostics, and produces no output.
    pub fn compile(
        &self,
        source: impl AsRef<[u8]>,
        options: &CompileOptions,
    ) -> Result<CompileOutput, CompileError> {
        options.validate()?;
        self.check_installation()?;
        let build = Build::stage(source.as_ref(), options)?;
        let command = self.command_line(options, &build);
        let mut cmd = Command::new(&self.inner.identity.path);
        cmd.args(&command[1..])
            .current_dir(build.dir.path())
            .env_clear()
            .envs(self.inner.env.iter().map(|(k, v)| (k, v)))
            .env("TMPDIR", build.dir.path())
            .env("LC_ALL", "C");
        let _slot = self.inner.slots.acquire();
        let started_at = crate::fs::stat::filesystem_now(build.dir.path());
        let started = Instant::now();
        let run = process::run(&mut cmd, self.inner.timeout);
        let duration = started.elapsed();
        drop(_slot);
        let finished = match run {
            Ok(f) => f,
            Err(RunError::Spawn(source)) => {
                return Err(CompileError::Spawn {
                    program: self.inner.identity.path.clone(),
                    source,
                })
            }
            Err(RunError::Timeout(stderr)) => {
                return Err(CompileError::Timeout {
                    command,
                    timeout: self.inner.timeout,
                    stderr: String::from_utf8_lossy(&stderr).into_owned(),
                })
            }
            Err(RunError::Cancelled) => return Err(CompileError::Cancelled { command }),
        };
        let stderr = String::from_utf8_lossy(&finished.stderr).into_owned();
        let rename = |f: &str| build.user_name(f);
        let diagnostics = diagnostics::parse(&finished.stderr, &rename);
        if !finished.status.success() {
            let failure = Box::new(CompileFailure {
                command,
                build_dir: build.dir.path().to_path_buf(),
                exit_code: finished.status.code(),
                stderr,
                diagnostics,
            });
            return Err(self.classify_failure(options, failure));
        }
        let out_path = build.dir.path().join(OUTPUT_NAME);
        let code_object = fs::read::read_file(
            &out_path,
            fs::read::CODE_OBJECT_LIMIT,
            "the compiler's output",
            fs::read::Streams::None,
        )
        .map_err(|e| CompileError::NoOutput {
            output: OUTPUT_NAME.into(),
            reason: e.into_io_error().to_string(),
            command: command.clone(),
        })?;
        // With dumps asked for (`-save-temps`), clang preprocesses into a `.cui` file first and
        // compiles that, and the compile job writes the dependency list last: it names the
        // `.cui` alone (measured with hipcc 5.2.3), never the headers. The list then comes from
        // a preprocessing run per target, as for several targets.
        let dumps = options.dump_llvm_ir || options.dump_isa;
        let mut dependencies = if dumps {
            Vec::new()
        } else {
            build.dependencies(options, DEPS_NAME).map_err(|reason| {
                CompileError::NoDependencies {
                    reason,
                    command: command.clone(),
                }
            })?
        };
        if options.targets.len() > 1 || dumps {
            // clang writes the dependency list once per target into the same file, so the list
            // read above is one target's; a header included only under another target's `#if`
            // would be missing. Each target's list comes from a preprocessing run of its own.
            for (i, t) in options.targets.iter().enumerate() {
                let more = self.target_dependencies(options, &build, i, t)?;
                for d in more {
                    if !dependencies.contains(&d) {
                        dependencies.push(d);
                    }
                }
            }
        }
        let (llvm_ir, isa) = build.dumps(options);
        Ok(CompileOutput {
            code_object,
            command,
            log: stderr,
            diagnostics,
            dependencies,
            started: started_at,
            llvm_ir,
            isa,
            duration,
        })
    }

    /// The files read when preprocessing for target `i` alone (`-E`, the same flags and
    /// dependency output as the compile, without dumps), for a compile of several targets or
    /// one asking for dumps.
    fn target_dependencies(
        &self,
        options: &CompileOptions,
        build: &Build,
        i: usize,
        target: &crate::target::TargetId,
    ) -> Result<Vec<Dependency>, CompileError> {
        let mut one = options.clone();
        one.targets = vec![target.clone()];
        one.dump_llvm_ir = false;
        one.dump_isa = false;
        let deps_name = format!("deps-{i}.d");
        let out_name = format!("preprocessed-{i}.hip");
        let mut command: Vec<String> = self
            .command_line(&one, build)
            .into_iter()
            .map(|a| {
                if a == DEPS_NAME {
                    deps_name.clone()
                } else if a == OUTPUT_NAME {
                    out_name.clone()
                } else {
                    a
                }
            })
            .collect();
        command.insert(1, "-E".into());
        let mut cmd = Command::new(&self.inner.identity.path);
        cmd.args(&command[1..])
            .current_dir(build.dir.path())
            .env_clear()
            .envs(self.inner.env.iter().map(|(k, v)| (k, v)))
            .env("TMPDIR", build.dir.path())
            .env("LC_ALL", "C");
        let fail = |reason: String| CompileError::NoDependencies {
            reason,
            command: command.clone(),
        };
        let _slot = self.inner.slots.acquire();
        match process::run(&mut cmd, self.inner.timeout) {
            Ok(f) if f.status.success() => {}
            Ok(f) => {
                return Err(fail(format!(
                    "of target {target} could not be made by preprocessing ({}): {}",
                    f.status,
                    String::from_utf8_lossy(&f.stderr).trim_end()
                )))
            }
            Err(RunError::Spawn(e)) => return Err(fail(format!("of target {target}: {e}"))),
            Err(RunError::Cancelled) => {
                return Err(CompileError::Cancelled {
                    command: command.clone(),
                })
            }
            Err(RunError::Timeout(_)) => {
                return Err(CompileError::Timeout {
                    command: command.clone(),
                    timeout: self.inner.timeout,
                    stderr: String::new(),
                })
            }
        }
        let _ = std::fs::remove_file(build.dir.path().join(&out_name));
        build
            .dependencies(options, &deps_name)
            .map_err(|reason| fail(format!("of target {target} {reason}")))
    }

    fn command_line(&self, options: &CompileOptions, build: &Build) -> Vec<String> {
        let mut args = vec![self.inner.identity.path.display().to_string()];
        let mut flags = options
            .effective_flags_for(&self.inner.identity)
            .into_iter();
        let mut include_index = 0;
        while let Some(f) = flags.next() {
            if f == "-I" {
                // The real path is replaced by its staged name.
                let _ = flags.next();
                args.push("-I".into());
                args.push(format!("{INCLUDE_DIR}/{include_index}"));
                include_index += 1;
            } else {
                args.push(f);
            }
        }
        let _ = build;
        // The dependency list, asked of the device compile (cc1) itself: clang-21 ignores
        // `-MD -MF` together with `--cuda-device-only` (hipcc 7's spelling of `--genco`),
        // measured. `-sys-header-deps` adds the system headers: the list is every file read.
        // Notes get their include chain too (clang prints it for errors and warnings only by
        // default); it changes what is printed, not what is compiled, so it is not keyed.
        args.push("-fdiagnostics-show-note-include-stack".into());
        args.extend([
            "-Xclang".into(),
            "-dependency-file".into(),
            "-Xclang".into(),
            DEPS_NAME.into(),
            "-Xclang".into(),
            "-MT".into(),
            "-Xclang".into(),
            OUTPUT_NAME.into(),
            "-Xclang".into(),
            "-sys-header-deps".into(),
            options.source_file_name().into(),
            "-o".into(),
            OUTPUT_NAME.into(),
        ]);
        args
    }

    fn classify_failure(
        &self,
        options: &CompileOptions,
        failure: Box<CompileFailure>,
    ) -> CompileError {
        let id = &self.inner.identity;
        let compiler = id.path.display().to_string();
        let version = id.version_summary();
        for t in &options.targets {
            let target = t.to_string();
            let processor = t.processor();
            if failure
                .stderr
                .contains(&format!("invalid target ID '{target}'"))
                || failure
                    .stderr
                    .contains(&format!("invalid target ID '{processor}'"))
                || failure
                    .stderr
                    .contains(&format!("unsupported CUDA gpu architecture: {processor}"))
            {
                return CompileError::UnsupportedTarget(Box::new(UnsupportedTarget {
                    compiler,
                    version,
                    target,
                    failure: *failure,
                }));
            }
            if failure
                .stderr
                .contains(&format!("cannot find ROCm device library for {processor}"))
                || failure
                    .stderr
                    .contains(&format!("cannot find ROCm device library for {target}"))
            {
                let file = format!(
                    "oclc_isa_version_{}.bc",
                    processor.trim_start_matches("gfx")
                );
                return CompileError::MissingDeviceLibrary(Box::new(MissingDeviceLibrary {
                    compiler,
                    version,
                    target,
                    file,
                    searched: device_library_dirs(&id.path, &self.inner.env),
                    failure: *failure,
                }));
            }
        }
        CompileError::Failed(failure)
    }
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

/// The directories clang searches for the ROCm device library, for a compiler at `hipcc`:
/// `HIP_DEVICE_LIB_PATH` / `DEVICE_LIB_PATH` when set; otherwise those of the usual layouts
/// (`<root>/amdgcn/bitcode`, `<root>/lib/amdgcn/bitcode`, Debian's
/// `<root>/lib/<multiarch>/amdgcn/bitcode`, and clang's own `lib/clang/<N>/amdgcn/bitcode`)
/// that exist, where `<root>` is the installation holding `bin/hipcc`.
pub fn device_library_dirs(hipcc: &Path, env: &[(String, OsString)]) -> Vec<PathBuf> {
    let explicit: Vec<PathBuf> = env
        .iter()
        .filter(|(k, _)| k == "HIP_DEVICE_LIB_PATH" || k == "DEVICE_LIB_PATH")
        .map(|(_, v)| PathBuf::from(v))
        .collect();
    if !explicit.is_empty() {
        return explicit;
    }
    let Some(root) = hipcc.parent().and_then(Path::parent) else {
        return Vec::new();
    };
    let mut dirs = vec![
        root.join("amdgcn/bitcode"),
        root.join("lib/amdgcn/bitcode"),
        root.join("lib/x86_64-linux-gnu/amdgcn/bitcode"),
        root.join("lib/aarch64-linux-gnu/amdgcn/bitcode"),
    ];
    for llvm in [root.join("lib/llvm/lib/clang"), root.join("llvm/lib/clang")]
        .into_iter()
        .chain(
            crate::fs::observe::read_dir(root.join("lib"))
                .into_iter()
                .flatten()
                .filter_map(Result::ok)
                .filter(|e| e.file_name().to_string_lossy().starts_with("llvm-"))
                .map(|e| e.path().join("lib/clang")),
        )
    {
        for v in crate::fs::observe::read_dir(&llvm)
            .into_iter()
            .flatten()
            .filter_map(Result::ok)
        {
            dirs.push(v.path().join("amdgcn/bitcode"));
        }
    }
    dirs.retain(|d| crate::fs::observe::is_dir(d));
    dirs
}

const OUTPUT_NAME: &str = "out.hsaco";
const DEPS_NAME: &str = "deps.d";
const INCLUDE_DIR: &str = "include";

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
/// hipjit that needs it confined runs hipRTC in workers ([`worker`], whose `TMPDIR` is private
/// to each compile) or does the same as the command.
pub struct ProcessTmpDir(RunDir);

/// The directory [`ProcessTmpDir::install`] pointed `TMPDIR` at, and `TMPDIR` before that.
static PROCESS_TMPDIR: std::sync::OnceLock<(std::ffi::OsString, Option<std::ffi::OsString>)> =
    std::sync::OnceLock::new();

/// `TMPDIR`'s value `value` as the process was given it: where it is the directory
/// [`ProcessTmpDir::install`] set, what it was before (`None`: it was not set); otherwise
/// `value` itself.
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

/// A private build directory with the source and include directories staged under safe names.
struct Build {
    dir: RunDir,
    source_name: String,
    includes: Vec<PathBuf>,
}

impl Build {
    fn stage(source: &[u8], options: &CompileOptions) -> Result<Build, CompileError> {
        let base = build_base();
        // Private (0700, whatever the umask), and named after this process so that a later
        // run can tell a dead process's leftovers from a live one's.
        let dir = RunDir::new(BUILD_PREFIX, &base).map_err(|source| CompileError::BuildDir {
            path: base.clone(),
            source,
        })?;
        let io = |path: &Path| {
            let path = path.to_path_buf();
            move |source| CompileError::BuildDir { path, source }
        };
        let source_name = options.source_file_name().to_string();
        let src_path = dir.path().join(&source_name);
        std::fs::write(&src_path, source).map_err(io(&src_path))?;
        let mut includes = Vec::new();
        if !options.include_dirs.is_empty() {
            let inc = dir.path().join(INCLUDE_DIR);
            std::fs::create_dir(&inc).map_err(io(&inc))?;
            let canonical = canonical_include_dirs(&options.include_dirs)
                .map_err(|(path, reason)| CompileError::IncludeDir { path, reason })?;
            for (i, (d, real)) in options.include_dirs.iter().zip(&canonical).enumerate() {
                let link = inc.join(i.to_string());
                std::os::unix::fs::symlink(real, &link).map_err(io(&link))?;
                includes.push(d.clone());
            }
        }
        Ok(Build {
            dir,
            source_name,
            includes,
        })
    }

    /// Maps a path as the compiler printed it (relative to the build directory) back to what
    /// the user knows.
    fn user_name(&self, printed: &str) -> String {
        let rel = printed.strip_prefix("./").unwrap_or(printed);
        let rel = rel
            .strip_prefix(&format!("{}/", self.dir.path().display()))
            .unwrap_or(rel);
        if let Some(rest) = rel.strip_prefix(&format!("{INCLUDE_DIR}/")) {
            if let Some((idx, tail)) = rest.split_once('/') {
                if let Some(dir) = idx.parse::<usize>().ok().and_then(|i| self.includes.get(i)) {
                    return dir.join(tail).display().to_string();
                }
            }
        }
        if rel == self.source_name {
            return self.source_name.clone();
        }
        printed.to_string()
    }

    /// The files the compiler read, from its dependency list (read bounded by
    /// [`fs::read::TEXT_OUTPUT_LIMIT`]).
    fn dependencies(
        &self,
        options: &CompileOptions,
        name: &str,
    ) -> Result<Vec<Dependency>, String> {
        let path = self.dir.path().join(name);
        let text = fs::read::read_file(
            &path,
            fs::read::TEXT_OUTPUT_LIMIT,
            "the compiler's dependency list",
            fs::read::Streams::None,
        )
        .map_err(|e| format!("cannot be read ({})", e.reason()))?;
        let deps = depfile::parse(&text).ok_or_else(|| "holds no rule".to_string())?;
        Ok(depfile::map_build_paths(
            &deps,
            &self.source_name,
            INCLUDE_DIR,
            &options.include_dirs,
            self.dir.path(),
        ))
    }

    fn dumps(&self, options: &CompileOptions) -> (Option<Vec<u8>>, Option<String>) {
        if !(options.dump_llvm_ir || options.dump_isa) {
            return (None, None);
        }
        let stem = self
            .source_name
            .rsplit_once('.')
            .map_or(self.source_name.as_str(), |(s, _)| s);
        let mut bc = None;
        let mut isa = None;
        let mut names: Vec<String> = crate::fs::observe::read_dir(self.dir.path())
            .into_iter()
            .flatten()
            .filter_map(Result::ok)
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|n| n.starts_with(&format!("{stem}-hip-amdgcn")))
            .collect();
        names.sort();
        for n in names {
            let p = self.dir.path().join(&n);
            if options.dump_llvm_ir && bc.is_none() && n.ends_with(".bc") {
                bc = fs::read::read_file(
                    &p,
                    fs::read::CODE_OBJECT_LIMIT,
                    "an LLVM bitcode dump",
                    fs::read::Streams::None,
                )
                .ok();
            }
            if options.dump_isa && isa.is_none() && n.ends_with(".s") {
                isa =
                    fs::read::read_text_lossy(&p, fs::read::CODE_OBJECT_LIMIT, "an assembly dump")
                        .ok();
            }
        }
        (bc, isa)
    }
}

/// The name of every build directory starts with this, then the creating process's ID and `-`.
const BUILD_PREFIX: &str = "hipjit-build-";
/// The same for the run directories of a compiler's identity probes ([`identity`]).
pub(crate) const IDENTITY_PREFIX: &str = "hipjit-id-";
/// The same for the directories of worker compiles ([`worker`]): the request, the result and
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
