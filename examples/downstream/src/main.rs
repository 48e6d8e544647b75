//! softmax-demo: runs hipjit-softmax end to end and checks every element against an f64
//! reference, for a few row lengths.
//!
//!   softmax-demo             on the GPU the HIP runtime finds (AMD, or NVIDIA through nvcc)
//!   softmax-demo --testing   on hipjit's testing runtime (feature `testing`; no GPU): a
//!                            pretended gfx90a whose kernel is the host implementation
//!
//! Prints one PASS/FAIL line per shape; exit status 0 when all pass, 1 otherwise.

use std::process::ExitCode;
use std::time::Instant;

use hipjit::prelude::*;
use hipjit_softmax::{max_abs_diff, reference, Compiler, RowSoftmax, SoftmaxError};

#[cfg(feature = "testing")]
mod host_kernel;

/// (rows, cols) run: a row shorter than a block, a long row, an odd length.
const SHAPES: [(u32, u32); 3] = [(512, 100), (256, 4096), (1000, 333)];

fn main() -> ExitCode {
    let testing = std::env::args().any(|a| a == "--testing");
    match run(testing) {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::FAILURE,
        Err(e) => {
            eprintln!("softmax-demo: error: {e}");
            ExitCode::FAILURE
        }
    }
}

#[cfg(feature = "testing")]
fn testing_runtime() -> Result<hipjit::testing::TestRuntime, Box<dyn std::error::Error>> {
    Ok(hipjit::testing::TestDevice::new("gfx90a:sramecc+:xnack-")?.start()?)
}

fn run(testing: bool) -> Result<bool, Box<dyn std::error::Error>> {
    #[cfg(feature = "testing")]
    let test = if testing {
        Some(testing_runtime()?)
    } else {
        None
    };
    #[cfg(not(feature = "testing"))]
    if testing {
        return Err("--testing needs the feature `testing` (cargo run --features testing)".into());
    }
    let runtime;
    let device = {
        #[cfg(feature = "testing")]
        if let Some(t) = &test {
            t.device().clone()
        } else {
            runtime = Runtime::load()?;
            runtime.device(0)?
        }
        #[cfg(not(feature = "testing"))]
        {
            runtime = Runtime::load()?;
            runtime.device(0)?
        }
    };
    println!(
        "device: {} ({}, {:?} platform{})",
        device.properties().name,
        device.arch_name(),
        device.runtime().platform(),
        if testing {
            ", hipjit testing runtime"
        } else {
            ""
        }
    );
    let compiler = Compiler::for_device(&device)?;
    let stream = Stream::new(&device, StreamFlags::NON_BLOCKING)?;
    let start = Event::new(&device, EventFlags::DEFAULT)?;
    let end = Event::new(&device, EventFlags::DEFAULT)?;
    let mut all = true;
    for (rows, cols) in SHAPES {
        #[cfg(feature = "testing")]
        if let Some(t) = &test {
            t.add_host_kernel(
                hipjit_softmax::KERNEL,
                host_kernel::row_softmax(cols as usize),
            );
        }
        let t = Instant::now();
        let softmax = RowSoftmax::new(&device, &compiler, cols)?;
        let first = t.elapsed();
        let t = Instant::now();
        let again = RowSoftmax::new(&device, &compiler, cols)?;
        let hit = t.elapsed();
        assert_eq!(again.block_size(), softmax.block_size());

        let n = rows as usize * cols as usize;
        let host: Vec<f32> = (0..n)
            .map(|i| ((i as u64).wrapping_mul(2_654_435_761) % 2001) as f32 / 100.0 - 10.0)
            .collect();
        let x = DeviceBuffer::from_slice(&device, &host)?;
        let mut y = DeviceBuffer::<f32>::zeroed(&device, n)?;
        start.record(&stream)?;
        softmax.forward(&stream, &x, &mut y, rows)?;
        end.record(&stream)?;
        stream.synchronize()?;
        let ms = start.elapsed_ms(&end)?;
        let got = y.to_vec()?;
        let diff = max_abs_diff(&got, &reference(&host, cols as usize));
        let ok = diff <= 1e-6;
        all &= ok;
        println!(
            "{} softmax {rows}x{cols}: block {} ({} blocks/CU), max |diff| {diff:.2e}, kernel {ms:.3} ms{}, \
             first RowSoftmax::new {:.1} ms, again {:.3} ms",
            if ok { "PASS" } else { "FAIL" },
            softmax.block_size(),
            softmax.blocks_per_cu(),
            if testing { " (the testing runtime's fixed figure)" } else { "" },
            first.as_secs_f64() * 1e3,
            hit.as_secs_f64() * 1e3,
        );
    }
    // A bad shape is an error value naming it.
    match RowSoftmax::new(&device, &compiler, 0) {
        Err(SoftmaxError::Cols(0)) => println!("PASS a row length of 0 is refused"),
        other => {
            all = false;
            println!(
                "FAIL a row length of 0: {:?}",
                other.map(|s| s.block_size())
            );
        }
    }
    Ok(all)
}
