//! The disk cache on its own: publishing, verification, read-only roots, ownership rules,
//! pruning. The artefacts are made-up bytes: these tests are about the file layout, not the
//! compiler (tests/real/compiler.rs covers real entries).

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use hipjit::cache::disk::{roots_from_env, CacheError, DiskCache, EntryMeta, SHARED_MARKER};
use hipjit::cache::key::CacheKey;
use hipjit::compiler::{CompileOptions, CompilerIdentity, CompilerKind};

fn meta() -> EntryMeta {
    EntryMeta {
        format_version: 0,
        key: String::new(),
        command: vec!["/usr/bin/hipcc".into(), "--genco".into()],
        compiler: CompilerIdentity {
            kind: CompilerKind::Hipcc,
            path: "/usr/bin/hipcc".into(),
            version: "HIP version: 5.2.21153-0\n".into(),
            fingerprint: "00".repeat(32),
            covered: vec![],
            root: Default::default(),
            header_dirs: Vec::new(),
            host_compiler: None,
            system_include_dirs: Vec::new(),
        },
        options: CompileOptions::default(),
        tracked_headers: vec![],
        dependencies: vec![],
        created_unix_ms: 0,
        artefacts: vec![],
    }
}

fn key(n: u8) -> CacheKey {
    CacheKey([n; 32])
}

fn put(cache: &DiskCache, k: &CacheKey, bytes: &[u8]) -> PathBuf {
    cache.put(k, meta(), &[("code-object", bytes)]).unwrap().0
}

#[test]
fn written_entry_reads_back_with_its_artefact_and_metadata() {
    let dir = tempfile::tempdir().unwrap();
    let cache = DiskCache::open(&[dir.path().to_path_buf()]).unwrap();
    put(&cache, &key(1), b"code object bytes");
    let entry = cache.get(&key(1)).entry.expect("hit");
    assert_eq!(
        entry.artefact("code-object"),
        Some(&b"code object bytes"[..])
    );
    assert_eq!(entry.meta.command[1], "--genco");
    assert_eq!(entry.meta.artefacts[0].size, 17);
}

#[test]
fn default_root_is_created_private() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("xdg/hipjit");
    DiskCache::open(std::slice::from_ref(&root)).unwrap();
    let mode = std::fs::metadata(&root).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o700);
}

#[test]
fn roots_come_from_the_colon_list_then_xdg_then_home() {
    let var = |vars: &'static [(&'static str, &'static str)]| {
        move |k: &str| vars.iter().find(|(n, _)| *n == k).map(|(_, v)| v.into())
    };
    assert_eq!(
        roots_from_env(var(&[("HIPJIT_CACHE_DIR", "/a::/b"), ("HOME", "/h")])).unwrap(),
        [PathBuf::from("/a"), PathBuf::from("/b")]
    );
    assert_eq!(
        roots_from_env(var(&[("XDG_CACHE_HOME", "/x"), ("HOME", "/h")])).unwrap(),
        [PathBuf::from("/x/hipjit")]
    );
    assert_eq!(
        roots_from_env(var(&[("HOME", "/h")])).unwrap(),
        [PathBuf::from("/h/.cache/hipjit")]
    );
    assert_eq!(roots_from_env(var(&[])), None);
}

#[test]
fn truncated_entry_is_a_miss_reported_with_its_reason() {
    let dir = tempfile::tempdir().unwrap();
    let cache = DiskCache::open(&[dir.path().to_path_buf()]).unwrap();
    let path = put(&cache, &key(2), &[7u8; 1000]);
    let bytes = std::fs::read(&path).unwrap();
    std::fs::write(&path, &bytes[..bytes.len() - 10]).unwrap();
    let lookup = cache.get(&key(2));
    assert!(lookup.entry.is_none());
    assert_eq!(lookup.bad.len(), 1);
    assert!(
        lookup.bad[0].reason.contains("runs past the end"),
        "{:?}",
        lookup.bad
    );
    assert!(lookup.bad[0].writable_root);
}

#[test]
fn bad_entry_in_the_written_root_is_replaced_by_the_next_put() {
    let dir = tempfile::tempdir().unwrap();
    let cache = DiskCache::open(&[dir.path().to_path_buf()]).unwrap();
    let path = put(&cache, &key(3), b"good");
    std::fs::write(&path, b"garbage").unwrap();
    let (_, published) = cache
        .put(&key(3), meta(), &[("code-object", b"good")])
        .unwrap();
    assert!(published);
    assert_eq!(
        cache.get(&key(3)).entry.unwrap().artefact("code-object"),
        Some(&b"good"[..])
    );
}

#[test]
fn valid_entry_is_never_overwritten() {
    let dir = tempfile::tempdir().unwrap();
    let cache = DiskCache::open(&[dir.path().to_path_buf()]).unwrap();
    put(&cache, &key(4), b"first");
    let (_, published) = cache
        .put(&key(4), meta(), &[("code-object", b"second")])
        .unwrap();
    assert!(!published);
    assert_eq!(
        cache.get(&key(4)).entry.unwrap().artefact("code-object"),
        Some(&b"first"[..])
    );
}

#[test]
fn read_only_root_is_searched_after_the_written_one_and_never_written() {
    let ro = tempfile::tempdir().unwrap();
    let rw = tempfile::tempdir().unwrap();
    put(
        &DiskCache::open(&[ro.path().to_path_buf()]).unwrap(),
        &key(5),
        b"shared",
    );
    let cache = DiskCache::open(&[rw.path().to_path_buf(), ro.path().to_path_buf()]).unwrap();
    let entry = cache
        .get(&key(5))
        .entry
        .expect("found in the read-only root");
    assert!(entry.path.starts_with(ro.path()));
    put(&cache, &key(6), b"new");
    assert!(DiskCache::entry_path(rw.path(), &key(6)).exists());
    assert!(!DiskCache::entry_path(ro.path(), &key(6)).exists());
}

#[test]
fn bad_entry_in_a_read_only_root_is_skipped_and_reported() {
    let ro = tempfile::tempdir().unwrap();
    let rw = tempfile::tempdir().unwrap();
    let path = put(
        &DiskCache::open(&[ro.path().to_path_buf()]).unwrap(),
        &key(7),
        b"x",
    );
    std::fs::write(&path, b"HIPJITCE broken").unwrap();
    let cache = DiskCache::open(&[rw.path().to_path_buf(), ro.path().to_path_buf()]).unwrap();
    let lookup = cache.get(&key(7));
    assert!(lookup.entry.is_none());
    assert_eq!(lookup.bad.len(), 1);
    assert!(!lookup.bad[0].writable_root);
    assert_eq!(
        std::fs::read(&path).unwrap(),
        b"HIPJITCE broken",
        "read-only root was modified"
    );
}

#[test]
fn root_writable_by_its_group_is_refused_unless_declared_shared() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o775)).unwrap();
    let err = DiskCache::open(&[dir.path().to_path_buf()]).unwrap_err();
    assert!(matches!(err, CacheError::Unsafe { .. }), "{err}");
    assert!(err.to_string().contains("HIPJIT_SHARED"), "{err}");
    std::fs::write(dir.path().join(SHARED_MARKER), "").unwrap();
    let cache = DiskCache::open(&[dir.path().to_path_buf()]).unwrap();
    assert!(cache.roots()[0].shared);
    let path = put(&cache, &key(8), b"x");
    let mode = std::fs::metadata(path).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o644);
}

#[test]
fn a_shared_root_writable_by_others_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join(SHARED_MARKER), "").unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o777)).unwrap();
    let err = DiskCache::open(&[dir.path().to_path_buf()]).unwrap_err();
    assert!(matches!(err, CacheError::Unsafe { .. }), "{err}");
    assert!(err.to_string().contains("writable by others"), "{err}");
}

#[test]
fn shared_marker_owned_by_another_user_declares_nothing() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o777)).unwrap();
    let marker = dir.path().join(SHARED_MARKER);
    std::fs::write(&marker, "").unwrap();
    // Another user (not the root's owner, not the superuser) drops the marker.
    std::os::unix::fs::chown(&marker, Some(54321), Some(54321))
        .expect("chown the marker to another uid (the tests run as root)");
    let err = DiskCache::open(&[dir.path().to_path_buf()]).unwrap_err();
    assert!(matches!(err, CacheError::Unsafe { .. }), "{err}");
    assert!(
        err.to_string().contains("writable by group or others"),
        "{err}"
    );
}

#[test]
fn entry_writable_by_others_in_a_private_root_is_a_miss() {
    let dir = tempfile::tempdir().unwrap();
    let cache = DiskCache::open(&[dir.path().to_path_buf()]).unwrap();
    let path = put(&cache, &key(9), b"x");
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o666)).unwrap();
    let lookup = cache.get(&key(9));
    assert!(lookup.entry.is_none());
    assert!(
        lookup.bad[0].reason.contains("writable by group or others"),
        "{:?}",
        lookup.bad
    );
}

fn age(path: &Path, secs_ago: u64) {
    let t = std::time::SystemTime::now() - std::time::Duration::from_secs(secs_ago);
    std::fs::File::open(path).unwrap().set_modified(t).unwrap();
}

#[test]
fn prune_removes_least_recently_used_entries_first() {
    let dir = tempfile::tempdir().unwrap();
    let cache = DiskCache::open(&[dir.path().to_path_buf()]).unwrap();
    let old = put(&cache, &key(10), &[0u8; 4000]);
    let used = put(&cache, &key(11), &[0u8; 4000]);
    let new = put(&cache, &key(12), &[0u8; 4000]);
    // Older than the granularity of the mark a hit sets (an hour).
    age(&old, 4 * 3600);
    age(&used, 3 * 3600);
    age(&new, 2 * 3600);
    // A hit makes key 11 the most recently used.
    assert!(cache.get(&key(11)).entry.is_some());
    let one = std::fs::metadata(&new).unwrap().len();
    let report = cache.prune(one * 2).unwrap();
    assert_eq!(report.removed, 1);
    assert!(!old.exists());
    assert!(used.exists() && new.exists());
    let report = cache.prune(one).unwrap();
    assert_eq!(report.removed, 1);
    assert!(!new.exists(), "key 12 was used less recently than key 11");
    assert!(used.exists());
}

fn modified(path: &Path) -> std::time::SystemTime {
    std::fs::metadata(path).unwrap().modified().unwrap()
}

#[test]
fn a_hit_marks_an_entry_used_only_when_its_mark_is_an_hour_or_more_away() {
    use hipjit::cache::disk::LRU_GRANULARITY;
    use std::time::{Duration, SystemTime};
    let dir = tempfile::tempdir().unwrap();
    let cache = DiskCache::open(&[dir.path().to_path_buf()]).unwrap();
    let path = put(&cache, &key(20), b"x");
    let set = |t: SystemTime| std::fs::File::open(&path).unwrap().set_modified(t).unwrap();
    let near = |t: SystemTime| {
        let now = SystemTime::now();
        now.duration_since(t).unwrap_or_else(|e| e.duration()) < Duration::from_secs(60)
    };
    // Used ten minutes ago: within the granularity, left alone.
    let recent = SystemTime::now() - Duration::from_secs(600);
    set(recent);
    assert!(cache.get(&key(20)).entry.is_some());
    assert_eq!(modified(&path), recent);
    // Older than the granularity: marked now.
    set(SystemTime::now() - LRU_GRANULARITY - Duration::from_secs(60));
    assert!(cache.get(&key(20)).entry.is_some());
    assert!(near(modified(&path)), "{:?}", modified(&path));
    // A mark in the future (a clock set back) beyond the granularity is put right.
    set(SystemTime::now() + 2 * LRU_GRANULARITY);
    assert!(cache.get(&key(20)).entry.is_some());
    assert!(near(modified(&path)), "{:?}", modified(&path));
    // `peek` never marks.
    let old = SystemTime::now() - 3 * LRU_GRANULARITY;
    set(old);
    assert!(cache.peek(&key(20)).entry.is_some());
    assert_eq!(modified(&path), old);
}

#[test]
fn an_entry_in_a_directory_others_can_write_is_bad_in_a_root_others_can_enter() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("cache");
    let cache = DiskCache::open(std::slice::from_ref(&root)).unwrap();
    assert!(cache.roots()[0].closed, "a root hipjit makes is 0700");
    let path = put(&cache, &key(21), b"x");
    let sub = path.parent().unwrap();
    std::fs::set_permissions(sub, std::fs::Permissions::from_mode(0o777)).unwrap();
    // Closed (0700): nobody else can reach the directory; the entry's own checks apply.
    assert!(cache.get(&key(21)).entry.is_some());
    // Opened to others (0755, still a private root): the directory is checked again.
    std::fs::set_permissions(&root, std::fs::Permissions::from_mode(0o755)).unwrap();
    let cache = DiskCache::open(std::slice::from_ref(&root)).unwrap();
    assert!(!cache.roots()[0].closed);
    let lookup = cache.get(&key(21));
    assert!(lookup.entry.is_none());
    assert!(
        lookup.bad[0].reason.contains("its directory"),
        "{:?}",
        lookup.bad
    );
}

#[test]
fn an_entry_writable_by_others_or_changed_is_bad_in_a_closed_root_too() {
    let dir = tempfile::tempdir().unwrap();
    // Made by hipjit: 0700.
    let cache = DiskCache::open(&[dir.path().join("cache")]).unwrap();
    assert!(cache.roots()[0].closed);
    let path = put(&cache, &key(22), b"code object bytes");
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o606)).unwrap();
    let lookup = cache.get(&key(22));
    assert!(lookup.entry.is_none());
    assert!(lookup.bad[0].reason.contains("writable by group or others"));
    // Bytes changed in place, the size kept: the sums catch it without any read past the size.
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
    let mut bytes = std::fs::read(&path).unwrap();
    let n = bytes.len();
    bytes[n - 1] ^= 1;
    std::fs::write(&path, &bytes).unwrap();
    let lookup = cache.get(&key(22));
    assert!(lookup.entry.is_none());
    assert!(lookup.bad[0].reason.contains("sha256"), "{:?}", lookup.bad);
    // Grown: trailing bytes are refused.
    bytes[n - 1] ^= 1;
    bytes.extend_from_slice(b"more");
    std::fs::write(&path, &bytes).unwrap();
    let lookup = cache.get(&key(22));
    assert!(lookup.entry.is_none());
    assert!(
        lookup.bad[0].reason.contains("trailing bytes"),
        "{:?}",
        lookup.bad
    );
    // Another key's entry moved to this key's name: refused by the key inside it.
    let other = put(&cache, &key(23), b"code object bytes");
    std::fs::rename(&other, &path).unwrap();
    let lookup = cache.get(&key(22));
    assert!(lookup.entry.is_none());
    assert!(
        lookup.bad[0].reason.contains("holds key"),
        "{:?}",
        lookup.bad
    );
}

#[test]
fn size_cap_prunes_after_each_write() {
    let dir = tempfile::tempdir().unwrap();
    let cache = DiskCache::open(&[dir.path().to_path_buf()])
        .unwrap()
        .with_max_bytes(Some(6000));
    let first = put(&cache, &key(13), &[0u8; 4000]);
    age(&first, 100);
    put(&cache, &key(14), &[0u8; 4000]);
    assert!(!first.exists());
    assert_eq!(cache.stats().unwrap()[0].entries, 1);
}

#[test]
fn the_written_root_is_capped_at_5_gib_by_default() {
    let dir = tempfile::tempdir().unwrap();
    let root = [dir.path().to_path_buf()];
    // An old entry of 5 GiB written by another process (a sparse file: the cap counts its
    // size, the disk holds none of it).
    let big = put(&DiskCache::open(&root).unwrap(), &key(30), b"x");
    std::fs::OpenOptions::new()
        .write(true)
        .open(&big)
        .unwrap()
        .set_len(5 * 1024 * 1024 * 1024)
        .unwrap();
    age(&big, 2 * 3600);
    // Nothing configured: this write takes the root past 5 GiB.
    let small = put(
        &DiskCache::open(&root).unwrap(),
        &key(31),
        b"code object bytes",
    );
    assert!(!big.exists(), "the root grew past 5 GiB with no cap set");
    assert!(small.exists());
}

#[test]
fn a_write_past_the_cap_prunes_to_nine_tenths_of_it_oldest_first() {
    let dir = tempfile::tempdir().unwrap();
    let first = put(
        &DiskCache::open(&[dir.path().to_path_buf()]).unwrap(),
        &key(40),
        &[0; 2000],
    );
    // Every entry of these tests has this size (same metadata, same artefact size).
    let e = std::fs::metadata(&first).unwrap().len();
    // Nine entries fit; the tenth takes the root past the cap.
    let cache = DiskCache::open(&[dir.path().to_path_buf()])
        .unwrap()
        .with_max_bytes(Some(10 * e - 10));
    let mut written = vec![first];
    for i in 1..10u8 {
        // Each older than the next, by more than the granularity of a hit's mark.
        for (hours, q) in written.iter().rev().enumerate() {
            age(q, 3600 * (hours as u64 + 2));
        }
        written.push(put(&cache, &key(40 + i), &[i; 2000]));
    }
    let left: Vec<bool> = written.iter().map(|p| p.exists()).collect();
    // Pruned to 90% of the cap (9e - 9: eight entries), not to the cap (nine), so that
    // the next write fits without another listing; the two oldest went.
    assert_eq!(
        left,
        [false, false, true, true, true, true, true, true, true, true]
    );
}

#[test]
fn clear_keeps_a_temporary_file_being_written_and_removes_a_stale_one() {
    let dir = tempfile::tempdir().unwrap();
    let cache = DiskCache::open(&[dir.path().to_path_buf()]).unwrap();
    put(&cache, &key(17), b"a");
    let tmp = dir.path().join("v1/tmp");
    let writing = tmp.join(".in-flight");
    let stale = tmp.join(".left-by-a-dead-process");
    std::fs::write(&writing, b"half").unwrap();
    std::fs::write(&stale, b"half").unwrap();
    age(&stale, 2 * 3600);
    assert_eq!(cache.clear().unwrap(), 1);
    assert!(
        writing.exists(),
        "another process's entry in progress was removed"
    );
    assert!(!stale.exists());
}

#[test]
fn list_stats_verify_and_clear_cover_the_roots() {
    let dir = tempfile::tempdir().unwrap();
    let cache = DiskCache::open(&[dir.path().to_path_buf()]).unwrap();
    put(&cache, &key(15), b"a");
    let bad = put(&cache, &key(16), b"b");
    std::fs::write(&bad, b"nonsense").unwrap();
    assert_eq!(cache.list().unwrap().len(), 2);
    assert_eq!(cache.stats().unwrap()[0].entries, 2);
    let verified = cache.verify().unwrap();
    let bad_count = verified.iter().filter(|v| v.status.is_err()).count();
    assert_eq!(bad_count, 1);
    assert_eq!(cache.clear().unwrap(), 2);
    assert!(cache.list().unwrap().is_empty());
}

#[test]
fn verify_flags_dependencies_outside_tracked_headers() {
    let dir = tempfile::tempdir().unwrap();
    let cache = DiskCache::open(&[dir.path().to_path_buf()]).unwrap();
    let mut m = meta();
    m.dependencies = vec![
        "/usr/include/hip/hip_runtime.h".into(),
        "/home/user/project/untracked.h".into(),
    ];
    cache.put(&key(17), m, &[("code-object", b"x")]).unwrap();
    let v = cache.verify().unwrap();
    assert_eq!(
        v[0].untracked,
        [PathBuf::from("/home/user/project/untracked.h")]
    );
}

#[test]
fn a_format_directory_that_is_a_symbolic_link_is_never_walked() {
    let root = tempfile::tempdir().unwrap();
    let outside = tempfile::tempdir().unwrap();
    // A real entry, moved outside the root; `v1` becomes a link to where it now lies.
    let cache = DiskCache::open(&[root.path().to_path_buf()]).unwrap();
    let entry = put(&cache, &key(0xaa), b"a");
    std::fs::rename(root.path().join("v1"), outside.path().join("v1")).unwrap();
    std::os::unix::fs::symlink(outside.path().join("v1"), root.path().join("v1")).unwrap();
    let victim = outside
        .path()
        .join(entry.strip_prefix(root.path()).unwrap());
    assert!(victim.is_file());
    let layout = root.path().join("v1");
    let is_layout_error = |e: &CacheError| matches!(e, CacheError::LayoutNotADirectory { path, kind } if *path == layout && *kind == "symbolic link");
    assert!(is_layout_error(&cache.list().unwrap_err()));
    assert!(is_layout_error(&cache.stats().unwrap_err()));
    assert!(is_layout_error(&cache.verify().unwrap_err()));
    assert!(is_layout_error(&cache.clear().unwrap_err()));
    assert!(is_layout_error(&cache.prune(0).unwrap_err()));
    assert!(
        cache
            .clear()
            .unwrap_err()
            .to_string()
            .contains(&format!("{} is a symbolic link", layout.display())),
        "the error names the link"
    );
    assert!(victim.is_file(), "a file outside the cache was removed");
}

#[test]
fn an_empty_root_path_is_refused_by_position_never_taken_as_the_current_directory() {
    let d = tempfile::tempdir().unwrap();
    for (roots, at) in [
        (vec![PathBuf::new()], 0),
        (vec![d.path().to_path_buf(), PathBuf::new()], 1),
    ] {
        match DiskCache::open(&roots) {
            Err(CacheError::EmptyRoot { index }) => assert_eq!(index, at),
            other => panic!("{roots:?}: expected EmptyRoot, got {other:?}"),
        }
    }
}

#[test]
fn an_empty_hipjit_cache_dir_means_the_default_root() {
    let roots = roots_from_env(|k| match k {
        "HIPJIT_CACHE_DIR" => Some("".into()),
        "HOME" => Some("/home/u".into()),
        _ => None,
    });
    assert_eq!(roots, Some(vec![PathBuf::from("/home/u/.cache/hipjit")]));
}
