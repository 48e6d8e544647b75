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

/// What the elements a pointer parameter points at are, as far as the launch checks them
/// against an array's element type.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ElemKind {
    /// `float`, `double`, `half`, `_Float16`: a floating-point type of the element's size.
    Float,
    /// `__hip_bfloat16`, `__nv_bfloat16`, `__bf16`...
    BFloat16,
    /// An integer type of either sign (`int`, `unsigned`, `int64_t`, `size_t`...): an array of
    /// integers of its size is taken whatever its sign.
    Integer,
    /// `bool`: an array of `bool` or of 1-byte integers.
    Bool,
    /// `char`: any 1-byte element (an integer of either sign, `bool`).
    Byte,
    /// A pointer (`T**`): an array of 8-byte integers (addresses).
    Address,
}

/// A pointer parameter's pointee.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Pointee {
    /// The pointee's type as written, qualifiers dropped (`float`, `float4`, `MyStruct`).
    pub name: String,
    /// Whether it is `const` (`const float*`, `float const*`): the kernel does not write
    /// through it.
    pub is_const: bool,
    /// The element type, when hipjit knows it: kind, size of one component in bytes, and
    /// components per element (4 for `float4`, 1 for `float`). `None` for `void` (any array)
    /// and for a type hipjit does not know (a struct, a typedef): the element type is then
    /// not checked.
    pub element: Option<(ElemKind, u32, u32)>,
}

/// The pointee of the pointer type `ctype` as [`parameters`] writes it (`const float*`,
/// `float* __restrict__`, `float4*`, `int**`); `None` when `ctype` is not a pointer.
pub fn pointee(ctype: &str) -> Option<Pointee> {
    let star = ctype.rfind('*')?;
    let inner = &ctype[..star];
    let words: Vec<&str> = inner
        .split(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == '*' || c == ':'))
        .filter(|w| !w.is_empty())
        .collect();
    let is_qualifier = |w: &str| {
        matches!(
            w,
            "const" | "volatile" | "__restrict__" | "__restrict" | "restrict" | "struct" | "class"
        )
    };
    // `const` binds to the pointee when it comes before the last `*` at its own level: in
    // `const float* const*` the pointee is `const float*`, itself not const.
    let pointer_pointee = inner.contains('*');
    let is_const = if pointer_pointee {
        let last = inner.rfind('*').unwrap_or(0);
        inner[last + 1..].split_whitespace().any(|w| w == "const")
    } else {
        words.contains(&"const")
    };
    let type_words: Vec<&str> = words.iter().copied().filter(|w| !is_qualifier(w)).collect();
    let name = type_words.join(" ");
    let element = if pointer_pointee {
        Some((ElemKind::Address, 8, 1))
    } else {
        element_of(&type_words)
    };
    Some(Pointee {
        name,
        is_const,
        element,
    })
}

/// The element type of a pointee named by `words` (qualifiers removed).
fn element_of(words: &[&str]) -> Option<(ElemKind, u32, u32)> {
    let w: Vec<&str> = words
        .iter()
        .map(|w| w.trim_start_matches("std::"))
        .collect();
    let one = |k, s| Some((k, s, 1));
    match w.as_slice() {
        ["void"] => None,
        ["float"] => one(ElemKind::Float, 4),
        ["double"] => one(ElemKind::Float, 8),
        ["half"] | ["__half"] | ["_Float16"] | ["float16_t"] => one(ElemKind::Float, 2),
        ["__hip_bfloat16"] | ["hip_bfloat16"] | ["__nv_bfloat16"] | ["__bf16"] | ["bfloat16_t"] => {
            one(ElemKind::BFloat16, 2)
        }
        ["bool"] => one(ElemKind::Bool, 1),
        ["char"] => one(ElemKind::Byte, 1),
        ["signed", "char"] | ["unsigned", "char"] => one(ElemKind::Integer, 1),
        ["hipFloatComplex"] | ["hipComplex"] | ["cuFloatComplex"] | ["cuComplex"] => {
            Some((ElemKind::Float, 4, 2))
        }
        ["hipDoubleComplex"] | ["cuDoubleComplex"] => Some((ElemKind::Float, 8, 2)),
        [single] => integer_name(single)
            .map(|s| (ElemKind::Integer, s, 1))
            .or_else(|| vector(single)),
        multi => integer_words(multi).map(|s| (ElemKind::Integer, s, 1)),
    }
}

/// The size of the integer type named by one word (`int`, `size_t`, `uint16_t`...).
fn integer_name(w: &str) -> Option<u32> {
    Some(match w {
        "short" => 2,
        "int" | "signed" | "unsigned" => 4,
        "long" => 8,
        "size_t" | "ssize_t" | "ptrdiff_t" | "intptr_t" | "uintptr_t" => 8,
        _ => {
            let digits = w
                .strip_suffix("_t")?
                .trim_start_matches('u')
                .strip_prefix("int")?;
            let digits = digits
                .strip_prefix("_least")
                .or_else(|| digits.strip_prefix("_fast"))
                .unwrap_or(digits);
            match digits {
                "8" => 1,
                "16" => 2,
                "32" => 4,
                "64" => 8,
                _ => return None,
            }
        }
    })
}

/// The size of an integer type of several words (`unsigned int`, `long long`, `unsigned short
/// int`...): LP64, as hipcc and nvcc compile for Linux.
fn integer_words(words: &[&str]) -> Option<u32> {
    if !words.iter().all(|w| {
        matches!(
            *w,
            "signed" | "unsigned" | "int" | "long" | "short" | "char"
        )
    }) {
        return None;
    }
    Some(if words.contains(&"char") {
        1
    } else if words.contains(&"short") {
        2
    } else if words.contains(&"long") {
        8
    } else {
        4
    })
}

/// A HIP/CUDA vector type (`float4`, `int2`, `uchar4`, `double2`, `half2`...): its
/// component's kind and size, and its component count.
fn vector(w: &str) -> Option<(ElemKind, u32, u32)> {
    let lanes_at = w.rfind(|c: char| !c.is_ascii_digit())? + 1;
    let (base, lanes) = w.split_at(lanes_at);
    let lanes: u32 = lanes.parse().ok().filter(|n| matches!(n, 1..=4))?;
    let (kind, size) = match base {
        "float" => (ElemKind::Float, 4),
        "double" => (ElemKind::Float, 8),
        "half" | "__half" => (ElemKind::Float, 2),
        "__hip_bfloat16" | "__nv_bfloat16" | "__bf16" => (ElemKind::BFloat16, 2),
        "char" | "uchar" => (ElemKind::Integer, 1),
        "short" | "ushort" => (ElemKind::Integer, 2),
        "int" | "uint" => (ElemKind::Integer, 4),
        "long" | "ulong" | "longlong" | "ulonglong" => (ElemKind::Integer, 8),
        _ => return None,
    };
    Some((kind, size, lanes))
}
