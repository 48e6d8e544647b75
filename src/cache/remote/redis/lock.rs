//! Compile once per cluster: the Redis store's cluster lock ([`Store::lock`]).
//!
//! `SET N:F:l:<direct> <token> NX PX <lock_ttl>` takes it, the token made by
//! [`signing::lock_token`] at each attempt: a random 128-bit nonce, the time it was made (ms
//! since the Unix epoch), the lifetime it is taken for, and an HMAC of these and the lock's
//! name under the signing key (without one, under a public constant: then it shows only its
//! shape). While the compile runs, a thread renews it every [`RemoteConfig::lock_renew`] with
//! a Lua compare-and-`PEXPIRE` (only while it still holds this token); dropping the guard
//! releases it with a Lua compare-and-`DEL`. A process that dies holding it leaves a lock that
//! expires after [`RemoteConfig::lock_ttl`].
//!
//! A process that finds the lock taken reads it (its length, its first 256 bytes and its
//! `PTTL`, one round trip) and waits only for a lock hipjit could still hold. A value that is
//! no token for that name (under this node's key; a token of an earlier shape is none), that
//! has no expiry, that claims a lifetime longer than this node's [`RemoteConfig::lock_ttl`]
//! or expires later than the lifetime its token claims, whose token was issued longer ago than
//! any holder holds a lock (the wait this process was given, that is the compile timeout, plus
//! the lock's lifetime plus `LOCK_CLOCK_SKEW`) or more than `LOCK_CLOCK_SKEW` in the
//! future, or that holds a token this process already waited out, is removed at once by a Lua
//! compare-and-`DEL` (while it is still that value) and the lock taken: whoever can write the
//! database cannot make a miss wait, and a token seen once and replayed later is refused once
//! it is older than one compile timeout can explain. Every node must therefore take its locks
//! for the same lifetime, and keep its clock within `LOCK_CLOCK_SKEW` of the others'.
//!
//! For a lock hipjit could still hold, it waits for the holder's entry, looking for it every
//! [`RemoteConfig::lock_poll`], up to the wait it was given (the JIT: the compile timeout) and
//! no later than its token's issue time plus that wait plus `LOCK_CLOCK_SKEW` (its holder
//! compiles no longer), and compiles itself when the lock expires (it takes it), the wait runs
//! out, or the server goes away. A wait that runs out removes the lock (while it still holds
//! the token waited for: its holder has compiled for longer than the compile timeout) and
//! remembers that token as stale in this process, so the wait is paid once. Where the server
//! refuses `EVAL`, there is no lock (said once).
//!
//! [`RemoteConfig::lock_renew`]: crate::cache::remote::RemoteConfig::lock_renew
//! [`RemoteConfig::lock_ttl`]: crate::cache::remote::RemoteConfig::lock_ttl
//! [`RemoteConfig::lock_poll`]: crate::cache::remote::RemoteConfig::lock_poll

use std::collections::HashSet;
use std::sync::atomic::Ordering;
use std::sync::{mpsc, LazyLock};
use std::time::{Duration, Instant};

use parking_lot::Mutex;

use super::RedisStore;
use crate::cache::key::hex;
use crate::cache::remote::lock::LOCK_CLOCK_SKEW;
use crate::cache::remote::signing::{self, LockClaim};
#[allow(unused_imports)]
use crate::cache::remote::store::Store;
use crate::cache::remote::store::{HeldLock, Locked, StoreError as OpError};

const RENEW: &str = "if redis.call('GET', KEYS[1]) == ARGV[1] then \
     return redis.call('PEXPIRE', KEYS[1], ARGV[2]) end return 0";
const RELEASE: &str = "if redis.call('GET', KEYS[1]) == ARGV[1] then \
     return redis.call('DEL', KEYS[1]) end return 0";
/// Deletes the lock while it is still what was seen: ARGV[1] its first [`SEEN_BYTES`] bytes
/// and ARGV[2] its length, or (ARGV[3] `1`) a value that is no string.
const DEL_IF_SEEN: &str = "local t = redis.call('TYPE', KEYS[1]).ok \
     if t == 'none' then return 0 end \
     if t ~= 'string' then \
       if ARGV[3] == '1' then return redis.call('DEL', KEYS[1]) end return 0 end \
     if ARGV[3] == '1' then return 0 end \
     if redis.call('STRLEN', KEYS[1]) == tonumber(ARGV[2]) \
       and redis.call('GETRANGE', KEYS[1], 0, 255) == ARGV[1] then \
       return redis.call('DEL', KEYS[1]) end \
     return 0";
/// How much of a lock's value is read: more than any token hipjit writes (at most 144 bytes).
const SEEN_BYTES: u64 = 256;
/// How many locks that are not hipjit's one take removes before compiling without the lock
/// (something keeps writing them).
const MAX_REMOVALS: usize = 3;
/// Lock tokens this process waited out, by server, lock name and token: met again, they are
/// not waited for ([`RedisStore::take_lock`]). Cleared when it reaches [`MAX_STALE`].
static STALE: LazyLock<Mutex<HashSet<String>>> = LazyLock::new(|| Mutex::new(HashSet::new()));
const MAX_STALE: usize = 4096;

/// A held cluster lock; renewed by a thread until dropped, then released.
#[derive(Debug)]
pub(crate) struct RedisLockGuard {
    store: RedisStore,
    name: String,
    token: String,
    stop: Option<mpsc::Sender<()>>,
    renewer: Option<std::thread::JoinHandle<()>>,
}

impl HeldLock for RedisLockGuard {}

/// The random part of a lock token: 32 hex digits.
fn nonce() -> String {
    let mut b = [0u8; 16];
    if getrandom::fill(&mut b).is_err() {
        // No OS randomness: time and process make a token unique enough for a lock that
        // only saves work (correctness rests on SET NX of immutable entries).
        let t = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos());
        b.copy_from_slice(
            &crate::digest::sha256(format!("{t}-{}", std::process::id()).as_bytes())[..16],
        );
    }
    hex(&b)
}

/// What a look at a taken lock found.
enum Seen {
    /// Nothing: released or expired since.
    Gone,
    /// A token hipjit wrote for this lock, within its lifetime, and what it claims: wait for
    /// it.
    Held(Vec<u8>, LockClaim),
    /// Not a lock to wait for, and why: removed while it is still what was seen.
    Foreign {
        prefix: Vec<u8>,
        len: u64,
        not_string: bool,
        reason: String,
    },
}

impl RedisStore {
    /// [`Store::lock`] (see the module documentation): the lock `name`, waited for at most
    /// `wait`; `poll` is called while waiting.
    pub(crate) fn take_lock(
        &self,
        name: &str,
        wait: Duration,
        warnings: &mut Vec<String>,
        poll: &mut dyn FnMut() -> bool,
    ) -> Locked {
        if self.inner.eval_refused.load(Ordering::SeqCst) {
            return Locked::Unavailable;
        }
        let name = name.to_string();
        let ttl = self.config().lock_ttl.as_millis() as u64;
        let started = Instant::now();
        // A wait past what the clock can count: a year is as good.
        let deadline = started
            .checked_add(wait)
            .unwrap_or_else(|| started + Duration::from_secs(365 * 24 * 3600));
        let mut probed = false;
        let mut removals = 0;
        let mut freed = 0;
        loop {
            // Made at each attempt: its issue time says when this process took the lock.
            let token = signing::lock_token(
                self.config().signing_key.as_deref(),
                name.as_bytes(),
                &nonce(),
                crate::cache::remote::now_ms(),
                ttl,
            );
            let set: Result<Option<String>, OpError> = self.inner.client.run(0, |c| {
                redis::cmd("SET")
                    .arg(&name)
                    .arg(&token)
                    .arg("NX")
                    .arg("PX")
                    .arg(ttl)
                    .query(c)
            });
            match set {
                Ok(Some(_)) => {
                    // Renewal and release need EVAL: make sure the server runs it before
                    // relying on the lock.
                    if !probed {
                        if let Err(e) = self.renew_once(&name, &token) {
                            if self.inner.eval_refused.load(Ordering::SeqCst) {
                                // A plain DEL of our own fresh lock is safe here: nobody else
                                // could take it meanwhile.
                                let _ = self
                                    .inner
                                    .client
                                    .run(0, |c| redis::cmd("DEL").arg(&name).query::<i64>(c));
                                return Locked::Unavailable;
                            }
                            note(warnings, e);
                            return Locked::Unavailable;
                        }
                    }
                    let guard = self.guard(name, token);
                    // The holder before this one may have published and released between
                    // this process's last look and its SET: look once more under the lock.
                    if poll() {
                        drop(guard);
                        return Locked::Found;
                    }
                    return Locked::Held(Box::new(guard));
                }
                Ok(None) => {}
                Err(e) => {
                    note(warnings, e);
                    return Locked::Unavailable;
                }
            }
            probed = true;
            let held = match self.inspect(&name, wait) {
                Err(e) => {
                    note(warnings, e);
                    return Locked::Unavailable;
                }
                // Released meanwhile: take it now (a few times; then as a held lock, polled).
                Ok(Seen::Gone) if freed < 3 => {
                    freed += 1;
                    continue;
                }
                Ok(Seen::Gone) => None,
                Ok(Seen::Foreign {
                    prefix,
                    len,
                    not_string,
                    reason,
                }) => {
                    if removals == MAX_REMOVALS {
                        self.foreign_warning(&name, &reason, false, warnings);
                        return Locked::Unavailable;
                    }
                    removals += 1;
                    let len = len.to_string();
                    let removed = self.script(
                        &redis::Script::new(DEL_IF_SEEN),
                        &[&name],
                        &[
                            &prefix,
                            len.as_bytes(),
                            if not_string { b"1" } else { b"0" },
                        ],
                    );
                    self.foreign_warning(&name, &reason, removed.is_ok(), warnings);
                    if let Err(e) = removed {
                        note(warnings, e);
                        return Locked::Unavailable;
                    }
                    continue;
                }
                Ok(Seen::Held(t, claim)) => Some((t, claim)),
            };
            // Its holder compiles no longer than the compile timeout from the token's issue
            // time (clocks apart by the margin at most): no waiting past that, whatever the
            // wait left.
            let until = match &held {
                Some((_, claim)) => {
                    let allowed = claim
                        .issued_ms
                        .saturating_add(millis(wait))
                        .saturating_add(millis(LOCK_CLOCK_SKEW));
                    let left = allowed.saturating_sub(crate::cache::remote::now_ms());
                    Instant::now()
                        .checked_add(Duration::from_millis(left))
                        .map_or(deadline, |t| t.min(deadline))
                }
                None => deadline,
            };
            if poll() {
                return Locked::Found;
            }
            if self.inner.client.is_down() {
                return Locked::Unavailable;
            }
            let now = Instant::now();
            if now >= until {
                if let Some((t, _)) = held {
                    // Its holder compiled for longer than this wait (the compile timeout):
                    // stopped, or stuck. Not waited for again, here or elsewhere.
                    let mut stale = STALE.lock();
                    if stale.len() >= MAX_STALE {
                        stale.clear();
                    }
                    stale.insert(self.stale_key(&name, &t));
                    drop(stale);
                    let _ = self.script(&redis::Script::new(RELEASE), &[&name], &[t.as_slice()]);
                }
                return Locked::TimedOut;
            }
            std::thread::sleep(self.config().lock_poll.min(until - now));
        }
    }

    fn stale_key(&self, name: &str, token: &[u8]) -> String {
        format!(
            "{}#{name}#{}",
            self.config().redacted_url(),
            String::from_utf8_lossy(token)
        )
    }

    /// Looks at the lock `name` that a `SET NX` found taken: its length, its first
    /// [`SEEN_BYTES`] bytes and its expiry, in one round trip; judged for a process that waits
    /// at most `wait` (the compile timeout).
    fn inspect(&self, name: &str, wait: Duration) -> Result<Seen, OpError> {
        let got: Result<(u64, Vec<u8>, i64), OpError> = self.inner.client.run(0, |c| {
            redis::pipe()
                .cmd("STRLEN")
                .arg(name)
                .cmd("GETRANGE")
                .arg(name)
                .arg(0)
                .arg(SEEN_BYTES - 1)
                .cmd("PTTL")
                .arg(name)
                .query(c)
        });
        let (len, prefix, left_ms) = match got {
            Err(e) if e.code() == Some("WRONGTYPE") => {
                return Ok(Seen::Foreign {
                    prefix: Vec::new(),
                    len: 0,
                    not_string: true,
                    reason: "not a string (another Redis type under the lock's name)".into(),
                })
            }
            Err(e) => return Err(e),
            Ok((_, _, -2)) => return Ok(Seen::Gone),
            Ok(got) => got,
        };
        let key = self.config().signing_key.as_deref();
        let lock_ttl = millis(self.config().lock_ttl);
        let skew = millis(LOCK_CLOCK_SKEW);
        // The longest a holder can hold a lock after it took it: it compiles for the compile
        // timeout at most, renewing it, then dies at worst, leaving it for its lifetime.
        let longest = millis(wait).saturating_add(lock_ttl).saturating_add(skew);
        let now = crate::cache::remote::now_ms();
        let secs = |ms: u64| ms as f64 / 1000.0;
        let claim = if len > SEEN_BYTES {
            Err(format!("{len} bytes, no hipjit lock token"))
        } else {
            match signing::check_lock_token(key, name.as_bytes(), &prefix) {
                Err(why) => Err(why.to_string()),
                Ok(c) if c.ttl_ms > lock_ttl => Err(format!(
                    "its token claims a lifetime of {} ms, longer than the {lock_ttl} ms hipjit \
                     takes its locks for (lock_ttl)",
                    c.ttl_ms
                )),
                Ok(_) if left_ms < 0 => {
                    Err("it has no expiry (hipjit's locks always expire)".to_string())
                }
                Ok(c) if left_ms as u64 > c.ttl_ms => Err(format!(
                    "it expires in {left_ms} ms, later than the {} ms its token was taken for",
                    c.ttl_ms
                )),
                Ok(c) if c.issued_ms > now.saturating_add(skew) => Err(format!(
                    "its token was issued in the future, by more than the {} s clock-skew \
                     margin (check the nodes' clocks)",
                    secs(skew)
                )),
                Ok(c) if now - c.issued_ms.min(now) > longest => Err(format!(
                    "its token was issued longer ago than any holder holds the lock (the \
                     {} s compile timeout, the {} s lock lifetime and a {} s clock-skew \
                     margin): replayed, or the nodes' clocks disagree",
                    secs(millis(wait)),
                    secs(lock_ttl),
                    secs(skew)
                )),
                Ok(_) if STALE.lock().contains(&self.stale_key(name, &prefix)) => Err(
                    "its token already held this lock for a whole wait of this process (its \
                     holder compiled for longer than the compile timeout)"
                        .to_string(),
                ),
                Ok(c) => Ok(c),
            }
        };
        Ok(match claim {
            Ok(claim) => Seen::Held(prefix, claim),
            Err(reason) => Seen::Foreign {
                prefix,
                len,
                not_string: false,
                reason,
            },
        })
    }

    /// Warns (once per lock name and reason in this process) about a value under the lock
    /// `name` that is not a lock to wait for.
    fn foreign_warning(&self, name: &str, reason: &str, removed: bool, warnings: &mut Vec<String>) {
        let shown = format!("{}#{name}", self.config().redacted_url());
        tracing::warn!(lock = %shown, %reason, removed, "not a hipjit cluster lock");
        if !crate::cache::remote::first_warning(format!("{shown} {reason}")) {
            return;
        }
        let fate = if removed {
            "removed at once"
        } else {
            "compiling without the lock"
        };
        warnings.push(format!(
            "ignored the cluster compile lock {shown}: {reason} ({fate}); check that nothing \
             else writes keys under hipjit's namespace, and that HIPJIT_REMOTE_CACHE_KEY is \
             the same on every node"
        ));
    }

    fn renew_once(&self, name: &str, token: &str) -> Result<i64, OpError> {
        let ttl = self.config().lock_ttl.as_millis().to_string();
        self.script(
            &redis::Script::new(RENEW),
            &[name],
            &[token.as_bytes(), ttl.as_bytes()],
        )
    }

    fn guard(&self, name: String, token: String) -> RedisLockGuard {
        let (stop, stopped) = mpsc::channel::<()>();
        let cache = self.clone();
        let (n, t) = (name.clone(), token.clone());
        let every = self.config().lock_renew;
        let renewer = std::thread::Builder::new()
            .name("hipjit-lock-renew".into())
            .spawn(move || {
                while let Err(mpsc::RecvTimeoutError::Timeout) = stopped.recv_timeout(every) {
                    match cache.renew_once(&n, &t) {
                        Ok(1) => {}
                        Ok(_) => {
                            tracing::debug!(lock = %n, "the cluster lock expired while held");
                            break;
                        }
                        Err(_) => {}
                    }
                }
            })
            .ok();
        RedisLockGuard {
            store: self.clone(),
            name,
            token,
            stop: Some(stop),
            renewer,
        }
    }
}

/// `d` in whole milliseconds, at most `u64::MAX`.
fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

fn note(warnings: &mut Vec<String>, e: OpError) {
    if let OpError::Lost(Some(w)) = e {
        warnings.push(w);
    }
}

impl Drop for RedisLockGuard {
    fn drop(&mut self) {
        drop(self.stop.take());
        if let Some(t) = self.renewer.take() {
            let _ = t.join();
        }
        let _ = self.store.script(
            &redis::Script::new(RELEASE),
            &[&self.name],
            &[self.token.as_bytes()],
        );
    }
}
