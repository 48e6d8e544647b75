//! SIGINT, SIGTERM and SIGHUP while `hipjit compile` runs: the first one cancels the compiles
//! (`hipjit::compiler::cancel`: each running compiler's process group is killed within 50 ms,
//! its build directory removed, nothing published to the cache), and the command then exits
//! with status 128 + the signal's number (130 for SIGINT, 143 for SIGTERM) once every thread
//! has cleaned up. A second signal ends the command at once with the same status (the
//! compilers still die with it: `hipjit::process`'s watchdog kills them, and the
//! next compile removes the build directories of dead processes), and so does the first one
//! when the work is not over [`GRACE`] after it: a compile in this process (NVRTC, hipRTC)
//! cannot be cancelled, and one blocked on a file it opened would otherwise keep the command
//! alive. Nothing half-written is left by that exit: outputs and cache entries are renamed
//! into place whole, and an in-process compile has written nothing yet.
//!
//! The signals are taken by signal-hook's iterator on a thread of its own: nothing but an
//! async-signal-safe write runs in signal context.

use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// How long the first signal waits for the work to end before ending the command itself.
pub const GRACE: Duration = Duration::from_secs(5);

use hipjit::compiler::cancel::CancelToken;
use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};
use signal_hook::iterator::Signals;

/// The handler of one command run: which signal came (if any), and whether the work is over.
pub struct Interrupts {
    caught: Arc<AtomicI32>,
    done: Arc<AtomicBool>,
}

impl Interrupts {
    /// Takes SIGINT, SIGTERM and SIGHUP from now on: the first cancels `token`.
    ///
    /// Errors: the handler cannot be installed (signal-hook's pipe or thread), in words.
    pub fn install(token: &CancelToken) -> Result<Interrupts, String> {
        let mut signals = Signals::new([SIGINT, SIGTERM, SIGHUP])
            .map_err(|e| format!("cannot install the signal handler: {e}"))?;
        let caught = Arc::new(AtomicI32::new(0));
        let done = Arc::new(AtomicBool::new(false));
        let (c, d, t) = (Arc::clone(&caught), Arc::clone(&done), token.clone());
        std::thread::Builder::new()
            .name("hipjit-signals".into())
            .spawn(move || {
                for sig in signals.forever() {
                    // SeqCst on both sides: either `finish` sees the signal, or this thread
                    // sees that the work is over and ends the process itself.
                    if !d.load(Ordering::SeqCst) && c.load(Ordering::SeqCst) == 0 {
                        c.store(sig, Ordering::SeqCst);
                        t.cancel();
                        let d = Arc::clone(&d);
                        // If the thread cannot start, a second signal still ends the command.
                        let _ = std::thread::Builder::new()
                            .name("hipjit-grace".into())
                            .spawn(move || {
                                std::thread::sleep(GRACE);
                                if !d.load(Ordering::SeqCst) {
                                    std::process::exit(128 + sig);
                                }
                            });
                    } else {
                        std::process::exit(128 + sig);
                    }
                }
            })
            .map_err(|e| format!("cannot start the signal thread: {e}"))?;
        Ok(Interrupts { caught, done })
    }

    /// Marks the work over (a later signal ends the process at once) and returns the signal
    /// that cancelled it, if one did.
    pub fn finish(&self) -> Option<i32> {
        self.done.store(true, Ordering::SeqCst);
        match self.caught.load(Ordering::SeqCst) {
            0 => None,
            s => Some(s),
        }
    }
}

/// `SIGINT`, `SIGTERM`, `SIGHUP`, else `signal N`.
pub fn signal_name(sig: i32) -> String {
    match sig {
        SIGINT => "SIGINT".into(),
        SIGTERM => "SIGTERM".into(),
        SIGHUP => "SIGHUP".into(),
        _ => format!("signal {sig}"),
    }
}
