//! What a compile is asked to do: targets, language standard, optimisation, defines, include
//! directories, extra flags; and the checks that reject flags hipjit must control itself.

use std::fmt;
use std::path::PathBuf;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

#[doc(no_inline)]
pub use crate::compiler::flags::{check_extra_flag, RejectedBecause};
use crate::compiler::kind::CompilerKind;
use crate::target::SmTarget;
use crate::target::TargetId;

/// The C++ standard: `-std=c++NN`, spelled for each compiler by
/// [`CompilerKind::std_flag`](crate::compiler::kind::CompilerKind::std_flag) (C++23 is
/// `-std=c++2b` for clang before 17). The default is C++17, for hipcc and nvcc alike.
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
    /// `-std=c++23` (`-std=c++2b` for clang before 17).
    Cxx23,
}

/// A C++ standard name that is not one of `c++11`, `c++14`, `c++17`, `c++20`, `c++23`.
#[derive(Debug, Clone, thiserror::Error, PartialEq, Eq)]
#[error("unknown C++ standard {0:?}: expected c++14, c++17, c++20 or c++23 (or c++11)")]
pub struct UnknownStd(pub String);

impl FromStr for CxxStd {
    type Err = UnknownStd;
    /// Parses `c++14`, `c++17`, `c++20`, `c++23` (also `c++11`, and the draft names
    /// `c++1y`, `c++1z`, `c++2a`, `c++2b`).
    fn from_str(s: &str) -> Result<Self, UnknownStd> {
        Ok(match s {
            "c++11" => CxxStd::Cxx11,
            "c++14" | "c++1y" => CxxStd::Cxx14,
            "c++17" | "c++1z" => CxxStd::Cxx17,
            "c++20" | "c++2a" => CxxStd::Cxx20,
            "c++23" | "c++2b" => CxxStd::Cxx23,
            _ => return Err(UnknownStd(s.to_string())),
        })
    }
}

impl fmt::Display for CxxStd {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.flag().trim_start_matches("-std="))
    }
}

impl CxxStd {
    /// The standard flag as clang 17+ and nvcc spell it, e.g. `-std=c++17`.
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

/// Everything that decides what one compile produces, on either platform: AMDGPU target IDs in
/// [`CompileOptions::targets`] (hipcc, hipRTC: code objects), or one SM target in
/// [`CompileOptions::sm_targets`] (nvcc, NVRTC: a cubin). [`crate::jit::Jit::load`] fills the
/// one the device needs when both are empty.
///
/// For hipcc, flags are built in this order: `-x hip --genco --offload-arch=T...` (one per target)
/// `-O3 [--no-gpu-bundle-output] -std=c++17 [-mcode-object-version=N] [-ffast-math]
/// [-gline-tables-only] [-v] -DNAME[=VALUE]... -I DIR... EXTRA... [-save-temps]`, the standard
/// spelled for the compiler ([`CompileOptions::effective_flags_for`]). With one target the
/// output is a raw ELF code object; with several, a clang offload bundle holding one per target.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct CompileOptions {
    /// Target IDs (`gfx90a`, `gfx942:sramecc+:xnack-`): at least one, no duplicates, and one
    /// processor listed twice must write the same features in both
    /// ([`crate::target::amdgpu::check_target_list`]: `gfx90a:xnack+` with `gfx90a:xnack-` is fine,
    /// `gfx90a` with `gfx90a:xnack-` is not). hipjit never compiles without `--offload-arch`.
    pub targets: Vec<TargetId>,
    /// SM targets (`sm_90`, `sm_90a`) of HIP's NVIDIA platform: exactly one when set (a cubin
    /// holds machine code for one SM), and then [`CompileOptions::targets`] is empty.
    #[serde(default)]
    pub sm_targets: Vec<SmTarget>,
    /// The C++ standard, default C++17 (`-std=c++17`), spelled per compiler (C++23 is
    /// `-std=c++2b` for clang before 17).
    pub std: CxxStd,
    /// Optimisation level, default `-O3`.
    pub opt_level: OptLevel,
    /// `-ffast-math`.
    pub fast_math: bool,
    /// `-DNAME` or `-DNAME=VALUE`; names must be C identifiers.
    pub defines: Vec<(String, Option<String>)>,
    /// Headers given by name and contents, in memory, as NVRTC's and hipRTC's
    /// `CreateProgram` take them: `#include "name"` in the source finds them. hipRTC and
    /// NVRTC are handed them natively; for hipcc and nvcc they are written beside the source
    /// in the compile's private build directory (so `#include "name"` finds them there, ahead
    /// of the include directories). Their names and contents are in the cache key (field
    /// `headers`), never their place on disk. Names are relative paths of
    /// [`is_valid_header_name`] components (`reduce.h`, `detail/warp.h`), each given once;
    /// contents hold no NUL byte.
    #[serde(default)]
    pub headers: Vec<(String, String)>,
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
    /// Further compiler flags, passed as given after hipjit's own and hashed into the cache
    /// key. Checked by [`CompilerKind::check_extra_flags`] (hipcc's rules): flags that change
    /// the output kind, target, output path or dependency output, and flags that make the
    /// compiler read files the key does not see, are refused by name
    /// (`flags`).
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

    /// Options for one SM target of HIP's NVIDIA platform (a cubin), everything else at its
    /// default.
    pub fn for_sm(target: SmTarget) -> CompileOptions {
        CompileOptions {
            sm_targets: vec![target],
            ..CompileOptions::default()
        }
    }

    /// The platform these options compile for: [`Platform::Nvidia`] with an SM target,
    /// [`Platform::Amd`] otherwise.
    ///
    /// [`Platform::Nvidia`]: crate::safe::runtime::Platform::Nvidia
    /// [`Platform::Amd`]: crate::safe::runtime::Platform::Amd
    pub fn platform(&self) -> crate::safe::runtime::Platform {
        if self.sm_targets.is_empty() {
            crate::safe::runtime::Platform::Amd
        } else {
            crate::safe::runtime::Platform::Nvidia
        }
    }

    /// The targets as text, in order: the target IDs, or the SM target.
    pub fn target_names(&self) -> Vec<String> {
        self.targets
            .iter()
            .map(|t| t.to_string())
            .chain(self.sm_targets.iter().map(|t| t.to_string()))
            .collect()
    }

    /// Adds `-DNAME=VALUE`, the value as it displays (`Display`): a string, a number, a
    /// character.
    ///
    /// ```
    /// use hipjit::compiler::CompileOptions;
    /// let o = CompileOptions::default().define("COLS", 256).define("EPS", 1e-6).define("T", "float");
    /// assert_eq!(o.defines[0], ("COLS".to_string(), Some("256".to_string())));
    /// assert_eq!(o.defines[1].1.as_deref(), Some("0.000001"));
    /// assert_eq!(o.defines[2].1.as_deref(), Some("float"));
    /// ```
    pub fn define(mut self, name: impl Into<String>, value: impl fmt::Display) -> Self {
        self.defines.push((name.into(), Some(value.to_string())));
        self
    }

    /// Adds an in-memory header [`CompileOptions::headers`]: `#include "name"` in the source
    /// reads `contents`, with every compiler, and no file is written by the caller.
    ///
    /// With NVRTC, a quoted `#include` inside `contents` must name another in-memory header:
    /// NVRTC looks any other quoted name up in the process's current directory first, a file
    /// no key could cover, so the compile is refused naming it
    /// ([`crate::compiler::rtc::RtcError::NoDependencies`]); include a file of an include
    /// directory as `<name>`.
    ///
    /// ```
    /// use hipjit::compiler::CompileOptions;
    /// const REDUCE_H: &str = "__device__ inline float twice(float x) { return 2 * x; }\n";
    /// let o = CompileOptions::default().header("softmax/reduce.h", REDUCE_H);
    /// assert_eq!(o.headers, [("softmax/reduce.h".to_string(), REDUCE_H.to_string())]);
    /// // A name that would leave the build directory is refused by name:
    /// let bad = CompileOptions::for_target("gfx90a".parse()?).header("../x.h", "");
    /// assert_eq!(
    ///     bad.validate().unwrap_err().to_string(),
    ///     "header name \"../x.h\" must be a relative path of components of letters, digits, \
    ///      '.', '_', '+', '-' (not '.' or '..', not starting with '-')"
    /// );
    /// # Ok::<(), hipjit::Error>(())
    /// ```
    pub fn header(mut self, name: impl Into<String>, contents: impl Into<String>) -> Self {
        self.headers.push((name.into(), contents.into()));
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
        if !self.sm_targets.is_empty() {
            return self.validate_nvidia();
        }
        if self.targets.is_empty() {
            return Err(OptionsError::NoTarget);
        }
        for (i, a) in self.targets.iter().enumerate() {
            if self.targets[..i].contains(a) {
                return Err(OptionsError::DuplicateTarget(a.to_string()));
            }
        }
        if let Err(crate::target::TargetIdError::MixedForms { first, second }) =
            crate::target::amdgpu::check_target_list(&self.targets)
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
        CompilerKind::Hipcc.check_extra_flags(&self.extra_flags)?;
        if let Some(v) = self.code_object_version {
            if !(4..=6).contains(&v) {
                return Err(OptionsError::CodeObjectVersion(v));
            }
        }
        self.validate_headers()?;
        let name = self.source_file_name();
        if !is_valid_source_name(name) {
            return Err(OptionsError::SourceName(name.to_string()));
        }
        Ok(())
    }

    /// The in-memory headers' names and contents ([`CompileOptions::headers`]).
    fn validate_headers(&self) -> Result<(), OptionsError> {
        for (i, (name, contents)) in self.headers.iter().enumerate() {
            if !is_valid_header_name(name) {
                return Err(OptionsError::HeaderName(name.clone()));
            }
            if name == self.source_file_name() || self.headers[..i].iter().any(|(n, _)| n == name) {
                return Err(OptionsError::DuplicateHeader(name.clone()));
            }
            if contents.contains('\0') {
                return Err(OptionsError::HeaderContents(name.clone()));
            }
        }
        Ok(())
    }

    /// [`CompileOptions::validate`], a refused extra flag named after `backend`, the compiler
    /// that runs: [`validate`](CompileOptions::validate) checks flags before the compiler is
    /// known, by hipcc's rules for AMDGPU targets and nvcc's for an SM target; hipRTC's rules
    /// are hipcc's and more ([`CompilerKind::check_extra_flags`]) and NVRTC's are nvcc's, so a
    /// flag refused there is refused by `backend` for the same reason.
    ///
    /// Errors: as [`CompileOptions::validate`].
    pub fn validate_for(&self, backend: CompilerKind) -> Result<(), OptionsError> {
        self.validate().map_err(|e| e.for_backend(backend))
    }

    /// [`CompileOptions::validate`] for an SM target: one target, no AMDGPU target with it,
    /// nothing that only AMD compilers do, flags by nvcc's rules (`-I DIR` accepted).
    fn validate_nvidia(&self) -> Result<(), OptionsError> {
        if !self.targets.is_empty() {
            return Err(OptionsError::MixedPlatforms {
                amd: self.targets[0].to_string(),
                nvidia: self.sm_targets[0].to_string(),
            });
        }
        if self.sm_targets.len() > 1 {
            return Err(OptionsError::SeveralSmTargets(
                self.sm_targets.iter().map(|t| t.to_string()).collect(),
            ));
        }
        let unsupported = |option: &'static str| {
            Err(OptionsError::NotOnNvidia {
                option,
                target: self.sm_targets[0].to_string(),
            })
        };
        if self.code_object_version.is_some() {
            return unsupported("code_object_version");
        }
        // nvcc's and NVRTC's `-O` takes a number only ("'s': expected a number").
        match self.opt_level {
            OptLevel::Os => return unsupported("opt_level -Os"),
            OptLevel::Oz => return unsupported("opt_level -Oz"),
            _ => {}
        }
        if self.dump_llvm_ir {
            return unsupported("dump_llvm_ir");
        }
        if self.dump_isa {
            return unsupported("dump_isa");
        }
        if self.checks != Checks::default() {
            return unsupported("checks (they read AMDGPU metadata)");
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
        let mut rest = Vec::with_capacity(self.extra_flags.len());
        let mut it = self.extra_flags.iter();
        while let Some(f) = it.next() {
            if f == "-I" {
                let _ = it.next();
            } else if !f.starts_with("-I") {
                rest.push(f.clone());
            }
        }
        CompilerKind::Nvcc.check_extra_flags(&rest)?;
        self.validate_headers()?;
        let name = self.source_file_name();
        if !is_valid_source_name(name) {
            return Err(OptionsError::SourceName(name.to_string()));
        }
        Ok(())
    }

    /// The flags that decide the output, in order, with include directories as given (the
    /// staged names are substituted only on the real command line) and the standard as clang
    /// 17+ spells it. `--no-gpu-bundle-output` appears with a single target.
    pub fn effective_flags(&self) -> Vec<String> {
        self.flags(Some(self.std.flag()), true)
    }

    /// [`CompileOptions::effective_flags`] with the standard spelled for `compiler`
    /// ([`CompilerKind::std_flag`]): the flags hipcc is given.
    pub fn effective_flags_for(&self, compiler: &crate::compiler::CompilerIdentity) -> Vec<String> {
        self.flags(
            Some(&CompilerKind::Hipcc.std_flag(self.std, compiler)),
            true,
        )
    }

    /// hipjit's own flags: [`CompileOptions::effective_flags`] without the standard and the
    /// extra flags (the `flags` field of the cache key record, which keys those two in fields
    /// of their own: `key`).
    pub fn own_flags(&self) -> Vec<String> {
        self.flags(None, false)
    }

    fn flags(&self, std: Option<&str>, extra: bool) -> Vec<String> {
        let mut f = vec!["-x".to_string(), "hip".into(), "--genco".into()];
        for t in &self.targets {
            f.push(format!("--offload-arch={t}"));
        }
        f.push(self.opt_level.flag().into());
        if self.targets.len() == 1 {
            f.push("--no-gpu-bundle-output".into());
        }
        if let Some(std) = std {
            f.push(std.into());
        }
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
        if extra {
            f.extend(self.extra_flags.iter().cloned());
        }
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

/// Whether `name` can name an in-memory header ([`CompileOptions::headers`]): `/`-separated
/// components of `[A-Za-z0-9._+-]`, none empty, `.` or `..`, none starting with `-`, at most
/// 255 bytes in all; so that, written below a build directory, it stays there.
pub fn is_valid_header_name(name: &str) -> bool {
    name.len() <= 255
        && name
            .split('/')
            .all(|c| is_safe_name(c) && c != "." && c != ".." && !c.starts_with('-'))
}

/// Whether `name` uses only characters no shell treats specially.
pub(crate) fn is_safe_name(name: &str) -> bool {
    !name.is_empty()
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-' | b'+'))
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
    /// An extra flag hipjit does not accept for this backend (`flags`).
    #[error("compiler flag {flag:?} is not accepted for {backend}: {because}")]
    RejectedFlag {
        /// The flag as given (`-Xclang X` for a pair).
        flag: String,
        /// The compiler it was meant for.
        backend: CompilerKind,
        /// Why.
        because: RejectedBecause,
    },
    /// A flag that takes the next word as its value (`-Xclang`, `-mllvm`, `-Xptxas`) came last.
    #[error("compiler flag {flag:?} for {backend} needs a value after it")]
    DanglingFlag {
        /// The flag.
        flag: String,
        /// The compiler it was meant for.
        backend: CompilerKind,
    },
    /// AMDGPU target IDs and an SM target in one set of options.
    #[error(
        "target {amd} (AMD) and {nvidia} (NVIDIA) are of two platforms: compile them separately"
    )]
    MixedPlatforms {
        /// The first AMDGPU target ID.
        amd: String,
        /// The SM target.
        nvidia: String,
    },
    /// More than one SM target: a cubin holds machine code for one.
    #[error("SM targets {} given: a cubin holds code for one SM target; compile each separately", .0.join(", "))]
    SeveralSmTargets(Vec<String>),
    /// An option that only AMD compilers honour, set for an SM target.
    #[error("{option} applies to AMDGPU code objects only, not to the SM target {target}")]
    NotOnNvidia {
        /// The option (the field of [`CompileOptions`]).
        option: &'static str,
        /// The SM target.
        target: String,
    },
    /// A code object version other than 4, 5, 6.
    #[error("code object version {0} is not supported (4, 5 or 6)")]
    CodeObjectVersion(u32),
    /// An in-memory header name that is not [`is_valid_header_name`].
    #[error("header name {0:?} must be a relative path of components of letters, digits, '.', '_', '+', '-' (not '.' or '..', not starting with '-')")]
    HeaderName(String),
    /// An in-memory header named twice, or named as the source.
    #[error("header {0:?} is given twice (or is the source's own name)")]
    DuplicateHeader(String),
    /// An in-memory header holding a NUL byte (NVRTC and hipRTC take C strings).
    #[error("header {0:?} contains a NUL byte")]
    HeaderContents(String),
    /// A source name with characters outside `[A-Za-z0-9._+-]`.
    #[error("source name {0:?} must use only letters, digits, '.', '_', '+', '-' and not start with '.' or '-'")]
    SourceName(String),
}

impl OptionsError {
    /// This error, a refused flag ([`OptionsError::RejectedFlag`],
    /// [`OptionsError::DanglingFlag`]) named after `backend` when it compiles for the same
    /// platform as the compiler whose rules refused it (hipRTC for hipcc's, NVRTC for nvcc's);
    /// any other error as it is.
    pub fn for_backend(self, backend: CompilerKind) -> OptionsError {
        let same_platform = |b: CompilerKind| b.is_clang() == backend.is_clang();
        match self {
            OptionsError::RejectedFlag {
                flag,
                backend: b,
                because,
            } if same_platform(b) => OptionsError::RejectedFlag {
                flag,
                backend,
                because,
            },
            OptionsError::DanglingFlag { flag, backend: b } if same_platform(b) => {
                OptionsError::DanglingFlag { flag, backend }
            }
            e => e,
        }
    }
}
