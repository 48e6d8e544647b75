//! The testing compiler (feature `testing`; [`CompilerKind::Fake`]): a backend that needs no
//! toolchain, for tests of everything around a compile (the caches, the hit memo, loading)
//! through [`crate::jit::Jit`]. Its output is its source, handed through unchanged: a test
//! hands it a code object (an AMDGPU ELF) as the source. Deterministic, instant, and keyed as
//! hipcc's requests are (source, options, its identity), so a second request hits.
//!
//! Ask for it with `JitOptions::compiler = Some(CompilerChoice::Kind(CompilerKind::Fake))`
//! or `HIPJIT_COMPILER=fake`; `Auto` never takes it.

use std::path::PathBuf;
use std::time::{Duration, SystemTime};

use crate::compiler::request::{FromKeyRecord, KeyInputs};
use crate::compiler::{
    CompileError, CompileOptions, CompileOutput, CompilerIdentity, CompilerKind,
};
use crate::digest::{hex, sha256};

/// The version text of the testing compiler's identity.
pub const VERSION: &str = "hipjit fake compiler 1 (output = source)\n";

/// The testing compiler: its identity, made without reading any file.
#[derive(Clone, Debug)]
pub struct FakeCompiler {
    identity: CompilerIdentity,
}

impl Default for FakeCompiler {
    fn default() -> Self {
        FakeCompiler::new()
    }
}

impl FakeCompiler {
    /// The testing compiler, named `<hipjit fake compiler>`, its fingerprint the sha256 of
    /// [`VERSION`].
    pub fn new() -> FakeCompiler {
        FakeCompiler {
            identity: CompilerIdentity {
                kind: CompilerKind::Fake,
                path: PathBuf::from("<hipjit fake compiler>"),
                version: VERSION.to_owned(),
                fingerprint: hex(&sha256(VERSION.as_bytes())),
                covered: Vec::new(),
                root: Default::default(),
                header_dirs: Vec::new(),
                host_compiler: None,
                system_include_dirs: Vec::new(),
            },
        }
    }

    /// Its identity.
    pub fn identity(&self) -> &CompilerIdentity {
        &self.identity
    }

    /// The request record of `source` with `options` and the caller's signature `extra`: as
    /// hipcc's, with no environment.
    pub fn request<K: FromKeyRecord>(
        &self,
        source: &[u8],
        options: &CompileOptions,
        extra: &[u8],
    ) -> K {
        KeyInputs {
            source,
            options,
            compiler: &self.identity,
            env: &[],
            extra,
        }
        .record()
    }

    /// "Compiles" `source`: the output is `source` itself, with no diagnostics and no
    /// dependencies.
    ///
    /// Errors: none; the signature is the backends'.
    pub fn compile(
        &self,
        source: &[u8],
        _options: &CompileOptions,
    ) -> Result<CompileOutput, CompileError> {
        Ok(CompileOutput {
            code_object: source.to_vec(),
            command: vec![self.identity.path.display().to_string()],
            log: String::new(),
            diagnostics: Vec::new(),
            dependencies: Vec::new(),
            started: SystemTime::now(),
            llvm_ir: None,
            isa: None,
            duration: Duration::ZERO,
        })
    }
}
