//! Bounds-checked reading of ELF64 little-endian AMDGPU code objects: the header, section
//! headers, notes and symbol tables. Every read names what it was reading and where, and every
//! malformed input is a [`CodeObjectError`], never a panic.
//!
//! Source: the System V gABI ELF-64 layout and LLVM AMDGPUUsage "ELF Code Object" ("Header",
//! "Note Records", "Symbols").

use super::CodeObjectError;

/// `EM_AMDGPU`.
pub(crate) const EM_AMDGPU: u16 = 224;
/// `ELFOSABI_AMDGPU_HSA`.
pub(crate) const ELFOSABI_AMDGPU_HSA: u8 = 64;
/// `NT_AMDGPU_METADATA`.
pub(crate) const NT_AMDGPU_METADATA: u32 = 32;

const SHT_SYMTAB: u32 = 2;
const SHT_NOTE: u32 = 7;
const SHT_DYNSYM: u32 = 11;
const PT_NOTE: u32 = 4;
const ELF64_HEADER_SIZE: usize = 64;
const SHDR_SIZE: usize = 64;
const PHDR_SIZE: usize = 56;
const SYM_SIZE: usize = 24;

/// Little-endian reads over a byte slice that fail with the name of what was read and where.
#[derive(Clone, Copy)]
pub(crate) struct Bytes<'a> {
    data: &'a [u8],
}

impl<'a> Bytes<'a> {
    pub(crate) fn new(data: &'a [u8]) -> Self {
        Bytes { data }
    }

    /// `len` bytes at `offset`, or a [`CodeObjectError::Truncated`] naming `what`.
    pub(crate) fn slice(
        &self,
        offset: u64,
        len: u64,
        what: &str,
    ) -> Result<&'a [u8], CodeObjectError> {
        self.slice_with(offset, len, || what.to_owned())
    }

    /// [`Bytes::slice`], the name made by `what` only for the error: readers of many
    /// headers name each field by its header's index, and a valid object should not pay
    /// for formatting names no error uses.
    pub(crate) fn slice_with(
        &self,
        offset: u64,
        len: u64,
        what: impl FnOnce() -> String,
    ) -> Result<&'a [u8], CodeObjectError> {
        let end = offset.checked_add(len);
        match end {
            Some(end) if end <= self.data.len() as u64 => {
                // Both bounds fit in usize: they are at most data.len().
                Ok(&self.data[offset as usize..end as usize])
            }
            _ => Err(CodeObjectError::Truncated {
                what: what(),
                offset,
                needed: len,
                len: self.data.len() as u64,
            }),
        }
    }

    pub(crate) fn u16(&self, offset: u64, what: &str) -> Result<u16, CodeObjectError> {
        self.u16_with(offset, || what.to_owned())
    }

    pub(crate) fn u32(&self, offset: u64, what: &str) -> Result<u32, CodeObjectError> {
        self.u32_with(offset, || what.to_owned())
    }

    pub(crate) fn u64(&self, offset: u64, what: &str) -> Result<u64, CodeObjectError> {
        self.u64_with(offset, || what.to_owned())
    }

    /// The byte at `offset`, named lazily ([`Bytes::slice_with`]).
    pub(crate) fn u8_with(
        &self,
        offset: u64,
        what: impl FnOnce() -> String,
    ) -> Result<u8, CodeObjectError> {
        Ok(self.slice_with(offset, 1, what)?[0])
    }

    /// [`Bytes::u16`] named lazily ([`Bytes::slice_with`]).
    pub(crate) fn u16_with(
        &self,
        offset: u64,
        what: impl FnOnce() -> String,
    ) -> Result<u16, CodeObjectError> {
        let b = self.slice_with(offset, 2, what)?;
        Ok(u16::from_le_bytes([b[0], b[1]]))
    }

    /// [`Bytes::u32`] named lazily ([`Bytes::slice_with`]).
    pub(crate) fn u32_with(
        &self,
        offset: u64,
        what: impl FnOnce() -> String,
    ) -> Result<u32, CodeObjectError> {
        let b = self.slice_with(offset, 4, what)?;
        Ok(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }

    /// [`Bytes::u64`] named lazily ([`Bytes::slice_with`]).
    pub(crate) fn u64_with(
        &self,
        offset: u64,
        what: impl FnOnce() -> String,
    ) -> Result<u64, CodeObjectError> {
        let b = self.slice_with(offset, 8, what)?;
        let mut a = [0u8; 8];
        a.copy_from_slice(b);
        Ok(u64::from_le_bytes(a))
    }
}

/// Well-known `e_machine` values, to name what a non-AMDGPU ELF is: (article, name).
pub(crate) fn machine_name(e_machine: u16) -> Option<(&'static str, &'static str)> {
    Some(match e_machine {
        3 => ("an", "x86 (i386)"),
        8 => ("a", "MIPS"),
        20 => ("a", "PowerPC"),
        21 => ("a", "PowerPC64"),
        40 => ("an", "ARM"),
        62 => ("an", "x86-64"),
        183 => ("an", "AArch64"),
        190 => ("an", "NVIDIA CUDA"),
        243 => ("a", "RISC-V"),
        247 => ("a", "BPF"),
        258 => ("a", "LoongArch"),
        EM_AMDGPU => ("an", "AMDGPU"),
        _ => return None,
    })
}

/// The ELF header fields hipjit uses.
#[derive(Clone, Debug)]
pub(crate) struct Header {
    pub(crate) os_abi: u8,
    pub(crate) abi_version: u8,
    pub(crate) e_type: u16,
    pub(crate) e_machine: u16,
    pub(crate) e_flags: u32,
    e_phoff: u64,
    e_shoff: u64,
    e_phentsize: u16,
    e_phnum: u16,
    e_shentsize: u16,
    e_shnum: u16,
}

/// One section header.
#[derive(Clone, Debug)]
pub(crate) struct Section {
    pub(crate) index: usize,
    pub(crate) sh_type: u32,
    /// `sh_flags` (`SHF_EXECINSTR`, 4: code).
    pub(crate) sh_flags: u64,
    /// `sh_addr`: the section's virtual address in the loaded image.
    pub(crate) sh_addr: u64,
    pub(crate) sh_link: u32,
    pub(crate) sh_offset: u64,
    pub(crate) sh_size: u64,
    pub(crate) sh_entsize: u64,
}

/// One symbol with its name resolved.
#[derive(Clone, Debug)]
pub(crate) struct Symbol {
    pub(crate) name: String,
    /// `STT_*` (low nibble of st_info): 1 object, 2 function.
    pub(crate) kind: u8,
    pub(crate) shndx: u16,
    /// `st_value`: the symbol's virtual address.
    pub(crate) value: u64,
    /// `st_size` in bytes.
    pub(crate) size: u64,
}

/// A parsed view of an ELF64 little-endian file.
pub(crate) struct Elf<'a> {
    pub(crate) bytes: Bytes<'a>,
    pub(crate) header: Header,
    pub(crate) sections: Vec<Section>,
}

/// Reads the ELF header; checks magic, class, data encoding and version only (the AMDGPU
/// checks are the caller's, so that their errors can name what the file is instead).
pub(crate) fn parse_header(data: &[u8]) -> Result<Header, CodeObjectError> {
    let b = Bytes::new(data);
    let ident = b.slice(0, 16, "ELF identification (e_ident)")?;
    if &ident[..4] != b"\x7fELF" {
        return Err(CodeObjectError::BadElf {
            what: "ELF magic".into(),
            offset: 0,
        });
    }
    match ident[4] {
        2 => {}
        1 => {
            return Err(CodeObjectError::UnknownFormat {
                found: "a 32-bit ELF (ELFCLASS32)".into(),
            })
        }
        c => {
            return Err(CodeObjectError::UnknownFormat {
                found: format!("an ELF with invalid class byte {c}"),
            })
        }
    }
    match ident[5] {
        1 => {}
        2 => {
            return Err(CodeObjectError::UnknownFormat {
                found: "a big-endian ELF (ELFDATA2MSB)".into(),
            })
        }
        d => {
            return Err(CodeObjectError::UnknownFormat {
                found: format!("an ELF with invalid data encoding byte {d}"),
            })
        }
    }
    if ident[6] != 1 {
        return Err(CodeObjectError::BadElf {
            what: format!("EI_VERSION {} (expected 1)", ident[6]),
            offset: 6,
        });
    }
    b.slice(0, ELF64_HEADER_SIZE as u64, "ELF64 header")?;
    Ok(Header {
        os_abi: ident[7],
        abi_version: ident[8],
        e_type: b.u16(16, "e_type")?,
        e_machine: b.u16(18, "e_machine")?,
        e_flags: b.u32(48, "e_flags")?,
        e_phoff: b.u64(32, "e_phoff")?,
        e_shoff: b.u64(40, "e_shoff")?,
        e_phentsize: b.u16(54, "e_phentsize")?,
        e_phnum: b.u16(56, "e_phnum")?,
        e_shentsize: b.u16(58, "e_shentsize")?,
        e_shnum: b.u16(60, "e_shnum")?,
    })
}

impl<'a> Elf<'a> {
    /// Reads the section header table of an ELF whose header is already checked.
    pub(crate) fn parse(data: &'a [u8], header: Header) -> Result<Elf<'a>, CodeObjectError> {
        let bytes = Bytes::new(data);
        let mut sections = Vec::new();
        if header.e_shoff != 0 {
            if usize::from(header.e_shentsize) != SHDR_SIZE {
                return Err(CodeObjectError::BadElf {
                    what: format!(
                        "e_shentsize {} (ELF64 section headers are {SHDR_SIZE} bytes)",
                        header.e_shentsize
                    ),
                    offset: 58,
                });
            }
            // Extended numbering: e_shnum 0 means the count is section 0's sh_size.
            let mut count = u64::from(header.e_shnum);
            if count == 0 {
                count = bytes.u64(
                    header.e_shoff.saturating_add(32),
                    "section header 0 (sh_size)",
                )?;
            }
            let table_len = count.saturating_mul(SHDR_SIZE as u64);
            bytes.slice(header.e_shoff, table_len, "section header table")?;
            for index in 0..count as usize {
                let at = header.e_shoff + (index * SHDR_SIZE) as u64;
                let what = |field: &str| format!("section header {index} ({field})");
                let section = Section {
                    index,
                    sh_type: bytes.u32_with(at + 4, || what("sh_type"))?,
                    sh_flags: bytes.u64_with(at + 8, || what("sh_flags"))?,
                    sh_addr: bytes.u64_with(at + 16, || what("sh_addr"))?,
                    sh_offset: bytes.u64_with(at + 24, || what("sh_offset"))?,
                    sh_size: bytes.u64_with(at + 32, || what("sh_size"))?,
                    sh_link: bytes.u32_with(at + 40, || what("sh_link"))?,
                    sh_entsize: bytes.u64_with(at + 56, || what("sh_entsize"))?,
                };
                sections.push(section);
            }
        }
        Ok(Elf {
            bytes,
            header,
            sections,
        })
    }

    /// The `size` bytes at virtual address `addr` inside section `shndx` (a symbol's bytes),
    /// bounds-checked against the section and the file.
    pub(crate) fn symbol_data(
        &self,
        shndx: u16,
        addr: u64,
        size: u64,
        what: &str,
    ) -> Result<&'a [u8], CodeObjectError> {
        let section =
            self.sections
                .get(usize::from(shndx))
                .ok_or_else(|| CodeObjectError::BadElf {
                    what: format!("{what} is in section {shndx}, which does not exist"),
                    offset: self.header.e_shoff,
                })?;
        let data = self.section_data(section)?;
        let start = addr.checked_sub(section.sh_addr);
        let range = start.and_then(|s| {
            Some((
                usize::try_from(s).ok()?,
                usize::try_from(s.checked_add(size)?).ok()?,
            ))
        });
        match range {
            Some((s, e)) if e <= data.len() => Ok(&data[s..e]),
            _ => Err(CodeObjectError::BadElf {
                what: format!(
                    "{what} ({size} bytes at {addr:#x}) lies outside its section {shndx} ({} bytes at {:#x})",
                    section.sh_size, section.sh_addr
                ),
                offset: section.sh_offset,
            }),
        }
    }

    /// The contents of a section, bounds-checked (`SHT_NOBITS` sections have none).
    pub(crate) fn section_data(&self, section: &Section) -> Result<&'a [u8], CodeObjectError> {
        const SHT_NOBITS: u32 = 8;
        if section.sh_type == SHT_NOBITS {
            return Ok(&[]);
        }
        self.bytes
            .slice_with(section.sh_offset, section.sh_size, || {
                format!("contents of section {}", section.index)
            })
    }

    /// The note areas: `SHT_NOTE` sections, or `PT_NOTE` segments when there is no section
    /// header table. Each item is (file offset, bytes).
    pub(crate) fn note_areas(&self) -> Result<Vec<(u64, &'a [u8])>, CodeObjectError> {
        let mut areas = Vec::new();
        if !self.sections.is_empty() {
            for s in self.sections.iter().filter(|s| s.sh_type == SHT_NOTE) {
                areas.push((s.sh_offset, self.section_data(s)?));
            }
            return Ok(areas);
        }
        let h = &self.header;
        if h.e_phoff == 0 || h.e_phnum == 0 {
            return Ok(areas);
        }
        if usize::from(h.e_phentsize) != PHDR_SIZE {
            return Err(CodeObjectError::BadElf {
                what: format!(
                    "e_phentsize {} (ELF64 program headers are {PHDR_SIZE} bytes)",
                    h.e_phentsize
                ),
                offset: 54,
            });
        }
        for index in 0..usize::from(h.e_phnum) {
            let at = h.e_phoff.saturating_add((index * PHDR_SIZE) as u64);
            let what = |field: &str| format!("program header {index} ({field})");
            if self.bytes.u32_with(at, || what("p_type"))? != PT_NOTE {
                continue;
            }
            let offset = self
                .bytes
                .u64_with(at.saturating_add(8), || what("p_offset"))?;
            let size = self
                .bytes
                .u64_with(at.saturating_add(32), || what("p_filesz"))?;
            areas.push((
                offset,
                self.bytes
                    .slice_with(offset, size, || format!("PT_NOTE segment {index}"))?,
            ));
        }
        Ok(areas)
    }

    /// Finds the descriptor of the first note with owner `name` and type `note_type`.
    /// Returns (file offset of the descriptor, descriptor bytes).
    pub(crate) fn find_note(
        &self,
        name: &[u8],
        note_type: u32,
    ) -> Result<Option<(u64, &'a [u8])>, CodeObjectError> {
        for (area_offset, area) in self.note_areas()? {
            let b = Bytes::new(area);
            let mut at = 0u64;
            while at < area.len() as u64 {
                let here = area_offset + at;
                let what = |field: &str| format!("note header at offset {here:#x} ({field})");
                let namesz = u64::from(b.u32_with(at, || what("n_namesz"))?);
                let descsz = u64::from(b.u32_with(at + 4, || what("n_descsz"))?);
                let ntype = b.u32_with(at + 8, || what("n_type"))?;
                let name_at = at + 12;
                let desc_at = name_at + align4(namesz);
                let note_name = b.slice_with(name_at, namesz, || what("name"))?;
                let desc = b.slice_with(desc_at, descsz, || what("descriptor"))?;
                let owner = note_name.strip_suffix(b"\0").unwrap_or(note_name);
                if owner == name && ntype == note_type {
                    return Ok(Some((area_offset + desc_at, desc)));
                }
                at = desc_at + align4(descsz);
            }
        }
        Ok(None)
    }

    /// All symbols of `.symtab` and `.dynsym` (names resolved through their linked string
    /// tables).
    pub(crate) fn symbols(&self) -> Result<Vec<Symbol>, CodeObjectError> {
        let mut out = Vec::new();
        for table in self
            .sections
            .iter()
            .filter(|s| s.sh_type == SHT_SYMTAB || s.sh_type == SHT_DYNSYM)
        {
            if table.sh_entsize != SYM_SIZE as u64 {
                return Err(CodeObjectError::BadElf {
                    what: format!(
                        "symbol table section {} has sh_entsize {} (ELF64 symbols are {SYM_SIZE} bytes)",
                        table.index, table.sh_entsize
                    ),
                    offset: table.sh_offset,
                });
            }
            let strtab = self
                .sections
                .get(table.sh_link as usize)
                .ok_or_else(|| CodeObjectError::BadElf {
                    what: format!(
                        "symbol table section {} links to string table section {}, which does not exist",
                        table.index, table.sh_link
                    ),
                    offset: table.sh_offset,
                })?;
            let strings = self.section_data(strtab)?;
            let data = Bytes::new(self.section_data(table)?);
            let count = table.sh_size / SYM_SIZE as u64;
            for i in 0..count {
                let at = i * SYM_SIZE as u64;
                let file_at = table.sh_offset + at;
                let what = |field: &str| format!("symbol at offset {file_at:#x} ({field})");
                let st_name = data.u32_with(at, || what("st_name"))?;
                let st_info = data.u8_with(at + 4, || what("st_info"))?;
                let shndx = data.u16_with(at + 6, || what("st_shndx"))?;
                let value = data.u64_with(at + 8, || what("st_value"))?;
                let size = data.u64_with(at + 16, || what("st_size"))?;
                let name = c_string(strings, st_name as usize).ok_or_else(|| {
                    CodeObjectError::BadElf {
                        what: format!(
                            "symbol name offset {st_name} outside string table section {} or not terminated",
                            strtab.index
                        ),
                        offset: file_at,
                    }
                })?;
                out.push(Symbol {
                    name: String::from_utf8_lossy(name).into_owned(),
                    kind: st_info & 0xf,
                    shndx,
                    value,
                    size,
                });
            }
        }
        Ok(out)
    }
}

fn align4(n: u64) -> u64 {
    n.saturating_add(3) & !3
}

/// The NUL-terminated string at `offset` in `table`.
fn c_string(table: &[u8], offset: usize) -> Option<&[u8]> {
    let rest = table.get(offset..)?;
    let end = rest.iter().position(|&b| b == 0)?;
    Some(&rest[..end])
}
