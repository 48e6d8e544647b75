//! What the remote tier needs of a server: the [`Store`] trait, the capabilities a store
//! declares ([`Capabilities`]), and the health record every store's connection keeps
//! (`Health`: the back-off after an outage, the tier turned off by a refusal that retrying
//! cannot mend).
//!
//! The tier ([`super::RemoteCache`]) holds everything that is the same for every server:
//! the key names, signing, the checks of what is read, the order manifests are tried in,
//! the bound on them, what a refusal becomes, and the warnings. A store only moves bytes
//! under names. Three operations are required ([`Store::get`] with a size bound,
//! [`Store::put`], [`Store::delete`]); four are capabilities a store declares, and the tier
//! degrades, as stated on each, where one is missing:
//!
//! | capability | what it is | without it |
//! |------------|------------|------------|
//! | [`Capabilities::atomic_create`] | [`Store::create`]: write a value only where none is, with a lifetime, in one step | a plain [`Store::put`]: the last writer wins. Entries are content-addressed (a result key names exactly one set of bytes), so two writers write the same thing and this is safe |
//! | [`Capabilities::compare_and_delete`] | [`Store::delete_if`]: delete a value only while it is still the one read ([`Got::Value::tag`]), or still unreadable | a refused value is not deleted: it stays, never served and reported by each lookup, until this process's next publish of that entry overwrites it (a plain put) or it expires |
//! | [`Capabilities::manifest_merge`] | [`Store::manifests`], [`Store::mark_manifest`], [`Store::delete_manifest_if`], [`Store::publish`]: a direct key's manifests as fields of one record, each written, scored and removed on its own | the manifests of a direct key are one value (one value under the manifests' name) read, changed and written back: two nodes publishing manifests of one direct key at once may lose one of them (it is published again by the next compile that needs it); hits do not renew a manifest's recency |
//! | [`Capabilities::lock`] | [`Store::lock`]: a cluster-wide compile lock with a lifetime | no cross-node single flight: nodes that miss at once each compile (and publish the same entry) |
//!
//! Where a store's capability is lost at run time (Redis refusing `EVAL` for hipjit's user),
//! [`Store::capabilities`] says so from then on, and the tier degrades as in the table.

use std::fmt;
use std::time::{Duration, Instant};

use parking_lot::Mutex;

/// Which optional operations a store can do (see the module documentation for what the tier
/// does without each).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Capabilities {
    /// [`Store::create`]: write only where no value is, atomically, with a lifetime.
    pub atomic_create: bool,
    /// [`Store::delete_if`]: delete only while the value is the one read.
    pub compare_and_delete: bool,
    /// [`Store::manifests`], [`Store::mark_manifest`], [`Store::delete_manifest_if`],
    /// [`Store::publish`]: manifests kept as fields of one record.
    pub manifest_merge: bool,
    /// [`Store::lock`]: the cluster compile lock.
    pub lock: bool,
}

impl Capabilities {
    /// Every capability.
    pub const ALL: Capabilities = Capabilities {
        atomic_create: true,
        compare_and_delete: true,
        manifest_merge: true,
        lock: true,
    };
    /// None: the three required operations only.
    pub const NONE: Capabilities = Capabilities {
        atomic_create: false,
        compare_and_delete: false,
        manifest_merge: false,
        lock: false,
    };
}

/// Why a store operation did not run or did not succeed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StoreError {
    /// The server is unreachable (now, or it was found so less than
    /// [`super::RemoteConfig::retry_after`] ago), or the tier is off: nothing was sent.
    Down,
    /// The connection failed or timed out during this operation; the server is now down. The
    /// message is the one warning of this outage, when this call is the first to see it.
    Lost(Option<String>),
    /// The server replied with an error (`code`: `OOM` for a full server, `NOPERM`, `ERR`,
    /// `WRONGTYPE`...), password scrubbed.
    Server {
        /// The error code, when the reply had one.
        code: Option<String>,
        /// The whole message.
        message: String,
    },
    /// The store does not have the capability this operation needs ([`Capabilities`]).
    Unsupported,
}

impl StoreError {
    /// The server's error code, when it replied with one.
    pub fn code(&self) -> Option<&str> {
        match self {
            StoreError::Server { code, .. } => code.as_deref(),
            _ => None,
        }
    }
}

impl fmt::Display for StoreError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StoreError::Down => f.write_str("the remote cache server is down"),
            StoreError::Lost(Some(w)) => f.write_str(w),
            StoreError::Lost(None) => f.write_str("the connection to the remote cache was lost"),
            StoreError::Server { message, .. } => f.write_str(message),
            StoreError::Unsupported => f.write_str("the remote store cannot do that"),
        }
    }
}

/// What [`Store::get`] found under a name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Got {
    /// No value.
    Missing,
    /// A value longer than the bound asked for (its length), not read.
    TooLong(u64),
    /// Something that is no plain value (another Redis type under the name, say), not read;
    /// what it is, in words.
    NotValue(String),
    /// The value.
    Value {
        /// Its bytes.
        bytes: Vec<u8>,
        /// How long it has left to live; `None` when it does not expire (or the store does
        /// not say).
        ttl_left: Option<Duration>,
        /// The store's fingerprint of these bytes, which [`Store::delete_if`] compares
        /// against (Redis: the SHA-1 its Lua `redis.sha1hex` gives).
        tag: String,
    },
}

/// What [`Store::delete_if`] deletes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unless<'a> {
    /// The value while it still has this [`Got::Value::tag`].
    Same(&'a str),
    /// The value while it is still no plain value, or still longer than this bound.
    Unreadable(u64),
}

/// The names of a direct key's manifests in a store with [`Capabilities::manifest_merge`]:
/// the record of fields, and the recency of each field.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ManifestNames {
    /// The record of manifests (Redis: a hash), one field per stored value.
    pub fields: String,
    /// The recency of each field (Redis: a sorted set scored in ms since the epoch).
    pub recency: String,
}

/// The fields of a manifests record and their values.
pub type Fields = std::collections::HashMap<Vec<u8>, Vec<u8>>;

/// One publish of a result, for a store with [`Capabilities::manifest_merge`]
/// ([`Store::publish`]).
#[derive(Debug, Clone, Copy)]
pub struct Publish<'a> {
    /// The entry's name.
    pub entry: &'a str,
    /// The entry's value.
    pub value: &'a [u8],
    /// Write the entry even where one is (a value there was refused and not removed);
    /// otherwise an entry already there stays.
    pub replace: bool,
    /// The manifests of the direct key.
    pub manifests: &'a ManifestNames,
    /// The manifest's field.
    pub field: &'a [u8],
    /// The manifest's value.
    pub manifest: &'a [u8],
    /// The lifetime of every value written.
    pub ttl: Duration,
    /// Now, in ms since the epoch (the manifest's recency).
    pub now_ms: u64,
    /// The bound on manifests kept ([`super::MAX_MANIFESTS`]): those neither stored nor
    /// matched within `ttl`, then the least recently matched beyond it, are removed.
    pub max_manifests: usize,
}

/// What [`Store::lock`] got.
#[derive(Debug)]
pub enum Locked {
    /// The lock, released when this is dropped.
    Held(Box<dyn HeldLock>),
    /// The poll found what was waited for.
    Found,
    /// The lock stayed taken for the whole wait (and was removed).
    TimedOut,
    /// No lock can be had now.
    Unavailable,
}

/// A held cluster lock: renewed while it lives, released when dropped.
pub trait HeldLock: Send + fmt::Debug {}

/// What a server says about itself ([`Store::info`]); each field `None` or 0 where the store
/// does not say.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct StoreInfo {
    /// The server's version.
    pub version: Option<String>,
    /// Keys in the database, hipjit's and others'.
    pub keys: u64,
    /// Memory used, in bytes.
    pub used_memory: Option<u64>,
    /// The memory limit, in bytes (0: no limit).
    pub max_memory: Option<u64>,
    /// What the server does when full.
    pub policy: Option<String>,
}

/// A server the remote tier keeps values in (see the module documentation). Implementations
/// bound every operation in time, keep a `Health` record (an operation while the server is
/// down fails with `StoreError::Down` without touching the network), and never panic on a
/// server's reply.
pub trait Store: Send + Sync + fmt::Debug {
    /// The server as messages show it: a URL with its password replaced by `***`.
    fn describe(&self) -> String;
    /// The optional operations this store can do now.
    fn capabilities(&self) -> Capabilities;
    /// The value under `name`, unread when longer than `bound` bytes.
    ///
    /// Errors: `StoreError`.
    fn get(&self, name: &str, bound: u64) -> Result<Got, StoreError>;
    /// Writes `value` under `name`, replacing any value there, to live for `ttl` (a store
    /// without expiry keeps it until it is deleted).
    ///
    /// Errors: `StoreError` (`OOM`: the server is full).
    fn put(&self, name: &str, value: &[u8], ttl: Duration) -> Result<(), StoreError>;
    /// Deletes the value under `name`, if any.
    ///
    /// Errors: `StoreError`.
    fn delete(&self, name: &str) -> Result<(), StoreError>;
    /// Renews the lifetime of the values under `names` to `ttl`; a store without expiry does
    /// nothing.
    ///
    /// Errors: `StoreError`.
    fn renew(&self, names: &[&str], ttl: Duration) -> Result<(), StoreError> {
        let _ = (names, ttl);
        Ok(())
    }
    /// Whether the server is known to be down now, or the tier off (`Health::is_down`).
    fn is_down(&self) -> bool {
        false
    }
    /// The last failure met, classified, and its warning (`Health::last_failure`).
    fn last_failure(&self) -> Option<(Failure, String)> {
        None
    }
    /// Warnings the store gives once (a capability lost at run time), taken.
    fn take_notices(&self) -> Vec<String> {
        Vec::new()
    }
    /// What the server says about itself.
    ///
    /// Errors: why it did not answer, as a [`super::Unanswered`] without its URL.
    fn info(&self) -> Result<StoreInfo, super::Unanswered> {
        Err(super::Unanswered {
            failure: None,
            message: format!("{} does not describe itself", self.describe()),
        })
    }

    /// [`Capabilities::atomic_create`]: writes `value` under `name` only where no value is;
    /// `true` when written.
    ///
    /// Errors: `StoreError`; `StoreError::Unsupported` without the capability.
    fn create(&self, name: &str, value: &[u8], ttl: Duration) -> Result<bool, StoreError> {
        let _ = (name, value, ttl);
        Err(StoreError::Unsupported)
    }
    /// [`Capabilities::compare_and_delete`]: deletes the value under `name` while it is still
    /// as `unless` says, atomically; `true` when deleted.
    ///
    /// Errors: `StoreError`; `StoreError::Unsupported` without the capability.
    fn delete_if(&self, name: &str, unless: Unless<'_>) -> Result<bool, StoreError> {
        let _ = (name, unless);
        Err(StoreError::Unsupported)
    }
    /// [`Capabilities::manifest_merge`]: the manifests of `names` and the fields most
    /// recently matched or stored first (fields may be missing from either).
    ///
    /// Errors: `StoreError`; `StoreError::Unsupported` without the capability.
    fn manifests(&self, names: &ManifestNames) -> Result<(Fields, Vec<Vec<u8>>), StoreError> {
        let _ = names;
        Err(StoreError::Unsupported)
    }
    /// [`Capabilities::manifest_merge`]: scores `field` as matched at `now_ms`, where it is
    /// scored already (best effort).
    ///
    /// Errors: `StoreError`; `StoreError::Unsupported` without the capability.
    fn mark_manifest(
        &self,
        names: &ManifestNames,
        field: &[u8],
        now_ms: u64,
    ) -> Result<(), StoreError> {
        let _ = (names, field, now_ms);
        Err(StoreError::Unsupported)
    }
    /// [`Capabilities::manifest_merge`]: removes `field` while it still holds `value`;
    /// `true` when removed.
    ///
    /// Errors: `StoreError`; `StoreError::Unsupported` without the capability.
    fn delete_manifest_if(
        &self,
        names: &ManifestNames,
        field: &[u8],
        value: &[u8],
    ) -> Result<bool, StoreError> {
        let _ = (names, field, value);
        Err(StoreError::Unsupported)
    }
    /// [`Capabilities::manifest_merge`]: writes an entry (unless one is there and
    /// `Publish::replace` is unset) and merges its manifest, removing manifests beyond the
    /// bound, in as few round trips as the store can.
    ///
    /// Errors: `StoreError`; `StoreError::Unsupported` without the capability.
    fn publish(&self, publish: &Publish<'_>) -> Result<(), StoreError> {
        let _ = publish;
        Err(StoreError::Unsupported)
    }
    /// [`Capabilities::lock`]: takes the cluster lock `name`, waiting at most `wait` while
    /// another holds it; `poll` is called while waiting and `true` ends the wait
    /// (`Locked::Found`). Warnings go to `warnings`.
    fn lock(
        &self,
        name: &str,
        wait: Duration,
        warnings: &mut Vec<String>,
        poll: &mut dyn FnMut() -> bool,
    ) -> Locked {
        let _ = (name, wait, warnings, poll);
        Locked::Unavailable
    }
}

/// Why the server could not be used: the class a warning names, and what it asks to check.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Failure {
    /// No connection could be made, or it failed or timed out: an outage, retried after
    /// [`super::RemoteConfig::retry_after`].
    Unreachable,
    /// The server refused the user or password (`WRONGPASS`, `NOAUTH`): the tier is off.
    AuthenticationRefused,
    /// The server refused to `SELECT` the URL's database (out of its `databases` range, a
    /// cluster, an ACL without `SELECT`): the tier is off.
    DatabaseRefused,
    /// The TLS handshake of a `rediss://` URL failed (the peer speaks no TLS, or its
    /// certificate is not trusted for the host): the tier is off. A peer that accepts the
    /// connection but answers no handshake within the timeout is this class too, retried
    /// as an outage (a loaded server may be slow).
    TlsHandshakeFailed,
    /// The peer answered, but not in Redis's protocol (another service on that port): the
    /// tier is off.
    NotRedis,
}

impl Failure {
    /// The class in words, as warnings and `hipjit cache stats` name it.
    pub fn as_str(self) -> &'static str {
        match self {
            Failure::Unreachable => "unreachable",
            Failure::AuthenticationRefused => "authentication refused",
            Failure::DatabaseRefused => "database refused",
            Failure::TlsHandshakeFailed => "TLS handshake failed",
            Failure::NotRedis => "not a Redis server",
        }
    }

    /// What to check, in words.
    pub fn hint(self) -> &'static str {
        match self {
            Failure::Unreachable => {
                "check that the server runs and that this machine can reach that host and port"
            }
            Failure::AuthenticationRefused => {
                "check the user name and password in HIPJIT_REMOTE_CACHE \
                 (redis://user:password@host:port/db) against the server's ACL users or its \
                 requirepass"
            }
            Failure::DatabaseRefused => {
                "check the database number at the end of HIPJIT_REMOTE_CACHE: a server has \
                 databases 0 to its `databases` setting less one (0 to 15 by default), a Redis \
                 Cluster database 0 only, and the user needs the SELECT command"
            }
            Failure::TlsHandshakeFailed => {
                "check that the server speaks TLS on that port (for a server without TLS use \
                 redis://) and that its certificate is issued for that host name by a \
                 certificate authority this machine trusts"
            }
            Failure::NotRedis => {
                "something answered at that address, but not a Redis (or Valkey) server: \
                 check the host and port in HIPJIT_REMOTE_CACHE"
            }
        }
    }
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[derive(Debug, Default)]
struct HealthState {
    /// When the server was last found unreachable, and when to try it again.
    retry_at: Option<Instant>,
    /// Whether this outage was reported.
    warned: bool,
    /// Set when the server refused this tier for good ([`Failure`] other than an outage),
    /// with the warning given.
    off: Option<(Failure, String)>,
    /// The last failure met, and its warning.
    last: Option<(Failure, String)>,
}

/// A store connection's health: an outage makes the server *down* (said once; every
/// operation fails at once without touching the network until [`Health::retry_after`] has
/// passed), and a refusal that retrying cannot mend turns the tier *off* for good (said once,
/// naming the class and what to check; a new `Jit` or process tries again).
#[derive(Debug)]
pub struct Health {
    url: String,
    retry_after: Duration,
    state: Mutex<HealthState>,
}

impl Health {
    /// The health of the server `url` (password masked), retried `retry_after` after an
    /// outage.
    pub fn new(url: String, retry_after: Duration) -> Health {
        Health {
            url,
            retry_after,
            state: Mutex::new(HealthState::default()),
        }
    }

    /// How long after an outage the server is tried again.
    pub fn retry_after(&self) -> Duration {
        self.retry_after
    }

    /// Whether the server is known to be down and not yet due for another try, or the tier is
    /// off.
    pub fn is_down(&self) -> bool {
        let h = self.state.lock();
        h.off.is_some() || h.retry_at.is_some_and(|t| Instant::now() < t)
    }

    /// The last failure met and its warning (the password never in it), when any.
    pub fn last_failure(&self) -> Option<(Failure, String)> {
        self.state.lock().last.clone()
    }

    /// Records a failure: an outage (`retry`) makes the server down until
    /// [`Health::retry_after`] has passed, anything else turns the tier off. Returns the
    /// warning when this is the first failure of this outage, or the one that turned the tier
    /// off. `what` is what went wrong, password already scrubbed.
    pub fn fail(&self, failure: Failure, what: &str, retry: bool) -> Option<String> {
        let mut h = self.state.lock();
        let url = &self.url;
        let w = if retry {
            h.retry_at = Some(Instant::now() + self.retry_after);
            let w = match failure {
                Failure::Unreachable => format!(
                    "the remote cache {url} is unreachable ({what}); working with the local \
                     cache only, trying it again in {} s",
                    self.retry_after.as_secs_f64()
                ),
                _ => format!(
                    "the remote cache {url}: {failure} ({what}); {}; working with the local \
                     cache only, trying it again in {} s",
                    failure.hint(),
                    self.retry_after.as_secs_f64()
                ),
            };
            h.last = Some((failure, w.clone()));
            if h.warned {
                return None;
            }
            h.warned = true;
            w
        } else {
            if h.off.is_some() {
                return None;
            }
            let w = format!(
                "the remote cache {url}: {failure} ({what}); {}. The remote tier is now off \
                 for this cache and is not retried (it cannot succeed until the URL or the \
                 server changes; a new Jit or process tries again); working with the local \
                 cache only",
                failure.hint()
            );
            h.off = Some((failure, w.clone()));
            h.last = Some((failure, w.clone()));
            w
        };
        tracing::warn!("{w}");
        Some(w)
    }

    /// Records a successful operation: an outage is over.
    pub fn mark_up(&self) {
        let mut h = self.state.lock();
        if h.retry_at.take().is_some() && h.warned {
            tracing::info!(url = %self.url, "the remote cache is reachable again");
        }
        h.warned = false;
    }
}
