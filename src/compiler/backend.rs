//! One interface over hipjit's four compilers: [`Backend`] is hipcc or nvcc (a process per
//! compile) or hipRTC or NVRTC (in process), each giving the JIT ([`crate::jit::Jit`]) the same
//! three things: its identity, the direct key of a compile ([`crate::cache::key`]) and a
//! [`CompileOutput`] (the code object or cubin, the command or options used, the warnings, and
//! the files the compiler read for the header manifest).
//!
//! # The in-process compilers' options
//! hipRTC gets clang's options as hipcc passes them: `--gpu-architecture=<target ID>`, the
//! optimisation level, the standard, `-mcode-object-version=N`, `-ffast-math`,
//! `-gline-tables-only`, the defines, then the extra flags; the include directories go as
//! [`RtcInput::include_dirs`]. One target per program: options with several target IDs are
//! refused ([`RtcError::Arch`]; hipcc compiles them into one bundle). NVRTC gets nvcc's:
//! `-arch=sm_NN`, the standard, hipjit's prelude force-included (handed in memory,
//! [`super::nvrtc::prelude_headers`]), `--use_fast_math`, `-lineinfo`, the defines, `-I` of the
//! CUDA toolkit's headers beside NVRTC (those a compile opens are in its header manifest:
//! [`NvRtc::compile`]), the extra flags. NVRTC has no
//! optimisation levels: `-O3` (the default) is what it does, any other level is refused.
//! Neither writes LLVM IR or assembly dumps: asking for them is refused by name.

use std::ffi::OsString;
use std::path::PathBuf;

use super::opened_files::OpenedFiles;
use std::sync::Arc;
use std::time::Duration;

use crate::compiler::request::{FromKeyRecord, KeyInputs, KeyRecord, TrackedHeader};
use crate::digest::{hex, sha256};
use parking_lot::Mutex;

use crate::compiler::hiprtc::HipRtc;
use crate::compiler::library_search::{self, LibrarySearch};
use crate::compiler::nvcc::{Nvcc, NvccError};
use crate::compiler::nvrtc::NvRtc;
use crate::compiler::rtc::{RtcError, RtcInput, RtcOutput};
use crate::compiler::worker::{self, WorkerConfig};
use crate::compiler::{
    CompileError, CompileOptions, CompileOutput, Compiler, CompilerConfig, CompilerError,
    CompilerIdentity, CompilerKind, OptLevel,
};
use crate::safe::runtime::Platform;

/// An in-process compiler's library: its file, known without loading it (a disk hit never
/// loads it: [`library_search`]), and the library loaded at the first compile, once, under a
/// lock (a load that fails is tried again at the next compile).
pub struct RtcLibrary<T> {
    path: PathBuf,
    /// The library file's `stat` when its identity was taken from the memo: the file loaded
    /// later must be that one.
    expected: Option<super::identity::FileStat>,
    loaded: Mutex<Option<Arc<T>>>,
}

impl<T> std::fmt::Debug for RtcLibrary<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RtcLibrary")
            .field("path", &self.path)
            .field("loaded", &self.is_loaded())
            .finish()
    }
}

impl<T> RtcLibrary<T> {
    /// The library in `path`, not loaded yet; its file is `stat`ed now, and the file loaded
    /// later must still be this one ([`RtcLibrary::get`]).
    pub fn unloaded(path: PathBuf) -> RtcLibrary<T> {
        let stat = super::identity::FileStat::read(&path);
        RtcLibrary::unloaded_as(path, stat)
    }

    /// [`RtcLibrary::unloaded`] with the file's `stat` as the caller just read it (a recall
    /// that checked it), so that it is not read again.
    pub fn unloaded_as(path: PathBuf, stat: Option<super::identity::FileStat>) -> RtcLibrary<T> {
        RtcLibrary {
            expected: stat,
            path,
            loaded: Mutex::new(None),
        }
    }

    /// `library`, already loaded from `path`.
    pub fn loaded(path: PathBuf, library: T) -> RtcLibrary<T> {
        RtcLibrary {
            path,
            expected: None,
            loaded: Mutex::new(Some(Arc::new(library))),
        }
    }

    /// The library's file.
    pub fn path(&self) -> &std::path::Path {
        &self.path
    }

    /// Whether it has been loaded into this process by this value.
    pub fn is_loaded(&self) -> bool {
        self.loaded.lock().is_some()
    }

    /// The library, loaded with `load` from [`RtcLibrary::path`] unless it was before;
    /// `compiler` (`hipRTC`, `NVRTC`) names it in errors.
    ///
    /// Errors: `load`'s ([`RtcError::Open`], [`RtcError::MissingSymbol`]);
    /// [`RtcError::Open`] when the file was replaced since its identity was read (what was
    /// loaded is not what the cache keys name: run again, which identifies it anew).
    pub fn get(
        &self,
        compiler: &'static str,
        load: impl FnOnce(&std::path::Path) -> Result<T, RtcError>,
    ) -> Result<Arc<T>, RtcError> {
        let mut slot = self.loaded.lock();
        if let Some(l) = &*slot {
            return Ok(l.clone());
        }
        let l = load(&self.path)?;
        // Checked after loading: a file renamed over before the load has another inode.
        // The stat-trust rule ([`super::identity::FileStat::proves_same_as`]).
        let replaced = self.expected.is_some_and(|e| {
            !super::identity::FileStat::read(&self.path).is_some_and(|n| e.proves_same_as(&n))
        });
        if replaced {
            return Err(RtcError::Open {
                compiler,
                path: self.path.clone(),
                from: "the remembered library search".into(),
                reason: "the file was replaced after its identity was read in this process; \
                         run again to identify the new library"
                    .into(),
            });
        }
        let l = Arc::new(l);
        *slot = Some(l.clone());
        Ok(l)
    }
}

/// hipRTC found, with its identity; loaded at its first compile.
#[derive(Clone, Debug)]
pub struct HipRtcBackend {
    /// The library ([`HipRtc`]).
    pub library: Arc<RtcLibrary<HipRtc>>,
    /// HIP's major version of it ([`crate::compiler::hiprtc::hip_major_of`]; 0 when its file
    /// name does not tell).
    pub major: u32,
    /// Its identity ([`crate::compiler::identity::identify_library`]).
    pub identity: CompilerIdentity,
    /// Compile in worker processes ([`crate::compiler::worker`]) rather than in this one.
    pub worker: Option<WorkerConfig>,
}

/// NVRTC found, with its identity and the CUDA headers beside it; loaded at its first compile.
#[derive(Clone, Debug)]
pub struct NvrtcBackend {
    /// The library ([`NvRtc`]).
    pub library: Arc<RtcLibrary<NvRtc>>,
    /// CUDA's major version of it (`nvrtcVersion`; 0 when it did not tell).
    pub major: u32,
    /// Its identity ([`crate::compiler::identity::identify_library`]): the library and its
    /// builtins; the toolkit's header directory beside it is the identity's header directory,
    /// its parent the installation root (the headers a compile opens are in the header
    /// manifest, relative to that root, checked by `stat` and hash on every lookup).
    pub identity: CompilerIdentity,
    /// The CUDA toolkit's header directory beside it ([`NvRtc::include_dir`], symlinks
    /// resolved), as found when the identity was made.
    pub cuda_include: Option<PathBuf>,
    /// CCCL's headers in that directory (`include/cccl`, CUDA 13), when it has them: handed to
    /// NVRTC after it, as nvcc's profile adds them (`-isystem`).
    pub cuda_cccl: Option<PathBuf>,
    /// Compile in worker processes ([`crate::compiler::worker`]) rather than in this one.
    pub worker: Option<WorkerConfig>,
}

/// A compiler ready to compile, behind one interface. Cheap to clone.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub enum Backend {
    /// `hipcc`, a process per compile: AMDGPU code objects ([`Compiler`]).
    Hipcc(Compiler),
    /// `nvcc`, a process per compile: cubins for HIP's NVIDIA platform ([`Nvcc`]), killed
    /// after the timeout.
    Nvcc(Nvcc, Duration),
    /// hipRTC, in process: AMDGPU code objects.
    HipRtc(HipRtcBackend),
    /// NVRTC, in process: cubins.
    Nvrtc(NvrtcBackend),
}

/// An in-process compiler's library as `search` found it before, from the memo in
/// `identity_dir` (else the per-user default) when nothing it depends on changed
/// ([`library_search::recall`]): the library (not loaded; the file loaded later must be the
/// one remembered), the major version, the identity.
fn recalled<T>(
    search: &LibrarySearch,
    identity_dir: Option<&std::path::Path>,
) -> Option<(Arc<RtcLibrary<T>>, u32, CompilerIdentity)> {
    let r = library_search::recall(search, identity_dir)?;
    Some((
        Arc::new(RtcLibrary::unloaded_as(
            r.location.library,
            Some(r.library_stat),
        )),
        r.location.major,
        r.identity,
    ))
}

/// The identity of the `kind` library `search` just found at `location`
/// ([`super::identity::identify_library`] over `files` and `header_dirs`), remembered with the
/// search in `identity_dir` (else the per-user default).
///
/// Errors: [`RtcError::Call`] naming the identity's file that could not be read.
fn identify_found(
    kind: CompilerKind,
    search: &LibrarySearch,
    location: &library_search::Location,
    files: impl FnOnce() -> Vec<PathBuf>,
    header_dirs: Vec<PathBuf>,
    identity_dir: Option<&std::path::Path>,
) -> Result<CompilerIdentity, RtcError> {
    let name = match kind {
        CompilerKind::Nvrtc => "NVRTC",
        _ => "hipRTC",
    };
    let identity = super::identity::identify_library(
        kind,
        &location.library,
        location.version.clone(),
        files,
        header_dirs,
        identity_dir,
    )
    .map_err(identity_error(name))?;
    library_search::remember(search, location, identity_dir);
    Ok(identity)
}

impl HipRtcBackend {
    /// hipRTC as the search beside `runtime_library` found it before, with its identity, from
    /// the memo in `identity_dir` (else the per-user default) when nothing it depends on
    /// changed ([`library_search::recall`]); nothing is loaded. `None` otherwise.
    pub fn recall(
        search: &LibrarySearch,
        identity_dir: Option<&std::path::Path>,
    ) -> Option<HipRtcBackend> {
        let (library, major, identity) = recalled(search, identity_dir)?;
        Some(HipRtcBackend {
            library,
            major,
            identity,
            worker: None,
        })
    }

    /// Finds hipRTC ([`HipRtc::open`], beside `runtime_library` when given) and reads its
    /// identity, remembered in `identity_dir` (else the per-user default). When the same
    /// search found the same unchanged library before ([`HipRtcBackend::recall`]) the library
    /// is not loaded: it is at its first compile ([`HipRtcBackend::loaded`]).
    ///
    /// Errors: the [`RtcError`] of opening it; [`RtcError::Call`] naming the identity's file
    /// that could not be read.
    pub fn open(
        runtime_library: Option<&std::path::Path>,
        identity_dir: Option<&std::path::Path>,
    ) -> Result<HipRtcBackend, RtcError> {
        let search = HipRtc::search(runtime_library);
        if let Some(b) = Self::recall(&search, identity_dir) {
            return Ok(b);
        }
        crate::fs::observe::unrecordable();
        let library = HipRtc::open(runtime_library)?;
        let location = Self::location(&library);
        let identity = identify_found(
            CompilerKind::HipRtc,
            &search,
            &location,
            || library.identity_files(),
            Vec::new(),
            identity_dir,
        )?;
        Ok(HipRtcBackend {
            library: Arc::new(RtcLibrary::loaded(location.library, library)),
            major: location.major,
            identity,
            worker: None,
        })
    }

    /// Where `library` is, its version text (the file's name, HIP's major version and
    /// `hiprtcVersion`) and HIP's major version, as the search memo remembers them
    /// ([`library_search`]).
    pub fn location(library: &HipRtc) -> library_search::Location {
        let name = library
            .path()
            .file_name()
            .map_or_else(String::new, |n| n.to_string_lossy().into_owned());
        let version = format!(
            "hipRTC {name} (HIP {}, hiprtcVersion {})\n",
            library
                .hip_major()
                .map_or_else(|| "?".to_owned(), |m| m.to_string()),
            library
                .version()
                .map_or_else(|| "?".to_owned(), |(a, b)| format!("{a}.{b}"))
        );
        library_search::Location {
            library: library.path().to_path_buf(),
            version,
            major: library.hip_major().unwrap_or(0),
        }
    }

    /// The library, loaded now ([`HipRtc::open_path`]) unless it was before.
    ///
    /// Errors: [`RtcError::Open`], [`RtcError::MissingSymbol`].
    pub fn loaded(&self) -> Result<Arc<HipRtc>, RtcError> {
        self.library.get("hipRTC", HipRtc::open_path)
    }

    /// The options handed to hipRTC for `options` (see the module documentation).
    ///
    /// Errors: [`RtcError::Arch`] for several targets, dumps asked for.
    pub fn options(&self, options: &CompileOptions) -> Result<Vec<String>, RtcError> {
        let refuse = |reason: String| RtcError::Arch {
            compiler: "hipRTC",
            arch: options.target_names().join(","),
            reason,
        };
        if options.targets.len() != 1 {
            return Err(refuse(
                "hipRTC compiles one target per program; compile each target alone, or use \
                 hipcc, which bundles several"
                    .into(),
            ));
        }
        if options.dump_llvm_ir || options.dump_isa {
            return Err(refuse(
                "hipRTC writes no LLVM IR or assembly dump; use hipcc for dump_llvm_ir/dump_isa"
                    .into(),
            ));
        }
        let mut o = vec![
            super::hiprtc::arch_option(&options.targets[0]),
            options.opt_level.flag().to_owned(),
            CompilerKind::HipRtc.std_flag(options.std, &self.identity),
        ];
        if let Some(v) = options.code_object_version {
            // hipRTC 5.x generates code in a comgr step with fixed options: code object
            // version 4, whatever it is asked (measured with HIP 5.2.3).
            if self.major == 5 && v != 4 {
                return Err(refuse(format!(
                    "hipRTC {}.x writes code object version 4 whatever \
                     -mcode-object-version asks (its code generation step takes no options); \
                     use hipcc for code object version {v}",
                    self.major
                )));
            }
            o.push(format!("-mcode-object-version={v}"));
        }
        if options.fast_math {
            o.push("-ffast-math".into());
        }
        if options.line_info {
            o.push("-gline-tables-only".into());
        }
        push_defines(&mut o, options);
        o.extend(options.extra_flags.iter().cloned());
        // hipRTC 5.x: hipcc's single optimisation pipeline, inlining and device libraries
        // ([`super::hiprtc::hip5_parity_options`]), where they can give hipcc's code.
        if let Some(dir) = self.hip5_parity_dir(options) {
            let libraries = super::hiprtc::hip5_device_libraries(&dir, &options.targets[0], &o);
            o.extend(super::hiprtc::hip5_parity_options(&libraries));
        }
        Ok(o)
    }

    /// The device-library directory when `options` are compiled with hipRTC 5.x's parity
    /// options ([`super::hiprtc::hip5_parity_options`]): HIP 5.x, `-O2` or `-O3`, and the
    /// installation's device libraries found beside the library.
    pub fn hip5_parity_dir(&self, options: &CompileOptions) -> Option<PathBuf> {
        if self.major != 5
            || !matches!(options.opt_level, super::OptLevel::O2 | super::OptLevel::O3)
        {
            return None;
        }
        super::hiprtc::hip5_device_library_dir(self.library.path())
    }
}

impl NvrtcBackend {
    /// NVRTC as the search beside `nvcc` found it before, with its identity, from the memo in
    /// `identity_dir` (else the per-user default) when nothing it depends on changed
    /// ([`library_search::recall`]); nothing is loaded. `None` otherwise.
    pub fn recall(
        search: &LibrarySearch,
        identity_dir: Option<&std::path::Path>,
    ) -> Option<NvrtcBackend> {
        let (library, major, identity) = recalled(search, identity_dir)?;
        if !toolkit_headers_unchanged(library.path(), &identity.header_dirs) {
            return None;
        }
        Some(NvrtcBackend {
            // As found when the identity was made (`cuda_fp16.h` there), and still the
            // directories beside the library (checked above).
            cuda_include: identity.header_dirs.first().cloned(),
            cuda_cccl: identity.header_dirs.get(1).cloned(),
            library,
            major,
            identity,
            worker: None,
        })
    }

    /// Finds NVRTC ([`NvRtc::open`], beside `nvcc` when given) and reads its identity (the
    /// library, its builtins and the CUDA headers beside it), remembered in `identity_dir`
    /// (else the per-user default). When the same search found the same unchanged library
    /// before ([`NvrtcBackend::recall`]) the library is not loaded: it is at its first compile
    /// ([`NvrtcBackend::loaded`]).
    ///
    /// Errors: the [`RtcError`] of opening it; [`RtcError::Call`] naming the identity's file
    /// that could not be read.
    pub fn open(
        nvcc: Option<&std::path::Path>,
        identity_dir: Option<&std::path::Path>,
    ) -> Result<NvrtcBackend, RtcError> {
        let search = NvRtc::search(nvcc);
        if let Some(b) = Self::recall(&search, identity_dir) {
            return Ok(b);
        }
        crate::fs::observe::unrecordable();
        let library = NvRtc::open(nvcc)?;
        // Symlinks resolved: the headers NVRTC opens are observed under this name.
        let cuda_include = library
            .include_dir()
            .and_then(|d| crate::fs::observe::canonicalize(d).ok());
        let cuda_cccl = cuda_include
            .as_ref()
            .map(|d| d.join("cccl"))
            .filter(|d| crate::fs::observe::is_dir(d));
        let location = Self::location(&library);
        let identity = identify_found(
            CompilerKind::Nvrtc,
            &search,
            &location,
            || library.identity_files(),
            cuda_include.iter().chain(&cuda_cccl).cloned().collect(),
            identity_dir,
        )?;
        Ok(NvrtcBackend {
            library: Arc::new(RtcLibrary::loaded(location.library, library)),
            major: location.major,
            identity,
            cuda_include,
            cuda_cccl,
            worker: None,
        })
    }

    /// Where `library` is, its version text (the file's name and `nvrtcVersion`) and CUDA's
    /// major version, as the search memo remembers them ([`library_search`]).
    pub fn location(library: &NvRtc) -> library_search::Location {
        let version = format!(
            "NVRTC {} (nvrtcVersion {})\n",
            library
                .path()
                .file_name()
                .map_or_else(String::new, |n| n.to_string_lossy().into_owned()),
            library
                .version()
                .map_or_else(|| "?".to_owned(), |(a, b)| format!("{a}.{b}"))
        );
        library_search::Location {
            library: library.path().to_path_buf(),
            version,
            major: library.version().map_or(0, |(m, _)| m.max(0) as u32),
        }
    }

    /// The library, loaded now ([`NvRtc::open_path`]) unless it was before.
    ///
    /// Errors: [`RtcError::Open`], [`RtcError::MissingSymbol`].
    pub fn loaded(&self) -> Result<Arc<NvRtc>, RtcError> {
        self.library.get("NVRTC", NvRtc::open_path)
    }

    /// The options handed to NVRTC for `source` and `options` (see the module documentation):
    /// hipjit's own before the caller's extra flags, the extra flags, hipjit's own after them
    /// (`NvrtcBackend::own_options`).
    ///
    /// Errors: [`RtcError::Arch`] for an optimisation level other than 3.
    pub fn options(&self, options: &CompileOptions) -> Result<Vec<String>, RtcError> {
        let (mut o, after) = self.own_options(options)?;
        o.extend(options.extra_flags.iter().cloned());
        o.extend(after);
        Ok(o)
    }

    /// hipjit's own options for NVRTC: those handed before the caller's extra flags (the
    /// target, the standard, the prelude, `--use_fast_math`, `-lineinfo`, the defines) and
    /// those handed after them (`-I` of the toolkit's headers and of CCCL's).
    ///
    /// Errors: as [`NvrtcBackend::options`].
    fn own_options(
        &self,
        options: &CompileOptions,
    ) -> Result<(Vec<String>, Vec<String>), RtcError> {
        let sm = options.sm_targets[0];
        if options.opt_level != OptLevel::O3 {
            return Err(RtcError::Arch {
                compiler: "NVRTC",
                arch: sm.to_string(),
                reason: format!(
                    "NVRTC has no optimisation levels ({} asked); use nvcc for it",
                    options.opt_level.flag()
                ),
            });
        }
        let mut o = super::nvrtc::prelude_options(
            sm,
            CompilerKind::Nvrtc.std_flag(options.std, &self.identity),
        );
        if options.fast_math {
            o.push("--use_fast_math".into());
        }
        if options.line_info {
            o.push("-lineinfo".into());
        }
        push_defines(&mut o, options);
        // The toolkit's headers, then CCCL's (`cuda/std`, CUB, Thrust), after the caller's
        // include directories and `-I` flags, as nvcc.profile puts them on nvcc's search path:
        // a user's header of a toolkit header's name (a newer CUB) is found first.
        let after = self
            .cuda_include
            .iter()
            .chain(&self.cuda_cccl)
            .map(|dir| format!("-I{}", dir.display()))
            .collect();
        Ok((o, after))
    }

    /// hipjit's prelude headers, handed to NVRTC in memory, made once per process
    /// ([`super::nvrtc::prelude_headers_with`]) from `cuda_include` as found when the identity
    /// was made.
    fn headers(&self) -> &'static [(String, Vec<u8>)] {
        super::nvrtc::prelude_headers_with(self.cuda_include.is_some())
    }

    /// [`NvrtcBackend::headers`] as hashed into the key, hashed once per process.
    fn builtin_headers(&self) -> &'static [TrackedHeader] {
        static MADE: [std::sync::OnceLock<Vec<TrackedHeader>>; 2] =
            [std::sync::OnceLock::new(), std::sync::OnceLock::new()];
        MADE[usize::from(self.cuda_include.is_some())].get_or_init(|| tracked(self.headers()))
    }
}

/// Whether the toolkit's headers beside NVRTC's `library` (its `../../include`, as
/// [`super::nvrtc::include_dir_of`] finds them) are still the directories its remembered
/// identity holds (`header_dirs`: the `include` with symbolic links resolved, then its `cccl`
/// when there was one): the same directory (device and inode) for the `include`, and `cccl`
/// there as it was (a directory, the same one, or still none). A link to `include` retargeted,
/// a `cccl` added or removed, or a relative library path read from another working directory
/// makes the identity be made again. Four `stat`s.
fn toolkit_headers_unchanged(library: &std::path::Path, header_dirs: &[PathBuf]) -> bool {
    let dir_id = |p: &std::path::Path| {
        crate::fs::observe::metadata(p)
            .ok()
            .filter(crate::fs::stat::Stat::is_dir)
            .map(|m| (m.fields.dev, m.fields.ino))
    };
    match (
        super::nvrtc::include_dir_beside(library),
        header_dirs.first(),
    ) {
        (Some(now), Some(include)) => {
            let (now, cccl_now) = (dir_id(&now), dir_id(&include.join("cccl")));
            now.is_some()
                && now == dir_id(include)
                && match header_dirs.get(1) {
                    Some(cccl) => cccl_now.is_some() && cccl_now == dir_id(cccl),
                    None => cccl_now.is_none(),
                }
        }
        // No headers were found beside it: still none to find.
        (_, None) => super::nvrtc::include_dir_of(library).is_none(),
        (None, Some(_)) => false,
    }
}

fn identity_error(compiler: &'static str) -> impl Fn(super::identity::IdentityError) -> RtcError {
    move |e| RtcError::Call {
        call: "identity",
        code: -1,
        message: format!("{compiler}: {e}"),
    }
}

fn push_defines(o: &mut Vec<String>, options: &CompileOptions) {
    for (name, value) in &options.defines {
        match value {
            Some(v) => o.push(format!("-D{name}={v}")),
            None => o.push(format!("-D{name}")),
        }
    }
}

/// The request record of an in-process compile ([`crate::compiler::request`]) with the
/// options handed to the library (the extra flags in their own field) followed by
/// `-I include/<index>` for each include directory, the SM or target IDs, the code object
/// version, the library's identity, no environment, and the in-memory headers by content.
/// With `toolkit_root` (NVRTC's), `-I` flags below it are keyed by their place below it
/// ([`installation_relative`]).
fn in_process_key<K: FromKeyRecord>(
    source: &[u8],
    options: &CompileOptions,
    own: Vec<String>,
    identity: &CompilerIdentity,
    builtin: &[TrackedHeader],
    extra: &[u8],
    toolkit_root: Option<&std::path::Path>,
) -> K {
    let line_tables = options.line_info || options.extra_flags.iter().any(|f| makes_line_tables(f));
    let mut flags: Vec<String> = own
        .into_iter()
        .map(|f| match toolkit_root {
            Some(root) => installation_relative(&f, root, line_tables),
            None => f,
        })
        .collect();
    // Keyed by position (their files are in the header manifest by index), unless line tables
    // name the headers read there by their absolute paths: then by the path handed to the
    // library (symbolic links resolved).
    for (i, dir) in options.include_dirs.iter().enumerate() {
        flags.push("-I".into());
        flags.push(if line_tables {
            crate::fs::observe::canonicalize(dir)
                .unwrap_or_else(|_| dir.clone())
                .to_string_lossy()
                .into_owned()
        } else {
            format!("include/{i}")
        });
    }
    let std = flags
        .iter()
        .find(|f| f.starts_with("-std="))
        .cloned()
        .unwrap_or_default();
    K::from_record(&KeyRecord {
        source,
        flags: &flags,
        std: &std,
        extra_flags: &options.extra_flags,
        targets: &options.target_names(),
        code_object_version: options.code_object_version.unwrap_or(0),
        compiler: identity,
        env: &[],
        builtin_headers: builtin,
        extra,
    })
}

/// An `-I` flag naming the compiler's installation root (the toolkit NVRTC came with) or a
/// directory below it, as hashed into the key: `-I\0installation/` and its path below the root
/// (a flag never holds a NUL byte, so the two forms cannot meet; the headers read there are
/// keyed by content, named below the root, in the header manifest). The same toolkit installed
/// under another prefix (another node of a cluster, another virtual environment) gives the
/// same key. Any other flag, and every flag when `line_info` asks for line tables (they name
/// the headers' absolute paths), is keyed as it is.
fn installation_relative(flag: &str, root: &std::path::Path, line_info: bool) -> String {
    let below = flag
        .strip_prefix("-I")
        .filter(|_| !line_info && !root.as_os_str().is_empty())
        .and_then(|dir| std::path::Path::new(dir).strip_prefix(root).ok());
    match below {
        Some(rel) => format!("-I\0installation/{}", rel.display()),
        None => flag.to_owned(),
    }
}

/// Whether extra flag `flag` makes line tables or debug information, which name the headers'
/// absolute paths: NVRTC's `-lineinfo`/`--generate-line-info`, `-G`/`--device-debug` (also in
/// their `=value` forms); hipRTC's (clang's) `-g` family but `-g0`.
fn makes_line_tables(flag: &str) -> bool {
    let name = flag.split_once('=').map_or(flag, |(n, _)| n);
    matches!(
        name,
        "-lineinfo" | "--generate-line-info" | "-G" | "--device-debug"
    ) || (flag.starts_with("-g") && flag != "-g0")
}

/// In-memory headers as hashed into an in-process compiler's key: name and sha256 of each.
fn tracked(headers: &[(String, Vec<u8>)]) -> Vec<TrackedHeader> {
    headers
        .iter()
        .map(|(name, body)| TrackedHeader {
            include: name.clone(),
            path: PathBuf::from(format!("<hipjit in-memory header>/{name}")),
            sha256: hex(&sha256(body)),
        })
        .collect()
}

/// A successful in-process compile as a [`CompileOutput`]: its "command" is the library and
/// the options handed to it.
fn rtc_output(
    library: &std::path::Path,
    handed: Vec<String>,
    out: RtcOutput,
    duration: Duration,
) -> CompileOutput {
    let mut command = vec![library.display().to_string()];
    command.extend(handed);
    CompileOutput {
        code_object: out.code,
        command,
        log: out.log,
        diagnostics: out.diagnostics,
        dependencies: out.dependencies,
        started: out.started,
        llvm_ir: None,
        isa: None,
        duration,
    }
}

/// The nvcc beside which NVRTC is looked for: `config`'s, else the one found
/// ([`Nvcc::find`]).
pub fn nvcc_for_nvrtc(config: &CompilerConfig) -> Option<PathBuf> {
    config.nvcc.clone().or_else(|| Nvcc::find(None).ok())
}

impl Backend {
    /// Finds and identifies the compiler of `kind` as `config` says: hipcc
    /// ([`Compiler::new`]), nvcc ([`Nvcc::discover`]; its identity remembered in
    /// [`CompilerConfig::identity_dir`] when set), hipRTC (beside `runtime`, the HIP runtime
    /// in use, when given) or NVRTC (beside the nvcc that would be used: [`nvcc_for_nvrtc`]),
    /// the in-process ones in [`CompilerConfig::rtc_worker`]'s workers when set. The one
    /// place a kind becomes a compiler.
    ///
    /// Errors: [`CompilerError`] naming why the compiler cannot be found or identified.
    pub fn open(
        kind: CompilerKind,
        config: &CompilerConfig,
        runtime: Option<&std::path::Path>,
    ) -> Result<Backend, CompilerError> {
        let dir = config.identity_dir.as_deref();
        let in_process = |e| CompilerError::InProcess(Box::new(e));
        match kind {
            CompilerKind::Hipcc => Ok(Backend::Hipcc(Compiler::new(config.clone())?)),
            CompilerKind::Nvcc => {
                let explicit = config.nvcc.as_deref();
                let nvcc = match dir {
                    Some(dir) => Nvcc::discover_cached(explicit, dir),
                    None => Nvcc::discover(explicit),
                }
                .map_err(|e| CompilerError::Nvcc(Box::new(e)))?;
                Ok(Backend::Nvcc(nvcc, config.timeout))
            }
            CompilerKind::HipRtc => HipRtcBackend::open(runtime, dir)
                .map(|b| {
                    Backend::HipRtc(HipRtcBackend {
                        worker: config.rtc_worker.clone(),
                        ..b
                    })
                })
                .map_err(in_process),
            CompilerKind::Nvrtc => NvrtcBackend::open(nvcc_for_nvrtc(config).as_deref(), dir)
                .map(|b| {
                    Backend::Nvrtc(NvrtcBackend {
                        worker: config.rtc_worker.clone(),
                        ..b
                    })
                })
                .map_err(in_process),
        }
    }

    /// The kind of compiler (hashed into every key, reported with every result).
    pub fn kind(&self) -> CompilerKind {
        self.identity().kind
    }

    /// The platform whose code it produces.
    pub fn platform(&self) -> Platform {
        self.kind().platform()
    }

    /// Its identity: kind, resolved path, version text, content fingerprint.
    pub fn identity(&self) -> &CompilerIdentity {
        match self {
            Backend::Hipcc(c) => c.identity(),
            Backend::Nvcc(n, _) => n.identity_ref(),
            Backend::HipRtc(b) => &b.identity,
            Backend::Nvrtc(b) => &b.identity,
        }
    }

    /// The environment the compiler runs with that decides its search paths (`CPATH` and
    /// the like, for [`crate::cache::manifest::extra_search_dirs`]): hipcc's, nvcc's header
    /// path variables as read now (its host compiler reads them:
    /// [`crate::compiler::nvcc::nvcc_run_env`]); empty for the in-process compilers.
    pub fn environment(&self) -> std::borrow::Cow<'_, [(String, OsString)]> {
        match self {
            Backend::Hipcc(c) => std::borrow::Cow::Borrowed(c.environment()),
            Backend::Nvcc(..) => std::borrow::Cow::Owned(
                ["CPATH", "CPLUS_INCLUDE_PATH", "C_INCLUDE_PATH"]
                    .iter()
                    .filter_map(|k| std::env::var_os(k).map(|v| (k.to_string(), v)))
                    .collect(),
            ),
            Backend::HipRtc(_) | Backend::Nvrtc(_) => std::borrow::Cow::Borrowed(&[]),
        }
    }

    /// The absolute search directories the compiler searches besides the options' include
    /// directories and extra flags, for the header manifest's directory records
    /// ([`crate::cache::manifest::record`]): NVRTC's `-I` of the CUDA toolkit's headers and of
    /// CCCL's; nvcc's (its toolkit's `include` and `include/cccl`, which its profile adds)
    /// and its host compiler's include search list; hipcc's include search list
    /// ([`crate::compiler::CompilerIdentity::system_include_dirs`]); none for hipRTC.
    pub fn own_search_dirs(&self) -> Vec<PathBuf> {
        match self {
            Backend::Nvrtc(b) => b.cuda_include.iter().chain(&b.cuda_cccl).cloned().collect(),
            Backend::Nvcc(n, _) => {
                let id = n.identity_ref();
                let toolkit = id
                    .header_dirs
                    .first()
                    .map(|root| vec![root.join("include"), root.join("include/cccl")])
                    .unwrap_or_default();
                toolkit
                    .into_iter()
                    .chain(id.system_include_dirs.iter().cloned())
                    .collect()
            }
            Backend::Hipcc(c) => c.identity().system_include_dirs.clone(),
            Backend::HipRtc(_) => Vec::new(),
        }
    }

    /// Whether it compiles in this process (hipRTC, NVRTC).
    pub fn in_process(&self) -> bool {
        self.kind().in_process()
    }

    /// How long one compile may run before it is killed; the in-process compilers cannot be
    /// stopped (unless they run in a worker: its timeout), so for them this only bounds how
    /// long another process's compile of the same key is waited for.
    pub fn timeout(&self) -> Duration {
        match self {
            Backend::Hipcc(c) => c.timeout(),
            Backend::Nvcc(_, t) => *t,
            Backend::HipRtc(HipRtcBackend {
                worker: Some(w), ..
            })
            | Backend::Nvrtc(NvrtcBackend {
                worker: Some(w), ..
            }) => w.timeout,
            Backend::HipRtc(_) | Backend::Nvrtc(_) => Duration::from_secs(300),
        }
    }

    /// Checks what this compiler cannot do with `options` beyond
    /// [`CompileOptions::validate`]: hipRTC compiles one target without dumps, NVRTC has no
    /// optimisation levels.
    ///
    /// Errors: [`CompileError::InProcess`] with [`RtcError::Arch`] naming the targets and why.
    pub fn check_options(&self, options: &CompileOptions) -> Result<(), CompileError> {
        match self {
            Backend::HipRtc(b) => b.options(options).map(drop).map_err(in_process),
            Backend::Nvrtc(b) => b.options(options).map(drop).map_err(in_process),
            Backend::Hipcc(_) | Backend::Nvcc(..) => Ok(()),
        }
    }

    /// The request record of compiling `source` with `options` (already effective: see
    /// [`crate::jit::Jit::effective_options`]) and the caller's signature `extra`: everything
    /// known before the compiler runs ([`crate::compiler::request`]), handed to `K`: the cache's
    /// direct key (`cache::key::CacheKey`), the record's fields (`cache::key::KeyFields`), or
    /// both from one encoding.
    pub fn request<K: FromKeyRecord>(
        &self,
        source: &[u8],
        options: &CompileOptions,
        extra: &[u8],
    ) -> K {
        match self {
            Backend::Hipcc(c) => KeyInputs {
                source,
                options,
                compiler: c.identity(),
                env: c.environment(),
                extra,
            }
            .record(),
            Backend::Nvcc(n, _) => n.request(source, options, extra),
            Backend::HipRtc(b) => {
                // Options hipRTC refuses fail in `compile`; the key of what would be handed.
                // hipRTC's extra flags come last.
                let mut own = b.options(options).unwrap_or_default();
                own.truncate(own.len().saturating_sub(options.extra_flags.len()));
                in_process_key(source, options, own, &b.identity, &[], extra, None)
            }
            Backend::Nvrtc(b) => {
                // Options NVRTC refuses fail in `compile`; the key of what would be handed, the
                // extra flags in their own field.
                let own = b
                    .own_options(options)
                    .map(|(mut before, after)| {
                        before.extend(after);
                        before
                    })
                    .unwrap_or_default();
                in_process_key(
                    source,
                    options,
                    own,
                    &b.identity,
                    b.builtin_headers(),
                    extra,
                    // The toolkit's headers NVRTC reads are in the header manifest, named
                    // below this root and keyed by content.
                    Some(&b.identity.root),
                )
            }
        }
    }

    /// Compiles `source` with `options`.
    ///
    /// Errors: hipcc's [`CompileError`] variants; nvcc's errors in [`CompileError::Nvcc`];
    /// hipRTC's and NVRTC's in [`CompileError::InProcess`] (a source holding a NUL byte among
    /// them, [`RtcError::NulByte`]: the libraries take C strings);
    /// [`CompileError::SpecialToolkitFile`] before NVRTC runs when the toolkit's header tree
    /// holds a FIFO, socket or device;
    /// [`CompileError::SpecialInclude`] before any compiler runs when an `#include` hipjit can
    /// follow names a FIFO, socket or device.
    pub fn compile(
        &self,
        source: &[u8],
        options: &CompileOptions,
    ) -> Result<CompileOutput, CompileError> {
        // A FIFO or device among the includes hipjit can follow would hang or never end the
        // compile (in process, hipRTC and NVRTC have no timeout); the options by the
        // in-process compilers' rules.
        let handed = super::refusal::handed_options(self, source, options)?;
        match self {
            Backend::Hipcc(c) => c.compile(source, options),
            Backend::Nvcc(n, timeout) => {
                n.compile_options(source, options, *timeout)
                    .map_err(|e| match e {
                        NvccError::Options(o) => CompileError::Options(o),
                        other => CompileError::Nvcc(Box::new(other)),
                    })
            }
            Backend::HipRtc(b) => {
                let started = std::time::Instant::now();
                // hipRTC 5.x's parity options need their header and the source's end.
                let (parity_source, parity_headers);
                let (source, headers) = if b.hip5_parity_dir(options).is_some() {
                    parity_source = [source, super::hiprtc::HIP5_SOURCE_END.as_bytes()].concat();
                    parity_headers = super::hiprtc::hip5_parity_headers();
                    (&parity_source[..], &parity_headers[..])
                } else {
                    (source, &[][..])
                };
                let input = RtcInput {
                    source,
                    name: options.source_file_name(),
                    headers,
                    include_dirs: &options.include_dirs,
                    options: &handed,
                };
                let out = match &b.worker {
                    Some(w) => worker::compile(w, CompilerKind::HipRtc, b.library.path(), &input),
                    None => b.loaded().and_then(|l| l.compile(&input)),
                }
                .map_err(in_process)?;
                Ok(rtc_output(b.library.path(), handed, out, started.elapsed()))
            }
            Backend::Nvrtc(b) => {
                let headers = b.headers();
                let started = std::time::Instant::now();
                let input = RtcInput {
                    source,
                    name: options.source_file_name(),
                    headers,
                    include_dirs: &options.include_dirs,
                    options: &handed,
                };
                // The toolkit headers it opens, watched from here so that a worker's reads
                // are seen as an in-process compile's are.
                let watch = b.cuda_include.as_deref().map(OpenedFiles::watch);
                if let Some((path, kind)) = watch
                    .as_ref()
                    .and_then(|w| w.as_ref().ok())
                    .and_then(OpenedFiles::special_file)
                {
                    return Err(CompileError::SpecialToolkitFile {
                        path: path.to_path_buf(),
                        kind,
                    });
                }
                let mut out = match &b.worker {
                    Some(w) => worker::compile(w, CompilerKind::Nvrtc, b.library.path(), &input),
                    None => b.loaded().and_then(|l| l.compile(&input)),
                }
                .map_err(in_process)?;
                if let (Some(dir), Some(watch)) = (&b.cuda_include, watch) {
                    out.dependencies.extend(
                        super::nvrtc::toolkit_headers_opened(dir, watch).map_err(in_process)?,
                    );
                }
                Ok(rtc_output(b.library.path(), handed, out, started.elapsed()))
            }
        }
    }
}

fn in_process(e: RtcError) -> CompileError {
    CompileError::InProcess(Box::new(e))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn toolkit_include_flags_are_keyed_below_the_root_unless_line_tables_name_them() {
        let root = std::path::Path::new("/opt/cuda-13");
        let rel = |f: &str, line_info: bool| installation_relative(f, root, line_info);
        assert_eq!(
            rel("-I/opt/cuda-13/include", false),
            "-I\0installation/include"
        );
        assert_eq!(
            rel("-I/opt/cuda-13/include/cccl", false),
            "-I\0installation/include/cccl"
        );
        // Line tables name the headers' absolute paths: the directory stays in the key.
        assert_eq!(
            rel("-I/opt/cuda-13/include", true),
            "-I/opt/cuda-13/include"
        );
        // Outside the root, a prefix that is not a path component, or another flag: as is.
        assert_eq!(rel("-I/home/u/include", false), "-I/home/u/include");
        assert_eq!(
            rel("-I/opt/cuda-13x/include", false),
            "-I/opt/cuda-13x/include"
        );
        assert_eq!(rel("-arch=sm_90", false), "-arch=sm_90");
        assert_eq!(
            installation_relative("-I/opt/cuda-13/include", std::path::Path::new(""), false),
            "-I/opt/cuda-13/include"
        );
        for f in [
            "-lineinfo",
            "--generate-line-info",
            "-G",
            "--device-debug",
            "-G=1",
        ] {
            assert!(makes_line_tables(f), "{f}");
        }
        for f in ["-g", "-gline-tables-only", "-gdwarf-5", "-ggdb"] {
            assert!(makes_line_tables(f), "{f}");
        }
        for f in [
            "-Gx",
            "-lineinfo2",
            "-DG",
            "--use_fast_math",
            "-g0",
            "--gpu-architecture=x",
        ] {
            assert!(!makes_line_tables(f), "{f}");
        }
    }

    #[test]
    fn an_unloaded_library_is_loaded_once_at_first_use() {
        let d = tempfile::tempdir().unwrap();
        let path = d.path().join("libnvrtc.so.13");
        std::fs::write(&path, b"library").unwrap();
        let lib: RtcLibrary<u32> = RtcLibrary::unloaded(path.clone());
        assert!(!lib.is_loaded());
        let mut loads = 0;
        let first = lib
            .get("NVRTC", |p| {
                loads += 1;
                assert_eq!(p, path);
                Ok(7)
            })
            .unwrap();
        assert_eq!((*first, loads), (7, 1));
        let again = lib.get("NVRTC", |_| panic!("loaded twice")).unwrap();
        assert_eq!(*again, 7);
        assert!(lib.is_loaded());
    }

    #[test]
    fn a_library_renamed_over_before_its_load_is_refused() {
        let d = tempfile::tempdir().unwrap();
        let path = d.path().join("libnvrtc.so.13");
        std::fs::write(&path, b"library").unwrap();
        let lib: RtcLibrary<u32> = RtcLibrary::unloaded(path.clone());
        let new = d.path().join("new");
        std::fs::write(&new, b"library").unwrap();
        std::fs::rename(&new, &path).unwrap();
        let e = lib.get("NVRTC", |_| Ok(7)).unwrap_err().to_string();
        assert!(e.contains("replaced"), "{e}");
        assert!(e.contains(&*path.to_string_lossy()), "{e}");
        assert!(!lib.is_loaded());
    }
}
