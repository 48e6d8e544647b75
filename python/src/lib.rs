//! `hipjit` for Python: the extension module `hipjit._hipjit` behind the `hipjit` package.
//!
//! A thin layer over the Rust crate, in the manner of the pyo3 packages of polars and
//! tokenizers: Python names and exceptions, `.pyi` stubs (`python/hipjit/__init__.pyi`), the
//! GIL released around compiling and loading. Nothing is compiled or loaded when the module is
//! imported: the GPU runtime is opened on first use ([`runtime`]), the compiler when the first
//! `Jit` is made ([`jit`]).
//!
//! Modules, one job each:
//! - [`errors`]: the exception classes and the mapping of hipjit's errors onto them;
//! - [`options`]: Python keyword arguments to `CompileOptions`;
//! - [`compiled`]: `Compiled`, `KernelInfo`, `ArgInfo` and `inspect`;
//! - [`runtime`]: the process's GPU runtime, its devices, and which copy of the runtime is loaded;
//! - [`jit`]: `Jit`, `get_jit`, `compile`;
//! - [`interrupt`]: a compile that Ctrl-C interrupts (`KeyboardInterrupt`, the compiler killed);
//! - [`signature`]: a kernel's parameter list read from its source (names and C types);
//! - [`args`]: Python values to kernel argument bytes, checked against the code object;
//! - [`stream`]: the stream of a launch (torch's current stream, CuPy and torch streams, handles);
//! - [`dlpack`]: DLPack capsules;
//! - [`kernel`]: `Kernel` and its call (the launch);
//! - [`background`]: compiles off the launch path: `PendingCompile`, `SwitchingKernel`.

use pyo3::prelude::*;

mod args;
mod background;
mod compiled;
mod dlpack;
mod errors;
mod interrupt;
mod jit;
mod kernel;
mod options;
mod runtime;
mod signature;
mod stream;

#[pymodule]
fn _hipjit(m: &Bound<'_, PyModule>) -> PyResult<()> {
    errors::register(m)?;
    m.add_class::<compiled::Compiled>()?;
    m.add_class::<compiled::KernelInfo>()?;
    m.add_class::<compiled::ArgInfo>()?;
    m.add_class::<compiled::Inspected>()?;
    m.add_class::<jit::Jit>()?;
    m.add_class::<kernel::Kernel>()?;
    m.add_class::<background::PendingCompile>()?;
    m.add_class::<background::SwitchingKernel>()?;
    m.add_function(wrap_pyfunction!(jit::get_jit, m)?)?;
    m.add_function(wrap_pyfunction!(jit::compile, m)?)?;
    m.add_function(wrap_pyfunction!(compiled::inspect, m)?)?;
    m.add_function(wrap_pyfunction!(runtime::runtime_info, m)?)?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}
