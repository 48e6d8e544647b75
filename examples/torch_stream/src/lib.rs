//! A C entry point for Python (ctypes): launches a hipjit kernel on a CUDA stream and a device
//! pointer owned by PyTorch, with HIP's NVIDIA platform.
//!
//! `hipjit_torch_scale_add(stream, ptr, n, a)` computes `x[i] = x[i] * a + i` for the `n`
//! floats at `ptr`, on `stream` (`torch.cuda.current_stream().cuda_stream`), without waiting:
//! PyTorch reads the result back on the same stream. Returns 0, or 1 after printing the error.

use std::ffi::c_void;
use std::sync::OnceLock;

use hipjit::args;
use hipjit::compiler::CompileOptions;
use hipjit::jit::{Jit, JitOptions};
use hipjit::launch::LaunchConfig;
use hipjit::runtime::{Platform, Runtime};
use hipjit::stream::BorrowedStream;

const SOURCE: &str = r#"
#include <hip/hip_runtime.h>
extern "C" __global__ void scale_add(float* x, float a, unsigned n) {
    unsigned i = hipBlockIdx_x * hipBlockDim_x + hipThreadIdx_x;
    if (i < n) x[i] = x[i] * a + (float)i;
}
"#;

static JIT: OnceLock<Result<Jit, String>> = OnceLock::new();

fn run(stream: u64, ptr: u64, n: u32, a: f32) -> Result<(), Box<dyn std::error::Error>> {
    // The driver PyTorch already loaded is found with RTLD_NOLOAD: same driver, same streams.
    let rt = Runtime::load_platform(Platform::Nvidia)?;
    let dev = rt.device(0)?;
    let jit = JIT
        .get_or_init(|| Jit::new(JitOptions::default()).map_err(|e| e.to_string()))
        .as_ref()
        .map_err(|e| e.clone())?;
    let loaded = jit.load(&dev, SOURCE, &CompileOptions::default())?;
    let kernel = loaded.library.kernel("scale_add")?;
    // SAFETY: PyTorch owns the stream and keeps it alive during the call; BorrowedStream never
    // destroys it.
    let s = unsafe { BorrowedStream::from_raw(&dev, stream as usize as *mut c_void as _) };
    // SAFETY: scale_add(float*, float, unsigned) over `n` floats PyTorch allocated at `ptr`.
    unsafe { kernel.launch(&s, LaunchConfig::for_num_elems(n, 256), &mut args![&ptr, &a, &n])? };
    eprintln!(
        "hipjit_torch_scale_add: launched scale_add ({:?}) on PyTorch stream {stream:#x}",
        loaded.compiled.origin()
    );
    Ok(())
}

/// See the crate documentation.
#[no_mangle]
pub extern "C" fn hipjit_torch_scale_add(stream: u64, ptr: u64, n: u32, a: f32) -> i32 {
    match std::panic::catch_unwind(|| run(stream, ptr, n, a)) {
        Ok(Ok(())) => 0,
        Ok(Err(e)) => {
            eprintln!("hipjit_torch_scale_add: {e}");
            1
        }
        Err(_) => {
            eprintln!("hipjit_torch_scale_add: panicked");
            1
        }
    }
}
