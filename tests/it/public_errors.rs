//! Every public error type of hipjit converts into `hipjit::Error` and is named by
//! `hipjit::from_errors!`, so that a downstream crate's `?` converts it in one step; read from
//! the public API as `docs/public-api.txt` lists it (kept current by `scripts/public-api.sh`,
//! checked in the doc step) and from the macro's text in `src/error.rs`. An error type added
//! without its conversion fails here, naming it, unless it is one of [`COMPONENTS`].

use std::collections::BTreeSet;
use std::path::Path;

/// Public error types no public function returns alone: each is a part of another error (the
/// one named) or the answer of a diagnostic call, so `?` never meets it in a downstream crate.
const COMPONENTS: &[(&str, &str)] = &[
    ("Error", "hipjit::Error itself"),
    (
        "Refusal",
        "a frozen bundle's reason, inside JitError::Strict",
    ),
    (
        "Unanswered",
        "RemoteCache::server_info's answer, a diagnostic",
    ),
    ("MissingKernel", "inside CodeObjectError::KernelNotFound"),
    (
        "MissingDeviceLibrary",
        "inside CompilerError::MissingDeviceLibrary",
    ),
    (
        "UnsupportedTarget",
        "inside CompilerError::UnsupportedTarget",
    ),
    ("HostCompilerError", "inside NvccError"),
    ("IdentityError", "inside CompilerError"),
    ("UnsafeProgramPath", "inside CompilerError"),
    ("UnsafeVariable", "inside CompilerError"),
    (
        "UnknownStd",
        "CxxStd's FromStr error, inside OptionsError where hipjit parses one",
    ),
    (
        "BadCompilerChoice",
        "CompilerChoice's FromStr error, inside JitError where hipjit parses one",
    ),
];

fn last_segment(path: &str) -> String {
    let path = path.split('<').next().unwrap_or(path);
    path.rsplit("::").next().unwrap_or(path).trim().to_string()
}

#[test]
fn every_public_error_converts_into_error_and_from_errors_names_it() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let api = std::fs::read_to_string(root.join("docs/public-api.txt")).unwrap();
    let errors: BTreeSet<String> = api
        .lines()
        .filter_map(|l| l.strip_prefix("impl Error for "))
        .map(last_segment)
        .collect();
    let converting: BTreeSet<String> = api
        .lines()
        .filter_map(|l| {
            l.strip_prefix("impl From<")?
                .strip_suffix("> for hipjit::Error")
        })
        .map(last_segment)
        .collect();
    assert!(
        errors.len() > 20 && converting.len() > 20,
        "{errors:?} {converting:?}"
    );
    let components: BTreeSet<String> = COMPONENTS.iter().map(|(n, _)| n.to_string()).collect();
    let missing: Vec<&String> = errors
        .iter()
        .filter(|e| !converting.contains(*e) && !components.contains(*e))
        .collect();
    assert!(
        missing.is_empty(),
        "public error types that do not convert into hipjit::Error: {missing:?} (add the \
         conversion in src/error.rs and the type to from_errors!, or to COMPONENTS with why)"
    );
    let stale: Vec<&String> = components.iter().filter(|c| !errors.contains(*c)).collect();
    assert!(
        stale.is_empty(),
        "COMPONENTS names types that are gone: {stale:?}"
    );

    // Both copies of from_errors! (with and without the `testing` feature) name each of them.
    let src = std::fs::read_to_string(root.join("src/error.rs")).unwrap();
    let copies: Vec<BTreeSet<String>> = src
        .split("macro_rules! from_errors {")
        .skip(1)
        .map(|m| {
            let list = &m[m.find("$wrap;").unwrap() + 6..m.find(");").unwrap()];
            list.split(',')
                .map(|t| last_segment(t.trim()))
                .filter(|t| !t.is_empty())
                .collect()
        })
        .collect();
    assert_eq!(
        copies.len(),
        2,
        "two copies of from_errors! in src/error.rs"
    );
    for (i, named) in copies.iter().enumerate() {
        let mut expected = converting.clone();
        if i == 1 {
            expected.remove("TestingError");
        }
        assert_eq!(
            named,
            &expected,
            "from_errors! copy {} in src/error.rs",
            i + 1
        );
    }
}
