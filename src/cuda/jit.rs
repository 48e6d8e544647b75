//! The JIT on HIP's NVIDIA platform: HIP source -> nvcc -> cubin -> the CUDA driver, with a
//! content-addressed disk cache (safe across processes) and an in-memory cache of loaded
//! libraries.
//!
//! - Key: [`Nvcc::cache_key`] (nvcc's path and `--version`, the SM target, flags, the prelude,
//!   the source).
//! - Disk: `<root>/nvidia/<key>.cubin` under the first root of `HIPJIT_CACHE_DIR` (else
//!   `$XDG_CACHE_HOME/hipjit`, `~/.cache/hipjit`). Written to a temporary file in the same
//!   directory, synced and renamed into place, so a reader sees a whole cubin or none; a file
//!   that does not read as a cubin is compiled again and replaced.
//! - Memory: loaded libraries per (device, source, flags), checked by comparing the source
//!   itself, so a hit costs a hash of the source, one lock and a comparison. A miss compiles
//!   and loads once per key however many threads ask at once (single flight).

use std::collections::HashMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::Mutex;

use crate::cache::memory::fast_hash;
use crate::code_object::cubin::{Cubin, CubinError};
use crate::compiler::nvcc::{Nvcc, NvccError};
use crate::device::Device;
use crate::error::LibraryError;
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
    /// The disk cache could not be written.
    #[error("cannot write the cache entry {}: {source}", path.display())]
    CacheWrite {
        /// The path.
        path: PathBuf,
        /// The error.
        source: std::io::Error,
    },
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
    source: Box<str>,
    flags: Box<[String]>,
    library: Arc<Library>,
}

type MemoryKey = (u64, i32, usize);

/// The NVIDIA JIT. `Send + Sync`: share one per process.
pub struct NvJit {
    nvcc: Nvcc,
    disk: Option<PathBuf>,
    memory: Mutex<HashMap<MemoryKey, Vec<Entry>>>,
    /// One lock per memory key, held while compiling and loading: one compile per key at a
    /// time (single flight); other callers wait, then find the result in memory.
    in_flight: Mutex<HashMap<MemoryKey, Arc<Mutex<()>>>>,
}

impl std::fmt::Debug for NvJit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NvJit")
            .field("nvcc", &self.nvcc.path())
            .field("disk", &self.disk)
            .finish()
    }
}

/// The default disk-cache directory: `nvidia/` under the first `HIPJIT_CACHE_DIR` root, else
/// under `$XDG_CACHE_HOME/hipjit` or `~/.cache/hipjit`; `None` when none is set.
pub fn default_cache_dir() -> Option<PathBuf> {
    crate::cache::disk::roots_from_env(|v| std::env::var_os(v))
        .and_then(|roots| roots.into_iter().next())
        .map(|r| r.join("nvidia"))
}

impl NvJit {
    /// A JIT over `nvcc` with its disk cache in `disk` (`None`: no disk cache).
    pub fn new(nvcc: Nvcc, disk: Option<PathBuf>) -> NvJit {
        NvJit {
            nvcc,
            disk,
            memory: Mutex::new(HashMap::new()),
            in_flight: Mutex::new(HashMap::new()),
        }
    }

    /// nvcc discovered in the documented order, the default cache directory (which also
    /// remembers nvcc's identity: [`Nvcc::discover_cached`]).
    ///
    /// Errors: [`NvccError`] from discovery.
    pub fn from_env() -> Result<NvJit, NvJitError> {
        Self::with_cache_dir(default_cache_dir())
    }

    /// nvcc discovered in the documented order, the disk cache in `dir` (`None`: none).
    ///
    /// Errors: [`NvccError`] from discovery.
    pub fn with_cache_dir(dir: Option<PathBuf>) -> Result<NvJit, NvJitError> {
        let nvcc = match &dir {
            Some(d) => Nvcc::discover_cached(None, d)?,
            None => Nvcc::discover(None)?,
        };
        Ok(NvJit::new(nvcc, dir))
    }

    /// The compiler.
    pub fn nvcc(&self) -> &Nvcc {
        &self.nvcc
    }

    /// The disk-cache directory.
    pub fn disk_dir(&self) -> Option<&Path> {
        self.disk.as_deref()
    }

    /// Forgets the loaded libraries (they unload when their last user drops them).
    pub fn clear_memory(&self) {
        self.memory.lock().clear();
    }

    /// Compiles `source` for `sm`, or reads the disk cache.
    ///
    /// Errors: [`NvJitError::Nvcc`], [`NvJitError::Cubin`], [`NvJitError::CacheWrite`].
    pub fn compile(
        &self,
        source: &str,
        sm: crate::cuda::target::SmTarget,
        flags: &[String],
    ) -> Result<(Cubin, NvOrigin, String, Duration), NvJitError> {
        let key = self.nvcc.cache_key(source, sm, flags);
        let path = self.disk.as_ref().map(|d| d.join(format!("{key}.cubin")));
        if let Some(p) = &path {
            if let Ok(bytes) = std::fs::read(p) {
                match Cubin::from_bytes(&bytes) {
                    Ok(c) => return Ok((c, NvOrigin::Disk, key, Duration::ZERO)),
                    Err(e) => {
                        tracing::warn!(path = %p.display(), error = %e, "bad cache entry; compiling again")
                    }
                }
            }
        }
        let t = Instant::now();
        let bytes = self.nvcc.compile(source, sm, flags)?;
        let took = t.elapsed();
        let cubin = Cubin::from_bytes(&bytes).map_err(|source| NvJitError::Cubin {
            path: path.clone().unwrap_or_default(),
            source,
        })?;
        if let Some(p) = &path {
            write_atomically(p, &bytes)?;
        }
        Ok((cubin, NvOrigin::Compiled, key, took))
    }

    /// Compiles (or finds) `source` and loads it on `device`; a second call for the same
    /// device, source and flags returns the same library from memory.
    ///
    /// Errors: [`NvJitError::NotNvidia`], those of [`NvJit::compile`], [`NvJitError::Load`].
    pub fn load(
        &self,
        device: &Device,
        source: &str,
        flags: &[String],
    ) -> Result<NvLoaded, NvJitError> {
        let mut h = fast_hash(source.as_bytes());
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
    fn memory_hit(&self, mkey: &MemoryKey, source: &str, flags: &[String]) -> Option<NvLoaded> {
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

fn write_atomically(path: &Path, bytes: &[u8]) -> Result<(), NvJitError> {
    let err = |source| NvJitError::CacheWrite {
        path: path.to_path_buf(),
        source,
    };
    let dir = path.parent().unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir).map_err(err)?;
    let mut tmp = tempfile::Builder::new()
        .prefix(".tmp-")
        .tempfile_in(dir)
        .map_err(err)?;
    tmp.write_all(bytes).map_err(err)?;
    tmp.as_file().sync_all().map_err(err)?;
    tmp.persist(path).map_err(|e| err(e.error))?;
    Ok(())
}
