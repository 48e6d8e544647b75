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

use crate::args::Target;

#[repr(C)]
struct DlDevice {
    device_type: i32,
    device_id: i32,
}

#[repr(C)]
struct DlTensor {
    data: *mut c_void,
    device: DlDevice,
    ndim: i32,
    dtype: [u8; 4],
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

/// The data pointer (`data + byte_offset`) of the tensor in capsule `c`.
///
/// Errors: a message (the caller adds the argument) for a consumed or foreign capsule, or a
/// tensor on another device type or device.
pub fn data_pointer(c: &Bound<'_, PyCapsule>, target: &Target) -> Result<u64, String> {
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
    let t: &DlTensor = unsafe {
        if versioned {
            &(*(p as *const DlManagedVersioned)).dl_tensor
        } else {
            &*(p as *const DlTensor)
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
    Ok((t.data as u64).wrapping_add(t.byte_offset))
}
