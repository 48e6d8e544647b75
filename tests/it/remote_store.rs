//! The remote tier over the in-process store (`hipjit::cache::remote::memory`, feature
//! `testing`): no server. Each test has a store of its own (`memory://<test name>`), its
//! capabilities switched to check that the tier degrades as `cache::remote::store` states.
//! The compiler is the fixture hipcc copying a real gfx90a code object and counting its runs
//! in `$HOME/compiles` (as in `remote_cache.rs`).

use crate::common;

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use hipjit::cache::key::CACHE_FORMAT_VERSION;
use hipjit::cache::remote::memory::MemoryStore;
use hipjit::cache::remote::{signing, Capabilities, RemoteConfig};
use hipjit::compiler::CompileOptions;
use hipjit::jit::{CacheLocation, Compiled, Jit, JitOptions, Origin, RemoteLocation};
use hipjit::target_id::TargetId;

const SOURCE: &str = "extern \"C\" __global__ void k(int* x) { x[0] = 1; }\n";

fn home(dir: &Path) -> PathBuf {
    let home = dir.join("home");
    std::fs::create_dir_all(&home).unwrap();
    std::fs::set_permissions(&home, std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::write(
        home.join("act.sh"),
        format!(
            "echo $$ >> \"$HOME/compiles\"\n\
             cp {} out.hsaco\nfor a; do case \"$a\" in *.hip) src=\"$a\";; esac; done\n\
             echo \"out.hsaco: $src\" > deps.d\n",
            common::code_object("single-gfx90a.hsaco").display()
        ),
    )
    .unwrap();
    home
}

/// The store `memory://<name>`, emptied, with `caps`.
fn store(name: &str, caps: Capabilities) -> MemoryStore {
    let s = MemoryStore::shared(name);
    s.clear();
    s.set_capabilities(caps);
    s
}

/// A `Jit` with its disk cache at `root` and the remote tier `memory://<name>`.
fn jit(root: &Path, home: &Path, name: &str) -> Jit {
    let mut remote = RemoteConfig::new(format!("memory://{name}")).unwrap();
    remote.lock_poll = Duration::from_millis(20);
    Jit::new(JitOptions {
        compiler: Some(hipjit::compiler::selection::CompilerChoice::Hipcc),
        compiler_config: common::fake_hipcc_config(home),
        cache: CacheLocation::Roots(vec![root.to_path_buf()]),
        remote_cache: RemoteLocation::Server(remote),
        lock_wait: Some(Duration::from_secs(20)),
        ..JitOptions::default()
    })
    .unwrap_or_else(|e| panic!("{e}"))
}

fn compile(jit: &Jit) -> Compiled {
    jit.compile(
        SOURCE,
        &CompileOptions::for_target(TargetId::parse("gfx90a").unwrap()),
    )
    .unwrap_or_else(|e| panic!("{e}"))
}

fn entry_name(c: &Compiled) -> String {
    format!("hipjit:{CACHE_FORMAT_VERSION}:e:{}", c.key())
}

/// Compiles in root `a`, then in root `b`: a remote hit, one compile in all, written back to
/// `b` (a disk hit there without the store).
fn hits_from_another_root(name: &str, caps: Capabilities) -> (MemoryStore, tempfile::TempDir) {
    let s = store(name, caps);
    let dir = tempfile::tempdir().unwrap();
    let home = home(dir.path());
    let first = compile(&jit(&dir.path().join("a"), &home, name));
    assert_eq!(first.origin(), Origin::Compiler);
    assert!(
        s.raw(&entry_name(&first)).is_some(),
        "not stored: {:?}",
        s.names()
    );
    let b = jit(&dir.path().join("b"), &home, name);
    let second = compile(&b);
    assert_eq!(
        second.origin(),
        Origin::Remote,
        "{:?}",
        second.cache_warnings()
    );
    assert_eq!(second.key(), first.key());
    assert_eq!(common::compiles(&home), 1, "the second root compiled");
    b.flush_cache_writes();
    s.clear();
    let third = compile(&jit(&dir.path().join("b"), &home, name));
    assert_eq!(third.origin(), Origin::Disk);
    assert_eq!(common::compiles(&home), 1);
    (s, dir)
}

#[test]
fn a_memory_store_with_every_capability_serves_another_root() {
    hits_from_another_root("every-capability", Capabilities::ALL);
}

/// Without manifest merge the manifests of a direct key are one plain value (no recency
/// record), and without atomic create entries are plainly put: hits all the same.
#[test]
fn a_store_with_only_get_put_delete_serves_another_root() {
    let name = "no-capability";
    let s = store(name, Capabilities::NONE);
    let dir = tempfile::tempdir().unwrap();
    let home = home(dir.path());
    let first = compile(&jit(&dir.path().join("a"), &home, name));
    let names = s.names();
    let manifests: Vec<_> = names.iter().filter(|n| n.contains(":m:")).collect();
    assert_eq!(manifests.len(), 1, "{names:?}");
    assert!(!names.iter().any(|n| n.contains(":r:")), "{names:?}");
    assert!(
        s.raw(manifests[0]).is_some(),
        "the manifests are no plain value"
    );
    let second = compile(&jit(&dir.path().join("b"), &home, name));
    assert_eq!(
        second.origin(),
        Origin::Remote,
        "{:?}",
        second.cache_warnings()
    );
    assert_eq!(second.key(), first.key());
    assert_eq!(common::compiles(&home), 1);
    drop(dir);
    hits_from_another_root(name, Capabilities::NONE);
}

/// Compiles in root `a`, corrupts the stored entry, compiles in root `b`: refused (reported,
/// the source compiled), and a good entry is in the store after `b`'s publish, whether the
/// store deleted the bad one (compare-and-delete) or the publish overwrote it (without).
fn a_corrupted_entry_is_refused(name: &str, caps: Capabilities) -> bool {
    let s = store(name, caps);
    let dir = tempfile::tempdir().unwrap();
    let home = home(dir.path());
    let first = compile(&jit(&dir.path().join("a"), &home, name));
    let entry = entry_name(&first);
    let good = s.raw(&entry).unwrap();
    let mut bad = good.clone();
    let at = bad.len() - 100;
    bad[at] ^= 0x55; // inside the code object: its recorded sha256 no longer matches
    s.set_raw(&entry, bad.clone());

    let second = compile(&jit(&dir.path().join("b"), &home, name));
    assert_eq!(
        second.origin(),
        Origin::Compiler,
        "the corrupted entry was served"
    );
    let reported = second
        .bad_entries()
        .iter()
        .find(|b| b.path.to_string_lossy().ends_with(&entry))
        .unwrap_or_else(|| panic!("not reported: {:?}", second.bad_entries()));
    assert!(reported.reason.contains("sha256"), "{}", reported.reason);
    assert_eq!(common::compiles(&home), 2);
    let now = s.raw(&entry).expect("not published again");
    assert_ne!(now, bad, "the bad entry is still there");
    let payload = signing::open(None, entry.as_bytes(), &now).unwrap();
    hipjit::cache::disk::Entry::from_bytes(payload.to_vec(), Path::new(&entry), Some(&first.key()))
        .unwrap_or_else(|e| panic!("the replacement is bad: {e}"));
    let third = compile(&jit(&dir.path().join("c"), &home, name));
    assert_eq!(third.origin(), Origin::Remote);
    assert_eq!(common::compiles(&home), 2);
    reported.writable_root
}

#[test]
fn a_corrupted_entry_is_refused_and_deleted_with_compare_and_delete() {
    let removed = a_corrupted_entry_is_refused("corrupted-deleted", Capabilities::ALL);
    assert!(removed, "reported as not removed");
}

/// Without compare-and-delete the bad entry cannot be removed safely: it is reported as not
/// removed, and the next publish of that entry by this process overwrites it (a plain put,
/// although the store can create atomically).
#[test]
fn without_compare_and_delete_a_bad_entry_is_overwritten_by_the_next_publish() {
    let caps = Capabilities {
        compare_and_delete: false,
        ..Capabilities::ALL
    };
    let removed = a_corrupted_entry_is_refused("corrupted-overwritten", caps);
    assert!(!removed, "reported as removed");
}

/// Without the lock capability nodes compile without a cluster lock (no single flight across
/// roots), and nothing fails or waits.
#[test]
fn without_a_lock_nodes_compile_without_waiting() {
    let name = "no-lock";
    let s = store(
        name,
        Capabilities {
            lock: false,
            ..Capabilities::ALL
        },
    );
    let dir = tempfile::tempdir().unwrap();
    let home = home(dir.path());
    let first = compile(&jit(&dir.path().join("a"), &home, name));
    assert_eq!(first.origin(), Origin::Compiler);
    assert!(
        !s.names().iter().any(|n| n.contains(":l:")),
        "a lock was left"
    );
    // A lock held by "another node" under the lock's name is not waited for.
    s.clear();
    let lock = format!(
        "hipjit:{CACHE_FORMAT_VERSION}:l:{}",
        jit(&dir.path().join("b"), &home, name)
            .source_key(
                SOURCE,
                &CompileOptions::for_target(TargetId::parse("gfx90a").unwrap())
            )
            .unwrap()
    );
    s.set_raw(&lock, b"held elsewhere".to_vec());
    let started = std::time::Instant::now();
    let second = compile(&jit(&dir.path().join("b"), &home, name));
    assert_eq!(second.origin(), Origin::Compiler);
    assert!(started.elapsed() < Duration::from_secs(10));
}

/// An unreachable store is a miss: the compile goes on locally.
#[test]
fn a_store_that_is_down_is_a_miss_not_a_failure() {
    let name = "down";
    let s = store(name, Capabilities::ALL);
    s.set_down(true);
    let dir = tempfile::tempdir().unwrap();
    let home = home(dir.path());
    let first = compile(&jit(&dir.path().join("a"), &home, name));
    assert_eq!(first.origin(), Origin::Compiler);
    assert!(s.names().is_empty());
    s.set_down(false);
}

/// Another value under a source's manifests name (planted, or left by a broken writer) is a
/// miss, and the next compile's publish replaces it: it cannot end the tier for that source.
#[test]
fn a_foreign_value_under_the_manifests_name_is_replaced_by_the_next_publish() {
    let name = "foreign-manifests";
    let s = store(name, Capabilities::ALL);
    let dir = tempfile::tempdir().unwrap();
    let home = home(dir.path());
    compile(&jit(&dir.path().join("a"), &home, name));
    let manifests: Vec<String> = s
        .names()
        .into_iter()
        .filter(|n| n.contains(":m:"))
        .collect();
    assert_eq!(manifests.len(), 1, "{:?}", s.names());
    s.set_raw(&manifests[0], b"not a manifest record".to_vec());
    // Root b: the manifests cannot be read, a miss; its publish replaces the value.
    let b = compile(&jit(&dir.path().join("b"), &home, name));
    assert_eq!(b.origin(), Origin::Compiler);
    assert_eq!(common::compiles(&home), 2);
    // Root c: a remote hit through the republished manifest.
    let c = compile(&jit(&dir.path().join("c"), &home, name));
    assert_eq!(c.origin(), Origin::Remote, "{:?}", c.cache_warnings());
    assert_eq!(common::compiles(&home), 2);
}
