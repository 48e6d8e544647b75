//! The in-process cache: one value per (source bytes, options), found through a cheap pre-key and
//! confirmed by a full comparison, so a hit never pays for sha256; and single flight: however
//! many threads ask for the same (source, options) at once, one of them computes the value.
//!
//! The pre-key reads a few windows of the source (`sampled_hash`), not all of it: a hit's
//! full comparison reads every byte anyway, and hashing them all first cost a 4 KiB hit about
//! as much again. Sources alike in those windows share a bucket; there, each slot's hash of the
//! whole source ([`fast_hash`], made once when the slot is) picks the one to compare, so a
//! bucket of many such sources costs one hash, not a comparison per source (a bucket past
//! eight sources keeps them by that hash).

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hash, Hasher};
use std::sync::{Arc, OnceLock};

use parking_lot::Mutex;

use crate::compiler::CompileOptions;

/// A fast non-cryptographic 64-bit hash of `bytes`: XXH3-64 (the `xxhash-rust` crate, which
/// the entries' checksums use already), 117 ns for a 4 KiB source on this project's machine
/// against 167 ns for the four-lane multiply-rotate hash it replaced. Used only as the pre-key:
/// a hit is always confirmed by comparing the source and options in full.
#[inline]
pub fn fast_hash(bytes: &[u8]) -> u64 {
    xxhash_rust::xxh3::xxh3_64(bytes)
}

/// A 64-bit hash of `source`'s length and of three 64-byte windows of it (start, middle, end),
/// not of every byte: the in-process caches' bucket key, always confirmed by a full comparison
/// (module documentation). Two sources that differ only outside the windows hash alike.
#[inline]
pub(crate) fn sampled_hash(source: &[u8]) -> u64 {
    const W: usize = 64;
    let mid = source.len() / 2;
    let windows = [
        &source[..source.len().min(W)],
        &source[mid.saturating_sub(W / 2)..(mid + W / 2).min(source.len())],
        &source[source.len().saturating_sub(W)..],
    ];
    let mut h = source.len() as u64;
    for w in windows {
        h = (h.rotate_left(7) ^ fast_hash(w)).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    }
    h
}

/// The items of one bucket (sources that hash alike under [`sampled_hash`]), each with
/// [`fast_hash`] of its whole source, made once when it is added. A lookup in a bucket of one
/// compares that item at once; in a few, only those whose hash is the source's; past
/// [`Bucket::FEW`], the items are kept by that hash, so a lookup costs one hash and a map
/// lookup however many sources are alike in the windows (generated sources that differ only
/// in a constant mid-text).
pub(crate) enum Bucket<T> {
    /// Up to [`Bucket::FEW`] items, with their hashes.
    Few(Vec<(u64, T)>),
    /// More, by hash.
    Many(HashMap<u64, Vec<T>, BuildHasherDefault<IdentityHasher>>),
}

impl<T> Default for Bucket<T> {
    fn default() -> Self {
        Bucket::Few(Vec::new())
    }
}

impl<T> Bucket<T> {
    /// Past this many items a bucket keeps them by hash.
    pub(crate) const FEW: usize = 8;

    /// The item `same` accepts among those of `source`'s hash (`source`: the bytes `same`
    /// compares).
    #[inline]
    pub(crate) fn find(&self, source: &[u8], same: impl Fn(&T) -> bool) -> Option<&T> {
        match self {
            Bucket::Few(items) => match &items[..] {
                [] => None,
                [(_, only)] => same(only).then_some(only),
                _ => {
                    let h = fast_hash(source);
                    items
                        .iter()
                        .find(|(full, t)| *full == h && same(t))
                        .map(|(_, t)| t)
                }
            },
            Bucket::Many(by) => by.get(&fast_hash(source))?.iter().find(|t| same(t)),
        }
    }

    /// Adds `item`, whose source hashes to `full` under [`fast_hash`].
    pub(crate) fn push(&mut self, full: u64, item: T) {
        match self {
            Bucket::Few(items) if items.len() < Self::FEW => items.push((full, item)),
            Bucket::Few(items) => {
                let mut by: HashMap<u64, Vec<T>, BuildHasherDefault<IdentityHasher>> =
                    HashMap::default();
                for (h, t) in items.drain(..).chain([(full, item)]) {
                    by.entry(h).or_default().push(t);
                }
                *self = Bucket::Many(by);
            }
            Bucket::Many(by) => by.entry(full).or_default().push(item),
        }
    }

    /// Keeps the items `keep` accepts.
    pub(crate) fn retain(&mut self, mut keep: impl FnMut(&T) -> bool) {
        match self {
            Bucket::Few(items) => items.retain(|(_, t)| keep(t)),
            Bucket::Many(by) => by.retain(|_, items| {
                items.retain(&mut keep);
                !items.is_empty()
            }),
        }
    }

    /// How many items.
    pub(crate) fn len(&self) -> usize {
        match self {
            Bucket::Few(items) => items.len(),
            Bucket::Many(by) => by.values().map(Vec::len).sum(),
        }
    }

    /// Whether it holds none.
    pub(crate) fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[derive(Default)]
struct PreHasher(u64);

impl Hasher for PreHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        self.0 = (self.0.rotate_left(5) ^ fast_hash(bytes)).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    }
    fn write_u64(&mut self, n: u64) {
        self.0 = (self.0.rotate_left(5) ^ n).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    }
    fn write_usize(&mut self, n: usize) {
        self.write_u64(n as u64);
    }
    fn write_u32(&mut self, n: u32) {
        self.write_u64(u64::from(n));
    }
    fn write_u8(&mut self, n: u8) {
        self.write_u64(u64::from(n));
    }
}

/// The pre-key of (source bytes, options): a hash of the source's length and three 64-byte
/// windows of it (start, middle, end; `sampled_hash`), mixed with the
/// options' hash. Equal for equal inputs; unequal inputs may share it (a bucket, confirmed by
/// full comparison).
pub fn pre_key(source: &[u8], options: &CompileOptions) -> u64 {
    let mut h = PreHasher(sampled_hash(source));
    options.hash(&mut h);
    h.finish()
}

/// Identity hasher for maps keyed by an already mixed `u64`.
#[derive(Default)]
pub(crate) struct IdentityHasher(u64);

impl Hasher for IdentityHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for b in bytes {
            self.0 = (self.0 << 8) | u64::from(*b);
        }
    }
    fn write_u64(&mut self, n: u64) {
        self.0 = n;
    }
}

struct Slot<V> {
    source: Box<[u8]>,
    options: CompileOptions,
    value: OnceLock<V>,
    flight: Mutex<()>,
}

impl<V> Slot<V> {
    /// Whether this slot is (`source`, `options`)'s: both compared in full.
    #[inline]
    fn same(&self, source: &[u8], options: &CompileOptions) -> bool {
        *self.source == *source && self.options == *options
    }
}

type Map<V> = HashMap<u64, Bucket<Arc<Slot<V>>>, BuildHasherDefault<IdentityHasher>>;

/// One value per (source, options) for the life of the process (or until removed).
pub struct MemoryCache<V> {
    map: Mutex<Map<V>>,
}

impl<V> Default for MemoryCache<V> {
    fn default() -> Self {
        MemoryCache {
            map: Mutex::new(HashMap::default()),
        }
    }
}

impl<V> std::fmt::Debug for MemoryCache<V> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let entries: usize = self.map.lock().values().map(Bucket::len).sum();
        f.debug_struct("MemoryCache")
            .field("entries", &entries)
            .finish()
    }
}

impl<V: Clone> MemoryCache<V> {
    /// An empty cache.
    pub fn new() -> Self {
        Self::default()
    }

    fn slot(&self, source: &[u8], options: &CompileOptions) -> Arc<Slot<V>> {
        let pk = pre_key(source, options);
        let mut map = self.map.lock();
        let bucket = map.entry(pk).or_default();
        if let Some(s) = bucket.find(source, |s| s.same(source, options)) {
            return Arc::clone(s);
        }
        let s = Arc::new(Slot {
            source: source.into(),
            options: options.clone(),
            value: OnceLock::new(),
            flight: Mutex::new(()),
        });
        bucket.push(fast_hash(source), Arc::clone(&s));
        s
    }

    /// The value for (source, options): cached (`true`), or computed by `make` (`false`).
    /// The source is compared as bytes (`&str`, `String`, `&[u8]`, `Vec<u8>` all do).
    /// Concurrent callers with the same (source, options) wait for one `make`; when it fails,
    /// its error goes to its caller and the next waiter tries again.
    ///
    /// Errors: whatever `make` returns.
    pub fn get_or_try_insert<E>(
        &self,
        source: impl AsRef<[u8]>,
        options: &CompileOptions,
        make: impl FnOnce() -> Result<V, E>,
    ) -> Result<(V, bool), E> {
        let slot = self.slot(source.as_ref(), options);
        if let Some(v) = slot.value.get() {
            return Ok((v.clone(), true));
        }
        let _flight = slot.flight.lock();
        if let Some(v) = slot.value.get() {
            return Ok((v.clone(), true));
        }
        let v = make()?;
        let _ = slot.value.set(v.clone());
        Ok((v, false))
    }

    /// The value for (source, options) when one is cached; never computes, never waits for a
    /// computation under way.
    pub fn get(&self, source: impl AsRef<[u8]>, options: &CompileOptions) -> Option<V> {
        let source = source.as_ref();
        let pk = pre_key(source, options);
        let map = self.map.lock();
        map.get(&pk)?
            .find(source, |s| s.same(source, options))?
            .value
            .get()
            .cloned()
    }

    /// Forgets the value for (source, options), so the next call computes it again.
    pub fn remove(&self, source: impl AsRef<[u8]>, options: &CompileOptions) {
        let source = source.as_ref();
        let pk = pre_key(source, options);
        let mut map = self.map.lock();
        if let Some(bucket) = map.get_mut(&pk) {
            bucket.retain(|s| !s.same(source, options));
            if bucket.is_empty() {
                map.remove(&pk);
            }
        }
    }

    /// Forgets everything.
    pub fn clear(&self) {
        self.map.lock().clear();
    }

    /// How many (source, options) pairs are held (computed or in flight).
    pub fn len(&self) -> usize {
        self.map.lock().values().map(Bucket::len).sum()
    }

    /// Whether nothing is held.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    #[test]
    fn fast_hash_differs_for_one_changed_byte_anywhere() {
        let base = vec![7u8; 4096 + 5];
        let h0 = fast_hash(&base);
        for i in [0, 31, 32, 4095, 4100] {
            let mut b = base.clone();
            b[i] ^= 1;
            assert_ne!(fast_hash(&b), h0, "byte {i}");
        }
    }

    #[test]
    fn sources_alike_in_the_sampled_windows_are_told_apart() {
        // 4 KiB sources that differ in one byte outside the three windows: one bucket.
        let sources: Vec<Vec<u8>> = (0..40u8)
            .map(|i| {
                let mut s = vec![b' '; 4096];
                s[1000] = i;
                s
            })
            .collect();
        assert!(sources
            .iter()
            .all(|s| sampled_hash(s) == sampled_hash(&sources[0])));
        let c = MemoryCache::new();
        let o = CompileOptions::default();
        for (i, s) in sources.iter().enumerate() {
            let (v, hit) = c.get_or_try_insert::<()>(s, &o, || Ok(i)).unwrap();
            assert_eq!((v, hit), (i, false));
        }
        for (i, s) in sources.iter().enumerate().rev() {
            assert_eq!(c.get(s, &o), Some(i));
            let (v, hit) = c.get_or_try_insert::<()>(s, &o, || Ok(99)).unwrap();
            assert_eq!((v, hit), (i, true));
        }
        c.remove(&sources[3], &o);
        assert_eq!(c.get(&sources[3], &o), None);
        assert_eq!(c.get(&sources[4], &o), Some(4));
        assert_eq!(c.len(), 39);
        // The same bytes under other options are another slot of the bucket.
        let o2 = CompileOptions {
            fast_math: true,
            ..o.clone()
        };
        assert_eq!(c.get(&sources[5], &o2), None);
        let (v, hit) = c
            .get_or_try_insert::<()>(&sources[5], &o2, || Ok(77))
            .unwrap();
        assert_eq!((v, hit), (77, false));
        assert_eq!(c.get(&sources[5], &o), Some(5));
    }

    #[test]
    fn a_bucket_finds_by_hash_then_comparison_few_or_many() {
        // Items (source, value); the sources of 0 and 1 collide on purpose (one `full` for
        // both, as two sources hashing alike would): the comparison tells them apart.
        let sources: Vec<Vec<u8>> = (0..20u8).map(|i| vec![i; 3]).collect();
        let full = |i: usize| {
            if i == 1 {
                fast_hash(&sources[0])
            } else {
                fast_hash(&sources[i])
            }
        };
        let find = |b: &Bucket<(usize, u32)>, i: usize| {
            b.find(&sources[i.min(19)], |(j, _)| *j == i)
                .map(|(_, v)| *v)
        };
        let mut b: Bucket<(usize, u32)> = Bucket::default();
        assert!(b.is_empty() && find(&b, 0).is_none());
        for i in 0..20 {
            b.push(full(i), (i, 100 + i as u32));
            assert!(
                matches!(b, Bucket::Few(_)) == (i < Bucket::<()>::FEW),
                "{i}"
            );
            for j in 0..=i {
                // Item 1 is found through item 0's hash: its own source hashes elsewhere.
                let probe = if j == 1 { 0 } else { j };
                let got = b.find(&sources[probe], |(k, _)| *k == j).map(|(_, v)| *v);
                assert_eq!(got, Some(100 + j as u32), "{j} of {i}");
            }
        }
        assert_eq!(b.len(), 20);
        b.retain(|(i, _)| i % 2 == 0);
        assert_eq!(b.len(), 10);
        assert_eq!(find(&b, 3), None);
        assert_eq!(find(&b, 4), Some(104));
        b.retain(|_| false);
        assert!(b.is_empty());
    }

    #[test]
    fn sampled_hash_sees_the_length_and_each_window() {
        let base = vec![b'x'; 4096];
        let h0 = sampled_hash(&base);
        assert_ne!(sampled_hash(&base[..4095]), h0);
        for i in [0, 63, 2048, 4095] {
            let mut b = base.clone();
            b[i] = b'y';
            assert_ne!(sampled_hash(&b), h0, "byte {i}");
        }
        // Short sources: the windows overlap or cover all of it.
        assert_ne!(sampled_hash(b"a"), sampled_hash(b"b"));
        assert_ne!(sampled_hash(b""), sampled_hash(b"a"));
    }

    #[test]
    fn second_lookup_is_a_hit_and_different_options_miss() {
        let c = MemoryCache::new();
        let o = CompileOptions::default();
        let (v, hit) = c.get_or_try_insert::<()>("src", &o, || Ok(1)).unwrap();
        assert_eq!((v, hit), (1, false));
        let (v, hit) = c.get_or_try_insert::<()>("src", &o, || Ok(2)).unwrap();
        assert_eq!((v, hit), (1, true));
        let o2 = CompileOptions {
            fast_math: true,
            ..o
        };
        let (v, hit) = c.get_or_try_insert::<()>("src", &o2, || Ok(3)).unwrap();
        assert_eq!((v, hit), (3, false));
    }

    #[test]
    fn get_finds_only_a_finished_value_and_never_computes() {
        let c: MemoryCache<u32> = MemoryCache::new();
        let o = CompileOptions::default();
        assert_eq!(c.get("src", &o), None);
        // A failed computation leaves a slot without a value.
        let _ = c.get_or_try_insert("src", &o, || Err::<u32, ()>(()));
        assert_eq!(c.get("src", &o), None);
        c.get_or_try_insert("src", &o, || Ok::<u32, ()>(7)).unwrap();
        assert_eq!(c.get("src", &o), Some(7));
        assert_eq!(c.get(b"src2", &o), None);
    }

    #[test]
    fn sources_are_compared_as_bytes_whatever_their_encoding() {
        let c = MemoryCache::new();
        let o = CompileOptions::default();
        // One Latin-1 byte (0xa9, a copyright sign) that is not UTF-8, and its UTF-8 form.
        let latin1: &[u8] = b"// \xa9\nint x;\n";
        let utf8 = "// \u{a9}\nint x;\n";
        let (v, hit) = c.get_or_try_insert::<()>(latin1, &o, || Ok(1)).unwrap();
        assert_eq!((v, hit), (1, false));
        let owned: Vec<u8> = latin1.into();
        let (v, hit) = c.get_or_try_insert::<()>(owned, &o, || Ok(2)).unwrap();
        assert_eq!((v, hit), (1, true));
        let (v, hit) = c.get_or_try_insert::<()>(utf8, &o, || Ok(3)).unwrap();
        assert_eq!((v, hit), (3, false));
    }

    #[test]
    fn concurrent_callers_share_one_computation() {
        let c = Arc::new(MemoryCache::new());
        let calls = Arc::new(AtomicUsize::new(0));
        let threads: Vec<_> = (0..8)
            .map(|_| {
                let (c, calls) = (Arc::clone(&c), Arc::clone(&calls));
                std::thread::spawn(move || {
                    c.get_or_try_insert::<()>("k", &CompileOptions::default(), || {
                        calls.fetch_add(1, Ordering::SeqCst);
                        std::thread::sleep(std::time::Duration::from_millis(50));
                        Ok(42)
                    })
                    .unwrap()
                    .0
                })
            })
            .collect();
        for t in threads {
            assert_eq!(t.join().unwrap(), 42);
        }
        assert_eq!(calls.load(Ordering::SeqCst), 1);
    }

    #[test]
    fn failed_computation_is_retried_by_the_next_caller() {
        let c = MemoryCache::new();
        let o = CompileOptions::default();
        assert!(c.get_or_try_insert("s", &o, || Err("boom")).is_err());
        let (v, hit) = c.get_or_try_insert::<&str>("s", &o, || Ok(5)).unwrap();
        assert_eq!((v, hit), (5, false));
    }
}
