//! The JIT on HIP's NVIDIA platform: HIP source -> nvcc -> cubin -> the CUDA driver, with the
//! same content-addressed disk cache as the AMD JIT and an in-memory cache of loaded libraries.
//!
//! - Key: [`Nvcc::key`], the record of [`crate::cache::key`] with nvcc's identity (resolved
//!   path and `--version`), the SM target in place of target IDs, the flags, the prelude and
//!   the source.
//! - Disk: [`DiskCache`], shared with the AMD JIT and `hipjit cache`: one file per key holding
//!   the cubin (artefact [`CUBIN_ARTEFACT`]) and its metadata, published atomically and
//!   verified on every read, under the roots of `HIPJIT_CACHE_DIR` (the first written, the rest
//!   read-only; else `$XDG_CACHE_HOME/hipjit`, `~/.cache/hipjit`), with the same ownership rules
//!   and optional size cap. A bad entry is a miss (replaced in the written root); an intact
//!   entry whose cubin does not read is removed from the written root and compiled again. A
//!   missing key is compiled under the key's cross-process lock ([`DiskCache::lock`]).
//!   nvcc's identity is remembered per user ([`crate::compiler::identity`]), never in a cache
//!   root, where another member of a sharing group could forge it.
//! - Sources are bytes (`&str`, `String`, `&[u8]`, `Vec<u8>`), in any encoding nvcc accepts,
//!   keyed by those bytes. The standard is one per `NvJit` ([`NvJit::with_std`]).
//! - Memory: loaded libraries per (device, source, flags), checked by comparing the source
//!   itself, so a hit costs a hash of the source, one lock and a comparison. A miss compiles
//!   and loads once per key however many threads ask at once (single flight).

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use parking_lot::Mutex;

use crate::cache::disk::{CacheError, DiskCache, EntryMeta};
use crate::cache::key::CacheKey;
use crate::cache::memory::fast_hash;
use crate::code_object::cubin::{Cubin, CubinError};
use crate::compiler::diagnostics::Diagnostic;
use crate::compiler::nvcc::{Nvcc, NvccError};
use crate::compiler::CompileOptions;
use crate::device::Device;
use crate::error::LibraryError;
use crate::kernel::Kernel;
use crate::library::Library;

/// Where a result came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NvOrigin {
    /// The in-memory cache (already loaded on the device).
    Memory,
    /// The disk cache.
    Disk,
    /// nvcc ran.
    Compiled,
}

/// An error of the NVIDIA JIT.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum NvJitError {
    /// nvcc could not be found or failed.
    #[error(transparent)]
    Nvcc(#[from] NvccError),
    /// nvcc's output is not a cubin hipjit reads.
    #[error("nvcc wrote {}, which does not read as a cubin: {source}", path.display())]
    Cubin {
        /// The file.
        path: PathBuf,
        /// What was wrong.
        source: CubinError,
    },
    /// The device is not an NVIDIA one.
    #[error("device {ordinal} ({arch_name}) is no NVIDIA device (no sm_NN target)")]
    NotNvidia {
        /// The ordinal.
        ordinal: i32,
        /// Its architecture name.
        arch_name: String,
    },
    /// Loading the cubin failed.
    #[error(transparent)]
    Load(#[from] LibraryError),
    /// The disk cache could not be opened (a root not creatable, or refused by the ownership
    /// rules of [`crate::cache::disk`]) or written.
    #[error(transparent)]
    Cache(#[from] CacheError),
}

/// The name of the cubin artefact in a disk-cache entry (the AMD JIT's is `code-object`).
pub const CUBIN_ARTEFACT: &str = "cubin";

/// A compile result of [`NvJit::compile_detailed`].
#[derive(Debug, Clone)]
pub struct NvCompiled {
    /// The cubin.
    pub cubin: Cubin,
    /// Where it came from ([`NvOrigin::Compiled`] or [`NvOrigin::Disk`]).
    pub origin: NvOrigin,
    /// The cache key (64 hex digits).
    pub key: String,
    /// Time spent in nvcc (zero unless compiled).
    pub compile_time: Duration,
    /// nvcc's warnings (its source named `kernel.cu`), from this compile or recorded in the
    /// disk entry.
    pub diagnostics: Vec<Diagnostic>,
}

/// A source loaded on a device.
#[derive(Debug, Clone)]
pub struct NvLoaded {
    /// The loaded cubin (shared with every caller asking for the same device and source).
    pub library: Arc<Library>,
    /// Where it came from.
    pub origin: NvOrigin,
    /// The cache key (64 hex digits); empty for a memory hit, which skips computing it.
    pub key: String,
    /// Time spent in nvcc (zero unless compiled).
    pub compile_time: Duration,
}

struct Entry {
    source: Box<[u8]>,
    flags: Box<[String]>,
    library: Arc<Library>,
}

type MemoryKey = (u64, i32, usize);

/// The NVIDIA JIT. `Send + Sync`: share one per process.
pub struct NvJit {
    nvcc: Nvcc,
    /// The cache roots, written one first; empty: no disk cache.
    roots: Vec<PathBuf>,
    max_bytes: Option<u64>,
    /// The disk cache over `roots`, opened on first use (or given opened).
    disk: OnceLock<DiskCache>,
    memory: Mutex<HashMap<MemoryKey, Vec<Entry>>>,
    /// One lock per memory key, held while compiling and loading: one compile per key at a
    /// time (single flight); other callers wait, then find the result in memory.
    in_flight: Mutex<HashMap<MemoryKey, Arc<Mutex<()>>>>,
    /// Kernels by (device, source, flags, name): [`NvJit::kernel`].
    kernels: crate::cache::kernels::KernelCache<Vec<String>>,
}

impl std::fmt::Debug for NvJit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NvJit")
            .field("nvcc", &self.nvcc.path())
            .field("roots", &self.roots)
            .finish()
    }
}

/// The default disk-cache root (the written one): the first `HIPJIT_CACHE_DIR` root, else
/// `$XDG_CACHE_HOME/hipjit` or `~/.cache/hipjit`; `None` when none is set.
pub fn default_cache_dir() -> Option<PathBuf> {
    crate::cache::disk::roots_from_env(|v| std::env::var_os(v))
        .and_then(|roots| roots.into_iter().next())
}

impl NvJit {
    /// A JIT over `nvcc` with its disk cache rooted at `disk` (one root, written; `None`: no
    /// disk cache). The root is opened ([`DiskCache::open`]) on the first compile, whose
    /// error it is when the root cannot be created or is refused.
    pub fn new(nvcc: Nvcc, disk: Option<PathBuf>) -> NvJit {
        NvJit::with_roots(nvcc, disk.into_iter().collect())
    }

    /// A JIT over `nvcc` with its disk cache over `roots`: the first written, the others
    /// read-only lookups (empty: no disk cache). Opened on the first compile, as [`NvJit::new`].
    pub fn with_roots(nvcc: Nvcc, roots: Vec<PathBuf>) -> NvJit {
        NvJit {
            nvcc,
            roots,
            max_bytes: None,
            disk: OnceLock::new(),
            memory: Mutex::new(HashMap::new()),
            in_flight: Mutex::new(HashMap::new()),
            kernels: Default::default(),
        }
    }

    /// A JIT over `nvcc` with an opened disk cache (`None`: none), e.g. the AMD JIT's.
    pub fn with_disk_cache(nvcc: Nvcc, disk: Option<DiskCache>) -> NvJit {
        let roots = disk
            .as_ref()
            .map(|d| d.roots().iter().map(|r| r.path.clone()).collect())
            .unwrap_or_default();
        let jit = NvJit::with_roots(nvcc, roots);
        if let Some(d) = disk {
            let _ = jit.disk.set(d);
        }
        jit
    }

    /// Sets a size cap in bytes for the written cache root (least recently used entries are
    /// removed after each write: [`DiskCache::with_max_bytes`]), on the cache whether it is
    /// open already or not yet.
    pub fn with_max_cache_bytes(mut self, max_bytes: Option<u64>) -> Self {
        self.max_bytes = max_bytes;
        if let Some(d) = self.disk.take() {
            let _ = self.disk.set(d.with_max_bytes(max_bytes));
        }
        self
    }

    /// nvcc discovered in the documented order, the disk cache over the roots of
    /// `HIPJIT_CACHE_DIR` (else the default root; none when nothing is set), nvcc's identity
    /// remembered per user ([`Nvcc::discover`]).
    ///
    /// Errors: [`NvccError`] from discovery, [`NvJitError::Cache`] from opening the roots.
    pub fn from_env() -> Result<NvJit, NvJitError> {
        let roots = crate::cache::disk::roots_from_env(|v| std::env::var_os(v)).unwrap_or_default();
        Self::open(roots)
    }

    /// nvcc discovered in the documented order, the disk cache rooted at `dir` (one root,
    /// written; `None`: none), nvcc's identity remembered per user.
    ///
    /// Errors: [`NvccError`] from discovery, [`NvJitError::Cache`] from opening the root.
    pub fn with_cache_dir(dir: Option<PathBuf>) -> Result<NvJit, NvJitError> {
        Self::open(dir.into_iter().collect())
    }

    fn open(roots: Vec<PathBuf>) -> Result<NvJit, NvJitError> {
        if roots.is_empty() {
            return Ok(NvJit::with_roots(Nvcc::discover(None)?, roots));
        }
        let disk = DiskCache::open(&roots)?;
        let nvcc = Nvcc::discover(None)?;
        Ok(NvJit::with_disk_cache(nvcc, Some(disk)))
    }

    /// This JIT compiling with the C++ standard `std` ([`Nvcc::with_std`]; default C++17).
    /// Call it before the first compile: results already in memory are forgotten.
    pub fn with_std(mut self, std: crate::compiler::CxxStd) -> Self {
        self.nvcc = self.nvcc.with_std(std);
        self.memory.lock().clear();
        self
    }

    /// The compiler.
    pub fn nvcc(&self) -> &Nvcc {
        &self.nvcc
    }

    /// The written disk-cache root.
    pub fn disk_dir(&self) -> Option<&Path> {
        self.roots.first().map(PathBuf::as_path)
    }

    /// The disk cache, opened now if it was not yet; `None` when there is none.
    ///
    /// Errors: [`NvJitError::Cache`] from [`DiskCache::open`].
    pub fn disk_cache(&self) -> Result<Option<&DiskCache>, NvJitError> {
        if self.roots.is_empty() {
            return Ok(None);
        }
        if let Some(d) = self.disk.get() {
            return Ok(Some(d));
        }
        let d = DiskCache::open(&self.roots)?.with_max_bytes(self.max_bytes);
        Ok(Some(self.disk.get_or_init(|| d)))
    }

    /// Forgets the loaded libraries (they unload when their last user drops them).
    pub fn clear_memory(&self) {
        self.memory.lock().clear();
        self.kernels.clear();
    }

    /// The kernel `name` of `source` compiled with `flags` and loaded on `device`
    /// ([`NvJit::load`], then [`Library::kernel`]), cached per (device, source, flags, name):
    /// a hit compares the source, flags and name in full and clones the owned [`Kernel`],
    /// with no driver call.
    ///
    /// Errors: those of [`NvJit::load`], [`NvJitError::Load`] with
    /// [`LibraryError::KernelNotFound`](crate::error::LibraryError::KernelNotFound) naming the
    /// kernels there are.
    pub fn kernel(
        &self,
        device: &Device,
        source: impl AsRef<[u8]>,
        name: &str,
        flags: &[String],
    ) -> Result<Kernel, NvJitError> {
        let source = source.as_ref();
        if let Some(k) = self.kernels.get(
            device,
            source,
            |f: &Vec<String>| f.as_slice() == flags,
            name,
        ) {
            return Ok(k);
        }
        let kernel = self.load(device, source, flags)?.library.kernel(name)?;
        self.kernels
            .insert(device, source, flags.to_vec(), name, &kernel);
        Ok(kernel)
    }

    /// Compiles `source` for `sm`, or reads the disk cache; returns the cubin, where it came
    /// from, the key (64 hex digits) and the time spent in nvcc.
    ///
    /// Errors: [`NvJitError::Nvcc`], [`NvJitError::Cubin`], [`NvJitError::Cache`] (the cache
    /// cannot be opened, or the entry cannot be written).
    pub fn compile(
        &self,
        source: impl AsRef<[u8]>,
        sm: crate::cuda::target::SmTarget,
        flags: &[String],
    ) -> Result<(Cubin, NvOrigin, String, Duration), NvJitError> {
        self.compile_detailed(source, sm, flags)
            .map(|c| (c.cubin, c.origin, c.key, c.compile_time))
    }

    /// [`NvJit::compile`], with nvcc's warnings: those of this compile, or, on a disk hit,
    /// those recorded in the entry when it was compiled.
    ///
    /// Errors: as [`NvJit::compile`].
    pub fn compile_detailed(
        &self,
        source: impl AsRef<[u8]>,
        sm: crate::cuda::target::SmTarget,
        flags: &[String],
    ) -> Result<NvCompiled, NvJitError> {
        let source = source.as_ref();
        Nvcc::check_flags(flags)?;
        let key = self.nvcc.key(source, sm, flags);
        let disk = self.disk_cache()?;
        let hit = |(cubin, diagnostics)| NvCompiled {
            cubin,
            origin: NvOrigin::Disk,
            key: key.to_hex(),
            compile_time: Duration::ZERO,
            diagnostics,
        };
        if let Some(found) = disk.and_then(|d| disk_hit(d, &key)) {
            return Ok(hit(found));
        }
        // Another process may be compiling this key: wait for it (at most the AMD compile
        // timeout's default, 300 s), then look again; past that, compile without the lock.
        let lock = disk.and_then(|d| match d.lock(&key, Duration::from_secs(300)) {
            crate::cache::disk::LockOutcome::Held(l) => Some(l),
            other => {
                tracing::warn!(%key, outcome = ?other, "compiling without the cache's compile lock");
                None
            }
        });
        if let (Some(d), Some(_)) = (disk, &lock) {
            if let Some(found) = disk_hit(d, &key) {
                return Ok(hit(found));
            }
        }
        let t = Instant::now();
        let (bytes, diagnostics) = self.nvcc.compile_logged(source, sm, flags)?;
        let took = t.elapsed();
        let cubin = Cubin::from_bytes(&bytes).map_err(|source| NvJitError::Cubin {
            path: disk
                .map(|d| DiskCache::entry_path(&d.roots()[0].path, &key))
                .unwrap_or_default(),
            source,
        })?;
        if let Some(d) = disk {
            let command = std::iter::once(self.nvcc.path().display().to_string())
                .chain(self.nvcc.key_flags(sm, flags))
                .collect();
            let meta = EntryMeta {
                format_version: 0,
                key: String::new(),
                command,
                compiler: self.nvcc.identity(),
                options: CompileOptions {
                    std: self.nvcc.std(),
                    extra_flags: flags.to_vec(),
                    ..CompileOptions::default()
                },
                tracked_headers: Nvcc::prelude_headers(),
                dependencies: Vec::new(),
                created_unix_ms: SystemTime::now()
                    .duration_since(UNIX_EPOCH)
                    .map_or(0, |d| d.as_millis() as u64),
                artefacts: Vec::new(),
            };
            let recorded = crate::compiler::diagnostics::to_artefact(&diagnostics);
            let mut artefacts: Vec<(&str, &[u8])> = vec![(CUBIN_ARTEFACT, &bytes)];
            if let Some(r) = &recorded {
                artefacts.push((crate::compiler::diagnostics::ARTEFACT, r));
            }
            d.put(&key, meta, &artefacts)?;
        }
        Ok(NvCompiled {
            cubin,
            origin: NvOrigin::Compiled,
            key: key.to_hex(),
            compile_time: took,
            diagnostics,
        })
    }

    /// Compiles (or finds) `source` and loads it on `device`; a second call for the same
    /// device, source and flags returns the same library from memory.
    ///
    /// Errors: [`NvJitError::NotNvidia`], those of [`NvJit::compile`], [`NvJitError::Load`].
    pub fn load(
        &self,
        device: &Device,
        source: impl AsRef<[u8]>,
        flags: &[String],
    ) -> Result<NvLoaded, NvJitError> {
        let source = source.as_ref();
        let mut h = fast_hash(source);
        for f in flags {
            h = (h.rotate_left(7) ^ fast_hash(f.as_bytes())).wrapping_mul(0x9e37_79b9_7f4a_7c15);
        }
        let mkey = (
            h,
            device.ordinal(),
            Arc::as_ptr(&device.runtime().inner) as usize,
        );
        if let Some(hit) = self.memory_hit(&mkey, source, flags) {
            return Ok(hit);
        }
        let flight = Arc::clone(self.in_flight.lock().entry(mkey).or_default());
        let _flight = flight.lock();
        // Another caller may have loaded it while this one waited.
        if let Some(hit) = self.memory_hit(&mkey, source, flags) {
            return Ok(hit);
        }
        let sm = device.sm_target().ok_or_else(|| NvJitError::NotNvidia {
            ordinal: device.ordinal(),
            arch_name: device.arch_name().to_owned(),
        })?;
        let (cubin, origin, key, compile_time) = self.compile(source, sm, flags)?;
        let library = Arc::new(Library::load_cubin(device, &cubin)?);
        self.memory.lock().entry(mkey).or_default().push(Entry {
            source: source.into(),
            flags: flags.into(),
            library: Arc::clone(&library),
        });
        Ok(NvLoaded {
            library,
            origin,
            key,
            compile_time,
        })
    }
}

impl NvJit {
    #[inline]
    fn memory_hit(&self, mkey: &MemoryKey, source: &[u8], flags: &[String]) -> Option<NvLoaded> {
        let memory = self.memory.lock();
        let e = memory
            .get(mkey)?
            .iter()
            .find(|e| &*e.source == source && &*e.flags == flags)?;
        Some(NvLoaded {
            library: Arc::clone(&e.library),
            origin: NvOrigin::Memory,
            key: String::new(),
            compile_time: Duration::ZERO,
        })
    }
}

/// The cubin of `key`'s entry, when a root holds a valid one that reads as a cubin. Bad
/// entries are misses ([`DiskCache::get`] reports them; the next write replaces one in the
/// written root). An intact entry without a readable cubin (written by another hipjit version,
/// or by hand) is reported and, in the written root, removed, so that the compile that follows
/// publishes a good one in its place ([`DiskCache::put`] never overwrites an intact entry).
fn disk_hit(disk: &DiskCache, key: &CacheKey) -> Option<(Cubin, Vec<Diagnostic>)> {
    let entry = disk.get(key).entry?;
    let reason = match entry.artefact(CUBIN_ARTEFACT) {
        None => format!("it has no {CUBIN_ARTEFACT} artefact"),
        Some(bytes) => match Cubin::from_bytes(bytes) {
            Ok(cubin) => {
                let diagnostics = crate::compiler::diagnostics::from_artefact(
                    entry.artefact(crate::compiler::diagnostics::ARTEFACT),
                );
                return Some((cubin, diagnostics));
            }
            Err(e) => e.to_string(),
        },
    };
    tracing::warn!(path = %entry.path.display(), %reason, "unusable hipjit cache entry");
    let written = disk
        .roots()
        .first()
        .is_some_and(|r| entry.path.starts_with(&r.path));
    if written {
        if let Err(e) = std::fs::remove_file(&entry.path) {
            if e.kind() != std::io::ErrorKind::NotFound {
                tracing::warn!(path = %entry.path.display(), error = %e,
                    "cannot remove an unusable hipjit cache entry");
            }
        }
    }
    None
}
