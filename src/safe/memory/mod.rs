//! Device memory ([`DeviceBuffer`] and its views [`DeviceSlice`], [`DeviceSliceMut`]), pinned
//! host memory ([`PinnedBuffer`]) and copies and fills between them, synchronous or ordered on a
//! stream.
//!
//! # Allocation and free
//! | allocation | call | freed on drop by | drop waits for |
//! |---|---|---|---|
//! | [`DeviceBuffer::alloc`], [`DeviceBuffer::zeroed`], [`DeviceBuffer::from_slice`] | `hipMalloc` | `hipFree` | the whole device (HIP's `hipFree` synchronizes it first) |
//! | [`DeviceBuffer::alloc_async`], [`DeviceBuffer::zeroed_async`] on a runtime with the stream-ordered allocator ([`crate::safe::runtime::Runtime::has_stream_ordered_alloc`]) | `hipMallocAsync` on the stream | `hipFreeAsync` on the same stream | nothing: the free is queued behind the stream's work |
//! | the same, on a runtime without it (fallback) | `hipMalloc` | `hipFree` | the whole device |
//!
//! A buffer allocated on a stream keeps that stream alive ([`crate::safe::stream::StreamHandle`]).
//! When such a buffer is used on another stream (or by a synchronous call, which runs on the
//! null stream), hipjit's own copies and fills order that use after the allocation and the free
//! after that use, with one event per buffer (`hipEventRecord` + `hipStreamWaitEvent`). A
//! kernel launched on another stream is not tracked: call [`DeviceBuffer::use_on`] before and
//! [`DeviceBuffer::free_after`] after queuing it (the launch is `unsafe` and says so).
//!
//! # Copies, fills and what they wait for
//! - Synchronous (inherent methods of [`DeviceBuffer`]: `from_slice`, `zeroed`,
//!   `copy_from_host`, `copy_to_host`, `to_vec`, `copy_from_device`, `memset`):
//!   `hipMemcpy`/`hipMemset` on the null stream, followed for uploads, device-to-device copies
//!   and fills by `hipStreamSynchronize` of the null stream. They return when their own work
//!   is complete (on NVIDIA too, where `cuMemcpy` from pageable memory and `cuMemsetD8` may
//!   return earlier), having started after the work on the null stream and on every
//!   *blocking* stream of the device; they do **not** wait for a `NON_BLOCKING` stream (the
//!   rule is in [`crate::safe::stream`]).
//! - On a stream, then waiting for that stream (the `*_on` methods of [`DeviceMemory`] and
//!   [`DeviceMemoryMut`]: `to_vec_on`, `copy_to_host_on`, `copy_from_host_on`): the copy is
//!   ordered after the stream's work (a kernel that wrote the buffer), and the host slice is
//!   released only after `hipStreamSynchronize`.
//! - On a stream, without waiting, device memory only ([`DeviceMemoryMut::memset_async`],
//!   [`DeviceMemoryMut::copy_from_device_async`]): nothing on the host is touched.
//! - On a stream, without waiting, with host memory: the host memory must stay alive and
//!   untouched until the copy is done, so safe code gets it two ways:
//!   - inside [`async_scope`], host slices stay borrowed until the stream has been synchronized
//!     (the same shape as `std::thread::scope`; the synchronization also runs when the closure
//!     panics);
//!   - [`PinnedBuffer::copy_to_device_async`] and [`PinnedBuffer::copy_from_device_async`] move
//!     the pinned buffer into an [`InFlight`] that gives it back after synchronizing, and leaks
//!     it if forgotten.
//!
//! # Views
//! [`DeviceBuffer::slice`] and [`DeviceBuffer::slice_mut`] give sub-ranges that borrow the
//! buffer (shared or exclusively), take every copy and fill above, and are kernel arguments
//! without `unsafe`: a [`DeviceSlice`] as a read-only argument, a [`DeviceSliceMut`] (or
//! `&mut DeviceBuffer`) as one the kernel may write ([`crate::safe::launch`]).
//!
//! # Element types
//! [`DeviceCopy`]: the primitive numbers, arrays of them, and with the `half` feature
//! `half::f16` and `half::bf16` (the `_Float16`/`__half` and `__hip_bfloat16`/`__nv_bfloat16` of
//! device code: 2 bytes each, the same bits).

mod buffer;
mod pinned;
mod scope;
mod view;

pub(crate) use buffer::check_len_of;
pub use buffer::DeviceBuffer;
pub use pinned::{InFlight, PinnedBuffer};
pub use scope::{async_scope, AsyncScope};
pub use view::{DeviceMemory, DeviceMemoryMut, DeviceSlice, DeviceSliceMut};

/// Types whose values may be copied to and from the device byte for byte: no pointers to host
/// memory, no padding whose reading matters, every bit pattern the device may write is a valid
/// value.
///
/// # Safety
/// The type must be `Copy`, contain no references or host pointers that the device could
/// invalidate, and be valid for any bit pattern.
pub unsafe trait DeviceCopy: Copy + 'static {}

macro_rules! device_copy {
    ($($t:ty),*) => { $(
        // SAFETY: a primitive number; every bit pattern is valid.
        unsafe impl DeviceCopy for $t {}
    )* };
}
device_copy!(u8, i8, u16, i16, u32, i32, u64, i64, u128, i128, usize, isize, f32, f64);

// SAFETY: IEEE 754 binary16 in a `u16` (`#[repr(transparent)]`); every bit pattern is a value.
#[cfg(feature = "half")]
unsafe impl DeviceCopy for half::f16 {}
// SAFETY: bfloat16 in a `u16` (`#[repr(transparent)]`); every bit pattern is a value.
#[cfg(feature = "half")]
unsafe impl DeviceCopy for half::bf16 {}

// SAFETY: an array of valid-for-any-bits values is valid for any bits.
unsafe impl<T: DeviceCopy, const N: usize> DeviceCopy for [T; N] {}

/// The bytes of `n` values of `T`, for memory that exists: its allocation was sized by
/// [`alloc_bytes`], so the product does not overflow.
fn size_of_n<T>(n: usize) -> usize {
    n.saturating_mul(std::mem::size_of::<T>())
}

/// The bytes of an allocation of `len` values of `T` made by `call`, refused before the call
/// when they overflow `usize` or exceed `isize::MAX` (no Rust slice or `Vec` of the values could
/// exist): a saturated size would ask the runtime for another size than `len` values.
///
/// Errors: `hipErrorOutOfMemory` naming `call`, `len`, the element size and type.
fn alloc_bytes<T>(len: usize, call: &'static str) -> Result<usize, crate::safe::error::HipError> {
    let size = std::mem::size_of::<T>();
    len.checked_mul(size)
        .filter(|&bytes| isize::try_from(bytes).is_ok())
        .ok_or_else(|| {
            crate::safe::error::HipError::new(
                2,
                call,
                None,
                format!(
                    "refused by hipjit before the call: {len} values of {size} bytes ({}) \
                     exceed isize::MAX bytes",
                    std::any::type_name::<T>()
                ),
            )
        })
}

/// Waits for `stream` after work that uses borrowed host memory was queued on it; when that
/// fails, waits for the whole device, so that the borrow may end either way.
fn finish(stream: &impl crate::safe::stream::AsStream) -> Result<(), crate::safe::error::HipError> {
    match stream.synchronize() {
        Ok(()) => Ok(()),
        Err(e) => {
            if let Err(e2) = stream.device().synchronize() {
                tracing::error!(error = %e2, "device synchronize after a failed stream synchronize failed");
            }
            Err(e)
        }
    }
}
