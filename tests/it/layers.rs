//! The layers of `src/` run one way: each top-level module names (through `crate::` paths,
//! the crate root's re-exports included, outside `#[cfg(test)]` code and comments) only the
//! modules its row of `docs/architecture.md` allows, the table itself has no circle, and every
//! top-level module has a row.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).to_path_buf()
}

/// The table of `docs/architecture.md`: module -> the modules it may name.
fn allowed() -> BTreeMap<String, BTreeSet<String>> {
    let doc = std::fs::read_to_string(root().join("docs/architecture.md")).unwrap();
    let mut table = BTreeMap::new();
    let mut in_table = false;
    for line in doc.lines() {
        if line.starts_with("| module |") {
            in_table = true;
            continue;
        }
        if !in_table || line.starts_with("|--") {
            continue;
        }
        let Some(row) = line.strip_prefix('|') else {
            break;
        };
        let cells: Vec<&str> = row.split('|').map(str::trim).collect();
        let name = cells[0].trim_matches('`').to_owned();
        let may: BTreeSet<String> = cells[2]
            .split(',')
            .map(|m| m.trim().trim_matches('`').to_owned())
            .filter(|m| !m.is_empty())
            .collect();
        table.insert(name, may);
    }
    assert!(
        table.len() > 5,
        "no layer table found in docs/architecture.md"
    );
    table
}

/// `text` without comments and `#[cfg(test)]` items (a module or
/// function block, or a `mod name;` line).
fn code_only(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let b = text.as_bytes();
    let mut i = 0;
    while i < b.len() {
        if text[i..].starts_with("//") {
            i += text[i..].find('\n').unwrap_or(text.len() - i);
        } else if text[i..].starts_with("/*") {
            i += text[i..].find("*/").map_or(text.len() - i, |n| n + 2);
        } else if text[i..].starts_with("#[cfg(test)]") {
            // Skip the attribute and the item it guards: up to its `;` or its matched block.
            let mut j = i + "#[cfg(test)]".len();
            let mut depth = 0usize;
            while j < b.len() {
                match b[j] {
                    b';' if depth == 0 => {
                        j += 1;
                        break;
                    }
                    b'{' => depth += 1,
                    b'}' => {
                        depth -= 1;
                        if depth == 0 {
                            j += 1;
                            break;
                        }
                    }
                    _ => {}
                }
                j += 1;
            }
            i = j;
        } else {
            out.push(b[i] as char);
            i += 1;
        }
    }
    out
}

/// The names a module's code reaches below `crate::`: `crate::a::b` gives `a`,
/// `crate::{a, b::c}` gives `a` and `b`.
fn crate_paths(code: &str) -> Vec<String> {
    let mut names = Vec::new();
    let ident = |s: &str| -> String {
        s.chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_')
            .collect()
    };
    let mut rest = code;
    while let Some(at) = rest.find("crate::") {
        rest = &rest[at + "crate::".len()..];
        if let Some(group) = rest.strip_prefix('{') {
            let mut depth = 1;
            let mut item_start = true;
            for (k, c) in group.char_indices() {
                match c {
                    '{' => depth += 1,
                    '}' => {
                        depth -= 1;
                        if depth == 0 {
                            break;
                        }
                    }
                    ',' if depth == 1 => {
                        item_start = true;
                        continue;
                    }
                    c if c.is_whitespace() => continue,
                    _ => {}
                }
                if item_start && depth == 1 {
                    names.push(ident(&group[k..]));
                    item_start = false;
                }
            }
        } else {
            names.push(ident(rest));
        }
    }
    names
}

/// The crate root's re-exports: public name -> the top-level module it comes from
/// (`pub use safe::{device, ...}`, `pub use fs::{read as file_read}`, and each
/// `#[macro_export]` macro, which lives at the root, by the module defining it).
fn reexports(tops: &BTreeSet<String>) -> BTreeMap<String, String> {
    let lib = code_only(&std::fs::read_to_string(root().join("src/lib.rs")).unwrap());
    let mut map = BTreeMap::new();
    for stmt in lib.split(';') {
        let Some(rest) = stmt.trim().strip_prefix("pub use ") else {
            continue;
        };
        let (module, items) = rest.split_once("::").unwrap_or((rest, rest));
        if !tops.contains(module) {
            continue;
        }
        for item in items.trim_matches(|c| c == '{' || c == '}').split(',') {
            let item = item.trim();
            let public = item.rsplit(" as ").next().unwrap().trim();
            let public = public.rsplit("::").next().unwrap();
            if !public.is_empty() {
                map.insert(public.to_owned(), module.to_owned());
            }
        }
    }
    for (top, file) in sources() {
        let text = std::fs::read_to_string(&file).unwrap();
        for (at, _) in text.match_indices("#[macro_export]") {
            if let Some(m) = text[at..].find("macro_rules!") {
                let name: String = text[at + m + "macro_rules!".len()..]
                    .trim_start()
                    .chars()
                    .take_while(|c| c.is_alphanumeric() || *c == '_')
                    .collect();
                map.insert(name, top.clone());
            }
        }
    }
    map
}

/// Every `.rs` file of `src/` but `lib.rs` and the command's (`src/bin/`), with its top-level
/// module.
fn sources() -> Vec<(String, PathBuf)> {
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
        for e in std::fs::read_dir(dir).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                walk(&p, out);
            } else if p.extension().is_some_and(|e| e == "rs") {
                out.push(p);
            }
        }
    }
    let src = root().join("src");
    let mut files = Vec::new();
    walk(&src, &mut files);
    files.sort();
    files
        .into_iter()
        .filter_map(|f| {
            let rel = f.strip_prefix(&src).unwrap().to_path_buf();
            let first = rel.components().next()?.as_os_str().to_str()?.to_owned();
            if first == "lib.rs" || first == "bin" {
                return None;
            }
            Some((first.trim_end_matches(".rs").to_owned(), f))
        })
        .collect()
}

#[test]
fn every_top_level_module_names_only_what_its_layer_allows() {
    let table = allowed();
    let tops: BTreeSet<String> = sources().into_iter().map(|(t, _)| t).collect();
    let reexported = reexports(&tops);
    let mut problems = Vec::new();
    for top in &tops {
        if !table.contains_key(top) {
            problems.push(format!(
                "src/{top} has no row in docs/architecture.md's table: place it in a layer"
            ));
        }
    }
    for (top, file) in sources() {
        let code = code_only(&std::fs::read_to_string(&file).unwrap());
        let may = table.get(&top).cloned().unwrap_or_default();
        for name in crate_paths(&code) {
            let Some(target) = tops
                .get(&name)
                .cloned()
                .or_else(|| reexported.get(&name).cloned())
            else {
                continue; // `crate::sys`, `crate::prelude`: hip-sys or the root itself
            };
            if target != top && !may.contains(&target) {
                problems.push(format!(
                    "{} names crate::{name} ({target}), which {top} may not name",
                    file.strip_prefix(root()).unwrap().display()
                ));
            }
        }
    }
    problems.sort();
    problems.dedup();
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn the_layer_table_has_no_circle() {
    let table = allowed();
    // Repeatedly remove modules that name nothing left; a circle is what remains.
    let mut left = table.clone();
    loop {
        let leaves: Vec<String> = left
            .iter()
            .filter(|(_, may)| may.iter().all(|m| !left.contains_key(m)))
            .map(|(n, _)| n.clone())
            .collect();
        if leaves.is_empty() {
            break;
        }
        for l in leaves {
            left.remove(&l);
        }
    }
    assert!(
        left.is_empty(),
        "the table's rows name each other in a circle: {left:?}"
    );
    for (name, may) in &table {
        for m in may {
            assert!(
                table.contains_key(m),
                "{name} may name {m}, which has no row"
            );
        }
    }
}

/// The checker sees what it must: a path through a group, a re-export, and nothing inside
/// comments or test code.
#[test]
fn the_checker_reads_groups_and_skips_comments_and_tests() {
    let code = code_only(
        "use crate::{a::X, b};\n// crate::c\n/* crate::d */\n#[cfg(test)]\nmod tests { use crate::e; }\n\
         #[cfg(test)]\nmod more;\nfn f() { crate::g::h(); }\n",
    );
    assert_eq!(crate_paths(&code), ["a", "b", "g"]);
}
