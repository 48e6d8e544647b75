//! The targets code is compiled for: AMDGPU target IDs ([`amdgpu`], LLVM AMDGPUUsage "Target
//! ID") and NVIDIA SM architectures ([`sm`]). Plain values, parsed and compared; this module
//! names nothing of hipjit above it (`docs/architecture.md`).

pub mod amdgpu;
pub mod sm;

pub use amdgpu::{TargetId, TargetIdError};
pub use sm::{SmTarget, SmTargetError};
