//! The layout of the integration tests: every file of `tests/it`, `tests/real` and
//! `tests/isolated` is a module its binary declares (a file left out would never compile nor
//! run), and `tests/` holds no `*.rs` of its own (cargo would build each as one more test
//! binary).

use std::path::Path;

/// The modules `dir/main.rs` declares (`mod name;` lines, whatever attributes precede them).
fn declared(dir: &Path) -> Vec<String> {
    std::fs::read_to_string(dir.join("main.rs"))
        .unwrap()
        .lines()
        .filter_map(|l| l.trim().strip_prefix("mod ")?.strip_suffix(';'))
        .map(str::to_owned)
        .collect()
}

#[test]
fn every_test_file_is_a_declared_module_and_tests_has_no_loose_files() {
    let tests = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests");
    let mut problems = Vec::new();
    for binary in ["it", "real", "isolated"] {
        let dir = tests.join(binary);
        let modules = declared(&dir);
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            let Some(stem) = path.file_stem().and_then(|s| s.to_str()) else {
                continue;
            };
            if path.extension().is_some_and(|e| e == "rs")
                && stem != "main"
                && !modules.iter().any(|m| m == stem)
            {
                problems.push(format!(
                    "{} has no `mod {stem};` in its main.rs",
                    path.display()
                ));
            }
        }
    }
    for entry in std::fs::read_dir(&tests).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "rs") {
            problems.push(format!(
                "{} would build a test binary of its own: make it a module of tests/it",
                path.display()
            ));
        }
    }
    assert!(problems.is_empty(), "{problems:#?}");
}
