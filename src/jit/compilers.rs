//! The compilers of one [`super::Jit`]: each found on first use (a JIT for NVIDIA GPUs never
//! looks for hipcc, and the reverse), then kept; and which one compiles a given request.

use parking_lot::Mutex;

use super::compiled::CompilerUsed;
use crate::compiler::nvcc::Nvcc;
use crate::compiler::{Backend, CompileOptions, Compiler, CompilerConfig, CompilerError};
use crate::runtime::Platform;

/// The compilers found so far.
pub(crate) struct Compilers {
    config: CompilerConfig,
    hipcc: Mutex<Option<Backend>>,
    nvcc: Mutex<Option<Backend>>,
}

impl std::fmt::Debug for Compilers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let path =
            |b: &Mutex<Option<Backend>>| b.lock().as_ref().map(|b| b.identity().path.clone());
        f.debug_struct("Compilers")
            .field("hipcc", &path(&self.hipcc))
            .field("nvcc", &path(&self.nvcc))
            .finish()
    }
}

/// A compiler picked for a request, and why.
#[derive(Clone, Debug)]
pub struct Chosen {
    /// The compiler.
    pub backend: Backend,
    /// Why this one ([`CompilerUsed::reason`]).
    pub reason: String,
}

impl Chosen {
    /// What a result records about its compiler ([`CompilerUsed`]).
    pub fn used(&self) -> CompilerUsed {
        let id = self.backend.identity();
        CompilerUsed {
            kind: id.kind,
            path: id.path.clone(),
            version: id.version_summary(),
            reason: self.reason.clone(),
        }
    }
}

impl Compilers {
    pub(crate) fn new(config: CompilerConfig) -> Compilers {
        Compilers {
            config,
            hipcc: Mutex::new(None),
            nvcc: Mutex::new(None),
        }
    }

    /// hipcc, found now unless found before ([`Compiler::new`]).
    pub(crate) fn hipcc(&self) -> Result<Backend, CompilerError> {
        let mut slot = self.hipcc.lock();
        if let Some(b) = &*slot {
            return Ok(b.clone());
        }
        let b = Backend::Hipcc(Compiler::new(self.config.clone())?);
        *slot = Some(b.clone());
        Ok(b)
    }

    /// nvcc, found now unless found before ([`Nvcc::discover`]; its identity remembered in
    /// [`CompilerConfig::identity_dir`] when set).
    pub(crate) fn nvcc(&self) -> Result<Backend, CompilerError> {
        let mut slot = self.nvcc.lock();
        if let Some(b) = &*slot {
            return Ok(b.clone());
        }
        let explicit = self.config.nvcc.as_deref();
        let nvcc = match &self.config.identity_dir {
            Some(dir) => Nvcc::discover_cached(explicit, dir),
            None => Nvcc::discover(explicit),
        }
        .map_err(|e| CompilerError::Nvcc(Box::new(e)))?;
        let b = Backend::Nvcc(nvcc, self.config.timeout);
        *slot = Some(b.clone());
        Ok(b)
    }

    /// The compiler for `options`: hipcc for AMDGPU target IDs, nvcc for an SM target.
    ///
    /// Errors: [`CompilerError`] when that compiler cannot be found or identified.
    pub(crate) fn choose(&self, options: &CompileOptions) -> Result<Chosen, CompilerError> {
        match options.platform() {
            Platform::Amd => Ok(Chosen {
                backend: self.hipcc()?,
                reason: "hipcc: the process compiler for AMDGPU targets".into(),
            }),
            Platform::Nvidia => Ok(Chosen {
                backend: self.nvcc()?,
                reason: "nvcc: the process compiler for SM targets".into(),
            }),
        }
    }
}
