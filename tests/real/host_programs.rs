//! Whole HIP programs (host code, the HIP host API, standard headers) compile by default: for
//! each source of tests/data/host-programs that bare hipcc compiles for this toolchain's target
//! (the list `EXPECTED`, written by scripts/host-programs-expect.sh: gfx90a with Debian's hipcc
//! 5.2.3, gfx942 with hipcc 7.0.2 in the sid root), hipjit's default compiler choice (`Auto`)
//! compiles it too, whichever compiler it takes. hipRTC compiles device code against its own
//! headers: before Auto weighed what a source needs, it took hipRTC for these sources (5.2.3
//! on gfx90a, 6.4.3 on gfx942) and all but `module_api_module.hip` failed ("redefinition of
//! 'integral_constant'", "typedef redefinition" of `__int64_t`): 23 of the 24.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};

use hipjit::compiler::selection::CompilerChoice;
use hipjit::compiler::{CompileOptions, CompilerConfig, CompilerKind};
use hipjit::jit::{CacheLocation, Jit, JitOptions};
use hipjit::target_id::TargetId;

use crate::common::toolchain::{identity_home, test_env, TestEnv};

fn corpus() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/host-programs")
}

/// This toolchain's target and the sources `EXPECTED` lists for it, with whether bare hipcc
/// compiles each.
fn expected() -> (&'static str, Vec<(String, bool)>) {
    let (target, column) = match test_env() {
        TestEnv::Bookworm => ("gfx90a", 1),
        TestEnv::Sid => ("gfx942", 2),
    };
    let text = std::fs::read_to_string(corpus().join("EXPECTED")).unwrap();
    let rows = text
        .lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .map(|l| {
            let cells: Vec<&str> = l.split('\t').collect();
            assert_eq!(cells.len(), 3, "EXPECTED: {l:?}");
            match cells[column] {
                "ok" => (cells[0].to_owned(), true),
                "fails" => (cells[0].to_owned(), false),
                other => panic!("EXPECTED: {other:?} in {l:?}"),
            }
        })
        .collect();
    (target, rows)
}

#[test]
fn every_listed_source_is_in_the_corpus_and_every_source_listed() {
    let (_, rows) = expected();
    let mut listed: Vec<&str> = rows.iter().map(|(n, _)| n.as_str()).collect();
    listed.sort();
    let mut files: Vec<String> = std::fs::read_dir(corpus())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".hip") || n.ends_with(".cpp"))
        .collect();
    files.sort();
    assert_eq!(
        listed, files,
        "rerun scripts/host-programs-expect.sh after adding or removing a source"
    );
    assert!(files.len() >= 20, "{} sources", files.len());
}

/// The compiler and its reason, or the error's first lines.
type Outcome = Result<(CompilerKind, String), String>;

#[test]
fn auto_compiles_every_host_program_that_bare_hipcc_compiles() {
    assert_eq!(CompilerChoice::default(), CompilerChoice::Auto);
    let (target, rows) = expected();
    let jit = Jit::new(JitOptions {
        compiler: Some(CompilerChoice::Auto),
        compiler_config: CompilerConfig {
            identity_dir: Some(identity_home().join("identity")),
            ..CompilerConfig::default()
        },
        cache: CacheLocation::Disabled,
        ..JitOptions::default()
    })
    .unwrap_or_else(|e| panic!("{e}"));
    let options = CompileOptions::for_target(TargetId::parse(target).unwrap())
        .include_dir(corpus().join("common"));
    let listed: Vec<&str> = rows
        .iter()
        .filter(|(_, ok)| *ok)
        .map(|(n, _)| n.as_str())
        .collect();
    // Two compiles at a time (hipcc is a process each; hipRTC compiles one at a time anyway).
    let next = AtomicUsize::new(0);
    let results: Vec<(String, Outcome)> = std::thread::scope(|s| {
        let workers: Vec<_> = (0..2)
            .map(|_| {
                s.spawn(|| {
                    let mut out = Vec::new();
                    while let Some(name) = listed.get(next.fetch_add(1, Ordering::Relaxed)) {
                        let source = std::fs::read(corpus().join(name)).unwrap();
                        let r = jit
                            .compile(&source, &options)
                            .map(|c| (c.compiler().kind, c.compiler().reason.clone()))
                            .map_err(|e| {
                                let e = e.to_string();
                                e.lines().take(6).collect::<Vec<_>>().join("\n")
                            });
                        out.push((name.to_string(), r));
                    }
                    out
                })
            })
            .collect();
        workers
            .into_iter()
            .flat_map(|w| w.join().unwrap())
            .collect()
    });
    let failed: Vec<String> = results
        .iter()
        .filter_map(|(n, r)| r.as_ref().err().map(|e| format!("{n}: {e}")))
        .collect();
    assert!(
        failed.is_empty(),
        "{} of {} sources bare hipcc compiles for {target} failed under Auto:\n{}",
        failed.len(),
        listed.len(),
        failed.join("\n")
    );
    assert!(listed.len() >= 20, "{} sources compiled", listed.len());
    // The one source without host code or standard headers (a module of kernels loaded at
    // run time) is still hipRTC's where Auto takes hipRTC for a plain kernel (step 3: hipRTC
    // 5.2.3 with hipjit's 5.x options on gfx90a, 6.4.3 on gfx942); every other source went to
    // hipcc for what it needs (step 4).
    let kind_of = |name: &str| {
        results
            .iter()
            .find(|(n, _)| n == name)
            .and_then(|(_, r)| r.as_ref().ok())
            .map(|(k, _)| *k)
    };
    let plain = jit
        .compiler_for(crate::common::toolchain::SAXPY, &options)
        .unwrap_or_else(|e| panic!("{e}"))
        .backend
        .kind();
    assert_eq!(kind_of("module_api_module.hip"), Some(plain));
    if plain == CompilerKind::HipRtc {
        for (n, r) in &results {
            if let Ok((CompilerKind::Hipcc, reason)) = r {
                assert!(
                    reason.contains("host code") || reason.contains("standard library"),
                    "{n}: {reason}"
                );
            }
        }
    }
}
