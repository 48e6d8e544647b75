//! The connection to the server: a small pool of blocking connections (the `redis` crate),
//! each operation bounded by a timeout that grows with its payload, and the tier's health.
//!
//! A failure is classified ([`Failure`]). An outage (the server unreachable, a connection
//! lost or timed out) makes the server *down*: the tier says so once, every operation fails at
//! once without touching the network, and the server is tried again after
//! [`RemoteConfig::retry_after`]. A refusal that retrying cannot mend (the password or user
//! refused, the database refused, a TLS handshake that failed, a peer that is no Redis
//! server) turns the tier *off* for the rest of its life: said once, naming the class and
//! what to check, and never retried (a new `Jit`, or a new process, tries again).

use std::time::{Duration, Instant};

use parking_lot::Mutex;

use super::config::RemoteConfig;

/// Why an operation did not run or did not succeed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OpError {
    /// The server is unreachable (now, or it was found so less than
    /// [`RemoteConfig::retry_after`] ago): nothing was sent.
    Down,
    /// The connection failed or timed out during this operation; the server is now down. The
    /// message is the one warning of this outage, when this call is the first to see it.
    Lost(Option<String>),
    /// The server replied with an error (`code`: `OOM`, `NOPERM`, `ERR`...), password scrubbed.
    Server {
        /// The error code, when the reply had one.
        code: Option<String>,
        /// The whole message.
        message: String,
    },
}

impl OpError {
    /// The server's error code, when it replied with one.
    pub fn code(&self) -> Option<&str> {
        match self {
            OpError::Server { code, .. } => code.as_deref(),
            _ => None,
        }
    }
}

impl std::fmt::Display for OpError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            OpError::Down => f.write_str("the remote cache server is down"),
            OpError::Lost(Some(w)) => f.write_str(w),
            OpError::Lost(None) => f.write_str("the connection to the remote cache was lost"),
            OpError::Server { message, .. } => f.write_str(message),
        }
    }
}

/// Why the server could not be used: the class a warning names, and what it asks to check.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Failure {
    /// No connection could be made, or it failed or timed out: an outage, retried after
    /// [`RemoteConfig::retry_after`].
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

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

#[derive(Debug, Default)]
struct Health {
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

/// The client: settings, the `redis` client, idle connections and the health record.
pub struct Client {
    pub(crate) config: RemoteConfig,
    client: redis::Client,
    idle: Mutex<Vec<redis::Connection>>,
    health: Mutex<Health>,
}

impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Client")
            .field("url", &self.config.redacted_url())
            .finish()
    }
}

/// Idle connections kept for reuse.
const MAX_IDLE: usize = 8;

impl Client {
    /// A client for `config`; no connection is made yet.
    ///
    /// Errors: the `redis` crate's refusal of the URL, password scrubbed.
    pub fn new(config: RemoteConfig) -> Result<Client, String> {
        let client =
            redis::Client::open(config.secret_url()).map_err(|e| config.scrub(&e.to_string()))?;
        Ok(Client {
            config,
            client,
            idle: Mutex::new(Vec::new()),
            health: Mutex::new(Health::default()),
        })
    }

    /// Whether the server is known to be down and not yet due for another try, or the tier is
    /// off.
    pub fn is_down(&self) -> bool {
        let h = self.health.lock();
        h.off.is_some() || h.retry_at.is_some_and(|t| Instant::now() < t)
    }

    /// The last failure met and its warning (the password never in it), when any.
    pub fn last_failure(&self) -> Option<(Failure, String)> {
        self.health.lock().last.clone()
    }

    /// Records a failure: an outage (`retry`) makes the server down until
    /// [`RemoteConfig::retry_after`] has passed, anything else turns the tier off. Returns the
    /// warning when this is the first failure of this outage, or the one that turned the tier
    /// off. `what` is what went wrong (the client library's words, password scrubbed here).
    fn fail(&self, failure: Failure, what: &str, retry: bool) -> Option<String> {
        let mut h = self.health.lock();
        self.idle.lock().clear();
        let url = self.config.redacted_url();
        let what = self.config.scrub(what);
        let w = if retry {
            h.retry_at = Some(Instant::now() + self.config.retry_after);
            let w = match failure {
                Failure::Unreachable => format!(
                    "the remote cache {url} is unreachable ({what}); working with the local \
                     cache only, trying it again in {} s",
                    self.config.retry_after.as_secs_f64()
                ),
                _ => format!(
                    "the remote cache {url}: {failure} ({what}); {}; working with the local \
                     cache only, trying it again in {} s",
                    failure.hint(),
                    self.config.retry_after.as_secs_f64()
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

    /// Classifies a failure to connect, and records it ([`Client::fail`]).
    fn connect_failed(&self, e: &redis::RedisError) -> Option<String> {
        let (failure, what, retry) = classify_connect(e, &self.config);
        self.fail(failure, &what, retry)
    }

    fn mark_up(&self) {
        let mut h = self.health.lock();
        if h.retry_at.take().is_some() && h.warned {
            tracing::info!(url = %self.config.redacted_url(), "the remote cache is reachable again");
        }
        h.warned = false;
    }

    /// Runs `op` on a connection with a timeout for `bytes` bytes of payload
    /// ([`RemoteConfig::timeout_for`]).
    ///
    /// Errors: [`OpError`].
    pub fn run<R>(
        &self,
        bytes: usize,
        op: impl FnOnce(&mut redis::Connection) -> redis::RedisResult<R>,
    ) -> Result<R, OpError> {
        if self.is_down() {
            return Err(OpError::Down);
        }
        let pooled = self.idle.lock().pop();
        let mut conn = match pooled {
            Some(c) => c,
            None => match self
                .client
                .get_connection_with_timeout(self.config.connect_timeout)
            {
                Ok(c) => c,
                Err(e) => return Err(OpError::Lost(self.connect_failed(&e))),
            },
        };
        let timeout = self.config.timeout_for(bytes);
        let set = conn
            .set_read_timeout(Some(timeout))
            .and_then(|()| conn.set_write_timeout(Some(timeout)));
        if let Err(e) = set {
            return Err(OpError::Lost(self.fail(
                Failure::Unreachable,
                &e.to_string(),
                true,
            )));
        }
        let started = Instant::now();
        match op(&mut conn) {
            Ok(r) => {
                self.mark_up();
                self.give_back(conn);
                Ok(r)
            }
            // A server that wants a password the URL does not give answers every command
            // with NOAUTH (no AUTH is sent when the URL has no password).
            Err(e) if is_auth_refusal(&e) => Err(OpError::Lost(self.fail(
                Failure::AuthenticationRefused,
                &e.to_string(),
                false,
            ))),
            // The server answered with an error (for a pipeline, the first failing command's):
            // it is up, whatever it refused (a full server's `OOM` included).
            Err(e) if server_reply_code(&e).is_some() => {
                self.mark_up();
                self.give_back(conn);
                Err(OpError::Server {
                    code: server_reply_code(&e),
                    message: self.config.scrub(&e.to_string()),
                })
            }
            Err(e) => {
                let what = if e.is_timeout() {
                    format!(
                        "no reply within {} ms",
                        started.elapsed().max(timeout).as_millis()
                    )
                } else {
                    e.to_string()
                };
                Err(OpError::Lost(self.fail(Failure::Unreachable, &what, true)))
            }
        }
    }

    fn give_back(&self, conn: redis::Connection) {
        let mut idle = self.idle.lock();
        if idle.len() < MAX_IDLE {
            idle.push(conn);
        }
    }
}

/// The error code of a reply the server sent (`OOM`, `NOPERM`, `ERR`...), for a single command
/// or the first failing command of a pipeline; `None` for an error that is no reply (a lost
/// connection, a timeout).
fn server_reply_code(e: &redis::RedisError) -> Option<String> {
    e.code().map(str::to_owned).or_else(|| {
        e.clone()
            .into_server_errors()
            .and_then(|items| items.first().map(|(_, s)| s.code().to_owned()))
    })
}

/// Whether `e` is the server refusing the user or password.
fn is_auth_refusal(e: &redis::RedisError) -> bool {
    let text = e.to_string();
    e.kind() == redis::ErrorKind::AuthenticationFailed
        || matches!(
            server_reply_code(e).as_deref(),
            Some("NOAUTH" | "WRONGPASS")
        )
        || text.contains("NOAUTH")
        || text.contains("WRONGPASS")
        || text.contains("Authentication required")
}

/// The rustls error inside `e`, when a TLS handshake failed.
fn tls_error(e: &redis::RedisError) -> Option<&rustls::Error> {
    let io = std::error::Error::source(e)?.downcast_ref::<std::io::Error>()?;
    io.get_ref()?.downcast_ref::<rustls::Error>()
}

/// The class of a failure to connect, what went wrong in words, and whether to retry it (an
/// outage). Measured against redis-server 7.0.15 and the `redis` crate (tests/it/remote_cache.rs):
/// a wrong password is `AuthenticationFailed`; no password where one is needed is `NOAUTH` (or
/// "Authentication required" when a `SELECT` comes first); a database out of range is "DB
/// index is out of range"; a non-Redis peer's reply is a parse error; a TLS handshake with a
/// peer speaking something else fails inside rustls ("received corrupt message"), or times
/// out when the peer waits for more (a plain Redis server does).
fn classify_connect(e: &redis::RedisError, config: &RemoteConfig) -> (Failure, String, bool) {
    let text = e.to_string();
    if is_auth_refusal(e) {
        return (Failure::AuthenticationRefused, text, false);
    }
    if text.contains("DB index is out of range")
        || text.contains("SELECT is not allowed")
        || (text.contains("switch database") && text.contains("NOPERM"))
    {
        return (Failure::DatabaseRefused, text, false);
    }
    if e.kind() == redis::ErrorKind::Parse {
        return (
            Failure::NotRedis,
            format!("its reply does not parse: {text}"),
            false,
        );
    }
    if let Some(t) = tls_error(e) {
        return (Failure::TlsHandshakeFailed, t.to_string(), false);
    }
    if e.is_timeout() {
        // Did the peer accept a plain TCP connection? Then it is up and did not answer in
        // time: with TLS, most likely a server without TLS waiting for a command.
        let waited = config.connect_timeout.as_millis();
        if tcp_accepts(config) {
            return if config.tls() {
                (
                    Failure::TlsHandshakeFailed,
                    format!(
                        "the server accepts connections but answered no TLS handshake within \
                         {waited} ms"
                    ),
                    true,
                )
            } else {
                (
                    Failure::Unreachable,
                    format!("the server accepts connections but did not answer within {waited} ms"),
                    true,
                )
            };
        }
        return (
            Failure::Unreachable,
            format!("no connection within {waited} ms"),
            true,
        );
    }
    (Failure::Unreachable, text, true)
}

/// Whether a plain TCP connection to the URL's host and port is accepted within the connect
/// timeout.
fn tcp_accepts(config: &RemoteConfig) -> bool {
    use std::net::ToSocketAddrs;
    let Some((host, port)) = config.host_port() else {
        return false;
    };
    let Ok(mut addrs) = (host.as_str(), port).to_socket_addrs() else {
        return false;
    };
    addrs.next().is_some_and(|a| {
        std::net::TcpStream::connect_timeout(
            &a,
            config.connect_timeout.max(Duration::from_millis(1)),
        )
        .is_ok()
    })
}
