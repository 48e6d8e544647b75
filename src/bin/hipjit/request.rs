//! The arguments of a compile request, shared by `hipjit compile` and `hipjit cache explain`
//! (which keys FILE as compile would), their parsing, and the checks both make before anything
//! is compiled; and `-j`, shared by `compile` and `cache warm`.

use std::path::PathBuf;

use hipjit::compiler::selection::CompilerChoice;
use hipjit::compiler::{CompileOptions, CxxStd, OptLevel, OptionsError};
use hipjit::cuda::target::SmTarget;
use hipjit::target_id::TargetId;

use crate::output::CliError;

/// The request's arguments: what is compiled for which target, and how.
#[derive(clap::Args, Debug)]
pub struct RequestArgs {
    /// Target to compile for: an AMDGPU target ID (`gfx90a`, `gfx942:sramecc+:xnack-`) or an
    /// NVIDIA SM target (`sm_90`, `sm_90a`); repeat for several of one platform.
    #[arg(long = "arch", required = true, value_name = "TARGET", value_parser = parse_arch)]
    pub targets: Vec<Arch>,
    /// Define a macro: `-D NAME` or `-D NAME=VALUE`.
    #[arg(short = 'D', value_name = "NAME[=VALUE]")]
    pub defines: Vec<String>,
    /// Add an include directory (searched in order, before each source's own directory).
    #[arg(short = 'I', value_name = "DIR")]
    pub include_dirs: Vec<PathBuf>,
    /// Optimisation level: 0, 1, 2, 3, s or z (default 3).
    #[arg(short = 'O', value_name = "LEVEL", value_parser = parse_opt_level)]
    pub opt_level: Option<OptLevel>,
    /// C++ standard: c++14, c++17, c++20 or c++23 (default c++17); `-std=c++20` works too.
    /// Spelled for the compiler: C++23 is -std=c++2b for clang before 17.
    #[arg(long = "std", value_name = "STD", value_parser = parse_std)]
    pub std: Option<CxxStd>,
    /// An extra compiler flag, passed as one word after hipjit's own and hashed into the cache
    /// key (repeatable; `--cflag=-mcumode`). Words after `--` are extra flags too. Flags that
    /// change the output kind, target, output path or dependency output, or make the compiler
    /// read files the cache key does not see (-include, --rocm-path, @file...), are refused.
    #[arg(long = "cflag", value_name = "FLAG", allow_hyphen_values = true)]
    pub cflags: Vec<String>,
    /// Code object version to ask for: 4, 5 or 6 (default: the compiler's own, v4 for Debian's
    /// hipcc 5.2.3, v6 for hipcc 7). Runtimes before HIP 6.2 reject v6.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(4..=6))]
    pub code_object_version: Option<u32>,
    /// The compiler: auto (default: `HIPJIT_COMPILER`, else auto), hipcc, hiprtc (AMDGPU
    /// targets), nvcc or nvrtc (sm_ targets). Auto takes the in-process compiler (hipRTC,
    /// NVRTC) where the parity test proved it gives the process compiler's code for the target
    /// and the source is one it compiles (no host code, no standard or system header; a
    /// failure is compiled again by the process compiler and remembered), or when no process
    /// compiler is found; each result says which compiler and why.
    #[arg(long = "compiler", value_name = "COMPILER", value_parser = parse_compiler)]
    pub compiler: Option<CompilerChoice>,
}

impl RequestArgs {
    /// The options of this request with `extra_flags` (the `--cflag` values, and for
    /// `compile` the words after `--`), for all its AMDGPU targets, with the SM targets
    /// apart (each is its own compile: a cubin holds one); refused as `hipjit compile`
    /// refuses them ([`split_targets`]; a malformed define is the compiler's to refuse).
    ///
    /// Errors: usage errors (exit status 2) from [`split_targets`].
    pub fn options(
        &self,
        extra_flags: Vec<String>,
    ) -> Result<(CompileOptions, Vec<SmTarget>), CliError> {
        let (amd, nvidia) = split_targets(
            &self.targets,
            self.compiler,
            self.code_object_version,
            self.opt_level,
        )?;
        let mut base = CompileOptions {
            targets: amd,
            include_dirs: self.include_dirs.clone(),
            std: self.std.unwrap_or_default(),
            extra_flags,
            code_object_version: self.code_object_version,
            ..CompileOptions::default()
        };
        if let Some(l) = self.opt_level {
            base.opt_level = l;
        }
        for d in &self.defines {
            base.defines.push(match d.split_once('=') {
                Some((n, v)) => (n.to_owned(), Some(v.to_owned())),
                None => (d.clone(), None),
            });
        }
        Ok((base, nvidia))
    }
}

/// `-j N`: how many compiles at once.
#[derive(clap::Args, Debug)]
pub struct JobsArg {
    /// Compile at most N files (or recorded requests) at once (default: the number of CPU
    /// cores). With N > 1 and several inputs, hipRTC and NVRTC compile in worker processes of
    /// this command
    /// (`hipjit rtc-worker`): in one process hipRTC compiles one program at a time, and a
    /// worker adds the compile timeout and crash isolation.
    #[arg(short = 'j', value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    pub jobs: Option<u32>,
}

impl JobsArg {
    /// The number of compiles at once `-j N` asks for (default: the number of CPU cores).
    pub fn get(&self) -> usize {
        self.jobs
            .map_or_else(hipjit::compiler::cpu_count, |j| j as usize)
    }
}

/// A target of `--arch`: AMDGPU or NVIDIA.
#[derive(Clone, Debug)]
pub enum Arch {
    /// An AMDGPU target ID.
    Amd(TargetId),
    /// An NVIDIA SM target.
    Nvidia(SmTarget),
}

impl std::fmt::Display for Arch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Arch::Amd(t) => t.fmt(f),
            Arch::Nvidia(t) => t.fmt(f),
        }
    }
}

pub(crate) fn parse_arch(s: &str) -> Result<Arch, String> {
    if let Some(n) = s.strip_prefix("compute_") {
        return Err(format!(
            "`{s}` names PTX (a virtual architecture); hipjit compiles cubins: use sm_{n}"
        ));
    }
    if s.starts_with("sm_") {
        SmTarget::parse(s)
            .map(Arch::Nvidia)
            .map_err(|e| e.to_string())
    } else {
        TargetId::parse(s).map(Arch::Amd).map_err(|e| e.to_string())
    }
}

pub(crate) fn parse_compiler(s: &str) -> Result<CompilerChoice, String> {
    s.parse()
        .map_err(|e: hipjit::compiler::selection::BadCompilerChoice| e.to_string())
}

pub(crate) fn parse_std(s: &str) -> Result<CxxStd, String> {
    s.parse::<CxxStd>().map_err(|e| e.to_string())
}

pub(crate) fn parse_opt_level(s: &str) -> Result<OptLevel, String> {
    Ok(match s {
        "0" => OptLevel::O0,
        "1" => OptLevel::O1,
        "2" => OptLevel::O2,
        "3" => OptLevel::O3,
        "s" => OptLevel::Os,
        "z" => OptLevel::Oz,
        _ => {
            return Err(format!(
                "invalid optimisation level '{s}': expected 0, 1, 2, 3, s or z"
            ))
        }
    })
}

/// `targets` as error messages name them: `gfx90a, gfx906`.
pub(crate) fn targets_text(targets: &[Arch]) -> String {
    targets
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join(", ")
}

/// `targets` split by platform (AMDGPU target IDs, SM targets), refusing what `hipjit
/// compile` refuses of them (usage errors, exit status 2): both platforms at once, a
/// `compiler` of the other platform, `--code-object-version` or `-O s`/`-O z` with SM
/// targets.
pub(crate) fn split_targets(
    targets: &[Arch],
    compiler: Option<CompilerChoice>,
    code_object_version: Option<u32>,
    opt_level: Option<OptLevel>,
) -> Result<(Vec<TargetId>, Vec<SmTarget>), CliError> {
    let amd: Vec<TargetId> = targets
        .iter()
        .filter_map(|t| match t {
            Arch::Amd(t) => Some(t.clone()),
            Arch::Nvidia(_) => None,
        })
        .collect();
    let nvidia: Vec<SmTarget> = targets
        .iter()
        .filter_map(|t| match t {
            Arch::Nvidia(t) => Some(*t),
            Arch::Amd(_) => None,
        })
        .collect();
    if let (Some(a), Some(n)) = (amd.first(), nvidia.first()) {
        return Err(CliError::usage(format!(
            "--arch {a} (AMDGPU) and --arch {n} (NVIDIA) cannot be mixed in one invocation: \
             the platforms compile with different compilers (hipcc, nvcc); run hipjit compile \
             once per platform"
        )));
    }
    let on_nvidia = !nvidia.is_empty();
    if on_nvidia && code_object_version.is_some() {
        return Err(CliError::usage(
            "--code-object-version applies to AMDGPU code objects, not to cubins (sm_ targets)",
        ));
    }
    if on_nvidia && matches!(opt_level, Some(OptLevel::Os | OptLevel::Oz)) {
        return Err(CliError::usage(
            "-O s and -O z are clang's: nvcc takes -O 0 to 3 for sm_ targets",
        ));
    }
    let nvidia_kind =
        |k: hipjit::compiler::CompilerKind| k.platform() == hipjit::runtime::Platform::Nvidia;
    match compiler.and_then(CompilerChoice::kind) {
        Some(k) if nvidia_kind(k) != on_nvidia => {
            let c = CompilerChoice::Kind(k);
            Err(CliError::usage(format!(
                "--compiler {c} does not compile for --arch {}: hipcc and hiprtc take AMDGPU \
                 targets, nvcc and nvrtc sm_ targets",
                targets_text(targets)
            )))
        }
        _ => Ok((amd, nvidia)),
    }
}

/// Checks `options` as `hipjit compile` does before anything is compiled: every error but a
/// refused flag is a usage error (exit status 2) naming `targets`; a refused flag is returned,
/// to be said once the compiler that would run it is known ([`refused_flag_error`]: hipRTC or
/// hipcc, NVRTC or nvcc).
pub(crate) fn check_options(
    options: &CompileOptions,
    targets: &str,
) -> Result<Option<OptionsError>, CliError> {
    match options.validate() {
        Ok(()) => Ok(None),
        Err(e @ (OptionsError::RejectedFlag { .. } | OptionsError::DanglingFlag { .. })) => {
            Ok(Some(e))
        }
        Err(e) => Err(CliError::usage(format!("target {targets}: {e}"))),
    }
}
