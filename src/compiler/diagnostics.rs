//! Parsing clang's diagnostics (`file:line:col: severity: message`) out of the compiler's
//! stderr.

use serde::{Deserialize, Serialize};
use std::fmt;

/// How serious a diagnostic is, as clang labels it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Severity {
    /// `fatal error:` (compilation stopped at once, e.g. a missing header).
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

/// One diagnostic line from the compiler.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Diagnostic {
    /// The file named by the diagnostic, as the user knows it: the source name given in the
    /// options, or the original include directory for a staged header. `None` for driver
    /// messages (`clang: error: ...`).
    pub file: Option<String>,
    /// 1-based line, when the diagnostic has a location.
    pub line: Option<u32>,
    /// 1-based column, when the diagnostic has a location.
    pub column: Option<u32>,
    /// Its severity.
    pub severity: Severity,
    /// The message text after `severity: `.
    pub message: String,
}

impl fmt::Display for Diagnostic {
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

const SEVERITIES: &[(&str, Severity)] = &[
    ("fatal error: ", Severity::Fatal),
    ("error: ", Severity::Error),
    ("warning: ", Severity::Warning),
    ("note: ", Severity::Note),
    ("remark: ", Severity::Remark),
];

/// Parses every diagnostic line in `stderr`; other lines (source excerpts, carets, summaries,
/// tracebacks) are skipped. `rename` maps a file name as the compiler printed it to the name
/// the user knows.
pub fn parse(stderr: &str, rename: &dyn Fn(&str) -> String) -> Vec<Diagnostic> {
    stderr
        .lines()
        .filter_map(|l| parse_line(l, rename))
        .collect()
}

fn parse_line(line: &str, rename: &dyn Fn(&str) -> String) -> Option<Diagnostic> {
    // Find the earliest ": <severity>: " marker.
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
            (Some(rename(file)), l.parse().ok(), Some(c))
        }
        (None, Some(file), Ok(l)) => (Some(rename(file)), Some(l), None),
        _ => {
            // A driver message: "clang: error: ...", "clang++: error: ...". Anything with a
            // space before the marker is not a diagnostic line.
            if head.contains(' ') || head.is_empty() {
                return None;
            }
            (None, None, None)
        }
    };
    Some(Diagnostic {
        file,
        line: line_no,
        column,
        severity,
        message,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn same(s: &str) -> String {
        s.to_string()
    }

    #[test]
    fn located_error_is_parsed_with_file_line_column() {
        let d = parse(
            "kernel.hip:3:5: error: use of undeclared identifier 'y'\n",
            &same,
        );
        assert_eq!(
            d,
            [Diagnostic {
                file: Some("kernel.hip".into()),
                line: Some(3),
                column: Some(5),
                severity: Severity::Error,
                message: "use of undeclared identifier 'y'".into()
            }]
        );
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
    fn excerpts_summaries_and_tracebacks_are_skipped() {
        let text = "    x[i] = y;\n           ^\n1 error generated when compiling for gfx90a.\n\
                    Traceback (most recent call last):\n  File \"/usr/bin/x\", line 3, in <module>\n";
        assert!(parse(text, &same).is_empty());
    }

    #[test]
    fn fatal_error_and_rename_apply() {
        let d = parse(
            "include/0/a.h:1:10: fatal error: 'b.h' file not found\n",
            &|f: &str| f.replace("include/0", "/src/inc"),
        );
        assert_eq!(d[0].severity, Severity::Fatal);
        assert_eq!(d[0].file.as_deref(), Some("/src/inc/a.h"));
        assert_eq!(d[0].line, Some(1));
    }
}
