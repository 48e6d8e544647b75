//! An in-process [`Store`] for tests (feature `testing`), its capabilities switchable: the
//! remote tier over it without a server.
//!
//! Stores are named and shared by the process: `memory://<name>` ([`RemoteConfig::new`])
//! opens the store [`MemoryStore::named`] gives for `<name>`, made with every capability on
//! first use, so that two `Jit`s (two cache roots, two "nodes") share it. Values expire after
//! their lifetime; the lock is a name held until its guard is dropped.
//!
//! [`RemoteConfig::new`]: super::RemoteConfig::new

use std::collections::HashMap;
use std::sync::{Arc, LazyLock};
use std::time::{Duration, Instant};

use parking_lot::{Condvar, Mutex};

use super::store::{
    Capabilities, Fields, Got, HeldLock, Locked, ManifestNames, Publish, Store, StoreError, Unless,
};

/// A value and when it expires.
#[derive(Clone, Debug)]
struct Slot {
    value: Value,
    expires: Option<Instant>,
}

#[derive(Clone, Debug)]
enum Value {
    Bytes(Vec<u8>),
    /// A manifests record: each field, its value and its recency.
    Record(HashMap<Vec<u8>, (Vec<u8>, u64)>),
    /// A held lock.
    Lock,
}

#[derive(Debug, Default)]
struct State {
    slots: HashMap<String, Slot>,
    caps: Option<Capabilities>,
    down: bool,
}

/// The in-process store (see the module documentation). Cheap to clone; clones share the
/// values.
#[derive(Clone, Debug)]
pub struct MemoryStore {
    name: String,
    state: Arc<(Mutex<State>, Condvar)>,
}

static NAMED: LazyLock<Mutex<HashMap<String, MemoryStore>>> =
    LazyLock::new(|| Mutex::new(HashMap::new()));

impl MemoryStore {
    /// A new, empty store with `caps`, named `name` in messages only (not shared by name).
    pub fn new(name: &str, caps: Capabilities) -> MemoryStore {
        let state = State {
            caps: Some(caps),
            ..State::default()
        };
        MemoryStore {
            name: name.to_string(),
            state: Arc::new((Mutex::new(state), Condvar::new())),
        }
    }

    /// The process's store called `name` (`memory://<name>`), made with every capability on
    /// first use.
    pub fn named(name: &str) -> Arc<dyn Store> {
        Arc::new(Self::shared(name))
    }

    /// [`MemoryStore::named`] as itself, to switch its capabilities or look at its values.
    pub fn shared(name: &str) -> MemoryStore {
        NAMED
            .lock()
            .entry(name.to_string())
            .or_insert_with(|| MemoryStore::new(name, Capabilities::ALL))
            .clone()
    }

    /// Sets the capabilities the store declares from now on.
    pub fn set_capabilities(&self, caps: Capabilities) {
        self.state.0.lock().caps = Some(caps);
    }

    /// Makes every operation fail as an unreachable server's would (`StoreError::Down`),
    /// or work again.
    pub fn set_down(&self, down: bool) {
        self.state.0.lock().down = down;
    }

    /// The names holding a value now, sorted.
    pub fn names(&self) -> Vec<String> {
        let mut s = self.state.0.lock();
        Self::expire(&mut s);
        let mut n: Vec<String> = s.slots.keys().cloned().collect();
        n.sort();
        n
    }

    /// The bytes under `name`, when it holds a plain value.
    pub fn raw(&self, name: &str) -> Option<Vec<u8>> {
        match &self.state.0.lock().slots.get(name)?.value {
            Value::Bytes(b) => Some(b.clone()),
            _ => None,
        }
    }

    /// Writes `bytes` under `name` as they are, without expiry (to plant or corrupt a value).
    pub fn set_raw(&self, name: &str, bytes: Vec<u8>) {
        self.state.0.lock().slots.insert(
            name.to_string(),
            Slot {
                value: Value::Bytes(bytes),
                expires: None,
            },
        );
    }

    /// Removes every value.
    pub fn clear(&self) {
        self.state.0.lock().slots.clear();
    }

    fn expire(s: &mut State) {
        let now = Instant::now();
        s.slots.retain(|_, v| v.expires.is_none_or(|e| e > now));
    }

    /// The state with expired values gone, or `StoreError::Down`.
    fn live(&self) -> Result<parking_lot::MutexGuard<'_, State>, StoreError> {
        let mut s = self.state.0.lock();
        if s.down {
            return Err(StoreError::Down);
        }
        Self::expire(&mut s);
        Ok(s)
    }

    fn caps(&self) -> Capabilities {
        self.state.0.lock().caps.unwrap_or(Capabilities::ALL)
    }

    fn require(&self, has: bool) -> Result<(), StoreError> {
        if has {
            Ok(())
        } else {
            Err(StoreError::Unsupported)
        }
    }

    fn tag(bytes: &[u8]) -> String {
        crate::digest::hex(&crate::digest::sha256(bytes))
    }

    fn wrong_type() -> StoreError {
        StoreError::Server {
            code: Some("WRONGTYPE".into()),
            message: "WRONGTYPE Operation against a key holding the wrong kind of value".into(),
        }
    }
}

fn bytes_slot(value: &[u8], ttl: Duration) -> Slot {
    Slot {
        value: Value::Bytes(value.to_vec()),
        expires: Instant::now().checked_add(ttl),
    }
}

impl Store for MemoryStore {
    fn describe(&self) -> String {
        format!("memory://{}", self.name)
    }

    fn capabilities(&self) -> Capabilities {
        self.caps()
    }

    fn get(&self, name: &str, bound: u64) -> Result<Got, StoreError> {
        let s = self.live()?;
        let Some(slot) = s.slots.get(name) else {
            return Ok(Got::Missing);
        };
        match &slot.value {
            Value::Bytes(b) if b.len() as u64 > bound => Ok(Got::TooLong(b.len() as u64)),
            Value::Bytes(b) => Ok(Got::Value {
                bytes: b.clone(),
                ttl_left: slot
                    .expires
                    .map(|e| e.saturating_duration_since(Instant::now())),
                tag: Self::tag(b),
            }),
            _ => Ok(Got::NotValue("not a plain value".into())),
        }
    }

    fn put(&self, name: &str, value: &[u8], ttl: Duration) -> Result<(), StoreError> {
        self.live()?
            .slots
            .insert(name.to_string(), bytes_slot(value, ttl));
        Ok(())
    }

    fn delete(&self, name: &str) -> Result<(), StoreError> {
        self.live()?.slots.remove(name);
        Ok(())
    }

    fn renew(&self, names: &[&str], ttl: Duration) -> Result<(), StoreError> {
        let mut s = self.live()?;
        for n in names {
            if let Some(slot) = s.slots.get_mut(*n) {
                slot.expires = Instant::now().checked_add(ttl);
            }
        }
        Ok(())
    }

    fn is_down(&self) -> bool {
        self.state.0.lock().down
    }

    fn create(&self, name: &str, value: &[u8], ttl: Duration) -> Result<bool, StoreError> {
        self.require(self.caps().atomic_create)?;
        let mut s = self.live()?;
        if s.slots.contains_key(name) {
            return Ok(false);
        }
        s.slots.insert(name.to_string(), bytes_slot(value, ttl));
        Ok(true)
    }

    fn delete_if(&self, name: &str, unless: Unless<'_>) -> Result<bool, StoreError> {
        self.require(self.caps().compare_and_delete)?;
        let mut s = self.live()?;
        let matches = match (s.slots.get(name).map(|v| &v.value), unless) {
            (Some(Value::Bytes(b)), Unless::Same(tag)) => Self::tag(b) == tag,
            (Some(Value::Bytes(b)), Unless::Unreadable(bound)) => b.len() as u64 > bound,
            (Some(_), Unless::Unreadable(_)) => true,
            _ => false,
        };
        if matches {
            s.slots.remove(name);
        }
        Ok(matches)
    }

    fn manifests(&self, names: &ManifestNames) -> Result<(Fields, Vec<Vec<u8>>), StoreError> {
        self.require(self.caps().manifest_merge)?;
        let s = self.live()?;
        match s.slots.get(&names.fields).map(|v| &v.value) {
            None => Ok((Fields::new(), Vec::new())),
            Some(Value::Record(r)) => {
                let mut recent: Vec<(&Vec<u8>, u64)> =
                    r.iter().map(|(f, (_, s))| (f, *s)).collect();
                recent.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(b.0)));
                Ok((
                    r.iter().map(|(f, (v, _))| (f.clone(), v.clone())).collect(),
                    recent.into_iter().map(|(f, _)| f.clone()).collect(),
                ))
            }
            Some(_) => Err(Self::wrong_type()),
        }
    }

    fn mark_manifest(
        &self,
        names: &ManifestNames,
        field: &[u8],
        now_ms: u64,
    ) -> Result<(), StoreError> {
        self.require(self.caps().manifest_merge)?;
        let mut s = self.live()?;
        if let Some(Slot {
            value: Value::Record(r),
            ..
        }) = s.slots.get_mut(&names.fields)
        {
            if let Some((_, score)) = r.get_mut(field) {
                *score = now_ms;
            }
        }
        Ok(())
    }

    fn delete_manifest_if(
        &self,
        names: &ManifestNames,
        field: &[u8],
        value: &[u8],
    ) -> Result<bool, StoreError> {
        self.require(self.caps().manifest_merge)?;
        let mut s = self.live()?;
        if let Some(Slot {
            value: Value::Record(r),
            ..
        }) = s.slots.get_mut(&names.fields)
        {
            if r.get(field).is_some_and(|(v, _)| v == value) {
                r.remove(field);
                return Ok(true);
            }
        }
        Ok(false)
    }

    fn publish(&self, p: &Publish<'_>) -> Result<(), StoreError> {
        self.require(self.caps().manifest_merge)?;
        let mut s = self.live()?;
        if p.replace || !s.slots.contains_key(p.entry) {
            s.slots
                .insert(p.entry.to_string(), bytes_slot(p.value, p.ttl));
        }
        let slot = s
            .slots
            .entry(p.manifests.fields.clone())
            .or_insert_with(|| Slot {
                value: Value::Record(HashMap::new()),
                expires: None,
            });
        slot.expires = Instant::now().checked_add(p.ttl);
        // Anything else under the manifests' name is not hipjit's record: replaced, as the
        // Redis store's script does, so that one planted value cannot end the tier for a source.
        if !matches!(slot.value, Value::Record(_)) {
            slot.value = Value::Record(HashMap::new());
        }
        let Value::Record(r) = &mut slot.value else {
            return Err(Self::wrong_type());
        };
        r.insert(p.field.to_vec(), (p.manifest.to_vec(), p.now_ms));
        let mut scored: Vec<(Vec<u8>, f64)> =
            r.iter().map(|(f, (_, s))| (f.clone(), *s as f64)).collect();
        scored.sort_by(|a, b| a.1.total_cmp(&b.1).then_with(|| a.0.cmp(&b.0)));
        let fields = r.keys().cloned().collect();
        let ttl = u64::try_from(p.ttl.as_millis()).unwrap_or(u64::MAX);
        for gone in super::to_evict(fields, scored, p.now_ms, ttl, p.max_manifests) {
            r.remove(&gone);
        }
        Ok(())
    }

    fn lock(
        &self,
        name: &str,
        wait: Duration,
        _warnings: &mut Vec<String>,
        poll: &mut dyn FnMut() -> bool,
    ) -> Locked {
        if !self.caps().lock {
            return Locked::Unavailable;
        }
        let deadline = Instant::now().checked_add(wait);
        loop {
            {
                let Ok(mut s) = self.live() else {
                    return Locked::Unavailable;
                };
                if !s.slots.contains_key(name) {
                    s.slots.insert(
                        name.to_string(),
                        Slot {
                            value: Value::Lock,
                            expires: None,
                        },
                    );
                    drop(s);
                    let held = MemoryLock {
                        store: self.clone(),
                        name: name.to_string(),
                    };
                    if poll() {
                        return Locked::Found;
                    }
                    return Locked::Held(Box::new(held));
                }
            }
            if poll() {
                return Locked::Found;
            }
            if deadline.is_some_and(|d| Instant::now() >= d) {
                self.state.0.lock().slots.remove(name);
                return Locked::TimedOut;
            }
            let mut s = self.state.0.lock();
            self.state.1.wait_for(&mut s, Duration::from_millis(10));
        }
    }
}

/// A held lock of a [`MemoryStore`], released when dropped.
#[derive(Debug)]
struct MemoryLock {
    store: MemoryStore,
    name: String,
}

impl HeldLock for MemoryLock {}

impl Drop for MemoryLock {
    fn drop(&mut self) {
        self.store.state.0.lock().slots.remove(&self.name);
        self.store.state.1.notify_all();
    }
}
