//! One interface over hipjit's compilers: [`Backend`] is hipcc or nvcc (processes) today, with
//! the in-process compilers (hipRTC, NVRTC) beside them, each giving the JIT
//! ([`crate::jit::Jit`]) the same three things: its identity, the direct key of a compile
//! ([`crate::cache::key`]) and a [`CompileOutput`] (the code object or cubin, the command or
//! options used, the warnings, and the files the compiler read for the header manifest).

use std::ffi::OsString;
use std::time::Duration;

use crate::cache::key::{self, CacheKey, KeyInputs};
use crate::compiler::nvcc::{Nvcc, NvccError};
use crate::compiler::{
    CompileError, CompileOptions, CompileOutput, Compiler, CompilerIdentity, CompilerKind,
};
use crate::runtime::Platform;

/// A compiler ready to compile, behind one interface. Cheap to clone.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub enum Backend {
    /// `hipcc`, a process per compile: AMDGPU code objects ([`Compiler`]).
    Hipcc(Compiler),
    /// `nvcc`, a process per compile: cubins for HIP's NVIDIA platform ([`Nvcc`]), killed
    /// after the timeout.
    Nvcc(Nvcc, Duration),
}

impl Backend {
    /// The kind of compiler (hashed into every key, reported with every result).
    pub fn kind(&self) -> CompilerKind {
        self.identity().kind
    }

    /// The platform whose code it produces.
    pub fn platform(&self) -> Platform {
        match self {
            Backend::Hipcc(_) => Platform::Amd,
            Backend::Nvcc(..) => Platform::Nvidia,
        }
    }

    /// Its identity: kind, resolved path, version text, content fingerprint.
    pub fn identity(&self) -> &CompilerIdentity {
        match self {
            Backend::Hipcc(c) => c.identity(),
            Backend::Nvcc(n, _) => n.identity_ref(),
        }
    }

    /// The environment the compiler runs with that decides its search paths (`CPATH` and
    /// the like, for [`crate::cache::manifest::extra_search_dirs`]); empty for nvcc, whose
    /// keyed variables are [`crate::compiler::nvcc::NVCC_KEY_ENV`].
    pub fn environment(&self) -> &[(String, OsString)] {
        match self {
            Backend::Hipcc(c) => c.environment(),
            Backend::Nvcc(..) => &[],
        }
    }

    /// How long one compile may run before it is killed.
    pub fn timeout(&self) -> Duration {
        match self {
            Backend::Hipcc(c) => c.timeout(),
            Backend::Nvcc(_, t) => *t,
        }
    }

    /// The direct key of compiling `source` with `options` (already effective: see
    /// [`crate::jit::Jit::effective_options`]) and the caller's signature `extra`: everything
    /// known before the compiler runs ([`crate::cache::key`]).
    pub fn direct_key(&self, source: &[u8], options: &CompileOptions, extra: &[u8]) -> CacheKey {
        match self {
            Backend::Hipcc(c) => key::compute(&KeyInputs {
                source,
                options,
                compiler: c.identity(),
                env: c.environment(),
                extra,
            }),
            Backend::Nvcc(n, _) => n.direct_key(source, options, extra),
        }
    }

    /// Compiles `source` with `options`.
    ///
    /// Errors: hipcc's [`CompileError`] variants; nvcc's errors in [`CompileError::Nvcc`].
    pub fn compile(
        &self,
        source: &[u8],
        options: &CompileOptions,
    ) -> Result<CompileOutput, CompileError> {
        match self {
            Backend::Hipcc(c) => c.compile(source, options),
            Backend::Nvcc(n, timeout) => {
                n.compile_options(source, options, *timeout)
                    .map_err(|e| match e {
                        NvccError::Options(o) => CompileError::Options(o),
                        other => CompileError::Nvcc(Box::new(other)),
                    })
            }
        }
    }
}
