//! `Compiled` (a compile result), `KernelInfo` and `ArgInfo` (a kernel and its arguments as the
//! code object describes them), and `inspect` (reading a code object or cubin from a file or
//! bytes).

use std::path::PathBuf;

use hipjit::code_object::cubin::Cubin;
use hipjit::code_object::{bundle_entries, CodeObject, Container, KernelInfo as RsKernelInfo};
use hipjit::jit::{Compiled as RsCompiled, Origin};
use hipjit::target_id::TargetId;
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyList};

use crate::args::{ArgKind, ArgSpec};
use crate::errors;
use crate::signature::{self, Scalar};

/// One explicit argument of a kernel: position, name and C type when known, and its place in
/// the kernel argument segment.
#[pyclass(frozen, get_all, module = "hipjit")]
#[derive(Clone)]
pub struct ArgInfo {
    /// Position among the explicit arguments, from 0.
    pub index: usize,
    /// The parameter's name (from the source, or the metadata's `.name`), or None.
    pub name: Option<String>,
    /// The parameter's C type as written in the source, or None when the source could not be
    /// read for it.
    pub ctype: Option<String>,
    /// `"pointer"` (device memory), `"value"` (passed by value) or `"unknown"` (a cubin
    /// parameter whose type the source did not give: pointer or value by size).
    pub kind: &'static str,
    /// Byte offset in the kernel argument segment.
    pub offset: u32,
    /// Size in bytes.
    pub size: u32,
    /// The metadata's `.value_kind` (`by_value`, `global_buffer`...).
    pub value_kind: String,
    /// The metadata's `.address_space` of a pointer (`global`, `constant`...), or None.
    pub address_space: Option<String>,
    /// The metadata's `.access` or `.actual_access` (`read_only`, `write_only`,
    /// `read_write`), or None.
    pub access: Option<String>,
}

#[pymethods]
impl ArgInfo {
    fn __repr__(&self) -> String {
        format!(
            "ArgInfo(index={}, name={}, ctype={}, kind='{}', offset={}, size={})",
            self.index,
            py_opt(&self.name),
            py_opt(&self.ctype),
            self.kind,
            self.offset,
            self.size
        )
    }
}

/// A list of names as Python writes it: `['a', 'b']`.
fn py_list<'a>(items: impl IntoIterator<Item = &'a str>) -> String {
    let v: Vec<String> = items
        .into_iter()
        .map(|s| format!("'{}'", s.replace('\\', "\\\\").replace('\'', "\\'")))
        .collect();
    format!("[{}]", v.join(", "))
}

fn py_opt(s: &Option<String>) -> String {
    match s {
        Some(s) => py_list([s.as_str()]).trim_matches(['[', ']']).to_owned(),
        None => "None".to_owned(),
    }
}

/// A kernel of a code object: its name, explicit arguments and resources (LLVM AMDGPUUsage,
/// "Code Object V3 to V6 Metadata"). A cubin records its parameters and, under
/// `__launch_bounds__`, the block size; the resources it does not record are `None`, never 0.
#[pyclass(frozen, get_all, module = "hipjit")]
#[derive(Clone)]
pub struct KernelInfo {
    /// The kernel's name (mangled for a kernel that is not `extern "C"`).
    pub name: String,
    /// The explicit arguments, in order (hidden arguments left out).
    pub args: Vec<ArgInfo>,
    /// Bytes of the kernel argument segment, hidden arguments included.
    pub kernarg_size: u32,
    /// Static LDS (shared memory) per block, bytes (for a cubin the `__shared__` variables'
    /// bytes, as `ptxas -v` reports them).
    pub lds_bytes: Option<u32>,
    /// Scratch (private) memory per work-item, bytes (for a cubin the stack frame per thread).
    pub scratch_bytes: Option<u32>,
    /// SGPRs per wavefront; `None` for a cubin.
    pub sgpr_count: Option<u32>,
    /// VGPRs per work-item (for gfx90a/gfx94x the unified VGPR+AGPR count); for a cubin the
    /// registers per thread (`None` when the cubin does not record them).
    pub vgpr_count: Option<u32>,
    /// AGPRs per work-item, when recorded.
    pub agpr_count: Option<u32>,
    /// SGPRs spilled; `None` for a cubin.
    pub sgpr_spill_count: Option<u32>,
    /// VGPRs spilled; `None` for a cubin.
    pub vgpr_spill_count: Option<u32>,
    /// The wavefront size (32 or 64; 32 threads in a warp on NVIDIA, 0 when not recorded).
    pub wavefront_size: u32,
    /// The largest block the kernel was compiled for (threads): `.max_flat_workgroup_size`,
    /// or a cubin's `__launch_bounds__` block; `None` when not recorded.
    pub max_threads_per_block: Option<u32>,
    /// Whether the kernel uses a dynamic stack.
    pub uses_dynamic_stack: bool,
}

#[pymethods]
impl KernelInfo {
    fn __repr__(&self) -> String {
        let args: Vec<String> = self
            .args
            .iter()
            .map(|a| match (&a.ctype, &a.name) {
                (Some(t), Some(n)) => format!("{t} {n}"),
                (None, Some(n)) => format!("{n}: {} bytes", a.size),
                _ => format!("{}: {} bytes", a.kind, a.size),
            })
            .collect();
        let or_none = |v: Option<u32>| v.map_or_else(|| "None".to_string(), |v| v.to_string());
        let bytes = |v: Option<u32>| v.map_or_else(|| "None".to_string(), |v| format!("{v} B"));
        let spills = match (self.sgpr_spill_count, self.vgpr_spill_count) {
            (Some(s), Some(v)) => Some(s + v),
            _ => None,
        };
        format!(
            "KernelInfo({}({}), sgpr={}, vgpr={}, lds={}, scratch={}, spills={})",
            self.name,
            args.join(", "),
            or_none(self.sgpr_count),
            or_none(self.vgpr_count),
            bytes(self.lds_bytes),
            bytes(self.scratch_bytes),
            or_none(spills)
        )
    }
}

/// The argument specs of `k`: kinds from the metadata, names and C types from the source's
/// declaration when it can be read and agrees in count. `cubin`: the metadata has sizes only.
pub fn arg_specs(k: &RsKernelInfo, source: Option<&str>, cubin: bool) -> Vec<ArgSpec> {
    let explicit: Vec<_> = k
        .args
        .iter()
        .filter(|a| !a.value_kind.starts_with("hidden_"))
        .collect();
    let params = source
        .and_then(|s| signature::parameters(s, &k.name))
        .filter(|p| p.len() == explicit.len());
    explicit
        .iter()
        .enumerate()
        .map(|(index, a)| {
            let param = params.as_ref().map(|p| &p[index]);
            let scalar = param.map(|p| p.scalar);
            let kind = if cubin {
                match scalar {
                    Some(Scalar::Pointer) => ArgKind::Pointer,
                    Some(s) => ArgKind::Value(s),
                    None => ArgKind::Any,
                }
            } else if a.value_kind == "global_buffer" {
                ArgKind::Pointer
            } else {
                ArgKind::Value(match scalar {
                    Some(Scalar::Pointer) | None => Scalar::Other,
                    Some(s) => s,
                })
            };
            let name = param
                .map(|p| p.name.clone())
                .filter(|n| !n.is_empty())
                .or_else(|| a.name.clone());
            let pointee = param.and_then(|p| signature::pointee(&p.ctype));
            let read_only = [&a.access, &a.actual_access]
                .into_iter()
                .flatten()
                .any(|x| x == "read_only");
            let may_write =
                a.is_written() || !(read_only || pointee.as_ref().is_some_and(|p| p.is_const));
            ArgSpec {
                index,
                name,
                ctype: param.map(|p| p.ctype.clone()),
                size: a.size,
                kind,
                pointee,
                may_write,
            }
        })
        .collect()
}

/// The Python description of `k`; `cubin`: `k` was read from a cubin, which records no SGPR or
/// spill figures (those are `None`); its registers per thread are `vgpr_count`.
pub fn kernel_info(k: &RsKernelInfo, specs: &[ArgSpec], cubin: bool) -> KernelInfo {
    let amd = |v: u32| (!cubin).then_some(v);
    let explicit = k
        .args
        .iter()
        .filter(|a| !a.value_kind.starts_with("hidden_"));
    KernelInfo {
        name: k.name.clone(),
        args: explicit
            .zip(specs)
            .map(|(a, s)| ArgInfo {
                index: s.index,
                name: s.name.clone(),
                ctype: s.ctype.clone(),
                kind: match s.kind {
                    ArgKind::Pointer => "pointer",
                    ArgKind::Value(_) => "value",
                    ArgKind::Any => "unknown",
                },
                offset: a.offset,
                size: a.size,
                value_kind: a.value_kind.clone(),
                address_space: a.address_space.clone(),
                access: a.actual_access.clone().or_else(|| a.access.clone()),
            })
            .collect(),
        kernarg_size: k.kernarg_segment_size,
        lds_bytes: Some(k.group_segment_fixed_size),
        scratch_bytes: Some(k.private_segment_fixed_size),
        sgpr_count: amd(k.sgpr_count),
        vgpr_count: (!cubin || k.vgpr_count > 0).then_some(k.vgpr_count),
        agpr_count: k.agpr_count,
        sgpr_spill_count: amd(k.sgpr_spill_count),
        vgpr_spill_count: amd(k.vgpr_spill_count),
        wavefront_size: k.wavefront_size,
        max_threads_per_block: (k.max_flat_workgroup_size != 0)
            .then_some(k.max_flat_workgroup_size),
        uses_dynamic_stack: k.uses_dynamic_stack,
    }
}

fn kernel_infos(ks: &[RsKernelInfo], source: Option<&str>, cubin: bool) -> Vec<KernelInfo> {
    ks.iter()
        .map(|k| kernel_info(k, &arg_specs(k, source, cubin), cubin))
        .collect()
}

/// The result of a compile: the cache key, where it came from, the compiler, the code object(s)
/// and their kernels.
#[pyclass(frozen, module = "hipjit")]
pub struct Compiled {
    pub inner: RsCompiled,
    pub kernels: Vec<KernelInfo>,
}

impl Compiled {
    /// Wraps a compile result of `source`.
    pub fn new(inner: RsCompiled, source: Option<&str>) -> Compiled {
        let kernels = match inner.cubin() {
            Some(c) => kernel_infos(c.kernels(), source, true),
            None => kernel_infos(inner.kernels(), source, false),
        };
        Compiled { inner, kernels }
    }
}

fn origin_name(o: Origin) -> &'static str {
    match o {
        Origin::Memory => "memory",
        Origin::Disk => "disk",
        Origin::Remote => "remote",
        Origin::Compiler => "compiler",
        Origin::Frozen => "frozen",
    }
}

#[pymethods]
impl Compiled {
    /// The cache key (64 hex digits).
    #[getter]
    fn key(&self) -> String {
        self.inner.key().to_hex()
    }
    /// `"memory"`, `"disk"`, `"remote"` or `"compiler"`.
    #[getter]
    fn origin(&self) -> &'static str {
        origin_name(self.inner.origin())
    }
    /// Whether it came from a cache (memory or disk).
    #[getter]
    fn is_hit(&self) -> bool {
        self.inner.is_hit()
    }
    /// The compiler that made it: its kind and version (`"hipcc /usr/bin/hipcc (HIP version:
    /// 5.2.21153-0, ...)"`).
    #[getter]
    fn compiler(&self) -> String {
        let c = self.inner.compiler();
        format!("{} {} ({})", c.kind.as_str(), c.path.display(), c.version)
    }
    /// Why that compiler compiled it (the selection rule of hipjit's `Auto`, or the choice
    /// made).
    #[getter]
    fn compiler_reason(&self) -> &str {
        &self.inner.compiler().reason
    }
    /// The kernels of the first target's code object, or of the cubin.
    #[getter]
    fn kernels(&self) -> Vec<KernelInfo> {
        self.kernels.clone()
    }
    /// The targets compiled (target IDs, or the SM target of a cubin), one per artefact.
    #[getter]
    fn targets(&self) -> Vec<String> {
        self.inner.targets().to_vec()
    }
    /// The first target's code object (or cubin, for an SM target): the raw ELF the runtime
    /// is handed.
    #[getter]
    fn code_object<'py>(&self, py: Python<'py>) -> Bound<'py, PyBytes> {
        PyBytes::new(py, self.inner.artefacts()[0].elf())
    }
    /// One code object or cubin (raw ELF) per target, in the order of `targets`.
    #[getter]
    fn code_objects<'py>(&self, py: Python<'py>) -> Vec<Bound<'py, PyBytes>> {
        self.inner
            .artefacts()
            .iter()
            .map(|c| PyBytes::new(py, c.elf()))
            .collect()
    }
    /// The code object version (4, 5, 6) of the first target's code object; None for a cubin.
    #[getter]
    fn code_object_version(&self) -> Option<u32> {
        self.inner.code_object().map(|c| c.code_object_version())
    }
    /// Seconds the compile call took (a hit included).
    #[getter]
    fn elapsed(&self) -> f64 {
        self.inner.elapsed().as_secs_f64()
    }
    /// The compiler's warnings for this source, as dicts (see `CompileError.diagnostics`); on a
    /// disk hit, those recorded when it was compiled.
    #[getter]
    fn diagnostics<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        errors::diagnostics_list(py, self.inner.diagnostics())
    }
    /// The compiler's command line.
    #[getter]
    fn command(&self) -> Vec<String> {
        self.inner.command().to_vec()
    }
    /// The compiler's standard error when this process compiled it; empty on a hit.
    #[getter]
    fn log(&self) -> &str {
        self.inner.log()
    }
    /// What went wrong with the disk cache without failing the compile (an entry that could not
    /// be published...).
    #[getter]
    fn cache_warnings(&self) -> Vec<String> {
        self.inner.cache_warnings().to_vec()
    }
    /// The disk cache entry read or written, or None.
    #[getter]
    fn entry_path(&self) -> Option<PathBuf> {
        self.inner.entry_path().cloned()
    }
    /// The kernel called `name`.
    ///
    /// Raises `KeyError` naming the kernels there are.
    fn kernel(&self, name: &str) -> PyResult<KernelInfo> {
        self.kernels
            .iter()
            .find(|k| k.name == name)
            .cloned()
            .ok_or_else(|| {
                pyo3::exceptions::PyKeyError::new_err(format!(
                    "no kernel {name:?} in the code object; its kernels: {}",
                    self.kernels
                        .iter()
                        .map(|k| k.name.as_str())
                        .collect::<Vec<_>>()
                        .join(", ")
                ))
            })
    }
    fn __repr__(&self) -> String {
        format!(
            "Compiled(key='{}...', origin='{}', targets={}, kernels={})",
            &self.inner.key().to_hex()[..16],
            origin_name(self.inner.origin()),
            py_list(self.targets().iter().map(String::as_str)),
            py_list(self.kernels.iter().map(|k| k.name.as_str()))
        )
    }
}

/// What `inspect` read.
#[pyclass(frozen, get_all, module = "hipjit")]
pub struct Inspected {
    /// `"elf"`, `"offload_bundle"`, `"compressed_offload_bundle"` or `"cubin"`.
    pub container: &'static str,
    /// The target ID of the code object read (`gfx90a`, `sm_90`).
    pub target: String,
    /// The code object version (4, 5, 6); `None` for a cubin (as `Compiled.code_object_version`).
    pub code_object_version: Option<u32>,
    /// The kernels.
    pub kernels: Vec<KernelInfo>,
    /// For a bundle, the target IDs of its GPU entries, in file order; empty otherwise.
    pub entries: Vec<String>,
}

#[pymethods]
impl Inspected {
    fn __repr__(&self) -> String {
        format!(
            "Inspected(container='{}', target='{}', code_object_version={}, kernels={})",
            self.container,
            self.target,
            self.code_object_version
                .map_or_else(|| "None".to_string(), |v| v.to_string()),
            py_list(self.kernels.iter().map(|k| k.name.as_str()))
        )
    }
}

/// `hipjit.inspect(path_or_bytes, *, target=None)`: reads an AMDGPU code object (raw ELF,
/// offload bundle, compressed bundle) or a CUDA cubin, from a file path (str or os.PathLike)
/// or from bytes. From a bundle, the entry for `target` (a target ID), or the only GPU entry.
///
/// Errors: `TypeError` for another argument type, `OSError`-like `HipjitError` for an
/// unreadable file, `HipjitError` naming what is wrong with the bytes (format, truncation,
/// several entries without `target`...).
#[pyfunction]
#[pyo3(signature = (path_or_bytes, *, target=None))]
pub fn inspect(
    py: Python<'_>,
    path_or_bytes: &Bound<'_, PyAny>,
    target: Option<&str>,
) -> PyResult<Inspected> {
    let bytes: Vec<u8> = if let Ok(b) = path_or_bytes.cast::<PyBytes>() {
        b.as_bytes().to_vec()
    } else if let Ok(b) = path_or_bytes.cast::<pyo3::types::PyByteArray>() {
        b.to_vec()
    } else if let Ok(p) = path_or_bytes.extract::<PathBuf>() {
        py.detach(|| {
            hipjit::file_read::read_file(
                &p,
                hipjit::file_read::CODE_OBJECT_LIMIT,
                "code object",
                hipjit::file_read::Streams::None,
            )
        })
        .map_err(|e| errors::hipjit_error(e.to_string()))?
    } else {
        return Err(PyTypeError::new_err(format!(
            "inspect: expected a path (str, os.PathLike) or bytes, got {}",
            crate::options::type_name(path_or_bytes)
        )));
    };
    let target = target
        .map(|t| {
            t.parse::<TargetId>()
                .map_err(|e| PyValueError::new_err(format!("target: {t:?}: {e}")))
        })
        .transpose()?;
    if is_cubin(&bytes) {
        let c = Cubin::from_bytes(&bytes).map_err(|e| errors::hipjit_error(e.to_string()))?;
        return Ok(Inspected {
            container: "cubin",
            target: c.target().to_string(),
            code_object_version: None,
            kernels: kernel_infos(c.kernels(), None, true),
            entries: Vec::new(),
        });
    }
    let entries = bundle_entries(&bytes).map_err(|e| errors::hipjit_error(e.to_string()))?;
    let co = CodeObject::from_bytes(&bytes, target.as_ref())
        .map_err(|e| errors::hipjit_error(e.to_string()))?;
    Ok(Inspected {
        container: match co.container() {
            Container::Elf => "elf",
            Container::OffloadBundle => "offload_bundle",
            Container::CompressedOffloadBundle => "compressed_offload_bundle",
        },
        target: co.target_id().to_string(),
        code_object_version: Some(co.code_object_version()),
        kernels: kernel_infos(co.kernels(), None, false),
        entries: entries
            .iter()
            .filter_map(|e| e.target_id.as_ref().map(|t| t.to_string()))
            .collect(),
    })
}

/// An NVIDIA cubin: an ELF whose e_machine is EM_CUDA (190), as `hipjit inspect` tells them
/// apart.
fn is_cubin(b: &[u8]) -> bool {
    b.len() >= 20 && b.starts_with(b"\x7fELF") && u16::from_le_bytes([b[18], b[19]]) == 190
}
