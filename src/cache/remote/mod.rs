//! The remote tier: a cache shared by a whole cluster, on a Redis server (or any server
//! speaking its protocol, such as Valkey), behind the in-process cache and the local disk
//! roots. Built with the `redis` feature; configured by [`REMOTE_CACHE_ENV`] or
//! [`crate::jit::JitOptions::remote_cache`].
//!
//! # Keys and values
//! With `N` the namespace ([`RemoteConfig::namespace`], default `hipjit`), `F` the
//! [`CACHE_FORMAT_VERSION`] and `S` the scope: empty without a signing key, `k<key id>:` with
//! one ([`signing::key_id`], 16 hex digits):
//! * `N:F:Se:<result key>`: an entry, byte for byte the disk cache's entry file
//!   ([`crate::cache::disk`], its checksum included) in the envelope of [`signing`]. Entries
//!   are immutable: written with `SET NX` (the first writer wins), each with a lifetime
//!   ([`RemoteConfig::ttl`], default 30 days) renewed by hits (`PEXPIRE`, when less than nine
//!   tenths of it is left; never for a refused value).
//! * `N:F:m:<direct key>`: the header manifests ([`crate::cache::manifest`]) of a direct key, a
//!   hash with one field per distinct stored value (named by the value's sha256, so the same
//!   manifest signed with two keys is two fields), shared by every scope and merged on read: a
//!   lookup checks each against the files as they are now and tries the result key of each
//!   that can match, in its own scope. The writing node's stats prove nothing on another
//!   machine ([`crate::file_stat`]): each manifest read has them set aside
//!   ([`crate::cache::manifest::Manifest::from_another_node`]), so every file it names is
//!   hashed.
//! * `N:F:Sl:<direct key>`: the cluster compile lock ([`lock`]).
//!
//! Nodes with different signing keys (a key being rotated, a node set up wrongly) therefore
//! keep separate entries on one server: neither refuses nor replaces the other's. Each meets
//! the other's manifests in the shared hash, refuses them (counted, and warned about once per
//! value and process: the warning names `HIPJIT_REMOTE_CACHE_KEY`), and leaves them there.
//!
//! # Reading
//! A remote entry is checked exactly like a disk entry ([`crate::cache::Entry::from_bytes`]: magic, format,
//! checksum of header and metadata, key, sizes and sha256 of every artefact; then the JIT
//! reads its code objects), after its signature when a signing key is set. A bad entry is
//! never served: it is reported and removed only while it still holds the bad bytes (a Lua
//! compare-and-delete on the value's SHA-1, `redis.sha1hex`), so that the next compile can
//! publish in its place without ever deleting a good entry written meanwhile. In a signed
//! scope no other key writes, so an unsigned or otherwise signed entry there was planted or
//! corrupted: it goes too. A manifest is removed only when it is no value of the envelope or
//! its payload does not decode; one signed with another key, or unsigned under a key, is
//! another node's and stays. The JIT then writes a good remote entry to the
//! first local root, off the caller's path ([`write_back`]).
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

pub mod config;

#[cfg(feature = "redis")]
mod client;
#[cfg(feature = "redis")]
pub use client::Failure;
#[cfg(feature = "redis")]
pub mod lock;
#[cfg(feature = "redis")]
pub mod signing;
#[cfg(feature = "redis")]
pub mod write_back;

pub use config::{
    RemoteConfig, RemoteConfigError, MIN_SIGNING_KEY_BYTES, REMOTE_CACHE_ENV, REMOTE_CACHE_KEY_ENV,
};

#[cfg(feature = "redis")]
pub use imp::*;

#[allow(unused_imports)]
use crate::cache::key::CACHE_FORMAT_VERSION;

#[cfg(feature = "redis")]
mod imp {
    use std::collections::{HashMap, HashSet};
    use std::path::PathBuf;
    use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
    use std::sync::{Arc, LazyLock};

    use parking_lot::Mutex;

    use super::client::{Client, Failure, OpError};
    use super::config::RemoteConfig;
    use super::signing::{self, Refused};
    use crate::cache::disk::{BadEntry, Entry};
    use crate::cache::key::{self, hex, CacheKey, CACHE_FORMAT_VERSION};
    use crate::cache::manifest::Manifest;

    /// At most this many manifests of one direct key are tried on a lookup.
    pub const MAX_MANIFESTS: usize = 32;

    const DEL_IF_SHA1: &str = "local v = redis.call('GET', KEYS[1]) \
         if v and redis.sha1hex(v) == ARGV[1] then return redis.call('DEL', KEYS[1]) end \
         return 0";
    const HDEL_IF_SHA1: &str = "local v = redis.call('HGET', KEYS[1], ARGV[1]) \
         if v and redis.sha1hex(v) == ARGV[2] then return redis.call('HDEL', KEYS[1], ARGV[1]) end \
         return 0";

    /// The remote cache tier (see the module documentation). `Send + Sync`; cheap to clone.
    #[derive(Clone, Debug)]
    pub struct RemoteCache {
        pub(super) inner: Arc<Inner>,
    }

    #[derive(Debug)]
    pub(super) struct Inner {
        pub(super) client: Client,
        /// Set when the server refused `EVAL` (said once).
        pub(super) eval_refused: AtomicBool,
        /// Warnings to give once, to the next lookup or lock that can carry them to a caller
        /// (the server's refusal of `EVAL`).
        pub(super) notices: Mutex<Vec<String>>,
        /// Values refused since the tier was made ([`RemoteCache::refused`]).
        pub(super) refused: AtomicU64,
        /// `k<key id>:` under a signing key ([`signing::key_id`]), else empty: the part of
        /// entry and lock names that keeps each key's values apart.
        scope: String,
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

    /// What to check when an entry that decoded as a hipjit value fails its own checks.
    const CORRUPTED_HINT: &str = "corrupted after it was written: check the server (its \
         memory, its persistence) and that nothing else writes keys under hipjit's namespace";

    /// An entry found in the server and checked ([`Entry::from_bytes`], signature).
    #[derive(Debug)]
    pub struct RemoteEntry {
        /// Its result key.
        pub key: CacheKey,
        /// The manifest that led to it, as the files are now.
        pub manifest: Manifest,
        /// The entry; its `path` is [`RemoteCache::describe`] of its key name.
        pub entry: Entry,
        name: String,
        value_sha1: String,
    }

    /// What [`RemoteCache::fetch`] found.
    #[derive(Debug, Default)]
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
        /// A tier for `config`; no connection is made until the first lookup.
        ///
        /// Errors: a bad setting ([`RemoteConfig::validate`]) or a URL the client refuses,
        /// as text without the password.
        pub fn new(config: RemoteConfig) -> Result<RemoteCache, super::RemoteConfigError> {
            config.validate()?;
            let client =
                Client::new(config.clone()).map_err(|reason| super::RemoteConfigError::BadUrl {
                    url: config.redacted_url(),
                    reason,
                })?;
            let scope = config
                .signing_key
                .as_deref()
                .map_or_else(String::new, |k| format!("k{}:", signing::key_id(k)));
            Ok(RemoteCache {
                inner: Arc::new(Inner {
                    client,
                    eval_refused: AtomicBool::new(false),
                    notices: Mutex::new(Vec::new()),
                    refused: AtomicU64::new(0),
                    scope,
                }),
            })
        }

        /// The settings.
        pub fn config(&self) -> &RemoteConfig {
            &self.inner.client.config
        }

        /// How many values this tier refused since it was made: entries and manifests that
        /// were corrupted, not hipjit's, unsigned under a signing key or signed with another
        /// key, and entries whose code objects did not read ([`RemoteCache::reject`]).
        pub fn refused(&self) -> u64 {
            self.inner.refused.load(Ordering::Relaxed)
        }

        /// Moves the warnings this tier gives once (the refusal of `EVAL`) into `warnings`.
        pub(super) fn take_notices(&self, warnings: &mut Vec<String>) {
            warnings.append(&mut self.inner.notices.lock());
        }

        /// Whether the server is known to be unreachable now (no operation will be tried
        /// before [`RemoteConfig::retry_after`] has passed), or the tier is off (the server
        /// refused it for good: [`Failure`]).
        pub fn is_down(&self) -> bool {
            self.inner.client.is_down()
        }

        /// The last failure to use the server, classified, with its warning (the URL's
        /// password masked); `None` when none was met.
        pub fn last_failure(&self) -> Option<(Failure, String)> {
            self.inner.client.last_failure()
        }

        /// The server's key name of `key` for `kind` (`e` entry, `m` manifests, `l` lock; see
        /// the module documentation): entries and locks under a signing key hold its id.
        pub(super) fn name(&self, kind: &str, key: &CacheKey) -> String {
            let scope = if kind == "m" { "" } else { &self.inner.scope };
            format!(
                "{}:{}:{scope}{kind}:{}",
                self.config().namespace,
                CACHE_FORMAT_VERSION,
                key.to_hex()
            )
        }

        /// How a key name of the server is shown: the redacted URL, `#`, the name.
        pub fn describe(&self, name: &str) -> PathBuf {
            PathBuf::from(format!("{}#{name}", self.config().redacted_url()))
        }

        fn signing_key(&self) -> Option<&[u8]> {
            self.config().signing_key.as_deref()
        }

        fn note(warnings: &mut Vec<String>, e: OpError) {
            match e {
                OpError::Down | OpError::Lost(None) => {}
                OpError::Lost(Some(w)) => warnings.push(w),
                OpError::Server { message, .. } => {
                    tracing::warn!(error = %message, "remote cache operation refused");
                    warnings.push(format!("the remote cache refused an operation: {message}"));
                }
            }
        }

        /// Looks `direct` up: its manifests (each checked against the files as they are now,
        /// with `include_dirs` as the options' include directories and `installation` as the
        /// compiler's installation root), then the entry of each
        /// result key that can match, until one checks out. A hit refreshes the lifetime of
        /// the entry and of the manifests.
        pub fn fetch(
            &self,
            direct: &CacheKey,
            include_dirs: &[PathBuf],
            installation: &std::path::Path,
        ) -> Fetch {
            let mut out = Fetch::default();
            let mname = self.name("m", direct);
            let fields: HashMap<Vec<u8>, Vec<u8>> = match self
                .inner
                .client
                .run(0, |c| redis::cmd("HGETALL").arg(&mname).query(c))
            {
                Ok(f) => f,
                Err(e) => {
                    Self::note(&mut out.warnings, e);
                    return out;
                }
            };
            let mut tried = std::collections::HashSet::new();
            let mut fields: Vec<_> = fields.into_iter().collect();
            fields.sort();
            let mut accepted = 0;
            for (field, value) in fields {
                if accepted == MAX_MANIFESTS {
                    break;
                }
                let manifest = match signing::open(self.signing_key(), mname.as_bytes(), &value) {
                    // Another node's manifest (signed with another key, or by a node without
                    // one): it names that node's entries and is of use to it, and it blocks
                    // nobody (each manifest value has a field of its own). Refused, left.
                    Err(e @ (Refused::BadSignature | Refused::Unsigned)) => {
                        let bad = self.leave_manifest(&mname, &field, e.to_string());
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
                        let bad = self.remove_manifest(&mname, &field, &value, reason);
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
                match self.get_entry(&rkey, &mname, &mut out) {
                    Some((entry, name, value_sha1)) => {
                        out.hit = Some(RemoteEntry {
                            key: rkey,
                            manifest: now,
                            entry,
                            name,
                            value_sha1,
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

        fn get_entry(
            &self,
            rkey: &CacheKey,
            mname: &str,
            out: &mut Fetch,
        ) -> Option<(Entry, String, String)> {
            let name = self.name("e", rkey);
            let got: Result<(Option<Vec<u8>>, i64), _> = self.inner.client.run(0, |c| {
                redis::pipe()
                    .cmd("GET")
                    .arg(&name)
                    .cmd("PTTL")
                    .arg(&name)
                    .query(c)
            });
            let (value, left_ms) = match got {
                Ok((Some(v), left)) => (v, left),
                Ok((None, _)) => return None,
                Err(e) => {
                    Self::note(&mut out.warnings, e);
                    return None;
                }
            };
            let sha1 = sha1_hex(&value);
            let checked = signing::open(self.signing_key(), name.as_bytes(), &value)
                .map_err(|e| (e.to_string(), e.hint()))
                .and_then(|p| {
                    Entry::from_bytes(p.to_vec(), &self.describe(&name), Some(rkey))
                        .map_err(|e| (e, CORRUPTED_HINT))
                });
            match checked {
                Ok(entry) => {
                    self.refresh(&name, mname, left_ms, &mut out.warnings);
                    Some((entry, name, sha1))
                }
                // Under a signing key, the entry's name holds the key's id
                // ([`signing::key_id`]): no node with another key writes there, so a value
                // that is unsigned or signed otherwise was planted or corrupted, and goes.
                Err((reason, hint)) => {
                    let bad = self.remove_if(&name, &sha1, reason);
                    self.refusal(&bad, hint, Fate::removed(&bad), &mut out.warnings);
                    out.bad.push(bad);
                    None
                }
            }
        }

        /// Renews the lifetime of the entry `name` and of the manifests `mname` after a hit,
        /// when the entry has less than nine tenths of [`RemoteConfig::ttl`] left
        /// (`left_ms`, from `PTTL`): a hit costs one round trip, and only values that checked
        /// out are kept alive (a refused one expires).
        fn refresh(&self, name: &str, mname: &str, left_ms: i64, warnings: &mut Vec<String>) {
            let ttl = self.config().ttl.as_millis() as u64;
            if left_ms < 0 || left_ms as u64 >= ttl - ttl / 10 {
                return;
            }
            let r: Result<(), OpError> = self.inner.client.run(0, |c| {
                redis::pipe()
                    .cmd("PEXPIRE")
                    .arg(name)
                    .arg(ttl)
                    .ignore()
                    .cmd("PEXPIRE")
                    .arg(mname)
                    .arg(ttl)
                    .ignore()
                    .query(c)
            });
            if let Err(e) = r {
                Self::note(warnings, e);
            }
        }

        /// Reports `hit` as bad for `reason` (its code objects do not read, say) and removes
        /// it from the server while it still holds the same bytes; the warning (once per key
        /// name in this process) goes to `warnings`.
        pub fn reject(
            &self,
            hit: RemoteEntry,
            reason: String,
            warnings: &mut Vec<String>,
        ) -> BadEntry {
            let bad = self.remove_if(&hit.name, &hit.value_sha1, reason);
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
                Fate::Removed => {
                    "removed from the server, so that this compile can publish a good one"
                }
                Fate::NotRemoved => {
                    "left in the server (it could not be removed: the server refuses EVAL or \
                     did not answer), never served; every node compiles this source until it \
                     expires"
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

        fn eval_refused(&self, e: &OpError) -> bool {
            let refused = matches!(e.code(), Some("NOPERM"))
                || matches!(e, OpError::Server { message, .. }
                    if message.contains("unknown command") || message.contains("NOSCRIPT")
                        || message.to_ascii_lowercase().contains("script"));
            if refused && !self.inner.eval_refused.swap(true, Ordering::SeqCst) {
                let w = format!(
                    "the remote cache {} refuses EVAL ({e}): compiles run without the cluster \
                     lock (nodes may compile the same source at once), and a bad entry cannot be \
                     removed (it stays until it expires, never served, reported by each lookup); \
                     allow EVAL and EVALSHA for hipjit's user (ACL +@scripting)",
                    self.config().redacted_url()
                );
                tracing::warn!("{w}");
                self.inner.notices.lock().push(w);
            }
            refused
        }

        pub(super) fn script(
            &self,
            script: &redis::Script,
            keys: &[&str],
            args: &[&[u8]],
        ) -> Result<i64, OpError> {
            if self.inner.eval_refused.load(Ordering::SeqCst) {
                return Err(OpError::Server {
                    code: None,
                    message: "the server refuses EVAL".into(),
                });
            }
            let r = self.inner.client.run(0, |c| {
                let mut inv = script.prepare_invoke();
                for k in keys {
                    inv.key(*k);
                }
                for a in args {
                    inv.arg(*a);
                }
                inv.invoke::<i64>(c)
            });
            if let Err(e) = &r {
                self.eval_refused(e);
            }
            r
        }

        fn remove_if(&self, name: &str, sha1: &str, reason: String) -> BadEntry {
            tracing::warn!(entry = %self.describe(name).display(), %reason, "bad remote hipjit cache entry");
            let script = redis::Script::new(DEL_IF_SHA1);
            let removed = self.script(&script, &[name], &[sha1.as_bytes()]);
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

        fn remove_manifest(
            &self,
            mname: &str,
            field: &[u8],
            value: &[u8],
            reason: String,
        ) -> BadEntry {
            let what = format!("{mname} {}", String::from_utf8_lossy(field));
            tracing::warn!(manifest = %what, %reason, "bad remote hipjit header manifest");
            let script = redis::Script::new(HDEL_IF_SHA1);
            let removed = self.script(&script, &[mname], &[field, sha1_hex(value).as_bytes()]);
            BadEntry {
                path: self.describe(&what),
                reason,
                writable_root: removed.is_ok(),
            }
        }

        /// Publishes an entry (`entry`: the bytes of a disk-cache entry file for `key`) with
        /// `SET NX` (an entry already there stays), and the manifest that names it under
        /// `direct`, each with the lifetime [`RemoteConfig::ttl`]. Returns warnings (the
        /// outage, once; an out-of-memory reply); never fails.
        pub fn store(
            &self,
            direct: &CacheKey,
            key: &CacheKey,
            entry: &[u8],
            manifest: &Manifest,
        ) -> Vec<String> {
            let mut warnings = Vec::new();
            let name = self.name("e", key);
            let mname = self.name("m", direct);
            let value = signing::seal(self.signing_key(), name.as_bytes(), entry);
            let mbytes = manifest.to_bytes();
            let mvalue = signing::seal(self.signing_key(), mname.as_bytes(), &mbytes);
            // Named by the value as stored: nodes with different signing keys (or none) never
            // overwrite each other's field for the same manifest.
            let field = hex(&key::sha256(&mvalue));
            let ttl = self.config().ttl.as_millis() as u64;
            let r: Result<(), OpError> = self.inner.client.run(value.len() + mvalue.len(), |c| {
                redis::pipe()
                    .cmd("SET")
                    .arg(&name)
                    .arg(&value)
                    .arg("NX")
                    .arg("PX")
                    .arg(ttl)
                    .ignore()
                    .cmd("HSET")
                    .arg(&mname)
                    .arg(&field)
                    .arg(&mvalue)
                    .ignore()
                    .cmd("PEXPIRE")
                    .arg(&mname)
                    .arg(ttl)
                    .ignore()
                    .query(c)
            });
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
            warnings
        }
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
        /// The signing key's id ([`signing::key_id`]), to compare nodes' keys without showing
        /// them; `None` without a key.
        pub key_id: Option<String>,
    }

    impl RemoteCache {
        /// Asks the server about itself (`INFO server`, `INFO memory`, `DBSIZE`), within the
        /// configured timeouts.
        ///
        /// Errors: [`Unanswered`], classified ([`Failure`]: unreachable, authentication or
        /// database refused, TLS handshake failed, not a Redis server) with what to check, or
        /// the server's error reply; the password masked.
        pub fn server_info(&self) -> Result<ServerInfo, Unanswered> {
            let (info, keys): (String, u64) = self
                .inner
                .client
                .run(0, |c| {
                    redis::pipe()
                        .cmd("INFO")
                        .arg("server")
                        .arg("memory")
                        .cmd("DBSIZE")
                        .query(c)
                })
                .or_else(|_| {
                    // INFO with two sections needs Redis 7; ask for everything.
                    self.inner
                        .client
                        .run(0, |c| redis::pipe().cmd("INFO").cmd("DBSIZE").query(c))
                })
                .map_err(|e| match (&e, self.last_failure()) {
                    (OpError::Server { message, .. }, _) => Unanswered {
                        failure: None,
                        message: message.clone(),
                    },
                    (_, Some((failure, message))) => Unanswered {
                        failure: Some(failure),
                        message,
                    },
                    (_, None) => Unanswered {
                        failure: Some(Failure::Unreachable),
                        message: e.to_string(),
                    },
                })?;
            let field = |name: &str| {
                info.lines()
                    .find_map(|l| l.strip_prefix(name)?.strip_prefix(':'))
                    .map(|v| v.trim().to_string())
            };
            Ok(ServerInfo {
                url: self.config().redacted_url(),
                version: field("redis_version"),
                keys,
                used_memory: field("used_memory").and_then(|v| v.parse().ok()),
                max_memory: field("maxmemory").and_then(|v| v.parse().ok()),
                policy: field("maxmemory_policy"),
                signed: self.config().signing_key.is_some(),
                key_id: self.signing_key().map(signing::key_id),
            })
        }
    }

    /// The SHA-1 of `bytes` in hex, as Redis's Lua `redis.sha1hex` gives it.
    pub(super) fn sha1_hex(bytes: &[u8]) -> String {
        sha1_smol::Sha1::from(bytes).digest().to_string()
    }
}
