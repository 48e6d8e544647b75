//! What `doctor` reads from a HIP header set: the version in `hip/hip_version.h` and which of
//! hip-sys's probed functions the headers declare, found by scanning the header text (comments
//! removed) for `name (`, the way a reader of the headers would check.

use std::path::{Path, PathBuf};

/// One header set: a directory holding `hip/`.
#[derive(Debug, Clone)]
pub struct HeaderSet {
    /// `HIP_VERSION_MAJOR.MINOR.PATCH` from `hip/hip_version.h`.
    pub version: Option<String>,
    /// `(major, minor)` of that version.
    pub major_minor: Option<(u32, u32)>,
    /// Each probed function and whether a header declares it.
    pub apis: Vec<(String, bool)>,
}

/// Whether `dir` holds a HIP header set (`hip/hip_runtime_api.h`).
pub fn is_header_set(dir: &Path) -> bool {
    dir.join("hip/hip_runtime_api.h").is_file()
}

/// Reads the header set in `include_dir`, probing `apis`.
pub fn read(include_dir: &Path, apis: &[&str]) -> HeaderSet {
    let (version, major_minor) = read_version(&include_dir.join("hip/hip_version.h"));
    let text = header_text(&include_dir.join("hip"));
    let apis = apis
        .iter()
        .map(|&name| (name.to_owned(), declares(&text, name)))
        .collect();
    HeaderSet {
        version,
        major_minor,
        apis,
    }
}

/// The version defined in a `hip_version.h`: `(text, (major, minor))`
/// ([`hip_sys::discovery::hip_version_from_header`]).
pub fn read_version(path: &Path) -> (Option<String>, Option<(u32, u32)>) {
    let Ok(text) = std::fs::read_to_string(path) else {
        return (None, None);
    };
    match hip_sys::discovery::hip_version_from_header(&text) {
        Some((ma, mi, Some(pa))) => (Some(format!("{ma}.{mi}.{pa}")), Some((ma, mi))),
        Some((ma, mi, None)) => (Some(format!("{ma}.{mi}")), Some((ma, mi))),
        None => (None, None),
    }
}

/// The text of every `.h`/`.hpp` file in `hip/` and its subdirectories (one level deep:
/// `amd_detail/`), comments removed.
fn header_text(hip_dir: &Path) -> String {
    let mut out = String::new();
    let mut dirs = vec![hip_dir.to_path_buf()];
    if let Ok(rd) = std::fs::read_dir(hip_dir) {
        dirs.extend(
            rd.filter_map(Result::ok)
                .map(|e| e.path())
                .filter(|p| p.is_dir() && !p.ends_with("nvidia_detail")),
        );
    }
    for d in dirs {
        let Ok(rd) = std::fs::read_dir(&d) else {
            continue;
        };
        let mut files: Vec<PathBuf> = rd
            .filter_map(Result::ok)
            .map(|e| e.path())
            .filter(|p| {
                p.is_file()
                    && p.extension()
                        .is_some_and(|e| e == "h" || e == "hpp" || e == "inc")
            })
            .collect();
        files.sort();
        for f in files {
            if let Ok(t) = std::fs::read_to_string(&f) {
                out.push_str(&strip_comments(&t));
                out.push('\n');
            }
        }
    }
    out
}

/// `text` without `//` and `/* */` comments (string literals kept as they are).
pub fn strip_comments(text: &str) -> String {
    let b = text.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        match (b[i], b.get(i + 1)) {
            (b'/', Some(b'/')) => {
                while i < b.len() && b[i] != b'\n' {
                    i += 1;
                }
            }
            (b'/', Some(b'*')) => {
                i += 2;
                while i < b.len() && !(b[i] == b'*' && b.get(i + 1) == Some(&b'/')) {
                    i += 1;
                }
                i += 2;
                out.push(b' ');
            }
            (b'"', _) => {
                out.push(b'"');
                i += 1;
                while i < b.len() && b[i] != b'"' && b[i] != b'\n' {
                    if b[i] == b'\\' {
                        out.push(b[i]);
                        i += 1;
                    }
                    if i < b.len() {
                        out.push(b[i]);
                        i += 1;
                    }
                }
                if i < b.len() {
                    out.push(b[i]);
                    i += 1;
                }
            }
            (c, _) => {
                out.push(c);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Whether `text` declares the function `name`: the identifier, not part of a longer one,
/// followed (after white space) by `(`.
pub fn declares(text: &str, name: &str) -> bool {
    let ident = |c: u8| c.is_ascii_alphanumeric() || c == b'_';
    let b = text.as_bytes();
    let mut from = 0;
    while let Some(pos) = text[from..].find(name) {
        let start = from + pos;
        let end = start + name.len();
        from = end;
        if start > 0 && ident(b[start - 1]) {
            continue;
        }
        let rest = text[end..].trim_start();
        // `#define hipX hipY` names hipX without `(`: not a declaration.
        if rest.starts_with('(') {
            return true;
        }
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn declaration_counts_but_comment_and_longer_name_do_not() {
        let t = strip_comments(
            "// hipKernelGetFunction(x)\n/* hipKernelGetFunction ( */\nint hipKernelGetFunctionX(void);\nhipError_t hipLibraryUnload (hipLibrary_t l);",
        );
        assert!(!declares(&t, "hipKernelGetFunction"));
        assert!(declares(&t, "hipLibraryUnload"));
    }

    #[test]
    fn define_alias_is_not_a_declaration() {
        let t = "#define hipGetDeviceProperties hipGetDevicePropertiesR0600\n";
        assert!(!declares(t, "hipGetDeviceProperties"));
    }

    #[test]
    fn debian_header_set_is_hip_5_2_without_library_api() {
        // Debian bookworm's libamdhip64-dev: HIP 5.2.21153 (ENVIRONMENT.md).
        let dir = Path::new("/usr/include");
        assert!(
            is_header_set(dir),
            "needs Debian's HIP headers: apt-get install libamdhip64-dev"
        );
        let h = read(dir, &["hipLibraryLoadData", "hipModuleLoadData"]);
        assert_eq!(h.version.as_deref(), Some("5.2.21153"));
        assert_eq!(
            h.apis,
            [
                ("hipLibraryLoadData".to_owned(), false),
                ("hipModuleLoadData".to_owned(), true)
            ]
        );
    }
}
