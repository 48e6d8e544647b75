//! The exception classes of `hipjit` and the mapping of hipjit's Rust errors onto them.
//!
//! - `HipjitError(Exception)`: every failure of hipjit itself (cache, runtime calls, a code
//!   object that does not read);
//! - `CompileError(HipjitError)`: the compiler refused the source or could not run; carries
//!   `diagnostics` (a list of dicts, each a parsed warning or error with its notes, include
//!   chain and excerpt), `log` (the compiler's whole standard error) and `command`;
//! - `LoadError(HipjitError)`: the GPU runtime could not be opened, or a code object could not be
//!   loaded on the device (including a load refused because a stream capture is under way);
//! - `LaunchError(HipjitError)`: a launch the runtime refused (or a launch kind the runtime
//!   or device cannot do: cooperative launches).
//!
//! A wrong Python argument (type, range, device) is a `TypeError` or `ValueError` naming the
//! argument by its position and, when known, its name: kernel arguments that do not match the
//! kernel, a grid, block or `shared_mem` outside the device's or kernel's limits, and compile
//! options refused before any compiler ran (a flag, a define, the targets). `CompileError` is
//! for compiles that ran and failed, or could not run.

use hipjit::compiler::diagnostics::Diagnostic;
use hipjit::compiler::nvcc::NvccError;
use hipjit::compiler::rtc::RtcError;
use hipjit::compiler::{CompileError as RsCompileError, OptionsError};
use hipjit::jit::JitError;
use pyo3::create_exception;
use pyo3::exceptions::{PyException, PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList};

create_exception!(
    hipjit,
    HipjitError,
    PyException,
    "A failure of hipjit: the cache, a runtime call, a code object that does not read."
);
create_exception!(
    hipjit,
    CompileError,
    HipjitError,
    "The compiler refused the source or could not run. Attributes: `diagnostics` (list of \
     dicts: severity, file, line, column, message, notes, included_from, excerpt), `log` (the \
     compiler's standard error), `command` (the command line, a list of str; empty for the \
     in-process compilers)."
);
create_exception!(
    hipjit,
    LoadError,
    HipjitError,
    "The GPU runtime could not be opened, or a code object could not be loaded on the device \
     (among others: a load refused because a stream capture is under way)."
);
create_exception!(
    hipjit,
    LaunchError,
    HipjitError,
    "A launch the runtime refused, or a launch kind the runtime or device cannot do (cooperative \
     launches). A launch configuration outside the device's or the kernel's limits is a \
     ValueError, before the runtime is called."
);

/// Adds the exception classes to the module.
pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    m.add("HipjitError", py.get_type::<HipjitError>())?;
    m.add("CompileError", py.get_type::<CompileError>())?;
    m.add("LoadError", py.get_type::<LoadError>())?;
    m.add("LaunchError", py.get_type::<LaunchError>())?;
    Ok(())
}

/// One diagnostic as a dict (the shape of `hipjit compile --json`'s `diagnostics[]`).
pub fn diagnostic_dict<'py>(py: Python<'py>, d: &Diagnostic) -> PyResult<Bound<'py, PyDict>> {
    let dict = PyDict::new(py);
    dict.set_item("severity", d.severity.to_string())?;
    dict.set_item("file", d.file.as_deref())?;
    dict.set_item("line", d.line)?;
    dict.set_item("column", d.column)?;
    dict.set_item("message", &d.message)?;
    let notes = PyList::empty(py);
    for n in &d.notes {
        notes.append(diagnostic_dict(py, n)?)?;
    }
    dict.set_item("notes", notes)?;
    let chain = PyList::empty(py);
    for i in &d.included_from {
        chain.append((i.file.as_str(), i.line))?;
    }
    dict.set_item("included_from", chain)?;
    dict.set_item("excerpt", d.excerpt.clone())?;
    Ok(dict)
}

/// A list of diagnostics as a Python list of dicts.
pub fn diagnostics_list<'py>(py: Python<'py>, ds: &[Diagnostic]) -> PyResult<Bound<'py, PyList>> {
    let list = PyList::empty(py);
    for d in ds {
        list.append(diagnostic_dict(py, d)?)?;
    }
    Ok(list)
}

fn compile_error(py: Python<'_>, e: &RsCompileError) -> PyErr {
    let err = CompileError::new_err(e.to_string());
    // Every variant that carries a compiler run hands over its diagnostics, its log and, for
    // the compilers that run as a process (hipcc, nvcc), its command line; hipRTC and NVRTC
    // run in this process and have no command line.
    let (diagnostics, log, command): (&[Diagnostic], &str, &[String]) = match e {
        RsCompileError::Failed(f) => (&f.diagnostics, &f.stderr, &f.command),
        RsCompileError::UnsupportedTarget(u) => (
            &u.failure.diagnostics,
            &u.failure.stderr,
            &u.failure.command,
        ),
        RsCompileError::MissingDeviceLibrary(m) => (
            &m.failure.diagnostics,
            &m.failure.stderr,
            &m.failure.command,
        ),
        RsCompileError::Timeout {
            command, stderr, ..
        } => (&[], stderr, command),
        RsCompileError::NoOutput { command, .. }
        | RsCompileError::NoDependencies { command, .. } => (&[], "", command),
        RsCompileError::Nvcc(n) => match n.as_ref() {
            NvccError::Failed {
                command,
                log,
                diagnostics,
                ..
            } => (diagnostics, log, command),
            NvccError::NoDependencies { command, .. } => (&[], "", command),
            _ => (&[], "", &[]),
        },
        RsCompileError::InProcess(r) => match r.as_ref() {
            RtcError::Compile {
                log, diagnostics, ..
            } => (diagnostics, log, &[]),
            _ => (&[], "", &[]),
        },
        _ => (&[], "", &[]),
    };
    let value = err.value(py);
    let set = || -> PyResult<()> {
        value.setattr("diagnostics", diagnostics_list(py, diagnostics)?)?;
        value.setattr("log", log)?;
        value.setattr("command", command.to_vec())?;
        Ok(())
    };
    match set() {
        Ok(()) => err,
        Err(e) => e,
    }
}

/// The `ValueError` for options the compiler stage refused before running any compiler,
/// naming the keyword argument that carried them.
fn options_error(e: &OptionsError) -> PyErr {
    let keyword = match e {
        OptionsError::RejectedFlag { .. } | OptionsError::DanglingFlag { .. } => "flags",
        OptionsError::BadDefine(_) | OptionsError::BadDefineValue(_) => "defines",
        OptionsError::CodeObjectVersion(_) => "code_object_version",
        OptionsError::SourceName(_) => "source name",
        OptionsError::NotOnNvidia { option, .. } if option.starts_with("opt_level") => "opt",
        OptionsError::NotOnNvidia { option, .. } => option,
        _ => "arch",
    };
    PyValueError::new_err(format!("{keyword}: {e}"))
}

/// Maps an error of the JIT: compile failures and a missing compiler to `CompileError`,
/// options refused before any compiler ran (a flag, a define, the targets) to `ValueError`
/// naming the keyword, load failures to `LoadError`, the rest to `HipjitError`.
pub fn jit_error(py: Python<'_>, e: JitError) -> PyErr {
    jit_error_ref(py, &e)
}

/// [`jit_error`] of a shared error (a background compile's).
pub fn jit_error_ref(py: Python<'_>, e: &JitError) -> PyErr {
    match e {
        JitError::Compile(RsCompileError::Options(o)) => options_error(o),
        JitError::Compile(c) => compile_error(py, c),
        JitError::Compiler(_) | JitError::Check(_) => {
            let err = CompileError::new_err(e.to_string());
            let value = err.value(py);
            let _ = value.setattr("diagnostics", PyList::empty(py));
            let _ = value.setattr("log", "");
            let _ = value.setattr("command", Vec::<String>::new());
            err
        }
        JitError::Load(_) | JitError::NoCodeObjectForDevice { .. } => {
            LoadError::new_err(e.to_string())
        }
        JitError::UnknownDeviceTarget { .. } => LoadError::new_err(e.to_string()),
        _ => HipjitError::new_err(e.to_string()),
    }
}

/// `LoadError` with `message`.
pub fn load_error(message: impl std::fmt::Display) -> PyErr {
    LoadError::new_err(message.to_string())
}

/// A launch's error: `LaunchError` when the runtime refused it (or cannot launch that way at
/// all), `ValueError` when hipjit's own checks did (a configuration outside the device's or
/// the kernel's limits, LDS beyond the device's), `TypeError`/`ValueError` for arguments that
/// do not match the kernel's parameters (count, size).
pub fn launch_error(e: hipjit::error::LaunchError) -> PyErr {
    use hipjit::error::LaunchError as L;
    match e {
        L::Hip(_) | L::NoCooperativeLaunch | L::CooperativeTooLarge { .. } => {
            LaunchError::new_err(e.to_string())
        }
        L::ArgCount { .. } | L::TooManyArgs { .. } => PyTypeError::new_err(e.to_string()),
        _ => PyValueError::new_err(e.to_string()),
    }
}

/// `LaunchError` with `message` (a launch refused for a reason of the runtime's).
pub fn launch_refused(message: impl std::fmt::Display) -> PyErr {
    LaunchError::new_err(message.to_string())
}

/// `HipjitError` with `message`.
pub fn hipjit_error(message: impl std::fmt::Display) -> PyErr {
    HipjitError::new_err(message.to_string())
}
