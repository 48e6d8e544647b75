//! Frozen bundles: compiled kernels a crate or a service builds ahead of time and ships
//! (`include_bytes!` or a file), served without a compiler.
//!
//! # The frozen key
//! A frozen entry is named without the local compiler: sha256 over a record
//! ([`RequestFields`]) of the request's source bytes, hipjit's own flags (each `-I` directory
//! by its index, as the direct key writes it: [`crate::cache::key`]), the standard, the extra
//! flags, the targets (whole target IDs, features such as `xnack` and `sramecc` included),
//! the code-object version (0: the compiler's default), the source's file name, the dumps
//! asked for, the `Jit`'s compiler choice (`auto`, `hipcc`, `hiprtc`, `nvcc`, `nvrtc`), the
//! caller's signature and the in-memory headers (each by name and content's sha256; the field
//! only when there are some). [`RequestFields::new`] names every field of
//! [`CompileOptions`], so that one added there is not left out of the key unnoticed. A request that differs in any of these is not served; its nearest
//! frozen request (the fewest fields apart) is named with the fields that differ.
//!
//! # What a lookup checks ([`FrozenBundle::lookup`])
//! * each header the compile read below a `-I` directory, by content: one that is missing or
//!   differs is refused by name ([`Refusal::HeaderMissing`], [`Refusal::HeaderChanged`]);
//! * each directory below a `-I` directory the compiler searched, by the names it could have
//!   looked up there: a header added or removed there (one that would shadow the frozen one)
//!   is refused by name ([`Refusal::DirectoryChanged`]);
//! * each header read by absolute path outside the compiler's installation (a system header):
//!   where such a file exists here and differs, refused by name
//!   ([`Refusal::SystemHeaderChanged`]); where it does not exist, the code object is what was
//!   frozen (a machine without the headers).
//!
//! Where a compiler is present ([`FrozenEntry::check_compiler`]), its identity (kind,
//! version, fingerprint) must be the one recorded, and the headers of its installation the
//! ones the compile read: a mismatch is a miss ([`Refusal::CompilerDiffers`],
//! [`Refusal::InstallationHeaderChanged`]), never wrong code.
//!
//! # Layout
//! A Zstandard frame (RFC 8878) whose content is [`FROZEN_MAGIC`], [`FROZEN_VERSION`] (`u32`
//! LE), then MessagePack: the list of [`FrozenEntry`], each holding its disk-cache entry
//! (`disk`: the code objects, the command, the diagnostics) byte for byte with its sha256. A
//! bundle is checked whole when opened (magic, version, each entry's sha256 and key) and each
//! entry again (its artefacts' sha256) when it is served.

use std::collections::HashMap;
use std::io::Read;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::disk::Entry;
use super::key::{hex, sha256, CacheKey};
use super::manifest::{self, Manifest, INSTALLATION};
use crate::compiler::request::key_flags;
use crate::compiler::{CompileOptions, CompilerIdentity};
use crate::digest::Record;

/// The first bytes of a frozen bundle's content (inside the Zstandard frame).
pub const FROZEN_MAGIC: &[u8; 8] = b"HIPJITFZ";
/// The frozen bundle layout version. 2: bundles frozen from disk caches of format 7 and
/// before, whose direct key left out the source's file name, may hold the code compiled under
/// one name in the entry frozen for another: refused as a layout this hipjit does not read.
pub const FROZEN_VERSION: u32 = 2;
/// The largest frozen bundle read, in bytes, decompressed: 1 GiB.
pub const FROZEN_LIMIT: u64 = 1 << 30;

/// The fields of a request's frozen key (see the module documentation), as text so that a
/// refusal can name those that differ.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RequestFields {
    /// sha256 of the source bytes, hex.
    pub source_sha256: String,
    /// The source's length in bytes.
    pub source_bytes: u64,
    /// hipjit's own flags, `-I` directories by index, without the code-object version.
    pub flags: Vec<String>,
    /// The standard (`c++17`...).
    pub std: String,
    /// The caller's extra flags.
    pub extra_flags: Vec<String>,
    /// The AMDGPU target IDs, or the SM target.
    pub targets: Vec<String>,
    /// The code-object version, 0 for the compiler's default.
    pub code_object_version: u32,
    /// The source's file name, when given.
    pub source_name: Option<String>,
    /// The `Jit`'s compiler choice.
    pub compiler_choice: String,
    /// sha256 of the caller's signature, hex.
    pub signature_sha256: String,
    /// The in-memory headers ([`CompileOptions::headers`]), each as its name and the sha256
    /// of its contents (hex), in the order given; empty when there are none (and then not in
    /// the key, so that the keys of requests without them are those of earlier bundles).
    #[serde(default)]
    pub headers: Vec<(String, String)>,
}

impl RequestFields {
    /// The fields of `source` compiled with `options` (their code-object version as given:
    /// `None` is 0) by a `Jit` whose compiler choice is `choice` and signature `signature`.
    pub fn new(
        source: &[u8],
        options: &CompileOptions,
        choice: &str,
        signature: &[u8],
    ) -> RequestFields {
        // Every field of the options, named: one added to `CompileOptions` does not compile
        // here until it is decided how the frozen key covers it (a field left out of the key
        // would let a bundle serve code compiled with another value of it).
        let CompileOptions {
            targets: _,              // `targets` (target_names)
            sm_targets: _,           // `targets` (target_names)
            std: _,                  // `std`
            opt_level: _,            // `flags` (own_flags)
            fast_math: _,            // `flags`
            defines: _,              // `flags`
            headers,                 // `headers`, by name and content
            include_dirs: _,         // `flags`, by index; their files by the entry's header list
            tracked_include_dirs: _, // not on the include path: their files, where read, are in the entry's header list
            line_info: _,            // `flags`
            verbose: _,              // no effect on the code
            extra_flags: _,          // `extra_flags`
            code_object_version: _,  // `code_object_version`
            source_name: _,          // `source_name`
            dump_llvm_ir: _,         // `flags`
            dump_isa: _,             // `flags`
            checks: _,               // checks of the result's metadata, run on every load
        } = options;
        let mut o = options.clone();
        let cov = o.code_object_version.take().unwrap_or(0);
        o.verbose = false;
        o.dump_llvm_ir = false;
        o.dump_isa = false;
        let mut flags = key_flags(&o);
        if options.dump_llvm_ir {
            flags.push("dump-llvm-ir".into());
        }
        if options.dump_isa {
            flags.push("dump-isa".into());
        }
        RequestFields {
            source_sha256: hex(&sha256(source)),
            source_bytes: source.len() as u64,
            flags,
            std: options.std.to_string(),
            extra_flags: options.extra_flags.clone(),
            targets: options.target_names(),
            code_object_version: cov,
            source_name: options.source_name.clone(),
            compiler_choice: choice.to_string(),
            signature_sha256: hex(&sha256(signature)),
            headers: headers
                .iter()
                .map(|(name, contents)| (name.clone(), hex(&sha256(contents.as_bytes()))))
                .collect(),
        }
    }

    /// The frozen key: sha256 over the fields, each length-prefixed (`digest`).
    pub fn key(&self) -> CacheKey {
        let mut r = Record::new();
        let list = |items: &[String]| {
            let mut v = Vec::new();
            for i in items {
                v.extend_from_slice(&(i.len() as u64).to_le_bytes());
                v.extend_from_slice(i.as_bytes());
            }
            v
        };
        r.field("frozen-version", &FROZEN_VERSION.to_le_bytes());
        r.field("source", self.source_sha256.as_bytes());
        r.field("flags", &list(&self.flags));
        r.field("std", self.std.as_bytes());
        r.field("extra-flags", &list(&self.extra_flags));
        r.field("targets", &list(&self.targets));
        r.field(
            "code-object-version",
            &self.code_object_version.to_le_bytes(),
        );
        r.field(
            "source-name",
            self.source_name.as_deref().unwrap_or("\0").as_bytes(),
        );
        r.field("compiler-choice", self.compiler_choice.as_bytes());
        r.field("signature", self.signature_sha256.as_bytes());
        if !self.headers.is_empty() {
            let pairs: Vec<String> = self
                .headers
                .iter()
                .flat_map(|(n, h)| [n.clone(), h.clone()])
                .collect();
            r.field("headers", &list(&pairs));
        }
        CacheKey(r.finish())
    }

    /// The fields that differ between `self` (what was asked) and `frozen`, each as
    /// `name (frozen: ..., asked: ...)`.
    pub fn differences(&self, frozen: &RequestFields) -> Vec<String> {
        let mut out = Vec::new();
        let mut diff = |name: &str, f: String, a: String| {
            if f != a {
                out.push(format!("{name} (frozen: {f}, asked: {a})"));
            }
        };
        diff(
            "source",
            format!(
                "sha256 {} of {} bytes",
                &frozen.source_sha256[..12],
                frozen.source_bytes
            ),
            format!(
                "sha256 {} of {} bytes",
                &self.source_sha256[..12],
                self.source_bytes
            ),
        );
        diff("options", frozen.flags.join(" "), self.flags.join(" "));
        diff("standard", frozen.std.clone(), self.std.clone());
        diff(
            "extra flags",
            frozen.extra_flags.join(" "),
            self.extra_flags.join(" "),
        );
        diff("targets", frozen.targets.join(","), self.targets.join(","));
        let cov = |v: u32| match v {
            0 => "the compiler's default".to_string(),
            v => v.to_string(),
        };
        diff(
            "code-object version",
            cov(frozen.code_object_version),
            cov(self.code_object_version),
        );
        diff(
            "source name",
            format!("{:?}", frozen.source_name),
            format!("{:?}", self.source_name),
        );
        diff(
            "compiler choice",
            frozen.compiler_choice.clone(),
            self.compiler_choice.clone(),
        );
        diff(
            "signature",
            frozen.signature_sha256[..12].to_string(),
            self.signature_sha256[..12].to_string(),
        );
        let headers = |h: &[(String, String)]| match h {
            [] => "none".to_string(),
            h => h
                .iter()
                .map(|(n, d)| format!("{n} sha256 {}", &d[..12]))
                .collect::<Vec<_>>()
                .join(", "),
        };
        diff(
            "in-memory headers",
            headers(&frozen.headers),
            headers(&self.headers),
        );
        out
    }
}

/// A file the frozen compile read.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct FrozenFile {
    /// Its base, as [`manifest::FileRecord::include_dir`].
    pub include_dir: Option<u32>,
    /// Its name below the base (raw bytes).
    #[serde(with = "serde_bytes")]
    pub name: Vec<u8>,
    /// sha256 of its contents.
    #[serde(with = "serde_bytes")]
    pub sha256: [u8; 32],
}

/// A directory below a `-I` directory the frozen compile searched.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct FrozenDir {
    /// The `-I` directory's index.
    pub include_dir: u32,
    /// Its name below it (raw bytes; empty: the directory itself).
    #[serde(with = "serde_bytes")]
    pub name: Vec<u8>,
    /// As [`manifest::DirRecord::listing`].
    #[serde(with = "serde_bytes")]
    pub listing: Option<[u8; 32]>,
    /// As [`manifest::DirRecord::looked_up`].
    pub looked_up: Option<Vec<serde_bytes::ByteBuf>>,
}

/// The compiler that made a frozen entry.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct FrozenCompiler {
    /// `hipcc`, `hiprtc`, `nvcc` or `nvrtc`.
    pub kind: String,
    /// Its version as keyed ([`CompilerIdentity::key_version`]).
    pub version: String,
    /// Its fingerprint ([`CompilerIdentity::fingerprint`]).
    pub fingerprint: String,
}

impl FrozenCompiler {
    /// The parts of `identity` a frozen entry records.
    pub fn of(identity: &CompilerIdentity) -> FrozenCompiler {
        FrozenCompiler {
            kind: identity.kind.as_str().to_string(),
            version: identity.key_version(),
            fingerprint: identity.fingerprint.clone(),
        }
    }
}

/// One frozen request and its result.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct FrozenEntry {
    /// The request.
    pub fields: RequestFields,
    /// The files its compile read.
    pub files: Vec<FrozenFile>,
    /// The directories below `-I` directories its compile searched.
    pub dirs: Vec<FrozenDir>,
    /// The compiler that compiled it.
    pub compiler: FrozenCompiler,
    /// The disk-cache entry's key, hex.
    pub entry_key: String,
    /// The disk-cache entry, byte for byte (`disk`).
    #[serde(with = "serde_bytes")]
    pub entry: Vec<u8>,
    /// sha256 of `entry`.
    #[serde(with = "serde_bytes")]
    pub entry_sha256: [u8; 32],
}

/// Why a frozen bundle did not serve a request: each names what differs.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Refusal {
    /// No frozen request has this key.
    #[error("no frozen entry for this request{}", match nearest {
        Some(d) => format!("; the nearest frozen request differs in {}", d.join(", ")),
        None => String::new(),
    })]
    NotFrozen {
        /// The fields in which the nearest frozen request (the fewest fields apart)
        /// differs, when there is one.
        nearest: Option<Vec<String>>,
    },
    /// A header read below a `-I` directory is missing here.
    #[error("header {name} was read when frozen and is missing here")]
    HeaderMissing {
        /// `include/<index>/<name>`, and where it was looked for.
        name: String,
    },
    /// A header read below a `-I` directory differs from the one frozen.
    #[error("header {name} differs from the one frozen")]
    HeaderChanged {
        /// `include/<index>/<name>` and its path.
        name: String,
    },
    /// A directory searched below a `-I` directory holds other headers of the names looked
    /// up than when frozen (one added that would shadow a frozen one, or one removed).
    #[error("directory {name} holds other headers than when frozen (one added or removed)")]
    DirectoryChanged {
        /// `include/<index>/<name>` and its path.
        name: String,
    },
    /// A header read by absolute path exists here and differs (another installation's).
    #[error("system header {path} differs from the one frozen (another installation)")]
    SystemHeaderChanged {
        /// The header.
        path: PathBuf,
    },
    /// The compiler here is not the one that compiled the entry.
    #[error("frozen by {frozen}; the compiler here is {here}")]
    CompilerDiffers {
        /// The recorded compiler.
        frozen: String,
        /// The compiler here.
        here: String,
    },
    /// A header of the compiler's installation differs from the one the frozen compile read.
    #[error("installation header {name} differs from the one frozen")]
    InstallationHeaderChanged {
        /// The header, below the installation root.
        name: String,
    },
    /// The entry's bytes do not verify (a damaged bundle).
    #[error("the frozen entry {key} is damaged: {reason}")]
    Damaged {
        /// The entry's key.
        key: String,
        /// What is wrong.
        reason: String,
    },
}

/// Errors opening a frozen bundle.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum FrozenError {
    /// The file could not be opened or read.
    #[error(transparent)]
    Read(#[from] crate::fs::read::FileReadError),
    /// The bytes are not a frozen bundle hipjit can read.
    #[error("{origin} is not a hipjit frozen bundle: {reason}")]
    NotFrozen {
        /// The file, or `embedded bytes`.
        origin: String,
        /// What is wrong.
        reason: String,
    },
    /// The bundle could not be written.
    #[error(transparent)]
    Write(#[from] crate::fs::write::WriteError),
}

/// A frozen bundle, opened and checked: compiled requests keyed without the local compiler,
/// served by the `Jit`'s frozen tier (`JitOptions::frozen`, `HIPJIT_FROZEN`) with or without
/// a compiler; made by `Freezer` or `hipjit cache freeze`. The guide's `cache.md` ("Frozen
/// bundles") gives the key and what each lookup checks ([`FrozenBundle::lookup`]).
#[derive(Clone, Default)]
pub struct FrozenBundle {
    origin: String,
    entries: Vec<FrozenEntry>,
    by_key: HashMap<CacheKey, usize>,
}

impl std::fmt::Debug for FrozenBundle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FrozenBundle")
            .field("origin", &self.origin)
            .field("entries", &self.entries.len())
            .finish()
    }
}

fn display(include_dir: Option<u32>, name: &[u8]) -> String {
    let name = String::from_utf8_lossy(name);
    match include_dir {
        None => name.into_owned(),
        Some(INSTALLATION) => format!("<installation>/{name}"),
        Some(i) if name.is_empty() => format!("include/{i}"),
        Some(i) => format!("include/{i}/{name}"),
    }
}

impl FrozenEntry {
    /// A frozen entry: the request `fields`, the header manifest of its compile, the compiler
    /// and the disk-cache entry (`entry`, its key `entry_key`).
    pub fn new(
        fields: RequestFields,
        manifest: &Manifest,
        compiler: &CompilerIdentity,
        entry_key: &CacheKey,
        entry: Vec<u8>,
    ) -> FrozenEntry {
        FrozenEntry {
            fields,
            files: manifest
                .files
                .iter()
                .map(|f| FrozenFile {
                    include_dir: f.include_dir,
                    name: f.name.clone(),
                    sha256: f.sha256,
                })
                .collect(),
            dirs: manifest
                .dirs
                .iter()
                .filter_map(|d| match d.include_dir {
                    Some(i) if i != INSTALLATION => Some(FrozenDir {
                        include_dir: i,
                        name: d.name.clone(),
                        listing: d.listing,
                        looked_up: d.looked_up.clone(),
                    }),
                    _ => None,
                })
                .collect(),
            compiler: FrozenCompiler::of(compiler),
            entry_key: entry_key.to_hex(),
            entry_sha256: sha256(&entry),
            entry,
        }
    }

    /// Checks the headers and directories below `include_dirs` and the system headers (the
    /// module documentation says which).
    ///
    /// Errors: [`Refusal::HeaderMissing`], [`Refusal::HeaderChanged`],
    /// [`Refusal::DirectoryChanged`], [`Refusal::SystemHeaderChanged`].
    pub fn check_headers(&self, include_dirs: &[PathBuf]) -> Result<(), Refusal> {
        for f in &self.files {
            match f.include_dir {
                Some(INSTALLATION) => continue,
                Some(_) => {
                    let name = display(f.include_dir, &f.name);
                    let Some(path) =
                        manifest::resolve(f.include_dir, &f.name, include_dirs, Path::new(""))
                    else {
                        return Err(Refusal::HeaderMissing {
                            name: format!("{name} (no such -I directory)"),
                        });
                    };
                    match crate::fs::stat::hash_file(&path) {
                        Ok(h) if h == f.sha256 => {}
                        Ok(_) => {
                            return Err(Refusal::HeaderChanged {
                                name: format!("{name} ({})", path.display()),
                            })
                        }
                        Err(_) => {
                            return Err(Refusal::HeaderMissing {
                                name: format!("{name} ({})", path.display()),
                            })
                        }
                    }
                }
                None => {
                    let path = PathBuf::from(std::ffi::OsStr::from_bytes(&f.name));
                    if let Ok(h) = crate::fs::stat::hash_file(&path) {
                        if h != f.sha256 {
                            return Err(Refusal::SystemHeaderChanged { path });
                        }
                    }
                }
            }
        }
        for d in &self.dirs {
            let name = display(Some(d.include_dir), &d.name);
            let path = manifest::resolve(Some(d.include_dir), &d.name, include_dirs, Path::new(""));
            let now = path.as_deref().and_then(|p| match &d.looked_up {
                Some(names) => manifest::listing_of(p, names).map(|l| manifest::hash_listing(&l)),
                None => manifest::listing_hash(p),
            });
            if now != d.listing {
                let at = path
                    .map(|p| format!(" ({})", p.display()))
                    .unwrap_or_default();
                return Err(Refusal::DirectoryChanged {
                    name: format!("{name}{at}"),
                });
            }
        }
        Ok(())
    }

    /// Checks the compiler present here, `identity`, against the one recorded, and the
    /// headers of its installation the compile read.
    ///
    /// Errors: [`Refusal::CompilerDiffers`], [`Refusal::InstallationHeaderChanged`].
    pub fn check_compiler(&self, identity: &CompilerIdentity) -> Result<(), Refusal> {
        let here = FrozenCompiler::of(identity);
        if here != self.compiler {
            let show = |c: &FrozenCompiler| {
                format!(
                    "{} {} (fingerprint {})",
                    c.kind,
                    c.version.lines().next().unwrap_or(""),
                    c.fingerprint.get(..12).unwrap_or(&c.fingerprint)
                )
            };
            return Err(Refusal::CompilerDiffers {
                frozen: show(&self.compiler),
                here: show(&here),
            });
        }
        for f in self
            .files
            .iter()
            .filter(|f| f.include_dir == Some(INSTALLATION))
        {
            let same = manifest::resolve(f.include_dir, &f.name, &[], &identity.root)
                .and_then(|p| crate::fs::stat::hash_file(&p).ok())
                .is_some_and(|h| h == f.sha256);
            if !same {
                return Err(Refusal::InstallationHeaderChanged {
                    name: String::from_utf8_lossy(&f.name).into_owned(),
                });
            }
        }
        Ok(())
    }

    /// The disk-cache entry, verified (its sha256, then the entry's own checks: magic,
    /// checksum, key, each artefact's sha256).
    ///
    /// Errors: [`Refusal::Damaged`].
    pub fn open_entry(&self, origin: &str) -> Result<Entry, Refusal> {
        let damaged = |reason: String| Refusal::Damaged {
            key: self.entry_key.clone(),
            reason,
        };
        if sha256(&self.entry) != self.entry_sha256 {
            return Err(damaged("its sha256 does not match".into()));
        }
        let key: CacheKey = self
            .entry_key
            .parse()
            .map_err(|e| damaged(format!("{e}")))?;
        Entry::from_bytes(self.entry.clone(), Path::new(origin), Some(&key)).map_err(damaged)
    }
}

impl FrozenBundle {
    /// An empty bundle, to fill with [`FrozenBundle::insert`].
    pub fn new() -> FrozenBundle {
        FrozenBundle::default()
    }

    /// Adds `entry`, replacing one of the same frozen key.
    pub fn insert(&mut self, entry: FrozenEntry) {
        let key = entry.fields.key();
        match self.by_key.get(&key) {
            Some(&i) => self.entries[i] = entry,
            None => {
                self.by_key.insert(key, self.entries.len());
                self.entries.push(entry);
            }
        }
    }

    /// The entries, in the order inserted.
    pub fn entries(&self) -> &[FrozenEntry] {
        &self.entries
    }

    /// Where the bundle was read from (a path, or `embedded bytes`).
    pub fn origin(&self) -> &str {
        &self.origin
    }

    /// The bundle's bytes (see the module documentation).
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut content = Vec::new();
        content.extend_from_slice(FROZEN_MAGIC);
        content.extend_from_slice(&FROZEN_VERSION.to_le_bytes());
        // Serializing owned, plain data to a Vec cannot fail.
        content.extend(rmp_serde::to_vec(&self.entries).unwrap_or_default());
        ruzstd::encoding::compress_to_vec(&content[..], ruzstd::encoding::CompressionLevel::Fastest)
    }

    /// Writes the bundle to `path` atomically (as `hipjit cache export`), mode 0644.
    ///
    /// Errors: [`FrozenError::Write`].
    pub fn write(&self, path: &Path) -> Result<(), FrozenError> {
        crate::fs::write::write_atomically(path, &self.to_bytes(), false, 0o644)?;
        Ok(())
    }

    /// Reads a bundle from its bytes (`include_bytes!`), checking each entry.
    ///
    /// Errors: [`FrozenError::NotFrozen`] naming what is wrong.
    pub fn from_bytes(bytes: &[u8]) -> Result<FrozenBundle, FrozenError> {
        FrozenBundle::read(bytes, "embedded bytes".into())
    }

    /// Reads the bundle file at `path` (a FIFO, device or directory refused at once).
    ///
    /// Errors: [`FrozenError::Read`], [`FrozenError::NotFrozen`].
    pub fn open(path: &Path) -> Result<FrozenBundle, FrozenError> {
        let (file, _) = crate::fs::read::open_regular(path, u64::MAX, "a frozen bundle")?;
        let mut bytes = Vec::new();
        std::io::BufReader::new(file)
            .read_to_end(&mut bytes)
            .map_err(|e| FrozenError::NotFrozen {
                origin: path.display().to_string(),
                reason: e.to_string(),
            })?;
        FrozenBundle::read(&bytes, path.display().to_string())
    }

    fn read(bytes: &[u8], origin: String) -> Result<FrozenBundle, FrozenError> {
        let bad = |reason: String| FrozenError::NotFrozen {
            origin: origin.clone(),
            reason,
        };
        let decoder = ruzstd::decoding::StreamingDecoder::new(bytes)
            .map_err(|e| bad(format!("not a Zstandard frame: {e}")))?;
        let mut content = Vec::new();
        decoder
            .take(FROZEN_LIMIT + 1)
            .read_to_end(&mut content)
            .map_err(|e| bad(format!("does not decompress: {e}")))?;
        if content.len() as u64 > FROZEN_LIMIT {
            return Err(bad(format!("more than {FROZEN_LIMIT} bytes decompressed")));
        }
        if content.len() < 12 || &content[..8] != FROZEN_MAGIC {
            return Err(bad("no frozen-bundle magic".into()));
        }
        let version = u32::from_le_bytes([content[8], content[9], content[10], content[11]]);
        if version != FROZEN_VERSION {
            return Err(bad(format!(
                "layout version {version}; this hipjit reads {FROZEN_VERSION}"
            )));
        }
        let entries: Vec<FrozenEntry> = rmp_serde::from_slice(&content[12..])
            .map_err(|e| bad(format!("the entries do not decode: {e}")))?;
        let mut bundle = FrozenBundle {
            origin: origin.clone(),
            ..FrozenBundle::default()
        };
        for e in entries {
            if sha256(&e.entry) != e.entry_sha256 {
                return Err(bad(format!(
                    "entry {}: its sha256 does not match",
                    e.entry_key
                )));
            }
            bundle.insert(e);
        }
        Ok(bundle)
    }

    /// The entry frozen for `asked`, its headers checked below `include_dirs`.
    ///
    /// Errors: a [`Refusal`] naming what differs: [`Refusal::NotFrozen`] with the fields in
    /// which the nearest frozen request differs, or those of [`FrozenEntry::check_headers`].
    pub fn lookup(
        &self,
        asked: &RequestFields,
        include_dirs: &[PathBuf],
    ) -> Result<&FrozenEntry, Refusal> {
        let Some(&i) = self.by_key.get(&asked.key()) else {
            let nearest = self
                .entries
                .iter()
                .map(|e| asked.differences(&e.fields))
                .min_by_key(Vec::len);
            return Err(Refusal::NotFrozen { nearest });
        };
        let entry = &self.entries[i];
        entry.check_headers(include_dirs)?;
        Ok(entry)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bundle(version: u32) -> Vec<u8> {
        let mut content = FROZEN_MAGIC.to_vec();
        content.extend_from_slice(&version.to_le_bytes());
        content.extend(rmp_serde::to_vec(&Vec::<FrozenEntry>::new()).unwrap());
        ruzstd::encoding::compress_to_vec(&content[..], ruzstd::encoding::CompressionLevel::Fastest)
    }

    /// Layout 1 was frozen from disk caches whose direct key left out the source's file name,
    /// so an entry may hold another name's code: refused, naming both versions.
    #[test]
    fn a_bundle_of_layout_1_is_refused() {
        let err = FrozenBundle::read(&bundle(1), "old.hjf".into())
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("old.hjf") && err.contains("layout version 1; this hipjit reads 2"),
            "{err}"
        );
        FrozenBundle::read(&bundle(FROZEN_VERSION), "new.hjf".into()).unwrap();
    }
}
