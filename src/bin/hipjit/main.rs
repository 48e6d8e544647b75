//! The `hipjit` command: explain a machine's HIP setup (`doctor`), compile HIP sources through
//! hipjit's cache (`compile`), read code objects (`inspect`) and manage the disk cache
//! (`cache`). Built with the `cli` feature: `cargo install hipjit --features cli`.

use std::process::ExitCode;

use clap::{Parser, Subcommand};

mod cache;
mod compile;
mod doctor;
mod inspect;
mod interrupt;
mod output;
mod request;

use output::CliError;

const EXIT_CODES: &str = "\
Exit status:
  0  success
  1  the work failed: compile error, unreadable or malformed input file, cache I/O error
  2  usage error: unknown option, missing argument, bad value (target ID, size...), an
     environment variable below with a value outside those it takes
  128+N  stopped by signal N (compile: 130 for SIGINT, 143 for SIGTERM, 129 for SIGHUP),
     its compilers killed and its temporary files removed

Errors go to stderr and name the file, the target and what was wrong; results go to stdout.
With --json, stdout holds one JSON document whose \"schema_version\" is that command's:
compile 2; doctor, inspect and cache 1. A version is raised when a key is removed or changes
meaning; new keys may appear without a raise. A path in JSON is a string; one that is not
UTF-8 is {\"text\": lossy text, \"hex\": its bytes in hex}.

Environment:
  HIPJIT_CACHE_DIR         cache roots, ':'-separated, the first written; empty items are
                           skipped, and an empty value means the default root
                           ($XDG_CACHE_HOME/hipjit, else ~/.cache/hipjit)
  HIPJIT_CACHE_MAX_SIZE    the written root's size cap (default 5G; 500M, 20G..., or
                           unlimited): least recently used entries go first
  HIPJIT_REMOTE_CACHE      the remote tier: redis[s]://[user:password@]host:port/db or
                           http[s]://[user:password@]host[:port]/prefix; several URLs
                           separated by whitespace are levels, fastest first
  HIPJIT_REMOTE_CACHE_TOKEN  a bearer token for an http[s]:// level without user:password
  HIPJIT_REMOTE_CACHE_KEY  its signing secret (16 bytes or more): entries are signed,
                           unsigned or badly signed ones refused, and each key's entries
                           kept apart on the server
  HIPJIT_COMPILER          auto (default), hipcc, hiprtc, nvcc or nvrtc (compile --compiler
                           wins over it)
  HIPJIT_RETRY_FAILED      1: run the compiler again for a source whose compile failure
                           the cache remembers (compile --retry-failed)
  HIPJIT_RECORD            a file to which each distinct compile request is appended as a
                           JSON line, for `hipjit cache warm FILE` to replay
  HIPJIT_FROZEN            a frozen bundle (`hipjit cache freeze`) served before every other
                           tier and without a compiler
  HIPJIT_STRICT            1: a request no tier answers, that would start a compiler, fails
                           naming it (strict serving)
  HIPJIT_HIPCC             the hipcc to run (else HIP_PATH, ROCM_PATH, PATH)
  HIPJIT_HIPRTC_LIBRARY    the hipRTC library to open
  HIPJIT_HIP_LIBRARY       the HIP runtime library to open
  HIPJIT_NVCC              the nvcc to run (else CUDA_PATH, CUDA_HOME, PATH)
  HIPJIT_NVRTC_LIBRARY     the NVRTC library to open
  HIPJIT_CUDA_LIBRARY      the CUDA driver library to open (default libcuda.so.1)
  HIPJIT_WORKER            the worker program of in-process compilers run in workers (this
                           command runs itself)
  HIP_PLATFORM             amd or nvidia (HIP's NVIDIA platform); HIP_PATH, ROCM_PATH,
                           CUDA_PATH, CUDA_HOME, PATH, XDG_CACHE_HOME, TMPDIR (below it,
                           a private hipjit-run-<pid>-... directory per run that compiles,
                           holding its build directories)
A cache root holding a file named HIPJIT_SHARED (owned by the root's owner or the superuser)
is shared with the root directory's group.";

/// Just-in-time compiled HIP kernels: doctor, compile, inspect, cache.
#[derive(Parser, Debug)]
#[command(name = "hipjit", version, after_help = EXIT_CODES)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Explain this machine's HIP setup: header sets, runtimes, compilers, devices, and what
    /// disagrees with what.
    #[command(after_help = EXIT_CODES)]
    Doctor(doctor::Args),
    /// Compile HIP sources to code objects through hipjit's cache.
    #[command(after_help = EXIT_CODES)]
    Compile(compile::Args),
    /// Show the target ID, code object version, kernels, arguments and resources of a code
    /// object (raw ELF, offload bundle or compressed bundle).
    #[command(after_help = EXIT_CODES)]
    Inspect(inspect::Args),
    /// List, measure, verify, prune or clear the disk cache; export and import bundles; warm
    /// the caches from recorded requests; explain a key.
    #[command(after_help = EXIT_CODES)]
    Cache(cache::Args),
    /// Probe one runtime library in this process and print JSON (used by `doctor`, which runs
    /// each runtime in its own process).
    #[command(hide = true)]
    ProbeRuntime(doctor::ProbeArgs),
    /// Probe the CUDA driver in this process and print JSON (used by `doctor`, so that a
    /// broken driver cannot end it).
    #[command(hide = true)]
    ProbeCuda(doctor::nvidia::ProbeArgs),
    /// Open hipRTC or NVRTC in this process, compile a small kernel for each target and print
    /// JSON (used by `doctor`, so that a library that crashes cannot end it).
    #[command(hide = true)]
    ProbeRtc(doctor::rtc::ProbeArgs),
    /// Serve hipRTC or NVRTC compiles (the worker mode of hipjit::compiler::worker): with
    /// --serve, requests in frames on stdin, answered on stdout, until end of input; else one
    /// compile read from REQUEST, its result written to RESULT.
    #[command(hide = true)]
    RtcWorker {
        /// Serve requests from stdin until its end.
        #[arg(long, conflicts_with_all = ["request", "result"])]
        serve: bool,
        /// The request file.
        #[arg(required_unless_present = "serve")]
        request: Option<std::path::PathBuf>,
        /// Where to write the result.
        #[arg(required_unless_present = "serve")]
        result: Option<std::path::PathBuf>,
    },
}

fn main() -> ExitCode {
    // Writing to a closed pipe (`hipjit inspect x | head`) ends the process quietly like other
    // Unix tools instead of a panic in `println!`.
    // SAFETY: setting SIGPIPE's disposition to the default before any thread exists.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
    let cli = match Cli::try_parse_from(compile::normalize_args(std::env::args_os().collect())) {
        Ok(cli) => cli,
        // clap prints help/version (status 0) and usage errors (status 2) itself.
        Err(e) => e.exit(),
    };
    // A run that may compile in this process (hipRTC, NVRTC) points its own TMPDIR at a
    // private directory, removed when it ends (or by the next hipjit, if it is killed):
    // comgr stages the source and headers of an in-process hipRTC compile under
    // `$TMPDIR/comgr-*`, which a crash inside hipRTC would leave behind, and hipjit's build
    // directories go there too.
    let compiles = matches!(
        &cli.command,
        Command::Compile(_)
            | Command::ProbeRtc(_)
            | Command::Cache(cache::Args {
                action: cache::Action::Warm { .. }
                    | cache::Action::Verify {
                        rebuild: Some(_),
                        ..
                    },
                ..
            })
    );
    let tmp = if compiles {
        match hipjit::compiler::ProcessTmpDir::new() {
            Ok(t) => {
                // No other thread exists yet: nothing reads the environment meanwhile.
                t.install();
                Some(t)
            }
            // An unsafe TMPDIR: left as it is, for the compile to refuse it, naming it.
            Err(e) if e.kind() == std::io::ErrorKind::InvalidInput => None,
            Err(e) => {
                eprintln!(
                    "hipjit: warning: cannot make a private temporary directory under {} ({e}): \
                     a crash inside hipRTC may leave its staged sources there",
                    std::env::temp_dir().display()
                );
                None
            }
        }
    } else {
        None
    };
    let result = match &cli.command {
        Command::Doctor(a) => doctor::run(a),
        Command::Compile(a) => compile::run(a),
        Command::Inspect(a) => inspect::run(a),
        Command::Cache(a) => cache::run(a),
        Command::ProbeRuntime(a) => doctor::probe_runtime(a),
        Command::ProbeCuda(a) => doctor::nvidia::probe_cuda(a),
        Command::ProbeRtc(a) => doctor::rtc::probe_rtc(a),
        Command::RtcWorker { serve: true, .. } => {
            hipjit::compiler::worker::serve_requests().map_err(CliError::failed)
        }
        Command::RtcWorker {
            request: Some(request),
            result: Some(result),
            ..
        } => hipjit::compiler::worker::serve(request, result).map_err(CliError::failed),
        Command::RtcWorker { .. } => Err(CliError::failed(
            "rtc-worker needs --serve, or a request and a result file",
        )),
    };
    drop(tmp);
    match result {
        Ok(()) => ExitCode::from(output::EXIT_OK),
        Err(CliError { status, message }) => {
            if !message.is_empty() {
                eprintln!("hipjit: error: {message}");
            }
            ExitCode::from(status)
        }
    }
}
