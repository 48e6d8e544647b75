//! What `doctor` reads from a host shared library (a HIP runtime) without loading it: its
//! `DT_SONAME` and the names of the symbols it exports (`.dynsym`, defined, global or weak).
//! ELF64 little-endian only (x86-64 and aarch64 Linux); the System V gABI is the reference.

use std::collections::BTreeSet;
use std::path::Path;

/// The facts read from a shared library.
#[derive(Debug, Clone, Default)]
pub struct SharedObject {
    /// `DT_SONAME`, when the library has one.
    pub soname: Option<String>,
    /// Names of the defined global and weak dynamic symbols (symbol versions live in
    /// `.gnu.version`, so the names are plain: `hipModuleLoadData`).
    pub exports: BTreeSet<String>,
}

const SHT_DYNAMIC: u32 = 6;
const SHT_DYNSYM: u32 = 11;
const DT_NULL: i64 = 0;
const DT_SONAME: i64 = 14;

fn u16_at(b: &[u8], o: usize) -> Option<u16> {
    Some(u16::from_le_bytes(
        b.get(o..o.checked_add(2)?)?.try_into().ok()?,
    ))
}
fn u32_at(b: &[u8], o: usize) -> Option<u32> {
    Some(u32::from_le_bytes(
        b.get(o..o.checked_add(4)?)?.try_into().ok()?,
    ))
}
fn u64_at(b: &[u8], o: usize) -> Option<u64> {
    Some(u64::from_le_bytes(
        b.get(o..o.checked_add(8)?)?.try_into().ok()?,
    ))
}

struct Section {
    kind: u32,
    offset: usize,
    size: usize,
    link: u32,
    entsize: usize,
}

fn cstr_at(b: &[u8], o: usize) -> Option<&str> {
    let rest = b.get(o..)?;
    let end = rest.iter().position(|&c| c == 0)?;
    std::str::from_utf8(&rest[..end]).ok()
}

/// Reads `path`.
///
/// Errors: a message naming the path and what was wrong (unreadable, not ELF64 little-endian,
/// section table out of bounds).
pub fn read(path: &Path) -> Result<SharedObject, String> {
    let bytes = hipjit::file_read::read_file(
        path,
        hipjit::file_read::CODE_OBJECT_LIMIT,
        "a shared library",
        hipjit::file_read::Streams::None,
    )
    .map_err(|e| format!("{}: cannot read the file: {}", path.display(), e.reason()))?;
    parse(&bytes).map_err(|what| format!("{}: {what}", path.display()))
}

/// Parses the bytes of a shared library.
pub fn parse(b: &[u8]) -> Result<SharedObject, String> {
    if !b.starts_with(b"\x7fELF") {
        return Err("not an ELF file".into());
    }
    if b.get(4) != Some(&2) || b.get(5) != Some(&1) {
        return Err("not a 64-bit little-endian ELF file".into());
    }
    let bad = || "truncated or malformed ELF header".to_owned();
    let shoff = usize::try_from(u64_at(b, 0x28).ok_or_else(bad)?).map_err(|_| bad())?;
    let shentsize = usize::from(u16_at(b, 0x3a).ok_or_else(bad)?);
    let shnum = usize::from(u16_at(b, 0x3c).ok_or_else(bad)?);
    if shentsize < 64 {
        return Err(format!("section header size {shentsize} is below 64"));
    }
    let mut sections = Vec::with_capacity(shnum);
    for i in 0..shnum {
        let outside = || format!("section header {i} lies outside the file");
        let h = shoff
            .checked_add(i.checked_mul(shentsize).ok_or_else(bad)?)
            .ok_or_else(bad)?;
        // The header's 64 bytes lie in the file, so `h + 0x38 + 8` cannot overflow below.
        if h.checked_add(64).is_none_or(|end| end > b.len()) {
            return Err(outside());
        }
        let sec = (|| {
            Some(Section {
                kind: u32_at(b, h + 4)?,
                offset: usize::try_from(u64_at(b, h + 0x18)?).ok()?,
                size: usize::try_from(u64_at(b, h + 0x20)?).ok()?,
                link: u32_at(b, h + 0x28)?,
                entsize: usize::try_from(u64_at(b, h + 0x38)?).ok()?,
            })
        })()
        .ok_or_else(outside)?;
        sections.push(sec);
    }
    let data = |s: &Section| -> Option<&[u8]> { b.get(s.offset..s.offset.checked_add(s.size)?) };
    let mut so = SharedObject::default();
    for s in &sections {
        match s.kind {
            SHT_DYNAMIC => {
                let (Some(d), Some(strtab)) =
                    (data(s), sections.get(s.link as usize).and_then(&data))
                else {
                    continue;
                };
                for e in d.chunks_exact(16) {
                    let tag = u64_at(e, 0).unwrap_or(0) as i64;
                    if tag == DT_NULL {
                        break;
                    }
                    if tag == DT_SONAME {
                        let off = u64_at(e, 8).and_then(|v| usize::try_from(v).ok());
                        so.soname = off.and_then(|o| cstr_at(strtab, o)).map(str::to_owned);
                    }
                }
            }
            SHT_DYNSYM => {
                let (Some(d), Some(strtab)) =
                    (data(s), sections.get(s.link as usize).and_then(&data))
                else {
                    continue;
                };
                let ent = if s.entsize >= 24 { s.entsize } else { 24 };
                for sym in d.chunks_exact(ent) {
                    let name = u32_at(sym, 0).unwrap_or(0) as usize;
                    let info = sym[4];
                    let shndx = u16_at(sym, 6).unwrap_or(0);
                    let bind = info >> 4;
                    // Defined (not SHN_UNDEF), STB_GLOBAL or STB_WEAK.
                    if shndx != 0 && (bind == 1 || bind == 2) {
                        if let Some(n) = cstr_at(strtab, name).filter(|n| !n.is_empty()) {
                            so.exports.insert(n.to_owned());
                        }
                    }
                }
            }
            _ => {}
        }
    }
    Ok(so)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn libc_exports_malloc_and_has_a_soname() {
        // The C library this test binary runs with: real, and on every Linux machine.
        let maps = std::fs::read_to_string("/proc/self/maps").expect("/proc/self/maps");
        let libc = maps
            .lines()
            .filter_map(|l| l.split_whitespace().nth(5))
            .find(|p| p.contains("/libc.so"))
            .expect("libc is mapped");
        let so = read(Path::new(libc)).expect("libc parses");
        assert_eq!(so.soname.as_deref(), Some("libc.so.6"));
        assert!(so.exports.contains("malloc"));
    }

    #[test]
    fn a_section_table_at_the_end_of_the_address_space_is_an_error() {
        // An ELF64 LE header whose e_shoff is near usize::MAX, one 64-byte section header.
        let mut b = vec![0u8; 64];
        b[..6].copy_from_slice(b"\x7fELF\x02\x01");
        b[0x28..0x30].copy_from_slice(&(u64::MAX - 2).to_le_bytes());
        b[0x3a..0x3c].copy_from_slice(&64u16.to_le_bytes());
        b[0x3c..0x3e].copy_from_slice(&1u16.to_le_bytes());
        assert_eq!(
            parse(&b).unwrap_err(),
            "section header 0 lies outside the file"
        );
    }

    #[test]
    fn text_is_not_elf() {
        assert_eq!(parse(b"hello").unwrap_err(), "not an ELF file");
    }
}
