//! hipjit's own AMDGPU code-object reader: no external tools at run time.
//!
//! Accepts a raw code object (an ELF64 `EM_AMDGPU` / `ELFOSABI_AMDGPU_HSA` shared object), a
//! clang offload bundle and a compressed offload bundle (`CCOB` v1-v3, zlib or zstd), and reads
//! from the ELF its target ID (e_flags), code object version (`EI_ABIVERSION`) and kernels (the
//! `NT_AMDGPU_METADATA` note checked against the symbol table). Sources: LLVM AMDGPUUsage
//! ("ELF Code Object", "Code Object V3 Metadata" and later) and clang's ClangOffloadBundler
//! documentation.
//!
//! Every malformed input is a [`CodeObjectError`] that names what was wrong and, where there is
//! one, the byte offset; no input makes the reader panic (a fuzz target under `fuzz/` and the
//! `code_object_corpus` test check this).

mod bundle;
pub mod cubin;
#[doc(hidden)]
pub mod descriptor;
mod elf;
mod md5;
mod metadata;
pub mod occupancy;

pub use bundle::{BundleEntry, MAX_UNCOMPRESSED_SIZE};
pub use descriptor::{KernelDescriptor, KERNEL_DESCRIPTOR_SIZE};

use serde::{Deserialize, Serialize};

use crate::target::amdgpu::{TargetId, TargetIdError};

/// The container a code object was found in.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Container {
    /// A raw ELF code object.
    Elf,
    /// A clang offload bundle (`__CLANG_OFFLOAD_BUNDLE__`).
    OffloadBundle,
    /// A compressed clang offload bundle (`CCOB`).
    CompressedOffloadBundle,
}

/// One kernel argument, from the `.args` list of the kernel's metadata map (AMDGPUUsage "Kernel
/// Argument Metadata Map"). Offsets and sizes are in bytes within the kernarg segment.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct KernelArg {
    /// `.name`, when the compiler recorded it.
    pub name: Option<String>,
    /// `.type_name`, when the compiler recorded it.
    pub type_name: Option<String>,
    /// `.offset`: byte offset in the kernarg segment.
    pub offset: u32,
    /// `.size`: size in bytes.
    pub size: u32,
    /// `.value_kind`: `by_value`, `global_buffer`, `hidden_global_offset_x`...
    pub value_kind: String,
    /// `.address_space` of pointer arguments: `global`, `constant`, `local`...
    pub address_space: Option<String>,
    /// `.access`: the access qualifier (`read_only`, `write_only`, `read_write`). Debian's
    /// hipcc 5.2.3 records `read_only` for a `const T* __restrict__` parameter and nothing for
    /// other pointers (measured); OpenCL records its image and pipe qualifiers.
    #[serde(default)]
    pub access: Option<String>,
    /// `.actual_access`: the accesses the compiler found the kernel performs (`read_only`,
    /// `write_only`, `read_write`). hipcc 7.0.2 (clang 21) records it for `__restrict__`
    /// pointers (measured); absent otherwise.
    #[serde(default)]
    pub actual_access: Option<String>,
}

impl KernelArg {
    /// Whether the metadata says the kernel writes through this argument: `.access` or
    /// `.actual_access` is `write_only` or `read_write`. `false` says nothing: compilers
    /// rarely record either.
    pub fn is_written(&self) -> bool {
        [&self.access, &self.actual_access]
            .into_iter()
            .flatten()
            .any(|a| a == "write_only" || a == "read_write")
    }
}

/// One kernel of a code object: its metadata map (LLVM AMDGPUUsage, "Code Object V3 to V6
/// Metadata", table "AMDHSA Code Object V3 Kernel Metadata Map"). Sizes are in bytes; register
/// counts are per work-item (per lane of a wavefront). For cubins (HIP's NVIDIA platform) the
/// fields a cubin has are filled (arguments, parameter size, block-size bound, registers,
/// static shared memory, stack frame) and the others are 0.
///
/// [`crate::code_object::occupancy`] turns the register, LDS and workgroup fields into waves per SIMD and
/// blocks per compute unit without a device.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct KernelInfo {
    /// `.name`: the kernel's source name (mangled when not `extern "C"`).
    pub name: String,
    /// `.symbol`: the kernel descriptor symbol, `<name>.kd`.
    pub symbol: String,
    /// `.args`, in order (hidden arguments included).
    pub args: Vec<KernelArg>,
    /// `.kernarg_segment_size`: bytes of the kernel argument segment, hidden arguments included.
    pub kernarg_segment_size: u32,
    /// `.kernarg_segment_align`: alignment of the kernel argument segment, bytes (a power of 2,
    /// as the compiler wrote it).
    pub kernarg_segment_align: u32,
    /// `.group_segment_fixed_size`: static LDS (group segment) per workgroup, bytes; dynamic LDS
    /// given at launch comes on top. For a cubin: the kernel's `__shared__` variables'
    /// bytes per block (`ptxas -v`'s "smem", read from `.nv.shared.<kernel>`: [`cubin`]);
    /// the shared memory the driver reserves per block on `sm_80`+ is not included.
    pub group_segment_fixed_size: u32,
    /// `.private_segment_fixed_size`: scratch (private segment) per work-item, bytes, not
    /// counting a dynamic stack ([`KernelInfo::uses_dynamic_stack`]). For a cubin: the stack
    /// frame per thread (`EIATTR_FRAME_SIZE`, `ptxas -v`'s "bytes stack frame"), 0 when the
    /// cubin does not record it.
    pub private_segment_fixed_size: u32,
    /// `.sgpr_count`: scalar registers per wavefront, including those reserved for VCC, FLAT_SCRATCH
    /// and XNACK; what limits waves per SIMD on gfx6-gfx9 (SGPRs do not limit occupancy on gfx10+).
    pub sgpr_count: u32,
    /// `.vgpr_count`: vector registers per work-item. On gfx90a and gfx94x/gfx950, which have
    /// one unified register file, it already includes the AGPRs: the ArchVGPRs rounded up to 4
    /// plus the AGPRs (a kernel with 256 VGPRs and 192 AGPRs reports 448). On gfx908, whose
    /// AGPRs are a separate file of the same size, it is the larger of the two counts. Either
    /// way it is the figure that limits waves per SIMD. For a cubin: registers per thread
    /// (`EIATTR_REGCOUNT`, `ptxas -v`'s "Used N registers"), 0 when the cubin does not record
    /// it.
    pub vgpr_count: u32,
    /// `.agpr_count`: accumulation registers per work-item (processors with AGPRs: gfx908,
    /// gfx90a, gfx94x, gfx950); already counted in [`KernelInfo::vgpr_count`] on gfx90a and
    /// later. `None` when absent.
    pub agpr_count: Option<u32>,
    /// `.sgpr_spill_count`: scalar registers spilled (0 when absent).
    pub sgpr_spill_count: u32,
    /// `.vgpr_spill_count`: vector registers spilled to scratch (0 when absent).
    pub vgpr_spill_count: u32,
    /// `.wavefront_size`: 64 on gfx6-gfx9 (gfx90a, gfx94x...); 32 or 64 on gfx10+ (32 unless
    /// compiled with `-mwavefrontsize64`).
    pub wavefront_size: u32,
    /// `.max_flat_workgroup_size`: the most work-items a workgroup of this kernel may have. It
    /// reflects `__launch_bounds__(N)` (or `amdgpu_flat_work_group_size`); without one, hipcc
    /// compiles for 1024. Register allocation assumes it, so a launch with more is refused.
    pub max_flat_workgroup_size: u32,
    /// `.uses_dynamic_stack` (code object v5+; false when absent): the kernel's stack size is
    /// not known at compile time (recursion, indirect calls, variable-sized arrays).
    pub uses_dynamic_stack: bool,
}

/// An error reading a code object. Each names what was wrong and, where there is one, the byte
/// offset in the input (in the uncompressed bundle or the ELF for errors found there). Kept at
/// most 64 bytes (large details are boxed) so that results carrying it stay small.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CodeObjectError {
    /// The input is no container hipjit reads; `found` says what it is.
    #[error("not an AMDGPU code object or offload bundle: the input is {found}")]
    UnknownFormat {
        /// What the input looks like ("a zip archive", "text", "a 32-bit ELF"...).
        found: String,
    },
    /// A read ran past the end of the input.
    #[error("truncated input: {what} at offset {offset:#x} needs {needed} bytes, but the input is {len} bytes long")]
    Truncated {
        /// What was being read.
        what: String,
        /// Where it starts.
        offset: u64,
        /// How many bytes it needs.
        needed: u64,
        /// The length of the input (of the ELF, for an ELF inside a bundle).
        len: u64,
    },
    /// A structural error in the ELF.
    #[error("malformed ELF: {what} (at offset {offset:#x})")]
    BadElf {
        /// What is wrong.
        what: String,
        /// Where.
        offset: u64,
    },
    /// An ELF for another machine.
    #[error("not an AMDGPU code object: the input is {found} (e_machine {e_machine}, expected 224, EM_AMDGPU)")]
    WrongMachine {
        /// The e_machine value.
        e_machine: u16,
        /// What the input is, e.g. "an x86-64 ELF" or "a CUDA cubin (ELF for NVIDIA GPUs)".
        found: String,
    },
    /// An AMDGPU ELF for another OS/ABI than AMDHSA.
    #[error(
        "not an AMDHSA code object: OS/ABI is {os_abi} ({name}), expected 64 (ELFOSABI_AMDGPU_HSA)"
    )]
    WrongOsAbi {
        /// The EI_OSABI byte.
        os_abi: u8,
        /// Its meaning.
        name: String,
    },
    /// Not a shared object (the runtime loads only `ET_DYN` code objects).
    #[error("not a loadable code object: ELF type {e_type} ({name}), expected 3 (ET_DYN)")]
    WrongElfType {
        /// e_type.
        e_type: u16,
        /// Its meaning.
        name: &'static str,
    },
    /// A code object version hipjit does not read.
    #[error("unsupported code object version: EI_ABIVERSION {abi_version} ({meaning}); hipjit reads code object v3 to v6 (ABI version 1 to 4)")]
    UnsupportedVersion {
        /// The EI_ABIVERSION byte.
        abi_version: u8,
        /// What it means.
        meaning: String,
    },
    /// The e_flags name no known processor.
    #[error("cannot read the target ID from the ELF header: {0}")]
    TargetId(#[from] TargetIdError),
    /// No `NT_AMDGPU_METADATA` note.
    #[error("no NT_AMDGPU_METADATA note (owner \"AMDGPU\", type 32) in the code object: the kernel list and argument layout are unknown")]
    MetadataNoteMissing,
    /// The note is not valid MessagePack, or a value has the wrong type.
    #[error("malformed NT_AMDGPU_METADATA note at offset {offset:#x}: {reason}")]
    MetadataMalformed {
        /// Offset of the descriptor (or of the decoding failure) in the ELF.
        offset: u64,
        /// What is wrong.
        reason: String,
    },
    /// A required metadata field is absent.
    #[error("NT_AMDGPU_METADATA{}: required field {field} is missing", kernel_suffix(.kernel))]
    MetadataFieldMissing {
        /// The kernel whose map lacks it (None: the root map).
        kernel: Option<String>,
        /// The field, e.g. `.kernarg_segment_size` or `.args[2].offset`.
        field: String,
    },
    /// A kernel in the metadata without its descriptor symbol.
    #[error("kernel {kernel}: its kernel descriptor symbol {symbol} is not in the symbol table")]
    KernelSymbolMissing {
        /// The kernel's `.name`.
        kernel: String,
        /// The expected `.symbol`.
        symbol: String,
    },
    /// A raw code object built for another target than the one asked for.
    #[error("the code object is built for {code}, which does not run on {device}")]
    TargetMismatch {
        /// The code object's target ID (from e_flags).
        code: Box<TargetId>,
        /// The target asked for.
        device: Box<TargetId>,
    },
    /// A structural error in an offload bundle.
    #[error("malformed offload bundle: {what} (at offset {offset:#x})")]
    BadBundle {
        /// What is wrong.
        what: String,
        /// Where, in the (uncompressed) bundle.
        offset: u64,
    },
    /// No bundle entry runs on the target (or, with no target, no AMDGPU entry at all).
    #[error("the offload bundle has no AMDGPU entry{} (entries: {})", target_suffix(.target), list(.entries))]
    NoMatchingEntry {
        /// The target asked for.
        target: Option<Box<TargetId>>,
        /// The entry IDs present.
        entries: Vec<String>,
    },
    /// Several AMDGPU entries and no target to choose between them.
    #[error("the offload bundle has several AMDGPU entries ({}): give a target ID to choose one", list(.entries))]
    AmbiguousBundle {
        /// The AMDGPU entry IDs.
        entries: Vec<String>,
    },
    /// A structural error in a compressed bundle header.
    #[error("malformed compressed offload bundle (CCOB): {what} (at offset {offset:#x})")]
    BadCompressedBundle {
        /// What is wrong.
        what: String,
        /// Where.
        offset: u64,
    },
    /// A CCOB header version other than 1, 2 and 3.
    #[error("compressed offload bundle (CCOB) header version {version} is not supported (hipjit reads versions 1 to 3)")]
    UnsupportedCompressedVersion {
        /// The version field.
        version: u16,
    },
    /// A compression method other than zlib (0) and zstd (1).
    #[error("compressed offload bundle (CCOB): unknown compression method {method} (0 is zlib, 1 is zstd)")]
    UnknownCompressionMethod {
        /// The method field.
        method: u16,
    },
    /// The compressed payload could not be decompressed.
    #[error("compressed offload bundle (CCOB): {method} decompression failed: {reason}")]
    Decompress {
        /// "zlib" or "zstd".
        method: &'static str,
        /// The decoder's message.
        reason: String,
    },
    /// The uncompressed bundle does not match the hash in the header.
    #[error("compressed offload bundle (CCOB): hash mismatch: the header stores {stored:#018x}, the uncompressed data hashes to {computed:#018x}")]
    HashMismatch {
        /// The stored truncated MD5.
        stored: u64,
        /// The truncated MD5 of the data.
        computed: u64,
    },
    /// No kernel of that name (boxed to keep the error small).
    #[error("{0}")]
    KernelNotFound(Box<MissingKernel>),
}

/// The details of [`CodeObjectError::KernelNotFound`].
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("no kernel named {name:?} in the code object{}", kernel_not_found_hint(.suggestions, .available))]
pub struct MissingKernel {
    /// The name asked for.
    pub name: String,
    /// Mangled kernel names that demangle to `name` or `name(...)`.
    pub suggestions: Vec<String>,
    /// Every kernel name present.
    pub available: Vec<String>,
}

fn kernel_suffix(kernel: &Option<String>) -> String {
    kernel
        .as_deref()
        .map(|k| format!(" of kernel {k}"))
        .unwrap_or_default()
}

fn target_suffix(target: &Option<Box<TargetId>>) -> String {
    target
        .as_ref()
        .map(|t| format!(" that runs on {t}"))
        .unwrap_or_default()
}

fn list(items: &[String]) -> String {
    if items.is_empty() {
        "none".to_owned()
    } else {
        items.join(", ")
    }
}

fn kernel_not_found_hint(suggestions: &[String], available: &[String]) -> String {
    match suggestions {
        [] => format!("; kernels: {}", list(available)),
        [one] => {
            format!("; did you mean {one:?} (the mangled name; the kernel is not extern \"C\")?")
        }
        many => format!(
            "; did you mean one of {} (mangled names; the kernels are not extern \"C\")?",
            many.iter()
                .map(|s| format!("{s:?}"))
                .collect::<Vec<_>>()
                .join(", ")
        ),
    }
}

/// An ELF split for comparing two builds of one request ([`split_for_comparison`]): its
/// code, its metadata, and the rest.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ElfParts {
    /// The contents of the executable sections (`.text`: `SHT_PROGBITS` with
    /// `SHF_EXECINSTR`), in section order.
    pub text: Vec<u8>,
    /// The descriptor of the AMDGPU metadata note (MessagePack), when there is one.
    pub metadata: Vec<u8>,
    /// The whole ELF with those bytes zeroed: headers, symbols, data, other notes.
    pub rest: Vec<u8>,
}

/// `elf` (one ELF: an AMDGPU code object, or a cubin) split into its code, its metadata note
/// and the rest ([`ElfParts`]), so that two builds can be told apart part by part.
///
/// Errors: [`CodeObjectError::UnknownFormat`], [`CodeObjectError::BadElf`] for a file that
/// is no readable ELF64.
pub fn split_for_comparison(elf: &[u8]) -> Result<ElfParts, CodeObjectError> {
    const SHT_PROGBITS: u32 = 1;
    const SHF_EXECINSTR: u64 = 4;
    let header = elf::parse_header(elf)?;
    let parsed = elf::Elf::parse(elf, header)?;
    let mut rest = elf.to_vec();
    let mut zero = |at: u64, len: usize| {
        if let Ok(at) = usize::try_from(at) {
            if let Some(r) = rest.get_mut(at..at.saturating_add(len)) {
                r.fill(0);
            }
        }
    };
    let mut text = Vec::new();
    for s in &parsed.sections {
        if s.sh_type == SHT_PROGBITS && s.sh_flags & SHF_EXECINSTR != 0 {
            let d = parsed.section_data(s)?;
            text.extend_from_slice(d);
            zero(s.sh_offset, d.len());
        }
    }
    let metadata = match parsed.find_note(b"AMDGPU", elf::NT_AMDGPU_METADATA)? {
        Some((at, d)) => {
            zero(at, d.len());
            d.to_vec()
        }
        None => Vec::new(),
    };
    Ok(ElfParts {
        text,
        metadata,
        rest,
    })
}

/// A code object read into memory: its raw ELF bytes and what hipjit read from them.
#[derive(Clone, Debug)]
pub struct CodeObject {
    elf: Vec<u8>,
    container: Container,
    bundle_entry: Option<String>,
    target_id: TargetId,
    e_flags: u32,
    code_object_version: u32,
    kernels: Vec<KernelInfo>,
}

impl CodeObject {
    /// Reads a code object from any container: a raw ELF, an offload bundle or a compressed
    /// offload bundle. From a bundle, the entry whose target ID runs on `target`
    /// ([`TargetId::runs_on`]; when several do, the processor's own entry before its generic
    /// family's, then the one with most features written, then the first); with `target` None,
    /// the only AMDGPU entry (an error if there are several). Host entries are ignored. A raw ELF
    /// given with a target must run on it. The ELF is copied: [`CodeObject::elf`] is what the
    /// runtime is handed, whatever the container.
    ///
    /// Errors: every [`CodeObjectError`] variant but [`CodeObjectError::KernelNotFound`].
    pub fn from_bytes(
        bytes: &[u8],
        target: Option<&TargetId>,
    ) -> Result<CodeObject, CodeObjectError> {
        if bytes.starts_with(b"\x7fELF") {
            return Self::from_elf(bytes.to_vec(), Container::Elf, None, target);
        }
        if bytes.starts_with(bundle::BUNDLE_MAGIC) {
            let (entry, elf) = bundle::select(bytes, target)?;
            return Self::from_entry(entry, elf, Container::OffloadBundle, target);
        }
        if bytes.starts_with(bundle::CCOB_MAGIC) {
            let inner = bundle::decompress(bytes)?;
            if !inner.starts_with(bundle::BUNDLE_MAGIC) {
                return Err(not_a_bundle_inside(&inner));
            }
            let (entry, elf) = bundle::select(&inner, target)?;
            return Self::from_entry(entry, elf, Container::CompressedOffloadBundle, target);
        }
        Err(CodeObjectError::UnknownFormat {
            found: describe(bytes),
        })
    }

    fn from_entry(
        entry: BundleEntry,
        elf: &[u8],
        container: Container,
        target: Option<&TargetId>,
    ) -> Result<CodeObject, CodeObjectError> {
        if !elf.starts_with(b"\x7fELF") {
            return Err(CodeObjectError::BadBundle {
                what: format!(
                    "entry {} does not hold an ELF code object but {}",
                    entry.id,
                    describe(elf)
                ),
                offset: entry.offset,
            });
        }
        Self::from_elf(elf.to_vec(), container, Some(entry.id), target)
    }

    fn from_elf(
        bytes: Vec<u8>,
        container: Container,
        bundle_entry: Option<String>,
        target: Option<&TargetId>,
    ) -> Result<CodeObject, CodeObjectError> {
        let header = elf::parse_header(&bytes)?;
        if header.e_machine != elf::EM_AMDGPU {
            return Err(CodeObjectError::WrongMachine {
                e_machine: header.e_machine,
                found: describe(&bytes),
            });
        }
        if header.os_abi != elf::ELFOSABI_AMDGPU_HSA {
            let name = match header.os_abi {
                0 => "ELFOSABI_NONE",
                65 => "ELFOSABI_AMDGPU_PAL",
                66 => "ELFOSABI_AMDGPU_MESA3D",
                _ => "unknown",
            };
            return Err(CodeObjectError::WrongOsAbi {
                os_abi: header.os_abi,
                name: name.to_owned(),
            });
        }
        let code_object_version = match header.abi_version {
            1..=4 => u32::from(header.abi_version) + 2,
            0 => {
                return Err(CodeObjectError::UnsupportedVersion {
                    abi_version: 0,
                    meaning: "code object v2, whose metadata is YAML".into(),
                })
            }
            v => {
                return Err(CodeObjectError::UnsupportedVersion {
                    abi_version: v,
                    meaning: format!("code object v{}, newer than hipjit knows", u32::from(v) + 2),
                })
            }
        };
        if header.e_type != 3 {
            let name = match header.e_type {
                0 => "ET_NONE",
                1 => "ET_REL, a relocatable object not yet linked",
                2 => "ET_EXEC",
                4 => "ET_CORE",
                _ => "unknown",
            };
            return Err(CodeObjectError::WrongElfType {
                e_type: header.e_type,
                name,
            });
        }
        let e_flags = header.e_flags;
        let target_id = TargetId::from_e_flags(e_flags, header.abi_version)?;
        if let Some(device) = target {
            if !target_id.runs_on(device) {
                return Err(CodeObjectError::TargetMismatch {
                    code: Box::new(target_id),
                    device: Box::new(device.clone()),
                });
            }
        }
        let parsed = elf::Elf::parse(&bytes, header)?;
        let (desc_offset, desc) = parsed
            .find_note(b"AMDGPU", elf::NT_AMDGPU_METADATA)?
            .ok_or(CodeObjectError::MetadataNoteMissing)?;
        let meta = metadata::parse(desc, desc_offset)?;
        let symbols = parsed.symbols()?;
        for kernel in &meta.kernels {
            let found = symbols
                .iter()
                .any(|s| s.name == kernel.symbol && s.kind == 1 && s.shndx != 0);
            if !found {
                return Err(CodeObjectError::KernelSymbolMissing {
                    kernel: kernel.name.clone(),
                    symbol: kernel.symbol.clone(),
                });
            }
        }
        Ok(CodeObject {
            elf: bytes,
            container,
            bundle_entry,
            target_id,
            e_flags,
            code_object_version,
            kernels: meta.kernels,
        })
    }

    /// The container the code object came from.
    pub fn container(&self) -> Container {
        self.container
    }

    /// The raw ELF code object: what the HIP runtime is handed (`hipModuleLoadData`).
    pub fn elf(&self) -> &[u8] {
        &self.elf
    }

    /// The bundle entry ID the ELF came from (None for a raw ELF).
    pub fn bundle_entry(&self) -> Option<&str> {
        self.bundle_entry.as_deref()
    }

    /// The target ID from the ELF header's e_flags.
    pub fn target_id(&self) -> &TargetId {
        &self.target_id
    }

    /// The ELF header's e_flags word (AMDGPUUsage "AMDGPU ELF Header").
    pub fn e_flags(&self) -> u32 {
        self.e_flags
    }

    /// For code built for a generic processor (`gfx11-generic`...), the generic version in
    /// e_flags bits 24-31 (`EF_AMDGPU_GENERIC_VERSION`), which a runtime compares with the version
    /// at which the device's processor joined the family; None otherwise.
    pub fn generic_version(&self) -> Option<u8> {
        if self.target_id.is_generic() {
            Some((self.e_flags >> 24) as u8)
        } else {
            None
        }
    }

    /// The code object version: 3, 4, 5 or 6 (from the ELF `EI_ABIVERSION` byte 1-4).
    pub fn code_object_version(&self) -> u32 {
        self.code_object_version
    }

    /// The kernels, in metadata order.
    pub fn kernels(&self) -> &[KernelInfo] {
        &self.kernels
    }

    /// The kernel named `name` (its `.name`, the mangled name for a kernel without
    /// `extern "C"`).
    ///
    /// The machine code of kernel `name`: the bytes of its function symbol (`st_size` bytes at
    /// `st_value`, in the section holding it). Two code objects whose kernels have equal bytes
    /// run the same instructions (relocations aside: kernels reach no other symbol).
    ///
    /// Errors: [`CodeObjectError::KernelNotFound`] as [`CodeObject::kernel`];
    /// [`CodeObjectError::BadElf`] when the kernel has no function symbol or it lies outside its
    /// section.
    pub fn kernel_code(&self, name: &str) -> Result<&[u8], CodeObjectError> {
        let kernel = self.kernel(name)?;
        self.symbol_bytes(&kernel.name, 2, "function symbol")
    }

    /// The kernel descriptor of kernel `name` (its `.symbol`, `<name>.kd`, 64 bytes): see
    /// `KernelDescriptor`.
    ///
    /// Errors: [`CodeObjectError::KernelNotFound`] as [`CodeObject::kernel`];
    /// [`CodeObjectError::BadElf`] when the descriptor symbol is missing, shorter than 64 bytes,
    /// or lies outside its section.
    pub fn kernel_descriptor(
        &self,
        name: &str,
    ) -> Result<descriptor::KernelDescriptor, CodeObjectError> {
        let kernel = self.kernel(name)?;
        let bytes = self.symbol_bytes(&kernel.symbol, 1, "kernel descriptor")?;
        descriptor::KernelDescriptor::parse(bytes).ok_or_else(|| CodeObjectError::BadElf {
            what: format!(
                "kernel descriptor {} is {} bytes (expected {})",
                kernel.symbol,
                bytes.len(),
                descriptor::KERNEL_DESCRIPTOR_SIZE
            ),
            offset: 0,
        })
    }

    /// The bytes of the defined symbol `name` of kind `kind` (`STT_OBJECT` 1, `STT_FUNC` 2).
    fn symbol_bytes(&self, name: &str, kind: u8, what: &str) -> Result<&[u8], CodeObjectError> {
        let header = elf::parse_header(&self.elf)?;
        let parsed = elf::Elf::parse(&self.elf, header)?;
        let symbol = parsed
            .symbols()?
            .into_iter()
            .find(|s| s.name == name && s.kind == kind && s.shndx != 0)
            .ok_or_else(|| CodeObjectError::BadElf {
                what: format!("no {what} named {name:?}"),
                offset: 0,
            })?;
        parsed.symbol_data(
            symbol.shndx,
            symbol.value,
            symbol.size,
            &format!("{what} {name:?}"),
        )
    }

    /// Errors: [`CodeObjectError::KernelNotFound`], whose `suggestions` hold the mangled names
    /// that demangle to `name` (`name`, `name(...)`, `ns::name<T>(...)` and the like).
    pub fn kernel(&self, name: &str) -> Result<&KernelInfo, CodeObjectError> {
        if let Some(k) = self.kernels.iter().find(|k| k.name == name) {
            return Ok(k);
        }
        let suggestions = self
            .kernels
            .iter()
            .filter(|k| demangles_to(&k.name, name))
            .map(|k| k.name.clone())
            .collect();
        Err(CodeObjectError::KernelNotFound(Box::new(MissingKernel {
            name: name.to_owned(),
            suggestions,
            available: self.kernels.iter().map(|k| k.name.clone()).collect(),
        })))
    }
}

/// The entries of an offload bundle or compressed offload bundle, in file order (host entries
/// included, with `target_id` None); an empty list for a raw ELF code object.
///
/// Errors: as [`CodeObject::from_bytes`] for the container (format, truncation, bad entry
/// table, CCOB header and decompression errors).
pub fn bundle_entries(bytes: &[u8]) -> Result<Vec<BundleEntry>, CodeObjectError> {
    if bytes.starts_with(b"\x7fELF") {
        return Ok(Vec::new());
    }
    if bytes.starts_with(bundle::BUNDLE_MAGIC) {
        return bundle::entries(bytes);
    }
    if bytes.starts_with(bundle::CCOB_MAGIC) {
        let inner = bundle::decompress(bytes)?;
        if inner.starts_with(bundle::BUNDLE_MAGIC) {
            return bundle::entries(&inner);
        }
        return Err(not_a_bundle_inside(&inner));
    }
    Err(CodeObjectError::UnknownFormat {
        found: describe(bytes),
    })
}

fn not_a_bundle_inside(inner: &[u8]) -> CodeObjectError {
    CodeObjectError::BadCompressedBundle {
        what: format!(
            "the uncompressed contents are not an offload bundle but {}",
            describe(inner)
        ),
        offset: 0,
    }
}

/// Whether the mangled `symbol` demangles to `wanted`, compared without whitespace: the
/// signature with or without return type (`void ns::f<int>(int*)`, `ns::f<int>(int*)`), the
/// qualified name with or without template arguments (`ns::f<int>`, `ns::f`), or any of these
/// without the leading namespaces (`f<int>(int*)`, `f`).
fn demangles_to(symbol: &str, wanted: &str) -> bool {
    let compact = |s: &str| s.chars().filter(|c| !c.is_whitespace()).collect::<String>();
    let wanted = compact(wanted);
    if !symbol.starts_with("_Z") || wanted.is_empty() {
        return false;
    }
    let Ok(sym) = cpp_demangle::Symbol::new(symbol) else {
        return false;
    };
    let options = cpp_demangle::DemangleOptions::default();
    let mut candidates = Vec::new();
    for opts in [
        options,
        options.no_return_type(),
        options.no_params().no_return_type(),
    ] {
        if let Ok(text) = sym.demangle(&opts) {
            candidates.push(compact(&text));
        }
    }
    if let Some(name) = candidates.last().cloned() {
        candidates.push(strip_template_args(&name).to_owned());
    }
    let qualified = format!("::{wanted}");
    candidates
        .iter()
        .any(|c| *c == wanted || c.ends_with(&qualified))
}

/// `ns::f<int, 3>` -> `ns::f` (a trailing template argument list only).
fn strip_template_args(name: &str) -> &str {
    if !name.ends_with('>') {
        return name;
    }
    let mut depth = 0usize;
    for (i, c) in name.char_indices().rev() {
        match c {
            '>' => depth += 1,
            '<' => {
                depth = depth.saturating_sub(1);
                if depth == 0 {
                    return &name[..i];
                }
            }
            _ => {}
        }
    }
    name
}

/// Names what `bytes` looks like, for an error about a format hipjit does not read.
pub(crate) fn describe(bytes: &[u8]) -> String {
    if bytes.is_empty() {
        return "empty".into();
    }
    if bytes.starts_with(b"\x7fELF") {
        let e_machine = bytes.get(18..20).map(|m| u16::from_le_bytes([m[0], m[1]]));
        let machine = e_machine.and_then(elf::machine_name);
        return match (bytes.get(4), machine) {
            (_, Some((_, "NVIDIA CUDA"))) => "a CUDA cubin (ELF for NVIDIA GPUs)".into(),
            (Some(2), Some((article, name))) => format!("{article} {name} ELF"),
            (Some(1), Some((_, name))) => format!("a 32-bit {name} ELF"),
            (Some(1), None) => "a 32-bit ELF".into(),
            (_, None) => match e_machine {
                Some(m) => format!("an ELF for machine {m}"),
                None => "a truncated ELF".into(),
            },
            (_, Some((_, name))) => format!("an ELF with an invalid class byte for {name}"),
        };
    }
    const MAGICS: &[(&[u8], &str)] = &[
        (b"PK\x03\x04", "a zip archive"),
        (b"PK\x05\x06", "an empty zip archive"),
        (b"\x1f\x8b", "gzip-compressed data"),
        (
            b"\x28\xb5\x2f\xfd",
            "a zstd frame (not a CCOB compressed bundle)",
        ),
        (b"BZh", "bzip2-compressed data"),
        (b"\xfd7zXZ\x00", "xz-compressed data"),
        (b"!<arch>\n", "an ar archive (a static library)"),
        (b"BC\xc0\xde", "LLVM bitcode"),
        (b"\xde\xc0\x17\x0b", "LLVM bitcode (wrapped)"),
        (b"\x50\xed\x55\xba", "a CUDA fatbin"),
        (b"\xcf\xfa\xed\xfe", "a 64-bit Mach-O file"),
        (b"\xce\xfa\xed\xfe", "a 32-bit Mach-O file"),
        (b"MZ", "a Windows PE executable"),
        (b"\x00asm", "a WebAssembly module"),
        (b"#!", "a script (text)"),
        (b"HIPF", "a HIP fat binary wrapper (HIPF), not a bundle"),
        (b"\x89PNG", "a PNG image"),
        (b"%PDF", "a PDF document"),
    ];
    for (magic, name) in MAGICS {
        if bytes.starts_with(magic) {
            return (*name).into();
        }
    }
    let head = &bytes[..bytes.len().min(512)];
    if let Ok(text) = std::str::from_utf8(head).or_else(|e| {
        // A multi-byte character cut at the 512-byte boundary is still text.
        std::str::from_utf8(&head[..e.valid_up_to()]).map_err(|_| e)
    }) {
        let printable = text
            .chars()
            .all(|c| !c.is_control() || c == '\n' || c == '\r' || c == '\t');
        if printable && !text.is_empty() {
            let first: String = text.lines().next().unwrap_or("").chars().take(40).collect();
            if text.contains("__global__") || text.contains("#include") {
                return format!("source text (starting {first:?}), not a compiled code object");
            }
            return format!("text (starting {first:?})");
        }
    }
    let shown: Vec<String> = bytes.iter().take(8).map(|b| format!("{b:02x}")).collect();
    format!("unrecognised binary data (first bytes {})", shown.join(" "))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_error_stays_small() {
        assert!(std::mem::size_of::<CodeObjectError>() <= 64);
    }

    #[test]
    fn template_arguments_are_stripped_only_at_the_end() {
        assert_eq!(strip_template_args("ns::f<int, a<b>>"), "ns::f");
        assert_eq!(strip_template_args("f"), "f");
    }

    #[test]
    fn describe_names_text_and_empty_input() {
        assert_eq!(describe(b""), "empty");
        assert!(describe(b"hello world\n").starts_with("text"));
        assert_eq!(describe(b"PK\x03\x04rest"), "a zip archive");
    }
}
