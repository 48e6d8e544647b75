//! The tests against the machine's real compilers, runtimes and header sets (Debian's hipcc 5.2.3 and HIP
//! 5.2.3 here; scripts/sid-test.sh runs this binary again inside the sid root: hipcc 7.0.2, HIP 6.4.3).

#[path = "../common/mod.rs"]
mod common;

mod cache_key;
#[cfg(feature = "cli")]
mod compile_command;
mod compiler;
mod hiprtc;
mod host_programs;
mod in_memory_headers;
mod parity;
#[cfg(feature = "cli")]
mod python_rocm;
mod runtime;
mod selection;
mod source_name;
