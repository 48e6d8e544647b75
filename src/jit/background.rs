//! Compiles off the launch path: [`Jit::compile_in_background`] and
//! [`Jit::kernel_in_background`] hand a request to a small pool of threads owned by the
//! [`Jit`] and return a [`Pending`] handle at once; a [`SwitchingKernel`] launches a
//! caller-supplied fallback kernel until the specialised one is compiled and loaded, then
//! switches to it, once and for all.
//!
//! The pool ([`BackgroundOptions`]): at most `threads` threads (started on demand, default 2),
//! at most `max_queued` requests waiting (a request beyond that is refused at once with
//! [`BackgroundError::QueueFull`], never blocking the caller), and a request already waiting or
//! compiling is not queued twice: the second caller gets a handle on the same result. A
//! background compile is an ordinary [`Jit::compile`] (or [`Jit::kernel`]) run on a pool
//! thread, so it goes through the same caches, single flight and publication; its error,
//! or a panic, is the handle's result, never lost.
//!
//! The pool holds the [`Jit`] weakly: a request still waiting when the last `Arc<Jit>` is
//! dropped ends with [`BackgroundError::NotRun`], one compiling keeps the `Jit` alive until it
//! ends, and dropping the `Jit` never waits for a compile (the pool's idle threads are told to
//! stop and joined; a thread that held the last `Arc` is let go).

use std::any::Any;
use std::collections::VecDeque;
use std::fmt;
use std::sync::{Arc, OnceLock, Weak};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use parking_lot::{Condvar, Mutex};

use super::{Compiled, Jit, JitError};
use crate::compiler::CompileOptions;
use crate::safe::device::Device;
use crate::safe::error::LaunchError;
use crate::safe::kernel::{ArgShape, Kernel};
use crate::safe::launch::{KernelArgs, LaunchConfig};
use crate::safe::stream::AsStream;

/// The pool of background compiles ([`JitOptions::background`](super::JitOptions::background)).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BackgroundOptions {
    /// Threads compiling at most at once (started when the first requests come; 0 is taken as
    /// 1). Default: 2, so that background compiles leave the CPU to the process's own work.
    pub threads: usize,
    /// Requests waiting at most for a thread; one more is refused at once
    /// ([`BackgroundError::QueueFull`]). Default: 64.
    pub max_queued: usize,
}

impl Default for BackgroundOptions {
    fn default() -> Self {
        BackgroundOptions {
            threads: 2,
            max_queued: 64,
        }
    }
}

/// Why a background compile gave no result, or why a [`SwitchingKernel`] keeps its fallback.
/// Cheap to clone: every handle on one request shares it.
#[derive(Clone, Debug, thiserror::Error)]
#[non_exhaustive]
pub enum BackgroundError {
    /// The compile (or load) failed, as [`Jit::compile`] or [`Jit::kernel`] would have.
    #[error(transparent)]
    Jit(Arc<JitError>),
    /// The compile panicked; the pool thread lives on.
    #[error("the background compile panicked: {message}")]
    Panicked {
        /// The panic's message.
        message: String,
    },
    /// `max_queued` requests were already waiting ([`BackgroundOptions::max_queued`]).
    #[error("the background compile was refused: {max} requests are already waiting (BackgroundOptions::max_queued)")]
    QueueFull {
        /// The bound.
        max: usize,
    },
    /// The request never ran.
    #[error("the background compile never ran: {reason}")]
    NotRun {
        /// Why: the `Jit` was dropped first, or no pool thread could be started.
        reason: String,
    },
    /// The specialised kernel's arguments are not the fallback's (their count or sizes, or it
    /// writes an argument the fallback does not), as the code objects' metadata declares them:
    /// a [`SwitchingKernel`] does not switch.
    #[error("kernel {name}: not switching to the specialised kernel: its arguments ({specialised}) are not the fallback's ({fallback})")]
    ArgumentsDiffer {
        /// The specialised kernel's name.
        name: String,
        /// The fallback's arguments, described.
        fallback: String,
        /// The specialised kernel's arguments, described.
        specialised: String,
    },
}

/// One result, shared by the handles on it and the pool thread that fills it.
struct Slot<T> {
    result: OnceLock<Result<T, BackgroundError>>,
    lock: Mutex<()>,
    filled: Condvar,
}

impl<T> Slot<T> {
    fn new() -> Arc<Slot<T>> {
        Arc::new(Slot {
            result: OnceLock::new(),
            lock: Mutex::new(()),
            filled: Condvar::new(),
        })
    }

    fn done(result: Result<T, BackgroundError>) -> Arc<Slot<T>> {
        let s = Slot::new();
        let _ = s.result.set(result);
        s
    }

    fn fill(&self, result: Result<T, BackgroundError>) {
        let _ = self.result.set(result);
        // Under the lock, so that a waiter between its check and its wait is woken.
        let _guard = self.lock.lock();
        self.filled.notify_all();
    }

    /// Waits until filled or until `deadline`.
    fn wait(&self, deadline: Option<Instant>) -> Option<&Result<T, BackgroundError>> {
        if let Some(r) = self.result.get() {
            return Some(r);
        }
        let mut guard = self.lock.lock();
        loop {
            if let Some(r) = self.result.get() {
                return Some(r);
            }
            match deadline {
                None => self.filled.wait(&mut guard),
                Some(d) => {
                    if self.filled.wait_until(&mut guard, d).timed_out() {
                        return self.result.get();
                    }
                }
            }
        }
    }
}

/// A background compile's handle ([`Jit::compile_in_background`], [`Jit::kernel_in_background`]):
/// poll it, or wait for it. Clones (and the handles of a deduplicated request) share one result.
pub struct Pending<T> {
    slot: Arc<Slot<T>>,
}

impl<T> Clone for Pending<T> {
    fn clone(&self) -> Self {
        Pending {
            slot: Arc::clone(&self.slot),
        }
    }
}

impl<T> fmt::Debug for Pending<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let state = match self.slot.result.get() {
            None => "compiling",
            Some(Ok(_)) => "ready",
            Some(Err(_)) => "failed",
        };
        f.debug_struct("Pending").field("state", &state).finish()
    }
}

impl<T> Pending<T> {
    /// A handle already holding `result`.
    pub fn ready(result: Result<T, BackgroundError>) -> Pending<T> {
        Pending {
            slot: Slot::done(result),
        }
    }

    /// Whether the compile has ended (with a result or an error): an atomic load, for the
    /// launch path.
    pub fn is_ready(&self) -> bool {
        self.slot.result.get().is_some()
    }

    /// The result when the compile has ended, `None` before; never waits.
    pub fn poll(&self) -> Option<&Result<T, BackgroundError>> {
        self.slot.result.get()
    }

    /// Waits for the result.
    pub fn wait(&self) -> &Result<T, BackgroundError> {
        self.slot
            .wait(None)
            .expect("a wait without a deadline ends with a result")
    }

    /// Waits for the result at most `timeout`; `None` if the compile has not ended by then.
    pub fn wait_timeout(&self, timeout: Duration) -> Option<&Result<T, BackgroundError>> {
        self.slot.wait(Some(Instant::now() + timeout))
    }
}

/// What a request is, for the deduplication of requests waiting or compiling.
#[derive(PartialEq)]
struct RequestKey {
    /// (runtime identity, device ordinal, kernel name) for a kernel; `None` for a compile.
    kernel: Option<(usize, i32, String)>,
    source: Vec<u8>,
    options: CompileOptions,
}

struct Job {
    key: Arc<RequestKey>,
    /// Runs the request (`true`) or ends it unrun (`false`: the pool is stopping).
    run: Box<dyn FnOnce(bool) + Send>,
}

#[derive(Default)]
struct State {
    queue: VecDeque<Job>,
    /// Requests waiting or compiling, with their (type-erased) slot.
    in_flight: Vec<(Arc<RequestKey>, Arc<dyn Any + Send + Sync>)>,
    idle: usize,
    stopping: bool,
}

#[derive(Default)]
struct Shared {
    state: Mutex<State>,
    work: Condvar,
}

/// The background pool of one [`Jit`]: threads started on demand, told to stop and joined
/// when the `Jit` is dropped.
pub(crate) struct Pool {
    options: BackgroundOptions,
    shared: Arc<Shared>,
    threads: Mutex<Vec<JoinHandle<()>>>,
}

impl fmt::Debug for Pool {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Pool")
            .field("options", &self.options)
            .field("threads", &self.threads.lock().len())
            .finish()
    }
}

impl Pool {
    pub(crate) fn new(options: BackgroundOptions) -> Pool {
        Pool {
            options,
            shared: Arc::default(),
            threads: Mutex::new(Vec::new()),
        }
    }

    /// Queues `work` for `key` (or joins the request already waiting or compiling for it).
    fn submit<T: Send + Sync + 'static>(
        &self,
        key: RequestKey,
        work: impl FnOnce() -> Result<T, BackgroundError> + Send + 'static,
    ) -> Pending<T> {
        let mut state = self.shared.state.lock();
        if let Some((_, slot)) = state.in_flight.iter().find(|(k, _)| **k == key) {
            if let Ok(slot) = Arc::clone(slot).downcast::<Slot<T>>() {
                return Pending { slot };
            }
        }
        if state.stopping {
            return Pending::ready(Err(BackgroundError::NotRun {
                reason: "the Jit is being dropped".into(),
            }));
        }
        if state.queue.len() >= self.options.max_queued {
            return Pending::ready(Err(BackgroundError::QueueFull {
                max: self.options.max_queued,
            }));
        }
        let slot = Slot::<T>::new();
        let key = Arc::new(key);
        let filled = Arc::clone(&slot);
        let run = move |run: bool| {
            let result = if run {
                match std::panic::catch_unwind(std::panic::AssertUnwindSafe(work)) {
                    Ok(r) => r,
                    Err(panic) => Err(BackgroundError::Panicked {
                        message: panic_message(&*panic),
                    }),
                }
            } else {
                Err(BackgroundError::NotRun {
                    reason: "the Jit was dropped before it ran".into(),
                })
            };
            filled.fill(result);
        };
        state.in_flight.push((Arc::clone(&key), slot.clone() as _));
        state.queue.push_back(Job {
            key,
            run: Box::new(run),
        });
        let start = state.idle < state.queue.len();
        drop(state);
        self.shared.work.notify_one();
        if start {
            self.start_thread();
        }
        Pending { slot }
    }

    /// Starts one more thread, unless `threads` run already; with none running and none
    /// startable, ends the waiting requests with [`BackgroundError::NotRun`].
    fn start_thread(&self) {
        let mut threads = self.threads.lock();
        if threads.len() >= self.options.threads.max(1) {
            return;
        }
        let shared = Arc::clone(&self.shared);
        let n = threads.len();
        match std::thread::Builder::new()
            .name(format!("hipjit-bg-{n}"))
            .spawn(move || worker(&shared))
        {
            Ok(t) => threads.push(t),
            Err(e) if threads.is_empty() => {
                let jobs = std::mem::take(&mut self.shared.state.lock().queue);
                drop(threads);
                tracing::warn!(error = %e, "hipjit: cannot start a background compile thread");
                for job in jobs {
                    finish(&self.shared, job, false);
                }
            }
            Err(e) => tracing::debug!(error = %e, "hipjit: one background thread fewer"),
        }
    }
}

impl Drop for Pool {
    fn drop(&mut self) {
        let jobs = {
            let mut state = self.shared.state.lock();
            state.stopping = true;
            std::mem::take(&mut state.queue)
        };
        self.shared.work.notify_all();
        for job in jobs {
            finish(&self.shared, job, false);
        }
        // No thread is compiling (each holds the Jit while it does), except this one when it
        // dropped the last `Arc<Jit>`: it is let go, the others end at once.
        let me = std::thread::current().id();
        for t in self.threads.get_mut().drain(..) {
            if t.thread().id() != me {
                let _ = t.join();
            }
        }
    }
}

/// Runs (or ends unrun) `job`, then forgets its request.
fn finish(shared: &Shared, job: Job, run: bool) {
    (job.run)(run);
    shared
        .state
        .lock()
        .in_flight
        .retain(|(k, _)| !Arc::ptr_eq(k, &job.key));
}

fn worker(shared: &Shared) {
    loop {
        let job = {
            let mut state = shared.state.lock();
            loop {
                if let Some(job) = state.queue.pop_front() {
                    break job;
                }
                if state.stopping {
                    return;
                }
                state.idle += 1;
                shared.work.wait(&mut state);
                state.idle -= 1;
            }
        };
        finish(shared, job, true);
    }
}

fn panic_message(panic: &(dyn Any + Send)) -> String {
    panic
        .downcast_ref::<&str>()
        .map(|s| (*s).to_owned())
        .or_else(|| panic.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "(no message)".into())
}

impl Jit {
    /// Compiles `source` with `options` on this JIT's background pool ([`BackgroundOptions`])
    /// and returns at once: a memory hit is a [`Pending`] already ready; anything else is an
    /// ordinary [`Jit::compile`] run on a pool thread (disk and remote tiers, single flight,
    /// publication), its result or error (or panic) the handle's. A request already waiting
    /// or compiling is not queued again: the handle shares its result.
    ///
    /// The pool holds the `Jit` weakly (hence `self: &Arc<Self>`): keep an `Arc` to it while
    /// compiles wait, or they end with [`BackgroundError::NotRun`].
    pub fn compile_in_background(
        self: &Arc<Self>,
        source: impl AsRef<[u8]>,
        options: &CompileOptions,
    ) -> Pending<Compiled> {
        let source = source.as_ref();
        if let Some(hit) = self.memory_hit(source, options) {
            return Pending::ready(hit.map_err(|e| BackgroundError::Jit(Arc::new(e))));
        }
        let key = RequestKey {
            kernel: None,
            source: source.to_vec(),
            options: options.clone(),
        };
        let jit = Arc::downgrade(self);
        let (source, options) = (source.to_vec(), options.clone());
        self.background.submit(key, move || {
            upgrade(&jit)?
                .compile(&source, &options)
                .map_err(|e| BackgroundError::Jit(Arc::new(e)))
        })
    }

    /// [`Jit::kernel`] on the background pool: compiles (or finds in a cache) `source` for
    /// `device`, loads it there and finds the kernel `name`, returning at once; a kernel
    /// already cached ([`Jit::kernel`]'s hit) is a [`Pending`] already ready. The kernel is
    /// cached as [`Jit::kernel`] caches it, so that call is a hit afterwards. For a
    /// [`SwitchingKernel`]. As [`Jit::compile_in_background`] otherwise.
    pub fn kernel_in_background(
        self: &Arc<Self>,
        device: &Device,
        source: impl AsRef<[u8]>,
        name: &str,
        options: &CompileOptions,
    ) -> Pending<Kernel> {
        let source = source.as_ref();
        if let Some(k) = self.kernels.get(device, source, |o| o == options, name) {
            return Pending::ready(Ok(k));
        }
        let key = RequestKey {
            kernel: Some((
                Arc::as_ptr(&device.runtime().inner) as usize,
                device.ordinal(),
                name.to_owned(),
            )),
            source: source.to_vec(),
            options: options.clone(),
        };
        let jit = Arc::downgrade(self);
        let (device, source, name, options) = (
            device.clone(),
            source.to_vec(),
            name.to_owned(),
            options.clone(),
        );
        self.background.submit(key, move || {
            upgrade(&jit)?
                .kernel(&device, &source, &name, &options)
                .map_err(|e| BackgroundError::Jit(Arc::new(e)))
        })
    }
}

/// The `Jit` of a request about to run: gone only when the last `Arc<Jit>` was dropped
/// after a pool thread took the request.
fn upgrade(jit: &Weak<Jit>) -> Result<Arc<Jit>, BackgroundError> {
    jit.upgrade().ok_or_else(|| BackgroundError::NotRun {
        reason: "the Jit was dropped before it ran".into(),
    })
}

/// A kernel that launches a caller-supplied fallback until the specialised kernel compiling
/// in the background ([`Jit::kernel_in_background`]) is compiled and loaded, then launches
/// that one, for good: [`SwitchingKernel::current`] is either kernel, never anything between
/// (the specialised kernel is published once, through a [`OnceLock`]), and never goes back.
///
/// The switch is checked: both kernels' arguments, as their code objects' metadata declares
/// them, must have the same count and sizes, and the specialised kernel may write only
/// arguments the fallback writes (so the arguments built for the fallback are right for it).
/// Otherwise, or when the compile fails, it keeps the fallback, logs the error once (a
/// `tracing` warning) and reports it in [`SwitchingKernel::error`].
///
/// Checking costs one atomic load per launch once switched, three before.
#[derive(Debug)]
pub struct SwitchingKernel {
    fallback: Kernel,
    pending: Pending<Kernel>,
    switched: OnceLock<Kernel>,
    failed: OnceLock<BackgroundError>,
}

impl SwitchingKernel {
    /// Launches `fallback` until `specialised` is ready (see the type).
    pub fn new(fallback: Kernel, specialised: Pending<Kernel>) -> SwitchingKernel {
        SwitchingKernel {
            fallback,
            pending: specialised,
            switched: OnceLock::new(),
            failed: OnceLock::new(),
        }
    }

    /// The kernel to launch now: the specialised one once it is ready and its arguments match,
    /// else the fallback. Never waits.
    #[inline]
    pub fn current(&self) -> &Kernel {
        if let Some(k) = self.switched.get() {
            return k;
        }
        self.settle()
    }

    #[cold]
    fn settle(&self) -> &Kernel {
        if self.failed.get().is_some() {
            return &self.fallback;
        }
        match self.pending.poll() {
            None => &self.fallback,
            Some(Ok(k)) => match compatible(&self.fallback, k) {
                Ok(()) => self.switched.get_or_init(|| k.clone()),
                Err(e) => self.fail(e),
            },
            Some(Err(e)) => self.fail(e.clone()),
        }
    }

    fn fail(&self, e: BackgroundError) -> &Kernel {
        if self.failed.set(e).is_ok() {
            if let Some(e) = self.failed.get() {
                tracing::warn!(kernel = %self.fallback.name(), error = %e,
                    "hipjit: keeping the fallback kernel");
            }
        }
        &self.fallback
    }

    /// Whether launches now go to the specialised kernel.
    pub fn is_switched(&self) -> bool {
        self.current();
        self.switched.get().is_some()
    }

    /// Why it keeps the fallback for good: the compile's error, or the arguments that differ;
    /// `None` while compiling and once switched.
    pub fn error(&self) -> Option<&BackgroundError> {
        self.current();
        self.failed.get()
    }

    /// Waits until the compile has ended and returns the kernel launched from then on:
    /// the specialised one, or the error that keeps the fallback.
    pub fn wait(&self) -> Result<&Kernel, &BackgroundError> {
        self.pending.wait();
        let k = self.current();
        match self.failed.get() {
            Some(e) => Err(e),
            None => Ok(k),
        }
    }

    /// The fallback kernel.
    pub fn fallback(&self) -> &Kernel {
        &self.fallback
    }

    /// The background compile of the specialised kernel.
    pub fn pending(&self) -> &Pending<Kernel> {
        &self.pending
    }

    /// [`Kernel::launch`] of [`SwitchingKernel::current`].
    ///
    /// Errors: those of [`Kernel::launch`].
    ///
    /// # Safety
    /// As [`Kernel::launch`], for both kernels: the arguments must be what either kernel's
    /// code expects.
    pub unsafe fn launch(
        &self,
        stream: &impl AsStream,
        cfg: LaunchConfig,
        args: &mut KernelArgs<'_>,
    ) -> Result<(), LaunchError> {
        // SAFETY: the caller's contract covers both kernels.
        unsafe { self.current().launch(stream, cfg, args) }
    }
}

/// Whether `specialised` takes the arguments built for `fallback` (metadata of both known).
fn compatible(fallback: &Kernel, specialised: &Kernel) -> Result<(), BackgroundError> {
    let (Some(f), Some(s)) = (fallback.inner.shape, specialised.inner.shape) else {
        // Without metadata (or past MAX_KERNEL_ARGS) there is nothing to compare; each launch
        // checks what it can.
        return Ok(());
    };
    if f.len == s.len && f.sizes == s.sizes && s.written & !f.written == 0 {
        return Ok(());
    }
    Err(BackgroundError::ArgumentsDiffer {
        name: specialised.name().to_owned(),
        fallback: describe(&f),
        specialised: describe(&s),
    })
}

fn describe(shape: &ArgShape) -> String {
    let sizes: Vec<String> = shape.sizes[..shape.len]
        .iter()
        .enumerate()
        .map(|(i, s)| match shape.written & (1 << i) {
            0 => s.to_string(),
            _ => format!("{s} (written)"),
        })
        .collect();
    match shape.len {
        0 => "no arguments".into(),
        n => format!("{n} of {} bytes", sizes.join(", ")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(n: u8) -> RequestKey {
        RequestKey {
            kernel: None,
            source: vec![n],
            options: CompileOptions::default(),
        }
    }

    #[test]
    fn a_panic_is_the_handles_error_and_the_thread_lives_on() {
        let pool = Pool::new(BackgroundOptions {
            threads: 1,
            max_queued: 4,
        });
        let p = pool.submit::<u32>(key(1), || panic!("generator bug {}", 7));
        match p.wait() {
            Err(BackgroundError::Panicked { message }) => assert_eq!(message, "generator bug 7"),
            other => panic!("{other:?}"),
        }
        let q = pool.submit::<u32>(key(2), || Ok(5));
        assert_eq!(*q.wait().as_ref().unwrap(), 5);
        assert_eq!(pool.threads.lock().len(), 1);
    }

    #[test]
    fn dropping_the_pool_ends_waiting_requests_unrun_without_waiting() {
        let pool = Pool::new(BackgroundOptions {
            threads: 1,
            max_queued: 4,
        });
        let (tx, rx) = std::sync::mpsc::channel::<()>();
        let (started, taken) = std::sync::mpsc::channel::<()>();
        let running = pool.submit::<u32>(key(1), move || {
            started.send(()).unwrap();
            let _ = rx.recv_timeout(Duration::from_secs(30));
            Ok(1)
        });
        taken.recv().unwrap();
        let waiting = pool.submit::<u32>(key(2), || Ok(2));
        let same = pool.submit::<u32>(key(2), || Ok(3));
        // The thread is inside the first request: release it from another thread after the
        // pool is told to stop (Drop joins the thread once the request ends).
        let release = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(50));
            tx.send(()).unwrap();
        });
        drop(pool);
        release.join().unwrap();
        assert_eq!(*running.wait().as_ref().unwrap(), 1);
        assert!(matches!(
            waiting.wait(),
            Err(BackgroundError::NotRun { .. })
        ));
        assert!(matches!(same.wait(), Err(BackgroundError::NotRun { .. })));
    }
}
