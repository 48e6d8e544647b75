//! What `cargo package` puts in the two published crates: what a user's build needs (sources,
//! build scripts, the pregenerated bindings, the testing runtime's C source, the README the
//! crate documentation includes) and nothing else: no tests, test data, scripts, benchmarks,
//! examples or fuzz targets. Reads `cargo package --list` (offline, no build).

use std::process::Command;

fn list(package: &str) -> Vec<String> {
    let out = Command::new(env!("CARGO"))
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .args([
            "package",
            "--list",
            "--offline",
            "--allow-dirty",
            "-p",
            package,
        ])
        .output()
        .expect("cargo runs");
    assert!(
        out.status.success(),
        "cargo package --list -p {package}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(str::to_owned)
        .collect()
}

const CARGO_FILES: [&str; 4] = [
    "Cargo.toml",
    "Cargo.toml.orig",
    "Cargo.lock",
    ".cargo_vcs_info.json",
];

fn check(package: &str, allowed: impl Fn(&str) -> bool, required: &[&str]) {
    let files = list(package);
    let extra: Vec<&String> = files
        .iter()
        .filter(|f| !CARGO_FILES.contains(&f.as_str()) && !allowed(f))
        .collect();
    assert!(extra.is_empty(), "{package} would publish {extra:?}");
    for r in required {
        assert!(
            files.iter().any(|f| f == r),
            "{package} lacks {r}: {files:?}"
        );
    }
}

#[test]
fn hipjit_publishes_sources_build_script_readme_and_the_testing_runtime_source() {
    check(
        "hipjit",
        |f| {
            (f.starts_with("src/") && f.ends_with(".rs"))
                || (f.starts_with("docs/") && f.ends_with(".md"))
                || [
                    "build.rs",
                    "README.md",
                    "CHANGELOG.md",
                    "tests/fixtures/fake_hip.c",
                ]
                .contains(&f)
        },
        &[
            "src/lib.rs",
            "docs/library.md",
            "docs/semver.md",
            "CHANGELOG.md",
            "src/testing/mod.rs",
            "src/code_object/occupancy/mod.rs",
            "build.rs",
            "README.md",
            "tests/fixtures/fake_hip.c",
        ],
    );
}

#[test]
fn hipjit_sys_publishes_sources_build_script_and_pregenerated_bindings() {
    check(
        "hipjit-sys",
        |f| {
            ["src/", "build/", "pregenerated/"]
                .iter()
                .any(|d| f.starts_with(d) && f.ends_with(".rs"))
                || f == "README.md"
                || f == "pregenerated/probe.txt"
        },
        &[
            "src/lib.rs",
            "build/main.rs",
            "pregenerated/hip_runtime_api.rs",
            // What a build without the `bindgen` feature reads in place of the probe.
            "pregenerated/pfn.rs",
            "pregenerated/probe.txt",
            "README.md",
        ],
    );
}
