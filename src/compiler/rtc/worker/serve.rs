//! The worker's side: `hipjit rtc-worker REQUEST RESULT` serves one request through files
//! ([`serve`]), `hipjit rtc-worker --serve` serves requests in frames on its standard input,
//! one after the other, until end of input ([`serve_requests`]), opening the library once.

use std::os::fd::FromRawFd;
use std::path::{Path, PathBuf};

use super::{frame, path, path_bytes, Hello, Request, Response, WireDependency};
use super::{HELLO_MAGIC, PROTOCOL_VERSION};
use crate::compiler::hiprtc::HipRtc;
use crate::compiler::kind::CompilerKind;
use crate::compiler::nvrtc::NvRtc;
use crate::compiler::rtc::{RtcError, RtcInput};
use crate::fs;

/// A library a serving worker opened, kept for its next requests.
enum Opened {
    Hip(HipRtc),
    Nv(NvRtc),
}

/// The library opened last, by kind and path.
type Kept = Option<(CompilerKind, Vec<u8>, Opened)>;

/// Compiles `req` with the library it names (the one in `kept` when it names the same, else
/// opened now and kept); the result as it travels back.
fn answer(req: Request, kept: &mut Kept) -> Response {
    let same = matches!(kept, Some((k, l, _)) if *k == req.kind && *l == req.library);
    if !same {
        let library = path(req.library.clone());
        let opened = match req.kind {
            CompilerKind::HipRtc => HipRtc::open_path(&library).map(Opened::Hip),
            CompilerKind::Nvrtc => NvRtc::open_path(&library).map(Opened::Nv),
            other => Err(RtcError::Worker {
                compiler: other.name(),
                reason: "it does not compile in a worker".into(),
            }),
        };
        match opened {
            Ok(o) => *kept = Some((req.kind, req.library.clone(), o)),
            Err(e) => return response(Err(e)),
        }
    }
    let Some((_, _, opened)) = kept.as_ref() else {
        return response(Err(RtcError::Worker {
            compiler: req.kind.name(),
            reason: "no library is open".into(),
        }));
    };
    let include_dirs: Vec<PathBuf> = req.include_dirs.into_iter().map(path).collect();
    let input = RtcInput {
        source: &req.source,
        name: &req.name,
        headers: &req.headers,
        include_dirs: &include_dirs,
        options: &req.options,
    };
    response(match opened {
        Opened::Hip(rtc) => rtc.compile(&input),
        Opened::Nv(rtc) => rtc.compile(&input),
    })
}

fn response(out: Result<super::RtcOutput, RtcError>) -> Response {
    match out {
        Ok(o) => Response::Compiled {
            code: o.code,
            log: o.log,
            diagnostics: o.diagnostics,
            dependencies: o
                .dependencies
                .iter()
                .map(|d| WireDependency {
                    include_dir: d.include_dir,
                    name: path_bytes(&d.name),
                    path: path_bytes(&d.path),
                })
                .collect(),
            started: o.started,
        },
        Err(RtcError::Compile {
            name,
            options,
            log,
            diagnostics,
            ..
        }) => Response::CompileFailed {
            name,
            options,
            log,
            diagnostics,
        },
        Err(e) => Response::Failed(e.to_string()),
    }
}

/// Serves one request: reads `request`, opens the library it names, compiles, and writes the
/// result (the output or the error) to `result`. The one-request worker mode of the `hipjit`
/// command (`hipjit rtc-worker REQUEST RESULT`) calls this.
///
/// Errors: a text saying why the request could not be read or the result not written (the
/// compile's own errors are the result).
pub fn serve(request: &Path, result: &Path) -> Result<(), String> {
    let bytes = fs::read::read_file(
        request,
        fs::read::CODE_OBJECT_LIMIT,
        "a worker request",
        fs::read::Streams::None,
    )
    .map_err(|e| {
        format!(
            "cannot read the request {}: {}",
            request.display(),
            e.reason()
        )
    })?;
    let req: Request = rmp_serde::from_slice(&bytes)
        .map_err(|e| format!("the request {} does not decode: {e}", request.display()))?;
    let response = answer(req, &mut None);
    let encoded =
        rmp_serde::to_vec(&response).map_err(|e| format!("cannot encode the result: {e}"))?;
    // Written whole, then renamed: the parent never reads half a result.
    let partial = result.with_extension("partial");
    std::fs::write(&partial, encoded)
        .and_then(|()| std::fs::rename(&partial, result))
        .map_err(|e| format!("cannot write the result {}: {e}", result.display()))
}

/// Serves requests until end of input: says hello (the protocol and its version) in a first
/// frame on standard output, then reads one request frame at a time from standard input,
/// compiles it and answers in a frame on standard output. The serving worker mode of the
/// `hipjit` command (`hipjit rtc-worker --serve`) calls this. Standard output is kept for the
/// answers alone: file descriptor 1 is pointed at standard error first, so what the library
/// prints cannot tear a frame.
///
/// Errors: a text saying why a request could not be read or decoded or an answer not written
/// (the compiles' own errors are answers).
pub fn serve_requests() -> Result<(), String> {
    // SAFETY: fcntl and dup2 on the standard descriptors, before any other thread exists.
    let answers = unsafe {
        let fd = libc::fcntl(1, libc::F_DUPFD_CLOEXEC, 3);
        if fd < 0 || libc::dup2(2, 1) < 0 {
            return Err(format!(
                "cannot set its standard output aside: {}",
                std::io::Error::last_os_error()
            ));
        }
        // SAFETY: `fd` was just made and nothing else owns it.
        std::fs::File::from_raw_fd(fd)
    };
    let mut answers = std::io::BufWriter::new(answers);
    let hello = Hello {
        magic: HELLO_MAGIC.to_owned(),
        protocol: PROTOCOL_VERSION,
        pid: std::process::id(),
    };
    let encoded = rmp_serde::to_vec(&hello).map_err(|e| format!("cannot encode: {e}"))?;
    frame::write_blocking(&mut answers, &encoded)
        .map_err(|e| format!("cannot write its hello: {e}"))?;
    let mut requests = std::io::stdin().lock();
    let mut kept: Kept = None;
    loop {
        let Some(bytes) = frame::read_blocking(&mut requests)
            .map_err(|e| format!("cannot read a request: {e}"))?
        else {
            return Ok(());
        };
        let req: Request =
            rmp_serde::from_slice(&bytes).map_err(|e| format!("a request does not decode: {e}"))?;
        let encoded = rmp_serde::to_vec(&answer(req, &mut kept))
            .map_err(|e| format!("cannot encode the result: {e}"))?;
        frame::write_blocking(&mut answers, &encoded)
            .map_err(|e| format!("cannot write a result: {e}"))?;
    }
}
