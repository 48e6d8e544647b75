//! The CUDA toolkit headers an NVRTC compile reads are keyed one by one, as nvcc's are: NVRTC
//! reports no dependency list, so hipjit observes the files it opens below the toolkit's
//! `include` (inotify) and lists them in the header manifest. Run through the `hipjit` command
//! with PyPI's NVRTC 13 (`HIPJIT_NVRTC_LIBRARY`) beside a private copy of the toolkit's headers,
//! which the tests change: a header edited in place (same inode, its directory untouched) is a
//! miss, a header added to the tree is a miss, and a hit checks the few headers read rather than
//! every directory of the tree. Also where NVRTC looks a quoted `#include` up: never in the
//! working directory (unkeyed), always beside the header that includes it.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use crate::common;

// PyPI's nvidia/cu13 directory (lib/ with NVRTC, include/ with the toolkit headers).
use common::toolchain::pypi_toolkit as pypi_cu13;

/// `cmd` made `compile --compiler nvrtc --arch sm_90` with NVRTC at `lib`, the cache root and
/// identities under `home`, and no other compiler or toolkit variable; the caller adds the rest.
fn nvrtc_compile<'a>(cmd: &'a mut Command, home: &Path, lib: &Path) -> &'a mut Command {
    cmd.args(["compile", "--compiler", "nvrtc", "--arch", "sm_90"])
        .env("HIPJIT_NVRTC_LIBRARY", lib)
        .env("HIPJIT_CACHE_DIR", home.join("cache"))
        .env("XDG_CACHE_HOME", home.join("xdg"))
        .env_remove("HIPJIT_COMPILER")
        .env_remove("CUDA_PATH")
        .env_remove("CUDA_HOME")
}

/// Copies the directory tree `src` to `dst` (files copied, symbolic links kept as links).
fn copy_tree(src: &Path, dst: &Path) {
    std::fs::create_dir_all(dst).unwrap();
    for e in std::fs::read_dir(src).unwrap() {
        let e = e.unwrap();
        let (from, to) = (e.path(), dst.join(e.file_name()));
        let t = e.file_type().unwrap();
        if t.is_symlink() {
            std::os::unix::fs::symlink(std::fs::read_link(&from).unwrap(), &to).unwrap();
        } else if t.is_dir() {
            copy_tree(&from, &to);
        } else {
            std::fs::copy(&from, &to).unwrap();
        }
    }
}

/// A toolkit at `prefix`: `lib/` holds symbolic links to PyPI's NVRTC and its builtins (never
/// written), `include/` a copy of the headers. Returns the NVRTC library's path there.
fn toolkit(prefix: &Path) -> PathBuf {
    let cu13 = pypi_cu13();
    std::fs::create_dir_all(prefix.join("lib")).unwrap();
    for e in std::fs::read_dir(cu13.join("lib")).unwrap() {
        let e = e.unwrap();
        let name = e.file_name();
        if name.to_string_lossy().starts_with("libnvrtc") {
            std::os::unix::fs::symlink(e.path(), prefix.join("lib").join(&name)).unwrap();
        }
    }
    copy_tree(&cu13.join("include"), &prefix.join("include"));
    let lib = prefix.join("lib/libnvrtc.so.13");
    assert!(lib.exists(), "no libnvrtc.so.13 in {}", cu13.display());
    lib
}

/// Reads the toolkit's `vector_types.h` (NVRTC 13 has `cuda_fp16.h` and `cuda_runtime.h`
/// built in: it reads no file for them).
const VECTORS: &str = "#include <vector_types.h>\n\
    extern \"C\" __global__ void v(float4* x) { x[0] = make_float4(1, 2, 3, 4); }\n";

/// `hipjit compile --compiler nvrtc --arch sm_90 SRC -o HOME/out.cubin` with NVRTC at `lib`,
/// the cache root and identities under `home`, optionally under
/// `strace -f -e trace=TRACE -o LOG`; its stdout.
fn compile(home: &Path, lib: &Path, src: &Path, strace: Option<(&str, &Path)>) -> String {
    let cmd = match strace {
        Some((trace, log)) => {
            let mut c = Command::new("strace");
            c.args(["-f", "-qq", "-y", "-e", &format!("trace={trace}"), "-o"])
                .arg(log)
                .arg(env!("CARGO_BIN_EXE_hipjit"));
            c
        }
        None => Command::new(env!("CARGO_BIN_EXE_hipjit")),
    };
    compile_with(cmd, home, lib, src, &home.join("out.cubin"), |_| {})
}

/// `cmd` (the `hipjit` binary, or a wrapper running it) made `compile --compiler nvrtc --arch
/// sm_90` as [`nvrtc_compile`] makes it, then `setup` adding arguments or variables, then
/// `-o OUT SRC`; asserts that it succeeded and returns its stdout.
fn compile_with(
    mut cmd: Command,
    home: &Path,
    lib: &Path,
    src: &Path,
    out: &Path,
    setup: impl FnOnce(&mut Command),
) -> String {
    std::fs::create_dir_all(home).unwrap();
    nvrtc_compile(&mut cmd, home, lib);
    setup(&mut cmd);
    let o: Output = cmd
        .arg("-o")
        .arg(out)
        .arg(src)
        .output()
        .unwrap_or_else(|e| panic!("cannot run hipjit ({e}); strace: apt-get install strace"));
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// The `hipjit` binary, as a command to set up.
fn hipjit() -> Command {
    Command::new(env!("CARGO_BIN_EXE_hipjit"))
}

fn assert_origin(stdout: &str, origin: &str, what: &str) {
    assert!(
        stdout.contains(origin),
        "{what}: expected {origin}: {stdout}"
    );
}

#[test]
fn a_toolkit_header_edited_in_place_or_added_is_a_miss_and_a_hit_checks_only_what_was_read() {
    let dir = tempfile::tempdir().unwrap();
    let (home, prefix) = (dir.path().join("home"), dir.path().join("cuda"));
    let lib = toolkit(&prefix);
    // In a directory of its own: NVRTC keys every file under the source's directory.
    std::fs::create_dir(dir.path().join("src")).unwrap();
    let src = dir.path().join("src/vectors.hip");
    std::fs::write(&src, VECTORS).unwrap();

    assert_origin(
        &compile(&home, &lib, &src, None),
        "miss",
        "the first compile",
    );
    let log = dir.path().join("strace.log");
    let hit = compile(
        &home,
        &lib,
        &src,
        Some(("stat,lstat,newfstatat,statx,openat,open", &log)),
    );
    assert_origin(&hit, "hit (disk)", "the same compile again");
    // The hit looks at the header it read and its directory, not at each of the toolkit's
    // ~150 directories.
    let log = std::fs::read_to_string(&log).unwrap();
    let include = prefix.join("include").canonicalize().unwrap();
    // A path below it, or a name relative to a descriptor of it (`5</.../include>`, strace -y).
    let below = |l: &&str| {
        l.contains(&format!("{}/", include.display()))
            || l.contains(&format!("{}>", include.display()))
    };
    let touched: Vec<&str> = log.lines().filter(below).collect();
    assert!(
        log.lines()
            .any(|l| below(&l) && l.contains("vector_types.h")),
        "the hit did not check vector_types.h:\n{}",
        touched.join("\n")
    );
    assert!(
        !log.lines().any(|l| below(&l) && l.contains("/cccl/")),
        "the hit looked into headers the compile never read:\n{}",
        touched.join("\n")
    );
    assert!(
        touched.len() < 40,
        "{} system calls below the toolkit's include on a hit:\n{}",
        touched.len(),
        touched.join("\n")
    );

    // Edited in place: the same inode, its directory's listing and times untouched.
    let hpp = prefix.join("include/vector_types.h");
    let ino = std::os::unix::fs::MetadataExt::ino(&std::fs::metadata(&hpp).unwrap());
    let mut f = std::fs::OpenOptions::new().append(true).open(&hpp).unwrap();
    std::io::Write::write_all(&mut f, b"\n#define HIPJIT_TEST_EDITED_IN_PLACE 1\n").unwrap();
    drop(f);
    assert_eq!(
        std::os::unix::fs::MetadataExt::ino(&std::fs::metadata(&hpp).unwrap()),
        ino
    );
    assert_origin(
        &compile(&home, &lib, &src, None),
        "miss",
        "after vector_types.h was edited in place",
    );
    assert_origin(&compile(&home, &lib, &src, None), "hit (disk)", "once more");

    // A header of a name nothing looks up, added at the top of the tree, changes nothing.
    std::fs::write(prefix.join("include/added.h"), "#define ADDED 1\n").unwrap();
    assert_origin(
        &compile(&home, &lib, &src, None),
        "hit (disk)",
        "after a header nothing includes was added to the toolkit's include",
    );
    // One of the name the source includes, in a directory searched for it, is a miss.
    std::fs::write(
        prefix.join("include/cccl/vector_types.h"),
        "#define SHADOW 1\n",
    )
    .unwrap();
    assert_origin(
        &compile(&home, &lib, &src, None),
        "miss",
        "after a vector_types.h was added to a directory searched for it",
    );
}

#[test]
fn a_source_reading_no_toolkit_header_hits_without_looking_into_the_toolkit() {
    let dir = tempfile::tempdir().unwrap();
    let (home, prefix) = (dir.path().join("home"), dir.path().join("cuda"));
    let lib = toolkit(&prefix);
    std::fs::create_dir(dir.path().join("src")).unwrap();
    let src = dir.path().join("src/saxpy.hip");
    std::fs::write(
        &src,
        "#include <hip/hip_runtime.h>\n\
         extern \"C\" __global__ void s(float a, float* y) { y[threadIdx.x] *= a; }\n",
    )
    .unwrap();
    assert_origin(
        &compile(&home, &lib, &src, None),
        "miss",
        "the first compile",
    );
    let log = dir.path().join("strace.log");
    let hit = compile(
        &home,
        &lib,
        &src,
        Some(("stat,lstat,newfstatat,statx,openat,open", &log)),
    );
    assert_origin(&hit, "hit (disk)", "the same compile again");
    let log = std::fs::read_to_string(&log).unwrap();
    let include = prefix.join("include").canonicalize().unwrap();
    let below: Vec<&str> = log
        .lines()
        .filter(|l| {
            l.contains(&format!("{}/", include.display()))
                || l.contains(&format!("{}>, \"", include.display()))
        })
        // The search directories themselves: the toolkit's include and CCCL's below it.
        .filter(|l| {
            !l.contains(&format!("{}>, \"cccl\"", include.display()))
                && !l.contains(&format!("\"{}/cccl\"", include.display()))
        })
        .collect();
    assert!(
        below.is_empty(),
        "the hit looked below the toolkit's include:\n{}",
        below.join("\n")
    );
}

#[test]
fn a_quoted_include_is_not_looked_up_in_the_working_directory_but_beside_its_header() {
    let dir = tempfile::tempdir().unwrap();
    let (src_dir, cwd, inc) = (
        dir.path().join("src"),
        dir.path().join("cwd"),
        dir.path().join("inc"),
    );
    for d in [&src_dir, &cwd, &inc] {
        std::fs::create_dir(d).unwrap();
    }
    // In the working directory only: NVRTC's default would read it, unkeyed.
    std::fs::write(cwd.join("local.h"), "#define FROM_CWD 1\n").unwrap();
    let src = src_dir.join("k.hip");
    std::fs::write(
        &src,
        "#include \"local.h\"\nextern \"C\" __global__ void k(int* x) { x[0] = FROM_CWD; }\n",
    )
    .unwrap();
    let run = |src: &Path, extra: &[&str]| {
        nvrtc_compile(
            &mut Command::new(env!("CARGO_BIN_EXE_hipjit")),
            dir.path(),
            &pypi_cu13().join("lib/libnvrtc.so.13"),
        )
        .args(extra)
        .arg("-o")
        .arg(dir.path().join("out.cubin"))
        .arg(src)
        .current_dir(&cwd)
        .output()
        .unwrap()
    };
    let out = run(&src, &[]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains("cannot open source file \"local.h\"") && err.contains("k.hip"),
        "{err}"
    );
    // The program's scratch name is not shown: the source is named as the user gave it.
    assert!(!err.contains("hipjit-nvrtc-"), "{err}");

    // A header's own quoted include is found beside it (as the toolkit's mma.h needs).
    std::fs::write(inc.join("outer.h"), "#include \"inner.h\"\n").unwrap();
    std::fs::write(inc.join("inner.h"), "#define FROM_INNER 2\n").unwrap();
    std::fs::write(
        &src,
        "#include <outer.h>\nextern \"C\" __global__ void k(int* x) { x[0] = FROM_INNER; }\n",
    )
    .unwrap();
    let out = run(&src, &["-I", inc.to_str().unwrap()]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn the_callers_headers_come_before_the_toolkits_of_the_same_name() {
    let dir = tempfile::tempdir().unwrap();
    let (src_dir, inc) = (dir.path().join("src"), dir.path().join("inc"));
    std::fs::create_dir(&src_dir).unwrap();
    std::fs::create_dir(&inc).unwrap();
    // Beside the source (a quoted include), and in a -I directory (an angled one), each named as
    // a toolkit header: nvcc takes these, so NVRTC must too.
    std::fs::write(src_dir.join("vector_types.h"), "#define LOCAL_VT 1\n").unwrap();
    std::fs::write(inc.join("cuda_pipeline.h"), "#define USER_PIPELINE 1\n").unwrap();
    let src = src_dir.join("k.hip");
    std::fs::write(
        &src,
        "#include \"vector_types.h\"\n#include <cuda_pipeline.h>\n\
         #if !defined(LOCAL_VT) || !defined(USER_PIPELINE)\n#error the toolkit's header was taken\n#endif\n\
         extern \"C\" __global__ void k(int* x) { x[0] = LOCAL_VT + USER_PIPELINE; }\n",
    )
    .unwrap();
    let out = nvrtc_compile(
        &mut Command::new(env!("CARGO_BIN_EXE_hipjit")),
        dir.path(),
        &pypi_cu13().join("lib/libnvrtc.so.13"),
    )
    .arg("-I")
    .arg(&inc)
    .arg("-o")
    .arg(dir.path().join("out.cubin"))
    .arg(&src)
    .output()
    .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn a_toolkit_header_that_is_a_link_is_keyed_through_the_link() {
    let dir = tempfile::tempdir().unwrap();
    let (home, prefix) = (dir.path().join("home"), dir.path().join("cuda"));
    let lib = toolkit(&prefix);
    std::fs::create_dir(dir.path().join("src")).unwrap();
    let src = dir.path().join("src/vectors.hip");
    std::fs::write(&src, VECTORS).unwrap();
    let include = prefix.join("include");
    let original = std::fs::read(include.join("vector_types.h")).unwrap();
    // A link inside the tree, as toolkits assembled from links have.
    std::fs::write(include.join("crt/vt_a.h"), &original).unwrap();
    let mut other = original.clone();
    other.extend_from_slice(b"\n#define HIPJIT_TEST_OTHER_TARGET 1\n");
    std::fs::write(include.join("crt/vt_b.h"), &other).unwrap();
    std::fs::remove_file(include.join("vector_types.h")).unwrap();
    std::os::unix::fs::symlink("crt/vt_a.h", include.join("vector_types.h")).unwrap();
    assert_origin(
        &compile(&home, &lib, &src, None),
        "miss",
        "the first compile",
    );
    assert_origin(&compile(&home, &lib, &src, None), "hit (disk)", "again");
    let retarget = |to: &Path| {
        let tmp = include.join(".link");
        std::os::unix::fs::symlink(to, &tmp).unwrap();
        std::fs::rename(&tmp, include.join("vector_types.h")).unwrap();
    };
    retarget(Path::new("crt/vt_b.h"));
    assert_origin(
        &compile(&home, &lib, &src, None),
        "miss",
        "after the link was pointed at another file",
    );
    // A link out of the tree: its target is read, and keyed.
    let outside = dir.path().join("elsewhere");
    std::fs::create_dir(&outside).unwrap();
    std::fs::write(outside.join("vector_types.h"), &original).unwrap();
    retarget(&outside.join("vector_types.h"));
    assert_origin(
        &compile(&home, &lib, &src, None),
        "miss",
        "pointed out of the tree",
    );
    assert_origin(&compile(&home, &lib, &src, None), "hit (disk)", "again");
    let mut f = std::fs::OpenOptions::new()
        .append(true)
        .open(outside.join("vector_types.h"))
        .unwrap();
    std::io::Write::write_all(&mut f, b"\n#define HIPJIT_TEST_EDITED_OUTSIDE 1\n").unwrap();
    drop(f);
    assert_origin(
        &compile(&home, &lib, &src, None),
        "miss",
        "after the link's target outside the tree was edited in place",
    );
}

/// Whether process `pid` holds an inotify descriptor with watches: NVRTC's compile is running
/// (the toolkit's headers are watched only around it).
fn watching(pid: u32) -> bool {
    std::fs::read_dir(format!("/proc/{pid}/fdinfo"))
        .into_iter()
        .flatten()
        .flatten()
        .any(|e| std::fs::read_to_string(e.path()).is_ok_and(|t| t.contains("inotify wd:")))
}

#[test]
fn sigint_during_an_in_process_compile_leaves_no_output() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("src")).unwrap();
    let src = dir.path().join("src/cg.hip");
    // Seconds of NVRTC work: cooperative groups through CCCL.
    std::fs::write(
        &src,
        "#include <cooperative_groups.h>\nnamespace cg = cooperative_groups;\n\
         extern \"C\" __global__ void k(float* x) { cg::this_thread_block().sync(); x[0] = 1; }\n",
    )
    .unwrap();
    let out = dir.path().join("out.cubin");
    std::fs::write(&out, b"an older output").unwrap();
    let mut child = nvrtc_compile(
        &mut Command::new(env!("CARGO_BIN_EXE_hipjit")),
        dir.path(),
        &pypi_cu13().join("lib/libnvrtc.so.13"),
    )
    .arg("-o")
    .arg(&out)
    .arg(&src)
    .stderr(std::process::Stdio::piped())
    .spawn()
    .unwrap();
    let started = std::time::Instant::now();
    while !watching(child.id()) {
        assert!(
            child.try_wait().unwrap().is_none(),
            "hipjit ended before NVRTC compiled"
        );
        assert!(started.elapsed() < std::time::Duration::from_secs(60));
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    // SAFETY: kill(2) on the pid of a child this test started and has not reaped.
    assert_eq!(unsafe { libc::kill(child.id() as i32, libc::SIGINT) }, 0);
    let o = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(130), "{err}");
    assert!(!out.exists(), "an output was left after SIGINT: {err}");
}

#[test]
fn a_toolkit_moved_elsewhere_hits_and_a_moved_toolkit_with_a_changed_header_misses() {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("home");
    // The same toolkit installed under two prefixes, as on two nodes sharing a cache.
    let (a, b, c) = (
        dir.path().join("node-a/cuda"),
        dir.path().join("node-b/opt/cuda-13"),
        dir.path().join("node-c/cuda"),
    );
    let (lib_a, lib_b, lib_c) = (toolkit(&a), toolkit(&b), toolkit(&c));
    std::fs::create_dir(dir.path().join("src")).unwrap();
    let src = dir.path().join("src/vectors.hip");
    std::fs::write(&src, VECTORS).unwrap();

    assert_origin(&compile(&home, &lib_a, &src, None), "miss", "under node-a");
    let first = std::fs::read(home.join("out.cubin")).unwrap();
    assert_origin(
        &compile(&home, &lib_b, &src, None),
        "hit (disk)",
        "the same toolkit under node-b/opt/cuda-13",
    );
    assert_eq!(std::fs::read(home.join("out.cubin")).unwrap(), first);

    // Under node-c the header the source reads differs: its own content is keyed.
    let h = c.join("include/vector_types.h");
    let mut text = std::fs::read_to_string(&h).unwrap();
    text.push_str("\n#define HIPJIT_TEST_NODE_C 1\n");
    std::fs::write(&h, text).unwrap();
    assert_origin(
        &compile(&home, &lib_c, &src, None),
        "miss",
        "node-c, whose vector_types.h differs",
    );
}

#[test]
fn a_fifo_in_the_toolkits_headers_is_refused_before_nvrtc_runs_not_waited_on() {
    let dir = tempfile::tempdir().unwrap();
    let (home, prefix) = (dir.path().join("home"), dir.path().join("cuda"));
    let lib = toolkit(&prefix);
    std::fs::create_dir_all(&home).unwrap();
    let fifo = prefix.join("include/crt/planted.h");
    let c = std::ffi::CString::new(fifo.as_os_str().as_encoded_bytes()).unwrap();
    // SAFETY: mkfifo with a NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0, "mkfifo");
    std::fs::create_dir(dir.path().join("src")).unwrap();
    let src = dir.path().join("src/planted.hip");
    // Without the refusal, NVRTC in process would block opening it, with no timeout.
    std::fs::write(
        &src,
        "#include <crt/planted.h>\nextern \"C\" __global__ void k() {}\n",
    )
    .unwrap();
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_hipjit"));
    let mut child = nvrtc_compile(&mut cmd, &home, &lib)
        .arg("-o")
        .arg(home.join("out.cubin"))
        .arg(&src)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let started = std::time::Instant::now();
    while child.try_wait().unwrap().is_none() {
        if started.elapsed() > std::time::Duration::from_secs(90) {
            child.kill().unwrap();
            child.wait().unwrap();
            panic!("hipjit compile waited on the FIFO in the toolkit's headers");
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("planted.h") && stderr.contains("FIFO"),
        "the error names the FIFO: {stderr}"
    );
    assert!(!home.join("out.cubin").exists(), "no output");
}

/// `hipjit compile` as [`compile`] with the extra flags `flags` (`--cflag`), writing `out`.
fn compile_flags(home: &Path, lib: &Path, src: &Path, flags: &[&str], out: &Path) -> String {
    compile_with(hipjit(), home, lib, src, out, |cmd| {
        for f in flags {
            cmd.arg(format!("--cflag={f}"));
        }
    })
}

#[test]
fn line_tables_asked_by_extra_flags_keep_the_toolkit_directories_in_the_key() {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("home");
    let (a, b) = (
        dir.path().join("node-a/cuda"),
        dir.path().join("node-b/cuda"),
    );
    let (lib_a, lib_b) = (toolkit(&a), toolkit(&b));
    // A device function of a toolkit header that stays a call: the line tables name its file.
    for prefix in [&a, &b] {
        std::fs::create_dir(prefix.join("include/hipjit_test")).unwrap();
        std::fs::write(
            prefix.join("include/hipjit_test/twice.h"),
            "__device__ __noinline__ float twice(float x) { return 2 * x; }\n",
        )
        .unwrap();
    }
    std::fs::create_dir(dir.path().join("src")).unwrap();
    let src = dir.path().join("src/twice.hip");
    std::fs::write(
        &src,
        "#include <hipjit_test/twice.h>\n\
         extern \"C\" __global__ void k(float* x) { x[threadIdx.x] = twice(x[threadIdx.x]); }\n",
    )
    .unwrap();
    // Line tables name the toolkit's headers by their absolute paths: a cubin made under
    // node-a must not serve node-b. One extra flag, then two (the key once dropped as many of
    // hipjit's own trailing flags, the toolkit's `-I`s, as there were extra flags).
    for flags in [&["-lineinfo"][..], &["-G", "-DHIPJIT_TEST_X=1"][..]] {
        let (out_a, out_b) = (home.join("a.cubin"), home.join("b.cubin"));
        let first = compile_flags(&home, &lib_a, &src, flags, &out_a);
        assert_origin(&first, "miss", &format!("{flags:?} under node-a"));
        let second = compile_flags(&home, &lib_b, &src, flags, &out_b);
        assert_origin(&second, "miss", &format!("{flags:?} under node-b"));
        let cubin_b = std::fs::read(&out_b).unwrap();
        let named = |needle: &Path| {
            let n = needle.to_str().unwrap().as_bytes();
            cubin_b.windows(n.len()).any(|w| w == n)
        };
        assert!(
            !named(&a) && named(&b),
            "{flags:?}: the cubin served under node-b names node-b's headers"
        );
    }
    // Without line tables the same toolkit under another prefix still hits, extra flags or not.
    let flags = ["-DHIPJIT_TEST_X=1", "-DHIPJIT_TEST_Y=2"];
    let (out_a, out_b) = (home.join("a.cubin"), home.join("b.cubin"));
    assert_origin(
        &compile_flags(&home, &lib_a, &src, &flags, &out_a),
        "miss",
        "node-a",
    );
    assert_origin(
        &compile_flags(&home, &lib_b, &src, &flags, &out_b),
        "hit (disk)",
        "node-b, no line tables",
    );
}

#[test]
fn a_toolkit_include_link_retargeted_or_cccl_added_later_is_seen_by_the_remembered_identity() {
    let dir = tempfile::tempdir().unwrap();
    let prefix = dir.path().join("cuda");
    let lib = toolkit(&prefix);
    // `include` a link to one of two header trees that differ in what a kernel computes.
    let (a, b) = (prefix.join("headers-a"), prefix.join("headers-b"));
    std::fs::rename(prefix.join("include"), &a).unwrap();
    copy_tree(&a, &b);
    for (tree, val) in [(&a, 1), (&b, 5)] {
        std::fs::create_dir(tree.join("hipjit_test")).unwrap();
        std::fs::write(
            tree.join("hipjit_test/val.h"),
            format!("#define VAL {val}\n"),
        )
        .unwrap();
    }
    std::os::unix::fs::symlink("headers-a", prefix.join("include")).unwrap();
    std::fs::create_dir(dir.path().join("src")).unwrap();
    let src = dir.path().join("src/val.hip");
    std::fs::write(
        &src,
        "#include <hipjit_test/val.h>\n\
         extern \"C\" __global__ void k(int* x) { x[threadIdx.x] = VAL; }\n",
    )
    .unwrap();
    // One identity directory throughout (`XDG_CACHE_HOME` under `home`), a new cache each time.
    let home = dir.path().join("home");
    std::fs::create_dir(&home).unwrap();
    let compile_in = |cache: &str| -> Vec<u8> {
        let out = home.join(format!("{cache}.cubin"));
        compile_with(hipjit(), &home, &lib, &src, &out, |cmd| {
            cmd.env("HIPJIT_CACHE_DIR", home.join(cache));
        });
        std::fs::read(out).unwrap()
    };
    let with_a = compile_in("cache-1");
    std::fs::remove_file(prefix.join("include")).unwrap();
    std::os::unix::fs::symlink("headers-b", prefix.join("include")).unwrap();
    let with_b = compile_in("cache-2");
    assert_ne!(
        with_a, with_b,
        "compiled against headers-a after `include` moved to headers-b"
    );
    // The same as a compile whose identity is made afresh.
    std::fs::remove_dir_all(home.join("xdg")).unwrap();
    assert_eq!(compile_in("cache-3"), with_b);

    // CCCL (a wheel of its own on PyPI) installed after the identity was made.
    let cccl = b.join("cccl");
    std::fs::rename(&cccl, b.join("cccl.off")).unwrap();
    std::fs::write(
        &src,
        "#include <cuda/std/limits>\n\
         extern \"C\" __global__ void k(int* x) { x[0] = cuda::std::numeric_limits<int>::max(); }\n",
    )
    .unwrap();
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_hipjit"));
    let o = nvrtc_compile(&mut cmd, &home, &lib)
        .arg("-o")
        .arg(home.join("limits.cubin"))
        .arg(&src)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1), "no cuda/std/limits without CCCL");
    std::fs::rename(b.join("cccl.off"), &cccl).unwrap();
    compile_in("cache-4");
}

/// Runs `cmd` to its end, or kills it and fails the test after 90 s (a hang is a failure,
/// not a stalled run); its exit status, stdout and stderr.
fn run_with_deadline(cmd: &mut Command, what: &str) -> (Option<i32>, String, String) {
    let mut child = cmd
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let started = std::time::Instant::now();
    while child.try_wait().unwrap().is_none() {
        if started.elapsed() > std::time::Duration::from_secs(90) {
            child.kill().unwrap();
            child.wait().unwrap();
            panic!("{what} hung");
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let out = child.wait_with_output().unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn a_fifo_named_cachedir_tag_is_no_cache_root_and_is_never_waited_on() {
    let dir = tempfile::tempdir().unwrap();
    let (home, prefix) = (dir.path().join("home"), dir.path().join("cuda"));
    let lib = toolkit(&prefix);
    std::fs::create_dir_all(dir.path().join("src/sub")).unwrap();
    std::fs::create_dir_all(&home).unwrap();
    std::fs::create_dir_all(dir.path().join("home2")).unwrap();
    let src = dir.path().join("src/vectors.hip");
    std::fs::write(&src, VECTORS).unwrap();
    // Below the source's directory, whose every file NVRTC's key covers.
    common::mkfifo(&dir.path().join("src/sub/CACHEDIR.TAG"));
    let compile = |home: &Path, what: &str| {
        run_with_deadline(
            nvrtc_compile(&mut Command::new(env!("CARGO_BIN_EXE_hipjit")), home, &lib)
                .arg("-o")
                .arg(home.join("out.cubin"))
                .arg(&src),
            what,
        )
    };
    let (code, out, err) = compile(&home, "hipjit compile beside a FIFO named CACHEDIR.TAG");
    assert_eq!(code, Some(0), "{err}");
    assert_origin(&out, "miss", "the first compile");
    let mut explain = Command::new(env!("CARGO_BIN_EXE_hipjit"));
    explain
        .args(["cache", "explain", "--compiler", "nvrtc", "--arch", "sm_90"])
        .env("HIPJIT_NVRTC_LIBRARY", &lib)
        .env("HIPJIT_CACHE_DIR", home.join("cache"))
        .env("XDG_CACHE_HOME", home.join("xdg"))
        .env_remove("HIPJIT_COMPILER")
        .env_remove("CUDA_PATH")
        .env_remove("CUDA_HOME")
        .arg(&src);
    let (code, _, err) = run_with_deadline(&mut explain, "hipjit cache explain");
    assert_eq!(code, Some(0), "{err}");

    // In the toolkit's headers: a FIFO there is refused by name before NVRTC runs (a compile
    // with another cache, the first one's result being a hit).
    common::mkfifo(&prefix.join("include/crt/CACHEDIR.TAG"));
    let (code, _, err) = compile(
        &dir.path().join("home2"),
        "hipjit compile with a FIFO named CACHEDIR.TAG in the toolkit",
    );
    assert_eq!(code, Some(1), "{err}");
    assert!(
        err.contains("CACHEDIR.TAG") && err.contains("FIFO"),
        "the error names the FIFO: {err}"
    );
}

#[test]
fn a_toolkit_header_in_a_directory_tagged_as_a_hipjit_cache_is_keyed() {
    let dir = tempfile::tempdir().unwrap();
    let (home, prefix) = (dir.path().join("home"), dir.path().join("cuda"));
    let lib = toolkit(&prefix);
    let mytk = prefix.join("include/mytk");
    std::fs::create_dir(&mytk).unwrap();
    std::fs::write(mytk.join("v.h"), "#define VAL 1\n").unwrap();
    // The tag hipjit writes in its cache roots.
    std::fs::write(
        mytk.join("CACHEDIR.TAG"),
        "Signature: 8a477f597d28d172789f06886806bc55\n\
         # This file is a cache directory tag created by hipjit.\n",
    )
    .unwrap();
    assert!(hipjit::cache::tag::is_hipjit_cache(&mytk));
    std::fs::create_dir(dir.path().join("src")).unwrap();
    let src = dir.path().join("src/tagged.hip");
    std::fs::write(
        &src,
        "#include <mytk/v.h>\nextern \"C\" __global__ void k(int* x) { x[0] = VAL; }\n",
    )
    .unwrap();
    assert_origin(
        &compile(&home, &lib, &src, None),
        "miss",
        "the first compile",
    );
    let first = std::fs::read(home.join("out.cubin")).unwrap();
    assert_origin(&compile(&home, &lib, &src, None), "hit (disk)", "again");
    std::fs::write(mytk.join("v.h"), "#define VAL 7\n").unwrap();
    assert_origin(
        &compile(&home, &lib, &src, None),
        "miss",
        "after the header in the tagged directory was edited",
    );
    assert_ne!(std::fs::read(home.join("out.cubin")).unwrap(), first);
}

/// Points the link `link` at `to` in one rename (as `ln -sfn` does, atomically).
fn relink(link: &Path, to: &str) {
    let tmp = link.with_file_name(".relink");
    std::os::unix::fs::symlink(to, &tmp).unwrap();
    std::fs::rename(&tmp, link).unwrap();
}

#[test]
fn a_toolkit_header_read_through_a_directory_link_is_keyed_by_both_paths() {
    let dir = tempfile::tempdir().unwrap();
    let prefix = dir.path().join("cuda");
    let lib = toolkit(&prefix);
    let include = prefix.join("include");
    for (d, v) in [("mytk", 1), ("mytk2", 2)] {
        std::fs::create_dir(include.join(d)).unwrap();
        std::fs::write(include.join(d).join("a.h"), format!("#define AV {v}\n")).unwrap();
    }
    std::os::unix::fs::symlink("mytk", include.join("b1")).unwrap();
    std::fs::create_dir(dir.path().join("src")).unwrap();
    let source = |name: &str, include: &str| {
        let src = dir.path().join("src").join(name);
        std::fs::write(
            &src,
            format!(
                "#include <{include}>\nextern \"C\" __global__ void k(int* x) {{ x[0] = AV; }}\n"
            ),
        )
        .unwrap();
        src
    };
    // The walk meets `b1` and `mytk` in the filesystem's order; inotify reports the open on the
    // one directory both name. Each case below went stale when the other path was recorded.

    // Read through the link, then the link pointed at another directory.
    let (home, src) = (dir.path().join("home-a"), source("via_link.hip", "b1/a.h"));
    assert_origin(&compile(&home, &lib, &src, None), "miss", "through b1");
    let first = std::fs::read(home.join("out.cubin")).unwrap();
    assert_origin(&compile(&home, &lib, &src, None), "hit (disk)", "again");
    relink(&include.join("b1"), "mytk2");
    assert_origin(
        &compile(&home, &lib, &src, None),
        "miss",
        "after b1 was pointed at mytk2",
    );
    assert_ne!(std::fs::read(home.join("out.cubin")).unwrap(), first);
    relink(&include.join("b1"), "mytk");

    // Read by the directory's own name, then the two directories swapped and the link pointed
    // at the first one's new name: `b1/a.h` is the same file, `mytk/a.h` another.
    let (home, src) = (dir.path().join("home-b"), source("direct.hip", "mytk/a.h"));
    assert_origin(&compile(&home, &lib, &src, None), "miss", "through mytk");
    let first = std::fs::read(home.join("out.cubin")).unwrap();
    assert_origin(&compile(&home, &lib, &src, None), "hit (disk)", "again");
    std::fs::rename(include.join("mytk"), include.join("swap")).unwrap();
    std::fs::rename(include.join("mytk2"), include.join("mytk")).unwrap();
    std::fs::rename(include.join("swap"), include.join("mytk2")).unwrap();
    relink(&include.join("b1"), "mytk2");
    assert_origin(
        &compile(&home, &lib, &src, None),
        "miss",
        "after mytk and mytk2 were swapped",
    );
    assert_ne!(std::fs::read(home.join("out.cubin")).unwrap(), first);
}

#[test]
fn nvrtc_builtins_found_through_ld_library_path_are_keyed() {
    let dir = tempfile::tempdir().unwrap();
    let cu13 = pypi_cu13();
    // NVRTC alone in its directory: its builtins are not beside it ($ORIGIN), so the dynamic
    // loader finds them through LD_LIBRARY_PATH, in one of two directories that differ.
    let prefix = dir.path().join("cuda");
    std::fs::create_dir_all(prefix.join("lib")).unwrap();
    std::os::unix::fs::symlink(
        cu13.join("lib/libnvrtc.so.13"),
        prefix.join("lib/libnvrtc.so.13"),
    )
    .unwrap();
    std::os::unix::fs::symlink(cu13.join("include"), prefix.join("include")).unwrap();
    let builtins = std::fs::read_dir(cu13.join("lib"))
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .find(|p| {
            p.file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with("libnvrtc-builtins.so."))
        })
        .expect("PyPI's NVRTC builtins");
    let (b1, b2) = (dir.path().join("b1"), dir.path().join("b2"));
    for b in [&b1, &b2] {
        std::fs::create_dir(b).unwrap();
    }
    let name = builtins.file_name().unwrap();
    std::os::unix::fs::symlink(&builtins, b1.join(name)).unwrap();
    let mut other = std::fs::read(&builtins).unwrap();
    other.extend_from_slice(b"\nanother build\n");
    std::fs::write(b2.join(name), other).unwrap();
    std::fs::create_dir(dir.path().join("src")).unwrap();
    let src = dir.path().join("src/vectors.hip");
    std::fs::write(&src, VECTORS).unwrap();
    let home = dir.path().join("home");
    std::fs::create_dir(&home).unwrap();
    let lib = prefix.join("lib/libnvrtc.so.13");
    let run = |ld: &Path| -> String {
        compile_with(
            hipjit(),
            &home,
            &lib,
            &src,
            &home.join("out.cubin"),
            |cmd| {
                cmd.env("LD_LIBRARY_PATH", ld);
            },
        )
    };
    assert_origin(&run(&b1), "miss", "builtins from b1");
    assert_origin(&run(&b1), "hit (disk)", "builtins from b1 again");
    assert_origin(&run(&b2), "miss", "other builtins from b2");
}

#[test]
fn a_header_found_in_cccl_is_shadowed_by_one_added_to_the_toolkits_include() {
    let dir = tempfile::tempdir().unwrap();
    let (home, prefix) = (dir.path().join("home"), dir.path().join("cuda"));
    let lib = toolkit(&prefix);
    let include = prefix.join("include");
    // `include/nv` and `include/cccl/nv` both exist in PyPI's toolkit.
    assert!(include.join("nv").is_dir() && include.join("cccl/nv").is_dir());
    std::fs::write(include.join("cccl/nv/extra.h"), "#define SH 1\n").unwrap();
    std::fs::create_dir(dir.path().join("src")).unwrap();
    let src = dir.path().join("src/shadow.hip");
    std::fs::write(
        &src,
        "#include <nv/extra.h>\nextern \"C\" __global__ void k(int* x) { x[0] = SH; }\n",
    )
    .unwrap();
    assert_origin(
        &compile(&home, &lib, &src, None),
        "miss",
        "the first compile",
    );
    let first = std::fs::read(home.join("out.cubin")).unwrap();
    assert_origin(&compile(&home, &lib, &src, None), "hit (disk)", "again");
    // `include` is searched before `include/cccl`: `<nv/extra.h>` now finds this one.
    std::fs::write(include.join("nv/extra.h"), "#define SH 2\n").unwrap();
    assert_origin(
        &compile(&home, &lib, &src, None),
        "miss",
        "after include/nv/extra.h was added",
    );
    assert_ne!(std::fs::read(home.join("out.cubin")).unwrap(), first);
}

/// A project include directory holding `header` (below it, `#define VAL 1`), compiled once;
/// then a copy of hipjit's `CACHEDIR.TAG` put in its subdirectory `tag_dir`: a miss (the
/// listing changed), a hit, and after the header is edited (same size, so that only its content
/// tells) a miss with another cubin: the walk still keys the header.
fn a_copied_cache_tag_leaves_the_header_keyed(header: &str, tag_dir: &str) {
    let dir = tempfile::tempdir().unwrap();
    let (home, prefix) = (dir.path().join("home"), dir.path().join("cuda"));
    let lib = toolkit(&prefix);
    std::fs::create_dir(dir.path().join("src")).unwrap();
    let src = dir.path().join("src/val.hip");
    std::fs::write(
        &src,
        format!(
            "#include <{header}>\nextern \"C\" __global__ void k(int* x) {{ x[threadIdx.x] = VAL; }}\n"
        ),
    )
    .unwrap();
    let inc = dir.path().join("inc");
    std::fs::create_dir_all(inc.join(header).parent().unwrap()).unwrap();
    std::fs::write(inc.join(header), "#define VAL 1\n").unwrap();
    let run = || {
        compile_with(
            hipjit(),
            &home,
            &lib,
            &src,
            &home.join("out.cubin"),
            |cmd| {
                cmd.arg("-I").arg(&inc);
            },
        )
    };
    std::fs::create_dir_all(&home).unwrap();
    assert_origin(&run(), "miss", "the first compile");
    std::fs::copy(
        home.join("cache/CACHEDIR.TAG"),
        inc.join(tag_dir).join("CACHEDIR.TAG"),
    )
    .unwrap();
    // A file of a name nothing looks up: the same compile.
    assert_origin(
        &run(),
        "hit (disk)",
        &format!("after the tag was copied into {tag_dir}/"),
    );
    let first = std::fs::read(home.join("out.cubin")).unwrap();
    assert_origin(&run(), "hit (disk)", "once more");
    std::fs::write(inc.join(header), "#define VAL 7\n").unwrap();
    assert_origin(&run(), "miss", &format!("after {header} was edited"));
    assert_ne!(std::fs::read(home.join("out.cubin")).unwrap(), first);
}

#[test]
fn a_header_beside_a_copied_cache_tag_in_an_include_directory_is_keyed() {
    a_copied_cache_tag_leaves_the_header_keyed("sub/val.h", "sub");
}

#[test]
fn a_header_in_a_subdirectory_of_a_directory_with_a_copied_cache_tag_is_keyed() {
    a_copied_cache_tag_leaves_the_header_keyed("proj/deep/val.h", "proj");
}

#[test]
fn a_directory_link_in_a_callers_include_directory_retargeted_is_a_miss() {
    let dir = tempfile::tempdir().unwrap();
    let (home, prefix) = (dir.path().join("home"), dir.path().join("cuda"));
    let lib = toolkit(&prefix);
    let inc = dir.path().join("inc");
    for (m, v) in [("m1", 1), ("m2", 2)] {
        std::fs::create_dir_all(inc.join(m)).unwrap();
        std::fs::write(inc.join(m).join("v.h"), format!("#define VAL {v}\n")).unwrap();
    }
    std::os::unix::fs::symlink("m1", inc.join("b")).unwrap();
    std::fs::create_dir(dir.path().join("src")).unwrap();
    let src = dir.path().join("src/val.hip");
    std::fs::write(
        &src,
        "#include <b/v.h>\nextern \"C\" __global__ void k(int* x) { x[threadIdx.x] = VAL; }\n",
    )
    .unwrap();
    std::fs::create_dir_all(&home).unwrap();
    let run = || {
        compile_with(
            hipjit(),
            &home,
            &lib,
            &src,
            &home.join("out.cubin"),
            |cmd| {
                cmd.arg("-I").arg(&inc);
            },
        )
    };
    assert_origin(&run(), "miss", "the first compile");
    let first = std::fs::read(home.join("out.cubin")).unwrap();
    assert_origin(&run(), "hit (disk)", "once more");
    std::fs::remove_file(inc.join("b")).unwrap();
    std::os::unix::fs::symlink("m2", inc.join("b")).unwrap();
    assert_origin(&run(), "miss", "after b was retargeted to m2");
    assert_ne!(std::fs::read(home.join("out.cubin")).unwrap(), first);
}

#[test]
fn line_tables_keep_a_callers_include_directories_in_the_key() {
    let dir = tempfile::tempdir().unwrap();
    let (home, prefix) = (dir.path().join("home"), dir.path().join("cuda"));
    let lib = toolkit(&prefix);
    std::fs::create_dir_all(&home).unwrap();
    // Two copies of one project, each compiled with its own include directory.
    let project = |p: &Path| -> PathBuf {
        std::fs::create_dir_all(p.join("inc/my")).unwrap();
        std::fs::write(
            p.join("inc/my/twice.h"),
            "__device__ __noinline__ float twice(float x) { return 2 * x; }\n",
        )
        .unwrap();
        let src = p.join("k.hip");
        std::fs::write(
            &src,
            "#include <my/twice.h>\n\
             extern \"C\" __global__ void k(float* x) { x[threadIdx.x] = twice(x[threadIdx.x]); }\n",
        )
        .unwrap();
        src
    };
    let (p1, p2) = (dir.path().join("p1"), dir.path().join("p2"));
    let run = |p: &Path, src: &Path| {
        compile_with(hipjit(), &home, &lib, src, &home.join("out.cubin"), |cmd| {
            cmd.arg("-I").arg(p.join("inc")).arg("--cflag=-lineinfo");
        })
    };
    let (s1, s2) = (project(&p1), project(&p2));
    assert_origin(&run(&p1, &s1), "miss", "p1");
    // The line tables name p2's header: p1's cubin must not serve it.
    assert_origin(
        &run(&p2, &s2),
        "miss",
        "p2, whose line tables name its own headers",
    );
    let cubin = std::fs::read(home.join("out.cubin")).unwrap();
    let named = |p: &Path| {
        let n = p.join("inc/my").to_string_lossy().into_owned();
        cubin.windows(n.len()).any(|w| w == n.as_bytes())
    };
    assert!(named(&p2) && !named(&p1), "p2's cubin names p2's header");
}

/// A compile in this process cannot be cancelled: one blocked opening a FIFO (reached through
/// a toolkit header, where the scan before the compile does not look) still lets one SIGTERM
/// end the command, with status 143, a few seconds later.
#[test]
fn one_sigterm_ends_a_command_whose_in_process_compile_is_blocked() {
    let dir = tempfile::tempdir().unwrap();
    let (home, prefix) = (dir.path().join("home"), dir.path().join("cuda"));
    let lib = toolkit(&prefix);
    std::fs::create_dir_all(&home).unwrap();
    std::fs::create_dir(prefix.join("include/mytk")).unwrap();
    std::fs::write(prefix.join("include/mytk/x.h"), "#include <u.h>\n").unwrap();
    let inc = dir.path().join("inc");
    std::fs::create_dir(&inc).unwrap();
    let fifo = std::ffi::CString::new(inc.join("u.h").as_os_str().as_encoded_bytes()).unwrap();
    // SAFETY: mkfifo with a NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(fifo.as_ptr(), 0o600) }, 0, "mkfifo");
    std::fs::create_dir(dir.path().join("src")).unwrap();
    let src = dir.path().join("src/k.hip");
    std::fs::write(
        &src,
        "#include <mytk/x.h>\nextern \"C\" __global__ void k() {}\n",
    )
    .unwrap();
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_hipjit"));
    let mut child = nvrtc_compile(&mut cmd, &home, &lib)
        .arg("-I")
        .arg(&inc)
        .arg("-o")
        .arg(home.join("out.cubin"))
        .arg(&src)
        .stdin(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let started = std::time::Instant::now();
    while !watching(child.id()) {
        assert!(
            child.try_wait().unwrap().is_none(),
            "hipjit ended before NVRTC ran"
        );
        assert!(started.elapsed() < std::time::Duration::from_secs(60));
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    // NVRTC now opens the FIFO and waits for a writer that never comes.
    std::thread::sleep(std::time::Duration::from_secs(1));
    // SAFETY: kill(2) on the pid of a child this test started and has not reaped.
    assert_eq!(unsafe { libc::kill(child.id() as i32, libc::SIGTERM) }, 0);
    let signalled = std::time::Instant::now();
    while child.try_wait().unwrap().is_none() {
        if signalled.elapsed() > std::time::Duration::from_secs(60) {
            child.kill().unwrap();
            child.wait().unwrap();
            panic!("hipjit compile still ran 60 s after one SIGTERM");
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let o = child.wait_with_output().unwrap();
    assert_eq!(
        o.status.code(),
        Some(143),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(!home.join("out.cubin").exists(), "no output");
}
