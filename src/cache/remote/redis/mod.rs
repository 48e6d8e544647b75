//! The Redis store (feature `redis`): `redis://` and `rediss://` servers, Valkey included.
//! It has every capability of [`Store`]:
//!
//! * get: `STRLEN` and `PTTL` in one round trip, then `GETRANGE` up to the bound (a value
//!   of another Redis type is [`Got::NotValue`]); put: `SET PX`; delete: `DEL`; renew:
//!   `PEXPIRE`;
//! * atomic create: `SET NX PX`;
//! * compare-and-delete: Lua scripts comparing the value's `redis.sha1hex` (the tag of
//!   [`Got::Value`]), or its type and length;
//! * manifest merge: a hash of manifests and a sorted set of their recency; a publish is one
//!   Lua script (the entry, the manifest, the removals), or where the server refuses `EVAL`
//!   two pipelines;
//! * the cluster lock (`lock`): `SET NX PX` of a signed token, renewed and released by Lua.
//!
//! Compare-and-delete and the lock need `EVAL`: where the server refuses it for hipjit's
//! user, the store says so once and declares neither from then on.

mod client;
pub(crate) mod lock;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;

use super::config::{RemoteConfig, RemoteConfigError};
use super::store::StoreError as OpError;
use super::store::{
    Capabilities, Failure, Fields, Got, Locked, ManifestNames, Publish, Store, StoreInfo, Unless,
};
use super::Unanswered;
use client::Client;

/// A recency set: each field and its score, in ascending order of score.
type Scored = Vec<(Vec<u8>, f64)>;

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
/// [`Store::publish`]: KEYS entry, manifests hash, recency set; ARGV value, field,
/// manifest value, lifetime (ms), now (ms since the epoch), the bound on manifests, `1` to
/// replace the entry (a value there failed to verify and was not removed). Manifests in
/// the hash without a score (written before the recency set existed) are scored just
/// before now; those not stored nor matched within the lifetime, then the least recently
/// matched beyond the bound, are removed from both. Another type under the hash's or the
/// set's name (planted, or left by a broken writer) is deleted first, so that it cannot
/// fail every later store of the source. Returns how many were removed.
const STORE: &str = "\
     local t = redis.call('TYPE', KEYS[2]).ok \
     if t ~= 'none' and t ~= 'hash' then redis.call('DEL', KEYS[2]) end \
     t = redis.call('TYPE', KEYS[3]).ok \
     if t ~= 'none' and t ~= 'zset' then redis.call('DEL', KEYS[3]) end \
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

/// A Redis server as a [`Store`]. `Send + Sync`; cheap to clone.
#[derive(Clone, Debug)]
pub(crate) struct RedisStore {
    pub(crate) inner: Arc<Inner>,
}

#[derive(Debug)]
pub(crate) struct Inner {
    pub(crate) client: Client,
    /// Set when the server refused `EVAL` (said once).
    pub(crate) eval_refused: AtomicBool,
    /// Warnings to give once, to the next operation that can carry them to a caller (the
    /// server's refusal of `EVAL`).
    pub(crate) notices: Mutex<Vec<String>>,
}

/// `d` in whole milliseconds, at most `u64::MAX`.
fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

impl RedisStore {
    /// A store for `config` (a `redis://` or `rediss://` URL); no connection is made yet.
    ///
    /// Errors: [`RemoteConfigError::BadUrl`], the client's refusal of the URL, password
    /// scrubbed.
    pub(crate) fn new(config: RemoteConfig) -> Result<RedisStore, RemoteConfigError> {
        let client = Client::new(config.clone()).map_err(|reason| RemoteConfigError::BadUrl {
            url: config.redacted_url(),
            reason,
        })?;
        Ok(RedisStore {
            inner: Arc::new(Inner {
                client,
                eval_refused: AtomicBool::new(false),
                notices: Mutex::new(Vec::new()),
            }),
        })
    }

    pub(crate) fn config(&self) -> &RemoteConfig {
        &self.inner.client.config
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

    pub(crate) fn script(
        &self,
        script: &redis::Script,
        keys: &[&str],
        args: &[&[u8]],
    ) -> Result<i64, OpError> {
        self.script_sized(0, script, keys, args)
    }

    /// [`RedisStore::script`] with `bytes` of payload (for its timeout).
    pub(crate) fn script_sized(
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

    /// [`Store::publish`] where the server refuses `EVAL`: one pipeline writes, and a
    /// second removes what the recency set says is to go (not atomic: a manifest matched
    /// meanwhile may go too, and is stored again by the next compile that needs it).
    fn publish_without_eval(&self, p: &Publish<'_>) -> Result<(), OpError> {
        let ttl = millis(p.ttl);
        let now = p.now_ms;
        let (mname, rname) = (&p.manifests.fields, &p.manifests.recency);
        let (fields, scored): (Vec<Vec<u8>>, Scored) =
            self.inner
                .client
                .run(p.value.len() + p.manifest.len(), |c| {
                    let mut q = redis::pipe();
                    q.cmd("SET").arg(p.entry).arg(p.value);
                    if !p.replace {
                        q.arg("NX");
                    }
                    q.arg("PX")
                        .arg(ttl)
                        .ignore()
                        .cmd("HSET")
                        .arg(mname)
                        .arg(p.field)
                        .arg(p.manifest)
                        .ignore()
                        .cmd("ZADD")
                        .arg(rname)
                        .arg(now)
                        .arg(p.field)
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
        let gone = super::to_evict(fields, scored, now, ttl, p.max_manifests);
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

impl Store for RedisStore {
    fn describe(&self) -> String {
        self.config().redacted_url()
    }

    fn capabilities(&self) -> Capabilities {
        let eval = !self.inner.eval_refused.load(Ordering::SeqCst);
        Capabilities {
            atomic_create: true,
            compare_and_delete: eval,
            manifest_merge: true,
            lock: eval,
        }
    }

    fn get(&self, name: &str, bound: u64) -> Result<Got, OpError> {
        let head: Result<(u64, i64), _> = self.inner.client.run(0, |c| {
            redis::pipe()
                .cmd("STRLEN")
                .arg(name)
                .cmd("PTTL")
                .arg(name)
                .query(c)
        });
        let (len, left_ms) = match head {
            // PTTL -2: no such key.
            Ok((_, -2)) => return Ok(Got::Missing),
            Ok(h) => h,
            Err(e) if e.code() == Some("WRONGTYPE") => {
                return Ok(Got::NotValue(
                    "not a string value (another Redis type under an entry's name)".into(),
                ))
            }
            Err(e) => return Err(e),
        };
        if len > bound {
            return Ok(Got::TooLong(len));
        }
        let value: Vec<u8> = self.inner.client.run(len as usize, |c| {
            redis::cmd("GETRANGE").arg(name).arg(0).arg(bound).query(c)
        })?;
        if value.is_empty() && len > 0 {
            // Gone since its length was read.
            return Ok(Got::Missing);
        }
        if value.len() as u64 > bound {
            // Grown past the bound since its length was read.
            return Ok(Got::TooLong(value.len() as u64));
        }
        Ok(Got::Value {
            tag: sha1_hex(&value),
            bytes: value,
            ttl_left: u64::try_from(left_ms).ok().map(Duration::from_millis),
        })
    }

    fn put(&self, name: &str, value: &[u8], ttl: Duration) -> Result<(), OpError> {
        self.inner.client.run(value.len(), |c| {
            redis::cmd("SET")
                .arg(name)
                .arg(value)
                .arg("PX")
                .arg(millis(ttl))
                .query(c)
        })
    }

    fn delete(&self, name: &str) -> Result<(), OpError> {
        self.inner
            .client
            .run(0, |c| redis::cmd("DEL").arg(name).query::<i64>(c))
            .map(drop)
    }

    fn renew(&self, names: &[&str], ttl: Duration) -> Result<(), OpError> {
        self.inner.client.run(0, |c| {
            let mut p = redis::pipe();
            for n in names {
                p.cmd("PEXPIRE").arg(*n).arg(millis(ttl)).ignore();
            }
            p.query(c)
        })
    }

    fn is_down(&self) -> bool {
        self.inner.client.is_down()
    }

    fn last_failure(&self) -> Option<(Failure, String)> {
        self.inner.client.last_failure()
    }

    fn take_notices(&self) -> Vec<String> {
        std::mem::take(&mut *self.inner.notices.lock())
    }

    fn info(&self) -> Result<StoreInfo, Unanswered> {
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
        Ok(StoreInfo {
            version: field("redis_version"),
            keys,
            used_memory: field("used_memory").and_then(|v| v.parse().ok()),
            max_memory: field("maxmemory").and_then(|v| v.parse().ok()),
            policy: field("maxmemory_policy"),
        })
    }

    fn create(&self, name: &str, value: &[u8], ttl: Duration) -> Result<bool, OpError> {
        let set: Option<String> = self.inner.client.run(value.len(), |c| {
            redis::cmd("SET")
                .arg(name)
                .arg(value)
                .arg("NX")
                .arg("PX")
                .arg(millis(ttl))
                .query(c)
        })?;
        Ok(set.is_some())
    }

    fn delete_if(&self, name: &str, unless: Unless<'_>) -> Result<bool, OpError> {
        let n = match unless {
            Unless::Same(tag) => {
                self.script(&redis::Script::new(DEL_IF_SHA1), &[name], &[tag.as_bytes()])?
            }
            Unless::Unreadable(bound) => self.script(
                &redis::Script::new(DEL_IF_UNREADABLE),
                &[name],
                &[bound.to_string().as_bytes()],
            )?,
        };
        Ok(n > 0)
    }

    fn manifests(&self, names: &ManifestNames) -> Result<(Fields, Vec<Vec<u8>>), OpError> {
        self.inner.client.run(0, |c| {
            redis::pipe()
                .cmd("HGETALL")
                .arg(&names.fields)
                .cmd("ZREVRANGE")
                .arg(&names.recency)
                .arg(0)
                .arg(-1)
                .query(c)
        })
    }

    fn mark_manifest(
        &self,
        names: &ManifestNames,
        field: &[u8],
        now_ms: u64,
    ) -> Result<(), OpError> {
        self.inner.client.run(0, |c| {
            redis::cmd("ZADD")
                .arg(&names.recency)
                .arg("XX")
                .arg(now_ms)
                .arg(field)
                .query::<i64>(c)
                .map(drop)
        })
    }

    fn delete_manifest_if(
        &self,
        names: &ManifestNames,
        field: &[u8],
        value: &[u8],
    ) -> Result<bool, OpError> {
        let n = self.script(
            &redis::Script::new(HDEL_IF_SHA1),
            &[&names.fields, &names.recency],
            &[field, sha1_hex(value).as_bytes()],
        )?;
        Ok(n > 0)
    }

    fn publish(&self, p: &Publish<'_>) -> Result<(), OpError> {
        if self.inner.eval_refused.load(Ordering::SeqCst) {
            return self.publish_without_eval(p);
        }
        let (ttl_s, now_s, max_s) = (
            millis(p.ttl).to_string(),
            p.now_ms.to_string(),
            p.max_manifests.to_string(),
        );
        match self.script_sized(
            p.value.len() + p.manifest.len(),
            &redis::Script::new(STORE),
            &[p.entry, &p.manifests.fields, &p.manifests.recency],
            &[
                p.value,
                p.field,
                p.manifest,
                ttl_s.as_bytes(),
                now_s.as_bytes(),
                max_s.as_bytes(),
                if p.replace { b"1" } else { b"0" },
            ],
        ) {
            Err(_) if self.inner.eval_refused.load(Ordering::SeqCst) => {
                self.publish_without_eval(p)
            }
            r => r.map(drop),
        }
    }

    fn lock(
        &self,
        name: &str,
        wait: Duration,
        warnings: &mut Vec<String>,
        poll: &mut dyn FnMut() -> bool,
    ) -> Locked {
        self.take_lock(name, wait, warnings, poll)
    }
}

/// The SHA-1 of `bytes` in hex, as Redis's Lua `redis.sha1hex` gives it.
fn sha1_hex(bytes: &[u8]) -> String {
    sha1_smol::Sha1::from(bytes).digest().to_string()
}
