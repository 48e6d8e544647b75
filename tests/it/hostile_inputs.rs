//! The `hipjit` command against hostile or unlucky inputs: FIFOs, devices, huge sparse files,
//! decompression bombs, non-UTF-8 paths. Every case must end promptly with a clear error (exit
//! status 1 or 2) naming what was wrong: no hang, no panic, no abort. Each child runs under a
//! deadline so that a hang fails the test instead of stalling the suite.

use crate::common;

use std::ffi::{CString, OsStr};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

/// How long any command here may take before the test calls it a hang: far above what the
/// slowest case takes (a hipcc compile, a few seconds on an idle machine, up to ~20 s on a
/// 2-core machine running other builds), so that only a hang reaches it.
const DEADLINE: Duration = Duration::from_secs(90);

/// Runs `cmd` with stdin closed and a deadline; a child still running at the deadline is killed
/// and the test fails, naming the command.
fn run(cmd: &mut Command) -> Output {
    cmd.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0);
    let what = format!("{cmd:?}");
    let mut child = cmd.spawn().expect("the hipjit binary starts");
    let started = Instant::now();
    loop {
        if child.try_wait().expect("waitpid").is_some() {
            return child.wait_with_output().expect("its output");
        }
        if started.elapsed() > DEADLINE {
            // SAFETY: kill(2) of the process group the child leads.
            unsafe { libc::kill(-(child.id() as i32), libc::SIGKILL) };
            let _ = child.wait();
            panic!("hung for {DEADLINE:?}: {what}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn hipjit(cache: &Path) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_hipjit"));
    c.env("HIPJIT_CACHE_DIR", cache).env_remove("HIPJIT_HIPCC");
    c
}

/// `hipjit` limited to `bytes` of address space (RLIMIT_AS): an unbounded allocation fails
/// inside instead of exhausting the machine.
fn hipjit_limited(cache: &Path, bytes: u64) -> Command {
    let mut c = hipjit(cache);
    // SAFETY: setrlimit is async-signal-safe and touches no memory of the parent.
    unsafe {
        c.pre_exec(move || {
            let lim = libc::rlimit {
                rlim_cur: bytes,
                rlim_max: bytes,
            };
            if libc::setrlimit(libc::RLIMIT_AS, &lim) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    c
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn assert_fails_naming(o: &Output, words: &[&str]) {
    let e = stderr(o);
    assert_eq!(o.status.code(), Some(1), "exit status {:?}: {e}", o.status);
    for w in words {
        assert!(e.contains(w), "stderr lacks {w:?}: {e}");
    }
}

// ---------------------------------------------------------------------------------------------
// FIFOs and devices: refused by name, without blocking

#[test]
fn compile_of_a_fifo_source_is_refused_without_waiting_for_a_writer() {
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("k.hip");
    common::mkfifo(&fifo);
    let o = run(hipjit(dir.path())
        .args(["compile", "--arch", "gfx90a"])
        .arg(&fifo));
    assert_fails_naming(&o, &["k.hip", "not a regular file (a FIFO)"]);
}

#[test]
fn compile_of_dev_zero_is_refused_as_a_device() {
    let dir = tempfile::tempdir().unwrap();
    let o = run(hipjit(dir.path()).args(["compile", "--arch", "gfx90a", "/dev/zero"]));
    assert_fails_naming(&o, &["/dev/zero", "character device"]);
}

#[test]
fn inspect_of_a_fifo_is_refused_without_waiting_for_a_writer() {
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("k.hsaco");
    common::mkfifo(&fifo);
    let o = run(hipjit(dir.path()).arg("inspect").arg(&fifo));
    assert_fails_naming(&o, &["k.hsaco", "not a regular file (a FIFO)"]);
}

#[test]
fn inspect_reads_a_code_object_from_standard_input() {
    let dir = tempfile::tempdir().unwrap();
    let f = std::fs::File::open(common::code_object("single-gfx90a.hsaco")).unwrap();
    let mut cmd = hipjit(dir.path());
    cmd.args(["inspect", "/dev/stdin"]);
    let mut child = cmd
        .stdin(f)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let started = Instant::now();
    while child.try_wait().unwrap().is_none() {
        assert!(started.elapsed() < DEADLINE, "inspect /dev/stdin hung");
        std::thread::sleep(Duration::from_millis(20));
    }
    let o = child.wait_with_output().unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(String::from_utf8_lossy(&o.stdout).contains("gfx90a"));
}

// ---------------------------------------------------------------------------------------------
// Bounded memory

#[test]
fn inspect_of_a_3_gib_sparse_file_is_refused_by_its_size_before_reading() {
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("huge.hsaco");
    let file = std::fs::File::create(&f).unwrap();
    file.set_len(3 << 30).unwrap();
    // 512 MiB of address space: reading the file whole would fail (and abort) inside.
    let o = run(hipjit_limited(dir.path(), 512 << 20).arg("inspect").arg(&f));
    assert_fails_naming(&o, &["huge.hsaco", "3221225472 bytes", "limit"]);
}

/// A CCOB v2 compressed offload bundle around `payload` (method 0 zlib, 1 zstd), declaring
/// `uncompressed` bytes and an MD5 low half of 0 (no real bundle hashes to it).
fn ccob_v2(method: u16, uncompressed: u32, payload: &[u8]) -> Vec<u8> {
    let mut b = Vec::new();
    b.extend_from_slice(b"CCOB");
    b.extend_from_slice(&2u16.to_le_bytes());
    b.extend_from_slice(&method.to_le_bytes());
    let total = (24 + payload.len()) as u32;
    b.extend_from_slice(&total.to_le_bytes());
    b.extend_from_slice(&uncompressed.to_le_bytes());
    b.extend_from_slice(&0u64.to_le_bytes());
    b.extend_from_slice(payload);
    b
}

/// A zstd frame of `n` zero bytes made of RLE blocks (RFC 8878 3.1.1): 4 bytes a 128 KiB block.
fn zstd_zeros(n: u64) -> Vec<u8> {
    let mut f = Vec::new();
    f.extend_from_slice(&0xFD2F_B528u32.to_le_bytes());
    // Frame header descriptor: no content size, not single segment, no checksum, no
    // dictionary; window descriptor: exponent 7 (128 KiB window).
    f.push(0x00);
    f.push(7 << 3);
    const BLOCK: u64 = 128 << 10;
    let mut left = n;
    while left > 0 {
        let size = left.min(BLOCK);
        left -= size;
        let last = u32::from(left == 0);
        let header = last | (1 << 1) | ((size as u32) << 3);
        f.extend_from_slice(&header.to_le_bytes()[..3]);
        f.push(0);
    }
    f
}

fn zlib_zeros(n: usize) -> Vec<u8> {
    use std::io::Write;
    let mut e = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::best());
    let chunk = vec![0u8; 1 << 20];
    let mut left = n;
    while left > 0 {
        let k = left.min(chunk.len());
        e.write_all(&chunk[..k]).unwrap();
        left -= k;
    }
    e.finish().unwrap()
}

/// A decompression bomb declaring 300 MiB: under a 256 MiB address-space limit the output
/// buffer cannot be had, and that must be an error naming the bundle, not an abort.
#[test]
fn a_zstd_bundle_declaring_more_than_memory_allows_fails_cleanly() {
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("bomb.ccob");
    std::fs::write(&f, ccob_v2(1, 300 << 20, &zstd_zeros(300 << 20))).unwrap();
    let o = run(hipjit_limited(dir.path(), 256 << 20).arg("inspect").arg(&f));
    assert_fails_naming(&o, &["bomb.ccob"]);
}

#[test]
fn a_bundle_declaring_more_than_the_limit_is_refused_before_decompressing() {
    let dir = tempfile::tempdir().unwrap();
    for (name, method, payload) in [
        ("zstd.ccob", 1u16, zstd_zeros(600 << 20)),
        ("zlib.ccob", 0u16, zlib_zeros(1 << 20)),
    ] {
        let f = dir.path().join(name);
        std::fs::write(&f, ccob_v2(method, 600 << 20, &payload)).unwrap();
        let o = run(hipjit_limited(dir.path(), 512 << 20).arg("inspect").arg(&f));
        assert_fails_naming(&o, &[name, "629145600", "limit"]);
    }
}

#[test]
fn a_bundle_whose_data_runs_past_its_declared_size_stops_there() {
    let dir = tempfile::tempdir().unwrap();
    for (name, method, payload) in [
        ("zstd.ccob", 1u16, zstd_zeros(64 << 20)),
        ("zlib.ccob", 0u16, zlib_zeros(64 << 20)),
    ] {
        let f = dir.path().join(name);
        std::fs::write(&f, ccob_v2(method, 1 << 20, &payload)).unwrap();
        // 1 MiB declared, 64 MiB of data: reading past the declared size would need more than
        // the 64 MiB of heap this leaves.
        let o = run(hipjit_limited(dir.path(), 96 << 20).arg("inspect").arg(&f));
        assert_fails_naming(&o, &[name, "1048576 uncompressed bytes"]);
    }
}

// ---------------------------------------------------------------------------------------------
// Cache entries that are not files

fn entry_paths(cache: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for sub in std::fs::read_dir(cache.join("v1"))
        .into_iter()
        .flatten()
        .flatten()
    {
        for f in std::fs::read_dir(sub.path())
            .into_iter()
            .flatten()
            .flatten()
        {
            if f.path().extension() == Some(OsStr::new("hjc")) {
                out.push(f.path());
            }
        }
    }
    out
}

#[test]
fn cache_verify_reports_a_fifo_planted_as_an_entry_without_hanging() {
    let dir = tempfile::tempdir().unwrap();
    let cache = dir.path().join("cache");
    let sub = cache.join("v1").join("ab");
    std::fs::create_dir_all(&sub).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&cache, std::fs::Permissions::from_mode(0o700)).unwrap();
    let entry = sub.join(format!("ab{}.hjc", "0".repeat(62)));
    common::mkfifo(&entry);
    assert_eq!(entry_paths(&cache), vec![entry.clone()]);
    let o = run(hipjit(&cache).args(["cache", "verify"]));
    assert_fails_naming(&o, &["not a regular file (a FIFO)"]);
}

// ---------------------------------------------------------------------------------------------
// Non-UTF-8 paths with --json

/// `base/<name>` where `name` is not UTF-8.
fn non_utf8(base: &Path, name: &[u8]) -> PathBuf {
    base.join(OsStr::from_bytes(name))
}

fn json_of(o: &Output) -> serde_json::Value {
    assert_eq!(o.status.code(), Some(0), "{}", stderr(o));
    serde_json::from_slice(&o.stdout).unwrap_or_else(|e| {
        panic!(
            "stdout is not JSON ({e}): {}",
            String::from_utf8_lossy(&o.stdout)
        )
    })
}

/// The path a JSON path value stands for: a string, or `{"text", "hex"}` for bytes that are
/// not UTF-8.
fn json_path(v: &serde_json::Value) -> PathBuf {
    if let Some(s) = v.as_str() {
        return PathBuf::from(s);
    }
    let hex = v["hex"]
        .as_str()
        .unwrap_or_else(|| panic!("not a path: {v}"));
    let bytes: Vec<u8> = (0..hex.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&hex[i..i + 2], 16).unwrap())
        .collect();
    let text = String::from_utf8_lossy(&bytes).into_owned();
    assert_eq!(v["text"], text.as_str());
    PathBuf::from(OsStr::from_bytes(&bytes))
}

/// Every command that prints paths, run with --json on a source, an output, a cache root and
/// an entry whose names are not UTF-8 (the real hipcc compiles): JSON comes out, and each path
/// in it is the exact one.
#[test]
fn every_json_command_prints_non_utf8_paths() {
    let dir = tempfile::tempdir().unwrap();
    // The source's directory is UTF-8: it becomes an include directory, and include
    // directories are the key record's business (tests/it/cache_key.rs).
    let src_dir = dir.path().join("src");
    std::fs::create_dir(&src_dir).unwrap();
    let src = non_utf8(&src_dir, b"k\xfe.hip");
    std::fs::write(
        &src,
        "#include <hip/hip_runtime.h>\nextern \"C\" __global__ void k(float* x) { x[threadIdx.x] = 1.0f; }\n",
    )
    .unwrap();
    let cache = non_utf8(dir.path(), b"cache-\xfd");
    let out = non_utf8(dir.path(), b"out-\xfc.hsaco");
    // The source's directory is searched for headers: one changed as the compile starts is
    // "too new" for the result to be published (hipjit::cache::manifest).
    std::thread::sleep(std::time::Duration::from_millis(60));

    let o = run(hipjit(&cache)
        .args(["compile", "--json", "--arch", "gfx90a", "-o"])
        .arg(&out)
        .arg(&src));
    let v = json_of(&o);
    let r = &v["results"][0];
    assert_eq!(json_path(&r["file"]), src);
    assert_eq!(json_path(&r["written"][0]), out);
    assert_eq!(json_path(&v["cache_roots"][0]), cache);
    let entry = json_path(&r["entry"]);
    assert!(entry.starts_with(&cache), "{}", entry.display());

    let v = json_of(&run(hipjit(&cache).args(["inspect", "--json"]).arg(&out)));
    assert_eq!(json_path(&v["file"]), out);
    assert_eq!(v["target_id"], "gfx90a");

    // Two entries: the result and its header manifest (hipjit::cache::key).
    let has_entry = |v: &serde_json::Value| {
        v["entries"]
            .as_array()
            .is_some_and(|es| es.iter().any(|e| json_path(&e["path"]) == entry))
    };
    let v = json_of(&run(hipjit(&cache).args(["cache", "list", "--json"])));
    assert!(has_entry(&v), "{v}");
    assert_eq!(json_path(&v["entries"][0]["root"]), cache);
    let v = json_of(&run(hipjit(&cache).args(["cache", "stats", "--json"])));
    assert_eq!(json_path(&v["roots"][0]["path"]), cache);
    assert_eq!(v["roots"][0]["entries"], 2);
    let v = json_of(&run(hipjit(&cache).args(["cache", "verify", "--json"])));
    assert!(has_entry(&v), "{v}");
    assert_eq!(v["bad"], 0);
    let v = json_of(&run(hipjit(&cache).args([
        "cache",
        "prune",
        "--json",
        "--max-size",
        "0",
    ])));
    assert_eq!(json_path(&v["root"]), cache);
    let v = json_of(&run(hipjit(&cache).args(["cache", "clear", "--json"])));
    assert_eq!(json_path(&v["root"]), cache);
}

// ---------------------------------------------------------------------------------------------
// -o onto what is not an ordinary output file

const KERNEL: &str =
    "#include <hip/hip_runtime.h>\nextern \"C\" __global__ void k(float* x) { x[threadIdx.x] = 1.0f; }\n";

#[test]
fn compile_o_onto_a_character_device_writes_into_it_and_leaves_it_a_device() {
    use std::os::unix::fs::FileTypeExt;
    let dir = tempfile::tempdir().unwrap();
    // A private twin of /dev/null (character device 1:3): the real one is not ours to risk.
    let null = dir.path().join("null");
    let c = CString::new(null.as_os_str().as_bytes()).unwrap();
    // SAFETY: mknod with a NUL-terminated path (the tests run as root, here and in CI).
    let rc = unsafe { libc::mknod(c.as_ptr(), libc::S_IFCHR | 0o666, libc::makedev(1, 3)) };
    assert_eq!(rc, 0, "mknod: {}", std::io::Error::last_os_error());
    let src = dir.path().join("k.hip");
    std::fs::write(&src, KERNEL).unwrap();
    let o = run(hipjit(&dir.path().join("cache"))
        .args(["compile", "--arch", "gfx90a", "-o"])
        .arg(&null)
        .arg(&src));
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let m = std::fs::symlink_metadata(&null).unwrap();
    assert!(
        m.file_type().is_char_device(),
        "{null:?} was replaced: {m:?}"
    );
}

#[test]
fn compile_o_naming_the_input_is_refused_however_spelled() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().join("d");
    std::fs::create_dir(&d).unwrap();
    let src = d.join("k.hip");
    std::fs::write(&src, KERNEL).unwrap();
    for spelling in ["d/k.hip", "./d/../d/k.hip"] {
        let o = run(hipjit(&dir.path().join("cache"))
            .current_dir(dir.path())
            .args(["compile", "--arch", "gfx90a", "-o", spelling, "d/k.hip"]));
        let e = stderr(&o);
        assert_eq!(o.status.code(), Some(2), "{spelling}: {e}");
        assert!(
            e.contains(spelling) && e.contains("is the input file"),
            "{e}"
        );
        assert_eq!(std::fs::read_to_string(&src).unwrap(), KERNEL);
    }
}

#[test]
fn compile_o_onto_a_fifo_is_refused_by_name() {
    use std::os::unix::fs::FileTypeExt;
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("out.hsaco");
    common::mkfifo(&fifo);
    let src = dir.path().join("k.hip");
    std::fs::write(&src, KERNEL).unwrap();
    let o = run(hipjit(&dir.path().join("cache"))
        .args(["compile", "--arch", "gfx90a", "-o"])
        .arg(&fifo)
        .arg(&src));
    let e = stderr(&o);
    assert_eq!(o.status.code(), Some(2), "{e}");
    assert!(e.contains("out.hsaco") && e.contains("FIFO"), "{e}");
    assert!(std::fs::symlink_metadata(&fifo)
        .unwrap()
        .file_type()
        .is_fifo());
}

// ---------------------------------------------------------------------------------------------
// Shell code through the variables hipcc pastes into its `sh -c` line

#[test]
fn shell_code_in_variables_hipcc_pastes_is_refused_naming_the_variable() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("k.hip");
    std::fs::write(&src, KERNEL).unwrap();
    let pwned = dir.path().join("pwned");
    let p = pwned.display();
    for (name, value) in [
        ("HIPCC_COMPILE_FLAGS_APPEND", format!("'; touch {p} #'")),
        ("HIP_CLANG_PATH", format!("/usr/bin;touch {p}")),
        ("ROCM_PATH", format!("/usr/$(touch {p})")),
        ("ROCM_PATH", "/opt/my rocm".to_owned()),
        // Relative: hipcc runs in a private build directory, where it would name another.
        ("HIP_CLANG_PATH", "../x/bin".to_owned()),
    ] {
        let o = run(hipjit(&dir.path().join("cache"))
            .env(name, &value)
            .args(["compile", "--compiler", "hipcc", "--arch", "gfx90a"])
            .arg(&src));
        assert_fails_naming(&o, &[name, "refusing to run hipcc"]);
        assert!(!pwned.exists(), "{name}={value} ran");
        // doctor runs every hipcc it finds: it must say why it did not, and run nothing.
        let o = run(hipjit(&dir.path().join("cache"))
            .env(name, &value)
            .args(["doctor", "--json"]));
        assert!(
            String::from_utf8_lossy(&o.stdout).contains(name),
            "doctor does not name {name}: {}",
            String::from_utf8_lossy(&o.stdout)
        );
        assert!(!pwned.exists(), "doctor with {name}={value} ran it");
    }
}

/// Runs `hipjit compile` and `hipjit doctor --json` with `HIPJIT_HIPCC=hipcc`, `HOME` the
/// test's directory and `env`, and asserts that neither ran `pwned`'s payload and that each
/// refused hipcc, saying `why`.
fn assert_hipcc_refused(dir: &Path, hipcc: &Path, env: &[(&str, &str)], why: &str) {
    let src = dir.join("k.hip");
    std::fs::write(&src, KERNEL).unwrap();
    let pwned = dir.join("pwned");
    for args in [
        &["compile", "--compiler", "hipcc", "--arch", "gfx90a", "-o"][..],
        &["doctor", "--json"][..],
    ] {
        let mut cmd = hipjit(&dir.join("cache"));
        cmd.env("HIPJIT_HIPCC", hipcc)
            .env("HOME", dir)
            .env("XDG_CACHE_HOME", dir.join("xdg"))
            .envs(env.iter().copied())
            .args(args);
        if args[0] == "compile" {
            cmd.arg(dir.join("k.co")).arg(&src);
        }
        let o = run(&mut cmd);
        let said = format!("{}{}", stderr(&o), String::from_utf8_lossy(&o.stdout));
        assert!(!pwned.exists(), "{args:?} ran hipcc's shell line: {said}");
        assert!(
            said.contains("refusing to run hipcc: ") && said.contains(why),
            "{args:?}: {said}"
        );
    }
}

/// The directory name of the stand-in installations below: `cd` first, since the shell runs
/// in hipcc's working directory; `HOME` is the test's directory, where `pwned` appears.
const PAYLOAD_DIR: &str = "u$(cd;touch pwned)";

/// Copies Debian's hipcc scripts (`hipcc`, `hipcc.pl`, `hipvars.pm`) into `bin`.
fn hipcc_scripts(bin: &Path) {
    std::fs::create_dir_all(bin).unwrap();
    for f in ["hipcc", "hipcc.pl", "hipvars.pm"] {
        std::fs::copy(Path::new("/usr/bin").join(f), bin.join(f)).unwrap();
    }
}

/// hipcc 5.2.3 pastes the directory it derives from its own location into its `sh -c` line
/// unquoted: a hipcc installed under a path holding shell syntax is refused by path before it
/// runs (compile and doctor). The stand-in installation is a copy of Debian's hipcc scripts
/// under `u$(cd;touch pwned)/bin`, with `HIP_CLANG_PATH` naming Debian's clang, which ran the
/// command before the check.
#[test]
fn a_hipcc_installed_under_a_path_holding_shell_syntax_is_refused_by_path() {
    let dir = tempfile::tempdir().unwrap();
    let bin = dir.path().join(PAYLOAD_DIR).join("bin");
    hipcc_scripts(&bin);
    assert_hipcc_refused(
        dir.path(),
        &bin.join("hipcc"),
        &[("HIP_CLANG_PATH", "/usr/lib/llvm-15/bin")],
        "the path holds `$`",
    );
}

/// hipcc 5.2.3's `hipcc` runs the `hipcc.pl` beside it, which takes the installation from its
/// own real path: a clean `hipcc` whose `hipcc.pl` links into a directory holding shell syntax
/// is refused, naming `hipcc.pl` (it ran the command before the check).
#[test]
fn a_clean_hipcc_beside_a_hipcc_pl_linked_into_shell_syntax_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let hostile = dir.path().join(PAYLOAD_DIR).join("bin");
    hipcc_scripts(&hostile);
    let clean = dir.path().join("clean/bin");
    std::fs::create_dir_all(&clean).unwrap();
    std::fs::copy("/usr/bin/hipcc", clean.join("hipcc")).unwrap();
    std::os::unix::fs::symlink(hostile.join("hipcc.pl"), clean.join("hipcc.pl")).unwrap();
    assert_hipcc_refused(
        dir.path(),
        &clean.join("hipcc"),
        &[("HIP_CLANG_PATH", "/usr/lib/llvm-15/bin")],
        "hipcc.pl beside it holds `$`",
    );
}

/// A clean stand-in installation of Debian's hipcc at `root`: its scripts in `bin` with links
/// to Debian's clang, `include` a link to `/usr/include`; no `lib`.
fn clean_hipcc_installation(root: &Path) {
    hipcc_scripts(&root.join("bin"));
    for t in [
        "clang++-15",
        "clang-15",
        "clang++",
        "clang",
        "rocm_agent_enumerator",
    ] {
        std::os::unix::fs::symlink(Path::new("/usr/bin").join(t), root.join("bin").join(t))
            .unwrap();
    }
    std::os::unix::fs::symlink("/usr/include", root.join("include")).unwrap();
}

/// Perl's `abs_path` resolves a path whose last part does not exist: a clang version directory
/// linked to an empty directory holding `$(...)` (no `include` in it) is pasted all the same,
/// so it is refused too (it ran the command before the check).
#[test]
fn a_hipcc_whose_clang_version_directory_links_into_shell_syntax_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("clean");
    clean_hipcc_installation(&root);
    let hostile = dir.path().join(PAYLOAD_DIR);
    std::fs::create_dir_all(&hostile).unwrap();
    std::fs::create_dir_all(root.join("lib/clang")).unwrap();
    std::os::unix::fs::symlink(&hostile, root.join("lib/clang/15.0.6")).unwrap();
    assert_hipcc_refused(
        dir.path(),
        &root.join("bin/hipcc"),
        &[],
        "its clang's resource directory holds `$`",
    );
}

/// hipcc 5.2.3 takes its device libraries from the first `$ROCM_PATH/lib/*/amdgcn/bitcode`
/// (Debian's layout) and pastes the path in double quotes: a `lib` entry named with `$(...)`
/// linking to Debian's libraries is refused (it ran the command before the check).
#[test]
fn a_hipcc_whose_device_library_directory_is_named_with_shell_syntax_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("clean");
    clean_hipcc_installation(&root);
    std::fs::create_dir_all(root.join("lib")).unwrap();
    std::os::unix::fs::symlink("/usr/lib/clang", root.join("lib/clang")).unwrap();
    std::os::unix::fs::symlink(
        "/usr/lib/x86_64-linux-gnu",
        root.join("lib").join(PAYLOAD_DIR),
    )
    .unwrap();
    assert_hipcc_refused(
        dir.path(),
        &root.join("bin/hipcc"),
        &[],
        "a device library directory it may take holds `$`",
    );
}

/// hipcc 5.2.3 pastes `abs_path("$HIP_CLANG_PATH/../lib/clang/<version>/include")`, links
/// resolved, in double quotes: a clean installation whose clang resource include directory
/// links into a directory holding `$(...)` is refused once `--version` has named clang's
/// directory, before hipcc's probes (which ran the command before the check).
#[test]
fn a_hipcc_whose_clang_include_directory_links_into_shell_syntax_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("clean");
    clean_hipcc_installation(&root);
    let hostile = dir.path().join(PAYLOAD_DIR);
    std::fs::create_dir_all(&hostile).unwrap();
    std::fs::create_dir_all(root.join("lib/clang/15.0.6")).unwrap();
    std::os::unix::fs::symlink(&hostile, root.join("lib/clang/15.0.6/include")).unwrap();
    assert_hipcc_refused(
        dir.path(),
        &root.join("bin/hipcc"),
        &[],
        "its clang's resource directory holds `$`",
    );
}

/// nvcc writes its own directory (the resolved one) in double quotes into its shell lines:
/// a toolkit under a directory holding `$(...)` is refused by path, and nothing runs. The
/// stand-in is the PyPI toolkit hard-linked (copied where links cannot be made) under
/// `tk$(cd;touch pwned)`, which ran the command before the check.
#[test]
fn an_nvcc_installed_under_a_path_holding_shell_syntax_is_refused_by_path() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("k.hip");
    std::fs::write(&src, KERNEL).unwrap();
    let pwned = dir.path().join("pwned");
    let toolkit = common::toolchain::pypi_toolkit();
    // `cd` first: nvcc's shell runs in its build directory; HOME is the test's directory.
    let copy = dir.path().join("tk$(cd;touch pwned)");
    let linked = Command::new("cp")
        .arg("-al")
        .arg(&toolkit)
        .arg(&copy)
        .status()
        .unwrap();
    if !linked.success() {
        let _ = std::fs::remove_dir_all(&copy);
        assert!(Command::new("cp")
            .arg("-a")
            .arg(&toolkit)
            .arg(&copy)
            .status()
            .unwrap()
            .success());
    }
    let o = run(hipjit(&dir.path().join("cache"))
        .env("HIPJIT_NVCC", copy.join("bin/nvcc"))
        .env("HOME", dir.path())
        .env("XDG_CACHE_HOME", dir.path().join("xdg"))
        .args(["compile", "--compiler", "nvcc", "--arch", "sm_90", "-o"])
        .arg(dir.path().join("k.cubin"))
        .arg(&src));
    assert!(!pwned.exists(), "nvcc's shell line ran: {}", stderr(&o));
    assert_fails_naming(
        &o,
        &[
            "refusing to run nvcc: the path holds `$`",
            "the path holds `$`",
        ],
    );
}

/// `hipjit doctor` runs the hipcc it checked: a relative `HIPJIT_HIPCC` is resolved once, from
/// the working directory, not again from the temporary directory of its `<hip/hip_runtime.h>`
/// probe, where the same relative path names a hipcc under a directory holding `$(...)` (it ran
/// the command before the fix).
#[test]
fn doctor_runs_the_relative_hipcc_it_checked_not_another_from_its_probe_directory() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    hipcc_scripts(&d.join("clean/bin"));
    hipcc_scripts(&d.join(PAYLOAD_DIR).join("bin"));
    for sub in ["cwd", "tmpd"] {
        std::fs::create_dir_all(d.join(sub)).unwrap();
    }
    std::os::unix::fs::symlink(d.join("clean"), d.join("x")).unwrap();
    std::os::unix::fs::symlink(d.join(PAYLOAD_DIR), d.join("tmpd/x")).unwrap();
    let o = run(hipjit(&d.join("cache"))
        .current_dir(d.join("cwd"))
        .env("TMPDIR", d.join("tmpd"))
        .env("HOME", d)
        .env("HIP_CLANG_PATH", "/usr/lib/llvm-15/bin")
        .env("HIPJIT_HIPCC", "../x/bin/hipcc")
        .args(["doctor", "--json"]));
    assert!(
        !d.join("pwned").exists(),
        "doctor ran another hipcc: {}",
        String::from_utf8_lossy(&o.stdout)
    );
}

/// A relative `HIPJIT_NVCC` names nvcc from the working directory, though nvcc runs in its
/// build directory (it failed to start: "No such file or directory").
#[test]
fn a_relative_hipjit_nvcc_is_taken_from_the_working_directory() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    std::fs::create_dir_all(d.join("cwd")).unwrap();
    std::os::unix::fs::symlink(common::toolchain::pypi_toolkit(), d.join("cwd/tk")).unwrap();
    let src = d.join("k.hip");
    std::fs::write(&src, KERNEL).unwrap();
    let o = run(hipjit(&d.join("cache"))
        .current_dir(d.join("cwd"))
        .env("XDG_CACHE_HOME", d.join("xdg"))
        .env("HIPJIT_NVCC", "tk/bin/nvcc")
        .args(["compile", "--compiler", "nvcc", "--arch", "sm_90", "-o"])
        .arg(d.join("k.cubin"))
        .arg(&src));
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(d.join("k.cubin").is_file());
}

/// A hipcc remembered (identity and cache) while clean, whose `hipcc.pl` link is then moved
/// into a directory holding `$(...)`: the next compile (a miss) refuses it before running it.
#[test]
fn a_hipcc_pl_link_moved_after_a_clean_compile_is_refused_at_the_next_compile() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let clean = d.join("clean/bin");
    std::fs::create_dir_all(&clean).unwrap();
    std::fs::copy("/usr/bin/hipcc", clean.join("hipcc")).unwrap();
    std::os::unix::fs::symlink("/usr/bin/hipcc.pl", clean.join("hipcc.pl")).unwrap();
    let compile = |source: &str| {
        let src = d.join("k.hip");
        std::fs::write(&src, source).unwrap();
        run(hipjit(&d.join("cache"))
            .env("HIPJIT_HIPCC", clean.join("hipcc"))
            .env("HOME", d)
            .env("XDG_CACHE_HOME", d.join("xdg"))
            .env("HIP_CLANG_PATH", "/usr/lib/llvm-15/bin")
            .args(["compile", "--compiler", "hipcc", "--arch", "gfx90a", "-o"])
            .arg(d.join("k.co"))
            .arg(&src))
    };
    let first = compile(KERNEL);
    assert!(first.status.success(), "{}", stderr(&first));
    let hostile = d.join(PAYLOAD_DIR).join("bin");
    hipcc_scripts(&hostile);
    std::fs::remove_file(clean.join("hipcc.pl")).unwrap();
    std::os::unix::fs::symlink(hostile.join("hipcc.pl"), clean.join("hipcc.pl")).unwrap();
    let second = compile(&format!("{KERNEL}\n// another source: a miss\n"));
    assert!(!d.join("pwned").exists(), "{}", stderr(&second));
    assert_fails_naming(
        &second,
        &["refusing to run hipcc: hipcc.pl beside it holds `$`"],
    );
}

/// hipcc 7 takes `<working directory>/../lib/bitcode`, when it exists, as its device library
/// directory and pastes its path, resolved, into its shell line (measured with hipcc 7.0.2: a
/// `lib/bitcode` planted in `TMPDIR` reached clang; a `TMPDIR` linking to a directory holding
/// `$(...)` ran it). hipcc runs in a directory whose parent holds nothing else, below `TMPDIR`
/// resolved, and only where that resolved path is shell-safe. The stand-in hipcc records where
/// it compiles: its resolved working directory and its parent's entries.
#[test]
fn hipcc_runs_in_a_private_parent_below_a_resolved_shell_safe_temporary_directory() {
    use common::installation::{installation, Compile};
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let hipcc = installation(&d.join("inst"), "9.9", Compile::CopyCodeObject);
    let script = std::fs::read_to_string(&hipcc).unwrap();
    let script = script.replacen(
        "#!/bin/sh\n",
        "#!/bin/sh\ncase \"$1\" in --version|-###|-fsyntax-only) ;; \
         *) { pwd -P; ls -A ..; } >> \"$HOME/seen\";; esac\n",
        1,
    );
    std::fs::write(&hipcc, script).unwrap();
    let hostile = d.join("q$(x)");
    std::fs::create_dir_all(hostile.join("lib/bitcode")).unwrap();
    std::os::unix::fs::symlink(&hostile, d.join("t")).unwrap();
    let src = d.join("k.hip");
    std::fs::write(&src, KERNEL).unwrap();
    let o = run(hipjit(&d.join("cache"))
        .env("HIPJIT_HIPCC", &hipcc)
        .env("HOME", d)
        .env("XDG_CACHE_HOME", d.join("xdg"))
        .env("TMPDIR", d.join("t"))
        .args(["compile", "--compiler", "hipcc", "--arch", "gfx90a", "-o"])
        .arg(d.join("k.co"))
        .arg(&src));
    assert!(o.status.success(), "{}", stderr(&o));
    let seen = std::fs::read_to_string(d.join("seen")).unwrap();
    let mut lines = seen.lines();
    let cwd = lines.next().unwrap();
    assert!(
        !cwd.contains('$'),
        "hipcc ran below the link's target: {seen}"
    );
    assert_eq!(
        lines.collect::<Vec<_>>(),
        ["b"],
        "the run directory's parent: {seen}"
    );
}
