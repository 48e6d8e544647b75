//! A disk-cache entry read for a hit that serves its artefacts: verified exactly as
//! [`super::disk::Entry::from_bytes`] verifies an entry (magic, format version, the checksum of
//! the header and metadata, the key the metadata holds, each artefact's size and sha256, no
//! trailing bytes), its metadata decoded only as far as the hit needs: the key, the compiler
//! command and the artefact list.
//!
//! The metadata ([`super::disk::EntryMeta`]) is MessagePack, fields by position, as
//! `rmp_serde` writes it; the other fields (the compiler's identity, the options, the tracked
//! headers, the dependency list) are stepped over value by value. Decoding them with serde
//! touched more code than the rest of a fresh process's hit together: the first run of that
//! code is most of what a fresh-process hit costs (see the README's "What a hit costs").
//! `tests` check this reader against serde's on entries hipjit writes.

use std::path::{Path, PathBuf};

use rmp::Marker;

use super::disk::{check_key, frame, place_artefacts, PREFIX_LEN};
use super::key::CacheKey;

/// The fields of [`super::disk::EntryMeta`], in order.
const META_FIELDS: u32 = 9;
/// The position of the key, the command and the artefact list among them.
const KEY_FIELD: u32 = 1;
const COMMAND_FIELD: u32 = 2;
const ARTEFACTS_FIELD: u32 = 8;

/// A verified entry, for a hit ([`super::DiskCache`]'s `get_hit`).
#[derive(Debug)]
pub(crate) struct HitEntry {
    /// Its file.
    pub(crate) path: PathBuf,
    /// The compiler command line it records.
    pub(crate) command: Vec<String>,
    /// (name, offset, length) of each artefact in `data`.
    artefacts: Vec<(String, usize, usize)>,
    data: Vec<u8>,
}

impl HitEntry {
    /// Parses and verifies the bytes of the entry file `path` of `key`.
    ///
    /// Errors: a message saying what is wrong, as [`super::disk::Entry::from_bytes`] says it
    /// (a bad entry).
    pub(crate) fn from_bytes(
        mut data: Vec<u8>,
        path: &Path,
        key: &CacheKey,
    ) -> Result<HitEntry, String> {
        let (meta_end, body) = frame(&data)?;
        let meta = Meta::read(&data[PREFIX_LEN..meta_end])
            .ok_or("metadata does not decode (as the hit reads it)")?;
        check_key(&meta.key, key)?;
        let offsets = place_artefacts(
            &data,
            body,
            meta.artefacts
                .iter()
                .map(|(name, size, sha)| (name.as_str(), *size, sha.as_str())),
        )?;
        data.drain(..body);
        Ok(HitEntry {
            path: path.to_path_buf(),
            command: meta.command,
            artefacts: meta
                .artefacts
                .into_iter()
                .zip(offsets)
                .map(|((name, _, _), (at, len))| (name, at, len))
                .collect(),
            data,
        })
    }

    /// The bytes of the artefact called `name`, when the entry has one.
    pub(crate) fn artefact(&self, name: &str) -> Option<&[u8]> {
        let (_, at, len) = self.artefacts.iter().find(|(n, _, _)| n == name)?;
        self.data.get(*at..at.checked_add(*len)?)
    }
}

/// For the fuzz target `cache_entry`: reads `data` as the entry of `key` both ways and panics
/// when the two disagree about what it serves: both accept it and give another command or
/// other artefact bytes. Each read may refuse what the other accepts: the hit's read does not
/// decode the fields it steps over, so it serves an entry whose other fields the full read
/// cannot decode; it reads only the array hipjit writes and nothing after it, so it refuses
/// metadata the full read takes (fields by name, bytes after the metadata), which
/// [`super::DiskCache::put`] then replaces. Neither serves bytes other than those the
/// metadata's sha256 sums record.
#[doc(hidden)]
pub fn check_against_full_read(data: &[u8], key: &CacheKey) {
    let path = Path::new("fuzz.hjc");
    let full = super::disk::Entry::from_bytes(data.to_vec(), path, Some(key));
    let hit = HitEntry::from_bytes(data.to_vec(), path, key);
    if let (Ok(full), Ok(hit)) = (full, hit) {
        assert_eq!(hit.command, full.meta.command);
        assert_eq!(hit.artefacts.len(), full.meta.artefacts.len());
        for a in &full.meta.artefacts {
            assert_eq!(hit.artefact(&a.name), full.artefact(&a.name), "{}", a.name);
        }
    }
}

/// What the hit reads of the metadata.
#[derive(Debug, PartialEq)]
struct Meta {
    key: String,
    command: Vec<String>,
    /// (name, size, sha256 hex) of each artefact.
    artefacts: Vec<(String, u64, String)>,
}

impl Meta {
    /// The fields of the metadata `b`, `None` when it is not the array of
    /// [`META_FIELDS`] values `rmp_serde` writes with those fields of those types, or when
    /// bytes follow it.
    fn read(b: &[u8]) -> Option<Meta> {
        let mut r = Reader(b);
        if r.array_len()? != META_FIELDS {
            return None;
        }
        let (mut key, mut command, mut artefacts) = (None, None, None);
        for field in 0..META_FIELDS {
            match field {
                KEY_FIELD => key = Some(r.string()?),
                COMMAND_FIELD => {
                    let n = r.array_len()?;
                    let mut c = Vec::new();
                    for _ in 0..n {
                        c.push(r.string()?);
                    }
                    command = Some(c);
                }
                ARTEFACTS_FIELD => {
                    let n = r.array_len()?;
                    let mut a = Vec::new();
                    for _ in 0..n {
                        if r.array_len()? != 3 {
                            return None;
                        }
                        a.push((r.string()?, r.uint()?, r.string()?));
                    }
                    artefacts = Some(a);
                }
                _ => r.skip_value()?,
            }
        }
        r.0.is_empty().then_some(Meta {
            key: key?,
            command: command?,
            artefacts: artefacts?,
        })
    }
}

/// A MessagePack reader over a byte slice: each read takes its value off the front, `None`
/// when the bytes are not a value of that kind (or end first).
struct Reader<'a>(&'a [u8]);

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        let (head, rest) = self.0.split_at_checked(n)?;
        self.0 = rest;
        Some(head)
    }

    /// A big-endian unsigned integer of `n` (1, 2, 4 or 8) bytes.
    fn be(&mut self, n: usize) -> Option<u64> {
        Some(
            self.take(n)?
                .iter()
                .fold(0u64, |v, &b| (v << 8) | u64::from(b)),
        )
    }

    fn marker(&mut self) -> Option<Marker> {
        Some(Marker::from_u8(*self.take(1)?.first()?))
    }

    fn array_len(&mut self) -> Option<u32> {
        match self.marker()? {
            Marker::FixArray(n) => Some(u32::from(n)),
            Marker::Array16 => self.be(2).map(|n| n as u32),
            Marker::Array32 => self.be(4).map(|n| n as u32),
            _ => None,
        }
    }

    /// A string, as `str` or, as serde's `String` takes it too, `bin` holding UTF-8.
    fn string(&mut self) -> Option<String> {
        let n = match self.marker()? {
            Marker::FixStr(n) => usize::from(n),
            Marker::Str8 | Marker::Bin8 => self.be(1)? as usize,
            Marker::Str16 | Marker::Bin16 => self.be(2)? as usize,
            Marker::Str32 | Marker::Bin32 => self.be(4)? as usize,
            _ => return None,
        };
        String::from_utf8(self.take(n)?.to_vec()).ok()
    }

    /// An unsigned integer (a negative one is not).
    fn uint(&mut self) -> Option<u64> {
        match self.marker()? {
            Marker::FixPos(v) => Some(u64::from(v)),
            Marker::U8 => self.be(1),
            Marker::U16 => self.be(2),
            Marker::U32 => self.be(4),
            Marker::U64 => self.be(8),
            Marker::I8 => pos(self.be(1)? as u8 as i8),
            Marker::I16 => pos(self.be(2)? as u16 as i16),
            Marker::I32 => pos(self.be(4)? as u32 as i32),
            Marker::I64 => pos(self.be(8)? as i64),
            _ => None,
        }
    }

    /// Steps over one value of any kind, nested arrays and maps whole. Iterative (a count of
    /// the values still to step over), so that deep nesting cannot exhaust the stack.
    fn skip_value(&mut self) -> Option<()> {
        let mut left: u64 = 1;
        while left > 0 {
            left -= 1;
            let skip = match self.marker()? {
                Marker::FixPos(_)
                | Marker::FixNeg(_)
                | Marker::Null
                | Marker::True
                | Marker::False => 0,
                Marker::U8 | Marker::I8 => 1,
                Marker::U16 | Marker::I16 => 2,
                Marker::U32 | Marker::I32 | Marker::F32 => 4,
                Marker::U64 | Marker::I64 | Marker::F64 => 8,
                Marker::FixStr(n) => u64::from(n),
                Marker::Str8 | Marker::Bin8 => self.be(1)?,
                Marker::Str16 | Marker::Bin16 => self.be(2)?,
                Marker::Str32 | Marker::Bin32 => self.be(4)?,
                Marker::FixArray(n) => {
                    left += u64::from(n);
                    0
                }
                Marker::Array16 => {
                    left += self.be(2)?;
                    0
                }
                Marker::Array32 => {
                    left += self.be(4)?;
                    0
                }
                Marker::FixMap(n) => {
                    left += 2 * u64::from(n);
                    0
                }
                Marker::Map16 => {
                    left += 2 * self.be(2)?;
                    0
                }
                Marker::Map32 => {
                    left += 2 * self.be(4)?;
                    0
                }
                // The type byte, then the data.
                Marker::FixExt1 => 2,
                Marker::FixExt2 => 3,
                Marker::FixExt4 => 5,
                Marker::FixExt8 => 9,
                Marker::FixExt16 => 17,
                Marker::Ext8 => self.be(1)? + 1,
                Marker::Ext16 => self.be(2)? + 1,
                Marker::Ext32 => self.be(4)? + 1,
                Marker::Reserved => return None,
            };
            // More values announced than bytes left: not an entry's metadata.
            if left > self.0.len() as u64 {
                return None;
            }
            self.take(usize::try_from(skip).ok()?)?;
        }
        Some(())
    }
}

fn pos<T: TryInto<u64>>(v: T) -> Option<u64> {
    v.try_into().ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cache::disk::{ArtefactMeta, EntryMeta};
    use crate::cache::key::TrackedHeader;
    use crate::compiler::{CompileOptions, CompilerIdentity, CompilerKind};

    /// Metadata as hipjit writes it: small and large, empty and full fields, text that is not
    /// ASCII, sizes past 32 bits.
    fn sample_metas() -> Vec<EntryMeta> {
        let identity = CompilerIdentity {
            kind: CompilerKind::Nvrtc,
            path: "/opt/cuda/lib64/libnvrtc.so.13".into(),
            version: "NVRTC 13.0\n".into(),
            fingerprint: "ab".repeat(32),
            covered: vec!["/opt/cuda/include".into()],
            root: "/opt/cuda".into(),
            header_dirs: vec!["/opt/cuda/include".into(), "/opt/cuda/include/cccl".into()],
            host_compiler: None,
            system_include_dirs: Vec::new(),
        };
        let options = CompileOptions {
            defines: vec![("N".into(), Some("4".into())), ("FLAG".into(), None)],
            include_dirs: vec!["/home/u/inc".into()],
            extra_flags: vec!["-Wall".into()],
            code_object_version: Some(5),
            source_name: Some("k\u{e9}rnel.hip".into()),
            ..CompileOptions::default()
        };
        let full = EntryMeta {
            format_version: crate::cache::key::CACHE_FORMAT_VERSION,
            key: "0f".repeat(32),
            command: vec![
                "nvrtc".into(),
                "--gpu-architecture=sm_90".into(),
                "-D\u{e9}=1".into(),
            ],
            compiler: identity.clone(),
            options,
            tracked_headers: (0..40)
                .map(|i| TrackedHeader {
                    include: format!("h{i}.h"),
                    path: format!("/home/u/inc/h{i}.h").into(),
                    sha256: "cd".repeat(32),
                })
                .collect(),
            dependencies: (0..300)
                .map(|i| format!("/opt/cuda/include/d{i}.h").into())
                .collect(),
            created_unix_ms: 1_764_633_600_000,
            artefacts: vec![
                ArtefactMeta {
                    name: "cubin".into(),
                    size: 5 << 32,
                    sha256: "12".repeat(32),
                },
                ArtefactMeta {
                    name: "diagnostics.json".into(),
                    size: 0,
                    sha256: "34".repeat(32),
                },
            ],
        };
        let empty = EntryMeta {
            format_version: 0,
            key: String::new(),
            command: Vec::new(),
            compiler: identity,
            options: CompileOptions::default(),
            tracked_headers: Vec::new(),
            dependencies: Vec::new(),
            created_unix_ms: 0,
            artefacts: Vec::new(),
        };
        let long_command = EntryMeta {
            command: (0..70_000).map(|i| format!("-DX{i}")).collect(),
            ..empty.clone()
        };
        vec![full, empty, long_command]
    }

    #[test]
    fn the_hit_reads_what_serde_reads_of_metadata_hipjit_writes() {
        let metas = sample_metas();
        assert!(metas.len() >= 3);
        for meta in metas {
            let bytes = rmp_serde::to_vec(&meta).unwrap();
            let got = Meta::read(&bytes).unwrap_or_else(|| panic!("{meta:?} not read"));
            let want = Meta {
                key: meta.key.clone(),
                command: meta.command.clone(),
                artefacts: meta
                    .artefacts
                    .iter()
                    .map(|a: &ArtefactMeta| (a.name.clone(), a.size, a.sha256.clone()))
                    .collect(),
            };
            assert_eq!(got, want);
            // Cut anywhere, or with a byte after it, it is refused, never misread.
            // Every cut of a small record, a few of a large one.
            let step = if bytes.len() < 1 << 16 {
                1
            } else {
                bytes.len() / 7
            };
            for cut in (0..bytes.len()).step_by(step).chain([bytes.len() - 1]) {
                assert_eq!(Meta::read(&bytes[..cut]), None, "cut at {cut}");
            }
            let mut longer = bytes.clone();
            longer.push(0xc0);
            assert_eq!(Meta::read(&longer), None);
        }
    }

    #[test]
    fn values_of_every_kind_are_stepped_over_and_deep_nesting_is_no_stack_overflow() {
        // Each MessagePack kind once, in an array, then a fixint.
        let value = rmpv::Value::Array(vec![
            rmpv::Value::Nil,
            rmpv::Value::Boolean(true),
            rmpv::Value::from(-3),
            rmpv::Value::from(200u8),
            rmpv::Value::from(-200i16),
            rmpv::Value::from(70_000u32),
            rmpv::Value::from(-70_000i32),
            rmpv::Value::from(u64::MAX),
            rmpv::Value::from(i64::MIN),
            rmpv::Value::F32(1.5),
            rmpv::Value::F64(2.5),
            rmpv::Value::from("x".repeat(40)),
            rmpv::Value::from("y".repeat(300)),
            rmpv::Value::from("z".repeat(70_000)),
            rmpv::Value::Binary(vec![1; 300]),
            rmpv::Value::Map(vec![(rmpv::Value::from(1), rmpv::Value::from("a"))]),
            rmpv::Value::Array(vec![rmpv::Value::Nil; 20]),
            rmpv::Value::Ext(5, vec![1, 2, 3, 4]),
            rmpv::Value::Ext(6, vec![9; 100]),
        ]);
        let mut b = Vec::new();
        rmpv::encode::write_value(&mut b, &value).unwrap();
        b.push(0x07);
        let mut r = Reader(&b);
        r.skip_value().unwrap();
        assert_eq!(r.uint(), Some(7));
        assert!(r.0.is_empty());
        // A million nested one-element arrays with nothing at the bottom: refused.
        let deep = vec![0x91u8; 1 << 20];
        assert_eq!(Reader(&deep).skip_value(), None);
        // An array announcing more values than there are bytes: refused at once.
        assert_eq!(Reader(&[0xdd, 0xff, 0xff, 0xff, 0xff]).skip_value(), None);
    }

    #[test]
    fn a_string_stored_as_bin_is_read_as_serde_reads_it() {
        let meta = &sample_metas()[0];
        let mut as_bin = rmp_serde::to_vec(&(
            meta.format_version,
            serde_bytes::Bytes::new(meta.key.as_bytes()),
            &meta.command,
            &meta.compiler,
            &meta.options,
            &meta.tracked_headers,
            &meta.dependencies,
            meta.created_unix_ms,
            &meta.artefacts,
        ))
        .unwrap();
        let full: EntryMeta = rmp_serde::from_slice(&as_bin).unwrap();
        assert_eq!(Meta::read(&as_bin).unwrap().key, full.key);
        // Not UTF-8: refused by both.
        let at = as_bin.windows(2).position(|w| w == [0xc4, 64]).unwrap();
        as_bin[at + 2] = 0xff;
        assert!(rmp_serde::from_slice::<EntryMeta>(&as_bin).is_err());
        assert_eq!(Meta::read(&as_bin), None);
    }

    /// An entry of `meta` and one artefact, with `extra` bytes after its metadata (inside the
    /// length and the checksum, as a writer other than hipjit could leave them).
    fn entry_with_bytes_after_the_metadata(
        key: &CacheKey,
        meta: EntryMeta,
        artefact: &[u8],
        extra: &[u8],
    ) -> Vec<u8> {
        use crate::cache::disk::{encode_entry, entry_checksum};
        let good = encode_entry(key, meta, &[("cubin", artefact)]).unwrap();
        let meta_len = u64::from_le_bytes(good[12..20].try_into().unwrap()) as usize;
        let meta_end = PREFIX_LEN + meta_len;
        let mut out = good[..meta_end].to_vec();
        out.extend_from_slice(extra);
        out[12..20].copy_from_slice(&((meta_len + extra.len()) as u64).to_le_bytes());
        let sum = entry_checksum(&out);
        out.extend_from_slice(&sum);
        out.extend_from_slice(artefact);
        out
    }

    #[test]
    fn an_entry_only_the_full_read_accepts_is_replaced_by_the_next_write() {
        let dir = tempfile::tempdir().unwrap();
        let cache = crate::cache::DiskCache::open(&[dir.path().to_path_buf()]).unwrap();
        let key = CacheKey([3; 32]);
        let meta = sample_metas().swap_remove(1);
        let odd = entry_with_bytes_after_the_metadata(&key, meta.clone(), b"cubin bytes", &[0xc0]);
        let path = Path::new("x.hjc");
        assert!(crate::cache::disk::Entry::from_bytes(odd.clone(), path, Some(&key)).is_ok());
        assert!(HitEntry::from_bytes(odd.clone(), path, &key).is_err());
        let (written, _) = cache
            .put(&key, meta.clone(), &[("cubin", b"other")])
            .unwrap();
        std::fs::write(&written, &odd).unwrap();
        assert!(cache.get_hit(&key).0.is_none());
        // The next compile's write replaces it, so that the hit after it is served.
        let (_, published) = cache.put(&key, meta, &[("cubin", b"cubin bytes")]).unwrap();
        assert!(published);
        let (hit, bad) = cache.get_hit(&key);
        assert!(bad.is_empty(), "{bad:?}");
        assert_eq!(hit.unwrap().artefact("cubin"), Some(&b"cubin bytes"[..]));
    }

    #[test]
    fn metadata_of_another_shape_is_refused() {
        let meta = &sample_metas()[0];
        // As a map of field names (serde's other struct form): not what hipjit writes.
        let named = rmp_serde::to_vec_named(meta).unwrap();
        assert_eq!(Meta::read(&named), None);
        // An artefact whose size is negative.
        let mut neg = EntryMeta::clone(meta);
        neg.artefacts.clear();
        let mut bytes = rmp_serde::to_vec(&neg).unwrap();
        let last = bytes.len() - 1;
        assert_eq!(bytes[last], 0x90, "an empty artefact list ends the record");
        bytes[last] = 0x91;
        bytes.extend([0x93, 0xa1, b'c', 0xff, 0xa0]);
        assert_eq!(Meta::read(&bytes), None);
    }
}
