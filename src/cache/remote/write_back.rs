//! Writing remote hits to the local disk root off the caller's path.
//!
//! A remote hit is served from memory as soon as it is checked; its copy into the first local
//! root (the entry and its header manifest, each published with two `fsync`s: about 8 ms each
//! on the ext4 disk measured) is done by one background thread per [`crate::jit::Jit`], in
//! order. [`WriteBack::flush`] waits for the queue to drain; dropping the `WriteBack` (with
//! its `Jit`) drains it too, so a process that drops its `Jit` before exiting leaves every
//! copy published. A process killed meanwhile leaves at most a temporary file, removed later
//! as stale ([`crate::cache::disk::STALE_TEMPORARY`]); entries are never torn.

use std::sync::{mpsc, Arc, Condvar};
use std::thread::JoinHandle;

use parking_lot::Mutex;

type Job = Box<dyn FnOnce() + Send>;

/// The background writer (see the module documentation).
#[derive(Debug, Default)]
pub struct WriteBack {
    queue: Mutex<Option<(mpsc::Sender<Job>, JoinHandle<()>)>>,
    pending: Arc<(std::sync::Mutex<usize>, Condvar)>,
}

impl WriteBack {
    /// Queues `job`; it runs on the writer thread (started on first use). Where no thread can
    /// be started, it runs here and now.
    pub fn submit(&self, job: impl FnOnce() + Send + 'static) {
        let mut queue = self.queue.lock();
        if queue.is_none() {
            let (tx, rx) = mpsc::channel::<Job>();
            let pending = Arc::clone(&self.pending);
            let spawned = std::thread::Builder::new()
                .name("hipjit-cache-write".into())
                .spawn(move || {
                    for job in rx {
                        job();
                        let (n, cv) = &*pending;
                        let mut n = n.lock().unwrap_or_else(|e| e.into_inner());
                        *n -= 1;
                        cv.notify_all();
                    }
                });
            match spawned {
                Ok(handle) => *queue = Some((tx, handle)),
                Err(e) => {
                    tracing::debug!(error = %e, "no cache writer thread; writing in place");
                    drop(queue);
                    job();
                    return;
                }
            }
        }
        if let Some((tx, _)) = queue.as_ref() {
            *self.pending.0.lock().unwrap_or_else(|e| e.into_inner()) += 1;
            if let Err(mpsc::SendError(job)) = tx.send(Box::new(job)) {
                *self.pending.0.lock().unwrap_or_else(|e| e.into_inner()) -= 1;
                drop(queue);
                job();
            }
        }
    }

    /// Waits until every queued write is done.
    pub fn flush(&self) {
        let (n, cv) = &*self.pending;
        let mut n = n.lock().unwrap_or_else(|e| e.into_inner());
        while *n > 0 {
            n = cv.wait(n).unwrap_or_else(|e| e.into_inner());
        }
    }
}

impl Drop for WriteBack {
    fn drop(&mut self) {
        if let Some((tx, handle)) = self.queue.lock().take() {
            drop(tx);
            let _ = handle.join();
        }
    }
}
