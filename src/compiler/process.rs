//! Running a child process with a timeout (the whole process group is killed when it expires)
//! and a cap on how many run at once. [`run`] serves the compiler stage and `hipjit doctor`.

use std::io::Read;
use std::os::unix::process::CommandExt;
use std::process::{Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use parking_lot::{Condvar, Mutex};

/// What a finished child left behind.
#[derive(Debug)]
pub struct Finished {
    /// Its exit status.
    pub status: ExitStatus,
    /// Everything it wrote to stdout.
    pub stdout: Vec<u8>,
    /// Everything it wrote to stderr.
    pub stderr: Vec<u8>,
}

/// Why a child did not finish.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RunError {
    /// The process could not be started.
    #[error("cannot start the process: {0}")]
    Spawn(std::io::Error),
    /// It ran past the timeout; its process group was killed. Holds what it wrote to stderr.
    #[error("it ran past its timeout and was killed")]
    Timeout(Vec<u8>),
}

/// Runs `cmd` in a new process group with stdin closed and stdout/stderr captured; after
/// `timeout` the group receives SIGKILL (hipcc 5.2.3 runs clang through `sh`, so killing the
/// direct child alone would leave clang running).
///
/// Errors: [`RunError::Spawn`] when the process cannot be started (or waited for),
/// [`RunError::Timeout`] when it ran past `timeout`.
pub fn run(cmd: &mut Command, timeout: Duration) -> Result<Finished, RunError> {
    cmd.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0);
    let mut child = cmd.spawn().map_err(RunError::Spawn)?;
    let pid = child.id() as libc::pid_t;
    let out_reader = child.stdout.take().map(spawn_reader);
    let err_reader = child.stderr.take().map(spawn_reader);
    let (tx, rx) = mpsc::channel();
    let waiter = std::thread::spawn(move || {
        let status = child.wait();
        let _ = tx.send(());
        status
    });
    let timed_out = rx.recv_timeout(timeout).is_err();
    if timed_out {
        // SAFETY: kill(2) with a negative pid signals the process group we created for the
        // child (process_group(0) made its pid the group id); no memory is involved.
        unsafe {
            libc::kill(-pid, libc::SIGKILL);
        }
    }
    let status = waiter.join().map_err(|_| {
        RunError::Spawn(std::io::Error::other(
            "the thread waiting for the child panicked",
        ))
    })?;
    let collect = |r: Option<std::thread::JoinHandle<Vec<u8>>>| {
        r.and_then(|h| h.join().ok()).unwrap_or_default()
    };
    let stdout = collect(out_reader);
    let stderr = collect(err_reader);
    if timed_out {
        return Err(RunError::Timeout(stderr));
    }
    let status = status.map_err(RunError::Spawn)?;
    Ok(Finished {
        status,
        stdout,
        stderr,
    })
}

fn spawn_reader<R: Read + Send + 'static>(mut r: R) -> std::thread::JoinHandle<Vec<u8>> {
    std::thread::spawn(move || {
        let mut buf = Vec::new();
        let _ = r.read_to_end(&mut buf);
        buf
    })
}

/// A counting semaphore: at most `limit` holders at once.
#[derive(Debug)]
pub(crate) struct Slots {
    limit: usize,
    used: Mutex<usize>,
    freed: Condvar,
}

impl Slots {
    pub fn new(limit: usize) -> Slots {
        Slots {
            limit: limit.max(1),
            used: Mutex::new(0),
            freed: Condvar::new(),
        }
    }

    /// Blocks until a slot is free; the slot is returned when the guard drops.
    pub fn acquire(&self) -> SlotGuard<'_> {
        let mut used = self.used.lock();
        while *used >= self.limit {
            self.freed.wait(&mut used);
        }
        *used += 1;
        SlotGuard { slots: self }
    }

    pub fn limit(&self) -> usize {
        self.limit
    }
}

pub(crate) struct SlotGuard<'a> {
    slots: &'a Slots,
}

impl Drop for SlotGuard<'_> {
    fn drop(&mut self) {
        let mut used = self.slots.used.lock();
        *used -= 1;
        self.slots.freed.notify_one();
    }
}
