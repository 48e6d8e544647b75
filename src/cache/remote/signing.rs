//! The envelope of every value hipjit stores in the server, and its signature.
//!
//! A value is [`VALUE_MAGIC`], a version byte (1), a flags byte (bit 0: signed), when signed
//! the 32-byte HMAC-SHA256 of the value's Redis key name and payload under the signing key,
//! then the payload (a disk-cache entry, or a header manifest). The MAC covers
//! `"hipjit-remote-v1\0"`, the key name's `u64` little-endian length, the key name and the
//! payload, so that a signed value cannot be moved to another key.
//!
//! With a signing key configured, an unsigned value or one whose MAC does not match is
//! refused; without one, signatures are not checked (there is nothing to check them with) and
//! every value rests on the entry's own checks alone.

use ring::hmac;
use subtle::ConstantTimeEq;

/// The first bytes of every value hipjit stores remotely.
pub const VALUE_MAGIC: &[u8; 8] = b"HIPJITRV";
const VERSION: u8 = 1;
const SIGNED: u8 = 1;
const HEADER: usize = 10;
const MAC_LEN: usize = 32;
const DOMAIN: &[u8] = b"hipjit-remote-v1\0";

/// HMAC-SHA256 (ring's) under `key`, of any length, over `parts` back to back.
fn hmac_sha256(key: &[u8], parts: &[&[u8]]) -> [u8; MAC_LEN] {
    let mut m = hmac::Context::with_key(&hmac::Key::new(hmac::HMAC_SHA256, key));
    for p in parts {
        m.update(p);
    }
    let mut out = [0u8; MAC_LEN];
    out.copy_from_slice(m.sign().as_ref());
    out
}

/// Whether `tag` is `want`, compared in constant time (`subtle`): how long the comparison
/// takes says nothing of how many leading bytes matched.
fn tag_matches(want: &[u8; MAC_LEN], tag: &[u8]) -> bool {
    bool::from(want.as_slice().ct_eq(tag))
}

fn mac(key: &[u8], name: &[u8], payload: &[u8]) -> [u8; MAC_LEN] {
    hmac_sha256(
        key,
        &[DOMAIN, &(name.len() as u64).to_le_bytes(), name, payload],
    )
}

/// The public name of a signing key: 16 hex digits, the first 8 bytes of
/// HMAC-SHA256(`key`, `"hipjit-remote-key-id"`). Entries and cluster locks written under a
/// signing key live under key names holding it ([`crate::cache::remote`]), so that nodes with
/// different keys (a key being rotated, a node set up wrongly) keep separate entries on one
/// server instead of refusing and replacing each other's; and `hipjit cache stats` shows it,
/// so that two nodes' keys can be compared without showing either. It reveals nothing usable
/// about the key (HMAC is a pseudo-random function of it).
pub fn key_id(key: &[u8]) -> String {
    crate::digest::hex(&hmac_sha256(key, &[b"hipjit-remote-key-id"])[..8])
}

/// Wraps `payload` stored under the Redis key `name`, signed when `key` is given.
pub fn seal(key: Option<&[u8]>, name: &[u8], payload: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(HEADER + MAC_LEN + payload.len());
    out.extend_from_slice(VALUE_MAGIC);
    out.push(VERSION);
    match key {
        Some(k) => {
            out.push(SIGNED);
            out.extend_from_slice(&mac(k, name, payload));
        }
        None => out.push(0),
    }
    out.extend_from_slice(payload);
    out
}

/// Why a value read from the server was refused by [`open`].
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Refused {
    /// Not a value in this envelope: no [`VALUE_MAGIC`], another envelope version, unknown
    /// flags, or cut short (written by something else, or corrupted).
    #[error("{0}")]
    NotAValue(String),
    /// Unsigned while a signing key is configured.
    #[error("unsigned, and a signing key is configured (HIPJIT_REMOTE_CACHE_KEY): refused")]
    Unsigned,
    /// Signed, but not with the configured key (another key, or forged).
    #[error("its signature does not match this node's signing key: refused")]
    BadSignature,
}

impl Refused {
    /// What to check, in words, for a warning (the signing key of every node, or what else
    /// writes the server).
    pub fn hint(&self) -> &'static str {
        match self {
            Refused::NotAValue(_) => {
                "not a hipjit value: check that nothing else writes keys under hipjit's \
                 namespace in this database"
            }
            Refused::Unsigned => {
                "unsigned: a node without HIPJIT_REMOTE_CACHE_KEY wrote it (or it was planted); \
                 set the same HIPJIT_REMOTE_CACHE_KEY on every node"
            }
            Refused::BadSignature => {
                "signed with another key (or forged): check that HIPJIT_REMOTE_CACHE_KEY is \
                 the same on every node"
            }
        }
    }
}

/// The payload of a value read from the Redis key `name`, after its signature is checked
/// against `key` when one is given.
///
/// Errors: [`Refused`]: no magic, unknown version or flags, cut short
/// ([`Refused::NotAValue`]); unsigned while a key is configured ([`Refused::Unsigned`]); a
/// signature that does not match ([`Refused::BadSignature`]).
pub fn open<'a>(key: Option<&[u8]>, name: &[u8], value: &'a [u8]) -> Result<&'a [u8], Refused> {
    if value.len() < HEADER || &value[..8] != VALUE_MAGIC {
        return Err(Refused::NotAValue(format!(
            "not a hipjit remote value ({} bytes, no {:?} magic)",
            value.len(),
            String::from_utf8_lossy(VALUE_MAGIC)
        )));
    }
    if value[8] != VERSION {
        return Err(Refused::NotAValue(format!(
            "remote value version {}, expected {VERSION}",
            value[8]
        )));
    }
    let signed = value[9] & SIGNED != 0;
    if value[9] & !SIGNED != 0 {
        return Err(Refused::NotAValue(format!("unknown flags {:#x}", value[9])));
    }
    let (tag, payload) = if signed {
        if value.len() < HEADER + MAC_LEN {
            return Err(Refused::NotAValue(
                "signed, but shorter than its signature".into(),
            ));
        }
        (
            Some(&value[HEADER..HEADER + MAC_LEN]),
            &value[HEADER + MAC_LEN..],
        )
    } else {
        (None, &value[HEADER..])
    };
    match (key, tag) {
        (None, _) => Ok(payload),
        (Some(_), None) => Err(Refused::Unsigned),
        (Some(k), Some(t)) if tag_matches(&mac(k, name, payload), t) => Ok(payload),
        (Some(_), Some(_)) => Err(Refused::BadSignature),
    }
}

/// The first bytes of every cluster lock token ([`lock_token`]). The version in it changes
/// with the token's shape, so that a token of another shape is not one.
pub const LOCK_TOKEN_PREFIX: &str = "hjl2.";
const LOCK_DOMAIN: &[u8] = b"hipjit-lock-v2\0";
/// What signs lock tokens without a signing key: public, so such a token proves only its
/// shape (that a hipjit wrote it, not who).
const UNKEYED_LOCK_KEY: &[u8] = b"hipjit-unkeyed-lock";

fn lock_mac(key: Option<&[u8]>, name: &[u8], body: &str) -> [u8; MAC_LEN] {
    hmac_sha256(
        key.unwrap_or(UNKEYED_LOCK_KEY),
        &[
            LOCK_DOMAIN,
            &(name.len() as u64).to_le_bytes(),
            name,
            body.as_bytes(),
        ],
    )
}

/// What a cluster lock token says of itself ([`check_lock_token`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LockClaim {
    /// When it was made (ms since the Unix epoch, by its writer's clock): the moment its
    /// writer took (or tried to take) the lock.
    pub issued_ms: u64,
    /// The lifetime (ms) the lock was taken for, and is renewed to.
    pub ttl_ms: u64,
}

/// The token of a cluster lock named `name`, made at `issued_ms` (ms since the Unix epoch)
/// for a lifetime of `ttl_ms` milliseconds, with the random `nonce` (hex):
/// `hjl2.<nonce>.<issued_ms>.<ttl_ms>.<MAC>`, the MAC an HMAC-SHA256 (64 hex digits) of the
/// lock's name, the nonce, the issue time and the lifetime under the signing key `key`
/// (without one, under a public constant: the token then shows only that hipjit wrote it).
/// At most 144 bytes for a nonce of 32 hex digits.
pub fn lock_token(
    key: Option<&[u8]>,
    name: &[u8],
    nonce: &str,
    issued_ms: u64,
    ttl_ms: u64,
) -> String {
    let body = format!("{nonce}.{issued_ms}.{ttl_ms}");
    let tag = lock_mac(key, name, &body);
    format!("{LOCK_TOKEN_PREFIX}{body}.{}", crate::digest::hex(&tag))
}

/// The issue time and lifetime of a cluster lock token found under the lock name `name`, when
/// it is one [`lock_token`] made for that name under `key`.
///
/// Errors: why it is not: not of the shape (`"not a hipjit lock token"`; a token of an
/// earlier version too) or its MAC does not match (`"not signed with this node's key"` under
/// a key; else not of the shape).
pub fn check_lock_token(
    key: Option<&[u8]>,
    name: &[u8],
    token: &[u8],
) -> Result<LockClaim, &'static str> {
    const NOT: &str = "not a hipjit lock token";
    let token = std::str::from_utf8(token).map_err(|_| NOT)?;
    let rest = token.strip_prefix(LOCK_TOKEN_PREFIX).ok_or(NOT)?;
    let (body, tag) = rest.rsplit_once('.').ok_or(NOT)?;
    let mut parts = body.split('.');
    let (Some(nonce), Some(issued), Some(ttl), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err(NOT);
    };
    let hexdigits = |s: &str, n: usize| s.len() == n && s.bytes().all(|b| b.is_ascii_hexdigit());
    if !hexdigits(nonce, 32) || !hexdigits(tag, 64) {
        return Err(NOT);
    }
    let number = |s: &str| -> Result<u64, &'static str> {
        if s.is_empty() || s.len() > 20 || !s.bytes().all(|b| b.is_ascii_digit()) {
            return Err(NOT);
        }
        s.parse().map_err(|_| NOT)
    };
    let (issued_ms, ttl_ms) = (number(issued)?, number(ttl)?);
    let tag: Vec<u8> = (0..32)
        .map(|i| u8::from_str_radix(&tag[2 * i..2 * i + 2], 16))
        .collect::<Result<_, _>>()
        .map_err(|_| NOT)?;
    if !tag_matches(&lock_mac(key, name, body), &tag) {
        return Err(if key.is_some() {
            "not signed with this node's key"
        } else {
            NOT
        });
    }
    Ok(LockClaim { issued_ms, ttl_ms })
}

#[cfg(test)]
mod tests {
    use super::*;

    const K: &[u8] = b"0123456789abcdef0123456789abcdef";

    #[test]
    fn signed_values_open_with_their_key_and_name_only() {
        let v = seal(Some(K), b"hipjit:2:e:aa", b"payload");
        assert_eq!(open(Some(K), b"hipjit:2:e:aa", &v).unwrap(), b"payload");
        assert!(open(
            Some(b"another key, 32 bytes long......"),
            b"hipjit:2:e:aa",
            &v
        )
        .is_err());
        assert!(open(Some(K), b"hipjit:2:e:bb", &v).is_err());
        let mut tampered = v.clone();
        *tampered.last_mut().unwrap() ^= 1;
        assert_eq!(
            open(Some(K), b"hipjit:2:e:aa", &tampered).unwrap_err(),
            Refused::BadSignature
        );
        // Without a key, a signed value's payload is still usable.
        assert_eq!(open(None, b"hipjit:2:e:aa", &v).unwrap(), b"payload");
    }

    #[test]
    fn key_ids_tell_keys_apart_and_are_stable() {
        assert_eq!(key_id(K), key_id(K));
        assert_eq!(key_id(K).len(), 16);
        assert_ne!(key_id(K), key_id(b"another key, 32 bytes long......"));
        // HMAC-SHA256(K, "hipjit-remote-key-id"), computed with Python's hmac module.
        assert_eq!(key_id(K), "8ceb8368b35a815f");
    }

    #[test]
    fn unsigned_values_are_refused_under_a_key() {
        let v = seal(None, b"n", b"payload");
        assert_eq!(open(None, b"n", &v).unwrap(), b"payload");
        assert_eq!(open(Some(K), b"n", &v).unwrap_err(), Refused::Unsigned);
        assert!(open(None, b"n", b"junk")
            .unwrap_err()
            .to_string()
            .contains("magic"));
    }

    #[test]
    fn lock_tokens_check_out_for_their_name_and_key_only() {
        let nonce = "0123456789abcdef0123456789abcdef";
        let claim = LockClaim {
            issued_ms: 1_700_000_000_123,
            ttl_ms: 2000,
        };
        let t = lock_token(Some(K), b"hipjit:2:l:aa", nonce, claim.issued_ms, 2000);
        assert!(t.starts_with("hjl2."), "{t}");
        let longest = lock_token(Some(K), b"n", nonce, u64::MAX, u64::MAX);
        assert_eq!(longest.len(), 144, "{longest}");
        assert_eq!(
            check_lock_token(Some(K), b"n", longest.as_bytes()).map(|c| c.ttl_ms),
            Ok(u64::MAX)
        );
        assert_eq!(
            check_lock_token(Some(K), b"hipjit:2:l:aa", t.as_bytes()),
            Ok(claim)
        );
        // Another name, another key, no key, a changed lifetime or issue time: refused.
        assert!(check_lock_token(Some(K), b"hipjit:2:l:bb", t.as_bytes()).is_err());
        assert_eq!(
            check_lock_token(
                Some(b"another key, 32 bytes long......"),
                b"hipjit:2:l:aa",
                t.as_bytes()
            ),
            Err("not signed with this node's key")
        );
        assert!(check_lock_token(None, b"hipjit:2:l:aa", t.as_bytes()).is_err());
        let longer = t.replace(".2000.", ".9000.");
        assert!(check_lock_token(Some(K), b"hipjit:2:l:aa", longer.as_bytes()).is_err());
        let later = t.replace(".1700000000123.", ".1800000000123.");
        assert_ne!(later, t);
        assert!(check_lock_token(Some(K), b"hipjit:2:l:aa", later.as_bytes()).is_err());
        // Without a key, the shape alone.
        let u = lock_token(None, b"n", nonce, 5, 30_000);
        assert_eq!(
            check_lock_token(None, b"n", u.as_bytes()),
            Ok(LockClaim {
                issued_ms: 5,
                ttl_ms: 30_000
            })
        );
        assert_eq!(
            check_lock_token(Some(K), b"n", u.as_bytes()),
            Err("not signed with this node's key")
        );
        // A token of the first version (no issue time) is no token now, whatever its MAC.
        let v1 = hmac::sign(
            &hmac::Key::new(hmac::HMAC_SHA256, UNKEYED_LOCK_KEY),
            &[
                &b"hipjit-lock-v1\0"[..],
                &1u64.to_le_bytes(),
                b"n",
                format!("{nonce}.30000").as_bytes(),
            ]
            .concat(),
        );
        let v1 = format!("hjl1.{nonce}.30000.{}", crate::digest::hex(v1.as_ref()));
        // An issue time past u64, and an extra field.
        let (past_u64, extra) = (
            format!("hjl2.{nonce}.99999999999999999999.1.{}", "0".repeat(64)),
            format!("hjl2.{nonce}.1.2.3.{}", "0".repeat(64)),
        );
        let junk: [&[u8]; 8] = [
            b"x",
            b"",
            b"hjl2.",
            b"0123456789abcdef0123456789abcdef",
            b"\xff",
            v1.as_bytes(),
            past_u64.as_bytes(),
            extra.as_bytes(),
        ];
        for junk in junk {
            assert_eq!(
                check_lock_token(None, b"n", junk),
                Err("not a hipjit lock token"),
                "{}",
                String::from_utf8_lossy(junk)
            );
        }
    }
}
