//! The program life cycle that HIP's and CUDA's runtime compilers share: create a program from
//! a source and in-memory headers, compile it with options, read its log and its output,
//! destroy it. hipRTC (`hiprtcCreateProgram`, `hiprtcCompileProgram`, `hiprtcGetCode`...) and
//! NVRTC (`nvrtcCreateProgram`, `nvrtcCompileProgram`, `nvrtcGetCUBIN`...) have the same entry
//! points with the same C signatures, so one table of function pointers serves both; the
//! backends ([`super::hiprtc`], [`super::nvrtc`]) find the library, name the symbols and check
//! what is specific to their vendor.
//!
//! Both compilers take C strings: a source, header or option holding a NUL byte is refused
//! before the library is called ([`RtcError::NulByte`]).

pub mod backend;
pub mod comgr;
pub mod hiprtc;
pub mod nvrtc;
pub mod worker;

use std::ffi::{c_char, c_int, c_void, CStr, CString, OsStr, OsString};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use super::depfile::Dependency;
use super::diagnostics::Diagnostic;
use crate::safe::runtime::loader::{self, Handle};

/// An opaque program handle (`hiprtcProgram`, `nvrtcProgram`).
pub(crate) type Program = *mut c_void;

type CreateProgram = unsafe extern "C" fn(
    *mut Program,
    *const c_char,
    *const c_char,
    c_int,
    *const *const c_char,
    *const *const c_char,
) -> c_int;
type CompileProgram = unsafe extern "C" fn(Program, c_int, *const *const c_char) -> c_int;
type GetSize = unsafe extern "C" fn(Program, *mut usize) -> c_int;
type GetBytes = unsafe extern "C" fn(Program, *mut c_char) -> c_int;
type DestroyProgram = unsafe extern "C" fn(*mut Program) -> c_int;
type GetErrorString = unsafe extern "C" fn(c_int) -> *const c_char;
type GetVersion = unsafe extern "C" fn(*mut c_int, *mut c_int) -> c_int;

/// The exported names of one compiler's entry points, in the order of [`Api`]'s fields.
pub(crate) struct Symbols {
    pub create: &'static CStr,
    pub compile: &'static CStr,
    pub log_size: &'static CStr,
    pub log: &'static CStr,
    pub output_size: &'static CStr,
    pub output: &'static CStr,
    pub destroy: &'static CStr,
    pub error_string: &'static CStr,
    pub version: &'static CStr,
}

/// The resolved entry points of one loaded runtime compiler.
#[derive(Clone, Copy)]
pub(crate) struct Api {
    create: CreateProgram,
    compile: CompileProgram,
    log_size: GetSize,
    log: GetBytes,
    output_size: GetSize,
    output: GetBytes,
    destroy: DestroyProgram,
    error_string: GetErrorString,
    version: GetVersion,
}

impl Api {
    /// Resolves every entry point of `symbols` in `handle`; the first one missing is returned by
    /// name.
    pub(crate) fn resolve(handle: &Handle, symbols: &Symbols) -> Result<Api, &'static str> {
        // SAFETY: each type above is the C declaration of the named function, identical in
        // hiprtc.h and nvrtc.h (the program handle is a pointer, the result an int enum).
        unsafe {
            macro_rules! get {
                ($field:ident) => {
                    handle
                        .sym(symbols.$field)
                        .ok_or_else(|| symbols.$field.to_str().unwrap_or("?"))?
                };
            }
            Ok(Api {
                create: get!(create),
                compile: get!(compile),
                log_size: get!(log_size),
                log: get!(log),
                output_size: get!(output_size),
                output: get!(output),
                destroy: get!(destroy),
                error_string: get!(error_string),
                version: get!(version),
            })
        }
    }

    /// The library's own version pair (`hiprtcVersion`, `nvrtcVersion`), or `None` when the call
    /// fails. hipRTC 5.2.3 and 6.4.3 both answer 9.0: it identifies nothing.
    pub(crate) fn version(&self) -> Option<(i32, i32)> {
        let (mut major, mut minor) = (0, 0);
        // SAFETY: both pointers are valid for writes of one int.
        let rc = unsafe { (self.version)(&mut major, &mut minor) };
        (rc == 0).then_some((major, minor))
    }

    /// The library's text for a result code.
    fn message(&self, code: c_int) -> String {
        // SAFETY: the function accepts any result value and returns NULL or a static string.
        let p = unsafe { (self.error_string)(code) };
        if p.is_null() {
            format!("result {code}")
        } else {
            // SAFETY: non-null, NUL-terminated, static.
            unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned()
        }
    }
}

/// One compile's input.
#[derive(Debug, Clone, Copy)]
pub struct RtcInput<'a> {
    /// The source bytes (no NUL byte).
    pub source: &'a [u8],
    /// The source's name, as diagnostics show it (e.g. `kernel.hip`).
    pub name: &'a str,
    /// Headers handed to the compiler in memory: the name an `#include` uses, and the bytes.
    /// They are not files, so they are not in [`RtcOutput::dependencies`]: a cache key must
    /// cover them itself.
    pub headers: &'a [(String, Vec<u8>)],
    /// The include directories, searched in order: the backend hands each to the compiler as
    /// `-I<dir>` (symlinks resolved; hipRTC after `options`, NVRTC before them, ahead of the
    /// toolkit's `-I`), and reports the files read there by the directory's index
    /// ([`Dependency::include_dir`]).
    pub include_dirs: &'a [PathBuf],
    /// The compiler's options, one argument each (e.g. `--gpu-architecture=gfx90a`, `-O3`).
    pub options: &'a [String],
}

/// What a successful compile returned.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RtcOutput {
    /// The code: an AMDGPU code object (hipRTC) or a cubin (NVRTC).
    pub code: Vec<u8>,
    /// The program log (warnings), lossily decoded; empty when there were none.
    pub log: String,
    /// The warnings (and remarks) parsed from the log, as hipcc's and nvcc's are
    /// ([`super::diagnostics`]): file names as the caller knows them (the source's name, an
    /// in-memory header's include name, an include directory as given), NVRTC's without a
    /// column.
    pub diagnostics: Vec<Diagnostic>,
    /// The files the compile read, for the cache key's header manifest
    /// (`record`): for hipRTC, clang's dependency list of the compile
    /// (system headers included) without comgr's staged copies of the source and the in-memory
    /// headers; for NVRTC, which reports none, every file under the include directories
    /// ([`RtcInput::include_dirs`] and `-I` options). Files under an include directory carry
    /// its index; others are absolute.
    pub dependencies: Vec<Dependency>,
    /// The filesystem's clock just before the compile (`filesystem_now`):
    /// a file read with a modification or change time at or after it may have changed during the
    /// compile.
    pub started: SystemTime,
}

/// Errors of the in-process compilers.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RtcError {
    /// No library of this compiler could be opened; every candidate tried, with the reason.
    #[error("{compiler} not found; tried:{}", tried_list(.tried))]
    NotFound {
        /// `hipRTC` or `NVRTC`.
        compiler: &'static str,
        /// Each candidate (a path or soname, and where it came from) and why it failed.
        tried: Vec<(String, String)>,
    },
    /// A library named explicitly (argument or environment variable) could not be opened.
    #[error("cannot open {compiler} library {path} (from {from}): {reason}")]
    Open {
        /// `hipRTC` or `NVRTC`.
        compiler: &'static str,
        /// The path as given.
        path: PathBuf,
        /// The argument or variable that named it.
        from: String,
        /// dlopen's message.
        reason: String,
    },
    /// The library named explicitly (argument or environment variable) opened but does not
    /// export an entry point the compile needs.
    #[error(
        "{path} (from {from}) is not a usable {compiler} library: it does not export {symbol}"
    )]
    MissingSymbol {
        /// `hipRTC` or `NVRTC`.
        compiler: &'static str,
        /// The file opened.
        path: PathBuf,
        /// The argument or variable that named it.
        from: String,
        /// The first entry point missing.
        symbol: &'static str,
    },
    /// A string handed to the compiler holds a NUL byte, which a C string cannot carry.
    #[error("{what} holds a NUL byte at offset {offset}: {compiler} takes C strings (hipcc and nvcc read files and accept it)")]
    NulByte {
        /// `hipRTC` or `NVRTC`.
        compiler: &'static str,
        /// Which string: `the source`, `header "x.h"`, `option 2`...
        what: String,
        /// Byte offset of the first NUL.
        offset: usize,
    },
    /// A call other than the compile itself failed.
    #[error("{call} failed: {message} ({code})")]
    Call {
        /// The entry point, e.g. `hiprtcCreateProgram`.
        call: &'static str,
        /// The result code.
        code: i32,
        /// The library's text for it.
        message: String,
    },
    /// The compile failed; the program log holds the compiler's diagnostics.
    #[error("{compiler} could not compile {name} with [{}]:\n{log}", .options.join(" "))]
    Compile {
        /// `hipRTC` or `NVRTC`.
        compiler: &'static str,
        /// The source's name.
        name: String,
        /// The options used.
        options: Vec<String>,
        /// The program log, lossily decoded.
        log: String,
        /// The log parsed, as `RtcOutput::diagnostics`: every error and warning with its
        /// notes, include chain and excerpt.
        diagnostics: Vec<Diagnostic>,
    },
    /// The compile succeeded with nothing to load: NVRTC returns a 0-byte cubin for a virtual
    /// architecture (`compute_NN`).
    #[error("{compiler} returned an empty {what} for {arch}")]
    EmptyOutput {
        /// `hipRTC` or `NVRTC`.
        compiler: &'static str,
        /// `code object` or `cubin`.
        what: &'static str,
        /// The architecture asked for.
        arch: String,
    },
    /// An include directory does not exist or is not a directory.
    #[error("include directory {} is not usable: {reason}", path.display())]
    IncludeDir {
        /// The directory as given.
        path: PathBuf,
        /// What is wrong (the OS error, `not a directory`).
        reason: String,
    },
    /// The files a compile reads cannot all be known, so its result cannot be cached safely:
    /// found after the compile (hipRTC left no readable dependency list) or before it, NVRTC
    /// being then not called (an include directory that could not be walked or holds more
    /// than `MAX_TRACKED_FILES` files, an `#include` that could name a file outside them).
    #[error("{compiler}: the files the compile reads cannot all be known, and hipjit gives no result it cannot key (nvcc and hipcc report the files they read: `--compiler nvcc` or `hipcc`): {reason}")]
    NoDependencies {
        /// `hipRTC` or `NVRTC`.
        compiler: &'static str,
        /// What is wrong.
        reason: String,
    },
    /// The compile could not be staged: its scratch directory could not be made (a full disk,
    /// an unwritable `TMPDIR`). The machine's, never the source's: Auto compiles with the
    /// process compiler and remembers nothing of the source.
    #[error("{compiler}: cannot stage the compile: {reason}")]
    Scratch {
        /// `hipRTC` or `NVRTC`.
        compiler: &'static str,
        /// What failed, with the OS error.
        reason: String,
    },
    /// The library found cannot compile for the target asked for; checked before the compile,
    /// since hipRTC aborts the process on a processor its comgr does not know
    /// (`comgr`).
    #[error("hipRTC {} ({found}) cannot compile for {target}: {reason}{}",
        library.display(), tried_before(.tried))]
    UnsupportedTarget {
        /// The hipRTC library that was to compile.
        library: PathBuf,
        /// How it was found (`HIPJIT_HIPRTC_LIBRARY`, `beside the HIP runtime`...).
        found: String,
        /// The target as given.
        target: String,
        /// Why (the processors its comgr knows, or the feature its processor lacks).
        reason: String,
        /// The candidates tried, in order, before the one taken, and why each was passed over.
        tried: Vec<(String, String)>,
    },
    /// A compile run in a worker process (`worker`) did not give a result: no worker
    /// program, it could not start, it ran past its timeout, it died by a signal (a crash, or
    /// its memory bound), or the library failed there otherwise (the error's text).
    #[error("{compiler} in a worker process: {reason}")]
    Worker {
        /// `hipRTC` or `NVRTC`.
        compiler: &'static str,
        /// What happened.
        reason: String,
    },
    /// The architecture cannot be compiled to loadable code by this compiler.
    #[error("{compiler} cannot compile for {arch:?}: {reason}")]
    Arch {
        /// `hipRTC` or `NVRTC`.
        compiler: &'static str,
        /// The architecture as given.
        arch: String,
        /// Why, and what to use instead.
        reason: String,
    },
}

fn tried_before(tried: &[(String, String)]) -> String {
    if tried.is_empty() {
        String::new()
    } else {
        format!("; candidates tried before it:{}", tried_list(tried))
    }
}

fn tried_list(tried: &[(String, String)]) -> String {
    if tried.is_empty() {
        return " nothing".to_owned();
    }
    tried
        .iter()
        .map(|(what, why)| format!("\n  {what}: {why}"))
        .collect()
}

/// `bytes` as a C string, or [`RtcError::NulByte`] naming `what`.
fn c_string(
    compiler: &'static str,
    what: impl Fn() -> String,
    bytes: &[u8],
) -> Result<CString, RtcError> {
    CString::new(bytes).map_err(|e| RtcError::NulByte {
        compiler,
        what: what(),
        offset: e.nul_position(),
    })
}

/// Destroys the program when dropped, on every path out of [`compile`].
struct ProgramGuard<'a> {
    api: &'a Api,
    program: Program,
}

impl Drop for ProgramGuard<'_> {
    fn drop(&mut self) {
        // SAFETY: `program` was created by `api.create` and is destroyed once, here.
        unsafe { (self.api.destroy)(&mut self.program) };
    }
}

/// Reads a size-then-bytes pair (the log, the code) from a compiled program.
fn read_bytes(
    api: &Api,
    program: Program,
    size_call: (&'static str, GetSize),
    bytes_call: (&'static str, GetBytes),
) -> Result<Vec<u8>, RtcError> {
    let mut size = 0usize;
    // SAFETY: `program` is live; `size` is valid for one write.
    let rc = unsafe { (size_call.1)(program, &mut size) };
    if rc != 0 {
        return Err(RtcError::Call {
            call: size_call.0,
            code: rc,
            message: api.message(rc),
        });
    }
    let mut buf = vec![0u8; size];
    if size > 0 {
        // SAFETY: `buf` holds exactly the `size` bytes the library said it writes.
        let rc = unsafe { (bytes_call.1)(program, buf.as_mut_ptr().cast()) };
        if rc != 0 {
            return Err(RtcError::Call {
                call: bytes_call.0,
                code: rc,
                message: api.message(rc),
            });
        }
    }
    Ok(buf)
}

/// Log bytes as text: the trailing NUL the libraries count in the size removed, lossily decoded.
fn log_text(mut bytes: Vec<u8>) -> String {
    while bytes.last() == Some(&0) {
        bytes.pop();
    }
    String::from_utf8_lossy(&bytes).trim_end().to_owned()
}

/// What [`compile`] returns: the code and the program log.
pub(crate) struct ProgramOutput {
    pub code: Vec<u8>,
    pub log: String,
}

/// Creates, compiles, reads and destroys one program through `api`, with `input.options`
/// followed by `extra` (the backend's own: include directories, the dependency list). The
/// caller holds whatever lock the library needs.
pub(crate) fn compile(
    compiler: &'static str,
    api: &Api,
    symbols: &Symbols,
    input: &RtcInput<'_>,
    extra: &[OsString],
) -> Result<ProgramOutput, RtcError> {
    let source = c_string(compiler, || "the source".to_owned(), input.source)?;
    let name = c_string(
        compiler,
        || format!("the source name {:?}", input.name),
        input.name.as_bytes(),
    )?;
    let mut header_names = Vec::with_capacity(input.headers.len());
    let mut header_bodies = Vec::with_capacity(input.headers.len());
    for (include_name, body) in input.headers {
        header_names.push(c_string(
            compiler,
            || format!("the header name {include_name:?}"),
            include_name.as_bytes(),
        )?);
        header_bodies.push(c_string(
            compiler,
            || format!("header {include_name:?}"),
            body,
        )?);
    }
    let mut options = Vec::with_capacity(input.options.len() + extra.len());
    for (i, option) in input.options.iter().enumerate() {
        options.push(c_string(
            compiler,
            || format!("option {i} ({option:?})"),
            option.as_bytes(),
        )?);
    }
    for option in extra {
        options.push(c_string(
            compiler,
            || format!("option {option:?}"),
            option.as_bytes(),
        )?);
    }
    let header_name_ptrs: Vec<*const c_char> = header_names.iter().map(|c| c.as_ptr()).collect();
    let header_body_ptrs: Vec<*const c_char> = header_bodies.iter().map(|c| c.as_ptr()).collect();
    let option_ptrs: Vec<*const c_char> = options.iter().map(|c| c.as_ptr()).collect();
    let call_err = |call: &'static str, code: c_int| RtcError::Call {
        call,
        code,
        message: api.message(code),
    };

    let mut program: Program = std::ptr::null_mut();
    let n_headers =
        c_int::try_from(header_body_ptrs.len()).map_err(|_| call_err(sym(symbols.create), -1))?;
    let (bodies, names) = if header_body_ptrs.is_empty() {
        (std::ptr::null(), std::ptr::null())
    } else {
        (header_body_ptrs.as_ptr(), header_name_ptrs.as_ptr())
    };
    // SAFETY: every pointer is a NUL-terminated string kept alive by the CStrings above until
    // the end of this function; the arrays hold `n_headers` entries; `program` is valid for one
    // write.
    let rc = unsafe {
        (api.create)(
            &mut program,
            source.as_ptr(),
            name.as_ptr(),
            n_headers,
            bodies,
            names,
        )
    };
    if rc != 0 {
        return Err(call_err(sym(symbols.create), rc));
    }
    let guard = ProgramGuard { api, program };
    let n_options =
        c_int::try_from(option_ptrs.len()).map_err(|_| call_err(sym(symbols.compile), -1))?;
    let opts = if option_ptrs.is_empty() {
        std::ptr::null()
    } else {
        option_ptrs.as_ptr()
    };
    // SAFETY: the program is live; the option array holds `n_options` NUL-terminated strings
    // alive until the end of this function.
    let rc = unsafe { (api.compile)(guard.program, n_options, opts) };
    let log = read_bytes(
        api,
        guard.program,
        (sym(symbols.log_size), api.log_size),
        (sym(symbols.log), api.log),
    )
    .map(log_text)
    .unwrap_or_default();
    if rc != 0 {
        return Err(RtcError::Compile {
            compiler,
            name: input.name.to_owned(),
            options: input
                .options
                .iter()
                .cloned()
                .chain(extra.iter().map(|o| o.to_string_lossy().into_owned()))
                .collect(),
            log: if log.is_empty() { api.message(rc) } else { log },
            diagnostics: Vec::new(),
        });
    }
    let code = read_bytes(
        api,
        guard.program,
        (sym(symbols.output_size), api.output_size),
        (sym(symbols.output), api.output),
    )?;
    Ok(ProgramOutput { code, log })
}

/// The most files hipjit records for one NVRTC compile's include directories (NVRTC reports
/// no dependency list, so every file under them is keyed): 20,000.
pub const MAX_TRACKED_FILES: usize = 20_000;

/// `include_dirs` with symlinks resolved, in order ([`super::canonical_include_dirs`]).
///
/// Errors: [`RtcError::IncludeDir`] for one that does not exist or is not a directory.
pub(crate) fn canonical_include_dirs(include_dirs: &[PathBuf]) -> Result<Vec<PathBuf>, RtcError> {
    super::canonical_include_dirs(include_dirs)
        .map_err(|(path, reason)| RtcError::IncludeDir { path, reason })
}

/// A file name as the compiler printed it, as the caller knows it: under `canonical[i]` (what
/// the compiler was given with `-I`), the same name under `include_dirs[i]`.
pub(crate) fn user_file_name(
    printed: &str,
    include_dirs: &[PathBuf],
    canonical: &[PathBuf],
) -> String {
    let path = Path::new(printed);
    canonical
        .iter()
        .zip(include_dirs)
        .filter_map(|(real, given)| Some((real, given, path.strip_prefix(real).ok()?)))
        .max_by_key(|(real, _, _)| real.as_os_str().len())
        .map_or_else(
            || printed.to_owned(),
            |(_, given, name)| given.join(name).display().to_string(),
        )
}

/// `-I<dir>` for each directory.
pub(crate) fn include_options(dirs: &[PathBuf]) -> Vec<OsString> {
    dirs.iter()
        .map(|d| {
            let mut o = OsString::from("-I");
            o.push(d);
            o
        })
        .collect()
}

/// The values of `-I DIR` and `-IDIR` among `options`, in order.
pub(crate) fn include_dirs_in_options(options: &[String]) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut it = options.iter();
    while let Some(o) = it.next() {
        if o == "-I" || o == "--include-path" {
            out.extend(it.next().map(PathBuf::from));
        } else if let Some(v) = o
            .strip_prefix("--include-path=")
            .or_else(|| o.strip_prefix("-I"))
        {
            out.push(PathBuf::from(v));
        }
    }
    out
}

/// Whether [`files_under`] leaves out what hipjit writes in a directory holding hipjit's cache
/// directory tag ([`crate::fs::cache_root`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum CacheRoots {
    /// Its [`HIPJIT_OWN_DIRS`] left out, everything else listed: a caller's include directory
    /// holding hipjit's cache root (the default `~/.cache/hipjit` under `-I ~`), whose entries,
    /// locks, temporary files and remembered identities change while hipjit compiles; a header
    /// beside the tag, or in any other directory of it (a tag copied into a project with its
    /// headers), is still keyed.
    Skip,
    /// Listed as any directory: the CUDA toolkit's headers, where a header NVRTC reads must
    /// be keyed whatever lies beside it.
    Include,
}

/// The directories hipjit itself writes in a cache root: the entries, locks and temporary
/// files ([`crate::fs::cache_root::LAYOUT_DIR`]) and, in the default root, the remembered compiler
/// identities and hit memos ([`crate::compiler::identity::identity_dir`]). Left out of a
/// caller's include tree under [`CacheRoots::Skip`] only where the tag is hipjit's and each is a
/// real directory (not a symbolic link); a header put inside one of them is not keyed.
pub(crate) const HIPJIT_OWN_DIRS: [&str; 2] = [
    crate::fs::cache_root::LAYOUT_DIR,
    crate::compiler::identity::IDENTITY_DIR_NAME,
];

/// Whether `path`, a file below `root`, lies in one of the [`HIPJIT_OWN_DIRS`] of a hipjit
/// cache root at or below `root` (a real directory, not a link, beside hipjit's cache
/// directory tag): what hipjit writes there while it compiles is no source's header.
pub(crate) fn in_hipjit_own_dir(root: &Path, path: &Path) -> bool {
    let Ok(rel) = path.strip_prefix(root) else {
        return false;
    };
    let mut dir = root.to_path_buf();
    for c in rel.parent().into_iter().flat_map(Path::components) {
        let name = c.as_os_str();
        if HIPJIT_OWN_DIRS.iter().any(|d| name == *d)
            && crate::fs::cache_root::is_hipjit_cache(&dir)
            && crate::fs::observe::symlink_metadata(dir.join(name)).is_ok_and(|m| m.is_dir())
        {
            return true;
        }
        dir.push(name);
    }
    false
}

/// Every regular file under `dir` (symbolic links followed, a directory under each path that
/// reaches it), as
/// names relative to it, sorted; at most `limit` of them. With [`CacheRoots::Skip`], the
/// [`HIPJIT_OWN_DIRS`] of a directory below `dir` holding hipjit's cache directory tag
/// ([`crate::fs::cache_root`]) are left out.
///
/// Errors: a text naming the directory that cannot be listed, or saying the limit was passed.
pub(crate) fn files_under(
    dir: &Path,
    limit: usize,
    cache_roots: CacheRoots,
) -> Result<Vec<PathBuf>, String> {
    let mut out = Vec::new();
    // (directory below `dir`, whether it is a hipjit cache root (its own directories left
    // out), the directories on its way from `dir` by device and inode). A directory reached
    // by two paths (a link to it) is listed under both: an `#include` may name it either way,
    // and a link retargeted later must change the manifest. A link back to a directory on its
    // own way is not followed (a cycle); `limit` bounds the rest.
    let mut stack = vec![(PathBuf::new(), false, Vec::<(u64, u64)>::new())];
    while let Some((rel, cache_root, mut way)) = stack.pop() {
        let here = dir.join(&rel);
        let meta =
            crate::fs::observe::metadata(&here).map_err(|e| format!("{}: {e}", here.display()))?;
        let id = (meta.fields.dev, meta.fields.ino);
        if way.contains(&id) {
            continue;
        }
        way.push(id);
        let entries =
            crate::fs::observe::read_dir(&here).map_err(|e| format!("{}: {e}", here.display()))?;
        for entry in entries {
            let entry = entry.map_err(|e| format!("{}: {e}", here.display()))?;
            let file_name = entry.file_name();
            let name = rel.join(&file_name);
            // What hipjit writes in a cache root (entries, locks, temporary files, remembered
            // identities) changes while it compiles and is no source's header: only its own
            // directories, by name, and only real ones (a link named so may lead to headers).
            if cache_root
                && HIPJIT_OWN_DIRS.iter().any(|d| file_name == *d)
                && crate::fs::observe::symlink_metadata(entry.path()).is_ok_and(|m| m.is_dir())
            {
                continue;
            }
            // Followed: a link to a file or a directory is read through by the compiler.
            match crate::fs::observe::metadata(entry.path()) {
                Ok(m) if m.is_dir() => {
                    let tagged = cache_roots == CacheRoots::Skip
                        && crate::fs::cache_root::is_hipjit_cache(&entry.path());
                    stack.push((name, tagged, way.clone()));
                }
                Ok(m) if m.is_file() => {
                    if out.len() == limit {
                        return Err(format!("{} holds more than {limit} files", dir.display()));
                    }
                    out.push(name);
                }
                // A dangling link or a special file: nothing an #include can read.
                _ => {}
            }
        }
    }
    out.sort();
    Ok(out)
}

fn sym(name: &'static CStr) -> &'static str {
    name.to_str().unwrap_or("?")
}

/// A runtime compiler's library, opened and resolved: the file it was loaded from (`dladdr` of
/// its create-program entry point), how it was found, and its entry points. hipRTC and NVRTC
/// open their libraries the same way; only the names and the search order differ.
pub(crate) struct Loaded {
    pub(crate) path: PathBuf,
    pub(crate) found: String,
    pub(crate) api: Api,
    /// The candidates of the search tried before this one, and why each failed.
    pub(crate) tried: Vec<(String, String)>,
}

impl Loaded {
    /// Opens `path` exactly, named by `from` (an argument or a variable).
    ///
    /// Errors: [`RtcError::Open`] when dlopen fails, [`RtcError::MissingSymbol`] naming the
    /// first entry point of `symbols` the file does not export.
    pub(crate) fn open_named(
        compiler: &'static str,
        symbols: &Symbols,
        path: &Path,
        from: &str,
    ) -> Result<Loaded, RtcError> {
        let handle = loader::open(path.as_os_str(), false).map_err(|reason| RtcError::Open {
            compiler,
            path: path.to_path_buf(),
            from: from.to_owned(),
            reason,
        })?;
        let api = Api::resolve(&handle, symbols).map_err(|symbol| RtcError::MissingSymbol {
            compiler,
            path: path.to_path_buf(),
            from: from.to_owned(),
            symbol,
        })?;
        Ok(Self::new(&handle, symbols, path, from, api))
    }

    /// One candidate of a search: the reason it failed, as text, on failure.
    pub(crate) fn try_open(symbols: &Symbols, name: &OsStr, from: &str) -> Result<Loaded, String> {
        let handle = loader::open(name, false)?;
        let api =
            Api::resolve(&handle, symbols).map_err(|symbol| format!("does not export {symbol}"))?;
        Ok(Self::new(&handle, symbols, Path::new(name), from, api))
    }

    fn new(handle: &Handle, symbols: &Symbols, name: &Path, from: &str, api: Api) -> Loaded {
        let path = handle
            .sym_addr(symbols.create)
            .and_then(Handle::file_of)
            .unwrap_or_else(|| name.to_path_buf());
        Loaded {
            path,
            found: from.to_owned(),
            api,
            tried: Vec::new(),
        }
    }
}

/// Where a candidate library came from, for [`RtcError::NotFound`]'s list.
pub(crate) fn describe(path: &Path, from: &str) -> String {
    format!("{} ({from})", path.display())
}

/// The files of the shared objects loaded in this process (`dl_iterate_phdr`), in load order,
/// without duplicates; the main program and the vDSO (no file name) are left out.
pub(crate) fn loaded_objects() -> Vec<PathBuf> {
    unsafe extern "C" fn each(
        info: *mut libc::dl_phdr_info,
        _size: usize,
        data: *mut c_void,
    ) -> c_int {
        // SAFETY: dl_iterate_phdr hands a valid info pointer for the duration of the call, and
        // `data` is the `&mut Vec<PathBuf>` passed below.
        let (info, out) = unsafe { (&*info, &mut *data.cast::<Vec<PathBuf>>()) };
        if !info.dlpi_name.is_null() {
            // SAFETY: dlpi_name is a NUL-terminated string owned by the dynamic loader.
            let name = unsafe { CStr::from_ptr(info.dlpi_name) };
            if !name.to_bytes().is_empty() {
                let path = PathBuf::from(std::ffi::OsStr::from_bytes(name.to_bytes()));
                if !out.contains(&path) {
                    out.push(path);
                }
            }
        }
        0
    }
    let mut out: Vec<PathBuf> = Vec::new();
    // SAFETY: the callback only reads the info it is given and pushes to `out`, which outlives
    // the call.
    unsafe { libc::dl_iterate_phdr(Some(each), (&mut out as *mut Vec<PathBuf>).cast()) };
    out
}

/// `files` plus the loaded objects whose file names start with one of `prefixes`, and the files
/// in `beside` whose names start with one of `beside_prefixes`; each file once (by its
/// canonical path, symlinks resolved), sorted.
pub(crate) fn identity_files(
    mut files: Vec<PathBuf>,
    prefixes: &[&str],
    beside: Option<&Path>,
    beside_prefixes: &[&str],
) -> Vec<PathBuf> {
    let starts = |p: &Path, prefixes: &[&str]| {
        p.file_name()
            .and_then(|n| n.to_str())
            .is_some_and(|n| prefixes.iter().any(|pre| n.starts_with(pre)))
    };
    files.extend(loaded_objects().into_iter().filter(|p| starts(p, prefixes)));
    if let Some(dir) = beside {
        if let Ok(entries) = crate::fs::observe::read_dir(dir) {
            files.extend(
                entries
                    .flatten()
                    .map(|e| e.path())
                    .filter(|p| starts(p, beside_prefixes)),
            );
        }
    }
    let mut out: Vec<PathBuf> = files
        .into_iter()
        .filter_map(|p| crate::fs::observe::canonicalize(&p).ok())
        .filter(|p| crate::fs::observe::is_file(p))
        .collect();
    out.sort();
    out.dedup();
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_directory_reached_through_a_link_is_listed_under_each_path_and_a_cycle_is_not_followed() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("m1")).unwrap();
        std::fs::write(dir.path().join("m1/v.h"), "v").unwrap();
        std::os::unix::fs::symlink("m1", dir.path().join("b")).unwrap();
        std::os::unix::fs::symlink("..", dir.path().join("m1/up")).unwrap();
        assert_eq!(
            files_under(dir.path(), 100, CacheRoots::Skip).unwrap(),
            ["b/v.h", "m1/v.h"].map(PathBuf::from)
        );
    }

    #[test]
    fn a_link_named_like_hipjits_own_directory_in_a_cache_root_is_followed() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("cache")).unwrap();
        std::fs::create_dir_all(dir.path().join("headers")).unwrap();
        std::fs::write(dir.path().join("headers/h.h"), "h").unwrap();
        std::os::unix::fs::symlink("../headers", dir.path().join("cache/v1")).unwrap();
        crate::fs::cache_root::ensure(&dir.path().join("cache"));
        assert_eq!(
            files_under(dir.path(), 100, CacheRoots::Skip).unwrap(),
            ["cache/CACHEDIR.TAG", "cache/v1/h.h", "headers/h.h"].map(PathBuf::from)
        );
    }

    #[test]
    fn a_hipjit_cache_roots_subdirectories_are_left_out_of_a_callers_tree_and_listed_in_the_toolkits(
    ) {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("cache/v1/ab")).unwrap();
        std::fs::write(dir.path().join("a.h"), "a").unwrap();
        std::fs::write(dir.path().join("cache/v.h"), "v").unwrap();
        std::fs::write(dir.path().join("cache/v1/ab/entry.hjc"), "e").unwrap();
        std::fs::create_dir_all(dir.path().join("cache/compilers/hits")).unwrap();
        std::fs::write(dir.path().join("cache/compilers/hits/x.hit"), "m").unwrap();
        // A project's headers beside a copied tag, in a directory of their own.
        std::fs::create_dir_all(dir.path().join("cache/sub")).unwrap();
        std::fs::write(dir.path().join("cache/sub/s.h"), "s").unwrap();
        crate::fs::cache_root::ensure(&dir.path().join("cache"));
        assert_eq!(
            files_under(dir.path(), 100, CacheRoots::Skip).unwrap(),
            ["a.h", "cache/CACHEDIR.TAG", "cache/sub/s.h", "cache/v.h"].map(PathBuf::from)
        );
        assert_eq!(
            files_under(dir.path(), 100, CacheRoots::Include).unwrap(),
            [
                "a.h",
                "cache/CACHEDIR.TAG",
                "cache/compilers/hits/x.hit",
                "cache/sub/s.h",
                "cache/v.h",
                "cache/v1/ab/entry.hjc"
            ]
            .map(PathBuf::from)
        );
    }
}
