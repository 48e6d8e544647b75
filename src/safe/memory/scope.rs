//! [`async_scope`]: asynchronous copies with borrowed host slices, which stay borrowed until the
//! stream has been synchronized.

use std::ffi::c_void;
use std::marker::PhantomData;

use hip_sys as sys;

use super::buffer::check_len;
use super::view::queue_copy;
use super::{DeviceCopy, DeviceMemory, DeviceMemoryMut};
use crate::safe::error::HipError;
use crate::safe::stream::AsStream;

/// The handle given to the closure of [`async_scope`]: queues asynchronous copies whose host
/// memory is borrowed until the scope's stream has been synchronized.
pub struct AsyncScope<'scope, 'env: 'scope, S: AsStream> {
    stream: &'scope S,
    _scope: PhantomData<&'scope mut &'scope ()>,
    _env: PhantomData<&'env mut &'env ()>,
}

impl<'scope, 'env, S: AsStream> AsyncScope<'scope, 'env, S> {
    /// Queues a copy of `src` into `dst` (any writable region: a buffer, a
    /// [`super::DeviceSliceMut`]) on the scope's stream (`hipMemcpyAsync`, host to device).
    /// `src` stays borrowed until the stream has been synchronized at the end of the scope.
    ///
    /// Errors: `hipErrorInvalidValue` on a length mismatch, `hipErrorInvalidHandle` when the
    /// scope's stream belongs to another loaded runtime than `dst` (both checked by hipjit), or
    /// the runtime's error.
    pub fn copy_to_device<T: DeviceCopy, D: DeviceMemoryMut<T>>(
        &self,
        src: &'scope [T],
        dst: &'scope mut D,
    ) -> Result<(), HipError> {
        check_len(src.len(), dst.len(), "hipMemcpyAsync")?;
        // SAFETY: sizes match; `src` and `dst` stay borrowed until the stream is synchronized
        // by `async_scope`.
        unsafe {
            queue_copy(
                dst.parent().0,
                dst.as_raw(),
                src.as_ptr() as *const c_void,
                dst.size_bytes(),
                sys::hipMemcpyHostToDevice,
                self.stream,
            )
        }
    }

    /// Queues a copy of `src` into `dst` (`hipMemcpyAsync`, device to host); `dst` holds the
    /// data once the scope has returned.
    ///
    /// Errors: as [`AsyncScope::copy_to_device`].
    pub fn copy_to_host<T: DeviceCopy, D: DeviceMemory<T>>(
        &self,
        src: &'scope D,
        dst: &'scope mut [T],
    ) -> Result<(), HipError> {
        check_len(dst.len(), src.len(), "hipMemcpyAsync")?;
        // SAFETY: as in copy_to_device, the other direction.
        unsafe {
            queue_copy(
                src.parent().0,
                dst.as_mut_ptr() as *mut c_void,
                src.as_raw() as *const c_void,
                src.size_bytes(),
                sys::hipMemcpyDeviceToHost,
                self.stream,
            )
        }
    }

    /// The scope's stream.
    pub fn stream(&self) -> &S {
        self.stream
    }
}

struct SyncOnDrop<'a, S: AsStream> {
    stream: &'a S,
    done: bool,
}

impl<S: AsStream> Drop for SyncOnDrop<'_, S> {
    fn drop(&mut self) {
        if self.done {
            return;
        }
        if let Err(e) = self.stream.synchronize() {
            tracing::error!(error = %e, "stream synchronize at the end of an async scope failed");
            if let Err(e) = self.stream.device().synchronize() {
                tracing::error!(error = %e, "device synchronize after a failed stream synchronize failed");
            }
        }
    }
}

/// Runs `f`, which may queue asynchronous host/device copies on `stream` through the
/// [`AsyncScope`] it is given, then synchronizes `stream` (also when `f` panics). Host slices
/// handed to the scope are borrowed for the whole call, so they outlive every copy.
///
/// ```no_run
/// # use hipjit::{memory::{async_scope, DeviceBuffer, PinnedBuffer}, stream::{Stream, StreamFlags}};
/// # fn f(device: &hipjit::device::Device) -> Result<(), hipjit::error::HipError> {
/// let stream = Stream::new(device, StreamFlags::NON_BLOCKING)?;
/// let host = PinnedBuffer::from_slice(device, &[1.0f32; 256])?;
/// let mut buf = DeviceBuffer::<f32>::alloc(device, 256)?;
/// async_scope(&stream, |s| s.copy_to_device(&host, &mut buf))??;
/// # Ok(()) }
/// ```
///
/// A slice that would be dropped before the synchronization cannot be handed to the scope:
///
/// ```compile_fail,E0597
/// # use hipjit::{memory::{async_scope, DeviceBuffer}, stream::Stream};
/// # fn f(stream: &Stream, buf: &mut DeviceBuffer<u32>) {
/// let _ = async_scope(stream, |s| {
///     let local = vec![1u32; 4];
///     s.copy_to_device(&local, buf) // `local` does not live until the stream is synchronized
/// });
/// # }
/// ```
///
/// Errors: the runtime's error from `hipStreamSynchronize`; `f`'s own result is returned inside.
pub fn async_scope<'env, S, R, F>(stream: &'env S, f: F) -> Result<R, HipError>
where
    S: AsStream,
    F: for<'scope> FnOnce(&'scope AsyncScope<'scope, 'env, S>) -> R,
{
    let scope = AsyncScope {
        stream,
        _scope: PhantomData,
        _env: PhantomData,
    };
    let mut guard = SyncOnDrop {
        stream,
        done: false,
    };
    let r = f(&scope);
    guard.done = true;
    // The borrows end when this returns: `finish` waits for the device when the stream wait
    // fails.
    super::finish(stream).map(|()| r)
}
