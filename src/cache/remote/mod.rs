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
//!   that can match, in its own scope, the most recently matched first. The writing node's
//!   stats prove nothing on another machine ([`crate::fs::stat`]): each manifest read has them
//!   set aside ([`crate::cache::manifest::Manifest::from_another_node`]), so every file it
//!   names is hashed.
//! * `N:F:r:<direct key>`: the recency of those manifests, a sorted set scored by the time
//!   (ms since the epoch) each was last stored or led a lookup to its entry. A store removes,
//!   in the Lua script that writes, the manifests neither stored nor matched within
//!   [`RemoteConfig::ttl`] and then the least recently matched beyond [`MAX_MANIFESTS`], so
//!   the hash stays bounded and a source with many header variants keeps hitting on its
//!   recent ones; the hash lives while some manifest of it is used, and each manifest only
//!   as long as it is.
//! * `N:F:Sl:<direct key>`: the cluster compile lock ([`lock`]).
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
    RemoteConfig, RemoteConfigError, DEFAULT_MAX_VALUE_BYTES, MIN_SIGNING_KEY_BYTES,
    REMOTE_CACHE_ENV, REMOTE_CACHE_KEY_ENV,
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

    /// The fields and values of a manifests hash.
    type Fields = HashMap<Vec<u8>, Vec<u8>>;
    /// A recency set: each field and its score, in ascending order of score.
    type Scored = Vec<(Vec<u8>, f64)>;

    /// At most this many header manifests of one direct key are kept (a store removes the
    /// least recently matched beyond it) and tried on a lookup.
    pub const MAX_MANIFESTS: usize = 32;

    const DEL_IF_SHA1: &str = "local v = redis.call('GET', KEYS[1]) \
         if v and redis.sha1hex(v) == ARGV[1] then return redis.call('DEL', KEYS[1]) end \
         return 0";
    const HDEL_IF_SHA1: &str = "local v = redis.call('HGET', KEYS[1], ARGV[1]) \
         if v and redis.sha1hex(v) == ARGV[2] then redis.call('ZREM', KEYS[2], ARGV[1]) \
         return redis.call('HDEL', KEYS[1], ARGV[1]) end \
         return 0";
    /// Deletes an entry name's value while it is no string or is longer than `ARGV[1]`.
    const DEL_IF_UNREADABLE: &str = "local t = redis.call('TYPE', KEYS[1]).ok \
         if t == 'none' then return 0 end \
         if t ~= 'string' or redis.call('STRLEN', KEYS[1]) > tonumber(ARGV[1]) then \
         return redis.call('DEL', KEYS[1]) end \
         return 0";
    /// [`RemoteCache::store`]: KEYS entry, manifests hash, recency set; ARGV value, field,
    /// manifest value, lifetime (ms), now (ms since the epoch), the bound on manifests, `1` to
    /// replace the entry (a value there failed to verify and was not removed). Manifests in
    /// the hash without a score (written before the recency set existed) are scored just
    /// before now; those not stored nor matched within the lifetime, then the least recently
    /// matched beyond the bound, are removed from both. Returns how many were removed.
    const STORE: &str = "\
         if ARGV[7] == '1' then redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[4]) \
         else redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[4]) end \
         redis.call('HSET', KEYS[2], ARGV[2], ARGV[3]) \
         local now = tonumber(ARGV[5]) \
         if redis.call('HLEN', KEYS[2]) > redis.call('ZCARD', KEYS[3]) then \
           for _, f in ipairs(redis.call('HKEYS', KEYS[2])) do \
             if not redis.call('ZSCORE', KEYS[3], f) then \
               redis.call('ZADD', KEYS[3], now - 1, f) end end end \
         redis.call('ZADD', KEYS[3], now, ARGV[2]) \
         local gone = redis.call('ZRANGEBYSCORE', KEYS[3], '-inf', \
           string.format('(%.0f', now - tonumber(ARGV[4]))) \
         local over = redis.call('ZCARD', KEYS[3]) - #gone - tonumber(ARGV[6]) \
         if over > 0 then \
           for _, f in ipairs(redis.call('ZRANGE', KEYS[3], #gone, #gone + over - 1)) do \
             table.insert(gone, f) end end \
         for _, f in ipairs(gone) do \
           redis.call('HDEL', KEYS[2], f) redis.call('ZREM', KEYS[3], f) end \
         redis.call('PEXPIRE', KEYS[2], ARGV[4]) \
         redis.call('PEXPIRE', KEYS[3], ARGV[4]) \
         return #gone";

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
        /// Entry names whose value was refused and could not be removed (the server refuses
        /// `EVAL` or did not answer): the next store of that entry replaces it (`SET` without
        /// `NX`).
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
    pub(super) fn first_warning(what: String) -> bool {
        WARNED.lock().insert(what)
    }

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
                    replace: Mutex::new(HashSet::new()),
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

        /// The server's key name of `key` for `kind` (`e` entry, `m` manifests, `r` their
        /// recency, `l` lock; see
        /// the module documentation): entries and locks under a signing key hold its id.
        pub(super) fn name(&self, kind: &str, key: &CacheKey) -> String {
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
            let rname = self.name("r", direct);
            let read: Result<(Fields, Vec<Vec<u8>>), _> = self.inner.client.run(0, |c| {
                redis::pipe()
                    .cmd("HGETALL")
                    .arg(&mname)
                    .cmd("ZREVRANGE")
                    .arg(&rname)
                    .arg(0)
                    .arg(-1)
                    .query(c)
            });
            let (fields, recent) = match read {
                Ok(f) => f,
                Err(e) => {
                    Self::note(&mut out.warnings, e);
                    return out;
                }
            };
            let mut tried = std::collections::HashSet::new();
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
                        let bad = self.remove_manifest(&mname, &rname, &field, &value, reason);
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
                match self.get_entry(&rkey, &mname, &rname, &field, &mut out) {
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

        /// The entry of `rkey`, checked, with its key name and the SHA-1 of its value; `None`
        /// for a miss or a refused value (reported in `out`). Its length is asked first
        /// (`STRLEN`) and it is read with `GETRANGE` up to [`RemoteConfig::max_value_bytes`]:
        /// a longer value, or one that is no string, is refused unread. `field`, the
        /// manifest that led here, is marked as matched now in the recency set (see
        /// [`RemoteCache::store`]).
        fn get_entry(
            &self,
            rkey: &CacheKey,
            mname: &str,
            rname: &str,
            field: &[u8],
            out: &mut Fetch,
        ) -> Option<(Entry, String, String)> {
            let name = self.name("e", rkey);
            let bound = self.config().max_value_bytes;
            let head: Result<(u64, i64), _> = self.inner.client.run(0, |c| {
                redis::pipe()
                    .cmd("STRLEN")
                    .arg(&name)
                    .cmd("PTTL")
                    .arg(&name)
                    .query(c)
            });
            let (len, left_ms) = match head {
                // PTTL -2: no such key.
                Ok((_, -2)) => return None,
                Ok(h) => h,
                Err(e) if e.code() == Some("WRONGTYPE") => {
                    let reason = "not a string value (another Redis type under an entry's \
                         name)"
                        .to_string();
                    self.unreadable(&name, reason, out);
                    return None;
                }
                Err(e) => {
                    Self::note(&mut out.warnings, e);
                    return None;
                }
            };
            if len > bound {
                let reason = format!(
                    "{len} bytes, more than the limit of {bound} (RemoteConfig::max_value_bytes): \
                     refused unread"
                );
                self.unreadable(&name, reason, out);
                return None;
            }
            let now = now_ms();
            // The mark is best effort: a full server (OOM) or a planted key of another type
            // refuses it, and the read goes on.
            let got: Result<Vec<u8>, _> = self.inner.client.run(len as usize, |c| {
                let mut replies: Vec<redis::RedisResult<Vec<u8>>> = redis::pipe()
                    .cmd("GETRANGE")
                    .arg(&name)
                    .arg(0)
                    .arg(bound)
                    .cmd("ZADD")
                    .arg(rname)
                    .arg("XX")
                    .arg(now)
                    .arg(field)
                    .ignore()
                    .ignore_errors()
                    .query(c)?;
                replies.truncate(1);
                replies.pop().unwrap_or_else(|| Ok(Vec::new()))
            });
            let value = match got {
                // Gone since its length was read.
                Ok(v) if v.is_empty() && len > 0 => return None,
                Ok(v) => v,
                Err(e) => {
                    Self::note(&mut out.warnings, e);
                    return None;
                }
            };
            if value.len() as u64 > bound {
                // Grown past the bound since its length was read.
                let reason =
                    format!("more than the limit of {bound} bytes (RemoteConfig::max_value_bytes)");
                self.unreadable(&name, reason, out);
                return None;
            }
            let sha1 = sha1_hex(&value);
            let checked = signing::open(self.signing_key(), name.as_bytes(), &value)
                .map_err(|e| (e.to_string(), e.hint()))
                .and_then(|p| {
                    Entry::from_bytes(p.to_vec(), &self.describe(&name), Some(rkey))
                        .map_err(|e| (e, CORRUPTED_HINT))
                });
            match checked {
                Ok(entry) => {
                    self.refresh(&name, mname, rname, left_ms, &mut out.warnings);
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

        /// Refuses the value under the entry name `name` unread (longer than
        /// [`RemoteConfig::max_value_bytes`], or no string): removed while it still is so
        /// (a Lua script: `TYPE`, `STRLEN`, `DEL`), else replaced by this node's next store of
        /// that entry.
        fn unreadable(&self, name: &str, reason: String, out: &mut Fetch) {
            tracing::warn!(entry = %self.describe(name).display(), %reason, "bad remote hipjit cache entry");
            let bound = self.config().max_value_bytes.to_string();
            let removed = self.script(
                &redis::Script::new(DEL_IF_UNREADABLE),
                &[name],
                &[bound.as_bytes()],
            );
            let bad = BadEntry {
                path: self.describe(name),
                reason,
                writable_root: removed.is_ok(),
            };
            if !bad.writable_root {
                self.inner.replace.lock().insert(name.to_string());
            }
            self.refusal(&bad, CORRUPTED_HINT, Fate::removed(&bad), &mut out.warnings);
            out.bad.push(bad);
        }

        /// Renews the lifetime of the entry `name` and of the manifests `mname` (and their
        /// recency set `rname`) after a hit,
        /// when the entry has less than nine tenths of [`RemoteConfig::ttl`] left
        /// (`left_ms`, from `PTTL`): a hit costs one round trip, and only values that checked
        /// out are kept alive (a refused one expires).
        fn refresh(
            &self,
            name: &str,
            mname: &str,
            rname: &str,
            left_ms: i64,
            warnings: &mut Vec<String>,
        ) {
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
                    .cmd("PEXPIRE")
                    .arg(rname)
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

        fn eval_refused(&self, e: &OpError) -> bool {
            // A command that failed inside a script (its reply names `@user_script`), or a
            // full or busy server, says nothing about EVAL itself.
            let ran = matches!(e, OpError::Server { message, .. }
                if message.contains("@user_script"))
                || matches!(
                    e.code(),
                    Some("OOM" | "WRONGTYPE" | "BUSY" | "LOADING" | "READONLY" | "MASTERDOWN")
                );
            let refused = !ran
                && (matches!(e.code(), Some("NOPERM"))
                    || matches!(e, OpError::Server { message, .. }
                        if message.contains("unknown command") || message.contains("NOSCRIPT")
                            || message.to_ascii_lowercase().contains("script")));
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
            self.script_sized(0, script, keys, args)
        }

        /// [`RemoteCache::script`] with `bytes` of payload (for its timeout).
        pub(super) fn script_sized(
            &self,
            bytes: usize,
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
            let r = self.inner.client.run(bytes, |c| {
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

        fn remove_manifest(
            &self,
            mname: &str,
            rname: &str,
            field: &[u8],
            value: &[u8],
            reason: String,
        ) -> BadEntry {
            let what = format!("{mname} {}", String::from_utf8_lossy(field));
            tracing::warn!(manifest = %what, %reason, "bad remote hipjit header manifest");
            let script = redis::Script::new(HDEL_IF_SHA1);
            let removed = self.script(
                &script,
                &[mname, rname],
                &[field, sha1_hex(value).as_bytes()],
            );
            BadEntry {
                path: self.describe(&what),
                reason,
                writable_root: removed.is_ok(),
            }
        }

        /// Publishes an entry (`entry`: the bytes of a disk-cache entry file for `key`) with
        /// `SET NX` (an entry already there stays, unless this process found it bad and could
        /// not remove it: then it is replaced), and the manifest that names it under `direct`,
        /// each with the lifetime [`RemoteConfig::ttl`]. The manifest is scored now in the
        /// recency set of `direct` (kind `r`), which hits score again when they match;
        /// manifests neither stored nor matched within the lifetime, then the least recently
        /// matched beyond [`MAX_MANIFESTS`], are removed, in the same Lua script (without
        /// `EVAL`: a pipeline, then the removals). Returns warnings (the outage, once; an
        /// out-of-memory reply; a value over [`RemoteConfig::max_value_bytes`], not stored);
        /// never fails.
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
            let rname = self.name("r", direct);
            let value = signing::seal(self.signing_key(), name.as_bytes(), entry);
            let mbytes = manifest.to_bytes();
            let mvalue = signing::seal(self.signing_key(), mname.as_bytes(), &mbytes);
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
            let ttl = self.config().ttl.as_millis() as u64;
            let replace = self.inner.replace.lock().remove(&name);
            let (ttl_s, now_s, max_s) = (
                ttl.to_string(),
                now_ms().to_string(),
                MAX_MANIFESTS.to_string(),
            );
            let bytes = value.len() + mvalue.len();
            let r = if self.inner.eval_refused.load(Ordering::SeqCst) {
                self.store_without_eval(&name, &mname, &rname, &value, &field, &mvalue, replace)
            } else {
                match self.script_sized(
                    bytes,
                    &redis::Script::new(STORE),
                    &[&name, &mname, &rname],
                    &[
                        &value,
                        field.as_bytes(),
                        &mvalue,
                        ttl_s.as_bytes(),
                        now_s.as_bytes(),
                        max_s.as_bytes(),
                        if replace { b"1" } else { b"0" },
                    ],
                ) {
                    Err(_) if self.inner.eval_refused.load(Ordering::SeqCst) => self
                        .store_without_eval(
                            &name, &mname, &rname, &value, &field, &mvalue, replace,
                        ),
                    r => r.map(drop),
                }
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

        /// [`RemoteCache::store`] where the server refuses `EVAL`: one pipeline writes, and a
        /// second removes what the recency set says is to go (not atomic: a manifest matched
        /// meanwhile may go too, and is stored again by the next compile that needs it).
        #[allow(clippy::too_many_arguments)]
        fn store_without_eval(
            &self,
            name: &str,
            mname: &str,
            rname: &str,
            value: &[u8],
            field: &str,
            mvalue: &[u8],
            replace: bool,
        ) -> Result<(), OpError> {
            let ttl = self.config().ttl.as_millis() as u64;
            let now = now_ms();
            let (fields, scored): (Vec<Vec<u8>>, Scored) =
                self.inner.client.run(value.len() + mvalue.len(), |c| {
                    let mut p = redis::pipe();
                    p.cmd("SET").arg(name).arg(value);
                    if !replace {
                        p.arg("NX");
                    }
                    p.arg("PX")
                        .arg(ttl)
                        .ignore()
                        .cmd("HSET")
                        .arg(mname)
                        .arg(field)
                        .arg(mvalue)
                        .ignore()
                        .cmd("ZADD")
                        .arg(rname)
                        .arg(now)
                        .arg(field)
                        .ignore()
                        .cmd("PEXPIRE")
                        .arg(mname)
                        .arg(ttl)
                        .ignore()
                        .cmd("PEXPIRE")
                        .arg(rname)
                        .arg(ttl)
                        .ignore()
                        .cmd("HKEYS")
                        .arg(mname)
                        .cmd("ZRANGE")
                        .arg(rname)
                        .arg(0)
                        .arg(-1)
                        .arg("WITHSCORES")
                        .query(c)
                })?;
            let gone = to_evict(fields, scored, now, ttl, MAX_MANIFESTS);
            if gone.is_empty() {
                return Ok(());
            }
            self.inner.client.run(0, |c| {
                redis::pipe()
                    .cmd("HDEL")
                    .arg(mname)
                    .arg(&gone)
                    .ignore()
                    .cmd("ZREM")
                    .arg(rname)
                    .arg(&gone)
                    .ignore()
                    .query(c)
            })
        }
    }

    /// The manifests a store removes (what the Lua script of [`RemoteCache::store`] removes,
    /// computed here): `fields` the hash's fields, `scored` the recency set in ascending order
    /// of score; fields without a score go first, then those scored before `now - ttl`, then
    /// the least recently matched beyond `max`.
    fn to_evict(
        fields: Vec<Vec<u8>>,
        scored: Scored,
        now: u64,
        ttl: u64,
        max: usize,
    ) -> Vec<Vec<u8>> {
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
            let fields: HashMap<Vec<u8>, Vec<u8>> =
                [("x", "1"), ("a", "2"), ("m", "3"), ("z", "4")]
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
}
