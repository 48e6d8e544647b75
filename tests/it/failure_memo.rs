//! Remembered compile failures (`hipjit::cache::failure`): a source the compiler rejected
//! fails again with the same error without the compiler running, until its key changes (a
//! header it read, an option), unless `JitOptions::retry_failed`; timeouts, signals and
//! failures without diagnostics are never remembered; a failure is a remote hit on another
//! root. The compiler is the fixture hipcc (tests/fixtures/fake-hipcc-act.sh) running
//! `$HOME/act.sh`, which counts its runs in `$HOME/compiles`, lists the header as read, and
//! fails with a clang-style error when the header holds `bad` (else copies a real gfx90a code
//! object).

use crate::common;

use std::os::unix::fs::PermissionsExt;
use std::path::PathBuf;
use std::time::Duration;

use hipjit::cache::key::CACHE_FORMAT_VERSION;
use hipjit::compiler::{CompileError, CompileOptions, CompilerConfig};
use hipjit::jit::{CacheLocation, Jit, JitError, JitOptions, Origin, RemoteLocation};
use hipjit::target_id::TargetId;

const SOURCE: &str = "#include \"k.h\"\nextern \"C\" __global__ void k(int* x) { x[0] = V; }\n";

/// A test's directory: `home` (act.sh, the run count), `include/k.h`, and `act` as the body
/// of act.sh after the count and `$src`/`$hdr` are set.
struct Setup {
    _dir: tempfile::TempDir,
    root: PathBuf,
    home: PathBuf,
    include: PathBuf,
}

/// The usual act.sh body: the header listed as read; an error when it holds `bad`.
fn failing_on_bad() -> String {
    format!(
        "echo \"out.hsaco: $src $hdr\" > deps.d\n\
         if grep -q bad \"$hdr\"; then echo \"$src:2:44: error: use of undeclared identifier 'V'\" >&2; exit 1; fi\n\
         cp {} out.hsaco\n",
        common::code_object("single-gfx90a.hsaco").display()
    )
}

fn setup(act: &str) -> Setup {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("home");
    std::fs::create_dir_all(&home).unwrap();
    std::fs::set_permissions(&home, std::fs::Permissions::from_mode(0o755)).unwrap();
    let include = dir.path().join("include");
    std::fs::create_dir_all(&include).unwrap();
    common::write_settled(&include.join("k.h"), "// bad: no V\n");
    std::fs::write(
        home.join("act.sh"),
        format!(
            "echo $$ >> \"$HOME/compiles\"\n\
             for a; do case \"$a\" in *.hip) src=\"$a\";; esac; done\n\
             hdr={}\n{act}",
            include.join("k.h").display()
        ),
    )
    .unwrap();
    Setup {
        root: dir.path().join("cache"),
        _dir: dir,
        home,
        include,
    }
}

impl Setup {
    fn compiles(&self) -> usize {
        std::fs::read_to_string(self.home.join("compiles"))
            .map(|s| s.lines().count())
            .unwrap_or(0)
    }

    fn options(&self) -> JitOptions {
        JitOptions {
            compiler: Some(hipjit::compiler::selection::CompilerChoice::Hipcc),
            compiler_config: common::fake_hipcc_config(&self.home),
            cache: CacheLocation::Roots(vec![self.root.clone()]),
            remote_cache: RemoteLocation::Disabled,
            ..JitOptions::default()
        }
    }

    fn jit(&self) -> Jit {
        Jit::new(self.options()).unwrap_or_else(|e| panic!("{e}"))
    }

    fn compile_options(&self) -> CompileOptions {
        CompileOptions::for_target(TargetId::parse("gfx90a").unwrap())
            .include_dir(self.include.clone())
    }
}

/// The compile failure of `r`, or a panic naming what it was.
fn failed(
    r: Result<hipjit::jit::Compiled, JitError>,
) -> (String, Vec<hipjit::compiler::Diagnostic>) {
    match r {
        Err(e @ JitError::Compile(CompileError::Failed(_))) => {
            let JitError::Compile(CompileError::Failed(f)) = &e else {
                unreachable!()
            };
            (e.to_string(), f.diagnostics.clone())
        }
        Err(e) => panic!("not a compile failure: {e:?}"),
        Ok(c) => panic!("compiled ({:?})", c.origin()),
    }
}

#[test]
fn a_rejected_source_fails_again_without_the_compiler_until_a_header_or_option_changes() {
    let s = setup(&failing_on_bad());
    let first = failed(s.jit().compile(SOURCE, &s.compile_options()));
    assert_eq!(s.compiles(), 1);
    assert!(
        first.0.contains("use of undeclared identifier 'V'"),
        "{}",
        first.0
    );
    assert!(first.1.iter().any(|d| d.is_error()));

    // Another Jit (another process's view) on the same root: the same error, no compile.
    let jit = s.jit();
    let again = failed(jit.compile(SOURCE, &s.compile_options()));
    assert_eq!(again, first, "the remembered failure is the same error");
    assert_eq!(s.compiles(), 1, "the compiler did not run");
    let stats = jit.stats();
    assert_eq!(
        (stats.failures_remembered, stats.failures, stats.compiles),
        (1, 1, 0)
    );

    // The header edited (still rejected): the key differs, the compiler runs.
    common::write_settled(&s.include.join("k.h"), "// bad, edited\n");
    failed(s.jit().compile(SOURCE, &s.compile_options()));
    assert_eq!(s.compiles(), 2, "a header edit is a miss");
    failed(s.jit().compile(SOURCE, &s.compile_options()));
    assert_eq!(s.compiles(), 2, "and the new failure is remembered");

    // An option changed: another direct key.
    failed(
        s.jit()
            .compile(SOURCE, &s.compile_options().define("X", "1")),
    );
    assert_eq!(s.compiles(), 3, "an option change is a miss");

    // Fixed: it compiles, and the result is an ordinary entry (the header written before the
    // filesystem clock's next tick, so that the compile may vouch for it).
    common::write_settled(&s.include.join("k.h"), "#define V 1\n");
    let c = s.jit().compile(SOURCE, &s.compile_options()).unwrap();
    assert_eq!((c.origin(), s.compiles()), (Origin::Compiler, 4));
    let c = s.jit().compile(SOURCE, &s.compile_options()).unwrap();
    assert_eq!((c.origin(), s.compiles()), (Origin::Disk, 4));

    // Broken again as it was: the first failure is still remembered under its files.
    common::write_settled(&s.include.join("k.h"), "// bad, edited\n");
    failed(s.jit().compile(SOURCE, &s.compile_options()));
    assert_eq!(s.compiles(), 4);
}

#[test]
fn retry_failed_runs_the_compiler_again() {
    let s = setup(&failing_on_bad());
    failed(s.jit().compile(SOURCE, &s.compile_options()));
    let retry = Jit::new(JitOptions {
        retry_failed: true,
        ..s.options()
    })
    .unwrap();
    failed(retry.compile(SOURCE, &s.compile_options()));
    assert_eq!(s.compiles(), 2);
    assert_eq!(retry.stats().failures_remembered, 0);
    // Fixed and retried: compiled, and then a hit.
    common::write_settled(&s.include.join("k.h"), "#define V 1\n// bad\n");
    std::fs::write(
        s.home.join("act.sh"),
        std::fs::read_to_string(s.home.join("act.sh"))
            .unwrap()
            .replace("grep -q bad", "grep -q nothing-is-bad"),
    )
    .unwrap();
    let c = retry.compile(SOURCE, &s.compile_options()).unwrap();
    assert_eq!(c.origin(), Origin::Compiler);
    assert_eq!(s.compiles(), 3);
}

/// A failure that is no clean rejection: each compile runs the compiler again.
fn never_remembered(act: &str, timeout: Duration) {
    let s = setup(act);
    let options = JitOptions {
        compiler_config: CompilerConfig {
            timeout,
            ..common::fake_hipcc_config(&s.home)
        },
        ..s.options()
    };
    for n in 1..=2 {
        let jit = Jit::new(options.clone()).unwrap();
        let e = jit
            .compile(SOURCE, &s.compile_options())
            .expect_err("the compile fails");
        assert_eq!(s.compiles(), n, "run {n}: {e}");
        assert_eq!(jit.stats().failures_remembered, 0);
    }
}

#[test]
fn a_timeout_is_not_remembered() {
    never_remembered(
        "echo \"out.hsaco: $src $hdr\" > deps.d\nsleep 5\nexit 1\n",
        Duration::from_millis(500),
    );
}

#[test]
fn a_compiler_killed_by_a_signal_is_not_remembered() {
    never_remembered(
        "echo \"out.hsaco: $src $hdr\" > deps.d\necho \"$src:1:1: error: x\" >&2\nkill -KILL $$\n",
        Duration::from_secs(60),
    );
}

#[test]
fn a_failure_without_diagnostics_or_dependency_list_is_not_remembered() {
    never_remembered(
        "echo \"out.hsaco: $src $hdr\" > deps.d\necho 'out of memory' >&2\nexit 1\n",
        Duration::from_secs(60),
    );
    never_remembered(
        "echo \"$src:1:1: error: x\" >&2\nexit 1\n",
        Duration::from_secs(60),
    );
}

/// A remembered failure in the remote tier (`memory://`) is found by a node with another
/// disk root, which then holds it on its own disk.
#[cfg(feature = "testing")]
#[test]
fn a_remembered_failure_is_a_remote_hit_on_another_root() {
    let s = setup(&failing_on_bad());
    let name = "failure_memo::remote";
    hipjit::cache::remote::memory::MemoryStore::shared(name).clear();
    let remote = || {
        RemoteLocation::Server(
            hipjit::cache::remote::RemoteConfig::new(format!("memory://{name}")).unwrap(),
        )
    };
    let a = Jit::new(JitOptions {
        remote_cache: remote(),
        ..s.options()
    })
    .unwrap();
    let first = failed(a.compile(SOURCE, &s.compile_options()));
    let other_root = s.root.with_file_name("other-cache");
    let b = Jit::new(JitOptions {
        remote_cache: remote(),
        cache: CacheLocation::Roots(vec![other_root.clone()]),
        ..s.options()
    })
    .unwrap();
    assert_eq!(failed(b.compile(SOURCE, &s.compile_options())), first);
    assert_eq!(s.compiles(), 1, "found remotely");
    assert_eq!(b.stats().failures_remembered, 1);
    // Written back: the other root answers without the remote tier.
    let c = Jit::new(JitOptions {
        cache: CacheLocation::Roots(vec![other_root]),
        ..s.options()
    })
    .unwrap();
    assert_eq!(failed(c.compile(SOURCE, &s.compile_options())), first);
    assert_eq!(s.compiles(), 1);
}

/// Remembering failures did not change the entry format (7 then; 8 since the source's file name
/// is keyed), and a root holding remembered failures serves its results as before.
#[test]
fn results_beside_remembered_failures_still_hit() {
    assert_eq!(
        CACHE_FORMAT_VERSION, 8,
        "the entry format changed: say why above"
    );
    let s = setup(&failing_on_bad());
    failed(s.jit().compile(SOURCE, &s.compile_options()));
    let good = "extern \"C\" __global__ void g(int* x) { x[0] = 2; }\n";
    std::fs::write(
        s.home.join("act.sh"),
        format!(
            "echo $$ >> \"$HOME/compiles\"\nfor a; do case \"$a\" in *.hip) src=\"$a\";; esac; done\n\
             echo \"out.hsaco: $src\" > deps.d\ncp {} out.hsaco\n",
            common::code_object("single-gfx90a.hsaco").display()
        ),
    )
    .unwrap();
    let o = CompileOptions::for_target(TargetId::parse("gfx90a").unwrap());
    assert_eq!(
        s.jit().compile(good, &o).unwrap().origin(),
        Origin::Compiler
    );
    assert_eq!(s.jit().compile(good, &o).unwrap().origin(), Origin::Disk);
    assert_eq!(s.compiles(), 2);
    let entries = hipjit::cache::DiskCache::open(std::slice::from_ref(&s.root))
        .unwrap()
        .verify()
        .unwrap();
    assert!(entries.iter().all(|e| e.status.is_ok()), "{entries:?}");
}

/// `hipjit compile`: the second run answers from the remembered failure (exit 1, the same
/// message, no compile); `--retry-failed` and `HIPJIT_RETRY_FAILED=1` run hipcc again.
#[cfg(feature = "cli")]
#[test]
fn the_command_remembers_and_retries() {
    let s = setup(&failing_on_bad());
    // Not in $HOME: the source's directory is searched (`#include "k.h"`), and act.sh
    // creating its count there during the first compile would leave it unpublished.
    let file = s.include.with_file_name("k.hip");
    common::write_settled(&file, SOURCE);
    let run = |extra: &[&str], env: Option<&str>| {
        let mut c = std::process::Command::new(env!("CARGO_BIN_EXE_hipjit"));
        c.args(["compile", "--compiler", "hipcc", "--arch", "gfx90a", "-I"])
            .arg(&s.include)
            .arg(&file)
            .args(extra)
            .env("HIPJIT_HIPCC", common::fake_hipcc())
            .env("HOME", &s.home)
            .env("XDG_CACHE_HOME", s.home.join("xdg"))
            .env("HIPJIT_CACHE_DIR", &s.root)
            .env_remove("HIPJIT_REMOTE_CACHE")
            .env_remove("HIPJIT_RECORD")
            .env_remove("HIPJIT_RETRY_FAILED");
        if let Some(v) = env {
            c.env("HIPJIT_RETRY_FAILED", v);
        }
        let o = c.output().unwrap();
        assert_eq!(o.status.code(), Some(1));
        String::from_utf8_lossy(&o.stderr).into_owned()
    };
    let first = run(&[], None);
    assert!(first.contains("undeclared identifier 'V'"), "{first}");
    assert_eq!(run(&[], None), first);
    assert_eq!(s.compiles(), 1, "{first}");
    assert_eq!(run(&[], Some("0")), first);
    assert_eq!(s.compiles(), 1);
    run(&["--retry-failed"], None);
    assert_eq!(s.compiles(), 2);
    run(&[], Some("1"));
    assert_eq!(s.compiles(), 3);
}

/// `hipjit cache verify --rebuild`: a compiler whose output carries a time stamp is named
/// not reproducible (exit 1, the part that differs), and `hipjit doctor` says so; one that
/// gives the same bytes is reproducible.
#[cfg(feature = "cli")]
#[test]
fn verify_rebuild_names_a_compiler_that_is_not_reproducible() {
    for stamped in [false, true] {
        let stamp = if stamped {
            "date +%s%N >> out.hsaco\n"
        } else {
            ""
        };
        let s = setup(&format!(
            "echo \"out.hsaco: $src\" > deps.d\ncp {} out.hsaco\nchmod u+w out.hsaco\n{stamp}",
            common::code_object("single-gfx90a.hsaco").display()
        ));
        let dir = s.include.parent().unwrap().join("src");
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("k.hip");
        std::fs::write(
            &file,
            "extern \"C\" __global__ void k(int* x) { x[0] = 1; }\n",
        )
        .unwrap();
        let record = s.home.join("requests.jsonl");
        let hipjit = |args: &[&str]| {
            let o = std::process::Command::new(env!("CARGO_BIN_EXE_hipjit"))
                .args(args)
                .env("HIPJIT_HIPCC", common::fake_hipcc())
                .env("HIPJIT_COMPILER", "hipcc")
                .env("HOME", &s.home)
                .env("XDG_CACHE_HOME", s.home.join("xdg"))
                .env("HIPJIT_CACHE_DIR", &s.root)
                .env("HIPJIT_RECORD", &record)
                .env_remove("HIPJIT_REMOTE_CACHE")
                .env_remove("HIPJIT_RETRY_FAILED")
                .output()
                .unwrap();
            (
                o.status.code(),
                String::from_utf8_lossy(&o.stdout).into_owned(),
            )
        };
        let f = file.to_str().unwrap();
        assert_eq!(hipjit(&["compile", "--arch", "gfx90a", f]).0, Some(0));
        let r = record.to_str().unwrap();
        let (code, out) = hipjit(&["cache", "verify", "--rebuild", r, "--json"]);
        let v: serde_json::Value = serde_json::from_str(&out).unwrap();
        let result = &v["results"][0];
        let compiler = &v["compilers"][0];
        assert_eq!(
            compiler["path"],
            common::fake_hipcc().to_str().unwrap(),
            "{v:#}"
        );
        if stamped {
            assert_eq!(code, Some(1), "{v:#}");
            assert_eq!(result["status"], "differs", "{v:#}");
            assert_eq!(result["differing"][0]["parts"], serde_json::json!(["rest"]));
            assert_eq!(compiler["reproducible"], false);
        } else {
            assert_eq!(code, Some(0), "{v:#}");
            assert_eq!(result["status"], "reproducible", "{v:#}");
            assert_eq!(compiler["reproducible"], true);
        }
        let (_, doctor) = hipjit(&["doctor", "--json"]);
        let d: serde_json::Value = serde_json::from_str(&doctor).unwrap();
        let named = d["findings"].as_array().unwrap().iter().any(|f| {
            let t = f["text"].as_str().unwrap_or("");
            t.contains("not reproducible") && t.contains(common::fake_hipcc().to_str().unwrap())
        });
        assert_eq!(named, stamped, "{:#}", d["findings"]);
        assert_eq!(
            d["cache"]["reproducibility"][0]["reproducible"],
            serde_json::json!(!stamped)
        );
    }
}
