//! Several GPUs in one process on real NVIDIA GPUs (scripts/h200.sh runs this on a machine with
//! two or more): every check prints `PASS` or `FAIL`, the peer copy its bandwidth as a `BENCH`
//! line. With fewer than two GPUs it prints `SKIP` with the count found and exits 0.
//!
//! Checks, on GPUs 0 and 1:
//! 1. one `Jit`, first use of one saxpy source on both GPUs from two threads at once: one
//!    library per GPU, each loaded once; saxpy on both GPUs checked element by element;
//! 2. peer access reported both ways and enabled where possible; a peer copy of 1 GiB from
//!    GPU 0 to GPU 1 on GPU 1's stream, checked element by element, its bandwidth the median
//!    of 5 timed copies (events on GPU 1's stream) after one warm-up copy;
//! 3. an event dependency: a kernel on GPU 0's stream spins about 100 ms, then fills a buffer;
//!    an event recorded after it is waited on by GPU 1's stream, which then copies the buffer
//!    to GPU 1: every element has the value written after the spin;
//! 4. drop order: the `Jit` dropped while libraries on both GPUs live, kernels on both still
//!    launched; GPU 0's library dropped (after its work finished) while GPU 1's saxpy may still
//!    run, GPU 1's kernel launched again; then everything dropped and both GPUs synchronized
//!    without error.
//!
//! No multicast object is created (h200.sh keeps `NCCL_NVLS_ENABLE=0`).

use std::error::Error;
use std::sync::{Arc, Barrier};

use hipjit::args;
use hipjit::compiler::CompileOptions;
use hipjit::event::{Event, EventFlags};
use hipjit::jit::{CacheLocation, Jit, JitOptions, Origin};
use hipjit::launch::LaunchConfig;
use hipjit::memory::{DeviceBuffer, DeviceMemory, DeviceMemoryMut};
use hipjit::runtime::{Platform, Runtime};
use hipjit::stream::{Stream, StreamFlags};

type R<T> = Result<T, Box<dyn Error>>;

const KERNELS: &str = r#"
#include <hip/hip_runtime.h>

extern "C" __global__ void saxpy(float a, const float* x, float* y, unsigned n) {
    unsigned i = hipBlockIdx_x * hipBlockDim_x + hipThreadIdx_x;
    if (i < n) y[i] = a * x[i] + y[i];
}

extern "C" __global__ void iota(unsigned* x, unsigned n) {
    unsigned i = hipBlockIdx_x * hipBlockDim_x + hipThreadIdx_x;
    if (i < n) x[i] = i * 2654435761u;
}

extern "C" __global__ void spin_then_fill(unsigned* x, unsigned v, unsigned n, long long spin) {
    long long t0 = clock64();
    while (clock64() - t0 < spin) {}
    unsigned i = hipBlockIdx_x * hipBlockDim_x + hipThreadIdx_x;
    if (i < n) x[i] = v + i;
}
"#;

fn check(name: &str, ok: bool, detail: String) -> R<()> {
    if ok {
        println!("PASS {name}: {detail}");
        Ok(())
    } else {
        println!("FAIL {name}: {detail}");
        Err(format!("check {name} failed: {detail}").into())
    }
}

fn main() -> R<()> {
    let rt = Runtime::load_platform(Platform::Nvidia)?;
    let count = rt.device_count()?;
    if count < 2 {
        println!("SKIP several GPUs: {count} GPU(s) present, 2 needed");
        return Ok(());
    }
    let d = [rt.device(0)?, rt.device(1)?];
    println!(
        "GPUs: 0 {} ({}), 1 {} ({}), {count} in all",
        d[0].properties().name,
        d[0].arch_name(),
        d[1].properties().name,
        d[1].arch_name()
    );
    let cache = std::env::temp_dir().join(format!("hipjit-multi-gpu-{}", std::process::id()));
    let jit = Jit::new(JitOptions {
        cache: CacheLocation::Roots(vec![cache.clone()]),
        ..JitOptions::default()
    })?;
    let s = [
        Stream::new(&d[0], StreamFlags::NON_BLOCKING)?,
        Stream::new(&d[1], StreamFlags::NON_BLOCKING)?,
    ];

    // 1. One Jit, both GPUs at once.
    let barrier = Barrier::new(2);
    let loaded = std::thread::scope(|sc| {
        let h: Vec<_> = d
            .iter()
            .map(|dev| {
                let (jit, barrier) = (&jit, &barrier);
                sc.spawn(move || {
                    barrier.wait();
                    jit.load(dev, KERNELS, &CompileOptions::default())
                })
            })
            .collect();
        h.into_iter()
            .map(|h| h.join().expect("loader thread panicked"))
            .collect::<Result<Vec<_>, _>>()
    })?;
    let again = [
        jit.load(&d[0], KERNELS, &CompileOptions::default())?,
        jit.load(&d[1], KERNELS, &CompileOptions::default())?,
    ];
    let origins: Vec<Origin> = loaded.iter().map(|l| l.compiled.origin()).collect();
    check(
        "one library per GPU from two threads",
        !Arc::ptr_eq(&loaded[0].library, &loaded[1].library)
            && Arc::ptr_eq(&loaded[0].library, &again[0].library)
            && Arc::ptr_eq(&loaded[1].library, &again[1].library)
            && again.iter().all(|l| l.compiled.origin() == Origin::Memory),
        format!("first loads {origins:?}, second loads from memory"),
    )?;
    let n: u32 = 1 << 20;
    for (i, (dev, stream)) in d.iter().zip(&s).enumerate() {
        let saxpy = loaded[i].library.kernel("saxpy")?;
        let x_host: Vec<f32> = (0..n).map(|j| (j % 13) as f32).collect();
        let y_host: Vec<f32> = (0..n).map(|j| (j % 7) as f32).collect();
        let x = DeviceBuffer::from_slice(dev, &x_host)?;
        let mut y = DeviceBuffer::from_slice(dev, &y_host)?;
        let a = 1.5f32 + i as f32;
        // SAFETY: saxpy(float, const float*, float*, unsigned) on buffers of n floats.
        unsafe {
            saxpy.launch(
                stream,
                LaunchConfig::for_num_elems(n, 256),
                &mut args![&a, &x, &mut y, &n],
            )?
        };
        let got = y.to_vec_on(stream)?;
        let bad = (0..n as usize)
            .filter(|&j| got[j] != a * x_host[j] + y_host[j])
            .count();
        check(
            &format!("saxpy on GPU {i}"),
            bad == 0,
            format!("{n} elements, {bad} wrong"),
        )?;
    }

    // 2. Peer access and a 1 GiB peer copy.
    let can = [d[0].can_access_peer(&d[1])?, d[1].can_access_peer(&d[0])?];
    println!("peer access: 0->1 {}, 1->0 {}", can[0], can[1]);
    if can[0] {
        d[0].enable_peer_access(&d[1])?;
    }
    if can[1] {
        d[1].enable_peer_access(&d[0])?;
    }
    let big: u32 = 1 << 28; // 2^28 u32 = 1 GiB
    let mut a = DeviceBuffer::<u32>::alloc(&d[0], big as usize)?;
    let iota = loaded[0].library.kernel("iota")?;
    // SAFETY: iota(unsigned*, unsigned) on a buffer of `big` values.
    unsafe {
        iota.launch(
            &s[0],
            LaunchConfig::for_num_elems(big, 256),
            &mut args![&mut a, &big],
        )?
    };
    s[0].synchronize()?;
    let mut b = DeviceBuffer::<u32>::alloc(&d[1], big as usize)?;
    let (start, end) = (
        Event::new(&d[1], EventFlags::empty())?,
        Event::new(&d[1], EventFlags::empty())?,
    );
    b.copy_from_peer_async(&a, &s[1])?; // warm-up
    let mut ms = Vec::new();
    for _ in 0..5 {
        start.record(&s[1])?;
        b.copy_from_peer_async(&a, &s[1])?;
        end.record(&s[1])?;
        end.synchronize()?;
        ms.push(start.elapsed_ms(&end)? as f64);
    }
    ms.sort_by(|x, y| x.total_cmp(y));
    let median = ms[ms.len() / 2];
    let got = b.to_vec_on(&s[1])?;
    let bad = got
        .iter()
        .enumerate()
        .filter(|&(j, &v)| v != (j as u32).wrapping_mul(2_654_435_761))
        .count();
    check(
        "peer copy of 1 GiB, GPU 0 -> GPU 1",
        bad == 0,
        format!("{big} u32, {bad} wrong"),
    )?;
    println!(
        "BENCH peer copy 1 GiB GPU 0 -> GPU 1 (hipMemcpyPeerAsync -> cuMemcpyPeerAsync, peer \
         access {}): median of 5 {median:.2} ms, {:.1} GB/s (min {:.2} ms, max {:.2} ms)",
        if can[1] { "enabled" } else { "unavailable" },
        (1u64 << 30) as f64 / (median / 1e3) / 1e9,
        ms[0],
        ms[ms.len() - 1]
    );
    drop((a, b, got));

    // 3. GPU 1's stream waits for GPU 0's.
    let m: u32 = 1 << 16;
    let spin = loaded[0].library.kernel("spin_then_fill")?;
    let mut src = DeviceBuffer::<u32>::zeroed(&d[0], m as usize)?;
    let mut dst = DeviceBuffer::<u32>::zeroed(&d[1], m as usize)?;
    let cycles: i64 = i64::from(d[0].properties().clock_khz) * 100; // about 100 ms
    let v = 12_345u32;
    let done = Event::new(&d[0], EventFlags::DISABLE_TIMING)?;
    // SAFETY: spin_then_fill(unsigned*, unsigned, unsigned, long long) on m values.
    unsafe {
        spin.launch(
            &s[0],
            LaunchConfig::for_num_elems(m, 256),
            &mut args![&mut src, &v, &m, &cycles],
        )?
    };
    done.record(&s[0])?;
    s[1].wait_event(&done)?;
    dst.copy_from_peer_async(&src, &s[1])?;
    let got = dst.to_vec_on(&s[1])?;
    let bad = (0..m as usize).filter(|&j| got[j] != v + j as u32).count();
    check(
        "GPU 1's stream waits for an event of GPU 0's stream",
        bad == 0,
        format!("{m} values copied after a {cycles}-cycle spin on GPU 0, {bad} stale"),
    )?;

    // 4. Drop order with libraries on both GPUs.
    let k = [
        loaded[0].library.kernel("saxpy")?,
        loaded[1].library.kernel("saxpy")?,
    ];
    drop((loaded, again));
    drop(jit);
    let one = 1.0f32;
    let mut ys = Vec::new();
    for (i, dev) in d.iter().enumerate() {
        let x = DeviceBuffer::from_slice(dev, &vec![1.0f32; n as usize])?;
        let mut y = DeviceBuffer::from_slice(dev, &vec![0.0f32; n as usize])?;
        // SAFETY: as in 1.
        unsafe {
            k[i].launch(
                &s[i],
                LaunchConfig::for_num_elems(n, 256),
                &mut args![&one, &x, &mut y, &n],
            )?
        };
        ys.push((x, y));
    }
    let [k0, k1] = k;
    let y0 = ys[0].1.to_vec_on(&s[0])?;
    // GPU 0's library goes with its last kernel (its work is done), while GPU 1's saxpy may
    // still run.
    drop(k0);
    let (x1, y1) = &mut ys[1];
    // SAFETY: as in 1; the same buffers again on GPU 1.
    unsafe {
        k1.launch(
            &s[1],
            LaunchConfig::for_num_elems(n, 256),
            &mut args![&one, &*x1, y1, &n],
        )?
    };
    let y1 = ys[1].1.to_vec_on(&s[1])?;
    drop(k1);
    drop(ys);
    drop(s);
    d[0].synchronize()?;
    d[1].synchronize()?;
    check(
        "drop order with libraries on both GPUs",
        y0.iter().all(|&v| v == 1.0) && y1.iter().all(|&v| v == 2.0),
        "Jit dropped first, GPU 0's library before GPU 1's last launch, both GPUs \
         synchronized after"
            .into(),
    )?;
    let _ = std::fs::remove_dir_all(&cache);
    println!("== several GPUs: all passed");
    Ok(())
}
