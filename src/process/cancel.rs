//! Cancelling compiles that are under way: a [`CancelToken`] that another thread, a signal
//! handler (`signal_hook::flag::register` with [`CancelToken::flag`]) or a Python `Ctrl-C`
//! sets, and that every compiler process started on a thread inside [`CancelToken::scope`]
//! watches.
//!
//! When the token is set, [`run`](super::run) kills the running compiler's
//! process group within one polling tick (50 ms) and returns
//! [`RunError::Cancelled`](super::RunError::Cancelled); the compile fails with
//! `CompileError::Cancelled` (`hipjit::compiler`), its private build directory is
//! removed as on any other failure, and nothing is published to a cache. A compiler that is
//! not started yet never starts. hipRTC and NVRTC compiling in this process are one library
//! call that cannot be interrupted: their compile ends on its own (a worker process of
//! `hipjit compile -j N` is killed like any compiler).
//!
//! The token reaches the compiler through the thread, not through an argument: it is kept in
//! a thread-local slot for the duration of [`CancelToken::scope`], so that every layer between
//! the caller and the process (the JIT, its caches, the single flight) stays as it is.

use std::cell::RefCell;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// A flag that cancels the compiles of the threads inside its [`scope`](CancelToken::scope).
/// Cloning shares the flag.
#[derive(Clone, Debug, Default)]
pub struct CancelToken(Arc<AtomicBool>);

thread_local! {
    static CURRENT: RefCell<Option<CancelToken>> = const { RefCell::new(None) };
}

impl CancelToken {
    /// A token not yet cancelled.
    pub fn new() -> CancelToken {
        CancelToken::default()
    }

    /// Cancels every compile under this token, now and later. Async-signal-safe (one atomic
    /// store).
    pub fn cancel(&self) {
        self.0.store(true, Ordering::SeqCst);
    }

    /// Whether [`cancel`](CancelToken::cancel) was called (or the flag was set).
    pub fn is_cancelled(&self) -> bool {
        self.0.load(Ordering::SeqCst)
    }

    /// The flag itself, for `signal_hook::flag::register(SIGTERM, token.flag())`: setting it
    /// to `true` cancels.
    pub fn flag(&self) -> Arc<AtomicBool> {
        Arc::clone(&self.0)
    }

    /// Runs `f` on this thread with this token watched by every compiler process it starts
    /// (the previous token of the thread, if any, is restored afterwards, also on a panic).
    pub fn scope<R>(&self, f: impl FnOnce() -> R) -> R {
        struct Restore(Option<CancelToken>);
        impl Drop for Restore {
            fn drop(&mut self) {
                let previous = self.0.take();
                CURRENT.with(|c| *c.borrow_mut() = previous);
            }
        }
        let previous = CURRENT.with(|c| c.borrow_mut().replace(self.clone()));
        let _restore = Restore(previous);
        f()
    }
}

/// The token of this thread's current [`CancelToken::scope`], if any.
pub(crate) fn current() -> Option<CancelToken> {
    CURRENT.with(|c| c.borrow().clone())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scope_sets_the_thread_token_and_restores_the_previous_one() {
        assert!(current().is_none());
        let outer = CancelToken::new();
        let inner = CancelToken::new();
        inner.cancel();
        outer.scope(|| {
            assert!(!current().unwrap().is_cancelled());
            inner.scope(|| assert!(current().unwrap().is_cancelled()));
            assert!(!current().unwrap().is_cancelled());
        });
        assert!(current().is_none());
    }

    #[test]
    fn another_thread_does_not_see_the_token() {
        let t = CancelToken::new();
        t.scope(|| {
            std::thread::scope(|s| {
                s.spawn(|| assert!(current().is_none()));
            })
        });
    }

    #[test]
    fn the_flag_cancels_the_token() {
        let t = CancelToken::new();
        t.flag().store(true, Ordering::SeqCst);
        assert!(t.is_cancelled());
    }
}
