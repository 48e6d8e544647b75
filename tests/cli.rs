//! The `hipjit` command as a user runs it: the built binary, real code objects from
//! `tests/data/code-objects/`, the machine's real hipcc and HIP runtime (Debian's 5.2.3 here),
//! a temporary `HIPJIT_CACHE_DIR` per test. Exit statuses: 0 ok, 1 the work failed, 2 usage.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn data(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/code-objects")
        .join(name)
}

/// Runs the binary with `args`, the cache in `cache` (or a fresh directory that is dropped).
fn hipjit_in(cache: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_hipjit"))
        .args(args)
        .env("HIPJIT_CACHE_DIR", cache)
        .env_remove("HIPJIT_HIPCC")
        .output()
        .expect("the hipjit binary runs")
}

fn hipjit(args: &[&str]) -> Output {
    let cache = tempfile::tempdir().expect("a temporary directory");
    hipjit_in(cache.path(), args)
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn json(o: &Output) -> serde_json::Value {
    serde_json::from_slice(&o.stdout).unwrap_or_else(|e| {
        panic!(
            "stdout is not JSON ({e}):\n{}\nstderr:\n{}",
            stdout(o),
            stderr(o)
        )
    })
}

fn path_str(p: &Path) -> &str {
    p.to_str().expect("a UTF-8 path")
}

// ---------------------------------------------------------------------------------------------
// inspect

#[test]
fn inspect_text_shows_target_version_kernels_and_lds() {
    let f = data("kernels-gfx90a.hsaco");
    let o = hipjit(&["inspect", path_str(&f)]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let out = stdout(&o);
    assert!(out.contains("target ID:           gfx90a"), "{out}");
    assert!(out.contains("code object version: v4"), "{out}");
    assert!(out.contains("kernel block_sum"), "{out}");
    // block_sum declares __shared__ float tile[256]: 1024 bytes of LDS.
    assert!(out.contains("LDS 1024 B"), "{out}");
    assert!(out.contains("kernel _Z5scalePdd"), "{out}");
}

#[test]
fn inspect_json_has_schema_version_and_argument_layout() {
    let f = data("kernels-gfx90a.hsaco");
    let o = hipjit(&["inspect", "--json", path_str(&f)]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let v = json(&o);
    assert_eq!(v["schema_version"], 1);
    assert_eq!(v["container"], "elf");
    assert_eq!(v["target_id"], "gfx90a");
    assert_eq!(v["code_object_version"], 4);
    let kernels = v["kernels"].as_array().expect("kernels is an array");
    let mixed = kernels
        .iter()
        .find(|k| k["name"] == "mixed")
        .expect("kernel mixed");
    // mixed(char, double, int2, float4, Params (alignas 16), float*, const int*): the AMDGPU
    // kernarg layout puts each at its natural alignment.
    let layout: Vec<(u64, u64)> = mixed["args"]
        .as_array()
        .expect("args")
        .iter()
        .take(7)
        .map(|a| (a["offset"].as_u64().unwrap(), a["size"].as_u64().unwrap()))
        .collect();
    assert_eq!(
        layout,
        [
            (0, 1),
            (8, 8),
            (16, 8),
            (32, 16),
            (48, 16),
            (64, 8),
            (72, 8)
        ]
    );
    assert_eq!(mixed["args"][5]["value_kind"], "global_buffer");
    assert_eq!(mixed["args"][5]["address_space"], "global");
    assert_eq!(mixed["wavefront_size"], 64);
}

#[test]
fn inspect_bundle_with_target_picks_that_entry() {
    let f = data("kernels-gfx942-gfx1100-v3.ccob");
    let o = hipjit(&["inspect", "--json", "--target", "gfx1100", path_str(&f)]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let v = json(&o);
    assert_eq!(v["container"], "compressed-offload-bundle");
    assert_eq!(v["target_id"], "gfx1100");
    // gfx1100 runs wave32 by default.
    assert_eq!(v["kernels"][0]["wavefront_size"], 32);
}

#[test]
fn inspect_bundle_with_several_entries_and_no_target_fails_naming_them() {
    let f = data("kernels-gfx942-gfx1100.hipfb");
    let o = hipjit(&["inspect", path_str(&f)]);
    assert_eq!(o.status.code(), Some(1));
    let err = stderr(&o);
    assert!(err.contains("kernels-gfx942-gfx1100.hipfb"), "{err}");
    assert!(err.contains("gfx942") && err.contains("gfx1100"), "{err}");
}

#[test]
fn inspect_of_a_text_file_names_the_format_and_exits_1() {
    let f = Path::new(env!("CARGO_MANIFEST_DIR")).join("Cargo.toml");
    let o = hipjit(&["inspect", path_str(&f)]);
    assert_eq!(o.status.code(), Some(1));
    let err = stderr(&o);
    assert!(err.contains("Cargo.toml"), "{err}");
    assert!(err.contains("the input is text"), "{err}");
    assert!(o.stdout.is_empty());
}

#[test]
fn inspect_of_a_missing_file_names_it_and_exits_1() {
    let o = hipjit(&["inspect", "/nonexistent/hipjit-test.hsaco"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        stderr(&o).contains("/nonexistent/hipjit-test.hsaco: cannot read the file"),
        "{}",
        stderr(&o)
    );
}

#[test]
fn inspect_with_a_malformed_target_id_is_a_usage_error() {
    let f = data("kernels-gfx90a.hsaco");
    let o = hipjit(&["inspect", "--target", "gfx90a:bogus+", path_str(&f)]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("gfx90a:bogus+"), "{}", stderr(&o));
}

#[test]
fn inspect_raw_elf_for_another_target_fails_naming_both() {
    let f = data("kernels-gfx90a.hsaco");
    let o = hipjit(&["inspect", "--target", "gfx942", path_str(&f)]);
    assert_eq!(o.status.code(), Some(1));
    let err = stderr(&o);
    assert!(err.contains("gfx90a") && err.contains("gfx942"), "{err}");
}

// ---------------------------------------------------------------------------------------------
// usage

#[test]
fn unknown_subcommand_exits_2() {
    let o = hipjit(&["frobnicate"]);
    assert_eq!(o.status.code(), Some(2));
}

#[test]
fn missing_argument_exits_2() {
    let o = hipjit(&["inspect"]);
    assert_eq!(o.status.code(), Some(2));
}

#[test]
fn help_documents_the_exit_statuses() {
    let o = hipjit(&["--help"]);
    assert_eq!(o.status.code(), Some(0));
    let out = stdout(&o);
    assert!(out.contains("Exit status:"), "{out}");
    assert!(out.contains("2  usage error"), "{out}");
}
