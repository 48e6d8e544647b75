//! Frozen bundles (`hipjit::cache::frozen`, `Freezer`, `JitOptions::frozen`) and strict
//! serving (`JitOptions::strict`): one request frozen with Debian's real hipcc 5.2.3 (a
//! source reading a header below a second `-I` directory, the first searched and empty, and a
//! header by absolute path), then served by `Jit`s whose hipcc does not exist, each refusal
//! named. A bundle whose recorded compiler or system header is edited stands in for one
//! frozen by another installation.

use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

use hipjit::cache::frozen::{FrozenBundle, Refusal};
use hipjit::compiler::selection::CompilerChoice;
use hipjit::compiler::{CompileOptions, CompilerConfig, CompilerKind};
use hipjit::jit::{CacheLocation, Freezer, Jit, JitError, JitOptions, Origin};
use hipjit::target_id::TargetId;

use crate::common;

const TARGET: &str = "gfx90a:sramecc+:xnack-";
const SCALE_H: &str = "#define SCALE 2.0f\n";

/// The fixture: its directory, source, options and the bundle frozen from them.
struct Fixture {
    dir: PathBuf,
    source: String,
    options: CompileOptions,
    bundle: Arc<FrozenBundle>,
}

fn options(inc0: &Path, inc1: &Path) -> CompileOptions {
    CompileOptions::for_target(TargetId::parse(TARGET).unwrap())
        .define("FACTOR", "3.0f")
        .include_dir(inc0)
        .include_dir(inc1)
}

fn config(hipcc: &str) -> CompilerConfig {
    CompilerConfig {
        hipcc: Some(hipcc.into()),
        identity_dir: Some(common::toolchain::identity_home().to_path_buf()),
        ..CompilerConfig::default()
    }
}

fn fixture() -> &'static Fixture {
    static F: OnceLock<Fixture> = OnceLock::new();
    F.get_or_init(|| {
        let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
            .join(format!("frozen-{}", std::process::id()));
        let (inc0, inc1, sys) = (dir.join("inc0"), dir.join("inc1"), dir.join("sys"));
        for d in [&inc0, &inc1, &sys] {
            std::fs::create_dir_all(d).unwrap();
        }
        common::write_settled(&inc1.join("scale.h"), SCALE_H);
        common::write_settled(&sys.join("sys.h"), "#define SYS 1.0f\n");
        let source = format!(
            "// scale, frozen by tests/it/frozen.rs\n#include <hip/hip_runtime.h>\n\
             #include \"scale.h\"\n#include \"{}\"\n\
             extern \"C\" __global__ void scale(float* x) {{ x[threadIdx.x] *= SCALE * FACTOR * SYS; }}\n",
            sys.join("sys.h").display()
        );
        let options = options(&inc0, &inc1);
        let mut freezer = Freezer::new(JitOptions {
            compiler: Some(CompilerChoice::Kind(CompilerKind::Hipcc)),
            compiler_config: config("/usr/bin/hipcc"),
            cache: CacheLocation::Roots(vec![dir.join("cache")]),
            ..JitOptions::default()
        })
        .unwrap();
        freezer.add(&source, &options).unwrap();
        // Through its bytes, as a crate ships it.
        let bundle = FrozenBundle::from_bytes(&freezer.finish().to_bytes()).unwrap();
        Fixture {
            dir,
            source,
            options,
            bundle: Arc::new(bundle),
        }
    })
}

/// A `Jit` serving `bundle` whose hipcc does not exist (no compiler here), strict or not.
fn no_compiler(bundle: Arc<FrozenBundle>, strict: bool, choice: CompilerKind) -> Jit {
    Jit::new(JitOptions {
        compiler: Some(CompilerChoice::Kind(choice)),
        compiler_config: config("/nonexistent/hipcc"),
        cache: CacheLocation::Disabled,
        frozen: Some(bundle),
        strict,
        ..JitOptions::default()
    })
    .unwrap()
}

/// The strict error of compiling `source` with `options` without a compiler.
fn refused(source: &str, options: &CompileOptions) -> String {
    let jit = no_compiler(Arc::clone(&fixture().bundle), true, CompilerKind::Hipcc);
    match jit.compile(source, options) {
        Err(e @ JitError::Strict { .. }) => e.to_string(),
        other => panic!("expected a strict refusal, got {other:?}"),
    }
}

/// A copy of the fixture's include directories under a new directory, changed by `edit`.
fn include_dirs_edited(name: &str, edit: impl Fn(&Path, &Path)) -> CompileOptions {
    let base = fixture().dir.join(name);
    let (inc0, inc1) = (base.join("inc0"), base.join("inc1"));
    std::fs::create_dir_all(&inc0).unwrap();
    std::fs::create_dir_all(&inc1).unwrap();
    std::fs::write(inc1.join("scale.h"), SCALE_H).unwrap();
    edit(&inc0, &inc1);
    options(&inc0, &inc1)
}

#[test]
fn a_frozen_request_is_served_and_loaded_with_no_compiler() {
    let f = fixture();
    let jit = no_compiler(Arc::clone(&f.bundle), true, CompilerKind::Hipcc);
    let compiled = jit.compile(&f.source, &f.options).unwrap();
    assert_eq!(compiled.origin(), Origin::Frozen);
    assert_eq!(compiled.kernels()[0].name, "scale");
    assert_eq!(compiled.compiler().kind, CompilerKind::Hipcc);
    // The include directories moved: headers are keyed by their place below them.
    let moved = include_dirs_edited("moved", |_, _| {});
    assert_eq!(
        jit.compile(&f.source, &moved).unwrap().origin(),
        Origin::Frozen
    );
    assert_eq!(jit.stats().frozen.map(|s| s.hits), Some(2));
    // On the testing runtime, the target taken from the device.
    #[cfg(feature = "testing")]
    {
        let test = hipjit::testing::TestDevice::new(TARGET)
            .unwrap()
            .start()
            .unwrap();
        let mut untargeted = f.options.clone();
        untargeted.targets.clear();
        let kernel = jit
            .kernel(test.device(), &f.source, "scale", &untargeted)
            .unwrap();
        assert_eq!(kernel.name(), "scale");
    }
}

#[test]
fn strict_serving_names_the_request_and_the_options_that_differ() {
    let f = fixture();
    let mut other = f.options.clone();
    other.defines = vec![("FACTOR".into(), Some("4.0f".into()))];
    let e = refused(&f.source, &other);
    assert!(
        e.contains("strict serving: kernel.hip for gfx90a:sramecc+:xnack-"),
        "{e}"
    );
    assert!(
        e.contains("first line \"// scale, frozen by tests/it/frozen.rs\""),
        "{e}"
    );
    assert!(e.contains("-DFACTOR=3.0f"), "{e}");
    assert!(e.contains("-DFACTOR=4.0f"), "{e}");
    assert!(
        e.contains("nearest frozen request differs in options (frozen:"),
        "{e}"
    );
}

#[test]
fn another_source_is_refused_by_name() {
    let f = fixture();
    let e = refused(&f.source.replace("SCALE *", "SCALE * 2.0f *"), &f.options);
    assert!(e.contains("differs in source (frozen: sha256"), "{e}");
}

#[test]
fn a_changed_header_is_refused_by_name() {
    let o = include_dirs_edited("changed", |_, inc1| {
        std::fs::write(inc1.join("scale.h"), "#define SCALE 3.0f\n").unwrap();
    });
    let e = refused(&fixture().source, &o);
    assert!(
        e.contains("header include/1/scale.h (") && e.contains("differs from the one frozen"),
        "{e}"
    );
}

#[test]
fn a_missing_header_is_refused_by_name() {
    let o = include_dirs_edited("missing", |_, inc1| {
        std::fs::remove_file(inc1.join("scale.h")).unwrap();
    });
    let e = refused(&fixture().source, &o);
    assert!(
        e.contains("header include/1/scale.h (")
            && e.contains("was read when frozen and is missing here"),
        "{e}"
    );
}

#[test]
fn a_header_that_would_shadow_the_frozen_one_is_refused_by_name() {
    // The same contents, in the directory searched first: the compiler would read it instead.
    let o = include_dirs_edited("shadowed", |inc0, _| {
        std::fs::write(inc0.join("scale.h"), SCALE_H).unwrap();
    });
    let e = refused(&fixture().source, &o);
    assert!(
        e.contains("directory include/0 (") && e.contains("holds other headers than when frozen"),
        "{e}"
    );
}

#[test]
fn a_system_header_of_another_installation_is_refused_by_name() {
    let f = fixture();
    let mut bundle = FrozenBundle::new();
    let mut entry = f.bundle.entries()[0].clone();
    let sys = entry
        .files
        .iter_mut()
        .find(|h| h.include_dir.is_none() && h.name.ends_with(b"sys/sys.h"))
        .expect("the absolute header is recorded");
    sys.sha256[0] ^= 1;
    bundle.insert(entry);
    let jit = no_compiler(Arc::new(bundle), true, CompilerKind::Hipcc);
    let e = jit.compile(&f.source, &f.options).unwrap_err().to_string();
    assert!(
        e.contains(&format!(
            "system header {} differs from the one frozen (another installation)",
            f.dir.join("sys/sys.h").display()
        )),
        "{e}"
    );
}

#[test]
fn other_target_features_are_refused_by_name() {
    let f = fixture();
    let mut o = f.options.clone();
    o.targets = vec![TargetId::parse("gfx90a:sramecc+:xnack+").unwrap()];
    let e = refused(&f.source, &o);
    assert!(
        e.contains("targets (frozen: gfx90a:sramecc+:xnack-, asked: gfx90a:sramecc+:xnack+)"),
        "{e}"
    );
}

#[test]
fn another_code_object_version_is_refused_by_name() {
    let f = fixture();
    let mut o = f.options.clone();
    o.code_object_version = Some(4);
    let e = refused(&f.source, &o);
    assert!(
        e.contains("code-object version (frozen: the compiler's default, asked: 4)"),
        "{e}"
    );
}

#[test]
fn another_compiler_choice_is_refused_by_name() {
    let f = fixture();
    let jit = no_compiler(Arc::clone(&f.bundle), true, CompilerKind::HipRtc);
    let e = jit.compile(&f.source, &f.options).unwrap_err().to_string();
    assert!(
        e.contains("compiler choice (frozen: hipcc, asked: hiprtc)"),
        "{e}"
    );
}

#[test]
fn another_compiler_here_is_a_miss_never_the_frozen_code() {
    let f = fixture();
    let mut bundle = FrozenBundle::new();
    let mut entry = f.bundle.entries()[0].clone();
    entry.compiler.fingerprint = "0".repeat(64);
    bundle.insert(entry);
    let bundle = Arc::new(bundle);
    let with_compiler = |strict| {
        Jit::new(JitOptions {
            compiler: Some(CompilerChoice::Kind(CompilerKind::Hipcc)),
            compiler_config: config("/usr/bin/hipcc"),
            cache: CacheLocation::Roots(vec![f.dir.join("cache")]),
            frozen: Some(Arc::clone(&bundle)),
            strict,
            ..JitOptions::default()
        })
        .unwrap()
    };
    // Strict: the miss is an error naming both compilers (the fixture's cache holds the
    // result, so strict does not refuse it: a tier answers).
    let e = Jit::new(JitOptions {
        compiler: Some(CompilerChoice::Kind(CompilerKind::Hipcc)),
        compiler_config: config("/usr/bin/hipcc"),
        cache: CacheLocation::Disabled,
        frozen: Some(Arc::clone(&bundle)),
        strict: true,
        ..JitOptions::default()
    })
    .unwrap()
    .compile(&f.source, &f.options)
    .unwrap_err()
    .to_string();
    assert!(
        e.contains("frozen by hipcc")
            && e.contains("(fingerprint 000000000000); the compiler here is hipcc"),
        "{e}"
    );
    let served = with_compiler(true).compile(&f.source, &f.options).unwrap();
    assert_eq!(served.origin(), Origin::Disk);
    let served = with_compiler(false).compile(&f.source, &f.options).unwrap();
    assert_ne!(served.origin(), Origin::Frozen);
}

#[test]
fn a_matching_compiler_here_is_served_from_the_bundle() {
    let f = fixture();
    let jit = Jit::new(JitOptions {
        compiler: Some(CompilerChoice::Kind(CompilerKind::Hipcc)),
        compiler_config: config("/usr/bin/hipcc"),
        cache: CacheLocation::Disabled,
        frozen: Some(Arc::clone(&f.bundle)),
        strict: true,
        ..JitOptions::default()
    })
    .unwrap();
    let compiled = jit.compile(&f.source, &f.options).unwrap();
    assert_eq!(compiled.origin(), Origin::Frozen);
    assert_eq!(compiled.compiler().path, PathBuf::from("/usr/bin/hipcc"));
}

#[test]
fn a_damaged_bundle_is_refused_naming_the_entry() {
    let f = fixture();
    let mut entry = f.bundle.entries()[0].clone();
    let last = entry.entry.len() - 1;
    entry.entry[last] ^= 1;
    let key = entry.entry_key.clone();
    let mut bundle = FrozenBundle::new();
    bundle.insert(entry);
    let e = FrozenBundle::from_bytes(&bundle.to_bytes())
        .unwrap_err()
        .to_string();
    assert_eq!(
        e,
        format!(
            "embedded bytes is not a hipjit frozen bundle: entry {key}: its sha256 does not match"
        )
    );
    let e = FrozenBundle::from_bytes(b"not a bundle")
        .unwrap_err()
        .to_string();
    assert!(
        e.starts_with("embedded bytes is not a hipjit frozen bundle: not a Zstandard frame"),
        "{e}"
    );
}

#[test]
fn a_refusal_names_the_nearest_request() {
    let f = fixture();
    let mut o = f.options.clone();
    o.extra_flags = vec!["-fno-unroll-loops".into()];
    let fields = hipjit::cache::frozen::RequestFields::new(f.source.as_bytes(), &o, "hipcc", b"");
    match f.bundle.lookup(&fields, &o.include_dirs) {
        Err(Refusal::NotFrozen { nearest: Some(d) }) => {
            assert_eq!(d, ["extra flags (frozen: , asked: -fno-unroll-loops)"]);
        }
        other => panic!("{other:?}"),
    }
}

#[cfg(feature = "cli")]
#[test]
fn the_command_freezes_a_record_that_hipjit_frozen_serves_with_no_compiler() {
    use common::cli::{compile, hipjit, outcome};
    let home = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("frozen-cli-{}", std::process::id()));
    std::fs::create_dir_all(&home).unwrap();
    let source = home.join("k.hip");
    std::fs::write(
        &source,
        "#include <hip/hip_runtime.h>\nextern \"C\" __global__ void k(float* x) { x[0] = 2; }\n",
    )
    .unwrap();
    let (record, bundle) = (home.join("record.jsonl"), home.join("k.hjfz"));
    let run = |cmd: &mut std::process::Command| outcome(&cmd.output().unwrap());
    // Record, where hipcc is.
    let (ok, _, err) = run(
        compile(&home, "hipcc", TARGET, &home.join("a.co"), &[], &source)
            .env("HIPJIT_HIPCC", "/usr/bin/hipcc")
            .env("HIPJIT_RECORD", &record),
    );
    assert!(ok, "{err}");
    // Freeze.
    let (ok, out, err) = run(hipjit(&home, &["cache", "freeze"])
        .arg(&record)
        .arg("-o")
        .arg(&bundle)
        .env("HIPJIT_HIPCC", "/usr/bin/hipcc"));
    assert!(ok, "{err}");
    assert!(out.contains("1 requests frozen (1 entries"), "{out}");
    // Load, with no hipcc and strict serving, in an empty cache.
    let served = |flags: &[String], out: &Path| {
        let mut cmd = compile(&home, "hipcc", TARGET, out, flags, &source);
        cmd.env("HIPJIT_CACHE_DIR", home.join("empty"))
            .env("HIPJIT_HIPCC", "/nonexistent/hipcc")
            .env("HIPJIT_FROZEN", &bundle)
            .env("HIPJIT_STRICT", "1")
            .env_remove("HIPJIT_RECORD");
        run(&mut cmd)
    };
    let (ok, _, err) = served(&[], &home.join("b.co"));
    assert!(ok, "{err}");
    assert_eq!(
        std::fs::read(home.join("b.co")).unwrap(),
        std::fs::read(home.join("a.co")).unwrap()
    );
    let (ok, _, err) = served(&["-DX=1".into()], &home.join("c.co"));
    assert!(!ok);
    assert!(
        err.contains("strict serving: k.hip for gfx90a:sramecc+:xnack-"),
        "{err}"
    );
    assert!(err.contains("asked:") && err.contains("-DX=1"), "{err}");
}

#[test]
fn in_memory_headers_are_in_the_frozen_key() {
    // Frozen with one content of an in-memory header; asked with another, the code frozen is
    // not the code asked for: refused naming the header, never served.
    let dir = fixture().dir.join("in-memory");
    let source = "#include <hip/hip_runtime.h>\n#include \"m.h\"\n\
                  extern \"C\" __global__ void m(float* x) { x[threadIdx.x] *= M; }\n";
    let options = |m: &str| {
        CompileOptions::for_target(TargetId::parse(TARGET).unwrap())
            .header("m.h", format!("#define M {m}\n"))
    };
    let mut freezer = Freezer::new(JitOptions {
        compiler: Some(CompilerChoice::Kind(CompilerKind::Hipcc)),
        compiler_config: config("/usr/bin/hipcc"),
        cache: CacheLocation::Roots(vec![dir.join("cache")]),
        ..JitOptions::default()
    })
    .unwrap();
    freezer.add(source, &options("2.0f")).unwrap();
    let bundle = Arc::new(FrozenBundle::from_bytes(&freezer.finish().to_bytes()).unwrap());
    let jit = no_compiler(bundle, true, CompilerKind::Hipcc);
    assert_eq!(
        jit.compile(source, &options("2.0f")).unwrap().origin(),
        Origin::Frozen
    );
    let e = match jit.compile(source, &options("3.0f")) {
        Err(e @ JitError::Strict { .. }) => e.to_string(),
        other => panic!("expected a strict refusal, got {other:?}"),
    };
    assert!(
        e.contains("differs in in-memory headers (frozen: m.h sha256"),
        "{e}"
    );
}
