//! hipjit's reader of CUDA cubins (ELF64 `EM_CUDA` = 190), the code objects of HIP's NVIDIA
//! platform: the SM target and the kernels with their parameters.
//!
//! What is read, and from where (NVIDIA documents the cubin layout only in part; the rest is
//! what `cuobjdump -elf` prints, checked here against cubins nvcc writes, in the tests):
//! - `EI_OSABI` is `0x33` (CUDA ELF ABI version 7) or `0x41` (version 8), `EI_ABIVERSION` 7 or
//!   8. With ABI version 7 `e_flags` keeps the SM number in its low byte, with version 8 in
//!   bits 8-15 (`sm_90`: `e_flags` `0x0600_5a04`: 0x5a = 90). An arch-specific suffix is not
//!   read: nvcc 13.5 writes the same `e_flags` for `sm_90` and `sm_90a`, so
//!   [`Cubin::target`] has no suffix.
//! - A kernel is a `STT_FUNC` symbol with a section `.nv.info.<symbol>` (device functions have
//!   none); its code is in `.text.<symbol>`.
//! - `.nv.info.<symbol>` is a list of attributes, each `u8 format, u8 attribute` then: format
//!   4 (`EIFMT_SVAL`) a `u16` size and that many bytes; formats 1-3 two value bytes. Attribute
//!   `0x17` (`EIATTR_KPARAM_INFO`, 12 bytes: `u32` index, `u16` ordinal, `u16` offset, `u32`
//!   whose bits 18-31 are the size in bytes) describes one parameter; `0x19`
//!   (`EIATTR_CBANK_PARAM_SIZE`, `u16`) the parameter block's size; `0x05`
//!   (`EIATTR_MAX_THREADS`, three `u32`) a `__launch_bounds__` / `__maxnreg__` block size.
//! - The section `.nv.info` (no suffix) holds attributes of the same form for every function,
//!   each value a `u32` symbol index then a `u32`: `0x2f` (`EIATTR_REGCOUNT`) the registers per
//!   thread and `0x11` (`EIATTR_FRAME_SIZE`) the stack frame per thread in bytes, the figures
//!   `ptxas -v` prints as "Used N registers" and "N bytes stack frame".
//! - `.nv.shared.<symbol>` (`SHT_NOBITS`) is the kernel's static shared memory per block: a
//!   kernel without any has no such section. On `sm_90` and later the section also holds 1 KiB
//!   that ptxas reserves for the system (`.nv.reservedSmem`; the section is 1 KiB even for a
//!   kernel with no `__shared__` variable of its own when another kernel of the cubin uses
//!   dynamic shared memory). The reader reports the section less that 1 KiB there: the
//!   `__shared__` variables' bytes, `ptxas -v`'s "smem" figure (checked for sm_75, sm_80, sm_90
//!   and sm_100 in tests/it/nvcc_cubin.rs).

use crate::target::SmTarget;

use super::{KernelArg, KernelInfo};

/// `e_machine` of a cubin (`EM_CUDA`).
pub const EM_CUDA: u16 = 190;

/// An error reading a cubin, naming what was wrong and, where there is one, the byte offset.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum CubinError {
    /// Not a 64-bit little-endian ELF at all.
    #[error("not a cubin: {0}")]
    NotElf(&'static str),
    /// An ELF for another machine.
    #[error("not a cubin: e_machine is {found}, a cubin has {EM_CUDA} (EM_CUDA)")]
    Machine {
        /// The `e_machine` found.
        found: u16,
    },
    /// An ELF ABI version this reader does not know.
    #[error(
        "cubin with ELF OS/ABI {osabi:#x} and ABI version {abi_version}: hipjit reads ABI \
         versions 7 (OS/ABI 0x33) and 8 (OS/ABI 0x41)"
    )]
    AbiVersion {
        /// `EI_OSABI`.
        osabi: u8,
        /// `EI_ABIVERSION`.
        abi_version: u8,
    },
    /// A structure reaching past the end of the input.
    #[error("truncated cubin: {what} at offset {offset} needs {len} bytes, the input has {size}")]
    Truncated {
        /// What was being read.
        what: &'static str,
        /// Its offset.
        offset: u64,
        /// Its length.
        len: u64,
        /// The input's size.
        size: usize,
    },
    /// A kernel attribute holding an impossible value.
    #[error("cubin kernel attribute at offset {offset}: {what}")]
    BadAttribute {
        /// What is wrong with it.
        what: String,
        /// Its offset in the attribute section.
        offset: u64,
    },
    /// A kernel asked by name that the cubin does not hold.
    #[error("no kernel `{name}` in the cubin; it holds: {}", available.join(", "))]
    KernelNotFound {
        /// The name asked for.
        name: String,
        /// The kernels there are.
        available: Vec<String>,
    },
}

/// A parsed cubin: the raw ELF (what the CUDA driver is handed), its SM target and kernels.
#[derive(Debug, Clone)]
pub struct Cubin {
    elf: Box<[u8]>,
    target: SmTarget,
    abi_version: u8,
    kernels: Vec<KernelInfo>,
}

impl Cubin {
    /// Reads a cubin from `bytes` (copied).
    ///
    /// Errors: [`CubinError`] for anything that is not a well-formed cubin.
    pub fn from_bytes(bytes: &[u8]) -> Result<Cubin, CubinError> {
        let r = Reader(bytes);
        if bytes.len() < 64 || &bytes[..4] != b"\x7fELF" {
            return Err(CubinError::NotElf("no ELF magic"));
        }
        if bytes[4] != 2 || bytes[5] != 1 {
            return Err(CubinError::NotElf("not a 64-bit little-endian ELF"));
        }
        let machine = r.u16(18, "e_machine")?;
        if machine != EM_CUDA {
            return Err(CubinError::Machine { found: machine });
        }
        let (osabi, abi_version) = (bytes[7], bytes[8]);
        let flags = r.u32(48, "e_flags")?;
        let target = match (osabi, abi_version) {
            (0x33, 7) => SmTarget::new(flags & 0xff),
            (0x41, 8) => SmTarget::new((flags >> 8) & 0xff),
            _ => return Err(CubinError::AbiVersion { osabi, abi_version }),
        };
        let sections = r.sections()?;
        let kernels = r.kernels(&sections, target)?;
        Ok(Cubin {
            elf: bytes.into(),
            target,
            abi_version,
            kernels,
        })
    }

    /// The raw ELF.
    pub fn elf(&self) -> &[u8] {
        &self.elf
    }

    /// The SM target the machine code is for (without an `a`/`f` suffix: see the module
    /// documentation).
    pub fn target(&self) -> SmTarget {
        self.target
    }

    /// `EI_ABIVERSION`: 7 or 8.
    pub fn abi_version(&self) -> u8 {
        self.abi_version
    }

    /// The kernels, in symbol-table order. Per kernel: `name` and `symbol` are the ELF symbol
    /// (mangled for C++ kernels), `args` the parameters by ordinal (`value_kind` `by_value`:
    /// a cubin does not say which are pointers), `kernarg_segment_size` the parameter block,
    /// `wavefront_size` 32, `max_flat_workgroup_size` the `__launch_bounds__` block size or 0;
    /// register and shared-memory fields are 0 (the driver reports them per kernel).
    pub fn kernels(&self) -> &[KernelInfo] {
        &self.kernels
    }

    /// The machine code (SASS) of kernel `name`: the contents of its section `.text.<name>`.
    /// Two cubins whose kernels have equal bytes here run the same instructions.
    ///
    /// Errors: [`CubinError::KernelNotFound`] as [`Cubin::kernel`]; [`CubinError::Truncated`]
    /// when the section lies outside the file; [`CubinError::NotElf`] when the kernel has no
    /// `.text.<name>` section.
    pub fn kernel_code(&self, name: &str) -> Result<&[u8], CubinError> {
        self.kernel(name)?;
        let r = Reader(&self.elf);
        let wanted = format!(".text.{name}");
        let section =
            r.sections()?
                .into_iter()
                .find(|s| s.name == wanted)
                .ok_or(CubinError::NotElf(
                    "a kernel without its .text.<name> section",
                ))?;
        let (offset, size) = (section.offset, section.size);
        Reader(&self.elf)
            .bytes(offset, size, "kernel code")
            .map(|_| {
                // Bounds checked just above.
                &self.elf[offset as usize..(offset + size) as usize]
            })
    }

    /// The kernel `name`.
    ///
    /// Errors: [`CubinError::KernelNotFound`] listing the kernels there are.
    pub fn kernel(&self, name: &str) -> Result<&KernelInfo, CubinError> {
        self.kernels
            .iter()
            .find(|k| k.name == name)
            .ok_or_else(|| CubinError::KernelNotFound {
                name: name.to_owned(),
                available: self.kernels.iter().map(|k| k.name.clone()).collect(),
            })
    }
}

struct Section {
    name: String,
    kind: u32,
    offset: u64,
    size: u64,
    link: u32,
}

struct Reader<'a>(&'a [u8]);

impl Reader<'_> {
    fn bytes(&self, offset: u64, len: u64, what: &'static str) -> Result<&[u8], CubinError> {
        let err = || CubinError::Truncated {
            what,
            offset,
            len,
            size: self.0.len(),
        };
        let start = usize::try_from(offset).map_err(|_| err())?;
        let end = start
            .checked_add(usize::try_from(len).map_err(|_| err())?)
            .ok_or_else(err)?;
        self.0.get(start..end).ok_or_else(err)
    }
    fn u16(&self, offset: u64, what: &'static str) -> Result<u16, CubinError> {
        let b = self.bytes(offset, 2, what)?;
        Ok(u16::from_le_bytes([b[0], b[1]]))
    }
    fn u32(&self, offset: u64, what: &'static str) -> Result<u32, CubinError> {
        let b = self.bytes(offset, 4, what)?;
        Ok(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }
    fn u64(&self, offset: u64, what: &'static str) -> Result<u64, CubinError> {
        let b = self.bytes(offset, 8, what)?;
        let mut a = [0u8; 8];
        a.copy_from_slice(b);
        Ok(u64::from_le_bytes(a))
    }

    fn cstr(&self, table: &Section, index: u32) -> Result<String, CubinError> {
        let tab = self.bytes(table.offset, table.size, "string table")?;
        let rest = tab.get(index as usize..).ok_or(CubinError::Truncated {
            what: "string",
            offset: table.offset + u64::from(index),
            len: 1,
            size: self.0.len(),
        })?;
        let end = rest.iter().position(|&b| b == 0).unwrap_or(rest.len());
        Ok(String::from_utf8_lossy(&rest[..end]).into_owned())
    }

    fn sections(&self) -> Result<Vec<Section>, CubinError> {
        let shoff = self.u64(0x28, "e_shoff")?;
        let shentsize = u64::from(self.u16(0x3a, "e_shentsize")?);
        let shnum = u64::from(self.u16(0x3c, "e_shnum")?);
        let shstrndx = u64::from(self.u16(0x3e, "e_shstrndx")?);
        if shentsize < 64 && shnum > 0 {
            return Err(CubinError::NotElf("section header entries under 64 bytes"));
        }
        self.bytes(shoff, shentsize * shnum, "section headers")?;
        let mut raw = Vec::new();
        for i in 0..shnum {
            let at = shoff + i * shentsize;
            raw.push((
                self.u32(at, "sh_name")?,
                Section {
                    name: String::new(),
                    kind: self.u32(at + 4, "sh_type")?,
                    offset: self.u64(at + 24, "sh_offset")?,
                    size: self.u64(at + 32, "sh_size")?,
                    link: self.u32(at + 40, "sh_link")?,
                },
            ));
        }
        let strtab = raw
            .get(shstrndx as usize)
            .map(|(_, s)| Section {
                name: String::new(),
                kind: s.kind,
                offset: s.offset,
                size: s.size,
                link: 0,
            })
            .ok_or(CubinError::NotElf("e_shstrndx out of range"))?;
        raw.into_iter()
            .map(|(name, mut s)| {
                s.name = self.cstr(&strtab, name)?;
                Ok(s)
            })
            .collect()
    }

    fn kernels(
        &self,
        sections: &[Section],
        target: SmTarget,
    ) -> Result<Vec<KernelInfo>, CubinError> {
        const SHT_SYMTAB: u32 = 2;
        const STT_FUNC: u8 = 2;
        let Some(symtab) = sections.iter().find(|s| s.kind == SHT_SYMTAB) else {
            return Ok(Vec::new());
        };
        let strtab = sections
            .get(symtab.link as usize)
            .ok_or(CubinError::NotElf("symbol table links to no string table"))?;
        let data = self.bytes(symtab.offset, symtab.size, "symbol table")?;
        let resources = match sections.iter().find(|s| s.name == ".nv.info") {
            Some(s) => function_resources(
                self.bytes(s.offset, s.size, "function attributes")?,
                s.offset,
            )?,
            None => Vec::new(),
        };
        let mut kernels = Vec::new();
        for (index, sym) in data.chunks_exact(24).enumerate() {
            if sym[4] & 0xf != STT_FUNC {
                continue;
            }
            let name = self.cstr(strtab, u32::from_le_bytes([sym[0], sym[1], sym[2], sym[3]]))?;
            // Matched without making the names: a fresh process's hit reads this once.
            let named =
                |s: &&Section, prefix: &str| s.name.strip_prefix(prefix).is_some_and(|n| n == name);
            let Some(info) = sections.iter().find(|s| named(s, ".nv.info.")) else {
                continue;
            };
            let attrs = self.bytes(info.offset, info.size, "kernel attributes")?;
            let shared = sections.iter().find(|s| named(s, ".nv.shared."));
            let mut k = kernel_info(name, attrs, info.offset)?;
            if let Some(shared) = shared {
                // sm_90 on: the section also holds the shared memory ptxas reserves per block.
                let reserved = if target.major() >= 9 {
                    SM90_RESERVED_SHARED
                } else {
                    0
                };
                let declared = shared.size.saturating_sub(reserved);
                k.group_segment_fixed_size =
                    u32::try_from(declared).map_err(|_| CubinError::BadAttribute {
                        what: format!("static shared memory of {} bytes", shared.size),
                        offset: shared.offset,
                    })?;
            }
            for &(symbol, attr, value) in &resources {
                if symbol as usize == index {
                    match attr {
                        EIATTR_REGCOUNT => k.vgpr_count = value,
                        EIATTR_FRAME_SIZE => k.private_segment_fixed_size = value,
                        _ => {}
                    }
                }
            }
            kernels.push(k);
        }
        Ok(kernels)
    }
}

const EIATTR_FRAME_SIZE: u8 = 0x11;
/// Bytes of a `.nv.shared.<kernel>` section on `sm_90` and later that ptxas reserves for the
/// system rather than the kernel's `__shared__` variables.
const SM90_RESERVED_SHARED: u64 = 1024;
const EIATTR_REGCOUNT: u8 = 0x2f;

/// The per-function attributes of `.nv.info` this reader uses: (symbol index, attribute,
/// value) for `EIATTR_REGCOUNT` and `EIATTR_FRAME_SIZE`.
fn function_resources(attrs: &[u8], base: u64) -> Result<Vec<(u32, u8, u32)>, CubinError> {
    let mut found = Vec::new();
    for a in attributes(attrs, base, "function attribute") {
        let (_, attr, value) = a?;
        if let AttrValue::Bytes(value) = value {
            if matches!(attr, EIATTR_REGCOUNT | EIATTR_FRAME_SIZE) && value.len() >= 8 {
                let word = |k: usize| {
                    u32::from_le_bytes([value[k], value[k + 1], value[k + 2], value[k + 3]])
                };
                found.push((word(0), attr, word(4)));
            }
        }
    }
    Ok(found)
}

/// The value of one attribute of a `.nv.info` list: two bytes (formats 1-3) or, for format 4
/// (`EIFMT_SVAL`), the bytes that follow its `u16` size.
enum AttrValue<'a> {
    Short(u16),
    Bytes(&'a [u8]),
}

/// The attributes of a `.nv.info` list, in order, read as they are asked for: (offset in the
/// list, attribute, value), or the error for one whose value runs past the end, after which
/// nothing more (`what` names the list in it; `base`: the list's offset).
struct Attributes<'a> {
    attrs: &'a [u8],
    base: u64,
    what: &'static str,
    at: usize,
}

fn attributes<'a>(attrs: &'a [u8], base: u64, what: &'static str) -> Attributes<'a> {
    Attributes {
        attrs,
        base,
        what,
        at: 0,
    }
}

impl<'a> Iterator for Attributes<'a> {
    type Item = Result<(usize, u8, AttrValue<'a>), CubinError>;

    fn next(&mut self) -> Option<Self::Item> {
        let (attrs, i) = (self.attrs, self.at);
        if i + 4 > attrs.len() {
            return None;
        }
        let (format, attr) = (attrs[i], attrs[i + 1]);
        let short = u16::from_le_bytes([attrs[i + 2], attrs[i + 3]]);
        if format != 4 {
            self.at += 4;
            return Some(Ok((i, attr, AttrValue::Short(short))));
        }
        let len = usize::from(short);
        match attrs.get(i + 4..i + 4 + len) {
            Some(value) => {
                self.at += 4 + len;
                Some(Ok((i, attr, AttrValue::Bytes(value))))
            }
            None => {
                self.at = attrs.len();
                Some(Err(CubinError::Truncated {
                    what: self.what,
                    offset: self.base + i as u64,
                    len: 4 + len as u64,
                    size: attrs.len(),
                }))
            }
        }
    }
}

fn kernel_info(name: String, attrs: &[u8], base: u64) -> Result<KernelInfo, CubinError> {
    const EIATTR_MAX_THREADS: u8 = 0x05;
    const EIATTR_KPARAM_INFO: u8 = 0x17;
    const EIATTR_CBANK_PARAM_SIZE: u8 = 0x19;
    let mut params: Vec<(u16, KernelArg)> = Vec::new();
    let mut param_size = 0u32;
    let mut max_threads = 0u32;
    for a in attributes(attrs, base, "kernel attribute") {
        let (i, attr, value) = a?;
        let value = match value {
            AttrValue::Short(v) => {
                if attr == EIATTR_CBANK_PARAM_SIZE {
                    param_size = u32::from(v);
                }
                continue;
            }
            AttrValue::Bytes(v) => v,
        };
        let len = value.len();
        let word = |k: usize| {
            value
                .get(k..k + 4)
                .map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
        };
        match attr {
            EIATTR_KPARAM_INFO if len >= 12 => {
                let ordinal = u16::from_le_bytes([value[4], value[5]]);
                let offset = u32::from(u16::from_le_bytes([value[6], value[7]]));
                let size = word(8).unwrap_or(0) >> 18;
                params.push((
                    ordinal,
                    KernelArg {
                        name: None,
                        type_name: None,
                        offset,
                        size,
                        value_kind: "by_value".to_owned(),
                        address_space: None,
                        access: None,
                        actual_access: None,
                    },
                ));
            }
            EIATTR_MAX_THREADS if len >= 12 => {
                let dims = [word(0), word(4), word(8)];
                // A product past u32 is no block size any device has (found by fuzzing).
                max_threads = dims
                    .iter()
                    .try_fold(1u32, |acc, d| acc.checked_mul(d.unwrap_or(1).max(1)))
                    .ok_or_else(|| CubinError::BadAttribute {
                        what: format!(
                            "max threads per block {} x {} x {} does not fit 32 bits",
                            dims[0].unwrap_or(1),
                            dims[1].unwrap_or(1),
                            dims[2].unwrap_or(1)
                        ),
                        offset: base + i as u64,
                    })?;
            }
            _ => {}
        }
    }
    params.sort_by_key(|(ordinal, _)| *ordinal);
    Ok(KernelInfo {
        symbol: name.clone(),
        name,
        args: params.into_iter().map(|(_, a)| a).collect(),
        kernarg_segment_size: param_size,
        kernarg_segment_align: 0,
        group_segment_fixed_size: 0,
        private_segment_fixed_size: 0,
        sgpr_count: 0,
        vgpr_count: 0,
        agpr_count: None,
        sgpr_spill_count: 0,
        vgpr_spill_count: 0,
        wavefront_size: 32,
        max_flat_workgroup_size: max_threads,
        uses_dynamic_stack: false,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const ADD_ONE: &[u8] = include_bytes!("../../tests/data/code-objects/cuda/add_one-sm_90.cubin");

    #[test]
    fn reads_a_committed_sm90_cubin() {
        let c = Cubin::from_bytes(ADD_ONE).unwrap();
        assert_eq!(c.target(), SmTarget::new(90));
        let k = c.kernel("add_one").unwrap();
        assert_eq!(k.args.len(), 1);
        assert_eq!((k.args[0].offset, k.args[0].size), (0, 8));
        assert_eq!(k.wavefront_size, 32);
    }

    #[test]
    fn every_truncation_is_an_error_not_a_panic() {
        for len in 0..ADD_ONE.len() {
            let _ = Cubin::from_bytes(&ADD_ONE[..len]);
        }
        assert!(Cubin::from_bytes(&ADD_ONE[..100]).is_err());
    }

    #[test]
    fn every_flipped_byte_is_read_without_panic() {
        let mut bytes = ADD_ONE.to_vec();
        for i in 0..bytes.len() {
            bytes[i] ^= 0xff;
            let _ = Cubin::from_bytes(&bytes);
            bytes[i] ^= 0xff;
        }
        assert!(Cubin::from_bytes(&bytes).is_ok());
    }

    #[test]
    fn unknown_abi_version_is_named() {
        let mut bytes = ADD_ONE.to_vec();
        bytes[8] = 9;
        let err = Cubin::from_bytes(&bytes).unwrap_err();
        assert_eq!(
            err,
            CubinError::AbiVersion {
                osabi: bytes[7],
                abi_version: 9
            }
        );
        assert!(err.to_string().contains("ABI version 9"), "{err}");
    }
}
