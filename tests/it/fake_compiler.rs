//! The testing compiler (`CompilerKind::Fake`, feature `testing`): no toolchain, its output is
//! its source. Through `Jit`, a checked-in code object handed to it as the source is compiled
//! (a miss), then found in memory, then on disk by a second `Jit` (hits), with the same key.

use hipjit::compiler::{CompileOptions, CompilerChoice, CompilerKind};
use hipjit::jit::{CacheLocation, Jit, JitOptions, Origin};
use hipjit::target_id::TargetId;

fn fake_jit(root: &std::path::Path) -> Jit {
    Jit::new(JitOptions {
        compiler: Some(CompilerChoice::Kind(CompilerKind::Fake)),
        cache: CacheLocation::Roots(vec![root.to_path_buf()]),
        ..JitOptions::default()
    })
    .unwrap_or_else(|e| panic!("{e}"))
}

#[test]
fn the_fake_compiler_misses_then_hits_in_memory_and_on_disk() {
    let dir = tempfile::tempdir().unwrap();
    let code = std::fs::read(crate::common::code_object("single-gfx90a.hsaco")).unwrap();
    let opts = CompileOptions::for_target(TargetId::parse("gfx90a").unwrap());

    let jit = fake_jit(dir.path());
    let first = jit.compile(&code, &opts).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(first.origin(), Origin::Compiler);
    assert_eq!(first.compiler().kind, CompilerKind::Fake);
    assert_eq!(first.code_object().unwrap().elf(), &code[..]);

    let again = jit.compile(&code, &opts).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(again.origin(), Origin::Memory);
    assert_eq!(again.key(), first.key());

    let fresh = fake_jit(dir.path());
    let disk = fresh
        .compile(&code, &opts)
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(disk.origin(), Origin::Disk);
    assert_eq!(disk.key(), first.key());
    assert_eq!(disk.compiler().kind, CompilerKind::Fake);
}

#[test]
fn fake_parses_but_is_not_listed_among_the_choices() {
    assert_eq!(
        "fake".parse::<CompilerChoice>(),
        Ok(CompilerChoice::Kind(CompilerKind::Fake))
    );
    let e = "icc".parse::<CompilerChoice>().unwrap_err().to_string();
    assert!(e.ends_with("(auto, hipcc, hiprtc, nvcc or nvrtc)"), "{e}");
}

#[test]
fn a_result_published_in_the_background_is_on_disk_once_flushed_or_dropped_and_found_there() {
    let dir = tempfile::tempdir().unwrap();
    let code = std::fs::read(crate::common::code_object("single-gfx90a.hsaco")).unwrap();
    let opts = CompileOptions::for_target(TargetId::parse("gfx90a").unwrap());
    let background = |root: &std::path::Path| {
        Jit::new(JitOptions {
            compiler: Some(CompilerChoice::Kind(CompilerKind::Fake)),
            cache: CacheLocation::Roots(vec![root.to_path_buf()]),
            publish_in_background: true,
            ..JitOptions::default()
        })
        .unwrap_or_else(|e| panic!("{e}"))
    };

    let jit = background(dir.path());
    let first = jit.compile(&code, &opts).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(first.origin(), Origin::Compiler);
    assert!(
        first.cache_warnings().is_empty(),
        "{:?}",
        first.cache_warnings()
    );
    let entry = first
        .entry_path()
        .expect("the path it is published at")
        .clone();
    assert!(entry.starts_with(dir.path()), "{}", entry.display());
    jit.flush_cache_writes();
    assert!(entry.is_file(), "{} not published", entry.display());
    // The entry and the header manifest naming it: a fresh `Jit` finds the result on disk.
    let listed = jit.disk_cache().unwrap().list().unwrap();
    assert_eq!(listed.len(), 2, "{listed:?}");
    let disk = fake_jit(dir.path())
        .compile(&code, &opts)
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(disk.origin(), Origin::Disk);
    assert_eq!(disk.key(), first.key());

    // Dropping the `Jit` right after the compile publishes it too.
    let other = tempfile::tempdir().unwrap();
    let jit = background(other.path());
    let dropped = jit.compile(&code, &opts).unwrap_or_else(|e| panic!("{e}"));
    drop(jit);
    assert!(dropped.entry_path().unwrap().is_file());
    let disk = fake_jit(other.path())
        .compile(&code, &opts)
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(disk.origin(), Origin::Disk);
}

#[test]
fn background_publishes_racing_from_two_jits_and_a_recompile_before_the_flush_serve_the_same_code()
{
    let dir = tempfile::tempdir().unwrap();
    let code = std::fs::read(crate::common::code_object("single-gfx90a.hsaco")).unwrap();
    let opts = CompileOptions::for_target(TargetId::parse("gfx90a").unwrap());
    let background = || {
        Jit::new(JitOptions {
            compiler: Some(CompilerChoice::Kind(CompilerKind::Fake)),
            cache: CacheLocation::Roots(vec![dir.path().to_path_buf()]),
            publish_in_background: true,
            ..JitOptions::default()
        })
        .unwrap_or_else(|e| panic!("{e}"))
    };
    let jits = [background(), background()];
    // Both at once on one root: each gets the code, whichever publishes.
    std::thread::scope(|s| {
        let runs: Vec<_> = jits
            .iter()
            .map(|jit| s.spawn(|| jit.compile(&code, &opts).unwrap_or_else(|e| panic!("{e}"))))
            .collect();
        for r in runs {
            let c = r.join().unwrap();
            assert_eq!(c.code_object().unwrap().elf(), &code[..]);
        }
    });
    // The memory forgotten before the publish is flushed: found on disk (the lock held by the
    // publish waited for) or compiled again, the same code either way.
    jits[0].clear_memory();
    let again = jits[0]
        .compile(&code, &opts)
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(again.code_object().unwrap().elf(), &code[..]);
    for jit in &jits {
        jit.flush_cache_writes();
    }
    // One entry and its header manifest, whole: a fresh `Jit` is served the code from disk.
    let listed = jits[0].disk_cache().unwrap().list().unwrap();
    assert_eq!(listed.len(), 2, "{listed:?}");
    drop(jits);
    let disk = fake_jit(dir.path())
        .compile(&code, &opts)
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(disk.origin(), Origin::Disk);
    assert_eq!(disk.code_object().unwrap().elf(), &code[..]);
    // No temporary file is left behind beside them.
    let tmp = dir.path().join("v1/tmp");
    let left: Vec<_> = std::fs::read_dir(&tmp)
        .map(|d| d.filter_map(|e| e.ok()).map(|e| e.path()).collect())
        .unwrap_or_default();
    assert!(left.is_empty(), "{left:?}");
}
