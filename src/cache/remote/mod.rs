//! The remote tier: a cache shared by a whole cluster, behind the in-process cache and the
//! local disk roots, configured by [`REMOTE_CACHE_ENV`] or
//! [`crate::jit::JitOptions::remote_cache`]. The tier (this module: key names, `signing`,
//! the checks of what is read, manifest merging and its bound, refusals, warnings, the
//! `write_back` of hits to the first disk root) runs over a [`Store`] (`store`: three
//! required operations and four capabilities, each with the way the tier degrades without
//! it). The URL's scheme picks the store ([`open_store`], the one place that maps them):
//! `redis://` and `rediss://` a Redis server (or any server speaking its protocol, such as
//! Valkey), built with the `redis` feature and having every capability; `http://` and
//! `https://` an HTTP server taking GET, PUT and DELETE of a path under the URL's (nginx's
//! WebDAV module, bazel-remote, an object store's HTTP gateway: `http`, feature `http`),
//! having none of the capabilities; `memory://<name>` an in-process store for tests
//! (`memory`, feature `testing`). Several URLs in [`REMOTE_CACHE_ENV`] are levels, each a
//! tier of its own ([`RemoteCache::levels_from_env`]). What follows describes the
//! tier over Redis; the names and values are the same over any store.
//!
//! # Keys and values
//! With `N` the namespace ([`RemoteConfig::namespace`], default `hipjit`), `F` the
//! [`CACHE_FORMAT_VERSION`] and `S` the scope: empty without a signing key, `k<key id>:` with
//! one (`key_id`, 16 hex digits):
//! * `N:F:Se:<result key>`: an entry, byte for byte the disk cache's entry file
//!   (`disk`, its checksum included) in the envelope of `signing`. Entries
//!   are immutable: written with `SET NX` (the first writer wins), each with a lifetime
//!   ([`RemoteConfig::ttl`], default 30 days) renewed by hits (`PEXPIRE`, when less than nine
//!   tenths of it is left; never for a refused value).
//! * `N:F:m:<direct key>`: the header manifests (`manifest`) of a direct key, a
//!   hash with one field per distinct stored value (named by the value's sha256, so the same
//!   manifest signed with two keys is two fields), shared by every scope and merged on read: a
//!   lookup checks each against the files as they are now and tries the result key of each
//!   that can match, in its own scope, the most recently matched first. The writing node's
//!   stats prove nothing on another machine (`stat`): each manifest read has them
//!   set aside (`from_another_node`), so every file it
//!   names is hashed.
//! * `N:F:r:<direct key>`: the recency of those manifests, a sorted set scored by the time
//!   (ms since the epoch) each was last stored or led a lookup to its entry. A store removes,
//!   in the Lua script that writes, the manifests neither stored nor matched within
//!   [`RemoteConfig::ttl`] and then the least recently matched beyond [`MAX_MANIFESTS`], so
//!   the hash stays bounded and a source with many header variants keeps hitting on its
//!   recent ones; the hash lives while some manifest of it is used, and each manifest only
//!   as long as it is.
//! * `N:F:Sl:<direct key>`: the cluster compile lock (`lock`).
//!
//! Nodes with different signing keys (a key being rotated, a node set up wrongly) therefore
//! keep separate entries on one server: neither refuses nor replaces the other's. Each meets
//! the other's manifests in the shared hash, refuses them (counted, and warned about once per
//! value and process: the warning names `HIPJIT_REMOTE_CACHE_KEY`), and leaves them there.
//!
//! # Reading
//! An entry's length is asked first (`STRLEN`, with its `PTTL`), and it is read with
//! `GETRANGE` up to [`RemoteConfig::max_value_bytes`] (default 64 MiB) within a timeout for
//! that length: a longer value, or another Redis type under an entry's name, is refused
//! unread (a miss, never a failure of the tier) and removed while it still is so. A remote
//! entry is checked exactly like a disk entry ([`crate::cache::Entry::from_bytes`]: magic, format,
//! checksum of header and metadata, key, sizes and sha256 of every artefact; then the JIT
//! reads its code objects), after its signature when a signing key is set. A bad entry is
//! never served: it is reported and removed only while it still holds the bad bytes (a Lua
//! compare-and-delete on the value's SHA-1, `redis.sha1hex`), so that the next compile can
//! publish in its place without ever deleting a good entry written meanwhile. In a signed
//! scope no other key writes, so an unsigned or otherwise signed entry there was planted or
//! corrupted: it goes too. A refused entry that could not be removed (the server refuses
//! `EVAL`, or did not answer) is replaced by this process's next store of it (`SET` without
//! `NX`). A manifest is removed only when it is no value of the envelope or
//! its payload does not decode; one signed with another key, or unsigned under a key, is
//! another node's and stays. The JIT then writes a good remote entry to the
//! first local root, off the caller's path (`write_back`).
//!
//! # Failure
//! The tier never makes a compile fail. Connecting is bounded by
//! [`RemoteConfig::connect_timeout`] (default 200 ms) and each operation by
//! [`RemoteConfig::timeout_for`] (200 ms plus its payload at 10 MB/s). When the server cannot be
//! reached, one warning is given for the outage, every operation fails at once without
//! touching the network, and the server is tried again after [`RemoteConfig::retry_after`].
//! An out-of-memory reply (`OOM`: the server's `maxmemory` reached under the default
//! `noeviction` policy) is a warning; `maxmemory-policy allkeys-lru` is the setting to use.
//!
//! # Trust
//! Whoever can write the database can plant a self-consistent entry holding any code, which
//! every machine would load. Use credentials (`redis://user:password@host`) and TLS
//! (`rediss://`), and set a signing key ([`REMOTE_CACHE_KEY_ENV`]): hipjit then signs each
//! value it writes (HMAC-SHA256 over the key name and the value), reads entries only from its
//! key's scope, and refuses every value that is unsigned or badly signed. The password in the URL never appears in a message,
//! `Debug` output, `hipjit doctor` or JSON ([`RemoteConfig::redacted_url`]).

#[doc(hidden)]
pub mod config;
#[cfg(feature = "http")]
mod http;
#[doc(hidden)]
pub mod lock;
#[doc(hidden)]
#[cfg(feature = "testing")]
pub mod memory;
#[cfg(feature = "redis")]
mod redis;
#[doc(hidden)]
pub mod signing;
#[doc(hidden)]
pub mod store;
#[doc(hidden)]
pub mod write_back;

pub use config::{
    RemoteConfig, RemoteConfigError, DEFAULT_MAX_VALUE_BYTES, MIN_SIGNING_KEY_BYTES,
    REMOTE_CACHE_ENV, REMOTE_CACHE_KEY_ENV, REMOTE_CACHE_TOKEN_ENV,
};
pub use store::Failure;
/// The store interface the tier runs over: not promised yet (docs/semver.md).
#[doc(hidden)]
pub use store::{Capabilities, Store};

use std::collections::{HashMap, HashSet};
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, LazyLock};
use std::time::Duration;

use parking_lot::Mutex;

use crate::cache::disk::{BadEntry, Entry};
use crate::cache::key::{self, hex, CacheKey, CACHE_FORMAT_VERSION};
use crate::cache::manifest::Manifest;
use signing::Refused;
use store::{Fields, Got, ManifestNames, Publish, StoreError, Unless};

/// A recency set: each field and its score, in ascending order of score.
type Scored = Vec<(Vec<u8>, f64)>;

/// At most this many header manifests of one direct key are kept (a store removes the
/// least recently matched beyond it) and tried on a lookup.
pub const MAX_MANIFESTS: usize = 32;

/// The URL forms of the stores, as error messages list them.
#[doc(hidden)]
pub const SCHEMES: &[&str] = &[
    "redis[s]://[user:password@]host:port/db",
    "http[s]://[user:password@]host[:port]/prefix",
];

/// How a store's URL is read past its scheme.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum UrlShape {
    /// `[user[:password]@]host[:port][/db]` (Redis).
    Authority,
    /// `[user[:password]@]host[:port][/prefix][?query]` (HTTP).
    Path,
    /// Any non-empty name (the in-memory store of the tests).
    Name,
}

/// The shape of `scheme`'s URLs, or `None` when no store answers to it. With
/// [`open_store`], the one place a scheme is mapped to a store: a store's scheme is accepted
/// (and its URL checked, [`RemoteConfig::new`]) even in a build without the store's feature,
/// which [`open_store`] then names.
pub(crate) fn url_shape(scheme: &str) -> Option<UrlShape> {
    match scheme {
        "redis" | "rediss" => Some(UrlShape::Authority),
        "http" | "https" => Some(UrlShape::Path),
        "memory" if cfg!(feature = "testing") => Some(UrlShape::Name),
        _ => None,
    }
}

/// The URL schemes of the stores this build has, and the store each names: the one place a
/// scheme is mapped to a [`Store`]. `redis` and `rediss` need the `redis` feature, `http`
/// and `https` the `http` feature (without it, [`RemoteConfigError::NotBuilt`]); `memory` (an
/// in-process store, `memory`) the `testing` feature.
///
/// Errors: [`RemoteConfigError::NotBuilt`] for a store this build lacks;
/// [`RemoteConfigError::BadUrl`] for a scheme no store has, or a URL its store refuses.
#[doc(hidden)]
pub fn open_store(config: &RemoteConfig) -> Result<Arc<dyn Store>, RemoteConfigError> {
    match config.scheme() {
        "redis" | "rediss" => {
            #[cfg(feature = "redis")]
            return Ok(Arc::new(redis::RedisStore::new(config.clone())?));
            #[cfg(not(feature = "redis"))]
            return Err(RemoteConfigError::NotBuilt {
                url: config.redacted_url(),
                feature: "redis",
            });
        }
        "http" | "https" => {
            #[cfg(feature = "http")]
            return Ok(Arc::new(http::HttpStore::new(config.clone())?));
            #[cfg(not(feature = "http"))]
            return Err(RemoteConfigError::NotBuilt {
                url: config.redacted_url(),
                feature: "http",
            });
        }
        #[cfg(feature = "testing")]
        "memory" => Ok(memory::MemoryStore::named(config.host())),
        scheme => Err(RemoteConfigError::BadUrl {
            url: config.redacted_url(),
            reason: format!("no store for the scheme {scheme:?} in this build"),
        }),
    }
}

/// The remote tier (see the module documentation) over one [`Store`]. `Send + Sync`; cheap
/// to clone.
#[derive(Clone, Debug)]
pub struct RemoteCache {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    config: RemoteConfig,
    store: Arc<dyn Store>,
    /// Values refused since the tier was made ([`RemoteCache::refused`]).
    refused: AtomicU64,
    /// `k<key id>:` under a signing key (`key_id`), else empty: the part of
    /// entry and lock names that keeps each key's values apart.
    scope: String,
    /// Entry names whose value was refused and could not be removed (the store cannot
    /// compare-and-delete, or did not answer): the next store of that entry replaces it (a
    /// plain put).
    replace: Mutex<HashSet<String>>,
}

/// What became of a refused value (said in its warning).
enum Fate {
    /// Deleted while it still held the refused bytes.
    Removed,
    /// To be deleted, but the server refuses `EVAL` or did not answer.
    NotRemoved,
    /// Left on purpose: another node's manifest (another signing key, or none).
    LeftForItsNodes,
}

impl Fate {
    fn removed(bad: &BadEntry) -> Fate {
        if bad.writable_root {
            Fate::Removed
        } else {
            Fate::NotRemoved
        }
    }
}

/// The refusals already warned about in this process, by server and key name: each is
/// warned about once ([`Fetch::warnings`]), and still reported every time
/// ([`Fetch::bad`]).
static WARNED: LazyLock<Mutex<HashSet<String>>> = LazyLock::new(|| Mutex::new(HashSet::new()));

/// Whether `what` (a server and key name, and what was wrong) is warned about for the
/// first time in this process; records it.
#[cfg_attr(not(feature = "redis"), allow(dead_code))]
pub(super) fn first_warning(what: String) -> bool {
    WARNED.lock().insert(what)
}

/// What to check when an entry that decoded as a hipjit value fails its own checks.
const CORRUPTED_HINT: &str = "corrupted after it was written: check the server (its \
     memory, its persistence) and that nothing else writes keys under hipjit's namespace";

/// An entry found in the server and checked ([`Entry::from_bytes`], signature).
#[derive(Debug)]
#[doc(hidden)]
pub struct RemoteEntry {
    /// Its result key.
    pub key: CacheKey,
    /// The manifest that led to it, as the files are now.
    pub manifest: Manifest,
    /// The entry; its `path` is [`RemoteCache::describe`] of its key name.
    pub entry: Entry,
    name: String,
    /// The store's fingerprint of the value read ([`store::Got::Value`]).
    tag: String,
}

/// What [`RemoteCache::fetch`] found.
#[derive(Debug, Default)]
#[doc(hidden)]
pub struct Fetch {
    /// A checked entry, when one matched.
    pub hit: Option<RemoteEntry>,
    /// Bad values met (never served; removed when they still held the bad bytes).
    pub bad: Vec<BadEntry>,
    /// The first manifest that could match, as the files are now, when any.
    pub looked_up: Option<Manifest>,
    /// Warnings for the caller's result (the outage, once; a server error; a value refused,
    /// once per key name in this process, saying what to check; the server's refusal of
    /// `EVAL`, once per tier).
    pub warnings: Vec<String>,
}

impl RemoteCache {
    /// A tier for `config`, over the store its URL's scheme names ([`open_store`]); no
    /// connection is made until the first lookup.
    ///
    /// Errors: a bad setting ([`RemoteConfig::validate`]), a URL the store refuses (as text
    /// without the password), a store this build lacks ([`RemoteConfigError::NotBuilt`]).
    pub fn new(config: RemoteConfig) -> Result<RemoteCache, RemoteConfigError> {
        config.validate()?;
        let store = open_store(&config)?;
        Ok(RemoteCache::with_store(config, store))
    }

    /// A tier for `config` over `store` (its URL only names the server in messages).
    #[doc(hidden)]
    pub fn with_store(config: RemoteConfig, store: Arc<dyn Store>) -> RemoteCache {
        let scope = config
            .signing_key
            .as_deref()
            .map_or_else(String::new, |k| format!("k{}:", signing::key_id(k)));
        RemoteCache {
            inner: Arc::new(Inner {
                config,
                store,
                refused: AtomicU64::new(0),
                scope,
                replace: Mutex::new(HashSet::new()),
            }),
        }
    }

    /// The tier `HIPJIT_REMOTE_CACHE` (and `HIPJIT_REMOTE_CACHE_KEY`,
    /// `HIPJIT_REMOTE_CACHE_TOKEN`) name: the first of [`RemoteCache::levels_from_env`];
    /// `None` when unset.
    ///
    /// Errors: as [`RemoteCache::levels_from_env`].
    pub fn from_env() -> Result<Option<RemoteCache>, RemoteConfigError> {
        Ok(Self::levels_from_env()?.into_iter().next())
    }

    /// A tier for each level `HIPJIT_REMOTE_CACHE` lists (URLs separated by whitespace,
    /// [`RemoteConfig::levels_from_env_with`]), fastest first; empty when unset. A level whose
    /// store this build lacks (`redis://` without the `redis` feature, `http://` without
    /// `http`) is left out with a warning, as is the whole variable when the build has no
    /// store at all.
    ///
    /// Errors: as [`RemoteConfig::levels_from_env_with`] and [`RemoteCache::new`].
    pub fn levels_from_env() -> Result<Vec<RemoteCache>, RemoteConfigError> {
        let mut levels = Vec::new();
        for config in RemoteConfig::levels_from_env_with(|k| std::env::var_os(k))? {
            match RemoteCache::new(config) {
                // A store this build lacks: that level is left out, said once.
                Err(e @ RemoteConfigError::NotBuilt { .. }) => {
                    tracing::warn!("{REMOTE_CACHE_ENV}: {e}: that level is left out");
                }
                r => levels.push(r?),
            }
        }
        Ok(levels)
    }

    /// The settings.
    pub fn config(&self) -> &RemoteConfig {
        &self.inner.config
    }

    /// The store under this tier.
    #[doc(hidden)]
    pub fn backing(&self) -> &dyn Store {
        &*self.inner.store
    }

    /// How many values this tier refused since it was made: entries and manifests that
    /// were corrupted, not hipjit's, unsigned under a signing key or signed with another
    /// key, and entries whose code objects did not read ([`RemoteCache::reject`]).
    pub fn refused(&self) -> u64 {
        self.inner.refused.load(Ordering::Relaxed)
    }

    /// Moves the warnings the store gives once (Redis's refusal of `EVAL`) into `warnings`.
    fn take_notices(&self, warnings: &mut Vec<String>) {
        warnings.extend(self.backing().take_notices());
    }

    /// Whether the server is known to be unreachable now (no operation will be tried
    /// before [`RemoteConfig::retry_after`] has passed), or the tier is off (the server
    /// refused it for good: [`Failure`]).
    pub fn is_down(&self) -> bool {
        self.backing().is_down()
    }

    /// The last failure to use the server, classified, with its warning (the URL's
    /// password masked); `None` when none was met.
    pub fn last_failure(&self) -> Option<(Failure, String)> {
        self.backing().last_failure()
    }

    /// The server's key name of `key` for `kind` (`e` entry, `m` manifests, `r` their
    /// recency, `l` lock; see
    /// the module documentation): entries and locks under a signing key hold its id.
    fn name(&self, kind: &str, key: &CacheKey) -> String {
        let scope = if kind == "m" || kind == "r" {
            ""
        } else {
            &self.inner.scope
        };
        format!(
            "{}:{}:{scope}{kind}:{}",
            self.config().namespace,
            CACHE_FORMAT_VERSION,
            key.to_hex()
        )
    }

    /// The names of the manifests of `direct`.
    fn manifest_names(&self, direct: &CacheKey) -> ManifestNames {
        ManifestNames {
            fields: self.name("m", direct),
            recency: self.name("r", direct),
        }
    }

    /// How a key name of the server is shown: the redacted URL, `#`, the name.
    #[doc(hidden)]
    pub fn describe(&self, name: &str) -> PathBuf {
        PathBuf::from(format!("{}#{name}", self.backing().describe()))
    }

    fn signing_key(&self) -> Option<&[u8]> {
        self.config().signing_key.as_deref()
    }

    fn ttl(&self) -> Duration {
        self.config().ttl
    }

    fn note(warnings: &mut Vec<String>, e: StoreError) {
        match e {
            StoreError::Down | StoreError::Lost(None) | StoreError::Unsupported => {}
            StoreError::Lost(Some(w)) => warnings.push(w),
            StoreError::Server { message, .. } => {
                tracing::warn!(error = %message, "remote cache operation refused");
                warnings.push(format!("the remote cache refused an operation: {message}"));
            }
        }
    }

    /// The manifests of `names` and the fields most recently matched first: the store's
    /// record with [`Capabilities::manifest_merge`], else the one value of a
    /// [`ManifestSet`].
    fn read_manifests(&self, names: &ManifestNames) -> Result<(Fields, Vec<Vec<u8>>), StoreError> {
        if self.backing().capabilities().manifest_merge {
            return self.backing().manifests(names);
        }
        let set = self.read_set(names)?;
        let mut recent: Vec<(Vec<u8>, u64)> =
            set.0.iter().map(|(f, (s, _))| (f.clone(), *s)).collect();
        recent.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
        let fields = set.0.into_iter().map(|(f, (_, v))| (f, v)).collect();
        Ok((fields, recent.into_iter().map(|(f, _)| f).collect()))
    }

    /// The [`ManifestSet`] under `names.fields` (empty when there is none, or it does not
    /// decode: the next publish replaces it).
    fn read_set(&self, names: &ManifestNames) -> Result<ManifestSet, StoreError> {
        let bound = self
            .config()
            .max_value_bytes
            .saturating_mul(MAX_MANIFESTS as u64 + 1);
        Ok(match self.backing().get(&names.fields, bound)? {
            Got::Value { bytes, .. } => ManifestSet::decode(&bytes).unwrap_or_default(),
            _ => ManifestSet::default(),
        })
    }

    /// Looks `direct` up: its manifests (each checked against the files as they are now,
    /// with `include_dirs` as the options' include directories and `installation` as the
    /// compiler's installation root), then the entry of each
    /// result key that can match, until one checks out. A hit refreshes the lifetime of
    /// the entry and of the manifests.
    #[doc(hidden)]
    pub fn fetch(
        &self,
        direct: &CacheKey,
        include_dirs: &[PathBuf],
        installation: &std::path::Path,
    ) -> Fetch {
        self.fetch_mapped(direct, include_dirs, installation, |k| *k)
    }

    /// [`RemoteCache::fetch`] of the entries `entry_key` names for each result key a
    /// manifest gives (a remembered failure's: [`crate::cache::failure::failure_key`]); the
    /// hit's [`RemoteEntry::key`] is the entry's key.
    #[doc(hidden)]
    pub fn fetch_mapped(
        &self,
        direct: &CacheKey,
        include_dirs: &[PathBuf],
        installation: &std::path::Path,
        entry_key: impl Fn(&CacheKey) -> CacheKey,
    ) -> Fetch {
        let mut out = Fetch::default();
        let names = self.manifest_names(direct);
        let (fields, recent) = match self.read_manifests(&names) {
            Ok(f) => f,
            Err(e) => {
                Self::note(&mut out.warnings, e);
                self.take_notices(&mut out.warnings);
                return out;
            }
        };
        let mname = &names.fields;
        let mut tried = HashSet::new();
        let mut accepted = 0;
        for (field, value) in by_recency(fields, recent) {
            if accepted == MAX_MANIFESTS {
                break;
            }
            let manifest = match signing::open(self.signing_key(), mname.as_bytes(), &value) {
                // Another node's manifest (signed with another key, or by a node without
                // one): it names that node's entries and is of use to it, and it blocks
                // nobody (each manifest value has a field of its own). Refused, left.
                Err(e @ (Refused::BadSignature | Refused::Unsigned)) => {
                    let bad = self.leave_manifest(mname, &field, e.to_string());
                    self.refusal(&bad, e.hint(), Fate::LeftForItsNodes, &mut out.warnings);
                    out.bad.push(bad);
                    continue;
                }
                Err(e) => Err((e.to_string(), e.hint())),
                // Another machine's stats prove nothing here: each file is hashed.
                Ok(p) => Manifest::from_bytes(p)
                    .map(Manifest::from_another_node)
                    .map_err(|e| (e.to_string(), CORRUPTED_HINT)),
            };
            let manifest = match manifest {
                Ok(m) => m,
                Err((reason, hint)) => {
                    let bad = self.remove_manifest(&names, &field, &value, reason);
                    self.refusal(&bad, hint, Fate::removed(&bad), &mut out.warnings);
                    out.bad.push(bad);
                    continue;
                }
            };
            accepted += 1;
            let Some(now) = manifest.current(include_dirs, installation) else {
                continue;
            };
            let rkey = key::result_key(direct, &now);
            if out.looked_up.is_none() {
                out.looked_up = Some(now.clone());
            }
            if !tried.insert(rkey) {
                continue;
            }
            let rkey = entry_key(&rkey);
            match self.get_entry(&rkey, &names, &field, &mut out) {
                Some((entry, name, tag)) => {
                    out.hit = Some(RemoteEntry {
                        key: rkey,
                        manifest: now,
                        entry,
                        name,
                        tag,
                    });
                    break;
                }
                None if self.is_down() => break,
                None => {}
            }
        }
        self.take_notices(&mut out.warnings);
        out
    }

    /// The entry of `rkey`, checked, with its key name and the store's tag of its value;
    /// `None` for a miss or a refused value (reported in `out`). It is read up to
    /// [`RemoteConfig::max_value_bytes`]: a longer value, or one that is no plain value, is
    /// refused unread. `field`, the manifest that led here, is marked as matched now in the
    /// recency of `names` (see [`RemoteCache::store`]).
    fn get_entry(
        &self,
        rkey: &CacheKey,
        names: &ManifestNames,
        field: &[u8],
        out: &mut Fetch,
    ) -> Option<(Entry, String, String)> {
        let name = self.name("e", rkey);
        let bound = self.config().max_value_bytes;
        let now = now_ms();
        let (value, ttl_left, tag) = match self.backing().get(&name, bound) {
            Ok(Got::Missing) => return None,
            Ok(Got::NotValue(reason)) => {
                self.unreadable(&name, reason, out);
                return None;
            }
            Ok(Got::TooLong(len)) => {
                let reason = format!(
                    "{len} bytes, more than the limit of {bound} (RemoteConfig::max_value_bytes): \
                     refused unread"
                );
                self.unreadable(&name, reason, out);
                return None;
            }
            Ok(Got::Value {
                bytes,
                ttl_left,
                tag,
            }) => (bytes, ttl_left, tag),
            Err(e) => {
                Self::note(&mut out.warnings, e);
                return None;
            }
        };
        // The mark is best effort: a full server (OOM) or a planted key of another type
        // refuses it, and the read goes on. Without manifest merge, hits do not mark.
        if self.backing().capabilities().manifest_merge {
            let _ = self.backing().mark_manifest(names, field, now);
        }
        let checked = signing::open(self.signing_key(), name.as_bytes(), &value)
            .map_err(|e| (e.to_string(), e.hint()))
            .and_then(|p| {
                Entry::from_bytes(p.to_vec(), &self.describe(&name), Some(rkey))
                    .map_err(|e| (e, CORRUPTED_HINT))
            });
        match checked {
            Ok(entry) => {
                self.refresh(&name, names, ttl_left, &mut out.warnings);
                Some((entry, name, tag))
            }
            // Under a signing key, the entry's name holds the key's id
            // (`key_id`): no node with another key writes there, so a value
            // that is unsigned or signed otherwise was planted or corrupted, and goes.
            Err((reason, hint)) => {
                let bad = self.remove_if(&name, Unless::Same(&tag), reason);
                self.refusal(&bad, hint, Fate::removed(&bad), &mut out.warnings);
                out.bad.push(bad);
                None
            }
        }
    }

    /// Refuses the value under the entry name `name` unread (longer than
    /// [`RemoteConfig::max_value_bytes`], or no plain value): removed while it still is so
    /// (compare-and-delete), else replaced by this node's next store of that entry.
    fn unreadable(&self, name: &str, reason: String, out: &mut Fetch) {
        let bound = self.config().max_value_bytes;
        let bad = self.remove_if(name, Unless::Unreadable(bound), reason);
        self.refusal(&bad, CORRUPTED_HINT, Fate::removed(&bad), &mut out.warnings);
        out.bad.push(bad);
    }

    /// Renews the lifetime of the entry `name` and of the manifests `names` after a hit,
    /// when the entry has less than nine tenths of [`RemoteConfig::ttl`] left
    /// (`ttl_left`; `None`: it does not expire): a hit costs one round trip, and only values
    /// that checked out are kept alive (a refused one expires).
    fn refresh(
        &self,
        name: &str,
        names: &ManifestNames,
        ttl_left: Option<Duration>,
        warnings: &mut Vec<String>,
    ) {
        let ttl = self.ttl();
        let Some(left) = ttl_left else { return };
        if left >= ttl - ttl / 10 {
            return;
        }
        let mut renewed = vec![name, names.fields.as_str()];
        if self.backing().capabilities().manifest_merge {
            renewed.push(&names.recency);
        }
        if let Err(e) = self.backing().renew(&renewed, ttl) {
            Self::note(warnings, e);
        }
    }

    /// Reports `hit` as bad for `reason` (its code objects do not read, say) and removes
    /// it from the server while it still holds the same bytes; the warning (once per key
    /// name in this process) goes to `warnings`.
    #[doc(hidden)]
    pub fn reject(&self, hit: RemoteEntry, reason: String, warnings: &mut Vec<String>) -> BadEntry {
        let bad = self.remove_if(&hit.name, Unless::Same(&hit.tag), reason);
        self.refusal(&bad, CORRUPTED_HINT, Fate::removed(&bad), warnings);
        self.take_notices(warnings);
        bad
    }

    /// Counts a refused value and warns about it, once per server and key name in this
    /// process: what was refused, why, what to check (`hint`), and what became of it.
    fn refusal(&self, bad: &BadEntry, hint: &str, fate: Fate, warnings: &mut Vec<String>) {
        self.inner.refused.fetch_add(1, Ordering::Relaxed);
        let shown = bad.path.display().to_string();
        if !WARNED.lock().insert(shown.clone()) {
            return;
        }
        let fate = match fate {
            Fate::Removed => "removed from the server, so that this compile can publish a good one",
            Fate::NotRemoved => {
                "left in the server for now (it could not be removed: the server refuses \
                 EVAL or did not answer), never served; the next store of this entry by \
                 this process replaces it"
            }
            Fate::LeftForItsNodes => {
                "left in the server for the nodes that wrote it, which keep using it; \
                 this node uses its own"
            }
        };
        warnings.push(format!(
            "refused the remote cache value {shown}: {}; {hint}. Not served ({fate})",
            bad.reason
        ));
    }

    /// Removes the value under `name` while it is still as `unless` says (compare-and-delete);
    /// where the store cannot, or did not answer, the name is remembered so that this
    /// process's next store of it replaces the value.
    fn remove_if(&self, name: &str, unless: Unless<'_>, reason: String) -> BadEntry {
        tracing::warn!(entry = %self.describe(name).display(), %reason, "bad remote hipjit cache entry");
        let removed = if self.backing().capabilities().compare_and_delete {
            self.backing().delete_if(name, unless)
        } else {
            Err(StoreError::Unsupported)
        };
        if removed.is_err() {
            self.inner.replace.lock().insert(name.to_string());
        }
        BadEntry {
            path: self.describe(name),
            reason,
            writable_root: removed.is_ok(),
        }
    }

    /// A manifest field refused and left in place (another node's).
    fn leave_manifest(&self, mname: &str, field: &[u8], reason: String) -> BadEntry {
        let what = format!("{mname} {}", String::from_utf8_lossy(field));
        tracing::debug!(manifest = %what, %reason, "another node's hipjit header manifest");
        BadEntry {
            path: self.describe(&what),
            reason,
            writable_root: false,
        }
    }

    /// Removes the manifest `field` of `names` while it still holds `value`: the store's own
    /// operation with [`Capabilities::manifest_merge`], else a read-modify-write of the
    /// [`ManifestSet`].
    fn remove_manifest(
        &self,
        names: &ManifestNames,
        field: &[u8],
        value: &[u8],
        reason: String,
    ) -> BadEntry {
        let what = format!("{} {}", names.fields, String::from_utf8_lossy(field));
        tracing::warn!(manifest = %what, %reason, "bad remote hipjit header manifest");
        let removed = if self.backing().capabilities().manifest_merge {
            self.backing().delete_manifest_if(names, field, value)
        } else {
            self.read_set(names).and_then(|mut set| {
                if set.0.get(field).is_some_and(|(_, v)| v == value) {
                    set.0.remove(field);
                    self.backing()
                        .put(&names.fields, &set.encode(), self.ttl())
                        .map(|()| true)
                } else {
                    Ok(false)
                }
            })
        };
        BadEntry {
            path: self.describe(&what),
            reason,
            writable_root: removed.is_ok(),
        }
    }

    /// Publishes an entry (`entry`: the bytes of a disk-cache entry file for `key`) and the
    /// manifest that names it under `direct`, each with the lifetime [`RemoteConfig::ttl`].
    /// An entry already there stays (atomic create; without it, a plain put: the last
    /// writer wins, and entries are content-addressed), unless this process found it bad
    /// and could not remove it: then it is replaced. The manifest is scored now in the
    /// recency of `direct`, which hits score again when they match (with manifest merge);
    /// manifests neither stored nor matched within the lifetime, then the least recently
    /// matched beyond [`MAX_MANIFESTS`], are removed (Redis: in the same Lua script; without
    /// `EVAL`, a pipeline, then the removals; a store without manifest merge: one
    /// read-modify-write of one value holding them all). Returns warnings (the outage, once; an
    /// out-of-memory reply; a value over [`RemoteConfig::max_value_bytes`], not stored);
    /// never fails.
    #[doc(hidden)]
    pub fn store(
        &self,
        direct: &CacheKey,
        key: &CacheKey,
        entry: &[u8],
        manifest: &Manifest,
    ) -> Vec<String> {
        let mut warnings = Vec::new();
        let name = self.name("e", key);
        let names = self.manifest_names(direct);
        let value = signing::seal(self.signing_key(), name.as_bytes(), entry);
        let mbytes = manifest.to_bytes();
        let mvalue = signing::seal(self.signing_key(), names.fields.as_bytes(), &mbytes);
        let bound = self.config().max_value_bytes;
        if let Some(len) = [value.len(), mvalue.len()]
            .into_iter()
            .find(|&l| l as u64 > bound)
        {
            let w = format!(
                "the result was not stored in the remote cache {}: a value of {len} bytes, \
                 more than its limit of {bound} (RemoteConfig::max_value_bytes)",
                self.config().redacted_url()
            );
            tracing::warn!("{w}");
            warnings.push(w);
            return warnings;
        }
        // Named by the value as stored: nodes with different signing keys (or none) never
        // overwrite each other's field for the same manifest.
        let field = hex(&key::sha256(&mvalue));
        let replace = self.inner.replace.lock().remove(&name);
        let publish = Publish {
            entry: &name,
            value: &value,
            replace,
            manifests: &names,
            field: field.as_bytes(),
            manifest: &mvalue,
            ttl: self.ttl(),
            now_ms: now_ms(),
            max_manifests: MAX_MANIFESTS,
        };
        let r = if self.backing().capabilities().manifest_merge {
            self.backing().publish(&publish)
        } else {
            self.publish_by_parts(&publish)
        };
        match r {
            Ok(()) => {}
            Err(e) if e.code() == Some("OOM") => {
                let w = format!(
                    "the remote cache {} is out of memory (maxmemory reached under the \
                     noeviction policy): the result was not stored remotely; set \
                     maxmemory-policy allkeys-lru on the server",
                    self.config().redacted_url()
                );
                tracing::warn!("{w}");
                warnings.push(w);
            }
            Err(e) => Self::note(&mut warnings, e),
        }
        self.take_notices(&mut warnings);
        warnings
    }

    /// [`RemoteCache::store`] for a store without manifest merge: the entry (created, where
    /// the store can and it is not to be replaced; else put), then the [`ManifestSet`] read,
    /// changed and written back (two nodes doing this at once for one direct key may lose
    /// one's manifest: it is published again by the next compile that needs it).
    fn publish_by_parts(&self, p: &Publish<'_>) -> Result<(), StoreError> {
        let store = self.backing();
        if !p.replace && store.capabilities().atomic_create {
            store.create(p.entry, p.value, p.ttl)?;
        } else {
            store.put(p.entry, p.value, p.ttl)?;
        }
        let mut set = self.read_set(p.manifests)?;
        set.0
            .insert(p.field.to_vec(), (p.now_ms, p.manifest.to_vec()));
        let mut scored: Scored = set
            .0
            .iter()
            .map(|(f, (s, _))| (f.clone(), *s as f64))
            .collect();
        scored.sort_by(|a, b| a.1.total_cmp(&b.1).then_with(|| a.0.cmp(&b.0)));
        let fields = set.0.keys().cloned().collect();
        let ttl = u64::try_from(p.ttl.as_millis()).unwrap_or(u64::MAX);
        for gone in to_evict(fields, scored, p.now_ms, ttl, p.max_manifests) {
            set.0.remove(&gone);
        }
        store.put(&p.manifests.fields, &set.encode(), p.ttl)
    }

    /// Asks the server about itself (Redis: `INFO server`, `INFO memory`, `DBSIZE`), within
    /// the configured timeouts.
    ///
    /// Errors: [`Unanswered`], classified ([`Failure`]: unreachable, authentication or
    /// database refused, TLS handshake failed, not a Redis server) with what to check, or
    /// the server's error reply; the password masked.
    pub fn server_info(&self) -> Result<ServerInfo, Unanswered> {
        let info = self.backing().info()?;
        Ok(ServerInfo {
            url: self.config().redacted_url(),
            version: info.version,
            keys: info.keys,
            used_memory: info.used_memory,
            max_memory: info.max_memory,
            policy: info.policy,
            signed: self.config().signing_key.is_some(),
            key_id: self.signing_key().map(signing::key_id),
        })
    }
}

/// The manifests of one direct key in a store without manifest merge, kept as one value:
/// each field with its recency (ms since the epoch) and its value (signed as a field of
/// Redis's hash is). Encoded as `HJMSET1\0`, then per field its length (`u32`, little
/// endian), its bytes, its recency (`u64`), its value's length (`u32`) and the value.
#[derive(Debug, Default)]
struct ManifestSet(HashMap<Vec<u8>, (u64, Vec<u8>)>);

impl ManifestSet {
    const MAGIC: &'static [u8; 8] = b"HJMSET1\0";

    fn encode(&self) -> Vec<u8> {
        let mut fields: Vec<_> = self.0.iter().collect();
        fields.sort();
        let mut out = Self::MAGIC.to_vec();
        for (f, (score, v)) in fields {
            out.extend_from_slice(&(f.len() as u32).to_le_bytes());
            out.extend_from_slice(f);
            out.extend_from_slice(&score.to_le_bytes());
            out.extend_from_slice(&(v.len() as u32).to_le_bytes());
            out.extend_from_slice(v);
        }
        out
    }

    /// `None` when `bytes` is no set.
    fn decode(bytes: &[u8]) -> Option<ManifestSet> {
        fn take<'a>(b: &mut &'a [u8], n: usize) -> Option<&'a [u8]> {
            let (h, t) = (b.get(..n)?, b.get(n..)?);
            *b = t;
            Some(h)
        }
        fn len(b: &mut &[u8]) -> Option<usize> {
            Some(u32::from_le_bytes(take(b, 4)?.try_into().ok()?) as usize)
        }
        let mut b = bytes.strip_prefix(Self::MAGIC.as_slice())?;
        let mut set = HashMap::new();
        while !b.is_empty() {
            let n = len(&mut b)?;
            let f = take(&mut b, n)?.to_vec();
            let score = u64::from_le_bytes(take(&mut b, 8)?.try_into().ok()?);
            let n = len(&mut b)?;
            let v = take(&mut b, n)?.to_vec();
            set.insert(f, (score, v));
        }
        Some(ManifestSet(set))
    }
}

/// The manifests a store removes (what the Lua script of [`RemoteCache::store`] removes,
/// computed here): `fields` the hash's fields, `scored` the recency set in ascending order
/// of score; fields without a score go first, then those scored before `now - ttl`, then
/// the least recently matched beyond `max`.
fn to_evict(fields: Vec<Vec<u8>>, scored: Scored, now: u64, ttl: u64, max: usize) -> Vec<Vec<u8>> {
    let in_set: HashSet<&[u8]> = scored.iter().map(|(f, _)| f.as_slice()).collect();
    let mut gone: Vec<Vec<u8>> = fields
        .iter()
        .filter(|f| !in_set.contains(f.as_slice()))
        .cloned()
        .collect();
    let oldest = now.saturating_sub(ttl) as f64;
    let expired = scored.iter().take_while(|(_, s)| *s < oldest).count();
    let kept = scored.len() - expired;
    let over = kept.saturating_sub(max);
    gone.extend(scored.into_iter().take(expired + over).map(|(f, _)| f));
    gone
}

/// The manifests `fields` in the order a lookup tries them: those of `recent` (the
/// recency set, most recently matched first), then those without a score in the order of
/// their names.
fn by_recency(mut fields: Fields, recent: Vec<Vec<u8>>) -> Vec<(Vec<u8>, Vec<u8>)> {
    let mut out: Vec<(Vec<u8>, Vec<u8>)> = recent
        .into_iter()
        .filter_map(|f| {
            let v = fields.remove(&f)?;
            Some((f, v))
        })
        .collect();
    let mut rest: Vec<_> = fields.into_iter().collect();
    rest.sort();
    out.extend(rest);
    out
}

/// Milliseconds since the Unix epoch, by this machine's clock (the recency of manifests).
pub(super) fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}
/// Why [`RemoteCache::server_info`] got no answer.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct Unanswered {
    /// The class of the failure; `None` when the server answered with an error reply
    /// (it refused `INFO` or `DBSIZE`).
    pub failure: Option<Failure>,
    /// What went wrong and what to check, the password masked.
    pub message: String,
}

/// What the server says about itself ([`RemoteCache::server_info`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ServerInfo {
    /// The URL, password replaced by `***`.
    pub url: String,
    /// `redis_version` (Valkey reports the Redis version it is compatible with).
    pub version: Option<String>,
    /// Keys in the database (`DBSIZE`), hipjit's and others'.
    pub keys: u64,
    /// `used_memory`, in bytes.
    pub used_memory: Option<u64>,
    /// `maxmemory`, in bytes (0: no limit).
    pub max_memory: Option<u64>,
    /// `maxmemory_policy` (`allkeys-lru` recommended; `noeviction` refuses writes when full).
    pub policy: Option<String>,
    /// Whether entries are signed and checked ([`RemoteConfig::signing_key`]).
    pub signed: bool,
    /// The signing key's id (`key_id`), to compare nodes' keys without showing
    /// them; `None` without a key.
    pub key_id: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn f(s: &str) -> Vec<u8> {
        s.as_bytes().to_vec()
    }

    #[test]
    fn stores_without_eval_remove_unscored_then_expired_then_least_recent() {
        let scored = vec![
            (f("old"), 10.0),
            (f("a"), 500.0),
            (f("b"), 600.0),
            (f("c"), 700.0),
        ];
        let fields = vec![f("a"), f("b"), f("c"), f("old"), f("planted")];
        // Lifetime 100 at 650: "old" (10) expired; the bound 2 keeps the two most recent.
        assert_eq!(
            to_evict(fields.clone(), scored.clone(), 650, 100, 2),
            vec![f("planted"), f("old"), f("a")]
        );
        // A long lifetime and room for all: only the unscored one goes.
        assert_eq!(
            to_evict(fields, scored, 650, 1_000_000, 32),
            vec![f("planted")]
        );
    }

    #[test]
    fn lookups_try_the_most_recently_matched_first() {
        let fields: HashMap<Vec<u8>, Vec<u8>> = [("x", "1"), ("a", "2"), ("m", "3"), ("z", "4")]
            .into_iter()
            .map(|(k, v)| (f(k), f(v)))
            .collect();
        // "gone" is scored but no longer in the hash; "a" and "x" have no score.
        let order: Vec<Vec<u8>> = by_recency(fields, vec![f("z"), f("gone"), f("m")])
            .into_iter()
            .map(|(k, _)| k)
            .collect();
        assert_eq!(order, vec![f("z"), f("m"), f("a"), f("x")]);
    }
}
