//! The remote tier over the HTTP store (feature `http`) against a real server: Debian's nginx
//! with its WebDAV module (`nginx-light`, scripts/setup.sh), one per test on a free loopback
//! port in a temporary directory, its values the files under `<dir>/data`. The compiler is
//! the testing one (`CompilerKind::Fake`: its output is its source, a checked-in code object),
//! so that nothing here waits for a toolchain.

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use hipjit::cache::key::CACHE_FORMAT_VERSION;
use hipjit::cache::remote::{signing, RemoteConfig};
use hipjit::compiler::{CompileOptions, CompilerChoice, CompilerKind};
use hipjit::jit::{CacheLocation, Compiled, Jit, JitOptions, Origin, RemoteLocation};
use hipjit::target_id::TargetId;

const KEY: &[u8] = b"0123456789abcdef0123456789abcdef";
const PASSWORD: &str = "pw-S3cret";
const TOKEN: &str = "tok-S3cret";

// ---- a real nginx ---------------------------------------------------------------------------

struct Nginx {
    child: Option<Child>,
    port: u16,
    dir: tempfile::TempDir,
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

impl Nginx {
    /// nginx serving `<dir>/data` by WebDAV: `/auth/` behind basic authentication (user `u`,
    /// [`PASSWORD`]), `/token/` behind a bearer token ([`TOKEN`]), everything else open.
    fn start() -> Nginx {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("data")).unwrap();
        std::fs::write(
            dir.path().join("htpasswd"),
            format!("u:{{PLAIN}}{PASSWORD}\n"),
        )
        .unwrap();
        for _ in 0..5 {
            let port = free_port();
            let d = dir.path().display();
            // Started as root from a 0700 temporary directory, the workers must be root too.
            let user = if unsafe { libc::geteuid() } == 0 {
                "user root;"
            } else {
                ""
            };
            let conf = format!(
                "{user}\ndaemon off;\nmaster_process off;\npid {d}/nginx.pid;\n\
                 error_log {d}/error.log;\nevents {{ worker_connections 64; }}\n\
                 http {{\n access_log off;\n client_body_temp_path {d}/body;\n\
                 client_max_body_size 0;\n\
                 server {{\n  listen 127.0.0.1:{port};\n  root {d}/data;\n\
                 location / {{ dav_methods PUT DELETE; create_full_put_path on; }}\n\
                 location /auth/ {{ auth_basic c; auth_basic_user_file {d}/htpasswd;\n\
                 dav_methods PUT DELETE; create_full_put_path on; }}\n\
                 location /token/ {{ if ($http_authorization != \"Bearer {TOKEN}\") \
                 {{ return 401; }}\n dav_methods PUT DELETE; create_full_put_path on; }}\n\
                 }}\n}}\n"
            );
            std::fs::write(dir.path().join("nginx.conf"), conf).unwrap();
            let mut child = Command::new("nginx")
                .arg("-p")
                .arg(dir.path())
                .arg("-c")
                .arg(dir.path().join("nginx.conf"))
                .arg("-e")
                .arg(dir.path().join("error.log"))
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .unwrap_or_else(|e| {
                    panic!("cannot run nginx ({e}): install nginx-light with scripts/setup.sh")
                });
            let deadline = Instant::now() + Duration::from_secs(10);
            while Instant::now() < deadline {
                if child.try_wait().unwrap().is_some() {
                    break; // the port was taken
                }
                if std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
                    return Nginx {
                        child: Some(child),
                        port,
                        dir,
                    };
                }
                std::thread::sleep(Duration::from_millis(20));
            }
            let _ = child.kill();
            let _ = child.wait();
        }
        panic!(
            "nginx did not start: {}",
            std::fs::read_to_string(dir.path().join("error.log")).unwrap_or_default()
        );
    }

    fn url(&self, path: &str) -> String {
        format!("http://127.0.0.1:{}/{path}", self.port)
    }

    /// The file holding the value `name` under `prefix`.
    fn file(&self, prefix: &str, name: &str) -> PathBuf {
        self.dir.path().join("data").join(prefix).join(name)
    }

    /// SIGKILLs the server (one process: `master_process off`) and reaps it.
    fn kill(&mut self) {
        if let Some(mut c) = self.child.take() {
            // SAFETY: kill(2) on the pid of a child this test spawned and has not reaped.
            unsafe { libc::kill(c.id() as i32, libc::SIGKILL) };
            let _ = c.wait();
        }
    }
}

impl Drop for Nginx {
    fn drop(&mut self) {
        if let Some(c) = &self.child {
            // A clean stop.
            // SAFETY: kill(2) on the pid of a child this test spawned and has not reaped.
            unsafe { libc::kill(c.id() as i32, libc::SIGQUIT) };
        }
        if let Some(mut c) = self.child.take() {
            let deadline = Instant::now() + Duration::from_secs(5);
            while Instant::now() < deadline {
                if c.try_wait().unwrap().is_some() {
                    return;
                }
                std::thread::sleep(Duration::from_millis(10));
            }
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

// ---- the testing compiler ---------------------------------------------------------------------

fn code() -> Vec<u8> {
    std::fs::read(crate::common::code_object("single-gfx90a.hsaco")).unwrap()
}

/// Options whose key differs for each `variant`.
fn opts(variant: usize) -> CompileOptions {
    let mut o = CompileOptions::for_target(TargetId::parse("gfx90a").unwrap());
    o.defines
        .push(("VARIANT".into(), Some(variant.to_string())));
    o
}

fn config(url: &str) -> RemoteConfig {
    let mut c = RemoteConfig::new(url).unwrap_or_else(|e| panic!("{e}"));
    c.retry_after = Duration::from_secs(30);
    c
}

fn jit_at(root: &Path, remote: RemoteLocation) -> Jit {
    Jit::new(JitOptions {
        compiler: Some(CompilerChoice::Kind(CompilerKind::Fake)),
        cache: CacheLocation::Roots(vec![root.to_path_buf()]),
        remote_cache: remote,
        ..JitOptions::default()
    })
    .unwrap_or_else(|e| panic!("{e}"))
}

fn jit(root: &Path, remote: RemoteConfig) -> Jit {
    jit_at(root, RemoteLocation::Server(remote))
}

/// Compiles variant `variant`, in at most `limit`.
fn compile_within(jit: &Jit, variant: usize, limit: Duration) -> Compiled {
    let started = Instant::now();
    let c = jit
        .compile(code(), &opts(variant))
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(
        started.elapsed() < limit,
        "took {:?} (limit {limit:?})",
        started.elapsed()
    );
    c
}

fn compile(jit: &Jit, variant: usize) -> Compiled {
    compile_within(jit, variant, Duration::from_secs(10))
}

fn entry_name(c: &Compiled, key: Option<&[u8]>) -> String {
    match key {
        None => format!("hipjit:{CACHE_FORMAT_VERSION}:e:{}", c.key()),
        Some(k) => format!(
            "hipjit:{CACHE_FORMAT_VERSION}:k{}:e:{}",
            signing::key_id(k),
            c.key()
        ),
    }
}

fn no_secret(text: &str) {
    for s in [PASSWORD, TOKEN] {
        assert!(!text.contains(s), "a secret shows: {text}");
    }
}

// ---- the tests ---------------------------------------------------------------------------------

#[test]
fn a_compile_on_one_root_is_an_http_hit_on_another() {
    let nginx = Nginx::start();
    let dir = tempfile::tempdir().unwrap();
    let url = nginx.url("cache/hipjit/");
    let a = jit(&dir.path().join("a"), config(&url));
    let first = compile(&a, 0);
    assert_eq!(first.origin(), Origin::Compiler);
    assert!(
        first.cache_warnings().is_empty(),
        "{:?}",
        first.cache_warnings()
    );
    let file = nginx.file("cache/hipjit", &entry_name(&first, None));
    assert!(file.is_file(), "not stored at {}", file.display());
    let b = jit(&dir.path().join("b"), config(&url));
    let second = compile(&b, 0);
    assert_eq!(
        second.origin(),
        Origin::Remote,
        "{:?}",
        second.cache_warnings()
    );
    assert_eq!(second.key(), first.key());
    assert_eq!(b.stats().compiles, 0);
    // Written back to b's disk root: a disk hit there without the server.
    b.flush_cache_writes();
    let c = jit_at(&dir.path().join("b"), RemoteLocation::Disabled);
    assert_eq!(compile(&c, 0).origin(), Origin::Disk);
}

/// Values planted in the server's files under a signing key: a corrupted entry, an unsigned
/// one, one over the bound, none at all. Each is a miss (never served, the bad ones reported);
/// the compile that follows publishes a good entry in its place (a plain PUT: HTTP has no
/// compare-and-delete), which the next root hits.
#[test]
fn planted_corrupted_unsigned_huge_and_missing_values_are_misses() {
    let nginx = Nginx::start();
    let dir = tempfile::tempdir().unwrap();
    let url = nginx.url("c");
    let signed = || {
        let mut c = config(&url).with_signing_key(KEY).unwrap();
        c.max_value_bytes = 256 << 10;
        c
    };
    let first = compile(&jit(&dir.path().join("a"), signed()), 0);
    let name = entry_name(&first, Some(KEY));
    let file = nginx.file("c", &name);
    let good = std::fs::read(&file).unwrap();
    let payload = signing::open(Some(KEY), name.as_bytes(), &good)
        .unwrap()
        .to_vec();
    let mut corrupted = good.clone();
    let at = corrupted.len() - 100;
    corrupted[at] ^= 0x55;
    let unsigned = signing::seal(None, name.as_bytes(), &payload);
    let huge = vec![7u8; 1 << 20];
    for (i, (what, planted)) in [
        ("corrupted", Some(corrupted)),
        ("unsigned", Some(unsigned)),
        ("huge", Some(huge)),
        ("missing", None),
    ]
    .into_iter()
    .enumerate()
    {
        match &planted {
            Some(bytes) => std::fs::write(&file, bytes).unwrap(),
            None => std::fs::remove_file(&file).unwrap(),
        }
        let root = dir.path().join(format!("r{i}"));
        let c = compile(&jit(&root, signed()), 0);
        assert_eq!(c.origin(), Origin::Compiler, "{what} was served");
        if what != "missing" {
            let bad = c
                .bad_entries()
                .iter()
                .find(|b| b.path.to_string_lossy().contains(&name));
            assert!(bad.is_some(), "{what}: not reported: {:?}", c.bad_entries());
        }
        // Replaced by the compile's publish: a good, signed entry, hit by another root.
        let now = std::fs::read(&file).unwrap();
        assert!(
            signing::open(Some(KEY), name.as_bytes(), &now).is_ok(),
            "{what}: not replaced"
        );
        let hit = compile(&jit(&root.join("next"), signed()), 0);
        assert_eq!(
            hit.origin(),
            Origin::Remote,
            "{what}: {:?}",
            hit.cache_warnings()
        );
    }
}

/// A peer that accepts connections and never answers, and a port nobody listens on: the
/// compile goes on within the timeouts, with one warning naming the URL without its password;
/// the next compile does not wait (the server is down for the retry interval).
#[test]
fn a_stalled_or_absent_server_costs_one_bounded_warning() {
    let dir = tempfile::tempdir().unwrap();
    let silent = TcpListener::bind("127.0.0.1:0").unwrap();
    for (i, port) in [silent.local_addr().unwrap().port(), free_port()]
        .into_iter()
        .enumerate()
    {
        let url = format!("http://u:{PASSWORD}@127.0.0.1:{port}/c");
        let j = jit(&dir.path().join(format!("r{i}")), config(&url));
        let c = compile_within(&j, 0, Duration::from_secs(3));
        assert_eq!(c.origin(), Origin::Compiler);
        assert_eq!(c.cache_warnings().len(), 1, "{:?}", c.cache_warnings());
        let w = &c.cache_warnings()[0];
        assert!(w.contains("unreachable") && w.contains("u:***@"), "{w}");
        no_secret(w);
        no_secret(&format!("{j:?}"));
        let again = compile_within(&j, 1, Duration::from_millis(500));
        assert!(
            again.cache_warnings().is_empty(),
            "{:?}",
            again.cache_warnings()
        );
    }
}

#[test]
fn a_server_killed_mid_run_costs_one_warning() {
    let mut nginx = Nginx::start();
    let dir = tempfile::tempdir().unwrap();
    let j = jit(&dir.path().join("a"), config(&nginx.url("c")));
    let mut warnings = Vec::new();
    for i in 0..6 {
        if i == 2 {
            nginx.kill();
        }
        let c = compile_within(&j, i, Duration::from_secs(3));
        assert_eq!(c.origin(), Origin::Compiler);
        assert!(c.entry_path().is_some(), "published locally all the same");
        warnings.extend(c.cache_warnings().iter().cloned());
    }
    assert_eq!(warnings.len(), 1, "{warnings:?}");
    assert!(warnings[0].contains("unreachable"), "{warnings:?}");
    assert_eq!(j.stats().compiles, 6);
}

/// Basic authentication from the URL and a bearer token: hits with the right ones; with a
/// wrong one, one warning that the server refused it (and the tier off), never the secret,
/// in warnings, `Debug`, errors or `hipjit cache stats`.
#[test]
fn credentials_work_and_never_show() {
    let nginx = Nginx::start();
    let dir = tempfile::tempdir().unwrap();
    let basic = nginx
        .url("auth/c")
        .replace("://", &format!("://u:{PASSWORD}@"));
    let token = || config(&nginx.url("token/c")).with_bearer_token(TOKEN);
    for (i, remote) in [config(&basic), token()].into_iter().enumerate() {
        no_secret(&format!("{remote:?}"));
        let a = jit(&dir.path().join(format!("a{i}")), remote.clone());
        let first = compile(&a, i);
        assert!(
            first.cache_warnings().is_empty(),
            "{:?}",
            first.cache_warnings()
        );
        no_secret(&format!("{a:?}"));
        let hit = compile(&jit(&dir.path().join(format!("b{i}")), remote), i);
        assert_eq!(hit.origin(), Origin::Remote, "{:?}", hit.cache_warnings());
    }
    let wrong_password = nginx.url("auth/c").replace("://", "://u:wrong-S3cret@");
    for (i, remote) in [
        config(&wrong_password),
        config(&nginx.url("token/c")).with_bearer_token("wrong-S3cret"),
    ]
    .into_iter()
    .enumerate()
    {
        let j = jit(&dir.path().join(format!("w{i}")), remote);
        let c = compile(&j, 0);
        assert_eq!(c.origin(), Origin::Compiler);
        assert_eq!(c.cache_warnings().len(), 1, "{:?}", c.cache_warnings());
        let w = &c.cache_warnings()[0];
        assert!(w.contains("authentication refused"), "{w}");
        assert!(!w.contains("wrong-S3cret"), "{w}");
        assert!(
            compile(&j, 1).cache_warnings().is_empty(),
            "the tier is off"
        );
    }
    let e = RemoteConfig::new(format!("http://u:{PASSWORD}@127.0.0.1:99999/c")).unwrap_err();
    no_secret(&e.to_string());
    #[cfg(feature = "cli")]
    for (url, token) in [(basic.as_str(), ""), (&nginx.url("token/c")[..], TOKEN)] {
        let out = Command::new(env!("CARGO_BIN_EXE_hipjit"))
            .args(["cache", "stats", "--json"])
            .env("HIPJIT_CACHE_DIR", dir.path().join("a0"))
            .env("HIPJIT_REMOTE_CACHE", url)
            .env("HIPJIT_REMOTE_CACHE_TOKEN", token)
            .env_remove("HIPJIT_REMOTE_CACHE_KEY")
            .output()
            .unwrap();
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(out.status.success(), "{text}");
        no_secret(&text);
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(v["remote"]["reachable"], true, "{text}");
        assert!(
            v["remote"]["version"]
                .as_str()
                .unwrap_or("")
                .contains("nginx"),
            "{text}"
        );
    }
}

/// Two levels (two prefixes of one nginx standing for a near and a far server): a hit in the
/// second is served and written back to the first, where a third root then hits it alone.
/// A compile publishes to every level.
#[test]
fn a_hit_in_the_second_level_is_written_back_to_the_first() {
    let nginx = Nginx::start();
    let dir = tempfile::tempdir().unwrap();
    let (near, far) = (nginx.url("near"), nginx.url("far"));
    let first = compile(&jit(&dir.path().join("a"), config(&far)), 0);
    let name = entry_name(&first, None);
    assert!(nginx.file("far", &name).is_file());
    assert!(!nginx.file("near", &name).exists());
    let levels = || RemoteLocation::Levels(vec![config(&near), config(&far)]);
    let b = jit_at(&dir.path().join("b"), levels());
    assert_eq!(b.remote_levels().len(), 2);
    let hit = compile(&b, 0);
    assert_eq!(hit.origin(), Origin::Remote, "{:?}", hit.cache_warnings());
    b.flush_cache_writes();
    assert!(nginx.file("near", &name).is_file(), "not written back");
    let c = compile(&jit(&dir.path().join("c"), config(&near)), 0);
    assert_eq!(c.origin(), Origin::Remote, "{:?}", c.cache_warnings());
    // A compile under both levels publishes to each.
    let d = compile(&jit_at(&dir.path().join("d"), levels()), 1);
    assert_eq!(d.origin(), Origin::Compiler);
    let name = entry_name(&d, None);
    assert!(nginx.file("near", &name).is_file() && nginx.file("far", &name).is_file());
}

#[test]
fn the_variable_lists_levels_separated_by_whitespace() {
    let env = |urls: &'static str| {
        move |k: &str| match k {
            "HIPJIT_REMOTE_CACHE" => Some(urls.into()),
            "HIPJIT_REMOTE_CACHE_TOKEN" => Some(TOKEN.into()),
            _ => None,
        }
    };
    let levels = RemoteConfig::levels_from_env_with(env(
        " http://near:8080/c\n\thttps://u:p@far/c?layout=bazel  redis://r:6379/0 ",
    ))
    .unwrap();
    let urls: Vec<String> = levels.iter().map(|c| c.redacted_url()).collect();
    assert_eq!(
        urls,
        [
            "http://near:8080/c",
            "https://u:***@far/c?layout=bazel",
            "redis://r:6379/0"
        ]
    );
    assert!(levels.iter().all(|c| !format!("{c:?}").contains(TOKEN)));
    assert_eq!(levels[1].host_port(), Some(("far".into(), 443)));
    let first = RemoteConfig::from_env_with(env("http://a/x http://b/y"))
        .unwrap()
        .unwrap();
    assert_eq!(first.redacted_url(), "http://a/x");
}
