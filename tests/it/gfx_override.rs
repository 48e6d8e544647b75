//! ROCm's ISA override (`HSA_OVERRIDE_GFX_VERSION`, `HSA_OVERRIDE_GFX_VERSION_<N>`) and hosts
//! with GPUs of different targets, on the fixture HIP runtime (tests/fixtures/fake_hip.c), which
//! stands in for ROCm here: it applies the override as ROCm's thunk library does when it starts
//! (per-node variable first, then the global one; node N is device N - 1), reports the
//! overridden ISA in `gcnArchName`, and refuses (hipErrorNoBinaryForGpu) a code object whose
//! processor is not the one it reports for the device. Each scenario runs in a child process,
//! since the runtime reads the environment once, when it starts. Code objects are compiled by
//! the real hipcc.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use hipjit::compiler::selection::CompilerChoice;
use hipjit::compiler::CompileOptions;
use hipjit::jit::{CacheLocation, Jit, JitOptions};
use hipjit::runtime::Runtime;

use crate::common::{self, fixture_lib};

const SOURCE: &str = "#include <hip/hip_runtime.h>\n\
    extern \"C\" __global__ void scale(float* x, float a, unsigned n) {\n\
    unsigned i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) x[i] *= a; }\n";

/// The variables the children read: the fixture runtime, the cache root, the device ordinals to
/// load on (comma-separated, in order).
const CHILD_LIB: &str = "HIPJIT_TEST_OVERRIDE_LIB";
const CHILD_CACHE: &str = "HIPJIT_TEST_OVERRIDE_CACHE";
const CHILD_ON: &str = "HIPJIT_TEST_OVERRIDE_ON";

const OVERRIDES: [&str; 3] = [
    "HSA_OVERRIDE_GFX_VERSION",
    "HSA_OVERRIDE_GFX_VERSION_1",
    "HSA_OVERRIDE_GFX_VERSION_2",
];

/// The fixture runtime, built once a process (each child loads its own copy of the file's
/// state: a fresh process).
fn runtime_lib() -> &'static Path {
    static L: OnceLock<PathBuf> = OnceLock::new();
    L.get_or_init(|| {
        let lib = Path::new(env!("CARGO_TARGET_TMPDIR")).join("gfx-override/libamdhip64.so");
        fixture_lib::hip_runtime(&lib, &[]);
        lib
    })
}

/// What a child saw loading `SOURCE` on one device.
#[derive(Debug, Clone, PartialEq)]
struct Seen {
    device: usize,
    arch: String,
    target: String,
    key: String,
    origin: String,
}

/// Runs the child with `devices` (HIPJIT_FIXTURE_DEVICES, `""`: the fixture's one
/// gfx90a:sramecc+:xnack- device) and `env` (the override variables; the others removed),
/// loading on the ordinals `on` with the disk cache at `cache` and the per-user memos under
/// `home`; returns what it saw, one per load, and the fixture's record.
fn child(
    devices: &str,
    env: &[(&str, &str)],
    on: &str,
    cache: &Path,
    home: &Path,
) -> (Vec<Seen>, Vec<String>) {
    let mut cmd = common::child_test(module_path!(), "child_loads_on_each_device");
    for v in OVERRIDES {
        cmd.env_remove(v);
    }
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = common::child_stdout(
        cmd.env("HIPJIT_FIXTURE_DEVICES", devices)
            .env(CHILD_LIB, runtime_lib())
            .env(CHILD_CACHE, cache)
            .env(CHILD_ON, on)
            .env("XDG_CACHE_HOME", home)
            .env_remove("HIPJIT_COMPILER")
            .env_remove("HIPJIT_CACHE_DIR")
            .spawn()
            .unwrap(),
    );
    let seen: Vec<Seen> = out
        .lines()
        // libtest's "test ... " may begin the first line.
        .filter_map(|l| l.split_once("SEEN ").map(|(_, rest)| rest))
        .map(|l| {
            let f: Vec<&str> = l.split(' ').collect();
            Seen {
                device: f[0].parse().unwrap(),
                arch: f[1].to_owned(),
                target: f[2].to_owned(),
                key: f[3].to_owned(),
                origin: f[4].to_owned(),
            }
        })
        .collect();
    let log: Vec<String> = out
        .lines()
        .filter_map(|l| l.strip_prefix("LOG "))
        .map(str::to_owned)
        .collect();
    assert!(!seen.is_empty(), "the child loaded nothing:\n{out}");
    (seen, log)
}

#[test]
#[ignore = "a child process of the gfx_override tests (HIPJIT_TEST_OVERRIDE_* set)"]
fn child_loads_on_each_device() {
    let lib = PathBuf::from(std::env::var_os(CHILD_LIB).expect("run by a gfx_override test"));
    let cache = PathBuf::from(std::env::var_os(CHILD_CACHE).unwrap());
    let on = std::env::var(CHILD_ON).unwrap();
    let rt = Runtime::load_from(&lib).unwrap_or_else(|e| panic!("{e}"));
    // One Jit for every device, as a process with several GPUs uses it.
    let jit = Jit::new(JitOptions {
        compiler: Some(CompilerChoice::Hipcc),
        cache: CacheLocation::Roots(vec![cache]),
        ..JitOptions::default()
    })
    .unwrap_or_else(|e| panic!("{e}"));
    for i in on.split(',').map(|s| s.parse::<u32>().unwrap()) {
        let dev = rt.device(i).unwrap_or_else(|e| panic!("device {i}: {e}"));
        let loaded = jit
            .load(&dev, SOURCE, &CompileOptions::default())
            .unwrap_or_else(|e| panic!("device {i}: {e}"));
        let target = loaded
            .compiled
            .code_object()
            .unwrap()
            .target_id()
            .to_string();
        println!(
            "SEEN {i} {} {target} {} {:?}",
            dev.arch_name(),
            loaded.compiled.key(),
            loaded.compiled.origin()
        );
    }
    for l in fixture_lib::log(&lib) {
        println!("LOG {l}");
    }
}

fn loads(log: &[String]) -> Vec<&str> {
    log.iter()
        .filter(|l| l.starts_with("hipModuleLoadData "))
        .map(String::as_str)
        .collect()
}

fn no_refused_load(log: &[String]) {
    assert!(
        !log.iter().any(|l| l.contains("no binary for")),
        "the runtime refused a code object: {log:#?}"
    );
}

#[test]
fn each_device_of_a_mixed_host_gets_a_code_object_for_its_own_target() {
    let dir = tempfile::tempdir().unwrap();
    let (cache, home) = (dir.path().join("cache"), dir.path().join("home"));
    // Device 0 (gfx90a:sramecc+:xnack-) and device 1 (gfx1030), in turns: one Jit, one process.
    let (seen, log) = child(
        "gfx90a:sramecc+:xnack-,gfx1030",
        &[],
        "0,1,0,1",
        &cache,
        &home,
    );
    let by_device = |d: usize| -> Vec<&Seen> { seen.iter().filter(|s| s.device == d).collect() };
    for s in by_device(0) {
        assert_eq!(
            (s.arch.as_str(), s.target.as_str()),
            ("gfx90a:sramecc+:xnack-", "gfx90a:sramecc+:xnack-")
        );
    }
    for s in by_device(1) {
        assert_eq!((s.arch.as_str(), s.target.as_str()), ("gfx1030", "gfx1030"));
    }
    assert_ne!(seen[0].key, seen[1].key, "one key per target");
    // Two compiles; the second request of each device is the first one's library.
    let compiled: Vec<_> = seen.iter().filter(|s| s.origin == "Compiler").collect();
    assert_eq!(compiled.len(), 2, "{seen:#?}");
    no_refused_load(&log);
    let l = loads(&log);
    assert_eq!(l.len(), 2, "{log:#?}");
    assert!(
        l[0].ends_with(" device=0") && l[1].ends_with(" device=1"),
        "{l:#?}"
    );
}

#[test]
fn the_override_is_the_target_compiled_for_and_keys_its_own_cache_entry() {
    let dir = tempfile::tempdir().unwrap();
    let (cache, home) = (dir.path().join("cache"), dir.path().join("home"));
    let real = child("", &[], "0", &cache, &home);
    let real_again = child("", &[], "0", &cache, &home);
    let over = [("HSA_OVERRIDE_GFX_VERSION", "10.3.0")];
    let overridden = child("", &over, "0", &cache, &home);
    let overridden_again = child("", &over, "0", &cache, &home);
    let one = |r: &(Vec<Seen>, Vec<String>)| {
        no_refused_load(&r.1);
        assert_eq!(loads(&r.1).len(), 1, "{:#?}", r.1);
        assert_eq!(r.0.len(), 1);
        r.0[0].clone()
    };
    let (a, a2, b, b2) = (
        one(&real),
        one(&real_again),
        one(&overridden),
        one(&overridden_again),
    );
    assert_eq!(
        (a.arch.as_str(), a.target.as_str()),
        ("gfx90a:sramecc+:xnack-", "gfx90a:sramecc+:xnack-")
    );
    assert_eq!(
        (a.origin.as_str(), a2.origin.as_str()),
        ("Compiler", "Disk")
    );
    assert_eq!(a2.key, a.key);
    // With the override, the runtime reports gfx1030: that is compiled for, under another key,
    // and not served the entry of the real target (which the runtime would refuse).
    assert_eq!((b.arch.as_str(), b.target.as_str()), ("gfx1030", "gfx1030"));
    assert_ne!(b.key, a.key);
    assert_eq!(b.origin, "Compiler", "{b:?}");
    assert!(
        overridden
            .1
            .iter()
            .any(|l| l == "device 0 overridden as gfx1030"),
        "{:#?}",
        overridden.1
    );
    assert_eq!(
        (b2.origin.as_str(), b2.key.as_str(), b2.target.as_str()),
        ("Disk", b.key.as_str(), "gfx1030")
    );
}

#[test]
fn a_per_node_override_comes_before_the_global_one() {
    let dir = tempfile::tempdir().unwrap();
    let (cache, home) = (dir.path().join("cache"), dir.path().join("home"));
    // Two gfx906 devices: node 1 (device 0) has its own override (9.0.10: the stepping is hex
    // in the name), node 2 (device 1) takes the global one.
    let (seen, log) = child(
        "gfx906,gfx906",
        &[
            ("HSA_OVERRIDE_GFX_VERSION", "10.3.0"),
            ("HSA_OVERRIDE_GFX_VERSION_1", "9.0.10"),
        ],
        "0,1",
        &cache,
        &home,
    );
    let got: Vec<_> = seen
        .iter()
        .map(|s| {
            (
                s.device,
                s.arch.as_str(),
                s.target.as_str(),
                s.origin.as_str(),
            )
        })
        .collect();
    assert_eq!(
        got,
        vec![
            (0, "gfx90a", "gfx90a", "Compiler"),
            (1, "gfx1030", "gfx1030", "Compiler")
        ]
    );
    no_refused_load(&log);
    assert_eq!(loads(&log).len(), 2, "{log:#?}");
}

#[cfg(feature = "cli")]
fn doctor(env: &[(&str, &str)]) -> serde_json::Value {
    let dir = tempfile::tempdir().unwrap();
    let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_hipjit"));
    for v in OVERRIDES {
        cmd.env_remove(v);
    }
    for (k, v) in env {
        cmd.env(k, v);
    }
    let o = cmd
        .args(["doctor", "--json"])
        .env("HIPJIT_HIP_LIBRARY", runtime_lib())
        .env("HIPJIT_FIXTURE_DEVICES", "gfx90a:sramecc+:xnack-,gfx906")
        .env("HIPJIT_CACHE_DIR", dir.path().join("cache"))
        .env("XDG_CACHE_HOME", dir.path().join("home"))
        .output()
        .unwrap();
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    serde_json::from_slice(&o.stdout).unwrap()
}

#[cfg(feature = "cli")]
fn findings_with(v: &serde_json::Value, needle: &str) -> Vec<(String, String)> {
    v["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| {
            (
                f["level"].as_str().unwrap().to_owned(),
                f["text"].as_str().unwrap().to_owned(),
            )
        })
        .filter(|(_, t)| t.contains(needle))
        .collect()
}

#[cfg(feature = "cli")]
#[test]
fn doctor_reports_the_override_and_the_targets_the_runtime_reports() {
    let v = doctor(&[
        ("HSA_OVERRIDE_GFX_VERSION", "11.0.0"),
        ("HSA_OVERRIDE_GFX_VERSION_1", "9.0.10"),
    ]);
    assert_eq!(
        v["devices"],
        serde_json::json!(["gfx90a", "gfx1100"]),
        "{v:#}"
    );
    assert_eq!(
        v["gfx_override"],
        serde_json::json!([
            {"variable": "HSA_OVERRIDE_GFX_VERSION", "value": "11.0.0", "target": "gfx1100"},
            {"variable": "HSA_OVERRIDE_GFX_VERSION_1", "value": "9.0.10", "target": "gfx90a"},
        ])
    );
    let f = findings_with(&v, "HSA_OVERRIDE_GFX_VERSION=11.0.0 is set");
    assert_eq!(f.len(), 1, "{:#}", v["findings"]);
    assert_eq!(f[0].0, "note");
    assert!(f[0].1.contains("as gfx1100"), "{}", f[0].1);
    assert_eq!(
        findings_with(&v, "HSA_OVERRIDE_GFX_VERSION_1=9.0.10").len(),
        1
    );

    // Without it: the real targets, and nothing said of an override.
    let v = doctor(&[]);
    assert_eq!(
        v["devices"],
        serde_json::json!(["gfx90a:sramecc+:xnack-", "gfx906"])
    );
    assert_eq!(v["gfx_override"], serde_json::json!([]));
    assert!(findings_with(&v, "HSA_OVERRIDE_GFX_VERSION").is_empty());

    // A value ROCm refuses: its runtime does not start, and the doctor says why.
    let v = doctor(&[("HSA_OVERRIDE_GFX_VERSION", "10.3")]);
    assert_eq!(v["devices"], serde_json::json!([]));
    assert_eq!(v["gfx_override"][0]["target"], serde_json::Value::Null);
    let f = findings_with(
        &v,
        "HSA_OVERRIDE_GFX_VERSION=\"10.3\" is not MAJOR.MINOR.STEPPING",
    );
    assert_eq!(f.len(), 1, "{:#}", v["findings"]);
    assert_eq!(f[0].0, "warning");
}
