//! `hipjit cache warm FILE [-j N] [--json]`: replays the compile requests recorded with
//! `HIPJIT_RECORD` (`hipjit::jit::record`) so that the caches hold every kernel: each distinct
//! request goes through the normal `Jit` path (memory, disk roots, the remote tier of
//! `HIPJIT_REMOTE_CACHE`, then the compiler), so only what is missing everywhere is compiled.

use std::collections::{HashMap, HashSet};
use std::io::IsTerminal;
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

use hipjit::compiler::cancel::CancelToken;
use hipjit::compiler::selection::CompilerChoice;
use hipjit::compiler::CompileOptions;
use hipjit::jit::record::{self, RecordLocation, Request};
use hipjit::jit::{Jit, JitOptions, Origin};

use crate::compile::{compiler_config, interrupted, one_bound, origin_name, threads_for};
use crate::output::{self, CliError};

/// What became of one distinct request.
struct Outcome {
    /// The record's line (the first, when it was recorded several times).
    line: usize,
    /// Where it came from, its key (hex) and whether it is in the cache now (a compile whose
    /// result could not be stored is not); or the error.
    result: Result<(Origin, String, bool), String>,
}

fn cache_name(o: Origin) -> &'static str {
    match o {
        Origin::Memory => "memory",
        Origin::Disk => "disk",
        Origin::Remote => "remote",
        Origin::Compiler => "miss",
        Origin::Frozen => "frozen",
    }
}

/// Runs `hipjit cache warm FILE`.
///
/// Errors: exit status 1 when the file cannot be read, a `Jit` cannot be set up (a bad cache
/// root or `HIPJIT_REMOTE_CACHE`), any request failed (each named with its line), or a
/// request compiled but could not be cached.
pub fn run(file: &Path, jobs: usize, json: bool) -> Result<(), CliError> {
    let records = record::read_records(file)
        .map_err(|e| CliError::failed(format!("cannot read {}: {e}", file.display())))?;
    for b in &records.bad {
        eprintln!(
            "hipjit: warning: {}:{}: line skipped, nothing warmed for it: {}",
            file.display(),
            b.line,
            b.reason
        );
    }
    // Distinct requests, each with the first line that asks for it.
    type Distinct<'a> = (&'a [u8], &'a CompileOptions, CompilerChoice, &'a [u8]);
    let mut seen: HashSet<Distinct<'_>> = HashSet::new();
    let mut distinct: Vec<(usize, &Request)> = Vec::new();
    for (line, r) in &records.requests {
        let k = (
            &r.source[..],
            &r.options,
            r.compiler,
            &r.extra_signature[..],
        );
        if seen.insert(k) {
            distinct.push((*line, r));
        }
    }
    let duplicates = records.requests.len() - distinct.len();
    // From here on, SIGINT/SIGTERM/SIGHUP cancel the compiles (their compilers killed, their
    // build directories removed, nothing published) and the command exits 128 + the signal's
    // number, as `hipjit compile` does.
    let cancel = CancelToken::new();
    let interrupts = crate::interrupt::Interrupts::install(&cancel).map_err(CliError::failed)?;
    // One Jit per (compiler choice, signature): both are the Jit's, not the request's. They
    // share one config, and so one pool of hipRTC/NVRTC workers (at most `jobs` busy at once).
    let config = compiler_config(jobs, distinct.len());
    let mut jits: HashMap<(CompilerChoice, Vec<u8>), Jit> = HashMap::new();
    for (_, r) in &distinct {
        let k = (r.compiler, r.extra_signature.clone());
        if jits.contains_key(&k) {
            continue;
        }
        let jit = Jit::new(JitOptions {
            compiler: Some(r.compiler),
            compiler_config: config.clone(),
            extra_signature: r.extra_signature.clone(),
            // Replaying must not record the replay.
            record: RecordLocation::Disabled,
            ..JitOptions::default()
        })
        .map_err(|e| {
            crate::compile::environment_error(&e).unwrap_or_else(|| CliError::failed(e.to_string()))
        })?;
        jits.insert(k, jit);
    }

    let n = distinct.len();
    let bar = (n > 0 && !json && std::io::stderr().is_terminal()).then(|| {
        let b = indicatif::ProgressBar::new(n as u64);
        if let Ok(style) = indicatif::ProgressStyle::with_template(
            "{spinner} [{bar:30}] {pos}/{len} {elapsed} {msg}",
        ) {
            b.set_style(style.progress_chars("=> "));
        }
        b.enable_steady_tick(std::time::Duration::from_millis(120));
        b
    });
    let say = |text: String| match &bar {
        Some(b) => b.suspend(|| eprintln!("{text}")),
        None => eprintln!("{text}"),
    };
    let next = AtomicUsize::new(0);
    let results: Mutex<Vec<Option<Outcome>>> = Mutex::new((0..n).map(|_| None).collect());
    let choices: Vec<CompilerChoice> = jits.values().map(Jit::compiler_choice).collect();
    std::thread::scope(|s| {
        for _ in 0..threads_for(jobs, n, one_bound(&choices)) {
            s.spawn(|| {
                cancel.scope(|| loop {
                    if cancel.is_cancelled() {
                        break;
                    }
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    if i >= n {
                        break;
                    }
                    let (line, r) = distinct[i];
                    let jit = &jits[&(r.compiler, r.extra_signature.clone())];
                    let result = jit
                        .compile(&r.source, &r.options)
                        .map(|c| {
                            for w in c.cache_warnings() {
                                say(format!("hipjit: warning: {}:{line}: {w}", file.display()));
                            }
                            // A compile whose result could not be stored (a file it read changed
                            // while it ran, a root that cannot be written) warmed nothing.
                            let cached = c.origin() != Origin::Compiler || c.entry_path().is_some();
                            (c.origin(), c.key().to_hex(), cached)
                        })
                        .map_err(|e| e.to_string());
                    if let (Err(e), false) = (&result, cancel.is_cancelled()) {
                        say(format!("hipjit: error: {}:{line}: {e}", file.display()));
                    }
                    if let Some(b) = &bar {
                        b.set_message(match &result {
                            Ok((o, _, _)) => format!("line {line}: {}", origin_name(*o)),
                            Err(_) => format!("line {line}: failed"),
                        });
                        b.inc(1);
                    }
                    if let Ok(mut r) = results.lock() {
                        r[i] = Some(Outcome { line, result });
                    }
                })
            });
        }
    });
    if let Some(b) = bar {
        b.finish_and_clear();
    }
    if let Some(sig) = interrupts.finish() {
        return Err(interrupted(sig));
    }
    for jit in jits.values() {
        // Remote hits are copied to the first disk root in the background: done before exit.
        jit.flush_cache_writes();
    }
    let outcomes: Vec<Outcome> = results
        .into_inner()
        .unwrap_or_default()
        .into_iter()
        .flatten()
        .collect();
    let count = |f: &dyn Fn(&Outcome) -> bool| outcomes.iter().filter(|o| f(o)).count();
    let compiled = count(&|o| matches!(o.result, Ok((Origin::Compiler, _, true))));
    let not_cached = count(&|o| matches!(o.result, Ok((_, _, false))));
    let in_memory = count(&|o| matches!(o.result, Ok((Origin::Memory, _, _))));
    let on_disk = count(&|o| matches!(o.result, Ok((Origin::Disk, _, _))));
    let remote = count(&|o| matches!(o.result, Ok((Origin::Remote, _, _))));
    let failed = count(&|o| o.result.is_err());
    let present = in_memory + on_disk + remote;
    if json {
        let list: Vec<serde_json::Value> = outcomes
            .iter()
            .map(|o| match &o.result {
                Ok((origin, key, cached)) => serde_json::json!({
                    "line": o.line, "ok": true, "cache": cache_name(*origin), "key": key,
                    "cached": cached,
                }),
                Err(e) => serde_json::json!({"line": o.line, "ok": false, "error": e}),
            })
            .collect();
        let bad: Vec<serde_json::Value> = records
            .bad
            .iter()
            .map(|b| serde_json::json!({"line": b.line, "reason": b.reason}))
            .collect();
        output::print_json(serde_json::json!({
            "file": output::path_json(file),
            "requests": n, "duplicates": duplicates, "bad_lines": bad,
            "compiled": compiled, "not_cached": not_cached, "present": present,
            "present_in": {"memory": in_memory, "disk": on_disk, "remote": remote},
            "failed": failed, "results": list,
        }))?;
    } else {
        println!(
            "{}: {n} distinct requests ({duplicates} repeated, {}): \
             {compiled} compiled, {present} present (disk {on_disk}, remote {remote}), \
             {failed} failed{}",
            file.display(),
            match records.bad.len() {
                0 => "no line skipped".to_string(),
                1 => "1 line skipped: see the warning".to_string(),
                k => format!("{k} lines skipped: see the warnings"),
            },
            if not_cached > 0 {
                format!(", {not_cached} compiled but not cached (see the warnings)")
            } else {
                String::new()
            }
        );
        for o in &outcomes {
            if let Err(e) = &o.result {
                // The whole error went to stderr as it happened; its first line here.
                println!(
                    "  line {}: failed: {}",
                    o.line,
                    e.lines().next().unwrap_or_default()
                );
            }
        }
    }
    if not_cached > 0 && failed == 0 {
        return Err(CliError::failed(format!(
            "{not_cached} of {n} recorded requests compiled but were not cached (lines {}): \
             the cache is not warm for them",
            outcomes
                .iter()
                .filter(|o| matches!(o.result, Ok((_, _, false))))
                .map(|o| o.line.to_string())
                .collect::<Vec<_>>()
                .join(", ")
        )));
    }
    if failed > 0 {
        return Err(CliError::failed(format!(
            "{failed} of {n} recorded requests failed (lines {})",
            outcomes
                .iter()
                .filter(|o| o.result.is_err())
                .map(|o| o.line.to_string())
                .collect::<Vec<_>>()
                .join(", ")
        )));
    }
    Ok(())
}
