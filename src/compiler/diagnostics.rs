//! The compiler's diagnostics, structured: clang's (`file:line:col: severity: message`, as
//! hipcc prints them) and nvcc's (EDG's `file(line): severity: message`), each with the include
//! chain printed before it, the source excerpt and caret lines printed after it, and the notes
//! that belong to it.
//!
//! The compiler's output is read as bytes: text that is not UTF-8 (a Latin-1 source line in an
//! excerpt) is kept lossily in the fields and, escaped, in [`Diagnostic::escaped`].
//!
//! clang prints the include chain ("In file included from kernel.hip:2:") only when it differs
//! from the previous diagnostic's; the parser gives every diagnostic its whole chain (the last
//! chain printed for its file). Diagnostics printed twice (once per target of a multi-target
//! compile) are kept once.

use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::fmt;

/// How serious a diagnostic is, as the compiler labels it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Severity {
    /// `fatal error:` (compilation stopped at once, e.g. a missing header); nvcc's
    /// `catastrophic error` and `nvcc fatal`.
    Fatal,
    /// `error:`.
    Error,
    /// `warning:`.
    Warning,
    /// `note:` (attached to the diagnostic before it).
    Note,
    /// `remark:`.
    Remark,
}

impl fmt::Display for Severity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Severity::Fatal => "fatal error",
            Severity::Error => "error",
            Severity::Warning => "warning",
            Severity::Note => "note",
            Severity::Remark => "remark",
        })
    }
}

/// One level of the include chain: the file and line of an `#include`.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct IncludedFrom {
    /// The including file, as the user knows it.
    pub file: String,
    /// The 1-based line of the `#include`.
    pub line: u32,
}

/// One diagnostic of the compiler, with its notes.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Diagnostic {
    /// How serious it is.
    pub severity: Severity,
    /// The file named by the diagnostic, as the user knows it: the source name given in the
    /// options (the user's path in `hipjit compile`), or the original include directory for a
    /// staged header. `None` for driver messages (`clang: error: ...`, `nvcc fatal : ...`).
    pub file: Option<String>,
    /// 1-based line, when the diagnostic has a location.
    pub line: Option<u32>,
    /// 1-based column, when the compiler gives one (clang does; nvcc does not).
    pub column: Option<u32>,
    /// The message text after `severity: ` (clang's `[-Wflag]` and nvcc's `[#177-D]` at the
    /// end).
    pub message: String,
    /// The notes that belong to it (`note: candidate function not viable...`), in order, each
    /// with its own location, chain and excerpt.
    #[serde(default)]
    pub notes: Vec<Diagnostic>,
    /// The include chain of `file`, outermost first: `kernel.hip:2` includes the header that
    /// includes `file`.
    #[serde(default)]
    pub included_from: Vec<IncludedFrom>,
    /// The lines the compiler printed under it: the source line, the caret line, fix-it hints.
    #[serde(default)]
    pub excerpt: Vec<String>,
    /// When the compiler's text of this diagnostic (its line and excerpt, not its notes) was
    /// not UTF-8: that text, lines joined by `\n`, with every byte outside valid UTF-8 written
    /// `\xNN` and a backslash written `\\`. `None` when it was UTF-8 (the fields are exact).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub escaped: Option<String>,
}

impl Diagnostic {
    /// A diagnostic with a location and message only.
    pub fn new(
        severity: Severity,
        file: Option<String>,
        line: Option<u32>,
        column: Option<u32>,
        message: impl Into<String>,
    ) -> Diagnostic {
        Diagnostic {
            severity,
            file,
            line,
            column,
            message: message.into(),
            notes: Vec::new(),
            included_from: Vec::new(),
            excerpt: Vec::new(),
            escaped: None,
        }
    }

    /// Whether it is an error (`error` or `fatal error`).
    pub fn is_error(&self) -> bool {
        matches!(self.severity, Severity::Error | Severity::Fatal)
    }

    /// Renames every file it names (its own, its notes', its include chain's) with `rename`,
    /// which returns `None` to keep a name.
    pub fn rename_files(&mut self, rename: &dyn Fn(&str) -> Option<String>) {
        if let Some(n) = self.file.as_deref().and_then(rename) {
            self.file = Some(n);
        }
        for i in &mut self.included_from {
            if let Some(n) = rename(&i.file) {
                i.file = n;
            }
        }
        for n in &mut self.notes {
            n.rename_files(rename);
        }
    }

    /// The diagnostic as a user reads it, clang's layout: the include chain (`In file included
    /// from F:L:`), `file:line:col: severity: message`, the excerpt, then each note the same
    /// way. Ends with a newline.
    pub fn render(&self) -> String {
        self.render_as(Layout::Clang)
    }

    /// [`Diagnostic::render`] in the layout of the compiler that printed it.
    pub fn render_as(&self, layout: Layout) -> String {
        let mut s = String::new();
        self.render_into(&mut s, layout);
        s
    }

    fn render_into(&self, s: &mut String, layout: Layout) {
        for i in &self.included_from {
            s.push_str(&format!("In file included from {}:{}:\n", i.file, i.line));
        }
        match (layout, &self.file, self.line) {
            (Layout::Nvcc, Some(file), Some(line)) => s.push_str(&format!(
                "{file}({line}): {}: {}",
                self.severity, self.message
            )),
            _ => s.push_str(&self.to_string()),
        }
        s.push('\n');
        for l in &self.excerpt {
            s.push_str(l);
            s.push('\n');
        }
        for n in &self.notes {
            n.render_into(s, layout);
        }
    }
}

/// How a located diagnostic's first line is written.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Layout {
    /// clang's `file:line:col: severity: message`.
    Clang,
    /// nvcc's (EDG's) `file(line): severity: message`.
    Nvcc,
}

impl fmt::Display for Diagnostic {
    /// The diagnostic's own line: `file:line:col: severity: message`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (&self.file, self.line, self.column) {
            (Some(file), Some(l), Some(c)) => write!(f, "{file}:{l}:{c}: ")?,
            (Some(file), Some(l), None) => write!(f, "{file}:{l}: ")?,
            (Some(file), _, _) => write!(f, "{file}: ")?,
            _ => {}
        }
        write!(f, "{}: {}", self.severity, self.message)
    }
}

/// Renders diagnostics one after the other ([`Diagnostic::render`]).
pub fn render_all(diagnostics: &[Diagnostic]) -> String {
    render_all_as(diagnostics, Layout::Clang)
}

/// Renders diagnostics one after the other in `layout` ([`Diagnostic::render_as`]).
pub fn render_all_as(diagnostics: &[Diagnostic], layout: Layout) -> String {
    diagnostics.iter().map(|d| d.render_as(layout)).collect()
}

/// The name of the cache-entry artefact holding a successful compile's diagnostics
/// (MessagePack of `Vec<Diagnostic>`), replayed on a disk hit.
pub const ARTEFACT: &str = "diagnostics.msgpack";

/// The [`ARTEFACT`] bytes of `diagnostics`; `None` when there are none (no artefact).
pub fn to_artefact(diagnostics: &[Diagnostic]) -> Option<Vec<u8>> {
    if diagnostics.is_empty() {
        return None;
    }
    rmp_serde::to_vec_named(diagnostics).ok()
}

/// The diagnostics of an [`ARTEFACT`]; none when it is absent or does not decode (an entry of
/// another hipjit version: the code object is what counts).
pub fn from_artefact(bytes: Option<&[u8]>) -> Vec<Diagnostic> {
    bytes
        .and_then(|b| rmp_serde::from_slice(b).ok())
        .unwrap_or_default()
}

/// `bytes` with every byte outside valid UTF-8 written `\xNN` and `\` written `\\`.
pub fn escape_bytes(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len());
    for chunk in bytes.utf8_chunks() {
        for c in chunk.valid().chars() {
            if c == '\\' {
                out.push_str("\\\\");
            } else {
                out.push(c);
            }
        }
        for b in chunk.invalid() {
            out.push_str(&format!("\\x{b:02x}"));
        }
    }
    out
}

const SEVERITIES: &[(&str, Severity)] = &[
    ("fatal error: ", Severity::Fatal),
    ("error: ", Severity::Error),
    ("warning: ", Severity::Warning),
    ("note: ", Severity::Note),
    ("remark: ", Severity::Remark),
];

/// What one line of compiler output is.
enum LineKind {
    /// A diagnostic's own line.
    Diagnostic(Diagnostic),
    /// One level of an include chain.
    IncludedFrom(IncludedFrom),
    /// A summary (`1 warning generated.`), a hint of the compiler's (`Remark: The warnings can
    /// be suppressed...`) or a blank line: it ends the excerpt of the diagnostic before.
    End,
    /// Anything else: part of the excerpt of the diagnostic before, if any.
    Other,
}

/// Accumulates diagnostics line by line (the part both compilers share).
struct Builder<'r> {
    rename: &'r dyn Fn(&str) -> String,
    out: Vec<Diagnostic>,
    /// The diagnostic being read, and whether its last note takes the excerpt lines.
    current: Option<Diagnostic>,
    in_note: bool,
    /// The raw text of the diagnostic (or note) being read, for `escaped`.
    raw: Vec<u8>,
    raw_utf8: bool,
    /// The chain printed since the last diagnostic.
    pending: Vec<IncludedFrom>,
    /// The last chain printed for each file.
    chains: HashMap<String, Vec<IncludedFrom>>,
    /// Whether excerpt lines are taken now (after a diagnostic, before an `End` line).
    taking: bool,
}

impl<'r> Builder<'r> {
    fn new(rename: &'r dyn Fn(&str) -> String) -> Self {
        Builder {
            rename,
            out: Vec::new(),
            current: None,
            in_note: false,
            raw: Vec::new(),
            raw_utf8: true,
            pending: Vec::new(),
            chains: HashMap::new(),
            taking: false,
        }
    }

    fn target(&mut self) -> Option<&mut Diagnostic> {
        let cur = self.current.as_mut()?;
        if self.in_note {
            cur.notes.last_mut()
        } else {
            Some(cur)
        }
    }

    fn close_raw(&mut self) {
        let escaped = (!self.raw_utf8).then(|| escape_bytes(&self.raw));
        if let Some(t) = self.target() {
            if t.escaped.is_none() {
                t.escaped = escaped;
            }
        }
        self.raw.clear();
        self.raw_utf8 = true;
    }

    fn flush(&mut self) {
        self.close_raw();
        if let Some(d) = self.current.take() {
            if !self.out.contains(&d) {
                self.out.push(d);
            }
        }
        self.in_note = false;
    }

    fn line(&mut self, raw: &[u8], kind: LineKind) {
        match kind {
            LineKind::Diagnostic(mut d) => {
                d.file = d.file.as_deref().map(|f| (self.rename)(f));
                let chain = std::mem::take(&mut self.pending);
                if let Some(file) = &d.file {
                    if chain.is_empty() {
                        d.included_from = self.chains.get(file).cloned().unwrap_or_default();
                    } else {
                        self.chains.insert(file.clone(), chain.clone());
                        d.included_from = chain;
                    }
                }
                if d.severity == Severity::Note && self.current.is_some() {
                    self.close_raw();
                    if let Some(cur) = self.current.as_mut() {
                        cur.notes.push(d);
                    }
                    self.in_note = true;
                } else {
                    self.flush();
                    self.current = Some(d);
                }
                self.push_raw(raw);
                self.taking = true;
            }
            LineKind::IncludedFrom(mut i) => {
                i.file = (self.rename)(&i.file);
                self.pending.push(i);
                self.taking = false;
            }
            LineKind::End => self.taking = false,
            LineKind::Other => {
                if self.taking {
                    let text = String::from_utf8_lossy(raw).into_owned();
                    self.push_raw(raw);
                    if let Some(t) = self.target() {
                        t.excerpt.push(text);
                    }
                }
            }
        }
    }

    fn push_raw(&mut self, raw: &[u8]) {
        if !self.raw.is_empty() {
            self.raw.push(b'\n');
        }
        self.raw.extend_from_slice(raw);
        self.raw_utf8 &= std::str::from_utf8(raw).is_ok();
    }

    fn finish(mut self) -> Vec<Diagnostic> {
        self.flush();
        self.out
    }
}

fn lines(output: &[u8]) -> impl Iterator<Item = &[u8]> {
    output
        .split(|&b| b == b'\n')
        .map(|l| l.strip_suffix(b"\r").unwrap_or(l))
}

/// Parses clang's diagnostics (hipcc's standard error, as bytes or text) into structured
/// diagnostics with their notes, include chains and excerpts. Lines before the first
/// diagnostic (a Python traceback of hipcc 5.2.3's `rocm_agent_enumerator`) and summaries are
/// skipped. `rename` maps a file name as the compiler printed it to the name the user knows.
pub fn parse(stderr: impl AsRef<[u8]>, rename: &dyn Fn(&str) -> String) -> Vec<Diagnostic> {
    let mut b = Builder::new(rename);
    for raw in lines(stderr.as_ref()) {
        let text = String::from_utf8_lossy(raw);
        let kind = clang_line(&text);
        b.line(raw, kind);
    }
    b.finish()
}

fn clang_line(line: &str) -> LineKind {
    if let Some(rest) = line.strip_prefix("In file included from ") {
        return included_from(rest).map_or(LineKind::Other, LineKind::IncludedFrom);
    }
    if let Some(rest) = line.trim_start().strip_prefix("from ") {
        // GCC's continuation form, which some drivers print.
        if line.starts_with(' ') {
            if let Some(i) = included_from(rest) {
                return LineKind::IncludedFrom(i);
            }
        }
    }
    if line.trim().is_empty() || is_summary(line) {
        return LineKind::End;
    }
    match clang_diagnostic(line) {
        Some(d) => LineKind::Diagnostic(d),
        None => LineKind::Other,
    }
}

/// `F:L:` or `F:L,` (the end of an `In file included from` line).
fn included_from(rest: &str) -> Option<IncludedFrom> {
    let rest = rest.trim_end().trim_end_matches([':', ',']);
    let (file, line) = rest.rsplit_once(':')?;
    Some(IncludedFrom {
        file: file.to_string(),
        line: line.parse().ok()?,
    })
}

/// `N warning(s) [and N error(s)] generated[ when compiling for gfx90a].`
fn is_summary(line: &str) -> bool {
    let l = line.trim();
    l.ends_with('.')
        && l.contains(" generated")
        && l.split(' ')
            .next()
            .is_some_and(|n| n.parse::<u32>().is_ok())
}

fn clang_diagnostic(line: &str) -> Option<Diagnostic> {
    // A message with no file and no driver name, as hipRTC's log has them ("error: cannot find
    // ROCm device library for gfx9-generic; ...", "warning: argument unused during
    // compilation: ...").
    if let Some((label, severity)) = SEVERITIES.iter().find(|(l, _)| line.starts_with(l)) {
        return Some(Diagnostic::new(
            *severity,
            None,
            None,
            None,
            &line[label.len()..],
        ));
    }
    // The earliest ": <severity>: " marker.
    let (pos, sev_len, severity) = SEVERITIES
        .iter()
        .filter_map(|(label, sev)| {
            let marker = format!(": {label}");
            line.find(&marker).map(|p| (p, marker.len(), *sev))
        })
        .min_by_key(|(p, _, _)| *p)?;
    let head = &line[..pos];
    let message = line[pos + sev_len..].to_string();
    // head is "file:line:col", "file:line", or a driver name such as "clang".
    let mut parts = head.rsplitn(3, ':');
    let last = parts.next()?;
    let mid = parts.next();
    let first = parts.next();
    let (file, line_no, column) = match (first, mid, last.parse::<u32>()) {
        (Some(file), Some(l), Ok(c)) if l.parse::<u32>().is_ok() => {
            (Some(file.to_string()), l.parse().ok(), Some(c))
        }
        (None, Some(file), Ok(l)) => (Some(file.to_string()), Some(l), None),
        (Some(a), Some(b), Ok(l)) => (Some(format!("{a}:{b}")), Some(l), None),
        _ => {
            // A driver message: "clang: error: ...", "ld.lld: error: ...". Anything with a
            // space before the marker is not a diagnostic line.
            if head.contains(' ') || head.is_empty() {
                return None;
            }
            (None, None, None)
        }
    };
    Some(Diagnostic::new(severity, file, line_no, column, message))
}

/// Parses nvcc's output (EDG's `file(line): error: message`, `file(line): warning #177-D:
/// message`, `nvcc fatal   : message`, `ptxas error   : message`), and NVRTC's program log
/// (the same EDG lines, and `nvrtc: error: message` for options), into structured diagnostics
/// with their excerpts; nvcc gives no column. `rename` maps a file name as nvcc printed it
/// to the name the user knows.
pub fn parse_nvcc(output: impl AsRef<[u8]>, rename: &dyn Fn(&str) -> String) -> Vec<Diagnostic> {
    let mut b = Builder::new(rename);
    for raw in lines(output.as_ref()) {
        let text = String::from_utf8_lossy(raw);
        let kind = nvcc_line(&text);
        b.line(raw, kind);
    }
    b.finish()
}

fn nvcc_line(line: &str) -> LineKind {
    let t = line.trim();
    if t.is_empty()
        || t.starts_with("Remark: The warnings can be suppressed")
        || (t.contains(" detected in the compilation of ") && t.ends_with('.'))
    {
        return LineKind::End;
    }
    for tool in [
        "nvcc",
        "nvrtc",
        "ptxas",
        "nvlink",
        "fatbinary",
        "cicc",
        "cudafe++",
    ] {
        if let Some(rest) = t.strip_prefix(tool) {
            // `nvcc fatal   : ...`, and NVRTC's `nvrtc: error: ...`.
            let rest = rest.trim_start();
            let rest = rest.strip_prefix(':').map_or(rest, str::trim_start);
            for (word, severity) in [
                ("fatal", Severity::Fatal),
                ("error", Severity::Error),
                ("warning", Severity::Warning),
                ("info", Severity::Remark),
            ] {
                if let Some(msg) = rest.strip_prefix(word) {
                    if let Some(msg) = msg.trim_start().strip_prefix(':') {
                        return LineKind::Diagnostic(Diagnostic::new(
                            severity,
                            None,
                            None,
                            None,
                            msg.trim(),
                        ));
                    }
                }
            }
        }
    }
    edg_diagnostic(line).map_or(LineKind::Other, LineKind::Diagnostic)
}

/// `FILE(LINE): SEVERITY[ #NNN[-D]]: MESSAGE`.
fn edg_diagnostic(line: &str) -> Option<Diagnostic> {
    let close = line.find("): ")?;
    let open = line[..close].rfind('(')?;
    let line_no: u32 = line[open + 1..close].parse().ok()?;
    let file = &line[..open];
    if file.is_empty() || file.starts_with(' ') {
        return None;
    }
    let rest = &line[close + 3..];
    let (label, message) = rest.split_once(": ")?;
    let (word, number) = match label.split_once(" #") {
        Some((w, n)) => (w, Some(n)),
        None => (label, None),
    };
    let severity = match word {
        "catastrophic error" | "fatal error" => Severity::Fatal,
        "error" | "internal error" => Severity::Error,
        "warning" => Severity::Warning,
        "remark" => Severity::Remark,
        "note" => Severity::Note,
        _ => return None,
    };
    let message = match number {
        Some(n) => format!("{message} [#{n}]"),
        None => message.to_string(),
    };
    Some(Diagnostic::new(
        severity,
        Some(file.to_string()),
        Some(line_no),
        None,
        message,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_severity_at_the_start_of_a_line_is_a_diagnostic_without_a_file() {
        let d = parse(
            "error: unknown argument: '-fno-such'\nwarning: argument unused during compilation: '-MF x'\n",
            &|f| f.to_owned(),
        );
        let got: Vec<_> = d
            .iter()
            .map(|d| (d.severity, d.file.clone(), d.message.as_str()))
            .collect();
        assert_eq!(
            got,
            [
                (Severity::Error, None, "unknown argument: '-fno-such'"),
                (
                    Severity::Warning,
                    None,
                    "argument unused during compilation: '-MF x'"
                ),
            ]
        );
    }

    #[test]
    fn nvrtcs_option_errors_are_diagnostics() {
        let d = parse_nvcc(
            "nvrtc: error: invalid value for --gpu-architecture (-arch)\n",
            &|f| f.to_owned(),
        );
        assert_eq!(d.len(), 1, "{d:?}");
        assert_eq!(
            (d[0].severity, d[0].file.as_deref(), d[0].message.as_str()),
            (
                Severity::Error,
                None,
                "invalid value for --gpu-architecture (-arch)"
            )
        );
    }

    fn same(s: &str) -> String {
        s.to_string()
    }

    #[test]
    fn located_error_is_parsed_with_file_line_column_and_excerpt() {
        let d = parse(
            "kernel.hip:3:5: error: use of undeclared identifier 'y'\n    y = 1;\n    ^\n1 error generated when compiling for gfx90a.\n",
            &same,
        );
        let mut want = Diagnostic::new(
            Severity::Error,
            Some("kernel.hip".into()),
            Some(3),
            Some(5),
            "use of undeclared identifier 'y'",
        );
        want.excerpt = vec!["    y = 1;".into(), "    ^".into()];
        assert_eq!(d, [want]);
    }

    #[test]
    fn driver_error_has_no_location() {
        let d = parse(
            "clang: error: invalid target ID 'gfx942'; format is ...\n",
            &same,
        );
        assert_eq!(d.len(), 1);
        assert_eq!(d[0].file, None);
        assert_eq!(d[0].severity, Severity::Error);
        assert_eq!(d[0].message, "invalid target ID 'gfx942'; format is ...");
    }

    #[test]
    fn lines_before_the_first_diagnostic_and_summaries_are_skipped() {
        let text =
            "Traceback (most recent call last):\n  File \"/usr/bin/x\", line 3, in <module>\n\
                    1 error generated when compiling for gfx90a.\n";
        assert!(parse(text, &same).is_empty());
    }

    #[test]
    fn include_chain_is_given_to_every_diagnostic_of_the_header() {
        let text = "In file included from kernel.hip:2:\nIn file included from include/0/a.h:1:\n\
                    include/0/b.h:2:38: warning: unused variable 'u' [-Wunused-variable]\n\
                    int u;\n    ^\n\
                    include/0/b.h:3:1: warning: second\n\
                    kernel.hip:5:1: error: third\n";
        let d = parse(text, &|f: &str| f.replace("include/0", "/src/inc"));
        assert_eq!(d.len(), 3);
        let chain = vec![
            IncludedFrom {
                file: "kernel.hip".into(),
                line: 2,
            },
            IncludedFrom {
                file: "/src/inc/a.h".into(),
                line: 1,
            },
        ];
        assert_eq!(d[0].file.as_deref(), Some("/src/inc/b.h"));
        assert_eq!(d[0].included_from, chain);
        assert_eq!(d[0].excerpt, ["int u;", "    ^"]);
        assert_eq!(d[1].included_from, chain);
        assert!(d[2].included_from.is_empty());
        assert!(d[0].render().starts_with(
            "In file included from kernel.hip:2:\nIn file included from /src/inc/a.h:1:\n/src/inc/b.h:2:38: warning"
        ));
    }

    #[test]
    fn notes_attach_to_the_diagnostic_before_them_with_their_excerpts() {
        let text = "k.hip:4:3: error: no matching function for call to 'f'\n  f(1, 2);\n  ^\n\
                    k.hip:1:6: note: candidate function not viable\nvoid f(int);\n     ^\n";
        let d = parse(text, &same);
        assert_eq!(d.len(), 1);
        assert_eq!(d[0].excerpt.len(), 2);
        assert_eq!(d[0].notes.len(), 1);
        assert_eq!(d[0].notes[0].line, Some(1));
        assert_eq!(d[0].notes[0].excerpt, ["void f(int);", "     ^"]);
    }

    #[test]
    fn non_utf8_excerpt_is_lossy_with_an_escaped_form() {
        let text = b"k.cu(3): error: bad\n  int x = \"\xa9\";\n          ^\n\n";
        let d = parse_nvcc(&text[..], &same);
        assert_eq!(d.len(), 1);
        assert_eq!(d[0].excerpt[0], "  int x = \"\u{fffd}\";");
        let e = d[0].escaped.as_deref().expect("an escaped form");
        assert!(e.contains("\\xa9"), "{e}");
    }

    #[test]
    fn diagnostics_repeated_per_target_are_kept_once() {
        let text = "k.hip:1:1: warning: w\nx\n^\n1 warning generated when compiling for gfx906.\n\
                    k.hip:1:1: warning: w\nx\n^\n1 warning generated when compiling for gfx90a.\n";
        assert_eq!(parse(text, &same).len(), 1);
    }

    #[test]
    fn nvcc_warning_error_and_driver_lines_are_parsed() {
        let text = "a.h(2): warning #177-D: variable \"u\" was declared but never referenced\n  int u;\n      ^\n\n\
                    Remark: The warnings can be suppressed with \"-diag-suppress <warning-number>\"\n\n\
                    kernel.cu(3): error: identifier \"y\" is undefined\n  y = 1;\n  ^\n\n\
                    1 error detected in the compilation of \"kernel.cu\".\n";
        let d = parse_nvcc(text, &|f: &str| f.replace("kernel.cu", "/u/k.hip"));
        assert_eq!(d.len(), 2);
        assert_eq!(d[0].severity, Severity::Warning);
        assert_eq!((d[0].line, d[0].column), (Some(2), None));
        assert!(d[0].message.ends_with("[#177-D]"), "{}", d[0].message);
        assert_eq!(d[0].excerpt, ["  int u;", "      ^"]);
        assert_eq!(d[1].file.as_deref(), Some("/u/k.hip"));
        assert!(d[1].is_error());
        let f = parse_nvcc("nvcc fatal   : Unknown option '-mcumode'\n", &same);
        assert_eq!(f[0].severity, Severity::Fatal);
        assert_eq!(f[0].message, "Unknown option '-mcumode'");
    }

    #[test]
    fn artefact_round_trips() {
        let d = parse("k.hip:1:2: warning: w\n x\n ^\n", &same);
        assert_eq!(from_artefact(to_artefact(&d).as_deref()), d);
        assert_eq!(to_artefact(&[]), None);
    }
}
