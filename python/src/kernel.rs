//! `Kernel`: a loaded kernel on one device, called like a function:
//! `kernel(grid, block, *args, shared_mem=0, stream=None)`.

use hipjit::device::Device;
use hipjit::kernel::Kernel as RsKernel;
use hipjit::launch::{Dim3, LaunchConfig};
use hipjit::runtime::Platform;
use hipjit::stream::BorrowedStream;
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyInt, PyTuple};

use crate::args::{self, ArgSpec, Target};
use crate::compiled::{self, KernelInfo};
use crate::errors;
use crate::options::type_name;
use crate::runtime;
use crate::stream::{self, Origin};

/// A kernel loaded on a device. Call it to launch:
/// `kernel(grid, block, *args, shared_mem=0, stream=None)`.
#[pyclass(frozen, module = "hipjit")]
pub struct Kernel {
    kernel: RsKernel,
    device: Device,
    specs: Vec<ArgSpec>,
    info: KernelInfo,
    target: Target,
    key: String,
}

impl Kernel {
    /// Wraps `kernel`, loaded on `device` from `source` (for the parameter names and types).
    pub fn new(
        kernel: RsKernel,
        device: Device,
        source: Option<&str>,
        key: String,
    ) -> PyResult<Kernel> {
        let nvidia = device.runtime().platform() == Platform::Nvidia;
        let meta = kernel.info().cloned().ok_or_else(|| {
            errors::load_error(format!(
                "kernel {}: the code object has no metadata for it; hipjit cannot check or \
                 convert its arguments",
                kernel.name()
            ))
        })?;
        let specs = compiled::arg_specs(&meta, source, nvidia);
        let info = compiled::kernel_info(&meta, &specs, nvidia);
        Ok(Kernel {
            target: Target {
                kernel: kernel.name().to_owned(),
                ordinal: device.ordinal(),
                nvidia,
            },
            kernel,
            device,
            specs,
            info,
            key,
        })
    }

    /// The Rust kernel and its device.
    pub fn parts(&self) -> (&RsKernel, &Device) {
        (&self.kernel, &self.device)
    }

    /// The launch of `__call__`.
    pub fn launch(
        &self,
        py: Python<'_>,
        grid: &Bound<'_, PyAny>,
        block: &Bound<'_, PyAny>,
        args: &Bound<'_, PyTuple>,
        shared_mem: Option<&Bound<'_, PyAny>>,
        stream: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<()> {
        let cfg = LaunchConfig {
            grid: dim3("grid", grid)?,
            block: dim3("block", block)?,
            dynamic_lds_bytes: match shared_mem.filter(|m| !m.is_none()) {
                None => 0,
                Some(m) => crate::options::unsigned(
                    "shared_mem",
                    m,
                    u64::from(u32::MAX),
                    "bytes of dynamic shared memory",
                )? as u32,
            },
        };
        let (raw, origin) = stream::resolve(py, stream, self.device.ordinal())?;
        if origin == Origin::Torch {
            runtime::check_single_copy(self.device.runtime())?;
        }
        let mut packed = args::convert(py, &self.target, &self.specs, args)?;
        let mut kargs = packed.launch_args();
        // SAFETY: `raw` is a stream handle of this device given by the caller or torch, alive
        // for this call; hipjit never destroys it.
        let s = unsafe { BorrowedStream::from_raw(&self.device, raw as _) };
        // SAFETY: the arguments were converted for this kernel's metadata (count, sizes,
        // pointer or value) and point at device memory the caller passed; the caller keeps it
        // allocated until the kernel has run (documented on `__call__`).
        unsafe { self.kernel.launch(&s, cfg, &mut kargs) }.map_err(errors::launch_error)
    }
}

/// A grid or block: an int or a tuple of 1 to 3 ints, each 1 to 2**32-1.
fn dim3(what: &str, v: &Bound<'_, PyAny>) -> PyResult<Dim3> {
    let one = |x: &Bound<'_, PyAny>| -> PyResult<u32> {
        if !x.is_instance_of::<PyInt>() {
            return Err(PyTypeError::new_err(format!(
                "{what}: expected an int or a tuple of 1 to 3 ints, got {}",
                type_name(x)
            )));
        }
        match x.extract::<i64>() {
            Ok(n) if (1..=i64::from(u32::MAX)).contains(&n) => Ok(n as u32),
            _ => Err(PyValueError::new_err(format!(
                "{what}: {} is not a dimension (1 to 2**32-1)",
                x.repr()?
            ))),
        }
    };
    if let Ok(t) = v.cast::<PyTuple>() {
        if t.is_empty() || t.len() > 3 {
            return Err(PyValueError::new_err(format!(
                "{what}: a tuple of 1 to 3 dimensions, got {}",
                t.len()
            )));
        }
        let mut d = [1u32; 3];
        for (i, x) in t.iter().enumerate() {
            d[i] = one(&x)?;
        }
        return Ok(Dim3 {
            x: d[0],
            y: d[1],
            z: d[2],
        });
    }
    Ok(Dim3 {
        x: one(v)?,
        y: 1,
        z: 1,
    })
}

#[pymethods]
impl Kernel {
    /// Launches the kernel (`hipModuleLaunchKernel`; `cuLaunchKernel` on NVIDIA) and returns
    /// once it is queued.
    ///
    /// `grid`, `block`: an int or a tuple of 1 to 3 ints. `args`: one value per explicit kernel
    /// argument (see the module documentation for what each kind takes). `shared_mem`: dynamic
    /// shared memory (LDS) in bytes. `stream`: None (torch's current stream of the kernel's
    /// device when torch is in use, else the default stream), an int handle, a
    /// `torch.cuda.Stream` or a CuPy stream.
    ///
    /// The memory passed must stay allocated until the kernel has run (torch's caching
    /// allocator keeps a tensor's memory for the stream it was allocated on; a tensor from
    /// another stream needs `tensor.record_stream(stream)`).
    ///
    /// Raises `TypeError`/`ValueError` for arguments that do not match the kernel (naming the
    /// argument) and for a grid, block or `shared_mem` outside the device's or the kernel's
    /// limits, `LaunchError` for a launch the runtime refused.
    #[pyo3(signature = (grid, block, *args, shared_mem=None, stream=None))]
    fn __call__(
        &self,
        py: Python<'_>,
        grid: &Bound<'_, PyAny>,
        block: &Bound<'_, PyAny>,
        args: &Bound<'_, PyTuple>,
        shared_mem: Option<&Bound<'_, PyAny>>,
        stream: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<()> {
        self.launch(py, grid, block, args, shared_mem, stream)
    }

    /// The kernel's name.
    #[getter]
    fn name(&self) -> &str {
        self.kernel.name()
    }
    /// The kernel's arguments (list of `ArgInfo`).
    #[getter]
    fn args(&self) -> Vec<crate::compiled::ArgInfo> {
        self.info.args.clone()
    }
    /// The kernel as the code object describes it (`KernelInfo`: arguments and resources).
    #[getter]
    fn info(&self) -> KernelInfo {
        self.info.clone()
    }
    /// The device ordinal it is loaded on.
    #[getter]
    fn device(&self) -> i32 {
        self.device.ordinal()
    }
    /// The cache key of the compile result it came from (64 hex digits).
    #[getter]
    fn key(&self) -> &str {
        &self.key
    }
    /// The device's target (`gfx90a:sramecc+:xnack-`, `sm_90`).
    #[getter]
    fn target(&self) -> String {
        self.device.arch_name().to_owned()
    }
    /// The largest block the kernel can be launched with on its device (threads).
    #[getter]
    fn max_threads_per_block(&self) -> u32 {
        self.kernel.max_threads_per_block()
    }
    fn __repr__(&self) -> String {
        let args: Vec<String> = self
            .info
            .args
            .iter()
            .map(|a| match (&a.ctype, &a.name) {
                (Some(t), Some(n)) => format!("{t} {n}"),
                (None, Some(n)) => n.clone(),
                _ => format!("<{} bytes>", a.size),
            })
            .collect();
        format!(
            "Kernel({}({}), device={}, target='{}')",
            self.kernel.name(),
            args.join(", "),
            self.device.ordinal(),
            self.device.arch_name()
        )
    }
}
