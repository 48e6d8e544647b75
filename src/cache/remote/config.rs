//! The remote tier's settings: the server's URL (with the password kept out of every message),
//! the signing key, the entry lifetime, the timeouts and the cluster lock's timings.
//! Compiled with or without the `redis` feature, so that a configuration can be read and
//! refused with a clear message when the client is not built in.

use std::fmt;
use std::time::Duration;

/// The variable naming the remote cache: `redis://[user:password@]host:port/db` (or
/// `rediss://...` for TLS), or `http[s]://[user:password@]host[:port]/prefix`; several URLs
/// separated by whitespace are levels, tried in order ([`RemoteConfig::levels_from_env_with`]).
pub const REMOTE_CACHE_ENV: &str = "HIPJIT_REMOTE_CACHE";
/// The variable holding a bearer token sent to an `http[s]://` remote cache whose URL has no
/// user information (`Authorization: Bearer <token>`); never shown in a message.
pub const REMOTE_CACHE_TOKEN_ENV: &str = "HIPJIT_REMOTE_CACHE_TOKEN";
/// The variable holding the secret that signs remote entries (HMAC-SHA256); when set, unsigned
/// and badly signed entries are refused.
pub const REMOTE_CACHE_KEY_ENV: &str = "HIPJIT_REMOTE_CACHE_KEY";

/// The shortest signing key accepted, in bytes.
pub const MIN_SIGNING_KEY_BYTES: usize = 16;

/// The default of [`RemoteConfig::max_value_bytes`]: 64 MiB.
pub const DEFAULT_MAX_VALUE_BYTES: u64 = 64 << 20;

/// A remote cache setting that cannot be used.
#[derive(Debug, Clone, thiserror::Error, PartialEq, Eq)]
#[non_exhaustive]
pub enum RemoteConfigError {
    /// The URL names no store this build knows, or its store cannot read it (a Redis URL:
    /// `redis[s]://[user:password@]host:port/db`).
    #[error("remote cache URL {url}: {reason}")]
    BadUrl {
        /// The URL, password replaced by `***`.
        url: String,
        /// What is wrong.
        reason: String,
    },
    /// The signing key is too short.
    #[error("{REMOTE_CACHE_KEY_ENV}: the signing key has {len} bytes, fewer than the {MIN_SIGNING_KEY_BYTES} required (use 32 random bytes, e.g. `openssl rand -hex 32`)")]
    ShortKey {
        /// Its length in bytes.
        len: usize,
    },
    /// A setting is out of range.
    #[error("remote cache setting {name}: {reason}")]
    BadSetting {
        /// The setting (field of [`RemoteConfig`]).
        name: &'static str,
        /// What is wrong.
        reason: String,
    },
    /// The URL's store is not in this build: hipjit was built without its feature.
    #[error(
        "a remote cache ({url}) is configured, but hipjit was built without its `{feature}` \
         feature"
    )]
    NotBuilt {
        /// The URL, password replaced by `***`.
        url: String,
        /// The cargo feature that builds the store.
        feature: &'static str,
    },
}

/// Settings of the remote cache tier ([`crate::cache::remote`]). Its `Debug` form shows the
/// URL without its password and never the signing key.
#[derive(Clone, PartialEq, Eq)]
pub struct RemoteConfig {
    url: String,
    /// The bearer token of an `http[s]://` store ([`RemoteConfig::with_bearer_token`]).
    bearer_token: Option<String>,
    /// The HMAC-SHA256 key signing every entry and manifest written and checked on every one
    /// read; `None`: entries are not signed, and signatures are not checked.
    pub signing_key: Option<Vec<u8>>,
    /// How long an entry lives in the server after it was written or last hit (refreshed on
    /// each hit). Default 30 days.
    pub ttl: Duration,
    /// The longest a connection may take to be made (TCP, TLS, AUTH, SELECT). Default 200 ms.
    pub connect_timeout: Duration,
    /// The base time allowed for one operation; each operation may also take the time its
    /// payload needs at [`RemoteConfig::bytes_per_second`]. Default 200 ms.
    pub op_timeout: Duration,
    /// The slowest transfer rate an operation is allowed, in bytes per second. Default 10 MB/s.
    pub bytes_per_second: u64,
    /// After the server is found unreachable, how long hipjit works locally before trying it
    /// again. Default 30 s.
    pub retry_after: Duration,
    /// The lifetime of the cluster compile lock (`SET NX PX`); renewed every
    /// [`RemoteConfig::lock_renew`] while the compile runs. Default 30 s. The same on every
    /// node: a lock whose token claims a longer lifetime is not waited for but removed
    /// (`hipjit::cache::remote::lock`).
    pub lock_ttl: Duration,
    /// How often a held cluster lock is renewed. Default 10 s.
    pub lock_renew: Duration,
    /// How often a process waiting for another's compile looks for its entry. Default 100 ms.
    pub lock_poll: Duration,
    /// The largest value read from or written to the server, in bytes (the envelope included).
    /// A longer value under an entry's name is refused unread (a miss: its length is asked
    /// first with `STRLEN`, and it is read with `GETRANGE` up to this bound) and removed or
    /// replaced by the next store; a result longer than this is not stored remotely (said in
    /// its warnings). Default [`DEFAULT_MAX_VALUE_BYTES`] (64 MiB).
    pub max_value_bytes: u64,
    /// The prefix of every key hipjit writes (`<namespace>:<format>:e:<key>`...), so that
    /// several caches can share one database. Default `hipjit`.
    pub namespace: String,
}

impl fmt::Debug for RemoteConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RemoteConfig")
            .field("url", &self.redacted_url())
            .field("signed", &self.signing_key.is_some())
            .field("bearer_token", &self.bearer_token.is_some())
            .field("ttl", &self.ttl)
            .field("connect_timeout", &self.connect_timeout)
            .field("op_timeout", &self.op_timeout)
            .field("bytes_per_second", &self.bytes_per_second)
            .field("retry_after", &self.retry_after)
            .field("lock_ttl", &self.lock_ttl)
            .field("lock_renew", &self.lock_renew)
            .field("lock_poll", &self.lock_poll)
            .field("max_value_bytes", &self.max_value_bytes)
            .field("namespace", &self.namespace)
            .finish()
    }
}

impl RemoteConfig {
    /// Settings for the server at `url` (`redis://[user:password@]host[:port][/db]`, or
    /// `rediss://` for TLS; `http[s]://[user:password@]host[:port][/prefix]`), with the
    /// defaults above and no signing key.
    ///
    /// Errors: [`RemoteConfigError::BadUrl`] naming what is wrong (the password is never in
    /// the message).
    pub fn new(url: impl Into<String>) -> Result<RemoteConfig, RemoteConfigError> {
        let url = url.into();
        check_url(&url)?;
        Ok(RemoteConfig {
            url,
            bearer_token: None,
            signing_key: None,
            ttl: Duration::from_secs(30 * 24 * 3600),
            connect_timeout: Duration::from_millis(200),
            op_timeout: Duration::from_millis(200),
            bytes_per_second: 10_000_000,
            retry_after: Duration::from_secs(30),
            lock_ttl: Duration::from_secs(30),
            lock_renew: Duration::from_secs(10),
            lock_poll: Duration::from_millis(100),
            max_value_bytes: DEFAULT_MAX_VALUE_BYTES,
            namespace: "hipjit".into(),
        })
    }

    /// Sets the signing key.
    ///
    /// Errors: [`RemoteConfigError::ShortKey`] for a key under [`MIN_SIGNING_KEY_BYTES`].
    pub fn with_signing_key(
        mut self,
        key: impl Into<Vec<u8>>,
    ) -> Result<RemoteConfig, RemoteConfigError> {
        let key = key.into();
        if key.len() < MIN_SIGNING_KEY_BYTES {
            return Err(RemoteConfigError::ShortKey { len: key.len() });
        }
        self.signing_key = Some(key);
        Ok(self)
    }

    /// Sets the bearer token sent to an `http[s]://` store whose URL has no user information
    /// (`Authorization: Bearer <token>`; other stores ignore it). Never shown: `Debug` says
    /// only whether one is set, and messages are scrubbed of it.
    pub fn with_bearer_token(mut self, token: impl Into<String>) -> RemoteConfig {
        self.bearer_token = Some(token.into()).filter(|t| !t.is_empty());
        self
    }

    /// The bearer token, for the HTTP client only, never for a message.
    #[cfg_attr(not(feature = "http"), allow(dead_code))]
    pub(crate) fn bearer_token(&self) -> Option<&str> {
        self.bearer_token.as_deref()
    }

    /// The settings named by [`REMOTE_CACHE_ENV`], [`REMOTE_CACHE_KEY_ENV`] and
    /// [`REMOTE_CACHE_TOKEN_ENV`] (read through `var`): the first level when the URL variable
    /// lists several ([`RemoteConfig::levels_from_env_with`]); `None` when it is unset or
    /// empty.
    ///
    /// Errors: as [`RemoteConfig::levels_from_env_with`].
    pub fn from_env_with(
        var: impl Fn(&str) -> Option<std::ffi::OsString>,
    ) -> Result<Option<RemoteConfig>, RemoteConfigError> {
        Ok(Self::levels_from_env_with(var)?.into_iter().next())
    }

    /// Every level [`REMOTE_CACHE_ENV`] lists (URLs separated by whitespace; a `,` is part of
    /// a URL), in order, fastest first: each with the signing key of [`REMOTE_CACHE_KEY_ENV`]
    /// and the bearer token of [`REMOTE_CACHE_TOKEN_ENV`]. Empty when the variable is unset,
    /// empty or blank.
    ///
    /// Errors: as [`RemoteConfig::new`] (for the first URL that is wrong) and
    /// [`RemoteConfig::with_signing_key`].
    pub fn levels_from_env_with(
        var: impl Fn(&str) -> Option<std::ffi::OsString>,
    ) -> Result<Vec<RemoteConfig>, RemoteConfigError> {
        let Some(urls) = var(REMOTE_CACHE_ENV).filter(|v| !v.is_empty()) else {
            return Ok(Vec::new());
        };
        let urls = urls.into_string().map_err(|v| RemoteConfigError::BadUrl {
            url: redact(&v.to_string_lossy()),
            reason: "not UTF-8".into(),
        })?;
        let key = var(REMOTE_CACHE_KEY_ENV).filter(|v| !v.is_empty());
        let token = var(REMOTE_CACHE_TOKEN_ENV)
            .filter(|v| !v.is_empty())
            .map(|t| {
                t.into_string().map_err(|_| RemoteConfigError::BadSetting {
                    name: "bearer_token",
                    reason: format!("{REMOTE_CACHE_TOKEN_ENV} is not UTF-8"),
                })
            })
            .transpose()?;
        let mut levels = Vec::new();
        for url in urls.split_whitespace() {
            let mut config = RemoteConfig::new(url)?;
            if let Some(key) = &key {
                use std::os::unix::ffi::OsStrExt;
                config = config.with_signing_key(key.as_bytes().to_vec())?;
            }
            if let Some(token) = &token {
                config = config.with_bearer_token(token.clone());
            }
            levels.push(config);
        }
        Ok(levels)
    }

    /// [`RemoteConfig::from_env_with`] over the process environment.
    ///
    /// Errors: as [`RemoteConfig::from_env_with`].
    pub fn from_env() -> Result<Option<RemoteConfig>, RemoteConfigError> {
        Self::from_env_with(|k| std::env::var_os(k))
    }

    /// The URL as given, password included: for the client only, never for a message.
    #[cfg_attr(not(any(feature = "redis", feature = "http")), allow(dead_code))]
    pub(crate) fn secret_url(&self) -> &str {
        &self.url
    }

    /// The URL with its password replaced by `***`: what logs, `hipjit doctor` and JSON show.
    pub fn redacted_url(&self) -> String {
        redact(&self.url)
    }

    /// The password of the URL, when it has one (to scrub from a client library's messages).
    #[cfg_attr(not(any(feature = "redis", feature = "http")), allow(dead_code))]
    pub(crate) fn password(&self) -> Option<&str> {
        let (_, rest) = self.url.split_once("://")?;
        let authority = rest.split(['/', '?', '#']).next()?;
        let (userinfo, _) = authority.rsplit_once('@')?;
        match userinfo.split_once(':') {
            Some((_, p)) if !p.is_empty() => Some(p),
            None if !userinfo.is_empty() => Some(userinfo),
            _ => None,
        }
    }

    /// The URL's host (without the brackets of an IPv6 address) and port (when none is given:
    /// 6379, or 80 for `http://` and 443 for `https://`).
    pub fn host_port(&self) -> Option<(String, u16)> {
        let (_, rest) = self.url.split_once("://")?;
        let end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
        let authority = &rest[..end];
        let host_port = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
        let (host, port) = if let Some(v6) = host_port.strip_prefix('[') {
            let (h, after) = v6.split_once(']')?;
            (h, after.strip_prefix(':'))
        } else {
            match host_port.rsplit_once(':') {
                Some((h, p)) => (h, Some(p)),
                None => (host_port, None),
            }
        };
        let port = match (port, self.scheme()) {
            (Some(p), _) => p.parse().ok()?,
            (None, "http") => 80,
            (None, "https") => 443,
            (None, _) => 6379,
        };
        Some((host.to_string(), port))
    }

    /// The URL's scheme (`redis`, `rediss`, `memory`...): which store it names
    /// ([`super::open_store`]).
    pub fn scheme(&self) -> &str {
        self.url.split_once("://").map_or("", |(s, _)| s)
    }

    /// What follows the scheme's `://` (for `memory://<name>`, the name).
    #[cfg_attr(not(feature = "testing"), allow(dead_code))]
    pub(crate) fn host(&self) -> &str {
        self.url.split_once("://").map_or("", |(_, r)| r)
    }

    /// Whether the URL asks for TLS (`rediss://`, `https://`).
    pub fn tls(&self) -> bool {
        self.url.starts_with("rediss://") || self.url.starts_with("https://")
    }

    /// `text` with the password (and its percent-decoded form) and the bearer token replaced
    /// by `***`.
    #[cfg_attr(not(any(feature = "redis", feature = "http")), allow(dead_code))]
    pub(crate) fn scrub(&self, text: &str) -> String {
        let mut out = text.to_string();
        if let Some(p) = self.password() {
            out = out.replace(p, "***");
            let decoded = percent_decode(p);
            if decoded != p && !decoded.is_empty() {
                out = out.replace(&decoded, "***");
            }
        }
        if let Some(t) = self.bearer_token() {
            out = out.replace(t, "***");
        }
        out
    }

    /// Checks the durations and rates.
    ///
    /// Errors: [`RemoteConfigError::BadSetting`] naming the field.
    pub fn validate(&self) -> Result<(), RemoteConfigError> {
        let bad = |name, reason: &str| {
            Err(RemoteConfigError::BadSetting {
                name,
                reason: reason.into(),
            })
        };
        if self.connect_timeout.is_zero() {
            return bad("connect_timeout", "must be more than zero");
        }
        if self.op_timeout.is_zero() {
            return bad("op_timeout", "must be more than zero");
        }
        if self.bytes_per_second == 0 {
            return bad("bytes_per_second", "must be more than zero");
        }
        if self.ttl < Duration::from_secs(1) {
            return bad("ttl", "must be at least one second");
        }
        if self.lock_ttl < Duration::from_millis(10) {
            return bad("lock_ttl", "must be at least 10 ms");
        }
        if self.lock_renew.is_zero() || self.lock_renew >= self.lock_ttl {
            return bad(
                "lock_renew",
                "must be more than zero and shorter than lock_ttl",
            );
        }
        if self.lock_poll.is_zero() {
            return bad("lock_poll", "must be more than zero");
        }
        if self.max_value_bytes < 1 << 10 {
            return bad("max_value_bytes", "must be at least 1024 bytes");
        }
        if self.namespace.is_empty()
            || !self
                .namespace
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"-_.:".contains(&b))
        {
            return bad(
                "namespace",
                "must be non-empty ASCII letters, digits, '-', '_', '.' or ':'",
            );
        }
        Ok(())
    }

    /// The time allowed for an operation moving `bytes` bytes: [`RemoteConfig::op_timeout`]
    /// plus the bytes at [`RemoteConfig::bytes_per_second`].
    pub fn timeout_for(&self, bytes: usize) -> Duration {
        self.op_timeout
            + Duration::from_secs_f64(bytes as f64 / self.bytes_per_second.max(1) as f64)
    }
}

/// `url` with the password of its user information replaced by `***` (a lone user name is
/// taken for a password, as Redis's `redis://secret@host` form is), and the value of a
/// `password`/`pass`/`pwd` query parameter too. The user information runs to the last `@`, so
/// a password holding an unencoded `/`, `?` or `#` is masked whole, never cut at that byte.
pub fn redact(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_string();
    };
    let (userinfo, tail) = match rest.rfind('@') {
        Some(at) => {
            let info = &rest[..at];
            let masked = match info.split_once(':') {
                Some((user, _)) if !user.contains(['/', '?', '#']) => format!("{user}:***@"),
                _ => "***@".to_string(),
            };
            (masked, &rest[at + 1..])
        }
        None => (String::new(), rest),
    };
    format!("{scheme}://{userinfo}{}", redact_query(tail))
}

/// `tail` (what follows the user information) with the values of password query parameters
/// replaced by `***`.
fn redact_query(tail: &str) -> String {
    let Some((before, query)) = tail.split_once('?') else {
        return tail.to_string();
    };
    let (query, fragment) = match query.split_once('#') {
        Some((q, f)) => (q, Some(f)),
        None => (query, None),
    };
    let params: Vec<String> = query
        .split('&')
        .map(|kv| match kv.split_once('=') {
            Some((k, _))
                if ["password", "pass", "pwd"]
                    .iter()
                    .any(|p| k.eq_ignore_ascii_case(p)) =>
            {
                format!("{k}=***")
            }
            _ => kv.to_string(),
        })
        .collect();
    let mut out = format!("{before}?{}", params.join("&"));
    if let Some(f) = fragment {
        out.push('#');
        out.push_str(f);
    }
    out
}

#[cfg_attr(not(any(feature = "redis", feature = "http")), allow(dead_code))]
pub(crate) fn percent_decode(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' && i + 2 < b.len() {
            let digits = std::str::from_utf8(&b[i + 1..i + 3]).ok();
            if let Some(v) = digits.and_then(|d| u8::from_str_radix(d, 16).ok()) {
                out.push(v);
                i += 3;
                continue;
            }
        }
        out.push(b[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn check_url(url: &str) -> Result<(), RemoteConfigError> {
    let bad = |reason: &str| RemoteConfigError::BadUrl {
        url: redact(url),
        reason: reason.into(),
    };
    let Some((scheme, rest)) = url.split_once("://") else {
        return Err(bad("no scheme"));
    };
    match super::url_shape(scheme) {
        Some(super::UrlShape::Name) if !rest.is_empty() => return Ok(()),
        Some(super::UrlShape::Name) => return Err(bad("no name after the scheme")),
        Some(super::UrlShape::Authority | super::UrlShape::Path) => {}
        None => {
            return Err(bad(&format!(
                "scheme {scheme:?} names no remote store; it takes {} (Unix sockets are not \
                 supported)",
                super::SCHEMES.join(", ")
            )))
        }
    }
    // Past the scheme, the authority form every such store reads.
    let bad = |reason: &str| RemoteConfigError::BadUrl {
        url: redact(url),
        reason: format!("{reason} (expected {scheme}://[user:password@]host[:port][/path])"),
    };
    // A '/', '?' or '#' before the last '@' would end the authority inside the password, and
    // a message naming what follows would show part of it: refused without echoing it.
    if rest
        .rfind('@')
        .is_some_and(|at| rest[..at].contains(['/', '?', '#']))
    {
        return Err(bad(
            "the user information holds an unencoded '/', '?' or '#' (percent-encode them as \
             %2F, %3F, %23)",
        ));
    }
    let end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let (authority, tail) = rest.split_at(end);
    let host_port = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
    let (host, port) = if let Some(v6) = host_port.strip_prefix('[') {
        let (h, after) = v6
            .split_once(']')
            .ok_or_else(|| bad("unclosed '[' in the host"))?;
        (h, after.strip_prefix(':'))
    } else {
        match host_port.rsplit_once(':') {
            Some((h, p)) => (h, Some(p)),
            None => (host_port, None),
        }
    };
    if host.is_empty() {
        return Err(bad("no host"));
    }
    if let Some(p) = port {
        if p.parse::<u16>().map_or(true, |p| p == 0) {
            return Err(bad(&format!("port {p:?} is not a number from 1 to 65535")));
        }
    }
    let db = tail.strip_prefix('/').unwrap_or("");
    let db = db.split(['?', '#']).next().unwrap_or("");
    if super::url_shape(scheme) == Some(super::UrlShape::Authority)
        && !db.is_empty()
        && db.parse::<u32>().is_err()
    {
        return Err(bad(&format!("database {db:?} is not a number")));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_password_never_shows() {
        let c = RemoteConfig::new("redis://user:s3cr%40t@cache.example:6380/2").unwrap();
        assert_eq!(c.redacted_url(), "redis://user:***@cache.example:6380/2");
        let debug = format!("{c:?}");
        assert!(!debug.contains("s3cr"), "{debug}");
        assert_eq!(
            c.scrub("auth s3cr@t failed for s3cr%40t"),
            "auth *** failed for ***"
        );
        let c = RemoteConfig::new("rediss://hunter2@h/0").unwrap();
        assert_eq!(c.redacted_url(), "rediss://***@h/0");
        assert!(c.tls());
        assert_eq!(redact("redis://h:1/0"), "redis://h:1/0");
        for (url, secret) in [
            ("redis://u:S3cretPW/x@127.0.0.1:1/0", "S3cretPW"),
            ("redis://u:S3cretPW#frag@127.0.0.1:1/0", "S3cretPW"),
            ("redis://u:pw?S3cretPW@127.0.0.1:1/0", "S3cretPW"),
            ("redis://u:pw@127.0.0.1:1/0?password=S3cretPW", "S3cretPW"),
            ("redis://127.0.0.1:1/0?db=1&PASS=S3cretPW#x", "S3cretPW"),
        ] {
            assert!(!redact(url).contains(secret), "{url} -> {}", redact(url));
            if let Err(e) = RemoteConfig::new(url) {
                assert!(!e.to_string().contains(secret), "{url}: {e}");
            }
        }
    }

    #[test]
    fn host_and_port_are_read_from_the_url() {
        let hp = |u: &str| RemoteConfig::new(u).unwrap().host_port();
        assert_eq!(hp("redis://u:p@h:7000/1"), Some(("h".into(), 7000)));
        assert_eq!(hp("rediss://h"), Some(("h".into(), 6379)));
        assert_eq!(hp("redis://[::1]:6380/0"), Some(("::1".into(), 6380)));
        assert_eq!(hp("redis://[::1]/0"), Some(("::1".into(), 6379)));
    }

    #[test]
    fn bad_urls_are_named() {
        for (url, what) in [
            ("ftp://h:1", "scheme"),
            ("http://", "no host"),
            ("redis://", "no host"),
            ("redis://u:pw@h:99999/0", "port"),
            ("redis://h:1/x", "database"),
            ("h:1", "no scheme"),
        ] {
            let e = RemoteConfig::new(url).unwrap_err().to_string();
            assert!(e.contains(what), "{url}: {e}");
            assert!(!e.contains(":pw@"), "{e}");
        }
    }

    #[test]
    fn env_reads_url_and_key() {
        let env = |url: &'static str, key: &'static str| {
            move |k: &str| match k {
                REMOTE_CACHE_ENV => Some(url.into()),
                REMOTE_CACHE_KEY_ENV => Some(key.into()),
                _ => None,
            }
        };
        assert!(RemoteConfig::from_env_with(env("", "")).unwrap().is_none());
        let c = RemoteConfig::from_env_with(env("redis://h:1/0", "0123456789abcdef0123"))
            .unwrap()
            .unwrap();
        assert_eq!(c.signing_key.as_deref(), Some(&b"0123456789abcdef0123"[..]));
        assert!(matches!(
            RemoteConfig::from_env_with(env("redis://h:1/0", "short")),
            Err(RemoteConfigError::ShortKey { len: 5 })
        ));
    }

    #[test]
    fn timeouts_grow_with_size() {
        let c = RemoteConfig::new("redis://h").unwrap();
        assert_eq!(c.timeout_for(0), Duration::from_millis(200));
        assert_eq!(c.timeout_for(10_000_000), Duration::from_millis(1200));
        let mut bad = c.clone();
        bad.lock_renew = bad.lock_ttl;
        assert!(bad
            .validate()
            .unwrap_err()
            .to_string()
            .contains("lock_renew"));
    }
}
