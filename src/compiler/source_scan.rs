//! What a HIP source needs of its compiler, read from the source alone: a cheap, conservative,
//! lexical scan that [`super::selection`]'s rule for [`super::selection::CompilerChoice::Auto`]
//! weighs before it takes an in-process compiler (hipRTC, NVRTC), which compiles device code
//! against headers of its own and has no host compiler behind it.
//!
//! The scan reads the source once, comments, string and character literals set aside (raw
//! strings included, so a kernel held in a string is not read as code), and reports the first
//! of each:
//! - **host code**: a `main` defined (`int main(`, `auto main(`, `void main(`), a call of the
//!   HIP host API (an identifier `hip` followed by a capital letter, then `(`: `hipMalloc(`,
//!   `hipMemcpy(`, `hipLaunchKernelGGL(`), or a triple-chevron launch (`<<<`);
//! - **a system header**: an `#include` (or `#include_next`) of a header of the C or C++
//!   standard library or of the system (`<vector>`, `<iostream>`, `<cstdio>`, `<stdio.h>`,
//!   `<unistd.h>`, `<sys/time.h>`... [`is_system_header`]), quoted or bracketed;
//! - **another header**: an `#include` of any header that is neither HIP's own (`hip/...`,
//!   quoted or bracketed) nor a system header: a project's header (`"util.hpp"`), a library's
//!   (`<rocwmma/rocwmma.hpp>`, a CUDA toolkit header). Whether the in-process compiler takes it
//!   cannot be known without compiling it: what it includes is not read here.
//!
//! (The cache's [`super::include_names`] lists the names a text asks the preprocessor to look
//! up, for a key; this module asks another question, what a compile needs, and reads code as
//! well as directives.)
//!
//! Conservative means that a false finding is allowed where a missed one is not: a directive
//! inside `#if 0` counts, and an identifier that only looks like a host call counts. A false
//! finding sends a source to the process compiler, which costs compile time only.

/// What the scan found, and where.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Found {
    /// What kind of thing.
    pub kind: FoundKind,
    /// The text found, as the reason shows it: `int main(`, `hipMalloc(`, `<<<`,
    /// `<vector>`, `"util.hpp"`.
    pub text: String,
    /// Its 1-based line.
    pub line: usize,
}

/// The kinds of [`Found`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FoundKind {
    /// `main` defined.
    Main,
    /// A call of the HIP host API.
    HostCall,
    /// A triple-chevron kernel launch.
    Launch,
    /// A header of the C or C++ standard library or of the system.
    SystemHeader,
    /// A header that is neither HIP's own nor a system header.
    OtherHeader,
}

impl Found {
    /// The finding in words: "host code (`int main(` at line 40)", "`#include <vector>`
    /// (line 3), a header of the C/C++ standard library or the system".
    pub fn describe(&self) -> String {
        match self.kind {
            FoundKind::Main | FoundKind::HostCall | FoundKind::Launch => {
                format!("host code (`{}` at line {})", self.text, self.line)
            }
            FoundKind::SystemHeader => format!(
                "`#include {}` (line {}), a header of the C/C++ standard library or the system",
                self.text, self.line
            ),
            FoundKind::OtherHeader => format!("`#include {}` (line {})", self.text, self.line),
        }
    }
}

/// What [`scan`] found.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SourceScan {
    /// The first host code or system header, in source order: only a process compiler
    /// compiles such a source.
    pub needs_process: Option<Found>,
    /// The first header that is neither HIP's own nor a system header.
    pub other_header: Option<Found>,
}

/// The first host code or system header of `source` ([`SourceScan::needs_process`] of
/// [`scan`]), found fast where there is none: the source's raw bytes are searched for what could
/// be one (`#`, `main`, `hip`, `<<<`, with `memchr`), and only when something is there is the
/// source scanned whole, comments and literals set aside (setting them aside only removes
/// findings). A 4 KiB kernel with HIP's headers and HIP's device built-ins takes about a
/// microsecond here, where the whole scan takes 16-34 (release builds).
pub fn needs_process(source: &[u8]) -> Option<Found> {
    if might_need_process(source) {
        scan(source).needs_process
    } else {
        None
    }
}

/// Whether the raw bytes of `source` hold something [`scan`] could report as host code or a
/// system header: an `#include` of a system header, `main` after `int`, `auto` or `void` and
/// before `(`, an identifier `hip` + capital letter before `(`, or `<<<`.
fn might_need_process(source: &[u8]) -> bool {
    use memchr::memmem;
    if memmem::find(source, b"<<<").is_some() {
        return true;
    }
    let directive = memchr::memchr_iter(b'#', source).any(|at| {
        let d = source[at + 1..].trim_ascii_start();
        let rest = d
            .strip_prefix(b"include_next")
            .or_else(|| d.strip_prefix(b"include"));
        rest.and_then(header_name)
            .is_some_and(|(name, _)| is_system_header(name))
    });
    if directive {
        return true;
    }
    let followed_by_paren = |end: usize| {
        source[end..]
            .iter()
            .find(|c| !c.is_ascii_whitespace())
            .is_some_and(|&c| c == b'(')
    };
    let main = memmem::find_iter(source, b"main").any(|at| {
        let end = at + 4;
        let starts = at == 0 || !is_ident(source[at - 1]);
        let ends = source.get(end).is_none_or(|&c| !is_ident(c));
        if !(starts && ends && followed_by_paren(end)) {
            return false;
        }
        let before = source[..at].trim_ascii_end();
        [b"int".as_slice(), b"auto", b"void"].iter().any(|t| {
            before.ends_with(t) && {
                let s = before.len() - t.len();
                s == 0 || !is_ident(before[s - 1])
            }
        })
    });
    if main {
        return true;
    }
    memmem::find_iter(source, b"hip").any(|at| {
        let starts = at == 0 || !is_ident(source[at - 1]);
        let end = at + source[at..].iter().take_while(|&&c| is_ident(c)).count();
        starts && is_host_api(&source[at..end]) && followed_by_paren(end)
    })
}

/// Scans `source` (see the module documentation). Linear in its length; allocates the
/// source's length once.
pub fn scan(source: &[u8]) -> SourceScan {
    let code = blank_comments_and_literals(source);
    let mut out = SourceScan::default();
    let mut first = |found: Found| {
        let slot = if found.kind == FoundKind::OtherHeader {
            &mut out.other_header
        } else {
            &mut out.needs_process
        };
        // Directives are read before code: the earliest line wins.
        if slot.as_ref().is_none_or(|f| found.line < f.line) {
            *slot = Some(found);
        }
    };
    // Directives: a line whose code starts with `#`; the header's name is read from the
    // source itself, where the blanking left the quoted name.
    let mut start = 0;
    for (i, line) in code.split(|&b| b == b'\n').enumerate() {
        let original = &source[start..start + line.len()];
        start += line.len() + 1;
        let t = line.trim_ascii_start();
        let Some(d) = t.strip_prefix(b"#") else {
            continue;
        };
        let d = d.trim_ascii_start();
        let Some(rest) = d
            .strip_prefix(b"include_next")
            .or_else(|| d.strip_prefix(b"include"))
        else {
            continue;
        };
        let at = line.len() - rest.len();
        let Some(name) = header_name(&original[at..]) else {
            continue;
        };
        let (bare, shown) = name;
        let kind = if is_hip_header(bare) {
            continue;
        } else if is_system_header(bare) {
            FoundKind::SystemHeader
        } else {
            FoundKind::OtherHeader
        };
        first(Found {
            kind,
            text: String::from_utf8_lossy(shown).into_owned(),
            line: i + 1,
        });
    }
    // Host code: tokens of the code.
    let mut line = 1;
    let mut previous: &[u8] = b"";
    let mut i = 0;
    while i < code.len() {
        let b = code[i];
        if b == b'\n' {
            line += 1;
            i += 1;
        } else if b == b'<' && code[i..].starts_with(b"<<<") {
            first(Found {
                kind: FoundKind::Launch,
                text: "<<<".into(),
                line,
            });
            previous = b"";
            i += 3;
        } else if is_ident_start(b) {
            let end = i + code[i..].iter().take_while(|&&c| is_ident(c)).count();
            let word = &code[i..end];
            let open = code[end..]
                .iter()
                .find(|c| !c.is_ascii_whitespace())
                .is_some_and(|&c| c == b'(');
            if open && word == b"main" && matches!(previous, b"int" | b"auto" | b"void") {
                first(Found {
                    kind: FoundKind::Main,
                    text: format!("{} main(", String::from_utf8_lossy(previous)),
                    line,
                });
            } else if open && is_host_api(word) {
                first(Found {
                    kind: FoundKind::HostCall,
                    text: format!("{}(", String::from_utf8_lossy(word)),
                    line,
                });
            }
            previous = word;
            i = end;
        } else {
            if !b.is_ascii_whitespace() {
                previous = b"";
            }
            i += 1;
        }
    }
    out
}

fn is_ident_start(b: u8) -> bool {
    b.is_ascii_alphabetic() || b == b'_'
}

fn is_ident(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_'
}

/// `hip` and a capital letter: the HIP runtime's host API (`hipMalloc`, `hipMemcpyAsync`,
/// `hipLaunchKernelGGL`, `hipDeviceSynchronize`), not hipRTC's (`hiprtc...`) nor the device
/// built-ins HIP spells with an underscore or in capitals (`__hip_...`, `HIP_DYNAMIC_SHARED`).
fn is_host_api(word: &[u8]) -> bool {
    word.len() > 3 && word.starts_with(b"hip") && word[3].is_ascii_uppercase()
}

/// After `#include`: the header's name without its delimiters and with them (`<vector>`,
/// `"util.hpp"`); `None` for a computed include (`#include MACRO`).
fn header_name(rest: &[u8]) -> Option<(&[u8], &[u8])> {
    let rest = rest.trim_ascii_start();
    let close = match rest.first()? {
        b'"' => b'"',
        b'<' => b'>',
        _ => return None,
    };
    let end = rest[1..].iter().position(|&b| b == close)?;
    Some((&rest[1..1 + end], &rest[..end + 2]))
}

/// HIP's own headers: `hip/...` (`hip/hip_runtime.h`, `hip/hip_fp16.h`), which the in-process
/// compilers bring themselves (hipRTC's built-in runtime header, hipjit's NVRTC prelude).
fn is_hip_header(name: &[u8]) -> bool {
    name.starts_with(b"hip/")
}

/// The headers of the C++ standard library (C++23 and its C headers in C++ form).
pub const CXX_HEADERS: &[&str] = &[
    "algorithm",
    "any",
    "array",
    "atomic",
    "barrier",
    "bit",
    "bitset",
    "cassert",
    "ccomplex",
    "cctype",
    "cerrno",
    "cfenv",
    "cfloat",
    "charconv",
    "chrono",
    "cinttypes",
    "ciso646",
    "climits",
    "clocale",
    "cmath",
    "codecvt",
    "compare",
    "complex",
    "concepts",
    "condition_variable",
    "coroutine",
    "csetjmp",
    "csignal",
    "cstdalign",
    "cstdarg",
    "cstdbool",
    "cstddef",
    "cstdint",
    "cstdio",
    "cstdlib",
    "cstring",
    "ctgmath",
    "ctime",
    "cuchar",
    "cwchar",
    "cwctype",
    "deque",
    "exception",
    "execution",
    "expected",
    "filesystem",
    "flat_map",
    "flat_set",
    "format",
    "forward_list",
    "fstream",
    "functional",
    "future",
    "generator",
    "initializer_list",
    "iomanip",
    "ios",
    "iosfwd",
    "iostream",
    "istream",
    "iterator",
    "latch",
    "limits",
    "list",
    "locale",
    "map",
    "mdspan",
    "memory",
    "memory_resource",
    "mutex",
    "new",
    "numbers",
    "numeric",
    "optional",
    "ostream",
    "print",
    "queue",
    "random",
    "ranges",
    "ratio",
    "regex",
    "scoped_allocator",
    "semaphore",
    "set",
    "shared_mutex",
    "source_location",
    "span",
    "spanstream",
    "sstream",
    "stack",
    "stacktrace",
    "stdexcept",
    "stdfloat",
    "stop_token",
    "streambuf",
    "string",
    "string_view",
    "strstream",
    "syncstream",
    "system_error",
    "text_encoding",
    "thread",
    "tuple",
    "type_traits",
    "typeindex",
    "typeinfo",
    "unordered_map",
    "unordered_set",
    "utility",
    "valarray",
    "variant",
    "vector",
    "version",
];

/// The headers of the C standard library and the common POSIX and glibc ones (a name under
/// `sys/`, `bits/`, `linux/`, `asm/`, `arpa/`, `netinet/` or `net/` counts too).
pub const C_HEADERS: &[&str] = &[
    "assert.h",
    "complex.h",
    "ctype.h",
    "errno.h",
    "fenv.h",
    "float.h",
    "inttypes.h",
    "iso646.h",
    "limits.h",
    "locale.h",
    "math.h",
    "setjmp.h",
    "signal.h",
    "stdalign.h",
    "stdarg.h",
    "stdatomic.h",
    "stdbit.h",
    "stdbool.h",
    "stdckdint.h",
    "stddef.h",
    "stdint.h",
    "stdio.h",
    "stdlib.h",
    "stdnoreturn.h",
    "string.h",
    "tgmath.h",
    "threads.h",
    "time.h",
    "uchar.h",
    "wchar.h",
    "wctype.h",
    "aio.h",
    "alloca.h",
    "cpio.h",
    "dirent.h",
    "dlfcn.h",
    "endian.h",
    "err.h",
    "error.h",
    "execinfo.h",
    "fcntl.h",
    "features.h",
    "fnmatch.h",
    "getopt.h",
    "glob.h",
    "grp.h",
    "iconv.h",
    "langinfo.h",
    "libgen.h",
    "link.h",
    "malloc.h",
    "memory.h",
    "monetary.h",
    "mqueue.h",
    "netdb.h",
    "nl_types.h",
    "omp.h",
    "poll.h",
    "pthread.h",
    "pwd.h",
    "regex.h",
    "sched.h",
    "search.h",
    "semaphore.h",
    "spawn.h",
    "strings.h",
    "syslog.h",
    "tar.h",
    "termios.h",
    "ucontext.h",
    "ulimit.h",
    "unistd.h",
    "utime.h",
    "utmp.h",
    "values.h",
    "wordexp.h",
];

/// Whether `name` (as written between the delimiters of an `#include`) is a header of the C
/// or C++ standard library or of the system (see [`CXX_HEADERS`], [`C_HEADERS`]).
pub fn is_system_header(name: &[u8]) -> bool {
    let Ok(name) = std::str::from_utf8(name) else {
        return false;
    };
    let name = name.trim();
    [
        "sys/", "bits/", "linux/", "asm/", "arpa/", "netinet/", "net/",
    ]
    .iter()
    .any(|p| name.starts_with(p))
        || CXX_HEADERS.contains(&name)
        || C_HEADERS.contains(&name)
}

/// `source` with every comment and the contents of every string and character literal
/// replaced by spaces (line breaks kept, so offsets and lines are the source's). A raw string
/// (`R"delim(...)delim"`) is a literal to its end; a `'` after a digit or letter is a digit
/// separator (`1'000`), not a character literal.
fn blank_comments_and_literals(source: &[u8]) -> Vec<u8> {
    let mut out = source.to_vec();
    let blank = |out: &mut Vec<u8>, from: usize, to: usize| {
        for b in &mut out[from..to] {
            if *b != b'\n' {
                *b = b' ';
            }
        }
    };
    let n = source.len();
    let mut i = 0;
    while i < n {
        let b = source[i];
        let next = source.get(i + 1).copied();
        if b == b'/' && next == Some(b'/') {
            let end = source[i..]
                .iter()
                .position(|&c| c == b'\n')
                .map_or(n, |p| i + p);
            blank(&mut out, i, end);
            i = end;
        } else if b == b'/' && next == Some(b'*') {
            let end = source[i + 2..]
                .windows(2)
                .position(|w| w == b"*/")
                .map_or(n, |p| i + 2 + p + 2);
            blank(&mut out, i, end);
            i = end;
        } else if b == b'"' && i > 0 && source[i - 1] == b'R' && is_raw_prefix(source, i - 1) {
            // R"delim( ... )delim"
            let open = source[i + 1..].iter().position(|&c| c == b'(');
            let Some(open) = open.map(|p| i + 1 + p) else {
                blank(&mut out, i + 1, n);
                break;
            };
            let mut close = Vec::with_capacity(open - i + 1);
            close.push(b')');
            close.extend_from_slice(&source[i + 1..open]);
            close.push(b'"');
            let end = source[open..]
                .windows(close.len())
                .position(|w| w == close.as_slice())
                .map_or(n, |p| open + p + close.len());
            blank(&mut out, i + 1, end.saturating_sub(1).max(i + 1));
            i = end;
        } else if b == b'"' || (b == b'\'' && !(i > 0 && is_ident(source[i - 1]))) {
            // A literal to its closing quote, or to the end of the line when unterminated.
            let mut j = i + 1;
            while j < n && source[j] != b && source[j] != b'\n' {
                j += if source[j] == b'\\' { 2 } else { 1 };
            }
            let end = j.min(n);
            blank(&mut out, i + 1, end);
            i = end + 1;
        } else {
            i += 1;
        }
    }
    out
}

/// Whether the `R` at `r` starts a raw-string prefix (`R`, `LR`, `uR`, `UR`, `u8R`), not the
/// end of an identifier (`FOOR"..."` is not a raw string).
fn is_raw_prefix(source: &[u8], r: usize) -> bool {
    let before = &source[..r];
    let prefix_len = [b"u8".as_slice(), b"L", b"u", b"U", b""]
        .iter()
        .find(|p| before.ends_with(p))
        .map_or(0, |p| p.len());
    let start = r - prefix_len;
    start == 0 || !is_ident(source[start - 1])
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A finding as (kind, text, line).
    type Seen = Option<(FoundKind, String, usize)>;

    fn kinds(s: &str) -> (Seen, Seen) {
        let r = scan(s.as_bytes());
        let f = |f: Option<Found>| f.map(|f| (f.kind, f.text, f.line));
        (f(r.needs_process), f(r.other_header))
    }

    #[test]
    fn a_kernel_with_hips_own_headers_needs_nothing() {
        let s = "#include <hip/hip_runtime.h>\n#include \"hip/hip_fp16.h\"\n\
                 extern \"C\" __global__ void k(float* x) { x[threadIdx.x] *= 2; }\n";
        assert_eq!(kinds(s), (None, None));
    }

    #[test]
    fn main_host_calls_and_launches_are_host_code() {
        let (n, _) =
            kinds("#include <hip/hip_runtime.h>\n__global__ void k() {}\nint\nmain() {}\n");
        assert_eq!(n, Some((FoundKind::Main, "int main(".into(), 4)));
        let (n, _) = kinds("__global__ void k() {}\nvoid run(float* p) { hipMalloc(&p, 4); }\n");
        assert_eq!(n, Some((FoundKind::HostCall, "hipMalloc(".into(), 2)));
        let (n, _) = kinds("__global__ void k() {}\nvoid run() { k<<<1, 1>>>(); }\n");
        assert_eq!(n, Some((FoundKind::Launch, "<<<".into(), 2)));
        let (n, _) = kinds("void run() { hipLaunchKernelGGL (k, 1, 1, 0, 0); }\n");
        assert_eq!(n.unwrap().1, "hipLaunchKernelGGL(");
    }

    #[test]
    fn device_built_ins_and_calls_of_a_main_member_are_not_host_code() {
        let s = "#include <hip/hip_runtime.h>\n\
                 __global__ void k(int* x) { extern __shared__ int s[]; HIP_DYNAMIC_SHARED(int, d);\n\
                 x[hipThreadIdx_x] = __hip_ds_bpermute(0, 1); obj.main(); int main_ = 0; }\n\
                 void f() { hiprtcCreateProgram(0, 0, 0, 0, 0, 0); }\n";
        assert_eq!(kinds(s), (None, None));
    }

    #[test]
    fn system_headers_need_the_process_compiler_and_other_headers_are_reported() {
        let (n, o) = kinds("#include \"util.hpp\"\n#  include <vector>\n#include <cstdio>\n");
        assert_eq!(n, Some((FoundKind::SystemHeader, "<vector>".into(), 2)));
        assert_eq!(o, Some((FoundKind::OtherHeader, "\"util.hpp\"".into(), 1)));
        let (n, _) = kinds("#include \"stdio.h\"\n");
        assert_eq!(n.unwrap().0, FoundKind::SystemHeader);
        let (n, _) = kinds("#include <sys/time.h>\n");
        assert_eq!(n.unwrap().1, "<sys/time.h>");
        let (n, o) = kinds("#include <rocwmma/rocwmma.hpp>\n#include MACRO\n");
        assert_eq!(n, None);
        assert_eq!(o.unwrap().1, "<rocwmma/rocwmma.hpp>");
    }

    #[test]
    fn comments_and_literals_are_not_read_as_code() {
        let s = "// int main() { hipMalloc(0, 0); }\n/* #include <vector>\n k<<<1,1>>>(); */\n\
                 const char* src = \"int main() { hipMalloc(p, 4); }\";\n\
                 const char* raw = R\"k(\n#include <vector>\nint main() {}\n)k\";\n\
                 char c = '\"'; int n = 1'000'000; // \"\n\
                 __global__ void k() {}\n";
        assert_eq!(kinds(s), (None, None));
        // After a raw string, code is read again.
        let s = "const char* raw = R\"(int main(){})\";\nint main() {}\n";
        assert_eq!(kinds(s).0.unwrap().2, 2);
    }

    #[test]
    fn the_fast_look_finds_what_the_whole_scan_finds() {
        for s in [
            "#include <hip/hip_runtime.h>\n__global__ void k(int* x) { x[hipThreadIdx_x] = 1; }\n",
            "int main() {}\n",
            "auto main ( ) -> int { return 0; }\n",
            "void run() { hipMalloc(0, 4); }\n",
            "void run() { k<<<1, 1>>>(); }\n",
            "#include <vector>\n",
            "#  include_next \"stdio.h\"\n",
            "// int main() {}\n/* hipFree(0) */\n",
            "const char* s = \"#include <vector>\";\n",
            "int domain(int x); int main_(); obj.main(); void hipster();\n",
        ] {
            let whole = scan(s.as_bytes()).needs_process;
            assert_eq!(needs_process(s.as_bytes()), whole, "{s}");
            if whole.is_some() {
                assert!(might_need_process(s.as_bytes()), "{s}");
            }
        }
        // Nothing that could be host code: the whole scan is not run.
        assert!(!might_need_process(
            b"#include <hip/hip_runtime.h>\n#include \"util.hpp\"\n\
              __global__ void k(int* x) { x[hipThreadIdx_x] = HIP_SYMBOL(y); int domain = 0; }\n"
        ));
    }

    #[test]
    fn the_first_finding_in_source_order_is_kept() {
        let s = "#include <hip/hip_runtime.h>\n#include <iostream>\nint main() { hipFree(0); }\n";
        assert_eq!(kinds(s).0.unwrap().1, "<iostream>");
        let s = "int main() { hipFree(0); }\n#include <vector>\n";
        assert_eq!(kinds(s).0.unwrap().0, FoundKind::Main);
    }
}
