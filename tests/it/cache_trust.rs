//! The disk cache under stress from its surroundings: a lock held by a stopped process, roots
//! that cannot be roots, publishing that fails, things planted at entry paths, links in the
//! layout, and a root shared by two real users. The "compiler" is tests/fixtures/
//! fake-hipcc-act.sh copying a real code object (tests/data/code-objects), so each compile is
//! quick; every wait has a deadline so that a hang fails the test.

use crate::common;
use common::fake_hipcc;

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use hipjit::cache::DiskCache;
use hipjit::compiler::CompileOptions;
use hipjit::jit::{CacheLocation, Compiled, Jit, JitOptions};
use hipjit::target_id::TargetId;

/// A `$HOME` whose act.sh makes the fake hipcc "compile" by copying a real gfx90a code object
/// (copied into the home, so that another user can read it wherever the checkout lies).
fn home(dir: &Path) -> PathBuf {
    let home = dir.join("home");
    std::fs::create_dir_all(&home).unwrap();
    std::fs::set_permissions(&home, std::fs::Permissions::from_mode(0o755)).unwrap();
    let code_object_copy = home.join("single-gfx90a.hsaco");
    std::fs::copy(
        common::code_object("single-gfx90a.hsaco"),
        &code_object_copy,
    )
    .unwrap();
    std::fs::set_permissions(&code_object_copy, std::fs::Permissions::from_mode(0o644)).unwrap();
    std::fs::write(
        home.join("act.sh"),
        // The dependency list hipjit requires names the source only (its last argument before
        // `-o out.hsaco`): no header is read.
        format!(
            "cp {} out.hsaco\nfor a; do case \"$a\" in *.hip) src=\"$a\";; esac; done\n\
             echo \"out.hsaco: $src\" > deps.d\n",
            code_object_copy.display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(home.join("act.sh"), std::fs::Permissions::from_mode(0o644)).unwrap();
    home
}

fn jit(root: &Path, home: &Path, lock_wait: Option<Duration>) -> Jit {
    Jit::new(JitOptions {
        // hipcc, whatever HIPJIT_COMPILER says: these tests are about it.
        compiler: Some(hipjit::compiler::selection::CompilerChoice::Hipcc),
        compiler_config: common::fake_hipcc_config(home),
        cache: CacheLocation::Roots(vec![root.to_path_buf()]),
        lock_wait,
        ..JitOptions::default()
    })
    .unwrap_or_else(|e| panic!("{e}"))
}

fn opts() -> CompileOptions {
    CompileOptions::for_target(TargetId::parse("gfx90a").unwrap())
}

fn compile_within(jit: Jit, source: &'static str, limit: Duration) -> Compiled {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(jit.compile(source, &opts()).map_err(|e| e.to_string()));
    });
    rx.recv_timeout(limit)
        .unwrap_or_else(|_| panic!("the compile did not return within {limit:?}"))
        .unwrap_or_else(|e| panic!("{e}"))
}

/// `hipjit` with the fake compiler, the cache in `root`, and a deadline.
fn hipjit(root: &Path, home: &Path, args: &[&str]) -> Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_hipjit"));
    cmd.args(args)
        .env("HIPJIT_CACHE_DIR", root)
        .env("HIPJIT_HIPCC", fake_hipcc())
        .env("HOME", home)
        .env("PATH", "/usr/bin:/bin");
    run(&mut cmd)
}

fn run(cmd: &mut Command) -> Output {
    cmd.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let what = format!("{cmd:?}");
    let mut child = cmd.spawn().expect("the command starts");
    let started = Instant::now();
    while child.try_wait().unwrap().is_none() {
        if started.elapsed() > Duration::from_secs(30) {
            let _ = child.kill();
            let _ = child.wait();
            panic!("hung: {what}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    child.wait_with_output().unwrap()
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

fn json(o: &Output) -> serde_json::Value {
    serde_json::from_slice(&o.stdout)
        .unwrap_or_else(|e| panic!("not JSON ({e}): {}\n{}", text(&o.stdout), text(&o.stderr)))
}

// ---------------------------------------------------------------------------------------------
// The compile lock

#[test]
fn a_lock_held_past_the_wait_is_given_up_and_said_so() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("cache");
    let home = home(dir.path());
    let first = compile_within(jit(&root, &home, None), "int a;", Duration::from_secs(30));
    let key = first.key().to_hex();
    // The compile lock is the direct key's (source and options; hipjit::cache::key).
    let direct = jit(&root, &home, None)
        .source_key("int a;", &opts())
        .unwrap()
        .to_hex();
    DiskCache::open(std::slice::from_ref(&root))
        .unwrap()
        .clear()
        .unwrap();
    // Another holder of the key's lock that never lets go (a stopped process, another user).
    let lock = root.join("v1/locks").join(format!("{direct}.lock"));
    let held = std::fs::OpenOptions::new().write(true).open(&lock).unwrap();
    // SAFETY: flock on a descriptor this test owns.
    assert_eq!(
        unsafe { libc::flock(std::os::fd::AsRawFd::as_raw_fd(&held), libc::LOCK_EX) },
        0
    );
    let started = Instant::now();
    let c = compile_within(
        jit(&root, &home, Some(Duration::from_secs(1))),
        "int a;",
        Duration::from_secs(20),
    );
    assert!(started.elapsed() >= Duration::from_secs(1));
    assert_eq!(c.key().to_hex(), key);
    assert!(
        c.cache_warnings()
            .iter()
            .any(|w| w.contains("compiling without it")),
        "{:?}",
        c.cache_warnings()
    );
    drop(held);
}

// ---------------------------------------------------------------------------------------------
// Roots that cannot be roots, publishing that fails

#[test]
fn a_root_that_is_a_regular_file_is_an_error() {
    let dir = tempfile::tempdir().unwrap();
    let home = home(dir.path());
    let root = dir.path().join("cache");
    std::fs::write(&root, "not a directory").unwrap();
    std::fs::write(dir.path().join("k.hip"), "int a;").unwrap();
    let k = dir.path().join("k.hip");
    let o = hipjit(
        &root,
        &home,
        &["compile", "--arch", "gfx90a", k.to_str().unwrap()],
    );
    assert_eq!(o.status.code(), Some(1), "{}", text(&o.stderr));
    assert!(
        text(&o.stderr).contains("is a regular file, not a directory"),
        "{}",
        text(&o.stderr)
    );
}

#[test]
fn a_failed_publish_is_a_warning_in_text_and_json() {
    let dir = tempfile::tempdir().unwrap();
    let home = home(dir.path());
    let root = dir.path().join("cache");
    std::fs::create_dir_all(root.join("v1")).unwrap();
    std::fs::set_permissions(&root, std::fs::Permissions::from_mode(0o700)).unwrap();
    // The temporary directory cannot be made: every publish fails.
    std::fs::write(root.join("v1/tmp"), "").unwrap();
    let k = dir.path().join("k.hip");
    std::fs::write(&k, "int a;").unwrap();
    let o = hipjit(
        &root,
        &home,
        &["compile", "--arch", "gfx90a", k.to_str().unwrap()],
    );
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    assert!(
        text(&o.stderr).contains("hipjit: warning:") && text(&o.stderr).contains("not cached"),
        "{}",
        text(&o.stderr)
    );
    let o = hipjit(
        &root,
        &home,
        &["compile", "--json", "--arch", "gfx90a", k.to_str().unwrap()],
    );
    let v = json(&o);
    let w = v["results"][0]["cache_warnings"]
        .as_array()
        .expect("cache_warnings");
    assert!(
        w.iter()
            .any(|w| w.as_str().unwrap_or("").contains("v1/tmp")),
        "{w:?}"
    );
}

// ---------------------------------------------------------------------------------------------
// Repairs, and clear/prune never following links

fn entry_of(root: &Path, home: &Path, k: &Path) -> (PathBuf, String) {
    let o = hipjit(
        root,
        home,
        &["compile", "--json", "--arch", "gfx90a", k.to_str().unwrap()],
    );
    let v = json(&o);
    let r = &v["results"][0];
    (
        PathBuf::from(
            r["entry"]
                .as_str()
                .unwrap_or_else(|| panic!("no entry: {v}")),
        ),
        r["cache"].as_str().unwrap().to_owned(),
    )
}

#[test]
fn a_dangling_link_or_a_directory_at_an_entry_path_is_replaced() {
    let dir = tempfile::tempdir().unwrap();
    let home = home(dir.path());
    let root = dir.path().join("cache");
    let k = dir.path().join("k.hip");
    std::fs::write(&k, "int a;").unwrap();
    let (entry, _) = entry_of(&root, &home, &k);
    for plant in ["dangling link", "directory"] {
        std::fs::remove_file(&entry).ok();
        std::fs::remove_dir_all(&entry).ok();
        if plant == "directory" {
            std::fs::create_dir(&entry).unwrap();
            std::fs::write(entry.join("x"), "").unwrap();
        } else {
            std::os::unix::fs::symlink(dir.path().join("nowhere"), &entry).unwrap();
        }
        let (again, origin) = entry_of(&root, &home, &k);
        assert_eq!(again, entry);
        assert_eq!(origin, "miss", "{plant}");
        assert!(
            std::fs::symlink_metadata(&entry).unwrap().is_file(),
            "{plant} left in place"
        );
        let (_, origin) = entry_of(&root, &home, &k);
        assert_eq!(origin, "disk", "after repairing a {plant}, the key hits");
    }
}

#[test]
fn clear_removes_key_named_entries_only_and_follows_no_link() {
    let dir = tempfile::tempdir().unwrap();
    let home = home(dir.path());
    let root = dir.path().join("cache");
    let k = dir.path().join("k.hip");
    std::fs::write(&k, "int a;").unwrap();
    let (entry, _) = entry_of(&root, &home, &k);
    let name = |c: char| format!("{}.hjc", c.to_string().repeat(64));
    // A directory named like an entry (used to make every `cache clear` fail).
    let sub_a = root.join("v1/aa");
    std::fs::create_dir_all(sub_a.join(name('a'))).unwrap();
    // A symbolic link as a layout directory, to a directory outside the cache holding a file
    // named like an entry: clear used to follow it and delete the file.
    let outside = dir.path().join("outside");
    std::fs::create_dir(&outside).unwrap();
    std::fs::write(outside.join(name('b')), "not the cache's").unwrap();
    std::os::unix::fs::symlink(&outside, root.join("v1/bb")).unwrap();
    // A file that is not key-named.
    std::fs::write(root.join("v1/aa/notes.hjc"), "mine").unwrap();
    let o = hipjit(&root, &home, &["cache", "clear"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    assert!(!entry.exists());
    assert!(
        !sub_a.join(name('a')).exists(),
        "the entry-named directory stayed"
    );
    assert_eq!(
        std::fs::read_to_string(outside.join(name('b'))).unwrap(),
        "not the cache's"
    );
    assert_eq!(
        std::fs::read_to_string(root.join("v1/aa/notes.hjc")).unwrap(),
        "mine"
    );
    let o = hipjit(&root, &home, &["cache", "prune", "--max-size", "0"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    assert!(outside.join(name('b')).exists());
}

// ---------------------------------------------------------------------------------------------
// A root shared by two real users

/// Users and a group made for one test, removed when dropped (also when the test fails).
struct Accounts {
    users: Vec<String>,
    group: String,
}

impl Accounts {
    fn new(tag: &str, n: usize) -> Accounts {
        let base = format!("hj{}{tag}", std::process::id() % 100_000);
        let group = format!("{base}g");
        let ok = |c: &mut Command| {
            let o = c.output().unwrap();
            assert!(o.status.success(), "{c:?}: {}", text(&o.stderr));
        };
        ok(Command::new("groupadd").arg(&group));
        let mut a = Accounts {
            users: Vec::new(),
            group,
        };
        for i in 0..n {
            let u = format!("{base}u{i}");
            ok(Command::new("useradd").args(["-M", "-N", "-s", "/usr/sbin/nologin", &u]));
            a.users.push(u);
        }
        a
    }

    fn uid(&self, i: usize) -> u32 {
        let o = Command::new("id")
            .args(["-u", &self.users[i]])
            .output()
            .unwrap();
        text(&o.stdout).trim().parse().unwrap()
    }

    fn gid(&self) -> u32 {
        let o = Command::new("getent")
            .args(["group", &self.group])
            .output()
            .unwrap();
        text(&o.stdout)
            .split(':')
            .nth(2)
            .unwrap()
            .trim()
            .parse()
            .unwrap()
    }

    fn add_to_group(&self, i: usize) {
        let o = Command::new("usermod")
            .args(["-a", "-G", &self.group, &self.users[i]])
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", text(&o.stderr));
    }
}

impl Drop for Accounts {
    fn drop(&mut self) {
        for u in &self.users {
            let _ = Command::new("userdel").arg(u).output();
        }
        let _ = Command::new("groupdel").arg(&self.group).output();
    }
}

/// Copies of the `hipjit` binary and the fake hipcc in `home/bin` (mode 0755), made once: the
/// checkout and its target directory may lie where another user cannot reach them (a clone in
/// a 0700 temporary directory).
fn programs_for_other_users(home: &Path) -> (PathBuf, PathBuf) {
    let bin = home.join("bin");
    let (hipjit, hipcc) = (bin.join("hipjit"), bin.join("fake-hipcc-act.sh"));
    if !bin.exists() {
        std::fs::create_dir(&bin).unwrap();
        std::fs::set_permissions(&bin, std::fs::Permissions::from_mode(0o755)).unwrap();
        for (from, to) in [
            (PathBuf::from(env!("CARGO_BIN_EXE_hipjit")), &hipjit),
            (fake_hipcc(), &hipcc),
        ] {
            std::fs::copy(from, to).unwrap();
            std::fs::set_permissions(to, std::fs::Permissions::from_mode(0o755)).unwrap();
        }
    }
    (hipjit, hipcc)
}

/// `hipjit` run as user `uid` with groups `groups` (its primary group first).
fn hipjit_as(uid: u32, groups: &[u32], root: &Path, home: &Path, args: &[&str]) -> Output {
    let (hipjit, hipcc) = programs_for_other_users(home);
    let mut cmd = Command::new(hipjit);
    cmd.args(args)
        .env_clear()
        .env("HIPJIT_CACHE_DIR", root)
        .env("HIPJIT_HIPCC", hipcc)
        .env("HOME", home)
        .env("PATH", "/usr/bin:/bin")
        .current_dir("/");
    let primary = groups[0];
    let groups = groups.to_vec();
    // SAFETY: setgroups, setgid and setuid are async-signal-safe; the vector was allocated
    // before fork. (std's own uid/gid switch runs before pre_exec, too early for setgroups.)
    unsafe {
        cmd.pre_exec(move || {
            if libc::setgroups(groups.len(), groups.as_ptr()) != 0
                || libc::setgid(primary) != 0
                || libc::setuid(uid) != 0
            {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    run(&mut cmd)
}

#[test]
fn two_users_of_a_shared_root_both_publish_and_an_outsider_is_refused() {
    let acc = Accounts::new("s", 3);
    acc.add_to_group(0);
    acc.add_to_group(1);
    let (a, b, outsider, g) = (acc.uid(0), acc.uid(1), acc.uid(2), acc.gid());
    let dir = tempfile::tempdir().unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let home = home(dir.path());
    // The shared root: owned by user a, group g, group-writable, declared shared by a; the
    // sources readable by all.
    let root = dir.path().join("shared");
    std::fs::create_dir(&root).unwrap();
    std::os::unix::fs::chown(&root, Some(a), Some(g)).unwrap();
    std::fs::set_permissions(&root, std::fs::Permissions::from_mode(0o2775)).unwrap();
    let marker = root.join("HIPJIT_SHARED");
    std::fs::write(&marker, "").unwrap();
    std::os::unix::fs::chown(&marker, Some(a), Some(g)).unwrap();
    let src = |name: &str, body: &str| {
        let p = dir.path().join(name);
        std::fs::write(&p, body).unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o644)).unwrap();
        p
    };
    let ka = src("ka.hip", "int a;");
    let kb = src("kb.hip", "int b;");
    // The umask that made directories 0755, which locked the second user out.
    // SAFETY: umask has no preconditions; it is inherited by the children started below.
    let old = unsafe { libc::umask(0o022) };
    let oa = hipjit_as(
        a,
        &[a, g],
        &root,
        &home,
        &[
            "compile",
            "--json",
            "--arch",
            "gfx90a",
            ka.to_str().unwrap(),
        ],
    );
    let ob = hipjit_as(
        b,
        &[b, g],
        &root,
        &home,
        &[
            "compile",
            "--json",
            "--arch",
            "gfx90a",
            kb.to_str().unwrap(),
        ],
    );
    // b reads what a published.
    let ob2 = hipjit_as(
        b,
        &[b, g],
        &root,
        &home,
        &[
            "compile",
            "--json",
            "--arch",
            "gfx90a",
            ka.to_str().unwrap(),
        ],
    );
    // SAFETY: as above.
    unsafe { libc::umask(old) };
    for (who, o) in [("a", &oa), ("b", &ob)] {
        let v = json(o);
        let r = &v["results"][0];
        assert_eq!(r["ok"], true, "{who}: {v}");
        assert_eq!(
            r["cache_warnings"],
            serde_json::json!([]),
            "{who}: {}",
            text(&o.stderr)
        );
        let entry = PathBuf::from(r["entry"].as_str().unwrap());
        assert!(
            entry.is_file(),
            "{who} did not publish: {}",
            text(&o.stderr)
        );
    }
    assert_eq!(
        json(&ob2)["results"][0]["cache"],
        "disk",
        "{}",
        text(&ob2.stderr)
    );
    // Every directory made in the shared root carries the sharing mode, whatever the umask.
    for d in ["v1", "v1/tmp", "v1/locks"] {
        let m = std::fs::metadata(root.join(d)).unwrap();
        assert_eq!(m.mode() & 0o7777, 0o2775, "{d}");
        assert_eq!(m.gid(), g, "{d}");
    }
    // An entry owned by a user outside the group is refused (read as bad, never served).
    let eb = PathBuf::from(json(&ob)["results"][0]["entry"].as_str().unwrap());
    std::os::unix::fs::chown(&eb, Some(outsider), None).unwrap();
    let o = hipjit_as(a, &[a, g], &root, &home, &["cache", "verify", "--json"]);
    let v = json(&o);
    let bad: Vec<_> = v["entries"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["ok"] == false)
        .collect();
    assert_eq!(bad.len(), 1, "{v}");
    assert!(
        bad[0]["error"]
            .as_str()
            .unwrap()
            .contains("not in the shared root's group"),
        "{v}"
    );
}

#[test]
fn a_root_that_is_a_link_owned_by_another_user_is_refused() {
    let acc = Accounts::new("l", 1);
    let other = acc.uid(0);
    let dir = tempfile::tempdir().unwrap();
    let home = home(dir.path());
    let real = dir.path().join("real");
    std::fs::create_dir(&real).unwrap();
    std::fs::set_permissions(&real, std::fs::Permissions::from_mode(0o700)).unwrap();
    let link = dir.path().join("cache");
    std::os::unix::fs::symlink(&real, &link).unwrap();
    std::os::unix::fs::lchown(&link, Some(other), None).unwrap();
    let k = dir.path().join("k.hip");
    std::fs::write(&k, "int a;").unwrap();
    let o = hipjit(
        &link,
        &home,
        &["compile", "--arch", "gfx90a", k.to_str().unwrap()],
    );
    assert_eq!(o.status.code(), Some(1), "{}", text(&o.stderr));
    assert!(
        text(&o.stderr).contains("symbolic link owned by uid"),
        "{}",
        text(&o.stderr)
    );
}

#[test]
fn a_world_writable_directory_in_a_private_root_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let home = home(dir.path());
    let root = dir.path().join("cache");
    let k = dir.path().join("k.hip");
    std::fs::write(&k, "int a;").unwrap();
    let (entry, _) = entry_of(&root, &home, &k);
    let sub = entry.parent().unwrap();
    std::fs::set_permissions(sub, std::fs::Permissions::from_mode(0o777)).unwrap();
    let o = hipjit(&root, &home, &["cache", "verify"]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o.stdout));
    assert!(
        text(&o.stdout).contains("writable by group or others"),
        "{}",
        text(&o.stdout)
    );
}

// ---------------------------------------------------------------------------------------------
// What a hit trusts: a stat record and the mount it was taken on

/// Two ext4 images built reproducibly from trees that differ only in the bytes of `inc/x.h`
/// (`#define VALUE 111` and `222`, same size): the same UUID, hash seed and times (set with
/// debugfs), so that each file has the same inode, size and times in both.
fn reproducible_images(dir: &Path) -> Result<[PathBuf; 2], String> {
    let mut images = Vec::new();
    for value in [111, 222] {
        let tree = dir.join(format!("tree{value}"));
        std::fs::create_dir_all(tree.join("inc")).unwrap();
        std::fs::write(tree.join("inc/x.h"), format!("#define VALUE {value}\n")).unwrap();
        let touch = Command::new("touch")
            .args(["-h", "-d", "@1600000000"])
            .args([tree.join("inc/x.h"), tree.join("inc"), tree.clone()])
            .output()
            .map_err(|e| format!("touch: {e}"))?;
        if !touch.status.success() {
            return Err(format!("touch: {}", text(&touch.stderr)));
        }
        let image = dir.join(format!("image{value}.ext4"));
        let mkfs = Command::new("mkfs.ext4")
            .args(["-q", "-F", "-b", "1024", "-T", "small"])
            .args(["-U", "6f1e0c2a-3b4d-4e5f-8a9b-0c1d2e3f4a5b"])
            .args([
                "-E",
                "hash_seed=0b2c3d4e-5f60-4718-9a2b-3c4d5e6f7081,root_owner=0:0",
            ])
            .arg("-d")
            .arg(&tree)
            .arg(&image)
            .arg("1M")
            .env("E2FSPROGS_FAKE_TIME", "1600000000")
            .env("SOURCE_DATE_EPOCH", "1600000000")
            .env("PATH", "/usr/sbin:/sbin:/usr/bin:/bin")
            .output()
            .map_err(|e| format!("mkfs.ext4 (e2fsprogs) cannot run: {e}"))?;
        if !mkfs.status.success() {
            return Err(format!("mkfs.ext4 -d failed: {}", text(&mkfs.stderr)));
        }
        // mke2fs 1.47.0 copies each change time from the tree (the `touch` above, now): set
        // them all to the fixed time, as a build under SOURCE_DATE_EPOCH gives.
        let commands = dir.join("debugfs-commands");
        let mut fix = String::new();
        for inode in ["/", "/lost+found", "/inc", "/inc/x.h"] {
            for field in ["ctime", "mtime", "atime"] {
                fix.push_str(&format!("sif {inode} {field} 20200913122640\n"));
            }
        }
        std::fs::write(&commands, fix).unwrap();
        let debugfs = Command::new("debugfs")
            .arg("-w")
            .arg("-f")
            .arg(&commands)
            .arg(&image)
            .env("PATH", "/usr/sbin:/sbin:/usr/bin:/bin")
            .output()
            .map_err(|e| format!("debugfs (e2fsprogs) cannot run: {e}"))?;
        if !debugfs.status.success() || !text(&debugfs.stderr).trim().starts_with("debugfs") {
            return Err(format!("debugfs failed: {}", text(&debugfs.stderr)));
        }
        images.push(image);
    }
    Ok([images[0].clone(), images[1].clone()])
}

/// `program args...` (from /usr/sbin, /sbin and the like), its stdout, or why it failed.
fn sbin(program: &str, args: &[&std::ffi::OsStr]) -> Result<String, String> {
    let o = Command::new(program)
        .args(args)
        .env("PATH", "/usr/sbin:/sbin:/usr/bin:/bin")
        .output()
        .map_err(|e| format!("{program} cannot run: {e}"))?;
    if o.status.success() {
        Ok(text(&o.stdout).trim().to_owned())
    } else {
        Err(format!("{program} {args:?}: {}", text(&o.stderr).trim()))
    }
}

/// An image attached read-only to a loop device and mounted at a directory; unmounted and
/// detached when dropped (also when the test fails).
struct Mounted {
    device: String,
    at: PathBuf,
}

impl Mounted {
    /// `image` on loop device `device` (the first free one when `None`), mounted at `at`.
    fn new(image: &Path, device: Option<&str>, at: &Path) -> Result<Mounted, String> {
        let device = match device {
            Some(d) => {
                // The device just detached may still be busy for a while (the kernel frees it
                // once the last reference goes, later on a loaded machine): tried again for up
                // to 30 s.
                let mut tries = 0;
                loop {
                    match sbin(
                        "losetup",
                        &["--read-only".as_ref(), d.as_ref(), image.as_ref()],
                    ) {
                        Ok(_) => break,
                        Err(_) if tries < 300 => {
                            tries += 1;
                            std::thread::sleep(std::time::Duration::from_millis(100));
                        }
                        Err(e) => return Err(e),
                    }
                }
                d.to_owned()
            }
            None => sbin(
                "losetup",
                &[
                    "--find".as_ref(),
                    "--show".as_ref(),
                    "--read-only".as_ref(),
                    image.as_ref(),
                ],
            )?,
        };
        let mounted = Mounted {
            device,
            at: at.to_path_buf(),
        };
        sbin(
            "mount",
            &[
                "-t".as_ref(),
                "ext4".as_ref(),
                "-o".as_ref(),
                "ro".as_ref(),
                mounted.device.as_ref(),
                at.as_ref(),
            ],
        )?;
        Ok(mounted)
    }
}

impl Drop for Mounted {
    fn drop(&mut self) {
        // A mount still busy for a moment (a child's last reference): tried again for 5 s,
        // since the loop device is freed only once it is unmounted.
        for _ in 0..50 {
            if sbin("umount", &[self.at.as_ref()]).is_ok() {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(100));
        }
        let _ = sbin("losetup", &["--detach".as_ref(), self.device.as_ref()]);
    }
}

/// Size, times, inode and device of `path`: what a stat record held before the mount's
/// identity.
fn stat_fields(path: &Path) -> (u64, i64, i64, i64, i64, u64, u64) {
    let m = std::fs::metadata(path).unwrap();
    (
        m.size(),
        m.mtime(),
        m.mtime_nsec(),
        m.ctime(),
        m.ctime_nsec(),
        m.ino(),
        m.dev(),
    )
}

/// Wrong code from a stat-identical header: two images built reproducibly, whose `inc/x.h`
/// differ only in their bytes, mounted in turn at one path give that header the same size,
/// times, inode and device. A compile with the first image mounted, then a hit that writes the
/// hit memo; with the second image mounted at the same path, the compile must be a miss with
/// the second image's code (neither the hit memo nor the header manifest may take the
/// unchanged fields for unchanged bytes); with the first image mounted again, its code is
/// served again (a hit: its bytes hash as before). The "compiler" copies one of two code
/// objects by the header's value.
///
/// Needs root, loop devices and mkfs.ext4 (e2fsprogs): skipped by name where they are missing.
#[test]
fn a_header_on_an_image_swapped_at_one_path_with_the_same_stat_is_hashed_not_trusted() {
    const NAME: &str =
        "a_header_on_an_image_swapped_at_one_path_with_the_same_stat_is_hashed_not_trusted";
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        eprintln!("SKIPPED {NAME}: needs root (to attach loop devices and mount)");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let images = match reproducible_images(dir.path()) {
        Ok(i) => i,
        Err(why) => {
            eprintln!("SKIPPED {NAME}: {why}");
            return;
        }
    };
    let mnt = dir.path().join("mnt");
    std::fs::create_dir(&mnt).unwrap();
    let first = match Mounted::new(&images[0], None, &mnt) {
        Ok(m) => m,
        Err(why) => {
            eprintln!("SKIPPED {NAME}: no loop device can be mounted here: {why}");
            return;
        }
    };
    let home = home(dir.path());
    let (co_111, co_222) = (
        home.join("single-gfx90a.hsaco"),
        common::code_object("kernels-gfx90a.hsaco"),
    );
    let header = mnt.join("inc/x.h");
    std::fs::write(
        home.join("act.sh"),
        format!(
            "if grep -q 'VALUE 222' {h}; then cp {b} out.hsaco; else cp {a} out.hsaco; fi\n\
             for a; do case \"$a\" in *.hip) src=\"$a\";; esac; done\n\
             echo \"out.hsaco: $src {h}\" > deps.d\n",
            h = header.display(),
            a = co_111.display(),
            b = co_222.display(),
        ),
    )
    .unwrap();
    // The source in a directory of its own, which nothing changes (a quoted include searches
    // it first: it is in the manifest).
    std::fs::create_dir(dir.path().join("src")).unwrap();
    let src = dir.path().join("src/k.hip");
    std::fs::write(
        &src,
        "#include \"x.h\"\n__global__ void k(int* p) { *p = VALUE; }\n",
    )
    .unwrap();
    let out = dir.path().join("out.bin");
    let root = dir.path().join("cache");
    let xdg = dir.path().join("xdg");
    let compile = || {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_hipjit"));
        cmd.args(["compile", "--compiler", "hipcc", "--arch", "gfx90a", "-I"])
            .arg(mnt.join("inc"))
            .arg("-o")
            .arg(&out)
            .arg(&src)
            .env("HIPJIT_CACHE_DIR", &root)
            .env("HIPJIT_HIPCC", fake_hipcc())
            .env("XDG_CACHE_HOME", &xdg)
            .env("HOME", &home)
            .env("PATH", "/usr/bin:/bin")
            .env_remove("HIPJIT_COMPILER");
        let o = run(&mut cmd);
        assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
        (text(&o.stdout), std::fs::read(&out).unwrap())
    };
    let (co_111, co_222) = (
        std::fs::read(co_111).unwrap(),
        std::fs::read(co_222).unwrap(),
    );
    assert_ne!(co_111, co_222);

    let (said, code) = compile();
    assert!(said.contains("miss"), "{said}");
    assert!(
        code == co_111,
        "the first image's compile gave the wrong code object"
    );
    // Let the entries age past the hit memo's margin; the hit then writes a memo.
    std::thread::sleep(hipjit::jit::hit_memo::MIN_AGE + Duration::from_millis(300));
    let (said, code) = compile();
    assert!(said.contains("hit (disk)"), "{said}");
    assert!(code == co_111);
    let memos = std::fs::read_dir(xdg.join("hipjit/compilers/hits"))
        .map(|rd| {
            rd.flatten()
                .filter(|e| e.path().extension().is_some_and(|x| x == "hit"))
                .count()
        })
        .unwrap_or(0);
    assert_eq!(
        memos, 1,
        "the hit is remembered (the memo is part of what is tested)"
    );
    let stat_111 = stat_fields(&header);
    let device = first.device.clone();
    drop(first);

    // The second image, on the same loop device, at the same path.
    let second = Mounted::new(&images[1], Some(&device), &mnt)
        .unwrap_or_else(|e| panic!("the second image cannot be mounted on {device}: {e}"));
    assert_eq!(
        std::fs::read_to_string(&header).unwrap(),
        "#define VALUE 222\n"
    );
    assert_eq!(
        stat_fields(&header),
        stat_111,
        "the images do not give the header the same stat: the case is not made"
    );
    let (said, code) = compile();
    assert!(
        code == co_222,
        "the second image's header was served the first image's code ({said})"
    );
    assert!(said.contains("miss"), "{said}");
    drop(second);

    // The first image again: its bytes hash as before, a hit with its code.
    let _again = Mounted::new(&images[0], Some(&device), &mnt)
        .unwrap_or_else(|e| panic!("the first image cannot be mounted again on {device}: {e}"));
    let (said, code) = compile();
    assert!(said.contains("hit (disk)"), "{said}");
    assert!(
        code == co_111,
        "the first image's header was served other code"
    );
}

/// Wrong code from a header on a FUSE filesystem, whose `stat` fields its server makes up:
/// bindfs with `--ctime-from-mtime` reports the modification time as the change time, as
/// sshfs does (SFTP has none). The header rewritten in place with bytes of the same size and
/// its modification time put back (as `rsync -a` of a tree with fixed times does) keeps size,
/// times, inode, device and mount; the compile must be a miss with the new code (a FUSE
/// mount's `stat` proves nothing: its files are hashed).
///
/// Needs root, /dev/fuse and bindfs (scripts/setup.sh installs it): skipped by name where they
/// are missing.
#[test]
fn a_header_on_fuse_rewritten_with_the_same_size_and_times_is_hashed_not_trusted() {
    const NAME: &str =
        "a_header_on_fuse_rewritten_with_the_same_size_and_times_is_hashed_not_trusted";
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        eprintln!("SKIPPED {NAME}: needs root (to mount a FUSE filesystem)");
        return;
    }
    if !Path::new("/dev/fuse").exists() || !Path::new("/usr/bin/bindfs").exists() {
        eprintln!("SKIPPED {NAME}: needs /dev/fuse and /usr/bin/bindfs (apt-get install bindfs)");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let (back, mnt) = (dir.path().join("back"), dir.path().join("mnt"));
    std::fs::create_dir_all(back.join("inc")).unwrap();
    std::fs::create_dir(&mnt).unwrap();
    let fixed = std::time::UNIX_EPOCH + Duration::from_secs(1_700_000_000);
    let write_header = |text: &str| {
        let f = std::fs::File::create(back.join("inc/x.h")).unwrap();
        std::io::Write::write_all(&mut &f, text.as_bytes()).unwrap();
        f.set_modified(fixed).unwrap();
    };
    write_header("#define VALUE 111\n");
    sbin(
        "bindfs",
        &[
            "--ctime-from-mtime".as_ref(),
            back.as_os_str(),
            mnt.as_os_str(),
        ],
    )
    .unwrap_or_else(|e| panic!("bindfs cannot mount here: {e}"));
    struct Unmount(PathBuf);
    impl Drop for Unmount {
        fn drop(&mut self) {
            let _ = sbin("umount", &[self.0.as_os_str()]);
        }
    }
    let _mounted = Unmount(mnt.clone());

    let home = home(dir.path());
    let header = mnt.join("inc/x.h");
    let (co_111, co_222) = (
        home.join("single-gfx90a.hsaco"),
        common::code_object("kernels-gfx90a.hsaco"),
    );
    std::fs::write(
        home.join("act.sh"),
        format!(
            "if grep -q 'VALUE 222' {h}; then cp {b} out.hsaco; else cp {a} out.hsaco; fi\n\
             for a; do case \"$a\" in *.hip) src=\"$a\";; esac; done\n\
             echo \"out.hsaco: $src {h}\" > deps.d\n",
            h = header.display(),
            a = co_111.display(),
            b = co_222.display(),
        ),
    )
    .unwrap();
    std::fs::create_dir(dir.path().join("src")).unwrap();
    let src = dir.path().join("src/k.hip");
    std::fs::write(
        &src,
        "#include \"x.h\"\n__global__ void k(int* p) { *p = VALUE; }\n",
    )
    .unwrap();
    let out = dir.path().join("out.bin");
    let compile = || {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_hipjit"));
        cmd.args(["compile", "--compiler", "hipcc", "--arch", "gfx90a", "-I"])
            .arg(mnt.join("inc"))
            .arg("-o")
            .arg(&out)
            .arg(&src)
            .env("HIPJIT_CACHE_DIR", dir.path().join("cache"))
            .env("HIPJIT_HIPCC", fake_hipcc())
            .env("XDG_CACHE_HOME", dir.path().join("xdg"))
            .env("HOME", &home)
            .env("PATH", "/usr/bin:/bin")
            .env_remove("HIPJIT_COMPILER");
        let o = run(&mut cmd);
        assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
        (text(&o.stdout), std::fs::read(&out).unwrap())
    };
    let (co_111, co_222) = (
        std::fs::read(co_111).unwrap(),
        std::fs::read(co_222).unwrap(),
    );
    let (said, code) = compile();
    assert!(said.contains("miss") && code == co_111, "{said}");
    let (said, code) = compile();
    assert!(said.contains("hit (disk)") && code == co_111, "{said}");

    let before = stat_fields(&header);
    write_header("#define VALUE 222\n");
    assert_eq!(
        stat_fields(&header),
        before,
        "the rewritten header's stat differs: the case is not made"
    );
    let (said, code) = compile();
    assert!(
        code == co_222,
        "a FUSE header rewritten with the same stat was served the old code ({said})"
    );
    assert!(said.contains("miss"), "{said}");
}

/// One `Jit` with Debian's hipcc (real: its depfile names the headers) compiling one source
/// that includes `x.h` from the second of two `-I` directories, a second old (its read
/// remembered by the process): a header added to the first directory, shadowing it, then that
/// header replaced by a rename with its size and modification time put back, are each a miss
/// compiled again with the new header, never the earlier code.
#[test]
fn a_shadowing_header_and_one_renamed_over_with_its_times_kept_are_misses_in_one_process() {
    let dir = tempfile::tempdir().unwrap();
    let (first, second) = (dir.path().join("first"), dir.path().join("second"));
    for d in [&first, &second] {
        std::fs::create_dir_all(d).unwrap();
    }
    std::fs::write(second.join("x.h"), "#define XV 1111111\n").unwrap();
    std::thread::sleep(Duration::from_millis(1100));
    let jit = Jit::new(JitOptions {
        compiler: Some(hipjit::compiler::selection::CompilerChoice::Hipcc),
        compiler_config: hipjit::compiler::CompilerConfig {
            hipcc: Some(PathBuf::from("/usr/bin/hipcc")),
            ..Default::default()
        },
        cache: CacheLocation::Roots(vec![dir.path().join("cache")]),
        ..JitOptions::default()
    })
    .unwrap_or_else(|e| panic!("{e}"));
    let options = CompileOptions {
        include_dirs: vec![first.clone(), second.clone()],
        ..opts()
    };
    const SOURCE: &str =
        "#include \"x.h\"\nextern \"C\" __global__ void k(int* o) { o[0] = XV; }\n";
    let compile = || {
        jit.compile(SOURCE, &options)
            .unwrap_or_else(|e| panic!("{e}"))
    };
    // The constant as the code object holds it (a 32-bit literal, little-endian).
    let holds = |c: &Compiled, v: u32| {
        c.code_object()
            .unwrap()
            .elf()
            .windows(4)
            .any(|w| w == v.to_le_bytes())
    };
    let one = compile();
    assert!(holds(&one, 1111111) && !holds(&one, 2222222));
    jit.clear_memory();
    std::fs::write(first.join("x.h"), "#define XV 2222222\n").unwrap();
    let two = compile();
    assert_eq!(two.origin(), hipjit::jit::Origin::Compiler);
    assert!(holds(&two, 2222222) && !holds(&two, 1111111));
    std::thread::sleep(Duration::from_millis(1100));
    jit.clear_memory();
    // Remembered by now; replaced by a file of the same size and modification time.
    let mtime = std::fs::metadata(first.join("x.h"))
        .unwrap()
        .modified()
        .unwrap();
    std::fs::write(first.join("x.new"), "#define XV 3333333\n").unwrap();
    std::fs::File::options()
        .write(true)
        .open(first.join("x.new"))
        .unwrap()
        .set_modified(mtime)
        .unwrap();
    std::fs::rename(first.join("x.new"), first.join("x.h")).unwrap();
    let three = compile();
    assert_eq!(three.origin(), hipjit::jit::Origin::Compiler);
    assert!(holds(&three, 3333333) && !holds(&three, 2222222));
}
