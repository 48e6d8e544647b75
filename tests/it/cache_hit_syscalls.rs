//! What a disk-cache hit of the `hipjit compile` command does to the system, observed from
//! outside with `strace` (Debian's `strace` package, installed by scripts/setup.sh): it starts
//! no process (no hipcc, no nvcc, no `--version`), and it checks the remembered compiler
//! identity with one `stat` per compiler program and per directory, not one per file of the
//! compiler's installation. Run against Debian's hipcc 5.2.3 and the nvcc of PyPI's
//! nvidia-cuda-nvcc, each with a private cache root and a private identity directory.

use crate::common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use common::toolchain::{pypi_nvcc, saxpy as kernel, utf8 as s};

/// `hipjit ARGS` with its cache root and identity directory under `home`, optionally under
/// `strace -f -e trace=TRACE -o LOG`.
fn hipjit(
    home: &Path,
    nvcc: Option<&Path>,
    args: &[&str],
    strace: Option<(&str, &Path)>,
) -> Output {
    let mut cmd = match strace {
        Some((trace, log)) => {
            let mut c = Command::new("strace");
            // -y: a descriptor argument is printed with its path (`14</dir>`), so that a
            // stat relative to a directory descriptor names the whole path.
            c.args([
                "-f",
                "-qq",
                "-y",
                "-e",
                &format!("trace={trace}"),
                "-o",
                s(log),
            ])
            .arg(env!("CARGO_BIN_EXE_hipjit"));
            c
        }
        None => Command::new(env!("CARGO_BIN_EXE_hipjit")),
    };
    cmd.args(args)
        .env("HIPJIT_CACHE_DIR", home.join("cache"))
        .env("XDG_CACHE_HOME", home.join("xdg"))
        .env_remove("HIPJIT_HIPCC")
        .env_remove("HIPJIT_COMPILER");
    match nvcc {
        Some(n) => cmd.env("HIPJIT_NVCC", n),
        None => cmd.env_remove("HIPJIT_NVCC"),
    };
    let o = cmd
        .output()
        .unwrap_or_else(|e| panic!("cannot run hipjit ({e}); strace: apt-get install strace"));
    assert_eq!(
        o.status.code(),
        Some(0),
        "{args:?}\n{}",
        String::from_utf8_lossy(&o.stderr)
    );
    o
}

/// A miss (which computes and remembers the identity), then a hit under strace; returns the
/// hit's strace log, after checking the hit's own report says "hit".
fn traced_hit(home: &Path, nvcc: Option<&Path>, arch: &str, trace: &str) -> String {
    let out = home.join("out.bin");
    let src = kernel();
    // The process compilers, whose identity is the remembered one (Auto may take hipRTC or
    // NVRTC, in process).
    let compiler = if nvcc.is_some() { "nvcc" } else { "hipcc" };
    let args = [
        "compile",
        "--compiler",
        compiler,
        "--arch",
        arch,
        "-o",
        s(&out),
        s(&src),
    ];
    let first = hipjit(home, nvcc, &args, None);
    assert!(
        String::from_utf8_lossy(&first.stdout).contains("miss"),
        "{}",
        String::from_utf8_lossy(&first.stdout)
    );
    let log = home.join("strace.log");
    let hit = hipjit(home, nvcc, &args, Some((trace, &log)));
    assert!(
        String::from_utf8_lossy(&hit.stdout).contains("hit (disk)"),
        "{}",
        String::from_utf8_lossy(&hit.stdout)
    );
    std::fs::read_to_string(&log).expect("strace wrote its log")
}

/// The `execve` calls of a strace log that succeeded.
fn execs(log: &str) -> Vec<&str> {
    log.lines()
        .filter(|l| l.contains("execve(") && l.trim_end().ends_with("= 0"))
        .collect()
}

#[test]
fn a_hipcc_hit_starts_no_process() {
    let home = tempfile::tempdir().unwrap();
    let log = traced_hit(home.path(), None, "gfx90a", "execve,execveat");
    let execs = execs(&log);
    assert_eq!(execs.len(), 1, "only hipjit itself is executed:\n{log}");
    assert!(execs[0].contains(env!("CARGO_BIN_EXE_hipjit")), "{log}");
}

#[test]
fn an_nvcc_hit_starts_no_process() {
    let home = tempfile::tempdir().unwrap();
    let nvcc = pypi_nvcc();
    let log = traced_hit(home.path(), Some(&nvcc), "sm_90", "execve,execveat");
    let execs = execs(&log);
    assert_eq!(execs.len(), 1, "only hipjit itself is executed:\n{log}");
}

/// Regular files and directories under `dir` (symlinks not followed).
fn count_tree(dir: &Path) -> (usize, usize) {
    let (mut files, mut dirs) = (0, 1);
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        let t = e.file_type().unwrap();
        if t.is_dir() {
            let (f, d) = count_tree(&e.path());
            files += f;
            dirs += d;
        } else {
            files += 1;
        }
    }
    (files, dirs)
}

/// The paths a strace log (`strace -y`) shows stat'd (stat, lstat, newfstatat, statx; opened
/// files are not counted; the stat of an open file is not counted).
fn statted(log: &str) -> Vec<PathBuf> {
    common::strace::paths(log, common::strace::STATS)
        .into_iter()
        .map(|(p, _)| p)
        .collect()
}

/// The CUDA toolkit of PyPI's nvcc holds about 2,600 files. A hit checks nvcc's remembered
/// identity by the toolkit's programs (`bin`, `nvvm`) and their directories, and the headers by
/// the header manifest, which lists only those the compile read: the stats under `bin` and
/// `nvvm` number at most their files and directories plus a few lookups of nvcc's own path,
/// and the toolkit headers stat'd are a small part of `include`.
#[test]
fn an_nvcc_hit_stats_the_toolkits_programs_and_the_headers_read_not_every_file() {
    let home = tempfile::tempdir().unwrap();
    let nvcc = pypi_nvcc();
    let root = nvcc.parent().and_then(Path::parent).unwrap().to_path_buf();
    let log = traced_hit(
        home.path(),
        Some(&nvcc),
        "sm_90",
        "stat,lstat,newfstatat,statx",
    );
    // nvcc is named through `bin/..` by its own discovery; fold such spellings.
    let stats: Vec<PathBuf> = statted(&log)
        .iter()
        .map(|p| common::strace::fold_parent_dirs(p))
        .collect();
    let programs_dirs = [root.join("bin"), root.join("nvvm")];
    let on_programs = stats
        .iter()
        .filter(|p| programs_dirs.iter().any(|d| p.starts_with(d)))
        .count();
    let (programs, program_dirs) = {
        let (bf, bd) = count_tree(&root.join("bin"));
        let (nf, nd) = count_tree(&root.join("nvvm"));
        (bf + nf, bd + nd)
    };
    assert!(
        on_programs <= programs + program_dirs + 8,
        "{on_programs} stats under bin/ and nvvm/ (bound: {programs} files + {program_dirs} directories + 8)"
    );
    let include = root.join("include");
    let mut headers_statted: Vec<&PathBuf> =
        stats.iter().filter(|p| p.starts_with(&include)).collect();
    headers_statted.sort();
    headers_statted.dedup();
    let (headers, _) = count_tree(&include);
    assert!(
        headers > 1000,
        "the toolkit's include directory holds {headers} files: not the PyPI toolkit this test expects"
    );
    assert!(
        headers_statted.len() * 5 < headers,
        "{} of the toolkit's {headers} header paths stat'd on a hit: more than the compile reads",
        headers_statted.len()
    );
}

/// The system calls of a strace log (`strace -f -y`) as (name, arguments and result): a call
/// split by another thread's (`<unfinished ...>` ... `<... resumed>`) counts once, by its
/// first half.
fn calls(log: &str) -> Vec<(&str, &str)> {
    log.lines()
        .filter_map(|l| {
            // Past the thread id.
            let l = l
                .trim_start()
                .split_once(' ')
                .map_or(l, |(_, r)| r)
                .trim_start();
            if l.starts_with("<...") || l.starts_with("+++") || l.starts_with("---") {
                return None;
            }
            let (name, rest) = l.split_once('(')?;
            Some((name, rest))
        })
        .collect()
}

const STATS: [&str; 6] = ["stat", "lstat", "fstat", "newfstatat", "statx", "fstatat64"];

/// Calls named `names` on the open descriptor of `path` (`N</path>` as their first argument).
fn on_descriptor(calls: &[(&str, &str)], names: &[&str], path: &str) -> usize {
    let fd = format!("<{path}>");
    calls
        .iter()
        .filter(|(n, args)| {
            names.contains(n)
                && args
                    .split_once(',')
                    .is_some_and(|(first, _)| first.ends_with(&fd))
        })
        .count()
}

/// Calls named `names` whose quoted path argument is `path` exactly.
fn on_path(calls: &[(&str, &str)], names: &[&str], path: &str) -> usize {
    let quoted = format!("\"{path}\"");
    calls
        .iter()
        .filter(|(n, args)| names.contains(n) && args.contains(&quoted))
        .count()
}

/// The paths opened (`open`, `openat`) whose name ends with `suffix`.
fn opened(calls: &[(&str, &str)], suffix: &str) -> Vec<String> {
    let mut out: Vec<String> = calls
        .iter()
        .filter(|(n, _)| *n == "openat" || *n == "open")
        .filter_map(|(_, args)| {
            let start = args.find('"')? + 1;
            let end = start + args[start..].find('"')?;
            let p = &args[start..end];
            p.ends_with(suffix).then(|| p.to_owned())
        })
        .collect();
    out.sort();
    out.dedup();
    out
}

/// A disk hit's own system calls, pinned so that they do not creep back: the cache root
/// examined once (one `lstat`, then one each of its marker and tag), `geteuid` at most once,
/// each entry (the header manifest, then the result) and each remembered compiler identity
/// read with one `open`, one `fstat` of the descriptor and one `read`, no `stat` of an
/// entry's directory (the root hipjit made is 0700: nobody else can reach inside), and no
/// least-recently-used mark on an entry marked within the hour.
#[test]
fn a_hit_reads_each_entry_and_memo_with_one_open_one_fstat_one_read() {
    let home = tempfile::tempdir().unwrap();
    let nvcc = pypi_nvcc();
    let log = traced_hit(home.path(), Some(&nvcc), "sm_90", "all");
    let calls = calls(&log);
    let root = home.path().join("cache");
    let root = s(&root);

    assert_eq!(
        on_path(&calls, &STATS, root),
        1,
        "stats of the root:\n{log}"
    );
    let p = format!("{root}/HIPJIT_SHARED");
    assert_eq!(on_path(&calls, &STATS, &p), 1, "stats of {p}:\n{log}");
    // The root was there: only a root hipjit makes is tagged, so the tag is not looked for.
    let p = format!("{root}/CACHEDIR.TAG");
    assert_eq!(on_path(&calls, &STATS, &p), 0, "stats of {p}:\n{log}");
    let geteuid = calls.iter().filter(|(n, _)| *n == "geteuid").count();
    assert!(geteuid <= 1, "{geteuid} geteuid calls:\n{log}");

    let entries = opened(&calls, ".hjc");
    assert_eq!(entries.len(), 2, "the manifest and the result:\n{log}");
    let memos = opened(&calls, ".id");
    assert!(
        !memos.is_empty(),
        "nvcc's remembered identity is read:\n{log}"
    );
    for p in entries.iter().chain(&memos) {
        let opens = on_path(&calls, &["open", "openat"], p);
        let fstats = on_descriptor(&calls, &STATS, p);
        let reads = on_descriptor(&calls, &["read", "pread64"], p);
        let path_stats = on_path(&calls, &STATS, p);
        assert_eq!(
            (opens, fstats, reads, path_stats),
            (1, 1, 1, 0),
            "{p}: opens, fstats of the descriptor, reads, stats by path:\n{log}"
        );
    }
    for p in &entries {
        let marks = calls
            .iter()
            .filter(|(n, args)| n.starts_with("utime") && args.contains(p.as_str()))
            .count();
        assert_eq!(
            marks, 0,
            "{p} was marked used again within the hour:\n{log}"
        );
        let dir = Path::new(p).parent().unwrap();
        assert_eq!(
            on_path(&calls, &STATS, s(dir)),
            0,
            "the entry's directory was stat'd in a 0700 root:\n{log}"
        );
    }
}
