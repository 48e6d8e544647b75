//! What a compile gives back on either platform: [`Compiled`], its [`Artefact`]s (AMDGPU code
//! objects or a cubin), where it came from ([`Origin`]) and which compiler made it and why
//! ([`CompilerUsed`]).

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use crate::cache::disk::BadEntry;
use crate::cache::key::CacheKey;
use crate::code_object::cubin::Cubin;
use crate::code_object::{CodeObject, KernelInfo};
use crate::compiler::diagnostics::Diagnostic;
use crate::compiler::CompilerKind;
use crate::safe::device::Device;
use crate::safe::error::LibraryError;
use crate::safe::library::Library;
use crate::target::TargetId;

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
    /// A frozen bundle ([`crate::cache::FrozenBundle`]), served without a compiler.
    Frozen,
}

/// One loadable result of a compile: an AMDGPU code object (hipcc, hipRTC) or a cubin (nvcc,
/// NVRTC). Cheap to clone.
#[derive(Clone, Debug)]
pub enum Artefact {
    /// A code object for one AMDGPU target ID.
    CodeObject(Arc<CodeObject>),
    /// A cubin for one SM target.
    Cubin(Arc<Cubin>),
}

impl Artefact {
    /// The target: the code object's target ID or the cubin's SM target, as text.
    pub fn target_name(&self) -> String {
        match self {
            Artefact::CodeObject(c) => c.target_id().to_string(),
            Artefact::Cubin(c) => c.target().to_string(),
        }
    }

    /// Whether it runs on `device`: the code object's target ID on the device's
    /// ([`TargetId::runs_on`]), the cubin's SM target on the device's
    /// ([`crate::target::SmTarget::runs_on`]).
    pub fn runs_on(&self, device: &Device) -> bool {
        match self {
            Artefact::CodeObject(c) => device.target_id().is_some_and(|t| c.target_id().runs_on(t)),
            Artefact::Cubin(c) => device.sm_target().is_some_and(|t| c.target().runs_on(t)),
        }
    }

    /// Loads it on `device`: [`Library::load`] for a code object, [`Library::load_cubin`] for a
    /// cubin.
    ///
    /// Errors: those of [`Library::load`] / [`Library::load_cubin`].
    pub fn load(&self, device: &Device) -> Result<Library, LibraryError> {
        match self {
            Artefact::CodeObject(c) => Library::load(device, c),
            Artefact::Cubin(c) => Library::load_cubin(device, c),
        }
    }

    /// The bytes as they would be written to a file (a raw ELF either way).
    pub fn elf(&self) -> &[u8] {
        match self {
            Artefact::CodeObject(c) => c.elf(),
            Artefact::Cubin(c) => c.elf(),
        }
    }

    /// The kernel names, in the order the artefact lists them.
    pub fn kernel_names(&self) -> Vec<String> {
        match self {
            Artefact::CodeObject(c) => c.kernels().iter().map(|k| k.name.clone()).collect(),
            Artefact::Cubin(c) => c.kernels().iter().map(|k| k.name.clone()).collect(),
        }
    }
}

/// The compiler that made a result, and why it was the one (`hipjit compile --json` reports
/// it as `"compiler": {"kind", "path", "version", "reason"}`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CompilerUsed {
    /// Its kind: `hipcc`, `nvcc`, `hiprtc` or `nvrtc`.
    pub kind: CompilerKind,
    /// The compiler program or library, symlinks resolved.
    pub path: PathBuf,
    /// Its version in one line ([`crate::compiler::CompilerIdentity::version_summary`]).
    pub version: String,
    /// Why it compiles this source (`selection`).
    pub reason: String,
}

#[derive(Debug)]
pub(crate) struct CompiledInner {
    pub(crate) key: CacheKey,
    pub(crate) targets: Vec<String>,
    pub(crate) artefacts: Vec<Artefact>,
    pub(crate) code_objects: Vec<Arc<CodeObject>>,
    pub(crate) entry_path: Option<PathBuf>,
    pub(crate) command: Vec<String>,
    pub(crate) log: String,
    pub(crate) diagnostics: Vec<Diagnostic>,
    pub(crate) llvm_ir: Option<Vec<u8>>,
    pub(crate) isa: Option<String>,
    pub(crate) bad_entries: Vec<BadEntry>,
    pub(crate) cache_warnings: Vec<String>,
    pub(crate) compiler: CompilerUsed,
}

/// A compiled source: its key, its artefacts (code objects or a cubin), where it came from,
/// which compiler made it and how long the request took. Cheap to clone.
#[derive(Clone, Debug)]
pub struct Compiled {
    pub(crate) inner: Arc<CompiledInner>,
    pub(crate) origin: Origin,
    pub(crate) elapsed: Duration,
}

impl Compiled {
    /// The cache key.
    pub fn key(&self) -> CacheKey {
        self.inner.key
    }
    /// The targets asked for, as the options name them (`gfx90a:xnack-`, `sm_90a`), in order;
    /// an artefact's own target may be less specific (a cubin's SM drops the `a`).
    pub fn targets(&self) -> &[String] {
        &self.inner.targets
    }
    /// One artefact per target, in the order of the options' targets: code objects for
    /// AMDGPU target IDs, one cubin for an SM target.
    pub fn artefacts(&self) -> &[Artefact] {
        &self.inner.artefacts
    }
    /// The code object of the first target; `None` for a cubin.
    pub fn code_object(&self) -> Option<&Arc<CodeObject>> {
        self.inner.code_objects.first()
    }
    /// One code object per AMDGPU target, in the order of
    /// [`crate::compiler::CompileOptions::targets`]; empty for a cubin.
    pub fn code_objects(&self) -> &[Arc<CodeObject>] {
        &self.inner.code_objects
    }
    /// The cubin, for an SM target; `None` for code objects.
    pub fn cubin(&self) -> Option<&Arc<Cubin>> {
        self.inner.artefacts.iter().find_map(|a| match a {
            Artefact::Cubin(c) => Some(c),
            Artefact::CodeObject(_) => None,
        })
    }
    /// The code object whose target ID runs on `device`, if any.
    pub fn code_object_for(&self, device: &TargetId) -> Option<&Arc<CodeObject>> {
        self.inner
            .code_objects
            .iter()
            .find(|c| c.target_id().runs_on(device))
    }
    /// The artefact that runs on `device`, if any ([`Artefact::runs_on`]).
    pub fn artefact_for(&self, device: &Device) -> Option<&Artefact> {
        self.inner.artefacts.iter().find(|a| a.runs_on(device))
    }
    /// The kernels of the first target's code object (their AMDGPU metadata); empty for a
    /// cubin (see [`Cubin::kernels`]).
    pub fn kernels(&self) -> &[KernelInfo] {
        self.code_object().map_or(&[], |c| c.kernels())
    }
    /// Where this result came from.
    pub fn origin(&self) -> Origin {
        self.origin
    }
    /// Whether it came from a cache (memory, disk or remote).
    pub fn is_hit(&self) -> bool {
        self.origin != Origin::Compiler
    }
    /// Wall time of the [`crate::jit::Jit::compile`] call that returned it.
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
    /// The compiler that made it, and why that one ([`CompilerUsed`]). On a disk hit: the
    /// compiler this JIT would have run, whose identity the key holds.
    pub fn compiler(&self) -> &CompilerUsed {
        &self.inner.compiler
    }
    /// The compiler's standard error (warnings) when this process compiled it; empty on a
    /// disk hit (see [`Compiled::diagnostics`]).
    pub fn log(&self) -> &str {
        &self.inner.log
    }
    /// The compiler's warnings (and remarks) for this source, each with its notes, include
    /// chain and excerpt, file names as the user knows them (the source name of the options,
    /// include directories as given): from this compile, or, on a disk hit, as recorded in the
    /// entry when it was compiled. `render_all` prints them as
    /// clang does.
    pub fn diagnostics(&self) -> &[Diagnostic] {
        &self.inner.diagnostics
    }
    /// Device LLVM bitcode, when [`crate::compiler::CompileOptions::dump_llvm_ir`] was set.
    pub fn llvm_ir(&self) -> Option<&[u8]> {
        self.inner.llvm_ir.as_deref()
    }
    /// Device assembly, when [`crate::compiler::CompileOptions::dump_isa`] was set.
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
