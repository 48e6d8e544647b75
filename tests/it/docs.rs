//! The README and the guide in `docs/`: every relative link names a file or directory of the
//! repository, and every `#anchor` a heading of the file it points into (as GitHub spells
//! anchors: lower case, punctuation but `-` and `_` dropped, spaces as `-`). The guide's Rust
//! blocks are compiled as doctests (`src/lib.rs`, `guide_doctests`); this test keeps its
//! cross-references from rotting when text moves between files.

use std::path::{Path, PathBuf};

/// The markdown files checked: README.md, CHANGELOG.md and docs/*.md.
fn documents(root: &Path) -> Vec<PathBuf> {
    let mut files = vec![root.join("README.md")];
    if root.join("CHANGELOG.md").exists() {
        files.push(root.join("CHANGELOG.md"));
    }
    let mut docs: Vec<PathBuf> = std::fs::read_dir(root.join("docs"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "md"))
        .collect();
    docs.sort();
    files.extend(docs);
    files
}

/// The text outside fenced code blocks.
fn prose(text: &str) -> String {
    let mut out = String::new();
    let mut fenced = false;
    for line in text.lines() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
            continue;
        }
        if !fenced {
            out.push_str(line);
            out.push('\n');
        }
    }
    out
}

/// GitHub's anchor of a heading's text.
fn anchor(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter(|c| c.is_alphanumeric() || *c == '-' || *c == '_' || *c == ' ')
        .map(|c| if c == ' ' { '-' } else { c })
        .collect()
}

/// The anchors of a markdown file's headings.
fn anchors(text: &str) -> Vec<String> {
    prose(text)
        .lines()
        .filter_map(|l| {
            let hashes = l.len() - l.trim_start_matches('#').len();
            (hashes > 0 && l[hashes..].starts_with(' ')).then(|| anchor(&l[hashes..]))
        })
        .collect()
}

/// The targets of the inline links `[text](target)` of a markdown file's prose.
fn links(text: &str) -> Vec<String> {
    let prose = prose(text);
    let mut out = Vec::new();
    let mut rest = prose.as_str();
    while let Some(i) = rest.find("](") {
        rest = &rest[i + 2..];
        if let Some(end) = rest.find(')') {
            let target = &rest[..end];
            if !target.contains(char::is_whitespace) {
                out.push(target.to_owned());
            }
            rest = &rest[end..];
        }
    }
    out
}

#[test]
fn every_relative_link_and_anchor_of_the_readme_and_the_guide_resolves() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut broken = Vec::new();
    let mut checked = 0;
    for doc in documents(root) {
        let text = std::fs::read_to_string(&doc).unwrap();
        for target in links(&text) {
            if target.contains("://") || target.starts_with("mailto:") {
                continue;
            }
            checked += 1;
            let (path, fragment) = match target.split_once('#') {
                Some((p, f)) => (p, Some(f)),
                None => (target.as_str(), None),
            };
            let file = if path.is_empty() {
                doc.clone()
            } else {
                doc.parent().unwrap().join(path)
            };
            let name = doc.strip_prefix(root).unwrap().display().to_string();
            if !file.exists() {
                broken.push(format!("{name}: ({target}): no file {}", file.display()));
                continue;
            }
            if let Some(f) = fragment {
                let Ok(t) = std::fs::read_to_string(&file) else {
                    broken.push(format!(
                        "{name}: ({target}): an anchor into a non-text file"
                    ));
                    continue;
                };
                if !anchors(&t).iter().any(|a| a == f) {
                    broken.push(format!("{name}: ({target}): no heading #{f} there"));
                }
            }
        }
    }
    assert!(
        checked > 50,
        "only {checked} links found: the scan is broken"
    );
    assert!(
        broken.is_empty(),
        "{} broken links:\n{}",
        broken.len(),
        broken.join("\n")
    );
}

#[test]
fn the_anchor_rule_is_githubs() {
    assert_eq!(anchor("HIP's NVIDIA platform"), "hips-nvidia-platform");
    assert_eq!(anchor("The `hipjit` command"), "the-hipjit-command");
    assert_eq!(
        anchor("Header/runtime compatibility"),
        "headerruntime-compatibility"
    );
    assert_eq!(
        links("see [a](docs/x.md#y) and [b](c)\n```rust\n[no](z)\n```\n[d](e f)"),
        vec!["docs/x.md#y", "c"]
    );
}
