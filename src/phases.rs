//! Where a compile's time goes, for benchmarks (`benches/compilers.rs`,
//! `examples/nvidia_compilers.rs`): [`measure`] runs a closure and returns, with its result, the
//! wall-clock time each named phase of hipjit's own work took on the calling thread while it
//! ran (the compiler identity, the key, the compile call, the header manifest, publishing the
//! entry...), in the order they ended.
//!
//! Nothing is timed unless asked: outside [`measure`], a phase costs one thread-local read (no
//! clock is read, nothing is stored). Work done on another thread (a worker, the background
//! pool) is not seen. Below every other layer: it names nothing of hipjit.

use std::cell::{Cell, RefCell};
use std::time::{Duration, Instant};

thread_local! {
    static ON: Cell<bool> = const { Cell::new(false) };
    static LOG: RefCell<Vec<(&'static str, Duration)>> = const { RefCell::new(Vec::new()) };
}

/// Runs `f`, timing the phases hipjit marks on this thread meanwhile: its result, and each
/// phase's name and wall-clock time in the order the phases ended (a phase met several times
/// is listed each time; phases named `"a: b"` lie inside phase `"a"`). Nested calls are timed
/// by the outermost only.
pub fn measure<T>(f: impl FnOnce() -> T) -> (T, Vec<(&'static str, Duration)>) {
    if ON.with(Cell::get) {
        return (f(), Vec::new());
    }
    ON.with(|on| on.set(true));
    LOG.with(|l| l.borrow_mut().clear());
    // Reset even when `f` unwinds.
    struct Off;
    impl Drop for Off {
        fn drop(&mut self) {
            ON.with(|on| on.set(false));
        }
    }
    let off = Off;
    let out = f();
    drop(off);
    (out, LOG.with(|l| std::mem::take(&mut *l.borrow_mut())))
}

/// A phase under way: its time is recorded when it is dropped (or [`Phase::end`]ed), when
/// [`measure`] is timing this thread.
#[must_use = "a phase is timed until it is dropped"]
pub(crate) struct Phase {
    name: &'static str,
    started: Option<Instant>,
}

impl Phase {
    /// Ends the phase now.
    pub(crate) fn end(self) {}
}

impl Drop for Phase {
    fn drop(&mut self) {
        if let Some(started) = self.started {
            let took = started.elapsed();
            LOG.with(|l| l.borrow_mut().push((self.name, took)));
        }
    }
}

/// Starts phase `name` (see [`measure`]); a no-op unless this thread is being measured.
pub(crate) fn start(name: &'static str) -> Phase {
    Phase {
        name,
        started: ON.with(Cell::get).then(Instant::now),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn phases_are_recorded_only_inside_measure_in_the_order_they_end() {
        start("outside").end();
        let (v, log) = measure(|| {
            let outer = start("outer");
            start("outer: inner").end();
            drop(outer);
            7
        });
        assert_eq!(v, 7);
        let names: Vec<_> = log.iter().map(|(n, _)| *n).collect();
        assert_eq!(names, ["outer: inner", "outer"]);
        assert!(log[1].1 >= log[0].1);
        start("after").end();
        let ((), log) = measure(|| ());
        assert!(log.is_empty());
    }
}
