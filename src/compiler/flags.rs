//! The rules each compiler backend applies to the flags a caller adds, and how each spells the
//! C++ standard, keyed by [`CompilerKind::flag_rules`]: hipcc and hipRTC (clang) share one table, nvcc and
//! NVRTC another.
//!
//! A caller's extra flags (`CompileOptions::extra_flags`, `hipjit compile --cflag` or the words
//! after `--`) reach the compiler as given, after hipjit's own, and are part of the cache key.
//! Refused, by name, with the reason:
//! - flags that change the output kind, the target, the output path or the dependency output
//!   (`-o`, `--offload-arch`, `-c`, `-S`, `-E`, `-M*`, `-save-temps`, `-fsyntax-only`,
//!   `-fgpu-rdc`, `--offload-*`; nvcc's `-ptx`, `-arch`, `-gencode`, `-rdc`...): hipjit owns
//!   them, and the cache holds one code object per key;
//! - flags that make the compiler read files the cache key does not see (`-include`, `-imacros`,
//!   `--rocm-path`, `--hip-path`, `--rocm-device-lib-path`, `-mlink-builtin-bitcode`,
//!   `-Xclang -mlink-bitcode-file`, `-fprofile-*-use`, `@responsefile`, `--config`,
//!   `-fplugin`, `--sysroot`, `-B`...), and include directories (`-I`, `-isystem`...), which
//!   hipjit stages and hashes itself when given as include directories;
//! - flags set through an option of their own (`-std=`, `-O`, `-x`, the code object version);
//! - flags of the other platform's compiler (a CUDA flag for hipcc, an AMDGPU one for nvcc).
//!
//! `-Xclang X` (and `-Xclang=X`) is judged by `X` with the same rules plus cc1's own
//! (`-load`, `-plugin`, `-dependency-file`, `-mlink-bitcode-file`...). nvcc's `-Xcompiler A,B`
//! (and `-Xcompiler=`, `--compiler-options`) is judged word by word: a host-compiler word that
//! reads files or adds an include directory (`-include`, `-imacros`, `-I`, `-isystem`, `@file`,
//! `--sysroot`, `-B`, `-specs`...) is refused as `-Xcompiler WORD`. A flag with a newline or a
//! NUL byte is refused.

use std::fmt;

use crate::compiler::kind::{CompilerKind, FlagRules};
use crate::compiler::options::{CxxStd, OptionsError};
use crate::compiler::CompilerIdentity;

/// Why a flag is not accepted among a compile's extra flags.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RejectedBecause {
    /// It changes the output format (`-S`, `-c`, `-emit-llvm`, `--genco`, `-fgpu-rdc`...).
    OutputFormat,
    /// It names an output file (`-o`...).
    OutputPath,
    /// It writes or changes the dependency output (`-M`, `-MD`, `-MF`, `-MT`...), which hipjit
    /// asks of the compiler itself.
    DependencyOutput,
    /// It changes the target list or triple (`--offload-arch`, `-mcpu`, `--target`, `-arch`...).
    TargetList,
    /// It is set through [`crate::compiler::CompileOptions::code_object_version`].
    CodeObjectVersion,
    /// It makes the compiler read a file the cache key does not see (`-include`,
    /// `--rocm-path`, `-fprofile-use`, `@file`...).
    ReadsUnkeyedFiles,
    /// It adds an include directory: give it as an include directory (`-I`,
    /// `CompileOptions::include_dirs`), which hipjit stages and hashes into the key.
    IncludeDirectory,
    /// It sets the C++ standard: use `--std` / `CompileOptions::std`.
    Standard,
    /// It sets the optimisation level: use `-O` / `CompileOptions::opt_level`.
    OptLevel,
    /// It is a CUDA/nvcc flag (`--cuda-path`, `-arch=sm_90`, `-Xptxas`...), given to hipcc.
    CudaOnly,
    /// It is a hipcc/clang AMDGPU flag (`-mcumode`, `-fgpu-...`, `-Xclang`...), given to nvcc.
    AmdOnly,
    /// It changes the input language (`-x`).
    Language,
    /// It holds a newline or a NUL byte.
    ControlCharacter,
}

impl fmt::Display for RejectedBecause {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            RejectedBecause::OutputFormat => "it changes the output format, which hipjit owns",
            RejectedBecause::OutputPath => "it sets an output path, which hipjit owns",
            RejectedBecause::DependencyOutput => {
                "it changes the dependency output, which hipjit asks of the compiler itself"
            }
            RejectedBecause::TargetList => {
                "it changes the target list: give the targets as targets (--arch, \
                 CompileOptions::targets)"
            }
            RejectedBecause::CodeObjectVersion => {
                "set the code object version as an option (--code-object-version, \
                 CompileOptions::code_object_version)"
            }
            RejectedBecause::ReadsUnkeyedFiles => {
                "it makes the compiler read files the cache key does not see"
            }
            RejectedBecause::IncludeDirectory => {
                "give include directories with -I (CompileOptions::include_dirs): hipjit stages \
                 them and hashes their headers into the cache key"
            }
            RejectedBecause::Standard => "set the C++ standard with --std (CompileOptions::std)",
            RejectedBecause::OptLevel => {
                "set the optimisation level with -O (CompileOptions::opt_level)"
            }
            RejectedBecause::CudaOnly => "it is a CUDA (nvcc) flag",
            RejectedBecause::AmdOnly => "it is a hipcc/clang flag that nvcc does not take",
            RejectedBecause::Language => "hipjit sets the input language itself",
            RejectedBecause::ControlCharacter => "it contains a newline or a NUL byte",
        })
    }
}

use RejectedBecause::*;

/// (flag, reason) pairs matched exactly, for hipcc (clang's driver).
const HIPCC_EXACT: &[(&str, RejectedBecause)] = &[
    ("-S", OutputFormat),
    ("-c", OutputFormat),
    ("-E", OutputFormat),
    ("-emit-llvm", OutputFormat),
    ("--genco", OutputFormat),
    ("-fsyntax-only", OutputFormat),
    ("-shared", OutputFormat),
    ("-fgpu-rdc", OutputFormat),
    ("-fno-gpu-rdc", OutputFormat),
    ("--gpu-bundle-output", OutputFormat),
    ("--no-gpu-bundle-output", OutputFormat),
    ("-###", OutputFormat),
    ("--version", OutputFormat),
    ("--help", OutputFormat),
    ("-help", OutputFormat),
    ("-o", OutputPath),
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
    ("-I", IncludeDirectory),
];

/// (prefix, reason) pairs, for hipcc; the first match decides.
const HIPCC_PREFIX: &[(&str, RejectedBecause)] = &[
    ("@", ReadsUnkeyedFiles),
    ("-B", ReadsUnkeyedFiles),
    ("-F", IncludeDirectory),
    ("-o", OutputPath),
    ("--output", OutputPath),
    ("-M", DependencyOutput),
    ("--write-dependencies", DependencyOutput),
    ("--write-user-dependencies", DependencyOutput),
    ("--dependencies", DependencyOutput),
    ("--user-dependencies", DependencyOutput),
    ("-dependency-file", DependencyOutput),
    ("-dependency-dot", DependencyOutput),
    ("-save-temps", OutputFormat),
    ("--save-temps", OutputFormat),
    ("-emit-", OutputFormat),
    ("--emit-", OutputFormat),
    ("--offload-arch", TargetList),
    ("--no-offload-arch", TargetList),
    ("--offload", OutputFormat),
    ("--no-offload", OutputFormat),
    ("--cuda-device-only", OutputFormat),
    ("--cuda-host-only", OutputFormat),
    ("--cuda-compile-host-device", OutputFormat),
    ("--amdgpu-target", TargetList),
    ("--cuda-gpu-arch", TargetList),
    ("--no-cuda-gpu-arch", TargetList),
    ("-mcpu", TargetList),
    ("-march", TargetList),
    ("--target", TargetList),
    ("-target-cpu", TargetList),
    ("-triple", TargetList),
    ("-mcode-object-version", CodeObjectVersion),
    ("-std=", Standard),
    ("--std", Standard),
    ("-O", OptLevel),
    ("--optimize", OptLevel),
    ("-x", Language),
    ("--language", Language),
    ("-include", ReadsUnkeyedFiles),
    ("--include", ReadsUnkeyedFiles),
    ("-imacros", ReadsUnkeyedFiles),
    ("--imacros", ReadsUnkeyedFiles),
    ("--rocm-path", ReadsUnkeyedFiles),
    ("--hip-path", ReadsUnkeyedFiles),
    ("--rocm-device-lib-path", ReadsUnkeyedFiles),
    ("--hip-device-lib", ReadsUnkeyedFiles),
    ("--hipstdpar-path", ReadsUnkeyedFiles),
    ("-mlink-builtin-bitcode", ReadsUnkeyedFiles),
    ("-mlink-bitcode-file", ReadsUnkeyedFiles),
    ("-fprofile-use", ReadsUnkeyedFiles),
    ("-fprofile-instr-use", ReadsUnkeyedFiles),
    ("-fprofile-sample-use", ReadsUnkeyedFiles),
    ("-fprofile-list", ReadsUnkeyedFiles),
    ("-fprofile-remapping-file", ReadsUnkeyedFiles),
    ("-fauto-profile", ReadsUnkeyedFiles),
    ("--config", ReadsUnkeyedFiles),
    ("-fplugin", ReadsUnkeyedFiles),
    ("-fpass-plugin", ReadsUnkeyedFiles),
    ("-load", ReadsUnkeyedFiles),
    ("-plugin", ReadsUnkeyedFiles),
    ("-add-plugin", ReadsUnkeyedFiles),
    ("-fsanitize-ignorelist", ReadsUnkeyedFiles),
    ("-fsanitize-blacklist", ReadsUnkeyedFiles),
    ("-fxray-always-instrument", ReadsUnkeyedFiles),
    ("-fxray-never-instrument", ReadsUnkeyedFiles),
    ("-fxray-attr-list", ReadsUnkeyedFiles),
    ("-fmodule-file", ReadsUnkeyedFiles),
    ("-fmodule-map-file", ReadsUnkeyedFiles),
    ("-fmodules-cache-path", ReadsUnkeyedFiles),
    ("-fprebuilt-module-path", ReadsUnkeyedFiles),
    ("-fembed-offload-object", ReadsUnkeyedFiles),
    ("-fcuda-include-gpubinary", ReadsUnkeyedFiles),
    ("-ivfsoverlay", ReadsUnkeyedFiles),
    ("--sysroot", ReadsUnkeyedFiles),
    ("-isysroot", ReadsUnkeyedFiles),
    ("-resource-dir", ReadsUnkeyedFiles),
    ("--gcc-toolchain", ReadsUnkeyedFiles),
    ("--gcc-install-dir", ReadsUnkeyedFiles),
    ("-Wl,", ReadsUnkeyedFiles),
    ("-Xlinker", ReadsUnkeyedFiles),
    ("-Xoffload-linker", ReadsUnkeyedFiles),
    ("-Wp,", ReadsUnkeyedFiles),
    ("-Xpreprocessor", ReadsUnkeyedFiles),
    ("-isystem", IncludeDirectory),
    ("-cxx-isystem", IncludeDirectory),
    ("-iquote", IncludeDirectory),
    ("-idirafter", IncludeDirectory),
    ("-iprefix", IncludeDirectory),
    ("-iwithprefix", IncludeDirectory),
    ("-I", IncludeDirectory),
    ("--include-directory", IncludeDirectory),
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

/// (flag, reason) pairs matched exactly, for nvcc.
const NVCC_EXACT: &[(&str, RejectedBecause)] = &[
    ("-c", OutputFormat),
    ("--compile", OutputFormat),
    ("-E", OutputFormat),
    ("--preprocess", OutputFormat),
    ("-cubin", OutputFormat),
    ("--cubin", OutputFormat),
    ("-ptx", OutputFormat),
    ("--ptx", OutputFormat),
    ("-fatbin", OutputFormat),
    ("--fatbin", OutputFormat),
    ("-optix-ir", OutputFormat),
    ("--optix-ir", OutputFormat),
    ("-dc", OutputFormat),
    ("-dw", OutputFormat),
    ("-dlink", OutputFormat),
    ("--device-link", OutputFormat),
    ("-lib", OutputFormat),
    ("--lib", OutputFormat),
    ("-link", OutputFormat),
    ("--link", OutputFormat),
    ("-run", OutputFormat),
    ("--run", OutputFormat),
    ("-rdc", OutputFormat),
    ("-keep", OutputFormat),
    ("--keep", OutputFormat),
    ("-dryrun", OutputFormat),
    ("--dryrun", OutputFormat),
    ("-V", OutputFormat),
    ("--version", OutputFormat),
    ("-h", OutputFormat),
    ("--help", OutputFormat),
    ("-o", OutputPath),
    ("-x", Language),
    ("-I", IncludeDirectory),
    ("-mcumode", AmdOnly),
    ("-mno-cumode", AmdOnly),
    ("-munsafe-fp-atomics", AmdOnly),
    ("-mno-unsafe-fp-atomics", AmdOnly),
    ("-mwavefrontsize64", AmdOnly),
    ("-mno-wavefrontsize64", AmdOnly),
    ("-mllvm", AmdOnly),
    ("-ffast-math", AmdOnly),
];

/// (prefix, reason) pairs, for nvcc; the first match decides.
const NVCC_PREFIX: &[(&str, RejectedBecause)] = &[
    ("@", ReadsUnkeyedFiles),
    ("-optf", ReadsUnkeyedFiles),
    ("--options-file", ReadsUnkeyedFiles),
    ("-o", OutputPath),
    ("--output-file", OutputPath),
    ("-odir", OutputPath),
    ("--output-directory", OutputPath),
    ("-keep-dir", OutputPath),
    ("--keep-dir", OutputPath),
    ("-M", DependencyOutput),
    ("--generate-dependencies", DependencyOutput),
    ("--generate-nonsystem-dependencies", DependencyOutput),
    ("--dependency-output", DependencyOutput),
    ("--dependency-target-name", DependencyOutput),
    ("-save-temps", OutputFormat),
    ("--save-temps", OutputFormat),
    ("--relocatable-device-code", OutputFormat),
    ("-rdc", OutputFormat),
    ("-lto", OutputFormat),
    ("-dlto", OutputFormat),
    ("--list-gpu", OutputFormat),
    ("-arch", TargetList),
    ("--gpu-architecture", TargetList),
    ("-code", TargetList),
    ("--gpu-code", TargetList),
    ("-gencode", TargetList),
    ("--generate-code", TargetList),
    ("-std", Standard),
    ("--std", Standard),
    ("-O", OptLevel),
    ("--optimize", OptLevel),
    ("-x", Language),
    ("--x", Language),
    ("-include", ReadsUnkeyedFiles),
    ("--pre-include", ReadsUnkeyedFiles),
    ("-ccbin", ReadsUnkeyedFiles),
    ("--compiler-bindir", ReadsUnkeyedFiles),
    ("--use-local-env", ReadsUnkeyedFiles),
    ("-Xlinker", ReadsUnkeyedFiles),
    ("--linker-options", ReadsUnkeyedFiles),
    ("-Xnvlink", ReadsUnkeyedFiles),
    ("--nvlink-options", ReadsUnkeyedFiles),
    ("-isystem", IncludeDirectory),
    ("--system-include", IncludeDirectory),
    ("--include-path", IncludeDirectory),
    ("-I", IncludeDirectory),
    ("-fgpu-", AmdOnly),
    ("-fhip-", AmdOnly),
    ("--hip-", AmdOnly),
    ("--rocm-", AmdOnly),
    ("--offload", AmdOnly),
    ("--genco", AmdOnly),
    ("-mcode-object-version", AmdOnly),
    ("-Xclang", AmdOnly),
];

/// hipRTC's own spellings, checked before hipcc's rules.
const HIPRTC_PREFIX: &[(&str, RejectedBecause)] =
    &[("--gpu-architecture", TargetList), ("-arch", TargetList)];

/// NVRTC's own options that read or write files beside the compile (on top of nvcc's rules,
/// which NVRTC follows otherwise): precompiled headers (`--pch` keeps them in `--pch-dir`,
/// `--use-pch` reads one) and `--create-pch`, `--time` and `--fdevice-time-trace`, which write
/// files a cache hit would not; and the long forms of the LTO outputs.
const NVRTC_PREFIX: &[(&str, RejectedBecause)] = &[
    ("--pch", ReadsUnkeyedFiles),
    ("-pch", ReadsUnkeyedFiles),
    ("--use-pch", ReadsUnkeyedFiles),
    ("-use-pch", ReadsUnkeyedFiles),
    ("--create-pch", OutputPath),
    ("-create-pch", OutputPath),
    ("--time", OutputPath),
    ("-time", OutputPath),
    ("--fdevice-time-trace", OutputPath),
    ("-fdevice-time-trace", OutputPath),
    // LTO IR instead of a cubin (nvcc's `-dlto` is refused by nvcc's rules).
    ("--dlink-time-opt", OutputFormat),
    ("--gen-opt-lto", OutputFormat),
    ("-gen-opt-lto", OutputFormat),
];

/// cc1 options that read or write files, refused after `-Xclang`.
const CC1_PREFIX: &[(&str, RejectedBecause)] = &[
    ("-load", ReadsUnkeyedFiles),
    ("-plugin", ReadsUnkeyedFiles),
    ("-add-plugin", ReadsUnkeyedFiles),
    ("-mlink-bitcode-file", ReadsUnkeyedFiles),
    ("-mlink-builtin-bitcode", ReadsUnkeyedFiles),
    ("-include", ReadsUnkeyedFiles),
    ("-fmodule-file", ReadsUnkeyedFiles),
    ("-ast-merge", ReadsUnkeyedFiles),
    ("-dependency-file", DependencyOutput),
    ("-sys-header-deps", DependencyOutput),
    ("-module-dependency-dir", DependencyOutput),
    ("-header-include-file", DependencyOutput),
    ("-MT", DependencyOutput),
    ("-MQ", DependencyOutput),
    ("-o", OutputPath),
    ("-main-file-name", OutputPath),
    ("-emit-", OutputFormat),
    ("-triple", TargetList),
    ("-target-cpu", TargetList),
    ("-aux-triple", TargetList),
];

/// nvcc's options whose value is a comma-separated list of words for the host compiler.
const HOST_OPTIONS: &[&str] = &["-Xcompiler", "--compiler-options"];

/// Host-compiler (gcc, clang) options that read files the cache key does not see or add an
/// include directory, refused in `-Xcompiler`'s words. The host compiler does not compile
/// device code, but it preprocesses the source, so what it includes reaches the cubin.
const HOST_PREFIX: &[(&str, RejectedBecause)] = &[
    ("@", ReadsUnkeyedFiles),
    ("-B", ReadsUnkeyedFiles),
    ("-include", ReadsUnkeyedFiles),
    ("--include", ReadsUnkeyedFiles),
    ("-imacros", ReadsUnkeyedFiles),
    ("--imacros", ReadsUnkeyedFiles),
    ("--sysroot", ReadsUnkeyedFiles),
    ("-isysroot", ReadsUnkeyedFiles),
    ("-specs", ReadsUnkeyedFiles),
    ("--specs", ReadsUnkeyedFiles),
    ("-fplugin", ReadsUnkeyedFiles),
    ("-iplugindir", ReadsUnkeyedFiles),
    // gcc runs its compilers under this program (`-wrapper prog,args`).
    ("-wrapper", ReadsUnkeyedFiles),
    ("-fpass-plugin", ReadsUnkeyedFiles),
    ("-fprofile-use", ReadsUnkeyedFiles),
    ("-fprofile-instr-use", ReadsUnkeyedFiles),
    ("-fprofile-sample-use", ReadsUnkeyedFiles),
    ("-fauto-profile", ReadsUnkeyedFiles),
    ("--config", ReadsUnkeyedFiles),
    ("-Wp,", ReadsUnkeyedFiles),
    ("-Xpreprocessor", ReadsUnkeyedFiles),
    ("-Xclang", ReadsUnkeyedFiles),
    ("-ivfsoverlay", ReadsUnkeyedFiles),
    ("-fmodule-file", ReadsUnkeyedFiles),
    ("-fmodule-map-file", ReadsUnkeyedFiles),
    ("-isystem", IncludeDirectory),
    ("-cxx-isystem", IncludeDirectory),
    ("-iquote", IncludeDirectory),
    ("-idirafter", IncludeDirectory),
    ("-iprefix", IncludeDirectory),
    ("-iwithprefix", IncludeDirectory),
    ("-I", IncludeDirectory),
    ("-F", IncludeDirectory),
    ("--include-directory", IncludeDirectory),
    ("-o", OutputPath),
    ("-M", DependencyOutput),
];

/// The first word of an `-Xcompiler` value (comma-separated) that the host compiler must not
/// get, with the reason. A word that takes its value as the next word (`-include,f.h`) is
/// refused by its own name.
fn host_compiler_rejection(value: &str) -> Option<(&str, RejectedBecause)> {
    value
        .split(',')
        .map(str::trim)
        .find_map(|w| rule(w, &[], HOST_PREFIX).map(|b| (w, b)))
}

fn rule(
    flag: &str,
    exact: &[(&str, RejectedBecause)],
    prefix: &[(&str, RejectedBecause)],
) -> Option<RejectedBecause> {
    if flag.contains(['\n', '\r', '\0']) {
        return Some(ControlCharacter);
    }
    if let Some((_, b)) = exact.iter().find(|(f, _)| *f == flag) {
        return Some(*b);
    }
    prefix
        .iter()
        .find(|(p, _)| flag.starts_with(p))
        .map(|(_, b)| *b)
}

impl CompilerKind {
    /// The spelling of `std` this compiler takes, e.g. `-std=c++17`. hipcc and hipRTC: clang
    /// before 17 (read from the identity's `clang version N`; unknown counts as before 17, as
    /// for hipRTC, whose version does not name its clang) takes C++23 only as `-std=c++2b`,
    /// which later clang still takes; clang 17 and later get `-std=c++23` (clang's "C++
    /// Support" status page). nvcc and NVRTC: `-std=c++NN` as is (nvcc ignores, with a
    /// warning, a standard its host compiler lacks; `compile`
    /// makes that an error).
    pub fn std_flag(self, std: CxxStd, compiler: &CompilerIdentity) -> String {
        match (self.flag_rules(), std) {
            (FlagRules::Clang, CxxStd::Cxx23) if compiler.clang_major().unwrap_or(0) < 17 => {
                "-std=c++2b".into()
            }
            _ => std.flag().into(),
        }
    }

    /// Whether this backend runs clang (hipcc, hipRTC) rather than NVIDIA's front end
    /// ([`CompilerKind::flag_rules`]).
    pub(crate) fn is_clang(self) -> bool {
        self.flag_rules() == FlagRules::Clang
    }

    /// Checks a caller's extra flags in order (see the module documentation for what is
    /// refused); `-Xclang X` is checked as a pair.
    ///
    /// Errors: [`OptionsError::RejectedFlag`] naming the flag, this backend and the reason;
    /// [`OptionsError::DanglingFlag`] for an `-Xclang` (or nvcc's `-Xptxas`...) with nothing
    /// after it.
    pub fn check_extra_flags(self, flags: &[String]) -> Result<(), OptionsError> {
        let reject = |flag: &str, because| OptionsError::RejectedFlag {
            flag: flag.to_string(),
            backend: self,
            because,
        };
        let mut it = flags.iter().peekable();
        while let Some(flag) = it.next() {
            if self == CompilerKind::HipRtc {
                if let Some(b) = rule(flag, &[], HIPRTC_PREFIX) {
                    return Err(reject(flag, b));
                }
            }
            if self == CompilerKind::Nvrtc {
                if let Some(b) = rule(flag, &[], NVRTC_PREFIX) {
                    return Err(reject(flag, b));
                }
            }
            match self {
                _ if self.is_clang() => {
                    let payload = if flag == "-Xclang" {
                        Some(it.next().ok_or_else(|| OptionsError::DanglingFlag {
                            flag: flag.clone(),
                            backend: self,
                        })?)
                    } else {
                        None
                    };
                    if let Some(p) = payload
                        .map(String::as_str)
                        .or_else(|| flag.strip_prefix("-Xclang="))
                    {
                        if let Some(b) =
                            rule(p, HIPCC_EXACT, HIPCC_PREFIX).or_else(|| rule(p, &[], CC1_PREFIX))
                        {
                            return Err(reject(&format!("-Xclang {p}"), b));
                        }
                        continue;
                    }
                    if let Some(b) = rule(flag, HIPCC_EXACT, HIPCC_PREFIX) {
                        return Err(reject(flag, b));
                    }
                    // Flags whose value is the next word: a value is not a flag.
                    if flag == "-mllvm" {
                        let v = it.next().ok_or_else(|| OptionsError::DanglingFlag {
                            flag: flag.clone(),
                            backend: self,
                        })?;
                        if v.contains(['\n', '\r', '\0']) {
                            return Err(reject(v, ControlCharacter));
                        }
                    }
                }
                _ => {
                    // The host compiler's words: `-Xcompiler A,B`, `-Xcompiler=A,B`,
                    // `--compiler-options A,B`, `--compiler-options=A,B`.
                    let host = HOST_OPTIONS.iter().find_map(|o| {
                        if flag == o {
                            Some((*o, None))
                        } else {
                            let v = flag.strip_prefix(o)?.strip_prefix('=')?;
                            Some((*o, Some(v)))
                        }
                    });
                    let host = match host {
                        Some((o, Some(v))) => Some((o, v)),
                        Some((o, None)) => {
                            let v = it.next().ok_or_else(|| OptionsError::DanglingFlag {
                                flag: flag.clone(),
                                backend: self,
                            })?;
                            Some((o, v.as_str()))
                        }
                        None => None,
                    };
                    if let Some((option, value)) = host {
                        if value.contains(['\n', '\r', '\0']) {
                            return Err(reject(value, ControlCharacter));
                        }
                        if let Some((word, b)) = host_compiler_rejection(value) {
                            return Err(reject(&format!("{option} {word}"), b));
                        }
                        continue;
                    }
                    if let Some(b) = rule(flag, NVCC_EXACT, NVCC_PREFIX) {
                        return Err(reject(flag, b));
                    }
                    if matches!(flag.as_str(), "-Xptxas" | "--ptxas-options") {
                        let v = it.next().ok_or_else(|| OptionsError::DanglingFlag {
                            flag: flag.clone(),
                            backend: self,
                        })?;
                        if v.contains(['\n', '\r', '\0']) {
                            return Err(reject(v, ControlCharacter));
                        }
                    }
                }
            }
        }
        Ok(())
    }
}

/// Checks one extra flag with hipcc's rules ([`CompilerKind::check_extra_flags`]).
///
/// Errors: [`OptionsError::RejectedFlag`] naming the flag and the reason.
pub fn check_extra_flag(flag: &str) -> Result<(), OptionsError> {
    CompilerKind::Hipcc.check_extra_flags(&[flag.to_string()])
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(version: &str) -> CompilerIdentity {
        CompilerIdentity {
            kind: crate::compiler::CompilerKind::Hipcc,
            path: "/usr/bin/hipcc".into(),
            version: version.into(),
            fingerprint: String::new(),
            covered: Vec::new(),
            root: Default::default(),
            header_dirs: Vec::new(),
            host_compiler: None,
            system_include_dirs: Vec::new(),
        }
    }

    #[test]
    fn cxx23_is_cxx2b_before_clang_17_and_cxx23_after() {
        let old = id("HIP version: 5.2.21153-0\nDebian clang version 15.0.6\n");
        let new = id("HIP version: 6.4.43484\nDebian clang version 21.1.2 (1)\n");
        assert_eq!(
            CompilerKind::Hipcc.std_flag(CxxStd::Cxx23, &old),
            "-std=c++2b"
        );
        assert_eq!(
            CompilerKind::Hipcc.std_flag(CxxStd::Cxx23, &new),
            "-std=c++23"
        );
        assert_eq!(
            CompilerKind::Hipcc.std_flag(CxxStd::Cxx20, &old),
            "-std=c++20"
        );
        assert_eq!(
            CompilerKind::Nvcc.std_flag(CxxStd::Cxx23, &old),
            "-std=c++23"
        );
    }

    #[test]
    fn nvrtc_flags_that_read_or_write_files_are_refused_and_nvcc_keeps_its_rules() {
        for f in [
            "--pch",
            "-pch",
            "--pch-dir=/tmp/p",
            "--use-pch=/tmp/h.pch",
            "--create-pch=/tmp/h.pch",
            "--time=/tmp/t.csv",
            "--fdevice-time-trace=/tmp/t.json",
            "--dlink-time-opt",
        ] {
            let e = CompilerKind::Nvrtc
                .check_extra_flags(&[f.to_string()])
                .unwrap_err();
            assert!(e.to_string().contains(f), "{e}");
        }
        assert!(CompilerKind::Nvrtc
            .check_extra_flags(&["-DTIME=1".to_string(), "--use_fast_math".to_string()])
            .is_ok());
        // nvcc's own rules still apply to NVRTC.
        assert!(CompilerKind::Nvrtc
            .check_extra_flags(&["-o".to_string()])
            .is_err());
    }

    #[test]
    fn xclang_payload_is_judged_with_cc1_rules() {
        let flags = ["-Xclang".to_string(), "-mlink-bitcode-file".to_string()];
        let e = CompilerKind::Hipcc.check_extra_flags(&flags).unwrap_err();
        assert!(
            matches!(&e, OptionsError::RejectedFlag { flag, because: ReadsUnkeyedFiles, .. }
                if flag == "-Xclang -mlink-bitcode-file"),
            "{e:?}"
        );
        let ok = ["-Xclang".to_string(), "-fnative-half-type".to_string()];
        assert_eq!(CompilerKind::Hipcc.check_extra_flags(&ok), Ok(()));
        let target = ["--gpu-architecture=gfx942".to_string()];
        assert!(matches!(
            CompilerKind::HipRtc.check_extra_flags(&target),
            Err(OptionsError::RejectedFlag {
                because: TargetList,
                backend: CompilerKind::HipRtc,
                ..
            })
        ));
        let dangling = ["-Xclang".to_string()];
        assert!(matches!(
            CompilerKind::Hipcc.check_extra_flags(&dangling),
            Err(OptionsError::DanglingFlag { .. })
        ));
    }

    fn nvcc(flags: &[&str]) -> Result<(), OptionsError> {
        let flags: Vec<String> = flags.iter().map(|f| f.to_string()).collect();
        CompilerKind::Nvcc.check_extra_flags(&flags)
    }

    fn refused(r: Result<(), OptionsError>) -> (String, RejectedBecause) {
        match r {
            Err(OptionsError::RejectedFlag {
                flag,
                backend: CompilerKind::Nvcc,
                because,
            }) => (flag, because),
            other => panic!("not refused for nvcc: {other:?}"),
        }
    }

    #[test]
    fn xcompiler_words_that_read_files_are_refused_in_every_spelling() {
        for flags in [
            &["-Xcompiler", "-include,/tmp/e.h"][..],
            &["-Xcompiler", "-Wall,-include,/tmp/e.h"],
            &["-Xcompiler=-include/tmp/e.h"],
            &["--compiler-options", "-include,/tmp/e.h"],
            &["--compiler-options=-include,/tmp/e.h"],
        ] {
            let (flag, because) = refused(nvcc(flags));
            assert!(
                flag.ends_with(" -include") || flag.ends_with(" -include/tmp/e.h"),
                "{flag}"
            );
            assert!(flag.starts_with("-Xcompiler") || flag.starts_with("--compiler-options"));
            assert_eq!(because, ReadsUnkeyedFiles, "{flags:?}");
        }
        for (word, because) in [
            ("-imacros,m.h", ReadsUnkeyedFiles),
            ("@opts", ReadsUnkeyedFiles),
            ("--sysroot=/x", ReadsUnkeyedFiles),
            ("-B/x", ReadsUnkeyedFiles),
            ("-specs=x", ReadsUnkeyedFiles),
            ("-wrapper,/tmp/w", ReadsUnkeyedFiles),
            ("-iplugindir=/x", ReadsUnkeyedFiles),
            ("-Wp,-include,x", ReadsUnkeyedFiles),
            ("-I/x", IncludeDirectory),
            ("-isystem,/x", IncludeDirectory),
            ("-iquote,/x", IncludeDirectory),
            ("-idirafter,/x", IncludeDirectory),
        ] {
            assert_eq!(refused(nvcc(&["-Xcompiler", word])).1, because, "{word}");
        }
        assert_eq!(nvcc(&["-Xcompiler", "-Wall,-fno-strict-aliasing"]), Ok(()));
        assert_eq!(nvcc(&["-Xcompiler=-Wall"]), Ok(()));
        assert_eq!(nvcc(&["-Xptxas", "-v"]), Ok(()));
        assert!(matches!(
            nvcc(&["-Xcompiler"]),
            Err(OptionsError::DanglingFlag { .. })
        ));
    }

    #[test]
    fn nvcc_options_file_reads_files() {
        for flags in [&["-optf", "x"][..], &["-optf=x"], &["--options-file", "x"]] {
            assert_eq!(refused(nvcc(flags)).1, ReadsUnkeyedFiles, "{flags:?}");
        }
    }
}
