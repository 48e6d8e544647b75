//! A downstream crate: a tiny "kernel library" that generates a specialised kernel at run
//! time (the scale factor baked in as a define), compiles it through hipjit's disk cache and
//! reports the kernel's resources. With an AMD GPU it also runs the kernel and checks it.
//!
//! Exit status: 0 done (launched and checked, or compiled when there is no GPU), 1 failed.

use std::error::Error;
use std::process::ExitCode;

use hipjit::compiler::CompileOptions;
use hipjit::jit::{Jit, JitOptions};
use hipjit::launch::LaunchConfig;
use hipjit::library::Library;
use hipjit::memory::DeviceBuffer;
use hipjit::runtime::Runtime;
use hipjit::stream::{AsStream, BorrowedStream};
use hipjit::target_id::TargetId;

const SOURCE: &str = r#"
#include <hip/hip_runtime.h>
extern "C" __global__ void scale(float* x, unsigned n) {
    const unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] *= SCALE;
}
"#;

fn main() -> ExitCode {
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("downstream: error: {e}");
            ExitCode::FAILURE
        }
    }
}

fn run() -> Result<(), Box<dyn Error>> {
    // The runtime is optional for compiling: a machine without one still builds kernels.
    let runtime = Runtime::load().ok();
    let device = runtime.as_ref().and_then(|r| r.device(0).ok());
    let target = match device.as_ref().and_then(|d| d.target_id()) {
        Some(t) => t.clone(),
        None => TargetId::parse("gfx90a")?,
    };
    let jit = Jit::new(JitOptions {
        runtime_code_object_versions: runtime
            .as_ref()
            .and_then(|r| r.code_object_versions())
            .map(<[u32]>::to_vec),
        ..JitOptions::default()
    })?;
    let scale = 3.0f32;
    let options = CompileOptions::for_target(target).define("SCALE", format!("{scale:?}f"));
    let compiled = jit.compile(SOURCE, &options)?;
    let k = compiled.code_object().kernel("scale")?;
    println!(
        "scale x{scale} for {}: {} (key {}), {} SGPR, {} VGPR, kernarg {} B",
        compiled.code_object().target_id(),
        if compiled.is_hit() {
            "cache hit"
        } else {
            "compiled"
        },
        compiled.key(),
        k.sgpr_count,
        k.vgpr_count,
        k.kernarg_segment_size
    );

    let Some(device) = device else {
        println!("no AMD GPU: compiled only");
        return Ok(());
    };
    let library = Library::load(&device, compiled.code_object())?;
    let kernel = library.kernel("scale")?;
    let n = 1000u32;
    let host: Vec<f32> = (0..n).map(|i| i as f32).collect();
    let buf = DeviceBuffer::from_slice(&device, &host)?;
    let stream = BorrowedStream::null(&device);
    let mut args = hipjit::args![&buf, &n];
    // SAFETY: scale(float*, unsigned) touches x[i] for i < n; the buffer holds n floats and
    // outlives the synchronization.
    unsafe { kernel.launch(&stream, LaunchConfig::for_num_elems(n, 128), &mut args)? };
    stream.synchronize()?;
    let out = buf.to_vec()?;
    if out.iter().zip(&host).any(|(o, h)| *o != h * scale) {
        return Err("results differ from x * SCALE".into());
    }
    println!("ran on {}: {n} results correct", device.arch_name());
    Ok(())
}
