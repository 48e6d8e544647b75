//! Temporary stand-in for the code-object reader (replaced by the real module on merge).
#![allow(missing_docs)]

use crate::target_id::TargetId;
use serde::{Deserialize, Serialize};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Container {
    Elf,
    OffloadBundle,
    CompressedOffloadBundle,
}

#[derive(Debug, thiserror::Error)]
pub enum CodeObjectError {
    #[error("not a code object: {0}")]
    Format(String),
    #[error("no kernel named {0}")]
    NoKernel(String),
}

#[derive(Debug, Clone)]
pub struct CodeObject {
    elf: Vec<u8>,
    target: TargetId,
    kernels: Vec<KernelInfo>,
}

impl CodeObject {
    pub fn from_bytes(
        bytes: &[u8],
        target: Option<&TargetId>,
    ) -> Result<CodeObject, CodeObjectError> {
        if bytes.len() < 64 || &bytes[..4] != b"\x7fELF" {
            return Err(CodeObjectError::Format("no ELF magic".into()));
        }
        let target = match target {
            Some(t) => t.clone(),
            None => {
                TargetId::parse("gfx900").map_err(|e| CodeObjectError::Format(e.to_string()))?
            }
        };
        Ok(CodeObject {
            elf: bytes.to_vec(),
            target,
            kernels: Vec::new(),
        })
    }
    pub fn container(&self) -> Container {
        Container::Elf
    }
    pub fn elf(&self) -> &[u8] {
        &self.elf
    }
    pub fn target_id(&self) -> &TargetId {
        &self.target
    }
    pub fn code_object_version(&self) -> u32 {
        match self.elf.get(8) {
            Some(2) => 4,
            Some(3) => 5,
            Some(4) => 6,
            _ => 0,
        }
    }
    pub fn kernels(&self) -> &[KernelInfo] {
        &self.kernels
    }
    pub fn kernel(&self, name: &str) -> Result<&KernelInfo, CodeObjectError> {
        self.kernels
            .iter()
            .find(|k| k.name == name)
            .ok_or_else(|| CodeObjectError::NoKernel(name.into()))
    }
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct KernelInfo {
    pub name: String,
    pub symbol: String,
    pub args: Vec<KernelArg>,
    pub kernarg_segment_size: u32,
    pub kernarg_segment_align: u32,
    pub group_segment_fixed_size: u32,
    pub private_segment_fixed_size: u32,
    pub sgpr_count: u32,
    pub vgpr_count: u32,
    pub agpr_count: Option<u32>,
    pub sgpr_spill_count: u32,
    pub vgpr_spill_count: u32,
    pub wavefront_size: u32,
    pub max_flat_workgroup_size: u32,
    pub uses_dynamic_stack: bool,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct KernelArg {
    pub name: Option<String>,
    pub type_name: Option<String>,
    pub offset: u32,
    pub size: u32,
    pub value_kind: String,
    pub address_space: Option<String>,
}
