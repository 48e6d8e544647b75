// The host implementation of `row_softmax` for hipjit's testing runtime: the kernel's algorithm
// (per block: max, sum of exponentials, quotient) in f32, one block per row, reading its
// arguments from the launch. Shared by the tests and the demo's `--testing` mode.

use hipjit::testing::HostLaunch;

/// `row_softmax(const float* x, float* y, unsigned rows)` over rows of `cols` floats.
pub fn row_softmax(cols: usize) -> impl Fn(&HostLaunch<'_>) -> Result<(), String> + Send + Sync {
    move |launch| {
        // SAFETY: hipjit checked the arguments' count and sizes against the code object:
        // (const float*, float*, unsigned).
        let rows: u32 = unsafe { launch.arg(2) };
        if launch.block.x == 0 || !launch.block.x.is_power_of_two() {
            return Err(format!(
                "block of {} threads is not a power of two",
                launch.block.x
            ));
        }
        if launch.dynamic_lds_bytes < launch.block.x * 4 {
            return Err(format!(
                "{} bytes of dynamic LDS for a block of {} threads",
                launch.dynamic_lds_bytes, launch.block.x
            ));
        }
        // One block per row: blocks past `rows` return at once.
        let rows = (rows as usize).min(launch.grid.x as usize);
        // SAFETY: x and y hold at least rows * cols floats (the library checks) and do not
        // overlap.
        let x = unsafe { launch.slice::<f32>(0, rows * cols) };
        let y = unsafe { launch.slice_mut::<f32>(1, rows * cols) };
        for (xr, yr) in x.chunks(cols).zip(y.chunks_mut(cols)) {
            let m = xr.iter().copied().fold(f32::NEG_INFINITY, f32::max);
            let s: f32 = xr.iter().map(|v| (v - m).exp()).sum();
            for (y, x) in yr.iter_mut().zip(xr) {
                *y = (x - m).exp() / s;
            }
        }
        Ok(())
    }
}
