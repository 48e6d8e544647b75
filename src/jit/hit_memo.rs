//! The hit memo: where a request's disk hit was found, remembered per user with everything the
//! lookup saw of the filesystem, so that a fresh process serves the same request with one
//! file read and those `stat`s instead of the compiler search, the identity check, the key and
//! the header manifest check.
//!
//! A disk hit found the long way ([`super::Jit`]'s lookup) is recorded as it runs
//! (`file_observe`): every `stat`, `realpath` and file opened by the compiler search
//! and identity (also those of an earlier request in the process, kept with the compiler
//! found), the per-user memos, the manifest and the entries, with what each saw. The memo file
//! is named by the sha256 of everything else the lookup reads: the source, the options, the
//! HIP runtime in use, the [`super::Jit`]'s configuration (compiler choice and settings, extra
//! signature, runtime code object versions, cache roots), the whole environment, the working
//! directory, and the effective user (as the lookup's ownership checks read it). It holds the
//! observations, the result key, the compiler used and the effective options. A later request with the same name whose every
//! observation still holds (`fs::observe::holds`) takes the entry of that key
//! straight from the disk cache (read and verified as any hit); anything else, or no memo,
//! looks up the long way (and remembers again on a hit).
//!
//! An observation of a file holds only by the stat-trust rule
//! ([`crate::fs::stat::FileStat::proves_same_as`]; the README's "What a hit trusts"): the same
//! fields on the same mount, known by an identity the kernel never gives another mount, so that
//! a file system image swapped for another at one path, its files' fields alike, is a miss.
//! A memo is written only when the observations can be trusted by `stat`: every file seen has
//! a mount identity (none where the kernel gives no unique mount ID: then no memo is written,
//! and every hit takes the long way) and was
//! last changed (modification and status change times) at least [`MIN_AGE`] before, so that a
//! change within the same timestamp tick of a coarse filesystem clock cannot go unseen; the
//! lookup found its hit at the first look, without a stale manifest or a bad entry; and every
//! query of the lookup was recorded. A compiler found by an earlier request of the process is
//! used by a later one as it was found: that request is remembered only when the process's
//! environment, working directory and HIP runtime are what they were when the compiler was
//! found (`process_context`). The memos live
//! beside the compiler identities ([`crate::compiler::identity::identity_dir`]) under `hits/`,
//! written with mode 0600, read only when owned by the user and writable by nobody else
//! (`identity::read_private`).

use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use super::compiled::CompilerUsed;
use crate::cache::key::CacheKey;
use crate::compiler::identity::{self, CompilerKind};
use crate::compiler::CompileOptions;
use crate::digest::Record;
use crate::fs;
use crate::fs::observe::{Observation, Observed, Seen, SeenRef};
use crate::fs::stat::FileStat;

/// The memo's format: [`encode`] writes it. 3: each file's mount identity. 4: each path
/// written as the length it shares with the one before and the rest. 5: the effective options
/// left empty when they are the request's (named by [`options_name_bytes`]).
const FORMAT: u32 = 5;

/// The first bytes of a memo file.
const MAGIC: &[u8; 4] = b"HJHM";

/// How long before the memo is written every file seen must have last changed.
pub const MIN_AGE: Duration = Duration::from_secs(2);

struct Memo {
    request: [u8; 32],
    observed: Vec<Observation>,
    key: [u8; 32],
    compiler_kind: CompilerKind,
    compiler_path: Vec<u8>,
    compiler_version: String,
    compiler_reason: String,
    /// The effective options in MessagePack ([`effective_options_bytes`]); empty when they are
    /// the request's.
    options: Vec<u8>,
}

/// What a memo gives: the result key, the compiler used and the effective options.
pub(crate) struct Recalled {
    pub(crate) key: CacheKey,
    pub(crate) compiler: CompilerUsed,
    pub(crate) options: CompileOptions,
}

/// Effective options as a memo holds them when they are not the request's (MessagePack).
fn effective_options_bytes(options: &CompileOptions) -> Option<Vec<u8>> {
    rmp_serde::to_vec(options).ok()
}

/// The options of a request as [`request_name`] takes them: every field in order, each
/// string or list length-prefixed, each `Option` and enum a tag byte. Written by hand, not
/// with serde, so that a fresh process's hit runs no serde code; the struct is taken apart
/// whole, so that a field added to it does not compile until it is written here.
pub(crate) fn options_name_bytes(options: &CompileOptions) -> Vec<u8> {
    use crate::compiler::options::{Checks, CxxStd, OptLevel};
    use crate::target::amdgpu::FeatureSetting;
    let CompileOptions {
        targets,
        sm_targets,
        std,
        opt_level,
        fast_math,
        defines,
        headers,
        include_dirs,
        tracked_include_dirs,
        line_info,
        verbose,
        extra_flags,
        code_object_version,
        source_name,
        dump_llvm_ir,
        dump_isa,
        checks: Checks {
            no_spills,
            no_scratch,
        },
    } = options;
    let mut b = Vec::with_capacity(128);
    let text = |b: &mut Vec<u8>, v: &Option<String>| match v {
        None => b.push(0),
        Some(v) => {
            b.push(1);
            put_bytes(b, v.as_bytes());
        }
    };
    let feature = |f: FeatureSetting| match f {
        FeatureSetting::Unsupported => 0,
        FeatureSetting::Any => 1,
        FeatureSetting::Off => 2,
        FeatureSetting::On => 3,
    };
    put_count(&mut b, targets.len());
    for t in targets {
        put_bytes(&mut b, t.processor().as_bytes());
        b.extend_from_slice(&[feature(t.xnack()), feature(t.sramecc())]);
    }
    put_count(&mut b, sm_targets.len());
    for t in sm_targets {
        b.extend_from_slice(&t.sm.to_le_bytes());
        // A `char` is at most 0x10FFFF: u32::MAX stands for none.
        b.extend_from_slice(&t.suffix.map_or(u32::MAX, u32::from).to_le_bytes());
    }
    b.push(match std {
        CxxStd::Cxx11 => 0,
        CxxStd::Cxx14 => 1,
        CxxStd::Cxx17 => 2,
        CxxStd::Cxx20 => 3,
        CxxStd::Cxx23 => 4,
    });
    b.push(match opt_level {
        OptLevel::O0 => 0,
        OptLevel::O1 => 1,
        OptLevel::O2 => 2,
        OptLevel::O3 => 3,
        OptLevel::Os => 4,
        OptLevel::Oz => 5,
    });
    put_count(&mut b, defines.len());
    for (name, value) in defines {
        put_bytes(&mut b, name.as_bytes());
        text(&mut b, value);
    }
    put_count(&mut b, headers.len());
    for (name, content) in headers {
        put_bytes(&mut b, name.as_bytes());
        put_bytes(&mut b, content.as_bytes());
    }
    for dirs in [include_dirs, tracked_include_dirs] {
        put_count(&mut b, dirs.len());
        for d in dirs {
            put_bytes(&mut b, d.as_os_str().as_bytes());
        }
    }
    put_count(&mut b, extra_flags.len());
    for f in extra_flags {
        put_bytes(&mut b, f.as_bytes());
    }
    b.push(u8::from(code_object_version.is_some()));
    b.extend_from_slice(&code_object_version.unwrap_or(0).to_le_bytes());
    text(&mut b, source_name);
    b.extend_from_slice(&[
        u8::from(*fast_math),
        u8::from(*line_info),
        u8::from(*verbose),
        u8::from(*dump_llvm_ir),
        u8::from(*dump_isa),
        u8::from(*no_spills),
        u8::from(*no_scratch),
    ]);
    b
}

/// `v` after its length ([`put_count`]): a byte string of [`options_name_bytes`] and
/// [`config_bytes`].
fn put_bytes(b: &mut Vec<u8>, v: &[u8]) {
    put_count(b, v.len());
    b.extend_from_slice(v);
}

/// A count or length as [`options_name_bytes`] and [`config_bytes`] write it: `u64`,
/// little-endian.
fn put_count(b: &mut Vec<u8>, n: usize) {
    b.extend_from_slice(&(n as u64).to_le_bytes());
}

/// The name of one request: the sha256 of its inputs and of the process's (see the module
/// documentation). `jit` is the [`super::Jit`]'s configuration in bytes ([`config_bytes`]),
/// `options` the request's [`options_name_bytes`], `context` its [`process_context`] (which
/// holds the HIP runtime in use).
pub(crate) fn request_name(
    jit: &[u8],
    source: &[u8],
    options: &[u8],
    context: &[u8; 32],
) -> [u8; 32] {
    let mut r = Record::new();
    let mut item = |b: &[u8]| r.bytes(b);
    item(&FORMAT.to_le_bytes());
    item(env!("CARGO_PKG_VERSION").as_bytes());
    // The formats the lookup reads and the keys it derives: a build that changes one bumps it.
    item(&crate::cache::key::CACHE_FORMAT_VERSION.to_le_bytes());
    item(&identity::MEMO_FORMAT.to_le_bytes());
    item(&crate::compiler::library_search::FORMAT.to_le_bytes());
    item(jit);
    item(source);
    item(options);
    item(context);
    // The user the lookup's ownership checks judge files against (read once per process).
    item(&crate::fs::user::uid().to_le_bytes());
    r.finish()
}

/// A [`super::Jit`]'s configuration as the names of its hit memos hold it ([`request_name`]'s
/// `jit`): the compiler settings (`config`: every field, the worker pool's handle aside), the
/// compiler choice and where it came from, the extra signature, the runtime code object
/// versions, and the cache roots with what opening them found. Written by hand as
/// length-prefixed pieces (a tag byte for each `Option`), so that a fresh process's first
/// request formats nothing; every struct is taken apart whole, so that a field added to one
/// does not compile until it is written here.
pub(crate) fn config_bytes(
    config: &crate::compiler::CompilerConfig,
    choice: crate::compiler::CompilerChoice,
    choice_from: &str,
    extra: &[u8],
    runtime_versions: Option<&[u32]>,
    roots: &[crate::cache::disk::Root],
) -> Vec<u8> {
    let crate::compiler::CompilerConfig {
        hipcc,
        nvcc,
        timeout,
        max_concurrent,
        env,
        identity_dir,
        rtc_worker,
    } = config;
    let mut b = Vec::with_capacity(256);
    let tag = |b: &mut Vec<u8>, some: bool| b.push(u8::from(some));
    let path = |b: &mut Vec<u8>, p: &Option<PathBuf>| {
        tag(b, p.is_some());
        if let Some(p) = p {
            put_bytes(b, p.as_os_str().as_bytes());
        }
    };
    let duration = |b: &mut Vec<u8>, d: &Duration| {
        b.extend_from_slice(&d.as_secs().to_le_bytes());
        b.extend_from_slice(&d.subsec_nanos().to_le_bytes());
    };
    path(&mut b, hipcc);
    path(&mut b, nvcc);
    duration(&mut b, timeout);
    put_count(&mut b, *max_concurrent);
    tag(&mut b, env.is_some());
    if let Some(env) = env {
        put_count(&mut b, env.len());
        for (k, v) in env {
            put_bytes(&mut b, k.as_bytes());
            put_bytes(&mut b, v.as_bytes());
        }
    }
    path(&mut b, identity_dir);
    tag(&mut b, rtc_worker.is_some());
    if let Some(w) = rtc_worker {
        // The pool is a handle to the workers started, not a setting.
        let crate::compiler::rtc::worker::WorkerConfig {
            program,
            timeout,
            memory_limit,
            pool: _,
        } = w;
        path(&mut b, program);
        duration(&mut b, timeout);
        tag(&mut b, memory_limit.is_some());
        b.extend_from_slice(&memory_limit.unwrap_or(0).to_le_bytes());
    }
    put_bytes(&mut b, choice.as_str().as_bytes());
    put_bytes(&mut b, choice_from.as_bytes());
    put_bytes(&mut b, extra);
    tag(&mut b, runtime_versions.is_some());
    if let Some(v) = runtime_versions {
        put_count(&mut b, v.len());
        for v in v {
            b.extend_from_slice(&v.to_le_bytes());
        }
    }
    put_count(&mut b, roots.len());
    for root in roots {
        let crate::cache::disk::Root {
            path,
            writable,
            shared,
            group,
            closed,
        } = root;
        put_bytes(&mut b, path.as_os_str().as_bytes());
        b.extend_from_slice(&[u8::from(*writable), u8::from(*shared), u8::from(*closed)]);
        tag(&mut b, group.is_some());
        b.extend_from_slice(&group.unwrap_or(0).to_le_bytes());
    }
    b
}

/// The sha256 of what a lookup reads of the process besides files: every environment
/// variable in the order the environment holds them (a variable set twice is read by its
/// first occurrence, so order matters; `TMPDIR` as the process was given it, not the
/// private directory the command points it at, [`crate::compiler::tmpdir_as_given`]), the working directory, and the HIP runtime in use
/// (`runtime`). `None` when the working directory cannot be read.
pub(crate) fn process_context(runtime: Option<&Path>) -> Option<[u8; 32]> {
    let mut r = Record::new();
    r.bytes(runtime.map_or(b"\0none".as_slice(), |p| p.as_os_str().as_bytes()));
    for (k, v) in std::env::vars_os() {
        // The command's own temporary directory, new in every run, stands for the TMPDIR it
        // was given (compilers run in build directories of their own whatever it is).
        let v = if k == "TMPDIR" {
            match crate::compiler::tmpdir_as_given(&v) {
                Some(given) => given.to_owned(),
                None => continue,
            }
        } else {
            v
        };
        r.bytes(k.as_bytes());
        r.bytes(v.as_bytes());
    }
    r.bytes(std::env::current_dir().ok()?.as_os_str().as_bytes());
    Some(r.finish())
}

fn memo_file(dir: &Path, name: &[u8; 32]) -> PathBuf {
    let hex = crate::digest::hex(name);
    let mut file = String::with_capacity(44);
    file.push_str(&hex[..40]);
    file.push_str(".hit");
    dir.join("hits").join(file)
}

/// The memo of request `name` in `dir`, when every observation in it still holds; `options`
/// are the request's (the name holds them: the effective options are decoded only when the
/// memo says they differ).
pub(crate) fn recall(dir: &Path, name: &[u8; 32], options: &CompileOptions) -> Option<Recalled> {
    let bytes = identity::read_private(&memo_file(dir, name))?;
    // Checked as read, one observation at a time, without making a list of them: a memo of a
    // compile that read 300 headers holds 300 paths.
    let mut r = Cursor(&bytes);
    let head = Head::read(&mut r)?;
    if head.request != *name {
        return None;
    }
    let mut path = Vec::with_capacity(256);
    let all_hold = walk_observations(&mut r, head.observations, |prefix, rest, follow, seen| {
        path.truncate(prefix);
        path.extend_from_slice(rest);
        path.push(0);
        let holds = std::ffi::CStr::from_bytes_with_nul(&path)
            .is_ok_and(|p| fs::observe::holds_at(p, follow, &seen));
        path.pop();
        holds
    })?;
    if !all_hold || !r.0.is_empty() {
        return None;
    }
    let options = if head.options.is_empty() {
        options.clone()
    } else {
        rmp_serde::from_slice(head.options).ok()?
    };
    Some(Recalled {
        key: CacheKey(head.key),
        compiler: CompilerUsed {
            kind: head.compiler_kind,
            path: PathBuf::from(std::ffi::OsStr::from_bytes(head.compiler_path)),
            version: std::str::from_utf8(head.compiler_version).ok()?.to_owned(),
            reason: std::str::from_utf8(head.compiler_reason).ok()?.to_owned(),
        },
        options,
    })
}

/// Why `observed` cannot be remembered at `now`, if it cannot.
pub(crate) fn unremembered(observed: &Observed, now: SystemTime) -> Option<String> {
    if !observed.complete {
        return Some("a query of the lookup was not recorded".into());
    }
    let edge = now.checked_sub(MIN_AGE)?;
    let edge = edge.duration_since(SystemTime::UNIX_EPOCH).ok()?;
    let edge = (edge.as_secs() as i64, edge.subsec_nanos() as i64);
    observed.observed.iter().find_map(|o| match &o.seen {
        Seen::Present(s, _) if s.mount == crate::fs::stat::NO_MOUNT_IDENTITY => Some(format!(
            "the mount of {} has no unique identity (the kernel gives none before Linux 6.8): \
             its stat proves nothing",
            String::from_utf8_lossy(&o.path)
        )),
        Seen::Present(s, _) if s.mtime >= edge || s.ctime >= edge => Some(format!(
            "{} changed less than {} s ago",
            String::from_utf8_lossy(&o.path),
            MIN_AGE.as_secs()
        )),
        _ => None,
    })
}

/// Remembers request `name` in `dir`: its observations, result key, compiler and effective
/// `options` (held only when they are not `requested`, the request's), unless [`unremembered`] says why not, or the process context (`runtime` in use)
/// is no longer `context`, the one the name was made with (another thread changed the
/// environment or the working directory meanwhile); logged at debug level.
#[allow(clippy::too_many_arguments)]
pub(crate) fn remember(
    dir: &Path,
    name: &[u8; 32],
    context: &[u8; 32],
    runtime: Option<&Path>,
    observed: Observed,
    key: &CacheKey,
    compiler: &CompilerUsed,
    options: &CompileOptions,
    requested: &CompileOptions,
) {
    if process_context(runtime).as_ref() != Some(context) {
        tracing::debug!(%key, "hit not remembered: the environment or working directory changed during the lookup");
        return;
    }
    if let Some(why) = unremembered(&observed, SystemTime::now()) {
        tracing::debug!(%key, reason = %why, "hit not remembered");
        return;
    }
    // The same query made twice (a compiler's search replayed by each use) is checked once.
    let mut observed = observed.observed;
    observed.sort_by(|a, b| (&a.path, a.follow).cmp(&(&b.path, b.follow)));
    observed.dedup();
    let options = if options == requested {
        Vec::new()
    } else {
        match effective_options_bytes(options) {
            Some(b) => b,
            None => return,
        }
    };
    let memo = Memo {
        request: *name,
        observed,
        key: key.0,
        compiler_kind: compiler.kind,
        compiler_path: compiler.path.as_os_str().as_bytes().to_vec(),
        compiler_version: compiler.version.clone(),
        compiler_reason: compiler.reason.clone(),
        options,
    };
    let file = memo_file(dir, name);
    identity::write_private_bytes(&file, &encode(&memo), false);
    if let Some(hits) = file.parent() {
        prune(hits, MAX_MEMOS);
    }
}

/// How many memos are kept: past it, the oldest quarter (by modification time) is removed.
/// Each is a few KiB; one is written per request and environment (a variable that differs
/// per job names a memo per job).
pub const MAX_MEMOS: usize = 4096;

/// Removes the oldest memos of `hits` down to three quarters of `max` when there are more than
/// `max` (temporary files older than a minute too); errors are ignored (another process may
/// prune at once).
fn prune(hits: &Path, max: usize) {
    let Ok(rd) = std::fs::read_dir(hits) else {
        return;
    };
    // Names only (no `stat`) unless there is something to remove: this runs at every memo
    // written.
    let now = SystemTime::now();
    let modified = |p: &Path| {
        std::fs::symlink_metadata(p)
            .and_then(|m| m.modified())
            .unwrap_or(SystemTime::UNIX_EPOCH)
    };
    let mut memos: Vec<PathBuf> = Vec::new();
    for e in rd.flatten() {
        let name = e.file_name();
        let name = name.as_bytes();
        if name.starts_with(b".tmp-") {
            let p = e.path();
            if now
                .duration_since(modified(&p))
                .is_ok_and(|age| age > Duration::from_secs(60))
            {
                let _ = std::fs::remove_file(p);
            }
        } else if name.ends_with(b".hit") {
            memos.push(e.path());
        }
    }
    if memos.len() <= max {
        return;
    }
    let mut memos: Vec<(SystemTime, PathBuf)> =
        memos.into_iter().map(|p| (modified(&p), p)).collect();
    memos.sort();
    for (_, p) in &memos[..memos.len() - max * 3 / 4] {
        let _ = std::fs::remove_file(p);
    }
}

/// The paths a memo file's observations name (for tests that compare them with what a lookup
/// really touched).
#[doc(hidden)]
pub fn observed_paths(memo: &Path) -> Option<Vec<PathBuf>> {
    let bytes = std::fs::read(memo).ok()?;
    let memo = decode(&bytes)?;
    Some(
        memo.observed
            .into_iter()
            .map(|o| PathBuf::from(std::ffi::OsStr::from_bytes(&o.path)))
            .collect(),
    )
}

/// A memo's bytes: [`MAGIC`], [`FORMAT`] (`u32`), the request name and the key (32 bytes
/// each), the compiler's kind (one byte: [`kind_code`]), path, version and reason, the
/// effective options (empty when they are the request's), the number of observations (`u32`) and each observation, in path order: its path
/// (the length it shares with the path before, `u32`, then the rest; paths of one
/// directory share most of their bytes), whether a link
/// at its end was followed (one byte), and what it saw: `1` a file (size, modification and
/// change times as seconds and nanoseconds, inode, device, mount identity: `u64`/`i64` each;
/// then the
/// [`crate::fs::observe`] type code, one byte), `2` an error (its `errno`, `i32`), `3` a
/// resolved path. Byte strings are a `u32` length and the bytes; integers little-endian.
/// Written and read by hand, not with serde: a fresh process's hit runs this code once, and
/// serde's decoding was most of the code that hit first ran.
fn encode(m: &Memo) -> Vec<u8> {
    let mut b = Vec::with_capacity(256 + m.observed.len() * 96);
    let bytes = |b: &mut Vec<u8>, v: &[u8]| {
        b.extend_from_slice(&(v.len() as u32).to_le_bytes());
        b.extend_from_slice(v);
    };
    b.extend_from_slice(MAGIC);
    b.extend_from_slice(&FORMAT.to_le_bytes());
    b.extend_from_slice(&m.request);
    b.extend_from_slice(&m.key);
    b.push(m.compiler_kind.wire_code());
    bytes(&mut b, &m.compiler_path);
    bytes(&mut b, m.compiler_version.as_bytes());
    bytes(&mut b, m.compiler_reason.as_bytes());
    bytes(&mut b, &m.options);
    b.extend_from_slice(&(m.observed.len() as u32).to_le_bytes());
    let mut previous: &[u8] = &[];
    for o in &m.observed {
        let shared = previous
            .iter()
            .zip(&o.path)
            .take_while(|(a, b)| a == b)
            .count();
        b.extend_from_slice(&(shared as u32).to_le_bytes());
        bytes(&mut b, &o.path[shared..]);
        previous = &o.path;
        b.push(u8::from(o.follow));
        match &o.seen {
            Seen::Present(s, t) => {
                b.push(1);
                for v in [s.size, s.mtime.0 as u64, s.mtime.1 as u64, s.ctime.0 as u64]
                    .into_iter()
                    .chain([s.ctime.1 as u64, s.ino, s.dev, s.mount])
                {
                    b.extend_from_slice(&v.to_le_bytes());
                }
                b.push(*t);
            }
            Seen::Missing(e) => {
                b.push(2);
                b.extend_from_slice(&e.to_le_bytes());
            }
            Seen::Resolved(p) => {
                b.push(3);
                bytes(&mut b, p);
            }
        }
    }
    b
}

/// The fields of a memo before its observations, borrowed from its bytes.
struct Head<'a> {
    request: [u8; 32],
    key: [u8; 32],
    compiler_kind: CompilerKind,
    compiler_path: &'a [u8],
    compiler_version: &'a [u8],
    compiler_reason: &'a [u8],
    options: &'a [u8],
    /// How many observations follow.
    observations: usize,
}

impl<'a> Head<'a> {
    /// The head of a memo of this [`FORMAT`] off the front of `r`.
    fn read(r: &mut Cursor<'a>) -> Option<Head<'a>> {
        if r.take(4)? != MAGIC || r.u32()? != FORMAT {
            return None;
        }
        Some(Head {
            request: r.array()?,
            key: r.array()?,
            compiler_kind: CompilerKind::from_wire_code(r.u8()?)?,
            compiler_path: r.bytes()?,
            compiler_version: r.bytes()?,
            compiler_reason: r.bytes()?,
            options: r.bytes()?,
            observations: r.u32()? as usize,
        })
    }
}

/// Reads `n` observations off the front of `r`, handing each to `f` as the length of the
/// path it shares with the one before, the rest of its path, whether a link at its end was
/// followed and what it saw, until `f` answers `false`. `Some(true)` when all were read and
/// `f` took each, `Some(false)` when `f` refused one, `None` when the bytes are no
/// observations (cut short, a shared length past the path before, an unknown code).
fn walk_observations<'a>(
    r: &mut Cursor<'a>,
    n: usize,
    mut f: impl FnMut(usize, &'a [u8], bool, SeenRef<'a>) -> bool,
) -> Option<bool> {
    let mut previous_len = 0usize;
    for _ in 0..n {
        let shared = r.u32()? as usize;
        if shared > previous_len {
            return None;
        }
        let rest = r.bytes()?;
        previous_len = shared + rest.len();
        let follow = match r.u8()? {
            0 => false,
            1 => true,
            _ => return None,
        };
        let seen = match r.u8()? {
            1 => {
                let mut v = [0u64; 8];
                for x in &mut v {
                    *x = r.u64()?;
                }
                SeenRef::Present(
                    FileStat {
                        size: v[0],
                        mtime: (v[1] as i64, v[2] as i64),
                        ctime: (v[3] as i64, v[4] as i64),
                        ino: v[5],
                        dev: v[6],
                        mount: v[7],
                    },
                    r.u8()?,
                )
            }
            2 => SeenRef::Missing(r.u32()? as i32),
            3 => SeenRef::Resolved(r.bytes()?),
            _ => return None,
        };
        if !f(shared, rest, follow, seen) {
            return Some(false);
        }
    }
    Some(true)
}

/// The memo in `b`, `None` unless it is one of this [`FORMAT`], whole, with nothing after it.
fn decode(b: &[u8]) -> Option<Memo> {
    let mut r = Cursor(b);
    let head = Head::read(&mut r)?;
    // Each observation takes at least 10 bytes: a count past that is not believed.
    let mut observed: Vec<Observation> = Vec::with_capacity(head.observations.min(r.0.len() / 10));
    walk_observations(&mut r, head.observations, |shared, rest, follow, seen| {
        let mut path = observed
            .last()
            .map_or(&[][..], |o| &o.path[..shared])
            .to_vec();
        path.extend_from_slice(rest);
        let seen = match seen {
            SeenRef::Present(s, t) => Seen::Present(s, t),
            SeenRef::Missing(e) => Seen::Missing(e),
            SeenRef::Resolved(p) => Seen::Resolved(p.to_vec()),
        };
        observed.push(Observation { path, follow, seen });
        true
    })?;
    r.0.is_empty().then_some(Memo {
        request: head.request,
        observed,
        key: head.key,
        compiler_kind: head.compiler_kind,
        compiler_path: head.compiler_path.to_vec(),
        compiler_version: String::from_utf8(head.compiler_version.to_vec()).ok()?,
        compiler_reason: String::from_utf8(head.compiler_reason.to_vec()).ok()?,
        options: head.options.to_vec(),
    })
}

/// Reads a memo's fields off the front of a byte slice; `None` when it ends first.
struct Cursor<'a>(&'a [u8]);

impl<'a> Cursor<'a> {
    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        let (head, rest) = self.0.split_at_checked(n)?;
        self.0 = rest;
        Some(head)
    }
    fn array<const N: usize>(&mut self) -> Option<[u8; N]> {
        self.take(N)?.try_into().ok()
    }
    fn u8(&mut self) -> Option<u8> {
        Some(self.array::<1>()?[0])
    }
    fn u32(&mut self) -> Option<u32> {
        Some(u32::from_le_bytes(self.array()?))
    }
    fn u64(&mut self) -> Option<u64> {
        Some(u64::from_le_bytes(self.array()?))
    }
    fn bytes(&mut self) -> Option<&'a [u8]> {
        let n = self.u32()? as usize;
        self.take(n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn seen_at(secs: i64) -> Observation {
        Observation {
            path: b"/x".to_vec(),
            follow: true,
            seen: Seen::Present(
                FileStat {
                    size: 1,
                    mtime: (secs, 0),
                    ctime: (secs, 0),
                    ino: 1,
                    dev: 1,
                    mount: 1,
                },
                1,
            ),
        }
    }

    #[test]
    fn files_changed_within_the_margin_or_an_incomplete_recording_are_not_remembered() {
        let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1_000);
        let old = Observed {
            observed: vec![seen_at(990)],
            complete: true,
        };
        assert_eq!(unremembered(&old, now), None);
        let edge = Observed {
            observed: vec![seen_at(990), seen_at(998)],
            complete: true,
        };
        assert!(unremembered(&edge, now)
            .unwrap()
            .contains("changed less than 2 s ago"));
        let incomplete = Observed {
            observed: vec![seen_at(990)],
            complete: false,
        };
        assert!(unremembered(&incomplete, now)
            .unwrap()
            .contains("not recorded"));
    }

    #[test]
    fn a_memo_reads_back_as_written_and_a_cut_or_lengthened_one_is_refused() {
        let mut observed = vec![seen_at(990)];
        observed.push(Observation {
            path: b"/lib/libnvrtc.so.13".to_vec(),
            follow: false,
            seen: Seen::Missing(2),
        });
        observed.push(Observation {
            path: b"/usr/local/cuda".to_vec(),
            follow: true,
            seen: Seen::Resolved(b"/opt/cuda-13.0".to_vec()),
        });
        observed.push(Observation {
            path: vec![0xff, b'/', 0x80],
            follow: true,
            seen: Seen::Present(
                FileStat {
                    size: u64::MAX,
                    mtime: (-1, 999_999_999),
                    ctime: (i64::MIN, 0),
                    ino: u64::MAX - 1,
                    dev: 1 << 40,
                    mount: u64::MAX - 2,
                },
                4,
            ),
        });
        let memo = Memo {
            request: [7; 32],
            observed: observed.clone(),
            key: [9; 32],
            compiler_kind: CompilerKind::Nvrtc,
            compiler_path: b"/opt/cuda/lib64/libnvrtc.so.13".to_vec(),
            compiler_version: "NVRTC 13.0".into(),
            compiler_reason: "HIPJIT_COMPILER=nvrtc".into(),
            options: effective_options_bytes(&CompileOptions::default()).unwrap(),
        };
        let bytes = encode(&memo);
        let back = decode(&bytes).unwrap();
        assert_eq!(back.request, memo.request);
        assert_eq!(back.key, memo.key);
        assert_eq!(back.observed, observed);
        assert_eq!(back.compiler_kind, CompilerKind::Nvrtc);
        assert_eq!(back.compiler_path, memo.compiler_path);
        assert_eq!(back.compiler_version, memo.compiler_version);
        assert_eq!(back.compiler_reason, memo.compiler_reason);
        assert_eq!(back.options, memo.options);
        for cut in 0..bytes.len() {
            assert!(decode(&bytes[..cut]).is_none(), "cut at {cut}");
        }
        let mut longer = bytes.clone();
        longer.push(0);
        assert!(decode(&longer).is_none());
        // Another format's memo (the serde-written format 1 began with a MessagePack array).
        let mut other = bytes.clone();
        other[4] = 1;
        assert!(decode(&other).is_none());
        // Format 4 held the effective options always, in the bytes that named the request.
        other[4] = 4;
        assert!(decode(&other).is_none());
        // A count of observations far past the bytes: refused, not allocated.
        let mut huge = encode(&Memo {
            observed: Vec::new(),
            ..memo
        });
        let n = huge.len() - 4;
        huge[n..].copy_from_slice(&u32::MAX.to_le_bytes());
        assert!(decode(&huge).is_none());
    }

    #[test]
    fn paths_are_written_as_what_they_share_with_the_one_before_and_read_back_whole() {
        let file = |p: &[u8], ino: u64| Observation {
            path: p.to_vec(),
            follow: true,
            seen: Seen::Present(
                FileStat {
                    size: 1,
                    mtime: (1, 0),
                    ctime: (1, 0),
                    ino,
                    dev: 1,
                    mount: 1,
                },
                1,
            ),
        };
        let observed = vec![
            file(b"/opt/cuda/include/crt/host_defines.h", 1),
            file(b"/opt/cuda/include/cuda.h", 2),
            file(b"/opt/cuda/include/cuda_runtime.h", 3),
            file(b"/usr/include/stdio.h", 4),
            file(b"/usr/include/stdio.h", 5),
            file(b"/usr/include/std", 6),
            file(b"", 7),
            file(b"/x", 8),
        ];
        let memo = Memo {
            request: [1; 32],
            observed: observed.clone(),
            key: [2; 32],
            compiler_kind: CompilerKind::Nvcc,
            compiler_path: b"/opt/cuda/bin/nvcc".to_vec(),
            compiler_version: String::new(),
            compiler_reason: String::new(),
            options: Vec::new(),
        };
        let bytes = encode(&memo);
        assert_eq!(decode(&bytes).unwrap().observed, observed);
        // Shorter than the paths written whole: `cuda.h` shares `/opt/cuda/include/c` (19
        // bytes) with the path before it, `cuda_runtime.h` 22, `/usr/include/stdio.h` the
        // leading `/`, the same path again all its 20, `/usr/include/std` 16.
        let whole: usize = observed.iter().map(|o| o.path.len()).sum();
        let shared = 19 + 22 + 1 + 20 + 16;
        let head = 4 + 4 + 32 + 32 + 1 + 4 + 18 + 4 + 4 + 4 + 4;
        assert_eq!(
            bytes.len(),
            head + observed.len() * (4 + 4 + 1 + 1 + 64 + 1) + whole - shared
        );
        // A shared length past the path before is refused (the second observation's, at its
        // first byte: after the head and the first observation).
        let second = head + (4 + 4 + 36 + 1 + 1 + 64 + 1);
        assert_eq!(&bytes[second..second + 4], &19u32.to_le_bytes());
        let mut past = bytes.clone();
        past[second..second + 4].copy_from_slice(&37u32.to_le_bytes());
        assert!(decode(&past).is_none());
        // Exactly the path before: accepted (the same path twice, another query of it).
        let mut all = bytes.clone();
        all[second..second + 4].copy_from_slice(&36u32.to_le_bytes());
        let back = decode(&all).unwrap();
        assert!(back.observed[1]
            .path
            .starts_with(b"/opt/cuda/include/crt/host_defines.h"));
    }

    #[test]
    fn recall_checks_each_observation_as_read_and_refuses_a_changed_file() {
        let d = tempfile::tempdir().unwrap();
        let (a, b) = (d.path().join("a.h"), d.path().join("b.h"));
        std::fs::write(&a, b"1").unwrap();
        std::fs::write(&b, b"2").unwrap();
        let link = d.path().join("link");
        std::os::unix::fs::symlink(&a, &link).unwrap();
        let r = crate::fs::observe::Recording::start();
        assert!(crate::fs::observe::is_file(&a));
        assert!(crate::fs::observe::is_file(&b));
        assert!(!crate::fs::observe::exists(&d.path().join("missing.h")));
        let resolved = crate::fs::observe::canonicalize(&link).unwrap();
        assert_eq!(resolved, std::fs::canonicalize(&a).unwrap());
        let mut observed = r.finish().observed;
        if observed.iter().any(|o| matches!(&o.seen, Seen::Present(s, _) if s.mount == crate::fs::stat::NO_MOUNT_IDENTITY)) {
            // No unique mount identity on this kernel: no memo is written or trusted here
            // (`unremembered`, tested above).
            return;
        }
        observed.sort_by(|x, y| (&x.path, x.follow).cmp(&(&y.path, y.follow)));
        let options = CompileOptions::default();
        let name = [3; 32];
        let memo = Memo {
            request: name,
            observed,
            key: [4; 32],
            compiler_kind: CompilerKind::Nvrtc,
            compiler_path: b"/lib/libnvrtc.so".to_vec(),
            compiler_version: "NVRTC 13.0".into(),
            compiler_reason: "test".into(),
            options: Vec::new(),
        };
        let dir = d.path().join("ids");
        let file = memo_file(&dir, &name);
        std::fs::create_dir_all(file.parent().unwrap()).unwrap();
        std::fs::write(&file, encode(&memo)).unwrap();
        std::fs::set_permissions(&file, std::os::unix::fs::PermissionsExt::from_mode(0o600))
            .unwrap();
        let hit = recall(&dir, &name, &options).unwrap();
        assert_eq!(hit.key.0, [4; 32]);
        assert_eq!(hit.compiler.version, "NVRTC 13.0");
        // Another request's name: refused.
        assert!(recall(&dir, &[5; 32], &options).is_none());
        // The link retargeted (its resolution changed): refused.
        std::fs::remove_file(&link).unwrap();
        std::os::unix::fs::symlink(&b, &link).unwrap();
        assert!(recall(&dir, &name, &options).is_none());
        std::fs::remove_file(&link).unwrap();
        std::os::unix::fs::symlink(&a, &link).unwrap();
        assert!(recall(&dir, &name, &options).is_some());
        // The missing header made: refused; removed again: served.
        std::fs::write(d.path().join("missing.h"), b"").unwrap();
        assert!(recall(&dir, &name, &options).is_none());
        std::fs::remove_file(d.path().join("missing.h")).unwrap();
        assert!(recall(&dir, &name, &options).is_some());
        // Effective options other than the request's: held and given back.
        let mut effective = options.clone();
        effective.defines.push(("FROM_THE_COMPILER".into(), None));
        let other = Memo {
            options: effective_options_bytes(&effective).unwrap(),
            ..memo
        };
        std::fs::write(&file, encode(&other)).unwrap();
        assert_eq!(recall(&dir, &name, &options).unwrap().options, effective);
        // The last file rewritten in place (its size): refused.
        std::fs::write(&b, b"22").unwrap();
        assert!(recall(&dir, &name, &options).is_none());
    }

    #[test]
    fn options_name_bytes_tell_every_option_apart() {
        use crate::compiler::options::{CxxStd, OptLevel};
        use crate::target::sm::SmTarget;
        use crate::target_id::TargetId;
        let mut cases: Vec<(&str, CompileOptions)> = vec![("default", CompileOptions::default())];
        let mut with = |name: &'static str, f: &dyn Fn(&mut CompileOptions)| {
            let mut o = CompileOptions::default();
            f(&mut o);
            cases.push((name, o));
        };
        let gfx = |s: &str| TargetId::parse(s).unwrap();
        with("gfx90a", &|o| o.targets = vec![gfx("gfx90a")]);
        with("gfx90a:xnack+", &|o| o.targets = vec![gfx("gfx90a:xnack+")]);
        with("gfx90a:xnack-", &|o| o.targets = vec![gfx("gfx90a:xnack-")]);
        with("gfx90a:sramecc+", &|o| {
            o.targets = vec![gfx("gfx90a:sramecc+")]
        });
        with("two targets", &|o| {
            o.targets = vec![gfx("gfx90a"), gfx("gfx942")]
        });
        with("sm_90", &|o| o.sm_targets = vec![SmTarget::new(90)]);
        with("sm_90a", &|o| {
            o.sm_targets = vec![SmTarget::parse("sm_90a").unwrap()]
        });
        with("c++20", &|o| o.std = CxxStd::Cxx20);
        with("O0", &|o| o.opt_level = OptLevel::O0);
        with("Oz", &|o| o.opt_level = OptLevel::Oz);
        with("fast_math", &|o| o.fast_math = true);
        with("define", &|o| o.defines = vec![("A".into(), None)]);
        with("define =", &|o| {
            o.defines = vec![("A".into(), Some(String::new()))]
        });
        with("define split", &|o| o.defines = vec![("A1".into(), None)]);
        with("header", &|o| {
            o.headers = vec![("a.h".into(), String::new())]
        });
        with("include", &|o| o.include_dirs = vec!["/i".into()]);
        with("tracked include", &|o| {
            o.tracked_include_dirs = vec!["/i".into()]
        });
        with("line_info", &|o| o.line_info = true);
        with("verbose", &|o| o.verbose = true);
        with("flag", &|o| o.extra_flags = vec!["-g".into()]);
        with("two flags", &|o| {
            o.extra_flags = vec!["-".into(), "g".into()]
        });
        with("code object 0", &|o| o.code_object_version = Some(0));
        with("source name", &|o| o.source_name = Some(String::new()));
        with("llvm ir", &|o| o.dump_llvm_ir = true);
        with("isa", &|o| o.dump_isa = true);
        with("no spills", &|o| o.checks.no_spills = true);
        with("no scratch", &|o| o.checks.no_scratch = true);
        for (i, (a, x)) in cases.iter().enumerate() {
            // Options the name tells apart are options that differ, and the other way round.
            for (b, y) in &cases[i + 1..] {
                assert_ne!(x, y, "{a} and {b} are the same options");
                assert_ne!(
                    options_name_bytes(x),
                    options_name_bytes(y),
                    "{a} and {b} give the same bytes"
                );
            }
            assert_eq!(options_name_bytes(x), options_name_bytes(&x.clone()));
        }
    }

    #[test]
    fn config_bytes_tell_every_setting_apart_and_leave_the_worker_pool_out() {
        use crate::cache::disk::Root;
        use crate::compiler::rtc::worker::WorkerConfig;
        use crate::compiler::{CompilerChoice, CompilerConfig};
        let root = |path: &str| Root {
            path: PathBuf::from(path),
            writable: true,
            shared: false,
            group: None,
            closed: true,
        };
        struct Case {
            config: CompilerConfig,
            choice: CompilerChoice,
            from: &'static str,
            extra: Vec<u8>,
            versions: Option<Vec<u32>>,
            roots: Vec<Root>,
        }
        let base = || Case {
            config: CompilerConfig::default(),
            choice: CompilerChoice::Auto,
            from: "default",
            extra: Vec::new(),
            versions: None,
            roots: vec![root("/c")],
        };
        let bytes = |c: &Case| {
            config_bytes(
                &c.config,
                c.choice,
                c.from,
                &c.extra,
                c.versions.as_deref(),
                &c.roots,
            )
        };
        let mut cases: Vec<(&str, Case)> = vec![("base", base())];
        let mut with = |name: &'static str, f: &dyn Fn(&mut Case)| {
            let mut c = base();
            f(&mut c);
            cases.push((name, c));
        };
        with("hipcc", &|c| c.config.hipcc = Some("/a".into()));
        with("hipcc and nvcc", &|c| {
            c.config.hipcc = Some("/a".into());
            c.config.nvcc = Some("/b".into());
        });
        with("the same bytes split otherwise", &|c| {
            c.config.hipcc = Some("/a/".into());
            c.config.nvcc = Some("b".into());
        });
        with("nvcc", &|c| c.config.nvcc = Some("/a".into()));
        with("timeout", &|c| {
            c.config.timeout = Duration::from_millis(300_001)
        });
        with("max_concurrent", &|c| c.config.max_concurrent = 3);
        with("empty env", &|c| c.config.env = Some(Vec::new()));
        with("env", &|c| {
            c.config.env = Some(vec![("PATH".into(), "/bin".into())])
        });
        with("env split otherwise", &|c| {
            c.config.env = Some(vec![("PATH/".into(), "bin".into())])
        });
        with("identity_dir", &|c| {
            c.config.identity_dir = Some("/a".into())
        });
        with("worker", &|c| {
            c.config.rtc_worker = Some(WorkerConfig::default())
        });
        with("worker program", &|c| {
            c.config.rtc_worker = Some(WorkerConfig {
                program: Some("/w".into()),
                ..WorkerConfig::default()
            })
        });
        with("worker timeout", &|c| {
            c.config.rtc_worker = Some(WorkerConfig {
                timeout: Duration::from_secs(1),
                ..WorkerConfig::default()
            })
        });
        with("worker memory 0", &|c| {
            c.config.rtc_worker = Some(WorkerConfig {
                memory_limit: Some(0),
                ..WorkerConfig::default()
            })
        });
        with("choice", &|c| c.choice = CompilerChoice::Nvrtc);
        with("from", &|c| c.from = "HIPJIT_COMPILER");
        with("extra", &|c| c.extra = b"x".to_vec());
        with("no versions", &|c| c.versions = Some(Vec::new()));
        with("versions", &|c| c.versions = Some(vec![5]));
        with("another root", &|c| c.roots = vec![root("/d")]);
        with("two roots", &|c| c.roots = vec![root("/c"), root("/d")]);
        with("read-only", &|c| c.roots[0].writable = false);
        with("shared", &|c| c.roots[0].shared = true);
        with("group 0", &|c| c.roots[0].group = Some(0));
        with("not closed", &|c| c.roots[0].closed = false);
        let all: Vec<(&str, Vec<u8>)> = cases.iter().map(|(n, c)| (*n, bytes(c))).collect();
        for (i, (a, x)) in all.iter().enumerate() {
            for (b, y) in &all[i + 1..] {
                assert_ne!(x, y, "{a} and {b} give the same bytes");
            }
        }
        // The same settings give the same bytes, whatever their worker pools hold.
        let (mut one, mut two) = (base(), base());
        one.config.rtc_worker = Some(WorkerConfig::default());
        two.config.rtc_worker = Some(WorkerConfig::default());
        assert_eq!(bytes(&one), bytes(&two));
        one.config.env = Some(vec![("A".into(), "b".into())]);
        two.config.env = one.config.env.clone();
        assert_eq!(bytes(&one), bytes(&two));
    }

    #[test]
    fn pruning_keeps_the_newest_three_quarters() {
        let d = tempfile::tempdir().unwrap();
        for i in 0..8u64 {
            let p = d.path().join(format!("{i}.hit"));
            std::fs::write(&p, b"").unwrap();
            let t = SystemTime::UNIX_EPOCH + Duration::from_secs(1_000 + i);
            std::fs::File::options()
                .write(true)
                .open(&p)
                .unwrap()
                .set_modified(t)
                .unwrap();
        }
        std::fs::write(d.path().join("other"), b"").unwrap();
        prune(d.path(), 8);
        assert_eq!(std::fs::read_dir(d.path()).unwrap().count(), 9);
        prune(d.path(), 4);
        let mut left: Vec<String> = std::fs::read_dir(d.path())
            .unwrap()
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect();
        left.sort();
        assert_eq!(left, ["5.hit", "6.hit", "7.hit", "other"]);
    }
}
