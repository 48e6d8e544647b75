//! What each compiler refuses before it runs: [`before_compiling`] gives the error a compile
//! of a source with some options would end with before any compiler process starts or any
//! compiler library is called, so that a tool that only looks at a request
//! (`hipjit cache explain`, [`crate::jit::Jit::explain`]) refuses it as a compile does, with
//! the same error.
//!
//! In the order a compile meets them: an `#include` naming a FIFO, socket or device
//! ([`super::special_include`]); the options as the compiler takes them
//! ([`super::CompileOptions::validate_for`], its flag rules); what the in-process compilers
//! cannot do ([`super::Backend::check_options`]); an include directory that does not exist or
//! is not a directory; for NVRTC, what it reads unkeyed (`nvrtc::checked_input`: an
//! `#include` that can name a file outside the include directories). What only the compiler
//! can tell (a target it does not support, a
//! missing device library, a compile error) is not known here.

use super::backend::Backend;
use super::rtc::RtcError;
use super::{CompileError, CompileOptions, CompilerKind};
use crate::compiler::nvcc::NvccError;

/// The error compiling `source` with `options` (effective options, as
/// [`Backend::compile`] gets them) by `backend` would end with before the compiler runs, if
/// any (see the module documentation).
///
/// Errors: [`CompileError::SpecialInclude`]; [`CompileError::Options`] for options the
/// compiler refuses; [`CompileError::InProcess`] with [`RtcError::Arch`] (hipRTC with several
/// targets, NVRTC with an optimisation level...) or [`RtcError::IncludeDir`];
/// [`CompileError::IncludeDir`] (hipcc) or [`CompileError::Nvcc`] with
/// [`NvccError::IncludeDir`] for an include directory that is not one; for NVRTC,
/// [`RtcError::NoDependencies`] for what it would read unkeyed.
pub fn before_compiling(
    backend: &Backend,
    source: &[u8],
    options: &CompileOptions,
) -> Result<(), CompileError> {
    let handed = handed_options(backend, source, options)?;
    let include_dirs = || super::canonical_include_dirs(&options.include_dirs);
    let in_process = |e: RtcError| CompileError::InProcess(Box::new(e));
    match backend {
        Backend::Nvcc(..) => {
            options.validate()?;
            include_dirs().map_err(|(path, reason)| {
                CompileError::Nvcc(Box::new(NvccError::IncludeDir { path, reason }))
            })?;
        }
        Backend::HipRtc(_) => {
            include_dirs()
                .map_err(|(path, reason)| in_process(RtcError::IncludeDir { path, reason }))?;
        }
        Backend::Nvrtc(b) => {
            let input = super::rtc::RtcInput {
                source,
                name: options.source_file_name(),
                headers: &[],
                include_dirs: &options.include_dirs,
                options: &handed,
            };
            super::nvrtc::checked_input(&input, b.found.cuda_include.as_deref())
                .map_err(in_process)?;
        }
        // hipcc's checks, and any compiler's without rules of its own.
        _ => {
            options.validate()?;
            include_dirs().map_err(|(path, reason)| CompileError::IncludeDir { path, reason })?;
        }
    }
    Ok(())
}

/// What [`Backend::compile`] checks itself before handing the source to the compiler: an
/// `#include` of a FIFO, socket or device (it would hang the compile, and hipRTC and NVRTC
/// in process have no timeout); for the in-process compilers, the options by their rules.
/// Returns the options handed to hipRTC or NVRTC (none for hipcc and nvcc, which check
/// their options as they build their command).
///
/// Errors: as [`before_compiling`].
pub(crate) fn handed_options(
    backend: &Backend,
    source: &[u8],
    options: &CompileOptions,
) -> Result<Vec<String>, CompileError> {
    if let Some(s) = super::special_include::find(source, None, &options.include_dirs) {
        return Err(CompileError::SpecialInclude(Box::new(s)));
    }
    let in_process = |e: RtcError| CompileError::InProcess(Box::new(e));
    match backend {
        Backend::HipRtc(b) => {
            options.validate_for(CompilerKind::HipRtc)?;
            CompilerKind::HipRtc.check_extra_flags(&options.extra_flags)?;
            b.options(options).map_err(in_process)
        }
        Backend::Nvrtc(b) => {
            options.validate_for(CompilerKind::Nvrtc)?;
            CompilerKind::Nvrtc
                .check_extra_flags(&nvrtc_flags_but_includes(&options.extra_flags))?;
            b.options(options).map_err(in_process)
        }
        // hipcc and nvcc check their options as they build their command; a compiler without
        // rules of its own is handed none.
        _ => Ok(Vec::new()),
    }
}

/// The extra flags but `-I DIR` and `-IDIR`, which NVRTC takes (its include directories are
/// keyed file by file).
pub(crate) fn nvrtc_flags_but_includes(extra_flags: &[String]) -> Vec<String> {
    let mut rest = Vec::new();
    let mut it = extra_flags.iter();
    while let Some(f) = it.next() {
        if f == "-I" {
            let _ = it.next();
        } else if !f.starts_with("-I") {
            rest.push(f.clone());
        }
    }
    rest
}
