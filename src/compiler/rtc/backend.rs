//! The in-process compilers behind one backend: [`InProcess`] over a library ([`RtcLib`]:
//! hipRTC's [`HipRtc`], NVRTC's [`NvRtc`]), found (from the per-user memo of its search, or
//! loaded now), identified, loaded at its first compile, run in this process or in a worker
//! (`worker`), keyed ([`InProcess::request`]). What differs per library is the
//! trait's: where it is searched, its version text, the options it is handed, the headers
//! handed in memory, and what a compile adds around the library's call.
//!
//! # The in-process compilers' options
//! hipRTC gets clang's options as hipcc passes them: `--gpu-architecture=<target ID>`, the
//! optimisation level, the standard, `-mcode-object-version=N`, `-ffast-math`,
//! `-gline-tables-only`, the defines, then the extra flags; the include directories go as
//! [`RtcInput::include_dirs`]. One target per program: options with several target IDs are
//! refused ([`RtcError::Arch`]; hipcc compiles them into one bundle). NVRTC gets nvcc's:
//! `-arch=sm_NN`, the standard, hipjit's prelude force-included (handed in memory,
//! [`nvrtc::prelude_headers`]), `--use_fast_math`, `-lineinfo`, the defines, `-I` of the
//! CUDA toolkit's headers beside NVRTC (those a compile opens are in its header manifest:
//! [`NvRtc::compile`]), the extra flags. NVRTC has no
//! optimisation levels: `-O3` (the default) is what it does, any other level is refused.
//! Neither writes LLVM IR or assembly dumps: asking for them is refused by name.

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;

use super::hiprtc::{self, HipRtc};
use super::nvrtc::{self, NvRtc};
use super::worker::{self, WorkerConfig};
use super::{RtcError, RtcInput, RtcOutput};
use crate::compiler::library_search::{self, LibrarySearch};
use crate::compiler::opened_files::OpenedFiles;
use crate::compiler::request::{FromKeyRecord, KeyRecord, TrackedHeader};
use crate::compiler::{
    CompileError, CompileOptions, CompileOutput, CompilerIdentity, CompilerKind, OptLevel,
};
use crate::digest::{hex, sha256};

/// An in-process compiler's library: its file, known without loading it (a disk hit never
/// loads it: [`library_search`]), and the library loaded at the first compile, once, under a
/// lock (a load that fails is tried again at the next compile).
pub struct RtcLibrary<T> {
    path: PathBuf,
    /// The library file's `stat` when its identity was taken from the memo: the file loaded
    /// later must be that one.
    expected: Option<crate::compiler::identity::FileStat>,
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
        let stat = crate::compiler::identity::FileStat::read(&path);
        RtcLibrary::unloaded_as(path, stat)
    }

    /// [`RtcLibrary::unloaded`] with the file's `stat` as the caller just read it (a recall
    /// that checked it), so that it is not read again.
    pub fn unloaded_as(
        path: PathBuf,
        stat: Option<crate::compiler::identity::FileStat>,
    ) -> RtcLibrary<T> {
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
        // The stat-trust rule ([`crate::compiler::identity::FileStat::proves_same_as`]).
        let replaced = self.expected.is_some_and(|e| {
            !crate::compiler::identity::FileStat::read(&self.path)
                .is_some_and(|n| e.proves_same_as(&n))
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

/// What differs between the in-process compilers' libraries (hipRTC, NVRTC): the one trait a
/// new in-process compiler implements to get [`InProcess`] (finding, identity, loading, the
/// worker, the key) for it.
pub trait RtcLib: Sized + Send + Sync + 'static {
    /// Its kind.
    const KIND: CompilerKind;
    /// What is found with the library besides it (NVRTC: the CUDA headers beside it).
    type Found: Clone + fmt::Debug + Send + Sync;
    /// Its search, beside `beside` (hipRTC: the HIP runtime; NVRTC: nvcc) when given.
    fn search(beside: Option<&Path>) -> LibrarySearch;
    /// Opens it, searching beside `beside`.
    ///
    /// Errors: [`RtcError::Open`], [`RtcError::MissingSymbol`] (every candidate tried).
    fn open_beside(beside: Option<&Path>) -> Result<Self, RtcError>;
    /// Opens the library file `path`.
    ///
    /// Errors: [`RtcError::Open`], [`RtcError::MissingSymbol`].
    fn open_file(path: &Path) -> Result<Self, RtcError>;
    /// Where it is, its version text and its major and minor versions, as the search memo
    /// remembers them
    /// ([`library_search`]).
    fn location(&self) -> library_search::Location;
    /// The files its identity hashes.
    fn files(&self) -> Vec<PathBuf>;
    /// What is found with it, opened now.
    fn found(&self) -> Self::Found;
    /// What was found with the library at `library` when `identity` was made, if it still
    /// is; `None` makes the identity be made again.
    fn recalled(library: &Path, identity: &CompilerIdentity) -> Option<Self::Found>;
    /// The header directories its identity holds ([`crate::compiler::identity::identify_library`]).
    fn header_dirs(found: &Self::Found) -> Vec<PathBuf>;
    /// The options handed to it for `options`.
    ///
    /// Errors: [`RtcError::Arch`] for what it cannot do with them.
    fn options(b: &InProcess<Self>, options: &CompileOptions) -> Result<Vec<String>, RtcError>;
    /// The request record of compiling `source` with `options` and the caller's signature
    /// `extra` ([`InProcess::request`]).
    fn request<K: FromKeyRecord>(
        b: &InProcess<Self>,
        source: &[u8],
        options: &CompileOptions,
        extra: &[u8],
    ) -> K;
    /// Compiles `source` with `options` and the options `handed` through `run` (the library
    /// in this process, or a worker), adding what it hands besides the source and what it
    /// reports besides the library's output.
    ///
    /// Errors: `run`'s, in [`CompileError::InProcess`]; what it checks before running.
    fn compile(
        b: &InProcess<Self>,
        source: &[u8],
        options: &CompileOptions,
        handed: &[String],
        run: &dyn Fn(&RtcInput<'_>) -> Result<RtcOutput, RtcError>,
    ) -> Result<RtcOutput, CompileError>;
    /// The absolute directories it searches besides the options' (`crate::compiler::Backend::own_search_dirs`).
    fn search_dirs(b: &InProcess<Self>) -> Vec<PathBuf>;
    /// Compiles `input` with the library in this process.
    ///
    /// Errors: the library's [`RtcError`]s.
    fn compile_here(&self, input: &RtcInput<'_>) -> Result<RtcOutput, RtcError>;
}

/// An in-process compiler found, with its identity; its library loaded at its first compile.
pub struct InProcess<L: RtcLib> {
    /// The library.
    pub library: Arc<RtcLibrary<L>>,
    /// Its major version (HIP's for hipRTC: [`hiprtc::hip_major_of`]; CUDA's for NVRTC:
    /// `nvrtcVersion`; 0 when it does not tell).
    pub major: u32,
    /// Its minor version (HIP's for hipRTC: [`HipRtc::hip_version`]; CUDA's for NVRTC:
    /// `nvrtcVersion`; `None` when it does not tell). With `major`, what Auto's parity table
    /// is keyed by ([`InProcess::rtc_version`]).
    pub minor: Option<u32>,
    /// Its identity ([`crate::compiler::identity::identify_library`]): the library and its
    /// builtins (NVRTC: the toolkit's header directory beside it is the identity's header
    /// directory, its parent the installation root).
    pub identity: CompilerIdentity,
    /// What was found with it ([`RtcLib::Found`]).
    pub found: L::Found,
    /// Compile in worker processes (`worker`) rather than in this one.
    pub worker: Option<WorkerConfig>,
}

impl<L: RtcLib> Clone for InProcess<L> {
    fn clone(&self) -> Self {
        InProcess {
            library: self.library.clone(),
            major: self.major,
            minor: self.minor,
            identity: self.identity.clone(),
            found: self.found.clone(),
            worker: self.worker.clone(),
        }
    }
}

impl<L: RtcLib> fmt::Debug for InProcess<L> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("InProcess")
            .field("kind", &L::KIND)
            .field("library", &self.library)
            .field("major", &self.major)
            .field("minor", &self.minor)
            .field("identity", &self.identity)
            .field("found", &self.found)
            .field("worker", &self.worker)
            .finish()
    }
}

/// What an in-process compiler's library is handed for one compile ([`InProcess::program`]).
#[doc(hidden)]
#[derive(Clone, Debug)]
pub struct RtcProgram {
    /// The source bytes.
    pub source: Vec<u8>,
    /// The program's name (the source file's name).
    pub name: String,
    /// The in-memory headers: the name an `#include` uses, and the bytes.
    pub headers: Vec<(String, Vec<u8>)>,
    /// The options, in order.
    pub options: Vec<String>,
}

/// hipRTC found ([`InProcess`] over [`HipRtc`]).
pub type HipRtcBackend = InProcess<HipRtc>;
/// NVRTC found ([`InProcess`] over [`NvRtc`]), with the CUDA headers beside it.
pub type NvrtcBackend = InProcess<NvRtc>;

/// The CUDA toolkit's headers found beside NVRTC.
#[derive(Clone, Debug, Default)]
pub struct ToolkitHeaders {
    /// The toolkit's header directory beside it ([`NvRtc::include_dir`], symlinks resolved),
    /// as found when the identity was made.
    pub cuda_include: Option<PathBuf>,
    /// CCCL's headers in that directory (`include/cccl`, CUDA 13), when it has them: handed to
    /// NVRTC after it, as nvcc's profile adds them (`-isystem`).
    pub cuda_cccl: Option<PathBuf>,
}

/// An in-process compiler's library as `search` found it before, from the memo in
/// `identity_dir` (else the per-user default) when nothing it depends on changed
/// ([`library_search::recall`]): the library (not loaded; the file loaded later must be the
/// one remembered), the major and minor versions, the identity.
fn recalled<T>(
    search: &LibrarySearch,
    identity_dir: Option<&std::path::Path>,
) -> Option<(
    Arc<RtcLibrary<T>>,
    crate::compiler::selection::RtcVersion,
    CompilerIdentity,
)> {
    let r = library_search::recall(search, identity_dir)?;
    Some((
        Arc::new(RtcLibrary::unloaded_as(
            r.location.library,
            Some(r.library_stat),
        )),
        crate::compiler::selection::RtcVersion {
            major: r.location.major,
            minor: r.location.minor,
        },
        r.identity,
    ))
}

/// The identity of the `kind` library `search` just found at `location`
/// ([`crate::compiler::identity::identify_library`] over `files` and `header_dirs`), remembered with the
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
    let name = kind.name();
    let identity = crate::compiler::identity::identify_library(
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

impl<L: RtcLib> InProcess<L> {
    /// The library as `search` found it before, with its identity, from the memo in
    /// `identity_dir` (else the per-user default) when nothing it depends on changed
    /// ([`library_search::recall`]); nothing is loaded. `None` otherwise.
    pub fn recall(search: &LibrarySearch, identity_dir: Option<&Path>) -> Option<InProcess<L>> {
        let (library, version, identity) = recalled(search, identity_dir)?;
        let found = L::recalled(library.path(), &identity)?;
        Some(InProcess {
            library,
            major: version.major,
            minor: version.minor,
            identity,
            found,
            worker: None,
        })
    }

    /// Finds the library (beside `beside` when given) and reads its identity, remembered in
    /// `identity_dir` (else the per-user default). When the same search found the same
    /// unchanged library before ([`InProcess::recall`]) the library is not loaded: it is at
    /// its first compile ([`InProcess::loaded`]).
    ///
    /// Errors: the [`RtcError`] of opening it; [`RtcError::Call`] naming the identity's file
    /// that could not be read.
    pub fn open(
        beside: Option<&Path>,
        identity_dir: Option<&Path>,
    ) -> Result<InProcess<L>, RtcError> {
        let search = L::search(beside);
        if let Some(b) = Self::recall(&search, identity_dir) {
            return Ok(b);
        }
        crate::fs::observe::unrecordable();
        let library = L::open_beside(beside)?;
        let found = library.found();
        let location = library.location();
        let identity = identify_found(
            L::KIND,
            &search,
            &location,
            || library.files(),
            L::header_dirs(&found),
            identity_dir,
        )?;
        Ok(InProcess {
            library: Arc::new(RtcLibrary::loaded(location.library, library)),
            major: location.major,
            minor: location.minor,
            identity,
            found,
            worker: None,
        })
    }

    /// Its version as Auto's rule takes it ([`crate::compiler::selection::auto`]).
    pub fn rtc_version(&self) -> crate::compiler::selection::RtcVersion {
        crate::compiler::selection::RtcVersion {
            major: self.major,
            minor: self.minor,
        }
    }

    /// Where `library` is, its version text and its major and minor versions
    /// ([`RtcLib::location`]).
    pub fn location(library: &L) -> library_search::Location {
        library.location()
    }

    /// This compiler, in [`crate::compiler::CompilerConfig::rtc_worker`]'s workers when set.
    pub fn in_workers(self, config: &crate::compiler::CompilerConfig) -> InProcess<L> {
        InProcess {
            worker: config.rtc_worker.clone(),
            ..self
        }
    }

    /// The library, loaded now unless it was before.
    ///
    /// Errors: [`RtcError::Open`], [`RtcError::MissingSymbol`].
    pub fn loaded(&self) -> Result<Arc<L>, RtcError> {
        self.library.get(L::KIND.name(), L::open_file)
    }

    /// The options handed to the library for `options` ([`RtcLib::options`]).
    ///
    /// Errors: [`RtcError::Arch`] for what it cannot do with them.
    pub fn options(&self, options: &CompileOptions) -> Result<Vec<String>, RtcError> {
        L::options(self, options)
    }

    /// How long another process's compile of the same key is waited for: the worker's
    /// timeout, else 300 s (in process, a compile cannot be stopped).
    pub fn timeout(&self) -> Duration {
        self.worker
            .as_ref()
            .map_or(Duration::from_secs(300), |w| w.timeout)
    }

    /// The request record of compiling `source` with `options` and the caller's signature
    /// `extra` ([`crate::compiler::Backend::request`]).
    pub fn request<K: FromKeyRecord>(
        &self,
        source: &[u8],
        options: &CompileOptions,
        extra: &[u8],
    ) -> K {
        L::request(self, source, options, extra)
    }

    /// The absolute directories it searches besides the options' ([`RtcLib::search_dirs`]).
    pub fn search_dirs(&self) -> Vec<PathBuf> {
        L::search_dirs(self)
    }

    /// The program hipjit hands the library for `source` and `options`, for timing the
    /// library's own calls on it beside hipjit's (`benches/compilers.rs`,
    /// `examples/nvidia_compilers.rs`): the source as handed (hipRTC 5's parity end
    /// appended), the in-memory headers (NVRTC's prelude, hipRTC 5's parity header, the
    /// options' headers), and the options in the order the library gets them (the include
    /// directories as `-I` with symbolic links resolved: after the options for hipRTC, before
    /// them for NVRTC), without what only hipjit's bookkeeping adds (hipRTC's dependency
    /// list and include-stack notes). The program's name is the source file's name.
    ///
    /// Errors: those of [`InProcess::compile`] before the library is called (options it
    /// refuses, an include directory that is not one).
    #[doc(hidden)]
    pub fn program(
        &self,
        source: &[u8],
        options: &CompileOptions,
    ) -> Result<RtcProgram, CompileError> {
        let handed = self.options(options).map_err(in_process)?;
        let seen = std::cell::RefCell::new(None);
        let capture = |input: &RtcInput<'_>| {
            let includes = super::canonical_include_dirs(input.include_dirs)?;
            let includes: Vec<String> = super::include_options(&includes)
                .into_iter()
                .map(|o| o.to_string_lossy().into_owned())
                .collect();
            let options = match L::KIND {
                CompilerKind::Nvrtc => includes
                    .into_iter()
                    .chain(input.options.iter().cloned())
                    .collect(),
                _ => input.options.iter().cloned().chain(includes).collect(),
            };
            *seen.borrow_mut() = Some(RtcProgram {
                source: input.source.to_vec(),
                name: input.name.to_owned(),
                headers: input.headers.to_vec(),
                options,
            });
            Err(RtcError::Call {
                call: "program",
                code: 0,
                message: "only the program was asked for".into(),
            })
        };
        let out = L::compile(self, source, options, &handed, &capture);
        match seen.into_inner() {
            Some(p) => Ok(p),
            None => Err(out.err().unwrap_or_else(|| {
                in_process(RtcError::Call {
                    call: "program",
                    code: 0,
                    message: "the library was not called".into(),
                })
            })),
        }
    }

    /// Compiles `source` with `options` and the options `handed` (checked by
    /// `compiler::refusal::handed_options`), in this process or in a worker.
    ///
    /// Errors: the library's, or the worker's, in [`CompileError::InProcess`].
    pub fn compile(
        &self,
        source: &[u8],
        options: &CompileOptions,
        handed: Vec<String>,
    ) -> Result<CompileOutput, CompileError> {
        let started = std::time::Instant::now();
        let run = |input: &RtcInput<'_>| match &self.worker {
            Some(w) => worker::compile(w, L::KIND, self.library.path(), input),
            None => self.loaded().and_then(|l| l.compile_here(input)),
        };
        let out = L::compile(self, source, options, &handed, &run)?;
        Ok(rtc_output(
            self.library.path(),
            handed,
            out,
            started.elapsed(),
        ))
    }
}

impl RtcLib for HipRtc {
    const KIND: CompilerKind = CompilerKind::HipRtc;
    type Found = ();

    fn search(beside: Option<&Path>) -> LibrarySearch {
        HipRtc::search(beside)
    }

    fn open_beside(beside: Option<&Path>) -> Result<Self, RtcError> {
        HipRtc::open(beside)
    }

    fn open_file(path: &Path) -> Result<Self, RtcError> {
        HipRtc::open_path(path)
    }

    /// Where `library` is, its version text (the file's name, HIP's major version and
    /// `hiprtcVersion`) and HIP's major and minor versions ([`HipRtc::hip_version`]), as the
    /// search memo remembers them
    /// ([`library_search`]).
    fn location(&self) -> library_search::Location {
        let name = self
            .path()
            .file_name()
            .map_or_else(String::new, |n| n.to_string_lossy().into_owned());
        let version = format!(
            "hipRTC {name} (HIP {}, hiprtcVersion {})\n",
            self.hip_major()
                .map_or_else(|| "?".to_owned(), |m| m.to_string()),
            self.version()
                .map_or_else(|| "?".to_owned(), |(a, b)| format!("{a}.{b}"))
        );
        library_search::Location {
            library: self.path().to_path_buf(),
            version,
            major: self.hip_major().unwrap_or(0),
            minor: self.hip_version().and_then(|(_, minor)| minor),
        }
    }

    fn files(&self) -> Vec<PathBuf> {
        self.identity_files()
    }

    fn found(&self) {}

    fn recalled(_: &Path, _: &CompilerIdentity) -> Option<()> {
        Some(())
    }

    fn header_dirs(_: &()) -> Vec<PathBuf> {
        Vec::new()
    }

    fn options(b: &InProcess<Self>, options: &CompileOptions) -> Result<Vec<String>, RtcError> {
        b.hip_options(options)
    }

    fn request<K: FromKeyRecord>(
        b: &InProcess<Self>,
        source: &[u8],
        options: &CompileOptions,
        extra: &[u8],
    ) -> K {
        // Options hipRTC refuses fail in `compile`; the key of what would be handed.
        // hipRTC's extra flags come last.
        let mut own = b.hip_options(options).unwrap_or_default();
        own.truncate(own.len().saturating_sub(options.extra_flags.len()));
        in_process_key(source, options, own, &b.identity, &[], extra, None)
    }

    fn compile(
        b: &InProcess<Self>,
        source: &[u8],
        options: &CompileOptions,
        handed: &[String],
        run: &dyn Fn(&RtcInput<'_>) -> Result<RtcOutput, RtcError>,
    ) -> Result<RtcOutput, CompileError> {
        // hipRTC 5.x's parity options need their header and the source's end.
        let (parity_source, parity_headers);
        let (source, headers) = if b.hip5_parity_dir(options).is_some() {
            parity_source = [source, hiprtc::HIP5_SOURCE_END.as_bytes()].concat();
            parity_headers = hiprtc::hip5_parity_headers();
            (&parity_source[..], &parity_headers[..])
        } else {
            (source, &[][..])
        };
        let headers = with_options_headers(headers, options);
        run(&RtcInput {
            source,
            name: options.source_file_name(),
            headers: &headers,
            include_dirs: &options.include_dirs,
            options: handed,
        })
        .map_err(in_process)
    }

    fn search_dirs(_: &InProcess<Self>) -> Vec<PathBuf> {
        Vec::new()
    }

    fn compile_here(&self, input: &RtcInput<'_>) -> Result<RtcOutput, RtcError> {
        self.compile(input)
    }
}

impl InProcess<HipRtc> {
    /// The options handed to hipRTC for `options` (see the module documentation).
    ///
    /// Errors: [`RtcError::Arch`] for several targets, dumps asked for.
    fn hip_options(&self, options: &CompileOptions) -> Result<Vec<String>, RtcError> {
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
            hiprtc::arch_option(&options.targets[0]),
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
        // ([`hiprtc::hip5_parity_options`]), where they can give hipcc's code.
        if let Some(dir) = self.hip5_parity_dir(options) {
            let libraries = hiprtc::hip5_device_libraries(&dir, &options.targets[0], &o);
            o.extend(hiprtc::hip5_parity_options(&libraries));
        }
        Ok(o)
    }

    /// The device-library directory when `options` are compiled with hipRTC 5.x's parity
    /// options ([`hiprtc::hip5_parity_options`]): HIP 5.x, `-O2` or `-O3`, and the
    /// installation's device libraries found beside the library.
    pub fn hip5_parity_dir(&self, options: &CompileOptions) -> Option<PathBuf> {
        if self.major != 5 || !matches!(options.opt_level, OptLevel::O2 | OptLevel::O3) {
            return None;
        }
        hiprtc::hip5_device_library_dir(self.library.path())
    }
}

impl RtcLib for NvRtc {
    const KIND: CompilerKind = CompilerKind::Nvrtc;
    type Found = ToolkitHeaders;

    fn search(beside: Option<&Path>) -> LibrarySearch {
        NvRtc::search(beside)
    }

    fn open_beside(beside: Option<&Path>) -> Result<Self, RtcError> {
        NvRtc::open(beside)
    }

    fn open_file(path: &Path) -> Result<Self, RtcError> {
        NvRtc::open_path(path)
    }

    /// Where `library` is, its version text (the file's name and `nvrtcVersion`) and CUDA's
    /// major version, as the search memo remembers them ([`library_search`]).
    fn location(&self) -> library_search::Location {
        let version = format!(
            "NVRTC {} (nvrtcVersion {})\n",
            self.path()
                .file_name()
                .map_or_else(String::new, |n| n.to_string_lossy().into_owned()),
            self.version()
                .map_or_else(|| "?".to_owned(), |(a, b)| format!("{a}.{b}"))
        );
        library_search::Location {
            library: self.path().to_path_buf(),
            version,
            major: self.version().map_or(0, |(m, _)| m.max(0) as u32),
            minor: self.version().map(|(_, m)| m.max(0) as u32),
        }
    }

    fn files(&self) -> Vec<PathBuf> {
        self.identity_files()
    }

    fn found(&self) -> ToolkitHeaders {
        // Symlinks resolved: the headers NVRTC opens are observed under this name.
        let cuda_include = self
            .include_dir()
            .and_then(|d| crate::fs::observe::canonicalize(d).ok());
        let cuda_cccl = cuda_include
            .as_ref()
            .map(|d| d.join("cccl"))
            .filter(|d| crate::fs::observe::is_dir(d));
        ToolkitHeaders {
            cuda_include,
            cuda_cccl,
        }
    }

    fn recalled(library: &Path, identity: &CompilerIdentity) -> Option<ToolkitHeaders> {
        if !toolkit_headers_unchanged(library, &identity.header_dirs) {
            return None;
        }
        // As found when the identity was made (`cuda_fp16.h` there), and still the
        // directories beside the library (checked above).
        Some(ToolkitHeaders {
            cuda_include: identity.header_dirs.first().cloned(),
            cuda_cccl: identity.header_dirs.get(1).cloned(),
        })
    }

    fn header_dirs(found: &ToolkitHeaders) -> Vec<PathBuf> {
        found
            .cuda_include
            .iter()
            .chain(&found.cuda_cccl)
            .cloned()
            .collect()
    }

    fn options(b: &InProcess<Self>, options: &CompileOptions) -> Result<Vec<String>, RtcError> {
        b.nvrtc_options(options)
    }

    fn request<K: FromKeyRecord>(
        b: &InProcess<Self>,
        source: &[u8],
        options: &CompileOptions,
        extra: &[u8],
    ) -> K {
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

    fn compile(
        b: &InProcess<Self>,
        source: &[u8],
        options: &CompileOptions,
        handed: &[String],
        run: &dyn Fn(&RtcInput<'_>) -> Result<RtcOutput, RtcError>,
    ) -> Result<RtcOutput, CompileError> {
        let input = RtcInput {
            source,
            name: options.source_file_name(),
            headers: &with_options_headers(b.headers(), options),
            include_dirs: &options.include_dirs,
            options: handed,
        };
        // The toolkit headers it opens, watched from here so that a worker's reads
        // are seen as an in-process compile's are.
        let phase = crate::phases::start("compile: toolkit headers watched");
        let watch = b.found.cuda_include.as_deref().map(OpenedFiles::watch);
        phase.end();
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
        let mut out = run(&input).map_err(in_process)?;
        let _phase = crate::phases::start("compile: toolkit headers opened");
        if let (Some(dir), Some(watch)) = (&b.found.cuda_include, watch) {
            out.dependencies
                .extend(nvrtc::toolkit_headers_opened(dir, watch).map_err(in_process)?);
        }
        Ok(out)
    }

    fn search_dirs(b: &InProcess<Self>) -> Vec<PathBuf> {
        Self::header_dirs(&b.found)
    }

    fn compile_here(&self, input: &RtcInput<'_>) -> Result<RtcOutput, RtcError> {
        self.compile(input)
    }
}

impl InProcess<NvRtc> {
    /// The options handed to NVRTC for `source` and `options` (see the module documentation):
    /// hipjit's own before the caller's extra flags, the extra flags, hipjit's own after them
    /// (`InProcess::<NvRtc>::own_options`).
    ///
    /// Errors: [`RtcError::Arch`] for an optimisation level other than 3.
    fn nvrtc_options(&self, options: &CompileOptions) -> Result<Vec<String>, RtcError> {
        let (mut o, after) = self.own_options(options)?;
        o.extend(options.extra_flags.iter().cloned());
        o.extend(after);
        Ok(o)
    }

    /// hipjit's own options for NVRTC: those handed before the caller's extra flags (the
    /// target, the standard, the prelude, `--use_fast_math`, `-lineinfo`, the defines) and
    /// those handed after them (`-I` of the toolkit's headers and of CCCL's).
    ///
    /// Errors: as [`InProcess::<NvRtc>::options`].
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
        let mut o = nvrtc::prelude_options(
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
            .found
            .cuda_include
            .iter()
            .chain(&self.found.cuda_cccl)
            .map(|dir| format!("-I{}", dir.display()))
            .collect();
        Ok((o, after))
    }

    /// hipjit's prelude headers, handed to NVRTC in memory, made once per process
    /// ([`nvrtc::prelude_headers_with`]) from `cuda_include` as found when the identity
    /// was made.
    fn headers(&self) -> &'static [(String, Vec<u8>)] {
        nvrtc::prelude_headers_with(self.found.cuda_include.is_some())
    }

    /// [`InProcess::<NvRtc>::headers`] as hashed into the key, hashed once per process.
    fn builtin_headers(&self) -> &'static [TrackedHeader] {
        static MADE: [std::sync::OnceLock<Vec<TrackedHeader>>; 2] =
            [std::sync::OnceLock::new(), std::sync::OnceLock::new()];
        MADE[usize::from(self.found.cuda_include.is_some())].get_or_init(|| tracked(self.headers()))
    }
}

/// Whether the toolkit's headers beside NVRTC's `library` (its `../../include`, as
/// [`nvrtc::include_dir_of`] finds them) are still the directories its remembered
/// identity holds (`header_dirs`: the `include` with symbolic links resolved, then its `cccl`
/// when there was one): the same directory (device and inode) for the `include`, and `cccl`
/// there as it was (a directory, the same one, or still none). A link to `include` retargeted,
/// a `cccl` added or removed, or a relative library path read from another working directory
/// makes the identity be made again. Two `stat`s (four when the remembered paths differ from
/// those found now).
fn toolkit_headers_unchanged(library: &std::path::Path, header_dirs: &[PathBuf]) -> bool {
    let dir_id = |p: &std::path::Path| {
        crate::fs::observe::metadata(p)
            .ok()
            .filter(crate::fs::stat::Stat::is_dir)
            .map(|m| (m.fields.dev, m.fields.ino))
    };
    match (nvrtc::include_dir_beside(library), header_dirs.first()) {
        (Some(now_path), Some(include)) => {
            let cccl_path = include.join("cccl");
            let (now, cccl_now) = (dir_id(&now_path), dir_id(&cccl_path));
            // A path asked again only when it is another one (the `include` as remembered is
            // usually the very path found beside the library, its `cccl` the one below it).
            now.is_some()
                && (now_path == *include || now == dir_id(include))
                && match header_dirs.get(1) {
                    Some(cccl) => {
                        cccl_now.is_some() && (*cccl == cccl_path || cccl_now == dir_id(cccl))
                    }
                    None => cccl_now.is_none(),
                }
        }
        // No headers were found beside it: still none to find.
        (_, None) => nvrtc::include_dir_of(library).is_none(),
        (None, Some(_)) => false,
    }
}

fn identity_error(
    compiler: &'static str,
) -> impl Fn(crate::compiler::identity::IdentityError) -> RtcError {
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

/// hipjit's own in-memory headers (`own`: the NVRTC prelude, hipRTC 5's parity header), then
/// the caller's ([`CompileOptions::headers`]), as the library's `CreateProgram` takes them.
fn with_options_headers(
    own: &[(String, Vec<u8>)],
    options: &CompileOptions,
) -> Vec<(String, Vec<u8>)> {
    own.iter()
        .cloned()
        .chain(
            options
                .headers
                .iter()
                .map(|(name, contents)| (name.clone(), contents.clone().into_bytes())),
        )
        .collect()
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
    crate::compiler::request::keyed_options(options);
    K::from_record(&KeyRecord {
        source,
        source_name: options.source_file_name(),
        flags: &flags,
        std: &std,
        extra_flags: &options.extra_flags,
        targets: &options.target_names(),
        code_object_version: options.code_object_version.unwrap_or(0),
        compiler: identity,
        env: &[],
        builtin_headers: builtin,
        headers: &options.headers,
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

pub(crate) fn in_process(e: RtcError) -> CompileError {
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
