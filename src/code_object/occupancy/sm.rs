//! Occupancy of a cubin's kernel on an SM architecture (the rules and their sources are in
//! [`crate::code_object::occupancy`], "SM targets").

use super::{Limit, Occupancy, OccupancyError};
use crate::code_object::KernelInfo;
use crate::target::SmTarget;

/// The residency limits of one SM architecture (module documentation for their sources).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SmProcessor {
    /// Resident blocks per SM.
    pub max_blocks_per_sm: u32,
    /// Resident threads per SM (warp slots times 32).
    pub max_threads_per_sm: u32,
    /// 32-bit registers per SM (and per block).
    pub registers_per_sm: u32,
    /// Register-file sub-partitions per SM (warp schedulers).
    pub sub_partitions: u32,
    /// Registers are allocated per warp in multiples of this.
    pub register_granule: u32,
    /// Most registers one thread may use.
    pub max_registers_per_thread: u32,
    /// Shared memory per SM at the default carve-out, bytes.
    pub shared_per_sm: u32,
    /// Most shared memory one block may use once opted in, bytes (not counting the
    /// reservation).
    pub shared_per_block_optin: u32,
    /// Shared memory the driver reserves per block (sm_80+: 1 KiB), bytes.
    pub shared_reserved_per_block: u32,
    /// Shared memory is allocated to a block in multiples of this, bytes.
    pub shared_granule: u32,
    /// The largest block.
    pub max_threads_per_block: u32,
}

impl SmProcessor {
    /// The limits of `target`'s SM (`sm_90a` and `sm_90f` are `sm_90`'s).
    ///
    /// Errors: [`OccupancyError::UnknownProcessor`] for an SM outside sm_70, sm_72, sm_75,
    /// sm_80, sm_86, sm_87, sm_89, sm_90, sm_100, sm_103, sm_120, sm_121.
    pub fn for_target(target: SmTarget) -> Result<SmProcessor, OccupancyError> {
        const K: u32 = 1024;
        let sm = |blocks, threads, shared_per_sm, optin| SmProcessor {
            max_blocks_per_sm: blocks,
            max_threads_per_sm: threads,
            registers_per_sm: 64 * K,
            sub_partitions: 4,
            register_granule: 256,
            max_registers_per_thread: 255,
            shared_per_sm,
            shared_per_block_optin: optin,
            shared_reserved_per_block: if target.major() >= 8 { K } else { 0 },
            shared_granule: if target.major() >= 8 { 128 } else { 256 },
            max_threads_per_block: 1024,
        };
        Ok(match target.sm {
            70 | 72 => sm(32, 2048, 96 * K, 96 * K),
            75 => sm(16, 1024, 64 * K, 64 * K),
            80 => sm(32, 2048, 164 * K, 163 * K),
            86 => sm(16, 1536, 100 * K, 99 * K),
            87 => sm(16, 1536, 164 * K, 163 * K),
            89 => sm(24, 1536, 100 * K, 99 * K),
            90 | 100 | 103 => sm(32, 2048, 228 * K, 227 * K),
            120 | 121 => sm(24, 1536, 100 * K, 99 * K),
            _ => {
                return Err(OccupancyError::UnknownProcessor {
                    processor: target.to_string(),
                })
            }
        })
    }
}

/// [`super::occupancy`] for a cubin's kernel on `target`: `waves_per_simd` is warps per SM
/// sub-partition (from registers and warp slots), `blocks_per_cu` blocks per SM (what
/// `cuOccupancyMaxActiveBlocksPerMultiprocessor` returns), `waves_per_block` warps per block.
/// A block the SM cannot hold at all (registers or shared memory of one block beyond the
/// per-block limits) gives 0 blocks, as the driver does.
///
/// Errors: [`OccupancyError::UnknownProcessor`], [`OccupancyError::EmptyBlock`],
/// [`OccupancyError::BlockTooLarge`] (above the kernel's `__launch_bounds__`, or 1024),
/// [`OccupancyError::WavefrontSize`] (a kernel whose metadata is not a cubin's: warps are 32).
pub fn occupancy_sm(
    kernel: &KernelInfo,
    target: SmTarget,
    block_size: u32,
    dynamic_shared_bytes: u32,
) -> Result<Occupancy, OccupancyError> {
    occupancy_sm_on(
        &SmProcessor::for_target(target)?,
        kernel,
        block_size,
        dynamic_shared_bytes,
    )
}

/// [`occupancy_sm`] on explicit limits.
///
/// Errors: as [`occupancy_sm`], but for the unknown processor.
pub fn occupancy_sm_on(
    p: &SmProcessor,
    kernel: &KernelInfo,
    block_size: u32,
    dynamic_shared_bytes: u32,
) -> Result<Occupancy, OccupancyError> {
    const WARP: u32 = 32;
    if block_size == 0 {
        return Err(OccupancyError::EmptyBlock);
    }
    let max = match kernel.max_flat_workgroup_size {
        0 => p.max_threads_per_block,
        m => m.min(p.max_threads_per_block),
    };
    if block_size > max {
        return Err(OccupancyError::BlockTooLarge {
            kernel: kernel.name.clone(),
            block: block_size,
            max,
        });
    }
    if !matches!(kernel.wavefront_size, 0 | WARP) {
        return Err(OccupancyError::WavefrontSize {
            kernel: kernel.name.clone(),
            wavefront_size: kernel.wavefront_size,
            processor: "an SM (warps of 32)".to_owned(),
        });
    }
    let warps_per_block = block_size.div_ceil(WARP);
    let warp_slots = p.max_threads_per_sm / WARP;
    // Warp slots per sub-partition, then registers (cudaOccMaxBlocksPerSMRegsLimit).
    let (mut warps_per_sub, mut limit) = (warp_slots / p.sub_partitions, Limit::WaveSlots);
    let mut blocks = warp_slots / warps_per_block;
    let regs = kernel.vgpr_count;
    if regs > 0 {
        let per_warp = (regs * WARP).div_ceil(p.register_granule) * p.register_granule;
        let hardware = u64::from(per_warp)
            * u64::from(warps_per_block.div_ceil(p.sub_partitions) * p.sub_partitions);
        let by_regs =
            if regs > p.max_registers_per_thread || hardware > u64::from(p.registers_per_sm) {
                0
            } else {
                let per_sub = p.registers_per_sm / p.sub_partitions / per_warp;
                if per_sub < warps_per_sub {
                    warps_per_sub = per_sub;
                }
                per_sub * p.sub_partitions / warps_per_block
            };
        if by_regs < blocks {
            (blocks, limit) = (by_regs, Limit::Vgprs);
        }
    }
    if p.max_blocks_per_sm < blocks {
        (blocks, limit) = (p.max_blocks_per_sm, Limit::Workgroups);
    }
    // Shared memory (cudaOccMaxBlocksPerSMSmemLimit): the default carve-out is the SM's
    // largest configuration, so only the block's allocation and the per-block limit count.
    let static_shared =
        u64::from(kernel.group_segment_fixed_size) + u64::from(p.shared_reserved_per_block);
    let total = static_shared + u64::from(dynamic_shared_bytes);
    let granule = u64::from(p.shared_granule.max(1));
    let allocated = total.div_ceil(granule) * granule;
    if allocated > 0 {
        let by_shared =
            if allocated > u64::from(p.shared_per_block_optin + p.shared_reserved_per_block) {
                0
            } else {
                u32::try_from(u64::from(p.shared_per_sm) / allocated).unwrap_or(u32::MAX)
            };
        if by_shared < blocks {
            (blocks, limit) = (by_shared, Limit::Lds);
        }
    }
    Ok(Occupancy {
        waves_per_simd: warps_per_sub,
        blocks_per_cu: blocks,
        waves_per_block: warps_per_block,
        limit,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::code_object::cubin::Cubin;

    /// A kernel of tests/data/code-objects/cuda/occupancy-<sm>.cubin (nvcc 13.0 from
    /// occupancy.cu; `ptxas -v` printed the registers and shared memory asserted here).
    fn kernel(sm: &str, name: &str) -> KernelInfo {
        let path = format!(
            "{}/tests/data/code-objects/cuda/occupancy-{sm}.cubin",
            env!("CARGO_MANIFEST_DIR")
        );
        let cubin = Cubin::from_bytes(&std::fs::read(&path).unwrap()).unwrap();
        assert_eq!(cubin.target().to_string(), sm);
        cubin.kernel(name).unwrap().clone()
    }

    fn blocks(sm: &str, name: &str, block: u32, dynamic: u32) -> (u32, Limit) {
        let o = occupancy_sm(
            &kernel(sm, name),
            SmTarget::parse(sm).unwrap(),
            block,
            dynamic,
        )
        .unwrap();
        (o.blocks_per_cu, o.limit)
    }

    #[test]
    fn cubin_metadata_has_ptxas_figures() {
        // ptxas -v: light 8 registers; heavy 106 on sm_90 (104 on sm_75); tiled 14 registers
        // and 32768 bytes smem on sm_90.
        assert_eq!(kernel("sm_90", "light").vgpr_count, 8);
        assert_eq!(kernel("sm_90", "heavy").vgpr_count, 106);
        assert_eq!(kernel("sm_75", "heavy").vgpr_count, 104);
        let tiled = kernel("sm_90", "tiled");
        assert_eq!(
            (tiled.vgpr_count, tiled.group_segment_fixed_size),
            (14, 32768)
        );
    }

    #[test]
    fn sm_90_warp_slots_registers_blocks_and_shared_memory() {
        // light, 256 threads: 8 warps of 64 slots = 8 blocks (registers: 8 x 32 = 256 a warp,
        // 16384 / 256 = 64 warps per sub-partition, no limit).
        assert_eq!(blocks("sm_90", "light", 256, 0), (8, Limit::WaveSlots));
        // light, 32 threads: 64 blocks by warps, 32 resident blocks at most.
        assert_eq!(blocks("sm_90", "light", 32, 0), (32, Limit::Workgroups));
        // heavy, 256 threads: 106 x 32 = 3392 -> 3584 (granule 256); 16384 / 3584 = 4 warps
        // per sub-partition, 16 per SM; 16 / 8 = 2 blocks.
        assert_eq!(blocks("sm_90", "heavy", 256, 0), (2, Limit::Vgprs));
        // heavy, 1024 threads: 3584 x 32 = 114688 registers > 65536 per block: none.
        assert_eq!(blocks("sm_90", "heavy", 1024, 0).0, 0);
        // tiled, 256 threads: 32768 + 1024 reserved = 33792 (a multiple of 128);
        // 233472 / 33792 = 6 blocks (warps would allow 8).
        assert_eq!(blocks("sm_90", "tiled", 256, 0), (6, Limit::Lds));
        // With 16 KiB dynamic: 50176 a block, 233472 / 50176 = 4.
        assert_eq!(blocks("sm_90", "tiled", 256, 16384), (4, Limit::Lds));
        // 200 KiB dynamic: 238592 > 227 KiB + 1 KiB per block: none.
        assert_eq!(blocks("sm_90", "tiled", 256, 200 * 1024).0, 0);
    }

    #[test]
    fn sm_75_has_half_the_warps_and_64_kib() {
        // tiled, 256 threads: 32768 (granule 256, no reservation before sm_80); 65536 / 32768
        // = 2 blocks (warps: 32 / 8 = 4).
        assert_eq!(blocks("sm_75", "tiled", 256, 0), (2, Limit::Lds));
        // heavy (104 registers: 3328 a warp, 16384 / 3328 = 4 per sub-partition), 128 threads:
        // 16 / 4 = 4 blocks.
        assert_eq!(blocks("sm_75", "heavy", 128, 0), (4, Limit::Vgprs));
        // light, 1024 threads: 32 warp slots hold one block.
        assert_eq!(blocks("sm_75", "light", 1024, 0), (1, Limit::WaveSlots));
    }

    #[test]
    fn sm_80_86_120_limits() {
        // sm_80, tiled at 1024 threads: 64 / 32 = 2 blocks by warps (167936 / 33792 = 4).
        assert_eq!(blocks("sm_80", "tiled", 1024, 0), (2, Limit::WaveSlots));
        // sm_80, heavy (105 registers -> 3584 a warp): 128 threads, 16 / 4 = 4.
        assert_eq!(blocks("sm_80", "heavy", 128, 0), (4, Limit::Vgprs));
        // sm_86: 16 resident blocks (48 / 2 = 24 by warps).
        assert_eq!(blocks("sm_86", "light", 64, 0), (16, Limit::Workgroups));
        // sm_86, tiled at 128 threads: 102400 / 33792 = 3.
        assert_eq!(blocks("sm_86", "tiled", 128, 0), (3, Limit::Lds));
        // sm_120, light at 256 threads: 48 / 8 = 6 blocks.
        assert_eq!(blocks("sm_120", "light", 256, 0), (6, Limit::WaveSlots));
        // sm_120, tiled at 256 threads: 102400 / 33792 = 3.
        assert_eq!(blocks("sm_120", "tiled", 256, 0), (3, Limit::Lds));
    }

    #[test]
    fn refusals_name_what_is_wrong() {
        let light = kernel("sm_90", "light");
        let sm90 = SmTarget::parse("sm_90a").unwrap();
        assert_eq!(
            occupancy_sm(&light, sm90, 0, 0),
            Err(OccupancyError::EmptyBlock)
        );
        assert!(matches!(
            occupancy_sm(&light, sm90, 2048, 0),
            Err(OccupancyError::BlockTooLarge {
                block: 2048,
                max: 1024,
                ..
            })
        ));
        let e = occupancy_sm(&light, SmTarget::parse("sm_61").unwrap(), 256, 0).unwrap_err();
        assert!(e.to_string().contains("sm_61"), "{e}");
        // The unified call takes an SM target as it takes a target ID.
        assert_eq!(
            crate::code_object::occupancy::occupancy(&light, &sm90, 256, 0)
                .unwrap()
                .blocks_per_cu,
            8
        );
    }
}
