//! How hipjit's own files (compiler identity and library search memos, header manifests and
//! directory listings) encode byte strings: path bytes and digests as one MessagePack `bin`.
//!
//! serde encodes a `Vec<u8>` or a `[u8; 32]` as a sequence of integers, one MessagePack value
//! per byte, and decodes it one value at a time: on a fresh process's disk hit, reading the
//! memos and the manifest that way was most of the decoding time. Fields are marked
//! `#[serde(with = "serde_bytes")]`; a list of (bytes, value) pairs, which that attribute
//! cannot reach inside, uses [`pairs`].

/// `#[serde(with = "crate::fs::byte_strings::pairs")]` for a `Vec<(Vec<u8>, T)>`: each pair as a
/// two-item array of a `bin` and `T`.
pub(crate) mod pairs {
    use serde::{Deserialize, Deserializer, Serialize, Serializer};
    use serde_bytes::{ByteBuf, Bytes};

    pub(crate) fn serialize<S: Serializer, T: Serialize>(
        v: &[(Vec<u8>, T)],
        s: S,
    ) -> Result<S::Ok, S::Error> {
        s.collect_seq(v.iter().map(|(b, t)| (Bytes::new(b), t)))
    }

    pub(crate) fn deserialize<'de, D: Deserializer<'de>, T: Deserialize<'de>>(
        d: D,
    ) -> Result<Vec<(Vec<u8>, T)>, D::Error> {
        let v: Vec<(ByteBuf, T)> = Deserialize::deserialize(d)?;
        Ok(v.into_iter().map(|(b, t)| (b.into_vec(), t)).collect())
    }
}

#[cfg(test)]
mod tests {
    use serde::{Deserialize, Serialize};

    #[derive(Debug, PartialEq, Serialize, Deserialize)]
    struct Record {
        #[serde(with = "serde_bytes")]
        name: Vec<u8>,
        #[serde(with = "serde_bytes")]
        digest: [u8; 32],
        #[serde(with = "super::pairs")]
        stats: Vec<(Vec<u8>, u64)>,
    }

    #[test]
    fn byte_strings_are_one_bin_each_and_round_trip() {
        let r = Record {
            name: b"include/cuda_fp16.h\xff".to_vec(),
            digest: [7; 32],
            stats: vec![(b"/usr/lib".to_vec(), 3), (Vec::new(), 4)],
        };
        let bytes = rmp_serde::to_vec(&r).unwrap();
        // fixarray(3), bin8(20) + 20 bytes, bin8(32) + 32 bytes, fixarray(2) of
        // [bin8(8) + 8 bytes, 3] and [bin8(0), 4].
        let mut expected = vec![0x93, 0xc4, 20];
        expected.extend_from_slice(&r.name);
        expected.extend_from_slice(&[0xc4, 32]);
        expected.extend_from_slice(&[7; 32]);
        expected.extend_from_slice(&[0x92, 0x92, 0xc4, 8]);
        expected.extend_from_slice(b"/usr/lib");
        expected.extend_from_slice(&[3, 0x92, 0xc4, 0, 4]);
        assert_eq!(bytes, expected);
        assert_eq!(rmp_serde::from_slice::<Record>(&bytes).unwrap(), r);
    }
}
