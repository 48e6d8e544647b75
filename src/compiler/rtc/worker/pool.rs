//! The parent's side of serving workers: a [`WorkerPool`] keeps started workers
//! (`hipjit rtc-worker --serve`) between requests, each serving one request at a time, so that
//! a batch starts hipRTC or NVRTC (and its LLVM) once a worker instead of once a file.
//!
//! * **Keyed.** A worker serves only requests of the compiler kind, library, worker program,
//!   memory bound and environment it was started with.
//! * **Sized by use.** A request takes an idle worker of its key, else starts one: a pool
//!   holds at most as many workers as requests ran at once through it (the caller's
//!   [`crate::compiler::CompilerConfig::max_concurrent`]); starting one drops an idle worker
//!   of another key, if any. A [`WorkerPool::bounded`] pool holds at most its bound: a request
//!   past it waits for a worker to come back, so that a caller may run more requests at once
//!   than it wants compiles (one keys and publishes while the workers compile).
//! * **Timeout, cancellation, crash.** A request past [`WorkerConfig::timeout`], or cancelled,
//!   kills its worker's process group; a worker that dies fails the request it served with
//!   the signal or status and what it wrote to stderr meanwhile. Either way the worker is
//!   dropped and the next request starts another.
//! * **Memory bound.** `RLIMIT_AS` is set at the worker's start and holds for all its
//!   requests.
//! * **Nothing outlives hipjit.** Workers are killed (their process group) when the pool is
//!   dropped, all of them signalled before the first is waited for, so that their exits (each
//!   unmapping hipRTC's LLVM, several ms) overlap; they are started by one thread that lives as long as the process, with
//!   `PR_SET_PDEATHSIG(SIGKILL)`, and an idle worker reads end-of-file when the parent's end
//!   of its socket closes.
//! * **Scratch.** Each worker has a private directory (`hipjit-worker-<pid>-...`) holding its
//!   `TMPDIR` (comgr's `comgr-*` staging), emptied after every request and removed with the
//!   worker, and the file its stderr goes to.
//! * **Versioned.** A worker's first frame names the protocol and its version
//!   ([`super::PROTOCOL_VERSION`]); a worker that ends without one (a `hipjit` from before the
//!   serving mode refuses `--serve`) is run one request at a time through files instead, for
//!   the pool's life, each such process counted as a worker while it runs (a bounded pool's
//!   bound holds them too); a worker speaking another version is an error naming both.

use std::ffi::OsString;
use std::os::unix::fs::DirBuilderExt;
use std::os::unix::net::UnixStream;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::{Condvar, Mutex};

use super::frame::{Channel, Stop};
use super::{signal_name, Hello, WorkerConfig, HELLO_MAGIC, PROTOCOL_VERSION, WORKER_SUBCOMMAND};
use crate::compiler::kind::CompilerKind;
use crate::compiler::rtc::RtcError;

/// Long-lived worker processes shared by the clones of one [`WorkerConfig`] (a clone of the
/// pool is a handle on the same workers); they are killed when the last handle drops.
#[derive(Clone, Default)]
pub struct WorkerPool(Arc<Pool>);

impl std::fmt::Debug for WorkerPool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WorkerPool")
            .field("idle", &self.0.idle.lock().len())
            .field("started", &self.started())
            .finish()
    }
}

impl WorkerPool {
    /// A pool of at most `max_workers` workers, serving and idle together (0: unbounded, as
    /// [`WorkerPool::default`]). A request that finds no idle worker of its key while
    /// `max_workers` are running waits until one comes back (an idle worker of another key
    /// goes, and one of its key starts in its place) or one fails and goes; it checks its
    /// thread's cancellation every 50 ms meanwhile (`RtcError::Worker`, "cancelled"). The wait
    /// is not part of the worker's timeout, which counts from the request's start in a worker.
    /// So a caller may run more requests at once than it wants compiles: one keys and
    /// publishes a result while `max_workers` compile, and a worker that answers gets its next
    /// request at once.
    pub fn bounded(max_workers: usize) -> WorkerPool {
        WorkerPool(Arc::new(Pool {
            idle: Mutex::default(),
            one_shot: Mutex::default(),
            started: AtomicU64::new(0),
            max: max_workers,
            running: AtomicUsize::new(0),
            returned: Condvar::new(),
        }))
    }

    /// How many serving workers this pool started so far (replacements included).
    pub fn started(&self) -> u64 {
        self.0.started.load(Ordering::Relaxed)
    }

    /// How many workers wait for a request now.
    pub fn idle(&self) -> usize {
        self.0.idle.lock().len()
    }

    /// Serves the encoded `request` for `kind` and `library` with a worker of this pool (one
    /// of `program`, started now when none of the key is idle): the encoded answer. When
    /// `program` does not serve (an earlier hipjit), `once` runs the request in a process of
    /// its own instead, counted as one of the pool's workers while it runs, so that a
    /// [`WorkerPool::bounded`] pool's bound holds those processes too.
    pub(super) fn serve(
        &self,
        config: &WorkerConfig,
        program: &Path,
        kind: CompilerKind,
        library: &Path,
        request: &[u8],
        once: impl FnOnce() -> Result<Vec<u8>, RtcError>,
    ) -> Result<Vec<u8>, RtcError> {
        let fail = |reason: String| RtcError::Worker {
            compiler: kind.name(),
            reason,
        };
        let key = Key {
            kind,
            library: library.to_path_buf(),
            program: program.to_path_buf(),
            memory_limit: config.memory_limit,
            env: std::env::vars_os().collect(),
        };
        let (idle, other) = self.0.take(&key)?;
        // From here until it is put back (or it failed and went), the pool counts this
        // request's worker as running.
        let _running = Running(&self.0);
        // Asked after the wait, which another request's finding may have ended.
        if self.0.one_shot.lock().contains(&key) {
            drop(other);
            return once();
        }
        let mut worker = match idle {
            Some(w) => w,
            None => {
                // One idle worker of another key goes, so that the pool does not grow.
                drop(other);
                match Worker::start(config, program, &fail)? {
                    Some(w) => {
                        self.0.started.fetch_add(1, Ordering::Relaxed);
                        w
                    }
                    None => {
                        let mut one_shot = self.0.one_shot.lock();
                        if !one_shot.contains(&key) {
                            one_shot.push(key);
                        }
                        drop(one_shot);
                        return once();
                    }
                }
            }
        };
        let answer = worker.request(request, config, &fail)?;
        self.0.idle.lock().push((key, worker));
        Ok(answer)
    }
}

/// A request's hold on one of the pool's running workers: released (and a waiting request
/// woken) when it drops, the worker put back idle or gone.
struct Running<'a>(&'a Pool);

impl Drop for Running<'_> {
    fn drop(&mut self) {
        // Under the lock that waiting requests check the count with: none misses the change.
        let _idle = self.0.idle.lock();
        self.0.running.fetch_sub(1, Ordering::Relaxed);
        self.0.returned.notify_all();
    }
}

/// What a worker serves: it is never handed a request of another key.
#[derive(PartialEq, Eq)]
struct Key {
    kind: CompilerKind,
    library: PathBuf,
    program: PathBuf,
    memory_limit: Option<u64>,
    env: Vec<(OsString, OsString)>,
}

#[derive(Default)]
struct Pool {
    idle: Mutex<Vec<(Key, Worker)>>,
    /// The keys whose program did not serve: run one request at a time.
    one_shot: Mutex<Vec<Key>>,
    started: AtomicU64,
    /// At most this many workers, running and idle together; 0: unbounded.
    max: usize,
    /// Workers serving a request (or starting for one) now; changed under `idle`'s lock.
    running: AtomicUsize,
    /// Signalled when a running worker is put back or goes.
    returned: Condvar,
}

impl Pool {
    /// For a request of `key`: an idle worker of its key, or room to start one (with the idle
    /// worker of another key it replaces, to drop), counted as running from now on; waits
    /// while the pool is at its bound and has neither.
    ///
    /// Errors: [`RtcError::Worker`] when the thread's cancellation comes while it waits.
    #[allow(clippy::type_complexity)]
    fn take(&self, key: &Key) -> Result<(Option<Worker>, Option<(Key, Worker)>), RtcError> {
        let cancel = crate::process::cancel::current();
        let mut idle = self.idle.lock();
        loop {
            if let Some(i) = idle.iter().position(|(k, _)| k == key) {
                self.running.fetch_add(1, Ordering::Relaxed);
                return Ok((Some(idle.swap_remove(i).1), None));
            }
            let other = idle.iter().position(|(k, _)| k != key);
            let room =
                self.max == 0 || self.running.load(Ordering::Relaxed) + idle.len() < self.max;
            if room || other.is_some() {
                self.running.fetch_add(1, Ordering::Relaxed);
                // At the bound, the idle worker of another key goes to make room; below it
                // too, so that the pool does not grow.
                return Ok((None, other.map(|i| idle.swap_remove(i))));
            }
            if cancel.as_ref().is_some_and(|c| c.is_cancelled()) {
                return Err(RtcError::Worker {
                    compiler: key.kind.name(),
                    reason: "the compile was cancelled while it waited for a worker".into(),
                });
            }
            self.returned.wait_for(&mut idle, Duration::from_millis(50));
        }
    }
}

impl Drop for Pool {
    fn drop(&mut self) {
        // Every worker signalled first, then each reaped (and its directory removed) as it
        // drops: the exits run at once instead of one after the other.
        let idle = std::mem::take(self.idle.get_mut());
        for (_, w) in &idle {
            kill_group(w.pid);
        }
        drop(idle);
    }
}

/// A started worker.
struct Worker {
    child: Child,
    pid: libc::pid_t,
    channel: Channel,
    /// Its `TMPDIR`, emptied after every request.
    scratch: PathBuf,
    /// The file its stderr goes to (opened for appending), emptied before every request.
    stderr: PathBuf,
    /// Its private directory, removed after it is killed (declared last: dropped last).
    _dir: crate::compiler::RunDir,
}

impl Worker {
    /// Starts a worker of `program` and reads its hello; `None` when it ended without one (a
    /// program that does not serve).
    fn start(
        config: &WorkerConfig,
        program: &Path,
        fail: &dyn Fn(String) -> RtcError,
    ) -> Result<Option<Worker>, RtcError> {
        let dir = crate::compiler::RunDir::new(
            crate::compiler::WORKER_PREFIX,
            &crate::compiler::build_base(),
        )
        .map_err(|e| fail(format!("cannot make its directory: {e}")))?;
        let scratch = dir.path().join("tmp");
        std::fs::DirBuilder::new()
            .mode(0o700)
            .create(&scratch)
            .map_err(|e| fail(format!("cannot make {}: {e}", scratch.display())))?;
        let stderr = dir.path().join("stderr");
        let stderr_file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&stderr)
            .map_err(|e| fail(format!("cannot make {}: {e}", stderr.display())))?;
        let (ours, theirs) =
            UnixStream::pair().map_err(|e| fail(format!("cannot make its socket: {e}")))?;
        let theirs_too = theirs
            .try_clone()
            .map_err(|e| fail(format!("cannot make its socket: {e}")))?;
        let mut cmd = Command::new(program);
        cmd.arg(WORKER_SUBCOMMAND)
            .arg("--serve")
            .env("TMPDIR", &scratch)
            .stdin(Stdio::from(std::os::fd::OwnedFd::from(theirs)))
            .stdout(Stdio::from(std::os::fd::OwnedFd::from(theirs_too)))
            .stderr(Stdio::from(stderr_file))
            .process_group(0);
        // SAFETY: getpid has no preconditions.
        let parent = unsafe { libc::getpid() };
        let limit = config.memory_limit;
        // SAFETY: the closure runs between fork and exec and calls only async-signal-safe
        // functions (prctl, getppid, setrlimit, _exit).
        unsafe {
            cmd.pre_exec(move || {
                if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                // hipjit died between fork and prctl: the signal would never come.
                if libc::getppid() != parent {
                    libc::_exit(1);
                }
                if let Some(limit) = limit {
                    let lim = libc::rlimit {
                        rlim_cur: limit as libc::rlim_t,
                        rlim_max: limit as libc::rlim_t,
                    };
                    if libc::setrlimit(libc::RLIMIT_AS, &lim) != 0 {
                        return Err(std::io::Error::last_os_error());
                    }
                }
                Ok(())
            });
        }
        let child = spawn_lasting(cmd)
            .map_err(|e| fail(format!("cannot run {}: {e}", program.display())))?;
        let pid = child.id() as libc::pid_t;
        let channel = Channel::new(ours).map_err(|e| fail(format!("its socket: {e}")));
        let worker = Worker {
            child,
            pid,
            channel: match channel {
                Ok(c) => c,
                Err(e) => {
                    kill_and_reap(pid);
                    return Err(e);
                }
            },
            scratch,
            stderr,
            _dir: dir,
        };
        let hello = match worker.channel.receive(Instant::now() + config.timeout) {
            Ok(bytes) => bytes,
            Err(Stop::Closed) => return Ok(None),
            Err(Stop::TimedOut) => {
                return Err(fail(format!(
                    "{} did not start serving within {} s",
                    program.display(),
                    config.timeout.as_secs_f64()
                )))
            }
            Err(Stop::Cancelled) => {
                return Err(fail(
                    "the compile was cancelled and its worker killed".into(),
                ))
            }
            Err(Stop::Broken(why)) => {
                return Err(fail(format!(
                    "{} did not say hello: {why}",
                    program.display()
                )))
            }
        };
        let hello: Hello = rmp_serde::from_slice(&hello).map_err(|e| {
            fail(format!(
                "{} answered --serve with something else than a hipjit worker's hello ({e})",
                program.display()
            ))
        })?;
        if hello.magic != HELLO_MAGIC || hello.protocol != PROTOCOL_VERSION {
            return Err(fail(format!(
                "{} speaks {} protocol {}, this hipjit {HELLO_MAGIC} protocol \
                 {PROTOCOL_VERSION}: name a hipjit command of this hipjit's version",
                program.display(),
                hello.magic,
                hello.protocol
            )));
        }
        Ok(Some(worker))
    }

    /// Sends `request` and reads the answer within the timeout. A worker that failed to
    /// answer is killed: the error says why.
    fn request(
        &mut self,
        request: &[u8],
        config: &WorkerConfig,
        fail: &dyn Fn(String) -> RtcError,
    ) -> Result<Vec<u8>, RtcError> {
        // What the worker writes to stderr from now on is this request's.
        if let Ok(f) = std::fs::OpenOptions::new().write(true).open(&self.stderr) {
            let _ = f.set_len(0);
        }
        let deadline = Instant::now() + config.timeout;
        let stop = match self.channel.send(request, deadline) {
            Ok(()) => match self.channel.receive(deadline) {
                Ok(answer) => {
                    self.empty_scratch();
                    return Ok(answer);
                }
                Err(stop) => stop,
            },
            Err(stop) => stop,
        };
        Err(fail(match stop {
            Stop::TimedOut => format!(
                "the compile ran past the worker's timeout of {} s and was killed",
                config.timeout.as_secs_f64()
            ),
            Stop::Cancelled => "the compile was cancelled and its worker killed".into(),
            Stop::Broken(why) => format!("its answer could not be read ({why}); it was killed"),
            Stop::Closed => self.died(config),
        }))
    }

    /// How the worker ended, once it closed its socket mid-request: its signal or status, the
    /// memory bound, what it wrote to stderr.
    fn died(&mut self, config: &WorkerConfig) -> String {
        use std::os::unix::process::ExitStatusExt;
        // It closed its end: it is ending. Wait a moment for it to, before the group is
        // killed (the status then is its own, not our SIGKILL).
        let until = Instant::now() + Duration::from_secs(2);
        while !has_exited(self.pid) && Instant::now() < until {
            std::thread::sleep(Duration::from_millis(5));
        }
        kill_group(self.pid);
        let how = match self.child.wait() {
            Ok(status) => match status.signal() {
                Some(sig) => format!("was killed by signal {sig} ({})", signal_name(sig)),
                None => format!("exited with {status}"),
            },
            Err(e) => format!("cannot be waited for ({e})"),
        };
        let bound = config
            .memory_limit
            .map(|l| format!(" (memory bound {} MiB)", l >> 20))
            .unwrap_or_default();
        let stderr = crate::fs::read::read_file(
            &self.stderr,
            crate::fs::read::TEXT_OUTPUT_LIMIT,
            "a worker's stderr",
            crate::fs::read::Streams::None,
        )
        .unwrap_or_default();
        let stderr = String::from_utf8_lossy(&stderr);
        let tail = match stderr.trim_end() {
            "" => String::new(),
            text => format!(": {text}"),
        };
        format!("the worker {how}{bound}{tail}")
    }

    /// Removes what the last compile left in the worker's `TMPDIR` (comgr removes its own
    /// staging when it ends normally; this is for what it did not).
    fn empty_scratch(&self) {
        if let Ok(entries) = std::fs::read_dir(&self.scratch) {
            for e in entries.flatten() {
                let p = e.path();
                let _ = if e.file_type().is_ok_and(|t| t.is_dir()) {
                    std::fs::remove_dir_all(&p)
                } else {
                    std::fs::remove_file(&p)
                };
            }
        }
    }
}

impl Drop for Worker {
    fn drop(&mut self) {
        // Killed whether idle or not (an idle worker has nothing to lose), then reaped; its
        // directory goes after.
        kill_group(self.pid);
        let _ = self.child.wait();
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
    // SAFETY: waitid returned 0 and filled `info` (si_pid 0: no change yet).
    rc != 0 || unsafe { info.assume_init().si_pid() != 0 }
}

fn kill_group(pid: libc::pid_t) {
    // SAFETY: kill(2) with a negative pid signals the group the unreaped child leads.
    unsafe {
        libc::kill(-pid, libc::SIGKILL);
    }
}

fn kill_and_reap(pid: libc::pid_t) {
    kill_group(pid);
    let mut status = 0;
    // SAFETY: reaping a child of this process.
    unsafe { libc::waitpid(pid, &mut status, 0) };
}

type SpawnJob = (Command, std::sync::mpsc::Sender<std::io::Result<Child>>);

/// Spawns `cmd` from a thread that lives as long as the process: `PR_SET_PDEATHSIG` fires when
/// the thread that forked the child ends, and a worker must outlive the request (and the
/// thread) that started it. Where that thread cannot be started, from this one.
fn spawn_lasting(mut cmd: Command) -> std::io::Result<Child> {
    static SPAWNER: std::sync::OnceLock<Option<Mutex<std::sync::mpsc::Sender<SpawnJob>>>> =
        std::sync::OnceLock::new();
    let spawner = SPAWNER.get_or_init(|| {
        let (tx, rx) = std::sync::mpsc::channel::<SpawnJob>();
        std::thread::Builder::new()
            .name("hipjit-worker-spawner".into())
            .spawn(move || {
                for (mut cmd, back) in rx {
                    let spawned = cmd.spawn();
                    // The worker's end of its socket, held by the command, closes here, so
                    // that the parent reads end-of-file when the worker dies.
                    drop(cmd);
                    let _ = back.send(spawned);
                }
            })
            .ok()
            .map(|_| Mutex::new(tx))
    });
    let Some(spawner) = spawner else {
        return cmd.spawn();
    };
    let (back, answer) = std::sync::mpsc::channel();
    if let Err(std::sync::mpsc::SendError((mut cmd, _))) = spawner.lock().send((cmd, back)) {
        return cmd.spawn();
    }
    answer
        .recv()
        .unwrap_or_else(|_| Err(std::io::Error::other("the spawning thread ended")))
}
