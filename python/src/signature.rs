//! A kernel's parameter list read from its source: the names and C types of an `extern "C"`
//! kernel's parameters, which the code object's metadata leaves out (hipcc records neither
//! `.name` nor `.type_name` unless asked; a cubin records only sizes).
//!
//! The reader looks for `NAME(` after `__global__` within the same declaration, takes the
//! balanced parenthesised list and splits it at top-level commas; the last identifier of each
//! parameter is its name, the rest its type. It is a reader of declarations as people write
//! them, not a C++ parser: a kernel declared through a macro, or whose parameter list does not
//! have as many entries as the metadata has explicit arguments, gets no signature, and the
//! arguments are then described by the metadata alone (index, size, kind). The types are used
//! only to convert Python `int`/`float` values as C would and to refuse the wrong one; sizes
//! always come from the metadata.

/// What a parameter's C type says about the values it takes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scalar {
    /// A pointer (`T*`): device memory.
    Pointer,
    /// `float`, `double`.
    Float,
    /// `half`, `__half`, `_Float16`.
    Half,
    /// `__hip_bfloat16`, `hip_bfloat16`, `__nv_bfloat16`.
    BFloat16,
    /// A signed integer type (`int`, `long`, `int64_t`, `char`...).
    Signed,
    /// An unsigned integer type (`unsigned`, `uint32_t`, `size_t`...), or `bool`.
    Unsigned,
    /// Anything else (a struct, a vector type, a typedef or template parameter hipjit does not
    /// know): the value's size decides.
    Other,
}

/// One parameter: its name and type as written.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Param {
    /// The parameter's name (empty when unnamed).
    pub name: String,
    /// Its type, whitespace collapsed (`const float*`).
    pub ctype: String,
    /// What the type says.
    pub scalar: Scalar,
}

/// The parameters of the `__global__` function `kernel` in `source`, when exactly one
/// declaration of it can be read (definitions and prototypes agreeing count as one).
pub fn parameters(source: &str, kernel: &str) -> Option<Vec<Param>> {
    if kernel.is_empty() || kernel.starts_with("_Z") {
        return None;
    }
    let text = strip_comments(source);
    let bytes = text.as_bytes();
    let mut found: Option<Vec<Param>> = None;
    let mut from = 0;
    while let Some(pos) = text[from..].find(kernel).map(|p| p + from) {
        from = pos + kernel.len();
        let before_ok = pos == 0 || !is_ident(bytes[pos - 1]);
        let after = skip_ws(bytes, pos + kernel.len());
        if !before_ok || after >= bytes.len() || bytes[after] != b'(' {
            continue;
        }
        if pos + kernel.len() < bytes.len() && is_ident(bytes[pos + kernel.len()]) {
            continue;
        }
        // The declaration starts after the last `;`, `}` or `{` before the name.
        let start = text[..pos].rfind([';', '}', '{']).map_or(0, |p| p + 1);
        if !text[start..pos].contains("__global__") {
            continue;
        }
        let end = matching_paren(bytes, after)?;
        let params = split_params(&text[after + 1..end])?;
        match &found {
            Some(f) if *f != params => return None,
            _ => found = Some(params),
        }
    }
    found
}

fn is_ident(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_'
}

fn skip_ws(b: &[u8], mut i: usize) -> usize {
    while i < b.len() && b[i].is_ascii_whitespace() {
        i += 1;
    }
    i
}

/// The source with `//` and `/* */` comments replaced by spaces and string literals kept.
fn strip_comments(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'/' && b.get(i + 1) == Some(&b'/') {
            while i < b.len() && b[i] != b'\n' {
                i += 1;
            }
        } else if b[i] == b'/' && b.get(i + 1) == Some(&b'*') {
            i += 2;
            while i < b.len() && !(b[i] == b'*' && b.get(i + 1) == Some(&b'/')) {
                i += 1;
            }
            i = (i + 2).min(b.len());
            out.push(b' ');
        } else if b[i] == b'"' {
            out.push(b[i]);
            i += 1;
            while i < b.len() && b[i] != b'"' {
                if b[i] == b'\\' && i + 1 < b.len() {
                    out.push(b[i]);
                    i += 1;
                }
                out.push(b[i]);
                i += 1;
            }
            if i < b.len() {
                out.push(b[i]);
                i += 1;
            }
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    // Only ASCII bytes were removed or added: still UTF-8.
    String::from_utf8(out).unwrap_or_default()
}

fn matching_paren(b: &[u8], open: usize) -> Option<usize> {
    let mut depth = 0usize;
    for (i, &c) in b.iter().enumerate().skip(open) {
        match c {
            b'(' => depth += 1,
            b')' => {
                depth -= 1;
                if depth == 0 {
                    return Some(i);
                }
            }
            _ => {}
        }
    }
    None
}

fn split_params(list: &str) -> Option<Vec<Param>> {
    let trimmed = list.trim();
    if trimmed.is_empty() || trimmed == "void" {
        return Some(Vec::new());
    }
    let mut parts = Vec::new();
    let (mut depth, mut start) = (0i32, 0usize);
    for (i, c) in list.char_indices() {
        match c {
            '(' | '<' | '[' | '{' => depth += 1,
            ')' | '>' | ']' | '}' => depth -= 1,
            ',' if depth == 0 => {
                parts.push(&list[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    parts.push(&list[start..]);
    parts.into_iter().map(param).collect()
}

fn param(p: &str) -> Option<Param> {
    // A default argument (`int n = 4`) is not part of the type.
    let p = p.split('=').next().unwrap_or(p);
    let words = p.split_whitespace().collect::<Vec<_>>().join(" ");
    if words.is_empty() || words.contains("...") || words.contains('(') {
        return None;
    }
    let bytes = words.as_bytes();
    let mut end = bytes.len();
    if words.ends_with(']') {
        return None;
    }
    let mut start = end;
    while start > 0 && is_ident(bytes[start - 1]) {
        start -= 1;
    }
    let last = &words[start..end];
    let head = words[..start].trim_end();
    // `float x` names `x`; `float*` or `const float` alone are unnamed.
    let (name, ctype) = if head.is_empty() || is_type_word(last) {
        end = bytes.len();
        (String::new(), words[..end].to_string())
    } else {
        (last.to_owned(), head.to_owned())
    };
    let ctype = ctype.replace(" *", "*").replace(" &", "&");
    let scalar = classify(&ctype);
    Some(Param {
        name,
        ctype,
        scalar,
    })
}

fn is_type_word(w: &str) -> bool {
    matches!(
        w,
        "int"
            | "float"
            | "double"
            | "char"
            | "short"
            | "long"
            | "unsigned"
            | "signed"
            | "bool"
            | "const"
            | "volatile"
            | "__restrict__"
            | "restrict"
            | "size_t"
    )
}

/// What a C type says about the Python values it takes.
pub fn classify(ctype: &str) -> Scalar {
    if ctype.contains('*') {
        return Scalar::Pointer;
    }
    let words: Vec<&str> = ctype
        .split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .filter(|w| !w.is_empty() && !matches!(*w, "const" | "volatile" | "__restrict__" | "std"))
        .collect();
    match words.as_slice() {
        ["float"] | ["double"] | ["long", "double"] => Scalar::Float,
        ["half"] | ["__half"] | ["_Float16"] | ["float16_t"] => Scalar::Half,
        ["__hip_bfloat16"] | ["hip_bfloat16"] | ["__nv_bfloat16"] | ["__bf16"] | ["bfloat16_t"] => {
            Scalar::BFloat16
        }
        ["bool"] | ["size_t"] | ["uintptr_t"] => Scalar::Unsigned,
        w if w.first() == Some(&"unsigned") => Scalar::Unsigned,
        [u] if u.starts_with("uint") && u.ends_with("_t") => Scalar::Unsigned,
        [s] if s.starts_with("int") && s.ends_with("_t") => Scalar::Signed,
        ["ptrdiff_t"] | ["ssize_t"] | ["intptr_t"] | ["char"] => Scalar::Signed,
        w if !w.is_empty()
            && w.iter()
                .all(|x| matches!(*x, "signed" | "int" | "long" | "short" | "char")) =>
        {
            Scalar::Signed
        }
        _ => Scalar::Other,
    }
}
