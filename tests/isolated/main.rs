//! Tests that need a process to themselves: they set process-wide state that the other tests
//! must not see (the environment the fixture runtime reads), or observe what every process does
//! (the files an NVRTC compile opens).

#[path = "../common/mod.rs"]
mod common;

mod multi_device;
#[cfg(feature = "cli")]
mod nvrtc_key;
