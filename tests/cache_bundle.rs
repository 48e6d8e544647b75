//! Cache bundles (`hipjit::cache::bundle`, `hipjit cache export` / `import`): a root exported,
//! imported into a fresh root that then serves hits as a read-only root without a compile; a
//! bundle with a corrupted entry refused whole, naming it; a file that is not a bundle named
//! as such. The compiler is the fixture `fake-hipcc-act.sh` copying a real gfx90a code object
//! and counting its runs.

use std::ffi::OsString;
use std::io::Read;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use hipjit::cache::bundle::{self, BundleError};
use hipjit::cache::disk::DiskCache;
use hipjit::compiler::{CompileOptions, CompilerConfig};
use hipjit::jit::{CacheLocation, Jit, JitOptions, Origin, RemoteLocation};
use hipjit::target_id::TargetId;

fn fake_hipcc() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/fake-hipcc-act.sh")
}

fn home(dir: &Path) -> PathBuf {
    let home = dir.join("home");
    std::fs::create_dir_all(&home).unwrap();
    std::fs::set_permissions(&home, std::fs::Permissions::from_mode(0o755)).unwrap();
    let co =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/code-objects/single-gfx90a.hsaco");
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

fn compiles(home: &Path) -> usize {
    std::fs::read_to_string(home.join("compiles")).map_or(0, |s| s.lines().count())
}

fn jit(roots: Vec<PathBuf>, home: &Path) -> Jit {
    Jit::new(JitOptions {
        compiler_config: CompilerConfig {
            hipcc: Some(fake_hipcc()),
            env: Some(vec![
                ("HOME".into(), OsString::from(home)),
                ("PATH".into(), "/usr/bin:/bin".into()),
            ]),
            ..CompilerConfig::default()
        },
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
    assert_eq!(compiles(&home), 3, "the node compiled");
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
    let at = content.len() - 50; // inside the last entry's last artefact
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
