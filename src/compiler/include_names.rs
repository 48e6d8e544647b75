//! The names a source or header asks the preprocessor to look up: the quoted or bracketed
//! names of its `#include`, `#include_next` and `#import` directives and of its
//! `__has_include` and `__has_include_next` tests, and the first directive or test whose name
//! is computed (a macro), which no lexical scan can know.
//!
//! The scan is lexical and conservative, as a cache key needs it: a directive inside `#if 0`
//! counts (one name too many only makes a lookup stat one more path); comments are skipped
//! (`/* */` across lines too). A directive continued with backslash-newline is not joined.

/// How a name was written: `"x.h"` (looked up beside the including file first) or `<x.h>`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Delimiter {
    /// `"x.h"`.
    Quoted,
    /// `<x.h>`.
    Bracketed,
}

/// What [`scan`] found in one text.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct IncludeNames {
    /// Each name looked up, in order of appearance, with its delimiter and 1-based line
    /// (repeats kept).
    pub names: Vec<(Vec<u8>, Delimiter, usize)>,
    /// The first directive or test whose name is computed (`#include MACRO`,
    /// `__has_include(MACRO)`), as written (trimmed), with its 1-based line.
    pub computed: Option<(String, usize)>,
}

/// After `#include` or `__has_include(`: the quoted or bracketed name and its delimiter, or
/// `None` when the name is computed.
fn name_at(rest: &[u8]) -> Option<(&[u8], Delimiter)> {
    let rest = rest.trim_ascii_start();
    let (close, delimiter) = match rest.first()? {
        b'"' => (b'"', Delimiter::Quoted),
        b'<' => (b'>', Delimiter::Bracketed),
        _ => return None,
    };
    let end = rest[1..].iter().position(|&b| b == close)?;
    Some((&rest[1..1 + end], delimiter))
}

/// `text` as the preprocessor reads its lines: each backslash-newline removed (the line joined
/// to the next, a newline put back after it so that line numbers stay), comments blanked
/// (`//` to the end of the line, `/* */` across lines), string and character literals and the
/// names of `#include` lines kept whole (a `/*` or `//` inside one is no comment), and the
/// digraph `%:` read as `#`.
fn as_preprocessed(text: &[u8]) -> Vec<u8> {
    // Continuations first, as translation phase 2 does: `#include "a\<newline>.h"`.
    let mut joined = Vec::with_capacity(text.len());
    let mut pending_newlines = 0;
    let mut i = 0;
    while i < text.len() {
        if text[i] == b'\\' && text.get(i + 1) == Some(&b'\n') {
            pending_newlines += 1;
            i += 2;
            continue;
        }
        if text[i] == b'\\' && text.get(i + 1) == Some(&b'\r') && text.get(i + 2) == Some(&b'\n') {
            pending_newlines += 1;
            i += 3;
            continue;
        }
        joined.push(text[i]);
        if text[i] == b'\n' {
            joined.extend(std::iter::repeat_n(b'\n', pending_newlines));
            pending_newlines = 0;
        }
        i += 1;
    }
    let text = &joined[..];
    let mut out = Vec::with_capacity(text.len());
    let mut i = 0;
    let mut line_start = true;
    while i < text.len() {
        let c = text[i];
        if text[i..].starts_with(b"//") {
            while i < text.len() && text[i] != b'\n' {
                i += 1;
            }
        } else if text[i..].starts_with(b"/*") {
            i += 2;
            while i < text.len() && !text[i..].starts_with(b"*/") {
                if text[i] == b'\n' {
                    out.push(b'\n');
                }
                i += 1;
            }
            i = (i + 2).min(text.len());
            out.push(b' ');
        } else if c == b'"' || c == b'\'' {
            // A literal (or a quoted header name), to its closing quote on this line.
            out.push(c);
            i += 1;
            while i < text.len() && text[i] != c && text[i] != b'\n' {
                if text[i] == b'\\' && c == b'\'' && i + 1 < text.len() {
                    out.push(text[i]);
                    i += 1;
                }
                out.push(text[i]);
                i += 1;
            }
            if i < text.len() && text[i] == c {
                out.push(c);
                i += 1;
            }
        } else if c == b'<' && line_is_include(&out) {
            // A bracketed header name: `<a//b.h>` holds no comment.
            while i < text.len() && text[i] != b'>' && text[i] != b'\n' {
                out.push(text[i]);
                i += 1;
            }
        } else if line_start && text[i..].starts_with(b"%:") {
            out.push(b'#');
            i += 2;
        } else {
            out.push(c);
            i += 1;
        }
        if c == b'\n' {
            line_start = true;
        } else if !c.is_ascii_whitespace() {
            line_start = false;
        }
    }
    out
}

/// Whether the line being built at the end of `out` is an `#include`-like directive up to here.
fn line_is_include(out: &[u8]) -> bool {
    let line = match out.iter().rposition(|&b| b == b'\n') {
        Some(at) => &out[at + 1..],
        None => out,
    };
    let t = line.trim_ascii_start();
    t.strip_prefix(b"#").is_some_and(|d| {
        let d = d.trim_ascii_start();
        d.starts_with(b"include") || d.starts_with(b"import")
    }) || line.windows(13).any(|w| w == b"__has_include")
}

/// Whether `before`, the line up to a `__has_include` not followed by `(`, only asks whether it
/// is defined: `#ifdef`, `#ifndef`, `defined(` or `defined `.
fn tests_definedness(before: &[u8]) -> bool {
    let t = before.trim_ascii();
    let d = t.strip_prefix(b"#").map(<[u8]>::trim_ascii_start);
    d.is_some_and(|d| d == b"ifdef" || d == b"ifndef")
        || t.ends_with(b"defined(")
        || t.ends_with(b"defined")
        || t.ends_with(b"defined (")
}

/// The names `text` looks up, and its first computed one.
pub fn scan(text: &[u8]) -> IncludeNames {
    let mut out = IncludeNames::default();
    let text = as_preprocessed(text);
    for (i, line) in text.split(|&b| b == b'\n').enumerate() {
        let computed = |out: &mut IncludeNames| {
            out.computed.get_or_insert_with(|| {
                (
                    String::from_utf8_lossy(line.trim_ascii()).into_owned(),
                    i + 1,
                )
            });
        };
        let t = line.trim_ascii_start();
        if let Some(d) = t.strip_prefix(b"#") {
            let d = d.trim_ascii_start();
            let rest = d
                .strip_prefix(b"include_next")
                .or_else(|| d.strip_prefix(b"include"))
                .or_else(|| d.strip_prefix(b"import"));
            // The keyword alone (`#includes` is another word).
            let rest = rest.filter(|r| {
                !r.first()
                    .is_some_and(|b| b.is_ascii_alphanumeric() || *b == b'_')
            });
            if let Some(rest) = rest {
                match name_at(rest) {
                    Some((name, delimiter)) => out.names.push((name.to_vec(), delimiter, i + 1)),
                    // A macro (an identifier) names the file; anything else is no directive.
                    None if rest
                        .trim_ascii_start()
                        .first()
                        .is_some_and(|b| b.is_ascii_alphabetic() || *b == b'_') =>
                    {
                        computed(&mut out)
                    }
                    None => {}
                }
            }
        }
        let mut at = line;
        while let Some(pos) = at.windows(13).position(|w| w == b"__has_include") {
            let rest = &at[pos + 13..];
            let rest = rest
                .strip_prefix(b"_next")
                .unwrap_or(rest)
                .trim_ascii_start();
            match rest.strip_prefix(b"(").and_then(name_at) {
                Some((name, delimiter)) => out.names.push((name.to_vec(), delimiter, i + 1)),
                // `#ifdef __has_include` and `defined(__has_include)` name no file; anything
                // else (`#define HI __has_include`, then `HI("x.h")`) hides the name.
                None if !rest.starts_with(b"(") && tests_definedness(&at[..pos]) => {}
                None => computed(&mut out),
            }
            at = rest;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn directives_and_tests_give_their_names_and_macros_are_computed() {
        let s = scan(
            b"#include \"a.h\"\n  #  include <sub/b.h>\n#include_next <c.h>\n\
              #if __has_include(<d.h>) && __has_include_next(\"e.h\")\n#endif\n\
              #ifdef __has_include\n#if defined(__has_include)\n#endif\n#endif\n\
              // #include MACRO_IN_A_COMMENT\n/* #include ALSO\n #include's */ #import \"f.h\"\n\
              #include NAME\n",
        );
        let names: Vec<(&[u8], Delimiter)> =
            s.names.iter().map(|(n, d, _)| (n.as_slice(), *d)).collect();
        assert_eq!(
            names,
            [
                (&b"a.h"[..], Delimiter::Quoted),
                (b"sub/b.h", Delimiter::Bracketed),
                (b"c.h", Delimiter::Bracketed),
                (b"d.h", Delimiter::Bracketed),
                (b"e.h", Delimiter::Quoted),
                (b"f.h", Delimiter::Quoted),
            ]
        );
        assert_eq!(s.computed, Some(("#include NAME".to_owned(), 13)));
        assert_eq!(
            scan(b"#if __has_include(HDR)\n").computed,
            Some(("#if __has_include(HDR)".to_owned(), 1))
        );
    }
}
