//! What a compiler is, for the cache key: its kind, its version text with the lines that name
//! its installation directory removed, and a content fingerprint of a closed list of the files
//! that decide its output. One design for every backend ([`CompilerKind`]).
//!
//! # The closed file lists
//! * hipcc ([`CompilerKind::Hipcc`]): the hipcc program (resolved) and its siblings that make
//!   up the driver (`hipcc*`, `hipconfig*`, `hipvars.pm`, `.hipInfo`); the clang and lld that
//!   `hipcc -###` names; the `libLLVM` and `libclang-cpp` shared libraries of that clang's major
//!   version (in its `lib` directory and the multiarch library directories); every file in the
//!   device-library directory of the `-mlink-builtin-bitcode` files. No header directory: the
//!   HIP headers and clang's resource headers a compile reads are in its header manifest
//!   (`manifest`), like every other header, checked on each lookup.
//! * nvcc ([`CompilerKind::Nvcc`]): every file under the toolkit's `bin` and `nvvm`
//!   directories (the toolkit root being the directory above nvcc's `bin`). No header
//!   directory: the toolkit headers a compile reads are in its dependency list (`-MD -MF`),
//!   hence in its header manifest. Its host compiler has a fingerprint of its own
//!   ([`CompilerIdentity::host_compiler`], `host_compiler`), remembered
//!   with nvcc's identity: its files and the directories it was looked for in are checked
//!   by `stat` with the rest.
//!
//! Each file is hashed under its path below the installation root ([`CompilerIdentity::root`]),
//! with its content: the same installation copied under another prefix, or reached through
//! links, has the same fingerprint, and any file that differs makes another compiler. The root
//! is what `HIP_PATH` (else `ROCM_PATH`) selects for hipcc, or `CUDA_PATH` (else `CUDA_HOME`)
//! for nvcc, when the variable names a directory; else the deepest common directory of the
//! files. A listed file outside that root (hipcc's own program when `HIP_PATH` selects another
//! tree) is hashed under its path below the deepest common directory of such files, marked as
//! such.
//!
//! # The installation's headers
//! [`CompilerIdentity::header_dirs`] are the installation's header directories: for hipcc,
//! clang's resource directory's `include` (`-resource-dir` in `hipcc -###`), the `-isystem`
//! directories hipcc adds (but the system's `/usr/include` and `/usr/local/include`), and
//! `include/hip` and `include/hsa` below the root; for nvcc, the whole toolkit root. A header
//! read from one of them is recorded in the header manifest relative to the root
//! ([`CompilerIdentity::installation_name`]), as a `-I` header is relative to its directory,
//! and checked there by stat and hash on every lookup: a copy of the installation elsewhere
//! hits, and a header that differs in the copy misses.
//!
//! The directories whose every file is fingerprinted ([`CompilerIdentity::covered`]) are left
//! out of the header manifest (`manifest`): a header there would be covered by
//! the identity. Neither hipcc nor nvcc has one any more (their headers are in the manifest);
//! the field stays for identities remembered by other backends. Every file the compiler reads
//! (system C and C++ headers included) is in the manifest.

//! # Remembered per user
//! Hashing these files reads hundreds of MB (0.6-0.8 s measured), and `hipcc --version` costs
//! about 250 ms. The identity is therefore computed once and kept in a per-user directory
//! ([`identity_dir`]: `$XDG_CACHE_HOME/hipjit/compilers`, else `~/.cache/hipjit/compilers`,
//! never a shared cache root, where another member of the group could forge it), in a file
//! named after the kind, the compiler's path and the compiler's environment, holding the
//! identity and the stat fields (size, mtime, ctime, inode, device, mount identity:
//! [`FileStat`]) of what a fresh process checks:
//! * each *program* file (the closed list above: the compiler's binaries, libraries,
//!   configuration and device bitcode), so a program replaced in place or by a new file is
//!   seen;
//! * each directory holding a program, and each directory of a covered tree, so a file added,
//!   removed or renamed there is seen.
//!
//! A fresh process that finds every one of those unchanged (one `stat` each: about 70 for
//! Debian's hipcc 5.2.3, 60 of them device-library bitcode files; 17 for a PyPI CUDA toolkit,
//! where the check used to stat each of its 2,600 files) takes the identity from that file: it
//! neither hashes nor starts the compiler. Any difference recomputes it. "Unchanged" is the
//! stat-trust rule ([`FileStat::proves_same_as`], `stat`; the README's "What a
//! hit trusts"): equal fields on the same mount, known by an identity the kernel never gives
//! another mount, so that an installation image swapped for another at one path (`/opt/rocm`)
//! is identified again; where the kernel gives no such identity (before Linux 6.8), every
//! process identifies the compiler again. Headers are checked by
//! the header manifest of each lookup, which stats only the files that compile read.

use std::ffi::OsString;
use std::fmt;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::digest::Sha256;
use serde::{Deserialize, Serialize};

use super::host_compiler::{HostCompiler, HostCompilerError};
use crate::process;

pub use super::kind::CompilerKind;

/// What the compiler is (see the module documentation).
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct CompilerIdentity {
    /// The kind of compiler.
    pub kind: CompilerKind,
    /// The compiler with symlinks resolved (recorded, not hashed into keys).
    pub path: PathBuf,
    /// The full standard output of `<path> --version`.
    pub version: String,
    /// sha256 (64 hex digits) over the closed file list: each file's path below the files'
    /// deepest common directory (so that a copy of the installation elsewhere matches) and content
    /// sha256, in path order.
    pub fingerprint: String,
    /// Directories whose every file is in the fingerprint (headers there are not listed in
    /// header manifests).
    pub covered: Vec<PathBuf>,
    /// The installation root (absolute; see the module documentation): the files of the
    /// fingerprint, the installation's headers in header manifests, and the compiler's path
    /// variables in the cache key are named relative to it. Empty: none (an identity made by
    /// hand, or by a backend that lists no files).
    #[serde(default)]
    pub root: PathBuf,
    /// The installation's header directories (absolute, below [`CompilerIdentity::root`]); a
    /// header read from one is recorded relative to the root.
    #[serde(default)]
    pub header_dirs: Vec<PathBuf>,
    /// nvcc's host compiler (`host_compiler`); `None` for the other
    /// compilers.
    #[serde(default)]
    pub host_compiler: Option<HostCompiler>,
    /// The compiler's own include search list (as `-v` prints it: hipcc's from
    /// `-fsyntax-only -v -x hip`, for the host and the device; nvcc's host compiler's from
    /// `-E -v -x c++`; `/usr/local/include` before `/usr/include`...), absolute: the header manifest lists these
    /// directories as it lists `-I` directories, so that a header added to one searched before
    /// the one that held it is a miss (`crate::compiler::Backend::own_search_dirs`). Empty
    /// for the in-process compilers (their searches are hipjit's `-I` directories).
    #[serde(default)]
    pub system_include_dirs: Vec<PathBuf>,
}

impl CompilerIdentity {
    /// The version text as hashed into the key: [`CompilerIdentity::version`] without the lines
    /// that name the installation directory (clang's `InstalledDir:`), so that the same
    /// compiler installed elsewhere has the same identity.
    pub fn key_version(&self) -> String {
        self.version
            .lines()
            .filter(|l| !l.trim_start().starts_with("InstalledDir:"))
            .map(|l| format!("{l}\n"))
            .collect()
    }

    /// A one-line summary of the version, e.g. `HIP version: 5.2.21153-0, Debian clang
    /// version 15.0.6`.
    pub fn version_summary(&self) -> String {
        let lines: Vec<&str> = self
            .version
            .lines()
            .map(str::trim)
            .filter(|l| l.starts_with("HIP version") || l.contains("clang version"))
            .collect();
        if lines.is_empty() {
            self.version
                .lines()
                .map(str::trim)
                .rfind(|l| l.contains("release"))
                .or_else(|| self.version.lines().next())
                .unwrap_or("")
                .trim()
                .to_string()
        } else {
            lines.join(", ")
        }
    }

    /// The major version of the clang underneath, from the first `clang version N.` in the
    /// `--version` output (`Debian clang version 15.0.6` -> 15); `None` when there is none.
    pub fn clang_major(&self) -> Option<u32> {
        self.version.lines().find_map(|l| {
            let rest = &l[l.find("clang version ")? + "clang version ".len()..];
            rest.split('.').next()?.trim().parse::<u32>().ok()
        })
    }

    /// The name of `path` (absolute, as the compiler printed it) relative to the installation
    /// root, when it lies in one of the installation's header directories (compared
    /// lexically: the path the compiler printed, no link resolved); `None` otherwise.
    pub fn installation_name<'a>(&self, path: &'a Path) -> Option<&'a Path> {
        if self.root.as_os_str().is_empty() || !self.header_dirs.iter().any(|d| path.starts_with(d))
        {
            return None;
        }
        path.strip_prefix(&self.root).ok()
    }

    /// Whether `path` (absolute, as the compiler printed it) lies in a covered directory.
    /// Compared lexically first, then with symlinks resolved.
    pub fn covers(&self, path: &Path) -> bool {
        if self.covered.iter().any(|d| path.starts_with(d)) {
            return true;
        }
        match crate::fs::observe::canonicalize(path) {
            Ok(real) => self.covered.iter().any(|d| real.starts_with(d)),
            Err(_) => false,
        }
    }
}

impl fmt::Display for CompilerIdentity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ({})", self.path.display(), self.version_summary())
    }
}

/// Why an identity could not be computed.
#[derive(Debug, thiserror::Error)]
pub enum IdentityError {
    /// `<compiler> --version` (or `-###`) could not run or failed.
    #[error("`{} {args}` failed: {reason}", path.display())]
    Run {
        /// The compiler.
        path: PathBuf,
        /// The arguments.
        args: String,
        /// The exit status and stderr, or the spawn error.
        reason: String,
    },
    /// A listed file could not be read for hashing.
    #[error("cannot read {} to fingerprint the compiler: {source}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// The OS error.
        source: std::io::Error,
    },
    /// nvcc's host compiler could not be found or identified.
    #[error(transparent)]
    HostCompiler(#[from] HostCompilerError),
    /// hipcc's installation holds a path its shell would misparse: its own, a script beside it
    /// (`check_hipcc`, before `--version`) or a directory it
    /// derives (`check_hipcc_derived`, before its probes).
    #[error(transparent)]
    UnsafePath(#[from] crate::compiler::shell_env::UnsafeProgramPath),
}

/// The per-user directory where identities are remembered: `$XDG_CACHE_HOME/hipjit/compilers`
/// (when `XDG_CACHE_HOME` is an absolute path), else `$HOME/.cache/hipjit/compilers`; `None`
/// when neither is set.
pub fn identity_dir() -> Option<PathBuf> {
    if let Some(x) = std::env::var_os("XDG_CACHE_HOME").filter(|v| Path::new(v).is_absolute()) {
        return Some(Path::new(&x).join("hipjit").join(IDENTITY_DIR_NAME));
    }
    std::env::var_os("HOME")
        .filter(|v| Path::new(v).is_absolute())
        .map(|h| Path::new(&h).join(".cache/hipjit").join(IDENTITY_DIR_NAME))
}

/// The name of [`identity_dir`] in the default disk-cache root.
pub(crate) const IDENTITY_DIR_NAME: &str = "compilers";

thread_local! {
    /// Set inside [`memos_read_only`].
    static MEMOS_READ_ONLY: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Runs `f` with the per-user memos ([`identity_dir`]: compiler identities, in-process
/// compiler library searches) read as usual but never written on this thread, not even
/// their directory created: for tools that must write nothing, such as
/// [`crate::jit::Jit::explain`] (the default identity directory lies inside the default cache
/// root). An identity computed inside is computed again by the next process. Nests.
pub fn memos_read_only<T>(f: impl FnOnce() -> T) -> T {
    struct Restore(bool);
    impl Drop for Restore {
        fn drop(&mut self) {
            MEMOS_READ_ONLY.set(self.0);
        }
    }
    let _restore = Restore(MEMOS_READ_ONLY.replace(true));
    f()
}

/// The stat fields an identity file compares (see `stat` for when a recorded one
/// proves a file unchanged).
pub use crate::fs::stat::FileStat;

/// The format of remembered identities; 5: NVRTC's has header directories (the toolkit's
/// `include` and `include/cccl`) and no covered directory; 6: path bytes as MessagePack `bin`
/// ([`crate::fs::byte_strings`]); 7: nvcc's has its host compiler; 8: the system include
/// directories.
pub(crate) const MEMO_FORMAT: u32 = 8;

#[derive(Serialize, Deserialize)]
struct Memo {
    format: u32,
    identity: CompilerIdentity,
    /// (path bytes, stat) of every program file, every directory holding one, every directory
    /// of the covered trees, the compiler itself, and for nvcc its host compiler's files and
    /// the directories it was looked for in: what a fresh process checks.
    #[serde(with = "crate::fs::byte_strings::pairs")]
    stats: Vec<(Vec<u8>, FileStat)>,
}

/// The identity of the compiler at `path` of `kind`, run with `env`: from the per-user identity
/// file when every recorded file is unchanged, else computed (running `--version`, and for
/// hipcc `-###`, hashing the closed file list) and remembered. `dir` overrides
/// [`identity_dir`]; a directory that cannot be written only means nothing is remembered.
///
/// Errors: [`IdentityError::Run`] when `--version` fails, [`IdentityError::Read`] when a
/// listed file cannot be read.
pub fn identify(
    kind: CompilerKind,
    path: &Path,
    env: &[(String, OsString)],
    timeout: Duration,
    dir: Option<&Path>,
) -> Result<CompilerIdentity, IdentityError> {
    let resolved = crate::fs::observe::canonicalize(path).unwrap_or_else(|_| path.to_path_buf());
    let default_dir = identity_dir();
    let dir = dir.or(default_dir.as_deref());
    let memo_file = dir.map(|d| d.join(memo_name(kind, &resolved, env)));
    if let Some(id) = memo_file.as_deref().and_then(|f| read_memo(f, &resolved)) {
        match id.host_compiler.as_ref().filter(|h| h.script) {
            None => return Ok(id),
            // A script chooses what it runs by its text, which `stat` cannot follow: asked
            // for its macros again, and trusted only when they are the remembered ones. Not
            // recordable: the hit memo, which checks by `stat` alone, must not skip this.
            Some(host) => {
                crate::fs::observe::unrecordable();
                if super::host_compiler::macros_digest(&host.path, env, timeout)
                    .is_ok_and(|m| m == host.macros)
                {
                    return Ok(id);
                }
            }
        }
    }
    if kind == CompilerKind::Hipcc {
        crate::compiler::shell_env::check_hipcc(path)?;
    }
    let version = run_text(path, &["--version"], env, timeout)?;
    let mut watched: Vec<PathBuf> = Vec::new();
    let mut host_compiler = None;
    let mut system_include_dirs = Vec::new();
    let selected = |names: &[&str]| {
        names.iter().find_map(|n| {
            env.iter()
                .find(|(k, _)| k == n)
                .map(|(_, v)| PathBuf::from(v))
                .filter(|p| p.is_absolute() && p.is_dir())
        })
    };
    let (mut files, covered, header_dirs, root) = match kind {
        CompilerKind::Hipcc => {
            crate::compiler::shell_env::check_hipcc_derived(path, &version, env)?;
            let (files, covered, headers) = hipcc_files(path, &resolved, &version, env, timeout);
            // Its include search list, as clang prints it for the host and the device (a
            // target named, so that hipcc does not look for the machine's GPUs; no output, so
            // that nothing is bundled).
            let (_, verbose) = run_in(
                path,
                &[
                    "-fsyntax-only",
                    "-v",
                    "-x",
                    "hip",
                    "--offload-arch=gfx90a",
                    "/dev/null",
                ],
                env,
                timeout,
                // A private run directory, not hipjit's working directory: hipcc 7 reads
                // `<cwd>/../lib/bitcode` (see [`crate::compiler::RunDir`]).
                super::RunDir::new(super::IDENTITY_PREFIX, &super::build_base())
                    .ok()
                    .as_ref()
                    .map(super::RunDir::path),
            )?;
            // The clang resource directory's parent, which HIP's clang searches as
            // `.../15.0.6/include/..`, is a header directory of the installation: named below
            // its root, so that a copy of the installation elsewhere records the same name.
            let parents: Vec<PathBuf> = verbose
                .lines()
                .map(str::trim)
                .filter(|l| l.starts_with('/') && l.ends_with("/include/.."))
                .filter_map(|l| crate::fs::observe::canonicalize(Path::new(l)).ok())
                .collect();
            let mut headers = headers;
            for p in parents {
                if !headers.contains(&p) {
                    headers.push(p);
                }
            }
            system_include_dirs = super::host_compiler::include_search_list(&verbose);
            (
                files,
                covered,
                headers,
                selected(&["HIP_PATH", "ROCM_PATH"]),
            )
        }
        CompilerKind::Nvcc => {
            let found = super::host_compiler::locate(env, &resolved)?;
            let (host, host_files, host_includes) =
                super::host_compiler::identify(&found, env, timeout)?;
            watched.extend(found.watched);
            watched.extend(host_files);
            system_include_dirs = host_includes;
            host_compiler = Some(host);
            let (files, covered) = nvcc_files(&resolved);
            let toolkit = resolved
                .parent()
                .and_then(Path::parent)
                .map(Path::to_path_buf);
            (
                files,
                covered,
                toolkit.into_iter().collect(),
                selected(&["CUDA_PATH", "CUDA_HOME"]),
            )
        }
        // The in-process compilers list their files themselves: [`identify_library`].
        _ => (vec![resolved.clone()], Vec::new(), Vec::new(), None),
    };
    // hipcc reads these below HIP_PATH when it is set (its version and platform settings).
    if let (CompilerKind::Hipcc, Some(r)) = (kind, &root) {
        for f in ["bin/.hipVersion", "lib/.hipInfo", "share/hip/.hipInfo"] {
            if r.join(f).is_file() {
                files.push(r.join(f));
            }
        }
    }
    let installation = Installation {
        root,
        header_dirs,
        header_subdirs: if kind == CompilerKind::Hipcc {
            &["include/hip", "include/hsa"]
        } else {
            &[]
        },
        watched,
        host_compiler,
        system_include_dirs,
    };
    fingerprint(
        kind,
        &resolved,
        version,
        files,
        covered,
        installation,
        memo_file.as_deref(),
    )
}

/// What [`fingerprint`] is told of the installation: its root when a variable selects it, its
/// header directories, the header directories below the root whatever it is, the files and
/// directories checked by `stat` beside the programs without being hashed into the
/// fingerprint (nvcc's host compiler's, hashed into its own), and nvcc's host compiler.
#[derive(Default)]
struct Installation {
    root: Option<PathBuf>,
    header_dirs: Vec<PathBuf>,
    header_subdirs: &'static [&'static str],
    watched: Vec<PathBuf>,
    host_compiler: Option<HostCompiler>,
    system_include_dirs: Vec<PathBuf>,
}

/// The identity of an in-process compiler (hipRTC, NVRTC): `kind`, the library file
/// `library`, a version text `version` (the library's own answer names no build: hipRTC 5.2.3
/// and 6.4.3 both say 9.0), and the content fingerprint of `files()`, the closed list of files
/// that decide its output ([`crate::compiler::hiprtc::HipRtc::identity_files`],
/// [`crate::compiler::nvrtc::NvRtc::identity_files`]). `header_dirs` are the installation's
/// header directories (absolute, symlinks resolved; the CUDA toolkit's `include` beside NVRTC):
/// the parent of the first is the installation root ([`CompilerIdentity::root`]), and a header
/// read from one is recorded in header manifests relative to it, as hipcc's and nvcc's are.
/// Remembered in `dir` (else
/// [`identity_dir`]) as the process compilers' are: a fresh process that finds every listed
/// file unchanged by `stat` neither calls `files` (which may compile a probe to learn what the
/// library loads) nor hashes anything.
///
/// Errors: [`IdentityError::Read`] when a listed file cannot be read.
pub fn identify_library(
    kind: CompilerKind,
    library: &Path,
    version: String,
    files: impl FnOnce() -> Vec<PathBuf>,
    header_dirs: Vec<PathBuf>,
    dir: Option<&Path>,
) -> Result<CompilerIdentity, IdentityError> {
    let resolved =
        crate::fs::observe::canonicalize(library).unwrap_or_else(|_| library.to_path_buf());
    let default_dir = identity_dir();
    let dir = dir.or(default_dir.as_deref());
    let memo_file = dir.map(|d| d.join(library_memo_name(kind, &resolved, library)));
    if let Some(id) = memo_file.as_deref().and_then(|f| read_memo(f, &resolved)) {
        if id.version == version && id.covered.is_empty() && id.header_dirs == header_dirs {
            return Ok(id);
        }
    }
    let mut listed = files();
    listed.push(resolved.clone());
    let installation = Installation {
        root: header_dirs
            .first()
            .and_then(|d| d.parent())
            .map(Path::to_path_buf),
        header_dirs,
        header_subdirs: &[],
        ..Installation::default()
    };
    fingerprint(
        kind,
        &resolved,
        version,
        listed,
        Vec::new(),
        installation,
        memo_file.as_deref(),
    )
}

/// Hashes `files` and every file under `covered` into an identity, each named below the
/// installation's root (else the files' deepest common directory), and remembers it in
/// `memo_file` with the stat of each.
fn fingerprint(
    kind: CompilerKind,
    resolved: &Path,
    version: String,
    files: Vec<PathBuf>,
    covered: Vec<PathBuf>,
    installation: Installation,
    memo_file: Option<&Path>,
) -> Result<CompilerIdentity, IdentityError> {
    // Computed, not recalled: what it read is not recorded by `stat` alone.
    crate::fs::observe::unrecordable();
    let mut programs: Vec<PathBuf> = files;
    programs.sort();
    programs.dedup();
    let mut all: Vec<PathBuf> = programs.clone();
    let mut dirs: Vec<PathBuf> = programs
        .iter()
        .filter_map(|p| p.parent().map(Path::to_path_buf))
        .collect();
    for d in &covered {
        walk(d, &mut all, &mut dirs);
    }
    all.sort();
    all.dedup();
    dirs.extend(installation.watched.iter().cloned());
    dirs.sort();
    dirs.dedup();
    // What a fresh process checks: the programs one by one and the directories (a file added,
    // removed or renamed changes its directory), not each file of a covered tree. Read before
    // hashing, so that a file changed meanwhile differs from its
    // recorded stat at the next check.
    let stats: Vec<(Vec<u8>, FileStat)> = programs
        .iter()
        .chain(&dirs)
        .filter_map(|p| Some((p.as_os_str().as_bytes().to_vec(), FileStat::read(p)?)))
        .collect();
    // Each file by its name below the installation root: the same installation copied under
    // another prefix (or reached through links) has the same fingerprint. Files outside the
    // root (hipcc's own program when HIP_PATH selects another tree) by their name below their
    // own deepest common directory, marked apart.
    let root = installation.root.unwrap_or_else(|| common_directory(&all));
    let mut header_dirs = installation.header_dirs;
    for sub in installation.header_subdirs {
        let d = root.join(sub);
        if !header_dirs.contains(&d) {
            header_dirs.push(d);
        }
    }
    let outside: Vec<PathBuf> = all
        .iter()
        .filter(|f| !f.starts_with(&root))
        .cloned()
        .collect();
    let outside_prefix = common_directory(&outside);
    let mut fp = Sha256::new();
    for f in &all {
        let digest = hash_file(f).map_err(|source| IdentityError::Read {
            path: f.clone(),
            source,
        })?;
        let (mark, rel) = match f.strip_prefix(&root) {
            Ok(rel) => (b'r', rel),
            Err(_) => (b'o', f.strip_prefix(&outside_prefix).unwrap_or(f)),
        };
        fp.update([mark]);
        fp.update((rel.as_os_str().len() as u64).to_le_bytes());
        fp.update(rel.as_os_str().as_bytes());
        fp.update(digest);
    }
    let identity = CompilerIdentity {
        kind,
        path: resolved.to_path_buf(),
        version,
        fingerprint: crate::digest::hex(&fp.finish()),
        covered,
        root,
        header_dirs,
        host_compiler: installation.host_compiler,
        system_include_dirs: installation.system_include_dirs,
    };
    if let Some(file) = memo_file {
        write_memo(file, &identity, stats);
    }
    Ok(identity)
}

/// The name of the memo of an in-process compiler's identity: by the library's file (symlinks
/// resolved) and the path it was found at, whose neighbourhood decides its header directories
/// (a toolkit of links to another toolkit's NVRTC has headers of its own).
pub(crate) fn library_memo_name(kind: CompilerKind, resolved: &Path, library: &Path) -> String {
    // The files an in-process compiler loads later (NVRTC's builtins, hipRTC's comgr) are
    // found by the dynamic loader, `LD_LIBRARY_PATH` first: another value, another identity.
    memo_name(
        kind,
        resolved,
        &[
            ("library".to_owned(), library.as_os_str().to_owned()),
            (
                "LD_LIBRARY_PATH".to_owned(),
                std::env::var_os("LD_LIBRARY_PATH").unwrap_or_else(|| "\0unset".into()),
            ),
        ],
    )
}

pub(crate) fn memo_name(kind: CompilerKind, resolved: &Path, env: &[(String, OsString)]) -> String {
    let mut r = crate::digest::Record::new();
    r.bytes(&MEMO_FORMAT.to_le_bytes());
    r.bytes(kind.as_str().as_bytes());
    r.bytes(resolved.as_os_str().as_bytes());
    let mut env: Vec<&(String, OsString)> = env.iter().collect();
    env.sort();
    for (k, v) in env {
        r.bytes(k.as_bytes());
        r.bytes(v.as_bytes());
    }
    format!(
        "{}-{}.id",
        kind.as_str(),
        &crate::digest::hex(&r.finish())[..32]
    )
}

/// The bytes of `file` when it is a regular file of this user that nobody else can write (a
/// memo another user could have forged is ignored), at most 64 MiB.
///
/// Opened without following a link and without blocking, then judged by one `fstat` of the
/// open descriptor (so what is judged is what is read, with no race against a rename) and read
/// in one `read` of the size it gave: memos are written whole and renamed into place, never
/// written in place, and each is decoded and checked against the files it names, so bytes
/// appended after the `fstat` are not read.
pub(crate) fn read_private(file: &Path) -> Option<Vec<u8>> {
    let (f, m) =
        crate::fs::read::open_regular_nofollow_stat(file, 64 << 20, "a remembered identity")
            .ok()?;
    if m.uid != crate::fs::user::uid() || m.mode & 0o022 != 0 {
        return None;
    }
    crate::fs::read::read_known_size(&f, file, m.len()).ok()
}

/// The identity remembered in `file` for the compiler at `resolved`, when every file it
/// recorded is unchanged by `stat`.
pub(crate) fn read_memo(file: &Path, resolved: &Path) -> Option<CompilerIdentity> {
    memo_identity(&read_private(file)?, resolved)
}

/// The identity in the memo `bytes` (a memo file's contents, read by [`read_private`]) for the
/// compiler at `resolved`, when every file it recorded is unchanged by `stat`.
pub(crate) fn memo_identity(bytes: &[u8], resolved: &Path) -> Option<CompilerIdentity> {
    let memo: Memo = rmp_serde::from_slice(bytes).ok()?;
    if memo.format != MEMO_FORMAT || memo.identity.path != resolved || memo.stats.is_empty() {
        return None;
    }
    // A directory at a time: the programs and the covered trees' directories share a few
    // parents.
    let mut by_dir = crate::fs::stat::StatByDir::new();
    // The stat-trust rule ([`FileStat::proves_same_as`]): a record without a mount identity
    // (an older kernel, or a memo written before hipjit recorded one) proves nothing, and the
    // identity is made again.
    let unchanged = memo.stats.iter().all(|(p, s)| {
        by_dir
            .stat(Path::new(std::ffi::OsStr::from_bytes(p)))
            .is_some_and(|st| s.proves_same_as(&st.fields))
    });
    unchanged.then_some(memo.identity)
}

fn write_memo(file: &Path, identity: &CompilerIdentity, stats: Vec<(Vec<u8>, FileStat)>) {
    let memo = Memo {
        format: MEMO_FORMAT,
        identity: identity.clone(),
        stats,
    };
    write_private(file, &memo);
}

/// Writes `value` (MessagePack) to `file` in a directory of mode 0700, by an atomic rename of a
/// synced temporary file; a failure only means nothing is remembered (logged at debug level).
pub(crate) fn write_private(file: &Path, value: &impl Serialize) {
    write_private_as(file, value, true)
}

/// [`write_private`], the temporary file synced before the rename only when `sync`: a memo
/// that is only a shortcut (one lost or torn by a crash reads as absent or undecodable, and
/// the long way is taken) need not wait for the disk.
pub(crate) fn write_private_as(file: &Path, value: &impl Serialize, sync: bool) {
    match rmp_serde::to_vec(value) {
        Ok(bytes) => write_private_bytes(file, &bytes, sync),
        Err(e) => tracing::debug!(path = %file.display(), error = %e, "not remembered"),
    }
}

/// [`write_private_as`] of bytes already encoded.
pub(crate) fn write_private_bytes(file: &Path, bytes: &[u8], sync: bool) {
    if MEMOS_READ_ONLY.get() {
        tracing::debug!(path = %file.display(), "memos are read-only here: not remembered");
        return;
    }
    let Some(dir) = file.parent() else { return };
    let written = (|| -> std::io::Result<()> {
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)?;
        let mut tmp = tempfile::Builder::new().prefix(".tmp-").tempfile_in(dir)?;
        std::io::Write::write_all(&mut tmp, bytes)?;
        if sync {
            tmp.as_file().sync_all()?;
        }
        tmp.persist(file).map(drop).map_err(|e| e.error)
    })();
    if let Err(e) = written {
        tracing::debug!(path = %file.display(), error = %e, "not remembered");
    }
}

fn run_text(
    path: &Path,
    args: &[&str],
    env: &[(String, OsString)],
    timeout: Duration,
) -> Result<String, IdentityError> {
    run_in(path, args, env, timeout, None).map(|(out, _)| out)
}

fn run_in(
    path: &Path,
    args: &[&str],
    env: &[(String, OsString)],
    timeout: Duration,
    cwd: Option<&Path>,
) -> Result<(String, String), IdentityError> {
    process::query(path, args, env, timeout, cwd).map_err(|reason| IdentityError::Run {
        path: path.to_path_buf(),
        args: args.join(" "),
        reason,
    })
}

pub use crate::fs::stat::hash_file;

/// Every regular file (into `files`) and directory (into `dirs`) under `dir`, symlinks
/// followed to files but not to directories; bounded at 100,000 entries.
fn walk(dir: &Path, files: &mut Vec<PathBuf>, dirs: &mut Vec<PathBuf>) {
    let mut work = vec![dir.to_path_buf()];
    let mut seen = 0usize;
    while let Some(d) = work.pop() {
        dirs.push(d.clone());
        let Ok(rd) = crate::fs::observe::read_dir(&d) else {
            continue;
        };
        for e in rd.flatten() {
            seen += 1;
            if seen > 100_000 {
                return;
            }
            let p = e.path();
            match e.file_type() {
                Ok(t) if t.is_dir() => work.push(p),
                Ok(t) if t.is_file() => files.push(p),
                Ok(t) if t.is_symlink() && p.is_file() => files.push(p),
                _ => {}
            }
        }
    }
}

/// The system's own header directories, never the installation's even below its root.
const SYSTEM_INCLUDE_DIRS: &[&str] = &["/usr/include", "/usr/local/include", "/include"];

/// The hipcc file list, covered directories and the installation's header directories from
/// `hipcc -###` (see the module documentation).
fn hipcc_files(
    path: &Path,
    resolved: &Path,
    version: &str,
    env: &[(String, OsString)],
    timeout: Duration,
) -> (Vec<PathBuf>, Vec<PathBuf>, Vec<PathBuf>) {
    let mut files = vec![resolved.to_path_buf()];
    if let Some(bin) = resolved.parent() {
        for e in crate::fs::observe::read_dir(bin)
            .into_iter()
            .flatten()
            .flatten()
        {
            let n = e.file_name();
            let n = n.to_string_lossy();
            if n.starts_with("hipcc") || n.starts_with("hipconfig") || n == "hipvars.pm" {
                files.push(e.path());
            }
        }
        if let Some(root) = bin.parent() {
            for info in [root.join("share/hip/.hipInfo"), root.join("lib/.hipInfo")] {
                if info.is_file() {
                    files.push(info);
                }
            }
        }
    }
    // No covered header tree: the HIP headers and clang's resource headers a compile reads are
    // in its dependency list, hence in its header manifest.
    let covered = Vec::new();
    let mut bitcode_dirs: Vec<PathBuf> = Vec::new();
    // What clang runs with: `-###` prints the commands without running them.
    // In a private run directory: hipcc 7 reads `<cwd>/../lib/bitcode` (see
    // [`crate::compiler::RunDir`]).
    let probe = super::RunDir::new(super::IDENTITY_PREFIX, &super::build_base()).ok();
    let listing = probe.as_ref().and_then(|d| {
        std::fs::write(d.path().join("probe.hip"), "").ok()?;
        let (out, err) = run_in(
            path,
            &[
                "-###",
                "-x",
                "hip",
                "--genco",
                "--offload-arch=gfx90a",
                "--no-gpu-bundle-output",
                "probe.hip",
                "-o",
                "probe.o",
            ],
            env,
            timeout,
            Some(d.path()),
        )
        .ok()?;
        Some(format!("{out}\n{err}"))
    });
    let words: Vec<String> = listing
        .as_deref()
        .map(|t| {
            t.split_whitespace()
                .map(|w| w.trim_matches('"').to_string())
                .collect()
        })
        .unwrap_or_default();
    let canon = |p: &str| crate::fs::observe::canonicalize(p).ok();
    let mut clang: Option<PathBuf> = None;
    let mut header_dirs: Vec<PathBuf> = Vec::new();
    for (i, w) in words.iter().enumerate() {
        let next = words.get(i + 1).map(String::as_str).unwrap_or("");
        let base = Path::new(w)
            .file_name()
            .map(|n| n.to_string_lossy().into_owned());
        let plain = |p: &Path| {
            p.is_absolute()
                && !p
                    .components()
                    .any(|c| matches!(c, std::path::Component::ParentDir))
        };
        match w.as_str() {
            "-resource-dir" if plain(Path::new(next)) => {
                header_dirs.push(Path::new(next).join("include"));
            }
            // hipcc's own (HIP_PATH/include, HSA's); the system's C and C++ headers stay
            // absolute (they are not part of a copy of the installation).
            "-isystem" if plain(Path::new(next)) && !SYSTEM_INCLUDE_DIRS.contains(&next) => {
                header_dirs.push(PathBuf::from(next));
            }
            // The device libraries clang links: every file of their directory is a program
            // file (they are not in the dependency list).
            "-mlink-builtin-bitcode" => {
                if let Some(d) = canon(next).and_then(|p| p.parent().map(Path::to_path_buf)) {
                    if !bitcode_dirs.contains(&d) {
                        walk(&d, &mut files, &mut Vec::new());
                        bitcode_dirs.push(d);
                    }
                }
            }
            _ if w.starts_with('/')
                && (base.as_deref() == Some("lld") || base.as_deref() == Some("ld.lld")) =>
            {
                if let Some(p) = canon(w) {
                    files.push(p);
                }
            }
            _ if w.starts_with('/')
                && base.as_deref().is_some_and(|b| b.starts_with("clang"))
                && clang.is_none() =>
            {
                if let Some(p) = canon(w).filter(|p| p.is_file()) {
                    files.push(p.clone());
                    clang = Some(p);
                }
            }
            _ => {}
        }
    }
    // libLLVM and libclang-cpp of clang's major version: beside clang's installation (its
    // `lib`, and the multiarch directory of the tree holding it, as Debian lays LLVM out
    // under /usr/lib/llvm-N), else the system's multiarch directories.
    let major = version.lines().find_map(|l| {
        let rest = &l[l.find("clang version ")? + "clang version ".len()..];
        rest.split('.').next()?.trim().parse::<u32>().ok()
    });
    if let (Some(clang), Some(major)) = (&clang, major) {
        let llvm = clang.parent().and_then(Path::parent);
        let triple = version
            .lines()
            .find_map(|l| l.strip_prefix("Target: "))
            .and_then(|t| t.trim().split('-').next())
            .map(|arch| format!("{arch}-linux-gnu"));
        let mut own: Vec<PathBuf> = llvm.map(|l| vec![l.join("lib")]).unwrap_or_default();
        let mut system: Vec<PathBuf> = Vec::new();
        if let Some(t) = &triple {
            own.extend(llvm.and_then(Path::parent).map(|tree| tree.join(t)));
            system.push(Path::new("/usr/lib").join(t));
            system.push(Path::new("/lib").join(t));
        }
        let names = [
            format!("libLLVM-{major}.so"),
            format!("libLLVM.so.{major}"),
            format!("libclang-cpp.so.{major}"),
        ];
        let found = |dirs: &[PathBuf], files: &mut Vec<PathBuf>| {
            let mut any = false;
            for d in dirs {
                for e in crate::fs::observe::read_dir(d)
                    .into_iter()
                    .flatten()
                    .flatten()
                {
                    let n = e.file_name();
                    let n = n.to_string_lossy();
                    if names.iter().any(|p| n.starts_with(p.as_str())) {
                        if let Ok(p) = crate::fs::observe::canonicalize(e.path()) {
                            files.push(p);
                            any = true;
                        }
                    }
                }
            }
            any
        };
        if !found(&own, &mut files) {
            found(&system, &mut files);
        }
    }
    (files, covered, header_dirs)
}

/// The deepest directory holding every one of `files` (absolute paths): `/` when they share
/// nothing else; the directory of a lone file.
fn common_directory(files: &[PathBuf]) -> PathBuf {
    let mut dirs = files.iter().filter_map(|f| f.parent());
    let Some(first) = dirs.next() else {
        return PathBuf::from("/");
    };
    let mut common: Vec<_> = first.components().collect();
    for d in dirs {
        let n = common
            .iter()
            .zip(d.components())
            .take_while(|(a, b)| **a == *b)
            .count();
        common.truncate(n);
    }
    let out: PathBuf = common.iter().collect();
    if out.as_os_str().is_empty() {
        PathBuf::from("/")
    } else {
        out
    }
}

/// The nvcc program files (every file under the toolkit's `bin` and `nvvm`, nvcc itself
/// included); no covered directory.
fn nvcc_files(resolved: &Path) -> (Vec<PathBuf>, Vec<PathBuf>) {
    let mut files = vec![resolved.to_path_buf()];
    if let Some(root) = resolved.parent().and_then(Path::parent) {
        for d in ["bin", "nvvm"] {
            let d = root.join(d);
            if d.is_dir() {
                walk(&d, &mut files, &mut Vec::new());
            }
        }
    }
    (files, Vec::new())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_remembered_identity_whose_stats_have_no_mount_identity_is_not_recalled() {
        let d = tempfile::tempdir().unwrap();
        let program = d.path().join("clang");
        std::fs::write(&program, b"program").unwrap();
        let memo = |stat: FileStat| {
            rmp_serde::to_vec(&Memo {
                format: MEMO_FORMAT,
                identity: CompilerIdentity {
                    path: program.clone(),
                    ..id("HIP version: 5.2.3")
                },
                stats: vec![(program.as_os_str().as_bytes().to_vec(), stat)],
            })
            .unwrap()
        };
        let now = FileStat::read(&program).unwrap();
        assert!(memo_identity(&memo(now), &program).is_some());
        // The same fields, no mount identity: the identity is made again.
        assert!(memo_identity(&memo(now.without_mount_identity()), &program).is_none());
    }

    fn id(version: &str) -> CompilerIdentity {
        CompilerIdentity {
            kind: CompilerKind::Hipcc,
            path: "/usr/bin/hipcc".into(),
            version: version.into(),
            fingerprint: String::new(),
            covered: Vec::new(),
            root: PathBuf::new(),
            header_dirs: Vec::new(),
            host_compiler: None,
            system_include_dirs: Vec::new(),
        }
    }

    #[test]
    fn version_summary_picks_hip_and_clang_lines() {
        let id = id("HIP version: 5.2.21153-0\nDebian clang version 15.0.6\nTarget: x\n");
        assert_eq!(
            id.version_summary(),
            "HIP version: 5.2.21153-0, Debian clang version 15.0.6"
        );
    }

    #[test]
    fn key_version_drops_the_installed_dir_line_only() {
        let a = id("HIP version: 5.2\nclang version 15\nInstalledDir: /usr/bin\n");
        let b = id("HIP version: 5.2\nclang version 15\nInstalledDir: /opt/rocm/llvm/bin\n");
        assert_eq!(a.key_version(), b.key_version());
        assert_eq!(a.key_version(), "HIP version: 5.2\nclang version 15\n");
    }
}
