//! The kernel-level cache of [`crate::jit::Jit::kernel`]:
//! one owned [`Kernel`] per (runtime, device, source, options, kernel name), so a hit is a map
//! lookup, a full comparison and an `Arc` clone, with no driver call.
//!
//! The map key is cheap on purpose: the device, the kernel name's hash and [`sampled_hash`] of
//! the source (its length and three 64-byte windows), not a hash of the whole source. A hit is
//! always confirmed by comparing the source bytes (`memcmp`), the options and the name in full,
//! so two sources that differ only outside the windows share a bucket and are told apart there
//! (by each entry's [`fast_hash`] of its whole source first, as the in-process cache does:
//! [`Bucket`]); never a wrong kernel.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

use parking_lot::Mutex;

use crate::cache::memory::{fast_hash, sampled_hash, Bucket};
use crate::safe::device::Device;
use crate::safe::kernel::Kernel;

/// (sampled hash, source length, device ordinal, runtime identity).
type Key = (u64, usize, i32, usize);

/// The map's hasher: the key's first field is a hash already, so its fields are only mixed
/// (a multiply and a rotate each), not hashed again with SipHash (a fifth of a hit's time).
/// Buckets are confirmed by full comparison, so a weak mix costs speed at worst, never a wrong
/// kernel.
#[derive(Default)]
struct KeyMix(u64);

impl Hasher for KeyMix {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.write_u64(u64::from(b));
        }
    }
    fn write_u64(&mut self, v: u64) {
        self.0 = (self.0 ^ v)
            .wrapping_mul(0x9e37_79b9_7f4a_7c15)
            .rotate_left(31);
    }
    fn write_usize(&mut self, v: usize) {
        self.write_u64(v as u64);
    }
    fn write_i32(&mut self, v: i32) {
        self.write_u64(v as u32 as u64);
    }
}

struct Entry<O> {
    source: Box<[u8]>,
    options: O,
    name: Box<str>,
    kernel: Kernel,
}

/// Kernels by (runtime, device, source, options `O`, name).
pub(crate) struct KernelCache<O> {
    map: Mutex<HashMap<Key, Bucket<Entry<O>>, BuildHasherDefault<KeyMix>>>,
}

impl<O> Default for KernelCache<O> {
    fn default() -> Self {
        KernelCache {
            map: Mutex::new(HashMap::default()),
        }
    }
}

fn key(device: &Device, source: &[u8], name: &str) -> Key {
    let h = (fast_hash(name.as_bytes()).rotate_left(7) ^ sampled_hash(source))
        .wrapping_mul(0x9e37_79b9_7f4a_7c15);
    (
        h,
        source.len(),
        device.ordinal(),
        std::sync::Arc::as_ptr(&device.runtime().inner) as usize,
    )
}

impl<O> KernelCache<O> {
    /// The kernel cached for `device`, `source`, options for which `same_options` holds, and
    /// `name`.
    pub(crate) fn get(
        &self,
        device: &Device,
        source: &[u8],
        same_options: impl Fn(&O) -> bool,
        name: &str,
    ) -> Option<Kernel> {
        let k = key(device, source, name);
        let map = self.map.lock();
        let same =
            |e: &Entry<O>| *e.name == *name && *e.source == *source && same_options(&e.options);
        map.get(&k)?.find(source, same).map(|e| e.kernel.clone())
    }

    /// Caches `kernel` for `device`, `source`, `options` and `name` (a second insert of the
    /// same is ignored).
    pub(crate) fn insert(
        &self,
        device: &Device,
        source: &[u8],
        options: O,
        name: &str,
        kernel: &Kernel,
    ) where
        O: PartialEq,
    {
        let k = key(device, source, name);
        let mut map = self.map.lock();
        let bucket = map.entry(k).or_default();
        let same = |e: &Entry<O>| *e.name == *name && *e.source == *source && e.options == options;
        if bucket.find(source, same).is_none() {
            bucket.push(
                fast_hash(source),
                Entry {
                    source: source.into(),
                    options,
                    name: name.into(),
                    kernel: kernel.clone(),
                },
            );
        }
    }

    /// Forgets every kernel (their libraries unload once no other handle holds them).
    pub(crate) fn clear(&self) {
        self.map.lock().clear();
    }
}
