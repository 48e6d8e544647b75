//! Compile requests recorded for warm-up: with `HIPJIT_RECORD=FILE` (or
//! [`crate::jit::JitOptions::record`]) a [`crate::jit::Jit`] appends one JSON line per distinct
//! compile request it serves, hit or miss, and `hipjit cache warm FILE` replays them on another
//! machine (or a fresh image) so that the caches hold every kernel before the first real
//! request.
//!
//! Writing and reading records needs feature `record` (serde_json; `cli` includes it): without
//! it a `Jit` with a record location writes nothing and warns, at its first compile, naming the
//! feature ([`crate::jit::Compiled::cache_warnings`] and the log, as for a file that cannot be
//! written), and [`read_records`] is an error naming it. A crate whose tests record the
//! requests it freezes enables it in `[dev-dependencies]`, beside `testing`.
//!
//! # The record format (schema version 2)
//! One JSON object per line ([`RecordedRequest`]), written after the request succeeded, once
//! per distinct request (by direct key) per process, whichever `Jit` of the process served it:
//! * `schema_version`: `2` (lines of version 1 are read too: see below);
//! * `direct_key`: the direct key of the request on the recording machine (64 hex digits;
//!   `key`), for reference: a machine with another compiler computes another;
//! * `source` and `source_encoding`: the source as text (`"utf-8"`) when it is valid UTF-8,
//!   else its bytes as lowercase hex (`"hex"`);
//! * `targets`: the AMDGPU target IDs (`gfx90a`, `gfx942:sramecc+:xnack-`) or the SM target
//!   (`sm_90`);
//! * `compiler`: the compiler choice of the `Jit` (`auto`, `hipcc`, `hiprtc`, `nvcc`,
//!   `nvrtc`), and `compiler_used`: the kind that served it;
//! * `extra_signature`: [`crate::jit::JitOptions::extra_signature`] as hex (it is part of
//!   the key);
//! * `options`: the options as compiled ([`RecordedOptions`]: defines, include directories,
//!   standard, optimisation level, extra flags, code object version and the rest).
//!
//! Include directories (`include_dirs`, `tracked_include_dirs`) are recorded as absolute paths
//! (a path string, or `{"text", "hex"}` for a path that is not UTF-8): one given relative is
//! joined to the recording process's current directory (lexically, symbolic links kept, as
//! [`std::path::absolute`] does), so that `hipjit cache warm` finds the headers from whatever
//! directory it runs in; only when that directory cannot be read is a relative path kept as
//! given. A record replayed in another tree finds the headers at those paths or fails naming
//! them; keeping the trees alike is the user's business. Include directories are keyed by
//! position, not by path, so an absolute path keys as the relative one did. Paths inside
//! `extra_flags` (an `-I DIR` nvcc or NVRTC takes there) are recorded as given, since the
//! flags are keyed as they are written; relative ones are read from the directory warm runs
//! in.
//!
//! Version 1 (hipjit before absolute include directories) recorded include directories as
//! given; such lines are still read, a relative path in them read from the directory warm
//! runs in.
//!
//! # Appending
//! Each line is written by one `write(2)` (looped only on a short write) on the file opened
//! for that line with `O_APPEND` (a file rotated away is followed by a new one), under an
//! exclusive `flock(2)` on the file: lines from several processes
//! never interleave, whatever their length. The file is created `0600` (it holds sources).
//! It must be a regular file; a FIFO or a device is refused without blocking. A record that
//! cannot be written never fails a compile: the first failure is a warning in
//! [`crate::jit::Compiled::cache_warnings`] (and the log), later ones only the log.

use std::collections::HashSet;
use std::ffi::OsStr;
use std::io::{BufRead, Read, Write};
use std::os::fd::AsRawFd;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use parking_lot::Mutex;
use serde::{Deserialize, Serialize};

use crate::cache::key::{hex, CacheKey};
use crate::compiler::selection::CompilerChoice;
use crate::compiler::{CompileOptions, CxxStd, OptLevel};
use crate::target::SmTarget;
use crate::target::TargetId;

/// The variable naming the record file.
pub const RECORD_ENV: &str = "HIPJIT_RECORD";

/// The `schema_version` of the lines written.
pub const RECORD_SCHEMA_VERSION: u32 = 2;

/// The `schema_version`s read: 1 (include directories as given) and 2 (absolute).
pub const READ_SCHEMA_VERSIONS: [u32; 2] = [1, RECORD_SCHEMA_VERSION];

/// The longest line [`read_records`] accepts, in bytes: a source of at most
/// [`crate::fs::read::SOURCE_LIMIT`] as hex, plus room for the options.
pub const MAX_RECORD_LINE: usize = 2 * crate::fs::read::SOURCE_LIMIT as usize + (1 << 20);

/// Where a [`crate::jit::Jit`] records its compile requests.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum RecordLocation {
    /// `HIPJIT_RECORD` when set and not empty, else nowhere.
    #[default]
    FromEnv,
    /// This file (appended to; created when missing).
    File(PathBuf),
    /// Nowhere, whatever `HIPJIT_RECORD` says.
    Disabled,
}

impl RecordLocation {
    /// The file this location names now (reading `HIPJIT_RECORD` for
    /// [`RecordLocation::FromEnv`]).
    pub fn resolve(&self) -> Option<PathBuf> {
        match self {
            RecordLocation::FromEnv => std::env::var_os(RECORD_ENV)
                .filter(|v| !v.is_empty())
                .map(PathBuf::from),
            RecordLocation::File(p) => Some(p.clone()),
            RecordLocation::Disabled => None,
        }
    }
}

/// A path in a record: a string when it is UTF-8, else `{"text": lossy text, "hex": bytes}`
/// (read back from `hex`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum RecordedPath {
    /// A UTF-8 path.
    Text(String),
    /// A path that is not UTF-8.
    Bytes {
        /// Lossy text, to read.
        text: String,
        /// The path's bytes, lowercase hex.
        hex: String,
    },
}

impl RecordedPath {
    fn of(p: &Path) -> RecordedPath {
        match p.to_str() {
            Some(s) => RecordedPath::Text(s.to_string()),
            None => RecordedPath::Bytes {
                text: p.to_string_lossy().into_owned(),
                hex: hex(p.as_os_str().as_bytes()),
            },
        }
    }

    /// `p` made absolute against the current directory (kept as given when that cannot be
    /// read).
    fn absolute(p: &Path) -> RecordedPath {
        RecordedPath::of(&std::path::absolute(p).unwrap_or_else(|_| p.to_path_buf()))
    }

    fn to_path(&self) -> Result<PathBuf, String> {
        match self {
            RecordedPath::Text(s) => Ok(PathBuf::from(s)),
            RecordedPath::Bytes { hex, .. } => {
                let bytes = unhex(hex)
                    .ok_or_else(|| format!("options: a path's hex {hex:?} is not hex"))?;
                Ok(PathBuf::from(OsStr::from_bytes(&bytes)))
            }
        }
    }
}

/// How the source of a record is written.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum SourceEncoding {
    /// The source is valid UTF-8 and written as text.
    #[serde(rename = "utf-8")]
    Utf8,
    /// The source's bytes as lowercase hex.
    #[serde(rename = "hex")]
    Hex,
}

/// The options of a recorded request: [`CompileOptions`] field by field, less the metadata
/// checks (which do not change the result).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RecordedOptions {
    /// `-D` defines: `[name, value or null]`.
    pub defines: Vec<(String, Option<String>)>,
    /// In-memory headers ([`CompileOptions::headers`]): `[name, contents]`; absent in records
    /// written before they existed.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub headers: Vec<(String, String)>,
    /// `-I` directories, absolute (see the module documentation).
    pub include_dirs: Vec<RecordedPath>,
    /// [`CompileOptions::tracked_include_dirs`], absolute.
    #[serde(default)]
    pub tracked_include_dirs: Vec<RecordedPath>,
    /// The standard: `c++11`, `c++14`, `c++17`, `c++20`, `c++23`.
    pub std: String,
    /// The optimisation flag: `-O0` ... `-O3`, `-Os`, `-Oz`.
    pub opt: String,
    /// Extra compiler flags, in order.
    pub extra_flags: Vec<String>,
    /// `-mcode-object-version=N`, or null for the compiler's default.
    pub code_object_version: Option<u32>,
    /// `-ffast-math`.
    #[serde(default)]
    pub fast_math: bool,
    /// `-gline-tables-only`.
    #[serde(default)]
    pub line_info: bool,
    /// `-v`.
    #[serde(default)]
    pub verbose: bool,
    /// The source's file name in the build directory, or null for `kernel.hip`.
    #[serde(default)]
    pub source_name: Option<String>,
    /// The LLVM bitcode dump was asked for.
    #[serde(default)]
    pub dump_llvm_ir: bool,
    /// The ISA dump was asked for.
    #[serde(default)]
    pub dump_isa: bool,
}

/// One line of a record file (see the module documentation).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RecordedRequest {
    /// [`RECORD_SCHEMA_VERSION`].
    pub schema_version: u32,
    /// The direct key on the recording machine, hex.
    pub direct_key: String,
    /// The source: text, or hex ([`RecordedRequest::source_encoding`]).
    pub source: String,
    /// How [`RecordedRequest::source`] is written.
    pub source_encoding: SourceEncoding,
    /// The targets: AMDGPU target IDs, or one SM target.
    pub targets: Vec<String>,
    /// The compiler choice (`auto`, `hipcc`, `hiprtc`, `nvcc`, `nvrtc`).
    pub compiler: String,
    /// The compiler that served the request (`hipcc`, `hiprtc`, `nvcc`, `nvrtc`).
    #[serde(default)]
    pub compiler_used: Option<String>,
    /// The caller's signature hashed into the key, hex.
    #[serde(default)]
    pub extra_signature: String,
    /// The options.
    pub options: RecordedOptions,
}

/// A recorded request made usable again: what [`crate::jit::Jit::compile`] takes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Request {
    /// The source bytes.
    pub source: Vec<u8>,
    /// The options.
    pub options: CompileOptions,
    /// The compiler choice.
    pub compiler: CompilerChoice,
    /// The caller's signature ([`crate::jit::JitOptions::extra_signature`]).
    pub extra_signature: Vec<u8>,
}

fn opt_flag(o: OptLevel) -> &'static str {
    o.flag()
}

fn parse_opt(s: &str) -> Result<OptLevel, String> {
    Ok(match s {
        "-O0" => OptLevel::O0,
        "-O1" => OptLevel::O1,
        "-O2" => OptLevel::O2,
        "-O3" => OptLevel::O3,
        "-Os" => OptLevel::Os,
        "-Oz" => OptLevel::Oz,
        _ => return Err(format!("{s:?} is not one of -O0, -O1, -O2, -O3, -Os, -Oz")),
    })
}

fn unhex(s: &str) -> Option<Vec<u8>> {
    if !s.len().is_multiple_of(2) {
        return None;
    }
    s.as_bytes()
        .chunks(2)
        .map(|p| {
            let d = |b: u8| (b as char).to_digit(16);
            Some((d(p[0])? * 16 + d(p[1])?) as u8)
        })
        .collect()
}

impl RecordedRequest {
    /// The record of compiling `source` with `options` (as compiled: effective options) under
    /// the compiler choice `compiler`, served by `used`, with the caller's signature `extra`
    /// and the direct key `direct`. Relative include directories are made absolute against
    /// this process's current directory (see the module documentation).
    pub fn new(
        source: &[u8],
        options: &CompileOptions,
        compiler: CompilerChoice,
        used: Option<&str>,
        extra: &[u8],
        direct: &CacheKey,
    ) -> RecordedRequest {
        let (source, source_encoding) = match std::str::from_utf8(source) {
            Ok(s) => (s.to_string(), SourceEncoding::Utf8),
            Err(_) => (hex(source), SourceEncoding::Hex),
        };
        RecordedRequest {
            schema_version: RECORD_SCHEMA_VERSION,
            direct_key: direct.to_hex(),
            source,
            source_encoding,
            targets: options.target_names(),
            compiler: compiler.as_str().to_string(),
            compiler_used: used.map(str::to_string),
            extra_signature: hex(extra),
            options: RecordedOptions {
                defines: options.defines.clone(),
                headers: options.headers.clone(),
                include_dirs: options
                    .include_dirs
                    .iter()
                    .map(|p| RecordedPath::absolute(p))
                    .collect(),
                tracked_include_dirs: options
                    .tracked_include_dirs
                    .iter()
                    .map(|p| RecordedPath::absolute(p))
                    .collect(),
                std: options.std.to_string(),
                opt: opt_flag(options.opt_level).to_string(),
                extra_flags: options.extra_flags.clone(),
                code_object_version: options.code_object_version,
                fast_math: options.fast_math,
                line_info: options.line_info,
                verbose: options.verbose,
                source_name: options.source_name.clone(),
                dump_llvm_ir: options.dump_llvm_ir,
                dump_isa: options.dump_isa,
            },
        }
    }

    /// The request this record describes.
    ///
    /// Errors: a message naming the field that does not read (an unknown schema version,
    /// source encoding, target, standard, optimisation level or compiler choice; bad hex).
    pub fn to_request(&self) -> Result<Request, String> {
        check_version(Some(self.schema_version.into()))?;
        let source = match self.source_encoding {
            SourceEncoding::Utf8 => self.source.clone().into_bytes(),
            SourceEncoding::Hex => unhex(&self.source)
                .ok_or("source: marked \"hex\" in source_encoding but is not hex")?,
        };
        let mut options = CompileOptions::default();
        for t in &self.targets {
            if t.starts_with("sm_") {
                options
                    .sm_targets
                    .push(SmTarget::parse(t).map_err(|e| format!("targets: {t:?}: {e}"))?);
            } else {
                options
                    .targets
                    .push(TargetId::parse(t).map_err(|e| format!("targets: {t:?}: {e}"))?);
            }
        }
        let o = &self.options;
        options.defines = o.defines.clone();
        options.headers = o.headers.clone();
        options.include_dirs = o
            .include_dirs
            .iter()
            .map(RecordedPath::to_path)
            .collect::<Result<_, _>>()?;
        options.tracked_include_dirs = o
            .tracked_include_dirs
            .iter()
            .map(RecordedPath::to_path)
            .collect::<Result<_, _>>()?;
        options.std = o
            .std
            .parse::<CxxStd>()
            .map_err(|e| format!("options.std: {e}"))?;
        options.opt_level = parse_opt(&o.opt).map_err(|e| format!("options.opt: {e}"))?;
        options.extra_flags = o.extra_flags.clone();
        options.code_object_version = o.code_object_version;
        options.fast_math = o.fast_math;
        options.line_info = o.line_info;
        options.verbose = o.verbose;
        options.source_name = o.source_name.clone();
        options.dump_llvm_ir = o.dump_llvm_ir;
        options.dump_isa = o.dump_isa;
        let compiler = self
            .compiler
            .parse::<CompilerChoice>()
            .map_err(|e| format!("compiler: {e}"))?;
        let extra_signature = unhex(&self.extra_signature)
            .ok_or_else(|| format!("extra_signature: {:?} is not hex", self.extra_signature))?;
        Ok(Request {
            source,
            options,
            compiler,
            extra_signature,
        })
    }
}

/// `Ok` for a `schema_version` this hipjit reads ([`READ_SCHEMA_VERSIONS`]; `None`: not a
/// number), else the reason the line is skipped.
fn check_version(v: Option<u64>) -> Result<(), String> {
    match v {
        Some(v) if READ_SCHEMA_VERSIONS.iter().any(|&r| u64::from(r) == v) => Ok(()),
        Some(v) => Err(format!(
            "it was written by a newer hipjit (schema_version {v}; this one reads versions 1 \
             and 2): warm this file with the hipjit that recorded it"
        )),
        None => Err(unreplayable("schema_version: not a number")),
    }
}

/// The reason a line that is not a compile record at all is skipped: `why`, and what to do.
fn not_a_record(why: &str) -> String {
    format!(
        "{why}, so it is not a compile record (HIPJIT_RECORD writes one JSON object per line): \
         remove the line, or check that this file is a record"
    )
}

/// The reason a compile record that does not read is skipped: `why` (the field and what is
/// wrong), and what to do.
fn unreplayable(why: &str) -> String {
    format!(
        "{why}; the line was edited or damaged, or names something only a newer hipjit knows: \
         fix or remove the line, or warm with the hipjit that recorded it"
    )
}

/// A line of a record file that was skipped.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BadLine {
    /// Its number, from 1.
    pub line: usize,
    /// Why it was skipped and what to do, as a sentence: what is wrong with it (the field at
    /// fault, for a record that does not read), then whether to remove or fix the line or to
    /// warm with the newer hipjit that wrote it.
    pub reason: String,
}

/// The lines of a record file: the requests that read (with their line numbers, from 1) and
/// the lines skipped. Blank lines are neither.
#[derive(Clone, Debug, Default)]
pub struct Records {
    /// The requests, in file order.
    pub requests: Vec<(usize, Request)>,
    /// The lines that did not read.
    pub bad: Vec<BadLine>,
}

/// Reads a record file (`-` or `/dev/stdin` for standard input are the caller's business:
/// any reader works, see [`read_records_from`]).
///
/// Errors: the file cannot be opened or read (an I/O error naming nothing: the caller names
/// the file).
pub fn read_records(path: &Path) -> std::io::Result<Records> {
    // Opened as every input hipjit reads: a FIFO, device or directory is refused at once.
    let (file, _) = crate::fs::read::open_regular(path, u64::MAX, "a record file")
        .map_err(crate::fs::read::FileReadError::into_io_error)?;
    read_records_from(std::io::BufReader::new(file))
}

/// Reads record lines from `reader`: each non-blank line is a [`RecordedRequest`]; a line that
/// is not one (bad JSON, a missing field, an unknown schema version, a line longer than
/// [`MAX_RECORD_LINE`], a line that is not UTF-8) is skipped and named in [`Records::bad`].
///
/// Errors: reading fails.
pub fn read_records_from(mut reader: impl BufRead) -> std::io::Result<Records> {
    if !cfg!(feature = "record") {
        return Err(std::io::Error::new(
            std::io::ErrorKind::Unsupported,
            format!("reading compile records {WITHOUT_RECORD}"),
        ));
    }
    let mut out = Records::default();
    let mut line = Vec::new();
    let mut number = 0;
    loop {
        line.clear();
        let n = (&mut reader)
            .take(MAX_RECORD_LINE as u64 + 1)
            .read_until(b'\n', &mut line)?;
        if n == 0 {
            break;
        }
        number += 1;
        if line.len() > MAX_RECORD_LINE && line.last() != Some(&b'\n') {
            out.bad.push(BadLine {
                line: number,
                reason: not_a_record(&format!(
                    "it is longer than {MAX_RECORD_LINE} bytes (twice the largest source, as \
                     hex, and the options)"
                )),
            });
            // Skip the rest of the line.
            let mut rest = Vec::new();
            reader.read_until(b'\n', &mut rest)?;
            continue;
        }
        let text = match std::str::from_utf8(&line) {
            Ok(t) => t.trim(),
            Err(e) => {
                out.bad.push(BadLine {
                    line: number,
                    reason: not_a_record(&format!(
                        "it is not UTF-8 text (byte {} of the line)",
                        e.valid_up_to() + 1
                    )),
                });
                continue;
            }
        };
        if text.is_empty() {
            continue;
        }
        let parsed = parse_line(text).and_then(|r| r.to_request().map_err(|e| unreplayable(&e)));
        match parsed {
            Ok(r) => out.requests.push((number, r)),
            Err(reason) => out.bad.push(BadLine {
                line: number,
                reason,
            }),
        }
    }
    Ok(out)
}

/// What reading and writing records says without feature `record`.
const WITHOUT_RECORD: &str = "needs hipjit's feature `record` (serde_json), which this build \
    lacks: enable it where the records are made or read (a crate's tests: `[dev-dependencies] \
    hipjit = { features = [\"record\"] }`)";

/// The [`RecordedRequest`] of a non-blank line, or why it is not one.
#[cfg(feature = "record")]
fn parse_line(text: &str) -> Result<RecordedRequest, String> {
    serde_json::from_str::<serde_json::Value>(text)
        .map_err(|e| not_a_record(&format!("it is not JSON ({e})")))
        .and_then(|v| {
            if !v.is_object() {
                return Err(not_a_record("it is JSON but not an object"));
            }
            // The version first, so that a future format is named as such.
            match v.get("schema_version").map(|s| s.as_u64()) {
                None => return Err(not_a_record("it has no schema_version")),
                Some(v) => check_version(v)?,
            }
            serde_path_to_error::deserialize::<_, RecordedRequest>(v).map_err(|e| {
                // The field at fault, which serde's own message does not name (`.`: the
                // record itself, as for a missing field).
                match e.path().to_string() {
                    p if p == "." => unreplayable(&e.inner().to_string()),
                    p => unreplayable(&format!("{p}: {}", e.inner())),
                }
            })
        })
}

#[cfg(not(feature = "record"))]
fn parse_line(_: &str) -> Result<RecordedRequest, String> {
    Err(format!("reading compile records {WITHOUT_RECORD}"))
}

/// One line of JSON for `record`, without its newline.
#[cfg(feature = "record")]
fn to_json(record: &RecordedRequest) -> Result<Vec<u8>, String> {
    serde_json::to_vec(record).map_err(|e| e.to_string())
}

#[cfg(not(feature = "record"))]
fn to_json(_: &RecordedRequest) -> Result<Vec<u8>, String> {
    Err(format!("writing compile records {WITHOUT_RECORD}"))
}

/// Appends records to one file for a [`crate::jit::Jit`] (see the module documentation).
#[derive(Debug)]
pub(crate) struct Recorder {
    path: PathBuf,
    state: Mutex<RecorderState>,
}

#[derive(Debug, Default)]
struct RecorderState {
    warned: bool,
    seen: HashSet<CacheKey>,
}

impl Recorder {
    /// The recorder of `path` shared by every [`crate::jit::Jit`] of this process, so that a
    /// request is recorded once per process however many `Jit`s serve it (the path as given:
    /// two spellings of one file are two recorders, whose lines the lock still keeps whole).
    pub(crate) fn shared(path: PathBuf) -> std::sync::Arc<Recorder> {
        static RECORDERS: std::sync::OnceLock<
            Mutex<std::collections::HashMap<PathBuf, std::sync::Arc<Recorder>>>,
        > = std::sync::OnceLock::new();
        let mut all = RECORDERS.get_or_init(Default::default).lock();
        std::sync::Arc::clone(
            all.entry(path.clone())
                .or_insert_with(|| std::sync::Arc::new(Recorder::new(path))),
        )
    }

    pub(crate) fn new(path: PathBuf) -> Recorder {
        Recorder {
            path,
            state: Mutex::new(RecorderState::default()),
        }
    }

    /// Whether the request of direct key `direct` was recorded (or tried) already.
    pub(crate) fn seen(&self, direct: &CacheKey) -> bool {
        self.state.lock().seen.contains(direct)
    }

    /// Appends `record` unless its direct key was recorded before; returns the warning to
    /// give the caller the first time a record cannot be written.
    pub(crate) fn append(&self, direct: CacheKey, record: &RecordedRequest) -> Option<String> {
        let mut state = self.state.lock();
        if !state.seen.insert(direct) {
            return None;
        }
        let result = Self::write(&self.path, record);
        match result {
            Ok(()) => None,
            Err(e) => {
                let w = format!(
                    "the compile request was not recorded in {} ({RECORD_ENV}): {e}",
                    self.path.display()
                );
                tracing::warn!("{w}");
                if state.warned {
                    None
                } else {
                    state.warned = true;
                    Some(w)
                }
            }
        }
    }

    /// Opens the file for this one line (so that a file moved away or removed, as log
    /// rotation does, is followed by a new one), appends the line under the lock, closes it.
    fn write(path: &Path, record: &RecordedRequest) -> Result<(), String> {
        let mut line = to_json(record)?;
        line.push(b'\n');
        // O_NONBLOCK: a FIFO without a reader is refused (ENXIO), never waited on.
        let mut f = std::fs::OpenOptions::new()
            .append(true)
            .create(true)
            .mode(0o600)
            .custom_flags(libc::O_NONBLOCK)
            .open(path)
            .map_err(|e| e.to_string())?;
        let meta = f.metadata().map_err(|e| e.to_string())?;
        if !meta.is_file() {
            return Err("not a regular file".into());
        }
        let fd = f.as_raw_fd();
        // SAFETY: flock on a descriptor this File owns; released below (and by close).
        if unsafe { libc::flock(fd, libc::LOCK_EX) } != 0 {
            return Err(format!("flock: {}", std::io::Error::last_os_error()));
        }
        let written = f.write_all(&line).map_err(|e| e.to_string());
        // SAFETY: as above.
        unsafe { libc::flock(fd, libc::LOCK_UN) };
        written
    }
}

/// Without feature `record`: nothing written, nothing read, the feature named.
#[cfg(all(test, not(feature = "record")))]
mod without_the_feature {
    use super::*;

    #[test]
    fn records_are_neither_written_nor_read_and_the_feature_is_named() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("record.jsonl");
        let rec = Recorder::new(path.clone());
        let request = RecordedRequest::new(
            b"x",
            &CompileOptions::for_target(TargetId::parse("gfx90a").unwrap()),
            CompilerChoice::Auto,
            None,
            b"",
            &CacheKey([1; 32]),
        );
        let warning = rec.append(CacheKey([1; 32]), &request).unwrap();
        assert!(warning.contains("feature `record`"), "{warning}");
        assert!(warning.contains(RECORD_ENV), "{warning}");
        assert!(!path.exists());
        // Warned once.
        assert_eq!(rec.append(CacheKey([2; 32]), &request), None);

        std::fs::write(&path, "{}\n").unwrap();
        let e = read_records(&path).unwrap_err();
        assert_eq!(e.kind(), std::io::ErrorKind::Unsupported);
        assert!(e.to_string().contains("feature `record`"), "{e}");
    }
}

#[cfg(all(test, feature = "record"))]
mod tests {
    use super::*;

    fn options() -> CompileOptions {
        let mut o = CompileOptions::for_target(TargetId::parse("gfx942:sramecc+:xnack-").unwrap());
        o.defines = vec![("N".into(), Some("4".into())), ("FAST".into(), None)];
        o.include_dirs = vec![
            PathBuf::from("/src/include"),
            PathBuf::from(OsStr::from_bytes(b"/src/\xff")),
        ];
        o.std = CxxStd::Cxx20;
        o.opt_level = OptLevel::O2;
        o.extra_flags = vec!["-Wall".into()];
        o.code_object_version = Some(5);
        o
    }

    /// A request for `source` with `o`, the default compiler choice and no extra signature,
    /// recorded under the direct key of 32 bytes `key`.
    fn request(source: &[u8], o: &CompileOptions, key: u8) -> RecordedRequest {
        RecordedRequest::new(
            source,
            o,
            CompilerChoice::Auto,
            None,
            b"",
            &CacheKey([key; 32]),
        )
    }

    /// A good record line: the request for `x` with [`options`].
    fn good_line() -> String {
        serde_json::to_string(&request(b"x", &options(), 0)).unwrap()
    }

    #[test]
    fn a_record_round_trips_with_bytes_and_odd_paths() {
        let source = b"// \xa9 latin-1\n__global__ void k() {}\n";
        let r = RecordedRequest::new(
            source,
            &options(),
            CompilerChoice::Hipcc,
            Some("hipcc"),
            b"sig",
            &CacheKey([7; 32]),
        );
        assert_eq!(r.source_encoding, SourceEncoding::Hex);
        let line = serde_json::to_string(&r).unwrap();
        let back = read_records_from(line.as_bytes()).unwrap();
        assert!(back.bad.is_empty(), "{:?}", back.bad);
        let (n, req) = &back.requests[0];
        assert_eq!(*n, 1);
        assert_eq!(req.source, source);
        assert_eq!(req.options, options());
        assert_eq!(req.compiler, CompilerChoice::Hipcc);
        assert_eq!(req.extra_signature, b"sig");
    }

    #[test]
    fn relative_include_directories_are_recorded_absolute_and_version_1_lines_still_read() {
        let mut o = options();
        o.include_dirs = vec![PathBuf::from("rel/include"), PathBuf::from("/abs")];
        o.tracked_include_dirs = vec![PathBuf::from("./tracked")];
        let r = request(b"x", &o, 0);
        assert_eq!(r.schema_version, 2);
        let cwd = std::env::current_dir().unwrap();
        let line = serde_json::to_string(&r).unwrap();
        let back = read_records_from(line.as_bytes()).unwrap();
        let got = &back.requests[0].1.options;
        assert_eq!(
            got.include_dirs,
            [cwd.join("rel/include"), PathBuf::from("/abs")]
        );
        assert_eq!(got.tracked_include_dirs, [cwd.join("tracked")]);
        // A line of version 1 (paths as given) reads as it did.
        let v1 = line
            .replace("\"schema_version\":2", "\"schema_version\":1")
            .replace(
                &cwd.join("rel/include").display().to_string(),
                "rel/include",
            );
        let back = read_records_from(v1.as_bytes()).unwrap();
        assert!(back.bad.is_empty(), "{:?}", back.bad);
        assert_eq!(
            back.requests[0].1.options.include_dirs,
            [PathBuf::from("rel/include"), PathBuf::from("/abs")]
        );
    }

    #[test]
    fn bad_lines_are_named_by_number_and_reason() {
        let good = good_line();
        let future = good.replace("\"schema_version\":2", "\"schema_version\":9");
        let bad_target = good.replace("gfx942:sramecc+:xnack-", "gfx9x");
        let text =
            format!("{good}\nnot json\n\n{future}\n{{\"schema_version\":1}}\n{bad_target}\n");
        let r = read_records_from(text.as_bytes()).unwrap();
        assert_eq!(r.requests.len(), 1);
        let bad: Vec<(usize, &str)> = r.bad.iter().map(|b| (b.line, b.reason.as_str())).collect();
        assert_eq!(bad.len(), 4, "{bad:?}");
        assert!(
            bad[0].0 == 2 && bad[0].1.starts_with("it is not JSON"),
            "{bad:?}"
        );
        assert!(
            bad[1].0 == 4 && bad[1].1.contains("newer hipjit (schema_version 9"),
            "{bad:?}"
        );
        assert!(
            bad[2].0 == 5 && bad[2].1.starts_with("missing field `direct_key`"),
            "{bad:?}"
        );
        assert!(
            bad[3].0 == 6 && bad[3].1.starts_with("targets: \"gfx9x\""),
            "{bad:?}"
        );
    }

    /// Every reason a line is skipped says why (the field at fault, for a record) and what to
    /// do about it.
    #[test]
    fn each_skip_reason_names_the_fault_and_what_to_do() {
        let good = good_line();
        let edit = |from: &str, to: &str| {
            assert!(good.contains(from), "{from}");
            good.replacen(from, to, 1)
        };
        let not_a_record = "remove the line, or check that this file is a record";
        let unreplayable = "fix or remove the line, or warm with the hipjit that recorded it";
        let mut cases: Vec<(Vec<u8>, &str, &str)> = vec![
            (b"not json".to_vec(), "it is not JSON (", not_a_record),
            (
                b"[1, 2]".to_vec(),
                "it is JSON but not an object",
                not_a_record,
            ),
            (
                b"{\"a\": 1}".to_vec(),
                "it has no schema_version",
                not_a_record,
            ),
            (
                b"\xff\xfe".to_vec(),
                "it is not UTF-8 text (byte 1",
                not_a_record,
            ),
            (
                edit("\"schema_version\":2", "\"schema_version\":3").into_bytes(),
                "it was written by a newer hipjit (schema_version 3",
                "warm this file with the hipjit that recorded it",
            ),
        ];
        // One field changed to a value this hipjit cannot read back.
        let unreplayable_edits = [
            (
                "\"schema_version\":2",
                "\"schema_version\":\"2\"",
                "schema_version: not a number",
            ),
            (
                "\"source\":\"x\"",
                "\"source\":3",
                "source: invalid type: integer `3`",
            ),
            (
                "[\"N\",\"4\"]",
                "[\"N\",4]",
                "options.defines[0][1]: invalid type",
            ),
            (
                "\"c++20\"",
                "\"c++98\"",
                "options.std: unknown C++ standard \"c++98\"",
            ),
            ("\"-O2\"", "\"-O9\"", "options.opt: \"-O9\" is not one of"),
            (
                "\"compiler\":\"auto\"",
                "\"compiler\":\"gcc\"",
                "compiler: \"gcc\" is not a compiler choice",
            ),
            (
                "\"source_encoding\":\"utf-8\"",
                "\"source_encoding\":\"hex\"",
                "source: marked \"hex\" in source_encoding but is not hex",
            ),
            (
                "\"extra_signature\":\"\"",
                "\"extra_signature\":\"zz\"",
                "extra_signature: \"zz\" is not hex",
            ),
        ];
        cases.extend(
            unreplayable_edits
                .into_iter()
                .map(|(from, to, why)| (edit(from, to).into_bytes(), why, unreplayable)),
        );
        for (line, why, what) in cases {
            let r = read_records_from(&line[..]).unwrap();
            let shown = String::from_utf8_lossy(&line);
            assert_eq!(r.bad.len(), 1, "{shown}: {:?}", r.requests);
            let reason = &r.bad[0].reason;
            assert!(reason.starts_with(why), "{shown}: {reason}");
            assert!(reason.ends_with(what), "{shown}: {reason}");
        }
    }

    #[test]
    fn appends_from_many_writers_never_interleave() {
        // Separate recorders hold separate descriptors, as separate processes do; lines far
        // longer than PIPE_BUF.
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("r.jsonl");
        std::thread::scope(|s| {
            for t in 0..4u8 {
                let path = path.clone();
                s.spawn(move || {
                    let rec = Recorder::new(path);
                    for i in 0..25u8 {
                        let source = format!("// {t} {i}\n{}", "x".repeat(20_000));
                        let r = request(source.as_bytes(), &options(), t);
                        assert_eq!(rec.append(CacheKey([i; 32]), &r), None);
                    }
                });
            }
        });
        let r = read_records(&path).unwrap();
        assert!(r.bad.is_empty(), "{:?}", &r.bad[..1]);
        assert_eq!(r.requests.len(), 100);
    }

    #[test]
    fn a_record_file_moved_away_is_followed_by_a_new_one() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("r.jsonl");
        let rec = Recorder::new(path.clone());
        let line = |k: u8| request(&[b'a' + k], &options(), k);
        assert_eq!(rec.append(CacheKey([1; 32]), &line(1)), None);
        std::fs::rename(&path, dir.path().join("r.jsonl.1")).unwrap();
        assert_eq!(rec.append(CacheKey([2; 32]), &line(2)), None);
        let now = read_records(&path).unwrap();
        assert_eq!(now.requests.len(), 1);
        assert_eq!(now.requests[0].1.source, b"c");
        let rotated = read_records(&dir.path().join("r.jsonl.1")).unwrap();
        assert_eq!(rotated.requests[0].1.source, b"b");
    }
}
