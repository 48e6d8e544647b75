//! The JIT: HIP C++ source in, cached code objects and their kernels out.
//!
//! [`Jit::compile`] looks in three places, in order:
//! 1. the in-process cache ([`crate::cache::memory`]): a cheap pre-key over source and options,
//!    confirmed by comparing both in full; no sha256 on this path;
//! 2. the disk cache ([`crate::cache::disk`]): the direct key ([`crate::cache::key`]: source,
//!    options, the compiler's identity and environment, the caller's extra signature) names
//!    a header manifest ([`crate::cache::manifest`]) of the files the last compile read; the
//!    files are checked as they are now (stat first, hashed when changed), and their hashes
//!    give the result key of the entry holding the code objects;
//! 3. the remote tier shared by a cluster ([`crate::cache::remote`], feature `redis`), when
//!    configured: the direct key's manifests and the entry they name, checked like a disk
//!    entry, then written to the first disk root;
//! 4. the compiler ([`crate::compiler`]); the result is published under the result key of the
//!    files the compiler's dependency output lists, and the manifest replaced, unless a file
//!    changed while it ran (then the result goes to the caller only); then stored remotely.
//!
//! However many threads ask for the same source and options at once, one compiles (single
//! flight); across processes sharing a cache root, a miss is compiled under the direct key's
//! lock ([`DiskCache::lock`]), and the processes that waited read the published entry; across
//! machines, under the remote tier's cluster lock ([`crate::cache::remote::lock`]).
//! Headers are checked on disk lookups only: the in-process cache does not notice a header
//! edited while the process runs (call [`Jit::clear_memory`]).

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use crate::cache::disk::{BadEntry, CacheError, DiskCache, EntryMeta, LockOutcome};
use crate::cache::key::{self, CacheKey, KeyInputs};
use crate::cache::manifest::{self, Manifest, MANIFEST_ARTEFACT};
use crate::cache::memory::MemoryCache;
use crate::cache::remote::{RemoteConfig, RemoteConfigError};
use crate::code_object::{CodeObject, CodeObjectError, KernelInfo};
use crate::compiler::diagnostics::{self, Diagnostic};
use crate::compiler::{
    CompileError, CompileOptions, Compiler, CompilerConfig, CompilerError, CompilerIdentity,
};
use crate::device::Device;
use crate::error::LibraryError;
use crate::library::Library;
use crate::target_id::TargetId;
use parking_lot::Mutex;
use std::collections::HashMap;

/// Where the disk cache lives.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum CacheLocation {
    /// `HIPJIT_CACHE_DIR`, else the default root (see [`crate::cache::disk`]).
    #[default]
    FromEnv,
    /// These roots: the first written, the rest read-only.
    Roots(Vec<PathBuf>),
    /// No disk cache (in-process only).
    Disabled,
}

/// Where the remote cache tier is ([`crate::cache::remote`]).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum RemoteLocation {
    /// `HIPJIT_REMOTE_CACHE` (and `HIPJIT_REMOTE_CACHE_KEY`); none when unset.
    #[default]
    FromEnv,
    /// This server.
    Server(RemoteConfig),
    /// No remote tier.
    Disabled,
}

/// Settings of a [`Jit`].
#[derive(Clone, Debug, Default)]
pub struct JitOptions {
    /// How to find and run the compiler.
    pub compiler: CompilerConfig,
    /// The disk cache.
    pub cache: CacheLocation,
    /// Size cap of the written cache root in bytes (least recently used entries go first).
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
    /// (needs the `redis` feature; without it, a configured server is an error and the
    /// variable is ignored with a warning).
    pub remote_cache: RemoteLocation,
}

/// Where a [`Compiled`] came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Origin {
    /// The in-process cache.
    Memory,
    /// The disk cache.
    Disk,
    /// The remote tier ([`crate::cache::remote`]); written to the first disk root too.
    Remote,
    /// A compiler run.
    Compiler,
}

#[derive(Debug)]
struct CompiledInner {
    key: CacheKey,
    code_objects: Vec<Arc<CodeObject>>,
    entry_path: Option<PathBuf>,
    command: Vec<String>,
    log: String,
    diagnostics: Vec<Diagnostic>,
    llvm_ir: Option<Vec<u8>>,
    isa: Option<String>,
    bad_entries: Vec<BadEntry>,
    cache_warnings: Vec<String>,
}

/// A compiled source: its key, its code object(s), where it came from and how long the
/// request took. Cheap to clone.
#[derive(Clone, Debug)]
pub struct Compiled {
    inner: Arc<CompiledInner>,
    origin: Origin,
    elapsed: Duration,
}

impl Compiled {
    /// The cache key.
    pub fn key(&self) -> CacheKey {
        self.inner.key
    }
    /// The code object of the first target.
    pub fn code_object(&self) -> &Arc<CodeObject> {
        &self.inner.code_objects[0]
    }
    /// One code object per target, in the order of [`CompileOptions::targets`].
    pub fn code_objects(&self) -> &[Arc<CodeObject>] {
        &self.inner.code_objects
    }
    /// The code object whose target ID runs on `device`, if any.
    pub fn code_object_for(&self, device: &TargetId) -> Option<&Arc<CodeObject>> {
        self.inner
            .code_objects
            .iter()
            .find(|c| c.target_id().runs_on(device))
    }
    /// The kernels of the first target's code object.
    pub fn kernels(&self) -> &[KernelInfo] {
        self.code_object().kernels()
    }
    /// Where this result came from.
    pub fn origin(&self) -> Origin {
        self.origin
    }
    /// Whether it came from a cache (memory, disk or remote).
    pub fn is_hit(&self) -> bool {
        self.origin != Origin::Compiler
    }
    /// Wall time of the [`Jit::compile`] call that returned it.
    pub fn elapsed(&self) -> Duration {
        self.elapsed
    }
    /// The disk cache entry, when one was read or written.
    pub fn entry_path(&self) -> Option<&PathBuf> {
        self.inner.entry_path.as_ref()
    }
    /// The compiler command line (from the entry's metadata on a disk hit).
    pub fn command(&self) -> &[String] {
        &self.inner.command
    }
    /// The compiler's standard error (warnings) when this process compiled it; empty on a
    /// disk hit (see [`Compiled::diagnostics`]).
    pub fn log(&self) -> &str {
        &self.inner.log
    }
    /// The compiler's warnings (and remarks) for this source, each with its notes, include
    /// chain and excerpt, file names as the user knows them (the source name of the options,
    /// include directories as given): from this compile, or, on a disk hit, as recorded in the
    /// entry when it was compiled. [`diagnostics::render_all`]
    /// prints them as clang does.
    pub fn diagnostics(&self) -> &[Diagnostic] {
        &self.inner.diagnostics
    }
    /// Device LLVM bitcode, when [`CompileOptions::dump_llvm_ir`] was set.
    pub fn llvm_ir(&self) -> Option<&[u8]> {
        self.inner.llvm_ir.as_deref()
    }
    /// Device assembly, when [`CompileOptions::dump_isa`] was set.
    pub fn isa(&self) -> Option<&str> {
        self.inner.isa.as_deref()
    }
    /// Bad disk entries met while looking this key up (skipped or replaced).
    pub fn bad_entries(&self) -> &[BadEntry] {
        &self.inner.bad_entries
    }
    /// What went wrong with the disk cache while this result was made, without failing it: the
    /// entry could not be published (read-only or full root, another user's root...), or the
    /// wait for another process's compile of the key ran out and this one compiled without
    /// the lock. Empty when all went well.
    pub fn cache_warnings(&self) -> &[String] {
        &self.inner.cache_warnings
    }
}

/// A failed metadata check ([`crate::compiler::Checks`]).
#[derive(Debug, Clone, thiserror::Error, PartialEq, Eq)]
#[error("check failed for {target}: {what}")]
pub struct CheckFailed {
    /// The code object's target ID.
    pub target: String,
    /// What failed, naming the kernel.
    pub what: String,
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
    /// A metadata check failed.
    #[error(transparent)]
    Check(#[from] CheckFailed),
    /// Loading the code object on the device failed (after one recompile when the runtime
    /// called the image invalid).
    #[error(transparent)]
    Load(#[from] Box<LibraryError>),
    /// No code object of the result runs on the device.
    #[error("none of the compiled targets ({targets}) runs on device {ordinal} ({device})")]
    NoCodeObjectForDevice {
        /// The compiled target IDs.
        targets: String,
        /// The device's target ID.
        device: String,
        /// The device ordinal.
        ordinal: i32,
    },
    /// The device's target ID is unknown and the options name no target.
    #[error("device {ordinal} reports the architecture {arch_name:?}, which is not a target ID hipjit knows; name the target in CompileOptions::targets")]
    UnknownDeviceTarget {
        /// The device ordinal.
        ordinal: i32,
        /// What the device reported (`gcnArchName`).
        arch_name: String,
    },
}

/// A compiled source loaded on one device: the compile result and the loaded library (shared
/// by every caller asking for the same device and key).
#[derive(Clone, Debug)]
pub struct Loaded {
    /// The compile result.
    pub compiled: Compiled,
    /// The code object loaded on the device.
    pub library: Arc<Library>,
}

/// (runtime library path, device ordinal, cache key).
type LoadedKey = (PathBuf, i32, CacheKey);

/// One loaded library per [`LoadedKey`]: the lock is held while it is loaded, so that threads
/// asking for the same device and key at once load it once (single flight), while other
/// devices and keys load in parallel.
type LoadedSlot = Arc<Mutex<Option<Arc<Library>>>>;

/// The JIT compiler with its caches. `Send + Sync`: share one per process.
pub struct Jit {
    compiler: Compiler,
    disk: Option<DiskCache>,
    memory: MemoryCache<(Arc<CompiledInner>, Origin)>,
    extra: Vec<u8>,
    runtime_versions: Option<Vec<u32>>,
    lock_wait: Option<Duration>,
    #[cfg(feature = "redis")]
    remote: Option<crate::cache::remote::RemoteCache>,
    /// Copies of remote hits into the first disk root, written in the background.
    #[cfg(feature = "redis")]
    write_back: crate::cache::remote::write_back::WriteBack,
    loaded: Mutex<HashMap<LoadedKey, LoadedSlot>>,
    /// Kernels by (device, source, options, name): [`Jit::kernel`].
    kernels: crate::cache::kernels::KernelCache<CompileOptions>,
}

impl std::fmt::Debug for Jit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Jit")
            .field("compiler", self.compiler.identity())
            .field("disk", &self.disk)
            .field("memory", &self.memory)
            .finish()
    }
}

impl Jit {
    /// Finds the compiler and opens the disk cache.
    ///
    /// Errors: [`JitError::Compiler`], [`JitError::Cache`], [`JitError::RemoteConfig`] (a
    /// malformed `HIPJIT_REMOTE_CACHE` or signing key; a server configured in a build without
    /// the `redis` feature).
    pub fn new(options: JitOptions) -> Result<Jit, JitError> {
        #[cfg_attr(
            not(feature = "redis"),
            allow(clippy::let_unit_value, unused_variables)
        )]
        let remote = open_remote(options.remote_cache)?;
        let compiler = Compiler::new(options.compiler)?;
        let disk = match options.cache {
            CacheLocation::Disabled => None,
            CacheLocation::FromEnv => Some(DiskCache::from_env()?),
            CacheLocation::Roots(r) => Some(DiskCache::open(&r)?),
        }
        .map(|d| d.with_max_bytes(options.max_cache_bytes));
        Ok(Jit {
            compiler,
            disk,
            memory: MemoryCache::new(),
            extra: options.extra_signature,
            runtime_versions: options.runtime_code_object_versions,
            lock_wait: options.lock_wait,
            #[cfg(feature = "redis")]
            remote,
            #[cfg(feature = "redis")]
            write_back: Default::default(),
            loaded: Mutex::new(HashMap::new()),
            kernels: Default::default(),
        })
    }

    /// The compiler.
    pub fn compiler(&self) -> &Compiler {
        &self.compiler
    }

    /// The disk cache, unless disabled.
    pub fn disk_cache(&self) -> Option<&DiskCache> {
        self.disk.as_ref()
    }

    /// The remote tier, when one is configured.
    #[cfg(feature = "redis")]
    pub fn remote_cache(&self) -> Option<&crate::cache::remote::RemoteCache> {
        self.remote.as_ref()
    }

    /// Waits until every remote hit of this `Jit` has been written to the first disk root
    /// (they are written in the background; dropping the `Jit` waits too).
    #[cfg(feature = "redis")]
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
    /// a hit compares the source, options and name in full and clones the owned [`Kernel`],
    /// with no runtime call.
    ///
    /// Errors: those of [`Jit::load`]; [`JitError::Load`] with
    /// [`LibraryError::KernelNotFound`] naming the kernels there are.
    pub fn kernel(
        &self,
        device: &Device,
        source: impl AsRef<[u8]>,
        name: &str,
        options: &CompileOptions,
    ) -> Result<crate::kernel::Kernel, JitError> {
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

    /// The options as compiled: [`CompileOptions::code_object_version`] filled from the
    /// runtime's accepted versions when they are known and the options leave it open.
    pub fn effective_options(&self, options: &CompileOptions) -> CompileOptions {
        self.effective_options_with(options, self.runtime_versions.as_deref())
    }

    fn effective_options_with(
        &self,
        options: &CompileOptions,
        runtime_versions: Option<&[u32]>,
    ) -> CompileOptions {
        let mut o = options.clone();
        if o.code_object_version.is_none() {
            if let Some(accepted) = runtime_versions {
                let supported = compiler_code_object_versions(self.compiler.identity());
                o.code_object_version = accepted
                    .iter()
                    .copied()
                    .filter(|v| supported.contains(v))
                    .max();
            }
        }
        o
    }

    /// The result key `source` (its bytes) and `options` have with the files on disk as they
    /// are now, when the disk cache holds a header manifest for them (a compile of them was
    /// published); `None` otherwise (no disk cache, or never compiled: the files the compiler
    /// would read are only known from a compile).
    ///
    /// Errors: [`JitError::Compile`] with invalid options.
    pub fn key(
        &self,
        source: impl AsRef<[u8]>,
        options: &CompileOptions,
    ) -> Result<Option<CacheKey>, JitError> {
        let source = source.as_ref();
        let o = self.effective_options(options);
        o.validate().map_err(CompileError::from)?;
        let direct = self.direct_key(source, &o);
        Ok(self
            .disk
            .as_ref()
            .and_then(|d| manifest_lookup(d, &direct, &o))
            .map(|(_, k)| k))
    }

    /// The direct key of `source` (its bytes) and `options`: everything known before the
    /// compiler runs (source, options, compiler identity and environment, signature), which
    /// names the header manifest; two sources or option sets with different direct keys never
    /// share a result ([`crate::cache::key`]). Computed without touching the disk.
    ///
    /// Errors: [`JitError::Compile`] with invalid options.
    pub fn source_key(
        &self,
        source: impl AsRef<[u8]>,
        options: &CompileOptions,
    ) -> Result<CacheKey, JitError> {
        let o = self.effective_options(options);
        o.validate().map_err(CompileError::from)?;
        Ok(self.direct_key(source.as_ref(), &o))
    }

    /// The direct key (see [`crate::cache::key`]).
    fn direct_key(&self, source: &[u8], o: &CompileOptions) -> CacheKey {
        key::compute(&KeyInputs {
            source,
            options: o,
            compiler: self.compiler.identity(),
            env: self.compiler.environment(),
            extra: &self.extra,
        })
    }

    /// Compiles `source` for `options.targets`, or returns the cached result. The source is
    /// bytes (`&str`, `String`, `&[u8]`, `Vec<u8>`), in any encoding the compiler accepts,
    /// keyed by those bytes.
    ///
    /// Errors: [`JitError::Compile`] (bad options, compiler failure, unsupported target...),
    /// [`JitError::CodeObject`] (the compiler's output unreadable; a cached entry whose code
    /// object does not read is a bad entry, compiled again), [`JitError::Check`] (a requested
    /// metadata check failed). A disk cache that cannot be written only logs a warning.
    pub fn compile(
        &self,
        source: impl AsRef<[u8]>,
        options: &CompileOptions,
    ) -> Result<Compiled, JitError> {
        self.compile_impl(source.as_ref(), options, false)
    }

    fn compile_impl(
        &self,
        source: &[u8],
        options: &CompileOptions,
        bypass_disk: bool,
    ) -> Result<Compiled, JitError> {
        let started = Instant::now();
        let (inner, hit) = self.memory.get_or_try_insert(source, options, || {
            self.compile_uncached(source, options, bypass_disk)
        })?;
        if options.checks != Default::default() {
            run_checks(&inner.0, options)?;
        }
        Ok(Compiled {
            inner: inner.0,
            origin: if hit { Origin::Memory } else { inner.1 },
            elapsed: started.elapsed(),
        })
    }

    /// Forgets `compiled` (compiled from `source` and `options`) in memory and removes its
    /// entry from the written disk root, so the next [`Jit::compile`] compiles again. For a
    /// code object the runtime rejected as an invalid image.
    ///
    /// Errors: [`JitError::Cache`] when the entry file cannot be removed.
    pub fn evict(
        &self,
        source: impl AsRef<[u8]>,
        options: &CompileOptions,
        compiled: &Compiled,
    ) -> Result<(), JitError> {
        self.memory.remove(source.as_ref(), options);
        if let (Some(disk), Some(path)) = (&self.disk, compiled.entry_path()) {
            if path.starts_with(&disk.roots()[0].path) {
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
    /// [`Library`]. With no targets in `options` the device's target ID is used; with no code
    /// object version in `options` (and none from [`JitOptions::runtime_code_object_versions`])
    /// the device runtime's accepted versions choose it. When the runtime rejects the image as
    /// invalid (`hipErrorInvalidImage`), the cached result is evicted (memory and written disk
    /// root) and the source is compiled and loaded once more.
    ///
    /// Errors: those of [`Jit::compile`]; [`JitError::UnknownDeviceTarget`];
    /// [`JitError::NoCodeObjectForDevice`]; [`JitError::Load`] from
    /// [`Library::load`] (`hipModuleLoadData` / `hipLibraryLoadData`).
    pub fn load(
        &self,
        device: &Device,
        source: impl AsRef<[u8]>,
        options: &CompileOptions,
    ) -> Result<Loaded, JitError> {
        self.load_with(device, source, options, Library::load)
    }

    /// [`Jit::load`] with the loading step supplied by the caller (a wrapper that logs or
    /// injects failures); `load` gets the device and the code object chosen for it.
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
        L: Fn(&Device, &CodeObject) -> Result<Library, LibraryError>,
    {
        let source = source.as_ref();
        let device_target = device.target_id().cloned();
        let mut o = options.clone();
        if o.targets.is_empty() {
            match &device_target {
                Some(t) => o.targets = vec![t.clone()],
                None => {
                    return Err(JitError::UnknownDeviceTarget {
                        ordinal: device.ordinal(),
                        arch_name: device.arch_name().to_string(),
                    })
                }
            }
        }
        if self.runtime_versions.is_none() {
            o = self.effective_options_with(&o, device.runtime().code_object_versions());
        }
        let runtime = device.runtime().path().to_path_buf();
        let mut bypass_disk = false;
        loop {
            let compiled = self.compile_impl(source, &o, bypass_disk)?;
            let map_key = (runtime.clone(), device.ordinal(), compiled.key());
            let slot: LoadedSlot = Arc::clone(self.loaded.lock().entry(map_key).or_default());
            let mut slot = slot.lock();
            if let Some(lib) = &*slot {
                return Ok(Loaded {
                    compiled,
                    library: Arc::clone(lib),
                });
            }
            let co =
                match &device_target {
                    Some(t) => compiled.code_object_for(t).ok_or_else(|| {
                        JitError::NoCodeObjectForDevice {
                            targets: o
                                .targets
                                .iter()
                                .map(|t| t.to_string())
                                .collect::<Vec<_>>()
                                .join(", "),
                            device: t.to_string(),
                            ordinal: device.ordinal(),
                        }
                    })?,
                    None => compiled.code_object(),
                };
            match load(device, co) {
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

    fn compile_uncached(
        &self,
        source: &[u8],
        options: &CompileOptions,
        bypass_disk: bool,
    ) -> Result<(Arc<CompiledInner>, Origin), JitError> {
        let o = self.effective_options(options);
        o.validate().map_err(CompileError::from)?;
        let direct = self.direct_key(source, &o);
        let mut bad_entries = Vec::new();
        let mut looked_up: Option<Manifest> = None;
        let disk_lookup = self.disk.as_ref().filter(|_| !bypass_disk);
        if let Some(disk) = disk_lookup {
            if let Some((now, key)) = manifest_lookup(disk, &direct, &o) {
                let lookup = disk.get(&key);
                bad_entries = lookup.bad;
                if let Some(entry) = lookup.entry {
                    if let Some(code_objects) =
                        usable_entry(disk, &key, &entry, &o, &mut bad_entries)
                    {
                        return Ok((
                            Arc::new(inner_from_entry(key, code_objects, &entry, bad_entries)),
                            Origin::Disk,
                        ));
                    }
                }
                looked_up = Some(now);
            }
        }
        let mut cache_warnings = Vec::new();
        #[cfg(feature = "redis")]
        if !bypass_disk {
            if let Some(remote) = &self.remote {
                let fetch = remote.fetch(&direct, &o.include_dirs);
                if let Some(hit) = self.remote_hit(
                    &direct,
                    &o,
                    fetch,
                    &mut bad_entries,
                    &mut looked_up,
                    &mut cache_warnings,
                ) {
                    return Ok(hit);
                }
            }
        }
        // Another process may be compiling this source: wait for it (bounded), then look again.
        let wait = self.lock_wait.unwrap_or_else(|| self.compiler.timeout());
        let _lock = match self.disk.as_ref().map(|d| d.lock(&direct, wait)) {
            Some(LockOutcome::Held(l)) => Some(l),
            Some(LockOutcome::TimedOut { path }) => {
                let w = format!(
                    "waited {} s for the compile lock {} (another process compiling this source, \
                     stopped or slow); compiling without it",
                    wait.as_secs_f64(),
                    path.display()
                );
                tracing::warn!(key = %direct, "{w}");
                cache_warnings.push(w);
                None
            }
            Some(LockOutcome::Unavailable(reason)) => {
                tracing::debug!(key = %direct, %reason, "no compile lock");
                None
            }
            None => None,
        };
        if let (Some(disk), Some(_)) = (disk_lookup, &_lock) {
            if let Some((now, key)) = manifest_lookup(disk, &direct, &o) {
                if let Some(entry) = disk.get(&key).entry {
                    if let Some(code_objects) =
                        usable_entry(disk, &key, &entry, &o, &mut bad_entries)
                    {
                        return Ok((
                            Arc::new(inner_from_entry(key, code_objects, &entry, bad_entries)),
                            Origin::Disk,
                        ));
                    }
                }
                looked_up = Some(now);
            }
        }
        // Another machine may be compiling it: the cluster lock, waited for as the disk's.
        #[cfg(feature = "redis")]
        let _cluster_lock = match self.cluster_lock(
            &direct,
            &o,
            wait,
            bypass_disk,
            &mut bad_entries,
            &mut looked_up,
            &mut cache_warnings,
        ) {
            std::ops::ControlFlow::Break(hit) => return Ok(hit),
            std::ops::ControlFlow::Continue(guard) => guard,
        };
        let out = self.compiler.compile(source, &o)?;
        let recorded = manifest::record(
            &out.dependencies,
            &o.include_dirs,
            &manifest::extra_search_dirs(&o.extra_flags, self.compiler.environment()),
            self.compiler.identity(),
            out.started,
            looked_up.as_ref(),
        );
        let key = key::result_key(&direct, &recorded.manifest);
        let code_objects = read_code_objects(&key, &out.code_object, &o)?;
        let mut entry_path = None;
        let publish = self.disk.is_some() || self.has_remote();
        if let (true, Some(why)) = (publish, &recorded.unpublishable) {
            tracing::warn!(%key, reason = %why,
                "hipjit cache: result not published, a file the compiler read changed while it ran");
            cache_warnings.push(format!(
                "the result was not cached: {why} (a file the compiler read changed while it ran)"
            ));
        } else if publish {
            let meta = EntryMeta {
                format_version: 0,
                key: String::new(),
                command: out.command.clone(),
                compiler: self.compiler.identity().clone(),
                options: o.clone(),
                tracked_headers: recorded.headers.clone(),
                dependencies: out.dependencies.iter().map(|d| d.path.clone()).collect(),
                created_unix_ms: SystemTime::now()
                    .duration_since(UNIX_EPOCH)
                    .map_or(0, |d| d.as_millis() as u64),
                artefacts: Vec::new(),
            };
            let mut artefacts: Vec<(&str, &[u8])> = vec![(CODE_OBJECT, &out.code_object)];
            if let Some(ir) = &out.llvm_ir {
                artefacts.push((LLVM_IR, ir));
            }
            if let Some(isa) = &out.isa {
                artefacts.push((ISA, isa.as_bytes()));
            }
            let diagnostics_artefact = diagnostics::to_artefact(&out.diagnostics);
            if let Some(r) = &diagnostics_artefact {
                artefacts.push((diagnostics::ARTEFACT, r));
            }
            if let Some(disk) = &self.disk {
                match disk.put(&key, meta.clone(), &artefacts) {
                    Ok((path, _)) => {
                        entry_path = Some(path);
                        if let Some(w) =
                            publish_manifest(disk, &direct, meta.clone(), &recorded.manifest)
                        {
                            cache_warnings.push(w);
                        }
                    }
                    Err(e) => {
                        tracing::warn!(%key, error = %e, "hipjit cache write failed");
                        cache_warnings.push(format!("the result was not cached: {e}"));
                    }
                }
            }
            #[cfg(feature = "redis")]
            if let Some(remote) = &self.remote {
                match crate::cache::disk::encode_entry(&key, meta, &artefacts) {
                    Ok(bytes) => cache_warnings.extend(remote.store(
                        &direct,
                        &key,
                        &bytes,
                        &recorded.manifest,
                    )),
                    Err(e) => {
                        cache_warnings.push(format!("the result was not stored remotely: {e}"))
                    }
                }
            }
        }
        let inner = CompiledInner {
            key,
            code_objects,
            entry_path,
            command: out.command,
            log: out.log,
            diagnostics: out.diagnostics,
            llvm_ir: out.llvm_ir,
            isa: out.isa,
            bad_entries,
            cache_warnings,
        };
        Ok((Arc::new(inner), Origin::Compiler))
    }
}

impl Jit {
    fn has_remote(&self) -> bool {
        #[cfg(feature = "redis")]
        return self.remote.is_some();
        #[cfg(not(feature = "redis"))]
        return false;
    }

    /// Takes a remote lookup's result: its bad entries and warnings, and its hit when the code
    /// objects read (else the entry is rejected: reported and removed from the server). A hit
    /// is written to the first disk root with its manifest.
    #[cfg(feature = "redis")]
    fn remote_hit(
        &self,
        direct: &CacheKey,
        o: &CompileOptions,
        fetch: crate::cache::remote::Fetch,
        bad_entries: &mut Vec<BadEntry>,
        looked_up: &mut Option<Manifest>,
        cache_warnings: &mut Vec<String>,
    ) -> Option<(Arc<CompiledInner>, Origin)> {
        let remote = self.remote.as_ref()?;
        bad_entries.extend(fetch.bad);
        cache_warnings.extend(fetch.warnings);
        if looked_up.is_none() {
            *looked_up = fetch.looked_up;
        }
        let hit = fetch.hit?;
        let read = match hit.entry.artefact(CODE_OBJECT) {
            None => Err(format!("it has no {CODE_OBJECT} artefact")),
            Some(bytes) => read_code_objects(&hit.key, bytes, o).map_err(|e| e.to_string()),
        };
        let code_objects = match read {
            Ok(c) => c,
            Err(reason) => {
                bad_entries.push(remote.reject(hit, reason));
                return None;
            }
        };
        let mut entry = hit.entry;
        if let Some(disk) = &self.disk {
            // Served now; written to the first root in the background (two fsynced publishes).
            let (disk, key, direct, manifest) = (disk.clone(), hit.key, *direct, hit.manifest);
            let copy = entry.clone();
            entry.path = DiskCache::entry_path(&disk.roots()[0].path, &key);
            self.write_back.submit(move || {
                let artefacts: Vec<(&str, &[u8])> = copy
                    .meta
                    .artefacts
                    .iter()
                    .filter_map(|a| Some((a.name.as_str(), copy.artefact(&a.name)?)))
                    .collect();
                match disk.put(&key, copy.meta.clone(), &artefacts) {
                    Ok(_) => {
                        publish_manifest(&disk, &direct, copy.meta.clone(), &manifest);
                    }
                    Err(e) => {
                        tracing::warn!(%key, error = %e,
                            "a remote hit was not written to the disk cache");
                    }
                }
            });
        }
        let mut inner =
            inner_from_entry(hit.key, code_objects, &entry, std::mem::take(bad_entries));
        inner.cache_warnings = std::mem::take(cache_warnings);
        Some((Arc::new(inner), Origin::Remote))
    }

    /// The cluster lock of `direct` when a remote tier is configured: `Break` with the entry
    /// another machine published while this one waited, else `Continue` with the lock (none
    /// when the wait ran out or the server cannot lock).
    #[allow(clippy::too_many_arguments)]
    #[cfg(feature = "redis")]
    fn cluster_lock(
        &self,
        direct: &CacheKey,
        o: &CompileOptions,
        wait: Duration,
        bypass: bool,
        bad_entries: &mut Vec<BadEntry>,
        looked_up: &mut Option<Manifest>,
        cache_warnings: &mut Vec<String>,
    ) -> std::ops::ControlFlow<
        (Arc<CompiledInner>, Origin),
        Option<crate::cache::remote::lock::ClusterLockGuard>,
    > {
        use crate::cache::remote::lock::ClusterLock;
        use std::ops::ControlFlow;
        let Some(remote) = self.remote.as_ref().filter(|_| !bypass) else {
            return ControlFlow::Continue(None);
        };
        let mut lock_warnings = Vec::new();
        let outcome = remote.lock(direct, wait, &mut lock_warnings, || {
            let fetch = remote.fetch(direct, &o.include_dirs);
            fetch.hit.is_some().then_some(fetch)
        });
        cache_warnings.extend(lock_warnings);
        match outcome {
            ClusterLock::Held(g) => ControlFlow::Continue(Some(g)),
            ClusterLock::Found(fetch) => {
                match self.remote_hit(direct, o, fetch, bad_entries, looked_up, cache_warnings) {
                    Some(hit) => ControlFlow::Break(hit),
                    None => ControlFlow::Continue(None),
                }
            }
            ClusterLock::TimedOut => {
                let w = format!(
                    "waited {} s for the cluster compile lock of {direct} (another machine \
                     compiling this source, stopped or slow); compiling without it",
                    wait.as_secs_f64()
                );
                tracing::warn!("{w}");
                cache_warnings.push(w);
                ControlFlow::Continue(None)
            }
            ClusterLock::Unavailable => ControlFlow::Continue(None),
        }
    }
}

/// The remote tier `location` names: `None` when none is configured.
fn open_remote(location: RemoteLocation) -> Result<RemoteOpened, JitError> {
    #[cfg(feature = "redis")]
    {
        let config = match location {
            RemoteLocation::Disabled => None,
            RemoteLocation::Server(c) => Some(c),
            RemoteLocation::FromEnv => RemoteConfig::from_env()?,
        };
        Ok(match config {
            Some(c) => Some(crate::cache::remote::RemoteCache::new(c)?),
            None => None,
        })
    }
    #[cfg(not(feature = "redis"))]
    {
        match location {
            RemoteLocation::Server(c) => Err(RemoteConfigError::NotBuilt {
                url: c.redacted_url(),
            }
            .into()),
            RemoteLocation::FromEnv => {
                if std::env::var_os(crate::cache::remote::REMOTE_CACHE_ENV)
                    .is_some_and(|v| !v.is_empty())
                {
                    tracing::warn!(
                        "{} is set, but hipjit was built without its `redis` feature: no remote \
                         cache tier",
                        crate::cache::remote::REMOTE_CACHE_ENV
                    );
                }
                Ok(())
            }
            RemoteLocation::Disabled => Ok(()),
        }
    }
}

#[cfg(feature = "redis")]
type RemoteOpened = Option<crate::cache::remote::RemoteCache>;
#[cfg(not(feature = "redis"))]
type RemoteOpened = ();

/// The manifest of `direct` in `disk` as the files are now, and the result key it gives;
/// `None` when there is none, it does not decode (reported), or one of its files is gone.
fn manifest_lookup(
    disk: &DiskCache,
    direct: &CacheKey,
    o: &CompileOptions,
) -> Option<(Manifest, CacheKey)> {
    let entry = disk.get(direct).entry?;
    let bytes = entry.artefact(MANIFEST_ARTEFACT)?;
    let stored = match Manifest::from_bytes(bytes) {
        Ok(m) => m,
        Err(e) => {
            tracing::warn!(path = %entry.path.display(), error = %e, "unusable hipjit header manifest");
            return None;
        }
    };
    let now = stored.current(&o.include_dirs)?;
    let key = key::result_key(direct, &now);
    Some((now, key))
}

/// Stores `manifest` as the entry of `direct` in the written root, replacing the one there.
/// A failure is a warning (returned): the result entry is published, it is only not found by
/// this route.
fn publish_manifest(
    disk: &DiskCache,
    direct: &CacheKey,
    meta: EntryMeta,
    manifest: &Manifest,
) -> Option<String> {
    let bytes = manifest.to_bytes();
    let root = disk.roots().first()?;
    if let Some(old) = disk.get(direct).entry {
        if old.artefact(MANIFEST_ARTEFACT) == Some(&bytes[..]) {
            return None;
        }
        if old.path.starts_with(&root.path) {
            if let Err(e) = std::fs::remove_file(&old.path) {
                if e.kind() != std::io::ErrorKind::NotFound {
                    let w = format!(
                        "the header manifest {} cannot be replaced: {e}",
                        old.path.display()
                    );
                    tracing::warn!(key = %direct, "{w}");
                    return Some(w);
                }
            }
        }
    }
    let meta = EntryMeta {
        dependencies: Vec::new(),
        ..meta
    };
    match disk.put(direct, meta, &[(MANIFEST_ARTEFACT, &bytes)]) {
        Ok(_) => None,
        Err(e) => {
            let w = format!("the header manifest was not cached: {e}");
            tracing::warn!(key = %direct, "{w}");
            Some(w)
        }
    }
}

/// Artefact names in a cache entry.
const CODE_OBJECT: &str = "code-object";
const LLVM_IR: &str = "llvm-ir.bc";
const ISA: &str = "isa.s";

fn inner_from_entry(
    key: CacheKey,
    code_objects: Vec<Arc<CodeObject>>,
    entry: &crate::cache::disk::Entry,
    bad_entries: Vec<BadEntry>,
) -> CompiledInner {
    CompiledInner {
        key,
        code_objects,
        entry_path: Some(entry.path.clone()),
        command: entry.meta.command.clone(),
        log: String::new(),
        diagnostics: diagnostics::from_artefact(entry.artefact(diagnostics::ARTEFACT)),
        llvm_ir: entry.artefact(LLVM_IR).map(<[u8]>::to_vec),
        isa: entry
            .artefact(ISA)
            .map(|b| String::from_utf8_lossy(b).into_owned()),
        bad_entries,
        cache_warnings: Vec::new(),
    }
}

/// The code objects of a disk hit, or `None` when the entry, though intact (its sha256 sums
/// match), holds no code object hipjit can read for `o.targets` (written by another hipjit
/// version, or by hand). Such an entry is recorded in `bad` and, in the written root, removed,
/// so that the compile that follows publishes a good one in its place ([`DiskCache::put`]
/// never overwrites an intact entry).
fn usable_entry(
    disk: &DiskCache,
    key: &CacheKey,
    entry: &crate::cache::disk::Entry,
    o: &CompileOptions,
    bad: &mut Vec<BadEntry>,
) -> Option<Vec<Arc<CodeObject>>> {
    let reason = match entry.artefact(CODE_OBJECT) {
        None => format!("it has no {CODE_OBJECT} artefact"),
        Some(bytes) => match read_code_objects(key, bytes, o) {
            Ok(code_objects) => return Some(code_objects),
            Err(e) => e.to_string(),
        },
    };
    let writable_root = disk
        .roots()
        .first()
        .is_some_and(|r| entry.path.starts_with(&r.path));
    tracing::warn!(path = %entry.path.display(), %reason, "unusable hipjit cache entry");
    if writable_root {
        if let Err(e) = std::fs::remove_file(&entry.path) {
            if e.kind() != std::io::ErrorKind::NotFound {
                tracing::warn!(path = %entry.path.display(), error = %e,
                    "cannot remove an unusable hipjit cache entry");
            }
        }
    }
    bad.push(BadEntry {
        path: entry.path.clone(),
        reason,
        writable_root,
    });
    None
}

fn read_code_objects(
    key: &CacheKey,
    bytes: &[u8],
    o: &CompileOptions,
) -> Result<Vec<Arc<CodeObject>>, JitError> {
    o.targets
        .iter()
        .map(|t| {
            CodeObject::from_bytes(bytes, Some(t))
                .map(Arc::new)
                .map_err(|source| JitError::CodeObject {
                    key: *key,
                    target: t.to_string(),
                    source: Box::new(source),
                })
        })
        .collect()
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

fn run_checks(inner: &CompiledInner, options: &CompileOptions) -> Result<(), CheckFailed> {
    for co in &inner.code_objects {
        let fail = |what: String| CheckFailed {
            target: co.target_id().to_string(),
            what,
        };
        if co.kernels().is_empty() {
            return Err(fail(
                "the code object has no kernel metadata (NT_AMDGPU_METADATA amdhsa.kernels)".into(),
            ));
        }
        for k in co.kernels() {
            if options.checks.no_spills && (k.sgpr_spill_count > 0 || k.vgpr_spill_count > 0) {
                return Err(fail(format!(
                    "kernel {} spills registers ({} SGPRs, {} VGPRs)",
                    k.name, k.sgpr_spill_count, k.vgpr_spill_count
                )));
            }
            if options.checks.no_scratch
                && (k.private_segment_fixed_size > 0 || k.uses_dynamic_stack)
            {
                return Err(fail(format!(
                    "kernel {} uses scratch memory ({} bytes private segment{})",
                    k.name,
                    k.private_segment_fixed_size,
                    if k.uses_dynamic_stack {
                        ", dynamic stack"
                    } else {
                        ""
                    }
                )));
            }
        }
    }
    Ok(())
}
