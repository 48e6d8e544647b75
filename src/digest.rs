//! Digests as hipjit writes them: sha256 ([`sha256`]), lowercase hex ([`hex`]) and the
//! length-prefixed record ([`Record`]) every key and memo name is hashed over. A leaf: it
//! names nothing of hipjit (`docs/architecture.md`).
//!
//! The SHA-256 is ring's (assembly, with the x86-64 SHA extensions where the CPU has them),
//! which `hipjit::file_stat::hash_file` hashes files with: one implementation for every digest
//! hipjit writes, as fast in a dependent's unoptimised debug build as in a release one.

/// Lowercase hex of `bytes`.
pub fn hex(bytes: &[u8]) -> String {
    const D: &[u8; 16] = b"0123456789abcdef";
    let mut s = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        s.push(D[(b >> 4) as usize] as char);
        s.push(D[(b & 15) as usize] as char);
    }
    s
}

/// sha256 of `bytes`.
pub fn sha256(bytes: &[u8]) -> [u8; 32] {
    let mut h = Sha256::new();
    h.update(bytes);
    h.finish()
}

/// A sha256 fed piece by piece: [`Sha256::update`] with each piece in turn, then
/// [`Sha256::finish`] for the digest of them all, back to back.
pub(crate) struct Sha256(ring::digest::Context);

impl Sha256 {
    pub(crate) fn new() -> Sha256 {
        Sha256(ring::digest::Context::new(&ring::digest::SHA256))
    }
    pub(crate) fn update(&mut self, bytes: impl AsRef<[u8]>) {
        self.0.update(bytes.as_ref());
    }
    pub(crate) fn finish(self) -> [u8; 32] {
        let mut out = [0u8; 32];
        out.copy_from_slice(self.0.finish().as_ref());
        out
    }
}

/// sha256 over byte strings each preceded by its length (`u64`, little-endian): the shape of
/// the key records here and of the names hipjit gives its per-user memos.
pub(crate) struct Record(Sha256);

impl Record {
    pub(crate) fn new() -> Record {
        Record(Sha256::new())
    }
    pub(crate) fn bytes(&mut self, b: &[u8]) {
        self.0.update((b.len() as u64).to_le_bytes());
        self.0.update(b);
    }
    pub(crate) fn finish(self) -> [u8; 32] {
        self.0.finish()
    }
    pub(crate) fn field(&mut self, name: &str, value: &[u8]) {
        self.bytes(name.as_bytes());
        self.bytes(value);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// FIPS 180-2's examples (appendix B.1 and B.2), whole and fed in pieces that split the
    /// 64-byte block.
    #[test]
    fn sha256_gives_the_standard_digests_whole_and_in_pieces() {
        let two_blocks = b"abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq";
        let cases: [(&[u8], &str); 3] = [
            (
                b"",
                "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
            ),
            (
                b"abc",
                "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad",
            ),
            (
                two_blocks,
                "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1",
            ),
        ];
        for (input, want) in cases {
            assert_eq!(hex(&sha256(input)), want);
            for split in 0..=input.len() {
                let mut h = Sha256::new();
                h.update(&input[..split]);
                h.update(&input[split..]);
                assert_eq!(hex(&h.finish()), want, "split at {split}");
            }
        }
    }

    /// A record is the sha256 of each byte string's length (`u64` LE) and bytes, back to back.
    #[test]
    fn a_record_hashes_length_prefixed_byte_strings() {
        let mut r = Record::new();
        r.field("name", b"value");
        let mut want = Vec::new();
        for b in [&b"name"[..], b"value"] {
            want.extend_from_slice(&(b.len() as u64).to_le_bytes());
            want.extend_from_slice(b);
        }
        assert_eq!(r.finish(), sha256(&want));
    }
}
