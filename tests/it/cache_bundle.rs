//! Cache bundles (`hipjit::cache::bundle`, `hipjit cache export` / `import`): a root exported,
//! imported into a fresh root that then serves hits as a read-only root without a compile; a
//! bundle with a corrupted entry refused whole, naming it; a file that is not a bundle named
//! as such. The compiler is the fixture `fake-hipcc-act.sh` copying a real gfx90a code object
//! and counting its runs.

use crate::common;

use std::io::Read;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use hipjit::cache::bundle::{self, BundleError};
use hipjit::cache::disk::DiskCache;
use hipjit::compiler::CompileOptions;
use hipjit::jit::{CacheLocation, Jit, JitOptions, Origin, RemoteLocation};
use hipjit::target_id::TargetId;

fn home(dir: &Path) -> PathBuf {
    let home = dir.join("home");
    std::fs::create_dir_all(&home).unwrap();
    std::fs::set_permissions(&home, std::fs::Permissions::from_mode(0o755)).unwrap();
    let co = common::code_object("single-gfx90a.hsaco");
    std::fs::write(
        home.join("act.sh"),
        format!(
            "echo $$ >> \"$HOME/compiles\"\ncp {} out.hsaco\n\
             for a; do case \"$a\" in *.hip) src=\"$a\";; esac; done\n\
             echo \"out.hsaco: $src\" > deps.d\n",
            co.display()
        ),
    )
    .unwrap();
    home
}

fn jit(roots: Vec<PathBuf>, home: &Path) -> Jit {
    Jit::new(JitOptions {
        // The stand-in hipcc counts its compiles.
        compiler: Some(hipjit::compiler::selection::CompilerChoice::Hipcc),
        compiler_config: common::fake_hipcc_config(home),
        cache: CacheLocation::Roots(roots),
        remote_cache: RemoteLocation::Disabled,
        ..JitOptions::default()
    })
    .unwrap_or_else(|e| panic!("{e}"))
}

fn opts() -> CompileOptions {
    CompileOptions::for_target(TargetId::parse("gfx90a").unwrap())
}

fn source(i: usize) -> String {
    format!("extern \"C\" __global__ void k{i}(int* x) {{ x[0] = {i}; }}\n")
}

/// A root holding three compiled sources, exported to `dir/bundle.hjb`.
fn exported(dir: &Path, home: &Path) -> PathBuf {
    let root = dir.join("build-root");
    let j = jit(vec![root.clone()], home);
    for i in 0..3 {
        assert_eq!(
            j.compile(source(i), &opts()).unwrap().origin(),
            Origin::Compiler
        );
    }
    let out = dir.join("bundle.hjb");
    let r = bundle::export(&DiskCache::open(&[root]).unwrap(), None, &out).unwrap();
    assert_eq!(r.entries, 6, "three results and their manifests");
    out
}

#[test]
fn an_imported_bundle_serves_hits_from_a_read_only_root() {
    let dir = tempfile::tempdir().unwrap();
    let home = home(dir.path());
    let file = exported(dir.path(), &home);
    let baked = dir.path().join("image-root");
    let r = bundle::import(
        &DiskCache::open(std::slice::from_ref(&baked)).unwrap(),
        &file,
    )
    .unwrap();
    assert_eq!((r.entries, r.published), (6, 6));
    // Imported again: everything is already there.
    let again = bundle::import(
        &DiskCache::open(std::slice::from_ref(&baked)).unwrap(),
        &file,
    );
    assert_eq!(again.unwrap().published, 0);

    let j = jit(vec![dir.path().join("node-root"), baked.clone()], &home);
    for i in 0..3 {
        let c = j.compile(source(i), &opts()).unwrap();
        assert_eq!(c.origin(), Origin::Disk, "source {i}");
        assert!(c.entry_path().unwrap().starts_with(&baked));
    }
    assert_eq!(common::compiles(&home), 3, "the node compiled");
}

#[test]
fn a_bundle_with_a_bad_entry_is_refused_whole_and_names_it() {
    let dir = tempfile::tempdir().unwrap();
    let home = home(dir.path());
    let file = exported(dir.path(), &home);
    let mut content = Vec::new();
    ruzstd::decoding::StreamingDecoder::new(std::fs::File::open(&file).unwrap())
        .unwrap()
        .read_to_end(&mut content)
        .unwrap();
    // Inside the last entry's code object (an artefact: checked by its sha256), found by its
    // ELF magic rather than by an offset from the end, which moves with the entry's layout.
    let at = content
        .windows(4)
        .rposition(|w| w == b"\x7fELF")
        .expect("a code object in the bundle")
        + 40;
    content[at] ^= 0x5a;
    let bad_file = dir.path().join("bad.hjb");
    std::fs::write(
        &bad_file,
        ruzstd::encoding::compress_to_vec(
            &content[..],
            ruzstd::encoding::CompressionLevel::Fastest,
        ),
    )
    .unwrap();
    let root = dir.path().join("fresh");
    let cache = DiskCache::open(std::slice::from_ref(&root)).unwrap();
    match bundle::import(&cache, &bad_file) {
        Err(BundleError::BadEntries { bad, .. }) => {
            assert_eq!(bad.len(), 1, "{bad:?}");
            assert!(bad[0].1.contains("sha256"), "{:?}", bad[0]);
            assert_eq!(bad[0].0.len(), 64, "named by its key: {:?}", bad[0]);
        }
        other => panic!("expected BadEntries, got {other:?}"),
    }
    assert!(cache.list().unwrap().is_empty(), "something was imported");
}

#[test]
fn a_file_that_is_not_a_bundle_is_named() {
    let dir = tempfile::tempdir().unwrap();
    let not = dir.path().join("not.hjb");
    std::fs::write(&not, b"hello").unwrap();
    let cache = DiskCache::open(&[dir.path().join("r")]).unwrap();
    let e = bundle::import(&cache, &not).unwrap_err();
    assert!(matches!(e, BundleError::NotABundle { .. }), "{e}");
    assert!(e.to_string().contains("not.hjb"), "{e}");
    let truncated = dir.path().join("truncated.hjb");
    let home = home(dir.path());
    let good = std::fs::read(exported(dir.path(), &home)).unwrap();
    std::fs::write(&truncated, &good[..good.len() / 2]).unwrap();
    assert!(matches!(
        bundle::import(&cache, &truncated),
        Err(BundleError::NotABundle { .. })
    ));
}

#[cfg(feature = "cli")]
#[test]
fn hipjit_cache_export_and_import_round_trip() {
    let dir = tempfile::tempdir().unwrap();
    let home = home(dir.path());
    let root = dir.path().join("build-root");
    let j = jit(vec![root.clone()], &home);
    let key = j.compile(source(7), &opts()).unwrap().key();
    let run = |args: &[&str]| {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_hipjit"))
            .args(args)
            .env("HIPJIT_CACHE_DIR", &root)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let file = dir.path().join("b.hjb");
    run(&["cache", "export", "-o", file.to_str().unwrap()]);
    let into = dir.path().join("into");
    let json = run(&[
        "cache",
        "import",
        file.to_str().unwrap(),
        "--into",
        into.to_str().unwrap(),
        "--json",
    ]);
    let v: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!(v["published"], 2, "{json}");
    assert!(DiskCache::open(&[into]).unwrap().get(&key).entry.is_some());
}

/// `hipjit cache <args>` with the cache root `root`, waited for at most 60 s (killed after).
#[cfg(feature = "cli")]
fn cache_cli(root: &Path, args: &[&std::ffi::OsStr]) -> std::process::Output {
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_hipjit"))
        .arg("cache")
        .args(args)
        .env("HIPJIT_CACHE_DIR", root)
        .env_remove("HIPJIT_REMOTE_CACHE")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while child.try_wait().unwrap().is_none() {
        if std::time::Instant::now() > deadline {
            child.kill().unwrap();
            let out = child.wait_with_output().unwrap();
            panic!(
                "hipjit cache {args:?} still ran after 60 s (killed): {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    child.wait_with_output().unwrap()
}

#[cfg(feature = "cli")]
/// `cache export -o` follows `hipjit compile -o`'s rules: a character device is written into
/// (as root, `-o /dev/null` replaced the machine's `/dev/null` with a regular file), a FIFO is
/// refused (exit 2) and left, a symbolic link is followed (its target replaced, the link kept).
#[cfg(feature = "cli")]
#[test]
fn hipjit_cache_export_never_replaces_a_device_a_fifo_or_a_link() {
    use std::os::unix::fs::FileTypeExt;
    let dir = tempfile::tempdir().unwrap();
    let home = home(dir.path());
    let root = dir.path().join("build-root");
    jit(vec![root.clone()], &home)
        .compile(source(1), &opts())
        .unwrap();
    // A private copy of /dev/null (character device 1:3), so that a defect cannot remove the
    // machine's own.
    let null = dir.path().join("null");
    let made = std::process::Command::new("mknod")
        .arg(&null)
        .args(["c", "1", "3"])
        .status()
        .expect("mknod runs");
    assert!(made.success(), "mknod needs root (tests run as root here)");
    let export = |out: &Path| cache_cli(&root, &["export".as_ref(), "-o".as_ref(), out.as_ref()]);
    let o = export(&null);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let m = std::fs::symlink_metadata(&null).unwrap();
    assert!(m.file_type().is_char_device(), "the device was replaced");

    let fifo = dir.path().join("fifo");
    common::mkfifo(&fifo);
    let o = export(&fifo);
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("FIFO") && stderr.contains("fifo"),
        "{stderr}"
    );
    assert!(std::fs::symlink_metadata(&fifo)
        .unwrap()
        .file_type()
        .is_fifo());

    let target = dir.path().join("target.hjb");
    std::fs::write(&target, b"old").unwrap();
    let link = dir.path().join("link.hjb");
    std::os::unix::fs::symlink(&target, &link).unwrap();
    let o = export(&link);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(link.is_symlink(), "the link was replaced");
    let into = DiskCache::open(&[dir.path().join("into")]).unwrap();
    assert_eq!(bundle::import(&into, &target).unwrap().entries, 2);
}

/// `cache export -o` inside the root being exported (onto an entry, through a link to one, or
/// beside them) is refused as a usage error, and the entry is left as it was (it was replaced
/// by the bundle, which `cache verify` then reported bad).
#[cfg(feature = "cli")]
#[test]
fn hipjit_cache_export_refuses_an_output_inside_the_root() {
    let dir = tempfile::tempdir().unwrap();
    let home = home(dir.path());
    let root = dir.path().join("build-root");
    jit(vec![root.clone()], &home)
        .compile(source(1), &opts())
        .unwrap();
    let entry = DiskCache::open(std::slice::from_ref(&root))
        .unwrap()
        .list()
        .unwrap()
        .into_iter()
        .next()
        .expect("an entry")
        .path;
    let before = std::fs::read(&entry).unwrap();
    let link = dir.path().join("link.hjb");
    std::os::unix::fs::symlink(&entry, &link).unwrap();
    for out in [entry.clone(), link, root.join("v1/bundle.hjb")] {
        let o = cache_cli(&root, &["export".as_ref(), "-o".as_ref(), out.as_ref()]);
        let stderr = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{}: {stderr}", out.display());
        assert!(
            stderr.contains(&format!("inside the cache root {}", root.display())),
            "{stderr}"
        );
        assert!(!root.join("v1/bundle.hjb").exists());
    }
    assert_eq!(
        std::fs::read(&entry).unwrap(),
        before,
        "the entry was replaced"
    );
}

/// `cache import` of a FIFO is refused at once, as `compile`, `inspect`, `explain` and `warm`
/// refuse one, instead of waiting for a writer forever.
#[cfg(feature = "cli")]
#[test]
fn hipjit_cache_import_refuses_a_fifo_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("bundle.hjb");
    common::mkfifo(&fifo);
    let o = cache_cli(
        &dir.path().join("root"),
        &["import".as_ref(), fifo.as_os_str()],
    );
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains(&format!("{}: not a regular file (a FIFO)", fifo.display())),
        "{stderr}"
    );
}

/// A Zstandard frame of `content` in raw blocks, then `zero_blocks` RLE blocks of 128 KiB of
/// zeros each (4 bytes apiece): a bomb of `zero_blocks` x 128 KiB in a few bytes.
fn zstd_bomb(content: &[u8], zero_blocks: usize) -> Vec<u8> {
    const BLOCK: usize = 128 << 10;
    // Magic; frame header descriptor 0 (no content size, checksum or dictionary); window
    // descriptor 0x38: 2^17 bytes, one block.
    let mut f = vec![0x28, 0xb5, 0x2f, 0xfd, 0x00, 0x38];
    let header = |f: &mut Vec<u8>, size: usize, kind: u32, last: bool| {
        let h = ((size as u32) << 3) | (kind << 1) | u32::from(last);
        f.extend_from_slice(&h.to_le_bytes()[..3]);
    };
    let chunks: Vec<&[u8]> = content.chunks(BLOCK).collect();
    for (i, c) in chunks.iter().enumerate() {
        header(
            &mut f,
            c.len(),
            0,
            zero_blocks == 0 && i + 1 == chunks.len(),
        );
        f.extend_from_slice(c);
    }
    for i in 0..zero_blocks {
        header(&mut f, BLOCK, 1, i + 1 == zero_blocks);
        f.push(0);
    }
    f
}

/// `bundle`'s content (decompressed).
#[cfg(feature = "cli")]
fn content_of(bundle: &Path) -> Vec<u8> {
    let mut content = Vec::new();
    ruzstd::decoding::StreamingDecoder::new(std::fs::File::open(bundle).unwrap())
        .unwrap()
        .read_to_end(&mut content)
        .unwrap();
    content
}

/// `hipjit cache import <bundle>` into `root`: its wait status, stderr, peak RSS in MiB (as
/// GNU time measures it) and how long it ran.
#[cfg(feature = "cli")]
fn import_measured(bundle: &Path, root: &Path) -> (i32, String, i64, std::time::Duration) {
    use std::os::unix::process::ExitStatusExt;
    // Through GNU time (Debian's `time`, scripts/setup.sh), which forks hipjit from its own
    // small process: a child's peak RSS counts the memory of the process it was exec'd from,
    // and this test process may hold a loaded hipRTC (Auto compiles with it) by now.
    let measured = tempfile::NamedTempFile::new().unwrap();
    let started = std::time::Instant::now();
    let o = std::process::Command::new("/usr/bin/time")
        .args(["-f", "%M", "-o"])
        .arg(measured.path())
        .arg(env!("CARGO_BIN_EXE_hipjit"))
        .args(["cache", "import"])
        .arg(bundle)
        .env("HIPJIT_CACHE_DIR", root)
        .stdout(std::process::Stdio::null())
        .output()
        .unwrap_or_else(|e| panic!("/usr/bin/time: {e} (apt-get install time)"));
    let took = started.elapsed();
    let text = std::fs::read_to_string(measured.path()).unwrap();
    // GNU time writes "Command exited with non-zero status N" before the figure.
    let kib: i64 = text
        .lines()
        .last()
        .and_then(|l| l.trim().parse().ok())
        .unwrap_or_else(|| panic!("GNU time wrote {text:?}"));
    (
        o.status.into_raw(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
        kib / 1024,
        took,
    )
}

/// A bundle whose good entries are followed by 2 GiB of zeros in a 64 KiB file (a tester's
/// 66 KB bomb took 5.2 GB and 25 s): the import reads what the index claims and one byte more,
/// and refuses it at once, naming where and the bound, with the hipjit process's peak memory
/// (measured by GNU time) far below the bomb.
#[cfg(feature = "cli")]
#[test]
fn hipjit_cache_import_of_a_zstd_bomb_is_refused_within_what_the_index_claims() {
    let dir = tempfile::tempdir().unwrap();
    let home = home(dir.path());
    let content = content_of(&exported(dir.path(), &home));
    let bomb = dir.path().join("bomb.hjb");
    std::fs::write(&bomb, zstd_bomb(&content, 16 << 10)).unwrap();
    assert!(std::fs::metadata(&bomb).unwrap().len() < 200 << 10);

    let root = dir.path().join("root");
    let (status, stderr, peak_mib, took) = import_measured(&bomb, &root);
    assert!(peak_mib < 256, "peak RSS {peak_mib} MiB: {stderr}");
    assert!(took < std::time::Duration::from_secs(30), "took {took:?}");
    assert!(
        libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 1,
        "{status:#x}: {stderr}"
    );
    assert!(
        stderr.contains("(after the last entry)")
            && stderr.contains(&format!("past the {} bytes", content.len())),
        "{stderr}"
    );
    assert!(DiskCache::open(&[root]).unwrap().list().unwrap().is_empty());
}

/// A 16 KB bundle whose index claims two entries of 256 MiB of zeros, the first with its true
/// sha256 (a tester's 33 KB bundle claiming 1 GiB took 1.59 GB and 13.6 s, and every entry
/// after the first bad one was still read): the first entry's first bytes are not an entry's,
/// so it is refused at once, naming it, without holding or reading on through its 256 MiB
/// and without reading the second.
#[cfg(feature = "cli")]
#[test]
fn hipjit_cache_import_refuses_a_large_entry_that_is_not_one_from_its_first_bytes() {
    const SIZE: u64 = 256 << 20;
    let dir = tempfile::tempdir().unwrap();
    // sha256 of 256 MiB of zeros (`head -c 268435456 /dev/zero | sha256sum`).
    let zeros_sha = "a6d72ac7690f53be6ae46ba88506bd97302a093f7108472bd9efc3cefda06484";
    let items: Vec<bundle::IndexItem> = ["01", "02"]
        .iter()
        .map(|k| bundle::IndexItem {
            key: k.repeat(32),
            size: SIZE,
            sha256: zeros_sha.into(),
        })
        .collect();
    let index = rmp_serde::to_vec_named(&items).unwrap();
    let mut c = bundle::BUNDLE_MAGIC.to_vec();
    c.extend_from_slice(&bundle::BUNDLE_VERSION.to_le_bytes());
    c.extend_from_slice(&(index.len() as u64).to_le_bytes());
    c.extend_from_slice(&index);
    let file = dir.path().join("zeros.hjb");
    std::fs::write(&file, zstd_bomb(&c, (2 * SIZE as usize) / (128 << 10))).unwrap();
    assert!(std::fs::metadata(&file).unwrap().len() < 20 << 10);

    let root = dir.path().join("root");
    let (status, stderr, peak_mib, took) = import_measured(&file, &root);
    assert!(peak_mib < 64, "peak RSS {peak_mib} MiB: {stderr}");
    assert!(took < std::time::Duration::from_secs(5), "took {took:?}");
    assert!(
        libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 1,
        "{status:#x}: {stderr}"
    );
    assert!(
        stderr.contains("holds 1 bad entry")
            && stderr.contains(&format!("{}: not a hipjit cache entry", "01".repeat(32)))
            && !stderr.contains(&"02".repeat(32)),
        "{stderr}"
    );
    assert!(DiskCache::open(&[root]).unwrap().list().unwrap().is_empty());
}

/// The bundle's Zstandard frame must end the file: a good bundle followed by garbage, or by a
/// second frame (another bundle), is refused naming what follows, and nothing is imported.
#[test]
fn data_after_the_bundles_frame_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let home = home(dir.path());
    let good = std::fs::read(exported(dir.path(), &home)).unwrap();
    let root = dir.path().join("root");
    let cache = DiskCache::open(std::slice::from_ref(&root)).unwrap();
    for (name, tail) in [
        ("garbage", &b"\x00junk after the frame"[..]),
        ("second frame", &good[..]),
    ] {
        let file = dir.path().join(format!("{name}.hjb"));
        std::fs::write(&file, [&good[..], tail].concat()).unwrap();
        match bundle::import(&cache, &file) {
            Err(BundleError::BadEntries { bad, .. }) => {
                assert_eq!(bad.len(), 1, "{name}: {bad:?}");
                assert_eq!(bad[0].0, "(after the last entry)", "{name}: {bad:?}");
                assert!(
                    bad[0].1.contains("after the Zstandard frame"),
                    "{name}: {bad:?}"
                );
            }
            other => panic!("{name}: expected BadEntries, got {other:?}"),
        }
        assert!(
            cache.list().unwrap().is_empty(),
            "{name}: something was imported"
        );
    }
}

/// An index that claims an entry larger than a cache entry may be, or an index larger than
/// its limit, is refused before anything of it is read.
#[test]
fn claims_past_the_limits_are_refused_unread() {
    let dir = tempfile::tempdir().unwrap();
    let cache = DiskCache::open(&[dir.path().join("root")]).unwrap();
    let bundle_of = |index_len: u64, index: &[u8]| {
        let mut c = bundle::BUNDLE_MAGIC.to_vec();
        c.extend_from_slice(&bundle::BUNDLE_VERSION.to_le_bytes());
        c.extend_from_slice(&index_len.to_le_bytes());
        c.extend_from_slice(index);
        // 512 MiB of zeros behind it, for a reader that does not stop.
        zstd_bomb(&c, 4 << 10)
    };
    let key = "ab".repeat(32);
    let index = rmp_serde::to_vec_named(&vec![bundle::IndexItem {
        key: key.clone(),
        size: hipjit::cache::disk::ENTRY_LIMIT + 1,
        sha256: "00".repeat(32),
    }])
    .unwrap();
    let file = dir.path().join("big-entry.hjb");
    std::fs::write(&file, bundle_of(index.len() as u64, &index)).unwrap();
    match bundle::import(&cache, &file) {
        Err(BundleError::BadEntries { bad, .. }) => {
            assert_eq!(bad.len(), 1, "{bad:?}");
            assert_eq!(bad[0].0, key);
            assert!(
                bad[0].1.contains(&format!(
                    "more than the limit of {}",
                    hipjit::cache::disk::ENTRY_LIMIT
                )),
                "{bad:?}"
            );
        }
        other => panic!("expected BadEntries, got {other:?}"),
    }
    let file = dir.path().join("big-index.hjb");
    std::fs::write(&file, bundle_of(bundle::INDEX_LIMIT + 1, b"")).unwrap();
    let e = bundle::import(&cache, &file).unwrap_err();
    assert!(
        matches!(e, BundleError::NotABundle { .. })
            && e.to_string()
                .contains(&format!("more than the limit of {}", bundle::INDEX_LIMIT)),
        "{e}"
    );
}

/// `import --into` a directory that was there (the user's, holding files of its own) and
/// `HIPJIT_CACHE_DIR` naming one leave it without a `CACHEDIR.TAG`, which would keep all of it
/// out of backups (`$HOME`); a root the import makes is tagged.
#[cfg(feature = "cli")]
#[test]
fn only_a_root_hipjit_makes_gets_a_cache_directory_tag() {
    let dir = tempfile::tempdir().unwrap();
    let home = home(dir.path());
    let file = exported(dir.path(), &home);
    let users = dir.path().join("users");
    std::fs::create_dir(&users).unwrap();
    std::fs::write(users.join("notes.txt"), "mine\n").unwrap();
    let made = dir.path().join("made");
    for into in [&users, &made] {
        let o = cache_cli(
            &dir.path().join("unused"),
            &[
                "import".as_ref(),
                file.as_os_str(),
                "--into".as_ref(),
                into.as_os_str(),
            ],
        );
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    }
    let o = cache_cli(&users, &["stats".as_ref()]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(
        !users.join("CACHEDIR.TAG").exists(),
        "the user's directory was tagged"
    );
    assert!(hipjit::cache::tag::is_hipjit_cache(&made));
}

#[test]
fn hipjit_cache_max_size_caps_the_root_an_import_writes() {
    use std::os::unix::fs::DirBuilderExt;
    let dir = tempfile::tempdir().unwrap();
    let home = home(dir.path());
    let file = exported(dir.path(), &home);
    let into = dir.path().join("into");
    DiskCache::open(std::slice::from_ref(&into)).unwrap();
    // An entry another process wrote two hours ago: 1 MiB (sparse).
    let sub = into.join("v1/ab");
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(&sub)
        .unwrap();
    let old = sub.join(format!("{}.hjc", "ab".repeat(32)));
    let f = std::fs::File::create(&old).unwrap();
    f.set_len(1 << 20).unwrap();
    f.set_modified(std::time::SystemTime::now() - std::time::Duration::from_secs(7200))
        .unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_hipjit"))
        .args(["cache", "import", file.to_str().unwrap(), "--into"])
        .arg(&into)
        .env("HIPJIT_CACHE_MAX_SIZE", "512K")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        !old.exists(),
        "the root holds more than HIPJIT_CACHE_MAX_SIZE=512K"
    );
    let stats = DiskCache::open(&[into]).unwrap().stats().unwrap();
    assert_eq!(
        stats[0].entries, 6,
        "the imported entries fit under the cap"
    );
    assert!(stats[0].bytes <= 512 * 1024, "{} bytes", stats[0].bytes);
}
