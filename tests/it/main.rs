//! The integration tests that share one process: a module per area (tests/common holds the helpers).

#[path = "../common/mod.rs"]
mod common;

#[cfg(feature = "testing")]
mod background;
mod cache_bundle;
mod cache_disk;
#[cfg(feature = "cli")]
mod cache_explain;
mod cache_hit_rtc_library;
#[cfg(feature = "cli")]
mod cache_hit_syscalls;
mod cache_key;
mod cache_names;
mod cache_race;
mod cache_relocation;
mod cache_trust;
#[cfg(feature = "cli")]
mod cache_warm;
#[cfg(feature = "cli")]
mod cli;
mod code_object;
mod code_object_corpus;
mod code_object_malformed;
mod compiler_identity;
mod compiler_process;
mod cuda_fixture;
mod docs;
mod failure_memo;
#[cfg(feature = "testing")]
mod fake_compiler;
mod fixture_runtime;
mod frozen;
mod fuzz_regressions;
mod gfx_override;
#[cfg(feature = "cli")]
mod hit_memo;
mod hostile_inputs;
mod in_memory_headers;
mod jit_load;
mod jit_options;
mod jit_process;
mod layers;
mod layout;
mod nvcc_cubin;
#[cfg(feature = "cli")]
mod nvcc_environment;
mod nvcc_host_compiler;
mod nvrtc;
mod nvrtc_parity;
mod nvrtc_selection;
mod nvrtc_toolkit_headers;
mod occupancy;
mod package_contents;
mod public_errors;
mod python_rocm;
#[cfg(feature = "redis")]
mod remote_cache;
#[cfg(all(feature = "http", feature = "testing"))]
mod remote_http;
#[cfg(feature = "testing")]
mod remote_store;
#[cfg(feature = "cli")]
mod rtc_worker;
mod runtime_loader;
mod source_name;
mod symbol_binding;
mod system_include_dirs;
mod target_id;
#[cfg(feature = "testing")]
mod testing_runtime;
