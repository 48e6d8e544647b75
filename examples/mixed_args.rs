//! A kernel taking a `char`, a `double`, a `float4` and a 16-byte-aligned struct by value
//! (`examples/kernels/mixed_args.hip`): the Rust side declares matching `#[repr(C)]` types,
//! checks its sizes against the code object's argument metadata, launches, and checks every
//! result.
//!
//! ```text
//! cargo run --example mixed_args
//! ```
//!
//! Without an AMD GPU it compiles (for `gfx90a` or `HIPJIT_EXAMPLE_ARCH`), prints the kernarg
//! layout, and exits with status 3. Status 1: something failed.

use std::error::Error;
use std::process::ExitCode;

use hipjit::compiler::CompileOptions;
use hipjit::jit::{Jit, JitOptions};
use hipjit::launch::LaunchConfig;
use hipjit::library::Library;
use hipjit::memory::{DeviceBuffer, DeviceCopy};
use hipjit::runtime::Runtime;
use hipjit::stream::{AsStream, BorrowedStream};
use hipjit::target_id::TargetId;

const SOURCE: &str = include_str!("kernels/mixed_args.hip");
const NO_DEVICE: u8 = 3;

/// HIP's `float4`: four floats, 16-byte aligned.
#[repr(C, align(16))]
#[derive(Clone, Copy, Debug)]
struct Float4 {
    x: f32,
    y: f32,
    z: f32,
    w: f32,
}

/// The kernel's `struct alignas(16) Params { float scale; int count; double bias; }`.
#[repr(C, align(16))]
#[derive(Clone, Copy, Debug)]
struct Params {
    scale: f32,
    count: i32,
    bias: f64,
}

// SAFETY: plain numbers with no padding (4 x 4 bytes; 4 + 4 + 8 bytes); any bits are valid.
unsafe impl DeviceCopy for Float4 {}
// SAFETY: as above.
unsafe impl DeviceCopy for Params {}

fn main() -> ExitCode {
    match run() {
        Ok(status) => ExitCode::from(status),
        Err(e) => {
            eprintln!("mixed_args: error: {e}");
            ExitCode::from(1)
        }
    }
}

fn run() -> Result<u8, Box<dyn Error>> {
    let runtime = Runtime::load()?;
    let jit = Jit::new(JitOptions {
        runtime_code_object_versions: runtime.code_object_versions().map(<[u32]>::to_vec),
        ..JitOptions::default()
    })?;
    let device = match runtime.device(0) {
        Ok(d) => Some(d),
        Err(e) if e.is_no_device() => {
            eprintln!("mixed_args: no AMD GPU: {e}; compiling only");
            None
        }
        Err(e) => return Err(e.into()),
    };
    let target = match device.as_ref().and_then(|d| d.target_id()) {
        Some(t) => t.clone(),
        None => TargetId::parse(
            &std::env::var("HIPJIT_EXAMPLE_ARCH").unwrap_or_else(|_| "gfx90a".into()),
        )?,
    };
    let compiled = jit.compile(SOURCE, &CompileOptions::for_target(target))?;
    let code_object = compiled
        .code_object()
        .ok_or("an AMDGPU target compiles to a code object")?;
    let info = code_object.kernel("mixed_args")?;

    // The host types must have the sizes the compiler gave the arguments.
    let ours = [
        ("char", std::mem::size_of::<i8>()),
        ("double", std::mem::size_of::<f64>()),
        ("float4", std::mem::size_of::<Float4>()),
        ("Params", std::mem::size_of::<Params>()),
        ("double*", std::mem::size_of::<u64>()),
    ];
    for ((name, size), arg) in ours.iter().zip(&info.args) {
        println!(
            "{name:>8}: offset {:>2}, size {:>2} ({})",
            arg.offset, arg.size, arg.value_kind
        );
        if arg.size as usize != *size {
            return Err(format!(
                "argument {name}: the kernel takes {} bytes, the host type has {size}",
                arg.size
            )
            .into());
        }
    }

    let Some(device) = device else {
        eprintln!("mixed_args: this example needs an AMD GPU to load and launch the kernel");
        return Ok(NO_DEVICE);
    };
    let library = Library::load(&device, code_object)?;
    let kernel = library.kernel("mixed_args")?;
    let c: i8 = 7;
    let d: f64 = 0.25;
    let v = Float4 {
        x: 1.0,
        y: 2.0,
        z: 3.0,
        w: 4.0,
    };
    let p = Params {
        scale: 0.5,
        count: 6,
        bias: 100.0,
    };
    let n = 256u32;
    let mut out = DeviceBuffer::<f64>::zeroed(&device, n as usize)?;
    let stream = BorrowedStream::null(&device);
    let mut args = hipjit::args![&c, &d, &v, &p, &mut out];
    // SAFETY: the argument types match the kernel's (sizes checked above); it writes out[i]
    // for i < 256, the buffer's length, and the buffer outlives the synchronization.
    unsafe { kernel.launch(&stream, LaunchConfig::for_num_elems(n, 64), &mut args)? };
    stream.synchronize()?;
    let got = out.to_vec()?;
    let base = f64::from(c)
        + d
        + f64::from(v.x)
        + 2.0 * f64::from(v.y)
        + 3.0 * f64::from(v.z)
        + 4.0 * f64::from(v.w)
        + f64::from(p.scale) * f64::from(p.count)
        + p.bias;
    for (i, g) in got.iter().enumerate() {
        let want = base + i as f64;
        if (g - want).abs() > 1e-9 {
            return Err(format!("out[{i}] = {g}, expected {want}").into());
        }
    }
    println!("mixed_args: all {n} results correct");
    Ok(0)
}
