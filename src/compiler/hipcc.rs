//! Compiling HIP C++ source to AMDGPU code objects with `hipcc`.
//!
//! # How the compiler is run
//! * Found by `discovery` (the shared installation-root order of
//!   `hip_sys::discovery`); its identity ([`CompilerIdentity`], `identity`) is its kind,
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
//! * Cleared environment plus `ENV_ALLOWLIST` (values taken from hipjit's own environment
//!   when it starts the compiler); `TMPDIR` is the build directory and `LC_ALL=C`.
//! * A timeout ([`CompilerConfig::timeout`]) after which the compiler's whole process group
//!   is killed, and at most [`CompilerConfig::max_concurrent`] compiles at once.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::*;
use crate::fs;
use crate::process::{self, RunError, Slots};

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
    /// Finds the compiler (`discovery`) and reads its identity ([`identity::identify`]:
    /// remembered per user, so that a fresh process usually starts no compiler here), with the
    /// process environment.
    ///
    /// Errors: [`CompilerError::Discovery`] (nothing found, or an explicit path unusable),
    /// [`CompilerError::UnsafeEnvironment`] (a variable its shell would misparse),
    /// [`CompilerError::Identity`] (`--version` failed, a file of the compiler's closed list
    /// could not be read, or hipcc's installation holds paths its shell would misparse:
    /// checked before each run, `check_hipcc`).
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

    /// `Compiler::new` with the default configuration.
    pub fn discover() -> Result<Compiler, CompilerError> {
        Compiler::new(CompilerConfig::default())
    }

    /// Checks, before hipcc runs, what its shell would misparse in the paths it derives its
    /// installation from (`check_hipcc`, `check_hipcc_derived`): also
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
        self.compile_noting(source.as_ref(), options, &mut None)
    }

    /// [`Compiler::compile`], noting in `rejection` the files a rejected compile read
    /// ([`CompileError::Failed`] with an exit status: the compiler ran and refused the
    /// source), when its dependency list was written and covers the compile (one target, no
    /// dumps); what the JIT remembers a failure under.
    pub(crate) fn compile_noting(
        &self,
        source: &[u8],
        options: &CompileOptions,
        rejection: &mut Option<super::Rejection>,
    ) -> Result<CompileOutput, CompileError> {
        let phase = crate::phases::start("compile: installation check, build directory staged");
        options.validate()?;
        self.check_installation()?;
        let build = Build::stage(source, options)?;
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
        phase.end();
        let phase = crate::phases::start("compile: hipcc run");
        let started = Instant::now();
        let run = process::run(&mut cmd, self.inner.timeout);
        let duration = started.elapsed();
        phase.end();
        let _phase = crate::phases::start("compile: output, dependency list");
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
        let dumps = options.dump_llvm_ir || options.dump_isa;
        if !finished.status.success() {
            // clang writes the dependency list of a compile it rejects too (not when a header
            // is missing); with several targets it is one target's.
            if finished.status.code().is_some() && options.targets.len() == 1 && !dumps {
                if let Ok(dependencies) = build.dependencies(options, DEPS_NAME) {
                    *rejection = Some(super::Rejection {
                        dependencies,
                        started: started_at,
                    });
                }
            }
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
        // Removed off the compile's path (`compiler::later`).
        super::later::remove_later(build);
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
        if !options.headers.is_empty() {
            // The in-memory headers first on the include path (`HEADERS_DIR`).
            args.extend(["-I".to_string(), super::HEADERS_DIR.to_string()]);
        }
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

pub(crate) const OUTPUT_NAME: &str = "out.hsaco";
pub(crate) const DEPS_NAME: &str = "deps.d";
pub(crate) const INCLUDE_DIR: &str = "include";

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
        if !options.headers.is_empty() {
            super::write_headers(dir.path(), &options.headers)
                .map_err(|(path, source)| CompileError::BuildDir { path, source })?;
        }
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
        if let Some(name) = rel.strip_prefix(&format!("{}/", super::HEADERS_DIR)) {
            // An in-memory header: its own name.
            return name.to_string();
        }
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
        let headers = self.dir.path().join(super::HEADERS_DIR);
        Ok(depfile::map_build_paths(
            &deps,
            &self.source_name,
            INCLUDE_DIR,
            &options.include_dirs,
            self.dir.path(),
        )
        .into_iter()
        // The in-memory headers are keyed by the options.
        .filter(|d| !d.path.starts_with(&headers))
        .collect())
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
