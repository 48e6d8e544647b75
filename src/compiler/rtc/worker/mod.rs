//! Running an in-process compiler (hipRTC, NVRTC) in worker processes: the `hipjit rtc-worker`
//! mode of hipjit's own command opens the same library and compiles, so that a compile gets
//! what a process compiler has: a timeout after which its worker's process group is killed, a
//! memory bound (`RLIMIT_AS`), and isolation from its crashes (hipRTC 5.2.3 is not safe from
//! two threads at once and aborts on inputs it does not expect). Several workers run in
//! parallel where hipRTC in one process runs one program at a time.
//!
//! In process, hipRTC and NVRTC have none of these: a compile runs to its end, may take any
//! memory, and a crash ends the caller's process. Ask for a worker when that matters (batches,
//! `hipjit compile -j`, untrusted sources).
//!
//! A worker lives across requests ([`WorkerPool`], in [`WorkerConfig::pool`]): started as
//! `hipjit rtc-worker --serve`, it opens the library once and serves one request at a time,
//! each a frame of MessagePack (`frame`) on a socket that is its standard input and output: the
//! source, headers, include directories and options in; the code, log, diagnostics, files read
//! and start time, or the error, out. Paths travel as bytes, so a path that is not UTF-8
//! survives. A request that times out or is cancelled kills its worker; one that crashes it
//! fails with the signal; either way the next request gets a new worker. A worker's `TMPDIR`
//! is in its private directory (mode 0700, `hipjit-worker-<pid>-...` under `TMPDIR`, removed
//! with the worker, or by a later hipjit when this process was killed first): comgr's staged
//! copies of the source and headers (`comgr-*`), which a crashed or killed worker leaves, go
//! with it, and it is emptied after every request.
//!
//! A worker program that does not serve (a `hipjit` from before `--serve`) is run once a
//! request instead (`hipjit rtc-worker REQUEST RESULT`, the request and result in files of
//! such a private directory); one whose hello names another protocol version is an error.
//!
//! The worker is found at [`WorkerConfig::program`], else `HIPJIT_WORKER`; it is a `hipjit`
//! command built with the `cli` feature (the `hipjit` command uses itself).

mod frame;
mod pool;
mod serve;

pub use pool::WorkerPool;
pub use serve::{serve, serve_requests};

use std::ffi::OsString;
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::os::unix::fs::DirBuilderExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, SystemTime};

use serde::{Deserialize, Serialize};

use super::{RtcError, RtcInput, RtcOutput};
use crate::compiler::depfile::Dependency;
use crate::compiler::diagnostics::Diagnostic;
use crate::compiler::kind::CompilerKind;
use crate::fs;
use crate::process::{self, RunError};

/// The variable naming the worker program (a `hipjit` command built with the `cli` feature).
pub const WORKER_ENV: &str = "HIPJIT_WORKER";

/// The hidden subcommand of the `hipjit` command that serves requests (`--serve`: one after
/// the other, in frames on its standard input; else the one in the file it is given).
pub const WORKER_SUBCOMMAND: &str = "rtc-worker";

/// The version of the serving protocol (`rtc-worker --serve`): a worker's first frame, its
/// hello, names it, and the pool serves through it only a worker of this version.
pub const PROTOCOL_VERSION: u32 = 1;

/// The protocol's name in a worker's hello.
const HELLO_MAGIC: &str = "hipjit-rtc-worker";

/// A serving worker's first frame: the protocol, its version, the worker's process ID.
#[derive(Serialize, Deserialize)]
struct Hello {
    magic: String,
    protocol: u32,
    pid: u32,
}

/// A request's compiler as it travels: the name RtcKind, this protocol's enum before
/// [`CompilerKind`], gave it (`HipRtc`, `Nvrtc`), so that a worker of an earlier hipjit
/// reads a request of this one and the other way round.
mod wire_kind {
    use crate::compiler::CompilerKind;
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(k: &CompilerKind, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(match k {
            CompilerKind::HipRtc => "HipRtc",
            CompilerKind::Nvrtc => "Nvrtc",
            other => other.as_str(),
        })
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<CompilerKind, D::Error> {
        let name = String::deserialize(d)?;
        name.parse().map_err(serde::de::Error::custom)
    }
}

/// How to run a worker.
#[derive(Clone, Debug)]
pub struct WorkerConfig {
    /// The worker program; `None` reads `HIPJIT_WORKER`.
    pub program: Option<PathBuf>,
    /// How long one compile may take, start to result, before the worker's process group is
    /// killed. Default 300 s, as the process compilers'.
    pub timeout: Duration,
    /// The worker's address-space bound in bytes (`RLIMIT_AS`); `None`: unbounded. hipRTC maps
    /// its LLVM (about 200 MB on HIP 5.2.3) before it compiles anything, so leave room for that.
    /// Set when a worker starts, it bounds all the requests that worker serves.
    pub memory_limit: Option<u64>,
    /// The workers started so far, kept between requests; shared by this config's clones, and
    /// killed when the last of them is dropped. Default: a new, empty pool.
    pub pool: WorkerPool,
}

impl Default for WorkerConfig {
    fn default() -> Self {
        WorkerConfig {
            program: None,
            timeout: Duration::from_secs(300),
            memory_limit: None,
            pool: WorkerPool::default(),
        }
    }
}

#[derive(Serialize, Deserialize)]
struct Request {
    #[serde(with = "wire_kind")]
    kind: CompilerKind,
    library: Vec<u8>,
    source: Vec<u8>,
    name: String,
    headers: Vec<(String, Vec<u8>)>,
    include_dirs: Vec<Vec<u8>>,
    options: Vec<String>,
}

#[derive(Serialize, Deserialize)]
struct WireDependency {
    include_dir: Option<usize>,
    name: Vec<u8>,
    path: Vec<u8>,
}

#[derive(Serialize, Deserialize)]
enum Response {
    Compiled {
        code: Vec<u8>,
        log: String,
        diagnostics: Vec<Diagnostic>,
        dependencies: Vec<WireDependency>,
        started: SystemTime,
    },
    /// [`RtcError::Compile`], kept whole.
    CompileFailed {
        name: String,
        options: Vec<String>,
        log: String,
        diagnostics: Vec<Diagnostic>,
    },
    /// Any other error, as its text.
    Failed(String),
}

fn path_bytes(p: &Path) -> Vec<u8> {
    p.as_os_str().as_bytes().to_vec()
}

fn path(b: Vec<u8>) -> PathBuf {
    PathBuf::from(OsString::from_vec(b))
}

/// Compiles `input` with the `kind` library at `library` in a worker process of
/// [`WorkerConfig::pool`] (one of the pool's, else one started now and kept; a program that
/// does not serve: one started for this request alone).
///
/// Errors: those of [`HipRtc::compile`](super::hiprtc::HipRtc::compile) /
/// [`NvRtc::compile`](super::nvrtc::NvRtc::compile) as the worker returned them
/// ([`RtcError::Compile`] whole, any other as [`RtcError::Worker`] with its text), and
/// [`RtcError::Worker`] when no worker program is named, it cannot be started, it speaks
/// another protocol version, it ran past [`WorkerConfig::timeout`] (and was killed), the
/// caller's cancellation token was cancelled (and it was killed), it died by a signal (a
/// crash, or the memory bound), or it left no readable result.
pub fn compile(
    config: &WorkerConfig,
    kind: CompilerKind,
    library: &Path,
    input: &RtcInput<'_>,
) -> Result<RtcOutput, RtcError> {
    let compiler = kind.name();
    let fail = |reason: String| RtcError::Worker { compiler, reason };
    let program = config
        .program
        .clone()
        .or_else(|| {
            std::env::var_os(WORKER_ENV)
                .filter(|v| !v.is_empty())
                .map(PathBuf::from)
        })
        .ok_or_else(|| {
            fail(format!(
                "no worker program: name a hipjit command built with the cli feature in \
                 {WORKER_ENV} or WorkerConfig::program"
            ))
        })?;
    let request = Request {
        kind,
        library: path_bytes(library),
        source: input.source.to_vec(),
        name: input.name.to_owned(),
        headers: input.headers.to_vec(),
        include_dirs: input.include_dirs.iter().map(|d| path_bytes(d)).collect(),
        options: input.options.to_vec(),
    };
    let encoded =
        rmp_serde::to_vec(&request).map_err(|e| fail(format!("cannot encode the request: {e}")))?;
    let bytes = config
        .pool
        .serve(config, &program, kind, library, &encoded, || {
            compile_once(config, &program, kind, encoded.clone())
        })?;
    let response: Response = rmp_serde::from_slice(&bytes)
        .map_err(|e| fail(format!("its result does not decode: {e}")))?;
    match response {
        Response::Compiled {
            code,
            log,
            diagnostics,
            dependencies,
            started,
        } => Ok(RtcOutput {
            code,
            log,
            diagnostics,
            dependencies: dependencies
                .into_iter()
                .map(|d| Dependency {
                    include_dir: d.include_dir,
                    name: path(d.name),
                    path: path(d.path),
                })
                .collect(),
            started,
        }),
        Response::CompileFailed {
            name,
            options,
            log,
            diagnostics,
        } => Err(RtcError::Compile {
            compiler,
            name,
            options,
            log,
            diagnostics,
        }),
        Response::Failed(reason) => Err(fail(reason)),
    }
}

/// Runs `program` for the encoded `request` alone (`hipjit rtc-worker REQUEST RESULT`, through
/// files in a private directory): the encoded result.
fn compile_once(
    config: &WorkerConfig,
    program: &Path,
    kind: CompilerKind,
    encoded: Vec<u8>,
) -> Result<Vec<u8>, RtcError> {
    let fail = |reason: String| RtcError::Worker {
        compiler: kind.name(),
        reason,
    };
    // Named after this process, so that a later one removes it if this one is killed before it
    // can ([`crate::compiler::RunDir`]).
    let dir = crate::compiler::RunDir::new(
        crate::compiler::WORKER_PREFIX,
        &crate::compiler::build_base(),
    )
    .map_err(|e| fail(format!("cannot make its directory: {e}")))?;
    let request_file = dir.path().join("request");
    let result_file = dir.path().join("result");
    // The worker's TMPDIR: comgr stages the source and headers under `<TMPDIR>/comgr-*`, and a
    // worker that crashes or is killed cannot remove them; here they go with the directory.
    let scratch = dir.path().join("tmp");
    std::fs::DirBuilder::new()
        .mode(0o700)
        .create(&scratch)
        .map_err(|e| fail(format!("cannot make {}: {e}", scratch.display())))?;
    std::fs::write(&request_file, encoded)
        .map_err(|e| fail(format!("cannot write {}: {e}", request_file.display())))?;
    let mut cmd = Command::new(program);
    cmd.arg(WORKER_SUBCOMMAND)
        .arg(&request_file)
        .arg(&result_file)
        .env("TMPDIR", &scratch);
    if let Some(limit) = config.memory_limit {
        // SAFETY: setrlimit is async-signal-safe and touches only the child's own limits.
        unsafe {
            cmd.pre_exec(move || {
                let lim = libc::rlimit {
                    rlim_cur: limit as libc::rlim_t,
                    rlim_max: limit as libc::rlim_t,
                };
                if libc::setrlimit(libc::RLIMIT_AS, &lim) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
    }
    let bound = config
        .memory_limit
        .map(|l| format!(" (memory bound {} MiB)", l >> 20))
        .unwrap_or_default();
    let finished = match process::run(&mut cmd, config.timeout) {
        Ok(f) => f,
        Err(RunError::Spawn(e)) => {
            return Err(fail(format!("cannot run {}: {e}", program.display())))
        }
        Err(RunError::Timeout(_)) => {
            return Err(fail(format!(
                "the compile ran past the worker's timeout of {} s and was killed",
                config.timeout.as_secs_f64()
            )))
        }
        Err(RunError::Cancelled) => {
            return Err(fail(
                "the compile was cancelled and its worker killed".into(),
            ))
        }
    };
    let stderr = String::from_utf8_lossy(&finished.stderr);
    let stderr = stderr.trim_end();
    if !finished.status.success() {
        use std::os::unix::process::ExitStatusExt;
        let how = match finished.status.signal() {
            Some(sig) => format!("was killed by signal {sig} ({})", signal_name(sig)),
            None => format!("exited with {}", finished.status),
        };
        let tail = if stderr.is_empty() {
            String::new()
        } else {
            format!(": {stderr}")
        };
        return Err(fail(format!("the worker {how}{bound}{tail}")));
    }
    fs::read::read_file(
        &result_file,
        fs::read::CODE_OBJECT_LIMIT,
        "a worker's result",
        fs::read::Streams::None,
    )
    .map_err(|e| fail(format!("its result cannot be read ({})", e.reason())))
}

fn signal_name(sig: i32) -> &'static str {
    match sig {
        libc::SIGABRT => "SIGABRT",
        libc::SIGSEGV => "SIGSEGV",
        libc::SIGBUS => "SIGBUS",
        libc::SIGKILL => "SIGKILL",
        libc::SIGILL => "SIGILL",
        libc::SIGFPE => "SIGFPE",
        _ => "a signal",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A worker that dies by a signal (here SIGKILL, as a crash in hipRTC ends it) leaves what
    /// comgr staged under its `TMPDIR` (`comgr-*`, holding the source): its `TMPDIR` is in its
    /// private directory, which goes with the worker. `serving` says hello and dies reading a
    /// request (a pool's worker); otherwise it dies at once, which makes the pool run it once a
    /// request (`rtc-worker REQUEST RESULT`), where it dies again.
    fn killed_worker_leaves_nothing(serving: bool) {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let seen = dir.path().join("seen");
        let program = dir.path().join("worker.sh");
        let hello = if serving {
            // A frame of MessagePack ["hipjit-rtc-worker", 1, 1]; then 4 bytes of the request.
            "[ \"$2\" = --serve ] && printf '\\025\\000\\000\\000\\223\\261hipjit-rtc-worker\\001\\001' \
             && dd bs=1 count=4 of=/dev/null 2>/dev/null\n"
        } else {
            ""
        };
        std::fs::write(
            &program,
            format!(
                "#!/bin/sh\n{hello}printf '%s\\n' \"${{TMPDIR:?}}\" > '{}'\n\
                 mkdir -p \"$TMPDIR/comgr-a1b2c3/input\" && echo source > \"$TMPDIR/comgr-a1b2c3/input/CompileSource\"\n\
                 kill -9 $$\n",
                seen.display()
            ),
        )
        .unwrap();
        std::fs::set_permissions(&program, std::fs::Permissions::from_mode(0o755)).unwrap();
        let config = WorkerConfig {
            program: Some(program),
            ..WorkerConfig::default()
        };
        let input = RtcInput {
            source: b"extern \"C\" __global__ void k() {}\n",
            name: "k.hip",
            headers: &[],
            include_dirs: &[],
            options: &[],
        };
        let e = compile(
            &config,
            CompilerKind::HipRtc,
            Path::new("/nonexistent"),
            &input,
        )
        .unwrap_err();
        assert!(e.to_string().contains("killed by signal 9"), "{e}");
        assert_eq!(config.pool.started(), u64::from(serving));
        let seen = std::fs::read_to_string(&seen).unwrap();
        let tmpdir = Path::new(seen.trim_end());
        assert_eq!(tmpdir.file_name().unwrap(), "tmp");
        assert!(
            tmpdir.starts_with(crate::compiler::build_base()),
            "{}",
            tmpdir.display()
        );
        assert!(
            !tmpdir.join("comgr-a1b2c3").exists() && !tmpdir.parent().unwrap().exists(),
            "the worker's directory is still there"
        );
    }

    #[test]
    fn what_a_killed_serving_worker_left_in_its_tmpdir_goes_with_its_directory() {
        killed_worker_leaves_nothing(true);
    }

    #[test]
    fn what_a_killed_one_request_worker_left_in_its_tmpdir_goes_with_its_directory() {
        killed_worker_leaves_nothing(false);
    }
}
