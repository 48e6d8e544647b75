//! Every malformed input gives its named error: real code objects and bundles from
//! tests/data/code-objects with one thing broken each (the offsets patched are found in the test
//! from the ELF and bundle layouts, not from the reader).

use std::io::{Read, Write};

use hipjit::code_object::{CodeObject, CodeObjectError};
use hipjit::target_id::{TargetId, TargetIdError};

fn read(name: &str) -> Vec<u8> {
    let path = crate::common::code_object(name);
    std::fs::read(&path).unwrap_or_else(|e| {
        panic!(
            "{}: {e}; rebuild with tests/data/code-objects/regen.sh",
            path.display()
        )
    })
}

fn small() -> Vec<u8> {
    read("single-gfx90a.hsaco")
}

fn err(bytes: &[u8]) -> CodeObjectError {
    match CodeObject::from_bytes(bytes, None) {
        Ok(_) => panic!("accepted a malformed input"),
        Err(e) => e,
    }
}

fn err_for(bytes: &[u8], target: &str) -> CodeObjectError {
    match CodeObject::from_bytes(bytes, Some(&TargetId::parse(target).unwrap())) {
        Ok(_) => panic!("accepted a malformed input"),
        Err(e) => e,
    }
}

fn le64(b: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(b[at..at + 8].try_into().unwrap())
}

fn find(haystack: &[u8], needle: &[u8]) -> Vec<usize> {
    haystack
        .windows(needle.len())
        .enumerate()
        .filter(|(_, w)| *w == needle)
        .map(|(i, _)| i)
        .collect()
}

/// Offset of the NT_AMDGPU_METADATA note header (n_namesz = 7, type 32, owner "AMDGPU").
fn metadata_note(elf: &[u8]) -> usize {
    find(elf, b"AMDGPU\0\0")
        .into_iter()
        .map(|i| i - 12)
        .find(|&h| elf[h..h + 4] == [7, 0, 0, 0] && elf[h + 8..h + 12] == [32, 0, 0, 0])
        .expect("metadata note")
}

fn assert_truncated(e: &CodeObjectError, what_contains: &str) {
    match e {
        CodeObjectError::Truncated { what, .. } => {
            assert!(
                what.contains(what_contains),
                "{what:?} lacks {what_contains:?}"
            )
        }
        other => panic!("expected Truncated ({what_contains}), got {other:?}"),
    }
    assert!(e.to_string().starts_with("truncated input: "), "{e}");
}

// ---- truncation -----------------------------------------------------------------------------

#[test]
fn an_empty_input_is_named_empty() {
    let e = err(b"");
    assert!(
        matches!(&e, CodeObjectError::UnknownFormat { found } if found == "empty"),
        "{e:?}"
    );
}

#[test]
fn truncation_inside_the_elf_identification_is_reported() {
    assert_truncated(&err(&small()[..10]), "ELF identification");
}

#[test]
fn truncation_inside_the_elf_header_is_reported() {
    let e = err(&small()[..40]);
    assert_truncated(&e, "ELF64 header");
    assert!(
        e.to_string()
            .contains("at offset 0x0 needs 64 bytes, but the input is 40 bytes long"),
        "{e}"
    );
}

#[test]
fn truncation_inside_the_section_header_table_is_reported() {
    let elf = small();
    let shoff = le64(&elf, 40) as usize;
    assert_truncated(&err(&elf[..shoff + 100]), "section header table");
}

#[test]
fn a_section_reaching_past_the_end_is_reported() {
    // Section 1 is .note in every object here: make its sh_size larger than the file.
    let mut elf = small();
    let size_at = le64(&elf, 40) as usize + 64 + 32;
    elf[size_at..size_at + 8].copy_from_slice(&(1u64 << 20).to_le_bytes());
    assert_truncated(&err(&elf), "contents of section 1");
}

#[test]
fn every_truncation_of_a_small_object_is_an_error() {
    let elf = small();
    for len in 0..elf.len() {
        assert!(
            CodeObject::from_bytes(&elf[..len], None).is_err(),
            "accepted the first {len} bytes"
        );
    }
}

// ---- ELF header fields ------------------------------------------------------------------------

#[test]
fn a_wrong_e_machine_is_named() {
    let mut elf = small();
    elf[18..20].copy_from_slice(&62u16.to_le_bytes());
    let e = err(&elf);
    assert!(
        matches!(e, CodeObjectError::WrongMachine { e_machine: 62, .. }),
        "{e:?}"
    );
    assert_eq!(
        e.to_string(),
        "not an AMDGPU code object: the input is an x86-64 ELF (e_machine 62, expected 224, EM_AMDGPU)"
    );
}

#[test]
fn a_real_x86_64_executable_is_named() {
    let exe = std::fs::read("/proc/self/exe").unwrap();
    let e = err(&exe);
    assert!(
        matches!(&e, CodeObjectError::WrongMachine { e_machine: 62, found } if found == "an x86-64 ELF"),
        "{e:?}"
    );
}

#[test]
fn a_real_cuda_cubin_is_named() {
    // nvcc 13.0 -cubin -arch=sm_90 (tests/data/code-objects/regen.sh, end).
    let e = err(&read("cuda/add_one-sm_90.cubin"));
    assert!(
        matches!(e, CodeObjectError::WrongMachine { e_machine: 190, .. }),
        "{e:?}"
    );
    assert_eq!(
        e.to_string(),
        "not an AMDGPU code object: the input is a CUDA cubin (ELF for NVIDIA GPUs) (e_machine 190, expected 224, EM_AMDGPU)"
    );
}

#[test]
fn a_real_cuda_fatbin_is_named() {
    let e = err(&read("cuda/add_one-sm_90.fatbin"));
    assert!(
        matches!(&e, CodeObjectError::UnknownFormat { found } if found == "a CUDA fatbin"),
        "{e:?}"
    );
}

#[test]
fn a_wrong_os_abi_is_named() {
    let mut elf = small();
    elf[7] = 65;
    let e = err(&elf);
    assert!(
        matches!(e, CodeObjectError::WrongOsAbi { os_abi: 65, .. }),
        "{e:?}"
    );
    assert!(e.to_string().contains("ELFOSABI_AMDGPU_PAL"), "{e}");
}

#[test]
fn a_32_bit_or_big_endian_elf_is_named() {
    let mut elf = small();
    elf[4] = 1;
    let e = err(&elf);
    assert!(
        matches!(&e, CodeObjectError::UnknownFormat { found } if found.contains("32-bit")),
        "{e:?}"
    );
    let mut elf = small();
    elf[5] = 2;
    let e = err(&elf);
    assert!(
        matches!(&e, CodeObjectError::UnknownFormat { found } if found.contains("big-endian")),
        "{e:?}"
    );
}

#[test]
fn code_object_v2_is_unsupported() {
    let mut elf = small();
    elf[8] = 0;
    let e = err(&elf);
    assert!(
        matches!(
            e,
            CodeObjectError::UnsupportedVersion { abi_version: 0, .. }
        ),
        "{e:?}"
    );
    assert!(e.to_string().contains("code object v2"), "{e}");
}

#[test]
fn a_relocatable_object_is_not_loadable() {
    let mut elf = small();
    elf[16..18].copy_from_slice(&1u16.to_le_bytes());
    let e = err(&elf);
    assert!(
        matches!(e, CodeObjectError::WrongElfType { e_type: 1, .. }),
        "{e:?}"
    );
    assert!(e.to_string().contains("ET_REL"), "{e}");
}

#[test]
fn an_unknown_processor_in_e_flags_is_named() {
    let mut elf = small();
    elf[48] = 0xee;
    let e = err(&elf);
    assert!(
        matches!(
            e,
            CodeObjectError::TargetId(TargetIdError::UnknownMach { mach: 0xee, .. })
        ),
        "{e:?}"
    );
}

#[test]
fn a_bad_section_header_size_is_named() {
    let mut elf = small();
    elf[58..60].copy_from_slice(&40u16.to_le_bytes());
    let e = err(&elf);
    assert!(
        matches!(&e, CodeObjectError::BadElf { what, offset: 58 } if what.contains("e_shentsize 40")),
        "{e:?}"
    );
}

// ---- metadata ---------------------------------------------------------------------------------

#[test]
fn a_missing_metadata_note_is_named() {
    let mut elf = small();
    let note = metadata_note(&elf);
    elf[note + 8] = 31;
    let e = err(&elf);
    assert!(matches!(e, CodeObjectError::MetadataNoteMissing), "{e:?}");
    assert!(e.to_string().contains("no NT_AMDGPU_METADATA note"), "{e}");
}

#[test]
fn malformed_msgpack_is_named_with_its_offset() {
    let mut elf = small();
    let note = metadata_note(&elf);
    let desc = note + 20;
    let desc_end = desc + u32::from_le_bytes(elf[note + 4..note + 8].try_into().unwrap()) as usize;
    // map32 whose 4-byte count is made of the following key bytes: far more entries than the
    // descriptor holds, so decoding runs off its end.
    elf[desc] = 0xdf;
    let e = err(&elf);
    match &e {
        CodeObjectError::MetadataMalformed { offset, reason } => {
            assert!(
                (desc as u64..=desc_end as u64).contains(offset),
                "{offset:#x}"
            );
            assert!(reason.contains("invalid MessagePack"), "{reason}");
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_metadata_root_that_is_not_a_map_is_named() {
    let mut elf = small();
    let desc = metadata_note(&elf) + 20;
    elf[desc] = 0x93; // fixarray of 3 instead of fixmap of 3
    let e = err(&elf);
    assert!(
        matches!(&e, CodeObjectError::MetadataMalformed { reason, .. } if reason.contains("not a map")),
        "{e:?}"
    );
}

#[test]
fn a_missing_required_kernel_field_is_named() {
    let mut elf = small();
    let key = find(&elf, b".kernarg_segment_size")[0];
    elf[key + 20] = b'X';
    let e = err(&elf);
    match &e {
        CodeObjectError::MetadataFieldMissing { kernel, field } => {
            assert_eq!(kernel.as_deref(), Some("add_one"));
            assert_eq!(field, ".kernarg_segment_size");
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(
        e.to_string(),
        "NT_AMDGPU_METADATA of kernel add_one: required field .kernarg_segment_size is missing"
    );
}

#[test]
fn a_missing_argument_field_is_named_with_its_index() {
    let mut elf = small();
    let key = find(&elf, b".value_kind")[0];
    elf[key + 1] = b'V';
    let e = err(&elf);
    assert!(
        matches!(&e, CodeObjectError::MetadataFieldMissing { field, .. } if field == ".args[0].value_kind"),
        "{e:?}"
    );
}

#[test]
fn a_field_of_the_wrong_type_is_named() {
    let mut elf = small();
    // ".wavefront_size" is followed by a positive fixint (64 = 0x40): make it a string of length 0.
    let key = find(&elf, b".wavefront_size")[0];
    let value = key + ".wavefront_size".len();
    assert_eq!(elf[value], 0x40);
    elf[value] = 0xa0;
    let e = err(&elf);
    assert!(
        matches!(&e, CodeObjectError::MetadataMalformed { reason, .. }
            if reason.contains(".wavefront_size of kernel add_one is not an unsigned 32-bit integer")),
        "{e:?}"
    );
}

#[test]
fn a_kernel_without_its_descriptor_symbol_is_named() {
    let mut elf = small();
    for at in find(&elf, b"add_one.kd\0") {
        elf[at + 9] = b'X';
    }
    let e = err(&elf);
    assert!(
        matches!(e, CodeObjectError::KernelSymbolMissing { .. }),
        "{e:?}"
    );
    assert_eq!(
        e.to_string(),
        "kernel add_one: its kernel descriptor symbol add_one.kd is not in the symbol table"
    );
}

// ---- offload bundles --------------------------------------------------------------------------

/// Offsets of the entry headers of an uncompressed bundle: (header offset, ID).
fn bundle_entries(b: &[u8]) -> Vec<(usize, String)> {
    let n = le64(b, 24) as usize;
    let mut at = 32;
    let mut out = Vec::new();
    for _ in 0..n {
        let id_len = le64(b, at + 16) as usize;
        out.push((
            at,
            String::from_utf8(b[at + 24..at + 24 + id_len].to_vec()).unwrap(),
        ));
        at += 24 + id_len;
    }
    out
}

#[test]
fn a_bundle_entry_past_the_end_is_named() {
    let mut b = read("kernels-gfx90a-gfx1030.hipfb");
    let (at, id) = bundle_entries(&b)
        .into_iter()
        .find(|(_, id)| id.ends_with("gfx90a"))
        .unwrap();
    let near_end = b.len() as u64 - 10;
    b[at..at + 8].copy_from_slice(&near_end.to_le_bytes());
    let e = err_for(&b, "gfx90a");
    match &e {
        CodeObjectError::BadBundle { what, offset } => {
            assert_eq!(*offset, at as u64);
            assert!(
                what.contains(&id) && what.contains("past the end"),
                "{what}"
            );
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_bundle_entry_offset_that_overflows_is_named() {
    let mut b = read("kernels-gfx90a-gfx1030.hipfb");
    let (at, _) = bundle_entries(&b)[1].clone();
    b[at..at + 8].copy_from_slice(&u64::MAX.to_le_bytes());
    let e = err_for(&b, "gfx1030");
    assert!(matches!(e, CodeObjectError::BadBundle { .. }), "{e:?}");
}

#[test]
fn an_impossible_bundle_entry_count_is_named() {
    let mut b = read("kernels-gfx90a-gfx1030.hipfb");
    b[24..32].copy_from_slice(&(1u64 << 40).to_le_bytes());
    let e = err(&b);
    assert!(
        matches!(&e, CodeObjectError::BadBundle { what, offset: 24 } if what.contains("entry count")),
        "{e:?}"
    );
}

#[test]
fn a_bundle_entry_id_past_the_end_is_named() {
    let mut b = read("kernels-gfx90a-gfx1030.hipfb");
    let (at, _) = bundle_entries(&b)[0].clone();
    b[at + 16..at + 24].copy_from_slice(&(1u64 << 32).to_le_bytes());
    assert_truncated(&err(&b), "offload bundle entry 0 (ID)");
}

#[test]
fn a_bundle_entry_that_is_not_an_elf_is_named() {
    let mut b = read("kernels-gfx90a-gfx1030.hipfb");
    let entries = bundle_entries(&b);
    let (at, _) = entries
        .iter()
        .find(|(_, id)| id.ends_with("gfx1030"))
        .unwrap();
    let offset = le64(&b, *at) as usize;
    b[offset..offset + 4].copy_from_slice(b"PK\x03\x04");
    let e = err_for(&b, "gfx1030");
    assert!(
        matches!(&e, CodeObjectError::BadBundle { what, .. } if what.contains("a zip archive")),
        "{e:?}"
    );
}

#[test]
fn a_bundle_entry_with_a_bad_target_id_is_named() {
    let mut b = read("kernels-gfx90a-gfx1030.hipfb");
    let entries = bundle_entries(&b);
    let (at, id) = entries
        .iter()
        .find(|(_, id)| id.ends_with("gfx90a"))
        .unwrap();
    let id_at = at + 24 + id.len() - "gfx90a".len();
    b[id_at..id_at + 6].copy_from_slice(b"gfx90q");
    let e = err_for(&b, "gfx1030");
    assert!(
        matches!(&e, CodeObjectError::BadBundle { what, .. } if what.contains("invalid target ID")),
        "{e:?}"
    );
}

// ---- compressed bundles -----------------------------------------------------------------------

/// The uncompressed bundle inside the real v2 CCOB (decompressed here with ruzstd directly) and
/// the truncated MD5 its header stores.
fn ccob_contents() -> (Vec<u8>, u64) {
    let c = read("kernels-gfx942-gfx1100-v2.ccob");
    assert_eq!(&c[..8], b"CCOB\x02\x00\x01\x00", "v2, zstd");
    let hash = le64(&c, 16);
    let mut out = Vec::new();
    ruzstd::decoding::StreamingDecoder::new(&c[24..])
        .unwrap()
        .read_to_end(&mut out)
        .unwrap();
    (out, hash)
}

fn zlib(data: &[u8]) -> Vec<u8> {
    let mut enc = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::default());
    enc.write_all(data).unwrap();
    enc.finish().unwrap()
}

/// A CCOB of the given header version around an already compressed payload.
fn ccob(version: u16, method: u16, uncompressed: u64, hash: u64, payload: &[u8]) -> Vec<u8> {
    let mut out = b"CCOB".to_vec();
    out.extend_from_slice(&version.to_le_bytes());
    out.extend_from_slice(&method.to_le_bytes());
    match version {
        1 => out.extend_from_slice(&(uncompressed as u32).to_le_bytes()),
        2 => {
            out.extend_from_slice(&((24 + payload.len()) as u32).to_le_bytes());
            out.extend_from_slice(&(uncompressed as u32).to_le_bytes());
        }
        _ => {
            out.extend_from_slice(&((32 + payload.len()) as u64).to_le_bytes());
            out.extend_from_slice(&uncompressed.to_le_bytes());
        }
    }
    out.extend_from_slice(&hash.to_le_bytes());
    out.extend_from_slice(payload);
    out
}

#[test]
fn ccob_v1_v2_v3_with_zlib_are_read() {
    let (bundle, hash) = ccob_contents();
    let payload = zlib(&bundle);
    for version in 1..=3 {
        let c = ccob(version, 0, bundle.len() as u64, hash, &payload);
        let co = CodeObject::from_bytes(&c, Some(&TargetId::parse("gfx1100").unwrap()))
            .unwrap_or_else(|e| panic!("v{version}: {e}"));
        assert_eq!(co.target_id().processor(), "gfx1100");
    }
}

#[test]
fn ccob_v1_with_zstd_is_read() {
    let (bundle, hash) = ccob_contents();
    let payload =
        ruzstd::encoding::compress_to_vec(&bundle[..], ruzstd::encoding::CompressionLevel::Fastest);
    let c = ccob(1, 1, bundle.len() as u64, hash, &payload);
    let co = CodeObject::from_bytes(&c, Some(&TargetId::parse("gfx942").unwrap())).unwrap();
    assert_eq!(co.target_id().processor(), "gfx942");
}

#[test]
fn a_ccob_total_size_beyond_the_input_is_named() {
    let mut c = read("kernels-gfx942-gfx1100-v2.ccob");
    let len = c.len() as u32;
    c[8..12].copy_from_slice(&(len + 1).to_le_bytes());
    let e = err(&c);
    assert!(
        matches!(&e, CodeObjectError::BadCompressedBundle { what, offset: 8 } if what.contains("larger than")),
        "{e:?}"
    );
}

#[test]
fn a_ccob_total_size_below_the_header_is_named() {
    let mut c = read("kernels-gfx942-gfx1100-v3.ccob");
    c[8..16].copy_from_slice(&8u64.to_le_bytes());
    let e = err(&c);
    assert!(
        matches!(&e, CodeObjectError::BadCompressedBundle { what, .. } if what.contains("smaller than the 32-byte v3 header")),
        "{e:?}"
    );
}

#[test]
fn a_wrong_ccob_uncompressed_size_is_named() {
    let mut c = read("kernels-gfx942-gfx1100-v2.ccob");
    let size = u32::from_le_bytes(c[12..16].try_into().unwrap());
    for wrong in [size - 1, size + 1] {
        c[12..16].copy_from_slice(&wrong.to_le_bytes());
        let e = err(&c);
        assert!(
            matches!(&e, CodeObjectError::BadCompressedBundle { what, offset: 12 } if what.contains(&format!("header says {wrong} uncompressed bytes"))),
            "{e:?}"
        );
    }
}

#[test]
fn a_huge_ccob_uncompressed_size_is_refused_before_decompressing() {
    let mut c = read("kernels-gfx942-gfx1100-v3.ccob");
    c[16..24].copy_from_slice(&(1u64 << 40).to_le_bytes());
    let e = err(&c);
    assert!(
        matches!(&e, CodeObjectError::BadCompressedBundle { what, offset: 16 } if what.contains("exceeds")),
        "{e:?}"
    );
}

#[test]
fn an_unknown_ccob_method_is_named() {
    let mut c = read("kernels-gfx942-gfx1100-v2.ccob");
    c[6] = 7;
    let e = err(&c);
    assert!(
        matches!(e, CodeObjectError::UnknownCompressionMethod { method: 7 }),
        "{e:?}"
    );
}

#[test]
fn an_unknown_ccob_version_is_named() {
    let mut c = read("kernels-gfx942-gfx1100-v2.ccob");
    c[4] = 4;
    let e = err(&c);
    assert!(
        matches!(
            e,
            CodeObjectError::UnsupportedCompressedVersion { version: 4 }
        ),
        "{e:?}"
    );
}

#[test]
fn a_corrupt_ccob_payload_is_named() {
    let mut c = read("kernels-gfx942-gfx1100-v2.ccob");
    c[24..28].copy_from_slice(b"junk");
    let e = err(&c);
    assert!(
        matches!(e, CodeObjectError::Decompress { method: "zstd", .. }),
        "{e:?}"
    );
    let (bundle, hash) = ccob_contents();
    let mut payload = zlib(&bundle);
    payload[0] ^= 0xff;
    let e = err(&ccob(3, 0, bundle.len() as u64, hash, &payload));
    assert!(
        matches!(e, CodeObjectError::Decompress { method: "zlib", .. }),
        "{e:?}"
    );
}

#[test]
fn a_wrong_ccob_hash_is_named() {
    let mut c = read("kernels-gfx942-gfx1100-v2.ccob");
    c[16] ^= 1;
    let e = err(&c);
    assert!(matches!(e, CodeObjectError::HashMismatch { .. }), "{e:?}");
    assert!(e.to_string().contains("hash mismatch"), "{e}");
}

#[test]
fn a_truncated_ccob_header_is_named() {
    let c = read("kernels-gfx942-gfx1100-v3.ccob");
    assert_truncated(&err(&c[..20]), "CCOB v3 uncompressed size");
}

#[test]
fn a_ccob_holding_something_else_than_a_bundle_is_named() {
    // MD5("abc") = 900150983cd24fb0d6963f7d28e17f72 (RFC 1321): its first 8 bytes, little-endian.
    let c = ccob(3, 0, 3, 0xb04f_d23c_9850_0190, &zlib(b"abc"));
    let e = err(&c);
    assert!(
        matches!(&e, CodeObjectError::BadCompressedBundle { what, .. } if what.contains("not an offload bundle but text")),
        "{e:?}"
    );
}

// ---- other formats ----------------------------------------------------------------------------

#[test]
fn other_formats_are_named() {
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    gz.write_all(&small()).unwrap();
    let gz = gz.finish().unwrap();
    let source = read("single.hip");
    let cases: [(&[u8], &str); 6] = [
        (
            b"PK\x05\x06\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0",
            "an empty zip archive",
        ),
        (b"PK\x03\x04\x14\0\0\0", "a zip archive"),
        (&gz, "gzip-compressed data"),
        (b"!<arch>\nlibfoo.o/", "an ar archive (a static library)"),
        (&source, "source text"),
        (b"hello\n", "text (starting \"hello\")"),
    ];
    for (bytes, expected) in cases {
        let e = err(bytes);
        match &e {
            CodeObjectError::UnknownFormat { found } => {
                assert!(found.starts_with(expected), "{found:?} vs {expected:?}")
            }
            other => panic!("{expected}: {other:?}"),
        }
        assert!(e
            .to_string()
            .starts_with("not an AMDGPU code object or offload bundle: the input is "));
    }
    let e = err(&[0x00, 0x01, 0x02, 0xff]);
    assert!(
        e.to_string()
            .contains("unrecognised binary data (first bytes 00 01 02 ff)"),
        "{e}"
    );
}

#[test]
fn without_section_headers_the_note_comes_from_pt_note_and_symbols_are_missing() {
    // e_shoff = 0, e_shnum = 0: the metadata is still found through the PT_NOTE segment, but
    // the kernel descriptor symbols cannot be, which is reported.
    let mut elf = small();
    elf[40..48].copy_from_slice(&0u64.to_le_bytes());
    elf[60..62].copy_from_slice(&0u16.to_le_bytes());
    let e = err(&elf);
    assert!(
        matches!(e, CodeObjectError::KernelSymbolMissing { .. }),
        "{e:?}"
    );
}
