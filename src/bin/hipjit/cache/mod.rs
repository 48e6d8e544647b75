//! `hipjit cache list | stats | verify | clear | prune --max-size SIZE | export -o FILE |
//! import FILE | warm FILE | freeze RECORD -o FILE | explain FILE`: the disk cache of
//! `hipjit::cache::disk` (roots from `HIPJIT_CACHE_DIR`, else `$XDG_CACHE_HOME/hipjit` or
//! `~/.cache/hipjit`; the first root is the written one).

mod explain;
mod freeze;
pub mod rebuild;
mod warm;

use std::time::{SystemTime, UNIX_EPOCH};

use std::path::{Path, PathBuf};

use hipjit::cache::bundle;
use hipjit::cache::disk::DiskCache;
use hipjit::cache::key::CacheKey;

use crate::output::{self, human_bytes, CliError};

/// Arguments of `hipjit cache`.
#[derive(clap::Args, Debug)]
pub struct Args {
    #[command(subcommand)]
    pub action: Action,
    /// Print JSON (with "schema_version": 1) instead of text.
    #[arg(long, global = true)]
    pub json: bool,
}

/// What to do with the cache.
#[derive(clap::Subcommand, Debug)]
pub enum Action {
    /// List the entry files of every root (key, size, last use), written root first.
    List,
    /// Entry count and size of each root, and the written root's size cap and where it came
    /// from (JSON: roots, max_bytes (null: no cap), max_bytes_from ("default" or
    /// "HIPJIT_CACHE_MAX_SIZE"), remote).
    Stats,
    /// Read and check every entry (magic, format, key, artefact sizes and sha256); exit status
    /// 1 when any is bad.
    ///
    /// With --rebuild FILE [N]: the determinism check instead. A sample of N distinct requests
    /// of the HIPJIT_RECORD file FILE (default: all) is compiled again with no cache, and each
    /// artefact compared with the cached entry's, the code (.text), the metadata note and the
    /// rest of the ELF apart; a request not in the cache is skipped, a line that does not read
    /// cannot be rebuilt (both said per line). The verdict per compiler (reproducible or not)
    /// is kept in the written root's reproducibility.json, which `hipjit doctor` reports. Exit
    /// status 1 when any request differs or fails. JSON: file, requests, sampled, differing,
    /// failed, results[] {line, status ("reproducible", "differs", "not_cached", "error"),
    /// differing[] {target, parts[] ("text", "metadata", "rest")}, error, compiler {kind,
    /// path, version}}, compilers[] {kind, path, version, fingerprint, reproducible,
    /// compared, differing, checked_unix_ms, record}, verdicts_file.
    Verify {
        /// The record file (HIPJIT_RECORD) whose requests to compile again.
        #[arg(long, value_name = "FILE")]
        rebuild: Option<PathBuf>,
        /// How many distinct requests to rebuild, spread over the file (default: all).
        #[arg(value_name = "N", requires = "rebuild")]
        sample: Option<usize>,
    },
    /// Remove every entry of the written root.
    Clear,
    /// Remove least recently used entries of the written root until it holds at most SIZE.
    Prune {
        /// The size to keep: bytes, or a number with K, M, G or T (binary units: 1K = 1024
        /// bytes), e.g. 500M, 2G, 1.5G.
        #[arg(long, value_name = "SIZE", value_parser = parse_size)]
        max_size: u64,
    },
    /// Write every valid entry of every root (results and header manifests) into one
    /// compressed bundle (Zstandard) with an index, to import elsewhere (a warm root baked into
    /// an image).
    Export {
        /// The bundle to write, as `hipjit compile -o` writes: replaced atomically, a symbolic
        /// link followed, a character device (`/dev/null`) written into; a FIFO, block device,
        /// socket or directory there is refused (exit status 2).
        #[arg(short = 'o', long = "output", value_name = "FILE")]
        output: PathBuf,
        /// Export only the keys listed in this file, one per line as `hipjit cache list` prints
        /// them (`#` starts a comment); list a source's header manifest with its result.
        #[arg(long, value_name = "FILE")]
        keys_from: Option<PathBuf>,
    },
    /// Freeze the compile requests recorded with HIPJIT_RECORD=RECORD into a bundle that a
    /// machine without a compiler serves (HIPJIT_FROZEN=FILE, or JitOptions::frozen).
    ///
    /// Each distinct request is compiled (or found in the cache) with its recorded compiler
    /// choice and signature, and frozen with the contents of the headers it read below its
    /// -I directories and the compiler's identity. Exit status 1 when a request fails, 2 for a
    /// record line that does not read. JSON: bundle, record, requests, entries, file_bytes.
    Freeze {
        /// The record file.
        record: PathBuf,
        /// The bundle to write (replaced atomically).
        #[arg(short = 'o', long = "output", value_name = "FILE")]
        output: PathBuf,
    },
    /// Replay compile requests recorded with HIPJIT_RECORD=FILE, compiling only what no cache
    /// tier holds.
    ///
    /// Every distinct request of FILE (one JSON line each) is looked up in each tier (disk
    /// roots, the remote tier of HIPJIT_REMOTE_CACHE) and compiled only when missing
    /// everywhere. Lines that do not read are skipped with a warning naming the line, what is
    /// wrong with it (the field at fault) and what to do. Prints a summary (compiled, present,
    /// failed; JSON: file, requests, duplicates, bad_lines[] {line, reason}, compiled,
    /// present, present_in {memory, disk, remote}, failed, results[] {line, ok, cache
    /// ("miss", "disk", "remote", "memory"), key, error}); exit status 1 when any failed.
    Warm {
        /// The record file.
        file: PathBuf,
        /// Compile at most N requests at once.
        #[command(flatten)]
        jobs: crate::request::JobsArg,
    },
    /// Explain the cache key of compiling FILE, and on a miss what differs from the nearest
    /// entry.
    ///
    /// FILE is keyed as `hipjit compile` would key it. Prints the direct-key record field by
    /// field (value, or digest for the source), the header manifest's files
    /// and directories checked now, the result key and the tier that holds it; on a miss, the
    /// fields that differ from the nearest entry compiled from the same source (for a
    /// directory whose listing changed, the entries added and removed, when known). Compiles
    /// and writes nothing (a cache root that does not exist is reported, and not created); a
    /// miss exits 0. A request `hipjit compile` would refuse is refused the same way, with the
    /// same message and exit status. JSON: file, cache_roots[] {path, exists}, targets,
    /// compiler, direct_key, fields[] {name, sha256, bytes, value}, manifest {entry, files[]
    /// {name, path, status, sha256, recorded_sha256}, dirs[] {name, path, status, added,
    /// removed}} or null, result_key, hit, tier ("disk", "remote" or null), entry, nearest
    /// {entry, key, differing[] {field, now, entry}} or null, warnings[].
    Explain(explain::Args),
    /// Check every entry of a bundle and, when all are good, publish them into the written
    /// root (or ROOT); a bundle with any bad entry is refused whole, naming each one.
    Import {
        /// The bundle.
        file: PathBuf,
        /// The root to import into (created if missing) instead of the written root.
        #[arg(long, value_name = "ROOT")]
        into: Option<PathBuf>,
    },
}

/// The keys listed in `path`, one per line, `#` comments and blank lines ignored.
///
/// Errors: the file cannot be read, or a line is not a key (named with its number).
fn read_keys(path: &Path) -> Result<Vec<CacheKey>, CliError> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| CliError::failed(format!("cannot read {}: {e}", path.display())))?;
    let mut keys = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let line = line.split('#').next().unwrap_or("").trim();
        if line.is_empty() {
            continue;
        }
        let word = line.split_whitespace().next().unwrap_or(line);
        keys.push(
            word.parse::<CacheKey>()
                .map_err(|e| CliError::failed(format!("{}:{}: {e}", path.display(), i + 1)))?,
        );
    }
    Ok(keys)
}

/// Parses a size: `1024`, `500M`, `2G`, `1.5G`, `10KiB`, `3kb` (binary units; the `B`/`iB`
/// suffix is optional), as `HIPJIT_CACHE_MAX_SIZE` takes it ([`hipjit::cache::disk::parse_size`]).
///
/// Errors: a message naming the text and the expected form.
pub fn parse_size(text: &str) -> Result<u64, String> {
    hipjit::cache::disk::parse_size(text)
}

/// `size cap of the written root: 5.0 GiB (5368709120 bytes; the default, HIPJIT_CACHE_MAX_SIZE
/// sets another)`, as `hipjit cache stats` and `hipjit doctor` print it.
pub fn cap_text(cache: &DiskCache) -> String {
    use hipjit::cache::disk::{CapSource, MAX_SIZE_ENV};
    let (max, from) = cache.max_bytes();
    let size = match max {
        Some(m) => format!("{} ({m} bytes", human_bytes(m)),
        None => "none (".to_owned(),
    };
    let from = match from {
        CapSource::Default => format!("the default; {MAX_SIZE_ENV} sets another"),
        CapSource::Env => format!("set by {MAX_SIZE_ENV}"),
        CapSource::Caller => "set by the caller".to_owned(),
    };
    let sep = if max.is_some() { "; " } else { "" };
    format!(
        "size cap of the written root: {size}{sep}{from}); least recently used entries go first"
    )
}

fn unix_secs(t: SystemTime) -> u64 {
    t.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs())
}

fn open() -> Result<DiskCache, CliError> {
    DiskCache::from_env().map_err(|e| CliError::failed(format!("cannot open the cache: {e}")))
}

/// Runs `hipjit cache ...`.
///
/// Errors: exit status 1 when the cache cannot be opened or a file cannot be removed, and
/// for `verify` when an entry is bad.
pub fn run(args: &Args) -> Result<(), CliError> {
    if let Action::Import {
        file,
        into: Some(root),
    } = &args.action
    {
        let cache = DiskCache::open(std::slice::from_ref(root))
            .and_then(DiskCache::with_max_bytes_from_env)
            .map_err(|e| CliError::failed(format!("cannot open the cache: {e}")))?;
        return import(&cache, file, args.json);
    }
    if let Action::Freeze { record, output } = &args.action {
        return freeze::run(record, output, args.json);
    }
    if let Action::Explain(a) = &args.action {
        // Opens the roots read-only itself: explaining creates and writes nothing.
        return explain::run(a, args.json);
    }
    let cache = open()?;
    let roots: Vec<serde_json::Value> = cache
        .roots()
        .iter()
        .map(|r| serde_json::json!({"path": output::path_json(&r.path), "writable": r.writable, "shared": r.shared}))
        .collect();
    let written = cache
        .roots()
        .first()
        .map(|r| r.path.display().to_string())
        .unwrap_or_default();
    let written_json = cache.roots().first().map(|r| output::path_json(&r.path));
    match &args.action {
        Action::Export {
            output: out,
            keys_from,
        } => {
            let keys = keys_from.as_deref().map(read_keys).transpose()?;
            // Written as `hipjit compile -o` writes (hipjit::file_write); what must not be
            // replaced there is refused as compile refuses it, as a usage error.
            let r = bundle::export(&cache, keys.as_deref(), out).map_err(|e| match e {
                bundle::BundleError::Write(
                    e @ hipjit::file_write::WriteError::NotRegular { .. },
                ) => CliError::usage(format!("-o {}: {e}", out.display())),
                e @ bundle::BundleError::OutputInRoot { .. } => {
                    CliError::usage(format!("-o {}: {e}", out.display()))
                }
                e => CliError::failed(format!("cannot export: {e}")),
            })?;
            if args.json {
                output::print_json(serde_json::json!({
                    "bundle": output::path_json(out), "entries": r.entries,
                    "bytes": r.bytes, "file_bytes": r.file_bytes,
                }))
            } else {
                println!(
                    "{}: {} entries, {} ({} compressed)",
                    out.display(),
                    r.entries,
                    human_bytes(r.bytes),
                    human_bytes(r.file_bytes)
                );
                Ok(())
            }
        }
        Action::Import { file, .. } => import(&cache, file, args.json),
        Action::Explain(a) => explain::run(a, args.json),
        Action::Freeze { record, output } => freeze::run(record, output, args.json),
        Action::Warm { file, jobs } => warm::run(file, jobs.get(), args.json),
        Action::Verify {
            rebuild: Some(file),
            sample,
        } => rebuild::run(file, *sample, args.json),
        Action::List => {
            let entries = cache.list().map_err(|e| CliError::failed(e.to_string()))?;
            if args.json {
                let list: Vec<_> = entries
                    .iter()
                    .map(|e| {
                        serde_json::json!({
                            "root": output::path_json(&e.root), "path": output::path_json(&e.path),
                            "key": e.key.map(|k| k.to_hex()),
                            "bytes": e.bytes, "last_used_unix": unix_secs(e.last_used),
                        })
                    })
                    .collect();
                output::print_json(serde_json::json!({"roots": roots, "entries": list}))
            } else {
                for e in &entries {
                    let age = SystemTime::now()
                        .duration_since(e.last_used)
                        .map_or(0, |d| d.as_secs());
                    println!(
                        "{}  {:>10}  used {} ago  {}",
                        e.key
                            .map_or_else(|| "(not a key)".to_owned(), |k| k.to_hex()),
                        human_bytes(e.bytes),
                        age_text(age),
                        e.path.display()
                    );
                }
                println!("{} entries", entries.len());
                Ok(())
            }
        }
        Action::Stats => {
            let stats = cache.stats().map_err(|e| CliError::failed(e.to_string()))?;
            let remote = remote_stats()?;
            if args.json {
                let list: Vec<_> = stats
                    .iter()
                    .map(|s| {
                        serde_json::json!({
                            "path": output::path_json(&s.root.path), "writable": s.root.writable,
                            "shared": s.root.shared, "entries": s.entries, "bytes": s.bytes,
                        })
                    })
                    .collect();
                let (max, from) = cache.max_bytes();
                output::print_json(serde_json::json!({
                    "roots": list, "max_bytes": max, "max_bytes_from": from.as_str(),
                    "remote": remote,
                }))
            } else {
                for s in &stats {
                    println!(
                        "{}  {} entries, {} ({} bytes){}{}",
                        s.root.path.display(),
                        s.entries,
                        human_bytes(s.bytes),
                        s.bytes,
                        if s.root.writable {
                            ", written"
                        } else {
                            ", read-only"
                        },
                        if s.root.shared { ", shared" } else { "" }
                    );
                }
                println!("{}", cap_text(&cache));
                if !remote.is_null() {
                    let r = &remote;
                    if let Some(e) = r["error"].as_str() {
                        println!(
                            "{}  remote, {}: {e}",
                            r["url"].as_str().unwrap_or(""),
                            r["failure"].as_str().unwrap_or("refused")
                        );
                    } else {
                        println!(
                            "{}  remote, {} keys, {} used of {}, policy {}{}",
                            r["url"].as_str().unwrap_or(""),
                            r["keys"],
                            human_bytes(r["used_memory_bytes"].as_u64().unwrap_or(0)),
                            match r["max_memory_bytes"].as_u64() {
                                Some(0) | None => "no limit".to_string(),
                                Some(m) => human_bytes(m),
                            },
                            r["policy"].as_str().unwrap_or("unknown"),
                            match r["key_id"].as_str() {
                                Some(id) => format!(", signed (key id {id})"),
                                None => String::new(),
                            }
                        );
                    }
                }
                Ok(())
            }
        }
        Action::Verify { .. } => {
            let checked = cache
                .verify()
                .map_err(|e| CliError::failed(e.to_string()))?;
            let bad = checked
                .iter()
                .filter(|v| v.status.is_err() && v.other_format.is_none())
                .count();
            let other = checked.iter().filter(|v| v.other_format.is_some()).count();
            if args.json {
                let list: Vec<_> = checked
                    .iter()
                    .map(|v| {
                        serde_json::json!({
                            "path": output::path_json(&v.path),
                            "ok": v.status.is_ok(),
                            "error": v.status.as_ref().err(),
                            "other_format": v.other_format,
                            "untracked_headers": output::paths_json(&v.untracked),
                        })
                    })
                    .collect();
                output::print_json(serde_json::json!({
                    "roots": roots, "entries": list, "checked": checked.len(), "bad": bad,
                    "other_format": other,
                }))?;
            } else {
                for v in &checked {
                    match (&v.status, v.other_format) {
                        (Ok(()), _) => println!("ok   {}", v.path.display()),
                        (Err(_), Some(f)) => println!(
                            "old  {}: written by a hipjit of cache format {f} (this one reads {}): never served, not damage; `hipjit cache clear` removes it",
                            v.path.display(),
                            hipjit::cache::key::CACHE_FORMAT_VERSION
                        ),
                        (Err(e), None) => println!("BAD  {}: {e}", v.path.display()),
                    }
                    for u in &v.untracked {
                        println!(
                            "     note: reads {} which is not in its cache key (edits to it are not noticed)",
                            u.display()
                        );
                    }
                }
                if other > 0 {
                    println!(
                        "{} entries checked, {bad} bad, {other} of another cache format",
                        checked.len()
                    );
                } else {
                    println!("{} entries checked, {bad} bad", checked.len());
                }
            }
            if bad > 0 {
                let first = checked
                    .iter()
                    .filter(|v| v.other_format.is_none())
                    .find_map(|v| v.status.as_ref().err().map(|e| (v, e)));
                let detail = first
                    .map(|(v, e)| format!(": first: {}: {e}", v.path.display()))
                    .unwrap_or_default();
                return Err(CliError::failed(format!(
                    "{bad} of {} cache entries are bad{detail} (`hipjit cache clear` removes the written root's entries; a bad entry is also replaced by the next compile of its key)",
                    checked.len()
                )));
            }
            Ok(())
        }
        Action::Clear => {
            let n = cache
                .clear()
                .map_err(|e| CliError::failed(format!("clearing {written}: {e}")))?;
            if args.json {
                output::print_json(serde_json::json!({"root": written_json, "removed": n}))
            } else {
                println!("removed {n} entries from {written}");
                Ok(())
            }
        }
        Action::Prune { max_size } => {
            let r = cache
                .prune(*max_size)
                .map_err(|e| CliError::failed(format!("pruning {written}: {e}")))?;
            if args.json {
                output::print_json(serde_json::json!({
                    "root": written_json, "max_bytes": max_size, "removed": r.removed,
                    "bytes_freed": r.bytes_freed, "bytes_left": r.bytes_left,
                }))
            } else {
                println!(
                    "removed {} entries ({}) from {written}; {} left (limit {})",
                    r.removed,
                    human_bytes(r.bytes_freed),
                    human_bytes(r.bytes_left),
                    human_bytes(*max_size)
                );
                Ok(())
            }
        }
    }
}

fn age_text(secs: u64) -> String {
    match secs {
        0..=119 => format!("{secs} s"),
        120..=7199 => format!("{} min", secs / 60),
        7200..=172_799 => format!("{} h", secs / 3600),
        _ => format!("{} days", secs / 86400),
    }
}

/// The remote tier of `HIPJIT_REMOTE_CACHE` as JSON (`null` when none is configured): the
/// redacted URL and what the server says, or the error that kept it from answering.
///
/// Errors: a malformed `HIPJIT_REMOTE_CACHE` or signing key.
fn remote_stats() -> Result<serde_json::Value, CliError> {
    use hipjit::cache::remote::{RemoteCache, RemoteConfig};
    let Some(config) = RemoteConfig::from_env().map_err(|e| {
        crate::compile::environment_error(&e.clone().into())
            .unwrap_or_else(|| CliError::failed(e.to_string()))
    })?
    else {
        return Ok(serde_json::Value::Null);
    };
    let url = config.redacted_url();
    let remote = RemoteCache::new(config).map_err(|e| CliError::failed(e.to_string()))?;
    Ok(match remote.server_info() {
        Ok(i) => serde_json::json!({
            "url": i.url, "reachable": true, "version": i.version, "keys": i.keys,
            "used_memory_bytes": i.used_memory, "max_memory_bytes": i.max_memory,
            "policy": i.policy, "signed": i.signed, "key_id": i.key_id,
        }),
        Err(e) => serde_json::json!({
            "url": url, "reachable": false,
            "failure": e.failure.map(|f| f.as_str()), "error": e.message,
        }),
    })
}

fn import(cache: &DiskCache, file: &Path, json: bool) -> Result<(), CliError> {
    let r =
        bundle::import(cache, file).map_err(|e| CliError::failed(format!("cannot import: {e}")))?;
    let root = cache
        .roots()
        .first()
        .map(|r| r.path.clone())
        .unwrap_or_default();
    if json {
        output::print_json(serde_json::json!({
            "bundle": output::path_json(file), "root": output::path_json(&root),
            "entries": r.entries, "published": r.published, "bytes": r.bytes,
        }))
    } else {
        println!(
            "{}: {} entries checked, {} published into {} ({} already there)",
            file.display(),
            r.entries,
            r.published,
            root.display(),
            r.entries - r.published
        );
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::parse_size;

    #[test]
    fn sizes_with_binary_suffixes() {
        assert_eq!(parse_size("1024"), Ok(1024));
        assert_eq!(parse_size("500M"), Ok(500 * 1024 * 1024));
        assert_eq!(parse_size("2G"), Ok(2 * 1024 * 1024 * 1024));
        assert_eq!(parse_size("1.5k"), Ok(1536));
        assert_eq!(parse_size("10KiB"), Ok(10240));
        assert_eq!(parse_size("3mb"), Ok(3 * 1024 * 1024));
    }

    #[test]
    fn bad_sizes_name_the_text() {
        for bad in ["", "G", "2X", "-1M", "1.2.3G", "abc", "99999999999T"] {
            let e = parse_size(bad).expect_err(bad);
            assert!(e.contains(&format!("'{bad}'")), "{e}");
        }
    }
}
