//! `hipjit cache verify --rebuild FILE [N]`: the determinism check. A sample of N distinct
//! requests of a `HIPJIT_RECORD` file (default: all) is compiled again with no cache at all,
//! and each artefact compared with the cached entry's, part by part (`.text`, the metadata
//! note, the rest of the ELF: `hipjit::code_object::split_for_comparison`). The verdict per
//! compiler identity is kept in the written root ([`VERDICTS`]), where `hipjit doctor` reads
//! it.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};

use hipjit::cache::disk::{self, DiskCache};
use hipjit::code_object::split_for_comparison;
use hipjit::compiler::selection::CompilerChoice;
use hipjit::compiler::CompileOptions;
use hipjit::jit::record::{self, RecordLocation, Request};
use hipjit::jit::{Artefact, CacheLocation, Jit, JitOptions, Origin, RemoteLocation};

use crate::output::{self, CliError};

/// The file in a cache root holding the verdicts, by compiler identity.
pub const VERDICTS: &str = "reproducibility.json";

/// What `verify --rebuild` found about one compiler identity.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Verdict {
    /// `hipcc`, `nvcc`, `hiprtc`, `nvrtc`.
    pub kind: String,
    pub path: PathBuf,
    /// Its version in one line.
    pub version: String,
    /// The identity's fingerprint (its program files).
    pub fingerprint: String,
    /// Whether every request compared gave the cached bytes again.
    pub reproducible: bool,
    /// Requests compared, and how many of them differed.
    pub compared: usize,
    pub differing: usize,
    /// When, in milliseconds since the Unix epoch, and from which record file.
    pub checked_unix_ms: u64,
    pub record: PathBuf,
}

/// The verdicts kept in `root` (none when the file is missing or does not read).
pub fn read_verdicts(root: &Path) -> Vec<Verdict> {
    std::fs::read(root.join(VERDICTS))
        .ok()
        .and_then(|b| serde_json::from_slice::<BTreeMap<String, Verdict>>(&b).ok())
        .map(|m| m.into_values().collect())
        .unwrap_or_default()
}

/// What became of one request.
enum Status {
    /// Each artefact gave the cached bytes again.
    Reproducible,
    /// These artefacts differ (target, parts that differ).
    Differs(Vec<(String, Vec<&'static str>)>),
    /// No cached entry to compare with.
    NotCached,
    /// It cannot be compiled again (a line that does not read) or its compile failed.
    Error(String),
}

struct Line {
    line: usize,
    compiler: Option<Verdict>,
    status: Status,
}

/// The parts of two builds of one ELF that differ.
fn differing_parts(cached: &[u8], fresh: &[u8]) -> Vec<&'static str> {
    if cached == fresh {
        return Vec::new();
    }
    match (split_for_comparison(cached), split_for_comparison(fresh)) {
        (Ok(a), Ok(b)) => {
            let mut d = Vec::new();
            if a.text != b.text {
                d.push("text");
            }
            if a.metadata != b.metadata {
                d.push("metadata");
            }
            if a.rest != b.rest {
                d.push("rest");
            }
            d
        }
        _ => vec!["bytes"],
    }
}

fn artefact_bytes(a: &Artefact) -> (String, &[u8]) {
    (a.target_name(), a.elf())
}

/// One request compiled again and compared; `cached_jit` reads the caches (read only),
/// `fresh_jit` has none.
fn check(cached_jit: &Jit, fresh_jit: &Jit, r: &Request) -> (Option<Verdict>, Status) {
    let compiler = fresh_jit.compiler_for(&r.source, &r.options).ok().map(|c| {
        let id = c.backend.identity();
        Verdict {
            kind: id.kind.to_string(),
            path: id.path.clone(),
            version: id.version_summary(),
            fingerprint: id.fingerprint.clone(),
            reproducible: true,
            compared: 0,
            differing: 0,
            checked_unix_ms: 0,
            record: PathBuf::new(),
        }
    });
    match cached_jit.key(&r.source, &r.options) {
        Ok(Some(_)) => {}
        Ok(None) => return (compiler, Status::NotCached),
        Err(e) => return (compiler, Status::Error(e.to_string())),
    }
    let cached = match cached_jit.compile(&r.source, &r.options) {
        Ok(c) if c.origin() == Origin::Disk => c,
        Ok(_) => return (compiler, Status::NotCached),
        Err(e) => return (compiler, Status::Error(e.to_string())),
    };
    let fresh = match fresh_jit.compile(&r.source, &r.options) {
        Ok(c) => c,
        Err(e) => return (compiler, Status::Error(e.to_string())),
    };
    let fresh_by_target: HashMap<String, &[u8]> =
        fresh.artefacts().iter().map(artefact_bytes).collect();
    let mut differs = Vec::new();
    for a in cached.artefacts() {
        let (target, bytes) = artefact_bytes(a);
        let parts = match fresh_by_target.get(&target) {
            Some(f) => differing_parts(bytes, f),
            None => vec!["missing"],
        };
        if !parts.is_empty() {
            differs.push((target, parts));
        }
    }
    let status = if differs.is_empty() {
        Status::Reproducible
    } else {
        Status::Differs(differs)
    };
    (compiler, status)
}

/// Runs `hipjit cache verify --rebuild FILE [N]`.
///
/// Errors: exit status 1 when the file cannot be read, a `Jit` cannot be set up, or any
/// request compared differs or failed to compile.
pub fn run(file: &Path, sample: Option<usize>, json: bool) -> Result<(), CliError> {
    let records = record::read_records(file)
        .map_err(|e| CliError::failed(format!("cannot read {}: {e}", file.display())))?;
    let mut lines: Vec<Line> = records
        .bad
        .iter()
        .map(|b| Line {
            line: b.line,
            compiler: None,
            status: Status::Error(format!("cannot be rebuilt: {}", b.reason)),
        })
        .collect();
    type Distinct<'a> = (&'a [u8], &'a CompileOptions, CompilerChoice, &'a [u8]);
    let mut seen: HashSet<Distinct<'_>> = HashSet::new();
    let mut distinct: Vec<(usize, &Request)> = Vec::new();
    for (line, r) in &records.requests {
        if seen.insert((&r.source, &r.options, r.compiler, &r.extra_signature)) {
            distinct.push((*line, r));
        }
    }
    // An even sample of N.
    let n = sample.unwrap_or(distinct.len()).min(distinct.len());
    let picked: Vec<(usize, &Request)> = (0..n)
        .map(|i| distinct[i * distinct.len() / n.max(1)])
        .collect();
    let mut jits: HashMap<(CompilerChoice, Vec<u8>), (Jit, Jit)> = HashMap::new();
    for (line, r) in picked {
        let k = (r.compiler, r.extra_signature.clone());
        if !jits.contains_key(&k) {
            let options = |cache| JitOptions {
                compiler: Some(r.compiler),
                extra_signature: r.extra_signature.clone(),
                cache,
                remote_cache: RemoteLocation::Disabled,
                record: RecordLocation::Disabled,
                disable_hit_memo: true,
                ..JitOptions::default()
            };
            let made = Jit::new(options(CacheLocation::ReadOnly(None)))
                .and_then(|c| Ok((c, Jit::new(options(CacheLocation::Disabled))?)))
                .map_err(|e| {
                    crate::compile::environment_error(&e)
                        .unwrap_or_else(|| CliError::failed(e.to_string()))
                })?;
            jits.insert(k.clone(), made);
        }
        let (cached_jit, fresh_jit) = &jits[&k];
        let (compiler, status) = check(cached_jit, fresh_jit, r);
        lines.push(Line {
            line,
            compiler,
            status,
        });
    }
    lines.sort_by_key(|l| l.line);

    // The verdict of each compiler identity met.
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64);
    let mut verdicts: BTreeMap<String, Verdict> = BTreeMap::new();
    for l in &lines {
        let Some(c) = &l.compiler else { continue };
        let differs = match &l.status {
            Status::Reproducible => false,
            Status::Differs(_) => true,
            _ => continue,
        };
        let v = verdicts
            .entry(format!("{} {}", c.kind, c.fingerprint))
            .or_insert_with(|| Verdict {
                checked_unix_ms: now,
                record: std::path::absolute(file).unwrap_or_else(|_| file.to_path_buf()),
                ..c.clone()
            });
        v.compared += 1;
        if differs {
            v.differing += 1;
            v.reproducible = false;
        }
    }
    let kept = keep_verdicts(&verdicts);

    let differing = lines
        .iter()
        .filter(|l| matches!(l.status, Status::Differs(_)))
        .count();
    let failed = lines
        .iter()
        .filter(|l| matches!(l.status, Status::Error(_)))
        .count();
    if json {
        let results: Vec<_> = lines
            .iter()
            .map(|l| {
                let (status, detail) = match &l.status {
                    Status::Reproducible => ("reproducible", serde_json::Value::Null),
                    Status::Differs(d) => (
                        "differs",
                        serde_json::json!(d
                            .iter()
                            .map(|(t, p)| serde_json::json!({"target": t, "parts": p}))
                            .collect::<Vec<_>>()),
                    ),
                    Status::NotCached => ("not_cached", serde_json::Value::Null),
                    Status::Error(e) => ("error", serde_json::json!(e)),
                };
                serde_json::json!({
                    "line": l.line,
                    "status": status,
                    "differing": if status == "differs" { detail.clone() } else { serde_json::Value::Null },
                    "error": if status == "error" { detail } else { serde_json::Value::Null },
                    "compiler": l.compiler.as_ref().map(|c| serde_json::json!({
                        "kind": c.kind, "path": output::path_json(&c.path), "version": c.version,
                    })),
                })
            })
            .collect();
        output::print_json(serde_json::json!({
            "file": output::path_json(file),
            "requests": distinct.len(),
            "sampled": n,
            "differing": differing,
            "failed": failed,
            "results": results,
            "compilers": verdicts.values().collect::<Vec<_>>(),
            "verdicts_file": kept.as_ref().ok().map(output::path_json),
        }))?;
    } else {
        for l in &lines {
            let at = format!("{}:{}", file.display(), l.line);
            match &l.status {
                Status::Reproducible => println!("ok      {at}: reproducible"),
                Status::Differs(d) => {
                    let what: Vec<String> = d
                        .iter()
                        .map(|(t, p)| format!("{t} ({})", p.join(", ")))
                        .collect();
                    println!("DIFFERS {at}: {}", what.join("; "));
                }
                Status::NotCached => println!(
                    "skip    {at}: not in the cache, nothing to compare (`hipjit cache warm` compiles it)"
                ),
                Status::Error(e) => println!("error   {at}: {e}"),
            }
        }
        for v in verdicts.values() {
            println!(
                "{} {} ({}): {} ({} of {} requests differ)",
                v.kind,
                v.path.display(),
                v.version,
                if v.reproducible {
                    "reproducible"
                } else {
                    "NOT reproducible"
                },
                v.differing,
                v.compared
            );
        }
        let same = lines
            .iter()
            .filter(|l| matches!(l.status, Status::Reproducible))
            .count();
        let skipped = lines
            .iter()
            .filter(|l| matches!(l.status, Status::NotCached))
            .count();
        println!(
            "{n} of {} requests taken: {same} reproducible, {differing} differ, {skipped} not cached, {failed} failed",
            distinct.len()
        );
    }
    if let Err(e) = &kept {
        eprintln!("hipjit: warning: the verdicts were not kept: {e}");
    }
    if differing > 0 {
        return Err(CliError::failed(format!(
            "{differing} of {n} requests rebuilt differ from their cache entries: the compiler is not reproducible"
        )));
    }
    if failed > 0 {
        return Err(CliError::failed(format!(
            "{failed} of {} lines could not be rebuilt",
            lines.len()
        )));
    }
    Ok(())
}

/// Merges `verdicts` into the written root's [`VERDICTS`] file (atomically replaced);
/// returns its path.
fn keep_verdicts(verdicts: &BTreeMap<String, Verdict>) -> Result<PathBuf, String> {
    if verdicts.is_empty() {
        return Err("no request was compared".into());
    }
    let roots = disk::roots_from_env(|k| std::env::var_os(k)).ok_or("no cache root")?;
    let cache = DiskCache::open(&roots).map_err(|e| e.to_string())?;
    let root = &cache.roots()[0].path;
    let path = root.join(VERDICTS);
    let mut all: BTreeMap<String, Verdict> = std::fs::read(&path)
        .ok()
        .and_then(|b| serde_json::from_slice(&b).ok())
        .unwrap_or_default();
    all.extend(verdicts.iter().map(|(k, v)| (k.clone(), v.clone())));
    let bytes = serde_json::to_vec_pretty(&all).map_err(|e| e.to_string())?;
    let tmp = root.join(format!(".{VERDICTS}.{}", std::process::id()));
    std::fs::write(&tmp, bytes)
        .and_then(|()| std::fs::rename(&tmp, &path))
        .map_err(|e| {
            let _ = std::fs::remove_file(&tmp);
            format!("{}: {e}", path.display())
        })?;
    Ok(path)
}
