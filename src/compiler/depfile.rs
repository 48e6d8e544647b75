//! The compiler's dependency output: a Make-style rule (`target: dep dep \`) naming every file
//! the preprocessor opened, written by clang's cc1 when asked with `-dependency-file F -MT X`
//! (`-sys-header-deps` adds the system headers), and by nvcc with `-MD -MF F`.
//!
//! Escapes follow clang's `DependencyFileGenerator` (and GNU Make): `\ ` is a space, `\#` a
//! `#`, `$$` a `$`, backslash-newline continues the line; any other backslash is itself. Paths
//! are raw bytes, never decoded.

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

/// A file the compiler read, as the JIT records it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Dependency {
    /// The `-I` directory it was found under (an index into
    /// [`crate::compiler::CompileOptions::include_dirs`]), or `None` when the compiler printed
    /// an absolute path (system headers, `CPATH`, `-I` in extra flags).
    pub include_dir: Option<usize>,
    /// Its name inside that include directory (`sub/x.h`), or the absolute path printed.
    pub name: PathBuf,
    /// The path a user knows: the include directory joined with `name`, or `name`.
    pub path: PathBuf,
}

/// The prerequisites of the first rule in `text`, in order, as raw bytes.
///
/// Errors: a text with no rule (no `: ` or `:` at a line end after the target) gives `None`.
pub fn parse(text: &[u8]) -> Option<Vec<Vec<u8>>> {
    // The target ends at the first unescaped `:` followed by white space or the end.
    let mut i = 0;
    let body_start = loop {
        if i >= text.len() {
            return None;
        }
        match text[i] {
            b'\\' => i += 2,
            b':' if text
                .get(i + 1)
                .is_none_or(|c| matches!(c, b' ' | b'\t' | b'\n' | b'\r')) =>
            {
                break i + 1;
            }
            _ => i += 1,
        }
    };
    let body = &text[body_start..];
    let mut deps = Vec::new();
    let mut cur = Vec::new();
    let mut j = 0;
    while j < body.len() {
        let c = body[j];
        match c {
            b'\\' => match body.get(j + 1) {
                Some(b'\n') => j += 1,
                Some(b'\r') if body.get(j + 2) == Some(&b'\n') => j += 2,
                Some(&e @ (b' ' | b'#' | b':')) => {
                    cur.push(e);
                    j += 1;
                }
                _ => cur.push(b'\\'),
            },
            b'$' if body.get(j + 1) == Some(&b'$') => {
                cur.push(b'$');
                j += 1;
            }
            b' ' | b'\n' | b'\t' | b'\r' => {
                if !cur.is_empty() {
                    deps.push(std::mem::take(&mut cur));
                }
                // An unescaped newline ends the first rule.
                if c == b'\n' {
                    break;
                }
            }
            c => cur.push(c),
        }
        j += 1;
    }
    if !cur.is_empty() {
        deps.push(cur);
    }
    Some(deps)
}

/// Maps the prerequisites clang printed in a build directory laid out as
/// [`crate::compiler::Compiler::compile`] lays it out (`include/<i>/...` for `-I` directory
/// `i`, the source under `source_name`) to [`Dependency`] values; the source itself is left
/// out. A relative name elsewhere in the build directory is kept as `build_dir` joined with it
/// (it no longer exists once the build directory is gone, so it never matches later).
pub fn map_build_paths(
    deps: &[Vec<u8>],
    source_name: &str,
    include_dir_name: &str,
    include_dirs: &[PathBuf],
    build_dir: &Path,
) -> Vec<Dependency> {
    let mut out = Vec::new();
    for d in deps {
        let mut rel: &[u8] = d;
        while let Some(r) = rel.strip_prefix(b"./") {
            rel = r;
        }
        if rel == source_name.as_bytes() {
            continue;
        }
        if let Some(r) = rel.strip_prefix(build_dir.as_os_str().as_bytes()) {
            if let Some(r) = r.strip_prefix(b"/") {
                rel = r;
            }
        }
        if rel.first() == Some(&b'/') {
            let p = PathBuf::from(OsStr::from_bytes(rel));
            out.push(Dependency {
                include_dir: None,
                name: p.clone(),
                path: p,
            });
            continue;
        }
        let staged = rel
            .strip_prefix(include_dir_name.as_bytes())
            .and_then(|r| r.strip_prefix(b"/"))
            .and_then(|r| {
                let slash = r.iter().position(|b| *b == b'/')?;
                let idx: usize = std::str::from_utf8(&r[..slash]).ok()?.parse().ok()?;
                let dir = include_dirs.get(idx)?;
                let name = PathBuf::from(OsStr::from_bytes(&r[slash + 1..]));
                Some(Dependency {
                    include_dir: Some(idx),
                    path: dir.join(&name),
                    name,
                })
            });
        match staged {
            Some(dep) => out.push(dep),
            None => {
                let p = build_dir.join(OsStr::from_bytes(rel));
                out.push(Dependency {
                    include_dir: None,
                    name: p.clone(),
                    path: p,
                });
            }
        }
    }
    out
}

/// Maps the prerequisites an in-process compiler (hipRTC) printed to [`Dependency`] values.
///
/// comgr, the library under hipRTC, writes the source and the in-memory headers into a staging
/// directory (`<TMPDIR>/comgr-<id>/`, the source under `input/`, headers under `include/` on HIP
/// 5.x and 6.x) before clang reads them: the first prerequisite is the staged source, and every
/// file under the `comgr-*` directory holding it is left out (the source and in-memory headers
/// are the caller's bytes, not files; hipRTC's own `hiprtc_runtime.h` belongs to the library).
/// When the first prerequisite lies in no `comgr-*` directory only it is left out. A file under
/// `canonical[i]` (the path the compiler was given with `-I`) gets index `i` and the name below
/// it, the longest such directory winning; any other absolute path is kept as printed, and a
/// relative one is joined to `cwd`.
pub fn map_in_process_paths(
    deps: &[Vec<u8>],
    include_dirs: &[PathBuf],
    canonical: &[PathBuf],
    cwd: &Path,
) -> Vec<Dependency> {
    let Some((source, rest)) = deps.split_first() else {
        return Vec::new();
    };
    let source = Path::new(OsStr::from_bytes(source));
    let staging = source.ancestors().skip(1).find(|a| {
        a.file_name()
            .is_some_and(|n| n.as_bytes().starts_with(b"comgr-"))
    });
    let mut out = Vec::new();
    for d in rest {
        let printed = Path::new(OsStr::from_bytes(d));
        if staging.is_some_and(|s| printed.starts_with(s)) {
            continue;
        }
        let path = if printed.is_absolute() {
            printed.to_path_buf()
        } else {
            cwd.join(printed)
        };
        let under = canonical
            .iter()
            .enumerate()
            .filter_map(|(i, dir)| Some((i, path.strip_prefix(dir).ok()?)))
            .filter(|(_, name)| !name.as_os_str().is_empty())
            .max_by_key(|(i, _)| canonical[*i].as_os_str().len());
        match under.and_then(|(i, name)| Some((i, name, include_dirs.get(i)?))) {
            Some((i, name, dir)) => out.push(Dependency {
                include_dir: Some(i),
                name: name.to_path_buf(),
                path: dir.join(name),
            }),
            None => out.push(Dependency {
                include_dir: None,
                name: path.clone(),
                path,
            }),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn strs(v: Vec<Vec<u8>>) -> Vec<String> {
        v.into_iter()
            .map(|b| String::from_utf8(b).unwrap())
            .collect()
    }

    #[test]
    fn continuations_and_escaped_spaces_are_parsed() {
        let text = b"out.hsaco: kernel.hip \\\n  /usr/include/a\\ b.h include/0/c.h\n";
        assert_eq!(
            strs(parse(text).unwrap()),
            ["kernel.hip", "/usr/include/a b.h", "include/0/c.h"]
        );
    }

    #[test]
    fn dollars_hashes_and_non_utf8_bytes_survive() {
        let text = b"x: a$$b.h c\\#d.h e\xff.h\n";
        assert_eq!(
            parse(text).unwrap(),
            [b"a$b.h".to_vec(), b"c#d.h".to_vec(), b"e\xff.h".to_vec()]
        );
    }

    #[test]
    fn a_file_without_a_rule_is_refused() {
        assert_eq!(parse(b""), None);
        assert_eq!(parse(b"no rule here"), None);
    }

    #[test]
    fn comgrs_staged_files_are_left_out_and_include_directories_map_back() {
        let hip5 = parse(
            b"X: /tmp/comgr-3896d8/input/CompileSource \\\n  \
              /tmp/comgr-3896d8/include/hiprtc_runtime.h /real/inc/sub/mine.h \\\n  \
              /usr/include/hip/hip_runtime.h /tmp/comgr-3896d8/include/inmem.h \
              /real/inc/nested/x.h rel.h\n",
        )
        .unwrap();
        let given = [PathBuf::from("inc"), PathBuf::from("/elsewhere/nested")];
        let canonical = [
            PathBuf::from("/real/inc"),
            PathBuf::from("/real/inc/nested"),
        ];
        let m = map_in_process_paths(&hip5, &given, &canonical, Path::new("/cwd"));
        let got: Vec<_> = m
            .iter()
            .map(|d| (d.include_dir, d.name.clone(), d.path.clone()))
            .collect();
        assert_eq!(
            got,
            [
                (Some(0), "sub/mine.h".into(), "inc/sub/mine.h".into()),
                (
                    None,
                    "/usr/include/hip/hip_runtime.h".into(),
                    "/usr/include/hip/hip_runtime.h".into()
                ),
                (Some(1), "x.h".into(), "/elsewhere/nested/x.h".into()),
                (None, "/cwd/rel.h".into(), "/cwd/rel.h".into()),
            ]
        );
    }

    #[test]
    fn without_a_comgr_directory_only_the_source_is_left_out() {
        let deps = parse(b"X: /work/kern.hip /work/a.h\n").unwrap();
        let m = map_in_process_paths(&deps, &[], &[], Path::new("/"));
        assert_eq!(m.len(), 1);
        assert_eq!(m[0].path, Path::new("/work/a.h"));
    }

    #[test]
    fn staged_include_paths_map_back_to_their_directory() {
        let deps =
            parse(b"out.hsaco: kernel.hip include/1/sub/x.h /usr/include/stdio.h\n").unwrap();
        let dirs = [PathBuf::from("/a"), PathBuf::from("/b\u{e9}")];
        let m = map_build_paths(&deps, "kernel.hip", "include", &dirs, Path::new("/tmp/b"));
        assert_eq!(m.len(), 2);
        assert_eq!(m[0].include_dir, Some(1));
        assert_eq!(m[0].name, Path::new("sub/x.h"));
        assert_eq!(m[0].path, Path::new("/b\u{e9}/sub/x.h"));
        assert_eq!(m[1].include_dir, None);
        assert_eq!(m[1].path, Path::new("/usr/include/stdio.h"));
    }
}
