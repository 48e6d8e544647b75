//! The checks a caller can ask of a result ([`crate::compiler::Checks`]), read from each code
//! object's metadata (NT_AMDGPU_METADATA, LLVM AMDGPUUsage "Code Object V3+ Metadata").

use super::compiled::CompiledInner;
use crate::compiler::CompileOptions;

/// A failed metadata check ([`crate::compiler::Checks`]).
#[derive(Debug, Clone, thiserror::Error, PartialEq, Eq)]
#[error("check failed for {target}: {what}")]
pub struct CheckFailed {
    /// The code object's target ID.
    pub target: String,
    /// What failed, naming the kernel.
    pub what: String,
}

pub(crate) fn run_checks(
    inner: &CompiledInner,
    options: &CompileOptions,
) -> Result<(), CheckFailed> {
    for co in &inner.code_objects {
        let fail = |what: String| CheckFailed {
            target: co.target_id().to_string(),
            what,
        };
        if co.kernels().is_empty() {
            return Err(fail(
                "the code object has no kernel metadata (NT_AMDGPU_METADATA amdhsa.kernels)".into(),
            ));
        }
        for k in co.kernels() {
            if options.checks.no_spills && (k.sgpr_spill_count > 0 || k.vgpr_spill_count > 0) {
                return Err(fail(format!(
                    "kernel {} spills registers ({} SGPRs, {} VGPRs)",
                    k.name, k.sgpr_spill_count, k.vgpr_spill_count
                )));
            }
            if options.checks.no_scratch
                && (k.private_segment_fixed_size > 0 || k.uses_dynamic_stack)
            {
                return Err(fail(format!(
                    "kernel {} uses scratch memory ({} bytes private segment{})",
                    k.name,
                    k.private_segment_fixed_size,
                    if k.uses_dynamic_stack {
                        ", dynamic stack"
                    } else {
                        ""
                    }
                )));
            }
        }
    }
    Ok(())
}
