//! The `hipjit` command as a user runs it: the built binary, real code objects from
//! `tests/data/code-objects/`, the machine's real hipcc and HIP runtime (Debian's 5.2.3 here),
//! a temporary `HIPJIT_CACHE_DIR` per test. Exit statuses: 0 ok, 1 the work failed, 2 usage.

use crate::common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use common::toolchain::{pypi_nvcc, saxpy};

/// Runs the binary with `args`, the cache in `cache` (or a fresh directory that is dropped).
fn hipjit_in(cache: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_hipjit"))
        .args(args)
        .env("HIPJIT_CACHE_DIR", cache)
        .env_remove("HIPJIT_HIPCC")
        .env_remove("HIPJIT_COMPILER")
        .env_remove("HIPJIT_CACHE_MAX_SIZE")
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
    let f = common::code_object("kernels-gfx90a.hsaco");
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
    let f = common::code_object("kernels-gfx90a.hsaco");
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
    let f = common::code_object("kernels-gfx942-gfx1100-v3.ccob");
    let o = hipjit(&["inspect", "--json", "--target", "gfx1100", path_str(&f)]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let v = json(&o);
    assert_eq!(v["container"], "compressed-offload-bundle");
    assert_eq!(v["target_id"], "gfx1100");
    // gfx1100 runs wave32 by default.
    assert_eq!(v["kernels"][0]["wavefront_size"], 32);
}

#[test]
fn inspect_bundle_without_target_reads_every_amdgpu_entry() {
    let f = common::code_object("kernels-gfx942-gfx1100.hipfb");
    let o = hipjit(&["inspect", "--json", path_str(&f)]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let v = json(&o);
    assert_eq!(v["container"], "offload-bundle");
    let mut targets: Vec<String> = v["code_objects"]
        .as_array()
        .expect("code_objects")
        .iter()
        .map(|c| c["target_id"].as_str().unwrap().to_owned())
        .collect();
    targets.sort();
    assert_eq!(targets, ["gfx1100", "gfx942"]);
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
fn inspect_of_an_empty_file_says_so_and_exits_1() {
    let dir = tempfile::tempdir().unwrap();
    let f = write(dir.path(), "empty.hsaco", "");
    let o = hipjit(&["inspect", path_str(&f)]);
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("empty.hsaco"), "{}", stderr(&o));
    assert!(stderr(&o).contains("the input is empty"), "{}", stderr(&o));
}

#[test]
fn inspect_of_a_truncated_elf_names_what_is_cut_off() {
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("cut.hsaco");
    let whole = std::fs::read(common::code_object("single-gfx90a.hsaco")).unwrap();
    std::fs::write(&f, &whole[..100]).unwrap();
    let o = hipjit(&["inspect", path_str(&f)]);
    assert_eq!(o.status.code(), Some(1));
    let err = stderr(&o);
    assert!(err.contains("cut.hsaco"), "{err}");
    assert!(err.contains("truncated"), "{err}");
}

#[test]
fn inspect_with_a_malformed_target_id_is_a_usage_error() {
    let f = common::code_object("kernels-gfx90a.hsaco");
    let o = hipjit(&["inspect", "--target", "gfx90a:bogus+", path_str(&f)]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("gfx90a:bogus+"), "{}", stderr(&o));
}

#[test]
fn inspect_raw_elf_for_another_target_fails_naming_both() {
    let f = common::code_object("kernels-gfx90a.hsaco");
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

/// Every `"HIPJIT_...` string literal in `dir` (recursively) but under `skip`: the variables
/// hipjit reads, and the marker file name HIPJIT_SHARED.
fn hipjit_names_in(dir: &Path, skip: &Path, names: &mut std::collections::BTreeSet<String>) {
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        let p = e.path();
        if p == skip {
            continue;
        }
        if p.is_dir() {
            hipjit_names_in(&p, skip, names);
        } else if p.extension().is_some_and(|x| x == "rs") {
            let text = std::fs::read_to_string(&p).unwrap();
            for (i, _) in text.match_indices("\"HIPJIT_") {
                let name: String = text[i + 1..]
                    .chars()
                    .take_while(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || *c == '_')
                    .collect();
                names.insert(name);
            }
        }
    }
}

#[test]
fn help_and_the_environment_guide_list_every_hipjit_variable_read_in_src() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut names = std::collections::BTreeSet::new();
    // src/testing is the fake runtime of the `testing` feature: its variables are its own
    // (and its build's), never read by the command.
    hipjit_names_in(&src, &src.join("testing"), &mut names);
    for must in [
        "HIPJIT_COMPILER",
        "HIPJIT_REMOTE_CACHE",
        "HIPJIT_REMOTE_CACHE_KEY",
    ] {
        assert!(names.contains(must), "the scan finds {must}: {names:?}");
    }
    let o = hipjit(&["--help"]);
    assert_eq!(o.status.code(), Some(0));
    let help = stdout(&o);
    let readme =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/environment.md"))
            .unwrap();
    for name in &names {
        assert!(
            help.contains(name.as_str()),
            "hipjit --help lacks {name}:\n{help}"
        );
        assert!(
            readme.contains(name.as_str()),
            "docs/environment.md lacks {name}"
        );
    }
}

#[test]
fn help_states_each_commands_json_schema_version_as_its_json_has_it() {
    let help = stdout(&hipjit(&["--help"]));
    assert!(
        help.contains("compile 2; doctor, inspect and cache 1"),
        "{help}"
    );
    let inspect = hipjit(&[
        "inspect",
        "--json",
        path_str(&common::code_object("kernels-gfx90a.hsaco")),
    ]);
    assert_eq!(json(&inspect)["schema_version"], 1);
    let cache = hipjit(&["cache", "stats", "--json"]);
    assert_eq!(cache.status.code(), Some(0), "{}", stderr(&cache));
    assert_eq!(json(&cache)["schema_version"], 1);
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("missing.hip");
    let compile = hipjit(&["compile", "--json", "--arch", "gfx90a", path_str(&missing)]);
    assert_eq!(compile.status.code(), Some(1), "{}", stderr(&compile));
    assert_eq!(json(&compile)["schema_version"], 2);
    for sub in ["compile", "doctor", "inspect", "cache"] {
        let h = stdout(&hipjit(&[sub, "--help"]));
        let version = if sub == "compile" { 2 } else { 1 };
        assert!(
            h.contains(&format!("\"schema_version\": {version}")),
            "hipjit {sub} --help states its version:\n{h}"
        );
    }
}

/// `hipjit ARGS` with `vars` set (the cache in a fresh directory).
fn hipjit_env(args: &[&str], vars: &[(&str, &str)]) -> Output {
    let cache = tempfile::tempdir().unwrap();
    Command::new(env!("CARGO_BIN_EXE_hipjit"))
        .args(args)
        .env("HIPJIT_CACHE_DIR", cache.path())
        .env_remove("HIPJIT_HIPCC")
        .env_remove("HIPJIT_COMPILER")
        .env_remove("HIPJIT_REMOTE_CACHE")
        .env_remove("HIPJIT_REMOTE_CACHE_KEY")
        .env_remove("HIPJIT_CACHE_MAX_SIZE")
        .envs(vars.iter().copied())
        .output()
        .expect("the hipjit binary runs")
}

#[test]
fn a_bad_hipjit_compiler_value_is_a_usage_error_naming_what_it_takes() {
    let o = hipjit_env(
        &["compile", "--arch", "gfx90a", path_str(&saxpy())],
        &[("HIPJIT_COMPILER", "bogus")],
    );
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    let err = stderr(&o);
    assert!(err.contains("HIPJIT_COMPILER=\"bogus\""), "{err}");
    assert!(err.contains("auto, hipcc, hiprtc, nvcc or nvrtc"), "{err}");
}

#[test]
fn auto_with_an_explicit_compiler_setting_that_cannot_be_used_fails_naming_it() {
    // Each compiler Auto could have taken instead is installed here (hipcc, hipRTC 5.x).
    let src = saxpy();
    let out = tempfile::tempdir().unwrap();
    let o_path = out.path().join("saxpy.co");
    let plain = write(out.path(), "hipcc", "#!/bin/sh\n");
    for (var, value, why) in [
        ("HIPJIT_HIPCC", "/opt/nowhere/hipcc", "missing"),
        ("HIPJIT_HIPCC", path_str(&plain), "not executable"),
        (
            "HIPJIT_HIPRTC_LIBRARY",
            "/opt/nowhere/libhiprtc.so",
            "cannot open hipRTC library",
        ),
        (
            "HIPJIT_HIPRTC_LIBRARY",
            "/lib/x86_64-linux-gnu/libc.so.6",
            "does not export hiprtcCreateProgram",
        ),
    ] {
        let o = hipjit_env(
            &[
                "compile",
                "--compiler=auto",
                "--arch",
                "gfx90a",
                "-o",
                path_str(&o_path),
                path_str(&src),
            ],
            &[(var, value)],
        );
        let err = stderr(&o);
        assert!(!o.status.success(), "{var}={value}: compiled:\n{err}");
        assert!(
            err.contains(var) && err.contains(value) && err.contains(why),
            "{var}={value}: {err}"
        );
        assert!(!o_path.exists(), "{var}={value}: wrote an output");
    }
}

#[test]
fn a_flag_refused_under_hiprtc_names_hiprtc_not_hipcc() {
    for (how, env) in [("--compiler=hiprtc", None), ("", Some("hiprtc"))] {
        let mut args = vec!["compile", "--arch", "gfx90a"];
        if !how.is_empty() {
            args.push(how);
        }
        let src = saxpy();
        args.extend([path_str(&src), "--cflag=-o", "--cflag=x.o"]);
        let vars: Vec<(&str, &str)> = env.map(|e| ("HIPJIT_COMPILER", e)).into_iter().collect();
        let o = hipjit_env(&args, &vars);
        assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
        let err = stderr(&o);
        assert!(err.contains("\"-o\" is not accepted for hipRTC"), "{err}");
        assert!(!err.contains("hipcc"), "{err}");
    }
}

#[test]
fn a_bad_remote_cache_url_or_key_is_a_usage_error_naming_the_variable() {
    let src = saxpy();
    let compile = ["compile", "--arch", "gfx90a", path_str(&src)];
    for args in [&compile[..], &["cache", "stats"][..]] {
        let o = hipjit_env(args, &[("HIPJIT_REMOTE_CACHE", "ftp://cache:80")]);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", stderr(&o));
        assert!(
            stderr(&o).contains("HIPJIT_REMOTE_CACHE: "),
            "{}",
            stderr(&o)
        );
        assert!(stderr(&o).contains("redis[s]://"), "{}", stderr(&o));
        let o = hipjit_env(
            args,
            &[
                ("HIPJIT_REMOTE_CACHE", "redis://127.0.0.1:1/0"),
                ("HIPJIT_REMOTE_CACHE_KEY", "short"),
            ],
        );
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", stderr(&o));
        assert!(
            stderr(&o).contains("HIPJIT_REMOTE_CACHE_KEY"),
            "{}",
            stderr(&o)
        );
    }
}

// ---------------------------------------------------------------------------------------------
// compile (the machine's hipcc: Debian's 5.2.3 here, `apt-get install hipcc`)

const SAXPY: &str = "examples/kernels/saxpy.hip";

fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, text).expect("write a test source");
    p
}

#[test]
fn compile_misses_then_hits_the_disk_cache() {
    let cache = tempfile::tempdir().unwrap();
    let src = saxpy();
    let first = hipjit_in(
        cache.path(),
        &["compile", "--json", "--arch", "gfx90a", path_str(&src)],
    );
    assert_eq!(
        first.status.code(),
        Some(0),
        "needs hipcc (apt-get install hipcc): {}",
        stderr(&first)
    );
    let a = json(&first);
    assert_eq!(a["schema_version"], 2);
    assert_eq!(a["results"][0]["cache"], "miss");
    assert_eq!(a["results"][0]["hit"], false);
    let second = hipjit_in(
        cache.path(),
        &["compile", "--json", "--arch", "gfx90a", path_str(&src)],
    );
    assert_eq!(second.status.code(), Some(0), "{}", stderr(&second));
    let b = json(&second);
    assert_eq!(b["results"][0]["cache"], "disk");
    assert_eq!(b["results"][0]["key"], a["results"][0]["key"]);
}

#[test]
fn compile_text_shows_kernel_arguments_and_resources() {
    let o = hipjit(&["compile", "--arch", "gfx90a", path_str(&saxpy())]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let out = stdout(&o);
    assert!(out.contains("miss (compiled)"), "{out}");
    assert!(out.contains("kernel saxpy"), "{out}");
    assert!(out.contains("SGPR") && out.contains("VGPR"), "{out}");
    assert!(out.contains("global_buffer"), "{out}");
}

#[test]
fn compile_error_exits_1_with_file_and_line() {
    let dir = tempfile::tempdir().unwrap();
    let bad = write(
        dir.path(),
        "broken.hip",
        "#include <hip/hip_runtime.h>\nextern \"C\" __global__ void k(float* x) {\n  x[0] = undefined_thing;\n}\n",
    );
    let o = hipjit(&["compile", "--arch", "gfx90a", path_str(&bad)]);
    assert_eq!(o.status.code(), Some(1));
    let err = stderr(&o);
    assert!(
        err.contains(&format!("{}:3:", bad.display())),
        "stderr lacks file:line: {err}"
    );
    assert!(err.contains("gfx90a"), "{err}");
    assert!(err.contains("undefined_thing"), "{err}");
}

#[test]
fn compile_error_json_carries_the_diagnostic_with_its_line() {
    let dir = tempfile::tempdir().unwrap();
    let bad = write(
        dir.path(),
        "broken.hip",
        "#include <hip/hip_runtime.h>\n\nextern \"C\" __global__ void k(int* x) { x[0] = nope; }\n",
    );
    let o = hipjit(&["compile", "--json", "--arch", "gfx90a", path_str(&bad)]);
    assert_eq!(o.status.code(), Some(1));
    let v = json(&o);
    assert_eq!(v["failed"], 1);
    let d = &v["results"][0]["diagnostics"][0];
    assert_eq!(d["file"], path_str(&bad));
    assert_eq!(d["line"], 3);
    assert!(d["message"].as_str().unwrap().contains("nope"), "{d}");
}

#[test]
fn compile_error_json_gives_a_non_utf8_header_path_as_text_and_hex() {
    use std::os::unix::ffi::OsStrExt;
    let dir = tempfile::tempdir().unwrap();
    let inc = dir.path().join(std::ffi::OsStr::from_bytes(b"i\xff"));
    std::fs::create_dir(&inc).unwrap();
    std::fs::write(inc.join("v.h"), "#define X\nint v = nope;\n").unwrap();
    let src = write(
        dir.path(),
        "k.hip",
        "#include <hip/hip_runtime.h>\n#include \"v.h\"\nextern \"C\" __global__ void k(int* x) { x[0] = 1; }\n",
    );
    let o = Command::new(env!("CARGO_BIN_EXE_hipjit"))
        .args(["compile", "--json", "--arch", "gfx90a", "-I"])
        .arg(&inc)
        .arg(&src)
        .env("HIPJIT_CACHE_DIR", dir.path().join("cache"))
        .output()
        .expect("the hipjit binary runs");
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    let v = json(&o);
    let d = &v["results"][0]["diagnostics"][0];
    let hex: String = inc
        .join("v.h")
        .as_os_str()
        .as_bytes()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    assert_eq!(d["file"]["hex"], hex, "{d:#}");
    assert_eq!(
        d["file"]["text"],
        inc.join("v.h").to_string_lossy().as_ref(),
        "{d:#}"
    );
    assert_eq!(d["included_from"][0]["file"], path_str(&src), "{d:#}");
}

#[test]
fn compile_for_a_processor_the_compiler_does_not_know_exits_1_naming_it() {
    // gfx9999 is well-formed as a target ID but no compiler knows it.
    let o = hipjit(&["compile", "--arch", "gfx9999", path_str(&saxpy())]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    let err = stderr(&o);
    assert!(err.contains("gfx9999"), "{err}");
    assert!(err.contains(SAXPY), "{err}");
}

#[test]
fn compile_two_inputs_to_a_directory_writes_both_code_objects() {
    let dir = tempfile::tempdir().unwrap();
    let a = write(
        dir.path(),
        "first.hip",
        "#include <hip/hip_runtime.h>\n#include \"val.h\"\nextern \"C\" __global__ void first(float* x) { x[0] = VAL; }\n",
    );
    write(dir.path(), "val.h", "#define VAL 2.0f\n");
    let b = write(
        dir.path(),
        "second.hip",
        "#include <hip/hip_runtime.h>\nextern \"C\" __global__ void second(int* x) { x[0] = 1; }\n",
    );
    let out = dir.path().join("out");
    let o = hipjit(&[
        "compile",
        "--arch",
        "gfx90a",
        "-j",
        "2",
        "-o",
        path_str(&out),
        path_str(&a),
        path_str(&b),
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    for (file, kernel) in [("first.hsaco", "first"), ("second.hsaco", "second")] {
        let written = out.join(file);
        let i = hipjit(&["inspect", "--json", path_str(&written)]);
        assert_eq!(i.status.code(), Some(0), "{file}: {}", stderr(&i));
        assert_eq!(json(&i)["kernels"][0]["name"], kernel);
    }
    // Atomic writes leave no temporary file behind.
    let names: Vec<String> = std::fs::read_dir(&out)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(names.len(), 2, "{names:?}");
}

#[test]
fn compile_one_input_with_o_writes_that_file() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("saxpy-gfx90a.co");
    let o = hipjit(&[
        "compile",
        "--arch",
        "gfx90a",
        "-o",
        path_str(&out),
        path_str(&saxpy()),
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let bytes = std::fs::read(&out).expect("the output file exists");
    assert!(bytes.starts_with(b"\x7fELF"));
}

const BROKEN: &str =
    "#include <hip/hip_runtime.h>\nextern \"C\" __global__ void k(int* x) { x[0] = nope; }\n";

#[test]
fn compile_failure_removes_the_output_file_an_earlier_run_left() {
    let dir = tempfile::tempdir().unwrap();
    let bad = write(dir.path(), "broken.hip", BROKEN);
    let out = dir.path().join("k.hsaco");
    std::fs::write(&out, b"\x7fELF from an earlier run").unwrap();
    let o = hipjit(&[
        "compile",
        "--arch",
        "gfx90a",
        "-o",
        path_str(&out),
        path_str(&bad),
    ]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(stderr(&o).contains("nope"), "{}", stderr(&o));
    assert!(
        !out.exists(),
        "a failed compile leaves no older output that could pass for its result"
    );
}

#[test]
fn compile_failure_leaves_a_character_device_output_alone() {
    use std::os::unix::fs::FileTypeExt;
    let dir = tempfile::tempdir().unwrap();
    // A private copy of /dev/null (character device 1:3), so that a defect cannot remove the
    // machine's own.
    let null = dir.path().join("null");
    let made = Command::new("mknod")
        .arg(&null)
        .args(["c", "1", "3"])
        .status()
        .expect("mknod runs");
    assert!(made.success(), "mknod needs root (tests run as root here)");
    let missing = dir.path().join("missing.hip");
    let o = hipjit(&[
        "compile",
        "--arch",
        "gfx90a",
        "-o",
        path_str(&null),
        path_str(&missing),
    ]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    let m = std::fs::symlink_metadata(&null).expect("the device is still there");
    assert!(m.file_type().is_char_device());
}

#[test]
fn compile_failure_of_one_input_removes_only_its_output_in_the_directory() {
    let dir = tempfile::tempdir().unwrap();
    let bad = write(dir.path(), "broken.hip", BROKEN);
    let out = dir.path().join("out");
    std::fs::create_dir(&out).unwrap();
    std::fs::write(out.join("broken.hsaco"), b"from an earlier run").unwrap();
    let o = hipjit(&[
        "compile",
        "--arch",
        "gfx90a",
        "-j",
        "2",
        "-o",
        path_str(&out),
        path_str(&saxpy()),
        path_str(&bad),
    ]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(
        !out.join("broken.hsaco").exists(),
        "the failed input's stale output is removed"
    );
    let good = std::fs::read(out.join("saxpy.hsaco")).expect("the other input's output");
    assert!(good.starts_with(b"\x7fELF"));
}

/// The processes descending from `pid` (from /proc: ppid links), with their command names.
fn descendants(pid: u32) -> Vec<(u32, String)> {
    let mut parent_of = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let Some(p) = e.file_name().to_str().and_then(|n| n.parse::<u32>().ok()) else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{p}/stat")) else {
            continue;
        };
        // pid (comm) state ppid ...: comm may hold spaces, so split at its last ')'.
        let Some((head, tail)) = stat.rsplit_once(')') else {
            continue;
        };
        let comm = head.split_once('(').map_or("", |(_, c)| c).to_string();
        let ppid = tail
            .split_whitespace()
            .nth(1)
            .and_then(|x| x.parse::<u32>().ok());
        if let Some(pp) = ppid {
            parent_of.push((p, pp, comm));
        }
    }
    let mut found: Vec<(u32, String)> = Vec::new();
    let mut frontier = vec![pid];
    while let Some(q) = frontier.pop() {
        for (p, pp, comm) in &parent_of {
            if *pp == q && !found.iter().any(|(f, _)| f == p) {
                found.push((*p, comm.clone()));
                frontier.push(*p);
            }
        }
    }
    found
}

/// Whether `pid` still runs (a zombie has finished).
fn running(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|s| {
            s.rsplit_once(')')
                .map(|(_, t)| t.trim_start().starts_with('Z'))
        })
        .is_some_and(|zombie| !zombie)
}

/// The paths under `dir` (at any depth, links not followed) whose name starts with `prefix`.
fn names_under(dir: &Path, prefix: &str) -> Vec<PathBuf> {
    let mut found = Vec::new();
    for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let p = e.path();
        if e.file_name().to_string_lossy().starts_with(prefix) {
            found.push(p.clone());
        }
        if e.file_type().is_ok_and(|t| t.is_dir()) {
            found.extend(names_under(&p, prefix));
        }
    }
    found
}

/// A `hipjit compile` killed (SIGKILL, as a crash inside hipRTC ends it) while hipRTC compiles
/// in its process leaves what comgr staged, the source among it, in `comgr-*` directories:
/// they were in `/tmp` itself, where nothing removed them. The command's TMPDIR is now a
/// private directory of its own, which the next hipjit removes once its process is dead.
#[test]
fn comgr_scratch_of_a_killed_in_process_hiprtc_compile_is_swept_by_the_next_run() {
    let dir = tempfile::tempdir().unwrap();
    let tmp = dir.path().join("tmp");
    std::fs::create_dir(&tmp).unwrap();
    let source = dir.path().join("k.hip");
    std::fs::write(
        &source,
        "#include <hip/hip_runtime.h>\nextern \"C\" __global__ void k(float* x) { x[0] = 1; }\n",
    )
    .unwrap();
    let compile = || {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_hipjit"));
        cmd.args(["compile", "--compiler", "hiprtc", "--arch", "gfx90a", "-o"])
            .arg(dir.path().join("k.hsaco"))
            .arg(&source)
            .env("TMPDIR", &tmp)
            // A fresh cache root each time: a miss, compiled in this process.
            .env(
                "HIPJIT_CACHE_DIR",
                tempfile::tempdir_in(dir.path()).unwrap().keep(),
            )
            .env_remove("HIPJIT_COMPILER")
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped());
        cmd
    };
    // Killed as soon as comgr has made a staging directory (a few tries: comgr may remove it
    // between the look and the kill).
    let mut left = Vec::new();
    for _ in 0..5 {
        let mut child = compile().spawn().expect("the hipjit binary runs");
        let started = std::time::Instant::now();
        while names_under(&tmp, "comgr-").is_empty() {
            if let Some(status) = child.try_wait().unwrap() {
                let mut err = String::new();
                std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut err).unwrap();
                panic!("hipjit ended ({status}) before comgr staged anything: {err}");
            }
            assert!(
                started.elapsed() < std::time::Duration::from_secs(60),
                "no comgr-* directory under TMPDIR within 60 s (needs Debian's libamdhip64-5)"
            );
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        child.kill().unwrap();
        child.wait().unwrap();
        left = names_under(&tmp, "comgr-");
        if !left.is_empty() {
            break;
        }
    }
    assert!(
        !left.is_empty(),
        "no kill landed while comgr's directory was there"
    );
    let o = compile().output().unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    let after: Vec<_> = std::fs::read_dir(&tmp)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .collect();
    assert!(
        after.is_empty(),
        "left in TMPDIR after the next run: {after:?} (comgr's were {left:?})"
    );
}

#[test]
fn compile_stopped_by_sigterm_kills_the_compiler_and_leaves_nothing_in_tmpdir() {
    let tmp = tempfile::tempdir().unwrap();
    let cache = tempfile::tempdir().unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_hipjit"))
        .args([
            "compile",
            "--compiler",
            "hipcc",
            "--arch",
            "gfx90a",
            path_str(&saxpy()),
        ])
        .env("TMPDIR", tmp.path())
        .env("HIPJIT_CACHE_DIR", cache.path())
        .env_remove("HIPJIT_HIPCC")
        .env_remove("HIPJIT_COMPILER")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("the hipjit binary runs");
    // Wait until the real compiler (hipcc 5.2.3 runs clang through sh) works in its build
    // directory under TMPDIR.
    let started = std::time::Instant::now();
    let compilers = loop {
        let d = descendants(child.id());
        // In the command's own `hipjit-run-<pid>-.../b` below TMPDIR.
        let build_dir = !names_under(tmp.path(), "hipjit-build-").is_empty();
        if build_dir && d.iter().any(|(_, c)| c.starts_with("clang")) {
            break d;
        }
        assert!(
            started.elapsed() < std::time::Duration::from_secs(60),
            "no clang under hipjit within 60 s (needs hipcc: apt-get install hipcc)"
        );
        assert!(
            child.try_wait().unwrap().is_none(),
            "hipjit ended before clang ran"
        );
        std::thread::sleep(std::time::Duration::from_millis(10));
    };
    // SAFETY: kill(2) on the pid of a child this test started and has not reaped.
    assert_eq!(unsafe { libc::kill(child.id() as i32, libc::SIGTERM) }, 0);
    let o = child.wait_with_output().unwrap();
    assert_eq!(o.status.code(), Some(128 + 15), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("interrupted by SIGTERM"),
        "{}",
        stderr(&o)
    );
    let left: Vec<_> = std::fs::read_dir(tmp.path())
        .unwrap()
        .flatten()
        .map(|e| e.file_name())
        .collect();
    assert!(left.is_empty(), "left in TMPDIR: {left:?}");
    let alive: Vec<_> = compilers.iter().filter(|(p, _)| running(*p)).collect();
    assert!(
        alive.is_empty(),
        "still running: {alive:?} (of {compilers:?})"
    );
    assert!(entry_files(cache.path()).is_empty(), "nothing is published");
}

#[test]
fn compile_refuses_an_include_of_a_fifo_at_once_instead_of_hanging() {
    refuses_a_fifo_at_once(
        "#include <hip/hip_runtime.h>\n#include \"pipe.h\"\nextern \"C\" __global__ void k(int* x) { x[0] = 1; }\n",
        "`#include \"pipe.h\"`",
    );
}

/// `__has_include` looks the name up and opens what it finds: hipcc blocks on a FIFO there as
/// on an `#include`.
#[test]
fn compile_refuses_a_has_include_of_a_fifo_at_once_instead_of_hanging() {
    refuses_a_fifo_at_once(
        "#include <hip/hip_runtime.h>\n#if __has_include(\"pipe.h\")\n#define P 1\n#endif\nextern \"C\" __global__ void k(int* x) { x[0] = 1; }\n",
        "`#if __has_include(\"pipe.h\")`",
    );
}

/// Compiles `source` (beside an include directory holding the FIFO `pipe.h`) for gfx90a with
/// hipcc: refused at once (exit 1), the error naming the FIFO and `directive`.
fn refuses_a_fifo_at_once(source: &str, directive: &str) {
    let dir = tempfile::tempdir().unwrap();
    let inc = dir.path().join("inc");
    std::fs::create_dir(&inc).unwrap();
    let made = Command::new("mkfifo")
        .arg(inc.join("pipe.h"))
        .status()
        .expect("mkfifo runs");
    assert!(made.success());
    let src = write(dir.path(), "k.hip", source);
    let cache = tempfile::tempdir().unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_hipjit"))
        .args([
            "compile",
            "--arch",
            "gfx90a",
            "-I",
            path_str(&inc),
            path_str(&src),
        ])
        .env("HIPJIT_CACHE_DIR", cache.path())
        .env_remove("HIPJIT_HIPCC")
        .env_remove("HIPJIT_COMPILER")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("the hipjit binary runs");
    // hipcc would block opening the FIFO until the compile timeout: give up long before.
    let started = std::time::Instant::now();
    while child.try_wait().unwrap().is_none() {
        if started.elapsed() > std::time::Duration::from_secs(60) {
            let _ = child.kill();
            panic!("hipjit compile still runs after 60 s: the compiler blocks on the FIFO");
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let o = child.wait_with_output().unwrap();
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    let err = stderr(&o);
    assert!(
        err.contains(&format!("names {} (a FIFO)", inc.join("pipe.h").display())),
        "{err}"
    );
    assert!(err.contains(directive), "{err}");
}

#[test]
fn compile_one_input_with_o_naming_an_existing_directory_is_a_usage_error() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("inc");
    std::fs::create_dir(&out).unwrap();
    let o = hipjit(&[
        "compile",
        "--arch",
        "gfx90a",
        "-o",
        path_str(&out),
        path_str(&saxpy()),
    ]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(
        stderr(&o).contains(&format!("{} is a directory", path_str(&out)))
            || stderr(&o).contains(&format!("{}: exists and is a directory", path_str(&out))),
        "{}",
        stderr(&o)
    );
    assert_eq!(
        std::fs::read_dir(&out).unwrap().count(),
        0,
        "nothing is written"
    );
}

#[test]
fn compile_one_input_with_o_in_a_missing_directory_is_a_usage_error() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("nonexist").join("dir");
    let out = missing.join("x.co");
    let o = hipjit(&[
        "compile",
        "--arch",
        "gfx90a",
        "-o",
        path_str(&out),
        path_str(&saxpy()),
    ]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(
        stderr(&o).contains(&format!(
            "the directory {} does not exist",
            path_str(&missing)
        )),
        "{}",
        stderr(&o)
    );
    assert!(
        !dir.path().join("nonexist").exists(),
        "no directory is created"
    );
}

#[test]
fn compile_two_inputs_with_o_naming_a_file_is_a_usage_error() {
    let dir = tempfile::tempdir().unwrap();
    let a = write(dir.path(), "a.hip", "");
    let b = write(dir.path(), "b.hip", "");
    let out = write(dir.path(), "out.hsaco", "");
    let o = hipjit(&[
        "compile",
        "--arch",
        "gfx90a",
        "-o",
        path_str(&out),
        path_str(&a),
        path_str(&b),
    ]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("names a directory"), "{}", stderr(&o));
}

#[test]
fn compile_two_inputs_with_the_same_name_to_one_directory_is_a_usage_error() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("x")).unwrap();
    std::fs::create_dir_all(dir.path().join("y")).unwrap();
    let a = write(&dir.path().join("x"), "k.hip", "");
    let b = write(&dir.path().join("y"), "k.hip", "");
    let o = hipjit(&[
        "compile",
        "--arch",
        "gfx90a",
        "-o",
        path_str(&dir.path().join("out")),
        path_str(&a),
        path_str(&b),
    ]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("would both be written"),
        "{}",
        stderr(&o)
    );
}

/// A copy of Debian's `libamdhip64.so.5` (hipRTC 5.2.3 inside) with no `amdgcn/bitcode` beside
/// it cannot be given hipcc's device libraries, so its code would differ from hipcc's: Auto
/// takes hipcc, saying why, where beside Debian's own it takes hipRTC.
#[test]
fn auto_takes_hipcc_for_a_hiprtc_5_without_device_libraries_beside_it() {
    let dir = tempfile::tempdir().unwrap();
    let copy = dir.path().join("libamdhip64.so.5");
    std::fs::copy("/usr/lib/x86_64-linux-gnu/libamdhip64.so.5", &copy).unwrap();
    let compile = |library: &str| {
        let o = hipjit_env(
            &["compile", "--json", "--arch", "gfx90a", path_str(&saxpy())],
            &[("HIPJIT_HIPRTC_LIBRARY", library)],
        );
        assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
        json(&o)["results"][0]["compiler"].clone()
    };
    let c = compile(path_str(&copy));
    assert_eq!(c["kind"], "hipcc", "{c:#}");
    assert!(
        c["reason"]
            .as_str()
            .is_some_and(|r| r.contains("no device libraries (amdgcn/bitcode)")),
        "{c:#}"
    );
    let c = compile("/usr/lib/x86_64-linux-gnu/libamdhip64.so.5");
    assert_eq!(c["kind"], "hiprtc", "{c:#}");
}

/// hipRTC 5.2.3 writes code object version 4 whatever it is asked: asking it for 5 is refused
/// naming why (it once gave a v4 code object for a v5 request), and Auto takes hipcc for it.
#[test]
fn hiprtc_5_asked_for_code_object_version_5_is_refused() {
    let o = hipjit(&[
        "compile",
        "--compiler",
        "hiprtc",
        "--arch",
        "gfx90a",
        "--code-object-version",
        "5",
        path_str(&saxpy()),
    ]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("writes code object version 4"),
        "{}",
        stderr(&o)
    );
}

#[test]
fn compile_asks_for_the_code_object_version_given() {
    let o = hipjit(&[
        "compile",
        "--json",
        "--arch",
        "gfx90a",
        "--code-object-version",
        "5",
        path_str(&saxpy()),
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(
        json(&o)["results"][0]["code_objects"][0]["code_object_version"],
        5
    );
}

#[test]
fn compile_without_arch_is_a_usage_error() {
    let o = hipjit(&["compile", path_str(&saxpy())]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("--arch"), "{}", stderr(&o));
}

#[test]
fn compile_with_a_bad_define_is_a_usage_error() {
    let o = hipjit(&[
        "compile",
        "--arch",
        "gfx90a",
        "-D",
        "BAD-NAME",
        path_str(&saxpy()),
    ]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("BAD-NAME"), "{}", stderr(&o));
}

#[test]
fn compile_of_a_missing_file_exits_1_naming_it() {
    let o = hipjit(&["compile", "--arch", "gfx90a", "/nonexistent/k.hip"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        stderr(&o).contains("/nonexistent/k.hip: cannot read the file"),
        "{}",
        stderr(&o)
    );
}

// ---------------------------------------------------------------------------------------------
// cache

/// A cache directory holding the saxpy entry.
fn filled_cache() -> tempfile::TempDir {
    let cache = tempfile::tempdir().unwrap();
    let o = hipjit_in(
        cache.path(),
        &["compile", "--arch", "gfx90a", path_str(&saxpy())],
    );
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    cache
}

fn entry_files(root: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else if p.extension().is_some_and(|x| x == "hjc") {
                out.push(p);
            }
        }
    }
    out
}

/// One compiled source leaves two entries: its result and its header manifest (the entry of
/// its direct key, see hipjit::cache::key).
const ENTRIES_PER_SOURCE: usize = 2;

/// `cache export -o` (and `compile -o`, which writes the same way) onto a symbolic link:
/// a dangling link's target is created as cc creates it, the link kept; a loop of links is
/// refused naming the link and `ELOOP`, both links kept (each was replaced by a regular file).
#[test]
fn cache_export_o_creates_a_dangling_links_target_and_refuses_a_link_loop() {
    let cache = tempfile::tempdir().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let link = dir.path().join("bundle.hjb");
    let target = dir.path().join("absent.hjb");
    std::os::unix::fs::symlink("absent.hjb", &link).unwrap();
    let o = hipjit_in(cache.path(), &["cache", "export", "-o", path_str(&link)]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(link.is_symlink(), "the link was replaced");
    let bytes = std::fs::read(&target).expect("the link's target was created");
    assert!(
        bytes.starts_with(&[0x28, 0xb5, 0x2f, 0xfd]),
        "a Zstandard frame"
    );

    let (l1, l2) = (dir.path().join("l1"), dir.path().join("l2"));
    std::os::unix::fs::symlink("l2", &l1).unwrap();
    std::os::unix::fs::symlink("l1", &l2).unwrap();
    let o = hipjit_in(cache.path(), &["cache", "export", "-o", path_str(&l1)]);
    let e = stderr(&o);
    assert_eq!(o.status.code(), Some(1), "{e}");
    assert!(
        e.contains(path_str(&l1)) && e.contains("Too many levels of symbolic links"),
        "{e}"
    );
    assert!(l1.is_symlink() && l2.is_symlink(), "a link was replaced");
}

#[test]
fn cache_stats_counts_the_entry() {
    let cache = filled_cache();
    let o = hipjit_in(cache.path(), &["cache", "stats", "--json"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let v = json(&o);
    assert_eq!(v["schema_version"], 1);
    assert_eq!(v["roots"][0]["entries"], ENTRIES_PER_SOURCE);
    let on_disk: u64 = entry_files(cache.path())
        .iter()
        .map(|p| std::fs::metadata(p).unwrap().len())
        .sum();
    assert_eq!(v["roots"][0]["bytes"], on_disk);
}

#[test]
fn cache_stats_reports_the_size_cap_default_or_set_by_the_variable() {
    let o = hipjit(&["cache", "stats", "--json"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let v = json(&o);
    assert_eq!(v["max_bytes"], 5u64 * 1024 * 1024 * 1024, "{v:#}");
    assert_eq!(v["max_bytes_from"], "default", "{v:#}");
    let o = hipjit(&["cache", "stats"]);
    assert!(
        stdout(&o).contains(
            "size cap of the written root: 5.0 GiB (5368709120 bytes; the default; \
             HIPJIT_CACHE_MAX_SIZE sets another)"
        ),
        "{}",
        stdout(&o)
    );
    let set = |value: &str, args: &[&str]| hipjit_env(args, &[("HIPJIT_CACHE_MAX_SIZE", value)]);
    let v = json(&set("1.5G", &["cache", "stats", "--json"]));
    assert_eq!(v["max_bytes"], 1536u64 * 1024 * 1024, "{v:#}");
    assert_eq!(v["max_bytes_from"], "HIPJIT_CACHE_MAX_SIZE", "{v:#}");
    let o = set("unlimited", &["cache", "stats"]);
    assert!(
        stdout(&o).contains("size cap of the written root: none (set by HIPJIT_CACHE_MAX_SIZE)"),
        "{}",
        stdout(&o)
    );
    assert_eq!(
        json(&set("unlimited", &["cache", "stats", "--json"]))["max_bytes"],
        serde_json::Value::Null
    );
    let o = set("lots", &["cache", "stats"]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("HIPJIT_CACHE_MAX_SIZE=\"lots\": invalid size 'lots'"),
        "{}",
        stderr(&o)
    );
}

#[test]
fn cache_list_names_the_entry_file() {
    let cache = filled_cache();
    let o = hipjit_in(cache.path(), &["cache", "list"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let files = entry_files(cache.path());
    assert_eq!(files.len(), ENTRIES_PER_SOURCE);
    for f in &files {
        assert!(stdout(&o).contains(path_str(f)), "{}", stdout(&o));
    }
}

#[test]
fn cache_verify_passes_then_fails_on_a_corrupted_entry() {
    let cache = filled_cache();
    let ok = hipjit_in(cache.path(), &["cache", "verify"]);
    assert_eq!(ok.status.code(), Some(0), "{}", stderr(&ok));
    let entry = &entry_files(cache.path())[0];
    let mut bytes = std::fs::read(entry).unwrap();
    let last = bytes.len() - 1;
    bytes[last] ^= 0xff;
    std::fs::write(entry, &bytes).unwrap();
    let bad = hipjit_in(cache.path(), &["cache", "verify"]);
    assert_eq!(bad.status.code(), Some(1));
    assert!(stderr(&bad).contains(path_str(entry)), "{}", stderr(&bad));
}

/// An entry another hipjit wrote (another cache format: its header says so) is listed by
/// `cache verify` as of that format, not as damage: the run passes while an entry of this
/// format is damaged nowhere.
#[test]
fn cache_verify_lists_an_entry_of_another_format_apart_and_passes() {
    let cache = filled_cache();
    let entry = &entry_files(cache.path())[0];
    let mut bytes = std::fs::read(entry).unwrap();
    let version = u32::from_le_bytes(bytes[8..12].try_into().unwrap());
    bytes[8..12].copy_from_slice(&(version - 1).to_le_bytes());
    std::fs::write(entry, &bytes).unwrap();
    let o = hipjit_in(cache.path(), &["cache", "verify"]);
    assert_eq!(o.status.code(), Some(0), "{}{}", stdout(&o), stderr(&o));
    let line = stdout(&o)
        .lines()
        .find(|l| l.contains(path_str(entry)))
        .unwrap_or_default()
        .to_string();
    assert!(
        line.starts_with("old ") && line.contains(&format!("cache format {}", version - 1)),
        "{}",
        stdout(&o)
    );
    assert!(
        stdout(&o).contains("0 bad, 1 of another cache format"),
        "{}",
        stdout(&o)
    );
}

/// The position of `needle` in `haystack`.
fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

/// One byte of an entry's metadata changed (its recorded command: `-O3` read as `-O2`) decodes
/// as well-formed metadata, and the code object is untouched: only the entry's checksum over
/// its header and metadata tells. The next compile misses, and `cache verify` names the entry.
#[test]
fn a_changed_byte_in_an_entrys_recorded_command_is_a_miss_and_fails_verify() {
    let cache = filled_cache();
    let src = saxpy();
    let compile = || {
        hipjit_in(
            cache.path(),
            &["compile", "--json", "--arch", "gfx90a", path_str(&src)],
        )
    };
    let hit = compile();
    assert_eq!(
        json(&hit)["results"][0]["cache"],
        "disk",
        "{}",
        stderr(&hit)
    );
    // The result entry: the one holding the code object (the other is the header manifest).
    let entry = entry_files(cache.path())
        .into_iter()
        .find(|p| find(&std::fs::read(p).unwrap(), b"code-object").is_some())
        .expect("the result entry");
    let mut bytes = std::fs::read(&entry).unwrap();
    let at = find(&bytes, b"-O3").expect("the recorded command holds -O3");
    bytes[at + 2] = b'2';
    std::fs::write(&entry, &bytes).unwrap();

    let verify = hipjit_in(cache.path(), &["cache", "verify"]);
    assert_eq!(verify.status.code(), Some(1), "{}", stdout(&verify));
    let report = format!("{}{}", stdout(&verify), stderr(&verify));
    let line = report
        .lines()
        .find(|l| l.contains(path_str(&entry)))
        .unwrap_or_else(|| panic!("the entry is not named: {report}"));
    assert!(line.contains("checksum"), "{line}");

    let after = compile();
    assert_eq!(after.status.code(), Some(0), "{}", stderr(&after));
    let r = &json(&after)["results"][0];
    assert_eq!(r["cache"], "miss", "the changed entry was served: {r}");
    // Replaced by the compile: a good entry again.
    let verify = hipjit_in(cache.path(), &["cache", "verify"]);
    assert_eq!(verify.status.code(), Some(0), "{}", stderr(&verify));
}

#[test]
fn cache_prune_to_zero_removes_the_entry() {
    let cache = filled_cache();
    let o = hipjit_in(
        cache.path(),
        &["cache", "prune", "--max-size", "0", "--json"],
    );
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(json(&o)["removed"], ENTRIES_PER_SOURCE);
    assert!(entry_files(cache.path()).is_empty());
}

#[test]
fn cache_prune_above_the_size_keeps_the_entry() {
    let cache = filled_cache();
    let o = hipjit_in(cache.path(), &["cache", "prune", "--max-size", "2G"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(entry_files(cache.path()).len(), ENTRIES_PER_SOURCE);
}

#[test]
fn cache_prune_with_a_bad_size_is_a_usage_error() {
    let o = hipjit(&["cache", "prune", "--max-size", "2X"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("invalid size '2X'"), "{}", stderr(&o));
}

#[test]
fn cache_clear_removes_every_entry() {
    let cache = filled_cache();
    let o = hipjit_in(cache.path(), &["cache", "clear"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(
        stdout(&o).contains(&format!("removed {ENTRIES_PER_SOURCE} entries")),
        "{}",
        stdout(&o)
    );
    assert!(entry_files(cache.path()).is_empty());
}

/// A cache root whose format directory `v1` is a symbolic link to a directory outside it that
/// holds a key-named file; returns (root, outside directory, that file).
fn root_with_linked_layout() -> (tempfile::TempDir, tempfile::TempDir, PathBuf) {
    let root = tempfile::tempdir().unwrap();
    let victim = tempfile::tempdir().unwrap();
    std::fs::create_dir(victim.path().join("aa")).unwrap();
    let file = victim
        .path()
        .join("aa")
        .join(format!("{}.hjc", "a".repeat(64)));
    std::fs::write(&file, b"not part of any cache").unwrap();
    std::os::unix::fs::symlink(victim.path(), root.path().join("v1")).unwrap();
    (root, victim, file)
}

#[test]
fn cache_commands_refuse_a_format_directory_that_is_a_symbolic_link() {
    for args in [
        &["cache", "clear"][..],
        &["cache", "prune", "--max-size", "0"],
        &["cache", "list"],
        &["cache", "stats"],
        &["cache", "verify"],
    ] {
        let (root, _victim, file) = root_with_linked_layout();
        let o = hipjit_in(root.path(), args);
        assert_eq!(o.status.code(), Some(1), "{args:?}: {}", stdout(&o));
        let layout = root.path().join("v1");
        assert!(
            stderr(&o).contains(&format!("{} is a symbolic link", layout.display())),
            "{args:?}: {}",
            stderr(&o)
        );
        assert!(
            !stdout(&o).contains(path_str(&file)),
            "{args:?}: {}",
            stdout(&o)
        );
        assert!(file.exists(), "{args:?} removed a file outside the cache");
    }
}

// ---------------------------------------------------------------------------------------------
// doctor (Debian bookworm: HIP 5.2.3 headers in /usr/include, libamdhip64.so.5, hipcc 5.2.3,
// no GPU)

fn doctor_json() -> serde_json::Value {
    let o = hipjit(&["doctor", "--json"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    json(&o)
}

#[test]
fn doctor_json_has_the_documented_keys() {
    let v = doctor_json();
    assert_eq!(v["schema_version"], 1);
    for key in [
        "header_sets",
        "build",
        "runtimes",
        "runtime_in_use",
        "compilers",
        "devices",
        "findings",
        "platform",
        "cuda_driver",
        "nvcc",
        "in_process",
        "cache",
    ] {
        assert!(v.get(key).is_some(), "missing key {key}: {v:#}");
    }
    let cache = &v["cache"];
    assert_eq!(cache["max_bytes"], 5u64 * 1024 * 1024 * 1024, "{cache:#}");
    assert_eq!(cache["max_bytes_from"], "default", "{cache:#}");
    assert_eq!(cache["roots"][0]["written"], true, "{cache:#}");
    assert_eq!(cache["roots"][0]["entries"], 0, "{cache:#}");
}

#[test]
fn doctor_finds_the_debian_hip_5_2_header_set() {
    let v = doctor_json();
    let sets = v["header_sets"].as_array().expect("header_sets");
    let debian = sets
        .iter()
        .find(|h| h["path"] == "/usr/include")
        .unwrap_or_else(|| {
            panic!("no /usr/include set (apt-get install libamdhip64-dev): {sets:?}")
        });
    assert_eq!(debian["hip_version"], "5.2.21153");
    assert_eq!(debian["library_api_declared"], 0);
    assert_eq!(debian["apis"]["hipGetDevicePropertiesR0600"], false);
}

#[test]
fn doctor_finds_the_debian_runtime_with_its_soname_and_entry_point() {
    let v = doctor_json();
    let rts = v["runtimes"].as_array().expect("runtimes");
    let rt = rts
        .iter()
        .find(|r| r["soname"] == "libamdhip64.so.5")
        .unwrap_or_else(|| panic!("no libamdhip64.so.5 (apt-get install libamdhip64-5): {rts:?}"));
    assert_eq!(rt["library_api_exported"], 0);
    assert_eq!(rt["device_properties_entry"], "hipGetDeviceProperties");
    assert!(
        rt["version"]
            .as_str()
            .is_some_and(|s| s.starts_with("5.2.")),
        "{rt}"
    );
}

#[test]
fn doctor_finds_hipcc_and_the_header_it_includes() {
    let v = doctor_json();
    let cs = v["compilers"].as_array().expect("compilers");
    let hipcc = cs
        .iter()
        .find(|c| c["path"] == "/usr/bin/hipcc")
        .unwrap_or_else(|| panic!("no /usr/bin/hipcc (apt-get install hipcc): {cs:?}"));
    assert_eq!(hipcc["hip_runtime_h"], "/usr/include/hip/hip_runtime.h");
}

#[test]
fn doctor_says_why_there_is_no_device() {
    let v = doctor_json();
    assert_eq!(v["devices"].as_array().map(Vec::len), Some(0));
    assert_eq!(v["runtime_in_use"]["device_error_name"], "hipErrorNoDevice");
    let findings = v["findings"].to_string();
    assert!(findings.contains("no device"), "{findings}");
}

#[test]
fn doctor_text_has_every_section() {
    let o = hipjit_env(&["doctor"], &[("HIPJIT_CACHE_MAX_SIZE", "300M")]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let out = stdout(&o);
    assert!(
        out.contains(
            "size cap of the written root: 300.0 MiB (314572800 bytes; set by \
             HIPJIT_CACHE_MAX_SIZE)"
        ),
        "{out}"
    );
    for section in [
        "Header sets",
        "Runtimes",
        "Compilers",
        "Devices",
        "Cache",
        "Platform",
        "CUDA driver",
        "nvcc",
        "In-process compilers",
        "Diagnosis",
    ] {
        assert!(out.contains(section), "missing {section}: {out}");
    }
}

// ---------------------------------------------------------------------------------------------
// doctor on a skewed machine: a second runtime that stands in for a ROCm 7.2 installation
// (tests/fixtures/fake_hip.c: exports the five library-API symbols, reports HIP 7.2.53211 and
// one gfx90a:sramecc+:xnack- device; no real runtime of that kind can be had here) in its own
// installation root with its own header set, next to Debian's HIP 5.2.3 runtime and hipcc.

struct Skewed {
    root: PathBuf,
    report: serde_json::Value,
    _dir: tempfile::TempDir,
}

fn skewed() -> &'static Skewed {
    static S: std::sync::OnceLock<Skewed> = std::sync::OnceLock::new();
    S.get_or_init(|| {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("rocm-7.2");
        let lib = root.join("lib");
        let hip = root.join("include/hip");
        std::fs::create_dir_all(&lib).unwrap();
        std::fs::create_dir_all(&hip).unwrap();
        let so = lib.join("libamdhip64.so.7");
        common::fixture_lib::hip_runtime(
            &so,
            &[
                "-DLIBRARY_API=5",
                "-DCOOPERATIVE",
                "-Wl,-soname,libamdhip64.so.7",
            ],
        );
        // The installation's header set: version 7.2 and the library-API declarations.
        write(
            &hip,
            "hip_version.h",
            "#define HIP_VERSION_MAJOR 7\n#define HIP_VERSION_MINOR 2\n#define HIP_VERSION_PATCH 53211\n",
        );
        write(
            &hip,
            "hip_runtime_api.h",
            "typedef int hipError_t; typedef struct ihipLibrary_t* hipLibrary_t;\n\
             typedef struct ihipKernel_t* hipKernel_t; typedef struct ihipModuleSymbol_t* hipFunction_t;\n\
             hipError_t hipLibraryLoadFromFile(hipLibrary_t*, const char*, void*, void**, unsigned, void*, void**, unsigned);\n\
             hipError_t hipLibraryUnload(hipLibrary_t);\n\
             hipError_t hipLibraryGetKernelCount(unsigned*, hipLibrary_t);\n\
             hipError_t hipLibraryEnumerateKernels(hipKernel_t*, unsigned, hipLibrary_t);\n\
             hipError_t hipKernelGetFunction(hipFunction_t*, hipKernel_t);\n",
        );
        write(&hip, "hip_runtime.h", "#include \"hip_runtime_api.h\"\n");
        let o = Command::new(env!("CARGO_BIN_EXE_hipjit"))
            .args(["doctor", "--json"])
            .env("HIPJIT_HIP_LIBRARY", &so)
            .env("HIP_INCLUDE_DIR", root.join("include"))
            .env_remove("HIP_PATH")
            .env_remove("ROCM_PATH")
            .output()
            .expect("the hipjit binary runs");
        assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
        Skewed {
            root: std::fs::canonicalize(&root).unwrap(),
            report: json(&o),
            _dir: dir,
        }
    })
}

fn findings(v: &serde_json::Value) -> Vec<(String, String)> {
    v["findings"]
        .as_array()
        .expect("findings")
        .iter()
        .map(|f| {
            (
                f["level"].as_str().unwrap().to_owned(),
                f["text"].as_str().unwrap().to_owned(),
            )
        })
        .collect()
}

#[test]
fn doctor_uses_the_runtime_named_by_hipjit_hip_library_and_lists_its_device() {
    let s = skewed();
    let r = &s.report;
    assert_eq!(
        r["runtime_in_use"]["path"],
        path_str(&s.root.join("lib/libamdhip64.so.7"))
    );
    assert_eq!(r["runtime_in_use"]["code_object_loader"], "library API");
    assert_eq!(r["devices"][0], "gfx90a:sramecc+:xnack-");
}

#[test]
fn doctor_counts_the_library_api_exported_by_each_runtime() {
    let r = &skewed().report;
    let by_soname = |so: &str| {
        r["runtimes"]
            .as_array()
            .unwrap()
            .iter()
            .find(|x| x["soname"] == so)
            .unwrap_or_else(|| panic!("no runtime with soname {so}: {r:#}"))
            .clone()
    };
    assert_eq!(by_soname("libamdhip64.so.7")["library_api_exported"], 5);
    assert_eq!(by_soname("libamdhip64.so.5")["library_api_exported"], 0);
}

#[test]
fn doctor_warns_of_runtimes_in_different_versions_naming_both_paths() {
    let s = skewed();
    let f = findings(&s.report);
    let w = f
        .iter()
        .find(|(_, t)| t.contains("different versions"))
        .unwrap_or_else(|| panic!("{f:#?}"));
    assert_eq!(w.0, "warning");
    assert!(
        w.1.contains(path_str(&s.root.join("lib/libamdhip64.so.7"))),
        "{}",
        w.1
    );
    assert!(w.1.contains("libamdhip64.so.5"), "{}", w.1);
}

#[test]
fn doctor_says_the_build_headers_are_older_than_the_runtime() {
    let f = findings(&skewed().report);
    let n = f
        .iter()
        .find(|(_, t)| t.starts_with("headers older than the runtime"))
        .unwrap_or_else(|| panic!("{f:#?}"));
    // Debian's HIP 5.2 headers (the build's) declare none of the library API.
    assert!(n.1.contains("hipLibraryEnumerateKernels"), "{}", n.1);
    assert!(
        n.1.contains("hipjit calls them through its own declarations"),
        "{}",
        n.1
    );
}

#[test]
fn doctor_finds_hipcc_resolving_another_header_set_and_gives_the_measured_fix() {
    let s = skewed();
    let f = findings(&s.report);
    let inc = s.root.join("include");
    let w = f
        .iter()
        .find(|(_, t)| {
            t.contains("resolves <hip/hip_runtime.h> to /usr/include/hip/hip_runtime.h (asked")
        })
        .unwrap_or_else(|| panic!("{f:#?}"));
    assert_eq!(w.0, "warning");
    assert!(w.1.contains(path_str(&inc)), "{}", w.1);
    // Debian's hipcc 5.2.3 lets a -I directory win over /usr/include (ENVIRONMENT.md).
    assert!(w.1.contains(&format!("`-I {}`", inc.display())), "{}", w.1);
}

#[test]
fn doctor_lists_the_installation_header_set_with_its_declarations() {
    let s = skewed();
    let sets = s.report["header_sets"].as_array().unwrap();
    let h = sets
        .iter()
        .find(|h| h["origin"] == "HIP_INCLUDE_DIR")
        .unwrap_or_else(|| panic!("{sets:?}"));
    assert_eq!(h["hip_version"], "7.2.53211");
    assert_eq!(h["library_api_declared"], 5);
}

// ---------------------------------------------------------------------------------------------
// The same binary inside the Debian sid root (hipcc 7.0.2, HIP 6.4.3 headers and runtime),
// run through scripts/sid-run.sh (needs root and the root filesystem of scripts/setup.sh).

fn sid_run(args: &[&str], cache: &Path) -> Output {
    common::toolchain::sid_run()
        .arg("-e")
        .arg(format!("HIPJIT_CACHE_DIR={}", cache.display()))
        .arg("--")
        .arg(env!("CARGO_BIN_EXE_hipjit"))
        .args(args)
        .output()
        .expect("scripts/sid-run.sh runs")
}

/// A cache directory inside the repository's target directory, which sid-run binds.
fn sid_cache() -> tempfile::TempDir {
    tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).expect("a directory under target/")
}

#[test]
fn doctor_in_the_sid_root_finds_hip_6_4_headers_runtime_and_hipcc_7() {
    let cache = sid_cache();
    let o = sid_run(&["doctor", "--json"], cache.path());
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let v = json(&o);
    let sets = v["header_sets"].as_array().unwrap();
    let usr = sets
        .iter()
        .find(|h| h["path"] == "/usr/include")
        .unwrap_or_else(|| panic!("{sets:?}"));
    assert_eq!(usr["hip_version"], "6.4.43484");
    assert_eq!(usr["apis"]["hipGetDevicePropertiesR0600"], true);
    let rt = &v["runtimes"][0];
    assert_eq!(rt["soname"], "libamdhip64.so.6");
    assert_eq!(rt["version"], "6.4.43484");
    assert_eq!(rt["device_properties_entry"], "hipGetDevicePropertiesR0600");
    assert_eq!(rt["library_api_exported"], 0);
    let hipcc = &v["compilers"][0];
    assert_eq!(hipcc["path"], "/usr/bin/hipcc");
    assert!(
        hipcc["hip_version"]
            .as_str()
            .is_some_and(|s| s.starts_with("6.4.")),
        "{hipcc}"
    );
    assert_eq!(hipcc["hip_runtime_h"], "/usr/include/hip/hip_runtime.h");
    assert_eq!(v["runtime_in_use"]["device_error_name"], "hipErrorNoDevice");
}

#[test]
fn compile_in_the_sid_root_writes_code_object_v6_for_gfx942() {
    let cache = sid_cache();
    let out = cache.path().join("saxpy.hsaco");
    let o = sid_run(
        &[
            "compile",
            "--arch",
            "gfx942:sramecc+:xnack-",
            "-o",
            path_str(&out),
            SAXPY,
        ],
        cache.path(),
    );
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    // Read back on the host: hipcc 7 defaults to code object v6.
    let i = hipjit(&["inspect", "--json", path_str(&out)]);
    assert_eq!(i.status.code(), Some(0), "{}", stderr(&i));
    let v = json(&i);
    assert_eq!(v["target_id"], "gfx942:sramecc+:xnack-");
    assert_eq!(v["code_object_version"], 6);
}

#[test]
fn doctor_warns_of_settings_that_point_at_nothing() {
    let cache = tempfile::tempdir().unwrap();
    let o = Command::new(env!("CARGO_BIN_EXE_hipjit"))
        .args(["doctor", "--json"])
        .env("HIPJIT_CACHE_DIR", cache.path())
        .env("HIPJIT_HIPCC", "/nonexistent/bin/hipcc")
        .env("HIP_INCLUDE_DIR", cache.path())
        .output()
        .expect("the hipjit binary runs");
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let f = findings(&json(&o));
    assert!(
        f.iter().any(|(l, t)| l == "warning"
            && t.starts_with("HIPJIT_HIPCC=/nonexistent/bin/hipcc is not an executable file")),
        "{f:#?}"
    );
    assert!(
        f.iter().any(|(l, t)| l == "warning"
            && t.starts_with(&format!("HIP_INCLUDE_DIR={}", cache.path().display()))),
        "{f:#?}"
    );
}

// ---------------------------------------------------------------------------------------------
// doctor and the in-process compilers: Debian's hipRTC 5.2.3 (inside libamdhip64.so.5), the
// sid root's hipRTC 6.4.3, PyPI's NVRTC 13.5 beside PyPI's nvcc.

fn in_process_target<'a>(rtc: &'a serde_json::Value, target: &str) -> &'a serde_json::Value {
    rtc["targets"]
        .as_array()
        .and_then(|ts| ts.iter().find(|t| t["target"] == target))
        .unwrap_or_else(|| panic!("no {target} in {rtc:#}"))
}

#[test]
fn doctor_reports_hiprtc_its_comgr_the_targets_it_compiles_and_what_auto_takes() {
    let v = json(&doctor_with(
        &["--json", "--target", "gfx90a", "--target", "gfx942"],
        &[],
    ));
    let h = &v["in_process"]["hiprtc"];
    assert_eq!(h["found"], true, "{h:#}");
    assert_eq!(h["origin"], "beside the HIP runtime", "{h:#}");
    assert_eq!(h["major"], 5, "{h:#}");
    assert_eq!(h["minor"], 2, "{h:#}");
    assert!(
        h["path"]
            .as_str()
            .is_some_and(|p| p.contains("libamdhip64.so.5")),
        "{h:#}"
    );
    let files = h["identity_files"].to_string();
    for lib in [
        "libamdhip64.so.5",
        "libamd_comgr.so.2",
        "libLLVM-15",
        "libhiprtc-builtins",
    ] {
        assert!(files.contains(lib), "{lib} missing: {files}");
    }
    let processors = h["processors"].as_array().unwrap();
    assert!(processors.contains(&"gfx90a".into()), "{h:#}");
    assert!(!processors.contains(&"gfx942".into()), "{h:#}");

    let gfx90a = in_process_target(h, "gfx90a");
    assert_eq!(gfx90a["from"], "--target");
    assert_eq!(gfx90a["compiles"], true, "{gfx90a:#}");
    // The parity table: with hipjit's 5.x options hipRTC 5.2.3 gives hipcc 5.2.3's code on gfx9.
    assert_eq!(gfx90a["auto"], "hiprtc", "{gfx90a:#}");
    assert!(
        gfx90a["auto_reason"]
            .as_str()
            .is_some_and(|r| r.contains("hipcc's code for gfx90a")),
        "{gfx90a:#}"
    );
    let gfx942 = in_process_target(h, "gfx942");
    assert_eq!(gfx942["compiles"], false, "{gfx942:#}");
    assert!(
        gfx942["error"]
            .as_str()
            .is_some_and(|e| e.contains("does not know gfx942")),
        "{gfx942:#}"
    );
    assert_eq!(gfx942["auto"], "hipcc", "{gfx942:#}");
    assert!(
        has_finding(&v, "warning", "cannot compile for gfx942 (--target)"),
        "{v:#}"
    );
}

#[test]
fn doctor_says_why_hiprtc_was_not_found() {
    let v = json(&doctor_with(
        &["--json"],
        &[(
            "HIPJIT_HIPRTC_LIBRARY",
            Path::new("/nonexistent/libhiprtc.so"),
        )],
    ));
    let h = &v["in_process"]["hiprtc"];
    assert_eq!(h["found"], false, "{h:#}");
    let error = h["error"].as_str().unwrap_or_default();
    assert!(
        error.contains("/nonexistent/libhiprtc.so") && error.contains("HIPJIT_HIPRTC_LIBRARY"),
        "{h:#}"
    );
    assert!(has_finding(&v, "note", "hipRTC was not found"), "{v:#}");
}

#[test]
fn doctor_checks_nvrtc_for_the_cuda_devices_target() {
    // The fixture driver's device is sm_90; NVRTC is found beside PyPI's nvcc.
    let nvcc = pypi_nvcc();
    let v = json(&doctor_with(
        &["--json", "--target", "sm_20"],
        &[
            ("HIPJIT_CUDA_LIBRARY", common::fixture_lib::fake_cuda()),
            ("HIPJIT_NVCC", nvcc.as_path()),
        ],
    ));
    let n = &v["in_process"]["nvrtc"];
    assert_eq!(n["found"], true, "{n:#}");
    assert!(
        n["origin"]
            .as_str()
            .is_some_and(|o| o.starts_with("beside ")),
        "{n:#}"
    );
    assert_eq!(n["major"], 13, "{n:#}");
    assert_eq!(n["minor"], 5, "{n:#}");
    let sm90 = in_process_target(n, "sm_90");
    assert_eq!(sm90["from"], "CUDA device 0");
    assert_eq!(sm90["compiles"], true, "{sm90:#}");
    assert_eq!(sm90["auto"], "nvrtc", "{sm90:#}");
    let sm20 = in_process_target(n, "sm_20");
    assert_eq!(sm20["compiles"], false, "{sm20:#}");
    assert!(
        sm20["error"]
            .as_str()
            .is_some_and(|e| e.contains("invalid value for --gpu-architecture")),
        "{sm20:#}"
    );
    assert_eq!(sm20["auto"], "nvcc", "{sm20:#}");
}

#[test]
fn doctor_in_the_sid_root_takes_hiprtc_6_for_gfx942() {
    let cache = sid_cache();
    let o = sid_run(&["doctor", "--json", "--target", "gfx942"], cache.path());
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let v = json(&o);
    let h = &v["in_process"]["hiprtc"];
    assert_eq!(h["found"], true, "{h:#}");
    assert_eq!(h["major"], 6, "{h:#}");
    assert_eq!(h["minor"], 4, "{h:#}");
    let t = in_process_target(h, "gfx942");
    assert_eq!(t["compiles"], true, "{t:#}");
    assert_eq!(t["auto"], "hiprtc", "{t:#}");
    assert!(
        t["auto_reason"]
            .as_str()
            .is_some_and(|r| r.contains("produces /usr/bin/hipcc's code for gfx942")),
        "{t:#}"
    );
}

// ---------------------------------------------------------------------------------------------
// compile -j with the in-process compilers: worker processes of the command itself. The
// hipRTC is the stand-in of tests/fixtures/fake_hiprtc.c (common::fixture_lib::fake_hiprtc).

#[test]
fn compile_j2_with_hiprtc_compiles_every_file() {
    let dir = tempfile::tempdir().unwrap();
    let files: Vec<PathBuf> = (0..3)
        .map(|i| {
            write(
                dir.path(),
                &format!("k{i}.hip"),
                &format!("extern \"C\" __global__ void k{i}(int* o) {{ o[0] = {i}; }}\n"),
            )
        })
        .collect();
    let mut args = vec![
        "compile",
        "--arch",
        "gfx90a",
        "--compiler",
        "hiprtc",
        "-j",
        "2",
    ];
    args.extend(files.iter().map(|f| path_str(f)));
    args.extend(["--json", "-o"]);
    let out = dir.path().join("out");
    args.push(path_str(&out));
    let o = hipjit(&args);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let v = json(&o);
    for (i, r) in v["results"].as_array().unwrap().iter().enumerate() {
        assert_eq!(r["ok"], true, "{r:#}");
        assert_eq!(r["compiler"]["kind"], "hiprtc", "{r:#}");
        assert_eq!(
            r["code_objects"][0]["kernels"][0]["name"],
            format!("k{i}"),
            "{r:#}"
        );
    }
}

#[test]
fn compile_j2_survives_a_hiprtc_that_aborts_and_names_the_signal() {
    // In this process an abort inside hipRTC would end hipjit (status 134, no JSON); in a
    // worker it is that file's error.
    let dir = tempfile::tempdir().unwrap();
    let boom = write(dir.path(), "boom.hip", "// HIPJIT_ABORT\n");
    let calm = write(dir.path(), "calm.hip", "// calm\n");
    let cache = tempfile::tempdir().unwrap();
    let o = Command::new(env!("CARGO_BIN_EXE_hipjit"))
        .args([
            "compile",
            "--arch",
            "gfx90a",
            "--compiler",
            "hiprtc",
            "-j",
            "2",
            "--json",
        ])
        .arg(&boom)
        .arg(&calm)
        .env("HIPJIT_CACHE_DIR", cache.path())
        .env("HIPJIT_HIPRTC_LIBRARY", common::fixture_lib::fake_hiprtc())
        .env_remove("HIPJIT_COMPILER")
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    let v = json(&o);
    let results = v["results"].as_array().unwrap();
    assert_eq!(results.len(), 2, "{v:#}");
    let boom_error = results[0]["error"].as_str().unwrap_or_default();
    assert!(
        boom_error.contains("was killed by signal 6 (SIGABRT)"),
        "{v:#}"
    );
    // The other file reached the stand-in and came back: its 4 bytes are no code object.
    assert_eq!(results[1]["ok"], false, "{v:#}");
    assert!(
        !results[1]["error"]
            .as_str()
            .unwrap_or_default()
            .contains("signal"),
        "{v:#}"
    );
}

// ---------------------------------------------------------------------------------------------
// doctor and HIP's NVIDIA platform: the fixture CUDA driver (tests/fixtures/fake_cuda.c, built
// with `cc` by common::fixture_lib::fake_cuda: no NVIDIA driver can be had here; it reports
// CUDA 12.4, the five library-API symbols and one compute capability 9.0 device named
// "Fixture GPU") and the nvcc that scripts/setup.sh installs from PyPI.

/// `hipjit doctor ARGS` with `env` set and the NVIDIA variables otherwise unset.
fn doctor_with(args: &[&str], env: &[(&str, &Path)]) -> Output {
    let cache = tempfile::tempdir().expect("a temporary directory");
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_hipjit"));
    cmd.arg("doctor")
        .args(args)
        .env("HIPJIT_CACHE_DIR", cache.path())
        .env_remove("HIPJIT_HIPCC");
    for var in ["HIP_PLATFORM", "HIPJIT_CUDA_LIBRARY", "HIPJIT_NVCC"] {
        cmd.env_remove(var);
    }
    for (k, v) in env {
        cmd.env(k, v);
    }
    let o = cmd.output().expect("the hipjit binary runs");
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    o
}

fn has_finding(v: &serde_json::Value, level: &str, text: &str) -> bool {
    v["findings"].as_array().is_some_and(|fs| {
        fs.iter()
            .any(|f| f["level"] == level && f["text"].as_str().is_some_and(|t| t.contains(text)))
    })
}

#[test]
fn doctor_reports_the_fixture_cuda_driver_its_library_api_and_device() {
    let so = common::fixture_lib::fake_cuda();
    let v = json(&doctor_with(&["--json"], &[("HIPJIT_CUDA_LIBRARY", so)]));
    let d = &v["cuda_driver"];
    assert_eq!(d["origin"], "HIPJIT_CUDA_LIBRARY", "{d:#}");
    assert_eq!(d["path"], path_str(so), "{d:#}");
    assert_eq!(d["version"], "12.4", "{d:#}");
    assert_eq!(d["library_api_exported"], 5, "{d:#}");
    assert_eq!(d["devices"][0]["target"], "sm_90", "{d:#}");
    assert_eq!(d["devices"][0]["name"], "Fixture GPU", "{d:#}");
    assert!(
        has_finding(&v, "ok", "exports all five library-API symbols"),
        "{v:#}"
    );
}

#[test]
fn doctor_detects_the_nvidia_platform_when_only_the_cuda_driver_has_a_device() {
    // Debian's HIP 5.2.3 runtime loads but sees no device; the fixture driver reports one.
    let so = common::fixture_lib::fake_cuda();
    let v = json(&doctor_with(&["--json"], &[("HIPJIT_CUDA_LIBRARY", so)]));
    let p = &v["platform"];
    assert_eq!(p["chosen"], "nvidia", "{p:#}");
    assert_eq!(p["hip_platform"], serde_json::Value::Null, "{p:#}");
    assert!(
        p["reason"]
            .as_str()
            .is_some_and(|r| r.starts_with("detected")),
        "{p:#}"
    );
}

#[test]
fn doctor_text_shows_the_fixture_driver_section() {
    let so = common::fixture_lib::fake_cuda();
    let out = stdout(&doctor_with(&[], &[("HIPJIT_CUDA_LIBRARY", so)]));
    for line in [
        "CUDA driver (HIP's NVIDIA platform)",
        "CUDA 12.4  [HIPJIT_CUDA_LIBRARY]",
        "library API 5/5 exported",
        "device 0: sm_90 (Fixture GPU)",
    ] {
        assert!(out.contains(line), "missing {line:?}: {out}");
    }
}

#[test]
fn doctor_names_a_hip_platform_that_is_neither_amd_nor_nvidia() {
    let v = json(&doctor_with(
        &["--json"],
        &[("HIP_PLATFORM", Path::new("bogus"))],
    ));
    assert_eq!(v["platform"]["hip_platform"], "bogus");
    assert_eq!(v["platform"]["chosen"], serde_json::Value::Null);
    assert!(
        has_finding(
            &v,
            "warning",
            "HIP_PLATFORM=bogus is neither amd nor nvidia"
        ),
        "{v:#}"
    );
}

#[test]
fn doctor_warns_when_hip_platform_is_nvidia_without_a_cuda_driver() {
    // Debian bookworm here: no libcuda.so.1 anywhere.
    let v = json(&doctor_with(
        &["--json"],
        &[("HIP_PLATFORM", Path::new("nvidia"))],
    ));
    assert!(
        v["cuda_driver"]["load_error"]
            .as_str()
            .is_some_and(|e| e.contains("libcuda.so.1")),
        "{v:#}"
    );
    assert!(
        has_finding(
            &v,
            "warning",
            "HIP_PLATFORM=nvidia but no CUDA driver loads"
        ),
        "{v:#}"
    );
    assert!(
        has_finding(&v, "note", "hipcc compiles through nvcc"),
        "{v:#}"
    );
}

#[test]
fn doctor_says_there_is_no_cuda_driver_on_this_machine() {
    let v = json(&doctor_with(&["--json"], &[]));
    assert_eq!(v["platform"]["chosen"], "amd", "{:#}", v["platform"]);
    assert_eq!(v["cuda_driver"]["origin"], "dynamic loader");
    assert!(has_finding(&v, "note", "no CUDA driver"), "{v:#}");
}

#[test]
fn doctor_reports_the_version_of_the_nvcc_named_by_hipjit_nvcc() {
    let nvcc = pypi_nvcc();
    let direct = Command::new(&nvcc)
        .arg("--version")
        .output()
        .unwrap_or_else(|e| panic!("cannot run {}: {e}", nvcc.display()));
    let direct = String::from_utf8_lossy(&direct.stdout).into_owned();
    let v = json(&doctor_with(&["--json"], &[("HIPJIT_NVCC", &nvcc)]));
    let n = &v["nvcc"];
    assert_eq!(n["path"], path_str(&nvcc), "{n:#}");
    assert_eq!(n["origin"], "HIPJIT_NVCC", "{n:#}");
    let release = n["release"].as_str().unwrap_or_else(|| panic!("{n:#}"));
    // The cu13 wheel: CUDA 13.x.
    assert!(release.starts_with("13."), "{n:#}");
    assert!(direct.contains(&format!("release {release},")), "{direct}");
    // Its host compiler: the first gcc on PATH here (none in PyPI's toolkit).
    let gcc = std::env::split_paths(&std::env::var_os("PATH").unwrap())
        .map(|d| d.join("gcc"))
        .find(|p| p.is_file())
        .expect("gcc on PATH");
    assert_eq!(n["host_compiler"], path_str(&gcc), "{n:#}");
    assert!(n["host_compiler_error"].is_null(), "{n:#}");
}

/// nvcc without a host compiler cannot compile: doctor says so, naming where it looked.
#[test]
fn doctor_warns_when_nvcc_has_no_host_compiler() {
    let nvcc = pypi_nvcc();
    let v = json(&doctor_with(
        &["--json"],
        &[
            ("HIPJIT_NVCC", &nvcc),
            ("NVCC_CCBIN", Path::new("/nonexistent/g++")),
        ],
    ));
    let n = &v["nvcc"];
    assert!(n["host_compiler"].is_null(), "{n:#}");
    assert!(
        has_finding(
            &v,
            "warning",
            "NVCC_CCBIN=/nonexistent/g++ is not an executable file"
        ),
        "{v:#}"
    );
}

/// `cc -shared` of `src` (a file) into `dir/libcuda.so.1` with `extra` flags.
fn build_driver(dir: &Path, src: &Path, extra: &[&str]) -> PathBuf {
    let out = dir.join("libcuda.so.1");
    common::fixture_lib::cc_shared(&out, extra, &[src]);
    out
}

#[test]
fn doctor_says_a_driver_without_the_library_api_falls_back_to_the_module_api() {
    // The fixture driver with the cuLibrary* symbols and cuKernelGetFunction made local by a
    // linker version script: what a driver older than CUDA 12.4 exports.
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("old-driver.map");
    std::fs::write(
        &script,
        "{ global: *; local: cuLibraryLoadData; cuLibraryLoadFromFile; cuLibraryUnload; \
         cuLibraryGetKernel; cuLibraryGetKernelCount; cuLibraryEnumerateKernels; \
         cuKernelGetFunction; };\n",
    )
    .unwrap();
    let src = common::fixture("fake_cuda.c");
    let flag = format!("-Wl,--version-script={}", path_str(&script));
    let so = build_driver(dir.path(), &src, &[&flag]);
    let v = json(&doctor_with(&["--json"], &[("HIPJIT_CUDA_LIBRARY", &so)]));
    assert_eq!(v["cuda_driver"]["library_api_exported"], 0, "{v:#}");
    assert!(
        has_finding(&v, "note", "exports 0/5 library-API symbols"),
        "{v:#}"
    );
    assert!(has_finding(&v, "note", "through the module API"), "{v:#}");
}

#[test]
fn doctor_survives_a_cuda_driver_that_crashes_on_load() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("crash.c");
    std::fs::write(
        &src,
        "#include <stdlib.h>\n__attribute__((constructor)) static void crash(void) { abort(); }\n",
    )
    .unwrap();
    let so = build_driver(dir.path(), &src, &[]);
    let v = json(&doctor_with(&["--json"], &[("HIPJIT_CUDA_LIBRARY", &so)]));
    let e = v["cuda_driver"]["load_error"].as_str().unwrap_or_default();
    assert!(e.contains("probe process ended with"), "{v:#}");
    assert!(
        has_finding(&v, "warning", "does not load as a CUDA driver"),
        "{v:#}"
    );
}

// ---------------------------------------------------------------------------------------------
// compile and inspect on HIP's NVIDIA platform: the nvcc from PyPI (`pypi_nvcc`), named by
// HIPJIT_NVCC, examples/kernels/saxpy.hip for sm_90.

/// `hipjit ARGS` with the cache in `cache` and HIPJIT_NVCC set to `nvcc`.
fn hipjit_nv(cache: &Path, nvcc: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_hipjit"))
        .args(args)
        .env("HIPJIT_CACHE_DIR", cache)
        .env("HIPJIT_NVCC", nvcc)
        .env_remove("HIPJIT_HIPCC")
        .env_remove("HIPJIT_COMPILER")
        .output()
        .expect("the hipjit binary runs")
}

/// saxpy compiled for sm_90 into `dir/saxpy.cubin` (through a cache in `dir/cache`).
fn saxpy_cubin(dir: &Path) -> PathBuf {
    let out = dir.join("saxpy.cubin");
    let o = hipjit_nv(
        &dir.join("cache"),
        &pypi_nvcc(),
        &[
            "compile",
            "--arch",
            "sm_90",
            "-o",
            path_str(&out),
            path_str(&saxpy()),
        ],
    );
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    out
}

#[test]
fn compile_sm_90_misses_then_hits_the_disk_cache() {
    let nvcc = pypi_nvcc();
    let cache = tempfile::tempdir().unwrap();
    let src = saxpy();
    let args = ["compile", "--json", "--arch", "sm_90", path_str(&src)];
    let first = hipjit_nv(cache.path(), &nvcc, &args);
    assert_eq!(first.status.code(), Some(0), "{}", stderr(&first));
    let a = json(&first);
    assert_eq!(a["schema_version"], 2);
    assert_eq!(a["platform"], "nvidia");
    // Auto: NVRTC beside the PyPI nvcc, whose parity with nvcc 13.5 was proven for sm_90.
    assert_eq!(a["compiler"]["kind"], "nvrtc", "{a:#}");
    let lib = a["compiler"]["path"].as_str().unwrap_or_default();
    assert!(lib.ends_with("libnvrtc.so.13"), "{a:#}");
    let reason = a["compiler"]["reason"].as_str().unwrap_or_default();
    assert!(reason.contains("sm_90") && reason.contains("nvcc"), "{a:#}");
    let r = &a["results"][0];
    assert_eq!(r["compiler"], a["compiler"], "{a:#}");
    assert_eq!(r["cache"], "miss", "{a:#}");
    assert_eq!(r["hit"], false);
    assert_eq!(r["key"].as_str().map(str::len), Some(64), "{a:#}");
    let entry = r["entry"].as_str().expect("the entry path");
    assert!(Path::new(entry).starts_with(cache.path()), "{entry}");
    assert!(Path::new(entry).is_file(), "{entry}");
    let second = hipjit_nv(cache.path(), &nvcc, &args);
    assert_eq!(second.status.code(), Some(0), "{}", stderr(&second));
    let b = json(&second);
    assert_eq!(b["results"][0]["cache"], "disk", "{b:#}");
    assert_eq!(b["results"][0]["hit"], true);
    assert_eq!(b["results"][0]["key"], r["key"]);
    // The same source with nvcc: another compiler identity, another key, a miss.
    let mut with_nvcc = args.to_vec();
    with_nvcc.extend(["--compiler", "nvcc"]);
    let third = hipjit_nv(cache.path(), &nvcc, &with_nvcc);
    assert_eq!(third.status.code(), Some(0), "{}", stderr(&third));
    let c = json(&third);
    assert_eq!(c["results"][0]["compiler"]["kind"], "nvcc", "{c:#}");
    assert_eq!(
        c["results"][0]["compiler"]["path"],
        path_str(&nvcc),
        "{c:#}"
    );
    assert_eq!(c["results"][0]["cache"], "miss", "{c:#}");
    assert_ne!(c["results"][0]["key"], r["key"]);
}

#[test]
fn compile_takes_hipjit_compiler_and_says_where_the_choice_came_from() {
    let cache = tempfile::tempdir().unwrap();
    let o = Command::new(env!("CARGO_BIN_EXE_hipjit"))
        .args(["compile", "--json", "--arch", "gfx90a", path_str(&saxpy())])
        .env("HIPJIT_CACHE_DIR", cache.path())
        .env("HIPJIT_COMPILER", "hiprtc")
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let v = json(&o);
    let c = &v["results"][0]["compiler"];
    assert_eq!(c["kind"], "hiprtc", "{v:#}");
    assert!(
        c["reason"]
            .as_str()
            .unwrap_or_default()
            .contains("HIPJIT_COMPILER"),
        "{v:#}"
    );
    let kernels = &v["results"][0]["code_objects"][0]["kernels"];
    assert_eq!(kernels[0]["name"], "saxpy", "{v:#}");
    let bad = Command::new(env!("CARGO_BIN_EXE_hipjit"))
        .args(["compile", "--arch", "gfx90a", path_str(&saxpy())])
        .env("HIPJIT_CACHE_DIR", cache.path())
        .env("HIPJIT_COMPILER", "clang")
        .output()
        .unwrap();
    assert_eq!(bad.status.code(), Some(2), "{}", stderr(&bad));
    assert!(
        stderr(&bad).contains("\"clang\"") && stderr(&bad).contains("HIPJIT_COMPILER"),
        "{}",
        stderr(&bad)
    );
}

#[test]
fn compile_with_a_compiler_of_the_other_platform_is_a_usage_error() {
    for (compiler, arch) in [("nvcc", "gfx90a"), ("hiprtc", "sm_90"), ("hipcc", "sm_90")] {
        let o = hipjit(&[
            "compile",
            "--compiler",
            compiler,
            "--arch",
            arch,
            path_str(&saxpy()),
        ]);
        assert_eq!(
            o.status.code(),
            Some(2),
            "{compiler} {arch}: {}",
            stderr(&o)
        );
        let err = stderr(&o);
        assert!(err.contains(compiler) && err.contains(arch), "{err}");
    }
}

#[test]
fn compile_sm_90_refuses_a_host_compiler_include_in_every_spelling() {
    let dir = tempfile::tempdir().unwrap();
    let src = write(
        dir.path(),
        "e.hip",
        "#include <hip/hip_runtime.h>\nextern \"C\" __global__ void k(int* o){ o[0]=EV; }\n",
    );
    let header = write(dir.path(), "e.h", "#define EV 1\n");
    let h = path_str(&header);
    let out = dir.path().join("n.cubin");
    let joined = format!("-include,{h}");
    let glued = format!("-Xcompiler=-include{h}");
    let spellings: [&[&str]; 3] = [
        &["-Xcompiler", &joined],
        &[&glued],
        &["--compiler-options", &joined],
    ];
    for extra in spellings {
        let mut args = vec!["compile", "--arch", "sm_90", path_str(&src), "-o"];
        args.push(path_str(&out));
        args.push("--");
        args.extend_from_slice(extra);
        let o = hipjit_nv(&dir.path().join("cache"), &pypi_nvcc(), &args);
        assert_eq!(o.status.code(), Some(2), "{extra:?}: {}", stderr(&o));
        let err = stderr(&o);
        assert!(err.contains("-include"), "{err}");
        // Auto takes NVRTC for this source here (its parity with nvcc is proven for sm_90):
        // the refusal names the compiler that would have run.
        assert!(err.contains("for NVRTC"), "{err}");
        assert!(!out.exists(), "{extra:?} wrote a cubin");
    }
}

#[test]
fn compile_sm_90_json_lists_saxpy_parameters_and_no_registers() {
    let cache = tempfile::tempdir().unwrap();
    let o = hipjit_nv(
        cache.path(),
        &pypi_nvcc(),
        &["compile", "--json", "--arch", "sm_90", path_str(&saxpy())],
    );
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let v = json(&o);
    let co = &v["results"][0]["code_objects"][0];
    assert_eq!(co["target_id"], "sm_90", "{co:#}");
    let k = &co["kernels"][0];
    assert_eq!(k["name"], "saxpy", "{k:#}");
    // saxpy(float a, const float* x, float* y, unsigned int n): offsets 0, 8, 16, 24.
    let layout: Vec<(u64, u64)> = k["params"]
        .as_array()
        .expect("params is an array")
        .iter()
        .map(|p| (p["offset"].as_u64().unwrap(), p["size"].as_u64().unwrap()))
        .collect();
    assert_eq!(layout, [(0, 4), (8, 8), (16, 8), (24, 4)], "{k:#}");
    assert_eq!(k["param_size"], 28, "{k:#}");
    assert!(k["registers"].is_null(), "{k:#}");
}

#[test]
fn compile_sm_90_text_shows_hit_parameters_and_says_registers_are_not_recorded() {
    let nvcc = pypi_nvcc();
    let cache = tempfile::tempdir().unwrap();
    let src = saxpy();
    let args = ["compile", "--arch", "sm_90", path_str(&src)];
    let first = hipjit_nv(cache.path(), &nvcc, &args);
    assert_eq!(first.status.code(), Some(0), "{}", stderr(&first));
    assert!(
        stdout(&first).contains("miss (compiled)"),
        "{}",
        stdout(&first)
    );
    let second = hipjit_nv(cache.path(), &nvcc, &args);
    let out = stdout(&second);
    assert!(out.contains("hit (disk)"), "{out}");
    assert!(out.contains("target sm_90: cubin"), "{out}");
    assert!(out.contains("kernel saxpy"), "{out}");
    assert!(out.contains("parameters: 28 B, 4 parameter(s)"), "{out}");
    assert!(out.contains("not recorded in a cubin"), "{out}");
    assert!(!out.contains("SGPR"), "{out}");
}

#[test]
fn compile_sm_90_with_o_writes_the_cubin() {
    let dir = tempfile::tempdir().unwrap();
    let out = saxpy_cubin(dir.path());
    let bytes = std::fs::read(&out).unwrap();
    assert_eq!(&bytes[..4], b"\x7fELF");
    // e_machine EM_CUDA (190), little-endian.
    assert_eq!(u16::from_le_bytes([bytes[18], bytes[19]]), 190);
}

#[test]
fn inspect_cubin_text_shows_sm_target_abi_and_parameters() {
    let dir = tempfile::tempdir().unwrap();
    let cubin = saxpy_cubin(dir.path());
    let o = hipjit(&["inspect", path_str(&cubin)]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let out = stdout(&o);
    assert!(out.contains("SM target:           sm_90"), "{out}");
    assert!(out.contains("ELF ABI version:     8"), "{out}");
    assert!(out.contains("kernel saxpy"), "{out}");
    assert!(out.contains("parameters: 28 B, 4 parameter(s)"), "{out}");
}

#[test]
fn inspect_cubin_json_has_platform_target_and_parameter_layout() {
    let dir = tempfile::tempdir().unwrap();
    let cubin = saxpy_cubin(dir.path());
    let o = hipjit(&["inspect", "--json", path_str(&cubin)]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let v = json(&o);
    assert_eq!(v["schema_version"], 1);
    assert_eq!(v["platform"], "nvidia");
    assert_eq!(v["container"], "cubin");
    assert_eq!(v["target_id"], "sm_90");
    assert_eq!(v["elf_abi_version"], 8);
    let k = &v["kernels"][0];
    assert_eq!(k["name"], "saxpy", "{v:#}");
    assert_eq!(k["params"][1]["offset"], 8, "{v:#}");
    assert_eq!(k["params"][1]["size"], 8, "{v:#}");
    assert!(k["registers"].is_null(), "{v:#}");
}

#[test]
fn compile_sm_90_with_nvcc_missing_exits_1_naming_hipjit_nvcc() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("no-such-nvcc");
    let o = hipjit_nv(
        &dir.path().join("cache"),
        &missing,
        &["compile", "--arch", "sm_90", path_str(&saxpy())],
    );
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    let err = stderr(&o);
    assert!(err.contains("HIPJIT_NVCC"), "{err}");
    assert!(err.contains(path_str(&missing)), "{err}");
}

#[test]
fn compile_mixing_sm_90_and_gfx90a_is_a_usage_error_naming_both() {
    let o = hipjit(&[
        "compile",
        "--arch",
        "sm_90",
        "--arch",
        "gfx90a",
        path_str(&saxpy()),
    ]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    let err = stderr(&o);
    assert!(err.contains("sm_90") && err.contains("gfx90a"), "{err}");
    assert!(err.contains("cannot be mixed"), "{err}");
}

#[test]
fn compile_sm_90_and_sm_90a_to_a_directory_writes_one_cubin_per_target() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let o = hipjit_nv(
        &dir.path().join("cache"),
        &pypi_nvcc(),
        &[
            "compile",
            "--json",
            "--arch",
            "sm_90",
            "--arch",
            "sm_90a",
            "-o",
            path_str(&out),
            path_str(&saxpy()),
        ],
    );
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let v = json(&o);
    let targets: Vec<&str> = v["results"][0]["code_objects"]
        .as_array()
        .expect("code_objects is an array")
        .iter()
        .map(|c| c["target_id"].as_str().unwrap())
        .collect();
    assert_eq!(targets, ["sm_90", "sm_90a"], "{v:#}");
    assert!(out.join("saxpy-sm_90.cubin").is_file());
    assert!(out.join("saxpy-sm_90a.cubin").is_file());
}

#[test]
fn compile_sm_90_with_code_object_version_is_a_usage_error() {
    let o = hipjit(&[
        "compile",
        "--arch",
        "sm_90",
        "--code-object-version",
        "5",
        path_str(&saxpy()),
    ]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("--code-object-version"),
        "{}",
        stderr(&o)
    );
}

#[test]
fn compile_sm_90_error_exits_1_naming_the_users_file_and_line() {
    let dir = tempfile::tempdir().unwrap();
    let src = write(
        dir.path(),
        "bad.hip",
        "extern \"C\" __global__ void k(int* p) {\n  p[0] = undeclared_name;\n}\n",
    );
    let o = hipjit_nv(
        &dir.path().join("cache"),
        &pypi_nvcc(),
        &["compile", "--arch", "sm_90", path_str(&src)],
    );
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    let err = stderr(&o);
    assert!(
        err.contains(&format!("{}(2): error", src.display())),
        "{err}"
    );
    assert!(err.contains("undeclared_name"), "{err}");
}

#[test]
fn inspect_cubin_with_an_amdgpu_target_is_a_usage_error() {
    let dir = tempfile::tempdir().unwrap();
    let cubin = saxpy_cubin(dir.path());
    let o = hipjit(&["inspect", "--target", "gfx90a", path_str(&cubin)]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("CUDA cubin"), "{}", stderr(&o));
}

#[test]
fn compile_sm_90_hit_in_a_read_only_root_names_that_roots_entry() {
    let nvcc = pypi_nvcc();
    let shared = tempfile::tempdir().unwrap();
    let own = tempfile::tempdir().unwrap();
    let src = saxpy();
    let args = ["compile", "--json", "--arch", "sm_90", path_str(&src)];
    let first = hipjit_nv(shared.path(), &nvcc, &args);
    assert_eq!(first.status.code(), Some(0), "{}", stderr(&first));
    let roots = format!("{}:{}", own.path().display(), shared.path().display());
    let second = hipjit_nv(Path::new(&roots), &nvcc, &args);
    assert_eq!(second.status.code(), Some(0), "{}", stderr(&second));
    let v = json(&second);
    let r = &v["results"][0];
    assert_eq!(r["cache"], "disk", "{v:#}");
    let entry = r["entry"].as_str().expect("the entry path");
    assert!(Path::new(entry).starts_with(shared.path()), "{v:#}");
}

#[test]
fn compile_for_compute_90_is_a_usage_error_suggesting_sm_90() {
    let o = hipjit(&["compile", "--arch", "compute_90", path_str(&saxpy())]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("use sm_90"), "{}", stderr(&o));
}

#[test]
fn inspect_help_says_target_is_optional_for_bundles() {
    let o = hipjit(&["inspect", "--help"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let out = stdout(&o);
    assert!(!out.contains("required"), "{out}");
    assert!(out.contains("without it, every AMDGPU entry"), "{out}");
}

// ---------------------------------------------------------------------------------------------
// What nvcc takes, `hipjit compile --arch sm_90` takes: bytes, --std, extra flags; nvcc's
// diagnostics with the user's paths and no column.

/// `hipjit compile --json --arch sm_90 ARGS` with the PyPI nvcc, asserting the exit status.
fn nv_json(dir: &Path, args: &[&str], status: i32) -> serde_json::Value {
    let mut all = vec!["compile", "--json", "--compiler", "nvcc", "--arch", "sm_90"];
    all.extend_from_slice(args);
    let o = hipjit_nv(&dir.join("cache"), &pypi_nvcc(), &all);
    assert_eq!(o.status.code(), Some(status), "{all:?}\n{}", stderr(&o));
    json(&o)
}

#[test]
fn compile_sm_90_takes_std_and_cflags_and_reports_warnings_without_a_column() {
    let dir = tempfile::tempdir().unwrap();
    let src = write(
        dir.path(),
        "cxx20.hip",
        "static_assert(__cplusplus >= 202002L, \"C++20 asked\");\n\
         extern \"C\" __global__ void k(int* p) {\n    int unused_here;\n    p[0] = VALUE;\n}\n",
    );
    let v = nv_json(
        dir.path(),
        &[
            "-std=c++20",
            "--cflag",
            "-DVALUE=3",
            path_str(&src),
            "--",
            "-lineinfo",
        ],
        0,
    );
    assert_eq!(v["std"], "c++20", "{v:#}");
    assert_eq!(
        v["extra_flags"],
        serde_json::json!(["-DVALUE=3", "-lineinfo"])
    );
    let d = &v["results"][0]["diagnostics"][0];
    assert_eq!(d["severity"], "warning", "{v:#}");
    assert_eq!(d["file"], path_str(&src), "{v:#}");
    assert_eq!(d["line"], 3, "{v:#}");
    assert!(d["column"].is_null(), "{v:#}");
    assert!(
        d["message"].as_str().unwrap().contains("unused_here"),
        "{v:#}"
    );
    // Without --std the standard is C++17 and the static_assert fails, naming the user's file.
    let v = nv_json(dir.path(), &["--cflag", "-DVALUE=3", path_str(&src)], 1);
    let d = &v["results"][0]["diagnostics"];
    let e = d
        .as_array()
        .unwrap()
        .iter()
        .find(|d| d["severity"] == "error")
        .unwrap_or_else(|| panic!("no error in {v:#}"));
    assert_eq!(e["file"], path_str(&src), "{v:#}");
    assert!(
        e["message"].as_str().unwrap().contains("C++20 asked"),
        "{v:#}"
    );
}

#[test]
fn compile_sm_90_cxx23_is_honoured_or_refused_never_silently_dropped() {
    let dir = tempfile::tempdir().unwrap();
    let src = write(
        dir.path(),
        "cxx23.hip",
        "static_assert(__cplusplus > 202002L, \"C++23 asked\");\n\
         extern \"C\" __global__ void k(int* p) { p[0] = 1; }\n",
    );
    let o = hipjit_nv(
        &dir.path().join("cache"),
        &pypi_nvcc(),
        &[
            "compile",
            "--arch",
            "sm_90",
            "--std",
            "c++23",
            path_str(&src),
        ],
    );
    // nvcc 13.5 with this machine's GCC 12 ignores -std=c++23 with a warning: hipjit refuses
    // rather than compile the source as C++17. With a newer host compiler it compiles.
    match o.status.code() {
        Some(0) => {}
        Some(1) => {
            let err = stderr(&o);
            assert!(err.contains("nvcc ignored -std=c++23"), "{err}");
            assert!(
                !err.contains("C++23 asked"),
                "compiled as another standard: {err}"
            );
        }
        other => panic!("status {other:?}: {}", stderr(&o)),
    }
}

#[test]
fn compile_sm_90_latin1_source_compiles_and_its_error_excerpt_is_escaped() {
    let dir = tempfile::tempdir().unwrap();
    let ok = dir.path().join("latin1.hip");
    std::fs::write(
        &ok,
        b"// \xa9 2026 (Latin-1)\nextern \"C\" __global__ void k(int* p) { p[0] = 1; }\n",
    )
    .unwrap();
    let v = nv_json(dir.path(), &[path_str(&ok)], 0);
    assert_eq!(v["results"][0]["ok"], true, "{v:#}");
    let bad = dir.path().join("bad.hip");
    std::fs::write(
        &bad,
        b"extern \"C\" __global__ void k(int* p) { p[0] = \"\xa9\"; }\n",
    )
    .unwrap();
    let v = nv_json(dir.path(), &[path_str(&bad)], 1);
    let diags = v["results"][0]["diagnostics"].as_array().unwrap().clone();
    let escaped: Vec<&str> = diags.iter().filter_map(|d| d["escaped"].as_str()).collect();
    assert!(
        escaped.iter().any(|e| e.contains("\\xa9")),
        "no escaped form with the Latin-1 byte in {v:#}"
    );
    assert!(diags.iter().all(|d| d["file"] == path_str(&bad)), "{v:#}");
}

#[test]
fn compile_sm_90_refuses_amd_and_output_flags_naming_nvcc() {
    for flag in ["-mcumode", "-ptx", "-arch=sm_80", "--options-file=x"] {
        let o = hipjit(&[
            "compile",
            "--arch",
            "sm_90",
            &format!("--cflag={flag}"),
            path_str(&saxpy()),
        ]);
        assert_eq!(o.status.code(), Some(2), "{flag}: {}", stderr(&o));
        let err = stderr(&o);
        assert!(err.contains(flag) && err.contains("nvcc"), "{flag}: {err}");
    }
}

#[test]
fn compile_sm_90_finds_headers_beside_a_source_named_relative_to_the_working_directory() {
    // nvcc runs in a temporary directory: relative include directories (the source's own
    // directory, `-I sub`) are made absolute first, and its warnings name them as given.
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("sub")).unwrap();
    write(
        &dir.path().join("sub"),
        "near.h",
        "#pragma once\n__device__ inline int near_value() { int spare; return 5; }\n",
    );
    write(
        &dir.path().join("sub"),
        "k.hip",
        "#include \"near.h\"\nextern \"C\" __global__ void k(int* p) { p[0] = near_value(); }\n",
    );
    let o = Command::new(env!("CARGO_BIN_EXE_hipjit"))
        .args(["compile", "--json", "--arch", "sm_90", "sub/k.hip"])
        .current_dir(dir.path())
        .env("HIPJIT_CACHE_DIR", dir.path().join("cache"))
        .env("HIPJIT_NVCC", pypi_nvcc())
        .output()
        .expect("the hipjit binary runs");
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let v = json(&o);
    let d = &v["results"][0]["diagnostics"][0];
    assert_eq!(d["file"], "sub/near.h", "{v:#}");
    assert_eq!(d["line"], 2, "{v:#}");
}
