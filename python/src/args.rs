//! Python values to kernel argument bytes, checked against the kernel's explicit arguments
//! (their count, sizes and kinds from the code object's metadata; names and C types from the
//! source when it can be read: [`crate::signature`]).
//!
//! Pointer arguments take, in this order of checks: a `torch.Tensor` (its `data_ptr()`; a tensor
//! on the CPU or on another device than the kernel's is refused), a `cupy.ndarray` (`.data.ptr`,
//! its device checked), an `int` (a raw device address) or `None` (a null pointer), an object
//! with `__cuda_array_interface__` (`data[0]`), a DLPack capsule (read, not consumed: it stays
//! named `dltensor`, and its deleter runs when the capsule is destroyed), or an object with
//! `__dlpack__` (its capsule is taken, read and released, which runs its deleter; the object
//! itself keeps the memory).
//!
//! Value arguments take `int`, `float`, `bool`, a NumPy scalar of exactly the argument's size
//! (its bytes as they are), or `bytes` of exactly the argument's size. An `int` or `float` is
//! converted as C converts it to the parameter's type when the source gives the type (an `int`
//! to a `float` parameter becomes a float; a `float` to an integer parameter is refused), and
//! by the argument's size otherwise (an `int` to a 4-byte integer, a `float` to `float` or
//! `double` by size). Every mismatch raises `TypeError` (wrong kind of value) or `ValueError`
//! (out of range, wrong size, wrong device), naming the kernel and the argument by position
//! and name.

use std::ffi::c_void;

use hipjit::launch::{KernelArg, KernelArgMut, KernelArgs};
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{
    PyBool, PyByteArray, PyBytes, PyCapsule, PyDict, PyFloat, PyInt, PyTuple, PyType,
};

use crate::dlpack;
use crate::options::type_name;
use crate::signature::Scalar;

/// What an argument takes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ArgKind {
    /// A device pointer (`.value_kind: global_buffer`, or `T*` in the source).
    Pointer,
    /// A value, of the C type class given.
    Value(Scalar),
    /// A cubin parameter of unknown type: a pointer or a value, by what is passed.
    Any,
}

/// One explicit argument as the launch checks it.
#[derive(Clone, Debug)]
pub struct ArgSpec {
    /// Position, from 0.
    pub index: usize,
    /// Name, when known.
    pub name: Option<String>,
    /// C type as written in the source, when known.
    pub ctype: Option<String>,
    /// Size in bytes.
    pub size: u32,
    /// What it takes.
    pub kind: ArgKind,
}

impl ArgSpec {
    /// `saxpy() argument 3 (n: unsigned int)`.
    fn label(&self, kernel: &str) -> String {
        let mut s = format!("{kernel}() argument {}", self.index);
        match (&self.name, &self.ctype) {
            (Some(n), Some(t)) => s.push_str(&format!(" ({n}: {t})")),
            (Some(n), None) => s.push_str(&format!(" ({n})")),
            (None, Some(t)) => s.push_str(&format!(" ({t})")),
            (None, None) => {}
        }
        s
    }
}

/// Where the arguments go: the device they must live on.
pub struct Target {
    /// The kernel's name, for messages.
    pub kernel: String,
    /// The device ordinal of the kernel's library.
    pub ordinal: i32,
    /// Whether the runtime is HIP's NVIDIA platform (DLPack device type CUDA, else ROCm).
    pub nvidia: bool,
}

/// A pointer to bytes of the launch's argument storage.
struct Raw {
    ptr: *const c_void,
    size: u32,
}

// SAFETY: `ptr` points at `size` bytes of `Packed::slots`, which outlive the `KernelArgs`
// built from them (both live in `Packed::launch_args`' caller frame).
unsafe impl KernelArg for Raw {
    fn arg_ptr(&self) -> *const c_void {
        self.ptr
    }
    fn arg_size(&self) -> u32 {
        self.size
    }
}
// SAFETY: device memory passed from Python may be written by the kernel; Python has no
// borrows to honour.
unsafe impl KernelArgMut for Raw {}

/// The converted arguments: each argument's bytes in 8-byte-aligned slots.
pub struct Packed {
    slots: Vec<u64>,
    /// (first slot, size in bytes, pointer) per argument.
    places: Vec<(usize, u32, bool)>,
    raws: Vec<Raw>,
}

impl Packed {
    fn with_capacity(n: usize) -> Packed {
        Packed {
            slots: Vec::with_capacity(n * 2),
            places: Vec::with_capacity(n),
            raws: Vec::new(),
        }
    }

    fn push_bytes(&mut self, bytes: &[u8], pointer: bool) {
        let first = self.slots.len();
        let words = bytes.len().div_ceil(8).max(1);
        self.slots.resize(first + words, 0);
        // SAFETY: the slots just added hold at least `bytes.len()` bytes.
        unsafe {
            std::ptr::copy_nonoverlapping(
                bytes.as_ptr(),
                self.slots.as_mut_ptr().add(first).cast::<u8>(),
                bytes.len(),
            )
        };
        self.places.push((first, bytes.len() as u32, pointer));
    }

    fn push_u64(&mut self, v: u64, size: u32, pointer: bool) {
        self.places.push((self.slots.len(), size, pointer));
        // Little-endian: the low `size` bytes of the word are the value.
        self.slots.push(v);
    }

    /// The `KernelArgs` of these arguments: pointers marked written (the kernel may write
    /// device memory passed from Python), values read-only.
    pub fn launch_args(&mut self) -> KernelArgs<'_> {
        let base = self.slots.as_ptr();
        self.raws = self
            .places
            .iter()
            // SAFETY: `first` is inside `slots`, which is not resized while the args live.
            .map(|&(first, size, _)| Raw {
                ptr: unsafe { base.add(first) }.cast(),
                size,
            })
            .collect();
        let mut args = KernelArgs::new();
        for (raw, &(_, _, pointer)) in self.raws.iter_mut().zip(&self.places) {
            if pointer {
                args.push(raw);
            } else {
                args.push(&*raw);
            }
        }
        args
    }
}

static TORCH_TENSOR: PyOnceLock<Py<PyType>> = PyOnceLock::new();
static CUPY_NDARRAY: PyOnceLock<Py<PyType>> = PyOnceLock::new();

static SYS_MODULES: PyOnceLock<Py<PyDict>> = PyOnceLock::new();

/// The module `name` when someone has imported it (never imported here): a lookup in
/// `sys.modules`, with no exception raised when it is absent.
pub fn imported_module<'py>(py: Python<'py>, name: &str) -> Option<Bound<'py, PyAny>> {
    let modules = SYS_MODULES
        .get_or_try_init(py, || -> PyResult<Py<PyDict>> {
            Ok(py
                .import("sys")?
                .getattr("modules")?
                .cast_into::<PyDict>()?
                .unbind())
        })
        .ok()?;
    modules.bind(py).get_item(name).ok().flatten()
}

/// `module.attr` as a type, once `module` has been imported by someone (never imported here).
fn imported_type<'py>(
    py: Python<'py>,
    cell: &'static PyOnceLock<Py<PyType>>,
    module: &str,
    attr: &str,
) -> Option<&'py Py<PyType>> {
    if let Some(t) = cell.get(py) {
        return Some(t);
    }
    let m = imported_module(py, module)?;
    let t = m.getattr(attr).ok()?.cast_into::<PyType>().ok()?.unbind();
    let _ = cell.set(py, t);
    cell.get(py)
}

/// `torch.Tensor`, when torch has been imported.
pub fn torch_tensor_type(py: Python<'_>) -> Option<&Py<PyType>> {
    imported_type(py, &TORCH_TENSOR, "torch", "Tensor")
}

fn cupy_ndarray_type(py: Python<'_>) -> Option<&Py<PyType>> {
    imported_type(py, &CUPY_NDARRAY, "cupy", "ndarray")
}

/// Converts `values` for the arguments `specs`.
///
/// Errors: `TypeError` for a wrong count or kind of value, `ValueError` for a value out of
/// range, of the wrong size or on the wrong device.
pub fn convert(
    py: Python<'_>,
    target: &Target,
    specs: &[ArgSpec],
    values: &Bound<'_, PyTuple>,
) -> PyResult<Packed> {
    if values.len() != specs.len() {
        let names: Vec<String> = specs
            .iter()
            .map(|s| s.name.clone().unwrap_or_else(|| format!("#{}", s.index)))
            .collect();
        return Err(PyTypeError::new_err(format!(
            "{}() takes {} argument(s) ({}), {} given",
            target.kernel,
            specs.len(),
            names.join(", "),
            values.len()
        )));
    }
    let mut packed = Packed::with_capacity(specs.len());
    for (spec, value) in specs.iter().zip(values.iter()) {
        match spec.kind {
            ArgKind::Pointer => {
                let p = pointer(py, target, spec, &value)?;
                packed.push_u64(p, spec.size, true);
            }
            ArgKind::Value(scalar) => value_arg(py, target, spec, scalar, &value, &mut packed)?,
            ArgKind::Any => {
                if spec.size == 8 && !is_number(&value) {
                    let p = pointer(py, target, spec, &value)?;
                    packed.push_u64(p, 8, true);
                } else {
                    value_arg(py, target, spec, Scalar::Other, &value, &mut packed)?;
                }
            }
        }
    }
    Ok(packed)
}

fn is_number(v: &Bound<'_, PyAny>) -> bool {
    v.is_instance_of::<PyInt>()
        || v.is_instance_of::<PyFloat>()
        || v.is_instance_of::<PyBytes>()
        || is_numpy_scalar(v)
}

fn is_numpy_scalar(v: &Bound<'_, PyAny>) -> bool {
    let t = v.get_type();
    t.module()
        .map(|m| m.to_cow().is_ok_and(|m| m == "numpy"))
        .unwrap_or(false)
        && v.hasattr("dtype").unwrap_or(false)
        && v.hasattr("tobytes").unwrap_or(false)
}

fn device_label(ordinal: i32) -> String {
    format!("device {ordinal}")
}

/// The device address a pointer argument takes from `v`.
fn pointer(py: Python<'_>, target: &Target, spec: &ArgSpec, v: &Bound<'_, PyAny>) -> PyResult<u64> {
    let label = || spec.label(&target.kernel);
    if let Some(t) = torch_tensor_type(py) {
        if v.is_instance(t.bind(py))? {
            let dev: i64 = v.call_method0(pyo3::intern!(py, "get_device"))?.extract()?;
            if dev < 0 {
                return Err(PyValueError::new_err(format!(
                    "{}: the tensor is on the CPU; the kernel runs on {}",
                    label(),
                    device_label(target.ordinal)
                )));
            }
            if dev != i64::from(target.ordinal) {
                return Err(PyValueError::new_err(format!(
                    "{}: the tensor is on cuda:{dev}; the kernel is loaded on {}",
                    label(),
                    device_label(target.ordinal)
                )));
            }
            return v.call_method0(pyo3::intern!(py, "data_ptr"))?.extract();
        }
    }
    if let Some(t) = cupy_ndarray_type(py) {
        if v.is_instance(t.bind(py))? {
            // `.data` is the array's MemoryPointer: its `device_id` and `ptr` are ints.
            let data = v.getattr(pyo3::intern!(py, "data"))?;
            let dev: i64 = data.getattr(pyo3::intern!(py, "device_id"))?.extract()?;
            if dev != i64::from(target.ordinal) {
                return Err(PyValueError::new_err(format!(
                    "{}: the CuPy array is on device {dev}; the kernel is loaded on {}",
                    label(),
                    device_label(target.ordinal)
                )));
            }
            return data.getattr(pyo3::intern!(py, "ptr"))?.extract();
        }
    }
    if v.is_none() {
        return Ok(0);
    }
    if v.is_instance_of::<PyInt>() && !v.is_instance_of::<PyBool>() {
        return v.extract::<u64>().map_err(|_| {
            PyValueError::new_err(format!(
                "{}: {} is not a device address (0 to 2**64-1)",
                label(),
                v.repr().map(|r| r.to_string()).unwrap_or_default()
            ))
        });
    }
    if let Ok(cai) = v.getattr("__cuda_array_interface__") {
        let data = cai.get_item("data").map_err(|_| {
            PyTypeError::new_err(format!(
                "{}: __cuda_array_interface__ has no 'data' entry",
                label()
            ))
        })?;
        return data
            .get_item(0)?
            .extract::<Option<u64>>()
            .map(|p| p.unwrap_or(0))
            .map_err(|_| {
                PyTypeError::new_err(format!(
                    "{}: __cuda_array_interface__['data'][0] is not an int address",
                    label()
                ))
            });
    }
    if let Ok(c) = v.cast::<PyCapsule>() {
        return dlpack::data_pointer(c, target)
            .map_err(|m| PyValueError::new_err(format!("{}: {m}", label())));
    }
    if v.hasattr("__dlpack__")? {
        let cap = v.call_method0("__dlpack__")?;
        let cap = cap.cast::<PyCapsule>().map_err(|_| {
            PyTypeError::new_err(format!(
                "{}: __dlpack__() did not return a capsule",
                label()
            ))
        })?;
        return dlpack::data_pointer(cap, target)
            .map_err(|m| PyValueError::new_err(format!("{}: {m}", label())));
    }
    Err(PyTypeError::new_err(format!(
        "{}: expected device memory (torch.Tensor, cupy.ndarray, an object with \
         __cuda_array_interface__ or __dlpack__, a DLPack capsule), an int address or None; \
         got {}",
        label(),
        type_name(v)
    )))
}

fn value_arg(
    _py: Python<'_>,
    target: &Target,
    spec: &ArgSpec,
    scalar: Scalar,
    v: &Bound<'_, PyAny>,
    out: &mut Packed,
) -> PyResult<()> {
    let label = || spec.label(&target.kernel);
    let size = spec.size;
    // NumPy scalars first: numpy.float64 is a subclass of float, and keeps its exact type.
    if !v.is_exact_instance_of::<PyInt>()
        && !v.is_exact_instance_of::<PyFloat>()
        && is_numpy_scalar(v)
    {
        return numpy_arg(&label(), spec, scalar, v, out);
    }
    if v.is_instance_of::<PyInt>() {
        if matches!(scalar, Scalar::Float | Scalar::Half | Scalar::BFloat16) {
            let f: f64 = v.extract()?;
            return float_arg(&label(), scalar, size, f, out);
        }
        if !matches!(size, 1 | 2 | 4 | 8) {
            return Err(PyTypeError::new_err(format!(
                "{}: a {size}-byte argument takes bytes or a NumPy scalar of {size} bytes, not an int",
                label()
            )));
        }
        let bits = 8 * size;
        let (lo, hi): (i128, i128) = match scalar {
            Scalar::Signed => (-(1i128 << (bits - 1)), (1i128 << (bits - 1)) - 1),
            Scalar::Unsigned => (0, (1i128 << bits) - 1),
            _ => (-(1i128 << (bits - 1)), (1i128 << bits) - 1),
        };
        // i64 first (one PyLong_AsLongLong), u64 for the upper half of 64-bit unsigned values.
        let n: i128 = match v.extract::<i64>() {
            Ok(n) => i128::from(n),
            Err(_) => i128::from(
                v.extract::<u64>()
                    .map_err(|_| out_of_range(&label(), v, lo, hi))?,
            ),
        };
        if n < lo || n > hi {
            return Err(out_of_range(&label(), v, lo, hi));
        }
        out.push_u64((n as u128 & ((1u128 << bits) - 1)) as u64, size, false);
        return Ok(());
    }
    if v.is_instance_of::<PyFloat>() {
        if matches!(scalar, Scalar::Signed | Scalar::Unsigned) {
            return Err(PyTypeError::new_err(format!(
                "{}: an integer parameter, given the float {}",
                label(),
                v.repr()?
            )));
        }
        let f: f64 = v.extract()?;
        return float_arg(&label(), scalar, size, f, out);
    }
    if let Ok(b) = v.cast::<PyBytes>() {
        return raw_bytes(&label(), size, b.as_bytes(), out);
    }
    if let Ok(b) = v.cast::<PyByteArray>() {
        return raw_bytes(&label(), size, &b.to_vec(), out);
    }
    Err(PyTypeError::new_err(format!(
        "{}: passed by value ({size} bytes): expected int, float, a NumPy scalar or bytes; got {}",
        label(),
        type_name(v)
    )))
}

fn numpy_arg(
    label: &str,
    spec: &ArgSpec,
    scalar: Scalar,
    v: &Bound<'_, PyAny>,
    out: &mut Packed,
) -> PyResult<()> {
    let size = spec.size;
    let dtype = v.getattr("dtype")?;
    let itemsize: u32 = dtype.getattr("itemsize")?.extract()?;
    let kind: String = dtype.getattr("kind")?.extract()?;
    if itemsize != size {
        return Err(PyValueError::new_err(format!(
            "{label}: {size} bytes expected, the NumPy {} scalar has {itemsize}",
            dtype.str()?
        )));
    }
    let float_kind = kind == "f";
    let int_kind = matches!(kind.as_str(), "i" | "u" | "b");
    let mismatch = (matches!(scalar, Scalar::Float | Scalar::Half | Scalar::BFloat16)
        && !float_kind)
        || (matches!(scalar, Scalar::Signed | Scalar::Unsigned) && !int_kind);
    if mismatch {
        return Err(PyTypeError::new_err(format!(
            "{label}: a NumPy {} scalar does not match the parameter's type",
            dtype.str()?
        )));
    }
    let b = v.call_method0("tobytes")?;
    out.push_bytes(b.cast::<PyBytes>()?.as_bytes(), false);
    Ok(())
}

fn raw_bytes(label: &str, size: u32, b: &[u8], out: &mut Packed) -> PyResult<()> {
    if b.len() != size as usize {
        return Err(PyValueError::new_err(format!(
            "{label}: {size} bytes expected, {} given",
            b.len()
        )));
    }
    out.push_bytes(b, false);
    Ok(())
}

fn out_of_range(label: &str, v: &Bound<'_, PyAny>, lo: i128, hi: i128) -> PyErr {
    PyValueError::new_err(format!(
        "{label}: {} is out of range ({lo} to {hi})",
        v.repr().map(|r| r.to_string()).unwrap_or_default()
    ))
}

fn float_arg(label: &str, scalar: Scalar, size: u32, f: f64, out: &mut Packed) -> PyResult<()> {
    let bits: u64 = match (scalar, size) {
        (Scalar::Half, 2) => u64::from(half::f16::from_f64(f).to_bits()),
        (Scalar::BFloat16, 2) => u64::from(half::bf16::from_f64(f).to_bits()),
        (_, 4) if scalar != Scalar::Half && scalar != Scalar::BFloat16 => {
            u64::from((f as f32).to_bits())
        }
        (_, 8) if scalar != Scalar::Half && scalar != Scalar::BFloat16 => f.to_bits(),
        (_, 2) => {
            return Err(PyTypeError::new_err(format!(
                "{label}: a 2-byte argument of unknown type (half or bfloat16?): pass \
                 numpy.float16 or bytes"
            )))
        }
        _ => {
            return Err(PyTypeError::new_err(format!(
                "{label}: a {size}-byte argument cannot take a float"
            )))
        }
    };
    out.push_u64(bits, size, false);
    Ok(())
}
