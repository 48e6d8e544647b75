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

use crate::cache::remote::config::RemoteConfig;
use crate::cache::remote::store::{Failure, Health, StoreError as OpError};

/// The client: settings, the `redis` client, idle connections and the health record.
pub struct Client {
    pub(crate) config: RemoteConfig,
    client: redis::Client,
    idle: Mutex<Vec<redis::Connection>>,
    pub(crate) health: Health,
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
            health: Health::new(config.redacted_url(), config.retry_after),
            config,
            client,
            idle: Mutex::new(Vec::new()),
        })
    }

    /// Whether the server is known to be down and not yet due for another try, or the tier is
    /// off.
    pub fn is_down(&self) -> bool {
        self.health.is_down()
    }

    /// The last failure met and its warning (the password never in it), when any.
    pub fn last_failure(&self) -> Option<(Failure, String)> {
        self.health.last_failure()
    }

    /// Records a failure ([`Health::fail`]), dropping the idle connections. `what` is what
    /// went wrong (the client library's words, password scrubbed here).
    fn fail(&self, failure: Failure, what: &str, retry: bool) -> Option<String> {
        self.idle.lock().clear();
        self.health.fail(failure, &self.config.scrub(what), retry)
    }

    /// Classifies a failure to connect, and records it ([`Client::fail`]).
    fn connect_failed(&self, e: &redis::RedisError) -> Option<String> {
        let (failure, what, retry) = classify_connect(e, &self.config);
        self.fail(failure, &what, retry)
    }

    fn mark_up(&self) {
        self.health.mark_up();
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
