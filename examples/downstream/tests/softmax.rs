//! hipjit-softmax on hipjit's testing runtime: the real compile (the installed hipcc), the
//! block size picked from the code object's metadata, loading, argument passing and the stream
//! path, with the host implementation of the kernel standing in for the device code.

#[path = "../src/host_kernel.rs"]
mod host_kernel;

use hipjit::prelude::*;
use hipjit::testing::{TestDevice, TestRuntime};
use hipjit_softmax::{max_abs_diff, reference, source, Compiler, RowSoftmax, SoftmaxError, KERNEL};

fn gfx90a(cols: u32) -> TestRuntime {
    TestDevice::new("gfx90a:sramecc+:xnack-")
        .unwrap()
        .host_kernel(KERNEL, host_kernel::row_softmax(cols as usize))
        .start()
        .unwrap()
}

#[test]
fn rows_are_softmaxed_on_a_stream_and_read_back() {
    let (rows, cols) = (64u32, 300u32);
    let test = gfx90a(cols);
    let device = test.device();
    let compiler = Compiler::for_device(device).unwrap();
    let softmax = RowSoftmax::new(device, &compiler, cols).unwrap();
    let n = (rows * cols) as usize;
    let host: Vec<f32> = (0..n).map(|i| (i % 37) as f32 * 0.25 - 3.0).collect();
    let x = DeviceBuffer::from_slice(device, &host).unwrap();
    let mut y = DeviceBuffer::<f32>::zeroed(device, n).unwrap();
    let stream = Stream::new(device, StreamFlags::NON_BLOCKING).unwrap();
    softmax.forward(&stream, &x, &mut y, rows).unwrap();
    stream.synchronize().unwrap();
    let got = y.to_vec().unwrap();
    assert!(max_abs_diff(&got, &reference(&host, cols as usize)) <= 1e-6);
    let launches = test.launches();
    assert_eq!(launches.len(), 1);
    let l = &launches[0];
    assert_eq!((l.kernel.as_str(), l.grid.x), (KERNEL, rows));
    assert_eq!(l.block.x, softmax.block_size());
    assert_eq!(l.dynamic_lds_bytes, softmax.block_size() * 4);
    assert_eq!(l.stream, stream.as_raw() as usize);
}

#[test]
fn block_size_comes_from_the_metadata_occupancy() {
    // gfx90a: the kernel's few VGPRs leave all 8 wave slots (32 waves of 64 per CU), and
    // block * 4 bytes of LDS (at most 4 KiB of 64 KiB per CU) does not bind: every block size
    // keeps 2048 threads resident (32 blocks of 64 ... 2 of 1024), and the tie goes to the
    // largest the row allows: 1024 for rows of 4096, 128 for rows of 100 (16 per CU).
    let test = gfx90a(4096);
    let compiler = Compiler::for_device(test.device()).unwrap();
    let long = RowSoftmax::new(test.device(), &compiler, 4096).unwrap();
    let info = long.kernel().info().unwrap();
    assert!(info.vgpr_count <= 64, "{info:?}");
    assert_eq!((long.block_size(), long.blocks_per_cu()), (1024, 2));
    let short = RowSoftmax::new(test.device(), &compiler, 100).unwrap();
    assert_eq!((short.block_size(), short.blocks_per_cu()), (128, 16));
}

#[test]
fn the_source_is_specialised_and_bad_shapes_are_refused() {
    assert!(source(777).contains("COLS == 777u"));
    let test = gfx90a(8);
    let compiler = Compiler::for_device(test.device()).unwrap();
    assert!(matches!(
        RowSoftmax::new(test.device(), &compiler, 0),
        Err(SoftmaxError::Cols(0))
    ));
    let softmax = RowSoftmax::new(test.device(), &compiler, 8).unwrap();
    let x = DeviceBuffer::<f32>::zeroed(test.device(), 16).unwrap();
    let mut y = DeviceBuffer::<f32>::zeroed(test.device(), 16).unwrap();
    let stream = Stream::new(test.device(), StreamFlags::empty()).unwrap();
    let err = softmax.forward(&stream, &x, &mut y, 3).unwrap_err();
    assert_eq!(
        err.to_string(),
        "3 rows of 8 floats need 24 elements, a buffer has 16"
    );
    assert!(test.launches().is_empty());
}

#[test]
fn a_hipjit_error_converts_with_question_mark() {
    // A gfx1100 device cannot run gfx90a code, and the error reaches SoftmaxError::Gpu.
    let test = TestDevice::new("gfx90a").unwrap().start().unwrap();
    let err: SoftmaxError = hipjit::library::Library::load_bytes(test.device(), b"not ELF")
        .unwrap_err()
        .into();
    assert!(matches!(err, SoftmaxError::Gpu(_)), "{err}");
}
