//! The connection to the server: a small pool of blocking connections (the `redis` crate),
//! each operation bounded by a timeout that grows with its payload, and the tier's health:
//! after a failure to connect or a connection lost mid-operation the server is *down*, the
//! tier says so once, every operation fails at once without touching the network, and the
//! server is tried again after [`RemoteConfig::retry_after`].

use std::time::Instant;

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

#[derive(Debug, Default)]
struct Health {
    /// When the server was last found unreachable, and when to try it again.
    retry_at: Option<Instant>,
    /// Whether this outage was reported.
    warned: bool,
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

    /// Whether the server is known to be down and not yet due for another try.
    pub fn is_down(&self) -> bool {
        self.health
            .lock()
            .retry_at
            .is_some_and(|t| Instant::now() < t)
    }

    /// Records the server as unreachable (`what` went wrong); returns the warning when this is
    /// the first failure seen in this outage.
    fn mark_down(&self, what: &str) -> Option<String> {
        let mut h = self.health.lock();
        h.retry_at = Some(Instant::now() + self.config.retry_after);
        self.idle.lock().clear();
        if h.warned {
            return None;
        }
        h.warned = true;
        let w = format!(
            "the remote cache {} is unreachable ({}); working with the local cache only, \
             trying it again in {} s",
            self.config.redacted_url(),
            self.config.scrub(what),
            self.config.retry_after.as_secs_f64()
        );
        tracing::warn!("{w}");
        Some(w)
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
                // Unreachable, or reachable but refusing us (AUTH, SELECT): as unusable.
                Err(e) => return Err(OpError::Lost(self.mark_down(&e.to_string()))),
            },
        };
        let timeout = self.config.timeout_for(bytes);
        let set = conn
            .set_read_timeout(Some(timeout))
            .and_then(|()| conn.set_write_timeout(Some(timeout)));
        if let Err(e) = set {
            return Err(OpError::Lost(self.mark_down(&e.to_string())));
        }
        let started = Instant::now();
        match op(&mut conn) {
            Ok(r) => {
                self.mark_up();
                self.give_back(conn);
                Ok(r)
            }
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
                Err(OpError::Lost(self.mark_down(&what)))
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
