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

use hmac::{Hmac, Mac};
use sha2::Sha256;

/// The first bytes of every value hipjit stores remotely.
pub const VALUE_MAGIC: &[u8; 8] = b"HIPJITRV";
const VERSION: u8 = 1;
const SIGNED: u8 = 1;
const HEADER: usize = 10;
const MAC_LEN: usize = 32;
const DOMAIN: &[u8] = b"hipjit-remote-v1\0";

fn mac(key: &[u8], name: &[u8], payload: &[u8]) -> Hmac<Sha256> {
    // HMAC takes a key of any length: new_from_slice cannot fail for it.
    let mut m = <Hmac<Sha256> as Mac>::new_from_slice(key)
        .unwrap_or_else(|_| unreachable!("HMAC accepts keys of any length"));
    m.update(DOMAIN);
    m.update(&(name.len() as u64).to_le_bytes());
    m.update(name);
    m.update(payload);
    m
}

/// The public name of a signing key: 16 hex digits, the first 8 bytes of
/// HMAC-SHA256(`key`, `"hipjit-remote-key-id"`). Entries and cluster locks written under a
/// signing key live under key names holding it ([`crate::cache::remote`]), so that nodes with
/// different keys (a key being rotated, a node set up wrongly) keep separate entries on one
/// server instead of refusing and replacing each other's; and `hipjit cache stats` shows it,
/// so that two nodes' keys can be compared without showing either. It reveals nothing usable
/// about the key (HMAC is a pseudo-random function of it).
pub fn key_id(key: &[u8]) -> String {
    let mut m = <Hmac<Sha256> as Mac>::new_from_slice(key)
        .unwrap_or_else(|_| unreachable!("HMAC accepts keys of any length"));
    m.update(b"hipjit-remote-key-id");
    crate::cache::key::hex(&m.finalize().into_bytes()[..8])
}

/// Wraps `payload` stored under the Redis key `name`, signed when `key` is given.
pub fn seal(key: Option<&[u8]>, name: &[u8], payload: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(HEADER + MAC_LEN + payload.len());
    out.extend_from_slice(VALUE_MAGIC);
    out.push(VERSION);
    match key {
        Some(k) => {
            out.push(SIGNED);
            out.extend_from_slice(&mac(k, name, payload).finalize().into_bytes());
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
        (Some(k), Some(t)) => mac(k, name, payload)
            .verify_slice(t)
            .map(|()| payload)
            .map_err(|_| Refused::BadSignature),
    }
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
}
