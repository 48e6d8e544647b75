//! DLPack capsules as pointer arguments: the data pointer of a `dltensor` (or
//! `dltensor_versioned`) capsule, its device checked against the kernel's.
//!
//! A capsule is read and not consumed: it keeps its name, so its owner may still import it,
//! and its deleter runs when the capsule is destroyed (DLPack's rule for an unconsumed
//! capsule). The structures are DLPack's `dlpack.h` (v0.8 `DLManagedTensor`, v1
//! `DLManagedTensorVersioned`).

use std::ffi::{c_void, CStr};

use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::types::PyCapsule;

use crate::args::{c_contiguous, py_tuple, ArrayDesc, DKind, DType, Target};

#[repr(C)]
struct DlDevice {
    device_type: i32,
    device_id: i32,
}

/// `DLDataType`: the type code, bits per lane, lanes.
#[repr(C)]
struct DlDataType {
    code: u8,
    bits: u8,
    lanes: u16,
}

#[repr(C)]
struct DlTensor {
    data: *mut c_void,
    device: DlDevice,
    ndim: i32,
    dtype: DlDataType,
    shape: *mut i64,
    strides: *mut i64,
    byte_offset: u64,
}

/// `DLManagedTensorVersioned`'s head: the version, the manager context, the deleter and the
/// flags come before the tensor.
#[repr(C)]
struct DlManagedVersioned {
    version: [u32; 2],
    manager_ctx: *mut c_void,
    deleter: *mut c_void,
    flags: u64,
    dl_tensor: DlTensor,
}

/// `DLPACK_FLAG_BITMASK_READ_ONLY` of a versioned tensor's flags.
const FLAG_READ_ONLY: u64 = 1;

const KDL_CUDA: i32 = 2;
const KDL_CUDA_MANAGED: i32 = 13;
const KDL_ROCM: i32 = 10;

fn device_type_name(t: i32) -> String {
    match t {
        1 => "CPU".into(),
        2 => "CUDA".into(),
        3 => "CUDA host".into(),
        10 => "ROCm".into(),
        11 => "ROCm host".into(),
        13 => "CUDA managed".into(),
        other => format!("device type {other}"),
    }
}

/// The element type of a DLPack data type: `float32`, `int8`, `bfloat16`, `float32x4`.
fn dtype(t: &DlDataType) -> DType {
    let (kind, base) = match t.code {
        0 => (DKind::Signed, "int"),
        1 => (DKind::Unsigned, "uint"),
        2 => (DKind::Float, "float"),
        4 => (DKind::BFloat16, "bfloat"),
        5 => (DKind::Complex, "complex"),
        6 => (DKind::Bool, "bool"),
        _ => (DKind::Other, "opaque"),
    };
    let mut name = if t.code == 6 {
        "bool".to_owned()
    } else {
        format!("{base}{}", t.bits)
    };
    let lanes = u32::from(t.lanes.max(1));
    if lanes > 1 {
        name.push_str(&format!("x{lanes}"));
    }
    DType {
        // Several lanes: compared by size alone.
        kind: if lanes > 1 { DKind::Other } else { kind },
        size: (u32::from(t.bits) * lanes).div_ceil(8),
        name,
    }
}

/// The data pointer (`data + byte_offset`) of the tensor in capsule `c`, and the tensor as
/// the launch checks it (element type, layout, the read-only flag of a versioned tensor).
///
/// Errors: a message (the caller adds the argument) for a consumed or foreign capsule, or a
/// tensor on another device type or device.
pub fn data_pointer(c: &Bound<'_, PyCapsule>, target: &Target) -> Result<(u64, ArrayDesc), String> {
    // SAFETY: `c` is a live capsule object; PyCapsule_GetName does not fail for a capsule.
    let name_ptr = unsafe { ffi::PyCapsule_GetName(c.as_ptr()) };
    if name_ptr.is_null() {
        return Err("a capsule without a name is not a DLPack tensor".into());
    }
    // SAFETY: a capsule name is a NUL-terminated string that lives as long as the capsule.
    let name = unsafe { CStr::from_ptr(name_ptr) };
    let versioned = match name.to_bytes() {
        b"dltensor" => false,
        b"dltensor_versioned" => true,
        b"used_dltensor" | b"used_dltensor_versioned" => {
            return Err("the DLPack capsule was already consumed (imported elsewhere)".into())
        }
        other => {
            return Err(format!(
                "a capsule named {:?} is not a DLPack tensor",
                String::from_utf8_lossy(other)
            ))
        }
    };
    // SAFETY: the name passed is the capsule's own, so the pointer is returned.
    let p = unsafe { ffi::PyCapsule_GetPointer(c.as_ptr(), name_ptr) };
    if p.is_null() {
        // Clear the Python error PyCapsule_GetPointer set.
        let _ = PyErr::take(c.py());
        return Err("the DLPack capsule holds no tensor".into());
    }
    // SAFETY: DLPack: a `dltensor` capsule holds a DLManagedTensor, whose first member is the
    // DLTensor; a `dltensor_versioned` one a DLManagedTensorVersioned.
    let (t, flags): (&DlTensor, u64) = unsafe {
        if versioned {
            let m = &*(p as *const DlManagedVersioned);
            (&m.dl_tensor, m.flags)
        } else {
            (&*(p as *const DlTensor), 0)
        }
    };
    let expected = if target.nvidia {
        [KDL_CUDA, KDL_CUDA_MANAGED]
    } else {
        [KDL_ROCM, KDL_ROCM]
    };
    if !expected.contains(&t.device.device_type) {
        return Err(format!(
            "the DLPack tensor is in {} memory; the kernel runs on a {} device",
            device_type_name(t.device.device_type),
            if target.nvidia { "CUDA" } else { "ROCm" }
        ));
    }
    if t.device.device_type != KDL_CUDA_MANAGED && t.device.device_id != target.ordinal {
        return Err(format!(
            "the DLPack tensor is on device {}; the kernel is loaded on device {}",
            t.device.device_id, target.ordinal
        ));
    }
    let dtype = dtype(&t.dtype);
    let ndim = usize::try_from(t.ndim).unwrap_or(0);
    let not_contiguous = if t.strides.is_null() || ndim == 0 || t.shape.is_null() {
        None
    } else {
        // SAFETY: DLPack: `shape` and a non-null `strides` hold `ndim` values each, alive as
        // long as the capsule.
        let (shape, strides) = unsafe {
            (
                std::slice::from_raw_parts(t.shape, ndim),
                std::slice::from_raw_parts(t.strides, ndim),
            )
        };
        (!c_contiguous(shape, strides, 1)).then(|| {
            format!(
                "strides {} for shape {}, in elements",
                py_tuple(strides),
                py_tuple(shape)
            )
        })
    };
    let desc = ArrayDesc {
        what: "the DLPack tensor",
        dtype: Some(dtype),
        not_contiguous,
        read_only: (flags & FLAG_READ_ONLY != 0)
            .then_some("its DLPack flags have DLPACK_FLAG_BITMASK_READ_ONLY"),
        copy: "a C-contiguous copy",
    };
    Ok(((t.data as u64).wrapping_add(t.byte_offset), desc))
}
