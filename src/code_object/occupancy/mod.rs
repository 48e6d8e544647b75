//! Occupancy from a kernel's metadata alone: how many waves of a kernel fit on one SIMD and how
//! many workgroups (blocks) on one compute unit, on a processor named by a target ID, with no
//! device and no runtime. A kernel library uses it to pick a block size before loading anything.
//!
//! What limits residency, per LLVM's AMDGPUUsage ("Processors", "Kernel Descriptor":
//! `GRANULATED_WORKITEM_VGPR_COUNT`, `GRANULATED_LDS_SIZE`) and the register-file sizes of the
//! CDNA/RDNA ISA documents, as LLVM's `AMDGPU::IsaInfo` computes them:
//!
//! - **VGPRs**: each SIMD has a file of `total_vgprs` registers per lane, allocated to a wave in
//!   granules. Waves per SIMD = `total_vgprs / round_up(vgpr_count, granule)`. gfx6-gfx908: 256
//!   per lane, granule 4 (gfx8-gfx908). gfx90a/gfx94x/gfx950: one unified VGPR+AGPR file of 512, granule 8
//!   (the metadata's `.vgpr_count` already includes the AGPRs there). gfx10.1: 1024 (wave32) /
//!   512 (wave64), granule 8 / 4. gfx10.3, gfx1102/gfx1103/gfx115x: 1024 / 512, granule 16 / 8.
//!   gfx1100, gfx1101, gfx1151, gfx12 (1.5x register file): 1536 / 768, granule 24 / 12.
//! - **SGPRs** (gfx8-gfx9 only; they do not limit gfx10+): 800 per SIMD; `.sgpr_count` (which
//!   includes VCC, FLAT_SCRATCH and XNACK) of at most 80 allows 10 waves, 88 allows 9, 100
//!   allows 8, more allows 7.
//! - **Wave slots**: at most 10 waves per SIMD on gfx8-gfx908, 8 on gfx90a/gfx94x/gfx950, 20 on
//!   gfx10.1, 16 on gfx10.3 and later.
//! - **LDS**: a workgroup's static plus dynamic LDS, rounded up to the allocation granule (512
//!   bytes on gfx7-gfx10.1 and gfx90a/gfx94x; 1280 on gfx950; 1024 on gfx10.3 and later), out of
//!   64 KiB per compute unit (160 KiB on gfx950; 128 KiB per WGP on gfx10+ in WGP mode).
//! - **Workgroups**: a workgroup of more than one wave holds a barrier; a compute unit has 16
//!   (32 per WGP on gfx10+ in WGP mode).
//!
//! A "compute unit" here is what HIP calls a multiprocessor: on gfx10 and later in WGP mode (the
//! mode hipcc compiles for by default) it is the workgroup processor of 4 SIMD32s; in CU mode
//! ([`Processor::cu_mode`]) a CU of 2. Blocks per compute unit are counted the way the HIP
//! runtime's `hipModuleOccupancyMaxActiveBlocksPerMultiprocessor` counts them: the threads the
//! register-limited waves of all SIMDs hold, divided by the block's threads rounded up to whole
//! waves, then capped by LDS and workgroup slots.
//!
//! # SM targets
//!
//! For an SM target ([`SmTarget`], HIP's NVIDIA platform): the occupancy of a cubin's kernel
//! from its [`KernelInfo`] alone (registers per thread, static shared memory,
//! `__launch_bounds__`): the figure the CUDA driver's
//! `cuOccupancyMaxActiveBlocksPerMultiprocessor` returns for the loaded kernel, with the
//! function's default shared-memory carve-out and the driver's default launch attributes.
//!
//! The rules are those of NVIDIA's occupancy calculator, `cuda_occupancy.h` (shipped with
//! the CUDA toolkit, CUDA 13.0: `cudaOccMaxBlocksPerSMWarpsLimit`,
//! `cudaOccMaxBlocksPerSMRegsLimit`, `cudaOccMaxBlocksPerSMSmemLimit`,
//! `cudaOccMaxBlocksPerMultiprocessor`, `cudaOccRegAllocationGranularity`,
//! `cudaOccSMemAllocationGranularity`, `cudaOccSubPartitionsPerMultiprocessor`,
//! `cudaOccAlignUpShmemSizeVoltaPlus`); the per-architecture limits a device reports
//! (threads and shared memory per SM, shared memory per block, the per-block reservation) are
//! those of the CUDA C++ Programming Guide, "Compute Capabilities", "Technical Specifications
//! per Compute Capability":
//!
//! - **Blocks**: at most `max_blocks_per_sm` resident blocks (32 on sm_70/72/80/90/100/103,
//!   16 on sm_75/86/87, 24 on sm_89/120/121).
//! - **Warps**: `max_threads_per_sm / 32` warp slots (2048 threads on sm_70/72/80/90/100/103,
//!   1536 on sm_86/87/89/120/121, 1024 on sm_75); a block takes `ceil(block / 32)` of them.
//! - **Registers**: 65536 32-bit registers per SM in 4 sub-partitions of 16384; a warp is
//!   allocated `round_up(regs_per_thread * 32, 256)` registers in one sub-partition, so an SM
//!   holds `4 * floor(16384 / per_warp)` warps. A block fails outright when
//!   `per_warp * round_up(warps, 4)` exceeds the 65536 registers per block (the hardware
//!   check) or a thread uses more than 255.
//! - **Shared memory**: a block takes its static plus dynamic shared memory plus the 1 KiB the
//!   driver reserves per block on sm_80 and later, rounded up to 128 bytes (256 on sm_7x), out
//!   of the SM's shared memory at the default carve-out (96 KiB on sm_70/72, 64 KiB on sm_75,
//!   164 KiB on sm_80/87, 100 KiB on sm_86/89/120/121, 228 KiB on sm_90/100/103). A block
//!   needing more than the opt-in maximum per block (its kernel given
//!   `CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES`: 96, 64, 163, 99, 227 KiB) fits none.
//!
//! Not modelled: a carve-out set on the function (`CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT`),
//! a dynamic-shared-memory limit set below the launch's, cluster launches, and partitioned
//! global caching (sm_5x/6x only).

use crate::code_object::KernelInfo;
use crate::target::{SmTarget, TargetId};

mod sm;
pub use sm::{occupancy_sm, occupancy_sm_on, SmProcessor};

/// A processor [`occupancy`] knows the limits of: an AMDGPU [`TargetId`] (a code object's
/// kernel, the rules above) or an [`SmTarget`] (a cubin's kernel, the rules of "SM targets"
/// above). One
/// call serves both vendors: `info.occupancy(target, block, dynamic_lds)`.
pub trait OccupancyTarget {
    /// The occupancy of `kernel` on this processor for blocks of `block_size` threads with
    /// `dynamic_lds_bytes` of dynamic LDS (shared memory).
    ///
    /// Errors: as [`occupancy`].
    fn kernel_occupancy(
        &self,
        kernel: &KernelInfo,
        block_size: u32,
        dynamic_lds_bytes: u32,
    ) -> Result<Occupancy, OccupancyError>;
}

impl OccupancyTarget for TargetId {
    fn kernel_occupancy(
        &self,
        kernel: &KernelInfo,
        block_size: u32,
        dynamic_lds_bytes: u32,
    ) -> Result<Occupancy, OccupancyError> {
        occupancy_on(
            &Processor::for_target(self)?,
            self.processor(),
            kernel,
            block_size,
            dynamic_lds_bytes,
        )
    }
}

impl OccupancyTarget for SmTarget {
    fn kernel_occupancy(
        &self,
        kernel: &KernelInfo,
        block_size: u32,
        dynamic_lds_bytes: u32,
    ) -> Result<Occupancy, OccupancyError> {
        occupancy_sm(kernel, *self, block_size, dynamic_lds_bytes)
    }
}

/// The residency parameters of one processor (see the module documentation for their sources).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Processor {
    /// SIMDs per compute unit (per WGP on gfx10+ in WGP mode).
    pub simds_per_cu: u32,
    /// Wave slots per SIMD.
    pub max_waves_per_simd: u32,
    /// VGPRs per lane of one SIMD's register file for wave64 (`[wave32, wave64]` on gfx10+).
    pub total_vgprs: [u32; 2],
    /// VGPR allocation granule per lane, `[wave32, wave64]`.
    pub vgpr_granule: [u32; 2],
    /// Whether `.sgpr_count` limits waves (gfx8-gfx9).
    pub sgprs_limit_waves: bool,
    /// LDS per compute unit, bytes.
    pub lds_per_cu: u32,
    /// LDS allocation granule, bytes.
    pub lds_granule: u32,
    /// Workgroups of more than one wave resident per compute unit (barrier slots).
    pub max_barriers_per_cu: u32,
    /// Whether the processor supports wave32 (gfx10+).
    pub wave32: bool,
}

/// Why [`occupancy`] could not answer.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum OccupancyError {
    /// The processor (a target ID's, or an SM target) is not in hipjit's tables.
    #[error("no occupancy parameters for processor {processor} (known: gfx8, gfx9 incl. gfx90a, gfx94x and gfx950, gfx10.1, gfx10.3, gfx11, gfx12; sm_70, sm_72, sm_75, sm_80, sm_86, sm_87, sm_89, sm_90, sm_100, sm_103, sm_120, sm_121)")]
    UnknownProcessor {
        /// The target ID's processor.
        processor: String,
    },
    /// A block size of 0 threads.
    #[error("a block of 0 threads")]
    EmptyBlock,
    /// More threads per block than the kernel allows (`.max_flat_workgroup_size`, which
    /// reflects `__launch_bounds__`).
    #[error(
        "a block of {block} threads exceeds kernel {kernel}'s .max_flat_workgroup_size of {max}"
    )]
    BlockTooLarge {
        /// The kernel.
        kernel: String,
        /// Threads asked for.
        block: u32,
        /// The kernel's limit.
        max: u32,
    },
    /// The code object lacks the kernel or its descriptor ([`occupancy_of`]).
    #[error("{0}")]
    CodeObject(String),
    /// A wavefront size the processor does not run.
    #[error("kernel {kernel} has wavefront size {wavefront_size}, which {processor} does not run")]
    WavefrontSize {
        /// The kernel.
        kernel: String,
        /// Its `.wavefront_size`.
        wavefront_size: u32,
        /// The processor.
        processor: String,
    },
}

/// What bounded the result of [`occupancy`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Limit {
    /// Wave slots per SIMD (warp slots per SM): the kernel's registers leave room for more.
    WaveSlots,
    /// The VGPR (VGPR + AGPR) file; on an SM, the register file.
    Vgprs,
    /// The SGPR file (gfx8-gfx9).
    Sgprs,
    /// LDS per compute unit (shared memory per SM).
    Lds,
    /// Barrier (workgroup) slots per compute unit; on an SM, its resident blocks.
    Workgroups,
}

/// Residency of one kernel at one block size on one processor.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Occupancy {
    /// Waves of this kernel one SIMD holds, from its registers and the wave slots.
    pub waves_per_simd: u32,
    /// Workgroups (blocks) resident per compute unit at once: the figure
    /// `hipModuleOccupancyMaxActiveBlocksPerMultiprocessor` returns.
    pub blocks_per_cu: u32,
    /// Waves per block: the block's threads over the wavefront size, rounded up.
    pub waves_per_block: u32,
    /// What bounded `blocks_per_cu` (or `waves_per_simd` when registers and slots decide).
    pub limit: Limit,
}

impl Occupancy {
    /// Resident waves per compute unit (`blocks_per_cu * waves_per_block`).
    pub fn waves_per_cu(&self) -> u32 {
        self.blocks_per_cu * self.waves_per_block
    }
}

impl Processor {
    /// The parameters of `target`'s processor (features such as `xnack` do not change them).
    ///
    /// Errors: [`OccupancyError::UnknownProcessor`].
    pub fn for_target(target: &TargetId) -> Result<Processor, OccupancyError> {
        Processor::named(target.processor())
    }

    /// The parameters of the processor `name` (`gfx90a`, `gfx942`, `gfx1100`...).
    ///
    /// Errors: [`OccupancyError::UnknownProcessor`].
    pub fn named(name: &str) -> Result<Processor, OccupancyError> {
        let unknown = || OccupancyError::UnknownProcessor {
            processor: name.to_owned(),
        };
        let digits = name.strip_prefix("gfx").ok_or_else(unknown)?;
        // gfx9 family: gfx9XY with a hexadecimal stepping; gfx10+: gfxMMmS.
        let gcn = |max_waves, total, granule, sgprs, lds, lds_granule| Processor {
            simds_per_cu: 4,
            max_waves_per_simd: max_waves,
            total_vgprs: [0, total],
            vgpr_granule: [0, granule],
            sgprs_limit_waves: sgprs,
            lds_per_cu: lds,
            lds_granule,
            max_barriers_per_cu: 16,
            wave32: false,
        };
        let rdna = |max_waves, total32: u32, granule32: u32, lds_granule| Processor {
            simds_per_cu: 4,
            max_waves_per_simd: max_waves,
            total_vgprs: [total32, total32 / 2],
            vgpr_granule: [granule32, granule32 / 2],
            sgprs_limit_waves: false,
            lds_per_cu: 128 * 1024,
            lds_granule,
            max_barriers_per_cu: 32,
            wave32: true,
        };
        Ok(match digits {
            "801" | "802" | "803" | "805" | "810" | "900" | "902" | "904" | "906" | "908"
            | "909" | "90c" | "9-generic" => gcn(10, 256, 4, true, 64 * 1024, 512),
            "90a" | "940" | "941" | "942" | "9-4-generic" => gcn(8, 512, 8, true, 64 * 1024, 512),
            "950" => gcn(8, 512, 8, true, 160 * 1024, 1280),
            "1010" | "1011" | "1012" | "1013" | "10-1-generic" => rdna(20, 1024, 8, 512),
            "1030" | "1031" | "1032" | "1033" | "1034" | "1035" | "1036" | "10-3-generic"
            | "1102" | "1103" | "1150" | "1152" | "1153" => rdna(16, 1024, 16, 1024),
            "1100" | "1101" | "1151" | "11-generic" | "1200" | "1201" | "12-generic" => {
                rdna(16, 1536, 24, 1024)
            }
            _ => return Err(unknown()),
        })
    }

    /// The same processor in CU mode (gfx10+: a workgroup's waves stay on one CU of 2 SIMDs
    /// with 64 KiB of LDS, as hipRTC 5.2 compiles or `-mcumode` asks); unchanged before gfx10.
    pub fn cu_mode(self) -> Processor {
        if !self.wave32 {
            return self;
        }
        Processor {
            simds_per_cu: 2,
            lds_per_cu: 64 * 1024,
            max_barriers_per_cu: 16,
            ..self
        }
    }

    /// Waves per SIMD a wave needing `vgprs` VGPRs (per lane) allows at `wavefront_size`
    /// (LLVM `getNumWavesPerEUWithNumVGPRs`), not counting wave slots.
    pub fn waves_with_vgprs(&self, vgprs: u32, wavefront_size: u32) -> u32 {
        let i = usize::from(wavefront_size == 64);
        let (total, granule) = (self.total_vgprs[i], self.vgpr_granule[i]);
        if vgprs == 0 || granule == 0 {
            return self.max_waves_per_simd;
        }
        (total / vgprs.div_ceil(granule).saturating_mul(granule)).max(1)
    }

    /// Waves per SIMD a wave needing `sgprs` SGPRs allows (LLVM
    /// `GCNSubtarget::getOccupancyWithNumSGPRs`); the wave slots on gfx10+.
    pub fn waves_with_sgprs(&self, sgprs: u32) -> u32 {
        if !self.sgprs_limit_waves {
            return self.max_waves_per_simd;
        }
        match sgprs {
            0..=80 => 10,
            81..=88 => 9,
            89..=100 => 8,
            _ => 7,
        }
    }
}

/// The occupancy of `kernel` on `target` for blocks of `block_size` threads with
/// `dynamic_lds_bytes` of dynamic LDS: an AMDGPU target ID (see the module documentation for
/// the rules) or an SM target ("SM targets" there; "compute unit" and "wave" read SM and warp).
///
/// ```
/// use hipjit::code_object::cubin::Cubin;
/// use hipjit::occupancy::occupancy;
/// use hipjit::target_id::TargetId;
/// use hipjit::cuda::target::SmTarget;
///
/// // AMD: a kernel of a code object; NVIDIA: a kernel of a cubin. The same call.
/// let co = hipjit::code_object::CodeObject::from_bytes(
///     &std::fs::read("tests/data/code-objects/kernels-gfx90a.hsaco")?, None)?;
/// let amd = occupancy(&co.kernels()[0], co.target_id(), 256, 0)?;
/// let cubin = Cubin::from_bytes(
///     &std::fs::read("tests/data/code-objects/cuda/occupancy-sm_90.cubin")?)?;
/// let nv = occupancy(cubin.kernel("light")?, &SmTarget::parse("sm_90")?, 256, 0)?;
/// assert_eq!(nv.blocks_per_cu, 8); // 64 warp slots / 8 warps per block
/// assert!(amd.blocks_per_cu > 0);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
///
/// Errors: [`OccupancyError::UnknownProcessor`], [`OccupancyError::EmptyBlock`],
/// [`OccupancyError::BlockTooLarge`] (above `.max_flat_workgroup_size`, a cubin's
/// `__launch_bounds__`), [`OccupancyError::WavefrontSize`].
pub fn occupancy(
    kernel: &KernelInfo,
    target: &(impl OccupancyTarget + ?Sized),
    block_size: u32,
    dynamic_lds_bytes: u32,
) -> Result<Occupancy, OccupancyError> {
    target.kernel_occupancy(kernel, block_size, dynamic_lds_bytes)
}

/// [`occupancy`] on explicit processor parameters (for CU mode: [`Processor::cu_mode`]).
///
/// Errors: as [`occupancy`], but for the unknown processor.
pub fn occupancy_on(
    processor: &Processor,
    processor_name: &str,
    kernel: &KernelInfo,
    block_size: u32,
    dynamic_lds_bytes: u32,
) -> Result<Occupancy, OccupancyError> {
    if block_size == 0 {
        return Err(OccupancyError::EmptyBlock);
    }
    if kernel.max_flat_workgroup_size > 0 && block_size > kernel.max_flat_workgroup_size {
        return Err(OccupancyError::BlockTooLarge {
            kernel: kernel.name.clone(),
            block: block_size,
            max: kernel.max_flat_workgroup_size,
        });
    }
    let wave = match kernel.wavefront_size {
        0 => 64,
        64 => 64,
        32 if processor.wave32 => 32,
        other => {
            return Err(OccupancyError::WavefrontSize {
                kernel: kernel.name.clone(),
                wavefront_size: other,
                processor: processor_name.to_owned(),
            })
        }
    };
    let by_vgprs = processor.waves_with_vgprs(kernel.vgpr_count, wave);
    let by_sgprs = processor.waves_with_sgprs(kernel.sgpr_count);
    let (mut waves_per_simd, mut limit) = (processor.max_waves_per_simd, Limit::WaveSlots);
    if by_vgprs < waves_per_simd {
        (waves_per_simd, limit) = (by_vgprs, Limit::Vgprs);
    }
    if by_sgprs < waves_per_simd {
        (waves_per_simd, limit) = (by_sgprs, Limit::Sgprs);
    }
    let waves_per_block = block_size.div_ceil(wave);
    let mut blocks = processor.simds_per_cu * waves_per_simd / waves_per_block;
    if waves_per_block > 1 && processor.max_barriers_per_cu < blocks {
        (blocks, limit) = (processor.max_barriers_per_cu, Limit::Workgroups);
    }
    let lds = u64::from(kernel.group_segment_fixed_size) + u64::from(dynamic_lds_bytes);
    if lds > 0 {
        let granule = u64::from(processor.lds_granule.max(1));
        let allocated = lds.div_ceil(granule) * granule;
        let by_lds = u32::try_from(u64::from(processor.lds_per_cu) / allocated).unwrap_or(0);
        if by_lds < blocks {
            (blocks, limit) = (by_lds, Limit::Lds);
        }
    }
    Ok(Occupancy {
        waves_per_simd,
        blocks_per_cu: blocks,
        waves_per_block,
        limit,
    })
}

/// The block size, among `candidates`, that keeps the most waves resident per compute unit
/// (ties go to the earlier candidate); candidates the kernel refuses are skipped. `None` when
/// none fits.
pub fn best_block_size(
    kernel: &KernelInfo,
    target: &(impl OccupancyTarget + ?Sized),
    dynamic_lds_bytes: u32,
    candidates: impl IntoIterator<Item = u32>,
) -> Option<(u32, Occupancy)> {
    let mut best: Option<(u32, Occupancy)> = None;
    for block in candidates {
        let Ok(occ) = occupancy(kernel, target, block, dynamic_lds_bytes) else {
            continue;
        };
        if occ.blocks_per_cu == 0 {
            continue;
        }
        if best.is_none_or(|(_, b)| occ.waves_per_cu() > b.waves_per_cu()) {
            best = Some((block, occ));
        }
    }
    best
}

/// [`occupancy`] of kernel `name` of `code_object`, on the code object's processor, in the mode
/// its kernel descriptor says (`COMPUTE_PGM_RSRC1.WGP_MODE`: a gfx10+ kernel compiled for CU
/// mode, as hipRTC 5.2 or `-mcumode` compile, gets [`Processor::cu_mode`]).
///
/// Errors: [`OccupancyError::CodeObject`] when the kernel or its descriptor is missing, else as
/// [`occupancy`].
pub fn occupancy_of(
    code_object: &crate::code_object::CodeObject,
    name: &str,
    block_size: u32,
    dynamic_lds_bytes: u32,
) -> Result<Occupancy, OccupancyError> {
    let target = code_object.target_id();
    let info = code_object
        .kernel(name)
        .map_err(|e| OccupancyError::CodeObject(e.to_string()))?;
    let descriptor = code_object
        .kernel_descriptor(name)
        .map_err(|e| OccupancyError::CodeObject(e.to_string()))?;
    let mut processor = Processor::for_target(target)?;
    if processor.wave32 && !descriptor.wgp_mode() {
        processor = processor.cu_mode();
    }
    occupancy_on(
        &processor,
        target.processor(),
        info,
        block_size,
        dynamic_lds_bytes,
    )
}

impl KernelInfo {
    /// [`occupancy`] of this kernel on `target` (a [`TargetId`] or an [`SmTarget`]).
    ///
    /// Errors: as [`occupancy`].
    pub fn occupancy(
        &self,
        target: &(impl OccupancyTarget + ?Sized),
        block_size: u32,
        dynamic_lds_bytes: u32,
    ) -> Result<Occupancy, OccupancyError> {
        occupancy(self, target, block_size, dynamic_lds_bytes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kernel(vgprs: u32, sgprs: u32, wave: u32, lds: u32, max_block: u32) -> KernelInfo {
        KernelInfo {
            name: "k".into(),
            symbol: "k.kd".into(),
            args: Vec::new(),
            kernarg_segment_size: 0,
            kernarg_segment_align: 8,
            group_segment_fixed_size: lds,
            private_segment_fixed_size: 0,
            sgpr_count: sgprs,
            vgpr_count: vgprs,
            agpr_count: None,
            sgpr_spill_count: 0,
            vgpr_spill_count: 0,
            wavefront_size: wave,
            max_flat_workgroup_size: max_block,
            uses_dynamic_stack: false,
        }
    }

    fn target(s: &str) -> TargetId {
        TargetId::parse(s).unwrap()
    }

    #[test]
    fn gfx90a_unified_file_with_agprs_allows_one_wave() {
        // 256 ArchVGPRs + 192 AGPRs: .vgpr_count 448. 448 rounded up to the granule of 8 is
        // 448; 512 / 448 = 1 wave per SIMD. A 256-thread block is 4 waves; 4 SIMDs x 1 wave =
        // 4 waves per CU = 1 block.
        let k = kernel(448, 32, 64, 0, 256);
        let occ = occupancy(&k, &target("gfx90a:sramecc+:xnack-"), 256, 0).unwrap();
        assert_eq!(
            (occ.waves_per_simd, occ.blocks_per_cu, occ.limit),
            (1, 1, Limit::Vgprs)
        );
    }

    #[test]
    fn gfx90a_light_kernel_is_held_by_wave_slots() {
        // 32 VGPRs: 512 / 32 = 16 > 8 slots: 8 waves per SIMD, 32 per CU. Blocks of 256 threads
        // (4 waves): 32 / 4 = 8. 20 SGPRs <= 80: 10 waves, no limit.
        let k = kernel(32, 20, 64, 0, 1024);
        let occ = occupancy(&k, &target("gfx90a"), 256, 0).unwrap();
        assert_eq!(
            (occ.waves_per_simd, occ.blocks_per_cu, occ.limit),
            (8, 8, Limit::WaveSlots)
        );
        // Blocks of 64 threads (1 wave, no barrier): 32 blocks.
        assert_eq!(
            occupancy(&k, &target("gfx90a"), 64, 0)
                .unwrap()
                .blocks_per_cu,
            32
        );
    }

    #[test]
    fn gfx90a_sgprs_above_100_allow_seven_waves() {
        // 24 VGPRs: 512 / 24 = 21 -> 8 slots; 102 SGPRs > 100: 7 waves (gfx9 SGPR table).
        // 4 x 7 = 28 waves per CU; blocks of 128 threads (2 waves): 14.
        let k = kernel(24, 102, 64, 0, 1024);
        let occ = occupancy(&k, &target("gfx90a"), 128, 0).unwrap();
        assert_eq!(
            (occ.waves_per_simd, occ.blocks_per_cu, occ.limit),
            (7, 14, Limit::Sgprs)
        );
    }

    #[test]
    fn gfx942_vgprs_then_lds_limit() {
        // 100 VGPRs -> 104 (granule 8); 512 / 104 = 4 waves per SIMD, 16 per CU. Blocks of 512
        // threads (8 waves): 16 / 8 = 2. With 40 KiB static LDS (40960 = 80 granules of 512):
        // 65536 / 40960 = 1 block.
        let k = kernel(100, 40, 64, 0, 1024);
        let t = target("gfx942:sramecc+:xnack-");
        let occ = occupancy(&k, &t, 512, 0).unwrap();
        assert_eq!(
            (occ.waves_per_simd, occ.blocks_per_cu, occ.limit),
            (4, 2, Limit::Vgprs)
        );
        let occ = occupancy(&kernel(100, 40, 64, 40 * 1024, 1024), &t, 512, 0).unwrap();
        assert_eq!((occ.blocks_per_cu, occ.limit), (1, Limit::Lds));
        // Dynamic LDS counts too: 20 KiB static + 30000 dynamic = 50480, rounded up to 50688
        // (99 x 512): 65536 / 50688 = 1.
        let occ = occupancy(&kernel(100, 40, 64, 20 * 1024, 1024), &t, 512, 30000).unwrap();
        assert_eq!((occ.blocks_per_cu, occ.limit), (1, Limit::Lds));
    }

    #[test]
    fn gfx1100_wave32_uses_the_one_and_a_half_register_file() {
        // wave32: 1536 VGPRs per lane, granule 24. 96 VGPRs: 1536 / 96 = 16 waves (= slots).
        // 100 VGPRs -> 120: 1536 / 120 = 12 waves per SIMD, 48 per WGP (4 SIMD32s); blocks of
        // 256 threads (8 waves): 48 / 8 = 6.
        let t = target("gfx1100");
        let occ = occupancy(&kernel(96, 30, 32, 0, 1024), &t, 256, 0).unwrap();
        assert_eq!((occ.waves_per_simd, occ.limit), (16, Limit::WaveSlots));
        let occ = occupancy(&kernel(100, 30, 32, 0, 1024), &t, 256, 0).unwrap();
        assert_eq!(
            (occ.waves_per_simd, occ.blocks_per_cu, occ.limit),
            (12, 6, Limit::Vgprs)
        );
        // wave64: 768 per lane, granule 12: 100 -> 108, 768 / 108 = 7 waves.
        let occ = occupancy(&kernel(100, 30, 64, 0, 1024), &t, 256, 0).unwrap();
        assert_eq!(occ.waves_per_simd, 7);
        // CU mode: 2 SIMDs: 24 waves, 3 blocks of 8 waves.
        let cu = Processor::named("gfx1100").unwrap().cu_mode();
        let occ = occupancy_on(&cu, "gfx1100", &kernel(100, 30, 32, 0, 1024), 256, 0).unwrap();
        assert_eq!(occ.blocks_per_cu, 3);
    }

    #[test]
    fn many_small_blocks_are_capped_by_barrier_slots() {
        // gfx908: 16 VGPRs -> 256 / 16 = 16 -> 10 slots; 40 waves per CU. Blocks of 128 threads
        // (2 waves, with a barrier): 20 by waves, capped at 16.
        let occ = occupancy(&kernel(16, 16, 64, 0, 1024), &target("gfx908"), 128, 0).unwrap();
        assert_eq!((occ.blocks_per_cu, occ.limit), (16, Limit::Workgroups));
    }

    #[test]
    fn bad_inputs_are_errors_naming_what_was_wrong() {
        let k = kernel(32, 20, 64, 0, 256);
        let err = occupancy(&k, &target("gfx90a"), 512, 0).unwrap_err();
        assert_eq!(
            err.to_string(),
            "a block of 512 threads exceeds kernel k's .max_flat_workgroup_size of 256"
        );
        assert_eq!(
            occupancy(&k, &target("gfx90a"), 0, 0).unwrap_err(),
            OccupancyError::EmptyBlock
        );
        let err = occupancy(&kernel(32, 20, 32, 0, 256), &target("gfx90a"), 64, 0).unwrap_err();
        assert!(err.to_string().contains("wavefront size 32"), "{err}");
        let err = Processor::named("gfx1999").unwrap_err();
        assert!(err.to_string().contains("gfx1999"), "{err}");
    }

    #[test]
    fn best_block_size_prefers_the_most_resident_waves() {
        // gfx942 with 40 KiB LDS per block: one block per CU whatever its size, so the largest
        // block (1024 threads = 16 waves; 4 per SIMD fit with 100 VGPRs) keeps the most waves.
        let k = kernel(100, 40, 64, 40 * 1024, 1024);
        let (block, occ) =
            best_block_size(&k, &target("gfx942"), 0, [64, 128, 256, 512, 1024]).unwrap();
        assert_eq!((block, occ.waves_per_cu()), (1024, 16));
        // A kernel bounded to 256 threads: 1024 is skipped.
        let k = kernel(100, 40, 64, 40 * 1024, 256);
        let (block, _) = best_block_size(&k, &target("gfx942"), 0, [64, 1024, 256]).unwrap();
        assert_eq!(block, 256);
    }
}
