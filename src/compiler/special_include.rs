//! Refusing, before a compile, an `#include` that names a FIFO, a socket or a device.
//!
//! A compiler opens an included file with a plain `open(2)` and reads it to the end: a FIFO
//! with no writer blocks the open until the compile timeout kills the compiler (for hipRTC and
//! NVRTC, which run in this process, there is no timeout at all), and a character device such
//! as `/dev/zero` never ends. hipjit cannot know every file a compile will read before it runs
//! (that is what the compiler's dependency list is for), but it can follow the `#include`
//! directives it can read: those of the source and, recursively, of the headers they reach in
//! the source's own directory and the include directories, as the compiler resolves them
//! (quoted names first beside the including file, then each include directory in order;
//! absolute names as they are), and the names `__has_include` and `__has_include_next` test
//! (the compiler opens what it finds there too). The first name that resolves to something other than a
//! regular file or a directory is refused ([`find`]); metadata is read with `stat(2)`, which
//! never opens the file.
//!
//! What this does not see: a computed `#include MACRO`, a directive the preprocessor would
//! skip is still followed (the scan is lexical), and headers reached through the compiler's
//! own system directories (`/usr/include`...) are not read. A FIFO reached only that way still
//! waits for the compile timeout ([`super::CompilerConfig::timeout`]).

use std::path::{Path, PathBuf};

use crate::fs;

/// How many headers the scan reads at most before it stops (it stops quietly: the compile goes
/// on, with its timeout).
const MAX_HEADERS: usize = 2000;

/// An `#include` that resolves to a file the compiler must not open.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SpecialInclude {
    /// The directive as written (`#include "fifo.h"`).
    pub directive: String,
    /// The file holding it (`None`: the source given as text).
    pub file: Option<PathBuf>,
    /// Its 1-based line.
    pub line: usize,
    /// The path it resolves to.
    pub path: PathBuf,
    /// What that is: `FIFO`, `socket`, `character device`, `block device`.
    pub kind: &'static str,
}

impl std::fmt::Display for SpecialInclude {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.file {
            Some(file) => write!(f, "{}:{}: ", file.display(), self.line)?,
            None => write!(f, "line {}: ", self.line)?,
        }
        write!(
            f,
            "`{}` names {} (a {}): the compiler would block or never finish reading it; \
             hipjit compiles only regular files",
            self.directive,
            self.path.display(),
            self.kind
        )
    }
}

/// The first `#include` of `source` (whose own directory is `source_dir`, when it has one) or
/// of a header it reaches that resolves to a FIFO, socket or device, searching quoted names
/// beside the including file first, then `include_dirs` in order (see the module
/// documentation); `None` when there is none the scan can see.
pub fn find(
    source: &[u8],
    source_dir: Option<&Path>,
    include_dirs: &[PathBuf],
) -> Option<SpecialInclude> {
    let mut seen: Vec<PathBuf> = Vec::new();
    let mut queue: Vec<(Option<PathBuf>, Vec<u8>)> = vec![(None, source.to_vec())];
    while let Some((file, text)) = queue.pop() {
        let here = match &file {
            Some(f) => f.parent().map(Path::to_path_buf),
            None => source_dir.map(Path::to_path_buf),
        };
        for (line, directive, name, quoted) in includes(&text) {
            let Some(path) = resolve(&name, quoted, here.as_deref(), include_dirs) else {
                continue;
            };
            let Ok(meta) = std::fs::metadata(&path) else {
                continue;
            };
            let kind = fs::read::kind_name(meta.file_type());
            if meta.is_file() {
                if seen.len() < MAX_HEADERS && !seen.contains(&path) {
                    seen.push(path.clone());
                    if let Ok(bytes) = fs::read::read_file(
                        &path,
                        fs::read::SOURCE_LIMIT,
                        "a header",
                        fs::read::Streams::None,
                    ) {
                        queue.push((Some(path), bytes));
                    }
                }
            } else if !meta.is_dir() {
                return Some(SpecialInclude {
                    directive,
                    file: file.clone(),
                    line,
                    path,
                    kind,
                });
            }
        }
    }
    None
}

/// The first candidate of an include name that exists, in the compiler's order.
fn resolve(name: &Path, quoted: bool, here: Option<&Path>, dirs: &[PathBuf]) -> Option<PathBuf> {
    if name.is_absolute() {
        return Some(name.to_path_buf());
    }
    let beside = here.filter(|_| quoted).map(|d| d.join(name));
    beside
        .into_iter()
        .chain(dirs.iter().map(|d| d.join(name)))
        .find(|p| std::fs::symlink_metadata(p).is_ok())
}

/// The name in `<...>` or `"..."` at the start of `rest` (after blanks): the name and whether
/// it was quoted; `None` for anything else (a computed name) or an empty name.
fn quoted_name(rest: &[u8]) -> Option<(&[u8], bool)> {
    let rest = rest.trim_ascii_start();
    let (close, quoted) = match rest.first() {
        Some(b'"') => (b'"', true),
        Some(b'<') => (b'>', false),
        _ => return None,
    };
    let end = rest[1..].iter().position(|&b| b == close)?;
    let name = &rest[1..1 + end];
    (!name.is_empty()).then_some((name, quoted))
}

/// The names `__has_include(...)` and `__has_include_next(...)` test on `line`: the compiler
/// looks each up, and opens what it finds (a FIFO there blocks it as an `#include` would).
fn has_includes(line: &[u8]) -> Vec<(&[u8], bool)> {
    const OP: &[u8] = b"__has_include";
    let mut out = Vec::new();
    let mut at = 0;
    while let Some(i) = line[at..].windows(OP.len()).position(|w| w == OP) {
        let mut rest = &line[at + i + OP.len()..];
        at += i + OP.len();
        rest = rest
            .strip_prefix(b"_next")
            .unwrap_or(rest)
            .trim_ascii_start();
        if let Some(name) = rest.strip_prefix(b"(").and_then(quoted_name) {
            out.push(name);
        }
    }
    out
}

/// The `#include` / `#include_next` directives of `text`, and the names its `__has_include`s
/// test: (1-based line, the directive or line, the name, whether it was quoted). Computed
/// names are skipped.
fn includes(text: &[u8]) -> Vec<(usize, String, PathBuf, bool)> {
    use std::os::unix::ffi::OsStrExt;
    let mut out = Vec::new();
    for (i, line) in text.split(|&b| b == b'\n').enumerate() {
        for (name, quoted) in has_includes(line) {
            out.push((
                i + 1,
                String::from_utf8_lossy(line.trim_ascii()).into_owned(),
                PathBuf::from(std::ffi::OsStr::from_bytes(name)),
                quoted,
            ));
        }
        let Some(d) = line.trim_ascii_start().strip_prefix(b"#") else {
            continue;
        };
        let d = d.trim_ascii_start();
        let Some(rest) = d
            .strip_prefix(b"include_next")
            .or_else(|| d.strip_prefix(b"include"))
        else {
            continue;
        };
        let Some((name, quoted)) = quoted_name(rest) else {
            continue;
        };
        out.push((
            i + 1,
            String::from_utf8_lossy(line.trim_ascii()).into_owned(),
            PathBuf::from(std::ffi::OsStr::from_bytes(name)),
            quoted,
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fifo(path: &Path) {
        let c = std::ffi::CString::new(path.as_os_str().as_encoded_bytes()).unwrap();
        // SAFETY: mkfifo with a NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
    }

    #[test]
    fn a_fifo_in_an_include_directory_is_found_with_its_directive_and_line() {
        let d = tempfile::tempdir().unwrap();
        fifo(&d.path().join("pipe.h"));
        let src = b"// x\n#include <hip/hip_runtime.h>\n  #  include \"pipe.h\"\n";
        let found = find(src, None, &[d.path().to_path_buf()]).expect("found");
        assert_eq!(found.line, 3);
        assert_eq!(found.path, d.path().join("pipe.h"));
        assert_eq!(found.kind, "FIFO");
        assert!(
            found.to_string().contains("`#  include \"pipe.h\"`"),
            "{found}"
        );
    }

    #[test]
    fn a_fifo_tested_by_has_include_is_found_and_computed_names_are_not() {
        let d = tempfile::tempdir().unwrap();
        fifo(&d.path().join("pipe.h"));
        fifo(&d.path().join("next.h"));
        let src = b"#if defined(X) && __has_include( <pipe.h> )\n#endif\n";
        let found = find(src, None, &[d.path().to_path_buf()]).expect("found");
        assert_eq!((found.line, found.kind), (1, "FIFO"));
        let src = b"#if __has_include_next(\"next.h\")\n#endif\n";
        let found = find(src, Some(d.path()), &[]).expect("found");
        assert_eq!(found.path, d.path().join("next.h"));
        assert!(find(
            b"#if __has_include(PIPE)\n#endif\n",
            None,
            &[d.path().to_path_buf()]
        )
        .is_none());
    }

    #[test]
    fn a_fifo_reached_through_a_header_names_that_header() {
        let d = tempfile::tempdir().unwrap();
        let sub = d.path().join("sub");
        std::fs::create_dir(&sub).unwrap();
        std::fs::write(d.path().join("a.h"), "#include \"sub/b.h\"\n").unwrap();
        std::fs::write(sub.join("b.h"), "\n#include \"c.h\"\n").unwrap();
        fifo(&sub.join("c.h"));
        let found = find(b"#include <a.h>\n", None, &[d.path().to_path_buf()]).unwrap();
        assert_eq!(found.file.as_deref(), Some(sub.join("b.h").as_path()));
        assert_eq!(found.line, 2);
    }

    #[test]
    fn a_device_by_absolute_name_is_found_and_regular_headers_are_not() {
        let d = tempfile::tempdir().unwrap();
        std::fs::write(d.path().join("ok.h"), "int x;\n#include \"ok.h\"\n").unwrap();
        assert_eq!(find(b"#include \"ok.h\"\n", Some(d.path()), &[]), None);
        let found = find(b"#include \"/dev/zero\"\n", None, &[]).unwrap();
        assert_eq!(found.kind, "character device");
    }
}
