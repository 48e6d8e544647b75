//! The JIT, one for both of HIP's platforms: HIP C++ source in, cached AMDGPU code objects
//! (hipcc) or cubins (nvcc, HIP's NVIDIA platform) and their kernels out.
//!
//! [`Jit::load`] takes the platform and the target from the device (its target ID, or its SM
//! target); [`Jit::compile`] takes them from the options ([`CompileOptions::targets`] or
//! [`CompileOptions::sm_targets`]). The compiler of each platform is found on first use
//! (`compilers`), so a JIT on a machine with only nvcc never looks for hipcc. Both platforms
//! share everything below.
//!
//! [`Jit::compile`] looks in three places, in order:
//! 1. the in-process cache (`memory`): a cheap pre-key over source and options,
//!    confirmed by comparing both in full; no sha256 on this path;
//! 2. the disk cache (`disk`): the direct key (`key`: source,
//!    options, the compiler's identity and environment, the caller's extra signature) names
//!    a header manifest (`manifest`) of the files the last compile read; the
//!    files are checked as they are now (stat first, hashed when changed), and their hashes
//!    give the result key of the entry holding the code objects or cubin (`entry`);
//! 3. the remote tier shared by a cluster ([`crate::cache::remote`]; Redis: feature `redis`,
//!    HTTP: feature `http`), when configured, each of its levels in order: the direct key's
//!    manifests and the entry they name, checked like a disk entry, then written to the first
//!    disk root and to the levels before it (`jit::remote`);
//! 4. the compiler (`crate::compiler::Backend`); the result is published under the result
//!    key of the files the compiler's dependency output lists, and the manifest replaced,
//!    unless a file changed while it ran (then the result goes to the caller only); then
//!    stored remotely.
//!
//! However many threads ask for the same source and options at once, one compiles (single
//! flight); across processes sharing a cache root, a miss is compiled under the direct key's
//! lock ([`DiskCache::lock`]), and the processes that waited read the published entry; across
//! machines, under the remote tier's cluster lock (`lock`).
//! Headers are checked on disk lookups only: the in-process cache does not notice a header
//! edited while the process runs (call [`Jit::clear_memory`]).

#[doc(hidden)]
pub mod auto_memo;
mod background;
mod checks;
#[doc(hidden)]
pub mod compiled;
#[doc(hidden)]
pub mod compilers;
#[doc(hidden)]
pub mod entry;
pub mod explain;
mod failures;
mod freeze;
mod frozen;
#[doc(hidden)]
pub mod hit_memo;
mod kernels;
#[doc(hidden)]
pub mod record;
mod remote;
#[doc(hidden)]
pub mod stats;
mod tiers;

pub use background::{BackgroundError, BackgroundOptions, Pending, SwitchingKernel};
pub use checks::CheckFailed;
pub use compiled::{Artefact, Compiled, CompilerUsed, Origin};
#[doc(hidden)]
pub use compilers::Chosen;
#[doc(hidden)]
pub use entry::{CODE_OBJECT_ARTEFACT, CUBIN_ARTEFACT};
pub use failures::RETRY_FAILED_ENV;
pub use freeze::{FreezeError, Freezer};
pub use record::RecordLocation;
pub use remote::RemoteLocation;
pub use stats::{JitStats, TierStats};

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use parking_lot::Mutex;

use crate::cache::disk::{CacheError, DiskCache, EntryMeta};
use crate::cache::frozen::{FrozenBundle, FrozenError};
use crate::cache::key::{self, CacheKey};
use crate::cache::manifest;
use crate::cache::memory::MemoryCache;
use crate::cache::remote::RemoteConfigError;
use crate::cache::tier::{LockStep, Locks, Publish, Seen, Tier};
use crate::code_object::CodeObjectError;
use crate::compiler::diagnostics;
use crate::compiler::selection::CompilerChoice;
use crate::compiler::{
    CompileError, CompileOptions, CompilerConfig, CompilerError, CompilerIdentity, OptionsError,
};
use crate::safe::device::Device;
use crate::safe::error::LibraryError;
use crate::safe::library::Library;
use compiled::CompiledInner;
use compilers::Compilers;
use entry::{
    inner_from_entry, manifest_lookup, output_artefact, read_artefacts, usable_entry, ISA, LLVM_IR,
};

/// The variable naming a frozen bundle file served when [`JitOptions::frozen`] is `None`.
pub const FROZEN_ENV: &str = "HIPJIT_FROZEN";
/// The variable that, set (to anything but empty or `0`), makes every `Jit` strict
/// ([`JitOptions::strict`]).
pub const STRICT_ENV: &str = "HIPJIT_STRICT";

/// Where the disk cache lives.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum CacheLocation {
    /// `HIPJIT_CACHE_DIR`, else the default root (see `disk`).
    #[default]
    FromEnv,
    /// These roots: the first written, the rest read-only.
    Roots(Vec<PathBuf>),
    /// These roots (`None`: those of `HIPJIT_CACHE_DIR`, else the default root), all read
    /// only ([`DiskCache::open_read_only`]): nothing is created or written in them, a root
    /// that does not exist reads as empty, and compiles are kept in memory only. For tools
    /// that inspect the cache (`hipjit cache explain`).
    ReadOnly(Option<Vec<PathBuf>>),
    /// No disk cache (in-process only).
    Disabled,
}

/// Settings of a [`Jit`].
#[derive(Clone, Debug, Default)]
pub struct JitOptions {
    /// Which compiler compiles: `None` reads `HIPJIT_COMPILER` (`auto`, `hipcc`, `hiprtc`,
    /// `nvcc`, `nvrtc`), else [`CompilerChoice::Auto`] (`compilers` has the rule). Whatever
    /// the choice, [`Compiled::compiler`] says which compiler made a result and why.
    pub compiler: Option<CompilerChoice>,
    /// How to find and run the compilers (hipcc, nvcc; hipRTC and NVRTC are found as
    /// `hiprtc` and `nvrtc` describe), each found on
    /// first use.
    pub compiler_config: CompilerConfig,
    /// The disk cache.
    pub cache: CacheLocation,
    /// Size cap of the written cache root in bytes (least recently used entries go first;
    /// `disk` has the rule). `None`: `HIPJIT_CACHE_MAX_SIZE` (a size such as
    /// `20G`, or `unlimited`), else `DEFAULT_MAX_BYTES` (5 GiB).
    /// `Some(u64::MAX)`: no cap.
    pub max_cache_bytes: Option<u64>,
    /// A caller-supplied signature hashed into every key (a generator's version, say).
    pub extra_signature: Vec<u8>,
    /// The code object versions the runtime in use accepts, when known
    /// (`Runtime::code_object_versions`). When set, and the options do not pick a version,
    /// the highest version both the runtime and the compiler support is requested.
    pub runtime_code_object_versions: Option<Vec<u32>>,
    /// How long a compile waits for another process compiling the same key (the cache's
    /// per-key lock) before compiling without it, saying so in
    /// [`Compiled::cache_warnings`]. `None`: the compiler's timeout
    /// ([`CompilerConfig::timeout`]).
    pub lock_wait: Option<Duration>,
    /// The remote cache tier, looked up after the disk roots and written after each compile
    /// (a `redis[s]://` server needs the `redis` feature, an `http[s]://` one the `http`
    /// feature; without it, a configured server is an error and a level the variable names
    /// is left out with a warning). Several levels are several tiers, fastest first.
    pub remote_cache: RemoteLocation,
    /// Where to record the compile requests served (one JSON line per distinct request, for
    /// `hipjit cache warm`: `record`); by default the file `HIPJIT_RECORD` names, if any.
    /// A record that cannot be written never fails a compile. Needs feature `record`: without
    /// it nothing is written and the first compile warns, naming the feature.
    pub record: RecordLocation,
    /// Neither read nor write hit memos (`hit_memo`): every disk hit takes the long way
    /// (the compiler search and identity, the key, the header manifest). For measuring that
    /// way, or a per-user directory that must not be written. Default: `false` (memos on
    /// whenever there is a disk cache and a per-user directory).
    pub disable_hit_memo: bool,
    /// Run the compiler again for a request whose failure is remembered: a compile the
    /// compiler rejected (its diagnostics) is stored in the disk roots and the remote tier
    /// under everything its key covers (source, options, the headers it read, the compiler)
    /// and returned as the same error without running the compiler until one of those
    /// changes. Also set by `HIPJIT_RETRY_FAILED=1`. Timeouts, signals, cancellation and
    /// errors of the environment are never remembered. Default: `false`.
    pub retry_failed: bool,
    /// The pool of [`Jit::compile_in_background`] and [`Jit::kernel_in_background`]: its
    /// threads (default 2) and how many requests may wait.
    pub background: BackgroundOptions,
    /// A frozen bundle ([`crate::cache::FrozenBundle`]) served before any other tier and without a
    /// compiler (`jit::frozen`); `None`: the bundle file `HIPJIT_FROZEN` names, if any.
    pub frozen: Option<Arc<FrozenBundle>>,
    /// Strict serving: a request no tier answers, which would start a compiler, is
    /// [`JitError::Strict`] naming the request and why the frozen bundle did not serve it.
    /// For services that must not compile at serve time. Also set by `HIPJIT_STRICT=1`
    /// (any value but empty or `0`).
    pub strict: bool,
    /// Publish a compile's result to the disk cache (its entry and header manifest, each
    /// written to a temporary file, fsynced, linked into place, its directory fsynced) on a
    /// background thread of this `Jit` after the result is returned, rather than before: a
    /// miss returns once the compiler's output is read and keyed, without waiting for the
    /// disk (four fsyncs, 1 to 16 ms here: `docs/performance.md`). The key's compile lock is
    /// held until the entry is published, so another process asking for the same source waits
    /// for it and reads it. [`Jit::flush_cache_writes`] waits for these writes, and dropping
    /// the `Jit` does too; a process that exits without either may leave the entry unpublished
    /// (never torn: at most a temporary file, removed later as stale). [`Compiled::entry_path`]
    /// names the path the entry is published at; a write that fails is logged (a `tracing`
    /// warning), not in [`Compiled::cache_warnings`], which went with the result. The remote
    /// tier, when configured, is still written before the result is returned. Default:
    /// `false`.
    pub publish_in_background: bool,
}

/// Errors of the JIT.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum JitError {
    /// The compiler could not be found or identified.
    #[error(transparent)]
    Compiler(#[from] CompilerError),
    /// Compiling failed.
    #[error(transparent)]
    Compile(#[from] CompileError),
    /// The disk cache could not be opened or written.
    #[error(transparent)]
    Cache(#[from] CacheError),
    /// The remote cache's settings cannot be used.
    #[error(transparent)]
    RemoteConfig(#[from] RemoteConfigError),
    /// The compiler's output is not a usable code object.
    #[error("output of key {key} is not a usable code object for {target}: {source}")]
    CodeObject {
        /// The cache key.
        key: CacheKey,
        /// The target.
        target: String,
        /// The reader's error.
        source: Box<CodeObjectError>,
    },
    /// The compiler's output is not a usable cubin for the SM target.
    #[error("output of key {key} is not a usable cubin for {target}: {reason}")]
    Cubin {
        /// The cache key.
        key: CacheKey,
        /// The SM target.
        target: String,
        /// What is wrong with it.
        reason: String,
    },
    /// A metadata check failed.
    #[error(transparent)]
    Check(#[from] CheckFailed),
    /// Loading the code object or cubin on the device failed (after one recompile when the
    /// runtime called the image invalid).
    #[error(transparent)]
    Load(#[from] Box<LibraryError>),
    /// No artefact of the result runs on the device.
    #[error("none of the compiled targets ({targets}) runs on device {ordinal} ({device})")]
    NoCodeObjectForDevice {
        /// The compiled targets.
        targets: String,
        /// The device's target ID or SM target.
        device: String,
        /// The device ordinal.
        ordinal: i32,
    },
    /// A strict `Jit` ([`JitOptions::strict`]) met a request that would start a compiler.
    #[error("strict serving: {request} would start a compiler: {reason}")]
    Strict {
        /// The request: its source's name, targets, size, sha256 and first line.
        request: String,
        /// Why no tier served it (the frozen bundle's refusal, naming what differs).
        reason: String,
    },
    /// The frozen bundle `HIPJIT_FROZEN` names cannot be read.
    #[error(transparent)]
    Frozen(#[from] FrozenError),
    /// The device's target is unknown (neither a target ID nor an SM target) and the options
    /// name no target.
    #[error("device {ordinal} reports the architecture {arch_name:?}, which is neither a target ID nor an SM target hipjit knows; name the target in CompileOptions::targets or sm_targets")]
    UnknownDeviceTarget {
        /// The device ordinal.
        ordinal: i32,
        /// What the device reported (`gcnArchName`).
        arch_name: String,
    },
}

impl JitError {
    /// The compiler's diagnostics when the compiler rejected the source
    /// ([`CompileError::diagnostics`]), whichever compiler Auto or the choice ran; empty for
    /// every other error.
    ///
    /// ```no_run
    /// # use hipjit::jit::{Jit, JitOptions};
    /// # use hipjit::compiler::CompileOptions;
    /// # fn f(jit: &Jit, options: &CompileOptions) {
    /// if let Err(e) = jit.compile("__global__ void k() { nope; }", options) {
    ///     for d in e.diagnostics() {
    ///         eprintln!("{}", d.render());
    ///     }
    /// }
    /// # }
    /// ```
    pub fn diagnostics(&self) -> &[crate::compiler::Diagnostic] {
        match self {
            JitError::Compile(e) => e.diagnostics(),
            _ => &[],
        }
    }
}

/// A request made ready by [`Jit::prepare`]: the effective options, the compiler, the
/// direct key.
struct Prepared {
    options: CompileOptions,
    chosen: Chosen,
    direct: CacheKey,
}

/// A compiled source loaded on one device: the compile result and the loaded library (shared
/// by every caller asking for the same device and key).
#[derive(Clone, Debug)]
pub struct Loaded {
    /// The compile result.
    pub compiled: Compiled,
    /// The code object or cubin loaded on the device.
    pub library: Arc<Library>,
}

/// The loaded libraries of one cache key: (runtime library path, device ordinal, slot) for
/// each device it was loaded on. Keyed by the cache key alone so that a lookup borrows the
/// runtime's path instead of allocating a key (a memory hit's path).
type LoadedByKey = crate::cache::key::KeyMap<Vec<(PathBuf, i32, LoadedSlot)>>;

/// One loaded library per (runtime library path, device ordinal, cache key): the lock is held
/// while it is loaded, so that threads asking for the same device and key at once load it once
/// (single flight), while other devices and keys load in parallel.
type LoadedSlot = Arc<Mutex<Option<Arc<Library>>>>;

/// The JIT compiler with its caches, for AMD and NVIDIA GPUs alike. `Send + Sync`: share one
/// per process.
pub struct Jit {
    compilers: Compilers,
    disk: Option<DiskCache>,
    memory: MemoryCache<(Arc<CompiledInner>, Origin)>,
    extra: Vec<u8>,
    runtime_versions: Option<Vec<u32>>,
    lock_wait: Option<Duration>,
    /// The remote levels, fastest first (`jit::remote`).
    remote: Vec<crate::cache::remote::RemoteCache>,
    /// Copies of remote hits into the first disk root, written in the background.
    write_back: crate::cache::remote::write_back::WriteBack,
    loaded: Mutex<LoadedByKey>,
    /// Per-tier telemetry ([`Jit::stats`]).
    counters: stats::Counters,
    /// Kernels by (device, source, options, name): [`Jit::kernel`].
    kernels: kernels::KernelCache<CompileOptions>,
    /// Where compile requests are recorded ([`JitOptions::record`]).
    recorder: Option<Arc<record::Recorder>>,
    /// Where disk hits are remembered (`hit_memo`); `None` without a disk cache or a
    /// per-user directory.
    hit_memo: Option<PathBuf>,
    /// This JIT's configuration in bytes, for the names of its hit memos (made at the first
    /// request).
    hit_memo_config: std::sync::OnceLock<Vec<u8>>,
    /// [`JitOptions::retry_failed`], or `HIPJIT_RETRY_FAILED`.
    retry_failed: bool,
    /// The background compiles' pool (`background`).
    background: background::Pool,
    /// The frozen bundle ([`JitOptions::frozen`]).
    frozen: Option<Arc<FrozenBundle>>,
    /// [`JitOptions::strict`], or `HIPJIT_STRICT=1`.
    strict: bool,
    /// [`JitOptions::publish_in_background`].
    publish_in_background: bool,
}

impl std::fmt::Debug for Jit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Jit")
            .field("compilers", &self.compilers)
            .field("disk", &self.disk)
            .field("memory", &self.memory)
            .finish()
    }
}

impl Jit {
    /// Opens the disk cache. The compilers are found on first use (hipcc for an AMDGPU
    /// target, nvcc for an SM target), so their errors come from the first compile.
    ///
    /// Errors: [`JitError::Cache`] (a root that cannot be created, no root named and no
    /// `HOME`, a root refused by the
    /// ownership rules of `disk`, a malformed `HIPJIT_CACHE_MAX_SIZE`),
    /// [`JitError::RemoteConfig`] (a malformed
    /// `HIPJIT_REMOTE_CACHE` or signing key; a server configured in a build without the
    /// `redis` feature).
    pub fn new(options: JitOptions) -> Result<Jit, JitError> {
        let remote = remote::open_remote(options.remote_cache)?;
        let disk = match options.cache {
            CacheLocation::Disabled => None,
            CacheLocation::FromEnv => Some(DiskCache::from_env()?),
            CacheLocation::Roots(r) => Some(DiskCache::open(&r)?),
            CacheLocation::ReadOnly(r) => {
                let roots = match r {
                    Some(r) => r,
                    None => crate::cache::disk::roots_from_env(|k| std::env::var_os(k))
                        .ok_or(CacheError::NoRoot)?,
                };
                Some(DiskCache::open_read_only(&roots)?)
            }
        };
        let disk = match (disk, options.max_cache_bytes) {
            (Some(d), Some(max)) => Some(d.with_max_bytes(Some(max))),
            (Some(d), None) if d.is_writable() => Some(d.with_max_bytes_from_env()?),
            (d, _) => d,
        };
        let choice = compilers::resolve_choice(options.compiler)?;
        let frozen = match options.frozen {
            Some(b) => Some(b),
            None => match std::env::var_os(FROZEN_ENV).filter(|v| !v.is_empty()) {
                Some(path) => Some(Arc::new(FrozenBundle::open(std::path::Path::new(&path))?)),
                None => None,
            },
        };
        let strict = options.strict
            || std::env::var_os(STRICT_ENV).is_some_and(|v| !v.is_empty() && v != "0");
        let hit_memo = disk
            .as_ref()
            .filter(|_| !options.disable_hit_memo)
            .and_then(|_| {
                options
                    .compiler_config
                    .identity_dir
                    .clone()
                    .or_else(crate::compiler::identity::identity_dir)
            });
        if hit_memo.is_some() {
            // hip-sys's installation discovery tells what it looks at to the recording.
            hip_sys::discovery::set_observer(crate::fs::observe::from_hip_sys);
        }
        Ok(Jit {
            compilers: Compilers::new(options.compiler_config, choice),
            disk,
            memory: MemoryCache::new(),
            extra: options.extra_signature,
            runtime_versions: options.runtime_code_object_versions,
            lock_wait: options.lock_wait,
            remote,
            write_back: Default::default(),
            loaded: Mutex::new(Default::default()),
            counters: Default::default(),
            kernels: Default::default(),
            recorder: options.record.resolve().map(record::Recorder::shared),
            hit_memo,
            hit_memo_config: Default::default(),
            retry_failed: options.retry_failed || failures::retry_from_env(),
            background: background::Pool::new(options.background),
            frozen,
            strict,
            publish_in_background: options.publish_in_background,
        })
    }

    /// `options.validate()`, a refused extra flag named after the compiler that would run
    /// ([`CompileOptions::validate_for`]: hipRTC, not hipcc, when hipRTC compiles).
    fn validate(
        &self,
        source: &[u8],
        options: &CompileOptions,
        runtime: Option<&std::path::Path>,
    ) -> Result<(), JitError> {
        options.validate().map_err(|e| {
            let e = match e {
                OptionsError::RejectedFlag { .. } | OptionsError::DanglingFlag { .. } => {
                    // The compiler that would run; when it cannot be found, the one asked for.
                    let kind = match self.compilers.choose(source, options, runtime) {
                        Ok(c) => Some(c.backend.kind()),
                        Err(_) => self.compilers.choice().kind(),
                    };
                    match kind {
                        Some(k) => e.for_backend(k),
                        None => e,
                    }
                }
                e => e,
            };
            JitError::Compile(CompileError::Options(e))
        })
    }

    /// The compiler that compiles `source` with `options` (found now if it was not yet), and
    /// why that one (`compilers`).
    ///
    /// Errors: [`JitError::Compiler`] when it cannot be found or identified, or the choice
    /// does not fit the options' platform.
    #[doc(hidden)]
    pub fn compiler_for(
        &self,
        source: impl AsRef<[u8]>,
        options: &CompileOptions,
    ) -> Result<Chosen, JitError> {
        Ok(self.compilers.choose(source.as_ref(), options, None)?)
    }

    /// The compiler choice this JIT applies ([`JitOptions::compiler`], else `HIPJIT_COMPILER`,
    /// else Auto).
    pub fn compiler_choice(&self) -> CompilerChoice {
        self.compilers.choice()
    }

    /// The disk cache, unless disabled.
    pub fn disk_cache(&self) -> Option<&DiskCache> {
        self.disk.as_ref()
    }

    /// The remote tier, when one is configured: the first level where there are several
    /// ([`Jit::remote_levels`]).
    pub fn remote_cache(&self) -> Option<&crate::cache::remote::RemoteCache> {
        self.remote.first()
    }

    /// Every remote level, fastest first ([`RemoteLocation::Levels`]); empty when none is
    /// configured.
    pub fn remote_levels(&self) -> &[crate::cache::remote::RemoteCache] {
        &self.remote
    }

    /// Waits until every remote hit of this `Jit` has been written to the first disk root,
    /// and every result published in the background
    /// ([`JitOptions::publish_in_background`]) is (they are written in the background;
    /// dropping the `Jit` waits too).
    pub fn flush_cache_writes(&self) {
        self.write_back.flush();
    }

    /// Forgets every in-process result (the disk cache stays).
    pub fn clear_memory(&self) {
        self.memory.clear();
        self.kernels.clear();
    }

    /// The kernel `name` of `source` compiled with `options` and loaded on `device`
    /// ([`Jit::load`], then [`Library::kernel`]), cached per (device, source, options, name):
    /// a hit compares the source, options and name in full and clones the owned
    /// [`crate::safe::kernel::Kernel`], with no runtime call. On either platform.
    ///
    /// Errors: those of [`Jit::load`]; [`JitError::Load`] with
    /// [`LibraryError::KernelNotFound`] naming the kernels there are.
    pub fn kernel(
        &self,
        device: &Device,
        source: impl AsRef<[u8]>,
        name: &str,
        options: &CompileOptions,
    ) -> Result<crate::safe::kernel::Kernel, JitError> {
        let source = source.as_ref();
        if let Some(k) = self.kernels.get(device, source, |o| o == options, name) {
            return Ok(k);
        }
        let kernel = self
            .load(device, source, options)?
            .library
            .kernel(name)
            .map_err(|e| JitError::from(Box::new(e)))?;
        self.kernels
            .insert(device, source, options.clone(), name, &kernel);
        Ok(kernel)
    }

    /// The options as compiled: for AMDGPU targets, [`CompileOptions::code_object_version`]
    /// filled from the runtime's accepted versions when they are known and the options leave
    /// it open (which asks hipcc's identity, finding it if need be).
    ///
    /// Errors: [`JitError::Compiler`] when that needs hipcc and it cannot be found.
    pub fn effective_options(&self, options: &CompileOptions) -> Result<CompileOptions, JitError> {
        self.effective_options_with(b"", options, self.runtime_versions.as_deref(), None)
    }

    fn effective_options_with(
        &self,
        source: &[u8],
        options: &CompileOptions,
        runtime_versions: Option<&[u32]>,
        runtime: Option<&std::path::Path>,
    ) -> Result<CompileOptions, JitError> {
        let mut o = options.clone();
        if o.code_object_version.is_none() && o.sm_targets.is_empty() {
            if let Some(accepted) = runtime_versions {
                let chosen = self.compilers.choose(source, &o, runtime)?;
                let supported = compiler_code_object_versions(chosen.backend.identity());
                o.code_object_version = accepted
                    .iter()
                    .copied()
                    .filter(|v| supported.contains(v))
                    .max();
            }
        }
        Ok(o)
    }

    /// The result key `source` (its bytes) and `options` have with the files on disk as they
    /// are now, when the disk cache holds a header manifest for them (a compile of them was
    /// published); `None` otherwise (no disk cache, or never compiled: the files the compiler
    /// would read are only known from a compile).
    ///
    /// Errors: [`JitError::Compile`] with invalid options, [`JitError::Compiler`].
    pub fn key(
        &self,
        source: impl AsRef<[u8]>,
        options: &CompileOptions,
    ) -> Result<Option<CacheKey>, JitError> {
        let Prepared {
            options: o,
            chosen,
            direct,
        } = self.prepare(source.as_ref(), options, None)?;
        Ok(self
            .disk
            .as_ref()
            .and_then(|d| manifest_lookup(d, &direct, &o, &chosen.backend.identity().root))
            .map(|(_, k)| k))
    }

    /// The direct key of `source` (its bytes) and `options`: everything known before the
    /// compiler runs (source, options, compiler identity and environment, signature), which
    /// names the header manifest; two sources or option sets with different direct keys never
    /// share a result (`key`). Computed without touching the disk.
    ///
    /// Errors: [`JitError::Compile`] with invalid options, [`JitError::Compiler`].
    pub fn source_key(
        &self,
        source: impl AsRef<[u8]>,
        options: &CompileOptions,
    ) -> Result<CacheKey, JitError> {
        Ok(self.prepare(source.as_ref(), options, None)?.direct)
    }

    /// What every request starts with: the effective options
    /// ([`Jit::effective_options`], with the runtime at `runtime` when loading), checked
    /// ([`Jit::validate`] and [`Backend::check_options`](crate::compiler::Backend::check_options)),
    /// the compiler chosen for them, and the direct key.
    ///
    /// Errors: [`JitError::Compile`] with invalid options, [`JitError::Compiler`].
    fn prepare(
        &self,
        source: &[u8],
        options: &CompileOptions,
        runtime: Option<&std::path::Path>,
    ) -> Result<Prepared, JitError> {
        let phase = crate::phases::start("options and compiler (search, identity)");
        let (o, chosen) = self.checked(source, options, runtime)?;
        phase.end();
        let phase = crate::phases::start("direct key");
        let direct: CacheKey = chosen.backend.request(source, &o, &self.extra);
        phase.end();
        Ok(Prepared {
            options: o,
            chosen,
            direct,
        })
    }

    /// [`Jit::prepare`] but for the key: the effective options, checked, and the compiler.
    fn checked(
        &self,
        source: &[u8],
        options: &CompileOptions,
        runtime: Option<&std::path::Path>,
    ) -> Result<(CompileOptions, Chosen), JitError> {
        let o = self.effective_options_with(
            source,
            options,
            self.runtime_versions.as_deref(),
            runtime,
        )?;
        self.validate(source, &o, runtime)?;
        let chosen = self.compilers.choose(source, &o, runtime)?;
        chosen.backend.check_options(&o)?;
        Ok((o, chosen))
    }

    /// Compiles `source` for the targets of `options` (AMDGPU target IDs, or an SM target), or
    /// returns the cached result. The source is bytes (`&str`, `String`, `&[u8]`, `Vec<u8>`),
    /// in any encoding the compiler accepts, keyed by those bytes.
    ///
    /// Errors: [`JitError::Compiler`] (the platform's compiler not found),
    /// [`JitError::Compile`] (bad options, compiler failure, unsupported target...),
    /// [`JitError::CodeObject`] / [`JitError::Cubin`] (the compiler's output unreadable; a
    /// cached entry whose output does not read is a bad entry, compiled again),
    /// [`JitError::Check`] (a requested metadata check failed). A disk cache that cannot be
    /// written only logs a warning (and says so in [`Compiled::cache_warnings`]).
    pub fn compile(
        &self,
        source: impl AsRef<[u8]>,
        options: &CompileOptions,
    ) -> Result<Compiled, JitError> {
        self.compile_impl(source.as_ref(), options, false, None)
    }

    /// The in-process result for `source` and `options`, as [`Jit::compile`] returns a memory
    /// hit, when there is one; `None` otherwise: never compiles, reads no disk, waits for no
    /// compile under way. For callers that compile elsewhere on a miss (hipjit's Python module
    /// runs a miss on a worker thread that Ctrl-C can cancel, and a hit without one).
    ///
    /// Errors: [`JitError::Check`] when a requested metadata check fails.
    pub fn memory_hit(
        &self,
        source: impl AsRef<[u8]>,
        options: &CompileOptions,
    ) -> Option<Result<Compiled, JitError>> {
        let started = Instant::now();
        let (inner, _) = self.memory.get(source.as_ref(), options)?;
        self.counters.record(Origin::Memory, started.elapsed());
        if options.checks != Default::default() {
            if let Err(e) = checks::run_checks(&inner, options) {
                return Some(Err(e.into()));
            }
        }
        Some(Ok(Compiled {
            inner,
            origin: Origin::Memory,
            elapsed: started.elapsed(),
        }))
    }

    /// Whether [`Jit::memory_hit`] would find a result for `source` and `options` (counted
    /// nowhere: a probe, not a request).
    pub fn is_in_memory(&self, source: impl AsRef<[u8]>, options: &CompileOptions) -> bool {
        self.memory.get(source.as_ref(), options).is_some()
    }

    fn compile_impl(
        &self,
        source: &[u8],
        options: &CompileOptions,
        bypass_disk: bool,
        runtime: Option<&std::path::Path>,
    ) -> Result<Compiled, JitError> {
        let started = Instant::now();
        let looked_up = self.memory.get_or_try_insert(source, options, || {
            let mut served = self.compile_uncached(source, options, bypass_disk, runtime, true)?;
            let _phase = crate::phases::start("request record");
            if let Some(w) = self.record(source, options, runtime) {
                // Fresh from compile_uncached: nothing else holds it yet.
                if let Some(inner) = Arc::get_mut(&mut served.0) {
                    inner.cache_warnings.push(w);
                }
            }
            Ok(served)
        });
        let (inner, hit) = match looked_up {
            Ok(r) => r,
            Err(e) => {
                self.counters.record_failure();
                return Err(e);
            }
        };
        let origin = if hit { Origin::Memory } else { inner.1 };
        // One clock read for both (a memory hit is a few hundred nanoseconds; each read is
        // tens of them).
        let mut elapsed = started.elapsed();
        self.counters.record(origin, elapsed);
        if options.checks != Default::default() {
            checks::run_checks(&inner.0, options)?;
            elapsed = started.elapsed();
        }
        Ok(Compiled {
            inner: inner.0,
            origin,
            elapsed,
        })
    }

    /// Appends the record of a request just served (`record`) when recording; returns the
    /// warning for the caller when the record file cannot be written (the first time).
    fn record(
        &self,
        source: &[u8],
        options: &CompileOptions,
        runtime: Option<&std::path::Path>,
    ) -> Option<String> {
        let recorder = self.recorder.as_ref()?;
        let o = self
            .effective_options_with(source, options, self.runtime_versions.as_deref(), runtime)
            .ok()?;
        let chosen = self.compilers.choose(source, &o, runtime).ok()?;
        let direct: CacheKey = chosen.backend.request(source, &o, &self.extra);
        if recorder.seen(&direct) {
            return None;
        }
        let line = record::RecordedRequest::new(
            source,
            &o,
            self.compilers.choice(),
            Some(chosen.backend.identity().kind.as_str()),
            &self.extra,
            &direct,
        );
        recorder.append(direct, &line)
    }

    /// Forgets `compiled` (compiled from `source` and `options`) in memory and removes its
    /// entry from the written disk root, so the next [`Jit::compile`] compiles again. For a
    /// code object or cubin the runtime rejected as an invalid image.
    ///
    /// Errors: [`JitError::Cache`] when the entry file cannot be removed.
    pub fn evict(
        &self,
        source: impl AsRef<[u8]>,
        options: &CompileOptions,
        compiled: &Compiled,
    ) -> Result<(), JitError> {
        self.memory.remove(source.as_ref(), options);
        // An entry published in the background is in place before it is removed.
        self.write_back.flush();
        if let (Some(disk), Some(path)) = (&self.disk, compiled.entry_path()) {
            if disk.is_writable() && path.starts_with(&disk.roots()[0].path) {
                match std::fs::remove_file(path) {
                    Ok(()) => {}
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                    Err(source) => {
                        return Err(CacheError::Io {
                            path: path.clone(),
                            source,
                        }
                        .into())
                    }
                }
            }
        }
        Ok(())
    }

    /// Compiles `source` for `device` (or takes it from a cache) and loads it there; the
    /// loaded library is cached per (runtime, device, key), so a second call returns the same
    /// [`Library`]. With no targets in `options` the device's is used: its target ID on AMD,
    /// its SM target on HIP's NVIDIA platform (then compiled by nvcc to a cubin). With no code
    /// object version in `options` (nor [`JitOptions::runtime_code_object_versions`]) the
    /// compiler's default for the target is compiled, under the key a host without this
    /// runtime computes (a build host baking a cache shares it); only when the device's
    /// runtime cannot load that version is the source compiled again with the highest version
    /// both the runtime and the compiler support. When the runtime rejects the image as invalid (`hipErrorInvalidImage`), the
    /// cached result is evicted (memory and written disk root) and the source is compiled and
    /// loaded once more.
    ///
    /// Errors: those of [`Jit::compile`]; [`JitError::UnknownDeviceTarget`];
    /// [`JitError::NoCodeObjectForDevice`]; [`JitError::Load`] from [`Library::load`]
    /// (`hipModuleLoadData` / `hipLibraryLoadData`) or [`Library::load_cubin`]
    /// (`cuLibraryLoadData` / `cuModuleLoadData`).
    pub fn load(
        &self,
        device: &Device,
        source: impl AsRef<[u8]>,
        options: &CompileOptions,
    ) -> Result<Loaded, JitError> {
        self.load_with(device, source, options, Artefact::load)
    }

    /// [`Jit::load`] with the loading step supplied by the caller (a wrapper that logs or
    /// injects failures); `load` gets the device and the artefact chosen for it.
    ///
    /// Errors: as [`Jit::load`], with `load`'s errors in [`JitError::Load`].
    pub fn load_with<L>(
        &self,
        device: &Device,
        source: impl AsRef<[u8]>,
        options: &CompileOptions,
        load: L,
    ) -> Result<Loaded, JitError>
    where
        L: Fn(&Artefact, &Device) -> Result<Library, LibraryError>,
    {
        let source = source.as_ref();
        // Borrowed unless the device's target must be added (no copy on a hit that names one).
        let mut o = std::borrow::Cow::Borrowed(options);
        if o.targets.is_empty() && o.sm_targets.is_empty() {
            if let Some(t) = device.target_id() {
                o.to_mut().targets = vec![t.clone()];
            } else if let Some(sm) = device.sm_target() {
                o.to_mut().sm_targets = vec![sm];
            } else {
                return Err(JitError::UnknownDeviceTarget {
                    ordinal: device.ordinal(),
                    arch_name: device.arch_name().to_string(),
                });
            }
        }
        // The code object version stays what the options and the compiler make of the target,
        // so that the key is the one a host without this runtime computes (a compile-only build
        // host); only a code object this runtime cannot load is compiled again, with the
        // highest version both accept.
        let accepted = device.runtime().code_object_versions();
        let runtime = device.runtime().path();
        let mut bypass_disk = false;
        loop {
            let compiled = self.compile_impl(source, &o, bypass_disk, Some(runtime))?;
            let slot = self.loaded_slot(runtime, device.ordinal(), compiled.key());
            let mut slot = slot.lock();
            if let Some(lib) = &*slot {
                return Ok(Loaded {
                    compiled,
                    library: Arc::clone(lib),
                });
            }
            let device_known = device.target_id().is_some() || device.sm_target().is_some();
            let artefact = match compiled.artefact_for(device) {
                Some(a) => a.clone(),
                // A device whose target is unknown: let the loader report the mismatch.
                None if !device_known => compiled.artefacts()[0].clone(),
                None => {
                    return Err(JitError::NoCodeObjectForDevice {
                        targets: o.target_names().join(", "),
                        device: device
                            .target_id()
                            .map(|t| t.to_string())
                            .or_else(|| device.sm_target().map(|t| t.to_string()))
                            .unwrap_or_else(|| device.arch_name().to_string()),
                        ordinal: device.ordinal(),
                    })
                }
            };
            if let (Artefact::CodeObject(co), Some(accepted)) = (&artefact, accepted) {
                if o.code_object_version.is_none() && !accepted.contains(&co.code_object_version())
                {
                    let retry = self.effective_options_with(
                        source,
                        &o,
                        Some(accepted),
                        Some(device.runtime().path()),
                    )?;
                    if retry.code_object_version.is_some() {
                        drop(slot);
                        tracing::debug!(key = %compiled.key(), version = co.code_object_version(),
                            "the runtime does not load this code object version; compiling \
                             for one it does");
                        o = std::borrow::Cow::Owned(retry);
                        continue;
                    }
                }
            }
            let phase = crate::phases::start("loading on the device");
            let loaded = load(&artefact, device);
            phase.end();
            match loaded {
                Ok(lib) => {
                    let lib = Arc::new(lib);
                    *slot = Some(Arc::clone(&lib));
                    return Ok(Loaded {
                        compiled,
                        library: lib,
                    });
                }
                Err(LibraryError::Hip(e)) if e.is_invalid_image() && !bypass_disk => {
                    // Released before the recompile: the retry takes the slot again.
                    drop(slot);
                    tracing::warn!(key = %compiled.key(), error = %e,
                        "the runtime rejected a cached code object; recompiling once");
                    self.evict(source, &o, &compiled)?;
                    // The entry may sit in a read-only root: skip the disk this time.
                    bypass_disk = true;
                }
                Err(e) => return Err(Box::new(e).into()),
            }
        }
    }

    /// The slot of (runtime library path, device ordinal, key) in the loaded libraries, made
    /// empty when there is none. Allocates only to make one.
    fn loaded_slot(&self, runtime: &std::path::Path, ordinal: i32, key: CacheKey) -> LoadedSlot {
        let mut loaded = self.loaded.lock();
        let slots = loaded.entry(key).or_default();
        if let Some((_, _, slot)) = slots
            .iter()
            // The runtime's path as its `Runtime` holds it: the same bytes at every call, so
            // compared as bytes (a `Path` comparison parses both into components).
            .find(|(path, o, _)| *o == ordinal && path.as_os_str() == runtime.as_os_str())
        {
            return Arc::clone(slot);
        }
        let slot = LoadedSlot::default();
        slots.push((runtime.to_path_buf(), ordinal, Arc::clone(&slot)));
        slot
    }

    /// The hit memo, then the tiers (disk, remote: [`crate::cache::tier`]) looked up, then
    /// locked, then the compiler, then the tiers published to. `may_fall_back`: when Auto's
    /// in-process compiler fails, the request is looked up and compiled again, once, with the
    /// process compiler (step 5 of the rule, [`crate::compiler::selection`]).
    fn compile_uncached(
        &self,
        source: &[u8],
        options: &CompileOptions,
        bypass_disk: bool,
        runtime: Option<&std::path::Path>,
        may_fall_back: bool,
    ) -> Result<(Arc<CompiledInner>, Origin), JitError> {
        // The frozen tier: keyed without the compiler, so looked up before one is searched
        // for (`jit::frozen`).
        // Skipped with the disk: a frozen code object the runtime rejected is compiled again
        // where a compiler is present.
        let phase = crate::phases::start("frozen bundle and hit memo");
        let frozen_phase = crate::phases::start("frozen bundle and hit memo: frozen bundle");
        let refusal = match bypass_disk {
            true => None,
            false => match self.frozen_lookup(source, options, runtime) {
                Ok(inner) => return Ok((inner, Origin::Frozen)),
                Err(r) => r,
            },
        };
        frozen_phase.end();
        if let Some(r) = &refusal {
            tracing::debug!(reason = %r, "the frozen bundle does not serve this request");
        }
        // The hit memo: this request's disk hit as remembered, when everything its lookup saw
        // is unchanged.
        let name_phase = crate::phases::start("frozen bundle and hit memo: context and name");
        let memo = match (&self.hit_memo, &self.disk) {
            (Some(dir), Some(disk)) if !bypass_disk => {
                let config = self.hit_memo_config.get_or_init(|| {
                    hit_memo::config_bytes(
                        self.compilers.config(),
                        self.compilers.choice(),
                        self.compilers.choice_from(),
                        &self.extra,
                        self.runtime_versions.as_deref(),
                        disk.roots(),
                    )
                });
                hit_memo::process_context(runtime).map(|context| {
                    let options_bytes = hit_memo::options_name_bytes(options);
                    let name = hit_memo::request_name(config, source, &options_bytes, &context);
                    (dir, name, context, options)
                })
            }
            _ => None,
        };
        name_phase.end();
        if let (Some((dir, name, _, _)), Some(disk)) = (&memo, &self.disk) {
            let recall_phase = crate::phases::start("frozen bundle and hit memo: recall");
            let recalled = hit_memo::recall(dir, name, options);
            recall_phase.end();
            if let Some(hit) = recalled {
                let read_phase =
                    crate::phases::start("frozen bundle and hit memo: entry read and checked");
                let (entry, bad) = disk.get_hit(&hit.key);
                read_phase.end();
                if let (Some(entry), true) = (entry, bad.is_empty()) {
                    let mut bad = Vec::new();
                    let _artefacts_phase =
                        crate::phases::start("frozen bundle and hit memo: artefacts");
                    if let Some(artefacts) =
                        usable_entry(disk, &hit.key, &entry, &hit.options, &mut bad)
                    {
                        self.counters.record_remembered();
                        return Ok((
                            Arc::new(inner_from_entry(
                                hit.key,
                                artefacts,
                                &entry,
                                bad,
                                hit.compiler,
                                &hit.options,
                            )),
                            Origin::Disk,
                        ));
                    }
                }
            }
        }
        let recording = memo
            .as_ref()
            .map(|_| crate::fs::observe::Recording::start());
        phase.end();
        let Prepared {
            options: o,
            chosen,
            direct,
        } = match self.prepare(source, options, runtime) {
            Ok(p) => p,
            Err(e @ JitError::Compiler(_)) if self.strict => {
                return Err(self.strict_miss(source, options, refusal.as_ref(), e.to_string()))
            }
            Err(e) => return Err(e),
        };
        let backend = &chosen.backend;
        let request = tiers::Request {
            direct,
            o: &o,
            chosen: &chosen,
            runtime,
            memo: memo.as_ref(),
            recording: std::cell::RefCell::new(recording),
        };
        // The tiers, fastest first: looked up in order, then locked in order, then published
        // to ([`crate::cache::tier`]).
        let disk_tier = self.disk.as_ref().map(|disk| tiers::DiskTier {
            disk,
            lookups: !bypass_disk,
        });
        let remote_tiers: Vec<_> = (0..self.remote.len())
            .map(|i| tiers::RemoteTier {
                jit: self,
                remote: &self.remote[i],
                earlier: &self.remote[..i],
                lookups: !bypass_disk,
            })
            .collect();
        let list: Vec<&dyn Tier<tiers::Request<'_>, Hit = tiers::Hit>> = disk_tier
            .as_ref()
            .map(|t| t as _)
            .into_iter()
            .chain(remote_tiers.iter().map(|t| t as _))
            .collect();
        let mut seen = Seen::default();
        let phase = crate::phases::start("cache lookups (a miss)");
        for tier in &list {
            if let Some(hit) = tier.lookup(&request, &mut seen) {
                return Ok(hit);
            }
            // Not a hit at the first look: nothing to remember, and the compile is not
            // recorded.
            drop(request.recording.borrow_mut().take());
        }
        // Another process, or another machine, may be compiling this source: wait for it
        // (bounded), then look again.
        phase.end();
        let phase = crate::phases::start("compile locks and remembered failures");
        let wait = self.lock_wait.unwrap_or_else(|| backend.timeout());
        let mut locks = Locks::default();
        for tier in &list {
            match tier.lock(&request, wait, &mut seen) {
                LockStep::Held(l) => locks.push(l),
                LockStep::Found(hit) => return Ok(hit),
                LockStep::Unlocked => {}
            }
        }
        // A failure remembered under the files as they are now: the same error, no compile.
        if !bypass_disk && !self.retry_failed {
            if let Some(f) = self.remembered_failure(&request, &seen) {
                self.counters.record_remembered_failure();
                return Err(CompileError::Failed(Box::new(f)).into());
            }
        }
        if self.strict {
            return Err(self.strict_miss(
                source,
                options,
                refusal.as_ref(),
                "no cache tier holds it".into(),
            ));
        }
        phase.end();
        let mut rejection = None;
        let phase = crate::phases::start("compile");
        let compiled = backend.compile_noting(source, &o, &mut rejection);
        phase.end();
        let out = match compiled {
            Ok(out) => out,
            Err(e) if may_fall_back && self.compilers.fall_back(source, &o, &chosen, &e) => {
                // The locks of this compiler's key are not those of the process compiler's.
                drop(locks);
                return self.compile_uncached(source, options, bypass_disk, runtime, false);
            }
            Err(e) => {
                if let (CompileError::Failed(f), Some(rejection)) = (&e, rejection) {
                    self.remember_failure(source, &request, &list, f, rejection, &mut seen);
                }
                return Err(e.into());
            }
        };
        let phase = crate::phases::start("header manifest");
        let mut search = manifest::extra_search_dirs(&o.extra_flags, &backend.environment());
        search.extend(backend.own_search_dirs());
        let recorded = manifest::record(
            source,
            &out.dependencies,
            &o.include_dirs,
            &search,
            backend.identity(),
            out.started,
            seen.looked_up.as_ref(),
        );
        phase.end();
        let phase = crate::phases::start("result key and reading the output");
        let key = key::result_key(&direct, &recorded.manifest);
        let artefacts = read_artefacts(&key, &out.code_object, &o)?;
        phase.end();
        let phase = crate::phases::start("publishing");
        let mut entry_path = None;
        let publish = list.iter().any(|t| t.publishes());
        if let (true, Some(why)) = (publish, &recorded.unpublishable) {
            tracing::warn!(%key, reason = %why,
                "hipjit cache: result not published, a file the compiler read changed while it ran");
            seen.warnings.push(format!(
                "the result was not cached: {why} (a file the compiler read changed while it ran)"
            ));
        } else if publish {
            let meta = EntryMeta {
                format_version: 0,
                key: String::new(),
                command: out.command.clone(),
                compiler: backend.identity().clone(),
                options: o.clone(),
                tracked_headers: recorded.headers.clone(),
                dependencies: out.dependencies.iter().map(|d| d.path.clone()).collect(),
                created_unix_ms: SystemTime::now()
                    .duration_since(UNIX_EPOCH)
                    .map_or(0, |d| d.as_millis() as u64),
                artefacts: Vec::new(),
            };
            // The fields of the direct key, so that `hipjit cache explain` can name what
            // differs from this entry on a later miss.
            let phase = crate::phases::start("publishing: key record");
            let key_record = backend
                .request::<crate::cache::key::KeyFields>(source, &o, &self.extra)
                .to_bytes();
            phase.end();
            let mut stored: Vec<(&str, &[u8])> = vec![
                (output_artefact(&o), &out.code_object),
                (key::KEY_RECORD_ARTEFACT, &key_record),
            ];
            // The listings of the project's directories searched, so that explain can name
            // a header added beside the source.
            let listings = recorded.listings.to_bytes();
            if !recorded.listings.0.is_empty() {
                stored.push((manifest::DIR_LISTINGS_ARTEFACT, &listings));
            }
            if let Some(ir) = &out.llvm_ir {
                stored.push((LLVM_IR, ir));
            }
            if let Some(isa) = &out.isa {
                stored.push((ISA, isa.as_bytes()));
            }
            let diagnostics_artefact = diagnostics::to_artefact(&out.diagnostics);
            if let Some(r) = &diagnostics_artefact {
                stored.push((diagnostics::ARTEFACT, r));
            }
            let result = Publish {
                direct: &direct,
                key: &key,
                meta: &meta,
                stored: &stored,
                manifest: &recorded.manifest,
            };
            // The written disk root, when its publish follows the result
            // ([`JitOptions::publish_in_background`]): the first tier of the list.
            let deferred = self
                .disk
                .as_ref()
                .filter(|d| self.publish_in_background && d.is_writable());
            let now = list.iter().skip(usize::from(deferred.is_some()));
            for tier in now.filter(|t| t.publishes()) {
                if let Some(path) = tier.publish(&request, &result, &mut seen) {
                    entry_path.get_or_insert(path);
                }
            }
            if let Some(disk) = deferred {
                let disk = disk.clone();
                entry_path = Some(DiskCache::entry_path(&disk.roots()[0].path, &key));
                let owned: Vec<(String, Vec<u8>)> = stored
                    .iter()
                    .map(|(name, bytes)| (name.to_string(), bytes.to_vec()))
                    .collect();
                let (manifest, meta) = (recorded.manifest.clone(), meta.clone());
                // The locks go with the publish: released once the entry is in place.
                let held = std::mem::take(&mut locks);
                self.write_back.submit(move || {
                    let stored: Vec<(&str, &[u8])> = owned
                        .iter()
                        .map(|(name, bytes)| (name.as_str(), &bytes[..]))
                        .collect();
                    let result = Publish {
                        direct: &direct,
                        key: &key,
                        meta: &meta,
                        stored: &stored,
                        manifest: &manifest,
                    };
                    for w in tiers::publish_to_disk(&disk, &result).1 {
                        tracing::warn!(%key, "publishing a compile in the background: {w}");
                    }
                    drop(held);
                });
            }
        }
        phase.end();
        let inner = CompiledInner {
            key,
            targets: o.target_names(),
            code_objects: entry::code_objects_of(&artefacts),
            artefacts,
            entry_path,
            command: out.command,
            log: out.log,
            diagnostics: out.diagnostics,
            llvm_ir: out.llvm_ir,
            isa: out.isa,
            bad_entries: seen.bad,
            cache_warnings: seen.warnings,
            compiler: chosen.used(),
        };
        drop(locks);
        Ok((Arc::new(inner), Origin::Compiler))
    }
}

/// The code object versions a compiler can produce, from its clang major version (LLVM
/// AMDGPUUsage: v5 from LLVM 15 (behind the flag until 16), v6 from LLVM 19, v2/v3 dropped
/// in LLVM 19). Unknown versions: 4 and 5.
pub fn compiler_code_object_versions(identity: &CompilerIdentity) -> Vec<u32> {
    let major = identity.clang_major().unwrap_or(0);
    match major {
        0 => vec![4, 5],
        1..=14 => vec![4],
        15..=18 => vec![4, 5],
        _ => vec![4, 5, 6],
    }
}
