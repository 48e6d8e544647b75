//! Borrowing a stream owned by someone else: a framework (here stood in for by a module that
//! creates and destroys its own stream) hands out a raw `hipStream_t`; hipjit queues a copy and
//! a kernel on it through [`BorrowedStream`] without ever destroying it.
//!
//! ```text
//! cargo run --example borrowed_stream
//! ```
//!
//! The stream must come from the same loaded copy of the HIP runtime as hipjit's: hipjit
//! prefers a runtime already loaded in the process, which is how it shares a framework's.
//! Needs an AMD GPU: without one it says so and exits with status 3. Status 1: failure.

use std::error::Error;
use std::process::ExitCode;

use hipjit::compiler::CompileOptions;
use hipjit::jit::{Jit, JitOptions};
use hipjit::launch::LaunchConfig;
use hipjit::memory::DeviceBuffer;
use hipjit::runtime::Runtime;
use hipjit::stream::{AsStream, BorrowedStream, Stream, StreamFlags};
use hipjit::sys::hipStream_t;

const NO_DEVICE: u8 = 3;

const SOURCE: &str = r#"
#include <hip/hip_runtime.h>
extern "C" __global__ void add_one(int* x, unsigned n) {
    const unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] += 1;
}
"#;

/// Stands in for another library (a deep-learning framework) that owns its streams.
mod framework {
    use super::*;

    /// The framework's stream object; it alone destroys the stream.
    pub struct FrameworkStream(pub Stream);

    impl FrameworkStream {
        /// What a framework exposes: the raw handle of its current stream.
        pub fn current_raw(&self) -> hipStream_t {
            self.0.as_raw()
        }
    }
}

fn main() -> ExitCode {
    match run() {
        Ok(status) => ExitCode::from(status),
        Err(e) => {
            eprintln!("borrowed_stream: error: {e}");
            ExitCode::from(1)
        }
    }
}

fn run() -> Result<u8, Box<dyn Error>> {
    let runtime = Runtime::load()?;
    let device = match runtime.device(0) {
        Ok(d) => d,
        Err(e) if e.is_no_device() => {
            eprintln!(
                "borrowed_stream: this example needs an AMD GPU: {e} (runtime {})",
                runtime.path().display()
            );
            return Ok(NO_DEVICE);
        }
        Err(e) => return Err(e.into()),
    };
    let target = device
        .target_id()
        .cloned()
        .ok_or_else(|| format!("device reports no target ID ({})", device.arch_name()))?;
    let jit = Jit::new(JitOptions {
        runtime_code_object_versions: runtime.code_object_versions().map(<[u32]>::to_vec),
        ..JitOptions::default()
    })?;
    let compiled = jit.compile(SOURCE, &CompileOptions::for_target(target))?;
    let library = compiled.artefacts()[0].load(&device)?;
    let kernel = library.kernel("add_one")?;

    // The framework owns this stream; hipjit only borrows its handle.
    let owner = framework::FrameworkStream(Stream::new(&device, StreamFlags::NON_BLOCKING)?);
    // SAFETY: the handle is a stream of `device` from the same runtime (hipjit's Runtime::load
    // found the copy already loaded), and `owner` outlives `borrowed` and the work queued on it.
    let borrowed = unsafe { BorrowedStream::from_raw(&device, owner.current_raw()) };

    let n = 4096u32;
    let host: Vec<i32> = (0..n as i32).collect();
    let mut buf = DeviceBuffer::from_slice(&device, &host)?;
    let mut args = hipjit::args![&mut buf, &n];
    // SAFETY: add_one(int*, unsigned) touches x[i] for i < n; the buffer holds n ints and
    // outlives the synchronization.
    unsafe { kernel.launch(&borrowed, LaunchConfig::for_num_elems(n, 256), &mut args)? };
    borrowed.synchronize()?;
    drop(borrowed); // hipjit never destroys the stream ...
    let out = buf.to_vec()?;
    drop(owner); // ... its owner does.
    if out.iter().zip(&host).any(|(o, h)| *o != h + 1) {
        return Err("some results differ from x + 1".into());
    }
    println!("borrowed_stream: {n} results correct on a borrowed stream");
    Ok(0)
}
