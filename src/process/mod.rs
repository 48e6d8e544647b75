//! Running a child process (the compiler, `hipcc --version`, `hipjit doctor`'s probes) so that
//! it can neither outlive hipjit nor hold it: [`run`] serves the compiler stage and `doctor`;
//! [`cancel`] stops the runs of a scope from another thread; `Slots` bounds how many run at
//! once (`cpu_count`). Below the compilers, above the files: it names only `crate::fs`.
//!
//! * **One deadline for everything.** The timeout covers the run and the reading of its
//!   standard output and error: when the deadline passes, the child's process group is killed
//!   and the run is a [`RunError::Timeout`], even when a descendant that left the group (`setsid
//!   sleep 400 &`) still holds the pipes open.
//! * **Bounded output.** At most [`crate::fs::read::TEXT_OUTPUT_LIMIT`] bytes of each stream
//!   are kept; the rest is read and dropped (so the child never blocks on a full pipe), and a
//!   line saying how much was dropped ends the kept text.
//! * **A busy program is waited for, briefly.** A program open for writing somewhere cannot
//!   be executed (`ETXTBSY`); a wrapper script written just before it is run is, for a moment,
//!   whenever another thread forks meanwhile. The start is retried for up to a second.
//! * **Nothing survives hipjit.** The child leads a new process group (hipcc 5.2.3 runs clang
//!   through `sh`, so killing the direct child alone would leave clang running) and gets
//!   `PR_SET_PDEATHSIG(SIGKILL)`. That signal follows the *thread* that forked the child and
//!   is not inherited by the child's own children, so two more measures: the child is forked
//!   by the thread that then waits for it inside [`run`] (that thread outlives it), and a
//!   watchdog process forked beside it holds the read end of a pipe whose write end only hipjit
//!   holds; when hipjit dies (even by `SIGKILL`) the pipe reads end-of-file and the watchdog
//!   kills the whole group. When the child finishes normally, hipjit kills what is left of its
//!   group itself (before reaping the leader, so the group ID cannot have been reused) and
//!   dismisses the watchdog.

pub mod cancel;

use std::io::Read;
use std::os::fd::{AsRawFd, RawFd};
use std::os::unix::process::CommandExt;
use std::process::{Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use parking_lot::{Condvar, Mutex};

use crate::fs::read::TEXT_OUTPUT_LIMIT;

/// The number of CPU cores this process may use (`std::thread::available_parallelism`, which
/// reads the cgroup's CPU quota: a dozen system calls), read once per process; 1 when unknown.
pub fn cpu_count() -> usize {
    static COUNT: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    *COUNT.get_or_init(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
}

/// What a finished child left behind.
#[derive(Debug)]
pub struct Finished {
    /// Its exit status.
    pub status: ExitStatus,
    /// What it wrote to stdout (at most [`TEXT_OUTPUT_LIMIT`] bytes, then a note of the rest).
    pub stdout: Vec<u8>,
    /// What it wrote to stderr (at most [`TEXT_OUTPUT_LIMIT`] bytes, then a note of the rest).
    pub stderr: Vec<u8>,
}

/// Why a child did not finish.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RunError {
    /// The process could not be started (or waited for).
    #[error("cannot start the process: {0}")]
    Spawn(std::io::Error),
    /// It ran past the timeout (or its output stayed open past it); its process group was
    /// killed. Holds what it wrote to stderr.
    #[error("it ran past its timeout and was killed")]
    Timeout(Vec<u8>),
    /// The thread's [`CancelToken`](cancel::CancelToken) was cancelled: the process was
    /// never started, or its process group was killed.
    #[error("it was cancelled and killed")]
    Cancelled,
}

/// Runs `cmd` in a new process group with stdin closed and stdout/stderr captured (bounded);
/// when `timeout` passes before the child has exited *and* both streams have closed, the group
/// receives SIGKILL. See the module documentation for how the group dies with hipjit. When
/// the [`CancelToken`](cancel::CancelToken) of the calling thread's scope is cancelled,
/// the group is killed within one polling tick (50 ms).
///
/// Errors: [`RunError::Spawn`] when the process cannot be started (or waited for),
/// [`RunError::Timeout`] when it (or its output) ran past `timeout`, [`RunError::Cancelled`]
/// when the thread's token was cancelled before or while it ran.
pub fn run(cmd: &mut Command, timeout: Duration) -> Result<Finished, RunError> {
    let cancel = cancel::current();
    let cancelled = || cancel.as_ref().is_some_and(|c| c.is_cancelled());
    if cancelled() {
        return Err(RunError::Cancelled);
    }
    let deadline = Instant::now() + timeout;
    // SAFETY: getpid has no preconditions.
    let parent = unsafe { libc::getpid() };
    cmd.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0);
    // SAFETY: the closure runs between fork and exec and calls only async-signal-safe
    // functions (prctl, getppid, _exit).
    unsafe {
        cmd.pre_exec(move || {
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            // hipjit died between fork and prctl: the signal would never come.
            if libc::getppid() != parent {
                libc::_exit(1);
            }
            Ok(())
        });
    }
    let mut child = spawn(cmd, deadline, &cancelled)?;
    let pid = child.id() as libc::pid_t;
    let watchdog = Watchdog::start(pid);
    let exit = pidfd(pid);
    let mut streams = [
        Stream::new(child.stdout.take().map(|s| s.into()), "standard output"),
        Stream::new(child.stderr.take().map(|s| s.into()), "standard error"),
    ];
    let mut exited = false;
    let mut was_cancelled = false;
    let timed_out = loop {
        if !exited {
            exited = has_exited(pid);
            if exited {
                // The leader is a zombie until reaped: its ID, the group's, cannot be reused
                // yet. Whatever it left in its group goes now.
                kill_group(pid);
            }
        }
        if exited && streams.iter().all(Stream::closed) {
            break false;
        }
        if cancelled() {
            was_cancelled = true;
            break true;
        }
        let now = Instant::now();
        if now >= deadline {
            break true;
        }
        let tick = (deadline - now).min(Duration::from_millis(50));
        // Until the child has exited, its exit wakes the poll too: its streams close as it
        // exits, a moment before it can be waited for, and the tick would be slept whole.
        let exit = exit.as_ref().filter(|_| !exited).map(AsRawFd::as_raw_fd);
        poll_streams(&mut streams, tick, exit);
    };
    if timed_out {
        kill_group(pid);
    }
    if let Some(w) = watchdog {
        w.dismiss();
    }
    let status = child.wait();
    if timed_out {
        // SIGKILL is delivered asynchronously: the caller is told the run is over only once
        // the group is gone, so that nothing of it outlives a hipjit that exits right after.
        wait_group_gone(pid, Duration::from_millis(500));
    }
    let [out, err] = streams;
    if was_cancelled {
        return Err(RunError::Cancelled);
    }
    if timed_out {
        return Err(RunError::Timeout(err.finish()));
    }
    let status = status.map_err(RunError::Spawn)?;
    Ok(Finished {
        status,
        stdout: out.finish(),
        stderr: err.finish(),
    })
}

/// Runs the program at `path` with `args` (a query: `--version`, `-E -v`, ...) in a cleared
/// environment holding only `env` and `LC_ALL=C`, in `cwd` (also its `TMPDIR`) when given, through
/// [`run`]; its standard output and error, lossily decoded.
///
/// Errors: the reason it gave no answer, as a sentence naming the exit status and its stderr,
/// the spawn error, the timeout or the cancellation; the caller wraps it in its own error with
/// the program's path and arguments.
pub(crate) fn query(
    path: &std::path::Path,
    args: &[&str],
    env: &[(String, std::ffi::OsString)],
    timeout: Duration,
    cwd: Option<&std::path::Path>,
) -> Result<(String, String), String> {
    let mut cmd = Command::new(path);
    cmd.args(args)
        .env_clear()
        .envs(env.iter().map(|(k, v)| (k, v)))
        .env("LC_ALL", "C");
    if let Some(d) = cwd {
        cmd.current_dir(d).env("TMPDIR", d);
    }
    match run(&mut cmd, timeout) {
        Ok(f) if f.status.success() => Ok((
            String::from_utf8_lossy(&f.stdout).into_owned(),
            String::from_utf8_lossy(&f.stderr).into_owned(),
        )),
        Ok(f) => {
            let stderr = String::from_utf8_lossy(&f.stderr);
            Err(match stderr.trim_end() {
                "" => f.status.to_string(),
                text => format!("{}; stderr: {text}", f.status),
            })
        }
        Err(RunError::Spawn(e)) => Err(e.to_string()),
        Err(RunError::Timeout(_)) => Err(format!("no answer within {} s", timeout.as_secs_f64())),
        Err(RunError::Cancelled) => Err("cancelled before it answered".into()),
    }
}

/// How long [`spawn`] retries a program that is busy being written (`ETXTBSY`).
const BUSY_RETRY: Duration = Duration::from_secs(1);

/// `cmd.spawn()`, retried while the program is "busy" (`ETXTBSY`: some process holds it open
/// for writing), for at most [`BUSY_RETRY`] (and never past `deadline`), with waits of 1 ms
/// doubling to 50 ms. A program written just before it is run (a compiler wrapper script) is
/// busy for a moment whenever another thread of the process forks meanwhile: the child holds
/// the written file's descriptor until it executes its own program.
fn spawn(
    cmd: &mut Command,
    deadline: Instant,
    cancelled: &dyn Fn() -> bool,
) -> Result<std::process::Child, RunError> {
    let until = deadline.min(Instant::now() + BUSY_RETRY);
    let mut wait = Duration::from_millis(1);
    loop {
        match cmd.spawn() {
            Err(e) if e.raw_os_error() == Some(libc::ETXTBSY) && Instant::now() < until => {
                if cancelled() {
                    return Err(RunError::Cancelled);
                }
                std::thread::sleep(wait.min(until.saturating_duration_since(Instant::now())));
                wait = (wait * 2).min(Duration::from_millis(50));
            }
            r => return r.map_err(RunError::Spawn),
        }
    }
}

/// Whether `pid` (a child of this process) has exited, without reaping it.
fn has_exited(pid: libc::pid_t) -> bool {
    let mut info = std::mem::MaybeUninit::<libc::siginfo_t>::zeroed();
    // SAFETY: waitid writes `info`; WNOWAIT leaves the child waitable for Child::wait.
    let rc = unsafe {
        libc::waitid(
            libc::P_PID,
            pid as libc::id_t,
            info.as_mut_ptr(),
            libc::WEXITED | libc::WNOHANG | libc::WNOWAIT,
        )
    };
    if rc != 0 {
        // ECHILD: already reaped (cannot happen here) or not our child: treat as gone.
        return true;
    }
    // SAFETY: waitid returned 0 and zeroed-then-filled `info`; si_pid is 0 when no child
    // has changed state (WNOHANG).
    unsafe { info.assume_init().si_pid() != 0 }
}

/// Waits until no process of the group `pid` led still runs (killed ones take a moment to
/// die), at most `limit`. A member that died but waits to be reaped (an orphan is reaped by
/// init, which in a container may take its time) is gone: the group is asked of `/proc`, where
/// such a zombie shows state `Z`.
fn wait_group_gone(pid: libc::pid_t, limit: Duration) {
    let until = Instant::now() + limit;
    // SAFETY: kill(2) with signal 0 only asks whether the group has a member.
    while unsafe { libc::kill(-pid, 0) } == 0 && group_runs(pid) && Instant::now() < until {
        std::thread::sleep(Duration::from_millis(2));
    }
}

/// Whether a process of group `pgid` runs (is not a zombie), from `/proc/<pid>/stat`: after
/// the command name in parentheses come the state, the parent and the group.
fn group_runs(pgid: libc::pid_t) -> bool {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return false;
    };
    dir.flatten()
        .filter(|e| {
            e.file_name()
                .to_str()
                .is_some_and(|n| n.bytes().all(|b| b.is_ascii_digit()))
        })
        .filter_map(|e| std::fs::read_to_string(e.path().join("stat")).ok())
        .any(|stat| {
            let Some((_, rest)) = stat.rsplit_once(')') else {
                return false;
            };
            let mut fields = rest.split_whitespace();
            let state = fields.next();
            let group = fields.nth(1).and_then(|g| g.parse::<libc::pid_t>().ok());
            group == Some(pgid) && state != Some("Z")
        })
}

fn kill_group(pid: libc::pid_t) {
    // SAFETY: kill(2) with a negative pid signals the process group the child leads
    // (process_group(0) made its pid the group ID); no memory is involved.
    unsafe {
        libc::kill(-pid, libc::SIGKILL);
    }
}

/// One captured stream: the pipe (non-blocking), the kept bytes, the count dropped.
struct Stream {
    pipe: Option<std::fs::File>,
    kept: Vec<u8>,
    dropped: u64,
    name: &'static str,
}

impl Stream {
    fn new(pipe: Option<std::os::fd::OwnedFd>, name: &'static str) -> Stream {
        let pipe = pipe.map(std::fs::File::from);
        if let Some(p) = &pipe {
            // SAFETY: fcntl on a descriptor this stream owns.
            unsafe {
                let fl = libc::fcntl(p.as_raw_fd(), libc::F_GETFL);
                libc::fcntl(p.as_raw_fd(), libc::F_SETFL, fl | libc::O_NONBLOCK);
            }
        }
        Stream {
            pipe,
            kept: Vec::new(),
            dropped: 0,
            name,
        }
    }

    fn closed(&self) -> bool {
        self.pipe.is_none()
    }

    /// Reads what is there now; closes the stream at end-of-file or on an error.
    fn drain(&mut self) {
        let Some(p) = self.pipe.as_mut() else { return };
        let mut buf = [0u8; 16 * 1024];
        loop {
            match p.read(&mut buf) {
                Ok(0) => {
                    self.pipe = None;
                    return;
                }
                Ok(n) => {
                    let room = (TEXT_OUTPUT_LIMIT as usize).saturating_sub(self.kept.len());
                    let keep = n.min(room);
                    self.kept.extend_from_slice(&buf[..keep]);
                    self.dropped += (n - keep) as u64;
                }
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => return,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(_) => {
                    self.pipe = None;
                    return;
                }
            }
        }
    }

    fn finish(mut self) -> Vec<u8> {
        if self.dropped > 0 {
            self.kept.extend_from_slice(
                format!(
                    "\n[hipjit: {} more bytes of {} not kept (limit {TEXT_OUTPUT_LIMIT} bytes)]\n",
                    self.dropped, self.name
                )
                .as_bytes(),
            );
        }
        self.kept
    }
}

/// A descriptor that becomes readable when process `pid` (a child of this process, not yet
/// reaped) exits (`pidfd_open(2)`, Linux 5.3); `None` where the kernel has none.
fn pidfd(pid: libc::pid_t) -> Option<std::os::fd::OwnedFd> {
    use std::os::fd::FromRawFd;
    // SAFETY: pidfd_open takes a pid and flags and returns a new descriptor or -1.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) };
    // SAFETY: a descriptor just returned to this process, owned from here on.
    (fd >= 0).then(|| unsafe { std::os::fd::OwnedFd::from_raw_fd(fd as RawFd) })
}

/// Waits up to `tick` for output on the open streams, or for `exit` (a pidfd: the child's
/// exit) to be readable, then reads what came. With neither (every stream closed, and no
/// pidfd), sleeps at most 5 ms: a child whose streams closed is usually about to be waitable.
fn poll_streams(streams: &mut [Stream], tick: Duration, exit: Option<RawFd>) {
    let mut fds: Vec<libc::pollfd> = streams
        .iter()
        .filter_map(|s| s.pipe.as_ref())
        .map(|p| p.as_raw_fd())
        .chain(exit)
        .map(|fd| libc::pollfd {
            fd,
            events: libc::POLLIN,
            revents: 0,
        })
        .collect();
    if fds.is_empty() {
        std::thread::sleep(tick.min(Duration::from_millis(5)));
        return;
    }
    // SAFETY: `fds` is a valid array of fds.len() pollfd structures.
    unsafe {
        libc::poll(
            fds.as_mut_ptr(),
            fds.len() as libc::nfds_t,
            tick.as_millis() as i32,
        );
    }
    for s in streams.iter_mut() {
        s.drain();
    }
}

/// The watchdog process of one run (see the module documentation).
struct Watchdog {
    pid: libc::pid_t,
    pipe: RawFd,
}

impl Watchdog {
    /// Forks the watchdog of the group led by `group`; `None` when it cannot be started (the
    /// run goes on, protected by PR_SET_PDEATHSIG alone).
    fn start(group: libc::pid_t) -> Option<Watchdog> {
        let mut fds = [0 as RawFd; 2];
        // SAFETY: pipe2 writes two descriptors into `fds`.
        if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
            return None;
        }
        let [read_end, write_end] = fds;
        // SAFETY: fork; the child below calls only async-signal-safe functions (setpgid, dup2,
        // syscall(close_range), close, read, kill, _exit) and never returns.
        let pid = unsafe { libc::fork() };
        if pid == 0 {
            // SAFETY: as above; every call is async-signal-safe and touches only local data.
            unsafe {
                // Out of hipjit's process group: a Ctrl-C meant for hipjit must not take the
                // watchdog with it.
                libc::setpgid(0, 0);
                let fd: RawFd = 3;
                if read_end != fd {
                    libc::dup2(read_end, fd);
                }
                // Hold nothing of hipjit's but the pipe (another run's pipe included).
                if libc::syscall(libc::SYS_close_range, 4u32, u32::MAX, 0u32) != 0 {
                    for other in 4..1024 {
                        libc::close(other);
                    }
                }
                for std_fd in 0..3 {
                    libc::close(std_fd);
                }
                let mut byte = 0u8;
                loop {
                    let n = libc::read(fd, (&mut byte as *mut u8).cast(), 1);
                    if n > 0 {
                        // Dismissed: the run ended normally.
                        libc::_exit(0);
                    }
                    if n == 0 || *libc::__errno_location() != libc::EINTR {
                        break;
                    }
                }
                // End of file: hipjit is gone.
                libc::kill(-group, libc::SIGKILL);
                libc::_exit(0);
            }
        }
        // SAFETY: closing the read end this process no longer needs.
        unsafe { libc::close(read_end) };
        if pid < 0 {
            // SAFETY: closing the write end of a pipe nobody reads.
            unsafe { libc::close(write_end) };
            return None;
        }
        Some(Watchdog {
            pid,
            pipe: write_end,
        })
    }

    /// Tells the watchdog the run is over, and reaps it.
    fn dismiss(self) {
        // SAFETY: one byte from a local to the pipe this process owns; then closing it and
        // reaping the watchdog, a child of this process.
        unsafe {
            let byte = 1u8;
            libc::write(self.pipe, (&byte as *const u8).cast(), 1);
            libc::close(self.pipe);
            let mut status = 0;
            while libc::waitpid(self.pid, &mut status, 0) < 0
                && *libc::__errno_location() == libc::EINTR
            {}
        }
    }
}

/// A counting semaphore: at most `limit` holders at once.
#[derive(Debug)]
pub(crate) struct Slots {
    limit: usize,
    used: Mutex<usize>,
    freed: Condvar,
}

impl Slots {
    /// `limit` slots; 0: the number of CPU cores (`cpu_count`), read when first
    /// needed (a cache hit runs no compiler and never reads it).
    pub fn new(limit: usize) -> Slots {
        Slots {
            limit,
            used: Mutex::new(0),
            freed: Condvar::new(),
        }
    }

    /// Blocks until a slot is free; the slot is returned when the guard drops.
    pub fn acquire(&self) -> SlotGuard<'_> {
        let limit = self.limit();
        let mut used = self.used.lock();
        while *used >= limit {
            self.freed.wait(&mut used);
        }
        *used += 1;
        SlotGuard { slots: self }
    }

    /// How many compiles may run at once (at least 1).
    pub fn limit(&self) -> usize {
        match self.limit {
            0 => cpu_count(),
            n => n,
        }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zero_slots_mean_the_cpu_count_and_an_explicit_limit_is_kept() {
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        assert_eq!(Slots::new(0).limit(), cores);
        assert_eq!(Slots::new(3).limit(), 3);
        let one = Slots::new(1);
        let held = one.acquire();
        assert_eq!(*one.used.lock(), 1);
        drop(held);
        assert_eq!(*one.used.lock(), 0);
    }

    /// A program busy being written (here: open for writing in this process, as it is in a
    /// child forked by another thread before that child executes) is run once the writer
    /// lets go, not refused with "Text file busy".
    #[test]
    fn a_program_busy_being_written_is_run_once_the_writer_lets_go() {
        use std::io::Write;
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let prog = dir.path().join("tool");
        let mut f = std::fs::File::create(&prog).unwrap();
        f.write_all(b"#!/bin/sh\necho ran\n").unwrap();
        std::fs::set_permissions(&prog, std::fs::Permissions::from_mode(0o755)).unwrap();
        let busy = std::process::Command::new(&prog).output().unwrap_err();
        assert_eq!(
            busy.raw_os_error(),
            Some(libc::ETXTBSY),
            "the writer makes it busy"
        );
        let writer = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(100));
            drop(f);
        });
        let done = run(&mut Command::new(&prog), Duration::from_secs(10))
            .unwrap_or_else(|e| panic!("{e}"));
        writer.join().unwrap();
        assert!(done.status.success());
        assert_eq!(done.stdout, b"ran\n");
    }

    /// A program that stays busy is refused after [`BUSY_RETRY`] with the system's error, not
    /// waited on until the run's timeout.
    #[test]
    fn a_program_that_stays_busy_is_refused_after_the_retry_time() {
        use std::io::Write;
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let prog = dir.path().join("tool");
        let mut f = std::fs::File::create(&prog).unwrap();
        f.write_all(b"#!/bin/sh\nexit 0\n").unwrap();
        std::fs::set_permissions(&prog, std::fs::Permissions::from_mode(0o755)).unwrap();
        let start = Instant::now();
        let err = run(&mut Command::new(&prog), Duration::from_secs(60)).unwrap_err();
        let took = start.elapsed();
        drop(f);
        match err {
            RunError::Spawn(e) => assert_eq!(e.raw_os_error(), Some(libc::ETXTBSY), "{e}"),
            other => panic!("expected a spawn error, got {other}"),
        }
        assert!(took >= BUSY_RETRY, "retried for {took:?}");
        assert!(
            took < Duration::from_secs(30),
            "waited {took:?}, as if for the timeout"
        );
    }
}
