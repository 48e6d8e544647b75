//! Reading `strace -f -y` logs: which paths a process's system calls named.

use std::path::{Path, PathBuf};

/// Every line of `log` that is a call of one of `calls` (by name, e.g. `"newfstatat"`) naming
/// a path: the path, joined to its directory when the call names it relative to a descriptor
/// shown as `N</dir>`, and the call's name. A call on an open descriptor (`""`, with
/// `AT_EMPTY_PATH`) names no path and is left out.
pub fn paths(log: &str, calls: &[&str]) -> Vec<(PathBuf, String)> {
    log.lines()
        .filter_map(|l| {
            let open = l.find('(')?;
            let call = l[..open].split_whitespace().last()?;
            if !calls.contains(&call) {
                return None;
            }
            let args = &l[open + 1..];
            let start = args.find('"')? + 1;
            let end = start + args[start..].find('"')?;
            let name = &args[start..end];
            if name.is_empty() {
                return None;
            }
            let dir = args[..start - 1]
                .split_once('<')
                .and_then(|(_, rest)| rest.split_once('>'))
                .map(|(d, _)| PathBuf::from(d));
            let path = match dir {
                Some(d) if !name.starts_with('/') => d.join(name),
                _ => PathBuf::from(name),
            };
            Some((path, call.to_owned()))
        })
        .collect()
}

/// `p` with each `..` taken as dropping the component before it (as the kernel resolves
/// `dir/..` where `dir` is a directory, not a link): the spelling strace shows for a directory
/// that a program named through `bin/..`.
pub fn fold_parent_dirs(p: &Path) -> PathBuf {
    let mut clean = PathBuf::new();
    for c in p.components() {
        match c {
            std::path::Component::ParentDir => {
                clean.pop();
            }
            other => clean.push(other),
        }
    }
    clean
}

/// The stat family's calls.
pub const STATS: &[&str] = &["stat", "stat64", "lstat", "newfstatat", "statx"];

/// Every call that looks a path up: opens, the stat family, `readlink`, `access`, `execve`.
pub const LOOKUPS: &[&str] = &[
    "open",
    "openat",
    "stat",
    "stat64",
    "lstat",
    "newfstatat",
    "statx",
    "readlink",
    "readlinkat",
    "access",
    "faccessat",
    "faccessat2",
    "execve",
];
