//! nvcc's host compiler: which program nvcc would run, and what it is, for nvcc's identity
//! ([`crate::compiler::identity`]) and so for the cache key.
//!
//! nvcc preprocesses device code with a host C++ compiler (`gcc -E -x c++ ...`) and tells its
//! front end that compiler's version (`cicc --gnu_version=...`), so the host compiler's
//! predefined macros and version reach the cubin: two host compilers, or one changed in place,
//! can compile one source to different cubins. Its headers are in nvcc's dependency list (so
//! in the header manifest); the program itself is keyed here, by content.
//!
//! # Which program
//! As nvcc finds it (measured with CUDA 13's `nvcc -dryrun`): `NVCC_CCBIN` when set, naming
//! the program (`/usr/bin/g++-12`), a directory (its `gcc`), or a bare name looked up as
//! below; else `gcc` looked up in the toolkit's `nvvm/bin`, then nvcc's own directory (which
//! nvcc's `nvcc.profile` puts first on `PATH`), then each absolute directory of `PATH`.
//! `-ccbin` is not taken from the caller's flags (refused,
//! `flags`), nor from `NVCC_PREPEND_FLAGS`/`NVCC_APPEND_FLAGS`
//! ([`crate::compiler::nvcc::NvccError::HostCompilerFlag`]). A relative `NVCC_CCBIN` path is
//! taken from the working directory, made absolute before anything is remembered.
//!
//! hipjit then hands nvcc that program explicitly (`-ccbin <path>`), so what runs is what was
//! keyed even if `PATH` changes later in the process: by its absolute path when every byte of
//! it is one nvcc's shell reads as it is (nvcc runs its steps through a shell), else through a
//! link in the build directory (`host/<name>`, the program's `argv[0]` then). nvcc and the host
//! compiler run with a cleared environment but for the variables of
//! [`crate::compiler::nvcc::nvcc_run_env`]: gcc's `COMPILER_PATH` and `GCC_EXEC_PREFIX`, which
//! would choose other compilers, do not reach it; the header path variables it reads (`CPATH`,
//! `CPLUS_INCLUDE_PATH`, `C_INCLUDE_PATH`) and `LD_LIBRARY_PATH` are keyed by text.
//!
//! # What it is
//! [`HostCompiler::fingerprint`]: sha256 over the program's file name (a wrapper such as
//! ccache, or clang against clang++, decides by it), the program's content (links resolved),
//! the content of the compilers it names for `-print-prog-name=cc1plus` and
//! `-print-prog-name=cc1` when those are absolute paths of files (gcc's; clang names none),
//! and its predefined macros for C++ (`-dM -E -x c++ /dev/null`), which also cover a wrapper
//! that adds `-D` flags or runs another compiler. Computed with nvcc's identity and remembered
//! with it: a fresh process checks by `stat` the program (as found and resolved), the
//! compilers it named and their directories, its library directory
//! (`-print-libgcc-file-name`'s) and every directory of its `-print-search-dirs` `programs:`
//! and `libraries:` lists (where gcc looks for its compilers and `specs` files, which can
//! define macros), the resolved program's directory (clang reads a `<target>.cfg` there),
//! every directory of the search and the program of that name in each, through its links (a
//! wrapper such as ccache runs the next one on `PATH`; `update-alternatives` retargets a
//! link), and for a directory that does not exist, what changes when it is created (its
//! nearest existing ancestor; through a dangling link, the link's directory and its
//! target's). The shared libraries the host compiler and nvcc's stages load (the system's,
//! the toolkit's `lib`, those of `LD_LIBRARY_PATH`, which is keyed by text) are not
//! fingerprinted: a library that changes what the compiler does (code put into it) is not
//! seen.
//!
//! Its include search list (`-E -v -x c++ /dev/null`: `/usr/local/include` before
//! `/usr/include`...) is kept in nvcc's identity
//! ([`crate::compiler::CompilerIdentity::system_include_dirs`]): the header manifest lists
//! those directories, with the toolkit's `include` and `include/cccl` and the `CPATH`
//! directories, as it lists `-I` directories, so that a header added to one searched before
//! the one that held it is a miss. A *script* (`#!`) chooses what it
//! runs by its text, which `stat` cannot follow: each process that takes the remembered
//! identity asks it for its macros again (one run of it) and recomputes the identity when they
//! differ, and no hit memo is written for it. Not seen: a compiled wrapper (not a script)
//! that picks the compiler it runs by something other than the files above (an environment
//! variable, a configuration file of its own).

use std::ffi::OsString;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::digest::Sha256;
use serde::{Deserialize, Serialize};

use crate::process;

/// The environment variable that names nvcc's host compiler (nvcc's own).
pub const HOST_COMPILER_ENV: &str = "NVCC_CCBIN";

/// The host compiler nvcc looks for when nothing names one (Linux).
pub const DEFAULT_HOST_COMPILER: &str = "gcc";

/// What nvcc's host compiler is (see the module documentation).
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct HostCompiler {
    /// The program as found (absolute; links not resolved): what nvcc is given.
    pub path: PathBuf,
    /// The first line of its `--version` output (recorded, not hashed into keys: the
    /// fingerprint covers it).
    pub version: String,
    /// sha256 (64 hex digits) of its file name, contents, the compilers it names, and its
    /// predefined macros (see the module documentation).
    pub fingerprint: String,
    /// Whether the program is a script (`#!`): what it runs is chosen by its text, which `stat`
    /// cannot follow, so a process that takes the remembered identity asks it for its macros
    /// again ([`HostCompiler::macros`]) and recomputes the identity when they differ.
    #[serde(default)]
    pub script: bool,
    /// sha256 (64 hex digits) of its predefined macros for C++ (`-dM -E -x c++ /dev/null`).
    #[serde(default)]
    pub macros: String,
}

impl HostCompiler {
    /// The program's file name (`gcc`, `g++-12`), as nvcc is given it.
    pub fn name(&self) -> String {
        self.path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default()
    }
}

/// Why nvcc's host compiler could not be found or identified.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum HostCompilerError {
    /// No executable of that name in the directories nvcc looks in.
    #[error(
        "nvcc's host compiler `{name}` was not found (looked in: {}); install gcc or name \
         the host compiler with NVCC_CCBIN",
        searched.iter().map(|d| d.display().to_string()).collect::<Vec<_>>().join(", ")
    )]
    NotFound {
        /// The program's name.
        name: String,
        /// The directories looked in, in order.
        searched: Vec<PathBuf>,
    },
    /// `NVCC_CCBIN` names something that is not an executable file (nor a directory holding
    /// `gcc`).
    #[error("NVCC_CCBIN={} is not an executable file: {reason}", path.display())]
    NotExecutable {
        /// The path it names (with `gcc` added when it named a directory).
        path: PathBuf,
        /// What is wrong.
        reason: String,
    },
    /// The program's file name holds a character other than ASCII letters, digits, `.`, `_`,
    /// `+` and `-`: nvcc runs its steps through a shell, which could misparse it.
    #[error(
        "nvcc's host compiler {} has a file name nvcc's shell could misparse; name it through \
         a link whose name is letters, digits, `.`, `_`, `+` and `-` only (NVCC_CCBIN)",
        path.display()
    )]
    UnsafeName {
        /// The program.
        path: PathBuf,
    },
    /// The host compiler failed where it must answer (`--version`, `-dM -E`).
    #[error("`{} {args}` (nvcc's host compiler) failed: {reason}", path.display())]
    Run {
        /// The program.
        path: PathBuf,
        /// The arguments.
        args: String,
        /// The exit status and stderr, or why it could not run.
        reason: String,
    },
    /// A file of the host compiler could not be read for hashing.
    #[error("cannot read {} to fingerprint nvcc's host compiler: {source}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// The OS error.
        source: std::io::Error,
    },
}

/// The host compiler found: the program and the directories whose change could make another
/// one found.
#[derive(Debug)]
pub(crate) struct Located {
    pub(crate) path: PathBuf,
    pub(crate) watched: Vec<PathBuf>,
}

/// The value of `name` in `env`.
fn var<'a>(env: &'a [(String, OsString)], name: &str) -> Option<&'a OsString> {
    env.iter()
        .find(|(k, _)| k == name)
        .map(|(_, v)| v)
        .filter(|v| !v.is_empty())
}

fn executable(path: &Path) -> Result<(), String> {
    match crate::fs::observe::metadata(path) {
        Ok(m) if !m.is_file() => Err("not a regular file".into()),
        Ok(m) if m.mode & 0o111 == 0 => Err("not executable".into()),
        Ok(_) => Ok(()),
        Err(e) => Err(e.to_string()),
    }
}

/// Adds to `watched` what changes when `dir`, missing now, comes to exist: its nearest existing
/// ancestor, and where a component on the way is a dangling symbolic link, the directory
/// holding the link (retargeting it changes that directory) and, followed, its target's nearest
/// existing ancestor (up to 8 links).
fn watch_missing(dir: &Path, watched: &mut Vec<PathBuf>, links: usize) {
    for a in dir.ancestors() {
        if crate::fs::observe::metadata(a).is_ok() {
            watched.push(a.to_path_buf());
            return;
        }
        if crate::fs::observe::symlink_metadata(a).is_ok_and(|m| m.is_symlink()) {
            let parent = a.parent().unwrap_or(Path::new("/"));
            if let (Ok(target), true) = (std::fs::read_link(a), links < 8) {
                watch_missing(&parent.join(target), watched, links + 1);
            }
        }
    }
}

/// What a fresh process checks by `stat` of the directories `dirs`: each that exists, and for
/// one that does not, what changes when it is created ([`watch_missing`]).
fn watch_directories(dirs: impl IntoIterator<Item = PathBuf>) -> Vec<PathBuf> {
    let mut watched = Vec::new();
    for d in dirs {
        if crate::fs::observe::metadata(&d).is_ok() {
            watched.push(d);
        } else {
            watch_missing(&d, &mut watched, 0);
        }
    }
    watched
}

/// Adds to `watched` what a fresh process checks of the directory `dir` of a search for
/// `name`: the directory (a program added, removed or renamed there), or what changes when it
/// comes to exist; and `dir/name` where it exists, by `stat` through its links (a link
/// retargeted, as `update-alternatives` does, gives another file).
fn watch_dir(dir: &Path, name: &std::ffi::OsStr, watched: &mut Vec<PathBuf>) {
    if crate::fs::observe::metadata(dir).is_ok() {
        watched.push(dir.to_path_buf());
        let candidate = dir.join(name);
        if crate::fs::observe::metadata(&candidate).is_ok() {
            watched.push(candidate);
        }
    } else {
        watch_missing(dir, watched, 0);
    }
}

/// The host compiler nvcc at `nvcc` (symlinks resolved) would run under `env` (the
/// variables nvcc's identity is computed with: `NVCC_CCBIN`, `PATH`), found as the module
/// documentation says.
///
/// Errors: [`HostCompilerError::NotExecutable`] for an `NVCC_CCBIN` path that names no
/// executable, [`HostCompilerError::NotFound`] with the directories looked in.
pub(crate) fn locate(
    env: &[(String, OsString)],
    nvcc: &Path,
) -> Result<Located, HostCompilerError> {
    let mut name = OsString::from(DEFAULT_HOST_COMPILER);
    if let Some(v) = var(env, HOST_COMPILER_ENV) {
        if v.as_bytes().contains(&b'/') {
            let given = std::path::absolute(Path::new(v)).unwrap_or_else(|_| PathBuf::from(v));
            let (path, watched) = if crate::fs::observe::metadata(&given).is_ok_and(|m| m.is_dir())
            {
                (given.join(DEFAULT_HOST_COMPILER), given.clone())
            } else {
                let parent = given.parent().unwrap_or(Path::new("/")).to_path_buf();
                (given.clone(), parent)
            };
            executable(&path).map_err(|reason| HostCompilerError::NotExecutable {
                path: path.clone(),
                reason,
            })?;
            let mut watched_dirs = Vec::new();
            watch_dir(
                &watched,
                std::ffi::OsStr::new(DEFAULT_HOST_COMPILER),
                &mut watched_dirs,
            );
            return Ok(Located {
                path,
                watched: watched_dirs,
            });
        }
        name = v.clone();
    }
    let mut dirs: Vec<PathBuf> = Vec::new();
    if let Some(bin) = nvcc.parent() {
        if let Some(root) = bin.parent() {
            dirs.push(root.join("nvvm/bin"));
        }
        dirs.push(bin.to_path_buf());
    }
    if let Some(path) = var(env, "PATH") {
        dirs.extend(std::env::split_paths(path).filter(|d| d.is_absolute()));
    }
    // Every directory of the search is watched, not only those up to the one that holds the
    // program: a wrapper (ccache) runs the next program of that name on `PATH`.
    let mut watched = Vec::new();
    for d in &dirs {
        watch_dir(d, &name, &mut watched);
    }
    watched.dedup();
    match dirs
        .iter()
        .map(|d| d.join(&name))
        .find(|c| executable(c).is_ok())
    {
        Some(path) => Ok(Located { path, watched }),
        None => Err(HostCompilerError::NotFound {
            name: name.to_string_lossy().into_owned(),
            searched: dirs,
        }),
    }
}

/// The host compiler the nvcc at `nvcc` would run under this process's environment
/// (`NVCC_CCBIN`, `PATH`), found as the module documentation says, without running anything:
/// what `hipjit doctor` reports.
///
/// Errors: [`HostCompilerError::NotExecutable`],
/// [`HostCompilerError::NotFound`].
pub fn find(nvcc: &Path) -> Result<PathBuf, HostCompilerError> {
    let env: Vec<(String, OsString)> = [HOST_COMPILER_ENV, "PATH"]
        .iter()
        .filter_map(|k| std::env::var_os(k).map(|v| (k.to_string(), v)))
        .collect();
    let resolved = crate::fs::observe::canonicalize(nvcc).unwrap_or_else(|_| nvcc.to_path_buf());
    locate(&env, &resolved).map(|l| l.path)
}

/// Whether `name` is one nvcc's shell reads as one word, unchanged.
fn safe_name(name: &[u8]) -> bool {
    !name.is_empty()
        && name
            .iter()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'+' | b'-'))
}

/// Runs the host compiler at `path` with `args` and `env` (cleared otherwise, `LC_ALL=C`);
/// its standard output.
fn run(
    path: &Path,
    args: &[&str],
    env: &[(String, OsString)],
    timeout: Duration,
) -> Result<String, HostCompilerError> {
    run_both(path, args, env, timeout).map(|(out, _)| out)
}

/// [`run`], giving its standard output and error.
fn run_both(
    path: &Path,
    args: &[&str],
    env: &[(String, OsString)],
    timeout: Duration,
) -> Result<(String, String), HostCompilerError> {
    process::query(path, args, env, timeout, None).map_err(|reason| HostCompilerError::Run {
        path: path.to_path_buf(),
        args: args.join(" "),
        reason,
    })
}

/// The directories of the `#include "..."` and `#include <...>` search lists in the output
/// of `-E -v` (gcc's and clang's form: the lines between `... search starts here:` and `End of
/// search list.`), as absolute paths, `..` resolved where the directory exists, and those it
/// reports as `ignoring nonexistent directory "..."`.
pub(crate) fn include_search_list(verbose: &str) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut inside = false;
    for line in verbose.lines() {
        // A directory of the list that does not exist (yet): recorded as absent, so that
        // creating it is seen.
        if let Some(dir) = line
            .strip_prefix("ignoring nonexistent directory \"")
            .and_then(|r| r.strip_suffix('"'))
        {
            let dir = Path::new(dir);
            if dir.is_absolute() && !out.iter().any(|d: &PathBuf| d == dir) {
                out.push(dir.to_path_buf());
            }
            continue;
        }
        if line.starts_with("#include") && line.ends_with("search starts here:") {
            inside = true;
        } else if line.starts_with("End of search list.") {
            inside = false;
        } else if inside {
            let dir = line.trim().trim_end_matches(" (framework directory)");
            let dir = Path::new(dir);
            if dir.is_absolute() {
                let dir =
                    crate::fs::observe::canonicalize(dir).unwrap_or_else(|_| dir.to_path_buf());
                if !out.contains(&dir) {
                    out.push(dir);
                }
            }
        }
    }
    out
}

/// The directories of the `programs:` and `libraries:` lines of `-print-search-dirs` (gcc's
/// and clang's form: `name: =dir:dir...`): where gcc looks for its compilers and `specs` files.
fn program_and_library_dirs(text: &str) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for line in text.lines() {
        let Some(list) = line
            .strip_prefix("programs: ")
            .or_else(|| line.strip_prefix("libraries: "))
        else {
            continue;
        };
        for d in list.trim_start_matches('=').split(':') {
            let d = Path::new(d);
            if d.is_absolute() {
                let d = crate::fs::observe::canonicalize(d).unwrap_or_else(|_| d.to_path_buf());
                if !out.contains(&d) {
                    out.push(d);
                }
            }
        }
    }
    out
}

/// The arguments of the macro probe: the predefined macros for C++.
const MACRO_PROBE: [&str; 5] = ["-dM", "-E", "-x", "c++", "/dev/null"];

/// sha256 (hex) of the host compiler at `path`'s predefined macros for C++, run with `env`:
/// [`HostCompiler::macros`].
///
/// Errors: [`HostCompilerError::Run`] when it fails.
pub(crate) fn macros_digest(
    path: &Path,
    env: &[(String, OsString)],
    timeout: Duration,
) -> Result<String, HostCompilerError> {
    let macros = run(path, &MACRO_PROBE, env, timeout)?;
    Ok(crate::digest::hex(&crate::digest::sha256(
        macros.as_bytes(),
    )))
}

/// What the host compiler `found` is (see the module documentation), run with `env`, the
/// files and directories a fresh process checks by `stat` to trust it (the program as found
/// and resolved, the compilers it named and the directories it searches for programs,
/// libraries and `specs` files), and its include search list for C++ (`-E -v -x c++
/// /dev/null`), absolute ([`crate::compiler::CompilerIdentity::system_include_dirs`]).
///
/// Errors: [`HostCompilerError::UnsafeName`], [`HostCompilerError::Run`] when `--version` or
/// `-dM -E` fails, [`HostCompilerError::Read`] when a file cannot be hashed.
pub(crate) fn identify(
    found: &Located,
    env: &[(String, OsString)],
    timeout: Duration,
) -> Result<(HostCompiler, Vec<PathBuf>, Vec<PathBuf>), HostCompilerError> {
    let path = &found.path;
    let name = path.file_name().map(|n| n.as_bytes()).unwrap_or_default();
    if !safe_name(name) {
        return Err(HostCompilerError::UnsafeName { path: path.clone() });
    }
    let resolved = crate::fs::observe::canonicalize(path).unwrap_or_else(|_| path.clone());
    let script = std::fs::File::open(&resolved)
        .and_then(|mut f| {
            let mut head = [0u8; 2];
            std::io::Read::read_exact(&mut f, &mut head).map(|_| head)
        })
        .is_ok_and(|head| &head == b"#!");
    let version = run(path, &["--version"], env, timeout)?
        .lines()
        .next()
        .unwrap_or_default()
        .to_string();
    let mut programs = vec![path.clone(), resolved.clone()];
    let mut dirs: Vec<PathBuf> = Vec::new();
    // gcc names its compilers and its library; clang and others answer with the bare name.
    let named = |arg: &str| -> Option<PathBuf> {
        let out = run(path, &[arg], env, timeout).ok()?;
        let p = PathBuf::from(out.trim_end());
        (p.is_absolute() && crate::fs::observe::metadata(&p).is_ok_and(|m| m.is_file()))
            .then(|| crate::fs::observe::canonicalize(&p).unwrap_or(p))
    };
    for prog in ["cc1plus", "cc1"] {
        if let Some(p) = named(&format!("-print-prog-name={prog}")) {
            if let Some(d) = p.parent() {
                dirs.push(d.to_path_buf());
            }
            if !programs.contains(&p) {
                programs.push(p);
            }
        }
    }
    if let Some(d) = named("-print-libgcc-file-name")
        .as_deref()
        .and_then(Path::parent)
    {
        dirs.push(d.to_path_buf());
    }
    // Where it looks for its programs, libraries and `specs` files (gcc), and beside the
    // program itself (clang reads a `<target>.cfg` there).
    if let Ok(text) = run(path, &["-print-search-dirs"], env, timeout) {
        dirs.extend(program_and_library_dirs(&text));
    }
    dirs.extend(resolved.parent().map(Path::to_path_buf));
    let (_, verbose) = run_both(path, &["-E", "-v", "-x", "c++", "/dev/null"], env, timeout)?;
    let include_dirs = include_search_list(&verbose);
    let macros = run(path, &MACRO_PROBE, env, timeout)?;
    let mut fp = Sha256::new();
    let mut item = |b: &[u8]| {
        fp.update((b.len() as u64).to_le_bytes());
        fp.update(b);
    };
    item(name);
    for p in &programs[1..] {
        let digest = super::identity::hash_file(p).map_err(|source| HostCompilerError::Read {
            path: p.clone(),
            source,
        })?;
        item(p.file_name().map(|n| n.as_bytes()).unwrap_or_default());
        item(&digest);
    }
    item(macros.as_bytes());
    let mut checked = programs;
    checked.extend(watch_directories(dirs));
    checked.sort();
    checked.dedup();
    Ok((
        HostCompiler {
            path: path.clone(),
            version,
            fingerprint: crate::digest::hex(&fp.finish()),
            script,
            macros: crate::digest::hex(&crate::digest::sha256(macros.as_bytes())),
        },
        checked,
        include_dirs,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn names_nvccs_shell_reads_as_one_word_are_safe_and_others_are_not() {
        for ok in [
            "gcc",
            "g++-12",
            "x86_64-linux-gnu-g++-12",
            "clang++",
            "cc_1.2",
        ] {
            assert!(safe_name(ok.as_bytes()), "{ok}");
        }
        for bad in [
            "", "g cc", "gcc;id", "$(id)", "g`id`", "g\"cc", "g'cc", "gcc\n", "g\\cc",
        ] {
            assert!(!safe_name(bad.as_bytes()), "{bad:?}");
        }
    }

    #[test]
    fn the_search_list_holds_the_listed_and_the_nonexistent_directories() {
        let text = "ignoring nonexistent directory \"/nonexistent/hsa/include\"\n\
                    ignoring duplicate directory \"/usr/include\"\n\
                    #include \"...\" search starts here:\n\
                    #include <...> search starts here:\n \
                    /usr/include\n \
                    relative/ignored\n\
                    End of search list.\n \
                    /after/the/end\n";
        assert_eq!(
            include_search_list(text),
            [
                PathBuf::from("/nonexistent/hsa/include"),
                PathBuf::from("/usr/include")
            ]
        );
    }

    fn exe(path: &Path) {
        std::fs::write(path, "#!/bin/sh\nexit 0\n").unwrap();
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
    }

    #[test]
    fn gcc_is_found_in_the_toolkit_then_on_path_and_every_directory_looked_in_is_watched() {
        let t = tempfile::tempdir().unwrap();
        let root = t.path();
        for d in ["cuda/bin", "cuda/nvvm/bin", "a", "b", "c", "t"] {
            std::fs::create_dir_all(root.join(d)).unwrap();
        }
        exe(&root.join("b/gcc"));
        exe(&root.join("c/gcc"));
        // A link to a directory that does not exist yet.
        std::os::unix::fs::symlink(root.join("t/later/deep"), root.join("a/link")).unwrap();
        let nvcc = root.join("cuda/bin/nvcc");
        let path = std::env::join_paths([
            root.join("missing/dir"),
            PathBuf::from("relative"),
            root.join("a/link/sub"),
            root.join("a"),
            root.join("b"),
            root.join("c"),
        ])
        .unwrap();
        let env = vec![("PATH".to_string(), path)];
        let found = locate(&env, &nvcc).unwrap();
        assert_eq!(found.path, root.join("b/gcc"));
        assert_eq!(
            found.watched,
            [
                root.join("cuda/nvvm/bin"),
                root.join("cuda/bin"),
                // missing/dir: its nearest existing ancestor.
                root.to_path_buf(),
                // a/link/sub: through the dangling link, its target's nearest existing
                // ancestor, then the directory holding the link.
                root.join("t"),
                root.join("a"),
                root.join("b"),
                root.join("b/gcc"),
                // After the one that holds it: a wrapper there may run the next gcc.
                root.join("c"),
                root.join("c/gcc"),
            ]
        );
        // A gcc beside nvcc comes first, as nvcc's profile puts its directory first on PATH.
        exe(&root.join("cuda/bin/gcc"));
        assert_eq!(locate(&env, &nvcc).unwrap().path, root.join("cuda/bin/gcc"));
    }

    #[test]
    fn nvcc_ccbin_names_a_program_a_directory_or_a_name_to_look_up() {
        let t = tempfile::tempdir().unwrap();
        let root = t.path();
        std::fs::create_dir_all(root.join("d")).unwrap();
        exe(&root.join("d/gcc"));
        exe(&root.join("d/g++-9"));
        let nvcc = root.join("cuda/bin/nvcc");
        let with = |v: &Path| {
            vec![
                ("NVCC_CCBIN".to_string(), v.as_os_str().to_owned()),
                ("PATH".to_string(), root.join("d").into_os_string()),
            ]
        };
        assert_eq!(
            locate(&with(&root.join("d/g++-9")), &nvcc).unwrap().path,
            root.join("d/g++-9")
        );
        assert_eq!(
            locate(&with(&root.join("d")), &nvcc).unwrap().path,
            root.join("d/gcc")
        );
        assert_eq!(
            locate(&with(Path::new("g++-9")), &nvcc).unwrap().path,
            root.join("d/g++-9")
        );
        let e = locate(&with(&root.join("d/clang")), &nvcc).unwrap_err();
        assert!(matches!(e, HostCompilerError::NotExecutable { .. }), "{e}");
        assert!(e.to_string().contains("d/clang"), "{e}");
        let e = locate(&with(Path::new("clang")), &nvcc).unwrap_err();
        assert!(matches!(e, HostCompilerError::NotFound { .. }), "{e}");
        assert!(e.to_string().contains("`clang` was not found"), "{e}");
    }
}
