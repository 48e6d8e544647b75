//! Compile once per cluster: the remote compile lock of a direct key.
//!
//! `SET N:F:l:<direct> <token> NX PX <lock_ttl>` with a random 128-bit token takes it; while
//! the compile runs, a thread renews it every [`RemoteConfig::lock_renew`] with a Lua
//! compare-and-`PEXPIRE` (only while it still holds this token); dropping the guard releases it
//! with a Lua compare-and-`DEL`. A process that dies holding it leaves a lock that expires
//! after [`RemoteConfig::lock_ttl`].
//!
//! A process that finds the lock taken waits for the holder's entry, looking for it every
//! [`RemoteConfig::lock_poll`], up to the wait it was given (the JIT: the compile timeout), and
//! compiles itself when the lock expires (it takes it), the wait runs out, or the server goes
//! away. Where the server refuses `EVAL`, there is no lock (said once).
//!
//! [`RemoteConfig::lock_renew`]: super::RemoteConfig::lock_renew
//! [`RemoteConfig::lock_ttl`]: super::RemoteConfig::lock_ttl
//! [`RemoteConfig::lock_poll`]: super::RemoteConfig::lock_poll

use std::sync::atomic::Ordering;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use super::client::OpError;
use super::RemoteCache;
use crate::cache::key::{hex, CacheKey};

const RENEW: &str = "if redis.call('GET', KEYS[1]) == ARGV[1] then \
     return redis.call('PEXPIRE', KEYS[1], ARGV[2]) end return 0";
const RELEASE: &str = "if redis.call('GET', KEYS[1]) == ARGV[1] then \
     return redis.call('DEL', KEYS[1]) end return 0";

/// A held cluster lock; renewed by a thread until dropped, then released.
#[derive(Debug)]
pub struct ClusterLockGuard {
    cache: RemoteCache,
    name: String,
    token: String,
    stop: Option<mpsc::Sender<()>>,
    renewer: Option<std::thread::JoinHandle<()>>,
}

/// What [`RemoteCache::lock`] got.
#[derive(Debug)]
pub enum ClusterLock<T> {
    /// The lock: compile, publish, then drop it.
    Held(ClusterLockGuard),
    /// Another process published the entry while this one waited: what the poll returned.
    Found(T),
    /// The lock stayed taken for the whole wait: compile without it.
    TimedOut,
    /// No lock can be had (the server is down, or refuses `EVAL`): compile without it.
    Unavailable,
}

fn token() -> String {
    let mut b = [0u8; 16];
    if getrandom::fill(&mut b).is_err() {
        // No OS randomness: time and process make a token unique enough for a lock that
        // only saves work (correctness rests on SET NX of immutable entries).
        let t = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos());
        b.copy_from_slice(
            &crate::cache::key::sha256(format!("{t}-{}", std::process::id()).as_bytes())[..16],
        );
    }
    hex(&b)
}

impl RemoteCache {
    /// Takes the cluster lock of `direct`, waiting at most `wait`; while it is taken by
    /// another process, `poll` is called every [`super::RemoteConfig::lock_poll`] and a
    /// `Some` it returns ends the wait ([`ClusterLock::Found`]). Warnings (the outage, once;
    /// the server's refusal of `EVAL`, once per tier) are appended to `warnings`.
    pub fn lock<T>(
        &self,
        direct: &CacheKey,
        wait: Duration,
        warnings: &mut Vec<String>,
        poll: impl FnMut() -> Option<T>,
    ) -> ClusterLock<T> {
        let got = self.take_lock(direct, wait, warnings, poll);
        self.take_notices(warnings);
        got
    }

    fn take_lock<T>(
        &self,
        direct: &CacheKey,
        wait: Duration,
        warnings: &mut Vec<String>,
        mut poll: impl FnMut() -> Option<T>,
    ) -> ClusterLock<T> {
        if self.inner.eval_refused.load(Ordering::SeqCst) {
            return ClusterLock::Unavailable;
        }
        let name = self.name("l", direct);
        let token = token();
        let ttl = self.config().lock_ttl.as_millis() as u64;
        let deadline = Instant::now() + wait;
        let mut probed = false;
        loop {
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
                                return ClusterLock::Unavailable;
                            }
                            note(warnings, e);
                            return ClusterLock::Unavailable;
                        }
                    }
                    let guard = self.guard(name, token);
                    // The holder before this one may have published and released between
                    // this process's last look and its SET: look once more under the lock.
                    if let Some(found) = poll() {
                        drop(guard);
                        return ClusterLock::Found(found);
                    }
                    return ClusterLock::Held(guard);
                }
                Ok(None) => {}
                Err(e) => {
                    note(warnings, e);
                    return ClusterLock::Unavailable;
                }
            }
            probed = true;
            if let Some(found) = poll() {
                return ClusterLock::Found(found);
            }
            if self.is_down() {
                return ClusterLock::Unavailable;
            }
            let now = Instant::now();
            if now >= deadline {
                return ClusterLock::TimedOut;
            }
            std::thread::sleep(self.config().lock_poll.min(deadline - now));
        }
    }

    fn renew_once(&self, name: &str, token: &str) -> Result<i64, OpError> {
        let ttl = self.config().lock_ttl.as_millis().to_string();
        self.script(
            &redis::Script::new(RENEW),
            &[name],
            &[token.as_bytes(), ttl.as_bytes()],
        )
    }

    fn guard(&self, name: String, token: String) -> ClusterLockGuard {
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
        ClusterLockGuard {
            cache: self.clone(),
            name,
            token,
            stop: Some(stop),
            renewer,
        }
    }
}

fn note(warnings: &mut Vec<String>, e: OpError) {
    if let OpError::Lost(Some(w)) = e {
        warnings.push(w);
    }
}

impl Drop for ClusterLockGuard {
    fn drop(&mut self) {
        drop(self.stop.take());
        if let Some(t) = self.renewer.take() {
            let _ = t.join();
        }
        let _ = self.cache.script(
            &redis::Script::new(RELEASE),
            &[&self.name],
            &[self.token.as_bytes()],
        );
    }
}
