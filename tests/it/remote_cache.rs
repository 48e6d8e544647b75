//! The remote cache tier against a real redis-server (Debian's, installed by scripts/setup.sh):
//! each test starts its own server on 127.0.0.1 at a free port with a private directory, and
//! stops only what it started. The compiler is the fixture `fake-hipcc-act.sh` copying a real
//! gfx90a code object and counting its runs in `$HOME/compiles`, so that "exactly one compile"
//! is counted across processes; the child processes are this test binary running its ignored
//! `child_*` tests.

use crate::common;

use std::net::TcpListener;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use hipjit::cache::disk::DiskCache;
use hipjit::cache::key::CACHE_FORMAT_VERSION;
use hipjit::cache::remote::{signing, RemoteConfig};
use hipjit::compiler::CompileOptions;
use hipjit::jit::{CacheLocation, Compiled, Jit, JitOptions, Origin, RemoteLocation};
use hipjit::target_id::TargetId;

const SOURCE: &str = "extern \"C\" __global__ void k(int* x) { x[0] = 1; }\n";
const KEY: &[u8] = b"0123456789abcdef0123456789abcdef";

// ---- a real redis-server -------------------------------------------------------------------

struct Server {
    child: Option<Child>,
    port: u16,
    dir: tempfile::TempDir,
    /// Settings added to the command line.
    extra: Vec<String>,
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

impl Server {
    fn start() -> Server {
        Server::start_with(&[])
    }

    /// A server with these settings added to its command line.
    fn start_with(extra: &[&str]) -> Server {
        let mut s = Server {
            child: None,
            port: 0,
            dir: tempfile::tempdir().unwrap(),
            extra: extra.iter().map(|a| a.to_string()).collect(),
        };
        for _ in 0..5 {
            s.port = free_port();
            if s.launch() {
                return s;
            }
        }
        panic!("redis-server did not start on a free port in five tries");
    }

    /// Starts redis-server on this port; `false` when it exited (the port was taken).
    fn launch(&mut self) -> bool {
        let child = Command::new("redis-server")
            .args(["--port", &self.port.to_string(), "--bind", "127.0.0.1"])
            .args(["--save", "", "--appendonly", "no", "--daemonize", "no"])
            .arg("--dir")
            .arg(self.dir.path())
            .args(&self.extra)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| {
                panic!("cannot run redis-server ({e}): install it with scripts/setup.sh")
            });
        self.child = Some(child);
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if let Some(c) = &mut self.child {
                if c.try_wait().unwrap().is_some() {
                    self.child = None;
                    return false;
                }
            }
            if let Ok(mut c) = self.connection() {
                // A server started with --requirepass answers NOAUTH: up all the same.
                match redis::cmd("PING").query::<String>(&mut c) {
                    Ok(_) => return true,
                    Err(e) if e.code() == Some("NOAUTH") => return true,
                    Err(_) => {}
                }
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        panic!("redis-server on port {} did not answer PING", self.port);
    }

    fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/0", self.port)
    }

    fn connection(&self) -> redis::RedisResult<redis::Connection> {
        redis::Client::open(self.url())?.get_connection_with_timeout(Duration::from_secs(1))
    }

    fn redis(&self) -> redis::Connection {
        self.connection().unwrap()
    }

    /// SIGKILLs the server this test started, and reaps it.
    fn kill(&mut self) {
        if let Some(mut c) = self.child.take() {
            // SAFETY: kill(2) on the pid of a child this test spawned and has not reaped.
            unsafe { libc::kill(c.id() as i32, libc::SIGKILL) };
            let _ = c.wait();
        }
    }

    /// Starts it again on the same port (empty: nothing is persisted).
    fn restart(&mut self) {
        assert!(
            self.launch(),
            "redis-server did not restart on port {}",
            self.port
        );
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.kill();
    }
}

// ---- the fixture compiler -------------------------------------------------------------------

/// A `$HOME` whose act.sh "compiles" by copying a real gfx90a code object and appends a line
/// to `$HOME/compiles`; with `$HOME/hang` present it records its pid in `$HOME/hang.pid` and
/// sleeps instead; with `$HOME/slow` it takes a second; the paths in `$HOME/deps` are listed
/// as dependencies (headers it read).
fn home(dir: &Path) -> PathBuf {
    let home = dir.join("home");
    std::fs::create_dir_all(&home).unwrap();
    std::fs::set_permissions(&home, std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::write(
        home.join("act.sh"),
        format!(
            "echo $$ >> \"$HOME/compiles\"\n\
             if [ -f \"$HOME/hang\" ]; then echo $$ > \"$HOME/hang.pid\"; exec sleep 60; fi\n\
             if [ -f \"$HOME/slow\" ]; then sleep 1; fi\n\
             cp {} out.hsaco\nfor a; do case \"$a\" in *.hip) src=\"$a\";; esac; done\n\
             echo \"out.hsaco: $src $(cat \"$HOME/deps\" 2>/dev/null)\" > deps.d\n",
            common::code_object("single-gfx90a.hsaco").display()
        ),
    )
    .unwrap();
    home
}

/// The tier at `url` with short lock timings, and operation and connection timeouts of 2 s
/// instead of 200 ms: on a loaded 2-core machine a reply can take longer than 200 ms, which
/// turns the tier off and makes an expected remote hit a miss. The tests of the timeouts set
/// their own.
fn config(url: &str) -> RemoteConfig {
    let mut c = RemoteConfig::new(url).unwrap();
    c.op_timeout = Duration::from_secs(2);
    c.connect_timeout = Duration::from_secs(2);
    c.lock_ttl = Duration::from_secs(2);
    c.lock_renew = Duration::from_millis(500);
    c.lock_poll = Duration::from_millis(50);
    c
}

fn jit(root: &Path, home: &Path, remote: Option<RemoteConfig>) -> Jit {
    jit_waiting(root, home, remote, Duration::from_secs(20))
}

/// [`jit`] whose compiles wait at most `wait` for another's compile lock.
fn jit_waiting(root: &Path, home: &Path, remote: Option<RemoteConfig>, wait: Duration) -> Jit {
    jit_at(
        CacheLocation::Roots(vec![root.to_path_buf()]),
        home,
        remote,
        wait,
    )
}

/// [`jit_waiting`] with the disk cache at `cache`.
fn jit_at(cache: CacheLocation, home: &Path, remote: Option<RemoteConfig>, wait: Duration) -> Jit {
    Jit::new(JitOptions {
        // hipcc, whatever HIPJIT_COMPILER says: these tests are about it.
        compiler: Some(hipjit::compiler::selection::CompilerChoice::Hipcc),
        compiler_config: common::fake_hipcc_config(home),
        cache,
        remote_cache: remote.map_or(RemoteLocation::Disabled, RemoteLocation::Server),
        lock_wait: Some(wait),
        ..JitOptions::default()
    })
    .unwrap_or_else(|e| panic!("{e}"))
}

fn opts() -> CompileOptions {
    CompileOptions::for_target(TargetId::parse("gfx90a").unwrap())
}

/// Compiles on another thread and fails the test when it takes longer than `limit` (a hang).
fn compile_within(jit: &Jit, source: &str, limit: Duration) -> Compiled {
    std::thread::scope(|s| {
        let (tx, rx) = mpsc::channel();
        s.spawn(move || {
            let _ = tx.send(jit.compile(source, &opts()).map_err(|e| e.to_string()));
        });
        rx.recv_timeout(limit)
            .unwrap_or_else(|_| panic!("the compile did not return within {limit:?}"))
            .unwrap_or_else(|e| panic!("{e}"))
    })
}

fn compile(jit: &Jit, source: &str) -> Compiled {
    compile_within(jit, source, Duration::from_secs(60))
}

fn entry_name(c: &Compiled) -> String {
    format!("hipjit:{CACHE_FORMAT_VERSION}:e:{}", c.key())
}

/// The name of `c`'s entry written under the signing key `key`: its scope holds the key's id.
fn signed_entry_name(c: &Compiled, key: &[u8]) -> String {
    format!(
        "hipjit:{CACHE_FORMAT_VERSION}:k{}:e:{}",
        signing::key_id(key),
        c.key()
    )
}

/// The header manifests of the one source these tests compiled: the field and value of each.
fn manifests(server: &Server) -> Vec<(Vec<u8>, Vec<u8>)> {
    let names: Vec<String> = redis::cmd("KEYS")
        .arg("hipjit:*:m:*")
        .query(&mut server.redis())
        .unwrap();
    assert_eq!(names.len(), 1, "{names:?}");
    let mut fields: Vec<(Vec<u8>, Vec<u8>)> = redis::cmd("HGETALL")
        .arg(&names[0])
        .query(&mut server.redis())
        .unwrap();
    fields.sort();
    fields
}

/// The direct key (hex) of the one source these tests compiled, from its manifests' name.
fn direct_key(server: &Server) -> String {
    let names: Vec<String> = redis::cmd("KEYS")
        .arg("hipjit:*:m:*")
        .query(&mut server.redis())
        .unwrap();
    assert_eq!(names.len(), 1, "{names:?}");
    names[0].rsplit(':').next().unwrap().to_string()
}

fn get(server: &Server, name: &str) -> Option<Vec<u8>> {
    redis::cmd("GET")
        .arg(name)
        .query(&mut server.redis())
        .unwrap()
}

fn set(server: &Server, name: &str, value: &[u8]) {
    redis::cmd("SET")
        .arg(name)
        .arg(value)
        .query::<()>(&mut server.redis())
        .unwrap();
}

// ---- the cases ------------------------------------------------------------------------------

#[test]
fn a_remote_hit_fills_a_second_root_without_compiling() {
    let server = Server::start();
    let dir = tempfile::tempdir().unwrap();
    let home = home(dir.path());
    let (root_a, root_b) = (dir.path().join("a"), dir.path().join("b"));
    let first = compile(&jit(&root_a, &home, Some(config(&server.url()))), SOURCE);
    assert_eq!(first.origin(), Origin::Compiler);
    assert!(get(&server, &entry_name(&first)).is_some(), "not stored");

    let second = compile(&jit(&root_b, &home, Some(config(&server.url()))), SOURCE);
    assert_eq!(second.origin(), Origin::Remote);
    assert_eq!(second.key(), first.key());
    assert_eq!(common::compiles(&home), 1, "the second root compiled");
    assert_eq!(second.kernels()[0].name, first.kernels()[0].name);
    // Written to the second root, with its manifest: a disk hit without the server.
    let disk = DiskCache::open(std::slice::from_ref(&root_b)).unwrap();
    assert!(disk.get(&first.key()).entry.is_some());
    assert!(second.entry_path().unwrap().starts_with(&root_b));
    let third = compile(&jit(&root_b, &home, None), SOURCE);
    assert_eq!(third.origin(), Origin::Disk);
    assert_eq!(common::compiles(&home), 1);
}

/// What [`a_changed_entry_is_refused_and_replaced`] leaves: its server, directory and
/// `$HOME`, and the entry's stored value as first written, as changed, and as published again.
struct Replaced {
    server: Server,
    dir: tempfile::TempDir,
    home: PathBuf,
    good: Vec<u8>,
    bad: Vec<u8>,
    now: Vec<u8>,
}

/// Compiles [`SOURCE`] in root `a` through a fresh server, changes the stored value of its
/// entry with `change`, and compiles again in root `b`: the changed entry is not served (the
/// source is compiled), it is reported as a bad entry for a reason containing `reason`, and a
/// valid entry is published again under its name.
fn a_changed_entry_is_refused_and_replaced(
    change: impl FnOnce(&mut [u8]),
    reason: &str,
) -> Replaced {
    let server = Server::start();
    let dir = tempfile::tempdir().unwrap();
    let home = home(dir.path());
    let first = compile(
        &jit(&dir.path().join("a"), &home, Some(config(&server.url()))),
        SOURCE,
    );
    let name = entry_name(&first);
    let good = get(&server, &name).unwrap();
    let mut bad = good.clone();
    change(&mut bad);
    set(&server, &name, &bad);

    let second = compile(
        &jit(&dir.path().join("b"), &home, Some(config(&server.url()))),
        SOURCE,
    );
    assert_eq!(
        second.origin(),
        Origin::Compiler,
        "the changed entry was served"
    );
    let reported = second
        .bad_entries()
        .iter()
        .find(|b| b.path.to_string_lossy().ends_with(&name))
        .unwrap_or_else(|| panic!("not reported: {:?}", second.bad_entries()));
    assert!(reported.reason.contains(reason), "{}", reported.reason);
    // Removed (it still held the changed bytes) and published again by the compile.
    let now = get(&server, &name).expect("not published again");
    let payload = signing::open(None, name.as_bytes(), &now).unwrap();
    hipjit::cache::disk::Entry::from_bytes(payload.to_vec(), Path::new(&name), Some(&first.key()))
        .unwrap_or_else(|e| panic!("the replacement is bad: {e}"));
    Replaced {
        server,
        dir,
        home,
        good,
        bad,
        now,
    }
}

#[test]
fn a_corrupted_remote_entry_is_never_served_and_is_replaced() {
    let r = a_changed_entry_is_refused_and_replaced(
        |bad| {
            let last = bad.len() - 100;
            bad[last] ^= 0x55; // inside the code object: its recorded sha256 no longer matches
        },
        "sha256",
    );
    assert_eq!(common::compiles(&r.home), 2);
    assert!(r.now != r.bad, "the bad entry is still there");
    assert_eq!(r.good.len(), r.now.len());
    let third = compile(
        &jit(
            &r.dir.path().join("c"),
            &r.home,
            Some(config(&r.server.url())),
        ),
        SOURCE,
    );
    assert_eq!(third.origin(), Origin::Remote);
    assert_eq!(common::compiles(&r.home), 2);
}

/// A remote value is the entry file's bytes in an envelope: it carries the entry's checksum
/// over its header and metadata. One byte of the recorded command changed (`-O3` read as
/// `-O2`: well-formed metadata, the code object untouched) is refused, never served, and
/// replaced by the compile that follows.
#[test]
fn a_changed_byte_in_a_remote_entrys_metadata_is_refused_and_replaced() {
    a_changed_entry_is_refused_and_replaced(
        |bad| {
            let at = bad
                .windows(3)
                .position(|w| w == b"-O3")
                .expect("the recorded command holds -O3");
            bad[at + 2] = b'2';
        },
        "checksum",
    );
}

/// Under a signing key, entries live under names holding the key's id, where no node with
/// another key writes: a value there that is unsigned or signed with another key was planted
/// (or corrupted), and is refused, removed and replaced by the compile that follows.
#[test]
fn forged_entries_are_refused_under_signing() {
    let server = Server::start();
    let dir = tempfile::tempdir().unwrap();
    let home = home(dir.path());
    let signed = || config(&server.url()).with_signing_key(KEY).unwrap();
    let first = compile(&jit(&dir.path().join("a"), &home, Some(signed())), SOURCE);
    let name = signed_entry_name(&first, KEY);
    let value = get(&server, &name).expect("stored in the key's scope");
    assert!(
        get(&server, &entry_name(&first)).is_none(),
        "stored outside the key's scope"
    );
    let payload = signing::open(Some(KEY), name.as_bytes(), &value).unwrap();

    // A self-consistent entry, unsigned, then signed with another key: each refused.
    let forgeries = [
        (signing::seal(None, name.as_bytes(), payload), "unsigned"),
        (
            signing::seal(
                Some(b"not the cluster's key, 32 bytes."),
                name.as_bytes(),
                payload,
            ),
            "signature",
        ),
    ];
    for (i, (forged, why)) in forgeries.iter().enumerate() {
        set(&server, &name, forged);
        let root = dir.path().join(format!("b{i}"));
        let c = compile(&jit(&root, &home, Some(signed())), SOURCE);
        assert_eq!(c.origin(), Origin::Compiler, "a forged entry was served");
        assert!(
            c.bad_entries().iter().any(|b| b.reason.contains(why)),
            "{why}: {:?}",
            c.bad_entries()
        );
        // Replaced by this compile's signed entry.
        let now = get(&server, &name).unwrap();
        assert!(signing::open(Some(KEY), name.as_bytes(), &now).is_ok());
    }
    assert_eq!(common::compiles(&home), 3);
    // A node without the key reads and writes entries outside the key's scope: it compiles,
    // and the signed entry stays as it was.
    let unsigned = compile(
        &jit(&dir.path().join("c"), &home, Some(config(&server.url()))),
        SOURCE,
    );
    assert_eq!(unsigned.origin(), Origin::Compiler);
    assert!(get(&server, &entry_name(&first)).is_some());
    let kept = get(&server, &name).unwrap();
    assert!(signing::open(Some(KEY), name.as_bytes(), &kept).is_ok());
}

/// Two nodes with different signing keys on one server, the same source: each refuses the
/// other's manifest (counted, warned about once) and leaves it; neither deletes nor replaces
/// anything of the other's, so both keep hitting their own entries, however often they read
/// each other's values. Before, each deleted what the other wrote, and the two took turns.
#[test]
fn nodes_with_different_keys_each_keep_hitting_their_own_entries() {
    let server = Server::start();
    let dir = tempfile::tempdir().unwrap();
    let home = home(dir.path());
    let other_key: &[u8] = b"another node's key, 32 bytes....";
    let keyed = |key: &[u8]| config(&server.url()).with_signing_key(key).unwrap();
    let a = compile(
        &jit(&dir.path().join("a0"), &home, Some(keyed(KEY))),
        SOURCE,
    );
    let b = compile(
        &jit(&dir.path().join("b0"), &home, Some(keyed(other_key))),
        SOURCE,
    );
    assert_eq!(
        (a.origin(), b.origin()),
        (Origin::Compiler, Origin::Compiler)
    );
    assert_eq!(common::compiles(&home), 2);
    let (a_name, b_name) = (signed_entry_name(&a, KEY), signed_entry_name(&b, other_key));
    let (a_entry, b_entry) = (
        get(&server, &a_name).unwrap(),
        get(&server, &b_name).unwrap(),
    );
    let both = manifests(&server);
    assert_eq!(both.len(), 2, "one manifest field per key");

    // Fresh nodes of each key, in turns: every one a remote hit on its own key's entry. A
    // lookup tries the most recently matched manifest first and stops at the first that leads
    // to a hit, so a node meets at most the other key's manifest first: refused, counted, left.
    for round in 0..3 {
        for (key, who) in [(KEY, "a"), (other_key, "b")] {
            let node = jit(
                &dir.path().join(format!("{who}{}", round + 1)),
                &home,
                Some(keyed(key)),
            );
            let c = compile(&node, SOURCE);
            assert_eq!(
                c.origin(),
                Origin::Remote,
                "round {round}, node {who}: {:?} {:?}",
                c.cache_warnings(),
                c.bad_entries()
            );
            let remote = node.stats().remote.unwrap();
            assert_eq!(remote.refused, c.bad_entries().len() as u64, "{remote:?}");
            assert!(
                c.bad_entries()
                    .iter()
                    .all(|e| e.reason.contains("signature") && !e.writable_root),
                "{:?}",
                c.bad_entries()
            );
            assert!(remote.refused <= 1, "round {round}, node {who}: {remote:?}");
        }
    }
    assert_eq!(common::compiles(&home), 2, "a node compiled again");
    // Nothing was deleted or rewritten.
    assert_eq!(get(&server, &a_name).unwrap(), a_entry);
    assert_eq!(get(&server, &b_name).unwrap(), b_entry);
    assert_eq!(manifests(&server), both);
}

#[test]
fn a_server_killed_during_eight_compiles_costs_one_warning() {
    let mut server = Server::start();
    let dir = tempfile::tempdir().unwrap();
    let home = home(dir.path());
    let jit = jit(&dir.path().join("a"), &home, Some(config(&server.url())));
    let mut warnings = 0;
    for i in 0..8 {
        if i == 2 {
            server.kill();
        }
        let c = compile_within(&jit, &format!("{SOURCE}// {i}\n"), Duration::from_secs(20));
        assert_eq!(c.origin(), Origin::Compiler);
        assert!(
            c.cache_warnings().len() <= 1,
            "compile {i}: {:?}",
            c.cache_warnings()
        );
        for w in c.cache_warnings() {
            assert!(w.contains("unreachable"), "{w}");
            assert!(w.contains(&server.url()), "{w}");
        }
        warnings += c.cache_warnings().len();
        // Published locally all the same.
        assert!(c.entry_path().is_some());
    }
    assert_eq!(warnings, 1, "one warning for the outage");
    assert_eq!(common::compiles(&home), 8);
}

#[test]
fn the_tier_resumes_after_a_restart() {
    let mut server = Server::start();
    let dir = tempfile::tempdir().unwrap();
    let home = home(dir.path());
    let mut c = config(&server.url());
    c.retry_after = Duration::from_millis(300);
    let jit_a = jit(&dir.path().join("a"), &home, Some(c));
    compile(&jit_a, &format!("{SOURCE}// before\n"));
    server.kill();
    let during = compile(&jit_a, &format!("{SOURCE}// during\n"));
    assert_eq!(
        during.cache_warnings().len(),
        1,
        "{:?}",
        during.cache_warnings()
    );
    server.restart();
    std::thread::sleep(Duration::from_millis(400));
    let after = compile(&jit_a, &format!("{SOURCE}// after\n"));
    assert!(
        after.cache_warnings().is_empty(),
        "{:?}",
        after.cache_warnings()
    );
    assert!(
        get(&server, &entry_name(&after)).is_some(),
        "not stored after the restart"
    );
    let other = compile(
        &jit(&dir.path().join("b"), &home, Some(config(&server.url()))),
        &format!("{SOURCE}// after\n"),
    );
    assert_eq!(other.origin(), Origin::Remote);
}

#[test]
fn an_unreachable_address_is_bounded_and_not_an_error() {
    let dir = tempfile::tempdir().unwrap();
    let home = home(dir.path());
    // A port nobody listens on (refused at once), and a peer that accepts connections (the
    // kernel completes them into the backlog) and never answers: the timeouts bound it. (An
    // address that drops packets is no test here: this machine's network answers connections
    // to outside addresses itself.)
    let silent = TcpListener::bind("127.0.0.1:0").unwrap();
    for url in [
        format!("redis://user:pw-secret@127.0.0.1:{}/0", free_port()),
        format!(
            "redis://user:pw-secret@127.0.0.1:{}/0",
            silent.local_addr().unwrap().port()
        ),
    ] {
        // The default timeouts (200 ms), which bound it.
        let mut remote = config(&url);
        remote.op_timeout = Duration::from_millis(200);
        remote.connect_timeout = Duration::from_millis(200);
        let jit = jit(&dir.path().join("a"), &home, Some(remote));
        let source = format!("{SOURCE}// {url}\n");
        let c = compile_within(&jit, &source, Duration::from_secs(10));
        assert_eq!(c.origin(), Origin::Compiler);
        assert_eq!(c.cache_warnings().len(), 1, "{:?}", c.cache_warnings());
        let w = &c.cache_warnings()[0];
        assert!(w.contains("unreachable") && w.contains("user:***@"), "{w}");
        assert!(!w.contains("pw-secret"), "the password shows: {w}");
        assert!(!format!("{jit:?}").contains("pw-secret"));
        // The server stays down for the retry interval: the next miss does not wait again.
        let again = compile_within(&jit, &format!("{source}// 2\n"), Duration::from_secs(10));
        assert!(
            again.cache_warnings().is_empty(),
            "{:?}",
            again.cache_warnings()
        );
    }
}

const CHILD_URL: &str = "HIPJIT_TEST_REMOTE_URL";
const CHILD_ROOT: &str = "HIPJIT_TEST_REMOTE_ROOT";
const CHILD_HOME: &str = "HIPJIT_TEST_REMOTE_HOME";

fn child_jit() -> Jit {
    let var = |k: &str| std::env::var_os(k).unwrap_or_else(|| panic!("{k} must be set"));
    jit(
        Path::new(&var(CHILD_ROOT)),
        Path::new(&var(CHILD_HOME)),
        Some(config(var(CHILD_URL).to_str().unwrap())),
    )
}

#[test]
#[ignore = "child process of the remote cache tests"]
fn child_compile() {
    let c = child_jit()
        .compile(SOURCE, &opts())
        .unwrap_or_else(|e| panic!("{e}"));
    println!("ORIGIN {:?} KEY {}", c.origin(), c.key());
}

fn spawn_child(server: &Server, root: &Path, home: &Path) -> Child {
    common::child_test(module_path!(), "child_compile")
        .env(CHILD_URL, server.url())
        .env(CHILD_ROOT, root)
        .env(CHILD_HOME, home)
        .spawn()
        .unwrap()
}

#[test]
fn eight_processes_over_four_roots_compile_once() {
    let server = Server::start();
    let dir = tempfile::tempdir().unwrap();
    let home = home(dir.path());
    std::fs::write(home.join("slow"), "").unwrap();
    let children: Vec<Child> = (0..8)
        .map(|i| spawn_child(&server, &dir.path().join(format!("root{}", i % 4)), &home))
        .collect();
    let mut origins = Vec::new();
    for child in children {
        let stdout = common::child_stdout(child);
        let origin = stdout
            .lines()
            .find_map(|l| l.split_once("ORIGIN ").map(|(_, o)| o))
            .and_then(|l| l.split(' ').next())
            .unwrap_or_else(|| panic!("no origin: {stdout}"))
            .to_string();
        origins.push(origin);
    }
    assert_eq!(common::compiles(&home), 1, "origins: {origins:?}");
    assert_eq!(origins.iter().filter(|o| *o == "Compiler").count(), 1);
    for i in 0..4 {
        let disk = DiskCache::open(&[dir.path().join(format!("root{i}"))]).unwrap();
        assert_eq!(
            disk.list().unwrap().len(),
            2,
            "root{i}: an entry and its manifest"
        );
    }
}

#[test]
fn a_killed_lock_holder_lets_another_compile_after_expiry() {
    let server = Server::start();
    let dir = tempfile::tempdir().unwrap();
    let holder_home = home(&dir.path().join("holder"));
    std::fs::write(holder_home.join("hang"), "").unwrap();
    let mut holder = spawn_child(&server, &dir.path().join("a"), &holder_home);
    // Wait until the holder's compiler runs: it holds the cluster lock.
    let deadline = Instant::now() + Duration::from_secs(30);
    let lock_pid = loop {
        if let Ok(p) = std::fs::read_to_string(holder_home.join("hang.pid")) {
            if let Ok(p) = p.trim().parse::<i32>() {
                break p;
            }
        }
        assert!(Instant::now() < deadline, "the holder never compiled");
        std::thread::sleep(Duration::from_millis(20));
    };
    let locks: Vec<String> = redis::cmd("KEYS")
        .arg("hipjit:*:l:*")
        .query(&mut server.redis())
        .unwrap();
    assert_eq!(locks.len(), 1, "the holder's lock: {locks:?}");
    // SAFETY: kill(2) on processes this test started: the child, then its fixture compiler.
    unsafe {
        libc::kill(holder.id() as i32, libc::SIGKILL);
        libc::kill(lock_pid, libc::SIGKILL);
    }
    let _ = holder.wait();

    let home = home(dir.path());
    let started = Instant::now();
    let c = compile(
        &jit(&dir.path().join("b"), &home, Some(config(&server.url()))),
        SOURCE,
    );
    assert_eq!(c.origin(), Origin::Compiler);
    assert_eq!(common::compiles(&home), 1);
    assert!(
        c.cache_warnings().iter().all(|w| !w.contains("waited")),
        "it took the expired lock rather than waiting out: {:?}",
        c.cache_warnings()
    );
    // It compiled once the 2 s lock had expired, well before its 20 s wait ran out.
    assert!(started.elapsed() < Duration::from_secs(15));
}

#[test]
fn stats_count_each_tier() {
    let server = Server::start();
    let dir = tempfile::tempdir().unwrap();
    let home = home(dir.path());
    let a = jit(&dir.path().join("a"), &home, Some(config(&server.url())));
    compile(&a, SOURCE);
    assert_eq!(compile(&a, SOURCE).origin(), Origin::Memory);
    let s = a.stats();
    assert_eq!(
        (s.compiles, s.memory.hits, s.memory.misses),
        (1, 1, 1),
        "{s:?}"
    );
    assert_eq!(s.disk.map(|d| (d.hits, d.misses)), Some((0, 1)), "{s:?}");
    assert_eq!(s.remote.map(|r| (r.hits, r.misses)), Some((0, 1)), "{s:?}");
    assert!(s.compile_time > Duration::ZERO);

    let b = jit(&dir.path().join("b"), &home, Some(config(&server.url())));
    assert_eq!(compile(&b, SOURCE).origin(), Origin::Remote);
    assert!(
        b.compile(SOURCE, &CompileOptions::default()).is_err(),
        "no target"
    );
    let s = b.stats();
    assert_eq!((s.compiles, s.failures), (0, 1), "{s:?}");
    assert_eq!(s.disk.map(|d| (d.hits, d.misses)), Some((0, 1)), "{s:?}");
    let remote = s.remote.unwrap();
    assert_eq!((remote.hits, remote.misses), (1, 0), "{s:?}");
    assert!(remote.time > Duration::ZERO);
    assert!(jit(&dir.path().join("c"), &home, None)
        .stats()
        .remote
        .is_none());
}

#[cfg(feature = "cli")]
#[test]
fn hipjit_cache_stats_reports_the_remote_tier_without_its_password() {
    let server = Server::start();
    let dir = tempfile::tempdir().unwrap();
    let home = home(dir.path());
    compile(
        &jit(&dir.path().join("a"), &home, Some(config(&server.url()))),
        SOURCE,
    );
    let stats_keyed = |url: &str, key: &[u8]| {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_hipjit"));
        cmd.args(["cache", "stats", "--json"])
            .env("HIPJIT_CACHE_DIR", dir.path().join("a"))
            .env("HIPJIT_REMOTE_CACHE", url)
            .env_remove("HIPJIT_REMOTE_CACHE_KEY");
        if !key.is_empty() {
            cmd.env("HIPJIT_REMOTE_CACHE_KEY", std::str::from_utf8(key).unwrap());
        }
        let out = cmd.output().unwrap();
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        assert!(
            out.status.success(),
            "{text}{}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(!text.contains("pw-secret"), "the password shows: {text}");
        let v: serde_json::Value = serde_json::from_str(&text).unwrap();
        v["remote"].clone()
    };
    let stats = |url: &str| stats_keyed(url, b"");
    let up = stats(&server.url());
    assert_eq!(up["signed"], false, "{up}");
    assert!(up["key_id"].is_null(), "{up}");
    // Under a key: its id, to compare nodes' keys without showing them.
    let keyed = stats_keyed(&server.url(), KEY);
    assert_eq!(keyed["key_id"], signing::key_id(KEY), "{keyed}");
    assert!(!keyed
        .to_string()
        .contains(std::str::from_utf8(KEY).unwrap()));
    assert_eq!(up["reachable"], true, "{up}");
    assert_eq!(
        up["keys"], 3,
        "an entry, its manifests and their recency: {up}"
    );
    assert_eq!(up["policy"], "noeviction", "{up}");
    assert_eq!(
        up["version"], "7.0.15",
        "Debian bookworm's redis-server: {up}"
    );
    let down = stats(&format!("redis://u:pw-secret@127.0.0.1:{}/0", free_port()));
    assert_eq!(down["reachable"], false, "{down}");
    assert!(down["url"].as_str().unwrap().contains("u:***@"), "{down}");
}

/// The warnings of `c` that mention `what`.
/// How many of `c`'s warnings say it waited out a compile lock.
fn waited(c: &Compiled) -> usize {
    c.cache_warnings()
        .iter()
        .filter(|w| w.starts_with("waited "))
        .count()
}

fn warnings_about(c: &Compiled, what: &str) -> usize {
    c.cache_warnings()
        .iter()
        .filter(|w| w.contains(what))
        .count()
}

#[test]
fn a_server_refusing_eval_serves_hits_without_the_lock_and_says_so_once() {
    // Two ways a server refuses scripts: the commands renamed away, and an ACL user without
    // the scripting category.
    let renamed = Server::start_with(&[
        "--rename-command",
        "EVAL",
        "",
        "--rename-command",
        "EVALSHA",
        "",
    ]);
    let acl = Server::start();
    redis::cmd("ACL")
        .arg(&[
            "SETUSER",
            "node",
            "on",
            ">node-pw",
            "~*",
            "+@all",
            "-@scripting",
        ])
        .query::<()>(&mut acl.redis())
        .unwrap();
    let acl_url = format!("redis://node:node-pw@127.0.0.1:{}/0", acl.port);
    for (server, url) in [(&renamed, renamed.url()), (&acl, acl_url)] {
        let dir = tempfile::tempdir().unwrap();
        let home = home(dir.path());
        let a = jit(&dir.path().join("a"), &home, Some(config(&url)));
        let first = compile(&a, SOURCE);
        assert_eq!(first.origin(), Origin::Compiler);
        assert_eq!(
            warnings_about(&first, "refuses EVAL"),
            1,
            "{url}: {:?}",
            first.cache_warnings()
        );
        assert!(
            get(server, &entry_name(&first)).is_some(),
            "{url}: not stored"
        );
        // Said once per tier: the next compile on the same Jit is silent about it.
        let other = compile(&a, &SOURCE.replace("= 1", "= 2"));
        assert_eq!(other.origin(), Origin::Compiler);
        assert_eq!(
            warnings_about(&other, "EVAL"),
            0,
            "{:?}",
            other.cache_warnings()
        );
        // No lock key was left behind, and another node still hits.
        let locks: Vec<String> = redis::cmd("KEYS")
            .arg("hipjit:*:l:*")
            .query(&mut server.redis())
            .unwrap();
        assert!(locks.is_empty(), "{url}: a lock was left: {locks:?}");
        let b = jit(&dir.path().join("b"), &home, Some(config(&url)));
        let hit = compile(&b, SOURCE);
        assert_eq!(hit.origin(), Origin::Remote, "{url}");
        assert_eq!(common::compiles(&home), 2);

        // A bad entry cannot be removed without a script: it is never served, is reported
        // (with a warning saying it was left in place for now), and this node's store replaces
        // it (`SET` without `NX`), so that the next node hits again.
        let name = entry_name(&first);
        let mut bad = get(server, &name).unwrap();
        let last = bad.len() - 100;
        bad[last] ^= 0x55;
        set(server, &name, &bad);
        let c = jit(&dir.path().join("c"), &home, Some(config(&url)));
        let refused = compile(&c, SOURCE);
        assert_eq!(
            refused.origin(),
            Origin::Compiler,
            "{url}: the bad entry was served"
        );
        let reported = refused
            .bad_entries()
            .iter()
            .find(|b| b.path.to_string_lossy().ends_with(&name))
            .unwrap_or_else(|| panic!("not reported: {:?}", refused.bad_entries()));
        assert!(!reported.writable_root, "{reported:?}");
        assert_eq!(
            warnings_about(&refused, "left in the server"),
            1,
            "{:?}",
            refused.cache_warnings()
        );
        assert_eq!(c.stats().remote.unwrap().refused, 1);
        let now = get(server, &name).unwrap();
        assert_ne!(now, bad, "{url}: the bad entry was not replaced");
        let payload = signing::open(None, name.as_bytes(), &now).unwrap();
        hipjit::cache::disk::Entry::from_bytes(payload.to_vec(), Path::new(&name), None)
            .unwrap_or_else(|e| panic!("{url}: the replacement is bad: {e}"));
        let d = jit(&dir.path().join("d"), &home, Some(config(&url)));
        assert_eq!(compile(&d, SOURCE).origin(), Origin::Remote, "{url}");
        assert_eq!(common::compiles(&home), 3);
    }
}

#[test]
fn values_of_another_key_are_refused_with_a_warning_and_counted_and_left() {
    let server = Server::start();
    let dir = tempfile::tempdir().unwrap();
    let home = home(dir.path());
    let keyed = |key: &[u8]| config(&server.url()).with_signing_key(key).unwrap();
    let first = compile(&jit(&dir.path().join("a"), &home, Some(keyed(KEY))), SOURCE);
    assert_eq!(first.origin(), Origin::Compiler);

    // A node with another key: the first node's manifest is refused, said with what to check,
    // and left; the node compiles.
    let other_key: &[u8] = b"another node's key, 32 bytes....";
    let b = jit(&dir.path().join("b"), &home, Some(keyed(other_key)));
    let second = compile(&b, SOURCE);
    assert_eq!(
        second.origin(),
        Origin::Compiler,
        "a value signed with another key was served"
    );
    assert_eq!(second.key(), first.key());
    assert_eq!(common::compiles(&home), 2);
    let warned: Vec<&String> = second
        .cache_warnings()
        .iter()
        .filter(|w| w.contains("signed with another key"))
        .collect();
    assert_eq!(warned.len(), 1, "{:?}", second.cache_warnings());
    assert!(
        warned[0].contains("HIPJIT_REMOTE_CACHE_KEY") && warned[0].contains("left in the server"),
        "{}",
        warned[0]
    );
    // It names the value refused (the header manifest) on its server.
    let server_key = format!("{}#hipjit:{CACHE_FORMAT_VERSION}:m:", server.url());
    assert!(warned[0].contains(&server_key), "{}", warned[0]);
    assert!(b.stats().remote.unwrap().refused >= 1);
    // The code is this node's own compile of the same source.
    assert_eq!(second.kernels()[0].name, first.kernels()[0].name);
    assert_eq!(
        second.code_objects()[0].elf(),
        first.code_objects()[0].elf()
    );
    assert!(get(&server, &signed_entry_name(&first, KEY)).is_some());

    // Said once per value in this process, counted every time.
    let b2 = jit(&dir.path().join("b2"), &home, Some(keyed(other_key)));
    let third = compile(&b2, SOURCE);
    assert_eq!(third.origin(), Origin::Remote);
    assert_eq!(
        warnings_about(&third, "signed with another key"),
        0,
        "once per value: {:?}",
        third.cache_warnings()
    );
    assert!(b2.stats().remote.unwrap().refused <= 1);

    // An unsigned manifest under signing names the variable too, and is left for the nodes
    // without a key, which still hit.
    let source = SOURCE.replace("= 1", "= 3");
    let unsigned = compile(
        &jit(&dir.path().join("u"), &home, Some(config(&server.url()))),
        &source,
    );
    assert_eq!(unsigned.origin(), Origin::Compiler);
    let signed = compile(
        &jit(&dir.path().join("s"), &home, Some(keyed(KEY))),
        &source,
    );
    assert_eq!(signed.origin(), Origin::Compiler);
    let w: Vec<&String> = signed
        .cache_warnings()
        .iter()
        .filter(|w| w.contains("unsigned"))
        .collect();
    assert_eq!(w.len(), 1, "{:?}", signed.cache_warnings());
    assert!(w[0].contains("HIPJIT_REMOTE_CACHE_KEY"), "{}", w[0]);
    let unsigned_again = compile(
        &jit(&dir.path().join("u2"), &home, Some(config(&server.url()))),
        &source,
    );
    assert_eq!(unsigned_again.origin(), Origin::Remote);
}

/// A full server (`maxmemory` reached under the default `noeviction` policy) refuses writes
/// with `OOM`: a warning saying so, and the server still serves hits. Before, the refusal of a
/// pipeline of writes read as an outage and the tier was given up for 30 s.
#[test]
fn a_full_server_refuses_writes_with_a_warning_and_still_serves_hits() {
    let server = Server::start();
    let dir = tempfile::tempdir().unwrap();
    let home = home(dir.path());
    let first = compile(
        &jit(&dir.path().join("a"), &home, Some(config(&server.url()))),
        SOURCE,
    );
    assert_eq!(first.origin(), Origin::Compiler);
    for (k, v) in [("maxmemory-policy", "noeviction"), ("maxmemory", "1")] {
        redis::cmd("CONFIG")
            .arg("SET")
            .arg(k)
            .arg(v)
            .query::<()>(&mut server.redis())
            .unwrap();
    }
    let b = jit(&dir.path().join("b"), &home, Some(config(&server.url())));
    // Another source: compiled, its publication refused by the full server.
    let other = compile(&b, &SOURCE.replace("= 1", "= 7"));
    assert_eq!(other.origin(), Origin::Compiler);
    assert!(
        warnings_about(&other, "out of memory") + warnings_about(&other, "OOM") >= 1,
        "{:?}",
        other.cache_warnings()
    );
    assert_eq!(
        warnings_about(&other, "unreachable"),
        0,
        "{:?}",
        other.cache_warnings()
    );
    // The same Jit still reads the server: the first source is a remote hit.
    let again = compile(&b, SOURCE);
    assert_eq!(
        again.origin(),
        Origin::Remote,
        "{:?}",
        again.cache_warnings()
    );
}

/// `total_connections_received` of a server that wants the password `pw`.
fn connections_received(port: u16, pw: &str) -> u64 {
    let mut c = redis::Client::open(format!("redis://:{pw}@127.0.0.1:{port}/0"))
        .unwrap()
        .get_connection_with_timeout(Duration::from_secs(1))
        .unwrap();
    let info: String = redis::cmd("INFO").arg("stats").query(&mut c).unwrap();
    info.lines()
        .find_map(|l| l.strip_prefix("total_connections_received:"))
        .unwrap()
        .trim()
        .parse()
        .unwrap()
}

/// A TCP peer that is no Redis server: it answers every connection with an HTTP error and
/// counts the connections it accepted.
fn not_redis() -> (u16, std::sync::Arc<std::sync::atomic::AtomicUsize>) {
    use std::io::Write;
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let accepted = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let count = accepted.clone();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            count.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            let _ = stream.write_all(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n");
        }
    });
    (port, accepted)
}

/// Each way a server can refuse the tier is named in its one warning, with the URL (password
/// masked) and what to check, never as "unreachable"; none of them is retried every
/// `retry_after` (each turns the tier off for the `Jit`: no further connection is made).
/// Before, all read as "unreachable" with the client library's words, and were retried.
#[test]
fn remote_failures_are_classified_named_and_not_retried() {
    let server = Server::start_with(&["--requirepass", "right-pw"]);
    let (peer, peer_accepted) = not_redis();
    let p = server.port;
    let dir = tempfile::tempdir().unwrap();
    let home = home(dir.path());
    let cases = [
        (
            format!("redis://node:wrong-pw@127.0.0.1:{p}/0"),
            "authentication refused",
            "password",
        ),
        (
            format!("redis://127.0.0.1:{p}/0"),
            "authentication refused",
            "requirepass",
        ),
        (
            format!("redis://:wrong-pw@127.0.0.1:{p}/3"),
            "authentication refused",
            "password",
        ),
        (
            format!("redis://:right-pw@127.0.0.1:{p}/99"),
            "database refused",
            "`databases` setting",
        ),
        (
            format!("redis://127.0.0.1:{peer}/0"),
            "not a Redis server",
            "host and port",
        ),
    ];
    for (i, (url, class, check)) in cases.iter().enumerate() {
        let mut c = config(url);
        c.retry_after = Duration::from_millis(100);
        let jit = jit(&dir.path().join(format!("r{i}")), &home, Some(c));
        let first = compile_within(&jit, &format!("{SOURCE}// {i}\n"), Duration::from_secs(10));
        assert_eq!(first.origin(), Origin::Compiler, "{url}");
        assert_eq!(
            first.cache_warnings().len(),
            1,
            "{url}: {:?}",
            first.cache_warnings()
        );
        let w = &first.cache_warnings()[0];
        assert!(w.contains(class) && w.contains(check), "{url}: {w}");
        assert!(!w.contains("unreachable"), "{url}: {w}");
        assert!(!w.contains("wrong-pw") && !w.contains("right-pw"), "{w}");
        let shown = hipjit::cache::remote::RemoteConfig::new(url.clone())
            .unwrap()
            .redacted_url();
        assert!(w.contains(&shown), "{url}: {w}");
        // Past retry_after: no connection is tried again, and nothing more is said.
        std::thread::sleep(Duration::from_millis(200));
        let before = (
            connections_received(p, "right-pw"),
            peer_accepted.load(std::sync::atomic::Ordering::SeqCst),
        );
        let again = compile_within(
            &jit,
            &format!("{SOURCE}// {i} again\n"),
            Duration::from_secs(10),
        );
        assert!(
            again.cache_warnings().is_empty(),
            "{url}: {:?}",
            again.cache_warnings()
        );
        let after = (
            connections_received(p, "right-pw"),
            peer_accepted.load(std::sync::atomic::Ordering::SeqCst),
        );
        assert_eq!(
            after,
            (before.0 + 1, before.1),
            "{url}: connected again (the +1 is this test's own INFO)"
        );
    }
}

/// `rediss://` to a server without TLS: "TLS handshake failed", saying to use `redis://`.
/// A plain redis-server waits for more of what it takes for a command, so the handshake
/// either fails on its error reply or times out; a plain TCP connection then tells the two
/// apart from a server that is down.
#[test]
fn tls_to_a_server_without_tls_is_named_a_failed_handshake() {
    let server = Server::start();
    let dir = tempfile::tempdir().unwrap();
    let home = home(dir.path());
    let url = format!("rediss://u:pw-secret@127.0.0.1:{}/0", server.port);
    let jit = jit(&dir.path().join("a"), &home, Some(config(&url)));
    let c = compile_within(&jit, SOURCE, Duration::from_secs(10));
    assert_eq!(c.origin(), Origin::Compiler);
    assert_eq!(c.cache_warnings().len(), 1, "{:?}", c.cache_warnings());
    let w = &c.cache_warnings()[0];
    assert!(
        w.contains("TLS handshake failed") && w.contains("redis://"),
        "{w}"
    );
    assert!(
        w.contains("rediss://u:***@127.0.0.1") && !w.contains("pw-secret"),
        "{w}"
    );
}

/// `hipjit` with a database the server refuses: exit 0 like any remote failure (the tier never
/// fails a command), and the same clear words in `compile`'s warning and in
/// `cache stats --json` (`"failure": "database refused"`).
#[cfg(feature = "cli")]
#[test]
fn hipjit_names_a_refused_database_in_compile_and_stats() {
    let server = Server::start();
    let dir = tempfile::tempdir().unwrap();
    let url = format!("redis://127.0.0.1:{}/99", server.port);
    let source = dir.path().join("k.hip");
    std::fs::write(&source, SOURCE).unwrap();
    let hipjit = |args: &[&str]| {
        Command::new(env!("CARGO_BIN_EXE_hipjit"))
            .args(args)
            .env("HIPJIT_CACHE_DIR", dir.path().join("cache"))
            .env("HIPJIT_REMOTE_CACHE", &url)
            .env_remove("HIPJIT_REMOTE_CACHE_KEY")
            .env("HIPJIT_HIPCC", common::fake_hipcc())
            .env("HIPJIT_COMPILER", "hipcc")
            .env("HOME", home(dir.path()))
            .output()
            .unwrap()
    };
    let out = hipjit(&["compile", "--arch", "gfx90a", source.to_str().unwrap()]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(
        stderr.contains("database refused") && stderr.contains(&url),
        "{stderr}"
    );
    let out = hipjit(&["cache", "stats", "--json"]);
    assert_eq!(out.status.code(), Some(0));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["remote"]["reachable"], false, "{v}");
    assert_eq!(v["remote"]["failure"], "database refused", "{v}");
    assert!(
        v["remote"]["error"]
            .as_str()
            .unwrap()
            .contains("DB index is out of range"),
        "{v}"
    );
}

// ---- values planted by whoever can write the database ---------------------------------------

/// A value planted under the cluster lock's name is waited for only when it is a lock hipjit
/// took: no token, an unsigned token under a signing key, a token with no expiry (replayed), or
/// one expiring later than it was taken for, is removed at once and named in a warning. Before,
/// each of them held every miss of the source for the whole wait (the compile timeout: 300 s).
#[test]
fn a_planted_cluster_lock_is_removed_not_waited_for() {
    let server = Server::start();
    let dir = tempfile::tempdir().unwrap();
    let home = home(dir.path());
    let first = compile(
        &jit(&dir.path().join("a"), &home, Some(config(&server.url()))),
        SOURCE,
    );
    let direct = direct_key(&server);
    let lock = |key: Option<&[u8]>| match key {
        None => format!("hipjit:{CACHE_FORMAT_VERSION}:l:{direct}"),
        Some(k) => format!(
            "hipjit:{CACHE_FORMAT_VERSION}:k{}:l:{direct}",
            signing::key_id(k)
        ),
    };
    let nonce = "00112233445566778899aabbccddeeff";
    let (plain, keyed) = (lock(None), lock(Some(KEY)));
    // The signing key of the node, the value planted, its expiry (ms), why it is refused.
    type Case<'a> = (Option<&'a [u8]>, Vec<u8>, Option<u64>, &'a str);
    let cases: [Case; 5] = [
        (None, b"x".to_vec(), None, "not a hipjit lock token"),
        (
            Some(KEY),
            b"x".to_vec(),
            Some(600_000),
            "not a hipjit lock token",
        ),
        (
            Some(KEY),
            signing::lock_token(None, keyed.as_bytes(), nonce, now_ms(), 2000).into_bytes(),
            Some(600_000),
            "not signed with this node's key",
        ),
        (
            None,
            signing::lock_token(None, plain.as_bytes(), nonce, now_ms(), 2000).into_bytes(),
            None,
            "no expiry",
        ),
        (
            Some(KEY),
            signing::lock_token(Some(KEY), keyed.as_bytes(), nonce, now_ms(), 2000).into_bytes(),
            Some(600_000),
            "later than the 2000 ms",
        ),
    ];
    for (i, (key, value, px, why)) in cases.into_iter().enumerate() {
        let name = lock(key);
        // A miss: this scope holds no entry of the source.
        redis::cmd("DEL")
            .arg(entry_name(&first))
            .arg(signed_entry_name(&first, KEY))
            .query::<()>(&mut server.redis())
            .unwrap();
        let mut plant = redis::cmd("SET");
        plant.arg(&name).arg(&value);
        if let Some(px) = px {
            plant.arg("PX").arg(px);
        }
        plant.query::<()>(&mut server.redis()).unwrap();
        let remote = match key {
            Some(k) => config(&server.url()).with_signing_key(k).unwrap(),
            None => config(&server.url()),
        };
        // Waiting out the lock would take 4 s and say "waited".
        let node = jit_waiting(
            &dir.path().join(format!("b{i}")),
            &home,
            Some(remote),
            Duration::from_secs(4),
        );
        let started = Instant::now();
        let c = compile(&node, SOURCE);
        let took = started.elapsed();
        assert_eq!(c.origin(), Origin::Compiler, "case {i}");
        assert_eq!(waited(&c), 0, "case {i} ({why}): {:?}", c.cache_warnings());
        let ignored: Vec<&String> = c
            .cache_warnings()
            .iter()
            .filter(|w| w.contains("ignored the cluster compile lock"))
            .collect();
        assert_eq!(ignored.len(), 1, "case {i}: {:?}", c.cache_warnings());
        assert!(
            ignored[0].contains(why) && ignored[0].contains(&name),
            "case {i}: {}",
            ignored[0]
        );
        // Removed, then taken and released by the compile.
        assert_eq!(get(&server, &name), None, "case {i}");
        assert!(took < Duration::from_secs(3), "case {i}: {took:?}");
    }
    assert_eq!(common::compiles(&home), 6);
}

/// A lock hipjit took, held by a holder that keeps renewing it past the wait (a stuck
/// compile), is waited for once: the wait that runs out removes it and remembers its token, so
/// that the same token met again (its holder setting it again, or a replay) costs no second
/// wait in this process. Before, every miss waited the whole wait again.
#[test]
fn a_lock_waited_out_is_not_waited_for_again() {
    let server = Server::start();
    let dir = tempfile::tempdir().unwrap();
    let home = home(dir.path());
    let first = compile(
        &jit(&dir.path().join("a"), &home, Some(config(&server.url()))),
        SOURCE,
    );
    let direct = direct_key(&server);
    let name = format!("hipjit:{CACHE_FORMAT_VERSION}:l:{direct}");
    let token = signing::lock_token(
        None,
        name.as_bytes(),
        "ffeeddccbbaa99887766554433221100",
        now_ms(),
        2000,
    );
    // The stuck holder: renews its lock every 100 ms while it holds it.
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    set_px(&server, &name, &token, 2000);
    let holder = {
        let (stop, mut conn, name, token) =
            (stop.clone(), server.redis(), name.clone(), token.clone());
        std::thread::spawn(move || {
            let renew = redis::Script::new(
                "if redis.call('GET', KEYS[1]) == ARGV[1] then \
                 return redis.call('PEXPIRE', KEYS[1], 2000) end return 0",
            );
            while !stop.load(std::sync::atomic::Ordering::SeqCst) {
                if renew
                    .key(&name)
                    .arg(&token)
                    .invoke::<i64>(&mut conn)
                    .unwrap()
                    == 0
                {
                    return false;
                }
                std::thread::sleep(Duration::from_millis(100));
            }
            true
        })
    };
    let wait = Duration::from_secs(1);
    let node = |n: &str| {
        redis::cmd("DEL")
            .arg(entry_name(&first))
            .query::<()>(&mut server.redis())
            .unwrap();
        jit_waiting(
            &dir.path().join(n),
            &home,
            Some(config(&server.url())),
            wait,
        )
    };
    let c = compile(&node("b"), SOURCE);
    assert_eq!(c.origin(), Origin::Compiler);
    assert_eq!(waited(&c), 1, "{:?}", c.cache_warnings());
    // The wait that ran out removed the lock: the holder's renewal finds it gone.
    let deadline = Instant::now() + Duration::from_secs(2);
    while !holder.is_finished() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    stop.store(true, std::sync::atomic::Ordering::SeqCst);
    let holder_kept_it = holder.join().unwrap();
    assert!(!holder_kept_it, "the lock waited out was left in place");

    // The same token again: not waited for.
    set_px(&server, &name, &token, 2000);
    let c = compile(&node("c"), SOURCE);
    assert_eq!(c.origin(), Origin::Compiler);
    assert_eq!(waited(&c), 0, "{:?}", c.cache_warnings());
    assert_eq!(
        warnings_about(&c, "for a whole wait"),
        1,
        "{:?}",
        c.cache_warnings()
    );
    assert_eq!(get(&server, &name), None);
}

/// Milliseconds since the Unix epoch, by this machine's clock.
fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64
}

/// Keeps the lock `name` holding `token` as its holder would: renews it to `px` ms every
/// 50 ms while it still holds it, until `stop` is set.
fn keep_alive(
    server: &Server,
    name: &str,
    token: &str,
    px: u64,
    stop: &std::sync::Arc<std::sync::atomic::AtomicBool>,
) -> std::thread::JoinHandle<()> {
    let (stop, mut conn, name, token) = (
        stop.clone(),
        server.redis(),
        name.to_string(),
        token.to_string(),
    );
    std::thread::spawn(move || {
        let renew = redis::Script::new(
            "if redis.call('GET', KEYS[1]) == ARGV[1] then \
             return redis.call('PEXPIRE', KEYS[1], ARGV[2]) end return 0",
        );
        while !stop.load(std::sync::atomic::Ordering::SeqCst) {
            if renew
                .key(&name)
                .arg(&token)
                .arg(px)
                .invoke::<i64>(&mut conn)
                .unwrap()
                == 0
            {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    })
}

/// A lock token no holder can still hold is removed at once, and the wait for one a holder
/// might still hold ends when its holder's compile timeout would: a signed token issued an
/// hour ago (seen once and replayed, kept alive as a holder would), an unsigned token claiming
/// a lifetime of 9e15 ms with that expiry (forged with the public constant), and a token
/// issued in the future, each under a wait of 20 s. Before, each held every miss of the source
/// for the whole wait (the compile timeout: 300 s), and a replayed token did so forever.
#[test]
fn a_replayed_or_overlong_lock_token_is_removed_and_bounds_the_wait() {
    use hipjit::cache::remote::lock::LOCK_CLOCK_SKEW;
    let server = Server::start();
    let dir = tempfile::tempdir().unwrap();
    let home = home(dir.path());
    let first = compile(
        &jit(&dir.path().join("a"), &home, Some(config(&server.url()))),
        SOURCE,
    );
    let direct = direct_key(&server);
    let lock = |key: Option<&[u8]>| match key {
        None => format!("hipjit:{CACHE_FORMAT_VERSION}:l:{direct}"),
        Some(k) => format!(
            "hipjit:{CACHE_FORMAT_VERSION}:k{}:l:{direct}",
            signing::key_id(k)
        ),
    };
    let nonce = "00112233445566778899aabbccddeeff";
    let (plain, keyed) = (lock(None), lock(Some(KEY)));
    let wait = Duration::from_secs(20);
    let skew = LOCK_CLOCK_SKEW.as_millis() as u64;
    let forever = 9_000_000_000_000_000;
    // The signing key of the node, the token planted, its expiry (ms, renewed to it), why it
    // is refused (None: waited for, until its holder's compile timeout ran out).
    type Case<'a> = (Option<&'a [u8]>, String, u64, Option<&'a str>);
    let cases: [Case; 4] = [
        (
            Some(KEY),
            signing::lock_token(
                Some(KEY),
                keyed.as_bytes(),
                nonce,
                now_ms() - 3_600_000,
                2000,
            ),
            2000,
            Some("issued longer ago than any holder holds the lock"),
        ),
        (
            None,
            signing::lock_token(None, plain.as_bytes(), nonce, now_ms(), forever),
            forever,
            Some("claims a lifetime of 9000000000000000 ms, longer than the 2000 ms"),
        ),
        (
            Some(KEY),
            signing::lock_token(Some(KEY), keyed.as_bytes(), nonce, now_ms() + 600_000, 2000),
            2000,
            Some("issued in the future"),
        ),
        // Within what a holder may hold, its compile timeout running out in about 1 s.
        (
            Some(KEY),
            signing::lock_token(
                Some(KEY),
                keyed.as_bytes(),
                nonce,
                now_ms() - (wait.as_millis() as u64 + skew - 1000),
                2000,
            ),
            2000,
            None,
        ),
    ];
    for (i, (key, token, px, why)) in cases.into_iter().enumerate() {
        let name = lock(key);
        // A miss: this scope holds no entry of the source.
        redis::cmd("DEL")
            .arg(entry_name(&first))
            .arg(signed_entry_name(&first, KEY))
            .query::<()>(&mut server.redis())
            .unwrap();
        set_px(&server, &name, &token, px);
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let holder = keep_alive(&server, &name, &token, px, &stop);
        let remote = match key {
            Some(k) => config(&server.url()).with_signing_key(k).unwrap(),
            None => config(&server.url()),
        };
        let node = jit_waiting(&dir.path().join(format!("b{i}")), &home, Some(remote), wait);
        let started = Instant::now();
        let c = compile(&node, SOURCE);
        let took = started.elapsed();
        stop.store(true, std::sync::atomic::Ordering::SeqCst);
        holder.join().unwrap();
        assert_eq!(c.origin(), Origin::Compiler, "case {i}");
        let ignored: Vec<&String> = c
            .cache_warnings()
            .iter()
            .filter(|w| w.contains("ignored the cluster compile lock"))
            .collect();
        match why {
            Some(why) => {
                assert_eq!(waited(&c), 0, "case {i} ({why}): {:?}", c.cache_warnings());
                assert_eq!(ignored.len(), 1, "case {i}: {:?}", c.cache_warnings());
                assert!(
                    ignored[0].contains(why) && ignored[0].contains(&name),
                    "case {i}: {}",
                    ignored[0]
                );
                assert!(took < Duration::from_secs(3), "case {i}: {took:?}");
            }
            None => {
                assert_eq!(waited(&c), 1, "case {i}: {:?}", c.cache_warnings());
                assert!(ignored.is_empty(), "case {i}: {ignored:?}");
                assert!(
                    took > Duration::from_millis(500) && took < Duration::from_secs(4),
                    "case {i}: {took:?}"
                );
            }
        }
        // Removed, then taken and released by the compile.
        assert_eq!(get(&server, &name), None, "case {i}");
    }
    assert_eq!(common::compiles(&home), 5);
}

fn set_px(server: &Server, name: &str, value: &str, px: u64) {
    redis::cmd("SET")
        .arg(name)
        .arg(value)
        .arg("PX")
        .arg(px)
        .query::<()>(&mut server.redis())
        .unwrap();
}

/// More header versions of one source than the server keeps manifests for
/// ([`MAX_MANIFESTS`]): a store removes the least recently matched, so every version among the
/// most recently matched hits on a fresh node, a version matched again outlives one stored
/// later, and a manifest neither stored nor matched within the lifetime goes at the next
/// store, whatever renews the hash. Before, a lookup tried the first 32 manifests by field
/// name and never looked past them (21 of 48 versions missed on every fresh node), and every
/// store renewed the whole hash.
#[test]
fn the_least_recently_matched_manifests_make_room() {
    use hipjit::cache::remote::MAX_MANIFESTS;
    let server = Server::start();
    let dir = tempfile::tempdir().unwrap();
    let home = home(dir.path());
    // Two versions more than are kept: the oldest two go.
    let total = MAX_MANIFESTS + 2;
    // Version i of the source's headers: `common.h` (naming version i) and `h<i>.h`, a
    // set of files of its own, so that only its own manifest leads to its entry. Each in a
    // directory listed once (the manifest records the listing of a header's directory), all
    // written before the first compile; `common.h` of its own size in each version (a rewrite
    // within one clock tick keeps the modification time).
    let inc = dir.path().join("inc");
    std::fs::create_dir(&inc).unwrap();
    for i in 0..total + 2 {
        std::fs::write(inc.join(format!("h{i}.h")), format!("#define H {i}\n")).unwrap();
    }
    let version = |i: usize| {
        std::fs::write(
            inc.join("common.h"),
            format!("#include \"h{i}.h\" // {}\n", "v".repeat(i + 1)),
        )
        .unwrap();
        let deps = format!(
            "{} {}",
            inc.join("common.h").display(),
            inc.join(format!("h{i}.h")).display()
        );
        std::fs::write(home.join("deps"), deps).unwrap();
    };
    // Nodes without a disk cache (the remote tier alone: quicker), whose in-process cache
    // is cleared before each compile (it does not look at headers: Jit::clear_memory).
    let node = || {
        jit_at(
            CacheLocation::Disabled,
            &home,
            Some(config(&server.url())),
            Duration::from_secs(20),
        )
    };
    let writer = node();
    let write = |writer: &Jit| {
        writer.clear_memory();
        compile(writer, SOURCE).origin()
    };
    for i in 0..total {
        version(i);
        assert_eq!(write(&writer), Origin::Compiler, "v{i}");
    }
    assert_eq!(manifests(&server).len(), MAX_MANIFESTS);
    // Nodes that never saw these versions: each version a remote hit, or a miss.
    let look = |node: &Jit, i: usize| {
        version(i);
        node.clear_memory();
        compile(node, SOURCE).origin()
    };
    let b = node();
    let missed: Vec<usize> = (total - MAX_MANIFESTS..total)
        .filter(|&i| look(&b, i) != Origin::Remote)
        .collect();
    assert!(missed.is_empty(), "versions missed remotely: {missed:?}");
    assert_eq!(common::compiles(&home), total);

    // Matched in the order above, the oldest kept is the first; matched again, it outlives
    // the second when a new version is stored.
    let (first, second) = (total - MAX_MANIFESTS, total - MAX_MANIFESTS + 1);
    assert_eq!(look(&node(), first), Origin::Remote);
    version(total);
    assert_eq!(write(&writer), Origin::Compiler);
    let d = node();
    assert_eq!(look(&d, first), Origin::Remote);
    assert_eq!(look(&d, second), Origin::Compiler, "not removed");

    // Manifests last matched longer ago than the lifetime go at the next store: both of two
    // (the bound alone would remove one to make room for the new one).
    let direct = direct_key(&server);
    let recency = format!("hipjit:{CACHE_FORMAT_VERSION}:r:{direct}");
    let before = manifests(&server);
    assert_eq!(before.len(), MAX_MANIFESTS);
    let stale = [&before[0].0, &before[1].0];
    let long_ago = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64
        - 31 * 24 * 3600 * 1000;
    for field in stale {
        redis::cmd("ZADD")
            .arg(&recency)
            .arg(long_ago)
            .arg(field)
            .query::<()>(&mut server.redis())
            .unwrap();
    }
    version(total + 1);
    assert_eq!(write(&writer), Origin::Compiler);
    let after = manifests(&server);
    assert_eq!(after.len(), MAX_MANIFESTS - 1);
    assert!(
        after.iter().all(|(f, _)| !stale.contains(&f)),
        "a manifest unmatched for longer than the lifetime was kept"
    );
}

/// A value under an entry's name that no lookup should read (longer than
/// `RemoteConfig::max_value_bytes`, or of another Redis type) is refused unread: a miss, not a
/// failure of the tier, and it is removed (or, where the server refuses `EVAL`, replaced by the
/// store that follows), so the next node hits. Before, a 300 MB value cost every lookup its
/// transfer and, past the operation's timeout, took the tier off for 30 s, and it could never
/// be replaced (`SET NX`).
#[test]
fn an_oversized_or_foreign_value_under_an_entry_name_is_refused_unread_and_replaced() {
    let plain = Server::start();
    let no_eval = Server::start_with(&[
        "--rename-command",
        "EVAL",
        "",
        "--rename-command",
        "EVALSHA",
        "",
    ]);
    let bound = hipjit::cache::remote::DEFAULT_MAX_VALUE_BYTES;
    for server in [&plain, &no_eval] {
        for (plant, why) in [
            ("SETRANGE", "more than the limit"),
            ("HSET", "not a string"),
        ] {
            let dir = tempfile::tempdir().unwrap();
            let home = home(dir.path());
            let url = server.url();
            redis::cmd("FLUSHALL")
                .query::<()>(&mut server.redis())
                .unwrap();
            let first = compile(
                &jit(&dir.path().join("a"), &home, Some(config(&url))),
                SOURCE,
            );
            let name = entry_name(&first);
            redis::cmd("DEL")
                .arg(&name)
                .query::<()>(&mut server.redis())
                .unwrap();
            // A string one byte over the bound (written in place, not sent), or a hash.
            let mut cmd = redis::cmd(plant);
            match plant {
                "SETRANGE" => cmd.arg(&name).arg(bound).arg("x"),
                _ => cmd.arg(&name).arg("f").arg("v"),
            };
            cmd.query::<()>(&mut server.redis()).unwrap();
            let sent_before = net_output_bytes(server);

            let b = jit(&dir.path().join("b"), &home, Some(config(&url)));
            let c = compile(&b, SOURCE);
            assert_eq!(c.origin(), Origin::Compiler, "{url} {plant}");
            let sent = net_output_bytes(server) - sent_before;
            assert!(sent < 1 << 20, "{url} {plant}: {sent} bytes sent");
            let reported = c
                .bad_entries()
                .iter()
                .find(|e| e.path.to_string_lossy().ends_with(&name))
                .unwrap_or_else(|| panic!("{url} {plant}: not reported: {:?}", c.bad_entries()));
            assert!(reported.reason.contains(why), "{}", reported.reason);
            // A miss, not a failure: no outage, no refused operation.
            assert!(
                c.cache_warnings()
                    .iter()
                    .all(|w| !w.contains("unreachable") && !w.contains("refused an operation")),
                "{url} {plant}: {:?}",
                c.cache_warnings()
            );
            // Replaced by this compile's store: the next node hits.
            let now = get(server, &name).expect("not replaced");
            let payload = signing::open(None, name.as_bytes(), &now).unwrap();
            hipjit::cache::disk::Entry::from_bytes(payload.to_vec(), Path::new(&name), None)
                .unwrap_or_else(|e| panic!("{url} {plant}: the replacement is bad: {e}"));
            let d = jit(&dir.path().join("d"), &home, Some(config(&url)));
            assert_eq!(
                compile(&d, SOURCE).origin(),
                Origin::Remote,
                "{url} {plant}"
            );
        }
    }
}

/// The bytes `server` has sent to its clients (`INFO stats`).
fn net_output_bytes(server: &Server) -> u64 {
    let info: String = redis::cmd("INFO")
        .arg("stats")
        .query(&mut server.redis())
        .unwrap();
    info.lines()
        .find_map(|l| l.strip_prefix("total_net_output_bytes:"))
        .and_then(|v| v.trim().parse().ok())
        .expect("total_net_output_bytes in INFO stats")
}

/// Another node's header manifest whose stats match a header here (a node booted alike, or a
/// forger), with the hash of other bytes: its stats are not trusted, the header is hashed, and
/// the code compiled here for the header's bytes here is what is served, not the entry of the
/// other bytes. The "compiler" copies one of two code objects by the header's value.
#[test]
fn another_nodes_manifest_is_hashed_even_where_its_stats_match_the_files_here() {
    use hipjit::cache::manifest::Manifest;
    let server = Server::start();
    let dir = tempfile::tempdir().unwrap();
    let home = home(dir.path());
    let inc = dir.path().join("inc");
    std::fs::create_dir(&inc).unwrap();
    let header = inc.join("x.h");
    std::fs::write(&header, "#define VALUE 111\n").unwrap();
    let other = common::code_object("kernels-gfx90a.hsaco");
    std::fs::write(
        home.join("act.sh"),
        format!(
            "if grep -q 'VALUE 222' {h}; then cp {b} out.hsaco; else cp {a} out.hsaco; fi\n\
             for a; do case \"$a\" in *.hip) src=\"$a\";; esac; done\n\
             echo \"out.hsaco: $src {h}\" > deps.d\n",
            h = header.display(),
            a = common::code_object("single-gfx90a.hsaco").display(),
            b = other.display(),
        ),
    )
    .unwrap();
    let o = CompileOptions {
        include_dirs: vec![inc.clone()],
        ..opts()
    };
    let source = "#include \"x.h\"\nextern \"C\" __global__ void k(int* x) { x[0] = VALUE; }\n";
    let node = |root: &str| jit(&dir.path().join(root), &home, Some(config(&server.url())));
    let first = node("a").compile(source, &o).unwrap();
    assert_eq!(first.origin(), Origin::Compiler);

    // The header rewritten here (the same size); the stored manifest forged to give it the
    // header's stat now, mount identity included, and the first bytes' hash.
    std::fs::write(&header, "#define VALUE 222\n").unwrap();
    let names: Vec<String> = redis::cmd("KEYS")
        .arg("hipjit:*:m:*")
        .query(&mut server.redis())
        .unwrap();
    assert_eq!(names.len(), 1, "{names:?}");
    let (_, value) = manifests(&server).remove(0);
    let payload = signing::open(None, names[0].as_bytes(), &value).unwrap();
    let mut forged = Manifest::from_bytes(payload).unwrap();
    let now = hipjit::compiler::identity::FileStat::read(&header).unwrap();
    let record = forged
        .files
        .iter_mut()
        .find(|f| f.name.ends_with(b"x.h"))
        .expect("the header is in the manifest");
    record.stat = now;
    let forged = signing::seal(None, names[0].as_bytes(), &forged.to_bytes());
    redis::pipe()
        .cmd("DEL")
        .arg(&names[0])
        .ignore()
        .cmd("HSET")
        .arg(&names[0])
        .arg("forged")
        .arg(&forged)
        .ignore()
        .query::<()>(&mut server.redis())
        .unwrap();

    let second = node("b").compile(source, &o).unwrap();
    let expected = std::fs::read(&other).unwrap();
    assert_eq!(
        second.origin(),
        Origin::Compiler,
        "another node's stats were trusted: the entry of the first bytes was served"
    );
    assert_eq!(second.code_objects()[0].elf(), &expected[..]);
    assert_ne!(second.key(), first.key());
}

/// A string under a source's manifests name (planted, or left by a broken writer) is a miss,
/// and the next publish deletes it in its script before writing the hash: it cannot fail every
/// later store of that source (`WRONGTYPE`) and end the tier for it.
#[test]
fn a_string_under_the_manifests_name_is_replaced_by_the_next_publish() {
    let server = Server::start();
    let dir = tempfile::tempdir().unwrap();
    let home = home(dir.path());
    compile(
        &jit(&dir.path().join("a"), &home, Some(config(&server.url()))),
        SOURCE,
    );
    let name = format!("hipjit:{CACHE_FORMAT_VERSION}:m:{}", direct_key(&server));
    set(&server, &name, b"not a manifest hash");
    let b = compile(
        &jit(&dir.path().join("b"), &home, Some(config(&server.url()))),
        SOURCE,
    );
    assert_eq!(b.origin(), Origin::Compiler);
    assert_eq!(
        manifests(&server).len(),
        1,
        "the manifest was not published again"
    );
    let c = compile(
        &jit(&dir.path().join("c"), &home, Some(config(&server.url()))),
        SOURCE,
    );
    assert_eq!(c.origin(), Origin::Remote, "{:?}", c.cache_warnings());
    assert_eq!(common::compiles(&home), 2);
}
