//! What a compile is asked to do: targets, language standard, optimisation, defines, include
//! directories, extra flags; and the checks that reject flags hipjit must control itself.

use std::fmt;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use crate::target_id::TargetId;

/// The C++ standard passed as `-std=c++NN`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum CxxStd {
    /// `-std=c++11`.
    Cxx11,
    /// `-std=c++14`.
    Cxx14,
    /// `-std=c++17` (the default).
    #[default]
    Cxx17,
    /// `-std=c++20`.
    Cxx20,
    /// `-std=c++23` (clang 17+ spelling; older compilers reject it).
    Cxx23,
}

impl CxxStd {
    /// The flag, e.g. `-std=c++17`.
    pub fn flag(self) -> &'static str {
        match self {
            CxxStd::Cxx11 => "-std=c++11",
            CxxStd::Cxx14 => "-std=c++14",
            CxxStd::Cxx17 => "-std=c++17",
            CxxStd::Cxx20 => "-std=c++20",
            CxxStd::Cxx23 => "-std=c++23",
        }
    }
}

/// The optimisation level (`-O0` ... `-O3`, `-Os`, `-Oz`); the default is `-O3`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum OptLevel {
    /// `-O0`.
    O0,
    /// `-O1`.
    O1,
    /// `-O2`.
    O2,
    /// `-O3` (the default).
    #[default]
    O3,
    /// `-Os`.
    Os,
    /// `-Oz`.
    Oz,
}

impl OptLevel {
    /// The flag, e.g. `-O3`.
    pub fn flag(self) -> &'static str {
        match self {
            OptLevel::O0 => "-O0",
            OptLevel::O1 => "-O1",
            OptLevel::O2 => "-O2",
            OptLevel::O3 => "-O3",
            OptLevel::Os => "-Os",
            OptLevel::Oz => "-Oz",
        }
    }
}

/// Checks run on the compiled code object's metadata (NT_AMDGPU_METADATA, LLVM AMDGPUUsage
/// "Code Object V3+ Metadata"). A check that needs metadata the code object lacks fails.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Checks {
    /// Fail when any kernel spills SGPRs or VGPRs (`.sgpr_spill_count`, `.vgpr_spill_count`).
    pub no_spills: bool,
    /// Fail when any kernel uses scratch (private) memory (`.private_segment_fixed_size` > 0
    /// or `.uses_dynamic_stack`).
    pub no_scratch: bool,
}

/// Everything that decides what one compile produces.
///
/// Flags are built in this order: `-x hip --genco --offload-arch=T...` (one per target)
/// `-O3 [--no-gpu-bundle-output] -std=c++17 [-mcode-object-version=N] [-ffast-math]
/// [-gline-tables-only] [-v] -DNAME[=VALUE]... -I DIR... EXTRA...`. With one target the output
/// is a raw ELF code object; with several, a clang offload bundle holding one per target.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct CompileOptions {
    /// Target IDs (`gfx90a`, `gfx942:sramecc+:xnack-`): at least one, no duplicates, and one
    /// processor listed twice must write the same features in both
    /// ([`crate::target_id::check_target_list`]: `gfx90a:xnack+` with `gfx90a:xnack-` is fine,
    /// `gfx90a` with `gfx90a:xnack-` is not). hipjit never compiles without `--offload-arch`.
    pub targets: Vec<TargetId>,
    /// `-std=c++NN`, default C++17.
    pub std: CxxStd,
    /// Optimisation level, default `-O3`.
    pub opt_level: OptLevel,
    /// `-ffast-math`.
    pub fast_math: bool,
    /// `-DNAME` or `-DNAME=VALUE`; names must be C identifiers.
    pub defines: Vec<(String, Option<String>)>,
    /// `-I` directories, searched in order. They are staged under safe names in the build
    /// directory, and every header found in them is hashed into the cache key.
    pub include_dirs: Vec<PathBuf>,
    /// Directories the compiler searches by itself (its own installation, `CPATH`) whose
    /// headers should still be hashed into the cache key when the source includes them. Not
    /// passed to the compiler.
    pub tracked_include_dirs: Vec<PathBuf>,
    /// `-gline-tables-only`: line tables for profilers and debuggers, no full debug info.
    pub line_info: bool,
    /// `-v`: the compiler prints the commands it runs (to the compile log).
    pub verbose: bool,
    /// Further compiler flags, checked by [`check_extra_flag`].
    pub extra_flags: Vec<String>,
    /// `-mcode-object-version=N` (4, 5 or 6); `None` leaves the compiler's default. The JIT
    /// fills it from the runtime in use when that runtime says which versions it accepts.
    pub code_object_version: Option<u32>,
    /// The file name the source gets in the build directory (and in diagnostics); default
    /// `kernel.hip`. Letters, digits, `.`, `_`, `+`, `-` only, not starting with `.` or `-`
    /// ([`is_valid_source_name`]).
    pub source_name: Option<String>,
    /// Also produce the device LLVM bitcode (artefact `llvm-ir.bc`; `llvm-dis` prints it).
    pub dump_llvm_ir: bool,
    /// Also produce the device assembly (artefact `isa.s`).
    pub dump_isa: bool,
    /// Checks on the result's metadata; they do not change the cache key.
    pub checks: Checks,
}

impl CompileOptions {
    /// Options for one target, everything else at its default.
    pub fn for_target(target: TargetId) -> CompileOptions {
        CompileOptions {
            targets: vec![target],
            ..CompileOptions::default()
        }
    }

    /// Adds `-DNAME=VALUE`.
    pub fn define(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        self.defines.push((name.into(), Some(value.into())));
        self
    }

    /// Adds an include directory.
    pub fn include_dir(mut self, dir: impl Into<PathBuf>) -> Self {
        self.include_dirs.push(dir.into());
        self
    }

    /// Adds an extra compiler flag.
    pub fn flag(mut self, flag: impl Into<String>) -> Self {
        self.extra_flags.push(flag.into());
        self
    }

    /// The source file name in the build directory.
    pub fn source_file_name(&self) -> &str {
        self.source_name.as_deref().unwrap_or("kernel.hip")
    }

    /// Checks everything that can be checked without running the compiler.
    ///
    /// Errors: [`OptionsError`] naming the target, define, flag or name at fault.
    pub fn validate(&self) -> Result<(), OptionsError> {
        if self.targets.is_empty() {
            return Err(OptionsError::NoTarget);
        }
        for (i, a) in self.targets.iter().enumerate() {
            if self.targets[..i].contains(a) {
                return Err(OptionsError::DuplicateTarget(a.to_string()));
            }
        }
        if let Err(crate::target_id::TargetIdError::MixedForms { first, second }) =
            crate::target_id::check_target_list(&self.targets)
        {
            return Err(OptionsError::MixedTargetForms { first, second });
        }
        for (name, value) in &self.defines {
            let ident = !name.is_empty()
                && !name.starts_with(|c: char| c.is_ascii_digit())
                && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
            if !ident {
                return Err(OptionsError::BadDefine(name.clone()));
            }
            if value
                .as_deref()
                .is_some_and(|v| v.contains(['\n', '\r', '\0']))
            {
                return Err(OptionsError::BadDefineValue(name.clone()));
            }
        }
        for flag in &self.extra_flags {
            check_extra_flag(flag)?;
        }
        if let Some(v) = self.code_object_version {
            if !(4..=6).contains(&v) {
                return Err(OptionsError::CodeObjectVersion(v));
            }
        }
        let name = self.source_file_name();
        if !is_valid_source_name(name) {
            return Err(OptionsError::SourceName(name.to_string()));
        }
        Ok(())
    }

    /// The flags that decide the output, in order, with include directories as given (the
    /// staged names are substituted only on the real command line). This is the "effective
    /// flags" part of the cache key. `--no-gpu-bundle-output` appears with a single target.
    pub fn effective_flags(&self) -> Vec<String> {
        let mut f = vec!["-x".to_string(), "hip".into(), "--genco".into()];
        for t in &self.targets {
            f.push(format!("--offload-arch={t}"));
        }
        f.push(self.opt_level.flag().into());
        if self.targets.len() == 1 {
            f.push("--no-gpu-bundle-output".into());
        }
        f.push(self.std.flag().into());
        if let Some(v) = self.code_object_version {
            f.push(format!("-mcode-object-version={v}"));
        }
        if self.fast_math {
            f.push("-ffast-math".into());
        }
        if self.line_info {
            f.push("-gline-tables-only".into());
        }
        if self.verbose {
            f.push("-v".into());
        }
        for (name, value) in &self.defines {
            match value {
                Some(v) => f.push(format!("-D{name}={v}")),
                None => f.push(format!("-D{name}")),
            }
        }
        for d in &self.include_dirs {
            f.push("-I".into());
            f.push(d.display().to_string());
        }
        f.extend(self.extra_flags.iter().cloned());
        if self.dump_llvm_ir || self.dump_isa {
            f.push("-save-temps".into());
        }
        f
    }
}

/// Whether `name` is accepted as [`CompileOptions::source_name`]: letters, digits, `.`, `_`,
/// `+`, `-` only, not starting with `.` or `-` (what [`CompileOptions::validate`] checks).
pub fn is_valid_source_name(name: &str) -> bool {
    is_safe_name(name) && !name.starts_with(['.', '-'])
}

/// Whether `name` uses only characters no shell treats specially.
pub(crate) fn is_safe_name(name: &str) -> bool {
    !name.is_empty()
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-' | b'+'))
}

/// Why a flag is not accepted among [`CompileOptions::extra_flags`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RejectedBecause {
    /// It changes the output format (`-S`, `-c`, `-emit-llvm`, `--genco`, `-fgpu-rdc`...).
    OutputFormat,
    /// It names an output or dependency file (`-o`, `-MF`...).
    OutputPath,
    /// It changes the target list or triple (`--offload-arch`, `-mcpu`, `--target`...).
    TargetList,
    /// It is set through [`CompileOptions::code_object_version`].
    CodeObjectVersion,
    /// It is a CUDA/nvcc flag (`--cuda-path`, `-arch=sm_90`, `-Xptxas`...).
    CudaOnly,
    /// It changes the input language (`-x`).
    Language,
}

impl fmt::Display for RejectedBecause {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            RejectedBecause::OutputFormat => "it changes the output format",
            RejectedBecause::OutputPath => "it sets an output path, which hipjit owns",
            RejectedBecause::TargetList => {
                "it changes the target list: set CompileOptions::targets instead"
            }
            RejectedBecause::CodeObjectVersion => "set CompileOptions::code_object_version instead",
            RejectedBecause::CudaOnly => "it is a CUDA-only flag",
            RejectedBecause::Language => "hipjit always compiles the source as HIP (-x hip)",
        })
    }
}

/// Errors in [`CompileOptions`], each naming what was wrong.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[non_exhaustive]
pub enum OptionsError {
    /// No target ID: hipjit never compiles without `--offload-arch`.
    #[error("no target ID given and none could be read from a device: hipjit never compiles without --offload-arch")]
    NoTarget,
    /// The same target ID twice.
    #[error("target ID {0} is listed twice")]
    DuplicateTarget(String),
    /// Two forms of one processor (`gfx90a` and `gfx90a:xnack-`).
    #[error("target IDs {first} and {second} are two forms of one processor: give one")]
    MixedTargetForms {
        /// The first form listed.
        first: String,
        /// The later form.
        second: String,
    },
    /// A define whose name is not a C identifier.
    #[error("define name {0:?} is not a C identifier")]
    BadDefine(String),
    /// A define value with a newline or NUL.
    #[error("the value of define {0} contains a newline or NUL")]
    BadDefineValue(String),
    /// An extra flag hipjit does not accept.
    #[error("compiler flag {flag:?} is not accepted: {because}")]
    RejectedFlag {
        /// The flag as given.
        flag: String,
        /// Why.
        because: RejectedBecause,
    },
    /// A code object version other than 4, 5, 6.
    #[error("code object version {0} is not supported (4, 5 or 6)")]
    CodeObjectVersion(u32),
    /// A source name with characters outside `[A-Za-z0-9._+-]`.
    #[error("source name {0:?} must use only letters, digits, '.', '_', '+', '-' and not start with '.' or '-'")]
    SourceName(String),
}

/// Rejects flags that change the output format, output path or target list, the code object
/// version flag (an option of its own) and CUDA-only flags.
///
/// Errors: [`OptionsError::RejectedFlag`] naming the flag and the reason.
pub fn check_extra_flag(flag: &str) -> Result<(), OptionsError> {
    use RejectedBecause::*;
    let exact: &[(&str, RejectedBecause)] = &[
        ("-S", OutputFormat),
        ("-c", OutputFormat),
        ("-E", OutputFormat),
        ("-M", OutputFormat),
        ("-MM", OutputFormat),
        ("-MD", OutputPath),
        ("-MMD", OutputPath),
        ("-emit-llvm", OutputFormat),
        ("--genco", OutputFormat),
        ("-fsyntax-only", OutputFormat),
        ("-shared", OutputFormat),
        ("-save-temps", OutputFormat),
        ("-fgpu-rdc", OutputFormat),
        ("-fno-gpu-rdc", OutputFormat),
        ("--gpu-bundle-output", OutputFormat),
        ("--no-gpu-bundle-output", OutputFormat),
        ("--offload-compress", OutputFormat),
        ("--cuda-device-only", OutputFormat),
        ("--offload-device-only", OutputFormat),
        ("--cuda-host-only", OutputFormat),
        ("--offload-host-only", OutputFormat),
        ("-o", OutputPath),
        ("-MF", OutputPath),
        ("-MT", OutputPath),
        ("-MQ", OutputPath),
        ("-target", TargetList),
        ("-x", Language),
        ("-cubin", CudaOnly),
        ("-ptx", CudaOnly),
        ("-fatbin", CudaOnly),
        ("-rdc", CudaOnly),
        ("-lineinfo", CudaOnly),
        ("-use_fast_math", CudaOnly),
        ("--use_fast_math", CudaOnly),
        ("--expt-relaxed-constexpr", CudaOnly),
        ("--expt-extended-lambda", CudaOnly),
        ("-gencode", CudaOnly),
    ];
    let prefixes: &[(&str, RejectedBecause)] = &[
        ("-o", OutputPath),
        ("--output", OutputPath),
        ("-MF", OutputPath),
        ("-save-temps=", OutputFormat),
        ("--offload-arch", TargetList),
        ("--no-offload-arch", TargetList),
        ("--amdgpu-target", TargetList),
        ("--cuda-gpu-arch", TargetList),
        ("--no-cuda-gpu-arch", TargetList),
        ("--offload=", TargetList),
        ("--offload-targets", TargetList),
        ("-mcpu", TargetList),
        ("-march", TargetList),
        ("--target", TargetList),
        ("-triple", TargetList),
        ("-mcode-object-version", CodeObjectVersion),
        ("-x", Language),
        ("--cuda-path", CudaOnly),
        ("-arch=sm_", CudaOnly),
        ("-arch=compute_", CudaOnly),
        ("--gpu-architecture", CudaOnly),
        ("--gpu-code", CudaOnly),
        ("-Xptxas", CudaOnly),
        ("--ptxas-options", CudaOnly),
        ("-Xcompiler", CudaOnly),
        ("--compiler-options", CudaOnly),
        ("--relocatable-device-code", CudaOnly),
        ("-ccbin", CudaOnly),
        ("--compiler-bindir", CudaOnly),
        ("-Xcuda-", CudaOnly),
    ];
    let reject = |because| OptionsError::RejectedFlag {
        flag: flag.to_string(),
        because,
    };
    if let Some((_, b)) = exact.iter().find(|(f, _)| *f == flag) {
        return Err(reject(*b));
    }
    if let Some((_, b)) = prefixes.iter().find(|(p, _)| flag.starts_with(p)) {
        return Err(reject(*b));
    }
    Ok(())
}
