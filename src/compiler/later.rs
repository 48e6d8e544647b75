//! Removing a compile's private directories (hipcc's build directory, hipRTC's and NVRTC's
//! scratch) off the compile's path: once the output and the dependency list are read, nothing
//! needs them, and removing even an empty directory took about 8 ms on this project's disk
//! (measured: `mkdtemp`, `mkdir`, then `rmtree`), on every miss. A thread of the process
//! removes them in order ([`remove_later`]); a process that exits normally (`exit`, a return
//! from `main`) waits for what is queued, at most [`EXIT_WAIT`], so that it leaves none behind.
//! A process killed meanwhile leaves its directories as a killed compile does: each is named
//! after the process, and `hipjit`'s next run removes those of processes that no longer run
//! (`ProcessTmpDir::new`).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{mpsc, Condvar, Mutex, OnceLock};
use std::time::Duration;

/// How long a normal exit waits for the directories still queued.
pub(crate) const EXIT_WAIT: Duration = Duration::from_secs(5);

/// At most this many wait to be removed; past it, one is removed at once.
const MAX_QUEUED: usize = 64;

/// The count of values queued and not yet dropped, and its change.
static QUEUED: (Mutex<usize>, Condvar) = (Mutex::new(0), Condvar::new());

/// A lock-free look at the count, for [`MAX_QUEUED`].
static APPROX: AtomicUsize = AtomicUsize::new(0);

fn change(by: isize) {
    let (n, cv) = &QUEUED;
    let mut n = n.lock().unwrap_or_else(|e| e.into_inner());
    *n = n.saturating_add_signed(by);
    APPROX.store(*n, Ordering::Relaxed);
    cv.notify_all();
}

/// Drops `dir` (a value whose drop removes a directory: `tempfile::TempDir`, `RunDir`) on the
/// remover thread, or here when that thread cannot be started or [`MAX_QUEUED`] already wait.
pub(crate) fn remove_later<T: Send + 'static>(dir: T) {
    static SENDER: OnceLock<Option<mpsc::Sender<Box<dyn Send>>>> = OnceLock::new();
    let sender = SENDER.get_or_init(|| {
        let (tx, rx) = mpsc::channel::<Box<dyn Send>>();
        let spawned = std::thread::Builder::new()
            .name("hipjit-remove".into())
            .spawn(move || {
                for dir in rx {
                    drop(dir);
                    change(-1);
                }
            });
        spawned.ok()?;
        // SAFETY: atexit registers a function taking and returning nothing; it runs at a
        // normal exit, on the exiting thread, while the remover thread still runs.
        unsafe { libc::atexit(wait_at_exit) };
        Some(tx)
    });
    match sender {
        Some(tx) if APPROX.load(Ordering::Relaxed) < MAX_QUEUED => {
            change(1);
            if let Err(mpsc::SendError(dir)) = tx.send(Box::new(dir)) {
                change(-1);
                drop(dir);
            }
        }
        _ => drop(dir),
    }
}

/// Waits, at a normal exit, until the queue is empty or [`EXIT_WAIT`] passed.
extern "C" fn wait_at_exit() {
    let (n, cv) = &QUEUED;
    let Ok(n) = n.lock() else { return };
    let _ = cv.wait_timeout_while(n, EXIT_WAIT, |n| *n > 0);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_directory_handed_over_is_removed_soon_after() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().to_path_buf();
        std::fs::write(path.join("f"), "x").unwrap();
        remove_later(dir);
        let until = std::time::Instant::now() + Duration::from_secs(10);
        while path.exists() && std::time::Instant::now() < until {
            std::thread::sleep(Duration::from_millis(5));
        }
        assert!(!path.exists(), "{} is still there", path.display());
    }
}
