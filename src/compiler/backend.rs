//! One interface over hipjit's four compilers: [`Backend`] is hipcc or nvcc (a process per
//! compile) or hipRTC or NVRTC (in process), each giving the JIT ([`crate::jit::Jit`]) the same
//! three things: its identity, the direct key of a compile (`key`) and a
//! [`CompileOutput`] (the code object or cubin, the command or options used, the warnings, and
//! the files the compiler read for the header manifest).
//!
//! The in-process compilers share one backend ([`super::rtc::backend::InProcess`]), whose
//! module says which options each is handed.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::compiler::nvcc::{Nvcc, NvccError};
use crate::compiler::request::{FromKeyRecord, KeyInputs};
use crate::compiler::rtc::backend::{in_process, InProcess};
pub use crate::compiler::rtc::backend::{HipRtcBackend, NvrtcBackend, RtcLibrary, RtcProgram};
use crate::compiler::{
    CompileError, CompileOptions, CompileOutput, Compiler, CompilerConfig, CompilerError,
    CompilerIdentity, CompilerKind,
};
use crate::safe::runtime::Platform;

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
    /// The testing compiler (feature `testing`): its output is its source
    /// ([`crate::compiler::fake`]).
    #[cfg(feature = "testing")]
    Fake(crate::compiler::fake::FakeCompiler),
}

/// The nvcc beside which NVRTC is looked for: `config`'s, else the one found
/// ([`Nvcc::find`]).
pub fn nvcc_for_nvrtc(config: &CompilerConfig) -> Option<PathBuf> {
    config.nvcc.clone().or_else(|| Nvcc::find(None).ok())
}

impl Backend {
    /// Finds and identifies the compiler of `kind` as `config` says: hipcc
    /// (`Compiler::new`), nvcc ([`Nvcc::discover`]; its identity remembered in
    /// [`CompilerConfig::identity_dir`] when set), hipRTC (beside `runtime`, the HIP runtime
    /// in use, when given) or NVRTC (beside the nvcc that would be used: [`nvcc_for_nvrtc`]),
    /// the in-process ones in [`CompilerConfig::rtc_worker`]'s workers when set. The one
    /// place a kind becomes a compiler.
    ///
    /// Errors: [`CompilerError`] naming why the compiler cannot be found or identified.
    pub fn open(
        kind: CompilerKind,
        config: &CompilerConfig,
        runtime: Option<&Path>,
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
            CompilerKind::HipRtc => InProcess::open(runtime, dir)
                .map(|b| Backend::HipRtc(b.in_workers(config)))
                .map_err(in_process),
            CompilerKind::Nvrtc => InProcess::open(nvcc_for_nvrtc(config).as_deref(), dir)
                .map(|b| Backend::Nvrtc(b.in_workers(config)))
                .map_err(in_process),
            #[cfg(feature = "testing")]
            CompilerKind::Fake => Ok(Backend::Fake(crate::compiler::fake::FakeCompiler::new())),
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
            #[cfg(feature = "testing")]
            Backend::Fake(f) => f.identity(),
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
            _ => std::borrow::Cow::Borrowed(&[]),
        }
    }

    /// The absolute search directories the compiler searches besides the options' include
    /// directories and extra flags, for the header manifest's directory records
    /// (`record`): NVRTC's `-I` of the CUDA toolkit's headers and of
    /// CCCL's; nvcc's (its toolkit's `include` and `include/cccl`, which its profile adds)
    /// and its host compiler's include search list; hipcc's include search list
    /// ([`crate::compiler::CompilerIdentity::system_include_dirs`]); none for hipRTC.
    pub fn own_search_dirs(&self) -> Vec<PathBuf> {
        match self {
            Backend::Nvrtc(b) => b.search_dirs(),
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
            Backend::HipRtc(b) => b.search_dirs(),
            #[cfg(feature = "testing")]
            Backend::Fake(_) => Vec::new(),
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
            Backend::HipRtc(b) => b.timeout(),
            Backend::Nvrtc(b) => b.timeout(),
            #[cfg(feature = "testing")]
            Backend::Fake(_) => Duration::from_secs(300),
        }
    }

    /// Checks what this compiler cannot do with `options` beyond
    /// [`CompileOptions::validate`]: hipRTC compiles one target without dumps, NVRTC has no
    /// optimisation levels.
    ///
    /// Errors: [`CompileError::InProcess`] with [`RtcError::Arch`](crate::compiler::rtc::RtcError::Arch) naming the targets and why.
    pub fn check_options(&self, options: &CompileOptions) -> Result<(), CompileError> {
        match self {
            Backend::HipRtc(b) => b.options(options).map(drop).map_err(in_process),
            Backend::Nvrtc(b) => b.options(options).map(drop).map_err(in_process),
            _ => Ok(()),
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
            Backend::HipRtc(b) => b.request(source, options, extra),
            Backend::Nvrtc(b) => b.request(source, options, extra),
            #[cfg(feature = "testing")]
            Backend::Fake(f) => f.request(source, options, extra),
        }
    }

    /// Compiles `source` with `options`.
    ///
    /// Errors: hipcc's [`CompileError`] variants; nvcc's errors in [`CompileError::Nvcc`];
    /// hipRTC's and NVRTC's in [`CompileError::InProcess`] (a source holding a NUL byte among
    /// them, [`RtcError::NulByte`](crate::compiler::rtc::RtcError::NulByte): the libraries take C strings);
    /// [`CompileError::SpecialToolkitFile`] before NVRTC runs when the toolkit's header tree
    /// holds a FIFO, socket or device;
    /// [`CompileError::SpecialInclude`] before any compiler runs when an `#include` hipjit can
    /// follow names a FIFO, socket or device.
    pub fn compile(
        &self,
        source: &[u8],
        options: &CompileOptions,
    ) -> Result<CompileOutput, CompileError> {
        self.compile_noting(source, options, &mut None)
    }

    /// [`Backend::compile`], noting in `rejection` the files a compile the compiler rejected
    /// read, when it says (hipcc's `Compiler::compile_noting`; the other compilers never
    /// do, so their failures are not remembered).
    pub(crate) fn compile_noting(
        &self,
        source: &[u8],
        options: &CompileOptions,
        rejection: &mut Option<super::Rejection>,
    ) -> Result<CompileOutput, CompileError> {
        // A FIFO or device among the includes hipjit can follow would hang or never end the
        // compile (in process, hipRTC and NVRTC have no timeout); the options by the
        // in-process compilers' rules.
        let handed = super::refusal::handed_options(self, source, options)?;
        match self {
            Backend::Hipcc(c) => c.compile_noting(source, options, rejection),
            Backend::Nvcc(n, timeout) => {
                n.compile_options(source, options, *timeout)
                    .map_err(|e| match e {
                        NvccError::Options(o) => CompileError::Options(o),
                        other => CompileError::Nvcc(Box::new(other)),
                    })
            }
            Backend::HipRtc(b) => b.compile(source, options, handed),
            Backend::Nvrtc(b) => b.compile(source, options, handed),
            #[cfg(feature = "testing")]
            Backend::Fake(f) => f.compile(source, options),
        }
    }
}
