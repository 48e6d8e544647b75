//! End to end: compile `examples/kernels/saxpy.hip` for the GPU hipjit finds, load it, launch
//! it on 1 << 20 elements and check the result on the host.
//!
//! ```text
//! cargo run --example saxpy
//! ```
//!
//! Needs an AMD GPU for the load and launch. Without one it still compiles the kernel (through
//! the disk cache, for `gfx90a` or `HIPJIT_EXAMPLE_ARCH`), prints its arguments and
//! resources, says why there is no device, and exits with status 3. Status 1: something failed.

use std::error::Error;
use std::process::ExitCode;

use hipjit::compiler::CompileOptions;
use hipjit::jit::{Jit, JitOptions};
use hipjit::launch::LaunchConfig;
use hipjit::library::Library;
use hipjit::memory::DeviceBuffer;
use hipjit::runtime::Runtime;
use hipjit::stream::{Stream, StreamFlags};
use hipjit::target_id::TargetId;

const SOURCE: &str = include_str!("kernels/saxpy.hip");
/// Exit status when the example ran as far as it can without a GPU.
const NO_DEVICE: u8 = 3;

fn main() -> ExitCode {
    match run() {
        Ok(status) => ExitCode::from(status),
        Err(e) => {
            eprintln!("saxpy: error: {e}");
            ExitCode::from(1)
        }
    }
}

fn run() -> Result<u8, Box<dyn Error>> {
    let runtime = Runtime::load()?;
    let jit = Jit::new(JitOptions {
        // Ask the compiler for a code object version this runtime accepts.
        runtime_code_object_versions: runtime.code_object_versions().map(<[u32]>::to_vec),
        ..JitOptions::default()
    })?;

    let device = match runtime.device(0) {
        Ok(d) => Some(d),
        Err(e) if e.is_no_device() => {
            eprintln!(
                "saxpy: no AMD GPU: {e} (runtime {}); compiling only",
                runtime.path().display()
            );
            None
        }
        Err(e) => return Err(e.into()),
    };
    let target = match device.as_ref().and_then(|d| d.target_id()) {
        Some(t) => t.clone(),
        None => {
            let arch = std::env::var("HIPJIT_EXAMPLE_ARCH").unwrap_or_else(|_| "gfx90a".into());
            TargetId::parse(&arch)?
        }
    };

    let compiled = jit.compile(SOURCE, &CompileOptions::for_target(target.clone()))?;
    let code_object = compiled
        .code_object()
        .ok_or("an AMDGPU target compiles to a code object")?;
    let info = code_object.kernel("saxpy")?;
    println!(
        "compiled saxpy for {} ({}, {:.1} ms): {} arguments ({} hidden), {} SGPR, {} VGPR, {} B LDS",
        code_object.target_id(),
        if compiled.is_hit() { "cache hit" } else { "compiled" },
        compiled.elapsed().as_secs_f64() * 1e3,
        info.args.len(),
        info.args.iter().filter(|a| a.value_kind.starts_with("hidden_")).count(),
        info.sgpr_count,
        info.vgpr_count,
        info.group_segment_fixed_size,
    );

    let Some(device) = device else {
        eprintln!("saxpy: this example needs an AMD GPU to load and launch the kernel");
        return Ok(NO_DEVICE);
    };

    let library = Library::load(&device, code_object)?;
    let kernel = library.kernel("saxpy")?;
    let n: u32 = 1 << 20;
    let a: f32 = 2.5;
    let x_host: Vec<f32> = (0..n).map(|i| i as f32).collect();
    let y_host: Vec<f32> = (0..n).map(|i| (n - i) as f32).collect();
    let x = DeviceBuffer::from_slice(&device, &x_host)?;
    let mut y = DeviceBuffer::from_slice(&device, &y_host)?;
    let stream = Stream::new(&device, StreamFlags::NON_BLOCKING)?;
    let mut args = hipjit::args![&a, &x, &mut y, &n];
    // SAFETY: saxpy(float, const float*, float*, unsigned) reads x[i] and writes y[i] (passed
    // as &mut) for i < n; both buffers hold n floats and outlive the synchronization below.
    unsafe { kernel.launch(&stream, LaunchConfig::for_num_elems(n, 256), &mut args)? };
    stream.synchronize()?;

    let y_out = y.to_vec()?;
    let wrong = (0..n as usize)
        .filter(|&i| y_out[i] != a * x_host[i] + y_host[i])
        .count();
    if wrong > 0 {
        return Err(format!("{wrong} of {n} results differ from a * x + y").into());
    }
    println!(
        "saxpy on {} ({}): {n} results correct",
        device.arch_name(),
        target
    );
    Ok(0)
}
