//! Eight processes compile the same source into one cache root at once: one compile (the
//! others wait on the key's lock and read the entry), one valid result entry and its header
//! manifest, no torn or temporary file left. The processes are this test binary itself, running the
//! ignored `race_child` test.

use crate::common;

use std::path::Path;

use hipjit::cache::disk::DiskCache;
use hipjit::compiler::CompileOptions;
use hipjit::jit::{CacheLocation, Jit, JitOptions};
use hipjit::target_id::TargetId;

const CHILD_ROOT_ENV: &str = "HIPJIT_RACE_ROOT";
const SOURCE: &str = "#include <hip/hip_runtime.h>\n\
    extern \"C\" __global__ void race(int* x) { x[threadIdx.x] += 1; }\n";

fn options() -> CompileOptions {
    CompileOptions::for_target(TargetId::parse("gfx90a").unwrap())
}

#[test]
#[ignore = "child process of eight_processes_racing_on_one_key_leave_one_valid_entry"]
fn race_child() {
    let root = std::env::var_os(CHILD_ROOT_ENV).expect("HIPJIT_RACE_ROOT must be set");
    let jit = Jit::new(JitOptions {
        // hipcc, whatever HIPJIT_COMPILER says: these tests are about it.
        compiler: Some(hipjit::compiler::selection::CompilerChoice::Hipcc),
        cache: CacheLocation::Roots(vec![root.into()]),
        ..JitOptions::default()
    })
    .unwrap_or_else(|e| panic!("{e}"));
    let c = jit
        .compile(SOURCE, &options())
        .unwrap_or_else(|e| panic!("{e}"));
    println!("ORIGIN {:?} KEY {}", c.origin(), c.key());
}

#[test]
fn eight_processes_racing_on_one_key_leave_one_valid_entry() {
    let dir = tempfile::tempdir().unwrap();
    let children: Vec<_> = (0..8)
        .map(|_| {
            common::child_test(module_path!(), "race_child")
                .env(CHILD_ROOT_ENV, dir.path())
                .spawn()
                .unwrap()
        })
        .collect();
    let mut keys = Vec::new();
    let mut compiled = 0;
    for child in children {
        let stdout = common::child_stdout(child);
        let key = stdout
            .lines()
            .find_map(|l| l.split_once(" KEY ").map(|(_, k)| k.to_string()))
            .unwrap_or_else(|| panic!("no key in child output: {stdout}"));
        keys.push(key);
        compiled += stdout
            .lines()
            .filter(|l| l.contains("ORIGIN Compiler KEY "))
            .count();
    }
    assert_eq!(compiled, 1, "processes that ran the compiler");
    keys.dedup();
    assert_eq!(keys.len(), 1, "children computed different keys: {keys:?}");
    let cache = DiskCache::open(&[dir.path().to_path_buf()]).unwrap();
    let entries = cache.list().unwrap();
    assert_eq!(entries.len(), 2, "a result and its manifest: {entries:?}");
    for v in cache.verify().unwrap() {
        assert!(v.status.is_ok(), "{:?}", v.status);
    }
    let mut kinds: Vec<(String, Vec<String>)> = entries
        .iter()
        .map(|e| {
            let key = e.key.expect("key-named entry");
            let entry = cache.get(&key).entry.expect("readable");
            let names = entry
                .meta
                .artefacts
                .iter()
                .map(|a| a.name.clone())
                .collect();
            (key.to_hex(), names)
        })
        .collect();
    kinds.sort_by_key(|(_, names)| names.clone());
    assert_eq!(
        kinds[0],
        (
            keys[0].clone(),
            vec!["code-object".to_string(), "key-record".to_string()]
        )
    );
    assert_eq!(kinds[1].1, ["manifest"]);
    assert_eq!(leftover_temporaries(dir.path()), 0);
}

fn leftover_temporaries(root: &Path) -> usize {
    std::fs::read_dir(root.join("v1/tmp"))
        .map(|d| d.count())
        .unwrap_or(0)
}
