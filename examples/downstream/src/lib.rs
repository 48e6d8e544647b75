//! hipjit-softmax: a row softmax, `y[r][c] = exp(x[r][c] - max_r) / sum_c exp(x[r][c] - max_r)`
//! over `rows` rows of `cols` floats, as a kernel library on hipjit does it:
//!
//! 1. generate the kernel source specialised to the row length (`COLS`, a define);
//! 2. compile it with the library's own header (its block reductions), handed in memory
//!    (`CompileOptions::header`: nothing written to disk, no build path in the binary), through
//!    hipjit's caches: hipcc or hipRTC on AMD, nvcc or NVRTC on HIP's NVIDIA platform (one
//!    `Jit`, `HIPJIT_COMPILER` or Auto picking);
//! 3. read the kernel's resources and pick the block size that keeps the most threads
//!    resident, from the code object's or the cubin's metadata alone, the same call on both
//!    vendors ([`Kernel::metadata_occupancy`]);
//! 4. load it once and keep the owned [`Kernel`] handle;
//! 5. launch one block per row on the caller's stream, on any buffer or view of one.
//!
//! Every hipjit error converts into [`SoftmaxError`] with `?` alone
//! ([`hipjit::from_errors!`]), beside its own `#[from] std::io::Error`.
//!
//! Its tests run all of it without a GPU on hipjit's testing runtime, with a host
//! implementation of the kernel standing in for the device code.
//!
//! The crate ships its kernels frozen ([`FROZEN`], `frozen/softmax.hjfz`): served by hipjit's
//! frozen tier without a compiler, so its tests run on a machine with no hipcc, no hipRTC and
//! no HIP headers. The loop: record the requests its tests make (`HIPJIT_RECORD`), freeze them
//! (`hipjit cache freeze RECORD -o frozen/softmax.hjfz`), ship the file (`include_bytes!`),
//! load it ([`hipjit::jit::JitOptions::frozen`]); `scripts/freeze-downstream.sh` does the
//! first two. A kernel whose source, header or options differ from what was frozen is
//! compiled where a compiler is present, and refused by name where none is.

use std::path::Path;
use std::sync::{Arc, OnceLock};

use hipjit::cache::FrozenBundle;

use hipjit::prelude::*;

/// The kernel's name.
pub const KERNEL: &str = "row_softmax";

/// Longest row supported, elements.
pub const MAX_COLS: u32 = 1 << 20;

/// The library's header, compiled into the library and handed to the compiler in memory.
const REDUCE_H: &str = include_str!("../include/softmax_reduce.h");

/// Errors of the library: one variant for everything hipjit returns.
#[derive(Debug, thiserror::Error)]
pub enum SoftmaxError {
    /// Compiling, loading or launching.
    #[error(transparent)]
    Gpu(#[from] hipjit::Error),
    /// Writing the generated source ([`save_source`]).
    #[error(transparent)]
    Io(#[from] std::io::Error),
    /// A row length out of range.
    #[error("rows of {0} elements: the row length must be 1..={MAX_COLS}")]
    Cols(u32),
    /// A buffer shorter than the rows.
    #[error("{rows} rows of {cols} floats need {needed} elements, a buffer has {len}")]
    Len {
        /// Rows asked for.
        rows: u32,
        /// The row length.
        cols: u32,
        /// rows * cols.
        needed: u64,
        /// The shorter buffer's length.
        len: usize,
    },
    /// No candidate block size can run.
    #[error("no block size of 64..=1024 threads fits kernel {KERNEL} on {0}")]
    NoBlockSize(String),
}

// `?` converts every hipjit error (`JitError`, `LaunchError`, `HipError`...) in one step.
hipjit::from_errors!(SoftmaxError, SoftmaxError::Gpu);

/// The kernels this crate ships frozen: those its tests compile (rows of 8, 100, 300 and
/// 4096 floats on a gfx90a with SRAM ECC on and XNACK off), made by
/// `scripts/freeze-downstream.sh`. A crate shipping to production freezes its targets and
/// shapes the same way.
pub const FROZEN: &[u8] = include_bytes!("../frozen/softmax.hjfz");

/// [`FROZEN`], read once.
fn frozen() -> Result<Arc<FrozenBundle>, SoftmaxError> {
    static BUNDLE: OnceLock<Arc<FrozenBundle>> = OnceLock::new();
    if let Some(b) = BUNDLE.get() {
        return Ok(Arc::clone(b));
    }
    let b = Arc::new(FrozenBundle::from_bytes(FROZEN).map_err(hipjit::jit::JitError::from)?);
    Ok(Arc::clone(BUNDLE.get_or_init(|| b)))
}

/// hipjit's JIT, one for both platforms: it compiles for an AMD device (hipcc, hipRTC) or a
/// device of HIP's NVIDIA platform (nvcc, NVRTC), the target taken from the device.
pub struct Compiler(pub Jit);

impl Compiler {
    /// The JIT for `device`'s runtime, with hipjit's default caches behind the kernels this
    /// crate ships frozen ([`FROZEN`]).
    pub fn for_device(device: &Device) -> Result<Compiler, SoftmaxError> {
        Ok(Compiler(Jit::new(JitOptions {
            runtime_code_object_versions: device
                .runtime()
                .code_object_versions()
                .map(<[u32]>::to_vec),
            frozen: Some(frozen()?),
            ..JitOptions::default()
        })?))
    }
}

/// The kernel source for rows of `cols` elements.
pub fn source(cols: u32) -> String {
    format!(
        r#"// {KERNEL} for rows of {cols} floats, generated by hipjit-softmax.
#include <hip/hip_runtime.h>
#include "softmax_reduce.h"
static_assert(COLS == {cols}u, "COLS is the row length the source was generated for");

extern "C" __global__ void {KERNEL}(const float* x, float* y, unsigned rows) {{
    extern __shared__ float scratch[];
    const unsigned row = blockIdx.x;
    if (row >= rows) return;
    const float* xr = x + (unsigned long)row * COLS;
    float* yr = y + (unsigned long)row * COLS;
    float m = -INFINITY;
    for (unsigned c = threadIdx.x; c < COLS; c += blockDim.x) m = fmaxf(m, xr[c]);
    m = block_reduce_max(m, scratch);
    float s = 0.0f;
    for (unsigned c = threadIdx.x; c < COLS; c += blockDim.x) s += expf(xr[c] - m);
    s = block_reduce_sum(s, scratch);
    for (unsigned c = threadIdx.x; c < COLS; c += blockDim.x) yr[c] = expf(xr[c] - m) / s;
}}
"#
    )
}

/// Writes the kernel source for rows of `cols` elements to `path` (to read it, or to compile
/// it by hand beside `include/softmax_reduce.h`).
pub fn save_source(cols: u32, path: &Path) -> Result<(), SoftmaxError> {
    Ok(std::fs::write(path, source(cols))?) // io::Error, its own `#[from]`
}

/// The row softmax for one row length on one device: compiled, sized and loaded.
pub struct RowSoftmax {
    kernel: Kernel,
    cols: u32,
    block: u32,
    blocks_per_cu: u32,
}

impl RowSoftmax {
    /// Generates, compiles (or finds in the cache), sizes and loads the kernel for rows of
    /// `cols` elements on `device`.
    pub fn new(
        device: &Device,
        compiler: &Compiler,
        cols: u32,
    ) -> Result<RowSoftmax, SoftmaxError> {
        if cols == 0 || cols > MAX_COLS {
            return Err(SoftmaxError::Cols(cols));
        }
        let src = source(cols);
        // No target named: the JIT takes the device's (a target ID, or an SM target). The
        // header travels in memory and is keyed by its contents.
        let options = CompileOptions::default()
            .define("COLS", format_args!("{cols}u"))
            .header("softmax_reduce.h", REDUCE_H);
        let kernel = compiler.0.kernel(device, &src, KERNEL, &options)?;
        let (block, blocks_per_cu) = pick_block_size(device, &kernel, cols)?;
        Ok(RowSoftmax {
            kernel,
            cols,
            block,
            blocks_per_cu,
        })
    }

    /// The loaded kernel.
    pub fn kernel(&self) -> &Kernel {
        &self.kernel
    }

    /// Threads per block chosen for this row length and device.
    pub fn block_size(&self) -> u32 {
        self.block
    }

    /// Blocks of that size resident per compute unit.
    pub fn blocks_per_cu(&self) -> u32 {
        self.blocks_per_cu
    }

    /// Queues the softmax of `rows` rows of `x` into `y` on `stream` (one block per row).
    /// Returns once queued; `y` is ready when the stream has passed the launch. `x` and `y`
    /// are any region of device memory: a buffer, or a view of one.
    ///
    /// The kernel writes `y`, so it is borrowed `&mut` (hipjit's launch rule); a shared borrow
    /// does not compile:
    ///
    /// ```compile_fail,E0308
    /// # use hipjit::memory::DeviceBuffer;
    /// fn run(
    ///     softmax: &hipjit_softmax::RowSoftmax,
    ///     stream: &hipjit::stream::Stream,
    ///     x: &DeviceBuffer<f32>,
    ///     y: &DeviceBuffer<f32>,
    /// ) {
    ///     let _ = softmax.forward(stream, x, y, 1);
    /// }
    /// ```
    pub fn forward(
        &self,
        stream: &impl AsStream,
        x: &impl DeviceMemory<f32>,
        y: &mut impl DeviceMemoryMut<f32>,
        rows: u32,
    ) -> Result<(), SoftmaxError> {
        let needed = u64::from(rows) * u64::from(self.cols);
        for len in [x.len(), y.len()] {
            if (len as u64) < needed {
                return Err(SoftmaxError::Len {
                    rows,
                    cols: self.cols,
                    needed,
                    len,
                });
            }
        }
        let cfg = LaunchConfig::new(rows.max(1), self.block).with_dynamic_lds(self.block * 4);
        // SAFETY: row_softmax(const float* x, float* y, unsigned rows) reads and writes
        // rows * COLS floats of buffers checked above to hold them, with block * 4 bytes of
        // dynamic LDS for its reductions; the buffers outlive the stream's use of them as the
        // caller synchronizes before reading or dropping them.
        unsafe {
            self.kernel
                .launch(stream, cfg, &mut hipjit::args![x, &mut *y, &rows])?;
        }
        Ok(())
    }
}

/// The block size (a power of two, 64..=1024, no larger than the row rounded up) keeping the
/// most threads resident per compute unit (the larger on a tie), and its blocks per compute
/// unit: from the kernel's metadata, on AMD (code object) and NVIDIA (cubin) alike.
fn pick_block_size(
    device: &Device,
    kernel: &Kernel,
    cols: u32,
) -> Result<(u32, u32), SoftmaxError> {
    let cap = cols.next_power_of_two().clamp(64, 1024);
    let mut best: Option<(u32, u32)> = None;
    for block in (6..=10).map(|p| 1u32 << p).filter(|&b| b <= cap) {
        let blocks = match kernel.metadata_occupancy(block, block * 4) {
            Ok(o) => o.blocks_per_cu,
            Err(_) => continue,
        };
        // Ties go to the larger block: fewer loop trips per row.
        if blocks > 0 && best.is_none_or(|(b, n)| blocks * block >= n * b) {
            best = Some((block, blocks));
        }
    }
    best.ok_or_else(|| SoftmaxError::NoBlockSize(device.arch_name().to_owned()))
}

/// Softmax of each row of `x` (rows of `cols`), in f64: the reference results are checked
/// against.
pub fn reference(x: &[f32], cols: usize) -> Vec<f32> {
    x.chunks(cols)
        .flat_map(|row| {
            let m = row
                .iter()
                .fold(f64::NEG_INFINITY, |m, &v| m.max(f64::from(v)));
            let s: f64 = row.iter().map(|&v| (f64::from(v) - m).exp()).sum();
            row.iter()
                .map(move |&v| ((f64::from(v) - m).exp() / s) as f32)
                .collect::<Vec<_>>()
        })
        .collect()
}

/// The largest difference between `got` and `want`.
pub fn max_abs_diff(got: &[f32], want: &[f32]) -> f32 {
    got.iter()
        .zip(want)
        .map(|(a, b)| (a - b).abs())
        .fold(0.0, f32::max)
}
