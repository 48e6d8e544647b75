//! The HTTP store (feature `http`): `http[s]://[user:password@]host[:port][/prefix]`, what
//! ccache's HTTP storage speaks. A value is the body of a path under the prefix: `GET` reads
//! it (404: none), `PUT` writes it, `DELETE` removes it (where the server allows; 404 and 405
//! count as done, a value that cannot be deleted is left for the tier's fallbacks). nginx's
//! WebDAV module (`dav_methods PUT DELETE; create_full_put_path on;`), bazel-remote and an
//! object store's HTTP gateway serve it.
//!
//! The path of a value: `<prefix>/<name>` (names are ASCII letters, digits and `-_.:`), or with
//! `?layout=bazel` `<prefix>/ac/<sha256 of the name in hex>`, the 64 hex digits bazel-remote's
//! action cache takes.
//!
//! HTTP has no atomic create, no compare-and-delete and no lock: the store declares none of
//! the capabilities ([`Capabilities::NONE`]) and the tier uses its stated fallbacks
//! (`store`). Nor has it expiry: values live until the server removes them (its own size
//! bound, bazel-remote's LRU) or the tier deletes them; [`Store::renew`] does nothing.
//!
//! Bounds: connecting takes at most [`RemoteConfig::connect_timeout`]; the response's
//! headers, and each read of its body, at most [`RemoteConfig::op_timeout`]; the whole
//! operation at most [`RemoteConfig::timeout_for`] its payload (a read: the bound asked
//! for). A value whose `Content-Length` is over the bound is not read
//! ([`Got::TooLong`]); one without a length is read up to the bound and one byte, and refused
//! unread past it. Redirects are not followed (they could carry the credentials elsewhere),
//! and no proxy variable is read.
//!
//! Credentials: basic authentication from the URL's user information (percent-decoded), or
//! else a bearer token ([`RemoteConfig::with_bearer_token`], `HIPJIT_REMOTE_CACHE_TOKEN`);
//! TLS for `https://` through rustls, trusting the system's root certificates (or, where none
//! can be read, the Mozilla roots built in). The user information is never part of the URL
//! the client is given, the `Authorization` header is marked sensitive (ureq's logs redact
//! it), and every message is scrubbed of the password and the token
//! ([`RemoteConfig::scrub`]).

use std::fmt;
use std::io::Read;
use std::time::Duration;

use ureq::http::HeaderValue;
use ureq::Agent;

use super::config::{percent_decode, RemoteConfig, RemoteConfigError};
use super::store::{Capabilities, Failure, Got, Health, Store, StoreError, StoreInfo};
use super::Unanswered;
use crate::cache::key::{hex, sha256};

/// Where a value's path is made from its name.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Layout {
    /// `<prefix>/<name>`.
    Flat,
    /// `<prefix>/ac/<sha256 hex of the name>` (bazel-remote's action cache).
    Bazel,
}

/// The HTTP store (see the module documentation).
pub(crate) struct HttpStore {
    config: RemoteConfig,
    agent: Agent,
    /// `scheme://host[:port][/prefix]`, without user information, query or a final `/`.
    base: String,
    layout: Layout,
    /// The `Authorization` header, marked sensitive.
    auth: Option<HeaderValue>,
    health: Health,
}

impl fmt::Debug for HttpStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HttpStore")
            .field("url", &self.describe())
            .field("layout", &self.layout)
            .field("auth", &self.auth.is_some())
            .finish()
    }
}

/// What an HTTP exchange came to, before the store's operation reads it.
enum Exchange {
    /// A response (any status).
    Response(ureq::http::Response<ureq::Body>),
    /// No response: the failure, its class, and whether it is retried.
    Failed(Failure, String, bool),
}

impl HttpStore {
    /// The store of `config`'s `http[s]://` URL; nothing is sent until the first operation.
    ///
    /// Errors: [`RemoteConfigError::BadUrl`] for a query the store does not know.
    pub(crate) fn new(config: RemoteConfig) -> Result<HttpStore, RemoteConfigError> {
        let bad = |reason: String| RemoteConfigError::BadUrl {
            url: config.redacted_url(),
            reason,
        };
        let url = config.secret_url();
        let (scheme, rest) = url.split_once("://").unwrap_or(("http", url));
        let rest = rest.split('#').next().unwrap_or("");
        let (rest, query) = rest.split_once('?').unwrap_or((rest, ""));
        let (userinfo, rest) = match rest.rfind('@') {
            Some(at) => (Some(&rest[..at]), &rest[at + 1..]),
            None => (None, rest),
        };
        let mut layout = Layout::Flat;
        for kv in query.split('&').filter(|kv| !kv.is_empty()) {
            match kv.split_once('=') {
                Some(("layout", "flat")) => layout = Layout::Flat,
                Some(("layout", "bazel")) => layout = Layout::Bazel,
                _ => {
                    // Named by its parameter only, and the URL shown without its query: the
                    // value may be a secret put in the wrong place.
                    let param = kv.split('=').next().unwrap_or("");
                    return Err(RemoteConfigError::BadUrl {
                        url: super::config::redact(url.split('?').next().unwrap_or("")),
                        reason: format!(
                            "the query parameter {:?} is not one the HTTP store knows \
                             (layout=flat or layout=bazel)",
                            config.scrub(param)
                        ),
                    });
                }
            }
        }
        let base = format!("{scheme}://{}", rest.trim_end_matches('/'));
        let auth = match (userinfo, config.bearer_token()) {
            (Some(info), _) => {
                let (user, password) = info.split_once(':').unwrap_or((info, ""));
                let pair = format!("{}:{}", percent_decode(user), percent_decode(password));
                Some(format!("Basic {}", base64(pair.as_bytes())))
            }
            (None, Some(token)) => Some(format!("Bearer {token}")),
            (None, None) => None,
        };
        let auth = match auth {
            Some(a) => {
                let mut v = HeaderValue::from_str(&a).map_err(|_| {
                    bad("the credentials hold bytes an HTTP header cannot carry".into())
                })?;
                v.set_sensitive(true);
                Some(v)
            }
            None => None,
        };
        let mut tls = ureq::tls::TlsConfig::builder();
        if scheme == "https" {
            let native = rustls_native_certs::load_native_certs();
            let certs: Vec<_> = native
                .certs
                .iter()
                .map(|c| ureq::tls::Certificate::from_der(c.as_ref()).to_owned())
                .collect();
            if !certs.is_empty() {
                tls = tls.root_certs(ureq::tls::RootCerts::new_with_certs(&certs));
            }
        }
        let agent: Agent = Agent::config_builder()
            .http_status_as_error(false)
            .max_redirects(0)
            .proxy(None)
            .timeout_connect(Some(config.connect_timeout))
            .timeout_resolve(Some(config.connect_timeout))
            .timeout_recv_response(Some(config.op_timeout))
            .timeout_per_read(Some(config.op_timeout))
            .timeout_per_write(Some(config.op_timeout))
            .user_agent(format!("hipjit/{}", env!("CARGO_PKG_VERSION")))
            .tls_config(tls.build())
            .build()
            .into();
        Ok(HttpStore {
            health: Health::new(config.redacted_url(), config.retry_after),
            config,
            agent,
            base,
            layout,
            auth,
        })
    }

    /// The URL of the value `name`.
    fn url(&self, name: &str) -> String {
        match self.layout {
            Layout::Flat => {
                let mut out = format!("{}/", self.base);
                for b in name.bytes() {
                    if b.is_ascii_alphanumeric() || b"-_.:~".contains(&b) {
                        out.push(b as char);
                    } else {
                        out.push_str(&format!("%{b:02X}"));
                    }
                }
                out
            }
            Layout::Bazel => format!("{}/ac/{}", self.base, hex(&sha256(name.as_bytes()))),
        }
    }

    /// Runs one exchange: `method` on `url` with `body` (a PUT's), within `timeout` in all.
    fn exchange(
        &self,
        method: &str,
        url: &str,
        body: Option<&[u8]>,
        timeout: Duration,
    ) -> Exchange {
        let result = match (method, body) {
            ("PUT", Some(body)) => self
                .authorized(
                    self.agent
                        .put(url)
                        .config()
                        .timeout_global(Some(timeout))
                        .build(),
                )
                .send(body),
            ("DELETE", _) => self
                .authorized(
                    self.agent
                        .delete(url)
                        .config()
                        .timeout_global(Some(timeout))
                        .build(),
                )
                .call(),
            ("HEAD", _) => self
                .authorized(
                    self.agent
                        .head(url)
                        .config()
                        .timeout_global(Some(timeout))
                        .build(),
                )
                .call(),
            _ => self
                .authorized(
                    self.agent
                        .get(url)
                        .config()
                        .timeout_global(Some(timeout))
                        .build(),
                )
                .call(),
        };
        match result {
            Ok(r) => Exchange::Response(r),
            Err(e) => {
                let (failure, retry) = classify(&e);
                Exchange::Failed(failure, self.config.scrub(&e.to_string()), retry)
            }
        }
    }

    /// `b` with the `Authorization` header, when there are credentials.
    fn authorized<B>(&self, b: ureq::RequestBuilder<B>) -> ureq::RequestBuilder<B> {
        match &self.auth {
            Some(a) => b.header("Authorization", a.clone()),
            None => b,
        }
    }

    /// A failure met: recorded in the health ([`Health::fail`]), as the error to return.
    fn failed(&self, failure: Failure, what: &str, retry: bool) -> StoreError {
        StoreError::Lost(self.health.fail(failure, &self.config.scrub(what), retry))
    }

    /// What a status other than the operation's success becomes: 401 and 403 turn the tier
    /// off (the credentials are refused; retrying cannot mend it) for a read, and are a
    /// server error for a write or delete (a read-only cache); 502, 503 and 504 an outage
    /// (a proxy whose server is gone); anything else a server error naming the status.
    fn status_error(&self, method: &str, status: u16, url: &str) -> StoreError {
        let what = format!("{method} {} answered {status}", self.path_shown(url));
        match status {
            401 | 403 if method == "GET" => {
                self.failed(Failure::AuthenticationRefused, &what, false)
            }
            502..=504 => self.failed(Failure::Unreachable, &what, true),
            _ => StoreError::Server {
                code: Some(status.to_string()),
                message: format!("the remote cache {}: {what}", self.describe()),
            },
        }
    }

    /// The path of `url` as messages show it (never the user information, which `url` has not).
    fn path_shown(&self, url: &str) -> String {
        url.strip_prefix(&self.base)
            .map_or_else(|| url.to_string(), |p| p.to_string())
    }

    /// Fails at once while the server is down (nothing is sent).
    fn up(&self) -> Result<(), StoreError> {
        if self.health.is_down() {
            Err(StoreError::Down)
        } else {
            Ok(())
        }
    }
}

/// The class of a failed exchange, and whether it is retried (an outage) or turns the tier
/// off (a TLS failure other than a timeout).
fn classify(e: &ureq::Error) -> (Failure, bool) {
    match e {
        ureq::Error::Tls(_) | ureq::Error::Rustls(_) | ureq::Error::Pem(_) => {
            (Failure::TlsHandshakeFailed, false)
        }
        ureq::Error::Io(io)
            if io
                .get_ref()
                .is_some_and(|inner| inner.downcast_ref::<rustls::Error>().is_some()) =>
        {
            (Failure::TlsHandshakeFailed, false)
        }
        _ => (Failure::Unreachable, true),
    }
}

/// `bytes` in base64 (RFC 4648, with padding), for basic authentication.
fn base64(bytes: &[u8]) -> String {
    const ABC: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let n = chunk
            .iter()
            .enumerate()
            .fold(0u32, |n, (i, &b)| n | (b as u32) << (16 - 8 * i));
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(ABC[(n >> (18 - 6 * i) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

impl Store for HttpStore {
    fn describe(&self) -> String {
        self.config.redacted_url()
    }

    fn capabilities(&self) -> Capabilities {
        Capabilities::NONE
    }

    fn get(&self, name: &str, bound: u64) -> Result<Got, StoreError> {
        self.up()?;
        let url = self.url(name);
        let timeout = self.config.timeout_for(bound as usize);
        let mut response = match self.exchange("GET", &url, None, timeout) {
            Exchange::Response(r) => r,
            Exchange::Failed(f, what, retry) => return Err(self.failed(f, &what, retry)),
        };
        let status = response.status().as_u16();
        match status {
            200 => {}
            404 | 410 => {
                self.health.mark_up();
                return Ok(Got::Missing);
            }
            s => return Err(self.status_error("GET", s, &url)),
        }
        self.health.mark_up();
        let length = response
            .headers()
            .get("content-length")
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.trim().parse::<u64>().ok());
        if let Some(len) = length.filter(|&l| l > bound) {
            // Not read: the connection is dropped with its body.
            return Ok(Got::TooLong(len));
        }
        let mut bytes = Vec::new();
        let read = response
            .body_mut()
            .as_reader()
            .take(bound + 1)
            .read_to_end(&mut bytes);
        if let Err(e) = read {
            return Err(self.failed(
                Failure::Unreachable,
                &format!("reading {}: {e}", self.path_shown(&url)),
                true,
            ));
        }
        if bytes.len() as u64 > bound {
            return Ok(Got::TooLong(length.unwrap_or(bytes.len() as u64)));
        }
        Ok(Got::Value {
            tag: hex(&sha256(&bytes)),
            bytes,
            ttl_left: None,
        })
    }

    fn put(&self, name: &str, value: &[u8], _ttl: Duration) -> Result<(), StoreError> {
        self.up()?;
        let url = self.url(name);
        let timeout = self.config.timeout_for(value.len());
        match self.exchange("PUT", &url, Some(value), timeout) {
            Exchange::Response(r) => {
                self.health.mark_up();
                match r.status().as_u16() {
                    200..=299 => Ok(()),
                    s => Err(self.status_error("PUT", s, &url)),
                }
            }
            Exchange::Failed(f, what, retry) => Err(self.failed(f, &what, retry)),
        }
    }

    fn delete(&self, name: &str) -> Result<(), StoreError> {
        self.up()?;
        let url = self.url(name);
        match self.exchange("DELETE", &url, None, self.config.timeout_for(0)) {
            Exchange::Response(r) => {
                self.health.mark_up();
                match r.status().as_u16() {
                    200..=299 | 404 | 410 => Ok(()),
                    s => Err(self.status_error("DELETE", s, &url)),
                }
            }
            Exchange::Failed(f, what, retry) => Err(self.failed(f, &what, retry)),
        }
    }

    fn is_down(&self) -> bool {
        self.health.is_down()
    }

    fn last_failure(&self) -> Option<(Failure, String)> {
        self.health.last_failure()
    }

    fn info(&self) -> Result<StoreInfo, Unanswered> {
        let url = format!("{}/", self.base);
        match self.exchange("HEAD", &url, None, self.config.timeout_for(0)) {
            Exchange::Response(r) => {
                self.health.mark_up();
                let version = r
                    .headers()
                    .get("server")
                    .and_then(|v| v.to_str().ok())
                    .map(|v| self.config.scrub(v));
                Ok(StoreInfo {
                    version,
                    ..StoreInfo::default()
                })
            }
            Exchange::Failed(f, what, retry) => {
                self.health.fail(f, &what, retry);
                Err(Unanswered {
                    failure: Some(f),
                    message: self
                        .health
                        .last_failure()
                        .map_or(what, |(_, message)| message),
                })
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base64_as_rfc_4648() {
        for (plain, coded) in [
            ("", ""),
            ("f", "Zg=="),
            ("fo", "Zm8="),
            ("foo", "Zm9v"),
            ("foob", "Zm9vYg=="),
            ("fooba", "Zm9vYmE="),
            ("foobar", "Zm9vYmFy"),
        ] {
            assert_eq!(base64(plain.as_bytes()), coded);
        }
    }

    #[test]
    fn paths_and_credentials() {
        let c = RemoteConfig::new("http://u:p%40ss@h:8080/cache/").unwrap();
        let s = HttpStore::new(c).unwrap();
        assert_eq!(s.url("hipjit:5:e:ab"), "http://h:8080/cache/hipjit:5:e:ab");
        assert_eq!(
            s.auth.as_ref().unwrap().to_str().unwrap(),
            format!("Basic {}", base64(b"u:p@ss"))
        );
        let debug = format!("{s:?}");
        assert!(
            !debug.contains("p%40ss") && !debug.contains("p@ss"),
            "{debug}"
        );
        let c = RemoteConfig::new("https://h/c?layout=bazel")
            .unwrap()
            .with_bearer_token("T0KEN");
        let s = HttpStore::new(c).unwrap();
        assert_eq!(s.url("x"), format!("https://h/c/ac/{}", hex(&sha256(b"x"))));
        assert!(!format!("{s:?}").contains("T0KEN"));
        let e = HttpStore::new(RemoteConfig::new("http://h/c?pw=S3cret").unwrap()).unwrap_err();
        assert!(e.to_string().contains("\"pw\""), "{e}");
        assert!(!e.to_string().contains("S3cret"), "{e}");
    }
}
