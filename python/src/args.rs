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
//! itself keeps the memory). An array (all but an `int` and `None`) is checked before the
//! launch ([`check_array`]): its element type against the pointee the source declares (the
//! size, and the kind where both are known: a float64 or int8 array for `float*` is refused,
//! as the kernel would read or write past it), that it is C-contiguous, and that it is not
//! read-only when the kernel may write through the pointer. An `int` is the explicit way to
//! pass a raw address unchecked (`tensor.data_ptr()`, `array.data.ptr`).
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
use crate::signature::{ElemKind, Pointee, Scalar};

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
    /// For a pointer whose C type the source gives: what it points at (an array passed for it
    /// is checked against it).
    pub pointee: Option<Pointee>,
    /// Whether the kernel may write through this pointer: its metadata says so, or its
    /// pointee is not `const` (or not known) and the metadata does not say `read_only`. A
    /// read-only array is refused for it.
    pub may_write: bool,
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

/// The device address a pointer argument takes from `v`, the array it comes from checked
/// against the parameter ([`check_array`]).
fn pointer(py: Python<'_>, target: &Target, spec: &ArgSpec, v: &Bound<'_, PyAny>) -> PyResult<u64> {
    let (address, array) = address_of(py, target, spec, v)?;
    if let Some(a) = array {
        check_array(&spec.label(&target.kernel), spec, &a)?;
    }
    Ok(address)
}

/// The device address `v` gives, and the array it is the address of (`None` for an int or
/// `None`: an address passed as it is).
fn address_of(
    py: Python<'_>,
    target: &Target,
    spec: &ArgSpec,
    v: &Bound<'_, PyAny>,
) -> PyResult<(u64, Option<ArrayDesc>)> {
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
            let address = v.call_method0(pyo3::intern!(py, "data_ptr"))?.extract()?;
            return Ok((address, Some(torch_array(py, v)?)));
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
            let address = data.getattr(pyo3::intern!(py, "ptr"))?.extract()?;
            return Ok((address, Some(cupy_array(py, v)?)));
        }
    }
    if v.is_none() {
        return Ok((0, None));
    }
    if v.is_instance_of::<PyInt>() && !v.is_instance_of::<PyBool>() {
        return v.extract::<u64>().map(|a| (a, None)).map_err(|_| {
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
        let address = data
            .get_item(0)?
            .extract::<Option<u64>>()
            .map(|p| p.unwrap_or(0))
            .map_err(|_| {
                PyTypeError::new_err(format!(
                    "{}: __cuda_array_interface__['data'][0] is not an int address",
                    label()
                ))
            })?;
        return Ok((address, Some(cai_array(&label(), &cai, &data)?)));
    }
    if let Ok(c) = v.cast::<PyCapsule>() {
        return dlpack::data_pointer(c, target)
            .map(|(a, d)| (a, Some(d)))
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
            .map(|(a, d)| (a, Some(d)))
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

/// The element type of an array passed for a pointer, as its producer describes it.
#[derive(Clone, Debug)]
pub struct DType {
    /// What kind of number.
    pub kind: DKind,
    /// Bytes per element.
    pub size: u32,
    /// As the producer names it (`float64`, `torch.int8`, `float32 ('<f4')`).
    pub name: String,
}

/// The kind of an array's elements.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DKind {
    /// IEEE floating point (float16, float32, float64; float8 formats).
    Float,
    /// bfloat16.
    BFloat16,
    /// Signed integers.
    Signed,
    /// Unsigned integers.
    Unsigned,
    /// Booleans.
    Bool,
    /// Complex numbers (two floats).
    Complex,
    /// Anything else (opaque, structured): only its size is compared.
    Other,
}

/// An array passed for a pointer, as far as the launch checks it.
#[derive(Clone, Debug)]
pub struct ArrayDesc {
    /// What it is, for messages: `the tensor`, `the CuPy array`...
    pub what: &'static str,
    /// Its element type, when its producer gives one.
    pub dtype: Option<DType>,
    /// Why it is not C-contiguous (`strides (8,) for shape (4,), in bytes`); `None` when it is.
    pub not_contiguous: Option<String>,
    /// How its producer says it is read-only; `None` when it does not.
    pub read_only: Option<&'static str>,
    /// How to make a contiguous copy of it (`tensor.contiguous()`).
    pub copy: &'static str,
}

/// `(4,)`, `(2, 3)`: a shape or strides as Python writes a tuple.
pub fn py_tuple(v: &[i64]) -> String {
    match v {
        [one] => format!("({one},)"),
        _ => format!(
            "({})",
            v.iter()
                .map(|x| x.to_string())
                .collect::<Vec<_>>()
                .join(", ")
        ),
    }
}

/// Whether `strides` (in units of `unit`: 1 for element strides, the element size for byte
/// strides) lay `shape` out in C order without gaps; dimensions of one element are skipped,
/// an empty array is contiguous.
pub fn c_contiguous(shape: &[i64], strides: &[i64], unit: i64) -> bool {
    if shape.contains(&0) {
        return true;
    }
    let mut expected = unit;
    for (&n, &st) in shape.iter().zip(strides).rev() {
        if n != 1 && st != expected {
            return false;
        }
        expected = expected.saturating_mul(n);
    }
    true
}

/// The elements an array must hold for a pointee of this kind, component size and count, in
/// words: `float32`, `int32 or uint32`, `float32 (4 per float4)`.
fn expected_elements(name: &str, kind: ElemKind, size: u32, lanes: u32) -> String {
    let bits = 8 * size;
    let base = match kind {
        ElemKind::Float => format!("float{bits}"),
        ElemKind::BFloat16 => "bfloat16".to_owned(),
        ElemKind::Integer => format!("int{bits} or uint{bits}"),
        ElemKind::Bool => "bool or 1-byte integers".to_owned(),
        ElemKind::Byte => "int8, uint8 or bool".to_owned(),
        ElemKind::Address => "int64 or uint64 (addresses)".to_owned(),
    };
    if lanes > 1 {
        format!("{base} ({lanes} per {name})")
    } else {
        base
    }
}

/// Whether an array of `dt` fits a pointee of `kind`, component `size` and `lanes`.
fn dtype_fits(dt: &DType, kind: ElemKind, size: u32, lanes: u32) -> bool {
    let integer = matches!(dt.kind, DKind::Signed | DKind::Unsigned);
    match (dt.kind, kind) {
        (DKind::Other, _) => dt.size == size || dt.size == size * lanes,
        (DKind::Float, ElemKind::Float) => dt.size == size,
        (DKind::Complex, ElemKind::Float) => lanes >= 2 && dt.size == 2 * size,
        (DKind::BFloat16, ElemKind::BFloat16) => true,
        (_, ElemKind::Integer) => {
            (integer && dt.size == size) || (dt.kind == DKind::Bool && size == 1)
        }
        (_, ElemKind::Bool | ElemKind::Byte) => dt.size == 1 && (integer || dt.kind == DKind::Bool),
        (_, ElemKind::Address) => integer && dt.size == 8,
        _ => false,
    }
}

const UNCHECKED: &str = "or pass its address as an int to pass it unchecked";

/// Checks an array passed for the pointer `spec`: its element type against the pointee the
/// source declares (when both are known), its layout (C-contiguous: the kernel reads
/// elements one after another), and, when the kernel may write through the pointer, that it
/// is not read-only.
///
/// Errors: `TypeError` for an element type that does not fit, `ValueError` for an array that
/// is not contiguous or is read-only; each names the argument, what the array is and what was
/// expected.
pub fn check_array(label: &str, spec: &ArgSpec, a: &ArrayDesc) -> PyResult<()> {
    let what = a.what;
    if let (Some(dt), Some(p)) = (&a.dtype, &spec.pointee) {
        if let Some((kind, size, lanes)) = p.element {
            if !dtype_fits(dt, kind, size, lanes) {
                let bytes = size * lanes;
                return Err(PyTypeError::new_err(format!(
                    "{label}: {what} holds {} ({}-byte elements), and the kernel reads {} \
                     ({bytes}-byte elements): pass an array of {}, {UNCHECKED}",
                    dt.name,
                    dt.size,
                    p.name,
                    expected_elements(&p.name, kind, size, lanes)
                )));
            }
        }
    }
    if let Some(why) = &a.not_contiguous {
        return Err(PyValueError::new_err(format!(
            "{label}: {what} is not contiguous ({why}), and the kernel reads its elements one \
             after another: pass a contiguous copy ({}), {UNCHECKED}",
            a.copy
        )));
    }
    if let (Some(how), true) = (a.read_only, spec.may_write) {
        let why = match &spec.pointee {
            Some(p) if !p.is_const => format!("it points to {}, not const", p.name),
            Some(_) => "its code object records writes through it".to_owned(),
            None => "hipjit cannot tell otherwise: the parameter's type was not read from the \
                     source"
                .to_owned(),
        };
        return Err(PyValueError::new_err(format!(
            "{label}: {what} is read-only ({how}), and the kernel may write through it ({why}): \
             pass a writable array, declare the parameter const, {UNCHECKED}"
        )));
    }
    Ok(())
}

/// The element type of a NumPy dtype (CuPy's arrays have them; `ml_dtypes.bfloat16` is kind
/// `V` named `bfloat16`).
fn numpy_dtype(dtype: &Bound<'_, PyAny>) -> PyResult<DType> {
    let kind: String = dtype.getattr("kind")?.extract()?;
    let size: u32 = dtype.getattr("itemsize")?.extract()?;
    let name: String = dtype.getattr("name")?.extract()?;
    let kind = match kind.as_str() {
        "f" => DKind::Float,
        "i" => DKind::Signed,
        "u" => DKind::Unsigned,
        "b" => DKind::Bool,
        "c" => DKind::Complex,
        _ if name == "bfloat16" => DKind::BFloat16,
        _ => DKind::Other,
    };
    Ok(DType { kind, size, name })
}

/// A `torch.Tensor` as [`check_array`] reads it: `dtype`, `element_size()`, `is_contiguous()`.
fn torch_array(py: Python<'_>, t: &Bound<'_, PyAny>) -> PyResult<ArrayDesc> {
    let name = t.getattr(pyo3::intern!(py, "dtype"))?.str()?.to_string();
    let size: u32 = t
        .call_method0(pyo3::intern!(py, "element_size"))?
        .extract()?;
    let short = name.strip_prefix("torch.").unwrap_or(&name);
    let kind = match short {
        "bfloat16" => DKind::BFloat16,
        "bool" => DKind::Bool,
        "long" | "short" | "int" => DKind::Signed,
        "half" | "double" => DKind::Float,
        s if s.starts_with("float") => DKind::Float,
        s if s.starts_with("complex") || matches!(s, "cfloat" | "cdouble" | "chalf") => {
            DKind::Complex
        }
        s if s.starts_with("uint") => DKind::Unsigned,
        s if s.starts_with("int") => DKind::Signed,
        _ => DKind::Other,
    };
    let contiguous: bool = t
        .call_method0(pyo3::intern!(py, "is_contiguous"))?
        .extract()?;
    let not_contiguous = if contiguous {
        None
    } else {
        let shape: Vec<i64> = t.getattr("shape")?.extract()?;
        let strides: Vec<i64> = t.call_method0("stride")?.extract()?;
        Some(format!(
            "strides {} for shape {}, in elements",
            py_tuple(&strides),
            py_tuple(&shape)
        ))
    };
    Ok(ArrayDesc {
        what: "the tensor",
        dtype: Some(DType { kind, size, name }),
        not_contiguous,
        read_only: None,
        copy: "tensor.contiguous()",
    })
}

/// A `cupy.ndarray` as [`check_array`] reads it: `dtype`, `flags.c_contiguous` (CuPy arrays
/// are always writable).
fn cupy_array(py: Python<'_>, a: &Bound<'_, PyAny>) -> PyResult<ArrayDesc> {
    let dtype = numpy_dtype(&a.getattr(pyo3::intern!(py, "dtype"))?)?;
    let contiguous: bool = a
        .getattr(pyo3::intern!(py, "flags"))?
        .getattr(pyo3::intern!(py, "c_contiguous"))?
        .extract()?;
    let not_contiguous = if contiguous {
        None
    } else {
        let shape: Vec<i64> = a.getattr("shape")?.extract()?;
        let strides: Vec<i64> = a.getattr("strides")?.extract()?;
        Some(format!(
            "strides {} for shape {}, in bytes",
            py_tuple(&strides),
            py_tuple(&shape)
        ))
    };
    Ok(ArrayDesc {
        what: "the CuPy array",
        dtype: Some(dtype),
        not_contiguous,
        read_only: None,
        copy: "cupy.ascontiguousarray(a)",
    })
}

/// An object's `__cuda_array_interface__` (`cai`, its `data` entry `data`) as [`check_array`]
/// reads it: `typestr`, `shape`, `strides` (None: C-contiguous), `data[1]` (read-only).
///
/// Errors: `TypeError` for entries that are not of the interface's types.
fn cai_array(label: &str, cai: &Bound<'_, PyAny>, data: &Bound<'_, PyAny>) -> PyResult<ArrayDesc> {
    let bad = |entry: &str, expected: &str| {
        PyTypeError::new_err(format!(
            "{label}: __cuda_array_interface__['{entry}'] is not {expected}"
        ))
    };
    let typestr: String = cai
        .get_item("typestr")
        .and_then(|t| t.extract())
        .map_err(|_| bad("typestr", "a type string such as '<f4'"))?;
    let dtype = typestr_dtype(&typestr);
    let read_only = data
        .get_item(1)
        .ok()
        .map(|r| r.is_truthy())
        .transpose()?
        .unwrap_or(false);
    let strides = match cai.get_item("strides") {
        Ok(s) if !s.is_none() => Some(
            s.extract::<Vec<i64>>()
                .map_err(|_| bad("strides", "None or a tuple of ints"))?,
        ),
        _ => None,
    };
    let not_contiguous = match (&strides, &dtype) {
        (Some(strides), Some(dt)) => {
            let shape: Vec<i64> = cai
                .get_item("shape")
                .and_then(|s| s.extract())
                .map_err(|_| bad("shape", "a tuple of ints"))?;
            (!c_contiguous(&shape, strides, i64::from(dt.size))).then(|| {
                format!(
                    "strides {} for shape {}, in bytes",
                    py_tuple(strides),
                    py_tuple(&shape)
                )
            })
        }
        _ => None,
    };
    Ok(ArrayDesc {
        what: "the __cuda_array_interface__ array",
        dtype,
        not_contiguous,
        read_only: read_only.then_some("__cuda_array_interface__['data'][1] is True"),
        copy: "a C-contiguous copy",
    })
}

/// The element type of an array-interface type string (`<f4`, `|i1`, `<c8`, `|b1`); `None`
/// for one that does not read.
pub fn typestr_dtype(t: &str) -> Option<DType> {
    let mut chars = t.chars();
    let _order = chars.next()?;
    let letter = chars.next()?;
    let size: u32 = chars.as_str().parse().ok().filter(|&n| n > 0)?;
    let (kind, base) = match letter {
        'f' => (DKind::Float, "float"),
        'i' => (DKind::Signed, "int"),
        'u' => (DKind::Unsigned, "uint"),
        'c' => (DKind::Complex, "complex"),
        'b' => (DKind::Bool, "bool"),
        _ => (DKind::Other, ""),
    };
    let name = match kind {
        DKind::Bool => format!("bool ('{t}')"),
        DKind::Other => format!("'{t}'"),
        _ => format!("{base}{} ('{t}')", 8 * size),
    };
    Some(DType { kind, size, name })
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
