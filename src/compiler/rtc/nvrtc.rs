//! NVRTC, CUDA's in-process runtime compiler: CUDA C++ source to a cubin (SASS for one SM
//! architecture) without starting a process, for HIP's NVIDIA platform.
//!
//! The library is opened with `dlopen` and every entry point resolved with `dlsym`; a library
//! without one of them is refused by name ([`RtcError::MissingSymbol`]). Where it is looked for,
//! in order:
//! 1. a path given to [`NvRtc::open_path`], or the `HIPJIT_NVRTC_LIBRARY` variable;
//! 2. `lib64/` under `CUDA_PATH`, then under `CUDA_HOME`;
//! 3. beside the nvcc hipjit found (the `nvcc` argument of [`NvRtc::open`]): `../lib64` (a
//!    toolkit) and `../lib` (PyPI's `nvidia/cu13/lib` beside `nvidia/cu13/bin/nvcc`);
//! 4. the dynamic loader: `libnvrtc.so.13`, `libnvrtc.so.12`, `libnvrtc.so.11.2`, `libnvrtc.so`.
//!
//! In a directory the newest `libnvrtc.so.N` is taken (`libnvrtc-builtins` is NVRTC's own
//! dependency, loaded by it).
//!
//! The output is a cubin (`nvrtcGetCUBIN`), so the architecture must be a real one,
//! `-arch=sm_NN` ([`arch_option`]): NVRTC accepts `-arch=compute_NN` and returns a 0-byte cubin,
//! which hipjit refuses before compiling ([`RtcError::Arch`]); a 0-byte cubin from any other
//! option is [`RtcError::EmptyOutput`]. NVRTC may be called from several threads at once (its
//! documentation's "Thread Safety" section), so no lock is taken.

use std::ffi::{OsStr, OsString};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use super::{RtcError, RtcInput, RtcOutput, Symbols};
use crate::compiler::depfile::Dependency;
use crate::compiler::diagnostics;
use crate::compiler::opened_files::OpenedFiles;
// The parent module by its path: Rust 1.87 (the MSRV) refuses `use super::{self as rtc}`.
use crate::compiler::rtc;

use crate::target::SmTarget;

/// The variable naming the NVRTC library explicitly.
pub const NVRTC_LIBRARY_ENV: &str = "HIPJIT_NVRTC_LIBRARY";

/// NVRTC's names for the dynamic loader, newest first.
pub const NVRTC_SONAMES: &[&str] = &[
    "libnvrtc.so.13",
    "libnvrtc.so.12",
    "libnvrtc.so.11.2",
    "libnvrtc.so",
];

const COMPILER: &str = "NVRTC";

/// Where NVRTC is told the program's file lies ([`NvRtc::compile`]): a path that is not a
/// directory (`/dev/null`), so that the lookup of a quoted `#include` beside the source finds
/// nothing, whatever any process writes, and the program's name (its `__FILE__`) is the same in
/// every compile.
pub const PROGRAM_DIRECTORY: &str = "/dev/null";

static SYMBOLS: Symbols = Symbols {
    create: c"nvrtcCreateProgram",
    compile: c"nvrtcCompileProgram",
    log_size: c"nvrtcGetProgramLogSize",
    log: c"nvrtcGetProgramLog",
    output_size: c"nvrtcGetCUBINSize",
    output: c"nvrtcGetCUBIN",
    destroy: c"nvrtcDestroyProgram",
    error_string: c"nvrtcGetErrorString",
    version: c"nvrtcVersion",
};

/// The prelude's text for NVRTC: nvcc's [`crate::compiler::nvcc::PRELUDE`] without its
/// `#include <cuda_runtime.h>`, which NVRTC cannot open (it compiles device code only; the
/// kernel-language built-ins the prelude maps onto, `threadIdx`, `warpSize`, `__shfl_sync`...,
/// are NVRTC's own).
pub fn prelude() -> String {
    crate::compiler::nvcc::PRELUDE.replace("#include <cuda_runtime.h>\n", HOST_HEADER_MACROS)
}

/// What `<cuda_runtime.h>` brings nvcc's sources from the host's C library and NVRTC lacks:
/// `<math.h>`'s `INFINITY`, `NAN`, `HUGE_VAL`, `HUGE_VALF` and `M_*` constants and
/// `<limits.h>`'s integer limits, with glibc's values on an LP64 host. Each is defined only when
/// the source has not defined it. NVRTC 13 knows none of glibc's `__builtin_inff`-style
/// builtins, so the floating-point ones are `__builtin_bit_cast`s of the IEEE 754 bit patterns
/// (usable in constant expressions, as glibc's are).
const HOST_HEADER_MACROS: &str = r#"#ifndef INFINITY
#define INFINITY (__builtin_bit_cast(float, 0x7f800000u))
#endif
#ifndef NAN
#define NAN (__builtin_bit_cast(float, 0x7fc00000u))
#endif
#ifndef HUGE_VALF
#define HUGE_VALF (__builtin_bit_cast(float, 0x7f800000u))
#endif
#ifndef HUGE_VAL
#define HUGE_VAL (__builtin_bit_cast(double, 0x7ff0000000000000ull))
#endif
#ifndef M_PI
#define M_E 2.7182818284590452354
#define M_LOG2E 1.4426950408889634074
#define M_LOG10E 0.43429448190325182765
#define M_LN2 0.69314718055994530942
#define M_LN10 2.30258509299404568402
#define M_PI 3.14159265358979323846
#define M_PI_2 1.57079632679489661923
#define M_PI_4 0.78539816339744830962
#define M_1_PI 0.31830988618379067154
#define M_2_PI 0.63661977236758134308
#define M_2_SQRTPI 1.12837916709551257390
#define M_SQRT2 1.41421356237309504880
#define M_SQRT1_2 0.70710678118654752440
#endif
#ifndef CHAR_BIT
#define CHAR_BIT 8
#define SCHAR_MIN (-128)
#define SCHAR_MAX 127
#define UCHAR_MAX 255
#define CHAR_MIN SCHAR_MIN
#define CHAR_MAX SCHAR_MAX
#define SHRT_MIN (-32768)
#define SHRT_MAX 32767
#define USHRT_MAX 65535
#define INT_MIN (-INT_MAX - 1)
#define INT_MAX 2147483647
#define UINT_MAX 4294967295U
#define LONG_MAX 9223372036854775807L
#define LONG_MIN (-LONG_MAX - 1L)
#define ULONG_MAX 18446744073709551615UL
#define LLONG_MAX 9223372036854775807LL
#define LLONG_MIN (-LLONG_MAX - 1LL)
#define ULLONG_MAX 18446744073709551615ULL
#endif
"#;

/// The headers hipjit hands NVRTC in memory so HIP sources compile unchanged:
/// `hip/hip_runtime.h` and `hip/hip_runtime_api.h` ([`prelude`]), and `hip/hip_fp16.h`, which
/// includes the toolkit's `cuda_fp16.h` when `cuda_include` is given (the toolkit's header
/// directory, found holding it: [`NvRtc::include_dir`]; not checked again here, on every
/// lookup) and otherwise stops the compile with an error naming what is missing.
pub fn prelude_headers(cuda_include: Option<&Path>) -> Vec<(String, Vec<u8>)> {
    prelude_headers_with(cuda_include.is_some()).to_vec()
}

/// [`prelude_headers`] with `fp16_found` for `cuda_include.is_some()`, made once per process
/// for each answer: no copy, and the same bytes at every lookup.
pub fn prelude_headers_with(fp16_found: bool) -> &'static [(String, Vec<u8>)] {
    type Headers = Vec<(String, Vec<u8>)>;
    static MADE: [std::sync::OnceLock<Headers>; 2] =
        [std::sync::OnceLock::new(), std::sync::OnceLock::new()];
    MADE[usize::from(fp16_found)].get_or_init(|| {
        let prelude = prelude().into_bytes();
        let fp16 = if fp16_found {
            "#pragma once\n#include <cuda_fp16.h>\n"
        } else {
            "#pragma once\n#error \"hip/hip_fp16.h needs the CUDA toolkit's cuda_fp16.h, which \
             hipjit did not find beside NVRTC (include/ beside its lib or lib64 directory)\"\n"
        };
        vec![
            ("hip/hip_runtime.h".to_owned(), prelude.clone()),
            ("hip/hip_runtime_api.h".to_owned(), prelude),
            ("hip/hip_fp16.h".to_owned(), fp16.as_bytes().to_vec()),
        ]
    })
}

/// The first `#include` (or `#include_next`, `__has_include`) in `text` that can name a file
/// outside the include directories NVRTC is given: an absolute name, a name with a `..`
/// component, or a computed one (`#include MACRO`). NVRTC reports no list of the files it
/// reads, so hipjit keys an NVRTC compile on the files it observes it opening under its include
/// directories; a file reached by such a name would be read without being keyed, and editing
/// it would not change the key. Returns the directive and its 1-based line.
///
/// The scan is lexical ([`crate::compiler::include_names::scan`]): a directive inside `#if 0` counts.
pub fn untracked_include(text: &[u8]) -> Option<(String, usize)> {
    let escapes =
        |name: &[u8]| name.first() == Some(&b'/') || name.split(|&b| b == b'/').any(|c| c == b"..");
    let found = crate::compiler::include_names::scan(text);
    let escaping = found
        .names
        .iter()
        .find(|(name, _, _)| escapes(name))
        .map(|(_, _, line)| *line);
    let shown = |line: usize| {
        let text = text
            .split(|&b| b == b'\n')
            .nth(line - 1)
            .unwrap_or_default();
        (
            String::from_utf8_lossy(text.trim_ascii()).into_owned(),
            line,
        )
    };
    match (escaping, found.computed) {
        (Some(l), Some((c, lc))) => Some(if l <= lc { shown(l) } else { (c, lc) }),
        (Some(l), None) => Some(shown(l)),
        (None, computed) => computed,
    }
}

/// `-default-device`: functions without an execution-space attribute are device functions.
///
/// nvcc compiles such a function for the host and lets device code use it where a constant is
/// needed (a `consteval` or `constexpr` helper); NVRTC 13 refuses the declaration itself ("host
/// functions are not allowed in JIT mode"). hipjit hands only device code to the GPU, so with
/// this option a source nvcc accepts compiles under NVRTC too; a function marked `__host__`
/// alone is still refused by NVRTC.
pub const DEFAULT_DEVICE: &str = "-default-device";

/// The options compiling HIP source through the prelude to a cubin for `target`, as nvcc's
/// command does (`-arch=sm_NN -std=c++17`, the prelude force-included), plus `-I` for the
/// toolkit's headers when known.
pub fn hip_options(target: SmTarget, cuda_include: Option<&Path>) -> Vec<String> {
    let mut o = prelude_options(target, "-std=c++17".to_owned());
    if let Some(dir) = cuda_include {
        o.push(format!("-I{}", dir.display()));
    }
    o
}

/// The options every NVRTC compile of HIP source starts with: `-arch=sm_NN`, the standard
/// `std` (`-std=c++17`), the prelude force-included, [`DEFAULT_DEVICE`].
pub(crate) fn prelude_options(target: SmTarget, std: String) -> Vec<String> {
    vec![
        arch_option(target),
        std,
        "--pre-include=hip/hip_runtime.h".to_owned(),
        DEFAULT_DEVICE.to_owned(),
    ]
}

/// `-arch=sm_NN`, NVRTC's option selecting the SM architecture of the cubin.
pub fn arch_option(target: SmTarget) -> String {
    format!("-arch={target}")
}

/// A directory tree an NVRTC compile may read headers from, whose opens are observed: one of
/// the caller's include directories (by index) or a `-I` among the options (absolute).
#[derive(Clone, Debug)]
pub(crate) struct IncludeTree {
    /// The index into the caller's include directories, `None` for a `-I` of the options.
    pub(crate) include_dir: Option<usize>,
    /// The directory as given (absolute for a `-I` of the options).
    pub(crate) given: PathBuf,
    /// The directory with symbolic links resolved, as NVRTC is handed it and as it is watched.
    pub(crate) real: PathBuf,
}

/// What an NVRTC compile of `input` refuses before NVRTC is called ([`NvRtc::compile`];
/// `hipjit cache explain` asks the same through `before_compiling`):
/// a virtual architecture, an include directory that is not one, an `#include` of the source
/// that can name a file outside the include directories ([`untracked_include`]; those of the
/// headers it reads are checked once the compile has opened them). `own`: the toolkit's
/// header directory beside this NVRTC, symbolic links resolved (observed by the caller).
/// Returns the include directories with symbolic links resolved and the trees whose opens the
/// compile observes.
///
/// Errors: [`RtcError::Arch`], [`RtcError::IncludeDir`], [`RtcError::NoDependencies`].
pub(crate) fn checked_input(
    input: &RtcInput<'_>,
    own: Option<&Path>,
) -> Result<(Vec<PathBuf>, Vec<IncludeTree>), RtcError> {
    let arch = requested_arch(input.options);
    if let Some(arch) = arch.filter(|a| a.starts_with("compute_")) {
        let sm = arch.trim_start_matches("compute_");
        return Err(RtcError::Arch {
            compiler: COMPILER,
            arch: arch.to_owned(),
            reason: format!(
                "a virtual architecture gives PTX, not a cubin (NVRTC returns 0 bytes); \
                 use sm_{sm}"
            ),
        });
    }
    let canonical = rtc::canonical_include_dirs(input.include_dirs)?;
    let mut trees: Vec<IncludeTree> = input
        .include_dirs
        .iter()
        .zip(&canonical)
        .enumerate()
        .map(|(i, (given, real))| IncludeTree {
            include_dir: Some(i),
            given: given.clone(),
            real: real.clone(),
        })
        .collect();
    for dir in rtc::include_dirs_in_options(input.options) {
        let dir = std::env::current_dir()
            .map(|cwd| cwd.join(&dir))
            .unwrap_or(dir);
        let Ok(real) = crate::fs::observe::canonicalize(&dir) else {
            continue; // NVRTC finds nothing there either.
        };
        // The toolkit's own headers (and CCCL's below them): observed by the caller.
        if own.is_some_and(|own| real.starts_with(own)) {
            continue;
        }
        trees.push(IncludeTree {
            include_dir: None,
            given: dir,
            real,
        });
    }
    if let Some(e) = untracked(input.name, input.source) {
        return Err(e);
    }
    if let Some(e) = untracked_in_memory(input.headers) {
        return Err(e);
    }
    if let Some(e) = untracked_reachable(input.source, &trees) {
        return Err(e);
    }
    Ok((canonical, trees))
}

/// The refusal of the first `#include` of an in-memory header (`input.headers`: the caller's
/// and hipjit's own) that can name a file nothing keys: one [`untracked_include`] refuses, or a
/// quoted one naming no in-memory header. An in-memory header has no directory of its own, and
/// NVRTC (measured with 13.5) looks a quoted name of it up relative to the process's current
/// directory first (`"a.h"` including `"x.h"` opens `./x.h`; `"sub/a.h"` opens `./sub/x.h`),
/// before the include directories: a file there would be read without being keyed, and a later
/// compile, the file changed, would be served the old code. An in-memory header of the name
/// wins over such a file; an angle-bracket `#include` is looked up in the include directories
/// only.
fn untracked_in_memory(headers: &[(String, Vec<u8>)]) -> Option<RtcError> {
    use crate::compiler::include_names::{scan, Delimiter};
    for (header, body) in headers {
        let file = format!("in-memory header {header:?}");
        if let Some(e) = untracked(&file, body) {
            return Some(e);
        }
        let quoted = scan(body).names.into_iter().find(|(name, delimiter, _)| {
            *delimiter == Delimiter::Quoted && !headers.iter().any(|(h, _)| h.as_bytes() == *name)
        });
        if let Some((name, _, line)) = quoted {
            let name = String::from_utf8_lossy(&name);
            return Some(RtcError::NoDependencies {
                compiler: COMPILER,
                reason: format!(
                    "`#include \"{name}\"` ({file}, line {line}) names no in-memory header, and \
                     NVRTC looks such a name up in the process's current directory first (an \
                     in-memory header has no directory of its own), which hipjit cannot key; \
                     include it as `<{name}>` (the include directories only), or hand it in \
                     memory too (`CompileOptions::header`)"
                ),
            });
        }
    }
    None
}

/// The most headers [`untracked_reachable`] reads.
const MAX_REACHED_HEADERS: usize = 2000;

/// The refusal of the first header the source can reach through the include trees (names
/// resolved as NVRTC resolves them: a quoted one beside the including header first, then each
/// tree in order) whose `#include` can name a file outside them ([`untracked_include`]). What
/// no `#include` can reach is never read. A lexical scan: a directive inside `#if 0` counts.
fn untracked_reachable(source: &[u8], trees: &[IncludeTree]) -> Option<RtcError> {
    use crate::compiler::include_names::{scan, Delimiter};
    let mut seen = std::collections::HashSet::new();
    let mut queue: std::collections::VecDeque<(Option<PathBuf>, Vec<u8>)> =
        std::collections::VecDeque::from([(None, source.to_vec())]);
    while let Some((file, text)) = queue.pop_front() {
        for (name, delimiter, _) in scan(&text).names {
            let name = Path::new(std::ffi::OsStr::from_bytes(&name));
            if name.is_absolute() {
                continue; // refused by `untracked` of the file naming it
            }
            let beside = file
                .as_deref()
                .and_then(Path::parent)
                .filter(|_| delimiter == Delimiter::Quoted);
            let found = beside
                .into_iter()
                .chain(trees.iter().map(|t| t.real.as_path()))
                .map(|d| d.join(name))
                .find(|p| crate::fs::observe::is_file(p));
            let Some(found) = found else { continue };
            if seen.len() == MAX_REACHED_HEADERS || !seen.insert(found.clone()) {
                continue;
            }
            let Ok(text) = std::fs::read(&found) else {
                continue;
            };
            if let Some(e) = untracked(&found.display().to_string(), &text) {
                return Some(e);
            }
            queue.push_back((Some(found), text));
        }
    }
    None
}

/// [`untracked_include`] of `text` (file `file`) as the refusal it makes.
fn untracked(file: &str, text: &[u8]) -> Option<RtcError> {
    untracked_include(text).map(|(directive, line)| RtcError::NoDependencies {
        compiler: COMPILER,
        reason: format!(
            "`{directive}` ({file}, line {line}) can name a file outside the include \
             directories, which NVRTC would read without reporting it, so the result could not \
             be keyed by it; include it by a name below an include directory, or compile with \
             nvcc (HIPJIT_COMPILER=nvcc), which lists what it reads"
        ),
    })
}

/// Watches `trees` for the files a compile opens ([`OpenedFiles::watch`]).
///
/// Errors: [`RtcError::NoDependencies`] naming the tree that cannot be watched (more than
/// [`crate::compiler::opened_files::MAX_WATCHED_DIRS`] directories, the kernel's inotify limits).
pub(crate) fn watch_trees(trees: &[IncludeTree]) -> Result<Vec<OpenedFiles>, RtcError> {
    trees
        .iter()
        .map(|t| {
            OpenedFiles::watch(&t.real).map_err(|why| RtcError::NoDependencies {
                compiler: COMPILER,
                reason: format!(
                    "NVRTC reports no dependency list, so hipjit observes the files it opens \
                     under its include directories, and {why}"
                ),
            })
        })
        .collect()
}

/// The files a compile opened under `trees` (`watches`, in the same order, started before it)
/// as its dependencies: by include directory index and name below it, or by absolute path.
/// What hipjit writes in a cache root below a tree (a tagged root's own directories) is left
/// out; every header opened is checked for an `#include` that can name a file outside the
/// trees ([`untracked_include`]).
///
/// Errors: [`RtcError::NoDependencies`] when a watch's answer cannot be trusted
/// ([`OpenedFiles::finish`]) or for such an `#include`.
pub(crate) fn opened_dependencies(
    trees: &[IncludeTree],
    watches: Vec<OpenedFiles>,
) -> Result<Vec<Dependency>, RtcError> {
    let mut out = Vec::new();
    for (tree, watch) in trees.iter().zip(watches) {
        let files = watch.finish().map_err(|why| RtcError::NoDependencies {
            compiler: COMPILER,
            reason: format!(
                "NVRTC reports no dependency list, and the files it opened under {} could not \
                 be observed: {why}",
                tree.given.display()
            ),
        })?;
        for path in files {
            if rtc::in_hipjit_own_dir(&tree.real, &path) {
                continue;
            }
            if let Ok(text) = std::fs::read(&path) {
                if let Some(e) = untracked(&path.display().to_string(), &text) {
                    return Err(e);
                }
            }
            out.push(match (tree.include_dir, path.strip_prefix(&tree.real)) {
                (Some(i), Ok(rel)) => Dependency {
                    include_dir: Some(i),
                    path: tree.given.join(rel),
                    name: rel.to_path_buf(),
                },
                (None, Ok(rel)) => {
                    let path = tree.given.join(rel);
                    Dependency {
                        include_dir: None,
                        name: path.clone(),
                        path,
                    }
                }
                // A link's target outside the tree: by its absolute path.
                (_, Err(_)) => Dependency {
                    include_dir: None,
                    name: path.clone(),
                    path,
                },
            });
        }
    }
    Ok(out)
}

/// A loaded NVRTC library, never unloaded.
pub struct NvRtc {
    lib: rtc::Loaded,
}

impl std::fmt::Debug for NvRtc {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NvRtc")
            .field("path", &self.lib.path)
            .field("found", &self.lib.found)
            .finish_non_exhaustive()
    }
}

/// The newest `libnvrtc.so.N...` in `dir` (not `libnvrtc-builtins`, not the bare `libnvrtc.so`
/// development link when a versioned file exists), by the numbers after `.so.`.
fn newest_in(dir: &Path) -> Option<PathBuf> {
    let mut best: Option<(Vec<u32>, PathBuf)> = None;
    for entry in crate::fs::observe::read_dir(dir).ok()?.flatten() {
        let name = entry.file_name();
        let Some(name) = name.to_str() else { continue };
        let Some(rest) = name.strip_prefix("libnvrtc.so") else {
            continue;
        };
        let version: Vec<u32> = if rest.is_empty() {
            Vec::new()
        } else if let Some(v) = rest.strip_prefix('.') {
            match v
                .split('.')
                .map(str::parse)
                .collect::<Result<Vec<u32>, _>>()
            {
                Ok(v) => v,
                Err(_) => continue,
            }
        } else {
            continue;
        };
        if best.as_ref().is_none_or(|(b, _)| version > *b) {
            best = Some((version, entry.path()));
        }
    }
    best.map(|(_, p)| p)
}

/// The CUDA toolkit's header directory belonging to the NVRTC in `library`
/// ([`NvRtc::include_dir`]): `include/` beside the directory holding it, when it holds
/// `cuda_fp16.h`.
pub fn include_dir_of(library: &Path) -> Option<PathBuf> {
    let dir = include_dir_beside(library)?;
    crate::fs::observe::is_file(&dir.join("cuda_fp16.h")).then_some(dir)
}

/// Where a toolkit keeps its headers beside `library`: `include/` beside the directory holding
/// it, whatever is there ([`include_dir_of`] checks that it is the toolkit's).
pub fn include_dir_beside(library: &Path) -> Option<PathBuf> {
    Some(library.parent()?.parent()?.join("include"))
}

impl NvRtc {
    /// Opens NVRTC from `HIPJIT_NVRTC_LIBRARY`, `CUDA_PATH`/`CUDA_HOME`, beside `nvcc`, or the
    /// dynamic loader; see the module documentation for the order.
    ///
    /// Errors: [`RtcError::Open`] or [`RtcError::MissingSymbol`] for a library named by the
    /// variable; [`RtcError::NotFound`] listing every candidate and why it failed.
    pub fn open(nvcc: Option<&Path>) -> Result<NvRtc, RtcError> {
        Self::open_with_env(nvcc, |name| std::env::var_os(name))
    }

    /// [`NvRtc::open`] with the environment read through `env`.
    pub fn open_with_env(
        nvcc: Option<&Path>,
        env: impl Fn(&str) -> Option<OsString>,
    ) -> Result<NvRtc, RtcError> {
        if let Some(path) = env(NVRTC_LIBRARY_ENV).filter(|v| !v.is_empty()) {
            return Self::open_named(Path::new(&path), NVRTC_LIBRARY_ENV);
        }
        let mut dirs: Vec<(PathBuf, String)> = Vec::new();
        for var in ["CUDA_PATH", "CUDA_HOME"] {
            if let Some(root) = env(var).filter(|v| !v.is_empty()) {
                dirs.push((Path::new(&root).join("lib64"), format!("lib64 under {var}")));
            }
        }
        if let Some(bin) = nvcc.and_then(Path::parent) {
            let top = bin.parent().unwrap_or(Path::new("/"));
            dirs.push((
                top.join("lib64"),
                format!("beside {}", nvcc.unwrap_or(bin).display()),
            ));
            dirs.push((
                top.join("lib"),
                format!("beside {}", nvcc.unwrap_or(bin).display()),
            ));
        }
        let mut tried = Vec::new();
        for (dir, from) in &dirs {
            let Some(candidate) = newest_in(dir) else {
                tried.push((rtc::describe(dir, from), "no libnvrtc.so*".to_owned()));
                continue;
            };
            match Self::try_open(candidate.as_os_str(), from) {
                Ok(nvrtc) => return Ok(nvrtc),
                Err(why) => tried.push((rtc::describe(&candidate, from), why)),
            }
        }
        for name in NVRTC_SONAMES {
            match Self::try_open(OsStr::new(name), "dynamic loader") {
                Ok(nvrtc) => return Ok(nvrtc),
                Err(why) => tried.push((format!("{name} (dynamic loader)"), why)),
            }
        }
        Err(RtcError::NotFound {
            compiler: COMPILER,
            tried,
        })
    }

    /// What [`NvRtc::open`] with `nvcc` reads and where it looks, for remembering its end
    /// ([`crate::compiler::library_search`]): `HIPJIT_NVRTC_LIBRARY` and the file it names,
    /// `CUDA_PATH`, `CUDA_HOME`, `nvcc` and the library directories under them (the dynamic
    /// loader's part is added there). Loads nothing.
    pub fn search(nvcc: Option<&Path>) -> crate::compiler::library_search::LibrarySearch {
        let env = |name: &str| std::env::var_os(name).filter(|v| !v.is_empty());
        let (var, cuda_path, cuda_home) =
            (env(NVRTC_LIBRARY_ENV), env("CUDA_PATH"), env("CUDA_HOME"));
        let mut places = Vec::new();
        if let Some(v) = &var {
            places.push(PathBuf::from(v));
        }
        for root in [&cuda_path, &cuda_home].into_iter().flatten() {
            places.push(Path::new(root).join("lib64"));
        }
        if let Some(top) = nvcc.and_then(Path::parent).and_then(Path::parent) {
            places.push(top.join("lib64"));
            places.push(top.join("lib"));
        }
        crate::compiler::library_search::LibrarySearch::new(
            crate::compiler::kind::CompilerKind::Nvrtc,
            &[
                (NVRTC_LIBRARY_ENV, var.as_deref()),
                ("CUDA_PATH", cuda_path.as_deref()),
                ("CUDA_HOME", cuda_home.as_deref()),
                ("nvcc", nvcc.map(Path::as_os_str)),
            ],
            places,
        )
    }

    /// Opens NVRTC from `path` exactly.
    ///
    /// Errors: [`RtcError::Open`] when dlopen fails, [`RtcError::MissingSymbol`] naming the first
    /// NVRTC entry point the file does not export.
    pub fn open_path(path: &Path) -> Result<NvRtc, RtcError> {
        Self::open_named(path, "explicit path")
    }

    fn open_named(path: &Path, from: &str) -> Result<NvRtc, RtcError> {
        rtc::Loaded::open_named(COMPILER, &SYMBOLS, path, from).map(|lib| NvRtc { lib })
    }

    /// One candidate of the search: the reason it failed, as text, on failure.
    fn try_open(name: &OsStr, from: &str) -> Result<NvRtc, String> {
        rtc::Loaded::try_open(&SYMBOLS, name, from).map(|lib| NvRtc { lib })
    }

    /// The file the library was loaded from (`dladdr` of `nvrtcCreateProgram`).
    pub fn path(&self) -> &Path {
        &self.lib.path
    }

    /// How the library was found (`HIPJIT_NVRTC_LIBRARY`, `lib64 under CUDA_PATH`, `beside
    /// <nvcc>`, `dynamic loader`, `explicit path`).
    pub fn found(&self) -> &str {
        &self.lib.found
    }

    /// The CUDA toolkit's header directory belonging to this NVRTC: `include/` beside the
    /// directory holding the library (a toolkit's `lib64` -> `include`, PyPI's
    /// `nvidia/cu13/lib` -> `nvidia/cu13/include`), when it holds `cuda_fp16.h`.
    pub fn include_dir(&self) -> Option<PathBuf> {
        include_dir_of(&self.lib.path)
    }

    /// The files that decide what this NVRTC compiles, for the compiler identity of the cache
    /// key: the library and its builtins (`libnvrtc-builtins.so.M.m`), the one it loads and
    /// any beside it. NVRTC loads its builtins at its first compile, by the dynamic loader's
    /// rules from the library (its `$ORIGIN`, then `LD_LIBRARY_PATH`, the loader's cache):
    /// an empty program is compiled first, so that the file it loaded is keyed rather than
    /// guessed (one found only through `LD_LIBRARY_PATH` was not keyed before). Each file
    /// once, symlinks resolved, sorted.
    pub fn identity_files(&self) -> Vec<PathBuf> {
        self.load_builtins();
        rtc::identity_files(
            vec![self.lib.path.clone()],
            &["libnvrtc-builtins"],
            self.lib.path.parent(),
            &["libnvrtc-builtins.so."],
        )
    }

    /// Compiles an empty program, which makes NVRTC load its builtins (its result and errors
    /// do not matter: a real compile reports them).
    fn load_builtins(&self) {
        let input = RtcInput {
            source: b"",
            name: "hipjit-builtins.cu",
            headers: &[],
            include_dirs: &[],
            options: &[],
        };
        let _ = rtc::compile(COMPILER, &self.lib.api, &SYMBOLS, &input, &[]);
    }

    /// `nvrtcVersion`: the CUDA version of this NVRTC, e.g. `(13, 0)`.
    pub fn version(&self) -> Option<(i32, i32)> {
        self.lib.api.version()
    }

    /// Compiles one program to a cubin, and reports the files it may have read.
    ///
    /// Headers in `input.headers` are handed to NVRTC in memory (`nvrtcCreateProgram`'s
    /// `headers`/`includeNames`). The include directories go to NVRTC as `-I<dir>` (symlinks
    /// resolved) before the options, so they are searched before any `-I` among the options
    /// (the toolkit's, which `crate::compiler::Backend` puts last). The program is named
    /// `input.name`'s file name under [`PROGRAM_DIRECTORY`], which cannot be a directory, so
    /// that a quoted `#include` of the source is looked up nowhere before the include
    /// directories: not in the current directory (NVRTC's default, measured with 13.5: the
    /// directory of the program's name, relative to the process's working directory), nor in
    /// any directory a file could be put in meanwhile; one of a header is
    /// still looked up beside that header (`--no-source-include` would turn off both, and the
    /// toolkit's `mma.h` would not compile); the log and diagnostics say `input.name`. NVRTC
    /// reports no dependency list (13.5 rejects `-M`, `-MD`), so the dependencies are the
    /// regular files it is observed opening ([`OpenedFiles`], inotify) under each include
    /// directory, those of `input.include_dirs` by index and those of `-I` options as absolute
    /// paths: editing one, or adding a file of a name looked up beside them, changes the
    /// header manifest; a file nothing opens never affects the compile, its key or a refusal.
    /// The CUDA toolkit's headers beside this NVRTC ([`NvRtc::include_dir`]) are observed by
    /// the caller ([`toolkit_headers_opened`]), as [`crate::compiler::Backend::compile`] does.
    /// A file named by an absolute path, a name with `..` or a computed name in an `#include`
    /// (or `__has_include`) of the source or of a header it opened is refused
    /// ([`untracked_include`]): NVRTC would read such a file without its being keyed.
    ///
    /// Errors: [`RtcError::Arch`] before compiling for `-arch=compute_NN` (or
    /// `--gpu-architecture=compute_NN`), which yields PTX and an empty cubin;
    /// [`RtcError::IncludeDir`] for an include directory that is not one;
    /// [`RtcError::NoDependencies`] when the opens under an include directory cannot be
    /// observed (more than [`crate::compiler::opened_files::MAX_WATCHED_DIRS`] directories below it, the
    /// kernel's inotify limits, a lost event), or for an untracked `#include`; [`RtcError::NulByte`] before any call; [`RtcError::Compile`] with the program
    /// log; [`RtcError::EmptyOutput`] for a 0-byte cubin; [`RtcError::Call`] for another failing
    /// call.
    pub fn compile(&self, input: &RtcInput<'_>) -> Result<RtcOutput, RtcError> {
        let phase = crate::phases::start("compile: scratch directory, include directories watched");
        let arch = requested_arch(input.options);
        let scratch_error = |e: std::io::Error| RtcError::Scratch {
            compiler: COMPILER,
            reason: format!("cannot make a scratch directory: {e}"),
        };
        let scratch = tempfile::Builder::new()
            .prefix("hipjit-nvrtc-")
            .tempdir()
            .map_err(scratch_error)?;
        let started = crate::fs::stat::filesystem_now(scratch.path());
        // The program is named as a file of a directory that cannot exist (`/dev/null` is not
        // a directory): NVRTC looks a quoted `#include` of the source up in the directory of
        // the program's name first (relative to the working directory, which is not keyed),
        // and there finds nothing, while one of a header is still looked up in that header's
        // directory. `--no-source-include` would turn off both, and then the toolkit's own
        // headers (`mma.h` includes "mma.hpp") do not compile. The name is the same for every
        // compile of a source of that name: NVRTC 13.0 on the H100 machine took 42-47 ms
        // instead of 17-20 for a program named anew each time (a new empty directory, or a
        // new name in one directory), 1.0x raw under a name it had compiled before
        // (`examples/nvidia_compilers.rs cold`), and `__FILE__` is the same in every compile.
        let program_name = format!(
            "{PROGRAM_DIRECTORY}/{}",
            Path::new(input.name)
                .file_name()
                .unwrap_or_else(|| OsStr::new("source.cu"))
                .to_string_lossy()
        );
        let own = self
            .include_dir()
            .and_then(|d| crate::fs::observe::canonicalize(d).ok());
        let (canonical, trees) = checked_input(input, own.as_deref())?;
        let watches = watch_trees(&trees)?;
        // The caller's include directories first, then the options (whose `-I`s, the
        // toolkit's among them, come after), as nvcc searches: `-I` directories in order.
        let mut extra = rtc::include_options(&canonical);
        extra.extend(input.options.iter().map(OsString::from));
        let rename = |printed: &str| {
            if printed == program_name {
                input.name.to_owned()
            } else {
                rtc::user_file_name(printed, input.include_dirs, &canonical)
            }
        };
        let named = RtcInput {
            name: &program_name,
            options: &[],
            ..*input
        };
        phase.end();
        let phase = crate::phases::start("compile: the library's calls");
        let out = rtc::compile(COMPILER, &self.lib.api, &SYMBOLS, &named, &extra);
        phase.end();
        let _phase = crate::phases::start("compile: log, opened files");
        let out = out
            .map(|mut out| {
                out.log = out.log.replace(&program_name, input.name);
                out
            })
            .map_err(|e| match e {
                RtcError::Compile {
                    compiler,
                    options,
                    log,
                    ..
                } => RtcError::Compile {
                    diagnostics: diagnostics::parse_nvcc(&log, &rename),
                    log: log.replace(&program_name, input.name),
                    compiler,
                    name: input.name.to_owned(),
                    options,
                },
                other => other,
            })?;
        // The watches ended first: the scratch directory lies inside a watched tree when the
        // temporary directory does (an include directory above it), and its removal seen
        // while they watch would be a watched directory removed during the compile.
        let dependencies = opened_dependencies(&trees, watches);
        // Removed off the compile's path (`compiler::later`).
        crate::compiler::later::remove_later(scratch);
        let dependencies = dependencies?;
        if out.code.is_empty() {
            return Err(RtcError::EmptyOutput {
                compiler: COMPILER,
                what: "cubin",
                arch: arch.unwrap_or("the default architecture").to_owned(),
            });
        }
        Ok(RtcOutput {
            diagnostics: diagnostics::parse_nvcc(&out.log, &rename),
            code: out.code,
            log: out.log,
            dependencies,
            started,
        })
    }
}

/// The CUDA toolkit headers under `dir` (its `include`, symlinks resolved) that a compile
/// opened, as dependencies named by absolute path: the files `watch` (started before the
/// compile, [`OpenedFiles::watch`]) saw opened, by this compile or by any other process
/// meanwhile (a superset: never stale code, only a `stat` more per hit). When the watch could
/// not be started or its answer cannot be trusted, every file under `dir` instead (at most
/// [`rtc::MAX_TRACKED_FILES`]), with a warning once per process.
///
/// Errors: [`RtcError::NoDependencies`] when that walk fails or finds too many files.
pub fn toolkit_headers_opened(
    dir: &Path,
    watch: Result<OpenedFiles, String>,
) -> Result<Vec<Dependency>, RtcError> {
    let opened = match watch.and_then(OpenedFiles::finish) {
        Ok(files) => files,
        Err(why) => {
            toolkit_walk_warning(dir, &why);
            rtc::files_under(dir, rtc::MAX_TRACKED_FILES, rtc::CacheRoots::Include)
                .map_err(|why| RtcError::NoDependencies {
                    compiler: COMPILER,
                    reason: format!(
                        "the CUDA headers it opened could not be observed, so hipjit keys on \
                         every file under {}, and {why}",
                        dir.display()
                    ),
                })?
                .into_iter()
                .map(|name| dir.join(name))
                .collect()
        }
    };
    Ok(opened
        .into_iter()
        .map(|path| Dependency {
            include_dir: None,
            name: path.clone(),
            path,
        })
        .collect())
}

/// Says once per process that the toolkit headers NVRTC reads could not be observed, so that
/// every one of them is keyed (each hit then checks them all).
fn toolkit_walk_warning(dir: &Path, why: &str) {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        tracing::warn!(
            dir = %dir.display(),
            reason = %why,
            "hipjit: the CUDA headers NVRTC opens could not be observed with inotify; every \
             header under the toolkit's include directory is keyed instead (correct, but each \
             cache hit checks all of them)"
        );
    });
}

/// The value of the last `-arch=`, `--gpu-architecture=` (or `-arch X` pair) among `options`.
fn requested_arch(options: &[String]) -> Option<&str> {
    let mut arch = None;
    let mut iter = options.iter();
    while let Some(o) = iter.next() {
        if let Some(v) = o
            .strip_prefix("-arch=")
            .or_else(|| o.strip_prefix("--gpu-architecture="))
        {
            arch = Some(v);
        } else if o == "-arch" || o == "--gpu-architecture" {
            arch = iter.next().map(String::as_str);
        }
    }
    arch
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_last_arch_option_wins_in_every_spelling() {
        let o = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(requested_arch(&o(&["-arch=sm_80", "-O3"])), Some("sm_80"));
        assert_eq!(
            requested_arch(&o(&["-arch", "compute_90"])),
            Some("compute_90")
        );
        assert_eq!(
            requested_arch(&o(&["-arch=sm_80", "--gpu-architecture=sm_90a"])),
            Some("sm_90a")
        );
        assert_eq!(requested_arch(&o(&["-O3"])), None);
    }

    #[test]
    fn the_newest_versioned_library_in_a_directory_is_taken() {
        let dir = tempfile::tempdir().unwrap();
        for name in [
            "libnvrtc.so",
            "libnvrtc.so.12",
            "libnvrtc.so.13",
            "libnvrtc.so.13.0.1",
            "libnvrtc-builtins.so.13.5",
            "libnvrtc.so.bak",
        ] {
            std::fs::write(dir.path().join(name), b"").unwrap();
        }
        assert_eq!(
            newest_in(dir.path()),
            Some(dir.path().join("libnvrtc.so.13.0.1"))
        );
        assert_eq!(newest_in(&dir.path().join("missing")), None);
    }
}

#[cfg(test)]
mod untracked_include_tests {
    use super::untracked_include;

    #[test]
    fn includes_below_the_include_directories_are_tracked() {
        for ok in [
            &b"#include \"a.h\"\n#include <sub/b.h>\n  #  include_next <c.h>\n"[..],
            b"#ifdef __has_include\n#if defined(__has_include) && __has_include(\"x/y.h\")\n",
            b"// #include \"../commented.h\"\nint x; /* ok */\n",
        ] {
            assert_eq!(
                untracked_include(ok),
                None,
                "{}",
                String::from_utf8_lossy(ok)
            );
        }
    }

    #[test]
    fn absolute_dotdot_and_computed_names_are_not() {
        for (bad, line) in [
            (&b"#include \"../inc/v.h\"\n"[..], 1),
            (b"int a;\n#include </usr/include/x.h>\n", 2),
            (b"#include \"sub/../../v.h\"\n", 1),
            (b"\n\n# include_next <../x.h>\n", 3),
            (b"#define H \"v.h\"\n#include H\n", 2),
            (b"#if __has_include(\"/etc/x.h\")\n#endif\n", 1),
            (b"#if __has_include_next(<../y.h>)\n", 1),
            (b"#if __has_include(NAME)\n", 1),
        ] {
            let got = untracked_include(bad).map(|(_, l)| l);
            assert_eq!(got, Some(line), "{}", String::from_utf8_lossy(bad));
        }
    }
}
