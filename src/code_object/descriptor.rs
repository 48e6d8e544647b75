//! The kernel descriptor: the 64-byte object `<kernel>.kd` the hardware's dispatch reads
//! (LLVM AMDGPUUsage, "Kernel Descriptor", code object v3 and later).
//!
//! Layout (little-endian): `group_segment_fixed_size` u32 at 0, `private_segment_fixed_size` u32
//! at 4, `kernarg_size` u32 at 8, `kernel_code_entry_byte_offset` i64 at 16,
//! `compute_pgm_rsrc3` u32 at 44, `compute_pgm_rsrc1` u32 at 48, `compute_pgm_rsrc2` u32 at 52,
//! `kernel_code_properties` u16 at 56, `kernarg_preload` u16 at 58; the rest is reserved.

use serde::{Deserialize, Serialize};

/// Size of a kernel descriptor in bytes.
pub const KERNEL_DESCRIPTOR_SIZE: usize = 64;

/// A kernel descriptor's fields (AMDGPUUsage "Kernel Descriptor" table).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct KernelDescriptor {
    /// Static LDS per work-group, in bytes.
    pub group_segment_fixed_size: u32,
    /// Scratch per work-item, in bytes.
    pub private_segment_fixed_size: u32,
    /// Size of the kernel argument segment, in bytes.
    pub kernarg_size: u32,
    /// Byte offset from the descriptor to the kernel's first instruction.
    pub kernel_code_entry_byte_offset: i64,
    /// `COMPUTE_PGM_RSRC3` (GFX90A/GFX942: accumulation offset; GFX10+: shared VGPRs...).
    pub compute_pgm_rsrc3: u32,
    /// `COMPUTE_PGM_RSRC1`: register granules, float modes, and on GFX10+ `WGP_MODE` (bit 29).
    pub compute_pgm_rsrc1: u32,
    /// `COMPUTE_PGM_RSRC2`: scratch, user SGPRs, LDS size granules, exceptions.
    pub compute_pgm_rsrc2: u32,
    /// Enable bits for the SGPR inputs, wavefront size 32 (bit 10) and the like.
    pub kernel_code_properties: u16,
    /// Kernel argument preloading (code object v5+; 0 before).
    pub kernarg_preload: u16,
}

impl KernelDescriptor {
    /// Reads the fields from the descriptor's 64 bytes; `None` when `bytes` is shorter.
    pub fn parse(bytes: &[u8]) -> Option<KernelDescriptor> {
        let b = bytes.get(..KERNEL_DESCRIPTOR_SIZE)?;
        let u32_at = |at: usize| u32::from_le_bytes(b[at..at + 4].try_into().unwrap_or_default());
        let u16_at = |at: usize| u16::from_le_bytes(b[at..at + 2].try_into().unwrap_or_default());
        Some(KernelDescriptor {
            group_segment_fixed_size: u32_at(0),
            private_segment_fixed_size: u32_at(4),
            kernarg_size: u32_at(8),
            kernel_code_entry_byte_offset: i64::from_le_bytes(
                b[16..24].try_into().unwrap_or_default(),
            ),
            compute_pgm_rsrc3: u32_at(44),
            compute_pgm_rsrc1: u32_at(48),
            compute_pgm_rsrc2: u32_at(52),
            kernel_code_properties: u16_at(56),
            kernarg_preload: u16_at(58),
        })
    }

    /// `COMPUTE_PGM_RSRC1.WGP_MODE` (bit 29, GFX10 and later): the kernel runs in work-group
    /// processor mode (both CUs of a WGP) rather than CU mode. Always false before GFX10, where
    /// the bit is reserved.
    pub fn wgp_mode(&self) -> bool {
        self.compute_pgm_rsrc1 & (1 << 29) != 0
    }

    /// `KERNEL_CODE_PROPERTIES.ENABLE_WAVEFRONT_SIZE32` (bit 10): the kernel runs in wave32.
    pub fn wavefront_size32(&self) -> bool {
        self.kernel_code_properties & (1 << 10) != 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_are_read_at_their_documented_offsets() {
        let mut b = [0u8; 64];
        b[0..4].copy_from_slice(&1024u32.to_le_bytes());
        b[4..8].copy_from_slice(&16u32.to_le_bytes());
        b[8..12].copy_from_slice(&280u32.to_le_bytes());
        b[16..24].copy_from_slice(&(-4096i64).to_le_bytes());
        b[44..48].copy_from_slice(&0x3u32.to_le_bytes());
        b[48..52].copy_from_slice(&(1u32 << 29 | 0x41).to_le_bytes());
        b[52..56].copy_from_slice(&0x90u32.to_le_bytes());
        b[56..58].copy_from_slice(&(1u16 << 10 | 0x9).to_le_bytes());
        b[58..60].copy_from_slice(&2u16.to_le_bytes());
        let d = KernelDescriptor::parse(&b).unwrap();
        assert_eq!(
            d,
            KernelDescriptor {
                group_segment_fixed_size: 1024,
                private_segment_fixed_size: 16,
                kernarg_size: 280,
                kernel_code_entry_byte_offset: -4096,
                compute_pgm_rsrc3: 3,
                compute_pgm_rsrc1: (1 << 29) | 0x41,
                compute_pgm_rsrc2: 0x90,
                kernel_code_properties: (1 << 10) | 0x9,
                kernarg_preload: 2,
            }
        );
        assert!(d.wgp_mode() && d.wavefront_size32());
        assert_eq!(KernelDescriptor::parse(&b[..63]), None);
    }
}
