//! Why a compile would hit or miss: [`Jit::explain`] computes the direct-key record of a
//! source and options field by field (`record_fields`), checks the header
//! manifest it names file by file, says which tier holds the result, and on a miss names the
//! fields that differ from the nearest entry compiled from the same source.
//!
//! The tiers are asked in a compile's order: this `Jit`'s in-process cache, the disk roots,
//! the remote tier. Nothing is compiled, no entry is marked used (the disk is read with
//! `peek`) and nothing is written. The key record, manifest
//! and result key are reported whichever tier hits.
//!
//! # The nearest entry
//! * When the disk holds a header manifest for the direct key, the compile was published with
//!   these very options: the nearest entry is the one that manifest names, and what differs is
//!   in the files: each file whose content changed (`file include/0/x.h`: the result-key
//!   record's `file` field, named by its `-I` directory index as in the key) and each searched
//!   directory whose listing changed (`dir include/0`), with the names of the entries added
//!   (`now`) and removed (`entry`) since, when the result kept its listing
//!   (`DIR_LISTINGS_ARTEFACT`: directories below `-I` directories,
//!   the source's own among them with `hipjit compile`).
//! * Otherwise every entry of the disk roots is read, and among those storing their key
//!   record (artefact `KEY_RECORD_ARTEFACT`, written since it exists)
//!   with the same `source` digest, the one with the fewest differing fields is the nearest.
//!   A flag that only restates another differing field (`--offload-arch=T` for `targets`,
//!   `-std=` for `std`, `-mcode-object-version=` for `code-object-version`) is not counted
//!   against `flags`; `flags` is named only for the flags that differ beyond those.
//!   Entries written before the key record was stored, and entries of the remote tier, are
//!   not compared.

use std::path::{Path, PathBuf};

use super::{CompilerUsed, Jit, JitError};
use crate::cache::key::{self, CacheKey, KeyField, KeyFields, KEY_RECORD_ARTEFACT};
use crate::cache::manifest::{self, DirListings, Manifest, MANIFEST_ARTEFACT};
use crate::compiler::identity::hash_file;
use crate::compiler::CompileOptions;

/// Where the result of a request is, when a tier holds it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Hit {
    /// This `Jit`'s in-process cache ([`Jit::is_in_memory`]).
    Memory,
    /// A disk root: the entry file.
    Disk(PathBuf),
    /// The remote tier: the entry's key name on the server (as
    /// [`crate::cache::remote::RemoteCache::describe`] writes it).
    Remote(PathBuf),
}

/// A file of a header manifest, now.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FileStatus {
    /// Same stat fields as recorded (not hashed again).
    Unchanged,
    /// Other stat fields, same content.
    Touched,
    /// Other content.
    Changed,
    /// Gone, not a regular file, or unreadable.
    Missing,
}

/// A searched directory of a header manifest, now.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DirStatus {
    /// Same listing (names, and which are directories).
    Unchanged,
    /// Another listing: a header may be found elsewhere now.
    Changed,
    /// Recorded as absent, there now.
    Appeared,
    /// Recorded, gone now.
    Missing,
}

/// A file of the header manifest and its state now.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FileCheck {
    /// Its name as keyed: `include/<index>/<name>` below a `-I` directory, else its
    /// absolute path (lossy text).
    pub name: String,
    /// Where it is read now (`None`: an include directory index the options lack).
    pub path: Option<PathBuf>,
    /// Its state.
    pub status: FileStatus,
    /// sha256 recorded, hex.
    pub recorded_sha256: String,
    /// sha256 now, hex (`None` when missing).
    pub sha256: Option<String>,
}

/// A searched directory of the header manifest and its state now.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DirCheck {
    /// Its name as keyed (as [`FileCheck::name`]).
    pub name: String,
    /// Where it is now.
    pub path: Option<PathBuf>,
    /// Its state.
    pub status: DirStatus,
    /// When it changed: the names of its entries now that were not there when the result
    /// was compiled (a header added beside the source), sorted; `None` when that is not
    /// known (the result entry kept no listing of it: `DIR_LISTINGS_ARTEFACT`;
    /// or the directory cannot be listed now).
    pub added: Option<Vec<String>>,
    /// As `added`, the names of the entries there then and gone now.
    pub removed: Option<Vec<String>>,
}

/// The header manifest of the direct key, checked against the files as they are now.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ManifestReport {
    /// The manifest's entry file.
    pub entry: PathBuf,
    /// Its files, in manifest order.
    pub files: Vec<FileCheck>,
    /// Its directories, in manifest order.
    pub dirs: Vec<DirCheck>,
}

/// A field whose value differs from the nearest entry's.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FieldDifference {
    /// The field: a direct-key record field (`flags`, `std`, `targets`,
    /// `compiler-fingerprint`...), or `file <name>` / `dir <name>` of the header manifest.
    pub field: String,
    /// The value now: items as text, or `sha256 <hex>` for a field shown by digest; for
    /// `flags`, only the flags the entry lacks; for a `dir` whose recorded listing was kept,
    /// the names of the entries added since (`name/` for a directory).
    pub now: Vec<String>,
    /// The entry's value (for `flags`, only the flags this request lacks; for a `dir`, the
    /// entries removed since).
    pub entry: Vec<String>,
}

/// The entry compiled from the same source that differs least (see the module
/// documentation).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Nearest {
    /// Its entry file.
    pub entry: PathBuf,
    /// Its key.
    pub key: CacheKey,
    /// What differs, in record order.
    pub differing: Vec<FieldDifference>,
}

/// What [`Jit::explain`] found.
#[derive(Clone, Debug)]
pub struct Explanation {
    /// The options as keyed (effective options).
    pub options: CompileOptions,
    /// The compiler that would compile it, and why.
    pub compiler: CompilerUsed,
    /// The direct key.
    pub direct_key: CacheKey,
    /// The direct-key record, field by field.
    pub fields: KeyFields,
    /// The header manifest of the direct key on disk, checked now; `None` when the disk
    /// holds none (never compiled with these options here, or the key differs).
    pub manifest: Option<ManifestReport>,
    /// The result key, when a manifest gives one.
    pub result_key: Option<CacheKey>,
    /// Where the result is, when a tier holds it.
    pub hit: Option<Hit>,
    /// On a miss, the nearest entry compiled from the same source, when there is one.
    pub nearest: Option<Nearest>,
    /// What went wrong while looking (a manifest that does not decode, the remote tier
    /// unreachable, bad entries met).
    pub warnings: Vec<String>,
}

fn base_name(include_dir: Option<u32>, name: &[u8]) -> String {
    let name = String::from_utf8_lossy(name);
    match include_dir {
        None => name.into_owned(),
        Some(manifest::INSTALLATION) => format!("installation/{name}"),
        Some(i) if name.is_empty() => format!("include/{i}"),
        Some(i) => format!("include/{i}/{name}"),
    }
}

/// The manifest's files and directories as they are now (`installation`: the compiler's
/// installation root; `listings`: those the result compiled with this manifest kept).
fn check_manifest(
    entry: &Path,
    m: &Manifest,
    include_dirs: &[PathBuf],
    installation: &Path,
    listings: Option<&DirListings>,
) -> ManifestReport {
    let files = m
        .files
        .iter()
        .map(|f| {
            let path = manifest::resolve(f.include_dir, &f.name, include_dirs, installation);
            let now = path
                .as_deref()
                .and_then(|p| crate::fs::stat::stat(p).ok().filter(|m| m.is_file()));
            let (status, sha) = match (&path, now) {
                // The stat-trust rule, as a lookup applies it ([`FileStat::proves_same_as`]).
                (Some(_), Some(meta)) if f.stat.proves_same_as(&meta.fields) => {
                    (FileStatus::Unchanged, Some(f.sha256))
                }
                (Some(p), Some(_)) => match hash_file(p) {
                    Ok(h) if h == f.sha256 => (FileStatus::Touched, Some(h)),
                    Ok(h) => (FileStatus::Changed, Some(h)),
                    Err(_) => (FileStatus::Missing, None),
                },
                _ => (FileStatus::Missing, None),
            };
            FileCheck {
                name: base_name(f.include_dir, &f.name),
                path,
                status,
                recorded_sha256: key::hex(&f.sha256),
                sha256: sha.map(|h| key::hex(&h)),
            }
        })
        .collect();
    let dirs = m
        .dirs
        .iter()
        .map(|d| {
            let path = manifest::resolve(d.include_dir, &d.name, include_dirs, installation);
            let (stat, entries) = match &path {
                Some(p) => manifest::dir_state_listed(p, d.looked_up.as_deref()),
                None => (None, None),
            };
            let listing = entries.as_deref().map(manifest::hash_listing);
            let status = match (d.stat.is_some(), stat.is_some()) {
                (false, true) => DirStatus::Appeared,
                (true, false) => DirStatus::Missing,
                (false, false) => DirStatus::Unchanged,
                (true, true) if listing == d.listing => DirStatus::Unchanged,
                (true, true) => DirStatus::Changed,
            };
            let then = listings.and_then(|l| l.get(d.include_dir, &d.name));
            let (added, removed) = match (status, then, entries) {
                (DirStatus::Changed, Some(then), Some(now)) => {
                    let names = |a: &[(Vec<u8>, bool)], b: &[(Vec<u8>, bool)]| {
                        a.iter()
                            .filter(|e| !b.contains(e))
                            .map(|(n, dir)| {
                                let n = String::from_utf8_lossy(n);
                                if *dir {
                                    format!("{n}/")
                                } else {
                                    n.into_owned()
                                }
                            })
                            .collect::<Vec<_>>()
                    };
                    (
                        Some(names(&now, &then.entries)),
                        Some(names(&then.entries, &now)),
                    )
                }
                _ => (None, None),
            };
            DirCheck {
                name: base_name(d.include_dir, &d.name),
                path,
                status,
                added,
                removed,
            }
        })
        .collect();
    ManifestReport {
        entry: entry.to_path_buf(),
        files,
        dirs,
    }
}

/// The manifest's files and directories that differ now, as [`FieldDifference`]s.
fn manifest_differences(report: &ManifestReport) -> Vec<FieldDifference> {
    let mut out = Vec::new();
    for f in &report.files {
        match f.status {
            FileStatus::Unchanged | FileStatus::Touched => {}
            FileStatus::Changed | FileStatus::Missing => out.push(FieldDifference {
                field: format!("file {}", f.name),
                now: vec![f
                    .sha256
                    .as_ref()
                    .map_or_else(|| "missing".to_string(), |h| format!("sha256 {h}"))],
                entry: vec![format!("sha256 {}", f.recorded_sha256)],
            }),
        }
    }
    for d in &report.dirs {
        let (now, then) = match d.status {
            DirStatus::Unchanged => continue,
            DirStatus::Changed => match (&d.added, &d.removed) {
                // Only the names that differ, as for `flags`.
                (Some(added), Some(removed)) if !(added.is_empty() && removed.is_empty()) => {
                    out.push(FieldDifference {
                        field: format!("dir {}", d.name),
                        now: added.clone(),
                        entry: removed.clone(),
                    });
                    continue;
                }
                _ => ("another listing", "listing recorded"),
            },
            DirStatus::Appeared => ("present", "absent"),
            DirStatus::Missing => ("absent", "present"),
        };
        out.push(FieldDifference {
            field: format!("dir {}", d.name),
            now: vec![now.into()],
            entry: vec![then.into()],
        });
    }
    out
}

fn shown(f: &KeyField) -> Vec<String> {
    f.value
        .clone()
        .unwrap_or_else(|| vec![format!("sha256 {}", f.sha256)])
}

/// Whether `flag` only restates a field that differs anyway.
fn restates(flag: &str, differing: &[&str], targets: &[String]) -> bool {
    (differing.contains(&"targets")
        && (flag == "--no-gpu-bundle-output" || targets.iter().any(|t| flag.ends_with(t.as_str()))))
        || (differing.contains(&"std") && flag.starts_with("-std="))
        || (differing.contains(&"code-object-version") && flag.contains("code-object-version"))
}

/// The fields of `now` that differ from `then` (see the module documentation for `flags`).
pub fn field_differences(now: &KeyFields, then: &KeyFields) -> Vec<FieldDifference> {
    let mut out: Vec<FieldDifference> = now
        .0
        .iter()
        .filter_map(|f| match then.get(&f.name) {
            Some(t) if t.sha256 == f.sha256 => None,
            Some(t) => Some(FieldDifference {
                field: f.name.clone(),
                now: shown(f),
                entry: shown(t),
            }),
            None => Some(FieldDifference {
                field: f.name.clone(),
                now: shown(f),
                entry: vec!["(not recorded)".into()],
            }),
        })
        .collect();
    let names: Vec<String> = out.iter().map(|d| d.field.clone()).collect();
    let names: Vec<&str> = names.iter().map(String::as_str).collect();
    if let Some(i) = out.iter().position(|d| d.field == "flags") {
        let items =
            |k: &KeyFields, n: &str| k.get(n).and_then(|f| f.value.clone()).unwrap_or_default();
        let targets: Vec<String> = items(now, "targets")
            .into_iter()
            .chain(items(then, "targets"))
            .collect();
        let mut removed = out[i].entry.clone();
        let mut added = Vec::new();
        for f in &out[i].now {
            match removed.iter().position(|r| r == f) {
                Some(p) => {
                    removed.remove(p);
                }
                None => added.push(f.clone()),
            }
        }
        if !(added.is_empty() && removed.is_empty()) {
            // Not only reordered: show what differs beyond the other fields.
            added.retain(|f| !restates(f, &names, &targets));
            removed.retain(|f| !restates(f, &names, &targets));
            if added.is_empty() && removed.is_empty() {
                out.remove(i);
            } else {
                out[i].now = added;
                out[i].entry = removed;
            }
        }
    }
    out
}

impl Jit {
    /// Explains the cache key of `source` (its bytes) compiled with `options`, and whether
    /// and where the caches hold its result; on a miss, the nearest entry compiled from the
    /// same source and what differs (see [`crate::jit::explain`]). Compiles nothing, writes
    /// nothing: no cache entry and no compiler-identity memo
    /// (`memos_read_only`).
    ///
    /// Errors: [`JitError::Compile`] with what [`Jit::compile`] would refuse before its
    /// compiler runs (`before_compiling`: invalid options, an
    /// include directory that is not one...), the same error; [`JitError::Compiler`] when the
    /// compiler cannot be found or identified (its identity is part of the key).
    pub fn explain(
        &self,
        source: impl AsRef<[u8]>,
        options: &CompileOptions,
    ) -> Result<Explanation, JitError> {
        // Finding and identifying the compiler remembers nothing either.
        crate::compiler::identity::memos_read_only(|| self.explain_impl(source.as_ref(), options))
    }

    fn explain_impl(
        &self,
        source: &[u8],
        options: &CompileOptions,
    ) -> Result<Explanation, JitError> {
        let (o, chosen) = self.checked(source, options, None)?;
        // What a compile would refuse before the compiler runs is refused here too.
        crate::compiler::refusal::before_compiling(&chosen.backend, source, &o)?;
        let (direct, fields): (CacheKey, KeyFields) =
            chosen.backend.request(source, &o, &self.extra);
        let installation = chosen.backend.identity().root.clone();
        let mut out = Explanation {
            options: o.clone(),
            compiler: chosen.used(),
            direct_key: direct,
            fields,
            manifest: None,
            result_key: None,
            hit: None,
            nearest: None,
            warnings: Vec::new(),
        };
        if self.is_in_memory(source, options) {
            out.hit = Some(Hit::Memory);
        }
        let mut stored: Option<Manifest> = None;
        if let Some(disk) = &self.disk {
            let lookup = disk.peek(&direct);
            out.warnings.extend(
                lookup
                    .bad
                    .iter()
                    .map(|b| format!("bad entry {}: {}", b.path.display(), b.reason)),
            );
            if let Some(entry) = lookup.entry {
                match entry.artefact(MANIFEST_ARTEFACT).map(Manifest::from_bytes) {
                    Some(Ok(m)) => {
                        // The listings the result compiled with this manifest kept.
                        let listings =
                            disk.peek(&key::result_key(&direct, &m))
                                .entry
                                .and_then(|e| {
                                    e.artefact(manifest::DIR_LISTINGS_ARTEFACT)
                                        .and_then(DirListings::from_bytes)
                                });
                        out.manifest = Some(check_manifest(
                            &entry.path,
                            &m,
                            &o.include_dirs,
                            &installation,
                            listings.as_ref(),
                        ));
                        stored = Some(m);
                    }
                    Some(Err(e)) => out
                        .warnings
                        .push(format!("the header manifest {}: {e}", entry.path.display())),
                    None => out
                        .warnings
                        .push(format!("{} holds no header manifest", entry.path.display())),
                }
            }
            if let Some(now) = stored
                .as_ref()
                .and_then(|m| m.current(&o.include_dirs, &installation))
            {
                let rk = key::result_key(&direct, &now);
                out.result_key = Some(rk);
                if let (Some(e), None) = (disk.peek(&rk).entry, &out.hit) {
                    out.hit = Some(Hit::Disk(e.path));
                }
            }
        }
        if out.hit.is_none() {
            for remote in &self.remote {
                if out.hit.is_some() {
                    break;
                }
                let fetch = remote.fetch(&direct, &o.include_dirs, &installation);
                out.warnings.extend(fetch.warnings);
                out.warnings.extend(
                    fetch
                        .bad
                        .iter()
                        .map(|b| format!("bad remote entry {}: {}", b.path.display(), b.reason)),
                );
                if let Some(h) = fetch.hit {
                    out.result_key = Some(h.key);
                    out.hit = Some(Hit::Remote(h.entry.path));
                }
            }
        }
        if out.hit.is_none() {
            out.nearest = self.nearest(&out, stored.as_ref());
        }
        Ok(out)
    }

    fn nearest(&self, e: &Explanation, stored: Option<&Manifest>) -> Option<Nearest> {
        let disk = self.disk.as_ref()?;
        let mut recorded_for = None;
        if let (Some(m), Some(report)) = (stored, &e.manifest) {
            // Compiled with these very options: what differs is in the files read.
            let rk = key::result_key(&e.direct_key, m);
            recorded_for = Some(rk);
            if let Some(entry) = disk.peek(&rk).entry {
                return Some(Nearest {
                    entry: entry.path,
                    key: rk,
                    differing: manifest_differences(report),
                });
            }
        }
        let source = &e.fields.get("source")?.sha256;
        let mut best: Option<Nearest> = None;
        for summary in disk.list().ok()? {
            let Some(k) = summary.key else { continue };
            if Some(k) == recorded_for || k == e.direct_key {
                continue;
            }
            let Some(entry) = disk.peek(&k).entry else {
                continue;
            };
            let Some(theirs) = entry
                .artefact(KEY_RECORD_ARTEFACT)
                .and_then(KeyFields::from_bytes)
            else {
                continue;
            };
            if theirs.get("source").map(|f| &f.sha256) != Some(source) {
                continue;
            }
            let differing = field_differences(&e.fields, &theirs);
            if best
                .as_ref()
                .is_none_or(|b| differing.len() < b.differing.len())
            {
                best = Some(Nearest {
                    entry: entry.path,
                    key: k,
                    differing,
                });
            }
        }
        best
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn field(name: &str, value: &[&str]) -> KeyField {
        let value: Vec<String> = value.iter().map(|s| s.to_string()).collect();
        KeyField {
            name: name.into(),
            sha256: key::hex(&key::sha256(value.join("\n").as_bytes())),
            bytes: 0,
            value: Some(value),
        }
    }

    fn fields(target: &str, std: &str, define: &str) -> KeyFields {
        KeyFields(vec![
            field(
                "flags",
                &[
                    "-x",
                    "hip",
                    &format!("--offload-arch={target}"),
                    "-O3",
                    "--no-gpu-bundle-output",
                    define,
                ],
            ),
            field("std", &[std]),
            field("targets", &[target]),
        ])
    }

    fn names(d: &[FieldDifference]) -> Vec<&str> {
        d.iter().map(|d| d.field.as_str()).collect()
    }

    #[test]
    fn a_target_or_std_change_is_not_also_a_flags_change() {
        let a = fields("gfx90a", "-std=c++17", "-DN=1");
        let t = field_differences(&fields("gfx906", "-std=c++17", "-DN=1"), &a);
        assert_eq!(names(&t), ["targets"]);
        let s = field_differences(&fields("gfx90a", "-std=c++20", "-DN=1"), &a);
        assert_eq!(names(&s), ["std"]);
        let d = field_differences(&fields("gfx90a", "-std=c++17", "-DN=2"), &a);
        assert_eq!(names(&d), ["flags"]);
        assert_eq!(d[0].now, ["-DN=2"]);
        assert_eq!(d[0].entry, ["-DN=1"]);
        // Both: flags keeps only the define.
        let both = field_differences(&fields("gfx906", "-std=c++17", "-DN=2"), &a);
        assert_eq!(names(&both), ["flags", "targets"]);
        assert_eq!(both[0].now, ["-DN=2"]);
    }
}
